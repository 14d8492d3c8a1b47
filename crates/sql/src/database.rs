//! The database and its sessions: statements in, results (or SQLSTATE errors) out.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use numadb_execution::expr::cast;
use numadb_execution::plan::Plan;
use numadb_execution::{ExecError, ExecutionResult, Executor, execute, sqlstate};
use numadb_scheduler::{ByteMatrix, Scheduler, SchedulerConfig};
use numadb_storage::{
    Catalog, ColumnDef, DataType, IndexKind, IndexedRows, RowChange, StorageError, Table, TableOptions, TablePlacement,
    Value,
};
use numadb_topology::Topology;
use sqlparser::ast::{self, ObjectName, ObjectType, Statement};

use crate::bind::{Binder, BoundQuery, IndexedBy, OutputColumn, TableSource, data_type, fold, object_name};
use crate::parse::{Parsed, PlacementSpec, parse};
use crate::settings::Settings;
use crate::system;

mod alter;

/// Schedulers kept alive for reuse (one per distinct configuration sessions asked for).
const SCHEDULERS_CACHED_MAX: usize = 4;
/// Statements remembered in `numadb.queries`.
const QUERY_LOG_MAX: usize = 200;

/// One finished statement, for `numadb.queries`.
#[derive(Debug, Clone)]
pub struct QueryLogEntry {
    /// Sequence number.
    pub id: u64,
    /// The session that ran it.
    pub session: u64,
    /// Its text (shortened).
    pub statement: String,
    /// Wall time.
    pub elapsed: Duration,
    /// Tasks run per domain.
    pub tasks: Vec<u64>,
    /// Tasks stolen.
    pub stolen: u64,
    /// Bytes read, by (running domain, memory node).
    pub bytes: Option<ByteMatrix>,
    /// Bytes read from nodes local to the reading domain.
    pub local_bytes: u64,
}

/// A database: the catalog, the machine, and the schedulers statements run on.
pub struct Database {
    catalog: Catalog,
    views: crate::view::Views,
    topology: Arc<Topology>,
    schedulers: Mutex<Vec<(SchedulerConfig, Arc<Scheduler>)>>,
    query_log: Mutex<VecDeque<QueryLogEntry>>,
    next_session: AtomicU64,
    next_statement: AtomicU64,
}

/// Times a statement runs whose table ALTER TABLE keeps replacing before the statement can write to it.
const ALTERED_TRIES_MAX: usize = 100;

/// Columns of a table, at most (PostgreSQL's limit).
const TABLE_COLUMNS_MAX: usize = 1600;

/// A `BEGIN` block's settings to return to.
struct BlockSettings {
    /// As they were at `BEGIN` (for ROLLBACK).
    at_begin: Settings,
    /// As session-level `SET`s in the block left them (for COMMIT).
    session: Settings,
}

/// What an INSERT adds.
enum InsertSource {
    /// `VALUES` rows (or `DEFAULT VALUES`), every column an expression of its type.
    Rows(Vec<Vec<numadb_execution::Expr>>),
    /// `INSERT … SELECT`: the query, and the table column each of its output columns goes to.
    Query(Box<BoundQuery>, Vec<usize>),
}

/// A statement's result.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryOutput {
    /// Result columns (empty for commands).
    pub columns: Vec<OutputColumn>,
    /// Rows.
    pub rows: Vec<Vec<Value>>,
    /// The command tag (`SELECT 3`, `INSERT 0 1`, `CREATE TABLE`).
    pub tag: String,
    /// The notices the statement raised, in order (PostgreSQL's `NOTICE`, SQLSTATE 00000: `table "t" does not
    /// exist, skipping`).
    pub notices: Vec<String>,
}

impl QueryOutput {
    fn command(tag: &str) -> Self {
        QueryOutput { columns: Vec::new(), rows: Vec::new(), tag: tag.to_string(), notices: Vec::new() }
    }

    fn text(column: &str, lines: Vec<String>) -> Self {
        QueryOutput {
            columns: vec![OutputColumn { name: column.to_string(), data_type: DataType::Text }],
            tag: format!("SELECT {}", lines.len()),
            rows: lines.into_iter().map(|l| vec![Value::text(&l)]).collect(),
            notices: Vec::new(),
        }
    }

    /// Whether the statement returns rows (a query, `SHOW`, `EXPLAIN`).
    pub fn has_rows(&self) -> bool {
        !self.columns.is_empty()
    }
}

impl Database {
    /// A database on this machine.
    pub fn new() -> Result<Arc<Database>, ExecError> {
        let topology = numadb_placement::system_topology()
            .map_err(|e| ExecError::new(sqlstate::SYSTEM_ERROR, e.to_string()))?
            .clone();
        Ok(Database::with_topology(topology))
    }

    /// A database with a given topology (which must be this machine's: statements pin and place by it).
    pub fn with_topology(topology: Topology) -> Arc<Database> {
        Arc::new(Database {
            catalog: Catalog::new(),
            views: crate::view::Views::default(),
            topology: Arc::new(topology),
            schedulers: Mutex::new(Vec::new()),
            query_log: Mutex::new(VecDeque::new()),
            next_session: AtomicU64::new(1),
            next_statement: AtomicU64::new(1),
        })
    }

    /// A new session.
    pub fn session(self: &Arc<Self>) -> Session {
        Session {
            db: Arc::clone(self),
            id: self.next_session.fetch_add(1, Ordering::Relaxed),
            settings: Settings::default(),
            block: None,
            prepared: HashMap::new(),
            cancel: Arc::new(AtomicBool::new(false)),
            progress: Arc::default(),
            last_result: None,
            notices: Vec::new(),
        }
    }

    /// The catalog.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The machine.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The scheduler for a configuration, started on first use and kept for reuse.
    pub fn scheduler(&self, config: &SchedulerConfig) -> Result<Arc<Scheduler>, ExecError> {
        // The common case, a session asking again for the scheduler it used last, takes one short lock.
        let mut schedulers = self.schedulers.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(position) = schedulers.iter().position(|(c, _)| c == config) {
            let entry = schedulers.remove(position);
            let scheduler = Arc::clone(&entry.1);
            schedulers.push(entry);
            return Ok(scheduler);
        }
        let scheduler = Arc::new(
            Scheduler::new(&self.topology, config.clone())
                .map_err(|e| ExecError::new(sqlstate::INVALID_PARAMETER_VALUE, e.to_string()))?,
        );
        schedulers.push((config.clone(), Arc::clone(&scheduler)));
        // Drop the least recently used schedulers nobody holds.
        while schedulers.len() > SCHEDULERS_CACHED_MAX {
            match schedulers.iter().position(|(_, s)| Arc::strong_count(s) == 1) {
                Some(position) => {
                    schedulers.remove(position);
                }
                None => break,
            }
        }
        Ok(scheduler)
    }

