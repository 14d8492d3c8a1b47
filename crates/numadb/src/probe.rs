//! `numadb probe`: latency and bandwidth between every CPU domain and every memory node, the cache curve and the
//! loaded-latency curve, with likwid-bench and cross-checks in the same run; tables on the terminal, and JSON,
//! CSV, SVG and PNG charts and one self-contained HTML page in an output directory.
//!
//! This module only turns the command line into measurement settings, runs the measurements of `numadb-probe`
//! and hands the results to [`render`]; it measures nothing itself.

pub(crate) mod render;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use numadb_placement::HugePages;
use numadb_probe::bandwidth::{self, BandwidthMatrix, BandwidthOptions};
use numadb_probe::cache::{self, CacheCurve};
use numadb_probe::chain::ChainLayout;
use numadb_probe::clock::{CpuIdentity, estimate_core_hz};
use numadb_probe::latency::{self, LatencyMatrix, LatencyOptions};
use numadb_probe::loaded::{self, LoadedCurve, LoadedOptions, MLC_DELAYS_CYCLES};
use numadb_probe::peers::{self, CROSS_CHECK_TOLERANCE, CrossCheck, LikwidRun};
use numadb_probe::plan::{self, PlanOverrides, RunPlan};
use numadb_probe::quiet::{CpuTimes, Interference};
use numadb_probe::stats::Summary;
use numadb_probe::{Isa, MatrixAxes, PROBE_SCHEMA_VERSION, Progress, Traffic};
use numadb_report::MachineBlock;
use numadb_topology::{DomainGranularity, Topology};
use serde::Serialize;

/// Measure memory latency and bandwidth between every CPU domain and every memory node.
///
/// Without a subcommand, runs everything that fits the time budget (`--budget`, about a minute by default):
/// latency matrices with 4 KiB and 2 MiB pages, bandwidth matrices for read, copy (1:1), add (2:1) and
/// non-temporal write traffic, the cache curve and the loaded-latency sweep; prints the tables and writes JSON,
/// CSV, SVG and PNG charts and a self-contained HTML report into `--out`.
///
/// Methodology. Latency: a thread pinned to each CPU of a domain in turn follows a chain of pointers through a
/// random cyclic permutation of the cache lines of a buffer bound to the memory node. The chain makes stride/64
/// passes, each visiting one line per stride-sized block, so that no hardware prefetcher (adjacent-line included)
/// can help, and with a TLB window it finishes one window before moving to the next (multichase's defaults:
/// 256 B stride, 256 KiB window); `--window whole` makes every hop a TLB miss. Bandwidth: one pinned thread per
/// CPU of the domain streams through its own buffer on the node with AVX-512, AVX2 or portable kernels chosen at
/// run time; MB/s = 10^6 bytes read plus written per second. Every figure is the median of several samples after a
/// discarded warm-up, shown with its spread; repetitions more than 10% apart are flagged. Every sample's thread is
/// checked (getcpu) to have stayed on its CPU, and every buffer is checked (move_pages) to be on its node.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ProbeArgs {
    #[command(subcommand)]
    command: Option<ProbeCommand>,
    /// Time budget of the full run, in seconds; settings are scaled down (shorter samples, fewer repetitions and
    /// points) until the estimate fits.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    budget: f64,
    /// Buffer size of the matrices (per node for latency, per cell for bandwidth); default 8× the last-level cache,
    /// at least 1 GiB, at most a quarter of the smallest node.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    buffer: Option<usize>,
    /// Largest working set of the cache curve.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "2G")]
    curve_max: usize,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Subcommand, Debug)]
enum ProbeCommand {
    /// Latency matrix: pointer-chase latency from every CPU of every domain to every memory node (thesis tables
    /// 1, 2, 5, 6: min, average and max over the domain's CPUs, min and max as offsets from the average).
    Latency(LatencyArgs),
    /// Bandwidth matrix: all CPUs of a domain stream through buffers on a node, in MB/s (thesis tables 3, 4, 7, 8).
    Bandwidth(BandwidthArgs),
    /// Loaded latency: one CPU chases pointers while the others stream with a sweep of injection delays (MLC's
    /// latency-versus-bandwidth curve).
    Loaded(LoadedArgs),
    /// Cache curve: latency for working sets from 4 KiB to 2 GiB, with the L1, L2, L3 and DRAM plateaus marked
    /// against the cache sizes the topology reports and the cliffs the measurement shows.
    Cache(CacheArgs),
    /// Peers in the same run: likwid-bench's load and copy kernels beside the prober's with the same buffer and
    /// thread counts (and the ratio), the L1 plateau against the documented L1 latency in cycles, and the cache
    /// curve's DRAM plateau against the latency matrix.
    Peers(PeersArgs),
}

