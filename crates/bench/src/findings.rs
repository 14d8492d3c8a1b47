//! Findings: what a result set says, written as sentences that carry their own numbers.
//!
//! A reader of a benchmark report wants the conclusion first ("stealing across domains changed throughput by
//! +23%") and the evidence beside it. Every sentence here is computed from the cells of the result set, never
//! written in advance: the comparison against the experiment's first configuration (the baseline) over the
//! workloads both ran, the cost of skew, the share of bytes read locally, the peers' ratios, and warnings about
//! noise and errors. Differences smaller than the run's own per-second spread are called noise.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::driver::Workload;
use crate::experiment::{Cell, Configuration, ResultSet};

/// One sentence of a report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What it is about: `configuration`, `skew`, `locality`, `lookups`, `peer`, `noise`, `errors`, `machine`.
    pub topic: String,
    /// The sentence.
    pub text: String,
}

fn finding(topic: &str, text: String) -> Finding {
    Finding { topic: topic.to_string(), text }
}

/// The relative per-second spread of a cell (standard deviation over mean).
fn spread(cell: &Cell) -> f64 {
    if cell.run.per_second_mean > 0.0 { cell.run.per_second_stddev / cell.run.per_second_mean } else { 0.0 }
}

/// `+23%`, `-4.0%`.
fn percent_change(ratio: f64) -> String {
    let change = (ratio - 1.0) * 100.0;
    if change.abs() >= 10.0 { format!("{change:+.0}%") } else { format!("{change:+.1}%") }
}

fn share(part: u64, whole: u64) -> String {
    if whole == 0 { "n/a".into() } else { format!("{:.0}%", part as f64 * 100.0 / whole as f64) }
}

fn geometric_mean(ratios: &[f64]) -> f64 {
    if ratios.is_empty() {
        return f64::NAN;
    }
    (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp()
}

/// What differs between two configurations, in words (`stealing off → any, binding none → always`).
fn knob_changes(from: &Configuration, to: &Configuration) -> Vec<String> {
    let mut changes = Vec::new();
    for (knob, a, b) in [
        ("stealing", &from.stealing, &to.stealing),
        ("binding", &from.binding, &to.binding),
        ("workers", &from.workers, &to.workers),
        ("domains", &from.domains, &to.domains),
    ] {
        if a != b {
            changes.push(format!("{knob} {a} → {b}"));
        }
    }
    let tables: std::collections::BTreeSet<&String> = from.placement.keys().chain(to.placement.keys()).collect();
    for table in tables {
        let a = from.placement.get(table).map_or("unchanged", String::as_str);
        let b = to.placement.get(table).map_or("unchanged", String::as_str);
        if a != b {
            changes.push(format!("{table} {a} → {b}"));
        }
    }
    changes
}

/// Cells of one configuration, by workload.
fn by_workload<'a>(results: &'a ResultSet, configuration: &str) -> BTreeMap<String, &'a Cell> {
    results.cells.iter().filter(|c| c.configuration == configuration).map(|c| (workload_key(&c.workload), c)).collect()
}

fn workload_key(workload: &Workload) -> String {
    match workload {
        Workload::RandomAccess { .. } => "random".into(),
        Workload::Aggregation { k, range_pred } => format!("agg/{range_pred:010}/{k}"),
    }
}

