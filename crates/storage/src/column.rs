//! One column of one partition, encoded and placed.
//!
//! - Integers (and booleans, as 0/1) are split into blocks of 1024 rows; each block stores `value - base` (its
//!   minimum: frame of reference) in the fewest bits that hold the block's range ([`crate::bitpack`]). A block
//!   whose range does not fit in 32 bits (possible for BIGINT) is stored "wide": two words per row.
//! - Text is an order-preserving dictionary per partition (sorted distinct strings) plus integer codes encoded as
//!   above, so `s < 'm'` becomes a code range and scans never touch the strings.
//! - Doubles are stored as they are.
//! - NULLs are a bitmap (bit set = NULL) present only when the chunk has a NULL; a NULL row's code is 0.
//!
//! All bytes live in [`NumaBuffer`]s placed by the chunk's policy, and the chunk remembers, from the last
//! page-location query, what share of its pages each node holds: that is how a scan task knows which node the
//! bytes it reads came from.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use numadb_placement::{HugePages, NumaBuffer, PageHistogram, PlacementError, Policy, Region};

use crate::bitpack::{self, ALL_QUARTERS, BLOCK_ROWS, BlockMask, MASK_WORDS, QUARTER_ROWS, QUARTERS};
use crate::types::{DataType, Value};

/// Width marking a block stored as full 64-bit codes (two words per row, low word first).
pub const WIDE: u8 = 64;

/// Buffers at least this large use transparent huge pages (smaller ones would waste most of a 2 MiB page).
const HUGE_PAGE_THRESHOLD_BYTES: usize = 8 << 20;

fn huge_pages_for(bytes: usize) -> HugePages {
    if bytes >= HUGE_PAGE_THRESHOLD_BYTES { HugePages::Transparent } else { HugePages::Never }
}

fn placed<T: bytemuck::Pod>(values: &[T], policy: &Policy) -> Result<NumaBuffer<T>, PlacementError> {
    NumaBuffer::from_slice(values, policy.clone(), huge_pages_for(std::mem::size_of_val(values)))
}

/// Per-block encoding facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockMeta {
    /// The block's frame of reference (its smallest value).
    pub base: i64,
    /// Its largest value. With `base` this is the block's zone map: every code stored (NULL rows and rows past
    /// the end hold code 0, that is `base`) decodes to a value in `[base, max]`.
    pub max: i64,
    /// Bits per code, or [`WIDE`].
    pub width: u8,
    /// Offset of the block's first word in the chunk's word buffer.
    pub offset: u32,
}

impl BlockMeta {
    /// Words the block occupies.
    pub fn words(&self) -> usize {
        if self.width == WIDE { 2 * BLOCK_ROWS } else { bitpack::words_for_width(u32::from(self.width)) }
    }
}

/// How [`IntColumn::combine_range_masks`] merges a block's selection into a running mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Keep the rows either selects (an OR of predicates).
    Or,
    /// Keep the rows both select (an AND of predicates).
    And,
}

/// How many blocks to be read the scan loop prefetches ahead of the one it reads, unless told otherwise
/// ([`IntColumn::combine_range_masks`]; the `numadb.scan_prefetch_blocks` setting). Measured with the paced
/// requests of [`bitpack::prefetch`] on the thesis aggregation (50 million rows, 2 workers, one process
/// alternating the setting query by query, 15 rounds on an AMD EPYC guest): full scans took 21.0 ms with two
/// blocks, 20.6 with one, 22.0 with three; scans at range_pred 100 000 (87% of the blocks read, with gaps) took
/// 21.8 ms with two, 23.1 with one, 22.5 with three. Two is the best compromise. With the kernels' earlier
/// prefetching (stop 27), none at all (hardware prefetchers alone) took 30 ms against 17-23 ms.
///
/// Scans at range_pred 100 000 have read by quarters since (stop 48), so the whole-block ring serves the full
/// scans alone, and keeps half as many blocks ahead (one by default). On an Intel Xeon guest (stop 49, same
/// method, 12 runs each, a prober reference of 34.5 GB/s) full scans took 39.4 ms two blocks ahead against 35.7 with
/// one and 35.5 with none, then 34.1 with this rule, while the quarter-reading scans kept two ahead: at 100 000,
/// 32.1 ms with two, 32.9 with one, 35.9 with none; at 30 000 (sparse), 13.0, 14.2 and 25.7. With a block's
/// lines asked for in one burst (stop 54, [`bitpack::prefetch`]), full scans of `TBL_0` took 31.7 and 32.4 ms
/// with this setting (one block ahead), 31.6 and 31.6 with 4 and 31.5 and 31.3 with 6 (two rounds of 12 queries
/// each, alternating): within the noise, so the default stays.
pub const PREFETCH_BLOCKS_DEFAULT: usize = 2;

/// The most blocks the scan loop keeps prefetched ahead.
pub const PREFETCH_BLOCKS_MAX: usize = 8;

/// The running masks of a combination ([`Combine`]) over a run of blocks: one per block, and a bit per block
/// that says whether its mask has been written. A block whose bit is clear holds the combination's identity
/// (nothing for an OR, everything for an AND), whatever its slot holds.
///
/// Most blocks of a selective scan are settled by their zone maps to the identity. Before these bits, every
/// block's mask was set to the identity, combined into, then counted: a thesis aggregation whose zone maps
/// settled every block took 1.4 ms against 1.0 ms now (50 million rows, 2 workers), and one at range_pred 10 000
/// (a fifth of the blocks read) 3% longer. Consumers ask [`CombinedMasks::written`] for the blocks to look at.
#[derive(Debug, Clone)]
pub struct CombinedMasks {
    combine: Combine,
    masks: Vec<BlockMask>,
    written: Vec<u64>,
}

impl CombinedMasks {
    /// Masks for `blocks` blocks, all the identity of `combine`.
    pub fn new(combine: Combine, blocks: usize) -> CombinedMasks {
        let mut masks = CombinedMasks { combine, masks: Vec::new(), written: Vec::new() };
        masks.reset(combine, blocks);
        masks
    }

    /// Starts over: `blocks` blocks, all the identity of `combine`. Keeps the allocations.
    pub fn reset(&mut self, combine: Combine, blocks: usize) {
        self.combine = combine;
        // The slots' contents do not matter until written: only growing writes them.
        self.masks.resize(blocks, [0; MASK_WORDS]);
        self.written.clear();
        self.written.resize(blocks.div_ceil(64), 0);
    }

    /// How the masks combine.
    pub fn combine(&self) -> Combine {
        self.combine
    }

    /// The mask a block holds until written: nothing for an OR, everything for an AND.
    pub fn identity(&self) -> BlockMask {
        match self.combine {
            Combine::Or => [0; MASK_WORDS],
            Combine::And => [u64::MAX; MASK_WORDS],
        }
    }

    /// Blocks covered.
    pub fn len(&self) -> usize {
        self.masks.len()
    }

    /// Whether no block is covered.
    pub fn is_empty(&self) -> bool {
        self.masks.is_empty()
    }

    /// Whether block `i`'s mask has been written (otherwise it is [`CombinedMasks::identity`]).
    #[inline]
    pub fn is_written(&self, i: usize) -> bool {
        self.written[i / 64] >> (i % 64) & 1 == 1
    }

    /// Block `i`'s mask.
    #[inline]
    pub fn get(&self, i: usize) -> BlockMask {
        if self.is_written(i) { self.masks[i] } else { self.identity() }
    }

    /// The blocks whose masks have been written, in order.
    pub fn written(&self) -> impl Iterator<Item = usize> + '_ {
        self.written.iter().enumerate().flat_map(|(word_index, &word)| {
            std::iter::successors(Some(word), |bits| Some(bits & bits.wrapping_sub(1)))
                .take_while(|&bits| bits != 0)
                .map(move |bits| word_index * 64 + bits.trailing_zeros() as usize)
        })
    }

    /// Sets block `i`'s mask to `mask`.
    #[inline]
    pub fn set(&mut self, i: usize, mask: BlockMask) {
        self.masks[i] = mask;
        self.written[i / 64] |= 1 << (i % 64);
    }

    /// Combines `leaf` into block `i`'s mask.
    #[inline]
    pub fn merge(&mut self, i: usize, leaf: &BlockMask) {
        if !self.is_written(i) {
            self.set(i, *leaf);
            return;
        }
        let combine = self.combine;
        for (word, leaf) in self.masks[i].iter_mut().zip(leaf) {
            match combine {
                Combine::Or => *word |= leaf,
                Combine::And => *word &= leaf,
            }
        }
    }
}

/// How many blocks ahead of the scan loop [`combine_range_leaves`] asks for the block descriptors: 24 descriptors
/// of 24 bytes, 9 cache lines. On the thesis aggregation (50 million rows, 2 workers, one process alternating variants query by
/// query) asking for them made full scans 1.1% faster.
const META_AHEAD: usize = 24;

/// Below this share of blocks to read (percent of those sampled at the start of a morsel), a scan is sparse: it
/// reads by quarters, and its prefetch ring is deeper and reaches further ahead, into L2 (see
/// [`combine_range_leaves`]).
///
/// A scan reading a few scattered blocks gets no help from the hardware prefetchers, which must learn each block
/// as a new stream, so the lines the core has in flight are only those it asked for: the L1's few miss buffers'
/// worth. Asking for blocks further ahead into L2 ([`bitpack::prefetch_to_l2`]) keeps more lines in flight.
/// Measured on the thesis aggregation (50 million rows, 2 workers, processes alternating, 60 runs per query
/// each; medians), two more blocks into L2 for every scan:
///
/// | range_pred (blocks read) | memory fast (~82 GB/s) | memory slow (~50 GB/s) |
/// |---|---|---|
/// | 10 000 (19%) | 5.44 → 4.65 ms | 6.81 → 6.50 ms |
/// | 30 000 (46%) | 10.91 → 10.37 ms | 14.66 → 15.13 ms |
/// | 100 000 (87%) | 14.57 → 14.85 ms | 21.1 → 21.4 ms |
/// | 1 000 000 (100%) | 13.96 → 14.92 ms | 20.1 → 21.5 ms |
///
/// so only scans below 30% take the longer ring: where most blocks are read, the hardware's streams do better
/// than further requests of our own. With that threshold, against the binary before it (same method, three
/// rounds): range_pred 10 000 5.40-5.46 → 4.55-4.62 ms fast, 6.63-6.79 → 6.28-6.45 slow; 30 000 to 1 000 000
/// between 1% faster and 4% slower, as the noise between rounds of one binary. (Those were whole blocks; for
/// the reads by quarters that replaced them in sparse scans, see [`QUARTER_READ_PERCENT`].)
const SPARSE_READ_PERCENT: usize = 30;

