//! Parsing: numadb's own statements first, everything else by sqlparser with the PostgreSQL dialect.
//!
//! Our statements are the placement ones:
//! - `ALTER TABLE t NUMA NODE ('1')` (SAP HANA's syntax; a list of nodes spreads partitions round-robin);
//! - `ALTER TABLE t SET (numa_placement = 'interleave(0-3)')`;
//! - the same two per column: `ALTER TABLE t ALTER [COLUMN] c NUMA NODE (...)` / `... SET (numa_placement = ...)`.
//!
//! Statements are split by sqlparser's tokenizer, so semicolons inside strings or quoted names are not
//! separators.

use numadb_execution::{ExecError, sqlstate};
use sqlparser::ast::{Ident, ObjectName, Statement};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::Token;

use crate::text;

/// Where `ALTER TABLE` puts a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementSpec {
    /// `NUMA NODE ('n', ...)`: the node names as written.
    NumaNodes(Vec<String>),
    /// `SET (numa_placement = '...')`.
    Placement(String),
}

/// A parsed statement.
#[derive(Debug, Clone)]
pub enum Parsed {
    /// Anything sqlparser understands.
    Sql(Box<Statement>),
    /// A placement change.
    AlterPlacement {
        /// The table.
        table: ObjectName,
        /// One column, or the whole table.
        column: Option<Ident>,
        /// The new placement.
        spec: PlacementSpec,
    },
}

/// A syntax error in PostgreSQL's words.
pub fn syntax_error(error: ParserError) -> ExecError {
    let text = error.to_string();
    let text = text.strip_prefix("sql parser error: ").unwrap_or(&text).to_string();
    ExecError::new(sqlstate::SYNTAX_ERROR, format!("syntax error: {text}"))
}

fn word_is(token: &Token, word: &str) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word))
}

/// One statement of a script, as [`split_statements`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptStatement<'a> {
    /// Its text, without the semicolon.
    pub text: &'a str,
    /// Where `text` starts in the script: line and column (in characters), both from 1.
    pub line: u64,
    /// See `line`.
    pub column: u64,
}

impl ScriptStatement<'_> {
    /// `error` (from running this statement alone) with the syntax error's position, which sqlparser gives
    /// within the statement's text (`… at Line: 1, Column: 5`), moved to where it is in the script.
    pub fn locate(&self, mut error: ExecError) -> ExecError {
        const LINE: &str = " at Line: ";
        let Some(at) = error.message.rfind(LINE) else { return error };
        let position = &error.message[at + LINE.len()..];
        let Some((line, column)) = position.split_once(", Column: ") else { return error };
        let (Ok(line), Ok(column)) = (line.parse::<u64>(), column.parse::<u64>()) else { return error };
        let (line, column) = if line <= 1 {
            (self.line, self.column + column.saturating_sub(1))
        } else {
            (self.line + line - 1, column)
        };
        error.message.truncate(at);
        error.message.push_str(&format!("{LINE}{line}, Column: {column}"));
        error
    }
}

/// The statements of a script ([`text::split_statements`]: trimmed, empty ones left out), each with where it
/// starts. A shell runs them one at a time, as psql runs a file: each result (and its time) shows as soon as its
/// statement ends, and an error stops what follows, not what came before. Text the lexer rejects (an
/// unterminated string) is a syntax error.
pub fn split_statements(script: &str) -> Result<Vec<ScriptStatement<'_>>, ExecError> {
    let pieces = text::split_statements(script)?;
    let mut statements = Vec::with_capacity(pieces.len());
    // Where the previous piece started, and its line and column: each piece's position counts only the text
    // since then, so the whole script is walked once.
    let (mut cursor, mut line, mut column) = (0, 1, 1);
    for piece in pieces {
        // The pieces are slices of `script`, in order.
        let offset = piece.as_ptr() as usize - script.as_ptr() as usize;
        for c in script[cursor..offset].chars() {
            (line, column) = if c == '\n' { (line + 1, 1) } else { (line, column + 1) };
        }
        cursor = offset;
        statements.push(ScriptStatement { text: piece, line, column });
    }
    Ok(statements)
}

