//! The control plane: default sizes from the topology, and fitting a whole probe run into a time budget.
//!
//! # Buffer sizes
//! A latency or bandwidth figure means "memory" only if the buffer is far larger than the last-level cache; the
//! issue asks for at least 8× the LLC, and MLC, multichase and STREAM use 4–8×. But the reported LLC can be absurd
//! for the cache a process can use: the development VM (2 vCPUs) reports a 480 MiB L3 — a slice of a host's
//! cache it will never see (its latency cliff is at 4–6.5 MiB) — and 8× that would be 3.75 GiB per chain. So the
//! LLC size used for defaults is *plausible*: the reported size, capped at [`LLC_BYTES_PER_CPU_MAX`] per CPU that
//! shares it (no shipping CPU has more than ~6 MiB of L3 per hardware thread, AMD's 3D V-Cache parts included).
//! The default buffer is then 8× that, at least [`DEFAULT_BUFFER_MIN_BYTES`] (1 GiB, as the issue asks), and at
//! most a quarter of the smallest memory node (so that a small emulated node is not exhausted). Every command
//! takes an explicit size too.
//!
//! # Budgets
//! `numadb probe` with no subcommand runs everything that fits a budget. Each part's cost is estimated from its
//! sample count, sample duration and buffer builds (chain threading runs at roughly [`BUILD_NS_PER_LINE`] per
//! line, filling at roughly [`FILL_BYTES_PER_S`]); if the full plan does not fit, settings are stepped down in a
//! fixed order — shorter samples, fewer repetitions, a smaller cache curve, fewer loaded-latency points, no huge-
//! page matrix — until it fits or nothing more can be taken away.

use std::time::Duration;

use numadb_placement::HugePages;
use numadb_topology::{CacheKind, Topology};
use serde::{Deserialize, Serialize};

use crate::bandwidth::BandwidthOptions;
use crate::chain::{ChainLayout, LINE_BYTES};
use crate::kernels::{Isa, Traffic};
use crate::latency::LatencyOptions;
use crate::loaded::LoadedOptions;
use crate::matrix::MatrixAxes;

/// The most last-level cache per sharing CPU that the defaults believe.
pub const LLC_BYTES_PER_CPU_MAX: u64 = 8 << 20;
/// The LLC assumed when the topology reports none.
pub const LLC_BYTES_UNKNOWN: u64 = 32 << 20;
/// The smallest default buffer.
pub const DEFAULT_BUFFER_MIN_BYTES: usize = 1 << 30;
/// The default buffer is at most this fraction of the smallest memory node.
const NODE_MEMORY_FRACTION: u64 = 4;
/// Estimated cost of threading a chain, per line (random writes). Calibrated so that the full run's estimate
/// matched its duration on the development VM (36 s estimated, 38–40 s measured with 1 GiB buffers).
pub const BUILD_NS_PER_LINE: f64 = 40.0;
/// Estimated rate of allocating and filling buffers.
pub const FILL_BYTES_PER_S: f64 = 2e9;
/// The seed of every chain unless told otherwise.
pub const DEFAULT_SEED: u64 = 0x6E75_6D61_6462;
/// The default TLB window (multichase's 64 pages of 4 KiB).
pub const DEFAULT_WINDOW_BYTES: usize = 256 << 10;
/// The default stride (multichase's).
pub const DEFAULT_STRIDE_BYTES: usize = 256;

/// The last-level cache size the defaults believe (see the module documentation).
pub fn plausible_llc_bytes(topology: &Topology) -> usize {
    let llc = topology.caches.iter().filter(|c| c.kind != CacheKind::Instruction).max_by_key(|c| c.level);
    match llc.and_then(|c| Some((c.size_bytes?, c.cpus_per_instance.max(1)))) {
        Some((size, sharing)) => size.min(u64::from(sharing) * LLC_BYTES_PER_CPU_MAX) as usize,
        None => LLC_BYTES_UNKNOWN as usize,
    }
}

/// The default buffer of a latency chain or a bandwidth cell (see the module documentation).
pub fn default_buffer_bytes(topology: &Topology) -> usize {
    let wanted = (plausible_llc_bytes(topology) * 8).max(DEFAULT_BUFFER_MIN_BYTES);
    let smallest_node = topology.nodes.iter().map(|n| n.memory_bytes).filter(|&m| m > 0).min().unwrap_or(u64::MAX)
        / NODE_MEMORY_FRACTION;
    let size = (wanted as u64).min(smallest_node) as usize;
    (size >> 20 << 20).max(1 << 20)
}

