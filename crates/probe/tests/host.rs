//! The prober on whatever machine the tests run on, with tiny buffers and short samples: behaviour, never
//! timings (the multi-node shape is tested in the emulated guests, `crates/guest-tests/tests/probe.rs`).

use std::time::Duration;

use numadb_placement::{HugePages, Policy, system_topology};
use numadb_probe::bandwidth::{self, BandwidthOptions};
use numadb_probe::chain::{Chain, ChainLayout, HOPS_PER_ITERATION, chase_for};
use numadb_probe::latency::{self, LatencyOptions};
use numadb_probe::loaded::{self, LoadedOptions};
use numadb_probe::{Isa, MatrixAxes, NoProgress, PlacementVerdict, Traffic, cache};
use numadb_topology::DomainGranularity;

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

fn first_node() -> u32 {
    system_topology().unwrap().nodes_with_cpus().first().unwrap()
}

fn axes() -> MatrixAxes {
    MatrixAxes::of(system_topology().unwrap(), DomainGranularity::Node).unwrap()
}

fn tiny_latency(buffer_bytes: usize) -> LatencyOptions {
    LatencyOptions {
        layout: ChainLayout { buffer_bytes, stride_bytes: 256, window_bytes: 16 * KIB },
        huge_pages: HugePages::Never,
        sample: Duration::from_millis(2),
        repetitions: 2,
        seed: 11,
    }
}

#[test]
fn a_built_chain_is_one_cycle_through_every_line() {
    for layout in [
        ChainLayout { buffer_bytes: MIB, stride_bytes: 256, window_bytes: 64 * KIB },
        ChainLayout { buffer_bytes: MIB, stride_bytes: 64, window_bytes: usize::MAX },
    ] {
        let chain = Chain::build(&layout, Policy::Node(first_node()), HugePages::Never, 5).unwrap();
        let lines = chain.layout().lines();
        let mut seen = vec![false; lines];
        let mut line = chain.line_of(chain.start());
        let first = line;
        for _ in 0..lines {
            assert!(!seen[line], "line {line} visited twice");
            seen[line] = true;
            line = chain.next_line(line);
        }
        assert_eq!(line, first, "the cycle closes after exactly {lines} hops");
        assert!(seen.iter().all(|&s| s), "every line is in the cycle");
        // The kernel agrees with the stored order: a whole cycle of hops comes back to the start.
        assert_eq!(lines as u64 % HOPS_PER_ITERATION, 0);
        let back = chain.chase(chain.start(), lines as u64 / HOPS_PER_ITERATION);
        assert_eq!(back, chain.start());
        let (sample, _) = chase_for(&chain, chain.start(), Duration::from_millis(1));
        assert!(sample.hops > 0 && sample.latency_ns() > 0.0);
        // Every page was written while threading, so every page is on the node.
        let placement = chain.buffer().region().page_locations().unwrap();
        assert!(placement.all_on(first_node()), "{placement:?}");
    }
}

#[test]
fn a_cursor_of_another_chain_is_refused() {
    let layout = ChainLayout { buffer_bytes: 64 * KIB, stride_bytes: 64, window_bytes: 64 * KIB };
    let one = Chain::build(&layout, Policy::Node(first_node()), HugePages::Never, 1).unwrap();
    let other = Chain::build(&layout, Policy::Node(first_node()), HugePages::Never, 2).unwrap();
    let refused = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| other.chase(one.start(), 1)));
    let message = refused.expect_err("chasing from another chain's cursor must panic, not read foreign memory");
    assert_eq!(message.downcast_ref::<&str>(), Some(&"a cursor of another chain"));
}

#[test]
fn the_latency_matrix_has_every_cell_verified() {
    let axes = axes();
    let matrix = latency::measure_matrix(&axes, &tiny_latency(MIB), &NoProgress).unwrap();
    assert_eq!(matrix.cells.len(), axes.domains.len() * axes.nodes.len());
    for (domain, node) in axes.cells() {
        let cell = matrix.cell(domain, node).expect("every (domain, node) cell");
        assert_eq!(cell.cpus.len(), axes.domains[domain].cpus.len(), "every CPU of the domain");
        for cpu in &cell.cpus {
            assert_eq!(cpu.samples_ns.len(), 2, "two repetitions kept (a pinned thread cannot move)");
            assert!(cpu.summary.unwrap().median > 0.0);
        }
        let spread = cell.latency_ns.unwrap();
        assert!(spread.min <= spread.avg && spread.avg <= spread.max);
    }
    assert!(matrix.all_verified(), "{:?}", matrix.buffers);
    assert_eq!(matrix.buffers.len(), axes.nodes.len());
}

#[test]
fn huge_page_chains_report_their_huge_page_share() {
    let axes = axes().restrict_domains(&[0]);
    let options = LatencyOptions { huge_pages: HugePages::Transparent, ..tiny_latency(4 * MIB) };
    let matrix = latency::measure_matrix(&axes, &options, &NoProgress).unwrap();
    let share = matrix.buffers[0].huge_page_share.expect("smaps is readable");
    assert!((0.0..=1.0).contains(&share));
}

