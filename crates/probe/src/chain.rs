//! Pointer chasing: the latency kernel and the chains it follows.
//!
//! # What is measured
//! A load whose address depends on the previous load cannot start before that load completes, so a thread that
//! follows a chain of pointers (`p = *p`) through lines the caches do not hold takes one full memory latency per
//! hop. Time per hop over a long sample is the idle load-to-use latency — provided the hardware gets no help:
//!
//! - **Prefetchers.** A chain in address order is a stream, which the stream prefetchers fetch ahead (lmbench's
//!   default `lat_mem_rd` measures that, not latency). The chain is therefore a *random* cyclic permutation.
//! - **Adjacent-line prefetch.** Intel's spatial prefetcher completes each 128-byte pair of lines, and other cores
//!   fetch neighbours too; if the chain later visits the neighbour while it is still cached, the hop is a cache hit
//!   (multichase with a 64-byte stride reads 103–111 ns on the development VM where the 256-byte stride reads
//!   139–147 ns). So the chain makes `stride / 64` *passes* over the buffer: each pass visits one line in every
//!   `stride`-sized block, and the passes are joined into one cycle. Lines adjacent in memory are a whole pass
//!   apart in time, long evicted for buffers larger than the caches, and yet every line of the buffer is visited
//!   exactly once per cycle, so the working set is the whole buffer (which the cache curve needs). Which line of a
//!   block a pass visits is rotated per block (multichase's "mixer"), so no pass favours one line offset.
//! - **TLB misses.** A hop to a random line of a 1 GiB buffer of 4 KiB pages is also a TLB miss and a page walk
//!   (multichase `-T 1g`: 354–397 ns on the development VM against 139–147 ns with locality). Whether that belongs
//!   in "memory latency" is a choice, so it is an option: the buffer is cut into *windows* (default 256 KiB, 64
//!   pages, multichase's default); a pass visits the windows in random order and all of a window's blocks, in random
//!   order, before leaving it. A window equal to the buffer gives fully random hops.
//!
//! # Why raw pointers
//! The chain stores absolute addresses and the kernel is `p = *p` on a raw pointer, compiled to `mov rax, [rax]`.
//! An index-based chain (`i = chain[i]`) compiles to a load with an index register, which costs one more cycle on
//! many Intel cores for L1 hits (the 4-cycle fast path needs a simple base+displacement address) and would make
//! the L1 plateau disagree with the documented load-to-use latency. The unsafe dereference is confined to
//! [`Chain::chase`]; every address a chain holds was written by [`Chain::build`] and points into the chain's own
//! buffer, which the chain owns.

use std::time::{Duration, Instant};

use numadb_placement::{HugePages, NumaBuffer, PlacementError, Policy};

use crate::rng::{SplitMix64, mix};

/// The unit the caches move.
pub const LINE_BYTES: usize = 64;
/// 64-bit words in a line.
const WORDS_PER_LINE: usize = LINE_BYTES / 8;
/// Hops per iteration of the unrolled kernel. A clock read every block of iterations, never per hop.
pub const HOPS_PER_ITERATION: u64 = 64;
/// A chain may not have more lines than a `u32` counts (256 GiB of buffer).
pub const CHAIN_LINES_MAX: usize = u32::MAX as usize;
/// The smallest chain: fewer lines would not be a chain.
pub const CHAIN_LINES_MIN: usize = 2;
/// A timed block aims at this long, so that the clock's own cost (~25 ns) is below 0.01% of it.
const BLOCK_TARGET: Duration = Duration::from_millis(1);
/// Iterations in the first, calibrating block.
const CALIBRATION_ITERATIONS: u64 = 16;
/// Bound on the blocks of one sample, whatever the clock says.
const BLOCKS_PER_SAMPLE_MAX: u64 = 1 << 24;

/// The shape of a chain: how big, how spread, how TLB-friendly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChainLayout {
    /// Buffer size; rounded down to a multiple of `stride_bytes`.
    pub buffer_bytes: usize,
    /// Each pass visits one line per block of this many bytes (a multiple of 64; 64 = every line in one pass).
    pub stride_bytes: usize,
    /// TLB locality: a pass finishes a window of this many bytes before moving on. `buffer_bytes` or more means
    /// fully random hops across the whole buffer.
    pub window_bytes: usize,
}

/// Why a chain cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// A layout that makes no chain.
    #[error("invalid chain layout: {0}")]
    Layout(String),
    /// The buffer could not be placed.
    #[error(transparent)]
    Placement(#[from] PlacementError),
}

