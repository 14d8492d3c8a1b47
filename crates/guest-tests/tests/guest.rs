//! Placement, pinning and topology on a real multi-node kernel (an emulated guest; see `crates/numa-vm`).

use std::time::{Duration, Instant};

use numadb_guest_tests::{balancing_on, expected_topology, machine, memory_nodes, numadb_binary};
use numadb_placement::{
    HugePages, NumaBuffer, PinGuard, PlacementError, Policy, Region, current_cpu, pin_current_thread, system_topology,
};
use numadb_topology::{CpuSet, DomainGranularity, NodeSet, Topology};

const MIB: usize = 1 << 20;

fn live() -> Topology {
    Topology::from_system().expect("reading the guest's topology")
}

/// A node that exists in every built-in machine, or the last node of a smaller one.
fn node_at_most(wanted: u32) -> u32 {
    let nodes = memory_nodes();
    nodes.iter().copied().filter(|&n| n <= wanted).max().unwrap_or(nodes[0])
}

#[test]
fn topology_equals_the_configured_machine() {
    let expected = expected_topology();
    let live = live();
    assert_eq!(live.node_ids(), expected.node_ids(), "node ids");
    for (live_node, expected_node) in live.nodes.iter().zip(&expected.nodes) {
        assert_eq!(live_node.cpus, expected_node.cpus, "CPUs of node {}", live_node.id);
        // The kernel keeps some of each node's memory for itself.
        assert!(
            live_node.memory_bytes <= expected_node.memory_bytes
                && live_node.memory_bytes > expected_node.memory_bytes / 2,
            "node {} has {} bytes, configured {}",
            live_node.id,
            live_node.memory_bytes,
            expected_node.memory_bytes
        );
    }
    assert_eq!(live.distances, expected.distances, "distance matrix");
    assert_eq!(live.online_cpus(), expected.online_cpus());
    for expected_cpu in &expected.cpus {
        let cpu = live.cpu(expected_cpu.id).unwrap_or_else(|| panic!("CPU {} missing", expected_cpu.id));
        assert_eq!(cpu.node, expected_cpu.node, "node of CPU {}", cpu.id);
        assert_eq!(cpu.package, expected_cpu.package, "package of CPU {}", cpu.id);
        assert_eq!(cpu.smt_siblings, expected_cpu.smt_siblings, "SMT siblings of CPU {}", cpu.id);
    }
    assert_eq!(live.threads_per_core(), machine().threads_per_core as usize);
    assert_eq!(live.package_count(), expected.package_count());
    let live_domains = live.domains(DomainGranularity::Node).unwrap();
    let expected_domains = expected.domains(DomainGranularity::Node).unwrap();
    assert_eq!(live_domains.len(), expected_domains.len());
    for (live_domain, expected_domain) in live_domains.domains.iter().zip(&expected_domains.domains) {
        assert_eq!(live_domain.cpus, expected_domain.cpus);
        assert_eq!(live_domain.memory_nodes, expected_domain.memory_nodes);
        assert_eq!(live_domain.by_distance, expected_domain.by_distance, "victim order of {}", live_domain.name);
    }
    let packages = live.domains(DomainGranularity::Package).unwrap();
    assert_eq!(packages.len(), expected.package_count());
}

#[test]
fn numadb_topo_json_equals_the_configured_machine() {
    let output = std::process::Command::new(numadb_binary()).args(["topo", "--json"]).output().expect("running numadb");
    assert!(output.status.success(), "numadb topo --json failed: {}", String::from_utf8_lossy(&output.stderr));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("numadb topo --json is JSON");
    let expected = expected_topology();
    assert_eq!(document["schema_version"], 1);
    let nodes = document["topology"]["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), expected.nodes.len());
    for (node, expected_node) in nodes.iter().zip(&expected.nodes) {
        assert_eq!(node["id"], expected_node.id);
        assert_eq!(node["cpus"], serde_json::to_value(&expected_node.cpus).unwrap());
    }
    assert_eq!(document["topology"]["distances"]["rows"], serde_json::to_value(&expected.distances.rows).unwrap());
    let expected_domains = expected.domains(DomainGranularity::Node).unwrap();
    let domains = document["domains"]["node"]["domains"].as_array().unwrap();
    assert_eq!(domains.len(), expected_domains.len());
    for (domain, expected_domain) in domains.iter().zip(&expected_domains.domains) {
        assert_eq!(domain["by_distance"], serde_json::to_value(&expected_domain.by_distance).unwrap());
    }
}

#[test]
fn a_region_bound_to_node_2_has_every_page_on_node_2() {
    let node = node_at_most(2);
    for huge_pages in [HugePages::Never, HugePages::Transparent] {
        let mut region = Region::new(16 * MIB, Policy::Node(node), huge_pages).unwrap();
        region.populate();
        let histogram = region.page_locations().unwrap();
        assert!(histogram.all_on(node), "{huge_pages:?}: {histogram:?}");
    }
}

#[test]
fn interleaving_over_four_nodes_spreads_pages_evenly() {
    let nodes: NodeSet = memory_nodes().into_iter().take(4).collect();
    let mut region = Region::new(4099 * 4096, Policy::Interleave(nodes.clone()), HugePages::Never).unwrap();
    region.populate();
    let histogram = region.page_locations().unwrap();
    assert_eq!(histogram.unknown, 0);
    let even = histogram.pages / nodes.len();
    for node in nodes.iter() {
        let count = histogram.on_node(node);
        assert!(count.abs_diff(even) <= 1, "node {node} holds {count} pages, {even}±1 expected: {histogram:?}");
    }
    assert_eq!(histogram.known(), histogram.pages);
}

#[test]
fn migration_to_node_3_moves_every_page_and_keeps_the_data() {
    let target = node_at_most(3);
    let values: Vec<u64> = (0..2_000_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 3)).collect();
    let mut buffer = NumaBuffer::from_slice(&values, Policy::Node(0), HugePages::Never).unwrap();
    assert!(buffer.region().page_locations().unwrap().all_on(0));
    let report = buffer.region_mut().migrate(Policy::Node(target)).unwrap();
    assert!(report.before.all_on(0), "bound to node 0 before the migration: {report:?}");
    assert!(report.after.all_on(target), "{report:?}");
    assert_eq!(&buffer[..], &values[..], "data changed during migration");
}

