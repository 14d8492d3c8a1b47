//! `numadb sql`: an embedded SQL shell over the in-process engine.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use numadb_sql::{Database, Progress, QueryOutput, Session, SqlError};
use numadb_storage::{DataType, Value};

/// Run SQL against an in-process numadb: an interactive shell, or the statements given with
/// -c / -f.
///
/// The shell keeps a history (~/.numadb_history), reads statements over several lines until
/// a `;`, and knows a few psql commands: \dt lists tables, \d NAME describes one, \timing
/// toggles timing, \q quits. A statement that runs over a second shows a progress bar.
///
/// numadb's own statements and settings work here as over the wire:
///   ALTER TABLE "TBL_0" NUMA NODE ('1');     -- move a table (HANA's syntax)
///   ALTER TABLE t SET (numa_placement = 'interleave(0-3)');
///   SET numadb.stealing = 'off';             -- also numadb.binding, numadb.workers
///   EXPLAIN ANALYZE SELECT ...;              -- tasks per domain, bytes per node
///   SELECT * FROM numadb.placement;          -- where every partition's pages are
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct SqlArgs {
    /// Run this statement (or several separated by ;, sent as one message: a syntax error in any of them
    /// runs none, as with psql -c) and exit; may be repeated.
    #[arg(short = 'c', long = "command", value_name = "SQL")]
    commands: Vec<String>,
    /// Run the statements in this file one at a time (each result, and its time with --timing, printed as
    /// it ends) and exit at the end or at the first error.
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Start by creating the thesis tables TBL_0 and TBL_1 with N rows each (C0 = 1..N, C1..C6 uniform in 1..N).
    #[arg(long, value_name = "N")]
    load_thesis: Option<u64>,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Print results as JSON: one document for the whole run, an array with an object per statement: its
    /// `command` tag, and for a query its `columns` (name and type) and `rows` (arrays in column order), or, for a
    /// statement that failed, its `error` (`sqlstate`, `message`, `detail`, `hint`).
    #[arg(long)]
    json: bool,
    /// Print how long each statement (each -c message) took.
    #[arg(long)]
    timing: bool,
    /// Stop at the first error (the default when not interactive).
    #[arg(long)]
    stop_on_error: bool,
}

pub fn run(args: SqlArgs) -> anyhow::Result<()> {
    // Statements run on a thread with the stack the engine's recursion may need for the deepest statement it
    // accepts, as on the server's connection threads; the main thread's 8 MiB is not enough.
    std::thread::Builder::new()
        .name("numadb-sql".into())
        .stack_size(numadb_sql::text::STATEMENT_STACK_BYTES)
        .spawn(move || run_shell(args))
        .context("starting the shell's thread")?
        .join()
        .unwrap_or_else(|_| Err(anyhow::anyhow!("the shell's thread panicked")))
}

fn run_shell(args: SqlArgs) -> anyhow::Result<()> {
    let database = Database::new().map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut session = database.session();
    if let Some(rows) = args.load_thesis {
        load_thesis(&mut session, rows, args.seed)?;
    }
    let mut shell = Shell { timing: args.timing, json: args.json.then(Vec::new) };
    if !args.commands.is_empty() || !args.files.is_empty() {
        let mut failed = false;
        for command in &args.commands {
            failed |= !shell.run(&mut session, command, Statements::OneMessage);
            if failed {
                break;
            }
        }
        for file in &args.files {
            if failed {
                break;
            }
            let text = std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
            failed |= !shell.run(&mut session, &text, Statements::OneByOne);
        }
        shell.print_json();
        if failed {
            std::process::exit(1);
        }
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)?;
        let ok = shell.run(&mut session, &text, Statements::OneByOne);
        shell.print_json();
        if !ok {
            std::process::exit(1);
        }
        return Ok(());
    }
    shell.interactive(&mut session)
}

