//! Mutation fuzzing of the SQL layer: every statement of the sqllogictest suite, mangled token by token
//! (deleted, repeated, swapped, replaced by keywords, operators and edge-case literals), runs against a database
//! holding the suite's tables. Any outcome is fine except a panic, on the calling thread or on a worker: a bad
//! query must come back as an error with a SQLSTATE, and the session must still answer afterwards.
//!
//! `NUMADB_FUZZ_SEED` and `NUMADB_FUZZ_CASES` change the seed and the number of mutated statements.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::{Arc, Mutex};

use numadb_sql::Database;

/// Statements of the `.slt` files (the text after `statement …` and `query …` lines, up to `----` or a blank).
fn corpus() -> Vec<String> {
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<_> = std::fs::read_dir(&directory).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut statements = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if !(line.starts_with("statement ") || line.starts_with("query ")) {
                continue;
            }
            let body: Vec<&str> = lines.by_ref().take_while(|l| !l.trim().is_empty() && *l != "----").collect();
            if !body.is_empty() {
                statements.push(body.join("\n"));
            }
        }
    }
    statements
}

/// Splits SQL into words, quoted strings and single punctuation characters.
fn tokens(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        let mut token = c.to_string();
        if c == '\'' || c == '"' {
            for d in chars.by_ref() {
                token.push(d);
                if d == c {
                    break;
                }
            }
        } else if c.is_alphanumeric() || c == '_' || c == '.' || c == '$' {
            while let Some(&d) = chars.peek().filter(|d| d.is_alphanumeric() || **d == '_' || **d == '.') {
                token.push(d);
                chars.next();
            }
        } else if "<>=!|:".contains(c) {
            while let Some(&d) = chars.peek().filter(|d| "<>=!|:".contains(**d)) {
                token.push(d);
                chars.next();
            }
        }
        out.push(token);
    }
    out
}

const VOCABULARY: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP",
    "BY",
    "ORDER",
    "HAVING",
    "LIMIT",
    "OFFSET",
    "UNION",
    "INTERSECT",
    "EXCEPT",
    "JOIN",
    "LEFT",
    "RIGHT",
    "FULL",
    "CROSS",
    "NATURAL",
    "USING",
    "ON",
    "WITH",
    "RECURSIVE",
    "ALL",
    "DISTINCT",
    "AND",
    "OR",
    "NOT",
    "NULL",
    "IS",
    "IN",
    "BETWEEN",
    "LIKE",
    "CASE",
    "WHEN",
    "THEN",
    "ELSE",
    "END",
    "CAST",
    "AS",
    "INTEGER",
    "BIGINT",
    "TEXT",
    "BOOLEAN",
    "DOUBLE PRECISION",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "coalesce",
    "abs",
    "round",
    "trunc",
    "power",
    "^",
    "sqrt",
    "ln",
    "substring",
    "substr",
    "FOR",
    "position",
    "TRIM",
    "LEADING",
    "lpad",
    "repeat",
    "left",
    "split_part",
    "concat",
    "string_agg",
    "variance",
    "generate_series",
    "~",
    "SIMILAR",
    "regexp_replace",
    "ON",
    "(",
    ")",
    ",",
    "*",
    "+",
    "-",
    "/",
    "%",
    "||",
    "=",
    "<>",
    "<",
    ">=",
    ";",
    "$1",
    "0",
    "-1",
    "2147483647",
    "2147483648",
    "-2147483648",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
    "1e308",
    "-1e308",
    "'NaN'",
    "'Infinity'",
    "0.0",
    "''",
    "'x'",
    "'%'",
    "true",
    "false",
    "INSERT",
    "INTO",
    "VALUES",
    "CREATE",
    "TABLE",
    "DROP",
    "INDEX",
    "ON",
    "USING",
    "hash",
    "sorted",
    "EXPLAIN",
    "ANALYZE",
    "SET",
    "numadb.stealing",
    "ALTER",
    "NUMA",
    "NODE",
    "'0'",
    "'7'",
    "COPY",
    "TO",
    "STDOUT",
    "PREPARE",
    "EXECUTE",
    "DEALLOCATE",
    "PRIMARY",
    "KEY",
    "NULLS",
    "FIRST",
    "LAST",
    "DESC",
    "ASC",
    "FETCH",
    "ROWS",
    "ONLY",
    "OVER",
    "PARTITION",
    "row_number()",
    "rank()",
    "lag",
    "FILTER",
    "WITH",
];

