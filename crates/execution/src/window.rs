//! Window functions: `f(…) OVER (PARTITION BY … ORDER BY …)`, each row's value computed over the rows of its
//! partition, appended to the row as a column.
//!
//! Each call sorts the row numbers by its partition keys, then its order keys, and walks each partition once.
//! Rows whose order keys are equal are *peers*: `rank` gives them the same number, and an aggregate's frame (with
//! ORDER BY, PostgreSQL's default `RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`) ends after the last of
//! them, so peers see the same running total. Without ORDER BY every row of a partition is a peer of every other:
//! the aggregate is the partition's. Rows keep their input order; only the appended columns depend on the sort.
//!
//! A frame clause (`ROWS BETWEEN 2 PRECEDING AND CURRENT ROW`, `GROUPS 1 PRECEDING`, `RANGE BETWEEN 5 PRECEDING
//! AND 5 FOLLOWING`, …) replaces that default for aggregates and `first_value`/`last_value`/`nth_value`. A frame that
//! starts at the partition's first row grows as the rows advance, so its aggregate is accumulated once; any other
//! is aggregated afresh for each row (`ROWS` frames of a few rows, the usual moving averages, stay cheap).

use std::cmp::Ordering;

use numadb_storage::{DataType, Value};

use crate::aggregate::{Accumulator, AggregateCall};
use crate::error::ExecError;
use crate::expr::Expr;
use crate::plan::SortKey;

/// A window function.
#[derive(Debug, Clone, PartialEq)]
pub enum WindowFunction {
    /// `row_number()`: 1, 2, 3, … in the partition's order.
    RowNumber,
    /// `rank()`: the row number of the first of the row's peers (gaps after ties).
    Rank,
    /// `dense_rank()`: the number of peer groups up to the row's (no gaps).
    DenseRank,
    /// `lag(x, n)` (`n` rows before, in the partition) or `lead(x, n)` (after, with a negative `n`); NULL past the
    /// partition's ends.
    Lag {
        /// The value taken from the other row.
        argument: Expr,
        /// Rows back (negative: forward).
        offset: i64,
        /// What a row without that other row gets (evaluated on the row itself), NULL when absent.
        default: Option<Expr>,
    },
    /// An aggregate over the frame (by default the partition's rows up to the row's last peer).
    Aggregate(AggregateCall),
    /// `first_value(x)`: `x` on the frame's first row.
    FirstValue(Expr),
    /// `last_value(x)`: `x` on the frame's last row.
    LastValue(Expr),
    /// `nth_value(x, n)`: `x` on the frame's `n`-th row (from 1), NULL when the frame is shorter.
    NthValue(Expr, u64),
    /// `ntile(n)`: the bucket (1..=n) of the row when the partition is cut into `n` as even as possible, the
    /// larger buckets first.
    Ntile(u64),
    /// `percent_rank()`: `(rank - 1) / (rows - 1)`, 0 for a partition of one row.
    PercentRank,
    /// `cume_dist()`: the share of the partition's rows up to the row's last peer.
    CumeDist,
}

/// Where a frame starts or ends, relative to the current row.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FrameBound {
    /// The partition's first row.
    UnboundedPreceding,
    /// `n` rows (ROWS) or peer groups (GROUPS) before; for RANGE, the rows whose order key is within the offset
    /// before the current row's.
    Preceding(FrameOffset),
    /// The current row (ROWS) or its first/last peer (RANGE, GROUPS).
    CurrentRow,
    /// `n` rows or peer groups after; for RANGE, the rows whose order key is within the offset after.
    Following(FrameOffset),
    /// The partition's last row.
    UnboundedFollowing,
}

/// A frame bound's offset: a count of rows or peer groups, or for RANGE a distance between order keys (an
/// integer for an integer key, a double for a double key).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FrameOffset {
    /// Rows, peer groups, or an integer distance.
    Count(u64),
    /// A distance between double keys.
    Distance(f64),
}

impl FrameOffset {
    fn count(self) -> usize {
        match self {
            FrameOffset::Count(n) => usize::try_from(n).unwrap_or(usize::MAX),
            FrameOffset::Distance(_) => 0,
        }
    }
}

