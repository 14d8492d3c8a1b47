//! Physical plans: what the SQL layer hands to the executor.

use std::fmt::Write as _;
use std::ops::Bound;
use std::sync::Arc;

use numadb_storage::{DataType, Partition, Table, Value};

use crate::aggregate::AggregateCall;
use crate::error::ExecError;
use crate::expr::{BinaryOp, Expr};
use crate::keys::KeySet;
use crate::window::WindowCall;

/// What a scan produces.
#[derive(Debug, Clone)]
pub enum ScanOutput {
    /// One row per selected row: these expressions over the table's columns.
    Rows(Vec<Expr>),
    /// One row per group: the group-by values, then the aggregates.
    Aggregate {
        /// Group keys over the table's columns (empty: one group).
        group_by: Vec<Expr>,
        /// Aggregates over the table's columns.
        aggregates: Vec<AggregateCall>,
        /// Grouping sets, as in [`Plan::Aggregate`]: the tasks group by every key, and each set's groups are
        /// rolled up from those when the partials are merged.
        sets: Option<Vec<Vec<usize>>>,
    },
}

/// A filtered scan of a table, split into morsel tasks that prefer the domain holding their partition.
#[derive(Clone)]
pub struct ScanPlan {
    /// The table.
    pub table: Arc<Table>,
    /// `WHERE`, over the table's columns.
    pub filter: Option<Expr>,
    /// What to produce.
    pub output: ScanOutput,
    /// Keys of a join's other input that `column` must be one of (a join hands these to its probing scan as the
    /// statement runs; `None` from the binder).
    pub join_keys: Option<JoinKeys>,
}

/// Keys a join hands the scan of one of its inputs: that input's rows whose key column is none of the other
/// input's keys cannot have a partner, so the scan drops them a block at a time ([`crate::filter::Filter::IntKeys`]).
#[derive(Clone)]
pub struct JoinKeys {
    /// The scanned table's key column.
    pub column: usize,
    /// The other input's keys.
    pub keys: Arc<KeySet>,
    /// The other input's rows by key, when the scan's tasks also join their rows with them and aggregate the
    /// joined rows (an aggregate over an inner join): the scan's output is then over the joined rows.
    pub probe: Option<Arc<crate::run::JoinProbe>>,
}

/// A lookup through an index (`WHERE key = value`), run on the calling thread.
#[derive(Clone)]
pub struct LookupPlan {
    /// The table.
    pub table: Arc<Table>,
    /// The indexed column.
    pub column: usize,
    /// The keys (constants or parameters): one for `c = k`, those of the list for `c IN (k1, k2, …)`. A row is
    /// found once however many of them it has. Empty for a range lookup.
    pub keys: Vec<Expr>,
    /// The bounds of a range lookup through a sorted index (`c < 5`, `c BETWEEN 1 AND 9`, `c >= 'm' AND c < 'n'`):
    /// constants, each `None` where the range is open.
    pub range: Option<Box<KeyRange>>,
    /// The rest of `WHERE`, checked on the rows found.
    pub residual: Option<Expr>,
    /// What to produce.
    pub output: ScanOutput,
}

/// The bounds of an index range lookup.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRange {
    /// The lower bound: the constant (or parameter) and whether it is included.
    pub low: Option<(Expr, bool)>,
    /// The upper bound.
    pub high: Option<(Expr, bool)>,
    /// Whether a bound is a parameter, so that how many rows the index finds is known only as the statement runs:
    /// [`Plan::chosen`] then counts them and scans the table instead where they are too many
    /// ([`range_lookup_rows_max`]), as PostgreSQL plans a prepared statement for its parameters' values.
    pub scan_when_wide: bool,
}

/// Most rows a range lookup through a sorted index may find, as a share of the table's (`1 / RANGE_LOOKUP_SHARE`,
/// and at least [`RANGE_LOOKUP_ROWS_MIN`]): each row found is a few cache misses on the calling thread, where a
/// scan streams the column on every worker. On the thesis tables (50 million rows, 2 workers) a scan filtering
/// one column takes 10-20 ms, about as long as looking up some 30 000 rows one by one.
pub const RANGE_LOOKUP_SHARE: u64 = 2048;
/// See [`RANGE_LOOKUP_SHARE`].
pub const RANGE_LOOKUP_ROWS_MIN: u64 = 16;

/// Most rows a range lookup may find among a table's `rows` and still beat a scan ([`RANGE_LOOKUP_SHARE`]).
pub fn range_lookup_rows_max(rows: u64) -> u64 {
    (rows / RANGE_LOOKUP_SHARE).max(RANGE_LOOKUP_ROWS_MIN)
}

/// A range's bounds as values: low, high.
pub type KeyBounds = (Bound<Value>, Bound<Value>);

impl KeyRange {
    /// Whether a bound reads a subquery's result, which is put in its place before the statement runs.
    pub fn reads_subquery(&self) -> bool {
        [&self.low, &self.high]
            .into_iter()
            .flatten()
            .any(|(bound, _)| bound.any_node(&|node| matches!(node, Expr::Subquery { .. })))
    }

    /// The bounds' values for `params`, as the index takes them; `None` where a bound is NULL (a comparison with
    /// NULL is never true, so the range holds nothing).
    pub fn values(&self, params: &[Value]) -> Result<Option<KeyBounds>, ExecError> {
        let bound = |bound: &Option<(Expr, bool)>| -> Result<Option<Bound<Value>>, ExecError> {
            Ok(match bound {
                None => Some(Bound::Unbounded),
                Some((expr, included)) => match expr.eval(&[], params)? {
                    Value::Null => None,
                    value if *included => Some(Bound::Included(value)),
                    value => Some(Bound::Excluded(value)),
                },
            })
        };
        Ok(bound(&self.low)?.zip(bound(&self.high)?))
    }

    /// The range as conditions on `column` of `table` (`c >= low AND c < high`), `None` when it is open on both
    /// sides: what a scan filters where the lookup is not taken.
    fn conditions(&self, table: &Table, column: usize) -> Option<Expr> {
        let data_type = table.columns().get(column).map_or(DataType::Integer, |c| c.data_type);
        let condition = |(bound, included): &(Expr, bool), inclusive: BinaryOp, exclusive: BinaryOp| Expr::Binary {
            op: if *included { inclusive } else { exclusive },
            left: Box::new(Expr::Column { index: column, data_type }),
            right: Box::new(bound.clone()),
            data_type: DataType::Boolean,
        };
        let low = self.low.as_ref().map(|b| condition(b, BinaryOp::GtEq, BinaryOp::Gt));
        let high = self.high.as_ref().map(|b| condition(b, BinaryOp::LtEq, BinaryOp::Lt));
        low.into_iter().chain(high).reduce(and)
    }
}