/// Options every probe command takes.
#[derive(Args, Debug, Clone)]
struct CommonArgs {
    /// How CPUs are grouped into matrix rows: node (default), package or l3.
    #[arg(long, value_name = "GRANULARITY", default_value = "node", global = true)]
    domains: DomainGranularity,
    /// Only these memory nodes as columns (comma-separated ids; default all with memory).
    #[arg(long, value_name = "NODES", value_delimiter = ',', global = true)]
    nodes: Vec<u32>,
    /// Duration of one sample, in milliseconds (default: 200 for matrices, 100 for the cache curve).
    #[arg(long, value_name = "MS", global = true)]
    sample_ms: Option<u64>,
    /// Samples per measurement, after one discarded warm-up (default 5; 3 for the cache curve).
    #[arg(long, value_name = "N", global = true)]
    repetitions: Option<usize>,
    /// Print one JSON document on standard output instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// Write probe.json, CSV files, SVG and PNG charts and report.html into DIR (the full run always writes, by default
    /// into numadb-out/probe-<UTC time>).
    #[arg(long, value_name = "DIR", global = true)]
    out: Option<PathBuf>,
    /// Seed of the chains' random order.
    #[arg(long, value_name = "N", default_value_t = plan::DEFAULT_SEED, global = true)]
    seed: u64,
}

/// Page size of the buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Pages {
    /// 4 KiB base pages only (`MADV_NOHUGEPAGE`).
    #[value(name = "4k")]
    Base,
    /// 2 MiB transparent huge pages (`MADV_HUGEPAGE`; the report says how much of the buffer got them).
    #[value(name = "2m", alias = "thp")]
    Huge,
}

impl Pages {
    fn huge_pages(self) -> HugePages {
        match self {
            Pages::Base => HugePages::Never,
            Pages::Huge => HugePages::Transparent,
        }
    }
}

/// The pointer chase's shape.
#[derive(Args, Debug, Clone)]
struct ChaseArgs {
    /// Page size: 4k or 2m (transparent huge pages).
    #[arg(long, value_enum, default_value = "4k")]
    pages: Pages,
    /// TLB locality: the chain finishes a window of this size before the next; `whole` randomises across the whole
    /// buffer (a TLB miss on nearly every hop with 4 KiB pages).
    #[arg(long, value_name = "SIZE|whole", default_value = "256K", value_parser = parse_window)]
    window: usize,
    /// Each pass of the chain visits one line per block of this size (64 = every line in one pass, which lets the
    /// adjacent-line prefetcher help).
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value = "256")]
    stride: usize,
}

#[derive(Args, Debug)]
struct LatencyArgs {
    /// Buffer per node (default as for the full run).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    buffer: Option<usize>,
    #[command(flatten)]
    chase: ChaseArgs,
}

#[derive(Args, Debug)]
struct BandwidthArgs {
    /// Total buffer per cell, split evenly over the domain's threads (likwid-bench's convention).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    buffer: Option<usize>,
    /// Traffic kinds: read, copy (1:1), add (2:1), write (non-temporal); comma-separated.
    #[arg(long, value_name = "KINDS", value_delimiter = ',', default_value = "read,copy,add,write")]
    traffic: Vec<Traffic>,
    /// Kernel variant: avx512, avx2 or scalar (default: the widest this CPU runs).
    #[arg(long, value_name = "ISA")]
    isa: Option<Isa>,
    /// Page size: 4k or 2m.
    #[arg(long, value_enum, default_value = "4k")]
    pages: Pages,
}

