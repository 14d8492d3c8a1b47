//! What PostgreSQL clients ask that numadb's SQL layer does not answer: the catalog queries psql sends for its
//! `\d` family (joins over `pg_catalog`), and the functions drivers call (`version()`, `current_setting(…)`,
//! `current_database()`, …), plus `SHOW TRANSACTION ISOLATION LEVEL`.
//!
//! The server recognises these statements by shape before the engine sees them and answers from
//! `Database::catalog()` and the session. Anything else that names `pg_catalog` or `information_schema` is an
//! error (0A000) rather than a wrong answer.

mod catalog;
mod functions;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use numadb_execution::{ExecError, sqlstate};
use numadb_sql::{Database, Session};

use crate::handler::ResultSet;
use crate::protocol::types::Column;
use crate::registry::Registry;

/// What a compat query may read.
pub struct CompatContext<'a> {
    /// The database.
    pub db: &'a Arc<Database>,
    /// The session.
    pub session: &'a Session,
    /// The user.
    pub user: &'a str,
    /// The database name the client asked for.
    pub database: &'a str,
    /// The session's process id.
    pub process_id: i32,
    /// The sessions.
    pub registry: &'a Registry,
    /// Object ids.
    pub oids: &'a Oids,
}

/// Stable object ids for relations, handed out on first sight (PostgreSQL's user objects start at 16384).
#[derive(Default)]
pub struct Oids {
    assigned: Mutex<HashMap<String, u32>>,
}

/// The first object id given to numadb's relations.
const FIRST_USER_OID: u32 = 16_384;

impl Oids {
    /// The id of an object by a key (`kind:name`).
    pub fn of(&self, key: &str) -> u32 {
        let mut assigned = self.assigned.lock().unwrap_or_else(|p| p.into_inner());
        let next = FIRST_USER_OID + assigned.len() as u32;
        *assigned.entry(key.to_string()).or_insert(next)
    }
}

/// A statement the server answers itself.
pub struct CompatQuery {
    columns: Vec<Column>,
    kind: Kind,
}

enum Kind {
    Function(functions::Select),
    Catalog(catalog::CatalogQuery),
}

impl CompatQuery {
    /// The result columns.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Whether it is a session function (answered from memory at once), not a catalog query.
    pub fn is_function(&self) -> bool {
        matches!(self.kind, Kind::Function(_))
    }

    /// Computes the answer.
    pub fn run(&self, context: &CompatContext<'_>) -> Result<ResultSet, ExecError> {
        let rows = match &self.kind {
            Kind::Function(select) => vec![select.evaluate(context)?],
            Kind::Catalog(query) => query.rows(context)?,
        };
        Ok(ResultSet {
            columns: self.columns.clone().into(),
            tag: format!("SELECT {}", rows.len()),
            rows,
            notices: Vec::new(),
        })
    }
}

/// Recognises a statement the server answers itself: `None` for the engine's statements.
pub fn recognise(sql: &str) -> Option<Result<CompatQuery, ExecError>> {
    if let Some(select) = functions::recognise(sql) {
        return Some(Ok(CompatQuery { columns: select.columns(), kind: Kind::Function(select) }));
    }
    let lower = sql.to_ascii_lowercase();
    if !(lower.contains("pg_catalog") || lower.contains("information_schema") || lower.contains("pg_class")) {
        return None;
    }
    Some(match catalog::recognise(sql) {
        Some(query) => Ok(CompatQuery { columns: query.columns(), kind: Kind::Catalog(query) }),
        None => Err(ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, "numadb does not emulate this catalog query")
            .with_hint(
                "numadb answers the catalog queries of psql's \\d, \\dt, \\di, \\dv, \\dn and \\l; for the machine and \
             the placement of data, query the numadb schema (SELECT * FROM numadb.tables)",
            )),
    })
}
