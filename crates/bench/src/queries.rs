//! Everyday analytical queries beyond the thesis's two workloads (top-N, GROUP BY over an expression, COUNT
//! DISTINCT, a join, a filter over arithmetic, CASE) against DuckDB on the same data and thread count.
//!
//! The thesis query is what numadb's scan kernels are built for; these are what a user types next. They go
//! through the executor's other paths (expressions a block at a time, grouping, joins, subqueries), so the
//! ratios show where numadb stands outside its specialty, and they are the measure of any work on those paths. Every query has a total order (ties broken by
//! the primary key) and integer results, so both systems' answers must be identical, and the report says whether
//! they are.

use std::sync::atomic::AtomicU64;
use std::time::Instant;

use numadb_sql::Database;
use numadb_storage::Value;
use serde::Serialize;

use crate::duckdb::{PeerQuery, PeerRun, run_peer};
use crate::{Machine, median};

/// What to run.
#[derive(Debug, Clone)]
pub struct QueriesOptions {
    /// Rows per thesis table.
    pub rows: u64,
    /// Timed runs per query (after one warm-up).
    pub repetitions: usize,
    /// Compare with DuckDB (when its Python package is installed).
    pub duckdb: bool,
}

impl Default for QueriesOptions {
    fn default() -> Self {
        QueriesOptions { rows: 5_000_000, repetitions: 5, duckdb: true }
    }
}

