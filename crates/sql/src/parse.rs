//! Parsing: numadb's own statements first, everything else by sqlparser with the PostgreSQL dialect.
//!
//! Our statements are the placement ones:
//! - `ALTER TABLE t NUMA NODE ('1')` (SAP HANA's syntax; a list of nodes spreads partitions round-robin);
//! - `ALTER TABLE t SET (numa_placement = 'interleave(0-3)')`;
//! - the same two per column: `ALTER TABLE t ALTER [COLUMN] c NUMA NODE (...)` / `... SET (numa_placement = ...)`.
//!
//! Every other `ALTER TABLE` (ADD, DROP, RENAME) is sqlparser's, run by `database/alter.rs`.
//!
//! Statements are split by sqlparser's tokenizer, so semicolons inside strings or quoted names are not
//! separators.
//!
//! PostgreSQL's `BETWEEN SYMMETRIC` (and the default it names, `BETWEEN ASYMMETRIC`) is not in sqlparser's
//! grammar. Between lexing and parsing, the keyword is taken out of the tokens and the lower bound wrapped in a
//! marker call ([`SYMMETRIC_MARKER`]); after parsing, each marked `x BETWEEN a AND b` becomes what PostgreSQL's
//! own parser makes of it, `x BETWEEN a AND b OR x BETWEEN b AND a` (negated as a whole for `NOT BETWEEN`).

use std::ops::ControlFlow;

use numadb_execution::{ExecError, sqlstate};
use sqlparser::ast::{
    BinaryOperator, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, ObjectName, Statement, UnaryOperator,
};
use sqlparser::dialect::PostgreSqlDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};

use crate::bind::is_comparison;
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

/// Levels of nesting (parentheses, subqueries, NOT, CASE within CASE) the parser takes: sqlparser's default of 50
/// refused `(a = 23 OR (a = 22 OR …))` at 23 levels, which PostgreSQL and DuckDB run. Deeper is PostgreSQL's
/// "stack depth limit exceeded" (54001); the statement threads' stacks ([`text::STATEMENT_STACK_BYTES`]) hold
/// this many levels with room to spare, as they hold [`text::OPERATORS_MAX`] operators.
pub const PARSER_NESTING_MAX: usize = 1000;

/// A syntax error in PostgreSQL's words (a statement nested too deeply: 54001).
pub fn syntax_error(error: ParserError) -> ExecError {
    if matches!(error, ParserError::RecursionLimitExceeded) {
        return ExecError::new(
            sqlstate::STATEMENT_TOO_COMPLEX,
            format!("stack depth limit exceeded: the statement nests more than {PARSER_NESTING_MAX} levels deep"),
        )
        .with_hint("Split the statement, or nest its expressions less deeply.");
    }
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
    let tokens = Tokenizer::new(&dialect, sql)
        .with_unescape(true)
        .tokenize_with_location()
        .map_err(|e| syntax_error(e.into()))?;
    let (tokens, symmetric) = mark_symmetric_bounds(drop_trim_from_without_characters(tokens));
    let (tokens, fetch_counts) = mark_fetch_counts(tokens).map_err(syntax_error)?;
    let mut parser = Parser::new(&dialect).with_recursion_limit(PARSER_NESTING_MAX).with_tokens_with_locations(tokens);
    let mut statements = Vec::new();
    loop {
        while parser.consume_token(&Token::SemiColon) {}
        if parser.peek_token().token == Token::EOF {
            break;
        }
        let statement = match custom_statement(&mut parser).map_err(syntax_error)? {
            Some(custom) => custom,
            None => {
                let mut statement = parser.parse_statement().map_err(syntax_error)?;
                check_postgresql_grammar(&statement)?;
                if symmetric {
                    expand_symmetric_betweens(&mut statement);
                }
                parenthesize_double_minus(&mut statement);
                if !fetch_counts.is_empty() {
                    restore_fetch_counts(&mut statement, &fetch_counts);
                }
                Parsed::Sql(Box::new(statement))
            }
        };
        statements.push(statement);
        let next = parser.peek_token().token;
        if next != Token::SemiColon && next != Token::EOF {
            return Err(ExecError::new(sqlstate::SYNTAX_ERROR, format!("syntax error at or near \"{next}\"")));
        }
    }
    Ok(statements)
}

