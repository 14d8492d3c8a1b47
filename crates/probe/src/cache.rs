//! The cache curve: chase latency for working sets from a few KiB to beyond the last-level cache, with the
//! plateaus of L1, L2, L3 and DRAM marked against the cache sizes the topology reports.
//!
//! Every point is a chain over a buffer of that size (every line visited once per cycle, see [`crate::chain`]),
//! so the buffer size is the working set. Reported sizes can be wrong for the cache a thread can really use: the
//! development VM reports a 480 MiB L3 while its latency rises at 4–6.5 MiB. So the curve carries both: the levels
//! as reported, each with the latency measured well inside it (the median of the points between twice the level
//! below and half the level itself), and the *cliffs* the measurement shows (sizes where latency jumps by more than
//! [`CLIFF_RATIO`] from one point to the next). The DRAM plateau is the median of the points at least
//! [`DRAM_MIN_FACTOR`] times the plausible last-level cache (see [`crate::plan::plausible_llc_bytes`]).

use numadb_placement::{PinGuard, Policy};
use numadb_topology::{CacheKind, CpuSet, Topology};
use serde::{Deserialize, Serialize};

use crate::chain::{Chain, ChainLayout};
use crate::latency::{CpuLatency, LatencyOptions, measure_cpu};
use crate::matrix::Progress;
use crate::stats::Summary;
use crate::verify::PlacementCheck;
use crate::{ProbeError, huge_page_share};

/// Consecutive points whose latencies differ by more than this factor mark a cliff.
pub const CLIFF_RATIO: f64 = 1.3;
/// Points at least this many times the plausible LLC size count towards the DRAM plateau.
pub const DRAM_MIN_FACTOR: usize = 8;
/// The largest number of points a curve may have.
pub const POINTS_MAX: usize = 256;

/// Working-set sizes from `min_bytes` to `max_bytes`, `steps_per_doubling` per factor of two, rounded to whole
/// lines of 256 B.
pub fn log_sizes(min_bytes: usize, max_bytes: usize, steps_per_doubling: usize) -> Vec<usize> {
    let steps = steps_per_doubling.max(1) as f64;
    let mut sizes = Vec::new();
    for i in 0..POINTS_MAX {
        let size = (min_bytes as f64 * 2f64.powf(i as f64 / steps)).round() as usize / 256 * 256;
        if size > max_bytes {
            break;
        }
        if sizes.last() != Some(&size) {
            sizes.push(size);
        }
    }
    sizes
}

/// One point of the curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// The working set (the chain's buffer).
    pub buffer_bytes: usize,
    /// The chase from the pinned CPU.
    pub latency: CpuLatency,
    /// Where the buffer was.
    pub placement: PlacementCheck,
    /// Fraction on transparent huge pages.
    pub huge_page_share: Option<f64>,
    /// The core clock measured on the same CPU right after the point's samples (see [`crate::clock`]).
    pub core_hz: Option<f64>,
}

impl CurvePoint {
    /// The median latency, if any sample was kept.
    pub fn latency_ns(&self) -> Option<f64> {
        self.latency.summary.map(|s| s.median)
    }

    /// The median latency in core cycles, at the clock measured next to it.
    pub fn latency_cycles(&self) -> Option<f64> {
        Some(self.latency_ns()? * self.core_hz? / 1e9)
    }
}

/// Frequency estimate next to each point: a few short samples, so the estimate sees the clock the point ran at.
const POINT_CLOCK_SAMPLE: std::time::Duration = std::time::Duration::from_millis(10);
/// Samples of each point's frequency estimate.
const POINT_CLOCK_ATTEMPTS: usize = 3;

/// A cache level as reported, and what was measured inside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelMark {
    /// `L1`, `L2`, `L3`, `DRAM`.
    pub name: String,
    /// The size the topology reports (`None` for DRAM).
    pub reported_bytes: Option<u64>,
    /// The median latency of the points inside the level.
    pub plateau_ns: Option<f64>,
    /// The median, over the same points, of each point's latency in cycles at the clock measured next to it.
    pub plateau_cycles: Option<f64>,
    /// The points it was taken from.
    pub points: Vec<usize>,
}

