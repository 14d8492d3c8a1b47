//! The prober on a real multi-node kernel (an emulated guest; see `crates/numa-vm`): the latency and bandwidth
//! matrices have the configured shape — a row per CPU domain, a column per memory node (memory-only nodes
//! included), every cell measured from every CPU of its domain — and every buffer is verified on the node of its
//! column. The values mean nothing under emulation; the structure is what is tested. Buffers are tiny and samples
//! short so that the three guests stay within seconds.

use std::time::Duration;

use numadb_guest_tests::{balancing_on, expected_topology, memory_nodes, numadb_binary};
use numadb_placement::HugePages;
use numadb_probe::bandwidth::{self, BandwidthOptions};
use numadb_probe::latency::{self, LatencyOptions};
use numadb_probe::{ChainLayout, Isa, MatrixAxes, NoProgress, PlacementCheck, PlacementVerdict, Traffic};
use numadb_topology::{DomainGranularity, Topology};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

fn live_axes() -> MatrixAxes {
    MatrixAxes::of(&Topology::from_system().unwrap(), DomainGranularity::Node).unwrap()
}

/// Without NUMA balancing a bound buffer is on its node, page for page. With it, the scanner may unmap a page for
/// a moment (reported unknown), but no page may be on another node.
fn assert_placed(check: &PlacementCheck, what: &str) {
    if balancing_on() {
        assert_ne!(check.verdict, PlacementVerdict::Wrong, "{what}: {}", check.describe());
    } else {
        assert_eq!(check.verdict, PlacementVerdict::Verified, "{what}: {}", check.describe());
    }
}

#[test]
fn the_axes_are_the_configured_domains_and_memory_nodes() {
    let axes = live_axes();
    let expected = expected_topology().domains(DomainGranularity::Node).unwrap();
    assert_eq!(axes.domains.len(), expected.len());
    for (row, domain) in axes.domains.iter().zip(&expected.domains) {
        assert_eq!(row.cpus, domain.cpus.iter().collect::<Vec<_>>(), "CPUs of {}", domain.name);
    }
    assert_eq!(axes.nodes, memory_nodes(), "a column per memory node, memory-only nodes included");
}

#[test]
fn the_latency_matrix_measures_every_domain_and_node_from_every_cpu() {
    let axes = live_axes();
    let options = LatencyOptions {
        layout: ChainLayout { buffer_bytes: MIB, stride_bytes: 256, window_bytes: 64 * KIB },
        huge_pages: HugePages::Never,
        sample: Duration::from_millis(2),
        repetitions: 2,
        seed: 1,
    };
    let matrix = latency::measure_matrix(&axes, &options, &NoProgress).unwrap();
    assert_eq!(matrix.cells.len(), axes.domains.len() * axes.nodes.len());
    for (domain, node) in axes.cells() {
        let cell = matrix.cell(domain, node).unwrap_or_else(|| panic!("cell ({domain}, {node}) missing"));
        let cpus: Vec<u32> = cell.cpus.iter().map(|c| c.cpu).collect();
        assert_eq!(cpus, axes.domains[domain].cpus, "every CPU of domain {domain} measured node {node}");
        for cpu in &cell.cpus {
            assert_eq!(cpu.moved_samples, 0, "CPU {} moved although pinned", cpu.cpu);
            assert_eq!(cpu.samples_ns.len(), 2);
            assert!(cpu.summary.unwrap().median > 0.0);
        }
        assert!(cell.latency_ns.is_some());
    }
    assert_eq!(matrix.buffers.iter().map(|b| b.node).collect::<Vec<_>>(), axes.nodes);
    for buffer in &matrix.buffers {
        assert_placed(&buffer.placement, &format!("chain on node {}", buffer.node));
        assert_eq!(buffer.placement.node, buffer.node);
    }
}

#[test]
fn the_bandwidth_matrix_streams_every_domain_to_every_node() {
    let axes = live_axes();
    for traffic in [Traffic::Read, Traffic::Write] {
        let options = BandwidthOptions {
            buffer_bytes: 2 * MIB,
            traffic,
            isa: Isa::best(),
            huge_pages: HugePages::Never,
            sample: Duration::from_millis(2),
            repetitions: 1,
        };
        let matrix = bandwidth::measure_matrix(&axes, &options, &NoProgress).unwrap();
        assert_eq!(matrix.cells.len(), axes.domains.len() * axes.nodes.len());
        for (domain, node) in axes.cells() {
            let cell = matrix.cell(domain, node).unwrap_or_else(|| panic!("cell ({domain}, {node}) missing"));
            assert_eq!(cell.cpus, axes.domains[domain].cpus, "one thread per CPU of the domain");
            assert_eq!(cell.samples_mb_per_s.len(), 1, "{traffic:?} ({domain}, {node})");
            assert_eq!(cell.moved_samples, 0);
            assert_placed(&cell.placement, &format!("{traffic:?} buffers of ({domain}, {node})"));
        }
    }
}

#[test]
fn numadb_probe_latency_json_has_the_configured_shape() {
    let output = std::process::Command::new(numadb_binary())
        .args(["probe", "latency", "--buffer", "512K", "--sample-ms", "2", "--repetitions", "1", "--json"])
        .output()
        .expect("running numadb");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("one JSON document");
    let matrix = &document["latency"][0];
    let expected = expected_topology();
    let domains = expected.domains(DomainGranularity::Node).unwrap().len();
    assert_eq!(matrix["axes"]["domains"].as_array().unwrap().len(), domains);
    assert_eq!(matrix["axes"]["nodes"], serde_json::to_value(memory_nodes()).unwrap());
    assert_eq!(matrix["cells"].as_array().unwrap().len(), domains * expected.nodes.len());
    for buffer in matrix["buffers"].as_array().unwrap() {
        let verdict = buffer["placement"]["verdict"].as_str().unwrap();
        assert!(verdict == "verified" || (balancing_on() && verdict == "partly_unknown"), "{buffer}");
    }
}
