//! The machine as numadb sees it: NUMA nodes, CPUs, cores, SMT siblings, packages, dies, L3 groups, the distance
//! matrix, and what this process is allowed to use.
//!
//! Why read sysfs ourselves instead of linking hwloc or libnuma? Two reasons. First, tests must be able to read *any*
//! machine: every read goes through a root directory, so a fixture tree captured from (or written to look like) a
//! 2-socket Skylake with SNC or an 8-node EPYC is read exactly as the live `/` is. Second, numadb must build with
//! only cargo and a C compiler; hwloc bindings need system libraries. The cross-check tests compare what this crate
//! reads with `numactl --hardware` and `lstopo` on the same machine, so hand-reading does not mean unverified.
//!
//! Everything else in numadb works in terms of [`Domain`]s derived from a [`Topology`]: by default one domain per
//! node that has CPUs, optionally one per package (the analogue of turning SNC off) or one per L3 group.
//!
//! Invariant: this crate makes no system calls beyond reading files. Affinity and memory policy are the placement
//! crate's business.

mod capture;
mod domain;
mod error;
mod sets;
mod spec;
mod sysfs;

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use capture::capture;
pub use domain::{Domain, DomainGranularity, DomainNeighbour, Domains};
pub use error::TopologyError;
pub use sets::{CpuKind, CpuSet, IdKind, IdSet, MAX_ID, NodeKind, NodeSet, SetParseError};
pub use spec::{MachineSpec, NodeSpec};

/// Formats a byte count with a binary unit: `4.2 GiB`, `48 KiB`, `512 B`. Memory and cache sizes start here, and
/// every crate that prints one (topology summaries, probe messages, `EXPLAIN ANALYZE`, reports) uses this.
pub fn format_bytes(count: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = count as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 || value.fract() == 0.0 {
        format!("{value:.0} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The version of the JSON document `numadb topo --json` writes; bumped on any incompatible change.
pub const TOPOLOGY_SCHEMA_VERSION: u32 = 1;

/// The distance the kernel reports from a node to itself (ACPI SLIT's "local").
pub const LOCAL_DISTANCE: u32 = 10;

/// One machine's topology, as read from sysfs (or built from a [`MachineSpec`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Topology {
    /// Where it was read from: the root directory (`/` for the live system) or `spec:<name>`.
    pub source: String,
    /// Facts about the machine that measurements are reported with.
    pub machine: MachineInfo,
    /// Online NUMA nodes in ascending id order, including memory-only nodes.
    pub nodes: Vec<Node>,
    /// Present CPUs in ascending id order, online or not. Ids may have gaps.
    pub cpus: Vec<Cpu>,
    /// The kernel's SLIT distance matrix between online nodes.
    pub distances: DistanceMatrix,
    /// Groups of CPUs that share a level-3 cache, in order of their lowest CPU.
    pub l3_groups: Vec<L3Group>,
    /// The cache hierarchy seen from the first online CPU.
    pub caches: Vec<CacheLevel>,
    /// What this process may use (its CPU affinity / cpuset and `Mems_allowed`).
    pub allowed: Allowed,
}

/// Machine facts that do not change the topology but that every measurement must be reported with.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct MachineInfo {
    /// CPU model name from `/proc/cpuinfo`, when reported.
    pub cpu_model: Option<String>,
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel_release: Option<String>,
    /// The selected transparent huge page mode (`always`, `madvise`, `never`).
    pub transparent_hugepages: Option<String>,
    /// Whether the kernel's automatic NUMA balancing is on (`/proc/sys/kernel/numa_balancing` non-zero).
    pub numa_balancing: Option<bool>,
}

/// An online NUMA node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Node {
    /// The kernel's node id.
    pub id: u32,
    /// Online CPUs of the node; empty for a memory-only node (CXL, HBM, …).
    pub cpus: CpuSet,
    /// `MemTotal` of the node.
    pub memory_bytes: u64,
}

