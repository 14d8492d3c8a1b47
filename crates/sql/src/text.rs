//! PostgreSQL's lexical structure, as much as is needed before the engine parses a statement: splitting a
//! simple query or a script into statements (semicolons inside strings, quoted names, dollar quotes and comments
//! do not count), bounding a statement's complexity (checked by [`crate::parse::parse`] for every caller), and
//! the leading keywords by which the server routes a statement (COPY, transaction control, catalog queries).

use numadb_execution::{ExecError, sqlstate};

/// The statements of a query string, trimmed, empty ones dropped.
pub fn split_statements(sql: &str) -> Result<Vec<&str>, ExecError> {
    let bytes = sql.as_bytes();
    let mut statements = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b';' => {
                push_statement(&sql[start..i], &mut statements);
                start = i + 1;
                i += 1;
            }
            _ => i = skip_token(sql, i)?,
        }
    }
    push_statement(&sql[start..], &mut statements);
    Ok(statements)
}

fn push_statement<'a>(text: &'a str, statements: &mut Vec<&'a str>) {
    let trimmed = text.trim();
    if !is_blank(trimmed) {
        statements.push(trimmed);
    }
}

/// Whether the text holds nothing but whitespace and comments.
pub fn is_blank(sql: &str) -> bool {
    !has_content(sql)
}

/// Stack for a thread that runs statements (a server's connection threads and event loops, the shell). The
/// engine's parser, binder and planner recurse once per level of a statement's syntax tree; [`check_complexity`]
/// bounds the levels, and this leaves room for the deepest statement it lets through (measured: 5 000 `+` take
/// about 15 MiB in a release build and 60 MiB in a debug build, whose frames are several times larger). It is
/// address space: pages are only touched as deep as a statement goes. The scheduler's workers, which evaluate
/// the same expressions over the rows, get the same stack.
pub const STATEMENT_STACK_BYTES: usize = numadb_scheduler::WORKER_STACK_BYTES;

/// Set operations (`UNION`, `INTERSECT`, `EXCEPT`) a statement may hold.
pub const SET_OPERATIONS_MAX: usize = 1000;
/// Operators (`+`, `=`, `AND`, `NOT`, `||`, …) a statement may hold.
pub const OPERATORS_MAX: usize = 5_000;

/// Refuses statements whose syntax trees would be too deep for the engine's recursive parser, binder and
/// planner (a chain of N `UNION ALL`s or N `+`s is a tree N levels deep): PostgreSQL's "stack depth limit
/// exceeded" (54001) before the engine sees them, so that no statement can overflow a thread's stack.
pub fn check_complexity(sql: &str) -> Result<(), ExecError> {
    let bytes = sql.as_bytes();
    let (mut set_operations, mut operators) = (0usize, 0usize);
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_alphabetic() || b == b'_' {
            let end = skip_token(sql, i)?;
            let word = &sql[i..end];
            if ["union", "intersect", "except"].iter().any(|w| word.eq_ignore_ascii_case(w)) {
                set_operations += 1;
            } else if ["and", "or", "not", "is", "in", "like", "between"].iter().any(|w| word.eq_ignore_ascii_case(w)) {
                operators += 1;
            }
            i = end;
        } else if b"+-*/%<>=!|&^~#@".contains(&b)
            && !(b == b'-' && bytes.get(i + 1) == Some(&b'-'))
            && !(b == b'/' && bytes.get(i + 1) == Some(&b'*'))
        {
            operators += 1;
            while i < bytes.len() && b"+-*/%<>=!|&^~#@".contains(&bytes[i]) {
                i += 1;
            }
        } else {
            i = skip_token(sql, i)?;
        }
    }
    let too_complex = |what: String| {
        ExecError::new("54001", format!("stack depth limit exceeded: the statement has {what}"))
            .with_hint("Split the statement, or load the values with COPY.")
    };
    if set_operations > SET_OPERATIONS_MAX {
        return Err(too_complex(format!("{set_operations} set operations (at most {SET_OPERATIONS_MAX})")));
    }
    if operators > OPERATORS_MAX {
        return Err(too_complex(format!("{operators} operators (at most {OPERATORS_MAX})")));
    }
    Ok(())
}

/// Whether anything other than whitespace and comments appears.
fn has_content(sql: &str) -> bool {
    let bytes = sql.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b if b.is_ascii_whitespace() => i += 1,
            b'-' if bytes.get(i + 1) == Some(&b'-') => i = skip_line_comment(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => match skip_block_comment(bytes, i) {
                Some(end) => i = end,
                None => return true,
            },
            _ => return true,
        }
    }
    false
}

/// The first `count` words of a statement, lower-cased, skipping comments; stops at the first token that is not
/// a bare word.
pub fn words(sql: &str, count: usize) -> Vec<String> {
    let bytes = sql.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() && found.len() < count {
        match bytes[i] {
            b if b.is_ascii_whitespace() => i += 1,
            b'-' if bytes.get(i + 1) == Some(&b'-') => i = skip_line_comment(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => match skip_block_comment(bytes, i) {
                Some(end) => i = end,
                None => break,
            },
            b if b.is_ascii_alphabetic() || b == b'_' => {
                let start = i;
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'$') {
                    i += 1;
                }
                found.push(sql[start..i].to_ascii_lowercase());
            }
            _ => break,
        }
    }
    found
}

