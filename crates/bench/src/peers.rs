//! Peers measured in the same run as numadb's experiments: the same workloads (`driver::Workload`), the same number
//! of client connections, the same warm-up and stop rule, on identical data. A throughput figure for numadb means
//! little on its own; beside DuckDB's and PostgreSQL's on this machine, with these tables, it says where numadb
//! stands.
//!
//! **Identical data.** The peers are loaded from numadb's own tables (their decoded blocks), never regenerated, and
//! each load is checked: the peer's row count and per-column sums must equal numadb's before anything is measured.
//! Each workload's statement is also run once (random access with a fixed key) and its rows are kept in
//! [`PeerRuns::answers`], so a caller can check that the peer answers what numadb answers
//! ([`PeerRuns::disagreements_with`]); rows are compared sorted, because neither peer promises an order for the
//! aggregation's `UNION ALL`.
//!
//! **DuckDB** ([`duckdb`]) runs in-process in its Python package: the raw columns are loaded once into one in-memory
//! database (the primary key declared, so point lookups use DuckDB's ART index) with `SET threads` = the CPUs this
//! process may use, and each connection is a Python thread with its own `con.cursor()`. DuckDB releases the GIL
//! while it executes, so the threads' queries do run concurrently; what runs under the GIL (the Python loop, binding
//! the key, converting the result) is part of DuckDB's number, and so is planning: the Python API has no handle to
//! a prepared statement, so `execute` prepares the statement every time, which numadb's and PostgreSQL's clients
//! do once. Keys come from the driver's xorshift generator with the driver's seeding, so they are the same
//! sequence. Latencies are measured in Python and put into the same HdrHistogram as the driver's.
//!
//! **PostgreSQL** ([`postgres`](crate::postgres)) is driven over the wire by the driver itself (`Target::Wire`), with prepared
//! statements, exactly as a `numadb serve` would be. The tables are (re)created and filled with `COPY … FROM
//! STDIN` only when the server's copy differs from numadb's, then frozen and analysed (`VACUUM (FREEZE,
//! ANALYZE)`), so that the measured phase does not pay for hint bits or plan without statistics. Server settings
//! are left as the server has them (`max_parallel_workers_per_gather` included, 2 by default); the ones that
//! matter are reported in the progress lines.
//!
//! [`crate::postgres::TempPostgres`] starts a throwaway PostgreSQL cluster (tests, and comparisons when no server is
//! given).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use numadb_storage::bitpack::BLOCK_ROWS;
use numadb_storage::{ColumnData, DataType, Table, Value};
use serde::{Deserialize, Serialize};

use crate::driver::{self, RunResult, RunSpec, Stop, Target, Workload};
use crate::duckdb::{DuckDb, export_table};
use crate::experiment::PeerCell;

/// How the peers' clients run: a driver [`RunSpec`] without its workload.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Clients {
    /// Client connections (at least one is used).
    pub connections: usize,
    /// Unmeasured warm-up before each workload.
    pub warmup: Duration,
    /// End of each measured phase.
    pub stop: Stop,
    /// Seed of the random keys.
    pub seed: u64,
}

impl Clients {
    /// The driver's run of one workload with these clients.
    pub fn spec(&self, workload: &Workload) -> RunSpec {
        RunSpec {
            workload: workload.clone(),
            connections: self.connections.max(1),
            warmup: self.warmup,
            stop: self.stop,
            seed: self.seed,
        }
    }
}

/// A result row with integers only (`None` for NULL): what the thesis workloads return.
pub type Row = Vec<Option<i64>>;

/// A peer's answer to one workload's statement.
#[derive(Debug, Clone, Serialize)]
pub struct Answer {
    /// The workload.
    pub workload: Workload,
    /// The statement as run (random access with its key written in: see [`answer_sql`]).
    pub sql: String,
    /// The rows, or the peer's error.
    pub rows: Result<Vec<Row>, String>,
}

/// What one peer did with the workloads.
#[derive(Debug, Clone, Serialize)]
pub struct PeerRuns {
    /// The peer and its version (`DuckDB 1.2.0 (Python, 8 threads)`, `PostgreSQL 15.8`), or its name alone when it
    /// could not be reached.
    pub peer: String,
    /// One cell per workload, in the order given; a workload the peer could not run has the reason.
    pub cells: Vec<PeerCell>,
    /// The peer's answer to each workload's statement, in the same order (empty when the peer did not get as far).
    pub answers: Vec<Answer>,
}

impl PeerRuns {
    /// Every workload failed for the same reason.
    fn failed(peer: &str, workloads: &[Workload], reason: String) -> Self {
        PeerRuns {
            peer: peer.to_string(),
            cells: workloads
                .iter()
                .map(|w| PeerCell { peer: peer.to_string(), workload: w.clone(), run: Err(reason.clone()) })
                .collect(),
            answers: Vec::new(),
        }
    }

