//! Scan-kernel throughput per instruction set, single-threaded, on data far larger than the caches.
//! `cargo bench -p numadb-storage --bench kernels`. Prints values/s and GB/s of packed data for each width,
//! and the ratio of each kernel to the baseline kernel measured in the same run.

use std::time::Instant;

use numadb_storage::bitpack::{BLOCK_ROWS, BlockMask, Isa, MASK_WORDS, count, pack, range_mask_with, words_for_width};

const ROWS: usize = 50_000_000;

fn main() {
    let blocks = ROWS / BLOCK_ROWS;
    println!("bit-packed range scan, {} rows ({} blocks), one thread, best of 5", blocks * BLOCK_ROWS, blocks);
    for width in [10u32, 16, 26, 32] {
        let mut state = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(width);
        let mut words = vec![0u32; blocks * words_for_width(width)];
        let mut codes = [0u32; BLOCK_ROWS];
        for block in 0..blocks {
            for code in codes.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *code = if width == 32 { state as u32 } else { (state as u32) & ((1 << width) - 1) };
            }
            let size = words_for_width(width);
            pack(&codes, width, &mut words[block * size..(block + 1) * size]);
        }
        let bytes = (words.len() * 4) as f64;
        let threshold = 1u32 << (width - 6).min(31); // about 1/64 selected
        let mut baseline_seconds = 0.0;
        for isa in [Isa::Baseline, Isa::Avx2, Isa::Avx512] {
            if !isa.is_available() {
                continue;
            }
            let mut best = f64::MAX;
            let mut selected = 0u64;
            for _ in 0..5 {
                let started = Instant::now();
                let mut total = 0u64;
                let mut mask: BlockMask = [0; MASK_WORDS];
                let size = words_for_width(width);
                for block in words.chunks_exact(size) {
                    range_mask_with(isa, block, width, 0, threshold - 1, &mut mask);
                    total += u64::from(count(&mask));
                }
                best = best.min(started.elapsed().as_secs_f64());
                selected = total;
            }
            if isa == Isa::Baseline {
                baseline_seconds = best;
            }
            println!(
                "  width {width:2} {:<8} {:7.1} M values/s  {:6.2} GB/s packed  ({:.2}x baseline; {selected} selected)",
                isa.name(),
                ROWS as f64 / best / 1e6,
                bytes / best / 1e9,
                baseline_seconds / best
            );
        }
    }
}
