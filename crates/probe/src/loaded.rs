//! Loaded latency: one CPU chases pointers while the other CPUs stream through memory, throttled by an injection
//! delay, giving MLC's latency-versus-bandwidth curve (`--loaded_latency`).
//!
//! The loaders run the bandwidth kernels over 4 KiB blocks of their streams and spin for the delay (in core
//! cycles, a dependent-add chain, see [`crate::clock`]) after each block, so delay 0 is full load and large
//! delays approach idle. The first point is always "no loaders", the idle latency on the same chain. MLC's delay
//! list is the default sweep. A chaser sample and the loaders' bytes cover the same interval: the chaser runs for
//! `sample`, then raises the stop flag, and each loader reports the bytes it moved and its own elapsed time.
//!
//! With two CPUs (the development VM) there is one loader, which cannot saturate memory: the curve's knee needs a
//! bigger machine; here the sweep's plumbing is what can be tested.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use numadb_placement::{PinGuard, Policy, pin_current_thread};
use numadb_topology::CpuSet;
use serde::{Deserialize, Serialize};

use crate::bandwidth::Streams;
use crate::chain::{Chain, chase_for};
use crate::clock::spin_cycles;
use crate::kernels::{Isa, Traffic};
use crate::latency::{ATTEMPTS_PER_REPETITION_MAX, LatencyOptions};
use crate::matrix::Progress;
use crate::stats::Summary;
use crate::verify::{PlacementCheck, witnessed};
use crate::{ProbeError, huge_page_share};

/// MLC's injection delays, in cycles.
pub const MLC_DELAYS_CYCLES: [u64; 19] =
    [0, 2, 8, 15, 50, 100, 200, 300, 400, 500, 700, 1000, 1300, 1700, 2500, 3500, 5000, 9000, 20000];
/// Bytes per stream a loader moves between two delays.
pub const LOADER_BLOCK_BYTES: usize = 4096;
/// A loader checks its overrun limit every this many blocks.
const BLOCKS_PER_CLOCK_READ: u64 = 64;

/// Settings of a loaded-latency sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedOptions {
    /// The chaser's chain and sampling.
    pub chase: LatencyOptions,
    /// Total loader buffer, split evenly over the loaders.
    pub loader_bytes: usize,
    /// What the loaders do.
    pub traffic: Traffic,
    /// Which kernel variant the loaders run.
    pub isa: Isa,
    /// Injection delays to sweep, in cycles.
    pub delays_cycles: Vec<u64>,
}

/// One point of the curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedPoint {
    /// The loaders' delay after each block; `None` for the idle point (no loaders).
    pub delay_cycles: Option<u64>,
    /// The chaser's latency.
    pub latency_ns: Option<Summary>,
    /// The loaders' total bandwidth (`None` for the idle point).
    pub mb_per_s: Option<Summary>,
    /// Samples discarded because a thread was on another CPU or a loader had not run during them.
    pub moved_samples: usize,
}

/// A loaded-latency curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedCurve {
    /// What was measured and how.
    pub options: LoadedOptions,
    /// The chasing CPU.
    pub chaser_cpu: u32,
    /// The loading CPUs.
    pub loader_cpus: Vec<u32>,
    /// The node of every buffer.
    pub node: u32,
    /// The idle point first, then one per delay.
    pub points: Vec<LoadedPoint>,
    /// Where the chain was.
    pub chain_placement: PlacementCheck,
    /// Where the loaders' buffers were (all of them together).
    pub loader_placement: Option<PlacementCheck>,
    /// Fraction of the chain on transparent huge pages.
    pub huge_page_share: Option<f64>,
}

/// Samples a sweep takes (warm-ups included).
pub fn planned_samples(options: &LoadedOptions) -> u64 {
    ((options.delays_cycles.len() + 1) * (options.chase.repetitions + 1)) as u64
}

/// What a loader reports for one sample.
#[derive(Debug, Clone, Copy)]
struct LoaderSample {
    bytes: u64,
    elapsed: Duration,
    stayed: bool,
}

