//! The distinct integers of a DISTINCT aggregate (`COUNT(DISTINCT "C1")`): a bitmap over the range the values
//! fall in, where that range is small enough, and a hash set for the rest.
//!
//! Why a bitmap: the thesis columns are integers drawn from `1..N`, so their distinct values are a dense part
//! of a range the zone maps already bound. A bit per value of that range costs `N / 8` bytes (6 MiB for 50
//! million) and a value costs one OR into a word; a hash set of the same values costs tens of bytes and a probe
//! each, and merging two workers' sets re-inserts one into the other. Over 20 million rows of the thesis table,
//! `COUNT(DISTINCT "C1")` spent nearly all its time inserting 12.6 million values into hash sets.
//!
//! A value may be in both parts (put in the hash set before the bitmap grew over it): every reading of the set
//! ([`IntSet::iter`], [`IntSet::summary`]) counts it once, from the bitmap.

use std::collections::HashSet;

use numadb_storage::bitpack::{BLOCK_ROWS, BlockMask};

use crate::run::for_each_set;

/// The most values a bitmap spans: 2^27 bits, 16 MiB per set. Values that would stretch it further go into the
/// hash set. (A fresh bitmap's words never written stay pages the kernel has not handed out, so a sparse one
/// costs little memory until it is grown or merged, which copy it.)
pub const BITMAP_SPAN_MAX: u64 = 1 << 27;

/// The span of the bitmap a block whose values lie too far apart for one starts ([`IntSet::insert_block`]).
const FIRST_SPAN: i64 = 1 << 16;

/// Distinct 64-bit integers: a bitmap over a range, and a hash set for values outside it.
#[derive(Debug, Clone, Default)]
pub struct IntSet {
    /// Values outside the bitmap's range when they came (or before it had one).
    hashed: HashSet<i64, foldhash::fast::RandomState>,
    /// The bitmap; `None` until a block of values is added ([`IntSet::insert_block`]).
    bits: Option<Box<Bitmap>>,
}

/// One bit per value of `[low, low + 64 * words.len())`.
#[derive(Clone)]
struct Bitmap {
    /// The value of word 0's bit 0: a multiple of 64.
    low: i64,
    words: Vec<u64>,
}

impl std::fmt::Debug for Bitmap {
    /// The span, not the millions of words.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bitmap {{ low: {}, values spanned: {} }}", self.low, 64 * self.words.len())
    }
}

impl Bitmap {
    /// The offset of `value` from `low`, if the bitmap spans it.
    #[inline]
    fn offset(&self, value: i64) -> Option<usize> {
        let offset = value.checked_sub(self.low)?;
        usize::try_from(offset).ok().filter(|&offset| offset / 64 < self.words.len())
    }

    #[inline]
    fn set(&mut self, offset: usize) {
        self.words[offset / 64] |= 1 << (offset % 64);
    }

    #[inline]
    fn contains(&self, value: i64) -> bool {
        self.offset(value).is_some_and(|offset| self.words[offset / 64] >> (offset % 64) & 1 == 1)
    }

    /// Makes the bitmap span `[min, max]` as well as what it spans, if that keeps it within
    /// [`BITMAP_SPAN_MAX`] values; whether it spans them. Grown, it takes a quarter more than it needs in the
    /// direction it grows, so that a range widening block by block is not copied block by block.
    fn cover(&mut self, min: i64, max: i64) -> bool {
        let (min, max) = (i128::from(min), i128::from(max));
        let (low, end) = (i128::from(self.low), i128::from(self.low) + 64 * self.words.len() as i128);
        if self.words.is_empty() {
            let low = min.div_euclid(64) * 64;
            let words = (max - low) / 64 + 1;
            if words * 64 > i128::from(BITMAP_SPAN_MAX) {
                return false;
            }
            self.low = low as i64;
            self.words = vec![0; words as usize];
            return true;
        }
        if min >= low && max < end {
            return true;
        }
        let (new_low, new_end) = (min.min(low).div_euclid(64) * 64, (max + 1).max(end));
        let needed = new_end - new_low;
        if needed > i128::from(BITMAP_SPAN_MAX) {
            return false;
        }
        let slack = (needed / 4).min(i128::from(BITMAP_SPAN_MAX) - needed) / 64 * 64;
        let (new_low, new_end) = if new_low < low {
            ((new_low - slack).max(i128::from(i64::MIN) / 64 * 64), new_end)
        } else {
            (new_low, (new_end + slack).min(i128::from(i64::MAX) + 1))
        };
        let words = ((new_end - new_low + 63) / 64) as usize;
        let mut grown = vec![0u64; words];
        let at = ((low - new_low) / 64) as usize;
        grown[at..at + self.words.len()].copy_from_slice(&self.words);
        self.low = new_low as i64;
        self.words = grown;
        true
    }

