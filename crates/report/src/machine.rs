//! The machine block every report starts with: a measurement without its machine is not a result.

use numadb_topology::{CacheKind, Topology};
use serde::{Deserialize, Serialize};

/// The facts a measurement is reported with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineBlock {
    /// CPU model name.
    pub cpu_model: String,
    /// Whether the CPU flags say this is a virtual machine (`hypervisor`).
    pub virtual_machine: Option<bool>,
    /// Kernel release.
    pub kernel: String,
    /// Packages, cores, threads, CPUs, nodes, in one line.
    pub topology: String,
    /// Data caches as reported: `L1d 48 KiB, L2 2 MiB, L3 480 MiB (shared by 2 CPUs)`.
    pub caches: String,
    /// Node ids with their CPUs and memory.
    pub nodes: Vec<String>,
    /// The base page size.
    pub page_size_bytes: usize,
    /// The transparent huge page size, if THP exists.
    pub huge_page_size_bytes: Option<u64>,
    /// THP mode (`always`, `madvise`, `never`).
    pub transparent_hugepages: String,
    /// THP defragmentation mode.
    pub transparent_hugepages_defrag: String,
    /// Automatic NUMA balancing.
    pub numa_balancing: String,
    /// This process's allowed CPUs and nodes.
    pub allowed: String,
}

impl MachineBlock {
    /// The block for `topology` (read from `/` for the files it does not cover), with the base page size.
    pub fn new(topology: &Topology, page_size_bytes: usize) -> Self {
        let machine = &topology.machine;
        let read = |path: &str| std::fs::read_to_string(path).ok().map(|s| s.trim().to_string());
        let selected = |text: Option<String>| {
            text.map(|t| {
                t.split_whitespace()
                    .find(|w| w.starts_with('['))
                    .map_or(t.clone(), |w| w.trim_matches(['[', ']']).to_string())
            })
            .unwrap_or_else(|| "unknown".into())
        };
        let caches: Vec<String> = topology
            .caches
            .iter()
            .filter(|c| c.kind != CacheKind::Instruction)
            .filter_map(|c| {
                let size = crate::bytes(c.size_bytes?);
                let kind = if c.kind == CacheKind::Data { "d" } else { "" };
                let shared = if c.cpus_per_instance > 1 {
                    format!(" (shared by {} CPUs)", c.cpus_per_instance)
                } else {
                    String::new()
                };
                Some(format!("L{}{kind} {size}{shared}", c.level))
            })
            .collect();
        let cpuinfo = read("/proc/cpuinfo");
        MachineBlock {
            cpu_model: machine.cpu_model.clone().unwrap_or_else(|| "unknown CPU".into()),
            virtual_machine: cpuinfo.map(|text| {
                text.lines().any(|l| l.starts_with("flags") && l.split_whitespace().any(|f| f == "hypervisor"))
            }),
            kernel: machine.kernel_release.clone().unwrap_or_else(|| "unknown".into()),
            topology: format!(
                "{} package(s), {} core(s), {} thread(s) per core, {} CPU(s) online, {} NUMA node(s)",
                topology.package_count(),
                topology.core_count(),
                topology.threads_per_core(),
                topology.online_cpus().len(),
                topology.nodes.len()
            ),
            caches: if caches.is_empty() { "not reported".into() } else { caches.join(", ") },
            nodes: topology
                .nodes
                .iter()
                .map(|n| format!("node {}: CPUs {}, {}", n.id, n.cpus, crate::bytes(n.memory_bytes)))
                .collect(),
            page_size_bytes,
            huge_page_size_bytes: read("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
                .and_then(|s| s.parse().ok()),
            transparent_hugepages: machine.transparent_hugepages.clone().unwrap_or_else(|| "unknown".into()),
            transparent_hugepages_defrag: selected(read("/sys/kernel/mm/transparent_hugepage/defrag")),
            numa_balancing: machine.numa_balancing.map_or("unknown".into(), |on| if on { "on" } else { "off" }.into()),
            allowed: format!("CPUs {}, memory nodes {}", topology.allowed.cpus, topology.allowed.nodes),
        }
    }

    /// (label, value) pairs, in display order.
    pub fn rows(&self) -> Vec<(String, String)> {
        let mut rows = vec![
            ("CPU".to_string(), self.cpu_model.clone()),
            (
                "Platform".to_string(),
                match self.virtual_machine {
                    Some(true) => "virtual machine (the CPU reports a hypervisor)".into(),
                    Some(false) => "bare metal (no hypervisor flag)".into(),
                    None => "unknown".into(),
                },
            ),
            ("Kernel".to_string(), self.kernel.clone()),
            ("Topology".to_string(), self.topology.clone()),
            ("Caches".to_string(), self.caches.clone()),
        ];
        rows.extend(self.nodes.iter().map(|n| ("Node".to_string(), n.clone())));
        rows.push((
            "Pages".to_string(),
            format!(
                "base {}, huge {}; THP {} (defrag {})",
                crate::bytes(self.page_size_bytes as u64),
                self.huge_page_size_bytes.map_or("none".into(), crate::bytes),
                self.transparent_hugepages,
                self.transparent_hugepages_defrag
            ),
        ));
        rows.push(("NUMA balancing".to_string(), self.numa_balancing.clone()));
        rows.push(("Allowed".to_string(), self.allowed.clone()));
        rows
    }

    /// The block as aligned text lines.
    pub fn to_text(&self) -> String {
        self.rows().iter().map(|(label, value)| format!("{label:<15} {value}\n")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numadb_topology::MachineSpec;

    #[test]
    fn the_block_names_the_machine() {
        let topology = MachineSpec::from_json(
            r#"{"name":"t","threads_per_core":2,"nodes":[{"package":0,"cores":1,"memory_mib":512},{"package":0,"cores":0,"memory_mib":256}],"distances":[[10,17],[17,10]]}"#,
        )
        .unwrap()
        .to_topology()
        .unwrap();
        let block = MachineBlock::new(&topology, 4096);
        let text = block.to_text();
        assert!(
            text.contains("1 package(s), 1 core(s), 2 thread(s) per core, 2 CPU(s) online, 2 NUMA node(s)"),
            "{text}"
        );
        assert!(text.contains("node 1: CPUs , 256 MiB") || text.contains("node 1: CPUs"), "{text}");
        assert!(text.contains("base 4 KiB"), "{text}");
        assert!(text.contains("NUMA balancing"));
    }
}
