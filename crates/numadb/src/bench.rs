//! `numadb bench`: benchmarks that print numadb's figures beside a peer's measured in the same run, and the
//! workload driver that runs the thesis's experiments as configuration matrices.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use numadb_bench::engine::{self, EngineOptions};
use numadb_bench::experiment::{self, ExperimentFile, ExperimentTarget, Overrides};
use numadb_bench::queries::{self, QueriesOptions};
use numadb_bench::soak::{self, SoakOptions};
use numadb_bench::wire::{self, WireOptions};
use numadb_bench::{findings, report};
use numadb_storage::IndexKind;
use numadb_topology::Topology;

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
    /// After every timed round the prober's read kernel also reads the very bytes each query's scans read, in
    /// their order ("of same bytes"): how fast this machine's memory serves that access pattern (a selective
    /// scan's scattered blocks stream slower than one long read), and how much of it the scans get. It is an
    /// upper bound for the scans: that kernel decodes nothing, and its loads are light enough for the CPU to run
    /// several blocks ahead, which a decoding loop cannot.
    ///
    /// DuckDB runs through its Python package (`make deps` installs it into .venv; NUMADB_PYTHON names another
    /// interpreter). Both systems load identical data, so their answers must agree; the table says whether they do.
    Engine(EngineArgs),
    /// Everyday analytical queries beyond the thesis's workloads against DuckDB on the same data and thread
    /// count: top-10 by a column (with and without a filter), aggregates over a filter, GROUP BY over an
    /// expression, COUNT(DISTINCT …), a filter over arithmetic, BETWEEN, IN (a list) and abs over arithmetic, a
    /// boolean CASE in WHERE, a CASE summed per group, double precision functions (sqrt, round, floor),
    /// aggregates with FILTER per group, COUNT(DISTINCT) of a column, a join, a filter and GROUP BY over a
    /// subquery in FROM, SELECT DISTINCT, a GROUP BY of many groups (a twenty-fifth of the rows), IN (subquery)
    /// over an expression, and a correlated scalar subquery and an EXISTS from a few outer rows.
    ///
    /// These go beyond numadb's scan kernels (expressions evaluated a block at a time, grouping, joins,
    /// subqueries), so the ratios show where numadb stands outside the thesis query. Every query has a total
    /// order: the table says whether both systems returned the same rows (integers exactly, doubles to 1e-9).
    Queries(QueriesArgs),
    /// Runs an experiment: every configuration (table placement, worker layout, stealing, binding, domain
    /// granularity) × every workload (random access; aggregation at each skew and range predicate), with N client
    /// connections sending prepared statements, in-process or to a `numadb serve` over the wire.
    ///
    /// EXPERIMENT is a built-in name (see `numadb bench list`) or a TOML file (docs/experiments.md). Each cell
    /// reports per-second throughput with its standard deviation, latency percentiles, the bytes each domain read
    /// from each node and stolen tasks. The report (findings as sentences, figures, tables, CSV, JSON and one
    /// self-contained report.html) goes to --out.
    Run(RunArgs),
    /// Lists the built-in experiments, or prints one as TOML to start a file of your own from.
    List {
        /// Print this experiment's TOML.
        name: Option<String>,
    },
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

#[derive(Args, Debug)]
struct RunArgs {
    /// A built-in experiment's name or a TOML file.
    experiment: String,
    /// Rows per table (overrides the file).
    #[arg(long)]
    rows: Option<u64>,
    /// Client connections (overrides the file; the thesis used 56).
    #[arg(long)]
    connections: Option<usize>,
    /// Measured seconds per cell (overrides the file).
    #[arg(long, conflicts_with = "queries_per_connection")]
    duration: Option<f64>,
    /// Queries per connection per cell instead of a duration (the thesis: 512).
    #[arg(long)]
    queries_per_connection: Option<u64>,
    /// Unmeasured seconds before each cell.
    #[arg(long)]
    warmup: Option<f64>,
    /// Run against a `numadb serve` at this URL (postgres://user@host:port/db) instead of in-process.
    #[arg(long)]
    target: Option<String>,
    /// Also run the workloads, with the same clients and identical data, on a peer: `duckdb` (its Python
    /// package), `postgres` (a throwaway local cluster) or `postgres=URL`. Repeatable; the report gives ratios.
    #[arg(long, value_name = "PEER")]
    compare: Vec<experiment::Peer>,
    /// Where to write the report (default numadb-out/bench-<experiment>-<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seconds for a short memory probe before the experiment, whose latency and bandwidth matrices the report
    /// shows beside the results (0: no probe).
    #[arg(long, value_name = "SECONDS", default_value_t = 15.0)]
    probe_budget: f64,
    /// Print the result set and findings as JSON instead of the summary.
    #[arg(long)]
    json: bool,
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
struct QueriesArgs {
    /// Rows per table.
    #[arg(long, default_value_t = 5_000_000)]
    rows: u64,
    /// Timed runs per query, after three warm-up runs (in both systems).
    #[arg(long, default_value_t = 5)]
    repetitions: usize,
    /// Skip the DuckDB comparison.
    #[arg(long)]
    no_duckdb: bool,
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
        Benchmark::Run(args) => run_experiment(args),
        Benchmark::List { name: Some(name) } => {
            let (_, text) = experiment::BUILTIN
                .iter()
                .find(|(n, _)| *n == name)
                .with_context(|| format!("no built-in experiment {name:?}; `numadb bench list` shows them"))?;
            out!("{text}");
            Ok(())
        }
        Benchmark::List { name: None } => {
            for (name, _) in experiment::BUILTIN {
                let file = experiment::builtin(name).expect("built-in");
                let summary = file.description.split(". ").next().unwrap_or_default().trim_end_matches('.');
                outln!(
                    "{name:<16} {} configuration(s) × {} workload(s): {summary}.",
                    file.configurations.len(),
                    file.expanded_workloads().len()
                );
            }
            outln!("\nnumadb bench list NAME prints one as TOML; numadb bench run NAME|FILE runs it.");
            Ok(())
        }
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
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                out!("{}", wire::render(&report));
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
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                out!("{}", soak::render(&report));
            }
            if !report.passed() {
                std::process::exit(1);
            }
            Ok(())
        }
        Benchmark::Queries(args) => {
            let options = QueriesOptions {
                rows: args.rows.max(1),
                repetitions: args.repetitions.max(1),
                duckdb: !args.no_duckdb,
            };
            let report = queries::run(&options, |step| eprintln!("… {step}")).map_err(|e| anyhow::anyhow!(e))?;
            if args.json {
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                out!("{}", queries::render(&report));
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
                outln!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                out!("{}", engine::render(&report));
            }
            Ok(())
        }
    }
}

