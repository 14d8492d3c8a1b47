//! Calls of scalar functions: by name (`round(x, 2)`), by SQL's special syntax (`SUBSTRING(s FROM 2 FOR 3)`,
//! `TRIM(LEADING 'x' FROM s)`, `POSITION(a IN b)`, `FLOOR(x)`, `CEIL(x)`) and by operator (`x ^ y`), all resolved
//! against the function's [`Signature`](numadb_execution::function::Signature) the same way: untyped arguments
//! (quoted literals, NULL, parameters) take the parameter's type, integers widen to doubles where a double is
//! wanted, and anything else is PostgreSQL's 42883 "function … does not exist".

use numadb_execution::function::{FUNCTION_NAMES, Parameter, Returns};
use numadb_execution::{ExecError, Expr, ScalarFunction, sqlstate};
use numadb_storage::{DataType, Value};
use sqlparser::ast::{self, CeilFloorKind, DateTimeField, TrimWhereField};

use super::{Binder, Scope, unsupported};

/// The hint for a call of a function numadb does not have.
pub(super) fn functions_hint() -> String {
    format!(
        "numadb's aggregates are count, sum, min, max, avg, bool_and (every), bool_or, var_samp (variance), \
         var_pop, stddev_samp (stddev) and stddev_pop (also with DISTINCT or FILTER); its other functions are \
         coalesce, nullif, greatest, least, {}",
        FUNCTION_NAMES.join(", ")
    )
}

impl Binder<'_> {
    /// `function` applied to `args`, each brought to its parameter's type.
    pub(super) fn call_function(&self, function: ScalarFunction, args: Vec<Expr>) -> Result<Expr, ExecError> {
        let signature = function.signature();
        let no_such = || {
            let types: Vec<&str> =
                args.iter().map(|a| if self.is_untyped(a) { "unknown" } else { a.data_type().sql_name() }).collect();
            ExecError::new(
                sqlstate::UNDEFINED_FUNCTION,
                format!("function {}({}) does not exist", function.name(), types.join(", ")),
            )
            .with_hint(
                "No function matches the given name and argument types. You might need to add explicit type casts.",
            )
        };
        if !signature.takes(args.len()) {
            return Err(no_such());
        }
        let mut bound = Vec::with_capacity(args.len());
        for (position, arg) in args.iter().enumerate() {
            let parameter = signature.parameter(position).ok_or_else(no_such)?;
            let (untyped, data_type) = (self.is_untyped(arg), arg.data_type());
            let target = match parameter {
                Parameter::Numeric if untyped => DataType::Double,
                Parameter::Numeric if data_type.is_numeric() => data_type,
                Parameter::Double if untyped || data_type.is_numeric() => DataType::Double,
                Parameter::Integer if untyped => DataType::Integer,
                Parameter::Integer if data_type.is_integer() => data_type,
                Parameter::Text | Parameter::Any if untyped => DataType::Text,
                Parameter::Text if data_type == DataType::Text => DataType::Text,
                Parameter::Any => data_type,
                _ => return Err(no_such()),
            };
            bound.push(self.coerce_to(arg.clone(), target)?);
        }
        let data_type = match signature.returns {
            Returns::Type(data_type) => data_type,
            Returns::FirstArgument => bound.first().map_or(DataType::Text, Expr::data_type),
            Returns::WiderArgument => {
                if bound.iter().any(|e| e.data_type() == DataType::BigInt) {
                    DataType::BigInt
                } else {
                    DataType::Integer
                }
            }
        };
        Ok(Expr::Function { function, args: bound, data_type })
    }

    /// A call of the function named `name` (one of [`FUNCTION_NAMES`] but for the special ones the binder
    /// handles itself), or `None` when there is no function of that name.
    pub(super) fn named_function(
        &self,
        name: &str,
        arguments: &[&ast::Expr],
        scope: &Scope<'_>,
    ) -> Result<Option<Expr>, ExecError> {
        if let ("pg_typeof", [argument]) = (name, arguments) {
            // The argument's type, known when the statement is bound (PostgreSQL's regtype, shown as its name).
            let argument = self.bind_expr(argument, scope)?;
            let type_name = if self.is_untyped(&argument) { "unknown" } else { argument.data_type().sql_name() };
            return Ok(Some(Expr::literal(Value::Text(type_name.into()), DataType::Text)));
        }
        let Some(function) = ScalarFunction::from_name(name, arguments.len()) else {
            return Ok(None);
        };
        let args = arguments.iter().map(|a| self.bind_expr(a, scope)).collect::<Result<Vec<_>, _>>()?;
        self.call_function(function, args).map(Some)
    }

    /// The character an `ESCAPE` clause of LIKE or SIMILAR TO names: `\\` without one, none for `ESCAPE ''`,
    /// 22025 for a longer string.
    pub(super) fn escape_character(
        &self,
        escape: Option<&ast::Expr>,
        scope: &Scope<'_>,
    ) -> Result<Option<char>, ExecError> {
        match escape.map(|e| self.bind_expr(e, scope)).transpose()? {
            None => Ok(Some('\\')),
            Some(Expr::Literal { value: Value::Text(text), .. }) => {
                let mut chars = text.chars();
                match (chars.next(), chars.next()) {
                    (None, _) => Ok(None),
                    (Some(c), None) => Ok(Some(c)),
                    _ => Err(ExecError::new(sqlstate::INVALID_ESCAPE_SEQUENCE, "invalid escape string")
                        .with_hint("Escape string must be empty or one character.")),
                }
            }
            Some(_) => Err(unsupported("an ESCAPE that is not a string constant")),
        }
    }

    /// The functions SQL writes with keywords: `FLOOR(x)`, `CEIL(x)`, `SUBSTRING(s FROM a FOR b)`,
    /// `POSITION(a IN b)`, `TRIM([BOTH|LEADING|TRAILING] [chars] FROM s)`; `None` for any other expression.
    pub(super) fn special_function(&self, expr: &ast::Expr, scope: &Scope<'_>) -> Result<Option<Expr>, ExecError> {
        use ast::Expr as E;
        let bind = |e: &ast::Expr| self.bind_expr(e, scope);
        let (function, args) = match expr {
            E::Floor { expr: inner, field } | E::Ceil { expr: inner, field } => {
                if !matches!(field, CeilFloorKind::DateTimeField(DateTimeField::NoDateTime)) {
                    return Err(unsupported(&format!("the expression {expr}")));
                }
                let function =
                    if matches!(expr, E::Floor { .. }) { ScalarFunction::Floor } else { ScalarFunction::Ceil };
                (function, vec![bind(inner)?])
            }
            E::Substring { expr: inner, substring_from, substring_for, .. } => {
                let start = match substring_from {
                    Some(start) => bind(start)?,
                    // `SUBSTRING(s FOR n)`: from the first character.
                    None => Expr::literal(Value::Int(1), DataType::Integer),
                };
                if start.data_type() == DataType::Text && !self.is_untyped(&start) {
                    return Err(unsupported("SUBSTRING with a regular expression"));
                }
                let mut args = vec![bind(inner)?, start];
                if let Some(count) = substring_for {
                    args.push(bind(count)?);
                }
                (ScalarFunction::Substring, args)
            }
            E::Position { expr: needle, r#in: haystack } => {
                (ScalarFunction::Strpos, vec![bind(haystack)?, bind(needle)?])
            }
            E::Trim { trim_where, trim_what, expr: inner, trim_characters } => {
                let function = match trim_where {
                    None | Some(TrimWhereField::Both) => ScalarFunction::Btrim,
                    Some(TrimWhereField::Leading) => ScalarFunction::Ltrim,
                    Some(TrimWhereField::Trailing) => ScalarFunction::Rtrim,
                };
                let mut args = vec![bind(inner)?];
                match (trim_what, trim_characters.as_deref()) {
                    (Some(characters), None) => args.push(bind(characters)?),
                    (None, Some([characters])) => args.push(bind(characters)?),
                    (None, None) => {}
                    _ => return Err(unsupported(&format!("the expression {expr}"))),
                }
                (function, args)
            }
            // `s SIMILAR TO p` is a regular expression matching all of `s`, translated from the pattern.
            E::SimilarTo { negated, expr: inner, pattern, escape_char } => {
                let escape = self.escape_character(escape_char.as_deref(), scope)?;
                let Expr::Literal { value: Value::Text(pattern), .. } = bind(pattern)? else {
                    return Err(unsupported("SIMILAR TO a pattern that is not a string constant"));
                };
                let regex = Expr::literal(Value::text(&similar_to_regex(&pattern, escape)), DataType::Text);
                let matches = self.call_function(ScalarFunction::RegexpLike, vec![bind(inner)?, regex])?;
                return Ok(Some(if *negated { Expr::Not(Box::new(matches)) } else { matches }));
            }
            _ => return Ok(None),
        };
        self.call_function(function, args).map(Some)
    }
}

