//! `numadb tour`: the whole story on any Linux machine in about two minutes. The machine's topology, a short
//! probe of its latency and bandwidth between every domain and node, the thesis's tables loaded at a size that
//! suits the machine, and both thesis workloads under contrasting configurations, ending in a console summary and
//! one HTML report whose findings are sentences backed by the numbers beside them.
//!
//! The tour is composition only: the probe, the experiment runner, the findings and the report writers are the
//! same code `numadb probe` and `numadb bench run` use, so whatever the tour shows, those commands can show in
//! more depth.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, Parser};
use numadb_bench::experiment::{self, ExperimentTarget, Overrides};
use numadb_bench::{findings, report};
use numadb_report::{HtmlPage, OutputDir, chart};
use numadb_topology::{DomainGranularity, Topology};
use serde::Serialize;

use crate::probe::{self, ProbeArgs, ProbeDocument, render};

/// The whole story in about two minutes: this machine's topology, a short probe of its memory latency and
/// bandwidth, the thesis's tables loaded, and both thesis workloads (point lookups and the skewed aggregation)
/// under five contrasting configurations (NUMA-aware, strictly local, stealing from anywhere, one big domain,
/// tables interleaved). Ends with a summary and a self-contained HTML report whose findings are sentences
/// backed by the numbers beside them. Defaults are sized to this machine's CPUs and memory.
#[derive(Args, Debug)]
pub struct TourArgs {
    /// Seconds the memory probe may take.
    #[arg(long, value_name = "SECONDS", default_value_t = 20.0)]
    probe_budget: f64,
    /// Skip the memory probe.
    #[arg(long)]
    no_probe: bool,
    /// Rows per thesis table (default: 2 million per CPU, between 2 and 20 million, at most 1/16 of memory).
    #[arg(long)]
    rows: Option<u64>,
    /// Client connections (default: 4 per CPU, between 8 and the thesis's 56).
    #[arg(long)]
    connections: Option<usize>,
    /// Measured seconds per configuration and workload.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.5)]
    duration: f64,
    /// Also run the workloads on a peer with the same clients and data: `duckdb`, `postgres` (a throwaway local
    /// cluster) or `postgres=URL`. Repeatable.
    #[arg(long, value_name = "PEER")]
    compare: Vec<experiment::Peer>,
    /// Where to write the report (default numadb-out/tour-<UTC time>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print everything as one JSON document instead of the summary.
    #[arg(long)]
    json: bool,
}

/// `numadb tour --json` and `tour.json`.
#[derive(Serialize)]
struct TourDocument<'a> {
    topology: &'a Topology,
    probe: Option<&'a ProbeDocument>,
    results: &'a experiment::ResultSet,
    findings: &'a [findings::Finding],
    elapsed_s: f64,
}

/// `numadb probe` as the tour runs it.
#[derive(Parser)]
struct ProbeCommandLine {
    #[command(flatten)]
    args: ProbeArgs,
}

/// Rows per table for this machine: enough work per query to show scheduling, little enough to load in seconds.
fn default_rows(topology: &Topology) -> u64 {
    let cpus = topology.allowed.cpus.len().max(1) as u64;
    let memory: u64 = topology.nodes.iter().map(|n| n.memory_bytes).sum();
    // Two tables of seven 4-byte columns, raw: 56 bytes per row.
    let memory_cap = (memory / 16 / 56).max(100_000);
    (cpus * 2_000_000).clamp(2_000_000, 20_000_000).min(memory_cap)
}

fn default_connections(topology: &Topology) -> usize {
    (topology.allowed.cpus.len() * 4).clamp(8, 56)
}