    /// The cells alone.
    pub fn into_cells(self) -> Vec<PeerCell> {
        self.cells
    }

    /// Where the peer's answers differ from `expected`'s (given each answer's SQL), one line each; empty when they
    /// agree. Rows are compared as sorted lists.
    pub fn disagreements(&self, mut expected: impl FnMut(&str) -> Result<Vec<Row>, String>) -> Vec<String> {
        let mut out = Vec::new();
        for answer in &self.answers {
            let label = answer.workload.label();
            match (&answer.rows, expected(&answer.sql)) {
                (Ok(theirs), Ok(ours)) => {
                    let (mut theirs, mut ours) = (theirs.clone(), ours);
                    theirs.sort();
                    ours.sort();
                    if theirs != ours {
                        out.push(format!("{label}: {} answered {theirs:?}, numadb {ours:?}", self.peer));
                    }
                }
                (Err(e), _) => out.push(format!("{label}: {} failed: {e}", self.peer)),
                (_, Err(e)) => out.push(format!("{label}: numadb failed: {e}")),
            }
        }
        out
    }

    /// [`PeerRuns::disagreements`] with numadb's answers from an in-process session.
    pub fn disagreements_with(&self, session: &mut numadb_sql::Session) -> Vec<String> {
        self.disagreements(|sql| numadb_rows(session, sql))
    }
}

/// numadb's rows for a statement, in the form peers' answers take.
pub fn numadb_rows(session: &mut numadb_sql::Session, sql: &str) -> Result<Vec<Row>, String> {
    let output = session.execute_one(sql).map_err(|e| format!("{}: {}", e.sqlstate, e.message))?;
    output
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|value| match value {
                    Value::Null => Ok(None),
                    Value::Int(v) => Ok(Some(*v)),
                    other => Err(format!("{other} is not an integer")),
                })
                .collect()
        })
        .collect()
}

/// A workload's statement with its parameter written in: random access looks up the middle key.
pub fn answer_sql(workload: &Workload) -> String {
    match workload {
        Workload::RandomAccess { rows } => workload.sql().replace("$1", &rows.div_ceil(2).max(1).to_string()),
        Workload::Aggregation { .. } => workload.sql(),
    }
}

/// The driver's summary of a run from its raw counts, so that peers measured outside the driver report exactly
/// what it reports (the same histogram bounds and percentiles, the same per-second statistics).
fn run_result(
    queries: u64,
    errors: u64,
    first_error: Option<String>,
    seconds: f64,
    per_second: Vec<u64>,
    latencies_us: &[u64],
) -> Result<RunResult, String> {
    let mut histogram = crate::driver::latency_histogram();
    for &micros in latencies_us {
        histogram.record(micros.clamp(1, 60_000_000)).map_err(|e| e.to_string())?;
    }
    Ok(crate::driver::summarise(queries, errors, first_error, seconds, per_second, &histogram))
}

/// `"name"` with embedded quotes doubled.
fn quote(identifier: &str) -> String {
    format!("\"{}\"", identifier.replace('"', "\"\""))
}

/// `CREATE TABLE` for a table's columns (integers only), optionally declaring its primary key.
fn create_table_sql(table: &Table, with_primary_key: bool) -> Result<String, String> {
    let mut columns = Vec::new();
    for (c, definition) in table.columns().iter().enumerate() {
        let sql_type = match definition.data_type {
            DataType::Integer => "INTEGER",
            DataType::BigInt => "BIGINT",
            other => return Err(format!("{}: {other} columns cannot be given to a peer", table.name())),
        };
        let key = if with_primary_key && table.primary_key() == Some(c) { " PRIMARY KEY" } else { "" };
        columns.push(format!("{} {sql_type}{key}", quote(&definition.name)));
    }
    Ok(format!("CREATE TABLE {} ({})", quote(table.name()), columns.join(", ")))
}

/// Row count and the sum of every column: what a peer's copy of a table must reproduce.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint {
    rows: u64,
    sums: Vec<i128>,
}

impl Fingerprint {
    /// numadb's fingerprint of a table.
    fn of(table: &Table) -> Result<Self, String> {
        let mut sums = vec![0i128; table.columns().len()];
        let rows = for_each_row(table, |row| {
            for (sum, value) in sums.iter_mut().zip(row) {
                *sum += i128::from(value.unwrap_or(0));
            }
            Ok(())
        })?;
        Ok(Fingerprint { rows, sums })
    }

    /// The query that computes the fingerprint in SQL: `count(*)`, then `sum` of each column.
    fn sql(table: &Table) -> String {
        let sums: Vec<String> = table.columns().iter().map(|c| format!("sum({})", quote(&c.name))).collect();
        format!("SELECT count(*), {} FROM {}", sums.join(", "), quote(table.name()))
    }

