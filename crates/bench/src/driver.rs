//! The workload driver: N client connections, each with its own session, sending one prepared statement in a loop
//! (the thesis's client: 56 connections, prepared statements, each waiting for its query before sending the
//! next). In-process clients drive `numadb_sql::Session`s; wire clients drive any PostgreSQL-protocol server
//! (`numadb serve`, or PostgreSQL itself as a peer) through the `postgres` crate.
//!
//! Throughput is sampled every second by a monitor thread (the thesis's method), so the report has a per-second
//! rate with its standard deviation; each client records its query latencies in an HdrHistogram.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use numadb_sql::Database;
use numadb_storage::Value;
use serde::Serialize;

use crate::engine::thesis_query;

/// Where the clients connect.
#[derive(Clone)]
pub enum Target {
    /// Sessions of an in-process database, with these settings applied to each.
    InProcess {
        /// The database.
        database: Arc<Database>,
        /// `SET` name/value pairs for every session.
        settings: Vec<(String, String)>,
    },
    /// A PostgreSQL-protocol server (a `postgres://` URL), with these `SET`s sent after connecting.
    Wire {
        /// Connection URL.
        url: String,
        /// `SET` name/value pairs (only for servers that know them).
        settings: Vec<(String, String)>,
    },
}

/// What the clients send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Workload {
    /// `SELECT "C1" FROM "TBL_0" WHERE "C0" = $1` with uniformly random keys in `1..=rows`.
    RandomAccess {
        /// Rows of TBL_0.
        rows: u64,
    },
    /// The thesis aggregation query with `k` of the six predicates on TBL_0.
    Aggregation {
        /// Predicates on TBL_0.
        k: u32,
        /// The predicate constant.
        range_pred: u64,
    },
}

impl Workload {
    /// The statement, with `$1` for the key of random access.
    pub fn sql(&self) -> String {
        match self {
            Workload::RandomAccess { .. } => "SELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" = $1".to_string(),
            Workload::Aggregation { k, range_pred } => thesis_query(*k, *range_pred),
        }
    }

    /// A short label.
    pub fn label(&self) -> String {
        match self {
            Workload::RandomAccess { .. } => "random access".into(),
            Workload::Aggregation { k, range_pred } => format!("aggregation {k}/6, range_pred {range_pred}"),
        }
    }
}

/// When the measured phase ends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Stop {
    /// After this long.
    Duration(Duration),
    /// After each connection has sent this many queries (the thesis: 512).
    QueriesPerConnection(u64),
}

/// One run.
#[derive(Debug, Clone, Serialize)]
pub struct RunSpec {
    /// What to send.
    pub workload: Workload,
    /// Client connections.
    pub connections: usize,
    /// Unmeasured warm-up.
    pub warmup: Duration,
    /// End of the measured phase.
    pub stop: Stop,
    /// Seed of the random keys.
    pub seed: u64,
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Latency {
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Maximum.
    pub max_us: f64,
}

/// What a run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunResult {
    /// Queries completed in the measured phase.
    pub queries: u64,
    /// Queries that failed.
    pub errors: u64,
    /// The first error's message.
    pub first_error: Option<String>,
    /// Measured seconds.
    pub seconds: f64,
    /// Queries per second over the measured phase.
    pub queries_per_s: f64,
    /// Queries completed in each whole second of the measured phase.
    pub per_second: Vec<u64>,
    /// Mean of `per_second`.
    pub per_second_mean: f64,
    /// Standard deviation of `per_second`.
    pub per_second_stddev: f64,
    /// Latency percentiles.
    pub latency: Latency,
}

/// One client connection.
trait Client {
    fn run(&mut self, key: Option<i32>) -> Result<(), String>;
}

struct InProcessClient {
    session: numadb_sql::Session,
}

impl Client for InProcessClient {
    fn run(&mut self, key: Option<i32>) -> Result<(), String> {
        let params: Vec<Value> = key.map(|k| Value::Int(i64::from(k))).into_iter().collect();
        self.session.execute_prepared("q", &params).map(|_| ()).map_err(|e| format!("{}: {}", e.sqlstate, e.message))
    }
}

struct WireClient {
    client: postgres::Client,
    statement: postgres::Statement,
}

