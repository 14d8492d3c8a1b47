//! Binding: names resolved against the catalog, types checked and inferred (parameters included), and SELECT
//! statements planned into [`Plan`]s.

use std::cell::RefCell;
use std::sync::Arc;

use numadb_execution::expr::{Expr, ScalarFunction, cast, parse_value};
use numadb_execution::plan::{
    Dedup, KeyRange, LookupPlan, Plan, ScanOutput, ScanPlan, SeriesPlan, SetOp, SortKey, range_lookup_rows_max,
};
use numadb_execution::{AggregateCall, AggregateFunction, BinaryOp, ExecError, WindowCall, WindowFunction, sqlstate};
use numadb_storage::{DataType, Table, TableSnapshot, Value};

mod decorrelate;
mod frame;
mod function;
mod join;
mod recursive;
mod window_names;
use join::JoinNames;
use sqlparser::ast::{
    self, BinaryOperator, Distinct, FunctionArg, FunctionArgExpr, FunctionArguments, GroupByExpr, LimitClause,
    ObjectName, ObjectNamePart, OrderByKind, Query, Select, SelectItem, SelectItemQualifiedWildcardKind, SetExpr,
    SetOperator, SetQuantifier, TableFactor, TrimWhereField, UnaryOperator,
};

/// A result column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputColumn {
    /// Its name.
    pub name: String,
    /// Its type.
    pub data_type: DataType,
}

/// A planned query.
#[derive(Clone)]
pub struct BoundQuery {
    /// The plan.
    pub plan: Plan,
    /// Result columns.
    pub columns: Vec<OutputColumn>,
    /// Tables the plan reads (to detect a table dropped and recreated under a prepared statement).
    pub tables: Vec<Arc<Table>>,
}

/// Resolves table names.
pub trait TableSource {
    /// The table a (case-folded) name refers to, or a materialised system view.
    fn resolve(&self, name: &ObjectName) -> Result<Arc<Table>, ExecError>;

    /// The view a (case-folded, one-part) name refers to, if it is one.
    fn view(&self, _name: &str) -> Option<Arc<crate::view::View>> {
        None
    }
}

/// Folds an identifier as PostgreSQL does: unquoted names are lower-cased.
pub fn fold(ident: &ast::Ident) -> String {
    if ident.quote_style.is_some() { ident.value.clone() } else { ident.value.to_lowercase() }
}

/// The last part of an object name, folded (`public.t` is `t`).
pub fn object_name(name: &ObjectName) -> Vec<String> {
    name.0
        .iter()
        .map(|part| match part {
            ObjectNamePart::Identifier(ident) => fold(ident),
            ObjectNamePart::Function(f) => f.name.value.clone(),
        })
        .collect()
}

/// Maps a SQL type to a storage type.
pub fn data_type(sql: &ast::DataType) -> Result<DataType, ExecError> {
    use ast::DataType as T;
    Ok(match sql {
        T::Int(_) | T::Int4(_) | T::Integer(_) | T::SmallInt(_) | T::Int2(_) | T::TinyInt(_) => DataType::Integer,
        T::BigInt(_) | T::Int8(_) => DataType::BigInt,
        T::Double(_) | T::DoublePrecision | T::Float8 | T::Float(_) | T::Real | T::Float4 => DataType::Double,
        T::Text | T::Varchar(_) | T::CharacterVarying(_) | T::String(_) | T::Char(_) | T::Character(_) => {
            DataType::Text
        }
        T::Bool | T::Boolean => DataType::Boolean,
        T::Custom(name, _) => match object_name(name).last().map(String::as_str) {
            Some("int4" | "int" | "integer" | "int2" | "smallint") => DataType::Integer,
            Some("int8" | "bigint") => DataType::BigInt,
            Some("float8" | "float4" | "double") => DataType::Double,
            Some("text" | "varchar" | "name" | "bpchar") => DataType::Text,
            Some("bool" | "boolean") => DataType::Boolean,
            Some(name) if !POSTGRES_TYPES.contains(&name) => {
                return Err(ExecError::new(sqlstate::UNDEFINED_OBJECT, format!("type \"{name}\" does not exist"))
                    .with_hint("numadb supports integer, bigint, double precision, text/varchar and boolean"));
            }
            _ => return Err(unsupported_type(sql)),
        },
        other => return Err(unsupported_type(other)),
    })
}

/// Whether a SQL type is PostgreSQL's 16-bit `smallint`, which numadb stores as an integer and range-checks.
pub fn is_smallint(sql: &ast::DataType) -> bool {
    use ast::DataType as T;
    match sql {
        T::SmallInt(_) | T::Int2(_) => true,
        T::Custom(name, _) => matches!(object_name(name).last().map(String::as_str), Some("int2" | "smallint")),
        _ => false,
    }
}

/// The length limit of a text type: `n` of `varchar(n)` or `char(n)` (`char` alone is `char(1)`), `None` for
/// any other type or none given. `char(n)` is stored as `varchar(n)` is, without its padding.
pub fn text_length(sql: &ast::DataType) -> Result<Option<u32>, ExecError> {
    use ast::DataType as T;
    let length = match sql {
        T::Varchar(length) | T::CharacterVarying(length) => length.as_ref(),
        T::Char(length) | T::Character(length) => {
            Some(length.as_ref().unwrap_or(&ast::CharacterLength::IntegerLength { length: 1, unit: None }))
        }
        _ => None,
    };
    match length {
        Some(ast::CharacterLength::IntegerLength { length: 0, .. }) => Err(ExecError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!(
                "length for type {} must be at least 1",
                if matches!(sql, T::Varchar(_) | T::CharacterVarying(_)) { "varchar" } else { "char" }
            ),
        )),
        Some(ast::CharacterLength::IntegerLength { length, .. }) if *length > MAX_TEXT_LENGTH => Err(ExecError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("length for type varchar cannot exceed {MAX_TEXT_LENGTH}"),
        )),
        Some(ast::CharacterLength::IntegerLength { length, .. }) => Ok(Some(*length as u32)),
        Some(ast::CharacterLength::Max) | None => Ok(None),
    }
}

/// PostgreSQL's types that the SQL parser knows only by name: numadb does not support them (0A000), where a
/// name that is no type at all does not exist (42704), as in PostgreSQL.
const POSTGRES_TYPES: [&str; 36] = [
    "serial",
    "serial4",
    "bigserial",
    "serial8",
    "smallserial",
    "serial2",
    "money",
    "inet",
    "cidr",
    "macaddr",
    "macaddr8",
    "oid",
    "xml",
    "tsvector",
    "tsquery",
    "point",
    "line",
    "lseg",
    "box",
    "path",
    "polygon",
    "circle",
    "jsonpath",
    "bit",
    "varbit",
    "int4range",
    "int8range",
    "numrange",
    "tsrange",
    "tstzrange",
    "daterange",
    "pg_lsn",
    "regclass",
    "timetz",
    "timestamptz",
    "citext",
];

/// PostgreSQL's largest `varchar(n)`.
const MAX_TEXT_LENGTH: u64 = 10_485_760;

fn unsupported_type(sql: &ast::DataType) -> ExecError {
    ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, format!("type {sql} is not supported"))
        .with_hint("numadb supports integer, bigint, double precision, text/varchar and boolean")
}

fn unsupported(what: &str) -> ExecError {
    ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, format!("{what} is not supported"))
}

/// Offset of aggregate placeholders among column indexes while a SELECT with aggregates is bound.
const AGGREGATE_BASE: usize = 1 << 30;
/// PostgreSQL's functions that exist only as window functions.
const WINDOW_ONLY_FUNCTIONS: [&str; 11] = [
    "row_number",
    "rank",
    "dense_rank",
    "lag",
    "lead",
    "ntile",
    "percent_rank",
    "cume_dist",
    "first_value",
    "last_value",
    "nth_value",
];
/// Offset of window function placeholders (below the aggregates': a window's value is not an aggregate's).
const WINDOW_BASE: usize = 1 << 29;
/// Offset of `GROUPING(…)` placeholders (below the windows'): each becomes a value of the grouping set.
const GROUPING_BASE: usize = 1 << 28;
/// PostgreSQL's limits: grouping sets per query, elements of a CUBE, arguments of GROUPING.
const GROUPING_SETS_MAX: usize = 4096;
const CUBE_ELEMENTS_MAX: usize = 12;
const GROUPING_ARGUMENTS_MAX: usize = 31;

/// What names resolve to while an expression is bound.
struct Scope<'a> {
    /// The names of a FROM clause with joins (then the other fields are empty).
    joined: Option<&'a JoinNames>,
    table: Option<&'a Table>,
    /// The table's column names after a column alias list in FROM (`t AS x(a, b)`), when there is one.
    renamed: Option<Vec<String>>,
    /// A subquery's result columns, when FROM is a subquery rather than a table.
    derived: Option<&'a [OutputColumn]>,
    /// Names the table can be referred to by (its name, or its alias).
    qualifier: Option<String>,
}

impl Scope<'_> {
    fn column(&self, qualifier: Option<&str>, name: &str) -> Result<Expr, ExecError> {
        if let Some(joined) = self.joined {
            return joined.column(qualifier, name);
        }
        if let Some(q) = qualifier
            && self.qualifier.as_deref() != Some(q)
        {
            return Err(ExecError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("missing FROM-clause entry for table \"{q}\""),
            ));
        }
        if let Some(columns) = self.derived {
            let mut matches = columns.iter().enumerate().filter(|(_, c)| c.name == name);
            return match (matches.next(), matches.next()) {
                (Some((index, column)), None) => Ok(Expr::Column { index, data_type: column.data_type }),
                (Some(_), Some(_)) => {
                    Err(ExecError::new(sqlstate::AMBIGUOUS_COLUMN, format!("column reference \"{name}\" is ambiguous")))
                }
                (None, _) => {
                    Err(ExecError::new(sqlstate::UNDEFINED_COLUMN, format!("column \"{name}\" does not exist")))
                }
            };
        }
        let table = self
            .table
            .ok_or_else(|| ExecError::new(sqlstate::UNDEFINED_COLUMN, format!("column \"{name}\" does not exist")))?;
        if let Some(names) = &self.renamed {
            let mut matches = names.iter().enumerate().filter(|(_, n)| *n == name);
            return match (matches.next(), matches.next()) {
                (Some((index, _)), None) => Ok(Expr::Column { index, data_type: table.columns()[index].data_type }),
                (Some(_), Some(_)) => {
                    Err(ExecError::new(sqlstate::AMBIGUOUS_COLUMN, format!("column reference \"{name}\" is ambiguous")))
                }
                (None, _) => {
                    Err(ExecError::new(sqlstate::UNDEFINED_COLUMN, format!("column \"{name}\" does not exist")))
                }
            };
        }
        let index = table.column_index(name).ok_or_else(|| {
            let mut error = ExecError::new(sqlstate::UNDEFINED_COLUMN, format!("column \"{name}\" does not exist"));
            if let Some(similar) = table.columns().iter().find(|c| c.name.eq_ignore_ascii_case(name)) {
                error = error.with_hint(format!(
                    "Perhaps you meant to reference the column \"{}\" (quoted names are case-sensitive).",
                    similar.name
                ));
            }
            error
        })?;
        Ok(Expr::Column { index, data_type: table.columns()[index].data_type })
    }
}

/// The names one SELECT's FROM gives: per relation, its qualifier and its columns' names.
type ScopeNames = Vec<(Option<String>, Vec<String>)>;

/// Binds expressions and plans queries for one statement.
pub struct Binder<'a> {
    source: &'a dyn TableSource,
    /// Parameter types: declared by the client, or inferred from where the parameter is used.
    params: RefCell<Vec<Option<DataType>>>,
    /// Aggregates found while binding the current SELECT (when aggregates are allowed).
    aggregates: RefCell<Option<Vec<AggregateCall>>>,
    /// Window function calls found while binding the current SELECT's list and ORDER BY (where they are allowed).
    windows: RefCell<Option<Vec<WindowCall>>>,
    /// `GROUPING(…)` calls found while binding the current SELECT's list, HAVING and ORDER BY: their arguments.
    groupings: RefCell<Option<Vec<Vec<Expr>>>>,
    /// Binding a plain aggregate's argument (a window function there is 42803, as in PostgreSQL).
    in_aggregate_argument: std::cell::Cell<bool>,
    /// Whether `$n` may appear (prepared statements), or is an error (a plain statement has no parameters).
    params_allowed: bool,
    /// The statement's subqueries in expressions, in the order they must run (an inner one before its outer).
    subqueries: RefCell<Vec<Plan>>,
    /// Their text, in the same order: a subquery written twice (in a GROUP BY item and in the select list) is
    /// planned once, so both places bind to the same expression.
    subquery_texts: RefCell<Vec<String>>,
    /// The tables they read.
    subquery_tables: RefCell<Vec<Arc<Table>>>,
    /// The SELECTs being bound, outermost first: qualifier and column names (to recognise a correlated name).
    scopes: RefCell<Vec<ScopeNames>>,
    /// The `WITH` queries in scope, outermost first (a nested one of the same name hides an outer one): each is
    /// planned once where it is defined, and every reference in FROM runs a copy of that plan.
    ctes: RefCell<Vec<Cte>>,
    /// How many `WITH` queries the statement has defined so far (each gets the next number as its id).
    ctes_defined: std::cell::Cell<usize>,
    /// Views being planned, one inside another.
    view_depth: std::cell::Cell<usize>,
    /// A constant part whose folding raises a data exception (SQLSTATE class 22: `1 / 0`) is left as it is
    /// ([`Binder::fold`]): PREPARE binds so, since PostgreSQL folds when it plans, at EXECUTE.
    defer_constant_errors: bool,
}

/// How deep views may nest (one reading another).
const VIEW_DEPTH_MAX: usize = 32;

/// The most keys of an IN list an index lookup takes (`c IN (k1, …)`); a longer list is left to a scan's filter.
const LOOKUP_LIST_KEYS: usize = 1024;

/// The two sides of a set operation, with the result's columns (their types are the sides' now).
struct SetSides {
    columns: Vec<OutputColumn>,
    left: Plan,
    right: Plan,
    tables: Vec<Arc<Table>>,
}

/// A `WITH` query in scope.
struct Cte {
    name: String,
    /// Unique in the statement: subqueries are told apart by their text and the `WITH` queries they can see.
    id: usize,
    query: BoundQuery,
}

impl<'a> Binder<'a> {
    /// A binder for a statement with parameters, with the types the client declared (`None`: to be inferred).
    pub fn new(source: &'a dyn TableSource, declared: &[Option<DataType>]) -> Self {
        Binder {
            source,
            params: RefCell::new(declared.to_vec()),
            aggregates: RefCell::new(None),
            windows: RefCell::new(None),
            groupings: RefCell::new(None),
            in_aggregate_argument: std::cell::Cell::new(false),
            params_allowed: true,
            subqueries: RefCell::new(Vec::new()),
            subquery_texts: RefCell::new(Vec::new()),
            subquery_tables: RefCell::new(Vec::new()),
            scopes: RefCell::new(Vec::new()),
            ctes: RefCell::new(Vec::new()),
            ctes_defined: std::cell::Cell::new(0),
            view_depth: std::cell::Cell::new(0),
            defer_constant_errors: false,
        }
    }

    /// A binder for a statement without parameters: `$n` is an error.
    pub fn without_params(source: &'a dyn TableSource) -> Self {
        Binder { params_allowed: false, ..Binder::new(source, &[]) }
    }

    /// Parameter types after binding (undetermined ones are text, as PostgreSQL's `unknown` ends up).
    pub fn param_types(&self) -> Vec<DataType> {
        self.params.borrow().iter().map(|t| t.unwrap_or(DataType::Text)).collect()
    }

    fn param_type(&self, index: usize) -> Option<DataType> {
        self.params.borrow().get(index).copied().flatten()
    }

    fn set_param_type(&self, index: usize, data_type: DataType) {
        let mut params = self.params.borrow_mut();
        if params.len() <= index {
            params.resize(index + 1, None);
        }
        if params[index].is_none() {
            params[index] = Some(data_type);
        }
    }

    /// Binds a constant expression (no columns in scope), e.g. an `INSERT` value, expecting `target`.
    pub fn bind_constant(&self, expr: &ast::Expr, target: Option<DataType>) -> Result<Expr, ExecError> {
        let scope = Scope { joined: None, table: None, renamed: None, derived: None, qualifier: None };
        let bound = self.bind_expr(expr, &scope)?;
        Ok(match target {
            Some(target) => self.coerce_to(bound, target)?,
            None => bound,
        })
    }

    /// Binds a condition or value over a table's rows (UPDATE's and DELETE's WHERE, UPDATE's SET): column `i` of
    /// the expression is the table's column `i`. `context` names the clause in errors (aggregates are not allowed).
    pub fn bind_over_table(
        &self,
        table: &Table,
        qualifier: &str,
        expr: &ast::Expr,
        context: &str,
    ) -> Result<Expr, ExecError> {
        let scope = Scope {
            joined: None,
            table: Some(table),
            renamed: None,
            derived: None,
            qualifier: Some(qualifier.to_string()),
        };
        let names = table.columns().iter().map(|c| c.name.clone()).collect();
        self.scopes.borrow_mut().push(vec![(scope.qualifier.clone(), names)]);
        let bound = self.without_aggregates(|| self.bind_expr(expr, &scope));
        self.scopes.borrow_mut().pop();
        let bound = bound?;
        if uses_aggregates(&bound) {
            return Err(ExecError::new(
                sqlstate::GROUPING_ERROR,
                format!("aggregate functions are not allowed in {context}"),
            ));
        }
        // Folded as a query's expressions are: `SET b = 1 / 0 … WHERE false` raises, as in PostgreSQL.
        if context == "WHERE" { self.condition(bound, "WHERE") } else { self.fold(&bound) }
    }

    /// The indexed column and keys a condition over `table`'s rows pins (`k = 5 AND …`, `k IN (1, 2)`), else the
    /// range it bounds a column with a sorted index to (`k BETWEEN $1 AND $2`), if any: an UPDATE or DELETE then
    /// looks only at the rows the index finds (for a range, where it finds few enough as the statement runs).
    pub fn index_rows(&self, table: &Arc<Table>, filter: &Expr) -> Option<(usize, IndexedBy)> {
        match self.scan_or_lookup(table, Some(filter.clone()), ScanOutput::Rows(Vec::new())) {
            Plan::Lookup(LookupPlan { column, keys, range: None, .. }) => Some((column, IndexedBy::Keys(keys))),
            _ => {
                let mut conjuncts = Vec::new();
                flatten_and(filter.clone(), &mut conjuncts);
                let (column, range, _) = sorted_index_range(&conjuncts, &table.snapshot(), None)?;
                Some((column, IndexedBy::Range(range)))
            }
        }
    }

    /// The statement's subqueries in expressions, in the order they must run (an inner one before its outer),
    /// handed over by a statement that runs them itself (UPDATE, DELETE).
    pub fn take_subqueries(&self) -> Vec<Plan> {
        self.subquery_texts.borrow_mut().clear();
        self.subquery_tables.borrow_mut().clear();
        std::mem::take(&mut *self.subqueries.borrow_mut())
    }

    /// [`Binder::assign_to`] of `expr` bound from `sql`: a number written with a fraction is PostgreSQL's numeric,
    /// which an integer column takes rounded half away from zero (`2.5` is 3), where a double rounds to even.
    pub fn assign_written(
        &self,
        sql: &ast::Expr,
        expr: Expr,
        column: &str,
        target: DataType,
    ) -> Result<Expr, ExecError> {
        match expr {
            Expr::Literal { value: Value::Double(v), .. } if target.is_integer() && signed_number(sql) => {
                Ok(Expr::literal(cast(Value::Double(v.round()), target)?, target))
            }
            expr => self.assign_to(expr, column, target),
        }
    }

    /// A value stored into a column of type `target` (INSERT's VALUES, UPDATE's SET): PostgreSQL's assignment rules, which are
    /// [`Binder::coerce_to`]'s plus any typed value into a text column (as its text).
    pub fn assign_to(&self, expr: Expr, column: &str, target: DataType) -> Result<Expr, ExecError> {
        let source = expr.data_type();
        let untyped = matches!(expr, Expr::Literal { value: Value::Null | Value::Text(_), .. } | Expr::Param { .. });
        if target == DataType::Text && source != DataType::Text && !untyped {
            return Ok(Expr::Cast { expr: Box::new(expr), to: DataType::Text });
        }
        self.coerce_to(expr, target).map_err(|error| {
            if error.sqlstate != sqlstate::DATATYPE_MISMATCH {
                return error;
            }
            ExecError::new(
                sqlstate::DATATYPE_MISMATCH,
                format!("column \"{column}\" is of type {target} but expression is of type {source}"),
            )
            .with_hint("You will need to rewrite or cast the expression.")
        })
    }

    /// Gives an untyped parameter or literal the type `target`, or casts a typed value to it where PostgreSQL
    /// would assign it implicitly (integer to bigint or double, and so on).
    pub fn coerce_to(&self, expr: Expr, target: DataType) -> Result<Expr, ExecError> {
        if expr.data_type() == target {
            return Ok(expr);
        }
        match &expr {
            Expr::Param { index, .. }
                if self.param_type(*index).is_none() || self.param_type(*index) == Some(target) =>
            {
                self.set_param_type(*index, target);
                Ok(Expr::Param { index: *index, data_type: target })
            }
            Expr::Literal { value: Value::Null, .. } => Ok(Expr::literal(Value::Null, target)),
            Expr::Literal { value: Value::Text(text), .. } => {
                let value = parse_value(text, target)?;
                Ok(Expr::literal(value, target))
            }
            Expr::Literal { value, .. } if target.is_numeric() && expr.data_type().is_numeric() => {
                let value = cast(value.clone(), target)?;
                Ok(Expr::literal(value, target))
            }
            _ if target.is_numeric() && expr.data_type().is_numeric() => {
                let widening = matches!(
                    (expr.data_type(), target),
                    (DataType::Integer, DataType::BigInt | DataType::Double | DataType::Numeric)
                        | (DataType::BigInt, DataType::Double | DataType::Numeric)
                        | (DataType::Numeric, DataType::Double)
                );
                if widening || target.is_integer() {
                    Ok(Expr::Cast { expr: Box::new(expr), to: target })
                } else {
                    Err(mismatch(&expr, target))
                }
            }
            _ => Err(mismatch(&expr, target)),
        }
    }

