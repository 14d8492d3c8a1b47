//! Table placement policies: where a table's (or a column's) partitions live.

use std::fmt;
use std::str::FromStr;

use numadb_placement::Policy;
use numadb_topology::NodeSet;
use serde::{Deserialize, Serialize};

/// How a table's partitions are placed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TablePlacement {
    /// Every partition on this node (HANA's `ALTER TABLE … NUMA NODE ('n')`).
    Node(u32),
    /// Partition `i` on node `nodes[i mod k]`.
    RoundRobin(NodeSet),
    /// Every partition's pages interleaved over the nodes.
    Interleave(NodeSet),
    /// Each page on the node of the thread that writes it first (the loading worker's).
    FirstTouch,
    /// Whatever the process's memory policy says.
    OsDefault,
}

impl TablePlacement {
    /// The memory policy of partition `index`.
    pub fn policy_for_partition(&self, index: usize) -> Policy {
        match self {
            TablePlacement::Node(node) => Policy::Node(*node),
            TablePlacement::RoundRobin(nodes) => {
                let ids = nodes.ids();
                Policy::Node(ids[index % ids.len().max(1)])
            }
            TablePlacement::Interleave(nodes) => Policy::Interleave(nodes.clone()),
            TablePlacement::FirstTouch => Policy::FirstTouch,
            TablePlacement::OsDefault => Policy::OsDefault,
        }
    }

    /// The node partition `index` is meant to be on, when the policy names one.
    pub fn intended_node(&self, index: usize) -> Option<u32> {
        match self.policy_for_partition(index) {
            Policy::Node(node) => Some(node),
            _ => None,
        }
    }

    /// Every node the placement names.
    pub fn nodes(&self) -> NodeSet {
        match self {
            TablePlacement::Node(node) => NodeSet::from_ids([*node]),
            TablePlacement::RoundRobin(nodes) | TablePlacement::Interleave(nodes) => nodes.clone(),
            TablePlacement::FirstTouch | TablePlacement::OsDefault => NodeSet::new(),
        }
    }
}

impl fmt::Display for TablePlacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TablePlacement::Node(node) => write!(f, "node({node})"),
            TablePlacement::RoundRobin(nodes) => write!(f, "round_robin({})", nodes.to_list_string()),
            TablePlacement::Interleave(nodes) => write!(f, "interleave({})", nodes.to_list_string()),
            TablePlacement::FirstTouch => f.write_str("first_touch"),
            TablePlacement::OsDefault => f.write_str("os_default"),
        }
    }
}

impl FromStr for TablePlacement {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let lowered = text.trim().to_ascii_lowercase();
        let invalid = || {
            format!(
                "{text:?} is not a placement (expected node(N), round_robin(NODES), interleave(NODES), first_touch or os_default)"
            )
        };
        let argument = |name: &str| -> Option<String> {
            lowered
                .strip_prefix(name)?
                .trim_start()
                .strip_prefix('(')?
                .strip_suffix(')')
                .map(|a| a.trim().replace(' ', ""))
        };
        let nodes = |arg: String| -> Result<NodeSet, String> {
            let set = NodeSet::parse_list(&arg).map_err(|e| e.to_string())?;
            if set.is_empty() { Err(format!("{text:?} names no node")) } else { Ok(set) }
        };
        match lowered.as_str() {
            "first_touch" => return Ok(TablePlacement::FirstTouch),
            "os_default" | "default" => return Ok(TablePlacement::OsDefault),
            _ => {}
        }
        if let Some(arg) = argument("node") {
            return arg.parse().map(TablePlacement::Node).map_err(|_| invalid());
        }
        if let Some(arg) = argument("round_robin") {
            return nodes(arg).map(TablePlacement::RoundRobin);
        }
        if let Some(arg) = argument("interleave") {
            return nodes(arg).map(TablePlacement::Interleave);
        }
        Err(invalid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placements_parse_print_and_map_partitions_to_policies() {
        for text in ["node(1)", "round_robin(0-3)", "interleave(0,2)", "first_touch", "os_default"] {
            assert_eq!(text.parse::<TablePlacement>().unwrap().to_string(), text);
        }
        let round_robin: TablePlacement = "ROUND_ROBIN(0, 2)".parse().unwrap();
        assert_eq!(round_robin.policy_for_partition(0), Policy::Node(0));
        assert_eq!(round_robin.policy_for_partition(1), Policy::Node(2));
        assert_eq!(round_robin.policy_for_partition(2), Policy::Node(0));
        assert_eq!(round_robin.intended_node(3), Some(2));
        assert_eq!("interleave(0-1)".parse::<TablePlacement>().unwrap().intended_node(0), None);
        for bad in ["node()", "node(a)", "round_robin()", "everywhere"] {
            assert!(bad.parse::<TablePlacement>().is_err(), "{bad}");
        }
    }
}
