//! Text GROUP BY keys numbered across a table's partitions, so that [`crate::group`] groups them as integers.
//!
//! A text column is stored as codes into its partition's own dictionary: the same string has one code in one
//! partition and another, or none, in the next. Grouped by codes, a task's groups could only be merged with
//! another's by their strings: each task's groups became rows of [`Value`]s, hashed and merged per domain, and
//! `GROUP BY s` (50 000 strings over a million rows in one partition) took 117-168 ms, against DuckDB's 16;
//! `SELECT DISTINCT bk % 500000, jmp / 3, s` (a million groups) 0.9-1.1 s against 0.06.
//!
//! Here each string of the scan's partitions gets one number, its rank among the distinct strings of all their
//! dictionaries: with one partition that is its code (nothing to merge), with several a merge of their sorted
//! dictionaries gives each partition's codes their numbers. A text key is then an integer key like any other:
//! the workers' groups grow across tasks and partitions, spill and are merged in hash partitions by as many
//! tasks as there are workers, and become strings once, when a group's row is made.
//!
//! The numbers keep the dictionaries' order (byte order), so a string's number is found by binary search
//! ([`TextKey::number_of`]): the groups the general path makes of rows not in a partition (the delta's, a
//! block that would raise an error) are cut into the same hash partitions by it. A string found in no
//! partition gets a number no string of them has, from its hash: such groups only ever meet each other.
//!
//! A merge of several partitions' dictionaries costs a comparison or two per string, which a selective query
//! over a table of many strings would pay on every run: the numbering is kept for the partitions it was made of
//! ([`NUMBERINGS_KEPT`] of them, held by weak references, so that a dropped table's partitions are freed; the
//! numbering itself goes at the next miss, or when one of the same table's newer partitions is kept). Past
//! [`NUMBERING_STRINGS_MAX`] strings nothing is numbered, and the aggregation takes the general path.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use numadb_storage::{ColumnData, DataType, Dictionary, Partition, Value};

use crate::aggregate::AggregateCall;
use crate::expr::Expr;

/// The numberings kept from one scan to the next (each for one column of one set of partitions).
const NUMBERINGS_KEPT: usize = 8;

/// The numbers of one text column's strings across a set of partitions.
struct Numbering {
    /// Per partition, each code's number. Empty with one partition, whose codes are the numbers.
    numbers: Vec<Box<[u32]>>,
    /// Each number's partition and code (empty with one partition).
    sources: Vec<(u32, u32)>,
}

/// A numbering kept for the partitions it was made of ([`NUMBERINGS_KEPT`]).
struct KeptNumbering {
    column: usize,
    partitions: Vec<Weak<Partition>>,
    numbering: Arc<Numbering>,
}

static NUMBERINGS: Mutex<Vec<KeptNumbering>> = Mutex::new(Vec::new());

/// One text GROUP BY key of a scan.
pub(crate) struct TextKey {
    column: usize,
    partitions: Vec<Arc<Partition>>,
    numbering: Arc<Numbering>,
    /// The strings numbered.
    strings: usize,
    /// Each number's string as a value, made the first time a group's row asks for it and shared by every row
    /// after (the slots made when a row first asks; none past [`SHARED_STRINGS_MAX`] strings):
    /// `SELECT DISTINCT bk % 500000, jmp / 3, s` made a million strings of 50 000, and freeing them took most of
    /// the time of the rows' projection.
    values: OnceLock<Box<[OnceLock<Value>]>>,
}

/// The most strings a scan's key shares its values of ([`TextKey::values`]): 3 MiB of slots.
const SHARED_STRINGS_MAX: usize = 1 << 16;

/// The most strings of all partitions' dictionaries a scan numbers when they are several: past that, their
/// merge (made on the session thread before the scan's tasks start, and kept only until the table changes) would
/// cost more than a selective query's whole scan, and the aggregation takes the general path instead. A merge of
/// two million strings took 0.35-1 s, where the query it was for (rows inserted since, nothing selected) took
/// 0.4-12 ms without it.
const NUMBERING_STRINGS_MAX: usize = 1 << 18;

/// The text columns of one scan's aggregation: its GROUP BY keys and its aggregates' arguments that are text
/// columns, numbered alike (`None`: not a text column).
#[derive(Default)]
pub(crate) struct TextKeys {
    /// Per GROUP BY key, then per aggregate (its argument).
    slots: Vec<Option<TextKey>>,
    /// The GROUP BY keys.
    keys: usize,
}

