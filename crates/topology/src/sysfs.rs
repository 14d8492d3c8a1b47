//! Reading a topology from a `sys/` + `proc/` tree.
//!
//! The files read, all relative to the root:
//! - `sys/devices/system/cpu/{present,online}` and, per online CPU, `cpuN/topology/{physical_package_id,die_id,
//!   core_id,thread_siblings_list}` and `cpuN/cache/index*/{level,type,size,shared_cpu_list,coherency_line_size}`;
//! - `sys/devices/system/node/online` and, per online node, `nodeN/{cpulist,distance,meminfo}` (a kernel built
//!   without NUMA has no `node/` directory: the machine is then one node holding every CPU and `MemTotal`);
//! - `proc/self/status` for `Cpus_allowed_list` and `Mems_allowed_list`;
//! - optionally `proc/cpuinfo`, `proc/sys/kernel/{osrelease,numa_balancing}` and
//!   `sys/kernel/mm/transparent_hugepage/enabled`, which only describe the machine.
//!
//! An offline CPU loses its `topology/` and `cache/` directories and leaves its node's `cpulist`; it is recorded as
//! present but offline, with no node, package or core.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::{
    Allowed, CacheKind, CacheLevel, Cpu, CpuSet, DistanceMatrix, IdKind, IdSet, L3Group, MachineInfo, Node, NodeSet,
    Topology, TopologyError,
};

/// Receives the path (relative to the root) of every file the reader opened, so that [`crate::capture`] can copy
/// exactly what a topology depends on.
pub(crate) trait ReadLog {
    fn record(&mut self, relative: &Path);
}

pub(crate) struct NoLog;
impl ReadLog for NoLog {
    fn record(&mut self, _relative: &Path) {}
}

impl ReadLog for Vec<PathBuf> {
    fn record(&mut self, relative: &Path) {
        self.push(relative.to_path_buf());
    }
}

const CPU_DIR: &str = "sys/devices/system/cpu";
const NODE_DIR: &str = "sys/devices/system/node";

struct Reader<'a> {
    root: &'a Path,
    log: &'a mut dyn ReadLog,
}

impl Reader<'_> {
    fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// Reads a file that must exist.
    fn read(&mut self, relative: &str) -> Result<String, TopologyError> {
        self.read_optional(relative)?.ok_or_else(|| TopologyError::Read {
            path: self.path(relative),
            reason: std::io::Error::new(ErrorKind::NotFound, "no such file"),
        })
    }

    /// Reads a file that may be absent; any other failure is an error.
    fn read_optional(&mut self, relative: &str) -> Result<Option<String>, TopologyError> {
        let path = self.path(relative);
        match std::fs::read(&path) {
            Ok(bytes) => {
                self.log.record(Path::new(relative));
                String::from_utf8(bytes)
                    .map(Some)
                    .map_err(|_| TopologyError::malformed(&path, "file is not UTF-8 text"))
            }
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(source) => Err(TopologyError::Read { path, reason: source }),
        }
    }

    fn exists(&self, relative: &str) -> bool {
        self.path(relative).exists()
    }

    fn read_set<K: IdKind>(&mut self, relative: &str) -> Result<IdSet<K>, TopologyError> {
        let text = self.read(relative)?;
        IdSet::parse_list(&text).map_err(|error| TopologyError::malformed(self.path(relative), error.to_string()))
    }

    fn read_u32(&mut self, relative: &str) -> Result<u32, TopologyError> {
        let text = self.read(relative)?;
        parse_number(&text).ok_or_else(|| {
            TopologyError::malformed(
                self.path(relative),
                format!("expected a non-negative integer, found {:?}", text.trim()),
            )
        })
    }

    /// Reads an id that the kernel writes as -1 when unknown (`physical_package_id` in some VMs).
    fn read_optional_id(&mut self, relative: &str) -> Result<Option<u32>, TopologyError> {
        let Some(text) = self.read_optional(relative)? else { return Ok(None) };
        let value: i64 = text.trim().parse().map_err(|_| {
            TopologyError::malformed(self.path(relative), format!("expected an integer, found {:?}", text.trim()))
        })?;
        if value < 0 {
            return Ok(None);
        }
        u32::try_from(value)
            .map(Some)
            .map_err(|_| TopologyError::malformed(self.path(relative), format!("id {value} is out of range")))
    }

    /// Names of the entries of a directory that match `prefix` followed by a number, with that number, sorted.
    fn numbered_entries(&self, relative: &str, prefix: &str) -> Result<Vec<u32>, TopologyError> {
        let path = self.path(relative);
        let entries = match std::fs::read_dir(&path) {
            Ok(entries) => entries,
            Err(error) if error.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(TopologyError::Read { path, reason: source }),
        };
        let mut numbers = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| TopologyError::Read { path: path.clone(), reason: source })?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(number) = name.strip_prefix(prefix).and_then(|rest| rest.parse::<u32>().ok()) {
                numbers.push(number);
            }
        }
        numbers.sort_unstable();
        Ok(numbers)
    }
}

