//! The axes of the matrices: CPU domains (rows) and memory nodes (columns), and the progress callbacks the long
//! measurements report through.

use numadb_topology::{DomainGranularity, Topology, TopologyError};
use serde::{Deserialize, Serialize};

/// One row of a matrix: a CPU domain and the CPUs of it this process may use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainAxis {
    /// The domain's id.
    pub id: u32,
    /// `node0`, `package1`, `l3-2`.
    pub name: String,
    /// The domain's CPUs this process may run on, ascending: the CPUs measured.
    pub cpus: Vec<u32>,
    /// The nodes local to the domain.
    pub local_nodes: Vec<u32>,
}

/// Rows and columns of a (CPU domain × memory node) matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixAxes {
    /// How the CPUs were grouped.
    pub granularity: DomainGranularity,
    /// The rows.
    pub domains: Vec<DomainAxis>,
    /// The columns: every node that has memory and that this process may allocate from, ascending.
    pub nodes: Vec<u32>,
}

impl MatrixAxes {
    /// The axes of `topology` at `granularity`. Domains with no CPU this process may use are left out (they
    /// cannot be measured; the caller can tell by comparing with the topology).
    pub fn of(topology: &Topology, granularity: DomainGranularity) -> Result<MatrixAxes, TopologyError> {
        let domains = topology
            .domains(granularity)?
            .domains
            .into_iter()
            .filter(|domain| !domain.allowed_cpus.is_empty())
            .map(|domain| DomainAxis {
                id: domain.id,
                name: domain.name,
                cpus: domain.allowed_cpus.iter().collect(),
                local_nodes: domain.memory_nodes.iter().collect(),
            })
            .collect();
        let nodes = topology
            .nodes
            .iter()
            .filter(|node| node.memory_bytes > 0 && topology.allowed.nodes.contains(node.id))
            .map(|node| node.id)
            .collect();
        Ok(MatrixAxes { granularity, domains, nodes })
    }

    /// Keeps only the listed nodes (all when `nodes` is empty).
    pub fn restrict_nodes(mut self, nodes: &[u32]) -> MatrixAxes {
        if !nodes.is_empty() {
            self.nodes.retain(|node| nodes.contains(node));
        }
        self
    }

    /// Keeps only the domains with the listed ids (all when `domains` is empty).
    pub fn restrict_domains(mut self, domains: &[u32]) -> MatrixAxes {
        if !domains.is_empty() {
            self.domains.retain(|domain| domains.contains(&domain.id));
        }
        self
    }

    /// Every (domain index, node) pair, row by row.
    pub fn cells(&self) -> impl Iterator<Item = (usize, u32)> + '_ {
        (0..self.domains.len()).flat_map(move |d| self.nodes.iter().map(move |&n| (d, n)))
    }

    /// CPUs over all domains.
    pub fn cpu_count(&self) -> usize {
        self.domains.iter().map(|d| d.cpus.len()).sum()
    }
}

/// Where a long measurement stands, for a progress bar.
pub trait Progress: Sync {
    /// The measurement will take about `units` steps.
    fn start(&self, _label: &str, _units: u64) {}
    /// `units` more steps are done; `what` says what is being measured now.
    fn advance(&self, _units: u64, _what: &str) {}
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}

#[cfg(test)]
mod tests {
    use super::*;
    use numadb_topology::MachineSpec;

    #[test]
    fn axes_have_a_row_per_domain_and_a_column_per_memory_node() {
        let spec = MachineSpec::from_json(
            r#"{"name":"t","threads_per_core":1,"nodes":[
                {"package":0,"cores":2,"memory_mib":512},{"package":0,"cores":2,"memory_mib":512},
                {"package":0,"cores":0,"memory_mib":512}],
                "distances":[[10,12,17],[12,10,17],[17,17,10]]}"#,
        )
        .unwrap();
        let topology = spec.to_topology().unwrap();
        let axes = MatrixAxes::of(&topology, DomainGranularity::Node).unwrap();
        assert_eq!(axes.domains.len(), 2);
        assert_eq!(axes.nodes, vec![0, 1, 2], "the memory-only node is a column");
        assert_eq!(axes.cells().count(), 6);
        assert_eq!(axes.domains[1].cpus, vec![2, 3]);
        assert_eq!(axes.cpu_count(), 4);
        let package = MatrixAxes::of(&topology, DomainGranularity::Package).unwrap();
        assert_eq!(package.domains.len(), 1);
        assert_eq!(package.domains[0].local_nodes, vec![0, 1]);
        assert_eq!(axes.clone().restrict_nodes(&[2]).nodes, vec![2]);
        assert_eq!(axes.restrict_domains(&[1]).domains.len(), 1);
    }
}