fn mutate(rng: &mut fastrand::Rng, statement: &[String]) -> String {
    let mut tokens = statement.to_vec();
    for _ in 0..1 + rng.usize(..2) {
        let at = rng.usize(..tokens.len().max(1));
        match rng.u8(..5) {
            0 if !tokens.is_empty() => {
                tokens.remove(at);
            }
            1 if !tokens.is_empty() => tokens.insert(at, tokens[at].clone()),
            2 if tokens.len() > 1 => {
                let other = rng.usize(..tokens.len());
                tokens.swap(at, other);
            }
            3 => tokens.insert(at.min(tokens.len()), VOCABULARY[rng.usize(..VOCABULARY.len())].to_string()),
            _ if !tokens.is_empty() => tokens[at] = VOCABULARY[rng.usize(..VOCABULARY.len())].to_string(),
            _ => tokens.push(VOCABULARY[rng.usize(..VOCABULARY.len())].to_string()),
        }
    }
    tokens.join(" ")
}

#[test]
fn mutated_statements_never_panic() {
    let seed: u64 = std::env::var("NUMADB_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(1);
    let cases: usize = std::env::var("NUMADB_FUZZ_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(30_000);
    let corpus = corpus();
    assert!(corpus.len() > 250, "the corpus is the slt suite's statements ({} found)", corpus.len());
    let database = Database::new().unwrap();
    let mut session = database.session();
    // The suite's tables and rows, so mutated queries get past name resolution.
    for statement in corpus.iter().filter(|s| s.starts_with("CREATE TABLE") || s.starts_with("INSERT")) {
        let _ = session.execute(statement);
    }
    // A mutation can turn a join into a cross product of the suite's largest tables: bounded in time and memory,
    // it is an error like any other instead of minutes of work.
    let bounds = "SET statement_timeout = 2000; SET numadb.max_result_mb = 256";
    let bound = |session: &mut numadb_sql::Session| session.execute(bounds).into_iter().all(|r| r.is_ok());
    assert!(bound(&mut session));
    let statements: Vec<Vec<String>> = corpus.iter().map(|s| tokens(s)).collect();
    // Panics on any thread (scheduler workers included) are recorded, not just those of this thread.
    let panics: Arc<Mutex<Vec<String>>> = Arc::default();
    let recorded = Arc::clone(&panics);
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| recorded.lock().unwrap().push(info.to_string())));

    let mut rng = fastrand::Rng::with_seed(seed);
    let mut failures = Vec::new();
    let mut outcomes = std::collections::BTreeMap::new();
    for _ in 0..cases {
        let original = rng.usize(..statements.len());
        let sql = mutate(&mut rng, &statements[original]);
        // Statements that would write files or remove the shared tables are left out, and so are INSERTs that
        // copy rows from a table (repeated, they would double it every time), and statements that could lift the
        // bounds set above.
        let upper = sql.to_uppercase();
        let lifts_bounds = ["RESET", "STATEMENT_TIMEOUT", "MAX_RESULT_MB"].iter().any(|word| upper.contains(word));
        if upper.contains("COPY")
            || upper.contains("DROP")
            || (upper.contains("INSERT") && upper.contains("FROM"))
            || lifts_bounds
        {
            continue;
        }
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| session.execute(&sql)));
        if let Ok(results) = &outcome {
            for result in results {
                let key = match result {
                    Ok(_) => "ok".to_string(),
                    Err(e) => e.sqlstate.to_string(),
                };
                *outcomes.entry(key).or_insert(0usize) += 1;
            }
        }
        let panicked = std::mem::take(&mut *panics.lock().unwrap());
        if outcome.is_err() || !panicked.is_empty() {
            failures.push(format!("{sql}\n  {}", panicked.join("\n  ")));
            session = database.session();
            bound(&mut session);
        }
    }
    let _ = std::panic::take_hook();
    std::panic::set_hook(previous_hook);
    eprintln!("outcomes by SQLSTATE: {outcomes:?}");
    assert!(outcomes.get("ok").is_some_and(|&n| n > cases / 50), "mutations still run statements: {outcomes:?}");
    let alive = session.execute_one("SELECT 1").map(|o| o.rows.len());
    assert_eq!(alive.ok(), Some(1), "the session still answers");
    assert!(
        failures.is_empty(),
        "{} of {cases} mutated statements panicked (seed {seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
