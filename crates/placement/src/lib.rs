//! Memory placement and thread pinning: where numadb's bytes live and where its threads run, *verified*.
//!
//! Everything in numadb that cares about NUMA reduces to two questions: on which node is this memory, and on which
//! CPU is this thread? This crate answers both, and it is the only crate that makes the system calls behind them
//! (`mbind`, `set_mempolicy`, `get_mempolicy`, `move_pages`, `sched_setaffinity`, `getcpu`; see [`sys`]).
//!
//! Design:
//! - A [`Region`] is an anonymous mapping with a [`Policy`]: bound to one node, interleaved over a node set,
//!   preferring a node, first-touch (the node of the CPU that first writes a page), or the OS default. Regions can
//!   use transparent huge pages, in which case they are 2 MiB aligned so that no huge page straddles two regions
//!   (two threads' adjacent buffers would otherwise share one, placed on the first toucher's node). A region unmaps
//!   itself on drop; [`NumaBuffer`] is its typed view.
//! - Placement is a request, not a fact: the kernel may fall back to another node under memory pressure, and
//!   automatic NUMA balancing moves pages on its own. [`Region::page_locations`] therefore asks the kernel
//!   (`move_pages` in query mode) where every page really is and returns a per-node histogram. A page whose status
//!   is negative (not yet touched, or unmapped for a moment while NUMA balancing scans it) lands in an explicit
//!   *unknown* bucket: unknown is not wrong, and callers decide what it means to them.
//! - [`Region::migrate`] changes a region's policy and moves its pages (`mbind` with `MPOL_MF_MOVE`), then checks
//!   and retries the stragglers with `move_pages`, a bounded number of times. Data is preserved by the kernel.
//! - Nodes are checked before any call: a node that does not exist, is not allowed (cpuset, `numactl --membind`)
//!   or has no memory is an error that lists the nodes that exist, rather than the kernel's bare `EINVAL`.
//! - [`pin_current_thread`] and [`current_cpu`] are the affinity half; [`PinGuard`] restores the previous
//!   affinity when dropped, which is what HANA's `preferred` binding needs around one task.

mod pin;
mod region;
pub mod sys;

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

use numadb_topology::{CpuSet, NodeNotUsable, NodeSet, Topology, TopologyError};

pub use pin::{
    CpuLocation, PinGuard, ThreadPolicy, current_cpu, pin_current_thread, set_thread_policy, thread_affinity,
    thread_policy,
};
pub use region::{HugePages, MigrationReport, NumaBuffer, PageHistogram, Region};

/// Size of a transparent huge page on x86-64 and of the alignment of huge-page regions.
pub const HUGE_PAGE_BYTES: usize = 2 << 20;

/// Where the pages of a region (or a thread's future allocations) go.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Policy {
    /// No policy of our own: whatever the thread's or process's policy says (`numactl` may have set one).
    OsDefault,
    /// Each page on the node of the CPU that first touches it (`MPOL_LOCAL`).
    FirstTouch,
    /// Every page on this node; allocation fails rather than falls back (`MPOL_BIND`).
    Node(u32),
    /// Pages spread round-robin over these nodes, page by page (`MPOL_INTERLEAVE`).
    Interleave(NodeSet),
    /// Pages on this node while it has free memory, elsewhere otherwise (`MPOL_PREFERRED`).
    Preferred(u32),
}

impl Policy {
    /// The nodes the policy names (empty for `OsDefault` and `FirstTouch`).
    pub fn nodes(&self) -> NodeSet {
        match self {
            Policy::OsDefault | Policy::FirstTouch => NodeSet::new(),
            Policy::Node(node) | Policy::Preferred(node) => NodeSet::from_ids([*node]),
            Policy::Interleave(nodes) => nodes.clone(),
        }
    }

    /// The `MPOL_*` mode and node set for `mbind` / `set_mempolicy`.
    fn mode_and_nodes(&self) -> (i32, NodeSet) {
        match self {
            Policy::OsDefault => (sys::MPOL_DEFAULT, NodeSet::new()),
            Policy::FirstTouch => (sys::MPOL_LOCAL, NodeSet::new()),
            Policy::Node(node) => (sys::MPOL_BIND, NodeSet::from_ids([*node])),
            Policy::Interleave(nodes) => (sys::MPOL_INTERLEAVE, nodes.clone()),
            Policy::Preferred(node) => (sys::MPOL_PREFERRED, NodeSet::from_ids([*node])),
        }
    }

    /// Checks every node the policy names against the machine.
    pub fn check(&self, topology: &Topology) -> Result<(), PlacementError> {
        if let Policy::Interleave(nodes) = self
            && nodes.is_empty()
        {
            return Err(PlacementError::InvalidPolicy("interleave needs at least one node".into()));
        }
        for node in self.nodes().iter() {
            topology.check_memory_node(node)?;
        }
        Ok(())
    }
}

