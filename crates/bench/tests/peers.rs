//! The peers run the driver's workloads with the same clients on identical data, and answer what numadb answers.
//!
//! DuckDB needs a Python with `duckdb` and `numpy` (`NUMADB_PYTHON`, the project's `.venv`, or `python3`), and
//! PostgreSQL its server binaries (`initdb`, `pg_ctl`, `postgres`); without them a test says so and passes, unless
//! `NUMADB_REQUIRE_TOOLS=1` (set by the project's test command).

use std::sync::Arc;
use std::time::Duration;

use numadb_bench::driver::{Stop, Workload};
use numadb_bench::duckdb::DuckDb;
use numadb_bench::peers::{self, Clients, PeerRuns};
use numadb_bench::postgres::{TempPostgres, TempPostgresError};
use numadb_sql::{Database, Session};
use numadb_storage::Table;

const ROWS: u64 = 20_000;

fn skip(message: &str) {
    assert!(std::env::var("NUMADB_REQUIRE_TOOLS").as_deref() != Ok("1"), "{message}");
    eprintln!("skipped: {message}");
}

fn loaded() -> (Arc<Database>, Session, Vec<Arc<Table>>) {
    let database = Database::new().unwrap();
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, ROWS, 11, Some(4096), None).unwrap();
    let tables = ["TBL_0", "TBL_1"].iter().map(|t| database.catalog().table(t).unwrap()).collect();
    (database, session, tables)
}

fn workloads() -> Vec<Workload> {
    vec![Workload::RandomAccess { rows: ROWS }, Workload::Aggregation { k: 3, range_pred: 5000 }]
}

fn clients() -> Clients {
    Clients { connections: 4, warmup: Duration::from_millis(20), stop: Stop::QueriesPerConnection(20), seed: 5 }
}

/// Every workload ran its 4 × 20 queries without an error, and the peer answered what numadb answers.
fn check(runs: &PeerRuns, session: &mut Session, name: &str) {
    assert!(runs.peer.starts_with(name), "{}", runs.peer);
    assert_eq!(runs.cells.len(), 2);
    for (cell, workload) in runs.cells.iter().zip(workloads()) {
        assert_eq!(cell.workload, workload);
        assert_eq!(cell.peer, runs.peer);
        let run = cell.run.as_ref().unwrap_or_else(|e| panic!("{}: {e}", workload.label()));
        assert_eq!(run.errors, 0, "{}: {:?}", workload.label(), run.first_error);
        assert_eq!(run.queries, 80, "{}", workload.label());
        assert!(run.latency.p50_us >= 1.0 && run.latency.p50_us <= run.latency.max_us);
    }
    assert_eq!(runs.answers.len(), 2);
    for answer in &runs.answers {
        let rows = answer.rows.as_ref().unwrap();
        match answer.workload {
            Workload::RandomAccess { .. } => assert_eq!(rows.len(), 1, "one row for the middle key"),
            Workload::Aggregation { .. } => assert_eq!(rows.len(), 2, "one count per table"),
        }
    }
    assert_eq!(runs.disagreements_with(session), Vec::<String>::new());
}

#[test]
fn duckdb_runs_the_workloads_on_the_same_data_and_agrees_with_numadb() {
    if let Err(error) = DuckDb::find() {
        return skip(&error.to_string());
    }
    let (_database, mut session, tables) = loaded();
    let tables: Vec<&Table> = tables.iter().map(Arc::as_ref).collect();
    let mut lines = Vec::new();
    let runs = peers::duckdb(&tables, &workloads(), &clients(), |line| lines.push(line));
    check(&runs, &mut session, "DuckDB ");
    assert!(runs.peer.contains("threads"), "{}", runs.peer);
    assert!(lines.iter().any(|l| l.contains("loading TBL_1")), "{lines:?}");
}