/// The default latency settings for a buffer.
pub fn default_latency_options(buffer_bytes: usize, huge_pages: HugePages) -> LatencyOptions {
    LatencyOptions {
        layout: ChainLayout { buffer_bytes, stride_bytes: DEFAULT_STRIDE_BYTES, window_bytes: DEFAULT_WINDOW_BYTES },
        huge_pages,
        sample: Duration::from_millis(200),
        repetitions: 5,
        seed: DEFAULT_SEED,
    }
}

/// The default bandwidth settings.
pub fn default_bandwidth_options(buffer_bytes: usize, traffic: Traffic) -> BandwidthOptions {
    BandwidthOptions {
        buffer_bytes,
        traffic,
        isa: Isa::best(),
        huge_pages: HugePages::Never,
        sample: Duration::from_millis(200),
        repetitions: 5,
    }
}

/// Everything `numadb probe` runs, with the settings that fit its budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    /// The latency matrix with base pages.
    pub latency: LatencyOptions,
    /// The latency matrix with transparent huge pages, when it fits.
    pub latency_huge: Option<LatencyOptions>,
    /// One bandwidth matrix per traffic kind.
    pub bandwidth: Vec<BandwidthOptions>,
    /// The cache curve's sizes.
    pub curve_sizes: Vec<usize>,
    /// The cache curve's sampling and chain shape.
    pub curve: LatencyOptions,
    /// The loaded-latency sweep, when there is a CPU to load with and it fits.
    pub loaded: Option<LoadedOptions>,
    /// The plan's estimated duration.
    pub estimate: Duration,
    /// What was given up to fit the budget, in order.
    pub reductions: Vec<String>,
}

/// The loaded-latency delays of a full plan (a subset of MLC's, spanning its range).
pub const PLAN_DELAYS_CYCLES: [u64; 8] = [0, 50, 200, 500, 1000, 2500, 5000, 20000];
/// The loaded-latency delays of a reduced plan.
pub const PLAN_DELAYS_CYCLES_FEW: [u64; 3] = [0, 500, 5000];

/// Settings the user fixed: the budget fitting leaves them alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlanOverrides {
    /// Every sample's duration.
    pub sample: Option<Duration>,
    /// Every measurement's repetitions.
    pub repetitions: Option<usize>,
    /// The chains' seed.
    pub seed: Option<u64>,
}

impl RunPlan {
    /// The full plan for `axes` with `buffer_bytes` buffers and the user's `overrides`, stepped down until its
    /// estimate fits `budget` (never touching what the user fixed).
    pub fn fit(
        axes: &MatrixAxes,
        buffer_bytes: usize,
        curve_max_bytes: usize,
        budget: Duration,
        overrides: PlanOverrides,
    ) -> RunPlan {
        let mut plan = RunPlan::full(axes, buffer_bytes, curve_max_bytes);
        plan.apply(overrides);
        plan.estimate = plan.estimate_for(axes);
        type Step = fn(&mut RunPlan) -> Option<String>;
        let samples_fixed = overrides.sample.is_some();
        let repetitions_fixed = overrides.repetitions.is_some();
        let steps: [(bool, Step); 9] = [
            (samples_fixed, |p| p.shorten_samples(Duration::from_millis(100))),
            (repetitions_fixed, |p| p.fewer_repetitions(3)),
            (false, |p| p.fewer_delays()),
            (samples_fixed, |p| p.shorten_samples(Duration::from_millis(50))),
            (false, |p| p.smaller_curve(256 << 20)),
            (false, |p| p.drop_huge_pages()),
            (samples_fixed, |p| p.shorten_samples(Duration::from_millis(20))),
            (false, |p| p.smaller_curve(64 << 20)),
            (false, |p| p.drop_loaded()),
        ];
        for (fixed, step) in steps {
            if plan.estimate <= budget {
                break;
            }
            if fixed {
                continue;
            }
            if let Some(reduction) = step(&mut plan) {
                plan.reductions.push(reduction);
                plan.estimate = plan.estimate_for(axes);
            }
        }
        plan
    }