fn parse_number(text: &str) -> Option<u32> {
    text.trim().parse().ok()
}

/// Parses a sysfs cache size such as `48K`, `2048K` or `1M`.
fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let (digits, multiplier) = match text.chars().last()? {
        'K' => (&text[..text.len() - 1], 1u64 << 10),
        'M' => (&text[..text.len() - 1], 1 << 20),
        'G' => (&text[..text.len() - 1], 1 << 30),
        _ => (text, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(multiplier)
}

/// What one online CPU's own files say.
struct CpuFiles {
    package: Option<u32>,
    die: Option<u32>,
    core_id: Option<u32>,
    smt_siblings: CpuSet,
    caches: Vec<CacheFiles>,
}

struct CacheFiles {
    level: u8,
    kind: CacheKind,
    size_bytes: Option<u64>,
    line_size_bytes: Option<u32>,
    shared_cpus: CpuSet,
}

pub(crate) fn read(root: &Path, log: &mut dyn ReadLog) -> Result<Topology, TopologyError> {
    let mut reader = Reader { root, log };

    let present_path = format!("{CPU_DIR}/present");
    let present: CpuSet = if reader.exists(&present_path) {
        reader.read_set(&present_path)?
    } else {
        reader.read_set(&format!("{CPU_DIR}/possible"))?
    };
    let online: CpuSet = reader.read_set(&format!("{CPU_DIR}/online"))?;
    if !online.is_subset(&present) {
        return Err(TopologyError::Inconsistent(format!(
            "{} lists CPUs {} online that {} does not list as present",
            reader.path(&format!("{CPU_DIR}/online")).display(),
            online.difference(&present),
            reader.path(&present_path).display()
        )));
    }
    if online.is_empty() {
        return Err(TopologyError::malformed(reader.path(&format!("{CPU_DIR}/online")), "no CPU is online"));
    }

    let mut cpu_files: BTreeMap<u32, CpuFiles> = BTreeMap::new();
    for cpu in online.iter() {
        cpu_files.insert(cpu, read_cpu(&mut reader, cpu)?);
    }

    let (nodes, distances) = read_nodes(&mut reader, &online)?;

    // Each online CPU in at most one node.
    let mut node_of_cpu: BTreeMap<u32, u32> = BTreeMap::new();
    for node in &nodes {
        for cpu in node.cpus.iter() {
            if let Some(other) = node_of_cpu.insert(cpu, node.id) {
                return Err(TopologyError::Inconsistent(format!(
                    "CPU {cpu} is listed in both node {other} and node {}",
                    node.id
                )));
            }
        }
    }

    // Machine-wide core numbers, in order of (package, die, core_id).
    let mut core_keys: Vec<(Option<u32>, Option<u32>, u32)> =
        cpu_files.values().filter_map(|f| f.core_id.map(|core| (f.package, f.die, core))).collect();
    core_keys.sort_unstable();
    core_keys.dedup();

    // L3 groups: distinct shared_cpu_list sets of level-3 caches, numbered in order of their lowest CPU.
    let mut l3_sets: Vec<(CpuSet, Option<u64>)> = Vec::new();
    for files in cpu_files.values() {
        for cache in files.caches.iter().filter(|c| c.level == 3 && c.kind != CacheKind::Instruction) {
            let shared = cache.shared_cpus.intersection(&online);
            if !l3_sets.iter().any(|(set, _)| *set == shared) {
                l3_sets.push((shared, cache.size_bytes));
            }
        }
    }
    l3_sets.sort_by_key(|(set, _)| set.first());
    for (index, (set, _)) in l3_sets.iter().enumerate() {
        if let Some((other, _)) = l3_sets[index + 1..].iter().find(|(other, _)| !other.intersection(set).is_empty()) {
            return Err(TopologyError::Inconsistent(format!(
                "level-3 caches overlap without being equal: CPUs {set} and {other}"
            )));
        }
    }
    let l3_groups: Vec<L3Group> = l3_sets
        .into_iter()
        .enumerate()
        .map(|(id, (cpus, size_bytes))| L3Group { id: id as u32, cpus, size_bytes })
        .collect();

    let mut cpus = Vec::with_capacity(present.len());
    for id in present.iter() {
        let Some(files) = cpu_files.get(&id) else {
            cpus.push(Cpu {
                id,
                online: false,
                node: None,
                package: None,
                die: None,
                core_id: None,
                core: None,
                smt_siblings: CpuSet::new(),
                l3_group: None,
            });
            continue;
        };
        let core = files
            .core_id
            .and_then(|core_id| core_keys.binary_search(&(files.package, files.die, core_id)).ok())
            .map(|index| index as u32);
        cpus.push(Cpu {
            id,
            online: true,
            node: node_of_cpu.get(&id).copied(),
            package: files.package,
            die: files.die,
            core_id: files.core_id,
            core,
            smt_siblings: files.smt_siblings.intersection(&online),
            l3_group: l3_groups.iter().find(|group| group.cpus.contains(id)).map(|group| group.id),
        });
    }

    let first_cpu = online.first().expect("online is not empty; checked above");
    let caches = cpu_files[&first_cpu]
        .caches
        .iter()
        .map(|cache| CacheLevel {
            level: cache.level,
            kind: cache.kind,
            size_bytes: cache.size_bytes,
            line_size_bytes: cache.line_size_bytes,
            cpus_per_instance: cache.shared_cpus.intersection(&online).len().max(1) as u32,
        })
        .collect();

    let allowed = read_allowed(&mut reader, &online, &nodes)?;
    let machine = read_machine_info(&mut reader)?;

    Ok(Topology { source: root.display().to_string(), machine, nodes, cpus, distances, l3_groups, caches, allowed })
}

fn read_cpu(reader: &mut Reader<'_>, cpu: u32) -> Result<CpuFiles, TopologyError> {
    let dir = format!("{CPU_DIR}/cpu{cpu}");
    if !reader.exists(&dir) {
        return Err(TopologyError::Read {
            path: reader.path(&dir),
            reason: std::io::Error::new(ErrorKind::NotFound, "CPU is listed online but has no directory"),
        });
    }
    let package = reader.read_optional_id(&format!("{dir}/topology/physical_package_id"))?;
    let die = reader.read_optional_id(&format!("{dir}/topology/die_id"))?;
    let core_id = Some(reader.read_u32(&format!("{dir}/topology/core_id"))?);
    let siblings_path = format!("{dir}/topology/thread_siblings_list");
    let smt_siblings: CpuSet = if reader.exists(&siblings_path) {
        reader.read_set(&siblings_path)?
    } else {
        reader.read_set(&format!("{dir}/topology/core_cpus_list"))?
    };
    if !smt_siblings.contains(cpu) {
        return Err(TopologyError::malformed(
            reader.path(&siblings_path),
            format!("CPU {cpu}'s SMT sibling list {smt_siblings} does not contain CPU {cpu}"),
        ));
    }

    let mut caches = Vec::new();
    for index in reader.numbered_entries(&format!("{dir}/cache"), "index")? {
        let cache_dir = format!("{dir}/cache/index{index}");
        let level_path = format!("{cache_dir}/level");
        let level = reader.read_u32(&level_path)?;
        let level = u8::try_from(level).ok().filter(|&l| (1..=8).contains(&l)).ok_or_else(|| {
            TopologyError::malformed(reader.path(&level_path), format!("cache level {level} is not 1-8"))
        })?;
        let type_path = format!("{cache_dir}/type");
        let kind = match reader.read(&type_path)?.trim() {
            "Data" => CacheKind::Data,
            "Instruction" => CacheKind::Instruction,
            "Unified" => CacheKind::Unified,
            other => {
                return Err(TopologyError::malformed(
                    reader.path(&type_path),
                    format!("unknown cache type {other:?} (expected Data, Instruction or Unified)"),
                ));
            }
        };
        let size_path = format!("{cache_dir}/size");
        let size_bytes = match reader.read_optional(&size_path)? {
            Some(text) => Some(parse_size(&text).ok_or_else(|| {
                TopologyError::malformed(
                    reader.path(&size_path),
                    format!("expected a size such as 48K, found {:?}", text.trim()),
                )
            })?),
            None => None,
        };
        let line_path = format!("{cache_dir}/coherency_line_size");
        let line_size_bytes = match reader.read_optional(&line_path)? {
            Some(text) => Some(parse_number(&text).ok_or_else(|| {
                TopologyError::malformed(
                    reader.path(&line_path),
                    format!("expected a byte count, found {:?}", text.trim()),
                )
            })?),
            None => None,
        };
        let shared_cpus = reader.read_set(&format!("{cache_dir}/shared_cpu_list"))?;
        caches.push(CacheFiles { level, kind, size_bytes, line_size_bytes, shared_cpus });
    }
    caches.sort_by_key(|c| (c.level, c.kind != CacheKind::Data));
    Ok(CpuFiles { package, die, core_id, smt_siblings, caches })
}

fn read_nodes(reader: &mut Reader<'_>, online_cpus: &CpuSet) -> Result<(Vec<Node>, DistanceMatrix), TopologyError> {
    if !reader.exists(NODE_DIR) {
        // A kernel without CONFIG_NUMA: one node with everything.
        let meminfo = reader.read("proc/meminfo")?;
        let memory_bytes = parse_meminfo_total(&meminfo, "MemTotal:")
            .ok_or_else(|| TopologyError::malformed(reader.path("proc/meminfo"), "no MemTotal line"))?;
        let nodes = vec![Node { id: 0, cpus: online_cpus.clone(), memory_bytes }];
        let distances = DistanceMatrix { nodes: vec![0], rows: vec![vec![crate::LOCAL_DISTANCE]] };
        return Ok((nodes, distances));
    }
    let online_nodes: NodeSet = reader.read_set(&format!("{NODE_DIR}/online"))?;
    if online_nodes.is_empty() {
        return Err(TopologyError::malformed(reader.path(&format!("{NODE_DIR}/online")), "no node is online"));
    }
    let mut nodes = Vec::new();
    let mut rows = Vec::new();
    for id in online_nodes.iter() {
        let dir = format!("{NODE_DIR}/node{id}");
        let cpulist: CpuSet = reader.read_set(&format!("{dir}/cpulist"))?;
        let meminfo_path = format!("{dir}/meminfo");
        let meminfo = reader.read(&meminfo_path)?;
        let memory_bytes = parse_meminfo_total(&meminfo, &format!("Node {id} MemTotal:")).ok_or_else(|| {
            TopologyError::malformed(reader.path(&meminfo_path), format!("no \"Node {id} MemTotal: <n> kB\" line"))
        })?;
        let distance_path = format!("{dir}/distance");
        let distance_text = reader.read(&distance_path)?;
        let row: Vec<u32> = distance_text
            .split_whitespace()
            .map(|word| {
                parse_number(word).filter(|&d| d > 0 && d <= 255).ok_or_else(|| {
                    TopologyError::malformed(reader.path(&distance_path), format!("{word:?} is not a distance (1-255)"))
                })
            })
            .collect::<Result<_, _>>()?;
        if row.len() != online_nodes.len() {
            return Err(TopologyError::malformed(
                reader.path(&distance_path),
                format!("has {} distances but {} nodes are online ({online_nodes})", row.len(), online_nodes.len()),
            ));
        }
        nodes.push(Node { id, cpus: cpulist.intersection(online_cpus), memory_bytes });
        rows.push(row);
    }
    Ok((nodes, DistanceMatrix { nodes: online_nodes.ids().to_vec(), rows }))
}

/// Finds `prefix <n> kB` in a meminfo file and returns bytes.
fn parse_meminfo_total(text: &str, prefix: &str) -> Option<u64> {
    let line = text.lines().find(|line| line.trim_start().starts_with(prefix))?;
    let rest = line.trim_start()[prefix.len()..].trim();
    let kib: u64 = rest.strip_suffix("kB").unwrap_or(rest).trim().parse().ok()?;
    kib.checked_mul(1024)
}

fn read_allowed(reader: &mut Reader<'_>, online_cpus: &CpuSet, nodes: &[Node]) -> Result<Allowed, TopologyError> {
    let status_path = "proc/self/status";
    let status = reader.read(status_path)?;
    let field = |name: &str| -> Option<&str> {
        status.lines().find_map(|line| line.strip_prefix(name).and_then(|rest| rest.strip_prefix(':')))
    };
    let cpus_text = field("Cpus_allowed_list")
        .ok_or_else(|| TopologyError::malformed(reader.path(status_path), "no Cpus_allowed_list line"))?;
    let cpus = CpuSet::parse_list(cpus_text)
        .map_err(|error| TopologyError::malformed(reader.path(status_path), format!("Cpus_allowed_list: {error}")))?;
    let nodes_text = field("Mems_allowed_list")
        .ok_or_else(|| TopologyError::malformed(reader.path(status_path), "no Mems_allowed_list line"))?;
    let allowed_nodes = NodeSet::parse_list(nodes_text)
        .map_err(|error| TopologyError::malformed(reader.path(status_path), format!("Mems_allowed_list: {error}")))?;
    // The kernel's masks cover possible ids; keep only what exists.
    let existing_nodes: NodeSet = nodes.iter().map(|n| n.id).collect();
    Ok(Allowed { cpus: cpus.intersection(online_cpus), nodes: allowed_nodes.intersection(&existing_nodes) })
}

fn read_machine_info(reader: &mut Reader<'_>) -> Result<MachineInfo, TopologyError> {
    let cpu_model = reader.read_optional("proc/cpuinfo")?.and_then(|text| {
        text.lines()
            .find(|line| line.starts_with("model name") || line.starts_with("Model") || line.starts_with("cpu model"))
            .and_then(|line| line.split_once(':'))
            .map(|(_, value)| value.trim().to_string())
    });
    let kernel_release = reader.read_optional("proc/sys/kernel/osrelease")?.map(|t| t.trim().to_string());
    let transparent_hugepages = reader.read_optional("sys/kernel/mm/transparent_hugepage/enabled")?.and_then(|text| {
        let start = text.find('[')?;
        let end = text[start..].find(']')? + start;
        Some(text[start + 1..end].to_string())
    });
    let numa_balancing = reader
        .read_optional("proc/sys/kernel/numa_balancing")?
        .and_then(|t| t.trim().parse::<u32>().ok())
        .map(|v| v != 0);
    Ok(MachineInfo { cpu_model, kernel_release, transparent_hugepages, numa_balancing })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("48K"), Some(48 << 10));
        assert_eq!(parse_size("2048K\n"), Some(2 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("64"), Some(64));
        assert_eq!(parse_size("K"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999999999999G"), None);
    }

    #[test]
    fn meminfo_parses() {
        let text = "Node 1 MemTotal:        4417312 kB\nNode 1 MemFree: 1 kB\n";
        assert_eq!(parse_meminfo_total(text, "Node 1 MemTotal:"), Some(4417312 * 1024));
        assert_eq!(parse_meminfo_total(text, "Node 0 MemTotal:"), None);
    }
}
