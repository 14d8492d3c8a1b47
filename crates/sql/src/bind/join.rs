//! SELECT over a FROM clause with joins: `[INNER] JOIN`, `LEFT`/`RIGHT`/`FULL [OUTER] JOIN` with `ON`, `USING` or
//! `NATURAL`, `CROSS JOIN` and commas.
//!
//! Each relation (a table, a subquery, a `WITH` query) produces only the columns the query can name: a column
//! whose name appears nowhere in the statement's text is not read, so a join of two wide tables does not carry
//! every column through the hash table. The WHERE conjuncts that read one relation, and the `ON` conjuncts that
//! read only the joined relation, go into that relation's scan where that cannot change the result (not into a
//! relation an outer join pads with NULLs), so the scan kernels and the primary-key index see them. What is left of
//! `ON` becomes the join's equality keys (a hash join) and a condition on the joined rows; the rest of WHERE and
//! every other clause run over the joined rows as over a subquery's.
//!
//! Commas and `CROSS JOIN` put the join conditions in WHERE, and the order written need not be one where each
//! join has a key (`FROM a, b, c WHERE a.x = c.x AND c.y = b.y`: a × b has no condition). When every join is
//! inner, any order gives the same rows, so the relations are joined in one where each join has an equality with
//! those before it if one exists, and each conjunct over several relations (from WHERE or ON) is checked by the
//! first join that has them all. The joined row is then in another order than the one the names were bound
//! against, so the other clauses are renumbered. With outer joins the order stays as written, and a WHERE
//! conjunct over several relations goes into the join of the last of them when that is an inner join that no
//! later RIGHT or FULL join follows (which would pad the rows it kept with NULLs and bring back the ones it
//! dropped).

use std::collections::HashSet;
use std::sync::Arc;

use numadb_execution::plan::{Dedup, JoinKind, JoinPlan, Plan, ScanOutput};
use numadb_execution::{BinaryOp, ExecError, Expr, ScalarFunction, sqlstate};
use numadb_storage::{DataType, Table};
use sqlparser::ast::{
    self, BinaryOperator, Join, JoinConstraint, JoinOperator, Select, SelectItem, TableFactor, TableWithJoins,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::tokenizer::{Token, Tokenizer};

use super::{
    Binder, BoundQuery, OutputColumn, Scope, check_table_factor, flatten_and, fold, fold_boolean, map_columns,
    object_name, plan_over_rows, post, rename_columns, unsupported, uses_aggregates,
};

/// A column of a FROM clause with joins, as the query's names see it.
#[derive(Debug, Clone)]
pub(super) struct JoinColumn {
    name: String,
    /// The relation it belongs to (its alias or name); `None` for a column merged by `USING` or `NATURAL`.
    qualifier: Option<String>,
    /// Its value over the joined row.
    expr: Expr,
    /// Stood in for, under its bare name and in `*`, by the column `USING` or `NATURAL` merged it into.
    merged_away: bool,
}

/// The names of a FROM clause with joins.
#[derive(Debug, Clone, Default)]
pub(super) struct JoinNames {
    columns: Vec<JoinColumn>,
    /// The relations' names, in FROM order (`None`: a subquery without an alias).
    qualifiers: Vec<Option<String>>,
    /// What `*` expands to: positions in `columns` (merged columns first, as in PostgreSQL).
    star: Vec<usize>,
}

impl JoinNames {
    pub(super) fn column(&self, qualifier: Option<&str>, name: &str) -> Result<Expr, ExecError> {
        if let Some(q) = qualifier
            && !self.qualifiers.iter().any(|known| known.as_deref() == Some(q))
        {
            return Err(ExecError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("missing FROM-clause entry for table \"{q}\""),
            ));
        }
        let mut matches = self.columns.iter().filter(|c| {
            c.name == name
                && match qualifier {
                    Some(q) => c.qualifier.as_deref() == Some(q),
                    None => !c.merged_away,
                }
        });
        match (matches.next(), matches.next()) {
            (Some(column), None) => Ok(column.expr.clone()),
            (Some(_), Some(_)) => {
                Err(ExecError::new(sqlstate::AMBIGUOUS_COLUMN, format!("column reference \"{name}\" is ambiguous")))
            }
            (None, _) => Err(ExecError::new(sqlstate::UNDEFINED_COLUMN, format!("column \"{name}\" does not exist"))),
        }
    }

    /// The names a bare identifier can take (for recognising an enclosing query's name in a subquery).
    pub(super) fn visible_names(&self) -> Vec<String> {
        self.columns.iter().filter(|c| !c.merged_away).map(|c| c.name.clone()).collect()
    }

    /// The names each relation gives (its qualifier and columns), and the merged columns' bare names: what a
    /// subquery inside this SELECT can see of it.
    pub(super) fn scope_entries(&self) -> super::ScopeNames {
        let mut entries: Vec<(Option<String>, Vec<String>)> = Vec::new();
        for column in &self.columns {
            match entries.iter_mut().find(|(q, _)| *q == column.qualifier) {
                Some((_, names)) => names.push(column.name.clone()),
                None => entries.push((column.qualifier.clone(), vec![column.name.clone()])),
            }
        }
        entries
    }

    fn star_items(&self) -> Vec<(Expr, String)> {
        self.star.iter().map(|&i| (self.columns[i].expr.clone(), self.columns[i].name.clone())).collect()
    }

    /// `q.*`: the relation's columns in order (its `USING` columns included).
    pub(super) fn qualified_star(&self, qualifier: &str) -> Result<Vec<(Expr, String)>, ExecError> {
        if !self.qualifiers.iter().any(|known| known.as_deref() == Some(qualifier)) {
            return Err(ExecError::new(
                sqlstate::UNDEFINED_TABLE,
                format!("missing FROM-clause entry for table \"{qualifier}\""),
            ));
        }
        Ok(self
            .columns
            .iter()
            .filter(|c| c.qualifier.as_deref() == Some(qualifier))
            .filter(|c| !c.name.starts_with(super::decorrelate::HIDDEN_COLUMN))
            .map(|c| (c.expr.clone(), c.name.clone()))
            .collect())
    }
}

