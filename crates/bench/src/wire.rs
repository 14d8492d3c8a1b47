//! The wire benchmark: numadb serve against PostgreSQL 15 in the same run, on the same data, driven by the same
//! pgbench — the thesis's random-access workload (`SELECT "C1" FROM "TBL_0" WHERE "C0" = $1`, random keys,
//! prepared statements, many connections) — and the thesis's aggregation query over the wire against the same
//! query in-process.
//!
//! Both servers listen on 127.0.0.1 and pgbench connects to both over TCP. PostgreSQL gets a private cluster
//! with `shared_buffers` large enough to hold the table and its index, and fsync off (the workload only reads).
//! The runs alternate between the two servers (numadb first on odd repetitions, PostgreSQL first on even ones)
//! so that drift in the machine's load falls on both; the report gives medians and spreads, the machine, and the
//! load average before and after, because a shared machine's other work shows up in any single run.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use numadb_server::{Server, ServerConfig};
use numadb_sql::{Database, Session};
use numadb_storage::{IndexKind, Value};
use serde::Serialize;

use crate::postgres::{self, Binaries, Length, PgbenchRun, TempPostgres};
use crate::{Machine, engine, median};

/// What to run.
#[derive(Debug, Clone)]
pub struct WireOptions {
    /// Rows of TBL_0 (and TBL_1 for the aggregation).
    pub rows: u64,
    /// pgbench client counts.
    pub clients: Vec<usize>,
    /// pgbench threads (`-j`, at most the clients).
    pub threads: usize,
    /// Seconds per pgbench run.
    pub seconds: u64,
    /// Runs per client count and server.
    pub repetitions: usize,
    /// numadb's primary-key index (the thesis's SAP HANA searched a sorted one).
    pub index: IndexKind,
    /// Compare with PostgreSQL.
    pub postgres: bool,
    /// Aggregation queries timed over the wire and in-process (each).
    pub aggregation_runs: usize,
    /// The aggregation's range predicate and skew.
    pub aggregation: (u64, u32),
}

impl Default for WireOptions {
    fn default() -> Self {
        WireOptions {
            rows: 5_000_000,
            clients: vec![2, 8, 32, 56],
            threads: 2,
            seconds: 10,
            repetitions: 3,
            index: IndexKind::Sorted,
            postgres: true,
            aggregation_runs: 40,
            aggregation: (100_000, 3),
        }
    }
}

/// One client count.
#[derive(Debug, Clone, Serialize)]
pub struct LookupRow {
    /// pgbench clients.
    pub clients: usize,
    /// numadb's transactions per second, each run.
    pub numadb_tps: Vec<f64>,
    /// PostgreSQL's, each run.
    pub postgres_tps: Vec<f64>,
    /// Median numadb / median PostgreSQL.
    pub ratio: Option<f64>,
    /// Socket writes numadb made per transaction.
    pub numadb_writes_per_transaction: f64,
    /// numadb's server CPU per transaction, microseconds (user + system).
    pub numadb_cpu_us: f64,
    /// PostgreSQL's backends' CPU per transaction, microseconds.
    pub postgres_cpu_us: Option<f64>,
    /// Failed transactions over all runs (must be 0).
    pub failed: u64,
}

/// The thesis aggregation over the wire and in-process.
#[derive(Debug, Clone, Serialize)]
pub struct AggregationWire {
    /// The query.
    pub query: String,
    /// Median milliseconds in-process (prepared, one session).
    pub in_process_ms: f64,
    /// Median milliseconds over the wire (tokio-postgres, one connection, prepared).
    pub wire_ms: f64,
    /// wire / in-process - 1.
    pub overhead: f64,
}

/// The report.
#[derive(Debug, Clone, Serialize)]
pub struct WireReport {
    /// The machine.
    pub machine: Machine,
    /// Load averages (1 minute) before and after.
    pub load_before: f64,
    /// See `load_before`.
    pub load_after: f64,
    /// Rows.
    pub rows: u64,
    /// numadb's primary-key index.
    pub index: String,
    /// Seconds per run and runs.
    pub seconds: u64,
    /// Runs per cell.
    pub repetitions: usize,
    /// pgbench threads.
    pub threads: usize,
    /// PostgreSQL's version and settings, or why it did not run.
    pub postgres: String,
    /// The point-lookup table.
    pub lookups: Vec<LookupRow>,
    /// The aggregation.
    pub aggregation: AggregationWire,
    /// Whether both systems return the same rows for sample keys.
    pub results_agree: Option<bool>,
}

fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|l| l.parse().ok()))
        .unwrap_or(f64::NAN)
}

/// Creates TBL_0 and TBL_1 with the primary-key index kind asked for.
fn load_thesis(session: &mut Session, rows: u64, index: IndexKind) -> Result<(), String> {
    let db = Arc::clone(session.database());
    let scheduler = db.scheduler(session.settings().scheduler_config()).map_err(|e| e.to_string())?;
    let nodes: Vec<u32> = db.topology().nodes_with_cpus().iter().collect();
    for (i, name) in ["TBL_0", "TBL_1"].iter().enumerate() {
        let columns = (0..7)
            .map(|c| numadb_storage::ColumnDef::new(format!("C{c}"), numadb_storage::DataType::Integer, c != 0))
            .collect();
        let options = numadb_storage::TableOptions {
            placement: numadb_storage::TablePlacement::Node(nodes[i % nodes.len()]),
            primary_key_index: index,
            ..numadb_storage::TableOptions::default()
        };
        db.catalog().add(numadb_storage::Table::new(name, columns, Some(0), options).map_err(|e| e.to_string())?);
        let table = db.catalog().table(name).ok_or("the table just added")?;
        numadb_execution::load::generate_thesis_rows(&scheduler, &table, rows, 42 + i as u64, &Default::default())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Copies numadb's TBL_0 into PostgreSQL, row for row.
fn copy_to_postgres(db: &Database, cluster: &TempPostgres) -> Result<(), String> {
    cluster.psql(
        "CREATE TABLE \"TBL_0\" (\"C0\" INTEGER NOT NULL, \"C1\" INTEGER, \"C2\" INTEGER, \"C3\" INTEGER, \
         \"C4\" INTEGER, \"C5\" INTEGER, \"C6\" INTEGER)",
    )?;
    let table = db.catalog().table("TBL_0").ok_or("no TBL_0")?;
    let snapshot = table.snapshot();
    let rows = snapshot.rows();
    cluster.copy_in("COPY \"TBL_0\" FROM STDIN WITH (FORMAT csv)", |out| {
        let mut line = String::with_capacity(96);
        for row in 0..rows {
            line.clear();
            for column in 0..7 {
                if column > 0 {
                    line.push(',');
                }
                if let Some(Value::Int(v)) = snapshot.value(row, column) {
                    line.push_str(&v.to_string());
                }
            }
            line.push('\n');
            out.write_all(line.as_bytes())?;
        }
        Ok(())
    })?;
    cluster.psql("ALTER TABLE \"TBL_0\" ADD PRIMARY KEY (\"C0\")")?;
    cluster.psql("VACUUM ANALYZE \"TBL_0\"")?;
    Ok(())
}

/// Runs the benchmark; `progress` hears what is happening.
pub fn run(options: &WireOptions, mut progress: impl FnMut(&str)) -> Result<WireReport, String> {
    let load_before = load_average();
    let db = Database::new().map_err(|e| e.to_string())?;
    let machine = Machine::describe(db.topology());
    progress(&format!("loading TBL_0 and TBL_1 ({} rows each) into numadb", options.rows));
    let mut session = db.session();
    load_thesis(&mut session, options.rows, options.index)?;
    let server =
        Server::bind(Arc::clone(&db), ServerConfig { listen: "127.0.0.1:0".into(), ..ServerConfig::default() })
            .map_err(|e| format!("starting numadb serve: {e}"))?;
    let numadb_port = server.local_addr().port();
    let running = server.spawn();
    let binaries = Binaries::find()?;

    let mut postgres_description = "not run".to_string();
    let mut cluster = None;
    if options.postgres {
        progress("starting a private PostgreSQL cluster");
        // shared_buffers holds the table and its index; the throwaway cluster's durability settings (fsync off
        // and the like) do not matter to a workload that only reads.
        let started = TempPostgres::start_with(&[("shared_buffers", "2GB")]).map_err(|e| e.to_string())?;
        let settings: Vec<String> = started.settings().iter().map(|(n, v)| format!("{n}={v}")).collect();
        postgres_description = format!("{} ({})", binaries.version(), settings.join(", "));
        progress(&format!("copying TBL_0 ({} rows) into PostgreSQL", options.rows));
        copy_to_postgres(&db, &started)?;
        cluster = Some(started);
    }

    let directory = tempfile::tempdir().map_err(|e| e.to_string())?;
    let lookup_script = directory.path().join("lookup.sql");
    std::fs::write(
        &lookup_script,
        format!("\\set k random(1, {})\nSELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" = :k;\n", options.rows),
    )
    .map_err(|e| e.to_string())?;

    // Both systems answer sample keys alike.
    let results_agree = match &cluster {
        Some(cluster) => {
            let keys = [1, options.rows / 3, options.rows / 2, options.rows];
            let list = keys.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
            let sql = format!("SELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" IN ({list}) ORDER BY \"C0\"");
            let theirs = cluster.psql(&sql)?;
            let mut ours = Vec::new();
            for key in keys {
                let output = session
                    .execute_one(&format!("SELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" = {key}"))
                    .map_err(|e| e.to_string())?;
                ours.push(output.rows[0][0].to_pg_text().unwrap_or_default());
            }
            Some(theirs.lines().collect::<Vec<_>>() == ours.iter().map(String::as_str).collect::<Vec<_>>())
        }
        None => None,
    };

    let mut lookups = Vec::new();
    for &clients in &options.clients {
        let mut row = LookupRow {
            clients,
            numadb_tps: Vec::new(),
            postgres_tps: Vec::new(),
            ratio: None,
            numadb_writes_per_transaction: f64::NAN,
            numadb_cpu_us: f64::NAN,
            postgres_cpu_us: None,
            failed: 0,
        };
        let (mut writes, mut transactions, mut numadb_cpu, mut postgres_cpu, mut postgres_transactions) =
            (0u64, 0u64, 0f64, 0f64, 0u64);
        for repetition in 0..options.repetitions {
            let numadb_first = repetition % 2 == 0;
            for turn in 0..2 {
                let numadb_turn = (turn == 0) == numadb_first;
                if numadb_turn {
                    progress(&format!("numadb, {clients} clients, run {}", repetition + 1));
                    let before = running.handle().stats();
                    let cpu_before = postgres::process_cpu_seconds(std::process::id(), false);
                    let run = pgbench_run(&binaries, numadb_port, "bench", clients, options, &lookup_script)?;
                    let during = running.handle().stats().since(&before);
                    numadb_cpu += postgres::process_cpu_seconds(std::process::id(), false) - cpu_before;
                    writes += during.socket_writes;
                    transactions += run.transactions;
                    row.failed += run.failed;
                    row.numadb_tps.push(run.tps);
                } else if let Some(cluster) = &cluster {
                    progress(&format!("PostgreSQL, {clients} clients, run {}", repetition + 1));
                    let background = cluster.children();
                    let cpu_before = cluster.cpu_seconds(&background);
                    let run = pgbench_run(&binaries, cluster.port(), cluster.user(), clients, options, &lookup_script)?;
                    postgres_cpu += cluster.cpu_seconds(&background) - cpu_before;
                    postgres_transactions += run.transactions;
                    row.failed += run.failed;
                    row.postgres_tps.push(run.tps);
                }
            }
        }
        row.numadb_writes_per_transaction = writes as f64 / transactions.max(1) as f64;
        row.numadb_cpu_us = numadb_cpu * 1e6 / transactions.max(1) as f64;
        if cluster.is_some() {
            row.postgres_cpu_us = Some(postgres_cpu * 1e6 / postgres_transactions.max(1) as f64);
            let theirs = median(&mut row.postgres_tps.clone());
            row.ratio = Some(median(&mut row.numadb_tps.clone()) / theirs);
        }
        lookups.push(row);
    }

    progress("the aggregation query over the wire and in-process");
    let aggregation = aggregation(&mut session, numadb_port, options)?;
    drop(cluster);
    running.shutdown();
    db.shutdown();
    Ok(WireReport {
        machine,
        load_before,
        load_after: load_average(),
        rows: options.rows,
        index: options.index.name().to_string(),
        seconds: options.seconds,
        repetitions: options.repetitions,
        threads: options.threads,
        postgres: postgres_description,
        lookups,
        aggregation,
        results_agree,
    })
}

fn pgbench_run(
    binaries: &Binaries,
    port: u16,
    user: &str,
    clients: usize,
    options: &WireOptions,
    script: &Path,
) -> Result<PgbenchRun, String> {
    postgres::pgbench(
        binaries,
        port,
        user,
        "postgres",
        "prepared",
        clients,
        options.threads,
        Length::Seconds(options.seconds),
        script,
    )
}

/// The thesis aggregation, prepared, timed query by query in-process (this session) and over the wire
/// (tokio-postgres, one connection), alternating; medians.
fn aggregation(session: &mut Session, port: u16, options: &WireOptions) -> Result<AggregationWire, String> {
    let (range_pred, k) = options.aggregation;
    let query = engine::thesis_query(k, range_pred);
    session.prepare("aggregation", &query, &[]).map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    let url = format!("host=127.0.0.1 port={port} user=bench dbname=numadb");
    let (client, connection) =
        runtime.block_on(tokio_postgres::connect(&url, tokio_postgres::NoTls)).map_err(|e| e.to_string())?;
    runtime.spawn(connection);
    let statement = runtime.block_on(client.prepare(&query)).map_err(|e| e.to_string())?;
    let (mut in_process, mut wire) = (Vec::new(), Vec::new());
    // One warm-up each, then alternate.
    for run in 0..=options.aggregation_runs.max(1) {
        let started = Instant::now();
        let local = session.execute_prepared("aggregation", &[]).map_err(|e| e.to_string())?;
        let local_ms = started.elapsed().as_secs_f64() * 1e3;
        let started = Instant::now();
        let remote = runtime.block_on(client.query(&statement, &[])).map_err(|e| e.to_string())?;
        let remote_ms = started.elapsed().as_secs_f64() * 1e3;
        let counts: Vec<i64> = remote.iter().map(|r| r.get::<_, i64>(0)).collect();
        let expected: Vec<i64> = local.rows.iter().map(|r| if let Value::Int(v) = r[0] { v } else { -1 }).collect();
        if counts != expected {
            return Err(format!("the aggregation answered {counts:?} over the wire and {expected:?} in-process"));
        }
        if run > 0 {
            in_process.push(local_ms);
            wire.push(remote_ms);
        }
    }
    let in_process_ms = median(&mut in_process);
    let wire_ms = median(&mut wire);
    Ok(AggregationWire { query, in_process_ms, wire_ms, overhead: wire_ms / in_process_ms - 1.0 })
}

fn thousands(value: f64) -> String {
    let rounded = value.round() as i64;
    let digits = rounded.abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if rounded < 0 { format!("-{out}") } else { out }
}

fn spread(values: &[f64]) -> String {
    if values.is_empty() {
        return "-".into();
    }
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{} ({}–{})", thousands(median(&mut values.to_vec())), thousands(min), thousands(max))
}

/// The report as text.
pub fn render(report: &WireReport) -> String {
    let mut out = String::new();
    out.push_str(&format!("machine: {}\n", report.machine.line()));
    out.push_str(&format!(
        "load average: {:.2} before, {:.2} after (other work on this machine shows up in the spreads)\n",
        report.load_before, report.load_after
    ));
    out.push_str(&format!("peer: {}\n", report.postgres));
    if let Some(agree) = report.results_agree {
        out.push_str(&format!(
            "same data: {}\n",
            if agree { "yes (sample keys agree)" } else { "NO: sample keys differ" }
        ));
    }
    out.push_str(&format!(
        "\npoint lookups: SELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" = $1, random keys, N = {}, numadb index: {}\n\
         pgbench -n -M prepared -j {} -T {} over TCP 127.0.0.1, {} run(s) each, median (min–max) tps\n\n",
        thousands(report.rows as f64),
        report.index,
        report.threads,
        report.seconds,
        report.repetitions
    ));
    out.push_str(&format!(
        "{:>7}  {:>30}  {:>30}  {:>6}  {:>8}  {:>9}  {:>9}  {:>6}\n",
        "clients", "numadb tps", "PostgreSQL tps", "ratio", "writes/tx", "numadb µs", "PG µs", "failed"
    ));
    for row in &report.lookups {
        out.push_str(&format!(
            "{:>7}  {:>30}  {:>30}  {:>6}  {:>8.2}  {:>9.1}  {:>9}  {:>6}\n",
            row.clients,
            spread(&row.numadb_tps),
            spread(&row.postgres_tps),
            row.ratio.map_or("-".into(), |r| format!("{r:.2}×")),
            row.numadb_writes_per_transaction,
            row.numadb_cpu_us,
            row.postgres_cpu_us.map_or("-".into(), |c| format!("{c:.1}")),
            row.failed
        ));
    }
    out.push_str(
        "(writes/tx: numadb's socket writes per transaction; µs: server CPU per transaction, user + system, \
         numadb's whole process and PostgreSQL's postmaster with its backends)\n",
    );
    let a = &report.aggregation;
    out.push_str(&format!(
        "\nthe thesis aggregation, prepared, one connection, median per query (runs alternate):\n  {}\n  \
         in-process {:.3} ms, over the wire {:.3} ms: overhead {:+.2}%\n",
        a.query,
        a.in_process_ms,
        a.wire_ms,
        a.overhead * 100.0
    ));
    out
}
