//! Named windows: `WINDOW w AS (…)` in a SELECT, and `OVER w` or `OVER (w ORDER BY …)` in its window calls.
//!
//! They are resolved on the syntax tree before binding, by PostgreSQL's rules (its `transformWindowDefinitions`):
//! a window that names another copies its PARTITION BY, may add an ORDER BY only where the other has none, and
//! may not copy one with a frame clause; `OVER w` alone takes `w` whole, frame included. Every call is then an
//! ordinary `OVER (…)`, which is all the binder knows. Names belong to one SELECT: a subquery's calls see its own
//! WINDOW clause, not the enclosing one's.

use std::ops::ControlFlow;

use numadb_execution::{ExecError, sqlstate};
use sqlparser::ast::{
    self, NamedWindowExpr, Query, SetExpr, Visit, VisitMut, Visitor, VisitorMut, WindowSpec, WindowType,
};

use super::fold;

/// Whether `query` defines or names a window anywhere (the common case, no, costs a walk and no copy).
pub fn any(query: &Query) -> bool {
    query.visit(&mut Finder).is_break()
}

struct Finder;

impl Visitor for Finder {
    type Break = ();

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        fn defines(body: &SetExpr) -> bool {
            match body {
                SetExpr::Select(select) => !select.named_window.is_empty(),
                SetExpr::SetOperation { left, right, .. } => defines(left) || defines(right),
                _ => false,
            }
        }
        if defines(&query.body) { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    }

    fn pre_visit_expr(&mut self, expr: &ast::Expr) -> ControlFlow<()> {
        if let ast::Expr::Function(function) = expr
            && let Some(over) = &function.over
            && matches!(
                over,
                WindowType::NamedWindow(_) | WindowType::WindowSpec(WindowSpec { window_name: Some(_), .. })
            )
        {
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

/// `query` with every named window written out in the calls that use it, and no WINDOW clauses left.
pub fn resolve(mut query: Query) -> Result<Query, ExecError> {
    let mut resolver = Resolver;
    match VisitMut::visit(&mut query, &mut resolver) {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) => Ok(query),
    }
}

struct Resolver;

impl VisitorMut for Resolver {
    type Break = ExecError;

    /// Called after the query's subqueries were resolved: their calls name no window any more, so rewriting every
    /// call under this query's SELECTs only meets this level's.
    fn post_visit_query(&mut self, query: &mut Query) -> ControlFlow<ExecError> {
        let result = match query.body.as_mut() {
            // A plain SELECT: its ORDER BY may hold window calls too.
            SetExpr::Select(select) => resolve_select(select, query.order_by.as_mut()),
            body => resolve_set(body),
        };
        match result {
            Ok(()) => ControlFlow::Continue(()),
            Err(error) => ControlFlow::Break(error),
        }
    }
}

/// The SELECTs of a set operation (each with its own WINDOW clause).
fn resolve_set(body: &mut SetExpr) -> Result<(), ExecError> {
    match body {
        SetExpr::Select(select) => resolve_select(select, None),
        SetExpr::SetOperation { left, right, .. } => {
            resolve_set(left)?;
            resolve_set(right)
        }
        _ => Ok(()),
    }
}

fn resolve_select(select: &mut ast::Select, order_by: Option<&mut ast::OrderBy>) -> Result<(), ExecError> {
    let mut windows: Vec<(String, WindowSpec)> = Vec::new();
    for ast::NamedWindowDefinition(name, definition) in std::mem::take(&mut select.named_window) {
        let name = fold(&name);
        if windows.iter().any(|(defined, _)| *defined == name) {
            return Err(ExecError::new(sqlstate::WINDOWING_ERROR, format!("window \"{name}\" is already defined")));
        }
        let spec = match definition {
            NamedWindowExpr::WindowSpec(spec) => merge(&windows, spec)?,
            NamedWindowExpr::NamedWindow(base) => {
                merge(&windows, WindowSpec { window_name: Some(base), ..empty_spec() })?
            }
        };
        windows.push((name, spec));
    }
    let mut rewrite = |expr: &mut ast::Expr| -> ControlFlow<ExecError> {
        let ast::Expr::Function(function) = expr else { return ControlFlow::Continue(()) };
        let Some(over) = &mut function.over else { return ControlFlow::Continue(()) };
        let resolved = match over {
            WindowType::NamedWindow(name) => lookup(&windows, name).cloned(),
            WindowType::WindowSpec(spec) if spec.window_name.is_some() => merge(&windows, spec.clone()),
            WindowType::WindowSpec(_) => return ControlFlow::Continue(()),
        };
        match resolved {
            Ok(spec) => {
                *over = WindowType::WindowSpec(spec);
                ControlFlow::Continue(())
            }
            Err(error) => ControlFlow::Break(error),
        }
    };
    let mut visited = ast::visit_expressions_mut(&mut select.projection, &mut rewrite);
    if visited.is_continue() {
        visited = ast::visit_expressions_mut(&mut select.having, &mut rewrite);
    }
    if visited.is_continue()
        && let Some(order_by) = order_by
    {
        visited = ast::visit_expressions_mut(order_by, &mut rewrite);
    }
    match visited {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) => Ok(()),
    }
}

fn empty_spec() -> WindowSpec {
    WindowSpec { window_name: None, partition_by: Vec::new(), order_by: Vec::new(), window_frame: None }
}

fn lookup<'w>(windows: &'w [(String, WindowSpec)], name: &ast::Ident) -> Result<&'w WindowSpec, ExecError> {
    let name = fold(name);
    windows
        .iter()
        .find(|(defined, _)| *defined == name)
        .map(|(_, spec)| spec)
        .ok_or_else(|| ExecError::new(sqlstate::UNDEFINED_OBJECT, format!("window \"{name}\" does not exist")))
}

/// `(base …)`: `spec` over the window it names, by PostgreSQL's rules for copying a window.
fn merge(windows: &[(String, WindowSpec)], spec: WindowSpec) -> Result<WindowSpec, ExecError> {
    let Some(base_name) = &spec.window_name else { return Ok(spec) };
    let base = lookup(windows, base_name)?;
    let name = fold(base_name);
    if !spec.partition_by.is_empty() {
        return Err(ExecError::new(
            sqlstate::WINDOWING_ERROR,
            format!("cannot override PARTITION BY clause of window \"{name}\""),
        ));
    }
    if !spec.order_by.is_empty() && !base.order_by.is_empty() {
        return Err(ExecError::new(
            sqlstate::WINDOWING_ERROR,
            format!("cannot override ORDER BY clause of window \"{name}\""),
        ));
    }
    if base.window_frame.is_some() {
        let error = ExecError::new(
            sqlstate::WINDOWING_ERROR,
            format!("cannot copy window \"{name}\" because it has a frame clause"),
        );
        return Err(if spec.order_by.is_empty() && spec.window_frame.is_none() {
            error.with_hint("Omit the parentheses in this OVER clause.")
        } else {
            error
        });
    }
    Ok(WindowSpec {
        window_name: None,
        partition_by: base.partition_by.clone(),
        order_by: if spec.order_by.is_empty() { base.order_by.clone() } else { spec.order_by },
        window_frame: spec.window_frame,
    })
}
