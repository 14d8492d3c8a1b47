//! A result set as a terminal summary and as files: `results.json`, `cells.csv`, the thesis's figures as SVG and
//! PNG (throughput with per-second error bars per configuration and skew, like figures 12–14's left panels; bytes
//! read per domain split local/remote, like their right panels), and one self-contained `report.html`.
//!
//! The page is built in sections so that `numadb tour` can put the machine's topology and the probe's matrices
//! in front of the experiment's sections on one page.

use std::collections::BTreeSet;
use std::path::Path;

use numadb_report::{
    Bar, Csv, GroupedBarChart, GroupedSeries, HtmlPage, OutputDir, StackedBar, StackedBarChart, groups,
};

use crate::driver::{RunResult, Workload};
use crate::experiment::ResultSet;
use crate::findings::Finding;

/// `results.json` and `numadb bench run --json`: the result set and its findings.
#[derive(Debug, serde::Serialize)]
pub struct Document<'a> {
    /// Everything measured.
    pub results: &'a ResultSet,
    /// What it says.
    pub findings: &'a [Finding],
}

fn run_cells(run: &RunResult) -> Vec<String> {
    vec![
        format!("{:.0}", run.queries_per_s),
        // One whole second has no spread to speak of.
        if run.per_second.len() < 2 { "-".into() } else { format!("{:.0}", run.per_second_stddev) },
        format!("{:.0}", run.latency.p50_us),
        format!("{:.0}", run.latency.p99_us),
        run.errors.to_string(),
    ]
}