impl Client for WireClient {
    fn run(&mut self, key: Option<i32>) -> Result<(), String> {
        let result = match key {
            Some(key) => self.client.query(&self.statement, &[&key]),
            None => self.client.query(&self.statement, &[]),
        };
        result.map(|_| ()).map_err(|e| e.to_string())
    }
}

fn connect(target: &Target, workload: &Workload) -> Result<Box<dyn Client + Send>, String> {
    let sql = workload.sql();
    match target {
        Target::InProcess { database, settings } => {
            let mut session = database.session();
            for (name, value) in settings {
                session.settings_mut().set(name, value).map_err(|e| e.message)?;
            }
            session.prepare("q", &sql, &[]).map_err(|e| format!("{}: {}", e.sqlstate, e.message))?;
            Ok(Box::new(InProcessClient { session }))
        }
        Target::Wire { url, settings } => {
            let mut client = postgres::Client::connect(url, postgres::NoTls).map_err(|e| e.to_string())?;
            for (name, value) in settings {
                client.batch_execute(&format!("SET {name} = '{value}'")).map_err(|e| e.to_string())?;
            }
            let statement = client.prepare(&sql).map_err(|e| e.to_string())?;
            Ok(Box::new(WireClient { client, statement }))
        }
    }
}

/// Runs a workload: connects every client, warms up, measures, and returns the counts and latencies.
pub fn run(target: &Target, spec: &RunSpec) -> Result<RunResult, String> {
    run_observed(target, spec, &mut || {})
}

/// [`run`], calling `at_measurement_start` between the warm-up and the measured phase, while no client has a query
/// in flight (to read counters there).
pub fn run_observed(
    target: &Target,
    spec: &RunSpec,
    at_measurement_start: &mut dyn FnMut(),
) -> Result<RunResult, String> {
    let connections = spec.connections.max(1);
    let clients: Vec<Box<dyn Client + Send>> =
        (0..connections).map(|_| connect(target, &spec.workload)).collect::<Result<_, _>>()?;
    let completed = AtomicU64::new(0);
    let errors = AtomicU64::new(0);
    let first_error = Mutex::new(None::<String>);
    let measuring = AtomicBool::new(false);
    let finished = AtomicBool::new(false);
    let start_barrier = Barrier::new(connections + 1);
    // Warm-up ends when every client has finished its query in flight (measure_barrier); the caller's callback
    // then sees a quiet system, and go_barrier starts the measured phase.
    let measure_barrier = Barrier::new(connections + 1);
    let go_barrier = Barrier::new(connections + 1);
    let histograms = Mutex::new(latency_histogram());
    let rows = match spec.workload {
        Workload::RandomAccess { rows } => rows.max(1),
        Workload::Aggregation { .. } => 0,
    };
    let mut per_second = Vec::new();
    let mut measured_seconds = 0.0;
    std::thread::scope(|scope| {
        for (index, mut client) in clients.into_iter().enumerate() {
            let (completed, errors, first_error, measuring, finished) =
                (&completed, &errors, &first_error, &measuring, &finished);
            let (start_barrier, measure_barrier, go_barrier, histograms) =
                (&start_barrier, &measure_barrier, &go_barrier, &histograms);
            scope.spawn(move || {
                let mut histogram = latency_histogram();
                let mut state = spec.seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                let mut next_key = || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (rows > 0).then(|| (state % rows + 1) as i32)
                };
                start_barrier.wait();
                // Warm-up: until the main thread says measurement starts.
                while !measuring.load(Ordering::Acquire) {
                    let _ = client.run(next_key());
                }
                measure_barrier.wait();
                go_barrier.wait();
                let mut sent = 0u64;
                loop {
                    if finished.load(Ordering::Acquire) {
                        break;
                    }
                    if let Stop::QueriesPerConnection(limit) = spec.stop
                        && sent >= limit
                    {
                        break;
                    }
                    let started = Instant::now();
                    match client.run(next_key()) {
                        Ok(()) => {
                            let micros = started.elapsed().as_micros().max(1) as u64;
                            let _ = histogram.record(micros.min(60_000_000));
                            completed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(message) => {
                            errors.fetch_add(1, Ordering::Relaxed);
                            first_error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(message);
                        }
                    }
                    sent += 1;
                }
                let _ = histograms.lock().unwrap_or_else(|p| p.into_inner()).add(&histogram);
            });
        }
        start_barrier.wait();
        std::thread::sleep(spec.warmup);
        measuring.store(true, Ordering::Release);
        measure_barrier.wait();
        at_measurement_start();
        go_barrier.wait();
        let started = Instant::now();
        let mut last = 0u64;
        let mut next_tick = started + Duration::from_secs(1);
        loop {
            let now = Instant::now();
            let done = match spec.stop {
                Stop::Duration(duration) => now.duration_since(started) >= duration,
                Stop::QueriesPerConnection(limit) => {
                    completed.load(Ordering::Relaxed) + errors.load(Ordering::Relaxed) >= limit * connections as u64
                }
            };
            if now >= next_tick {
                let count = completed.load(Ordering::Relaxed);
                per_second.push(count - last);
                last = count;
                next_tick += Duration::from_secs(1);
            }
            if done {
                break;
            }
            std::thread::sleep(Duration::from_millis(2).min(next_tick.saturating_duration_since(Instant::now())));
        }
        measured_seconds = started.elapsed().as_secs_f64();
        finished.store(true, Ordering::Release);
    });
    let histogram = histograms.into_inner().unwrap_or_else(|p| p.into_inner());
    Ok(summarise(
        completed.load(Ordering::Relaxed),
        errors.load(Ordering::Relaxed),
        first_error.into_inner().unwrap_or_else(|p| p.into_inner()),
        measured_seconds,
        per_second,
        &histogram,
    ))
}