    fn bind_expr(&self, expr: &ast::Expr, scope: &Scope<'_>) -> Result<Expr, ExecError> {
        use ast::Expr as E;
        if let Some(rewritten) = not_exists_under_is(expr).or_else(|| sign_under_caret(expr)) {
            return self.bind_expr(&rewritten, scope);
        }
        match expr {
            E::Identifier(ident) => {
                scope.column(None, &fold(ident)).map_err(|e| self.unless_correlated(e, None, &fold(ident)))
            }
            E::CompoundIdentifier(parts) => match parts.as_slice() {
                [table, column] | [_, table, column] => {
                    let (table, column) = (fold(table), fold(column));
                    scope.column(Some(&table), &column).map_err(|e| self.unless_correlated(e, Some(&table), &column))
                }
                _ => Err(unsupported(&format!("the name {expr}"))),
            },
            E::Value(value) => self.bind_value(&value.value),
            E::Nested(inner) => self.bind_expr(inner, scope),
            // Row comparisons `(a, b) = (x, y)`: equal when every pair is (AND), different when any pair is (OR).
            E::BinaryOp { left, op: op @ (BinaryOperator::Eq | BinaryOperator::NotEq), right }
                if matches!((left.as_ref(), right.as_ref()), (E::Tuple(_), E::Tuple(_))) =>
            {
                let (E::Tuple(lefts), E::Tuple(rights)) = (left.as_ref(), right.as_ref()) else { unreachable!() };
                if lefts.len() != rights.len() {
                    return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "unequal number of entries in row expressions"));
                }
                let combine = if *op == BinaryOperator::Eq { BinaryOp::And } else { BinaryOp::Or };
                let mut pairs = Vec::with_capacity(lefts.len());
                for (l, r) in lefts.iter().zip(rights) {
                    let (l, r) = (self.bind_expr(l, scope)?, self.bind_expr(r, scope)?);
                    pairs.push(self.bind_binary(op, l, r)?);
                }
                Ok(fold_boolean(pairs, combine))
            }
            // `x op ANY (ARRAY[…])` is an OR of the comparisons (`= ANY` is IN), `x op ALL (ARRAY[…])` an AND; over a
            // subquery, the comparisons are made once its values are known.
            E::AnyOp { left, compare_op, right, .. } | E::AllOp { left, compare_op, right } => {
                let (any, name) = if matches!(expr, E::AnyOp { .. }) { (true, "ANY") } else { (false, "ALL") };
                let mut list = right.as_ref();
                while let E::Nested(inner) = list {
                    list = inner;
                }
                if !is_comparison(compare_op) {
                    return Err(unsupported(&format!("the operator {compare_op} with {name}")));
                }
                if let E::Subquery(subquery) = list {
                    let left = self.bind_expr(left, scope)?;
                    let (index, data_type) = self.plan_subquery(subquery, true)?;
                    let values = Expr::Subquery { index, exists: false, data_type };
                    let (left, _) = self.unify_comparison(left, values)?;
                    let op = binary_op(compare_op)?;
                    let expr = Box::new(left);
                    return Ok(Expr::QuantifiedSubquery { expr, op, all: !any, index, values_type: data_type });
                }
                let E::Array(array) = list else {
                    return Err(unsupported(&format!("{name} over anything but an ARRAY[…] list or a subquery")));
                };
                if array.elem.is_empty() {
                    return Err(ExecError::new(
                        sqlstate::INDETERMINATE_DATATYPE,
                        "cannot determine type of empty array",
                    )
                    .with_hint("Explicitly cast to the desired type, for example ARRAY[]::integer[]."));
                }
                let left = self.bind_expr(left, scope)?;
                let mut comparisons = Vec::with_capacity(array.elem.len());
                for element in &array.elem {
                    let element = self.bind_expr(element, scope)?;
                    comparisons.push(self.bind_binary(compare_op, left.clone(), element)?);
                }
                Ok(fold_boolean(comparisons, if any { BinaryOp::Or } else { BinaryOp::And }))
            }
            // `s ~ p` is `regexp_like(s, p)`, `~*` with the flag `i`; `!~` and `!~*` their negations.
            E::BinaryOp {
                left,
                op:
                    op @ (BinaryOperator::PGRegexMatch
                    | BinaryOperator::PGRegexIMatch
                    | BinaryOperator::PGRegexNotMatch
                    | BinaryOperator::PGRegexNotIMatch),
                right,
            } => {
                let mut args = vec![self.bind_expr(left, scope)?, self.bind_expr(right, scope)?];
                if matches!(op, BinaryOperator::PGRegexIMatch | BinaryOperator::PGRegexNotIMatch) {
                    args.push(Expr::literal(Value::text("i"), DataType::Text));
                }
                let matches = self.call_function(ScalarFunction::RegexpLike, args)?;
                let negated = matches!(op, BinaryOperator::PGRegexNotMatch | BinaryOperator::PGRegexNotIMatch);
                Ok(if negated { Expr::Not(Box::new(matches)) } else { matches })
            }
            // numadb orders and compares text byte by byte, which is the C collation (and, for UTF-8, ucs_basic's
            // code-point order): naming it changes nothing; any other collation is refused.
            E::Collate { expr: inner, collation } => {
                let name = object_name(collation).last().cloned().unwrap_or_default();
                if !matches!(name.as_str(), "C" | "POSIX" | "ucs_basic" | "default") {
                    return Err(ExecError::new(
                        sqlstate::FEATURE_NOT_SUPPORTED,
                        format!("collation \"{name}\" is not supported"),
                    )
                    .with_hint("numadb compares text byte by byte, as the collation \"C\" does"));
                }
                let inner = self.bind_expr(inner, scope)?;
                if inner.data_type() != DataType::Text {
                    return Err(ExecError::new(
                        sqlstate::DATATYPE_MISMATCH,
                        format!("collations are not supported by type {}", inner.data_type()),
                    ));
                }
                Ok(inner)
            }
            // `~~`, `~~*`, `!~~`, `!~~*`: PostgreSQL's spellings of [NOT] LIKE and ILIKE.
            E::BinaryOp {
                left,
                op:
                    op @ (BinaryOperator::PGLikeMatch
                    | BinaryOperator::PGILikeMatch
                    | BinaryOperator::PGNotLikeMatch
                    | BinaryOperator::PGNotILikeMatch),
                right,
            } => {
                let case_insensitive = matches!(op, BinaryOperator::PGILikeMatch | BinaryOperator::PGNotILikeMatch);
                let operator = op.to_string();
                Ok(Expr::Like {
                    expr: Box::new(self.text_operand(left, scope, &operator)?),
                    pattern: Box::new(self.text_operand(right, scope, &operator)?),
                    negated: matches!(op, BinaryOperator::PGNotLikeMatch | BinaryOperator::PGNotILikeMatch),
                    case_insensitive,
                    escape: Some('\\'),
                })
            }
            E::SimilarTo { .. } => self.special_function(expr, scope)?.ok_or_else(|| unsupported("SIMILAR TO")),
            // `x ^ y` is `power(x, y)`.
            E::BinaryOp { left, op: BinaryOperator::PGExp, right } => {
                let args = vec![self.bind_expr(left, scope)?, self.bind_expr(right, scope)?];
                self.call_function(ScalarFunction::Power, args)
            }
            // PostgreSQL's bitwise operators on integers are functions here.
            E::BinaryOp {
                left,
                op:
                    op @ (BinaryOperator::BitwiseAnd
                    | BinaryOperator::BitwiseOr
                    | BinaryOperator::PGBitwiseXor
                    | BinaryOperator::PGBitwiseShiftLeft
                    | BinaryOperator::PGBitwiseShiftRight),
                right,
            } => {
                let function = match op {
                    BinaryOperator::BitwiseAnd => ScalarFunction::BitAnd,
                    BinaryOperator::BitwiseOr => ScalarFunction::BitOr,
                    BinaryOperator::PGBitwiseXor => ScalarFunction::BitXor,
                    BinaryOperator::PGBitwiseShiftLeft => ScalarFunction::ShiftLeft,
                    _ => ScalarFunction::ShiftRight,
                };
                let args = vec![self.bind_expr(left, scope)?, self.bind_expr(right, scope)?];
                self.call_function(function, args)
            }
            E::UnaryOp { op: UnaryOperator::BitwiseNot, expr: operand } => {
                let args = vec![self.bind_expr(operand, scope)?];
                self.call_function(ScalarFunction::BitNot, args)
            }
            E::BinaryOp { left: left_ast, op, right: right_ast } => {
                let left = self.bind_expr(left_ast, scope)?;
                let right = self.bind_expr(right_ast, scope)?;
                // An integer compared with a number literal that is no integer compares exactly.
                let literal = |expr: &Expr, ast: &ast::Expr| match expr {
                    Expr::Literal { value: Value::Double(c), .. } if signed_number(ast) => {
                        Some(exact_number(ast).unwrap_or_else(|| number_of_double(*c)))
                    }
                    _ => None,
                };
                let comparison = binary_op(op).ok();
                let exact = match (literal(&left, left_ast), literal(&right, right_ast), comparison) {
                    (None, Some(c), Some(op)) if left.data_type().is_integer() => {
                        integer_against_number(op, c).map(|bound| (true, bound))
                    }
                    (Some(c), None, Some(op)) if right.data_type().is_integer() => {
                        integer_against_number(op.flipped(), c).map(|bound| (false, bound))
                    }
                    _ => None,
                };
                match exact {
                    Some((integer_left, (op, bound))) => {
                        let integer = if integer_left { left } else { right };
                        let bound = Expr::literal(Value::Int(bound), DataType::BigInt);
                        self.bind_binary(&ast_comparison(op), integer, bound)
                    }
                    None => self.bind_binary(op, left, right),
                }
            }
            E::UnaryOp { op: UnaryOperator::Minus, expr: inner } if matches!(inner.as_ref(), E::Value(v) if matches!(v.value, ast::Value::Number(..))) =>
            {
                // A negative number is one literal, typed as PostgreSQL types it: an integer if it fits one
                // (`-2147483648` does), else a bigint if it fits one (`-9223372036854775808`), else a double
                // (PostgreSQL's numeric).
                let E::Value(v) = inner.as_ref() else { unreachable!("matched above") };
                let ast::Value::Number(digits, _) = &v.value else { unreachable!("matched above") };
                match format!("-{digits}").parse::<i64>() {
                    Ok(v) if i32::try_from(v).is_ok() => Ok(Expr::literal(Value::Int(v), DataType::Integer)),
                    Ok(v) => Ok(Expr::literal(Value::Int(v), DataType::BigInt)),
                    Err(_) => match self.bind_value(&v.value)? {
                        // PostgreSQL's literal is a numeric, which has no negative zero: `-0.0` is 0.
                        Expr::Literal { value: Value::Double(d), .. } => {
                            Ok(Expr::literal(Value::Double(-d + 0.0), DataType::Double))
                        }
                        other => Err(ExecError::internal(format!("a number bound to {other:?}"))),
                    },
                }
            }
            E::UnaryOp { op, expr: operand } => {
                let inner = self.bind_expr(operand, scope)?;
                match op {
                    UnaryOperator::Not => match self.expect_boolean(inner, "NOT")? {
                        Expr::Literal { value: Value::Bool(b), .. } => {
                            Ok(Expr::literal(Value::Bool(!b), DataType::Boolean))
                        }
                        inner => Ok(Expr::Not(Box::new(inner))),
                    },
                    UnaryOperator::Minus => {
                        // The negation of a signed number is a constant, typed like a literal of its value
                        // (PostgreSQL folds `-(-2147483648)` into the bigint 2147483648). Not that of any constant:
                        // `-(-2147483648)::int` negates an integer, which overflows.
                        if signed_number(operand)
                            && let Expr::Literal { value: Value::Int(v), data_type } = &inner
                            && let Some(negated) = v.checked_neg()
                        {
                            // A bigint stays one (`-1::bigint` is `-(1::bigint)`).
                            let data_type = if *data_type == DataType::Integer && i32::try_from(negated).is_ok() {
                                DataType::Integer
                            } else {
                                DataType::BigInt
                            };
                            return Ok(Expr::literal(Value::Int(negated), data_type));
                        }
                        let inner = self.numeric_operand(inner, "-")?;
                        let data_type = inner.data_type();
                        Ok(Expr::Negate { expr: Box::new(inner), data_type })
                    }
                    UnaryOperator::Plus => self.numeric_operand(inner, "+"),
                    // PostgreSQL's prefix operators for square root, cube root and absolute value.
                    UnaryOperator::PGSquareRoot => self.call_function(ScalarFunction::Sqrt, vec![inner]),
                    UnaryOperator::PGCubeRoot => self.call_function(ScalarFunction::Cbrt, vec![inner]),
                    UnaryOperator::PGAbs => self.call_function(ScalarFunction::Abs, vec![inner]),
                    other => Err(unsupported(&format!("the operator {other}"))),
                }
            }
            E::IsNull(inner) | E::IsNotNull(inner) => Ok(Expr::IsNull {
                expr: Box::new(self.bind_expr(inner, scope)?),
                negated: matches!(expr, E::IsNotNull(_)),
            }),
            E::IsUnknown(inner) | E::IsNotUnknown(inner) => {
                let inner = self.bind_expr(inner, scope)?;
                let inner = self.expect_boolean(inner, "IS UNKNOWN")?;
                Ok(Expr::IsNull { expr: Box::new(inner), negated: matches!(expr, E::IsNotUnknown(_)) })
            }
            // Never NULL, so built from IS NULL and the value itself: `x IS TRUE` is `x IS NOT NULL AND x`,
            // `x IS NOT TRUE` is `x IS NULL OR NOT x`, and the same with `NOT x` for FALSE.
            E::IsTrue(inner) | E::IsNotTrue(inner) | E::IsFalse(inner) | E::IsNotFalse(inner) => {
                let inner = self.bind_expr(inner, scope)?;
                let inner = self.expect_boolean(inner, "IS TRUE")?;
                let negated = matches!(expr, E::IsNotTrue(_) | E::IsNotFalse(_));
                let value = if matches!(expr, E::IsTrue(_) | E::IsNotTrue(_)) == negated {
                    Expr::Not(Box::new(inner.clone()))
                } else {
                    inner.clone()
                };
                let is_null = Expr::IsNull { expr: Box::new(inner), negated: !negated };
                let op = if negated { BinaryOp::Or } else { BinaryOp::And };
                Ok(Expr::Binary { op, left: Box::new(is_null), right: Box::new(value), data_type: DataType::Boolean })
            }
            E::Between { expr: inner, negated, low, high } => {
                let inner = self.bind_expr(inner, scope)?;
                let low = self.bind_expr(low, scope)?;
                let high = self.bind_expr(high, scope)?;
                let (inner, low) = self.unify_comparison(inner, low)?;
                let (inner, high) = self.unify_comparison(inner, high)?;
                Ok(Expr::Between { expr: Box::new(inner), low: Box::new(low), high: Box::new(high), negated: *negated })
            }
            E::InList { expr: inner, list, negated } => {
                let mut inner = self.bind_expr(inner, scope)?;
                let mut items = list.iter().map(|item| self.bind_expr(item, scope)).collect::<Result<Vec<_>, _>>()?;
                // Over an integer, a number literal that is no integer is PostgreSQL's numeric, compared exactly:
                // a whole one is that integer, and one with a fraction or beyond BIGINT equals no integer, so it
                // goes (`b IN (9007199254740993, 2.5)` is `b = 9007199254740993`, not a comparison of doubles).
                if inner.data_type().is_integer() {
                    let mut kept = Vec::with_capacity(items.len());
                    for (item, item_ast) in items.into_iter().zip(list) {
                        match item {
                            Expr::Literal { value: Value::Double(c), .. } if signed_number(item_ast) => {
                                let c = exact_number(item_ast).unwrap_or_else(|| number_of_double(c));
                                if let Some((BinaryOp::Eq, k)) = integer_against_number(BinaryOp::Eq, c) {
                                    kept.push(Expr::literal(Value::Int(k), DataType::BigInt));
                                }
                            }
                            other => kept.push(other),
                        }
                    }
                    if kept.is_empty() {
                        // `b IN (2.5)`: FALSE, or NULL for a NULL `b`; NOT IN: TRUE, or NULL.
                        let op = if *negated { BinaryOp::LtEq } else { BinaryOp::Gt };
                        let bound = Expr::literal(Value::Int(i64::MAX), DataType::BigInt);
                        return self.bind_binary(&ast_comparison(op), inner, bound);
                    }
                    items = kept;
                }
                // As in PostgreSQL, the operand and the list take one type: with a double among them, integers
                // compare as doubles (`9007199254740992 IN (9007199254740993, 1.5::float8)` is true).
                let typed = |e: &&Expr| !self.is_untyped(e);
                let doubles =
                    std::iter::once(&inner).chain(&items).filter(typed).any(|e| e.data_type() == DataType::Double);
                let mut bound = Vec::with_capacity(list.len());
                for item in items {
                    let item = if doubles && item.data_type().is_integer() && !self.is_untyped(&item) {
                        self.coerce_to(item, DataType::Double)?
                    } else {
                        item
                    };
                    let (unified, item) = self.unify_comparison(inner, item)?;
                    inner = unified;
                    bound.push(item);
                }
                Ok(Expr::InList { expr: Box::new(inner), list: bound, negated: *negated })
            }
            E::Cast { expr: operand, data_type: sql_target, .. } => {
                let target = data_type(sql_target)?;
                let inner = self.bind_expr(operand, scope)?;
                // At PREPARE, a number's cast that fails is left for EXECUTE, as PostgreSQL casts it when it plans
                // (a quoted literal's text is read now, there as here: `'x'::int` fails at PREPARE).
                let deferred = match &inner {
                    Expr::Literal { value, .. } if self.defer_constant_errors && !matches!(value, Value::Text(_)) => {
                        Some(inner.clone())
                    }
                    _ => None,
                };
                let cast: Result<Expr, ExecError> = match inner {
                    // A number with a fraction is PostgreSQL's numeric, which rounds halves away from zero to an
                    // integer (`2.5::int` is 3), where a double rounds them to even.
                    Expr::Literal { value: Value::Double(v), .. } if target.is_integer() && signed_number(operand) => {
                        cast(Value::Double(v.round()), target).map(|value| Expr::literal(value, target))
                    }
                    Expr::Param { index, .. } if self.param_type(index).is_none() => {
                        self.set_param_type(index, target);
                        Ok(Expr::Param { index, data_type: target })
                    }
                    // A cast NULL or text stays a cast: folded, it would look like an untyped literal, which
                    // takes the type of what it meets (`NULL::float8` must stay a double).
                    Expr::Literal { value, .. } if !value.is_null() && target != DataType::Text => {
                        cast(value, target).map(|value| Expr::literal(value, target))
                    }
                    // A cast to the type a computed value already has is no node at all, as in PostgreSQL's
                    // parse tree: `SELECT a, a::integer … ORDER BY a` names one expression, not two.
                    other
                        if !matches!(other, Expr::Literal { .. } | Expr::Param { .. })
                            && other.data_type() == target =>
                    {
                        Ok(other)
                    }
                    other => Ok(Expr::Cast { expr: Box::new(other), to: target }),
                };
                let cast = match (cast, deferred) {
                    (Err(error), Some(literal)) if error.sqlstate.starts_with("22") => {
                        return Ok(Expr::Cast { expr: Box::new(literal), to: target });
                    }
                    (cast, _) => cast,
                };
                // A smallint is an integer that must fit in 16 bits.
                if is_smallint(sql_target) {
                    return match cast? {
                        Expr::Literal { value: Value::Int(v), data_type }
                            if i16::try_from(v).is_err() && self.defer_constant_errors =>
                        {
                            Ok(Expr::Function {
                                function: ScalarFunction::Int2,
                                args: vec![Expr::literal(Value::Int(v), data_type)],
                                data_type: DataType::Integer,
                            })
                        }
                        Expr::Literal { value: Value::Int(v), .. } if i16::try_from(v).is_err() => {
                            Err(ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "smallint out of range"))
                        }
                        literal @ Expr::Literal { .. } => Ok(literal),
                        other => Ok(Expr::Function {
                            function: ScalarFunction::Int2,
                            args: vec![other],
                            data_type: DataType::Integer,
                        }),
                    };
                }
                // An explicit cast to `varchar(n)` keeps the first n characters, as in PostgreSQL.
                match text_length(sql_target)? {
                    Some(max_chars) => Ok(Expr::Function {
                        function: ScalarFunction::Left,
                        args: vec![cast?, Expr::literal(Value::Int(i64::from(max_chars)), DataType::Integer)],
                        data_type: DataType::Text,
                    }),
                    None => cast,
                }
            }
            E::Function(function) => self.bind_function(function, scope),
            // Uncorrelated subqueries: planned now, run before the statement, their results put in their place.
            E::Subquery(query) => {
                let (index, data_type) = self.plan_subquery(query, true)?;
                Ok(Expr::Subquery { index, exists: false, data_type })
            }
            E::Exists { subquery, negated } => {
                // Bound as written (its names and types are checked), then planned without what PostgreSQL
                // drops from an EXISTS subquery: its select list is never evaluated.
                let (index, _) = match decorrelate::exists_simplified(subquery) {
                    Some(simplified) => {
                        self.check_subquery(subquery)?;
                        self.plan_subquery(&simplified, false)?
                    }
                    None => self.plan_subquery(subquery, false)?,
                };
                let exists = Expr::Subquery { index, exists: true, data_type: DataType::Boolean };
                Ok(if *negated { Expr::Not(Box::new(exists)) } else { exists })
            }
            E::InSubquery { expr: inner, subquery, negated } => {
                let inner = self.bind_expr(inner, scope)?;
                let (index, data_type) = self.plan_subquery(subquery, true)?;
                let values = Expr::Subquery { index, exists: false, data_type };
                let (inner, _) = self.unify_comparison(inner, values)?;
                let op = if *negated { BinaryOp::NotEq } else { BinaryOp::Eq };
                Ok(Expr::QuantifiedSubquery { expr: Box::new(inner), op, all: *negated, index, values_type: data_type })
            }
            E::Case { operand, conditions, else_result, .. } => {
                self.bind_case(operand.as_deref(), conditions, else_result.as_deref(), scope)
            }
            // `a IS NOT DISTINCT FROM b` is `CASE WHEN a IS NULL THEN b IS NULL WHEN b IS NULL THEN false
            // ELSE a = b END`: never NULL.
            E::IsDistinctFrom(left, right) | E::IsNotDistinctFrom(left, right) => {
                let left = self.bind_expr(left, scope)?;
                let right = self.bind_expr(right, scope)?;
                let equal = self.bind_binary(&BinaryOperator::Eq, left.clone(), right.clone())?;
                let is_null = |e: Expr| Expr::IsNull { expr: Box::new(e), negated: false };
                let not_distinct = Expr::Case {
                    branches: vec![
                        (is_null(left), is_null(right.clone())),
                        (is_null(right), Expr::literal(Value::Bool(false), DataType::Boolean)),
                    ],
                    otherwise: Box::new(equal),
                    data_type: DataType::Boolean,
                };
                Ok(if matches!(expr, E::IsDistinctFrom(..)) { Expr::Not(Box::new(not_distinct)) } else { not_distinct })
            }
            E::Like { negated, any: false, expr: inner, pattern, escape_char }
            | E::ILike { negated, any: false, expr: inner, pattern, escape_char } => {
                let case_insensitive = matches!(expr, E::ILike { .. });
                let operator = if case_insensitive { "~~*" } else { "~~" };
                let inner = self.text_operand(inner, scope, operator)?;
                let pattern = self.text_operand(pattern, scope, operator)?;
                let escape = self.escape_character(escape_char.as_deref(), scope)?;
                Ok(Expr::Like {
                    expr: Box::new(inner),
                    pattern: Box::new(pattern),
                    negated: *negated,
                    case_insensitive,
                    escape,
                })
            }
            E::Like { .. } | E::ILike { .. } => Err(unsupported("LIKE ANY")),
            E::Floor { .. } | E::Ceil { .. } | E::Substring { .. } | E::Position { .. } | E::Trim { .. } => {
                self.special_function(expr, scope)?.ok_or_else(|| unsupported(&format!("the expression {expr}")))
            }
            other => Err(unsupported(&format!("the expression {other}"))),
        }
    }

    fn bind_value(&self, value: &ast::Value) -> Result<Expr, ExecError> {
        use ast::Value as V;
        Ok(match value {
            V::Number(text, _) => match text.parse::<i64>() {
                Ok(v) if i32::try_from(v).is_ok() => Expr::literal(Value::Int(v), DataType::Integer),
                Ok(v) => Expr::literal(Value::Int(v), DataType::BigInt),
                Err(_) => {
                    let v: f64 = text.parse().map_err(|_| {
                        ExecError::new(sqlstate::INVALID_TEXT_REPRESENTATION, format!("invalid number \"{text}\""))
                    })?;
                    Expr::literal(Value::Double(v), DataType::Double)
                }
            },
            V::SingleQuotedString(text) | V::EscapedStringLiteral(text) | V::UnicodeStringLiteral(text) => {
                Expr::literal(Value::text(text), DataType::Text)
            }
            V::DollarQuotedString(text) => Expr::literal(Value::text(&text.value), DataType::Text),
            V::Boolean(b) => Expr::literal(Value::Bool(*b), DataType::Boolean),
            V::Null => Expr::literal(Value::Null, DataType::Text),
            V::Placeholder(text) => {
                let index: usize = text
                    .strip_prefix('$')
                    .and_then(|n| n.parse().ok())
                    .filter(|&n: &usize| n >= 1)
                    .ok_or_else(|| ExecError::new(sqlstate::SYNTAX_ERROR, format!("invalid parameter {text}")))?;
                // The protocol counts parameters in 16 bits.
                if index > PARAMS_MAX {
                    return Err(ExecError::new(
                        sqlstate::TOO_MANY_COLUMNS,
                        format!("there can be at most {PARAMS_MAX} parameters, not {text}"),
                    ));
                }
                if !self.params_allowed {
                    return Err(ExecError::new(sqlstate::UNDEFINED_PARAMETER, format!("there is no parameter {text}")));
                }
                let index = index - 1;
                {
                    let mut params = self.params.borrow_mut();
                    if params.len() <= index {
                        params.resize(index + 1, None);
                    }
                }
                Expr::Param { index, data_type: self.param_type(index).unwrap_or(DataType::Text) }
            }
            other => return Err(unsupported(&format!("the literal {other}"))),
        })
    }

    /// Whether an expression has no type of its own yet (an unresolved parameter, NULL, a quoted literal).
    fn is_untyped(&self, expr: &Expr) -> bool {
        match expr {
            Expr::Param { index, .. } => self.param_type(*index).is_none(),
            Expr::Literal { value: Value::Null | Value::Text(_), .. } => true,
            _ => false,
        }
    }

    /// Brings both sides of a comparison to a common type.
    fn unify_comparison(&self, left: Expr, right: Expr) -> Result<(Expr, Expr), ExecError> {
        let (lt, rt) = (left.data_type(), right.data_type());
        if lt == rt {
            return Ok((left, right));
        }
        if self.is_untyped(&right) && !self.is_untyped(&left) {
            let right = self.coerce_to(right, lt)?;
            return Ok((left, right));
        }
        if self.is_untyped(&left) {
            let left = self.coerce_to(left, rt)?;
            return Ok((left, right));
        }
        if lt.is_numeric() && rt.is_numeric() {
            return Ok((left, right));
        }
        Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, format!("operator does not exist: {lt} = {rt}")).with_hint(
            "No operator matches the given name and argument types. You might need to add explicit type casts.",
        ))
    }

    /// A clause's condition (WHERE, HAVING, ON, FILTER): boolean, and its constant parts folded now, as the whole
    /// plan's are later (`Expr::folded`), so that the access paths chosen from it see `x AND false` as false and
    /// `x AND true` as `x`, and a constant part's error is raised.
    fn condition(&self, bound: Expr, context: &str) -> Result<Expr, ExecError> {
        self.fold(&self.expect_boolean(bound, context)?)
    }

    /// A binder for PREPARE's second try, after its first raised a data exception from a constant: the same
    /// statement's columns and parameter types, its constants that raise left unfolded. PostgreSQL folds them
    /// when it plans, at EXECUTE (`PREPARE p AS SELECT 1 / 0` succeeds; each `EXECUTE p` raises 22012); the
    /// statement is then bound again at each EXECUTE, whose folding raises the error.
    pub fn deferring_constant_errors(mut self) -> Self {
        self.defer_constant_errors = true;
        self
    }

    /// `expr` with its constant parts folded ([`Expr::folded`]), unless that raises a data exception while
    /// constant errors are deferred ([`Binder::deferring_constant_errors`]): then `expr` as it is.
    fn fold(&self, expr: &Expr) -> Result<Expr, ExecError> {
        match expr.folded() {
            Err(error) if self.defer_constant_errors && error.sqlstate.starts_with("22") => Ok(expr.clone()),
            folded => folded,
        }
    }

    fn expect_boolean(&self, expr: Expr, context: &str) -> Result<Expr, ExecError> {
        if expr.data_type() == DataType::Boolean {
            return Ok(expr);
        }
        if self.is_untyped(&expr) {
            return self.coerce_to(expr, DataType::Boolean);
        }
        Err(ExecError::new(
            sqlstate::DATATYPE_MISMATCH,
            format!("argument of {context} must be type boolean, not type {}", expr.data_type()),
        ))
    }

    fn numeric_operand(&self, expr: Expr, op: &str) -> Result<Expr, ExecError> {
        if expr.data_type().is_numeric() {
            return Ok(expr);
        }
        if self.is_untyped(&expr) {
            return self.coerce_to(expr, DataType::Integer);
        }
        Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, format!("operator does not exist: {op} {}", expr.data_type())))
    }

    /// An operand that must be text (LIKE's): untyped parameters and literals become text.
    fn text_operand(&self, expr: &ast::Expr, scope: &Scope, op: &str) -> Result<Expr, ExecError> {
        let expr = self.bind_expr(expr, scope)?;
        if expr.data_type() == DataType::Text {
            return Ok(expr);
        }
        if self.is_untyped(&expr) {
            return self.coerce_to(expr, DataType::Text);
        }
        Err(ExecError::new(
            sqlstate::UNDEFINED_FUNCTION,
            format!("operator does not exist: {} {op} text", expr.data_type()),
        )
        .with_hint("LIKE compares text; cast the operand to text."))
    }

    /// Brings expressions that meet in one value (CASE results, COALESCE arguments) to PostgreSQL's common type:
    /// the typed ones must agree (numeric types widen: integer, bigint, double precision), and the untyped ones
    /// (NULL, quoted literals, parameters) take it; all untyped makes text.
    fn unify_results(&self, exprs: Vec<Expr>, context: &str) -> Result<(Vec<Expr>, DataType), ExecError> {
        let mut common: Option<DataType> = None;
        for expr in exprs.iter().filter(|e| !self.is_untyped(e)) {
            let t = expr.data_type();
            common = Some(match common {
                None => t,
                Some(c) if c == t => c,
                Some(c) if c.is_numeric() && t.is_numeric() => wider_numeric(c, t),
                Some(c) => {
                    return Err(ExecError::new(
                        sqlstate::DATATYPE_MISMATCH,
                        format!("{context} types {c} and {t} cannot be matched"),
                    ));
                }
            });
        }
        let target = common.unwrap_or(DataType::Text);
        let exprs = exprs.into_iter().map(|e| self.coerce_to(e, target)).collect::<Result<_, _>>()?;
        Ok((exprs, target))
    }

    fn bind_case(
        &self,
        operand: Option<&ast::Expr>,
        conditions: &[ast::CaseWhen],
        else_result: Option<&ast::Expr>,
        scope: &Scope<'_>,
    ) -> Result<Expr, ExecError> {
        let operand = operand.map(|o| self.bind_expr(o, scope)).transpose()?;
        let mut bound_conditions = Vec::with_capacity(conditions.len());
        let mut results = Vec::with_capacity(conditions.len() + 1);
        for when in conditions {
            let condition = self.bind_expr(&when.condition, scope)?;
            bound_conditions.push(match &operand {
                Some(operand) => self.bind_binary(&BinaryOperator::Eq, operand.clone(), condition)?,
                None => self.expect_boolean(condition, "CASE/WHEN")?,
            });
            results.push(self.bind_expr(&when.result, scope)?);
        }
        results.push(match else_result {
            Some(e) => self.bind_expr(e, scope)?,
            None => Expr::literal(Value::Null, DataType::Text),
        });
        let (mut results, data_type) = self.unify_results(results, "CASE")?;
        let otherwise = Box::new(results.pop().expect("the ELSE result"));
        Ok(Expr::Case { branches: bound_conditions.into_iter().zip(results).collect(), otherwise, data_type })
    }

    /// A scalar function call, or `None` when `name` is not one.
    fn bind_scalar_function(
        &self,
        name: &str,
        arguments: &[&ast::Expr],
        scope: &Scope<'_>,
    ) -> Result<Option<Expr>, ExecError> {
        let function = match name {
            "coalesce" => ScalarFunction::Coalesce,
            "greatest" => ScalarFunction::Greatest,
            "least" => ScalarFunction::Least,
            "nullif" => {
                let [left, right] = arguments else {
                    return Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, "function nullif takes two arguments"));
                };
                // The result is the first operand of the implied `=`, after both took a common type
                // (`nullif(NULL, 1)` is an integer, as in PostgreSQL).
                let left = self.bind_expr(left, scope)?;
                let right = self.bind_expr(right, scope)?;
                let (mut left, right) = self.unify_comparison(left, right)?;
                // PostgreSQL has no `=` between an integer and a double: the integer becomes a double, and so does
                // the result (`nullif(1, 2.5)` is 1.0). Integers of both widths compare as they are.
                if left.data_type().is_integer() && right.data_type() == DataType::Double {
                    left = Expr::Cast { expr: Box::new(left), to: DataType::Double };
                }
                let equal = self.bind_binary(&BinaryOperator::Eq, left.clone(), right)?;
                let data_type = left.data_type();
                return Ok(Some(Expr::Case {
                    branches: vec![(equal, Expr::literal(Value::Null, data_type))],
                    otherwise: Box::new(left),
                    data_type,
                }));
            }
            // `mod(a, b)` is `a % b`.
            "mod" => {
                let [left, right] = arguments else {
                    return Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, "function mod takes two arguments"));
                };
                let (left, right) = (self.bind_expr(left, scope)?, self.bind_expr(right, scope)?);
                return self.bind_binary(&BinaryOperator::Modulo, left, right).map(Some);
            }
            _ => return self.named_function(name, arguments, scope),
        };
        let args = arguments.iter().map(|a| self.bind_expr(a, scope)).collect::<Result<Vec<_>, _>>()?;
        if args.is_empty() {
            return Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, format!("function {name}() does not exist")));
        }
        let (args, data_type) = self.unify_results(args, &name.to_uppercase())?;
        Ok(Some(Expr::Function { function, args, data_type }))
    }

    fn bind_binary(&self, op: &BinaryOperator, left: Expr, right: Expr) -> Result<Expr, ExecError> {
        let op = binary_op(op)?;
        let binary = |left: Expr, right: Expr, data_type| Expr::Binary {
            op,
            left: Box::new(left),
            right: Box::new(right),
            data_type,
        };
        if op.is_comparison() {
            let (left, right) = self.unify_comparison(left, right)?;
            let comparison = binary(left, right, DataType::Boolean);
            // Two constants compared are a constant, as PostgreSQL folds them: `x AND 1 = 0` is then false.
            if let Expr::Binary { left, right, .. } = &comparison
                && matches!(**left, Expr::Literal { .. })
                && matches!(**right, Expr::Literal { .. })
            {
                return Ok(Expr::literal(comparison.eval(&[], &[])?, DataType::Boolean));
            }
            return Ok(comparison);
        }
        match op {
            BinaryOp::And | BinaryOp::Or => {
                let name = if op == BinaryOp::And { "AND" } else { "OR" };
                let left = self.expect_boolean(left, name)?;
                let right = self.expect_boolean(right, name)?;
                // Not folded here: a clause's whole condition is, once bound (`Binder::condition`). Folding each
                // AND of a chain of n would fold its left operand again: n²/2 nodes for `a = 0 OR … OR a = n`.
                Ok(binary(left, right, DataType::Boolean))
            }
            // `||` needs a text operand (an untyped literal is one); the other is cast to text.
            BinaryOp::Concat if left.data_type() == DataType::Text || right.data_type() == DataType::Text => {
                Ok(binary(left, right, DataType::Text))
            }
            BinaryOp::Concat => Err(ExecError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("operator does not exist: {} || {}", left.data_type(), right.data_type()),
            )
            .with_hint(
                "No operator matches the given name and argument types. You might need to add explicit type casts.",
            )),
            _ => {
                let (left, right) = match (self.is_untyped(&left), self.is_untyped(&right)) {
                    (true, false) => (self.coerce_to(left, right.data_type())?, right),
                    (false, true) => {
                        let target = left.data_type();
                        (left, self.coerce_to(right, target)?)
                    }
                    _ => (left, right),
                };
                let (lt, rt) = (left.data_type(), right.data_type());
                if !lt.is_numeric() || !rt.is_numeric() {
                    return Err(ExecError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("operator does not exist: {lt} {} {rt}", op.symbol()),
                    ));
                }
                let numeric = lt == DataType::Numeric || rt == DataType::Numeric;
                // numadb's numerics are whole: a quotient with one is a double (PostgreSQL's has a fraction).
                let data_type = if numeric && op == BinaryOp::Div { DataType::Double } else { wider_numeric(lt, rt) };
                Ok(binary(left, right, data_type))
            }
        }
    }

    fn bind_function(&self, function: &ast::Function, scope: &Scope<'_>) -> Result<Expr, ExecError> {
        let name = object_name(&function.name).join(".");
        let arguments: Vec<&FunctionArgExpr> = match &function.args {
            FunctionArguments::None => Vec::new(),
            FunctionArguments::List(list) => {
                // An aggregate's ORDER BY is the one clause numadb takes (`aggregate_order_by`).
                if list.clauses.iter().any(|c| !matches!(c, ast::FunctionArgumentClause::OrderBy(_))) {
                    return Err(unsupported("a clause inside a function's arguments (LIMIT, IGNORE NULLS, …)"));
                }
                list.args
                    .iter()
                    .map(|a| match a {
                        FunctionArg::Unnamed(arg) => Ok(arg),
                        _ => Err(unsupported("named function arguments")),
                    })
                    .collect::<Result<_, _>>()?
            }
            FunctionArguments::Subquery(_) => return Err(unsupported("subqueries")),
        };
        if let Some(over) = &function.over {
            return self.bind_window(function, over, &name, &arguments, scope);
        }
        if name == "grouping" {
            return self.bind_grouping(&arguments, scope);
        }
        // Clauses that change what an aggregate sees must be refused, not ignored: ignoring them gives wrong answers.
        let ordered_set = AggregateFunction::ordered_set_from_name(&name).is_some();
        if !function.within_group.is_empty() && !ordered_set {
            // PostgreSQL looks for an ordered-set aggregate of that name and finds none.
            return Err(ExecError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("{name} is not an ordered-set aggregate, so it cannot have WITHIN GROUP"),
            ));
        }
        if ordered_set && function.within_group.is_empty() {
            return Err(ExecError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("WITHIN GROUP is required for ordered-set aggregate {name}"),
            ));
        }
        if function.null_treatment.is_some() {
            return Err(unsupported("IGNORE NULLS or RESPECT NULLS"));
        }
        let distinct = matches!(
            &function.args,
            FunctionArguments::List(list) if matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct))
        );
        let expressions: Option<Vec<&ast::Expr>> = arguments
            .iter()
            .map(|a| match a {
                FunctionArgExpr::Expr(e) => Some(e),
                _ => None,
            })
            .collect();
        if let Some(expressions) = &expressions
            && let Some(scalar) = self.bind_scalar_function(&name, expressions, scope)?
        {
            let ordered = !aggregate_order_by(function).is_empty();
            for (given, clause) in
                [(distinct, "DISTINCT"), (function.filter.is_some(), "FILTER"), (ordered, "ORDER BY")]
            {
                if given {
                    return Err(ExecError::new(
                        sqlstate::WRONG_OBJECT_TYPE,
                        format!("{clause} specified, but {name} is not an aggregate function"),
                    ));
                }
            }
            return Ok(scalar);
        }
        if self.aggregates.borrow().is_none() && self.aggregate_name(&name) {
            return Err(ExecError::new(
                sqlstate::GROUPING_ERROR,
                format!("aggregate functions are not allowed here ({name})"),
            ));
        }
        let call = self.aggregate_call(function, &name, &arguments, distinct, false, scope)?;
        let data_type = call.data_type;
        let mut collected = self.aggregates.borrow_mut();
        let calls = collected.as_mut().expect("checked above");
        Ok(Expr::Column { index: AGGREGATE_BASE + position_or_push(calls, call), data_type })
    }

    /// `GROUPING(a, …)`: a placeholder column that becomes, over the groups, an integer with one bit per argument
    /// (the first argument's the highest), set when that key is not in the row's grouping set. The arguments must
    /// be grouping keys; that is checked once the keys are known (`GroupedRow::rewrite`).
    fn bind_grouping(&self, arguments: &[&FunctionArgExpr], scope: &Scope<'_>) -> Result<Expr, ExecError> {
        if self.in_aggregate_argument.get() {
            return Err(ExecError::new(sqlstate::GROUPING_ERROR, "aggregate function calls cannot be nested"));
        }
        if self.groupings.borrow().is_none() {
            return Err(ExecError::new(sqlstate::GROUPING_ERROR, "grouping operations are not allowed here"));
        }
        if arguments.is_empty() {
            return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "GROUPING needs at least one argument"));
        }
        if arguments.len() > GROUPING_ARGUMENTS_MAX {
            return Err(ExecError::new(sqlstate::TOO_MANY_ARGUMENTS, "GROUPING must have fewer than 32 arguments"));
        }
        let mut bound = Vec::with_capacity(arguments.len());
        for argument in arguments {
            let FunctionArgExpr::Expr(argument) = argument else {
                return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "GROUPING takes expressions"));
            };
            bound.push(self.without_aggregates(|| self.bind_expr(argument, scope))?);
        }
        let mut collected = self.groupings.borrow_mut();
        let calls = collected.as_mut().expect("checked above");
        Ok(Expr::Column { index: GROUPING_BASE + position_or_push(calls, bound), data_type: DataType::Integer })
    }

    /// A window function call: its placeholder column (the [`Plan::Window`] column it becomes).
    fn bind_window(
        &self,
        function: &ast::Function,
        over: &ast::WindowType,
        name: &str,
        arguments: &[&FunctionArgExpr],
        scope: &Scope<'_>,
    ) -> Result<Expr, ExecError> {
        if self.in_aggregate_argument.get() {
            return Err(ExecError::new(
                sqlstate::GROUPING_ERROR,
                "aggregate function calls cannot contain window function calls",
            ));
        }
        if self.windows.borrow().is_none() {
            return Err(ExecError::new(sqlstate::WINDOWING_ERROR, "window functions are not allowed here"));
        }
        let ast::WindowType::WindowSpec(spec) = over else { return Err(unsupported("named windows")) };
        if spec.window_name.is_some() {
            return Err(unsupported("named windows"));
        }
        if !function.within_group.is_empty() || function.null_treatment.is_some() {
            return Err(unsupported("WITHIN GROUP, IGNORE NULLS or RESPECT NULLS"));
        }
        if !aggregate_order_by(function).is_empty() {
            return Err(unsupported("aggregate ORDER BY in a window function"));
        }
        if matches!(&function.args, FunctionArguments::List(list)
            if matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct)))
        {
            return Err(unsupported("DISTINCT in a window function"));
        }
        // Inside the call, window functions are not allowed (they do not nest); the query's aggregates are.
        let saved = self.windows.borrow_mut().take();
        let bound = (|| -> Result<WindowCall, ExecError> {
            let partition_by = spec.partition_by.iter().map(|e| self.bind_expr(e, scope)).collect::<Result<_, _>>()?;
            let order_by = spec
                .order_by
                .iter()
                .map(|item| Ok(sort_key(self.bind_expr(&item.expr, scope)?, &item.options)))
                .collect::<Result<Vec<_>, ExecError>>()?;
            let frame = spec.window_frame.as_ref().map(|frame| self.window_frame(frame, &order_by)).transpose()?;
            let (window_function, data_type) = match name {
                "row_number" | "rank" | "dense_rank" => {
                    if !arguments.is_empty() {
                        return Err(ExecError::new(
                            sqlstate::WRONG_OBJECT_TYPE,
                            format!("window function {name} takes no arguments"),
                        ));
                    }
                    let function = match name {
                        "row_number" => WindowFunction::RowNumber,
                        "rank" => WindowFunction::Rank,
                        _ => WindowFunction::DenseRank,
                    };
                    (function, DataType::BigInt)
                }
                "lag" | "lead" => {
                    let (argument, offset, default) = match arguments {
                        [FunctionArgExpr::Expr(argument)] => (argument, 1, None),
                        [FunctionArgExpr::Expr(argument), FunctionArgExpr::Expr(offset), default @ ..]
                            if default.len() <= 1 =>
                        {
                            let offset = self.without_aggregates(|| self.bind_expr(offset, scope))?;
                            let offset = if self.is_untyped(&offset) {
                                self.coerce_to(offset, DataType::Integer)?
                            } else {
                                offset
                            };
                            // lag(anyelement, integer): a bigint or a double offset matches no function.
                            if offset.data_type() != DataType::Integer {
                                return Err(ExecError::new(
                                    sqlstate::UNDEFINED_FUNCTION,
                                    format!("function {name}(…, {}) does not exist", offset.data_type()),
                                ));
                            }
                            let offset = match offset.is_constant().then(|| offset.eval(&[], &[])).transpose()? {
                                Some(Value::Int(offset)) => offset,
                                _ => {
                                    return Err(unsupported(&format!("{name} with an offset that is not a constant")));
                                }
                            };
                            let default = match default {
                                [FunctionArgExpr::Expr(default)] => Some(default),
                                [] => None,
                                _ => {
                                    return Err(ExecError::new(
                                        sqlstate::UNDEFINED_FUNCTION,
                                        format!("function {name} does not take these arguments"),
                                    ));
                                }
                            };
                            (argument, offset, default)
                        }
                        _ => {
                            return Err(ExecError::new(
                                sqlstate::UNDEFINED_FUNCTION,
                                format!("function {name} takes one to three arguments"),
                            ));
                        }
                    };
                    let argument = self.bind_expr(argument, scope)?;
                    let offset = if name == "lag" { offset } else { offset.checked_neg().unwrap_or(i64::MAX) };
                    match default {
                        // lag(anyelement [, integer]): an argument of unknown type leaves the result's unknown.
                        None if self.is_untyped(&argument) => {
                            return Err(ExecError::new(
                                sqlstate::DATATYPE_MISMATCH,
                                "could not determine polymorphic type because input has type unknown",
                            ));
                        }
                        None => {
                            let data_type = argument.data_type();
                            (WindowFunction::Lag { argument, offset, default: None }, data_type)
                        }
                        // lag(anycompatible, integer, anycompatible): the value and the default meet in one type.
                        Some(default) => {
                            let default = self.bind_expr(default, scope)?;
                            let types = (argument.data_type(), default.data_type());
                            let (mut pair, data_type) =
                                self.unify_results(vec![argument, default], name).map_err(|error| {
                                    if error.sqlstate != sqlstate::DATATYPE_MISMATCH {
                                        return error;
                                    }
                                    ExecError::new(
                                        sqlstate::UNDEFINED_FUNCTION,
                                        format!("function {name}({}, integer, {}) does not exist", types.0, types.1),
                                    )
                                })?;
                            let default = pair.pop().expect("two expressions");
                            let argument = pair.pop().expect("two expressions");
                            (WindowFunction::Lag { argument, offset, default: Some(default) }, data_type)
                        }
                    }
                }
                "percent_rank" | "cume_dist" => {
                    if !arguments.is_empty() {
                        return Err(ExecError::new(
                            sqlstate::UNDEFINED_FUNCTION,
                            format!("function {name} takes no arguments"),
                        ));
                    }
                    let function =
                        if name == "percent_rank" { WindowFunction::PercentRank } else { WindowFunction::CumeDist };
                    (function, DataType::Double)
                }
                "ntile" => {
                    let [FunctionArgExpr::Expr(buckets)] = arguments else {
                        return Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, "function ntile takes one argument"));
                    };
                    let buckets = self.window_count(buckets, "ntile", "22014", scope)?;
                    (WindowFunction::Ntile(buckets), DataType::Integer)
                }
                "first_value" | "last_value" | "nth_value" => {
                    let (argument, n) = match (name, arguments) {
                        ("nth_value", [FunctionArgExpr::Expr(argument), FunctionArgExpr::Expr(n)]) => {
                            (argument, self.window_count(n, "nth_value", "22016", scope)?)
                        }
                        ("first_value" | "last_value", [FunctionArgExpr::Expr(argument)]) => (argument, 1),
                        _ => {
                            return Err(ExecError::new(
                                sqlstate::UNDEFINED_FUNCTION,
                                format!("function {name} does not take these arguments"),
                            ));
                        }
                    };
                    let argument = self.bind_expr(argument, scope)?;
                    if self.is_untyped(&argument) {
                        return Err(ExecError::new(
                            sqlstate::DATATYPE_MISMATCH,
                            "could not determine polymorphic type because input has type unknown",
                        ));
                    }
                    let data_type = argument.data_type();
                    let function = match name {
                        "first_value" => WindowFunction::FirstValue(argument),
                        "last_value" => WindowFunction::LastValue(argument),
                        _ => WindowFunction::NthValue(argument, n),
                    };
                    (function, data_type)
                }
                _ if self.aggregate_name(name) => {
                    let call = self.aggregate_call(function, name, arguments, false, true, scope)?;
                    let data_type = call.data_type;
                    (WindowFunction::Aggregate(call), data_type)
                }
                _ => {
                    return Err(ExecError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("window function {name} does not exist"),
                    )
                    .with_hint(
                        "numadb's window functions are row_number, rank, dense_rank, percent_rank, cume_dist, ntile, \
                         lag, lead, first_value, last_value, nth_value and the aggregates (count, sum, min, max, avg, \
                         bool_and, bool_or, the variances and standard deviations)",
                    ));
                }
            };
            if function.filter.is_some() && !matches!(window_function, WindowFunction::Aggregate(_)) {
                return Err(ExecError::new(
                    sqlstate::WRONG_OBJECT_TYPE,
                    format!("FILTER is not implemented for non-aggregate window functions ({name})"),
                ));
            }
            Ok(WindowCall { function: window_function, partition_by, order_by, frame, data_type })
        })();
        *self.windows.borrow_mut() = saved;
        let call = bound?;
        let data_type = call.data_type;
        let mut collected = self.windows.borrow_mut();
        let calls = collected.as_mut().ok_or_else(|| ExecError::internal("window functions set aside"))?;
        Ok(Expr::Column { index: WINDOW_BASE + position_or_push(calls, call), data_type })
    }

    /// The constant count of `ntile(n)` or `nth_value(x, n)`: an integer above zero (`code` otherwise, as in
    /// PostgreSQL: 22014 for ntile, 22016 for nth_value).
    fn window_count(
        &self,
        count: &ast::Expr,
        name: &str,
        code: &'static str,
        scope: &Scope<'_>,
    ) -> Result<u64, ExecError> {
        let count = self.without_aggregates(|| self.bind_expr(count, scope))?;
        let count = if self.is_untyped(&count) { self.coerce_to(count, DataType::Integer)? } else { count };
        if !count.data_type().is_integer() {
            return Err(ExecError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {name}(…, {}) does not exist", count.data_type()),
            ));
        }
        match count.is_constant().then(|| count.eval(&[], &[])).transpose() {
            Ok(Some(Value::Int(n))) if n > 0 => Ok(n as u64),
            Ok(Some(Value::Int(_))) => {
                Err(ExecError::new(code, format!("argument of {name} must be greater than zero")))
            }
            _ => Err(unsupported(&format!("{name} with a count that is not a constant"))),
        }
    }

    fn aggregate_name(&self, name: &str) -> bool {
        AggregateFunction::from_name(name).is_some() || AggregateFunction::ordered_set_from_name(name).is_some()
    }

    /// An aggregate call (`count(*)`, `sum(DISTINCT x) FILTER (WHERE …)`, …), its argument and filter bound with
    /// no aggregates allowed inside, unless it is a window function (`over_window`), which runs after them.
    fn aggregate_call(
        &self,
        function: &ast::Function,
        name: &str,
        arguments: &[&FunctionArgExpr],
        distinct: bool,
        over_window: bool,
        scope: &Scope<'_>,
    ) -> Result<AggregateCall, ExecError> {
        if let Some(aggregate) = AggregateFunction::ordered_set_from_name(name) {
            if over_window {
                return Err(unsupported(&format!("OVER for the ordered-set aggregate {name}")));
            }
            return self.ordered_set_call(function, aggregate, arguments, scope);
        }
        let Some(mut aggregate) = AggregateFunction::from_name(name) else {
            if WINDOW_ONLY_FUNCTIONS.contains(&name) {
                return Err(ExecError::new(
                    sqlstate::WRONG_OBJECT_TYPE,
                    format!("window function {name} requires an OVER clause"),
                ));
            }
            // The argument types, as PostgreSQL names them in this error ("unknown" for an untyped literal).
            let types: Vec<&str> = arguments
                .iter()
                .map(|a| match a {
                    FunctionArgExpr::Expr(e) => match self.bind_expr(e, scope) {
                        Ok(bound) if !self.is_untyped(&bound) => bound.data_type().sql_name(),
                        _ => "unknown",
                    },
                    _ => "*",
                })
                .collect();
            return Err(ExecError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {name}({}) does not exist", types.join(", ")),
            )
            .with_hint(function::functions_hint()));
        };
        let mut extra = Vec::new();
        let argument = match arguments {
            [FunctionArgExpr::Wildcard] if aggregate == AggregateFunction::Count && distinct => {
                return Err(ExecError::new(
                    sqlstate::SYNTAX_ERROR,
                    "syntax error at or near \"*\" (count(DISTINCT *))",
                ));
            }
            [FunctionArgExpr::Wildcard] if aggregate == AggregateFunction::Count => {
                aggregate = AggregateFunction::CountStar;
                None
            }
            [FunctionArgExpr::Expr(arg), rest @ ..] if rest.len() + 1 == aggregate.arguments() => {
                let mut bound = self.bind_aggregate_argument(arg, over_window, scope)?;
                if self.is_untyped(&bound) && aggregate == AggregateFunction::StringAgg {
                    bound = self.coerce_to(bound, DataType::Text)?;
                }
                if name == numadb_execution::aggregate::LEAST_OF_ANY_TYPE && bound.data_type() == DataType::Boolean {
                    aggregate = AggregateFunction::BoolAnd;
                }
                if !aggregate.accepts(bound.data_type()) {
                    return Err(ExecError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("function {name}({}) does not exist", bound.data_type()),
                    ));
                }
                for argument in rest {
                    let FunctionArgExpr::Expr(argument) = argument else {
                        return Err(ExecError::new(sqlstate::SYNTAX_ERROR, format!("syntax error in {name}(…, *)")));
                    };
                    // string_agg's delimiter: text.
                    let delimiter = self.bind_aggregate_argument(argument, over_window, scope)?;
                    if delimiter.data_type() != DataType::Text && !self.is_untyped(&delimiter) {
                        return Err(ExecError::new(
                            sqlstate::UNDEFINED_FUNCTION,
                            format!("function {name}({}, {}) does not exist", bound.data_type(), delimiter.data_type()),
                        ));
                    }
                    extra.push(self.coerce_to(delimiter, DataType::Text)?);
                }
                Some(bound)
            }
            _ if aggregate.arguments() == 2 => {
                return Err(ExecError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("function {name} takes two arguments"),
                ));
            }
            _ => {
                return Err(ExecError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("function {name} takes one argument"),
                ));
            }
        };
        if distinct && aggregate == AggregateFunction::StringAgg {
            return Err(unsupported("string_agg(DISTINCT …)"));
        }
        // ORDER BY inside the call: keys bound like the argument.
        let order_by = aggregate_order_by(function)
            .iter()
            .map(|item| {
                let item = plain_order_item(item)?;
                let key = self.bind_aggregate_argument(&item.expr, over_window, scope)?;
                Ok(sort_key(key, &item.options))
            })
            .collect::<Result<Vec<_>, ExecError>>()?;
        // FILTER (WHERE …): a condition over the row, bound like the argument (no aggregates inside).
        let filter = match &function.filter {
            None => None,
            Some(condition) => {
                let bound = self.without_aggregates(|| self.bind_expr(condition, scope)).map_err(|error| {
                    if error.sqlstate == sqlstate::GROUPING_ERROR {
                        ExecError::new(sqlstate::GROUPING_ERROR, "aggregate functions are not allowed in FILTER")
                    } else {
                        error
                    }
                })?;
                Some(self.condition(bound, "FILTER")?)
            }
        };
        let data_type = aggregate.result_type(argument.as_ref().map(Expr::data_type));
        Ok(AggregateCall { function: aggregate, argument, distinct, filter, extra, order_by, data_type })
    }

    /// An ordered-set aggregate call: `percentile_cont(f) WITHIN GROUP (ORDER BY x)`, `percentile_disc(f) …`,
    /// `mode() …`. Its aggregated value is the WITHIN GROUP key, sorted by the same key; a percentile's fraction
    /// is its direct argument, which must be the same for every row of a group (numadb takes constants and
    /// parameters).
    fn ordered_set_call(
        &self,
        function: &ast::Function,
        aggregate: AggregateFunction,
        arguments: &[&FunctionArgExpr],
        scope: &Scope<'_>,
    ) -> Result<AggregateCall, ExecError> {
        let name = aggregate.name();
        if matches!(&function.args, FunctionArguments::List(list)
            if matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct)))
        {
            return Err(ExecError::new(
                sqlstate::WRONG_OBJECT_TYPE,
                format!("cannot use DISTINCT with WITHIN GROUP ({name})"),
            ));
        }
        let [item] = function.within_group.as_slice() else {
            return Err(ExecError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {name} takes one WITHIN GROUP (ORDER BY …) key"),
            ));
        };
        let item = plain_order_item(item)?;
        let mut value = self.bind_aggregate_argument(&item.expr, false, scope)?;
        if aggregate == AggregateFunction::PercentileCont {
            if self.is_untyped(&value) || value.data_type().is_numeric() {
                value = self.coerce_to(value, DataType::Double)?;
            } else {
                return Err(ExecError::new(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("function {name}(double precision ORDER BY {}) does not exist", value.data_type()),
                ));
            }
        } else if self.is_untyped(&value) {
            value = self.coerce_to(value, DataType::Text)?;
        }
        let fraction = match (aggregate, arguments) {
            (AggregateFunction::Mode, []) => None,
            (AggregateFunction::PercentileCont | AggregateFunction::PercentileDisc, [FunctionArgExpr::Expr(f)]) => {
                let f = self.without_aggregates(|| self.bind_expr(f, scope))?;
                let mut columns = Vec::new();
                f.columns(&mut columns);
                if !columns.is_empty() {
                    return Err(unsupported(&format!("a {name} fraction that is not a constant")));
                }
                if !(self.is_untyped(&f) || f.data_type().is_numeric()) {
                    return Err(ExecError::new(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("function {name}({}) does not exist", f.data_type()),
                    ));
                }
                Some(self.coerce_to(f, DataType::Double)?)
            }
            _ => {
                let takes = if aggregate == AggregateFunction::Mode { "no arguments" } else { "one fraction" };
                return Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, format!("function {name} takes {takes}")));
            }
        };
        let filter = match &function.filter {
            None => None,
            Some(condition) => {
                let bound = self.without_aggregates(|| self.bind_expr(condition, scope))?;
                Some(self.condition(bound, "FILTER")?)
            }
        };
        let data_type = aggregate.result_type(Some(value.data_type()));
        Ok(AggregateCall {
            function: aggregate,
            order_by: vec![sort_key(value.clone(), &item.options)],
            argument: Some(value),
            distinct: false,
            filter,
            extra: fraction.into_iter().collect(),
            data_type,
        })
    }

    /// An aggregate's argument (or ORDER BY key), bound without aggregates allowed (they do not nest); a window
    /// aggregate's may use the query's aggregates (`sum(count(*)) OVER (…)`).
    fn bind_aggregate_argument(
        &self,
        arg: &ast::Expr,
        over_window: bool,
        scope: &Scope<'_>,
    ) -> Result<Expr, ExecError> {
        if over_window {
            return self.bind_expr(arg, scope);
        }
        self.in_aggregate_argument.set(true);
        let bound = self.without_aggregates(|| self.bind_expr(arg, scope));
        self.in_aggregate_argument.set(false);
        bound
    }

    // ----------------------------------------------------------------------------------------------------
    // Queries.

    /// Plans a query: a whole statement, with its subqueries in expressions run first.
    pub fn plan_query(&self, query: &Query) -> Result<BoundQuery, ExecError> {
        let resolved;
        let query = if window_names::any(query) {
            resolved = window_names::resolve(query.clone())?;
            &resolved
        } else {
            query
        };
        let mut bound = self.plan_query_inner(query)?;
        let subqueries = std::mem::take(&mut *self.subqueries.borrow_mut());
        self.subquery_texts.borrow_mut().clear();
        if !subqueries.is_empty() {
            bound.plan = Plan::Subqueries { subqueries, main: Box::new(bound.plan) };
            bound.tables.append(&mut self.subquery_tables.borrow_mut());
        }
        // Constant parts are evaluated now, as PostgreSQL's planner does: their errors are the statement's,
        // whichever rows it reads (`SELECT 1/0 FROM t WHERE false` raises).
        bound.plan = bound.plan.try_map_exprs(&mut |expr| self.fold(expr))?;
        Ok(bound)
    }

    /// A name not found inside a subquery may be an enclosing query's: then the error is that correlated
    /// subqueries are not supported, not that the name does not exist.
    fn unless_correlated(&self, error: ExecError, qualifier: Option<&str>, name: &str) -> ExecError {
        let scopes = self.scopes.borrow();
        let enclosing = &scopes[..scopes.len().saturating_sub(1)];
        let found = enclosing.iter().flatten().any(|(q, names)| {
            qualifier.is_none_or(|wanted| q.as_deref() == Some(wanted)) && names.iter().any(|n| n == name)
        });
        if found {
            // A name the rewrites made (`__numadb_d0`, an outer value's column) means nothing to the user.
            let whose = if name.starts_with(decorrelate::HIDDEN_COLUMN) {
                String::new()
            } else {
                format!(" (\"{name}\" is the enclosing query's)")
            };
            return unsupported(&format!("a correlated subquery{whose} of this form")).with_hint(
                "numadb plans correlated scalar subqueries, EXISTS, IN, ANY and ALL in WHERE and in the \
                     select list (of a query not grouped, or grouped by the outer columns they read) when the \
                     subquery is one SELECT over tables, joins and subqueries in FROM (GROUP BY and HAVING, \
                     window functions, subqueries and LIMIT / OFFSET inside too), without a LIMIT but 1 in a \
                     scalar subquery, HAVING without GROUP BY under IN, ANY or ALL, or an aggregate of outer \
                     columns only; rewrite \
                     others as a join or a subquery in FROM.",
            );
        }
        error
    }

    /// Binds a subquery for its errors alone: nothing it plans (the subqueries inside it) is kept.
    fn check_subquery(&self, query: &Query) -> Result<(), ExecError> {
        self.plan_apart(query).map(drop).map_err(|error| self.correlated_subquery_error(query, error))
    }

    /// Plans `query` apart from the statement, for its errors or its columns' types: the subqueries it plans are
    /// not kept, nor the enclosing SELECT's aggregates touched.
    pub(super) fn plan_apart(&self, query: &Query) -> Result<BoundQuery, ExecError> {
        let planned = (self.subqueries.borrow().len(), self.subquery_tables.borrow().len());
        let bound = self.without_aggregates(|| self.plan_query_inner(query));
        self.subqueries.borrow_mut().truncate(planned.0);
        self.subquery_texts.borrow_mut().truncate(planned.0);
        self.subquery_tables.borrow_mut().truncate(planned.1);
        bound
    }

    /// Plans an uncorrelated subquery of an expression; returns its position in the statement's list and the
    /// type of its one column (`one_column` false: EXISTS, any columns).
    fn plan_subquery(&self, query: &Query, one_column: bool) -> Result<(usize, DataType), ExecError> {
        // The subquery's SELECT collects its own aggregates: the enclosing SELECT's are set aside meanwhile.
        let bound = self
            .without_aggregates(|| self.plan_query_inner(query))
            .map_err(|error| self.correlated_subquery_error(query, error))?;
        // The same text names other rows under other `WITH` queries.
        let visible: Vec<usize> = self.ctes.borrow().iter().map(|c| c.id).collect();
        let text = format!("{one_column} {visible:?} {query}");
        if one_column && bound.columns.len() != 1 {
            return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "subquery must return only one column"));
        }
        let data_type = bound.columns.first().map_or(DataType::Boolean, |c| c.data_type);
        // Planned above all the same: binding it checks names and types, and plans the subqueries inside it,
        // which the text does not tell apart either.
        if let Some(index) = self.subquery_texts.borrow().iter().position(|t| *t == text) {
            return Ok((index, data_type));
        }
        self.subquery_tables.borrow_mut().extend(bound.tables);
        let mut subqueries = self.subqueries.borrow_mut();
        subqueries.push(bound.plan);
        self.subquery_texts.borrow_mut().push(text);
        Ok((subqueries.len() - 1, data_type))
    }

    /// Plans a query that is part of a statement (a set operation's side, a subquery), with its `WITH` queries in
    /// scope for as long as it is being planned.
    fn plan_query_inner(&self, query: &Query) -> Result<BoundQuery, ExecError> {
        let outer_ctes = self.ctes.borrow().len();
        let planned = match &query.with {
            Some(with) => self.define_ctes(with).and_then(|()| self.plan_query_body(query)),
            None => self.plan_query_body(query),
        };
        self.ctes.borrow_mut().truncate(outer_ctes);
        planned
    }

    /// Plans the queries of a `WITH` clause, in order (each sees the ones before it), and puts them in scope.
    fn define_ctes(&self, with: &ast::With) -> Result<(), ExecError> {
        let first = self.ctes.borrow().len();
        for cte in &with.cte_tables {
            let name = fold(&cte.alias.name);
            if self.ctes.borrow()[first..].iter().any(|c| c.name == name) {
                return Err(ExecError::new(
                    sqlstate::DUPLICATE_ALIAS,
                    format!("WITH query name \"{name}\" specified more than once"),
                ));
            }
            if cte.from.is_some() {
                return Err(unsupported("WITH … FROM"));
            }
            let query = if with.recursive && recursive::refers_to(&cte.query, &name) {
                self.without_aggregates(|| self.plan_recursive_cte(&name, cte))?
            } else {
                let mut query = self.without_aggregates(|| self.plan_query_inner(&cte.query))?;
                settle_untyped(&mut query);
                rename_columns(&mut query.columns, &cte.alias.columns, &format!("WITH query \"{name}\""))?;
                query
            };
            let id = self.ctes_defined.get();
            self.ctes_defined.set(id + 1);
            self.ctes.borrow_mut().push(Cte { name, id, query });
        }
        Ok(())
    }

    /// The plan of the `WITH` query a table name in FROM refers to, if it does (only a bare name can).
    /// A function called in FROM (`generate_series(1, 10) AS g`), as a query whose one column is named by the
    /// alias, as in PostgreSQL (its column list, or else its name); `None` for a plain table name.
    fn table_function(&self, factor: &TableFactor) -> Result<Option<BoundQuery>, ExecError> {
        let TableFactor::Table { name, args: Some(args), alias, .. } = factor else { return Ok(None) };
        let function = object_name(name).join(".");
        if function != "generate_series" {
            return Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, format!("function {function} does not exist"))
                .with_hint("generate_series is the one function numadb can call in FROM"));
        }
        let arguments = args
            .args
            .iter()
            .map(|arg| match arg {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(expr)) => self.bind_constant(expr, None),
                _ => Err(unsupported("this argument of generate_series")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Integers of one type: bigint if any argument is one, else integer (also for untyped arguments).
        let wide = arguments.iter().any(|a| !self.is_untyped(a) && a.data_type() == DataType::BigInt);
        let data_type = if wide { DataType::BigInt } else { DataType::Integer };
        let integers = arguments.iter().all(|a| self.is_untyped(a) || a.data_type().is_integer());
        if !(2..=3).contains(&arguments.len()) || !integers {
            let types: Vec<&str> = arguments.iter().map(|a| a.data_type().sql_name()).collect();
            return Err(ExecError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function generate_series({}) does not exist", types.join(", ")),
            )
            .with_hint("numadb's generate_series takes two or three integers (start, stop, step)."));
        }
        if arguments.iter().any(|a| !a.is_constant()) {
            return Err(unsupported("generate_series over columns (LATERAL)"));
        }
        let mut arguments =
            arguments.into_iter().map(|a| self.coerce_to(a, data_type)).collect::<Result<Vec<_>, _>>()?;
        if arguments.len() == 2 {
            arguments.push(Expr::literal(Value::Int(1), data_type));
        }
        let [start, stop, step] =
            <[Expr; 3]>::try_from(arguments).map_err(|_| ExecError::internal("three arguments"))?;
        let column_name = match alias {
            Some(alias) if alias.columns.is_empty() => fold(&alias.name),
            _ => "generate_series".to_string(),
        };
        Ok(Some(BoundQuery {
            plan: Plan::Series(SeriesPlan { start, stop, step, data_type }),
            columns: vec![OutputColumn { name: column_name, data_type }],
            tables: Vec::new(),
        }))
    }

    fn cte(&self, name: &ObjectName) -> Option<BoundQuery> {
        let [ObjectNamePart::Identifier(ident)] = name.0.as_slice() else { return None };
        let name = fold(ident);
        self.ctes.borrow().iter().rev().find(|c| c.name == name).map(|c| c.query.clone())
    }

    /// The rows a name in FROM stands for when it is not a table: a `WITH` query in scope, or else a view
    /// (planned here, in a scope of its own).
    pub(crate) fn cte_or_view(&self, name: &ObjectName) -> Result<Option<BoundQuery>, ExecError> {
        if let Some(query) = self.cte(name) {
            return Ok(Some(query));
        }
        let folded: Vec<String> = name.0.iter().filter_map(|p| p.as_ident().map(fold)).collect();
        let view_name = match folded.as_slice() {
            [name] => name,
            [schema, name] if schema == "public" => name,
            _ => return Ok(None),
        };
        let Some(view) = self.source.view(view_name) else { return Ok(None) };
        // Views may read views, never themselves (a view is checked before it exists), but a chain can be long.
        if self.view_depth.get() >= VIEW_DEPTH_MAX {
            return Err(ExecError::new(
                sqlstate::PROGRAM_LIMIT_EXCEEDED,
                format!("views nest more than {VIEW_DEPTH_MAX} deep (reading view \"{view_name}\")"),
            ));
        }
        // The view sees the catalog only: not the reading statement's WITH queries or columns.
        let ctes = std::mem::take(&mut *self.ctes.borrow_mut());
        let scopes = std::mem::take(&mut *self.scopes.borrow_mut());
        self.view_depth.set(self.view_depth.get() + 1);
        let planned = self.without_aggregates(|| self.plan_query_inner(&view.query));
        self.view_depth.set(self.view_depth.get() - 1);
        *self.ctes.borrow_mut() = ctes;
        *self.scopes.borrow_mut() = scopes;
        let mut bound = planned?;
        settle_untyped(&mut bound);
        for (column, name) in bound.columns.iter_mut().zip(&view.columns) {
            column.name = name.clone();
        }
        Ok(Some(bound))
    }

    fn plan_query_body(&self, query: &Query) -> Result<BoundQuery, ExecError> {
        let (limit, offset) = match &query.limit_clause {
            None => (None, None),
            Some(LimitClause::LimitOffset { limit, offset, limit_by }) => {
                if !limit_by.is_empty() {
                    return Err(unsupported("LIMIT BY"));
                }
                (limit.as_ref(), offset.as_ref().map(|o| &o.value))
            }
            Some(LimitClause::OffsetCommaLimit { offset, limit }) => (Some(limit), Some(offset)),
        };
        let count = |count: &ast::Expr, clause: &str| {
            let rounded = decimal_count_rounded(count);
            self.bind_constant(rounded.as_ref().unwrap_or(count), Some(DataType::BigInt))
                .map_err(|error| self.row_count_error(query, count, clause, error))
        };
        // `FETCH FIRST n ROWS ONLY` is the standard's LIMIT (PostgreSQL refuses both in one query, and names its
        // count's errors LIMIT's).
        let fetched = match &query.fetch {
            None => None,
            Some(fetch) if fetch.with_ties && query.order_by.is_none() => {
                return Err(ExecError::new(
                    sqlstate::SYNTAX_ERROR,
                    "WITH TIES cannot be specified without ORDER BY clause",
                ));
            }
            Some(fetch) if fetch.percent => return Err(unsupported("FETCH … PERCENT")),
            Some(_) if limit.is_some() => {
                return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "LIMIT and FETCH cannot be used together"));
            }
            Some(fetch) => Some(match &fetch.quantity {
                Some(quantity) => count(quantity, "LIMIT")?,
                None => Expr::literal(Value::Int(1), DataType::BigInt), // FETCH FIRST ROW ONLY
            }),
        };
        if !query.locks.is_empty() {
            return Err(unsupported("a FOR UPDATE or FOR SHARE clause"));
        }
        if query.for_clause.is_some() || query.settings.is_some() || query.format_clause.is_some() {
            return Err(unsupported("a FOR, SETTINGS or FORMAT clause"));
        }
        if !query.pipe_operators.is_empty() {
            return Err(unsupported("pipe operators"));
        }
        let limit = match fetched {
            Some(fetched) => Some(fetched),
            None => limit.map(|e| count(e, "LIMIT")).transpose()?,
        };
        let offset = offset.map(|e| count(e, "OFFSET")).transpose()?;
        let order_items: Vec<ast::OrderByExpr> = match &query.order_by {
            None => Vec::new(),
            Some(order) => match &order.kind {
                OrderByKind::Expressions(exprs) => exprs.iter().map(plain_order_item).collect::<Result<_, _>>()?,
                OrderByKind::All(_) => return Err(unsupported("ORDER BY ALL")),
            },
        };
        let order_by: Vec<&ast::OrderByExpr> = order_items.iter().collect();
        // `LIMIT 0` (written so) reads nothing, as PostgreSQL's Limit node never asks its input for a row: a select
        // list or sort key that would fail on the rows does not run. A negative OFFSET still fails, as there.
        let count_is = |count: &Option<Expr>, wanted: fn(i64) -> bool| match count {
            Some(Expr::Literal { value: Value::Int(n), .. }) => wanted(*n),
            _ => false,
        };
        let reads_nothing = count_is(&limit, |n| n == 0) && (offset.is_none() || count_is(&offset, |n| n >= 0));
        let mut bound = self.plan_ordered_body(query, &order_by, limit, offset)?;
        if reads_nothing {
            // Its constant parts are still folded, whose errors are the statement's (`SELECT 1/0 … LIMIT 0`).
            bound.plan.try_map_exprs(&mut |expr| self.fold(expr))?;
            bound.plan = Plan::Values(Vec::new());
            return Ok(bound);
        }
        if query.fetch.as_ref().is_some_and(|fetch| fetch.with_ties) {
            // The LIMIT just planned is the outermost one with a sort: it keeps the ties of its last row.
            match &mut bound.plan {
                Plan::Post { limit: Some(_), order_by, with_ties, .. } if !order_by.is_empty() => *with_ties = true,
                _ => return Err(ExecError::internal("FETCH … WITH TIES planned without its sorted LIMIT")),
            }
        }
        Ok(bound)
    }

    /// A query's body under its ORDER BY, OFFSET and LIMIT.
    fn plan_ordered_body(
        &self,
        query: &Query,
        order_by: &[&ast::OrderByExpr],
        limit: Option<Expr>,
        offset: Option<Expr>,
    ) -> Result<BoundQuery, ExecError> {
        match query.body.as_ref() {
            SetExpr::Select(select) => self.plan_select(select, order_by, limit, offset),
            body => {
                let mut bound = self.plan_set_expr(body)?;
                if order_by.is_empty() && limit.is_none() && offset.is_none() {
                    return Ok(bound);
                }
                let mut keys = Vec::new();
                for item in order_by {
                    let position = self.output_position(&item.expr, &bound.columns)?;
                    keys.push(sort_key(
                        Expr::Column { index: position, data_type: bound.columns[position].data_type },
                        &item.options,
                    ));
                }
                bound.plan = Plan::Post {
                    input: Box::new(bound.plan),
                    filter: None,
                    projection: None,
                    distinct: Dedup::No,
                    order_by: keys,
                    offset,
                    limit,
                    with_ties: false,
                };
                Ok(bound)
            }
        }
    }

    /// An ORDER BY item of a set operation: an output column by ordinal or name.
    fn output_position(&self, expr: &ast::Expr, columns: &[OutputColumn]) -> Result<usize, ExecError> {
        if let Some(constant) = constant_item(expr) {
            let position =
                constant.map_err(|()| ExecError::new(sqlstate::SYNTAX_ERROR, "non-integer constant in ORDER BY"))?;
            return match usize::try_from(position) {
                Ok(ordinal @ 1..) if ordinal <= columns.len() => Ok(ordinal - 1),
                _ => Err(ExecError::new(
                    sqlstate::INVALID_COLUMN_REFERENCE,
                    format!("ORDER BY position {position} is not in select list"),
                )),
            };
        }
        match expr {
            ast::Expr::Nested(inner) => self.output_position(inner, columns),
            ast::Expr::Identifier(ident) => {
                let name = fold(ident);
                columns.iter().position(|c| c.name == name).ok_or_else(|| {
                    ExecError::new(sqlstate::UNDEFINED_COLUMN, format!("column \"{name}\" does not exist"))
                })
            }
            _ => Err(unsupported("ORDER BY expressions on UNION results (use output column names or positions)")),
        }
    }

    fn plan_set_expr(&self, body: &SetExpr) -> Result<BoundQuery, ExecError> {
        match body {
            SetExpr::Select(select) => self.plan_select(select, &[], None, None),
            SetExpr::Query(query) => self.plan_query_inner(query),
            SetExpr::SetOperation { left, op, set_quantifier, right } => {
                let keyword = match op {
                    SetOperator::Union => "UNION",
                    SetOperator::Intersect => "INTERSECT",
                    SetOperator::Except => "EXCEPT",
                    other => return Err(unsupported(&other.to_string())),
                };
                let all = match set_quantifier {
                    SetQuantifier::All => true,
                    SetQuantifier::Distinct | SetQuantifier::None => false,
                    other => return Err(unsupported(&format!("{keyword} {other}"))),
                };
                let left = self.plan_set_expr(left)?;
                let right = self.plan_set_expr(right)?;
                let SetSides { columns, left: left_plan, right: right_plan, tables } =
                    self.set_operation_sides(left, right, keyword)?;
                let plan = match op {
                    SetOperator::Intersect | SetOperator::Except => {
                        let op = if *op == SetOperator::Intersect { SetOp::Intersect } else { SetOp::Except };
                        Plan::SetOperation { op, all, left: Box::new(left_plan), right: Box::new(right_plan) }
                    }
                    _ => {
                        let mut inputs = Vec::new();
                        for side in [left_plan, right_plan] {
                            match side {
                                Plan::UnionAll(more) => inputs.extend(more),
                                other => inputs.push(other),
                            }
                        }
                        let union = Plan::UnionAll(inputs);
                        if all { union } else { post(union, None, None, Dedup::Rows, Vec::new(), None, None) }
                    }
                };
                Ok(BoundQuery { plan, columns, tables })
            }
            SetExpr::Values(values) => {
                let mut rows = Vec::new();
                for row in &values.rows {
                    rows.push(row.iter().map(|e| self.bind_constant(e, None)).collect::<Result<Vec<_>, _>>()?);
                }
                let width = rows.first().map_or(0, Vec::len);
                if rows.iter().any(|r| r.len() != width) {
                    return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "VALUES lists must all be the same length"));
                }
                if width > OUTPUT_COLUMNS_MAX {
                    return Err(ExecError::new(
                        sqlstate::TOO_MANY_COLUMNS,
                        format!("VALUES lists can have at most {OUTPUT_COLUMNS_MAX} entries"),
                    ));
                }
                // Each column takes the common type of its values (untyped literals follow the others).
                let mut columns = Vec::with_capacity(width);
                for i in 0..width {
                    let values = rows
                        .iter_mut()
                        .map(|r| std::mem::replace(&mut r[i], Expr::literal(Value::Null, DataType::Text)));
                    let (values, data_type) = self.unify_results(values.collect(), "VALUES")?;
                    rows.iter_mut().zip(values).for_each(|(row, value)| row[i] = value);
                    columns.push(OutputColumn { name: format!("column{}", i + 1), data_type });
                }
                Ok(BoundQuery { plan: Plan::Values(rows), columns, tables: Vec::new() })
            }
            other => Err(unsupported(&format!("{other}"))),
        }
    }

    /// The two sides of a set operation brought to common column types (PostgreSQL's rules: untyped literals take
    /// the other side's type, numeric types meet in the wider one, anything else is 42804). A side whose types
    /// differ from the result's is cast to them: its rows must carry the result's types (a client reading binary
    /// results decodes by the column type, and the set operations compare values of one type).
    fn set_operation_sides(
        &self,
        mut left: BoundQuery,
        mut right: BoundQuery,
        keyword: &str,
    ) -> Result<SetSides, ExecError> {
        if left.columns.len() != right.columns.len() {
            return Err(ExecError::new(
                sqlstate::SYNTAX_ERROR,
                format!("each {keyword} query must have the same number of columns"),
            ));
        }
        // As in PostgreSQL, a column that is only untyped literals (`SELECT NULL UNION ALL SELECT 1`) takes the
        // other side's type.
        for index in 0..left.columns.len() {
            let (mine, theirs) = (left.columns[index].data_type, right.columns[index].data_type);
            if mine != theirs && !self.type_untyped_column(&mut left, index, theirs)? {
                self.type_untyped_column(&mut right, index, mine)?;
            }
        }
        let mut columns = left.columns.clone();
        for (mine, theirs) in columns.iter_mut().zip(&right.columns) {
            if mine.data_type != theirs.data_type {
                if !(mine.data_type.is_numeric() && theirs.data_type.is_numeric()) {
                    return Err(ExecError::new(
                        sqlstate::DATATYPE_MISMATCH,
                        format!("{keyword} types {} and {} cannot be matched", mine.data_type, theirs.data_type),
                    ));
                }
                mine.data_type = wider_numeric(mine.data_type, theirs.data_type);
            }
        }
        let cast_to_result = |side: Plan, side_columns: &[OutputColumn]| {
            if side_columns.iter().zip(&columns).all(|(s, u)| s.data_type == u.data_type) {
                return side;
            }
            let projection = side_columns
                .iter()
                .zip(&columns)
                .enumerate()
                .map(|(index, (s, u))| {
                    let column = Expr::Column { index, data_type: s.data_type };
                    if s.data_type == u.data_type {
                        column
                    } else {
                        Expr::Cast { expr: Box::new(column), to: u.data_type }
                    }
                })
                .collect();
            post(side, None, Some(projection), Dedup::No, Vec::new(), None, None)
        };
        let left_plan = cast_to_result(left.plan, &left.columns);
        let right_plan = cast_to_result(right.plan, &right.columns);
        let mut tables = left.tables;
        tables.extend(right.tables);
        Ok(SetSides { columns, left: left_plan, right: right_plan, tables })
    }

    /// Checks that a query's rows can be stored in columns of these names and types (PostgreSQL's assignment
    /// rules: the same type, numeric into numeric with a cast when stored, anything into text as its text, or
    /// untyped literals, which take the column's type).
    pub fn assign_types(&self, query: &mut BoundQuery, targets: &[(String, DataType)]) -> Result<(), ExecError> {
        for (index, (name, target)) in targets.iter().enumerate() {
            let source = query.columns[index].data_type;
            if source == *target || (source.is_numeric() && target.is_numeric()) {
                continue;
            }
            // Any value goes into a text column as its text (cast when stored).
            if !self.type_untyped_column(query, index, *target)? && *target != DataType::Text {
                return Err(ExecError::new(
                    sqlstate::DATATYPE_MISMATCH,
                    format!("column \"{name}\" is of type {target} but expression is of type {source}"),
                )
                .with_hint("You will need to rewrite or cast the expression."));
            }
        }
        Ok(())
    }

    /// Gives output column `index` of `query` the type `target` if it is nothing but untyped literals; whether
    /// it was.
    fn type_untyped_column(&self, query: &mut BoundQuery, index: usize, target: DataType) -> Result<bool, ExecError> {
        if !untyped_output(&query.plan, index) {
            return Ok(false);
        }
        self.type_untyped_output(&mut query.plan, index, target)?;
        query.columns[index].data_type = target;
        Ok(true)
    }

    /// Gives output column `index` of `plan`, which [`untyped_output`] accepted, the type `target`: every literal
    /// behind it is coerced (a quoted string that is not a valid `target` is 22P02, as in PostgreSQL).
    fn type_untyped_output(&self, plan: &mut Plan, index: usize, target: DataType) -> Result<(), ExecError> {
        let coerce = |expr: &mut Expr| -> Result<(), ExecError> {
            let untyped = std::mem::replace(expr, Expr::literal(Value::Null, target));
            *expr = self.coerce_to(untyped, target)?;
            Ok(())
        };
        match plan {
            Plan::Values(rows) => rows.iter_mut().try_for_each(|row| coerce(&mut row[index])),
            Plan::Scan(ScanPlan { output: ScanOutput::Rows(exprs), .. })
            | Plan::Lookup(LookupPlan { output: ScanOutput::Rows(exprs), .. }) => coerce(&mut exprs[index]),
            Plan::UnionAll(inputs) => inputs.iter_mut().try_for_each(|p| self.type_untyped_output(p, index, target)),
            Plan::Subqueries { main, .. } => self.type_untyped_output(main, index, target),
            Plan::Post { input, projection: None, .. } => self.type_untyped_output(input, index, target),
            Plan::Post { input, projection: Some(projection), .. } => match &mut projection[index] {
                Expr::Column { index: inner, data_type } => {
                    *data_type = target;
                    let inner = *inner;
                    self.type_untyped_output(input, inner, target)
                }
                expr => coerce(expr),
            },
            Plan::Aggregate { .. }
            | Plan::Scan(_)
            | Plan::Lookup(_)
            | Plan::Series(_)
            | Plan::Recursive { .. }
            | Plan::WorkingTable { .. }
            | Plan::SetOperation { .. }
            | Plan::Join(_)
            | Plan::Window { .. } => Ok(()),
        }
    }

    /// Binds the clauses of a SELECT over `scope` (a table, a subquery's rows, or nothing): WHERE, the select
    /// list (`*` is `wildcard`), GROUP BY, HAVING, ORDER BY, DISTINCT; aggregates are collected on the way.
    fn bind_select_clauses<'q>(
        &self,
        select: &Select,
        scope: &Scope<'_>,
        order_by: &[&'q ast::OrderByExpr],
        wildcard: Option<Vec<(Expr, String)>>,
    ) -> Result<SelectClauses<'q>, ExecError> {
        let names = match (scope.table, scope.derived) {
            _ if scope.joined.is_some() => scope.joined.map(JoinNames::visible_names).unwrap_or_default(),
            (Some(_), _) if scope.renamed.is_some() => scope.renamed.clone().unwrap_or_default(),
            (Some(table), _) => table.columns().iter().map(|c| c.name.clone()).collect(),
            (None, Some(columns)) => columns.iter().map(|c| c.name.clone()).collect(),
            (None, None) => Vec::new(),
        };
        let entries = match scope.joined {
            Some(joined) => joined.scope_entries(),
            None => vec![(scope.qualifier.clone(), names)],
        };
        self.scopes.borrow_mut().push(entries);
        let clauses = (|| -> Result<SelectClauses<'q>, ExecError> {
            // WHERE (no aggregates allowed).
            let filter = match &select.selection {
                Some(selection) => {
                    let bound = self.bind_expr(selection, scope)?;
                    Some(self.condition(bound, "WHERE")?)
                }
                None => None,
            };

            // The select list, expanded, with aggregates collected.
            *self.aggregates.borrow_mut() = Some(Vec::new());
            *self.windows.borrow_mut() = Some(Vec::new());
            *self.groupings.borrow_mut() = Some(Vec::new());
            let mut items: Vec<(Expr, String)> = Vec::new();
            // Output columns whose name a CASE took from its ELSE column: shown by that name, as PostgreSQL shows
            // them, but not what GROUP BY, ORDER BY or DISTINCT ON mean by it (they take the input column, as
            // DuckDB and most other systems do; PostgreSQL would take the CASE).
            let mut borrowed_names = Vec::new();
            for item in &select.projection {
                match item {
                    SelectItem::UnnamedExpr(expr) => {
                        if name_from_case(expr) {
                            borrowed_names.push(items.len());
                        }
                        items.push((self.bind_expr(expr, scope)?, column_name(expr)))
                    }
                    SelectItem::ExprWithAlias { expr, alias } => {
                        items.push((self.bind_expr(expr, scope)?, fold(alias)))
                    }
                    SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _)
                        if scope.joined.is_some() =>
                    {
                        let qualifier = object_name(name).last().cloned().unwrap_or_default();
                        items.extend(
                            scope.joined.map(|j| j.qualified_star(&qualifier)).transpose()?.unwrap_or_default(),
                        );
                    }
                    SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(name), _)
                        if object_name(name).last() != scope.qualifier.as_ref() =>
                    {
                        let qualifier = object_name(name).last().cloned().unwrap_or_default();
                        return Err(ExecError::new(
                            sqlstate::UNDEFINED_TABLE,
                            format!("missing FROM-clause entry for table \"{qualifier}\""),
                        ));
                    }
                    SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                        let columns = wildcard.as_ref().ok_or_else(|| {
                            ExecError::new(sqlstate::SYNTAX_ERROR, "SELECT * with no tables specified is not valid")
                        })?;
                        items.extend(columns.iter().cloned());
                    }
                    SelectItem::ExprWithAliases { .. } => return Err(unsupported("multiple aliases")),
                }
            }
            if items.len() > OUTPUT_COLUMNS_MAX {
                return Err(ExecError::new(
                    sqlstate::TOO_MANY_COLUMNS,
                    format!("target lists can have at most {OUTPUT_COLUMNS_MAX} entries"),
                ));
            }
            // The names GROUP BY, ORDER BY and DISTINCT ON can mean (a copy only when a CASE borrowed one).
            let referable: std::borrow::Cow<'_, [(Expr, String)]> = if borrowed_names.is_empty() {
                std::borrow::Cow::Borrowed(&items)
            } else {
                let mut referable = items.clone();
                borrowed_names.iter().for_each(|&i| referable[i].1.clear());
                std::borrow::Cow::Owned(referable)
            };
            // PostgreSQL reads ORDER BY before GROUP BY: a constant ORDER BY item that is no position is the
            // error it reports first.
            for item in order_by {
                if constant_item(&item.expr).is_some() {
                    self.select_list_reference(&item.expr, scope, &referable, true)?;
                }
            }
            let (group_by, sets, grouped) = match &select.group_by {
                GroupByExpr::Expressions(exprs, modifiers) if modifiers.is_empty() => {
                    let (keys, sets) = self.grouping_sets(exprs, scope, &referable)?;
                    (keys, sets, !exprs.is_empty())
                }
                GroupByExpr::Expressions(..) | GroupByExpr::All(_) => return Err(unsupported("this GROUP BY form")),
            };
            let having = match &select.having {
                Some(having) => {
                    let windows = self.windows.borrow_mut().take();
                    let bound = self.bind_expr(having, scope);
                    *self.windows.borrow_mut() = windows;
                    Some(self.condition(bound?, "HAVING")?)
                }
                None => None,
            };
            let mut sort_exprs = Vec::new();
            for item in order_by {
                sort_exprs.push((self.order_item(&item.expr, scope, &referable)?, &item.options));
            }
            if let Some(filter) = &filter
                && uses_aggregates(filter)
            {
                return Err(ExecError::new(sqlstate::GROUPING_ERROR, "aggregate functions are not allowed in WHERE"));
            }
            let distinct = match &select.distinct {
                None | Some(Distinct::All) => Dedup::No,
                Some(Distinct::Distinct) => Dedup::Rows,
                Some(Distinct::On(on)) => {
                    // The DISTINCT ON expressions are read as ORDER BY items are, and become the first sort keys:
                    // the ORDER BY must begin with them, in any order (42P10 otherwise, as in PostgreSQL), and
                    // those it leaves out follow it.
                    let on = on.iter().map(|e| self.order_item(e, scope, &referable)).collect::<Result<Vec<_>, _>>()?;
                    let mut missing = on.clone();
                    for (expr, _) in &sort_exprs {
                        if missing.is_empty() {
                            break;
                        }
                        let Some(position) = missing.iter().position(|m| m == expr) else {
                            return Err(ExecError::new(
                                sqlstate::INVALID_COLUMN_REFERENCE,
                                "SELECT DISTINCT ON expressions must match initial ORDER BY expressions",
                            ));
                        };
                        missing.remove(position);
                    }
                    sort_exprs.extend(missing.into_iter().map(|expr| (expr, &ASCENDING)));
                    Dedup::OnSortKeys(on.len())
                }
            };
            // Taken after DISTINCT ON, which may name them too.
            let aggregates = self.aggregates.borrow_mut().take().unwrap_or_default();
            let windows = self.windows.borrow_mut().take().unwrap_or_default();
            let groupings = self.groupings.borrow_mut().take().unwrap_or_default();
            if !groupings.is_empty() && !grouped && aggregates.is_empty() && having.is_none() {
                return Err(grouping_argument_error());
            }
            Ok(SelectClauses {
                filter,
                items,
                group_by,
                sets,
                groupings,
                grouped,
                having,
                sort_exprs,
                aggregates,
                windows,
                distinct,
            })
        })();
        // After an error the calls collected so far belong to no SELECT.
        *self.windows.borrow_mut() = None;
        *self.groupings.borrow_mut() = None;
        self.scopes.borrow_mut().pop();
        clauses
    }

    /// A subquery in FROM: its plan, its untyped columns made text and renamed by its alias list, and the name it
    /// goes by (its alias).
    fn plan_derived(&self, factor: &TableFactor) -> Result<(BoundQuery, Option<String>), ExecError> {
        let TableFactor::Derived { lateral, subquery, alias, .. } = factor else {
            return Err(ExecError::internal("not a subquery in FROM"));
        };
        if *lateral {
            return Err(unsupported("LATERAL"));
        }
        let mut inner = self.plan_query_inner(subquery)?;
        settle_untyped(&mut inner);
        if let Some(alias) = alias {
            rename_columns(&mut inner.columns, &alias.columns, &format!("table \"{}\"", fold(&alias.name)))?;
        }
        Ok((inner, alias.as_ref().map(|a| fold(&a.name))))
    }

    /// A SELECT over a subquery's rows (`FROM (SELECT …) AS s`): the same clauses as over a table, run on the
    /// subquery's result rather than inside a scan (WHERE as a filter on its rows, then [`Plan::Aggregate`]).
    fn plan_select_over(
        &self,
        select: &Select,
        inner: BoundQuery,
        qualifier: Option<String>,
        order_by: &[&ast::OrderByExpr],
        limit: Option<Expr>,
        offset: Option<Expr>,
    ) -> Result<BoundQuery, ExecError> {
        let scope = Scope { joined: None, table: None, renamed: None, derived: Some(&inner.columns), qualifier };
        let wildcard = inner
            .columns
            .iter()
            .enumerate()
            .map(|(index, c)| (Expr::Column { index, data_type: c.data_type }, c.name.clone()))
            .collect();
        let mut clauses = self.bind_select_clauses(select, &scope, order_by, Some(wildcard))?;
        let mut names: Vec<String> = inner.columns.iter().map(|c| c.name.clone()).collect();
        let mut inner_plan = inner.plan;
        if let Some(read) = clauses.columns_read(names.len()) {
            let (plan, kept) = without_unread_outputs(inner_plan, &read);
            inner_plan = plan;
            if let Some(kept) = kept {
                // The clauses read the kept outputs where they now are (other columns, past the input's, are
                // window functions' and GROUPING()'s values: they stay).
                let width = names.len();
                clauses.map_columns(&|index| {
                    if index < width { kept.iter().position(|&k| k == index).unwrap_or(index) } else { index }
                });
                names = kept.iter().map(|&k| names[k].clone()).collect();
            }
        }
        let (plan, columns) = plan_over_rows(inner_plan, &names, clauses, limit, offset)?;
        Ok(BoundQuery { plan, columns, tables: inner.tables })
    }

    fn plan_select(
        &self,
        select: &Select,
        order_by: &[&ast::OrderByExpr],
        limit: Option<Expr>,
        offset: Option<Expr>,
    ) -> Result<BoundQuery, ExecError> {
        // A LATERAL subquery in FROM becomes a plain one joined by the outer values it reads.
        if let Some(rewritten) = self.lateral_as_join(select) {
            return self.plan_select(&rewritten, order_by, limit, offset);
        }
        // Correlated EXISTS / NOT EXISTS / IN in WHERE become joins.
        if let Some(rewritten) = self.decorrelate(select) {
            return self.plan_select_join(&rewritten, order_by, limit, offset);
        }
        if select.from.len() > 1
            || select.from.iter().any(|f| !f.joins.is_empty() || matches!(f.relation, TableFactor::NestedJoin { .. }))
        {
            if select.into.is_some() {
                return Err(unsupported("SELECT INTO"));
            }
            return self.plan_select_join(select, order_by, limit, offset);
        }
        if select.into.is_some() {
            return Err(
                unsupported("SELECT INTO").with_hint("create the table, then load it with INSERT … VALUES or COPY")
            );
        }
        if select.top.is_some()
            || select.exclude.is_some()
            || select.prewhere.is_some()
            || select.qualify.is_some()
            || !select.lateral_views.is_empty()
            || !select.connect_by.is_empty()
            || !select.cluster_by.is_empty()
            || !select.distribute_by.is_empty()
            || !select.sort_by.is_empty()
            || !select.named_window.is_empty()
        {
            return Err(unsupported("this SELECT clause"));
        }
        // Window functions run over rows: a table's are produced as the join planner produces a relation's
        // (WHERE in the scan, only the named columns read).
        if matches!(select.from.first().map(|f| &f.relation), Some(TableFactor::Table { .. }))
            && join::mentions_over(select, order_by)
        {
            return self.plan_select_join(select, order_by, limit, offset);
        }
        let mut renamed = None;
        let (table, qualifier) = match select.from.first().map(|f| &f.relation) {
            None => (None, None),
            Some(factor @ TableFactor::Table { name, alias, .. }) => {
                check_table_factor(factor)?;
                let inner = match self.table_function(factor)? {
                    Some(inner) => Some(inner),
                    None => self.cte_or_view(name)?,
                };
                if let Some(mut inner) = inner {
                    let qualifier = match alias {
                        Some(alias) => {
                            rename_columns(
                                &mut inner.columns,
                                &alias.columns,
                                &format!("table \"{}\"", fold(&alias.name)),
                            )?;
                            fold(&alias.name)
                        }
                        None => object_name(name).last().cloned().unwrap_or_default(),
                    };
                    return self.plan_select_over(select, inner, Some(qualifier), order_by, limit, offset);
                }
                let table = self.source.resolve(name)?;
                let qualifier = match alias {
                    Some(alias) => {
                        if !alias.columns.is_empty() {
                            let mut columns: Vec<OutputColumn> = table
                                .columns()
                                .iter()
                                .map(|c| OutputColumn { name: c.name.clone(), data_type: c.data_type })
                                .collect();
                            let what = format!("table \"{}\"", fold(&alias.name));
                            rename_columns(&mut columns, &alias.columns, &what)?;
                            renamed = Some(columns.into_iter().map(|c| c.name).collect());
                        }
                        fold(&alias.name)
                    }
                    None => object_name(name).last().cloned().unwrap_or_default(),
                };
                (Some(table), Some(qualifier))
            }
            Some(factor @ TableFactor::Derived { .. }) => {
                let (inner, qualifier) = self.plan_derived(factor)?;
                return self.plan_select_over(select, inner, qualifier, order_by, limit, offset);
            }
            Some(_) => return Err(unsupported("this FROM item")),
        };
        if table.is_none() {
            // No FROM: the clauses run over one row of no columns, as in PostgreSQL (`SELECT 1 WHERE false` has no
            // row, `SELECT count(*)` counts the one).
            let one_row = BoundQuery { plan: Plan::Values(vec![Vec::new()]), columns: Vec::new(), tables: Vec::new() };
            return self.plan_select_over(select, one_row, None, order_by, limit, offset);
        }
        let wildcard = table.as_deref().map(|t| {
            t.columns()
                .iter()
                .enumerate()
                .map(|(index, c)| {
                    let name = renamed.as_ref().map_or(&c.name, |names: &Vec<String>| &names[index]);
                    (Expr::Column { index, data_type: c.data_type }, name.clone())
                })
                .collect::<Vec<_>>()
        });
        let scope = Scope { joined: None, table: table.as_deref(), renamed, derived: None, qualifier };

        let SelectClauses {
            filter,
            items,
            group_by,
            sets,
            groupings,
            grouped,
            having,
            sort_exprs,
            aggregates,
            windows,
            distinct,
        } = self.bind_select_clauses(select, &scope, order_by, wildcard)?;
        if !windows.is_empty() {
            return Err(ExecError::internal("window functions over a table are planned over its rows"));
        }
        let columns: Vec<OutputColumn> =
            items.iter().map(|(e, name)| OutputColumn { name: name.clone(), data_type: e.data_type() }).collect();
        let tables: Vec<Arc<Table>> = table.iter().cloned().collect();
        let Scope { renamed, .. } = scope;

        let Some(table) = table else {
            return Err(ExecError::internal("a SELECT without FROM is planned over one empty row"));
        };
        let plain = !grouped && aggregates.is_empty() && having.is_none();
        let (group_by, grouped, distinct) =
            distinct_as_grouping(group_by, grouped, distinct, &items, &sort_exprs, plain)?;

        if grouped || !aggregates.is_empty() || having.is_some() {
            // Rewrite everything above the aggregation over its output row: group keys, then aggregates.
            let names: Vec<String> = match renamed {
                Some(names) => names,
                None => table.columns().iter().map(|c| c.name.clone()).collect(),
            };
            let grouped_row = GroupedRow {
                keys: &group_by,
                aggregates: aggregates.len(),
                sets: sets.as_deref(),
                groupings: &groupings,
                names: &names,
            };
            let (projection, having, keys) = over_groups(&items, having.as_ref(), &sort_exprs, &grouped_row)?;
            let output = ScanOutput::Aggregate { group_by, aggregates, sets };
            let input = self.scan_or_lookup(&table, filter, output);
            let plan = Plan::Post {
                input: Box::new(input),
                filter: having,
                projection: Some(projection),
                distinct,
                order_by: keys,
                offset,
                limit,
                with_ties: false,
            };
            return Ok(BoundQuery { plan, columns, tables });
        }
        let projection: Vec<Expr> = items.into_iter().map(|(e, _)| e).collect();
        if sort_exprs.is_empty() && distinct == Dedup::No {
            let input = self.scan_or_lookup(&table, filter, ScanOutput::Rows(projection));
            let plan = post(input, None, None, Dedup::No, Vec::new(), offset, limit);
            return Ok(BoundQuery { plan, columns, tables });
        }
        if distinct == Dedup::Rows && sort_exprs.iter().any(|(e, _)| !projection.contains(e)) {
            return Err(distinct_order_error());
        }
        // The scan produces the columns the projection and the sort keys need; both are evaluated after it.
        let mut needed = Vec::new();
        projection.iter().for_each(|e| e.columns(&mut needed));
        sort_exprs.iter().for_each(|(e, _)| e.columns(&mut needed));
        needed.sort_unstable();
        let remap = |expr: &Expr| remap_columns(expr, &needed);
        let scan_output = ScanOutput::Rows(
            needed.iter().map(|&c| Expr::Column { index: c, data_type: table.columns()[c].data_type }).collect(),
        );
        let keys = sort_exprs.iter().map(|(e, options)| sort_key(remap(e), options)).collect();
        let input = self.scan_or_lookup(&table, filter, scan_output);
        let plan = Plan::Post {
            input: Box::new(input),
            filter: None,
            projection: Some(projection.iter().map(remap).collect()),
            distinct,
            order_by: keys,
            offset,
            limit,
            with_ties: false,
        };
        Ok(BoundQuery { plan, columns, tables })
    }

    /// A GROUP BY list: its keys (each distinct expression once) and, when it has `GROUPING SETS`, `ROLLUP` or
    /// `CUBE`, its grouping sets as positions in the keys. Items combine as PostgreSQL combines them: every set
    /// of one item with every set of the others (`GROUP BY a, ROLLUP(b)` is `(a, b), (a)`), duplicates kept. A
    /// list that makes a single set is a plain grouping by its keys (`None`). `()` is the empty set: it names no
    /// key, and groups every row into one group.
    #[allow(clippy::type_complexity)]
    fn grouping_sets(
        &self,
        items: &[ast::Expr],
        scope: &Scope<'_>,
        referable: &[(Expr, String)],
    ) -> Result<(Vec<Expr>, Option<Vec<Vec<usize>>>), ExecError> {
        let mut keys: Vec<Expr> = Vec::new();
        let mut key = |expr: &ast::Expr| -> Result<usize, ExecError> {
            let bound = self.group_item(expr, scope, referable)?;
            Ok(position_or_push(&mut keys, bound))
        };
        let mut sets = cross_sets(items, &mut key)?;
        for set in &mut sets {
            let mut seen = Vec::with_capacity(set.len());
            set.retain(|&key| {
                let new = !seen.contains(&key);
                seen.push(key);
                new
            });
        }
        let sets = (sets.len() > 1).then_some(sets);
        Ok((keys, sets))
    }

    /// A GROUP BY item: an ordinal or alias of the select list, or an expression.
    fn group_item(&self, expr: &ast::Expr, scope: &Scope<'_>, items: &[(Expr, String)]) -> Result<Expr, ExecError> {
        if let Some(item) = self.select_list_reference(expr, scope, items, false)? {
            if uses_windows(&item) {
                return Err(ExecError::new(sqlstate::WINDOWING_ERROR, "window functions are not allowed in GROUP BY"));
            }
            if uses_aggregates(&item) {
                return Err(ExecError::new(
                    sqlstate::GROUPING_ERROR,
                    "aggregate functions are not allowed in GROUP BY",
                ));
            }
            return Ok(item);
        }
        self.without_aggregates(|| self.bind_expr(expr, scope))
    }

    /// Runs `bind` with the current SELECT's aggregates and window functions set aside (they are not allowed
    /// there, or belong to another SELECT), then puts them back.
    fn without_aggregates<T>(&self, bind: impl FnOnce() -> T) -> T {
        let saved = self.aggregates.borrow_mut().take();
        let saved_windows = self.windows.borrow_mut().take();
        let saved_groupings = self.groupings.borrow_mut().take();
        let bound = bind();
        *self.aggregates.borrow_mut() = saved;
        *self.windows.borrow_mut() = saved_windows;
        *self.groupings.borrow_mut() = saved_groupings;
        bound
    }

    fn order_item(&self, expr: &ast::Expr, scope: &Scope<'_>, items: &[(Expr, String)]) -> Result<Expr, ExecError> {
        match self.select_list_reference(expr, scope, items, true)? {
            Some(item) => Ok(item),
            None => self.bind_expr(expr, scope),
        }
    }

    /// `ORDER BY 2` or `ORDER BY alias`: the select-list expression referred to. A bare name that is both an
    /// output column and an input column means the output column in ORDER BY (`for_order_by`) and the input
    /// column in GROUP BY, as in PostgreSQL.
    fn select_list_reference(
        &self,
        expr: &ast::Expr,
        scope: &Scope<'_>,
        items: &[(Expr, String)],
        for_order_by: bool,
    ) -> Result<Option<Expr>, ExecError> {
        match expr {
            // Parentheses change nothing (PostgreSQL's parse tree has none): `ORDER BY (x)` names x too.
            ast::Expr::Nested(_) | ast::Expr::Value(_) | ast::Expr::UnaryOp { op: UnaryOperator::Minus, .. }
                if let Some(constant) = constant_item(expr) =>
            {
                let clause = if for_order_by { "ORDER BY" } else { "GROUP BY" };
                let position = constant.map_err(|()| {
                    ExecError::new(sqlstate::SYNTAX_ERROR, format!("non-integer constant in {clause}"))
                })?;
                match usize::try_from(position) {
                    Ok(ordinal @ 1..) if ordinal <= items.len() => Ok(Some(items[ordinal - 1].0.clone())),
                    _ => Err(ExecError::new(
                        sqlstate::INVALID_COLUMN_REFERENCE,
                        format!("{clause} position {position} is not in select list"),
                    )),
                }
            }
            ast::Expr::Nested(inner) => self.select_list_reference(inner, scope, items, for_order_by),
            ast::Expr::Value(_) => Ok(None),
            ast::Expr::Identifier(ident) => {
                let name = fold(ident);
                // An input column by that name (a join's, a renamed table's included): GROUP BY means it.
                let is_input_column = match (scope.joined, &scope.renamed) {
                    (Some(joined), _) => joined.visible_names().contains(&name),
                    (None, Some(renamed)) => renamed.contains(&name),
                    (None, None) => {
                        scope.table.is_some_and(|t| t.column_index(&name).is_some())
                            || scope.derived.is_some_and(|columns| columns.iter().any(|c| c.name == name))
                    }
                };
                if is_input_column && !for_order_by {
                    return Ok(None);
                }
                let mut named = items.iter().filter(|(_, n)| *n == name).map(|(item, _)| item);
                match (named.next(), for_order_by) {
                    (Some(item), true) if named.any(|other| other != item) => {
                        Err(ExecError::new(sqlstate::AMBIGUOUS_COLUMN, format!("ORDER BY \"{name}\" is ambiguous")))
                    }
                    (item, _) => Ok(item.cloned()),
                }
            }
            _ => Ok(None),
        }
    }

    /// A scan, or an index lookup when `WHERE` pins an indexed column to a constant (`c = k`), else to one of a
    /// list of constants (`c IN (k1, k2, …)` or `c = k1 OR c = k2 …`, at most [`LOOKUP_LIST_KEYS`] of them).
    fn scan_or_lookup(&self, table: &Arc<Table>, filter: Option<Expr>, output: ScanOutput) -> Plan {
        if let Some(filter) = &filter {
            let mut conjuncts = Vec::new();
            flatten_and(filter.clone(), &mut conjuncts);
            let snapshot = table.snapshot();
            // An integer key of the other width is kept as it is: the index compares values, not widths, so a
            // BIGINT key beyond an INTEGER column's range finds nothing (PostgreSQL's `int4 = int8`), where a cast
            // to the column's type would fail with 22003.
            let fits = |key: &Expr, column_type: DataType| {
                key.is_constant()
                    && (key.data_type() == column_type || key.data_type().is_integer() && column_type.is_integer())
            };
            let equality = |conjunct: &Expr| {
                let Expr::Binary { op: BinaryOp::Eq, left, right, .. } = conjunct else { return None };
                match (left.as_ref(), right.as_ref()) {
                    (Expr::Column { index, data_type }, key) | (key, Expr::Column { index, data_type })
                        if fits(key, *data_type) =>
                    {
                        Some((*index, vec![key.clone()]))
                    }
                    _ => None,
                }
            };
            let listed = |conjunct: &Expr| match conjunct {
                Expr::InList { expr, list, negated: false }
                    if let Expr::Column { index, data_type } = expr.as_ref()
                        && list.len() <= LOOKUP_LIST_KEYS
                        && list.iter().all(|key| fits(key, *data_type)) =>
                {
                    Some((*index, list.clone()))
                }
                // `c = k1 OR c = k2 …`, the same list.
                Expr::Binary { op: BinaryOp::Or, .. } => {
                    let mut disjuncts = Vec::new();
                    flatten_or(conjunct, &mut disjuncts);
                    let mut pinned = disjuncts.into_iter().map(equality);
                    let (column, mut keys) = pinned.next()??;
                    for disjunct in pinned {
                        let (other, key) = disjunct?;
                        if other != column || keys.len() == LOOKUP_LIST_KEYS {
                            return None;
                        }
                        keys.extend(key);
                    }
                    Some((column, keys))
                }
                _ => None,
            };
            // An equality first: it finds the fewest rows.
            let pinned = (conjuncts.iter().enumerate())
                .filter_map(|(position, conjunct)| Some((position, equality(conjunct)?)))
                .chain(
                    (conjuncts.iter().enumerate())
                        .filter_map(|(position, conjunct)| Some((position, listed(conjunct)?))),
                );
            for (position, (column, keys)) in pinned {
                if snapshot.index_on(column).is_none() {
                    continue;
                }
                let mut rest = conjuncts.clone();
                rest.remove(position);
                let residual = rest.into_iter().reduce(|a, b| Expr::Binary {
                    op: BinaryOp::And,
                    left: Box::new(a),
                    right: Box::new(b),
                    data_type: DataType::Boolean,
                });
                return Plan::Lookup(LookupPlan {
                    table: Arc::clone(table),
                    column,
                    keys,
                    range: None,
                    residual,
                    output,
                });
            }
            if let Some((column, range, used)) =
                sorted_index_range(&conjuncts, &snapshot, Some(range_lookup_rows_max(snapshot.rows())))
            {
                let residual = (conjuncts.into_iter().enumerate())
                    .filter(|(position, _)| !used.contains(position))
                    .map(|(_, conjunct)| conjunct)
                    .reduce(|a, b| Expr::Binary {
                        op: BinaryOp::And,
                        left: Box::new(a),
                        right: Box::new(b),
                        data_type: DataType::Boolean,
                    });
                let range = Some(Box::new(range));
                return Plan::Lookup(LookupPlan {
                    table: Arc::clone(table),
                    column,
                    keys: Vec::new(),
                    range,
                    residual,
                    output,
                });
            }
        }
        Plan::Scan(ScanPlan { table: Arc::clone(table), filter, output, join_keys: None })
    }
}