    /// The values set, in ascending order.
    fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.words.iter().enumerate().flat_map(move |(index, &word)| {
            let base = self.low + 64 * index as i64;
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros();
                    rest &= rest - 1;
                    base + i64::from(bit)
                })
            })
        })
    }

    /// Count, sum, least and greatest of the values set (the least and greatest are `i64::MAX` and `i64::MIN`
    /// when none is).
    fn summary(&self) -> (i64, i128, i64, i64) {
        // Bit `b`'s offsets summed per word from six masked counts: bit `j` of `b` is set in `POSITION_BITS[j]`.
        const POSITION_BITS: [u64; 6] = [
            0xAAAA_AAAA_AAAA_AAAA,
            0xCCCC_CCCC_CCCC_CCCC,
            0xF0F0_F0F0_F0F0_F0F0,
            0xFF00_FF00_FF00_FF00,
            0xFFFF_0000_FFFF_0000,
            0xFFFF_FFFF_0000_0000,
        ];
        let (mut count, mut offsets) = (0i64, 0i128);
        for (index, &word) in self.words.iter().enumerate() {
            if word == 0 {
                continue;
            }
            let ones = i64::from(word.count_ones());
            let within: u32 = POSITION_BITS.iter().enumerate().map(|(j, mask)| (word & mask).count_ones() << j).sum();
            count += ones;
            offsets += i128::from(ones) * 64 * index as i128 + i128::from(within);
        }
        let first = self.words.iter().position(|&w| w != 0);
        let last = self.words.iter().rposition(|&w| w != 0);
        let min = first.map_or(i64::MAX, |w| self.low + 64 * w as i64 + i64::from(self.words[w].trailing_zeros()));
        let max = last.map_or(i64::MIN, |w| self.low + 64 * w as i64 + 63 - i64::from(self.words[w].leading_zeros()));
        (count, i128::from(count) * i128::from(self.low) + offsets, min, max)
    }
}

impl IntSet {
    /// Adds one value.
    #[inline]
    pub fn insert(&mut self, value: i64) {
        match self.bits.as_mut().and_then(|bits| bits.offset(value).map(|offset| (bits, offset))) {
            Some((bits, offset)) => bits.set(offset),
            None => {
                self.hashed.insert(value);
            }
        }
    }

    /// Adds the values of the rows of `valid` (at least one), whose least is `min` and greatest `max`: into the
    /// bitmap, grown to span them where it can be.
    pub fn insert_block(&mut self, values: &[i64; BLOCK_ROWS], valid: &BlockMask, min: i64, max: i64) {
        let bits = self.bits.get_or_insert_with(|| Box::new(Bitmap { low: 0, words: Vec::new() }));
        // A block whose values lie too far apart for one bitmap starts one at its smallest, as wide as a
        // dense block's values (a few far values in every block must not keep the rest out of it).
        if bits.words.is_empty() && !bits.cover(min, max) {
            bits.cover(min, min.saturating_add(FIRST_SPAN - 1));
        }
        if bits.cover(min, max) {
            let low = bits.low;
            // Within the span (just made sure of): the offset is in range, and the wrapping subtraction exact.
            for_each_set(valid, |row| bits.set(values[row].wrapping_sub(low) as usize));
        } else {
            for_each_set(valid, |row| match bits.offset(values[row]) {
                Some(offset) => bits.set(offset),
                None => {
                    self.hashed.insert(values[row]);
                }
            });
        }
    }

    /// Adds every value of `other`, taking its parts where that saves copying them.
    pub fn union(&mut self, other: IntSet) {
        if self.bits.is_none() {
            self.bits = other.bits;
        } else if let Some(theirs) = &other.bits {
            self.union_bits(theirs);
        }
        if self.hashed.len() < other.hashed.len() {
            let mine = std::mem::replace(&mut self.hashed, other.hashed);
            mine.into_iter().for_each(|value| self.insert(value));
            // Taken as they were: values the bitmap spans may stay in the hash set, which reading allows for.
            return;
        }
        other.hashed.into_iter().for_each(|value| self.insert(value));
    }

    /// Adds every value of `other`.
    pub fn union_ref(&mut self, other: &IntSet) {
        match (&self.bits, &other.bits) {
            (None, Some(theirs)) => self.bits = Some(theirs.clone()),
            (Some(_), Some(theirs)) => self.union_bits(theirs),
            _ => {}
        }
        other.hashed.iter().for_each(|&value| self.insert(value));
    }