/// Where a relation's rows come from.
enum Source {
    /// A table's scan (or index lookup), reading these of its columns in this order.
    Table(Arc<Table>, Vec<usize>),
    /// A subquery's or `WITH` query's plan, already cut to the columns the query names.
    Query(Plan),
}

/// One relation of FROM: its columns are positions `start..start + width` of the joined row.
struct Relation {
    source: Source,
    start: usize,
    width: usize,
    /// Its columns (offsets from `start`) the joins pass on: all, until [`prune_columns`] leaves out those only
    /// its own pushed filters read.
    output: Vec<usize>,
    /// An outer join pads it with NULLs: a WHERE conjunct over it cannot go into its scan.
    null_supplied: bool,
    /// Conjuncts (over the joined row) that filter its rows before the joins.
    pushed: Vec<Expr>,
}

/// The join of the relations before `relations[i + 1]` with it.
struct Step {
    kind: JoinKind,
    /// The join condition (`ON`, or `USING`'s equalities), over the joined row.
    condition: Option<Expr>,
}

impl Binder<'_> {
    /// Plans a SELECT whose FROM has several relations.
    pub(super) fn plan_select_join(
        &self,
        select: &Select,
        order_by: &[&ast::OrderByExpr],
        limit: Option<Expr>,
        offset: Option<Expr>,
    ) -> Result<BoundQuery, ExecError> {
        let needs = Needed::of(select, order_by);
        let mut names = JoinNames::default();
        let mut relations: Vec<Relation> = Vec::new();
        let mut steps: Vec<Step> = Vec::new();
        let mut tables: Vec<Arc<Table>> = Vec::new();
        for (position, item) in select.from.iter().enumerate() {
            let (first, joins) = flatten_nested(item, position == 0)?;
            // An ON inside this item sees only this item's relations (`a, b JOIN c ON a.x = c.x` is 42P01).
            let (item_columns, item_qualifiers) = (names.columns.len(), names.qualifiers.len());
            self.add_relation(first, &needs, &mut names, &mut relations, &mut tables)?;
            if position > 0 {
                steps.push(Step { kind: JoinKind::Inner, condition: None });
            }
            for join in joins {
                if matches!(join.join_operator, JoinOperator::CrossJoin(_)) {
                } else if matches!(join_constraint(&join.join_operator), Some(JoinConstraint::None)) {
                    return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "a JOIN needs ON, USING or NATURAL"));
                }
                // After a comma, PostgreSQL joins this item's relations first (`a, b JOIN c` is `a, (b JOIN c)`);
                // joined left to right here, that is the same only for inner and left joins on ON.
                if position > 0
                    && (matches!(
                        join.join_operator,
                        JoinOperator::Right(_) | JoinOperator::RightOuter(_) | JoinOperator::FullOuter(_)
                    ) || matches!(
                        join_constraint(&join.join_operator),
                        Some(JoinConstraint::Using(_) | JoinConstraint::Natural)
                    ))
                {
                    return Err(unsupported("a RIGHT or FULL join, or USING or NATURAL, after a comma in FROM")
                        .with_hint("List the joined relations first, or write the comma as CROSS JOIN."));
                }
                let (kind, constraint) = match &join.join_operator {
                    JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) => (JoinKind::Inner, c),
                    JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (JoinKind::Left, c),
                    JoinOperator::Right(c) | JoinOperator::RightOuter(c) => (JoinKind::Right, c),
                    JoinOperator::FullOuter(c) => (JoinKind::Full, c),
                    _ => return Err(unsupported("this kind of join")),
                };
                let left_columns = names.columns.len();
                self.add_relation(&join.relation, &needs, &mut names, &mut relations, &mut tables)?;
                let condition = match constraint {
                    JoinConstraint::On(on) => {
                        // A join the decorrelation added (to the last item) links the subquery to any relation.
                        let added = names
                            .qualifiers
                            .last()
                            .and_then(Option::as_deref)
                            .is_some_and(|q| q.starts_with(super::decorrelate::HIDDEN_RELATION));
                        let (item_columns, item_qualifiers) =
                            if added { (0, 0) } else { (item_columns, item_qualifiers) };
                        let item_names = JoinNames {
                            columns: names.columns[item_columns..].to_vec(),
                            qualifiers: names.qualifiers[item_qualifiers..].to_vec(),
                            star: Vec::new(),
                        };
                        let scope = join_scope(&item_names);
                        // A subquery in ON that names these relations is correlated (0A000), not unknown (42P01).
                        self.scopes.borrow_mut().push(item_names.scope_entries());
                        let bound = self.without_aggregates(|| self.bind_expr(on, &scope));
                        self.scopes.borrow_mut().pop();
                        let bound = bound?;
                        if uses_aggregates(&bound) {
                            return Err(ExecError::new(
                                sqlstate::GROUPING_ERROR,
                                "aggregate functions are not allowed in JOIN conditions",
                            ));
                        }
                        Some(self.condition(bound, "JOIN/ON")?)
                    }
                    JoinConstraint::Using(using) => {
                        let mut merged = Vec::new();
                        for name in using {
                            let [ast::ObjectNamePart::Identifier(ident)] = name.0.as_slice() else {
                                return Err(unsupported("a qualified name in USING"));
                            };
                            merged.push(fold(ident));
                        }
                        self.merge_columns(&mut names, left_columns, &merged, kind)?
                    }
                    JoinConstraint::Natural => {
                        // The names both sides have, in the order of the left side's columns (as `*` lists them).
                        let right: Vec<String> = names.columns[left_columns..].iter().map(|c| c.name.clone()).collect();
                        let mut common: Vec<String> = Vec::new();
                        for &i in names.star.iter().filter(|&&i| i < left_columns) {
                            let column = &names.columns[i];
                            if !column.merged_away && right.contains(&column.name) && !common.contains(&column.name) {
                                common.push(column.name.clone());
                            }
                        }
                        self.merge_columns(&mut names, left_columns, &common, kind)?
                    }
                    JoinConstraint::None => None,
                };
                steps.push(Step { kind, condition });
            }
        }

        // An outer join pads the relations on its NULL side: filters over them must run after it.
        for (index, step) in steps.iter().enumerate() {
            if matches!(step.kind, JoinKind::Left | JoinKind::Full) {
                relations[index + 1].null_supplied = true;
            }
            if matches!(step.kind, JoinKind::Right | JoinKind::Full) {
                relations[..=index].iter_mut().for_each(|r| r.null_supplied = true);
            }
        }

        let scope = join_scope(&names);
        let mut clauses = self.bind_select_clauses(select, &scope, order_by, Some(names.star_items()))?;
        let mut remaining_where = Vec::new();
        if let Some(filter) = clauses.filter.take() {
            let mut conjuncts = Vec::new();
            flatten_and(filter, &mut conjuncts);
            for conjunct in conjuncts {
                match relation_of(&conjunct, &relations) {
                    Some(index) if !relations[index].null_supplied => relations[index].pushed.push(conjunct),
                    _ => remaining_where.push(conjunct),
                }
            }
        }

        // Conjuncts of ON over the joined relation alone filter it first (for inner and left joins, where it is the
        // side whose unmatched rows are dropped).
        let mut conditions: Vec<Vec<Expr>> = Vec::with_capacity(steps.len());
        for (index, step) in steps.iter_mut().enumerate() {
            let mut kept = Vec::new();
            if let Some(condition) = step.condition.take() {
                let mut conjuncts = Vec::new();
                flatten_and(condition, &mut conjuncts);
                for conjunct in conjuncts {
                    let pushable = matches!(step.kind, JoinKind::Inner | JoinKind::Left)
                        && relation_of(&conjunct, &relations) == Some(index + 1);
                    if pushable {
                        relations[index + 1].pushed.push(conjunct);
                    } else {
                        kept.push(conjunct);
                    }
                }
            }
            conditions.push(kept);
        }

        let (order, step_conditions) = if steps.iter().all(|s| s.kind == JoinKind::Inner) {
            // Inner joins only: they may run in any order, and every conjunct over several relations may be
            // checked as soon as they are all joined. The relations are joined in an order that gives each join
            // an equality with the relations before it (a hash join) where one exists: `FROM a, b, c WHERE
            // a.x = c.x AND c.y = b.y` joins a with c, then b, instead of taking the cross product of a and b.
            let mut pool = Vec::new();
            let mut kept = Vec::new();
            let on_conjuncts = conditions.into_iter().flatten();
            for conjunct in on_conjuncts.chain(std::mem::take(&mut remaining_where)) {
                match relations_of(&conjunct, &relations).as_deref() {
                    Some([one]) => relations[*one].pushed.push(conjunct),
                    Some([_, _, ..]) => pool.push(conjunct),
                    _ => kept.push(conjunct),
                }
            }
            remaining_where = kept;
            inner_join_order(pool, &relations)
        } else {
            // With outer joins the order stays as written. A WHERE conjunct over several relations goes into the
            // join of the last of them, where it can be a hash key, when that join is inner and no later join pads
            // the rows it passes with NULLs (a RIGHT or FULL join): then it sees the same rows there as after the
            // joins. NULLs an earlier outer join padded are already in those rows.
            let mut conditions = conditions;
            let mut kept = Vec::new();
            for conjunct in std::mem::take(&mut remaining_where) {
                let target = relations_of(&conjunct, &relations).and_then(|set| {
                    let last = *set.iter().max()?;
                    let movable = set.len() > 1
                        && steps[last - 1].kind == JoinKind::Inner
                        && steps[last..].iter().all(|s| matches!(s.kind, JoinKind::Inner | JoinKind::Left));
                    movable.then(|| last - 1)
                });
                match target {
                    Some(step) => conditions[step].push(conjunct),
                    None => kept.push(conjunct),
                }
            }
            remaining_where = kept;
            ((0..relations.len()).collect(), conditions)
        };
        clauses.filter = (!remaining_where.is_empty()).then(|| fold_boolean(remaining_where, BinaryOp::And));

        let total_width: usize = relations.iter().map(|r| r.width).sum();
        prune_columns(&mut relations, &mut clauses, &step_conditions, total_width);
        // Positions in the joined row as written → positions in the row the joins (in `order`) produce (a column
        // pruned away has none: nothing after its scan reads it).
        let mut moved_to = vec![usize::MAX; total_width];
        let mut joined_start = 0;
        for &r in &order {
            for (position, offset) in relations[r].output.iter().enumerate() {
                moved_to[relations[r].start + offset] = joined_start + position;
            }
            joined_start += relations[r].output.len();
        }
        relations.iter_mut().for_each(|r| r.width = r.output.len());
        let mut relations: Vec<Option<Relation>> = relations.into_iter().map(Some).collect();
        let mut take = |r: usize| relations[r].take().ok_or_else(|| ExecError::internal("a relation joined twice"));
        let first = take(order[0])?;
        let mut width = first.width;
        let mut plan = self.relation_plan(first);
        for ((step, condition), &r) in steps.iter().zip(step_conditions).zip(&order[1..]) {
            let relation = take(r)?;
            let right_width = relation.width;
            let right = self.relation_plan(relation);
            let (mut left_keys, mut right_keys, mut rest) = (Vec::new(), Vec::new(), Vec::new());
            for conjunct in condition {
                let conjunct = map_columns(&conjunct, &|index| moved_to[index]);
                match equality_sides(&conjunct, width, right_width) {
                    Some((left, right)) => {
                        left_keys.push(left);
                        right_keys.push(shift_columns(&right, width));
                    }
                    None => rest.push(conjunct),
                }
            }
            plan = Plan::Join(JoinPlan {
                kind: step.kind,
                left: Box::new(plan),
                right: Box::new(right),
                left_keys,
                right_keys,
                condition: (!rest.is_empty()).then(|| fold_boolean(rest, BinaryOp::And)),
                left_width: width,
                right_width,
            });
            width += right_width;
        }
        // The other clauses were bound against the order as written (columns past the row are aggregates').
        clauses.map_columns(&|index| moved_to.get(index).copied().unwrap_or(index));

        // Column names by position in the joined row, for errors.
        let mut row_names = vec![String::from("?"); width];
        for column in &names.columns {
            if let Expr::Column { index, .. } = column.expr
                && column.qualifier.is_some()
                && moved_to[index] != usize::MAX
            {
                row_names[moved_to[index]] = column.name.clone();
            }
        }
        let (plan, columns) = plan_over_rows(plan, &row_names, clauses, limit, offset)?;
        Ok(BoundQuery { plan, columns, tables })
    }

    /// Adds a FROM item's columns (those the query can name) to `names` and its relation to `relations`.
    fn add_relation(
        &self,
        factor: &TableFactor,
        needs: &Needed,
        names: &mut JoinNames,
        relations: &mut Vec<Relation>,
        tables: &mut Vec<Arc<Table>>,
    ) -> Result<(), ExecError> {
        let (qualifier, columns, source) = match factor {
            TableFactor::Table { name, alias, .. } => {
                check_table_factor(factor)?;
                let qualifier = match alias {
                    Some(alias) => fold(&alias.name),
                    None => object_name(name).last().cloned().unwrap_or_default(),
                };
                let rename = |columns: &mut Vec<OutputColumn>| match alias {
                    Some(alias) => rename_columns(columns, &alias.columns, &format!("table \"{}\"", fold(&alias.name))),
                    None => Ok(()),
                };
                let query = match self.table_function(factor)? {
                    Some(query) => Some(query),
                    None => self.cte_or_view(name)?,
                };
                match query {
                    Some(mut query) => {
                        rename(&mut query.columns)?;
                        tables.extend(query.tables);
                        (Some(qualifier), query.columns, Source::Query(query.plan))
                    }
                    None => {
                        let table = self.source.resolve(name)?;
                        let mut columns: Vec<OutputColumn> = table
                            .columns()
                            .iter()
                            .map(|c| OutputColumn { name: c.name.clone(), data_type: c.data_type })
                            .collect();
                        rename(&mut columns)?;
                        tables.push(Arc::clone(&table));
                        (Some(qualifier), columns, Source::Table(table, Vec::new()))
                    }
                }
            }
            TableFactor::Derived { .. } => {
                let (query, qualifier) = self.plan_derived(factor)?;
                tables.extend(query.tables);
                (qualifier, query.columns, Source::Query(query.plan))
            }
            TableFactor::NestedJoin { .. } => {
                return Err(unsupported("parenthesized joins other than at the start of FROM"));
            }
            _ => return Err(unsupported("this FROM item")),
        };
        if let Some(q) = &qualifier
            && names.qualifiers.iter().any(|known| known.as_ref() == Some(q))
        {
            return Err(ExecError::new(
                sqlstate::DUPLICATE_ALIAS,
                format!("table name \"{q}\" specified more than once"),
            ));
        }
        // Only the columns the query can name are read.
        let kept: Vec<usize> =
            (0..columns.len()).filter(|&c| needs.column(qualifier.as_deref(), &columns[c].name)).collect();
        let start = relations.last().map_or(0, |r| r.start + r.width);
        // A relation the decorrelation added is not the user's: `*` does not list it.
        let hidden = qualifier.as_deref().is_some_and(|q| q.starts_with(super::decorrelate::HIDDEN_RELATION));
        for (offset, &c) in kept.iter().enumerate() {
            if !hidden && !columns[c].name.starts_with(super::decorrelate::HIDDEN_COLUMN) {
                names.star.push(names.columns.len());
            }
            names.columns.push(JoinColumn {
                name: columns[c].name.clone(),
                qualifier: qualifier.clone(),
                expr: Expr::Column { index: start + offset, data_type: columns[c].data_type },
                merged_away: false,
            });
        }
        names.qualifiers.push(qualifier);
        let source = match source {
            Source::Table(table, _) => Source::Table(table, kept.clone()),
            Source::Query(plan) if kept.len() == columns.len() => Source::Query(plan),
            Source::Query(plan) => {
                let projection =
                    kept.iter().map(|&c| Expr::Column { index: c, data_type: columns[c].data_type }).collect();
                Source::Query(post(plan, None, Some(projection), Dedup::No, Vec::new(), None, None))
            }
        };
        let (width, output) = (kept.len(), (0..kept.len()).collect());
        relations.push(Relation { source, start, width, output, null_supplied: false, pushed: Vec::new() });
        Ok(())
    }

    /// `USING (names)` (and `NATURAL`): the equalities of the left and right columns of each name, and one merged
    /// column per name that stands in for both (the left one's value, the right one's for a right join, the first
    /// not NULL for a full join), listed first by `*`.
    fn merge_columns(
        &self,
        names: &mut JoinNames,
        left_columns: usize,
        merged: &[String],
        kind: JoinKind,
    ) -> Result<Option<Expr>, ExecError> {
        let mut equalities = Vec::new();
        let mut merged_positions = Vec::new();
        for name in merged {
            if merged.iter().filter(|n| *n == name).count() > 1 {
                return Err(ExecError::new(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column name \"{name}\" appears more than once in USING clause"),
                ));
            }
            let side = |range: std::ops::Range<usize>, which: &str| {
                let mut found = range.filter(|&i| !names.columns[i].merged_away && names.columns[i].name == *name);
                match (found.next(), found.next()) {
                    (Some(i), None) => Ok(i),
                    (Some(_), Some(_)) => Err(ExecError::new(
                        sqlstate::AMBIGUOUS_COLUMN,
                        format!("common column name \"{name}\" appears more than once in {which} table"),
                    )),
                    (None, _) => Err(ExecError::new(
                        sqlstate::UNDEFINED_COLUMN,
                        format!("column \"{name}\" specified in USING clause does not exist in {which} table"),
                    )),
                }
            };
            let left = side(0..left_columns, "left")?;
            let right = side(left_columns..names.columns.len(), "right")?;
            let (left_expr, right_expr) = (names.columns[left].expr.clone(), names.columns[right].expr.clone());
            // Types that do not meet are PostgreSQL's 42804 here, before `=` would say 42883.
            let (both, data_type) = self.unify_results(vec![left_expr.clone(), right_expr.clone()], "JOIN/USING")?;
            equalities.push(self.bind_binary(&BinaryOperator::Eq, left_expr, right_expr)?);
            let expr = match kind {
                JoinKind::Inner | JoinKind::Left => both[0].clone(),
                JoinKind::Right => both[1].clone(),
                JoinKind::Full => Expr::Function { function: ScalarFunction::Coalesce, args: both, data_type },
            };
            names.columns[left].merged_away = true;
            names.columns[right].merged_away = true;
            merged_positions.push(names.columns.len());
            names.columns.push(JoinColumn { name: name.clone(), qualifier: None, expr, merged_away: false });
        }
        let rest: Vec<usize> = names.star.iter().copied().filter(|&i| !names.columns[i].merged_away).collect();
        names.star = merged_positions.into_iter().chain(rest).collect();
        Ok((!equalities.is_empty()).then(|| fold_boolean(equalities, BinaryOp::And)))
    }

    /// A relation's plan, its pushed conjuncts as its filter.
    fn relation_plan(&self, relation: Relation) -> Plan {
        let Relation { source, start, pushed, output, .. } = relation;
        match source {
            Source::Table(table, columns) => {
                // Over the table's own columns: position `start + i` of the joined row is table column `columns[i]`.
                let to_table = |expr: &Expr| map_columns(expr, &|index| columns[index - start]);
                let filter =
                    (!pushed.is_empty()).then(|| fold_boolean(pushed.iter().map(to_table).collect(), BinaryOp::And));
                let output = output
                    .iter()
                    .map(|&offset| Expr::Column {
                        index: columns[offset],
                        data_type: table.columns()[columns[offset]].data_type,
                    })
                    .collect();
                self.scan_or_lookup(&table, filter, ScanOutput::Rows(output))
            }
            Source::Query(plan) if pushed.is_empty() => plan,
            Source::Query(plan) => {
                let filter = fold_boolean(pushed.iter().map(|e| shift_columns(e, start)).collect(), BinaryOp::And);
                post(plan, Some(filter), None, Dedup::No, Vec::new(), None, None)
            }
        }
    }
}

