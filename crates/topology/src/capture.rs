//! Capturing a machine's topology files into a fixture tree.
//!
//! `numadb topo --capture DIR` copies every file the reader opened to `DIR`, preserving paths, plus the "mask
//! twins" of the lists it read (`cpumap` beside `cpulist`, `shared_cpu_map` beside `shared_cpu_list`, …), which
//! hwloc reads instead. The tree reads back to the same topology, and hwloc reads it too (`HWLOC_FSROOT=DIR`), which
//! is how the cross-check tests compare our reader with hwloc's on machines we do not have. That is how the
//! repository's fixture of a one-node VM was made, and how a user can send us a machine.

use std::path::{Path, PathBuf};

use crate::{Topology, TopologyError, sysfs};

/// Reads the topology below `source_root` and copies the files it depends on below `destination`.
pub fn capture(source_root: &Path, destination: &Path) -> Result<Topology, TopologyError> {
    let mut read: Vec<PathBuf> = Vec::new();
    let topology = sysfs::read(source_root, &mut read)?;
    let twins: Vec<PathBuf> = read
        .iter()
        .flat_map(|relative| {
            let name = relative.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let parent = relative.parent().map(Path::to_path_buf).unwrap_or_default();
            twin_names(name).iter().map(move |twin| parent.join(twin))
        })
        .filter(|twin| source_root.join(twin).is_file())
        .collect();
    read.extend(twins);
    read.sort();
    read.dedup();
    for relative in &read {
        let target = destination.join(relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| TopologyError::Read { path: parent.to_path_buf(), reason: source })?;
        }
        let contents = std::fs::read(source_root.join(relative))
            .map_err(|source| TopologyError::Read { path: source_root.join(relative), reason: source })?;
        std::fs::write(&target, contents)
            .map_err(|source| TopologyError::Read { path: target.clone(), reason: source })?;
    }
    Ok(topology)
}

/// Files that hwloc reads where our reader reads `name`.
fn twin_names(name: &str) -> &'static [&'static str] {
    match name {
        "cpulist" => &["cpumap"],
        "thread_siblings_list" => {
            &["thread_siblings", "core_cpus", "cluster_cpus", "core_siblings", "package_cpus", "die_cpus"]
        }
        "shared_cpu_list" => &["shared_cpu_map", "id"],
        "online" => &["possible"],
        _ => &[],
    }
}
