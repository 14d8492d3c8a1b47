//! Machine descriptions: a topology written by hand instead of read from sysfs.
//!
//! The same description drives two things: [`MachineSpec::to_topology`] builds the [`Topology`] that a machine of
//! that shape must show, and the emulated-NUMA harness turns it into QEMU arguments. A test inside the guest then
//! reads the live topology and compares it with `to_topology()` of the spec it was booted with; scheduler tests use
//! descriptions to get four logical domains on a two-CPU machine.
//!
//! CPU numbering follows QEMU's: CPUs are numbered node by node in the order the nodes are listed, the threads of one
//! core adjacent. Memory-only nodes (no cores) hold no CPUs.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{
    Allowed, Cpu, CpuSet, DistanceMatrix, L3Group, LOCAL_DISTANCE, MachineInfo, Node, NodeSet, Topology, TopologyError,
};

/// A machine's shape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MachineSpec {
    /// A short name (`2s-snc2`), used in logs and as the topology's source.
    pub name: String,
    /// Hardware threads per core (1 or 2).
    #[serde(default = "one")]
    pub threads_per_core: u32,
    /// Nodes with ids 0, 1, 2, … in this order; nodes of one package must be listed together.
    pub nodes: Vec<NodeSpec>,
    /// The SLIT matrix, `distances[i][j]` from node i to node j; 10 on the diagonal, 11-254 elsewhere.
    pub distances: Vec<Vec<u32>>,
}

fn one() -> u32 {
    1
}

/// One node of a [`MachineSpec`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// The package (socket) the node's cores are in; ignored for a memory-only node.
    #[serde(default)]
    pub package: u32,
    /// Cores in the node; 0 for a memory-only node.
    pub cores: u32,
    /// Memory of the node in MiB.
    pub memory_mib: u64,
}

