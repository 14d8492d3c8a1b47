//! Correlated subqueries (`EXISTS`, `IN`, `ANY`, `ALL`, scalar) in WHERE and the select list, rewritten as joins
//! before binding.
//!
//! A subquery that refers to the enclosing query's columns only through equalities in its WHERE
//! (`EXISTS (SELECT … FROM b WHERE b.k = a.k AND b.x > 5)`) asks, for each outer row, whether some inner row has
//! the same keys. That is a join with the distinct keys of the inner rows that pass the rest of the WHERE:
//!
//! - `EXISTS` joins them (`JOIN (SELECT DISTINCT b.k … WHERE b.x > 5) ON … = a.k`): distinct keys match a row at
//!   most once, so no row is repeated;
//! - `NOT EXISTS` left-joins them and keeps the rows that found none (the first key IS NULL);
//! - `x IN (SELECT v …)` joins the distinct (keys, v) on the keys and `v = x` (in WHERE, IN's NULL answers and
//!   FALSE both drop the row, so the join is exact). `NOT IN` is not rewritten: its NULL rules are not a join's.
//! - `[NOT] EXISTS` whose subquery also compares an inner expression with the outer row once by `<`, `<=`, `>`,
//!   `>=` or `<>` (`… WHERE b.k = a.k AND b.s <> a.s`, TPC-H Q21's form; the equalities may be absent) left-joins
//!   the inner rows grouped by their keys with the least and greatest of that expression, and tests them in WHERE
//!   (`exists_with_residual`). Two such comparisons are not rewritten: one row must meet both.
//!
//! `[NOT] EXISTS` elsewhere in WHERE or in the select list (under OR, NOT, CASE) is the same join made a left join
//! that marks the outer rows it holds for (`exists_as_mark`): the test of the mark (IS [NOT] NULL, or the
//! residual's COALESCE test) takes the subquery's place, TRUE or FALSE as EXISTS is.
//!
//! A scalar subquery in a WHERE condition (under comparisons, arithmetic, BETWEEN, IS NULL, NOT, CASE, function
//! arguments), or in the select list of a query that is not grouped (or is, by a plain GROUP BY that has every
//! column the subquery's outer keys read: the join's columns, one value per key, are then grouped too), becomes a
//! left join that meets each outer row at most once, and its place takes an expression over the join's columns,
//! computed after the join for the outer rows that ask for it, as PostgreSQL evaluates the subquery only then:
//!
//! - one that aggregates such rows (`x > (SELECT avg(b.y) FROM b WHERE b.k = a.k)`): the rows grouped by their keys,
//!   each aggregate call a column of the group (NULL where no group matches, 0 for a count). EXISTS and IN over an
//!   aggregating subquery are not rewritten: it has one row whatever the keys;
//! - one that does not (`(SELECT b.name FROM b WHERE b.k = a.k)`): the same groups, counting their rows and
//!   carrying the columns the value reads; the value of a group of one row, NULL where none matches, and 21000 for
//!   an outer row that meets several. Keyed by the inner table's primary key, the rows are not grouped;
//! - one that keeps its first row in an order (`ORDER BY … LIMIT 1`, `FETCH FIRST ROW ONLY`): each key's rows
//!   numbered in that order (`row_number() OVER (PARTITION BY keys ORDER BY …)`) and the first one joined.
//!
//! An equality of an inner BIGINT with an outer double precision is no key (`bigint_meets_double`): 2^53 and
//! 2^53 + 1 are two groups but one double, and both would meet the outer row, repeating it.
//!
//! A correlated subquery none of those take (other comparisons with the outer row, as in running totals
//! `(SELECT sum(b.v) FROM b WHERE b.t <= a.t)`; outer columns in its select list or ORDER BY; joins in its FROM)
//! is computed over the distinct values of the outer columns it reads (`over_outer_values`): those values are a
//! relation of their own, `(SELECT DISTINCT a.t AS __numadb_d0 FROM <the outer FROM> WHERE <the outer WHERE's
//! conjuncts that can be tested there>) AS __numadb_dd` (`values_filter`: the values of the rows that ask for
//! the subquery, not of every row), joined into the subquery's FROM in place of the outer row, and the
//! subquery's rows are grouped (or numbered) by them as above and joined back to the outer rows by them. It is the subquery computed once per distinct outer value,
//! as PostgreSQL computes it once per outer row. An outer value that is NULL meets the rows computed for NULL (the
//! join compares `coalesce(v, '0')` and `v IS NULL`). `[NOT] EXISTS`, `[NOT] IN`, `ANY` and `ALL` over such a
//! subquery become the aggregating scalar subquery that answers the same, with SQL's NULLs
//! (`quantified_as_scalar`: `x IN (…)` is TRUE if some value equals `x`, else NULL if some comparison was NULL,
//! else FALSE).
//!
//! A subquery with GROUP BY (and HAVING) inside is taken the same way, its groups grouped by the outer values too
//! (`groups_as_rows`): each group is then one outer value's, and made the rows of a subquery in FROM, the rewrites
//! above take them for the subquery's rows, its items and ORDER BY keys for their columns. An outer value none of
//! whose rows pass has no group, as the subquery has no rows for it. HAVING without GROUP BY is not taken that way
//! (an aggregate over no rows is still a row for it to test): a scalar or `[NOT] EXISTS` subquery with it becomes
//! an aggregating scalar subquery first (`lone_having_as_case`: `CASE WHEN <having> THEN <item> END`, or
//! `(<having>) IS TRUE` for EXISTS). Window functions inside are partitioned by the outer
//! values first, over the groups or, without GROUP BY, over the rows made a subquery in FROM the same way; the
//! keyed rewrites do not take them (a window there would span every key's rows).
//!
//! Subqueries inside the subquery (`NestedQueries`) are set aside while it is rewritten, so that their names stay
//! theirs; one that reads the outer query too (one SELECT without subqueries of its own) has those references
//! replaced by the outer values' columns as well, and is planned later as a subquery correlated with the rewritten
//! one.
//!
//! `LIMIT 1 OFFSET m` in a scalar subquery keeps the row numbered m + 1; `LIMIT n OFFSET m` under IN, ANY, ALL
//! and EXISTS numbers the rows (or groups) per outer value in a subquery in FROM (`groups_as_rows`) and keeps
//! those; so does ORDER BY a position or an output name. `[NOT] EXISTS`, `IN`, `ANY`, `ALL` over an aggregate
//! without GROUP BY or HAVING (one row whatever the outer row) are TRUE, or the comparison with it as a scalar
//! subquery (`one_row_quantified`).
//!
//! Anything else correlated (a LIMIT other than 1 in a scalar subquery, an aggregate of outer columns only, HAVING
//! without GROUP BY under IN, ANY or ALL, `GROUP BY ()` without HAVING, WITH TIES) is left as it is, and binding
//! refuses it with 0A000. The
//! joined relations are named `__numadb_sq<n>`, and `*` does not list their columns.

use sqlparser::ast::{self, BinaryOperator, Expr as E, Select, SetExpr, TableFactor};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::Parser;

use numadb_storage::DataType;

use numadb_execution::aggregate::LEAST_OF_ANY_TYPE;
use numadb_execution::function::SINGLE_ROW;
use numadb_execution::{ExecError, sqlstate};

use super::{Binder, fold, is_comparison, object_name};

/// The prefix of the relations the rewrite adds (hidden from `*`).
pub(super) const HIDDEN_RELATION: &str = "__numadb_sq";

/// The prefix of the columns the rewrite adds to a relation of the user's (a LATERAL subquery's keys): `*` and
/// `q.*` do not list them.
pub(super) const HIDDEN_COLUMN: &str = "__numadb_";

/// The names visible in one FROM: each relation's qualifier and column names.
struct Names {
    relations: Vec<(String, Vec<String>)>,
    /// The boolean columns, as (qualifier, name): their least and greatest are bool_and and bool_or.
    booleans: Vec<(String, String)>,
    /// The FROM items as text (`a, b JOIN c ON …`).
    from: String,
    /// For an outer query's names, the conjuncts of its WHERE that every row it asks a subquery's value for
    /// passes ([`Binder::values_filter`]), as text (` WHERE (c1) AND (c2)`), or empty.
    filter: String,
}

impl Names {
    /// Whether `expr` is a boolean: a boolean column, or an expression of a form that is one.
    fn is_boolean(&self, expr: &E) -> bool {
        match expr {
            E::Identifier(name) => self.booleans.iter().any(|(_, column)| *column == fold(name)),
            E::CompoundIdentifier(parts) => match parts.as_slice() {
                [qualifier, name] => self.booleans.iter().any(|(q, c)| *q == fold(qualifier) && *c == fold(name)),
                _ => false,
            },
            E::Nested(inner) => self.is_boolean(inner),
            E::BinaryOp { op, .. } => is_comparison(op) || matches!(op, BinaryOperator::And | BinaryOperator::Or),
            E::UnaryOp { op: ast::UnaryOperator::Not, .. }
            | E::IsNull(_)
            | E::IsNotNull(_)
            | E::IsTrue(_)
            | E::IsFalse(_)
            | E::IsNotTrue(_)
            | E::IsNotFalse(_)
            | E::Between { .. }
            | E::InList { .. }
            | E::Like { .. }
            | E::ILike { .. } => true,
            E::Value(value) => matches!(value.value, ast::Value::Boolean(_)),
            _ => false,
        }
    }

    fn has_column(&self, name: &str) -> bool {
        self.relations.iter().any(|(_, columns)| columns.iter().any(|c| c == name))
    }

    fn has_qualifier(&self, qualifier: &str) -> bool {
        self.relations.iter().any(|(q, _)| q == qualifier)
    }
}

/// A subquery over one table that meets the outer query through equalities (see [`Binder::correlated_select`]).
struct Correlated<'q> {
    inner: &'q Select,
    /// The equalities' (inner, outer) sides.
    keys: Vec<(E, E)>,
    /// The rest of its WHERE as text (` WHERE (c1) AND (c2)`, or empty).
    local: String,
    /// One comparison other than `=` with the outer row, inner side first (`b.x < a.y`), for EXISTS only.
    residual: Option<(E, BinaryOperator, E)>,
}

/// The inner rows a scalar subquery's join is made of (see [`Binder::rows_as_join`]).
struct Rows<'q> {
    /// The subquery's SELECT (its one select item, DISTINCT).
    inner: &'q Select,
    /// The (inner, outer) sides of the equalities that meet the outer row.
    keys: Vec<(E, E)>,
    /// The rest of its WHERE as text (` WHERE (c1) AND (c2)`, or empty).
    local: String,
    /// Its FROM as text.
    from: String,
    /// Whether the keys are the inner table's primary key (a row per key at most).
    primary_key: bool,
    /// What the rows are grouped (or numbered) by, when not the keys' inner sides: columns the keys are
    /// computed from, cheaper to group by.
    grouping: Option<Vec<String>>,
    /// The outer references [`OUTER_VALUES`]' columns stand for (none when the rows are keyed by equalities).
    outer_values: &'q [E],
    /// The names its FROM has.
    names: Names,
}

/// A correlated subquery made uncorrelated over the distinct values of the outer expressions it reads (see
/// [`Binder::over_outer_values`]).
struct OverOuterValues {
    /// The subquery's SELECT, each outer reference replaced by a column of [`OUTER_VALUES`], which its FROM joins
    /// first (last after a RIGHT or FULL join).
    inner: Select,
    /// The outer references, in the order of their columns (`__numadb_d<i>`).
    references: Vec<E>,
    /// The names the SELECT's FROM has, [`OUTER_VALUES`] included.
    names: Names,
    /// The relation of the distinct outer values: `(SELECT DISTINCT … FROM …)`.
    values: String,
    /// Whether `inner` reads the subquery's groups, windowed or numbered rows as a subquery in FROM
    /// ([`groups_as_rows`]) rather than its rows.
    over_groups: bool,
}

/// The subqueries inside a correlated subquery's SELECT (scalar, EXISTS, IN, ANY, ALL; not those in FROM), each
/// replaced by `SELECT __numadb_nested<i>` while [`Binder::over_outer_values`] rewrites the SELECT around them, and
/// put back after ([`NestedQueries::restore`]).
#[derive(Default)]
struct NestedQueries {
    taken: Vec<ast::Query>,
}

const NESTED: &str = "__numadb_nested";

impl NestedQueries {
    /// Sets aside the subqueries of `select`'s own expressions (those in FROM keep theirs). Taken before the
    /// visitor goes into an expression, so a subquery's own expressions are not visited.
    fn take(&mut self, select: &mut Select) {
        let taken = &mut self.taken;
        own_expressions_mut(
            select,
            0,
            |expr| {
                if let E::Subquery(query) | E::Exists { subquery: query, .. } | E::InSubquery { subquery: query, .. } =
                    expr
                    && let Some(placeholder) = Parser::new(&PostgreSqlDialect {})
                        .try_with_sql(&format!("SELECT {NESTED}{}", taken.len()))
                        .ok()
                        .and_then(|mut parser| parser.parse_query().ok())
                {
                    taken.push(std::mem::replace(query.as_mut(), *placeholder));
                }
            },
            |_| {},
        );
    }

