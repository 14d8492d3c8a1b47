//! How a probe document is shown: tables on the terminal (the thesis's layout), and the files of the output
//! directory — probe.json, CSV per measurement, SVG charts and report.html with all of it inline.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use numadb_probe::bandwidth::BandwidthMatrix;
use numadb_probe::cache::CacheCurve;
use numadb_probe::huge_pages_serde;
use numadb_probe::latency::LatencyMatrix;
use numadb_probe::loaded::LoadedCurve;
use numadb_probe::stats::{DISAGREEMENT_THRESHOLD, Summary};
use numadb_report::chart::{self, Bar, BarChart, CurveChart, Heatmap, Marker, Series};
use numadb_report::{Csv, HtmlPage, OutputDir, bytes, csv};

use super::ProbeDocument;

/// Above this many (CPU, node) rows the terminal shows the thesis table only; the files have every row.
const PER_CPU_ROWS_MAX: usize = 48;
use crate::format;

/// Everything a reader must know before trusting a figure: disagreeing repetitions, unverified placement, moved
/// threads, huge pages asked for and not given.
pub fn warnings(document: &ProbeDocument) -> Vec<String> {
    let mut warnings = Vec::new();
    let percent = DISAGREEMENT_THRESHOLD * 100.0;
    if let Some(interference) = document.interference.filter(|i| i.disturbed()) {
        warnings.push(format!(
            "the machine was not quiet: other processes used {:.0}% and the hypervisor stole {:.0}% of all CPU time \
             during the run; figures are disturbed, measure again on a quiet machine",
            interference.others_share * 100.0,
            interference.steal_share * 100.0
        ));
    }
    for matrix in &document.latency {
        let name = latency_name(matrix);
        for cell in matrix.cells.iter().filter(|c| c.disagrees) {
            let domain = &matrix.axes.domains[cell.domain].name;
            let spreads: Vec<String> = cell
                .cpus
                .iter()
                .filter_map(|c| {
                    c.summary.filter(|s| s.disagrees).map(|s| format!("CPU {} {:.0}%", c.cpu, s.spread * 100.0))
                })
                .collect();
            warnings.push(format!(
                "{name}: repetitions of {domain} → node {} disagree by more than {percent:.0}% ({})",
                cell.node,
                spreads.join(", ")
            ));
        }
        for buffer in matrix.buffers.iter().filter(|b| !b.placement.is_verified()) {
            warnings.push(format!("{name}: chain on node {}: {}", buffer.node, buffer.placement.describe()));
        }
        if matrix.options.huge_pages == numadb_placement::HugePages::Transparent {
            for buffer in &matrix.buffers {
                if let Some(share) = buffer.huge_page_share.filter(|&s| s < 0.9) {
                    warnings.push(format!(
                        "{name}: only {:.0}% of the chain on node {} got transparent huge pages",
                        share * 100.0,
                        buffer.node
                    ));
                }
            }
        }
        if matrix.moved_samples() > 0 {
            warnings.push(format!("{name}: {} samples discarded because a thread moved", matrix.moved_samples()));
        }
    }
    for matrix in &document.bandwidth {
        for cell in &matrix.cells {
            let domain = &matrix.axes.domains[cell.domain].name;
            let name = format!("{} bandwidth {domain} → node {}", matrix.options.traffic.name(), cell.node);
            if let Some(summary) = cell.mb_per_s.filter(|s| s.disagrees) {
                warnings.push(format!(
                    "{name}: repetitions disagree by {:.0}% (more than {percent:.0}%)",
                    summary.spread * 100.0
                ));
            }
            if !cell.placement.is_verified() {
                warnings.push(format!("{name}: {}", cell.placement.describe()));
            }
            if cell.moved_samples > 0 {
                warnings.push(format!("{name}: {} samples discarded because a thread moved", cell.moved_samples));
            }
        }
    }
    if let Some(curve) = &document.cache {
        let disagreeing: Vec<String> = curve
            .points
            .iter()
            .filter(|p| p.latency.summary.is_some_and(|s| s.disagrees))
            .map(|p| bytes(p.buffer_bytes as u64))
            .collect();
        if !disagreeing.is_empty() {
            warnings.push(format!(
                "cache curve: repetitions disagree by more than {percent:.0}% at {}",
                disagreeing.join(", ")
            ));
        }
        if curve.points.iter().any(|p| !p.placement.is_verified()) {
            warnings.push("cache curve: some buffers were not verified on their node".into());
        }
    }
    if let Some(loaded) = &document.loaded {
        if !loaded.chain_placement.is_verified() || loaded.loader_placement.as_ref().is_some_and(|p| !p.is_verified()) {
            warnings.push("loaded latency: some buffers were not verified on their node".into());
        }
        if loaded.loader_cpus.is_empty() {
            warnings.push("loaded latency: only one CPU, so there is no loader".into());
        }
    }
    for check in document.cross_checks.iter().filter(|c| !c.agrees) {
        warnings.push(format!(
            "cross-check outside ±{:.0}%: {} (ratio {:.3})",
            check.tolerance * 100.0,
            check.what,
            check.ratio
        ));
    }
    warnings
}

