//! `WITH RECURSIVE`: a query that reads its own rows.
//!
//! PostgreSQL's form only: `non-recursive term UNION [ALL] recursive term`, the recursive term reading the query's
//! name. The non-recursive term is planned first and fixes the columns' names and types; the query's name then
//! stands for a working table of those columns ([`Plan::WorkingTable`]) while the recursive term is planned; the
//! result is a [`Plan::Recursive`], which runs the recursive term round after round over the rows the previous
//! round added. As in PostgreSQL, the recursive term must produce the non-recursive term's types (42804
//! otherwise: a round's rows become the next round's input, bound to those types).

use std::ops::ControlFlow;

use numadb_execution::plan::Plan;
use numadb_execution::{ExecError, sqlstate};
use sqlparser::ast::{self, SetExpr, SetOperator, SetQuantifier, Visit};

use super::{Binder, BoundQuery, Cte, SetSides, fold, rename_columns, settle_untyped, unsupported};

/// Whether `node` (a query or part of one) names the table `name` anywhere (in FROM, its subqueries, its `WITH`
/// queries).
pub(super) fn refers_to(node: &impl Visit, name: &str) -> bool {
    ast::visit_relations(node, |relation| {
        let named = matches!(relation.0.as_slice(), [part] if part.as_ident().is_some_and(|i| fold(i) == name));
        if named { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    })
    .is_break()
}

impl Binder<'_> {
    /// Plans the recursive `WITH` query `cte` named `name`.
    pub(super) fn plan_recursive_cte(&self, name: &str, cte: &ast::Cte) -> Result<BoundQuery, ExecError> {
        let query = &cte.query;
        let SetExpr::SetOperation { op: SetOperator::Union, set_quantifier, left, right } = query.body.as_ref() else {
            return Err(ExecError::new(
                sqlstate::INVALID_RECURSION,
                format!(
                    "recursive query \"{name}\" does not have the form non-recursive-term UNION [ALL] recursive-term"
                ),
            ));
        };
        if query.order_by.is_some() || query.limit_clause.is_some() || query.fetch.is_some() {
            return Err(unsupported("ORDER BY, LIMIT or OFFSET in a recursive query"));
        }
        if query.with.is_some() {
            return Err(unsupported("WITH inside a recursive query"));
        }
        let distinct = match set_quantifier {
            SetQuantifier::All => false,
            SetQuantifier::Distinct | SetQuantifier::None => true,
            other => return Err(unsupported(&format!("UNION {other} in a recursive query"))),
        };
        if refers_to(left.as_ref(), name) {
            return Err(ExecError::new(
                sqlstate::INVALID_RECURSION,
                format!("recursive reference to query \"{name}\" must not appear within its non-recursive term"),
            ));
        }
        let mut base = self.plan_set_expr(left)?;
        settle_untyped(&mut base);
        rename_columns(&mut base.columns, &cte.alias.columns, &format!("WITH query \"{name}\""))?;

        // The recursive term sees the query's name as the working table of the base's columns.
        let id = self.ctes_defined.get();
        self.ctes_defined.set(id + 1);
        let types = base.columns.iter().map(|c| c.data_type).collect();
        let working =
            BoundQuery { plan: Plan::WorkingTable { id, types }, columns: base.columns.clone(), tables: Vec::new() };
        self.ctes.borrow_mut().push(Cte { name: name.to_string(), id, query: working });
        let step = self.plan_set_expr(right);
        self.ctes.borrow_mut().pop();
        let step = step?;

        let base_types: Vec<_> = base.columns.iter().map(|c| c.data_type).collect();
        let SetSides { columns, left: base_plan, right: step_plan, tables } =
            self.set_operation_sides(base, step, "UNION")?;
        for (position, (before, after)) in base_types.iter().zip(&columns).enumerate() {
            if *before != after.data_type {
                return Err(ExecError::new(
                    sqlstate::DATATYPE_MISMATCH,
                    format!(
                        "recursive query \"{name}\" column {} has type {before} in non-recursive term but type {} overall",
                        position + 1,
                        after.data_type
                    ),
                )
                .with_hint("Cast the output of the non-recursive term to the correct type."));
            }
        }
        let plan = Plan::Recursive { id, base: Box::new(base_plan), step: Box::new(step_plan), distinct };
        // The names are the base's (set_operation_sides keeps the left side's).
        Ok(BoundQuery { plan, columns, tables })
    }
}