    /// The schedulers started so far, with their configurations.
    pub fn schedulers(&self) -> Vec<(SchedulerConfig, Arc<Scheduler>)> {
        self.schedulers.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The last statements' counters.
    pub fn query_log(&self) -> Vec<QueryLogEntry> {
        self.query_log.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }

    fn log(&self, entry: QueryLogEntry) {
        let mut log = self.query_log.lock().unwrap_or_else(|p| p.into_inner());
        if log.len() == QUERY_LOG_MAX {
            log.pop_front();
        }
        log.push_back(entry);
    }

    /// Stops every scheduler (each finishes the task it is running): the server's graceful shutdown.
    pub fn shutdown(&self) {
        self.schedulers.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

/// What `PREPARE` (or the extended protocol's Parse) keeps.
#[derive(Clone)]
pub struct Prepared {
    /// The statement's text.
    pub sql: String,
    /// Parameter types, declared or inferred.
    pub param_types: Vec<DataType>,
    /// Result columns (empty for commands).
    pub columns: Vec<OutputColumn>,
    statement: Parsed,
    query: Option<BoundQuery>,
}

impl Prepared {
    /// Whether executing the statement is a lookup through a unique index: it runs on the calling thread, touches
    /// at most one row per key and needs no scheduler, so a server may run it without handing it to a thread
    /// that can block.
    pub fn is_point_lookup(&self) -> bool {
        fn unique_lookup(plan: &Plan) -> bool {
            match plan {
                Plan::Lookup(lookup) => {
                    lookup.range.is_none()
                        && lookup
                            .table
                            .snapshot()
                            .indexes_on(lookup.column)
                            .next()
                            .is_some_and(|index| index.is_unique())
                }
                Plan::Post { input, order_by, .. } => order_by.is_empty() && unique_lookup(input),
                _ => false,
            }
        }
        self.query.as_ref().is_some_and(|query| unique_lookup(&query.plan))
    }
}

/// How far a statement that knows its amount of work is (`COPY … FROM 'file'`: bytes of the file read), for a
/// thread other than the session's to show. Zero totals mean the statement does not know.
#[derive(Debug, Default)]
pub struct Progress {
    done: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    /// `(done, total)`, in the unit of the statement's work (bytes for `COPY`).
    pub fn get(&self) -> (u64, u64) {
        (self.done.load(Ordering::Relaxed), self.total.load(Ordering::Relaxed))
    }

    pub(crate) fn start(&self, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
    }

    pub(crate) fn advance(&self, amount: u64) {
        self.done.fetch_add(amount, Ordering::Relaxed);
    }

    fn reset(&self) {
        self.start(0);
    }
}

/// A connection's state: settings, prepared statements, and the flag that cancels its running statement.
pub struct Session {
    db: Arc<Database>,
    id: u64,
    settings: Settings,
    /// Inside `BEGIN`: the settings to return to (numadb has no transactions, but settings follow PostgreSQL's:
    /// `SET LOCAL` lasts until the block ends, and a rolled-back block's `SET`s are undone).
    block: Option<BlockSettings>,
    /// Shared so that an execution holds its statement without copying the statement's syntax tree.
    prepared: HashMap<String, Arc<Prepared>>,
    cancel: Arc<AtomicBool>,
    progress: Arc<Progress>,
    last_result: Option<ExecutionResult>,
    /// The running statement's notices, moved into its [`QueryOutput`] when it succeeds.
    notices: Vec<String>,
}

impl TableSource for Database {
    fn resolve(&self, name: &ObjectName) -> Result<Arc<Table>, ExecError> {
        let parts = object_name(name);
        let (schema, table) = match parts.as_slice() {
            [table] => (None, table.as_str()),
            [schema, table] => (Some(schema.as_str()), table.as_str()),
            [_, schema, table] => (Some(schema.as_str()), table.as_str()),
            _ => return Err(ExecError::new(sqlstate::SYNTAX_ERROR, format!("improper relation name {name}"))),
        };
        if let Some(schema) = schema
            && schema != "public"
        {
            return system::view(self, schema, table);
        }
        self.catalog.table(table).ok_or_else(|| self.missing_table(table))
    }

    fn view(&self, name: &str) -> Option<Arc<crate::view::View>> {
        self.views.get(name)
    }
}

impl Database {
    /// The error for a table that is not in the catalog: a view's rows are not stored, so they cannot be
    /// changed, copied into or indexed (PostgreSQL would change simple views' tables; numadb does not).
    fn missing_table(&self, name: &str) -> ExecError {
        if self.views.contains(name) {
            return ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, format!("\"{name}\" is a view, not a table"))
                .with_hint("numadb's views can be read; change the rows of the tables they read.");
        }
        undefined_table(name)
    }
}

fn undefined_table(name: &str) -> ExecError {
    ExecError::new(sqlstate::UNDEFINED_TABLE, format!("relation \"{name}\" does not exist"))
}

fn table_name(name: &ObjectName) -> Result<String, ExecError> {
    let parts = object_name(name);
    match parts.as_slice() {
        [table] | [_, table] => Ok(table.clone()),
        _ => Err(ExecError::new(sqlstate::SYNTAX_ERROR, format!("improper relation name {name}"))),
    }
}

/// Characters of a statement's text that logs and views keep.
const STATEMENT_TEXT_CHARS_MAX: usize = 200;

/// Shortens a statement for logs and views: whitespace runs become one space, and past
/// [`STATEMENT_TEXT_CHARS_MAX`] characters the rest becomes `…`. Every statement of a multi-statement message is
/// logged with the whole message's text, so this reads only as far as it keeps: flattening all of it first made
/// a 10 000-statement script quadratic (half the session thread's time went here at 1.4 ms a query).
fn shorten(sql: &str) -> String {
    let mut flat = String::new();
    let mut chars = 0;
    for word in sql.split_whitespace() {
        if chars > 0 {
            flat.push(' ');
            chars += 1;
        }
        flat.push_str(word);
        chars += word.chars().count();
        if chars > STATEMENT_TEXT_CHARS_MAX {
            let cut = flat.char_indices().nth(STATEMENT_TEXT_CHARS_MAX).map_or(flat.len(), |(at, _)| at);
            flat.truncate(cut);
            flat.push('…');
            return flat;
        }
    }
    flat
}

impl Session {
    /// The session's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The database.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// Settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Settings, mutably.
    pub fn settings_mut(&mut self) -> &mut Settings {
        &mut self.settings
    }

    /// The flag another thread raises to cancel the running statement.
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// How far the running statement is, for another thread to show (a shell's progress bar).
    pub fn progress(&self) -> Arc<Progress> {
        Arc::clone(&self.progress)
    }

    /// The last query's execution counters (for `numadb sql`'s timing line and tests).
    pub fn last_result(&self) -> Option<&ExecutionResult> {
        self.last_result.as_ref()
    }

    /// A statement starts: a cancel raised before now was meant for an earlier one. (Cleared here rather than
    /// when execution starts, so that a cancel arriving while the statement is parsed and planned stops it.)
    fn begin(&self) {
        self.cancel.store(false, Ordering::Relaxed);
        self.progress.reset();
    }

    /// Runs every statement of `sql` in order, stopping at the first error (PostgreSQL's simple query
    /// protocol).
    pub fn execute(&mut self, sql: &str) -> Vec<Result<QueryOutput, ExecError>> {
        self.begin();
        let statements = match parse(sql) {
            Ok(statements) => statements,
            Err(error) => return vec![Err(error)],
        };
        let mut results = Vec::with_capacity(statements.len());
        for statement in statements {
            let result = self.run_parsed(&statement, sql, &[], None);
            let failed = result.is_err();
            results.push(result);
            if failed {
                break;
            }
        }
        results
    }

    /// Runs exactly one statement.
    pub fn execute_one(&mut self, sql: &str) -> Result<QueryOutput, ExecError> {
        self.begin();
        let statements = parse(sql)?;
        match statements.as_slice() {
            [statement] => self.run_parsed(statement, sql, &[], None),
            [] => Ok(QueryOutput::command("EMPTY")),
            _ => {
                Err(ExecError::new(sqlstate::SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement"))
            }
        }
    }

    /// Parses and binds a statement for repeated execution with parameters (`$1`, `$2`, …). `declared` gives the
    /// types the client chose (`None` to infer).
    pub fn prepare(&mut self, name: &str, sql: &str, declared: &[Option<DataType>]) -> Result<Prepared, ExecError> {
        let prepared = self.prepare_unnamed(sql, declared)?;
        if !name.is_empty() && self.prepared.contains_key(name) {
            return Err(ExecError::new(
                sqlstate::DUPLICATE_PREPARED_STATEMENT,
                format!("prepared statement \"{name}\" already exists"),
            ));
        }
        self.prepared.insert(name.to_string(), Arc::new(prepared.clone()));
        Ok(prepared)
    }

    fn prepare_unnamed(&self, sql: &str, declared: &[Option<DataType>]) -> Result<Prepared, ExecError> {
        let statements = parse(sql)?;
        let statement = match statements.as_slice() {
            [statement] => statement.clone(),
            [] => return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "an empty statement cannot be prepared")),
            _ => {
                return Err(ExecError::new(
                    sqlstate::SYNTAX_ERROR,
                    "cannot insert multiple commands into a prepared statement",
                ));
            }
        };
        let strict = Binder::new(self.db.as_ref(), declared);
        let (binder, (query, columns)) = match self.bind_prepared(&statement, &strict) {
            Ok(bound) => (strict, bound),
            // PostgreSQL raises a constant's error (`1 / 0`) when it plans, at EXECUTE: the statement is kept
            // unplanned (each EXECUTE binds it again, and raises), with the columns and parameter types it has.
            Err(error) if error.sqlstate.starts_with("22") => {
                let lenient = Binder::new(self.db.as_ref(), declared).deferring_constant_errors();
                let (_, columns) = self.bind_prepared(&statement, &lenient)?;
                (lenient, (None, columns))
            }
            Err(error) => return Err(error),
        };
        Ok(Prepared { sql: sql.to_string(), param_types: binder.param_types(), columns, statement, query })
    }

    /// Binds a statement being prepared: its plan when it is a query, and its result columns.
    fn bind_prepared(
        &self,
        statement: &Parsed,
        binder: &Binder,
    ) -> Result<(Option<BoundQuery>, Vec<OutputColumn>), ExecError> {
        let mut query = None;
        let mut columns = Vec::new();
        match statement {
            Parsed::Sql(boxed) => match boxed.as_ref() {
                Statement::Query(q) => {
                    let bound = binder.plan_query(q)?;
                    columns = bound.columns.clone();
                    query = Some(bound);
                }
                Statement::Insert(insert) => {
                    // Bind once to infer parameter types from the target columns.
                    self.bind_insert(insert, binder)?;
                }
                Statement::Delete(delete) => {
                    self.bind_delete(delete, binder)?;
                }
                Statement::Update(update) => {
                    self.bind_update(update, binder)?;
                }
                Statement::Explain { statement, .. } => {
                    // Bound once to infer its parameters' types, as for the query itself.
                    if let Statement::Query(q) = statement.as_ref() {
                        binder.plan_query(q)?;
                    }
                    columns = vec![OutputColumn { name: "QUERY PLAN".into(), data_type: DataType::Text }];
                }
                Statement::ShowVariable { variable } => {
                    let name = variable.iter().map(fold).collect::<Vec<_>>().join(".");
                    columns = if name == "all" {
                        ["name", "setting", "description"]
                            .iter()
                            .map(|n| OutputColumn { name: n.to_string(), data_type: DataType::Text })
                            .collect()
                    } else {
                        vec![OutputColumn { name, data_type: DataType::Text }]
                    };
                }
                _ => {}
            },
            Parsed::AlterPlacement { .. } => {}
        }
        Ok((query, columns))
    }

    /// The prepared statement called `name` (the unnamed one is `""`).
    pub fn prepared(&self, name: &str) -> Result<&Prepared, ExecError> {
        self.prepared.get(name).map(Arc::as_ref).ok_or_else(|| {
            ExecError::new(
                sqlstate::INVALID_SQL_STATEMENT_NAME,
                format!("prepared statement \"{name}\" does not exist"),
            )
        })
    }

    /// Removes a prepared statement; `false` when there was none.
    pub fn close_prepared(&mut self, name: &str) -> bool {
        self.prepared.remove(name).is_some()
    }

    /// Runs a prepared statement with parameter values.
    pub fn execute_prepared(&mut self, name: &str, params: &[Value]) -> Result<QueryOutput, ExecError> {
        self.begin();
        let (prepared, params) = self.ready_to_run(name, params)?;
        match &prepared.query {
            Some(bound) => self.run_query(bound, &params, &prepared.sql),
            None => self.run_parsed(&prepared.statement, &prepared.sql, &params, Some(&prepared.param_types)),
        }
    }

    /// The values of `EXECUTE name(arguments)`'s arguments (constants, or the parameters `params` of the
    /// statement around it), each taken as the prepared statement's parameter type.
    fn execute_arguments(
        &self,
        name: &str,
        arguments: &[ast::Expr],
        params: &[Value],
    ) -> Result<Vec<Value>, ExecError> {
        let types = self.prepared(name)?.param_types.clone();
        let binder = Binder::new(self.db.as_ref(), &[]);
        let mut values = Vec::with_capacity(arguments.len());
        for (i, argument) in arguments.iter().enumerate() {
            let expr = binder.bind_constant(argument, types.get(i).copied())?;
            values.push(expr.eval(&[], params)?);
        }
        Ok(values)
    }

    /// Prepared statement `name` made ready to run with `params`: their number checked, each coerced to its
    /// parameter's type, and the statement planned again if a table it reads has been altered or replaced.
    fn ready_to_run(&mut self, name: &str, params: &[Value]) -> Result<(Arc<Prepared>, Vec<Value>), ExecError> {
        self.prepared(name)?;
        let mut prepared = Arc::clone(&self.prepared[name]);
        if params.len() != prepared.param_types.len() {
            return Err(ExecError::new(
                sqlstate::PROTOCOL_VIOLATION,
                format!(
                    "bind message supplies {} parameters, but prepared statement \"{name}\" requires {}",
                    params.len(),
                    prepared.param_types.len()
                ),
            ));
        }
        let params: Vec<Value> = params
            .iter()
            .zip(&prepared.param_types)
            .map(|(v, t)| numadb_execution::expr::coerce_param(v.clone(), *t))
            .collect::<Result<_, _>>()?;
        // A plan made before a table was altered, or dropped and made again, would read the old table: the query
        // is planned again (and kept), as PostgreSQL replans. Its result must have the columns the client was
        // told of when it was prepared: if they changed, PostgreSQL's error, not rows under other names or types.
        let stale = prepared.query.as_ref().is_some_and(|q| {
            !q.tables.iter().all(|t| self.db.catalog.table(t.name()).is_some_and(|current| Arc::ptr_eq(&current, t)))
        });
        if stale {
            let declared: Vec<Option<DataType>> = prepared.param_types.iter().copied().map(Some).collect();
            let again = self.prepare_unnamed(&prepared.sql, &declared)?;
            if again.columns != prepared.columns {
                return Err(ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, "cached plan must not change result type"));
            }
            prepared = Arc::new(Prepared { param_types: prepared.param_types.clone(), ..again });
            self.prepared.insert(name.to_string(), Arc::clone(&prepared));
        }
        Ok((prepared, params))
    }

    fn executor_run(&mut self, plan: &Plan, params: &[Value], sql: &str) -> Result<ExecutionResult, ExecError> {
        // Index lookups and constant rows run on this thread: they need no scheduler.
        let scheduler = if plan.scans() { Some(self.db.scheduler(self.settings.scheduler_config())?) } else { None };
        let executor = Executor {
            scheduler: scheduler.as_deref(),
            params,
            deadline: self.settings.statement_timeout().map(|timeout| std::time::Instant::now() + timeout),
            result_bytes_max: match self.settings.max_result_mb() {
                None => Some(self.db.topology.nodes.iter().map(|n| n.memory_bytes).sum::<u64>() / 4).filter(|&b| b > 0),
                Some(0) => None,
                Some(mb) => Some(mb.saturating_mul(1 << 20)),
            },
            morsel_blocks: self.settings.morsel_blocks(),
            prefetch_blocks: self.settings.prefetch_blocks(),
            join_key_filter: self.settings.join_key_filter(),
            cancel: Some(&self.cancel),
        };
        let result = execute(plan, &executor);
        if let Ok(result) = &result
            && let Some(report) = &result.report
            && let Some(scheduler) = &scheduler
        {
            let local_nodes: Vec<_> = scheduler.domains().domains.iter().map(|d| d.memory_nodes.clone()).collect();
            self.db.log(QueryLogEntry {
                id: self.db.next_statement.fetch_add(1, Ordering::Relaxed),
                session: self.id,
                statement: shorten(sql),
                elapsed: result.elapsed,
                tasks: report.tasks_run.clone(),
                stolen: report.tasks_stolen.iter().sum(),
                local_bytes: report.bytes_read.local_bytes(&local_nodes),
                bytes: Some(report.bytes_read.clone()),
            });
        }
        result
    }

    fn run_query(&mut self, bound: &BoundQuery, params: &[Value], sql: &str) -> Result<QueryOutput, ExecError> {
        let mut result = self.executor_run(&bound.plan, params, sql)?;
        // The rows move to the caller; the session keeps the counters (a large result is not held twice).
        let rows = std::mem::take(&mut result.rows);
        self.last_result = Some(result);
        Ok(QueryOutput {
            columns: bound.columns.clone(),
            tag: format!("SELECT {}", rows.len()),
            rows,
            notices: Vec::new(),
        })
    }

    fn run_parsed(
        &mut self,
        parsed: &Parsed,
        sql: &str,
        params: &[Value],
        declared: Option<&[DataType]>,
    ) -> Result<QueryOutput, ExecError> {
        let declared: Option<Vec<Option<DataType>>> = declared.map(|d| d.iter().copied().map(Some).collect());
        // A write that found its table replaced by ALTER TABLE wrote nothing (storage's `Retired`, 40001), and
        // every statement writes to one table, or makes nothing retired, before it writes: it runs again, bound
        // to the table that took the old one's place, as PostgreSQL's would have waited for the ALTER's lock and
        // then seen the altered table. (TRUNCATE and DROP INDEX, which write to several tables, retry each
        // table themselves.) Each try after the first follows another ALTER's success.
        let mut tries = 1;
        loop {
            self.notices.clear();
            let result = match parsed {
                Parsed::AlterPlacement { table, column, spec } => self.alter_placement(table, column.as_ref(), spec),
                Parsed::Sql(statement) => self.run_statement(statement, sql, params, declared.as_deref()),
            };
            match result {
                Err(error) if error.sqlstate == sqlstate::SERIALIZATION_FAILURE && tries < ALTERED_TRIES_MAX => {
                    tries += 1;
                }
                result => {
                    return result.map(|mut output| {
                        output.notices.append(&mut self.notices);
                        output
                    });
                }
            }
        }
    }

    fn run_statement(
        &mut self,
        statement: &Statement,
        sql: &str,
        params: &[Value],
        declared: Option<&[Option<DataType>]>,
    ) -> Result<QueryOutput, ExecError> {
        match statement {
            Statement::Query(query) => {
                let binder = binder_for(self.db.as_ref(), declared);
                let bound = binder.plan_query(query)?;
                self.run_query(&bound, params, sql)
            }
            Statement::Explain { analyze, statement, .. } => self.explain(statement, *analyze, params, declared, sql),
            Statement::Insert(insert) => {
                let binder = binder_for(self.db.as_ref(), declared);
                let (table, source) = self.bind_insert(insert, &binder)?;
                let mut evaluated = Vec::new();
                match source {
                    InsertSource::Rows(rows) => {
                        for row in rows {
                            evaluated.push(row.iter().map(|e| e.eval(&[], params)).collect::<Result<Vec<_>, _>>()?);
                        }
                    }
                    InsertSource::Query(query, targets) => {
                        // The query runs to its end before a row is added, so `INSERT INTO t SELECT … FROM t`
                        // reads the table as it was.
                        let output = self.run_query(&query, params, sql)?;
                        evaluated.reserve(output.rows.len());
                        // Every column in the table's order: each row is the table's as it is, cast in place.
                        let in_order = targets.len() == table.columns().len()
                            && targets.iter().enumerate().all(|(position, &column)| position == column);
                        for mut row in output.rows {
                            if in_order && row.len() == targets.len() {
                                for (value, definition) in row.iter_mut().zip(table.columns()) {
                                    *value = cast(std::mem::replace(value, Value::Null), definition.data_type)?;
                                }
                                evaluated.push(row);
                                continue;
                            }
                            let mut full: Vec<Value> = table.columns().iter().map(ColumnDef::default_value).collect();
                            for (value, &column) in row.into_iter().zip(&targets) {
                                full[column] = cast(value, table.columns()[column].data_type)?;
                            }
                            evaluated.push(full);
                        }
                    }
                }
                let inserted = table.insert(evaluated)?;
                crate::copy::seal_after_load(&table, inserted)?;
                Ok(QueryOutput::command(&format!("INSERT 0 {inserted}")))
            }
            Statement::Delete(delete) => {
                let binder = binder_for(self.db.as_ref(), declared);
                let change = self.bind_delete(delete, &binder)?;
                let subqueries = binder.take_subqueries();
                self.run_change(change, subqueries, params, sql)
            }
            Statement::Update(update) => {
                let binder = binder_for(self.db.as_ref(), declared);
                let change = self.bind_update(update, &binder)?;
                let subqueries = binder.take_subqueries();
                self.run_change(change, subqueries, params, sql)
            }
            Statement::CreateTable(create) => self.create_table(create, sql),
            Statement::CreateView(create) => self.create_view(create),
            Statement::Truncate(truncate) => {
                if truncate.partitions.is_some() || truncate.on_cluster.is_some() {
                    return Err(unsupported("this TRUNCATE form"));
                }
                // Every name is checked before any table is emptied.
                let mut tables = Vec::new();
                for target in &truncate.table_names {
                    let name = table_name(&target.name)?;
                    match self.db.catalog.table(&name) {
                        Some(table) => tables.push(table),
                        None if truncate.if_exists => {}
                        None => return Err(self.db.missing_table(&name)),
                    }
                }
                for mut table in tables {
                    // A table ALTER TABLE replaced meanwhile is emptied in its altered copy: the tables before it
                    // are empty already, and the statement cannot run again.
                    let mut tries = 1;
                    loop {
                        match table.truncate() {
                            Err(StorageError::Retired(name)) if tries < ALTERED_TRIES_MAX => {
                                table = self.db.catalog.table(&name).ok_or_else(|| undefined_table(&name))?;
                                tries += 1;
                            }
                            result => {
                                result?;
                                break;
                            }
                        }
                    }
                }
                Ok(QueryOutput::command("TRUNCATE TABLE"))
            }
            Statement::Drop { object_type, if_exists, names, cascade, .. } => {
                for name in names {
                    let name = table_name(name)?;
                    match object_type {
                        ObjectType::Table if self.db.views.contains(&name) => {
                            return Err(ExecError::new(
                                sqlstate::WRONG_OBJECT_TYPE,
                                format!("\"{name}\" is not a table"),
                            )
                            .with_hint("Use DROP VIEW to remove a view."));
                        }
                        ObjectType::View if self.db.catalog.table(&name).is_some() => {
                            return Err(ExecError::new(
                                sqlstate::WRONG_OBJECT_TYPE,
                                format!("\"{name}\" is not a view"),
                            )
                            .with_hint("Use DROP TABLE to remove a table."));
                        }
                        ObjectType::Table | ObjectType::View => {
                            let exists = match object_type {
                                ObjectType::View => self.db.views.contains(&name),
                                _ => self.db.catalog.table(&name).is_some(),
                            };
                            if !exists {
                                if *if_exists {
                                    let what = if *object_type == ObjectType::View { "view" } else { "table" };
                                    self.notices.push(format!("{what} \"{name}\" does not exist, skipping"));
                                    continue;
                                }
                                return Err(match object_type {
                                    ObjectType::View => ExecError::new(
                                        sqlstate::UNDEFINED_TABLE,
                                        format!("view \"{name}\" does not exist"),
                                    ),
                                    _ => undefined_table(&name),
                                });
                            }
                            // Views that read it go first with CASCADE; without, they forbid the drop.
                            let what = if *object_type == ObjectType::View { "view" } else { "table" };
                            let dependents = self.db.views.dependents_closure(&name);
                            if !dependents.is_empty() && !*cascade {
                                let direct = self.db.views.dependents(&name);
                                return Err(crate::view::Views::dependents_error(what, &name, &direct));
                            }
                            for dependent in dependents {
                                self.db.views.remove(&dependent);
                            }
                            if *object_type == ObjectType::View {
                                self.db.views.remove(&name);
                            } else {
                                self.db.catalog.remove(&name);
                            }
                        }
                        ObjectType::Index => {
                            // A table ALTER TABLE replaced meanwhile dropped nothing: look again.
                            let mut tries = 1;
                            let dropped = loop {
                                let mut dropped = Ok(false);
                                for table in self.db.catalog.tables() {
                                    dropped = table.drop_index(&name);
                                    if !matches!(dropped, Ok(false)) {
                                        break;
                                    }
                                }
                                match dropped {
                                    Err(StorageError::Retired(_)) if tries < ALTERED_TRIES_MAX => tries += 1,
                                    dropped => break dropped?,
                                }
                            };
                            if !dropped && *if_exists {
                                self.notices.push(format!("index \"{name}\" does not exist, skipping"));
                            } else if !dropped {
                                return Err(ExecError::new(
                                    sqlstate::UNDEFINED_OBJECT,
                                    format!("index \"{name}\" does not exist"),
                                ));
                            }
                        }
                        other => return Err(unsupported(&format!("DROP {other}"))),
                    }
                }
                Ok(QueryOutput::command(match object_type {
                    ObjectType::Index => "DROP INDEX",
                    ObjectType::View => "DROP VIEW",
                    _ => "DROP TABLE",
                }))
            }
            Statement::CreateIndex(create) => self.create_index(create),
            Statement::AlterTable(alter) => self.alter_table(alter),
            Statement::Set(set) => self.set(set),
            Statement::ShowVariable { variable } => {
                let name = variable.iter().map(fold).collect::<Vec<_>>().join(".");
                if name == "all" {
                    let rows = self.settings.all();
                    return Ok(QueryOutput {
                        columns: ["name", "setting", "description"]
                            .iter()
                            .map(|n| OutputColumn { name: n.to_string(), data_type: DataType::Text })
                            .collect(),
                        tag: format!("SHOW {}", rows.len()),
                        rows: rows
                            .into_iter()
                            .map(|(n, v, d)| vec![Value::text(&n), Value::text(&v), Value::text(&d)])
                            .collect(),
                        notices: Vec::new(),
                    });
                }
                let value = self.settings.get(&name)?;
                Ok(QueryOutput {
                    columns: vec![OutputColumn { name: name.clone(), data_type: DataType::Text }],
                    rows: vec![vec![Value::text(&value)]],
                    tag: "SHOW".into(),
                    notices: Vec::new(),
                })
            }
            Statement::Reset(reset) => {
                let text = reset.to_string();
                let name = text.trim().strip_prefix("RESET").map(str::trim).unwrap_or("");
                if name.eq_ignore_ascii_case("all") || name.is_empty() {
                    self.settings.reset(None);
                } else {
                    self.settings.reset(Some(name));
                }
                Ok(QueryOutput::command("RESET"))
            }
            Statement::StartTransaction { .. } => {
                if self.block.is_none() {
                    self.block =
                        Some(BlockSettings { at_begin: self.settings.clone(), session: self.settings.clone() });
                }
                Ok(QueryOutput::command("BEGIN"))
            }
            Statement::Commit { .. } => {
                self.end_block(true);
                Ok(QueryOutput::command("COMMIT"))
            }
            Statement::Rollback { .. } => {
                self.end_block(false);
                Ok(QueryOutput::command("ROLLBACK"))
            }
            Statement::Prepare { name, data_types, statement } => {
                let declared: Vec<Option<DataType>> =
                    data_types.iter().map(|t| data_type(t).map(Some)).collect::<Result<_, _>>()?;
                let name = fold(name);
                let inner = statement.to_string();
                self.prepare(&name, &inner, &declared)?;
                Ok(QueryOutput::command("PREPARE"))
            }
            Statement::Execute { name: Some(name), parameters, .. } => {
                let name = object_name(name).join(".");
                let values = self.execute_arguments(&name, parameters, params)?;
                self.execute_prepared(&name, &values)
            }
            Statement::Deallocate { name, .. } => {
                let name = fold(name);
                if name == "all" {
                    self.prepared.clear();
                    return Ok(QueryOutput::command("DEALLOCATE ALL"));
                } else if !self.close_prepared(&name) {
                    return Err(ExecError::new(
                        sqlstate::INVALID_SQL_STATEMENT_NAME,
                        format!("prepared statement \"{name}\" does not exist"),
                    ));
                }
                Ok(QueryOutput::command("DEALLOCATE"))
            }
            Statement::Discard { .. } => {
                self.prepared.clear();
                self.settings.reset(None);
                Ok(QueryOutput::command("DISCARD ALL"))
            }
            Statement::Copy { source, to, target, options, legacy_options, .. } => {
                crate::copy::copy_statement(self, source, *to, target, options, legacy_options)
            }
            Statement::Call(function) => self.call(function),
            other => Err(unsupported(&statement_kind(other))),
        }
    }

    /// The target table and what an INSERT adds to it.
    /// The table an UPDATE or DELETE changes, and the name its columns are qualified by.
    fn changed_table(&self, item: &ast::TableWithJoins, what: &str) -> Result<(Arc<Table>, String), ExecError> {
        let ast::TableFactor::Table {
            name,
            alias,
            args: None,
            sample: None,
            with_ordinality: false,
            version: None,
            ..
        } = &item.relation
        else {
            return Err(unsupported(&format!("{what} of anything but a table")));
        };
        if !item.joins.is_empty() {
            return Err(unsupported(&format!("{what} with joins")));
        }
        if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
            return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "syntax error at or near \"(\""));
        }
        let table_name = table_name(name)?;
        let table = self.db.catalog.table(&table_name).ok_or_else(|| self.db.missing_table(&table_name))?;
        let qualifier = alias.as_ref().map_or(table_name, |a| fold(&a.name));
        Ok((table, qualifier))
    }

    fn bind_delete(&self, delete: &ast::Delete, binder: &Binder<'_>) -> Result<Change, ExecError> {
        if delete.returning.is_some() || delete.output.is_some() {
            return Err(unsupported("DELETE … RETURNING"));
        }
        if delete.using.is_some() || !delete.tables.is_empty() {
            return Err(unsupported("DELETE … USING"));
        }
        if !delete.order_by.is_empty() || delete.limit.is_some() {
            return Err(unsupported("DELETE … ORDER BY or LIMIT"));
        }
        let (ast::FromTable::WithFromKeyword(from) | ast::FromTable::WithoutKeyword(from)) = &delete.from;
        let [item] = from.as_slice() else { return Err(unsupported("DELETE from several tables")) };
        let (table, qualifier) = self.changed_table(item, "DELETE")?;
        let filter = delete.selection.as_ref().map(|e| binder.bind_over_table(&table, &qualifier, e, "WHERE"));
        let filter = filter.transpose()?;
        let key = filter.as_ref().and_then(|f| binder.index_rows(&table, f));
        Ok(Change { table, filter, key, assignments: None })
    }

    fn bind_update(&self, update: &ast::Update, binder: &Binder<'_>) -> Result<Change, ExecError> {
        if update.returning.is_some() || update.output.is_some() {
            return Err(unsupported("UPDATE … RETURNING"));
        }
        if update.from.is_some() {
            return Err(unsupported("UPDATE … FROM"));
        }
        if update.or.is_some() || !update.order_by.is_empty() || update.limit.is_some() {
            return Err(unsupported("this UPDATE clause"));
        }
        let (table, qualifier) = self.changed_table(&update.table, "UPDATE")?;
        let mut assignments: Vec<(usize, numadb_execution::Expr)> = Vec::new();
        for assignment in &update.assignments {
            let ast::AssignmentTarget::ColumnName(name) = &assignment.target else {
                return Err(unsupported("assigning a row of columns"));
            };
            let parts = object_name(name);
            let column_name = parts.last().cloned().unwrap_or_default();
            let column = table.column_index(&column_name).filter(|_| parts.len() == 1).ok_or_else(|| {
                ExecError::new(
                    sqlstate::UNDEFINED_COLUMN,
                    format!("column \"{}\" of relation \"{}\" does not exist", parts.join("."), table.name()),
                )
            })?;
            if assignments.iter().any(|(c, _)| *c == column) {
                return Err(ExecError::new(
                    sqlstate::SYNTAX_ERROR,
                    format!("multiple assignments to same column \"{column_name}\""),
                ));
            }
            let definition = &table.columns()[column];
            let value = binder.bind_over_table(&table, &qualifier, &assignment.value, "UPDATE")?;
            let value = binder.assign_written(&assignment.value, value, &definition.name, definition.data_type)?;
            assignments.push((column, value));
        }
        let filter = update.selection.as_ref().map(|e| binder.bind_over_table(&table, &qualifier, e, "WHERE"));
        let filter = filter.transpose()?;
        let key = filter.as_ref().and_then(|f| binder.index_rows(&table, f));
        Ok(Change { table, filter, key, assignments: Some(assignments) })
    }

    /// Runs an UPDATE or DELETE: its subqueries first, then one pass over the table's rows, or over those an index
    /// finds for the key WHERE pins ([`Table::rewrite_where`]), looking at the cancel flag and the deadline as it
    /// goes.
    fn run_change(
        &mut self,
        change: Change,
        subqueries: Vec<Plan>,
        params: &[Value],
        sql: &str,
    ) -> Result<QueryOutput, ExecError> {
        let mut results: Vec<Vec<Vec<Value>>> = Vec::new();
        for subquery in subqueries {
            let plan = subquery.try_map_exprs(&mut |e| e.substitute_subqueries(&results))?;
            results.push(self.executor_run(&plan, params, sql)?.rows);
        }
        let substitute = |e: &numadb_execution::Expr| e.substitute_subqueries(&results);
        // Compiled as a scan's WHERE is, so that its conjuncts are evaluated in the same order (those that cannot
        // fail first): `DELETE … WHERE m::bigint > 15 AND i = 1000` fails only where SELECT would.
        let filter = change.filter.as_ref().map(substitute).transpose()?;
        let filter = filter.map(|f| numadb_execution::filter::compile_where(&f, params)).transpose()?;
        let assignments = match &change.assignments {
            Some(assignments) => {
                Some(assignments.iter().map(|(c, e)| Ok((*c, substitute(e)?))).collect::<Result<Vec<_>, ExecError>>()?)
            }
            None => None,
        };
        // The values the index is asked for live here, borrowed by `key`.
        let (keys, bounds);
        let key = match &change.key {
            None => None,
            Some((column, IndexedBy::Keys(exprs))) => {
                keys = exprs.iter().map(|key| substitute(key)?.eval(&[], params)).collect::<Result<Vec<_>, _>>()?;
                Some((*column, IndexedRows::Keys(&keys)))
            }
            // No bound reads a subquery ([`Binder::index_rows`]); a NULL one holds no row.
            Some((column, IndexedBy::Range(range))) => match range.values(params)? {
                None => Some((*column, IndexedRows::Keys(&[]))),
                Some(values) => {
                    bounds = values;
                    let (low, high) = (bounds.0.as_ref(), bounds.1.as_ref());
                    let snapshot = change.table.snapshot();
                    let most = snapshot.rows() / CHANGE_RANGE_SHARE;
                    let few = (snapshot.sorted_index_on(*column))
                        .and_then(|index| index.count_range(low, high, most))
                        .is_some_and(|found| found <= most);
                    few.then_some((*column, IndexedRows::Range(low, high)))
                }
            },
        };
        let deadline = self.settings.statement_timeout().map(|timeout| std::time::Instant::now() + timeout);
        let cancel = &self.cancel;
        let mut seen = 0u64;
        let changed = change.table.rewrite_where(key, |row| {
            seen += 1;
            if seen.is_multiple_of(1 << 16) {
                if cancel.load(Ordering::Relaxed) {
                    return Err(ExecError::new(sqlstate::QUERY_CANCELED, "canceling statement due to user request"));
                }
                if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                    return Err(ExecError::new(
                        sqlstate::QUERY_CANCELED,
                        "canceling statement due to statement timeout",
                    ));
                }
            }
            if let Some(filter) = &filter
                && !filter.passes_row(row, params)?
            {
                return Ok(RowChange::Keep);
            }
            let Some(assignments) = &assignments else { return Ok(RowChange::Delete) };
            let mut new_row = row.to_vec();
            for (column, value) in assignments {
                // Every value is computed from the row as it was (`SET a = b, b = a` swaps).
                new_row[*column] = value.eval(row, params)?;
            }
            Ok(RowChange::Replace(new_row))
        })?;
        let verb = if change.assignments.is_some() { "UPDATE" } else { "DELETE" };
        Ok(QueryOutput::command(&format!("{verb} {changed}")))
    }

    fn bind_insert(&self, insert: &ast::Insert, binder: &Binder<'_>) -> Result<(Arc<Table>, InsertSource), ExecError> {
        let ast::TableObject::TableName(name) = &insert.table else {
            return Err(unsupported("INSERT into a table function"));
        };
        if insert.on.is_some() {
            return Err(unsupported("INSERT … ON CONFLICT"));
        }
        if insert.returning.is_some() {
            return Err(unsupported("INSERT … RETURNING"));
        }
        let wanted = table_name(name)?;
        let table = self.db.catalog.table(&wanted).ok_or_else(|| self.db.missing_table(&wanted))?;
        let columns: Vec<usize> = if insert.columns.is_empty() {
            (0..table.columns().len()).collect()
        } else {
            insert
                .columns
                .iter()
                .map(|c| {
                    let name = object_name(c).last().cloned().unwrap_or_default();
                    table.column_index(&name).ok_or_else(|| {
                        ExecError::new(
                            sqlstate::UNDEFINED_COLUMN,
                            format!("column \"{name}\" of relation \"{}\" does not exist", table.name()),
                        )
                    })
                })
                .collect::<Result<_, _>>()?
        };
        if let Some((position, _)) = columns.iter().enumerate().find(|(i, c)| columns[..*i].contains(c)) {
            return Err(ExecError::new(
                sqlstate::DUPLICATE_COLUMN,
                format!("column \"{}\" specified more than once", table.columns()[columns[position]].name),
            ));
        }
        // Without a column list, fewer values than columns fill the first ones (the rest are NULL).
        let explicit = !insert.columns.is_empty();
        let targets = columns.len();
        let width_error = |width: usize| {
            ExecError::new(
                sqlstate::SYNTAX_ERROR,
                if width > targets {
                    "INSERT has more expressions than target columns"
                } else {
                    "INSERT has more target columns than expressions"
                },
            )
        };
        let default_of = |c: &ColumnDef| numadb_execution::Expr::literal(c.default_value(), c.data_type);
        // `DEFAULT VALUES`: one row of the columns' defaults.
        let Some(source) = &insert.source else {
            return Ok((table.clone(), InsertSource::Rows(vec![table.columns().iter().map(default_of).collect()])));
        };
        let ast::SetExpr::Values(values) = source.body.as_ref() else {
            let mut query = binder.plan_query(source)?;
            let mut columns = columns;
            if query.columns.len() > columns.len() || (explicit && query.columns.len() < columns.len()) {
                return Err(width_error(query.columns.len()));
            }
            columns.truncate(query.columns.len());
            let targets: Vec<(String, DataType)> =
                columns.iter().map(|&c| (table.columns()[c].name.clone(), table.columns()[c].data_type)).collect();
            binder.assign_types(&mut query, &targets)?;
            return Ok((table, InsertSource::Query(Box::new(query), columns)));
        };
        let mut rows = Vec::with_capacity(values.rows.len());
        for row in &values.rows {
            if row.len() > columns.len() || (explicit && row.len() < columns.len()) {
                return Err(width_error(row.len()));
            }
            let mut full: Vec<numadb_execution::Expr> = table.columns().iter().map(default_of).collect();
            for (expr, &column) in row.iter().zip(&columns) {
                let definition = &table.columns()[column];
                // `DEFAULT` in a VALUES row: the column's default, as if the column had not been named.
                if let ast::Expr::Identifier(word) = expr
                    && word.quote_style.is_none()
                    && word.value.eq_ignore_ascii_case("default")
                {
                    continue;
                }
                let bound = binder.bind_constant(expr, None)?;
                full[column] = binder.assign_written(expr, bound, &definition.name, definition.data_type)?;
            }
            rows.push(full);
        }
        Ok((table, InsertSource::Rows(rows)))
    }

    /// `CREATE [OR REPLACE] VIEW name [(columns)] AS query`: the query is planned now (so a view that cannot run
    /// is not made) and kept to be planned again wherever the view is read.
    fn create_view(&mut self, create: &ast::CreateView) -> Result<QueryOutput, ExecError> {
        if create.materialized || create.temporary || create.or_alter || create.secure || create.to.is_some() {
            return Err(unsupported("materialized, temporary or secure views"));
        }
        if create.params.is_some() || !create.cluster_by.is_empty() || create.with_no_schema_binding {
            return Err(unsupported("this CREATE VIEW option"));
        }
        if !matches!(&create.options, ast::CreateTableOptions::None) {
            return Err(unsupported("view options (WITH …)"));
        }
        let name = table_name(&create.name)?;
        if self.db.catalog.table(&name).is_some() {
            return Err(ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{name}\" already exists")));
        }
        if create.if_not_exists {
            // Not PostgreSQL's syntax (CREATE OR REPLACE is).
            return Err(ExecError::new(
                sqlstate::SYNTAX_ERROR,
                "syntax error at or near \"NOT\" (CREATE VIEW IF NOT EXISTS)",
            ));
        }
        if self.db.views.contains(&name) && !create.or_replace {
            return Err(ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{name}\" already exists")));
        }
        let query = crate::bind::resolve_window_names(&create.query)?;
        let reads = crate::view::relations_read(&query);
        let cycle = self.db.views.contains(&name) && {
            let readers = self.db.views.dependents_closure(&name);
            reads.iter().any(|r| *r == name || readers.contains(r))
        };
        if cycle {
            // Only CREATE OR REPLACE can name the view itself (the old one), directly or through views that read
            // it: PostgreSQL refuses that too.
            return Err(ExecError::new(
                sqlstate::INVALID_RECURSION,
                format!("infinite recursion detected in rules for relation \"{name}\""),
            ));
        }
        let binder = Binder::without_params(self.db.as_ref());
        let bound = binder.plan_query(&query)?;
        let mut names: Vec<String> = bound.columns.iter().map(|c| c.name.clone()).collect();
        if create.columns.len() > names.len() {
            return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "CREATE VIEW specifies more column names than columns"));
        }
        let columns: Vec<String> = create.columns.iter().map(|c| fold(&c.name)).collect();
        if create.columns.iter().any(|c| c.data_type.is_some()) {
            return Err(unsupported("column types in CREATE VIEW"));
        }
        names.iter_mut().zip(&columns).for_each(|(n, c)| *n = c.clone());
        if let Some(duplicate) = names.iter().enumerate().find(|(i, n)| names[..*i].contains(n)).map(|(_, n)| n) {
            return Err(ExecError::new(
                sqlstate::DUPLICATE_COLUMN,
                format!("column \"{duplicate}\" specified more than once"),
            ));
        }
        self.db.views.insert(name, crate::view::View { query, columns, reads });
        Ok(QueryOutput::command("CREATE VIEW"))
    }

    fn create_table(&mut self, create: &ast::CreateTable, sql: &str) -> Result<QueryOutput, ExecError> {
        let name = table_name(&create.name)?;
        if self.db.views.contains(&name) {
            return Err(ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{name}\" already exists")));
        }
        if self.db.catalog.table(&name).is_some() {
            if create.if_not_exists {
                self.notices.push(format!("relation \"{name}\" already exists, skipping"));
                return Ok(QueryOutput::command(if create.query.is_some() {
                    "CREATE TABLE AS"
                } else {
                    "CREATE TABLE"
                }));
            }
            return Err(ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{name}\" already exists")));
        }
        // CREATE TABLE … AS: the query runs first (if it fails, no table is made); its columns name and type the
        // table's, unless a list of names is given.
        let as_query = match &create.query {
            None => None,
            Some(query) => {
                let binder = Binder::without_params(self.db.as_ref());
                let mut bound = binder.plan_query(query)?;
                crate::bind::settle_untyped(&mut bound);
                if create.columns.len() > bound.columns.len() {
                    return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "too many column names were specified"));
                }
                if create
                    .columns
                    .iter()
                    .any(|c| !matches!(c.data_type, ast::DataType::Unspecified) || !c.options.is_empty())
                {
                    return Err(unsupported("column types or constraints in CREATE TABLE … AS"));
                }
                for (column, given) in bound.columns.iter_mut().zip(&create.columns) {
                    column.name = fold(&given.name);
                }
                let rows = self.run_query(&bound, &[], sql)?.rows;
                Some((bound.columns, rows))
            }
        };
        if let Some((query_columns, rows)) = as_query {
            if query_columns.is_empty() {
                return Err(unsupported("a table without columns"));
            }
            let mut columns: Vec<ColumnDef> = Vec::new();
            for column in query_columns {
                if columns.iter().any(|c| c.name == column.name) {
                    return Err(ExecError::new(
                        sqlstate::DUPLICATE_COLUMN,
                        format!("column \"{}\" specified more than once", column.name),
                    ));
                }
                if column.data_type == DataType::Numeric {
                    return Err(ExecError::new(
                        sqlstate::FEATURE_NOT_SUPPORTED,
                        format!("column \"{}\" would be a numeric, which numadb cannot store", column.name),
                    )
                    .with_hint("Cast it to bigint (exact, within 64 bits) or double precision."));
                }
                columns.push(ColumnDef::new(column.name, column.data_type, true));
            }
            let table = Table::new(&name, columns, None, table_options(create)?)?;
            let inserted = table.insert(rows)?;
            crate::copy::seal_after_load(&table, inserted)?;
            if !self.db.catalog.add(table) {
                return Err(ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{name}\" already exists")));
            }
            return Ok(QueryOutput::command(&format!("SELECT {inserted}")));
        }
        if create.columns.len() > TABLE_COLUMNS_MAX {
            return Err(ExecError::new(
                sqlstate::TOO_MANY_COLUMNS,
                format!("tables can have at most {TABLE_COLUMNS_MAX} columns"),
            ));
        }
        let mut columns = Vec::new();
        let mut primary_key = None;
        for (position, column) in create.columns.iter().enumerate() {
            let column_name = fold(&column.name);
            if columns.iter().any(|c: &ColumnDef| c.name == column_name) {
                return Err(ExecError::new(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{column_name}\" specified more than once"),
                ));
            }
            let (definition, primary) = self.column_definition(column)?;
            if primary && primary_key.replace(position).is_some() {
                return Err(multiple_primary_keys(&name));
            }
            columns.push(definition);
        }
        for constraint in &create.constraints {
            match constraint {
                ast::TableConstraint::PrimaryKey(key) => {
                    let [column] = key.columns.as_slice() else {
                        return Err(unsupported("a primary key of several columns"));
                    };
                    let key_name = match &column.column.expr {
                        ast::Expr::Identifier(ident) => fold(ident),
                        other => return Err(unsupported(&format!("a primary key on {other}"))),
                    };
                    let position = columns.iter().position(|c| c.name == key_name).ok_or_else(|| {
                        ExecError::new(
                            sqlstate::UNDEFINED_COLUMN,
                            format!("column \"{key_name}\" named in key does not exist"),
                        )
                    })?;
                    if primary_key.replace(position).is_some() {
                        return Err(multiple_primary_keys(&name));
                    }
                }
                other => return Err(unsupported(&format!("the constraint {other}"))),
            }
        }
        let mut options = table_options(create)?;
        if primary_key.is_some() {
            // `t_pkey`, unless a table renamed from `t` holds that name (PostgreSQL's ChooseRelationName).
            let taken = |index: &str| {
                self.db.catalog.tables().iter().any(|t| t.snapshot().indexes.iter().any(|i| i.name() == index))
            };
            let mut names = (0..).map(|n| if n == 0 { format!("{name}_pkey") } else { format!("{name}_pkey{n}") });
            options.primary_key_name = names.find(|index| !taken(index));
        }
        let table = Table::new(&name, columns, primary_key, options)?;
        if !self.db.catalog.add(table) {
            return Err(ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{name}\" already exists")));
        }
        Ok(QueryOutput::command("CREATE TABLE"))
    }

    /// A column of CREATE TABLE or ALTER TABLE … ADD COLUMN, and whether it is declared the primary key. The
    /// options numadb holds are NULL, NOT NULL, PRIMARY KEY and DEFAULT; others are refused.
    fn column_definition(&self, column: &ast::ColumnDef) -> Result<(ColumnDef, bool), ExecError> {
        let mut nullable = true;
        let mut primary = false;
        let mut default = None;
        for option in &column.options {
            match &option.option {
                ast::ColumnOption::NotNull => nullable = false,
                ast::ColumnOption::Null => nullable = true,
                ast::ColumnOption::PrimaryKey(_) => primary = true,
                ast::ColumnOption::Default(expr) => default = Some(expr),
                other => return Err(unsupported(&format!("the column option {other}"))),
            }
        }
        let mut definition = ColumnDef::new(fold(&column.name), data_type(&column.data_type)?, nullable);
        definition.max_chars = crate::bind::text_length(&column.data_type)?;
        definition.smallint = crate::bind::is_smallint(&column.data_type);
        if let Some(expr) = default {
            definition.default = Some(self.default_value(expr, &definition)?).filter(|v| !v.is_null());
        }
        Ok((definition, primary))
    }

    /// A column's `DEFAULT`, which numadb holds as the value it is: a constant expression (no column, subquery or
    /// volatile function: PostgreSQL would evaluate `random()` anew for every row), of the column's type and
    /// length, evaluated now. Every function numadb has but `random()` is immutable, so evaluating once gives
    /// what PostgreSQL evaluating at every insert would.
    fn default_value(&self, expr: &ast::Expr, column: &ColumnDef) -> Result<Value, ExecError> {
        let binder = Binder::without_params(self.db.as_ref());
        let bound = binder.bind_constant(expr, None).map_err(|error| match error.sqlstate {
            sqlstate::UNDEFINED_COLUMN => {
                ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, "cannot use column reference in DEFAULT expression")
            }
            _ => error,
        })?;
        if !binder.take_subqueries().is_empty() {
            return Err(ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, "cannot use subquery in DEFAULT expression"));
        }
        if bound.is_volatile() {
            return Err(unsupported("a volatile DEFAULT expression (one evaluated anew for every row)"));
        }
        let bound = binder.assign_written(expr, bound, &column.name, column.data_type)?;
        let mut value = bound.eval(&[], &[])?;
        column.fit(&mut value).map_err(numadb_storage::StorageError::Fit)?;
        Ok(value)
    }

    fn create_index(&mut self, create: &ast::CreateIndex) -> Result<QueryOutput, ExecError> {
        let table_name = table_name(&create.table_name)?;
        let table = self.db.catalog.table(&table_name).ok_or_else(|| self.db.missing_table(&table_name))?;
        let [column] = create.columns.as_slice() else { return Err(unsupported("indexes on several columns")) };
        let column_name = match &column.column.expr {
            ast::Expr::Identifier(ident) => fold(ident),
            other => return Err(unsupported(&format!("an index on {other}"))),
        };
        let position = table.column_index(&column_name).ok_or_else(|| {
            ExecError::new(sqlstate::UNDEFINED_COLUMN, format!("column \"{column_name}\" does not exist"))
        })?;
        if matches!(table.columns()[position].data_type, DataType::Double | DataType::Boolean) {
            return Err(unsupported(&format!("an index on a {} column", table.columns()[position].data_type)));
        }
        let kind = match &create.using {
            None | Some(ast::IndexType::BTree) => IndexKind::Sorted,
            Some(ast::IndexType::Hash) => IndexKind::Hash,
            Some(ast::IndexType::Custom(name)) => index_kind(&fold(name))?,
            Some(other) => return Err(unsupported(&format!("index method {other}"))),
        };
        let name = match &create.name {
            Some(name) => object_name(name).last().cloned().unwrap_or_default(),
            None => format!("{table_name}_{column_name}_idx"),
        };
        if self.db.catalog.tables().iter().any(|t| t.snapshot().indexes.iter().any(|i| i.name() == name)) {
            if create.if_not_exists {
                self.notices.push(format!("relation \"{name}\" already exists, skipping"));
                return Ok(QueryOutput::command("CREATE INDEX"));
            }
            return Err(ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{name}\" already exists")));
        }
        table.create_index(&name, position, kind, create.unique)?;
        Ok(QueryOutput::command("CREATE INDEX"))
    }

    fn alter_placement(
        &mut self,
        table: &ObjectName,
        column: Option<&ast::Ident>,
        spec: &PlacementSpec,
    ) -> Result<QueryOutput, ExecError> {
        let name = table_name(table)?;
        let table = self.db.catalog.table(&name).ok_or_else(|| self.db.missing_table(&name))?;
        let column = match column {
            Some(ident) => {
                let column_name = fold(ident);
                Some(table.column_index(&column_name).ok_or_else(|| {
                    ExecError::new(sqlstate::UNDEFINED_COLUMN, format!("column \"{column_name}\" does not exist"))
                })?)
            }
            None => None,
        };
        let placement = match spec {
            PlacementSpec::Placement(text) => parse_placement(text)?,
            PlacementSpec::NumaNodes(nodes) => {
                let ids: Vec<u32> = nodes
                    .iter()
                    .map(|n| {
                        n.trim().parse::<u32>().map_err(|_| {
                            ExecError::new(
                                sqlstate::INVALID_PARAMETER_VALUE,
                                format!("\"{n}\" is not a NUMA node number"),
                            )
                        })
                    })
                    .collect::<Result<_, _>>()?;
                match ids.as_slice() {
                    [node] => TablePlacement::Node(*node),
                    _ => TablePlacement::RoundRobin(ids.into_iter().collect()),
                }
            }
        };
        table.set_placement(placement, column)?;
        Ok(QueryOutput::command("ALTER TABLE"))
    }

    /// Ends a `BEGIN` block's settings: COMMIT keeps its session-level `SET`s and drops its `SET LOCAL`s,
    /// ROLLBACK returns to the settings at `BEGIN`. Outside a block, nothing.
    pub fn end_block(&mut self, committed: bool) {
        if let Some(block) = self.block.take() {
            self.settings = if committed { block.session } else { block.at_begin };
        }
    }

    fn set(&mut self, set: &ast::Set) -> Result<QueryOutput, ExecError> {
        match set {
            ast::Set::SingleAssignment { variable, values, scope, .. } => {
                let name = object_name(variable).join(".");
                let value = values.iter().map(option_text).collect::<Vec<_>>().join(", ");
                let local = matches!(scope, Some(ast::ContextModifier::Local));
                // SET LOCAL outside a block changes nothing (PostgreSQL warns and does the same).
                if local && self.block.is_none() {
                    return Ok(QueryOutput::command("SET"));
                }
                let mut targets = vec![&mut self.settings];
                if let Some(block) = self.block.as_mut().filter(|_| !local) {
                    targets.push(&mut block.session);
                }
                for settings in targets {
                    if value.eq_ignore_ascii_case("default") {
                        settings.reset(Some(&name));
                    } else {
                        settings.set(&name, &value)?;
                    }
                }
                Ok(QueryOutput::command("SET"))
            }
            ast::Set::SetTimeZone { value, .. } => {
                self.settings.set("timezone", &option_text(value))?;
                Ok(QueryOutput::command("SET"))
            }
            ast::Set::SetNames { charset_name, .. } => {
                self.settings.set("client_encoding", &charset_name.value)?;
                Ok(QueryOutput::command("SET"))
            }
            ast::Set::SetTransaction { .. } => Ok(QueryOutput::command("SET")),
            other => Err(unsupported(&format!("{other}"))),
        }
    }

    fn call(&mut self, function: &ast::Function) -> Result<QueryOutput, ExecError> {
        let name = object_name(&function.name).join(".");
        let binder = Binder::new(self.db.as_ref(), &[]);
        let arguments: Vec<Value> = match &function.args {
            ast::FunctionArguments::List(list) => list
                .args
                .iter()
                .map(|a| match a {
                    ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => {
                        binder.bind_constant(e, None)?.eval(&[], &[])
                    }
                    _ => Err(unsupported("this argument form")),
                })
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        match name.as_str() {
            "numadb.load_thesis" => {
                let rows = match arguments.first() {
                    Some(Value::Int(n)) if *n > 0 => *n as u64,
                    _ => {
                        return Err(ExecError::new(
                            sqlstate::INVALID_PARAMETER_VALUE,
                            "numadb.load_thesis(rows [, seed [, partition_rows]]) needs a positive row count",
                        ));
                    }
                };
                let seed = match arguments.get(1) {
                    Some(Value::Int(s)) => *s as u64,
                    _ => 42,
                };
                let partition_rows = match arguments.get(2) {
                    Some(Value::Int(p)) if *p > 0 => Some(*p as usize),
                    None => None,
                    _ => {
                        return Err(ExecError::new(
                            sqlstate::INVALID_PARAMETER_VALUE,
                            "partition_rows must be positive",
                        ));
                    }
                };
                crate::thesis::load_thesis_tables(self, rows, seed, partition_rows, None)?;
                Ok(QueryOutput::command("CALL"))
            }
            _ => Err(ExecError::new(sqlstate::UNDEFINED_FUNCTION, format!("procedure {name} does not exist"))
                .with_hint("numadb's procedure is numadb.load_thesis(rows [, seed])")),
        }
    }

    fn explain(
        &mut self,
        statement: &Statement,
        analyze: bool,
        params: &[Value],
        declared: Option<&[Option<DataType>]>,
        sql: &str,
    ) -> Result<QueryOutput, ExecError> {
        // EXPLAIN EXECUTE: the prepared query, planned for the values given.
        let (plan, params): (Plan, Vec<Value>) = match statement {
            Statement::Query(query) => {
                let binder = binder_for(self.db.as_ref(), declared);
                (binder.plan_query(query)?.plan, params.to_vec())
            }
            Statement::Execute { name: Some(name), parameters, .. } => {
                let name = object_name(name).join(".");
                let values = self.execute_arguments(&name, parameters, params)?;
                let (prepared, values) = self.ready_to_run(&name, &values)?;
                let plan = match (&prepared.query, &prepared.statement) {
                    (Some(query), _) => query.plan.clone(),
                    // Kept unplanned (a constant's error deferred from PREPARE): planned now, which raises it.
                    (None, Parsed::Sql(statement)) if let Statement::Query(query) = statement.as_ref() => {
                        let declared: Vec<Option<DataType>> = prepared.param_types.iter().copied().map(Some).collect();
                        binder_for(self.db.as_ref(), Some(&declared)).plan_query(query)?.plan
                    }
                    _ => return Err(unsupported("EXPLAIN EXECUTE of anything but a query")),
                };
                (plan, values)
            }
            _ => return Err(unsupported("EXPLAIN of anything but a query")),
        };
        // The plan that runs: a choice that waits for parameters is made for those given.
        let plan = if plan.chooses_as_it_runs() { plan.chosen(&params)? } else { plan };
        let params = params.as_slice();
        let config = self.settings.scheduler_config().clone();
        let mut lines: Vec<String> =
            plan.describe(self.settings.join_key_filter()).lines().map(str::to_string).collect();
        lines.push(format!(
            "Scheduler: stealing={} binding={} workers={} domains={}",
            config.stealing,
            config.binding,
            config.layout,
            config.granularity.name()
        ));
        if !analyze {
            return Ok(QueryOutput::text("QUERY PLAN", lines));
        }
        let scheduler = self.db.scheduler(&config)?;
        lines.push(format!("Workers: {} in {} domains", scheduler.worker_count(), scheduler.domains().len()));
        let result = self.executor_run(&plan, params, sql)?;
        lines.extend(crate::explain::analyze_lines(&result, &scheduler));
        self.last_result = Some(result);
        Ok(QueryOutput::text("QUERY PLAN", lines))
    }
}