/// A block the zone map settles is loaded all the same (asked for into L2 as the scan passes it, with no kernel
/// reading it, and its bytes counted as read) when at least this many of the 64 blocks of its leaf just before it
/// had to be read ([`Stream`]): skips amid a stream of reads are cheaper filled than made.
///
/// A skip breaks the stream the memory and the hardware prefetchers were serving, and the skips of a scan reading
/// most of its blocks are scattered: on the thesis aggregation (50 million rows, 2 workers), the scans loading the
/// 87% of blocks range_pred 100 000 must read took longer than full scans loading all of them (14.8 against 13.9
/// ms with the memory fast, 22 against 20.5 ms with it slow). Filling every skip of a morsel whose first 24
/// blocks were at least 60% to read took 13.7-14.1 ms fast (processes alternating, three rounds of 18 runs per
/// query each; medians), but lost 10% at range_pred 50 000 (64% of blocks to read) when the memory was slow: the
/// bandwidth it spends is then what the scan waits for. Over the window of 64 blocks (same method, four to
/// eight rounds), against no filling:
/// - 52 (81%): range_pred 70 000 to 150 000 3-9% faster in either phase, 50 000 unchanged;
/// - 44 (69%): as 52 when the memory is slow (50 000 to 85 000 within 1.5% of each other), and 2-6% faster than
///   52 at 50 000 to 85 000 when it is fast;
/// - 38 (59%): 4-5% slower than 44 at range_pred 40 000 (56% to read) and 2% at 50 000 when the memory is slow.
const STREAM_READS_MIN: u32 = 44;

/// Below this share of the quarters of the blocks sampled to read (percent, see [`Reading`]), a scan that is not
/// sparse reads by quarters too.
///
/// Reading by quarters ([`QuarterZones`]) is for uniform data, where a block's zone map rarely settles it but a
/// quarter's often does: at range_pred 10 000 on the thesis tables (values uniform in 1..50 million) a block holds
/// a selected row with probability 18%, a quarter with 5%, so a sparse scan loads 3.7 times fewer bytes. Measured
/// in stop 48 on the thesis aggregation (50 million rows, 2 workers, processes alternating, 35 queries each,
/// medians of two or three rounds):
/// - range_pred 10 000 (sparse): whole blocks 7.3-8.7 ms, 172 MiB loaded; by quarters 47 MiB, 3.6-4.1 ms with the
///   ring at twice the blocks into L1 and four times more into L2 (with the blocks' ring: 4.3-5.3 ms; 4 and 8
///   times: 3.6-4.1; 1 and 7 times: 4.5-4.6). The first quarter kernels, a portable loop compiled per
///   instruction set, took 5.3-5.6 ms: decoding counts once a read is a quarter of the bytes.
/// - range_pred 100 000 (87% of blocks, 40% of quarters to read): whole blocks 22.8-25.3 ms, by quarters with the
///   ring of whole blocks 21.3-22.3; with the sparse scans' deeper ring 20-22 ms there, but 27-34 ms against
///   22-24 at range_pred 1 000 000, where every quarter is read and this threshold keeps whole blocks.
const QUARTER_READ_PERCENT: usize = 70;

/// Slots of the scan loop's ring of pending reads: a sparse scan's, whose reads are quarters, is six times as
/// deep as the prefetch setting.
const RING_SLOTS: usize = 6 * PREFETCH_BLOCKS_MAX;

/// A block waiting to be read.
#[derive(Clone, Copy)]
struct PendingRead<'s> {
    /// All the block's words (of which only `quarters` are loaded).
    words: &'s [u32],
    /// Bits per code.
    width: u8,
    /// The query's range in the block's code space: `[code_low, code_low + span]`.
    code_low: u64,
    span: u64,
    /// The quarters read ([`ALL_QUARTERS`] for the whole block).
    quarters: u8,
    /// The index of its mask.
    block: usize,
    /// The index of its leaf.
    leaf: usize,
}

/// How many lines of each run of a read a sparse scan asks for into L2 when it enters the ring
/// ([`PendingRead::ask_for`]): the first few only. Each software prefetch holds one of the core's few L1 miss
/// buffers until its line arrives, and a sparse scan loop spent most of its time waiting for one (two thirds of
/// its samples on the instruction after a prefetch, Intel Xeon guest, stop 55); the L2's own streamer, which holds
/// none, follows a run whose first lines it has seen asked for in order. All of a run's lines are asked for into
/// L1 when it comes near.
/// Measured on the thesis aggregation at range_pred 10 000 (one process alternating variants query by query,
/// 25 rounds): 5.5-5.7 ms with 4 lines against 6.5-6.6 with all of them; 1 to 8 lines were within 0.3 ms of 4.
const FAR_ASK_LINES: usize = 4;

impl PendingRead<'_> {
    /// Asks for the lines the read will load, into L1 or, further ahead, the first [`FAR_ASK_LINES`] of each run
    /// into L2.
    #[inline]
    fn ask_for(&self, into_l1: bool) {
        let ask = |run: &[u32]| {
            if into_l1 {
                bitpack::prefetch(run);
            } else {
                bitpack::prefetch_to_l2(&run[..run.len().min(FAR_ASK_LINES * bitpack::WORDS_PER_LINE)]);
            }
        };
        if self.quarters == ALL_QUARTERS {
            ask(self.words);
        } else {
            bitpack::quarter_runs(u32::from(self.width), self.quarters).for_each(|run| ask(&self.words[run]));
        }
    }

    /// Reads the block into `out` and returns the bytes it loaded.
    #[inline]
    fn read(&self, out: &mut BlockMask) -> u64 {
        if self.quarters == ALL_QUARTERS {
            read_words_mask(self.words, self.width, self.code_low, self.span, out);
            return std::mem::size_of_val(self.words) as u64;
        }
        // Partial reads happen only for blocks that are not wide, whose range fits in 32 bits.
        let width = u32::from(self.width);
        bitpack::range_mask_quarters(self.words, width, self.code_low as u32, self.span as u32, self.quarters, out);
        quarter_bytes(width, self.quarters)
    }
}

/// Bytes a read of `quarters` of a block of `width`-bit codes loads.
fn quarter_bytes(width: u32, quarters: u8) -> u64 {
    bitpack::quarter_runs(width, quarters).map(|run| run.len() as u64 * 4).sum()
}

/// A block's finer zone map: the lowest and the highest code of each of its quarters ([`QUARTER_ROWS`] rows;
/// lows first), shifted right by `quarter_shift` so that 16 bits hold them. Codes of NULL rows and of rows past
/// the end (0) count, as the kernels read them too.
pub type QuarterZones = [u16; 2 * QUARTERS];

/// How far a block's quarter zones are shifted: not at all for codes of up to 16 bits, where they are exact.
fn quarter_shift(width: u8) -> u32 {
    u32::from(width).saturating_sub(16)
}

fn quarter_zones(codes: &[u32; BLOCK_ROWS], width: u8) -> QuarterZones {
    let shift = quarter_shift(width);
    let mut zones = [0; 2 * QUARTERS];
    for (quarter, codes) in codes.chunks_exact(QUARTER_ROWS).enumerate() {
        let (low, high) = codes.iter().fold((u32::MAX, 0), |(low, high), &code| (low.min(code), high.max(code)));
        zones[quarter] = (low >> shift) as u16;
        zones[QUARTERS + quarter] = (high >> shift) as u16;
    }
    zones
}

/// The quarters of a block (not wide) whose zones meet the codes `[code_low, code_low + span]`: those a scan must
/// read. Each zone is widened to whole steps of its shift, so no quarter holding a selected code is missed.
#[inline]
fn quarters_to_read(zones: &QuarterZones, width: u8, code_low: u64, span: u64) -> u8 {
    let shift = quarter_shift(width);
    let below = (1u64 << shift) - 1;
    let code_high = code_low + span;
    let mut quarters = 0;
    for quarter in 0..QUARTERS {
        let low = u64::from(zones[quarter]) << shift;
        let high = u64::from(zones[QUARTERS + quarter]) << shift | below;
        quarters |= u8::from(low <= code_high && code_low <= high) << quarter;
    }
    quarters
}

/// A block's zone-map verdict for a value range.
#[derive(Clone, Copy)]
enum Zone {
    None,
    All,
    /// Codes in `[code_low, code_low + span]` are selected (the query's range in the block's code space), in the
    /// quarters `quarters` ([`ALL_QUARTERS`] unless the scan reads by quarters).
    Some {
        code_low: u64,
        span: u64,
        quarters: u8,
    },
}

/// Frame-of-reference bit-packed integers.
pub struct IntColumn {
    rows: usize,
    blocks: Vec<BlockMeta>,
    /// One per block: consulted only by scans that read a few scattered blocks, so kept apart from the
    /// descriptors every scan streams through.
    quarters: Vec<QuarterZones>,
    words: NumaBuffer<u32>,
}