/// The table of every cell: header row first.
pub fn cell_rows(results: &ResultSet) -> Vec<Vec<String>> {
    let mut rows = vec![
        [
            "configuration",
            "workload",
            "queries/s",
            "± per s",
            "p50 µs",
            "p99 µs",
            "errors",
            "bytes read",
            "local",
            "tasks stolen",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for cell in &results.cells {
        let mut row = vec![cell.configuration.clone(), cell.workload.label()];
        row.extend(run_cells(&cell.run));
        let total = cell.traffic.total();
        row.push(if total == 0 { "-".into() } else { numadb_report::bytes(total) });
        row.push(cell.local_share().map_or("-".into(), |s| format!("{:.0}%", s * 100.0)));
        row.push(if cell.tasks_run == 0 {
            "-".into()
        } else {
            format!("{:.1}%", cell.tasks_stolen as f64 * 100.0 / cell.tasks_run as f64)
        });
        rows.push(row);
    }
    rows
}

/// The peers' cells beside numadb's first configuration: header row first.
pub fn peer_rows(results: &ResultSet) -> Vec<Vec<String>> {
    let mut rows = vec![
        ["workload", "peer", "peer queries/s", "numadb queries/s", "numadb / peer", "peer p50 µs", "peer p99 µs"]
            .map(String::from)
            .to_vec(),
    ];
    let baseline = results.cells.first().map(|c| c.configuration.clone()).unwrap_or_default();
    for peer in &results.peers {
        let numadb = results
            .cells
            .iter()
            .find(|c| c.configuration == baseline && c.workload == peer.workload)
            .map(|c| c.run.queries_per_s);
        match &peer.run {
            Ok(run) => rows.push(vec![
                peer.workload.label(),
                peer.peer.clone(),
                format!("{:.0}", run.queries_per_s),
                numadb.map_or("-".into(), |q| format!("{q:.0}")),
                numadb
                    .filter(|_| run.queries_per_s > 0.0)
                    .map_or("-".into(), |q| format!("{:.2}×", q / run.queries_per_s)),
                format!("{:.0}", run.latency.p50_us),
                format!("{:.0}", run.latency.p99_us),
            ]),
            Err(error) => rows.push(vec![
                peer.workload.label(),
                peer.peer.clone(),
                format!("failed: {error}"),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]),
        }
    }
    rows
}

/// Lays out rows as an aligned text table.
pub fn text_table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(
                |(c, value)| {
                    if c < 2 { format!("{value:<w$}", w = widths[c]) } else { format!("{value:>w$}", w = widths[c]) }
                },
            )
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
        if i == 0 {
            out.push_str(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
            out.push('\n');
        }
    }
    out
}

/// The terminal summary: what ran, the cells, the peers, the findings.
pub fn text(results: &ResultSet, findings: &[Finding]) -> String {
    let mut out = format!(
        "experiment {}: {} configuration(s) × {} workload(s), {} connections, {} rows per table, target {}\nmachine: {}\n\n",
        results.experiment.name,
        results.experiment.configurations.len(),
        results.experiment.expanded_workloads().len(),
        results.experiment.connections,
        results.experiment.rows,
        results.target,
        results.machine.line()
    );
    out.push_str(&text_table(&cell_rows(results)));
    if !results.peers.is_empty() {
        out.push('\n');
        out.push_str(&text_table(&peer_rows(results)));
    }
    if !findings.is_empty() {
        out.push_str("\nfindings:\n");
        for finding in findings {
            out.push_str(&format!("- {}\n", finding.text));
        }
    }
    out
}

/// The throughput figures: one per range predicate of the aggregation workloads (groups: skew k; series:
/// configurations, then peers) and one for random access.
pub fn throughput_charts(results: &ResultSet) -> Vec<(String, GroupedBarChart)> {
    let configurations: Vec<String> = results
        .experiment
        .configurations
        .iter()
        .map(|c| c.name.clone())
        .filter(|name| results.cells.iter().any(|c| &c.configuration == name))
        .collect();
    let peers: Vec<String> =
        results.peers.iter().map(|p| p.peer.clone()).collect::<BTreeSet<_>>().into_iter().collect();
    let bar = |run: &RunResult| Bar {
        label: String::new(),
        value: run.queries_per_s,
        low: (run.per_second_mean - run.per_second_stddev).max(0.0),
        high: run.per_second_mean + run.per_second_stddev,
    };
    let series_for = |workloads: &[Workload]| -> Vec<GroupedSeries> {
        let mut series: Vec<GroupedSeries> = configurations
            .iter()
            .map(|name| GroupedSeries {
                name: name.clone(),
                bars: workloads
                    .iter()
                    .map(|w| {
                        results.cells.iter().find(|c| &c.configuration == name && &c.workload == w).map(|c| bar(&c.run))
                    })
                    .collect(),
            })
            .collect();
        for peer in &peers {
            series.push(GroupedSeries {
                name: peer.clone(),
                bars: workloads
                    .iter()
                    .map(|w| {
                        results
                            .peers
                            .iter()
                            .find(|p| &p.peer == peer && &p.workload == w)
                            .and_then(|p| p.run.as_ref().ok())
                            .map(bar)
                    })
                    .collect(),
            });
        }
        series
    };
    let workloads = results.experiment.expanded_workloads();
    let mut charts = Vec::new();
    let range_preds: BTreeSet<u64> = workloads
        .iter()
        .filter_map(|w| match w {
            Workload::Aggregation { range_pred, .. } => Some(*range_pred),
            Workload::RandomAccess { .. } => None,
        })
        .collect();
    for range_pred in range_preds {
        let group: Vec<Workload> = workloads
            .iter()
            .filter(|w| matches!(w, Workload::Aggregation { range_pred: r, .. } if *r == range_pred))
            .cloned()
            .collect();
        charts.push((
            format!("throughput-aggregation-{range_pred}"),
            GroupedBarChart {
                title: format!("Aggregation, range_pred {range_pred}: throughput by skew"),
                y_label: "queries/s (± per-second sd)".into(),
                groups: group
                    .iter()
                    .map(|w| match w {
                        Workload::Aggregation { k, .. } => format!("k = {k}/6"),
                        Workload::RandomAccess { .. } => String::new(),
                    })
                    .collect(),
                series: series_for(&group),
            },
        ));
    }
    if let Some(random) = workloads.iter().find(|w| matches!(w, Workload::RandomAccess { .. })) {
        charts.push((
            "throughput-random-access".into(),
            GroupedBarChart {
                title: "Random access: throughput".into(),
                y_label: "lookups/s (± per-second sd)".into(),
                groups: vec![format!("{} connections", results.experiment.connections)],
                series: series_for(std::slice::from_ref(random)),
            },
        ));
    }
    charts
}

/// Local and remote bytes of each reading node (by name, in order of first appearance) over some cells.
fn bytes_by_node<'a>(cells: impl Iterator<Item = &'a crate::experiment::Cell>) -> Vec<(String, u64, u64)> {
    let mut nodes: Vec<(String, u64, u64)> = Vec::new();
    for cell in cells {
        for (name, local, remote) in cell.node_local_remote() {
            match nodes.iter_mut().find(|(n, _, _)| *n == name) {
                Some(entry) => {
                    entry.1 += local;
                    entry.2 += remote;
                }
                None => nodes.push((name, local, remote)),
            }
        }
    }
    nodes
}