    /// ORs `theirs` into the bitmap (which there is), grown to span it where it can be; its values one by one
    /// where it cannot.
    fn union_bits(&mut self, theirs: &Bitmap) {
        let Some(mine) = self.bits.as_mut() else { return };
        if theirs.words.is_empty() {
            return;
        }
        let their_max = theirs.low + 64 * (theirs.words.len() as i64 - 1) + 63;
        if mine.cover(theirs.low, their_max) {
            let at = ((i128::from(theirs.low) - i128::from(mine.low)) / 64) as usize;
            for (word, &their) in mine.words[at..].iter_mut().zip(&theirs.words) {
                *word |= their;
            }
        } else if theirs.words.len() > mine.words.len() {
            // Too far apart for one bitmap: the wider one stays a bitmap, the other's values go in one by one.
            let mine = std::mem::replace(mine, Box::new(theirs.clone()));
            mine.iter().for_each(|value| self.insert(value));
        } else {
            theirs.iter().for_each(|value| self.insert(value));
        }
    }

    /// Whether `value` is in the set.
    pub fn contains(&self, value: i64) -> bool {
        self.bits.as_ref().is_some_and(|bits| bits.contains(value)) || self.hashed.contains(&value)
    }

    /// The values, each once: the bitmap's in ascending order, then the others.
    pub fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        let bits = self.bits.as_deref();
        bits.into_iter()
            .flat_map(Bitmap::iter)
            .chain(self.hashed.iter().copied().filter(move |&value| !bits.is_some_and(|bits| bits.contains(value))))
    }

    /// How many values there are.
    pub fn len(&self) -> usize {
        self.summary().0 as usize
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.hashed.is_empty() && self.bits.as_ref().is_none_or(|bits| bits.words.iter().all(|&w| w == 0))
    }

    /// Count, sum, least and greatest of the values (`i64::MAX` and `i64::MIN` for the least and greatest of
    /// none).
    pub fn summary(&self) -> (i64, i128, i64, i64) {
        let (mut count, mut sum, mut min, mut max) =
            self.bits.as_ref().map_or((0, 0, i64::MAX, i64::MIN), |b| b.summary());
        for &value in &self.hashed {
            if self.bits.as_ref().is_some_and(|bits| bits.contains(value)) {
                continue;
            }
            count += 1;
            sum += i128::from(value);
            min = min.min(value);
            max = max.max(value);
        }
        (count, sum, min, max)
    }
}

impl FromIterator<i64> for IntSet {
    fn from_iter<I: IntoIterator<Item = i64>>(values: I) -> IntSet {
        IntSet { hashed: values.into_iter().collect(), bits: None }
    }
}

impl PartialEq for IntSet {
    /// The same values, however they are kept.
    fn eq(&self, other: &IntSet) -> bool {
        self.len() == other.len() && self.iter().all(|value| other.contains(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift), as the crate has no random-number dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// Uniform enough in `[low, high]` for a test.
        fn range(&mut self, low: i64, high: i64) -> i64 {
            let span = (i128::from(high) - i128::from(low) + 1) as u128;
            (i128::from(low) + (u128::from(self.next()) % span) as i128) as i64
        }

        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }
    }

    fn block_of(values: &[i64]) -> ([i64; BLOCK_ROWS], BlockMask, i64, i64) {
        let mut block = [0i64; BLOCK_ROWS];
        let mut valid = [0u64; BLOCK_ROWS / 64];
        for (row, &value) in values.iter().enumerate() {
            block[row] = value;
            valid[row / 64] |= 1 << (row % 64);
        }
        let (min, max) = (*values.iter().min().unwrap(), *values.iter().max().unwrap());
        (block, valid, min, max)
    }

    fn add(set: &mut IntSet, values: &[i64]) {
        let (block, valid, min, max) = block_of(values);
        set.insert_block(&block, &valid, min, max);
    }

    fn summary_of(values: &std::collections::BTreeSet<i64>) -> (i64, i128, i64, i64) {
        let sum = values.iter().map(|&v| i128::from(v)).sum();
        (values.len() as i64, sum, *values.first().unwrap_or(&i64::MAX), *values.last().unwrap_or(&i64::MIN))
    }

