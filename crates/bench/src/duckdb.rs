//! DuckDB as a peer measured in the same run: the same data (exported column by column from numadb's tables),
//! the same queries, the same number of threads, timed by DuckDB's Python package.
//!
//! Data travels as raw little-endian integer files read with NumPy, which DuckDB queries directly: identical data,
//! so both systems must also return identical answers, which the benchmarks check.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use numadb_storage::bitpack::BLOCK_ROWS;
use numadb_storage::{ColumnData, DataType, Table};
use serde::{Deserialize, Serialize};

/// A Python interpreter that can import duckdb and numpy.
#[derive(Debug, Clone)]
pub struct DuckDb {
    pub(crate) python: PathBuf,
    /// DuckDB's version.
    pub version: String,
}

/// Why DuckDB could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// No Python with duckdb and numpy.
    #[error("DuckDB is not available: {0}")]
    Unavailable(String),
    /// Exporting or running failed.
    #[error("DuckDB run failed: {0}")]
    Failed(String),
}

/// One query to time.
#[derive(Debug, Clone, Serialize)]
pub struct PeerQuery {
    /// A label for reports.
    pub label: String,
    /// The SQL.
    pub sql: String,
    /// Untimed runs before the timed ones (at least one: its rows are the answer compared).
    pub warmups: usize,
    /// Timed runs (after the warm-up runs).
    pub repetitions: usize,
}

/// What DuckDB did with one query.
#[derive(Debug, Clone, Deserialize)]
pub struct PeerTiming {
    /// The label.
    pub label: String,
    /// Seconds per timed run.
    pub seconds: Vec<f64>,
    /// The result rows of the warm-up run (integers as numbers).
    pub rows: Vec<Vec<serde_json::Value>>,
}

const RUNNER: &str = r#"
import json, sys, time
import duckdb, numpy as np
spec = json.load(open(sys.argv[1]))
con = duckdb.connect()
con.execute(f"SET threads = {spec['threads']}")
for table in spec["tables"]:
    arrays = {name: np.fromfile(path, dtype=dtype) for name, path, dtype in table["columns"]}
    con.register("source_arrays", arrays)
    con.execute(f'CREATE TABLE "{table["name"]}" AS SELECT * FROM source_arrays')
    con.unregister("source_arrays")
    del arrays
out = []
for q in spec["queries"]:
    rows = con.execute(q["sql"]).fetchall()
    for _ in range(q["warmups"] - 1):
        con.execute(q["sql"]).fetchall()
    seconds = []
    for _ in range(q["repetitions"]):
        started = time.perf_counter()
        con.execute(q["sql"]).fetchall()
        seconds.append(time.perf_counter() - started)
    out.append({"label": q["label"], "seconds": seconds, "rows": [[int(v) if isinstance(v, int) else v for v in r] for r in rows]})
json.dump(out, open(sys.argv[2], "w"))
"#;

/// What a benchmark's DuckDB step came to: its version (when found), why it did not run (when it did not), and
/// its timings, one per query in order (empty when it did not run).
#[derive(Debug, Default)]
pub struct PeerRun {
    /// DuckDB's version.
    pub version: Option<String>,
    /// Why DuckDB did not run.
    pub unavailable: Option<String>,
    /// One per query.
    pub results: Vec<PeerTiming>,
}

/// Runs `queries` in DuckDB over the tables of `database` named `tables` with `threads` threads, if DuckDB can be
/// found; reports the step through `progress`. Fails only for a missing table: what went wrong with DuckDB is in
/// [`PeerRun::unavailable`].
pub fn run_peer(
    database: &numadb_sql::Database,
    tables: &[&str],
    threads: usize,
    queries: &[PeerQuery],
    progress: &mut dyn FnMut(&str),
) -> Result<PeerRun, String> {
    let tables = tables
        .iter()
        .map(|name| database.catalog().table(name).ok_or_else(|| format!("{name} is missing")))
        .collect::<Result<Vec<_>, _>>()?;
    let duckdb = match DuckDb::find() {
        Ok(duckdb) => duckdb,
        Err(error) => return Ok(PeerRun { unavailable: Some(error.to_string()), ..PeerRun::default() }),
    };
    progress(&format!("DuckDB {}: loading the same data and running the same queries", duckdb.version));
    let mut run = PeerRun { version: Some(duckdb.version.clone()), ..PeerRun::default() };
    let tables: Vec<&Table> = tables.iter().map(|t| &**t).collect();
    match duckdb.run(&tables, threads, queries) {
        Ok(results) => run.results = results,
        Err(error) => run.unavailable = Some(error.to_string()),
    }
    Ok(run)
}

