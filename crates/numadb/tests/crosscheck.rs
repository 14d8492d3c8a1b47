//! `numadb topo --json` against the standard tools: `numactl --hardware` and hwloc's `lstopo` on this machine, and
//! hwloc reading each fixture tree (`HWLOC_FSROOT`), so our sysfs reader is checked against an independent one on
//! machines we do not have.
//!
//! The tools come from Debian's `numactl` and `hwloc` packages, which `.ci/run` installs. Where they are missing the
//! tests say so and pass, unless `NUMADB_REQUIRE_TOOLS=1` (set by the project's test command), in which case a
//! missing tool is a failure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use numadb_topology::{CpuSet, Topology};

fn tool(name: &str) -> Option<PathBuf> {
    let output = Command::new("sh").arg("-c").arg(format!("command -v {name}")).output().ok()?;
    output.status.success().then(|| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
}

/// The tool, or `None` after saying why the test does not run (or failing when tools are required).
fn require(name: &str, package: &str) -> Option<PathBuf> {
    let found = tool(name);
    if found.is_none() {
        let message = format!("{name} is not installed (Debian package {package}); install it or run `make test`");
        assert!(std::env::var("NUMADB_REQUIRE_TOOLS").as_deref() != Ok("1"), "{message}");
        eprintln!("skipped: {message}");
    }
    found
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sysfs").join(name)
}

/// `numadb topo --json` (optionally with `--root`), parsed back into a topology.
fn numadb_topology(root: Option<&Path>) -> Topology {
    let mut command = Command::new(env!("CARGO_BIN_EXE_numadb"));
    command.args(["topo", "--json"]);
    if let Some(root) = root {
        command.arg("--root").arg(root);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "numadb topo --json: {}", String::from_utf8_lossy(&output.stderr));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(document["schema_version"], 1);
    serde_json::from_value(document["topology"].clone()).unwrap()
}

/// What hwloc reports, reduced to what we compare.
#[derive(Debug, Default)]
struct HwlocView {
    /// (os_index, cpus, local_memory bytes)
    nodes: Vec<(u32, CpuSet, u64)>,
    /// (os_index, cpus)
    packages: Vec<(u32, CpuSet)>,
    cores: BTreeSet<CpuSet>,
    /// (cpus, size)
    l3: BTreeSet<(CpuSet, u64)>,
    pus: CpuSet,
    /// (node os indexes, row-major values)
    distances: Option<(Vec<u32>, Vec<u32>)>,
}

fn hwloc_cpuset(text: &str) -> CpuSet {
    // hwloc writes a zero word as nothing: `0x00000001,,0x00000100`.
    let words: Vec<&str> =
        text.split(',').map(|w| w.trim_start_matches("0x")).map(|w| if w.is_empty() { "0" } else { w }).collect();
    CpuSet::parse_mask(&words.join(",")).unwrap_or_else(|error| panic!("hwloc cpuset {text}: {error}"))
}

fn hwloc_view(lstopo: &Path, fsroot: Option<&Path>) -> HwlocView {
    let mut command = Command::new(lstopo);
    command.args(["--of", "xml", "-"]);
    if let Some(root) = fsroot {
        command.env("HWLOC_FSROOT", root);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "lstopo: {}", String::from_utf8_lossy(&output.stderr));
    let xml = String::from_utf8(output.stdout).unwrap();
    let options = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let document = roxmltree::Document::parse_with_options(&xml, options).unwrap();
    let mut view = HwlocView::default();
    for object in document.descendants().filter(|n| n.has_tag_name("object")) {
        let attribute = |name: &str| object.attribute(name).unwrap_or_default();
        let cpuset = || hwloc_cpuset(attribute("complete_cpuset"));
        let number = |name: &str| attribute(name).parse::<u64>().unwrap_or(0);
        match attribute("type") {
            "NUMANode" => view.nodes.push((number("os_index") as u32, cpuset(), number("local_memory"))),
            "Package" => view.packages.push((number("os_index") as u32, cpuset())),
            "Core" => {
                view.cores.insert(cpuset());
            }
            "L3Cache" => {
                view.l3.insert((cpuset(), number("cache_size")));
            }
            "PU" => view.pus.insert(number("os_index") as u32),
            _ => {}
        }
    }
    if let Some(distances) = document.descendants().find(|n| n.has_tag_name("distances2")) {
        let numbers = |tag: &str| -> Vec<u32> {
            distances
                .children()
                .filter(|c| c.has_tag_name(tag))
                .flat_map(|c| {
                    c.text().unwrap_or_default().split_whitespace().map(|w| w.parse().unwrap()).collect::<Vec<u32>>()
                })
                .collect()
        };
        view.distances = Some((numbers("indexes"), numbers("u64values")));
    }
    view
}

fn assert_same_as_hwloc(name: &str, ours: &Topology, hwloc: &HwlocView) {
    assert_eq!(hwloc.pus, ours.online_cpus(), "{name}: CPUs");
    assert_eq!(hwloc.nodes.len(), ours.nodes.len(), "{name}: node count");
    for (os_index, cpus, memory) in &hwloc.nodes {
        let node = ours.node(*os_index).unwrap_or_else(|| panic!("{name}: hwloc has node {os_index}, we do not"));
        assert_eq!(*memory, node.memory_bytes, "{name}: memory of node {os_index}");
        // hwloc gives a memory-only node the CPUs of the object it hangs below; we give it none.
        if !node.cpus.is_empty() {
            assert_eq!(*cpus, node.cpus, "{name}: CPUs of node {os_index}");
        }
    }
    assert_eq!(hwloc.packages.len(), ours.package_count(), "{name}: package count");
    for (os_index, cpus) in &hwloc.packages {
        let ours_in_package: CpuSet = ours.cpus.iter().filter(|c| c.package == Some(*os_index)).map(|c| c.id).collect();
        assert_eq!(*cpus, ours_in_package, "{name}: CPUs of package {os_index}");
    }
    let our_cores: BTreeSet<CpuSet> = ours.cpus.iter().filter(|c| c.online).map(|c| c.smt_siblings.clone()).collect();
    assert_eq!(hwloc.cores, our_cores, "{name}: cores (SMT sibling sets)");
    assert_eq!(hwloc.cores.len(), ours.core_count(), "{name}: core count");
    let our_l3: BTreeSet<(CpuSet, u64)> =
        ours.l3_groups.iter().map(|g| (g.cpus.clone(), g.size_bytes.unwrap_or(0))).collect();
    assert_eq!(hwloc.l3, our_l3, "{name}: L3 groups");
    match &hwloc.distances {
        Some((indexes, values)) => {
            assert_eq!(indexes, &ours.distances.nodes, "{name}: distance matrix nodes");
            let ours_flat: Vec<u32> = ours.distances.rows.iter().flatten().copied().collect();
            assert_eq!(values, &ours_flat, "{name}: distance matrix");
        }
        None => assert_eq!(ours.nodes.len(), 1, "{name}: hwloc reports no distances for a multi-node machine"),
    }
}

#[test]
fn fixtures_read_the_same_as_hwloc_reads_them() {
    let Some(lstopo) = require("lstopo-no-graphics", "hwloc") else { return };
    for name in ["vm-1node", "skylake-2s-snc2", "epyc-2s-nps4", "cxl-memory-only-node", "offline-gaps"] {
        let root = fixture(name);
        let hwloc = hwloc_view(&lstopo, Some(&root));
        assert_same_as_hwloc(name, &numadb_topology(Some(&root)), &hwloc);
    }
}

#[test]
fn this_machine_reads_the_same_as_hwloc_reads_it() {
    let Some(lstopo) = require("lstopo-no-graphics", "hwloc") else { return };
    let ours = numadb_topology(None);
    let mut hwloc = hwloc_view(&lstopo, None);
    // On the live system hwloc hides the CPUs this process may not use.
    hwloc.pus = hwloc.pus.union(&ours.online_cpus().difference(&ours.allowed.cpus));
    assert_same_as_hwloc("this machine", &ours, &hwloc);
}

#[test]
fn this_machine_reads_the_same_as_numactl_reads_it() {
    let Some(numactl) = require("numactl", "numactl") else { return };
    let output = Command::new(numactl).arg("--hardware").output().unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let ours = numadb_topology(None);

    // available: 1 nodes (0)
    let available = text.lines().find(|l| l.starts_with("available:")).unwrap();
    let count: usize = available.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert_eq!(count, ours.nodes.len(), "{available}");
    let mut distance_rows: Vec<Vec<u32>> = Vec::new();
    let mut in_distances = false;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if line.starts_with("node distances:") {
            in_distances = true;
            continue;
        }
        if in_distances {
            // "  0:  10  11" rows after a "node   0   1" header.
            if let Some(first) = words.first()
                && first.ends_with(':')
            {
                distance_rows.push(words[1..].iter().map(|w| w.parse().unwrap()).collect());
            }
            continue;
        }
        if words.len() >= 3 && words[0] == "node" {
            let id: u32 = words[1].parse().unwrap();
            let node = ours.node(id).unwrap_or_else(|| panic!("numactl has node {id}, we do not"));
            match words[2] {
                "cpus:" => {
                    let cpus: CpuSet = words[3..].iter().map(|w| w.parse().unwrap()).collect();
                    assert_eq!(cpus, node.cpus, "CPUs of node {id}");
                }
                "size:" => {
                    let mebibytes: u64 = words[3].parse().unwrap();
                    assert_eq!(mebibytes, node.memory_bytes >> 20, "size of node {id}");
                }
                _ => {}
            }
        }
    }
    assert_eq!(distance_rows, ours.distances.rows, "distance matrix");
}