/// `a AND b`.
fn and(a: Expr, b: Expr) -> Expr {
    Expr::Binary { op: BinaryOp::And, left: Box::new(a), right: Box::new(b), data_type: DataType::Boolean }
}

impl LookupPlan {
    /// Whether it is a range lookup that may yet be a scan ([`KeyRange::scan_when_wide`]).
    pub fn waits_for_params(&self) -> bool {
        self.range.as_ref().is_some_and(|range| range.scan_when_wide)
    }

    /// The scan that finds the same rows: the range's conditions and the residual as its filter.
    pub fn as_scan(&self) -> ScanPlan {
        let range = self.range.as_ref().and_then(|range| range.conditions(&self.table, self.column));
        ScanPlan {
            table: Arc::clone(&self.table),
            filter: range.into_iter().chain(self.residual.clone()).reduce(and),
            output: self.output.clone(),
            join_keys: None,
        }
    }

    /// Whether the lookup is to run for `params` rather than [`LookupPlan::as_scan`]: always, but for a range whose
    /// bounds are parameters ([`KeyRange::scan_when_wide`]), where the sorted index counts the rows first.
    pub fn pays(&self, params: &[Value]) -> Result<bool, ExecError> {
        let Some(range) = self.range.as_ref().filter(|_| self.waits_for_params()) else { return Ok(true) };
        let Some((low, high)) = range.values(params)? else { return Ok(true) };
        let snapshot = self.table.snapshot();
        let index =
            snapshot.sorted_index_on(self.column).ok_or_else(|| ExecError::internal("the planned index is gone"))?;
        let most = range_lookup_rows_max(snapshot.rows());
        Ok(index.count_range(low.as_ref(), high.as_ref(), most).is_some_and(|found| found <= most))
    }
}

/// An `ORDER BY` key, over the input of the [`Plan::Post`] node.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    /// The expression.
    pub expr: Expr,
    /// `DESC`.
    pub descending: bool,
    /// Where NULLs go (PostgreSQL: last for ascending, first for descending).
    pub nulls_first: bool,
}

/// A `generate_series` call: its arguments are constants or parameters, evaluated when the statement runs.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesPlan {
    /// The first value.
    pub start: Expr,
    /// The bound (included when the steps land on it).
    pub stop: Expr,
    /// The step (1 when not given); 0 is an error.
    pub step: Expr,
    /// INTEGER or BIGINT, as the arguments' types make it.
    pub data_type: DataType,
}

/// What a [`Plan::Post`] removes as duplicates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dedup {
    /// Nothing.
    No,
    /// `DISTINCT`: rows equal to an earlier projected row.
    Rows,
    /// `DISTINCT ON (…)`: rows whose first `n` ORDER BY keys equal those of an earlier row in sorted order (the
    /// binder puts the DISTINCT ON expressions first among the keys, as PostgreSQL requires them to be).
    OnSortKeys(usize),
}

/// A set operation other than `UNION` (which is `UNION ALL`, then `DISTINCT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetOp {
    /// Rows in both inputs.
    Intersect,
    /// Rows of the left input not in the right one.
    Except,
}

impl SetOp {
    /// The SQL keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            SetOp::Intersect => "INTERSECT",
            SetOp::Except => "EXCEPT",
        }
    }
}

/// Which rows of a join's inputs appear without a partner (with NULLs for the other side's columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinKind {
    /// None: `[INNER] JOIN`, `CROSS JOIN`, a comma in FROM.
    Inner,
    /// The left input's.
    Left,
    /// The right input's.
    Right,
    /// Both inputs'.
    Full,
}

impl JoinKind {
    /// The SQL words.
    pub fn keyword(self) -> &'static str {
        match self {
            JoinKind::Inner => "Inner",
            JoinKind::Left => "Left",
            JoinKind::Right => "Right",
            JoinKind::Full => "Full",
        }
    }
}

/// A join of two inputs' rows: each output row is a left row's columns, then a right row's.
#[derive(Clone)]
pub struct JoinPlan {
    /// Which rows without a partner appear.
    pub kind: JoinKind,
    /// The left input.
    pub left: Box<Plan>,
    /// The right input (the hash table is built on it).
    pub right: Box<Plan>,
    /// Equality keys over the left input's rows: a left row's partners are the right rows whose
    /// [`JoinPlan::right_keys`] are equal to these (a NULL key has none). No keys: every right row is a candidate.
    pub left_keys: Vec<Expr>,
    /// The matching keys over the right input's rows.
    pub right_keys: Vec<Expr>,
    /// The rest of the join condition, over the joined row: a candidate is a partner when it is TRUE.
    pub condition: Option<Expr>,
    /// Columns of the left input.
    pub left_width: usize,
    /// Columns of the right input.
    pub right_width: usize,
}

/// The input of a join whose scan is handed the other input's keys ([`JoinPlan::key_filter`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFilter {
    /// Whether the scanned input is the right one.
    pub scans_right: bool,
    /// Which of the join's key pairs it filters by.
    pub key: usize,
    /// The scanned table's column that key is.
    pub column: usize,
}

