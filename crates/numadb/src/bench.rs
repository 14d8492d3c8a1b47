//! `numadb bench`: benchmarks that print numadb's figures beside a peer's measured in the same run.

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use numadb_bench::engine::{self, EngineOptions};
use numadb_bench::soak::{self, SoakOptions};
use numadb_bench::wire::{self, WireOptions};
use numadb_storage::IndexKind;

/// Benchmarks that compare numadb with peers measured in the same run, on this machine.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    benchmark: Benchmark,
}

#[derive(Subcommand, Debug)]
enum Benchmark {
    /// The engine: the thesis aggregation query (every skew k/6 and range_pred) against DuckDB on the same data
    /// and thread count, the scan rate against a streaming read of this machine, point lookups through the
    /// sorted and the hash index beside the memory latency, and bytes per row against raw integers.
    ///
    /// DuckDB runs through its Python package (`make deps` installs it into .venv; NUMADB_PYTHON names another
    /// interpreter). Both systems load identical data, so their answers must agree; the table says whether they do.
    Engine(EngineArgs),
    /// numadb serve against PostgreSQL 15 over the wire, in the same run on the same data, with pgbench: the
    /// thesis's point lookup (SELECT "C1" FROM "TBL_0" WHERE "C0" = $1, random keys, prepared) at several
    /// client counts; then the thesis aggregation over the wire against in-process.
    ///
    /// PostgreSQL runs as a private cluster (initdb in a temporary directory, a free port; as root, under the
    /// postgres user) with the same TBL_0 copied in; both servers listen on 127.0.0.1. Runs alternate between
    /// the servers; the table gives medians with min–max, the ratio, numadb's socket writes per transaction, and
    /// both servers' CPU per transaction. On a shared machine, compare spreads, not single runs.
    Wire(WireArgs),
    /// Many connections (56 by default, as the thesis's client) through tokio-postgres for a bounded time:
    /// prepared point lookups with random keys and every Nth statement the thesis aggregation, every answer
    /// checked against the table, the server's memory sampled each second. Exits 1 unless there were no errors,
    /// no wrong answers and memory stayed flat (within 10% from a quarter of the run to its end).
    Soak(SoakArgs),
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum IndexArg {
    /// Binary search over sorted keys (the thesis's SAP HANA; numadb's default).
    Sorted,
    /// Open addressing.
    Hash,
}

#[derive(Args, Debug)]
struct WireArgs {
    /// Rows per table.
    #[arg(long, default_value_t = 5_000_000)]
    rows: u64,
    /// pgbench client counts.
    #[arg(long, value_delimiter = ',', default_value = "2,8,32,56")]
    clients: Vec<usize>,
    /// pgbench threads (-j).
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds per pgbench run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Runs per client count and server.
    #[arg(long, default_value_t = 3)]
    repetitions: usize,
    /// numadb's primary-key index on TBL_0.
    #[arg(long, value_enum, default_value = "sorted")]
    index: IndexArg,
    /// Skip PostgreSQL (numadb's figures only).
    #[arg(long)]
    no_postgres: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct SoakArgs {
    /// Rows per table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Connections.
    #[arg(long, default_value_t = 56)]
    clients: usize,
    /// Seconds to run.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// One statement in this many is the thesis aggregation (0: none).
    #[arg(long, default_value_t = 200)]
    aggregation_every: u64,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct EngineArgs {
    /// Rows per table (the thesis used 50 million).
    #[arg(long, default_value_t = 50_000_000)]
    rows: u64,
    /// Timed runs per query, after one warm-up run.
    #[arg(long, default_value_t = 5)]
    repetitions: usize,
    /// The range_pred values to sweep.
    #[arg(long, value_delimiter = ',', default_value = "10000,100000,1000000")]
    range_preds: Vec<u64>,
    /// Point lookups to time.
    #[arg(long, default_value_t = 200_000)]
    lookups: usize,
    /// Skip the DuckDB comparison.
    #[arg(long)]
    no_duckdb: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.benchmark {
        Benchmark::Wire(args) => {
            let options = WireOptions {
                rows: args.rows,
                clients: args.clients,
                threads: args.threads.max(1),
                seconds: args.seconds.max(1),
                repetitions: args.repetitions.max(1),
                index: match args.index {
                    IndexArg::Sorted => IndexKind::Sorted,
                    IndexArg::Hash => IndexKind::Hash,
                },
                postgres: !args.no_postgres,
                ..WireOptions::default()
            };
            let report = wire::run(&options, |step| eprintln!("… {step}")).map_err(|e| anyhow::anyhow!(e))?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", wire::render(&report));
            }
            Ok(())
        }
        Benchmark::Soak(args) => {
            let options = SoakOptions {
                rows: args.rows,
                clients: args.clients.max(1),
                duration: Duration::from_secs(args.seconds.max(1)),
                aggregation_every: args.aggregation_every,
            };
            let report = soak::run(&options, |line| eprintln!("{line}")).map_err(|e| anyhow::anyhow!(e))?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", soak::render(&report));
            }
            if !report.passed() {
                std::process::exit(1);
            }
            Ok(())
        }
        Benchmark::Engine(args) => {
            let options = EngineOptions {
                rows: args.rows,
                repetitions: args.repetitions.max(1),
                range_preds: args.range_preds,
                lookups: args.lookups.max(1),
                duckdb: !args.no_duckdb,
                ..EngineOptions::default()
            };
            let report = engine::run(&options, |step| eprintln!("… {step}")).map_err(|e| anyhow::anyhow!(e))?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", engine::render(&report));
            }
            Ok(())
        }
    }
}
