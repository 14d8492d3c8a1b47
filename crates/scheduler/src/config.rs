//! What a scheduler is built with: where its workers are, and how they may steal and bind.

use std::fmt;
use std::str::FromStr;

use numadb_topology::{CpuSet, DomainGranularity};
use serde::{Deserialize, Serialize};

/// Which CPUs get a worker: the thesis's three layouts, or an explicit set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerLayout {
    /// One worker per allowed CPU of every domain.
    All,
    /// Workers only on the allowed CPUs of one domain.
    OneDomain(u32),
    /// In every domain, one worker per hardware thread of the first half of its cores (at least one core).
    HalfCores,
    /// One worker per CPU of this set (each worker belongs to the domain holding its CPU).
    Cpus(CpuSet),
}

impl fmt::Display for WorkerLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerLayout::All => f.write_str("all"),
            WorkerLayout::OneDomain(domain) => write!(f, "domain({domain})"),
            WorkerLayout::HalfCores => f.write_str("half"),
            WorkerLayout::Cpus(cpus) => write!(f, "cpus({})", cpus.to_list_string()),
        }
    }
}

impl FromStr for WorkerLayout {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim().to_ascii_lowercase();
        let argument = |name: &str| text.strip_prefix(name)?.strip_prefix('(')?.strip_suffix(')').map(str::trim);
        match text.as_str() {
            "all" => return Ok(WorkerLayout::All),
            "half" | "half_cores" => return Ok(WorkerLayout::HalfCores),
            _ => {}
        }
        if let Some(domain) = argument("domain") {
            return domain.parse().map(WorkerLayout::OneDomain).map_err(|_| format!("{domain:?} is not a domain id"));
        }
        if let Some(cpus) = argument("cpus") {
            return CpuSet::parse_list(cpus).map(WorkerLayout::Cpus).map_err(|error| error.to_string());
        }
        Err(format!("{text:?} is not a worker layout (expected all, half, domain(N) or cpus(LIST))"))
    }
}

/// Which other domains' queues an idle worker may take tasks from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StealMode {
    /// Never: a task runs in the domain whose queue it was put in.
    Off,
    /// Nearest domains first, never farther than `max_distance` (SLIT units). With SNC2 and distances 10/11/21,
    /// `max_distance: 11` means "the other half of my socket, never the other socket".
    Neighbor {
        /// The farthest a worker may reach.
        max_distance: u32,
    },
    /// Nearest domains first, then farther ones, without limit.
    Any,
}

/// How many tasks one steal takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StealBatch {
    /// One task per steal.
    One,
    /// Half the victim's queue (rounded up), at most `cap`; the extra tasks go into the thief's domain queue.
    Half {
        /// Most tasks one steal takes.
        cap: usize,
    },
}

/// Default cap of a batch steal.
pub const STEAL_BATCH_CAP_DEFAULT: usize = 16;

/// The stealing policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stealing {
    /// Which queues.
    pub mode: StealMode,
    /// How many tasks at a time.
    pub batch: StealBatch,
}

impl Stealing {
    /// No stealing.
    pub const OFF: Stealing = Stealing { mode: StealMode::Off, batch: StealBatch::One };
    /// Stealing from any domain, one task at a time.
    pub const ANY: Stealing = Stealing { mode: StealMode::Any, batch: StealBatch::One };

    /// Neighbour stealing within `max_distance`, one task at a time.
    pub fn neighbor(max_distance: u32) -> Self {
        Stealing { mode: StealMode::Neighbor { max_distance }, batch: StealBatch::One }
    }

    /// The same mode, stealing half the victim's queue up to `cap` tasks.
    pub fn batched(self, cap: usize) -> Self {
        Stealing { batch: StealBatch::Half { cap: cap.max(1) }, ..self }
    }
}

/// `off`, `any`, `neighbor` (nearest distance only), `neighbor(21)`, each optionally followed by `+batch` or
/// `+batch(8)`.
impl FromStr for Stealing {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim().to_ascii_lowercase();
        let (mode_text, batch_text) = match text.split_once('+') {
            Some((mode, batch)) => (mode.trim(), Some(batch.trim())),
            None => (text.as_str(), None),
        };
        let mode = match mode_text {
            "off" | "none" => StealMode::Off,
            "any" | "on" => StealMode::Any,
            "neighbor" | "neighbour" => StealMode::Neighbor { max_distance: NEAREST },
            other => {
                let distance = other
                    .strip_prefix("neighbor(")
                    .or_else(|| other.strip_prefix("neighbour("))
                    .and_then(|rest| rest.strip_suffix(')'))
                    .and_then(|d| d.trim().parse::<u32>().ok())
                    .ok_or_else(|| {
                        format!("{other:?} is not a stealing mode (expected off, neighbor, neighbor(DISTANCE) or any)")
                    })?;
                StealMode::Neighbor { max_distance: distance }
            }
        };
        let batch = match batch_text {
            None => StealBatch::One,
            Some("batch") => StealBatch::Half { cap: STEAL_BATCH_CAP_DEFAULT },
            Some(other) => {
                let cap = other
                    .strip_prefix("batch(")
                    .and_then(|rest| rest.strip_suffix(')'))
                    .and_then(|c| c.trim().parse::<usize>().ok())
                    .filter(|&c| c > 0)
                    .ok_or_else(|| format!("{other:?} is not a batch size (expected batch or batch(N))"))?;
                StealBatch::Half { cap }
            }
        };
        Ok(Stealing { mode, batch })
    }
}