#[test]
fn every_traffic_kind_measures_every_cell_with_every_isa() {
    let axes = axes();
    for traffic in Traffic::ALL {
        for isa in Isa::available() {
            let options = BandwidthOptions {
                buffer_bytes: 2 * MIB,
                traffic,
                isa,
                huge_pages: HugePages::Never,
                sample: Duration::from_millis(3),
                repetitions: 2,
            };
            let matrix = bandwidth::measure_matrix(&axes, &options, &NoProgress).unwrap();
            assert_eq!(matrix.cells.len(), axes.domains.len() * axes.nodes.len());
            for cell in &matrix.cells {
                assert_eq!(cell.samples_mb_per_s.len(), 2, "{traffic:?} {isa:?}");
                assert!(cell.mb_per_s.unwrap().median > 0.0);
                assert_eq!(cell.per_thread_mb_per_s.len(), cell.cpus.len());
                assert_eq!(cell.placement.verdict, PlacementVerdict::Verified, "{:?}", cell.placement);
            }
        }
    }
}

#[test]
fn a_kept_cell_samples_again_and_again_over_the_same_buffers() {
    let cpus = axes().domains[0].cpus.clone();
    let options = BandwidthOptions {
        buffer_bytes: 2 * MIB,
        traffic: Traffic::Read,
        isa: Isa::best(),
        huge_pages: HugePages::Never,
        sample: Duration::from_millis(3),
        repetitions: 1,
    };
    let mut cell = bandwidth::KeptCell::allocate(&cpus, first_node(), &options).unwrap();
    for _ in 0..3 {
        // Pinned threads stay where they are put, so every sample counts.
        let mb_per_s = cell.sample().unwrap().expect("a pinned thread stayed on its CPU");
        assert!(mb_per_s > 0.0, "{mb_per_s}");
    }
    let too_small = BandwidthOptions { buffer_bytes: 4096, traffic: Traffic::Add, ..options };
    let error = bandwidth::KeptCell::allocate(&cpus[..1], first_node(), &too_small).err().unwrap();
    assert!(error.to_string().contains("too small"), "{error}");
    assert!(bandwidth::KeptCell::allocate(&[], first_node(), &options).is_err());
}

#[test]
fn a_buffer_too_small_for_its_streams_is_an_error() {
    let options = BandwidthOptions {
        buffer_bytes: 4096,
        traffic: Traffic::Add,
        isa: Isa::Scalar,
        huge_pages: HugePages::Never,
        sample: Duration::from_millis(1),
        repetitions: 1,
    };
    let error = bandwidth::measure_cell(&[axes().domains[0].cpus[0]], first_node(), &options, &NoProgress);
    assert!(error.unwrap_err().to_string().contains("too small"));
}

#[test]
fn the_loaded_sweep_has_an_idle_point_and_one_per_delay() {
    let topology = system_topology().unwrap();
    let cpus: Vec<u32> = topology.allowed.cpus.iter().collect();
    let options = LoadedOptions {
        chase: tiny_latency(MIB),
        loader_bytes: 2 * MIB,
        traffic: Traffic::Read,
        isa: Isa::best(),
        delays_cycles: vec![0, 1000],
    };
    let curve = loaded::measure_curve(cpus[0], &cpus[1..], first_node(), &options, &NoProgress).unwrap();
    assert_eq!(curve.points.len(), 3);
    assert_eq!(curve.points[0].delay_cycles, None);
    assert_eq!(curve.points[2].delay_cycles, Some(1000));
    for point in &curve.points {
        assert!(point.latency_ns.is_some());
    }
    if cpus.len() > 1 {
        assert!(curve.points[1].mb_per_s.unwrap().median > 0.0, "loaders moved bytes at delay 0");
        assert_eq!(curve.loader_placement.unwrap().verdict, PlacementVerdict::Verified);
    }
    assert!(curve.chain_placement.is_verified());
}

#[test]
fn the_cache_curve_has_a_point_per_size_and_marks_levels() {
    let topology = system_topology().unwrap();
    let sizes = cache::log_sizes(4 * KIB, 256 * KIB, 1);
    let cpu = topology.allowed.cpus.first().unwrap();
    let curve = cache::measure_curve(topology, cpu, first_node(), &sizes, &tiny_latency(MIB), &NoProgress).unwrap();
    assert_eq!(curve.points.iter().map(|p| p.buffer_bytes).collect::<Vec<_>>(), sizes);
    assert!(curve.points.iter().all(|p| p.placement.is_verified() && p.latency_ns().is_some()));
    assert_eq!(curve.levels.last().unwrap().name, "DRAM");
    assert_eq!(curve.options.layout.buffer_bytes, 256 * KIB);
}