/// Reads a built-in experiment or a TOML file.
fn load_experiment(name_or_path: &str) -> anyhow::Result<ExperimentFile> {
    if let Some(file) = experiment::builtin(name_or_path) {
        return Ok(file);
    }
    let path = std::path::Path::new(name_or_path);
    if !path.exists() {
        let names: Vec<&str> = experiment::BUILTIN.iter().map(|(n, _)| *n).collect();
        bail!("{name_or_path:?} is neither a built-in experiment ({}) nor a file", names.join(", "));
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    ExperimentFile::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

fn run_experiment(args: RunArgs) -> anyhow::Result<()> {
    let mut file = load_experiment(&args.experiment)?;
    file.override_with(&Overrides {
        rows: args.rows,
        connections: args.connections,
        duration_seconds: args.duration,
        queries_per_connection: args.queries_per_connection,
        warmup_seconds: args.warmup,
    })
    .map_err(|e| anyhow::anyhow!(e))?;
    let topology = Topology::from_system().context("reading this machine's topology")?;
    let target = match &args.target {
        Some(url) => ExperimentTarget::Wire(url.clone()),
        None => ExperimentTarget::InProcess(
            numadb_sql::Database::new().map_err(|e| anyhow::anyhow!("{}: {}", e.sqlstate, e.message))?,
        ),
    };
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("numadb-out").join(format!("bench-{}-{}", file.name, numadb_report::utc_now()))
    });
    let probe = if args.probe_budget > 0.0 {
        if !args.json {
            eprintln!("numadb bench: a short memory probe first (--probe-budget {:.0}; 0 skips it)", args.probe_budget);
        }
        Some(crate::tour::short_probe(args.probe_budget, &out.join("probe"), args.json)?)
    } else {
        None
    };
    let bar = progress_bar(file.cell_count() as u64, args.json);
    let mut results = experiment::run(&file, &target, &topology, |progress| {
        bar.set_position(progress.cells_done as u64);
        bar.set_message(progress.message);
    })
    .map_err(|e| anyhow::anyhow!(e))?;
    if !args.compare.is_empty() {
        compare_with_peers(&mut results, &args.compare, &target, &bar)?;
    }
    bar.finish_and_clear();
    let findings = findings::findings(&results);
    let machine = numadb_report::MachineBlock::new(&topology, numadb_placement::sys::page_size());
    let written = report::write_report(&out, &results, &findings, &machine, |page| match &probe {
        Some(document) => crate::tour::probe_sections(page, document).map_err(|e| e.to_string()),
        None => Ok(()),
    })
    .map_err(|e| anyhow::anyhow!(e))?
    .len();
    if args.json {
        outln!("{}", numadb_report::to_json(&report::Document { results: &results, findings: &findings }).trim_end());
    } else {
        if let Some(document) = &probe {
            out!("{}", crate::tour::probe_text(document));
            outln!();
        }
        out!("{}", report::text(&results, &findings));
    }
    eprintln!("numadb bench: wrote {written} files into {} (open report.html)", out.display());
    Ok(())
}

/// Runs the experiment's workloads on the peers. In-process, the peers load the very tables numadb ran on; against
/// a server, identical tables are generated here from the same seed.
pub fn compare_with_peers(
    results: &mut experiment::ResultSet,
    peers: &[experiment::Peer],
    target: &ExperimentTarget,
    bar: &indicatif::ProgressBar,
) -> anyhow::Result<()> {
    let database = match target {
        ExperimentTarget::InProcess(database) => database.clone(),
        ExperimentTarget::Wire(_) => {
            let database = numadb_sql::Database::new().map_err(|e| anyhow::anyhow!("{}: {}", e.sqlstate, e.message))?;
            bar.set_message("generating the tables for the peers");
            numadb_sql::thesis::load_thesis_tables(
                &mut database.session(),
                results.experiment.rows,
                results.experiment.seed,
                None,
                None,
            )
            .map_err(|e| anyhow::anyhow!("{}: {}", e.sqlstate, e.message))?;
            database
        }
    };
    let mut session = database.session();
    experiment::compare(results, peers, &mut session, |message| bar.set_message(message))
        .map_err(|e| anyhow::anyhow!(e))
}

/// A progress bar over the cells of an experiment, on stderr; hidden for JSON output or without a terminal.
pub fn progress_bar(cells: u64, hidden: bool) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(cells);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{prefix:>7} [{bar:20}] {pos}/{len} cells {elapsed}/~{eta} {wide_msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix("bench");
    if hidden {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar
}
