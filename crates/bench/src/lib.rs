//! Benchmarks that compare numadb with peers measured in the same run, and describe the machine they ran on.
//!
//! - [`engine`]: the thesis aggregation query against DuckDB, scan rate against a streaming read, point lookups
//!   beside memory latency, bytes per row.
//! - [`queries`]: everyday analytical queries (top-N, GROUP BY over an expression, COUNT DISTINCT, a join)
//!   against DuckDB.
//! - [`duckdb`]: DuckDB (its Python package) as a peer on identical data.
//! - [`peers`]: DuckDB and PostgreSQL running the workload driver's workloads with the same clients, on identical
//!   data.
//! - [`reference`](mod@reference): memory-system references (streaming read bandwidth, pointer-chase latency).
//! - [`driver`]: the workload driver (N clients in-process or over the wire, per-second throughput, latency).
//! - [`experiment`]: TOML experiment matrices and the built-in thesis experiments, run into result sets.
//! - [`findings`] and [`report`]: what a result set says, as sentences, tables, charts and an HTML page.
//! - [`wire`]: numadb serve against PostgreSQL 15 with pgbench (point lookups at several client counts) and the
//!   thesis aggregation over the wire against in-process.
//! - [`postgres`]: a throwaway PostgreSQL cluster ([`postgres::TempPostgres`]), its clients, and pgbench.
//! - [`soak`]: many connections, mixed statements, every answer checked, memory sampled.

pub mod driver;
pub mod duckdb;
pub mod engine;
pub mod experiment;
pub mod findings;
pub mod peers;
pub mod postgres;
pub mod queries;
pub mod reference;
pub mod report;
pub mod soak;
pub mod wire;

use numadb_topology::Topology;
use serde::Serialize;

/// The machine a measurement ran on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// CPU model.
    pub cpu_model: String,
    /// Kernel release.
    pub kernel: String,
    /// Online CPUs, and those this process may use.
    pub cpus: usize,
    /// CPUs this process may use.
    pub allowed_cpus: usize,
    /// NUMA nodes.
    pub nodes: usize,
    /// Packages.
    pub packages: usize,
    /// Transparent huge page mode.
    pub transparent_hugepages: String,
    /// Automatic NUMA balancing.
    pub numa_balancing: String,
    /// The last-level cache seen from the first CPU, as the kernel reports it (in a VM, possibly more than the
    /// guest gets): what a benchmark's data must outgrow for its reads to come from DRAM.
    pub last_level_cache_bytes: Option<u64>,
}

impl Machine {
    /// Describes a topology.
    pub fn describe(topology: &Topology) -> Self {
        let info = &topology.machine;
        Machine {
            cpu_model: info.cpu_model.clone().unwrap_or_else(|| "unknown CPU".into()),
            kernel: info.kernel_release.clone().unwrap_or_else(|| "unknown".into()),
            cpus: topology.online_cpus().len(),
            allowed_cpus: topology.allowed.cpus.len(),
            nodes: topology.nodes.len(),
            packages: topology.package_count(),
            transparent_hugepages: info.transparent_hugepages.clone().unwrap_or_else(|| "unknown".into()),
            numa_balancing: info
                .numa_balancing
                .map_or("unknown".into(), |b| if b { "on".into() } else { "off".into() }),
            last_level_cache_bytes: topology.last_level_cache_bytes(),
        }
    }

    /// One line for a report header.
    pub fn line(&self) -> String {
        format!(
            "{} | {} CPUs ({} allowed) in {} package(s), {} NUMA node(s) | last-level cache {} | Linux {} | THP {} | NUMA balancing {}",
            self.cpu_model,
            self.cpus,
            self.allowed_cpus,
            self.packages,
            self.nodes,
            self.last_level_cache_bytes.map_or("unknown".into(), |bytes| format!("{} MiB", bytes >> 20)),
            self.kernel,
            self.transparent_hugepages,
            self.numa_balancing
        )
    }
}

/// The median of some measurements (sorts them).
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thesis_queries_split_six_predicates() {
        assert_eq!(
            engine::thesis_query(2, 10_000),
            "(SELECT COUNT(*) FROM \"TBL_0\" WHERE \"C1\" < 10000 OR \"C2\" < 10000) UNION ALL \
             (SELECT COUNT(*) FROM \"TBL_1\" WHERE \"C3\" < 10000 OR \"C4\" < 10000 OR \"C5\" < 10000 OR \"C6\" < 10000)"
        );
        assert!(!engine::thesis_query(6, 5).contains("TBL_1"));
        assert!(!engine::thesis_query(0, 5).contains("TBL_0"));
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn a_small_wire_run_against_postgresql() {
        let postgres = postgres::Binaries::find().is_ok();
        if !postgres {
            let message = "PostgreSQL is not installed (scripts/install-deps.sh installs it)";
            assert!(std::env::var("NUMADB_REQUIRE_TOOLS").as_deref() != Ok("1"), "{message}");
            eprintln!("skipped: {message}");
            return;
        }
        let options = wire::WireOptions {
            rows: 20_000,
            clients: vec![2],
            seconds: 1,
            repetitions: 1,
            aggregation_runs: 3,
            ..wire::WireOptions::default()
        };
        let report = wire::run(&options, |_| {}).unwrap();
        assert_eq!(report.results_agree, Some(true));
        let row = &report.lookups[0];
        assert_eq!(row.failed, 0);
        assert!(row.numadb_tps[0] > 0.0 && row.postgres_tps[0] > 0.0);
        assert!(row.numadb_writes_per_transaction < 1.1, "{}", row.numadb_writes_per_transaction);
        assert!(report.aggregation.in_process_ms > 0.0 && report.aggregation.wire_ms > 0.0);
        let text = wire::render(&report);
        assert!(text.contains("PostgreSQL"));
        assert!(text.contains("machine: "));
    }

    #[test]
    fn a_small_engine_run_agrees_with_duckdb_when_it_is_installed() {
        let options = engine::EngineOptions {
            rows: 20_000,
            repetitions: 1,
            range_preds: vec![1000],
            lookups: 100,
            duckdb: true,
            reference_bytes: 16 << 20,
        };
        let report = engine::run(&options, |_| {}).unwrap();
        assert_eq!(report.aggregation.len(), 7);
        assert!(report.bytes_per_row > 0.0 && report.bytes_per_row < 28.0);
        for row in &report.aggregation {
            assert!(row.scan_bytes > 0);
            if report.duckdb_unavailable.is_none() {
                assert_eq!(row.results_agree, Some(true), "counts differ from DuckDB at {}/{}", row.range_pred, row.k);
            }
        }
        // One reference sample before each round's first run and one after every run, all readings.
        let nearby = &report.nearby_reference_samples_bytes_per_s;
        assert_eq!(nearby.len(), options.repetitions * (report.aggregation.len() + 1));
        assert!(nearby.iter().all(|&rate| rate > 0.0), "{nearby:?}");
        assert!(report.aggregation.iter().all(|row| row.fraction_of_reference > 0.0));
        let text = engine::render(&report);
        assert!(text.contains("machine: "));
        assert!(text.contains("point lookups"));
    }
}
