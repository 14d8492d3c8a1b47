//! One session's protocol state machine after startup: the simple and extended query protocols, COPY FROM
//! STDIN, transaction status, parameter status reports. It reads decoded messages and writes encoded ones into
//! an [`Output`]; it never touches a socket except through a [`Sink`] when a large result has to go out before
//! the statement ends, so it can be driven in memory (the protocol benchmark does).
//!
//! Statement names are shared with SQL's `PREPARE`/`EXECUTE`/`DEALLOCATE`, as in PostgreSQL: a protocol `Parse`
//! of a SELECT prepares it in the numadb session under the client's name, and a `Bind` may name a statement that
//! SQL prepared. The server adds what the protocol needs beside each statement (declared parameter types, wire
//! columns, the encoded RowDescription) and keeps statements numadb cannot prepare itself: catalog queries it
//! answers itself, `COPY … FROM STDIN`, empty queries.
//!
//! numadb has no transactions; `BEGIN`, `COMMIT` and `ROLLBACK` are accepted and only drive the status clients
//! see in `ReadyForQuery`, including PostgreSQL's failed-transaction state (statements other than `ROLLBACK`
//! fail with 25P02 after an error inside `BEGIN`), because drivers such as psycopg rely on it. Statements take
//! effect at once; `ROLLBACK` undoes nothing.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use numadb_execution::{ExecError, sqlstate};
use numadb_sql::copy::CopyLoader;
use numadb_sql::{QueryOutput, Session};
use numadb_storage::{DataType, Value};
use pgwire::messages::response::TransactionStatus;
use sqlparser::ast::Statement as SqlStatement;
use sqlparser::dialect::PostgreSqlDialect;

use crate::compat::{self, CompatContext, CompatQuery};
use crate::protocol::backend::{Output, Severity, format_of};
use crate::protocol::frontend::{Frontend, Target};
use crate::protocol::types::{Column, FloatDigits, Format, PgType, decode_param, encode_value};
use crate::registry::Entry;
use crate::server::Shared;
use crate::sql_text;

/// While a result is encoded, the output is written out whenever it grows past this.
pub const OUTPUT_FLUSH_BYTES: usize = 256 << 10;
/// Portals a session may hold at once (each keeps its parameters and, once run, its rows).
const PORTALS_MAX: usize = 1000;
/// Prepared statements a session may hold at once.
const STATEMENTS_MAX: usize = 10_000;

/// Where output goes when it has to leave before the connection would wait for the client.
pub trait Sink {
    /// Writes and clears `out`.
    fn flush(&mut self, out: &mut Output) -> io::Result<()>;
}

/// What the connection does after a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Write the output now (a `Flush` message, or a `CopyInResponse` the client waits for).
    Flush,
    /// Close the connection (`Terminate`, or a fatal error already in the output).
    Close,
}

/// A result ready to send.
pub struct ResultSet {
    /// Its columns (empty for commands).
    pub columns: Arc<[Column]>,
    /// Its rows.
    pub rows: Vec<Vec<Value>>,
    /// The command tag.
    pub tag: String,
    /// The statement's notices, sent before its rows.
    pub notices: Vec<String>,
}

impl ResultSet {
    fn from_output(output: QueryOutput) -> Self {
        let columns: Arc<[Column]> =
            output.columns.iter().map(|c| Column::new(c.name.clone(), PgType::of(c.data_type))).collect();
        ResultSet { columns, rows: output.rows, tag: output.tag, notices: output.notices }
    }
}

/// What a prepared statement is.
enum StatementKind {
    /// Prepared in the numadb session under the same name.
    Engine,
    /// Answered by the catalog emulation.
    Compat(CompatQuery),
    /// `COPY … FROM STDIN`; its text.
    CopyIn(String),
    /// An empty query string.
    Empty,
    /// Transaction control inside a failed transaction, or any statement numadb should run as text each time
    /// (it cannot be prepared): its text.
    Text(String),
}

/// A prepared statement, as the protocol sees it.
struct Statement {
    /// Its name (the numadb session knows an engine statement by it).
    name: String,
    kind: StatementKind,
    /// Parameter types for decoding.
    param_types: Vec<DataType>,
    /// The types the client declared (for binary decoding), by position.
    declared: Vec<Option<PgType>>,
    /// `ParameterDescription`'s OIDs.
    described: Vec<u32>,
    /// Result columns.
    columns: Arc<[Column]>,
    /// `RowDescription` with every column in text format, encoded once.
    text_description: Vec<u8>,
    /// Executing it cannot block for long (a unique-index lookup, or a statement the server answers from the
    /// session), so an event loop may run it.
    fast: bool,
}

impl Statement {
    fn new(
        name: &str,
        kind: StatementKind,
        param_types: Vec<DataType>,
        declared: Vec<Option<PgType>>,
        columns: Arc<[Column]>,
    ) -> Self {
        let described = param_types
            .iter()
            .enumerate()
            .map(|(i, t)| match declared.get(i).copied().flatten() {
                Some(pg) if pg.declared().is_some() || pg == PgType::Numeric => pg.oid(),
                _ => PgType::of(*t).oid(),
            })
            .collect();
        let mut out = Output::new();
        if !columns.is_empty() {
            out.row_description(&columns, &[]);
        }
        Statement {
            name: name.to_string(),
            kind,
            param_types,
            declared,
            described,
            columns,
            text_description: out.bytes().to_vec(),
            fast: false,
        }
    }