/// The latency histogram every run records into: 1 µs to 60 s, three significant digits.
pub(crate) fn latency_histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// A run's summary from its counts, per-second completions and latency histogram (in µs). Peers measured
/// outside the driver are summarised by the same function, so that their figures mean the same.
pub(crate) fn summarise(
    queries: u64,
    errors: u64,
    first_error: Option<String>,
    seconds: f64,
    per_second: Vec<u64>,
    histogram: &Histogram<u64>,
) -> RunResult {
    let mean =
        if per_second.is_empty() { 0.0 } else { per_second.iter().sum::<u64>() as f64 / per_second.len() as f64 };
    let variance = if per_second.len() < 2 {
        0.0
    } else {
        per_second.iter().map(|&c| (c as f64 - mean).powi(2)).sum::<f64>() / (per_second.len() - 1) as f64
    };
    let at = |q: f64| if histogram.is_empty() { 0.0 } else { histogram.value_at_quantile(q) as f64 };
    RunResult {
        queries,
        errors,
        first_error,
        seconds,
        queries_per_s: queries as f64 / seconds.max(1e-9),
        per_second,
        per_second_mean: mean,
        per_second_stddev: variance.sqrt(),
        latency: Latency {
            mean_us: histogram.mean(),
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: histogram.max() as f64,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_process_clients_run_both_workloads() {
        let database = Database::new().unwrap();
        let mut session = database.session();
        numadb_sql::thesis::load_thesis_tables(&mut session, 20_000, 1, Some(4096), None).unwrap();
        let target = Target::InProcess { database, settings: vec![("numadb.stealing".into(), "any".into())] };
        for workload in [Workload::RandomAccess { rows: 20_000 }, Workload::Aggregation { k: 2, range_pred: 1000 }] {
            let spec = RunSpec {
                workload: workload.clone(),
                connections: 4,
                warmup: Duration::from_millis(20),
                stop: Stop::QueriesPerConnection(25),
                seed: 7,
            };
            let result = run(&target, &spec).unwrap();
            assert_eq!(result.queries, 100, "{workload:?}: {:?}", result.first_error);
            assert_eq!(result.errors, 0);
            assert!(result.latency.p50_us > 0.0 && result.latency.p50_us <= result.latency.max_us);
        }
    }

    #[test]
    fn failures_are_counted_not_fatal() {
        let database = Database::new().unwrap();
        let target = Target::InProcess { database, settings: vec![] };
        let spec = RunSpec {
            workload: Workload::RandomAccess { rows: 10 },
            connections: 1,
            warmup: Duration::ZERO,
            stop: Stop::QueriesPerConnection(3),
            seed: 1,
        };
        // TBL_0 does not exist: preparing fails, and says why.
        let error = run(&target, &spec).err().unwrap();
        assert!(error.contains("42P01"), "{error}");
    }
}
