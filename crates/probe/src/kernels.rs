//! Streaming kernels for the bandwidth matrix, with run-time dispatch between AVX-512, AVX2 and portable code.
//!
//! # Design
//! Four traffic kinds, after MLC's and STREAM's: **read** (sum every 64-bit word: the loads cannot be elided, and
//! the sum is a result the variants must agree on), **copy** (1:1 read/write), **add** (`a = b + c`, 2:1 — the
//! traffic of STREAM's triad; integers rather than `b + s·c` in floating point, because an FMA and a separate
//! multiply and add round differently and the variants must produce identical results) and **write** (fill with
//! non-temporal stores, which skip the read-for-ownership a normal store pays). Bytes are counted as STREAM and
//! MLC count them: what the kernel reads plus what it writes; the read-for-ownership of copy's and add's ordinary
//! stores is real traffic that is not counted.
//!
//! The read kernel keeps four independent vector accumulators and issues eight full-width loads per iteration.
//! likwid-bench's `load_avx512` (`likwid-bench -l load_avx512`: a 32-double loop stride, 7 instructions) issues
//! four 64-byte loads per iteration and does no arithmetic; ours must add, to produce a checkable result, and with
//! independent accumulators the adds never set the pace (a single accumulator would serialise them). On the
//! development VM the prober's read bandwidth was 1.05–1.13× likwid-bench's best load kernel with one thread and
//! 1.09× with two in the quietest same-run comparisons (`numadb probe peers`). Loads are unaligned-tolerant (`loadu`), which costs nothing on aligned data (the buffers
//! are page aligned) and lets the tests use any slice. Non-temporal stores need alignment, so the write kernel
//! writes a scalar head up to the first aligned address.
//!
//! The dispatch is explicit ([`Isa`]) rather than hidden, so that a report says which code ran and the tests can
//! run every variant the machine has against the portable one.

use serde::{Deserialize, Serialize};

/// Which instruction set a kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Isa {
    /// Portable Rust (the compiler may still use the baseline SIMD of the target, SSE2 on x86-64).
    Scalar,
    /// 256-bit AVX2.
    Avx2,
    /// 512-bit AVX-512 (foundation).
    Avx512,
}

impl Isa {
    /// Every variant, slowest first.
    pub const ALL: [Isa; 3] = [Isa::Scalar, Isa::Avx2, Isa::Avx512];

    /// The widest instruction set this CPU runs.
    pub fn best() -> Isa {
        Self::available().into_iter().max().unwrap_or(Isa::Scalar)
    }

    /// The instruction sets this CPU runs.
    pub fn available() -> Vec<Isa> {
        Self::ALL.into_iter().filter(|isa| isa.is_available()).collect()
    }

    /// Whether this CPU runs `self`.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// `scalar`, `avx2`, `avx512`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
        }
    }

    /// This ISA if the CPU has it, else the best one it has below it.
    pub fn or_best_available(self) -> Isa {
        Isa::available().into_iter().filter(|&isa| isa <= self).max().unwrap_or(Isa::Scalar)
    }
}

impl std::str::FromStr for Isa {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Isa::ALL
            .into_iter()
            .find(|isa| isa.name() == text)
            .ok_or_else(|| format!("unknown instruction set {text:?} (expected scalar, avx2 or avx512)"))
    }
}

/// What a bandwidth kernel does to memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Traffic {
    /// Read only.
    Read,
    /// 1:1 read/write: `a = b`.
    Copy,
    /// 2:1 read/write: `a = b + c` (the traffic of STREAM's triad).
    Add,
    /// Write only, non-temporal stores where the CPU has them.
    Write,
}

impl Traffic {
    /// Every kind.
    pub const ALL: [Traffic; 4] = [Traffic::Read, Traffic::Copy, Traffic::Add, Traffic::Write];