/// `max_distance` meaning "only the nearest other domains, whatever their distance".
pub const NEAREST: u32 = 0;

impl fmt::Display for Stealing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.mode {
            StealMode::Off => f.write_str("off")?,
            StealMode::Any => f.write_str("any")?,
            StealMode::Neighbor { max_distance: NEAREST } => f.write_str("neighbor")?,
            StealMode::Neighbor { max_distance } => write!(f, "neighbor({max_distance})")?,
        }
        match self.batch {
            StealBatch::One => Ok(()),
            StealBatch::Half { cap } => write!(f, "+batch({cap})"),
        }
    }
}

/// How far the operating system may move workers (SAP HANA's binding policies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// Workers are never pinned.
    None,
    /// A worker pins itself to the preferred domain's CPUs while it runs a task that has one.
    Preferred,
    /// As `Preferred`, and also while it runs a direct child of such a task (HANA's default).
    Opportunistic,
    /// Workers are pinned to their own domain's CPUs for life.
    Always,
}

impl fmt::Display for Binding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Binding::None => "none",
            Binding::Preferred => "preferred",
            Binding::Opportunistic => "opportunistic",
            Binding::Always => "always",
        })
    }
}

impl FromStr for Binding {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(Binding::None),
            "preferred" => Ok(Binding::Preferred),
            "opportunistic" => Ok(Binding::Opportunistic),
            "always" => Ok(Binding::Always),
            other => {
                Err(format!("{other:?} is not a binding policy (expected none, preferred, opportunistic or always)"))
            }
        }
    }
}

/// Whether pinning calls the operating system or is only recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pinning {
    /// `sched_setaffinity` through the placement crate: the topology must be this machine's.
    Os,
    /// Pinning is recorded per worker but not applied: for logical topologies (tests that model four domains on
    /// a two-CPU machine). Everything else behaves as with `Os`.
    Logical,
}

/// Everything a scheduler is built with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedulerConfig {
    /// How the machine is cut into domains (per node by default; per package models "SNC off").
    pub granularity: DomainGranularity,
    /// Which CPUs get a worker.
    pub layout: WorkerLayout,
    /// Stealing policy.
    pub stealing: Stealing,
    /// Binding policy.
    pub binding: Binding,
    /// Real or recorded pinning.
    pub pinning: Pinning,
}

impl Default for SchedulerConfig {
    /// HANA's defaults: workers everywhere, neighbour stealing, opportunistic binding.
    fn default() -> Self {
        SchedulerConfig {
            granularity: DomainGranularity::Node,
            layout: WorkerLayout::All,
            stealing: Stealing::neighbor(NEAREST),
            binding: Binding::Opportunistic,
            pinning: Pinning::Os,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_parse_and_print() {
        for text in ["off", "any", "neighbor", "neighbor(11)", "any+batch(8)", "neighbor(21)+batch(16)"] {
            let stealing: Stealing = text.parse().unwrap();
            assert_eq!(stealing.to_string(), text);
        }
        assert_eq!("any+batch".parse::<Stealing>().unwrap().batch, StealBatch::Half { cap: STEAL_BATCH_CAP_DEFAULT });
        for bad in ["sometimes", "neighbor(x)", "any+batch(0)", "any+half"] {
            assert!(bad.parse::<Stealing>().is_err(), "{bad}");
        }
        for text in ["none", "preferred", "opportunistic", "always"] {
            assert_eq!(text.parse::<Binding>().unwrap().to_string(), text);
        }
        assert!("tight".parse::<Binding>().is_err());
        for text in ["all", "half", "domain(2)", "cpus(0-3)"] {
            assert_eq!(text.parse::<WorkerLayout>().unwrap().to_string(), text);
        }
        assert!("domain(x)".parse::<WorkerLayout>().is_err());
    }
}
