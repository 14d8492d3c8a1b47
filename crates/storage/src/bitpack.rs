//! Bit-packed integer blocks, and predicates evaluated on the packed codes.
//!
//! # Layout
//! A block holds [`BLOCK_ROWS`] = 1024 codes of `width` bits (0-32). The codes are *interleaved over 16 lanes*:
//! code `i` belongs to lane `i % 16` at position `i / 16`, and each lane's 64 codes are packed back to back into a
//! stream of 32-bit words; word `k` of lane `l` is stored at index `k * 16 + l`. A block is therefore exactly
//! `32 * width` words (`128 * width` bytes) with no padding, and the codes of 16 consecutive rows sit at the same
//! bit offset of 16 consecutive words. That is the point of the layout (Lemire's SIMD-BP128, FastLanes): one
//! 512-bit load, one uniform shift and one mask decode the codes of 16 rows, in row order, without gathers or
//! shuffles, and the same code runs as 2 × 256-bit (AVX2) or as plain scalar code with identical results.
//!
//! # Predicates on codes
//! Every comparison the engine needs reduces to "code in [lo, hi]": `x < p` is `[0, p-base-1]` after
//! frame-of-reference, `x = p` is `[p-base, p-base]`, `BETWEEN` is a range, `<>` and `NOT` are complements, `IN` is
//! a union. So there is one kernel, [`range_mask`]: `(code - lo) <= (hi - lo)` in wrapping unsigned arithmetic,
//! producing a 1024-bit selection mask for the block. It never writes the decoded codes anywhere: decoding lives
//! in registers between the load and the compare ("scanned without unpacking first").
//!
//! # Quarters
//! A quarter of a block (rows `256q..256q + 256`) is positions `16q..16q + 16` of every lane, so its codes fill
//! consecutive 64-byte lines of the block ([`quarter_words`]; exactly `width / 2` lines for an even width). A
//! scan that knows which quarters may hold selected rows (the column's quarter zones) loads and decodes only
//! those ([`range_mask_quarters`]): on uniform data, where a block's zone map rarely settles it, a quarter's
//! settles it four times as often.
//!
//! The kernel is one generic function, monomorphised per width (so shifts are constants and the 64 positions of
//! a lane unroll) and compiled four times: for AVX-512 with and without AVX512_VBMI2 (whose funnel shift joins a
//! code that straddles two words in one instruction), for AVX2 and for the baseline target. The variant is chosen
//! once at run time from the CPU's features; tests check all available variants against each other.
//!
//! The SIMD variants never isolate a code at the bottom of its word: they shift it to the *top* (one left shift,
//! or two shifts and an OR where it straddles two words) and compare against a bound shifted the same way, with
//! the bits below it as don't-cares (see `TopAligned`). That drops the mask, and for `x < p`, `x <= p` the
//! subtract, from every 16 codes; with each position's 16-bit result stored straight into the block mask the
//! AVX-512 kernel decodes 26-bit codes ~1.5× and 10-bit codes ~2× faster from cache than shift-right-and-mask.

use std::sync::OnceLock;

/// `fn $name(isa, args) -> ret`: `$portable` (an `#[inline(always)]` loop written for the compiler to vectorize)
/// compiled for `isa`: AVX-512 (with or without AVX512_VBMI2), AVX2 or the baseline. `$name` is unsafe: the CPU must run `isa`.
#[macro_export]
macro_rules! on_every_isa {
    ($name:ident($($arg:ident: $type:ty),*) -> $ret:ty = $portable:ident) => {
        /// # Safety
        /// The CPU runs `isa` ([`Isa::is_available`]($crate::bitpack::Isa::is_available)).
        #[inline]
        unsafe fn $name(isa: $crate::bitpack::Isa, $($arg: $type),*) -> $ret {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,bmi2")]
                fn avx512($($arg: $type),*) -> $ret {
                    $portable($($arg),*)
                }
                #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx512vbmi2,avx2,bmi2")]
                fn avx512_vbmi2($($arg: $type),*) -> $ret {
                    $portable($($arg),*)
                }
                #[target_feature(enable = "avx2,bmi2")]
                fn avx2($($arg: $type),*) -> $ret {
                    $portable($($arg),*)
                }
                match isa {
                    // SAFETY: the caller vouches that the CPU runs `isa`.
                    $crate::bitpack::Isa::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    $crate::bitpack::Isa::Avx512Vbmi2 => return unsafe { avx512_vbmi2($($arg),*) },
                    // SAFETY: as above.
                    $crate::bitpack::Isa::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::bitpack::Isa::Baseline => {}
                }
            }
            let _ = isa;
            $portable($($arg),*)
        }
    };
}

/// Codes per block.
pub const BLOCK_ROWS: usize = 1024;
/// Interleaving lanes (32-bit words per 512 bits).
pub const LANES: usize = 16;
/// Codes per lane in a block.
const POSITIONS: usize = BLOCK_ROWS / LANES;
/// 64-bit words in a block's selection mask.
pub const MASK_WORDS: usize = BLOCK_ROWS / 64;
/// Widest packed code.
pub const MAX_WIDTH: u32 = 32;

/// A block's selection mask: bit `i % 64` of word `i / 64` is row `i` of the block.
pub type BlockMask = [u64; MASK_WORDS];

/// 32-bit words of a packed block of `width`-bit codes.
pub const fn words_for_width(width: u32) -> usize {
    32 * width as usize
}

/// Bits needed to represent `max` (0 for 0).
pub fn width_for(max: u32) -> u32 {
    u32::BITS - max.leading_zeros()
}

/// Packs 1024 codes (each `< 2^width`) into `out` (`words_for_width(width)` words, overwritten).
pub fn pack(codes: &[u32; BLOCK_ROWS], width: u32, out: &mut [u32]) {
    assert!(width <= MAX_WIDTH, "width {width} > {MAX_WIDTH}");
    assert_eq!(out.len(), words_for_width(width));
    out.fill(0);
    if width == 0 {
        return;
    }
    let width = width as usize;
    for (row, &code) in codes.iter().enumerate() {
        debug_assert!(width == 32 || code >> width == 0, "code {code} does not fit in {width} bits");
        let lane = row % LANES;
        let bit = (row / LANES) * width;
        let (word, shift) = (bit / 32, bit % 32);
        out[word * LANES + lane] |= code << shift;
        if shift + width > 32 {
            out[(word + 1) * LANES + lane] |= code >> (32 - shift);
        }
    }
}