/// A present CPU (hardware thread).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Cpu {
    /// The kernel's CPU id.
    pub id: u32,
    /// Whether the CPU is online. An offline CPU has no node, package or core.
    pub online: bool,
    /// The node the CPU belongs to.
    pub node: Option<u32>,
    /// Physical package (socket) id.
    pub package: Option<u32>,
    /// Die id within the package, where the kernel reports one.
    pub die: Option<u32>,
    /// The kernel's core id; unique only within a package (and die).
    pub core_id: Option<u32>,
    /// A machine-wide core number: cores numbered in order of (package, die, core_id).
    pub core: Option<u32>,
    /// CPUs sharing this CPU's core, itself included.
    pub smt_siblings: CpuSet,
    /// Index into [`Topology::l3_groups`].
    pub l3_group: Option<u32>,
}

/// The SLIT distance matrix: `rows[i][j]` is the distance from `nodes[i]` to `nodes[j]`. It may be asymmetric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DistanceMatrix {
    /// Node ids, in the order of rows and columns.
    pub nodes: Vec<u32>,
    /// One row per node.
    pub rows: Vec<Vec<u32>>,
}

impl DistanceMatrix {
    /// Distance from node `from` to node `to`, if both exist.
    pub fn get(&self, from: u32, to: u32) -> Option<u32> {
        let row = self.nodes.iter().position(|&n| n == from)?;
        let column = self.nodes.iter().position(|&n| n == to)?;
        self.rows.get(row)?.get(column).copied()
    }

    /// Whether `get(a, b) == get(b, a)` for every pair.
    pub fn is_symmetric(&self) -> bool {
        self.rows.iter().enumerate().all(|(i, row)| row.iter().enumerate().all(|(j, &d)| self.rows[j][i] == d))
    }
}

/// CPUs sharing one level-3 cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct L3Group {
    /// Position in [`Topology::l3_groups`].
    pub id: u32,
    /// The online CPUs that share it.
    pub cpus: CpuSet,
    /// Its size, as the kernel reports it (in a VM this can be far larger than what the VM may use).
    pub size_bytes: Option<u64>,
}

/// One level of the cache hierarchy, seen from the first online CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CacheLevel {
    /// 1, 2, 3, …
    pub level: u8,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: CacheKind,
    /// Size of one instance.
    pub size_bytes: Option<u64>,
    /// Cache line size.
    pub line_size_bytes: Option<u32>,
    /// How many online CPUs share one instance.
    pub cpus_per_instance: u32,
}

/// What a cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum CacheKind {
    /// Data only.
    Data,
    /// Instructions only.
    Instruction,
    /// Both.
    Unified,
}

/// The resources this process may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Allowed {
    /// CPUs in the process's affinity mask (`Cpus_allowed_list`).
    pub cpus: CpuSet,
    /// Nodes the process may allocate from (`Mems_allowed_list`).
    pub nodes: NodeSet,
}

impl Topology {
    /// Reads the live machine.
    pub fn from_system() -> Result<Self, TopologyError> {
        Self::from_root(Path::new("/"))
    }

    /// Reads a machine whose `sys/` and `proc/` trees are below `root` (the live machine when `root` is `/`).
    pub fn from_root(root: &Path) -> Result<Self, TopologyError> {
        sysfs::read(root, &mut sysfs::NoLog)
    }

    /// Online CPUs in ascending order.
    pub fn online_cpus(&self) -> CpuSet {
        self.cpus.iter().filter(|cpu| cpu.online).map(|cpu| cpu.id).collect()
    }

    /// Ids of all online nodes.
    pub fn node_ids(&self) -> NodeSet {
        self.nodes.iter().map(|node| node.id).collect()
    }

    /// Ids of nodes that have at least one online CPU.
    pub fn nodes_with_cpus(&self) -> NodeSet {
        self.nodes.iter().filter(|node| !node.cpus.is_empty()).map(|node| node.id).collect()
    }

