use std::path::PathBuf;

/// Why a topology could not be read or derived. Every variant that comes from a file names the file, so a user
/// whose machine exposes something unexpected can see exactly which sysfs entry to look at.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// A file the reader needs is missing or unreadable.
    #[error("cannot read {}: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The operating system's reason (part of the message, so not also a `source`).
        reason: std::io::Error,
    },
    /// A file exists but its contents are not what the kernel writes there.
    #[error("{}: {message}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The files are individually fine but contradict each other (a CPU in two nodes, a distance row of the wrong
    /// length, …).
    #[error("inconsistent topology: {0}")]
    Inconsistent(String),
    /// A derived view was asked for that this machine cannot provide (per-L3 domains on a machine without an L3).
    #[error("{0}")]
    Unsupported(String),
    /// A machine description (spec) is not a machine that can exist.
    #[error("invalid machine description: {0}")]
    InvalidSpec(String),
}

impl TopologyError {
    pub(crate) fn malformed(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Malformed { path: path.into(), message: message.into() }
    }
}