impl ChainLayout {
    /// Multichase's defaults: 256-byte stride, 256 KiB windows.
    pub fn new(buffer_bytes: usize) -> Self {
        Self { buffer_bytes, stride_bytes: 256, window_bytes: 256 << 10 }
    }

    /// Checks the layout and returns the normalised one (buffer rounded to the stride, window to the stride and
    /// capped at the buffer).
    pub fn normalised(&self) -> Result<ChainLayout, ChainError> {
        let stride = self.stride_bytes;
        if stride == 0 || !stride.is_multiple_of(LINE_BYTES) {
            return Err(ChainError::Layout(format!("the stride ({stride} B) must be a positive multiple of 64 B")));
        }
        let buffer = self.buffer_bytes / stride * stride;
        let lines = buffer / LINE_BYTES;
        if lines < CHAIN_LINES_MIN || buffer / stride < 1 {
            return Err(ChainError::Layout(format!(
                "a buffer of {} B with a {stride} B stride holds fewer than {CHAIN_LINES_MIN} lines",
                self.buffer_bytes
            )));
        }
        if lines > CHAIN_LINES_MAX {
            return Err(ChainError::Layout(format!("a buffer of {buffer} B has more than {CHAIN_LINES_MAX} lines")));
        }
        if self.window_bytes < stride {
            return Err(ChainError::Layout(format!(
                "the TLB window ({} B) must hold at least one stride ({stride} B)",
                self.window_bytes
            )));
        }
        let window = (self.window_bytes / stride * stride).min(buffer);
        Ok(ChainLayout { buffer_bytes: buffer, stride_bytes: stride, window_bytes: window })
    }

    /// Lines in the chain (every line of the buffer).
    pub fn lines(&self) -> usize {
        self.buffer_bytes / LINE_BYTES
    }

    /// Passes over the buffer (lines per stride block).
    pub fn passes(&self) -> usize {
        self.stride_bytes / LINE_BYTES
    }

    /// Stride blocks in the buffer.
    pub fn blocks(&self) -> usize {
        self.buffer_bytes / self.stride_bytes
    }

    /// Blocks per window.
    pub fn blocks_per_window(&self) -> usize {
        self.window_bytes / self.stride_bytes
    }

    /// Windows in the buffer (the last may be partial).
    pub fn windows(&self) -> usize {
        self.blocks().div_ceil(self.blocks_per_window())
    }
}

/// Calls `visit` with every line index of a normalised layout, once each, in chain order.
///
/// The order: for each pass, the windows in a fresh random order; in each window, its blocks in a fresh random
/// order; in each block, the line `(pass + rotation(block)) % passes`, where the rotation is a fixed hash of the
/// block, so the passes together visit every line of every block exactly once.
pub fn visit_in_chain_order(layout: &ChainLayout, seed: u64, mut visit: impl FnMut(usize)) {
    let mut rng = SplitMix64::new(seed);
    let passes = layout.passes();
    let blocks = layout.blocks();
    let per_window = layout.blocks_per_window();
    let mut window_order: Vec<u32> = (0..layout.windows() as u32).collect();
    let mut block_order: Vec<u32> = Vec::with_capacity(per_window);
    for pass in 0..passes {
        rng.shuffle(&mut window_order);
        for &window in &window_order {
            let first = window as usize * per_window;
            let end = (first + per_window).min(blocks);
            block_order.clear();
            block_order.extend(first as u32..end as u32);
            rng.shuffle(&mut block_order);
            for &block in &block_order {
                let rotation = (mix(u64::from(block) ^ seed) % passes as u64) as usize;
                visit(block as usize * passes + (pass + rotation) % passes);
            }
        }
    }
}

/// Where a chase stands: an address inside one chain. Only a [`Chain`] makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainCursor {
    address: usize,
    chain_base: usize,
}

/// A pointer-chase chain in a NUMA-placed buffer.
pub struct Chain {
    buffer: NumaBuffer<u64>,
    layout: ChainLayout,
    start: usize,
}

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chain").field("layout", &self.layout).field("buffer", &self.buffer).finish()
    }
}

impl Chain {
    /// Places a buffer by `policy` and threads a chain of `layout` through it. Every line is written, so every
    /// page is allocated (on the policy's node) when this returns.
    pub fn build(layout: &ChainLayout, policy: Policy, huge_pages: HugePages, seed: u64) -> Result<Chain, ChainError> {
        let layout = layout.normalised()?;
        let buffer = NumaBuffer::<u64>::zeroed(layout.buffer_bytes / 8, policy, huge_pages)?;
        Ok(Self::thread(buffer, layout, seed))
    }