/// What a frame's offsets count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameUnits {
    /// Rows.
    Rows,
    /// Distances between the (single) order key's values; CURRENT ROW is the row's peers.
    Range,
    /// Peer groups.
    Groups,
}

/// A frame clause.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Frame {
    /// What the offsets count.
    pub units: FrameUnits,
    /// Where it starts.
    pub start: FrameBound,
    /// Where it ends.
    pub end: FrameBound,
}

/// One window function call.
#[derive(Debug, Clone, PartialEq)]
pub struct WindowCall {
    /// The function.
    pub function: WindowFunction,
    /// `PARTITION BY` (over input rows).
    pub partition_by: Vec<Expr>,
    /// `ORDER BY` (over input rows).
    pub order_by: Vec<SortKey>,
    /// The frame clause; `None` is PostgreSQL's default (RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW).
    pub frame: Option<Frame>,
    /// The result type.
    pub data_type: DataType,
}

impl WindowCall {
    /// Every expression the call evaluates, for renumbering.
    pub fn try_map_exprs(&self, f: &mut dyn FnMut(&Expr) -> Result<Expr, ExecError>) -> Result<Self, ExecError> {
        let function = match &self.function {
            WindowFunction::Lag { argument, offset, default } => WindowFunction::Lag {
                argument: f(argument)?,
                offset: *offset,
                default: default.as_ref().map(&mut *f).transpose()?,
            },
            WindowFunction::Aggregate(call) => WindowFunction::Aggregate(call.try_map_exprs(f)?),
            WindowFunction::FirstValue(argument) => WindowFunction::FirstValue(f(argument)?),
            WindowFunction::LastValue(argument) => WindowFunction::LastValue(f(argument)?),
            WindowFunction::NthValue(argument, n) => WindowFunction::NthValue(f(argument)?, *n),
            other => other.clone(),
        };
        Ok(WindowCall {
            function,
            partition_by: self.partition_by.iter().map(&mut *f).collect::<Result<_, _>>()?,
            order_by: self
                .order_by
                .iter()
                .map(|key| Ok(SortKey { expr: f(&key.expr)?, ..key.clone() }))
                .collect::<Result<_, ExecError>>()?,
            frame: self.frame,
            data_type: self.data_type,
        })
    }
}

/// Compares two rows' sort keys as ORDER BY does (direction and NULL placement per key).
pub fn compare_sort_keys(a: &[Value], b: &[Value], keys: &[SortKey]) -> Ordering {
    compare_directed_keys(a, b, keys.iter().map(|k| (k.descending, k.nulls_first)))
}

/// Compares two rows' keys, each under its `(descending, nulls_first)`.
pub(crate) fn compare_directed_keys(
    a: &[Value],
    b: &[Value],
    directions: impl IntoIterator<Item = (bool, bool)>,
) -> Ordering {
    a.iter()
        .zip(b)
        .zip(directions)
        .map(|((x, y), (descending, nulls_first))| compare_directed(x, y, descending, nulls_first))
        .find(|ordering| ordering.is_ne())
        .unwrap_or(Ordering::Equal)
}

/// How `x` and `y` order under one key's direction and NULL placement.
fn compare_directed(x: &Value, y: &Value, descending: bool, nulls_first: bool) -> Ordering {
    match (x.is_null(), y.is_null()) {
        (true, true) => Ordering::Equal,
        (true, false) if nulls_first => Ordering::Less,
        (true, false) => Ordering::Greater,
        (false, true) if nulls_first => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => {
            let ordering = x.sort_cmp(y);
            if descending { ordering.reverse() } else { ordering }
        }
    }
}

/// Appends to every row one column per call, in call order. `interrupted` is asked between calls and every
/// 64 Ki rows (cancel, deadline).
pub fn append_windows(
    rows: &mut [Vec<Value>],
    calls: &[WindowCall],
    params: &[Value],
    interrupted: &dyn Fn() -> Result<(), ExecError>,
) -> Result<(), ExecError> {
    for call in calls {
        interrupted()?;
        let values = evaluate(rows, call, params, interrupted)?;
        for (row, value) in rows.iter_mut().zip(values) {
            row.push(value);
        }
    }
    Ok(())
}

