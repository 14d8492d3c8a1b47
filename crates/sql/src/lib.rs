//! SQL: statements parsed (numadb's own placement statements first, the rest by sqlparser with PostgreSQL's
//! dialect), bound against the catalog with PostgreSQL's typing rules, planned and executed; sessions with
//! settings and prepared statements; the `numadb` system schema. Every error carries a SQLSTATE.
//!
//! - [`database`]: [`Database`] (catalog, schedulers, query log) and [`Session`] (the in-process API that the
//!   shell and the wire-protocol server both drive).
//! - [`parse`]: statement splitting and numadb's statements.
//! - [`bind`]: names, types, parameters; SELECT to [`numadb_execution::Plan`].
//! - [`settings`]: `SET`/`SHOW`, and the scheduler configuration they select.
//! - [`copy`]: `COPY … FROM` in CSV and text formats.
//! - [`system`]: `numadb.nodes`, `numadb.domains`, `numadb.tables`, `numadb.placement`, `numadb.scheduler`,
//!   `numadb.traffic`, `numadb.node_traffic`, `numadb.queries`.
//! - [`thesis`]: the thesis's tables.
//! - [`view`]: views, kept as queries and planned where they are read.

pub mod bind;
pub mod copy;
pub mod database;
pub mod explain;
pub mod parse;
pub mod settings;
pub mod system;
pub mod text;
pub mod thesis;
pub mod view;

pub use bind::OutputColumn;
pub use database::{Database, Prepared, Progress, QueryLogEntry, QueryOutput, Session};
pub use numadb_execution::{ExecError as SqlError, sqlstate};
pub use settings::Settings;