/// The traffic figures: the local and remote shares of every configuration's bytes, then, where more than one
/// node's CPUs read, each configuration's bytes per reading node (local: from the reading CPU's own node).
pub fn traffic_charts(results: &ResultSet) -> Vec<(String, StackedBarChart)> {
    let mut charts = Vec::new();
    let mut shares = Vec::new();
    let mut per_domain = Vec::new();
    for (index, configuration) in results.experiment.configurations.iter().enumerate() {
        let domains = bytes_by_node(results.cells.iter().filter(|c| c.configuration == configuration.name));
        let (local, remote) = domains.iter().fold((0, 0), |(l, r), d| (l + d.1, r + d.2));
        if local + remote == 0 {
            continue;
        }
        let total = (local + remote) as f64;
        shares.push(StackedBar {
            label: configuration.name.clone(),
            segments: vec![local as f64 * 100.0 / total, remote as f64 * 100.0 / total],
        });
        if domains.len() > 1 {
            const GIB: f64 = (1u64 << 30) as f64;
            per_domain.push((
                format!("traffic-{}", index + 1),
                StackedBarChart {
                    title: format!("Bytes read by each node's CPUs: {}", configuration.name),
                    y_label: "GiB".into(),
                    segment_names: vec!["local".into(), "remote".into()],
                    bars: domains
                        .into_iter()
                        .map(|(name, local, remote)| StackedBar {
                            label: name,
                            segments: vec![local as f64 / GIB, remote as f64 / GIB],
                        })
                        .collect(),
                },
            ));
        }
    }
    if !shares.is_empty() {
        charts.push((
            "traffic-shares".into(),
            StackedBarChart {
                title: "Local and remote shares of the bytes scanned".into(),
                y_label: "% of bytes read".into(),
                segment_names: vec!["local".into(), "remote".into()],
                bars: shares,
            },
        ));
    }
    charts.extend(per_domain);
    charts
}