/// Leaves out of each table's scan output the columns that only its own pushed filters read: in `a JOIN b ON
/// a.x = b.y WHERE a.z < 10`, `a.z` is read by `a`'s scan and goes no further, so the scan makes, and the joins
/// carry and copy, one value fewer per row. What stays: every column the other clauses (select list, remaining
/// WHERE, GROUP BY, HAVING, ORDER BY, aggregates, windows) or a join condition reads. A relation that is a
/// subquery keeps its columns; a table whose columns none reads keeps its first, so its rows still count.
fn prune_columns(
    relations: &mut [Relation],
    clauses: &mut super::SelectClauses<'_>,
    conditions: &[Vec<Expr>],
    total_width: usize,
) {
    let used = std::cell::RefCell::new(vec![false; total_width]);
    // Renumbering by the identity visits every column the clauses read (positions past the row are
    // aggregates' and windows', at their own bases).
    clauses.map_columns(&|index| {
        if let Some(flag) = used.borrow_mut().get_mut(index) {
            *flag = true;
        }
        index
    });
    let mut used = used.into_inner();
    let mut read = Vec::new();
    conditions.iter().flatten().for_each(|condition| condition.columns(&mut read));
    read.into_iter().for_each(|index| used[index] = true);
    for relation in relations.iter_mut().filter(|r| matches!(r.source, Source::Table(..))) {
        relation.output = (0..relation.width).filter(|&offset| used[relation.start + offset]).collect();
        if relation.output.is_empty() && relation.width > 0 {
            relation.output.push(0);
        }
    }
}

