//! Errors with PostgreSQL SQLSTATE codes, so that every layer up to the wire protocol reports what PostgreSQL
//! would.

use numadb_storage::{FitError, StorageError};

/// SQLSTATE codes used by numadb (PostgreSQL's, appendix A of its manual).
pub mod sqlstate {
    /// `42601`
    pub const SYNTAX_ERROR: &str = "42601";
    /// `42P01`
    pub const UNDEFINED_TABLE: &str = "42P01";
    /// `42703`
    pub const UNDEFINED_COLUMN: &str = "42703";
    /// `42P07`
    pub const DUPLICATE_TABLE: &str = "42P07";
    /// `42701`
    pub const DUPLICATE_COLUMN: &str = "42701";
    /// `42710`
    pub const DUPLICATE_OBJECT: &str = "42710";
    /// `42712`
    pub const DUPLICATE_ALIAS: &str = "42712";
    /// `42704`
    pub const UNDEFINED_OBJECT: &str = "42704";
    /// `42804`
    pub const DATATYPE_MISMATCH: &str = "42804";
    /// `42846`
    pub const CANNOT_COERCE: &str = "42846";
    /// `42883`
    pub const UNDEFINED_FUNCTION: &str = "42883";
    /// A name used as the wrong kind of object (DISTINCT on a function that is not an aggregate).
    pub const WRONG_OBJECT_TYPE: &str = "42809";
    /// `42803`
    pub const GROUPING_ERROR: &str = "42803";
    /// A window function where none is allowed (WHERE, GROUP BY, HAVING, inside another window function).
    pub const WINDOWING_ERROR: &str = "42P20";
    /// `2BP01`: dropping a table or view that views read, without CASCADE.
    pub const DEPENDENT_OBJECTS_STILL_EXIST: &str = "2BP01";
    /// `42P16`: a second primary key added to a table.
    pub const INVALID_TABLE_DEFINITION: &str = "42P16";
    /// `42P19`: a `WITH RECURSIVE` query not of the form non-recursive term `UNION [ALL]` recursive term.
    pub const INVALID_RECURSION: &str = "42P19";
    /// `42P02`
    pub const UNDEFINED_PARAMETER: &str = "42P02";
    /// `42P18`
    pub const INDETERMINATE_DATATYPE: &str = "42P18";
    /// `42702`
    pub const AMBIGUOUS_COLUMN: &str = "42702";
    /// `53200`
    pub const OUT_OF_MEMORY: &str = "53200";
    /// `55000`
    pub const OBJECT_NOT_IN_PREREQUISITE_STATE: &str = "55000";
    /// `54011`
    pub const TOO_MANY_COLUMNS: &str = "54011";
    /// `54001`: more grouping sets than PostgreSQL allows (4096).
    pub const STATEMENT_TOO_COMPLEX: &str = "54001";
    /// `54023`: GROUPING with 32 arguments or more.
    pub const TOO_MANY_ARGUMENTS: &str = "54023";
    /// `42P10`
    pub const INVALID_COLUMN_REFERENCE: &str = "42P10";
    /// `22003`
    pub const NUMERIC_VALUE_OUT_OF_RANGE: &str = "22003";
    /// `22012`
    pub const DIVISION_BY_ZERO: &str = "22012";
    /// `2201E`: `ln`, `log` of zero or of a negative number.
    pub const INVALID_ARGUMENT_FOR_LOGARITHM: &str = "2201E";
    /// `2201F`: `power` with no real result, `sqrt` of a negative number.
    pub const INVALID_ARGUMENT_FOR_POWER_FUNCTION: &str = "2201F";
    /// `2201B`: a pattern that is not a regular expression numadb can compile.
    pub const INVALID_REGULAR_EXPRESSION: &str = "2201B";
    /// `22011`: `substring` with a negative length.
    pub const SUBSTRING_ERROR: &str = "22011";
    /// `54000`: a result larger than a value may be (`repeat`, `lpad` asked for more than 1 GiB).
    pub const PROGRAM_LIMIT_EXCEEDED: &str = "54000";
    /// `2201G`
    pub const INVALID_ARGUMENT_FOR_WIDTH_BUCKET: &str = "2201G";
    /// A scalar subquery returned more than one row.
    pub const CARDINALITY_VIOLATION: &str = "21000";
    /// `22P02`
    pub const INVALID_TEXT_REPRESENTATION: &str = "22P02";
    /// `22023`
    pub const INVALID_PARAMETER_VALUE: &str = "22023";
    /// `22001`
    pub const STRING_DATA_RIGHT_TRUNCATION: &str = "22001";
    /// `22025`
    pub const INVALID_ESCAPE_SEQUENCE: &str = "22025";
    /// `2201W`
    pub const INVALID_ROW_COUNT_IN_LIMIT: &str = "2201W";
    /// `22P04`
    pub const BAD_COPY_FILE_FORMAT: &str = "22P04";
    /// `23505`
    pub const UNIQUE_VIOLATION: &str = "23505";
    /// `23502`
    pub const NOT_NULL_VIOLATION: &str = "23502";
    /// `40001`: a write to a table that ALTER TABLE replaced while the statement ran (numadb runs the statement
    /// again against the altered table where nothing else was done; a COPY gets this error).
    pub const SERIALIZATION_FAILURE: &str = "40001";
    /// `57014`
    pub const QUERY_CANCELED: &str = "57014";
    /// `57P01`
    pub const ADMIN_SHUTDOWN: &str = "57P01";
    /// `0A000`
    pub const FEATURE_NOT_SUPPORTED: &str = "0A000";
    /// `42501`
    pub const INSUFFICIENT_PRIVILEGE: &str = "42501";
    /// `53000`
    pub const INSUFFICIENT_RESOURCES: &str = "53000";
    /// `53300`
    pub const TOO_MANY_CONNECTIONS: &str = "53300";
    /// `58000`
    pub const SYSTEM_ERROR: &str = "58000";
    /// `XX000`
    pub const INTERNAL_ERROR: &str = "XX000";
    /// `42P05`
    pub const DUPLICATE_PREPARED_STATEMENT: &str = "42P05";
    /// `26000`
    pub const INVALID_SQL_STATEMENT_NAME: &str = "26000";
    /// `34000`
    pub const INVALID_CURSOR_NAME: &str = "34000";
    /// `08P01`
    pub const PROTOCOL_VIOLATION: &str = "08P01";
    /// `28P01`
    pub const INVALID_PASSWORD: &str = "28P01";
}