    /// A fingerprint from the fingerprint query's one row (a NULL sum, of no rows, is 0).
    fn from_row(row: &[Option<i128>]) -> Result<Self, String> {
        let (count, sums) = row.split_first().ok_or("the fingerprint query returned no columns")?;
        let rows = count.ok_or("count(*) was NULL")?;
        Ok(Fingerprint {
            rows: u64::try_from(rows).map_err(|_| format!("count(*) was {rows}"))?,
            sums: sums.iter().map(|s| s.unwrap_or(0)).collect(),
        })
    }
}

/// Calls `visit` with every row of a table (sealed partitions decoded block by block, then the unsealed rows);
/// returns the number of rows.
fn for_each_row(table: &Table, mut visit: impl FnMut(&[Option<i64>]) -> Result<(), String>) -> Result<u64, String> {
    let snapshot = table.snapshot();
    let width = table.columns().len();
    let mut blocks = vec![[0i64; BLOCK_ROWS]; width];
    let mut row = vec![None; width];
    let mut rows = 0u64;
    for partition in &snapshot.partitions {
        let mut ints = Vec::with_capacity(width);
        for c in 0..width {
            match partition.column(c).data() {
                ColumnData::Int(column) => ints.push(column),
                _ => return Err(format!("{}: column {} is not an integer column", table.name(), c)),
            }
        }
        for b in 0..partition.blocks() {
            for (column, block) in ints.iter().zip(blocks.iter_mut()) {
                column.decode_block(b, block);
            }
            let in_block = (partition.rows() - b * BLOCK_ROWS).min(BLOCK_ROWS);
            for r in 0..in_block {
                for ((value, block), chunk) in row.iter_mut().zip(&blocks).zip(partition.columns()) {
                    *value = (!chunk.is_null(b * BLOCK_ROWS + r)).then_some(block[r]);
                }
                visit(&row)?;
            }
            rows += in_block as u64;
        }
    }
    let delta = &snapshot.delta;
    for r in 0..delta.rows() {
        for (c, value) in row.iter_mut().enumerate() {
            *value = match delta.column(c).get(r) {
                Some(Value::Int(v)) => Some(*v),
                Some(Value::Null) | None => None,
                Some(other) => return Err(format!("{}: {other} is not an integer", table.name())),
            };
        }
        visit(&row)?;
        rows += 1;
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------------------------
// DuckDB

/// The DuckDB runner: loads the tables once, then runs every workload with N threads, one cursor each, in the
/// driver's phases (start barrier, warm-up until told, measure barrier, measured phase sampled every second).
const DUCKDB_RUNNER: &str = r#"
import json, os, sys, threading, time
from array import array
import duckdb, numpy as np

MASK = (1 << 64) - 1


def rows_of(result):
    return [[None if v is None else int(v) for v in row] for row in result]


def run_workload(con, index, workload, spec, out_dir):
    n = spec["connections"]
    sql = workload["sql"].replace("$1", "?")
    rows = workload["rows"]
    limit = spec["queries_per_connection"]
    duration = spec["duration_s"]
    try:
        answer = {"rows": rows_of(con.execute(workload["answer_sql"]).fetchall())}
    except Exception as e:
        answer = {"error": str(e)}
    cursors = [con.cursor() for _ in range(n)]
    completed = [0] * n
    failed = [0] * n
    first_error = []
    latencies = [array("Q") for _ in range(n)]
    measuring = threading.Event()
    finished = threading.Event()
    start = threading.Barrier(n + 1)
    measure = threading.Barrier(n + 1)

    def client(i):
        cursor = cursors[i]
        # The driver's generator and seeding: the same key sequence per connection.
        state = (spec["seed"] ^ (((i + 1) * 0x9E3779B97F4A7C15) & MASK)) | 1

        def params():
            nonlocal state
            state ^= (state << 13) & MASK
            state ^= state >> 7
            state ^= (state << 17) & MASK
            return [state % rows + 1] if rows > 0 else None

        start.wait()
        while not measuring.is_set():
            try:
                cursor.execute(sql, params()).fetchall()
            except Exception:
                pass
        measure.wait()
        sent = 0
        mine = latencies[i]
        while not finished.is_set() and (limit is None or sent < limit):
            started = time.perf_counter_ns()
            try:
                cursor.execute(sql, params()).fetchall()
                mine.append(max(1, (time.perf_counter_ns() - started) // 1000))
                completed[i] += 1
            except Exception as e:
                failed[i] += 1
                if not first_error:
                    first_error.append(str(e))
            sent += 1

    workers = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(n)]
    for worker in workers:
        worker.start()
    start.wait()
    time.sleep(spec["warmup_s"])
    measuring.set()
    measure.wait()
    started = time.perf_counter()
    per_second = []
    last = 0
    next_tick = started + 1.0
    while True:
        now = time.perf_counter()
        if duration is not None:
            done = now - started >= duration
        else:
            done = sum(completed) + sum(failed) >= limit * n
        if now >= next_tick:
            count = sum(completed)
            per_second.append(count - last)
            last = count
            next_tick += 1.0
        if done:
            break
        time.sleep(max(0.0, min(0.002, next_tick - time.perf_counter())))
    seconds = time.perf_counter() - started
    finished.set()
    for worker in workers:
        worker.join()
    for cursor in cursors:
        cursor.close()
    everything = array("Q")
    for mine in latencies:
        everything.extend(mine)
    path = os.path.join(out_dir, f"latencies-{index}.u64")
    with open(path, "wb") as f:
        everything.tofile(f)
    return {
        "queries": sum(completed),
        "errors": sum(failed),
        "first_error": first_error[0] if first_error else None,
        "seconds": seconds,
        "per_second": per_second,
        "latencies": path,
        "answer": answer,
    }


def main():
    spec = json.load(open(sys.argv[1]))
    out_dir = sys.argv[2]
    threads = len(os.sched_getaffinity(0))
    con = duckdb.connect()
    con.execute(f"SET threads = {threads}")
    fingerprints = {}
    for table in spec["tables"]:
        print(f"loading {table['name']}", flush=True)
        arrays = {name: np.fromfile(path, dtype=dtype) for name, path, dtype in table["columns"]}
        con.register("source_arrays", arrays)
        con.execute(table["create"])
        con.execute(f"INSERT INTO {table['quoted']} SELECT * FROM source_arrays")
        con.unregister("source_arrays")
        del arrays
        fingerprints[table["name"]] = rows_of(con.execute(table["fingerprint"]).fetchall())[0]
    results = []
    for index, workload in enumerate(spec["workloads"]):
        print(workload["label"], flush=True)
        results.append(run_workload(con, index, workload, spec, out_dir))
    out = {"threads": threads, "fingerprints": fingerprints, "workloads": results}
    with open(os.path.join(out_dir, "out.json"), "w") as f:
        json.dump(out, f)


main()
"#;

#[derive(Deserialize)]
struct DuckDbOut {
    threads: usize,
    fingerprints: BTreeMap<String, Vec<Option<i128>>>,
    workloads: Vec<DuckDbWorkloadOut>,
}

#[derive(Deserialize)]
struct DuckDbWorkloadOut {
    queries: u64,
    errors: u64,
    first_error: Option<String>,
    seconds: f64,
    per_second: Vec<u64>,
    latencies: PathBuf,
    answer: DuckDbAnswer,
}

#[derive(Deserialize)]
struct DuckDbAnswer {
    rows: Option<Vec<Row>>,
    error: Option<String>,
}

/// Runs the workloads against DuckDB (its Python package, found by [`DuckDb::find`]) on a copy of `tables`, with
/// the same clients as numadb's run. `progress` gets a line per step. Never fails as a whole: when DuckDB is missing
/// or breaks, every cell says why.
pub fn duckdb(
    tables: &[&Table],
    workloads: &[Workload],
    clients: &Clients,
    mut progress: impl FnMut(String),
) -> PeerRuns {
    let found = match DuckDb::find() {
        Ok(found) => found,
        Err(error) => return PeerRuns::failed("DuckDB", workloads, error.to_string()),
    };
    let directory = match tempfile::Builder::new().prefix("numadb-duckdb-peer-").tempdir() {
        Ok(directory) => directory,
        Err(error) => {
            return PeerRuns::failed("DuckDB", workloads, format!("creating a temporary directory: {error}"));
        }
    };
    let peer = format!("DuckDB {}", found.version);
    match run_duckdb(&found, directory.path(), tables, workloads, clients, &mut progress) {
        Ok(runs) => runs,
        Err(error) => PeerRuns::failed(&peer, workloads, error),
    }
}

fn run_duckdb(
    found: &DuckDb,
    directory: &Path,
    tables: &[&Table],
    workloads: &[Workload],
    clients: &Clients,
    progress: &mut dyn FnMut(String),
) -> Result<PeerRuns, String> {
    let peer = format!("DuckDB {}", found.version);
    let mut table_specs = Vec::new();
    let mut expected = BTreeMap::new();
    for table in tables {
        progress(format!("{peer}: exporting {}", table.name()));
        let columns = export_table(table, directory)?;
        table_specs.push(serde_json::json!({
            "name": table.name(),
            "quoted": quote(table.name()),
            "columns": columns,
            "create": create_table_sql(table, true)?,
            "fingerprint": Fingerprint::sql(table),
        }));
        expected.insert(table.name().to_string(), Fingerprint::of(table)?);
    }
    let workload_specs: Vec<serde_json::Value> = workloads
        .iter()
        .map(|workload| {
            let rows = match workload {
                Workload::RandomAccess { rows } => *rows,
                Workload::Aggregation { .. } => 0,
            };
            serde_json::json!({
                "label": workload.label(),
                "sql": workload.sql(),
                "answer_sql": answer_sql(workload),
                "rows": rows,
            })
        })
        .collect();
    let (duration_s, queries_per_connection) = match clients.stop {
        Stop::Duration(duration) => (Some(duration.as_secs_f64()), None),
        Stop::QueriesPerConnection(queries) => (None, Some(queries)),
    };
    let spec = serde_json::json!({
        "tables": table_specs,
        "workloads": workload_specs,
        "connections": clients.connections.max(1),
        "warmup_s": clients.warmup.as_secs_f64(),
        "duration_s": duration_s,
        "queries_per_connection": queries_per_connection,
        "seed": clients.seed,
    });
    let spec_path = directory.join("spec.json");
    let script_path = directory.join("runner.py");
    let stderr_path = directory.join("stderr.txt");
    std::fs::write(&spec_path, spec.to_string()).map_err(|e| format!("writing {}: {e}", spec_path.display()))?;
    std::fs::write(&script_path, DUCKDB_RUNNER).map_err(|e| format!("writing {}: {e}", script_path.display()))?;
    let stderr = std::fs::File::create(&stderr_path).map_err(|e| format!("{}: {e}", stderr_path.display()))?;
    let mut child = Command::new(&found.python)
        .arg(&script_path)
        .arg(&spec_path)
        .arg(directory)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("starting {}: {e}", found.python.display()))?;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            progress(format!("{peer}: {line}"));
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() {
        let text = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(12).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(format!("the DuckDB runner failed ({status}): {}", tail.join("\n")));
    }
    let out_path = directory.join("out.json");
    let text = std::fs::read_to_string(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let out: DuckDbOut = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let peer = format!("DuckDB {} (Python, {} threads)", found.version, out.threads);
    for (name, fingerprint) in &expected {
        let theirs = out.fingerprints.get(name).ok_or_else(|| format!("DuckDB did not load {name}"))?;
        let theirs = Fingerprint::from_row(theirs)?;
        if &theirs != fingerprint {
            return Err(format!("DuckDB's {name} differs from numadb's: {theirs:?} against {fingerprint:?}"));
        }
    }
    if out.workloads.len() != workloads.len() {
        return Err(format!("the DuckDB runner returned {} workloads of {}", out.workloads.len(), workloads.len()));
    }
    let mut cells = Vec::new();
    let mut answers = Vec::new();
    for (workload, result) in workloads.iter().zip(out.workloads) {
        let run = read_latencies(&result.latencies).and_then(|latencies| {
            run_result(result.queries, result.errors, result.first_error, result.seconds, result.per_second, &latencies)
        });
        cells.push(PeerCell { peer: peer.clone(), workload: workload.clone(), run });
        let rows = match (result.answer.rows, result.answer.error) {
            (Some(rows), _) => Ok(rows),
            (None, error) => Err(error.unwrap_or_else(|| "no answer".into())),
        };
        answers.push(Answer { workload: workload.clone(), sql: answer_sql(workload), rows });
    }
    Ok(PeerRuns { peer, cells, answers })
}

/// Latencies in microseconds, as the runner wrote them (native 64-bit integers; x86 and ARM Linux are
/// little-endian).
fn read_latencies(path: &Path) -> Result<Vec<u64>, String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() % 8 != 0 {
        return Err(format!("{}: {} bytes is not a whole number of latencies", path.display(), bytes.len()));
    }
    Ok(bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8"))).collect())
}

// ---------------------------------------------------------------------------------------------------------------
// PostgreSQL

/// Runs the workloads against the PostgreSQL server at `url`, with the same clients as numadb's run: makes the
/// server's tables equal to `tables` (reloading them only when they differ), then drives each workload with the
/// driver over the wire. Never fails as a whole: when the server cannot be reached or loaded, every cell says why.
pub fn postgres(
    url: &str,
    tables: &[&Table],
    workloads: &[Workload],
    clients: &Clients,
    mut progress: impl FnMut(String),
) -> PeerRuns {
    let mut admin = match postgres::Client::connect(url, postgres::NoTls) {
        Ok(admin) => admin,
        Err(error) => {
            return PeerRuns::failed("PostgreSQL", workloads, format!("connecting to PostgreSQL: {error}"));
        }
    };
    let peer = match show(&mut admin, "server_version") {
        // "15.8 (Debian 15.8-1.pgdg120+1)" → "PostgreSQL 15.8".
        Ok(version) => format!("PostgreSQL {}", version.split_whitespace().next().unwrap_or("?")),
        Err(error) => return PeerRuns::failed("PostgreSQL", workloads, error),
    };
    let settings: Vec<String> = ["max_parallel_workers_per_gather", "shared_buffers", "work_mem", "jit"]
        .iter()
        .map(|name| format!("{name} = {}", show(&mut admin, name).unwrap_or_else(|e| e)))
        .collect();
    progress(format!("{peer}: {}", settings.join(", ")));
    for table in tables {
        if let Err(error) = ensure_table(&mut admin, table, &peer, &mut progress) {
            return PeerRuns::failed(&peer, workloads, error);
        }
    }
    let answers = workloads
        .iter()
        .map(|workload| {
            let sql = answer_sql(workload);
            let rows = wire_rows(&mut admin, &sql);
            Answer { workload: workload.clone(), sql, rows }
        })
        .collect();
    drop(admin);
    let target = Target::Wire { url: url.to_string(), settings: Vec::new() };
    let cells = workloads
        .iter()
        .map(|workload| {
            progress(format!("{peer}: {}", workload.label()));
            let run = driver::run(&target, &clients.spec(workload));
            PeerCell { peer: peer.clone(), workload: workload.clone(), run }
        })
        .collect();
    PeerRuns { peer, cells, answers }
}

fn wire_error(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => error.to_string(),
    }
}

/// A setting's value (`SHOW`).
fn show(client: &mut postgres::Client, name: &str) -> Result<String, String> {
    let rows = wire_text(client, &format!("SHOW {name}"))?;
    rows.first().and_then(|r| r.first().cloned().flatten()).ok_or_else(|| format!("SHOW {name} returned nothing"))
}

/// A query's rows as text (simple protocol: every value arrives as text, whatever its type).
fn wire_text(client: &mut postgres::Client, sql: &str) -> Result<Vec<Vec<Option<String>>>, String> {
    let messages = client.simple_query(sql).map_err(|e| wire_error(&e))?;
    Ok(messages
        .iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(row) => {
                Some((0..row.len()).map(|i| row.get(i).map(str::to_string)).collect())
            }
            _ => None,
        })
        .collect())
}