    /// Puts the subqueries back in the rewritten SELECT; `None` if one is missing.
    fn restore(&self, select: &mut Select) -> Option<()> {
        let mut restored = 0;
        let _ = ast::visit_expressions_mut(select, |e: &mut E| {
            if let E::Subquery(query) | E::Exists { subquery: query, .. } | E::InSubquery { subquery: query, .. } = e
                && let SetExpr::Select(placeholder) = query.body.as_ref()
                && let [ast::SelectItem::UnnamedExpr(E::Identifier(name))] = placeholder.projection.as_slice()
                && let Some(original) = name
                    .value
                    .strip_prefix(NESTED)
                    .and_then(|i| i.parse::<usize>().ok())
                    .and_then(|i| self.taken.get(i))
            {
                **query = original.clone();
                restored += 1;
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        (restored == self.taken.len()).then_some(())
    }
}

/// The rows a `LIMIT` keeps: how many it skips (OFFSET), and how many then (none: all).
type Kept = (u64, Option<u64>);

/// The relation of the distinct outer values in [`OverOuterValues`].
const OUTER_VALUES: &str = "__numadb_dd";

impl OverOuterValues {
    /// The rows for [`Binder::rows_as_join`]: each outer reference is met through two keys, its value (with NULL
    /// as `'0'`) and whether it is NULL, so that an outer row whose reference is NULL meets the inner rows
    /// computed for NULL (a join's `=` never meets NULL).
    fn rows(&self) -> Option<Rows<'_>> {
        let parse = |text: String| Parser::new(&PostgreSqlDialect {}).try_with_sql(&text).ok()?.parse_expr().ok();
        let mut keys = Vec::new();
        for (i, reference) in self.references.iter().enumerate() {
            let column = format!("{OUTER_VALUES}.__numadb_d{i}");
            keys.push((parse(format!("coalesce({column}, '0')"))?, parse(format!("coalesce({reference}, '0')"))?));
            keys.push((parse(format!("{column} IS NULL"))?, parse(format!("{reference} IS NULL"))?));
        }
        let local = match &self.inner.selection {
            Some(selection) => format!(" WHERE {selection}"),
            None => String::new(),
        };
        let from = self.inner.from.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        let names = Names {
            relations: self.names.relations.clone(),
            booleans: self.names.booleans.clone(),
            from,
            filter: String::new(),
        };
        // Grouped by the outer values themselves: NULLs group together, and the keys are one value per group.
        let grouping = Some((0..self.references.len()).map(|i| format!("{OUTER_VALUES}.__numadb_d{i}")).collect());
        Some(Rows {
            inner: &self.inner,
            keys,
            local,
            from: names.from.clone(),
            primary_key: false,
            grouping,
            outer_values: &self.references,
            names,
        })
    }
}

/// Which scope an expression's names come from.
#[derive(Default)]
struct Refs {
    inner: bool,
    outer: bool,
}

impl Binder<'_> {
    /// The SELECT with its correlated `EXISTS`/`NOT EXISTS`/`IN` conjuncts in WHERE, and its aggregating scalar
    /// subqueries in WHERE and (when it is not grouped) the select list, turned into joins, if it has any that can
    /// be (see the module's documentation); `None` leaves it as it is.
    pub(super) fn decorrelate(&self, select: &Select) -> Option<Select> {
        let without_having;
        let select = match self.lone_having_as_case(select) {
            Some(rewritten) => {
                without_having = rewritten;
                &without_having
            }
            None => select,
        };
        let mut conjuncts = Vec::new();
        if let Some(selection) = &select.selection {
            split_and(selection, &mut conjuncts);
        }
        // Scalar subqueries in the select list too. A grouped query may name only its grouped expressions in a
        // subquery: under a plain GROUP BY, one whose outer keys are grouped expressions is rewritten, and the
        // join's columns (one value per key, so per group) are grouped too. An aggregating query without GROUP BY
        // names no column outside an aggregate: it is left to report 42803 as PostgreSQL does.
        let grouped_by = match &select.group_by {
            ast::GroupByExpr::Expressions(e, m) if m.is_empty() => Some(e.clone()),
            _ => None,
        }
        .filter(|e| e.iter().all(|e| !matches!(e, E::Rollup(_) | E::Cube(_) | E::GroupingSets(_))));
        let ungrouped = grouped_by.as_ref().is_some_and(Vec::is_empty) && select.having.is_none();
        let in_list = (ungrouped || grouped_by.as_ref().is_some_and(|e| !e.is_empty()))
            && select.projection.iter().any(|item| item.to_string().to_uppercase().contains("SELECT"));
        if !conjuncts.iter().any(|c| matches!(c, E::Exists { .. } | E::InSubquery { negated: false, .. }))
            && !select.selection.as_ref().is_some_and(contains_subquery)
            && !in_list
        {
            return None;
        }
        let mut outer = self.names_in(&select.from)?;
        outer.filter = self.values_filter(&conjuncts, &outer);
        let mut rewritten = select.clone();
        let mut kept: Vec<E> = Vec::new();
        let mut joins: Vec<ast::Join> = Vec::new();
        for &conjunct in &conjuncts {
            let hidden = format!("{HIDDEN_RELATION}{}", joins.len() + 1);
            match self.as_join(conjunct, &outer, &hidden) {
                Some((join, condition)) => {
                    joins.push(join);
                    kept.extend(condition);
                }
                None => kept.push(conjunct.clone()),
            }
        }
        for conjunct in &mut kept {
            self.rewrite_scalars(conjunct, &outer, &mut joins);
        }
        if in_list {
            for item in &mut rewritten.projection {
                let (mut expr, alias) = match &*item {
                    // The column keeps the name the subquery gave it.
                    ast::SelectItem::UnnamedExpr(expr) => {
                        (expr.clone(), ast::Ident::with_quote('"', super::column_name(expr)))
                    }
                    ast::SelectItem::ExprWithAlias { expr, alias } => (expr.clone(), alias.clone()),
                    _ => continue,
                };
                let (before, original) = (joins.len(), expr.clone());
                self.rewrite_scalars(&mut expr, &outer, &mut joins);
                if joins.len() == before && expr == original {
                    continue;
                }
                if let Some(grouped) = grouped_by.as_ref().filter(|e| !e.is_empty()) {
                    // As PostgreSQL asks, every column a key reads is itself grouped (`o.k + 1` under GROUP BY
                    // o.k, not `o.k % 3` under GROUP BY o.k % 3).
                    let is_grouped =
                        |column: &E| grouped.iter().any(|g| same_column(by_position(g, &select.projection), column));
                    let keys_grouped =
                        |join: &ast::Join| outer_keys(join).iter().all(|key| columns_of(key).iter().all(&is_grouped));
                    if !joins[before..].iter().all(keys_grouped) {
                        joins.truncate(before);
                        continue;
                    }
                    if let ast::GroupByExpr::Expressions(group_by, _) = &mut rewritten.group_by {
                        for column in hidden_columns(&expr) {
                            if !group_by.contains(&column) {
                                group_by.push(column);
                            }
                        }
                    }
                }
                *item = ast::SelectItem::ExprWithAlias { expr, alias };
            }
        }
        // Nothing rewritten (EXISTS over an aggregate becomes TRUE without a join).
        if joins.is_empty() && rewritten.projection == select.projection && kept.iter().eq(conjuncts.iter().copied()) {
            return None;
        }
        rewritten.from.last_mut()?.joins.extend(joins);
        rewritten.selection = kept.into_iter().reduce(|left, right| E::BinaryOp {
            left: Box::new(left),
            op: BinaryOperator::And,
            right: Box::new(right),
        });
        Some(rewritten)
    }

    /// `select` with each correlated scalar or `[NOT] EXISTS` subquery that aggregates with HAVING but without
    /// GROUP BY (or with `GROUP BY ()` alone) written without HAVING; `None` where there is none. Such a subquery
    /// has one row when HAVING is TRUE and none otherwise, so `(SELECT e … HAVING h)` is `(SELECT CASE WHEN h
    /// THEN e END …)` (NULL for no row, as a scalar subquery's), and `EXISTS (SELECT … HAVING h)` is `(SELECT (h)
    /// IS TRUE …)`, one row always; the rewrites then take them as aggregating scalar subqueries. (The groups of
    /// [`groups_as_rows`] would lose an outer value none of whose rows pass, whose aggregate is still a row here.)
    fn lone_having_as_case(&self, select: &Select) -> Option<Select> {
        // Every SELECT comes here, and few have a subquery with HAVING: looked for before anything is resolved or
        // cloned.
        let mut having = false;
        let items = select.projection.iter().filter_map(|item| match item {
            ast::SelectItem::UnnamedExpr(value) | ast::SelectItem::ExprWithAlias { expr: value, .. } => Some(value),
            _ => None,
        });
        for expr in select.selection.iter().chain(items) {
            let _ = ast::visit_expressions(expr, |e: &E| {
                if let E::Subquery(query) | E::Exists { subquery: query, .. } = e
                    && let SetExpr::Select(inner) = query.body.as_ref()
                {
                    having |= inner.having.is_some();
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
        }
        if !having {
            return None;
        }
        let outer = self.names_in(&select.from)?;
        let parse = |text: String| Parser::new(&PostgreSqlDialect {}).try_with_sql(&text).ok()?.parse_expr().ok();
        // The subquery's SELECT when it is one this takes: one SELECT reading the outer query, HAVING, no GROUP BY
        // but `()`, nothing after it that could drop its one row.
        let lone_having = |query: &ast::Query| -> Option<Select> {
            let SetExpr::Select(inner) = query.body.as_ref() else { return None };
            let no_groups = match &inner.group_by {
                ast::GroupByExpr::Expressions(e, m) => {
                    m.is_empty() && e.iter().all(|e| matches!(unnested(e), E::Tuple(t) if t.is_empty()))
                }
                ast::GroupByExpr::All(_) => false,
            };
            let plain = query.with.is_none()
                && query.limit_clause.is_none()
                && query.fetch.is_none()
                && query.locks.is_empty()
                && inner.distinct.is_none()
                && inner.into.is_none();
            (no_groups && plain && inner.having.is_some() && self.reads_outer(query, &outer) == Some(true))
                .then(|| (**inner).clone())
        };
        let mut changed = false;
        let mut rewrite = |expr: &mut E| {
            let _ = ast::visit_expressions_mut(expr, |e: &mut E| {
                let replacement = match &*e {
                    // HAVING makes a SELECT aggregate even without an aggregate call (one group); the rewrite keeps
                    // it aggregating only where its item or HAVING has one.
                    E::Subquery(query) => lone_having(query).filter(has_plain_aggregate).and_then(|mut inner| {
                        let having = inner.having.take()?;
                        // The item keeps its name (`count`, not `case`).
                        let (value, alias) = match inner.projection.as_slice() {
                            [ast::SelectItem::UnnamedExpr(value)] => {
                                (value, ast::Ident::with_quote('"', super::column_name(value)))
                            }
                            [ast::SelectItem::ExprWithAlias { expr, alias }] => (expr, alias.clone()),
                            _ => return None,
                        };
                        let expr = parse(format!("CASE WHEN {having} THEN {value} END"))?;
                        inner.projection = vec![ast::SelectItem::ExprWithAlias { expr, alias }];
                        inner.group_by = ast::GroupByExpr::Expressions(Vec::new(), Vec::new());
                        let mut query = (**query).clone();
                        *query.body = SetExpr::Select(Box::new(inner));
                        Some(E::Subquery(Box::new(query)))
                    }),
                    // Its select list only decides that it is valid: constants and aggregates are.
                    E::Exists { subquery, negated } => lone_having(subquery).and_then(|mut inner| {
                        let constant_or_aggregate = |item: &ast::SelectItem| match item {
                            ast::SelectItem::UnnamedExpr(value)
                            | ast::SelectItem::ExprWithAlias { expr: value, .. } => {
                                matches!(value, E::Value(_))
                                    || matches!(value, E::Function(f) if is_aggregate(&f.name.to_string()))
                            }
                            _ => false,
                        };
                        if !inner.projection.iter().all(constant_or_aggregate) {
                            return None;
                        }
                        let having = inner.having.take().filter(has_plain_aggregate)?;
                        inner.projection = vec![ast::SelectItem::UnnamedExpr(parse(format!("({having}) IS TRUE"))?)];
                        inner.group_by = ast::GroupByExpr::Expressions(Vec::new(), Vec::new());
                        let mut query = (**subquery).clone();
                        *query.body = SetExpr::Select(Box::new(inner));
                        let scalar = E::Subquery(Box::new(query));
                        Some(if *negated {
                            E::UnaryOp { op: ast::UnaryOperator::Not, expr: Box::new(E::Nested(Box::new(scalar))) }
                        } else {
                            scalar
                        })
                    }),
                    _ => None,
                };
                if let Some(replacement) = replacement {
                    *e = replacement;
                    changed = true;
                }
                std::ops::ControlFlow::<()>::Continue(())
            });
        };
        let mut select = select.clone();
        if let Some(selection) = &mut select.selection {
            rewrite(selection);
        }
        for item in &mut select.projection {
            if let ast::SelectItem::UnnamedExpr(value) | ast::SelectItem::ExprWithAlias { expr: value, .. } = item {
                rewrite(value);
            }
        }
        changed.then_some(select)
    }

    /// The SELECT with its `LATERAL` subquery in FROM (one; `JOIN LATERAL … ON`, `LEFT JOIN LATERAL … ON`, `,
    /// LATERAL`, `CROSS JOIN LATERAL`, after tables) made a plain subquery in FROM over the distinct values of the
    /// columns it reads from the relations to its left ([`Binder::over_outer_values`]), joined to them by those
    /// values; the FROM's items become one (commas are cross joins). A subquery that keeps `LIMIT n` rows (`OFFSET
    /// m`) in an order keeps them per outer value, numbered in that order: the top rows per group; an aggregating
    /// one gives every outer value its row. `None` where there is no LATERAL, or one this does not take (one
    /// without an alias, a second LATERAL, the forms [`Binder::over_outer_values`] refuses); binding then refuses it
    /// with 0A000.
    pub(super) fn lateral_as_join(&self, select: &Select) -> Option<Select> {
        let lateral = |f: &TableFactor| matches!(f, TableFactor::Derived { lateral: true, .. });
        if !select.from.iter().any(|t| lateral(&t.relation) || t.joins.iter().any(|j| lateral(&j.relation))) {
            return None;
        }
        let flat = one_from_item(select).from.into_iter().next()?;
        if lateral(&flat.relation) {
            return None;
        }
        let mut out = ast::TableWithJoins { relation: flat.relation, joins: Vec::new() };
        let mut conjuncts = Vec::new();
        if let Some(selection) = &select.selection {
            split_and(selection, &mut conjuncts);
        }
        let mut rewritten = false;
        for join in flat.joins {
            let TableFactor::Derived { lateral: true, subquery, alias: Some(alias), .. } = &join.relation else {
                out.joins.push(join);
                continue;
            };
            if rewritten {
                return None;
            }
            let (left, on) = match &join.join_operator {
                ast::JoinOperator::CrossJoin(ast::JoinConstraint::None) => (false, None),
                ast::JoinOperator::Join(ast::JoinConstraint::On(on))
                | ast::JoinOperator::Inner(ast::JoinConstraint::On(on)) => (false, Some(on)),
                ast::JoinOperator::Left(ast::JoinConstraint::On(on))
                | ast::JoinOperator::LeftOuter(ast::JoinConstraint::On(on)) => (true, Some(on)),
                _ => return None,
            };
            let mut outer = self.names_in(std::slice::from_ref(&out))?;
            outer.filter = self.values_filter(&conjuncts, &outer);
            match self.lateral_join(subquery, alias, &outer, left, on) {
                Some(join) => out.joins.push(join),
                // A LATERAL subquery that reads nothing of the relations to its left is a plain one.
                None if !self.reads_outer(subquery, &outer)? => {
                    let mut join = join.clone();
                    if let TableFactor::Derived { lateral, .. } = &mut join.relation {
                        *lateral = false;
                    }
                    out.joins.push(join);
                }
                None => return None,
            }
            rewritten = true;
        }
        // Any LATERAL left (one without an alias) is refused by the binder.
        if !rewritten {
            return None;
        }
        let mut select = select.clone();
        select.from = vec![out];
        Some(select)
    }

    /// The conjuncts of an outer query's WHERE that the relation of its distinct values
    /// ([`Binder::over_outer_values`]) tests over the outer FROM ([`testable_over_values`]), as text (` WHERE (c1)
    /// AND (c2)`, or empty). An outer row that fails one is never asked for a subquery's value, so its values need
    /// not be computed: less work (a nested loop over one outer row's value, not every row's, under `WHERE a.id =
    /// 5`), and no error from rows PostgreSQL never computes the subquery for. Where a conjunct that is not
    /// copied may guard the others (an uncorrelated subquery, a parameter, `random()`: PostgreSQL tests the
    /// cheapest conjuncts first, so `10 / k > 1` is asked only of the rows that pass `k <> (SELECT 0)`, before
    /// or after it), only those that cannot fail ([`cannot_fail`]) are copied. One with a correlated subquery,
    /// which PostgreSQL tests last, guards nothing.
    fn values_filter(&self, conjuncts: &[&E], outer: &Names) -> String {
        let testable: Vec<bool> = conjuncts.iter().map(|c| testable_over_values(c, outer)).collect();
        let guarded = conjuncts
            .iter()
            .zip(&testable)
            .any(|(conjunct, &testable)| !testable && !self.has_correlated_subquery(conjunct, outer));
        let kept: Vec<String> = conjuncts
            .iter()
            .zip(&testable)
            .filter(|(conjunct, testable)| **testable && (!guarded || cannot_fail(conjunct)))
            .map(|(conjunct, _)| format!("({conjunct})"))
            .collect();
        if kept.is_empty() { String::new() } else { format!(" WHERE {}", kept.join(" AND ")) }
    }

    /// Whether `expr` holds a subquery that reads `outer`'s names (one that cannot be told counts as not).
    fn has_correlated_subquery(&self, expr: &E, outer: &Names) -> bool {
        let mut correlated = false;
        let _ = ast::visit_expressions(expr, |e: &E| {
            if let E::Subquery(query) | E::Exists { subquery: query, .. } | E::InSubquery { subquery: query, .. } = e {
                correlated |= self.reads_outer(query, outer) == Some(true);
            }
            std::ops::ControlFlow::<()>::Continue(())
        });
        correlated
    }

    /// Whether a subquery (one SELECT over tables) names a column of `outer`'s that its own FROM does not have;
    /// `None` when that cannot be told.
    fn reads_outer(&self, subquery: &ast::Query, outer: &Names) -> Option<bool> {
        let SetExpr::Select(inner) = subquery.body.as_ref() else { return None };
        if subquery.to_string().to_uppercase().matches("SELECT").count() != 1 {
            return None;
        }
        let inner = if inner.from.is_empty() {
            Names { relations: Vec::new(), booleans: Vec::new(), from: String::new(), filter: String::new() }
        } else {
            self.names_in(&inner.from)?
        };
        Some(references(&E::Subquery(Box::new(subquery.clone())), &inner, outer).outer)
    }

    /// One `LATERAL` subquery (named `alias`) as the join of [`Binder::lateral_as_join`] with `outer`, the
    /// relations to its left: a left join when `left`, with `on` besides the outer values' keys.
    fn lateral_join(
        &self,
        subquery: &ast::Query,
        alias: &ast::TableAlias,
        outer: &Names,
        left: bool,
        on: Option<&E>,
    ) -> Option<ast::Join> {
        let (offset, limit) = kept_rows(subquery)?;
        if subquery.fetch.is_some() {
            return None;
        }
        let mut order = order_keys(subquery)?;
        let mut unlimited = subquery.clone();
        (unlimited.order_by, unlimited.limit_clause) = (None, None);
        let SetExpr::Select(inner) = unlimited.body.as_ref() else { return None };
        // A grouped subquery's aggregates are per group, and its groups its rows ([`groups_as_rows`]).
        let aggregates = grouped_select(&unlimited).is_none() && has_plain_aggregate(&inner.projection);
        let limited = limit.is_some() || offset > 0;
        let distinct = inner.distinct.is_some();
        if (aggregates && limited) || (distinct && (aggregates || limited)) {
            return None;
        }
        let general = self.over_outer_values(&unlimited, Some(&mut order), outer, false, None)?;
        let rows = general.rows()?;
        for key in &order {
            // A position or an output column's name would mean something else inside OVER (…).
            if !limited || references(&key.expr, &rows.names, outer).inner {
                continue;
            }
            return None;
        }
        let keys: Vec<String> = rows.keys.iter().map(|(inner, _)| inner.to_string()).collect();
        let select = &general.inner;
        let text = if aggregates {
            // One row per outer value, also where no inner row meets it: the values left-joined to the aggregates
            // grouped by them, each aggregate a column there (0 for a count over no rows).
            let mut items = E::Tuple(
                select
                    .projection
                    .iter()
                    .map(|item| match item {
                        ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => {
                            Some(e.clone())
                        }
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?,
            );
            let calls = carry_aggregates(&mut items, "__numadb_agg")?;
            let E::Tuple(items) = items else { return None };
            let mut columns = Vec::new();
            for (item, original) in items.iter().zip(&select.projection) {
                let name = match original {
                    ast::SelectItem::ExprWithAlias { alias, .. } => fold(alias),
                    ast::SelectItem::UnnamedExpr(e) => super::column_name(e),
                    _ => return None,
                };
                columns.push(format!("{item} AS {}", ast::Ident::with_quote('"', name)));
            }
            columns.extend(keys.iter().enumerate().map(|(i, k)| format!("{k} AS __numadb_lk{i}")));
            let grouping = rows.grouping.as_ref()?;
            let mut grouped: Vec<String> =
                grouping.iter().enumerate().map(|(i, g)| format!("{g} AS __numadb_g{i}")).collect();
            grouped.extend(calls.iter().enumerate().map(|(i, call)| format!("{call} AS __numadb_a{i}")));
            let on: Vec<String> = grouping
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    format!(
                        "coalesce(__numadb_agg.__numadb_g{i}, '0') = coalesce({g}, '0') AND \
                         (__numadb_agg.__numadb_g{i} IS NULL) = ({g} IS NULL)"
                    )
                })
                .collect();
            format!(
                "SELECT {} FROM {} AS {OUTER_VALUES} LEFT JOIN (SELECT {} FROM {}{} GROUP BY {}) AS __numadb_agg ON {}",
                columns.join(", "),
                general.values,
                grouped.join(", "),
                rows.from,
                rows.local,
                grouping.join(", "),
                on.join(" AND ")
            )
        } else if limited {
            // Each user column under a name of its own, then back under its name in the subquery's order.
            let mut named = Vec::new();
            let mut columns = Vec::new();
            for (i, item) in select.projection.iter().enumerate() {
                let (expr, name) = match item {
                    ast::SelectItem::UnnamedExpr(e) => (e.clone(), super::column_name(e)),
                    ast::SelectItem::ExprWithAlias { expr, alias } => (expr.clone(), fold(alias)),
                    _ => return None,
                };
                named.push(format!("{expr} AS __numadb_o{i}"));
                columns.push(format!("__numadb_o{i} AS {}", ast::Ident::with_quote('"', name)));
            }
            named.extend(keys.iter().enumerate().map(|(i, k)| format!("{k} AS __numadb_lk{i}")));
            columns.extend((0..keys.len()).map(|i| format!("__numadb_lk{i}")));
            let grouping = rows.grouping.as_ref()?.join(", ");
            let order: Vec<String> = order.iter().map(ToString::to_string).collect();
            let order = if order.is_empty() { String::new() } else { format!(" ORDER BY {}", order.join(", ")) };
            let last = match limit {
                Some(limit) => format!(" AND __numadb_rn <= {}", offset.checked_add(limit)?),
                None => String::new(),
            };
            format!(
                "SELECT {} FROM (SELECT {}, row_number() OVER (PARTITION BY {grouping}{order}) AS __numadb_rn FROM \
                 {}{}) AS __numadb_top WHERE __numadb_rn > {offset}{last}",
                columns.join(", "),
                named.join(", "),
                rows.from,
                rows.local
            )
        } else {
            let keyed = keys.iter().enumerate().map(|(i, k)| format!("{k} AS __numadb_lk{i}"));
            let items: Vec<String> = select.projection.iter().map(ToString::to_string).chain(keyed).collect();
            let distinct = if select.distinct.is_some() { "DISTINCT " } else { "" };
            format!("SELECT {distinct}{} FROM {}{}", items.join(", "), rows.from, rows.local)
        };
        let name = fold(&alias.name);
        let mut conditions: Vec<String> =
            rows.keys.iter().enumerate().map(|(i, (_, o))| format!("\"{name}\".__numadb_lk{i} = ({o})")).collect();
        conditions.extend(on.map(|on| format!("({on})")));
        let kind = if left { "LEFT JOIN" } else { "JOIN" };
        let alias = ast::TableAlias { explicit: false, ..alias.clone() };
        parse_join(&format!("SELECT 1 FROM x {kind} ({text}) AS {alias} ON {}", conditions.join(" AND ")))
    }

    /// The qualifiers and column names of a FROM of tables and `WITH` queries (`None` for anything else).
    fn names_in(&self, from: &[ast::TableWithJoins]) -> Option<Names> {
        let (mut relations, mut booleans) = (Vec::new(), Vec::new());
        for item in from {
            for factor in std::iter::once(&item.relation).chain(item.joins.iter().map(|j| &j.relation)) {
                let (mut columns, alias, qualifier): (Vec<(String, DataType)>, _, _) = match factor {
                    TableFactor::Table { name, alias, args: None, .. } => {
                        let columns = match self.cte_or_view(name).ok()? {
                            Some(query) => query.columns.iter().map(|c| (c.name.clone(), c.data_type)).collect(),
                            None => {
                                let table = self.source.resolve(name).ok()?;
                                table.columns().iter().map(|c| (c.name.clone(), c.data_type)).collect()
                            }
                        };
                        (columns, alias, object_name(name).last().cloned().unwrap_or_default())
                    }
                    // A subquery in FROM (of one SELECT: planning one with subqueries of its own would list them
                    // twice among the statement's) has the columns its plan has.
                    TableFactor::Derived { lateral: false, subquery, alias: alias @ Some(named), .. }
                        if subquery.to_string().to_uppercase().matches("SELECT").count() == 1 =>
                    {
                        let query = self.plan_query_inner(subquery).ok()?;
                        let columns = query.columns.iter().map(|c| (c.name.clone(), c.data_type)).collect();
                        (columns, alias, fold(&named.name))
                    }
                    _ => return None,
                };
                if let Some(alias) = alias {
                    columns.iter_mut().zip(&alias.columns).for_each(|((c, _), a)| *c = fold(&a.name));
                }
                let qualifier = match alias {
                    Some(alias) => fold(&alias.name),
                    None => qualifier,
                };
                for (column, data_type) in &columns {
                    if *data_type == DataType::Boolean {
                        booleans.push((qualifier.clone(), column.clone()));
                    }
                }
                relations.push((qualifier, columns.into_iter().map(|(c, _)| c).collect()));
            }
        }
        let from = from.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
        Some(Names { relations, booleans, from, filter: String::new() })
    }

    /// Replaces the correlated scalar subqueries in `expr` (under comparisons, arithmetic, BETWEEN, IS [NOT]
    /// NULL, casts, CASE, function arguments) that [`Binder::scalar_as_join`] can rewrite, adding their joins to
    /// `joins`.
    fn rewrite_scalars(&self, expr: &mut E, outer: &Names, joins: &mut Vec<ast::Join>) {
        match expr {
            E::Subquery(query) => {
                let hidden = format!("{HIDDEN_RELATION}{}", joins.len() + 1);
                if let Some((join, replacement)) = self.scalar_as_join(query, outer, &hidden, false) {
                    joins.push(join);
                    *expr = replacement;
                }
            }
            E::Exists { .. } | E::InSubquery { .. } | E::AnyOp { .. } | E::AllOp { .. }
                if let Some(replacement) = one_row_quantified(expr) =>
            {
                *expr = replacement;
                self.rewrite_scalars(expr, outer, joins);
            }
            E::Exists { subquery, negated } => {
                let hidden = format!("{HIDDEN_RELATION}{}", joins.len() + 1);
                if let Some((join, replacement)) = self.exists_as_mark(subquery, *negated, outer, &hidden) {
                    joins.push(join);
                    *expr = replacement;
                } else if let Some(replacement) = self.quantified_as_scalar(expr, outer, joins) {
                    *expr = replacement;
                }
            }
            E::InSubquery { .. } | E::AnyOp { .. } | E::AllOp { .. } => {
                if let Some(replacement) = self.quantified_as_scalar(expr, outer, joins) {
                    *expr = replacement;
                }
            }
            E::BinaryOp { left, right, .. } | E::IsDistinctFrom(left, right) | E::IsNotDistinctFrom(left, right) => {
                self.rewrite_scalars(left, outer, joins);
                self.rewrite_scalars(right, outer, joins);
            }
            E::UnaryOp { expr, .. }
            | E::Nested(expr)
            | E::IsNull(expr)
            | E::IsNotNull(expr)
            | E::IsTrue(expr)
            | E::IsNotTrue(expr)
            | E::IsFalse(expr)
            | E::IsNotFalse(expr)
            | E::IsUnknown(expr)
            | E::IsNotUnknown(expr)
            | E::Cast { expr, .. } => self.rewrite_scalars(expr, outer, joins),
            E::InList { expr, list, .. } => {
                self.rewrite_scalars(expr, outer, joins);
                for item in list {
                    self.rewrite_scalars(item, outer, joins);
                }
            }
            E::Case { operand, conditions, else_result, .. } => {
                for part in operand.iter_mut().chain(else_result.iter_mut()) {
                    self.rewrite_scalars(part, outer, joins);
                }
                for when in conditions {
                    self.rewrite_scalars(&mut when.condition, outer, joins);
                    self.rewrite_scalars(&mut when.result, outer, joins);
                }
            }
            E::Between { expr, low, high, .. } => {
                for part in [expr, low, high] {
                    self.rewrite_scalars(part, outer, joins);
                }
            }
            E::Function(function) => {
                if let ast::FunctionArguments::List(list) = &mut function.args {
                    for argument in &mut list.args {
                        if let ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) = argument {
                            self.rewrite_scalars(e, outer, joins);
                        }
                    }
                }
            }
            _ => {}
        }
    }

    /// A correlated `[NOT] EXISTS` anywhere in an expression (under OR, NOT, CASE's neighbours; in the select list)
    /// as a left join that marks the outer rows it holds for, and the test of the mark that replaces it: the
    /// inner rows' distinct keys (`JOIN … ON` meets an outer row at most once), or with one other comparison their
    /// least and greatest per key group ([`exists_with_residual`]). EXISTS is TRUE or FALSE, never NULL, and so
    /// is the test.
    fn exists_as_mark(
        &self,
        subquery: &ast::Query,
        negated: bool,
        outer: &Names,
        hidden: &str,
    ) -> Option<(ast::Join, E)> {
        let (join, test) = self.subquery_join(subquery, negated, None, true, outer, hidden)?;
        Some((join, E::Nested(Box::new(test?))))
    }

    /// A correlated scalar subquery over one table's rows meeting the outer row through equalities
    /// (`(SELECT avg(b.x) FROM b WHERE b.k = a.k AND b.y > 0)`), as a left join that meets each outer row at most
    /// once (see the module's documentation for each form), and the expression that replaces it: for an aggregate,
    /// its expression over the group's aggregates, which where no group matches have their value over no rows
    /// (NULL, or 0 for a count); for a value of the rows (`(SELECT b.name FROM b WHERE b.k = a.k)`), the one row's
    /// value, NULL for none and 21000 for several ([`SINGLE_ROW`]).
    fn scalar_as_join(
        &self,
        subquery: &ast::Query,
        outer: &Names,
        hidden: &str,
        trusted: bool,
    ) -> Option<(ast::Join, E)> {
        let (first_in_order, skipped, unlimited) = first_row_order(subquery)?;
        let keyed = match self.correlated_select(&unlimited, outer).filter(|_| !has_window(subquery)) {
            Some(Correlated { inner, keys, local, residual: None }) => self.names_in(&inner.from).and_then(|names| {
                let primary_key = self.is_primary_key(&inner.from[0], &keys);
                let from = inner.from[0].to_string();
                let rows = Rows { inner, keys, local, from, primary_key, grouping: None, outer_values: &[], names };
                self.rows_as_join(first_in_order.clone(), skipped, &rows, outer, hidden)
            }),
            _ => None,
        };
        keyed.or_else(|| {
            let mut order = first_in_order;
            let general = self.over_outer_values(&unlimited, order.as_mut(), outer, trusted, None)?;
            self.rows_as_join(order, skipped, &general.rows()?, outer, hidden)
        })
    }

    /// The left join of [`Binder::scalar_as_join`] over the inner rows `rows` meeting the outer row through its
    /// keys, and the expression that takes the subquery's place; `first_in_order` and `skipped` as
    /// [`first_row_order`] says.
    fn rows_as_join(
        &self,
        first_in_order: Option<Vec<ast::OrderByExpr>>,
        skipped: u64,
        rows: &Rows<'_>,
        outer: &Names,
        hidden: &str,
    ) -> Option<(ast::Join, E)> {
        let Rows { inner, keys, local, from, primary_key, grouping, outer_values, names: inner_names } = rows;
        let [ast::SelectItem::UnnamedExpr(value) | ast::SelectItem::ExprWithAlias { expr: value, .. }] =
            inner.projection.as_slice()
        else {
            return None;
        };
        // Outer columns outside aggregates are read after the join, where they are in scope (`(SELECT b.y + a.x
        // FROM b WHERE b.k = a.k)`); inside one, they are part of each inner row's value ([`over_outer_values`]).
        if contains_subquery(value) || outer_in_aggregate(value, inner_names, outer) {
            return None;
        }
        let mut items = key_items(keys);
        let group_by: Vec<String> =
            grouping.clone().unwrap_or_else(|| keys.iter().map(|(inner, _)| format!("{inner}")).collect());
        let group_by = group_by.join(", ");
        let mut value = value.clone();
        // The joined relation's SELECT, and the expression over its columns that takes the subquery's place.
        if skipped > 0 && first_in_order.is_some() && has_aggregate(&value) {
            return None;
        }
        let (rows, replacement) = if let Some(order) = first_in_order.filter(|_| !has_aggregate(&value)) {
            // The first row of each key's rows in the subquery's order (`ORDER BY b.t DESC LIMIT 1`): numbered in
            // that order per key, its columns joined, and the value computed from them for the outer rows that
            // ask for it. (PostgreSQL computes it below its sort, for every row of the key, so where a later row
            // fails it fails and numadb does not.)
            // Rows skipped before DISTINCT would be counted before it.
            if skipped > 0 && inner.distinct.is_some() {
                return None;
            }
            let aliased = |name: &ast::Ident| {
                inner.projection.iter().any(
                    |item| matches!(item, ast::SelectItem::ExprWithAlias { alias, .. } if fold(alias) == fold(name)),
                )
            };
            for key in &order {
                let refs = references(&key.expr, inner_names, outer);
                // A position or an output column's name (which ORDER BY takes before an input column's) would mean
                // something else inside OVER (…).
                if refs.outer
                    || !refs.inner
                    || contains_subquery(&key.expr)
                    || matches!(unnested(&key.expr), E::Identifier(name) if aliased(name))
                {
                    return None;
                }
            }
            let order: Vec<String> = order.iter().map(ToString::to_string).collect();
            let order = if order.is_empty() { String::new() } else { format!(" ORDER BY {}", order.join(", ")) };
            let columns = carry_columns(&mut value, inner_names, hidden);
            let mut outputs: Vec<String> = (0..keys.len()).map(|i| format!("__numadb_k{i}")).collect();
            for (i, column) in columns.iter().enumerate() {
                items.push(format!("{column} AS __numadb_c{i}"));
                outputs.push(format!("__numadb_c{i}"));
            }
            let rows = format!(
                "SELECT {}, 1 AS __numadb_n FROM (SELECT {}, row_number() OVER (PARTITION BY {group_by}{order}) AS \
                 __numadb_rn FROM {from}{local}) AS __numadb_first WHERE __numadb_rn = {}",
                outputs.join(", "),
                items.join(", "),
                skipped.checked_add(1)?,
            );
            // NULL where no row matched, whatever the value (`(SELECT 1 … LIMIT 1)`).
            (rows, format!("{SINGLE_ROW}({value}, {hidden}.__numadb_n)"))
        } else if has_aggregate(&value) {
            // An aggregate has exactly one value per outer row. Each aggregate call is a column of the group (of
            // its type: NULL where no group matched, or 0 for a count), and the expression around them is computed
            // after the join, for the outer rows that ask for it (`1/count(*)` fails only where none matched).
            for (i, aggregate) in carry_aggregates(&mut value, hidden)?.iter().enumerate() {
                items.push(format!("{aggregate} AS __numadb_a{i}"));
            }
            // Outside its aggregates, the value is computed after the join, in the outer query: an outer value is
            // the outer column again, and an inner column is an error (PostgreSQL's 42803, refused here).
            restore_outer_values(&mut value, outer_values);
            if references(&value, inner_names, outer).inner {
                return None;
            }
            (format!("SELECT {} FROM {from}{local} GROUP BY {group_by}", items.join(", ")), value.to_string())
        } else {
            if inner.distinct.is_some() {
                // Distinct rows are not counted by the group's count(*).
                return None;
            }
            // Rows, which may be none (NULL) or several (21000, raised only for an outer row that meets several,
            // as PostgreSQL raises it only when it evaluates the subquery for that row): the group's count says
            // which. With one row, the least of each column it reads is that row's, and the value is computed
            // from them after the join, for the outer rows that ask for it only (`100 / b.x` fails only where
            // PostgreSQL evaluates it).
            let columns = carry_columns(&mut value, inner_names, hidden);
            let rows = if *primary_key {
                // The key is the table's primary key: at most one row per key, so no grouping (a lookup by key
                // is a plain left join).
                for (i, column) in columns.iter().enumerate() {
                    items.push(format!("{column} AS __numadb_c{i}"));
                }
                format!("SELECT {}, 1 AS __numadb_n FROM {from}{local}", items.join(", "))
            } else {
                for (i, column) in columns.iter().enumerate() {
                    items.push(format!("{LEAST_OF_ANY_TYPE}({column}) AS __numadb_c{i}"));
                }
                format!("SELECT {}, count(*) AS __numadb_n FROM {from}{local} GROUP BY {group_by}", items.join(", "))
            };
            (rows, format!("{SINGLE_ROW}({value}, {hidden}.__numadb_n)"))
        };
        let on = key_conditions(keys, hidden).join(" AND ");
        let join = parse_join(&format!("SELECT 1 FROM x LEFT JOIN ({rows}) AS {hidden} ON {on}"))?;
        let replacement = Parser::new(&PostgreSqlDialect {}).try_with_sql(&replacement).ok()?.parse_expr().ok()?;
        Some((join, replacement))
    }

    /// A correlated subquery of a form the keyed rewrites do not take (other comparisons with the outer row, outer
    /// columns in its select list or ORDER BY, joins in its FROM), made uncorrelated over the distinct values of
    /// the outer references it reads: `(SELECT sum(b.y) FROM b WHERE b.t <= a.t)` becomes the rows of
    /// `(SELECT DISTINCT a.t AS __numadb_d0 FROM <the outer FROM>) AS __numadb_dd CROSS JOIN b WHERE b.t <=
    /// __numadb_dd.__numadb_d0`, which [`Binder::rows_as_join`] groups (or numbers) by those values and joins back
    /// to the outer rows by them. That is the subquery computed once per distinct outer value rather than once per
    /// outer row, the same answer. `order` (a first-row subquery's ORDER BY) has its outer references replaced
    /// too. A grouped subquery, or one with window functions, becomes an ungrouped one over its groups or rows
    /// ([`groups_as_rows`]). `None` for a subquery that reads no outer column, or that this does not take: HAVING
    /// without GROUP BY, LIMIT, WITH, a FROM of subqueries that have subqueries, a subquery inside that reads the
    /// outer query and is not one plain SELECT, an aggregate over outer columns only (PostgreSQL's aggregate of
    /// the outer query), an aggregate under a window without GROUP BY.
    fn over_outer_values(
        &self,
        subquery: &ast::Query,
        mut order: Option<&mut Vec<ast::OrderByExpr>>,
        outer: &Names,
        outer_aggregates: bool,
        kept: Option<Kept>,
    ) -> Option<OverOuterValues> {
        let (inner, grouped) = match ungrouped_select(subquery) {
            Some(inner) => (inner, false),
            None => (grouped_select(subquery)?, true),
        };
        // Subqueries inside are set aside while the outer references are replaced: their names are theirs.
        let mut nested = NestedQueries::default();
        let inner = &mut one_from_item(inner);
        nested.take(inner);
        if inner.from.len() != 1
            || order.as_ref().is_some_and(|order| order.iter().any(|key| contains_subquery(&key.expr)))
        {
            return None;
        }
        let inner_names = self.names_in(&inner.from)?;
        // One that reads the outer query too has its outer references replaced as well, by its own names (a
        // subquery of one SELECT without subqueries of its own).
        let mut nested_scopes = Vec::new();
        for query in &nested.taken {
            nested_scopes.push(match self.nested_scope(query, &inner_names) {
                Some(scope) if references(&E::Subquery(Box::new(query.clone())), &scope, outer).outer => {
                    if query.to_string().to_uppercase().matches("SELECT").count() != 1 {
                        return None;
                    }
                    Some(scope)
                }
                Some(_) => None,
                None => return None,
            });
        }
        let inner = &*inner;
        let outer_only = |expr: &E| {
            let refs = references(expr, &inner_names, outer);
            refs.outer && !refs.inner
        };
        let mut outer_aggregate = false;
        let projected = inner.projection.iter().filter_map(|item| match item {
            ast::SelectItem::UnnamedExpr(expr) | ast::SelectItem::ExprWithAlias { expr, .. } => Some(expr),
            _ => None,
        });
        let ordered = order.iter().flat_map(|order| order.iter().map(|key| &key.expr));
        for expr in projected.chain(inner.having.as_ref()).chain(ordered) {
            let _ = ast::visit_expressions(expr, |e: &E| {
                outer_aggregate |= matches!(e, E::Function(f) if is_aggregate(&f.name.to_string())) && outer_only(e);
                std::ops::ControlFlow::<()>::Continue(())
            });
        }
        if outer_aggregate && !outer_aggregates {
            return None;
        }
        // An output column's name in ORDER BY is the subquery's.
        let aliases: Vec<String> = inner
            .projection
            .iter()
            .filter_map(|item| match item {
                ast::SelectItem::ExprWithAlias { alias, .. } => Some(fold(alias)),
                _ => None,
            })
            .collect();
        let mut select = inner.clone();
        if grouped {
            // Positions and output names in GROUP BY are the select items they name (an input column's name is
            // the column, as PostgreSQL reads it); the rewrite adds items before them.
            let projection = inner.projection.clone();
            let ast::GroupByExpr::Expressions(group_by, _) = &mut select.group_by else { return None };
            for item in group_by {
                let named = match unnested(item) {
                    E::Identifier(name) if !inner_names.has_column(&fold(name)) => {
                        projection.iter().find_map(|p| match p {
                            ast::SelectItem::ExprWithAlias { expr, alias } if fold(alias) == fold(name) => {
                                Some(expr.clone())
                            }
                            _ => None,
                        })
                    }
                    _ => None,
                };
                *item = named.unwrap_or_else(|| by_position(item, &projection).clone());
            }
        }
        let mut references: Vec<E> = Vec::new();
        let mut unsupported = false;
        let mut replace = |expr: &mut E, scope: &Names, in_order: bool| {
            let is_outer = match &*expr {
                E::Identifier(name) => {
                    let name = fold(name);
                    let inner = scope.has_column(&name) || (in_order && aliases.contains(&name));
                    !inner && outer.has_column(&name)
                }
                E::CompoundIdentifier(parts) if parts.len() == 2 => {
                    let qualifier = fold(&parts[0]);
                    !scope.has_qualifier(&qualifier) && outer.has_qualifier(&qualifier)
                }
                E::CompoundIdentifier(_) => {
                    unsupported = true;
                    false
                }
                _ => false,
            };
            if is_outer {
                let text = expr.to_string();
                let i = references.iter().position(|r| r.to_string() == text).unwrap_or_else(|| {
                    references.push(expr.clone());
                    references.len() - 1
                });
                *expr = E::CompoundIdentifier(vec![
                    ast::Ident::new(OUTER_VALUES),
                    ast::Ident::new(format!("__numadb_d{i}")),
                ]);
            }
        };
        // Not in the subqueries in FROM: their names are their own.
        own_expressions_mut(&mut select, 0, |_| {}, |e| replace(e, &inner_names, false));
        for (query, scope) in nested.taken.iter_mut().zip(&nested_scopes) {
            if let Some(scope) = scope {
                own_expressions_mut(query, 1, |_| {}, |e| replace(e, scope, false));
            }
        }
        if let Some(order) = order.as_deref_mut() {
            for key in order {
                let _ = ast::visit_expressions_mut(&mut key.expr, |e: &mut E| {
                    replace(e, &inner_names, true);
                    std::ops::ControlFlow::<()>::Continue(())
                });
            }
        }
        if unsupported || references.is_empty() {
            return None;
        }
        let values: Vec<String> = references.iter().enumerate().map(|(i, r)| format!("{r} AS __numadb_d{i}")).collect();
        let values = format!("(SELECT DISTINCT {} FROM {}{})", values.join(", "), outer.from, outer.filter);
        // Joined first, the values are in scope in every ON; but a RIGHT or FULL join's rows of its right side
        // alone would have none (NULL), so there they are joined last, and no ON may read them.
        let right_or_full = select.from[0].joins.iter().any(|j| {
            matches!(
                j.join_operator,
                ast::JoinOperator::Right(_) | ast::JoinOperator::RightOuter(_) | ast::JoinOperator::FullOuter(_)
            )
        });
        let text = if right_or_full {
            let on_reads_values = select.from[0].joins.iter().any(|j| {
                matches!(super::join::join_constraint(&j.join_operator), Some(ast::JoinConstraint::On(on))
                    if on.to_string().contains(OUTER_VALUES))
            });
            if on_reads_values {
                return None;
            }
            format!("SELECT 1 FROM {} CROSS JOIN {values} AS {OUTER_VALUES}", select.from[0])
        } else {
            format!("SELECT 1 FROM {values} AS {OUTER_VALUES} CROSS JOIN {}", select.from[0])
        };
        let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &text).ok()?;
        let [ast::Statement::Query(query)] = parsed.as_slice() else { return None };
        let SetExpr::Select(parsed) = query.body.as_ref() else { return None };
        select.from = parsed.from.clone();
        let columns = (0..references.len()).map(|i| format!("__numadb_d{i}")).collect();
        // A window function's rows are the subquery's rows for one outer value: over the groups, each window is
        // partitioned by the outer values first; over ungrouped rows, numbered or grouped by the outer values
        // later, there is no place for it.
        let windowed = has_window(&select) || order.as_ref().is_some_and(|order| order.iter().any(has_window));
        if windowed && !grouped && (has_plain_aggregate(&select) || select.having.is_some()) {
            return None;
        }
        // ORDER BY a position or an output name reads the select items, which the rows made a subquery in FROM
        // have as columns.
        let by_output = |key: &ast::OrderByExpr| match unnested(&key.expr) {
            E::Value(_) => true,
            E::Identifier(name) => aliases.contains(&fold(name)),
            _ => false,
        };
        let by_output = order.as_ref().is_some_and(|order| order.iter().any(by_output))
            && !has_plain_aggregate(&select)
            && select.having.is_none();
        // Rows kept by a LIMIT are numbered per outer value, among the groups or rows.
        // (A window in their ORDER BY would be a window inside the numbering's.)
        if kept.is_some()
            && ((!grouped && (has_plain_aggregate(&select) || select.having.is_some()))
                || select.distinct.is_some()
                || order.as_ref().is_some_and(|order| order.iter().any(has_window)))
        {
            return None;
        }
        if grouped || windowed || by_output || kept.is_some() {
            let partition: Vec<E> = (0..references.len())
                .map(|i| {
                    E::CompoundIdentifier(vec![
                        ast::Ident::new(OUTER_VALUES),
                        ast::Ident::new(format!("__numadb_d{i}")),
                    ])
                })
                .collect();
            partition_windows(&mut select.projection, &partition)?;
            if let Some(order) = order.as_deref_mut() {
                partition_windows(order, &partition)?;
            }
            let (mut select, columns) = groups_as_rows(&select, order, references.len(), kept)?;
            nested.restore(&mut select)?;
            let names = Names {
                relations: vec![(OUTER_VALUES.to_string(), columns)],
                booleans: Vec::new(),
                from: String::new(),
                filter: String::new(),
            };
            return Some(OverOuterValues { inner: select, references, names, values, over_groups: true });
        }
        nested.restore(&mut select)?;
        let mut names = inner_names;
        names.relations.insert(0, (OUTER_VALUES.to_string(), columns));
        Some(OverOuterValues { inner: select, references, names, values, over_groups: false })
    }

    /// `error` (a correlated subquery refused, 0A000) as PostgreSQL reports `query` when it is invalid anyway: a
    /// SELECT without GROUP BY that aggregates (HAVING, or an aggregate call among its items) and names a column
    /// of its own FROM outside an aggregate call is PostgreSQL's 42803, whatever it reads of the enclosing query.
    pub(super) fn correlated_subquery_error(&self, query: &ast::Query, error: ExecError) -> ExecError {
        if error.sqlstate != sqlstate::FEATURE_NOT_SUPPORTED {
            return error;
        }
        let SetExpr::Select(select) = query.body.as_ref() else { return error };
        let ungrouped = matches!(&select.group_by, ast::GroupByExpr::Expressions(keys, _) if keys.is_empty());
        let items: Vec<&E> = select
            .projection
            .iter()
            .filter_map(|item| match item {
                ast::SelectItem::UnnamedExpr(expr) | ast::SelectItem::ExprWithAlias { expr, .. } => Some(expr),
                _ => None,
            })
            .collect();
        if !ungrouped || !(select.having.is_some() || has_plain_aggregate(&select.projection)) {
            return error;
        }
        let Some(own) = self.names_in(&select.from) else { return error };
        let ordered = match &query.order_by {
            Some(ast::OrderBy { kind: ast::OrderByKind::Expressions(order), .. }) => {
                order.iter().map(|o| &o.expr).collect()
            }
            _ => Vec::new(),
        };
        let found = items
            .into_iter()
            .chain(select.having.as_ref())
            .chain(ordered)
            .find_map(|expr| ungrouped_own_column(expr, &own));
        match found {
            Some(name) => ExecError::new(
                sqlstate::GROUPING_ERROR,
                format!("column \"{name}\" must appear in the GROUP BY clause or be used in an aggregate function"),
            ),
            None => error,
        }
    }

    /// `error` from binding a LIMIT's or OFFSET's count (`clause`) of `query`, with no columns in scope, as
    /// PostgreSQL reports it when the count names a column: of an enclosing query, refused (0A000: PostgreSQL
    /// computes the count per outer row); of `query`'s own FROM, 42P10.
    pub(super) fn row_count_error(&self, query: &ast::Query, count: &E, clause: &str, error: ExecError) -> ExecError {
        if error.sqlstate != sqlstate::UNDEFINED_COLUMN && error.sqlstate != sqlstate::UNDEFINED_TABLE {
            return error;
        }
        let own = match query.body.as_ref() {
            SetExpr::Select(select) => self.names_in(&select.from),
            _ => None,
        };
        let scopes = self.scopes.borrow();
        let in_scopes = |qualifier: Option<&str>, name: Option<&str>| {
            scopes.iter().flatten().any(|(q, names)| {
                qualifier.is_none_or(|wanted| q.as_deref() == Some(wanted))
                    && name.is_none_or(|wanted| names.iter().any(|n| n == wanted))
            })
        };
        let (mut own_column, mut enclosing_column) = (false, false);
        let _ = ast::visit_expressions(count, |e: &E| {
            let (qualifier, name) = match e {
                E::Identifier(name) => (None, Some(fold(name))),
                E::CompoundIdentifier(parts) if parts.len() == 2 => (Some(fold(&parts[0])), Some(fold(&parts[1]))),
                _ => return std::ops::ControlFlow::<()>::Continue(()),
            };
            let is_own = own.as_ref().is_some_and(|own| match (&qualifier, &name) {
                (Some(qualifier), _) => own.has_qualifier(qualifier),
                (None, Some(name)) => own.has_column(name),
                _ => false,
            });
            own_column |= is_own;
            enclosing_column |= !is_own && in_scopes(qualifier.as_deref(), name.as_deref());
            std::ops::ControlFlow::Continue(())
        });
        if own_column {
            ExecError::new(
                sqlstate::INVALID_COLUMN_REFERENCE,
                format!("argument of {clause} must not contain variables"),
            )
        } else if enclosing_column {
            super::unsupported(&format!("{clause} reading a column of an enclosing query"))
                .with_hint("Number the rows with row_number() OVER (PARTITION BY …) in a subquery in FROM and compare.")
        } else {
            error
        }
    }

    /// The names a subquery inside a correlated subquery (whose FROM has `inner`) sees before the outer query's:
    /// its own FROM's, then `inner`; `None` where they cannot be told (not one SELECT, a FROM of other forms).
    fn nested_scope(&self, query: &ast::Query, inner: &Names) -> Option<Names> {
        let SetExpr::Select(select) = query.body.as_ref() else { return None };
        let mut scope = if select.from.is_empty() {
            Names { relations: Vec::new(), booleans: Vec::new(), from: String::new(), filter: String::new() }
        } else {
            self.names_in(&select.from)?
        };
        scope.relations.extend(inner.relations.iter().cloned());
        Some(scope)
    }

    /// `[NOT] EXISTS (q)`, `x [NOT] IN (q)` and `x op ANY|ALL (q)` over a correlated `q` that the keyed rewrites
    /// do not take, as the aggregating scalar subquery that answers the same (with SQL's NULLs: `x IN (…)` is NULL
    /// when no value equals `x` but some comparison was NULL), rewritten by [`Binder::scalar_as_join`]'s
    /// [`Binder::over_outer_values`]; `None` leaves it as it is.
    fn quantified_as_scalar(&self, expr: &E, outer: &Names, joins: &mut Vec<ast::Join>) -> Option<E> {
        let (subquery, tested, negated, all) = match expr {
            E::Exists { subquery, negated } => (subquery.as_ref(), None, *negated, false),
            E::InSubquery { expr, subquery, negated } => {
                (subquery.as_ref(), Some((expr.as_ref(), BinaryOperator::Eq)), *negated, false)
            }
            E::AnyOp { left, compare_op, right, .. } | E::AllOp { left, compare_op, right } => {
                let E::Subquery(subquery) = right.as_ref() else { return None };
                let all = matches!(expr, E::AllOp { .. });
                (subquery.as_ref(), Some((left.as_ref(), compare_op.clone())), false, all)
            }
            _ => return None,
        };
        // EXISTS does not depend on which rows, or how many beyond the first, a LIMIT keeps.
        let at_least_one = |limit: &ast::LimitClause| match limit {
            ast::LimitClause::LimitOffset { limit: Some(E::Value(v)), offset: None, limit_by } => {
                limit_by.is_empty()
                    && matches!(&v.value, ast::Value::Number(n, _) if n.parse::<u64>().is_ok_and(|n| n >= 1))
            }
            _ => false,
        };
        let exists_limit = tested.is_none() && subquery.limit_clause.as_ref().is_some_and(at_least_one);
        if subquery.fetch.is_some() {
            return None;
        }
        let SetExpr::Select(inner) = subquery.body.as_ref() else { return None };
        let mut unordered = subquery.clone();
        (unordered.order_by, unordered.limit_clause) = (None, None);
        if subquery.limit_clause.is_some() && !exists_limit {
            // The rows a LIMIT (OFFSET) keeps, per outer value, in the subquery's order.
            if inner.distinct.is_some() {
                return None;
            }
            let kept = Some((order_keys(subquery)?, kept_rows(subquery)?));
            return self.quantified_over_groups(unordered, tested, negated, all, outer, joins, kept);
        }
        if grouped_select(&unordered).is_some() || has_window(&unordered) {
            return self.quantified_over_groups(unordered, tested, negated, all, outer, joins, None);
        }
        // Correlated, and of a form the rewrite takes; an aggregating subquery has one row whatever the outer row.
        self.over_outer_values(&unordered, None, outer, false, None)?;
        let projected = |item: &ast::SelectItem| match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => Some(e.clone()),
            _ => None,
        };
        if inner.projection.iter().filter_map(projected).any(|e| has_aggregate(&e)) {
            return None;
        }
        let value = match &tested {
            None => "count(*)".to_string(),
            Some((tested, op)) => {
                let [item] = inner.projection.as_slice() else { return None };
                let value = projected(item)?;
                let tested = qualified(tested, outer, &self.names_in(&inner.from)?)?;
                quantified_value(&tested.to_string(), op, &value.to_string(), all)
            }
        };
        let value = Parser::new(&PostgreSqlDialect {}).try_with_sql(&value).ok()?.parse_expr().ok()?;
        if let SetExpr::Select(select) = unordered.body.as_mut() {
            select.projection = vec![ast::SelectItem::UnnamedExpr(value)];
            select.distinct = None;
        }
        let hidden = format!("{HIDDEN_RELATION}{}", joins.len() + 1);
        // Its aggregates may read only outer columns (`bool_or(o.k = 1)`): they are the rewrite's, not the outer
        // query's aggregates PostgreSQL would take them for.
        let (join, scalar) = self.scalar_as_join(&unordered, outer, &hidden, true)?;
        joins.push(join);
        Some(quantified_answer(scalar, tested.is_some(), negated))
    }

    /// [`Binder::quantified_as_scalar`] over a grouped subquery: its rows are its groups ([`groups_as_rows`]), and
    /// the answer the same aggregate over them. The tested expression (outer columns only) is added as a select
    /// item, so that it is one of the outer values and a column of each group.
    #[allow(clippy::too_many_arguments)]
    fn quantified_over_groups(
        &self,
        mut subquery: ast::Query,
        tested: Option<(&E, BinaryOperator)>,
        negated: bool,
        all: bool,
        outer: &Names,
        joins: &mut Vec<ast::Join>,
        kept: Option<(Vec<ast::OrderByExpr>, Kept)>,
    ) -> Option<E> {
        let SetExpr::Select(select) = subquery.body.as_mut() else { return None };
        if let Some((tested, _)) = &tested {
            if select.projection.len() != 1 {
                return None;
            }
            let tested = qualified(tested, outer, &self.names_in(&select.from)?)?;
            select.projection.push(ast::SelectItem::UnnamedExpr(tested));
        }
        select.distinct = None;
        let (mut order, kept) = kept.unzip();
        let mut general = self.over_outer_values(&subquery, order.as_mut(), outer, false, kept)?;
        // Its rows must be the groups' (or numbered rows'): an aggregate without GROUP BY is one row whatever.
        if !general.over_groups {
            return None;
        }
        let column = |j: usize| format!("{OUTER_VALUES}.__numadb_v{j}");
        let value = match &tested {
            None => "count(*)".to_string(),
            Some((_, op)) => quantified_value(&column(1), op, &column(0), all),
        };
        let value = Parser::new(&PostgreSqlDialect {}).try_with_sql(&value).ok()?.parse_expr().ok()?;
        general.inner.projection = vec![ast::SelectItem::UnnamedExpr(value)];
        general.inner.distinct = None;
        let hidden = format!("{HIDDEN_RELATION}{}", joins.len() + 1);
        let (join, scalar) = self.rows_as_join(None, 0, &general.rows()?, outer, &hidden)?;
        joins.push(join);
        Some(quantified_answer(scalar, tested.is_some(), negated))
    }

    /// Whether `keys` are one inner column that is the primary key of `from`, a table (not a view or `WITH` query).
    fn is_primary_key(&self, from: &ast::TableWithJoins, keys: &[(E, E)]) -> bool {
        let [(key, _)] = keys else { return false };
        let TableFactor::Table { name, .. } = &from.relation else { return false };
        let column = match key {
            E::Identifier(column) => fold(column),
            E::CompoundIdentifier(parts) => parts.last().map(fold).unwrap_or_default(),
            _ => return false,
        };
        if !matches!(self.cte_or_view(name), Ok(None)) {
            return false;
        }
        let Ok(table) = self.source.resolve(name) else { return false };
        table.primary_key().is_some_and(|position| table.columns()[position].name == column)
    }

    /// A subquery over one table whose WHERE meets the outer query only through equalities: its SELECT, the
    /// equalities' (inner, outer) sides, and the rest of its WHERE as text (` WHERE (c1) AND (c2)`, or empty).
    fn correlated_select<'q>(&self, subquery: &'q ast::Query, outer: &Names) -> Option<Correlated<'q>> {
        let inner = ungrouped_select(subquery)?;
        // A window would be computed over every key's rows at once.
        if inner.from.len() != 1 || !inner.from[0].joins.is_empty() || has_window(subquery) {
            return None;
        }
        let inner_names = self.names_in(&inner.from)?;
        let mut conjuncts = Vec::new();
        split_and(inner.selection.as_ref()?, &mut conjuncts);
        let mut keys: Vec<(E, E)> = Vec::new();
        let mut residual = None;
        let mut local: Vec<E> = Vec::new();
        for conjunct in conjuncts {
            let refs = references(conjunct, &inner_names, outer);
            if !refs.outer {
                local.push(conjunct.clone());
                continue;
            }
            let E::BinaryOp { left, op, right } = conjunct else { return None };
            let (l, r) = (references(left, &inner_names, outer), references(right, &inner_names, outer));
            let (inner_side, outer_side, op) =
                match (l.inner && !l.outer, r.outer && !r.inner, r.inner && !r.outer, l.outer && !l.inner) {
                    (true, true, _, _) => (left.as_ref().clone(), right.as_ref().clone(), op.clone()),
                    (_, _, true, true) => (right.as_ref().clone(), left.as_ref().clone(), flipped(op)?),
                    _ => return None,
                };
            match op {
                BinaryOperator::Eq if self.bigint_meets_double(&inner_side, &inner_names, &outer_side, outer) => {
                    return None;
                }
                BinaryOperator::Eq => keys.push((inner_side, outer_side)),
                _ if is_comparison(&op) && residual.is_none() => residual = Some((inner_side, op, outer_side)),
                _ => return None,
            }
        }
        let mut sides = keys.iter().map(|(i, o)| (i, o)).chain(residual.iter().map(|(i, _, o)| (i, o)));
        if (keys.is_empty() && residual.is_none()) || sides.any(|(i, o)| contains_subquery(i) || contains_subquery(o)) {
            return None;
        }
        let local = if local.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", local.iter().map(|c| format!("({c})")).collect::<Vec<_>>().join(" AND "))
        };
        Some(Correlated { inner, keys, local, residual })
    }

    /// Whether an equality of `inner` (over `inner_names`' FROM) with `outer` (over `outer_names`') compares a
    /// BIGINT with a double precision, where the types are known. Such a key is not grouped by its inner values:
    /// two BIGINTs can be the same double (2^53 and 2^53 + 1), and both groups would then meet one outer row,
    /// repeating it. The subquery is taken another way (over the outer values), which compares as written. An
    /// INTEGER becomes a double exactly, and distinct doubles meet a BIGINT once at most.
    fn bigint_meets_double(&self, inner: &E, inner_names: &Names, outer: &E, outer_names: &Names) -> bool {
        // The outer side first: a double there is the rarer case, and settles most keys with one plan.
        // A NUMERIC (a sum of BIGINTs, in a subquery in FROM) maps many values to one double too.
        self.type_over(outer, &outer_names.from) == Some(DataType::Double)
            && matches!(self.type_over(inner, &inner_names.from), Some(DataType::BigInt | DataType::Numeric))
    }

    /// The type of `expr` over the FROM `from` (text), where the two plan alone ([`Binder::plan_apart`]; the
    /// parameter types the plan infers are not kept either). An expression holding a subquery is not planned (it
    /// is no key anyway).
    fn type_over(&self, expr: &E, from: &str) -> Option<DataType> {
        if from.is_empty() || contains_subquery(expr) {
            return None;
        }
        let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &format!("SELECT {expr} FROM {from}")).ok()?;
        let [ast::Statement::Query(query)] = parsed.as_slice() else { return None };
        let params = self.params.borrow().clone();
        let bound = self.plan_apart(query);
        *self.params.borrow_mut() = params;
        Some(bound.ok()?.columns.first()?.data_type)
    }

    /// The subquery of an `EXISTS` or `IN` as [`Binder::correlated_select`] takes it apart, with its FROM's names;
    /// `None` also for one that aggregates: it has one row whatever the keys (EXISTS is always TRUE, IN tests that
    /// one value), which no join on the keys says.
    fn correlated_rows<'q>(&self, subquery: &'q ast::Query, outer: &Names) -> Option<(Correlated<'q>, Names)> {
        let correlated = self.correlated_select(subquery, outer)?;
        let inner_names = self.names_in(&correlated.inner.from)?;
        let aggregates = correlated.inner.projection.iter().any(|item| match item {
            ast::SelectItem::UnnamedExpr(e) | ast::SelectItem::ExprWithAlias { expr: e, .. } => has_aggregate(e),
            _ => false,
        });
        (!aggregates).then_some((correlated, inner_names))
    }

    /// One correlated conjunct as a join (and what stays in WHERE), or `None` when it is not one this rewrite
    /// handles (including when it is not correlated at all: the ordinary path plans it).
    fn as_join(&self, conjunct: &E, outer: &Names, hidden: &str) -> Option<(ast::Join, Option<E>)> {
        match conjunct {
            E::Exists { subquery, negated } => self.subquery_join(subquery, *negated, None, false, outer, hidden),
            E::InSubquery { expr, subquery, negated: false } => {
                self.subquery_join(subquery, false, Some(expr.as_ref()), false, outer, hidden)
            }
            _ => None,
        }
    }

    /// `[NOT] EXISTS (subquery)`, or `tested IN (subquery)`, as a join with the subquery's distinct keys (with one
    /// other comparison, [`exists_with_residual`]) and the condition that stays: none for a conjunct EXISTS or IN
    /// (an inner join keeps the rows that hold), the mark's test for NOT EXISTS and wherever `mark` asks for it
    /// (the join is then a left join, and the test TRUE or FALSE in the subquery's place).
    fn subquery_join(
        &self,
        subquery: &ast::Query,
        negated: bool,
        tested: Option<&E>,
        mark: bool,
        outer: &Names,
        hidden: &str,
    ) -> Option<(ast::Join, Option<E>)> {
        let (Correlated { inner, keys, local, residual }, inner_names) = self.correlated_rows(subquery, outer)?;
        if let Some(residual) = residual {
            if tested.is_some() {
                return None;
            }
            let boolean = inner_names.is_boolean(&residual.0);
            return exists_with_residual(&keys, residual, boolean, &inner.from[0], &local, negated, hidden);
        }
        // IN's tested value joins the keys; its subquery has exactly one column, read from the inner rows.
        let value = match (tested, inner.projection.as_slice()) {
            (None, _) => None,
            (Some(tested), [ast::SelectItem::UnnamedExpr(v) | ast::SelectItem::ExprWithAlias { expr: v, .. }]) => {
                let refs = references(v, &inner_names, outer);
                let tested_refs = references(tested, &inner_names, outer);
                if refs.outer
                    || tested_refs.inner
                    || contains_subquery(v)
                    || contains_subquery(tested)
                    || self.bigint_meets_double(v, &inner_names, tested, outer)
                {
                    return None;
                }
                Some((v.clone(), tested.clone()))
            }
            (Some(_), _) => return None,
        };
        let mut items = key_items(&keys);
        if let Some((v, _)) = &value {
            items.push(format!("{v} AS __numadb_v"));
        }
        // Whether an outer row found a partner: the first key, which the ON condition never matches NULL; without
        // keys, a mark column. (A constant among the DISTINCT columns also kept the grouping off its integer-key
        // path: `EXISTS (SELECT 1 FROM b WHERE b.k = a.k AND b.v = 3)` over 2 M rows grouped in 80-90 ms.)
        let mark_column = if keys.is_empty() {
            items.push("TRUE AS __numadb_m".to_string());
            "__numadb_m"
        } else {
            "__numadb_k0"
        };
        let mut on = key_conditions(&keys, hidden);
        if let Some((_, tested)) = &value {
            on.push(format!("{hidden}.__numadb_v = ({tested})"));
        }
        let kind = if negated || mark { "LEFT JOIN" } else { "JOIN" };
        let text = format!(
            "SELECT 1 FROM x {kind} (SELECT DISTINCT {} FROM {}{local}) AS {hidden} ON {}",
            items.join(", "),
            inner.from[0],
            on.join(" AND ")
        );
        let join = parse_join(&text)?;
        let found = || Box::new(E::CompoundIdentifier(vec![ast::Ident::new(hidden), ast::Ident::new(mark_column)]));
        let remaining = match (negated, mark) {
            (true, _) => Some(E::IsNull(found())),
            (false, true) => Some(E::IsNotNull(found())),
            (false, false) => None,
        };
        Some((join, remaining))
    }
}