impl JoinPlan {
    /// Which input, if any, runs after the other and is scanned with the other's keys: an input that is a scan
    /// producing rows, whose key (one of the equality keys) is an integer column of its table matched with an
    /// integer, and whose rows without a partner do not appear (either input of an inner join, the right of a
    /// LEFT join, the left of a RIGHT join). Of two such inputs, the unfiltered one, else the right one is scanned
    /// second: it is the one likely to have rows without a partner. The choice depends on the plan alone (not on
    /// the tables' row counts, which inserts change), so that every look at it while a statement runs agrees.
    ///
    /// This is the star-schema join (`bench queries`' join, a filtered table joined with a whole one): the scan
    /// of the whole table otherwise hands every row on to the join, which finds most of them no partner.
    pub fn key_filter(&self) -> Option<KeyFilter> {
        let candidate = |scans_right: bool| -> Option<(KeyFilter, &ScanPlan)> {
            let kept = match self.kind {
                JoinKind::Inner => true,
                JoinKind::Left => scans_right,
                JoinKind::Right => !scans_right,
                JoinKind::Full => false,
            };
            let (input, keys, other_keys) = if scans_right {
                (&self.right, &self.right_keys, &self.left_keys)
            } else {
                (&self.left, &self.left_keys, &self.right_keys)
            };
            let Plan::Scan(scan @ ScanPlan { output: ScanOutput::Rows(projections), join_keys: None, .. }) =
                input.as_ref()
            else {
                return None;
            };
            if !kept {
                return None;
            }
            keys.iter().zip(other_keys).enumerate().find_map(|(key, (mine, theirs))| {
                let Expr::Column { index, .. } = mine else { return None };
                let Some(Expr::Column { index: column, data_type }) = projections.get(*index) else { return None };
                (data_type.is_integer() && theirs.data_type().is_integer())
                    .then_some((KeyFilter { scans_right, key, column: *column }, scan))
            })
        };
        match (candidate(false), candidate(true)) {
            (None, None) => None,
            (Some((only, _)), None) | (None, Some((only, _))) => Some(only),
            (Some((left, left_scan)), Some((right, right_scan))) => {
                Some(if left_scan.filter.is_none() && right_scan.filter.is_some() { left } else { right })
            }
        }
    }
}

impl JoinPlan {
    /// Where [`JoinPlan::key_filter`] finds no scan of rows: the right input of an inner or LEFT join when its
    /// rows are the groups of one scan (`GROUP BY k`, perhaps under a select list or HAVING) and one equality
    /// key is a group key that is an integer column of the table, matched with an integer. That scan runs
    /// second, keeping only rows whose group key is one of the left input's keys: a group with another key has
    /// no partner, and filtering on the group key leaves every other group's rows, so its aggregates, as they
    /// were. HAVING is over whole groups, so it commutes with the filter; a LIMIT, OFFSET or DISTINCT does not,
    /// and grouping sets add groups over several keys: those are not taken.
    ///
    /// This is the decorrelated keyed subquery: `(SELECT sum(b.v) FROM b WHERE b.k = a.k) … FROM a WHERE a.id =
    /// 5` is `a` LEFT-joined with `b`'s groups by `k`, and without the filter every group of `b` was made for one
    /// outer row.
    pub fn group_key_filter(&self) -> Option<KeyFilter> {
        if !matches!(self.kind, JoinKind::Inner | JoinKind::Left) {
            return None;
        }
        self.right_keys.iter().zip(&self.left_keys).enumerate().find_map(|(key, (mine, theirs))| {
            let Expr::Column { index, .. } = mine else { return None };
            let column = group_key_column(&self.right, *index)?;
            theirs.data_type().is_integer().then_some(KeyFilter { scans_right: true, key, column })
        })
    }

    /// The input a join that is not probed in a scan's tasks runs second, with the other's keys:
    /// [`JoinPlan::key_filter`]'s scan of rows, else [`JoinPlan::group_key_filter`]'s groups; but where the left
    /// input is a filtered scan of rows and the right a scan's groups, the groups, filtered by the left's keys
    /// (`… JOIN (SELECT k, count(*) … GROUP BY k) s ON s.k = a.k WHERE a.id < 3` over 2 M rows each took 14 ms
    /// the other way round, grouping every row of the right to filter the left by all of its keys).
    pub fn keyed_input(&self) -> Option<KeyFilter> {
        match (self.key_filter(), self.group_key_filter()) {
            (Some(rows), Some(groups))
                if !rows.scans_right && matches!(self.left.as_ref(), Plan::Scan(ScanPlan { filter: Some(_), .. })) =>
            {
                Some(groups)
            }
            (rows, groups) => rows.or(groups),
        }
    }
}

/// The table column that output column `output` of `plan` is, when `plan`'s rows are the groups of one scan
/// (see [`JoinPlan::group_key_filter`]) and that column is an integer group key read as it is.
fn group_key_column(plan: &Plan, output: usize) -> Option<usize> {
    match plan {
        Plan::Scan(ScanPlan {
            output: ScanOutput::Aggregate { group_by, sets: None, .. }, join_keys: None, ..
        }) => match group_by.get(output)? {
            Expr::Column { index, data_type } if data_type.is_integer() => Some(*index),
            _ => None,
        },
        Plan::Post {
            input,
            filter: _,
            projection,
            distinct: Dedup::No,
            order_by,
            offset: None,
            limit: None,
            with_ties: false,
        } if order_by.is_empty() => {
            let output = match projection {
                None => output,
                Some(projection) => match projection.get(output)? {
                    Expr::Column { index, .. } => *index,
                    _ => return None,
                },
            };
            group_key_column(input, output)
        }
        _ => None,
    }
}

/// The scan a join's keyed input reads: the input itself, or the scan whose groups it is (one that
/// [`group_key_column`] sees through).
fn group_scan(plan: &Plan) -> Option<&ScanPlan> {
    match plan {
        Plan::Scan(scan) => Some(scan),
        Plan::Post { input, .. } => group_scan(input),
        _ => None,
    }
}

/// `plan`, a scan or one that [`group_key_column`] sees through to a scan, with that scan handed `keys`.
pub(crate) fn with_scan_keys(plan: &Plan, keys: JoinKeys) -> Result<Plan, ExecError> {
    let mut plan = plan.clone();
    let mut node = &mut plan;
    loop {
        match node {
            Plan::Scan(scan) => {
                scan.join_keys = Some(keys);
                return Ok(plan);
            }
            Plan::Post { input, .. } => node = input,
            _ => return Err(ExecError::internal("a join's grouped input is not a scan's groups")),
        }
    }
}