/// Parses a string of one or more statements.
///
/// Statements too complex for the recursive parser, binder and planner are refused first (54001, see
/// [`text::check_complexity`]), whichever way they came: the shell, the server or a library caller.
pub fn parse(sql: &str) -> Result<Vec<Parsed>, ExecError> {
    // Text the lexer rejects is left to sqlparser, whose syntax error says where.
    for statement in text::split_statements(sql).unwrap_or_default() {
        text::check_complexity(statement)?;
    }
    let dialect = PostgreSqlDialect {};
    let mut parser = Parser::new(&dialect).try_with_sql(sql).map_err(syntax_error)?;
    let mut statements = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        if parser.peek_token().token == Token::EOF {
            break;
        }
        let statement = match custom_statement(&mut parser).map_err(syntax_error)? {
            Some(custom) => custom,
            None => Parsed::Sql(Box::new(parser.parse_statement().map_err(syntax_error)?)),
        };
        statements.push(statement);
        let next = parser.peek_token().token;
        if next != Token::SemiColon && next != Token::EOF {
            return Err(ExecError::new(sqlstate::SYNTAX_ERROR, format!("syntax error at or near \"{next}\"")));
        }
    }
    Ok(statements)
}

/// Whether the tokens ahead, starting at `at`, are `NUMA NODE` or `SET ( numa_placement`.
fn placement_clause_at(parser: &Parser<'_>, at: usize) -> bool {
    let token = |n: usize| parser.peek_nth_token(n).token;
    (word_is(&token(at), "numa") && word_is(&token(at + 1), "node"))
        || (word_is(&token(at), "set") && token(at + 1) == Token::LParen && word_is(&token(at + 2), "numa_placement"))
}

