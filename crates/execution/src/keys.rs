//! Sets of integer join keys, asked "may this key have a partner?" once per probing row.
//!
//! A hash join's probing side is mostly rows without a partner when the other side is filtered (the classic
//! star-schema join: a filtered dimension, a large fact table). Two things answer the question more cheaply than
//! the join's hash table:
//!
//! - [`KeyBitmap`], one bit per integer between the smallest and the largest key. The join itself checks it
//!   before its hash table: a table of megabytes costs a cache miss per probe, the bitmap a fraction of it.
//! - [`KeySet`], what a scan of the probing side is handed so that it drops those rows itself, a block at a time
//!   on the workers, before they become rows at all ([`crate::filter::Filter::IntKeys`]). Its bounds double as a
//!   zone map: a block whose values all lie outside them is not read.

use std::collections::HashSet;

/// One bit per integer from the smallest key to the largest, set for the keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyBitmap {
    low: i64,
    bits: Vec<u64>,
}

/// The most bits a [`KeyBitmap`] takes (16 MiB).
pub const KEY_BITMAP_BITS_MAX: u64 = 1 << 27;

impl KeyBitmap {
    /// The bitmap of `keys`, or `None` when there are none, when they span more than [`KEY_BITMAP_BITS_MAX`]
    /// integers, or when they span more than `bits_per_key_max` integers per key (`count` keys).
    pub fn of(keys: impl Iterator<Item = i64> + Clone, count: usize, bits_per_key_max: u64) -> Option<KeyBitmap> {
        let (low, high) = keys.clone().fold((i64::MAX, i64::MIN), |(l, h), k| (l.min(k), h.max(k)));
        if low > high {
            return None;
        }
        KeyBitmap::within((low, high), keys, count, bits_per_key_max)
    }

    /// [`KeyBitmap::of`] for keys already known to lie within `(low, high)` (both included, `low <= high`).
    fn within(
        (low, high): (i64, i64),
        keys: impl Iterator<Item = i64>,
        count: usize,
        bits_per_key_max: u64,
    ) -> Option<KeyBitmap> {
        let span = (high as i128 - low as i128 + 1) as u128;
        if span > u128::from(KEY_BITMAP_BITS_MAX) || span > u128::from(bits_per_key_max) * count as u128 {
            return None;
        }
        let mut bits = vec![0u64; (span as usize).div_ceil(64)];
        for key in keys {
            let offset = key.wrapping_sub(low) as u64 as usize;
            bits[offset / 64] |= 1 << (offset % 64);
        }
        Some(KeyBitmap { low, bits })
    }

    /// Whether `key` is one of the keys.
    #[inline]
    pub fn contains(&self, key: i64) -> bool {
        let offset = (key as i128 - self.low as i128) as u128;
        offset < (self.bits.len() as u128) * 64 && self.bits[offset as usize / 64] >> (offset % 64) & 1 == 1
    }

    /// Sets bit `j` of `out` (64 to a word) exactly when `first + j` is one of the keys: [`KeyBitmap::contains`]
    /// for a run of consecutive values, taken from the bitmap a word at a time.
    pub fn run_bits(&self, first: i64, out: &mut [u64]) {
        let total = self.bits.len() as i128 * 64;
        let start = first as i128 - self.low as i128;
        for (w, word) in out.iter_mut().enumerate() {
            // The bitmap's bit for this word's first value.
            let offset = start + 64 * w as i128;
            *word = if offset >= total || offset <= -64 {
                0
            } else if offset < 0 {
                // The bitmap's first bits fall in this word, from bit `-offset` on.
                self.bits[0] << (-offset) as u32
            } else {
                let (index, shift) = ((offset / 64) as usize, (offset % 64) as u32);
                let next = match shift {
                    0 => 0,
                    _ => self.bits.get(index + 1).map_or(0, |&bits| bits << (64 - shift)),
                };
                self.bits[index] >> shift | next
            };
        }
    }
}

/// The distinct non-NULL integer keys of a join's other input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySet {
    /// No keys: no row has a partner.
    Empty,
    /// Keys close enough together for a [`KeyBitmap`].
    Bitmap {
        /// The smallest and largest key.
        bounds: (i64, i64),
        /// The keys.
        bitmap: KeyBitmap,
    },
    /// Keys too far apart for a bitmap.
    Hashed {
        /// The smallest and largest key.
        bounds: (i64, i64),
        /// The keys.
        keys: HashSet<i64, foldhash::fast::FixedState>,
    },
}

impl KeySet {
    /// The set of `keys` (repeats allowed).
    pub fn of(keys: &[i64]) -> KeySet {
        KeySet::of_keys(keys.iter().copied())
    }

