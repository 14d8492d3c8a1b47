//! Indexes: sorted (binary search: every probe is a chain of dependent cache misses, the latency-bound access of
//! the thesis's random-access workload) and hash (open addressing: one or two misses).
//!
//! The sorted index searches a small array of *fences* (every 64th key, a few hundred KiB for tens of millions of
//! keys, so it mostly stays in cache) before the 64-key run that holds the answer: a probe then misses the cache a
//! few times instead of once per halving.
//!
//! Keys are integers (INTEGER, BIGINT) or text. Integer indexes are flat arrays; a sorted index takes inserts into
//! a small ordered side map that is merged into the arrays when it grows, so bulk-loaded tables get the compact
//! layout and single-row inserts stay cheap. Row ids are `u32`: a table holds fewer than 2^32 rows.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use serde::{Deserialize, Serialize};

use crate::types::Value;

/// How an index finds keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IndexKind {
    /// Binary search over sorted keys.
    Sorted,
    /// Open-addressing hash table.
    Hash,
}

impl IndexKind {
    /// `sorted` or `hash`.
    pub fn name(self) -> &'static str {
        match self {
            IndexKind::Sorted => "sorted",
            IndexKind::Hash => "hash",
        }
    }
}

/// A key that already exists in a unique index.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("duplicate key value violates unique constraint \"{index}\": ({column})=({key}) already exists")]
pub struct DuplicateKey {
    /// The index.
    pub index: String,
    /// The indexed column's name.
    pub column: String,
    /// The key, as text.
    pub key: String,
}

/// Side-map size (relative to the main arrays) at which a sorted index merges.
const SORTED_MERGE_FRACTION: usize = 16;
/// Side-map size below which a sorted index never merges.
const SORTED_MERGE_MIN: usize = 4096;
const EMPTY_ROW: u32 = u32::MAX;
/// Keys between two fences of a sorted index.
const FENCE_STRIDE: usize = 64;

fn fences_of(keys: &[i64]) -> Vec<i64> {
    keys.iter().step_by(FENCE_STRIDE).copied().collect()
}

/// The first position in `keys` whose key is `>= key`, using the fences.
#[inline]
fn lower_bound(keys: &[i64], fences: &[i64], key: i64) -> usize {
    let fence = fences.partition_point(|&k| k < key);
    if fence == 0 {
        return 0;
    }
    // keys[(fence - 1) * stride] < key <= keys[fence * stride] (when that exists).
    let low = (fence - 1) * FENCE_STRIDE + 1;
    let high = (fence * FENCE_STRIDE).min(keys.len());
    low + keys[low..high].partition_point(|&k| k < key)
}

/// The position past the last key in `keys` that is `<= key`.
#[inline]
fn upper_bound(keys: &[i64], fences: &[i64], key: i64) -> usize {
    match key.checked_add(1) {
        Some(next) => lower_bound(keys, fences, next),
        None => keys.len(),
    }
}

/// The positions in `keys` of the keys within `[from, to]` (`from <= to`).
#[inline]
fn sorted_span(keys: &[i64], fences: &[i64], from: i64, to: i64) -> std::ops::Range<usize> {
    let start = lower_bound(keys, fences, from);
    start..upper_bound(keys, fences, to).max(start)
}

/// Integer bounds as the inclusive range `[from, to]`; `None` when it is empty or a bound is not an integer.
fn int_bounds(low: Bound<&Value>, high: Bound<&Value>) -> Option<(i64, i64)> {
    let from = match low {
        Bound::Unbounded => i64::MIN,
        Bound::Included(Value::Int(k)) => *k,
        Bound::Excluded(Value::Int(k)) => k.checked_add(1)?,
        _ => return None,
    };
    let to = match high {
        Bound::Unbounded => i64::MAX,
        Bound::Included(Value::Int(k)) => *k,
        Bound::Excluded(Value::Int(k)) => k.checked_sub(1)?,
        _ => return None,
    };
    (from <= to).then_some((from, to))
}

