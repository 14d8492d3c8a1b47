//! `SELECT version()`, `SELECT current_setting('x')`, `SELECT current_database(), current_user` and their
//! kind: a SELECT without FROM whose items are all session functions drivers call, and
//! `SHOW TRANSACTION ISOLATION LEVEL`. Read with a small tokenizer of their own (these statements are tiny).

use numadb_execution::{ExecError, sqlstate};
use numadb_storage::Value;

use super::CompatContext;
use crate::protocol::types::{Column, PgType};
use crate::sql_text;

/// A function numadb answers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Function {
    Version,
    CurrentDatabase,
    CurrentSchema,
    CurrentUser,
    SessionUser,
    BackendPid,
    InRecovery,
    /// `current_setting(name [, missing_ok])`.
    CurrentSetting {
        name: String,
        missing_ok: bool,
    },
    /// `SHOW TRANSACTION ISOLATION LEVEL`.
    TransactionIsolation,
}

impl Function {
    fn pg_type(&self) -> PgType {
        match self {
            Function::CurrentDatabase | Function::CurrentSchema | Function::CurrentUser | Function::SessionUser => {
                PgType::Name
            }
            Function::BackendPid => PgType::Int4,
            Function::InRecovery => PgType::Bool,
            Function::Version | Function::CurrentSetting { .. } | Function::TransactionIsolation => PgType::Text,
        }
    }
}

/// A recognised statement: its items and their column names.
pub struct Select {
    items: Vec<(Function, String)>,
}

/// The version string, PostgreSQL's form first (drivers parse it).
pub fn version_string() -> String {
    format!(
        "PostgreSQL 15.0 (numadb {}) on {}-linux, a NUMA-aware in-memory column store",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH
    )
}

impl Select {
    /// The result columns.
    pub fn columns(&self) -> Vec<Column> {
        self.items.iter().map(|(function, name)| Column::new(name.clone(), function.pg_type())).collect()
    }

