//! `numadb topo`: what numadb reads about this machine, for people (a summary) and for programs (`--json`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use numadb_topology::{CacheKind, DomainGranularity, Domains, TOPOLOGY_SCHEMA_VERSION, Topology};
use schemars::JsonSchema;
use serde::Serialize;

use crate::format;

/// Show the machine's NUMA topology: nodes, CPUs, memory, SMT, L3 groups, distances and scheduling domains.
///
/// numadb reads everything from sysfs and /proc, so `--root` can point it at a copy of another machine's files
/// (a fixture tree, or one made with `--capture`). Domains are what the scheduler works with: by default one per
/// NUMA node that has CPUs; `--domains package` treats each socket as one domain (as if SNC/NPS were off),
/// `--domains l3` makes one domain per group of CPUs sharing an L3 cache, and `--domains machine` one domain for
/// everything (a NUMA-unaware baseline).
///
/// The JSON document (`--json`) is described by the schema `--json-schema` prints; its `schema_version` changes
/// only when a field changes meaning or disappears.
#[derive(Args, Debug)]
pub struct TopoArgs {
    /// Read the machine below this directory instead of `/` (it must contain `sys/` and `proc/`).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Print the topology as one JSON document instead of the summary.
    #[arg(long, conflicts_with_all = ["json_schema", "capture"])]
    json: bool,
    /// Print the JSON Schema of the `--json` document and exit.
    #[arg(long)]
    json_schema: bool,
    /// Which domains to show in the summary: node, package, l3 or machine (the JSON has all of them).
    #[arg(long, value_name = "GRANULARITY", default_value = "node")]
    domains: DomainGranularity,
    /// Also list every CPU with its node, package, core, SMT siblings and L3 group.
    #[arg(long)]
    cpus: bool,
    /// Copy the sysfs and /proc files the topology is read from into DIR (a fixture tree), then print the summary.
    #[arg(long, value_name = "DIR")]
    capture: Option<PathBuf>,
}

/// The document `numadb topo --json` prints.
#[derive(Serialize, JsonSchema)]
pub struct TopoDocument {
    /// Version of this document's layout.
    pub schema_version: u32,
    /// The machine as read.
    pub topology: Topology,
    /// Domains at every granularity; `null` where the machine cannot provide it (no L3, no package ids).
    pub domains: BTreeMap<String, Option<Domains>>,
}

impl TopoDocument {
    pub fn new(topology: Topology) -> Self {
        let domains =
            DomainGranularity::ALL.iter().map(|&g| (g.name().to_string(), topology.domains(g).ok())).collect();
        Self { schema_version: TOPOLOGY_SCHEMA_VERSION, topology, domains }
    }
}

pub fn run(args: TopoArgs) -> anyhow::Result<()> {
    if args.json_schema {
        let schema = schemars::schema_for!(TopoDocument);
        outln!("{}", serde_json::to_string_pretty(&schema)?);
        return Ok(());
    }
    let topology = match &args.capture {
        Some(destination) => {
            let topology = numadb_topology::capture(&args.root, destination)
                .with_context(|| format!("capturing the topology below {}", args.root.display()))?;
            eprintln!("captured the topology files into {}", destination.display());
            topology
        }
        None => Topology::from_root(&args.root)
            .with_context(|| format!("reading the topology below {}", args.root.display()))?,
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&TopoDocument::new(topology))?);
        return Ok(());
    }
    let domains = topology.domains(args.domains)?;
    out!("{}", summary(&topology, &domains, args.cpus));
    Ok(())
}

