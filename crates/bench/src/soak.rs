//! The soak: many connections (56, as the thesis's client) through tokio-postgres, each running prepared
//! point lookups with random keys and now and then the thesis aggregation, for a bounded time. Every answer is
//! checked against the table in-process; the server's memory is sampled every second. It passes with zero
//! errors, zero wrong answers, and memory that stays flat once the connections are warm.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use numadb_server::{Server, ServerConfig};
use numadb_sql::Database;
use numadb_storage::Value;
use serde::Serialize;

use crate::{Machine, engine};

/// What to run.
#[derive(Debug, Clone)]
pub struct SoakOptions {
    /// Rows per thesis table.
    pub rows: u64,
    /// Connections.
    pub clients: usize,
    /// How long.
    pub duration: Duration,
    /// One statement in this many is the aggregation (0: none).
    pub aggregation_every: u64,
}

impl Default for SoakOptions {
    fn default() -> Self {
        SoakOptions { rows: 1_000_000, clients: 56, duration: Duration::from_secs(60), aggregation_every: 200 }
    }
}

/// What the soak saw.
#[derive(Debug, Clone, Serialize)]
pub struct SoakReport {
    /// The machine.
    pub machine: Machine,
    /// Connections.
    pub clients: usize,
    /// Seconds run.
    pub seconds: f64,
    /// Point lookups answered.
    pub lookups: u64,
    /// Aggregations answered.
    pub aggregations: u64,
    /// Statements that failed.
    pub errors: u64,
    /// Statements whose answer was wrong.
    pub wrong: u64,
    /// The first error or wrong answer, if any.
    pub first_problem: Option<String>,
    /// Statements per second, each second.
    pub per_second: Vec<u64>,
    /// Resident memory of the process in MiB, each second.
    pub rss_mib: Vec<f64>,
    /// Resident memory growth from a quarter of the run to its end.
    pub rss_growth: f64,
}

