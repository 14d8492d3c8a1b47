//! Read bandwidth over memory someone else owns: the very bytes a scan reads, in the order it reads them.
//!
//! The bandwidth matrix measures fresh buffers, which answers "what can this machine stream?". A scan's rate is
//! also worth judging against the same question asked of its own bytes: the memory a table was given need not
//! stream as fast as a fresh buffer (on a virtual machine the host decides where the guest's memory really is),
//! and a scan that skips blocks reads scattered pieces, which no streaming kernel is measured on. Here the caller hands over the
//! spans (groups of slices, one group per unit of work, like a scan's morsels); one pinned thread per CPU takes
//! groups from a shared counter, as the scheduler's workers take morsels, and reads each span with the prober's
//! read kernel, asking for later spans ahead of time in three ways ([`Ahead`]); the best one counts. The
//! measurement is the scan's memory access without its decoding.

use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use numadb_placement::pin_current_thread;
use numadb_topology::CpuSet;

use crate::ProbeError;
use crate::kernels::{self, Isa};
use crate::stats::Summary;
use crate::verify::witnessed;

/// How later spans are asked for while one is read: with scattered short spans (a selective scan's blocks) the
/// hardware prefetchers cannot know what comes next, and which hint serves best differs between machines (a
/// throwaway C loop reading a random fifth of 3.3 KB blocks on an AMD EPYC guest: spread non-temporal hints 69% of
/// a streaming read, the whole span two ahead into L2 59%, no hints 47%; on an AMD EPYC (Zen 5) guest in stop 45,
/// the first three lines of the span eight ahead into L1 and nothing more, best of 15 passes: 38-41 GB/s against
/// 43-47 GB/s streaming, where every line two ahead into L1 got 29 GB/s and no hints 26-33 GB/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ahead {
    /// Before a span is read, the span [`SPANS_AHEAD`] places later is asked into L2 (the scan loop's depth).
    L2Burst,
    /// While a span is read, 512 bytes at a time, the same bytes of the next span are asked for with the
    /// non-temporal hint.
    NtaSpread,
    /// Before a span is read, the first [`HEAD_LINES`] lines of the span [`HEADS_AHEAD`] places later are asked
    /// into L1, and nothing else. This is fast only with a kernel as light as [`kernels::read_sum`]'s (about two
    /// instructions per 64-byte line), whose loads the out-of-order window carries several spans ahead: the
    /// demand loads, not the hints, keep the lines in flight. Measured in stop 46 in one process over the blocks
    /// the thesis query reads at range_pred 10 000 (50 million rows, 2 threads, heads 8 ahead): this kernel 27.3
    /// GB/s, one load per line 19.9, a sum of four 128-bit loads and adds per line 14.6, the scan's decoding
    /// kernel 1.4-1.7 times slower than with its own prefetching. So this way's figure bounds what a decoding
    /// loop can get from the memory from above; it is not a rate such a loop can reach.
    Heads,
}

/// Every way of asking ahead, in the order [`read_spans`] tries them.
pub const AHEADS: [Ahead; 3] = [Ahead::L2Burst, Ahead::NtaSpread, Ahead::Heads];

/// How many spans ahead of the one being read [`Ahead::Heads`] asks for a span's first lines.
pub const HEADS_AHEAD: usize = 8;

/// How many lines of a span [`Ahead::Heads`] asks for.
pub const HEAD_LINES: usize = 3;

/// How many spans ahead of the one being read [`Ahead::L2Burst`] asks for (the scan loop's two blocks ahead).
pub const SPANS_AHEAD: usize = 2;

/// At most this many bytes of a span are asked for ahead of time: a long span streams by itself once begun, and
/// asking for all of it would only evict what is being read.
const AHEAD_BYTES_MAX: usize = 16 << 10;

/// Words [`Ahead::NtaSpread`] reads between two hints (8 lines).
const SPREAD_WORDS: usize = 64;

/// The best of the ways of asking ahead.
#[derive(Debug, Clone)]
pub struct SpansReading {
    /// Bytes/s over its measured passes.
    pub summary: Summary,
    /// Passes discarded (of every way) because a thread was found on another CPU than its own.
    pub discarded: usize,
}

/// Reads every span of every group with one pinned thread per CPU of `cpus`, for each [`Ahead`] `repetitions`
/// times after one unmeasured pass, and keeps the one with the higher median rate in bytes/s (all bytes of all
/// spans over the time from the threads' common start to the last one's end). As everywhere in the prober, each
/// thread's CPU is witnessed before and after its pass, and a pass in which one was elsewhere is discarded.
pub fn read_spans(
    cpus: &[u32],
    groups: &[Vec<&[u64]>],
    isa: Isa,
    repetitions: usize,
) -> Result<SpansReading, ProbeError> {
    if cpus.is_empty() || repetitions == 0 {
        return Err(ProbeError::Options("reading spans needs at least one CPU and one repetition".into()));
    }
    let isa = isa.or_best_available();
    let bytes: usize = groups.iter().flatten().map(|span| std::mem::size_of_val(*span)).sum();
    if bytes == 0 {
        return Err(ProbeError::Options("no bytes to read".into()));
    }
    let mut best: Option<Summary> = None;
    let mut discarded = 0;
    for ahead in AHEADS {
        let mut rates = Vec::with_capacity(repetitions);
        for pass in 0..=repetitions {
            match one_pass(cpus, groups, isa, ahead)? {
                None => discarded += 1,
                Some(seconds) if pass > 0 && seconds > 0.0 => rates.push(bytes as f64 / seconds),
                Some(_) => {}
            }
        }
        if let Some(summary) = Summary::of(&rates)
            && best.as_ref().is_none_or(|b| summary.median > b.median)
        {
            best = Some(summary);
        }
    }
    let summary = best.ok_or_else(|| {
        ProbeError::Options(format!("no pass could be measured ({discarded} discarded: a thread left its CPU)"))
    })?;
    Ok(SpansReading { summary, discarded })
}

