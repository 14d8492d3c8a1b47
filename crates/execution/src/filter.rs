//! WHERE clauses compiled into block filters.
//!
//! A filter is evaluated 1024 rows at a time and yields a [`TriMask`]: the rows for which the predicate is TRUE
//! and those for which it is FALSE (the rest are UNKNOWN, from NULLs). Comparisons of a column with a constant
//! become ranges on the stored codes and run as SIMD kernels over bit-packed data ([`numadb_storage::bitpack`]);
//! `AND`, `OR` and `NOT` combine masks with three-valued logic. When no column involved has a NULL, the FALSE
//! mask is simply the complement of TRUE and is never built: the thesis query's six ORed comparisons cost six
//! kernel calls and five ORs per block.
//!
//! Anything else (comparisons between two columns, arithmetic) falls back to evaluating the expression row by
//! row on decoded values: correct for every expression, fast only for the compiled shapes.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock};

use numadb_storage::bitpack::{BLOCK_ROWS, BlockMask, MASK_WORDS};
use numadb_storage::{
    ColumnData, Combine, CombinedMasks, DataType, Dictionary, PREFETCH_BLOCKS_DEFAULT, Partition, RangeLeaf, Value,
    compare_doubles,
};

use crate::error::ExecError;
use crate::expr::{BinaryOp, Expr};
use crate::keys::KeySet;

/// Which of a filter's masks its caller reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wanted {
    /// The TRUE rows alone: FALSE and UNKNOWN both drop a row.
    True,
    /// Both the TRUE and the FALSE rows (a filter under NOT, or combined by three-valued logic).
    TrueAndFalse,
}

/// One bound of a text range.
#[derive(Debug, Clone, PartialEq)]
pub enum TextBound {
    /// No bound.
    Unbounded,
    /// `>= s` (lower) or `<= s` (upper).
    Inclusive(Arc<str>),
    /// `> s` (lower) or `< s` (upper).
    Exclusive(Arc<str>),
}

/// A compiled predicate.
#[derive(Debug, Clone, PartialEq)]
pub enum Filter {
    /// TRUE for every row.
    True,
    /// FALSE for every row.
    False,
    /// UNKNOWN for every row (a comparison with NULL).
    Unknown,
    /// Integer (or boolean 0/1) column within `[low, high]`; empty when `low > high`.
    IntRange {
        /// Column.
        column: usize,
        /// Lowest value.
        low: i64,
        /// Highest value.
        high: i64,
    },
    /// Text column within bounds (byte order).
    TextRange {
        /// Column.
        column: usize,
        /// Lower bound.
        low: TextBound,
        /// Upper bound.
        high: TextBound,
    },
    /// Double column compared with a constant.
    DoubleCompare {
        /// Column.
        column: usize,
        /// Comparison.
        op: BinaryOp,
        /// Constant.
        value: f64,
    },
    /// `column IS [NOT] NULL`.
    IsNull {
        /// Column.
        column: usize,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// Integer column whose value is one of a set of keys: what a join hands the scan of its probing side
    /// ([`crate::keys`]), and a long `IN` list of integers. NULL is UNKNOWN, as for `=`.
    IntKeys {
        /// Column.
        column: usize,
        /// The keys.
        keys: Arc<KeySet>,
        /// The keys in order, when known (an `IN` list): a block whose zone map holds none of them is not read,
        /// as the list's `=` ranges would have skipped it. Without them a block is read when it overlaps the
        /// keys' bounds.
        sorted: Option<Arc<[i64]>>,
    },
    /// Evaluated row by row.
    Rows(Expr),
    /// An expression over one text column and constants that the kernels do not take (`LIKE`, `lower(s) = …`):
    /// decided once per string of each partition's dictionary, then per row by its code ([`TextPredicate`]).
    TextCodes(Arc<TextPredicate>),
    /// All must hold.
    And(Vec<Filter>),
    /// One must hold.
    Or(Vec<Filter>),
    /// Negation.
    Not(Box<Filter>),
    /// A boolean CASE: the result of the first arm whose condition is TRUE (a NULL condition passes to the next),
    /// else `otherwise`. Each condition is evaluated on the rows no arm before it took, each result on the rows its
    /// arm takes, in the order written, as PostgreSQL evaluates a CASE: its errors are raised where PostgreSQL's
    /// are.
    Case {
        /// Conditions and their results.
        arms: Vec<(Filter, Filter)>,
        /// The verdict where no condition is TRUE.
        otherwise: Box<Filter>,
    },
    /// `inner IS TRUE` (`verdict` TRUE), `IS FALSE` or `IS UNKNOWN` (`None`): never UNKNOWN itself; what `IS
    /// [NOT] NULL` over a boolean expression compiles to.
    Is {
        /// The filter tested.
        inner: Box<Filter>,
        /// The verdict it must have.
        verdict: Option<bool>,
    },
}

/// Rows for which a predicate is TRUE and FALSE; `f == None` means FALSE is exactly "not TRUE" (no UNKNOWN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TriMask {
    /// TRUE rows.
    pub t: BlockMask,
    /// FALSE rows, when it is not the complement of `t`.
    pub f: Option<BlockMask>,
}

const ALL: BlockMask = [u64::MAX; MASK_WORDS];
const NONE: BlockMask = [0; MASK_WORDS];

fn and_masks(a: &BlockMask, b: &BlockMask) -> BlockMask {
    std::array::from_fn(|i| a[i] & b[i])
}

fn or_masks(a: &BlockMask, b: &BlockMask) -> BlockMask {
    std::array::from_fn(|i| a[i] | b[i])
}

fn not_mask(a: &BlockMask) -> BlockMask {
    std::array::from_fn(|i| !a[i])
}

impl TriMask {
    fn exact(t: BlockMask) -> Self {
        TriMask { t, f: None }
    }

    fn false_mask(&self) -> BlockMask {
        self.f.unwrap_or_else(|| not_mask(&self.t))
    }
}

/// From how many integers on an integer column an `IN` list is looked up as a set of keys
/// ([`Filter::IntKeys`]) rather than compared value by value: one kernel pass per value over each block the
/// value's zone map test leaves, against decoding the block once and looking its 1024 values up. Measured on
/// 10 million uniform rows (2 workers), random values: 32 values took 6.7 ms as ranges and 12.5 as keys, 64
/// took 13.0 and 10.8, 1 000 took 200 and 11.6 (on the sorted key column, where each value's zone map finds
/// one block, keys were faster at every size: 0.29 against 0.45 ms at 32 values).
pub const IN_KEYS_MIN: usize = 48;

/// A constant for comparing with a column: the literal or parameter value.
fn constant(expr: &Expr, params: &[Value]) -> Result<Option<Value>, ExecError> {
    match expr {
        Expr::Literal { .. } | Expr::Param { .. } | Expr::Cast { .. } | Expr::Negate { .. } if expr.is_constant() => {
            Ok(Some(expr.eval(&[], params)?))
        }
        _ => Ok(None),
    }
}

fn column_of(expr: &Expr) -> Option<(usize, DataType)> {
    match expr {
        Expr::Column { index, data_type } => Some((*index, *data_type)),
        _ => None,
    }
}

/// The smallest integer whose conversion to a double is at least `d` (`strictly`: above `d`), if any. The
/// conversion rounds but never goes down as the integer goes up, so a binary search finds it.
fn first_converting_above(d: f64, strictly: bool) -> Option<i64> {
    let passes = |v: i64| if strictly { v as f64 > d } else { v as f64 >= d };
    if !passes(i64::MAX) {
        return None;
    }
    let (mut failing, mut passing) = (i128::from(i64::MIN) - 1, i128::from(i64::MAX));
    while passing - failing > 1 {
        let middle = failing + (passing - failing) / 2;
        if passes(middle as i64) {
            passing = middle;
        } else {
            failing = middle;
        }
    }
    Some(passing as i64)
}

