//! The bandwidth matrix: for every CPU domain × memory node, all the domain's CPUs stream through buffers on the
//! node at once, as in the thesis's tables 3, 4, 7 and 8 (MB/s, MB = 10^6 bytes).
//!
//! One thread per CPU, pinned, each with its own buffer bound to the node (a per-thread buffer, as MLC and
//! likwid-bench use, so that threads never share lines). The buffer size given is the *total* over the threads of
//! a cell, split evenly — likwid-bench's `-w S0:1GB:2` convention, so the two can be compared at the same sizes.
//! Within a thread's share, the kernel's streams (one for read and write, two for copy, three for add) get equal
//! page-aligned parts.
//!
//! A sample: the threads meet at a barrier, each runs its kernel over its buffer in 1 MiB chunks until the
//! coordinator raises the stop flag after `sample`, and records the bytes it moved and its own elapsed time; the
//! cell's figure for the sample is the sum of the threads' rates (MLC's convention). One warm-up sample is
//! discarded; a sample in which any thread was found on another CPU is discarded and counted. The cell's figure
//! is the median over the kept samples.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use numadb_placement::{HugePages, NumaBuffer, PageHistogram, Policy, pin_current_thread};
use numadb_topology::CpuSet;
use serde::{Deserialize, Serialize};

use crate::kernels::{self, Isa, Traffic};
use crate::latency::ATTEMPTS_PER_REPETITION_MAX;
use crate::matrix::{MatrixAxes, Progress};
use crate::stats::Summary;
use crate::verify::{PlacementCheck, witnessed};
use crate::{ProbeError, huge_page_share};

/// Bytes per stream a thread processes between two looks at the stop flag.
pub const CHUNK_BYTES: usize = 1 << 20;
/// Streams are page aligned within a thread's buffer.
const STREAM_ALIGN_BYTES: usize = 4096;
/// How long the coordinator waits for the threads to allocate and fill their buffers.
const SETUP_WAIT_MAX: Duration = Duration::from_secs(600);
/// A streaming thread stops by itself after this many sample durations (plus a second) even if the stop flag never
/// rises, so that a stalled coordinator cannot leave threads streaming forever.
const SAMPLE_OVERRUN_FACTOR: u32 = 4;

/// How long a streaming thread may run in one sample at most (see `SAMPLE_OVERRUN_FACTOR`).
pub fn sample_overrun_limit(sample: Duration) -> Duration {
    sample * SAMPLE_OVERRUN_FACTOR + Duration::from_secs(1)
}

/// The value the write kernel stores and buffers are filled with.
const FILL_VALUE: u64 = 0x0123_4567_89AB_CDEF;

/// Settings of a bandwidth measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BandwidthOptions {
    /// Total buffer over the threads of a cell (split evenly between them).
    pub buffer_bytes: usize,
    /// What the kernel does.
    pub traffic: Traffic,
    /// Which kernel variant runs.
    pub isa: Isa,
    /// Base pages only, or transparent huge pages.
    #[serde(with = "crate::huge_pages_serde")]
    pub huge_pages: HugePages,
    /// Duration of one sample.
    pub sample: Duration,
    /// Samples per cell (after one warm-up sample).
    pub repetitions: usize,
}

/// One (domain, node) cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthCell {
    /// Index of the domain in the axes.
    pub domain: usize,
    /// The memory node.
    pub node: u32,
    /// The CPUs that streamed, one thread each.
    pub cpus: Vec<u32>,
    /// Total MB/s of the cell, one per kept sample.
    pub samples_mb_per_s: Vec<f64>,
    /// Their summary.
    pub mb_per_s: Option<Summary>,
    /// Median MB/s of each thread (same order as `cpus`).
    pub per_thread_mb_per_s: Vec<f64>,
    /// Where the threads' buffers were.
    pub placement: PlacementCheck,
    /// Fraction of the buffers on transparent huge pages.
    pub huge_page_share: Option<f64>,
    /// Samples discarded because a thread was on another CPU.
    pub moved_samples: usize,
}

/// A bandwidth matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthMatrix {
    /// What was measured and how.
    pub options: BandwidthOptions,
    /// Rows and columns.
    pub axes: MatrixAxes,
    /// Row by row.
    pub cells: Vec<BandwidthCell>,
}

impl BandwidthMatrix {
    /// The cell of (domain index, node).
    pub fn cell(&self, domain: usize, node: u32) -> Option<&BandwidthCell> {
        self.cells.iter().find(|c| c.domain == domain && c.node == node)
    }