const INTERRUPT_CHECK_ROWS: usize = 1 << 16;

/// One call's value for every row, in row order.
fn evaluate(
    rows: &[Vec<Value>],
    call: &WindowCall,
    params: &[Value],
    interrupted: &dyn Fn() -> Result<(), ExecError>,
) -> Result<Vec<Value>, ExecError> {
    // (partition keys, order keys) per row, then the row numbers sorted by them.
    let mut keys: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(rows.len());
    for (position, row) in rows.iter().enumerate() {
        if position % INTERRUPT_CHECK_ROWS == 0 {
            interrupted()?;
        }
        let partition = call.partition_by.iter().map(|e| e.eval(row, params)).collect::<Result<_, _>>()?;
        let order = call.order_by.iter().map(|k| k.expr.eval(row, params)).collect::<Result<_, _>>()?;
        keys.push((partition, order));
    }
    let mut sorted: Vec<usize> = (0..rows.len()).collect();
    // Partitions only need to be contiguous; the sort is stable so equal rows keep their input order.
    sorted.sort_by(|&a, &b| {
        let partition = keys[a].0.iter().zip(&keys[b].0).map(|(x, y)| x.sort_cmp(y)).find(|o| o.is_ne());
        partition.unwrap_or_else(|| compare_sort_keys(&keys[a].1, &keys[b].1, &call.order_by))
    });
    interrupted()?;

    let mut values = vec![Value::Null; rows.len()];
    let mut start = 0;
    while start < sorted.len() {
        let mut end = start + 1;
        while end < sorted.len() && same(&keys[sorted[end]].0, &keys[sorted[start]].0) {
            end += 1;
        }
        evaluate_partition(rows, &keys, &sorted[start..end], call, params, &mut values, interrupted)?;
        start = end;
    }
    Ok(values)
}

/// Whether two rows' keys are equal as ORDER BY and GROUP BY see them (NULL equals NULL, NaN equals NaN).
fn same(a: &[Value], b: &[Value]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.sort_cmp(y).is_eq())
}

/// A partition laid out for its frames: each position's peer group (a range of positions), the peer groups'
/// starts, and for RANGE offsets the order key of every position.
struct PartitionFrames<'a> {
    peer_groups: &'a [std::ops::Range<usize>],
    /// The position each peer group starts at, and the partition's length last.
    group_starts: &'a [usize],
    /// Each position's peer group number.
    group_of: &'a [usize],
    /// For RANGE offsets: each position's (single) order key, the positions of the non-NULL ones (which lie
    /// together, sorted in the window's direction), and whether that direction is descending.
    range_keys: Option<RangeKeys<'a>>,
}

/// The order keys a RANGE offset measures from (see [`PartitionFrames::range_keys`]).
struct RangeKeys<'a> {
    keys: &'a [&'a Value],
    non_null: std::ops::Range<usize>,
    descending: bool,
}