/// A FROM item's first relation and its joins, a leading parenthesized join (`(a JOIN b ON …) JOIN c …`) taken
/// apart: joined left to right, it is the same join. Elsewhere parentheses would change the order, so they are
/// refused.
fn flatten_nested(item: &TableWithJoins, leading: bool) -> Result<(&TableFactor, Vec<&Join>), ExecError> {
    match &item.relation {
        TableFactor::NestedJoin { table_with_joins, alias: None } if leading => {
            let (first, mut joins) = flatten_nested(table_with_joins, true)?;
            joins.extend(&item.joins);
            Ok((first, joins))
        }
        TableFactor::NestedJoin { .. } => Err(unsupported("parenthesized joins other than at the start of FROM")),
        relation => Ok((relation, item.joins.iter().collect())),
    }
}

fn join_scope(names: &JoinNames) -> Scope<'_> {
    Scope { joined: Some(names), table: None, renamed: None, derived: None, qualifier: None }
}

/// The one relation whose columns `expr` reads, if it reads columns of exactly one.
fn relation_of(expr: &Expr, relations: &[Relation]) -> Option<usize> {
    match relations_of(expr, relations).as_deref() {
        Some(&[one]) => Some(one),
        _ => None,
    }
}

/// The relations whose columns `expr` reads, in order; `None` if it reads a column of none.
fn relations_of(expr: &Expr, relations: &[Relation]) -> Option<Vec<usize>> {
    let mut columns = Vec::new();
    expr.columns(&mut columns);
    let mut set = Vec::new();
    for column in columns {
        let index = relations.iter().position(|r| (r.start..r.start + r.width).contains(&column))?;
        if !set.contains(&index) {
            set.push(index);
        }
    }
    set.sort_unstable();
    Some(set)
}