    /// Sets what the user fixed on every measurement of the plan.
    fn apply(&mut self, overrides: PlanOverrides) {
        let mut latencies: Vec<&mut LatencyOptions> = vec![&mut self.latency, &mut self.curve];
        latencies.extend(self.latency_huge.as_mut());
        if let Some(loaded) = self.loaded.as_mut() {
            latencies.push(&mut loaded.chase);
        }
        for options in latencies {
            options.sample = overrides.sample.unwrap_or(options.sample);
            options.repetitions = overrides.repetitions.unwrap_or(options.repetitions);
            options.seed = overrides.seed.unwrap_or(options.seed);
        }
        for options in &mut self.bandwidth {
            options.sample = overrides.sample.unwrap_or(options.sample);
            options.repetitions = overrides.repetitions.unwrap_or(options.repetitions);
        }
    }

    fn full(axes: &MatrixAxes, buffer_bytes: usize, curve_max_bytes: usize) -> RunPlan {
        let latency = default_latency_options(buffer_bytes, HugePages::Never);
        let can_load = axes.cpu_count() > 1;
        RunPlan {
            latency,
            latency_huge: Some(LatencyOptions { huge_pages: HugePages::Transparent, ..latency }),
            bandwidth: Traffic::ALL.iter().map(|&t| default_bandwidth_options(buffer_bytes, t)).collect(),
            curve_sizes: crate::cache::log_sizes(4 << 10, curve_max_bytes, 1),
            curve: LatencyOptions { sample: Duration::from_millis(100), repetitions: 3, ..latency },
            loaded: can_load.then(|| LoadedOptions {
                chase: latency,
                loader_bytes: buffer_bytes,
                traffic: Traffic::Read,
                isa: Isa::best(),
                delays_cycles: PLAN_DELAYS_CYCLES.to_vec(),
            }),
            estimate: Duration::ZERO,
            reductions: Vec::new(),
        }
    }

    /// The plan's estimated duration on `axes`.
    pub fn estimate_for(&self, axes: &MatrixAxes) -> Duration {
        let build = |bytes: usize| bytes as f64 / LINE_BYTES as f64 * BUILD_NS_PER_LINE * 1e-9;
        let fill = |bytes: usize| bytes as f64 / FILL_BYTES_PER_S;
        let mut seconds = 0.0;
        for latency in std::iter::once(&self.latency).chain(&self.latency_huge) {
            seconds += axes.nodes.len() as f64 * build(latency.layout.buffer_bytes);
            seconds += crate::latency::planned_samples(axes, latency) as f64 * latency.sample.as_secs_f64();
        }
        for bandwidth in &self.bandwidth {
            let cells = (axes.domains.len() * axes.nodes.len()) as f64;
            seconds += cells * fill(bandwidth.buffer_bytes);
            seconds += crate::bandwidth::planned_samples(axes, bandwidth) as f64 * bandwidth.sample.as_secs_f64();
        }
        for &size in &self.curve_sizes {
            seconds += build(size) + (self.curve.repetitions + 1) as f64 * self.curve.sample.as_secs_f64();
        }
        if let Some(loaded) = &self.loaded {
            seconds += build(loaded.chase.layout.buffer_bytes) + fill(loaded.loader_bytes);
            seconds += crate::loaded::planned_samples(loaded) as f64 * loaded.chase.sample.as_secs_f64();
        }
        Duration::from_secs_f64(seconds)
    }

    fn shorten_samples(&mut self, sample: Duration) -> Option<String> {
        let mut changed = false;
        let mut shorten = |current: &mut Duration| {
            if *current > sample {
                *current = sample;
                changed = true;
            }
        };
        shorten(&mut self.latency.sample);
        if let Some(huge) = &mut self.latency_huge {
            shorten(&mut huge.sample);
        }
        for bandwidth in &mut self.bandwidth {
            shorten(&mut bandwidth.sample);
        }
        shorten(&mut self.curve.sample);
        if let Some(loaded) = &mut self.loaded {
            shorten(&mut loaded.chase.sample);
        }
        changed.then(|| format!("samples shortened to {} ms", sample.as_millis()))
    }

    fn fewer_repetitions(&mut self, repetitions: usize) -> Option<String> {
        if self.latency.repetitions <= repetitions {
            return None;
        }
        self.latency.repetitions = repetitions;
        if let Some(huge) = &mut self.latency_huge {
            huge.repetitions = repetitions;
        }
        for bandwidth in &mut self.bandwidth {
            bandwidth.repetitions = repetitions;
        }
        if let Some(loaded) = &mut self.loaded {
            loaded.chase.repetitions = repetitions;
        }
        Some(format!("{repetitions} repetitions instead of 5"))
    }