pub(crate) fn latency_name(matrix: &LatencyMatrix) -> String {
    format!(
        "latency ({} pages{})",
        if matrix.options.huge_pages == numadb_placement::HugePages::Transparent { "2 MiB" } else { "4 KiB" },
        if matrix.options.layout.window_bytes >= matrix.options.layout.buffer_bytes {
            ", whole-buffer TLB"
        } else {
            ""
        }
    )
}

fn latency_settings(matrix: &LatencyMatrix) -> String {
    let o = &matrix.options;
    format!(
        "buffer {} per node, {} pages, stride {} B, TLB window {}, {} × {} ms per CPU after a warm-up",
        bytes(o.layout.buffer_bytes as u64),
        huge_pages_serde::name(o.huge_pages),
        o.layout.stride_bytes,
        if o.layout.window_bytes >= o.layout.buffer_bytes {
            "whole buffer".to_string()
        } else {
            bytes(o.layout.window_bytes as u64)
        },
        o.repetitions,
        o.sample.as_millis()
    )
}

/// `62 134.0`: thousands separated by spaces, as the thesis prints MB/s.
fn grouped(value: f64, decimals: usize) -> String {
    let text = format!("{value:.decimals$}");
    let (integer, fraction) = text.split_once('.').map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let (sign, digits) = integer.strip_prefix('-').map_or(("", integer), |d| ("-", d));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    format!("{sign}{out}{}", fraction.map_or(String::new(), |f| format!(".{f}")))
}

fn summary_text(summary: &Option<Summary>, decimals: usize) -> String {
    match summary {
        Some(s) => format!(
            "{} [{}–{}] ±{:.1}%{}",
            grouped(s.median, decimals),
            grouped(s.min, decimals),
            grouped(s.max, decimals),
            s.spread * 50.0,
            if s.disagrees { " DISAGREE" } else { "" }
        ),
        None => "no sample kept".into(),
    }
}

/// The thesis-style latency table: rows CPU domains, columns memory nodes, cells "-min avg +max".
pub(crate) fn latency_table(matrix: &LatencyMatrix) -> Vec<Vec<String>> {
    let mut rows = vec![
        std::iter::once("CPU \\ Mem".to_string())
            .chain(matrix.axes.nodes.iter().map(|n| format!("node {n}")))
            .collect(),
    ];
    for (d, domain) in matrix.axes.domains.iter().enumerate() {
        let mut row = vec![domain.name.clone()];
        for &node in &matrix.axes.nodes {
            row.push(matrix.cell(d, node).and_then(|c| c.latency_ns).map_or("—".into(), |s| s.thesis_cell(1)));
        }
        rows.push(row);
    }
    rows
}

fn latency_cpu_rows(matrix: &LatencyMatrix) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "domain".to_string(),
        "node".into(),
        "CPU".into(),
        "median ns [min–max] ±half-spread".into(),
        "samples".into(),
        "moved".into(),
    ]];
    for cell in &matrix.cells {
        for cpu in &cell.cpus {
            rows.push(vec![
                matrix.axes.domains[cell.domain].name.clone(),
                cell.node.to_string(),
                cpu.cpu.to_string(),
                summary_text(&cpu.summary, 1),
                cpu.samples_ns.len().to_string(),
                cpu.moved_samples.to_string(),
            ]);
        }
    }
    rows
}