/// A plan.
#[derive(Clone)]
pub enum Plan {
    /// A table scan.
    Scan(ScanPlan),
    /// An index lookup.
    Lookup(LookupPlan),
    /// Constant rows (`SELECT` without `FROM`).
    Values(Vec<Vec<Expr>>),
    /// `UNION ALL`: the inputs' rows one after another. Their scans run concurrently, in one task graph.
    UnionAll(Vec<Plan>),
    /// A join: a hash join on its equality keys, a nested loop without them.
    Join(JoinPlan),
    /// `INTERSECT` or `EXCEPT` of two inputs with the same column types (rows compared with NULLs equal, as in
    /// PostgreSQL); the result keeps the left input's order. Both inputs' scans run in one task graph.
    SetOperation {
        /// Which operation.
        op: SetOp,
        /// `ALL`: multisets (a row appears min(l, r) or max(l − r, 0) times); otherwise sets.
        all: bool,
        /// The left input.
        left: Box<Plan>,
        /// The right input.
        right: Box<Plan>,
    },
    /// A statement with uncorrelated subqueries in its expressions: they run first, in order (a later one may
    /// use an earlier one's result), and their results replace [`Expr::Subquery`] and [`Expr::QuantifiedSubquery`] in
    /// `main` before it runs.
    Subqueries {
        /// The subqueries, each producing one column.
        subqueries: Vec<Plan>,
        /// The statement.
        main: Box<Plan>,
    },
    /// Hash aggregation of another plan's rows (a subquery in FROM): output rows are the group keys, then the
    /// aggregates, as a scan's aggregate output. A scan aggregates inside its tasks instead.
    Aggregate {
        /// The input.
        input: Box<Plan>,
        /// Group keys (over input rows).
        group_by: Vec<Expr>,
        /// Aggregates (over input rows).
        aggregates: Vec<AggregateCall>,
        /// Grouping sets (`GROUPING SETS`, `ROLLUP`, `CUBE`): the positions in `group_by` of each set's keys. The
        /// input is grouped once per set; a key outside the row's set is NULL, and one more column after the
        /// aggregates holds the set's position in this list (what `GROUPING()` reads). `None`: one grouping by
        /// every key, and no such column.
        sets: Option<Vec<Vec<usize>>>,
    },
    /// Window functions: each input row with one more column per call, the call's value for that row.
    Window {
        /// The input.
        input: Box<Plan>,
        /// The calls.
        calls: Vec<WindowCall>,
    },
    /// `generate_series(start, stop [, step])` in FROM: integers from `start` towards `stop` by `step`, made as
    /// the statement runs (so a long series counts against `numadb.max_result_mb` and can be cancelled, rather
    /// than being built when the statement is planned).
    Series(SeriesPlan),
    /// What happens after the rows are produced: `HAVING`, the select list, `DISTINCT`, `ORDER BY`, `OFFSET`,
    /// `LIMIT`.
    Post {
        /// The input.
        input: Box<Plan>,
        /// `HAVING` (over input rows).
        filter: Option<Expr>,
        /// The select list (over input rows); `None` passes rows through.
        projection: Option<Vec<Expr>>,
        /// `DISTINCT` (on the projected rows) or `DISTINCT ON` (on leading ORDER BY keys).
        distinct: Dedup,
        /// `ORDER BY` (over input rows).
        order_by: Vec<SortKey>,
        /// `OFFSET`.
        offset: Option<Expr>,
        /// `LIMIT`.
        limit: Option<Expr>,
        /// `FETCH FIRST n ROWS WITH TIES`: the rows after the `n`-th that sort equal to it come along.
        with_ties: bool,
    },
    /// `WITH RECURSIVE`'s query: `base`'s rows, then `step`'s over the rows the previous round added (its
    /// [`Plan::WorkingTable`] `id`), round after round until one adds none. Each round runs as a statement of
    /// its own (its scans in their own task graph), counted against `numadb.max_result_mb` and checked for
    /// cancel, so a recursion without end fails rather than runs forever.
    Recursive {
        /// The working table the step reads.
        id: usize,
        /// The non-recursive term.
        base: Box<Plan>,
        /// The recursive term.
        step: Box<Plan>,
        /// `UNION` rather than `UNION ALL`: rows already produced are dropped (and the recursion ends when a
        /// round finds nothing new).
        distinct: bool,
    },
    /// The rows of the recursion `id`'s previous round, inside its step (replaced by them as each round runs).
    WorkingTable {
        /// The recursion.
        id: usize,
        /// The rows' column types.
        types: Vec<DataType>,
    },
}

impl Plan {
    /// Whether the plan scans a table (and so needs scheduler workers).
    pub fn scans(&self) -> bool {
        match self {
            Plan::Scan(_) => true,
            // It may yet be a scan: see [`Plan::chosen`].
            Plan::Lookup(lookup) => lookup.waits_for_params(),
            Plan::Values(_) | Plan::Series(_) | Plan::WorkingTable { .. } => false,
            Plan::Recursive { base, step, .. } => base.scans() || step.scans(),
            Plan::UnionAll(inputs) => inputs.iter().any(Plan::scans),
            Plan::Post { input, .. } | Plan::Aggregate { input, .. } | Plan::Window { input, .. } => input.scans(),
            Plan::Subqueries { subqueries, main } => main.scans() || subqueries.iter().any(Plan::scans),
            Plan::SetOperation { left, right, .. } => left.scans() || right.scans(),
            Plan::Join(join) => join.left.scans() || join.right.scans(),
        }
    }

    /// Whether a choice in the plan waits for the statement's parameters ([`KeyRange::scan_when_wide`]).
    pub fn chooses_as_it_runs(&self) -> bool {
        match self {
            Plan::Lookup(lookup) => lookup.waits_for_params(),
            Plan::Scan(_) | Plan::Values(_) | Plan::Series(_) | Plan::WorkingTable { .. } => false,
            Plan::UnionAll(inputs) => inputs.iter().any(Plan::chooses_as_it_runs),
            Plan::Post { input, .. } | Plan::Aggregate { input, .. } | Plan::Window { input, .. } => {
                input.chooses_as_it_runs()
            }
            Plan::Subqueries { subqueries, main } => {
                main.chooses_as_it_runs() || subqueries.iter().any(Plan::chooses_as_it_runs)
            }
            Plan::SetOperation { left, right, .. } | Plan::Join(JoinPlan { left, right, .. }) => {
                left.chooses_as_it_runs() || right.chooses_as_it_runs()
            }
            Plan::Recursive { base, step, .. } => base.chooses_as_it_runs() || step.chooses_as_it_runs(),
        }
    }