    /// The one row.
    pub fn evaluate(&self, context: &CompatContext<'_>) -> Result<Vec<Value>, ExecError> {
        self.items
            .iter()
            .map(|(function, _)| {
                Ok(match function {
                    Function::Version => Value::text(&version_string()),
                    Function::CurrentDatabase => Value::text(context.database),
                    Function::CurrentSchema => Value::text("public"),
                    Function::CurrentUser | Function::SessionUser => Value::text(context.user),
                    Function::BackendPid => Value::Int(i64::from(context.process_id)),
                    Function::InRecovery => Value::Bool(false),
                    Function::TransactionIsolation => Value::text(
                        &context
                            .session
                            .settings()
                            .get("transaction_isolation")
                            .unwrap_or_else(|_| "read committed".into()),
                    ),
                    Function::CurrentSetting { name, missing_ok } => match context.session.settings().get(name) {
                        Ok(value) => Value::text(&value),
                        Err(_) if *missing_ok => Value::Null,
                        Err(_) => {
                            return Err(ExecError::new(
                                sqlstate::UNDEFINED_OBJECT,
                                format!("unrecognized configuration parameter \"{name}\""),
                            ));
                        }
                    },
                })
            })
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    String(String),
    Number(String),
    Symbol(char),
}

/// Tokens of a short statement; `None` for anything unusual (the engine then handles it).
fn tokens(sql: &str) -> Option<Vec<Token>> {
    let mut tokens = Vec::new();
    let mut chars = sql.char_indices().peekable();
    while let Some(&(i, c)) = chars.peek() {
        match c {
            c if c.is_whitespace() => {
                chars.next();
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let mut end = i;
                while let Some(&(j, c)) = chars.peek() {
                    if c.is_ascii_alphanumeric() || c == '_' {
                        end = j + c.len_utf8();
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Word(sql[i..end].to_ascii_lowercase()));
            }
            c if c.is_ascii_digit() => {
                let mut end = i;
                while let Some(&(j, c)) = chars.peek() {
                    if c.is_ascii_digit() {
                        end = j + 1;
                        chars.next();
                    } else {
                        break;
                    }
                }
                tokens.push(Token::Number(sql[i..end].to_string()));
            }
            '\'' | '"' => {
                chars.next();
                let mut text = String::new();
                loop {
                    let (_, d) = chars.next()?;
                    if d == c {
                        if chars.peek().map(|&(_, n)| n) == Some(c) {
                            chars.next();
                            text.push(c);
                            continue;
                        }
                        break;
                    }
                    text.push(d);
                }
                tokens.push(if c == '\'' { Token::String(text) } else { Token::Quoted(text) });
            }
            '(' | ')' | ',' | '.' | ';' => {
                chars.next();
                tokens.push(Token::Symbol(c));
            }
            _ => return None,
        }
    }
    Some(tokens)
}

fn word(token: Option<&Token>, expected: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w == expected)
}

/// Recognises the statements above.
pub fn recognise(sql: &str) -> Option<Select> {
    let lower = sql.to_ascii_lowercase();
    let first = sql_text::words(sql, 4);
    if first == ["show", "transaction", "isolation", "level"] {
        return Some(Select { items: vec![(Function::TransactionIsolation, "transaction_isolation".into())] });
    }
    if first.first().is_none_or(|w| w != "select") || lower.contains("from") {
        return None;
    }
    const NAMES: [&str; 11] = [
        "version",
        "current_",
        "session_user",
        "user",
        "pg_backend_pid",
        "pg_is_in_recovery",
        "current_setting",
        "current_database",
        "current_schema",
        "current_catalog",
        "current_role",
    ];
    if !NAMES.iter().any(|n| lower.contains(n)) {
        return None;
    }
    let tokens = tokens(sql)?;
    let mut position = 1; // after SELECT
    let mut items = Vec::new();
    loop {
        let (function, default_name, next) = item(&tokens, position)?;
        position = next;
        let name = match tokens.get(position) {
            Some(Token::Word(w)) if w == "as" => {
                position += 2;
                alias(tokens.get(position - 1))?
            }
            Some(Token::Word(w)) => {
                position += 1;
                w.clone()
            }
            Some(Token::Quoted(q)) => {
                position += 1;
                q.clone()
            }
            _ => default_name,
        };
        items.push((function, name));
        match tokens.get(position) {
            Some(Token::Symbol(',')) => position += 1,
            Some(Token::Symbol(';')) if position + 1 == tokens.len() => break,
            None => break,
            _ => return None,
        }
    }
    Some(Select { items })
}

fn alias(token: Option<&Token>) -> Option<String> {
    match token {
        Some(Token::Word(w)) => Some(w.clone()),
        Some(Token::Quoted(q)) => Some(q.clone()),
        _ => None,
    }
}

/// One item starting at `at`: the function, its default column name and the index after it.
fn item(tokens: &[Token], at: usize) -> Option<(Function, String, usize)> {
    let mut at = at;
    // An optional `pg_catalog.` qualifier.
    if word(tokens.get(at), "pg_catalog") && tokens.get(at + 1) == Some(&Token::Symbol('.')) {
        at += 2;
    }
    let Some(Token::Word(name)) = tokens.get(at) else { return None };
    at += 1;
    let mut arguments = Vec::new();
    let called = tokens.get(at) == Some(&Token::Symbol('('));
    if called {
        at += 1;
        loop {
            match tokens.get(at)? {
                Token::Symbol(')') => {
                    at += 1;
                    break;
                }
                Token::Symbol(',') => at += 1,
                Token::String(s) | Token::Number(s) => {
                    arguments.push(s.clone());
                    at += 1;
                }
                Token::Word(w) if w == "true" || w == "false" => {
                    arguments.push(w.clone());
                    at += 1;
                }
                _ => return None,
            }
        }
    }
    let function = match (name.as_str(), called, arguments.as_slice()) {
        ("version", true, []) => Function::Version,
        ("current_database", true, []) | ("current_catalog", false, []) => Function::CurrentDatabase,
        ("current_schema", _, []) => Function::CurrentSchema,
        ("current_user" | "user" | "current_role", false, []) => Function::CurrentUser,
        ("session_user", false, []) => Function::SessionUser,
        ("pg_backend_pid", true, []) => Function::BackendPid,
        ("pg_is_in_recovery", true, []) => Function::InRecovery,
        ("current_setting", true, [setting]) => {
            Function::CurrentSetting { name: setting.to_ascii_lowercase(), missing_ok: false }
        }
        ("current_setting", true, [setting, missing]) => {
            Function::CurrentSetting { name: setting.to_ascii_lowercase(), missing_ok: missing == "true" }
        }
        _ => return None,
    };
    let default_name = if name == "current_catalog" { "current_catalog".to_string() } else { name.clone() };
    Some((function, default_name, at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(sql: &str) -> Option<Vec<(Function, String)>> {
        recognise(sql).map(|s| s.items)
    }

    #[test]
    fn driver_functions_are_recognised() {
        assert_eq!(names("SELECT version()"), Some(vec![(Function::Version, "version".into())]));
        assert_eq!(
            names("select pg_catalog.current_setting('Server_Version') AS v, current_user;"),
            Some(vec![
                (Function::CurrentSetting { name: "server_version".into(), missing_ok: false }, "v".into()),
                (Function::CurrentUser, "current_user".into())
            ])
        );
        assert_eq!(
            names("SELECT current_setting('x', true) \"Setting\""),
            Some(vec![(Function::CurrentSetting { name: "x".into(), missing_ok: true }, "Setting".into())])
        );
        assert_eq!(names("show transaction isolation level").unwrap()[0].1, "transaction_isolation");
        assert!(names("SELECT version() FROM t").is_none());
        assert!(names("SELECT 1").is_none());
        assert!(names("SELECT version() + 1").is_none());
        assert!(names("SELECT users FROM t").is_none());
        assert!(names("SELECT current_setting()").is_none());
    }
}
