//! Integer expressions a block (1024 rows) at a time.
//!
//! [`Expr::eval`] walks the expression tree once per row and passes every value as a [`Value`]; for a filter such
//! as `"C1" + "C2" < 2500000` over millions of rows that walk is nearly all the time. Here the columns of a block
//! are decoded once into arrays of `i64`, and each node of the tree is one loop over the block. Only what has the
//! same result either way is taken: comparisons of integer arithmetic (`+ - * / %`, unary minus) over INTEGER and
//! BIGINT columns, integer constants and parameters. NULL rows (and the rows past a partition's end) are NULL in
//! every node, so they raise no error; any other row that overflows its type or divides by zero raises the error
//! the row-at-a-time evaluation raises (22003, 22012).

use numadb_storage::bitpack::{BLOCK_ROWS, BlockMask, MASK_WORDS};
use numadb_storage::{ColumnData, DataType, Partition, Value};

use crate::error::ExecError;
use crate::expr::{BinaryOp, Expr, checked_int, division_by_zero};
use crate::filter::TriMask;

/// A block of integers with its NULL rows (bit set: NULL, or no row there).
pub(crate) struct IntBlock {
    /// On the heap: blocks are handed up the expression tree, and 8 KiB moves were a sixth of a GROUP BY's time.
    values: Box<[i64; BLOCK_ROWS]>,
    nulls: BlockMask,
}

impl IntBlock {
    /// Row `row`'s value.
    pub(crate) fn value(&self, row: usize) -> Value {
        if self.nulls[row / 64] >> (row % 64) & 1 == 1 { Value::Null } else { Value::Int(self.values[row]) }
    }

    /// The values (anything on NULL rows).
    pub(crate) fn values(&self) -> &[i64; BLOCK_ROWS] {
        &self.values
    }

    /// The NULL rows (and those not evaluated).
    pub(crate) fn nulls(&self) -> &BlockMask {
        &self.nulls
    }

    /// Row `row`'s integer, `None` for NULL.
    #[inline]
    pub(crate) fn int(&self, row: usize) -> Option<i64> {
        if self.nulls[row / 64] >> (row % 64) & 1 == 1 { None } else { Some(self.values[row]) }
    }
}

/// Whether `expr` is a comparison that [`predicate_block`] evaluates.
pub(crate) fn is_int_comparison(expr: &Expr) -> bool {
    match expr {
        Expr::Binary { op, left, right, .. } if op.is_comparison() => is_int_expr(left) && is_int_expr(right),
        _ => false,
    }
}

fn is_int_type(data_type: DataType) -> bool {
    matches!(data_type, DataType::Integer | DataType::BigInt)
}

/// Whether `expr` is integer arithmetic [`int_block_of`] evaluates.
pub(crate) fn is_int_expr(expr: &Expr) -> bool {
    match expr {
        Expr::Column { data_type, .. } | Expr::Param { data_type, .. } => is_int_type(*data_type),
        Expr::Literal { value, data_type } => is_int_type(*data_type) && matches!(value, Value::Int(_) | Value::Null),
        Expr::Binary { op, left, right, data_type } => {
            matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod)
                && is_int_type(*data_type)
                && is_int_expr(left)
                && is_int_expr(right)
        }
        Expr::Negate { expr, data_type } => is_int_type(*data_type) && is_int_expr(expr),
        _ => false,
    }
}

/// Whether `expr` is a GROUP BY key [`int_block_of`] evaluates: integer arithmetic, a text column, whose
/// dictionary codes stand for its strings within a partition (equal strings, equal codes), or a boolean column
/// (0 or 1).
pub(crate) fn is_group_key(expr: &Expr) -> bool {
    is_int_expr(expr) || matches!(expr, Expr::Column { data_type: DataType::Text | DataType::Boolean, .. })
}