/// The rows of an UPDATE or DELETE that an index can find ([`Binder::index_rows`]).
pub enum IndexedBy {
    /// Those whose key is one of these (constants or parameters).
    Keys(Vec<Expr>),
    /// Those whose key lies in this range, through a sorted index.
    Range(KeyRange),
}

/// A range on a column with a sorted index that the `conjuncts` of a WHERE clause bound with constants,
/// parameters or scalar subqueries (`c < 5`, `5 >= c`, `c BETWEEN $1 AND $2`, `c > (SELECT max(k) FROM u)`, several
/// of them tightened into one), when the index counts at most `most` rows in it: the column, the range and the
/// positions of the conjuncts it replaces. The count is taken now, from literal bounds, as PostgreSQL's planner
/// estimates from its statistics; with a parameter or a subquery as a bound it is taken as the statement runs, its
/// subqueries' values put in place first ([`KeyRange::scan_when_wide`]); with no `most`, not at all. A bound
/// that cannot be tightened with another (two parameters on one side) stays in the residual.
fn sorted_index_range(
    conjuncts: &[Expr],
    snapshot: &TableSnapshot,
    most: Option<u64>,
) -> Option<(usize, KeyRange, Vec<usize>)> {
    // A bound: its expression (a literal, or one of parameters and constants to evaluate as the statement runs)
    // and whether it is included.
    type Bound = Option<(Expr, bool)>;
    let fits = |expr: &Expr, column_type: DataType| {
        let data_type = expr.data_type();
        (data_type == column_type || data_type.is_integer() && column_type.is_integer())
            && (column_type.is_integer() || column_type == DataType::Text)
            && match expr {
                Expr::Literal { value, .. } => !value.is_null(),
                // A scalar subquery is run before the statement, and its value put in its place first.
                _ => {
                    expr.is_constant()
                        && !expr.any_node(&|node| {
                            matches!(node, Expr::Subquery { exists: true, .. } | Expr::QuantifiedSubquery { .. })
                        })
                }
            }
    };
    let bounds = |conjunct: &Expr| -> Option<(usize, Bound, Bound)> {
        match conjunct {
            Expr::Binary { op, left, right, .. } => {
                let (column, data_type, value, op) = match (left.as_ref(), right.as_ref()) {
                    (Expr::Column { index, data_type }, other) => (*index, *data_type, other, *op),
                    (other, Expr::Column { index, data_type }) => (*index, *data_type, other, op.flipped()),
                    _ => return None,
                };
                if !fits(value, data_type) {
                    return None;
                }
                let value = value.clone();
                match op {
                    BinaryOp::Lt => Some((column, None, Some((value, false)))),
                    BinaryOp::LtEq => Some((column, None, Some((value, true)))),
                    BinaryOp::Gt => Some((column, Some((value, false)), None)),
                    BinaryOp::GtEq => Some((column, Some((value, true)), None)),
                    _ => None,
                }
            }
            Expr::Between { expr, low, high, negated: false } => {
                let Expr::Column { index, data_type } = expr.as_ref() else { return None };
                if !fits(low, *data_type) || !fits(high, *data_type) {
                    return None;
                }
                Some((*index, Some((low.as_ref().clone(), true)), Some((high.as_ref().clone(), true))))
            }
            _ => None,
        }
    };
    // `bound` added to the side `current` holds: the tighter of two literals (the higher low, the lower high; at
    // equal values an excluded one), or `None` where they cannot be compared now.
    let merged = |current: &Bound, bound: Bound, low: bool| -> Option<Bound> {
        let literal = |b: &(Expr, bool)| match &b.0 {
            Expr::Literal { value, .. } => Some(value.clone()),
            _ => None,
        };
        match (current, bound) {
            (current, None) => Some(current.clone()),
            (None, bound) => Some(bound),
            (Some(a), Some(b)) => {
                let keep_a = match literal(a)?.sort_cmp(&literal(&b)?) {
                    std::cmp::Ordering::Equal => !a.1 || b.1,
                    std::cmp::Ordering::Greater => low,
                    std::cmp::Ordering::Less => !low,
                };
                Some(Some(if keep_a { a.clone() } else { b }))
            }
        }
    };
    let found: Vec<(usize, (usize, Bound, Bound))> =
        conjuncts.iter().enumerate().filter_map(|(position, c)| Some((position, bounds(c)?))).collect();
    let mut columns: Vec<usize> = found.iter().map(|(_, (column, ..))| *column).collect();
    columns.dedup();
    for column in columns {
        let Some(index) = snapshot.sorted_index_on(column) else {
            continue;
        };
        let (mut low, mut high, mut used) = (None, None, Vec::new());
        for (position, (_, l, h)) in found.iter().filter(|(_, (c, ..))| *c == column) {
            if let (Some(new_low), Some(new_high)) = (merged(&low, l.clone(), true), merged(&high, h.clone(), false)) {
                (low, high) = (new_low, new_high);
                used.push(*position);
            }
        }
        let mut range = KeyRange { low, high, scan_when_wide: false };
        range.scan_when_wide =
            [&range.low, &range.high].into_iter().flatten().any(|(bound, _)| !matches!(bound, Expr::Literal { .. }));
        if !range.scan_when_wide
            && let Some(most) = most
            && let Some((low, high)) = range.values(&[]).ok()?
            && index.count_range(low.as_ref(), high.as_ref(), most)? > most
        {
            continue;
        }
        return Some((column, range, used));
    }
    None
}

