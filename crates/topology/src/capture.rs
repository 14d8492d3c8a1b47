//! Capturing a machine's topology files into a fixture tree.
//!
//! `numadb topo --capture DIR` copies every file the reader opened, and nothing else, to `DIR`, preserving paths.
//! The tree reads back to the same topology; that is how the repository's fixture of a one-node VM was made, and
//! how a user can send us a machine we do not have.

use std::path::{Path, PathBuf};

use crate::{Topology, TopologyError, sysfs};

/// Reads the topology below `source_root` and copies the files it depends on below `destination`.
pub fn capture(source_root: &Path, destination: &Path) -> Result<Topology, TopologyError> {
    let mut read: Vec<PathBuf> = Vec::new();
    let topology = sysfs::read(source_root, &mut read)?;
    read.sort();
    read.dedup();
    for relative in &read {
        let target = destination.join(relative);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| TopologyError::Read { path: parent.to_path_buf(), source })?;
        }
        let contents = std::fs::read(source_root.join(relative))
            .map_err(|source| TopologyError::Read { path: source_root.join(relative), source })?;
        std::fs::write(&target, contents).map_err(|source| TopologyError::Read { path: target.clone(), source })?;
    }
    Ok(topology)
}