/// The integer range `column op value` selects, or `None` when the comparison is not of that shape.
pub(crate) fn int_range(op: BinaryOp, value: &Value) -> Option<(i64, i64, bool)> {
    // Returns (low, high, negate).
    let (low, high) = match value {
        Value::Int(v) => {
            let v = *v;
            match op {
                BinaryOp::Eq | BinaryOp::NotEq => (v, v),
                BinaryOp::Lt => (i64::MIN, v.checked_sub(1)?),
                BinaryOp::LtEq => (i64::MIN, v),
                BinaryOp::Gt => (v.checked_add(1)?, i64::MAX),
                BinaryOp::GtEq => (v, i64::MAX),
                _ => return None,
            }
        }
        Value::Double(d) => {
            let d = *d;
            if d.is_nan() {
                // NaN sorts above every number.
                return match op {
                    BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::NotEq => Some((i64::MIN, i64::MAX, false)),
                    _ => Some((1, 0, false)),
                };
            }
            // The row-by-row comparison converts the integer to a double (as PostgreSQL compares bigint with
            // double precision), so the range is the integers whose conversion compares so: beyond 2^53 several
            // integers convert to one double, and the bounds must be found, not computed from `d`.
            let empty = (1, 0);
            let at_least = first_converting_above(d, false);
            let above = first_converting_above(d, true);
            let below = |first: Option<i64>| match first {
                None => (i64::MIN, i64::MAX),
                Some(i64::MIN) => empty,
                Some(first) => (i64::MIN, first - 1),
            };
            match op {
                BinaryOp::Eq | BinaryOp::NotEq => match (at_least, above) {
                    (None, _) => empty,
                    (Some(low), None) => (low, i64::MAX),
                    (Some(low), Some(high)) if high > low => (low, high - 1),
                    _ => empty,
                },
                BinaryOp::Lt => below(at_least),
                BinaryOp::LtEq => below(above),
                BinaryOp::Gt => above.map_or(empty, |low| (low, i64::MAX)),
                BinaryOp::GtEq => at_least.map_or(empty, |low| (low, i64::MAX)),
                _ => return None,
            }
        }
        Value::Bool(b) => {
            let v = i64::from(*b);
            match op {
                BinaryOp::Eq | BinaryOp::NotEq => (v, v),
                BinaryOp::Lt => (0, v - 1),
                BinaryOp::LtEq => (0, v),
                BinaryOp::Gt => (v + 1, 1),
                BinaryOp::GtEq => (v, 1),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some((low, high, op == BinaryOp::NotEq))
}

fn compile_comparison(op: BinaryOp, left: &Expr, right: &Expr, params: &[Value]) -> Result<Option<Filter>, ExecError> {
    let (column_expr, constant_expr, op) = match (column_of(left), column_of(right)) {
        (Some(_), None) => (left, right, op),
        (None, Some(_)) => (right, left, op.flipped()),
        _ => return Ok(None),
    };
    let Some(value) = constant(constant_expr, params)? else { return Ok(None) };
    let (column, data_type) = column_of(column_expr).expect("checked above");
    if value.is_null() {
        return Ok(Some(Filter::Unknown));
    }
    let filter = match data_type {
        DataType::Numeric => return Ok(None),
        DataType::Integer | DataType::BigInt | DataType::Boolean => match int_range(op, &value) {
            Some((low, high, negate)) => {
                let range = Filter::IntRange { column, low, high };
                if negate { Filter::Not(Box::new(range)) } else { range }
            }
            None => return Ok(None),
        },
        DataType::Double => {
            let value = match value {
                Value::Double(d) => d,
                Value::Int(i) => i as f64,
                _ => return Ok(None),
            };
            Filter::DoubleCompare { column, op, value }
        }
        DataType::Text => {
            let Value::Text(text) = value else { return Ok(None) };
            let (low, high) = match op {
                BinaryOp::Eq | BinaryOp::NotEq => (TextBound::Inclusive(text.clone()), TextBound::Inclusive(text)),
                BinaryOp::Lt => (TextBound::Unbounded, TextBound::Exclusive(text)),
                BinaryOp::LtEq => (TextBound::Unbounded, TextBound::Inclusive(text)),
                BinaryOp::Gt => (TextBound::Exclusive(text), TextBound::Unbounded),
                BinaryOp::GtEq => (TextBound::Inclusive(text), TextBound::Unbounded),
                _ => return Ok(None),
            };
            let range = Filter::TextRange { column, low, high };
            if op == BinaryOp::NotEq { Filter::Not(Box::new(range)) } else { range }
        }
    };
    Ok(Some(filter))
}

/// Compiles a boolean expression over a table's columns (parameters substituted).
pub fn compile(expr: &Expr, params: &[Value]) -> Result<Filter, ExecError> {
    // An expression of constants and parameters is one value for the statement, as PostgreSQL folds it before
    // anything runs (`NULL::int = 1` is NULL, whatever the rest of the clause would raise).
    let subquery = |node: &Expr| matches!(node, Expr::Subquery { .. } | Expr::QuantifiedSubquery { .. });
    let evaluable = |e: &Expr| e.is_constant() && !e.any_node(&subquery);
    if evaluable(expr) {
        return Ok(match expr.eval(&[], params)? {
            Value::Bool(true) => Filter::True,
            Value::Bool(false) => Filter::False,
            _ => Filter::Unknown,
        });
    }
    let compiled = match expr {
        Expr::Binary { op: op @ (BinaryOp::And | BinaryOp::Or), .. } => {
            // The chain `a OR b OR … OR z`, nested to the left as parsed, is taken whole: compiling each level on
            // its own would test the constness of, and regroup, its whole left operand again (n²/2 for n
            // operands). Its longest constant start is one operand, evaluated whole as above, so that
            // `$1 <> 0 AND 1 / $1 = 1 AND a = 1` stops at a false `$1 <> 0` as PostgreSQL's folding does.
            let mut spine = vec![expr];
            let mut rights = Vec::new();
            while let Some(Expr::Binary { op: node_op, left, right, .. }) = spine.last().copied()
                && node_op == op
            {
                rights.push(right.as_ref());
                spine.push(left);
            }
            spine.reverse();
            rights.reverse();
            // spine[i] is `spine[i - 1] op rights[i - 1]`; spine[0] is the leftmost operand.
            let mut start = 0;
            if evaluable(spine[0]) {
                while start < rights.len() && evaluable(rights[start]) {
                    start += 1;
                }
            }
            let mut parts = Vec::with_capacity(rights.len() + 1);
            for operand in std::iter::once(spine[start]).chain(rights[start..].iter().copied()) {
                match (compile(operand, params)?, op) {
                    (Filter::And(inner), BinaryOp::And) | (Filter::Or(inner), BinaryOp::Or) => parts.extend(inner),
                    (other, _) => parts.push(other),
                }
            }
            if *op == BinaryOp::And { Filter::And(by_class(parts)) } else { Filter::Or(by_class(parts)) }
        }
        Expr::Binary { op, left, right, .. } if op.is_comparison() => {
            compile_comparison(*op, left, right, params)?.unwrap_or_else(|| rows_filter(expr))
        }
        Expr::Not(inner) => negate(compile(inner, params)?),
        Expr::IsNull { expr: inner, negated } => match column_of(inner) {
            Some((column, _)) => Filter::IsNull { column, negated: *negated },
            // A boolean expression is UNKNOWN where it is NULL (`x IS TRUE` is bound as `x IS NOT NULL AND x`).
            // Not where it may fail: its ANDs would be reordered (`by_class`), where PostgreSQL evaluates an
            // expression's operands in the order written.
            None if inner.data_type() == DataType::Boolean && !inner.is_volatile() && !expr_may_fail(inner) => {
                let unknown = Filter::Is { inner: Box::new(compile(inner, params)?), verdict: None };
                if *negated { Filter::Not(Box::new(unknown)) } else { unknown }
            }
            None => rows_filter(expr),
        },
        Expr::Case { branches, otherwise, data_type: DataType::Boolean }
            if !expr.is_volatile() && per_string_column(expr).is_none() =>
        {
            compile_case(branches, otherwise, params)?
        }
        Expr::Between { expr: inner, low, high, negated } => {
            // `x BETWEEN a AND b` is `x >= a AND x <= b`, as PostgreSQL's parser reads it: each comparison a leaf
            // of its own (a kernel's over a column, a block at a time over integer arithmetic, [`rows_leaf`]), the
            // second evaluated only on the rows the first leaves undecided.
            let comparison = |op, bound: &Expr| Expr::Binary {
                op,
                left: inner.clone(),
                right: Box::new(bound.clone()),
                data_type: DataType::Boolean,
            };
            let (lower, upper) = (comparison(BinaryOp::GtEq, low), comparison(BinaryOp::LtEq, high));
            let kernels = |c: &Expr| -> Result<bool, ExecError> {
                Ok(match c {
                    Expr::Binary { op, left, right, .. } => {
                        crate::vector::is_block_comparison(c) || compile_comparison(*op, left, right, params)?.is_some()
                    }
                    _ => false,
                })
            };
            // Other operands (text, doubles) are evaluated row by row: once for both comparisons.
            if !kernels(&lower)? || !kernels(&upper)? {
                return Ok(rows_filter(expr));
            }
            let both = Filter::And(by_class(vec![compile(&lower, params)?, compile(&upper, params)?]));
            if *negated { Filter::Not(Box::new(both)) } else { both }
        }
        Expr::InSet { expr: inner, set, negated } => match column_of(inner) {
            Some((column, data_type)) if data_type.is_integer() => {
                let keys =
                    Filter::IntKeys { column, keys: Arc::clone(set.keys()), sorted: Some(Arc::clone(set.ints())) };
                let any = if set.has_null() { Filter::Or(vec![keys, Filter::Unknown]) } else { keys };
                if *negated { Filter::Not(Box::new(any)) } else { any }
            }
            _ => rows_filter(expr),
        },
        Expr::InList { expr: inner, list, negated } => {
            // A long list of integers on an integer column is one set of keys: each block is decoded once and
            // its values looked up, where one `=` range per value would run a kernel over it per value.
            let key_column = column_of(inner)
                .filter(|(_, data_type)| data_type.is_integer() && list.len() >= IN_KEYS_MIN)
                .map(|(column, _)| column);
            let mut alternatives = Vec::new();
            let mut keys = Vec::new();
            for candidate in list {
                if key_column.is_some()
                    && let Some(Value::Int(key)) = constant(candidate, params)?
                {
                    keys.push(key);
                    continue;
                }
                match compile_comparison(BinaryOp::Eq, inner, candidate, params)? {
                    Some(filter) => alternatives.push(filter),
                    None => return Ok(rows_filter(expr)),
                }
            }
            if let Some(column) = key_column
                && !keys.is_empty()
            {
                keys.sort_unstable();
                keys.dedup();
                let set = Arc::new(KeySet::of(&keys));
                alternatives.push(Filter::IntKeys { column, keys: set, sorted: Some(keys.into()) });
            }
            let any = Filter::Or(alternatives);
            if *negated { Filter::Not(Box::new(any)) } else { any }
        }
        _ => rows_filter(expr),
    };
    Ok(compiled)
}

/// A boolean `CASE WHEN c1 THEN r1 WHEN c2 THEN r2 … ELSE e END` as a [`Filter::Case`] of the compiled conditions
/// and results: row by row, `CASE WHEN "C1" < 100 THEN true ELSE false END` on 20 million rows took 824 ms
/// (DuckDB: 19); here its condition is a kernel's leaf.
///
/// A condition that is a constant (a parameter's value, a subquery's result) is settled as PostgreSQL's folding
/// settles it when it plans: FALSE or NULL leaves its arm out, its result never compiled (nor a constant error in
/// it raised); TRUE makes its result the ELSE, and what follows is never compiled.
fn compile_case(branches: &[(Expr, Expr)], otherwise: &Expr, params: &[Value]) -> Result<Filter, ExecError> {
    let mut arms = Vec::new();
    let mut last = None;
    for (condition, result) in branches {
        match compile(condition, params)? {
            Filter::False | Filter::Unknown => {}
            Filter::True => {
                last = Some(compile(result, params)?);
                break;
            }
            condition => arms.push((condition, compile(result, params)?)),
        }
    }
    let otherwise = match last {
        Some(result) => result,
        None => compile(otherwise, params)?,
    };
    Ok(if arms.is_empty() { otherwise } else { Filter::Case { arms, otherwise: Box::new(otherwise) } })
}

/// `NOT filter`, pushed down through AND and OR (De Morgan's laws, which hold in three-valued logic) and taken
/// off a NOT, as PostgreSQL does before it orders a qual's clauses: `a AND NOT (b OR c)` is the three clauses
/// `a`, `NOT b` and `NOT c`, and the cheapest decides first (`z > 0` before `sqrt(d) > 0`).
fn negate(filter: Filter) -> Filter {
    match filter {
        Filter::True => Filter::False,
        Filter::False => Filter::True,
        Filter::Unknown => Filter::Unknown,
        Filter::Not(inner) => *inner,
        Filter::And(parts) => Filter::Or(parts.into_iter().map(negate).collect()),
        Filter::Or(parts) => Filter::And(parts.into_iter().map(negate).collect()),
        // NOT CASE … is the CASE of the results negated, in three-valued logic as in two.
        Filter::Case { arms, otherwise } => Filter::Case {
            arms: arms.into_iter().map(|(condition, result)| (condition, negate(result))).collect(),
            otherwise: Box::new(negate(*otherwise)),
        },
        other => Filter::Not(Box::new(other)),
    }
}

/// An expression the kernels do not take, as a leaf: per string of a text column's dictionaries where it reads
/// that column alone ([`Filter::TextCodes`]), otherwise row by row ([`Filter::Rows`]).
fn rows_filter(expr: &Expr) -> Filter {
    match per_string_column(expr) {
        Some(column) => Filter::TextCodes(Arc::new(TextPredicate {
            column,
            expr: expr.clone(),
            verdicts: Mutex::new(HashMap::new()),
        })),
        None => Filter::Rows(expr.clone()),
    }
}

/// The text column `expr` can be decided per string of ([`Filter::TextCodes`]): the one column it reads, with no
/// volatile function and no subquery.
fn per_string_column(expr: &Expr) -> Option<usize> {
    let mut columns = Vec::new();
    expr.columns(&mut columns);
    match columns[..] {
        [column]
            if expr.any_node(
                &|node| matches!(node, Expr::Column { index, data_type: DataType::Text } if *index == column),
            ) && !expr.is_volatile()
                && !expr.any_node(&|node| matches!(node, Expr::Subquery { .. } | Expr::QuantifiedSubquery { .. })) =>
        {
            Some(column)
        }
        _ => None,
    }
}

/// A predicate over one text column and constants, decided once per string of each partition's dictionary and
/// then per row by its code.
///
/// Row by row, every row's string was made into a value and the expression walked for it: `s LIKE 'k1%'` over a
/// million rows took 150 ms (DuckDB: 15), `lower(s) = 'k5'` 215 ms. A partition's dictionary holds each string
/// once, so the expression runs once per distinct string (and once for NULL), and a row costs a lookup of two
/// bits. The verdicts are made once per partition, by the first task to reach it, for every task of the scan.
///
/// What is decided per string must be what the rows would decide: the expression reads nothing else, calls no
/// volatile function and holds no subquery. A string whose evaluation fails (`s::int = 3` over `'x'`) may belong
/// to no row the scan evaluates (a row another part of an AND has decided), so a partition with such a string is
/// evaluated row by row instead, where the rows that fail are the rows PostgreSQL would fail on. So is one whose
/// dictionary is large against the rows left to decide (`TEXT_CODES_ROWS_PER_STRING`).
#[derive(Debug)]
pub struct TextPredicate {
    /// The text column.
    column: usize,
    /// The predicate.
    expr: Expr,
    /// Per partition (by address: the statement's snapshot holds its partitions), its verdicts once made; `None`
    /// in them where some string failed.
    verdicts: Mutex<HashMap<usize, PartitionVerdicts>>,
}

/// A partition's verdicts, made once by the first task that needs them; `None` where some string failed.
type PartitionVerdicts = Arc<OnceLock<Option<Verdicts>>>;

impl PartialEq for TextPredicate {
    fn eq(&self, other: &Self) -> bool {
        self.column == other.column && self.expr == other.expr
    }
}

/// A predicate's verdict on each code of a partition's dictionary: TRUE (a bit in `t`), FALSE (in `f`) or
/// UNKNOWN (in neither); and on NULL.
#[derive(Debug)]
struct Verdicts {
    t: Vec<u64>,
    f: Vec<u64>,
    null: Option<bool>,
}

/// The rows left to decide (in the whole partition, as the part of it being scanned has them) per string of its
/// dictionary below which a partition's rows are evaluated one by one rather than its strings. The strings are
/// decided by one task while the partition's other tasks wait, so they must be few against the rows: a
/// dictionary of a million strings (a string per row) behind a clause that left 1 row in 16 took 264-384 ms per
/// string and 25-31 ms row by row; and row by row the workers share the rows.
const TEXT_CODES_ROWS_PER_STRING: usize = 8;

impl TextPredicate {
    /// The predicate.
    pub(crate) fn expr(&self) -> &Expr {
        &self.expr
    }

    /// The leaf's masks for `blocks` of `partition`, like [`rows_leaf`]'s: rows set in `skip` come out neither
    /// TRUE nor FALSE.
    fn leaf(
        &self,
        partition: &Partition,
        blocks: Range<usize>,
        params: &[Value],
        reads: &mut [u64],
        skip: Option<&[BlockMask]>,
        out: &mut Vec<TriMask>,
    ) -> Result<(), ExecError> {
        let chunk = partition.column(self.column);
        let ColumnData::Text { dictionary, codes } = chunk.data() else {
            return rows_leaf(&self.expr, partition, blocks, params, reads, skip, out);
        };
        let skipped = |position: usize| skip.and_then(|s| s.get(position)).copied().unwrap_or(NONE);
        let slot = {
            let mut verdicts = self.verdicts.lock().unwrap_or_else(|p| p.into_inner());
            let address = partition as *const Partition as usize;
            Arc::clone(verdicts.entry(address).or_default())
        };
        if slot.get().is_none() {
            // The rows left to decide in the whole partition, as this part of it has them.
            let undecided: usize = (0..blocks.len())
                .map(|position| {
                    let present = tail_mask(partition.rows(), blocks.start + position);
                    (0..MASK_WORDS).map(|w| (present[w] & !skipped(position)[w]).count_ones() as usize).sum::<usize>()
                })
                .sum();
            let in_partition = undecided * partition.blocks() / blocks.len().max(1);
            if dictionary.len() * TEXT_CODES_ROWS_PER_STRING > in_partition {
                return rows_leaf(&self.expr, partition, blocks, params, reads, skip, out);
            }
        }
        let Some(verdicts) = slot.get_or_init(|| self.decide(dictionary, params)) else {
            return rows_leaf(&self.expr, partition, blocks, params, reads, skip, out);
        };
        let mut values = [0i64; BLOCK_ROWS];
        for (position, block) in blocks.enumerate() {
            let undecided = and_masks(&tail_mask(partition.rows(), block), &not_mask(&skipped(position)));
            if undecided == NONE {
                out.push(TriMask { t: NONE, f: Some(NONE) });
                continue;
            }
            codes.decode_block(block, &mut values);
            reads[self.column] += codes.bytes_of_blocks(block..block + 1);
            let nulls = null_mask(chunk, block, reads, self.column).unwrap_or(NONE);
            let bit = |bits: &[u64], code: i64| bits.get(code as usize / 64).is_some_and(|w| w >> (code % 64) & 1 == 1);
            let (mut t, mut f) = (NONE, NONE);
            for word in 0..MASK_WORDS {
                let (mut t_word, mut f_word) = (0u64, 0u64);
                for (i, &code) in values[word * 64..word * 64 + 64].iter().enumerate() {
                    t_word |= u64::from(bit(&verdicts.t, code)) << i;
                    f_word |= u64::from(bit(&verdicts.f, code)) << i;
                }
                let valid = undecided[word] & !nulls[word];
                let null_rows = undecided[word] & nulls[word];
                t[word] = (t_word & valid) | if verdicts.null == Some(true) { null_rows } else { 0 };
                f[word] = (f_word & valid) | if verdicts.null == Some(false) { null_rows } else { 0 };
            }
            out.push(TriMask { t, f: Some(f) });
        }
        Ok(())
    }

    /// The verdicts on `dictionary`'s strings and on NULL, or `None` if the expression fails on one of them.
    fn decide(&self, dictionary: &Dictionary, params: &[Value]) -> Option<Verdicts> {
        let mut row = vec![Value::Null; self.column + 1];
        let verdict = |row: &[Value]| match self.expr.eval(row, params) {
            Ok(Value::Bool(b)) => Ok(Some(b)),
            Ok(_) => Ok(None),
            Err(error) => Err(error),
        };
        let null = verdict(&row).ok()?;
        let words = dictionary.len().div_ceil(64);
        let (mut t, mut f) = (vec![0u64; words], vec![0u64; words]);
        for code in 0..dictionary.len() {
            row[self.column] = Value::text(dictionary.get(code));
            match verdict(&row).ok()? {
                Some(true) => t[code / 64] |= 1 << (code % 64),
                Some(false) => f[code / 64] |= 1 << (code % 64),
                None => {}
            }
        }
        Some(Verdicts { t, f, null })
    }
}

impl Filter {
    /// Whether the filter is a leaf evaluated on rows, which may fail ([`Filter::Rows`]; a
    /// [`Filter::TextCodes`] falls back to it).
    pub(crate) fn is_evaluated_on_rows(&self) -> bool {
        matches!(self, Filter::Rows(_) | Filter::TextCodes(_))
    }

    /// What evaluating the filter on a row costs, as PostgreSQL estimates a clause (one per operator, function
    /// and cast, two for a cast from text, which prints and parses): what orders the parts that may fail.
    pub(crate) fn cost(&self) -> usize {
        match self {
            Filter::And(parts) | Filter::Or(parts) => parts.iter().map(Filter::cost).sum(),
            Filter::Case { arms, otherwise } => {
                arms.iter().map(|(condition, result)| condition.cost() + result.cost()).sum::<usize>()
                    + otherwise.cost()
            }
            Filter::Not(inner) | Filter::Is { inner, .. } => inner.cost(),
            Filter::Rows(expr) => expr_cost(expr),
            Filter::TextCodes(predicate) => expr_cost(&predicate.expr),
            Filter::True | Filter::False | Filter::Unknown | Filter::IsNull { .. } => 0,
            _ => 1,
        }
    }

    /// Whether the filter has a leaf evaluated on rows (or per string), however deep under NOT, AND and OR.
    pub(crate) fn reads_rows(&self) -> bool {
        match self {
            Filter::And(parts) | Filter::Or(parts) => parts.iter().any(Filter::reads_rows),
            Filter::Case { .. } => self.any_part(Filter::reads_rows),
            Filter::Not(inner) | Filter::Is { inner, .. } => inner.reads_rows(),
            other => other.is_evaluated_on_rows(),
        }
    }

    /// Whether evaluating the filter may raise an error: it has a leaf evaluated on rows whose expression may
    /// ([`expr_may_fail`]: a cast, a division), however deep under NOT, AND and OR. The kernels' leaves cannot.
    pub(crate) fn may_fail(&self) -> bool {
        match self {
            Filter::And(parts) | Filter::Or(parts) => parts.iter().any(Filter::may_fail),
            Filter::Case { .. } => self.any_part(Filter::may_fail),
            Filter::Not(inner) | Filter::Is { inner, .. } => inner.may_fail(),
            Filter::Rows(expr) => expr_may_fail(expr),
            Filter::TextCodes(predicate) => expr_may_fail(&predicate.expr),
            _ => false,
        }
    }

    /// Whether one of a CASE's conditions and results, or its ELSE, has `property`.
    fn any_part(&self, property: fn(&Filter) -> bool) -> bool {
        match self {
            Filter::Case { arms, otherwise } => {
                arms.iter().any(|(condition, result)| property(condition) || property(result)) || property(otherwise)
            }
            other => property(other),
        }
    }

    /// Where an AND's part goes ([`by_class`]): kernels' leaves (0), then what reads rows but cannot fail (1),
    /// then what may fail (2).
    fn class(&self) -> u8 {
        if self.may_fail() { 2 } else { u8::from(self.reads_rows()) }
    }

    /// Whether one row of values passes the filter as a WHERE or HAVING clause (the delta, lookups' residual
    /// predicates, UPDATE and DELETE): TRUE only. Its conjuncts are PostgreSQL's list of quals: the first that is
    /// not TRUE (FALSE or NULL) drops the row, and those after it are not evaluated (`WHERE NULL AND 1 / 0 > 0` raises
    /// nothing). Inside an expression an AND goes on after a NULL, as it must to tell FALSE from NULL.
    pub fn passes_row(&self, row: &[Value], params: &[Value]) -> Result<bool, ExecError> {
        if let Filter::And(parts) = self {
            for part in parts {
                if part.row_verdict(row, params)? != Some(true) {
                    return Ok(false);
                }
            }
            return Ok(true);
        }
        Ok(self.row_verdict(row, params)? == Some(true))
    }

    /// The filter's verdict on one row of values: TRUE, FALSE, or `None` for UNKNOWN.
    fn row_verdict(&self, row: &[Value], params: &[Value]) -> Result<Option<bool>, ExecError> {
        use crate::expr::compare;
        Ok(match self {
            Filter::True => Some(true),
            Filter::False => Some(false),
            Filter::Unknown => None,
            Filter::IntRange { column, low, high } => match &row[*column] {
                Value::Int(v) => Some(low <= v && v <= high),
                Value::Bool(b) => Some(*low <= i64::from(*b) && i64::from(*b) <= *high),
                _ => None,
            },
            Filter::TextRange { column, low, high } => match &row[*column] {
                Value::Text(text) => {
                    let bytes = text.as_bytes();
                    let above = match low {
                        TextBound::Unbounded => true,
                        TextBound::Inclusive(s) => bytes >= s.as_bytes(),
                        TextBound::Exclusive(s) => bytes > s.as_bytes(),
                    };
                    let below = match high {
                        TextBound::Unbounded => true,
                        TextBound::Inclusive(s) => bytes <= s.as_bytes(),
                        TextBound::Exclusive(s) => bytes < s.as_bytes(),
                    };
                    Some(above && below)
                }
                _ => None,
            },
            Filter::DoubleCompare { column, op, value } => match compare(*op, &row[*column], &Value::Double(*value)) {
                Value::Bool(b) => Some(b),
                _ => None,
            },
            Filter::IsNull { column, negated } => Some(row[*column].is_null() != *negated),
            Filter::IntKeys { column, keys, .. } => match &row[*column] {
                Value::Int(v) => Some(keys.contains(*v)),
                _ => None,
            },
            Filter::Rows(expr) => match expr.eval(row, params)? {
                Value::Bool(b) => Some(b),
                _ => None,
            },
            Filter::TextCodes(predicate) => match predicate.expr().eval(row, params)? {
                Value::Bool(b) => Some(b),
                _ => None,
            },
            Filter::And(parts) | Filter::Or(parts) => {
                // FALSE decides an AND, TRUE an OR; else UNKNOWN if a part was, the other verdict if none was.
                let deciding = matches!(self, Filter::Or(_));
                let mut result = Some(!deciding);
                for part in parts {
                    match part.row_verdict(row, params)? {
                        Some(verdict) if verdict == deciding => return Ok(Some(deciding)),
                        None => result = None,
                        Some(_) => {}
                    }
                }
                result
            }
            Filter::Not(inner) => inner.row_verdict(row, params)?.map(|b| !b),
            Filter::Is { inner, verdict } => Some(inner.row_verdict(row, params)? == *verdict),
            Filter::Case { arms, otherwise } => {
                for (condition, result) in arms {
                    if condition.row_verdict(row, params)? == Some(true) {
                        return result.row_verdict(row, params);
                    }
                }
                otherwise.row_verdict(row, params)?
            }
        })
    }

    /// Columns the filter reads.
    pub fn columns(&self, out: &mut Vec<usize>) {
        let mut add = |c: usize| {
            if !out.contains(&c) {
                out.push(c);
            }
        };
        match self {
            Filter::True | Filter::False | Filter::Unknown => {}
            Filter::IntRange { column, .. }
            | Filter::TextRange { column, .. }
            | Filter::DoubleCompare { column, .. }
            | Filter::IsNull { column, .. }
            | Filter::IntKeys { column, .. } => add(*column),
            Filter::Rows(expr) => expr.columns(out),
            Filter::TextCodes(predicate) => add(predicate.column),
            Filter::And(parts) | Filter::Or(parts) => parts.iter().for_each(|p| p.columns(out)),
            Filter::Not(inner) | Filter::Is { inner, .. } => inner.columns(out),
            Filter::Case { arms, otherwise } => {
                for (condition, result) in arms {
                    condition.columns(out);
                    result.columns(out);
                }
                otherwise.columns(out);
            }
        }
    }

    /// Evaluates the filter on block `block` of a partition.
    pub fn eval_block(&self, partition: &Partition, block: usize, params: &[Value]) -> Result<TriMask, ExecError> {
        let mut reads = vec![0u64; partition.columns().len()];
        let mut out = Vec::with_capacity(1);
        self.eval_blocks(partition, block..block + 1, params, PREFETCH_BLOCKS_DEFAULT, &mut reads, &mut out)?;
        Ok(out[0])
    }

    /// The TRUE rows of each block of `blocks`: what a scan keeps, since FALSE and UNKNOWN rows both drop out.
    /// One plain mask per block in `out` (cleared first), and the bytes each column loaded added to `reads`. The
    /// columns' scan loops keep `prefetch_blocks` blocks prefetched ahead ([`numadb_storage::IntColumn::combine_range_masks`]).
    ///
    /// Integer ranges in two-valued logic (a leaf, or an AND/OR of leaves, over columns without NULLs: the thesis
    /// query) are combined by the columns' scan loop straight into `out`. Everything else goes through
    /// [`Filter::eval_blocks`]'s three-valued masks. The distinction is for speed: a morsel's masks are rewritten
    /// once per leaf, and the three-valued ones are twice the size: plain ones made a full scan of the thesis query
    /// 5% faster (the masks' cache lines compete with the scanned data's for the core's line-fill buffers).
    pub fn true_masks(
        &self,
        partition: &Partition,
        blocks: Range<usize>,
        params: &[Value],
        prefetch_blocks: usize,
        reads: &mut [u64],
        out: &mut CombinedMasks,
    ) -> Result<(), ExecError> {
        if let Some(combine) = self.two_valued_ranges(partition) {
            let leaves = match self {
                Filter::And(parts) | Filter::Or(parts) => parts.as_slice(),
                _ => std::slice::from_ref(self),
            };
            out.reset(combine, blocks.len());
            return combine_range_leaves(leaves, partition, blocks, reads, out, prefetch_blocks);
        }
        if matches!(self, Filter::False | Filter::Unknown) {
            // `WHERE false` (or `WHERE 1 = 0`, as tools send to learn a result's columns) selects nothing: no
            // mask to build per block.
            out.reset(Combine::Or, blocks.len());
            return Ok(());
        }
        let mut masks = Vec::with_capacity(blocks.len());
        self.eval_blocks_wanting(partition, blocks, params, prefetch_blocks, reads, &mut masks, Wanted::True, None)?;
        out.reset(Combine::Or, masks.len());
        for (i, mask) in masks.iter().enumerate().filter(|(_, mask)| mask.t != NONE) {
            out.set(i, mask.t);
        }
        Ok(())
    }

    /// The rows of `rows` (in block `block`) where the filter is TRUE: an aggregate's FILTER over the rows a scan
    /// selected. Its leaves that may fail ([`Filter::may_fail`]) evaluate those rows alone, so it raises what
    /// evaluating it row by row on them would. `scratch` is any vector, kept by the caller between blocks.
    pub fn true_rows_among(
        &self,
        partition: &Partition,
        block: usize,
        params: &[Value],
        rows: &BlockMask,
        reads: &mut [u64],
        scratch: &mut Vec<TriMask>,
    ) -> Result<BlockMask, ExecError> {
        let skip: [BlockMask; 1] = [std::array::from_fn(|word| !rows[word])];
        self.eval_blocks_wanting(partition, block..block + 1, params, 0, reads, scratch, Wanted::True, Some(&skip))?;
        let t = scratch.first().map_or(NONE, |mask| mask.t);
        Ok(std::array::from_fn(|word| t[word] & rows[word]))
    }

    /// How the filter combines its integer-range leaves when it is one over `partition`'s columns without NULLs
    /// (a single leaf counts as an OR of one), or `None` when it is anything else.
    fn two_valued_ranges(&self, partition: &Partition) -> Option<Combine> {
        match self {
            Filter::IntRange { .. } if is_range_without_nulls(self, partition) => Some(Combine::Or),
            Filter::And(parts) | Filter::Or(parts)
                if parts.len() > 1 && parts.iter().all(|part| is_range_without_nulls(part, partition)) =>
            {
                Some(if matches!(self, Filter::And(_)) { Combine::And } else { Combine::Or })
            }
            _ => None,
        }
    }

    /// Evaluates the filter on blocks `blocks` of a partition into `out` (one mask per block), adding to
    /// `reads[c]` the bytes of column `c` it actually loaded (blocks a zone map rules in or out cost nothing).
    /// Integer-code scan loops keep `prefetch_blocks` blocks prefetched ahead.
    ///
    /// Work goes column by column over the whole range, not block by block over every column: each leaf streams
    /// one column's consecutive blocks, which keeps the hardware prefetchers on one sequential stream at a time.
    pub fn eval_blocks(
        &self,
        partition: &Partition,
        blocks: Range<usize>,
        params: &[Value],
        prefetch_blocks: usize,
        reads: &mut [u64],
        out: &mut Vec<TriMask>,
    ) -> Result<(), ExecError> {
        self.eval_blocks_wanting(partition, blocks, params, prefetch_blocks, reads, out, Wanted::TrueAndFalse, None)
    }

    /// [`Filter::eval_blocks`], for a caller that reads the TRUE rows alone (`Wanted::True`: a scan's WHERE
    /// clause) or both masks exactly. Rows set in `skip` (one mask per block, when given) are ones an enclosing
    /// AND or OR has decided: what the filter says of them does not matter, and the leaves that may fail
    /// ([`Filter::may_fail`]) do not evaluate them.
    #[allow(clippy::too_many_arguments)]
    fn eval_blocks_wanting(
        &self,
        partition: &Partition,
        blocks: Range<usize>,
        params: &[Value],
        prefetch_blocks: usize,
        reads: &mut [u64],
        out: &mut Vec<TriMask>,
        wanted: Wanted,
        skip: Option<&[BlockMask]>,
    ) -> Result<(), ExecError> {
        out.clear();
        match self {
            Filter::True => out.extend(blocks.map(|_| TriMask::exact(ALL))),
            Filter::False => out.extend(blocks.map(|_| TriMask::exact(NONE))),
            Filter::Unknown => out.extend(blocks.map(|_| TriMask { t: NONE, f: Some(NONE) })),
            Filter::IntRange { column, low, high } => {
                let chunk = partition.column(*column);
                if !matches!(chunk.data(), ColumnData::Int(_) | ColumnData::Bool(_)) {
                    return Err(ExecError::internal("integer range on a non-integer column"));
                }
                range_leaf(partition, *column, blocks, (*low, *high), prefetch_blocks, reads, out)?;
            }
            Filter::TextRange { column, low, high } => {
                let chunk = partition.column(*column);
                let ColumnData::Text { dictionary, .. } = chunk.data() else {
                    return Err(ExecError::internal("text range on a non-text column"));
                };
                let first = match low {
                    TextBound::Unbounded => 0,
                    TextBound::Inclusive(s) => dictionary.lower_bound(s),
                    TextBound::Exclusive(s) => dictionary.upper_bound(s),
                };
                let end = match high {
                    TextBound::Unbounded => dictionary.len(),
                    TextBound::Inclusive(s) => dictionary.upper_bound(s),
                    TextBound::Exclusive(s) => dictionary.lower_bound(s),
                };
                // An empty code range (`first == end`) becomes `low > high`, which selects nothing.
                range_leaf(partition, *column, blocks, (first as i64, end as i64 - 1), prefetch_blocks, reads, out)?;
            }
            Filter::DoubleCompare { column, op, value } => {
                let chunk = partition.column(*column);
                let ColumnData::Double(doubles) = chunk.data() else {
                    return Err(ExecError::internal("double comparison on a non-double column"));
                };
                for block in blocks {
                    let start = block * BLOCK_ROWS;
                    let end = (start + BLOCK_ROWS).min(chunk.rows());
                    let mut mask = NONE;
                    for (i, &x) in doubles[start..end].iter().enumerate() {
                        let ordering = compare_doubles(x, *value);
                        let hit = match op {
                            BinaryOp::Eq => ordering.is_eq(),
                            BinaryOp::NotEq => ordering.is_ne(),
                            BinaryOp::Lt => ordering.is_lt(),
                            BinaryOp::LtEq => ordering.is_le(),
                            BinaryOp::Gt => ordering.is_gt(),
                            BinaryOp::GtEq => ordering.is_ge(),
                            _ => false,
                        };
                        mask[i / 64] |= u64::from(hit) << (i % 64);
                    }
                    reads[*column] += (end - start) as u64 * 8;
                    out.push(with_nulls(mask, null_mask(chunk, block, reads, *column)));
                }
            }
            Filter::IsNull { column, negated } => {
                let chunk = partition.column(*column);
                for block in blocks {
                    let nulls = null_mask(chunk, block, reads, *column).unwrap_or(NONE);
                    out.push(TriMask::exact(if *negated { not_mask(&nulls) } else { nulls }));
                }
            }
            Filter::Rows(expr) => rows_leaf(expr, partition, blocks, params, reads, skip, out)?,
            Filter::TextCodes(predicate) => predicate.leaf(partition, blocks, params, reads, skip, out)?,
            // A block the parts before have decided is not read.
            Filter::IntKeys { column, keys, sorted } => {
                keys_leaf(partition, *column, (keys, sorted.as_deref()), blocks, reads, skip, out)?
            }
            Filter::And(parts) | Filter::Or(parts) if let Some(combine) = self.two_valued_ranges(partition) => {
                // Two-valued logic (no NULLs): each leaf's block masks combine in place, with no intermediate
                // vectors of masks.
                let mut masks = CombinedMasks::new(combine, blocks.len());
                combine_range_leaves(parts, partition, blocks, reads, &mut masks, prefetch_blocks)?;
                out.extend((0..masks.len()).map(|i| TriMask::exact(masks.get(i))));
            }
            Filter::And(parts) | Filter::Or(parts) => {
                let is_and = matches!(self, Filter::And(_));
                if parts.is_empty() {
                    let identity = if is_and { ALL } else { NONE };
                    out.extend(blocks.map(|_| TriMask::exact(identity)));
                    return Ok(());
                }
                // As PostgreSQL orders a qual's clauses by cost and stops at the first that decides a row: the
                // leaves that cannot fail go first, and a leaf evaluated row by row (one that can fail: a
                // division by zero, an overflow) skips the rows the leaves before it have decided (FALSE for an
                // AND, TRUE for an OR), so `b <> 0 AND a / b > 1` raises no error. A WHERE clause's own AND (its
                // list of quals, whose TRUE rows alone are wanted) has decided a row at the first part that is
                // not TRUE, NULL included, as PostgreSQL stops there: `WHERE NULL AND 1 / 0 > 0` raises nothing.
                // The rows decided are those an enclosing AND or OR decided (`skip`) and those the parts before
                // decided; a part that may fail does not evaluate them, however deep its leaves that may fail
                // are (`NOT (n::int < 46)`, an OR of them).
                let drops_unknown = is_and && wanted == Wanted::True;
                let ordered: Vec<&Filter> = parts.iter().collect();
                let (first, wanted_of_parts) = (ordered[0], Wanted::TrueAndFalse);
                first.eval_blocks_wanting(
                    partition,
                    blocks.clone(),
                    params,
                    prefetch_blocks,
                    reads,
                    out,
                    wanted_of_parts,
                    skip,
                )?;
                let mut scratch = Vec::with_capacity(out.len());
                let mut decided = Vec::with_capacity(out.len());
                for part in &ordered[1..] {
                    decided.clear();
                    decided.extend(out.iter().enumerate().map(|(position, r)| {
                        let by_parts = match (is_and, drops_unknown) {
                            (true, true) => not_mask(&r.t),
                            (true, false) => r.false_mask(),
                            (false, _) => r.t,
                        };
                        match skip.and_then(|s| s.get(position)) {
                            Some(enclosing) => or_masks(&by_parts, enclosing),
                            None => by_parts,
                        }
                    }));
                    let decided = Some(decided.as_slice());
                    part.eval_blocks_wanting(
                        partition,
                        blocks.clone(),
                        params,
                        prefetch_blocks,
                        reads,
                        &mut scratch,
                        wanted_of_parts,
                        decided,
                    )?;
                    for (result, mask) in out.iter_mut().zip(&scratch) {
                        let f = match (result.f, mask.f) {
                            (None, None) => None,
                            _ if is_and => Some(or_masks(&result.false_mask(), &mask.false_mask())),
                            _ => Some(and_masks(&result.false_mask(), &mask.false_mask())),
                        };
                        let t = if is_and { and_masks(&result.t, &mask.t) } else { or_masks(&result.t, &mask.t) };
                        *result = TriMask { t, f };
                    }
                }
            }
            Filter::Not(inner) | Filter::Is { inner, .. } => {
                // IS TRUE reads the TRUE rows alone, so an AND inside may stop at a NULL part as a WHERE's does:
                // where no part may fail, which evaluating every part would show.
                let verdict = match self {
                    Filter::Is { verdict, .. } => Some(*verdict),
                    _ => None,
                };
                let wanted_of_inner =
                    if verdict == Some(Some(true)) && !inner.may_fail() { Wanted::True } else { Wanted::TrueAndFalse };
                inner.eval_blocks_wanting(
                    partition,
                    blocks,
                    params,
                    prefetch_blocks,
                    reads,
                    out,
                    wanted_of_inner,
                    skip,
                )?;
                for mask in out.iter_mut() {
                    *mask = match (verdict, mask.f) {
                        (None, None) => TriMask::exact(not_mask(&mask.t)),
                        (None, Some(f)) => TriMask { t: f, f: Some(mask.t) },
                        (Some(Some(true)), _) => TriMask::exact(mask.t),
                        (Some(Some(false)), _) => TriMask::exact(mask.false_mask()),
                        (Some(None), _) => TriMask::exact(not_mask(&or_masks(&mask.t, &mask.false_mask()))),
                    };
                }
            }
            Filter::Case { arms, otherwise } => {
                // Per block: the rows decided (by an enclosing AND or OR, or taken by an arm before), and the
                // verdicts so far. A condition is evaluated on the rows not decided, its result on those it takes.
                let enclosing = |position: usize| skip.and_then(|s| s.get(position)).copied().unwrap_or(NONE);
                let mut decided: Vec<BlockMask> = (0..blocks.len()).map(enclosing).collect();
                out.extend((0..blocks.len()).map(|_| TriMask { t: NONE, f: Some(NONE) }));
                let (mut masks, mut taken, mut others) = (Vec::new(), Vec::new(), Vec::new());
                let arms = arms.iter().map(|(condition, result)| (Some(condition), result));
                for (condition, result) in arms.chain(std::iter::once((None, otherwise.as_ref()))) {
                    taken.clear();
                    match condition {
                        Some(condition) => {
                            // Its TRUE rows alone, unless a part of it may fail: then every part is evaluated, as
                            // PostgreSQL evaluates an AND past a NULL.
                            let wanted = if condition.may_fail() { Wanted::TrueAndFalse } else { Wanted::True };
                            condition.eval_blocks_wanting(
                                partition,
                                blocks.clone(),
                                params,
                                prefetch_blocks,
                                reads,
                                &mut masks,
                                wanted,
                                Some(&decided),
                            )?;
                            taken.extend(
                                masks
                                    .iter()
                                    .zip(&decided)
                                    .map(|(mask, decided)| and_masks(&mask.t, &not_mask(decided))),
                            );
                        }
                        None => taken.extend(decided.iter().map(not_mask)),
                    }
                    if taken.iter().all(|rows| *rows == NONE) {
                        continue;
                    }
                    others.clear();
                    others.extend(taken.iter().map(not_mask));
                    result.eval_blocks_wanting(
                        partition,
                        blocks.clone(),
                        params,
                        prefetch_blocks,
                        reads,
                        &mut masks,
                        Wanted::TrueAndFalse,
                        Some(&others),
                    )?;
                    for (((verdict, mask), rows), decided) in out.iter_mut().zip(&masks).zip(&taken).zip(&mut decided) {
                        let f = verdict.false_mask();
                        *verdict = TriMask {
                            t: or_masks(&verdict.t, &and_masks(&mask.t, rows)),
                            f: Some(or_masks(&f, &and_masks(&mask.false_mask(), rows))),
                        };
                        *decided = or_masks(decided, rows);
                    }
                }
            }
        }
        Ok(())
    }
}

/// An AND's or OR's parts in the order they are evaluated, which [`compile`] gives them: those that cannot fail
/// (the kernels' leaves, and NOTs, ANDs and ORs of them), then those that read rows but cannot fail, then those
/// that may ([`Filter::class`]), each in the order written; a row one of them decides is not evaluated by the
/// rest. [`compile_where`] also puts a WHERE clause's parts that may fail in order of cost ([`by_cost`]), as
/// PostgreSQL evaluates a qual's cheaper clauses first and stops at the first that decides: `b + 1 > 0 AND s LIKE
/// 'x%'` tests the LIKE first, and raises no overflow where it is false. Evaluation takes the parts as they are:
/// a row's verdict would otherwise walk the expressions for each row.
fn by_class(mut parts: Vec<Filter>) -> Vec<Filter> {
    parts.sort_by_cached_key(Filter::class);
    parts
}

/// A WHERE clause's parts, as PostgreSQL orders its list of quals: those that may fail sorted by cost (stably: of
/// equal cost, in the order written). Parts inside an AND under an OR keep their order, as PostgreSQL's do.
fn by_cost(mut parts: Vec<Filter>) -> Vec<Filter> {
    parts.sort_by_cached_key(|part| match part.class() {
        2 => (2, part.cost()),
        class => (class, 0),
    });
    parts
}

/// Whether evaluating `expr` on a row may raise an error, conservatively: arithmetic (overflow, division by
/// zero), casts other than to text or a wider number, functions other than those that cannot fail, LIKE with a
/// pattern that is not a constant (one ending in its escape character fails), subqueries.
pub(crate) fn expr_may_fail(expr: &Expr) -> bool {
    use crate::function::ScalarFunction as F;
    expr.any_node(&|node| match node {
        Expr::Binary { op, .. } => !(op.is_comparison() || matches!(op, BinaryOp::And | BinaryOp::Or)),
        Expr::Negate { .. } | Expr::Subquery { .. } | Expr::QuantifiedSubquery { .. } => true,
        Expr::Cast { expr, to } => !matches!(
            (expr.data_type(), to),
            (_, DataType::Text)
                | (DataType::Integer, DataType::BigInt | DataType::Double)
                | (DataType::BigInt, DataType::Double)
        ),
        Expr::Like { pattern, escape, .. } => match &**pattern {
            Expr::Literal { value: Value::Text(pattern), .. } => escape.is_some_and(|e| pattern.ends_with(e)),
            Expr::Literal { value: Value::Null, .. } => false,
            _ => true,
        },
        Expr::Function { function, .. } => !matches!(
            function,
            F::Coalesce
                | F::Greatest
                | F::Least
                | F::Lower
                | F::Upper
                | F::Length
                | F::OctetLength
                | F::BitLength
                | F::StartsWith
                | F::Concat
                | F::Reverse
                | F::Initcap
                | F::Md5
        ),
        _ => false,
    })
}

/// [`compile`] for a WHERE or HAVING clause, whose NULL drops a row as FALSE does: a NULL constant in its AND/OR
/// structure (not under NOT) is FALSE, which then decides its AND or leaves its OR, as PostgreSQL folds it before
/// anything runs (`100 / z = 5 AND NULL::int = 1` divides nothing); and the clause's list of quals ordered by cost.
pub fn compile_where(expr: &Expr, params: &[Value]) -> Result<Filter, ExecError> {
    fn null_is_false(filter: Filter) -> Filter {
        let is_and = matches!(filter, Filter::And(_));
        match filter {
            Filter::Unknown => Filter::False,
            Filter::And(parts) | Filter::Or(parts) => {
                // FALSE decides an AND, TRUE an OR; the other constant is left out, and is all that is left of
                // none.
                let (deciding, neutral) =
                    if is_and { (Filter::False, Filter::True) } else { (Filter::True, Filter::False) };
                let parts: Vec<Filter> = parts.into_iter().map(null_is_false).filter(|part| *part != neutral).collect();
                match parts.len() {
                    _ if parts.contains(&deciding) => deciding,
                    0 => neutral,
                    _ if is_and => Filter::And(parts),
                    _ => Filter::Or(parts),
                }
            }
            other => other,
        }
    }
    Ok(match null_is_false(compile(expr, params)?) {
        Filter::And(parts) => Filter::And(by_cost(parts)),
        other => other,
    })
}

/// PostgreSQL's estimate of an expression's cost per row, in operators ([`Filter::cost`]).
fn expr_cost(expr: &Expr) -> usize {
    let cost = std::cell::Cell::new(0usize);
    expr.any_node(&|node| {
        cost.set(
            cost.get()
                + match node {
                    Expr::Binary { op: BinaryOp::And | BinaryOp::Or, .. } => 0,
                    Expr::Binary { .. } | Expr::Negate { .. } | Expr::Like { .. } | Expr::Function { .. } => 1,
                    Expr::Between { .. } => 2,
                    Expr::InList { list, .. } => list.len().div_ceil(2),
                    Expr::InSet { .. } => 1,
                    Expr::Cast { expr, .. } if expr.data_type() == DataType::Text => 2,
                    Expr::Cast { .. } => 1,
                    Expr::Subquery { .. } | Expr::QuantifiedSubquery { .. } => 100,
                    _ => 0,
                },
        );
        false
    });
    cost.get()
}

/// A leaf evaluated on rows (an expression the kernels do not take): a block at a time where
/// [`crate::vector`] takes it, row by row otherwise. Rows set in `skip` (one mask per block, when given) are not
/// evaluated and come out neither TRUE nor FALSE.
fn rows_leaf(
    expr: &Expr,
    partition: &Partition,
    blocks: Range<usize>,
    params: &[Value],
    reads: &mut [u64],
    skip: Option<&[BlockMask]>,
    out: &mut Vec<TriMask>,
) -> Result<(), ExecError> {
    let skipped = |position: usize| skip.and_then(|s| s.get(position)).copied().unwrap_or(NONE);
    if crate::vector::is_block_comparison(expr) {
        for (position, block) in blocks.enumerate() {
            out.push(crate::vector::predicate_block(expr, partition, block, params, &skipped(position), reads)?);
        }
        return Ok(());
    }
    let mut columns = Vec::new();
    expr.columns(&mut columns);
    let width = columns.iter().max().map_or(0, |&m| m + 1);
    let mut row = vec![Value::Null; width];
    for (position, block) in blocks.enumerate() {
        for &c in &columns {
            reads[c] += partition.column(c).bytes_of_blocks(block..block + 1);
        }
        let skip = skipped(position);
        let start = block * BLOCK_ROWS;
        let end = (start + BLOCK_ROWS).min(partition.rows());
        let (mut t, mut f) = (NONE, NONE);
        for r in start..end {
            let i = r - start;
            if skip[i / 64] >> (i % 64) & 1 == 1 {
                continue;
            }
            for &c in &columns {
                row[c] = partition.column(c).value(r);
            }
            match expr.eval(&row, params)? {
                Value::Bool(true) => t[i / 64] |= 1 << (i % 64),
                Value::Bool(false) => f[i / 64] |= 1 << (i % 64),
                _ => {}
            }
        }
        out.push(TriMask { t, f: Some(f) });
    }
    Ok(())
}

/// A [`Filter::IntKeys`] leaf: each block's values decoded and looked up in the keys, except in a block the
/// keys' bounds rule out (its zone map) or whose rows `skip` (one mask per block, when given) holds all of. Rows
/// set in `skip` come out neither TRUE nor FALSE.
fn keys_leaf(
    partition: &Partition,
    column: usize,
    (keys, sorted): (&KeySet, Option<&[i64]>),
    blocks: Range<usize>,
    reads: &mut [u64],
    skip: Option<&[BlockMask]>,
    out: &mut Vec<TriMask>,
) -> Result<(), ExecError> {
    let chunk = partition.column(column);
    let ColumnData::Int(codes) = chunk.data() else {
        return Err(ExecError::internal("join keys on a non-integer column"));
    };
    let mut values = [0i64; BLOCK_ROWS];
    for (position, block) in blocks.enumerate() {
        let skipped = skip.and_then(|s| s.get(position)).copied().unwrap_or(NONE);
        let meta = &codes.blocks()[block];
        if skipped == ALL {
            out.push(TriMask { t: NONE, f: Some(NONE) });
            continue;
        }
        let overlaps = match sorted {
            Some(sorted) => {
                let first_not_below = sorted.partition_point(|&key| key < meta.base);
                sorted.get(first_not_below).is_some_and(|&key| key <= meta.max)
            }
            None => keys.bounds().is_some_and(|(low, high)| low <= meta.max && meta.base <= high),
        };
        let hits = if overlaps {
            codes.decode_block(block, &mut values);
            reads[column] += codes.bytes_of_blocks(block..block + 1);
            match keys {
                KeySet::Empty => NONE,
                KeySet::Bitmap { bitmap, .. } => match consecutive_from(meta.base, meta.max, &values) {
                    // A run of consecutive values (a primary key loaded in order, as a join's probing side so
                    // often is): its bits are the bitmap's, a word at a time. `bench queries`' join (5 million
                    // rows, 2 workers): 30.3-32.1 -> 26.3-30.6 ms.
                    Some(first) => {
                        let mut hits = NONE;
                        bitmap.run_bits(first, &mut hits);
                        hits
                    }
                    None => mark(&values, |value| bitmap.contains(value)),
                },
                KeySet::Hashed { keys, .. } => mark(&values, |value| keys.contains(&value)),
            }
        } else {
            NONE
        };
        let result = with_nulls(hits, null_mask(chunk, block, reads, column));
        let undecided = not_mask(&skipped);
        out.push(TriMask { t: and_masks(&result.t, &undecided), f: Some(and_masks(&result.false_mask(), &undecided)) });
    }
    Ok(())
}

/// The first of a block's `values` when they are consecutive integers in order (row `i` holds `values[0] + i`),
/// given the block's smallest and largest value: a block whose zone map spans another number of values is not
/// looked at.
fn consecutive_from(low: i64, high: i64, values: &[i64; BLOCK_ROWS]) -> Option<i64> {
    const LAST: i64 = BLOCK_ROWS as i64 - 1;
    if high.checked_sub(low) != Some(LAST) || values[0] != low {
        return None;
    }
    // One pass the compiler vectorizes, not stopping at the first difference.
    let differences =
        values.iter().enumerate().fold(0, |any, (row, &value)| any | (value.wrapping_sub(low) ^ row as i64));
    (differences == 0).then_some(low)
}

/// The mask of the values for which `is_key` holds.
#[inline]
fn mark(values: &[i64; BLOCK_ROWS], is_key: impl Fn(i64) -> bool) -> BlockMask {
    let mut hits = NONE;
    for (row, &value) in values.iter().enumerate() {
        hits[row / 64] |= u64::from(is_key(value)) << (row % 64);
    }
    hits
}

/// Combines integer-range `leaves` (each checked by [`is_range_without_nulls`]) into `masks`, one per block of
/// `blocks`.
fn combine_range_leaves(
    leaves: &[Filter],
    partition: &Partition,
    blocks: Range<usize>,
    reads: &mut [u64],
    masks: &mut CombinedMasks,
    prefetch_blocks: usize,
) -> Result<(), ExecError> {
    let mut range_leaves = Vec::with_capacity(leaves.len());
    let mut columns = Vec::with_capacity(leaves.len());
    for leaf in leaves {
        let Filter::IntRange { column, low, high } = leaf else {
            return Err(ExecError::internal("combined range leaf is not an integer range"));
        };
        let (ColumnData::Int(ints) | ColumnData::Bool(ints)) = partition.column(*column).data() else {
            return Err(ExecError::internal("integer range on a non-integer column"));
        };
        range_leaves.push(RangeLeaf { column: ints, low: *low, high: *high });
        columns.push(*column);
    }
    let mut bytes_read = vec![0; leaves.len()];
    numadb_storage::combine_range_leaves(&range_leaves, blocks, masks, prefetch_blocks, &mut bytes_read);
    for (column, bytes) in columns.into_iter().zip(bytes_read) {
        reads[column] += bytes;
    }
    Ok(())
}

/// Whether `filter` is an integer range over a column of `partition` that has no NULLs.
fn is_range_without_nulls(filter: &Filter, partition: &Partition) -> bool {
    match filter {
        Filter::IntRange { column, .. } => {
            let chunk = partition.column(*column);
            !chunk.has_nulls() && matches!(chunk.data(), ColumnData::Int(_) | ColumnData::Bool(_))
        }
        _ => false,
    }
}

/// One `low <= x <= high` leaf over a column's integer codes (integers, booleans, dictionary codes of text): the
/// TRUE rows come from the kernels through the column's scan loop, then NULL rows become neither TRUE nor FALSE.
fn range_leaf(
    partition: &Partition,
    column: usize,
    blocks: Range<usize>,
    (low, high): (i64, i64),
    prefetch_blocks: usize,
    reads: &mut [u64],
    out: &mut Vec<TriMask>,
) -> Result<(), ExecError> {
    let chunk = partition.column(column);
    let (ColumnData::Int(codes) | ColumnData::Bool(codes) | ColumnData::Text { codes, .. }) = chunk.data() else {
        return Err(ExecError::internal("range filter on a column without integer codes"));
    };
    let mut masks = CombinedMasks::new(Combine::Or, blocks.len());
    reads[column] += codes.combine_range_masks(blocks.clone(), low, high, &mut masks, prefetch_blocks);
    if chunk.has_nulls() {
        for (i, block) in blocks.enumerate() {
            out.push(with_nulls(masks.get(i), null_mask(chunk, block, reads, column)));
        }
    } else {
        out.extend((0..masks.len()).map(|i| TriMask::exact(masks.get(i))));
    }
    Ok(())
}

/// A chunk's NULL bits for a block, counting the bitmap's bytes as read.
fn null_mask(chunk: &numadb_storage::ColumnChunk, block: usize, reads: &mut [u64], column: usize) -> Option<BlockMask> {
    let nulls = chunk.null_mask(block)?;
    reads[column] += (MASK_WORDS * 8) as u64;
    Some(nulls)
}

/// A comparison's TRUE mask made three-valued: NULL rows are neither TRUE nor FALSE.
fn with_nulls(mask: BlockMask, nulls: Option<BlockMask>) -> TriMask {
    match nulls {
        None => TriMask::exact(mask),
        Some(nulls) => {
            let valid = not_mask(&nulls);
            TriMask { t: and_masks(&mask, &valid), f: Some(and_masks(&not_mask(&mask), &valid)) }
        }
    }
}

/// The mask of the rows that exist in block `block` of a partition with `rows` rows.
pub fn tail_mask(rows: usize, block: usize) -> BlockMask {
    let present = rows.saturating_sub(block * BLOCK_ROWS).min(BLOCK_ROWS);
    std::array::from_fn(|i| {
        let first = i * 64;
        if present >= first + 64 {
            u64::MAX
        } else if present <= first {
            0
        } else {
            (1u64 << (present - first)) - 1
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expr::compare;
    use numadb_placement::Policy;

    #[test]
    fn a_block_is_a_run_only_when_every_row_holds_the_first_value_plus_its_row() {
        let run = |first: i64| -> [i64; BLOCK_ROWS] { std::array::from_fn(|row| first.wrapping_add(row as i64)) };
        let last = BLOCK_ROWS as i64 - 1;
        // Runs anywhere, up to the last BIGINT (no overflow past it) and from the first.
        for first in [0, -5000, 1 << 40, i64::MAX - last, i64::MIN] {
            assert_eq!(consecutive_from(first, first + last, &run(first)), Some(first), "{first}");
        }
        // Two rows swapped, a repeat, a wrong zone map: no run.
        let mut swapped = run(10);
        swapped.swap(7, 8);
        assert_eq!(consecutive_from(10, 10 + last, &swapped), None);
        let mut repeated = run(10);
        repeated[100] = 10;
        assert_eq!(consecutive_from(10, 10 + last, &repeated), None);
        assert_eq!(consecutive_from(10, 10 + last + 1, &run(10)), None);
        assert_eq!(consecutive_from(i64::MIN, i64::MAX, &run(i64::MIN)), None);
    }
    use numadb_storage::{ColumnDef, ColumnInput};

    fn partition() -> Partition {
        let schema = vec![
            ColumnDef::new("i", DataType::Integer, true),
            ColumnDef::new("t", DataType::Text, true),
            ColumnDef::new("d", DataType::Double, true),
            ColumnDef::new("j", DataType::Integer, false),
            ColumnDef::new("k", DataType::BigInt, false),
        ];
        let rows = 3000;
        let ints = (0..rows).map(|i| if i % 7 == 0 { Value::Null } else { Value::Int(i as i64 % 100) }).collect();
        let texts = (0..rows)
            .map(|i| if i % 11 == 0 { Value::Null } else { Value::text(&format!("k{:03}", i % 50)) })
            .collect();
        let doubles =
            (0..rows).map(|i| if i % 13 == 0 { Value::Null } else { Value::Double(i as f64 / 10.0) }).collect();
        // Without NULLs: blocks of narrow values, one block of wide ones (1000..2000), so that zone maps decide
        // some blocks wholly.
        let js = (0..rows)
            .map(|i| Value::Int(if i / BLOCK_ROWS == 1 { 1000 + i as i64 } else { (i * 37 % 64) as i64 }))
            .collect();
        let ks = (0..rows).map(|i| Value::Int((i as i64 * 7919) % 5000 - 2500)).collect();
        Partition::build(
            0,
            0,
            &schema,
            vec![
                ColumnInput::Values(ints),
                ColumnInput::Values(texts),
                ColumnInput::Values(doubles),
                ColumnInput::Values(js),
                ColumnInput::Values(ks),
            ],
            &[const { Policy::OsDefault }; 5],
        )
        .unwrap()
    }

    fn column(index: usize, data_type: DataType) -> Box<Expr> {
        Box::new(Expr::Column { index, data_type })
    }

    fn lit(value: Value, data_type: DataType) -> Box<Expr> {
        Box::new(Expr::literal(value, data_type))
    }

    fn cmp(op: BinaryOp, left: Box<Expr>, right: Box<Expr>) -> Expr {
        Expr::Binary { op, left, right, data_type: DataType::Boolean }
    }

    /// Every block of the compiled filter agrees with row-by-row evaluation of the expression.
    fn check(expr: &Expr) {
        let filter = compile(expr, &[]).unwrap();
        assert!(!matches!(filter, Filter::Rows(_)), "{expr:?} did not compile to a block filter");
        check_filter(expr, &filter);
    }

    fn check_filter(expr: &Expr, filter: &Filter) {
        let partition = partition();
        // The scan's plain TRUE masks (combined in place where the filter allows) say what the three-valued ones
        // do, and account the same bytes.
        let (mut true_reads, mut tri_reads) = (vec![0; 5], vec![0; 5]);
        let (mut trues, mut tris) = (CombinedMasks::new(Combine::Or, 0), Vec::new());
        filter.true_masks(&partition, 0..partition.blocks(), &[], 1, &mut true_reads, &mut trues).unwrap();
        filter.eval_blocks(&partition, 0..partition.blocks(), &[], 3, &mut tri_reads, &mut tris).unwrap();
        assert_eq!(true_reads, tri_reads, "bytes read by {expr:?}");
        assert_eq!((trues.len(), tris.len()), (partition.blocks(), partition.blocks()));
        for (block, tri) in tris.iter().enumerate() {
            let mask = filter.eval_block(&partition, block, &[]).unwrap();
            let tail = tail_mask(partition.rows(), block);
            let (plain, tri) = (and_masks(&trues.get(block), &tail), and_masks(&tri.t, &tail));
            assert_eq!(plain, and_masks(&mask.t, &tail), "block {block} of {expr:?}");
            assert_eq!(tri, and_masks(&mask.t, &tail), "block {block} of {expr:?}");
            for i in 0..BLOCK_ROWS {
                let row = block * BLOCK_ROWS + i;
                if tail[i / 64] >> (i % 64) & 1 == 0 {
                    continue;
                }
                let values: Vec<Value> = (0..5).map(|c| partition.column(c).value(row)).collect();
                let expected = expr.eval(&values, &[]).unwrap();
                let is_true = mask.t[i / 64] >> (i % 64) & 1 == 1;
                let is_false = mask.false_mask()[i / 64] >> (i % 64) & 1 == 1;
                match expected {
                    Value::Bool(true) => assert!(is_true && !is_false, "row {row} of {expr:?}"),
                    Value::Bool(false) => assert!(!is_true && is_false, "row {row} of {expr:?}"),
                    _ => assert!(!is_true && !is_false, "row {row} should be unknown in {expr:?}"),
                }
            }
        }
    }

    #[test]
    fn compiled_filters_agree_with_row_evaluation_in_three_valued_logic() {
        let int = |v: i64| lit(Value::Int(v), DataType::Integer);
        let i = || column(0, DataType::Integer);
        let t = || column(1, DataType::Text);
        let d = || column(2, DataType::Double);
        for op in [BinaryOp::Eq, BinaryOp::NotEq, BinaryOp::Lt, BinaryOp::LtEq, BinaryOp::Gt, BinaryOp::GtEq] {
            check(&cmp(op, i(), int(42)));
            check(&cmp(op, int(42), i()));
            check(&cmp(op, i(), lit(Value::Double(41.5), DataType::Double)));
            check(&cmp(op, t(), lit(Value::text("k025"), DataType::Text)));
            check(&cmp(op, t(), lit(Value::text("k0255"), DataType::Text)));
            check(&cmp(op, d(), lit(Value::Double(150.0), DataType::Double)));
        }
        check(&Expr::Not(Box::new(cmp(BinaryOp::Lt, i(), int(10)))));
        // AND/OR of ranges over columns without NULLs (combined in place), alone, nested and negated.
        let j = || column(3, DataType::Integer);
        let k = || column(4, DataType::BigInt);
        let big = |v: i64| lit(Value::Int(v), DataType::BigInt);
        for op in [BinaryOp::Or, BinaryOp::And] {
            let both =
                || cmp(op, Box::new(cmp(BinaryOp::Lt, j(), int(20))), Box::new(cmp(BinaryOp::GtEq, k(), big(1200))));
            check(&both());
            check(&Expr::Not(Box::new(both())));
            check(&cmp(op, Box::new(both()), Box::new(cmp(BinaryOp::Gt, j(), int(1500)))));
            // With a column that has NULLs, the general path.
            check(&cmp(op, Box::new(both()), Box::new(cmp(BinaryOp::Lt, i(), int(10)))));
        }
        check(&cmp(
            BinaryOp::Or,
            Box::new(cmp(BinaryOp::Lt, i(), int(10))),
            Box::new(cmp(BinaryOp::Gt, d(), lit(Value::Double(250.0), DataType::Double))),
        ));
        check(&Expr::Not(Box::new(cmp(
            BinaryOp::And,
            Box::new(cmp(BinaryOp::GtEq, i(), int(50))),
            Box::new(cmp(BinaryOp::Eq, t(), lit(Value::text("k007"), DataType::Text))),
        ))));
        check(&Expr::Between { expr: i(), low: int(20), high: int(30), negated: true });
        check(&Expr::InList {
            expr: i(),
            list: vec![*int(1), *int(99), *lit(Value::Null, DataType::Integer)],
            negated: true,
        });
        check(&Expr::IsNull { expr: i(), negated: false });
        check(&Expr::IsNull { expr: t(), negated: true });
        check(&cmp(BinaryOp::Eq, i(), lit(Value::Null, DataType::Integer)));
        // Over integer arithmetic, a block at a time ([`crate::vector`]): BETWEEN as two comparisons, IN a list of
        // constants (with a NULL among them or not), IS [NOT] NULL, casts between integer types and abs, each
        // also negated, on a column with NULLs (i) and one without (k, BIGINT, negative values).
        let arithmetic =
            || Box::new(Expr::Binary { op: BinaryOp::Sub, left: i(), right: int(50), data_type: DataType::Integer });
        let absolute = || {
            Box::new(Expr::Function {
                function: crate::function::ScalarFunction::Abs,
                args: vec![*k()],
                data_type: DataType::BigInt,
            })
        };
        let narrowed = || Box::new(Expr::Cast { expr: absolute(), to: DataType::Integer });
        let widened = || Box::new(Expr::Cast { expr: arithmetic(), to: DataType::BigInt });
        fn block_at_a_time(filter: &Filter) -> bool {
            match filter {
                Filter::And(parts) | Filter::Or(parts) => parts.iter().all(block_at_a_time),
                Filter::Not(inner) | Filter::Is { inner, .. } => block_at_a_time(inner),
                Filter::Case { arms, otherwise } => {
                    arms.iter().all(|(condition, result)| block_at_a_time(condition) && block_at_a_time(result))
                        && block_at_a_time(otherwise)
                }
                Filter::Rows(expr) => crate::vector::is_block_comparison(expr),
                _ => true,
            }
        }
        let check_blocks = |expr: &Expr| {
            let filter = compile(expr, &[]).unwrap();
            assert!(block_at_a_time(&filter), "{expr:?} is evaluated row by row");
            check_filter(expr, &filter);
        };
        for negated in [false, true] {
            for operand in [arithmetic(), absolute(), narrowed(), widened()] {
                check_blocks(&Expr::Between { expr: operand.clone(), low: int(-20), high: int(30), negated });
                check_blocks(&Expr::Between { expr: operand.clone(), low: int(10), high: j(), negated });
                for list in [vec![*int(1), *int(-7), *int(1200)], vec![*int(4), *lit(Value::Null, DataType::Integer)]] {
                    check_blocks(&Expr::InList { expr: operand.clone(), list, negated });
                }
                check_blocks(&Expr::IsNull { expr: operand, negated });
            }
        }
        // Double precision arithmetic over a double column with NULLs (d), integers cast or met in it, compared
        // as doubles with integers and doubles, as BETWEEN's two comparisons, and IS NULL.
        let double = |v: f64| lit(Value::Double(v), DataType::Double);
        let arith = |op, left: Box<Expr>, right: Box<Expr>| {
            Box::new(Expr::Binary { op, left, right, data_type: DataType::Double })
        };
        let as_double = |e: Box<Expr>| Box::new(Expr::Cast { expr: e, to: DataType::Double });
        let doubles = || {
            [
                arith(BinaryOp::Mul, d(), double(2.0)),
                arith(BinaryOp::Sub, arith(BinaryOp::Mul, i(), double(1.5)), d()),
                arith(BinaryOp::Div, as_double(k()), double(3.0)),
                Box::new(Expr::Negate { expr: d(), data_type: DataType::Double }),
            ]
        };
        for (operand, other) in doubles().into_iter().zip(doubles().into_iter().rev()) {
            for op in [BinaryOp::Eq, BinaryOp::NotEq, BinaryOp::Lt, BinaryOp::LtEq, BinaryOp::Gt, BinaryOp::GtEq] {
                check_blocks(&cmp(op, operand.clone(), int(40)));
                check_blocks(&cmp(op, double(-12.5), operand.clone()));
                check_blocks(&cmp(op, operand.clone(), other.clone()));
                // NaN above every number and equal to itself, -0 equal to 0, as PostgreSQL orders doubles.
                check_blocks(&cmp(op, operand.clone(), double(f64::NAN)));
                check_blocks(&cmp(op, arith(BinaryOp::Mul, operand.clone(), double(f64::NAN)), double(f64::NAN)));
                check_blocks(&cmp(op, arith(BinaryOp::Mul, operand.clone(), double(0.0)), double(-0.0)));
            }
            for negated in [false, true] {
                check_blocks(&Expr::Between { expr: operand.clone(), low: double(-20.5), high: int(130), negated });
                check_blocks(&Expr::IsNull { expr: operand.clone(), negated });
            }
        }
        // CASE over integers, a block at a time: each condition only on the rows no earlier arm took, each result
        // only on the rows its arm takes (`1000 / j` where j = 0 is never evaluated), no ELSE giving NULL.
        let guarded = || {
            Box::new(Expr::Case {
                branches: vec![
                    (cmp(BinaryOp::Eq, j(), int(0)), *int(0)),
                    (cmp(BinaryOp::Lt, i(), int(30)), *arithmetic()),
                    (
                        cmp(BinaryOp::Gt, k(), big(0)),
                        Expr::Binary { op: BinaryOp::Div, left: int(1000), right: j(), data_type: DataType::Integer },
                    ),
                ],
                otherwise: lit(Value::Null, DataType::Integer),
                data_type: DataType::Integer,
            })
        };
        assert!(crate::vector::is_int_expr(&guarded()));
        for op in [BinaryOp::Eq, BinaryOp::Lt, BinaryOp::GtEq] {
            check_blocks(&cmp(op, guarded(), int(20)));
        }
        check_blocks(&Expr::IsNull { expr: guarded(), negated: false });
        // Comparisons and IN lists that the operands' bounds settle on some blocks (from the zone maps: j is
        // narrow in blocks 0 and 2, wide in block 1; i has NULLs, k negative values).
        let times = |left: Box<Expr>, by: i64, data_type| {
            Box::new(Expr::Binary { op: BinaryOp::Mul, left, right: lit(Value::Int(by), data_type), data_type })
        };
        for op in [BinaryOp::Eq, BinaryOp::NotEq, BinaryOp::Lt, BinaryOp::LtEq, BinaryOp::Gt, BinaryOp::GtEq] {
            check_blocks(&cmp(op, times(j(), 2, DataType::Integer), int(130)));
            check_blocks(&cmp(op, times(widened(), 3, DataType::BigInt), big(-160)));
            check_blocks(&cmp(op, Box::new(Expr::Negate { expr: j(), data_type: DataType::Integer }), i()));
            check_blocks(&cmp(op, absolute(), times(j(), -1, DataType::Integer)));
        }
        for list in [vec![*int(5000), *int(-3)], vec![*int(7000), *lit(Value::Null, DataType::Integer)]] {
            check_blocks(&Expr::InList { expr: times(j(), 2, DataType::Integer), list, negated: false });
        }
        // coalesce, greatest and least over integers, a block at a time: coalesce's later arguments only on the rows
        // the earlier ones left NULL (`1000 / i`, where i is 0 on some rows, is never evaluated beside j).
        let call = |function, args: Vec<Expr>, data_type| Box::new(Expr::Function { function, args, data_type });
        use crate::function::ScalarFunction as F;
        let over_i =
            || Box::new(Expr::Binary { op: BinaryOp::Div, left: int(1000), right: i(), data_type: DataType::Integer });
        let calls = || {
            [
                call(F::Coalesce, vec![*i(), *j()], DataType::Integer),
                call(F::Coalesce, vec![*j(), *over_i()], DataType::Integer),
                call(F::Coalesce, vec![*i(), *lit(Value::Null, DataType::Integer), *int(-3)], DataType::Integer),
                call(F::Greatest, vec![*i(), *j(), *int(40)], DataType::Integer),
                call(F::Least, vec![*widened(), *k(), *lit(Value::Null, DataType::BigInt)], DataType::BigInt),
                call(F::Least, vec![*i()], DataType::Integer),
            ]
        };
        for operand in calls() {
            for op in [BinaryOp::Eq, BinaryOp::Lt, BinaryOp::GtEq] {
                check_blocks(&cmp(op, operand.clone(), int(35)));
            }
            check_blocks(&Expr::IsNull { expr: operand.clone(), negated: false });
            check_blocks(&Expr::InList { expr: operand, list: vec![*int(-3), *int(40)], negated: true });
        }
        // A boolean CASE as the OR of its arms: conditions NULL on some rows (i, d), no ELSE (NULL), results
        // that are kernels' leaves, text ranges and comparisons of arithmetic, a division guarded by an earlier
        // arm (`1000 / j` never meets j = 0), in a condition and in a result; negated too; IS [NOT] NULL over
        // boolean expressions.
        let boolean = |v: Option<bool>| lit(v.map_or(Value::Null, Value::Bool), DataType::Boolean);
        let case = |branches: Vec<(Expr, Expr)>, otherwise: Box<Expr>| Expr::Case {
            branches,
            otherwise,
            data_type: DataType::Boolean,
        };
        let divided =
            || Box::new(Expr::Binary { op: BinaryOp::Div, left: int(1000), right: j(), data_type: DataType::Integer });
        let doubled =
            || Box::new(Expr::Binary { op: BinaryOp::Mul, left: j(), right: int(2), data_type: DataType::Integer });
        let cases = [
            case(vec![(cmp(BinaryOp::Lt, i(), int(30)), *boolean(Some(true)))], boolean(Some(false))),
            case(vec![(cmp(BinaryOp::Lt, i(), int(30)), cmp(BinaryOp::Gt, k(), big(0)))], boolean(None)),
            case(
                vec![
                    (cmp(BinaryOp::Gt, i(), int(40)), *boolean(Some(true))),
                    (
                        cmp(BinaryOp::Gt, d(), double(100.0)),
                        cmp(BinaryOp::GtEq, t(), lit(Value::text("k5"), DataType::Text)),
                    ),
                    (cmp(BinaryOp::Eq, j(), int(0)), *boolean(None)),
                ],
                Box::new(cmp(BinaryOp::Gt, doubled(), int(50))),
            ),
            case(
                vec![
                    (cmp(BinaryOp::Eq, j(), int(0)), *boolean(Some(false))),
                    (cmp(BinaryOp::Gt, doubled(), int(100)), cmp(BinaryOp::Lt, arithmetic(), int(0))),
                ],
                boolean(Some(true)),
            ),
        ];
        for expr in cases {
            check_blocks(&expr);
            check_blocks(&Expr::Not(Box::new(expr.clone())));
            check_blocks(&cmp(BinaryOp::And, Box::new(expr.clone()), Box::new(cmp(BinaryOp::Lt, j(), int(20)))));
            // Row by row where the CASE may fail (its arithmetic may overflow), as IS NULL over such an expression is.
            let is_not_null = Expr::IsNull { expr: Box::new(expr), negated: true };
            check_filter(&is_not_null, &compile(&is_not_null, &[]).unwrap());
        }
        // A CASE with parts that may fail: each condition only on the rows no earlier arm took, each result on its
        // arm's rows (`1000 / j` never meets j = 0 here).
        let guarded = [
            case(
                vec![(cmp(BinaryOp::Eq, j(), int(0)), *boolean(Some(false)))],
                Box::new(cmp(BinaryOp::Gt, divided(), int(50))),
            ),
            case(
                vec![
                    (cmp(BinaryOp::Eq, j(), int(0)), *boolean(Some(true))),
                    (cmp(BinaryOp::Gt, divided(), int(100)), *boolean(Some(false))),
                ],
                boolean(None),
            ),
        ];
        for expr in guarded {
            check_blocks(&expr);
            check_blocks(&Expr::Not(Box::new(expr)));
        }
        // IS NULL over an expression that may fail goes row by row (its ANDs are not reordered).
        let may_fail = Expr::IsNull {
            expr: Box::new(cmp(
                BinaryOp::And,
                Box::new(cmp(BinaryOp::Gt, divided(), int(1))),
                Box::new(cmp(BinaryOp::Lt, i(), int(30))),
            )),
            negated: false,
        };
        let filter = compile(&may_fail, &[]).unwrap();
        assert!(matches!(filter, Filter::Rows(_)), "{filter:?}");
        // A condition that is a parameter settles its arm when compiled, as PostgreSQL's folding does: the ELSE's
        // `100 / $1` is never evaluated when `$1 = 0` is TRUE, and the arm after a FALSE one is the first.
        let param = || Box::new(Expr::Param { index: 0, data_type: DataType::Integer });
        let settled = case(
            vec![
                (cmp(BinaryOp::Eq, param(), int(0)), cmp(BinaryOp::Lt, i(), int(30))),
                (cmp(BinaryOp::Lt, j(), int(5)), *boolean(Some(true))),
            ],
            Box::new(cmp(
                BinaryOp::Gt,
                Box::new(Expr::Binary {
                    op: BinaryOp::Div,
                    left: int(100),
                    right: param(),
                    data_type: DataType::Integer,
                }),
                int(1),
            )),
        );
        assert_eq!(
            compile(&settled, &[Value::Int(0)]).unwrap(),
            compile(&cmp(BinaryOp::Lt, i(), int(30)), &[]).unwrap()
        );
        let Filter::Case { arms, .. } = compile(&settled, &[Value::Int(4)]).unwrap() else { panic!("not a CASE") };
        assert_eq!(arms.len(), 1, "the FALSE arm is left out");
        // The arm that takes j = 0 divides by it: the row path's error.
        let unguarded = case(
            vec![(cmp(BinaryOp::Gt, j(), int(0)), *boolean(Some(false)))],
            Box::new(cmp(BinaryOp::Gt, divided(), int(1))),
        );
        let error = compile(&unguarded, &[])
            .unwrap()
            .eval_blocks(&partition(), 0..3, &[], 1, &mut [0; 5], &mut Vec::new())
            .unwrap_err();
        assert_eq!(error.sqlstate, crate::sqlstate::DIVISION_BY_ZERO);
        // A condition that divides by zero on rows no earlier arm took raises, though its arm's result is FALSE and
        // no ELSE follows.
        let reached = case(
            vec![
                (cmp(BinaryOp::Gt, j(), int(1000)), *boolean(Some(true))),
                (cmp(BinaryOp::Gt, divided(), int(1)), *boolean(Some(false))),
            ],
            boolean(None),
        );
        for expr in [reached.clone(), Expr::Not(Box::new(reached))] {
            let error = compile_where(&expr, &[])
                .unwrap()
                .eval_blocks(&partition(), 0..3, &[], 1, &mut [0; 5], &mut Vec::new())
                .unwrap_err();
            assert_eq!(error.sqlstate, crate::sqlstate::DIVISION_BY_ZERO, "{expr:?}");
        }
        for negated in [false, true] {
            check_blocks(&Expr::IsNull { expr: Box::new(cmp(BinaryOp::Lt, i(), int(30))), negated });
            let either = cmp(
                BinaryOp::Or,
                Box::new(cmp(BinaryOp::Lt, i(), int(30))),
                Box::new(cmp(BinaryOp::Gt, d(), double(10.0))),
            );
            check_blocks(&Expr::IsNull { expr: Box::new(either), negated });
        }
        // A double's overflow and division by zero raise the row path's errors.
        for (expr, sqlstate) in [
            (arith(BinaryOp::Mul, d(), double(1e308)), crate::sqlstate::NUMERIC_VALUE_OUT_OF_RANGE),
            (arith(BinaryOp::Div, d(), arith(BinaryOp::Sub, d(), d())), crate::sqlstate::DIVISION_BY_ZERO),
        ] {
            let comparison = cmp(BinaryOp::Gt, expr, double(0.0));
            let filter = compile(&comparison, &[]).unwrap();
            assert!(block_at_a_time(&filter));
            let error = filter.eval_blocks(&partition(), 0..3, &[], 1, &mut [0; 5], &mut Vec::new()).unwrap_err();
            assert_eq!(error.sqlstate, sqlstate, "{comparison:?}");
        }
        // A value past INTEGER raises what the row-at-a-time cast raises.
        let scaled = Box::new(Expr::Binary {
            op: BinaryOp::Mul,
            left: k(),
            right: big(10_000_000),
            data_type: DataType::BigInt,
        });
        let past_integer =
            Expr::IsNull { expr: Box::new(Expr::Cast { expr: scaled, to: DataType::Integer }), negated: false };
        let filter = compile(&past_integer, &[]).unwrap();
        assert!(block_at_a_time(&filter));
        let error = filter.eval_blocks(&partition(), 0..3, &[], 1, &mut [0; 5], &mut Vec::new()).unwrap_err();
        assert_eq!(
            (error.sqlstate, error.message.as_str()),
            (crate::sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range")
        );
    }

    #[test]
    fn blocks_whose_bounds_settle_a_comparison_of_arithmetic_are_not_decoded() {
        let (j, k) = (column(3, DataType::Integer), column(4, DataType::BigInt));
        let doubled = Box::new(Expr::Binary {
            op: BinaryOp::Mul,
            left: j.clone(),
            right: lit(Value::Int(2), DataType::Integer),
            data_type: DataType::Integer,
        });
        let partition = partition();
        let mut reads = vec![0; 5];
        // j * 2 is below 6100 in every block (j < 64 in blocks 0 and 2, 2024..3047 in block 1): nothing is read.
        let above = cmp(BinaryOp::Gt, doubled.clone(), lit(Value::Int(6100), DataType::Integer));
        let filter = compile(&above, &[]).unwrap();
        let mut masks = Vec::new();
        filter.eval_blocks(&partition, 0..partition.blocks(), &[], 1, &mut reads, &mut masks).unwrap();
        assert!(masks.iter().all(|mask| mask.t == NONE), "no row passes");
        assert_eq!(reads, vec![0; 5]);
        // j * 2 < 60 is settled in block 1 alone (FALSE); blocks 0 and 2 are decoded.
        let below = cmp(BinaryOp::Lt, doubled, lit(Value::Int(60), DataType::Integer));
        compile(&below, &[]).unwrap().eval_blocks(&partition, 0..3, &[], 1, &mut reads, &mut masks).unwrap();
        let decoded = partition.column(3).bytes_of_blocks(0..1) + partition.column(3).bytes_of_blocks(2..3);
        assert_eq!(reads, vec![0, 0, 0, decoded, 0]);
        // k + j = k - 5000 is never true (k within ±2500): IN reads nothing either.
        let sum = Box::new(Expr::Binary { op: BinaryOp::Add, left: k, right: j, data_type: DataType::BigInt });
        let listed = Expr::InList { expr: sum, list: vec![*lit(Value::Int(90_000), DataType::BigInt)], negated: true };
        let mut reads = vec![0; 5];
        compile(&listed, &[]).unwrap().eval_blocks(&partition, 0..3, &[], 1, &mut reads, &mut masks).unwrap();
        assert_eq!(reads, vec![0; 5]);
        assert!(masks.iter().enumerate().all(|(b, mask)| mask.t == tail_mask(partition.rows(), b)), "every row passes");
    }

    #[test]
    fn predicates_over_one_text_column_are_decided_per_string() {
        let t = || column(1, DataType::Text);
        let text = |s: &str| lit(Value::text(s), DataType::Text);
        let like = |pattern: &str, negated: bool| Expr::Like {
            expr: t(),
            pattern: text(pattern),
            negated,
            case_insensitive: false,
            escape: Some('\\'),
        };
        let lower = |e: Box<Expr>| {
            Box::new(Expr::Function {
                function: crate::function::ScalarFunction::Lower,
                args: vec![*e],
                data_type: DataType::Text,
            })
        };
        let coalesce = Box::new(Expr::Function {
            function: crate::function::ScalarFunction::Coalesce,
            args: vec![*t(), *text("zz")],
            data_type: DataType::Text,
        });
        let i_below =
            |v: i64| Box::new(cmp(BinaryOp::Lt, column(0, DataType::Integer), lit(Value::Int(v), DataType::Integer)));
        let per_string = [
            like("k01%", false),
            like("%7", true),
            cmp(BinaryOp::Eq, lower(t()), text("k001")),
            // NULL's verdict is TRUE here.
            cmp(BinaryOp::Eq, coalesce.clone(), text("zz")),
            Expr::Not(Box::new(cmp(BinaryOp::NotEq, coalesce, text("k003")))),
        ];
        for expr in &per_string {
            let compiled = match compile(expr, &[]).unwrap() {
                Filter::Not(inner) => *inner,
                other => other,
            };
            assert!(matches!(compiled, Filter::TextCodes(_)), "{expr:?}");
            check(expr);
            // Under an AND and an OR with a kernel's leaf, which decides some rows first.
            for op in [BinaryOp::And, BinaryOp::Or] {
                check(&cmp(op, i_below(40), Box::new(expr.clone())));
                check(&cmp(op, Box::new(expr.clone()), i_below(3)));
            }
        }
        // Not per string: two columns, a volatile function.
        let two_columns = cmp(
            BinaryOp::Eq,
            lower(t()),
            Box::new(Expr::Cast { expr: column(0, DataType::Integer), to: DataType::Text }),
        );
        assert!(matches!(compile(&two_columns, &[]).unwrap(), Filter::Rows(_)));
        let random = Expr::Function {
            function: crate::function::ScalarFunction::Random,
            args: vec![],
            data_type: DataType::Double,
        };
        let volatile = cmp(BinaryOp::Lt, Box::new(random), lit(Value::Double(2.0), DataType::Double));
        let volatile = cmp(BinaryOp::And, Box::new(like("k%", false)), Box::new(volatile));
        let Filter::And(parts) = compile(&volatile, &[]).unwrap() else { panic!() };
        assert!(matches!(parts.as_slice(), [Filter::TextCodes(_), Filter::Rows(_)]), "{parts:?}");
        // A string on which the expression fails ('k…' is no integer) sends the partition row by row, where only
        // the rows left undecided are evaluated: here the NULLs alone, which do not fail.
        let fails = cmp(
            BinaryOp::Eq,
            Box::new(Expr::Cast { expr: t(), to: DataType::Integer }),
            lit(Value::Int(5), DataType::Integer),
        );
        let guarded = cmp(BinaryOp::And, Box::new(Expr::IsNull { expr: t(), negated: false }), Box::new(fails.clone()));
        check(&guarded);
        let partition = partition();
        let Filter::TextCodes(predicate) = compile(&fails, &[]).unwrap() else { panic!() };
        let ColumnData::Text { dictionary, .. } = partition.column(1).data() else { panic!() };
        assert!(predicate.decide(dictionary, &[]).is_none());
        assert!(compile(&fails, &[]).unwrap().eval_block(&partition, 0, &[]).is_err());
    }

    #[test]
    fn long_in_lists_are_sets_of_keys_and_agree_with_row_evaluation() {
        let int = |v: i64| *lit(Value::Int(v), DataType::Integer);
        let in_list = |column: Box<Expr>, values: &mut dyn Iterator<Item = Expr>, negated: bool| Expr::InList {
            expr: column,
            list: values.collect(),
            negated,
        };
        // Column j: block 1 holds 1000..2000, the others 0..63; the sorted keys skip block 1 unless a key is in it.
        let narrow = || (0..IN_KEYS_MIN as i64).map(|v| int(v * 3));
        for negated in [false, true] {
            let expr = in_list(column(3, DataType::Integer), &mut narrow(), negated);
            let compiled = match compile(&expr, &[]).unwrap() {
                Filter::Not(inner) => *inner,
                other => other,
            };
            let Filter::Or(parts) = compiled else { panic!("{expr:?}") };
            assert!(matches!(parts.as_slice(), [Filter::IntKeys { sorted: Some(_), .. }]), "{parts:?}");
            check(&expr);
            // One key in the wide block, a NULL (never TRUE; NOT IN never TRUE either), a value out of range.
            let mut mixed = narrow().chain([int(1500), *lit(Value::Null, DataType::Integer), int(i64::MAX)]);
            check(&in_list(column(3, DataType::Integer), &mut mixed, negated));
            // A column with NULLs, and a BIGINT one.
            check(&in_list(column(0, DataType::Integer), &mut narrow(), negated));
            let mut bigs = (0..100).map(|v| *lit(Value::Int(v * 50 - 2500), DataType::BigInt));
            check(&in_list(column(4, DataType::BigInt), &mut bigs, negated));
        }
        // A subquery's values as a hashed set ([`crate::expr::quantified`]): the same keys on an integer column.
        for negated in [false, true] {
            let mut values: Vec<Value> = (0..60).map(|v| Value::Int(v * 3)).collect();
            for with_null in [false, true] {
                if with_null {
                    values.push(Value::Null);
                }
                for (index, data_type) in [(3, DataType::Integer), (0, DataType::Integer), (4, DataType::BigInt)] {
                    let op = if negated { BinaryOp::NotEq } else { BinaryOp::Eq };
                    let operand = *column(index, data_type);
                    let expr = crate::expr::quantified(operand, op, negated, values.clone(), data_type);
                    assert!(matches!(expr, Expr::InSet { .. }), "{expr:?}");
                    check(&expr);
                }
            }
        }
        // Over an integer expression, a block at a time ([`crate::vector`]), with and without a NULL in the set.
        let operand = || Expr::Binary {
            op: BinaryOp::Mod,
            left: column(0, DataType::Integer),
            right: lit(Value::Int(10), DataType::Integer),
            data_type: DataType::Integer,
        };
        for negated in [false, true] {
            for with_null in [false, true] {
                let mut values: Vec<Value> = (0..60).map(|v| Value::Int(v % 5 - 1)).collect();
                if with_null {
                    values.push(Value::Null);
                }
                let op = if negated { BinaryOp::NotEq } else { BinaryOp::Eq };
                let expr = crate::expr::quantified(operand(), op, negated, values, DataType::Integer);
                assert!(crate::vector::is_block_comparison(&expr), "{expr:?}");
                check_filter(&expr, &compile(&expr, &[]).unwrap());
            }
        }
        // Below the threshold, one range per value, as before.
        let short = in_list(column(3, DataType::Integer), &mut narrow().take(IN_KEYS_MIN - 1), false);
        let Filter::Or(parts) = compile(&short, &[]).unwrap() else { panic!() };
        assert!(parts.iter().all(|part| matches!(part, Filter::IntRange { .. })));
    }

    #[test]
    fn a_chain_compiles_flat_in_the_order_written_with_its_constant_start_evaluated_whole() {
        let int = |v: i64| lit(Value::Int(v), DataType::Integer);
        let param = || Box::new(Expr::Param { index: 0, data_type: DataType::Integer });
        let and = |left: Expr, right: Expr| cmp(BinaryOp::And, Box::new(left), Box::new(right));
        let or = |left: Expr, right: Expr| cmp(BinaryOp::Or, Box::new(left), Box::new(right));
        let equals = |column_index: usize, v: i64| cmp(BinaryOp::Eq, column(column_index, DataType::Integer), int(v));
        // `$1 <> 0 AND 1 / $1 = 1 AND j = 5 AND (i = 1 OR i = 2) AND k = 7`, nested to the left as parsed.
        let inverse = Expr::Binary { op: BinaryOp::Div, left: int(1), right: param(), data_type: DataType::Integer };
        let start = and(cmp(BinaryOp::NotEq, param(), int(0)), cmp(BinaryOp::Eq, Box::new(inverse), int(1)));
        let expr = and(and(and(start, equals(3, 5)), or(equals(0, 1), equals(0, 2))), equals(4, 7));
        // $1 = 0: the start is FALSE without evaluating 1 / 0, as PostgreSQL's folding stops at `0 <> 0`.
        let Filter::And(parts) = compile(&expr, &[Value::Int(0)]).unwrap() else { panic!("an AND") };
        assert_eq!(parts.len(), 4);
        assert_eq!(parts[0], Filter::False);
        assert!(matches!(&parts[2], Filter::Or(inner) if inner.len() == 2));
        // $1 = 1: the start is TRUE; $1 = 2 makes 1 / $1 = 0, FALSE; neither fails.
        let Filter::And(parts) = compile(&expr, &[Value::Int(1)]).unwrap() else { panic!("an AND") };
        assert_eq!(parts[0], Filter::True);
        let Filter::And(parts) = compile(&expr, &[Value::Int(2)]).unwrap() else { panic!("an AND") };
        assert_eq!(parts[0], Filter::False);
        // A long OR chain is one flat OR of its leaves, in the order written, and agrees with row evaluation.
        let chain = (1..100).fold(equals(0, 0), |chain, v| or(chain, equals(0, v % 100)));
        let Filter::Or(leaves) = compile(&chain, &[]).unwrap() else { panic!("an OR") };
        assert_eq!(leaves.len(), 100);
        check(&chain);
    }

    #[test]
    fn a_where_clauses_and_stops_at_the_first_part_that_is_not_true() {
        let int = |v: i64| lit(Value::Int(v), DataType::Integer);
        // Column i is NULL in every 7th row: there `i > 1000` is UNKNOWN, elsewhere FALSE. `100 / (j - j)` fails.
        let failing = cmp(
            BinaryOp::Gt,
            Box::new(Expr::Binary {
                op: BinaryOp::Div,
                left: int(100),
                right: Box::new(Expr::Binary {
                    op: BinaryOp::Sub,
                    left: column(3, DataType::Integer),
                    right: column(3, DataType::Integer),
                    data_type: DataType::Integer,
                }),
                data_type: DataType::Integer,
            }),
            int(0),
        );
        let expr =
            cmp(BinaryOp::And, Box::new(cmp(BinaryOp::Gt, column(0, DataType::Integer), int(1000))), Box::new(failing));
        let filter = compile(&expr, &[]).unwrap();
        let partition = partition();
        let mut masks = CombinedMasks::new(Combine::Or, 0);
        let mut reads = vec![0; 5];
        // A scan wants the TRUE rows: the UNKNOWN ones are dropped before the division.
        filter.true_masks(&partition, 0..partition.blocks(), &[], 1, &mut reads, &mut masks).unwrap();
        assert!((0..masks.len()).all(|i| masks.get(i) == NONE));
        // Under NOT, UNKNOWN and FALSE differ: the division runs on the UNKNOWN rows, and fails.
        let mut tri = Vec::new();
        let error = filter.eval_blocks(&partition, 0..partition.blocks(), &[], 1, &mut reads, &mut tri).unwrap_err();
        assert_eq!(error.sqlstate, crate::sqlstate::DIVISION_BY_ZERO);
    }

    #[test]
    fn shapes_that_do_not_compile_fall_back_to_rows() {
        let expr = cmp(BinaryOp::Lt, column(0, DataType::Integer), column(0, DataType::Integer));
        assert!(matches!(compile(&expr, &[]).unwrap(), Filter::Rows(_)));
        let partition = partition();
        let mask = compile(&expr, &[]).unwrap().eval_block(&partition, 0, &[]).unwrap();
        assert_eq!(mask.t, NONE);
    }

    #[test]
    fn tails_cover_exactly_the_rows_present() {
        assert_eq!(tail_mask(3000, 0), ALL);
        let last = tail_mask(3000, 2);
        assert_eq!(last.iter().map(|w| w.count_ones()).sum::<u32>(), 3000 - 2048);
        assert_eq!(tail_mask(3000, 3), NONE);
    }

    /// The integer range of `column op double` holds exactly the integers the row-by-row comparison (integer
    /// converted to double) selects, also where doubles are sparser than integers (beyond 2^53) and at the ends.
    #[test]
    fn int_ranges_agree_with_the_comparison_of_converted_integers() {
        let two_53 = 1i64 << 53;
        let mut integers = vec![i64::MIN, i64::MIN + 1, i64::MIN + 1024, i64::MIN + 1025, -1, 0, 1, i64::MAX];
        for base in [two_53, -two_53, 9_200_000_000_000_000_000, i64::MAX - 2048, -9_007_199_254_740_993] {
            integers.extend((-3..=3).map(|delta| base.saturating_add(delta)));
        }
        let mut doubles: Vec<f64> = integers.iter().map(|&v| v as f64).collect();
        doubles.extend([0.5, -0.5, 2.5e18, 9.2e18, 9.3e18, -9.3e18, f64::INFINITY, f64::NEG_INFINITY, 1e300]);
        doubles.extend(doubles.clone().iter().map(|d| d.next_up()));
        for op in [BinaryOp::Eq, BinaryOp::NotEq, BinaryOp::Lt, BinaryOp::LtEq, BinaryOp::Gt, BinaryOp::GtEq] {
            for &d in &doubles {
                let (low, high, negate) = int_range(op, &Value::Double(d)).unwrap();
                for &v in &integers {
                    let in_range = (low..=high).contains(&v) != negate;
                    let expected = compare(op, &Value::Int(v), &Value::Double(d)) == Value::Bool(true);
                    assert_eq!(in_range, expected, "{v} {} {d:e}", op.symbol());
                }
            }
        }
    }
}