#[derive(Args, Debug)]
struct LoadedArgs {
    /// The chaser's chain, and the loaders' total buffer.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    buffer: Option<usize>,
    /// What the loaders do: read, copy, add or write.
    #[arg(long, value_name = "KIND", default_value = "read")]
    traffic: Traffic,
    /// Injection delays in cycles (default: MLC's 19 delays from 0 to 20000).
    #[arg(long, value_name = "CYCLES", value_delimiter = ',')]
    delays: Vec<u64>,
    /// The chasing CPU (default: the first allowed CPU); the other allowed CPUs load.
    #[arg(long, value_name = "CPU")]
    cpu: Option<u32>,
    /// The node of every buffer (default: the chasing CPU's node).
    #[arg(long, value_name = "NODE")]
    node: Option<u32>,
    #[command(flatten)]
    chase: ChaseArgs,
}

#[derive(Args, Debug)]
struct CacheArgs {
    /// Smallest working set.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "4K")]
    min: usize,
    /// Largest working set.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "2G")]
    max: usize,
    /// Points per doubling of the working set.
    #[arg(long, value_name = "N", default_value_t = 1)]
    steps: usize,
    /// The CPU (default: the first allowed CPU).
    #[arg(long, value_name = "CPU")]
    cpu: Option<u32>,
    /// The node (default: the CPU's node).
    #[arg(long, value_name = "NODE")]
    node: Option<u32>,
    #[command(flatten)]
    chase: ChaseArgs,
}

#[derive(Args, Debug)]
struct PeersArgs {
    /// Total buffer of both tools' bandwidth runs, and the latency matrix's buffer (default 1 GiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    buffer: Option<usize>,
    /// Thread counts to compare, comma-separated (default: all CPUs of the first package; `1,2` adds one thread).
    #[arg(long, value_name = "N", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Traffic to compare: read (likwid-bench's load kernels), copy (its copy kernels), or both.
    #[arg(long, value_name = "KINDS", value_delimiter = ',', default_value = "read,copy")]
    traffic: Vec<Traffic>,
    /// Page size of the latency cross-checks.
    #[arg(long, value_enum, default_value = "4k")]
    pages: Pages,
}

/// The document every probe command produces (`--json`, and `probe.json` in the output directory).
#[derive(Debug, Serialize)]
pub struct ProbeDocument {
    /// Version of this document's layout.
    pub schema_version: u32,
    /// The numadb version that measured.
    pub numadb_version: &'static str,
    /// When the run started (seconds since the Unix epoch, UTC).
    pub started_unix_s: u64,
    /// The command that ran (`probe`, `probe latency`, …).
    pub command: String,
    /// The machine.
    pub machine: MachineBlock,
    /// The CPU as CPUID identifies it.
    pub cpu: Option<CpuIdentity>,
    /// The core clock measured with a dependent-add chain, in Hz.
    pub core_hz: Option<f64>,
    /// The widest kernel variant the CPU runs.
    pub best_isa: Isa,
    /// The plan of a full run.
    pub plan: Option<RunPlan>,
    /// Latency matrices (4 KiB pages first).
    pub latency: Vec<LatencyMatrix>,
    /// Bandwidth matrices, one per traffic kind.
    pub bandwidth: Vec<BandwidthMatrix>,
    /// The cache curve.
    pub cache: Option<CacheCurve>,
    /// The loaded-latency sweep.
    pub loaded: Option<LoadedCurve>,
    /// likwid-bench beside the prober.
    pub peers: Vec<PeerComparison>,
    /// Latency cross-checks.
    pub cross_checks: Vec<CrossCheck>,
    /// The CPU time the rest of the machine took during the run.
    pub interference: Option<Interference>,
    /// Everything a reader must know before trusting a figure.
    pub warnings: Vec<String>,
    /// Wall time of the run.
    pub elapsed_s: f64,
}

/// The prober and likwid-bench on the same buffer and threads.
#[derive(Debug, Serialize)]
pub struct PeerComparison {
    /// read or copy.
    pub traffic: Traffic,
    /// Threads of both tools.
    pub threads: usize,
    /// The CPUs of the prober's threads (likwid-bench's first hardware threads of socket 0).
    pub cpus: Vec<u32>,
    /// Total buffer.
    pub buffer_bytes: usize,
    /// The prober's MB/s: its samples before, between and after likwid-bench's runs, together.
    pub probe_mb_per_s: Option<Summary>,
    /// likwid-bench's runs.
    pub likwid: Vec<LikwidRun>,
    /// The best likwid-bench kernel and the median of its runs.
    pub likwid_best: Option<(String, f64)>,
    /// prober median / likwid-bench best.
    pub ratio: Option<f64>,
}