#[test]
fn migration_from_one_node_to_interleaved_spreads_every_page_and_keeps_the_data() {
    // mbind(MPOL_MF_MOVE) alone leaves pages that are already on one of the interleaved nodes where they are.
    let nodes: NodeSet = memory_nodes().into_iter().take(4).collect();
    let values: Vec<u64> = (0..2_000_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i >> 5)).collect();
    for huge_pages in [HugePages::Never, HugePages::Transparent] {
        let mut buffer = NumaBuffer::from_slice(&values, Policy::Node(0), huge_pages).unwrap();
        let report = buffer.region_mut().migrate(Policy::Interleave(nodes.clone())).unwrap();
        assert!(report.before.all_on(0), "{huge_pages:?}: bound to node 0 before the migration: {report:?}");
        let after = report.after;
        assert_eq!(after.known(), after.pages, "{huge_pages:?}: {after:?}");
        // Even to one 2 MiB unit (512 base pages) with huge pages, to one page without.
        let unit = if huge_pages == HugePages::Transparent { 512 } else { 1 };
        let even = after.pages / nodes.len();
        for node in nodes.iter() {
            let count = after.on_node(node);
            assert!(
                count.abs_diff(even) <= unit,
                "{huge_pages:?}: node {node} holds {count} pages, {even} expected: {after:?}"
            );
        }
        assert_eq!(&buffer[..], &values[..], "{huge_pages:?}: data changed during migration");
    }
}

#[test]
fn first_touch_places_pages_on_the_touching_cpus_node() {
    let expected = expected_topology();
    std::thread::spawn(move || {
        for node in expected.nodes.iter().filter(|n| !n.cpus.is_empty()) {
            let cpu = node.cpus.first().unwrap();
            let _pin = PinGuard::pin(&CpuSet::from_ids([cpu])).unwrap();
            let mut region = Region::new(4 * MIB, Policy::FirstTouch, HugePages::Never).unwrap();
            region.populate();
            let histogram = region.page_locations().unwrap();
            assert!(histogram.all_on(node.id), "touched from CPU {cpu}: {histogram:?}");
        }
    })
    .join()
    .unwrap();
}

#[test]
fn pinning_to_a_cpu_lands_on_it_and_on_its_node() {
    let expected = expected_topology();
    std::thread::spawn(move || {
        for cpu in expected.online_cpus().iter() {
            pin_current_thread(&CpuSet::from_ids([cpu])).unwrap();
            // Give the scheduler a chance to move us, then ask where we are.
            std::thread::yield_now();
            let location = current_cpu().unwrap();
            assert_eq!(location.cpu, cpu);
            assert_eq!(Some(location.node), expected.cpu(cpu).unwrap().node, "node of CPU {cpu}");
        }
    })
    .join()
    .unwrap();
}

#[test]
fn binding_to_a_missing_node_fails_cleanly() {
    let missing = memory_nodes().last().unwrap() + 1;
    let error = Region::new(MIB, Policy::Node(missing), HugePages::Never).unwrap_err();
    assert!(matches!(error, PlacementError::NodeNotUsable(_)));
    let existing = system_topology().unwrap().node_ids();
    assert_eq!(
        error.to_string(),
        format!(
            "NUMA node {missing} does not exist (this machine has nodes {existing}; this process may allocate from nodes {existing})"
        )
    );
    let region = Region::new(MIB, Policy::Node(0), HugePages::Never).unwrap();
    assert!(region.migrate(Policy::Node(missing)).is_err());
    assert_eq!(region.policy(), Policy::Node(0), "a refused migration leaves the region as it was");
}