pub(crate) fn load_thesis(session: &mut Session, rows: u64, seed: u64) -> anyhow::Result<()> {
    let progress = Arc::new(AtomicU64::new(0));
    let bar = indicatif::ProgressBar::new(rows * 2);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "loading TBL_0, TBL_1 {bar:40} {pos}/{len} rows ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let started = Instant::now();
    let result = std::thread::scope(|scope| {
        let worker_progress = Arc::clone(&progress);
        let handle = scope
            .spawn(move || numadb_sql::thesis::load_thesis_tables(session, rows, seed, None, Some(&worker_progress)));
        while !handle.is_finished() {
            bar.set_position(progress.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(100));
        }
        handle.join().unwrap_or_else(|_| Err(SqlError::internal("the loader panicked")))
    });
    bar.finish_and_clear();
    result.map_err(|e| anyhow::anyhow!("loading the thesis tables: {e}"))?;
    eprintln!("loaded TBL_0 and TBL_1 ({rows} rows each) in {:.1} s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Runs `work` (a statement) and, when it takes longer than a second and stderr is a terminal, shows how far it
/// is: a bar when the statement knows its amount of work (`COPY … FROM 'file'`), else the time it has run.
fn with_progress_bar<T>(progress: &Progress, work: impl FnOnce() -> T) -> T {
    if !std::io::stderr().is_terminal() {
        return work();
    }
    let (finished, wait) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            // The sender is dropped when the statement ends, which wakes this thread at once.
            if wait.recv_timeout(Duration::from_secs(1)) != Err(RecvTimeoutError::Timeout) {
                return;
            }
            let bar = indicatif::ProgressBar::new(0).with_elapsed(Duration::from_secs(1));
            let mut known = false;
            loop {
                let (done, total) = progress.get();
                if total > 0 && !known {
                    known = true;
                    bar.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                } else if !known {
                    bar.set_style(
                        indicatif::ProgressStyle::with_template("{spinner} running for {elapsed}")
                            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
                    );
                }
                bar.set_length(total);
                bar.set_position(done);
                bar.tick();
                if wait.recv_timeout(Duration::from_millis(100)) != Err(RecvTimeoutError::Timeout) {
                    break;
                }
            }
            bar.finish_and_clear();
        });
        let result = work();
        drop(finished);
        result
    })
}

/// How the statements of a piece of text run.
#[derive(Debug, Clone, Copy)]
enum Statements {
    /// As one message (psql's `-c`, the simple query protocol): all are parsed first, so a syntax error
    /// anywhere runs none of them; their results and time are printed together.
    OneMessage,
    /// One at a time (psql's `-f` and its prompt): each result, and with timing on its time, is printed when its
    /// statement ends, and an error leaves the statements before it done.
    OneByOne,
}

struct Shell {
    timing: bool,
    /// With `--json`: the results so far, printed as one document by [`Shell::print_json`].
    json: Option<Vec<serde_json::Value>>,
}

impl Shell {
    /// Runs a script: statements, and psql's backslash commands on lines of their own, in order; prints their
    /// results; returns false after an error (the rest is not run).
    fn run(&mut self, session: &mut Session, script: &str, statements_run: Statements) -> bool {
        let mut statements = String::new();
        for line in script.split_inclusive('\n') {
            let Some(meta) = line.trim_start().strip_prefix('\\') else {
                statements.push_str(line);
                continue;
            };
            if !statements.trim().is_empty() && !self.run_statements(session, &statements, statements_run) {
                return false;
            }
            statements.clear();
            if !self.meta_command(session, meta.trim()) {
                return false;
            }
        }
        statements.trim().is_empty() || self.run_statements(session, &statements, statements_run)
    }

    /// Runs statements and prints their results; returns false after an error, and what follows it is not run.
    fn run_statements(&mut self, session: &mut Session, sql: &str, statements_run: Statements) -> bool {
        if let Statements::OneByOne = statements_run
            && let Ok(statements) = numadb_sql::parse::split_statements(sql)
        {
            return statements
                .into_iter()
                .all(|statement| self.run_message(session, statement.text, |error| statement.locate(error)));
        }
        // One message, or text the lexer rejects (the session then reports the syntax error).
        self.run_message(session, sql, |error| error)
    }

    /// Runs the statements of `sql` as one message and prints their results, errors after `locate` (which
    /// puts a syntax error's position in the script's terms); returns false after an error.
    fn run_message(&mut self, session: &mut Session, sql: &str, locate: impl Fn(SqlError) -> SqlError) -> bool {
        let started = Instant::now();
        let progress = session.progress();
        let results = with_progress_bar(&progress, || session.execute(sql));
        let elapsed = started.elapsed();
        let mut ok = true;
        for result in results {
            match (result, &mut self.json) {
                (Ok(output), Some(json)) => json.push(output_json(&output)),
                (Ok(output), None) => {
                    for notice in &output.notices {
                        eprintln!("NOTICE:  {notice}");
                    }
                    out!("{}", render(&output))
                }
                (Err(error), json) => {
                    ok = false;
                    let error = locate(error);
                    eprint!("{}", render_error(&error));
                    if let Some(json) = json {
                        json.push(error_json(&error));
                    }
                }
            }
        }
        if self.timing {
            eprintln!("Time: {:.3} ms", elapsed.as_secs_f64() * 1e3);
        }
        let _ = std::io::stdout().flush();
        ok
    }