pub fn run(args: ProbeArgs) -> anyhow::Result<()> {
    let json = args.common.json;
    let (document, out) = measure(args)?;
    if json {
        outln!("{}", numadb_report::to_json(&document).trim_end());
    } else {
        out!("{}", render::text(&document));
    }
    if let Some(dir) = out {
        let written = render::write_files(&dir, &document)?;
        eprintln!("numadb probe: wrote {} files into {} (open report.html)", written.len(), dir.display());
    }
    Ok(())
}

/// Runs what the arguments ask for and returns the document, and the output directory when one is due (always
/// for a full run, with `--out` otherwise). Shows a progress bar unless `--json`.
pub fn measure(args: ProbeArgs) -> anyhow::Result<(ProbeDocument, Option<PathBuf>)> {
    let started = Instant::now();
    let topology = Topology::from_system().context("reading this machine's topology")?;
    let common = args.common.clone();
    let axes = MatrixAxes::of(&topology, common.domains)?.restrict_nodes(&common.nodes);
    if axes.domains.is_empty() || axes.nodes.is_empty() {
        bail!("nothing to measure: no domain with an allowed CPU, or no memory node (check --nodes)");
    }
    let default_buffer = plan::default_buffer_bytes(&topology);
    let mut document = ProbeDocument {
        schema_version: PROBE_SCHEMA_VERSION,
        numadb_version: env!("CARGO_PKG_VERSION"),
        started_unix_s: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        command: String::new(),
        machine: MachineBlock::new(&topology, numadb_placement::sys::page_size()),
        cpu: CpuIdentity::from_system(),
        core_hz: None,
        best_isa: Isa::best(),
        plan: None,
        latency: Vec::new(),
        bandwidth: Vec::new(),
        cache: None,
        loaded: None,
        peers: Vec::new(),
        cross_checks: Vec::new(),
        interference: None,
        warnings: Vec::new(),
        elapsed_s: 0.0,
    };
    let cpu_times_before = CpuTimes::now();
    let bar = Bar::new(!common.json);
    let out = match args.command {
        None => {
            document.command = "probe".into();
            full_run(&topology, &axes, &args, default_buffer, &common, &bar, &mut document)?;
            Some(common.out.clone().unwrap_or_else(default_out_dir))
        }
        Some(ProbeCommand::Latency(latency_args)) => {
            document.command = "probe latency".into();
            let options = chase_options(
                latency_args.buffer.unwrap_or(default_buffer),
                &latency_args.chase,
                &common,
                Duration::from_millis(200),
                5,
            );
            bar.start("latency", latency::planned_samples(&axes, &options));
            document.latency.push(latency::measure_matrix(&axes, &options, &bar)?);
            common.out.clone()
        }
        Some(ProbeCommand::Bandwidth(bandwidth_args)) => {
            document.command = "probe bandwidth".into();
            let isa = bandwidth_args.isa.unwrap_or_else(Isa::best);
            if !isa.is_available() {
                bail!("this CPU cannot run {} kernels (it runs: {:?})", isa.name(), Isa::available());
            }
            for &traffic in &bandwidth_args.traffic {
                let options = BandwidthOptions {
                    buffer_bytes: bandwidth_args.buffer.unwrap_or(default_buffer),
                    traffic,
                    isa,
                    huge_pages: bandwidth_args.pages.huge_pages(),
                    sample: common.sample_ms.map_or(Duration::from_millis(200), Duration::from_millis),
                    repetitions: common.repetitions.unwrap_or(5),
                };
                bar.start(&format!("{} bandwidth", traffic.name()), bandwidth::planned_samples(&axes, &options));
                document.bandwidth.push(bandwidth::measure_matrix(&axes, &options, &bar)?);
            }
            common.out.clone()
        }
        Some(ProbeCommand::Loaded(loaded_args)) => {
            document.command = "probe loaded".into();
            let buffer = loaded_args.buffer.unwrap_or(default_buffer);
            let chase = chase_options(buffer, &loaded_args.chase, &common, Duration::from_millis(200), 5);
            let options = LoadedOptions {
                chase,
                loader_bytes: buffer,
                traffic: loaded_args.traffic,
                isa: Isa::best(),
                delays_cycles: if loaded_args.delays.is_empty() {
                    MLC_DELAYS_CYCLES.to_vec()
                } else {
                    loaded_args.delays.clone()
                },
            };
            let (cpu, node) = cpu_and_node(&topology, &axes, loaded_args.cpu, loaded_args.node)?;
            let loaders: Vec<u32> = topology.allowed.cpus.iter().filter(|&c| c != cpu).collect();
            bar.start("loaded latency", loaded::planned_samples(&options));
            document.loaded = Some(loaded::measure_curve(cpu, &loaders, node, &options, &bar)?);
            common.out.clone()
        }
        Some(ProbeCommand::Cache(cache_args)) => {
            document.command = "probe cache".into();
            let options = chase_options(cache_args.max, &cache_args.chase, &common, Duration::from_millis(100), 3);
            let sizes = cache::log_sizes(cache_args.min, cache_args.max, cache_args.steps);
            let (cpu, node) = cpu_and_node(&topology, &axes, cache_args.cpu, cache_args.node)?;
            document.core_hz = estimate_core_hz();
            bar.start("cache curve", (sizes.len() * (options.repetitions + 1)) as u64);
            document.cache = Some(cache::measure_curve(&topology, cpu, node, &sizes, &options, &bar)?);
            document.cross_checks.extend(l1_check(&document));
            common.out.clone()
        }
        Some(ProbeCommand::Peers(peers_args)) => {
            document.command = "probe peers".into();
            peers_run(&topology, &axes, &peers_args, &common, &bar, &mut document)?;
            common.out.clone()
        }
    };
    bar.finish();
    document.elapsed_s = started.elapsed().as_secs_f64();
    document.interference = cpu_times_before.zip(CpuTimes::now()).and_then(|(b, a)| Interference::between(&b, &a));
    document.warnings.extend(render::warnings(&document));
    Ok((document, out))
}