fn parse_all<T: std::str::FromStr>(rows: Vec<Vec<Option<String>>>) -> Result<Vec<Vec<Option<T>>>, String> {
    rows.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|v| v.map(|text| text.parse::<T>().map_err(|_| format!("{text:?} is not an integer"))).transpose())
                .collect()
        })
        .collect()
}

/// A query's rows as integers.
fn wire_rows(client: &mut postgres::Client, sql: &str) -> Result<Vec<Row>, String> {
    parse_all(wire_text(client, sql)?)
}

/// The server's fingerprint of a table, or `None` when it has no such table.
fn wire_fingerprint(client: &mut postgres::Client, table: &Table) -> Result<Option<Fingerprint>, String> {
    let exists =
        wire_text(client, &format!("SELECT to_regclass('{}') IS NOT NULL", quote(table.name()).replace('\'', "''")))?;
    if exists.first().and_then(|r| r.first().cloned().flatten()).as_deref() != Some("t") {
        return Ok(None);
    }
    let rows: Vec<Vec<Option<i128>>> = parse_all(wire_text(client, &Fingerprint::sql(table))?)?;
    Fingerprint::from_row(rows.first().ok_or("the fingerprint query returned no row")?).map(Some)
}

/// Whether the server's table has a primary key on the column numadb's has it on.
fn wire_has_primary_key(client: &mut postgres::Client, table: &Table) -> Result<bool, String> {
    let Some(key) = table.primary_key() else { return Ok(true) };
    let column = table.columns()[key].name.replace('\'', "''");
    let sql = format!(
        "SELECT count(*) FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) \
         WHERE i.indrelid = to_regclass('{}') AND i.indisprimary AND i.indnatts = 1 AND a.attname = '{column}'",
        quote(table.name()).replace('\'', "''")
    );
    let rows: Vec<Row> = parse_all(wire_text(client, &sql)?)?;
    Ok(rows.first().and_then(|r| r.first().copied().flatten()) == Some(1))
}

