//! `numadb bench`: benchmarks that print numadb's figures beside a peer's measured in the same run.

use clap::{Args, Subcommand};
use numadb_bench::engine::{self, EngineOptions};

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
