//! Aggregation over integer keys and arguments a block at a time (text columns as keys too, by their strings'
//! numbers across the scan's partitions: [`crate::textkeys`]).
//!
//! The general path ([`crate::run`]'s `group_row`) builds a row of [`Value`]s for every selected row, evaluates
//! each key and argument by walking its expression tree, and looks the key up as a `Vec<Value>`. For
//! `GROUP BY "C1" % 100` over millions of rows that is nearly all the time. Here the keys and arguments are
//! integer expressions ([`crate::vector::is_int_expr`]) evaluated once per block into arrays, a group is found by
//! a fixed-size key of integers, and each aggregate keeps what its function needs of a count, a sum, a minimum and
//! a maximum (every aggregate's words side by side per group), or for DISTINCT the set of values: what
//! [`Accumulator::add_ints`] and [`Accumulator::add`] take at the end of the task.
//!
//! A scan's tasks that run on one worker add to that worker's groups, and the groups are merged by as many tasks as there are workers, each
//! taking one hash partition of every worker's groups ([`IntGroups::into_parts`], [`IntGroups::merge_part`]) and
//! finishing its rows ([`IntGroups::into_rows`]): with groups per task, each of 23 tasks over 5 million rows
//! found most of `GROUP BY x % 200000`'s groups again, and one merge per domain added them all up alone. A
//! worker's table that grows past its bound spills its groups into those partitions and starts afresh
//! ([`IntGroups::spill_into`]), as DuckDB's radix-partitioned aggregation does: with millions of groups found
//! through the hash index, a row then finds its group in a table the caches hold, and so does each partition's
//! merge. A table found through its direct table is allowed more (a lookup there is one load, and the states
//! are asked for ahead of the loops that add to them), up to a million groups or 32 MiB of states.
//!
//! Results are those of the general path: the same groups and values. Which rows raise an error is the same too
//! (unselected and NULL rows are never evaluated); when a block would raise one, the caller runs that block on the
//! general path instead, so that the error is the one the general path reports first. Nothing of that block has
//! been added by then: every key and argument is evaluated before any group is touched.

use std::cmp::Ordering;
use std::hash::BuildHasher as _;

use hashbrown::{HashTable, hash_table};

use numadb_storage::bitpack::{self, BLOCK_ROWS, BlockMask};
use numadb_storage::{DataType, Partition, compare_doubles};

use crate::aggregate::{
    Accumulator, AggregateCall, AggregateFunction, CompensatedSum, GroupMap, GroupState, PartialAggregate,
    int_sum_value,
};
use crate::distinct::IntSet;
use crate::error::ExecError;
use crate::expr::{BinaryOp, Expr};
use crate::plan::ScanOutput;
use crate::run::for_each_set;
use crate::textkeys::{TextKey, TextKeys};
use crate::vector::{IntBlock, double_bits_block_of, int_block_of, is_double_expr, is_group_key, is_int_expr};
use numadb_storage::Value;

/// The most GROUP BY keys this path takes.
const KEYS_MAX: usize = 4;

/// A group's key: its integers, and which of them are NULL (bit `k` for key `k`; the value is then 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IntKey {
    values: [i64; KEYS_MAX],
    nulls: u8,
}

impl std::hash::Hash for IntKey {
    /// One word for the hasher to finish: the key's words folded by multiplying (every row's key is hashed, and
    /// hashing the 33 bytes as bytes took an eighth of a GROUP BY's time).
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.folded());
    }
}

impl IntKey {
    /// The key's words folded into one by multiplying.
    #[inline]
    fn folded(&self) -> u64 {
        let mut folded = u64::from(self.nulls);
        for value in self.values {
            folded = (folded ^ value as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(23);
        }
        folded
    }

    /// Which of `parts` hash partitions the key falls in ([`IntGroups::into_parts`]): its folded words mixed and
    /// mapped onto `0..parts` by their high bits.
    fn part(&self, parts: usize) -> usize {
        let mut folded = self.folded();
        folded ^= folded >> 33;
        folded = folded.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
        folded ^= folded >> 33;
        ((u128::from(folded) * parts as u128) >> 64) as usize
    }

    /// The key of one value (`None`: NULL).
    fn one(value: Option<i64>) -> IntKey {
        let mut key = IntKey { values: [0; KEYS_MAX], nulls: 0 };
        match value {
            Some(value) => key.values[0] = value,
            None => key.nulls = 1,
        }
        key
    }

    /// The key of a general-path group whose key values are those [`IntGroups`] groups by (integers, booleans,
    /// strings of `text`'s keys and NULLs), so that it falls in the same partition as the same group found a
    /// block at a time.
    fn of_values(values: &[Value], text: &TextKeys) -> IntKey {
        let mut key = IntKey { values: [0; KEYS_MAX], nulls: 0 };
        for (k, value) in values.iter().enumerate().take(KEYS_MAX) {
            key.values[k] = match value {
                Value::Null => {
                    key.nulls |= 1 << k;
                    0
                }
                Value::Int(value) => *value,
                Value::Bool(value) => i64::from(*value),
                Value::Double(value) => value.to_bits() as i64,
                Value::Text(value) => text.key(k).map_or(0, |key| key.number_of(value)),
                _ => 0,
            };
        }
        key
    }
}

/// Groups' keys side by side, each in as many words as the aggregation has keys (not [`KEYS_MAX`]), and a byte of
/// NULL flags per group once some key is NULL: what a table's groups and the partitions they spill into hold.
///
/// As [`IntKey`]s (40 bytes, whatever the number of keys), the groups of `GROUP BY "C1"` (5 million rows, 3.16
/// million groups) spilled 240 MB of keys and states per query, most of it memory freshly faulted in: spilling
/// took two thirds of the scan tasks' time. A spill writes to every one of its partitions at once, so each list
/// is as few streams as it can be: the flags are kept only from the first NULL key on.
#[derive(Debug, Clone)]
struct KeyList {
    /// Keys per group.
    width: usize,
    /// Groups held.
    len: usize,
    /// Each group's key values, `width` of them.
    values: Vec<i64>,
    /// Each group's NULL flags ([`IntKey::nulls`]); empty while no key has been NULL.
    nulls: Vec<u8>,
}

impl KeyList {
    fn new(width: usize) -> KeyList {
        KeyList { width, len: 0, values: Vec::new(), nulls: Vec::new() }
    }

    /// Groups held.
    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn push(&mut self, key: &IntKey) {
        // Not `extend_from_slice` for one key: a call to memcpy per group.
        if self.width == 1 {
            self.values.push(key.values[0]);
        } else {
            self.values.extend_from_slice(&key.values[..self.width]);
        }
        if key.nulls != 0 && self.nulls.is_empty() {
            self.nulls.resize(self.len, 0);
        }
        if !self.nulls.is_empty() || key.nulls != 0 {
            self.nulls.push(key.nulls);
        }
        self.len += 1;
    }

    /// Group `group`'s NULL flags.
    #[inline]
    fn nulls(&self, group: usize) -> u8 {
        if self.nulls.is_empty() { 0 } else { self.nulls[group] }
    }

    /// Group `group`'s key.
    #[inline]
    fn get(&self, group: usize) -> IntKey {
        // Word by word, not `copy_from_slice`: that was a call to memcpy, whose narrow stores the key's wide loads
        // right after waited on (most of a spill's time).
        let row = &self.values[group * self.width..][..self.width];
        IntKey { values: std::array::from_fn(|k| row.get(k).copied().unwrap_or(0)), nulls: self.nulls(group) }
    }

    /// Group `group`'s key hashed by `hasher`: what the index ([`IntGroups::index`]) rehashes its buckets with.
    #[inline]
    fn hash_of(&self, hasher: &foldhash::fast::RandomState, group: u32) -> u64 {
        hasher.hash_one(self.get(group as usize))
    }

    /// Whether group `group`'s key is `key`.
    #[inline]
    fn is(&self, group: usize, key: &IntKey) -> bool {
        let values_match = if self.width == 1 {
            self.values[group] == key.values[0]
        } else {
            self.values[group * self.width..][..self.width] == key.values[..self.width]
        };
        values_match && self.nulls(group) == key.nulls
    }

    /// The keys in order.
    fn iter(&self) -> impl Iterator<Item = IntKey> + '_ {
        (0..self.len()).map(|group| self.get(group))
    }

    fn reserve(&mut self, groups: usize) {
        self.values.reserve(groups * self.width);
        if !self.nulls.is_empty() {
            self.nulls.reserve(groups);
        }
    }

    fn clear(&mut self) {
        self.values.clear();
        self.nulls.clear();
        self.len = 0;
    }
}

/// One hash partition of a task's groups ([`IntGroups::into_parts`]): the groups' keys and states side by side,
/// with no index, for the partition's merge task to add up.
pub(crate) struct GroupsPart {
    keys: KeyList,
    /// Each group's state words, [`IntGroups::stride`] of them per group.
    states: Vec<u64>,
    /// Each group's distinct value sets, one per aggregate (none without a DISTINCT aggregate).
    values: Vec<IntSet>,
    /// The shape of the task's last direct table, for the merge's ([`IntGroups::merge_part`]).
    shape: Option<[KeyShape; KEYS_MAX]>,
    /// Whether each key is here once: the groups were cut from one table, not spilled from it time after time.
    unique: bool,
}

impl GroupsPart {
    fn empty(width: usize, shape: Option<[KeyShape; KEYS_MAX]>, unique: bool) -> GroupsPart {
        GroupsPart { keys: KeyList::new(width), states: Vec::new(), values: Vec::new(), shape, unique }
    }
}

/// Appends groups (`keys`, their `stride` state words each, and `aggregates` distinct value sets each if there
/// are any) to the partitions `out`, each key to partition `part_of(key)`: its hash partition ([`IntKey::part`])
/// or its range ([`KeyRange::part`]).
fn cut_into(
    out: &mut [GroupsPart],
    part_of: impl Fn(&IntKey) -> usize,
    keys: &KeyList,
    states: &[u64],
    values: Vec<IntSet>,
    stride: usize,
    aggregates: usize,
) {
    let parts = out.len();
    let distinct = !values.is_empty();
    // Each partition's room is made once, from counts: grown by doubling, cutting `GROUP BY x % 200000`'s
    // groups spent a third of its time copying the vectors it had filled (4.6 -> 3.2 ms per merge task).
    let part_of: Vec<u32> = keys.iter().map(|key| part_of(&key) as u32).collect();
    let mut counts = vec![0usize; parts];
    for &part in &part_of {
        counts[part as usize] += 1;
    }
    for (part, &count) in out.iter_mut().zip(&counts) {
        part.keys.reserve(count);
        part.states.reserve(count * stride);
        if distinct {
            part.values.reserve(count * aggregates);
        }
    }
    let mut values = values.into_iter();
    for (group, (key, &part)) in keys.iter().zip(&part_of).enumerate() {
        let part = &mut out[part as usize];
        part.keys.push(&key);
        part.states.extend_from_slice(&states[group * stride..][..stride]);
        if distinct {
            part.values.extend(values.by_ref().take(aggregates));
        }
    }
}

/// Splits a general-path partial aggregate of the groups [`IntGroups`] would find into `parts` partitions as
/// [`IntGroups::into_parts`] splits those it found (no partitions at all when it has no groups).
pub(crate) fn split_partial(partial: PartialAggregate, parts: usize, text: &TextKeys) -> Vec<PartialAggregate> {
    if partial.groups.is_empty() {
        // No partition has any (the usual case: the tasks' groups are all their workers').
        return Vec::new();
    }
    let mut out: Vec<PartialAggregate> = (0..parts).map(|_| PartialAggregate::default()).collect();
    if parts == 1 {
        out[0] = partial;
        return out;
    }
    for (key, state) in partial.groups {
        out[IntKey::of_values(&key, text).part(parts)].groups.insert(key, state);
    }
    out
}