/// A CREATE TABLE's `WITH (…)` options.
fn table_options(create: &ast::CreateTable) -> Result<TableOptions, ExecError> {
    let mut options = TableOptions::default();
    let with = match &create.table_options {
        ast::CreateTableOptions::With(options) => options.as_slice(),
        ast::CreateTableOptions::None => &[],
        _ => return Err(unsupported("these table options")),
    };
    for option in with {
        let ast::SqlOption::KeyValue { key, value } = option else {
            return Err(unsupported(&format!("the table option {option}")));
        };
        let text = option_text(value);
        match fold(key).as_str() {
            "numa_placement" => options.placement = parse_placement(&text)?,
            "partition_rows" => {
                options.partition_rows = text.parse().map_err(|_| {
                    ExecError::new(sqlstate::INVALID_PARAMETER_VALUE, format!("invalid partition_rows \"{text}\""))
                })?
            }
            "primary_key_index" => options.primary_key_index = index_kind(&text)?,
            other => {
                return Err(ExecError::new(
                    sqlstate::INVALID_PARAMETER_VALUE,
                    format!("unrecognized parameter \"{other}\""),
                )
                .with_hint("numadb's table options are numa_placement, partition_rows and primary_key_index"));
            }
        }
    }
    Ok(options)
}

/// Most rows an UPDATE or DELETE finds through a range of a sorted index, as a share of the table's
/// (`1 / CHANGE_RANGE_SHARE`); beyond, it looks at every row. Both ways decode each row they look at, one value at a
/// time, so the index's way is the cheaper one for far more rows than a query's range lookup
/// ([`numadb_execution::plan::RANGE_LOOKUP_SHARE`]), which competes with a scan of packed blocks; its cost is the
/// list of rows found, sorted into row order.
const CHANGE_RANGE_SHARE: u64 = 8;