/// `numadb probe` with no subcommand: everything that fits the budget.
fn full_run(
    topology: &Topology,
    axes: &MatrixAxes,
    args: &ProbeArgs,
    default_buffer: usize,
    common: &CommonArgs,
    bar: &Bar,
    document: &mut ProbeDocument,
) -> anyhow::Result<()> {
    let buffer = args.buffer.unwrap_or(default_buffer);
    if !(0.0..=86_400.0 * 7.0).contains(&args.budget) {
        anyhow::bail!("--budget {} is not a number of seconds between 0 and a week", args.budget);
    }
    let budget = Duration::from_secs_f64(args.budget);
    let overrides = PlanOverrides {
        sample: common.sample_ms.map(Duration::from_millis),
        repetitions: common.repetitions,
        seed: Some(common.seed),
    };
    let run_plan = RunPlan::fit(axes, buffer, args.curve_max, budget, overrides);
    document.plan = Some(run_plan.clone());
    let total = latency::planned_samples(axes, &run_plan.latency)
        + run_plan.latency_huge.as_ref().map_or(0, |o| latency::planned_samples(axes, o))
        + run_plan.bandwidth.iter().map(|o| bandwidth::planned_samples(axes, o)).sum::<u64>()
        + (run_plan.curve_sizes.len() * (run_plan.curve.repetitions + 1)) as u64
        + run_plan.loaded.as_ref().map_or(0, loaded::planned_samples);
    if !common.json {
        eprintln!(
            "numadb probe: {} domain(s) × {} node(s), buffers of {}, estimated {:.0} s (budget {:.0} s){}",
            axes.domains.len(),
            axes.nodes.len(),
            numadb_report::bytes(buffer as u64),
            run_plan.estimate.as_secs_f64(),
            budget.as_secs_f64(),
            if run_plan.reductions.is_empty() {
                String::new()
            } else {
                format!("; to fit: {}", run_plan.reductions.join(", "))
            }
        );
    }
    bar.start("probe", total);
    document.core_hz = estimate_core_hz();
    document.latency.push(latency::measure_matrix(axes, &run_plan.latency, bar)?);
    if let Some(options) = &run_plan.latency_huge {
        document.latency.push(latency::measure_matrix(axes, options, bar)?);
    }
    for options in &run_plan.bandwidth {
        document.bandwidth.push(bandwidth::measure_matrix(axes, options, bar)?);
    }
    let (cpu, node) = cpu_and_node(topology, axes, None, None)?;
    if !run_plan.curve_sizes.is_empty() {
        document.cache = Some(cache::measure_curve(topology, cpu, node, &run_plan.curve_sizes, &run_plan.curve, bar)?);
    }
    if let Some(options) = &run_plan.loaded {
        let loaders: Vec<u32> = topology.allowed.cpus.iter().filter(|&c| c != cpu).collect();
        document.loaded = Some(loaded::measure_curve(cpu, &loaders, node, options, bar)?);
    }
    document.cross_checks.extend(l1_check(document));
    document.cross_checks.extend(dram_check(document, axes, cpu, node));
    Ok(())
}