pub fn run(args: TourArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let topology = Topology::from_system().context("reading this machine's topology")?;
    let out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("numadb-out").join(format!("tour-{}", numadb_report::utc_now())));
    let say = |text: &str| {
        if !args.json {
            eprintln!("{text}");
        }
    };
    let machine = numadb_bench::Machine::describe(&topology);
    say(&format!("numadb tour on {}", machine.line()));

    // 1. Topology.
    let domains = topology.domains(DomainGranularity::Node).context("deriving the NUMA domains")?;
    let topology_text = crate::topo::summary(&topology, &domains, false);
    say(&format!(
        "\n[1/4] topology: {} node(s), {} CPU(s) this process may use",
        topology.nodes.len(),
        topology.allowed.cpus.len()
    ));

    // 2. A short probe.
    let probe = if args.no_probe {
        say("[2/4] probe: skipped (--no-probe)");
        None
    } else {
        say(&format!(
            "[2/4] probe: latency and bandwidth between every domain and node (budget {:.0} s)",
            args.probe_budget
        ));
        Some(short_probe(args.probe_budget, &out_dir.join("probe"), args.json)?)
    };

    // 3 and 4. Load and run the experiment.
    let mut file = experiment::builtin("tour").expect("the tour experiment is built in");
    let rows = args.rows.unwrap_or_else(|| default_rows(&topology));
    say(&format!("[3/4] loading TBL_0 and TBL_1, {rows} rows each"));
    let database = numadb_sql::Database::new().map_err(|e| anyhow::anyhow!("{}: {}", e.sqlstate, e.message))?;
    let sql_error = |e: numadb_sql::SqlError| anyhow::anyhow!("{}: {}", e.sqlstate, e.message);
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, rows, file.seed, None, None).map_err(sql_error)?;
    // With C connections each query waits for about C others, and a cell lasts until the queries in flight at
    // its end finish: keep a query under load near half a second, so that slow machines (and emulated guests)
    // finish the tour in minutes too.
    let alone_s = {
        let sql = numadb_bench::engine::thesis_query(3, 100_000);
        let mut times: Vec<f64> = (0..3)
            .map(|_| {
                let started = Instant::now();
                session.execute_one(&sql).map(|_| started.elapsed().as_secs_f64()).map_err(sql_error)
            })
            .collect::<anyhow::Result<_>>()?;
        numadb_bench::median(&mut times)
    };
    let connections = args.connections.unwrap_or_else(|| {
        let default = default_connections(&topology);
        let fitting = ((0.5 / alone_s.max(1e-6)) as usize).clamp(2, default);
        if fitting < default {
            say(&format!(
                "      one aggregation query alone takes {:.0} ms here: {fitting} connections instead of {default}",
                alone_s * 1e3
            ));
        }
        fitting
    });
    drop(session);
    file.override_with(&Overrides {
        rows: Some(rows),
        connections: Some(connections),
        duration_seconds: Some(args.duration),
        ..Overrides::default()
    })
    .map_err(|e| anyhow::anyhow!(e))?;
    say(&format!("[4/4] running {} cells with {} connections", file.cell_count(), file.connections));
    let bar = crate::bench::progress_bar(file.cell_count() as u64, args.json);
    bar.set_prefix("tour");
    let target = ExperimentTarget::InProcess(database);
    let mut results = experiment::run(&file, &target, &topology, |progress| {
        bar.set_position(progress.cells_done as u64);
        bar.set_message(progress.message);
    })
    .map_err(|e| anyhow::anyhow!(e))?;
    if !args.compare.is_empty() {
        crate::bench::compare_with_peers(&mut results, &args.compare, &target, &bar)?;
    }
    bar.finish_and_clear();
    let findings = findings::findings(&results);

    // The report.
    let mut out = OutputDir::create(&out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let mut page = HtmlPage::new(&format!("numadb tour: {}", machine.cpu_model));
    page.paragraph(&format!(
        "numadb {} read this machine's topology, probed its memory, loaded the thesis's two tables ({} rows each) \
         and ran both of the thesis's workloads under {} configurations with {} client connections, in {:.0} s.",
        env!("CARGO_PKG_VERSION"),
        file.rows,
        file.configurations.len(),
        file.connections,
        started.elapsed().as_secs_f64()
    ));
    page.heading(2, "Findings");
    page.list(&findings.iter().map(|f| f.text.clone()).collect::<Vec<_>>());
    page.heading(2, "Machine");
    page.key_values(&numadb_report::MachineBlock::new(&topology, numadb_placement::sys::page_size()).rows());
    page.paragraph(&machine.line());
    page.heading(2, "Topology");
    page.preformatted(&topology_text);
    if let Some(document) = &probe {
        probe_sections(&mut page, document)?;
    }
    report::write_sections(&mut page, &mut out, &results, &findings).map_err(|e| anyhow::anyhow!(e))?;
    let elapsed_s = started.elapsed().as_secs_f64();
    let document =
        TourDocument { topology: &topology, probe: probe.as_ref(), results: &results, findings: &findings, elapsed_s };
    out.write("tour.json", numadb_report::to_json(&document)).context("writing tour.json")?;
    page.heading(2, "Files");
    page.file_list(out.written());
    out.write("report.html", page.finish()).context("writing report.html")?;

    if args.json {
        outln!("{}", numadb_report::to_json(&document).trim_end());
        return Ok(());
    }
    let mut summary = String::new();
    summary.push_str("\nTopology\n");
    summary.push_str(&topology_text);
    if let Some(document) = &probe {
        summary.push_str(&probe_text(document));
    }
    summary.push('\n');
    summary.push_str(&report::text(&results, &findings));
    out!("{summary}");
    eprintln!(
        "\nnumadb tour: finished in {elapsed_s:.0} s; report in {} (open report.html)",
        out_dir.join("report.html").display()
    );
    Ok(())
}