/// Runs the sweep: the calling thread chases on `chaser_cpu`, one thread per `loader_cpus` loads, all buffers on
/// `node`.
pub fn measure_curve(
    chaser_cpu: u32,
    loader_cpus: &[u32],
    node: u32,
    options: &LoadedOptions,
    progress: &dyn Progress,
) -> Result<LoadedCurve, ProbeError> {
    let options = &LoadedOptions {
        chase: LatencyOptions { layout: options.chase.layout.normalised()?, ..options.chase },
        ..options.clone()
    };
    let chase = &options.chase;
    if chase.repetitions == 0 {
        return Err(ProbeError::Options("at least one repetition is needed".into()));
    }
    let _pin = PinGuard::pin(&CpuSet::from_ids([chaser_cpu]))?;
    progress.advance(0, &format!("building the chaser's chain on node {node}"));
    let chain = Chain::build(&chase.layout, Policy::Node(node), chase.huge_pages, chase.seed)?;
    let chain_placement = PlacementCheck::judge(&chain.buffer().region().page_locations()?, node);
    let huge_share = huge_page_share(chain.buffer().region());

    let loaders = loader_cpus.len();
    let per_loader_bytes = options.loader_bytes.checked_div(loaders).unwrap_or(0);
    let start = Barrier::new(loaders + 1);
    let end = Barrier::new(loaders + 1);
    let stop = AtomicBool::new(false);
    let finished = AtomicBool::new(false);
    // Loaders that have begun the current sample: the chaser starts once all have, so that a loader the OS runs
    // late (a busy machine) does not leave the sample without load.
    let running = AtomicUsize::new(0);
    // The delay of the current point; `u64::MAX` parks the loaders (the idle point).
    let delay = std::sync::atomic::AtomicU64::new(u64::MAX);
    let reports: Mutex<Vec<Option<LoaderSample>>> = Mutex::new(vec![None; loaders]);
    let setup: Mutex<Vec<Result<numadb_placement::PageHistogram, ProbeError>>> = Mutex::new(Vec::new());

    let mut points = Vec::new();
    let result: Result<(), ProbeError> = std::thread::scope(|scope| {
        for (index, &cpu) in loader_cpus.iter().enumerate() {
            let (start, end, stop, finished, delay, reports, setup, running) =
                (&start, &end, &stop, &finished, &delay, &reports, &setup, &running);
            scope.spawn(move || {
                let prepared = pin_current_thread(&CpuSet::from_ids([cpu]))
                    .map_err(ProbeError::from)
                    .and_then(|()| Streams::allocate(per_loader_bytes, options.traffic, node, chase.huge_pages))
                    .and_then(|streams| Ok((streams.page_locations()?, streams)));
                let mut streams = match prepared {
                    Ok((histogram, streams)) => {
                        setup.lock().unwrap().push(Ok(histogram));
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
                    let cycles = delay.load(Ordering::Acquire);
                    let sample = match streams.as_mut() {
                        Some(streams) if cycles != u64::MAX => {
                            running.fetch_add(1, Ordering::AcqRel);
                            Some(load_until_stopped(streams, options, cycles, stop, cpu))
                        }
                        _ => None,
                    };
                    reports.lock().unwrap()[index] = sample;
                    end.wait();
                }
            });
        }
        let waiting_since = Instant::now();
        while setup.lock().unwrap().len() < loaders && waiting_since.elapsed() < Duration::from_secs(600) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let outcome = (|| {
            if let Some(Err(error)) = setup.lock().unwrap().iter().find(|r| r.is_err()) {
                return Err(ProbeError::Options(format!("a loader could not start: {error}")));
            }
            let sweep = std::iter::once(None).chain(options.delays_cycles.iter().map(|&d| Some(d)));
            let mut cursor = chain.start();
            for point_delay in sweep {
                progress.advance(
                    0,
                    &match point_delay {
                        None => "loaded latency: idle".to_string(),
                        Some(d) => format!("loaded latency: delay {d} cycles"),
                    },
                );
                delay.store(point_delay.unwrap_or(u64::MAX), Ordering::Release);
                let mut latencies = Vec::new();
                let mut bandwidths = Vec::new();
                let mut moved_samples = 0;
                for attempt in 0..(chase.repetitions + 1) * ATTEMPTS_PER_REPETITION_MAX {
                    if latencies.len() == chase.repetitions {
                        break;
                    }
                    stop.store(false, Ordering::Release);
                    running.store(0, Ordering::Release);
                    start.wait();
                    if point_delay.is_some() {
                        let waiting_since = Instant::now();
                        while running.load(Ordering::Acquire) < loaders
                            && waiting_since.elapsed() < LOADERS_START_WAIT_MAX
                        {
                            std::thread::yield_now();
                        }
                    }
                    let chased = witnessed(|| chase_for(&chain, cursor, chase.sample));
                    stop.store(true, Ordering::Release);
                    end.wait();
                    // Only now, with every loader back at the barrier, may an error end the sweep.
                    let ((sample, next), witness) = chased?;
                    cursor = next;
                    progress.advance(1, "");
                    if attempt == 0 {
                        continue; // warm-up
                    }
                    let reports = reports.lock().unwrap();
                    let loader_samples: Vec<LoaderSample> = reports.iter().flatten().copied().collect();
                    // A sample during which a loader moved nothing (the OS had not run it yet) was not loaded.
                    let unloaded = point_delay.is_some() && loader_samples.iter().any(|s| s.bytes == 0);
                    if !witness.stayed_on(chaser_cpu) || loader_samples.iter().any(|s| !s.stayed) || unloaded {
                        moved_samples += 1;
                        continue;
                    }
                    latencies.push(sample.latency_ns());
                    if point_delay.is_none() {
                        continue; // the idle point has no loaders and no bandwidth
                    }
                    bandwidths.push(
                        loader_samples
                            .iter()
                            .map(|s| s.bytes as f64 / s.elapsed.as_secs_f64().max(1e-9) / 1e6)
                            .sum::<f64>(),
                    );
                }
                points.push(LoadedPoint {
                    delay_cycles: point_delay,
                    latency_ns: Summary::of(&latencies),
                    mb_per_s: Summary::of(&bandwidths),
                    moved_samples,
                });
            }
            Ok(())
        })();
        finished.store(true, Ordering::Release);
        start.wait();
        outcome
    });
    result?;
    let mut loader_histogram = numadb_placement::PageHistogram::default();
    for histogram in setup.into_inner().unwrap() {
        loader_histogram.add(&histogram?);
    }
    Ok(LoadedCurve {
        options: options.clone(),
        chaser_cpu,
        loader_cpus: loader_cpus.to_vec(),
        node,
        points,
        chain_placement,
        loader_placement: (loaders > 0).then(|| PlacementCheck::judge(&loader_histogram, node)),
        huge_page_share: huge_share,
    })
}

/// How long a sample's chaser waits for every loader to begin before it starts anyway.
const LOADERS_START_WAIT_MAX: Duration = Duration::from_secs(1);

/// A loader's loop for one sample: a block of every stream, then the delay, until the stop flag rises.
fn load_until_stopped(
    streams: &mut Streams,
    options: &LoadedOptions,
    delay_cycles: u64,
    stop: &AtomicBool,
    cpu: u32,
) -> LoaderSample {
    let block = (LOADER_BLOCK_BYTES / 8).min(streams.stream_len());
    let len = streams.stream_len();
    let overrun = crate::bandwidth::sample_overrun_limit(options.chase.sample);
    let result = witnessed(|| {
        let started = Instant::now();
        let mut bytes = 0;
        let mut offset = 0;
        let mut blocks: u64 = 0;
        // The clock is read every BLOCKS_PER_CLOCK_READ blocks only: per 4 KiB block it would cost ~10% of the load.
        while !stop.load(Ordering::Relaxed)
            && (!blocks.is_multiple_of(BLOCKS_PER_CLOCK_READ) || started.elapsed() < overrun)
        {
            blocks += 1;
            let end = (offset + block).min(len);
            bytes += streams.run(options.isa, options.traffic, offset..end);
            offset = if end == len { 0 } else { end };
            std::hint::black_box(spin_cycles(delay_cycles));
        }
        (bytes, started.elapsed())
    });
    match result {
        Ok(((bytes, elapsed), witness)) => LoaderSample { bytes, elapsed, stayed: witness.stayed_on(cpu) },
        Err(_) => LoaderSample { bytes: 0, elapsed: Duration::ZERO, stayed: false },
    }
}
