//! The topology reader against fixture trees of real and realistic machines (see `fixtures/sysfs/`).

use std::path::{Path, PathBuf};

use numadb_topology::{DomainGranularity, NodeProblem, Topology, TopologyError};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sysfs").join(name)
}

fn read(name: &str) -> Topology {
    Topology::from_root(&fixture(name)).unwrap_or_else(|error| panic!("{name}: {error}"))
}

#[test]
fn one_node_vm() {
    let topology = read("vm-1node");
    assert_eq!(topology.nodes.len(), 1);
    assert_eq!(topology.nodes[0].cpus.to_list_string(), "0-1");
    assert_eq!(topology.nodes[0].memory_bytes, 5_596_960 * 1024);
    assert_eq!(topology.distances.rows, vec![vec![10]]);
    assert_eq!(topology.threads_per_core(), 1);
    assert_eq!(topology.core_count(), 2);
    assert_eq!(topology.l3_groups.len(), 1);
    assert_eq!(topology.l3_groups[0].size_bytes, Some(491_520 << 10));
    assert_eq!(topology.allowed.cpus.to_list_string(), "0-1");
    assert_eq!(topology.allowed.nodes.to_list_string(), "0");
    assert_eq!(topology.machine.transparent_hugepages.as_deref(), Some("madvise"));
    let levels: Vec<(u8, Option<u64>)> = topology.caches.iter().map(|c| (c.level, c.size_bytes)).collect();
    assert_eq!(levels, vec![(1, Some(48 << 10)), (1, Some(64 << 10)), (2, Some(2 << 20)), (3, Some(480 << 20))]);
    let domains = topology.domains(DomainGranularity::Node).unwrap();
    assert_eq!(domains.len(), 1);
    assert!(domains.domains[0].by_distance.is_empty());
    assert!(domains.domains[0].nearest_neighbours().is_empty());
}

#[test]
fn skylake_two_sockets_with_snc2_as_in_the_thesis() {
    let topology = read("skylake-2s-snc2");
    assert_eq!(topology.nodes.len(), 4);
    assert_eq!(topology.cpus.len(), 112);
    assert_eq!(topology.package_count(), 2);
    assert_eq!(topology.core_count(), 56);
    assert_eq!(topology.threads_per_core(), 2);
    // Table 6's topology: 10 local, 11 to the other half of the socket, 21 across sockets.
    assert_eq!(
        topology.distances.rows,
        vec![vec![10, 11, 21, 21], vec![11, 10, 21, 21], vec![21, 21, 10, 11], vec![21, 21, 11, 10]]
    );
    assert!(topology.distances.is_symmetric());
    // Each node holds 14 cores with both threads; siblings are n and n+56.
    for node in &topology.nodes {
        assert_eq!(node.cpus.len(), 28, "node {}", node.id);
    }
    let cpu = topology.cpu(63).unwrap();
    assert_eq!((cpu.node, cpu.package, cpu.core_id), (Some(0), Some(0), Some(8)));
    assert_eq!(cpu.smt_siblings.to_list_string(), "7,63");
    assert_eq!(topology.cpu(7).unwrap().core, cpu.core);
    // The L3 spans the whole socket even with SNC on, so an L3 group holds two nodes.
    assert_eq!(topology.l3_groups.len(), 2);
    assert_eq!(topology.l3_groups[1].cpus.to_list_string(), "28-55,84-111");

    let nodes = topology.domains(DomainGranularity::Node).unwrap();
    assert_eq!(nodes.len(), 4);
    let node0 = &nodes.domains[0];
    assert_eq!(node0.nearest_neighbours(), vec![1]);
    let order: Vec<(u32, u32)> = node0.by_distance.iter().map(|n| (n.domain, n.distance)).collect();
    assert_eq!(order, vec![(1, 11), (2, 21), (3, 21)]);
    assert_eq!(nodes.domains[3].nearest_neighbours(), vec![2]);
    assert_eq!(nodes.domain_of_cpu(66).unwrap().name, "node1");

    // Per package: the analogue of SNC off, two domains each owning two nodes' memory.
    let packages = topology.domains(DomainGranularity::Package).unwrap();
    assert_eq!(packages.len(), 2);
    assert_eq!(packages.domains[0].memory_nodes.to_list_string(), "0-1");
    assert_eq!(packages.domains[0].cpus.len(), 56);
    assert_eq!(packages.distance(0, 1), Some(21));
    assert_eq!(packages.distance(0, 0), Some(10));
    assert_eq!(packages.domain_of_node(3).unwrap().name, "package1");

    let l3 = topology.domains(DomainGranularity::L3).unwrap();
    assert_eq!(l3.len(), 2);

    // One big domain: every CPU, every node with CPUs local, nobody to steal from.
    let machine = topology.domains(DomainGranularity::Machine).unwrap();
    assert_eq!(machine.len(), 1);
    assert_eq!(machine.domains[0].cpus.len(), 112);
    assert_eq!(machine.domains[0].memory_nodes.to_list_string(), "0-3");
    assert!(machine.domains[0].by_distance.is_empty());
}