pub(crate) fn bandwidth_table(matrix: &BandwidthMatrix) -> Vec<Vec<String>> {
    let mut rows = vec![
        std::iter::once("CPU \\ Mem".to_string())
            .chain(matrix.axes.nodes.iter().map(|n| format!("node {n}")))
            .collect(),
    ];
    for (d, domain) in matrix.axes.domains.iter().enumerate() {
        let mut row = vec![format!("{} ({} thr.)", domain.name, domain.cpus.len())];
        for &node in &matrix.axes.nodes {
            row.push(matrix.cell(d, node).map_or("—".into(), |c| summary_text(&c.mb_per_s, 1)));
        }
        rows.push(row);
    }
    rows
}

fn bandwidth_settings(matrix: &BandwidthMatrix) -> String {
    let o = &matrix.options;
    format!(
        "{}, {} kernels, {} per cell split over the threads, {} pages, {} × {} ms after a warm-up",
        o.traffic.describe(),
        o.isa.name(),
        bytes(o.buffer_bytes as u64),
        huge_pages_serde::name(o.huge_pages),
        o.repetitions,
        o.sample.as_millis()
    )
}

fn curve_rows(curve: &CacheCurve) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "working set".to_string(),
        "median ns [min–max] ±half-spread".into(),
        "cycles (clock next to it)".into(),
        "placement".into(),
    ]];
    for point in &curve.points {
        rows.push(vec![
            bytes(point.buffer_bytes as u64),
            summary_text(&point.latency.summary, 2),
            point.latency_cycles().map_or("—".into(), |cycles| format!("{cycles:.1}")),
            format!("{:?}", point.placement.verdict),
        ]);
    }
    rows
}

fn level_rows(curve: &CacheCurve) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "level".to_string(),
        "reported size".into(),
        "plateau ns".into(),
        "cycles".into(),
        "from points".into(),
    ]];
    for level in &curve.levels {
        rows.push(vec![
            level.name.clone(),
            level.reported_bytes.map_or("—".into(), bytes),
            level.plateau_ns.map_or("—".into(), |ns| format!("{ns:.2}")),
            level.plateau_cycles.map_or("—".into(), |cycles| format!("{cycles:.1}")),
            if level.points.is_empty() {
                "none inside".into()
            } else {
                format!("{}–{}", bytes(level.points[0] as u64), bytes(*level.points.last().unwrap() as u64))
            },
        ]);
    }
    rows
}

fn loaded_rows(curve: &LoadedCurve) -> Vec<Vec<String>> {
    let mut rows =
        vec![vec!["delay (cycles)".to_string(), "latency ns [min–max]".into(), "loaders MB/s [min–max]".into()]];
    for point in &curve.points {
        rows.push(vec![
            point.delay_cycles.map_or("idle (no load)".into(), |d| d.to_string()),
            summary_text(&point.latency_ns, 1),
            if point.delay_cycles.is_none() { "— (no loaders)".into() } else { summary_text(&point.mb_per_s, 0) },
        ]);
    }
    rows
}

fn peer_rows(document: &ProbeDocument) -> Vec<Vec<String>> {
    let mut rows = vec![vec![
        "traffic".to_string(),
        "threads (CPUs)".into(),
        "buffer".into(),
        "prober MB/s".into(),
        "likwid-bench MB/s, run by run".into(),
        "best kernel (median of its runs)".into(),
        "prober / best".into(),
    ]];
    for peer in &document.peers {
        let likwid: Vec<String> = peer
            .likwid
            .iter()
            .map(|run| match &run.mb_per_s {
                Ok(v) => format!("{} {}", run.kernel, grouped(*v, 0)),
                Err(e) => format!("{} failed: {}", run.kernel, e.lines().next().unwrap_or("")),
            })
            .collect();
        rows.push(vec![
            peer.traffic.name().to_string(),
            format!("{} ({})", peer.threads, peer.cpus.iter().map(u32::to_string).collect::<Vec<_>>().join(",")),
            bytes(peer.buffer_bytes as u64),
            summary_text(&peer.probe_mb_per_s, 0),
            if likwid.is_empty() { "not run".into() } else { likwid.join("; ") },
            peer.likwid_best.as_ref().map_or("—".into(), |(k, v)| format!("{k} {}", grouped(*v, 0))),
            peer.ratio.map_or("—".into(), |r| format!("{r:.3}")),
        ]);
    }
    rows
}