/// `numadb probe --budget SECONDS --out DIR` as a library call: its full report goes into `dir`.
pub fn short_probe(budget_s: f64, dir: &std::path::Path, quiet: bool) -> anyhow::Result<ProbeDocument> {
    let mut command = vec!["probe".to_string(), "--budget".into(), budget_s.to_string()];
    command.extend(["--out".into(), dir.display().to_string()]);
    if quiet {
        command.push("--json".into());
    }
    let parsed = ProbeCommandLine::try_parse_from(&command).context("the probe's settings")?;
    let (document, _) = probe::measure(parsed.args)?;
    render::write_files(dir, &document)?;
    Ok(document)
}

/// The probe's latency and first bandwidth matrix on a report page (its full report lies in `probe/`).
pub fn probe_sections(page: &mut HtmlPage, document: &ProbeDocument) -> anyhow::Result<()> {
    page.heading(2, "Memory latency and bandwidth");
    page.paragraph(
        "From the probe's short run (the full report is probe/report.html): every cell is measured from every CPU \
         of the row's domain with buffers verified on the column's node.",
    );
    for warning in &document.warnings {
        page.warning(warning);
    }
    if let Some(matrix) = document.latency.first() {
        page.heading(3, &render::latency_name(matrix));
        page.table(&render::latency_table(matrix));
        page.figure(&chart::heatmap(&render::latency_heatmap(matrix))?, "Average latency per cell (darker is slower).");
    }
    if let Some(matrix) = document.bandwidth.first() {
        page.heading(3, &format!("Bandwidth, {}", matrix.options.traffic.describe()));
        page.table(&render::bandwidth_table(matrix));
        page.figure(
            &chart::heatmap(&render::bandwidth_heatmap(matrix))?,
            "Median bandwidth per cell (darker is more).",
        );
    }
    page.file_list(&["probe/report.html".to_string()]);
    Ok(())
}

/// The probe's latency and first bandwidth matrix as terminal tables.
pub fn probe_text(document: &ProbeDocument) -> String {
    let mut text = String::new();
    if let Some(matrix) = document.latency.first() {
        text.push_str(&format!(
            "\nMemory {} in ns (min avg max over each domain's CPUs)\n",
            render::latency_name(matrix)
        ));
        text.push_str(&crate::format::table(&render::latency_table(matrix)));
    }
    if let Some(matrix) = document.bandwidth.first() {
        text.push_str(&format!("\nBandwidth, {} (MB/s)\n", matrix.options.traffic.describe()));
        text.push_str(&crate::format::table(&render::bandwidth_table(matrix)));
    }
    text
}