/// One query's timings.
#[derive(Debug, Clone, Serialize)]
pub struct QueryRow {
    /// A short name.
    pub label: String,
    /// The SQL (the same text for both systems).
    pub sql: String,
    /// numadb's median milliseconds.
    pub numadb_ms: f64,
    /// DuckDB's median milliseconds.
    pub duckdb_ms: Option<f64>,
    /// DuckDB time / numadb time (above 1: numadb is faster).
    pub speedup: Option<f64>,
    /// Whether both systems returned the same rows.
    pub results_agree: Option<bool>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct QueriesReport {
    /// The machine.
    pub machine: Machine,
    /// Rows per table.
    pub rows: u64,
    /// numadb's workers and DuckDB's threads.
    pub threads: usize,
    /// DuckDB's version, when it ran.
    pub duckdb_version: Option<String>,
    /// Why DuckDB did not run.
    pub duckdb_unavailable: Option<String>,
    /// One row per query.
    pub queries: Vec<QueryRow>,
}

/// The queries over the thesis tables of `rows` rows (`C1`..`C6` uniform in 1..rows): (label, SQL).
pub fn queries(rows: u64) -> Vec<(&'static str, String)> {
    let tenth = (rows / 10).max(1);
    let half = (rows / 2).max(1);
    vec![
        ("top-10", r#"SELECT "C0", "C1" FROM "TBL_0" ORDER BY "C2" DESC, "C0" LIMIT 10"#.to_string()),
        (
            "filtered top-10",
            format!(r#"SELECT "C0", "C2" FROM "TBL_0" WHERE "C3" < {tenth} ORDER BY "C1", "C0" LIMIT 10"#),
        ),
        (
            "aggregates",
            format!(
                r#"SELECT COUNT(*), SUM("C1"), MIN("C2"), MAX("C3") FROM "TBL_0" WHERE "C4" BETWEEN 1000 AND {half}"#
            ),
        ),
        (
            "group by expression",
            r#"SELECT "C1" % 100 AS g, COUNT(*), SUM("C2") FROM "TBL_0" GROUP BY g ORDER BY g LIMIT 5"#.to_string(),
        ),
        ("count distinct", r#"SELECT COUNT(DISTINCT "C1" % 1000) FROM "TBL_0""#.to_string()),
        ("arithmetic filter", format!(r#"SELECT COUNT(*) FROM "TBL_0" WHERE "C1" + "C2" < {half}"#)),
        // BETWEEN, IN (list) and abs over arithmetic: evaluated a block at a time, as the comparison above is.
        (
            "BETWEEN, IN, abs",
            format!(
                r#"SELECT COUNT(*) FROM "TBL_0" WHERE "C1" - "C2" BETWEEN -{tenth} AND {tenth} OR "C3" % 10 IN (1, 2, 3) OR abs("C4" - "C5") < 1000"#
            ),
        ),
        // A boolean CASE in WHERE (compiled into its arms: kernels' ranges, double arithmetic a block at a time,
        // IS DISTINCT FROM), and a CASE summed per group (its condition on the packed codes, 4 groups added a
        // group at a time).
        (
            "CASE filter",
            format!(
                r#"SELECT COUNT(*) FROM "TBL_0" WHERE CASE WHEN "C1" < {tenth} THEN "C2" * 1.5 < {half} WHEN "C3" < {tenth} THEN true ELSE "C4" IS DISTINCT FROM "C5" - 1 END"#
            ),
        ),
        (
            "CASE per group",
            format!(
                r#"SELECT "C2" % 4 AS g, SUM(CASE WHEN "C1" < {tenth} THEN "C3" ELSE 0 END) FROM "TBL_0" GROUP BY g ORDER BY g"#
            ),
        ),
        // Double precision functions a block at a time (round and trunc in binary where the row path's decimal
        // rounding cannot differ), aggregate FILTERs on each block's selected rows, and a DISTINCT aggregate's
        // set of integers kept as one to the end.
        (
            "double functions",
            format!(
                r#"SELECT COUNT(*), SUM(sqrt("C1")), MAX(round("C2" / 3.0)) FROM "TBL_0" WHERE floor("C3" / 7.0) < {tenth}"#
            ),
        ),
        (
            "FILTER aggregates",
            format!(
                r#"SELECT "C1" % 4 AS g, AVG("C2") FILTER (WHERE "C3" < {tenth}), COUNT(*) FILTER (WHERE "C4" % 2 = 0) FROM "TBL_0" GROUP BY g ORDER BY g"#
            ),
        ),
        ("count distinct column", r#"SELECT COUNT(DISTINCT "C1") FROM "TBL_0""#.to_string()),
        ("join", format!(r#"SELECT COUNT(*) FROM "TBL_0" a JOIN "TBL_1" b ON a."C1" = b."C0" WHERE a."C2" < {tenth}"#)),
        (
            "subquery in FROM",
            r#"SELECT g, COUNT(*) FROM (SELECT "C1" % 10 AS g, "C2" FROM "TBL_0") s WHERE g < 5 GROUP BY g ORDER BY g"#
                .to_string(),
        ),
        (
            "select distinct",
            r#"SELECT COUNT(*) FROM (SELECT DISTINCT "C1" % 1000, "C2" % 7 FROM "TBL_0") s"#.to_string(),
        ),
        (
            "many groups",
            format!(
                r#"SELECT COUNT(*), SUM(n) FROM (SELECT "C1" % {} AS g, COUNT(*) AS n, SUM("C2") FROM "TBL_0" GROUP BY g) s"#,
                (rows / 25).max(1)
            ),
        ),
        (
            "IN (subquery)",
            format!(
                r#"SELECT COUNT(*) FROM "TBL_0" WHERE "C1" % {tenth} IN (SELECT "C2" FROM "TBL_1" WHERE "C3" < {})"#,
                (rows / 50).max(1)
            ),
        ),
        // Correlated subqueries from a few outer rows: the inner table's groups (or distinct keys) are made only
        // for the outer rows' keys.
        (
            "keyed subquery",
            r#"SELECT a."C0", (SELECT SUM(b."C2") FROM "TBL_1" b WHERE b."C1" = a."C1") FROM "TBL_0" a WHERE a."C2" < 200 ORDER BY 1"#
                .to_string(),
        ),
        (
            "selective EXISTS",
            format!(
                r#"SELECT a."C0" FROM "TBL_0" a WHERE a."C3" < 200 AND EXISTS (SELECT 1 FROM "TBL_1" b WHERE b."C1" = a."C2" AND b."C4" < {half}) ORDER BY 1 LIMIT 5"#
            ),
        ),
    ]
}

/// Untimed runs of each query before the timed ones, in both systems. More than one: the first queries after
/// the bulk load ran up to twice as slow for a few runs (the allocator and the kernel still settling the load's
/// memory), which with one warm-up made the first query's median that of its slow runs.
const WARMUP_RUNS: usize = 3;

/// Runs the benchmark, calling `progress` with a line for each step.
pub fn run(options: &QueriesOptions, mut progress: impl FnMut(&str)) -> Result<QueriesReport, String> {
    let database = Database::new().map_err(|e| e.to_string())?;
    let machine = Machine::describe(database.topology());
    let mut session = database.session();
    let threads = database.topology().allowed.cpus.len();
    progress(&format!("generating TBL_0 and TBL_1, {} rows each", options.rows));
    numadb_sql::thesis::load_thesis_tables(&mut session, options.rows, 42, None, Some(&AtomicU64::new(0)))
        .map_err(|e| e.to_string())?;

    let list = queries(options.rows);
    let mut ours = Vec::new();
    for (label, sql) in &list {
        progress(&format!("numadb: {label}"));
        let warm = session.execute_one(sql).map_err(|e| format!("{label}: {e}"))?;
        for _ in 1..WARMUP_RUNS {
            session.execute_one(sql).map_err(|e| format!("{label}: {e}"))?;
        }
        let mut seconds = Vec::with_capacity(options.repetitions);
        for _ in 0..options.repetitions {
            let started = Instant::now();
            session.execute_one(sql).map_err(|e| format!("{label}: {e}"))?;
            seconds.push(started.elapsed().as_secs_f64());
        }
        ours.push((warm.rows, median(&mut seconds)));
    }

    let peer = if options.duckdb {
        let peer_queries: Vec<PeerQuery> = list
            .iter()
            .map(|(label, sql)| PeerQuery {
                label: label.to_string(),
                sql: sql.clone(),
                warmups: WARMUP_RUNS,
                repetitions: options.repetitions,
            })
            .collect();
        run_peer(&database, &["TBL_0", "TBL_1"], threads, &peer_queries, &mut progress)?
    } else {
        PeerRun::default()
    };
    let (duckdb_version, duckdb_unavailable, peer_results) = (peer.version, peer.unavailable, peer.results);

    let queries = list
        .into_iter()
        .zip(ours)
        .enumerate()
        .map(|(index, ((label, sql), (rows, numadb_seconds)))| {
            let peer = peer_results.get(index);
            let duckdb_seconds = peer.map(|p| median(&mut p.seconds.clone()));
            QueryRow {
                label: label.to_string(),
                sql,
                numadb_ms: numadb_seconds * 1e3,
                duckdb_ms: duckdb_seconds.map(|s| s * 1e3),
                speedup: duckdb_seconds.map(|s| s / numadb_seconds),
                results_agree: peer.map(|p| same_rows(&rows, &p.rows)),
            }
        })
        .collect();
    Ok(QueriesReport { machine, rows: options.rows, threads, duckdb_version, duckdb_unavailable, queries })
}

/// Whether numadb's rows equal DuckDB's (as its Python package returns them: integers as JSON numbers).
fn same_rows(ours: &[Vec<Value>], theirs: &[Vec<serde_json::Value>]) -> bool {
    ours.len() == theirs.len()
        && ours.iter().zip(theirs).all(|(a, b)| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| match (x, y) {
                    (Value::Int(x), y) => y.as_i64() == Some(*x),
                    // Beyond 64 bits JSON numbers arrive as doubles.
                    (Value::Numeric(x), y) => match (y.as_i64(), y.as_u64(), y.as_f64()) {
                        (Some(y), ..) => i128::from(y) == *x,
                        (_, Some(y), _) => i128::from(y) == *x,
                        (.., Some(y)) => (*x as f64 - y).abs() <= 1e-15 * y.abs(),
                        _ => false,
                    },
                    (Value::Double(x), y) => y.as_f64().is_some_and(|y| (x - y).abs() <= 1e-9 * x.abs().max(1.0)),
                    (Value::Null, y) => y.is_null(),
                    (Value::Text(x), y) => y.as_str() == Some(&**x),
                    (Value::Bool(x), y) => y.as_bool() == Some(*x),
                })
        })
}

/// The report as text.
pub fn render(report: &QueriesReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("numadb queries benchmark\nmachine: {}\n", report.machine.line()));
    let peer = match (&report.duckdb_version, &report.duckdb_unavailable) {
        (Some(version), None) => format!("DuckDB {version}, {} threads, same data", report.threads),
        (_, Some(reason)) => format!("no DuckDB comparison: {reason}"),
        _ => "no DuckDB comparison".into(),
    };
    out.push_str(&format!(
        "data: TBL_0 and TBL_1, {} rows each; numadb with {} workers; peer: {peer}; median of the timed runs \
         (after {WARMUP_RUNS} untimed ones)\n",
        report.rows, report.threads
    ));
    out.push_str("  query                 numadb ms   DuckDB ms  DuckDB/numadb  same rows\n");
    for row in &report.queries {
        let duckdb = row.duckdb_ms.map_or("-".to_string(), |ms| format!("{ms:.1}"));
        let ratio = row.speedup.map_or("-".to_string(), |r| format!("{r:.2}×"));
        let agree = match row.results_agree {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        out.push_str(&format!("  {:<20} {:>10.1} {:>11} {:>14}  {agree}\n", row.label, row.numadb_ms, duckdb, ratio));
    }
    out.push_str("  (DuckDB/numadb above 1: numadb is faster)\n");
    for row in &report.queries {
        out.push_str(&format!("  {}: {}\n", row.label, row.sql));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_agree_only_when_every_value_does() {
        let ours = vec![vec![Value::Int(3), Value::Double(0.5), Value::Null, Value::Text("a".into())]];
        let same =
            vec![vec![serde_json::json!(3), serde_json::json!(0.5), serde_json::Value::Null, serde_json::json!("a")]];
        assert!(same_rows(&ours, &same));
        let other_int =
            vec![vec![serde_json::json!(4), serde_json::json!(0.5), serde_json::Value::Null, serde_json::json!("a")]];
        assert!(!same_rows(&ours, &other_int));
        assert!(!same_rows(&ours, &[]));
        let not_null =
            vec![vec![serde_json::json!(3), serde_json::json!(0.5), serde_json::json!(0), serde_json::json!("a")]];
        assert!(!same_rows(&ours, &not_null));
    }

    #[test]
    fn every_query_runs_on_a_small_table_and_the_report_names_it() {
        let options = QueriesOptions { rows: 3000, repetitions: 1, duckdb: false };
        let report = run(&options, |_| {}).unwrap();
        assert_eq!(report.queries.len(), queries(3000).len());
        let text = render(&report);
        for (label, _) in queries(3000) {
            assert!(text.contains(label), "{label} missing from\n{text}");
        }
        assert!(report.queries.iter().all(|q| q.results_agree.is_none() && q.numadb_ms >= 0.0));
    }
}