impl SoakReport {
    /// Zero errors, zero wrong answers, memory within 10% of where it was a quarter of the way in.
    pub fn passed(&self) -> bool {
        self.errors == 0 && self.wrong == 0 && self.rss_growth < 0.10 && self.lookups > 0
    }
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

struct Shared {
    stop: AtomicBool,
    lookups: AtomicU64,
    aggregations: AtomicU64,
    errors: AtomicU64,
    wrong: AtomicU64,
    first_problem: std::sync::Mutex<Option<String>>,
}

impl Shared {
    fn problem(&self, counter: &AtomicU64, what: String) {
        counter.fetch_add(1, Ordering::Relaxed);
        self.first_problem.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(what);
    }
}

/// Runs the soak; `progress` hears a line per second.
pub fn run(options: &SoakOptions, mut progress: impl FnMut(&str)) -> Result<SoakReport, String> {
    let db = Database::new().map_err(|e| e.to_string())?;
    let machine = Machine::describe(db.topology());
    let mut session = db.session();
    progress(&format!("loading TBL_0 and TBL_1 ({} rows each)", options.rows));
    numadb_sql::thesis::load_thesis_tables(&mut session, options.rows, 42, None, None).map_err(|e| e.to_string())?;
    let table = db.catalog().table("TBL_0").ok_or("no TBL_0")?;
    let snapshot = Arc::new(table.snapshot());
    let aggregation = engine::thesis_query(3, 100_000);
    let expected_aggregation: Vec<i64> = session
        .execute_one(&aggregation)
        .map_err(|e| e.to_string())?
        .rows
        .iter()
        .map(|r| if let Value::Int(v) = r[0] { v } else { -1 })
        .collect();
    let config =
        ServerConfig { listen: "127.0.0.1:0".into(), max_connections: options.clients + 8, ..ServerConfig::default() };
    let server = Server::bind(Arc::clone(&db), config).map_err(|e| format!("starting numadb serve: {e}"))?;
    let url = format!("host=127.0.0.1 port={} user=soak dbname=numadb", server.local_addr().port());
    let running = server.spawn();
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        lookups: AtomicU64::new(0),
        aggregations: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        wrong: AtomicU64::new(0),
        first_problem: std::sync::Mutex::new(None),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let mut tasks = Vec::new();
    for client in 0..options.clients {
        let (url, shared, snapshot) = (url.clone(), Arc::clone(&shared), Arc::clone(&snapshot));
        let (aggregation, expected) = (aggregation.clone(), expected_aggregation.clone());
        let (rows, every) = (options.rows, options.aggregation_every);
        tasks.push(runtime.spawn(async move {
            client_loop(client as u64, &url, &shared, &snapshot, rows, every, &aggregation, &expected).await
        }));
    }
    let started = Instant::now();
    let (mut per_second, mut rss) = (Vec::new(), Vec::new());
    let mut last = 0;
    while started.elapsed() < options.duration {
        std::thread::sleep(Duration::from_secs(1));
        let done = shared.lookups.load(Ordering::Relaxed) + shared.aggregations.load(Ordering::Relaxed);
        per_second.push(done - last);
        last = done;
        rss.push(rss_mib());
        progress(&format!(
            "{:>4} s: {:>8} statements/s, {:>7.1} MiB resident, {} errors, {} wrong",
            per_second.len(),
            per_second.last().copied().unwrap_or(0),
            rss.last().copied().unwrap_or(f64::NAN),
            shared.errors.load(Ordering::Relaxed),
            shared.wrong.load(Ordering::Relaxed)
        ));
    }
    shared.stop.store(true, Ordering::Relaxed);
    for task in tasks {
        if let Err(e) = runtime.block_on(task).map_err(|e| e.to_string()).and_then(|r| r) {
            shared.problem(&shared.errors, e);
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    running.shutdown();
    db.shutdown();
    let quarter = rss.get(rss.len() / 4).copied().unwrap_or(f64::NAN);
    let end = rss.last().copied().unwrap_or(f64::NAN);
    let first_problem = shared.first_problem.lock().unwrap_or_else(|p| p.into_inner()).clone();
    Ok(SoakReport {
        machine,
        clients: options.clients,
        seconds,
        lookups: shared.lookups.load(Ordering::Relaxed),
        aggregations: shared.aggregations.load(Ordering::Relaxed),
        errors: shared.errors.load(Ordering::Relaxed),
        wrong: shared.wrong.load(Ordering::Relaxed),
        first_problem,
        per_second,
        rss_growth: if quarter > 0.0 { end / quarter - 1.0 } else { 0.0 },
        rss_mib: rss,
    })
}

#[allow(clippy::too_many_arguments)]
async fn client_loop(
    client: u64,
    url: &str,
    shared: &Shared,
    snapshot: &numadb_storage::TableSnapshot,
    rows: u64,
    aggregation_every: u64,
    aggregation: &str,
    expected_aggregation: &[i64],
) -> Result<(), String> {
    let (connection_client, connection) =
        tokio_postgres::connect(url, tokio_postgres::NoTls).await.map_err(|e| format!("client {client}: {e}"))?;
    tokio::spawn(connection);
    let lookup = connection_client
        .prepare("SELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" = $1")
        .await
        .map_err(|e| format!("client {client}: {e}"))?;
    let aggregate = connection_client.prepare(aggregation).await.map_err(|e| format!("client {client}: {e}"))?;
    let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ client.wrapping_mul(0xA076_1D64_78BD_642F);
    let mut count = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        count += 1;
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        if aggregation_every > 0 && count.is_multiple_of(aggregation_every) {
            match connection_client.query(&aggregate, &[]).await {
                Ok(result) => {
                    let counts: Vec<i64> = result.iter().map(|r| r.get::<_, i64>(0)).collect();
                    if counts != expected_aggregation {
                        shared.problem(
                            &shared.wrong,
                            format!("aggregation: {counts:?}, expected {expected_aggregation:?}"),
                        );
                    }
                    shared.aggregations.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => shared.problem(&shared.errors, format!("aggregation: {e}")),
            }
            continue;
        }
        let key = (state % rows) as i32 + 1;
        match connection_client.query_opt(&lookup, &[&key]).await {
            Ok(Some(row)) => {
                let value: Option<i32> = row.get(0);
                let expected = snapshot.value(key as u64 - 1, 1);
                if expected != Some(value.map_or(Value::Null, |v| Value::Int(i64::from(v)))) {
                    shared.problem(&shared.wrong, format!("key {key}: {value:?}, expected {expected:?}"));
                }
                shared.lookups.fetch_add(1, Ordering::Relaxed);
            }
            Ok(None) => shared.problem(&shared.wrong, format!("key {key}: no row")),
            Err(e) => shared.problem(&shared.errors, format!("key {key}: {e}")),
        }
    }
    Ok(())
}

/// The report as text.
pub fn render(report: &SoakReport) -> String {
    let rates = &report.per_second;
    let min = rates.iter().copied().min().unwrap_or(0);
    let max = rates.iter().copied().max().unwrap_or(0);
    let total = report.lookups + report.aggregations;
    let rss_first = report.rss_mib.first().copied().unwrap_or(f64::NAN);
    let rss_max = report.rss_mib.iter().copied().fold(f64::NAN, f64::max);
    let rss_last = report.rss_mib.last().copied().unwrap_or(f64::NAN);
    format!(
        "machine: {}\nsoak: {} connections for {:.0} s: {} point lookups and {} aggregations ({:.0} statements/s, \
         {min}–{max} per second)\nerrors: {}, wrong answers: {}{}\nresident memory: {rss_first:.1} MiB after 1 s, \
         {rss_max:.1} MiB at most, {rss_last:.1} MiB at the end ({:+.1}% from a quarter of the run to the end)\n\
         verdict: {}\n",
        report.machine.line(),
        report.clients,
        report.seconds,
        report.lookups,
        report.aggregations,
        total as f64 / report.seconds.max(1e-9),
        report.errors,
        report.wrong,
        report.first_problem.as_ref().map_or(String::new(), |p| format!(" (first: {p})")),
        report.rss_growth * 100.0,
        if report.passed() { "passed" } else { "FAILED" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_soak_has_no_errors_and_no_wrong_answers() {
        let options = SoakOptions { rows: 20_000, clients: 8, duration: Duration::from_secs(2), aggregation_every: 20 };
        let report = run(&options, |_| {}).unwrap();
        assert_eq!(report.errors, 0, "{:?}", report.first_problem);
        assert_eq!(report.wrong, 0, "{:?}", report.first_problem);
        assert!(report.lookups > 0 && report.aggregations > 0);
        assert!(render(&report).contains("verdict"));
    }
}