impl TextKeys {
    /// The numberings of the text columns among `group_by` and `aggregates`' arguments over `partitions` (a
    /// snapshot's, in order); `None` where some column's partitions hold too many strings to number
    /// ([`NUMBERING_STRINGS_MAX`]).
    pub(crate) fn new(
        group_by: &[Expr],
        aggregates: &[AggregateCall],
        partitions: &[Arc<Partition>],
    ) -> Option<TextKeys> {
        let columns = group_by.iter().map(Some).chain(aggregates.iter().map(|call| call.argument.as_ref()));
        let slots = columns
            .map(|column| match column {
                Some(Expr::Column { index, data_type: DataType::Text, .. }) => {
                    let numbering = numbering_of(*index, partitions)?;
                    let strings = match partitions {
                        [partition] => dictionary(partition, *index).map_or(0, Dictionary::len),
                        _ => numbering.sources.len(),
                    };
                    Some(Some(TextKey {
                        column: *index,
                        partitions: partitions.to_vec(),
                        numbering,
                        strings,
                        values: OnceLock::new(),
                    }))
                }
                _ => Some(None),
            })
            .collect::<Option<Vec<_>>>()?;
        Some(TextKeys { slots, keys: group_by.len() })
    }

    /// Whether [`TextKeys::new`] numbers these keys' and arguments' text columns over `partitions`, without
    /// numbering them (what EXPLAIN says of the merge).
    pub(crate) fn would_number(group_by: &[Expr], aggregates: &[AggregateCall], partitions: &[Arc<Partition>]) -> bool {
        let mut columns = group_by.iter().chain(aggregates.iter().filter_map(|call| call.argument.as_ref()));
        columns.all(|column| match column {
            Expr::Column { index, data_type: DataType::Text, .. } => is_numbered(*index, partitions),
            _ => true,
        })
    }

    /// Key `key`'s numbering, if it is a text column.
    pub(crate) fn key(&self, key: usize) -> Option<&TextKey> {
        self.slots[..self.keys].get(key).and_then(Option::as_ref)
    }

    /// The numbering of aggregate `aggregate`'s argument, if it is a text column.
    pub(crate) fn argument(&self, aggregate: usize) -> Option<&TextKey> {
        self.slots.get(self.keys + aggregate).and_then(Option::as_ref)
    }

    /// Per key, then per aggregate, the numbers of partition `partition`'s codes: `None` for a column that is not
    /// text, or whose codes are its numbers.
    pub(crate) fn numbers_in(&self, partition: usize) -> Vec<Option<&[u32]>> {
        self.slots
            .iter()
            .map(|key| key.as_ref().and_then(|key| key.numbering.numbers.get(partition)).map(|numbers| &numbers[..]))
            .collect()
    }
}

impl TextKey {
    /// The string numbered `number`.
    pub(crate) fn string(&self, number: u32) -> &str {
        let (partition, code) = match self.numbering.sources.get(number as usize) {
            Some(&(partition, code)) => (partition as usize, code),
            None => (0, number),
        };
        dictionary(&self.partitions[partition], self.column).map_or("", |dictionary| dictionary.get(code as usize))
    }

    /// The value of the string numbered `number`.
    pub(crate) fn value(&self, number: i64) -> Value {
        let shared = self.strings <= SHARED_STRINGS_MAX;
        let values =
            self.values.get_or_init(|| (0..if shared { self.strings } else { 0 }).map(|_| OnceLock::new()).collect());
        match values.get(number as usize) {
            Some(value) => value.get_or_init(|| Value::text(self.string(number as u32))).clone(),
            None => Value::text(self.string(number as u32)),
        }
    }

    /// The number of `text`: its rank among the strings of the partitions, or, for a string none of them holds,
    /// a negative number from its hash (the same for the same string).
    pub(crate) fn number_of(&self, text: &str) -> i64 {
        let count = if self.numbering.sources.is_empty() {
            self.partitions.first().and_then(|partition| dictionary(partition, self.column)).map_or(0, Dictionary::len)
        } else {
            self.numbering.sources.len()
        };
        let (mut low, mut high) = (0, count);
        while low < high {
            let middle = (low + high) / 2;
            match self.string(middle as u32).as_bytes().cmp(text.as_bytes()) {
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
                std::cmp::Ordering::Equal => return middle as i64,
            }
        }
        let mut hasher = foldhash::fast::FixedState::default().build_hasher();
        hasher.write(text.as_bytes());
        -1 - (hasher.finish() >> 2) as i64
    }
}