#[test]
fn epyc_two_sockets_in_nps4() {
    let topology = read("epyc-2s-nps4");
    assert_eq!(topology.nodes.len(), 8);
    assert_eq!(topology.cpus.len(), 64);
    assert_eq!(topology.package_count(), 2);
    assert_eq!(topology.distances.get(0, 3), Some(12));
    assert_eq!(topology.distances.get(3, 4), Some(32));
    assert_eq!(topology.nodes[5].cpus.to_list_string(), "20-23,52-55");
    // Two CCXs per node, each with its own L3.
    assert_eq!(topology.l3_groups.len(), 16);
    assert_eq!(topology.l3_groups[3].cpus.to_list_string(), "6-7,38-39");

    let nodes = topology.domains(DomainGranularity::Node).unwrap();
    let node5 = nodes.get(5).unwrap();
    assert_eq!(node5.nearest_neighbours(), vec![4, 6, 7]);
    let far: Vec<u32> = node5.by_distance.iter().filter(|n| n.distance == 32).map(|n| n.domain).collect();
    assert_eq!(far, vec![0, 1, 2, 3]);

    let l3 = topology.domains(DomainGranularity::L3).unwrap();
    assert_eq!(l3.len(), 16);
    // The other CCX of the same node is at the local distance, before the rest of the socket.
    let first = &l3.domains[2];
    assert_eq!(first.memory_nodes.to_list_string(), "1");
    assert_eq!(first.by_distance[0].domain, 3);
    assert_eq!(first.by_distance[0].distance, 10);
    assert_eq!(first.by_distance[1].distance, 12);
}

#[test]
fn memory_only_node_is_a_node_but_not_a_domain() {
    let topology = read("cxl-memory-only-node");
    assert_eq!(topology.nodes.len(), 2);
    assert!(topology.nodes[1].cpus.is_empty());
    assert_eq!(topology.nodes[1].memory_bytes, 128 << 30);
    assert_eq!(topology.nodes_with_cpus().to_list_string(), "0");
    let domains = topology.domains(DomainGranularity::Node).unwrap();
    assert_eq!(domains.len(), 1);
    assert_eq!(domains.domains[0].memory_nodes.to_list_string(), "0");
    assert!(domains.domain_of_node(1).is_none());
    // It can still hold data.
    assert!(topology.check_memory_node(1).is_ok());
}

#[test]
fn offline_cpus_and_gaps_in_numbering() {
    let topology = read("offline-gaps");
    let ids: Vec<u32> = topology.cpus.iter().map(|c| c.id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15]);
    assert_eq!(topology.online_cpus().to_list_string(), "0-3,8-11,14-15");
    let offline = topology.cpu(12).unwrap();
    assert!(!offline.online);
    assert_eq!((offline.node, offline.package, offline.core), (None, None, None));
    assert!(topology.cpu(5).is_none());
    assert_eq!(topology.nodes[1].cpus.to_list_string(), "10-11,14-15");
    // The process is confined by a cpuset.
    assert_eq!(topology.allowed.cpus.to_list_string(), "0-3,8-11");
    assert_eq!(topology.allowed.nodes.to_list_string(), "0");
    let domains = topology.domains(DomainGranularity::Node).unwrap();
    assert_eq!(domains.domains[1].allowed_cpus.to_list_string(), "10-11");
    let error = topology.check_memory_node(1).unwrap_err();
    assert_eq!(error.reason, NodeProblem::NotAllowed);
    let error = topology.check_memory_node(7).unwrap_err();
    assert_eq!(error.reason, NodeProblem::DoesNotExist);
    assert_eq!(
        error.to_string(),
        "NUMA node 7 does not exist (this machine has nodes 0-1; this process may allocate from nodes 0)"
    );
}

#[test]
fn capture_reads_back_to_the_same_topology() {
    for name in ["skylake-2s-snc2", "offline-gaps", "cxl-memory-only-node"] {
        let destination = tempfile::tempdir().unwrap();
        let captured = numadb_topology::capture(&fixture(name), destination.path()).unwrap();
        let mut reread = Topology::from_root(destination.path()).unwrap();
        reread.source = captured.source.clone();
        assert_eq!(captured, reread, "{name}");
    }
}

/// Copies a fixture into a temporary directory so that a test can damage it.
fn damaged_copy(name: &str) -> tempfile::TempDir {
    let destination = tempfile::tempdir().unwrap();
    numadb_topology::capture(&fixture(name), destination.path()).unwrap();
    destination
}