    /// Prints the JSON document of the results so far (with `--json`) and starts a new one.
    fn print_json(&mut self) {
        if let Some(json) = &mut self.json {
            let document = serde_json::Value::Array(std::mem::take(json));
            outln!("{}", serde_json::to_string_pretty(&document).unwrap_or_default());
            let _ = std::io::stdout().flush();
        }
    }

    fn meta_command(&mut self, session: &mut Session, command: &str) -> bool {
        let mut words = command.split_whitespace();
        match words.next().unwrap_or("") {
            "q" | "quit" => std::process::exit(0),
            "timing" => {
                self.timing = match words.next() {
                    Some("on") => true,
                    Some("off") => false,
                    _ => !self.timing,
                };
                outln!("Timing is {}.", if self.timing { "on" } else { "off" });
                true
            }
            "dt" => self.run(
                session,
                "SELECT table_name, rows, partitions, placement, bytes FROM numadb.tables ORDER BY table_name",
                Statements::OneMessage,
            ),
            "d" => match words.next() {
                Some(name) => {
                    let name = name.trim_matches('"');
                    match session.database().catalog().table(name) {
                        Some(table) => {
                            let output = QueryOutput {
                                columns: ["Column", "Type", "Nullable"]
                                    .iter()
                                    .map(|n| numadb_sql::OutputColumn {
                                        name: n.to_string(),
                                        data_type: DataType::Text,
                                    })
                                    .collect(),
                                rows: table
                                    .columns()
                                    .iter()
                                    .map(|c| {
                                        vec![
                                            Value::text(&c.name),
                                            Value::text(&match c.max_chars {
                                                Some(n) => format!("character varying({n})"),
                                                None => c.data_type.sql_name().to_string(),
                                            }),
                                            Value::text(if c.nullable { "" } else { "not null" }),
                                        ]
                                    })
                                    .collect(),
                                tag: String::new(),
                                notices: Vec::new(),
                            };
                            outln!("Table \"{}\" (placement {})", table.name(), table.placement(None));
                            out!("{}", render(&output));
                            for index in table.snapshot().indexes {
                                outln!(
                                    "Index: {} {} ({}){}",
                                    index.name(),
                                    index.kind().name(),
                                    table.columns()[index.column()].name,
                                    if index.is_unique() { " unique" } else { "" }
                                );
                            }
                            true
                        }
                        None => {
                            eprintln!("Did not find any relation named \"{name}\".");
                            false
                        }
                    }
                }
                None => self.meta_command(session, "dt"),
            },
            "?" | "h" | "help" => {
                outln!(
                    "\\dt            list tables\n\\d NAME        describe a table\n\\timing        toggle timing\n\\q             quit"
                );
                outln!(
                    "SQL: SELECT/INSERT/CREATE TABLE/CREATE INDEX/COPY/EXPLAIN [ANALYZE]/SET/SHOW; ALTER TABLE t NUMA NODE ('n')"
                );
                true
            }
            other => {
                eprintln!("invalid command \\{other}; try \\?");
                false
            }
        }
    }

    fn interactive(&mut self, session: &mut Session) -> anyhow::Result<()> {
        let mut editor = rustyline::DefaultEditor::new().context("starting the line editor")?;
        let history = std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".numadb_history"));
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        outln!("numadb {} — type \\? for help, \\q to quit.", env!("CARGO_PKG_VERSION"));
        let mut buffer = String::new();
        loop {
            let prompt = if buffer.is_empty() { "numadb=> " } else { "numadb-> " };
            match editor.readline(prompt) {
                Ok(line) => {
                    if buffer.is_empty() && line.trim_start().starts_with('\\') {
                        let _ = editor.add_history_entry(line.as_str());
                        self.run(session, &line, Statements::OneByOne);
                        self.print_json();
                        continue;
                    }
                    buffer.push_str(&line);
                    buffer.push('\n');
                    if line.trim_end().ends_with(';') {
                        let _ = editor.add_history_entry(buffer.trim());
                        let statement = std::mem::take(&mut buffer);
                        self.run(session, &statement, Statements::OneByOne);
                        self.print_json();
                    }
                }
                Err(rustyline::error::ReadlineError::Interrupted) => buffer.clear(),
                Err(rustyline::error::ReadlineError::Eof) => break,
                Err(error) => return Err(error.into()),
            }
        }
        if let Some(path) = &history {
            let _ = editor.save_history(path);
        }
        Ok(())
    }
}

