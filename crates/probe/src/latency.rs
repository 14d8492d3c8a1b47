//! The latency matrix: for every CPU domain × memory node, the idle load-to-use latency seen from each CPU of
//! the domain, as in the thesis's tables 1, 2, 5 and 6 (made there with Intel MLC).
//!
//! One chain is built per memory node (bound to it with `mbind`, every page verified with `move_pages`) and
//! reused for every CPU, so that all the CPUs of a column chase the very same lines. The measuring thread pins
//! itself to each CPU in turn; each CPU gets a warm-up sample (discarded: it refills the TLB and lets the core
//! leave any low-power state) and then `repetitions` samples of `sample` duration, each witnessed by `getcpu`
//! before and after (a sample whose thread moved is discarded and counted). A CPU's figure is the median of its
//! samples; a cell is the min, average and max of its CPUs' medians.

use std::time::Duration;

use numadb_placement::{HugePages, PinGuard, Policy};
use numadb_topology::CpuSet;
use serde::{Deserialize, Serialize};

use crate::chain::{Chain, ChainLayout, chase_for};
use crate::matrix::{MatrixAxes, Progress};
use crate::stats::{Spread3, Summary};
use crate::verify::{PlacementCheck, witnessed};
use crate::{ProbeError, huge_page_share};

/// How many times a sample is retried when the thread is found on another CPU, per repetition wanted.
pub const ATTEMPTS_PER_REPETITION_MAX: usize = 3;

/// Settings of a latency measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyOptions {
    /// The chain: buffer size, stride and TLB window.
    pub layout: ChainLayout,
    /// Base pages only, or transparent huge pages.
    #[serde(with = "crate::huge_pages_serde")]
    pub huge_pages: HugePages,
    /// Duration of one sample.
    pub sample: Duration,
    /// Samples per CPU (after one warm-up sample).
    pub repetitions: usize,
    /// Seed of the chain's random order.
    pub seed: u64,
}

/// One CPU's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuLatency {
    /// The CPU.
    pub cpu: u32,
    /// Nanoseconds per load, one per kept sample.
    pub samples_ns: Vec<f64>,
    /// Their summary (`None` if every sample was discarded).
    pub summary: Option<Summary>,
    /// Samples discarded because the thread was not on `cpu` before or after.
    pub moved_samples: usize,
}

/// One (domain, node) cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyCell {
    /// Index of the domain in the axes.
    pub domain: usize,
    /// The memory node.
    pub node: u32,
    /// Every CPU of the domain.
    pub cpus: Vec<CpuLatency>,
    /// Min, average and max over the CPUs' medians, in ns.
    pub latency_ns: Option<Spread3>,
    /// Whether any CPU's repetitions disagree by more than 10%.
    pub disagrees: bool,
}

/// Where one node's chain was, and how much of it was on huge pages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeBuffer {
    /// The node.
    pub node: u32,
    /// The kernel's answer to where the pages are.
    pub placement: PlacementCheck,
    /// Fraction of the buffer on transparent huge pages (from `/proc/self/smaps`).
    pub huge_page_share: Option<f64>,
}

/// A latency matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyMatrix {
    /// What was measured and how.
    pub options: LatencyOptions,
    /// Rows and columns.
    pub axes: MatrixAxes,
    /// Row by row, a cell per (domain, node).
    pub cells: Vec<LatencyCell>,
    /// One chain per node.
    pub buffers: Vec<NodeBuffer>,
}

impl LatencyMatrix {
    /// The cell of (domain index, node).
    pub fn cell(&self, domain: usize, node: u32) -> Option<&LatencyCell> {
        self.cells.iter().find(|c| c.domain == domain && c.node == node)
    }

    /// Whether every buffer was verified on its node.
    pub fn all_verified(&self) -> bool {
        self.buffers.iter().all(|b| b.placement.is_verified())
    }

    /// Whether any cell's repetitions disagree by more than 10%.
    pub fn any_disagreement(&self) -> bool {
        self.cells.iter().any(|c| c.disagrees)
    }

