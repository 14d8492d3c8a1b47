//! Views: `CREATE [OR REPLACE] VIEW name [(columns)] AS query`, `DROP VIEW`.
//!
//! A view is kept as its query's syntax tree (named windows already written out) and planned afresh wherever a
//! statement names it, as a subquery in FROM of its own scope: it sees the catalog, not the `WITH` queries of
//! the statement that reads it. Unlike PostgreSQL, which binds a view once when it is created, `SELECT *` in a
//! view therefore takes the columns its tables have when it is read. What a view reads is recorded when it is
//! made, so that dropping a table or view others depend on is refused (2BP01) unless CASCADE drops them too.
//! Which columns a view reads is not recorded: ALTER TABLE plans the views that read the table against its
//! altered columns to find those the change affects (`database/alter.rs`).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::{Arc, RwLock};

use numadb_execution::{ExecError, sqlstate};
use sqlparser::ast::{self, Query};

use crate::bind::fold;

/// A view.
#[derive(Debug)]
pub struct View {
    /// The query, with named windows written out.
    pub query: Query,
    /// The names its columns take (a prefix; the rest keep the query's).
    pub columns: Vec<String>,
    /// Tables and views it reads (folded names).
    pub reads: Vec<String>,
}

/// The database's views by name.
#[derive(Debug, Default)]
pub struct Views {
    views: RwLock<HashMap<String, Arc<View>>>,
}

impl Views {
    /// The view named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<View>> {
        self.views.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Whether a view of that name exists.
    pub fn contains(&self, name: &str) -> bool {
        self.views.read().unwrap_or_else(|p| p.into_inner()).contains_key(name)
    }

    /// Makes or replaces the view `name`.
    pub fn insert(&self, name: String, view: View) {
        self.views.write().unwrap_or_else(|p| p.into_inner()).insert(name, Arc::new(view));
    }

    /// Removes the view `name`.
    pub fn remove(&self, name: &str) -> bool {
        self.views.write().unwrap_or_else(|p| p.into_inner()).remove(name).is_some()
    }

    /// The views that read `name`, sorted.
    pub fn dependents(&self, name: &str) -> Vec<String> {
        let views = self.views.read().unwrap_or_else(|p| p.into_inner());
        let mut found: Vec<String> =
            views.iter().filter(|(_, v)| v.reads.iter().any(|r| r == name)).map(|(n, _)| n.clone()).collect();
        found.sort();
        found
    }

    /// Every view that reads `name`, directly or through other views, in an order that drops dependents first.
    pub fn dependents_closure(&self, name: &str) -> Vec<String> {
        let mut order = Vec::new();
        let mut pending = vec![name.to_string()];
        while let Some(next) = pending.pop() {
            for dependent in self.dependents(&next) {
                if !order.contains(&dependent) {
                    order.push(dependent.clone());
                    pending.push(dependent);
                }
            }
        }
        order
    }

    /// The 2BP01 error for dropping `what` (`"table"`/`"view"`) `name` that `dependents` read.
    pub fn dependents_error(what: &str, name: &str, dependents: &[String]) -> ExecError {
        let detail: Vec<String> = dependents.iter().map(|d| format!("view {d} depends on {what} {name}")).collect();
        ExecError::new(
            sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
            format!("cannot drop {what} {name} because other objects depend on it"),
        )
        .with_detail(detail.join("\n"))
        .with_hint("Use DROP ... CASCADE to drop the dependent objects too.")
    }
}

/// The relations `query` names with one part (or in schema `public`), folded, once each.
pub fn relations_read(query: &Query) -> Vec<String> {
    let mut names = Vec::new();
    let _ = ast::visit_relations(query, |relation| {
        let parts: Vec<String> = relation.0.iter().filter_map(|p| p.as_ident().map(fold)).collect();
        let name = match parts.as_slice() {
            [name] => Some(name.clone()),
            [schema, name] if schema == "public" => Some(name.clone()),
            _ => None,
        };
        if let Some(name) = name
            && !names.contains(&name)
        {
            names.push(name);
        }
        ControlFlow::<()>::Continue(())
    });
    names
}