/// The code of row `row` (0-1023) of a packed block.
#[inline]
pub fn get(words: &[u32], width: u32, row: usize) -> u32 {
    if width == 0 {
        return 0;
    }
    let width = width as usize;
    let lane = row % LANES;
    let bit = (row / LANES) * width;
    let (word, shift) = (bit / 32, bit % 32);
    let mut code = words[word * LANES + lane] >> shift;
    if shift + width > 32 {
        code |= words[(word + 1) * LANES + lane] << (32 - shift);
    }
    if width == 32 { code } else { code & ((1u32 << width) - 1) }
}

/// Decodes all 1024 codes of a block into `out`.
pub fn unpack(words: &[u32], width: u32, out: &mut [u32; BLOCK_ROWS]) {
    unpack_with(words, width, |row, code| out[row] = code);
}

/// Calls `put(row, code)` for every row of a block, position by position: the 16 lanes of a position share one
/// shift, so each position is one loop over 16 words that the compiler vectorizes (a row at a time, the shift
/// and the word differ from row to row).
#[inline(always)]
pub fn unpack_with(words: &[u32], width: u32, mut put: impl FnMut(usize, u32)) {
    if width == 0 {
        (0..BLOCK_ROWS).for_each(|row| put(row, 0));
        return;
    }
    let width = width as usize;
    assert!(width <= MAX_WIDTH as usize && words.len() >= words_for_width(width as u32));
    let mask = if width == 32 { u32::MAX } else { (1u32 << width) - 1 };
    for position in 0..POSITIONS {
        let bit = position * width;
        let (word, shift) = (bit / 32, bit % 32);
        let low = &words[word * LANES..word * LANES + LANES];
        if shift + width > 32 {
            let high = &words[(word + 1) * LANES..(word + 1) * LANES + LANES];
            for (lane, (&low, &high)) in low.iter().zip(high).enumerate() {
                put(position * LANES + lane, (low >> shift | high << (32 - shift)) & mask);
            }
        } else {
            for (lane, &word) in low.iter().enumerate() {
                put(position * LANES + lane, (word >> shift) & mask);
            }
        }
    }
}

/// The generic kernel: sets in `out` the rows whose code `c` satisfies `c - lo <= span` (wrapping), i.e.
/// `lo <= c <= lo + span`. Always inlined into the per-ISA wrappers so that each is compiled with its features.
#[inline(always)]
fn range_mask_generic<const W: usize>(words: &[u32], lo: u32, span: u32, out: &mut BlockMask) {
    *out = [0; MASK_WORDS];
    range_mask_positions::<W>(words, 0..POSITIONS, lo, span, out);
}

/// [`range_mask_generic`] for the rows of `positions` alone: ORs their bits into `out` (whose other bits it leaves
/// as they are) and loads only the words those positions' codes lie in.
#[inline(always)]
fn range_mask_positions<const W: usize>(
    words: &[u32],
    positions: std::ops::Range<usize>,
    lo: u32,
    span: u32,
    out: &mut BlockMask,
) {
    if W == 0 {
        if 0u32.wrapping_sub(lo) <= span {
            for position in positions {
                out[position / 4] |= 0xffff << ((position % 4) * 16);
            }
        }
        return;
    }
    let (lanes, _) = words.as_chunks::<LANES>();
    let lanes = &lanes[..2 * W];
    let mask: u32 = if W == 32 { u32::MAX } else { (1u32 << W) - 1 };
    for position in positions {
        let bit = position * W;
        let (word, shift) = (bit / 32, bit % 32);
        let current = &lanes[word];
        let mut bits: u16 = 0;
        if shift + W > 32 {
            let next = &lanes[word + 1];
            for (lane, (&low, &high)) in current.iter().zip(next).enumerate() {
                let code = ((low >> shift) | (high << (32 - shift))) & mask;
                bits |= u16::from(code.wrapping_sub(lo) <= span) << lane;
            }
        } else {
            for (lane, &low) in current.iter().enumerate() {
                let code = (low >> shift) & mask;
                bits |= u16::from(code.wrapping_sub(lo) <= span) << lane;
            }
        }
        out[position / 4] |= u64::from(bits) << ((position % 4) * 16);
    }
}

type RangeKernel = unsafe fn(&[u32], u32, u32, &mut BlockMask);

macro_rules! width_table {
    ($kernel:ident) => {
        [
            $kernel::<0>,
            $kernel::<1>,
            $kernel::<2>,
            $kernel::<3>,
            $kernel::<4>,
            $kernel::<5>,
            $kernel::<6>,
            $kernel::<7>,
            $kernel::<8>,
            $kernel::<9>,
            $kernel::<10>,
            $kernel::<11>,
            $kernel::<12>,
            $kernel::<13>,
            $kernel::<14>,
            $kernel::<15>,
            $kernel::<16>,
            $kernel::<17>,
            $kernel::<18>,
            $kernel::<19>,
            $kernel::<20>,
            $kernel::<21>,
            $kernel::<22>,
            $kernel::<23>,
            $kernel::<24>,
            $kernel::<25>,
            $kernel::<26>,
            $kernel::<27>,
            $kernel::<28>,
            $kernel::<29>,
            $kernel::<30>,
            $kernel::<31>,
            $kernel::<32>,
        ]
    };
}

mod baseline {
    use super::*;
    /// The portable kernel (whatever the compiler makes of it for the baseline target).
    pub(super) fn kernel<const W: usize>(words: &[u32], lo: u32, span: u32, out: &mut BlockMask) {
        range_mask_generic::<W>(words, lo, span, out)
    }
    pub(super) const TABLE: [RangeKernel; 33] = width_table!(kernel);
}