/// The order in which to join relations that are all inner-joined, and the conjuncts (each over two relations or
/// more) each join checks: the first relation first, then each time the first relation not yet joined that an
/// equality links to those joined (a hash join), or failing that the first not yet joined (a cross product). Each
/// conjunct is checked by the join after which all its relations are present.
fn inner_join_order(pool: Vec<Expr>, relations: &[Relation]) -> (Vec<usize>, Vec<Vec<Expr>>) {
    let count = relations.len();
    let sets: Vec<Vec<usize>> = pool.iter().map(|c| relations_of(c, relations).unwrap_or_default()).collect();
    let mut joined = vec![false; count];
    let mut order = Vec::with_capacity(count);
    if count > 0 {
        joined[0] = true;
        order.push(0);
    }
    let links = |joined: &[bool], candidate: usize| {
        pool.iter().any(|conjunct| {
            let Expr::Binary { op: BinaryOp::Eq, left, right, .. } = conjunct else { return false };
            let (Some(left), Some(right)) = (relations_of(left, relations), relations_of(right, relations)) else {
                return false;
            };
            let is_candidate = |set: &[usize]| set == [candidate];
            let all_joined = |set: &[usize]| !set.is_empty() && set.iter().all(|&r| joined[r]);
            (is_candidate(&left) && all_joined(&right)) || (is_candidate(&right) && all_joined(&left))
        })
    };
    while order.len() < count {
        let waiting = || (0..count).filter(|&r| !joined[r]);
        let Some(next) = waiting().find(|&r| links(&joined, r)).or_else(|| waiting().next()) else { break };
        joined[next] = true;
        order.push(next);
    }
    let mut position = vec![0; count];
    for (at, &r) in order.iter().enumerate() {
        position[r] = at;
    }
    let mut conditions = vec![Vec::new(); count.saturating_sub(1)];
    for (conjunct, set) in pool.into_iter().zip(sets) {
        let last = set.iter().map(|&r| position[r]).max().unwrap_or(0).max(1);
        conditions[last - 1].push(conjunct);
    }
    (order, conditions)
}