    fn fewer_delays(&mut self) -> Option<String> {
        let loaded = self.loaded.as_mut()?;
        if loaded.delays_cycles.len() <= PLAN_DELAYS_CYCLES_FEW.len() {
            return None;
        }
        loaded.delays_cycles = PLAN_DELAYS_CYCLES_FEW.to_vec();
        Some(format!("loaded latency at {} delays only", PLAN_DELAYS_CYCLES_FEW.len()))
    }

    fn smaller_curve(&mut self, max_bytes: usize) -> Option<String> {
        let before = self.curve_sizes.len();
        self.curve_sizes.retain(|&s| s <= max_bytes);
        (self.curve_sizes.len() < before).then(|| format!("cache curve up to {} MiB only", max_bytes >> 20))
    }

    fn drop_huge_pages(&mut self) -> Option<String> {
        self.latency_huge.take().map(|_| "no huge-page latency matrix".to_string())
    }

    fn drop_loaded(&mut self) -> Option<String> {
        self.loaded.take().map(|_| "no loaded-latency sweep".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numadb_topology::{CacheLevel, DomainGranularity, MachineSpec};

    fn topology(memory_mib: u64, llc_bytes: Option<u64>, sharing: u32) -> Topology {
        let mut topology = MachineSpec::from_json(&format!(
            r#"{{"name":"t","threads_per_core":1,"nodes":[{{"package":0,"cores":2,"memory_mib":{memory_mib}}}],"distances":[[10]]}}"#
        ))
        .unwrap()
        .to_topology()
        .unwrap();
        topology.caches = llc_bytes
            .map(|size| CacheLevel {
                level: 3,
                kind: CacheKind::Unified,
                size_bytes: Some(size),
                line_size_bytes: Some(64),
                cpus_per_instance: sharing,
            })
            .into_iter()
            .collect();
        topology
    }

    #[test]
    fn a_bogus_vm_llc_does_not_inflate_the_default_buffer() {
        // The development VM: 2 CPUs sharing a reported 480 MiB L3.
        let vm = topology(24 << 10, Some(480 << 20), 2);
        assert_eq!(plausible_llc_bytes(&vm), 16 << 20);
        assert_eq!(default_buffer_bytes(&vm), 1 << 30);
        // A real server LLC shared by many CPUs is believed: 8 × 256 MiB.
        let server = topology(512 << 10, Some(256 << 20), 96);
        assert_eq!(default_buffer_bytes(&server), 2 << 30);
        // A small emulated node caps it.
        let guest = topology(256, Some(16 << 20), 1);
        assert_eq!(default_buffer_bytes(&guest), 64 << 20);
        assert_eq!(plausible_llc_bytes(&topology(1024, None, 1)), LLC_BYTES_UNKNOWN as usize);
    }

    #[test]
    fn a_plan_steps_down_until_it_fits() {
        let machine = topology(24 << 10, Some(480 << 20), 2);
        let axes = MatrixAxes::of(&machine, DomainGranularity::Node).unwrap();
        let none = PlanOverrides::default();
        let generous = RunPlan::fit(&axes, 1 << 30, 2 << 30, Duration::from_secs(3600), none);
        assert!(generous.reductions.is_empty());
        assert!(generous.latency_huge.is_some() && generous.loaded.is_some());
        assert_eq!(generous.bandwidth.len(), 4);
        let tight = RunPlan::fit(&axes, 1 << 30, 2 << 30, Duration::from_secs(20), none);
        assert!(!tight.reductions.is_empty());
        assert!(tight.estimate < generous.estimate);
        let impossible = RunPlan::fit(&axes, 1 << 30, 2 << 30, Duration::from_millis(1), none);
        assert!(impossible.loaded.is_none() && impossible.latency_huge.is_none());
        assert!(impossible.curve_sizes.iter().all(|&s| s <= 64 << 20));
    }

    #[test]
    fn what_the_user_fixed_is_never_reduced() {
        let machine = topology(24 << 10, Some(480 << 20), 2);
        let axes = MatrixAxes::of(&machine, DomainGranularity::Node).unwrap();
        let overrides = PlanOverrides { sample: Some(Duration::from_millis(300)), repetitions: Some(7), seed: Some(3) };
        let plan = RunPlan::fit(&axes, 1 << 30, 2 << 30, Duration::from_millis(1), overrides);
        assert!(plan.reductions.iter().all(|r| !r.contains("samples") && !r.contains("repetitions")));
        assert_eq!(plan.latency.sample, Duration::from_millis(300));
        assert_eq!(plan.curve.repetitions, 7);
        assert!(plan.bandwidth.iter().all(|b| b.repetitions == 7));
        assert_eq!(plan.latency.seed, 3);
    }
}