/// The wider of two numeric types.
fn wider_numeric(a: DataType, b: DataType) -> DataType {
    if a == DataType::Double || b == DataType::Double {
        DataType::Double
    } else if a == DataType::Numeric || b == DataType::Numeric {
        DataType::Numeric
    } else if a == DataType::BigInt || b == DataType::BigInt {
        DataType::BigInt
    } else {
        DataType::Integer
    }
}

fn mismatch(expr: &Expr, target: DataType) -> ExecError {
    ExecError::new(
        sqlstate::DATATYPE_MISMATCH,
        format!("expression is of type {} but {target} is expected", expr.data_type()),
    )
    .with_hint("You will need to rewrite or cast the expression.")
}

/// An ORDER BY item's options when none are written (ascending, NULLs last).
static ASCENDING: ast::OrderByOptions = ast::OrderByOptions { sort: None, nulls_first: None };

/// The ORDER BY inside a call's parentheses (`string_agg(s, ',' ORDER BY s)`), empty when there is none.
fn aggregate_order_by(function: &ast::Function) -> &[ast::OrderByExpr] {
    let FunctionArguments::List(list) = &function.args else { return &[] };
    list.clauses
        .iter()
        .find_map(|c| match c {
            ast::FunctionArgumentClause::OrderBy(items) => Some(items.as_slice()),
            _ => None,
        })
        .unwrap_or(&[])
}

