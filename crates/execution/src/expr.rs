//! Typed expressions and their row-at-a-time evaluation with PostgreSQL's semantics: three-valued logic,
//! integer overflow and division by zero are errors, comparisons of NULL are NULL.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::sync::Arc;

use numadb_storage::{DataType, Value, compare_doubles};

use crate::error::{ExecError, sqlstate};
pub use crate::function::ScalarFunction;
use crate::keys::KeySet;

/// A binary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (integer division truncates toward zero)
    Div,
    /// `%`
    Mod,
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
    /// `AND`
    And,
    /// `OR`
    Or,
    /// `||`
    Concat,
}

impl BinaryOp {
    /// Whether the operator compares.
    pub fn is_comparison(self) -> bool {
        matches!(self, BinaryOp::Eq | BinaryOp::NotEq | BinaryOp::Lt | BinaryOp::LtEq | BinaryOp::Gt | BinaryOp::GtEq)
    }

    /// Whether the operator is arithmetic.
    pub fn is_arithmetic(self) -> bool {
        matches!(self, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod)
    }

    /// The comparison with its operands swapped (`a < b` is `b > a`).
    pub fn flipped(self) -> BinaryOp {
        match self {
            BinaryOp::Lt => BinaryOp::Gt,
            BinaryOp::LtEq => BinaryOp::GtEq,
            BinaryOp::Gt => BinaryOp::Lt,
            BinaryOp::GtEq => BinaryOp::LtEq,
            other => other,
        }
    }

    /// The SQL spelling.
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Eq => "=",
            BinaryOp::NotEq => "<>",
            BinaryOp::Lt => "<",
            BinaryOp::LtEq => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::GtEq => ">=",
            BinaryOp::And => "AND",
            BinaryOp::Or => "OR",
            BinaryOp::Concat => "||",
        }
    }
}