    /// The plan with the choices that waited for the statement's parameters made for `params`: a range lookup
    /// whose bounds are parameters stays one where the index finds few enough rows, and is a scan of its table
    /// otherwise ([`LookupPlan::pays`]).
    pub fn chosen(&self, params: &[Value]) -> Result<Plan, ExecError> {
        let mut plan = self.clone();
        let mut pending = vec![&mut plan];
        while let Some(node) = pending.pop() {
            // A range bounded by a subquery is chosen once the subquery has run and its value is in its place
            // (`Plan::Subqueries`): `EXPLAIN` shows it undecided.
            if let Plan::Lookup(lookup) = node
                && lookup.waits_for_params()
                && !lookup.range.as_ref().is_some_and(|range| range.reads_subquery())
            {
                if lookup.pays(params)? {
                    if let Some(range) = lookup.range.as_mut() {
                        range.scan_when_wide = false;
                    }
                } else {
                    *node = Plan::Scan(lookup.as_scan());
                }
                continue;
            }
            pending.extend(node.children_mut());
        }
        Ok(plan)
    }

    /// The plans this one reads (its inputs, a statement's subqueries, a recursion's terms).
    pub fn children_mut(&mut self) -> Vec<&mut Plan> {
        match self {
            Plan::Scan(_) | Plan::Lookup(_) | Plan::Values(_) | Plan::Series(_) | Plan::WorkingTable { .. } => {
                Vec::new()
            }
            Plan::UnionAll(inputs) => inputs.iter_mut().collect(),
            Plan::Post { input, .. } | Plan::Aggregate { input, .. } | Plan::Window { input, .. } => vec![input],
            Plan::Subqueries { subqueries, main } => {
                subqueries.iter_mut().chain(std::iter::once(&mut **main)).collect()
            }
            Plan::SetOperation { left, right, .. } => vec![left, right],
            Plan::Join(join) => vec![&mut join.left, &mut join.right],
            Plan::Recursive { base, step, .. } => vec![base, step],
        }
    }

    /// The plan with recursion `id`'s working table replaced by `rows` (of its column types).
    pub fn with_working_table(&self, id: usize, rows: &[Vec<Value>]) -> Plan {
        let mut plan = self.clone();
        let mut pending = vec![&mut plan];
        while let Some(node) = pending.pop() {
            if let Plan::WorkingTable { id: found, types } = node
                && *found == id
            {
                let literals = rows
                    .iter()
                    .map(|row| row.iter().zip(types.iter()).map(|(v, &t)| Expr::literal(v.clone(), t)).collect())
                    .collect();
                *node = Plan::Values(literals);
                continue;
            }
            pending.extend(node.children_mut());
        }
        plan
    }

    /// Whether the plan's rows are an aggregation's (group keys, then aggregates).
    pub fn aggregates(&self) -> bool {
        match self {
            Plan::Scan(ScanPlan { output, .. }) | Plan::Lookup(LookupPlan { output, .. }) => {
                matches!(output, ScanOutput::Aggregate { .. })
            }
            Plan::Aggregate { .. } => true,
            Plan::Subqueries { main, .. } => main.aggregates(),
            Plan::Values(_)
            | Plan::Series(_)
            | Plan::Recursive { .. }
            | Plan::WorkingTable { .. }
            | Plan::UnionAll(_)
            | Plan::Post { .. }
            | Plan::SetOperation { .. }
            | Plan::Join(_)
            | Plan::Window { .. } => false,
        }
    }

    /// The plan with every expression replaced by `f` of it.
    pub fn try_map_exprs(&self, f: &mut impl FnMut(&Expr) -> Result<Expr, ExecError>) -> Result<Plan, ExecError> {
        Ok(match self {
            Plan::Scan(scan) => Plan::Scan(ScanPlan {
                table: Arc::clone(&scan.table),
                filter: scan.filter.as_ref().map(&mut *f).transpose()?,
                output: map_output(&scan.output, f)?,
                join_keys: scan.join_keys.clone(),
            }),
            Plan::Recursive { id, base, step, distinct } => Plan::Recursive {
                id: *id,
                base: Box::new(base.try_map_exprs(f)?),
                step: Box::new(step.try_map_exprs(f)?),
                distinct: *distinct,
            },
            Plan::WorkingTable { id, types } => Plan::WorkingTable { id: *id, types: types.clone() },
            Plan::Series(series) => Plan::Series(SeriesPlan {
                start: f(&series.start)?,
                stop: f(&series.stop)?,
                step: f(&series.step)?,
                data_type: series.data_type,
            }),
            Plan::Lookup(lookup) => Plan::Lookup(LookupPlan {
                table: Arc::clone(&lookup.table),
                column: lookup.column,
                keys: lookup.keys.iter().map(&mut *f).collect::<Result<_, _>>()?,
                range: match &lookup.range {
                    Some(range) => Some(Box::new(KeyRange {
                        low: range
                            .low
                            .as_ref()
                            .map(|(e, included)| Ok::<_, ExecError>((f(e)?, *included)))
                            .transpose()?,
                        high: range
                            .high
                            .as_ref()
                            .map(|(e, included)| Ok::<_, ExecError>((f(e)?, *included)))
                            .transpose()?,
                        scan_when_wide: range.scan_when_wide,
                    })),
                    None => None,
                },
                residual: lookup.residual.as_ref().map(&mut *f).transpose()?,
                output: map_output(&lookup.output, f)?,
            }),
            Plan::Values(rows) => Plan::Values(
                rows.iter().map(|row| row.iter().map(&mut *f).collect::<Result<_, _>>()).collect::<Result<_, _>>()?,
            ),
            Plan::UnionAll(inputs) => {
                Plan::UnionAll(inputs.iter().map(|p| p.try_map_exprs(f)).collect::<Result<_, _>>()?)
            }
            Plan::Subqueries { subqueries, main } => Plan::Subqueries {
                subqueries: subqueries.iter().map(|p| p.try_map_exprs(f)).collect::<Result<_, _>>()?,
                main: Box::new(main.try_map_exprs(f)?),
            },
            Plan::SetOperation { op, all, left, right } => Plan::SetOperation {
                op: *op,
                all: *all,
                left: Box::new(left.try_map_exprs(f)?),
                right: Box::new(right.try_map_exprs(f)?),
            },
            Plan::Join(join) => Plan::Join(JoinPlan {
                kind: join.kind,
                left: Box::new(join.left.try_map_exprs(f)?),
                right: Box::new(join.right.try_map_exprs(f)?),
                left_keys: join.left_keys.iter().map(&mut *f).collect::<Result<_, _>>()?,
                right_keys: join.right_keys.iter().map(&mut *f).collect::<Result<_, _>>()?,
                condition: join.condition.as_ref().map(&mut *f).transpose()?,
                left_width: join.left_width,
                right_width: join.right_width,
            }),
            Plan::Aggregate { input, group_by, aggregates, sets } => {
                let (group_by, aggregates) = map_aggregation(group_by, aggregates, f)?;
                Plan::Aggregate { input: Box::new(input.try_map_exprs(f)?), group_by, aggregates, sets: sets.clone() }
            }
            Plan::Window { input, calls } => Plan::Window {
                input: Box::new(input.try_map_exprs(f)?),
                calls: calls.iter().map(|call| call.try_map_exprs(&mut *f)).collect::<Result<_, _>>()?,
            },
            Plan::Post { input, filter, projection, distinct, order_by, offset, limit, with_ties } => Plan::Post {
                input: Box::new(input.try_map_exprs(f)?),
                filter: filter.as_ref().map(&mut *f).transpose()?,
                projection: projection
                    .as_ref()
                    .map(|p| p.iter().map(&mut *f).collect::<Result<Vec<_>, _>>())
                    .transpose()?,
                distinct: *distinct,
                order_by: order_by
                    .iter()
                    .map(|key| Ok(SortKey { expr: f(&key.expr)?, ..key.clone() }))
                    .collect::<Result<_, ExecError>>()?,
                offset: offset.as_ref().map(&mut *f).transpose()?,
                limit: limit.as_ref().map(&mut *f).transpose()?,
                with_ties: *with_ties,
            },
        })
    }