/// An ORDER BY item with `USING <` / `USING >` turned into ASC / DESC (the only operators whose order numadb
/// knows), and anything it cannot honour refused rather than ignored.
fn plain_order_item(item: &ast::OrderByExpr) -> Result<ast::OrderByExpr, ExecError> {
    if item.with_fill.is_some() {
        return Err(unsupported("ORDER BY … WITH FILL"));
    }
    let mut item = item.clone();
    if let Some(ast::OrderBySort::Using(operator)) = &item.options.sort {
        item.options.sort = match object_name(operator).join(".").as_str() {
            "<" => Some(ast::OrderBySort::Asc),
            ">" => Some(ast::OrderBySort::Desc),
            // A comparison that orders nothing is the wrong kind of operator (42809, as in PostgreSQL); any
            // other is one numadb does not have.
            other @ ("=" | "<>" | "!=" | "<=" | ">=") => {
                return Err(ExecError::new(
                    sqlstate::WRONG_OBJECT_TYPE,
                    format!("operator {other} is not a valid ordering operator"),
                )
                .with_hint("Ordering operators must be \"<\" or \">\" members of btree operator families."));
            }
            other => {
                return Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, format!("operator does not exist: {other}"))
                    .with_hint("ordering operators must be \"<\" or \">\""));
            }
        };
    }
    Ok(item)
}