/// Extra runs of likwid-bench's best kernel per comparison, so that its figure is a median of three like ours.
const LIKWID_BEST_REPEATS: usize = 2;

/// `numadb probe peers`.
fn peers_run(
    topology: &Topology,
    axes: &MatrixAxes,
    args: &PeersArgs,
    common: &CommonArgs,
    bar: &Bar,
    document: &mut ProbeDocument,
) -> anyhow::Result<()> {
    let buffer = args.buffer.unwrap_or(1 << 30);
    // likwid-bench's S0 is socket 0: its first N hardware threads, in likwid's order (physical cores first).
    let package_cpus: Vec<u32> = {
        let first_package = topology.packages().first().copied();
        let mut cpus: Vec<&numadb_topology::Cpu> = topology
            .cpus
            .iter()
            .filter(|c| c.online && c.package == first_package && topology.allowed.cpus.contains(c.id))
            .collect();
        // One thread per core first, then the SMT siblings, as likwid numbers a socket's threads.
        cpus.sort_by_key(|c| (c.smt_siblings.iter().position(|s| s == c.id).unwrap_or(0), c.core, c.id));
        cpus.iter().map(|c| c.id).collect()
    };
    let mut threads: Vec<usize> = if args.threads.is_empty() { vec![package_cpus.len()] } else { args.threads.clone() };
    threads.dedup();
    let likwid = peers::likwid_bench();
    if likwid.is_none() {
        document.warnings.push("likwid-bench is not installed (Debian package likwid): no bandwidth peer".into());
    }
    let kernels = likwid.as_ref().map(peers::likwid_kernels).unwrap_or_default();
    let sample = common.sample_ms.map_or(Duration::from_millis(200), Duration::from_millis);
    let repetitions = common.repetitions.unwrap_or(5);
    if args.traffic.iter().any(|t| !matches!(t, Traffic::Read | Traffic::Copy)) {
        bail!("--traffic: likwid-bench is compared for read and copy only");
    }
    bar.start("peers", (threads.len() * args.traffic.len() * 3 * (repetitions + 1)) as u64);
    for &count in &threads {
        if count == 0 || count > package_cpus.len() {
            bail!("--threads {count}: the first package has {} usable CPUs", package_cpus.len());
        }
        let cpus = &package_cpus[..count];
        let node = topology.cpu(cpus[0]).and_then(|c| c.node).unwrap_or(0);
        let comparisons =
            [(Traffic::Read, &peers::LIKWID_READ_KERNELS[..]), (Traffic::Copy, &peers::LIKWID_COPY_KERNELS[..])];
        for (traffic, names) in comparisons.into_iter().filter(|(t, _)| args.traffic.contains(t)) {
            let options = BandwidthOptions {
                buffer_bytes: buffer,
                traffic,
                isa: Isa::best(),
                huge_pages: HugePages::Never,
                sample,
                repetitions,
            };
            // Interleaved, so that a drift of the machine hits both tools: the prober, every likwid-bench kernel
            // once, the prober again, the best kernel LIKWID_BEST_REPEATS more times, the prober a third time.
            let mut samples = Vec::new();
            let mut runs = Vec::new();
            let prober_round = |round: &str, samples: &mut Vec<f64>| -> anyhow::Result<()> {
                bar.advance(0, &format!("prober {} with {count} thread(s){round}", traffic.name()));
                samples.extend(bandwidth::measure_cell(cpus, node, &options, bar)?.samples_mb_per_s);
                Ok(())
            };
            prober_round("", &mut samples)?;
            if let Some(binary) = &likwid {
                for name in names.iter().filter(|n| kernels.iter().any(|k| k == *n)) {
                    bar.advance(0, &format!("likwid-bench {name} with {count} thread(s)"));
                    runs.push(peers::run_likwid(binary, name, buffer, count));
                }
                prober_round(", again", &mut samples)?;
                if let Some(best_kernel) = peers::best(&runs).map(|(run, _)| run.kernel.clone()) {
                    for _ in 0..LIKWID_BEST_REPEATS {
                        bar.advance(0, &format!("likwid-bench {best_kernel} with {count} thread(s), again"));
                        runs.push(peers::run_likwid(binary, &best_kernel, buffer, count));
                    }
                }
            }
            prober_round(", once more", &mut samples)?;
            let probe = Summary::of(&samples);
            // The best kernel by its median over its runs.
            let best = peers::best_by_median(&runs);
            document.peers.push(PeerComparison {
                traffic,
                threads: count,
                cpus: cpus.to_vec(),
                buffer_bytes: buffer,
                ratio: probe.zip(best.as_ref()).map(|(p, (_, b))| p.median / b),
                probe_mb_per_s: probe,
                likwid: runs,
                likwid_best: best,
            });
        }
    }
    // Latency: the L1 plateau and the DRAM plateau of a cache curve, and the latency matrix's local cell.
    let chase = ChaseArgs { pages: args.pages, window: plan::DEFAULT_WINDOW_BYTES, stride: plan::DEFAULT_STRIDE_BYTES };
    let options = chase_options(buffer, &chase, common, Duration::from_millis(200), 5);
    let (cpu, node) = cpu_and_node(topology, axes, None, None)?;
    // Only the curve's CPU and node: the cross-check compares like with like, and a big domain would take long.
    let local = MatrixAxes {
        granularity: axes.granularity,
        domains: axes
            .domains
            .iter()
            .filter(|d| d.cpus.contains(&cpu))
            .map(|d| numadb_probe::matrix::DomainAxis { cpus: vec![cpu], ..d.clone() })
            .collect(),
        nodes: vec![node],
    };
    document.core_hz = estimate_core_hz();
    bar.advance(0, "latency matrix (local cell)");
    document.latency.push(latency::measure_matrix(&local, &options, bar)?);
    let dram_from = plan::plausible_llc_bytes(topology) * cache::DRAM_MIN_FACTOR;
    let mut sizes: Vec<usize> = cache::log_sizes(4 << 10, 16 << 10, 1);
    sizes.extend(cache::log_sizes(dram_from.next_power_of_two(), buffer, 1));
    let curve_options = LatencyOptions { repetitions: options.repetitions.min(3), ..options };
    document.cache = Some(cache::measure_curve(topology, cpu, node, &sizes, &curve_options, bar)?);
    document.cross_checks.extend(l1_check(document));
    document.cross_checks.extend(dram_check(document, &local, cpu, node));
    Ok(())
}