impl PartitionFrames<'_> {
    fn length(&self) -> usize {
        self.peer_groups.len()
    }

    /// The rows of the frame of the row at `position`, as a range of positions in the partition.
    fn range(&self, frame: &Frame, position: usize) -> std::ops::Range<usize> {
        let length = self.length();
        let peers = &self.peer_groups[position];
        let group = self.group_of[position];
        let groups = self.group_starts.len() - 1;
        let start = match (frame.start, frame.units) {
            (FrameBound::UnboundedPreceding, _) => 0,
            (FrameBound::UnboundedFollowing, _) => length,
            (FrameBound::CurrentRow, FrameUnits::Rows) => position,
            (FrameBound::CurrentRow, _) => peers.start,
            (FrameBound::Preceding(n), FrameUnits::Rows) => position.saturating_sub(n.count()),
            (FrameBound::Following(n), FrameUnits::Rows) => position.saturating_add(n.count()).min(length),
            (FrameBound::Preceding(n), FrameUnits::Groups) => self.group_starts[group.saturating_sub(n.count())],
            (FrameBound::Following(n), FrameUnits::Groups) => {
                self.group_starts[group.saturating_add(n.count()).min(groups)]
            }
            (FrameBound::Preceding(n), FrameUnits::Range) => self.range_bound(position, n, true, true),
            (FrameBound::Following(n), FrameUnits::Range) => self.range_bound(position, n, false, true),
        };
        let end = match (frame.end, frame.units) {
            (FrameBound::UnboundedPreceding, _) => 0,
            (FrameBound::UnboundedFollowing, _) => length,
            (FrameBound::CurrentRow, FrameUnits::Rows) => position + 1,
            (FrameBound::CurrentRow, _) => peers.end,
            (FrameBound::Preceding(n), FrameUnits::Rows) => (position + 1).saturating_sub(n.count()),
            (FrameBound::Following(n), FrameUnits::Rows) => {
                position.saturating_add(n.count()).saturating_add(1).min(length)
            }
            (FrameBound::Preceding(n), FrameUnits::Groups) => match group.checked_sub(n.count()) {
                Some(last) => self.group_starts[last + 1],
                None => 0,
            },
            (FrameBound::Following(n), FrameUnits::Groups) => {
                self.group_starts[group.saturating_add(n.count()).saturating_add(1).min(groups)]
            }
            (FrameBound::Preceding(n), FrameUnits::Range) => self.range_bound(position, n, true, false),
            (FrameBound::Following(n), FrameUnits::Range) => self.range_bound(position, n, false, false),
        };
        start..end.max(start)
    }

    /// A RANGE offset bound of the row at `position`: where the rows whose key lies `offset` before
    /// (`preceding`) or after it in the window's order begin (`start`) or end. A row whose key is NULL has its
    /// peers (the other NULLs) as the rows within any offset, and NULLs are within no offset of a value, as in
    /// PostgreSQL. The distance is computed without overflow (i128, or f64 for doubles).
    fn range_bound(&self, position: usize, offset: FrameOffset, preceding: bool, start: bool) -> usize {
        let Some(RangeKeys { keys, non_null, descending }) = &self.range_keys else { return position };
        let descending = *descending;
        let peers = &self.peer_groups[position];
        let current = keys[position];
        if current.is_null() {
            return if start { peers.start } else { peers.end };
        }
        // Moving back in the window's order is moving down in value for ascending keys, up for descending ones.
        let down = preceding != descending;
        let key = |value: &Value| -> f64 {
            match value {
                Value::Int(v) => *v as f64,
                Value::Double(v) => *v,
                _ => f64::NAN,
            }
        };
        // `before(k)`: k comes before the bound's value in the window's order (for a start bound), or at or
        // before it (for an end bound).
        let before = |k: &Value| -> bool {
            let ordering = match (current, k, offset) {
                (Value::Int(c), Value::Int(k), FrameOffset::Count(n)) => {
                    let target = if down { i128::from(*c) - i128::from(n) } else { i128::from(*c) + i128::from(n) };
                    i128::from(*k).cmp(&target)
                }
                (c, k, offset) => {
                    let distance = match offset {
                        FrameOffset::Count(n) => n as f64,
                        FrameOffset::Distance(d) => d,
                    };
                    let target = if down { key(c) - distance } else { key(c) + distance };
                    numadb_storage::compare_doubles(key(k), target)
                }
            };
            let ordering = if descending { ordering.reverse() } else { ordering };
            if start { ordering.is_lt() } else { ordering.is_le() }
        };
        non_null.start + keys[non_null.clone()].partition_point(|k| before(k))
    }
}