    #[test]
    fn sets_hold_each_value_once_however_they_keep_it() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        // Ranges that fit a bitmap, that grow it downwards and upwards, that cannot fit one, and the extremes.
        let ranges: [(i64, i64); 6] = [
            (1, 5_000),
            (-3_000, 200),
            (1_000_000, 1_000_000 + (1 << 26)),
            (-(1 << 40), 1 << 40),
            (i64::MIN, i64::MIN + 1000),
            (i64::MAX - 1000, i64::MAX),
        ];
        for round in 0..40 {
            let mut sets = [IntSet::default(), IntSet::default()];
            let mut expected = std::collections::BTreeSet::new();
            for step in 0..12 {
                let (low, high) = ranges[rng.range(0, ranges.len() as i64 - 1) as usize];
                let values: Vec<i64> = (0..rng.range(1, 199)).map(|_| rng.range(low, high)).collect();
                expected.extend(values.iter().copied());
                let set = &mut sets[step % 2];
                if rng.chance(30) {
                    values.iter().for_each(|&v| set.insert(v));
                } else {
                    add(set, &values);
                }
            }
            let [mut a, b] = sets;
            a.union(b);
            assert_eq!(a.summary(), summary_of(&expected), "round {round}");
            assert_eq!(a.len(), expected.len());
            let mut listed: Vec<i64> = a.iter().collect();
            listed.sort_unstable();
            assert_eq!(listed, expected.iter().copied().collect::<Vec<_>>(), "round {round}");
            assert!(expected.iter().all(|&v| a.contains(v)));
            assert_eq!(a, expected.iter().copied().collect::<IntSet>());
        }
    }

    #[test]
    fn a_dense_range_goes_into_the_bitmap_alone() {
        let mut set = IntSet::default();
        for start in (1..1_000_000).step_by(BLOCK_ROWS) {
            let values: Vec<i64> = (start..start + BLOCK_ROWS as i64).collect();
            add(&mut set, &values);
        }
        assert!(set.hashed.is_empty(), "every block widened the bitmap");
        assert_eq!(set.summary().0, 977 * BLOCK_ROWS as i64);
        // Beyond the most a bitmap spans: the hash set.
        add(&mut set, &[1 << 40]);
        assert_eq!(set.hashed.len(), 1);
        assert!(set.contains(1 << 40) && set.contains(5) && !set.contains(0));
    }

    #[test]
    fn a_few_far_values_per_block_keep_the_rest_in_the_bitmap() {
        let mut set = IntSet::default();
        for block in 0..50i64 {
            let mut values: Vec<i64> = (0..1000).map(|row| (block * 1000 + row) % 20_000).collect();
            values.push((block + 1) * 1_000_000_007);
            add(&mut set, &values);
        }
        assert_eq!(set.hashed.len(), 50, "only the far values are hashed");
        assert_eq!(set.len(), 20_050);
    }

    #[test]
    fn bitmaps_too_far_apart_to_join_merge_value_by_value() {
        let dense = |start: i64, blocks: i64| {
            let mut set = IntSet::default();
            for block in 0..blocks {
                let values: Vec<i64> = (0..1000).map(|row| start + block * 1000 + row).collect();
                add(&mut set, &values);
            }
            set
        };
        let expected = |sets: &[&IntSet]| {
            let all: std::collections::BTreeSet<i64> = sets.iter().flat_map(|set| set.iter()).collect();
            summary_of(&all)
        };
        let (near, far) = (dense(0, 30), dense(1 << 30, 3));
        let want = expected(&[&near, &far]);
        for (a, b) in [(&near, &far), (&far, &near)] {
            let mut owned = a.clone();
            owned.union(b.clone());
            assert_eq!(owned.summary(), want);
            assert_eq!(owned.hashed.len(), 3000, "the narrower bitmap's values are hashed, the wider stays");
            let mut borrowed = a.clone();
            borrowed.union_ref(b);
            assert_eq!(borrowed.summary(), want);
            assert_eq!(borrowed.hashed.len(), 3000);
        }
        // Overlapping bitmaps join by OR.
        let mut joined = dense(0, 30);
        joined.union_ref(&dense(5_000, 30));
        assert!(joined.hashed.is_empty());
        assert_eq!(joined.len(), 35_000);
    }

    #[test]
    fn offsets_summed_per_word_are_the_bits_positions() {
        let mut bits = Bitmap { low: -128, words: Vec::new() };
        assert!(bits.cover(-128, 300));
        let values = [-128i64, -127, -1, 0, 1, 63, 64, 200, 255, 300];
        for value in values {
            let offset = bits.offset(value).expect("spanned");
            bits.set(offset);
        }
        let sum: i128 = values.iter().map(|&v| i128::from(v)).sum();
        assert_eq!(bits.summary(), (values.len() as i64, sum, -128, 300));
        assert_eq!(bits.iter().collect::<Vec<_>>(), values);
    }
}