/// Where one aggregate's state lies among a group's words ([`IntGroups::states`]), and what it keeps there: a
/// count of its values, then, for a sum, the sum's low and high words, for a minimum or a maximum, that value.
/// A DISTINCT aggregate keeps nothing there (its values are a set).
#[derive(Debug, Clone, Copy)]
struct StateSlot {
    offset: usize,
    kind: Kind,
}

impl Kind {
    /// The words of state this kind keeps per group.
    fn words(self) -> usize {
        match self {
            Kind::Count => 1,
            Kind::Sum => 3,
            Kind::Min | Kind::Max | Kind::DoubleMin | Kind::DoubleMax => 2,
            Kind::DoubleSum => 4,
            Kind::Distinct => 0,
        }
    }

    /// The state of a group with no values yet: a count of 0, a sum of 0, and extremes any value replaces.
    fn empty(self) -> &'static [u64] {
        match self {
            Kind::Count => &[0],
            Kind::Sum => &[0, 0, 0],
            Kind::Min => &[0, i64::MAX as u64],
            Kind::Max => &[0, i64::MIN as u64],
            // A double's extreme is replaced by the first value (the count is 0 until then).
            Kind::DoubleMin | Kind::DoubleMax => &[0, 0],
            Kind::DoubleSum => &[0, 0, 0, 0],
            Kind::Distinct => &[],
        }
    }
}

/// The sum kept in two words from `words[0]` (low, then high).
#[inline(always)]
fn sum_of(words: &[u64]) -> i128 {
    (u128::from(words[1]) << 64 | u128::from(words[0])) as i128
}

/// Adds `value` to the sum kept in two words from `words[0]`.
#[inline(always)]
fn add_to_sum(words: &mut [u64], value: i128) {
    let sum = sum_of(words) + value;
    words[0] = sum as u64;
    words[1] = (sum >> 64) as u64;
}

/// The most groups in all for which [`IntGroups::add_block`] adds each group's rows in a pass of its own: the
/// passes' work grows with the groups, the row-by-row loop's does not. On 20 million rows (2 workers), `GROUP BY
/// "C2" % n` took 48 ms against 67 row by row for 2 groups (COUNT(*) and SUM), and with COUNT(*), SUM, MIN and
/// MAX 95 against 104 for 4 groups, but 155 against 108 for 8.
const FEW_GROUPS: usize = 4;

/// Adds a block's `(count, sum, least, greatest)` of one group's values to its state of an aggregate of `kind`
/// (COUNT, SUM, MIN or MAX).
fn add_summary(state: &mut [u64], kind: Kind, (count, sum, min, max): (i64, i128, i64, i64)) {
    if count == 0 {
        return;
    }
    state[0] += count as u64;
    match kind {
        Kind::Sum => add_to_sum(&mut state[1..3], sum),
        Kind::Min => state[1] = (state[1] as i64).min(min) as u64,
        Kind::Max => state[1] = (state[1] as i64).max(max) as u64,
        _ => {}
    }
}

/// The rows of `mask` whose group is `group`.
#[inline(always)]
fn rows_of_group_portable(groups: &[u32; BLOCK_ROWS], group: u32, mask: &BlockMask) -> BlockMask {
    // Plain loops: `std::array::from_fn`'s closure was compiled apart, without the wrapper's instruction set, and
    // took a tenth of a GROUP BY of four groups.
    let mut rows = [0u64; bitpack::MASK_WORDS];
    for (word, rows) in rows.iter_mut().enumerate() {
        let groups = &groups[word * 64..word * 64 + 64];
        let mut bits = 0u64;
        for (bit, &row_group) in groups.iter().enumerate() {
            bits |= u64::from(row_group == group) << bit;
        }
        *rows = bits & mask[word];
    }
    rows
}

numadb_storage::on_every_isa!(rows_of_group_on(
    groups: &[u32; BLOCK_ROWS],
    group: u32,
    mask: &BlockMask
) -> BlockMask = rows_of_group_portable);

/// Whether [`IntGroups`] computes this aggregation: at most [`KEYS_MAX`] keys and every key integer arithmetic
/// or a text or boolean column (grouped by its strings' numbers, [`TextKeys`]; or by 0 and 1);
/// every aggregate `COUNT(*)`, or COUNT, SUM, AVG, MIN or MAX (DISTINCT or not) of integer arithmetic, or COUNT,
/// MIN or MAX (DISTINCT or not) of a text column (by its strings' numbers, which keep their order), or COUNT, SUM,
/// AVG, MIN or MAX (not DISTINCT) of a double column (SUM and AVG compensated as the general path's are); a
/// FILTER only where it is evaluated a block at a time ([`filters_per_block`]).
pub(crate) fn applies(group_by: &[Expr], aggregates: &[AggregateCall]) -> bool {
    group_by.len() <= KEYS_MAX
        && group_by.iter().all(is_group_key)
        && aggregates.iter().all(|call| {
            call.filter.as_ref().is_none_or(filters_per_block)
                && call.extra.is_empty()
                && call.order_by.is_empty()
                && match call.function {
                    AggregateFunction::CountStar => call.argument.is_none(),
                    AggregateFunction::Count | AggregateFunction::Min | AggregateFunction::Max => {
                        call.argument.as_ref().is_some_and(|argument| {
                            is_int_expr(argument)
                                || matches!(argument, Expr::Column { data_type: DataType::Text, .. })
                                || is_double_argument(argument) && !call.distinct
                        })
                    }
                    AggregateFunction::Sum | AggregateFunction::Avg => call.argument.as_ref().is_some_and(|argument| {
                        is_int_expr(argument) || is_double_argument(argument) && !call.distinct
                    }),
                    _ => false,
                }
        })
}

/// Whether an aggregate's `FILTER (WHERE filter)` is compiled ([`crate::filter::compile_where`]) and evaluated
/// on the selected rows of each block ([`crate::filter::Filter::true_rows_among`]), its TRUE rows narrowing the
/// rows that aggregate adds: where it is not volatile (how many times it runs is then not the row path's), holds
/// no subquery, and either cannot fail or has no AND, OR or CASE. The compiled filter orders an AND's parts by
/// cost and stops at NULL as at FALSE, where the row path and PostgreSQL evaluate them in the order written and
/// stop at FALSE: with a part that may fail, `a > 5 AND 10 / b > 1` would skip the division on a row whose `a` is
/// NULL and miss PostgreSQL's 22012. An error the block evaluation raises sends the block down the row path, so
/// only errors it misses matter. Row by row, `avg("C1") FILTER (WHERE "C2" < 1000000)` and a `count(*) FILTER`
/// beside it took 1 s over 20 million rows (DuckDB: 39 ms).
pub(crate) fn filters_per_block(filter: &Expr) -> bool {
    let ordered =
        |node: &Expr| matches!(node, Expr::Binary { op: BinaryOp::And | BinaryOp::Or, .. } | Expr::Case { .. });
    !filter.is_volatile()
        && !filter.any_node(&|node| matches!(node, Expr::Subquery { .. } | Expr::QuantifiedSubquery { .. }))
        && (!crate::filter::expr_may_fail(filter) || !filter.any_node(&ordered))
}

/// Whether `expr` is a double column or double arithmetic ([`is_double_expr`]), whose values [`IntGroups`]
/// aggregates by their bits (not DISTINCT: equal doubles, 0 and -0, can differ in their bits). Row by row,
/// `sum("C1"::double precision * 0.5)` over 20 million rows took 573 ms (DuckDB: 15).
fn is_double_argument(expr: &Expr) -> bool {
    matches!(expr, Expr::Column { data_type: DataType::Double, .. })
        || expr.data_type() == DataType::Double && is_double_expr(expr)
}

/// A task's groups.
pub(crate) struct IntGroups {
    keys: usize,
    aggregates: usize,
    /// Whether some aggregate counts distinct values, which each group keeps sets of ([`IntGroups::values`]).
    distinct_sets: bool,
    /// Groups by key, for blocks whose keys span too many values for the direct table and for merging: kept up
    /// to date lazily ([`IntGroups::ensure_index`]), as the direct table finds a block's groups without it, and a
    /// GROUP BY of a few thousand groups per task spent a third of its time inserting them here.
    ///
    /// The index holds group numbers alone, and compares keys in `order`: 4 bytes a bucket, where a map from
    /// [`IntKey`] took 48, so that an index of [`SPILL_GROUPS_HASHED`] groups is 160 KiB, not 1.5 MiB.
    index: HashTable<u32>,
    /// The hasher of the index's keys.
    hasher: foldhash::fast::RandomState,
    /// The groups (a prefix of `order`) that `index` holds.
    indexed: usize,
    /// Each group's key, in the order the groups were found.
    order: KeyList,
    /// Each group's state, [`IntGroups::stride`] words per group, every aggregate's in turn
    /// ([`IntGroups::slots`]). A GROUP BY of many groups (200 000 over 5 million rows) reaches one group's state
    /// at random per row: kept per aggregate, in a 48-byte summary of a count, a sum, a minimum and a maximum
    /// whatever the function, COUNT(*) and SUM took two cache lines per row out of 19 MB per worker, and now take
    /// one out of 6.4 MB (95 -> 60 ms). Few groups lose nothing: each aggregate's loop reads the row's base
    /// ([`IntGroups::bases`]), and `GROUP BY "C1" % 100` took 9.8 ms either way.
    states: Vec<u64>,
    /// The words of a group's state.
    stride: usize,
    /// Each aggregate's place in a group's state.
    slots: Vec<StateSlot>,
    /// A new group's state.
    empty: Vec<u64>,
    /// `groups[row] * stride` for each row of the block being added: each aggregate's loop adds its offset, and
    /// multiplies nothing per row.
    bases: Box<[usize; BLOCK_ROWS]>,
    /// The distinct values per group and aggregate (empty sets for the others; none at all without a DISTINCT
    /// aggregate, as a GROUP BY of millions of groups would otherwise hold millions of empty sets).
    values: Vec<IntSet>,
    /// Bytes the evaluation decodes: the caller accounts the columns' blocks itself.
    reads: Vec<u64>,
    /// The group of each row of the block being added.
    groups: Box<[u32; BLOCK_ROWS]>,
    /// The table from key offsets to groups ([`IntGroups::find_groups`]), kept from block to block while the
    /// blocks' keys fall within its shape: a group's index never changes, so neither does its slot.
    direct: Vec<u32>,
    /// The shape `direct` was laid out for: per key, its smallest value and its slots (the last one NULL's when
    /// the key has one); `None` before the first table.
    direct_shape: Option<[KeyShape; KEYS_MAX]>,
    /// The hash partitions the groups are spilled into when the table grows past its bound
    /// ([`IntGroups::spill_into`]; 0: never).
    spill_parts: usize,
    /// The groups spilled so far, cut into `spill_parts` hash partitions as [`IntGroups::into_parts`] cuts them
    /// (empty before the first spill).
    spilled: Vec<GroupsPart>,
    /// Groups spilled so far, counted once per spill that moved them.
    groups_spilled: u64,
    /// Whether some group may have no slot in the direct table (found through the index, or left out when the
    /// table was laid out anew), until the next spill.
    outside_direct: bool,
    /// Rows added since the last spill, and the groups placed anew in direct tables laid out since
    /// ([`RELAYOUT_GROUPS_PER_ROW`]).
    rows_added: u64,
    relaid_groups: u64,
}