fn check_rows(document: &ProbeDocument) -> Vec<Vec<String>> {
    let mut rows =
        vec![vec!["cross-check".to_string(), "measured".into(), "reference".into(), "ratio".into(), "verdict".into()]];
    for check in &document.cross_checks {
        rows.push(vec![
            check.what.clone(),
            format!("{:.2}", check.measured),
            format!("{:.2}", check.reference),
            format!("{:.3}", check.ratio),
            if check.agrees { format!("agrees (±{:.0}%)", check.tolerance * 100.0) } else { "DISAGREES".into() },
        ]);
    }
    rows
}

/// The terminal output.
pub fn text(document: &ProbeDocument) -> String {
    let mut out = String::new();
    out.push_str("Machine\n");
    for line in document.machine.to_text().lines() {
        let _ = writeln!(out, "  {line}");
    }
    let _ = writeln!(
        out,
        "  Core clock      {} (timed dependent-add chain); widest kernels: {}\n",
        document.core_hz.map_or("not measured".into(), |hz| format!("{:.2} GHz", hz / 1e9)),
        document.best_isa.name()
    );
    if let Some(plan) = &document.plan
        && !plan.reductions.is_empty()
    {
        let _ = writeln!(out, "To fit the budget: {}.\n", plan.reductions.join(", "));
    }
    for matrix in &document.latency {
        let _ = writeln!(out, "Latency (ns): {}", latency_settings(matrix));
        out.push_str("  cells: min avg max over the domain's CPUs' medians, min and max as offsets from the average\n");
        out.push_str(&format::table(&latency_table(matrix)));
        let cpu_rows = latency_cpu_rows(matrix);
        if cpu_rows.len() <= PER_CPU_ROWS_MAX {
            out.push_str("  per CPU:\n");
            out.push_str(&format::table(&cpu_rows));
        } else {
            let _ = writeln!(
                out,
                "  per-CPU figures ({} rows): see --json, or latency-*.csv with --out",
                cpu_rows.len() - 1
            );
        }
        for buffer in &matrix.buffers {
            let _ = writeln!(
                out,
                "  chain on node {}: {}{}",
                buffer.node,
                buffer.placement.describe(),
                buffer.huge_page_share.map_or(String::new(), |s| format!(", {:.0}% on huge pages", s * 100.0))
            );
        }
        out.push('\n');
    }
    for matrix in &document.bandwidth {
        let _ =
            writeln!(out, "Bandwidth (MB/s = 10^6 B/s, median [min–max] ±half-spread): {}", bandwidth_settings(matrix));
        out.push_str(&format::table(&bandwidth_table(matrix)));
        let unverified = matrix.cells.iter().filter(|c| !c.placement.is_verified()).count();
        let _ = writeln!(
            out,
            "  buffers: {}\n",
            if unverified == 0 {
                "every page of every cell verified on its node".to_string()
            } else {
                format!("{unverified} cell(s) NOT verified")
            }
        );
    }
    if let Some(curve) = &document.cache {
        let _ = writeln!(
            out,
            "Cache curve (CPU {}, node {}, {} pages, stride {} B, TLB window {}, {} × {} ms per point)",
            curve.cpu,
            curve.node,
            huge_pages_serde::name(curve.options.huge_pages),
            curve.options.layout.stride_bytes,
            bytes(curve.options.layout.window_bytes.min(1 << 40) as u64),
            curve.options.repetitions,
            curve.options.sample.as_millis()
        );
        out.push_str(&format::table(&curve_rows(curve)));
        out.push_str("  plateaus (median of the points well inside each reported level):\n");
        out.push_str(&format::table(&level_rows(curve)));
        let _ = writeln!(
            out,
            "  measured cliffs (latency up by more than {:.0}% at the next point) after: {}\n",
            (numadb_probe::cache::CLIFF_RATIO - 1.0) * 100.0,
            if curve.cliffs_bytes.is_empty() {
                "none".into()
            } else {
                curve.cliffs_bytes.iter().map(|&b| bytes(b as u64)).collect::<Vec<_>>().join(", ")
            }
        );
    }
    if let Some(loaded) = &document.loaded {
        let _ = writeln!(
            out,
            "Loaded latency (chaser CPU {}, loaders CPUs {:?} running {}, node {})",
            loaded.chaser_cpu,
            loaded.loader_cpus,
            loaded.options.traffic.describe(),
            loaded.node
        );
        out.push_str(&format::table(&loaded_rows(loaded)));
        out.push('\n');
    }
    if !document.peers.is_empty() {
        out.push_str(
            "Peers in the same run (interleaved: prober, every likwid-bench kernel, prober, best kernel twice more, \
             prober; the prober's samples pooled)\n",
        );
        out.push_str(&format::table(&peer_rows(document)));
        out.push('\n');
    }
    if !document.cross_checks.is_empty() {
        out.push_str("Cross-checks\n");
        out.push_str(&format::table(&check_rows(document)));
        out.push('\n');
    }
    if document.warnings.is_empty() {
        out.push_str("No warnings: every buffer verified on its node, no thread moved, repetitions within 10%.\n");
    } else {
        out.push_str("Warnings\n");
        for warning in &document.warnings {
            let _ = writeln!(out, "  ! {warning}");
        }
    }
    let _ = writeln!(
        out,
        "({:.1} s{})",
        document.elapsed_s,
        document.interference.map_or(String::new(), |i| format!(
            "; other processes used {:.1}% of the machine's CPU time meanwhile, steal {:.1}%",
            i.others_share * 100.0,
            i.steal_share * 100.0
        ))
    );
    out
}