    /// Whether every cell's buffers were verified on their node.
    pub fn all_verified(&self) -> bool {
        self.cells.iter().all(|c| c.placement.is_verified())
    }

    /// Whether any cell's repetitions disagree by more than 10%.
    pub fn any_disagreement(&self) -> bool {
        self.cells.iter().any(|c| c.mb_per_s.is_some_and(|s| s.disagrees))
    }
}

/// Samples one bandwidth measurement will take (warm-up included).
pub fn planned_samples(axes: &MatrixAxes, options: &BandwidthOptions) -> u64 {
    (axes.domains.len() * axes.nodes.len() * (options.repetitions + 1)) as u64
}

/// Measures the bandwidth matrix over `axes`.
pub fn measure_matrix(
    axes: &MatrixAxes,
    options: &BandwidthOptions,
    progress: &dyn Progress,
) -> Result<BandwidthMatrix, ProbeError> {
    let mut cells = Vec::new();
    for (domain_index, domain) in axes.domains.iter().enumerate() {
        for &node in &axes.nodes {
            progress.advance(0, &format!("{} bandwidth {} to node {node}", options.traffic.name(), domain.name));
            let mut cell = measure_cell(&domain.cpus, node, options, progress)?;
            cell.domain = domain_index;
            cells.push(cell);
        }
    }
    Ok(BandwidthMatrix { options: *options, axes: axes.clone(), cells })
}

/// One thread's buffer, cut into the kernel's streams.
pub struct Streams {
    buffer: NumaBuffer<u64>,
    /// Values per stream.
    stream_len: usize,
    streams: usize,
}

impl Streams {
    /// Allocates `bytes` on `node` for `traffic`'s streams and fills them (which places every page).
    pub fn allocate(bytes: usize, traffic: Traffic, node: u32, huge_pages: HugePages) -> Result<Streams, ProbeError> {
        let streams = traffic.streams();
        let stream_bytes = bytes / streams / STREAM_ALIGN_BYTES * STREAM_ALIGN_BYTES;
        if stream_bytes == 0 {
            return Err(ProbeError::Options(format!(
                "a {bytes} B buffer is too small for {streams} page-aligned streams"
            )));
        }
        let stream_len = stream_bytes / 8;
        let mut buffer = NumaBuffer::<u64>::zeroed(stream_len * streams, Policy::Node(node), huge_pages)?;
        buffer.fill(FILL_VALUE);
        Ok(Streams { buffer, stream_len, streams })
    }

    /// Where the pages are.
    pub fn page_locations(&self) -> Result<PageHistogram, ProbeError> {
        Ok(self.buffer.region().page_locations()?)
    }

    /// Fraction on transparent huge pages.
    pub fn huge_page_share(&self) -> Option<f64> {
        huge_page_share(self.buffer.region())
    }

    /// Values per stream.
    pub fn stream_len(&self) -> usize {
        self.stream_len
    }

    /// Runs `traffic` over values `range` of every stream; returns the bytes read plus written.
    pub fn run(&mut self, isa: Isa, traffic: Traffic, range: std::ops::Range<usize>) -> u64 {
        let len = self.stream_len;
        let values = (range.end - range.start) as u64;
        let data: &mut [u64] = &mut self.buffer;
        match traffic {
            Traffic::Read => {
                std::hint::black_box(kernels::read_sum(isa, &data[range]));
            }
            Traffic::Write => kernels::write(isa, &mut data[range], FILL_VALUE),
            Traffic::Copy => {
                let (destination, source) = data.split_at_mut(len);
                kernels::copy(isa, &mut destination[range.clone()], &source[range]);
            }
            Traffic::Add => {
                let (destination, sources) = data.split_at_mut(len);
                let (left, right) = sources.split_at(len);
                kernels::add(isa, &mut destination[range.clone()], &left[range.clone()], &right[range]);
            }
        }
        values * 8 * self.streams as u64
    }
}

/// What a thread's preparation found: where its buffer is and how much of it is on huge pages.
type ThreadSetup = Result<(PageHistogram, Option<f64>), ProbeError>;

/// What one thread reports for one sample.
#[derive(Debug, Clone, Copy)]
struct ThreadSample {
    bytes: u64,
    elapsed: Duration,
    stayed: bool,
}