#[test]
fn memory_only_nodes_hold_data() {
    let expected = expected_topology();
    for node in expected.nodes.iter().filter(|n| n.cpus.is_empty()) {
        let values: Vec<u32> = (0..1_000_000).collect();
        let buffer = NumaBuffer::from_slice(&values, Policy::Node(node.id), HugePages::Never).unwrap();
        assert!(buffer.region().page_locations().unwrap().all_on(node.id));
        assert_eq!(&buffer[..], &values[..]);
    }
}

/// With automatic NUMA balancing off, placement is deterministic: a populated region never shows unknown pages.
#[test]
fn without_numa_balancing_placed_pages_never_become_unknown() {
    if balancing_on() {
        return; // `pages_in_flux_under_numa_balancing_are_reported_as_unknown` covers this boot.
    }
    let far = *memory_nodes().last().unwrap();
    let mut region = Region::new(16 * MIB, Policy::Node(far), HugePages::Never).unwrap();
    region.populate();
    for _ in 0..200 {
        let sum: u64 = region.as_slice().iter().step_by(4096).map(|&b| u64::from(b)).sum();
        std::hint::black_box(sum);
        assert!(region.page_locations().unwrap().all_on(far));
    }
}

/// Speeds up automatic NUMA balancing's scanner (debugfs knobs of Linux 5.18+); best effort.
fn hurry_numa_balancing() {
    for (knob, value) in [("scan_delay_ms", "0"), ("scan_period_min_ms", "50"), ("scan_period_max_ms", "200")] {
        let _ = std::fs::write(format!("/sys/kernel/debug/sched/numa_balancing/{knob}"), value);
    }
}

/// With automatic NUMA balancing on, the kernel migrates pages towards the CPU that touches them. A page being
/// migrated has no page-table entry for a moment, and the page query must report it as *unknown*: never as an
/// error, never on a node it is not on, and with every page accounted for.
#[test]
fn pages_in_flux_under_numa_balancing_are_reported_as_unknown() {
    if !balancing_on() {
        return; // Covered by `without_numa_balancing_placed_pages_never_become_unknown`.
    }
    hurry_numa_balancing();
    let expected = expected_topology();
    let toucher_cpu = 0;
    let near = expected.cpu(toucher_cpu).unwrap().node.unwrap();
    let far = expected.nodes.iter().map(|n| n.id).rfind(|&n| n != near).expect("a second node");
    let querier_cpu = expected.online_cpus().iter().find(|&c| c != toucher_cpu).unwrap_or(toucher_cpu);
    let all_nodes: NodeSet = memory_nodes().into_iter().collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut rounds = 0;
    let mut migrated_pages = 0;
    while Instant::now() < deadline {
        rounds += 1;
        // Pages written while the thread's policy says `far`, in a region with no policy of its own, so that NUMA
        // balancing is free to move them to the node of the CPU that keeps touching them.
        let region = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    numadb_placement::set_thread_policy(&Policy::Node(far)).unwrap();
                    let mut region = Region::new(64 * MIB, Policy::OsDefault, HugePages::Never).unwrap();
                    region.populate();
                    region
                })
                .join()
                .unwrap()
        });
        assert!(region.page_locations().unwrap().all_on(far));
        let stop = std::sync::atomic::AtomicBool::new(false);
        let outcome = std::thread::scope(|scope| {
            scope.spawn(|| {
                pin_current_thread(&CpuSet::from_ids([toucher_cpu])).unwrap();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let sum: u64 = region.as_slice().iter().step_by(4096).map(|&b| u64::from(b)).sum();
                    std::hint::black_box(sum);
                }
            });
            let querier = scope.spawn(|| {
                pin_current_thread(&CpuSet::from_ids([querier_cpu])).unwrap();
                let round_end = Instant::now() + Duration::from_secs(30);
                let mut result = None;
                while Instant::now() < round_end.min(deadline) {
                    let histogram = region.page_locations().unwrap();
                    assert_eq!(histogram.known() + histogram.unknown, histogram.pages);
                    assert!(histogram.known_within(&all_nodes), "{histogram:?}");
                    if histogram.unknown > 0 {
                        result = Some(histogram);
                        break;
                    }
                    if histogram.on_node(near) == histogram.pages {
                        break; // Everything migrated without our catching a page in flight: next round.
                    }
                }
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                result
            });
            querier.join().unwrap()
        });
        migrated_pages += region.page_locations().unwrap().on_node(near);
        if let Some(histogram) = outcome {
            eprintln!("round {rounds}: pages in flight reported unknown: {histogram:?}");
            return;
        }
    }
    panic!("no page was reported unknown in {rounds} rounds ({migrated_pages} pages migrated by NUMA balancing)");
}