    /// [`KeySet::of`] over keys that need not be gathered first (a join's build side, `Option`s of them).
    pub fn of_keys(keys: impl Iterator<Item = i64> + Clone) -> KeySet {
        let (count, low, high) =
            keys.clone().fold((0usize, i64::MAX, i64::MIN), |(n, l, h), k| (n + 1, l.min(k), h.max(k)));
        if count == 0 {
            return KeySet::Empty;
        }
        let bounds = (low, high);
        // Any density: even one key per 16 MiB of bitmap is looked up faster in the bitmap than in a hash set.
        match KeyBitmap::within(bounds, keys.clone(), count, u64::MAX) {
            Some(bitmap) => KeySet::Bitmap { bounds, bitmap },
            None => KeySet::Hashed { bounds, keys: keys.collect() },
        }
    }

    /// The smallest and largest key, `None` for no keys.
    pub fn bounds(&self) -> Option<(i64, i64)> {
        match self {
            KeySet::Empty => None,
            KeySet::Bitmap { bounds, .. } | KeySet::Hashed { bounds, .. } => Some(*bounds),
        }
    }

    /// Whether `key` is in the set.
    #[inline]
    pub fn contains(&self, key: i64) -> bool {
        match self {
            KeySet::Empty => false,
            KeySet::Bitmap { bitmap, .. } => bitmap.contains(key),
            KeySet::Hashed { keys, .. } => keys.contains(&key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_consecutive_values_gets_the_bits_contains_gives_each() {
        // Keys here and there from -100 on, and the runs' starts on either side of the bitmap's ends and across
        // its words at every shift.
        let keys: Vec<i64> = (-100i64..400).filter(|k| k.rem_euclid(7) == 3 || k.rem_euclid(13) == 0).collect();
        let bitmap = KeyBitmap::of(keys.iter().copied(), keys.len(), 64).expect("a bitmap");
        for first in -400i64..500 {
            let mut out = [u64::MAX; 3];
            bitmap.run_bits(first, &mut out);
            for j in 0..192 {
                let got = out[j / 64] >> (j % 64) & 1 == 1;
                assert_eq!(got, bitmap.contains(first + j as i64), "run from {first}, value {}", first + j as i64);
            }
        }
        // Far past either end, and at the ends of BIGINT.
        for first in [i64::MIN, i64::MIN + 5, i64::MAX - 191, 1 << 40, -(1 << 40)] {
            let mut out = [u64::MAX; 3];
            bitmap.run_bits(first, &mut out);
            assert_eq!(out, [0; 3], "{first}");
        }
    }

    #[test]
    fn the_key_bitmap_holds_exactly_the_keys() {
        let keys = [-5i64, 3, 10, 3];
        let bitmap = KeyBitmap::of(keys.iter().copied(), keys.len(), 64).expect("16 integers for 4 keys");
        for key in -20..=20 {
            assert_eq!(bitmap.contains(key), keys.contains(&key), "{key}");
        }
        assert!(!bitmap.contains(i64::MIN) && !bitmap.contains(i64::MAX));
        // Keys at both ends of BIGINT: no bitmap (2^64 integers), and none past 64 integers per key.
        assert!(KeyBitmap::of([i64::MIN, i64::MAX].into_iter(), 2, u64::MAX).is_none());
        assert!(KeyBitmap::of([0i64, 64].into_iter(), 1, 64).is_none());
        assert!(KeyBitmap::of([0i64, 63].into_iter(), 1, 64).is_some());
        assert!(KeyBitmap::of(std::iter::empty(), 0, 64).is_none());
    }

    #[test]
    fn key_sets_hold_exactly_their_keys_however_far_apart() {
        let near = [7i64, -3, 7, 1000];
        let far = [i64::MIN, -1, 0, i64::MAX];
        for keys in [&near[..], &far[..]] {
            let set = KeySet::of(keys);
            assert_eq!(set.bounds(), Some((*keys.iter().min().unwrap(), *keys.iter().max().unwrap())));
            for probe in [i64::MIN, i64::MIN + 1, -4, -3, -1, 0, 1, 7, 8, 999, 1000, 1001, i64::MAX - 1, i64::MAX] {
                assert_eq!(set.contains(probe), keys.contains(&probe), "{probe} in {keys:?}");
            }
        }
        assert!(matches!(KeySet::of(&near), KeySet::Bitmap { .. }));
        assert!(matches!(KeySet::of(&far), KeySet::Hashed { .. }));
        let empty = KeySet::of(&[]);
        assert_eq!(empty.bounds(), None);
        assert!(!empty.contains(0));
    }
}