/// `[NOT] EXISTS` over rows meeting the outer row through equalities `keys` (none: every row) and one other
/// comparison `residual`, as a left join with those rows grouped by their keys and the least and greatest of the
/// residual's inner side per group, and the condition that stays in WHERE. Some row has `x < y` exactly when
/// the least `x` does, `x > y` when the greatest does, and `x <> y` when either does: NULL sides never compare
/// TRUE, and aggregates skip them; an outer row meeting no group (or a NULL) finds nothing, so the test is
/// FALSE, not NULL (`EXISTS` is never NULL). A `boolean` inner side takes bool_and and bool_or, PostgreSQL having
/// no min or max of booleans.
fn exists_with_residual(
    keys: &[(E, E)],
    (inner, op, outer): (E, BinaryOperator, E),
    boolean: bool,
    from: &ast::TableWithJoins,
    local: &str,
    negated: bool,
    hidden: &str,
) -> Option<(ast::Join, Option<E>)> {
    let mut items = key_items(keys);
    // PostgreSQL has no min or max of booleans; FALSE sorts before TRUE.
    let (least, greatest) = if boolean { ("bool_and", "bool_or") } else { ("min", "max") };
    items.push(format!("{least}({inner}) AS __numadb_lo"));
    items.push(format!("{greatest}({inner}) AS __numadb_hi"));
    let group_by = if keys.is_empty() {
        String::new()
    } else {
        format!(" GROUP BY {}", keys.iter().map(|(inner, _)| inner.to_string()).collect::<Vec<_>>().join(", "))
    };
    let on = if keys.is_empty() { "TRUE".to_string() } else { key_conditions(keys, hidden).join(" AND ") };
    let text = format!(
        "SELECT 1 FROM x LEFT JOIN (SELECT {} FROM {from}{local}{group_by}) AS {hidden} ON {on}",
        items.join(", ")
    );
    let join = parse_join(&text)?;
    let (lo, hi) = (format!("{hidden}.__numadb_lo"), format!("{hidden}.__numadb_hi"));
    let found = match op {
        BinaryOperator::Lt | BinaryOperator::LtEq => format!("{lo} {op} ({outer})"),
        BinaryOperator::Gt | BinaryOperator::GtEq => format!("{hi} {op} ({outer})"),
        BinaryOperator::NotEq => format!("{lo} <> ({outer}) OR {hi} <> ({outer})"),
        _ => return None,
    };
    let condition = format!("{}COALESCE({found}, FALSE)", if negated { "NOT " } else { "" });
    let condition = Parser::new(&PostgreSqlDialect {}).try_with_sql(&condition).ok()?.parse_expr().ok()?;
    Some((join, Some(condition)))
}