fn file_stem(matrix: &LatencyMatrix) -> String {
    format!(
        "latency-{}{}",
        huge_pages_serde::name(matrix.options.huge_pages),
        if matrix.options.layout.window_bytes >= matrix.options.layout.buffer_bytes { "-whole" } else { "" }
    )
}

pub(crate) fn latency_heatmap(matrix: &LatencyMatrix) -> Heatmap {
    Heatmap {
        title: format!("Latency, {} pages, average over CPUs", huge_pages_serde::name(matrix.options.huge_pages)),
        rows: matrix.axes.domains.iter().map(|d| d.name.clone()).collect(),
        columns: matrix.axes.nodes.iter().map(|n| format!("node {n}")).collect(),
        values: (0..matrix.axes.domains.len())
            .map(|d| {
                matrix.axes.nodes.iter().map(|&n| matrix.cell(d, n).and_then(|c| c.latency_ns).map(|s| s.avg)).collect()
            })
            .collect(),
        unit: "ns".into(),
        decimals: 1,
        higher_is_better: false,
    }
}

pub(crate) fn bandwidth_heatmap(matrix: &BandwidthMatrix) -> Heatmap {
    Heatmap {
        title: format!("Bandwidth, {}", matrix.options.traffic.describe()),
        rows: matrix.axes.domains.iter().map(|d| d.name.clone()).collect(),
        columns: matrix.axes.nodes.iter().map(|n| format!("node {n}")).collect(),
        values: (0..matrix.axes.domains.len())
            .map(|d| {
                matrix
                    .axes
                    .nodes
                    .iter()
                    .map(|&n| matrix.cell(d, n).and_then(|c| c.mb_per_s).map(|s| s.median))
                    .collect()
            })
            .collect(),
        unit: "MB/s".into(),
        decimals: 0,
        higher_is_better: true,
    }
}

fn curve_chart(curve: &CacheCurve) -> CurveChart {
    let points: Vec<(f64, f64)> =
        curve.points.iter().filter_map(|p| Some((p.buffer_bytes as f64, p.latency_ns()?))).collect();
    let x_markers: Vec<Marker> = curve
        .levels
        .iter()
        .filter_map(|l| {
            Some(Marker { at: l.reported_bytes? as f64, label: format!("{} {}", l.name, bytes(l.reported_bytes?)) })
        })
        .collect();
    let x_markers_low: Vec<Marker> = curve
        .cliffs_bytes
        .iter()
        .map(|&b| Marker { at: b as f64, label: format!("cliff after {}", bytes(b as u64)) })
        .collect();
    CurveChart {
        title: format!("Cache curve: CPU {}, node {}", curve.cpu, curve.node),
        x_label: "working set".into(),
        y_label: "latency (ns)".into(),
        x_log: true,
        y_log: true,
        x_bytes: true,
        series: vec![Series { name: "median latency".into(), points }],
        x_markers,
        x_markers_low,
        y_markers: curve
            .levels
            .iter()
            .filter_map(|l| Some(Marker { at: l.plateau_ns?, label: format!("{} {:.1} ns", l.name, l.plateau_ns?) }))
            .collect(),
    }
}