/// Calls `$step::<W, LO_ZERO, P>(args)` for every position `P` of a lane (0-63), so that each position's word
/// index and shifts are compile-time constants: shifts become immediates and the loop disappears.
macro_rules! for_each_position {
    ($step:ident::<$w:ident, $z:tt>($($arg:expr),*)) => {
        for_each_position!(@ $step $w $z ($($arg),*)
            0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
            32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63)
    };
    (@ $step:ident $w:ident $z:tt $args:tt $($p:literal)*) => {
        $( for_each_position!(@call $step $w $z $p $args); )*
    };
    (@call $step:ident $w:ident $z:tt $p:literal ($($arg:expr),*)) => {
        $step::<$w, $z, $p>($($arg),*)
    };
}

/// The SIMD kernels' form of a query range: `[lo, lo + span]` taken modulo `2^width` (a range that wraps past the
/// largest code continues at 0), shifted to the top of a 32-bit word. See [`TopAligned`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct CodeRange {
    lo: u32,
    span: u32,
}

impl CodeRange {
    /// The codes of a `width`-bit block (1-32) that `code - lo <= span` (in wrapping 32-bit arithmetic) selects,
    /// as one range modulo `2^width`; `None` when it selects none.
    fn for_width(width: u32, lo: u32, span: u32) -> Option<CodeRange> {
        let max = u64::from(u32::MAX >> (32 - width));
        let (lo, last) = (u64::from(lo), u64::from(lo) + u64::from(span));
        const WRAP: u64 = 1 << 32;
        if last >= WRAP {
            // `[lo, 2^32)` and `[0, last - 2^32]`: within `[0, max]` that is `[lo, max]` (if `lo <= max`) followed,
            // modulo 2^width, by `[0, min(last - 2^32, max)]`.
            let wrapped_last = (last - WRAP).min(max);
            if lo > max {
                return Some(CodeRange { lo: 0, span: wrapped_last as u32 });
            }
            if wrapped_last + 1 >= lo {
                return Some(CodeRange { lo: 0, span: max as u32 });
            }
            return Some(CodeRange { lo: lo as u32, span: (max - lo + 1 + wrapped_last) as u32 });
        }
        (lo <= max).then(|| CodeRange { lo: lo as u32, span: (last.min(max) - lo) as u32 })
    }
}

/// A range test on codes moved to the top of their word: `(code << (32 - W)) | junk`, where `junk` is whatever
/// lower bits came along. Moving a code *up* (one left shift, or a left and a right shift ORed where it
/// straddles two words) needs no mask to clear the bits above it, and the junk below cannot change the outcome
/// of `top - (lo << s) <= (span << s) | (2^s - 1)` (s = 32 - W), which holds exactly when
/// `(code - lo) mod 2^W <= span`. Against the classic shift right, mask, subtract, compare, that is one or two
/// vector operations fewer per 16 codes, and none at all for the subtract when `lo` is 0 (`x < p`, `x <= p`):
/// the AVX-512 kernel decodes ~1.6× faster from cache.
#[derive(Debug, Clone, Copy)]
struct TopAligned {
    lo: u32,
    bound: u32,
}

impl TopAligned {
    fn new<const W: usize>(range: CodeRange) -> TopAligned {
        let s = 32 - W as u32;
        let junk = if s == 0 { 0 } else { (1u32 << s) - 1 };
        TopAligned { lo: range.lo << s, bound: (range.span << s) | junk }
    }
}

/// Runs a top-aligned SIMD kernel: W = 0 and empty ranges are settled here, and `lo == 0` gets the variant
/// without the subtract.
#[inline(always)]
fn dispatch_top_aligned<const W: usize>(
    words: &[u32],
    lo: u32,
    span: u32,
    out: &mut BlockMask,
    kernel: impl FnOnce(&[[u32; LANES]], TopAligned, bool, &mut [u16; POSITIONS]),
) {
    if W == 0 {
        return range_mask_generic::<0>(words, lo, span, out);
    }
    let Some(range) = CodeRange::for_width(W as u32, lo, span) else {
        *out = [0; MASK_WORDS];
        return;
    };
    let (lanes, _) = words.as_chunks::<LANES>();
    // Position `P`'s 16 bits are rows `16P..16P + 16`: on a little-endian machine that is bits `16(P % 4)..` of
    // mask word `P / 4`, exactly where the kernel's 16-bit masks land when it writes the mask as 64 halfwords.
    let selected: &mut [u16; POSITIONS] = bytemuck::cast_mut(out);
    kernel(&lanes[..2 * W], TopAligned::new::<W>(range), range.lo == 0, selected);
}

/// [`dispatch_top_aligned`] for one quarter of a block: W = 0 and empty ranges are settled here (selecting nothing
/// leaves the quarter's bits as they are), and the kernel writes the quarter's 16 positions of the mask.
#[inline(always)]
fn dispatch_top_aligned_quarter<const W: usize>(
    words: &[u32],
    quarter: usize,
    lo: u32,
    span: u32,
    out: &mut BlockMask,
    kernel: impl FnOnce(&[[u32; LANES]], TopAligned, bool, &mut [u16; POSITIONS]),
) {
    if W == 0 {
        let per = POSITIONS / QUARTERS;
        return range_mask_positions::<0>(words, quarter * per..quarter * per + per, lo, span, out);
    }
    let Some(range) = CodeRange::for_width(W as u32, lo, span) else { return };
    let (lanes, _) = words.as_chunks::<LANES>();
    let selected: &mut [u16; POSITIONS] = bytemuck::cast_mut(out);
    kernel(&lanes[..2 * W], TopAligned::new::<W>(range), range.lo == 0, selected);
}

/// Calls `$positions::<W, LO_ZERO, Q>(args)` for a run-time `lo_zero` and `quarter`: the quarter kernels' eight
/// compiled variants per width.
macro_rules! by_quarter {
    ($positions:ident::<$w:ident>($lo_zero:expr, $quarter:expr, $($arg:expr),*)) => {
        match ($lo_zero, $quarter) {
            (true, 0) => $positions::<$w, true, 0>($($arg),*),
            (true, 1) => $positions::<$w, true, 1>($($arg),*),
            (true, 2) => $positions::<$w, true, 2>($($arg),*),
            (true, _) => $positions::<$w, true, 3>($($arg),*),
            (false, 0) => $positions::<$w, false, 0>($($arg),*),
            (false, 1) => $positions::<$w, false, 1>($($arg),*),
            (false, 2) => $positions::<$w, false, 2>($($arg),*),
            (false, _) => $positions::<$w, false, 3>($($arg),*),
        }
    };
}