    /// An indented, human-readable description (the body of `EXPLAIN`); `join_key_filter` as the executor
    /// will run it ([`JoinPlan::keyed_input`], or under an aggregate that probes its join [`JoinPlan::key_filter`];
    /// `numadb.join_key_filter`).
    pub fn describe(&self, join_key_filter: bool) -> String {
        let mut out = String::new();
        self.describe_into(&mut out, 0, join_key_filter, false);
        out
    }

    /// `probed`: this plan is the input of an aggregate that probes the join under it in a scan's tasks
    /// ([`crate::run::aggregate_probes_join`]), whose key filter is the probe's.
    fn describe_into(&self, out: &mut String, depth: usize, key_filter: bool, probed: bool) {
        let indent = "  ".repeat(depth);
        let arrow = if depth == 0 { "" } else { "-> " };
        match self {
            Plan::Series(_) => {
                let _ = writeln!(out, "{indent}{arrow}Function Scan on generate_series");
            }
            Plan::Recursive { base, step, distinct, .. } => {
                let all = if *distinct { "" } else { " All" };
                let _ = writeln!(out, "{indent}{arrow}Recursive Union{all}");
                base.describe_into(out, depth + 1, key_filter, false);
                step.describe_into(out, depth + 1, key_filter, false);
            }
            Plan::WorkingTable { .. } => {
                let _ = writeln!(out, "{indent}{arrow}WorkTable Scan");
            }
            Plan::Scan(scan) => {
                let _ = writeln!(
                    out,
                    "{indent}{arrow}Parallel Scan on {} ({})",
                    scan.table.name(),
                    output_kind(
                        &scan.output,
                        scan.join_keys.as_ref().is_some_and(|keys| keys.probe.is_some()),
                        &scan.table.snapshot().partitions
                    )
                );
                if let Some(filter) = &scan.filter {
                    let _ = writeln!(out, "{indent}      Filter: {}", show_expr(filter, &column_names(&scan.table)));
                }
                describe_output(out, &indent, &scan.output, &column_names(&scan.table));
                let _ = writeln!(out, "{indent}      Placement: {}", scan.table.placement(None));
            }
            Plan::Lookup(lookup) => {
                let names = column_names(&lookup.table);
                let _ = writeln!(
                    out,
                    "{indent}{arrow}Index Lookup on {} using {} ({})",
                    lookup.table.name(),
                    names.get(lookup.column).map(String::as_str).unwrap_or("?"),
                    output_kind(&lookup.output, true, &[])
                );
                if let Some(range) = &lookup.range {
                    let column = names.get(lookup.column).map(String::as_str).unwrap_or("?");
                    let bound = |bound: &Option<(Expr, bool)>, inclusive: &str, exclusive: &str| {
                        bound.as_ref().map(|(e, included)| {
                            format!(
                                "{column} {} {}",
                                if *included { inclusive } else { exclusive },
                                show_expr(e, &names)
                            )
                        })
                    };
                    let bounds: Vec<String> =
                        [bound(&range.low, ">=", ">"), bound(&range.high, "<=", "<")].into_iter().flatten().collect();
                    let _ = writeln!(out, "{indent}      Range: {}", bounds.join(" AND "));
                    if range.scan_when_wide {
                        let most = range_lookup_rows_max(lookup.table.snapshot().rows());
                        let _ = writeln!(
                            out,
                            "{indent}      Or a scan: where the index counts over {most} rows in the range as the statement runs"
                        );
                    }
                } else {
                    let keys: Vec<String> = lookup.keys.iter().map(|key| show_expr(key, &names)).collect();
                    let label = if keys.len() == 1 { "Key" } else { "Keys" };
                    let _ = writeln!(out, "{indent}      {label}: {}", keys.join(", "));
                }
                if let Some(residual) = &lookup.residual {
                    let _ = writeln!(out, "{indent}      Filter: {}", show_expr(residual, &names));
                }
                describe_output(out, &indent, &lookup.output, &names);
            }
            Plan::Values(rows) => {
                let _ = writeln!(
                    out,
                    "{indent}{arrow}Result ({} row{})",
                    rows.len(),
                    if rows.len() == 1 { "" } else { "s" }
                );
            }
            Plan::UnionAll(inputs) => {
                let _ = writeln!(out, "{indent}{arrow}Union All ({} inputs, scanned concurrently)", inputs.len());
                for input in inputs {
                    input.describe_into(out, depth + 1, key_filter, false);
                }
            }
            Plan::Join(join) => {
                let method = if join.left_keys.is_empty() { "Nested Loop" } else { "Hash Join" };
                let _ = writeln!(out, "{indent}{arrow}{method} ({})", join.kind.keyword());
                if !join.left_keys.is_empty() {
                    let _ = writeln!(
                        out,
                        "{indent}      Keys: {} on the left, {} on the right",
                        join.left_keys.len(),
                        join.right_keys.len()
                    );
                }
                if join.condition.is_some() {
                    let _ = writeln!(out, "{indent}      Join Filter: yes");
                }
                // A join probed in a scan's tasks has the probe's key filter, `key_filter`'s (none for a LEFT
                // join's, whose scan keeps every row); others that of `keyed_input`.
                let keyed = if probed { join.key_filter() } else { join.keyed_input() };
                if key_filter
                    && let Some(filter) = keyed
                    && let Some(scan) = group_scan(if filter.scans_right { &join.right } else { &join.left })
                {
                    let names = column_names(&scan.table);
                    let column = names.get(filter.column).map(String::as_str).unwrap_or("?");
                    let _ = if matches!(scan.output, ScanOutput::Rows(_)) {
                        writeln!(
                            out,
                            "{indent}      Key Filter: the {} scan runs second, keeping rows whose {column} is a key of the {} input",
                            if filter.scans_right { "right" } else { "left" },
                            if filter.scans_right { "left" } else { "right" },
                        )
                    } else {
                        writeln!(
                            out,
                            "{indent}      Key Filter: the right input's scan runs second, grouping only rows whose {column} is a key of the left input",
                        )
                    };
                }
                join.left.describe_into(out, depth + 1, key_filter, false);
                join.right.describe_into(out, depth + 1, key_filter, false);
            }
            Plan::SetOperation { op, all, left, right } => {
                let _ = writeln!(out, "{indent}{arrow}{}{} (hashed)", op.keyword(), if *all { " ALL" } else { "" });
                left.describe_into(out, depth + 1, key_filter, false);
                right.describe_into(out, depth + 1, key_filter, false);
            }
            Plan::Subqueries { subqueries, main } => {
                for (i, subquery) in subqueries.iter().enumerate() {
                    let _ = writeln!(out, "{indent}{arrow}Subquery {} (runs first)", i + 1);
                    subquery.describe_into(out, depth + 1, key_filter, false);
                }
                main.describe_into(out, depth, key_filter, false);
            }
            Plan::Aggregate { input, group_by, aggregates, sets } => {
                let kind = if group_by.is_empty() { "Aggregate" } else { "Hash Aggregate" };
                let plural = if aggregates.len() == 1 { "" } else { "s" };
                let sets = match sets {
                    Some(sets) => format!(", {} grouping sets", sets.len()),
                    None => String::new(),
                };
                let _ = writeln!(out, "{indent}{arrow}{kind} ({} aggregate{plural}{sets})", aggregates.len());
                let probes = crate::run::aggregate_probes_join(input, aggregates, key_filter);
                input.describe_into(out, depth + 1, key_filter, probes);
            }
            Plan::Window { input, calls } => {
                let plural = if calls.len() == 1 { "" } else { "s" };
                let _ = writeln!(out, "{indent}{arrow}Window ({} function{plural})", calls.len());
                input.describe_into(out, depth + 1, key_filter, false);
            }
            Plan::Post { input, filter, projection, distinct, order_by, offset, limit, with_ties } => {
                let mut parts = Vec::new();
                if filter.is_some() {
                    // Above an aggregation it is HAVING; above a subquery's rows, the outer query's WHERE.
                    parts.push(if input.aggregates() { "Having" } else { "Filter" }.to_string());
                }
                // In the order they run: DISTINCT before the sort, DISTINCT ON after it.
                if *distinct == Dedup::Rows {
                    parts.push("Distinct".to_string());
                }
                if !order_by.is_empty() {
                    parts.push(format!("Sort ({} key{})", order_by.len(), if order_by.len() == 1 { "" } else { "s" }));
                }
                if let Dedup::OnSortKeys(n) = distinct {
                    parts.push(format!("Distinct On ({n} key{})", if *n == 1 { "" } else { "s" }));
                }
                if offset.is_some() {
                    parts.push("Offset".to_string());
                }
                if limit.is_some() {
                    parts.push(if *with_ties { "Limit With Ties" } else { "Limit" }.to_string());
                }
                if projection.is_some() {
                    parts.push("Project".to_string());
                }
                // (The WHERE between an aggregate and the join it probes passes `probed` on.)
                if parts.is_empty() {
                    input.describe_into(out, depth, key_filter, probed);
                    return;
                }
                let _ = writeln!(out, "{indent}{arrow}{}", parts.join(", "));
                input.describe_into(out, depth + 1, key_filter, probed);
            }
        }
    }
}