/// The human-readable summary.
pub fn summary(topology: &Topology, domains: &Domains, list_cpus: bool) -> String {
    let mut out = String::new();
    let machine = &topology.machine;
    let online = topology.online_cpus();
    out.push_str(&format!(
        "Machine   {}\nKernel    {}   transparent huge pages: {}   automatic NUMA balancing: {}\nSource    {}\n",
        machine.cpu_model.as_deref().unwrap_or("unknown CPU"),
        machine.kernel_release.as_deref().unwrap_or("unknown"),
        machine.transparent_hugepages.as_deref().unwrap_or("unknown"),
        machine.numa_balancing.map_or("unknown", |on| if on { "on" } else { "off" }),
        topology.source,
    ));
    let offline: Vec<u32> = topology.cpus.iter().filter(|c| !c.online).map(|c| c.id).collect();
    let memory_only = topology.nodes.iter().filter(|n| n.cpus.is_empty()).count();
    out.push_str(&format!(
        "Shape     {} package(s), {} core(s), {} thread(s) per core, {} CPU(s) online{}; {} node(s){}; {} L3 group(s)\n",
        topology.package_count(),
        topology.core_count(),
        topology.threads_per_core(),
        online.len(),
        if offline.is_empty() {
            String::new()
        } else {
            format!(" ({} offline: {})", offline.len(), offline.iter().copied().collect::<numadb_topology::CpuSet>())
        },
        topology.nodes.len(),
        if memory_only > 0 { format!(" ({memory_only} without CPUs)") } else { String::new() },
        topology.l3_groups.len(),
    ));
    out.push_str(&format!("Allowed   CPUs {}   memory nodes {}\n", topology.allowed.cpus, topology.allowed.nodes));

    out.push_str("\nNodes\n");
    let mut rows = vec![vec!["node".into(), "cpus".into(), "memory".into(), "packages".into()]];
    for node in &topology.nodes {
        let mut packages: Vec<u32> = node.cpus.iter().filter_map(|c| topology.cpu(c).and_then(|c| c.package)).collect();
        packages.sort_unstable();
        packages.dedup();
        rows.push(vec![
            node.id.to_string(),
            if node.cpus.is_empty() { "(memory only)".into() } else { node.cpus.to_string() },
            format::bytes(node.memory_bytes),
            packages.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
        ]);
    }
    out.push_str(&format::table(&rows));

    out.push_str("\nDistances (SLIT, row = from, column = to)\n");
    let mut rows =
        vec![std::iter::once(String::new()).chain(topology.distances.nodes.iter().map(|n| n.to_string())).collect()];
    for (node, row) in topology.distances.nodes.iter().zip(&topology.distances.rows) {
        rows.push(std::iter::once(node.to_string()).chain(row.iter().map(|d| d.to_string())).collect());
    }
    out.push_str(&format::table(&rows));
    if !topology.distances.is_symmetric() {
        out.push_str("  (asymmetric: the distance depends on the direction)\n");
    }

    if !topology.caches.is_empty() {
        out.push_str("\nCaches (seen from the first online CPU)\n");
        let mut rows = vec![vec!["level".into(), "size".into(), "shared by".into()]];
        for cache in &topology.caches {
            let kind = match cache.kind {
                CacheKind::Data => "d",
                CacheKind::Instruction => "i",
                CacheKind::Unified => "",
            };
            rows.push(vec![
                format!("L{}{kind}", cache.level),
                cache.size_bytes.map_or("?".into(), format::bytes),
                format!("{} CPU(s)", cache.cpus_per_instance),
            ]);
        }
        out.push_str(&format::table(&rows));
    }
    if !topology.l3_groups.is_empty() {
        out.push_str("\nL3 groups\n");
        let mut rows = vec![vec!["group".into(), "cpus".into(), "size".into()]];
        for group in &topology.l3_groups {
            rows.push(vec![
                group.id.to_string(),
                group.cpus.to_string(),
                group.size_bytes.map_or("?".into(), format::bytes),
            ]);
        }
        out.push_str(&format::table(&rows));
    }
    if topology.threads_per_core() > 1 {
        let mut pairs: Vec<String> = Vec::new();
        for cpu in topology.cpus.iter().filter(|c| c.online && c.smt_siblings.first() == Some(c.id)) {
            pairs.push(cpu.smt_siblings.iter().map(|c| c.to_string()).collect::<Vec<_>>().join("+"));
        }
        let shown = pairs.len().min(8);
        out.push_str(&format!(
            "\nSMT siblings  {}{}\n",
            pairs[..shown].join("  "),
            if pairs.len() > shown {
                format!("  … ({} cores; --cpus lists all)", pairs.len())
            } else {
                String::new()
            }
        ));
    }

    out.push_str(&format!("\nDomains (per {})\n", domains.granularity.name()));
    let mut rows = vec![vec![
        "domain".into(),
        "name".into(),
        "cpus".into(),
        "memory nodes".into(),
        "other domains by distance".into(),
    ]];
    for domain in &domains.domains {
        // Group the other domains by distance: `1 @11 · 2-3 @21`.
        let mut neighbours: Vec<String> = Vec::new();
        for group in domain.by_distance.chunk_by(|a, b| a.distance == b.distance) {
            let ids: numadb_topology::CpuSet = group.iter().map(|n| n.domain).collect();
            neighbours.push(format!("{} @{}", ids.to_list_string(), group[0].distance));
        }
        rows.push(vec![
            domain.id.to_string(),
            domain.name.clone(),
            domain.cpus.to_string(),
            domain.memory_nodes.to_string(),
            if neighbours.is_empty() { "-".into() } else { neighbours.join(" · ") },
        ]);
    }
    out.push_str(&format::table(&rows));

    if list_cpus {
        out.push_str("\nCPUs\n");
        let mut rows = vec![vec![
            "cpu".into(),
            "online".into(),
            "node".into(),
            "package".into(),
            "die".into(),
            "core_id".into(),
            "core".into(),
            "smt siblings".into(),
            "l3".into(),
        ]];
        let show = |value: Option<u32>| value.map_or("-".to_string(), |v| v.to_string());
        for cpu in &topology.cpus {
            rows.push(vec![
                cpu.id.to_string(),
                if cpu.online { "yes".into() } else { "no".into() },
                show(cpu.node),
                show(cpu.package),
                show(cpu.die),
                show(cpu.core_id),
                show(cpu.core),
                if cpu.online { cpu.smt_siblings.to_string() } else { "-".into() },
                show(cpu.l3_group),
            ]);
        }
        out.push_str(&format::table(&rows));
    }
    out
}
