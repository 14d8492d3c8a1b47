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