/// The TRUE and FALSE rows of `expr` (an [`is_int_comparison`]) in block `block` of `partition`, adding the bytes
/// of the columns it decodes to `reads`. Rows set in `skip` are not evaluated (neither TRUE nor FALSE).
pub(crate) fn predicate_block(
    expr: &Expr,
    partition: &Partition,
    block: usize,
    params: &[Value],
    skip: &BlockMask,
    reads: &mut [u64],
) -> Result<TriMask, ExecError> {
    let Expr::Binary { op, left, right, .. } = expr else {
        return Err(ExecError::internal("not an integer comparison"));
    };
    let absent = absent_or_skipped(partition, block, skip);
    let left = int_block(left, partition, block, &absent, params, reads)?;
    let right = int_block(right, partition, block, &absent, params, reads)?;
    let (mut t, mut f) = ([0u64; MASK_WORDS], [0u64; MASK_WORDS]);
    for word in 0..MASK_WORDS {
        let (mut hits, rows) = (0u64, !(left.nulls[word] | right.nulls[word]));
        for bit in 0..64 {
            let (a, b) = (left.values[word * 64 + bit], right.values[word * 64 + bit]);
            let hit = match op {
                BinaryOp::Eq => a == b,
                BinaryOp::NotEq => a != b,
                BinaryOp::Lt => a < b,
                BinaryOp::LtEq => a <= b,
                BinaryOp::Gt => a > b,
                BinaryOp::GtEq => a >= b,
                _ => return Err(ExecError::internal("not a comparison")),
            };
            hits |= u64::from(hit) << bit;
        }
        t[word] = hits & rows;
        f[word] = !hits & rows;
    }
    Ok(TriMask { t, f: Some(f) })
}

/// `expr` (an [`is_int_expr`]) over block `block` of `partition`, except the rows set in `skip` (NULL).
pub(crate) fn int_block_of(
    expr: &Expr,
    partition: &Partition,
    block: usize,
    params: &[Value],
    skip: &BlockMask,
    reads: &mut [u64],
) -> Result<IntBlock, ExecError> {
    int_block(expr, partition, block, &absent_or_skipped(partition, block, skip), params, reads)
}

/// The rows of block `block` not to evaluate: those past the partition's end and those set in `skip`.
fn absent_or_skipped(partition: &Partition, block: usize, skip: &BlockMask) -> BlockMask {
    let present = partition.rows().saturating_sub(block * BLOCK_ROWS).min(BLOCK_ROWS);
    std::array::from_fn(|word| {
        let first = word * 64;
        let absent = if present >= first + 64 {
            0
        } else if present <= first {
            u64::MAX
        } else {
            !((1u64 << (present - first)) - 1)
        };
        absent | skip[word]
    })
}

/// A block of `value`s, on the heap without passing through the stack.
fn filled(value: i64) -> Box<[i64; BLOCK_ROWS]> {
    vec![value; BLOCK_ROWS].into_boxed_slice().try_into().expect("a block's length")
}