/// Makes the server's copy of `table` equal to numadb's: kept when its fingerprint and primary key match,
/// otherwise dropped, recreated, filled with `COPY`, keyed, frozen and analysed, and checked.
fn ensure_table(
    client: &mut postgres::Client,
    table: &Table,
    peer: &str,
    progress: &mut dyn FnMut(String),
) -> Result<(), String> {
    let name = table.name();
    let expected = Fingerprint::of(table)?;
    if wire_fingerprint(client, table)?.as_ref() == Some(&expected) && wire_has_primary_key(client, table)? {
        progress(format!("{peer}: {name} already holds the same {} rows", expected.rows));
        return Ok(());
    }
    progress(format!("{peer}: loading {name} ({} rows) with COPY", expected.rows));
    let quoted = quote(name);
    let mut transaction = client.transaction().map_err(|e| wire_error(&e))?;
    transaction
        .batch_execute(&format!("DROP TABLE IF EXISTS {quoted}; {}", create_table_sql(table, false)?))
        .map_err(|e| wire_error(&e))?;
    let writer = transaction.copy_in(&format!("COPY {quoted} FROM STDIN")).map_err(|e| wire_error(&e))?;
    let mut writer = std::io::BufWriter::with_capacity(1 << 20, writer);
    let mut line = String::new();
    for_each_row(table, |row| {
        line.clear();
        for (c, value) in row.iter().enumerate() {
            if c > 0 {
                line.push('\t');
            }
            match value {
                Some(v) => write!(line, "{v}").expect("writing to a String"),
                None => line.push_str("\\N"),
            }
        }
        line.push('\n');
        writer.write_all(line.as_bytes()).map_err(|e| format!("COPY {name}: {e}"))
    })?;
    let writer = writer.into_inner().map_err(|e| format!("COPY {name}: {}", e.error()))?;
    writer.finish().map_err(|e| format!("COPY {name}: {}", wire_error(&e)))?;
    if let Some(key) = table.primary_key() {
        let column = quote(&table.columns()[key].name);
        transaction
            .batch_execute(&format!("ALTER TABLE {quoted} ADD PRIMARY KEY ({column})"))
            .map_err(|e| wire_error(&e))?;
    }
    transaction.commit().map_err(|e| wire_error(&e))?;
    progress(format!("{peer}: VACUUM (FREEZE, ANALYZE) {name}"));
    client.batch_execute(&format!("VACUUM (FREEZE, ANALYZE) {quoted}")).map_err(|e| wire_error(&e))?;
    match wire_fingerprint(client, table)? {
        Some(found) if found == expected => Ok(()),
        found => {
            Err(format!("PostgreSQL's {name} differs from numadb's after loading: {found:?} against {expected:?}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::postgres::{TempPostgres, TempPostgresError};

    #[test]
    fn summaries_are_the_drivers() {
        let result = run_result(4, 1, Some("boom".into()), 2.0, vec![1, 3], &[10, 20, 30, 0]).unwrap();
        assert_eq!(result.queries, 4);
        assert_eq!(result.errors, 1);
        assert_eq!(result.queries_per_s, 2.0);
        assert_eq!(result.per_second_mean, 2.0);
        assert!((result.per_second_stddev - 2f64.sqrt()).abs() < 1e-12);
        // A zero latency counts as the histogram's lowest value, 1 µs.
        assert_eq!(result.latency.p50_us, 10.0);
        assert_eq!(result.latency.max_us, 30.0);
        let empty = run_result(0, 0, None, 0.0, vec![], &[]).unwrap();
        assert_eq!((empty.latency.p99_us, empty.per_second_stddev), (0.0, 0.0));
    }

    #[test]
    fn answers_write_the_middle_key_in() {
        assert_eq!(answer_sql(&Workload::RandomAccess { rows: 9 }), "SELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" = 5");
        assert_eq!(answer_sql(&Workload::RandomAccess { rows: 0 }), "SELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" = 1");
        let aggregation = Workload::Aggregation { k: 2, range_pred: 10 };
        assert_eq!(answer_sql(&aggregation), aggregation.sql());
    }

    #[test]
    fn disagreements_compare_sorted_rows_and_name_failures() {
        let workload = Workload::Aggregation { k: 3, range_pred: 10 };
        let runs = PeerRuns {
            peer: "Peer 1".into(),
            cells: Vec::new(),
            answers: vec![
                Answer { workload: workload.clone(), sql: "a".into(), rows: Ok(vec![vec![Some(2)], vec![Some(1)]]) },
                Answer { workload: workload.clone(), sql: "b".into(), rows: Ok(vec![vec![None]]) },
                Answer { workload, sql: "c".into(), rows: Err("no table".into()) },
            ],
        };
        let found = runs.disagreements(|sql| match sql {
            "a" => Ok(vec![vec![Some(1)], vec![Some(2)]]),
            _ => Ok(vec![vec![Some(0)]]),
        });
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("Peer 1 answered [[None]]"), "{found:?}");
        assert!(found[1].contains("no table"), "{found:?}");
    }

    /// Two sealed blocks and two unsealed rows, with a NULL in every seventh `b`.
    fn small_table() -> Table {
        use numadb_storage::{ColumnDef, TableOptions};
        let columns = vec![ColumnDef::new("k", DataType::Integer, false), ColumnDef::new("b", DataType::BigInt, true)];
        let options = TableOptions { partition_rows: 2048, ..TableOptions::default() };
        let table = Table::new("odd \"name\"", columns, Some(0), options).unwrap();
        let rows = (1..=2050i64)
            .map(|k| vec![Value::Int(k), if k % 7 == 0 { Value::Null } else { Value::Int(-3 * k) }])
            .collect();
        table.insert(rows).unwrap();
        assert_eq!((table.snapshot().partitions.len(), table.snapshot().delta.rows()), (1, 2));
        table
    }

    #[test]
    fn rows_come_from_blocks_and_unsealed_rows_nulls_included() {
        let table = small_table();
        let mut seen = Vec::new();
        let visit = |row: &[Option<i64>]| {
            seen.push(row.to_vec());
            Ok(())
        };
        assert_eq!(for_each_row(&table, visit).unwrap(), 2050);
        assert_eq!(seen[0], [Some(1), Some(-3)]);
        assert_eq!(seen[6], [Some(7), None]);
        assert_eq!(seen[2049], [Some(2050), Some(-6150)]);
        let fingerprint = Fingerprint::of(&table).unwrap();
        let b_sum: i128 = (1..=2050).filter(|k| k % 7 != 0).map(|k| -3 * k).sum();
        assert_eq!(fingerprint, Fingerprint { rows: 2050, sums: vec![2050 * 2051 / 2, b_sum] });
        assert_eq!(
            create_table_sql(&table, true).unwrap(),
            "CREATE TABLE \"odd \"\"name\"\"\" (\"k\" INTEGER PRIMARY KEY, \"b\" BIGINT)"
        );
        assert_eq!(Fingerprint::sql(&table), "SELECT count(*), sum(\"k\"), sum(\"b\") FROM \"odd \"\"name\"\"\"");
        let text = Table::new(
            "t",
            vec![numadb_storage::ColumnDef::new("s", DataType::Text, true)],
            None,
            numadb_storage::TableOptions::default(),
        )
        .unwrap();
        assert!(create_table_sql(&text, false).unwrap_err().contains("cannot be given to a peer"));
    }

    #[test]
    fn postgres_copies_nulls_and_unsealed_rows_and_keeps_an_equal_table() {
        let server = match TempPostgres::start() {
            Ok(server) => server,
            Err(TempPostgresError::NotInstalled(message)) => {
                assert!(std::env::var("NUMADB_REQUIRE_TOOLS").as_deref() != Ok("1"), "{message}");
                return eprintln!("skipped: {message}");
            }
            Err(error) => panic!("{error}"),
        };
        let table = small_table();
        let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
        let mut lines = Vec::new();
        ensure_table(&mut client, &table, "PostgreSQL", &mut |l| lines.push(l)).unwrap();
        let rows =
            wire_rows(&mut client, "SELECT count(*), count(\"b\"), min(\"b\") FROM \"odd \"\"name\"\"\"").unwrap();
        assert_eq!(rows, [[Some(2050), Some(2050 - 2050 / 7), Some(-6150)]]);
        assert!(wire_has_primary_key(&mut client, &table).unwrap());
        ensure_table(&mut client, &table, "PostgreSQL", &mut |l| lines.push(l)).unwrap();
        assert_eq!(lines.iter().filter(|l| l.contains("loading")).count(), 1, "{lines:?}");
        // A changed row is noticed, and the table is loaded again.
        client.batch_execute("UPDATE \"odd \"\"name\"\"\" SET \"b\" = 0 WHERE \"k\" = 3").unwrap();
        ensure_table(&mut client, &table, "PostgreSQL", &mut |l| lines.push(l)).unwrap();
        assert_eq!(lines.iter().filter(|l| l.contains("loading")).count(), 2, "{lines:?}");
        // So is a missing primary key.
        client.batch_execute("ALTER TABLE \"odd \"\"name\"\"\" DROP CONSTRAINT \"odd \"\"name\"\"_pkey\"").unwrap();
        assert!(!wire_has_primary_key(&mut client, &table).unwrap());
        ensure_table(&mut client, &table, "PostgreSQL", &mut |l| lines.push(l)).unwrap();
        assert_eq!(lines.iter().filter(|l| l.contains("loading")).count(), 3, "{lines:?}");
    }

    #[test]
    fn an_unreachable_server_fails_every_cell_without_panicking() {
        let workloads = [Workload::RandomAccess { rows: 10 }, Workload::Aggregation { k: 1, range_pred: 5 }];
        let clients = Clients { connections: 2, warmup: Duration::ZERO, stop: Stop::QueriesPerConnection(1), seed: 1 };
        // Port 1 on loopback: nothing listens there.
        let runs = postgres("postgres://postgres@127.0.0.1:1/postgres", &[], &workloads, &clients, |_| {});
        assert_eq!(runs.peer, "PostgreSQL");
        assert_eq!(runs.cells.len(), 2);
        for cell in &runs.cells {
            assert!(cell.run.as_ref().unwrap_err().contains("connecting to PostgreSQL"), "{cell:?}");
        }
        let runs = postgres("not a url", &[], &workloads, &clients, |_| {});
        assert!(runs.cells.iter().all(|c| c.run.is_err()));
    }
}