/// Calls `$step::<W, LO_ZERO, P>(args)` for the 16 positions `P` of quarter `Q` (a constant), each unrolled as in
/// [`for_each_position`].
macro_rules! for_each_quarter_position {
    ($q:ident, $step:ident::<$w:ident, $z:tt>($($arg:expr),*)) => {
        match $q {
            0 => { for_each_position!(@ $step $w $z ($($arg),*) 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15); }
            1 => { for_each_position!(@ $step $w $z ($($arg),*) 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31); }
            2 => { for_each_position!(@ $step $w $z ($($arg),*) 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47); }
            _ => { for_each_position!(@ $step $w $z ($($arg),*) 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63); }
        }
    };
}

/// Defines, inside a SIMD kernel module, `quarter_kernel::<W>` (one quarter of the module's `kernel`: its 16
/// positions, each through the module's `step`) and its `QUARTER_TABLE`, compiled with `$features`; `$set1`
/// broadcasts a word to the module's vector type.
macro_rules! quarter_kernels {
    ($features:literal, $set1:ident) => {
        /// One quarter of [`kernel`]: its 16 positions.
        #[target_feature(enable = $features)]
        pub(super) fn quarter_kernel<const W: usize>(
            words: &[u32],
            quarter: usize,
            lo: u32,
            span: u32,
            out: &mut BlockMask,
        ) {
            dispatch_top_aligned_quarter::<W>(words, quarter, lo, span, out, |lanes, range, lo_zero, selected| {
                by_quarter!(quarter_positions::<W>(lo_zero, quarter, lanes, range, selected))
            });
        }

        #[target_feature(enable = $features)]
        #[inline(never)]
        fn quarter_positions<const W: usize, const LO_ZERO: bool, const Q: usize>(
            lanes: &[[u32; LANES]],
            range: TopAligned,
            selected: &mut [u16; POSITIONS],
        ) {
            assert!(lanes.len() == 2 * W);
            let lo_vector = $set1(range.lo as i32);
            let bound_vector = $set1(range.bound as i32);
            for_each_quarter_position!(Q, step::<W, LO_ZERO>(lanes, lo_vector, bound_vector, selected));
        }

        pub(super) const QUARTER_TABLE: [QuarterKernel; 33] = width_table!(quarter_kernel);
    };
}

/// Defines, inside a SIMD kernel module, `kernel::<W>` (a block's 64 positions, each through the module's `step`)
/// and its `TABLE`, and the quarter kernels ([`quarter_kernels`]), compiled with `$features`; `$set1` broadcasts a
/// word to the module's vector type.
macro_rules! block_kernels {
    ($features:literal, $set1:ident) => {
        #[target_feature(enable = $features)]
        pub(super) fn kernel<const W: usize>(words: &[u32], lo: u32, span: u32, out: &mut BlockMask) {
            dispatch_top_aligned::<W>(words, lo, span, out, |lanes, range, lo_zero, selected| {
                if lo_zero {
                    positions::<W, true>(lanes, range, selected)
                } else {
                    positions::<W, false>(lanes, range, selected)
                }
            });
        }

        /// The 64 positions of a block. Kept out of line per `LO_ZERO`: inlined into one function, the two
        /// variants' shared decoding was hoisted above the branch and spilled to the stack.
        #[target_feature(enable = $features)]
        #[inline(never)]
        fn positions<const W: usize, const LO_ZERO: bool>(
            lanes: &[[u32; LANES]],
            range: TopAligned,
            selected: &mut [u16; POSITIONS],
        ) {
            // The length asserted once, so that no index of the unrolled steps is checked again.
            assert!(lanes.len() == 2 * W);
            let lo_vector = $set1(range.lo as i32);
            let bound_vector = $set1(range.bound as i32);
            for_each_position!(step::<W, LO_ZERO>(lanes, lo_vector, bound_vector, selected));
        }

        pub(super) const TABLE: [RangeKernel; 33] = width_table!(kernel);

        quarter_kernels!($features, $set1);
    };
}

/// Defines, inside a module, the hand-written AVX-512 kernels compiled with `$features`: per position one left
/// shift (or, where codes straddle words, two shifts and an OR, or one funnel shift `vpshldd` where the features
/// include AVX512_VBMI2), a subtract unless `lo` is 0, and one unsigned compare into a 16-bit mask register,
/// stored as is.
macro_rules! avx512_kernels {
    ($features:literal) => {
        use super::*;
        use std::arch::x86_64::*;

        block_kernels!($features, _mm512_set1_epi32);

        #[inline(always)]
        fn load(lanes: &[[u32; LANES]], word: usize) -> __m512i {
            // SAFETY: `lanes[word]` is a `[u32; 16]`: 64 readable bytes; the load is unaligned.
            unsafe { _mm512_loadu_si512(lanes[word].as_ptr().cast()) }
        }

        #[target_feature(enable = $features)]
        #[inline]
        fn step<const W: usize, const LO_ZERO: bool, const P: usize>(
            lanes: &[[u32; LANES]],
            lo_vector: __m512i,
            bound_vector: __m512i,
            selected: &mut [u16; POSITIONS],
        ) {
            let bit = P * W;
            let (word, shift) = (bit / 32, bit % 32);
            let top = if shift + W <= 32 {
                _mm512_sll_epi32(load(lanes, word), _mm_cvtsi32_si128((32 - W - shift) as i32))
            } else {
                let left = (64 - W - shift) as i32; // 1..=31: the code's high part comes from the next word
                _mm512_or_si512(
                    _mm512_sll_epi32(load(lanes, word + 1), _mm_cvtsi32_si128(left)),
                    _mm512_srl_epi32(load(lanes, word), _mm_cvtsi32_si128(32 - left)),
                )
            };
            let offset = if LO_ZERO { top } else { _mm512_sub_epi32(top, lo_vector) };
            selected[P] = _mm512_cmple_epu32_mask(offset, bound_vector);
        }
    };
}