/// The select-list items of a rewrite's grouped or distinct inner rows: each key's inner side, named `__numadb_k<i>`.
fn key_items(keys: &[(E, E)]) -> Vec<String> {
    keys.iter().enumerate().map(|(i, (inner, _))| format!("{inner} AS __numadb_k{i}")).collect()
}

/// How many rows a scalar subquery keeps: `(Some(order), skipped, query without them)` for its first row in
/// `order` after `skipped` rows (`ORDER BY … LIMIT 1 [OFFSET m]`, `[OFFSET m ROWS] FETCH FIRST ROW ONLY`; an empty
/// order for any row), `(None, 0, query)` for all of them; `None` for any other limit (a count other than one, an
/// offset alone, WITH TIES).
fn first_row_order(subquery: &ast::Query) -> Option<(Option<Vec<ast::OrderByExpr>>, u64, ast::Query)> {
    let is_one = |e: &E| matches!(e, E::Value(v) if matches!(&v.value, ast::Value::Number(n, _) if n == "1"));
    let skipped = |offset: &Option<ast::Offset>| match offset {
        None => Some(0),
        Some(offset) => number(&offset.value),
    };
    let (first, skipped) = match (&subquery.limit_clause, &subquery.fetch) {
        (None, None) if subquery.order_by.is_none() => return Some((None, 0, subquery.clone())),
        // ORDER BY alone keeps every row.
        (None, None) => (false, 0),
        (Some(ast::LimitClause::LimitOffset { limit: Some(limit), offset, limit_by }), None)
            if is_one(limit) && limit_by.is_empty() =>
        {
            (true, skipped(offset)?)
        }
        (limit, Some(ast::Fetch { with_ties: false, percent: false, quantity }))
            if quantity.as_ref().is_none_or(is_one) =>
        {
            let offset = match limit {
                None => 0,
                Some(ast::LimitClause::LimitOffset { limit: None, offset, limit_by }) if limit_by.is_empty() => {
                    skipped(offset)?
                }
                Some(_) => return None,
            };
            (true, offset)
        }
        _ => return None,
    };
    let order = order_keys(subquery)?;
    let mut unlimited = subquery.clone();
    (unlimited.order_by, unlimited.limit_clause, unlimited.fetch) = (None, None, None);
    Some((first.then_some(order), skipped, unlimited))
}