fn int_block(
    expr: &Expr,
    partition: &Partition,
    block: usize,
    absent: &BlockMask,
    params: &[Value],
    reads: &mut [u64],
) -> Result<IntBlock, ExecError> {
    let constant = |value: &Value| match value {
        Value::Int(v) => Ok(IntBlock { values: filled(*v), nulls: *absent }),
        Value::Null => Ok(IntBlock { values: filled(0), nulls: [u64::MAX; MASK_WORDS] }),
        _ => Err(ExecError::internal("an integer expression's constant is not an integer")),
    };
    match expr {
        Expr::Column { index, .. } => {
            let chunk = partition.column(*index);
            // A text column gives its dictionary codes and a boolean one 0 or 1: only grouping asks for those
            // ([`is_group_key`]).
            let (ColumnData::Int(ints) | ColumnData::Bool(ints) | ColumnData::Text { codes: ints, .. }) = chunk.data()
            else {
                return Err(ExecError::internal("an integer column is not stored as integers"));
            };
            let mut out = IntBlock { values: filled(0), nulls: *absent };
            ints.decode_block(block, &mut out.values);
            reads[*index] += chunk.bytes_of_blocks(block..block + 1);
            if let Some(nulls) = chunk.null_mask(block) {
                reads[*index] += (MASK_WORDS * 8) as u64;
                for (word, null) in out.nulls.iter_mut().zip(nulls) {
                    *word |= null;
                }
            }
            Ok(out)
        }
        Expr::Literal { value, .. } => constant(value),
        Expr::Param { index, .. } => constant(params.get(*index).unwrap_or(&Value::Null)),
        Expr::Negate { expr, data_type } => {
            let mut out = int_block(expr, partition, block, absent, params, reads)?;
            let nulls = out.nulls;
            if rows_failing(&nulls, *data_type, &mut out.values, |_, value| value.overflowing_neg()) {
                // A row fails: find the first, as the row-at-a-time evaluation would.
                let operand = int_block(expr, partition, block, absent, params, reads)?;
                for_each_row(&nulls, |row| int_result(operand.values[row].checked_neg(), *data_type).map(drop))?;
                return Err(ExecError::internal("a row failed in bulk and not one by one"));
            }
            Ok(out)
        }
        Expr::Binary { op, left: left_expr, right, data_type } => {
            let mut out = int_block(left_expr, partition, block, absent, params, reads)?;
            let right = int_block(right, partition, block, absent, params, reads)?;
            for (word, null) in out.nulls.iter_mut().zip(right.nulls) {
                *word |= null;
            }
            let (op, data_type, nulls) = (*op, *data_type, out.nulls);
            let b = &right.values;
            // Every row at once, in place over the left operand, with wrapping arithmetic and a flag per row that
            // fails (overflow, a divisor of 0): loops the compiler can vectorize. Only where a row not NULL fails
            // is the block gone through row by row below, for the first error in row order.
            let values = &mut out.values;
            let failed =
                match op {
                    BinaryOp::Add => rows_failing(&nulls, data_type, values, |r, a| a.overflowing_add(b[r])),
                    BinaryOp::Sub => rows_failing(&nulls, data_type, values, |r, a| a.overflowing_sub(b[r])),
                    BinaryOp::Mul => rows_failing(&nulls, data_type, values, |r, a| a.overflowing_mul(b[r])),
                    BinaryOp::Div => rows_failing(&nulls, data_type, values, |r, a| {
                        if b[r] == 0 { (0, true) } else { a.overflowing_div(b[r]) }
                    }),
                    // `i64::MIN % -1` is 0 in PostgreSQL (and here), not an overflow.
                    BinaryOp::Mod => rows_failing(&nulls, data_type, values, |r, a| {
                        if b[r] == 0 { (0, true) } else { (a.wrapping_rem(b[r]), false) }
                    }),
                    _ => return Err(ExecError::internal("not integer arithmetic")),
                };
            if !failed {
                return Ok(out);
            }
            let left = int_block(left_expr, partition, block, absent, params, reads)?;
            for_each_row(&nulls, |row| {
                let (a, b) = (left.values[row], right.values[row]);
                let value = match op {
                    BinaryOp::Add => a.checked_add(b),
                    BinaryOp::Sub => a.checked_sub(b),
                    BinaryOp::Mul => a.checked_mul(b),
                    BinaryOp::Div if b == 0 => return Err(division_by_zero()),
                    BinaryOp::Div => a.checked_div(b),
                    BinaryOp::Mod if b == 0 => return Err(division_by_zero()),
                    BinaryOp::Mod => a.checked_rem(b).or(Some(0)),
                    _ => return Err(ExecError::internal("not integer arithmetic")),
                };
                int_result(value, data_type).map(drop)
            })?;
            Err(ExecError::internal("a row failed in bulk and not one by one"))
        }
        _ => Err(ExecError::internal("not an integer expression")),
    }
}

/// Replaces every row's value `values[row]` by `op(row, values[row])`'s, and says whether any row not set in
/// `nulls` fails: its flag is set, or its value is out of `data_type`'s range.
#[inline]
fn rows_failing(
    nulls: &BlockMask,
    data_type: DataType,
    values: &mut [i64; BLOCK_ROWS],
    op: impl Fn(usize, i64) -> (i64, bool),
) -> bool {
    let integer = data_type == DataType::Integer;
    let mut failed = 0u64;
    for (word, &null) in nulls.iter().enumerate() {
        let mut flags = 0u64;
        for bit in 0..64 {
            let row = word * 64 + bit;
            let (value, overflowed) = op(row, values[row]);
            let out_of_range = overflowed || (integer && value != i64::from(value as i32));
            values[row] = value;
            flags |= u64::from(out_of_range) << bit;
        }
        failed |= flags & !null;
    }
    failed != 0
}

/// An integer result checked against its type's range, as [`Expr::eval`] checks it.
#[inline]
fn int_result(value: Option<i64>, data_type: DataType) -> Result<i64, ExecError> {
    match checked_int(value, data_type)? {
        Value::Int(v) => Ok(v),
        _ => Err(ExecError::internal("an integer result is not an integer")),
    }
}

/// Calls `f` with every row not set in `nulls`, in order, stopping at the first error.
fn for_each_row(nulls: &BlockMask, mut f: impl FnMut(usize) -> Result<(), ExecError>) -> Result<(), ExecError> {
    for (word, &null) in nulls.iter().enumerate() {
        if null == 0 {
            for bit in 0..64 {
                f(word * 64 + bit)?;
            }
        } else {
            let mut rows = !null;
            while rows != 0 {
                f(word * 64 + rows.trailing_zeros() as usize)?;
                rows &= rows - 1;
            }
        }
    }
    Ok(())
}