/// The state words of a table's groups from which [`IntGroups::find_groups`] asks for each row's state ahead of
/// the aggregates' loops: 256 KiB, past what the first-level cache holds.
const PREFETCH_STATE_WORDS: usize = 1 << 15;

/// The most slots of the table from key offsets to groups: 4 MiB of group numbers. A row's slot and state are
/// then often past the nearer caches, but a lookup is one load, not a hash and a probe; and the groups of a key
/// that spans up to a million values are merged in ranges of it ([`KeyRange`]), no key hashed. At 2^18 slots,
/// `GROUP BY "C1" % 500000` (5 million rows, 2 workers) went through the hash index and spilled nearly every row:
/// 270-330 ms, against 61-82 ms now (DuckDB: 98); `% 1000000`: 345-395 ms, now 152-162 (DuckDB: 140).
const DIRECT_SLOTS: usize = 1 << 20;

/// The groups from which a table whose block's keys fall too far from the direct table's for one table to cover
/// both spills them, rather than lays out a table for the block alone ([`IntGroups::find_groups`]).
const RELAYOUT_SPILL_GROUPS: usize = 1 << 16;

/// Groups a table may place anew in the direct tables it lays out, per row added since its last spill, beyond
/// [`RELAYOUT_GROUPS_FREE`]; past that a block whose keys fall outside the direct table goes through the index
/// ([`IntGroups::find_groups`]). `SELECT DISTINCT bk % 500000, jmp / 3` (1 million rows, a million pairs, each
/// block's pairs spanning fewer slots than a table has but never the table before) laid out a table for every
/// block, placing every group found so far each time: 900 ms of task time.
const RELAYOUT_GROUPS_PER_ROW: u64 = 2;

/// See [`RELAYOUT_GROUPS_PER_ROW`].
const RELAYOUT_GROUPS_FREE: u64 = 1 << 16;

/// The most slots per group of the direct table a merge lays out ([`IntGroups::merge_part`]).
const MERGE_SLOTS_PER_GROUP: usize = 8;

/// The groups a table found through its hash index holds before they are spilled ([`IntGroups::spill_into`]):
/// as many as an index of 2^15 buckets takes (7/8 of them). A worker's table of `GROUP BY "C1"`'s 2.6 million
/// groups (of 5 million rows) was 350 MiB, and every row's lookup waited on memory; spilled at 2^16 groups, whose
/// index then had 2^17 buckets of 48 bytes (a key and its group), the lookups still missed the caches, and the
/// scan took 500 ms of task time instead of 365 (2 workers). (Measured when keys were [`IntKey`]s in the index
/// itself; its buckets are now 4 bytes, and a group's key 8 bytes per key column.)
const SPILL_GROUPS_HASHED: usize = 28672;

/// The groups a table found through its direct table alone holds before they are spilled: their states (32
/// bytes each for COUNT(*) and SUM) are all a row touches, and a table covers every group of `GROUP BY x %
/// 1000000`. Spilled at 2^15 groups, `GROUP BY x % 200000` took 160 ms instead of 38 (5 million rows, 2
/// workers): nearly every row was spilled, and merged again through the index. Fewer groups with larger states:
/// [`SPILL_STATE_WORDS_DIRECT`].
const SPILL_GROUPS_DIRECT: usize = 1 << 20;

/// The state words a table found through its direct table alone holds before it is spilled (32 MiB, the states
/// of [`SPILL_GROUPS_DIRECT`] groups of COUNT(*) and SUM), unless that is fewer than [`SPILL_GROUPS_DIRECT_MIN`]
/// groups: a worker's table of many aggregates stays within that.
const SPILL_STATE_WORDS_DIRECT: usize = 1 << 22;

/// The groups a table found through its direct table alone holds before it is spilled, however large their
/// states; and with DISTINCT aggregates, whose sets of values its groups keep besides.
const SPILL_GROUPS_DIRECT_MIN: usize = 1 << 18;

/// The slots of one key in the table from key offsets to groups: `values` values from `low` on, then one slot
/// for NULL if `null`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct KeyShape {
    low: i64,
    values: usize,
    null: bool,
}

impl KeyShape {
    /// The shape with the slots of both.
    fn union(&self, other: &KeyShape) -> KeyShape {
        let null = self.null || other.null;
        match (self.values, other.values) {
            (0, _) => KeyShape { null, ..*other },
            (_, 0) => KeyShape { null, ..*self },
            _ => {
                let low = self.low.min(other.low);
                let high =
                    (i128::from(self.low) + self.values as i128).max(i128::from(other.low) + other.values as i128);
                let values = usize::try_from(high - i128::from(low)).unwrap_or(usize::MAX).min(DIRECT_SLOTS + 1);
                KeyShape { low, values, null }
            }
        }
    }

    /// Whether every value and NULL of `other` has its slot here.
    fn covers(&self, other: &KeyShape) -> bool {
        let (low, high) = (i128::from(self.low), i128::from(self.low) + self.values as i128);
        let (other_low, other_high) = (i128::from(other.low), i128::from(other.low) + other.values as i128);
        (other.values == 0 || (other_low >= low && other_high <= high)) && (!other.null || self.null)
    }
}

/// The values of a GROUP BY's one key that the workers' groups span, where each worker found all its groups
/// through its direct table ([`IntGroups::direct_shape_of_groups`]): the merge's partitions are then ranges of
/// them ([`IntGroups::into_parts`]), not hash partitions. A merge task's partition is then a short range that
/// its own direct table covers ([`IntGroups::merge_part`]), and no key is hashed, cutting or merging: for
/// `GROUP BY x % 200000` over 5 million rows (2 workers), each merge task spent 3.2 ms cutting and 3.6 ms merging
/// its 32 hash partitions, whose keys, spread over the whole range, went through the index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct KeyRange(KeyShape);

/// The most slots a [`KeyRange`] spans: beyond, the workers' keys are far apart (each worker's direct table
/// spans [`DIRECT_SLOTS`] at most), most ranges would be empty, and a few merge tasks would do all the work.
const KEY_RANGE_SLOTS: usize = 4 * DIRECT_SLOTS;

impl KeyRange {
    /// The range of `tables`' groups, if each holds all of its groups in its direct table (tables without
    /// groups aside), and the range spans no more than [`KEY_RANGE_SLOTS`].
    pub(crate) fn of<'t>(tables: impl IntoIterator<Item = &'t IntGroups>) -> Option<KeyRange> {
        let (mut low, mut high, mut null, mut any) = (i128::MAX, i128::MIN, false, false);
        for table in tables {
            // A table with no groups left, but groups spilled (by its last block), is not one without groups: it
            // has no range, and its spilled groups must be merged.
            if table.order.is_empty() && table.spilled.is_empty() {
                continue;
            }
            let shape = table.direct_shape_of_groups()?;
            if shape.values > 0 {
                low = low.min(i128::from(shape.low));
                high = high.max(i128::from(shape.low) + shape.values as i128);
            }
            null |= shape.null;
            any = true;
        }
        if !any {
            return None;
        }
        let values = if high > low { usize::try_from(high - low).ok()? } else { 0 };
        let low = if values > 0 { i64::try_from(low).ok()? } else { 0 };
        (values + usize::from(null) <= KEY_RANGE_SLOTS).then_some(KeyRange(KeyShape { low, values, null }))
    }

    /// The slots: the values, then NULL's.
    fn width(&self) -> usize {
        self.0.values + usize::from(self.0.null)
    }

    /// How many bits of a slot a part's slots share: parts of `2^shift` consecutive slots, as few as leave no
    /// more than `parts` of them (a shift, not a division per key: with a 128-bit division, cutting took longer
    /// than with hashing).
    fn shift(&self, parts: usize) -> u32 {
        self.width().div_ceil(parts.max(1)).next_power_of_two().trailing_zeros()
    }

    /// The partition of `key` among `parts`, with parts of `2^shift` slots. A key outside the range (which
    /// [`KeyRange::of`] rules out) goes to the last part, whose merge finds it through the index.
    #[inline]
    fn part(&self, key: &IntKey, shift: u32, parts: usize) -> usize {
        let slot = if key.nulls & 1 == 1 { self.0.values } else { key.values[0].wrapping_sub(self.0.low) as usize };
        (slot >> shift).min(parts - 1)
    }

    /// [`KeyRange::part_shape`] as a direct table's shape (one key).
    fn part_table_shape(&self, part: usize, shift: u32) -> [KeyShape; KEYS_MAX] {
        let mut shape = [KeyShape::default(); KEYS_MAX];
        shape[0] = self.part_shape(part, shift);
        shape
    }

    /// The shape of partition `part`'s slots, with parts of `2^shift` slots.
    fn part_shape(&self, part: usize, shift: u32) -> KeyShape {
        let (start, end) = (part << shift, ((part + 1) << shift).min(self.width()));
        let values = end.min(self.0.values).saturating_sub(start);
        let low = if values > 0 { self.0.low.wrapping_add(start as i64) } else { 0 };
        KeyShape { low, values, null: self.0.null && end == self.width() && start < end }
    }
}

/// Adds the state words `their` of an aggregate of kind `kind` to `mine` (a DISTINCT aggregate's sets are not
/// words: the caller adds them).
#[inline]
fn add_words(kind: Kind, mine: &mut [u64], their: &[u64]) {
    match kind {
        Kind::Distinct => {}
        Kind::Count => mine[0] += their[0],
        Kind::Sum => {
            mine[0] += their[0];
            add_to_sum(&mut mine[1..], sum_of(&their[1..]));
        }
        Kind::Min => {
            mine[0] += their[0];
            mine[1] = (mine[1] as i64).min(their[1] as i64) as u64;
        }
        Kind::Max => {
            mine[0] += their[0];
            mine[1] = (mine[1] as i64).max(their[1] as i64) as u64;
        }
        Kind::DoubleSum => {
            let mut overflowed = mine[3] != 0 || their[3] != 0;
            let mut sum = compensated_sum_of(mine);
            sum.merge(&compensated_sum_of(their), &mut overflowed);
            mine[0] += their[0];
            set_compensated_sum(mine, &sum, overflowed);
        }
        Kind::DoubleMin | Kind::DoubleMax => {
            if their[0] > 0 {
                let wanted = if kind == Kind::DoubleMin { Ordering::Less } else { Ordering::Greater };
                if mine[0] == 0 || compare_doubles(f64::from_bits(their[1]), f64::from_bits(mine[1])) == wanted {
                    mine[1] = their[1];
                }
                mine[0] += their[0];
            }
        }
    }
}

/// The compensated sum a [`Kind::DoubleSum`] state keeps in its words 1 and 2.
#[inline(always)]
fn compensated_sum_of(words: &[u64]) -> CompensatedSum {
    CompensatedSum::from_parts(f64::from_bits(words[1]), f64::from_bits(words[2]))
}

/// Keeps `sum`, and whether finite values `overflowed`, in a [`Kind::DoubleSum`] state's words 1 to 3.
#[inline(always)]
fn set_compensated_sum(words: &mut [u64], sum: &CompensatedSum, overflowed: bool) {
    let (total, compensation) = sum.parts();
    (words[1], words[2], words[3]) = (total.to_bits(), compensation.to_bits(), u64::from(overflowed));
}