/// One pass over all groups: the seconds from the threads' common start to the last one's end, or `None` when a
/// thread was found on another CPU than its own.
fn one_pass(cpus: &[u32], groups: &[Vec<&[u64]>], isa: Isa, ahead: Ahead) -> Result<Option<f64>, ProbeError> {
    let next = AtomicUsize::new(0);
    let start = Barrier::new(cpus.len());
    let results: Vec<Result<Option<(Instant, Instant)>, ProbeError>> = std::thread::scope(|scope| {
        let threads: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let (next, start) = (&next, &start);
                scope.spawn(move || {
                    let pinned = pin_current_thread(&CpuSet::from_ids([cpu]));
                    // Every thread reaches the barrier, pinned or not, so that none waits forever.
                    start.wait();
                    pinned?;
                    let ((began, sum), witness) = witnessed(|| {
                        let began = Instant::now();
                        let mut sum = 0u64;
                        while let Some(group) = groups.get(next.fetch_add(1, Ordering::Relaxed)) {
                            sum = sum.wrapping_add(read_group(group, isa, ahead));
                        }
                        (began, sum)
                    })?;
                    std::hint::black_box(sum);
                    Ok(witness.stayed_on(cpu).then(|| (began, Instant::now())))
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().expect("a span reader panicked")).collect()
    });
    let mut window: Option<(Instant, Instant)> = None;
    for result in results {
        let Some((began, ended)) = result? else { return Ok(None) };
        window = Some(window.map_or((began, ended), |(b, e)| (b.min(began), e.max(ended))));
    }
    Ok(window.map(|(began, ended)| ended.duration_since(began).as_secs_f64()))
}

/// Reads a group's spans in order, calling `ask` on the span `distance` places after each one just before it is
/// read (and on the first `distance` spans before any).
fn read_asking_ahead(group: &[&[u64]], isa: Isa, distance: usize, ask: impl Fn(&[u64])) -> u64 {
    group.iter().take(distance).for_each(|span| ask(span));
    let mut sum = 0u64;
    for (index, span) in group.iter().enumerate() {
        if let Some(later) = group.get(index + distance) {
            ask(later);
        }
        sum = sum.wrapping_add(kernels::read_sum(isa, span));
    }
    sum
}

/// Reads a group's spans in order, asking for later ones as `ahead` says.
fn read_group(group: &[&[u64]], isa: Isa, ahead: Ahead) -> u64 {
    let head = |span: &'_ [u64]| span.len().min(AHEAD_BYTES_MAX / 8);
    let mut sum = 0u64;
    match ahead {
        Ahead::L2Burst => {
            sum = read_asking_ahead(group, isa, SPANS_AHEAD, |span| kernels::prefetch_l2(&span[..head(span)]));
        }
        Ahead::Heads => {
            let first_lines = |span: &[u64]| span.len().min(HEAD_LINES * 8);
            sum = read_asking_ahead(group, isa, HEADS_AHEAD, |span| kernels::prefetch_l1(&span[..first_lines(span)]));
        }
        Ahead::NtaSpread => {
            for (index, span) in group.iter().enumerate() {
                let next = group.get(index + 1).map_or(&[][..], |next| &next[..head(next)]);
                for (piece, chunk) in span.chunks(SPREAD_WORDS).enumerate() {
                    if let Some(later) = next.chunks(SPREAD_WORDS).nth(piece) {
                        kernels::prefetch_nta(later);
                    }
                    sum = sum.wrapping_add(kernels::read_sum(isa, chunk));
                }
            }
        }
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_every_span_and_refuses_nothing_to_do() {
        let data: Vec<u64> = (0..1 << 16).collect();
        let groups: Vec<Vec<&[u64]>> = data.chunks(4096).map(|c| c.chunks(500).collect()).collect();
        let reading = read_spans(&[0], &groups, Isa::Scalar, 3).unwrap();
        assert_eq!(reading.summary.samples, 3);
        assert_eq!(reading.discarded, 0, "a pinned thread stays on its CPU");
        assert!(reading.summary.median > 0.0);
        assert!(read_spans(&[], &groups, Isa::Scalar, 3).is_err());
        assert!(read_spans(&[0], &groups, Isa::Scalar, 0).is_err());
        assert!(read_spans(&[0], &[], Isa::Scalar, 1).is_err(), "no bytes make no rate");
    }

    #[test]
    fn a_groups_spans_are_each_read_once() {
        let data: Vec<u64> = vec![1; 1 << 12];
        let groups: Vec<Vec<&[u64]>> = data.chunks(256).map(|c| vec![c]).collect();
        for ahead in AHEADS {
            let total: u64 = groups.iter().map(|g| read_group(g, Isa::Scalar, ahead)).sum();
            assert_eq!(total, 1 << 12, "{ahead:?}");
        }
    }
}