/// The index just past the token that starts at `i` (a string, quoted name, dollar quote, comment or one byte).
fn skip_token(sql: &str, i: usize) -> Result<usize, ExecError> {
    let bytes = sql.as_bytes();
    match bytes[i] {
        b'\'' => {
            let escapes = i > 0
                && matches!(bytes[i - 1], b'e' | b'E')
                && (i < 2 || !(bytes[i - 2].is_ascii_alphanumeric() || bytes[i - 2] == b'_'));
            skip_quoted(bytes, i, b'\'', escapes).ok_or_else(|| unterminated("quoted string", sql, i))
        }
        b'"' => skip_quoted(bytes, i, b'"', false).ok_or_else(|| unterminated("quoted identifier", sql, i)),
        b'-' if bytes.get(i + 1) == Some(&b'-') => Ok(skip_line_comment(bytes, i)),
        b'/' if bytes.get(i + 1) == Some(&b'*') => {
            skip_block_comment(bytes, i).ok_or_else(|| unterminated("/* comment", sql, i))
        }
        b'$' => match dollar_tag(bytes, i) {
            Some(tag_end) => {
                let tag = &bytes[i..tag_end];
                let body = &bytes[tag_end..];
                body.windows(tag.len())
                    .position(|w| w == tag)
                    .map(|at| tag_end + at + tag.len())
                    .ok_or_else(|| unterminated("dollar-quoted string", sql, i))
            }
            None => Ok(i + 1),
        },
        b if b.is_ascii_alphanumeric() || b == b'_' => {
            // A whole word, so that `a$b$` is not read as a dollar quote.
            let mut end = i;
            while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] == b'$')
            {
                end += 1;
            }
            Ok(end)
        }
        _ => Ok(i + 1),
    }
}

/// The end of a dollar quote's opening tag (`$$` or `$tag$`) starting at `i`, if one starts there.
fn dollar_tag(bytes: &[u8], i: usize) -> Option<usize> {
    let mut end = i + 1;
    if bytes.get(end).is_some_and(|b| b.is_ascii_digit()) {
        return None; // `$1`, a parameter.
    }
    while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_' || bytes[end] >= 0x80) {
        end += 1;
    }
    (bytes.get(end) == Some(&b'$')).then_some(end + 1)
}

fn skip_quoted(bytes: &[u8], start: usize, quote: u8, backslash_escapes: bool) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        if backslash_escapes && bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] == quote {
            if bytes.get(i + 1) == Some(&quote) {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += 1;
    }
    None
}

fn skip_line_comment(bytes: &[u8], start: usize) -> usize {
    bytes[start..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |at| start + at + 1)
}

/// Block comments nest in PostgreSQL.
fn skip_block_comment(bytes: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while i + 1 < bytes.len() {
        if bytes[i] == b'/' && bytes[i + 1] == b'*' {
            depth += 1;
            i += 2;
        } else if bytes[i] == b'*' && bytes[i + 1] == b'/' {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return Some(i);
            }
        } else {
            i += 1;
        }
    }
    None
}

fn unterminated(what: &str, sql: &str, at: usize) -> ExecError {
    let mut end = (at + 20).min(sql.len());
    while !sql.is_char_boundary(end) {
        end -= 1;
    }
    ExecError::new(sqlstate::SYNTAX_ERROR, format!("unterminated {what} at or near \"{}\"", &sql[at..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_on_semicolons_outside_quotes_and_comments() {
        let sql = "SELECT 'a;b', \"x;y\" FROM t; -- c;\n SELECT $$;$$, $tag$ ; $$ $tag$ /* a /* ; */ ; */;;\n\
                   SELECT E'\\';', $1;";
        assert_eq!(
            split_statements(sql).unwrap(),
            vec![
                "SELECT 'a;b', \"x;y\" FROM t",
                "-- c;\n SELECT $$;$$, $tag$ ; $$ $tag$ /* a /* ; */ ; */",
                "SELECT E'\\';', $1"
            ]
        );
        assert!(split_statements(" ; ;\n-- only a comment\n").unwrap().is_empty());
        assert_eq!(split_statements("SELECT 'it''s'").unwrap(), vec!["SELECT 'it''s'"]);
        assert_eq!(split_statements("SELECT a$b$ FROM t; x").unwrap(), vec!["SELECT a$b$ FROM t", "x"]);
    }

    #[test]
    fn unterminated_tokens_are_syntax_errors() {
        for sql in ["SELECT 'abc", "SELECT \"abc", "SELECT $$abc", "SELECT 1 /* /* */"] {
            let error = split_statements(sql).unwrap_err();
            assert_eq!(error.sqlstate, "42601", "{sql}");
            assert!(error.message.starts_with("unterminated"), "{sql}");
        }
    }

    #[test]
    fn complexity_counts_set_operations_and_operators_outside_strings() {
        // n statements joined make n - 1 set operations.
        let unions = vec!["SELECT 1"; SET_OPERATIONS_MAX + 2].join(" UNION ALL ");
        assert_eq!(check_complexity(&unions).unwrap_err().sqlstate, "54001");
        assert!(check_complexity(&vec!["SELECT 1"; SET_OPERATIONS_MAX + 1].join(" UNION ALL ")).is_ok());
        let sum = format!("SELECT 1{}", "+1".repeat(OPERATORS_MAX + 1));
        assert_eq!(check_complexity(&sum).unwrap_err().sqlstate, "54001");
        let quoted = format!("SELECT '{}' -- {}\n", "+".repeat(50_000), "union ".repeat(5000));
        assert!(check_complexity(&quoted).is_ok(), "strings and comments do not count");
        assert!(check_complexity("SELECT a <= b AND c <> d").is_ok());
    }

    #[test]
    fn leading_words_skip_comments() {
        assert_eq!(words("/* x */ -- y\n  COPY t FROM stdin", 3), vec!["copy", "t", "from"]);
        assert_eq!(words("SELECT(1)", 2), vec!["select"]);
        assert!(is_blank(" -- x\n /* y */ "));
        assert!(!is_blank(" ( "));
    }
}