/// A bound, typed expression. Column indexes refer to the row the expression is evaluated on (a table's
/// columns for filters and projections of a scan; group keys then aggregates after aggregation).
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// An input column.
    Column {
        /// Position in the input row.
        index: usize,
        /// Its type.
        data_type: DataType,
    },
    /// A constant.
    Literal {
        /// The value (NULL allowed).
        value: Value,
        /// Its type.
        data_type: DataType,
    },
    /// A statement parameter (`$1` is index 0).
    Param {
        /// Zero-based position.
        index: usize,
        /// The type it was inferred to have.
        data_type: DataType,
    },
    /// `left op right`.
    Binary {
        /// The operator.
        op: BinaryOp,
        /// Left operand.
        left: Box<Expr>,
        /// Right operand.
        right: Box<Expr>,
        /// Result type.
        data_type: DataType,
    },
    /// `NOT e`.
    Not(Box<Expr>),
    /// `-e`.
    Negate {
        /// Operand.
        expr: Box<Expr>,
        /// Result type.
        data_type: DataType,
    },
    /// `e IS [NOT] NULL`.
    IsNull {
        /// Operand.
        expr: Box<Expr>,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `e [NOT] BETWEEN low AND high`.
    Between {
        /// Operand.
        expr: Box<Expr>,
        /// Lower bound.
        low: Box<Expr>,
        /// Upper bound.
        high: Box<Expr>,
        /// `NOT BETWEEN`.
        negated: bool,
    },
    /// `e [NOT] IN (list)`.
    InList {
        /// Operand.
        expr: Box<Expr>,
        /// Candidates.
        list: Vec<Expr>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `e [NOT] IN (values)` over a subquery's many values, looked up in a hash set rather than compared one by
    /// one ([`quantified`]); SQL's rules as for [`Expr::InList`].
    InSet {
        /// Operand (an integer when the values are, text when they are).
        expr: Box<Expr>,
        /// The values.
        set: Arc<ValueSet>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `e [NOT] LIKE pattern [ESCAPE c]` and `ILIKE`: `%` matches any run of characters, `_` any one.
    Like {
        /// The text tested.
        expr: Box<Expr>,
        /// The pattern.
        pattern: Box<Expr>,
        /// `NOT LIKE`.
        negated: bool,
        /// `ILIKE`.
        case_insensitive: bool,
        /// The escape character (PostgreSQL's default is `\`; `ESCAPE ''` turns escaping off).
        escape: Option<char>,
    },
    /// `CAST(e AS t)`.
    Cast {
        /// Operand.
        expr: Box<Expr>,
        /// Target type.
        to: DataType,
    },
    /// `CASE WHEN c THEN r … ELSE e END`. A simple `CASE x WHEN v THEN …` is bound as conditions `x = v`, and
    /// `NULLIF` and `IS [NOT] DISTINCT FROM` as CASEs too.
    Case {
        /// Conditions and their results, tried in order; the first TRUE condition's result is the value.
        branches: Vec<(Expr, Expr)>,
        /// The value when no condition is TRUE (a NULL literal when the query has no ELSE).
        otherwise: Box<Expr>,
        /// Result type (every result has it).
        data_type: DataType,
    },
    /// An uncorrelated subquery's result: a scalar subquery `(SELECT …)` or `EXISTS (SELECT …)`. The statement's
    /// subqueries run before it (see `Plan::Subqueries`), and their results replace these expressions.
    Subquery {
        /// The subquery's position in the statement's list.
        index: usize,
        /// `EXISTS` rather than a scalar value.
        exists: bool,
        /// Result type.
        data_type: DataType,
    },
    /// `e op ANY (SELECT …)` or `e op ALL (SELECT …)` (`IN` is `= ANY`, `NOT IN` is `<> ALL`), replaced by
    /// comparisons with the subquery's values before the statement runs.
    QuantifiedSubquery {
        /// Operand.
        expr: Box<Expr>,
        /// The comparison.
        op: BinaryOp,
        /// `ALL` (every value must compare true) rather than `ANY` (one must).
        all: bool,
        /// The subquery's position in the statement's list.
        index: usize,
        /// The type of the subquery's column (comparable with the operand's: both numeric, or the same).
        values_type: DataType,
    },
    /// A scalar function call.
    Function {
        /// The function.
        function: ScalarFunction,
        /// Its arguments.
        args: Vec<Expr>,
        /// Result type.
        data_type: DataType,
    },
}

impl Expr {
    /// The expression's type.
    pub fn data_type(&self) -> DataType {
        match self {
            Expr::Column { data_type, .. }
            | Expr::Literal { data_type, .. }
            | Expr::Param { data_type, .. }
            | Expr::Binary { data_type, .. }
            | Expr::Negate { data_type, .. } => *data_type,
            Expr::Not(_)
            | Expr::IsNull { .. }
            | Expr::Between { .. }
            | Expr::InList { .. }
            | Expr::InSet { .. }
            | Expr::Like { .. }
            | Expr::QuantifiedSubquery { .. } => DataType::Boolean,
            Expr::Subquery { data_type, .. } => *data_type,
            Expr::Cast { to, .. } => *to,
            Expr::Case { data_type, .. } | Expr::Function { data_type, .. } => *data_type,
        }
    }

    /// Whether the expression is a NULL literal, cast or not: the one look an operator takes at its operands as
    /// it is evaluated (an operand that is a whole expression would be walked once per row).
    #[inline]
    pub fn is_null_literal(&self) -> bool {
        match self {
            Expr::Literal { value: Value::Null, .. } => true,
            Expr::Cast { expr, .. } => matches!(**expr, Expr::Literal { value: Value::Null, .. }),
            _ => false,
        }
    }

    /// Whether the expression is NULL whatever the row, as PostgreSQL's planner folds it: a NULL literal, or a
    /// strict operator or function with one as an operand (`NULL || 'x'`). Looked at two levels deep only: a
    /// strict function asks it of each argument as every row is evaluated.
    pub fn is_null_constant(&self) -> bool {
        match self {
            Expr::Binary { op, left, right, .. } if !matches!(op, BinaryOp::And | BinaryOp::Or) => {
                left.is_null_literal() || right.is_null_literal()
            }
            Expr::Function { function, args, .. } if function.is_strict() => args.iter().any(Expr::is_null_literal),
            _ => self.is_null_literal(),
        }
    }

    /// The expression with each direct sub-expression replaced by `f` of it (leaves are cloned): the one place
    /// that knows every variant's children, for rewrites over whole trees.
    pub fn try_map_children<E>(&self, f: &mut impl FnMut(&Expr) -> Result<Expr, E>) -> Result<Expr, E> {
        let mut boxed = |e: &Expr| f(e).map(Box::new);
        Ok(match self {
            Expr::Column { .. } | Expr::Literal { .. } | Expr::Param { .. } | Expr::Subquery { .. } => self.clone(),
            Expr::QuantifiedSubquery { expr, op, all, index, values_type } => Expr::QuantifiedSubquery {
                expr: boxed(expr)?,
                op: *op,
                all: *all,
                index: *index,
                values_type: *values_type,
            },
            Expr::Binary { op, left, right, data_type } => {
                Expr::Binary { op: *op, left: boxed(left)?, right: boxed(right)?, data_type: *data_type }
            }
            Expr::Not(inner) => Expr::Not(boxed(inner)?),
            Expr::Negate { expr, data_type } => Expr::Negate { expr: boxed(expr)?, data_type: *data_type },
            Expr::IsNull { expr, negated } => Expr::IsNull { expr: boxed(expr)?, negated: *negated },
            Expr::Between { expr, low, high, negated } => {
                Expr::Between { expr: boxed(expr)?, low: boxed(low)?, high: boxed(high)?, negated: *negated }
            }
            Expr::InSet { expr, set, negated } => {
                Expr::InSet { expr: boxed(expr)?, set: Arc::clone(set), negated: *negated }
            }
            Expr::InList { expr, list, negated } => {
                let expr = boxed(expr)?;
                Expr::InList { expr, list: list.iter().map(&mut *f).collect::<Result<_, _>>()?, negated: *negated }
            }
            Expr::Like { expr, pattern, negated, case_insensitive, escape } => Expr::Like {
                expr: boxed(expr)?,
                pattern: boxed(pattern)?,
                negated: *negated,
                case_insensitive: *case_insensitive,
                escape: *escape,
            },
            Expr::Cast { expr, to } => Expr::Cast { expr: boxed(expr)?, to: *to },
            Expr::Case { branches, otherwise, data_type } => {
                let branches = branches.iter().map(|(c, r)| Ok((f(c)?, f(r)?))).collect::<Result<Vec<_>, E>>()?;
                Expr::Case { branches, otherwise: Box::new(f(otherwise)?), data_type: *data_type }
            }
            Expr::Function { function, args, data_type } => Expr::Function {
                function: *function,
                args: args.iter().map(&mut *f).collect::<Result<_, _>>()?,
                data_type: *data_type,
            },
        })
    }

    /// The expression with its constant parts evaluated, as PostgreSQL's planner folds them, errors included:
    /// `SELECT 1/0 FROM t WHERE false` and `… WHERE a = 2 AND 1/0 = 1` raise division by zero whatever the rows,
    /// as they do there. What the planner does not reach is left alone, in its order:
    /// - AND and OR fold their operands left to right and stop at a constant FALSE (AND) or TRUE (OR), which is
    ///   then the whole value: `false AND 1/0 = 1` is false, `1/0 = 1 AND false` raises;
    /// - CASE drops the arms whose condition folds to FALSE or NULL, results unfolded, and stops at one that folds
    ///   to TRUE, whose result is then the ELSE;
    /// - COALESCE drops NULL constants and stops at its first other constant.
    ///
    /// Parameters, subqueries and `random()` are not constants here; parts of the expression beside them still
    /// fold.
    pub fn folded(&self) -> Result<Expr, ExecError> {
        // Children are folded first, so a node is a constant when its own children are all literals now and it is
        // not a leaf that reads something (a column, a parameter, a subquery) nor `random()`: one look per node,
        // not a walk of its subtree.
        let evaluated = |e: Expr| -> Result<Expr, ExecError> {
            let reads = matches!(
                e,
                Expr::Literal { .. }
                    | Expr::Column { .. }
                    | Expr::Param { .. }
                    | Expr::Subquery { .. }
                    | Expr::QuantifiedSubquery { .. }
                    | Expr::Function { function: ScalarFunction::Random, .. }
            );
            let mut children_literal = true;
            if !reads {
                let _: Result<Expr, ExecError> = e.try_map_children(&mut |child| {
                    children_literal &= matches!(child, Expr::Literal { .. });
                    Ok(Expr::literal(Value::Null, DataType::Boolean))
                });
            }
            if reads || !children_literal { Ok(e) } else { Ok(Expr::literal(e.eval(&[], &[])?, e.data_type())) }
        };
        let truth = |e: &Expr| match e {
            Expr::Literal { value: Value::Bool(b), .. } => Some(Some(*b)),
            Expr::Literal { value: Value::Null, .. } => Some(None),
            _ => None,
        };
        match self {
            Expr::Binary { op: op @ (BinaryOp::And | BinaryOp::Or), left, right, data_type } => {
                // The value that settles the operator: FALSE for AND, TRUE for OR.
                let settles = *op == BinaryOp::Or;
                let left = left.folded()?;
                if truth(&left) == Some(Some(settles)) {
                    return Ok(left);
                }
                let right = right.folded()?;
                match (truth(&left), truth(&right)) {
                    (_, Some(Some(value))) if value == settles => Ok(right),
                    (Some(Some(_)), _) => Ok(right),
                    (_, Some(Some(_))) => Ok(left),
                    _ => evaluated(Expr::Binary {
                        op: *op,
                        left: Box::new(left),
                        right: Box::new(right),
                        data_type: *data_type,
                    }),
                }
            }
            Expr::Case { branches, otherwise, data_type } => {
                let mut kept = Vec::with_capacity(branches.len());
                let mut otherwise = Some(otherwise.as_ref());
                let mut settled = None;
                for (condition, result) in branches {
                    let condition = condition.folded()?;
                    match truth(&condition) {
                        Some(Some(true)) => {
                            settled = Some(result.folded()?);
                            otherwise = None;
                            break;
                        }
                        Some(_) => {}
                        None => kept.push((condition, result.folded()?)),
                    }
                }
                let otherwise = match (settled, otherwise) {
                    (Some(result), _) => result,
                    (None, Some(otherwise)) => otherwise.folded()?,
                    (None, None) => unreachable!("an ELSE is dropped only for a settled arm"),
                };
                if kept.is_empty() {
                    return Ok(otherwise);
                }
                evaluated(Expr::Case { branches: kept, otherwise: Box::new(otherwise), data_type: *data_type })
            }
            Expr::Function { function: ScalarFunction::Coalesce, args, data_type } => {
                let mut kept = Vec::with_capacity(args.len());
                for arg in args {
                    let arg = arg.folded()?;
                    if arg.is_null_literal() {
                        continue;
                    }
                    let constant = matches!(arg, Expr::Literal { .. });
                    kept.push(arg);
                    if constant {
                        break;
                    }
                }
                match kept.len() {
                    0 => Ok(Expr::literal(Value::Null, *data_type)),
                    1 if matches!(kept[0], Expr::Literal { .. }) => Ok(kept.remove(0)),
                    _ => Ok(Expr::Function { function: ScalarFunction::Coalesce, args: kept, data_type: *data_type }),
                }
            }
            _ => evaluated(self.try_map_children(&mut |child| child.folded())?),
        }
    }

    /// A constant.
    pub fn literal(value: Value, data_type: DataType) -> Expr {
        Expr::Literal { value, data_type }
    }

    /// Every input column the expression reads.
    pub fn columns(&self, out: &mut Vec<usize>) {
        match self {
            Expr::Column { index, .. } => {
                if !out.contains(index) {
                    out.push(*index);
                }
            }
            Expr::Literal { .. } | Expr::Param { .. } | Expr::Subquery { .. } => {}
            Expr::QuantifiedSubquery { expr, .. } => expr.columns(out),
            Expr::Binary { left, right, .. } => {
                left.columns(out);
                right.columns(out);
            }
            Expr::Not(e) | Expr::Negate { expr: e, .. } | Expr::IsNull { expr: e, .. } | Expr::Cast { expr: e, .. } => {
                e.columns(out)
            }
            Expr::Between { expr, low, high, .. } => {
                expr.columns(out);
                low.columns(out);
                high.columns(out);
            }
            Expr::InList { expr, list, .. } => {
                expr.columns(out);
                list.iter().for_each(|e| e.columns(out));
            }
            Expr::InSet { expr, .. } => expr.columns(out),
            Expr::Like { expr, pattern, .. } => {
                expr.columns(out);
                pattern.columns(out);
            }
            Expr::Case { branches, otherwise, .. } => {
                for (condition, result) in branches {
                    condition.columns(out);
                    result.columns(out);
                }
                otherwise.columns(out);
            }
            Expr::Function { args, .. } => args.iter().for_each(|e| e.columns(out)),
        }
    }

    /// Whether the expression reads no column (it may read parameters).
    pub fn is_constant(&self) -> bool {
        let mut columns = Vec::new();
        self.columns(&mut columns);
        columns.is_empty() && !self.is_volatile()
    }

    /// Whether the expression calls `random()`: its value changes from row to row though it reads no column, so
    /// it is never evaluated once for all rows (as a constant, an index key, a filter's bound).
    pub fn is_volatile(&self) -> bool {
        self.any_node(&|node| matches!(node, Expr::Function { function: crate::function::ScalarFunction::Random, .. }))
    }

    /// Whether `found` holds for the expression or any expression within it.
    pub fn any_node(&self, found: &impl Fn(&Expr) -> bool) -> bool {
        if found(self) {
            return true;
        }
        let mut any = false;
        let _: Result<Expr, ExecError> = self.try_map_children(&mut |child| {
            any = any || child.any_node(found);
            Ok(child.clone())
        });
        any
    }

    /// [`Expr::eval`], borrowing a literal's value and a column's from `row` where `eval` clones them. A text
    /// value's clone is an atomic increment of its shared count: workers evaluating one literal row by row fought
    /// over that count's cache line, and `"C1"::text LIKE '12%'` spent over half its time there (2 workers).
    #[inline]
    pub fn eval_ref<'a>(&'a self, row: &'a [Value], params: &[Value]) -> Result<Cow<'a, Value>, ExecError> {
        match self {
            Expr::Literal { value, .. } => Ok(Cow::Borrowed(value)),
            Expr::Column { index, .. } => Ok(row.get(*index).map_or(Cow::Owned(Value::Null), Cow::Borrowed)),
            _ => self.eval(row, params).map(Cow::Owned),
        }
    }

    /// Evaluates on a row of values.
    pub fn eval(&self, row: &[Value], params: &[Value]) -> Result<Value, ExecError> {
        match self {
            Expr::Column { index, .. } => Ok(row.get(*index).cloned().unwrap_or(Value::Null)),
            Expr::Literal { value, .. } => Ok(value.clone()),
            Expr::Param { index, data_type } => {
                let value = params.get(*index).cloned().ok_or_else(|| {
                    ExecError::new(sqlstate::UNDEFINED_PARAMETER, format!("there is no parameter ${}", index + 1))
                })?;
                coerce_param(value, *data_type)
            }
            // A strict operator with a NULL constant operand is NULL, the other operand not evaluated: PostgreSQL
            // folds it so when planning (`NULL::int + a / 0` is NULL, no error; a constant other operand was folded
            // first, errors and all: `Expr::folded`).
            Expr::Binary { op, left, right, .. }
                if (left.is_null_literal() || right.is_null_literal())
                    && !matches!(op, BinaryOp::And | BinaryOp::Or) =>
            {
                Ok(Value::Null)
            }
            Expr::Binary { op, left, right, data_type } => {
                let left_value = left.eval_ref(row, params)?;
                match op {
                    BinaryOp::And => {
                        if matches!(*left_value, Value::Bool(false)) {
                            return Ok(Value::Bool(false));
                        }
                        let right_value = right.eval_ref(row, params)?;
                        Ok(and3(&left_value, &right_value))
                    }
                    BinaryOp::Or => {
                        if matches!(*left_value, Value::Bool(true)) {
                            return Ok(Value::Bool(true));
                        }
                        let right_value = right.eval_ref(row, params)?;
                        Ok(or3(&left_value, &right_value))
                    }
                    _ => {
                        let right_value = right.eval_ref(row, params)?;
                        binary(*op, &left_value, &right_value, *data_type)
                    }
                }
            }
            Expr::Not(e) => Ok(match e.eval(row, params)? {
                Value::Bool(b) => Value::Bool(!b),
                _ => Value::Null,
            }),
            Expr::Negate { expr, data_type } => match expr.eval(row, params)? {
                Value::Null => Ok(Value::Null),
                Value::Int(v) => checked_int(v.checked_neg(), *data_type),
                Value::Numeric(v) => checked_numeric(v.checked_neg()),
                Value::Double(v) => Ok(Value::Double(-v)),
                other => Err(type_error(&format!("cannot negate {other}"))),
            },
            Expr::IsNull { expr, negated } => Ok(Value::Bool(expr.eval_ref(row, params)?.is_null() != *negated)),
            Expr::Between { expr, low, high, negated } => {
                let value = expr.eval_ref(row, params)?;
                let low = compare(BinaryOp::GtEq, &value, &*low.eval_ref(row, params)?);
                let high = compare(BinaryOp::LtEq, &value, &*high.eval_ref(row, params)?);
                let within = and3(&low, &high);
                Ok(if *negated { not3(&within) } else { within })
            }
            Expr::InList { expr, list, negated } => {
                let value = expr.eval_ref(row, params)?;
                let mut result = Value::Bool(false);
                for candidate in list {
                    let equal = compare(BinaryOp::Eq, &value, &*candidate.eval_ref(row, params)?);
                    result = or3(&result, &equal);
                    if matches!(result, Value::Bool(true)) {
                        break;
                    }
                }
                Ok(if *negated { not3(&result) } else { result })
            }
            Expr::InSet { expr, set, negated } => {
                let found = set.find(&expr.eval(row, params)?);
                Ok(if *negated { not3(&found) } else { found })
            }
            Expr::Like { expr, pattern, negated, case_insensitive, escape } => {
                match (&*expr.eval_ref(row, params)?, &*pattern.eval_ref(row, params)?) {
                    (Value::Null, _) | (_, Value::Null) => Ok(Value::Null),
                    (Value::Text(text), Value::Text(pattern)) => {
                        Ok(Value::Bool(like(text, pattern, *escape, *case_insensitive)? != *negated))
                    }
                    (a, b) => Err(type_error(&format!("LIKE needs text operands, not {a} and {b}"))),
                }
            }
            Expr::Cast { expr, to } => cast(expr.eval(row, params)?, *to),
            Expr::Case { branches, otherwise, .. } => {
                for (condition, result) in branches {
                    if condition.eval(row, params)? == Value::Bool(true) {
                        return result.eval(row, params);
                    }
                }
                otherwise.eval(row, params)
            }
            Expr::Function { function, args, data_type } => function.eval(args, *data_type, row, params),
            Expr::Subquery { .. } | Expr::QuantifiedSubquery { .. } => {
                Err(ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, "a subquery is not supported here"))
            }
        }
    }

    /// The expression with the statement's subqueries replaced by their results (`results[i]` holds subquery
    /// `i`'s rows): a scalar subquery by its one value (NULL for no row; more than one row is an error), EXISTS by
    /// whether there is a row, `op ANY/ALL (SELECT …)` by comparisons with the values (see [`quantified`]).
    pub fn substitute_subqueries(&self, results: &[Vec<Vec<Value>>]) -> Result<Expr, ExecError> {
        let rows = |index: usize| results.get(index).ok_or_else(|| ExecError::internal("a subquery ran out of order"));
        match self {
            Expr::Subquery { index, exists: true, .. } => {
                Ok(Expr::literal(Value::Bool(!rows(*index)?.is_empty()), DataType::Boolean))
            }
            Expr::Subquery { index, exists: false, data_type } => match rows(*index)?.as_slice() {
                [] => Ok(Expr::literal(Value::Null, *data_type)),
                [row] => Ok(Expr::literal(row.first().cloned().unwrap_or(Value::Null), *data_type)),
                _ => Err(ExecError::new(
                    sqlstate::CARDINALITY_VIOLATION,
                    "more than one row returned by a subquery used as an expression",
                )),
            },
            Expr::QuantifiedSubquery { expr, op, all, index, values_type } => {
                let values = rows(*index)?.iter().map(|row| row.first().cloned().unwrap_or(Value::Null)).collect();
                Ok(quantified(expr.substitute_subqueries(results)?, *op, *all, values, *values_type))
            }
            _ => self.try_map_children(&mut |e| e.substitute_subqueries(results)),
        }
    }
}

/// From how many values a subquery's `IN` list is a [`ValueSet`]. Below, the list's comparisons one by one (and,
/// on an integer column, the scan's kernels: `crate::filter::IN_KEYS_MIN` is the same count) cost no more.
pub const IN_SET_MIN: usize = 48;

/// The values of a long `IN` list, hashed: integers or texts (and whether a NULL was among them).
#[derive(Debug, PartialEq)]
pub struct ValueSet {
    /// The integers, in order (for a scan's zone maps).
    ints: Arc<[i64]>,
    /// The integers as a join's keys are held (a bitmap where they are close enough), which a scan of an integer
    /// column takes as they are.
    keys: Arc<KeySet>,
    texts: std::collections::HashSet<Arc<str>, foldhash::fast::FixedState>,
    has_null: bool,
    len: usize,
}

impl ValueSet {
    /// The set of `values` for an operand of type `operand`: integers for an integer operand, texts for a text
    /// one, each value equal to the operand exactly when `=` says so. `None` for other types (a double operand
    /// compares with integers as doubles), which stay a list.
    pub fn of(values: &[Value], operand: DataType) -> Option<ValueSet> {
        let (mut ints, mut texts, mut has_null) = (Vec::new(), Vec::new(), false);
        for value in values {
            match (value, operand) {
                (Value::Null, _) => has_null = true,
                (Value::Int(v), DataType::Integer | DataType::BigInt) => ints.push(*v),
                (Value::Text(t), DataType::Text) => texts.push(Arc::clone(t)),
                _ => return None,
            }
        }
        ints.sort_unstable();
        ints.dedup();
        Some(ValueSet {
            keys: Arc::new(KeySet::of(&ints)),
            ints: ints.into(),
            texts: texts.into_iter().collect(),
            has_null,
            len: values.len(),
        })
    }

    /// `value IN (the values)`: TRUE when one equals it, else NULL if the operand or a value is NULL, else FALSE.
    pub fn find(&self, value: &Value) -> Value {
        let found = match value {
            Value::Null => return Value::Null,
            Value::Int(v) => self.keys.contains(*v),
            Value::Text(t) => self.texts.contains(t),
            _ => false,
        };
        if found {
            Value::Bool(true)
        } else if self.has_null {
            Value::Null
        } else {
            Value::Bool(false)
        }
    }

    /// Whether the integer `value` is one of the values.
    #[inline]
    pub fn contains_int(&self, value: i64) -> bool {
        self.keys.contains(value)
    }

    /// The integers as a set of keys.
    pub fn keys(&self) -> &Arc<KeySet> {
        &self.keys
    }

    /// The integers, in order (none for a set of texts).
    pub fn ints(&self) -> &Arc<[i64]> {
        &self.ints
    }

    /// Whether a NULL was among the values.
    pub fn has_null(&self) -> bool {
        self.has_null
    }

    /// How many values the list had.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list was empty (never: an empty list is no set).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// `expr op ANY (values)` (`all` false) or `expr op ALL (values)` as an expression over literals, with SQL's
/// rules: over no values ANY is false and ALL is true (even for a NULL operand); otherwise it is the OR (ANY) or
/// AND (ALL) of the comparisons with every value, NULLs included. `= ANY` and `<> ALL` become an IN list (the scan
/// kernels' fast path); for the others the values that decide are kept: the largest or smallest for an ordering
/// (`x < ANY (S)` is `x < max(S)`), two distinct values for `= ALL` and `<> ANY` (two differing values already
/// decide them for any non-NULL operand), and one NULL comparison if the values hold a NULL.
pub fn quantified(expr: Expr, op: BinaryOp, all: bool, values: Vec<Value>, values_type: DataType) -> Expr {
    let literal = |value: Value| Expr::literal(value, values_type);
    if values.is_empty() {
        return Expr::literal(Value::Bool(all), DataType::Boolean);
    }
    if matches!((op, all), (BinaryOp::Eq, false) | (BinaryOp::NotEq, true)) {
        if values.len() >= IN_SET_MIN
            && let Some(set) = ValueSet::of(&values, expr.data_type())
        {
            return Expr::InSet { expr: Box::new(expr), set: Arc::new(set), negated: all };
        }
        let list = values.into_iter().map(literal).collect();
        return Expr::InList { expr: Box::new(expr), list, negated: all };
    }
    let has_null = values.iter().any(Value::is_null);
    let mut deciding: Vec<Value> = Vec::new();
    for value in values.into_iter().filter(|v| !v.is_null()) {
        match op {
            BinaryOp::Eq | BinaryOp::NotEq => {
                if deciding.len() < 2 && !deciding.contains(&value) {
                    deciding.push(value);
                }
            }
            _ => {
                // ANY with < or <= (and ALL with > or >=) is decided by the largest value; the others by the
                // smallest.
                let by_largest = matches!(op, BinaryOp::Lt | BinaryOp::LtEq) != all;
                let keep_new = match deciding.first() {
                    None => true,
                    Some(kept) => {
                        let toward = if by_largest { BinaryOp::Gt } else { BinaryOp::Lt };
                        compare(toward, &value, kept) == Value::Bool(true)
                    }
                };
                if keep_new {
                    deciding = vec![value];
                }
            }
        }
    }
    if has_null {
        deciding.push(Value::Null);
    }
    let comparisons = deciding.into_iter().map(|value| Expr::Binary {
        op,
        left: Box::new(expr.clone()),
        right: Box::new(literal(value)),
        data_type: DataType::Boolean,
    });
    let combine = if all { BinaryOp::And } else { BinaryOp::Or };
    comparisons
        .reduce(|left, right| Expr::Binary {
            op: combine,
            left: Box::new(left),
            right: Box::new(right),
            data_type: DataType::Boolean,
        })
        .expect("a non-empty list of values keeps at least one")
}

/// One element of a LIKE pattern.
#[derive(Debug, Clone, Copy, PartialEq)]
enum LikeToken {
    /// This character.
    Char(char),
    /// `_`: any one character.
    One,
    /// `%`: any run of characters, empty included.
    Any,
    /// The escape character ending the pattern: an error if a character of the text is matched against it, as
    /// PostgreSQL raises it only then (`'a' LIKE 'a\'` is false, `'ab' LIKE 'a\'` an error).
    TrailingEscape,
}

/// Whether `text` matches the LIKE `pattern` (PostgreSQL's rules: the whole text must match; a pattern ending in
/// the escape character is an error once a character of the text reaches it).
pub fn like(text: &str, pattern: &str, escape: Option<char>, case_insensitive: bool) -> Result<bool, ExecError> {
    let fold =
        |s: &str| if case_insensitive { s.chars().map(crate::function::lower_char).collect() } else { s.to_string() };
    let (text, pattern) = (fold(text), fold(pattern));
    let mut tokens = Vec::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        tokens.push(match c {
            c if Some(c) == escape => match chars.next() {
                Some(escaped) => LikeToken::Char(escaped),
                None => LikeToken::TrailingEscape,
            },
            '%' => LikeToken::Any,
            '_' => LikeToken::One,
            c => LikeToken::Char(c),
        });
    }
    let text: Vec<char> = text.chars().collect();
    // Greedy matching with one backtrack point: the last `%` seen and where in the text it resumed.
    let (mut t, mut p) = (0, 0);
    let mut resume: Option<(usize, usize)> = None;
    while t < text.len() {
        match tokens.get(p) {
            Some(LikeToken::Any) => {
                resume = Some((p, t));
                p += 1;
            }
            Some(LikeToken::One) => {
                t += 1;
                p += 1;
            }
            Some(LikeToken::Char(c)) if *c == text[t] => {
                t += 1;
                p += 1;
            }
            Some(LikeToken::TrailingEscape) => {
                return Err(ExecError::new(
                    sqlstate::INVALID_ESCAPE_SEQUENCE,
                    "LIKE pattern must not end with escape character",
                ));
            }
            _ => match resume {
                Some((any_at, from)) => {
                    p = any_at + 1;
                    t = from + 1;
                    resume = Some((any_at, from + 1));
                }
                None => return Ok(false),
            },
        }
    }
    Ok(tokens[p..].iter().all(|token| *token == LikeToken::Any))
}

fn type_error(message: &str) -> ExecError {
    ExecError::new(sqlstate::DATATYPE_MISMATCH, message)
}

/// A parameter value brought to the type its context gave it (clients may send `1` for a `bigint` parameter, or
/// text for anything).
pub fn coerce_param(value: Value, data_type: DataType) -> Result<Value, ExecError> {
    match (&value, data_type) {
        (Value::Null, _) => Ok(Value::Null),
        (Value::Text(text), t) if t != DataType::Text => parse_value(text, t),
        (Value::Int(v), DataType::Integer) if i32::try_from(*v).is_err() => {
            Err(ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range"))
        }
        (Value::Int(v), DataType::Double) => Ok(Value::Double(*v as f64)),
        _ => Ok(value),
    }
}

fn and3(left: &Value, right: &Value) -> Value {
    match (left, right) {
        (Value::Bool(false), _) | (_, Value::Bool(false)) => Value::Bool(false),
        (Value::Bool(true), Value::Bool(true)) => Value::Bool(true),
        _ => Value::Null,
    }
}

fn or3(left: &Value, right: &Value) -> Value {
    match (left, right) {
        (Value::Bool(true), _) | (_, Value::Bool(true)) => Value::Bool(true),
        (Value::Bool(false), Value::Bool(false)) => Value::Bool(false),
        _ => Value::Null,
    }
}

fn not3(value: &Value) -> Value {
    match value {
        Value::Bool(b) => Value::Bool(!b),
        _ => Value::Null,
    }
}

/// Compares two values (NULL if either is NULL).
pub fn compare(op: BinaryOp, left: &Value, right: &Value) -> Value {
    let ordering = match (left, right) {
        (Value::Null, _) | (_, Value::Null) => return Value::Null,
        (Value::Int(a), Value::Int(b)) => a.cmp(b),
        (Value::Int(a), Value::Double(b)) => compare_doubles(*a as f64, *b),
        (Value::Double(a), Value::Int(b)) => compare_doubles(*a, *b as f64),
        (Value::Double(a), Value::Double(b)) => compare_doubles(*a, *b),
        (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
        (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
        (Value::Numeric(_), Value::Int(_) | Value::Double(_) | Value::Numeric(_))
        | (Value::Int(_) | Value::Double(_), Value::Numeric(_)) => left.sort_cmp(right),
        _ => return Value::Null,
    };
    Value::Bool(match op {
        BinaryOp::Eq => ordering == Ordering::Equal,
        BinaryOp::NotEq => ordering != Ordering::Equal,
        BinaryOp::Lt => ordering == Ordering::Less,
        BinaryOp::LtEq => ordering != Ordering::Greater,
        BinaryOp::Gt => ordering == Ordering::Greater,
        BinaryOp::GtEq => ordering != Ordering::Less,
        _ => unreachable!("compare is only called with comparison operators"),
    })
}

/// An integer result checked against its type's range.
pub(crate) fn checked_int(value: Option<i64>, data_type: DataType) -> Result<Value, ExecError> {
    let out_of_range = || {
        let name = if data_type == DataType::Integer { "integer" } else { "bigint" };
        ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, format!("{name} out of range"))
    };
    let value = value.ok_or_else(out_of_range)?;
    if data_type == DataType::Integer && i32::try_from(value).is_err() {
        return Err(out_of_range());
    }
    Ok(Value::Int(value))
}

/// A numeric result; `None` (past 128 bits) is PostgreSQL's overflow error.
fn checked_numeric(value: Option<i128>) -> Result<Value, ExecError> {
    value
        .map(Value::Numeric)
        .ok_or_else(|| ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "value overflows numeric format"))
}

fn checked_double(value: f64, inputs_finite: bool) -> Result<Value, ExecError> {
    if value.is_infinite() && inputs_finite {
        return Err(ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow"));
    }
    Ok(Value::Double(value))
}

/// The text form of a value of `data_type` parsed (a literal, a parameter, a COPY field), with PostgreSQL's
/// SQLSTATE: 22003 for a number out of the type's range, 22P02 for anything else that is not a value of it.
pub fn parse_value(text: &str, data_type: DataType) -> Result<Value, ExecError> {
    Value::parse(text, data_type).map_err(|message| {
        let code = if message.contains("out of range") {
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE
        } else {
            sqlstate::INVALID_TEXT_REPRESENTATION
        };
        ExecError::new(code, message)
    })
}

/// A value cast to text. Unlike the output format (`t`/`f`), PostgreSQL's cast of a boolean to text spells it
/// out: `true::text` is `true`.
fn cast_text(value: &Value) -> String {
    match value {
        Value::Bool(b) => b.to_string(),
        other => other.to_pg_text().unwrap_or_default(),
    }
}

fn float_underflow() -> ExecError {
    ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: underflow")
}

pub(crate) fn division_by_zero() -> ExecError {
    ExecError::new(sqlstate::DIVISION_BY_ZERO, "division by zero")
}

pub(crate) fn binary(op: BinaryOp, left: &Value, right: &Value, data_type: DataType) -> Result<Value, ExecError> {
    if op.is_comparison() {
        return Ok(compare(op, left, right));
    }
    if left.is_null() || right.is_null() {
        return Ok(Value::Null);
    }
    match op {
        BinaryOp::Concat => Ok(Value::Text(Arc::from(format!("{}{}", cast_text(left), cast_text(right))))),
        _ if data_type == DataType::Double => {
            let as_double = |v: &Value| match v {
                Value::Int(i) => *i as f64,
                Value::Numeric(i) => *i as f64,
                Value::Double(d) => *d,
                _ => f64::NAN,
            };
            let (a, b) = (as_double(left), as_double(right));
            let finite = a.is_finite() && b.is_finite();
            match op {
                BinaryOp::Add => checked_double(a + b, finite),
                BinaryOp::Sub => checked_double(a - b, finite),
                BinaryOp::Mul if a * b == 0.0 && a != 0.0 && b != 0.0 => Err(float_underflow()),
                BinaryOp::Mul => checked_double(a * b, finite),
                // NaN / 0 is NaN, as in PostgreSQL.
                BinaryOp::Div if b == 0.0 && !a.is_nan() => Err(division_by_zero()),
                BinaryOp::Div if a / b == 0.0 && a != 0.0 && !b.is_infinite() => Err(float_underflow()),
                BinaryOp::Div => checked_double(a / b, finite),
                BinaryOp::Mod if b == 0.0 => Err(division_by_zero()),
                BinaryOp::Mod => Ok(Value::Double(a % b)),
                _ => Err(type_error("unsupported operator")),
            }
        }
        // Whole numerics: exact in 128 bits. Division is not here: its fraction makes it a double (bind).
        _ if data_type == DataType::Numeric => {
            let as_wide = |v: &Value| match v {
                Value::Int(i) => Some(i128::from(*i)),
                Value::Numeric(i) => Some(*i),
                _ => None,
            };
            let (Some(a), Some(b)) = (as_wide(left), as_wide(right)) else {
                return Err(type_error(&format!("operator does not exist: {} {} {}", left, op.symbol(), right)));
            };
            match op {
                BinaryOp::Add => checked_numeric(a.checked_add(b)),
                BinaryOp::Sub => checked_numeric(a.checked_sub(b)),
                BinaryOp::Mul => checked_numeric(a.checked_mul(b)),
                BinaryOp::Mod if b == 0 => Err(division_by_zero()),
                BinaryOp::Mod => checked_numeric(a.checked_rem(b).or(Some(0))),
                _ => Err(type_error("unsupported operator")),
            }
        }
        _ => {
            let (Value::Int(a), Value::Int(b)) = (left, right) else {
                return Err(type_error(&format!("operator does not exist: {} {} {}", left, op.symbol(), right)));
            };
            match op {
                BinaryOp::Add => checked_int(a.checked_add(*b), data_type),
                BinaryOp::Sub => checked_int(a.checked_sub(*b), data_type),
                BinaryOp::Mul => checked_int(a.checked_mul(*b), data_type),
                BinaryOp::Div if *b == 0 => Err(division_by_zero()),
                BinaryOp::Div => checked_int(a.checked_div(*b), data_type),
                BinaryOp::Mod if *b == 0 => Err(division_by_zero()),
                BinaryOp::Mod => checked_int(a.checked_rem(*b).or(Some(0)), data_type),
                _ => Err(type_error("unsupported operator")),
            }
        }
    }
}

/// `CAST(value AS to)` with PostgreSQL's rules for the supported types.
pub fn cast(value: Value, to: DataType) -> Result<Value, ExecError> {
    let out_of_range =
        |name: &str| ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, format!("{name} out of range"));
    match (value, to) {
        (Value::Null, _) => Ok(Value::Null),
        (Value::Int(v), DataType::Integer) => {
            i32::try_from(v).map(|v| Value::Int(i64::from(v))).map_err(|_| out_of_range("integer"))
        }
        (Value::Int(v), DataType::BigInt) => Ok(Value::Int(v)),
        (Value::Int(v), DataType::Double) => Ok(Value::Double(v as f64)),
        (Value::Int(v), DataType::Boolean) => Ok(Value::Bool(v != 0)),
        (Value::Int(v), DataType::Numeric) => Ok(Value::Numeric(i128::from(v))),
        (Value::Numeric(v), DataType::Numeric) => Ok(Value::Numeric(v)),
        (Value::Numeric(v), t @ (DataType::Integer | DataType::BigInt)) => {
            let (min, max) = t.integer_range().expect("integer type");
            i64::try_from(v)
                .ok()
                .filter(|v| (min..=max).contains(v))
                .map(Value::Int)
                .ok_or_else(|| out_of_range(t.sql_name()))
        }
        (Value::Numeric(v), DataType::Double) => Ok(Value::Double(v as f64)),
        // Only where a numeric meets a double with no fraction: numadb's numerics are whole.
        (Value::Double(v), DataType::Numeric) if v.fract() == 0.0 && v.abs() < 1e38 => Ok(Value::Numeric(v as i128)),
        (Value::Double(v), DataType::Double) => Ok(Value::Double(v)),
        (Value::Double(v), t @ (DataType::Integer | DataType::BigInt)) => {
            let rounded = v.round_ties_even();
            let (min, max) = t.integer_range().expect("integer type");
            // `max as f64 + 1.0` is exact (2^31, 2^63) where `max as f64` may round up to it.
            if !rounded.is_finite() || rounded < min as f64 || rounded >= max as f64 + 1.0 {
                return Err(out_of_range(t.sql_name()));
            }
            Ok(Value::Int(rounded as i64))
        }
        (Value::Bool(b), DataType::Boolean) => Ok(Value::Bool(b)),
        (Value::Bool(b), DataType::Integer) => Ok(Value::Int(i64::from(b))),
        (Value::Text(text), DataType::Text) => Ok(Value::Text(text)),
        (Value::Text(text), t) => parse_value(&text, t),
        (value, DataType::Text) => Ok(Value::Text(Arc::from(cast_text(&value)))),
        (value, to) => Err(ExecError::new(
            sqlstate::CANNOT_COERCE,
            format!("cannot cast {} to {to}", value.to_pg_text().unwrap_or_default()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(v: i64) -> Expr {
        Expr::literal(Value::Int(v), DataType::Integer)
    }

    fn column(index: usize) -> Expr {
        Expr::Column { index, data_type: DataType::Integer }
    }

    fn binary_expr(op: BinaryOp, left: Expr, right: Expr, data_type: DataType) -> Expr {
        Expr::Binary { op, left: Box::new(left), right: Box::new(right), data_type }
    }

    #[test]
    fn like_follows_postgresql() {
        for (text, pattern, expected) in [
            ("numadb", "numadb", true),
            ("numadb", "num%", true),
            ("numadb", "%db", true),
            ("numadb", "%ma%", true),
            ("numadb", "n_madb", true),
            ("numadb", "n_m", false),
            ("numadb", "%x%", false),
            ("", "%", true),
            ("", "_", false),
            ("a%b", "a\\%b", true),
            ("axb", "a\\%b", false),
            ("aXb", "a%%b", true),
            ("mississippi", "%iss%ppi", true),
            ("mississippi", "m%i%s%i%p%i", true),
            ("mississippi", "m%x%i", false),
            ("ünïcode", "_n_code", true),
        ] {
            assert_eq!(like(text, pattern, Some('\\'), false).unwrap(), expected, "{text:?} LIKE {pattern:?}");
        }
        assert!(like("NumaDB", "numa%", None, true).unwrap());
        assert!(!like("NumaDB", "numa%", None, false).unwrap());
        assert!(like("a#xb", "a##_b", Some('#'), false).unwrap(), "## is a literal #, then _ is any character");
        assert!(like("a_b", "a#_b", Some('#'), false).unwrap());
        assert!(like("a\\b", "a\\b", None, false).unwrap(), "no escape character");
        // A pattern ending in its escape character fails only when a character of the text reaches the end.
        for (text, pattern) in [("ab", "a\\"), ("ab", "%\\"), ("ab", "_%\\")] {
            let error = like(text, pattern, Some('\\'), false).unwrap_err();
            assert_eq!(error.sqlstate, sqlstate::INVALID_ESCAPE_SEQUENCE, "{text:?} LIKE {pattern:?}");
        }
        for (text, pattern) in [("a", "a\\"), ("x", "a\\"), ("", "%\\"), ("b", "a%\\")] {
            assert!(!like(text, pattern, Some('\\'), false).unwrap(), "{text:?} LIKE {pattern:?}");
        }
    }

    #[test]
    fn arithmetic_checks_overflow_and_division_by_zero() {
        let add = binary_expr(BinaryOp::Add, int(i64::from(i32::MAX)), int(1), DataType::Integer);
        let error = add.eval(&[], &[]).unwrap_err();
        assert_eq!((error.sqlstate, error.message.as_str()), ("22003", "integer out of range"));
        let add = binary_expr(BinaryOp::Add, int(i64::from(i32::MAX)), int(1), DataType::BigInt);
        assert_eq!(add.eval(&[], &[]).unwrap(), Value::Int(2_147_483_648));
        let divide = binary_expr(BinaryOp::Div, int(7), int(0), DataType::Integer);
        assert_eq!(divide.eval(&[], &[]).unwrap_err().sqlstate, "22012");
        let divide = binary_expr(BinaryOp::Div, int(-7), int(2), DataType::Integer);
        assert_eq!(divide.eval(&[], &[]).unwrap(), Value::Int(-3));
        let modulo = binary_expr(BinaryOp::Mod, int(-7), int(2), DataType::Integer);
        assert_eq!(modulo.eval(&[], &[]).unwrap(), Value::Int(-1));
        let min = binary_expr(BinaryOp::Div, int(i64::from(i32::MIN)), int(-1), DataType::Integer);
        assert_eq!(min.eval(&[], &[]).unwrap_err().sqlstate, "22003");
    }

    #[test]
    fn logic_is_three_valued() {
        let null = Expr::literal(Value::Null, DataType::Boolean);
        let truth = |b: bool| Expr::literal(Value::Bool(b), DataType::Boolean);
        let and = binary_expr(BinaryOp::And, null.clone(), truth(false), DataType::Boolean);
        assert_eq!(and.eval(&[], &[]).unwrap(), Value::Bool(false));
        let or = binary_expr(BinaryOp::Or, null.clone(), truth(false), DataType::Boolean);
        assert_eq!(or.eval(&[], &[]).unwrap(), Value::Null);
        assert_eq!(Expr::Not(Box::new(null)).eval(&[], &[]).unwrap(), Value::Null);
        let row = [Value::Null, Value::Int(3)];
        let in_list = Expr::InList {
            expr: Box::new(column(1)),
            list: vec![int(1), Expr::literal(Value::Null, DataType::Integer)],
            negated: false,
        };
        assert_eq!(in_list.eval(&row, &[]).unwrap(), Value::Null);
        let between =
            Expr::Between { expr: Box::new(column(1)), low: Box::new(int(1)), high: Box::new(int(3)), negated: true };
        assert_eq!(between.eval(&row, &[]).unwrap(), Value::Bool(false));
        let is_null = Expr::IsNull { expr: Box::new(column(0)), negated: false };
        assert_eq!(is_null.eval(&row, &[]).unwrap(), Value::Bool(true));
    }

    #[test]
    fn parameters_are_coerced_to_their_inferred_type() {
        let param = Expr::Param { index: 0, data_type: DataType::BigInt };
        assert_eq!(param.eval(&[], &[Value::text("42")]).unwrap(), Value::Int(42));
        assert_eq!(param.eval(&[], &[Value::text("x")]).unwrap_err().sqlstate, "22P02");
        assert_eq!(param.eval(&[], &[]).unwrap_err().sqlstate, "42P02");
    }

    #[test]
    fn casts_round_like_postgres() {
        assert_eq!(cast(Value::Double(2.5), DataType::Integer).unwrap(), Value::Int(2));
        assert_eq!(cast(Value::Double(3.5), DataType::Integer).unwrap(), Value::Int(4));
        assert_eq!(cast(Value::Double(1e20), DataType::Integer).unwrap_err().sqlstate, "22003");
        assert_eq!(cast(Value::text(" 12 "), DataType::BigInt).unwrap(), Value::Int(12));
        assert_eq!(cast(Value::Int(5), DataType::Text).unwrap(), Value::text("5"));
        assert!(compare(BinaryOp::Eq, &Value::Double(f64::NAN), &Value::Double(f64::NAN)) == Value::Bool(true));
        assert!(compare(BinaryOp::Gt, &Value::Double(f64::NAN), &Value::Double(f64::INFINITY)) == Value::Bool(true));
    }
}