/// `node(1)`, `interleave(0-3)`, `preferred(2)`, `first_touch`, `os_default`: the syntax used on the command line
/// and in SQL.
impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::OsDefault => f.write_str("os_default"),
            Policy::FirstTouch => f.write_str("first_touch"),
            Policy::Node(node) => write!(f, "node({node})"),
            Policy::Interleave(nodes) => write!(f, "interleave({})", nodes.to_list_string()),
            Policy::Preferred(node) => write!(f, "preferred({node})"),
        }
    }
}

impl FromStr for Policy {
    type Err = PlacementError;
    fn from_str(text: &str) -> Result<Self, PlacementError> {
        let text = text.trim();
        let invalid = || {
            PlacementError::InvalidPolicy(format!(
                "{text:?} is not a placement (expected node(N), interleave(NODES), preferred(N), first_touch or os_default)"
            ))
        };
        let argument = |name: &str| -> Option<&str> {
            text.strip_prefix(name)?.trim_start().strip_prefix('(')?.strip_suffix(')').map(str::trim)
        };
        let node = |arg: &str| arg.parse::<u32>().map_err(|_| invalid());
        match text.to_ascii_lowercase().as_str() {
            "os_default" | "default" => return Ok(Policy::OsDefault),
            "first_touch" | "local" => return Ok(Policy::FirstTouch),
            _ => {}
        }
        if let Some(arg) = argument("node") {
            return Ok(Policy::Node(node(arg)?));
        }
        if let Some(arg) = argument("preferred") {
            return Ok(Policy::Preferred(node(arg)?));
        }
        if let Some(arg) = argument("interleave") {
            let nodes = NodeSet::parse_list(arg).map_err(|error| PlacementError::InvalidPolicy(error.to_string()))?;
            if nodes.is_empty() {
                return Err(PlacementError::InvalidPolicy("interleave needs at least one node".into()));
            }
            return Ok(Policy::Interleave(nodes));
        }
        Err(invalid())
    }
}

/// What can go wrong placing memory or pinning threads.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// A node that does not exist, is not allowed, or has no memory.
    #[error(transparent)]
    NodeNotUsable(#[from] NodeNotUsable),
    /// CPUs outside the set this process may run on.
    #[error("CPUs {requested} cannot be used: this process may run on CPUs {allowed}")]
    CpusNotAllowed {
        /// The CPUs asked for.
        requested: CpuSet,
        /// The CPUs this process may run on.
        allowed: CpuSet,
    },
    /// A policy that makes no sense (`interleave()` with no nodes, a typo).
    #[error("{0}")]
    InvalidPolicy(String),
    /// The kernel refused a call.
    #[error("{call} failed: {reason}")]
    Syscall {
        /// The call and what it was asked (`mbind(node(2))`).
        call: String,
        /// The kernel's error (part of the message, so not also a `source`).
        reason: std::io::Error,
    },
    /// After the allowed number of attempts, some pages are still not where they were asked to be.
    #[error("migration to {policy} left {misplaced} of {pages} pages elsewhere after {attempts} attempts")]
    MigrationIncomplete {
        /// The policy migrated to.
        policy: Policy,
        /// Pages of the region.
        pages: usize,
        /// Pages on another node.
        misplaced: usize,
        /// Attempts made.
        attempts: u32,
    },
    /// The machine's topology could not be read.
    #[error("reading this machine's topology: {0}")]
    Topology(#[from] TopologyError),
}

impl PlacementError {
    pub(crate) fn syscall(call: impl Into<String>, source: std::io::Error) -> Self {
        Self::Syscall { call: call.into(), reason: source }
    }
}

/// This machine's topology, read once per process; placement checks nodes and CPUs against it.
pub fn system_topology() -> Result<&'static Topology, PlacementError> {
    static TOPOLOGY: OnceLock<Result<Topology, String>> = OnceLock::new();
    TOPOLOGY
        .get_or_init(|| Topology::from_system().map_err(|error| error.to_string()))
        .as_ref()
        .map_err(|message| PlacementError::Topology(TopologyError::Inconsistent(message.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print() {
        for text in ["os_default", "first_touch", "node(3)", "interleave(0-3)", "interleave(0,2)", "preferred(1)"] {
            let policy: Policy = text.parse().unwrap();
            assert_eq!(policy.to_string(), text);
        }
        assert_eq!("NODE( 2 )".to_ascii_lowercase().parse::<Policy>().unwrap(), Policy::Node(2));
        assert_eq!(" interleave(1, 3) ".parse::<Policy>().unwrap(), Policy::Interleave(NodeSet::from_ids([1, 3])));
        for bad in ["node()", "node(x)", "interleave()", "nodes(1)", "node(1", "", "interleave(3-1)"] {
            assert!(bad.parse::<Policy>().is_err(), "{bad:?} parsed");
        }
    }
}