    fn fast(mut self, fast: bool) -> Self {
        self.fast = fast;
        self
    }
}

/// Where a portal is in its run.
enum PortalState {
    /// Not executed yet.
    Ready,
    /// Executed; rows from `next` on are still to be sent.
    Running { result: ResultSet, next: usize },
    /// All rows sent.
    Done,
}

/// A bound statement.
struct Portal {
    statement: Arc<Statement>,
    params: Vec<Value>,
    formats: Vec<Format>,
    state: PortalState,
}

/// A COPY FROM STDIN in progress.
struct CopyIn {
    loader: CopyLoader,
    /// Statements of the simple query that follow the COPY (run after it); `None` for the extended protocol.
    rest: Option<Vec<String>>,
}

/// What the session is doing between messages.
enum Mode {
    /// Normal processing.
    Ready,
    /// After an error in the extended protocol: messages are dropped until `Sync`.
    SkipToSync,
    /// Receiving COPY data.
    CopyIn(Box<CopyIn>),
}

/// The transaction status clients see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Transaction {
    Idle,
    Block,
    Failed,
}

impl Transaction {
    fn status(self) -> TransactionStatus {
        match self {
            Transaction::Idle => TransactionStatus::Idle,
            Transaction::Block => TransactionStatus::Transaction,
            Transaction::Failed => TransactionStatus::Error,
        }
    }
}

/// Who the session belongs to.
pub struct Identity {
    /// The user.
    pub user: String,
    /// The database name asked for.
    pub database: String,
}

/// One session's protocol state.
pub struct Handler {
    shared: Arc<Shared>,
    entry: Arc<Entry>,
    identity: Identity,
    session: Session,
    statements: HashMap<String, Arc<Statement>>,
    /// Named portals.
    portals: HashMap<String, Portal>,
    /// The unnamed portal (the one drivers use), apart so that binding it allocates no key.
    unnamed_portal: Option<Portal>,
    mode: Mode,
    transaction: Transaction,
    /// The values of the reported settings as the client last heard them.
    reported: Vec<(&'static str, String)>,
    float_digits: FloatDigits,
}

fn error(sqlstate: &'static str, message: impl Into<String>) -> ExecError {
    ExecError::new(sqlstate, message)
}

fn aborted() -> ExecError {
    error("25P02", "current transaction is aborted, commands ignored until end of transaction block")
}

/// Whether a statement ends a transaction block (and is allowed in a failed one).
fn ends_transaction(words: &[String]) -> bool {
    matches!(words.first().map(String::as_str), Some("rollback" | "commit" | "end" | "abort"))
        && !words.iter().any(|w| w == "to" || w == "prepared")
}

impl Handler {
    /// A handler for a session that has just authenticated.
    pub fn new(shared: Arc<Shared>, entry: Arc<Entry>, identity: Identity, session: Session) -> Self {
        let mut handler = Handler {
            shared,
            entry,
            identity,
            session,
            statements: HashMap::new(),
            portals: HashMap::new(),
            unnamed_portal: None,
            mode: Mode::Ready,
            transaction: Transaction::Idle,
            reported: Vec::new(),
            float_digits: FloatDigits::default(),
        };
        handler.reported = handler.reported_values();
        handler.update_float_digits();
        handler
    }

    /// The numadb session.
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The status for `ReadyForQuery`.
    pub fn transaction_status(&self) -> TransactionStatus {
        self.transaction.status()
    }

    /// Writes the startup's parameter reports.
    pub fn report_all(&self, out: &mut Output) {
        for (name, value) in &self.reported {
            out.parameter_status(reported_name(name), value);
        }
    }

    fn reported_values(&self) -> Vec<(&'static str, String)> {
        numadb_sql::settings::REPORTED
            .iter()
            .map(|name| (*name, self.session.settings().get(name).unwrap_or_default()))
            .collect()
    }

    /// Reports settings that changed since the client last heard them.
    fn report_changes(&mut self, out: &mut Output) {
        let current = self.reported_values();
        for (now, before) in current.iter().zip(&self.reported) {
            if now.1 != before.1 {
                out.parameter_status(reported_name(now.0), &now.1);
            }
        }
        self.reported = current;
        self.update_float_digits();
        if let Ok(application) = self.session.settings().get("application_name") {
            *self.entry.application.lock().unwrap_or_else(|p| p.into_inner()) = application;
        }
    }

    fn update_float_digits(&mut self) {
        let digits = self.session.settings().get("extra_float_digits").ok().and_then(|v| v.trim().parse().ok());
        self.float_digits = FloatDigits(digits.unwrap_or(1));
    }

    fn context(&self) -> CompatContext<'_> {
        CompatContext {
            db: self.session.database(),
            session: &self.session,
            user: &self.identity.user,
            database: &self.identity.database,
            process_id: self.entry.process_id,
            registry: &self.shared.registry,
            oids: &self.shared.oids,
        }
    }