/// The findings of a result set, most important first.
pub fn findings(results: &ResultSet) -> Vec<Finding> {
    let mut out = Vec::new();
    let configurations: Vec<&Configuration> = results
        .experiment
        .configurations
        .iter()
        .filter(|c| results.cells.iter().any(|cell| cell.configuration == c.name))
        .collect();
    if results.machine.nodes <= 1 {
        out.push(finding(
            "machine",
            "This machine has one NUMA node, so every byte is local by construction and placement cannot change \
             locality; the configurations differ only in scheduling. Run the same experiment in an emulated \
             multi-node guest (numa-vm run --machine 2s-snc2 -- numadb bench run …) or on a multi-socket server to \
             see placement effects."
                .into(),
        ));
    }
    // Every configuration against the first.
    if let Some((baseline, others)) = configurations.split_first() {
        let base_cells = by_workload(results, &baseline.name);
        for other in others {
            let cells = by_workload(results, &other.name);
            // Ratios per workload kind: aggregation cells (several skews and selectivities) and random access.
            let mut aggregation = Vec::new();
            let mut lookups = None;
            let mut noise: f64 = 0.0;
            let mut too_short = false;
            for (key, cell) in &cells {
                if let Some(base) = base_cells.get(key)
                    && base.run.queries_per_s > 0.0
                    && cell.run.queries_per_s > 0.0
                {
                    let ratio = cell.run.queries_per_s / base.run.queries_per_s;
                    match cell.workload {
                        Workload::Aggregation { .. } => aggregation.push(ratio),
                        Workload::RandomAccess { .. } => {
                            lookups = Some((ratio, base.run.queries_per_s, cell.run.queries_per_s));
                        }
                    }
                    noise = noise.max(spread(cell)).max(spread(base));
                    too_short |= cell.run.per_second.len() < 2 || base.run.per_second.len() < 2;
                }
            }
            let mut parts = Vec::new();
            let mut largest_change: f64 = 0.0;
            if !aggregation.is_empty() {
                let ratio = geometric_mean(&aggregation);
                largest_change = largest_change.max((ratio - 1.0).abs());
                let n = aggregation.len();
                parts.push(if n == 1 {
                    format!("aggregation throughput {}", percent_change(ratio))
                } else {
                    format!("aggregation throughput {} (geometric mean over {n} workloads)", percent_change(ratio))
                });
            }
            if let Some((ratio, before, after)) = lookups {
                largest_change = largest_change.max((ratio - 1.0).abs());
                parts.push(format!("random access {} ({before:.0} → {after:.0} lookups/s)", percent_change(ratio)));
            }
            if parts.is_empty() {
                continue;
            }
            let changes = knob_changes(baseline, other);
            let what = if changes.is_empty() { "the same settings".to_string() } else { changes.join(", ") };
            let mut text = format!("«{}» against «{}» ({what}): {}", other.name, baseline.name, parts.join(", "));
            let scanned = |cells: &BTreeMap<String, &Cell>| -> (u64, u64) {
                cells.values().fold((0, 0), |(l, t), c| (l + c.node_local_bytes, t + c.node_traffic.total()))
            };
            let (base_local, base_bytes) = scanned(&base_cells);
            let (local, bytes) = scanned(&cells);
            if results.machine.nodes > 1 && base_bytes > 0 && bytes > 0 {
                text.push_str(&format!(
                    ", and the share of bytes read locally {} → {}",
                    share(base_local, base_bytes),
                    share(local, bytes)
                ));
            }
            if too_short {
                text.push_str(". Cells shorter than two seconds have no per-second spread to judge noise by");
            } else if largest_change < noise {
                text.push_str(&format!(
                    ". The differences are within the run's noise (per-second spread up to ±{:.0}%)",
                    noise * 100.0
                ));
            }
            text.push('.');
            out.push(finding("configuration", text));
        }
    }
    // Skew: the balanced split against all predicates on one table.
    for configuration in &configurations {
        let cells = by_workload(results, &configuration.name);
        let mut range_preds: Vec<u64> = cells
            .values()
            .filter_map(|c| match c.workload {
                Workload::Aggregation { range_pred, .. } => Some(range_pred),
                Workload::RandomAccess { .. } => None,
            })
            .collect();
        range_preds.dedup();
        for range_pred in range_preds {
            let at = |k: u32| cells.get(&workload_key(&Workload::Aggregation { k, range_pred })).copied();
            let Some(balanced) = at(3) else { continue };
            let skewed: Vec<(u32, &Cell)> = [0, 6].into_iter().filter_map(|k| at(k).map(|c| (k, c))).collect();
            if skewed.is_empty() || balanced.run.queries_per_s <= 0.0 {
                continue;
            }
            let parts: Vec<String> = skewed
                .iter()
                .map(|(k, c)| format!("{:.0}% at k = {k}", c.run.queries_per_s * 100.0 / balanced.run.queries_per_s))
                .collect();
            out.push(finding(
                "skew",
                format!(
                    "Under «{}» at range_pred {range_pred}, with every predicate on one table throughput was {} of \
                     the balanced split's (k = 3: {:.0} queries/s).",
                    configuration.name,
                    parts.join(" and "),
                    balanced.run.queries_per_s
                ),
            ));
        }
    }
    // Locality per configuration, with the placement it resolved to.
    if results.machine.nodes > 1 {
        for configuration in &configurations {
            let cells: Vec<&Cell> = results.cells.iter().filter(|c| c.configuration == configuration.name).collect();
            let bytes: u64 = cells.iter().map(|c| c.node_traffic.total()).sum();
            if bytes == 0 {
                continue;
            }
            let local: u64 = cells.iter().map(|c| c.node_local_bytes).sum();
            let placement = results
                .resolved
                .iter()
                .find(|(name, _)| name == &configuration.name)
                .map(|(_, r)| r.placement.iter().map(|(t, p)| format!("{t} on {p}")).collect::<Vec<_>>().join(", "))
                .filter(|p| !p.is_empty())
                .map_or(String::new(), |p| format!(" ({p})"));
            let mut text = format!(
                "Under «{}»{placement}, {} of the {} scanned were read by a CPU on the memory's own node",
                configuration.name,
                share(local, bytes),
                numadb_report::bytes(bytes)
            );
            // The first of the reading nodes with the most remote bytes.
            let mut per_node: Vec<(String, u64, u64)> = Vec::new();
            for cell in &cells {
                for (name, local, remote) in cell.node_local_remote() {
                    match per_node.iter_mut().find(|(n, _, _)| *n == name) {
                        Some(entry) => {
                            entry.1 += local;
                            entry.2 += remote;
                        }
                        None => per_node.push((name, local, remote)),
                    }
                }
            }
            let most_remote = per_node.iter().fold(None::<&(String, u64, u64)>, |best, entry| match best {
                Some(best) if best.2 >= entry.2 => Some(best),
                _ => Some(entry),
            });
            if let Some((name, local, remote)) = most_remote
                && *remote > 0
            {
                text.push_str(&format!(
                    "; the CPUs of {name} read {} of their bytes from other nodes",
                    share(*remote, local + remote)
                ));
            }
            if configuration.domains != "node" {
                let domain_local: u64 = cells.iter().map(|c| c.local_bytes).sum();
                text.push_str(&format!(
                    " (counted by {} domain, which can span several nodes: {} local)",
                    configuration.domains,
                    share(domain_local, bytes)
                ));
            }
            text.push('.');
            out.push(finding("locality", text));
        }
    }
    // Point lookups.
    for cell in results.cells.iter().filter(|c| matches!(c.workload, Workload::RandomAccess { .. })) {
        out.push(finding(
            "lookups",
            format!(
                "Under «{}», {} connections ran {:.0} point lookups/s (p50 {:.0} µs, p99 {:.0} µs) with automatic \
                 NUMA balancing {}.",
                cell.configuration,
                results.experiment.connections,
                cell.run.queries_per_s,
                cell.run.latency.p50_us,
                cell.run.latency.p99_us,
                results.machine.numa_balancing
            ),
        ));
    }
    // Peers: numadb's baseline configuration against each peer.
    if let Some(baseline) = configurations.first() {
        let base_cells = by_workload(results, &baseline.name);
        let mut peers: BTreeMap<&str, Vec<(&Workload, f64)>> = BTreeMap::new();
        for peer in &results.peers {
            match &peer.run {
                Ok(run) if run.queries_per_s > 0.0 => {
                    if let Some(cell) = base_cells.get(&workload_key(&peer.workload)) {
                        peers
                            .entry(peer.peer.as_str())
                            .or_default()
                            .push((&peer.workload, cell.run.queries_per_s / run.queries_per_s));
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    out.push(finding("peer", format!("{} could not run {}: {error}", peer.peer, peer.workload.label())))
                }
            }
        }
        for (peer, ratios) in peers {
            let mut parts = Vec::new();
            for (label, pick) in [("aggregation", true), ("random access", false)] {
                let chosen: Vec<f64> = ratios
                    .iter()
                    .filter(|(w, _)| matches!(w, Workload::Aggregation { .. }) == pick)
                    .map(|(_, r)| *r)
                    .collect();
                if chosen.is_empty() {
                    continue;
                }
                let (low, high) = chosen.iter().fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
                parts.push(if chosen.len() == 1 {
                    format!("{:.2}× on {label}", chosen[0])
                } else {
                    format!(
                        "{:.2}× on {label} (geometric mean of {}, from {low:.2}× to {high:.2}×)",
                        geometric_mean(&chosen),
                        chosen.len()
                    )
                });
            }
            out.push(finding(
                "peer",
                format!(
                    "With the same {} connections and data, numadb («{}») ran {} {peer}'s throughput.",
                    results.experiment.connections,
                    baseline.name,
                    parts.join(" and ")
                ),
            ));
        }
    }
    for disagreement in &results.peer_disagreements {
        out.push(finding("peer", format!("A peer answered differently from numadb: {disagreement}.")));
    }
    for skipped in &results.skipped {
        out.push(finding("machine", format!("«{}» was not run: {}.", skipped.configuration, skipped.reason)));
    }
    // Noise and errors.
    let noisy: Vec<&Cell> = results.cells.iter().filter(|c| spread(c) > 0.15).collect();
    if !noisy.is_empty() {
        let worst = noisy.iter().map(|c| spread(c)).fold(0.0, f64::max);
        out.push(finding(
            "noise",
            format!(
                "{} of {} cells varied by more than ±15% from second to second (worst ±{:.0}%): something else was \
                 using the machine, or the cells were too short; treat smaller differences as noise.",
                noisy.len(),
                results.cells.len(),
                worst * 100.0
            ),
        ));
    }
    for cell in results.cells.iter().filter(|c| c.run.errors > 0) {
        out.push(finding(
            "errors",
            format!(
                "{} queries failed under «{}» ({}): {}.",
                cell.run.errors,
                cell.configuration,
                cell.workload.label(),
                cell.run.first_error.as_deref().unwrap_or("no message")
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use numadb_scheduler::ByteMatrix;

    use super::*;
    use crate::Machine;
    use crate::driver::RunResult;
    use crate::experiment::{ExperimentFile, PeerCell};

    const FILE: &str = r#"
        connections = 8
        duration_seconds = 2
        [[workload]]
        kind = "aggregation"
        range_pred = [1000]
        skew = [3, 6]
        [[configuration]]
        name = "off"
        stealing = "off"
        [[configuration]]
        name = "any"
        stealing = "any"
        placement = { TBL_1 = "node(1)" }
    "#;

    fn run(queries_per_s: f64, stddev: f64) -> RunResult {
        RunResult {
            queries: queries_per_s as u64 * 2,
            seconds: 2.0,
            queries_per_s,
            per_second: vec![queries_per_s as u64; 2],
            per_second_mean: queries_per_s,
            per_second_stddev: stddev,
            ..RunResult::default()
        }
    }

    /// Two domains reading two nodes: `local` bytes on the diagonal, `remote` off it, per domain.
    fn cell(configuration: &str, k: u32, queries_per_s: f64, local: u64, remote: u64) -> Cell {
        Cell {
            configuration: configuration.into(),
            workload: Workload::Aggregation { k, range_pred: 1000 },
            run: run(queries_per_s, queries_per_s * 0.01),
            traffic: ByteMatrix {
                worker_domains: vec!["node0".into(), "node1".into()],
                memory_nodes: vec![0, 1],
                bytes: vec![vec![local, remote], vec![remote, local]],
            },
            local_bytes: 2 * local,
            local_bytes_by_domain: vec![local, local],
            node_traffic: ByteMatrix {
                worker_domains: vec!["node0".into(), "node1".into()],
                memory_nodes: vec![0, 1],
                bytes: vec![vec![local, remote], vec![remote, local]],
            },
            node_local_bytes: 2 * local,
            tasks_run: 100,
            tasks_stolen: 10,
        }
    }

    fn results() -> ResultSet {
        let machine = Machine {
            cpu_model: "test".into(),
            kernel: "6".into(),
            cpus: 4,
            allowed_cpus: 4,
            nodes: 2,
            packages: 1,
            transparent_hugepages: "madvise".into(),
            numa_balancing: "off".into(),
            last_level_cache_bytes: Some(32 << 20),
        };
        ResultSet {
            experiment: ExperimentFile::parse(FILE).unwrap(),
            machine,
            target: "in-process".into(),
            cells: vec![
                cell("off", 3, 100.0, 1 << 30, 1 << 30),
                cell("off", 6, 50.0, 1 << 30, 1 << 30),
                cell("any", 3, 200.0, 1 << 30, 0),
                cell("any", 6, 200.0, 1 << 30, 0),
            ],
            skipped: Vec::new(),
            resolved: Vec::new(),
            peers: vec![PeerCell {
                peer: "DuckDB 9".into(),
                workload: Workload::Aggregation { k: 3, range_pred: 1000 },
                run: Ok(run(25.0, 1.0)),
            }],
            peer_disagreements: Vec::new(),
            started_at: "now".into(),
        }
    }

    fn text_of(findings: &[Finding], topic: &str) -> Vec<String> {
        findings.iter().filter(|f| f.topic == topic).map(|f| f.text.clone()).collect()
    }

    #[test]
    fn sentences_carry_the_numbers_of_the_cells() {
        let findings = findings(&results());
        let configuration = text_of(&findings, "configuration");
        assert_eq!(configuration.len(), 1, "{configuration:?}");
        // 200/100 and 200/50: geometric mean 2.83.
        assert!(configuration[0].contains("stealing off → any"), "{}", configuration[0]);
        assert!(configuration[0].contains("TBL_1 unchanged → node(1)"), "{}", configuration[0]);
        assert!(
            configuration[0].contains("aggregation throughput +183% (geometric mean over 2"),
            "{}",
            configuration[0]
        );
        assert!(configuration[0].contains("50% → 100%"), "{}", configuration[0]);
        assert!(!configuration[0].contains("noise"));
        let skew = text_of(&findings, "skew");
        assert!(skew.iter().any(|s| s.contains("«off»") && s.contains("50% at k = 6")), "{skew:?}");
        assert!(skew.iter().any(|s| s.contains("«any»") && s.contains("100% at k = 6")), "{skew:?}");
        let locality = text_of(&findings, "locality");
        assert!(locality.iter().any(|s| s.contains("«off»") && s.contains("50% of the 8 GiB")), "{locality:?}");
        assert!(
            locality.iter().any(|s| s.contains("the CPUs of node0 read 50% of their bytes from other nodes")),
            "{locality:?}"
        );
        let peer = text_of(&findings, "peer");
        assert_eq!(peer.len(), 1);
        assert!(peer[0].contains("4.00× on aggregation") && peer[0].contains("DuckDB 9"), "{}", peer[0]);
        assert!(text_of(&findings, "machine").is_empty());
    }

    #[test]
    fn small_differences_are_called_noise_and_one_node_is_explained() {
        let mut results = results();
        results.machine.nodes = 1;
        for cell in &mut results.cells {
            cell.run = run(100.0, 20.0);
        }
        let findings = findings(&results);
        let configuration = text_of(&findings, "configuration");
        assert!(configuration[0].contains("within the run's noise"), "{}", configuration[0]);
        assert!(!configuration[0].contains("locally"), "no locality on one node: {}", configuration[0]);
        assert!(text_of(&findings, "locality").is_empty());
        assert!(text_of(&findings, "machine")[0].contains("one NUMA node"));
        assert!(text_of(&findings, "noise")[0].starts_with("4 of 4 cells"));
    }
}