/// A cache curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheCurve {
    /// The pinned CPU.
    pub cpu: u32,
    /// The node of every buffer.
    pub node: u32,
    /// Sampling and chain shape (its buffer size is that of the largest point).
    pub options: LatencyOptions,
    /// Points in increasing size.
    pub points: Vec<CurvePoint>,
    /// L1, L2, L3 (as far as reported) and DRAM.
    pub levels: Vec<LevelMark>,
    /// Sizes after which latency jumps by more than [`CLIFF_RATIO`]: where the caches really end.
    pub cliffs_bytes: Vec<usize>,
}

impl CacheCurve {
    /// The plateau of a level by name.
    pub fn plateau_ns(&self, name: &str) -> Option<f64> {
        self.levels.iter().find(|l| l.name == name)?.plateau_ns
    }

    /// The plateau of a level by name, in cycles.
    pub fn plateau_cycles(&self, name: &str) -> Option<f64> {
        self.levels.iter().find(|l| l.name == name)?.plateau_cycles
    }
}

/// Measures the curve on `cpu` with buffers on `node`. `options.layout.buffer_bytes` is ignored: `sizes` gives
/// the buffers.
pub fn measure_curve(
    topology: &Topology,
    cpu: u32,
    node: u32,
    sizes: &[usize],
    options: &LatencyOptions,
    progress: &dyn Progress,
) -> Result<CacheCurve, ProbeError> {
    if sizes.is_empty() || sizes.len() > POINTS_MAX {
        return Err(ProbeError::Options(format!("a cache curve needs 1 to {POINTS_MAX} sizes, not {}", sizes.len())));
    }
    let _pin = PinGuard::pin(&CpuSet::from_ids([cpu]))?;
    let mut points = Vec::new();
    for &size in sizes {
        progress.advance(0, &format!("cache curve: {}", numadb_topology::format_bytes(size as u64)));
        let layout = ChainLayout { buffer_bytes: size, ..options.layout };
        let chain = Chain::build(&layout, Policy::Node(node), options.huge_pages, options.seed)?;
        let placement = PlacementCheck::judge(&chain.buffer().region().page_locations()?, node);
        let latency = measure_cpu(&chain, cpu, options, progress)?;
        let core_hz = crate::clock::estimate_core_hz_with(POINT_CLOCK_SAMPLE, POINT_CLOCK_ATTEMPTS);
        points.push(CurvePoint {
            buffer_bytes: chain.layout().buffer_bytes,
            latency,
            placement,
            huge_page_share: huge_page_share(chain.buffer().region()),
            core_hz,
        });
    }
    let sizes_and_latencies: Vec<(usize, f64)> =
        points.iter().filter_map(|p| Some((p.buffer_bytes, p.latency_ns()?))).collect();
    let mut levels = mark_levels(topology, &sizes_and_latencies);
    for level in &mut levels {
        let cycles: Vec<f64> = points
            .iter()
            .filter(|p| level.points.contains(&p.buffer_bytes))
            .filter_map(CurvePoint::latency_cycles)
            .collect();
        level.plateau_cycles = Summary::of(&cycles).map(|s| s.median);
    }
    let cliffs_bytes = cliffs(&sizes_and_latencies);
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let layout = ChainLayout { buffer_bytes: largest, ..options.layout }.normalised()?;
    let options = LatencyOptions { layout, ..*options };
    Ok(CacheCurve { cpu, node, options, points, levels, cliffs_bytes })
}

/// Data and unified cache sizes by level, as reported.
pub fn reported_levels(topology: &Topology) -> Vec<(u8, u64)> {
    let mut levels: Vec<(u8, u64)> = topology
        .caches
        .iter()
        .filter(|c| c.kind != CacheKind::Instruction)
        .filter_map(|c| Some((c.level, c.size_bytes?)))
        .collect();
    levels.sort_unstable();
    levels.dedup_by_key(|(level, _)| *level);
    levels
}

