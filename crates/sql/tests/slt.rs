//! The sqllogictest suite: every file under `tests/slt/` runs against a fresh in-process database.
//!
//! Errors are reported as `SQLSTATE: message`, so a test can expect a code (`statement error 42P01`) or a message.
//! Result values use PostgreSQL's text output; NULL is `NULL` and the empty string `(empty)`.

use std::path::Path;
use std::sync::Arc;

use numadb_sql::{Database, Session, SqlError};
use numadb_storage::Value;
use sqllogictest::{DBOutput, DefaultColumnType};

#[derive(Debug)]
struct Error(SqlError);

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.0.sqlstate, self.0.message)
    }
}

impl std::error::Error for Error {}

struct Connection {
    session: Session,
}

impl sqllogictest::DB for Connection {
    type Error = Error;
    type ColumnType = DefaultColumnType;

    fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, Error> {
        let mut results = self.session.execute(sql);
        let last = results.pop().ok_or_else(|| Error(SqlError::internal("no statement")))?;
        for earlier in results {
            earlier.map_err(Error)?;
        }
        let output = last.map_err(Error)?;
        if !output.has_rows() {
            let count = output.tag.rsplit(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
            return Ok(DBOutput::StatementComplete(count));
        }
        let types = output
            .columns
            .iter()
            .map(|c| match c.data_type {
                numadb_storage::DataType::Integer
                | numadb_storage::DataType::BigInt
                | numadb_storage::DataType::Numeric => DefaultColumnType::Integer,
                numadb_storage::DataType::Double => DefaultColumnType::FloatingPoint,
                numadb_storage::DataType::Text => DefaultColumnType::Text,
                numadb_storage::DataType::Boolean => DefaultColumnType::Any,
            })
            .collect();
        let rows = output
            .rows
            .iter()
            .map(|row| {
                row.iter()
                    .map(|v| match v {
                        Value::Null => "NULL".to_string(),
                        Value::Text(t) if t.is_empty() => "(empty)".to_string(),
                        other => other.to_pg_text().unwrap_or_default(),
                    })
                    .collect()
            })
            .collect();
        Ok(DBOutput::Rows { types, rows })
    }

    fn engine_name(&self) -> &str {
        "numadb"
    }
}

#[test]
fn sqllogictest_suite() {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<_> = std::fs::read_dir(&directory)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(files.len() >= 8, "the suite is missing files: {files:?}");
    let mut failures = Vec::new();
    for file in &files {
        let database = Database::new().unwrap();
        let shared = Arc::clone(&database);
        let mut runner = sqllogictest::Runner::new(move || {
            let database = Arc::clone(&shared);
            async move { Ok(Connection { session: database.session() }) }
        });
        if let Err(error) = runner.run_file(file) {
            failures.push(format!("{}:\n{}", file.display(), error.display(false)));
        }
    }
    assert!(failures.is_empty(), "{} of {} files failed:\n\n{}", failures.len(), files.len(), failures.join("\n\n"));
}