fn custom_statement(parser: &mut Parser<'_>) -> Result<Option<Parsed>, ParserError> {
    let token = |n: usize| parser.peek_nth_token(n).token;
    if !(word_is(&token(0), "alter") && word_is(&token(1), "table")) {
        return Ok(None);
    }
    // The table name: `name` or `schema.name`.
    let mut after_name = 3;
    if token(3) == Token::Period {
        after_name = 5;
    }
    let table_level = placement_clause_at(parser, after_name);
    let column_level = word_is(&token(after_name), "alter") && {
        let column_at = if word_is(&token(after_name + 1), "column") { after_name + 2 } else { after_name + 1 };
        placement_clause_at(parser, column_at + 1)
    };
    if !table_level && !column_level {
        return Ok(None);
    }
    parser.next_token(); // ALTER
    parser.next_token(); // TABLE
    let table = parser.parse_object_name(false)?;
    let column = if column_level {
        parser.next_token(); // ALTER
        if word_is(&parser.peek_token().token, "column") {
            parser.next_token();
        }
        Some(parser.parse_identifier()?)
    } else {
        None
    };
    let spec = if word_is(&parser.peek_token().token, "numa") {
        parser.next_token();
        parser.next_token(); // NODE
        parser.expect_token(&Token::LParen)?;
        let nodes = parser.parse_comma_separated(|p| match p.next_token().token {
            Token::SingleQuotedString(s) | Token::Number(s, _) => Ok(s),
            other => p.expected("a node number such as '1'", sqlparser::tokenizer::TokenWithSpan::wrap(other)),
        })?;
        parser.expect_token(&Token::RParen)?;
        PlacementSpec::NumaNodes(nodes)
    } else {
        parser.next_token(); // SET
        parser.expect_token(&Token::LParen)?;
        parser.next_token(); // numa_placement
        parser.expect_token(&Token::Eq)?;
        let value = parser.parse_literal_string()?;
        parser.expect_token(&Token::RParen)?;
        PlacementSpec::Placement(value)
    };
    Ok(Some(Parsed::AlterPlacement { table, column, spec }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scripts_statements_know_where_they_start() {
        let script = "SELECT 'a;b' AS \"x;y\";  -- a comment; still one\n\
                      /* é; ü */ SELECT 'ü'\n  ;\n;\n-- only a comment;\nINSERT INTO t VALUES ($$;$$)";
        let statements = split_statements(script).unwrap();
        let found: Vec<(&str, u64, u64)> = statements.iter().map(|s| (s.text, s.line, s.column)).collect();
        assert_eq!(
            found,
            [
                ("SELECT 'a;b' AS \"x;y\"", 1, 1),
                ("-- a comment; still one\n/* é; ü */ SELECT 'ü'", 1, 25),
                ("-- only a comment;\nINSERT INTO t VALUES ($$;$$)", 5, 1),
            ]
        );
        assert_eq!(split_statements("SELECT 'unterminated").unwrap_err().sqlstate, sqlstate::SYNTAX_ERROR);
    }

    #[test]
    fn statements_too_complex_for_the_recursive_engine_are_refused_before_parsing() {
        let deep = format!("SELECT 1{}", "+1".repeat(text::OPERATORS_MAX + 1));
        assert_eq!(parse(&deep).unwrap_err().sqlstate, "54001");
        // Counted per statement: many statements of moderate size are fine.
        let moderate = format!("SELECT 1{};", "+1".repeat(text::OPERATORS_MAX / 2)).repeat(3);
        assert_eq!(parse(&moderate).unwrap().len(), 3);
    }

    #[test]
    fn a_statements_syntax_error_is_located_in_the_script() {
        let script = "SELECT 1;\nSELECT 2; SELEC 3;\n\nSELECT\n  (1 + );";
        let statements = split_statements(script).unwrap();
        let error_of = |statement: &ScriptStatement| statement.locate(parse(statement.text).unwrap_err()).message;
        // Whole, the script's parse names the same places.
        assert!(
            error_of(&statements[2]).ends_with("found: SELEC at Line: 2, Column: 11"),
            "{}",
            error_of(&statements[2])
        );
        assert!(parse("SELECT 1;\nSELECT 2; SELEC 3;").unwrap_err().message.ends_with("at Line: 2, Column: 11"));
        assert!(error_of(&statements[3]).ends_with("at Line: 5, Column: 8"), "{}", error_of(&statements[3]));
        let mended = script.replace("SELEC ", "SELECT ");
        assert!(parse(&mended).unwrap_err().message.ends_with("at Line: 5, Column: 8"));
        // Messages without a position are left as they are.
        let plain = ExecError::new(sqlstate::SYNTAX_ERROR, "syntax error at or near \"x\"");
        assert_eq!(statements[0].locate(plain.clone()).message, plain.message);
    }

    #[test]
    fn placement_statements_are_ours_and_the_rest_is_sqlparsers() {
        let parsed = parse(
            "ALTER TABLE \"TBL_0\" NUMA NODE ('1'); alter table t numa node ('0', '2'); \
             ALTER TABLE public.t SET (numa_placement = 'interleave(0-3)'); \
             ALTER TABLE t ALTER COLUMN c NUMA NODE (3); ALTER TABLE t ALTER c SET (numa_placement = 'node(1)'); \
             SELECT 'a;b'; ALTER TABLE t ADD COLUMN x int",
        )
        .unwrap();
        assert_eq!(parsed.len(), 7);
        let Parsed::AlterPlacement { table, column, spec } = &parsed[0] else { panic!() };
        assert_eq!(table.to_string(), "\"TBL_0\"");
        assert!(column.is_none());
        assert_eq!(spec, &PlacementSpec::NumaNodes(vec!["1".into()]));
        assert!(matches!(&parsed[1], Parsed::AlterPlacement { spec: PlacementSpec::NumaNodes(n), .. } if n.len() == 2));
        assert!(
            matches!(&parsed[2], Parsed::AlterPlacement { spec: PlacementSpec::Placement(p), .. } if p == "interleave(0-3)")
        );
        assert!(matches!(&parsed[3], Parsed::AlterPlacement { column: Some(c), .. } if c.value == "c"));
        assert!(matches!(
            &parsed[4],
            Parsed::AlterPlacement { column: Some(_), spec: PlacementSpec::Placement(_), .. }
        ));
        assert!(matches!(&parsed[5], Parsed::Sql(_)));
        assert!(matches!(&parsed[6], Parsed::Sql(_)));
    }

    #[test]
    fn syntax_errors_carry_42601() {
        for bad in ["SELEC 1", "SELECT 1 +", "ALTER TABLE t NUMA NODE (", "SELECT 1 SELECT 2"] {
            let error = parse(bad).unwrap_err();
            assert_eq!(error.sqlstate, "42601", "{bad}: {error}");
            assert!(error.message.starts_with("syntax error"), "{bad}: {error}");
        }
        assert!(parse("  ;; ").unwrap().is_empty());
    }
}