/// `partition`'s dictionary of text column `column` (none if it holds the column otherwise).
fn dictionary(partition: &Partition, column: usize) -> Option<&Dictionary> {
    match partition.columns().get(column).map(|chunk| chunk.data()) {
        Some(ColumnData::Text { dictionary, .. }) => Some(dictionary),
        _ => None,
    }
}

/// The numbering of column `column`'s strings over `partitions`: kept from an earlier scan of the same
/// partitions, or made (and kept); `None` past [`NUMBERING_STRINGS_MAX`] strings.
/// Whether a text column of `partitions` has few enough strings to be numbered ([`NUMBERING_STRINGS_MAX`]).
fn is_numbered(column: usize, partitions: &[Arc<Partition>]) -> bool {
    let strings = || partitions.iter().map(|partition| dictionary(partition, column).map_or(0, Dictionary::len));
    partitions.len() <= 1 || strings().sum::<usize>() <= NUMBERING_STRINGS_MAX
}

fn numbering_of(column: usize, partitions: &[Arc<Partition>]) -> Option<Arc<Numbering>> {
    if partitions.len() <= 1 {
        return Some(Arc::new(Numbering { numbers: Vec::new(), sources: Vec::new() }));
    }
    if !is_numbered(column, partitions) {
        return None;
    }
    let same = |kept: &KeptNumbering| {
        kept.column == column
            && kept.partitions.len() == partitions.len()
            && kept.partitions.iter().zip(partitions).all(|(kept, partition)| std::ptr::eq(kept.as_ptr(), &**partition))
    };
    {
        let mut kept = NUMBERINGS.lock().unwrap_or_else(|p| p.into_inner());
        // A weak reference keeps its partition's allocation, so an address matched is the partition itself; a
        // numbering of a partition since dropped is no use to anyone.
        kept.retain(|numbering| numbering.partitions.iter().all(|partition| partition.strong_count() > 0));
        if let Some(position) = kept.iter().position(same) {
            let found = kept.remove(position);
            let numbering = Arc::clone(&found.numbering);
            kept.push(found);
            return Some(numbering);
        }
    }
    let numbering = Arc::new(merge_dictionaries(
        &partitions.iter().map(|partition| dictionary(partition, column)).collect::<Vec<_>>(),
    ));
    let mut kept = NUMBERINGS.lock().unwrap_or_else(|p| p.into_inner());
    // The same table's column numbered over other partitions (before rows were added: its first partition is
    // the same) is no use once these are: it goes, and so does one made meanwhile of these very partitions.
    let first = Arc::as_ptr(&partitions[0]);
    kept.retain(|numbering| {
        numbering.column != column || numbering.partitions.first().is_none_or(|partition| partition.as_ptr() != first)
    });
    if kept.len() >= NUMBERINGS_KEPT {
        kept.remove(0);
    }
    kept.push(KeptNumbering {
        column,
        partitions: partitions.iter().map(Arc::downgrade).collect(),
        numbering: Arc::clone(&numbering),
    });
    Some(numbering)
}