/// Fills `values` for the rows of one partition (`members`: row numbers in window order).
fn evaluate_partition(
    rows: &[Vec<Value>],
    keys: &[(Vec<Value>, Vec<Value>)],
    members: &[usize],
    call: &WindowCall,
    params: &[Value],
    values: &mut [Value],
    interrupted: &dyn Fn() -> Result<(), ExecError>,
) -> Result<(), ExecError> {
    let peers = |a: usize, b: usize| same(&keys[a].1, &keys[b].1);
    // Each position's peer group, as a range of positions.
    let mut peer_groups: Vec<std::ops::Range<usize>> = Vec::with_capacity(members.len());
    let mut group_start = 0;
    while group_start < members.len() {
        let mut group_end = group_start + 1;
        while group_end < members.len() && peers(members[group_start], members[group_end]) {
            group_end += 1;
        }
        peer_groups.extend(std::iter::repeat_n(group_start..group_end, group_end - group_start));
        group_start = group_end;
    }
    // The default frame: up to the last peer (with ORDER BY every row's peers are the rows equal on it, without
    // one the whole partition).
    let default_frame =
        Frame { units: FrameUnits::Range, start: FrameBound::UnboundedPreceding, end: FrameBound::CurrentRow };
    let frame = call.frame.unwrap_or(default_frame);
    let mut group_starts: Vec<usize> = Vec::new();
    let mut group_of: Vec<usize> = Vec::with_capacity(members.len());
    for (position, peers) in peer_groups.iter().enumerate() {
        if peers.start == position {
            group_starts.push(position);
        }
        group_of.push(group_starts.len() - 1);
    }
    group_starts.push(members.len());
    let has_offset = |bound: FrameBound| matches!(bound, FrameBound::Preceding(_) | FrameBound::Following(_));
    let range_keys: Vec<&Value> =
        if frame.units == FrameUnits::Range && (has_offset(frame.start) || has_offset(frame.end)) {
            members.iter().map(|&row| keys[row].1.first().unwrap_or(&Value::Null)).collect()
        } else {
            Vec::new()
        };
    let range_keys = (!range_keys.is_empty()).then(|| {
        let first = range_keys.iter().position(|k| !k.is_null()).unwrap_or(0);
        let end = range_keys.iter().rposition(|k| !k.is_null()).map_or(first, |last| last + 1);
        RangeKeys {
            keys: &range_keys,
            non_null: first..end,
            descending: call.order_by.first().is_some_and(|key| key.descending),
        }
    });
    let frames =
        PartitionFrames { peer_groups: &peer_groups, group_starts: &group_starts, group_of: &group_of, range_keys };
    let frame_of = |position: usize| frames.range(&frame, position);
    let length = members.len();
    match &call.function {
        WindowFunction::RowNumber => {
            for (position, &row) in members.iter().enumerate() {
                values[row] = Value::Int(position as i64 + 1);
            }
        }
        WindowFunction::Rank | WindowFunction::DenseRank => {
            // A rank is the position of the row's first peer; a dense rank counts the peer groups so far.
            let mut dense = 0;
            for (position, &row) in members.iter().enumerate() {
                let first_peer = peer_groups[position].start;
                if first_peer == position {
                    dense += 1;
                }
                let value = if call.function == WindowFunction::Rank { first_peer as i64 + 1 } else { dense };
                values[row] = Value::Int(value);
            }
        }
        WindowFunction::Lag { argument, offset, default } => {
            for (position, &row) in members.iter().enumerate() {
                let other = (position as i64).checked_sub(*offset);
                values[row] = match other.and_then(|o| usize::try_from(o).ok()).and_then(|o| members.get(o)) {
                    Some(&other) => argument.eval(&rows[other], params)?,
                    None => match default {
                        Some(default) => default.eval(&rows[row], params)?,
                        None => Value::Null,
                    },
                };
            }
        }
        WindowFunction::Aggregate(aggregate) if frame.start == FrameBound::UnboundedPreceding => {
            // Every frame starts at the partition's first row and none ends before the previous one's end: one
            // accumulator takes the rows as the frames grow.
            let mut accumulator = Accumulator::new(aggregate);
            let mut fed = 0;
            let mut last: Option<(usize, Value)> = None;
            for (position, &row) in members.iter().enumerate() {
                let end = frame_of(position).end;
                if let Some((last_end, value)) = &last
                    && *last_end == end
                {
                    values[row] = value.clone();
                    continue;
                }
                for &member in &members[fed..end.max(fed)] {
                    aggregate.feed(&mut accumulator, &rows[member], params)?;
                }
                fed = fed.max(end);
                let value = accumulator.finish()?;
                values[row] = value.clone();
                last = Some((end, value));
            }
        }
        WindowFunction::Aggregate(aggregate) => {
            let mut last: Option<(std::ops::Range<usize>, Value)> = None;
            for (position, &row) in members.iter().enumerate() {
                if position % INTERRUPT_CHECK_ROWS == 0 {
                    interrupted()?;
                }
                let range = frame_of(position);
                if let Some((last_range, value)) = &last
                    && *last_range == range
                {
                    values[row] = value.clone();
                    continue;
                }
                let mut accumulator = Accumulator::new(aggregate);
                for (fed, &member) in members[range.clone()].iter().enumerate() {
                    if fed % INTERRUPT_CHECK_ROWS == INTERRUPT_CHECK_ROWS - 1 {
                        interrupted()?;
                    }
                    aggregate.feed(&mut accumulator, &rows[member], params)?;
                }
                let value = accumulator.finish()?;
                values[row] = value.clone();
                last = Some((range, value));
            }
        }
        WindowFunction::FirstValue(argument)
        | WindowFunction::LastValue(argument)
        | WindowFunction::NthValue(argument, _) => {
            for (position, &row) in members.iter().enumerate() {
                let range = frame_of(position);
                let at = match &call.function {
                    WindowFunction::FirstValue(_) => Some(range.start),
                    WindowFunction::LastValue(_) => range.end.checked_sub(1),
                    WindowFunction::NthValue(_, n) => {
                        usize::try_from(*n - 1).ok().and_then(|n| range.start.checked_add(n))
                    }
                    _ => None,
                };
                values[row] = match at.filter(|at| range.contains(at)) {
                    Some(at) => argument.eval(&rows[members[at]], params)?,
                    None => Value::Null,
                };
            }
        }
        WindowFunction::Ntile(buckets) => {
            // `length` rows in `buckets` buckets: the first `length % buckets` hold one row more.
            let buckets = usize::try_from(*buckets).unwrap_or(usize::MAX).min(length.max(1));
            let (small, larger) = (length / buckets, length % buckets);
            for (position, &row) in members.iter().enumerate() {
                let bucket = if position < larger * (small + 1) {
                    position / (small + 1)
                } else {
                    larger + (position - larger * (small + 1)) / small.max(1)
                };
                values[row] = Value::Int(bucket as i64 + 1);
            }
        }
        WindowFunction::PercentRank | WindowFunction::CumeDist => {
            for (position, &row) in members.iter().enumerate() {
                let group = &peer_groups[position];
                values[row] = Value::Double(match call.function {
                    WindowFunction::PercentRank if length > 1 => group.start as f64 / (length - 1) as f64,
                    WindowFunction::PercentRank => 0.0,
                    _ => group.end as f64 / length as f64,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::AggregateFunction;

    fn column(index: usize) -> Expr {
        Expr::Column { index, data_type: DataType::BigInt }
    }

    fn ascending(index: usize) -> SortKey {
        SortKey { expr: column(index), descending: false, nulls_first: false }
    }

    fn run(rows: &[[i64; 2]], function: WindowFunction, order_by: Vec<SortKey>) -> Vec<Value> {
        run_framed(rows, function, order_by, None)
    }

    fn run_framed(
        rows: &[[i64; 2]],
        function: WindowFunction,
        order_by: Vec<SortKey>,
        frame: Option<Frame>,
    ) -> Vec<Value> {
        let mut rows: Vec<Vec<Value>> = rows.iter().map(|r| r.iter().map(|&v| Value::Int(v)).collect()).collect();
        let call = WindowCall { function, partition_by: vec![column(0)], order_by, frame, data_type: DataType::BigInt };
        append_windows(&mut rows, &[call], &[], &|| Ok(())).unwrap();
        rows.into_iter().map(|mut r| r.pop().unwrap()).collect()
    }

    const ROWS: [[i64; 2]; 6] = [[1, 30], [2, 5], [1, 10], [1, 10], [2, 7], [1, 40]];

    #[test]
    fn ranks_number_peers_alike_within_each_partition_and_keep_the_input_order() {
        let ints = |v: &[i64]| v.iter().map(|&v| Value::Int(v)).collect::<Vec<_>>();
        assert_eq!(run(&ROWS, WindowFunction::Rank, vec![ascending(1)]), ints(&[3, 1, 1, 1, 2, 4]));
        assert_eq!(run(&ROWS, WindowFunction::DenseRank, vec![ascending(1)]), ints(&[2, 1, 1, 1, 2, 3]));
        let numbers = run(&ROWS, WindowFunction::RowNumber, vec![ascending(1)]);
        assert_eq!(
            [&numbers[0], &numbers[1], &numbers[4], &numbers[5]],
            [&Value::Int(3), &Value::Int(1), &Value::Int(2), &Value::Int(4)]
        );
    }

    #[test]
    fn a_running_sum_includes_every_peer_and_without_order_is_the_partitions() {
        let sum = sum();
        let ints = |v: &[i64]| v.iter().map(|&v| Value::Int(v)).collect::<Vec<_>>();
        assert_eq!(run(&ROWS, sum.clone(), vec![ascending(1)]), ints(&[50, 5, 20, 20, 12, 90]));
        assert_eq!(run(&ROWS, sum, Vec::new()), ints(&[90, 12, 90, 90, 12, 90]));
    }

    fn sum() -> WindowFunction {
        WindowFunction::Aggregate(AggregateCall {
            function: AggregateFunction::Sum,
            argument: Some(column(1)),
            distinct: false,
            filter: None,
            extra: Vec::new(),
            order_by: Vec::new(),
            data_type: DataType::BigInt,
        })
    }

    #[test]
    fn frames_bound_the_rows_an_aggregate_sees() {
        // Partition 1 in order: 10, 10, 30, 40 (rows 2, 3, 0, 5); partition 2: 5, 7 (rows 1, 4).
        let ints = |v: &[i64]| v.iter().map(|&v| Value::Int(v)).collect::<Vec<_>>();
        let frame = |rows: bool, start, end| {
            Some(Frame { units: if rows { FrameUnits::Rows } else { FrameUnits::Range }, start, end })
        };
        use FrameBound::{CurrentRow, UnboundedFollowing, UnboundedPreceding};
        let preceding = |n| FrameBound::Preceding(FrameOffset::Count(n));
        let following = |n| FrameBound::Following(FrameOffset::Count(n));
        // A moving sum of the row and the one before.
        let moving = run_framed(&ROWS, sum(), vec![ascending(1)], frame(true, preceding(1), CurrentRow));
        assert_eq!(moving, ints(&[40, 5, 10, 20, 12, 70]));
        // ROWS up to the current row splits peers; RANGE keeps them together.
        let rows = run_framed(&ROWS, sum(), vec![ascending(1)], frame(true, UnboundedPreceding, CurrentRow));
        assert_eq!(rows, ints(&[50, 5, 10, 20, 12, 90]));
        let range = run_framed(&ROWS, sum(), vec![ascending(1)], frame(false, UnboundedPreceding, CurrentRow));
        assert_eq!(range, ints(&[50, 5, 20, 20, 12, 90]));
        // From the current row's first peer to the end.
        let rest = run_framed(&ROWS, sum(), vec![ascending(1)], frame(false, CurrentRow, UnboundedFollowing));
        assert_eq!(rest, ints(&[70, 12, 90, 90, 7, 40]));
        // A frame that is empty for some rows aggregates to NULL.
        let before = run_framed(&ROWS, sum(), vec![ascending(1)], frame(true, UnboundedPreceding, preceding(1)));
        assert_eq!(before, [Value::Int(20), Value::Null, Value::Null, Value::Int(10), Value::Int(5), Value::Int(50)]);
        let after = run_framed(&ROWS, sum(), vec![ascending(1)], frame(true, following(1), following(2)));
        assert_eq!(after, [Value::Int(40), Value::Int(7), Value::Int(40), Value::Int(70), Value::Null, Value::Null]);
        // GROUPS counts peer groups: the two 10s are one.
        let groups = Some(Frame { units: FrameUnits::Groups, start: preceding(1), end: CurrentRow });
        assert_eq!(run_framed(&ROWS, sum(), vec![ascending(1)], groups), ints(&[50, 5, 20, 20, 12, 70]));
        let next = Some(Frame { units: FrameUnits::Groups, start: following(1), end: following(1) });
        let next = run_framed(&ROWS, sum(), vec![ascending(1)], next);
        assert_eq!(next, [Value::Int(40), Value::Int(7), Value::Int(30), Value::Int(30), Value::Null, Value::Null]);
        // RANGE offsets are distances between order keys: 10 before 30 reaches 20 (nothing), before 10 reaches 0.
        let range = Some(Frame { units: FrameUnits::Range, start: preceding(10), end: CurrentRow });
        assert_eq!(run_framed(&ROWS, sum(), vec![ascending(1)], range), ints(&[30, 5, 20, 20, 12, 70]));
        // Descending, PRECEDING means larger keys.
        let descending = SortKey { descending: true, ..ascending(1) };
        let range = Some(Frame { units: FrameUnits::Range, start: preceding(10), end: CurrentRow });
        assert_eq!(run_framed(&ROWS, sum(), vec![descending], range), ints(&[70, 12, 20, 20, 7, 40]));
    }

    #[test]
    fn value_and_distribution_functions_follow_postgresql() {
        let whole = Some(Frame {
            units: FrameUnits::Rows,
            start: FrameBound::UnboundedPreceding,
            end: FrameBound::UnboundedFollowing,
        });
        let ints = |v: &[i64]| v.iter().map(|&v| Value::Int(v)).collect::<Vec<_>>();
        let first = run_framed(&ROWS, WindowFunction::FirstValue(column(1)), vec![ascending(1)], None);
        assert_eq!(first, ints(&[10, 5, 10, 10, 5, 10]));
        // last_value with the default frame is the last peer, not the partition's last row.
        let last = run_framed(&ROWS, WindowFunction::LastValue(column(1)), vec![ascending(1)], None);
        assert_eq!(last, ints(&[30, 5, 10, 10, 7, 40]));
        let last = run_framed(&ROWS, WindowFunction::LastValue(column(1)), vec![ascending(1)], whole);
        assert_eq!(last, ints(&[40, 7, 40, 40, 7, 40]));
        let third = run_framed(&ROWS, WindowFunction::NthValue(column(1), 3), vec![ascending(1)], whole);
        assert_eq!(third, [Value::Int(30), Value::Null, Value::Int(30), Value::Int(30), Value::Null, Value::Int(30)]);
        let ntile = run(&ROWS, WindowFunction::Ntile(3), vec![ascending(1)]);
        assert_eq!(ntile, ints(&[2, 1, 1, 1, 2, 3]));
        let percent = run(&ROWS, WindowFunction::PercentRank, vec![ascending(1)]);
        let cume = run(&ROWS, WindowFunction::CumeDist, vec![ascending(1)]);
        let doubles = |v: &[f64]| v.iter().map(|&v| Value::Double(v)).collect::<Vec<_>>();
        assert_eq!(percent, doubles(&[2.0 / 3.0, 0.0, 0.0, 0.0, 1.0, 1.0]));
        assert_eq!(cume, doubles(&[0.75, 0.5, 0.5, 0.5, 1.0, 1.0]));
    }

    #[test]
    fn lag_and_lead_stop_at_the_partitions_ends() {
        let lag = |offset| WindowFunction::Lag { argument: column(1), offset, default: None };
        let order = || vec![SortKey { expr: column(1), descending: true, nulls_first: true }];
        let got = run(&[[1, 1], [1, 2], [1, 3], [2, 9]], lag(1), order());
        assert_eq!(got, [Value::Int(2), Value::Int(3), Value::Null, Value::Null]);
        let got = run(&[[1, 1], [1, 2], [1, 3], [2, 9]], lag(-2), order());
        assert_eq!(got, [Value::Null, Value::Null, Value::Int(1), Value::Null]);
    }
}