/// A query's ORDER BY keys (none: empty); `None` for ORDER BY ALL or INTERPOLATE.
fn order_keys(query: &ast::Query) -> Option<Vec<ast::OrderByExpr>> {
    match &query.order_by {
        None => Some(Vec::new()),
        Some(ast::OrderBy { kind: ast::OrderByKind::Expressions(order), interpolate: None }) => Some(order.clone()),
        Some(_) => None,
    }
}

/// The rows a query's `LIMIT n OFFSET m` keeps (`(0, None)` without one); `None` for a count that is not a
/// literal, or LIMIT BY.
fn kept_rows(query: &ast::Query) -> Option<Kept> {
    match &query.limit_clause {
        None => Some((0, None)),
        Some(ast::LimitClause::LimitOffset { limit, offset, limit_by }) if limit_by.is_empty() => {
            let count = match limit {
                Some(limit) => Some(number(limit)?),
                None => None,
            };
            let skipped = match offset {
                Some(offset) => number(&offset.value)?,
                None => 0,
            };
            Some((skipped, count))
        }
        _ => None,
    }
}

/// A literal row count (`LIMIT 3`, `OFFSET 2`).
fn number(expr: &E) -> Option<u64> {
    match expr {
        E::Value(v) => match &v.value {
            ast::Value::Number(n, _) => n.parse::<u64>().ok(),
            _ => None,
        },
        _ => None,
    }
}