/// Text bounds as `str` bounds; `None` when the range is empty (which `BTreeMap::range` refuses) or a bound is not
/// text.
fn text_bounds<'v>(low: Bound<&'v Value>, high: Bound<&'v Value>) -> Option<(Bound<&'v str>, Bound<&'v str>)> {
    fn text(bound: Bound<&Value>) -> Option<Bound<&str>> {
        match bound {
            Bound::Unbounded => Some(Bound::Unbounded),
            Bound::Included(Value::Text(s)) => Some(Bound::Included(s)),
            Bound::Excluded(Value::Text(s)) => Some(Bound::Excluded(s)),
            _ => None,
        }
    }
    let (low, high) = (text(low)?, text(high)?);
    let empty = match (low, high) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => a >= b,
        _ => false,
    };
    (!empty).then_some((low, high))
}

/// An open-addressing hash table from integer keys to row ids (duplicates allowed; they sit in one probe run).
struct IntHash {
    keys: Vec<i64>,
    rows: Vec<u32>,
    len: usize,
    shift: u32,
}

impl IntHash {
    fn with_capacity(entries: usize) -> Self {
        let slots = (entries.max(8) * 2).next_power_of_two();
        IntHash { keys: vec![0; slots], rows: vec![EMPTY_ROW; slots], len: 0, shift: 64 - slots.trailing_zeros() }
    }

    #[inline]
    fn slot(&self, key: i64) -> usize {
        ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }

    fn insert(&mut self, key: i64, row: u32) {
        if (self.len + 1) * 10 > self.keys.len() * 7 {
            self.grow();
        }
        let mask = self.keys.len() - 1;
        let mut slot = self.slot(key);
        while self.rows[slot] != EMPTY_ROW {
            slot = (slot + 1) & mask;
        }
        self.keys[slot] = key;
        self.rows[slot] = row;
        self.len += 1;
    }

    fn grow(&mut self) {
        let mut bigger = IntHash::with_capacity(self.keys.len());
        for (&key, &row) in self.keys.iter().zip(&self.rows) {
            if row != EMPTY_ROW {
                bigger.insert(key, row);
            }
        }
        *self = bigger;
    }

    #[inline]
    fn for_each_match(&self, key: i64, mut found: impl FnMut(u32)) {
        let mask = self.keys.len() - 1;
        let mut slot = self.slot(key);
        loop {
            let row = self.rows[slot];
            if row == EMPTY_ROW {
                return;
            }
            if self.keys[slot] == key {
                found(row);
            }
            slot = (slot + 1) & mask;
        }
    }
}

enum IndexData {
    IntSorted { keys: Vec<i64>, fences: Vec<i64>, rows: Vec<u32>, recent: BTreeMap<i64, Vec<u32>> },
    IntHash(IntHash),
    TextSorted(BTreeMap<Arc<str>, Vec<u32>>),
    TextHash(HashMap<Arc<str>, Vec<u32>>),
}

/// An index on one column.
pub struct Index {
    name: String,
    column: usize,
    column_name: String,
    kind: IndexKind,
    unique: bool,
    /// Shared with the index's copies for a table whose columns moved ([`Index::moved`]).
    data: Arc<RwLock<IndexData>>,
}

fn key_text(key: &Value) -> String {
    key.to_pg_text().unwrap_or_else(|| "NULL".into())
}