/// What an aggregate keeps of its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Count,
    Sum,
    Min,
    Max,
    /// Of a double column: a count, a compensated sum's two doubles and whether finite values overflowed.
    DoubleSum,
    /// Of a double column: a count and the extreme's bits.
    DoubleMin,
    DoubleMax,
    /// The set of distinct values, outside the state words.
    Distinct,
}

/// What an aggregate of `function` keeps, DISTINCT or not (MIN and MAX ignore DISTINCT: the extreme is the same),
/// over `argument`.
fn kind(function: AggregateFunction, distinct: bool, argument: Option<&Expr>) -> Kind {
    let double = argument.is_some_and(|argument| argument.data_type() == DataType::Double);
    match function {
        AggregateFunction::Min if double => Kind::DoubleMin,
        AggregateFunction::Max if double => Kind::DoubleMax,
        AggregateFunction::Sum | AggregateFunction::Avg if double => Kind::DoubleSum,
        AggregateFunction::Min => Kind::Min,
        AggregateFunction::Max => Kind::Max,
        _ if distinct => Kind::Distinct,
        AggregateFunction::Sum | AggregateFunction::Avg => Kind::Sum,
        _ => Kind::Count,
    }
}

impl IntGroups {
    /// Groups for `keys` GROUP BY keys and `aggregates` (an aggregation [`applies`] takes) over a partition of
    /// `columns` columns.
    pub(crate) fn new(keys: usize, aggregates: &[AggregateCall], columns: usize) -> IntGroups {
        let mut slots = Vec::with_capacity(aggregates.len());
        let mut empty = Vec::new();
        for call in aggregates {
            let kind = kind(call.function, call.distinct, call.argument.as_ref());
            slots.push(StateSlot { offset: empty.len(), kind });
            empty.extend_from_slice(kind.empty());
        }
        IntGroups {
            keys,
            aggregates: aggregates.len(),
            distinct_sets: slots.iter().any(|slot| slot.kind == Kind::Distinct),
            index: HashTable::new(),
            hasher: foldhash::fast::RandomState::default(),
            indexed: 0,
            order: KeyList::new(keys),
            states: Vec::new(),
            stride: empty.len(),
            slots,
            empty,
            bases: Box::new([0; BLOCK_ROWS]),
            values: Vec::new(),
            reads: vec![0; columns],
            groups: Box::new([0; BLOCK_ROWS]),
            direct: Vec::new(),
            direct_shape: None,
            spill_parts: 0,
            spilled: Vec::new(),
            groups_spilled: 0,
            outside_direct: false,
            rows_added: 0,
            relaid_groups: 0,
        }
    }