/// A `SIMILAR TO` pattern as a regular expression over the whole string, as PostgreSQL's `similar_to_escape`
/// makes it: `%` is `.*`, `_` is `.`, `.`, `^` and `$` are themselves, the escape character makes the next one
/// literal, and `| * + ? { } ( ) [ ]` keep their regular-expression meaning.
fn similar_to_regex(pattern: &str, escape: Option<char>) -> String {
    let mut out = String::from("^(?:");
    let (mut escaping, mut in_brackets) = (false, false);
    for c in pattern.chars() {
        if escaping {
            out.push_str(&regex_escape(c));
            escaping = false;
        } else if Some(c) == escape {
            escaping = true;
        } else if in_brackets {
            out.push(c);
            in_brackets = c != ']';
        } else {
            match c {
                '%' => out.push_str(".*"),
                '_' => out.push('.'),
                '[' => {
                    in_brackets = true;
                    out.push('[');
                }
                '.' | '^' | '$' | '\\' => out.push_str(&regex_escape(c)),
                other => out.push(other),
            }
        }
    }
    if escaping {
        out.push_str(&regex_escape(escape.unwrap_or('\\')));
    }
    out.push_str(")$");
    out
}

fn regex_escape(c: char) -> String {
    let mut buffer = [0u8; 4];
    regex_syntax_escape(c.encode_utf8(&mut buffer))
}

/// `text` with every character that means something in a regular expression escaped.
fn regex_syntax_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similar_to_patterns_become_anchored_regular_expressions() {
        assert_eq!(similar_to_regex("a%b_c", Some('\\')), "^(?:a.*b.c)$");
        assert_eq!(similar_to_regex("(a|b)+.x", Some('\\')), "^(?:(a|b)+\\.x)$");
        assert_eq!(similar_to_regex("a\\%b", Some('\\')), "^(?:a%b)$");
        assert_eq!(similar_to_regex("a#_b", Some('#')), "^(?:a_b)$");
        assert_eq!(similar_to_regex("[%_]x", Some('\\')), "^(?:[%_]x)$", "inside brackets % and _ are themselves");
        assert_eq!(similar_to_regex("$5^", None), "^(?:\\$5\\^)$");
    }
}