/// The AVX-512 kernels for CPUs without AVX512_VBMI2 (Skylake-SP, Cascade Lake).
#[cfg(all(target_arch = "x86_64", target_endian = "little"))]
mod avx512 {
    avx512_kernels!("avx512f,avx512bw,avx512vl,bmi2");
}

/// The AVX-512 kernels compiled for CPUs with AVX512_VBMI2 (Ice Lake and later, Zen 4 and later): the compiler
/// turns each straddling code's two shifts and OR into one funnel shift (`vpshldd`), a third fewer vector
/// operations per 16 codes of 26 bits; 26-bit codes decode ~14% faster from cache (19.8 -> 22.6 G codes/s on one
/// core of an Intel Xeon guest, `cargo bench -p numadb-storage --bench kernels`).
#[cfg(all(target_arch = "x86_64", target_endian = "little"))]
mod avx512_vbmi2 {
    avx512_kernels!("avx512f,avx512bw,avx512vl,bmi2,avx512vbmi2");
}

/// Hand-written AVX2 kernel: the 16 lanes as two 256-bit halves; unsigned `<=` as `min(x, bound) == x`.
#[cfg(all(target_arch = "x86_64", target_endian = "little"))]
mod avx2 {
    use super::*;
    use std::arch::x86_64::*;

    block_kernels!("avx2,bmi2", _mm256_set1_epi32);

    #[inline(always)]
    fn load(lanes: &[[u32; LANES]], word: usize, half: usize) -> __m256i {
        // SAFETY: `lanes[word]` is a `[u32; 16]`; halves 0 and 1 are its two 32-byte halves.
        unsafe { _mm256_loadu_si256(lanes[word][half * 8..].as_ptr().cast()) }
    }

    #[target_feature(enable = "avx2,bmi2")]
    #[inline]
    fn step<const W: usize, const LO_ZERO: bool, const P: usize>(
        lanes: &[[u32; LANES]],
        lo_vector: __m256i,
        bound_vector: __m256i,
        selected: &mut [u16; POSITIONS],
    ) {
        let bit = P * W;
        let (word, shift) = (bit / 32, bit % 32);
        let mut bits: u32 = 0;
        for half in 0..2 {
            let top = if shift + W <= 32 {
                _mm256_sll_epi32(load(lanes, word, half), _mm_cvtsi32_si128((32 - W - shift) as i32))
            } else {
                let left = (64 - W - shift) as i32;
                _mm256_or_si256(
                    _mm256_sll_epi32(load(lanes, word + 1, half), _mm_cvtsi32_si128(left)),
                    _mm256_srl_epi32(load(lanes, word, half), _mm_cvtsi32_si128(32 - left)),
                )
            };
            let offset = if LO_ZERO { top } else { _mm256_sub_epi32(top, lo_vector) };
            let within = _mm256_cmpeq_epi32(_mm256_min_epu32(offset, bound_vector), offset);
            bits |= (_mm256_movemask_ps(_mm256_castsi256_ps(within)) as u32) << (half * 8);
        }
        selected[P] = bits as u16;
    }
}

/// An instruction set the scan kernels are compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Isa {
    /// The target's baseline (SSE2 on x86-64).
    Baseline,
    /// AVX2.
    Avx2,
    /// AVX-512 (F, BW, VL, DQ: DQ converts 64-bit integers to doubles in the executor's loops).
    Avx512,
    /// AVX-512 as [`Isa::Avx512`], with AVX512_VBMI2's funnel shifts (`vpshldd`, `vpshrdd`).
    Avx512Vbmi2,
}

impl Isa {
    /// Every variant, whether this CPU runs it or not.
    pub const ALL: [Isa; 4] = [Isa::Baseline, Isa::Avx2, Isa::Avx512, Isa::Avx512Vbmi2];

    /// Whether this CPU can run the variant.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Baseline => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("bmi2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("bmi2")
            }
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vbmi2 => Isa::Avx512.is_available() && std::arch::is_x86_feature_detected!("avx512vbmi2"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The best variant this CPU runs.
    pub fn best() -> Isa {
        static BEST: OnceLock<Isa> = OnceLock::new();
        *BEST.get_or_init(|| {
            [Isa::Avx512Vbmi2, Isa::Avx512, Isa::Avx2]
                .into_iter()
                .find(|isa| isa.is_available())
                .unwrap_or(Isa::Baseline)
        })
    }

    /// Its name, for reports.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Baseline => "baseline",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Avx512Vbmi2 => "avx512vbmi2",
        }
    }

    fn table(self) -> &'static [RangeKernel; 33] {
        match self {
            #[cfg(all(target_arch = "x86_64", target_endian = "little"))]
            Isa::Avx512 => &avx512::TABLE,
            #[cfg(all(target_arch = "x86_64", target_endian = "little"))]
            Isa::Avx512Vbmi2 => &avx512_vbmi2::TABLE,
            #[cfg(all(target_arch = "x86_64", target_endian = "little"))]
            Isa::Avx2 => &avx2::TABLE,
            _ => &baseline::TABLE,
        }
    }
}

/// Sets `out` to the rows of a packed block whose code lies in `[lo, lo + span]`, with the best kernel this CPU
/// runs. The kernels ask for nothing to be loaded: a scan loop prefetches the blocks it will read ([`prefetch`]).
#[inline]
pub fn range_mask(words: &[u32], width: u32, lo: u32, span: u32, out: &mut BlockMask) {
    // The kernel table is looked up once per process, not once per block: at ~50 ns per cache-resident block,
    // re-checking CPU features on every call cost several percent.
    static BEST: OnceLock<&'static [RangeKernel; 33]> = OnceLock::new();
    let table = BEST.get_or_init(|| Isa::best().table());
    assert!(width <= MAX_WIDTH);
    assert!(words.len() >= words_for_width(width), "block of width {width} needs {} words", words_for_width(width));
    // SAFETY: the table is that of `Isa::best()`, which this CPU runs; the word slice is long enough for the
    // width (asserted), which is all the kernel indexes.
    unsafe { table[width as usize](words, lo, span, out) }
}