/// Streams with one pinned thread per CPU of `cpus` through buffers on `node`.
pub fn measure_cell(
    cpus: &[u32],
    node: u32,
    options: &BandwidthOptions,
    progress: &dyn Progress,
) -> Result<BandwidthCell, ProbeError> {
    if cpus.is_empty() || options.repetitions == 0 {
        return Err(ProbeError::Options("a bandwidth cell needs CPUs and at least one repetition".into()));
    }
    if !options.isa.is_available() {
        return Err(ProbeError::Options(format!("this CPU has no {}", options.isa.name())));
    }
    let per_thread_bytes = options.buffer_bytes / cpus.len();
    let threads = cpus.len();
    // Workers and the coordinator meet at both barriers.
    let start = Barrier::new(threads + 1);
    let end = Barrier::new(threads + 1);
    let stop = AtomicBool::new(false);
    let finished = AtomicBool::new(false);
    let reports: Mutex<Vec<Option<ThreadSample>>> = Mutex::new(vec![None; threads]);
    let setup: Mutex<Vec<ThreadSetup>> = Mutex::new(Vec::new());

    let attempts_max = (options.repetitions + 1) * ATTEMPTS_PER_REPETITION_MAX;
    let mut samples_mb_per_s = Vec::new();
    let mut per_thread_samples: Vec<Vec<f64>> = vec![Vec::new(); threads];
    let mut moved_samples = 0;
    std::thread::scope(|scope| {
        for (index, &cpu) in cpus.iter().enumerate() {
            let (start, end, stop, finished, reports, setup) = (&start, &end, &stop, &finished, &reports, &setup);
            scope.spawn(move || {
                let prepared = pin_current_thread(&CpuSet::from_ids([cpu]))
                    .map_err(ProbeError::from)
                    .and_then(|()| Streams::allocate(per_thread_bytes, options.traffic, node, options.huge_pages))
                    .and_then(|streams| {
                        let histogram = streams.page_locations()?;
                        let share = streams.huge_page_share();
                        Ok((streams, histogram, share))
                    });
                let mut streams = match prepared {
                    Ok((streams, histogram, share)) => {
                        setup.lock().unwrap().push(Ok((histogram, share)));
                        Some(streams)
                    }
                    Err(error) => {
                        setup.lock().unwrap().push(Err(error));
                        None
                    }
                };
                loop {
                    start.wait();
                    if finished.load(Ordering::Acquire) {
                        return;
                    }
                    let sample = streams.as_mut().map(|streams| stream_until_stopped(streams, options, stop, cpu));
                    reports.lock().unwrap()[index] = sample;
                    end.wait();
                }
            });
        }
        // The setup results arrive before the workers' first barrier (allocating and filling gigabytes takes
        // seconds, never minutes).
        let waiting_since = Instant::now();
        while setup.lock().unwrap().len() < threads && waiting_since.elapsed() < SETUP_WAIT_MAX {
            std::thread::sleep(Duration::from_millis(1));
        }
        let setup_failed = {
            let mut setup = setup.lock().unwrap();
            if setup.len() < threads {
                setup.push(Err(ProbeError::Options(format!("threads did not set up within {SETUP_WAIT_MAX:?}"))));
            }
            setup.iter().any(|r| r.is_err())
        };
        if !setup_failed {
            for attempt in 0..attempts_max {
                if samples_mb_per_s.len() == options.repetitions {
                    break;
                }
                stop.store(false, Ordering::Release);
                start.wait();
                std::thread::sleep(options.sample);
                stop.store(true, Ordering::Release);
                end.wait();
                let reports = reports.lock().unwrap();
                let samples: Vec<ThreadSample> = reports.iter().flatten().copied().collect();
                progress.advance(1, "");
                if attempt == 0 {
                    continue; // warm-up
                }
                if samples.len() < threads || samples.iter().any(|s| !s.stayed) {
                    moved_samples += 1;
                    continue;
                }
                let rates: Vec<f64> =
                    samples.iter().map(|s| s.bytes as f64 / s.elapsed.as_secs_f64().max(1e-9) / 1e6).collect();
                for (thread, &rate) in rates.iter().enumerate() {
                    per_thread_samples[thread].push(rate);
                }
                samples_mb_per_s.push(rates.iter().sum());
            }
        }
        finished.store(true, Ordering::Release);
        start.wait();
    });

    let mut histogram = PageHistogram::default();
    let mut shares = Vec::new();
    for result in setup.into_inner().unwrap() {
        let (thread_histogram, share) = result?;
        histogram.add(&thread_histogram);
        shares.extend(share);
    }
    let per_thread_mb_per_s =
        per_thread_samples.iter().map(|s| Summary::of(s).map_or(f64::NAN, |summary| summary.median)).collect();
    Ok(BandwidthCell {
        domain: 0,
        node,
        cpus: cpus.to_vec(),
        mb_per_s: Summary::of(&samples_mb_per_s),
        samples_mb_per_s,
        per_thread_mb_per_s,
        placement: PlacementCheck::judge(&histogram, node),
        huge_page_share: if shares.is_empty() { None } else { Some(shares.iter().sum::<f64>() / shares.len() as f64) },
        moved_samples,
    })
}