fn loaded_chart(curve: &LoadedCurve) -> CurveChart {
    let mut points: Vec<(f64, f64)> = curve
        .points
        .iter()
        .filter_map(|p| Some((p.mb_per_s.map_or(0.0, |s| s.median), p.latency_ns?.median)))
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    CurveChart {
        title: format!("Loaded latency: CPU {} chasing, {} loader(s)", curve.chaser_cpu, curve.loader_cpus.len()),
        x_label: "loaders' bandwidth (MB/s)".into(),
        y_label: "latency (ns)".into(),
        series: vec![Series { name: "latency vs bandwidth".into(), points }],
        ..Default::default()
    }
}

fn bandwidth_bars(document: &ProbeDocument) -> BarChart {
    BarChart {
        title: "Bandwidth by traffic kind, first domain to its first node (median, whiskers min–max)".into(),
        y_label: "MB/s".into(),
        bars: document
            .bandwidth
            .iter()
            .filter_map(|m| {
                let node = *m.axes.domains.first()?.local_nodes.first().or(m.axes.nodes.first())?;
                let s = m.cell(0, node).or_else(|| m.cells.first())?.mb_per_s?;
                Some(Bar { label: m.options.traffic.name().into(), value: s.median, low: s.min, high: s.max })
            })
            .collect(),
    }
}

/// Writes a chart as `STEM.svg` and, rendered in pure Rust, `STEM.png`. A PNG that cannot be rendered is reported
/// and skipped: the SVG is the reference.
fn write_chart(out: &mut OutputDir, stem: &str, svg: &str) -> anyhow::Result<()> {
    out.write(&format!("{stem}.svg"), svg).with_context(|| format!("writing {stem}.svg"))?;
    match numadb_report::png::svg_to_png(svg) {
        Ok(png) => {
            out.write(&format!("{stem}.png"), png).with_context(|| format!("writing {stem}.png"))?;
        }
        Err(error) => eprintln!("numadb probe: no {stem}.png: {error}"),
    }
    Ok(())
}

