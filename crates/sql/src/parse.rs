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
use sqlparser::tokenizer::{Location, Token, Tokenizer};

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
    /// Its text, from just after the previous semicolon to its own.
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

/// The statements of a script, each as its own text with its terminating semicolon, in order; pieces holding
/// only whitespace and comments are left out. A shell runs them one at a time, as psql runs a file: each
/// result (and its time) shows as soon as its statement ends, and an error stops what follows, not what
/// came before. Split at the tokenizer's semicolons, so ones inside strings, quoted names or comments do not
/// count. Text the tokenizer rejects (an unterminated string) is a syntax error.
pub fn split_statements(script: &str) -> Result<Vec<ScriptStatement<'_>>, ExecError> {
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, script)
        .tokenize_with_location()
        .map_err(|error| ExecError::new(sqlstate::SYNTAX_ERROR, format!("syntax error: {error}")))?;
    // Byte offset of the start of every line: the tokenizer's locations are (line, column), both from 1,
    // columns counted in characters.
    let line_starts: Vec<usize> = std::iter::once(0).chain(script.match_indices('\n').map(|(at, _)| at + 1)).collect();
    let offset_after = |location: Location| -> usize {
        let line_start = line_starts[(location.line as usize).saturating_sub(1).min(line_starts.len() - 1)];
        let line = &script[line_start..];
        // The semicolon's column: one character past it is where the next piece starts.
        let chars = location.column as usize;
        line_start + line.char_indices().nth(chars).map_or(line.len(), |(at, _)| at)
    };
    let mut statements = Vec::new();
    let (mut start, mut has_content) = (0, false);
    let mut begins = Location { line: 1, column: 1 };
    for token in &tokens {
        match token.token {
            Token::SemiColon => {
                let end = offset_after(token.span.start);
                if has_content {
                    statements.push(ScriptStatement {
                        text: &script[start..end],
                        line: begins.line,
                        column: begins.column,
                    });
                }
                (start, has_content) = (end, false);
                begins = Location { line: token.span.start.line, column: token.span.start.column + 1 };
            }
            Token::Whitespace(_) => {}
            _ => has_content = true,
        }
    }
    if has_content {
        statements.push(ScriptStatement { text: &script[start..], line: begins.line, column: begins.column });
    }
    Ok(statements)
}

/// Parses a string of one or more statements.
pub fn parse(sql: &str) -> Result<Vec<Parsed>, ExecError> {
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
    fn scripts_split_at_semicolons_outside_strings_names_and_comments() {
        let script = "SELECT 'a;b' AS \"x;y\";  -- a comment; still one\n\
                      /* é; ü */ SELECT 'ü'\n  ;\n;\n-- only a comment;\nINSERT INTO t VALUES ($$;$$)";
        let statements = split_statements(script).unwrap();
        let pieces: Vec<&str> = statements.iter().map(|statement| statement.text).collect();
        let starts: Vec<(u64, u64)> = statements.iter().map(|statement| (statement.line, statement.column)).collect();
        assert_eq!(starts, [(1, 1), (1, 23), (4, 2)]);
        assert_eq!(
            pieces,
            [
                "SELECT 'a;b' AS \"x;y\";",
                "  -- a comment; still one\n/* é; ü */ SELECT 'ü'\n  ;",
                "\n-- only a comment;\nINSERT INTO t VALUES ($$;$$)",
            ]
        );
        // Every piece parses to exactly one statement, and together they are the script's statements.
        let whole = parse(script).unwrap().len();
        assert_eq!(pieces.iter().map(|piece| parse(piece).unwrap().len()).collect::<Vec<_>>(), [1, 1, 1]);
        assert_eq!(whole, 3);
        assert!(split_statements("  ; -- nothing\n ;").unwrap().is_empty());
        assert_eq!(split_statements("SELECT 'unterminated").unwrap_err().sqlstate, sqlstate::SYNTAX_ERROR);
    }

    #[test]
    fn a_statements_syntax_error_is_located_in_the_script() {
        let script = "SELECT 1;\nSELECT 2; SELEC 3;\n\nSELECT\n  FROM;";
        let statements = split_statements(script).unwrap();
        let error_of = |statement: &ScriptStatement| statement.locate(parse(statement.text).unwrap_err()).message;
        // Whole, the script's parse names the same places.
        assert!(
            error_of(&statements[2]).ends_with("found: SELEC at Line: 2, Column: 11"),
            "{}",
            error_of(&statements[2])
        );
        assert!(parse("SELECT 1;\nSELECT 2; SELEC 3;").unwrap_err().message.ends_with("at Line: 2, Column: 11"));
        assert!(error_of(&statements[3]).ends_with("at Line: 5, Column: 7"), "{}", error_of(&statements[3]));
        let mended = script.replace("SELEC ", "SELECT ");
        assert!(parse(&mended).unwrap_err().message.ends_with("at Line: 5, Column: 7"));
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