/// An UPDATE or DELETE, bound.
struct Change {
    table: Arc<Table>,
    /// WHERE, over the table's columns.
    filter: Option<numadb_execution::Expr>,
    /// An indexed column and the keys WHERE pins it to (one, or an IN list's), or the range it bounds it to: only
    /// the rows the index finds can change.
    key: Option<(usize, IndexedBy)>,
    /// UPDATE's SET (column, value over the row as it was); `None` for DELETE.
    assignments: Option<Vec<(usize, numadb_execution::Expr)>>,
}

/// A binder for prepared statements (parameters allowed, with declared types) or plain ones (none allowed).
fn binder_for<'a>(db: &'a Database, declared: Option<&[Option<DataType>]>) -> Binder<'a> {
    match declared {
        Some(declared) => Binder::new(db, declared),
        None => Binder::without_params(db),
    }
}

fn statement_kind(statement: &Statement) -> String {
    let text = statement.to_string();
    let words: Vec<&str> = text.split_whitespace().take(2).collect();
    words.join(" ")
}

fn unsupported(what: &str) -> ExecError {
    ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, format!("{what} is not supported"))
}

fn multiple_primary_keys(table: &str) -> ExecError {
    ExecError::new(
        sqlstate::INVALID_TABLE_DEFINITION,
        format!("multiple primary keys for table \"{table}\" are not allowed"),
    )
}