impl IntColumn {
    /// Encodes `values` (the value of a NULL row is ignored: pass anything) placed by `policy`.
    pub fn encode(values: &[i64], nulls: Option<&[u64]>, policy: &Policy) -> Result<Self, PlacementError> {
        let is_null = |row: usize| nulls.is_some_and(|bits| bits[row / 64] >> (row % 64) & 1 == 1);
        let mut blocks = Vec::with_capacity(values.len().div_ceil(BLOCK_ROWS));
        let mut quarters = Vec::with_capacity(blocks.capacity());
        let mut words: Vec<u32> = Vec::new();
        let mut codes = [0u32; BLOCK_ROWS];
        for (block_index, chunk) in values.chunks(BLOCK_ROWS).enumerate() {
            let first_row = block_index * BLOCK_ROWS;
            let valid = chunk.iter().enumerate().filter(|(i, _)| !is_null(first_row + i)).map(|(_, &v)| v);
            let (min, max) = valid.fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
            let (base, max, range) =
                if min > max { (0, 0, 0u128) } else { (min, max, (max as i128 - min as i128) as u128) };
            let offset = u32::try_from(words.len()).expect("a partition holds fewer than 2^32 words");
            if range <= u128::from(u32::MAX) {
                let width = bitpack::width_for(range as u32);
                codes.fill(0);
                for (i, &value) in chunk.iter().enumerate() {
                    if !is_null(first_row + i) {
                        codes[i] = (value as i128 - base as i128) as u32;
                    }
                }
                let start = words.len();
                words.resize(start + bitpack::words_for_width(width), 0);
                bitpack::pack(&codes, width, &mut words[start..]);
                blocks.push(BlockMeta { base, max, width: width as u8, offset });
                quarters.push(quarter_zones(&codes, width as u8));
            } else {
                for row in 0..BLOCK_ROWS {
                    let code = match chunk.get(row) {
                        Some(&value) if !is_null(first_row + row) => (value as i128 - base as i128) as u64,
                        _ => 0,
                    };
                    words.push(code as u32);
                    words.push((code >> 32) as u32);
                }
                blocks.push(BlockMeta { base, max, width: WIDE, offset });
                // Never read: a wide block is always read whole.
                quarters.push([0; 2 * QUARTERS]);
            }
        }
        if words.is_empty() {
            words.push(0);
        }
        Ok(IntColumn { rows: values.len(), blocks, quarters, words: placed(&words, policy)? })
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Block descriptors.
    pub fn blocks(&self) -> &[BlockMeta] {
        &self.blocks
    }

    /// The words of block `block`.
    pub fn block_words(&self, block: usize) -> &[u32] {
        self.meta_words(&self.blocks[block])
    }

    /// The words of the block `meta` describes.
    #[inline]
    fn meta_words(&self, meta: &BlockMeta) -> &[u32] {
        &self.words[meta.offset as usize..meta.offset as usize + meta.words()]
    }

    /// The words of blocks `blocks`, which lie back to back (empty for an empty range).
    pub fn blocks_words(&self, blocks: std::ops::Range<usize>) -> &[u32] {
        let Some(first) = self.blocks.get(blocks.start).filter(|_| !blocks.is_empty()) else { return &[] };
        let start = first.offset as usize;
        &self.words[start..start + self.bytes_of_blocks(blocks) as usize / 4]
    }

    /// The words of `blocks` that [`combine_range_leaves`] loads for `[low, high]`, as runs in order (offsets into
    /// the column's words, [`IntColumn::words`]): the blocks the zone map cannot settle, only the quarters of
    /// them it must read when `by_quarters` ([`reads_by_quarters`]), and the blocks settled amid a stream of reads
    /// (`STREAM_READS_MIN`). Benchmarks use it to read exactly the bytes a scan reads, without decoding them.
    pub fn words_loaded(
        &self,
        blocks: std::ops::Range<usize>,
        low: i64,
        high: i64,
        by_quarters: bool,
    ) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let mut stream = Stream::default();
        blocks.flat_map(move |block| {
            let meta = &self.blocks[block];
            let start = meta.offset as usize;
            let quarters = match verdict(meta, &self.quarters[block], low, high, by_quarters) {
                Zone::Some { quarters, .. } => {
                    stream.loads(true);
                    quarters
                }
                _ if stream.loads(false) => ALL_QUARTERS,
                _ => 0,
            };
            // All quarters' runs are the block's words (a wide block's too: 64-bit codes, 2 048 words).
            bitpack::quarter_runs(u32::from(meta.width), quarters).map(move |run| start + run.start..start + run.end)
        })
    }

    /// Words `range` of the column's encoded data.
    pub fn words(&self, range: std::ops::Range<usize>) -> &[u32] {
        &self.words[range]
    }

    /// The value of a row (meaningless for a NULL row).
    pub fn get(&self, row: usize) -> i64 {
        let block = row / BLOCK_ROWS;
        let meta = self.blocks[block];
        let words = self.block_words(block);
        let within = row % BLOCK_ROWS;
        let code = if meta.width == WIDE {
            u64::from(words[2 * within]) | (u64::from(words[2 * within + 1]) << 32)
        } else {
            u64::from(bitpack::get(words, u32::from(meta.width), within))
        };
        (meta.base as i128 + code as i128) as i64
    }

    /// Decodes a block's values into `out` (rows past the end of a partial last block are the base).
    pub fn decode_block(&self, block: usize, out: &mut [i64; BLOCK_ROWS]) {
        let meta = self.blocks[block];
        let words = self.block_words(block);
        if meta.width == WIDE {
            for (row, slot) in out.iter_mut().enumerate() {
                let code = u64::from(words[2 * row]) | (u64::from(words[2 * row + 1]) << 32);
                *slot = (meta.base as i128 + code as i128) as i64;
            }
            return;
        }
        // The loop of `unpack_with` widens 16 codes at a time: compiled for the baseline it does so 2 at a time.
        // SAFETY: `Isa::best` runs on this CPU.
        unsafe { decode_on(bitpack::Isa::best(), words, meta.width, meta.base, out) }
    }

    /// For each block of `blocks`, combines the rows whose value lies in `[low, high]` (inclusive) into that
    /// block's mask in `masks` (one per block, in order), as `masks` combines them: ORed in for [`Combine::Or`],
    /// ANDed for [`Combine::And`]. Returns the bytes loaded. NULL rows are not cleared: callers use this only for columns
    /// without NULLs, or combine the validity mask themselves.
    ///
    /// This is the scan loop of every range filter over integer codes (AND/OR of them too). It takes each block's
    /// zone-map verdict once, in order. A block that must really be read has all its lines asked for
    /// ([`bitpack::prefetch`]) as soon as it is found (right after the block then due has been read), and is read
    /// when the `prefetch_blocks`-th block after it that must be read has been found (clamped to
    /// [`PREFETCH_BLOCKS_MAX`]; 0 reads at once and leaves prefetching to the hardware). So the reads run a fixed
    /// number of read blocks behind the requests, whichever blocks the zone maps skip in between: the hardware
    /// prefetchers alone left a scanning thread well below the memory's bandwidth, and they cannot know which
    /// blocks come next. A sparse scan, one that will read under 30% of the first blocks of its leaves
    /// (`SPARSE_READ_PERCENT`), reads only the quarters of a block whose [`QuarterZones`] meet the range, keeps
    /// twice as many reads asked for into L1 and four times as many more into L2; a dense scan reads by quarters
    /// too where under 70% of the quarters are to be read (`QUARTER_READ_PERCENT`). Until stop 28 the kernels
    /// spread the next block's requests over their decoding instead, one per line decoded, and the thesis
    /// aggregation's full scans reached 59-72% of the reference bandwidth (see [`bitpack::prefetch`] for what
    /// replaced that, and the measurements). Verdicts are never stored or
    /// taken twice: an earlier version collected them for the whole range first (0.5-3% slower), and one with a
    /// cursor running ahead took the verdict of every settled block twice (3.5% slower on a scan reading a fifth
    /// of its blocks). In stop 46, verdicts taken 64 blocks at a time as bitmaps, from dense arrays of the blocks'
    /// minima and maxima, made a query whose zone maps settle every block faster (0.32 against 0.59 ms, 50
    /// million rows, 2 workers, one process alternating) but the one at range_pred 10 000 12-15% slower with
    /// this ring, and no faster with a list of the blocks to read and any prefetch distance: the checks between
    /// reads cost nothing while the loop waits for memory. Nor did decoding straight into a block's mask on its
    /// first write, rather than into a buffer merged after (within 1.5%).
    /// A block the zone map settles costs no kernel call and, where its verdict is the identity of the combination
    /// (nothing for an OR, everything for an AND), not even a write; nor a load of its data, unless the scan reads
    /// so many of the blocks before it that it is loaded to keep their stream whole (`STREAM_READS_MIN`).
    pub fn combine_range_masks(
        &self,
        blocks: std::ops::Range<usize>,
        low: i64,
        high: i64,
        masks: &mut CombinedMasks,
        prefetch_blocks: usize,
    ) -> u64 {
        let mut bytes_read = [0];
        combine_range_leaves(&[RangeLeaf { column: self, low, high }], blocks, masks, prefetch_blocks, &mut bytes_read);
        bytes_read[0]
    }

    /// Sets `out` to the rows of `block` whose value lies in `[low, high]` (inclusive). NULL rows and rows past
    /// the end are not cleared here: callers combine with the validity mask.
    ///
    /// Returns whether the block's data was read. The frame of reference and the block's largest value are a zone
    /// map: a block whose values lie wholly outside `[low, high]` selects nothing, and one whose values lie wholly
    /// inside selects everything, without a byte of it being loaded.
    pub fn range_mask(&self, block: usize, low: i64, high: i64, out: &mut BlockMask) -> bool {
        let meta = &self.blocks[block];
        let (code_low, span) = match zone(meta, low, high) {
            Zone::None => {
                *out = [0; MASK_WORDS];
                return false;
            }
            Zone::All => {
                *out = [u64::MAX; MASK_WORDS];
                return false;
            }
            Zone::Some { code_low, span, .. } => (code_low, span),
        };
        read_words_mask(self.meta_words(meta), meta.width, code_low, span, out);
        true
    }

    /// Bytes of blocks `blocks`. Blocks lie back to back in `words`, so this is a difference of offsets: scans
    /// ask for it per block and the planner for whole partitions.
    pub fn bytes_of_blocks(&self, blocks: std::ops::Range<usize>) -> u64 {
        if blocks.is_empty() {
            return 0;
        }
        let first = &self.blocks[blocks.start];
        let last = &self.blocks[blocks.end - 1];
        (u64::from(last.offset) + last.words() as u64 - u64::from(first.offset)) * 4
    }

    /// All bytes of encoded data (what a scan of every block reads).
    pub fn bytes(&self) -> u64 {
        self.bytes_of_blocks(0..self.blocks.len())
    }

    /// All bytes the column holds: its data and its block descriptors (the zone map).
    pub fn held_bytes(&self) -> u64 {
        self.bytes()
            + std::mem::size_of_val(self.blocks.as_slice()) as u64
            + std::mem::size_of_val(self.quarters.as_slice()) as u64
    }

    fn regions(&self) -> Vec<&Region> {
        vec![self.words.region()]
    }
}

/// One leaf of a combined range filter: the rows of `column` whose value lies in `[low, high]` (inclusive).
#[derive(Clone, Copy)]
pub struct RangeLeaf<'s> {
    /// The column read.
    pub column: &'s IntColumn,
    /// The lowest value selected.
    pub low: i64,
    /// The highest value selected.
    pub high: i64,
}

