//! numadb's memory prober: latency and bandwidth between every CPU domain and every memory node, measured with
//! the rigour of Intel's Memory Latency Checker, on any Linux machine.
//!
//! # Why a prober inside a database
//! Every NUMA result of the thesis numadb follows (§4, tables 1–8) is explained by two matrices measured before
//! any query ran: load latency and streaming bandwidth from each CPU domain to each memory node. MLC makes them on
//! Intel only and is closed; multichase, lmbench and STREAM each do one part. This crate does all of it with
//! hand-written kernels whose every figure can be traced to its samples.
//!
//! # Layout: data plane and control plane
//! - Data plane, the hot loops, standalone functions of primitive arguments: [`chain`] (the pointer chase and
//!   the chains it follows), [`kernels`] (read/copy/add/write streaming kernels with AVX-512, AVX2 and portable
//!   variants chosen at run time), [`clock`] (a dependent-add delay and core-frequency estimate).
//! - Measurement, which pins threads, places buffers and takes samples: [`latency`] and [`bandwidth`] (the
//!   matrices), [`loaded`] (latency under injected load), [`cache`] (the working-set curve).
//! - Control plane, which decides what to measure: [`matrix`] (the axes), [`plan`] (defaults from the topology,
//!   fitting a run into a budget), [`peers`] (likwid-bench in the same run, cross-checks), [`stats`] (medians,
//!   spreads and the disagreement flag), [`verify`] (page locations and CPU witnesses), [`quiet`] (how much CPU
//!   time the rest of the machine took meanwhile).
//!
//! # Methodology, in one place
//! Warm-up sample discarded; `repetitions` samples of a fixed duration; the median reported with min, max and
//! spread, flagged when repetitions disagree by more than 10%. Each measuring thread is pinned to one CPU and
//! `getcpu` is read before and after every sample: a sample whose thread was elsewhere is discarded and counted.
//! Each buffer is bound to its node with `mbind` and the kernel is asked where every page is (`move_pages`): a
//! cell whose buffer is not verified on its node says so. Nothing in this crate asserts a timing in its tests.
//!
//! Invariant: this crate makes no NUMA or affinity system call itself; it asks `numadb-placement` to place, pin
//! and locate.

pub mod bandwidth;
pub mod cache;
pub mod chain;
pub mod clock;
pub mod kernels;
pub mod latency;
pub mod loaded;
pub mod matrix;
pub mod peers;
pub mod plan;
pub mod quiet;
mod rng;
pub mod spans;
pub mod stats;
pub mod verify;

use numadb_placement::{PlacementError, Region};

pub use chain::{Chain, ChainLayout};
pub use kernels::{Isa, Traffic};
pub use matrix::{MatrixAxes, NoProgress, Progress};
pub use stats::{Spread3, Summary};
pub use verify::{PlacementCheck, PlacementVerdict};

/// The version of the JSON documents the prober writes; bumped on any incompatible change.
pub const PROBE_SCHEMA_VERSION: u32 = 1;

/// What can go wrong while probing.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// Settings that make no measurement.
    #[error("{0}")]
    Options(String),
    /// A chain could not be built.
    #[error(transparent)]
    Chain(#[from] chain::ChainError),
    /// Memory could not be placed or located, or a thread could not be pinned.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// The topology could not be read.
    #[error(transparent)]
    Topology(#[from] numadb_topology::TopologyError),
}

/// The fraction of a region on transparent huge pages, from `/proc/self/smaps` (`None` if unreadable).
pub fn huge_page_share(region: &Region) -> Option<f64> {
    let bytes = region.transparent_huge_bytes().ok()?;
    Some((bytes as f64 / region.len() as f64).min(1.0))
}

/// Serialises [`numadb_placement::HugePages`] as `"4k"`, `"thp"` or `"system"`.
pub mod huge_pages_serde {
    use numadb_placement::HugePages;
    use serde::{Deserialize, Deserializer, Serializer};

    /// The name of a setting.
    pub fn name(huge_pages: HugePages) -> &'static str {
        match huge_pages {
            HugePages::Never => "4k",
            HugePages::Transparent => "thp",
            HugePages::System => "system",
        }
    }

    /// Serialises by name.
    pub fn serialize<S: Serializer>(huge_pages: &HugePages, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(name(*huge_pages))
    }

    /// Deserialises a name.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<HugePages, D::Error> {
        match String::deserialize(deserializer)?.as_str() {
            "4k" => Ok(HugePages::Never),
            "thp" => Ok(HugePages::Transparent),
            "system" => Ok(HugePages::System),
            other => Err(serde::de::Error::custom(format!("unknown page setting {other:?}"))),
        }
    }
}