    /// Adds the rows selected in `mask` of block `block`; `numbers` gives, per key and then per aggregate, the
    /// numbers of a text column's codes in `partition` ([`TextKeys::numbers_in`]). `filtered` gives, per
    /// aggregate with a FILTER, the block's rows it keeps ([`filters_per_block`]; empty where none has one): that
    /// aggregate adds the rows of both masks, and its argument is evaluated on those alone. An error means a row
    /// would raise one: nothing of the block has been added, and the caller runs it on the general path.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn add_block(
        &mut self,
        group_by: &[Expr],
        aggregates: &[AggregateCall],
        partition: &Partition,
        numbers: &[Option<&[u32]>],
        block: usize,
        mask: &BlockMask,
        filtered: &[Option<BlockMask>],
        params: &[Value],
    ) -> Result<(), ExecError> {
        // Each aggregate's rows: the block's selected ones, narrowed by its FILTER's.
        let call_mask = |slot: usize| match filtered.get(slot) {
            Some(Some(kept)) => std::array::from_fn(|word| mask[word] & kept[word]),
            _ => *mask,
        };
        let reads = &mut self.reads;
        let mut evaluate = |expr: &Expr, rows: &BlockMask| {
            let skip: BlockMask = std::array::from_fn(|word| !rows[word]);
            match expr {
                // Double arithmetic as its doubles' bits, as a double column's values come.
                Expr::Column { .. } => int_block_of(expr, partition, block, params, &skip, reads),
                _ if expr.data_type() == DataType::Double => {
                    double_bits_block_of(expr, partition, block, params, &skip, reads)
                }
                _ => int_block_of(expr, partition, block, params, &skip, reads),
            }
        };
        let mut keys: Vec<IntBlock> = group_by.iter().map(|key| evaluate(key, mask)).collect::<Result<_, _>>()?;
        let mut arguments: Vec<Option<IntBlock>> = aggregates
            .iter()
            .enumerate()
            .map(|(slot, call)| call.argument.as_ref().map(|argument| evaluate(argument, &call_mask(slot))).transpose())
            .collect::<Result<_, _>>()?;
        // `numbers` has a place per key, then per aggregate (with an argument or not).
        let columns = keys.iter_mut().map(Some).chain(arguments.iter_mut().map(Option::as_mut));
        for (column, numbers) in columns.zip(numbers) {
            if let (Some(column), Some(numbers)) = (column, numbers) {
                column.renumber(mask, numbers);
            }
        }
        self.find_groups(&keys, mask);
        let stride = self.stride;
        for (base, &group) in self.bases.iter_mut().zip(self.groups.iter()) {
            *base = group as usize * stride;
        }
        let (groups, bases) = (&self.groups, &self.bases);
        // Few groups in all: each one's rows as a mask, so that COUNT, SUM, MIN and MAX add a group's rows in one
        // vectorized pass ([`crate::vector::masked_summary`]) rather than a row at a time, each row's update
        // waiting on the one before it to the same group's state.
        let group_count = self.states.len().checked_div(stride).unwrap_or(0);
        let mut few = [(0usize, [0u64; bitpack::MASK_WORDS]); FEW_GROUPS];
        let mut few_len = 0;
        if self.keys > 0 && group_count <= FEW_GROUPS {
            for group in 0..group_count {
                // SAFETY: `Isa::best` runs on this CPU.
                let rows = unsafe { rows_of_group_on(bitpack::Isa::best(), groups, group as u32, mask) };
                if rows.iter().any(|&word| word != 0) {
                    few[few_len] = (group * stride, rows);
                    few_len += 1;
                }
            }
        }
        let few = (self.keys > 0 && group_count <= FEW_GROUPS).then_some(&few[..few_len]);
        for (slot, argument) in arguments.iter().enumerate() {
            let StateSlot { offset, kind } = self.slots[slot];
            // A slice, not the vector: its address and length stay in registers through the loops below, not
            // loaded again for every row (`GROUP BY "C1" % 100` with COUNT(*) and SUM: 19.3 -> 18.6 ms).
            let states = &mut self.states[..];
            let mask = &call_mask(slot);
            let Some(argument) = argument else {
                match few {
                    Some(few) => {
                        for (base, rows) in few {
                            let rows: BlockMask = std::array::from_fn(|word| rows[word] & mask[word]);
                            states[base + offset] += u64::from(bitpack::count(&rows));
                        }
                    }
                    // One group: the block's count at once (row by row, each increment waited on the one before
                    // it through memory: a quarter of `COUNT(*), SUM(sqrt("C1"))`'s aggregation time). A block
                    // selecting no row touches no state: group 0 may not exist yet.
                    None if self.keys == 0 => match bitpack::count(mask) {
                        0 => {}
                        rows => states[offset] += u64::from(rows),
                    },
                    None => for_each_set(mask, |row| states[bases[row] + offset] += 1),
                }
                continue;
            };
            let valid: BlockMask = std::array::from_fn(|word| mask[word] & !argument.nulls()[word]);
            let values = argument.values();
            if let Some(few) = few
                && matches!(kind, Kind::Count | Kind::Sum | Kind::Min | Kind::Max)
            {
                for (base, rows) in few {
                    let rows: BlockMask = std::array::from_fn(|word| rows[word] & valid[word]);
                    add_summary(&mut states[base + offset..], kind, crate::vector::masked_summary(values, &rows));
                }
                continue;
            }
            if kind == Kind::Distinct {
                let aggregates = self.aggregates;
                let set = |row: usize| groups[row] as usize * aggregates + slot;
                let sets = &mut self.values;
                if self.keys == 0 {
                    // One group: the block's values into the set's bitmap, grown to span them where it can be.
                    let (count, _, min, max) = crate::vector::masked_summary(values, &valid);
                    if count > 0 {
                        sets[slot].insert_block(values, &valid, min, max);
                    }
                    continue;
                }
                for_each_set(&valid, |row| {
                    sets[set(row)].insert(values[row]);
                });
                continue;
            }
            // Without GROUP BY every row is group 0's: the block's count, sum, least and greatest in one pass that
            // the compiler vectorizes (`sum(CASE WHEN "C1" < 1000000 THEN 1 ELSE 0 END)` over 20 million rows
            // row by row here: 56-59 ms).
            if self.keys == 0 && matches!(kind, Kind::Count | Kind::Sum | Kind::Min | Kind::Max) {
                // A block that selects no row touches no state: group 0 may not exist yet.
                let summary = crate::vector::masked_summary(values, &valid);
                if summary.0 > 0 {
                    add_summary(&mut states[offset..], kind, summary);
                }
                continue;
            }
            // One group: a double sum kept in registers through the block, its rows added in the same order as
            // below (so to the same bits), the state read and written once.
            if self.keys == 0 && kind == Kind::DoubleSum {
                let rows = bitpack::count(&valid);
                if rows == 0 {
                    continue;
                }
                let state = &mut states[offset..][..4];
                let (mut sum, mut overflowed) = (compensated_sum_of(state), state[3] != 0);
                for_each_set(&valid, |row| sum.add(f64::from_bits(values[row] as u64), &mut overflowed));
                state[0] += u64::from(rows);
                set_compensated_sum(state, &sum, overflowed);
                continue;
            }
            // One loop per kind of aggregate, each updating only what its function keeps.
            match kind {
                Kind::Count => for_each_set(&valid, |row| states[bases[row] + offset] += 1),
                Kind::Sum => for_each_set(&valid, |row| {
                    let state = &mut states[bases[row] + offset..][..3];
                    state[0] += 1;
                    add_to_sum(&mut state[1..], i128::from(values[row]));
                }),
                Kind::Min => for_each_set(&valid, |row| {
                    let state = &mut states[bases[row] + offset..][..2];
                    state[0] += 1;
                    state[1] = (state[1] as i64).min(values[row]) as u64;
                }),
                Kind::Max => for_each_set(&valid, |row| {
                    let state = &mut states[bases[row] + offset..][..2];
                    state[0] += 1;
                    state[1] = (state[1] as i64).max(values[row]) as u64;
                }),
                Kind::DoubleSum => for_each_set(&valid, |row| {
                    let state = &mut states[bases[row] + offset..][..4];
                    let (mut sum, mut overflowed) = (compensated_sum_of(state), state[3] != 0);
                    sum.add(f64::from_bits(values[row] as u64), &mut overflowed);
                    state[0] += 1;
                    set_compensated_sum(state, &sum, overflowed);
                }),
                Kind::DoubleMin | Kind::DoubleMax => {
                    let wanted = if kind == Kind::DoubleMin { Ordering::Less } else { Ordering::Greater };
                    for_each_set(&valid, |row| {
                        let state = &mut states[bases[row] + offset..][..2];
                        let value = f64::from_bits(values[row] as u64);
                        if state[0] == 0 || compare_doubles(value, f64::from_bits(state[1])) == wanted {
                            state[1] = value.to_bits();
                        }
                        state[0] += 1;
                    })
                }
                Kind::Distinct => unreachable!("DISTINCT aggregates are added above"),
            }
        }
        self.spill_if_full();
        Ok(())
    }

    /// Sets `groups[row]` for every row selected in `mask`, adding the groups not seen before. Where the keys of
    /// the block's rows span few values (the usual GROUP BY of a few hundred groups), a table indexed by the keys'
    /// offsets from their smallest values in the block finds each row's group, and the hash map is asked once per
    /// key the block holds; otherwise once per row.
    fn find_groups(&mut self, keys: &[IntBlock], mask: &BlockMask) {
        if keys.is_empty() {
            // One group (an aggregate without GROUP BY, such as COUNT(DISTINCT …)): group 0, which every row of
            // `groups` already holds, once a row has been selected. Written row by row, as below, it took 40% of
            // `bench queries`' COUNT(DISTINCT "C1" % 1000): 8.0-8.2 ms against 6.4-6.7 (5 million rows, binaries
            // alternated three times).
            if self.order.is_empty() && mask.iter().any(|&word| word != 0) {
                self.group_of(keys, 0);
            }
            return;
        }
        self.rows_added += u64::from(bitpack::count(mask));
        // Per key: its smallest value in the block, and the slots it takes (one per value from the smallest to the
        // largest, and one for NULL if a row has it).
        let mut shape = [KeyShape::default(); KEYS_MAX];
        let mut slots = 1usize;
        for (k, block) in keys.iter().enumerate() {
            let (low, high, null) = value_range(block.values(), block.nulls(), mask);
            let span =
                if low > high { 0 } else { (high as i128 - low as i128 + 1).min(DIRECT_SLOTS as i128 + 1) as usize };
            shape[k] = KeyShape { low, values: span, null };
            slots = slots.saturating_mul(span + usize::from(null));
        }
        if slots > DIRECT_SLOTS {
            self.find_groups_hashed(keys, mask);
            return;
        }
        // The table of the blocks before, if this block's keys fit its shape (as `x % 100`'s do block after block):
        // then the groups it found are not looked up again.
        let keys_fit = self
            .direct_shape
            .is_some_and(|old| old.iter().zip(&shape).take(keys.len()).all(|(old, new)| old.covers(new)));
        let mut direct = std::mem::take(&mut self.direct);
        if let (true, Some(old)) = (keys_fit, self.direct_shape) {
            shape = old;
        } else {
            // The new table covers the old one's values too where it can: blocks of `x % 7000` each span a little
            // less than the whole range, and a table laid out for one block alone was laid out again block
            // after block.
            let mut extended = false;
            if let Some(old) = self.direct_shape {
                let mut union = shape;
                let mut union_slots = 1usize;
                for (k, (old, new)) in old.iter().zip(shape.iter()).take(keys.len()).enumerate() {
                    let merged = old.union(new);
                    union_slots = union_slots.saturating_mul(merged.values + usize::from(merged.null));
                    union[k] = merged;
                }
                if union_slots <= DIRECT_SLOTS {
                    (shape, slots) = (union, union_slots);
                    // One key whose values grow past the old table's ends (a primary key, in order or not), every
                    // group in the old table and no NULL slot at its end: the old slots keep their order, moved
                    // along by as many values as the table gained below, and the table is only lengthened. Laid out
                    // anew with every group found so far, block after block, `GROUP BY "C0"` over 5 million rows
                    // (one worker) took 7.1-7.3 s with tables of 2^18 slots, 8.1-8.4 with 2^20; now 0.73-0.84.
                    extended = keys.len() == 1 && old[0].values > 0 && !old[0].null && !self.outside_direct;
                    if extended {
                        // The union's smallest value is the smaller of the two (the old table has values), and
                        // its span at most DIRECT_SLOTS.
                        let gained_below = (old[0].low as i128 - union[0].low as i128) as usize;
                        direct.splice(0..0, std::iter::repeat_n(u32::MAX, gained_below));
                    }
                } else if self.spill_parts > 0 && self.order.len() >= RELAYOUT_SPILL_GROUPS {
                    // A table for this block alone would leave most groups found so far without a slot, and be
                    // laid out anew, with all of them, at each block after: they are spilled first. `GROUP BY "C0"`
                    // (5 million rows, 2 workers, each taking morsels of both partitions in turn) took 1.35-1.44 s,
                    // now 0.56-0.88.
                    self.spill();
                }
            }
            // A table laid out anew places every group found so far: where that would come to more groups than
            // the rows added since the last spill (keys whose blocks each fall outside the table before them), the
            // block goes through the index instead.
            let relaid = self.relaid_groups + self.order.len() as u64;
            if !extended && relaid > RELAYOUT_GROUPS_PER_ROW * self.rows_added + RELAYOUT_GROUPS_FREE {
                self.direct = direct;
                self.find_groups_hashed(keys, mask);
                return;
            }
            if !extended {
                self.relaid_groups = relaid;
                direct.clear();
            }
            direct.resize(slots, u32::MAX);
            self.direct_shape = Some(shape);
            if !extended {
                // Every group found before that the table's shape covers has its slot, so that an empty slot is a
                // new group, added without asking the index.
                for (group, key) in self.order.iter().enumerate() {
                    match slot_of(&key, &shape[..keys.len()]) {
                        Some(slot) => direct[slot] = group as u32,
                        None => self.outside_direct = true,
                    }
                }
            }
        }
        // One key (the usual `GROUP BY x % 100`): its selected non-NULL rows' slots are their offsets, found a
        // word at a time; the rest go the general way below.
        let mut general = *mask;
        if let [key] = keys {
            if self.states.len() >= PREFETCH_STATE_WORDS {
                self.find_one_key_groups::<true>(key, shape[0].low, &mut direct, &mut general);
            } else {
                self.find_one_key_groups::<false>(key, shape[0].low, &mut direct, &mut general);
            }
        }
        for_each_set(&general, |row| {
            let mut index = 0usize;
            for (k, block) in keys.iter().enumerate() {
                let KeyShape { low, values, null } = shape[k];
                let width = values + usize::from(null);
                // NULL takes the key's last slot.
                let offset = block.int(row).map_or(width - 1, |value| value.wrapping_sub(low) as usize);
                index = index * width + offset;
            }
            if direct[index] == u32::MAX {
                direct[index] = self.add_group(key_of(keys, row)) as u32;
            }
            self.groups[row] = direct[index];
        });
        self.direct = direct;
    }

    /// [`IntGroups::find_groups`] through the index alone.
    fn find_groups_hashed(&mut self, keys: &[IntBlock], mask: &BlockMask) {
        for_each_set(mask, |row| self.groups[row] = self.group_of(keys, row) as u32);
        // The groups just added are not in the direct table: lay it out afresh, with them, when next used.
        self.direct_shape = None;
    }

    /// The index of row `row`'s group, found or added.
    #[inline]
    fn group_of(&mut self, keys: &[IntBlock], row: usize) -> usize {
        self.find_or_add(key_of(keys, row))
    }

    /// The index of `key`'s group, found or added, through the index.
    #[inline]
    fn find_or_add(&mut self, key: IntKey) -> usize {
        self.ensure_index();
        // One hash and one probe whether the key is new or not.
        let new_group = self.order.len() as u32;
        let (order, hasher) = (&self.order, &self.hasher);
        let hash = hasher.hash_one(key);
        let found =
            self.index.entry(hash, |&group| order.is(group as usize, &key), |&group| order.hash_of(hasher, group));
        match found {
            hash_table::Entry::Occupied(entry) => *entry.get() as usize,
            hash_table::Entry::Vacant(entry) => {
                entry.insert(new_group);
                self.indexed += 1;
                self.outside_direct = true;
                self.add_group(key)
            }
        }
    }

    /// [`IntGroups::find_groups`] for the selected non-NULL rows of one key, whose slots in `direct` are their
    /// offsets from `low`, found a word at a time; they are taken out of `general`.
    ///
    /// With `PREFETCH`, each row's state, which the aggregates' loops read next, is asked for now, so that a
    /// block's rows fetch their lines side by side: for states past the nearer caches ([`PREFETCH_STATE_WORDS`]).
    /// `GROUP BY x % 200000` (6.4 MB of states per worker; 5 million rows, 2 workers) went from 39.0 to 34.8 ms.
    /// `x % 100`'s states stay in cache, so it is not asked for there. Not inlined: inlined twice into
    /// `find_groups`, it made GROUP BYs of few groups 5-9% slower, even of two keys, which do not come here.
    #[inline(never)]
    fn find_one_key_groups<const PREFETCH: bool>(
        &mut self,
        key: &IntBlock,
        low: i64,
        direct: &mut [u32],
        general: &mut BlockMask,
    ) {
        let (values, nulls) = (key.values(), key.nulls());
        for (word, bits) in general.iter_mut().enumerate() {
            let valid = *bits & !nulls[word];
            *bits &= !valid;
            let mut rest = valid;
            while rest != 0 {
                let row = word * 64 + rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let index = values[row].wrapping_sub(low) as usize;
                let mut group = direct[index];
                if group == u32::MAX {
                    group = self.add_group(key_of(std::slice::from_ref(key), row)) as u32;
                    direct[index] = group;
                } else if PREFETCH && let Some(state) = self.states.get(group as usize * self.stride) {
                    bitpack::prefetch_line(state);
                }
                self.groups[row] = group;
            }
        }
    }

    /// Adds the groups found through the direct table since the index was last used to it.
    fn ensure_index(&mut self) {
        if self.indexed < self.order.len() {
            let (order, hasher) = (&self.order, &self.hasher);
            let rehash = |&group: &u32| order.hash_of(hasher, group);
            self.index.reserve(order.len() - self.indexed, rehash);
            for group in self.indexed as u32..order.len() as u32 {
                self.index.insert_unique(order.hash_of(hasher, group), group, rehash);
            }
            self.indexed = self.order.len();
        }
    }

    /// Adds a group not found before (not to the index: [`IntGroups::find_or_add`] does that).
    fn add_group(&mut self, key: IntKey) -> usize {
        let group = self.order.len();
        self.order.push(&key);
        self.states.extend_from_slice(&self.empty);
        if self.distinct_sets {
            self.values.extend((0..self.aggregates).map(|_| IntSet::default()));
        }
        group
    }

    /// Adds another task's groups of the same aggregation.
    pub(crate) fn merge(&mut self, other: IntGroups) {
        if let Some(part) = other.into_parts(1, None).pop() {
            self.merge_part(part);
        }
        // Its groups may lie outside the direct table's shape.
        self.outside_direct = true;
    }

    /// Whether some aggregate keeps sets of distinct values (which [`IntGroups::merged_range`] cannot take from
    /// tables it only reads).
    pub(crate) fn keeps_distinct_sets(&self) -> bool {
        self.distinct_sets
    }

    /// The shape of the direct table, if it has every group (one key, nothing spilled): what a [`KeyRange`] of
    /// the workers' groups is made of.
    fn direct_shape_of_groups(&self) -> Option<KeyShape> {
        if self.keys != 1 || !self.spilled.is_empty() || self.outside_direct {
            return None;
        }
        self.direct_shape.map(|shape| shape[0])
    }

    /// Cuts the groups into `parts` hash partitions by key ([`IntKey::part`]), for as many merge tasks to add
    /// up side by side: with millions of groups, one merge per domain took longer than the scan. With `range`
    /// (every worker's groups in its direct table: [`KeyRange::of`]), into ranges of it instead.
    pub(crate) fn into_parts(mut self, parts: usize, range: Option<KeyRange>) -> Vec<GroupsPart> {
        let parts = parts.max(1);
        if let Some(range) = range.filter(|_| self.direct_shape_of_groups().is_some()) {
            return self.into_ranges(range, parts);
        }
        if self.spilled.is_empty() {
            if parts == 1 {
                let shape = self.direct_shape;
                let (keys, states, values) = (self.order, self.states, self.values);
                return vec![GroupsPart { keys, states, values, shape, unique: true }];
            }
            let mut out: Vec<GroupsPart> =
                (0..parts).map(|_| GroupsPart::empty(self.keys, self.direct_shape, true)).collect();
            let part_of = |key: &IntKey| key.part(parts);
            cut_into(&mut out, part_of, &self.order, &self.states, self.values, self.stride, self.aggregates);
            return out;
        }
        // The groups not spilled yet go where the others went; partitions of another count (the merge of two
        // tasks' groups) are cut anew.
        self.spill();
        let spilled = std::mem::take(&mut self.spilled);
        if spilled.len() == parts {
            return spilled;
        }
        let mut out: Vec<GroupsPart> = (0..parts).map(|_| GroupsPart::empty(self.keys, None, false)).collect();
        for part in spilled {
            cut_into(
                &mut out,
                |key| key.part(parts),
                &part.keys,
                &part.states,
                part.values,
                self.stride,
                self.aggregates,
            );
        }
        out
    }

    /// [`IntGroups::into_parts`] by ranges of `range`, for a table whose direct table has every group.
    ///
    /// The groups are taken in the order they were found. (In the direct table's slot order, each partition
    /// filled in turn, reading their states at random took longer: 4.6 ms per merge task instead of 4.1 for
    /// `GROUP BY x % 200000`'s groups.)
    fn into_ranges(self, range: KeyRange, parts: usize) -> Vec<GroupsPart> {
        let shift = range.shift(parts);
        let mut out: Vec<GroupsPart> = (0..parts)
            .map(|part| GroupsPart::empty(self.keys, Some(range.part_table_shape(part, shift)), true))
            .collect();
        let part_of = |key: &IntKey| range.part(key, shift, parts);
        cut_into(&mut out, part_of, &self.order, &self.states, self.values, self.stride, self.aggregates);
        out
    }

    /// Makes the table spill its groups into `parts` hash partitions ([`IntGroups::into_parts`]) whenever it
    /// holds more than its bound ([`SPILL_GROUPS_HASHED`], [`SPILL_GROUPS_DIRECT`]), and start afresh: a
    /// row then finds its group in a table of bounded size, and each partition's merge task adds up the
    /// spilled groups in a table of its share alone. (Where most rows start a group, most rows are spilled.)
    pub(crate) fn spill_into(&mut self, parts: usize) {
        self.spill_parts = parts;
    }

    /// Groups spilled while rows were added (not those the cut for the merge moves at the end).
    pub(crate) fn groups_spilled(&self) -> u64 {
        self.groups_spilled
    }

    /// Spills the groups if the table holds more than its bound.
    fn spill_if_full(&mut self) {
        if self.spill_parts == 0 {
            return;
        }
        let limit = if self.indexed > 0 {
            SPILL_GROUPS_HASHED
        } else if self.distinct_sets {
            SPILL_GROUPS_DIRECT_MIN
        } else {
            (SPILL_STATE_WORDS_DIRECT / self.stride.max(1)).clamp(SPILL_GROUPS_DIRECT_MIN, SPILL_GROUPS_DIRECT)
        };
        if self.order.len() >= limit {
            self.spill();
        }
    }

    /// Moves every group to its spilled partition, and empties the table (keeping its memory).
    fn spill(&mut self) {
        if self.spilled.is_empty() {
            self.spilled = (0..self.spill_parts.max(1)).map(|_| GroupsPart::empty(self.keys, None, false)).collect();
        }
        self.groups_spilled += self.order.len() as u64;
        let values = std::mem::take(&mut self.values);
        let parts = self.spilled.len();
        let part_of = |key: &IntKey| key.part(parts);
        cut_into(&mut self.spilled, part_of, &self.order, &self.states, values, self.stride, self.aggregates);
        self.order.clear();
        self.states.clear();
        self.index.clear();
        self.indexed = 0;
        self.direct_shape = None;
        self.outside_direct = false;
        self.rows_added = 0;
        self.relaid_groups = 0;
    }

    /// Adds a partition of another task's groups of the same aggregation ([`IntGroups::into_parts`]).
    ///
    /// Keys go through a direct table as a block's do ([`IntGroups::find_groups`]), laid out for the union of the
    /// parts' tasks' tables while it stays within [`DIRECT_SLOTS`]; other keys through the index. Through the
    /// index alone, the merges of `GROUP BY x % 200000` (5 million rows, 2 workers) took 3 million hash lookups.
    pub(crate) fn merge_part(&mut self, mut part: GroupsPart) {
        if self.order.is_empty() && part.unique {
            // The first part is taken as it is: its groups are all new here (with 2 workers, this halves the
            // merge's lookups and copies).
            self.order = part.keys;
            self.states = part.states;
            self.values = part.values;
            self.index.clear();
            self.indexed = 0;
            self.direct_shape = None;
            self.lay_out_merge_table(part.shape, self.order.len());
            return;
        }
        self.order.reserve(part.keys.len());
        self.states.reserve(part.states.len());
        self.lay_out_merge_table(part.shape, self.order.len() + part.keys.len());
        if self.direct_shape.is_none() {
            // Every key goes through the index: room for them all at once, not grown by rehashing.
            self.ensure_index();
            let (order, hasher) = (&self.order, &self.hasher);
            self.index.reserve(part.keys.len(), |&group| order.hash_of(hasher, group));
        }
        let mut direct = std::mem::take(&mut self.direct);
        let shape = self.direct_shape;
        for (theirs, key) in part.keys.iter().enumerate() {
            let slot = shape.and_then(|shape| slot_of(&key, &shape[..self.keys]));
            let group = match slot {
                Some(slot) if direct[slot] != u32::MAX => direct[slot] as usize,
                Some(slot) => {
                    let group = self.add_group(key);
                    direct[slot] = group as u32;
                    group
                }
                None => self.find_or_add(key),
            };
            let (mine, theirs_at) = (group * self.stride, theirs * self.stride);
            for (slot, &StateSlot { offset, kind }) in self.slots.iter().enumerate() {
                let mine = &mut self.states[mine + offset..][..kind.words()];
                let their = &part.states[theirs_at + offset..][..kind.words()];
                match kind {
                    Kind::Distinct => {
                        // `union` keeps the larger hash set and adopts or ORs in the bitmap, whichever side it is.
                        let values = std::mem::take(&mut part.values[theirs * self.aggregates + slot]);
                        self.values[group * self.aggregates + slot].union(values);
                    }
                    kind => add_words(kind, mine, their),
                }
            }
        }
        self.direct = direct;
    }

    /// Partition `part` of `parts` ranges of `range` ([`KeyRange`]) of `tables`' groups, each table holding all
    /// its groups in its direct table and none keeping distinct sets, added up where the tables hold them: read
    /// in their direct tables' slot order, without being cut into partitions first (`None`: no groups).
    ///
    /// For `GROUP BY x % 200000` over 5 million rows (2 workers), cutting its 200 000 groups into partitions took
    /// each merge task 4.1 ms of its 8.7, and the partitions (72 bytes a group, when keys took 40) were memory the merge wrote once
    /// and read once.
    pub(crate) fn merged_range(
        tables: &[IntGroups],
        aggregates: &[AggregateCall],
        range: KeyRange,
        part: usize,
        parts: usize,
    ) -> Option<IntGroups> {
        let shape = range.part_shape(part, range.shift(parts));
        if shape.values == 0 && !shape.null {
            // Past the range's end (it has fewer slots than there are parts).
            return None;
        }
        let mut merged = IntGroups::new(1, aggregates, 0);
        let mut direct = vec![u32::MAX; shape.values + usize::from(shape.null)];
        for table in tables {
            let Some(own) = table.direct_shape_of_groups() else { continue };
            debug_assert!(!table.distinct_sets, "tables with distinct sets are cut, not merged in place");
            // The values both shapes have, then NULL.
            let low = i128::from(shape.low).max(i128::from(own.low));
            let high = (i128::from(shape.low) + shape.values as i128).min(i128::from(own.low) + own.values as i128);
            let values = (low..high).map(|value| {
                let key = IntKey::one(Some(value as i64));
                ((value - i128::from(shape.low)) as usize, (value - i128::from(own.low)) as usize, key)
            });
            let null = (shape.null && own.null).then(|| (shape.values, own.values, IntKey::one(None)));
            for (slot, own_slot, key) in values.chain(null) {
                let group = table.direct[own_slot];
                if group != u32::MAX {
                    merged.add_state(
                        &mut direct[slot],
                        key,
                        &table.states[group as usize * table.stride..][..table.stride],
                    );
                }
            }
        }
        (!merged.order.is_empty()).then_some(merged)
    }

    /// Adds a group's state words `theirs` to the group of `key`, whose index is in `slot` ([`u32::MAX`]: none
    /// yet, and it is added).
    #[inline]
    fn add_state(&mut self, slot: &mut u32, key: IntKey, theirs: &[u64]) {
        if *slot == u32::MAX {
            *slot = self.order.len() as u32;
            self.order.push(&key);
            self.states.extend_from_slice(theirs);
            return;
        }
        let mine = &mut self.states[*slot as usize * self.stride..][..self.stride];
        for &StateSlot { offset, kind } in &self.slots {
            add_words(kind, &mut mine[offset..][..kind.words()], &theirs[offset..][..kind.words()]);
        }
    }

    /// Makes the direct table cover `shape` too where the union stays within [`DIRECT_SLOTS`], with every group
    /// so far in its slot.
    fn lay_out_merge_table(&mut self, shape: Option<[KeyShape; KEYS_MAX]>, groups: usize) {
        let Some(shape) = shape else { return };
        let keys = self.keys;
        let union = match self.direct_shape {
            Some(old) if old.iter().zip(&shape).take(keys).all(|(old, new)| old.covers(new)) => return,
            Some(old) => std::array::from_fn(|k| if k < keys { old[k].union(&shape[k]) } else { old[k] }),
            None => shape,
        };
        let slots =
            union.iter().take(keys).fold(1usize, |slots, key| slots.saturating_mul(key.values + usize::from(key.null)));
        // A table that most slots of would stay empty (the part is one of many hash partitions of the keys'
        // range) costs more to lay out than the index costs to ask.
        if slots > DIRECT_SLOTS || slots > groups.saturating_mul(MERGE_SLOTS_PER_GROUP) {
            return;
        }
        self.direct.clear();
        self.direct.resize(slots, u32::MAX);
        for (group, key) in self.order.iter().enumerate() {
            if let Some(slot) = slot_of(&key, &union[..keys]) {
                self.direct[slot] = group as u32;
            }
        }
        self.direct_shape = Some(union);
    }

    /// The final rows of the groups (keys, then aggregate values), as [`PartialAggregate::finish`] gives them for
    /// [`IntGroups::into_partial`]'s groups; a text key's strings are `text`'s.
    pub(crate) fn into_rows(
        mut self,
        group_by: &[Expr],
        aggregates: &[AggregateCall],
        text: &TextKeys,
    ) -> Result<Vec<Vec<Value>>, ExecError> {
        let stands = stands_of(group_by, text);
        let empty: GroupState = aggregates.iter().map(Accumulator::new).collect();
        let mut values = std::mem::take(&mut self.values);
        let mut rows = Vec::with_capacity(self.order.len());
        for (group, key) in self.order.iter().enumerate() {
            let mut row = key_values(&key, &stands, aggregates.len());
            for (slot, empty) in empty.iter().enumerate() {
                let StateSlot { offset, kind } = self.slots[slot];
                let state = &self.states[group * self.stride + offset..][..kind.words()];
                // A count, an integer sum, a minimum and a maximum are their state's words: no accumulator to
                // make and finish (over 3 million groups, making, filling and finishing accumulators was a fifth
                // of the merge). The values are those `finish` gives.
                let value = match (kind, empty) {
                    (Kind::Count, Accumulator::Count(_)) => Value::Int(state[0] as i64),
                    (Kind::Sum, Accumulator::IntSum(None) | Accumulator::NumericSum(None))
                    | (Kind::Min, Accumulator::Min(None))
                    | (Kind::Max, Accumulator::Max(None))
                        if state[0] == 0 =>
                    {
                        Value::Null
                    }
                    (Kind::Sum, Accumulator::IntSum(None)) => int_sum_value(sum_of(&state[1..]))?,
                    (Kind::Sum, Accumulator::NumericSum(None)) => Value::Numeric(sum_of(&state[1..])),
                    (Kind::Min, Accumulator::Min(None)) | (Kind::Max, Accumulator::Max(None)) => {
                        match text.argument(slot) {
                            Some(strings) => strings.value(state[1] as i64),
                            None => Value::Int(state[1] as i64),
                        }
                    }
                    _ => self.accumulator(group, slot, empty, text.argument(slot), &mut values).finish()?,
                };
                row.push(value);
            }
            rows.push(row);
        }
        Ok(rows)
    }

    /// Group `group`'s accumulator of aggregate `slot`, made from `empty` (the aggregate's with no values), with
    /// its distinct values taken from `values` (the groups' sets); `strings` numbers the argument's strings where
    /// it is a text column.
    fn accumulator(
        &self,
        group: usize,
        slot: usize,
        empty: &Accumulator,
        strings: Option<&TextKey>,
        values: &mut [IntSet],
    ) -> Accumulator {
        let mut accumulator = empty.clone();
        let StateSlot { offset, kind } = self.slots[slot];
        let state = &self.states[group * self.stride + offset..][..kind.words()];
        let value = |number: i64| strings.map_or(Value::Int(number), |strings| strings.value(number));
        match kind {
            Kind::Distinct => {
                let set = std::mem::take(&mut values[group * self.aggregates + slot]);
                match (strings, accumulator) {
                    // Integers: the set as it is.
                    (None, Accumulator::Distinct { empty, .. }) => {
                        return Accumulator::DistinctInts { values: set, empty };
                    }
                    (_, distinct) => {
                        accumulator = distinct;
                        set.iter().for_each(|v| accumulator.add(&value(v), false));
                    }
                }
            }
            Kind::Min | Kind::Max if strings.is_some() => {
                if state[0] > 0 {
                    accumulator.add(&value(state[1] as i64), false);
                }
            }
            Kind::Count => accumulator.add_ints(state[0] as i64, 0, i64::MAX, i64::MIN),
            Kind::Sum => accumulator.add_ints(state[0] as i64, sum_of(&state[1..]), i64::MAX, i64::MIN),
            Kind::Min => accumulator.add_ints(state[0] as i64, 0, state[1] as i64, i64::MIN),
            Kind::Max => accumulator.add_ints(state[0] as i64, 0, i64::MAX, state[1] as i64),
            Kind::DoubleSum => accumulator.add_double_sum(state[0] as i64, compensated_sum_of(state), state[3] != 0),
            Kind::DoubleMin | Kind::DoubleMax => {
                if state[0] > 0 {
                    accumulator.add(&Value::Double(f64::from_bits(state[1])), false);
                }
            }
        }
        accumulator
    }

    /// The groups as the general path's partial aggregate; `group_by` as given to [`IntGroups::add_block`], a
    /// text key's strings `text`'s.
    pub(crate) fn into_partial(
        self,
        group_by: &[Expr],
        aggregates: &[AggregateCall],
        text: &TextKeys,
    ) -> PartialAggregate {
        let mut groups = GroupMap::with_capacity_and_hasher(self.order.len(), Default::default());
        let outcome: Result<(), ExecError> = self.for_each_group(group_by, aggregates, text, |key, state| {
            groups.insert(key, std::mem::take(state));
            Ok(())
        });
        debug_assert!(outcome.is_ok(), "inserting groups fails not");
        PartialAggregate { groups }
    }

    /// Calls `f` with each group's key values (a row with room for the aggregates' values too) and its
    /// aggregates' accumulators, in the order the groups were found. The accumulators' vector is `f`'s to empty
    /// or take: the next group's are put in it. (Over 3 million groups, making each group's accumulators
    /// afresh from the aggregate calls, and growing each row for its aggregates, was a third of the merge.)
    fn for_each_group(
        mut self,
        group_by: &[Expr],
        aggregates: &[AggregateCall],
        text: &TextKeys,
        mut f: impl FnMut(Vec<Value>, &mut GroupState) -> Result<(), ExecError>,
    ) -> Result<(), ExecError> {
        let stands = stands_of(group_by, text);
        let mut values = std::mem::take(&mut self.values);
        let empty: GroupState = aggregates.iter().map(Accumulator::new).collect();
        let mut state: GroupState = Vec::with_capacity(aggregates.len());
        for (group, key) in self.order.iter().enumerate() {
            let key_values = key_values(&key, &stands, aggregates.len());
            state.clear();
            state.extend(
                empty
                    .iter()
                    .enumerate()
                    .map(|(slot, empty)| self.accumulator(group, slot, empty, text.argument(slot), &mut values)),
            );
            f(key_values, &mut state)?;
        }
        Ok(())
    }
}