/// An error with a SQLSTATE.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExecError {
    /// Five-character SQLSTATE.
    pub sqlstate: &'static str,
    /// The primary message.
    pub message: String,
    /// Optional detail.
    pub detail: Option<String>,
    /// Optional hint.
    pub hint: Option<String>,
}

impl ExecError {
    /// An error.
    pub fn new(sqlstate: &'static str, message: impl Into<String>) -> Self {
        ExecError { sqlstate, message: message.into(), detail: None, hint: None }
    }

    /// Adds a detail line.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Adds a hint.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// An internal error (a bug).
    pub fn internal(message: impl Into<String>) -> Self {
        ExecError::new(sqlstate::INTERNAL_ERROR, message)
    }
}

impl From<StorageError> for ExecError {
    fn from(error: StorageError) -> Self {
        let sqlstate = match &error {
            StorageError::Duplicate(_) => sqlstate::UNIQUE_VIOLATION,
            StorageError::NotNull { .. } | StorageError::ContainsNulls { .. } => sqlstate::NOT_NULL_VIOLATION,
            StorageError::Retired(_) => sqlstate::SERIALIZATION_FAILURE,
            StorageError::Fit(FitError::TooLong(_)) => sqlstate::STRING_DATA_RIGHT_TRUNCATION,
            StorageError::Fit(FitError::OutOfRange(_)) => sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            StorageError::Invalid(_) => sqlstate::INVALID_PARAMETER_VALUE,
            StorageError::Placement(numadb_placement::PlacementError::NodeNotUsable(_)) => {
                sqlstate::INVALID_PARAMETER_VALUE
            }
            StorageError::Placement(_) => sqlstate::SYSTEM_ERROR,
        };
        ExecError::new(sqlstate, error.to_string())
    }
}

impl From<numadb_scheduler::QueryError> for ExecError {
    fn from(error: numadb_scheduler::QueryError) -> Self {
        match error {
            numadb_scheduler::QueryError::Cancelled => {
                ExecError::new(sqlstate::QUERY_CANCELED, "canceling statement due to user request")
            }
            numadb_scheduler::QueryError::Shutdown => {
                ExecError::new(sqlstate::ADMIN_SHUTDOWN, "terminating statement: the server is shutting down")
            }
            numadb_scheduler::QueryError::Panic(message) => {
                ExecError::internal(format!("internal error in a query task: {message}"))
            }
            numadb_scheduler::QueryError::Task(message) => ExecError::internal(message),
        }
    }
}