/// [`IntColumn::combine_range_masks`] for several leaves over the same blocks of their columns (an AND or OR
/// of ranges over one partition), adding each leaf's bytes loaded to `bytes_read[leaf]`.
///
/// The leaves go one after the other, each over the whole block range (one sequential stream at a time), but
/// through one ring of prefetched reads: the first blocks of the next leaf are asked for while the last ones of
/// the leaf before are read, rather than after its ring has drained. Measured on the thesis aggregation (6
/// columns, 256-block morsels, 2 workers, one process alternating the two query by query), this was 0.2-0.7%
/// faster than a ring per leaf: within the noise. The larger morsels' gain (see `numadb_execution`'s
/// `MORSEL_BLOCKS_MAX`) was not the columns' cold starts after all.
pub fn combine_range_leaves(
    leaves: &[RangeLeaf<'_>],
    blocks: std::ops::Range<usize>,
    masks: &mut CombinedMasks,
    prefetch_blocks: usize,
    bytes_read: &mut [u64],
) {
    debug_assert_eq!(masks.len(), blocks.len(), "one mask per block");
    debug_assert_eq!(bytes_read.len(), leaves.len(), "one byte count per leaf");
    let combine = masks.combine();
    let near = prefetch_blocks.min(PREFETCH_BLOCKS_MAX);
    // The descriptors (zone maps) are a stream of their own per leaf, which the hardware would only pick up
    // after a few misses each time a leaf starts: their first lines are asked for here, for every leaf, and the
    // rest `META_AHEAD` blocks ahead of the loop.
    for leaf in leaves {
        for meta in leaf.column.blocks[blocks.clone()].iter().take(META_AHEAD).step_by(2) {
            bitpack::prefetch_line(meta);
        }
        for zones in leaf.column.quarters[blocks.clone()].iter().take(META_AHEAD).step_by(4) {
            bitpack::prefetch_line(zones);
        }
    }
    // A sparse scan (few of the first `META_AHEAD` blocks of its leaves to read) reads only the quarters of a block
    // that may hold selected rows, and keeps twice as many reads in its ring asked for into L1 and four times as
    // many more asked for into L2 only (each is asked for into L1 when it comes `near` reads from due): they are
    // a quarter of a block or so each. A dense one reads by quarters too where few of its blocks' quarters are to
    // be read, with `near` reads in its ring; one that reads whole blocks, one long stream the hardware's
    // prefetchers follow, keeps half as many ahead, rounded up ([`PREFETCH_BLOCKS_DEFAULT`]).
    let reading = reading(leaves, blocks.clone(), prefetch_blocks);
    let by_quarters = reading.by_quarters;
    let (near, far) = match reading {
        Reading { sparse: true, .. } => (2 * near, 4 * near),
        Reading { by_quarters: true, .. } => (near, 0),
        Reading { .. } => (near.div_ceil(2), 0),
    };
    let depth = near + far;
    let mut selected = [0u64; MASK_WORDS];
    let mut read = |due: PendingRead<'_>, masks: &mut CombinedMasks, bytes_read: &mut [u64]| {
        bytes_read[due.leaf] += due.read(&mut selected);
        masks.merge(due.block, &selected);
    };
    // Blocks found to need reading and already asked for, a ring of `depth` slots: `count` of them from
    // `oldest` on, each waiting until the block `depth` reads later has been found (or the last leaf ends). The
    // first `near` of them (from `oldest`) have been asked for into L1, the rest into L2.
    let mut pending: [Option<PendingRead<'_>>; RING_SLOTS] = [None; RING_SLOTS];
    let (mut oldest, mut count) = (0, 0);
    for (leaf_index, leaf) in leaves.iter().enumerate() {
        let column = leaf.column;
        let mut stream = Stream::default();
        // Each block's descriptor is looked at once, here: the verdict and, for a block to read, its words.
        let metas = &column.blocks[blocks.clone()];
        let zones = &column.quarters[blocks.clone()];
        for (i, meta) in metas.iter().enumerate() {
            if let Some(ahead) = metas.get(i + META_AHEAD) {
                bitpack::prefetch_line(ahead);
                if by_quarters {
                    bitpack::prefetch_line(&zones[i + META_AHEAD]);
                }
            }
            let verdict = verdict(meta, &zones[i], leaf.low, leaf.high, by_quarters);
            let must_read = matches!(verdict, Zone::Some { .. });
            if stream.loads(must_read) && !must_read {
                // Settled, but loaded all the same to keep the stream whole (`STREAM_READS_MIN`).
                let words = column.meta_words(meta);
                bitpack::prefetch_to_l2(words);
                bytes_read[leaf_index] += std::mem::size_of_val(words) as u64;
            }
            match (verdict, combine) {
                (Zone::Some { code_low, span, quarters }, _) => {
                    let words = column.meta_words(meta);
                    let found =
                        PendingRead { words, width: meta.width, code_low, span, quarters, block: i, leaf: leaf_index };
                    if depth == 0 {
                        read(found, masks, bytes_read);
                        continue;
                    }
                    if count == depth {
                        // The oldest pending read leaves the ring for this one, which is asked for after it
                        // (asked for before, the thesis aggregation scanned 16% slower: its requests queued
                        // ahead of the due block's own lines still in flight).
                        if let Some(due) = pending[oldest].replace(found) {
                            read(due, masks, bytes_read);
                        }
                        // A wrap, not `% depth`: no integer division per block read in the scan loop.
                        oldest = if oldest + 1 == depth { 0 } else { oldest + 1 };
                    } else {
                        pending[(oldest + count) % depth] = Some(found);
                        count += 1;
                    }
                    if count <= near {
                        found.ask_for(true);
                    } else {
                        found.ask_for(false);
                        if count == depth {
                            // The block that has just come `near` reads from due (asked for into L1 already
                            // if it entered while the ring was filling: the hint costs little twice).
                            if let Some(soon) = pending[(oldest + near - 1) % depth] {
                                soon.ask_for(true);
                            }
                        }
                    }
                }
                // A settled block's verdict absorbs whatever the other leaves combine into it (nothing for an
                // AND, everything for an OR), so it may be written before reads of earlier leaves still pending.
                (Zone::None, Combine::And) => masks.set(i, [0; MASK_WORDS]),
                (Zone::All, Combine::Or) => masks.set(i, [u64::MAX; MASK_WORDS]),
                _ => {}
            }
        }
    }
    // The blocks still pending, in order; each read brings the one `near` behind it into L1.
    for slot in 0..count {
        if let Some(due) = pending[(oldest + slot) % depth].take() {
            read(due, masks, bytes_read);
        }
        if far > 0
            && slot + near < count
            && let Some(soon) = pending[(oldest + slot + near) % depth]
        {
            soon.ask_for(true);
        }
    }
}

/// Whether [`combine_range_leaves`] reads only the quarters of a block that may hold selected rows, over
/// `blocks` of `leaves` with `prefetch_blocks` blocks prefetched. Benchmarks use it with
/// [`IntColumn::words_loaded`].
pub fn reads_by_quarters(leaves: &[RangeLeaf<'_>], blocks: std::ops::Range<usize>, prefetch_blocks: usize) -> bool {
    reading(leaves, blocks, prefetch_blocks).by_quarters
}

/// How a scan reads a morsel, from the verdicts of the first [`META_AHEAD`] blocks of each of its leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reading {
    /// Fewer than [`SPARSE_READ_PERCENT`] of the blocks sampled must be read: the scan will jump over most.
    sparse: bool,
    /// It reads only the quarters of a block that may hold selected rows: it is sparse, or fewer than
    /// [`QUARTER_READ_PERCENT`] of the sampled blocks' quarters must be read.
    by_quarters: bool,
}

/// [`Reading`] for `blocks` of `leaves`, whose first descriptors and quarter zones have just been asked for. A
/// scan without prefetching reads whole blocks.
fn reading(leaves: &[RangeLeaf<'_>], blocks: std::ops::Range<usize>, prefetch_blocks: usize) -> Reading {
    if prefetch_blocks.min(PREFETCH_BLOCKS_MAX) == 0 {
        return Reading { sparse: false, by_quarters: false };
    }
    let (mut sampled, mut to_read, mut quarters) = (0, 0, 0);
    for leaf in leaves {
        let column = leaf.column;
        for block in blocks.clone().take(META_AHEAD) {
            sampled += 1;
            if let Zone::Some { quarters: read, .. } =
                verdict(&column.blocks[block], &column.quarters[block], leaf.low, leaf.high, true)
            {
                to_read += 1;
                quarters += read.count_ones() as usize;
            }
        }
    }
    let sparse = to_read * 100 < sampled * SPARSE_READ_PERCENT;
    Reading { sparse, by_quarters: sparse || quarters * 100 < sampled * QUARTERS * QUARTER_READ_PERCENT }
}

/// The verdicts of the last 64 blocks a scan of one leaf passed, to tell which settled blocks it loads anyway
/// ([`STREAM_READS_MIN`]); a scan starts each leaf of each morsel with none.
#[derive(Default)]
struct Stream {
    /// Bit `i` set: the block `i + 1` before had to be read.
    reads: u64,
}

impl Stream {
    /// Whether the scan loads the next block, which must be read or not, and takes its verdict in.
    #[inline]
    fn loads(&mut self, must_read: bool) -> bool {
        let loads = must_read || self.reads.count_ones() >= STREAM_READS_MIN;
        self.reads = self.reads << 1 | u64::from(must_read);
        loads
    }
}

/// What a block's zone map (`meta`'s `[base, max]`) says about `[low, high]`: no row can be in it, every row is,
/// or the codes must be compared (with the range in code space). Plain i64 comparisons: this runs for every block
/// of every scan, and most blocks of a selective one end here.
#[inline]
fn zone(meta: &BlockMeta, low: i64, high: i64) -> Zone {
    let (min, max) = (meta.base, meta.max);
    if low > high || high < min || low > max {
        Zone::None
    } else if low <= min && max <= high {
        Zone::All
    } else {
        let (from, to) = (low.max(min), high.min(max));
        // `min <= from <= to <= max`: both differences are exact in u64 (wrapping i64 arithmetic).
        Zone::Some {
            code_low: from.wrapping_sub(min) as u64,
            span: to.wrapping_sub(from) as u64,
            quarters: ALL_QUARTERS,
        }
    }
}

/// [`zone`], then, for a scan reading by quarters, the quarters of a block to read that its `quarter_zones`
/// leave: a block none of whose quarters meets the range selects nothing.
#[inline]
fn verdict(meta: &BlockMeta, quarter_zones: &QuarterZones, low: i64, high: i64, by_quarters: bool) -> Zone {
    match zone(meta, low, high) {
        Zone::Some { code_low, span, .. } if by_quarters && meta.width != WIDE => {
            match quarters_to_read(quarter_zones, meta.width, code_low, span) {
                0 => Zone::None,
                quarters => Zone::Some { code_low, span, quarters },
            }
        }
        verdict => verdict,
    }
}

/// A packed block's values: `base` plus each code.
#[inline(always)]
fn decode(words: &[u32], width: u8, base: i64, out: &mut [i64; BLOCK_ROWS]) {
    bitpack::unpack_with(words, u32::from(width), |row, code| out[row] = base.wrapping_add(i64::from(code)));
}

crate::on_every_isa!(decode_on(words: &[u32], width: u8, base: i64, out: &mut [i64; BLOCK_ROWS]) -> () = decode);

/// Sets `out` to the rows of a block (its `words`, codes of `width` bits) whose code lies in
/// `[code_low, code_low + span]` (a range the zone map could not settle).
#[inline]
fn read_words_mask(words: &[u32], width: u8, code_low: u64, span: u64, out: &mut BlockMask) {
    if width == WIDE {
        *out = [0; MASK_WORDS];
        for row in 0..BLOCK_ROWS {
            let code = u64::from(words[2 * row]) | (u64::from(words[2 * row + 1]) << 32);
            if code.wrapping_sub(code_low) <= span {
                out[row / 64] |= 1 << (row % 64);
            }
        }
    } else {
        // Not wide: every code, so both bounds, fit in 32 bits.
        bitpack::range_mask(words, u32::from(width), code_low as u32, span as u32, out);
    }
}

/// Sorted distinct strings of a partition's text column.
pub struct Dictionary {
    bytes: NumaBuffer<u8>,
    /// `len + 1` offsets into `bytes`.
    offsets: NumaBuffer<u32>,
}

impl Dictionary {
    fn build(sorted: &[&str], policy: &Policy) -> Result<Self, PlacementError> {
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(sorted.len() + 1);
        offsets.push(0u32);
        for text in sorted {
            bytes.extend_from_slice(text.as_bytes());
            offsets.push(u32::try_from(bytes.len()).expect("a dictionary holds fewer than 4 GiB"));
        }
        if bytes.is_empty() {
            bytes.push(0);
        }
        Ok(Dictionary { bytes: placed(&bytes, policy)?, offsets: placed(&offsets, policy)? })
    }

    /// Distinct strings.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The string with code `code`.
    pub fn get(&self, code: usize) -> &str {
        let (start, end) = (self.offsets[code] as usize, self.offsets[code + 1] as usize);
        std::str::from_utf8(&self.bytes[start..end]).expect("dictionaries hold UTF-8")
    }

    /// The number of strings `< text` (as byte strings, PostgreSQL's "C" collation): the first code whose string
    /// is `>= text`.
    pub fn lower_bound(&self, text: &str) -> usize {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = (low + high) / 2;
            if self.get(middle).as_bytes() < text.as_bytes() { low = middle + 1 } else { high = middle }
        }
        low
    }

    /// The number of strings `<= text`.
    pub fn upper_bound(&self, text: &str) -> usize {
        let (mut low, mut high) = (0, self.len());
        while low < high {
            let middle = (low + high) / 2;
            if self.get(middle).as_bytes() <= text.as_bytes() { low = middle + 1 } else { high = middle }
        }
        low
    }

    /// Bytes.
    pub fn bytes(&self) -> u64 {
        (self.bytes.len() + self.offsets.len() * 4) as u64
    }
}

/// A column's encoded data.
pub enum ColumnData {
    /// INTEGER or BIGINT.
    Int(IntColumn),
    /// BOOLEAN as 0/1 codes.
    Bool(IntColumn),
    /// DOUBLE PRECISION.
    Double(NumaBuffer<f64>),
    /// TEXT: dictionary and codes.
    Text {
        /// The partition's distinct strings, sorted.
        dictionary: Dictionary,
        /// Dictionary codes.
        codes: IntColumn,
    },
}

/// One column of one partition.
pub struct ColumnChunk {
    data_type: DataType,
    rows: usize,
    data: ColumnData,
    /// Bit set = NULL; absent when no row is NULL.
    nulls: Option<NumaBuffer<u64>>,
    /// Share of the chunk's pages on each node at the last verification.
    node_shares: Mutex<Arc<[(u32, f64)]>>,
}

impl ColumnChunk {
    /// Encodes a column of `data_type` from values (which must match the type or be NULL).
    pub fn from_values(data_type: DataType, values: &[Value], policy: &Policy) -> Result<Self, PlacementError> {
        let rows = values.len();
        let mut null_bits = vec![0u64; rows.div_ceil(64).max(1)];
        let mut any_null = false;
        for (row, value) in values.iter().enumerate() {
            if value.is_null() {
                null_bits[row / 64] |= 1 << (row % 64);
                any_null = true;
            }
        }
        let nulls_slice = any_null.then_some(null_bits.as_slice());
        let data = match data_type {
            DataType::Numeric => unreachable!("no column is numeric: the SQL layer refuses them (DataType::Numeric)"),
            DataType::Integer | DataType::BigInt => {
                let ints: Vec<i64> = values.iter().map(|v| if let Value::Int(i) = v { *i } else { 0 }).collect();
                ColumnData::Int(IntColumn::encode(&ints, nulls_slice, policy)?)
            }
            DataType::Boolean => {
                let ints: Vec<i64> = values.iter().map(|v| i64::from(matches!(v, Value::Bool(true)))).collect();
                ColumnData::Bool(IntColumn::encode(&ints, nulls_slice, policy)?)
            }
            DataType::Double => {
                let doubles: Vec<f64> = values
                    .iter()
                    .map(|v| match v {
                        Value::Double(d) => *d,
                        Value::Int(i) => *i as f64,
                        _ => 0.0,
                    })
                    .collect();
                ColumnData::Double(if doubles.is_empty() { placed(&[0.0], policy)? } else { placed(&doubles, policy)? })
            }
            DataType::Text => {
                // The distinct strings through a hash table, so that only they are sorted, and each row's code
                // looked up in it: sorting every row's string and searching the dictionary for each (a million
                // rows over a thousand strings: 20 comparisons of strings per row, twice) was most of the time
                // an `INSERT … SELECT` of text took.
                let mut code_of: HashMap<&str, i64, foldhash::fast::RandomState> = HashMap::default();
                for value in values {
                    if let Value::Text(t) = value {
                        code_of.entry(&**t).or_insert(0);
                    }
                }
                let mut distinct: Vec<&str> = code_of.keys().copied().collect();
                distinct.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
                for (code, text) in distinct.iter().enumerate() {
                    code_of.insert(text, code as i64);
                }
                let dictionary = Dictionary::build(&distinct, policy)?;
                let codes: Vec<i64> = values
                    .iter()
                    .map(|v| match v {
                        Value::Text(t) => code_of[&**t],
                        _ => 0,
                    })
                    .collect();
                let codes = IntColumn::encode(&codes, nulls_slice, policy)?;
                ColumnData::Text { dictionary, codes }
            }
        };
        ColumnChunk::assemble(data_type, rows, data, any_null.then_some(null_bits), policy)
    }

    /// `rows` rows of one value (which must match the type or be NULL): the column `ALTER TABLE … ADD COLUMN`
    /// gives a partition that already has rows. Made without a vector of values per row, which for a text
    /// column of a 4 Mi-row partition would take 100 MB to encode a few kilobytes (every block's codes are 0
    /// bits wide, and a text's dictionary holds one string).
    pub fn constant(data_type: DataType, value: &Value, rows: usize, policy: &Policy) -> Result<Self, PlacementError> {
        let null_bits = (value.is_null() && rows > 0).then(|| {
            let mut bits = vec![u64::MAX; rows.div_ceil(64)];
            if !rows.is_multiple_of(64)
                && let Some(last) = bits.last_mut()
            {
                *last = (1u64 << (rows % 64)) - 1;
            }
            bits
        });
        let nulls_slice = null_bits.as_deref();
        let data = match data_type {
            DataType::Numeric => unreachable!("no column is numeric: the SQL layer refuses them (DataType::Numeric)"),
            DataType::Integer | DataType::BigInt => {
                let int = if let Value::Int(i) = value { *i } else { 0 };
                ColumnData::Int(IntColumn::encode(&vec![int; rows], nulls_slice, policy)?)
            }
            DataType::Boolean => {
                let int = i64::from(matches!(value, Value::Bool(true)));
                ColumnData::Bool(IntColumn::encode(&vec![int; rows], nulls_slice, policy)?)
            }
            DataType::Double => {
                let double = match value {
                    Value::Double(d) => *d,
                    Value::Int(i) => *i as f64,
                    _ => 0.0,
                };
                ColumnData::Double(placed(&vec![double; rows.max(1)], policy)?)
            }
            DataType::Text => {
                let strings: Vec<&str> = match value {
                    Value::Text(text) if rows > 0 => vec![&**text],
                    _ => Vec::new(),
                };
                let dictionary = Dictionary::build(&strings, policy)?;
                ColumnData::Text { dictionary, codes: IntColumn::encode(&vec![0; rows], nulls_slice, policy)? }
            }
        };
        ColumnChunk::assemble(data_type, rows, data, null_bits, policy)
    }

    /// Encodes a non-null integer column (the fast path for generated data).
    pub fn from_ints(data_type: DataType, values: &[i64], policy: &Policy) -> Result<Self, PlacementError> {
        assert!(data_type.is_integer());
        let data = ColumnData::Int(IntColumn::encode(values, None, policy)?);
        ColumnChunk::assemble(data_type, values.len(), data, None, policy)
    }

    fn assemble(
        data_type: DataType,
        rows: usize,
        data: ColumnData,
        null_bits: Option<Vec<u64>>,
        policy: &Policy,
    ) -> Result<Self, PlacementError> {
        let nulls = match null_bits {
            Some(bits) => Some(placed(&bits, policy)?),
            None => None,
        };
        let shares: Arc<[(u32, f64)]> = match policy {
            Policy::Node(node) | Policy::Preferred(node) => Arc::from(vec![(*node, 1.0)]),
            Policy::Interleave(nodes) => {
                Arc::from(nodes.iter().map(|n| (n, 1.0 / nodes.len() as f64)).collect::<Vec<_>>())
            }
            Policy::FirstTouch | Policy::OsDefault => Arc::from(Vec::new()),
        };
        let chunk = ColumnChunk { data_type, rows, data, nulls, node_shares: Mutex::new(shares) };
        if matches!(policy, Policy::FirstTouch | Policy::OsDefault) {
            // Where the pages went is only known by asking.
            let _ = chunk.verify();
        }
        Ok(chunk)
    }

    /// The type.
    pub fn data_type(&self) -> DataType {
        self.data_type
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// The encoded data.
    pub fn data(&self) -> &ColumnData {
        &self.data
    }

    /// Whether any row is NULL.
    pub fn has_nulls(&self) -> bool {
        self.nulls.is_some()
    }

    /// Whether row `row` is NULL.
    pub fn is_null(&self, row: usize) -> bool {
        self.nulls.as_ref().is_some_and(|bits| bits[row / 64] >> (row % 64) & 1 == 1)
    }

    /// The NULL bits of block `block` (bit set = NULL), or `None` without NULLs.
    pub fn null_mask(&self, block: usize) -> Option<BlockMask> {
        let bits = self.nulls.as_ref()?;
        let mut mask = [0u64; MASK_WORDS];
        let first = block * MASK_WORDS;
        for (i, word) in mask.iter_mut().enumerate() {
            *word = bits.get(first + i).copied().unwrap_or(0);
        }
        Some(mask)
    }

    /// The value of a row.
    pub fn value(&self, row: usize) -> Value {
        if self.is_null(row) {
            return Value::Null;
        }
        match &self.data {
            ColumnData::Int(ints) => Value::Int(ints.get(row)),
            ColumnData::Bool(ints) => Value::Bool(ints.get(row) != 0),
            ColumnData::Double(doubles) => Value::Double(doubles[row]),
            ColumnData::Text { dictionary, codes } => Value::text(dictionary.get(codes.get(row) as usize)),
        }
    }

    /// Bytes read when a task scans blocks `blocks` of this chunk (encoded data plus NULL bits).
    pub fn bytes_of_blocks(&self, blocks: std::ops::Range<usize>) -> u64 {
        let rows = (blocks.end.min(self.rows.div_ceil(BLOCK_ROWS)) - blocks.start) * BLOCK_ROWS;
        let data = match &self.data {
            ColumnData::Int(ints) | ColumnData::Bool(ints) | ColumnData::Text { codes: ints, .. } => {
                ints.bytes_of_blocks(blocks.start..blocks.end.min(ints.blocks().len()))
            }
            ColumnData::Double(_) => rows as u64 * 8,
        };
        data + if self.nulls.is_some() { rows as u64 / 8 } else { 0 }
    }

    /// All bytes the chunk holds.
    pub fn bytes(&self) -> u64 {
        let data = match &self.data {
            ColumnData::Int(ints) | ColumnData::Bool(ints) => ints.held_bytes(),
            ColumnData::Double(doubles) => doubles.len() as u64 * 8,
            ColumnData::Text { dictionary, codes } => codes.held_bytes() + dictionary.bytes(),
        };
        data + self.nulls.as_ref().map_or(0, |n| n.len() as u64 * 8)
    }

    /// The memory regions holding the chunk.
    pub fn regions(&self) -> Vec<&Region> {
        let mut regions = match &self.data {
            ColumnData::Int(ints) | ColumnData::Bool(ints) => ints.regions(),
            ColumnData::Double(doubles) => vec![doubles.region()],
            ColumnData::Text { dictionary, codes } => {
                let mut regions = codes.regions();
                regions.push(dictionary.bytes.region());
                regions.push(dictionary.offsets.region());
                regions
            }
        };
        if let Some(nulls) = &self.nulls {
            regions.push(nulls.region());
        }
        regions
    }

    /// Asks the kernel where the chunk's pages are, and remembers each node's share for byte accounting.
    pub fn verify(&self) -> Result<PageHistogram, PlacementError> {
        let mut histogram = PageHistogram::default();
        for region in self.regions() {
            histogram.add(&region.page_locations()?);
        }
        let known = histogram.known();
        if known > 0 {
            let shares: Vec<(u32, f64)> =
                histogram.per_node.iter().map(|(&node, &pages)| (node, pages as f64 / known as f64)).collect();
            *self.node_shares.lock().unwrap_or_else(|p| p.into_inner()) = Arc::from(shares);
        }
        Ok(histogram)
    }

    /// Moves the chunk's pages by `policy` (see [`Region::migrate`]) and re-verifies.
    pub fn migrate(&self, policy: &Policy) -> Result<PageHistogram, PlacementError> {
        for region in self.regions() {
            region.migrate(policy.clone())?;
        }
        self.verify()
    }

    /// Each node's share of the chunk's pages (at the last verification, or by policy).
    pub fn node_shares(&self) -> Arc<[(u32, f64)]> {
        Arc::clone(&self.node_shares.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The policy the chunk's data was last placed with.
    pub fn policy(&self) -> Policy {
        self.regions().first().map(|r| r.policy()).unwrap_or(Policy::OsDefault)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_round_trip_through_every_encoding() {
        let mut values: Vec<i64> = (0..5000).map(|i| i * 7 - 1000).collect();
        values[1500] = i64::MAX; // a wide block
        values[1501] = i64::MIN;
        let column = IntColumn::encode(&values, None, &Policy::OsDefault).unwrap();
        for (row, &value) in values.iter().enumerate() {
            assert_eq!(column.get(row), value, "row {row}");
        }
        assert_eq!(column.blocks()[1].width, WIDE);
        assert_eq!(column.blocks()[0].width, 13); // 1023 * 7 needs 13 bits
        let mut decoded = [0i64; BLOCK_ROWS];
        column.decode_block(4, &mut decoded);
        assert_eq!(&decoded[..5000 - 4096], &values[4096..]);
        // Byte counts of block ranges are offset differences; they equal the blocks' sizes summed.
        let blocks = column.blocks().len();
        for start in 0..blocks {
            for end in start..=blocks {
                let summed: u64 = column.blocks()[start..end].iter().map(|m| m.words() as u64 * 4).sum();
                assert_eq!(column.bytes_of_blocks(start..end), summed, "{start}..{end}");
            }
        }
        assert_eq!(column.bytes(), column.bytes_of_blocks(0..blocks));
    }

    #[test]
    fn blocks_decode_alike_on_every_instruction_set_at_every_width() {
        // One block per width 0..=32: values base + (i * 2654435761 mod 2^width), base negative.
        for width in 0..=32u32 {
            let base = -(1i64 << 40) + i64::from(width);
            let values: Vec<i64> =
                (0..BLOCK_ROWS as u64).map(|i| base + ((i * 2_654_435_761) & ((1u64 << width) - 1)) as i64).collect();
            let column = IntColumn::encode(&values, None, &Policy::OsDefault).unwrap();
            let (meta, words) = (column.blocks()[0], column.block_words(0));
            let mut portable = [0i64; BLOCK_ROWS];
            decode(words, meta.width, meta.base, &mut portable);
            assert_eq!(&portable[..], &values[..], "width {width}");
            let mut dispatched = [0i64; BLOCK_ROWS];
            column.decode_block(0, &mut dispatched);
            assert_eq!(dispatched, portable, "width {width}, {:?}", bitpack::Isa::best());
            for isa in bitpack::Isa::ALL.into_iter().filter(|isa| isa.is_available()) {
                let mut decoded = [0i64; BLOCK_ROWS];
                // SAFETY: filtered to what this CPU runs.
                unsafe { decode_on(isa, words, meta.width, meta.base, &mut decoded) };
                assert_eq!(decoded, portable, "width {width}, {isa:?}");
            }
        }
    }

    #[test]
    fn range_masks_follow_the_frame_of_reference() {
        let values: Vec<i64> = (0..2048).map(|i| 1_000_000 + i).collect();
        let column = IntColumn::encode(&values, None, &Policy::OsDefault).unwrap();
        let mut mask = [0u64; MASK_WORDS];
        assert!(column.range_mask(0, 1_000_010, 1_000_019, &mut mask), "the block is read");
        assert_eq!(bitpack::count(&mask), 10);
        assert_eq!(mask[0], 0x3ff << 10);
        // Block 1 holds 1_001_024..=1_002_047: its frame of reference rules these out or in without reading it.
        assert!(!column.range_mask(1, i64::MIN, 1_000_000, &mut mask));
        assert_eq!(bitpack::count(&mask), 0);
        assert!(!column.range_mask(1, i64::MIN, i64::MAX, &mut mask));
        assert_eq!(bitpack::count(&mask), 1024);
        assert!(!column.range_mask(1, 5, 4, &mut mask));
        assert_eq!(bitpack::count(&mask), 0);
        // Wholly above the block's values: nothing, whatever the width's spare codes.
        assert!(!column.range_mask(0, 1_001_024, 1_001_024, &mut mask));
        assert_eq!(bitpack::count(&mask), 0);
        assert!(!column.range_mask(0, 5_000_000, i64::MAX, &mut mask));
        assert_eq!(bitpack::count(&mask), 0);
        // The zone map is the block's values, not its width's codes: 0..=1000 packs in 10 bits (codes up to
        // 1023), yet [0, 1000] selects the whole block and [1001, 1023] nothing, neither reading it.
        let column = IntColumn::encode(&(0..=1000).collect::<Vec<i64>>(), None, &Policy::OsDefault).unwrap();
        assert_eq!(column.blocks()[0].width, 10);
        assert!(!column.range_mask(0, 0, 1000, &mut mask));
        assert_eq!(bitpack::count(&mask), 1024, "rows past the end are the caller's to clear");
        assert!(!column.range_mask(0, 1001, 1023, &mut mask));
        assert_eq!(bitpack::count(&mask), 0);
        assert!(column.range_mask(0, 0, 999, &mut mask), "all but the largest value: read");
        assert_eq!(bitpack::count(&mask), 1000 + 23, "with the 23 rows past the end, which hold code 0");
        assert!(column.range_mask(0, 1000, 1023, &mut mask));
        assert_eq!(mask[15], 1 << 40, "row 1000 alone");
    }

    #[test]
    fn combined_masks_hold_the_identity_until_written_even_when_reused() {
        let mut masks = CombinedMasks::new(Combine::Or, 130);
        assert_eq!((masks.len(), masks.written().count()), (130, 0));
        assert_eq!(masks.get(129), [0; MASK_WORDS]);
        let mut leaf = [0; MASK_WORDS];
        leaf[3] = 0b110;
        masks.merge(64, &leaf);
        masks.merge(64, &[1; MASK_WORDS]);
        masks.set(129, [7; MASK_WORDS]);
        assert_eq!(masks.get(64)[3], 0b111, "merged by OR");
        assert_eq!(masks.get(64)[0], 1);
        assert_eq!(masks.written().collect::<Vec<_>>(), [64, 129]);
        // Reused for an AND over fewer blocks: the slots still hold the OR's masks, but read as everything.
        masks.reset(Combine::And, 100);
        assert_eq!((masks.len(), masks.written().count()), (100, 0));
        assert_eq!(masks.get(64), [u64::MAX; MASK_WORDS]);
        masks.merge(64, &leaf);
        masks.merge(64, &[0b10; MASK_WORDS]);
        assert_eq!(masks.get(64)[3], 0b10, "merged by AND");
        assert_eq!(masks.get(64)[0], 0);
        masks.reset(Combine::Or, 200);
        assert!((0..200).all(|i| masks.get(i) == [0; MASK_WORDS]), "grown and reset: nothing selected");
    }

    /// The blocks whose words `runs` (from [`IntColumn::words_loaded`]) touch, in order.
    fn blocks_touched(column: &IntColumn, runs: &[std::ops::Range<usize>]) -> Vec<usize> {
        (0..column.blocks().len())
            .filter(|&block| {
                let meta = &column.blocks()[block];
                let words = meta.offset as usize..meta.offset as usize + meta.words();
                runs.iter().any(|run| run.start < words.end && words.start < run.end)
            })
            .collect()
    }

    #[test]
    fn combined_range_masks_equal_block_by_block_masks_and_count_only_blocks_read() {
        // Blocks of different kinds: sorted (zone maps settle most), random narrow, random with a wide outlier
        // (64-bit codes), constant (width 0).
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut values: Vec<i64> = (0..3000).collect();
        values.extend((0..2000).map(|_| rng.random_range(-500..500)));
        values.extend((0..1024).map(|i| if i == 7 { i64::MAX - 3 } else { rng.random_range(0..100) }));
        values.extend(std::iter::repeat_n(42, 1500));
        let column = IntColumn::encode(&values, None, &Policy::OsDefault).unwrap();
        let blocks = column.blocks().len();
        let ranges =
            [(0, 10), (0, 1022), (-100, 2500), (42, 42), (i64::MIN, 0), (100, i64::MAX), (5, 4), (i64::MIN, i64::MAX)];
        // Every prefetch depth (none, fewer and more than the blocks read, past the maximum) reads the same.
        let depths = [0, 1, 2, 3, PREFETCH_BLOCKS_MAX, PREFETCH_BLOCKS_MAX + 5];
        for ((low, high), depth) in ranges.into_iter().flat_map(|range| depths.map(|depth| (range, depth))) {
            for (combine, start) in [(Combine::Or, [0u64; MASK_WORDS]), (Combine::And, [u64::MAX; MASK_WORDS])] {
                let mut initial: Vec<BlockMask> = (0..blocks).map(|_| start).collect();
                initial[1][0] ^= 0b1011; // a running mask that is not the identity
                let range = 1..blocks;
                let mut combined = CombinedMasks::new(combine, range.len());
                combined.set(0, initial[1]);
                let bytes = column.combine_range_masks(range.clone(), low, high, &mut combined, depth);
                let by_quarters = reads_by_quarters(&[RangeLeaf { column: &column, low, high }], range.clone(), depth);
                let runs: Vec<_> = column.words_loaded(range.clone(), low, high, by_quarters).collect();
                let expected_bytes: u64 = runs.iter().map(|run| run.len() as u64 * 4).sum();
                let loaded = blocks_touched(&column, &runs);
                for block in range.clone() {
                    let mut leaf = [0u64; MASK_WORDS];
                    if column.range_mask(block, low, high, &mut leaf) {
                        assert!(loaded.contains(&block) || leaf == [0; MASK_WORDS], "block {block}, [{low}, {high}]");
                        assert!(combined.is_written(block - range.start), "block {block} read, not written");
                        assert_eq!(column.blocks_words(block..block + 1), column.block_words(block));
                    } else {
                        assert!(!loaded.contains(&block), "block {block} is settled, [{low}, {high}]");
                    }
                    if !by_quarters {
                        assert_eq!(loaded.contains(&block), column.range_mask(block, low, high, &mut leaf));
                    }
                    let expected: BlockMask = std::array::from_fn(|i| match combine {
                        Combine::Or => initial[block][i] | leaf[i],
                        Combine::And => initial[block][i] & leaf[i],
                    });
                    let i = block - range.start;
                    assert_eq!(combined.get(i), expected, "block {block}, [{low}, {high}], {combine:?}, depth {depth}");
                    // Only blocks written by this call (or before it) hold anything but the identity.
                    let changed = leaf != start || block == 1;
                    assert!(combined.is_written(i) || !changed, "block {block} changed unwritten");
                    // And against the values themselves (rows past the end are the caller's to clear).
                    for row in block * BLOCK_ROWS..values.len().min((block + 1) * BLOCK_ROWS) {
                        let bit = leaf[row % BLOCK_ROWS / 64] >> (row % 64) & 1 == 1;
                        assert_eq!(bit, (low..=high).contains(&values[row]), "row {row}, [{low}, {high}]");
                    }
                }
                let written: Vec<usize> = combined.written().collect();
                assert!(written.windows(2).all(|w| w[0] < w[1]), "written blocks in order");
                assert!(written.iter().all(|&i| combined.is_written(i)));
                assert!((0..combined.len()).filter(|&i| combined.is_written(i)).eq(written.iter().copied()));
                assert_eq!(bytes, expected_bytes, "[{low}, {high}], {combine:?}, depth {depth}");
            }
        }
        let all = column.blocks_words(0..blocks);
        assert_eq!(std::mem::size_of_val(all) as u64, column.bytes(), "blocks lie back to back");
        assert!(column.blocks_words(2..2).is_empty());
    }

    #[test]
    fn leaves_through_one_ring_combine_as_each_leaf_on_its_own() {
        // Three columns over the same rows: sorted (zone maps settle most blocks both ways), random, and random
        // with a sorted stretch; the leaves' verdicts differ block by block, so settled blocks of a later leaf
        // are written while reads of an earlier one are still pending in the ring.
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let rows = 9 * BLOCK_ROWS + 300;
        let sorted: Vec<i64> = (0..rows as i64).collect();
        let random: Vec<i64> = (0..rows).map(|_| rng.random_range(0..rows as i64)).collect();
        let mixed: Vec<i64> =
            (0..rows).map(|r| if r < 4 * BLOCK_ROWS { r as i64 } else { rng.random_range(0..rows as i64) }).collect();
        let columns: Vec<IntColumn> = [&sorted, &random, &mixed]
            .iter()
            .map(|v| IntColumn::encode(v, None, &Policy::OsDefault).unwrap())
            .collect();
        let blocks = columns[0].blocks().len();
        let ranges = [(0, 3000), (2 * BLOCK_ROWS as i64, 6 * BLOCK_ROWS as i64), (i64::MIN, 100), (5000, i64::MAX)];
        for depth in [0, 1, 2, 3, PREFETCH_BLOCKS_MAX] {
            for combine in [Combine::Or, Combine::And] {
                for range in [0..blocks, 2..7, 3..3] {
                    let leaves: Vec<RangeLeaf<'_>> = columns
                        .iter()
                        .zip(ranges.iter().cycle().skip(depth % 3))
                        .map(|(column, &(low, high))| RangeLeaf { column, low, high })
                        .collect();
                    let mut together = CombinedMasks::new(combine, range.len());
                    let mut bytes = vec![0; leaves.len()];
                    combine_range_leaves(&leaves, range.clone(), &mut together, depth, &mut bytes);
                    let mut apart = CombinedMasks::new(combine, range.len());
                    let by_quarters = reads_by_quarters(&leaves, range.clone(), depth);
                    for (leaf, &leaf_bytes) in leaves.iter().zip(&bytes) {
                        let alone = leaf.column.combine_range_masks(range.clone(), leaf.low, leaf.high, &mut apart, 0);
                        let runs = leaf.column.words_loaded(range.clone(), leaf.low, leaf.high, by_quarters);
                        let loaded: u64 = runs.map(|run| run.len() as u64 * 4).sum();
                        assert_eq!(leaf_bytes, loaded, "{combine:?}, depth {depth}, {range:?}");
                        assert!(leaf_bytes <= alone, "{combine:?}, depth {depth}, {range:?}: whole blocks read alone");
                    }
                    for i in 0..range.len() {
                        assert_eq!(together.get(i), apart.get(i), "block {i}, {combine:?}, depth {depth}");
                        // Against the values: the rows of the block the leaves combine to.
                        let mask = together.get(i);
                        for row in (range.start + i) * BLOCK_ROWS..rows.min((range.start + i + 1) * BLOCK_ROWS) {
                            let hits = leaves
                                .iter()
                                .zip([&sorted, &random, &mixed])
                                .map(|(leaf, values)| (leaf.low..=leaf.high).contains(&values[row]));
                            let expected = match combine {
                                Combine::Or => hits.fold(false, |a, b| a | b),
                                Combine::And => hits.fold(true, |a, b| a & b),
                            };
                            let bit = mask[row % BLOCK_ROWS / 64] >> (row % 64) & 1 == 1;
                            assert_eq!(bit, expected, "row {row}, {combine:?}, depth {depth}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn sparse_scans_reach_further_ahead_and_read_the_same() {
        // A small value in every 5th block (a fifth of the blocks to read: sparse) or in every 2nd (half of
        // them: dense), and `value <= 10` as the leaves.
        let rows = 200 * BLOCK_ROWS;
        let small_every = |every: usize| -> Vec<i64> {
            let small = |r: usize| (r / BLOCK_ROWS).is_multiple_of(every) && r % 97 == 3;
            (0..rows).map(|r| if small(r) { 5 } else { 1000 + (r % 777) as i64 }).collect()
        };
        let (sparse_values, dense_values) = (small_every(5), small_every(2));
        let sparse = IntColumn::encode(&sparse_values, None, &Policy::OsDefault).unwrap();
        let dense = IntColumn::encode(&dense_values, None, &Policy::OsDefault).unwrap();
        let leaf = |column| RangeLeaf { column, low: i64::MIN, high: 10 };
        let sparse_at = |leaves: &[RangeLeaf<'_>], blocks| reading(leaves, blocks, PREFETCH_BLOCKS_DEFAULT).sparse;
        assert!(sparse_at(&[leaf(&sparse)], 0..200));
        assert!(!sparse_at(&[leaf(&dense)], 0..200));
        assert!(!sparse_at(&[leaf(&sparse), leaf(&dense)], 0..200), "the leaves are sampled together");
        assert!(sparse_at(&[leaf(&sparse)], 3..200), "a morsel starting later");
        assert!(!reading(&[leaf(&sparse)], 0..200, 0).sparse, "no prefetching: no ring to deepen");
        let cases = [
            (vec![leaf(&sparse)], vec![&sparse_values]),
            (vec![leaf(&sparse), leaf(&sparse)], vec![&sparse_values, &sparse_values]),
            (vec![leaf(&sparse), leaf(&dense)], vec![&sparse_values, &dense_values]),
        ];
        for (leaves, values) in &cases {
            for range in [0..200, 7..150, 0..3] {
                let mut at_once = CombinedMasks::new(Combine::Or, range.len());
                let mut at_once_bytes = vec![0; leaves.len()];
                combine_range_leaves(leaves, range.clone(), &mut at_once, 0, &mut at_once_bytes);
                // Near rings of every depth, with the L2 blocks beyond them (none past the ring's maximum).
                for depth in [1, 2, 3, PREFETCH_BLOCKS_MAX - 1, PREFETCH_BLOCKS_MAX] {
                    let mut ringed = CombinedMasks::new(Combine::Or, range.len());
                    let mut bytes = vec![0; leaves.len()];
                    combine_range_leaves(leaves, range.clone(), &mut ringed, depth, &mut bytes);
                    let by_quarters = reads_by_quarters(leaves, range.clone(), depth);
                    for (leaf, (&bytes, &at_once)) in leaves.iter().zip(bytes.iter().zip(&at_once_bytes)) {
                        let runs = leaf.column.words_loaded(range.clone(), leaf.low, leaf.high, by_quarters);
                        assert_eq!(bytes, runs.map(|run| run.len() as u64 * 4).sum::<u64>(), "depth {depth}");
                        assert!(bytes <= at_once, "depth {depth}, {range:?}: quarters read, not more");
                    }
                    for (i, block) in range.clone().enumerate() {
                        assert_eq!(ringed.get(i), at_once.get(i), "block {block}, depth {depth}, {range:?}");
                        let mask = ringed.get(i);
                        for row in block * BLOCK_ROWS..(block + 1) * BLOCK_ROWS {
                            let expected = values.iter().any(|v| v[row] <= 10);
                            assert_eq!(mask[row % BLOCK_ROWS / 64] >> (row % 64) & 1 == 1, expected, "row {row}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn quarter_zones_never_miss_a_selected_code() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        for width in [1u8, 7, 16, 17, 26, 32] {
            let max = u64::from(u32::MAX >> (32 - u32::from(width)));
            for _ in 0..300 {
                // Clustered codes, so that quarters differ and some ranges miss some of them.
                let centre = rng.random_range(0..=max);
                let codes: [u32; BLOCK_ROWS] = std::array::from_fn(|row| {
                    let spread = (max >> (row / QUARTER_ROWS * 2 + 1)).max(1);
                    centre.saturating_sub(spread / 2).saturating_add(rng.random_range(0..=spread)).min(max) as u32
                });
                let zones = quarter_zones(&codes, width);
                let code_low = rng.random_range(0..=max);
                let narrowing = rng.random_range(0..8);
                let span = rng.random_range(0..=(max - code_low).min(max >> narrowing));
                let quarters = quarters_to_read(&zones, width, code_low, span);
                for (quarter, codes) in codes.chunks_exact(QUARTER_ROWS).enumerate() {
                    let hit = codes.iter().any(|&code| (code_low..=code_low + span).contains(&u64::from(code)));
                    assert!(!hit || quarters >> quarter & 1 == 1, "width {width}: quarter {quarter} missed");
                    if width <= 16 {
                        // Exact zones: a quarter read holds codes on both sides of the range or inside it.
                        let (low, high) = (codes.iter().min().unwrap(), codes.iter().max().unwrap());
                        let meets = u64::from(*low) <= code_low + span && code_low <= u64::from(*high);
                        assert_eq!(quarters >> quarter & 1 == 1, meets, "width {width}, quarter {quarter}");
                    }
                }
            }
        }
    }

    #[test]
    fn sparse_scans_read_only_the_quarters_that_may_hold_selected_rows() {
        // Wide random values (30-bit codes: quarter zones shifted by 14 bits) and, in every 5th block, a few
        // small ones in one quarter (which one changes from block to block) or, in every 25th, in two.
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(14);
        let rows = 200 * BLOCK_ROWS + 100;
        let small_quarters = |block: usize| -> u8 {
            match block {
                _ if !block.is_multiple_of(5) => 0,
                _ if block.is_multiple_of(25) => 0b1001,
                _ => 1 << (block / 5 % 4),
            }
        };
        let values: Vec<i64> = (0..rows)
            .map(|row| {
                let (block, quarter) = (row / BLOCK_ROWS, row % BLOCK_ROWS / QUARTER_ROWS);
                if small_quarters(block) >> quarter & 1 == 1 && row % 50 == 7 {
                    rng.random_range(0..10)
                } else {
                    rng.random_range(1 << 20..1 << 30)
                }
            })
            .collect();
        let column = IntColumn::encode(&values, None, &Policy::OsDefault).unwrap();
        assert!(column.blocks().iter().all(|meta| meta.width == 30));
        let other = IntColumn::encode(&vec![1 << 25; rows], None, &Policy::OsDefault).unwrap();
        let blocks = column.blocks().len();
        for (low, high) in [(i64::MIN, 9), (3, 5), (0, 0)] {
            let leaves = [RangeLeaf { column: &column, low, high }, RangeLeaf { column: &other, low, high }];
            for range in [0..blocks, 13..170] {
                assert!(reads_by_quarters(&leaves, range.clone(), 2));
                assert!(!reads_by_quarters(&leaves, range.clone(), 0), "no prefetching: whole blocks");
                for combine in [Combine::Or, Combine::And] {
                    let mut masks = CombinedMasks::new(combine, range.len());
                    let mut bytes = [0; 2];
                    combine_range_leaves(&leaves, range.clone(), &mut masks, 2, &mut bytes);
                    let runs: Vec<_> = column.words_loaded(range.clone(), low, high, true).collect();
                    assert_eq!(bytes[0], runs.iter().map(|run| run.len() as u64 * 4).sum::<u64>());
                    assert_eq!(bytes[1], 0, "the constant column is settled by its zone map");
                    // Every block with small values has one or two of its quarters read, 15 lines each.
                    let quarter_bytes = 15 * 64;
                    let expected: u64 =
                        range.clone().map(|block| u64::from(small_quarters(block).count_ones()) * quarter_bytes).sum();
                    if low == i64::MIN {
                        assert!(bytes[0] >= expected, "[{low}, {high}] {range:?}: {} < {expected}", bytes[0]);
                    }
                    assert!(bytes[0] < expected + 4 * quarter_bytes, "[{low}, {high}] {range:?}: {}", bytes[0]);
                    for (i, block) in range.clone().enumerate() {
                        let mask = masks.get(i);
                        for row in block * BLOCK_ROWS..rows.min((block + 1) * BLOCK_ROWS) {
                            let selected = mask[row % BLOCK_ROWS / 64] >> (row % 64) & 1 == 1;
                            let hit = (low..=high).contains(&values[row]);
                            let other_hit = (low..=high).contains(&(1 << 25));
                            let expected = match combine {
                                Combine::Or => hit || other_hit,
                                Combine::And => hit && other_hit,
                            };
                            assert_eq!(selected, expected, "row {row}, [{low}, {high}], {combine:?}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn settled_blocks_amid_a_stream_of_reads_are_loaded_and_select_the_same() {
        // `value <= 10` over 300 blocks holding a small value: 9 of every 10 of the first 200, then 6 of every 10
        // (too few for the skips to be filled); and a column with 6 of every 10 throughout.
        let rows = 300 * BLOCK_ROWS;
        let has_small = |block: usize, dense_until: usize| block % 10 < if block < dense_until { 9 } else { 6 };
        let column_of = |dense_until: usize| -> Vec<i64> {
            (0..rows)
                .map(
                    |r| if has_small(r / BLOCK_ROWS, dense_until) && r % 89 == 5 { 3 } else { 1000 + (r % 555) as i64 },
                )
                .collect()
        };
        for dense_until in [200, 0] {
            let values = column_of(dense_until);
            let column = IntColumn::encode(&values, None, &Policy::OsDefault).unwrap();
            for range in [0..300usize, 37..260, 190..300, 0..60, 5..5] {
                // A block is loaded if it must be read, or if at least 44 of the 64 blocks of the range before it
                // must be.
                let expected: Vec<usize> = range
                    .clone()
                    .filter(|&block| {
                        let before = block.saturating_sub(64).max(range.start)..block;
                        has_small(block, dense_until)
                            || before.filter(|&b| has_small(b, dense_until)).count() >= STREAM_READS_MIN as usize
                    })
                    .collect();
                let runs: Vec<_> = column.words_loaded(range.clone(), i64::MIN, 10, false).collect();
                let loaded = blocks_touched(&column, &runs);
                assert_eq!(loaded, expected, "{range:?}, dense until block {dense_until}");
                let settled_loaded = loaded.iter().filter(|&&b| !has_small(b, dense_until)).count();
                if dense_until == 200 && range.start <= 100 && range.end >= 150 {
                    assert!(settled_loaded > 5, "{range:?}: skips in the dense part filled");
                } else if dense_until == 0 || range.start >= 190 || range.is_empty() {
                    assert_eq!(settled_loaded, 0, "{range:?}: no 64 blocks of the dense part");
                }
                let expected_bytes: u64 = loaded.iter().map(|&b| column.bytes_of_blocks(b..b + 1)).sum();
                for depth in [0, 2, PREFETCH_BLOCKS_MAX] {
                    let mut masks = CombinedMasks::new(Combine::Or, range.len());
                    let bytes = column.combine_range_masks(range.clone(), i64::MIN, 10, &mut masks, depth);
                    assert_eq!(bytes, expected_bytes, "{range:?}, depth {depth}: the bytes loaded count");
                    for (i, block) in range.clone().enumerate() {
                        let mask = masks.get(i);
                        for row in block * BLOCK_ROWS..(block + 1) * BLOCK_ROWS {
                            let selected = mask[row % BLOCK_ROWS / 64] >> (row % 64) & 1 == 1;
                            assert_eq!(selected, values[row] <= 10, "row {row}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn text_uses_an_order_preserving_dictionary() {
        let values: Vec<Value> = ["pear", "apple", "fig", "apple", "banana"].iter().map(|s| Value::text(s)).collect();
        let mut values = values;
        values.push(Value::Null);
        let chunk = ColumnChunk::from_values(DataType::Text, &values, &Policy::OsDefault).unwrap();
        let ColumnData::Text { dictionary, .. } = chunk.data() else { panic!() };
        assert_eq!(
            (0..dictionary.len()).map(|c| dictionary.get(c)).collect::<Vec<_>>(),
            ["apple", "banana", "fig", "pear"]
        );
        assert_eq!(dictionary.lower_bound("b"), 1);
        assert_eq!(dictionary.upper_bound("fig"), 3);
        assert_eq!(dictionary.lower_bound("zzz"), 4);
        for (row, value) in values.iter().enumerate() {
            assert_eq!(&chunk.value(row), value);
        }
        assert!(chunk.is_null(5));
        assert!(chunk.has_nulls());
    }

    #[test]
    fn nulls_doubles_and_booleans() {
        let values = vec![Value::Double(1.5), Value::Null, Value::Double(f64::NEG_INFINITY)];
        let chunk = ColumnChunk::from_values(DataType::Double, &values, &Policy::OsDefault).unwrap();
        assert_eq!(chunk.value(0), Value::Double(1.5));
        assert_eq!(chunk.value(1), Value::Null);
        let values = vec![Value::Bool(true), Value::Bool(false), Value::Null];
        let chunk = ColumnChunk::from_values(DataType::Boolean, &values, &Policy::OsDefault).unwrap();
        assert_eq!((0..3).map(|r| chunk.value(r)).collect::<Vec<_>>(), values);
        let empty = ColumnChunk::from_values(DataType::Integer, &[], &Policy::OsDefault).unwrap();
        assert_eq!(empty.rows(), 0);
    }
}