/// A cell's buffers, allocated and filled once and kept between samples, for callers that interleave short samples
/// with other work: a benchmark that judges each timed run against a reading taken right beside it, because on a
/// shared machine other tenants' bursts come and go within seconds. [`measure_cell`] allocates and fills its
/// buffers on every call, which takes longer than the samples themselves.
///
/// A sample is [`measure_cell`]'s, with the same kernel, threads, pinning and sum of the threads' rates; the
/// threads are started for each sample, so nothing streams between samples.
pub struct KeptCell {
    cpus: Vec<u32>,
    streams: Vec<Streams>,
    options: BandwidthOptions,
}

impl KeptCell {
    /// Allocates and fills a buffer per CPU of `cpus` on `node` (`options.buffer_bytes` split between them) and
    /// takes one unmeasured sample.
    pub fn allocate(cpus: &[u32], node: u32, options: &BandwidthOptions) -> Result<KeptCell, ProbeError> {
        if cpus.is_empty() {
            return Err(ProbeError::Options("a bandwidth cell needs CPUs".into()));
        }
        if !options.isa.is_available() {
            return Err(ProbeError::Options(format!("this CPU has no {}", options.isa.name())));
        }
        let per_thread_bytes = options.buffer_bytes / cpus.len();
        let streams = cpus
            .iter()
            .map(|_| Streams::allocate(per_thread_bytes, options.traffic, node, options.huge_pages))
            .collect::<Result<Vec<_>, _>>()?;
        let mut cell = KeptCell { cpus: cpus.to_vec(), streams, options: *options };
        cell.sample()?;
        Ok(cell)
    }

    /// One sample of `options.sample`: the sum of the threads' rates in MB/s, or `None` when a thread was found on
    /// another CPU than its own (the sample is then not comparable).
    pub fn sample(&mut self) -> Result<Option<f64>, ProbeError> {
        let options = &self.options;
        let start = Barrier::new(self.cpus.len() + 1);
        let stop = AtomicBool::new(false);
        let samples: Vec<Result<ThreadSample, ProbeError>> = std::thread::scope(|scope| {
            let threads: Vec<_> = self
                .streams
                .iter_mut()
                .zip(&self.cpus)
                .map(|(streams, &cpu)| {
                    let (start, stop) = (&start, &stop);
                    scope.spawn(move || {
                        let pinned = pin_current_thread(&CpuSet::from_ids([cpu]));
                        // Every thread reaches the barrier, pinned or not, so that the coordinator never waits forever.
                        start.wait();
                        pinned?;
                        Ok(stream_until_stopped(streams, options, stop, cpu))
                    })
                })
                .collect();
            start.wait();
            std::thread::sleep(options.sample);
            stop.store(true, Ordering::Release);
            threads.into_iter().map(|t| t.join().expect("a streaming thread panicked")).collect()
        });
        let mut total_mb_per_s = 0.0;
        for sample in samples {
            let sample = sample?;
            if !sample.stayed {
                return Ok(None);
            }
            total_mb_per_s += sample.bytes as f64 / sample.elapsed.as_secs_f64().max(1e-9) / 1e6;
        }
        Ok(Some(total_mb_per_s))
    }
}

/// The worker's loop for one sample: whole chunks until the stop flag rises.
fn stream_until_stopped(
    streams: &mut Streams,
    options: &BandwidthOptions,
    stop: &AtomicBool,
    cpu: u32,
) -> ThreadSample {
    let chunk = (CHUNK_BYTES / 8).min(streams.stream_len());
    let len = streams.stream_len();
    let overrun = sample_overrun_limit(options.sample);
    let result = witnessed(|| {
        let started = Instant::now();
        let mut bytes = 0;
        let mut offset = 0;
        while !stop.load(Ordering::Relaxed) && started.elapsed() < overrun {
            let end = (offset + chunk).min(len);
            bytes += streams.run(options.isa, options.traffic, offset..end);
            offset = if end == len { 0 } else { end };
        }
        (bytes, started.elapsed())
    });
    match result {
        Ok(((bytes, elapsed), witness)) => ThreadSample { bytes, elapsed, stayed: witness.stayed_on(cpu) },
        Err(_) => ThreadSample { bytes: 0, elapsed: Duration::ZERO, stayed: false },
    }
}