/// Writes probe.json, the CSV files, the SVG and PNG charts and report.html; returns the files' names.
pub fn write_files(dir: &Path, document: &ProbeDocument) -> anyhow::Result<Vec<String>> {
    let mut out = OutputDir::create(dir).with_context(|| format!("creating {}", dir.display()))?;
    let io = |e: std::io::Error| anyhow::anyhow!("writing into {}: {e}", dir.display());
    out.write("probe.json", numadb_report::to_json(document)).map_err(io)?;
    let mut page = HtmlPage::new(&format!("numadb {} — {}", document.command, document.machine.cpu_model));
    page.paragraph(&format!(
        "numadb {} ran `numadb {}` in {:.1} s. Every figure is the median of its repetitions after a discarded \
         warm-up, shown with its spread; every sample's thread was checked to have stayed on its CPU (getcpu) and \
         every buffer to be on its node (move_pages). MB = 10^6 bytes.",
        document.numadb_version, document.command, document.elapsed_s
    ));
    page.heading(2, "Machine");
    let mut machine_rows = document.machine.rows();
    machine_rows.push((
        "Core clock".into(),
        document.core_hz.map_or("not measured".into(), |hz| format!("{:.2} GHz (timed dependent-add chain)", hz / 1e9)),
    ));
    machine_rows.push(("Kernels".into(), format!("widest: {}", document.best_isa.name())));
    machine_rows.push((
        "Other load".into(),
        document.interference.map_or("not known".into(), |i| {
            format!(
                "other processes {:.1}%, hypervisor steal {:.1}% of all CPU time during the run",
                i.others_share * 100.0,
                i.steal_share * 100.0
            )
        }),
    ));
    page.key_values(&machine_rows);
    if document.warnings.is_empty() {
        page.note("No warnings: every buffer verified on its node, no thread moved, repetitions within 10%.");
    }
    for warning in &document.warnings {
        page.warning(warning);
    }
    if let Some(plan) = &document.plan {
        page.paragraph(&format!(
            "Plan estimated at {:.0} s{}.",
            plan.estimate.as_secs_f64(),
            if plan.reductions.is_empty() {
                String::new()
            } else {
                format!("; to fit the budget: {}", plan.reductions.join(", "))
            }
        ));
    }

    for matrix in &document.latency {
        let stem = file_stem(matrix);
        page.heading(2, &format!("Latency matrix, {}", latency_name(matrix)));
        page.paragraph(&format!(
            "{}. Rows are CPU domains, columns memory nodes; each cell gives min, average and max over the \
             domain's CPUs of each CPU's median, min and max as offsets from the average (the thesis's tables 1, 2, \
             5 and 6).",
            latency_settings(matrix)
        ));
        page.table(&latency_table(matrix));
        let svg = chart::heatmap(&latency_heatmap(matrix))?;
        write_chart(&mut out, &stem, &svg)?;
        page.figure(&svg, "Average latency per cell (darker is slower).");
        page.heading(3, "Per CPU");
        page.table(&latency_cpu_rows(matrix));
        let placement: Vec<Vec<String>> =
            std::iter::once(vec!["node".to_string(), "chain placement".into(), "huge pages".into()])
                .chain(matrix.buffers.iter().map(|b| {
                    vec![
                        b.node.to_string(),
                        b.placement.describe(),
                        b.huge_page_share.map_or("—".into(), |s| format!("{:.0}%", s * 100.0)),
                    ]
                }))
                .collect();
        page.table(&placement);
        let mut table = Csv::new(&[
            "domain",
            "node",
            "cpu",
            "median_ns",
            "min_ns",
            "max_ns",
            "spread",
            "samples",
            "moved_samples",
            "placement",
        ]);
        for cell in &matrix.cells {
            let placement =
                matrix.buffers.iter().find(|b| b.node == cell.node).map_or("", |b| match b.placement.verdict {
                    numadb_probe::PlacementVerdict::Verified => "verified",
                    numadb_probe::PlacementVerdict::PartlyUnknown => "partly_unknown",
                    numadb_probe::PlacementVerdict::Wrong => "wrong",
                });
            for cpu in &cell.cpus {
                let s = cpu.summary;
                table.row(&[
                    matrix.axes.domains[cell.domain].name.clone(),
                    cell.node.to_string(),
                    cpu.cpu.to_string(),
                    csv::number(s.map(|s| s.median)),
                    csv::number(s.map(|s| s.min)),
                    csv::number(s.map(|s| s.max)),
                    csv::number(s.map(|s| s.spread)),
                    cpu.samples_ns.len().to_string(),
                    cpu.moved_samples.to_string(),
                    placement.to_string(),
                ]);
            }
        }
        out.write(&format!("{stem}.csv"), table.finish()).map_err(io)?;
    }

    if !document.bandwidth.is_empty() {
        let mut table = Csv::new(&[
            "traffic",
            "isa",
            "domain",
            "node",
            "threads",
            "median_mb_per_s",
            "min_mb_per_s",
            "max_mb_per_s",
            "spread",
            "samples",
            "placement",
        ]);
        for matrix in &document.bandwidth {
            page.heading(2, &format!("Bandwidth matrix, {}", matrix.options.traffic.describe()));
            page.paragraph(&format!(
                "{}. All CPUs of a domain stream at once, one pinned thread each with its own buffer on the node; the \
                 cell is the sum of the threads' rates, median [min–max] over the repetitions (the thesis's tables \
                 3, 4, 7 and 8).",
                bandwidth_settings(matrix)
            ));
            page.table(&bandwidth_table(matrix));
            let svg = chart::heatmap(&bandwidth_heatmap(matrix))?;
            write_chart(&mut out, &format!("bandwidth-{}", matrix.options.traffic.name()), &svg)?;
            page.figure(&svg, "Median bandwidth per cell (darker is more).");
            for cell in &matrix.cells {
                let s = cell.mb_per_s;
                table.row(&[
                    matrix.options.traffic.name().to_string(),
                    matrix.options.isa.name().to_string(),
                    matrix.axes.domains[cell.domain].name.clone(),
                    cell.node.to_string(),
                    cell.cpus.len().to_string(),
                    csv::number(s.map(|s| s.median)),
                    csv::number(s.map(|s| s.min)),
                    csv::number(s.map(|s| s.max)),
                    csv::number(s.map(|s| s.spread)),
                    cell.samples_mb_per_s.len().to_string(),
                    format!("{:?}", cell.placement.verdict),
                ]);
            }
        }
        out.write("bandwidth.csv", table.finish()).map_err(io)?;
        if document.bandwidth.len() > 1 {
            let svg = chart::bars(&bandwidth_bars(document))?;
            write_chart(&mut out, "bandwidth-kinds", &svg)?;
            page.figure(&svg, "Bandwidth of each traffic kind with its spread over repetitions.");
        }
    }

    if let Some(curve) = &document.cache {
        page.heading(2, "Cache curve");
        page.paragraph(&format!(
            "Chase latency on CPU {} with buffers on node {} for growing working sets (every line of the buffer in \
             the chain). Dashed vertical lines: the cache sizes the topology reports and the cliffs the measurement \
             shows; horizontal lines: the plateau of each level (median of the points well inside it).",
            curve.cpu, curve.node
        ));
        let svg = chart::curve(&curve_chart(curve))?;
        write_chart(&mut out, "cache-curve", &svg)?;
        page.figure(&svg, "Latency against working set, both axes logarithmic.");
        page.table(&level_rows(curve));
        page.table(&curve_rows(curve));
        let mut table = Csv::new(&["buffer_bytes", "median_ns", "min_ns", "max_ns", "spread", "samples", "placement"]);
        for point in &curve.points {
            let s = point.latency.summary;
            table.row(&[
                point.buffer_bytes.to_string(),
                csv::number(s.map(|s| s.median)),
                csv::number(s.map(|s| s.min)),
                csv::number(s.map(|s| s.max)),
                csv::number(s.map(|s| s.spread)),
                point.latency.samples_ns.len().to_string(),
                format!("{:?}", point.placement.verdict),
            ]);
        }
        out.write("cache-curve.csv", table.finish()).map_err(io)?;
    }

    if let Some(loaded) = &document.loaded {
        page.heading(2, "Loaded latency");
        page.paragraph(&format!(
            "CPU {} chases pointers on node {} while CPUs {:?} run {} with an injection delay after every 4 KiB \
             block (MLC's --loaded_latency). The first row is the idle latency on the same chain.",
            loaded.chaser_cpu,
            loaded.node,
            loaded.loader_cpus,
            loaded.options.traffic.describe()
        ));
        let svg = chart::curve(&loaded_chart(loaded))?;
        write_chart(&mut out, "loaded-latency", &svg)?;
        page.figure(&svg, "Latency against the loaders' bandwidth, one point per injection delay.");
        page.table(&loaded_rows(loaded));
        let mut table =
            Csv::new(&["delay_cycles", "latency_median_ns", "latency_min_ns", "latency_max_ns", "mb_per_s_median"]);
        for point in &loaded.points {
            table.row(&[
                point.delay_cycles.map_or("idle".into(), |d| d.to_string()),
                csv::number(point.latency_ns.map(|s| s.median)),
                csv::number(point.latency_ns.map(|s| s.min)),
                csv::number(point.latency_ns.map(|s| s.max)),
                csv::number(point.mb_per_s.map(|s| s.median)),
            ]);
        }
        out.write("loaded-latency.csv", table.finish()).map_err(io)?;
    }

    if !document.peers.is_empty() {
        page.heading(2, "Peers in the same run");
        page.paragraph(
            "likwid-bench (`-w S0:SIZE:N`: N threads on socket 0's first hardware threads, SIZE split between \
             them) beside the prober's kernels with the same total buffer and threads, interleaved: the prober, \
             every likwid-bench kernel, the prober, the best kernel twice more, the prober. The prober's samples \
             are pooled; the best kernel is compared by the median of its three runs.",
        );
        let rows = peer_rows(document);
        page.table(&rows);
        let mut table = Csv::new(&rows[0]);
        for row in &rows[1..] {
            table.row(row);
        }
        out.write("peers.csv", table.finish()).map_err(io)?;
    }
    if !document.cross_checks.is_empty() {
        page.heading(2, "Cross-checks");
        page.table(&check_rows(document));
    }
    page.heading(2, "Files");
    if !numadb_report::png::fonts_available() {
        page.note("No system font was found: the PNG charts have no text (the SVG charts do).");
    }
    let mut files = out.written().to_vec();
    files.push("report.html".into());
    page.file_list(&files);
    out.write("report.html", page.finish()).map_err(io)?;
    Ok(out.written().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_grouped_like_the_thesis() {
        assert_eq!(grouped(62134.04, 1), "62 134.0");
        assert_eq!(grouped(111083.3, 1), "111 083.3");
        assert_eq!(grouped(999.0, 0), "999");
        assert_eq!(grouped(-1234.5, 1), "-1 234.5");
    }
}