fn write_chart(out: &mut OutputDir, stem: &str, svg: &str) -> Result<(), String> {
    out.write(&format!("{stem}.svg"), svg).map_err(|e| e.to_string())?;
    if numadb_report::png::fonts_available()
        && let Ok(png) = numadb_report::png::svg_to_png(svg)
    {
        out.write(&format!("{stem}.png"), png).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Adds the experiment's sections to a page and writes its data and chart files.
pub fn write_sections(
    page: &mut HtmlPage,
    out: &mut OutputDir,
    results: &ResultSet,
    findings: &[Finding],
) -> Result<(), String> {
    page.heading(2, &format!("Experiment: {}", results.experiment.name));
    if !results.experiment.description.is_empty() {
        page.paragraph(&results.experiment.description);
    }
    page.key_values(&[
        ("clients".into(), format!("{} connections, prepared statements", results.experiment.connections)),
        ("rows".into(), format!("{} per table (TBL_0, TBL_1)", results.experiment.rows)),
        (
            "each cell".into(),
            match (results.experiment.duration_seconds, results.experiment.queries_per_connection) {
                (_, Some(q)) => {
                    format!("{} s warm-up, then {q} queries per connection", results.experiment.warmup_seconds)
                }
                (Some(s), None) => format!("{} s warm-up, then {s} s measured", results.experiment.warmup_seconds),
                (None, None) => "default".into(),
            },
        ),
        ("target".into(), results.target.clone()),
        ("started".into(), results.started_at.clone()),
    ]);
    page.heading(3, "Findings");
    page.list(&findings.iter().map(|f| f.text.clone()).collect::<Vec<_>>());
    page.heading(3, "Throughput");
    for (stem, chart) in throughput_charts(results) {
        let svg = groups::grouped_bars(&chart).map_err(|e| e.to_string())?;
        write_chart(out, &stem, &svg)?;
        page.figure(&svg, &format!("{} ({stem}.svg)", chart.title));
    }
    let traffic = traffic_charts(results);
    if !traffic.is_empty() {
        page.heading(3, "Memory traffic");
        page.paragraph(
            "Bytes the scan tasks read, by the node of the CPU that read them, split into memory on that node \
             (local) and on other nodes (remote): numadb's software equivalent of the memory-controller counters \
             behind the thesis's traffic panels. results.json also has each cell's matrix by scheduling domain.",
        );
        for (stem, chart) in traffic {
            let svg = groups::stacked_bars(&chart).map_err(|e| e.to_string())?;
            write_chart(out, &stem, &svg)?;
            page.figure(&svg, &format!("{} ({stem}.svg)", chart.title));
        }
    }
    page.heading(3, "Cells");
    let rows = cell_rows(results);
    page.table(&rows);
    let mut csv = Csv::new(&rows[0]);
    for row in &rows[1..] {
        csv.row(row);
    }
    out.write("cells.csv", csv.finish()).map_err(|e| e.to_string())?;
    if !results.peers.is_empty() {
        page.heading(3, "Peers, same clients and data");
        page.table(&peer_rows(results));
    }
    if !results.resolved.is_empty() {
        page.heading(3, "Configurations on this machine");
        let mut rows = vec![["configuration", "settings", "placement"].map(String::from).to_vec()];
        for (name, resolved) in &results.resolved {
            rows.push(vec![
                name.clone(),
                resolved.settings.iter().map(|(n, v)| format!("{n} = {v}")).collect::<Vec<_>>().join("; "),
                resolved.placement.iter().map(|(t, p)| format!("{t}: {p}")).collect::<Vec<_>>().join("; "),
            ]);
        }
        for skipped in &results.skipped {
            rows.push(vec![skipped.configuration.clone(), format!("not run: {}", skipped.reason), String::new()]);
        }
        page.table(&rows);
    }
    let document = Document { results, findings };
    out.write("results.json", numadb_report::to_json(&document)).map_err(|e| e.to_string())?;
    Ok(())
}

/// Writes a whole report for one result set into `dir`: returns the files written. `more_about_the_machine` adds
/// sections after the machine's (the CLI puts the probe's matrices there).
pub fn write_report(
    dir: &Path,
    results: &ResultSet,
    findings: &[Finding],
    machine: &numadb_report::MachineBlock,
    more_about_the_machine: impl FnOnce(&mut HtmlPage) -> Result<(), String>,
) -> Result<Vec<String>, String> {
    let mut out = OutputDir::create(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut page = HtmlPage::new(&format!("numadb bench: {}", results.experiment.name));
    page.heading(2, "Machine");
    page.key_values(&machine.rows());
    page.paragraph(&results.machine.line());
    more_about_the_machine(&mut page)?;
    write_sections(&mut page, &mut out, results, findings)?;
    page.heading(2, "Files");
    page.file_list(out.written());
    out.write("report.html", page.finish()).map_err(|e| e.to_string())?;
    Ok(out.written().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{self, ExperimentFile, ExperimentTarget};

    #[test]
    fn a_run_becomes_a_page_with_its_figures_tables_and_findings() {
        let file = ExperimentFile::parse(
            r#"
            name = "tiny"
            rows = 20000
            connections = 2
            warmup_seconds = 0
            queries_per_connection = 4
            [[workload]]
            kind = "aggregation"
            range_pred = [1000]
            skew = [0, 3]
            [[workload]]
            kind = "random_access"
            [[configuration]]
            name = "off"
            stealing = "off"
            [[configuration]]
            name = "any"
            stealing = "any"
            "#,
        )
        .unwrap();
        let database = numadb_sql::Database::new().unwrap();
        let topology = database.topology().clone();
        let results = experiment::run(&file, &ExperimentTarget::InProcess(database), &topology, |_| {}).unwrap();
        let findings = crate::findings::findings(&results);
        let summary = text(&results, &findings);
        assert!(summary.contains("experiment tiny") && summary.contains("aggregation 3/6, range_pred 1000"));
        assert!(summary.contains("«any» against «off»"), "{summary}");
        let dir = std::env::temp_dir().join(format!("numadb-report-test-{}", std::process::id()));
        let machine = numadb_report::MachineBlock::new(&topology, 4096);
        let written = write_report(&dir, &results, &findings, &machine, |page| {
            page.paragraph("more about the machine");
            Ok(())
        })
        .unwrap();
        for name in [
            "report.html",
            "cells.csv",
            "results.json",
            "throughput-aggregation-1000.svg",
            "throughput-random-access.svg",
        ] {
            assert!(written.iter().any(|w| w == name), "{name} not in {written:?}");
        }
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert!(html.contains("<svg") && html.contains("k = 3/6") && html.contains("Findings"));
        assert!(html.contains("more about the machine"));
        assert!(html.contains(&numadb_report::html::escape(&findings[0].text)));
        let csv = std::fs::read_to_string(dir.join("cells.csv")).unwrap();
        assert_eq!(csv.lines().count(), 1 + results.cells.len());
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
        assert_eq!(json["results"]["cells"].as_array().unwrap().len(), 6);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