/// The text of an option value (`'x'`, `x`, `8`).
fn option_text(value: &ast::Expr) -> String {
    match value {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            ast::Value::Number(n, _) => n.clone(),
            ast::Value::Boolean(b) => b.to_string(),
            other => other.to_string(),
        },
        ast::Expr::Identifier(ident) => ident.value.clone(),
        other => other.to_string(),
    }
}

fn parse_placement(text: &str) -> Result<TablePlacement, ExecError> {
    text.parse::<TablePlacement>().map_err(|e| ExecError::new(sqlstate::INVALID_PARAMETER_VALUE, e))
}

fn index_kind(text: &str) -> Result<IndexKind, ExecError> {
    match text.trim().to_ascii_lowercase().as_str() {
        "sorted" | "btree" => Ok(IndexKind::Sorted),
        "hash" => Ok(IndexKind::Hash),
        other => Err(ExecError::new(sqlstate::UNDEFINED_OBJECT, format!("access method \"{other}\" does not exist"))
            .with_hint("numadb's index methods are sorted and hash")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition: all of the text flattened, then cut.
    fn flattened_then_cut(sql: &str) -> String {
        let flat = sql.split_whitespace().collect::<Vec<_>>().join(" ");
        if flat.chars().count() > STATEMENT_TEXT_CHARS_MAX {
            format!("{}…", flat.chars().take(STATEMENT_TEXT_CHARS_MAX).collect::<String>())
        } else {
            flat
        }
    }

    #[test]
    fn statement_texts_are_flattened_and_cut_as_if_all_were_read() {
        let script = "SELECT count(*)\n  FROM \"TBL_0\"\tWHERE \"C1\" < 10;\n".repeat(10_000);
        let word = "x".repeat(250);
        let cases = [
            "",
            "   ",
            "SELECT  1,\n\t2",
            script.as_str(),
            word.as_str(),
            &"é".repeat(300),
            &"ab ".repeat(67),                 // 200 characters once flattened: kept whole
            &"ab ".repeat(68),                 // 203: cut
            &format!("{} é", "a".repeat(199)), // the 200th character is the space before a multi-byte one
        ];
        for case in cases {
            assert_eq!(shorten(case), flattened_then_cut(case), "{:?}", &case[..case.len().min(40)]);
        }
        assert_eq!(shorten(&script).chars().count(), STATEMENT_TEXT_CHARS_MAX + 1);
    }
}