/// The plateau of each reported level and of DRAM, from (size, latency) points in increasing size.
pub fn mark_levels(topology: &Topology, points: &[(usize, f64)]) -> Vec<LevelMark> {
    let mut marks = Vec::new();
    let mut below: u64 = 0;
    let levels = reported_levels(topology);
    let plausible_llc = crate::plan::plausible_llc_bytes(topology) as u64;
    for (index, &(level, size)) in levels.iter().enumerate() {
        // The last level's plateau is taken below the size the defaults believe, not the reported one: a VM's
        // reported 480 MiB L3 would otherwise put DRAM points into the "L3 plateau".
        let believed = if index + 1 == levels.len() { size.min(plausible_llc) } else { size };
        let inside: Vec<(usize, f64)> =
            points.iter().copied().filter(|&(s, _)| s as u64 >= below * 2 && s as u64 <= believed / 2).collect();
        marks.push(LevelMark {
            name: format!("L{level}"),
            reported_bytes: Some(size),
            plateau_ns: Summary::of(&inside.iter().map(|p| p.1).collect::<Vec<_>>()).map(|s| s.median),
            plateau_cycles: None,
            points: inside.iter().map(|p| p.0).collect(),
        });
        below = size;
    }
    let dram_from = crate::plan::plausible_llc_bytes(topology) * DRAM_MIN_FACTOR;
    let dram: Vec<(usize, f64)> = points.iter().copied().filter(|&(s, _)| s >= dram_from).collect();
    marks.push(LevelMark {
        name: "DRAM".into(),
        reported_bytes: None,
        plateau_ns: Summary::of(&dram.iter().map(|p| p.1).collect::<Vec<_>>()).map(|s| s.median),
        plateau_cycles: None,
        points: dram.iter().map(|p| p.0).collect(),
    });
    marks
}

/// Sizes after which the next point's latency is more than [`CLIFF_RATIO`] times higher.
pub fn cliffs(points: &[(usize, f64)]) -> Vec<usize> {
    points.windows(2).filter(|pair| pair[1].1 > pair[0].1 * CLIFF_RATIO).map(|pair| pair[0].0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use numadb_topology::MachineSpec;

    #[test]
    fn sizes_double_or_step_finer() {
        assert_eq!(log_sizes(4096, 65536, 1), vec![4096, 8192, 16384, 32768, 65536]);
        let finer = log_sizes(4096, 16384, 2);
        assert_eq!(finer.len(), 5);
        assert!(finer.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(log_sizes(4 << 10, 2 << 30, 1).len(), 20);
    }

    #[test]
    fn cliffs_are_found_where_latency_jumps() {
        let points = [(16 << 10, 1.1), (32 << 10, 1.2), (64 << 10, 3.9), (128 << 10, 4.0), (8 << 20, 14.0)];
        assert_eq!(cliffs(&points), vec![32 << 10, 128 << 10]);
    }

    #[test]
    fn plateaus_are_taken_inside_each_reported_level() {
        let topology = MachineSpec::from_json(
            r#"{"name":"t","threads_per_core":1,"nodes":[{"package":0,"cores":2,"memory_mib":4096}],"distances":[[10]]}"#,
        )
        .unwrap()
        .to_topology()
        .unwrap();
        // The spec gives no caches: only DRAM is marked, from points far beyond the plausible LLC default.
        let points: Vec<(usize, f64)> = log_sizes(4 << 10, 1 << 30, 1).iter().map(|&s| (s, s as f64)).collect();
        let marks = mark_levels(&topology, &points);
        assert_eq!(marks.last().unwrap().name, "DRAM");
        let mut with_caches = topology.clone();
        with_caches.caches = vec![
            cache(1, numadb_topology::CacheKind::Data, 48 << 10),
            cache(1, numadb_topology::CacheKind::Instruction, 32 << 10),
            cache(2, numadb_topology::CacheKind::Unified, 2 << 20),
        ];
        let marks = mark_levels(&with_caches, &points);
        let names: Vec<&str> = marks.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["L1", "L2", "DRAM"]);
        assert_eq!(marks[0].points, vec![4 << 10, 8 << 10, 16 << 10]);
        assert_eq!(marks[1].points, vec![128 << 10, 256 << 10, 512 << 10, 1 << 20]);
        assert_eq!(marks[0].plateau_ns, Some((8 << 10) as f64));
    }

    fn cache(level: u8, kind: numadb_topology::CacheKind, size: u64) -> numadb_topology::CacheLevel {
        numadb_topology::CacheLevel {
            level,
            kind,
            size_bytes: Some(size),
            line_size_bytes: Some(64),
            cpus_per_instance: 1,
        }
    }
}