/// `l = r` with `l` over the left input's columns (`..left_width`) and `r` over the right input's: a hash key.
fn equality_sides(expr: &Expr, left_width: usize, right_width: usize) -> Option<(Expr, Expr)> {
    let Expr::Binary { op: BinaryOp::Eq, left, right, .. } = expr else { return None };
    let within = |e: &Expr, range: std::ops::Range<usize>| {
        let mut columns = Vec::new();
        e.columns(&mut columns);
        !columns.is_empty() && columns.iter().all(|c| range.contains(c))
    };
    let (l, r) = (0..left_width, left_width..left_width + right_width);
    let (left_key, right_key) = if within(left, l.clone()) && within(right, r.clone()) {
        (left.as_ref().clone(), right.as_ref().clone())
    } else if within(right, l) && within(left, r) {
        (right.as_ref().clone(), left.as_ref().clone())
    } else {
        return None;
    };
    // `=` compares an integer (or a NUMERIC sum) with a double as doubles (2^53 + 1 = 2^53): the keys are hashed
    // and compared so too (a value hashes by its kind: an integer no double holds exactly, as itself).
    let as_double = |key: Expr| match key.data_type() {
        DataType::Integer | DataType::BigInt | DataType::Numeric => {
            Expr::Cast { expr: Box::new(key), to: DataType::Double }
        }
        _ => key,
    };
    if left_key.data_type() != right_key.data_type()
        && (left_key.data_type() == DataType::Double || right_key.data_type() == DataType::Double)
    {
        return Some((as_double(left_key), as_double(right_key)));
    }
    Some((left_key, right_key))
}