    /// Threads the chain through `buffer`: the first word of each line holds the address of the next line.
    fn thread(mut buffer: NumaBuffer<u64>, layout: ChainLayout, seed: u64) -> Chain {
        let base = buffer.as_ptr() as usize;
        let words: &mut [u64] = &mut buffer;
        let mut first = None;
        let mut previous: Option<usize> = None;
        visit_in_chain_order(&layout, seed, |line| {
            match previous {
                Some(previous) => words[previous * WORDS_PER_LINE] = (base + line * LINE_BYTES) as u64,
                None => first = Some(line),
            }
            previous = Some(line);
        });
        let (first, last) = (first.expect("a chain has lines"), previous.expect("a chain has lines"));
        words[last * WORDS_PER_LINE] = (base + first * LINE_BYTES) as u64;
        Chain { buffer, layout, start: base + first * LINE_BYTES }
    }

    /// The (normalised) layout.
    pub fn layout(&self) -> &ChainLayout {
        &self.layout
    }

    /// The buffer (for page-location queries).
    pub fn buffer(&self) -> &NumaBuffer<u64> {
        &self.buffer
    }

    /// The chain's first line.
    pub fn start(&self) -> ChainCursor {
        ChainCursor { address: self.start, chain_base: self.base() }
    }

    fn base(&self) -> usize {
        self.buffer.as_ptr() as usize
    }

    /// The line index a cursor points at.
    pub fn line_of(&self, cursor: ChainCursor) -> usize {
        (cursor.address - self.base()) / LINE_BYTES
    }

    /// The line after `line`, read from the buffer without chasing (for tests and checks).
    pub fn next_line(&self, line: usize) -> usize {
        (self.buffer[line * WORDS_PER_LINE] as usize - self.base()) / LINE_BYTES
    }

    /// Follows `iterations * HOPS_PER_ITERATION` pointers from `cursor` and returns where it ends.
    ///
    /// # Panics
    /// If `cursor` comes from another chain.
    pub fn chase(&self, cursor: ChainCursor, iterations: u64) -> ChainCursor {
        let base = self.base();
        assert!(
            cursor.chain_base == base && cursor.address >= base && cursor.address < base + self.layout.buffer_bytes,
            "a cursor of another chain"
        );
        // SAFETY: `cursor` points at a line start of this chain's buffer (checked above), and `thread` wrote into
        // the first word of every line the address of another line start of the same buffer, so every address the
        // kernel loads from is inside the buffer; `&self` keeps the buffer mapped for the whole call, and nothing
        // writes to it while a shared borrow exists.
        let end = unsafe { chase_kernel(cursor.address as *const u64, iterations) };
        ChainCursor { address: end as usize, chain_base: base }
    }
}

/// The hot loop: `iterations` times 64 dependent loads. Kept out of line so that its code is the same wherever it
/// is called from, and so that the loads cannot be merged with the caller's.
///
/// # Safety
/// Every address reachable from `start` by following the stored words must be a readable, 8-byte aligned `u64`.
#[inline(never)]
unsafe fn chase_kernel(start: *const u64, iterations: u64) -> *const u64 {
    let mut p = start;
    macro_rules! hop8 {
        () => {
            // SAFETY: guaranteed by the caller for every address of the chain.
            unsafe {
                p = *p as *const u64;
                p = *p as *const u64;
                p = *p as *const u64;
                p = *p as *const u64;
                p = *p as *const u64;
                p = *p as *const u64;
                p = *p as *const u64;
                p = *p as *const u64;
            }
        };
    }
    for _ in 0..iterations {
        hop8!();
        hop8!();
        hop8!();
        hop8!();
        hop8!();
        hop8!();
        hop8!();
        hop8!();
    }
    std::hint::black_box(p)
}

/// One timed sample of a chase.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChaseSample {
    /// Pointers followed.
    pub hops: u64,
    /// Wall time of those hops.
    pub elapsed: Duration,
}

impl ChaseSample {
    /// Nanoseconds per hop.
    pub fn latency_ns(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e9 / self.hops.max(1) as f64
    }
}