    /// Samples discarded because a thread moved.
    pub fn moved_samples(&self) -> usize {
        self.cells.iter().flat_map(|c| &c.cpus).map(|c| c.moved_samples).sum()
    }
}

/// Samples one latency measurement will take (for progress bars and budgets): warm-up included.
pub fn planned_samples(axes: &MatrixAxes, options: &LatencyOptions) -> u64 {
    (axes.cpu_count() * axes.nodes.len() * (options.repetitions + 1)) as u64
}

/// Measures the latency matrix over `axes`.
pub fn measure_matrix(
    axes: &MatrixAxes,
    options: &LatencyOptions,
    progress: &dyn Progress,
) -> Result<LatencyMatrix, ProbeError> {
    if options.repetitions == 0 {
        return Err(ProbeError::Options("at least one repetition is needed".into()));
    }
    // The report states the layout that ran: buffer rounded to the stride, window capped at the buffer.
    let options = &LatencyOptions { layout: options.layout.normalised()?, ..*options };
    let mut cells: Vec<LatencyCell> = Vec::new();
    let mut buffers = Vec::new();
    for &node in &axes.nodes {
        progress.advance(
            0,
            &format!(
                "building a {} chain on node {node}",
                numadb_topology::format_bytes(options.layout.buffer_bytes as u64)
            ),
        );
        let chain = Chain::build(&options.layout, Policy::Node(node), options.huge_pages, options.seed)?;
        let placement = PlacementCheck::judge(&chain.buffer().region().page_locations()?, node);
        buffers.push(NodeBuffer { node, placement, huge_page_share: huge_page_share(chain.buffer().region()) });
        for (domain_index, domain) in axes.domains.iter().enumerate() {
            let mut cpus = Vec::new();
            for &cpu in &domain.cpus {
                progress.advance(0, &format!("latency {} to node {node}, CPU {cpu}", domain.name));
                cpus.push(measure_cpu(&chain, cpu, options, progress)?);
            }
            let medians: Vec<f64> = cpus.iter().filter_map(|c| c.summary.map(|s| s.median)).collect();
            cells.push(LatencyCell {
                domain: domain_index,
                node,
                disagrees: cpus.iter().any(|c| c.summary.is_some_and(|s| s.disagrees)),
                latency_ns: Spread3::of(&medians),
                cpus,
            });
        }
    }
    // Present the cells row by row.
    cells.sort_by_key(|c| (c.domain, axes.nodes.iter().position(|&n| n == c.node)));
    Ok(LatencyMatrix { options: *options, axes: axes.clone(), cells, buffers })
}

/// Pins the calling thread to `cpu` and measures `chain` from there.
pub fn measure_cpu(
    chain: &Chain,
    cpu: u32,
    options: &LatencyOptions,
    progress: &dyn Progress,
) -> Result<CpuLatency, ProbeError> {
    let _pin = PinGuard::pin(&CpuSet::from_ids([cpu]))?;
    let mut cursor = chain.start();
    // Warm-up: refills the TLB and caches the page-table levels the chain needs; discarded.
    let (_, warmed) = chase_for(chain, cursor, options.sample);
    cursor = warmed;
    progress.advance(1, "");
    let mut samples_ns = Vec::with_capacity(options.repetitions);
    let mut moved_samples = 0;
    for _ in 0..options.repetitions * ATTEMPTS_PER_REPETITION_MAX {
        if samples_ns.len() == options.repetitions {
            break;
        }
        let ((sample, next), witness) = witnessed(|| chase_for(chain, cursor, options.sample))?;
        cursor = next;
        if witness.stayed_on(cpu) {
            samples_ns.push(sample.latency_ns());
            progress.advance(1, "");
        } else {
            moved_samples += 1;
        }
    }
    Ok(CpuLatency { cpu, summary: Summary::of(&samples_ns), samples_ns, moved_samples })
}
