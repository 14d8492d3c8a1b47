//! Reference measurements of the memory system taken in the same run as a benchmark: a STREAM-style read
//! (the bandwidth a scan can hope for) and a pointer chase (the latency an index probe pays per miss).

use std::time::Instant;

use numadb_placement::{HugePages, NumaBuffer, Policy, pin_current_thread};
use numadb_topology::CpuSet;

/// Repetitions of the reference measurements (the best is kept, as STREAM does).
const REFERENCE_REPETITIONS: usize = 5;

#[inline(never)]
fn sum_words(words: &[u64]) -> u64 {
    let mut lanes = [0u64; 8];
    for chunk in words.chunks_exact(8) {
        for (lane, &word) in lanes.iter_mut().zip(chunk) {
            *lane = lane.wrapping_add(word);
        }
    }
    lanes.iter().fold(0, |a, &b| a.wrapping_add(b))
}

/// Read bandwidth in bytes/s of `cpus.len()` threads, each pinned to one of `cpus` and summing its own
/// first-touch buffer; `total_bytes` is split between them. Best of five.
pub fn read_bandwidth(cpus: &CpuSet, total_bytes: usize) -> f64 {
    let threads = cpus.len().max(1);
    let words_per_thread = total_bytes / 8 / threads;
    let mut best = f64::MAX;
    let barrier = std::sync::Barrier::new(threads);
    let buffers: Vec<std::sync::Mutex<Option<NumaBuffer<u64>>>> =
        (0..threads).map(|_| std::sync::Mutex::new(None)).collect();
    for repetition in 0..REFERENCE_REPETITIONS {
        let started = std::sync::Mutex::new(None::<Instant>);
        std::thread::scope(|scope| {
            for (thread, cpu) in cpus.iter().enumerate() {
                let (barrier, buffers, started) = (&barrier, &buffers, &started);
                scope.spawn(move || {
                    let _ = pin_current_thread(&CpuSet::from_ids([cpu]));
                    let mut slot = buffers[thread].lock().unwrap_or_else(|p| p.into_inner());
                    if repetition == 0 {
                        let mut buffer =
                            NumaBuffer::zeroed(words_per_thread, Policy::FirstTouch, HugePages::Transparent)
                                .expect("a reference buffer");
                        buffer.iter_mut().enumerate().for_each(|(i, w)| *w = i as u64);
                        *slot = Some(buffer);
                    }
                    barrier.wait();
                    started.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert_with(Instant::now);
                    let total = sum_words(slot.as_ref().expect("allocated in the first repetition"));
                    std::hint::black_box(total);
                });
            }
        });
        let seconds =
            started.into_inner().unwrap_or_else(|p| p.into_inner()).map_or(f64::MAX, |s| s.elapsed().as_secs_f64());
        best = best.min(seconds);
    }
    (words_per_thread * threads * 8) as f64 / best
}

/// Nanoseconds per dependent load chasing a random cyclic permutation of 64-byte lines through `bytes` of memory
/// with 4 KiB pages (a TLB miss on most loads, as in an index probe over a large table).
pub fn chase_latency_ns(bytes: usize) -> f64 {
    const LINE_WORDS: usize = 8;
    let lines = bytes / 64;
    let mut buffer =
        NumaBuffer::<u64>::zeroed(lines * LINE_WORDS, Policy::FirstTouch, HugePages::Never).expect("a chase buffer");
    // Sattolo's algorithm: a single cycle through every line.
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    for i in (1..lines).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let j = (state % i as u64) as usize;
        order.swap(i, j);
    }
    for (position, &line) in order.iter().enumerate() {
        let next = order[(position + 1) % lines];
        buffer[line as usize * LINE_WORDS] = u64::from(next) * LINE_WORDS as u64;
    }
    let hops = lines.min(20_000_000);
    let mut best = f64::MAX;
    for _ in 0..REFERENCE_REPETITIONS.min(3) {
        let started = Instant::now();
        let mut at = 0u64;
        for _ in 0..hops {
            at = buffer[at as usize];
        }
        std::hint::black_box(at);
        best = best.min(started.elapsed().as_secs_f64() * 1e9 / hops as f64);
    }
    best
}
