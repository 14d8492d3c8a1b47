//! Window functions: `f(…) OVER (PARTITION BY … ORDER BY …)`, each row's value computed over the rows of its
//! partition, appended to the row as a column.
//!
//! Each call sorts the row numbers by its partition keys, then its order keys, and walks each partition once.
//! Rows whose order keys are equal are *peers*: `rank` gives them the same number, and an aggregate's frame (with
//! ORDER BY, PostgreSQL's default `RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW`) ends after the last of
//! them, so peers see the same running total. Without ORDER BY every row of a partition is a peer of every other:
//! the aggregate is the partition's. Rows keep their input order; only the appended columns depend on the sort.

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
    },
    /// An aggregate over the frame: the partition's rows up to the row's last peer.
    Aggregate(AggregateCall),
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
    /// The result type.
    pub data_type: DataType,
}

impl WindowCall {
    /// Every expression the call evaluates, for renumbering.
    pub fn try_map_exprs(&self, f: &mut dyn FnMut(&Expr) -> Result<Expr, ExecError>) -> Result<Self, ExecError> {
        let function = match &self.function {
            WindowFunction::Lag { argument, offset } => WindowFunction::Lag { argument: f(argument)?, offset: *offset },
            WindowFunction::Aggregate(call) => WindowFunction::Aggregate(call.try_map_exprs(f)?),
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
            data_type: self.data_type,
        })
    }
}

/// Compares two rows' sort keys as ORDER BY does (direction and NULL placement per key).
pub fn compare_sort_keys(a: &[Value], b: &[Value], keys: &[SortKey]) -> Ordering {
    for ((x, y), key) in a.iter().zip(b).zip(keys) {
        let ordering = compare_directed(x, y, key.descending, key.nulls_first);
        if ordering.is_ne() {
            return ordering;
        }
    }
    Ordering::Equal
}

/// How `x` and `y` order under one key's direction and NULL placement.
pub(crate) fn compare_directed(x: &Value, y: &Value, descending: bool, nulls_first: bool) -> Ordering {
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
        evaluate_partition(rows, &keys, &sorted[start..end], call, params, &mut values)?;
        start = end;
    }
    Ok(values)
}

/// Whether two rows' keys are equal as ORDER BY and GROUP BY see them (NULL equals NULL, NaN equals NaN).
fn same(a: &[Value], b: &[Value]) -> bool {
    a.iter().zip(b).all(|(x, y)| x.sort_cmp(y).is_eq())
}

/// Fills `values` for the rows of one partition (`members`: row numbers in window order).
fn evaluate_partition(
    rows: &[Vec<Value>],
    keys: &[(Vec<Value>, Vec<Value>)],
    members: &[usize],
    call: &WindowCall,
    params: &[Value],
    values: &mut [Value],
) -> Result<(), ExecError> {
    let peers = |a: usize, b: usize| same(&keys[a].1, &keys[b].1);
    match &call.function {
        WindowFunction::RowNumber => {
            for (position, &row) in members.iter().enumerate() {
                values[row] = Value::Int(position as i64 + 1);
            }
        }
        WindowFunction::Rank | WindowFunction::DenseRank => {
            let (mut rank, mut dense) = (0, 0);
            for (position, &row) in members.iter().enumerate() {
                if position == 0 || !peers(members[position - 1], row) {
                    rank = position as i64 + 1;
                    dense += 1;
                }
                let value = if call.function == WindowFunction::Rank { rank } else { dense };
                values[row] = Value::Int(value);
            }
        }
        WindowFunction::Lag { argument, offset } => {
            for (position, &row) in members.iter().enumerate() {
                let other = (position as i64).checked_sub(*offset);
                values[row] = match other.and_then(|o| usize::try_from(o).ok()).and_then(|o| members.get(o)) {
                    Some(&other) => argument.eval(&rows[other], params)?,
                    None => Value::Null,
                };
            }
        }
        WindowFunction::Aggregate(aggregate) => {
            let mut accumulator = Accumulator::new(aggregate);
            let mut start = 0;
            while start < members.len() {
                // The peer group of members[start]: the frame grows by all of it at once.
                let mut end = start + 1;
                while end < members.len() && peers(members[start], members[end]) {
                    end += 1;
                }
                for &row in &members[start..end] {
                    aggregate.feed(&mut accumulator, &rows[row], params)?;
                }
                let value = accumulator.finish()?;
                for &row in &members[start..end] {
                    values[row] = value.clone();
                }
                start = end;
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
        let mut rows: Vec<Vec<Value>> = rows.iter().map(|r| r.iter().map(|&v| Value::Int(v)).collect()).collect();
        let call = WindowCall { function, partition_by: vec![column(0)], order_by, data_type: DataType::BigInt };
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
        let sum = WindowFunction::Aggregate(AggregateCall {
            function: AggregateFunction::Sum,
            argument: Some(column(1)),
            distinct: false,
            filter: None,
            extra: Vec::new(),
            order_by: Vec::new(),
            data_type: DataType::BigInt,
        });
        let ints = |v: &[i64]| v.iter().map(|&v| Value::Int(v)).collect::<Vec<_>>();
        assert_eq!(run(&ROWS, sum.clone(), vec![ascending(1)]), ints(&[50, 5, 20, 20, 12, 90]));
        assert_eq!(run(&ROWS, sum, Vec::new()), ints(&[90, 12, 90, 90, 12, 90]));
    }

    #[test]
    fn lag_and_lead_stop_at_the_partitions_ends() {
        let lag = |offset| WindowFunction::Lag { argument: column(1), offset };
        let order = || vec![SortKey { expr: column(1), descending: true, nulls_first: true }];
        let got = run(&[[1, 1], [1, 2], [1, 3], [2, 9]], lag(1), order());
        assert_eq!(got, [Value::Int(2), Value::Int(3), Value::Null, Value::Null]);
        let got = run(&[[1, 1], [1, 2], [1, 3], [2, 9]], lag(-2), order());
        assert_eq!(got, [Value::Null, Value::Null, Value::Int(1), Value::Null]);
    }
}