/// `expr` with every column `i` read as column `i - by`.
fn shift_columns(expr: &Expr, by: usize) -> Expr {
    map_columns(expr, &|index| index - by)
}

/// The columns a SELECT can name: every bare identifier in its text (and its ORDER BY's) and every qualified one
/// (`q.name`, for the relation `q` only), and all the columns of the relations a `*` (or `q.*`) expands; with
/// `NATURAL`, all (its columns are named by no identifier).
struct Needed {
    bare: HashSet<String>,
    qualified: HashSet<(String, String)>,
    everything: bool,
    qualified_stars: Vec<String>,
}

impl Needed {
    fn of(select: &Select, order_by: &[&ast::OrderByExpr]) -> Needed {
        let text = select_text(select, order_by);
        let (mut bare, mut qualified) = (HashSet::new(), HashSet::new());
        // The text is the parser's own rendering of a statement it parsed, so it tokenizes; if not, read everything.
        let chains = name_chains(&text);
        let mut everything = chains.is_none();
        for (chain, _) in chains.unwrap_or_default() {
            match chain.as_slice() {
                [name] => {
                    bare.insert(name.clone());
                }
                [.., qualifier, name] => {
                    qualified.insert((qualifier.clone(), name.clone()));
                }
                [] => {}
            }
        }
        let mut qualified_stars = Vec::new();
        for item in &select.projection {
            match item {
                SelectItem::Wildcard(_) => everything = true,
                SelectItem::QualifiedWildcard(ast::SelectItemQualifiedWildcardKind::ObjectName(name), _) => {
                    qualified_stars.extend(object_name(name).last().cloned())
                }
                _ => {}
            }
        }
        let natural = select.from.iter().any(|item| {
            let joins = flatten_nested(item, true).map(|(_, joins)| joins).unwrap_or_default();
            joins.iter().any(|j| matches!(join_constraint(&j.join_operator), Some(JoinConstraint::Natural)))
        });
        Needed { bare, qualified, everything: everything || natural, qualified_stars }
    }