/// A scan's output with every expression replaced by `f` of it.
fn map_output(
    output: &ScanOutput,
    f: &mut dyn FnMut(&Expr) -> Result<Expr, ExecError>,
) -> Result<ScanOutput, ExecError> {
    Ok(match output {
        ScanOutput::Rows(exprs) => ScanOutput::Rows(exprs.iter().map(&mut *f).collect::<Result<_, _>>()?),
        ScanOutput::Aggregate { group_by, aggregates, sets } => {
            let (group_by, aggregates) = map_aggregation(group_by, aggregates, f)?;
            ScanOutput::Aggregate { group_by, aggregates, sets: sets.clone() }
        }
    })
}

/// Group keys and aggregates (arguments and filters) with every expression replaced by `f` of it.
fn map_aggregation(
    group_by: &[Expr],
    aggregates: &[AggregateCall],
    f: &mut dyn FnMut(&Expr) -> Result<Expr, ExecError>,
) -> Result<(Vec<Expr>, Vec<AggregateCall>), ExecError> {
    let group_by = group_by.iter().map(&mut *f).collect::<Result<_, _>>()?;
    let aggregates = aggregates.iter().map(|a| a.try_map_exprs(&mut *f)).collect::<Result<_, ExecError>>()?;
    Ok((group_by, aggregates))
}

/// What a scan (or lookup) of `partitions` produces; `joined` when it aggregates rows joined with another input's,
/// or runs on the session's thread, which keep a partial per domain whatever the grouping.
fn output_kind(output: &ScanOutput, joined: bool, partitions: &[Arc<Partition>]) -> &'static str {
    match output {
        ScanOutput::Rows(_) => "rows",
        ScanOutput::Aggregate { sets: Some(_), .. } => "hash aggregate by grouping sets, partial per domain",
        ScanOutput::Aggregate { group_by, .. } if group_by.is_empty() => "aggregate",
        ScanOutput::Aggregate { group_by, aggregates, .. }
            if !joined
                && crate::group::merges_by_partition(output)
                && crate::textkeys::TextKeys::would_number(group_by, aggregates, partitions) =>
        {
            "hash aggregate, partial per worker, merged in partitions of the groups"
        }
        ScanOutput::Aggregate { .. } => "hash aggregate, partial per domain",
    }
}