/// What a key's integers stand for.
enum Stands<'t> {
    Int,
    Bool,
    Text(&'t TextKey),
}

/// What each of `group_by`'s keys stands for: a text column's keys are numbers of `text`'s strings.
fn stands_of<'t>(group_by: &[Expr], text: &'t TextKeys) -> Vec<Stands<'t>> {
    (0..group_by.len())
        .map(|k| match (text.key(k), group_by[k].data_type()) {
            (Some(key), _) => Stands::Text(key),
            (None, DataType::Boolean) => Stands::Bool,
            (None, _) => Stands::Int,
        })
        .collect()
}

/// `key`'s values, in a row with room for `more` values after them.
fn key_values(key: &IntKey, stands: &[Stands<'_>], more: usize) -> Vec<Value> {
    let mut row = Vec::with_capacity(stands.len() + more);
    row.extend(stands.iter().enumerate().map(|(k, stands)| match stands {
        _ if key.nulls >> k & 1 == 1 => Value::Null,
        Stands::Text(text) => text.value(key.values[k]),
        Stands::Bool => Value::Bool(key.values[k] != 0),
        Stands::Int => Value::Int(key.values[k]),
    }));
    row
}

/// Row `row`'s key.
#[inline]
fn key_of(keys: &[IntBlock], row: usize) -> IntKey {
    let mut key = IntKey { values: [0; KEYS_MAX], nulls: 0 };
    for (k, block) in keys.iter().enumerate() {
        match block.int(row) {
            Some(value) => key.values[k] = value,
            None => key.nulls |= 1 << k,
        }
    }
    key
}

/// `key`'s slot in a direct table of `shape` (one per key), if the shape covers it.
fn slot_of(key: &IntKey, shape: &[KeyShape]) -> Option<usize> {
    let mut slot = 0usize;
    for (k, &KeyShape { low, values, null }) in shape.iter().enumerate() {
        let width = values + usize::from(null);
        let offset = if key.nulls >> k & 1 == 1 {
            if !null {
                return None;
            }
            width - 1
        } else {
            let offset = i128::from(key.values[k]) - i128::from(low);
            if offset < 0 || offset >= values as i128 {
                return None;
            }
            offset as usize
        };
        slot = slot * width + offset;
    }
    Some(slot)
}

/// Whether a scan's groups are found per worker and merged by hash partitions of the groups, one merge task per
/// worker ([`crate::run`]'s `ScanJob::merge_parts`), rather than per task and merged per domain: a GROUP BY (no
/// grouping sets) that [`IntGroups`] takes.
pub(crate) fn merges_by_partition(output: &ScanOutput) -> bool {
    matches!(output, ScanOutput::Aggregate { group_by, aggregates, sets: None }
        if !group_by.is_empty() && applies(group_by, aggregates))
}

/// The smallest and largest of `values` in the rows of `mask`, and whether one of those rows is NULL (`nulls`). A
/// word whose 64 rows are all selected and none NULL (every word of a GROUP BY over a whole column without
/// NULLs) is reduced as a slice, which the compiler turns into vector minimums and maximums; row by row, with a
/// bit test per row, this was a third of the grouping's time for `GROUP BY "C1" % 100`.
fn value_range(values: &[i64; BLOCK_ROWS], nulls: &BlockMask, mask: &BlockMask) -> (i64, i64, bool) {
    let (mut low, mut high, mut null) = (i64::MAX, i64::MIN, false);
    for (word, (&selected, &word_nulls)) in mask.iter().zip(nulls).enumerate() {
        null |= selected & word_nulls != 0;
        let valid = selected & !word_nulls;
        if valid == u64::MAX {
            for &value in &values[word * 64..word * 64 + 64] {
                low = low.min(value);
                high = high.max(value);
            }
            continue;
        }
        let mut bits = valid;
        while bits != 0 {
            let value = values[word * 64 + bits.trailing_zeros() as usize];
            low = low.min(value);
            high = high.max(value);
            bits &= bits - 1;
        }
    }
    (low, high, null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use numadb_storage::bitpack::MASK_WORDS;
    use std::collections::HashSet;

    #[test]
    fn a_key_list_gives_back_the_keys_pushed_and_their_nulls_from_the_first_null_on() {
        let key = |values: [i64; KEYS_MAX], nulls: u8| IntKey { values, nulls };
        for width in 1..=KEYS_MAX {
            // Key values past `width` are 0, as `key_of` leaves them.
            let mask = |values: [i64; KEYS_MAX]| std::array::from_fn(|k| if k < width { values[k] } else { 0 });
            let keys = [
                key(mask([i64::MIN, 2, 3, 4]), 0),
                key(mask([i64::MAX, -1, 0, 7]), 0),
                key(mask([0, 0, 0, 0]), 1),
                key(mask([5, 6, 7, 8]), 0),
                key(mask([0, 9, 0, 1]), ((1 << width) - 1) & 0b101),
            ];
            let mut list = KeyList::new(width);
            for (pushed, key) in keys.iter().enumerate() {
                list.push(key);
                assert_eq!(list.len(), pushed + 1);
                // No flags are kept before the first NULL.
                assert_eq!(list.nulls.is_empty(), keys[..=pushed].iter().all(|key| key.nulls == 0));
            }
            assert_eq!(list.iter().collect::<Vec<_>>(), keys);
            for (group, key) in keys.iter().enumerate() {
                assert!(list.is(group, key));
                assert!(!list.is(group, &IntKey { nulls: key.nulls ^ 1, ..*key }), "NULL flags count");
                let mut other = *key;
                other.values[width - 1] = other.values[width - 1].wrapping_add(1);
                assert!(!list.is(group, &other), "every key's value counts");
            }
            list.clear();
            assert!(list.is_empty() && list.nulls.is_empty());
        }
    }

    #[test]
    fn keys_of_every_width_with_nulls_arriving_late_survive_the_index_spills_and_merges() {
        // Three tables, each finding 120 000 keys through the index (NULLs only after the first 50 000, so that
        // the lists' flags begin late), spilling into 4 partitions, then cut into 3 and merged: every key is a
        // group exactly once.
        for width in 0..=KEYS_MAX {
            let mut random = fastrand::Rng::with_seed(12_345 + width as u64);
            let mut tables: Vec<IntGroups> = (0..3).map(|_| IntGroups::new(width, &[], 0)).collect();
            let mut expected: HashSet<IntKey> = HashSet::new();
            for table in &mut tables {
                table.spill_into(4);
                for found in 0..120_000 {
                    let mut key = IntKey { values: [0; KEYS_MAX], nulls: 0 };
                    for k in 0..width {
                        if found > 50_000 && random.u8(..5) == 0 {
                            key.nulls |= 1 << k;
                        } else {
                            key.values[k] = random.i64(-150..150);
                        }
                    }
                    expected.insert(key);
                    let group = table.find_or_add(key);
                    assert_eq!(table.order.get(group), key);
                    table.spill_if_full();
                }
            }
            let mut parts: Vec<Vec<GroupsPart>> = tables.into_iter().map(|table| table.into_parts(3, None)).collect();
            let mut merged_keys = HashSet::new();
            for part in 0..3 {
                let mut merged = IntGroups::new(width, &[], 0);
                for table_parts in &mut parts {
                    merged.merge_part(std::mem::replace(&mut table_parts[part], GroupsPart::empty(width, None, false)));
                }
                for key in merged.order.iter() {
                    assert!(merged_keys.insert(key), "{key:?} is a group twice (width {width})");
                }
            }
            assert_eq!(merged_keys, expected, "width {width}");
        }
    }

    #[test]
    fn a_shapes_union_covers_both_shapes() {
        let shape = |low: i64, values: usize, null: bool| KeyShape { low, values, null };
        let cases = [
            (shape(3, 10, false), shape(1, 5, false)),
            (shape(3, 10, false), shape(20, 5, true)),
            (shape(0, 0, true), shape(-4, 2, false)),
            (shape(-4, 2, false), shape(0, 0, true)),
            (shape(i64::MAX - 1, 2, false), shape(i64::MIN, 2, false)),
        ];
        for (a, b) in cases {
            let union = a.union(&b);
            if union.values <= DIRECT_SLOTS {
                assert!(union.covers(&a) && union.covers(&b), "{a:?} ∪ {b:?} = {union:?}");
            }
        }
        assert_eq!(shape(3, 10, false).union(&shape(1, 5, true)), shape(1, 12, true));
        // Too far apart for a table: more slots than it may have, so the caller keeps the new shape alone.
        assert!(shape(i64::MAX - 1, 2, false).union(&shape(i64::MIN, 2, false)).values > DIRECT_SLOTS);
    }

    #[test]
    fn a_direct_table_lengthened_at_either_end_finds_every_group_once() {
        // Blocks of consecutive values going up, then down, then back over values seen, a block of NULLs, ones
        // of no selected rows, and one half selected: every row's group holds its value, and no key is a group twice.
        let run = |first: i64| -> [i64; BLOCK_ROWS] { std::array::from_fn(|row| first + row as i64) };
        let rows = BLOCK_ROWS as i64;
        let all: BlockMask = [u64::MAX; MASK_WORDS];
        let half: BlockMask = [0x5555_5555_5555_5555; MASK_WORDS];
        let blocks: Vec<(i64, BlockMask, BlockMask)> = vec![
            // First a block of no selected rows: a table of no values, which has no end to lengthen.
            (7 * rows, [0; MASK_WORDS], [0; MASK_WORDS]),
            (0, all, [0; MASK_WORDS]),
            (rows, all, [0; MASK_WORDS]),
            (-rows, all, [0; MASK_WORDS]),
            (3 * rows, half, [0; MASK_WORDS]),
            (rows / 2, all, [0; MASK_WORDS]),
            (0, all, all),
            (-3 * rows, [0; MASK_WORDS], [0; MASK_WORDS]),
            (-2 * rows, all, [0; MASK_WORDS]),
            (5 * rows, all, [1; MASK_WORDS]),
        ];
        let mut table = IntGroups::new(1, &[], 0);
        let mut keys = HashSet::new();
        for (first, mask, nulls) in blocks {
            let block = IntBlock::of(run(first), nulls);
            table.find_groups(std::slice::from_ref(&block), &mask);
            for_each_set(&mask, |row| {
                keys.insert(IntKey::one(block.int(row)));
                let key = table.order.get(table.groups[row] as usize);
                assert_eq!(key, IntKey::one(block.int(row)), "row {row} of the block from {first}");
            });
            let distinct: HashSet<IntKey> = table.order.iter().collect();
            assert_eq!(distinct.len(), table.order.len(), "a key found twice, after the block from {first}");
        }
        assert_eq!(table.order.iter().collect::<HashSet<_>>(), keys);
        assert!(keys.contains(&IntKey::one(None)) && keys.contains(&IntKey::one(Some(-2 * rows))));
    }

    #[test]
    fn tables_whose_blocks_each_fall_outside_the_last_layout_are_laid_out_within_a_budget() {
        // Two keys: one drifting up block after block (as `jmp / 3`), one spanning 64 values per block in turn
        // (so that a block's pairs fit a direct table, but never the table before): every block would lay out a
        // new table, placing every group found so far. No spill, so the table keeps them all.
        let rows = BLOCK_ROWS as i64;
        let all: BlockMask = [u64::MAX; MASK_WORDS];
        let mut table = IntGroups::new(2, &[], 0);
        let mut keys = HashSet::new();
        let blocks = 64;
        for block in 0..blocks {
            let drifting = IntBlock::of(std::array::from_fn(|row| block * rows + row as i64 / 32), [0; MASK_WORDS]);
            let other = IntBlock::of(std::array::from_fn(|row| (block % 7) * 1000 + row as i64 % 64), [0; MASK_WORDS]);
            let block_keys = [drifting, other];
            table.find_groups(&block_keys, &all);
            for_each_set(&all, |row| {
                let key = key_of(&block_keys, row);
                keys.insert(key);
                assert_eq!(table.order.get(table.groups[row] as usize), key, "row {row} of block {block}");
            });
        }
        assert_eq!(table.order.len(), keys.len(), "every pair is a group once");
        assert_eq!(table.order.iter().collect::<HashSet<_>>(), keys);
        // Laid out for every block, the tables would have placed 64 * 63 / 2 blocks' worth of groups.
        let budget = RELAYOUT_GROUPS_PER_ROW * (blocks * rows) as u64 + RELAYOUT_GROUPS_FREE;
        assert!(table.relaid_groups <= budget, "{} groups placed anew", table.relaid_groups);
        assert!((keys.len() * (blocks as usize - 1) / 2) as u64 > budget, "the test reaches the budget");
    }

    #[test]
    fn a_key_ranges_parts_tile_it_and_each_covers_its_keys() {
        let shape = |low: i64, values: usize, null: bool| KeyShape { low, values, null };
        for range in [shape(-5, 200_000, true), shape(7, 1000, false), shape(0, 3, true), shape(0, 0, true)] {
            let range = KeyRange(range);
            for parts in [1, 2, 7, 256] {
                let shift = range.shift(parts);
                let mut slots = 0;
                for part in 0..parts {
                    let part_shape = range.part_shape(part, shift);
                    slots += part_shape.values + usize::from(part_shape.null);
                }
                assert_eq!(slots, range.width(), "{range:?} in {parts} parts");
                let values = (0..range.0.values as i64).map(|offset| Some(range.0.low + offset));
                for value in values.chain(range.0.null.then_some(None)) {
                    let part = range.part(&IntKey::one(value), shift, parts);
                    assert!(part < parts);
                    let own = value.map_or(shape(0, 0, true), |value| shape(value, 1, false));
                    assert!(range.part_shape(part, shift).covers(&own), "{value:?} of {range:?}: part {part}");
                }
                // Outside the range: the last part, not past it.
                assert_eq!(range.part(&IntKey::one(Some(range.0.low - 1)), shift, parts), parts - 1);
            }
        }
    }

    #[test]
    fn a_key_range_needs_every_tables_groups_in_its_direct_table() {
        let table = |low: i64, values: usize, null: bool, groups: usize| {
            let mut table = IntGroups::new(1, &[], 0);
            table.direct_shape = Some([KeyShape { low, values, null }; KEYS_MAX]);
            table.order.clear();
            (0..groups as i64).for_each(|value| table.order.push(&IntKey::one(Some(low + value))));
            table
        };
        let shape = |low: i64, values: usize, null: bool| KeyShape { low, values, null };
        let (a, b, empty) = (table(0, 100, false, 100), table(50, 250, true, 10), IntGroups::new(1, &[], 0));
        assert_eq!(KeyRange::of([&a, &b, &empty]), Some(KeyRange(shape(0, 300, true))));
        assert_eq!(KeyRange::of([&empty]), None);
        let mut outside = table(50, 250, true, 10);
        outside.outside_direct = true;
        assert_eq!(KeyRange::of([&a, &outside]), None);
        let mut spilled = table(0, 100, false, 100);
        spilled.spilled.push(GroupsPart::empty(1, None, false));
        assert_eq!(KeyRange::of([&spilled]), None);
        // Spilled by its last block: no groups left in it, but its spilled ones count.
        let mut all_spilled = IntGroups::new(1, &[], 0);
        all_spilled.spilled.push(GroupsPart::empty(1, None, false));
        assert_eq!(KeyRange::of([&a, &all_spilled]), None);
        let mut two_keys = table(0, 100, false, 100);
        two_keys.keys = 2;
        assert_eq!(KeyRange::of([&two_keys]), None);
        let far = table(10 * DIRECT_SLOTS as i64, 100, false, 100);
        assert_eq!(KeyRange::of([&a, &far]), None);
    }

    #[test]
    fn value_ranges_take_the_selected_non_null_rows_only() {
        // A splitmix64 stream: the crate has no random number generator of its own.
        let mut state = 3u64;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        // Whole words of every kind, and random ones.
        let words = [0, u64::MAX, 1 << 63, 0x00FF_0000_FFFF_0001];
        for round in 0..200i64 {
            let values: Box<[i64; BLOCK_ROWS]> =
                Box::new(std::array::from_fn(|_| (next() % 2000) as i64 - 1000 * (round % 7 + 1)));
            let mut pick = |kinds: u64| match next() % kinds {
                r if r < 4 => words[r as usize],
                _ => next(),
            };
            let mask: BlockMask = std::array::from_fn(|_| pick(6));
            let nulls: BlockMask = std::array::from_fn(|_| pick(8));
            let (mut low, mut high, mut null) = (i64::MAX, i64::MIN, false);
            for row in (0..BLOCK_ROWS).filter(|&row| mask[row / 64] >> (row % 64) & 1 == 1) {
                if nulls[row / 64] >> (row % 64) & 1 == 1 {
                    null = true;
                } else {
                    (low, high) = (low.min(values[row]), high.max(values[row]));
                }
            }
            assert_eq!(value_range(&values, &nulls, &mask), (low, high, null), "round {round}");
        }
    }
}