fn read_error(root: &Path) -> String {
    match Topology::from_root(root) {
        Ok(_) => panic!("expected an error"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn malformed_files_are_named_in_the_error() {
    let root = damaged_copy("skylake-2s-snc2");
    std::fs::write(root.path().join("sys/devices/system/node/node2/distance"), "21 21 10\n").unwrap();
    let message = read_error(root.path());
    assert!(message.contains("node2/distance") && message.contains("has 3 distances but 4 nodes"), "{message}");

    let root = damaged_copy("skylake-2s-snc2");
    std::fs::write(root.path().join("sys/devices/system/node/node1/cpulist"), "4-6,ten\n").unwrap();
    let message = read_error(root.path());
    assert!(message.contains("node1/cpulist") && message.contains("\"ten\" is not a cpu id"), "{message}");

    let root = damaged_copy("vm-1node");
    std::fs::write(root.path().join("sys/devices/system/cpu/cpu1/topology/core_id"), "one\n").unwrap();
    let message = read_error(root.path());
    assert!(message.contains("cpu1/topology/core_id") && message.contains("non-negative integer"), "{message}");

    let root = damaged_copy("vm-1node");
    std::fs::write(root.path().join("sys/devices/system/cpu/cpu0/cache/index3/type"), "Victim\n").unwrap();
    let message = read_error(root.path());
    assert!(message.contains("index3/type") && message.contains("unknown cache type"), "{message}");

    let root = damaged_copy("vm-1node");
    std::fs::write(root.path().join("sys/devices/system/node/node0/meminfo"), "Node 0 MemFree: 1 kB\n").unwrap();
    let message = read_error(root.path());
    assert!(message.contains("node0/meminfo") && message.contains("MemTotal"), "{message}");

    let root = damaged_copy("skylake-2s-snc2");
    std::fs::write(root.path().join("sys/devices/system/node/node1/cpulist"), "0-6\n").unwrap();
    let message = read_error(root.path());
    assert!(message.contains("CPU 0 is listed in both node 0 and node 1"), "{message}");
}

#[test]
fn missing_files_are_named_in_the_error() {
    let root = damaged_copy("vm-1node");
    std::fs::remove_file(root.path().join("sys/devices/system/node/node0/distance")).unwrap();
    let message = read_error(root.path());
    assert!(message.starts_with("cannot read ") && message.contains("node0/distance"), "{message}");

    let root = damaged_copy("vm-1node");
    std::fs::remove_file(root.path().join("proc/self/status")).unwrap();
    assert!(read_error(root.path()).contains("proc/self/status"));

    let root = damaged_copy("vm-1node");
    std::fs::remove_dir_all(root.path().join("sys/devices/system/cpu/cpu1")).unwrap();
    let message = read_error(root.path());
    assert!(message.contains("cpu1") && message.contains("no directory"), "{message}");

    let empty = tempfile::tempdir().unwrap();
    let message = read_error(empty.path());
    assert!(message.contains("sys/devices/system/cpu/possible"), "{message}");
}

#[test]
fn a_kernel_without_numa_is_one_node() {
    let root = damaged_copy("vm-1node");
    std::fs::remove_dir_all(root.path().join("sys/devices/system/node")).unwrap();
    std::fs::write(root.path().join("proc/meminfo"), "MemTotal:       24683656 kB\nMemFree: 1 kB\n").unwrap();
    let topology = Topology::from_root(root.path()).unwrap();
    assert_eq!(topology.nodes.len(), 1);
    assert_eq!(topology.nodes[0].cpus.to_list_string(), "0-1");
    assert_eq!(topology.nodes[0].memory_bytes, 24_683_656 * 1024);
}

#[test]
fn a_machine_without_l3_has_no_l3_domains() {
    let root = damaged_copy("vm-1node");
    for cpu in 0..2 {
        std::fs::remove_dir_all(root.path().join(format!("sys/devices/system/cpu/cpu{cpu}/cache/index3"))).unwrap();
    }
    let topology = Topology::from_root(root.path()).unwrap();
    assert!(topology.l3_groups.is_empty());
    let error = topology.domains(DomainGranularity::L3).unwrap_err();
    assert!(matches!(error, TopologyError::Unsupported(_)));
    assert!(error.to_string().contains("no"), "{error}");
}

/// Every file of two fixtures, replaced by each of several kinds of garbage or removed: reading must return a
/// topology or an error, never panic, and an error must name something below the root.
#[test]
fn no_damage_to_any_file_makes_the_reader_panic() {
    for name in ["vm-1node", "offline-gaps"] {
        let root = damaged_copy(name);
        let mut files = Vec::new();
        collect_files(root.path(), &mut files);
        assert!(files.len() > 20, "{name} has {} files", files.len());
        for file in &files {
            let original = std::fs::read(file).unwrap();
            for damage in
                [None, Some(""), Some("garbage\n"), Some("-1\n"), Some("99999999999999999999\n"), Some("\u{0}\u{ff}")]
            {
                match damage {
                    None => std::fs::remove_file(file).unwrap(),
                    Some(text) => std::fs::write(file, text).unwrap(),
                }
                if let Err(error) = Topology::from_root(root.path()) {
                    let message = error.to_string();
                    let names_a_path = message.contains(&root.path().display().to_string());
                    let is_consistency = matches!(error, TopologyError::Inconsistent(_));
                    assert!(names_a_path || is_consistency, "{}: {message}", file.display());
                }
                std::fs::write(file, &original).unwrap();
            }
        }
        assert!(Topology::from_root(root.path()).is_ok(), "{name} restored");
    }
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_files(&path, out);
        } else {
            out.push(path);
        }
    }
}