/// The cache curve's L1 plateau, in cycles, against the documented L1 load-to-use latency.
fn l1_check(document: &ProbeDocument) -> Option<CrossCheck> {
    let curve = document.cache.as_ref()?;
    let l1_ns = curve.plateau_ns("L1")?;
    let measured_cycles = curve.plateau_cycles("L1")?;
    let (cycles, source) = document.cpu.as_ref()?.documented_l1_latency_cycles()?;
    Some(CrossCheck::new(
        format!(
            "L1 plateau in cycles ({l1_ns:.2} ns at the clock measured next to each point, ≈{:.2} GHz) vs \
             documented {cycles} cycles ({source})",
            measured_cycles / l1_ns
        ),
        measured_cycles,
        cycles,
        CROSS_CHECK_TOLERANCE,
    ))
}

/// The cache curve's DRAM plateau against the latency matrix's cell of the curve's CPU and node.
fn dram_check(document: &ProbeDocument, axes: &MatrixAxes, cpu: u32, node: u32) -> Option<CrossCheck> {
    let curve = document.cache.as_ref()?;
    let dram_ns = curve.plateau_ns("DRAM")?;
    let matrix = document.latency.iter().find(|m| {
        m.options.huge_pages == curve.options.huge_pages
            && m.options.layout.stride_bytes == curve.options.layout.stride_bytes
            && m.options.layout.window_bytes == curve.options.layout.window_bytes.min(m.options.layout.buffer_bytes)
    })?;
    let domain = axes.domains.iter().position(|d| d.cpus.contains(&cpu))?;
    let cell = matrix.cell(domain, node)?;
    let matrix_ns = cell.cpus.iter().find(|c| c.cpu == cpu)?.summary?.median;
    Some(CrossCheck::new(
        format!(
            "cache curve DRAM plateau vs latency matrix (CPU {cpu}, node {node}, {} buffer)",
            numadb_report::bytes(matrix.options.layout.buffer_bytes as u64)
        ),
        dram_ns,
        matrix_ns,
        CROSS_CHECK_TOLERANCE,
    ))
}

