//! Domains: the units the scheduler and placement work with.
//!
//! A domain is a set of CPUs plus the memory nodes those CPUs treat as local. The default is one domain per node
//! that has CPUs, which is what SAP HANA does and what the thesis measures with SNC on. Two coarser or finer views
//! answer the thesis's other questions: one domain per *package* models "SNC off" on an SNC machine (the two halves
//! of a socket become one domain, their nodes its local memory), and one domain per *L3 group* follows AMD's CCX
//! structure, where several L3 caches share one node.
//!
//! Distances between domains come from the SLIT matrix: the distance from domain A to domain B is the smallest
//! distance from one of A's memory nodes to one of B's (the matrix may be asymmetric, so direction matters). The
//! distance of a domain to itself is the smallest diagonal entry of its nodes (10). Every domain carries the other
//! domains ordered by distance, nearest first, ties by id: that list is the victim order of neighbour stealing.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{CpuSet, NodeSet, Topology, TopologyError};

/// How finely the machine is cut into domains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DomainGranularity {
    /// One domain per NUMA node with CPUs (the default).
    #[default]
    Node,
    /// One domain per package (socket): the analogue of SNC/NPS disabled.
    Package,
    /// One domain per group of CPUs sharing an L3 cache.
    L3,
    /// One domain holding every CPU and node: the machine as a NUMA-unaware system sees it (the baseline of
    /// the thesis's "SNC disabled" comparisons, on any machine).
    Machine,
}

impl DomainGranularity {
    /// All granularities, in order from the default.
    pub const ALL: [DomainGranularity; 4] =
        [DomainGranularity::Node, DomainGranularity::Package, DomainGranularity::L3, DomainGranularity::Machine];

    /// The name used on the command line and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            DomainGranularity::Node => "node",
            DomainGranularity::Package => "package",
            DomainGranularity::L3 => "l3",
            DomainGranularity::Machine => "machine",
        }
    }
}

impl std::str::FromStr for DomainGranularity {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|g| g.name() == text)
            .ok_or_else(|| format!("unknown domain granularity {text:?} (expected node, package, l3 or machine)"))
    }
}

/// Another domain and how far away it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DomainNeighbour {
    /// The other domain's id.
    pub domain: u32,
    /// SLIT distance from this domain's memory to the other's.
    pub distance: u32,
}

/// A set of CPUs and the memory nodes they treat as local.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Domain {
    /// Position in [`Domains::domains`].
    pub id: u32,
    /// A readable name: `node1`, `package0`, `l3-5`.
    pub name: String,
    /// Online CPUs of the domain.
    pub cpus: CpuSet,
    /// Those of `cpus` this process may run on.
    pub allowed_cpus: CpuSet,
    /// Nodes whose memory is local to the domain.
    pub memory_nodes: NodeSet,
    /// Distance from the domain to itself.
    pub local_distance: u32,
    /// Every other domain, nearest first (ties by id).
    pub by_distance: Vec<DomainNeighbour>,
}

impl Domain {
    /// The other domains at the smallest distance: the domain's neighbours in HANA's sense.
    pub fn nearest_neighbours(&self) -> Vec<u32> {
        let Some(nearest) = self.by_distance.first().map(|n| n.distance) else { return Vec::new() };
        self.by_distance.iter().take_while(|n| n.distance == nearest).map(|n| n.domain).collect()
    }
}

/// The domains of a topology at one granularity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Domains {
    /// How the machine was cut.
    pub granularity: DomainGranularity,
    /// The domains, in order of their lowest memory node (then lowest CPU).
    pub domains: Vec<Domain>,
}