fn describe_output(out: &mut String, indent: &str, output: &ScanOutput, names: &[String]) {
    match output {
        ScanOutput::Rows(projections) => {
            let list: Vec<String> = projections.iter().map(|e| show_expr(e, names)).collect();
            let _ = writeln!(out, "{indent}      Output: {}", list.join(", "));
        }
        ScanOutput::Aggregate { group_by, aggregates, sets } => {
            let keys: Vec<String> = group_by.iter().map(|e| show_expr(e, names)).collect();
            match sets {
                Some(sets) => {
                    for set in sets {
                        let set: Vec<&str> = set.iter().map(|&key| keys[key].as_str()).collect();
                        let _ = writeln!(out, "{indent}      Grouping Set: ({})", set.join(", "));
                    }
                }
                None if !keys.is_empty() => {
                    let _ = writeln!(out, "{indent}      Group Key: {}", keys.join(", "));
                }
                None => {}
            }
            let calls: Vec<String> = aggregates
                .iter()
                .map(|a| {
                    let arguments: Vec<String> = match &a.argument {
                        None => vec!["*".to_string()],
                        Some(argument) => {
                            std::iter::once(argument).chain(&a.extra).map(|e| show_expr(e, names)).collect()
                        }
                    };
                    let order_by: Vec<String> = a
                        .order_by
                        .iter()
                        .map(|k| format!("{}{}", show_expr(&k.expr, names), if k.descending { " DESC" } else { "" }))
                        .collect();
                    format!(
                        "{}({}{}{}){}",
                        a.function.name(),
                        if a.distinct { "DISTINCT " } else { "" },
                        arguments.join(", "),
                        if order_by.is_empty() { String::new() } else { format!(" ORDER BY {}", order_by.join(", ")) },
                        a.filter.as_ref().map_or(String::new(), |f| format!(" FILTER (WHERE {})", show_expr(f, names)))
                    )
                })
                .collect();
            // A grouping without aggregates (`SELECT DISTINCT`, `GROUP BY` alone) has no line for them.
            if !calls.is_empty() {
                let _ = writeln!(out, "{indent}      Aggregates: {}", calls.join(", "));
            }
        }
    }
}

fn column_names(table: &Table) -> Vec<String> {
    table.columns().iter().map(|c| c.name.clone()).collect()
}

/// Renders an expression with column names.
pub fn show_expr(expr: &Expr, names: &[String]) -> String {
    match expr {
        Expr::Column { index, .. } => names.get(*index).cloned().unwrap_or_else(|| format!("#{index}")),
        Expr::Literal { value, .. } => match value {
            Value::Text(text) => format!("'{}'", text.replace('\'', "''")),
            // As SQL spells them: `t` and `f` (PostgreSQL's output form) read like column names in a plan.
            Value::Bool(b) => b.to_string(),
            other => other.to_string(),
        },
        Expr::Param { index, .. } => format!("${}", index + 1),
        Expr::Binary { op, left, right, .. } => {
            format!("({} {} {})", show_expr(left, names), op.symbol(), show_expr(right, names))
        }
        Expr::Not(inner) => format!("(NOT {})", show_expr(inner, names)),
        Expr::Negate { expr, .. } => format!("(-{})", show_expr(expr, names)),
        Expr::IsNull { expr, negated } => {
            format!("({} IS {}NULL)", show_expr(expr, names), if *negated { "NOT " } else { "" })
        }
        Expr::Between { expr, low, high, negated } => format!(
            "({} {}BETWEEN {} AND {})",
            show_expr(expr, names),
            if *negated { "NOT " } else { "" },
            show_expr(low, names),
            show_expr(high, names)
        ),
        Expr::InList { expr, list, negated } => format!(
            "({} {}IN ({}))",
            show_expr(expr, names),
            if *negated { "NOT " } else { "" },
            list.iter().map(|e| show_expr(e, names)).collect::<Vec<_>>().join(", ")
        ),
        Expr::InSet { expr, set, negated } => {
            format!("({} {}IN ({} values))", show_expr(expr, names), if *negated { "NOT " } else { "" }, set.len())
        }
        Expr::Like { expr, pattern, negated, case_insensitive, escape } => format!(
            "({} {}{}LIKE {}{})",
            show_expr(expr, names),
            if *negated { "NOT " } else { "" },
            if *case_insensitive { "I" } else { "" },
            show_expr(pattern, names),
            match escape {
                Some('\\') => String::new(),
                Some(c) => format!(" ESCAPE '{c}'"),
                None => " ESCAPE ''".into(),
            }
        ),
        Expr::Cast { expr, to } => format!("CAST({} AS {to})", show_expr(expr, names)),
        Expr::Case { branches, otherwise, .. } => {
            let mut out = String::from("CASE");
            for (condition, result) in branches {
                out.push_str(&format!(" WHEN {} THEN {}", show_expr(condition, names), show_expr(result, names)));
            }
            format!("{out} ELSE {} END", show_expr(otherwise, names))
        }
        Expr::Function { function, args, .. } => {
            format!("{}({})", function.name(), args.iter().map(|e| show_expr(e, names)).collect::<Vec<_>>().join(", "))
        }
        Expr::Subquery { index, exists: true, .. } => format!("EXISTS (subquery {})", index + 1),
        Expr::Subquery { index, .. } => format!("(subquery {})", index + 1),
        Expr::QuantifiedSubquery { expr, op: BinaryOp::Eq, all: false, index, .. } => {
            format!("({} IN (subquery {}))", show_expr(expr, names), index + 1)
        }
        Expr::QuantifiedSubquery { expr, op: BinaryOp::NotEq, all: true, index, .. } => {
            format!("({} NOT IN (subquery {}))", show_expr(expr, names), index + 1)
        }
        Expr::QuantifiedSubquery { expr, op, all, index, .. } => format!(
            "({} {} {} (subquery {}))",
            show_expr(expr, names),
            op.symbol(),
            if *all { "ALL" } else { "ANY" },
            index + 1
        ),
    }
}