/// As [`range_mask`] with a chosen kernel variant (which must be available: checked).
pub fn range_mask_with(isa: Isa, words: &[u32], width: u32, lo: u32, span: u32, out: &mut BlockMask) {
    assert!(width <= MAX_WIDTH);
    assert!(words.len() >= words_for_width(width), "block of width {width} needs {} words", words_for_width(width));
    let isa = if isa.is_available() { isa } else { Isa::Baseline };
    let kernel = isa.table()[width as usize];
    // SAFETY: `isa` is available on this CPU (checked just above), so the kernel's target features are present;
    // the word slice is long enough for the width (asserted), which is all the kernel indexes.
    unsafe { kernel(words, lo, span, out) }
}

/// Rows of a quarter block: the unit of a block's finer zone map ([`quarter_words`]).
pub const QUARTER_ROWS: usize = BLOCK_ROWS / QUARTERS;
/// Quarters per block.
pub const QUARTERS: usize = 4;
/// A set of quarters (bit `q` is quarter `q`) holding every quarter of a block.
pub const ALL_QUARTERS: u8 = (1 << QUARTERS) - 1;

/// The words of a packed block of `width`-bit codes that hold quarter `quarter`'s codes (rows `256q..256q+256`,
/// positions `16q..16q+16` of every lane): whole 64-byte lines, from the line where the quarter's first code
/// starts to the one where its last code ends. With an even width a quarter is exactly `width / 2` lines; with
/// an odd one, neighbouring quarters share the line a code straddles.
pub fn quarter_words(width: u32, quarter: usize) -> std::ops::Range<usize> {
    let width = width as usize;
    let positions = POSITIONS / QUARTERS;
    let first_bit = quarter * positions * width;
    let end_bit = (quarter + 1) * positions * width;
    (first_bit / 32) * LANES..end_bit.div_ceil(32) * LANES
}

/// The words of the quarters in `quarters` (a set, [`ALL_QUARTERS`] for all), as maximal runs of consecutive
/// words in order: what a scan loads when it reads only those quarters of a block.
pub fn quarter_runs(width: u32, quarters: u8) -> impl Iterator<Item = std::ops::Range<usize>> {
    let mut chosen = (0..QUARTERS)
        .filter(move |&quarter| quarters >> quarter & 1 == 1)
        .map(move |quarter| quarter_words(width, quarter))
        .filter(|words| !words.is_empty())
        .peekable();
    std::iter::from_fn(move || {
        let mut run = chosen.next()?;
        // Quarters of narrow codes can share a line even when the quarter between them is not chosen.
        while let Some(next) = chosen.next_if(|next| next.start <= run.end) {
            run.end = next.end;
        }
        Some(run)
    })
}

type QuarterKernel = unsafe fn(&[u32], usize, u32, u32, &mut BlockMask);

/// Quarter kernels: one quarter's 16 positions, hand-written per instruction set as the block kernels are, and
/// [`range_mask_positions`] for the baseline.
mod quarters {
    use super::*;

    pub(super) fn baseline<const W: usize>(words: &[u32], quarter: usize, lo: u32, span: u32, out: &mut BlockMask) {
        let per = POSITIONS / QUARTERS;
        range_mask_positions::<W>(words, quarter * per..quarter * per + per, lo, span, out)
    }

    pub(super) const BASELINE: [QuarterKernel; 33] = width_table!(baseline);

    pub(super) fn table(isa: Isa) -> &'static [QuarterKernel; 33] {
        match isa {
            #[cfg(all(target_arch = "x86_64", target_endian = "little"))]
            Isa::Avx512 => &avx512::QUARTER_TABLE,
            #[cfg(all(target_arch = "x86_64", target_endian = "little"))]
            Isa::Avx512Vbmi2 => &avx512_vbmi2::QUARTER_TABLE,
            #[cfg(all(target_arch = "x86_64", target_endian = "little"))]
            Isa::Avx2 => &avx2::QUARTER_TABLE,
            _ => &BASELINE,
        }
    }
}

/// As [`range_mask`] for the quarters in `quarters` alone: the rows of the other quarters are left unselected and
/// their words unread.
#[inline]
pub fn range_mask_quarters(words: &[u32], width: u32, lo: u32, span: u32, quarters: u8, out: &mut BlockMask) {
    static BEST: OnceLock<&'static [QuarterKernel; 33]> = OnceLock::new();
    let table = BEST.get_or_init(|| quarters::table(Isa::best()));
    range_mask_quarters_on(table, words, width, lo, span, quarters, out);
}

/// As [`range_mask_quarters`] with a chosen kernel variant (which must be available: checked).
pub fn range_mask_quarters_with(
    isa: Isa,
    words: &[u32],
    width: u32,
    lo: u32,
    span: u32,
    quarters: u8,
    out: &mut BlockMask,
) {
    let isa = if isa.is_available() { isa } else { Isa::Baseline };
    range_mask_quarters_on(quarters::table(isa), words, width, lo, span, quarters, out);
}

#[inline]
fn range_mask_quarters_on(
    table: &[QuarterKernel; 33],
    words: &[u32],
    width: u32,
    lo: u32,
    span: u32,
    quarters: u8,
    out: &mut BlockMask,
) {
    assert!(width <= MAX_WIDTH);
    assert!(words.len() >= words_for_width(width), "block of width {width} needs {} words", words_for_width(width));
    *out = [0; MASK_WORDS];
    for quarter in 0..QUARTERS {
        if quarters >> quarter & 1 == 1 {
            // SAFETY: the table is that of an instruction set this CPU runs (the best, or one checked
            // available); the word slice is long enough for the width (asserted), which is all it indexes.
            unsafe { table[width as usize](words, quarter, lo, span, out) }
        }
    }
}

/// 32-bit code words in a 64-byte cache line: the unit the prefetch helpers ask for.
pub const WORDS_PER_LINE: usize = 16;