fn sort_key(expr: Expr, options: &ast::OrderByOptions) -> SortKey {
    let descending = matches!(options.sort, Some(ast::OrderBySort::Desc));
    SortKey { expr, descending, nulls_first: options.nulls_first.unwrap_or(descending) }
}

/// Refuses what numadb does not do with a table in FROM: table functions, TABLESAMPLE, WITH ORDINALITY, time
/// travel.
fn check_table_factor(factor: &TableFactor) -> Result<(), ExecError> {
    let TableFactor::Table { sample, with_ordinality, version, .. } = factor else { return Ok(()) };
    if sample.is_some() {
        return Err(unsupported("TABLESAMPLE"));
    }
    if *with_ordinality || version.is_some() {
        return Err(unsupported("WITH ORDINALITY or time travel"));
    }
    Ok(())
}

/// Makes a subquery's untyped output columns (`SELECT NULL AS v`, `SELECT 'a'`) text, as PostgreSQL resolves them
/// when the subquery is a relation in FROM or a `WITH` query: an enclosing UNION then no longer types them.
/// `query` with its named windows written out into the calls that use them (a copy only when it has some).
pub(crate) fn resolve_window_names(query: &Query) -> Result<Query, ExecError> {
    if window_names::any(query) { window_names::resolve(query.clone()) } else { Ok(query.clone()) }
}

