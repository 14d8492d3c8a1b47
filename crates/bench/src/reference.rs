//! Reference measurements of the memory system taken in the same run as a benchmark, by `numadb probe`'s own
//! kernels: the read bandwidth a scan can hope for, and the latency an index probe pays per miss. Using the
//! prober (rather than a second, simpler kernel) means the engine's "fraction of the read bandwidth" is a fraction
//! of exactly what `numadb probe bandwidth` reports on the same machine. The same kernel also reads a scan's own
//! bytes in the scan's order ([`read_spans_bandwidth`]): what the memory gives that very access, decoding aside.

use std::time::Duration;

use numadb_placement::{HugePages, Policy};
use numadb_probe::bandwidth::{BandwidthOptions, KeptCell, measure_cell};
use numadb_probe::latency::{LatencyOptions, measure_cpu};
use numadb_probe::{Chain, ChainLayout, Isa, NoProgress, Traffic};
use numadb_topology::{DomainGranularity, Topology};

/// Samples per reference figure (after the prober's warm-up sample); the median is kept.
const REFERENCE_REPETITIONS: usize = 5;

/// Read bandwidth in bytes/s as the prober measures it: each NUMA domain's allowed CPUs stream together (one
/// pinned thread each, the widest kernel this CPU runs) through buffers on the domain's own node, `total_bytes`
/// per domain; the domains' medians are summed, since a scan spread over every domain reads from all of them.
pub fn read_bandwidth(topology: &Topology, total_bytes: usize) -> Result<f64, String> {
    let options = read_options(total_bytes, Duration::from_millis(200), REFERENCE_REPETITIONS);
    let mut total_mb_per_s = 0.0;
    for (cpus, node) in domain_cells(topology)? {
        let cell = measure_cell(&cpus, node, &options, &NoProgress).map_err(|e| e.to_string())?;
        total_mb_per_s += cell.mb_per_s.map_or(0.0, |s| s.median);
    }
    if total_mb_per_s <= 0.0 {
        return Err("no domain with an allowed CPU and a memory node to measure".into());
    }
    Ok(total_mb_per_s * 1e6)
}

/// The reference's settings: the widest read kernel this CPU runs, over transparent huge pages.
fn read_options(total_bytes: usize, sample: Duration, repetitions: usize) -> BandwidthOptions {
    BandwidthOptions {
        buffer_bytes: total_bytes,
        traffic: Traffic::Read,
        isa: Isa::best(),
        huge_pages: HugePages::Transparent,
        sample,
        repetitions,
    }
}

/// Each NUMA domain's allowed CPUs and its first memory node, for the domains with both.
fn domain_cells(topology: &Topology) -> Result<Vec<(Vec<u32>, u32)>, String> {
    let domains = topology.domains(DomainGranularity::Node).map_err(|e| e.to_string())?;
    Ok(domains
        .domains
        .iter()
        .filter_map(|domain| {
            let cpus: Vec<u32> = domain.cpus.iter().filter(|&c| topology.allowed.cpus.contains(c)).collect();
            let node = domain.memory_nodes.iter().next()?;
            (!cpus.is_empty()).then_some((cpus, node))
        })
        .collect())
}

/// The read bandwidth of [`read_bandwidth`], sampled briefly and as often as wanted over buffers kept between
/// samples: the reading a benchmark takes right beside each timed run. Other tenants of a shared machine take
/// bandwidth in bursts lasting from a fraction of a second to several seconds, so a reading taken seconds away
/// from a run may have seen another machine than the run did.
pub struct NearbyReference {
    cells: Vec<KeptCell>,
}

/// How long one [`NearbyReference`] sample streams: about two of the thesis query's runs at 50 million rows.
const NEARBY_SAMPLE: Duration = Duration::from_millis(100);

/// Samples a thread moved in before [`NearbyReference::sample`] gives up.
const NEARBY_ATTEMPTS_MAX: usize = 5;

impl NearbyReference {
    /// Allocates and fills `total_bytes` per domain, as [`read_bandwidth`] does.
    pub fn new(topology: &Topology, total_bytes: usize) -> Result<NearbyReference, String> {
        let options = read_options(total_bytes, NEARBY_SAMPLE, 1);
        let cells = domain_cells(topology)?
            .into_iter()
            .map(|(cpus, node)| KeptCell::allocate(&cpus, node, &options).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        if cells.is_empty() {
            return Err("no domain with an allowed CPU and a memory node to measure".into());
        }
        Ok(NearbyReference { cells })
    }

    /// One sample in bytes/s, the domains one after the other and summed.
    pub fn sample(&mut self) -> Result<f64, String> {
        let mut total_mb_per_s = 0.0;
        for cell in &mut self.cells {
            let mut attempts = 0;
            total_mb_per_s += loop {
                attempts += 1;
                match cell.sample().map_err(|e| e.to_string())? {
                    Some(mb_per_s) => break mb_per_s,
                    None if attempts < NEARBY_ATTEMPTS_MAX => continue,
                    None => return Err(format!("a streaming thread left its CPU in {attempts} samples running")),
                }
            };
        }
        Ok(total_mb_per_s * 1e6)
    }
}

/// Read bandwidth in bytes/s of the prober's kernel over `groups` of spans (a scan's morsels, each the byte runs it
/// reads, in order), one pinned thread per allowed CPU taking groups as the scan's workers take morsels; the median
/// of `REFERENCE_REPETITIONS` passes after an unmeasured one, with the best way of asking for later spans.
pub fn read_spans_bandwidth(topology: &Topology, groups: &[Vec<&[u64]>]) -> Result<f64, String> {
    let cpus: Vec<u32> = topology.allowed.cpus.iter().collect();
    let reading = numadb_probe::spans::read_spans(&cpus, groups, Isa::best(), REFERENCE_REPETITIONS)
        .map_err(|e| e.to_string())?;
    Ok(reading.summary.median)
}

/// Idle load-to-use latency in ns as the prober measures it: the first allowed CPU chasing a random chain through
/// `bytes` on its own node with 4 KiB pages and no TLB locality (every hop may miss the TLB, as an index probe
/// over a large table does); the median of the samples.
pub fn chase_latency_ns(topology: &Topology, bytes: usize) -> Result<f64, String> {
    let cpu = topology.allowed.cpus.iter().next().ok_or("no CPU this process may use")?;
    let node = topology.cpu(cpu).and_then(|c| c.node).ok_or_else(|| format!("CPU {cpu} has no node"))?;
    let layout = ChainLayout { buffer_bytes: bytes, stride_bytes: 64, window_bytes: bytes };
    let chain = Chain::build(&layout, Policy::Node(node), HugePages::Never, 42).map_err(|e| e.to_string())?;
    let options = LatencyOptions {
        layout,
        huge_pages: HugePages::Never,
        sample: Duration::from_millis(200),
        repetitions: REFERENCE_REPETITIONS,
        seed: 42,
    };
    let measured = measure_cpu(&chain, cpu, &options, &NoProgress).map_err(|e| e.to_string())?;
    measured.summary.map(|s| s.median).ok_or_else(|| "every latency sample was discarded (the thread moved)".into())
}