    /// `read`, `copy`, `add`, `write`.
    pub fn name(self) -> &'static str {
        match self {
            Traffic::Read => "read",
            Traffic::Copy => "copy",
            Traffic::Add => "add",
            Traffic::Write => "write",
        }
    }

    /// A description for tables: `1:1 read/write (copy)`.
    pub fn describe(self) -> &'static str {
        match self {
            Traffic::Read => "read-only (sum)",
            Traffic::Copy => "1:1 read/write (copy)",
            Traffic::Add => "2:1 read/write (a = b + c)",
            Traffic::Write => "write-only (non-temporal stores)",
        }
    }

    /// Arrays the kernel touches (one per stream).
    pub fn streams(self) -> usize {
        match self {
            Traffic::Read | Traffic::Write => 1,
            Traffic::Copy => 2,
            Traffic::Add => 3,
        }
    }
}

impl std::str::FromStr for Traffic {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        Traffic::ALL
            .into_iter()
            .find(|t| t.name() == text)
            .ok_or_else(|| format!("unknown traffic kind {text:?} (expected read, copy, add or write)"))
    }
}

/// The wrapping sum of `data`, read with `isa` (which must be available; see [`Isa::is_available`]).
///
/// # Panics
/// If the CPU does not have `isa`.
pub fn read_sum(isa: Isa, data: &[u64]) -> u64 {
    assert!(isa.is_available(), "this CPU has no {}", isa.name());
    match isa {
        Isa::Scalar => scalar::read_sum(data),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is available (asserted above).
        Isa::Avx2 => unsafe { x86::read_sum_avx2(data) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is available (asserted above).
        Isa::Avx512 => unsafe { x86::read_sum_avx512(data) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("only x86-64 has vector variants"),
    }
}

/// Asks the CPU to start loading `data` into its L1 cache, one hint per 64-byte line; never faults.
pub fn prefetch_l1(data: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    prefetch_lines::<{ std::arch::x86_64::_MM_HINT_T0 }>(data);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Asks the CPU to start loading `data` into its L2 cache, one hint per 64-byte line; never faults.
pub fn prefetch_l2(data: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    prefetch_lines::<{ std::arch::x86_64::_MM_HINT_T1 }>(data);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Asks the CPU to start loading `data` with the non-temporal hint (close to the core, marked for early
/// eviction), one hint per 64-byte line; never faults.
pub fn prefetch_nta(data: &[u64]) {
    #[cfg(target_arch = "x86_64")]
    prefetch_lines::<{ std::arch::x86_64::_MM_HINT_NTA }>(data);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

#[cfg(target_arch = "x86_64")]
fn prefetch_lines<const HINT: i32>(data: &[u64]) {
    for line in data.chunks(8) {
        // SAFETY: a prefetch is a hint: it reads nothing architecturally and cannot fault; the address lies inside
        // `data` anyway.
        unsafe { std::arch::x86_64::_mm_prefetch::<HINT>(line.as_ptr().cast()) };
    }
}

/// `destination = source`.
///
/// # Panics
/// If the lengths differ or the CPU does not have `isa`.
pub fn copy(isa: Isa, destination: &mut [u64], source: &[u64]) {
    assert_eq!(destination.len(), source.len(), "copy between slices of different lengths");
    assert!(isa.is_available(), "this CPU has no {}", isa.name());
    match isa {
        Isa::Scalar => destination.copy_from_slice(source),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is available and the lengths are equal (asserted above).
        Isa::Avx2 => unsafe { x86::copy_avx2(destination, source) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is available and the lengths are equal (asserted above).
        Isa::Avx512 => unsafe { x86::copy_avx512(destination, source) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("only x86-64 has vector variants"),
    }
}

/// `destination[i] = left[i] + right[i]` (wrapping).
///
/// # Panics
/// If the lengths differ or the CPU does not have `isa`.
pub fn add(isa: Isa, destination: &mut [u64], left: &[u64], right: &[u64]) {
    assert!(destination.len() == left.len() && left.len() == right.len(), "add over slices of different lengths");
    assert!(isa.is_available(), "this CPU has no {}", isa.name());
    match isa {
        Isa::Scalar => scalar::add(destination, left, right),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is available and the lengths are equal (asserted above).
        Isa::Avx2 => unsafe { x86::add_avx2(destination, left, right) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is available and the lengths are equal (asserted above).
        Isa::Avx512 => unsafe { x86::add_avx512(destination, left, right) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("only x86-64 has vector variants"),
    }
}

/// Fills `destination` with `value` using non-temporal stores where the CPU has them.
///
/// # Panics
/// If the CPU does not have `isa`.
pub fn write(isa: Isa, destination: &mut [u64], value: u64) {
    assert!(isa.is_available(), "this CPU has no {}", isa.name());
    match isa {
        Isa::Scalar => scalar::write(destination, value),
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX2 is available (asserted above).
        Isa::Avx2 => unsafe { x86::write_avx2(destination, value) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: AVX-512F is available (asserted above).
        Isa::Avx512 => unsafe { x86::write_avx512(destination, value) },
        #[cfg(not(target_arch = "x86_64"))]
        _ => unreachable!("only x86-64 has vector variants"),
    }
}

/// The portable kernels: the reference the vector variants are tested against.
mod scalar {
    /// Eight independent lanes, so the compiler can vectorise and the adds do not serialise.
    pub fn read_sum(data: &[u64]) -> u64 {
        let mut lanes = [0u64; 8];
        let chunks = data.chunks_exact(8);
        let tail = chunks.remainder();
        for chunk in chunks {
            for (lane, &value) in lanes.iter_mut().zip(chunk) {
                *lane = lane.wrapping_add(value);
            }
        }
        let mut sum = lanes.iter().fold(0u64, |sum, &lane| sum.wrapping_add(lane));
        for &value in tail {
            sum = sum.wrapping_add(value);
        }
        sum
    }

    pub fn add(destination: &mut [u64], left: &[u64], right: &[u64]) {
        for ((d, &l), &r) in destination.iter_mut().zip(left).zip(right) {
            *d = l.wrapping_add(r);
        }
    }

    pub fn write(destination: &mut [u64], value: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let pointer = destination.as_mut_ptr() as *mut i64;
            for i in 0..destination.len() {
                // SAFETY: `i` is within `destination`, which is exclusively borrowed; `movnti` (SSE2, part of the
                // x86-64 baseline) needs only 8-byte alignment, which a `u64` slice has.
                unsafe { std::arch::x86_64::_mm_stream_si64(pointer.add(i), value as i64) };
            }
            // SAFETY: `sfence` has no preconditions; it orders the non-temporal stores before later stores.
            unsafe { std::arch::x86_64::_mm_sfence() };
        }
        #[cfg(not(target_arch = "x86_64"))]
        destination.fill(value);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The AVX2 and AVX-512 kernels. Each function is `unsafe` only because it needs its target feature; the
    //! callers in the parent module check the CPU first.

    use std::arch::x86_64::*;

    /// Bytes per AVX-512 vector, in `u64`s.
    const LANES_512: usize = 8;
    /// Bytes per AVX2 vector, in `u64`s.
    const LANES_256: usize = 4;
    /// Vectors per iteration of the read kernels (likwid's `load_avx512` issues four; eight halves the loop
    /// overhead per byte, which matters only for cache-resident buffers).
    const READ_UNROLL: usize = 8;
    /// Vectors per iteration of the copy, add and write kernels.
    const STORE_UNROLL: usize = 4;

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn read_sum_avx512(data: &[u64]) -> u64 {
        let per_iteration = LANES_512 * READ_UNROLL;
        let iterations = data.len() / per_iteration;
        let base = data.as_ptr() as *const __m512i;
        let mut accumulators = [_mm512_setzero_si512(); 4];
        for i in 0..iterations {
            // SAFETY: vector `i * READ_UNROLL + k` for k < READ_UNROLL lies within `data`, since
            // `iterations * per_iteration <= data.len()`; `loadu` accepts any alignment.
            unsafe {
                let p = base.add(i * READ_UNROLL);
                let v0 = _mm512_loadu_si512(p);
                let v1 = _mm512_loadu_si512(p.add(1));
                let v2 = _mm512_loadu_si512(p.add(2));
                let v3 = _mm512_loadu_si512(p.add(3));
                let v4 = _mm512_loadu_si512(p.add(4));
                let v5 = _mm512_loadu_si512(p.add(5));
                let v6 = _mm512_loadu_si512(p.add(6));
                let v7 = _mm512_loadu_si512(p.add(7));
                accumulators[0] = _mm512_add_epi64(accumulators[0], _mm512_add_epi64(v0, v4));
                accumulators[1] = _mm512_add_epi64(accumulators[1], _mm512_add_epi64(v1, v5));
                accumulators[2] = _mm512_add_epi64(accumulators[2], _mm512_add_epi64(v2, v6));
                accumulators[3] = _mm512_add_epi64(accumulators[3], _mm512_add_epi64(v3, v7));
            }
        }
        let total = _mm512_add_epi64(
            _mm512_add_epi64(accumulators[0], accumulators[1]),
            _mm512_add_epi64(accumulators[2], accumulators[3]),
        );
        let mut sum = _mm512_reduce_add_epi64(total) as u64;
        for &value in &data[iterations * per_iteration..] {
            sum = sum.wrapping_add(value);
        }
        sum
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn read_sum_avx2(data: &[u64]) -> u64 {
        let per_iteration = LANES_256 * READ_UNROLL;
        let iterations = data.len() / per_iteration;
        let base = data.as_ptr() as *const __m256i;
        let mut accumulators = [_mm256_setzero_si256(); 4];
        for i in 0..iterations {
            // SAFETY: as in `read_sum_avx512`, every vector read lies within `data`.
            unsafe {
                let p = base.add(i * READ_UNROLL);
                let v0 = _mm256_loadu_si256(p);
                let v1 = _mm256_loadu_si256(p.add(1));
                let v2 = _mm256_loadu_si256(p.add(2));
                let v3 = _mm256_loadu_si256(p.add(3));
                let v4 = _mm256_loadu_si256(p.add(4));
                let v5 = _mm256_loadu_si256(p.add(5));
                let v6 = _mm256_loadu_si256(p.add(6));
                let v7 = _mm256_loadu_si256(p.add(7));
                accumulators[0] = _mm256_add_epi64(accumulators[0], _mm256_add_epi64(v0, v4));
                accumulators[1] = _mm256_add_epi64(accumulators[1], _mm256_add_epi64(v1, v5));
                accumulators[2] = _mm256_add_epi64(accumulators[2], _mm256_add_epi64(v2, v6));
                accumulators[3] = _mm256_add_epi64(accumulators[3], _mm256_add_epi64(v3, v7));
            }
        }
        let total = _mm256_add_epi64(
            _mm256_add_epi64(accumulators[0], accumulators[1]),
            _mm256_add_epi64(accumulators[2], accumulators[3]),
        );
        let mut lanes = [0u64; LANES_256];
        // SAFETY: `lanes` is exactly one 256-bit vector long; `storeu` accepts any alignment.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr() as *mut __m256i, total) };
        let mut sum = lanes.iter().fold(0u64, |sum, &lane| sum.wrapping_add(lane));
        for &value in &data[iterations * per_iteration..] {
            sum = sum.wrapping_add(value);
        }
        sum
    }

    /// # Safety
    /// The CPU must support AVX-512F, and the slices must have equal lengths.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn copy_avx512(destination: &mut [u64], source: &[u64]) {
        let per_iteration = LANES_512 * STORE_UNROLL;
        let iterations = source.len() / per_iteration;
        let from = source.as_ptr() as *const __m512i;
        let to = destination.as_mut_ptr() as *mut __m512i;
        for i in 0..iterations {
            // SAFETY: both slices hold at least `iterations * per_iteration` values (equal lengths, by contract);
            // the destination is exclusively borrowed; `loadu`/`storeu` accept any alignment.
            unsafe {
                let k = i * STORE_UNROLL;
                let v0 = _mm512_loadu_si512(from.add(k));
                let v1 = _mm512_loadu_si512(from.add(k + 1));
                let v2 = _mm512_loadu_si512(from.add(k + 2));
                let v3 = _mm512_loadu_si512(from.add(k + 3));
                _mm512_storeu_si512(to.add(k), v0);
                _mm512_storeu_si512(to.add(k + 1), v1);
                _mm512_storeu_si512(to.add(k + 2), v2);
                _mm512_storeu_si512(to.add(k + 3), v3);
            }
        }
        let done = iterations * per_iteration;
        destination[done..].copy_from_slice(&source[done..]);
    }

    /// # Safety
    /// The CPU must support AVX2, and the slices must have equal lengths.
    #[target_feature(enable = "avx2")]
    pub unsafe fn copy_avx2(destination: &mut [u64], source: &[u64]) {
        let per_iteration = LANES_256 * STORE_UNROLL;
        let iterations = source.len() / per_iteration;
        let from = source.as_ptr() as *const __m256i;
        let to = destination.as_mut_ptr() as *mut __m256i;
        for i in 0..iterations {
            // SAFETY: as in `copy_avx512`.
            unsafe {
                let k = i * STORE_UNROLL;
                let v0 = _mm256_loadu_si256(from.add(k));
                let v1 = _mm256_loadu_si256(from.add(k + 1));
                let v2 = _mm256_loadu_si256(from.add(k + 2));
                let v3 = _mm256_loadu_si256(from.add(k + 3));
                _mm256_storeu_si256(to.add(k), v0);
                _mm256_storeu_si256(to.add(k + 1), v1);
                _mm256_storeu_si256(to.add(k + 2), v2);
                _mm256_storeu_si256(to.add(k + 3), v3);
            }
        }
        let done = iterations * per_iteration;
        destination[done..].copy_from_slice(&source[done..]);
    }

    /// # Safety
    /// The CPU must support AVX-512F, and the slices must have equal lengths.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn add_avx512(destination: &mut [u64], left: &[u64], right: &[u64]) {
        let per_iteration = LANES_512 * STORE_UNROLL;
        let iterations = left.len() / per_iteration;
        let (l, r) = (left.as_ptr() as *const __m512i, right.as_ptr() as *const __m512i);
        let to = destination.as_mut_ptr() as *mut __m512i;
        for i in 0..iterations {
            // SAFETY: all three slices hold at least `iterations * per_iteration` values (equal lengths, by
            // contract); the destination is exclusively borrowed; unaligned access is allowed.
            unsafe {
                for k in i * STORE_UNROLL..(i + 1) * STORE_UNROLL {
                    let sum = _mm512_add_epi64(_mm512_loadu_si512(l.add(k)), _mm512_loadu_si512(r.add(k)));
                    _mm512_storeu_si512(to.add(k), sum);
                }
            }
        }
        let done = iterations * per_iteration;
        super::scalar::add(&mut destination[done..], &left[done..], &right[done..]);
    }

    /// # Safety
    /// The CPU must support AVX2, and the slices must have equal lengths.
    #[target_feature(enable = "avx2")]
    pub unsafe fn add_avx2(destination: &mut [u64], left: &[u64], right: &[u64]) {
        let per_iteration = LANES_256 * STORE_UNROLL;
        let iterations = left.len() / per_iteration;
        let (l, r) = (left.as_ptr() as *const __m256i, right.as_ptr() as *const __m256i);
        let to = destination.as_mut_ptr() as *mut __m256i;
        for i in 0..iterations {
            // SAFETY: as in `add_avx512`.
            unsafe {
                for k in i * STORE_UNROLL..(i + 1) * STORE_UNROLL {
                    let sum = _mm256_add_epi64(_mm256_loadu_si256(l.add(k)), _mm256_loadu_si256(r.add(k)));
                    _mm256_storeu_si256(to.add(k), sum);
                }
            }
        }
        let done = iterations * per_iteration;
        super::scalar::add(&mut destination[done..], &left[done..], &right[done..]);
    }

    /// Splits `destination` into a head that ends at the first `align`-byte boundary, an aligned body of whole
    /// groups of `group` values, and a tail.
    fn split_aligned(destination: &mut [u64], align: usize, group: usize) -> (&mut [u64], &mut [u64], &mut [u64]) {
        let misalignment = destination.as_ptr() as usize % align;
        let head = if misalignment == 0 { 0 } else { ((align - misalignment) / 8).min(destination.len()) };
        let (head, rest) = destination.split_at_mut(head);
        let body = rest.len() / group * group;
        let (body, tail) = rest.split_at_mut(body);
        (head, body, tail)
    }

    /// # Safety
    /// The CPU must support AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn write_avx512(destination: &mut [u64], value: u64) {
        let (head, body, tail) = split_aligned(destination, 64, LANES_512 * STORE_UNROLL);
        super::scalar::write(head, value);
        let vector = _mm512_set1_epi64(value as i64);
        let to = body.as_mut_ptr() as *mut __m512i;
        for k in (0..body.len() / LANES_512).step_by(STORE_UNROLL) {
            // SAFETY: `body` starts 64-byte aligned and holds whole groups of STORE_UNROLL vectors, so vectors
            // k..k+STORE_UNROLL lie within it and are aligned as `_mm512_stream_si512` requires; it is
            // exclusively borrowed.
            unsafe {
                _mm512_stream_si512(to.add(k) as *mut _, vector);
                _mm512_stream_si512(to.add(k + 1) as *mut _, vector);
                _mm512_stream_si512(to.add(k + 2) as *mut _, vector);
                _mm512_stream_si512(to.add(k + 3) as *mut _, vector);
            }
        }
        _mm_sfence();
        super::scalar::write(tail, value);
    }

    /// # Safety
    /// The CPU must support AVX2.
    #[target_feature(enable = "avx2")]
    pub unsafe fn write_avx2(destination: &mut [u64], value: u64) {
        let (head, body, tail) = split_aligned(destination, 32, LANES_256 * STORE_UNROLL);
        super::scalar::write(head, value);
        let vector = _mm256_set1_epi64x(value as i64);
        let to = body.as_mut_ptr() as *mut __m256i;
        for k in (0..body.len() / LANES_256).step_by(STORE_UNROLL) {
            // SAFETY: as in `write_avx512`, with 32-byte alignment for `_mm256_stream_si256`.
            unsafe {
                _mm256_stream_si256(to.add(k), vector);
                _mm256_stream_si256(to.add(k + 1), vector);
                _mm256_stream_si256(to.add(k + 2), vector);
                _mm256_stream_si256(to.add(k + 3), vector);
            }
        }
        _mm_sfence();
        super::scalar::write(tail, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    fn random(len: usize, seed: u64) -> Vec<u64> {
        let mut rng = SplitMix64::new(seed);
        (0..len).map(|_| rng.next_u64()).collect()
    }

    /// Lengths that exercise empty input, tails shorter than a vector and tails of every size.
    const LENGTHS: [usize; 9] = [0, 1, 7, 8, 31, 64, 65, 1000, 4099];

    #[test]
    fn every_variant_sums_like_the_portable_one() {
        for len in LENGTHS {
            let data = random(len, len as u64);
            let expected = data.iter().fold(0u64, |s, &v| s.wrapping_add(v));
            for isa in Isa::available() {
                assert_eq!(read_sum(isa, &data), expected, "{} over {len} values", isa.name());
                // A slice that does not start on a vector boundary.
                if len > 1 {
                    let shifted = data[1..].iter().fold(0u64, |s, &v| s.wrapping_add(v));
                    assert_eq!(read_sum(isa, &data[1..]), shifted, "{} unaligned", isa.name());
                }
            }
        }
    }

    #[test]
    fn every_variant_copies_adds_and_writes_like_the_portable_one() {
        for len in LENGTHS {
            let (b, c) = (random(len, 1), random(len, 2));
            let expected_add: Vec<u64> = b.iter().zip(&c).map(|(x, y)| x.wrapping_add(*y)).collect();
            for isa in Isa::available() {
                let mut a = vec![0u64; len];
                copy(isa, &mut a, &b);
                assert_eq!(a, b, "{} copy of {len}", isa.name());
                add(isa, &mut a, &b, &c);
                assert_eq!(a, expected_add, "{} add of {len}", isa.name());
                // Writing into a slice that starts off a vector boundary exercises the aligned-store head.
                let mut target = vec![0u64; len + 1];
                write(isa, &mut target[1..], 0xDEAD_BEEF);
                assert_eq!(target[0], 0, "{} wrote before its slice", isa.name());
                assert!(target[1..].iter().all(|&v| v == 0xDEAD_BEEF), "{} write of {len}", isa.name());
            }
        }
    }

    #[test]
    fn the_best_isa_is_available_and_names_round_trip() {
        assert!(Isa::best().is_available());
        assert_eq!(Isa::Scalar.or_best_available(), Isa::Scalar);
        for isa in Isa::ALL {
            assert_eq!(isa.name().parse::<Isa>().unwrap(), isa);
        }
        for traffic in Traffic::ALL {
            assert_eq!(traffic.name().parse::<Traffic>().unwrap(), traffic);
        }
        assert!("sse".parse::<Isa>().is_err());
    }
}