pub(crate) fn settle_untyped(query: &mut BoundQuery) {
    let untyped: Vec<bool> = (0..query.columns.len()).map(|index| untyped_output(&query.plan, index)).collect();
    if !untyped.contains(&true) {
        return;
    }
    let projection = query
        .columns
        .iter_mut()
        .zip(untyped)
        .enumerate()
        .map(|(index, (column, untyped))| {
            let value = Expr::Column { index, data_type: column.data_type };
            if untyped {
                column.data_type = DataType::Text;
                Expr::Cast { expr: Box::new(value), to: DataType::Text }
            } else {
                value
            }
        })
        .collect();
    let input = std::mem::replace(&mut query.plan, Plan::Values(Vec::new()));
    query.plan = post(input, None, Some(projection), Dedup::No, Vec::new(), None, None);
}

/// Renames the first columns after a column alias list (`AS t(a, b)`); `what` names the relation in the error when
/// the list is longer than the columns.
fn rename_columns(
    columns: &mut [OutputColumn],
    aliases: &[ast::TableAliasColumnDef],
    what: &str,
) -> Result<(), ExecError> {
    if aliases.len() > columns.len() {
        return Err(ExecError::new(
            sqlstate::INVALID_COLUMN_REFERENCE,
            format!("{what} has {} columns available but {} columns specified", columns.len(), aliases.len()),
        ));
    }
    for (column, alias) in columns.iter_mut().zip(aliases) {
        if alias.data_type.is_some() {
            return Err(unsupported("a column definition list"));
        }
        column.name = fold(&alias.name);
    }
    Ok(())
}

fn post(
    input: Plan,
    filter: Option<Expr>,
    projection: Option<Vec<Expr>>,
    distinct: Dedup,
    order_by: Vec<SortKey>,
    offset: Option<Expr>,
    limit: Option<Expr>,
) -> Plan {
    if filter.is_none()
        && projection.is_none()
        && distinct == Dedup::No
        && order_by.is_empty()
        && offset.is_none()
        && limit.is_none()
    {
        return input;
    }
    Plan::Post { input: Box::new(input), filter, projection, distinct, order_by, offset, limit, with_ties: false }
}

/// An ORDER BY or GROUP BY item that is a constant as PostgreSQL's grammar leaves it, which makes it a position in
/// the select list: an integer (`2`, `(2)`, with any minus signs folded in: `-1`, `- (-7)`), or `Err` for any other
/// literal (a string, a fraction, an integer beyond 32 bits, a boolean, NULL), which PostgreSQL refuses. `None`:
/// not a constant item (`+1` and `1 + 1` are expressions, sorted or grouped by like any other).
fn constant_item(expr: &ast::Expr) -> Option<Result<i64, ()>> {
    match expr {
        ast::Expr::Nested(inner) => constant_item(inner),
        ast::Expr::Value(v) => Some(match &v.value {
            ast::Value::Number(n, _) => n.parse::<i32>().map(i64::from).map_err(|_| ()),
            _ => Err(()),
        }),
        ast::Expr::UnaryOp { op: UnaryOperator::Minus, expr: inner } => match constant_item(inner)? {
            Ok(n) => Some(Ok(-n)),
            // `-1.5`, `-'x'`: a negated fraction is still a non-integer constant; anything else is an expression.
            Err(()) => match inner.as_ref() {
                ast::Expr::Value(v) if matches!(v.value, ast::Value::Number(..)) => Some(Err(())),
                _ => None,
            },
        },
        _ => None,
    }
}

/// A result column's name, as PostgreSQL derives it.
fn column_name(expr: &ast::Expr) -> String {
    named(expr).0
}

/// Whether the expression's column name is one a CASE took from its ELSE column (`CASE … ELSE k END` is "k").
fn name_from_case(expr: &ast::Expr) -> bool {
    match expr {
        ast::Expr::Nested(inner) => name_from_case(inner),
        ast::Expr::Case { .. } => named(expr).1 == 2,
        ast::Expr::Cast { expr: inner, .. } => named(expr).1 == 2 && name_from_case(inner),
        _ => false,
    }
}

/// A result column's name and how strongly the expression gives it, as PostgreSQL's `FigureColname`: 2 for a name
/// taken from the expression (a column, a function), 1 for a generic one (`case`, a cast's type), 0 for none
/// (`?column?`). A cast or a CASE passes on a strong name from inside (`abs(x)::text` is "abs", `CASE … ELSE k
/// END` is "k"), which ORDER BY then finds as an output column, as in PostgreSQL.
fn named(expr: &ast::Expr) -> (String, u8) {
    let strong = |name: &str| (name.to_string(), 2);
    match expr {
        ast::Expr::Identifier(ident) => (fold(ident), 2),
        ast::Expr::CompoundIdentifier(parts) => (parts.last().map(fold).unwrap_or_default(), 2),
        ast::Expr::Function(f) => (object_name(&f.name).last().cloned().unwrap_or_default(), 2),
        ast::Expr::Nested(inner) => named(inner),
        // Functions SQL writes with keywords are named as PostgreSQL names them.
        ast::Expr::Floor { .. } => strong("floor"),
        ast::Expr::Ceil { .. } => strong("ceil"),
        ast::Expr::Substring { shorthand: true, .. } => strong("substr"),
        ast::Expr::Substring { .. } => strong("substring"),
        ast::Expr::Position { .. } => strong("position"),
        ast::Expr::Trim { trim_where: Some(TrimWhereField::Leading), .. } => strong("ltrim"),
        ast::Expr::Trim { trim_where: Some(TrimWhereField::Trailing), .. } => strong("rtrim"),
        ast::Expr::Trim { .. } => strong("btrim"),
        ast::Expr::Exists { .. } => strong("exists"),
        // A scalar subquery's column is named as its one output column is (`(SELECT max(x) …)` is "max").
        ast::Expr::Subquery(query) => match query.body.as_ref() {
            ast::SetExpr::Select(select) => match select.projection.as_slice() {
                [SelectItem::UnnamedExpr(expr)] => named(expr),
                [SelectItem::ExprWithAlias { alias, .. }] => (fold(alias), 2),
                _ => ("?column?".to_string(), 0),
            },
            _ => ("?column?".to_string(), 0),
        },
        ast::Expr::Cast { expr, data_type, .. } => match named(expr) {
            (name, 2) => (name, 2),
            _ => (cast_column_name(data_type), 1),
        },
        // A COLLATE clause is no expression of its own: the column keeps the name of what it applies to.
        ast::Expr::Collate { expr, .. } => named(expr),
        ast::Expr::Case { else_result, .. } => match else_result.as_deref().map(named) {
            Some((name, 2)) => (name, 2),
            _ => ("case".to_string(), 1),
        },
        _ => ("?column?".to_string(), 0),
    }
}

/// PostgreSQL's name for a cast's column: the type's internal name (`x::integer` is `int4`).
fn cast_column_name(sql: &ast::DataType) -> String {
    use ast::DataType as T;
    match sql {
        T::SmallInt(_) | T::Int2(_) => "int2".into(),
        T::Int(_) | T::Int4(_) | T::Integer(_) => "int4".into(),
        T::BigInt(_) | T::Int8(_) => "int8".into(),
        T::Double(_) | T::DoublePrecision | T::Float8 => "float8".into(),
        T::Real | T::Float4 => "float4".into(),
        // `float(p)` is a float4 up to 24 binary digits, a float8 beyond (and without p).
        T::Float(ast::ExactNumberInfo::Precision(digits)) if *digits <= 24 => "float4".into(),
        T::Float(_) => "float8".into(),
        T::Varchar(_) | T::CharacterVarying(_) => "varchar".into(),
        T::Char(_) | T::Character(_) => "bpchar".into(),
        T::Bool | T::Boolean => "bool".into(),
        T::Custom(name, _) => match object_name(name).last().map(String::as_str) {
            Some("smallint") => "int2".into(),
            Some("int" | "integer") => "int4".into(),
            Some("bigint") => "int8".into(),
            Some("boolean") => "bool".into(),
            Some(other) => other.into(),
            None => sql.to_string().to_lowercase(),
        },
        other => other.to_string().to_lowercase(),
    }
}

/// The position of `call` among `calls`, added at the end if it is not there (a call written twice is one).
fn position_or_push<T: PartialEq>(calls: &mut Vec<T>, call: T) -> usize {
    match calls.iter().position(|c| *c == call) {
        Some(index) => index,
        None => {
            calls.push(call);
            calls.len() - 1
        }
    }
}

fn uses_windows(expr: &Expr) -> bool {
    let mut columns = Vec::new();
    expr.columns(&mut columns);
    columns.iter().any(|&c| (WINDOW_BASE..AGGREGATE_BASE).contains(&c))
}

fn uses_aggregates(expr: &Expr) -> bool {
    let mut columns = Vec::new();
    expr.columns(&mut columns);
    columns.iter().any(|&c| c >= AGGREGATE_BASE)
}

fn flatten_and(expr: Expr, out: &mut Vec<Expr>) {
    match expr {
        Expr::Binary { op: BinaryOp::And, left, right, .. } => {
            flatten_and(*left, out);
            flatten_and(*right, out);
        }
        other => out.push(other),
    }
}

/// The operands of an OR tree, left to right.
fn flatten_or<'e>(expr: &'e Expr, out: &mut Vec<&'e Expr>) {
    match expr {
        Expr::Binary { op: BinaryOp::Or, left, right, .. } => {
            flatten_or(left, out);
            flatten_or(right, out);
        }
        other => out.push(other),
    }
}

/// A SELECT's clauses, bound.
/// The clauses of a SELECT run over rows that an input plan produces (a subquery's, a join's): WHERE as a filter
/// on them, then [`Plan::Aggregate`] when the query is grouped, then the rest. `names` are the input's column
/// names, for errors. Returns the plan and the result columns.
fn plan_over_rows(
    input: Plan,
    names: &[String],
    clauses: SelectClauses<'_>,
    limit: Option<Expr>,
    offset: Option<Expr>,
) -> Result<(Plan, Vec<OutputColumn>), ExecError> {
    let SelectClauses {
        filter,
        items,
        group_by,
        sets,
        groupings,
        grouped,
        having,
        sort_exprs,
        aggregates,
        windows,
        distinct,
    } = clauses;
    let columns: Vec<OutputColumn> =
        items.iter().map(|(e, name)| OutputColumn { name: name.clone(), data_type: e.data_type() }).collect();
    let mut input = input;
    let mut filter = filter;
    let scans_rows = matches!(&input, Plan::Scan(ScanPlan { output: ScanOutput::Rows(_), join_keys: None, .. }));
    // DISTINCT over a scan's rows is grouped in its tasks, as over a table (below).
    let plain = !grouped && aggregates.is_empty() && having.is_none() && windows.is_empty() && scans_rows;
    let (group_by, grouped, distinct) = distinct_as_grouping(group_by, grouped, distinct, &items, &sort_exprs, plain)?;
    let aggregated = grouped || !aggregates.is_empty() || having.is_some();
    if let Plan::Scan(scan @ ScanPlan { output: ScanOutput::Rows(_), join_keys: None, .. }) = &mut input {
        let ScanOutput::Rows(projections) = &scan.output else { unreachable!("matched above") };
        let projections = projections.clone();
        // The rows are a scan's that only projects (a subquery in FROM such as `(SELECT c % 10 AS g FROM t)`, a
        // view): WHERE joins the scan's filter, after the subquery's own, so that it runs in the scan's tasks
        // over the table's columns instead of on the session thread over gathered rows. Not when it reads a
        // volatile column (`random() AS r … WHERE r < 0.5` must keep the value it returns).
        if let Some(outer) = filter.take_if(|f| !reads_volatile(f, &projections)) {
            let outer = substitute_columns(&outer, &projections);
            scan.filter = Some(match scan.filter.take() {
                Some(inner) => fold_boolean(vec![inner, outer], BinaryOp::And),
                None => outer,
            });
        }
        // So does the aggregation: the scan aggregates in its tasks, as over a table.
        if aggregated && windows.is_empty() && filter.is_none() {
            let over_table = |e: &Expr| substitute_columns(e, &projections);
            let exprs_read_volatile = items
                .iter()
                .map(|(e, _)| e)
                .chain(&group_by)
                .chain(groupings.iter().flatten())
                .chain(&having)
                .chain(sort_exprs.iter().map(|(e, _)| e))
                .any(|e| reads_volatile(e, &projections))
                || aggregates.iter().any(|a| {
                    let mut volatile = false;
                    let _ = a.try_map_exprs(&mut |e| {
                        volatile |= reads_volatile(e, &projections);
                        Ok(e.clone())
                    });
                    volatile
                });
            if !exprs_read_volatile {
                let table_names: Vec<String> = scan.table.columns().iter().map(|c| c.name.clone()).collect();
                let keys: Vec<Expr> = group_by.iter().map(over_table).collect();
                let table_groupings: Vec<Vec<Expr>> =
                    groupings.iter().map(|call| call.iter().map(over_table).collect()).collect();
                let table_items: Vec<(Expr, String)> = items.iter().map(|(e, n)| (over_table(e), n.clone())).collect();
                let grouped_row = GroupedRow {
                    keys: &keys,
                    aggregates: aggregates.len(),
                    sets: sets.as_deref(),
                    groupings: &table_groupings,
                    names: &table_names,
                };
                let table_having = having.as_ref().map(over_table);
                let table_sorts: Vec<(Expr, &ast::OrderByOptions)> =
                    sort_exprs.iter().map(|(e, options)| (over_table(e), *options)).collect();
                // Over the table's columns an error would name them rather than the subquery's: such a query is
                // planned over the rows, which says it as PostgreSQL does.
                if let Ok((projection, having, keys_sorted)) =
                    over_groups(&table_items, table_having.as_ref(), &table_sorts, &grouped_row)
                {
                    let aggregates = aggregates
                        .iter()
                        .map(|a| a.try_map_exprs(&mut |e| Ok(over_table(e))))
                        .collect::<Result<Vec<_>, ExecError>>()?;
                    scan.output = ScanOutput::Aggregate { group_by: keys, aggregates, sets };
                    let plan = post(input, having, Some(projection), distinct, keys_sorted, offset, limit);
                    return Ok((plan, columns));
                }
            }
        }
    }
    if let Plan::Scan(ScanPlan { output: ScanOutput::Rows(projections), .. }) = &mut input {
        // A subquery's column no clause reads is not computed (nor its table's columns read), as PostgreSQL
        // leaves it out: `SELECT k FROM (SELECT k, 1 / 0 AS g FROM t) s` raises nothing. It stays a NULL in its
        // place, so that the other columns keep their numbers.
        let mut used = Vec::new();
        let mut note = |e: &Expr| {
            e.columns(&mut used);
            Ok::<_, ExecError>(e.clone())
        };
        for expr in filter.iter().chain(items.iter().map(|(e, _)| e)).chain(&group_by).chain(groupings.iter().flatten())
        {
            note(expr)?;
        }
        for expr in having.iter().chain(sort_exprs.iter().map(|(e, _)| e)) {
            note(expr)?;
        }
        for aggregate in &aggregates {
            aggregate.try_map_exprs(&mut note)?;
        }
        for call in &windows {
            call.try_map_exprs(&mut note)?;
        }
        for (index, projection) in projections.iter_mut().enumerate() {
            if !used.contains(&index) {
                *projection = Expr::literal(Value::Null, projection.data_type());
            }
        }
    }
    let plan = post(input, filter, None, Dedup::No, Vec::new(), None, None);
    // Window functions run over the rows after WHERE, grouping and HAVING, before the select list; their values
    // are appended to those rows, at `width` on.
    let with_windows = |plan: Plan, windows: Vec<WindowCall>, width: usize| {
        let placed = move |expr: &Expr| {
            map_columns(expr, &|index| match index {
                _ if (WINDOW_BASE..AGGREGATE_BASE).contains(&index) => width + index - WINDOW_BASE,
                _ => index,
            })
        };
        let plan = if windows.is_empty() { plan } else { Plan::Window { input: Box::new(plan), calls: windows } };
        (plan, placed)
    };
    // HAVING alone also makes the query grouped: one group of every row, as in PostgreSQL.
    let plan = if grouped || !aggregates.is_empty() || having.is_some() {
        let grouped_row = GroupedRow {
            keys: &group_by,
            aggregates: aggregates.len(),
            sets: sets.as_deref(),
            groupings: &groupings,
            names,
        };
        let (projection, having, keys) = over_groups(&items, having.as_ref(), &sort_exprs, &grouped_row)?;
        let width = grouped_row.width();
        let windows = windows
            .iter()
            .map(|call| call.try_map_exprs(&mut |e| grouped_row.rewrite(e)))
            .collect::<Result<Vec<_>, _>>()?;
        let input = Plan::Aggregate { input: Box::new(plan), group_by, aggregates, sets };
        if windows.is_empty() {
            post(input, having, Some(projection), distinct, keys, offset, limit)
        } else {
            let input = post(input, having, None, Dedup::No, Vec::new(), None, None);
            let (input, placed) = with_windows(input, windows, width);
            let projection = projection.iter().map(&placed).collect();
            let keys = keys.into_iter().map(|key| SortKey { expr: placed(&key.expr), ..key }).collect();
            post(input, None, Some(projection), distinct, keys, offset, limit)
        }
    } else {
        let (plan, placed) = with_windows(plan, windows, names.len());
        let projection: Vec<Expr> = items.iter().map(|(e, _)| placed(e)).collect();
        let sort_exprs: Vec<(Expr, _)> = sort_exprs.iter().map(|(e, options)| (placed(e), *options)).collect();
        if distinct == Dedup::Rows && sort_exprs.iter().any(|(e, _)| !projection.contains(e)) {
            return Err(distinct_order_error());
        }
        let keys = sort_exprs.into_iter().map(|(e, options)| sort_key(e, options)).collect();
        post(plan, None, Some(projection), distinct, keys, offset, limit)
    };
    Ok((plan, columns))
}

struct SelectClauses<'q> {
    filter: Option<Expr>,
    items: Vec<(Expr, String)>,
    /// Every grouping key, once.
    group_by: Vec<Expr>,
    /// Grouping sets (positions in `group_by`), when there are several.
    sets: Option<Vec<Vec<usize>>>,
    /// The arguments of each `GROUPING(…)` call; [`GROUPING_BASE`] + i in the other clauses is call i's value.
    groupings: Vec<Vec<Expr>>,
    /// Whether there is a GROUP BY clause (`group_by` is empty for `GROUP BY ()`).
    grouped: bool,
    having: Option<Expr>,
    sort_exprs: Vec<(Expr, &'q ast::OrderByOptions)>,
    aggregates: Vec<AggregateCall>,
    /// Window function calls; [`WINDOW_BASE`] + i in the other clauses is call i's value.
    windows: Vec<WindowCall>,
    distinct: Dedup,
}

impl SelectClauses<'_> {
    /// Which of the input row's `width` columns the clauses read, if that is sure: not where an expression holds
    /// a subquery (which could read the row in ways its column references do not show).
    fn columns_read(&mut self, width: usize) -> Option<Vec<bool>> {
        let mut subquery = false;
        let mut check = |expr: &Expr| subquery |= contains_subquery(expr);
        self.filter.iter().chain(self.items.iter().map(|(e, _)| e)).for_each(&mut check);
        self.group_by.iter().chain(self.groupings.iter().flatten()).chain(&self.having).for_each(&mut check);
        self.sort_exprs.iter().map(|(e, _)| e).for_each(&mut check);
        for aggregate in &self.aggregates {
            let _ = aggregate.try_map_exprs(&mut |e| {
                check(e);
                Ok(e.clone())
            });
        }
        for call in &self.windows {
            let _ = call.try_map_exprs(&mut |e| {
                check(e);
                Ok(e.clone())
            });
        }
        if subquery {
            return None;
        }
        // Every column reference, found by renumbering each column as itself.
        let read = RefCell::new(vec![false; width]);
        self.map_columns(&|index| {
            if let Some(read) = read.borrow_mut().get_mut(index) {
                *read = true;
            }
            index
        });
        Some(read.into_inner())
    }

    /// Reads every column `i` of the input row as column `map(i)`.
    fn map_columns(&mut self, map: &dyn Fn(usize) -> usize) {
        let over = |expr: &mut Expr| *expr = map_columns(expr, map);
        self.filter.iter_mut().for_each(over);
        self.items.iter_mut().for_each(|(expr, _)| over(expr));
        self.group_by.iter_mut().for_each(over);
        self.groupings.iter_mut().flatten().for_each(over);
        self.having.iter_mut().for_each(over);
        self.sort_exprs.iter_mut().for_each(|(expr, _)| over(expr));
        for aggregate in &mut self.aggregates {
            match aggregate.try_map_exprs(&mut |e| Ok(map_columns(e, map))) {
                Ok(mapped) => *aggregate = mapped,
                Err(never) => unreachable!("renumbering cannot fail: {never}"),
            }
        }
        for call in &mut self.windows {
            match call.try_map_exprs(&mut |e| Ok(map_columns(e, map))) {
                Ok(mapped) => *call = mapped,
                Err(never) => unreachable!("renumbering cannot fail: {never}"),
            }
        }
    }
}

fn distinct_order_error() -> ExecError {
    ExecError::new(
        sqlstate::INVALID_COLUMN_REFERENCE,
        "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
    )
}

/// The select list, HAVING and ORDER BY rewritten over an aggregation's output rows (group keys, then aggregates).
#[allow(clippy::type_complexity)]
fn over_groups(
    items: &[(Expr, String)],
    having: Option<&Expr>,
    sort_exprs: &[(Expr, &ast::OrderByOptions)],
    grouped: &GroupedRow<'_>,
) -> Result<(Vec<Expr>, Option<Expr>, Vec<SortKey>), ExecError> {
    let projection = items.iter().map(|(e, _)| grouped.rewrite(e)).collect::<Result<Vec<_>, _>>()?;
    let having = having.map(|e| grouped.rewrite(e)).transpose()?;
    let keys = sort_exprs
        .iter()
        .map(|(e, options)| Ok(sort_key(grouped.rewrite(e)?, options)))
        .collect::<Result<_, ExecError>>()?;
    Ok((projection, having, keys))
}

/// `e1 op e2 op …` for AND or OR (`exprs` is not empty).
fn fold_boolean(exprs: Vec<Expr>, op: BinaryOp) -> Expr {
    let mut exprs = exprs.into_iter();
    let first = exprs.next().expect("at least one operand");
    exprs.fold(first, |left, right| Expr::Binary {
        op,
        left: Box::new(left),
        right: Box::new(right),
        data_type: DataType::Boolean,
    })
}

/// An aggregation's output row, as the clauses above it read it: the group keys, then the aggregates, then (with
/// grouping sets) the position of the row's set.
struct GroupedRow<'a> {
    keys: &'a [Expr],
    aggregates: usize,
    sets: Option<&'a [Vec<usize>]>,
    /// The arguments of the `GROUPING(…)` calls.
    groupings: &'a [Vec<Expr>],
    /// The input's column names, for errors.
    names: &'a [String],
}

impl GroupedRow<'_> {
    /// The columns of the row.
    fn width(&self) -> usize {
        self.keys.len() + self.aggregates + usize::from(self.sets.is_some())
    }

    /// Rewrites an expression over input columns (and aggregate and GROUPING placeholders) into one over the
    /// row: a group key becomes its column, an aggregate its column after the keys.
    fn rewrite(&self, expr: &Expr) -> Result<Expr, ExecError> {
        if let Some(position) = self.keys.iter().position(|g| g == expr) {
            return Ok(Expr::Column { index: position, data_type: expr.data_type() });
        }
        match expr {
            Expr::Column { index, data_type } if *index >= AGGREGATE_BASE => {
                Ok(Expr::Column { index: self.keys.len() + index - AGGREGATE_BASE, data_type: *data_type })
            }
            // A window function's value: placed after the aggregation's columns later.
            Expr::Column { index, .. } if *index >= WINDOW_BASE => Ok(expr.clone()),
            Expr::Column { index, .. } if *index >= GROUPING_BASE => self.grouping(*index - GROUPING_BASE),
            Expr::Column { index, .. } => {
                let name = self.names.get(*index).map_or("?", String::as_str);
                Err(ExecError::new(
                    sqlstate::GROUPING_ERROR,
                    format!("column \"{name}\" must appear in the GROUP BY clause or be used in an aggregate function"),
                ))
            }
            _ => expr.try_map_children(&mut |e| self.rewrite(e)),
        }
    }

    /// The value of `GROUPING(…)` call `call`: per grouping set, a bit per argument (the first the highest) set
    /// where that key is not in the set. Known per set when the query is planned, so it is a CASE over the
    /// row's set column; 0 without grouping sets.
    fn grouping(&self, call: usize) -> Result<Expr, ExecError> {
        let positions = self.groupings[call]
            .iter()
            .map(|argument| self.keys.iter().position(|key| key == argument).ok_or_else(grouping_argument_error))
            .collect::<Result<Vec<usize>, _>>()?;
        let integer = |value: i64| Expr::literal(Value::Int(value), DataType::Integer);
        let Some(sets) = self.sets else { return Ok(integer(0)) };
        let set_column = Expr::Column { index: self.keys.len() + self.aggregates, data_type: DataType::Integer };
        let branches = sets
            .iter()
            .enumerate()
            .filter_map(|(position, set)| {
                let value = positions.iter().fold(0i64, |bits, key| (bits << 1) | i64::from(!set.contains(key)));
                let condition = Expr::Binary {
                    op: BinaryOp::Eq,
                    left: Box::new(set_column.clone()),
                    right: Box::new(integer(position as i64)),
                    data_type: DataType::Boolean,
                };
                (value != 0).then(|| (condition, integer(value)))
            })
            .collect::<Vec<_>>();
        if branches.is_empty() {
            return Ok(integer(0));
        }
        Ok(Expr::Case { branches, otherwise: Box::new(integer(0)), data_type: DataType::Integer })
    }
}