/// Asks the CPU to start loading `words` into its L1 cache, one `prefetcht0` per 64-byte line, in one burst; never
/// faults. A scan loop calls it for a block it will read one or two blocks later, right after reading a block.
///
/// A burst, not paced: until stop 54 each line's address went through [`std::hint::black_box`] (a store and a
/// reload), so that the requests went out a few cycles apart. That was measured on an AMD EPYC guest (thesis
/// aggregation, 50 million rows, 2 threads, one process alternating variants query by query), where the burst
/// took 25.2 ms per full scan and the paced loop 21.0 (this `chunks` loop 21.6). On the Intel Xeon guest of
/// stops 49-54 the pacing cost more than it gave: with every line's prefetch waiting for a free miss buffer in
/// turn, a profile of the full scan put 87% of the scan loop's own samples on the store after the `prefetcht0`,
/// and the paced chain held up the decoding behind it. There (same method, 12 queries per variant, two rounds,
/// a process per variant, with the AVX512_VBMI2 kernels) full scans of `TBL_0` took 31.8-32.3 ms with this loop
/// against 35.4-36.0 paced, 37.5 with every other line asked for and 38.5 with none; the engine benchmark's full
/// scans went from 80-82% of the reference read bandwidth to 87-90%. Scans at range_pred 100 000 and 10 000
/// (quarters, with [`prefetch_to_l2`] further ahead) did as well as paced or better.
///
/// The kernels themselves ask for nothing. Measured on the kernel alone, on the AMD guest, the same 26-bit codes
/// read by 2 threads against the prober's read kernel over the same bytes (thousands of rounds, sorted by
/// whether the memory was in its slow ~50 GB/s or its fast ~88 GB/s phase):
/// - every line into L1, 1 to 3 blocks ahead: 86-96% of the read kernel's rate when slow, 72-89% when fast; 4 or
///   6 blocks ahead: worse;
/// - spread over the decoding of the block before, one line per line decoded (the kernels' way until stop 28):
///   78% when slow;
/// - `prefetcht1` or `prefetcht2` instead of `prefetcht0`: 5-10 points worse when slow, 13-20 when fast; both
///   (t0 one or two blocks ahead, t1/t2 further): 5-15 points worse; `prefetchnta`: about the same;
/// - only every 2nd, 4th or 64th line (the rest left to the hardware prefetchers): 13-50 points worse;
/// - two to four blocks at a time: 13-19 points worse;
/// - none: 61-78% when fast (the read kernel itself, whose loads run far ahead, gets 98% without prefetches and
///   85% with them: what holds the scans back when the memory is fast is how many lines a core can have in
///   flight).
#[inline]
pub fn prefetch(words: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    for line in words.chunks(WORDS_PER_LINE) {
        // SAFETY: a prefetch is a hint: it reads nothing architecturally and cannot fault; the address is that of
        // a line of `words` anyway.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.as_ptr().cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = words;
}

/// As [`prefetch`], into the L2 cache only (`prefetcht1`), paced (each line's address through
/// [`std::hint::black_box`], so the requests go out a few cycles apart): for blocks further ahead than those
/// asked for into L1, which a sparse scan loop keeps to have more lines in flight than the L1's miss buffers
/// hold (the first lines of each run only: `FAR_ASK_LINES` in `column.rs`), and for settled blocks loaded amid
/// a stream of reads. In one burst, as [`prefetch`] is, scans at range_pred 10 000 took 8.3-8.4 ms against
/// 6.8-6.9 paced (Intel Xeon guest, stop 54).
#[inline]
pub fn prefetch_to_l2(words: &[u32]) {
    #[cfg(target_arch = "x86_64")]
    prefetch_paced::<{ std::arch::x86_64::_MM_HINT_T1 }>(words);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = words;
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn prefetch_paced<const HINT: i32>(words: &[u32]) {
    let mut line = 0;
    while line < words.len() {
        // SAFETY: a prefetch is a hint: it reads nothing architecturally and cannot fault; the address is inside
        // `words` anyway (`line < words.len()`).
        unsafe { std::arch::x86_64::_mm_prefetch::<HINT>(words.as_ptr().wrapping_add(line).cast()) };
        line = std::hint::black_box(line) + WORDS_PER_LINE;
    }
}

/// Asks for the cache line holding `item` into L1: for loops that know which random address they will read a
/// few iterations ahead (a hash join's probes). A hint only: it changes no result.
#[inline]
pub fn prefetch_line<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE, which `prefetcht0` needs, is part of every x86-64 CPU; a prefetch is a hint: it reads nothing
    // architecturally and cannot fault, and the address is that of a live reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((item as *const T).cast())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}

/// Number of selected rows.
#[inline]
pub fn count(mask: &BlockMask) -> u32 {
    // The baseline x86-64 target has no POPCNT instruction, so `count_ones` there is a dozen SSE2 operations per
    // word; a scan counts two or three masks per block, which made counting cost as much as a selective scan's
    // kernel.
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("popcnt") {
        // SAFETY: the CPU has POPCNT (checked just above).
        return unsafe { count_popcnt(mask) };
    }
    mask.iter().map(|w| w.count_ones()).sum()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "popcnt")]
fn count_popcnt(mask: &BlockMask) -> u32 {
    mask.iter().map(|w| w.count_ones()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    fn random_codes(width: u32, seed: u64) -> [u32; BLOCK_ROWS] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mut codes = [0u32; BLOCK_ROWS];
        for code in codes.iter_mut() {
            *code = if width == 0 {
                0
            } else if width == 32 {
                rng.random()
            } else {
                rng.random_range(0..1u32 << width)
            };
        }
        codes
    }

    #[test]
    fn pack_get_unpack_round_trip_for_every_width() {
        for width in 0..=MAX_WIDTH {
            let codes = random_codes(width, u64::from(width));
            let mut words = vec![0u32; words_for_width(width)];
            pack(&codes, width, &mut words);
            let mut back = [0u32; BLOCK_ROWS];
            unpack(&words, width, &mut back);
            assert_eq!(back, codes, "width {width}");
        }
    }

    #[test]
    fn widths_are_minimal() {
        assert_eq!(width_for(0), 0);
        assert_eq!(width_for(1), 1);
        assert_eq!(width_for(1023), 10);
        assert_eq!(width_for(1024), 11);
        assert_eq!(width_for(49_999_999), 26);
        assert_eq!(width_for(u32::MAX), 32);
    }

    fn reference(codes: &[u32; BLOCK_ROWS], lo: u32, span: u32) -> BlockMask {
        let mut mask = [0u64; MASK_WORDS];
        for (row, &code) in codes.iter().enumerate() {
            if code.wrapping_sub(lo) <= span {
                mask[row / 64] |= 1 << (row % 64);
            }
        }
        mask
    }

    #[test]
    fn every_kernel_variant_agrees_with_the_definition() {
        let isas: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.is_available()).collect();
        for width in 0..=MAX_WIDTH {
            let codes = random_codes(width, 1000 + u64::from(width));
            let mut words = vec![0u32; words_for_width(width)];
            pack(&codes, width, &mut words);
            let max = if width == 32 { u32::MAX } else { (1u32 << width).wrapping_sub(1) };
            let mut probes = vec![
                (0, 0),
                (0, max / 2),
                (max / 3, max / 4),
                (max, 0),
                (max, 1),
                (max.wrapping_add(1), 5),
                (1, u32::MAX),
                (max / 2, u32::MAX - 5),
                (u32::MAX, 0),
                (u32::MAX, 1),
                (u32::MAX - 2, max / 2 + 3),
                (max / 2, u32::MAX - max / 2),
                (max / 2, (u32::MAX - max / 2).wrapping_add(1)),
            ];
            let mut rng = rand::rngs::StdRng::seed_from_u64(7 + u64::from(width));
            probes.extend((0..20).map(|_| (rng.random_range(0..=max), rng.random_range(0..=max))));
            probes.extend((0..10).map(|_| (rng.random::<u32>(), rng.random::<u32>())));
            for (lo, span) in probes {
                let expected = reference(&codes, lo, span);
                for &isa in &isas {
                    let mut mask = [0u64; MASK_WORDS];
                    range_mask_with(isa, &words, width, lo, span, &mut mask);
                    assert_eq!(mask, expected, "width {width}, lo {lo}, span {span}, {isa:?}");
                }
            }
        }
    }

    #[test]
    fn code_ranges_are_the_selected_codes_modulo_the_width() {
        for width in [1u32, 2, 3, 7, 26, 32] {
            let max = u64::from(u32::MAX >> (32 - width));
            let mut rng = rand::rngs::StdRng::seed_from_u64(u64::from(width));
            for _ in 0..2000 {
                let lo = if rng.random() { rng.random::<u32>() } else { rng.random_range(0..=max as u32) };
                let span = match rng.random_range(0..3) {
                    0 => rng.random::<u32>(),
                    1 => rng.random_range(0..=max as u32),
                    // Past 2^32: the range wraps and continues at code 0.
                    _ => (u32::MAX - lo).wrapping_add(1).wrapping_add(rng.random_range(0..=max as u32)),
                };
                let codes: Vec<u64> = if max < 64 {
                    (0..=max).collect()
                } else {
                    let mut some: Vec<u64> = (0..64).map(|_| rng.random_range(0..=max)).collect();
                    some.extend([0, max, u64::from(lo).min(max), (u64::from(lo) + u64::from(span)).min(max)]);
                    some
                };
                let range = CodeRange::for_width(width, lo, span);
                for code in codes {
                    let expected = (code as u32).wrapping_sub(lo) <= span;
                    let got = range.is_some_and(|r| (code.wrapping_sub(u64::from(r.lo)) & max) <= u64::from(r.span));
                    assert_eq!(got, expected, "width {width}, lo {lo}, span {span}, code {code}, {range:?}");
                }
            }
        }
    }

    #[test]
    fn quarter_kernels_select_their_quarters_rows_reading_only_their_runs() {
        let isas: Vec<Isa> = Isa::ALL.into_iter().filter(|i| i.is_available()).collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for width in 0..=MAX_WIDTH {
            let codes = random_codes(width, 100 + u64::from(width));
            let mut words = vec![0u32; words_for_width(width)];
            pack(&codes, width, &mut words);
            let max = if width == 0 { 0 } else { u32::MAX >> (32 - width) };
            for quarters in 0..=ALL_QUARTERS {
                // Words outside the quarters' runs hold garbage: a kernel that read them would select wrongly.
                let mut poisoned: Vec<u32> = (0..words.len()).map(|_| rng.random()).collect();
                let runs: Vec<_> = quarter_runs(width, quarters).collect();
                for run in &runs {
                    assert!(run.start % LANES == 0 && run.end % LANES == 0, "runs are whole lines");
                    poisoned[run.clone()].copy_from_slice(&words[run.clone()]);
                }
                for pair in runs.windows(2) {
                    assert!(pair[0].end < pair[1].start, "runs are maximal and ordered: {runs:?}");
                }
                for _ in 0..4 {
                    let lo = rng.random_range(0..=max);
                    let span = rng.random_range(0..=max - lo);
                    let mut expected = reference(&codes, lo, span);
                    for (row_word, word) in expected.iter_mut().enumerate() {
                        if quarters >> (row_word * 64 / QUARTER_ROWS) & 1 == 0 {
                            *word = 0;
                        }
                    }
                    for &isa in &isas {
                        let mut got = [u64::MAX; MASK_WORDS];
                        range_mask_quarters_with(isa, &poisoned, width, lo, span, quarters, &mut got);
                        assert_eq!(got, expected, "{isa:?} width {width} quarters {quarters:04b} [{lo}, +{span}]");
                    }
                }
            }
        }
        assert_eq!(quarter_words(26, 1), 13 * LANES..26 * LANES, "an even width's quarter is width / 2 lines");
        assert_eq!(quarter_words(13, 1), 6 * LANES..13 * LANES, "odd widths share a line between quarters");
        assert_eq!(quarter_runs(26, 0b1011).collect::<Vec<_>>(), [0..26 * LANES, 39 * LANES..52 * LANES]);
    }

    #[test]
    fn counting_selected_rows() {
        let mut mask = [0u64; MASK_WORDS];
        assert_eq!(count(&mask), 0);
        mask[3] = 0b1011;
        mask[15] = 1 << 63;
        assert_eq!(count(&mask), 4);
    }
}