/// Numbers the distinct strings of sorted `dictionaries` in order, by merging them.
fn merge_dictionaries(dictionaries: &[Option<&Dictionary>]) -> Numbering {
    let mut numbers: Vec<Box<[u32]>> =
        dictionaries.iter().map(|dictionary| vec![0; dictionary.map_or(0, |d| d.len())].into_boxed_slice()).collect();
    let mut sources: Vec<(u32, u32)> = Vec::new();
    // The next string of each dictionary, smallest first.
    let mut heads: BinaryHeap<Reverse<(&str, usize)>> = dictionaries
        .iter()
        .enumerate()
        .filter_map(|(partition, dictionary)| {
            dictionary.filter(|d| !d.is_empty()).map(|d| Reverse((d.get(0), partition)))
        })
        .collect();
    let mut cursors = vec![0usize; dictionaries.len()];
    let mut last: Option<&str> = None;
    while let Some(Reverse((text, partition))) = heads.pop() {
        let code = cursors[partition];
        if last != Some(text) {
            sources.push((partition as u32, code as u32));
            last = Some(text);
        }
        numbers[partition][code] = (sources.len() - 1) as u32;
        cursors[partition] += 1;
        if let Some(dictionary) = dictionaries[partition]
            && cursors[partition] < dictionary.len()
        {
            heads.push(Reverse((dictionary.get(cursors[partition]), partition)));
        }
    }
    Numbering { numbers, sources }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numadb_placement::Policy;
    use numadb_storage::{ColumnDef, ColumnInput};

    /// A partition of one text column holding `strings` (`None`: NULL).
    fn partition(index: usize, strings: &[Option<&str>]) -> Arc<Partition> {
        let values = strings.iter().map(|s| s.map_or(Value::Null, Value::text)).collect();
        let schema = [ColumnDef::new("s", DataType::Text, true)];
        let built = Partition::build(index, 0, &schema, vec![ColumnInput::Values(values)], &[Policy::OsDefault]);
        Arc::new(built.unwrap())
    }

    fn key(partitions: &[Arc<Partition>]) -> TextKeys {
        TextKeys::new(&[Expr::Column { index: 0, data_type: DataType::Text }], &[], partitions).unwrap()
    }

    #[test]
    fn each_string_of_every_partition_has_its_rank_as_its_number() {
        let partitions = vec![
            partition(0, &[Some("d"), Some("b"), Some("d")]),
            partition(1, &[Some("e"), None, Some("a"), Some("b"), Some("")]),
            partition(2, &[None, None]),
            partition(3, &[Some("a")]),
        ];
        let keys = key(&partitions);
        let text = keys.key(0).unwrap();
        // The union, in byte order: "", a, b, d, e.
        let union = ["", "a", "b", "d", "e"];
        for (number, string) in union.iter().enumerate() {
            assert_eq!(text.string(number as u32), *string);
            assert_eq!(text.number_of(string), number as i64);
            assert_eq!(text.value(number as i64), Value::text(string));
        }
        // Each partition's codes (its dictionary in order) and their numbers.
        assert_eq!(keys.numbers_in(0), vec![Some(&[2, 3][..])]);
        assert_eq!(keys.numbers_in(1), vec![Some(&[0, 1, 2, 4][..])]);
        assert_eq!(keys.numbers_in(2), vec![Some(&[][..])]);
        assert_eq!(keys.numbers_in(3), vec![Some(&[1][..])]);
        // A string of no partition: a negative number, the same each time, and not another string's.
        let c = text.number_of("c");
        assert!(c < 0 && c == text.number_of("c") && c != text.number_of("zz"));
        // One partition: its codes are the numbers, and nothing is renumbered.
        let one = key(&partitions[1..2]);
        assert_eq!(one.numbers_in(0), vec![None]);
        assert_eq!(one.key(0).unwrap().number_of("e"), 3);
        assert_eq!(one.key(0).unwrap().string(0), "");
        // A key that is not a text column has no numbering.
        let int_key =
            TextKeys::new(&[Expr::Column { index: 0, data_type: DataType::Integer }], &[], &partitions).unwrap();
        assert!(int_key.key(0).is_none());
        assert_eq!(int_key.numbers_in(0), vec![None]);
    }

    #[test]
    fn a_numbering_is_kept_for_its_partitions_while_they_live() {
        let partitions = vec![partition(0, &[Some("x"), Some("y")]), partition(1, &[Some("w")])];
        let first = Arc::clone(&key(&partitions).key(0).unwrap().numbering);
        let again = Arc::clone(&key(&partitions).key(0).unwrap().numbering);
        assert!(Arc::ptr_eq(&first, &again), "the second scan of the same partitions made its numbering again");
        // Other partitions (the same strings) have a numbering of their own.
        let others = vec![partition(0, &[Some("x"), Some("y")]), partition(1, &[Some("w")])];
        let other = Arc::clone(&key(&others).key(0).unwrap().numbering);
        assert!(!Arc::ptr_eq(&first, &other));
        // Once the partitions are dropped, their numbering is let go at the next scan of any.
        let weak = Arc::downgrade(&first);
        drop((first, again, partitions));
        let _ = key(&others);
        assert!(weak.upgrade().is_none(), "a numbering of dropped partitions was kept");
    }
}