#[test]
fn postgres_runs_the_workloads_on_the_same_data_and_agrees_with_numadb() {
    let server = match TempPostgres::start() {
        Ok(server) => server,
        Err(TempPostgresError::NotInstalled(message)) => return skip(&message),
        Err(error) => panic!("{error}"),
    };
    let (_database, mut session, tables) = loaded();
    let tables: Vec<&Table> = tables.iter().map(Arc::as_ref).collect();
    let mut lines = Vec::new();
    let runs = peers::postgres(&server.url(), &tables, &workloads(), &clients(), |line| lines.push(line));
    check(&runs, &mut session, "PostgreSQL ");
    assert!(lines.iter().any(|l| l.contains("loading TBL_0")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("max_parallel_workers_per_gather")), "{lines:?}");

    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    for table in ["TBL_0", "TBL_1"] {
        let sql = format!("SELECT count(*), sum(\"C1\") FROM \"{table}\"");
        let theirs = client.query_one(&sql, &[]).unwrap();
        let ours = peers::numadb_rows(&mut session, &sql).unwrap();
        assert_eq!(vec![vec![Some(theirs.get::<_, i64>(0)), Some(theirs.get::<_, i64>(1))]], ours, "{table}");
    }

    // The server's copy now equals numadb's: a second comparison measures without loading again.
    let mut lines = Vec::new();
    let again = peers::postgres(&server.url(), &tables, &workloads(), &clients(), |line| lines.push(line));
    check(&again, &mut session, "PostgreSQL ");
    assert!(!lines.iter().any(|l| l.contains("loading")), "{lines:?}");
    assert_eq!(lines.iter().filter(|l| l.contains("already holds the same 20000 rows")).count(), 2, "{lines:?}");

    // Tables of other data (another seed) are replaced.
    drop(client);
    let other = Database::new().unwrap();
    numadb_sql::thesis::load_thesis_tables(&mut other.session(), ROWS, 12, Some(4096), None).unwrap();
    let other_tables = [other.catalog().table("TBL_0").unwrap(), other.catalog().table("TBL_1").unwrap()];
    let mut lines = Vec::new();
    let replaced = peers::postgres(
        &server.url(),
        &[&other_tables[0], &other_tables[1]],
        &[Workload::Aggregation { k: 3, range_pred: 5000 }],
        &clients(),
        |line| lines.push(line),
    );
    assert!(lines.iter().any(|l| l.contains("loading TBL_0")), "{lines:?}");
    assert_eq!(replaced.disagreements_with(&mut other.session()), Vec::<String>::new());
}

#[test]
fn a_temporary_postgres_takes_many_connections_and_leaves_nothing_behind() {
    let server = match TempPostgres::start() {
        Ok(server) => server,
        Err(TempPostgresError::NotInstalled(message)) => return skip(&message),
        Err(error) => panic!("{error}"),
    };
    assert!(server.url().starts_with("postgres://postgres@127.0.0.1:"));
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    let max: String = client.query_one("SHOW max_connections", &[]).unwrap().get(0);
    assert!(max.parse::<u32>().unwrap() >= 128, "{max}");
    let version: String = client.query_one("SHOW server_version", &[]).unwrap().get(0);
    assert_eq!(version, server.version());
    // The Unix socket works too.
    let socket =
        format!("host={} port={} user=postgres dbname=postgres", server.socket_directory().display(), server.port());
    postgres::Client::connect(&socket, postgres::NoTls).unwrap().simple_query("SELECT 1").unwrap();
    drop(client);
    let directory = server.socket_directory().to_path_buf();
    let url = server.url();
    drop(server);
    assert!(!directory.exists(), "{} is still there", directory.display());
    assert!(postgres::Client::connect(&url, postgres::NoTls).is_err(), "the server still answers");
}

#[test]
fn a_throwaway_postgres_reports_the_settings_it_really_runs_with() {
    let server = match TempPostgres::start_with(&[("work_mem", "8MB"), ("max_connections", "150")]) {
        Ok(server) => server,
        Err(TempPostgresError::NotInstalled(message)) => return skip(&message),
        Err(error) => panic!("{error}"),
    };
    let settings = server.settings();
    // The caller's override replaces the throwaway default, and is listed once.
    assert_eq!(settings.iter().filter(|(name, _)| name == "max_connections").count(), 1, "{settings:?}");
    assert!(settings.iter().any(|(name, value)| name == "fsync" && value == "off"), "{settings:?}");
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    for (name, value) in settings {
        let shown: String = client.query_one(&format!("SHOW {name}"), &[]).unwrap().get(0);
        assert_eq!(&shown, value, "{name}");
    }
}