    /// Handles one message.
    pub fn handle(&mut self, message: Frontend<'_>, out: &mut Output, sink: &mut dyn Sink) -> io::Result<Flow> {
        if let Mode::CopyIn(_) = self.mode {
            return self.handle_copy(message, out, sink);
        }
        if matches!(self.mode, Mode::SkipToSync) && !matches!(message, Frontend::Sync | Frontend::Terminate) {
            return Ok(Flow::Continue);
        }
        match message {
            Frontend::Query(sql) => {
                self.simple_query(sql, out, sink)?;
                Ok(Flow::Continue)
            }
            Frontend::Parse { name, query, param_types } => {
                let result = self.parse(name, query, &param_types);
                self.reply(result.map(|()| out.parse_complete()), out);
                Ok(Flow::Continue)
            }
            Frontend::Bind { portal, statement, param_formats, params, result_formats } => {
                let result = self.bind(portal, statement, &param_formats, &params, &result_formats);
                self.reply(result.map(|()| out.bind_complete()), out);
                Ok(Flow::Continue)
            }
            Frontend::Describe { target, name } => {
                let result = self.describe(target, name, out);
                self.reply(result, out);
                Ok(Flow::Continue)
            }
            Frontend::Execute { portal, max_rows } => {
                let result = self.execute(portal, max_rows, out, sink)?;
                self.reply(result, out);
                Ok(if matches!(self.mode, Mode::CopyIn(_)) { Flow::Flush } else { Flow::Continue })
            }
            Frontend::Close { target, name } => {
                match target {
                    Target::Statement => {
                        self.statements.remove(name);
                        self.session.close_prepared(name);
                    }
                    Target::Portal => {
                        self.take_portal(name);
                    }
                }
                out.close_complete();
                Ok(Flow::Continue)
            }
            Frontend::Sync => {
                self.sync(out);
                Ok(Flow::Continue)
            }
            Frontend::Flush => Ok(Flow::Flush),
            Frontend::Terminate => Ok(Flow::Close),
            // Copy messages outside COPY are dropped (they may trail a COPY that failed).
            Frontend::CopyData(_) | Frontend::CopyDone | Frontend::CopyFail(_) => Ok(Flow::Continue),
            Frontend::Password(_) => {
                out.error(Severity::Fatal, &error(sqlstate::PROTOCOL_VIOLATION, "unexpected password message"));
                self.shared.registry.counters.protocol_violations.fetch_add(1, Ordering::Relaxed);
                Ok(Flow::Close)
            }
        }
    }

    /// Whether handling `message` cannot block for long, so that an event loop may do it: everything but
    /// simple queries, COPY, and executions of statements other than unique-index lookups and session
    /// functions.
    pub fn is_fast(&self, message: &Frontend<'_>) -> bool {
        match self.mode {
            Mode::Ready => {}
            Mode::SkipToSync => return true,
            Mode::CopyIn(_) => return false,
        }
        match message {
            Frontend::Query(_) | Frontend::Password(_) => false,
            Frontend::Execute { portal, .. } => match self.portal(portal) {
                Some(portal) => match portal.state {
                    PortalState::Ready => portal.statement.fast && self.transaction != Transaction::Failed,
                    PortalState::Running { .. } | PortalState::Done => true,
                },
                None => true,
            },
            _ => true,
        }
    }

    /// Whether a COPY is receiving data.
    pub fn is_copying(&self) -> bool {
        matches!(self.mode, Mode::CopyIn(_))
    }

    /// A message whose frame was intact but whose body could not be decoded: an ERROR, as PostgreSQL reports it,
    /// and the session goes on.
    pub fn malformed(&mut self, error: &ExecError, tag: u8, out: &mut Output) -> Flow {
        if self.is_copying() {
            // Ends the COPY with this error, as an unexpected message would.
            self.abort_copy(error, out);
            return Flow::Continue;
        }
        if matches!(self.mode, Mode::SkipToSync) && tag != b'S' {
            return Flow::Continue;
        }
        self.fail(error, out);
        // A malformed Query or Sync still ends its cycle: the client waits for ReadyForQuery.
        match tag {
            b'Q' => self.ready(out),
            b'S' => self.sync(out),
            _ => self.mode = Mode::SkipToSync,
        }
        Flow::Continue
    }

    /// `Sync`: the end of an extended-protocol cycle.
    fn sync(&mut self, out: &mut Output) {
        self.mode = Mode::Ready;
        self.ready(out);
    }

    /// Ends a COPY in progress with an error.
    fn abort_copy(&mut self, error: &ExecError, out: &mut Output) {
        let Mode::CopyIn(copy) = std::mem::replace(&mut self.mode, Mode::Ready) else { return };
        self.fail(error, out);
        if copy.rest.is_some() {
            self.ready(out);
        } else {
            self.mode = Mode::SkipToSync;
        }
    }