impl DuckDb {
    /// Finds a Python with duckdb and numpy: `NUMADB_PYTHON`, the project's `.venv`, or `python3`.
    pub fn find() -> Result<Self, PeerError> {
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Ok(python) = std::env::var("NUMADB_PYTHON") {
            candidates.push(python.into());
        }
        candidates.push(PathBuf::from(".venv/bin/python"));
        candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"));
        candidates.push("python3".into());
        for python in candidates {
            let output = Command::new(&python).args(["-c", "import duckdb, numpy; print(duckdb.__version__)"]).output();
            if let Ok(output) = output
                && output.status.success()
            {
                let version = String::from_utf8_lossy(&output.stdout).trim().to_string();
                return Ok(DuckDb { python, version });
            }
        }
        Err(PeerError::Unavailable(
            "no Python with the duckdb and numpy packages (make deps installs them into .venv)".into(),
        ))
    }

    /// Loads `tables` into a fresh in-memory DuckDB with `threads` threads, runs `queries`, and returns the
    /// timings and first results.
    pub fn run(&self, tables: &[&Table], threads: usize, queries: &[PeerQuery]) -> Result<Vec<PeerTiming>, PeerError> {
        // A directory of its own per call, removed when it drops.
        let directory = tempfile::Builder::new()
            .prefix("numadb-duckdb-")
            .tempdir()
            .map_err(|e| PeerError::Failed(format!("creating a temporary directory: {e}")))?;
        self.run_in(directory.path(), tables, threads, queries)
    }

    fn run_in(
        &self,
        directory: &Path,
        tables: &[&Table],
        threads: usize,
        queries: &[PeerQuery],
    ) -> Result<Vec<PeerTiming>, PeerError> {
        let mut table_specs = Vec::new();
        for table in tables {
            let columns = export_table(table, directory).map_err(PeerError::Failed)?;
            table_specs.push(serde_json::json!({ "name": table.name(), "columns": columns }));
        }
        let spec = serde_json::json!({ "threads": threads, "tables": table_specs, "queries": queries });
        let spec_path = directory.join("spec.json");
        let out_path = directory.join("out.json");
        let script_path = directory.join("runner.py");
        std::fs::write(&spec_path, spec.to_string()).map_err(|e| PeerError::Failed(e.to_string()))?;
        std::fs::write(&script_path, RUNNER).map_err(|e| PeerError::Failed(e.to_string()))?;
        let output = Command::new(&self.python)
            .arg(&script_path)
            .arg(&spec_path)
            .arg(&out_path)
            .output()
            .map_err(|e| PeerError::Failed(e.to_string()))?;
        if !output.status.success() {
            return Err(PeerError::Failed(String::from_utf8_lossy(&output.stderr).to_string()));
        }
        let text = std::fs::read_to_string(&out_path).map_err(|e| PeerError::Failed(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| PeerError::Failed(e.to_string()))
    }
}

/// Writes every column of a table (integers only) as a raw little-endian file; returns
/// `(column name, path, numpy dtype)` per column.
pub(crate) fn export_table(table: &Table, directory: &Path) -> Result<Vec<(String, String, String)>, String> {
    let snapshot = table.snapshot();
    if snapshot.delta.rows() > 0 {
        return Err(format!("table {} has unsealed rows; seal it first", table.name()));
    }
    let mut out = Vec::new();
    for (c, definition) in table.columns().iter().enumerate() {
        let (width, dtype) = match definition.data_type {
            DataType::Integer => (4, "<i4"),
            DataType::BigInt => (8, "<i8"),
            other => return Err(format!("exporting {other} columns is not supported")),
        };
        let path = directory.join(format!("{}.{}.raw", table.name(), definition.name));
        let file = std::fs::File::create(&path).map_err(|e| e.to_string())?;
        let mut writer = std::io::BufWriter::with_capacity(1 << 20, file);
        let mut block = [0i64; BLOCK_ROWS];
        for partition in &snapshot.partitions {
            let chunk = partition.column(c);
            if chunk.has_nulls() {
                return Err(format!("column {} has NULLs, which raw export cannot carry", definition.name));
            }
            let ColumnData::Int(ints) = chunk.data() else { return Err("not an integer column".into()) };
            for b in 0..partition.blocks() {
                ints.decode_block(b, &mut block);
                let rows = (partition.rows() - b * BLOCK_ROWS).min(BLOCK_ROWS);
                for &value in &block[..rows] {
                    let bytes = value.to_le_bytes();
                    writer.write_all(&bytes[..width]).map_err(|e| e.to_string())?;
                }
            }
        }
        writer.flush().map_err(|e| e.to_string())?;
        out.push((definition.name.clone(), path.display().to_string(), dtype.to_string()));
    }
    Ok(out)
}