/// Latency settings from a chase's shape and the common options.
fn chase_options(
    buffer: usize,
    chase: &ChaseArgs,
    common: &CommonArgs,
    sample: Duration,
    repetitions: usize,
) -> LatencyOptions {
    LatencyOptions {
        layout: ChainLayout { buffer_bytes: buffer, stride_bytes: chase.stride, window_bytes: chase.window },
        huge_pages: chase.pages.huge_pages(),
        sample: common.sample_ms.map_or(sample, Duration::from_millis),
        repetitions: common.repetitions.unwrap_or(repetitions),
        seed: common.seed,
    }
}

/// The measuring CPU (default: the first CPU of the first domain) and node (default: the CPU's).
fn cpu_and_node(
    topology: &Topology,
    axes: &MatrixAxes,
    cpu: Option<u32>,
    node: Option<u32>,
) -> anyhow::Result<(u32, u32)> {
    let cpu = match cpu {
        Some(cpu) => cpu,
        None => *axes.domains.first().and_then(|d| d.cpus.first()).context("no CPU to measure from")?,
    };
    if !topology.allowed.cpus.contains(cpu) {
        bail!("CPU {cpu} is not one this process may run on (allowed: {})", topology.allowed.cpus);
    }
    let node = match node {
        Some(node) => node,
        None => topology
            .cpu(cpu)
            .and_then(|c| c.node)
            .filter(|n| axes.nodes.contains(n))
            .or_else(|| axes.nodes.first().copied())
            .context("no memory node")?,
    };
    topology.check_memory_node(node)?;
    Ok((cpu, node))
}

/// `numadb-out/probe-2026-11-22T12-30-05Z`.
fn default_out_dir() -> PathBuf {
    let seconds = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    PathBuf::from("numadb-out").join(format!("probe-{}", numadb_report::utc_timestamp(seconds)))
}

/// `64K`, `256M`, `1G`, `1GiB`, `4096`: binary units.
fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| format!("{text:?} is not a size (try 64K, 256M, 1G)"))?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (use K, M, G or T)")),
    };
    let bytes = number * multiplier as f64;
    if !(1.0..=(1u64 << 50) as f64).contains(&bytes) {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(bytes as usize)
}

/// A TLB window: a size, or `whole` for the whole buffer.
fn parse_window(text: &str) -> Result<usize, String> {
    if text.eq_ignore_ascii_case("whole") { Ok(usize::MAX) } else { parse_size(text) }
}

/// The progress bar: on standard error, drawn only when it is a terminal and not with `--json`.
struct Bar {
    bar: ProgressBar,
}

impl Bar {
    fn new(enabled: bool) -> Self {
        let target = if enabled && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(0), target);
        bar.set_style(
            ProgressStyle::with_template("{prefix:>9} [{bar:20}] {pos}/{len} {elapsed}/~{eta} {wide_msg}")
                .expect("a valid template")
                .progress_chars("=> "),
        );
        Bar { bar }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for Bar {
    fn start(&self, label: &str, units: u64) {
        self.bar.set_prefix(label.to_string());
        self.bar.set_position(0);
        self.bar.set_length(units);
    }

    fn advance(&self, units: u64, what: &str) {
        if !what.is_empty() {
            self.bar.set_message(what.to_string());
        }
        // A measurement can take more samples than planned (retries); keep the bar from overflowing.
        if self.bar.position() + units > self.bar.length().unwrap_or(0) {
            self.bar.set_length(self.bar.position() + units);
        }
        self.bar.inc(units);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("256MiB").unwrap(), 256 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("").is_err());
        assert_eq!(parse_window("whole").unwrap(), usize::MAX);
    }

    #[test]
    fn timestamps_are_utc_dates() {
        assert_eq!(numadb_report::utc_timestamp(0), "1970-01-01T00-00-00Z");
        assert_eq!(numadb_report::utc_timestamp(1_795_350_605), "2026-11-22T12-30-05Z");
    }
}