/// Replaces the inner relation's columns in `value` (a non-aggregating subquery's select item) by the columns
/// `__numadb_c<i>` of relation `hidden`, returning the replaced columns in that order (each once).
fn carry_columns(value: &mut E, inner: &Names, hidden: &str) -> Vec<E> {
    let mut columns: Vec<E> = Vec::new();
    let _ = ast::visit_expressions_mut(value, |expr: &mut E| {
        let is_inner = match &*expr {
            E::Identifier(name) => inner.has_column(&fold(name)),
            E::CompoundIdentifier(parts) => parts.len() >= 2 && inner.has_qualifier(&fold(&parts[parts.len() - 2])),
            _ => false,
        };
        if is_inner {
            let text = expr.to_string();
            let i = columns.iter().position(|c| c.to_string() == text).unwrap_or_else(|| {
                columns.push(expr.clone());
                columns.len() - 1
            });
            *expr = E::CompoundIdentifier(vec![ast::Ident::new(hidden), ast::Ident::new(format!("__numadb_c{i}"))]);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    columns
}

/// The join conditions that meet those keys (relation `hidden`) with their outer sides.
fn key_conditions(keys: &[(E, E)], hidden: &str) -> Vec<String> {
    keys.iter().enumerate().map(|(i, (_, outer))| format!("{hidden}.__numadb_k{i} = ({outer})")).collect()
}

/// The comparison with its operands swapped (`a < b` is `b > a`); `None` for an operator that is not one.
fn flipped(op: &BinaryOperator) -> Option<BinaryOperator> {
    Some(match op {
        BinaryOperator::Eq => BinaryOperator::Eq,
        BinaryOperator::NotEq => BinaryOperator::NotEq,
        BinaryOperator::Lt => BinaryOperator::Gt,
        BinaryOperator::LtEq => BinaryOperator::GtEq,
        BinaryOperator::Gt => BinaryOperator::Lt,
        BinaryOperator::GtEq => BinaryOperator::LtEq,
        _ => return None,
    })
}

/// Whether an expression calls an aggregate function.
fn has_aggregate(expr: &E) -> bool {
    let chains = super::join::name_chains(&expr.to_string()).unwrap_or_default();
    chains.iter().any(|(chain, function)| *function && matches!(chain.as_slice(), [name] if is_aggregate(name)))
}

fn is_aggregate(name: &str) -> bool {
    numadb_execution::AggregateFunction::from_name(&name.to_lowercase()).is_some()
}

/// A GROUP BY item, with a position (`GROUP BY 1`) taken as the select item it names, and without parentheses.
fn by_position<'e>(item: &'e E, projection: &'e [ast::SelectItem]) -> &'e E {
    let item = unnested(item);
    let E::Value(value) = item else { return item };
    let ast::Value::Number(position, _) = &value.value else { return item };
    match position.parse::<usize>().ok().and_then(|p| projection.get(p.checked_sub(1)?)) {
        Some(ast::SelectItem::UnnamedExpr(expr) | ast::SelectItem::ExprWithAlias { expr, .. }) => unnested(expr),
        _ => item,
    }
}

/// `expr` without the parentheses around it.
fn unnested(expr: &E) -> &E {
    match expr {
        E::Nested(inner) => unnested(inner),
        _ => expr,
    }
}

/// The column references in `expr`.
fn columns_of(expr: &E) -> Vec<E> {
    let mut columns = Vec::new();
    let _ = ast::visit_expressions(expr, |e: &E| {
        if matches!(e, E::Identifier(_) | E::CompoundIdentifier(_)) {
            columns.push(e.clone());
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    columns
}

/// Whether two expressions of one query are the same column, named with or without its qualifier (`k` and
/// `o.k`; the binder refuses a name that would be ambiguous).
fn same_column(a: &E, b: &E) -> bool {
    let column = |e: &E| match e {
        E::Identifier(name) => Some((None, fold(name))),
        E::CompoundIdentifier(parts) if parts.len() >= 2 => {
            Some((Some(fold(&parts[parts.len() - 2])), fold(&parts[parts.len() - 1])))
        }
        _ => None,
    };
    match (column(a), column(b)) {
        (Some((qa, na)), Some((qb, nb))) => na == nb && (qa.is_none() || qb.is_none() || qa == qb),
        _ => false,
    }
}

/// The outer sides of the key conditions of a join this rewrite made (`__numadb_sq1.__numadb_k0 = (a.k)`).
fn outer_keys(join: &ast::Join) -> Vec<E> {
    let Some(ast::JoinConstraint::On(on)) = super::join::join_constraint(&join.join_operator) else {
        return Vec::new();
    };
    let mut conditions = Vec::new();
    split_and(on, &mut conditions);
    conditions
        .into_iter()
        .filter_map(|condition| match condition {
            E::BinaryOp { op: BinaryOperator::Eq, right, .. } => Some(unnested(right).clone()),
            _ => None,
        })
        .collect()
}

/// The columns of the relations this rewrite adds that `expr` reads (each once).
fn hidden_columns(expr: &E) -> Vec<E> {
    let mut columns: Vec<E> = Vec::new();
    let _ = ast::visit_expressions(expr, |e: &E| {
        if let E::CompoundIdentifier(parts) = e
            && parts.first().is_some_and(|q| q.value.starts_with(HIDDEN_RELATION))
            && !columns.contains(e)
        {
            columns.push(e.clone());
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    columns
}

/// Replaces each aggregate call in `value` (an aggregating subquery's select item) by the column
/// `__numadb_a<i>` of relation `hidden` (`coalesce(…, 0)` for a count, whose value over no rows is 0), returning
/// the calls replaced, in that order.
fn carry_aggregates(value: &mut E, hidden: &str) -> Option<Vec<String>> {
    let mut aggregates: Vec<String> = Vec::new();
    let visited = ast::visit_expressions_mut(value, |expr: &mut E| {
        if let E::Function(function) = &*expr
            && function.over.is_none()
            && is_aggregate(&function.name.to_string())
        {
            let column = format!("{hidden}.__numadb_a{}", aggregates.len());
            let replacement = match function.name.to_string().eq_ignore_ascii_case("count") {
                true => format!("coalesce({column}, 0)"),
                false => column,
            };
            aggregates.push(expr.to_string());
            match Parser::new(&PostgreSqlDialect {}).try_with_sql(&replacement).and_then(|mut p| p.parse_expr()) {
                Ok(parsed) => *expr = parsed,
                Err(_) => return std::ops::ControlFlow::Break(()),
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    visited.is_continue().then_some(aggregates)
}

/// The one SELECT of a subquery without WITH, ORDER BY, LIMIT, GROUP BY, HAVING or INTO: the shape the rewrites
/// take apart.
fn ungrouped_select(subquery: &ast::Query) -> Option<&Select> {
    if subquery.with.is_some()
        || subquery.order_by.is_some()
        || subquery.limit_clause.is_some()
        || subquery.fetch.is_some()
        || !subquery.locks.is_empty()
    {
        return None;
    }
    let SetExpr::Select(inner) = subquery.body.as_ref() else { return None };
    let grouped = !matches!(&inner.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    (!grouped && inner.having.is_none() && inner.into.is_none()).then_some(inner)
}

/// The one SELECT of a subquery with a plain GROUP BY (expressions, at least one; HAVING allowed) and otherwise
/// [`ungrouped_select`]'s shape but for ORDER BY, which [`Binder::over_outer_values`] is handed apart. Without
/// GROUP BY, HAVING is not taken: an aggregate over no rows is still a row for HAVING to test, which grouping by
/// the outer values would not make.
fn grouped_select(subquery: &ast::Query) -> Option<&Select> {
    if subquery.with.is_some()
        || subquery.limit_clause.is_some()
        || subquery.fetch.is_some()
        || !subquery.locks.is_empty()
    {
        return None;
    }
    let SetExpr::Select(inner) = subquery.body.as_ref() else { return None };
    let plain = match &inner.group_by {
        // `GROUP BY ()` alone is one group, also over no rows: not the groups of some rows.
        ast::GroupByExpr::Expressions(e, m) => {
            e.iter().any(|e| !matches!(unnested(e), E::Tuple(t) if t.is_empty()))
                && m.is_empty()
                && e.iter().all(|e| !matches!(e, E::Rollup(_) | E::Cube(_) | E::GroupingSets(_)))
        }
        ast::GroupByExpr::All(_) => false,
    };
    let distinct = matches!(inner.distinct, None | Some(ast::Distinct::Distinct));
    (plain && distinct && inner.into.is_none()).then_some(inner)
}

/// A grouped subquery's SELECT, its outer references already columns of [`OUTER_VALUES`] joined into its FROM, as
/// an ungrouped SELECT over its groups: `SELECT __numadb_dd.__numadb_v0 AS "name", … FROM (SELECT __numadb_dd.
/// __numadb_d0 AS __numadb_d0, …, <item> AS __numadb_v0, …, <order key> AS __numadb_s0, … FROM … GROUP BY
/// __numadb_dd.__numadb_d0, …, <its GROUP BY> HAVING …) AS __numadb_dd`, and that relation's columns. Grouped by
/// the outer values too, each group belongs to one outer value, so the rewrites that group or number rows by
/// those values take the groups for the subquery's rows; an outer value none of whose rows pass has no group, as
/// the subquery has no rows for it. `order`'s keys (positions and output names as the items they name) become
/// columns of the groups.
fn groups_as_rows(
    select: &Select,
    order: Option<&mut Vec<ast::OrderByExpr>>,
    values: usize,
    kept: Option<Kept>,
) -> Option<(Select, Vec<String>)> {
    let items: Vec<(E, String)> = select
        .projection
        .iter()
        .map(|item| match item {
            ast::SelectItem::UnnamedExpr(e) => Some((e.clone(), super::column_name(e))),
            ast::SelectItem::ExprWithAlias { expr, alias } => Some((expr.clone(), fold(alias))),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let mut columns: Vec<String> = (0..values).map(|i| format!("__numadb_d{i}")).collect();
    let mut group_items: Vec<String> =
        (0..values).map(|i| format!("{OUTER_VALUES}.__numadb_d{i} AS __numadb_d{i}")).collect();
    let mut row_items = Vec::new();
    for (j, (expr, name)) in items.iter().enumerate() {
        group_items.push(format!("{expr} AS __numadb_v{j}"));
        columns.push(format!("__numadb_v{j}"));
        row_items.push(format!("{OUTER_VALUES}.__numadb_v{j} AS {}", ast::Ident::with_quote('"', name)));
    }
    let mut window_order = Vec::new();
    for (k, key) in order.into_iter().flatten().enumerate() {
        let named = match unnested(&key.expr) {
            E::Identifier(name) => items.iter().find(|(_, n)| *n == fold(name)).map(|(e, _)| e),
            _ => None,
        };
        let expr = named.unwrap_or_else(|| by_position(&key.expr, &select.projection)).clone();
        // A window there would be a window inside the numbering's.
        if kept.is_some() && has_window(&expr) {
            return None;
        }
        window_order.push(ast::OrderByExpr { expr: expr.clone(), ..key.clone() }.to_string());
        group_items.push(format!("{expr} AS __numadb_s{k}"));
        columns.push(format!("__numadb_s{k}"));
        key.expr =
            E::CompoundIdentifier(vec![ast::Ident::new(OUTER_VALUES), ast::Ident::new(format!("__numadb_s{k}"))]);
    }
    let ast::GroupByExpr::Expressions(group_by, _) = &select.group_by else { return None };
    // Without GROUP BY (a SELECT whose windows are partitioned by the outer values), its rows.
    let grouping = if group_by.is_empty() {
        String::new()
    } else {
        let mut grouping: Vec<String> = (0..values).map(|i| format!("{OUTER_VALUES}.__numadb_d{i}")).collect();
        grouping.extend(group_by.iter().map(ToString::to_string));
        format!(" GROUP BY {}", grouping.join(", "))
    };
    let from = select.from.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    let selection = select.selection.as_ref().map(|s| format!(" WHERE {s}")).unwrap_or_default();
    let having = select.having.as_ref().map(|h| format!(" HAVING {h}")).unwrap_or_default();
    let distinct = if select.distinct.is_some() { "DISTINCT " } else { "" };
    let mut kept_rows = String::new();
    if let Some((skipped, count)) = kept {
        let partition: Vec<String> = (0..values).map(|i| format!("{OUTER_VALUES}.__numadb_d{i}")).collect();
        let order =
            if window_order.is_empty() { String::new() } else { format!(" ORDER BY {}", window_order.join(", ")) };
        group_items.push(format!("row_number() OVER (PARTITION BY {}{order}) AS __numadb_rn", partition.join(", ")));
        columns.push("__numadb_rn".to_string());
        kept_rows = format!(" WHERE {OUTER_VALUES}.__numadb_rn > {skipped}");
        if let Some(count) = count {
            kept_rows += &format!(" AND {OUTER_VALUES}.__numadb_rn <= {}", skipped.checked_add(count)?);
        }
    }
    let text = format!(
        "SELECT {distinct}{} FROM (SELECT {} FROM {from}{selection}{grouping}{having}) AS {OUTER_VALUES}{kept_rows}",
        row_items.join(", "),
        group_items.join(", "),
    );
    let parsed = Parser::parse_sql(&PostgreSqlDialect {}, &text).ok()?;
    let [ast::Statement::Query(query)] = parsed.as_slice() else { return None };
    let SetExpr::Select(parsed) = query.body.as_ref() else { return None };
    Some((parsed.as_ref().clone(), columns))
}

/// Whether a window function is called in `node` itself: not in a subquery inside it (in an expression or in
/// FROM), whose windows are its own.
fn has_window<N: ast::Visit + 'static>(node: &N) -> bool {
    calls_own(node, |f| f.over.is_some())
}

/// The first column of `own` (a FROM's names) that `expr` names outside aggregate calls and subqueries.
fn ungrouped_own_column(expr: &E, own: &Names) -> Option<String> {
    struct Columns<'n> {
        own: &'n Names,
        /// Queries and aggregate calls the visitor is in.
        queries: usize,
        aggregates: usize,
    }
    impl ast::Visitor for Columns<'_> {
        type Break = String;
        fn pre_visit_query(&mut self, _query: &ast::Query) -> std::ops::ControlFlow<String> {
            self.queries += 1;
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _query: &ast::Query) -> std::ops::ControlFlow<String> {
            self.queries -= 1;
            std::ops::ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &E) -> std::ops::ControlFlow<String> {
            if self.queries > 0 {
                return std::ops::ControlFlow::Continue(());
            }
            let name = match expr {
                E::Function(f) if is_plain_aggregate(f) => {
                    self.aggregates += 1;
                    None
                }
                _ if self.aggregates > 0 => None,
                E::Identifier(name) => Some(fold(name)).filter(|name| self.own.has_column(name)),
                E::CompoundIdentifier(parts) => match parts.as_slice() {
                    [qualifier, name] if self.own.has_qualifier(&fold(qualifier)) => Some(fold(name)),
                    _ => None,
                },
                _ => None,
            };
            name.map_or(std::ops::ControlFlow::Continue(()), std::ops::ControlFlow::Break)
        }
        fn post_visit_expr(&mut self, expr: &E) -> std::ops::ControlFlow<String> {
            if self.queries == 0 && matches!(expr, E::Function(f) if is_plain_aggregate(f)) {
                self.aggregates -= 1;
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    match ast::Visit::visit(expr, &mut Columns { own, queries: 0, aggregates: 0 }) {
        std::ops::ControlFlow::Break(name) => Some(name),
        std::ops::ControlFlow::Continue(()) => None,
    }
}

/// Whether an aggregate is called in `node` itself other than as a window function (not in a subquery inside it).
fn has_plain_aggregate<N: ast::Visit + 'static>(node: &N) -> bool {
    calls_own(node, is_plain_aggregate)
}

/// Whether `call` is an aggregate's, not as a window function.
fn is_plain_aggregate(call: &ast::Function) -> bool {
    call.over.is_none() && is_aggregate(&call.name.to_string())
}

/// Whether a function call `test` holds for is in `node` outside the subqueries inside it (`node` itself may be
/// a query).
fn calls_own<N: ast::Visit + 'static>(node: &N, test: impl Fn(&ast::Function) -> bool) -> bool {
    struct Calls<T> {
        depth: usize,
        own: usize,
        test: T,
    }
    impl<T: Fn(&ast::Function) -> bool> ast::Visitor for Calls<T> {
        type Break = ();
        fn pre_visit_query(&mut self, _query: &ast::Query) -> std::ops::ControlFlow<()> {
            self.depth += 1;
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _query: &ast::Query) -> std::ops::ControlFlow<()> {
            self.depth -= 1;
            std::ops::ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &E) -> std::ops::ControlFlow<()> {
            match expr {
                E::Function(f) if self.depth == self.own && (self.test)(f) => std::ops::ControlFlow::Break(()),
                _ => std::ops::ControlFlow::Continue(()),
            }
        }
    }
    let own = usize::from((node as &dyn std::any::Any).is::<ast::Query>());
    node.visit(&mut Calls { depth: 0, own, test }).is_break()
}

/// Calls `pre` on every expression of `node` before, and `post` after, those inside it, outside the queries
/// inside it (subqueries in FROM, and in expressions), `own_depth` queries deep: 1 when `node` is itself a query.
/// What `pre` puts in an expression's place is what the visitor goes into.
fn own_expressions_mut<N: ast::VisitMut>(
    node: &mut N,
    own_depth: usize,
    pre: impl FnMut(&mut E),
    post: impl FnMut(&mut E),
) {
    struct Own<P, Q> {
        depth: usize,
        own: usize,
        pre: P,
        post: Q,
    }
    impl<P: FnMut(&mut E), Q: FnMut(&mut E)> ast::VisitorMut for Own<P, Q> {
        type Break = ();
        fn pre_visit_query(&mut self, _query: &mut ast::Query) -> std::ops::ControlFlow<()> {
            self.depth += 1;
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _query: &mut ast::Query) -> std::ops::ControlFlow<()> {
            self.depth -= 1;
            std::ops::ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, expr: &mut E) -> std::ops::ControlFlow<()> {
            if self.depth == self.own {
                (self.pre)(expr);
            }
            std::ops::ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, expr: &mut E) -> std::ops::ControlFlow<()> {
            if self.depth == self.own {
                (self.post)(expr);
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let _ = node.visit(&mut Own { depth: 0, own: own_depth, pre, post });
}

/// Puts `values` first in the PARTITION BY of every window in `node`; `None` for a named window (`OVER w`).
fn partition_windows<N: ast::VisitMut>(node: &mut N, values: &[E]) -> Option<()> {
    let visited = ast::visit_expressions_mut(node, |e: &mut E| {
        if let E::Function(f) = e {
            match &mut f.over {
                Some(ast::WindowType::WindowSpec(spec)) if spec.window_name.is_none() => {
                    spec.partition_by.splice(0..0, values.iter().cloned());
                }
                Some(_) => return std::ops::ControlFlow::Break(()),
                None => {}
            }
        }
        std::ops::ControlFlow::Continue(())
    });
    visited.is_continue().then_some(())
}

/// `[NOT] EXISTS`, `[NOT] IN`, `ANY` and `ALL` over a subquery that aggregates without GROUP BY or HAVING (and
/// keeps its row: no OFFSET, no LIMIT 0): it has exactly one row whatever the outer row, so EXISTS is TRUE and the
/// others are the comparison with it as a scalar subquery, which [`Binder::rewrite_scalars`] then takes.
fn one_row_quantified(expr: &E) -> Option<E> {
    let subquery = match expr {
        E::Exists { subquery, .. } | E::InSubquery { subquery, .. } => subquery.as_ref(),
        E::AnyOp { right, .. } | E::AllOp { right, .. } => match right.as_ref() {
            E::Subquery(subquery) => subquery.as_ref(),
            _ => return None,
        },
        _ => return None,
    };
    let SetExpr::Select(select) = subquery.body.as_ref() else { return None };
    let ungrouped = matches!(&select.group_by, ast::GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    let keeps_its_row = match &subquery.limit_clause {
        None => true,
        Some(ast::LimitClause::LimitOffset { limit, offset: None, limit_by }) => {
            limit_by.is_empty() && limit.as_ref().is_none_or(|limit| number(limit).is_some_and(|n| n >= 1))
        }
        Some(_) => false,
    };
    if !ungrouped
        || select.having.is_some()
        || !keeps_its_row
        || subquery.fetch.is_some()
        || !has_plain_aggregate(&select.projection)
    {
        return None;
    }
    let compared = |left: &E, op: BinaryOperator| E::BinaryOp {
        left: Box::new(left.clone()),
        op,
        right: Box::new(E::Subquery(Box::new(subquery.clone()))),
    };
    Some(match expr {
        E::Exists { negated, .. } => E::Value(ast::Value::Boolean(!negated).into()),
        E::InSubquery { expr: tested, negated: false, .. } => E::Nested(Box::new(compared(tested, BinaryOperator::Eq))),
        E::InSubquery { expr: tested, negated: true, .. } => E::UnaryOp {
            op: ast::UnaryOperator::Not,
            expr: Box::new(E::Nested(Box::new(compared(tested, BinaryOperator::Eq)))),
        },
        E::AnyOp { left, compare_op, .. } | E::AllOp { left, compare_op, .. } => {
            E::Nested(Box::new(compared(left, compare_op.clone())))
        }
        _ => return None,
    })
}

/// What takes a quantified subquery's place ([`Binder::quantified_as_scalar`]): over its `scalar` (a count of
/// rows for `[NOT] EXISTS`, else the comparisons' answer), `count > 0`, `count = 0`, the answer, or NOT it.
fn quantified_answer(scalar: E, tested: bool, negated: bool) -> E {
    let scalar = E::Nested(Box::new(scalar));
    let replacement = match (tested, negated) {
        (false, false) => E::BinaryOp { left: Box::new(scalar), op: BinaryOperator::Gt, right: Box::new(zero()) },
        (false, true) => E::BinaryOp { left: Box::new(scalar), op: BinaryOperator::Eq, right: Box::new(zero()) },
        (true, false) => scalar,
        (true, true) => E::UnaryOp { op: ast::UnaryOperator::Not, expr: Box::new(scalar) },
    };
    E::Nested(Box::new(replacement))
}

/// The aggregate that answers `tested op ANY|ALL (value)` (IN is `= ANY`) over the subquery's rows, with SQL's
/// NULLs: ANY is TRUE if some comparison is, else NULL if some comparison is NULL, else FALSE; ALL the converse.
fn quantified_value(tested: &str, op: &BinaryOperator, value: &str, all: bool) -> String {
    let compared = format!("(({tested}) {op} ({value}))");
    let (decides, decided) = if all { (format!("NOT {compared}"), "FALSE") } else { (compared.clone(), "TRUE") };
    let otherwise = if all { "TRUE" } else { "FALSE" };
    format!(
        "CASE WHEN bool_or({decides}) THEN {decided} WHEN count(*) > count({compared}) THEN NULL ELSE {otherwise} END"
    )
}

/// `select` with the items of its FROM made one (`a, b` is `a CROSS JOIN b`): [`Binder::over_outer_values`] joins
/// the outer values to one, and a LATERAL subquery joins the relations to its left.
fn one_from_item(select: &Select) -> Select {
    let mut select = select.clone();
    if select.from.len() > 1 {
        let mut items = std::mem::take(&mut select.from).into_iter();
        let mut first = items.next().expect("two items");
        for item in items {
            let cross = ast::JoinOperator::CrossJoin(ast::JoinConstraint::None);
            first.joins.push(ast::Join { relation: item.relation, global: false, join_operator: cross });
            first.joins.extend(item.joins);
        }
        select.from = vec![first];
    }
    select
}

/// Replaces the columns of [`OUTER_VALUES`] in `value` by the outer references they stand for.
fn restore_outer_values(value: &mut E, references: &[E]) {
    if references.is_empty() {
        return;
    }
    let _ = ast::visit_expressions_mut(value, |e: &mut E| {
        if let E::CompoundIdentifier(parts) = &*e
            && let [relation, column] = parts.as_slice()
            && relation.value == OUTER_VALUES
            && let Some(reference) = column
                .value
                .strip_prefix("__numadb_d")
                .and_then(|i| i.parse::<usize>().ok())
                .and_then(|i| references.get(i))
        {
            *e = reference.clone();
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
}

/// Whether an aggregate call in `value` reads an outer column.
fn outer_in_aggregate(value: &E, inner: &Names, outer: &Names) -> bool {
    let mut found = false;
    let _ = ast::visit_expressions(value, |e: &E| {
        found |= matches!(e, E::Function(f) if is_aggregate(&f.name.to_string())) && references(e, inner, outer).outer;
        std::ops::ControlFlow::<()>::Continue(())
    });
    found
}

/// The literal 0.
fn zero() -> E {
    E::Value(ast::Value::Number("0".to_string(), false).into())
}

/// `expr` (an outer query's expression, to be written inside a subquery) with each column qualified by its outer
/// relation, so that no inner column of the same name takes its place; `None` where a name is not the outer
/// query's alone, or a relation of the subquery has the same name, or `expr` aggregates or holds a subquery.
fn qualified(expr: &E, outer: &Names, inner: &Names) -> Option<E> {
    if has_aggregate(expr) || contains_subquery(expr) {
        return None;
    }
    let mut expr = expr.clone();
    let mut ok = true;
    let _ = ast::visit_expressions_mut(&mut expr, |e: &mut E| {
        match &*e {
            E::Identifier(name) => {
                let name = fold(name);
                let mut owners = outer.relations.iter().filter(|(_, columns)| columns.contains(&name));
                match (owners.next(), owners.next()) {
                    (Some((qualifier, _)), None) if !inner.has_qualifier(qualifier) => {
                        *e = E::CompoundIdentifier(vec![
                            ast::Ident::with_quote('"', qualifier.clone()),
                            ast::Ident::with_quote('"', name),
                        ]);
                    }
                    _ => ok = false,
                }
            }
            E::CompoundIdentifier(parts) => {
                ok &=
                    parts.len() == 2 && outer.has_qualifier(&fold(&parts[0])) && !inner.has_qualifier(&fold(&parts[0]))
            }
            _ => {}
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    ok.then_some(expr)
}

/// The join of `SELECT 1 FROM x <join>`.
fn parse_join(text: &str) -> Option<ast::Join> {
    let parsed = Parser::parse_sql(&PostgreSqlDialect {}, text).ok()?;
    let [ast::Statement::Query(query)] = parsed.as_slice() else { return None };
    let SetExpr::Select(parsed) = query.body.as_ref() else { return None };
    parsed.from.first()?.joins.first().cloned()
}

/// The top-level AND operands of a condition.
fn split_and<'e>(expr: &'e E, out: &mut Vec<&'e E>) {
    match expr {
        E::BinaryOp { left, op: BinaryOperator::And, right } => {
            split_and(left, out);
            split_and(right, out);
        }
        E::Nested(inner) if matches!(inner.as_ref(), E::BinaryOp { op: BinaryOperator::And, .. }) => {
            split_and(inner, out)
        }
        other => out.push(other),
    }
}

/// Whether the relation of an outer query's distinct values ([`values_filter`](Binder::values_filter)) can test
/// `conjunct` over the outer FROM alone: no subquery, parameter or volatile call, only `outer`'s names.
fn testable_over_values(conjunct: &E, outer: &Names) -> bool {
    let flow = ast::visit_expressions(conjunct, |e: &E| {
        let fits = match e {
            E::Identifier(name) => outer.has_column(&fold(name)),
            E::CompoundIdentifier(parts) => parts.len() == 2 && outer.has_qualifier(&fold(&parts[0])),
            E::Function(call) => !["random", "setseed"].contains(&call.name.to_string().to_lowercase().as_str()),
            E::Value(value) => !matches!(value.value, ast::Value::Placeholder(_)),
            E::Subquery(_) | E::Exists { .. } | E::InSubquery { .. } => false,
            _ => true,
        };
        if fits { std::ops::ControlFlow::Continue(()) } else { std::ops::ControlFlow::Break(()) }
    });
    flow.is_continue() && !contains_subquery(conjunct)
}

/// Whether `expr` raises no error whatever the row: names and constants compared, tested for NULL, in lists,
/// combined by AND, OR and NOT (no arithmetic, cast or call, any of which can).
fn cannot_fail(expr: &E) -> bool {
    let flow = ast::visit_expressions(expr, |e: &E| {
        let safe = match e {
            E::Identifier(_) | E::CompoundIdentifier(_) | E::Value(_) | E::Nested(_) => true,
            E::BinaryOp { op, .. } => is_comparison(op) || matches!(op, BinaryOperator::And | BinaryOperator::Or),
            E::UnaryOp { op, .. } => matches!(op, ast::UnaryOperator::Not),
            E::IsNull(_)
            | E::IsNotNull(_)
            | E::IsTrue(_)
            | E::IsFalse(_)
            | E::IsNotTrue(_)
            | E::IsNotFalse(_)
            | E::IsUnknown(_)
            | E::IsNotUnknown(_)
            | E::IsDistinctFrom(..)
            | E::IsNotDistinctFrom(..)
            | E::Between { .. }
            | E::InList { .. } => true,
            _ => false,
        };
        if safe { std::ops::ControlFlow::Continue(()) } else { std::ops::ControlFlow::Break(()) }
    });
    flow.is_continue()
}

/// Whether an expression holds a subquery (its names are another scope's: the rewrite leaves it alone).
fn contains_subquery(expr: &E) -> bool {
    let text = expr.to_string().to_uppercase();
    text.contains("SELECT")
}

/// Which scope the names in an expression belong to: a name the inner FROM has is inner (it hides an outer one),
/// else one the outer FROM has is outer; `q.name` by its qualifier. Function names and keywords match neither.
fn references(expr: &E, inner: &Names, outer: &Names) -> Refs {
    let mut refs = Refs::default();
    let Some(chains) = super::join::name_chains(&expr.to_string()) else {
        return Refs { inner: true, outer: true };
    };
    for (chain, function) in chains {
        // A word followed by `(` is a function's name.
        if function && chain.len() == 1 {
            continue;
        }
        match chain.as_slice() {
            [name] => {
                if inner.has_column(name) {
                    refs.inner = true;
                } else if outer.has_column(name) {
                    refs.outer = true;
                }
            }
            [.., qualifier, _] => {
                if inner.has_qualifier(qualifier) {
                    refs.inner = true;
                } else if outer.has_qualifier(qualifier) {
                    refs.outer = true;
                }
            }
            [] => {}
        }
    }
    refs
}

/// An EXISTS subquery as PostgreSQL's planner reads it (`simplify_EXISTS_query`): only whether it has a row
/// matters, so a plain SELECT's select list, DISTINCT, ORDER BY and a positive constant LIMIT are dropped and
/// never evaluated (`EXISTS (SELECT a / 0 FROM t)` is true where t has rows). `None` where it is kept whole, as
/// PostgreSQL keeps it: a set operation, aggregates, window functions, GROUP BY with grouping sets, HAVING,
/// OFFSET, a LIMIT other than a positive constant, FETCH, locking clauses.
pub(super) fn exists_simplified(query: &ast::Query) -> Option<ast::Query> {
    let SetExpr::Select(select) = query.body.as_ref() else { return None };
    let grouping_sets = match &select.group_by {
        ast::GroupByExpr::Expressions(items, modifiers) => {
            !modifiers.is_empty()
                || items.iter().any(|item| matches!(item, E::GroupingSets(_) | E::Rollup(_) | E::Cube(_)))
        }
        ast::GroupByExpr::All(_) => false,
    };
    let limit_positive = match &query.limit_clause {
        None => true,
        Some(ast::LimitClause::LimitOffset { limit, offset: None, limit_by }) if limit_by.is_empty() => match limit {
            None => true,
            Some(E::Value(value)) => match &value.value {
                ast::Value::Number(count, _) => count.parse::<i64>().is_ok_and(|count| count > 0),
                ast::Value::Null => true,
                _ => false,
            },
            Some(_) => false,
        },
        Some(_) => false,
    };
    if select.having.is_some()
        || grouping_sets
        || !limit_positive
        || query.fetch.is_some()
        || !query.locks.is_empty()
        || has_plain_aggregate(query)
        || has_window(query)
    {
        return None;
    }
    let mut simplified = query.clone();
    let SetExpr::Select(select) = simplified.body.as_mut() else { return None };
    select.projection = vec![ast::SelectItem::UnnamedExpr(E::value(ast::Value::Number("1".into(), false)))];
    select.distinct = None;
    simplified.order_by = None;
    simplified.limit_clause = None;
    Some(simplified)
}