impl Index {
    /// Builds an index over existing `(key, row)` entries (NULL keys are not indexed).
    pub fn build(
        name: &str,
        column: usize,
        column_name: &str,
        kind: IndexKind,
        unique: bool,
        text_keys: bool,
        entries: impl Iterator<Item = (Value, u32)>,
    ) -> Result<Index, DuplicateKey> {
        let duplicate =
            |key: &Value| DuplicateKey { index: name.to_string(), column: column_name.to_string(), key: key_text(key) };
        let data = if text_keys {
            let mut map: BTreeMap<Arc<str>, Vec<u32>> = BTreeMap::new();
            for (key, row) in entries {
                if let Value::Text(text) = &key {
                    let rows = map.entry(Arc::clone(text)).or_default();
                    if unique && !rows.is_empty() {
                        return Err(duplicate(&key));
                    }
                    rows.push(row);
                }
            }
            match kind {
                IndexKind::Sorted => IndexData::TextSorted(map),
                IndexKind::Hash => IndexData::TextHash(map.into_iter().collect()),
            }
        } else {
            let mut pairs: Vec<(i64, u32)> =
                entries.filter_map(|(key, row)| if let Value::Int(k) = key { Some((k, row)) } else { None }).collect();
            // Bulk-loaded keys are often already in order (a serial primary key): skip the sort then.
            if !pairs.windows(2).all(|w| w[0] <= w[1]) {
                pairs.sort_unstable();
            }
            if unique && let Some(pair) = pairs.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(duplicate(&Value::Int(pair[0].0)));
            }
            match kind {
                IndexKind::Sorted => {
                    let keys: Vec<i64> = pairs.iter().map(|p| p.0).collect();
                    IndexData::IntSorted {
                        fences: fences_of(&keys),
                        keys,
                        rows: pairs.iter().map(|p| p.1).collect(),
                        recent: BTreeMap::new(),
                    }
                }
                IndexKind::Hash => {
                    let mut table = IntHash::with_capacity(pairs.len());
                    for (key, row) in pairs {
                        table.insert(key, row);
                    }
                    IndexData::IntHash(table)
                }
            }
        };
        Ok(Index {
            name: name.to_string(),
            column,
            column_name: column_name.to_string(),
            kind,
            unique,
            data: Arc::new(RwLock::new(data)),
        })
    }

    /// This index for a table whose columns moved or were renamed (ALTER TABLE): the indexed column is now at
    /// `column` and called `column_name`. The keys are shared, not copied: row ids do not change with the
    /// columns, and the table the index came from takes no more writes once its successor has it.
    pub fn moved(&self, column: usize, column_name: &str) -> Index {
        Index {
            name: self.name.clone(),
            column,
            column_name: column_name.to_string(),
            kind: self.kind,
            unique: self.unique,
            data: Arc::clone(&self.data),
        }
    }

    /// The indexed column's name (as it was when the index was made or last moved).
    pub fn column_name(&self) -> &str {
        &self.column_name
    }

    /// The index's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The indexed column's position.
    pub fn column(&self) -> usize {
        self.column
    }

    /// The kind.
    pub fn kind(&self) -> IndexKind {
        self.kind
    }

    /// Whether keys are unique.
    pub fn is_unique(&self) -> bool {
        self.unique
    }

    /// Calls `found` with every row whose key equals `key`.
    pub fn lookup(&self, key: &Value, mut found: impl FnMut(u32)) {
        let data = self.data.read().unwrap_or_else(|p| p.into_inner());
        match (&*data, key) {
            (IndexData::IntSorted { keys, fences, rows, recent }, Value::Int(key)) => {
                let start = lower_bound(keys, fences, *key);
                for (k, &row) in keys[start..].iter().zip(&rows[start..]) {
                    if k != key {
                        break;
                    }
                    found(row);
                }
                if let Some(extra) = recent.get(key) {
                    extra.iter().copied().for_each(&mut found);
                }
            }
            (IndexData::IntHash(table), Value::Int(key)) => table.for_each_match(*key, found),
            (IndexData::TextSorted(map), Value::Text(key)) => {
                map.get(key).into_iter().flatten().copied().for_each(found)
            }
            (IndexData::TextHash(map), Value::Text(key)) => map.get(key).into_iter().flatten().copied().for_each(found),
            _ => {}
        }
    }

    /// Calls `found` with every row whose key lies within `low` and `high` (a sorted index only: a hash index finds
    /// nothing), those of the sorted arrays in key order, then those inserted since they were merged. Bounds of
    /// another type than the keys find nothing.
    pub fn lookup_range(&self, low: Bound<&Value>, high: Bound<&Value>, mut found: impl FnMut(u32)) {
        let data = self.data.read().unwrap_or_else(|p| p.into_inner());
        match &*data {
            IndexData::IntSorted { keys, fences, rows, recent } => {
                let Some((from, to)) = int_bounds(low, high) else { return };
                rows[sorted_span(keys, fences, from, to)].iter().copied().for_each(&mut found);
                recent.range(from..=to).flat_map(|(_, rows)| rows).copied().for_each(found);
            }
            IndexData::TextSorted(map) => {
                if let Some(bounds) = text_bounds(low, high) {
                    map.range::<str, _>(bounds).flat_map(|(_, rows)| rows).copied().for_each(found);
                }
            }
            IndexData::IntHash(_) | IndexData::TextHash(_) => {}
        }
    }

    /// How many rows [`Index::lookup_range`] would find (`None` for a hash index), or some number above `at_most`
    /// once the count passes it: in O(log n) for integer keys, and in O(log n + at_most) for text, whose keys are
    /// counted one by one. It counts rows inserted after a statement's snapshot too, so it is an upper bound for
    /// the statement.
    pub fn count_range(&self, low: Bound<&Value>, high: Bound<&Value>, at_most: u64) -> Option<u64> {
        let data = self.data.read().unwrap_or_else(|p| p.into_inner());
        match &*data {
            IndexData::IntSorted { keys, fences, recent, .. } => {
                let Some((from, to)) = int_bounds(low, high) else { return Some(0) };
                let recent: usize = recent.range(from..=to).map(|(_, rows)| rows.len()).sum();
                Some((sorted_span(keys, fences, from, to).len() + recent) as u64)
            }
            IndexData::TextSorted(map) => {
                let Some(bounds) = text_bounds(low, high) else { return Some(0) };
                let mut count = 0u64;
                for (_, rows) in map.range::<str, _>(bounds) {
                    count += rows.len() as u64;
                    if count > at_most {
                        break;
                    }
                }
                Some(count)
            }
            IndexData::IntHash(_) | IndexData::TextHash(_) => None,
        }
    }

    /// The first row whose key equals `key`.
    pub fn lookup_one(&self, key: &Value) -> Option<u32> {
        let mut first = None;
        self.lookup(key, |row| {
            first.get_or_insert(row);
        });
        first
    }

    /// Checks that `keys` could be inserted: none exists and none repeats (unique indexes only).
    pub fn check_insert(&self, keys: &[Value]) -> Result<(), DuplicateKey> {
        if !self.unique {
            return Ok(());
        }
        let duplicate = |key: &Value| DuplicateKey {
            index: self.name.clone(),
            column: self.column_name.clone(),
            key: key_text(key),
        };
        let mut seen = std::collections::HashSet::new();
        for key in keys.iter().filter(|k| !k.is_null()) {
            if self.lookup_one(key).is_some() || !seen.insert(key.clone()) {
                return Err(duplicate(key));
            }
        }
        Ok(())
    }

    /// Adds entries (after [`Index::check_insert`]).
    pub fn insert(&self, entries: &[(Value, u32)]) {
        let mut data = self.data.write().unwrap_or_else(|p| p.into_inner());
        for (key, row) in entries {
            match (&mut *data, key) {
                (IndexData::IntSorted { recent, .. }, Value::Int(key)) => recent.entry(*key).or_default().push(*row),
                (IndexData::IntHash(table), Value::Int(key)) => table.insert(*key, *row),
                (IndexData::TextSorted(map), Value::Text(key)) => map.entry(Arc::clone(key)).or_default().push(*row),
                (IndexData::TextHash(map), Value::Text(key)) => map.entry(Arc::clone(key)).or_default().push(*row),
                _ => {}
            }
        }
        if let IndexData::IntSorted { keys, fences, rows, recent } = &mut *data {
            let pending: usize = recent.values().map(Vec::len).sum();
            if pending >= SORTED_MERGE_MIN.max(keys.len() / SORTED_MERGE_FRACTION) {
                let mut pairs: Vec<(i64, u32)> = keys.iter().copied().zip(rows.iter().copied()).collect();
                pairs.extend(recent.iter().flat_map(|(&k, rs)| rs.iter().map(move |&r| (k, r))));
                pairs.sort_unstable();
                *keys = pairs.iter().map(|p| p.0).collect();
                *fences = fences_of(keys);
                *rows = pairs.iter().map(|p| p.1).collect();
                recent.clear();
            }
        }
    }

    /// Bytes the index holds (approximately, for the side structures).
    pub fn bytes(&self) -> u64 {
        let data = self.data.read().unwrap_or_else(|p| p.into_inner());
        match &*data {
            IndexData::IntSorted { keys, recent, .. } => (keys.len() * 12 + recent.len() * 48) as u64,
            IndexData::IntHash(table) => (table.keys.len() * 12) as u64,
            IndexData::TextSorted(map) => map.iter().map(|(k, v)| k.len() + v.len() * 4 + 48).sum::<usize>() as u64,
            IndexData::TextHash(map) => map.iter().map(|(k, v)| k.len() + v.len() * 4 + 32).sum::<usize>() as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ints(keys: &[i64]) -> Vec<(Value, u32)> {
        keys.iter().enumerate().map(|(row, &k)| (Value::Int(k), row as u32)).collect()
    }

    #[test]
    fn both_kinds_find_every_key_and_reject_duplicates() {
        let keys: Vec<i64> = (0..10_000).map(|i| (i * 7919) % 10_007).collect();
        for kind in [IndexKind::Sorted, IndexKind::Hash] {
            let index = Index::build("pk", 0, "c0", kind, true, false, ints(&keys).into_iter()).unwrap();
            for (row, &key) in keys.iter().enumerate() {
                assert_eq!(index.lookup_one(&Value::Int(key)), Some(row as u32), "{kind:?} key {key}");
            }
            assert_eq!(index.lookup_one(&Value::Int(-5)), None);
            let error = index.check_insert(&[Value::Int(keys[3])]).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("duplicate key value violates unique constraint \"pk\": (c0)=({}) already exists", keys[3])
            );
            assert!(index.check_insert(&[Value::Int(20_000), Value::Int(20_000)]).is_err());
            index.check_insert(&[Value::Int(20_000)]).unwrap();
            index.insert(&[(Value::Int(20_000), 10_000)]);
            assert_eq!(index.lookup_one(&Value::Int(20_000)), Some(10_000));
        }
        let error =
            Index::build("pk", 0, "c0", IndexKind::Hash, true, false, ints(&[1, 2, 1]).into_iter()).err().unwrap();
        assert!(error.to_string().contains("(c0)=(1)"));
    }

    #[test]
    fn non_unique_indexes_return_every_row() {
        for kind in [IndexKind::Sorted, IndexKind::Hash] {
            let index = Index::build("i", 0, "c", kind, false, false, ints(&[5, 3, 5, 5, 9]).into_iter()).unwrap();
            let mut rows = Vec::new();
            index.lookup(&Value::Int(5), |r| rows.push(r));
            rows.sort_unstable();
            assert_eq!(rows, vec![0, 2, 3]);
            // Many inserts trigger a merge of the sorted side map.
            let more: Vec<(Value, u32)> = (0..10_000).map(|i| (Value::Int(i % 10), 100 + i as u32)).collect();
            index.insert(&more);
            let mut count = 0;
            index.lookup(&Value::Int(5), |_| count += 1);
            assert_eq!(count, 3 + 1000);
        }
    }

    #[test]
    fn fenced_lower_bound_is_the_plain_one() {
        let mut keys: Vec<i64> = (0..10_000).map(|i| i / 3 * 2).collect();
        keys.sort_unstable();
        let fences = fences_of(&keys);
        for key in -2..7000 {
            assert_eq!(lower_bound(&keys, &fences, key), keys.partition_point(|&k| k < key), "key {key}");
        }
        assert_eq!(lower_bound(&[], &[], 5), 0);
    }

    #[test]
    fn range_lookups_find_the_rows_between_their_bounds_and_count_them() {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        // Duplicates, a gap, the extremes of i64, and rows inserted later into the side map.
        let mut keys: Vec<i64> = (0..3000).map(|i| (i * 7) % 1000 - 500).collect();
        keys.extend([i64::MIN, i64::MAX, i64::MAX - 1]);
        let index = Index::build("i", 0, "c", IndexKind::Sorted, false, false, ints(&keys).into_iter()).unwrap();
        let later: Vec<(Value, u32)> =
            (0..50).map(|i| (Value::Int(i * 3 - 60), (keys.len() + i as usize) as u32)).collect();
        index.insert(&later);
        let all: Vec<(i64, u32)> = ints(&keys)
            .into_iter()
            .chain(later)
            .map(|(k, r)| (if let Value::Int(k) = k { k } else { unreachable!() }, r))
            .collect();
        let points = [i64::MIN, i64::MIN + 1, -501, -500, -42, 0, 7, 499, 500, i64::MAX - 1, i64::MAX];
        let bounds = |v: i64| [Included(Value::Int(v)), Excluded(Value::Int(v))];
        let mut checked = 0;
        for low in points.iter().flat_map(|&v| bounds(v)).chain([Unbounded]) {
            for high in points.iter().flat_map(|&v| bounds(v)).chain([Unbounded]) {
                let inside = |k: i64| {
                    let above = match &low {
                        Included(Value::Int(v)) => k >= *v,
                        Excluded(Value::Int(v)) => k > *v,
                        _ => true,
                    };
                    let below = match &high {
                        Included(Value::Int(v)) => k <= *v,
                        Excluded(Value::Int(v)) => k < *v,
                        _ => true,
                    };
                    above && below
                };
                let mut expected: Vec<u32> = all.iter().filter(|(k, _)| inside(*k)).map(|(_, r)| *r).collect();
                let mut found = Vec::new();
                index.lookup_range(low.as_ref(), high.as_ref(), |row| found.push(row));
                assert_eq!(index.count_range(low.as_ref(), high.as_ref(), u64::MAX), Some(found.len() as u64));
                expected.sort_unstable();
                found.sort_unstable();
                assert_eq!(found, expected, "{low:?} .. {high:?}");
                checked += usize::from(!expected.is_empty());
            }
        }
        assert!(checked > 100, "most ranges hold rows");
        // Bounds of another type find nothing; a hash index takes no ranges.
        let text = Value::text("a");
        assert_eq!(index.count_range(Included(&text), Unbounded, u64::MAX), Some(0));
        let hash = Index::build("h", 0, "c", IndexKind::Hash, false, false, ints(&keys).into_iter()).unwrap();
        assert_eq!(hash.count_range(Unbounded, Unbounded, u64::MAX), None);
    }

    #[test]
    fn text_range_lookups_follow_byte_order_and_refuse_no_empty_range() {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let words = ["pear", "apple", "fig", "apple", "Banana", "figs", ""];
        let entries = words.iter().enumerate().map(|(r, t)| (Value::text(t), r as u32));
        let index = Index::build("t", 1, "name", IndexKind::Sorted, false, true, entries).unwrap();
        let points = ["", "B", "apple", "fig", "figs", "zz"];
        for low in points.iter().flat_map(|v| [Included(Value::text(v)), Excluded(Value::text(v))]).chain([Unbounded]) {
            for high in
                points.iter().flat_map(|v| [Included(Value::text(v)), Excluded(Value::text(v))]).chain([Unbounded])
            {
                let inside = |w: &str| {
                    let above = match &low {
                        Included(Value::Text(v)) => w >= &**v,
                        Excluded(Value::Text(v)) => w > &**v,
                        _ => true,
                    };
                    let below = match &high {
                        Included(Value::Text(v)) => w <= &**v,
                        Excluded(Value::Text(v)) => w < &**v,
                        _ => true,
                    };
                    above && below
                };
                let expected: Vec<u32> = (0..words.len() as u32).filter(|&r| inside(words[r as usize])).collect();
                let mut found = Vec::new();
                index.lookup_range(low.as_ref(), high.as_ref(), |row| found.push(row));
                assert_eq!(index.count_range(low.as_ref(), high.as_ref(), u64::MAX), Some(found.len() as u64));
                // A count that passes its cap stops there, above it.
                let capped = index.count_range(low.as_ref(), high.as_ref(), 1).unwrap();
                match found.len() {
                    0 | 1 => assert_eq!(capped, found.len() as u64),
                    all => assert!(capped > 1 && capped <= all as u64, "{capped} of {all}"),
                }
                found.sort_unstable();
                assert_eq!(found, expected, "{low:?} .. {high:?}");
            }
        }
    }

    #[test]
    fn text_keys() {
        let entries = ["b", "a", "c"].iter().enumerate().map(|(r, t)| (Value::text(t), r as u32));
        let index = Index::build("t", 1, "name", IndexKind::Sorted, true, true, entries).unwrap();
        assert_eq!(index.lookup_one(&Value::text("c")), Some(2));
        assert_eq!(index.lookup_one(&Value::text("d")), None);
        assert_eq!(index.lookup_one(&Value::Int(1)), None);
    }
}