/// The name of the placeholder a `FETCH FIRST` count that is not a literal stands as while the statement is parsed,
/// followed by the count's number: the lexer makes no placeholder with a space.
const FETCH_COUNT_MARKER: &str = "$numadb fetch count ";

/// `tokens` with each `FETCH FIRST|NEXT` count that is not a literal as one [`FETCH_COUNT_MARKER`] placeholder, and
/// those counts, parsed. PostgreSQL's count is a `c_expr` (a parenthesized expression, a column, a function call)
/// or a signed number; sqlparser takes only a literal there, and a column was its syntax error, not PostgreSQL's
/// 42P10. A `FETCH` of a cursor (`FETCH NEXT FROM c`) is left as it is.
fn mark_fetch_counts(tokens: Vec<TokenWithSpan>) -> Result<(Vec<TokenWithSpan>, Vec<Expr>), ParserError> {
    let significant: Vec<usize> =
        (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    let token_at = |n: usize| significant.get(n).map(|&i| &tokens[i].token);
    // The significant token that closes the group opening at `open`.
    let group_end = |open: usize| {
        let mut depth = 0usize;
        (open..significant.len()).find(|&m| {
            match token_at(m) {
                Some(Token::LParen) => depth += 1,
                Some(Token::RParen) => depth = depth.saturating_sub(1),
                _ => {}
            }
            depth == 0
        })
    };
    // Where each count is: its first and last significant tokens.
    let mut counts: Vec<(usize, usize)> = Vec::new();
    for n in 0..significant.len() {
        if !token_at(n).is_some_and(|t| word_is(t, "fetch"))
            || !token_at(n + 1).is_some_and(|t| word_is(t, "first") || word_is(t, "next"))
        {
            continue;
        }
        let first = n + 2;
        let last = match token_at(first) {
            Some(Token::LParen) => group_end(first),
            Some(Token::Plus | Token::Minus) if matches!(token_at(first + 1), Some(Token::Number(..))) => {
                Some(first + 1)
            }
            Some(Token::Word(w))
                if w.quote_style.is_some()
                    || !["row", "rows", "from", "in", "only", "with"]
                        .iter()
                        .any(|k| w.value.eq_ignore_ascii_case(k)) =>
            {
                // A column (`a.b`) or a function call.
                let mut last = first;
                while token_at(last + 1) == Some(&Token::Period) && matches!(token_at(last + 2), Some(Token::Word(_))) {
                    last += 2;
                }
                if token_at(last + 1) == Some(&Token::LParen) { group_end(last + 1) } else { Some(last) }
            }
            _ => None,
        };
        // A count inside another's (`FETCH FIRST (SELECT … FETCH FIRST (1) ROW ONLY) ROWS ONLY`) stays in the
        // outer one's tokens, whose parse refuses it.
        if let Some(last) = last
            && counts.last().is_none_or(|&(_, outer_last)| first > outer_last)
        {
            counts.push((first, last));
        }
    }
    if counts.is_empty() {
        return Ok((tokens, Vec::new()));
    }
    let dialect = PostgreSqlDialect {};
    let mut exprs = Vec::with_capacity(counts.len());
    let mut out = Vec::with_capacity(tokens.len());
    let mut next = 0;
    for (number, &(first, last)) in counts.iter().enumerate() {
        let (start, end) = (significant[first], significant[last]);
        out.extend_from_slice(&tokens[next..start]);
        let mut parser = Parser::new(&dialect)
            .with_recursion_limit(PARSER_NESTING_MAX)
            .with_tokens_with_locations(tokens[start..=end].to_vec());
        exprs.push(parser.parse_expr()?);
        if parser.peek_token().token != Token::EOF {
            return Err(ParserError::ParserError(format!("syntax error at or near \"{}\"", parser.peek_token().token)));
        }
        out.push(TokenWithSpan::new(Token::Placeholder(format!("{FETCH_COUNT_MARKER}{number}")), tokens[start].span));
        next = end + 1;
    }
    out.extend_from_slice(&tokens[next..]);
    Ok((out, exprs))
}

/// Each [`FETCH_COUNT_MARKER`] placeholder in `statement` as the count it stands for.
fn restore_fetch_counts(statement: &mut Statement, counts: &[Expr]) {
    let _ = sqlparser::ast::visit_expressions_mut(statement, |expr| {
        if let Expr::Value(value) = expr
            && let sqlparser::ast::Value::Placeholder(name) = &value.value
            && let Some(count) = name.strip_prefix(FETCH_COUNT_MARKER).and_then(|n| n.parse::<usize>().ok())
            && let Some(count) = counts.get(count)
        {
            *expr = count.clone();
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The call a `BETWEEN SYMMETRIC`'s lower bound is wrapped in between lexing and parsing: a name no function has.
pub const SYMMETRIC_MARKER: &str = "__numadb_between_symmetric";

/// `tokens` without the `FROM` of `TRIM([LEADING | TRAILING | BOTH] FROM x)`, which PostgreSQL takes as a trim of
/// spaces: sqlparser wants characters before `FROM`, and parses `TRIM(LEADING x)` as that same trim.
fn drop_trim_from_without_characters(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> =
        (0..tokens.len()).filter(|&i| !matches!(tokens[i].token, Token::Whitespace(_))).collect();
    let token_at = |n: usize| significant.get(n).map(|&i| &tokens[i].token);
    let mut froms = Vec::new();
    for n in 0..significant.len() {
        if !token_at(n).is_some_and(|t| word_is(t, "trim")) || token_at(n + 1) != Some(&Token::LParen) {
            continue;
        }
        let side = token_at(n + 2).is_some_and(|t| ["leading", "trailing", "both"].iter().any(|w| word_is(t, w)));
        let from = n + 2 + usize::from(side);
        if token_at(from).is_some_and(|t| word_is(t, "from")) {
            froms.push(significant[from]);
        }
    }
    for &at in froms.iter().rev() {
        tokens.remove(at);
    }
    tokens
}

/// `tokens` without the `SYMMETRIC` and `ASYMMETRIC` that follow `BETWEEN`, the lower bound after each `SYMMETRIC`
/// wrapped in a [`SYMMETRIC_MARKER`] call; and whether there was one. The bound ends at the first `AND` outside
/// parentheses, brackets and `CASE … END` (PostgreSQL's bound is a `b_expr`, which has no bare `AND`). A bound
/// with no such `AND` is left as written, for the parser to report; `BETWEEN symmetric AND` is left too (the word alone is [`RESERVED_WORDS`]'s 42601).
fn mark_symmetric_bounds(tokens: Vec<TokenWithSpan>) -> (Vec<TokenWithSpan>, bool) {
    let is_between = |t: &TokenWithSpan| matches!(&t.token, Token::Word(w) if w.keyword == Keyword::BETWEEN);
    let modifier_at = |at: usize| {
        let next = at + tokens[at..].iter().position(|t| !matches!(t.token, Token::Whitespace(_)))?;
        let symmetric = word_is(&tokens[next].token, "symmetric");
        (symmetric || word_is(&tokens[next].token, "asymmetric")).then_some((next, symmetric))
    };
    // Most statements have neither: they pass untouched.
    if !(0..tokens.len()).any(|i| is_between(&tokens[i]) && modifier_at(i + 1).is_some()) {
        return (tokens, false);
    }
    let mut out = Vec::with_capacity(tokens.len() + 4);
    let mut marked = false;
    // Where a marked bound ends (the index of its `AND`), innermost last: a bound may hold another BETWEEN.
    let mut closes: Vec<(usize, TokenWithSpan)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        while let Some((_, close)) = closes.pop_if(|(at, _)| *at == i) {
            out.push(close);
        }
        out.push(tokens[i].clone());
        i += 1;
        if !is_between(&tokens[i - 1]) {
            continue;
        }
        let Some((modifier, symmetric)) = modifier_at(i) else { continue };
        if !symmetric {
            i = modifier + 1;
            continue;
        }
        let Some(and) = bound_end(&tokens[modifier + 1..]).map(|n| modifier + 1 + n) else { continue };
        if tokens[modifier + 1..and].iter().all(|t| matches!(t.token, Token::Whitespace(_))) {
            // `BETWEEN symmetric AND …`: the word alone, which the parser takes for a column and PostgreSQL refuses.
            continue;
        }
        let at = |token: Token| TokenWithSpan::new(token, tokens[modifier].span);
        out.push(at(Token::Whitespace(sqlparser::tokenizer::Whitespace::Space)));
        out.push(at(Token::make_word(SYMMETRIC_MARKER, None)));
        out.push(at(Token::LParen));
        closes.push((and, at(Token::RParen)));
        marked = true;
        i = modifier + 1;
    }
    (out, marked)
}

/// Where in `tokens` the `AND` that ends a `BETWEEN`'s lower bound is.
fn bound_end(tokens: &[TokenWithSpan]) -> Option<usize> {
    let mut depth = 0usize;
    for (n, token) in tokens.iter().enumerate() {
        match &token.token {
            Token::LParen | Token::LBracket => depth += 1,
            Token::RParen | Token::RBracket => depth = depth.checked_sub(1)?,
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::CASE => depth += 1,
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::END => depth = depth.checked_sub(1)?,
            Token::Word(w) if w.quote_style.is_none() && w.keyword == Keyword::AND && depth == 0 => return Some(n),
            Token::SemiColon | Token::EOF => return None,
            _ => {}
        }
    }
    None
}

/// Each `x [NOT] BETWEEN marker(a) AND b` in `statement` as `[NOT] (x BETWEEN a AND b OR x BETWEEN b AND a)`.
fn expand_symmetric_betweens(statement: &mut Statement) {
    let _ = sqlparser::ast::visit_expressions_mut(statement, |expr| {
        if let Expr::Between { expr: tested, negated, low, high } = expr
            && let Some(bound) = symmetric_bound(low)
        {
            let between = |low: Expr, high: Expr| Expr::Between {
                expr: tested.clone(),
                negated: false,
                low: Box::new(low),
                high: Box::new(high),
            };
            let either = Expr::Nested(Box::new(Expr::BinaryOp {
                left: Box::new(between(bound.clone(), (**high).clone())),
                op: BinaryOperator::Or,
                right: Box::new(between((**high).clone(), bound)),
            }));
            *expr = if *negated {
                Expr::UnaryOp { op: sqlparser::ast::UnaryOperator::Not, expr: Box::new(either) }
            } else {
                either
            };
        }
        ControlFlow::<()>::Continue(())
    });
}

/// PostgreSQL's reserved words that sqlparser takes for a column's name when what follows them does not parse
/// (`SELECT CASE WHEN;` reads a column `case`): unquoted, none of them is a name in PostgreSQL. Not here: those
/// that are values there (`user`, `current_date`), and those sqlparser gives as a word where one is a value
/// (`DEFAULT` in VALUES, `on` and `all` in SET and EXPLAIN options).
const RESERVED_WORDS: &[&str] = &[
    "and",
    "any",
    "array",
    "as",
    "asc",
    "asymmetric",
    "both",
    "case",
    "cast",
    "check",
    "collate",
    "column",
    "constraint",
    "create",
    "deferrable",
    "desc",
    "distinct",
    "do",
    "else",
    "end",
    "except",
    "fetch",
    "for",
    "foreign",
    "from",
    "grant",
    "group",
    "having",
    "in",
    "initially",
    "intersect",
    "into",
    "lateral",
    "leading",
    "limit",
    "not",
    "offset",
    "only",
    "or",
    "order",
    "placing",
    "primary",
    "references",
    "returning",
    "select",
    "some",
    "symmetric",
    "table",
    "then",
    "to",
    "trailing",
    "union",
    "unique",
    "using",
    "variadic",
    "when",
    "where",
    "window",
    "with",
];

/// What sqlparser accepts and PostgreSQL's grammar does not, as PostgreSQL's syntax error (42601):
/// - a comparison that is an operand of another without parentheses (`a > 0 > b`, `a = b = c`): PostgreSQL's
///   comparison operators do not associate;
/// - an unquoted reserved word read as a column ([`RESERVED_WORDS`]), what is left of an incomplete `CASE`.
fn check_postgresql_grammar(statement: &Statement) -> Result<(), ExecError> {
    let reserved = |word: &Ident| {
        let folded = word.value.to_lowercase();
        (word.quote_style.is_none() && RESERVED_WORDS.contains(&folded.as_str())).then(|| {
            ExecError::new(sqlstate::SYNTAX_ERROR, format!("syntax error at or near \"{}\"", word.value)).with_hint(
                format!("{folded} is a reserved word: the expression it starts is incomplete, or a name spelled so must be double-quoted."),
            )
        })
    };
    let flow = sqlparser::ast::visit_expressions(statement, |expr| {
        let error = match expr {
            Expr::BinaryOp { left, op, right } if is_comparison(op) => {
                let chained = |operand: &Expr| matches!(operand, Expr::BinaryOp { op, .. } if is_comparison(op));
                (chained(left) || chained(right)).then(|| {
                    ExecError::new(sqlstate::SYNTAX_ERROR, format!("syntax error at or near \"{op}\"")).with_hint(
                        "Comparison operators do not chain: parenthesize one comparison, or join them with AND.",
                    )
                })
            }
            Expr::Identifier(word) => reserved(word),
            // After a dot any word is a name: `t.end` is column `end`.
            Expr::CompoundIdentifier(parts) => parts.first().and_then(reserved),
            _ => None,
        };
        match error {
            Some(error) => ControlFlow::Break(error),
            None => ControlFlow::Continue(()),
        }
    });
    match flow {
        ControlFlow::Break(error) => Err(error),
        ControlFlow::Continue(()) => Ok(()),
    }
}

/// Each `- -x` in `statement` as `-(-x)`. sqlparser writes the first as `--x`, which is a comment, and the binder
/// reads some clauses back from their text (the names a join's inputs must produce, a decorrelated subquery's
/// condition): `SELECT - - t.k FROM t, u` lost its column.
fn parenthesize_double_minus(statement: &mut Statement) {
    let _ = sqlparser::ast::visit_expressions_mut(statement, |expr| {
        if let Expr::UnaryOp { op: UnaryOperator::Minus, expr: operand } = expr
            && operand.to_string().starts_with('-')
        {
            let inner = std::mem::replace(operand.as_mut(), Expr::Value(sqlparser::ast::Value::Null.into()));
            **operand = Expr::Nested(Box::new(inner));
        }
        ControlFlow::<()>::Continue(())
    });
}

/// The argument of a [`SYMMETRIC_MARKER`] call.
fn symmetric_bound(expr: &Expr) -> Option<Expr> {
    let Expr::Function(call) = expr else { return None };
    if call.name.to_string() != SYMMETRIC_MARKER {
        return None;
    }
    let FunctionArguments::List(list) = &call.args else { return None };
    match list.args.as_slice() {
        [FunctionArg::Unnamed(FunctionArgExpr::Expr(bound))] => Some(bound.clone()),
        _ => None,
    }
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
    fn nesting_is_taken_as_deep_as_postgresql_takes_it_and_deeper_is_54001() {
        // On a statement thread's stack, as every caller runs statements.
        let run = std::thread::Builder::new().stack_size(text::STATEMENT_STACK_BYTES).spawn(nesting_checks);
        run.unwrap().join().unwrap();
    }

    fn nesting_checks() {
        let nested = |levels: usize| format!("SELECT {}1{}", "(".repeat(levels), ")".repeat(levels));
        assert_eq!(parse(&nested(PARSER_NESTING_MAX / 2)).unwrap().len(), 1);
        let ors = (0..100).fold("a = 0".to_string(), |inner, i| format!("a = {} OR ({inner})", i + 1));
        assert_eq!(parse(&format!("SELECT 1 FROM t WHERE {ors}")).unwrap().len(), 1);
        let nots = format!("SELECT {}true{}", "NOT (".repeat(100), ")".repeat(100));
        assert_eq!(parse(&nots).unwrap().len(), 1);
        assert_eq!(parse(&nested(PARSER_NESTING_MAX * 2)).unwrap_err().sqlstate, "54001");
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