impl Domains {
    pub(crate) fn derive(topology: &Topology, granularity: DomainGranularity) -> Result<Self, TopologyError> {
        // (name, cpus) per domain, before memory nodes and distances are attached.
        let mut groups: Vec<(String, CpuSet)> = Vec::new();
        match granularity {
            DomainGranularity::Node => {
                for node in topology.nodes.iter().filter(|n| !n.cpus.is_empty()) {
                    groups.push((format!("node{}", node.id), node.cpus.clone()));
                }
            }
            DomainGranularity::Package => {
                if let Some(cpu) = topology.cpus.iter().find(|c| c.online && c.package.is_none()) {
                    return Err(TopologyError::Unsupported(format!(
                        "per-package domains need package ids, but the kernel reports none for CPU {}",
                        cpu.id
                    )));
                }
                for package in topology.packages() {
                    let cpus = topology.cpus.iter().filter(|c| c.package == Some(package)).map(|c| c.id).collect();
                    groups.push((format!("package{package}"), cpus));
                }
            }
            DomainGranularity::Machine => {
                groups.push(("machine".to_string(), topology.online_cpus()));
            }
            DomainGranularity::L3 => {
                if topology.l3_groups.is_empty() {
                    return Err(TopologyError::Unsupported(
                        "per-L3 domains need a level-3 cache, and this machine reports none".to_string(),
                    ));
                }
                for group in &topology.l3_groups {
                    groups.push((format!("l3-{}", group.id), group.cpus.clone()));
                }
            }
        }

        let mut domains: Vec<Domain> = groups
            .into_iter()
            .map(|(name, cpus)| {
                let memory_nodes: NodeSet =
                    cpus.iter().filter_map(|cpu| topology.cpu(cpu).and_then(|c| c.node)).collect();
                Domain {
                    id: 0,
                    name,
                    allowed_cpus: cpus.intersection(&topology.allowed.cpus),
                    cpus,
                    memory_nodes,
                    local_distance: 0,
                    by_distance: Vec::new(),
                }
            })
            .collect();
        domains.sort_by_key(|d| (d.memory_nodes.first(), d.cpus.first()));
        for (index, domain) in domains.iter_mut().enumerate() {
            domain.id = index as u32;
        }

        let distance = |from: &Domain, to: &Domain| -> Option<u32> {
            from.memory_nodes
                .iter()
                .flat_map(|a| to.memory_nodes.iter().filter_map(move |b| topology.distances.get(a, b)))
                .min()
        };
        let mut distances = vec![vec![0u32; domains.len()]; domains.len()];
        for (i, from) in domains.iter().enumerate() {
            for (j, to) in domains.iter().enumerate() {
                distances[i][j] = if i == j {
                    from.memory_nodes.iter().filter_map(|n| topology.distances.get(n, n)).min()
                } else {
                    distance(from, to)
                }
                .ok_or_else(|| {
                    TopologyError::Inconsistent(format!(
                        "no distance known between domains {} and {}",
                        from.name, to.name
                    ))
                })?;
            }
        }
        for (i, domain) in domains.iter_mut().enumerate() {
            domain.local_distance = distances[i][i];
            let mut others: Vec<DomainNeighbour> = (0..distances.len())
                .filter(|&j| j != i)
                .map(|j| DomainNeighbour { domain: j as u32, distance: distances[i][j] })
                .collect();
            others.sort_by_key(|n| (n.distance, n.domain));
            domain.by_distance = others;
        }
        Ok(Domains { granularity, domains })
    }

    /// The domain with this id.
    pub fn get(&self, id: u32) -> Option<&Domain> {
        self.domains.get(id as usize)
    }

    /// Number of domains.
    pub fn len(&self) -> usize {
        self.domains.len()
    }

    /// Whether there are none (a machine whose only nodes have no CPUs; cannot happen on a running Linux).
    pub fn is_empty(&self) -> bool {
        self.domains.is_empty()
    }

    /// The domain that holds this CPU.
    pub fn domain_of_cpu(&self, cpu: u32) -> Option<&Domain> {
        self.domains.iter().find(|d| d.cpus.contains(cpu))
    }

    /// The domain whose local memory includes this node; `None` for a memory-only node.
    pub fn domain_of_node(&self, node: u32) -> Option<&Domain> {
        self.domains.iter().find(|d| d.memory_nodes.contains(node))
    }

    /// Distance from one domain to another.
    pub fn distance(&self, from: u32, to: u32) -> Option<u32> {
        let domain = self.get(from)?;
        if from == to {
            return Some(domain.local_distance);
        }
        domain.by_distance.iter().find(|n| n.domain == to).map(|n| n.distance)
    }
}
