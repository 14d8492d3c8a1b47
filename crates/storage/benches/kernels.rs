//! Scan-kernel throughput per instruction set, single-threaded: on data far larger than the caches (what a scan
//! sees) and on a cache-resident block set (the kernel's compute limit).
//! `cargo bench -p numadb-storage --bench kernels`. Prints values/s and GB/s of packed data for each width,
//! and the ratio of each kernel to the baseline kernel measured in the same run.

use std::time::Instant;

use numadb_storage::bitpack::{
    BLOCK_ROWS, BlockMask, Isa, MASK_WORDS, count, pack, prefetch, range_mask, range_mask_with, words_for_width,
};

const ROWS: usize = 50_000_000;

fn main() {
    cache_resident();
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
        for isa in Isa::ALL {
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
                let blocks: Vec<&[u32]> = words.chunks_exact(size).collect();
                for (index, block) in blocks.iter().enumerate() {
                    if let Some(next) = blocks.get(index + 1) {
                        prefetch(next);
                    }
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

/// The same kernels on 64 blocks that stay in the L2 cache: what they cost when memory is not the limit.
fn cache_resident() {
    const BLOCKS: usize = 64;
    const REPETITIONS: usize = 2000;
    println!("cache-resident ({BLOCKS} blocks scanned {REPETITIONS} times), one thread");
    for width in [10u32, 26] {
        let size = words_for_width(width);
        let mut words = vec![0u32; BLOCKS * size];
        let mut codes = [0u32; BLOCK_ROWS];
        let mut state = 12345u64;
        for block in 0..BLOCKS {
            for code in codes.iter_mut() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                *code = (state as u32) & ((1 << width) - 1);
            }
            pack(&codes, width, &mut words[block * size..(block + 1) * size]);
        }
        for isa in Isa::ALL.into_iter().filter(|i| i.is_available()) {
            let started = Instant::now();
            let mut total = 0u64;
            let mut mask: BlockMask = [0; MASK_WORDS];
            for _ in 0..REPETITIONS {
                for block in words.chunks_exact(size) {
                    range_mask_with(isa, block, width, 0, 1000, &mut mask);
                    total += u64::from(count(&mask));
                }
            }
            let seconds = started.elapsed().as_secs_f64();
            println!(
                "  width {width:2} {:<8} {:7.1} M values/s ({total} selected)",
                isa.name(),
                (REPETITIONS * BLOCKS * BLOCK_ROWS) as f64 / seconds / 1e6
            );
        }
        // What the engine calls: the best kernel, looked up once.
        let started = Instant::now();
        let mut total = 0u64;
        let mut mask: BlockMask = [0; MASK_WORDS];
        for _ in 0..REPETITIONS {
            for block in words.chunks_exact(size) {
                range_mask(block, width, 0, 1000, &mut mask);
                total += u64::from(count(&mask));
            }
        }
        println!(
            "  width {width:2} {:<8} {:7.1} M values/s ({total} selected; range_mask, as the engine calls it)",
            Isa::best().name(),
            (REPETITIONS * BLOCKS * BLOCK_ROWS) as f64 / started.elapsed().as_secs_f64() / 1e6
        );
    }
}