/// Chases for about `duration` from `cursor`: whole blocks of about a millisecond, the clock read only between
/// blocks (the block length is calibrated first, so this works from 1 ns L1 hops to 400 ns page-walking hops).
/// Returns the sample and where the chase stands, so that the next sample continues the cycle.
pub fn chase_for(chain: &Chain, cursor: ChainCursor, duration: Duration) -> (ChaseSample, ChainCursor) {
    let calibration_start = Instant::now();
    let mut cursor = chain.chase(cursor, CALIBRATION_ITERATIONS);
    let calibration = calibration_start.elapsed().max(Duration::from_nanos(1));
    let iterations_per_block = ((BLOCK_TARGET.as_nanos() * u128::from(CALIBRATION_ITERATIONS) / calibration.as_nanos())
        .clamp(1, 1 << 30)) as u64;
    let start = Instant::now();
    let mut hops = 0;
    let mut elapsed = Duration::ZERO;
    for _ in 0..BLOCKS_PER_SAMPLE_MAX {
        cursor = chain.chase(cursor, iterations_per_block);
        hops += iterations_per_block * HOPS_PER_ITERATION;
        elapsed = start.elapsed();
        if elapsed >= duration {
            break;
        }
    }
    (ChaseSample { hops, elapsed }, cursor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(buffer: usize, stride: usize, window: usize) -> ChainLayout {
        ChainLayout { buffer_bytes: buffer, stride_bytes: stride, window_bytes: window }.normalised().unwrap()
    }

    fn order(layout: &ChainLayout, seed: u64) -> Vec<usize> {
        let mut lines = Vec::new();
        visit_in_chain_order(layout, seed, |line| lines.push(line));
        lines
    }

    #[test]
    fn the_order_visits_every_line_once() {
        for (buffer, stride, window) in
            [(64 << 10, 256, 16 << 10), (64 << 10, 64, 64 << 10), (100 * 256, 256, 1024), (1 << 20, 512, 4096)]
        {
            let layout = layout(buffer, stride, window);
            let mut lines = order(&layout, 3);
            assert_eq!(lines.len(), layout.lines());
            lines.sort_unstable();
            assert!(lines.iter().enumerate().all(|(i, &line)| i == line), "{layout:?}");
        }
    }

    #[test]
    fn each_pass_stays_in_a_window_until_it_has_visited_it() {
        let layout = layout(1 << 20, 256, 16 << 10);
        let lines = order(&layout, 9);
        let window_of = |line: usize| line * LINE_BYTES / layout.window_bytes;
        // Maximal runs of hops inside one window: one per (pass, window), fewer if a pass ends in the window the
        // next begins with.
        let runs = 1 + lines.windows(2).filter(|pair| window_of(pair[0]) != window_of(pair[1])).count();
        assert!(runs <= layout.passes() * layout.windows(), "{runs} runs");
        assert!(runs >= layout.windows(), "{runs} runs");
        // Within a pass (a quarter of the chain here), each window is one contiguous run.
        let per_pass = layout.lines() / layout.passes();
        for pass in lines.chunks(per_pass) {
            let mut seen = std::collections::HashSet::new();
            let mut current = usize::MAX;
            for &line in pass {
                if window_of(line) != current {
                    current = window_of(line);
                    assert!(seen.insert(current), "window {current} entered twice in one pass");
                }
            }
        }
    }

    #[test]
    fn lines_adjacent_in_memory_are_a_pass_apart_in_the_chain() {
        let layout = layout(1 << 20, 256, 1 << 20);
        let lines = order(&layout, 5);
        let mut position = vec![0usize; lines.len()];
        for (i, &line) in lines.iter().enumerate() {
            position[line] = i;
        }
        let per_pass = layout.lines() / layout.passes();
        for block in 0..layout.blocks() {
            let mut positions: Vec<usize> = (0..4).map(|l| position[block * 4 + l] / per_pass).collect();
            positions.sort_unstable();
            assert_eq!(positions, vec![0, 1, 2, 3], "each line of a block belongs to a different pass");
        }
    }

    #[test]
    fn whole_buffer_mode_is_one_window() {
        let layout = layout(1 << 20, 64, usize::MAX);
        assert_eq!(layout.windows(), 1);
        assert_eq!(layout.window_bytes, 1 << 20);
    }

    #[test]
    fn different_seeds_make_different_chains() {
        let layout = layout(64 << 10, 64, 64 << 10);
        assert_ne!(order(&layout, 1), order(&layout, 2));
        assert_eq!(order(&layout, 1), order(&layout, 1));
    }

    #[test]
    fn bad_layouts_are_refused() {
        for (buffer, stride, window) in [(1 << 20, 100, 4096), (1 << 20, 0, 4096), (64, 64, 64), (1 << 20, 512, 256)] {
            let layout = ChainLayout { buffer_bytes: buffer, stride_bytes: stride, window_bytes: window };
            assert!(layout.normalised().is_err(), "{layout:?}");
        }
    }
}