    fn column(&self, qualifier: Option<&str>, name: &str) -> bool {
        self.everything
            || self.bare.contains(name)
            || qualifier.is_some_and(|q| {
                self.qualified.contains(&(q.to_string(), name.to_string()))
                    || self.qualified_stars.iter().any(|s| s == q)
            })
    }
}

/// A SELECT's text followed by its ORDER BY items' (which the statement keeps outside the SELECT).
fn select_text(select: &Select, order_by: &[&ast::OrderByExpr]) -> String {
    let mut text = select.to_string();
    for item in order_by {
        text.push(' ');
        text.push_str(&item.to_string());
    }
    text
}

/// Whether a SELECT's text (with its ORDER BY) has the keyword OVER: it may call window functions.
pub(super) fn mentions_over(select: &Select, order_by: &[&ast::OrderByExpr]) -> bool {
    let text = select_text(select, order_by);
    match Tokenizer::new(&PostgreSqlDialect {}, &text).tokenize() {
        Ok(tokens) => {
            tokens.iter().any(|t| matches!(t, Token::Word(w) if w.keyword == Keyword::OVER && w.quote_style.is_none()))
        }
        Err(_) => true,
    }
}

/// The names in a text of SQL, as chains of words joined by periods (`q.name` is `[q, name]`), each with whether
/// `(` follows it (a function's name); `None` when the text does not tokenize.
pub(super) fn name_chains(text: &str) -> Option<Vec<(Vec<String>, bool)>> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, text).tokenize().ok()?;
    let tokens: Vec<Token> = tokens.into_iter().filter(|t| !matches!(t, Token::Whitespace(_))).collect();
    let word = |token: &Token| match token {
        Token::Word(w) => Some(if w.quote_style.is_some() { w.value.clone() } else { w.value.to_lowercase() }),
        _ => None,
    };
    let mut chains = Vec::new();
    let mut position = 0;
    while position < tokens.len() {
        let Some(first) = word(&tokens[position]) else {
            position += 1;
            continue;
        };
        let mut chain = vec![first];
        position += 1;
        while position + 1 < tokens.len() && tokens[position] == Token::Period {
            let Some(next) = word(&tokens[position + 1]) else { break };
            chain.push(next);
            position += 2;
        }
        chains.push((chain, tokens.get(position) == Some(&Token::LParen)));
    }
    Some(chains)
}

pub(super) fn join_constraint(operator: &JoinOperator) -> Option<&JoinConstraint> {
    match operator {
        JoinOperator::Join(c)
        | JoinOperator::Inner(c)
        | JoinOperator::Left(c)
        | JoinOperator::LeftOuter(c)
        | JoinOperator::Right(c)
        | JoinOperator::RightOuter(c)
        | JoinOperator::FullOuter(c)
        | JoinOperator::CrossJoin(c) => Some(c),
        _ => None,
    }
}