    /// Sends `ReadyForQuery`. Outside a transaction block this ends the implicit transaction of what ran since
    /// the last one (a Sync's messages, a simple query): PostgreSQL drops every portal here.
    fn ready(&mut self, out: &mut Output) {
        if self.transaction == Transaction::Idle {
            self.portals.clear();
            self.unnamed_portal = None;
        }
        out.ready_for_query(self.transaction.status());
        self.shared.registry.counters.ready_for_query.fetch_add(1, Ordering::Relaxed);
    }

    /// Reports an extended-protocol step's error and starts skipping to `Sync`.
    fn reply(&mut self, result: Result<(), ExecError>, out: &mut Output) {
        if let Err(error) = result {
            self.fail(&error, out);
            if !matches!(self.mode, Mode::CopyIn(_)) {
                self.mode = Mode::SkipToSync;
            }
        }
    }

    /// Sends an error and moves a transaction block to the failed state.
    fn fail(&mut self, error: &ExecError, out: &mut Output) {
        out.error(Severity::Error, error);
        self.shared.registry.counters.errors.fetch_add(1, Ordering::Relaxed);
        if self.transaction == Transaction::Block {
            self.transaction = Transaction::Failed;
        }
    }

    /// Refuses a setting the server cannot honour: the client encodings other than UTF-8 (numadb sends UTF-8 and
    /// converts nothing; SQL_ASCII, which means "no conversion", is accepted). The setting goes back to UTF8.
    fn check_settings(&mut self, tag: &str) -> Result<(), ExecError> {
        if tag != "SET" && tag != "RESET" {
            return Ok(());
        }
        let encoding = self.session.settings().get("client_encoding").unwrap_or_default();
        if client_encoding_supported(&encoding) {
            return Ok(());
        }
        let _ = self.session.settings_mut().set("client_encoding", "UTF8");
        Err(unsupported_encoding(&encoding))
    }

    /// Updates the transaction status after a statement succeeded with `tag`.
    fn after_statement(&mut self, tag: &str, out: &mut Output) {
        self.shared.registry.counters.statements.fetch_add(1, Ordering::Relaxed);
        match tag {
            "BEGIN" => self.transaction = Transaction::Block,
            "COMMIT" | "ROLLBACK" => {
                // The block's portals end with it, and its settings (SET LOCAL, or every SET on ROLLBACK).
                self.transaction = Transaction::Idle;
                self.portals.clear();
                self.unnamed_portal = None;
                self.report_changes(out);
            }
            "SET" | "RESET" => self.report_changes(out),
            "DISCARD ALL" => {
                self.statements.clear();
                self.portals.clear();
                self.unnamed_portal = None;
                self.report_changes(out);
            }
            "DEALLOCATE ALL" => self.statements.clear(),
            "DEALLOCATE" => {
                let session = &self.session;
                self.statements
                    .retain(|name, s| !matches!(s.kind, StatementKind::Engine) || session.prepared(name).is_ok());
            }
            _ => {}
        }
    }

    // ---- The simple query protocol ------------------------------------------------------------------------

    fn simple_query(&mut self, sql: &str, out: &mut Output, sink: &mut dyn Sink) -> io::Result<()> {
        let statements = match sql_text::split_statements(sql) {
            Ok(statements) => statements,
            Err(e) => {
                self.fail(&e, out);
                self.ready(out);
                return Ok(());
            }
        };
        if statements.is_empty() {
            out.empty_query();
            self.ready(out);
            return Ok(());
        }
        let statements: Vec<String> = statements.into_iter().map(str::to_string).collect();
        self.run_statements(statements, out, sink)
    }

    /// Runs simple-query statements in order, stopping at the first error or at a COPY (which continues with the
    /// rest when its data is in); ends with `ReadyForQuery` unless a COPY waits for data.
    fn run_statements(&mut self, statements: Vec<String>, out: &mut Output, sink: &mut dyn Sink) -> io::Result<()> {
        let mut remaining = statements.into_iter();
        while let Some(sql) = remaining.next() {
            match self.simple_statement(&sql, out, sink)? {
                Ok(Some(loader)) => {
                    out.copy_in_response(loader.width());
                    self.mode = Mode::CopyIn(Box::new(CopyIn { loader, rest: Some(remaining.collect()) }));
                    return Ok(());
                }
                Ok(None) => {}
                Err(e) => {
                    self.fail(&e, out);
                    break;
                }
            }
        }
        self.ready(out);
        Ok(())
    }