/// An error as psql prints it, with the SQLSTATE.
pub fn render_error(error: &SqlError) -> String {
    let mut out = format!("ERROR:  {}: {}\n", error.sqlstate, error.message);
    if let Some(detail) = &error.detail {
        out.push_str(&format!("DETAIL:  {detail}\n"));
    }
    if let Some(hint) = &error.hint {
        out.push_str(&format!("HINT:  {hint}\n"));
    }
    out
}

/// A result as psql's aligned format prints it.
pub fn render(output: &QueryOutput) -> String {
    if !output.has_rows() {
        return format!("{}\n", output.tag);
    }
    let texts: Vec<Vec<String>> =
        output.rows.iter().map(|row| row.iter().map(|v| v.to_pg_text().unwrap_or_default()).collect()).collect();
    let widths: Vec<usize> = output
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| texts.iter().map(|r| r[i].chars().count()).chain([c.name.chars().count()]).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    let header: Vec<String> = output.columns.iter().zip(&widths).map(|(c, &w)| format!("{:^w$}", c.name)).collect();
    out.push_str(&format!(" {}\n", header.join(" | ")));
    out.push_str(&format!("{}\n", widths.iter().map(|&w| "-".repeat(w + 2)).collect::<Vec<_>>().join("+")));
    for row in &texts {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .zip(&output.columns)
            .map(
                |((text, &w), column)| {
                    if column.data_type.is_numeric() { format!("{text:>w$}") } else { format!("{text:<w$}") }
                },
            )
            .collect();
        out.push_str(&format!(" {}\n", cells.join(" | ").trim_end()));
    }
    out.push_str(&format!("({} row{})\n\n", texts.len(), if texts.len() == 1 { "" } else { "s" }));
    out
}

fn output_json(output: &QueryOutput) -> serde_json::Value {
    if !output.has_rows() {
        if !output.notices.is_empty() {
            return serde_json::json!({ "command": output.tag, "notices": output.notices });
        }
        return serde_json::json!({ "command": output.tag });
    }
    // Rows are arrays, not objects keyed by column name: names repeat (`SELECT a, a`, two `?column?`s) and
    // objects do not keep their keys' order.
    let columns: Vec<serde_json::Value> =
        output.columns.iter().map(|c| serde_json::json!({ "name": c.name, "type": c.data_type.sql_name() })).collect();
    let rows: Vec<serde_json::Value> = output
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|value| match value {
                    Value::Null => serde_json::Value::Null,
                    Value::Int(v) => serde_json::json!(v),
                    Value::Numeric(v) => match (i64::try_from(*v), u64::try_from(*v)) {
                        (Ok(v), _) => serde_json::json!(v),
                        (_, Ok(v)) => serde_json::json!(v),
                        // Past 64 bits, the digits as text: a JSON reader would round the number to a double.
                        _ => serde_json::json!(v.to_string()),
                    },
                    Value::Double(v) if v.is_finite() => serde_json::json!(v),
                    // JSON has no NaN or infinities: PostgreSQL's spelling, as text.
                    Value::Double(v) => serde_json::json!(Value::Double(*v).to_pg_text().unwrap_or_default()),
                    Value::Text(t) => serde_json::json!(t.as_ref()),
                    Value::Bool(b) => serde_json::json!(b),
                })
                .collect()
        })
        .collect();
    serde_json::json!({ "command": output.tag, "columns": columns, "rows": rows })
}

fn error_json(error: &SqlError) -> serde_json::Value {
    serde_json::json!({
        "error": {
            "sqlstate": error.sqlstate.to_string(),
            "message": error.message,
            "detail": error.detail,
            "hint": error.hint,
        }
    })
}