/// The grouping sets of a list of GROUP BY items: every set of one item with every set of the others (a plain
/// expression is one set of itself), keys numbered by `key`.
fn cross_sets(
    items: &[ast::Expr],
    key: &mut dyn FnMut(&ast::Expr) -> Result<usize, ExecError>,
) -> Result<Vec<Vec<usize>>, ExecError> {
    let mut sets: Vec<Vec<usize>> = vec![Vec::new()];
    for item in items {
        let item_sets = item_sets(item, key)?;
        if sets.len().saturating_mul(item_sets.len()) > GROUPING_SETS_MAX {
            return Err(ExecError::new(
                sqlstate::STATEMENT_TOO_COMPLEX,
                "too many grouping sets present (maximum 4096)",
            ));
        }
        sets = sets.iter().flat_map(|set| item_sets.iter().map(move |more| [set.as_slice(), more].concat())).collect();
    }
    Ok(sets)
}

/// The grouping sets of one GROUP BY item. Inside `GROUPING SETS (…)` sqlparser reads a nested `ROLLUP (…)` or
/// `CUBE (…)` as a call of a function of that name; it is taken as PostgreSQL takes it.
fn item_sets(
    item: &ast::Expr,
    key: &mut dyn FnMut(&ast::Expr) -> Result<usize, ExecError>,
) -> Result<Vec<Vec<usize>>, ExecError> {
    // A ROLLUP's or CUBE's elements: each a list of keys that stay together.
    let mut elements = |lists: &[Vec<ast::Expr>]| -> Result<Vec<Vec<usize>>, ExecError> {
        lists.iter().map(|list| list.iter().map(&mut *key).collect()).collect()
    };
    Ok(match item {
        ast::Expr::Tuple(exprs) if exprs.is_empty() => vec![Vec::new()],
        ast::Expr::GroupingSets(lists) => {
            let mut sets = Vec::new();
            for list in lists {
                sets.extend(cross_sets(list, key)?);
                if sets.len() > GROUPING_SETS_MAX {
                    return Err(ExecError::new(
                        sqlstate::STATEMENT_TOO_COMPLEX,
                        "too many grouping sets present (maximum 4096)",
                    ));
                }
            }
            sets
        }
        ast::Expr::Rollup(lists) => {
            let elements = elements(lists)?;
            (0..=elements.len()).rev().map(|length| elements[..length].concat()).collect()
        }
        ast::Expr::Cube(lists) => {
            if lists.len() > CUBE_ELEMENTS_MAX {
                return Err(ExecError::new(sqlstate::TOO_MANY_COLUMNS, "CUBE is limited to 12 elements"));
            }
            let elements = elements(lists)?;
            // Every subset, the whole first and the empty one last (subset `mask` leaves out the elements whose
            // bits are set).
            (0..1usize << elements.len())
                .map(|mask| {
                    let kept = elements.iter().enumerate().filter(|(i, _)| mask & (1 << i) == 0);
                    kept.flat_map(|(_, keys)| keys.iter().copied()).collect()
                })
                .collect()
        }
        ast::Expr::Function(function) if nested_grouping_construct(function).is_some() => {
            let lists: Vec<Vec<ast::Expr>> = match &function.args {
                ast::FunctionArguments::List(list) => list
                    .args
                    .iter()
                    .map(|arg| match arg {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Tuple(items))) => items.clone(),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Nested(inner))) => {
                            vec![(**inner).clone()]
                        }
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(expr)) => vec![expr.clone()],
                        _ => Vec::new(),
                    })
                    .collect(),
                _ => Vec::new(),
            };
            let construct = match nested_grouping_construct(function) {
                Some(true) => ast::Expr::Rollup(lists),
                _ => ast::Expr::Cube(lists),
            };
            item_sets(&construct, key)?
        }
        expr => vec![vec![key(expr)?]],
    })
}

/// Whether a call is a `ROLLUP (…)` (`Some(true)`) or `CUBE (…)` (`Some(false)`) that sqlparser read as a function
/// call inside `GROUPING SETS`.
fn nested_grouping_construct(function: &ast::Function) -> Option<bool> {
    let [ast::ObjectNamePart::Identifier(name)] = function.name.0.as_slice() else { return None };
    if name.quote_style.is_some() || function.over.is_some() || function.filter.is_some() {
        return None;
    }
    match name.value.to_ascii_lowercase().as_str() {
        "rollup" => Some(true),
        "cube" => Some(false),
        _ => None,
    }
}

fn grouping_argument_error() -> ExecError {
    ExecError::new(
        sqlstate::GROUPING_ERROR,
        "arguments to GROUPING must be grouping expressions of the associated query level",
    )
}

/// `SELECT DISTINCT` without aggregates, as a grouping by the select list's expressions (each once): the scan's
/// tasks group their rows (partial tables per domain, merged) where DISTINCT took every row to the session thread.
/// The same rows come out: DISTINCT and GROUP BY compare values alike (NULLs equal). Returns the grouping keys,
/// whether the query is grouped, and the deduplication left to do.
/// `plain`: the query has no GROUP BY, aggregate or HAVING of its own.
fn distinct_as_grouping(
    group_by: Vec<Expr>,
    grouped: bool,
    distinct: Dedup,
    items: &[(Expr, String)],
    sort_exprs: &[(Expr, &ast::OrderByOptions)],
    plain: bool,
) -> Result<(Vec<Expr>, bool, Dedup), ExecError> {
    // No columns (`SELECT DISTINCT FROM t`, which PostgreSQL's grammar refuses and numadb's parser takes) would be
    // a grouping by no keys: one row even of no rows.
    if distinct != Dedup::Rows || !plain || items.is_empty() {
        return Ok((group_by, grouped, distinct));
    }
    if sort_exprs.iter().any(|(e, _)| !items.iter().any(|(item, _)| item == e)) {
        return Err(distinct_order_error());
    }
    let mut keys: Vec<Expr> = Vec::with_capacity(items.len());
    for (item, _) in items {
        if !keys.contains(item) {
            keys.push(item.clone());
        }
    }
    Ok((keys, true, Dedup::No))
}

/// Whether `expr` holds a subquery.
fn contains_subquery(expr: &Expr) -> bool {
    matches!(expr, Expr::Subquery { .. } | Expr::QuantifiedSubquery { .. })
        || expr.try_map_children(&mut |e| if contains_subquery(e) { Err(()) } else { Ok(e.clone()) }).is_err()
}

/// A subquery in FROM's plan without the work for the outputs the query over it does not read (`read`), as
/// PostgreSQL's planner leaves them out (`remove_unused_subquery_outputs`, which makes them NULL): over a scan
/// that groups, the outputs not read are dropped (unless volatile), and an aggregate nothing reads any more is not
/// computed. So `SELECT count(*), sum(n) FROM (SELECT g, count(*) AS n, sum(x) FROM t GROUP BY g) s` does not add
/// up `sum(x)` per group, nor keep its state. Not with DISTINCT (which compares every output) nor grouping sets.
/// Returns the plan and, when outputs were dropped, the positions of those kept (the query over it reads them
/// there). Made NULL rather than dropped, the outputs made every row grow by a value: 200 000 rows took 28 ms
/// instead of 1 to project.
fn without_unread_outputs(plan: Plan, read: &[bool]) -> (Plan, Option<Vec<usize>>) {
    let Plan::Post {
        input,
        filter,
        projection: Some(projection),
        distinct: Dedup::No,
        order_by,
        offset,
        limit,
        with_ties,
    } = plan
    else {
        return (plan, None);
    };
    let post = |input: Plan, projection: Vec<Expr>, filter: Option<Expr>, order_by: Vec<SortKey>| Plan::Post {
        input: Box::new(input),
        filter,
        projection: Some(projection),
        distinct: Dedup::No,
        order_by,
        offset: offset.clone(),
        limit: limit.clone(),
        with_ties,
    };
    let Plan::Scan(mut scan) = *input else { return (post(*input, projection, filter, order_by), None) };
    let ScanOutput::Aggregate { group_by, aggregates, sets: None } = &mut scan.output else {
        return (post(Plan::Scan(scan), projection, filter, order_by), None);
    };
    if projection.len() != read.len() {
        return (post(Plan::Scan(scan), projection, filter, order_by), None);
    }
    let kept: Vec<usize> = (0..projection.len()).filter(|&i| read[i] || projection[i].is_volatile()).collect();
    let mut projection: Vec<Expr> = kept.iter().map(|&i| projection[i].clone()).collect();
    // The aggregates the post-processing still reads (its select list, HAVING and ORDER BY); without GROUP BY,
    // all of them (the one row of no aggregates is not one the scan makes).
    let keys = group_by.len();
    let mut columns = Vec::new();
    projection.iter().chain(&filter).chain(order_by.iter().map(|key| &key.expr)).for_each(|e| e.columns(&mut columns));
    let used: Vec<usize> = (0..aggregates.len()).filter(|j| keys == 0 || columns.contains(&(keys + j))).collect();
    let (mut filter, mut order_by) = (filter, order_by);
    if used.len() < aggregates.len() {
        let count = aggregates.len();
        let map = |index: usize| match index.checked_sub(keys) {
            Some(j) if j < count => keys + used.iter().position(|&k| k == j).unwrap_or(j),
            _ => index,
        };
        *aggregates = used.iter().map(|&j| aggregates[j].clone()).collect();
        projection = projection.iter().map(|e| map_columns(e, &map)).collect();
        filter = filter.map(|e| map_columns(&e, &map));
        order_by = order_by.into_iter().map(|key| SortKey { expr: map_columns(&key.expr, &map), ..key }).collect();
    }
    let dropped = kept.len() < read.len();
    (post(Plan::Scan(scan), projection, filter, order_by), dropped.then_some(kept))
}

/// `expr` over a scan's input (the table's columns) where it was over the scan's output `projections`: each column
/// `i` replaced by `projections[i]`. Columns past them (aggregates', window functions' values) stay.
fn substitute_columns(expr: &Expr, projections: &[Expr]) -> Expr {
    match expr {
        Expr::Column { index, .. } if *index < projections.len() => projections[*index].clone(),
        _ => {
            match expr.try_map_children(&mut |e| Ok::<_, std::convert::Infallible>(substitute_columns(e, projections)))
            {
                Ok(mapped) => mapped,
                Err(never) => match never {},
            }
        }
    }
}

/// Whether `expr` reads one of `projections` that is volatile: substituted, it would be evaluated again.
fn reads_volatile(expr: &Expr, projections: &[Expr]) -> bool {
    let mut columns = Vec::new();
    expr.columns(&mut columns);
    columns.iter().any(|&c| projections.get(c).is_some_and(Expr::is_volatile))
}

/// Renumbers column references to positions in `columns` (the scan's output).
fn remap_columns(expr: &Expr, columns: &[usize]) -> Expr {
    map_columns(expr, &|index| columns.iter().position(|c| *c == index).unwrap_or(index))
}

/// `expr` with every column `i` read as column `map(i)`.
fn map_columns(expr: &Expr, map: &dyn Fn(usize) -> usize) -> Expr {
    match expr {
        Expr::Column { index, data_type } => Expr::Column { index: map(*index), data_type: *data_type },
        _ => match expr.try_map_children(&mut |e| Ok::<_, std::convert::Infallible>(map_columns(e, map))) {
            Ok(mapped) => mapped,
            Err(never) => match never {},
        },
    }
}

/// Whether an operator is one of the six comparisons.
pub(crate) fn is_comparison(op: &BinaryOperator) -> bool {
    matches!(
        op,
        BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq
    )
}

/// The operator of a binary expression numadb evaluates.
fn binary_op(op: &BinaryOperator) -> Result<BinaryOp, ExecError> {
    Ok(match op {
        BinaryOperator::Plus => BinaryOp::Add,
        BinaryOperator::Minus => BinaryOp::Sub,
        BinaryOperator::Multiply => BinaryOp::Mul,
        BinaryOperator::Divide => BinaryOp::Div,
        BinaryOperator::Modulo => BinaryOp::Mod,
        BinaryOperator::Eq => BinaryOp::Eq,
        BinaryOperator::NotEq => BinaryOp::NotEq,
        BinaryOperator::Lt => BinaryOp::Lt,
        BinaryOperator::LtEq => BinaryOp::LtEq,
        BinaryOperator::Gt => BinaryOp::Gt,
        BinaryOperator::GtEq => BinaryOp::GtEq,
        BinaryOperator::And => BinaryOp::And,
        BinaryOperator::Or => BinaryOp::Or,
        BinaryOperator::StringConcat => BinaryOp::Concat,
        other => return Err(unsupported(&format!("the operator {other}"))),
    })
}

/// Output columns of a SELECT, at most (PostgreSQL's limit; the protocol counts them in 16 bits).
const OUTPUT_COLUMNS_MAX: usize = 1664;
/// Parameters of a statement, at most (the protocol counts them in 16 bits).
const PARAMS_MAX: usize = 65535;

/// Whether output column `index` of `plan` is nothing but untyped literals (NULL or quoted strings), traced through
/// projections and UNION ALL inputs to the rows that produce it. Sorting, filtering, DISTINCT, INTERSECT or EXCEPT on
/// the way make it typed (they have compared the values as text already).
fn untyped_output(plan: &Plan, index: usize) -> bool {
    let literal = |expr: &Expr| matches!(expr, Expr::Literal { value: Value::Null | Value::Text(_), .. });
    match plan {
        Plan::Values(rows) => rows.iter().all(|row| literal(&row[index])),
        Plan::Scan(ScanPlan { output: ScanOutput::Rows(exprs), .. })
        | Plan::Lookup(LookupPlan { output: ScanOutput::Rows(exprs), .. }) => literal(&exprs[index]),
        Plan::UnionAll(inputs) => inputs.iter().all(|p| untyped_output(p, index)),
        Plan::Subqueries { main, .. } => untyped_output(main, index),
        Plan::Post { input, filter: None, projection, distinct: Dedup::No, order_by, .. } if order_by.is_empty() => {
            match projection.as_ref().map(|p| &p[index]) {
                None => untyped_output(input, index),
                Some(Expr::Column { index: inner, .. }) => untyped_output(input, *inner),
                Some(expr) => literal(expr),
            }
        }
        Plan::Post { .. }
        | Plan::Aggregate { .. }
        | Plan::Scan(_)
        | Plan::Lookup(_)
        | Plan::Series(_)
        | Plan::Recursive { .. }
        | Plan::WorkingTable { .. }
        | Plan::SetOperation { .. }
        | Plan::Join(_)
        | Plan::Window { .. } => false,
    }
}

/// Whether `expr` is a number with signs before it, in parentheses or not (`-(-1)`, `(+2)`): what PostgreSQL's
/// parser folds into one constant.
fn signed_number(expr: &ast::Expr) -> bool {
    use ast::Expr as E;
    match expr {
        E::Value(v) => matches!(v.value, ast::Value::Number(..)),
        E::Nested(inner) | E::UnaryOp { op: UnaryOperator::Minus | UnaryOperator::Plus, expr: inner } => {
            signed_number(inner)
        }
        _ => false,
    }
}

/// `x op c` for an integer `x` and a number literal `c` the engine holds as a double (it has a fraction, or is
/// beyond BIGINT), as `x op' k` with an integer `k`: PostgreSQL's numeric `c` compared exactly, where comparing
/// doubles would round a BIGINT past 2^53 (`b < 9223372036854775808` is TRUE for BIGINT's largest value, whose
/// double is 2^63). `c` is given as its floor and whether it is whole ([`exact_number`]). A comparison always
/// FALSE is `x > i64::MAX`, always TRUE `x <= i64::MAX` (both NULL for a NULL `x`). `None` for an operator that
/// compares nothing.
fn integer_against_number(op: BinaryOp, (floor, whole): (i128, bool)) -> Option<(BinaryOp, i64)> {
    use BinaryOp::*;
    const NEVER: (BinaryOp, i64) = (Gt, i64::MAX);
    const ALWAYS: (BinaryOp, i64) = (LtEq, i64::MAX);
    if !matches!(op, Eq | NotEq | Lt | LtEq | Gt | GtEq) {
        return None;
    }
    let above_every_integer = floor > i128::from(i64::MAX) || floor == i128::from(i64::MAX) && !whole;
    Some(if above_every_integer {
        if matches!(op, Lt | LtEq | NotEq) { ALWAYS } else { NEVER }
    } else if floor < i128::from(i64::MIN) {
        if matches!(op, Gt | GtEq | NotEq) { ALWAYS } else { NEVER }
    } else if whole {
        (op, floor as i64)
    } else {
        // Between two integers: `x < 2.5` is `x <= 2`, `x >= 2.5` is `x > 2`; `=` is never TRUE.
        match op {
            Lt | LtEq => (LtEq, floor as i64),
            Gt | GtEq => (Gt, floor as i64),
            Eq => NEVER,
            _ => ALWAYS,
        }
    })
}

/// A number literal's floor and whether it is whole, read from its digits (`9007199254740993.0` is whole and
/// odd, though its double is even). `None` for a literal with an exponent (then [`number_of_double`]).
fn exact_number(expr: &ast::Expr) -> Option<(i128, bool)> {
    use ast::Expr as E;
    match expr {
        E::Value(v) => match &v.value {
            ast::Value::Number(text, _) if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') => {
                let (whole_digits, fraction) = text.split_once('.').unwrap_or((text, ""));
                let whole_digits = whole_digits.trim_start_matches('0');
                // Past 30 digits only "beyond BIGINT" matters.
                let floor = if whole_digits.len() > 30 { 10i128.pow(30) } else { whole_digits.parse().unwrap_or(0) };
                Some((floor, fraction.bytes().all(|b| b == b'0')))
            }
            _ => None,
        },
        E::Nested(inner) | E::UnaryOp { op: UnaryOperator::Plus, expr: inner } => exact_number(inner),
        E::UnaryOp { op: UnaryOperator::Minus, expr: inner } => {
            exact_number(inner).map(|(floor, whole)| if whole { (-floor, true) } else { (-floor - 1, false) })
        }
        _ => None,
    }
}

/// A double's floor and whether it is whole, as [`exact_number`] gives a literal's.
fn number_of_double(c: f64) -> (i128, bool) {
    let huge = 10i128.pow(30);
    if c.is_nan() || c >= 1e30 {
        (huge, true)
    } else if c <= -1e30 {
        (-huge, true)
    } else {
        (c.floor() as i128, c.fract() == 0.0)
    }
}

/// The parser's spelling of a comparison operator.
fn ast_comparison(op: BinaryOp) -> BinaryOperator {
    match op {
        BinaryOp::Eq => BinaryOperator::Eq,
        BinaryOp::NotEq => BinaryOperator::NotEq,
        BinaryOp::Lt => BinaryOperator::Lt,
        BinaryOp::LtEq => BinaryOperator::LtEq,
        BinaryOp::Gt => BinaryOperator::Gt,
        _ => BinaryOperator::GtEq,
    }
}

/// `-x ^ y` rewritten as `(-x) ^ y`: in PostgreSQL a sign binds tighter than `^` (`-2 ^ 2` is 4), while the
/// parser takes the sign over the whole power. The sign goes to the leftmost operand of a chain (`-2 ^ 3 ^ 2` is
/// `((-2) ^ 3) ^ 2`, `^` being left-associative); a parenthesized power (`-(2 ^ 2)`) is left alone.
fn sign_under_caret(expr: &ast::Expr) -> Option<ast::Expr> {
    use ast::Expr as E;
    let E::UnaryOp { op: op @ (UnaryOperator::Minus | UnaryOperator::Plus), expr: inner } = expr else { return None };
    fn push_down(op: UnaryOperator, expr: &ast::Expr) -> Option<ast::Expr> {
        let E::BinaryOp { left, op: BinaryOperator::PGExp, right } = expr else { return None };
        let left = push_down(op, left).unwrap_or_else(|| E::UnaryOp { op, expr: left.clone() });
        Some(E::BinaryOp { left: Box::new(left), op: BinaryOperator::PGExp, right: right.clone() })
    }
    push_down(*op, inner)
}

/// `NOT EXISTS (…) IS …` rewritten as `NOT (EXISTS (…) IS …)`: in PostgreSQL NOT binds looser than IS, while the
/// parser takes `NOT EXISTS` as one operand.
fn not_exists_under_is(expr: &ast::Expr) -> Option<ast::Expr> {
    use ast::Expr as E;
    let (E::IsNull(inner)
    | E::IsNotNull(inner)
    | E::IsTrue(inner)
    | E::IsNotTrue(inner)
    | E::IsFalse(inner)
    | E::IsNotFalse(inner)
    | E::IsUnknown(inner)
    | E::IsNotUnknown(inner)) = expr
    else {
        return None;
    };
    let E::Exists { subquery, negated: true } = inner.as_ref() else { return None };
    let positive = Box::new(E::Exists { subquery: subquery.clone(), negated: false });
    let is = match expr {
        E::IsNull(_) => E::IsNull(positive),
        E::IsNotNull(_) => E::IsNotNull(positive),
        E::IsTrue(_) => E::IsTrue(positive),
        E::IsNotTrue(_) => E::IsNotTrue(positive),
        E::IsFalse(_) => E::IsFalse(positive),
        E::IsNotFalse(_) => E::IsNotFalse(positive),
        E::IsUnknown(_) => E::IsUnknown(positive),
        _ => E::IsNotUnknown(positive),
    };
    Some(E::UnaryOp { op: UnaryOperator::Not, expr: Box::new(is) })
}

/// A LIMIT or OFFSET count written as a decimal number (`LIMIT 2.5`, `-0.5`), rounded half away from zero as
/// PostgreSQL rounds that numeric to a BIGINT (numadb's decimal literals are doubles, whose cast rounds half to
/// even: 2 rows where PostgreSQL returns 3); `None` for any other count. Without an exponent it is rounded on its
/// digits, so `2.4999999999999999` (2.5 as a double) stays 2.
fn decimal_count_rounded(count: &ast::Expr) -> Option<ast::Expr> {
    match count {
        ast::Expr::Value(value) => match &value.value {
            ast::Value::Number(text, long) if text.contains(['.', 'e', 'E']) => {
                let rounded = match text.split_once('.') {
                    Some((whole, fraction)) if !text.contains(['e', 'E']) => {
                        let whole = if whole.is_empty() { "0" } else { whole };
                        let up = fraction.bytes().next().is_some_and(|digit| digit >= b'5');
                        if up { increment_digits(whole)? } else { whole.to_string() }
                    }
                    _ => {
                        let rounded = text.parse::<f64>().ok()?.round();
                        if !rounded.is_finite() {
                            return None;
                        }
                        format!("{rounded:.0}")
                    }
                };
                Some(ast::Expr::Value(ast::Value::Number(rounded, *long).into()))
            }
            _ => None,
        },
        ast::Expr::UnaryOp { op: op @ (ast::UnaryOperator::Minus | ast::UnaryOperator::Plus), expr } => {
            Some(ast::Expr::UnaryOp { op: *op, expr: Box::new(decimal_count_rounded(expr)?) })
        }
        ast::Expr::Nested(inner) => decimal_count_rounded(inner),
        _ => None,
    }
}

/// A whole number written in decimal digits, plus one (`None` if it is not digits alone).
fn increment_digits(digits: &str) -> Option<String> {
    if !digits.bytes().all(|digit| digit.is_ascii_digit()) {
        return None;
    }
    let mut out: Vec<u8> = digits.bytes().collect();
    for digit in out.iter_mut().rev() {
        if *digit == b'9' {
            *digit = b'0';
        } else {
            *digit += 1;
            return String::from_utf8(out).ok();
        }
    }
    out.insert(0, b'1');
    String::from_utf8(out).ok()
}
