//! Placement and pinning on whatever machine the tests run on (one node is enough for these; the multi-node
//! behaviour is tested in the emulated guests, see `crates/guest-tests`).

use numadb_placement::{
    HugePages, NumaBuffer, PinGuard, PlacementError, Policy, Region, current_cpu, pin_current_thread,
    set_thread_policy, system_topology, thread_affinity, thread_policy,
};
use numadb_topology::{CpuSet, NodeSet};

const MIB: usize = 1 << 20;

fn first_node() -> u32 {
    system_topology().unwrap().nodes_with_cpus().first().unwrap()
}

#[test]
fn a_bound_region_has_every_page_on_its_node() {
    let node = first_node();
    let mut region = Region::new(8 * MIB, Policy::Node(node), HugePages::Never).unwrap();
    // Nothing is touched yet: every page is unknown (not present), none is on a node.
    let untouched = region.page_locations().unwrap();
    assert_eq!(untouched.pages, 8 * MIB / region.page_size());
    assert_eq!(untouched.unknown, untouched.pages);
    assert_eq!(untouched.known(), 0);
    assert_eq!(untouched.unknown_by_errno.get(&libc::ENOENT), Some(&untouched.pages));
    region.populate();
    let placed = region.page_locations().unwrap();
    assert!(placed.all_on(node), "{placed:?}");
}

#[test]
fn partially_touched_regions_count_known_and_unknown_pages() {
    let node = first_node();
    let mut region = Region::new(64 * 4096, Policy::Node(node), HugePages::Never).unwrap();
    let page = region.page_size();
    for index in (0..64).step_by(4) {
        region.as_mut_slice()[index * page] = 1;
    }
    let histogram = region.page_locations().unwrap();
    assert_eq!(histogram.on_node(node), 16);
    assert_eq!(histogram.unknown, 48);
    assert_eq!(histogram.known() + histogram.unknown, histogram.pages);
}

#[test]
fn every_policy_places_pages_on_an_allowed_node() {
    let allowed = system_topology().unwrap().allowed.nodes.clone();
    let node = first_node();
    for policy in [Policy::OsDefault, Policy::FirstTouch, Policy::Preferred(node), Policy::Interleave(allowed.clone())]
    {
        let mut region = Region::new(2 * MIB, policy.clone(), HugePages::Never).unwrap();
        assert_eq!(region.policy(), policy);
        region.populate();
        let histogram = region.page_locations().unwrap();
        assert_eq!(histogram.unknown, 0, "{policy}");
        assert!(histogram.known_within(&allowed), "{policy}: {histogram:?}");
    }
}

#[test]
fn missing_nodes_are_refused_with_the_nodes_that_exist() {
    let topology = system_topology().unwrap();
    let missing = topology.node_ids().last().unwrap() + 7;
    let error = Region::new(MIB, Policy::Node(missing), HugePages::Never).unwrap_err();
    assert!(matches!(error, PlacementError::NodeNotUsable(_)));
    let message = error.to_string();
    assert!(message.contains(&format!("NUMA node {missing} does not exist")), "{message}");
    assert!(message.contains(&format!("this machine has nodes {}", topology.node_ids())), "{message}");

    let error = Region::new(MIB, Policy::Interleave(NodeSet::from_ids([0, missing])), HugePages::Never).unwrap_err();
    assert!(error.to_string().contains("does not exist"));
    let error = Region::new(MIB, Policy::Interleave(NodeSet::new()), HugePages::Never).unwrap_err();
    assert!(error.to_string().contains("at least one node"));
    let error = NumaBuffer::<u64>::zeroed(usize::MAX / 4, Policy::OsDefault, HugePages::Never).unwrap_err();
    assert!(error.to_string().contains("overflows"));
}