    /// One statement of a simple query: its result is written; a COPY returns its loader.
    fn simple_statement(
        &mut self,
        sql: &str,
        out: &mut Output,
        sink: &mut dyn Sink,
    ) -> io::Result<Result<Option<CopyLoader>, ExecError>> {
        let words = sql_text::words(sql, 4);
        if self.transaction == Transaction::Failed {
            if ends_transaction(&words) {
                self.session.end_block(false);
                out.command_complete("ROLLBACK".into());
                self.after_statement("ROLLBACK", out);
                return Ok(Ok(None));
            }
            return Ok(Err(aborted()));
        }
        if words.first().is_some_and(|w| w == "copy") {
            return Ok(self.copy_loader(sql).map(Some));
        }
        // Statements numadb answers without the engine (`SELECT version()`, COPY, empty ones) are prepared only
        // here: DEALLOCATE of one is done here too.
        let deallocated = match words.as_slice() {
            [deallocate, name] if deallocate == "deallocate" => Some(name),
            [deallocate, prepare, name] if deallocate == "deallocate" && prepare == "prepare" => Some(name),
            _ => None,
        };
        if let Some(name) = deallocated
            && self.statements.get(name.as_str()).is_some_and(|s| !matches!(s.kind, StatementKind::Engine))
        {
            self.statements.remove(name.as_str());
            out.command_complete("DEALLOCATE".into());
            return Ok(Ok(None));
        }
        if let Err(e) = sql_text::check_complexity(sql) {
            return Ok(Err(e));
        }
        let result = match compat::recognise(sql) {
            Some(Ok(query)) => query.run(&self.context()),
            Some(Err(e)) => Err(e),
            None => self.run_engine(|session| session.execute_one(sql)).map(ResultSet::from_output),
        };
        let result = result.and_then(|result| self.check_settings(&result.tag).map(|()| result));
        match result {
            Ok(result) => {
                send_notices(&result.notices, out);
                if !result.columns.is_empty() {
                    out.row_description(&result.columns, &[]);
                }
                let tag = result.tag.clone();
                if let Err(e) = self.send_rows(&result, 0, result.rows.len(), &[], out, sink)? {
                    return Ok(Err(e));
                }
                out.command_complete(result.tag);
                self.after_statement(&tag, out);
                Ok(Ok(None))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// Runs an engine call with the session marked busy (shutdown lets busy sessions finish). A statement that
    /// shutdown cancelled reports why, as PostgreSQL does (57P01, not the 57014 of a cancel request).
    fn run_engine<T>(&mut self, run: impl FnOnce(&mut Session) -> Result<T, ExecError>) -> Result<T, ExecError> {
        self.entry.busy.store(true, Ordering::Release);
        let result = run(&mut self.session);
        self.entry.busy.store(false, Ordering::Release);
        match result {
            Err(error) if error.sqlstate == sqlstate::QUERY_CANCELED && self.shared.is_shutting_down() => {
                Err(ExecError::new(sqlstate::ADMIN_SHUTDOWN, "terminating connection due to administrator command"))
            }
            result => result,
        }
    }

    /// Writes rows `from..to` of a result as DataRows, flushing through `sink` as the output grows.
    fn send_rows(
        &self,
        result: &ResultSet,
        from: usize,
        to: usize,
        formats: &[Format],
        out: &mut Output,
        sink: &mut dyn Sink,
    ) -> io::Result<Result<(), ExecError>> {
        let columns = &result.columns;
        for row in &result.rows[from..to] {
            if row.len() != columns.len() {
                return Ok(Err(ExecError::internal(format!(
                    "a row of {} values for {} columns",
                    row.len(),
                    columns.len()
                ))));
            }
            let start = out.begin_data_row(columns.len());
            for (i, (value, column)) in row.iter().zip(columns.iter()).enumerate() {
                if value.is_null() {
                    out.field_null();
                    continue;
                }
                let mut failed = None;
                let format = format_of(formats, i);
                let digits = self.float_digits;
                out.field_with(|buffer| {
                    if let Err(e) = encode_value(value, column.pg_type, format, digits, buffer) {
                        failed = Some(e);
                    }
                });
                if let Some(e) = failed {
                    out.truncate(start - 1);
                    return Ok(Err(e));
                }
            }
            out.end_data_row(start);
            if out.len() >= OUTPUT_FLUSH_BYTES {
                sink.flush(out)?;
            }
        }
        Ok(Ok(()))
    }

    // ---- COPY FROM STDIN ----------------------------------------------------------------------------------

    fn copy_loader(&mut self, sql: &str) -> Result<CopyLoader, ExecError> {
        let statements = sqlparser::parser::Parser::parse_sql(&PostgreSqlDialect {}, sql)
            .map_err(numadb_sql::parse::syntax_error)?;
        let [SqlStatement::Copy { source, to, target, options, legacy_options, .. }] = statements.as_slice() else {
            return Err(error(sqlstate::SYNTAX_ERROR, "expected one COPY statement"));
        };
        match target {
            sqlparser::ast::CopyTarget::Stdin if !*to => {
                let loader = numadb_sql::copy::copy_loader(&self.session, source, *to, options, legacy_options)?;
                // A cancel raised while the session was idle must not stop this COPY.
                self.entry.cancel.store(false, Ordering::SeqCst);
                Ok(loader)
            }
            _ => self
                .run_engine(|session| session.execute_one(sql))
                .and_then(|_| Err(error(sqlstate::FEATURE_NOT_SUPPORTED, "numadb serves COPY … FROM STDIN only"))),
        }
    }

    fn handle_copy(&mut self, message: Frontend<'_>, out: &mut Output, sink: &mut dyn Sink) -> io::Result<Flow> {
        let Mode::CopyIn(copy) = &mut self.mode else { return Ok(Flow::Continue) };
        let outcome: Option<Result<String, ExecError>> = match message {
            Frontend::CopyData(data) => {
                if self.entry.cancel.swap(false, Ordering::SeqCst) {
                    Some(Err(error(sqlstate::QUERY_CANCELED, "canceling statement due to user request")))
                } else {
                    copy.loader.feed(data).err().map(Err)
                }
            }
            // The protocol says to ignore these during COPY.
            Frontend::Flush | Frontend::Sync => None,
            Frontend::CopyDone => Some(Ok(String::new())),
            Frontend::CopyFail(reason) => {
                Some(Err(error(sqlstate::QUERY_CANCELED, format!("COPY from stdin failed: {reason}"))))
            }
            Frontend::Terminate => return Ok(Flow::Close),
            other => Some(Err(error(
                sqlstate::PROTOCOL_VIOLATION,
                format!("unexpected message type 0x{:02X} during COPY from stdin", other.tag()),
            ))),
        };
        let Some(outcome) = outcome else { return Ok(Flow::Continue) };
        let Mode::CopyIn(copy) = std::mem::replace(&mut self.mode, Mode::Ready) else { unreachable!() };
        let CopyIn { loader, rest } = *copy;
        let result = outcome.and_then(|_| {
            self.entry.busy.store(true, Ordering::Release);
            let loaded = loader.finish();
            self.entry.busy.store(false, Ordering::Release);
            loaded
        });
        match (result, rest) {
            (Ok(rows), Some(rest)) => {
                out.command_complete(format!("COPY {rows}"));
                self.after_statement("COPY", out);
                self.run_statements(rest, out, sink)?;
            }
            (Ok(rows), None) => {
                out.command_complete(format!("COPY {rows}"));
                self.after_statement("COPY", out);
            }
            (Err(e), Some(_)) => {
                self.fail(&e, out);
                self.ready(out);
            }
            (Err(e), None) => {
                self.fail(&e, out);
                self.mode = Mode::SkipToSync;
            }
        }
        Ok(Flow::Continue)
    }

    // ---- The extended query protocol ----------------------------------------------------------------------

    fn parse(&mut self, name: &str, sql: &str, declared_oids: &[u32]) -> Result<(), ExecError> {
        if !name.is_empty() && (self.statements.contains_key(name) || self.session.prepared(name).is_ok()) {
            return Err(error(
                sqlstate::DUPLICATE_PREPARED_STATEMENT,
                format!("prepared statement \"{name}\" already exists"),
            ));
        }
        if self.statements.len() >= STATEMENTS_MAX && !self.statements.contains_key(name) {
            return Err(error(
                sqlstate::INSUFFICIENT_RESOURCES,
                format!("too many prepared statements (at most {STATEMENTS_MAX} per session)"),
            ));
        }
        let declared: Vec<Option<PgType>> = declared_oids.iter().map(|&oid| PgType::from_oid(oid)).collect();
        let declared_types: Vec<Option<DataType>> = declared.iter().map(|t| t.and_then(PgType::declared)).collect();
        let statements = sql_text::split_statements(sql)?;
        sql_text::check_complexity(sql)?;
        let statement = match statements.as_slice() {
            [] => Statement::new(name, StatementKind::Empty, Vec::new(), declared, Arc::from([])),
            [_, _, ..] => {
                return Err(error(sqlstate::SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement"));
            }
            [text] => {
                let words = sql_text::words(text, 4);
                if self.transaction == Transaction::Failed {
                    if !ends_transaction(&words) {
                        return Err(aborted());
                    }
                    Statement::new(name, StatementKind::Text(text.to_string()), Vec::new(), declared, Arc::from([]))
                } else if words.first().is_some_and(|w| w == "copy") {
                    Statement::new(name, StatementKind::CopyIn(text.to_string()), Vec::new(), declared, Arc::from([]))
                } else if let Some(query) = compat::recognise(text) {
                    let query = query?;
                    let columns: Arc<[Column]> = query.columns().into();
                    let fast = query.is_function();
                    Statement::new(name, StatementKind::Compat(query), Vec::new(), declared, columns).fast(fast)
                } else {
                    self.session.close_prepared(name);
                    let prepared = self.session.prepare(name, text, &declared_types)?;
                    let columns: Arc<[Column]> =
                        prepared.columns.iter().map(|c| Column::new(c.name.clone(), PgType::of(c.data_type))).collect();
                    Statement::new(name, StatementKind::Engine, prepared.param_types.clone(), declared, columns)
                        .fast(prepared.is_point_lookup())
                }
            }
        };
        if !matches!(statement.kind, StatementKind::Engine) {
            self.session.close_prepared(name);
        }
        self.statements.insert(name.to_string(), Arc::new(statement));
        Ok(())
    }

    /// The statement called `name`: one the protocol parsed, or one SQL's PREPARE made.
    fn statement(&mut self, name: &str) -> Result<Arc<Statement>, ExecError> {
        let missing =
            || error(sqlstate::INVALID_SQL_STATEMENT_NAME, format!("prepared statement \"{name}\" does not exist"));
        // Engine statements leave the session only through Close, DEALLOCATE and DISCARD, which update this map.
        if let Some(statement) = self.statements.get(name) {
            return Ok(Arc::clone(statement));
        }
        let prepared = self.session.prepared(name).map_err(|_| missing())?;
        let columns: Arc<[Column]> =
            prepared.columns.iter().map(|c| Column::new(c.name.clone(), PgType::of(c.data_type))).collect();
        let statement = Arc::new(
            Statement::new(name, StatementKind::Engine, prepared.param_types.clone(), Vec::new(), columns)
                .fast(prepared.is_point_lookup()),
        );
        self.statements.insert(name.to_string(), Arc::clone(&statement));
        Ok(statement)
    }

    fn bind(
        &mut self,
        portal: &str,
        statement_name: &str,
        param_formats: &[i16],
        params: &[Option<&[u8]>],
        result_formats: &[i16],
    ) -> Result<(), ExecError> {
        let statement = self.statement(statement_name)?;
        if self.transaction == Transaction::Failed && !matches!(statement.kind, StatementKind::Text(_)) {
            return Err(aborted());
        }
        if params.len() != statement.param_types.len() {
            return Err(error(
                sqlstate::PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but prepared statement \"{statement_name}\" requires {}",
                    params.len(),
                    statement.param_types.len()
                ),
            ));
        }
        if param_formats.len() > 1 && param_formats.len() != params.len() {
            return Err(error(
                sqlstate::PROTOCOL_VIOLATION,
                format!("bind message has {} parameter formats but {} parameters", param_formats.len(), params.len()),
            ));
        }
        let formats: Vec<Format> = result_formats.iter().map(|&c| Format::from_code(c)).collect::<Result<_, _>>()?;
        if formats.len() > 1 && formats.len() != statement.columns.len() {
            return Err(error(
                sqlstate::PROTOCOL_VIOLATION,
                format!(
                    "bind message has {} result formats but query has {} columns",
                    formats.len(),
                    statement.columns.len()
                ),
            ));
        }
        let mut values = Vec::with_capacity(params.len());
        for (i, (bytes, data_type)) in params.iter().zip(&statement.param_types).enumerate() {
            let code = match param_formats {
                [] => 0,
                [one] => *one,
                many => many[i],
            };
            let declared = statement.declared.get(i).copied().flatten();
            values.push(decode_param(*bytes, Format::from_code(code)?, declared, *data_type, i)?);
        }
        if !portal.is_empty() && self.portals.contains_key(portal) {
            return Err(error("42P03", format!("cursor \"{portal}\" already exists")));
        }
        if !portal.is_empty() && self.portals.len() >= PORTALS_MAX {
            return Err(error(
                sqlstate::INSUFFICIENT_RESOURCES,
                format!("too many portals (at most {PORTALS_MAX} per session)"),
            ));
        }
        self.put_portal(portal, Portal { statement, params: values, formats, state: PortalState::Ready });
        Ok(())
    }

    fn portal(&self, name: &str) -> Option<&Portal> {
        if name.is_empty() { self.unnamed_portal.as_ref() } else { self.portals.get(name) }
    }

    fn take_portal(&mut self, name: &str) -> Option<Portal> {
        if name.is_empty() { self.unnamed_portal.take() } else { self.portals.remove(name) }
    }

    fn put_portal(&mut self, name: &str, portal: Portal) {
        if name.is_empty() {
            self.unnamed_portal = Some(portal);
        } else {
            self.portals.insert(name.to_string(), portal);
        }
    }

    fn describe(&mut self, target: Target, name: &str, out: &mut Output) -> Result<(), ExecError> {
        match target {
            Target::Statement => {
                let statement = self.statement(name)?;
                out.parameter_description(statement.described.clone());
                if statement.columns.is_empty() {
                    out.no_data();
                } else {
                    out.raw(&statement.text_description);
                }
            }
            Target::Portal => {
                let portal = self
                    .portal(name)
                    .ok_or_else(|| error(sqlstate::INVALID_CURSOR_NAME, format!("portal \"{name}\" does not exist")))?;
                let statement = &portal.statement;
                if statement.columns.is_empty() {
                    out.no_data();
                } else if portal.formats.iter().all(|f| *f == Format::Text) {
                    out.raw(&statement.text_description);
                } else {
                    out.row_description(&statement.columns, &portal.formats);
                }
            }
        }
        Ok(())
    }

    fn execute(
        &mut self,
        name: &str,
        max_rows: i32,
        out: &mut Output,
        sink: &mut dyn Sink,
    ) -> io::Result<Result<(), ExecError>> {
        let Some(mut portal) = self.take_portal(name) else {
            return Ok(Err(error(sqlstate::INVALID_CURSOR_NAME, format!("portal \"{name}\" does not exist"))));
        };
        // A finished portal of a statement without rows cannot run again (one with rows yields no more of them).
        if matches!(portal.state, PortalState::Done)
            && portal.statement.columns.is_empty()
            && !matches!(portal.statement.kind, StatementKind::Empty)
        {
            self.put_portal(name, portal);
            let message = format!("portal \"{name}\" cannot be run");
            return Ok(Err(error(sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE, message)));
        }
        let result = self.execute_portal(&mut portal, max_rows, out, sink);
        // Portals survive their execution (a suspended one resumes) until closed or the transaction ends.
        if !matches!(self.mode, Mode::CopyIn(_)) {
            self.put_portal(name, portal);
        }
        result
    }

    fn execute_portal(
        &mut self,
        portal: &mut Portal,
        max_rows: i32,
        out: &mut Output,
        sink: &mut dyn Sink,
    ) -> io::Result<Result<(), ExecError>> {
        // In a failed block nothing runs but what ends it (a suspended portal yields no more rows either).
        if self.transaction == Transaction::Failed && !matches!(portal.statement.kind, StatementKind::Text(_)) {
            return Ok(Err(aborted()));
        }
        if let PortalState::Ready = portal.state {
            let statement = Arc::clone(&portal.statement);
            let result = match &statement.kind {
                StatementKind::Engine => {
                    let (name, params) = (&portal.statement.name, &portal.params);
                    self.run_engine(|session| session.execute_prepared(name, params)).map(|output| {
                        // Rows go out under the columns described at Parse; a statement described without rows
                        // (NoData) sends none.
                        let described = statement.columns.len() == output.columns.len();
                        ResultSet {
                            columns: Arc::clone(&statement.columns),
                            rows: if described { output.rows } else { Vec::new() },
                            tag: output.tag,
                            notices: output.notices,
                        }
                    })
                }
                StatementKind::Compat(query) => query.run(&self.context()),
                StatementKind::Empty => {
                    out.empty_query();
                    portal.state = PortalState::Done;
                    return Ok(Ok(()));
                }
                StatementKind::Text(sql) => {
                    if self.transaction == Transaction::Failed {
                        self.session.end_block(false);
                        self.transaction = Transaction::Idle;
                        Ok(ResultSet {
                            columns: Arc::from([]),
                            rows: Vec::new(),
                            tag: "ROLLBACK".into(),
                            notices: Vec::new(),
                        })
                    } else {
                        self.run_engine(|session| session.execute_one(sql)).map(ResultSet::from_output)
                    }
                }
                StatementKind::CopyIn(sql) => {
                    return Ok(self.copy_loader(sql).map(|loader| {
                        out.copy_in_response(loader.width());
                        self.mode = Mode::CopyIn(Box::new(CopyIn { loader, rest: None }));
                        portal.state = PortalState::Done;
                    }));
                }
            };
            let result = result.and_then(|result| self.check_settings(&result.tag).map(|()| result));
            match result {
                Ok(result) => {
                    send_notices(&result.notices, out);
                    portal.state = PortalState::Running { result, next: 0 };
                }
                Err(e) => {
                    portal.state = PortalState::Done;
                    return Ok(Err(e));
                }
            }
        }
        match &mut portal.state {
            PortalState::Running { result, next } => {
                let total = result.rows.len();
                let end = if max_rows > 0 { total.min(*next + max_rows as usize) } else { total };
                let sent = end - *next;
                if let Err(e) = self.send_rows(result, *next, end, &portal.formats, out, sink)? {
                    portal.state = PortalState::Done;
                    return Ok(Err(e));
                }
                *next = end;
                if end < total {
                    out.portal_suspended();
                    return Ok(Ok(()));
                }
                let tag = if result.columns.is_empty() || !result.tag.starts_with("SELECT") {
                    std::mem::take(&mut result.tag)
                } else {
                    format!("SELECT {sent}")
                };
                portal.state = PortalState::Done;
                out.command_complete(tag.clone());
                self.after_statement(&tag, out);
            }
            PortalState::Done => {
                // Executing a finished portal again yields no rows.
                if !portal.statement.columns.is_empty() {
                    out.command_complete("SELECT 0".into());
                }
            }
            PortalState::Ready => unreachable!("the portal ran above"),
        }
        Ok(Ok(()))
    }
}

/// A statement's notices as `NoticeResponse`s (SQLSTATE 00000, successful completion).
fn send_notices(notices: &[String], out: &mut Output) {
    for notice in notices {
        out.notice(&ExecError::new("00000", notice.clone()));
    }
}

/// Whether numadb can talk to a client in this encoding.
pub fn client_encoding_supported(name: &str) -> bool {
    let normalised: String =
        name.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_uppercase();
    matches!(normalised.as_str(), "UTF8" | "UNICODE" | "SQLASCII")
}

/// The error for a client encoding numadb does not convert to.
pub fn unsupported_encoding(name: &str) -> ExecError {
    ExecError::new(
        sqlstate::INVALID_PARAMETER_VALUE,
        format!("invalid value for parameter \"client_encoding\": \"{name}\""),
    )
    .with_hint("numadb sends and expects UTF8 (SQL_ASCII is accepted too)")
}

/// PostgreSQL's spelling of a reported parameter's name (numadb keeps settings lower-case).
fn reported_name(name: &str) -> &str {
    match name {
        "datestyle" => "DateStyle",
        "timezone" => "TimeZone",
        "intervalstyle" => "IntervalStyle",
        other => other,
    }
}