    /// The node with this id.
    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|node| node.id == id)
    }

    /// The CPU with this id.
    pub fn cpu(&self, id: u32) -> Option<&Cpu> {
        self.cpus.iter().find(|cpu| cpu.id == id)
    }

    /// Number of distinct packages among online CPUs.
    pub fn package_count(&self) -> usize {
        self.packages().len()
    }

    /// Distinct package ids among online CPUs, ascending.
    pub fn packages(&self) -> Vec<u32> {
        let mut packages: Vec<u32> = self.cpus.iter().filter_map(|cpu| cpu.package).collect();
        packages.sort_unstable();
        packages.dedup();
        packages
    }

    /// Number of distinct cores among online CPUs.
    pub fn core_count(&self) -> usize {
        let mut cores: Vec<u32> = self.cpus.iter().filter_map(|cpu| cpu.core).collect();
        cores.sort_unstable();
        cores.dedup();
        cores.len()
    }

    /// Hardware threads per core (the largest SMT sibling set), 1 without SMT.
    pub fn threads_per_core(&self) -> usize {
        self.cpus.iter().filter(|cpu| cpu.online).map(|cpu| cpu.smt_siblings.len()).max().unwrap_or(1).max(1)
    }

    /// The size of the last-level cache instance seen from the first online CPU, as reported.
    pub fn last_level_cache_bytes(&self) -> Option<u64> {
        self.caches.iter().filter(|cache| cache.kind != CacheKind::Instruction).max_by_key(|c| c.level)?.size_bytes
    }

    /// Derives the scheduling domains at the given granularity.
    pub fn domains(&self, granularity: DomainGranularity) -> Result<Domains, TopologyError> {
        Domains::derive(self, granularity)
    }

    /// Checks that `node` exists and that this process may allocate from it; the error says which nodes exist and
    /// which are allowed, so a typo (`--node 4` on a 4-node machine) is obvious.
    pub fn check_memory_node(&self, node: u32) -> Result<(), NodeNotUsable> {
        let existing = self.node_ids();
        if !existing.contains(node) {
            return Err(NodeNotUsable {
                node,
                reason: NodeProblem::DoesNotExist,
                existing,
                allowed: self.allowed.nodes.clone(),
            });
        }
        if !self.allowed.nodes.contains(node) {
            return Err(NodeNotUsable {
                node,
                reason: NodeProblem::NotAllowed,
                existing,
                allowed: self.allowed.nodes.clone(),
            });
        }
        if self.node(node).is_some_and(|n| n.memory_bytes == 0) {
            return Err(NodeNotUsable {
                node,
                reason: NodeProblem::NoMemory,
                existing,
                allowed: self.allowed.nodes.clone(),
            });
        }
        Ok(())
    }
}

/// A node that cannot hold this process's memory, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} (this machine has nodes {existing}; this process may allocate from nodes {allowed})", reason.describe(*node))]
pub struct NodeNotUsable {
    /// The node asked for.
    pub node: u32,
    /// Why it cannot be used.
    pub reason: NodeProblem,
    /// Nodes that exist.
    pub existing: NodeSet,
    /// Nodes this process may allocate from.
    pub allowed: NodeSet,
}

/// Why a node cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeProblem {
    /// No such node is online.
    DoesNotExist,
    /// The node exists but is outside `Mems_allowed` (cpuset or `numactl --membind`).
    NotAllowed,
    /// The node exists but has no memory.
    NoMemory,
}

impl NodeProblem {
    fn describe(self, node: u32) -> String {
        match self {
            NodeProblem::DoesNotExist => format!("NUMA node {node} does not exist"),
            NodeProblem::NotAllowed => format!("NUMA node {node} is not allowed for this process"),
            NodeProblem::NoMemory => format!("NUMA node {node} has no memory"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::format_bytes;

    #[test]
    fn byte_counts_pick_a_readable_unit() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(512), "512 B");
        assert_eq!(format_bytes(48 << 10), "48 KiB");
        assert_eq!(format_bytes(480 << 20), "480 MiB");
        assert_eq!(format_bytes(1536 << 20), "1.5 GiB");
        assert_eq!(format_bytes(4_523_327_488), "4.2 GiB");
        assert_eq!(format_bytes(u64::MAX), "16384 PiB");
    }
}