#[test]
fn migration_preserves_data() {
    let node = first_node();
    let values: Vec<u64> = (0..1_000_000u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
    let mut buffer = NumaBuffer::from_slice(&values, Policy::FirstTouch, HugePages::Never).unwrap();
    let report = buffer.region_mut().migrate(Policy::Node(node)).unwrap();
    assert!(report.after.all_on(node), "{report:?}");
    assert_eq!(report.before.known(), report.after.known());
    assert_eq!(&buffer[..], &values[..]);
    assert_eq!(buffer.region().policy(), Policy::Node(node));
    let error = buffer.region_mut().migrate(Policy::Node(999)).unwrap_err();
    assert!(error.to_string().contains("NUMA node 999 does not exist"));
}

#[test]
fn huge_page_regions_are_aligned_to_two_mebibytes() {
    let mut region = Region::new(3 * MIB, Policy::Node(first_node()), HugePages::Transparent).unwrap();
    assert_eq!(region.as_ptr() as usize % (2 * MIB), 0);
    assert_eq!(region.len(), 4 * MIB);
    region.populate();
    assert!(region.page_locations().unwrap().all_on(first_node()));
    // Whether the kernel found huge pages depends on fragmentation; the query itself must work.
    let huge = region.transparent_huge_bytes().unwrap();
    assert!(huge <= 64 * MIB as u64);
    let small = Region::new(3 * MIB + 1, Policy::OsDefault, HugePages::Never).unwrap();
    assert_eq!(small.len(), 3 * MIB + small.page_size());
}

/// Whether some mapping of this process covers all of `[start, end)`.
fn mapped(start: usize, end: usize) -> bool {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().any(|line| {
        let range = line.split(' ').next().unwrap();
        let (low, high) = range.split_once('-').unwrap();
        let (low, high) = (usize::from_str_radix(low, 16).unwrap(), usize::from_str_radix(high, 16).unwrap());
        low <= start && end <= high
    })
}

#[test]
fn buffers_unmap_on_drop() {
    // An odd size, so that another test's mapping is unlikely to cover exactly this range after the drop.
    let buffer = NumaBuffer::<u32>::zeroed(3 * MIB / 4 + 4096 * 7, Policy::OsDefault, HugePages::Never).unwrap();
    let start = buffer.region().as_ptr() as usize;
    let end = start + buffer.region().len();
    assert!(mapped(start, end));
    assert!(buffer.iter().all(|&v| v == 0));
    drop(buffer);
    assert!(!mapped(start, end), "the buffer's pages are still mapped after drop");
}

#[test]
fn typed_buffers_of_odd_sizes() {
    let values: Vec<[u8; 3]> = (0..5000u32).map(|i| [i as u8, (i >> 8) as u8, 7]).collect();
    let buffer = NumaBuffer::from_slice(&values, Policy::OsDefault, HugePages::Never).unwrap();
    assert_eq!(buffer.len(), 5000);
    assert_eq!(&buffer[..], &values[..]);
    let empty = NumaBuffer::<u64>::zeroed(0, Policy::OsDefault, HugePages::Never).unwrap();
    assert!(empty.is_empty());
}

#[test]
fn pinning_lands_on_the_cpu_and_its_node() {
    let topology = system_topology().unwrap();
    std::thread::spawn(move || {
        for cpu in topology.allowed.cpus.iter() {
            pin_current_thread(&CpuSet::from_ids([cpu])).unwrap();
            assert_eq!(thread_affinity().unwrap(), CpuSet::from_ids([cpu]));
            let location = current_cpu().unwrap();
            assert_eq!(location.cpu, cpu);
            assert_eq!(Some(location.node), topology.cpu(cpu).unwrap().node);
        }
    })
    .join()
    .unwrap();
}

#[test]
fn pin_guards_restore_the_previous_affinity() {
    let topology = system_topology().unwrap();
    std::thread::spawn(move || {
        let before = thread_affinity().unwrap();
        let cpu = topology.allowed.cpus.last().unwrap();
        {
            let guard = PinGuard::pin(&CpuSet::from_ids([cpu])).unwrap();
            assert_eq!(guard.previous(), &before);
            assert_eq!(current_cpu().unwrap().cpu, cpu);
        }
        assert_eq!(thread_affinity().unwrap(), before);
    })
    .join()
    .unwrap();
}

#[test]
fn pinning_to_cpus_outside_the_allowed_set_is_refused() {
    let topology = system_topology().unwrap();
    let outside = topology.allowed.cpus.last().unwrap() + 100;
    let error = pin_current_thread(&CpuSet::from_ids([outside])).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("CPUs {outside} cannot be used: this process may run on CPUs {}", topology.allowed.cpus)
    );
    assert!(pin_current_thread(&CpuSet::new()).is_err());
}

#[test]
fn thread_memory_policy_round_trips() {
    let node = first_node();
    std::thread::spawn(move || {
        set_thread_policy(&Policy::Node(node)).unwrap();
        let policy = thread_policy().unwrap();
        assert_eq!((policy.mode, policy.nodes), ("bind", NodeSet::from_ids([node])));
        let mut region = Region::new(MIB, Policy::OsDefault, HugePages::Never).unwrap();
        region.populate();
        assert!(region.page_locations().unwrap().all_on(node));
        set_thread_policy(&Policy::OsDefault).unwrap();
        assert_eq!(thread_policy().unwrap().mode, "default");
    })
    .join()
    .unwrap();
}