impl MachineSpec {
    /// Parses a description from JSON and checks it.
    pub fn from_json(text: &str) -> Result<Self, TopologyError> {
        let spec: MachineSpec =
            serde_json::from_str(text).map_err(|error| TopologyError::InvalidSpec(error.to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Checks that the description is a machine that can exist.
    pub fn validate(&self) -> Result<(), TopologyError> {
        let invalid = |message: String| Err(TopologyError::InvalidSpec(format!("{}: {message}", self.name)));
        let count = self.nodes.len();
        if count == 0 {
            return invalid("a machine needs at least one node".into());
        }
        if !(1..=2).contains(&self.threads_per_core) {
            return invalid(format!("threads_per_core must be 1 or 2, not {}", self.threads_per_core));
        }
        if self.nodes.iter().all(|n| n.cores == 0) {
            return invalid("at least one node needs cores".into());
        }
        if self.nodes.iter().any(|n| n.memory_mib == 0) {
            return invalid("every node needs memory (memory_mib > 0)".into());
        }
        let mut seen_packages: Vec<u32> = Vec::new();
        for node in self.nodes.iter().filter(|n| n.cores > 0) {
            if seen_packages.last() != Some(&node.package) {
                if seen_packages.contains(&node.package) {
                    return invalid(format!("the nodes of package {} are not listed together", node.package));
                }
                seen_packages.push(node.package);
            }
        }
        if self.distances.len() != count || self.distances.iter().any(|row| row.len() != count) {
            return invalid(format!("distances must be a {count}x{count} matrix"));
        }
        for (i, row) in self.distances.iter().enumerate() {
            for (j, &d) in row.iter().enumerate() {
                if i == j && d != LOCAL_DISTANCE {
                    return invalid(format!("distance from node {i} to itself must be {LOCAL_DISTANCE}, not {d}"));
                }
                if i != j && !(11..=254).contains(&d) {
                    return invalid(format!("distance from node {i} to node {j} must be 11-254, not {d}"));
                }
            }
        }
        Ok(())
    }

    /// Total CPUs.
    pub fn cpu_count(&self) -> u32 {
        self.nodes.iter().map(|n| n.cores * self.threads_per_core).sum()
    }

    /// The CPUs of each node, in node order.
    pub fn node_cpus(&self) -> Vec<CpuSet> {
        let mut next = 0;
        self.nodes
            .iter()
            .map(|node| {
                let count = node.cores * self.threads_per_core;
                let cpus = (next..next + count).collect();
                next += count;
                cpus
            })
            .collect()
    }

    /// The topology a machine of this shape shows. Caches are not described, so there is one L3 group per package
    /// and no cache levels.
    pub fn to_topology(&self) -> Result<Topology, TopologyError> {
        self.validate()?;
        let node_cpus = self.node_cpus();
        let mut cpus = Vec::new();
        let mut next_core_in_package: std::collections::BTreeMap<u32, u32> = Default::default();
        let mut next_core = 0;
        let packages: Vec<u32> = {
            let mut p: Vec<u32> = self.nodes.iter().filter(|n| n.cores > 0).map(|n| n.package).collect();
            p.sort_unstable();
            p.dedup();
            p
        };
        for (node_id, (node, node_cpu_set)) in self.nodes.iter().zip(&node_cpus).enumerate() {
            let ids: Vec<u32> = node_cpu_set.iter().collect();
            for core_cpus in ids.chunks(self.threads_per_core as usize) {
                let core_id = next_core_in_package.entry(node.package).or_insert(0);
                let siblings: CpuSet = core_cpus.iter().copied().collect();
                for &cpu in core_cpus {
                    cpus.push(Cpu {
                        id: cpu,
                        online: true,
                        node: Some(node_id as u32),
                        package: Some(node.package),
                        die: Some(0),
                        core_id: Some(*core_id),
                        core: Some(next_core),
                        smt_siblings: siblings.clone(),
                        l3_group: packages.iter().position(|&p| p == node.package).map(|p| p as u32),
                    });
                }
                *core_id += 1;
                next_core += 1;
            }
        }
        let l3_groups = packages
            .iter()
            .enumerate()
            .map(|(index, &package)| L3Group {
                id: index as u32,
                cpus: cpus.iter().filter(|c| c.package == Some(package)).map(|c| c.id).collect(),
                size_bytes: None,
            })
            .collect();
        let nodes: Vec<Node> = self
            .nodes
            .iter()
            .zip(node_cpus)
            .enumerate()
            .map(|(id, (node, cpus))| Node { id: id as u32, cpus, memory_bytes: node.memory_mib << 20 })
            .collect();
        let all_cpus: CpuSet = cpus.iter().map(|c| c.id).collect();
        let all_nodes: NodeSet = (0..self.nodes.len() as u32).collect();
        Ok(Topology {
            source: format!("spec:{}", self.name),
            machine: MachineInfo::default(),
            distances: DistanceMatrix { nodes: all_nodes.ids().to_vec(), rows: self.distances.clone() },
            nodes,
            cpus,
            l3_groups,
            caches: Vec::new(),
            allowed: Allowed { cpus: all_cpus, nodes: all_nodes },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DomainGranularity;

    fn snc() -> MachineSpec {
        MachineSpec::from_json(
            r#"{"name":"2s-snc2","threads_per_core":2,
                "nodes":[{"package":0,"cores":2,"memory_mib":512},{"package":0,"cores":2,"memory_mib":512},
                         {"package":1,"cores":2,"memory_mib":512},{"package":1,"cores":2,"memory_mib":512}],
                "distances":[[10,11,21,21],[11,10,21,21],[21,21,10,11],[21,21,11,10]]}"#,
        )
        .unwrap()
    }

    #[test]
    fn spec_numbers_cpus_like_qemu() {
        let topology = snc().to_topology().unwrap();
        assert_eq!(topology.nodes[1].cpus.to_list_string(), "4-7");
        assert_eq!(topology.cpu(5).unwrap().smt_siblings.to_list_string(), "4-5");
        assert_eq!(topology.cpu(5).unwrap().core_id, Some(2));
        assert_eq!(topology.cpu(9).unwrap().core_id, Some(0));
        assert_eq!(topology.cpu(9).unwrap().core, Some(4));
        assert_eq!(topology.core_count(), 8);
        assert_eq!(topology.threads_per_core(), 2);
        let packages = topology.domains(DomainGranularity::Package).unwrap();
        assert_eq!(packages.len(), 2);
        assert_eq!(packages.domains[1].memory_nodes.to_list_string(), "2-3");
    }

    #[test]
    fn spec_rejects_impossible_machines() {
        let mut spec = snc();
        spec.distances[0][0] = 11;
        assert!(spec.validate().unwrap_err().to_string().contains("to itself must be 10"));
        let mut spec = snc();
        spec.distances.pop();
        assert!(spec.validate().unwrap_err().to_string().contains("4x4"));
        let mut spec = snc();
        spec.nodes[1].package = 1;
        spec.nodes[2].package = 0;
        assert!(spec.validate().unwrap_err().to_string().contains("not listed together"));
        assert!(MachineSpec::from_json(r#"{"name":"x","nodes":[],"distances":[],"extra":1}"#).is_err());
    }
}
