//! Scalar functions: PostgreSQL's built-in numeric and string functions, evaluated row by row.
//!
//! Each function is known here by its names, the arguments it takes ([`ScalarFunction::signature`]) and its
//! evaluation, so that the binder resolves a call from nothing but its name and argument count and adding a
//! function touches one file. Semantics follow PostgreSQL, including its errors (`ln(0)` is 2201E, `repeat` past
//! 1 GiB is 54000), with one deliberate difference: numadb's NUMERIC holds whole numbers only, so a decimal
//! literal is a double, and `round` of a double rounds half away from zero, as PostgreSQL's `round(numeric)` does
//! (`round(2.5)` is 3 in both), not half to even as its `round(double precision)` does, and `round(x, places)`
//! rounds the double's 15 significant digits as PostgreSQL's `round(x::numeric, places)` does. Text functions
//! count characters, not bytes; `lower`/`upper`/`initcap` map every letter one character for one, as
//! PostgreSQL's builtin C.UTF-8 locale does (whose code-point order numadb's text comparisons follow, and which
//! DuckDB's case mapping agrees with). Regular expressions are the
//! `regex` crate's (linear time, so no pattern can make a scan hang), compiled once per worker thread and pattern.

use std::sync::Arc;

use numadb_storage::{DataType, Value};

use crate::error::{ExecError, sqlstate};
use crate::expr::{BinaryOp, Expr, checked_int, compare};

/// The largest text a function may build (PostgreSQL's limit on one value, 1 GiB).
const TEXT_BYTES_MAX: usize = 1 << 30;

/// Scalar functions, with PostgreSQL's NULL rules: all but `coalesce`, `greatest`, `least`, `concat` and
/// `concat_ws` return NULL when an argument is NULL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScalarFunction {
    /// `coalesce(a, …)`: the first argument that is not NULL (later ones are not evaluated).
    Coalesce,
    /// `greatest(a, …)`: the largest argument, NULLs ignored (NULL only when all are).
    Greatest,
    /// `least(a, …)`: the smallest argument, NULLs ignored.
    Least,
    /// `abs(x)`; `abs` of the smallest integer is out of range.
    Abs,
    /// `lower(text)`.
    Lower,
    /// `upper(text)`.
    Upper,
    /// `length(text)`, `char_length`: characters, not bytes.
    Length,
    /// `round(x [, places])`: half away from zero; negative places round left of the point.
    Round,
    /// `trunc(x [, places])`: toward zero.
    Trunc,
    /// `floor(x)`.
    Floor,
    /// `ceil(x)`, `ceiling(x)`.
    Ceil,
    /// `sign(x)`: -1, 0 or 1.
    Sign,
    /// `sqrt(x)`; negative `x` is 2201F.
    Sqrt,
    /// `cbrt(x)`.
    Cbrt,
    /// `exp(x)`; a result beyond a double is 22003.
    Exp,
    /// `ln(x)`; zero or negative `x` is 2201E.
    Ln,
    /// `log(x)`, `log10(x)`: base 10.
    Log10,
    /// `log(b, x)`: base `b`.
    Log,
    /// `power(x, y)`, `pow`, `x ^ y`.
    Power,
    /// `pi()`.
    Pi,
    /// `random()`: a uniform double in [0, 1), a new one per call: the one volatile function.
    Random,
    /// `substring(s FROM start [FOR count])`, `substr(s, start [, count])`.
    Substring,
    /// `strpos(s, sub)`, `position(sub IN s)`: 1-based character position, 0 when absent.
    Strpos,
    /// `replace(s, from, to)`.
    Replace,
    /// `btrim(s [, chars])`, `trim([BOTH] [chars FROM] s)`.
    Btrim,
    /// `ltrim(s [, chars])`, `trim(LEADING …)`.
    Ltrim,
    /// `rtrim(s [, chars])`, `trim(TRAILING …)`.
    Rtrim,
    /// `concat(a, …)`: the text of every argument that is not NULL.
    Concat,
    /// `concat_ws(separator, a, …)`: like `concat` with a separator; NULL only when the separator is.
    ConcatWs,
    /// `left(s, n)`: the first `n` characters, or all but the last `-n`.
    Left,
    /// `right(s, n)`: the last `n` characters, or all but the first `-n`.
    Right,
    /// `repeat(s, n)`.
    Repeat,
    /// `reverse(s)`.
    Reverse,
    /// `starts_with(s, prefix)`.
    StartsWith,
    /// `lpad(s, length [, fill])`: filled on the left (or cut) to `length` characters.
    Lpad,
    /// `rpad(s, length [, fill])`: filled on the right (or cut) to `length` characters.
    Rpad,
    /// `ascii(s)`: the code point of the first character (0 for the empty string).
    Ascii,
    /// `split_part(s, delimiter, n)`: the `n`-th field (from the end when negative).
    SplitPart,
    /// `regexp_like(s, pattern [, flags])`, `s ~ pattern`, `s ~* pattern` (flag `i`): whether the regular
    /// expression matches somewhere in `s`.
    RegexpLike,
    /// `regexp_replace(s, pattern, replacement [, flags])`: the first match replaced (every one with flag `g`);
    /// `\1`…`\9` and `\&` in the replacement are the groups and the whole match, as in PostgreSQL.
    RegexpReplace,
    /// `regexp_count(s, pattern [, start [, flags]])`: how many times the pattern matches (without overlaps).
    RegexpCount,
    /// `regexp_substr(s, pattern [, start [, n [, flags [, subexpr]]]])`: the `n`th match from character `start`
    /// (or its `subexpr`th group), NULL for none.
    RegexpSubstr,
    /// `regexp_instr(s, pattern [, start [, n [, endoption [, flags [, subexpr]]]]])`: the character position of
    /// the `n`th match (or its group), or just past it with `endoption` 1; 0 for none.
    RegexpInstr,
    /// `octet_length(s)`: bytes (UTF-8).
    OctetLength,
    /// `bit_length(s)`: bits.
    BitLength,
    /// `initcap(s)`: each word's first letter upper case, the rest lower case (words: runs of letters and
    /// digits).
    Initcap,
    /// `translate(s, from, to)`: each character of `from` in `s` replaced by the one at its place in `to`, or
    /// removed where `to` is shorter.
    Translate,
    /// `chr(n)`: the character of code point `n` (0 and code points past Unicode are 54000).
    Chr,
    /// `md5(s)`: the MD5 digest of the text's bytes, in hex.
    Md5,
    /// `to_hex(n)`: hexadecimal, negative numbers in two's complement of their type's width.
    ToHex,
    /// `gcd(a, b)`: the greatest common divisor (never negative).
    Gcd,
    /// `lcm(a, b)`: the least common multiple (never negative).
    Lcm,
    /// `width_bucket(x, low, high, count)`: which of `count` equal buckets between `low` and `high` holds `x`
    /// (0 below, `count + 1` above).
    WidthBucket,
    /// `a & b` (`int8and(a, b)`).
    BitAnd,
    /// `a | b` (`int8or(a, b)`).
    BitOr,
    /// `a # b` (`int8xor(a, b)`).
    BitXor,
    /// `~a` (`int8not(a)`).
    BitNot,
    /// `a << n` (`int8shl(a, n)`): `n` taken modulo the width of `a`'s type, as PostgreSQL's C shift does on x86.
    ShiftLeft,
    /// `a >> n` (`int8shr(a, n)`): arithmetic, `n` modulo the width as for [`ScalarFunction::ShiftLeft`].
    ShiftRight,
    /// `int2(x)`, and what `x::smallint` binds to: `x` as an integer (a double rounded half to even) that must fit
    /// in 16 bits. numadb has no 16-bit type, so the result is an integer, checked.
    Int2,
    /// [`SINGLE_ROW`]`(value, rows)`: what a correlated scalar subquery that does not aggregate becomes once it is
    /// a join with its rows grouped by key (`rows` a group's count, NULL where no group matched; `value` computed
    /// from the group's one row): NULL for no row, 21000 for several (as PostgreSQL raises it for that outer row),
    /// and `value`, evaluated only then, for one.
    SingleRow,
}

/// The name [`ScalarFunction::SingleRow`] is called by in the SQL that the binder's rewrite of correlated
/// subqueries writes.
pub const SINGLE_ROW: &str = "__numadb_single_row";

/// What one argument of a function takes, and what an argument of another type becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parameter {
    /// Any numeric type, kept (`abs`); an untyped argument becomes a double.
    Numeric,
    /// A double; integers are widened, an untyped argument is parsed as one.
    Double,
    /// A count or position: an integer of either width; an untyped argument becomes an integer.
    Integer,
    /// Text; an untyped argument is text.
    Text,
    /// Any type, used as its text (`concat`).
    Any,
}

/// The type of a function's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// Always this type.
    Type(DataType),
    /// The type of the first argument.
    FirstArgument,
    /// The wider of the arguments' types (bigint over integer).
    WiderArgument,
}

/// The arguments a function takes: `parameters` in order, the first `required` of them required; with
/// `variadic`, the last one repeats any number of times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    /// Each argument's parameter.
    pub parameters: &'static [Parameter],
    /// How many arguments must be given.
    pub required: usize,
    /// Whether the last parameter repeats.
    pub variadic: bool,
    /// The result's type.
    pub returns: Returns,
}

impl Signature {
    /// The parameter of argument `position`, or `None` when the function takes no such argument.
    pub fn parameter(&self, position: usize) -> Option<Parameter> {
        match self.parameters.get(position) {
            Some(&parameter) => Some(parameter),
            None if self.variadic => self.parameters.last().copied(),
            None => None,
        }
    }

    /// Whether `count` arguments is a number this function takes.
    pub fn takes(&self, count: usize) -> bool {
        count >= self.required && (self.variadic || count <= self.parameters.len())
    }
}

/// Functions called by name with a [`Signature`] (the conditional ones, `coalesce`, `greatest`, `least`,
/// `nullif`, are typed by the binder like CASE): every name they answer to, for hints and documentation.
pub const FUNCTION_NAMES: &[&str] = &[
    "abs",
    "round",
    "trunc",
    "floor",
    "ceil",
    "ceiling",
    "sign",
    "sqrt",
    "cbrt",
    "exp",
    "ln",
    "log",
    "log10",
    "power",
    "pow",
    "pi",
    "random",
    "mod",
    "lower",
    "upper",
    "length",
    "char_length",
    "substring",
    "substr",
    "strpos",
    "position",
    "replace",
    "trim",
    "btrim",
    "ltrim",
    "rtrim",
    "concat",
    "concat_ws",
    "left",
    "right",
    "repeat",
    "reverse",
    "starts_with",
    "lpad",
    "rpad",
    "ascii",
    "split_part",
    "regexp_like",
    "regexp_replace",
    "regexp_count",
    "regexp_substr",
    "regexp_instr",
    "octet_length",
    "bit_length",
    "initcap",
    "translate",
    "chr",
    "md5",
    "to_hex",
    "gcd",
    "lcm",
    "width_bucket",
    "int4and",
    "int8and",
    "int4or",
    "int8or",
    "int4xor",
    "int8xor",
    "int4not",
    "int8not",
    "int4shl",
    "int8shl",
    "int4shr",
    "int8shr",
];

impl ScalarFunction {
    /// The function a call of `name` with `arguments` arguments means (`log` is base 10 with one argument), or
    /// `None` when no function of [`FUNCTION_NAMES`] has that name. The argument count is checked against the
    /// signature by the caller.
    pub fn from_name(name: &str, arguments: usize) -> Option<ScalarFunction> {
        use ScalarFunction as F;
        Some(match name {
            "abs" => F::Abs,
            "lower" => F::Lower,
            "upper" => F::Upper,
            "length" | "char_length" | "character_length" => F::Length,
            "round" => F::Round,
            "trunc" => F::Trunc,
            "floor" => F::Floor,
            "ceil" | "ceiling" => F::Ceil,
            "sign" => F::Sign,
            "sqrt" => F::Sqrt,
            "cbrt" => F::Cbrt,
            "exp" => F::Exp,
            "ln" => F::Ln,
            "log10" => F::Log10,
            "log" if arguments == 1 => F::Log10,
            "log" => F::Log,
            "power" | "pow" => F::Power,
            "pi" => F::Pi,
            "random" => F::Random,
            "substring" | "substr" => F::Substring,
            "strpos" => F::Strpos,
            "replace" => F::Replace,
            "btrim" => F::Btrim,
            "ltrim" => F::Ltrim,
            "rtrim" => F::Rtrim,
            "concat" => F::Concat,
            "concat_ws" => F::ConcatWs,
            "left" => F::Left,
            "right" => F::Right,
            "repeat" => F::Repeat,
            "reverse" => F::Reverse,
            "starts_with" => F::StartsWith,
            "lpad" => F::Lpad,
            "rpad" => F::Rpad,
            "ascii" => F::Ascii,
            "split_part" => F::SplitPart,
            "regexp_like" => F::RegexpLike,
            "regexp_replace" => F::RegexpReplace,
            "regexp_count" => F::RegexpCount,
            "regexp_substr" => F::RegexpSubstr,
            "regexp_instr" => F::RegexpInstr,
            "octet_length" => F::OctetLength,
            "bit_length" => F::BitLength,
            "initcap" => F::Initcap,
            "translate" => F::Translate,
            "chr" => F::Chr,
            "md5" => F::Md5,
            "to_hex" => F::ToHex,
            "gcd" => F::Gcd,
            "lcm" => F::Lcm,
            "width_bucket" => F::WidthBucket,
            "int4and" | "int8and" => F::BitAnd,
            "int4or" | "int8or" => F::BitOr,
            "int4xor" | "int8xor" => F::BitXor,
            "int4not" | "int8not" => F::BitNot,
            "int4shl" | "int8shl" => F::ShiftLeft,
            "int4shr" | "int8shr" => F::ShiftRight,
            "int2" => F::Int2,
            SINGLE_ROW => F::SingleRow,
            _ => return None,
        })
    }

    /// The arguments the function takes and the type it returns (the conditional functions, typed by the
    /// binder, take any number of arguments of one type).
    pub fn signature(self) -> Signature {
        use DataType::{Boolean, Double, Integer, Text};
        use Parameter as P;
        use ScalarFunction as F;
        let exactly = |parameters: &'static [Parameter], returns| Signature {
            parameters,
            required: parameters.len(),
            variadic: false,
            returns,
        };
        let at_least = |required, parameters: &'static [Parameter], returns| Signature {
            parameters,
            required,
            variadic: false,
            returns,
        };
        match self {
            F::Coalesce | F::Greatest | F::Least => {
                Signature { parameters: &[P::Any], required: 1, variadic: true, returns: Returns::FirstArgument }
            }
            F::Abs => exactly(&[P::Numeric], Returns::FirstArgument),
            F::Lower | F::Upper | F::Reverse | F::Initcap | F::Md5 => exactly(&[P::Text], Returns::Type(Text)),
            F::Length | F::Ascii | F::OctetLength | F::BitLength => exactly(&[P::Text], Returns::Type(Integer)),
            F::Translate => exactly(&[P::Text, P::Text, P::Text], Returns::Type(Text)),
            F::Chr | F::ToHex => exactly(&[P::Integer], Returns::Type(Text)),
            F::Gcd | F::Lcm | F::BitAnd | F::BitOr | F::BitXor => {
                exactly(&[P::Integer, P::Integer], Returns::WiderArgument)
            }
            F::ShiftLeft | F::ShiftRight => exactly(&[P::Integer, P::Integer], Returns::FirstArgument),
            F::BitNot => exactly(&[P::Integer], Returns::FirstArgument),
            F::Int2 => exactly(&[P::Numeric], Returns::Type(Integer)),
            F::SingleRow => exactly(&[P::Any, P::Integer], Returns::FirstArgument),
            F::WidthBucket => exactly(&[P::Double, P::Double, P::Double, P::Integer], Returns::Type(Integer)),
            F::Round | F::Trunc => at_least(1, &[P::Double, P::Integer], Returns::Type(Double)),
            F::Floor | F::Ceil | F::Sign | F::Sqrt | F::Cbrt | F::Exp | F::Ln | F::Log10 => {
                exactly(&[P::Double], Returns::Type(Double))
            }
            F::Log | F::Power => exactly(&[P::Double, P::Double], Returns::Type(Double)),
            F::Pi | F::Random => exactly(&[], Returns::Type(Double)),
            F::Substring => at_least(2, &[P::Text, P::Integer, P::Integer], Returns::Type(Text)),
            F::Strpos => exactly(&[P::Text, P::Text], Returns::Type(Integer)),
            F::Replace => exactly(&[P::Text, P::Text, P::Text], Returns::Type(Text)),
            F::Btrim | F::Ltrim | F::Rtrim => at_least(1, &[P::Text, P::Text], Returns::Type(Text)),
            // Variadic, so at least one value (`concat()` does not exist in PostgreSQL either).
            F::Concat => Signature { parameters: &[P::Any], required: 1, variadic: true, returns: Returns::Type(Text) },
            F::ConcatWs => {
                Signature { parameters: &[P::Text, P::Any], required: 2, variadic: true, returns: Returns::Type(Text) }
            }
            F::Left | F::Right | F::Repeat => exactly(&[P::Text, P::Integer], Returns::Type(Text)),
            F::StartsWith => exactly(&[P::Text, P::Text], Returns::Type(Boolean)),
            F::Lpad | F::Rpad => at_least(2, &[P::Text, P::Integer, P::Text], Returns::Type(Text)),
            F::SplitPart => exactly(&[P::Text, P::Text, P::Integer], Returns::Type(Text)),
            F::RegexpLike => at_least(2, &[P::Text, P::Text, P::Text], Returns::Type(Boolean)),
            F::RegexpReplace => Signature {
                parameters: &[P::Text, P::Text, P::Text, P::Text],
                required: 3,
                variadic: false,
                returns: Returns::Type(Text),
            },
            F::RegexpCount => Signature {
                parameters: &[P::Text, P::Text, P::Integer, P::Text],
                required: 2,
                variadic: false,
                returns: Returns::Type(Integer),
            },
            F::RegexpSubstr => Signature {
                parameters: &[P::Text, P::Text, P::Integer, P::Integer, P::Text, P::Integer],
                required: 2,
                variadic: false,
                returns: Returns::Type(Text),
            },
            F::RegexpInstr => Signature {
                parameters: &[P::Text, P::Text, P::Integer, P::Integer, P::Integer, P::Text, P::Integer],
                required: 2,
                variadic: false,
                returns: Returns::Type(Integer),
            },
        }
    }

    /// The SQL name.
    pub fn name(self) -> &'static str {
        use ScalarFunction as F;
        match self {
            F::Coalesce => "coalesce",
            F::Greatest => "greatest",
            F::Least => "least",
            F::Abs => "abs",
            F::Lower => "lower",
            F::Upper => "upper",
            F::Length => "length",
            F::Round => "round",
            F::Trunc => "trunc",
            F::Floor => "floor",
            F::Ceil => "ceil",
            F::Sign => "sign",
            F::Sqrt => "sqrt",
            F::Cbrt => "cbrt",
            F::Exp => "exp",
            F::Ln => "ln",
            F::Log10 => "log10",
            F::Log => "log",
            F::Power => "power",
            F::Pi => "pi",
            F::Random => "random",
            F::Substring => "substr",
            F::Strpos => "strpos",
            F::Replace => "replace",
            F::Btrim => "btrim",
            F::Ltrim => "ltrim",
            F::Rtrim => "rtrim",
            F::Concat => "concat",
            F::ConcatWs => "concat_ws",
            F::Left => "left",
            F::Right => "right",
            F::Repeat => "repeat",
            F::Reverse => "reverse",
            F::StartsWith => "starts_with",
            F::Lpad => "lpad",
            F::Rpad => "rpad",
            F::Ascii => "ascii",
            F::SplitPart => "split_part",
            F::RegexpLike => "regexp_like",
            F::RegexpReplace => "regexp_replace",
            F::RegexpCount => "regexp_count",
            F::RegexpSubstr => "regexp_substr",
            F::RegexpInstr => "regexp_instr",
            F::OctetLength => "octet_length",
            F::BitLength => "bit_length",
            F::Initcap => "initcap",
            F::Translate => "translate",
            F::Chr => "chr",
            F::Md5 => "md5",
            F::ToHex => "to_hex",
            F::Gcd => "gcd",
            F::Lcm => "lcm",
            F::WidthBucket => "width_bucket",
            F::BitAnd => "int8and",
            F::BitOr => "int8or",
            F::BitXor => "int8xor",
            F::BitNot => "int8not",
            F::Int2 => "int2",
            F::SingleRow => SINGLE_ROW,
            F::ShiftLeft => "int8shl",
            F::ShiftRight => "int8shr",
        }
    }

    /// Whether a NULL argument makes the call NULL: every function but those that pass NULLs over.
    pub fn is_strict(self) -> bool {
        use ScalarFunction as F;
        !matches!(self, F::Coalesce | F::Greatest | F::Least | F::Concat | F::ConcatWs | F::SingleRow)
    }

    /// Evaluates the call on a row.
    pub(crate) fn eval(
        self,
        args: &[Expr],
        data_type: DataType,
        row: &[Value],
        params: &[Value],
    ) -> Result<Value, ExecError> {
        use ScalarFunction as F;
        match self {
            F::Coalesce => {
                for arg in args {
                    let value = arg.eval(row, params)?;
                    if !value.is_null() {
                        return Ok(value);
                    }
                }
                Ok(Value::Null)
            }
            F::Greatest | F::Least => {
                let wanted = if self == F::Greatest { BinaryOp::Gt } else { BinaryOp::Lt };
                let mut best = Value::Null;
                for arg in args {
                    let value = arg.eval(row, params)?;
                    if best.is_null() || compare(wanted, &value, &best) == Value::Bool(true) {
                        best = if value.is_null() { best } else { value };
                    }
                }
                Ok(best)
            }
            F::Concat | F::ConcatWs => {
                let mut values = args.iter().map(|a| a.eval(row, params));
                let separator = match self {
                    F::ConcatWs => match values.next().transpose()? {
                        Some(Value::Text(separator)) => separator,
                        _ => return Ok(Value::Null),
                    },
                    _ => Arc::from(""),
                };
                let mut out = String::new();
                let mut first = true;
                for value in values {
                    let Some(text) = value?.to_pg_text() else { continue };
                    if !first {
                        out.push_str(&separator);
                    }
                    first = false;
                    out.push_str(&text);
                    text_fits(out.len())?;
                }
                Ok(Value::Text(Arc::from(out)))
            }
            F::SingleRow => match args[1].eval(row, params)? {
                Value::Int(rows) if rows > 1 => Err(ExecError::new(
                    sqlstate::CARDINALITY_VIOLATION,
                    "more than one row returned by a subquery used as an expression",
                )),
                Value::Null => Ok(Value::Null),
                _ => args[0].eval(row, params),
            },
            _ => {
                // Strict functions: NULL in, NULL out, and at most seven arguments. Every argument is evaluated
                // first, as in PostgreSQL: a NULL one does not hide another's error (`substr(s, 1, 1 / 0)` with
                // `s` NULL fails), unless it is a NULL constant, which PostgreSQL folds when planning
                // (`substr(NULL, 1, 1 / 0)` is NULL).
                if args.iter().any(Expr::is_null_constant) {
                    return Ok(Value::Null);
                }
                let mut values = [const { Value::Null }; 7];
                for (slot, arg) in values.iter_mut().zip(args) {
                    *slot = arg.eval(row, params)?;
                }
                if values[..args.len().min(values.len())].iter().any(Value::is_null) {
                    return Ok(Value::Null);
                }
                // to_hex writes a negative number in its own type's width.
                let data_type = if self == F::ToHex { args[0].data_type() } else { data_type };
                self.eval_strict(&values[..args.len().min(values.len())], data_type)
            }
        }
    }

    /// A strict function of arguments that are not NULL, each of its parameter's type.
    pub(crate) fn eval_strict(self, values: &[Value], data_type: DataType) -> Result<Value, ExecError> {
        use ScalarFunction as F;
        let double = |position: usize| match values.get(position) {
            Some(Value::Double(v)) => Ok(*v),
            Some(Value::Int(v)) => Ok(*v as f64),
            Some(Value::Numeric(v)) => Ok(*v as f64),
            other => Err(ExecError::internal(format!("{}: argument {position} is {other:?}", self.name()))),
        };
        let int = |position: usize| match values.get(position) {
            Some(Value::Int(v)) => Ok(*v),
            other => Err(ExecError::internal(format!("{}: argument {position} is {other:?}", self.name()))),
        };
        let text = |position: usize| match values.get(position) {
            Some(Value::Text(v)) => Ok(v.clone()),
            other => Err(ExecError::internal(format!("{}: argument {position} is {other:?}", self.name()))),
        };
        let text_value = |text: String| Value::Text(Arc::from(text));
        Ok(match self {
            F::Abs => match values.first() {
                Some(Value::Int(v)) => checked_int(v.checked_abs(), data_type)?,
                // |i128::MIN| is past 128 bits, and no numadb numeric gets there (sums of bigints do not).
                Some(Value::Numeric(v)) => Value::Numeric(v.checked_abs().unwrap_or(i128::MAX)),
                _ => Value::Double(double(0)?.abs()),
            },
            F::Lower => text_value(text(0)?.chars().map(lower_char).collect()),
            F::Upper => text_value(text(0)?.chars().map(upper_char).collect()),
            F::Length => Value::Int(text(0)?.chars().count() as i64),
            F::Round | F::Trunc => {
                let rounding = if self == F::Round { Rounding::HalfAwayFromZero } else { Rounding::TowardZero };
                let x = double(0)?;
                let places = if values.len() == 2 { int(1)? } else { 0 };
                finite(round_decimal(x, places, rounding), x.is_finite())?
            }
            F::Floor => Value::Double(double(0)?.floor() + 0.0),
            F::Ceil => Value::Double(double(0)?.ceil() + 0.0),
            F::Sign => {
                let x = double(0)?;
                // NaN is neither above nor below 0: its sign is 0, as PostgreSQL's comparisons in C make it.
                Value::Double(if x > 0.0 {
                    1.0
                } else if x < 0.0 {
                    -1.0
                } else {
                    0.0
                })
            }
            F::Sqrt => {
                let x = double(0)?;
                if x < 0.0 {
                    return Err(ExecError::new(
                        sqlstate::INVALID_ARGUMENT_FOR_POWER_FUNCTION,
                        "cannot take square root of a negative number",
                    ));
                }
                Value::Double(x.sqrt())
            }
            F::Cbrt => Value::Double(double(0)?.cbrt()),
            F::Exp => {
                let x = double(0)?;
                let result = x.exp();
                if result == 0.0 && x.is_finite() {
                    return Err(underflow());
                }
                finite(result, x.is_finite())?
            }
            F::Ln | F::Log10 => {
                let x = double(0)?;
                logarithm_argument(x)?;
                Value::Double(if self == F::Ln { x.ln() } else { x.log10() })
            }
            F::Log => {
                let (base, x) = (double(0)?, double(1)?);
                logarithm_argument(base)?;
                logarithm_argument(x)?;
                if base == 1.0 {
                    return Err(ExecError::new(sqlstate::DIVISION_BY_ZERO, "division by zero"));
                }
                Value::Double(x.ln() / base.ln())
            }
            F::Power => power(double(0)?, double(1)?)?,
            F::Pi => Value::Double(std::f64::consts::PI),
            // Each thread's own generator, seeded from the operating system's entropy: calls on the scan's worker
            // threads need no lock, and a statement's values are not reproducible (PostgreSQL's are only after
            // setseed, which numadb does not have).
            F::Random => Value::Double(fastrand::f64()),
            F::Substring => {
                let count = match values.len() {
                    3 => Some(int(2)?),
                    _ => None,
                };
                text_value(substring(&text(0)?, int(1)?, count)?)
            }
            F::Strpos => {
                let (haystack, needle) = (text(0)?, text(1)?);
                Value::Int(match haystack.find(&*needle) {
                    Some(byte) => haystack[..byte].chars().count() as i64 + 1,
                    None => 0,
                })
            }
            F::Replace => {
                let (source, from, to) = (text(0)?, text(1)?, text(2)?);
                if from.is_empty() {
                    Value::Text(source)
                } else {
                    let matches = source.matches(&*from).count();
                    text_fits(source.len() - matches * from.len() + matches * to.len())?;
                    text_value(source.replace(&*from, &to))
                }
            }
            F::Btrim | F::Ltrim | F::Rtrim => {
                let source = text(0)?;
                let characters = if values.len() == 2 { text(1)? } else { Arc::from(" ") };
                let trimmed = |c: char| characters.contains(c);
                let kept = match self {
                    F::Btrim => source.trim_matches(trimmed),
                    F::Ltrim => source.trim_start_matches(trimmed),
                    _ => source.trim_end_matches(trimmed),
                };
                text_value(kept.to_string())
            }
            F::Left | F::Right => {
                let (source, n) = (text(0)?, int(1)?);
                let length = source.chars().count() as i64;
                // Characters kept: the first or last `n`, or all but `-n` of them.
                let kept = if n >= 0 { n.min(length) } else { (length + n).max(0) };
                let skipped = if self == F::Left { 0 } else { length - kept };
                text_value(source.chars().skip(skipped as usize).take(kept as usize).collect())
            }
            F::Repeat => {
                let (source, n) = (text(0)?, int(1)?);
                let n = if source.is_empty() { 0 } else { usize::try_from(n).unwrap_or(0) };
                text_fits(source.len().saturating_mul(n))?;
                text_value(source.repeat(n))
            }
            F::Reverse => text_value(text(0)?.chars().rev().collect()),
            F::StartsWith => Value::Bool(text(0)?.starts_with(&*text(1)?)),
            F::Lpad | F::Rpad => {
                let source = text(0)?;
                let fill = if values.len() == 3 { text(2)? } else { Arc::from(" ") };
                text_value(pad(&source, int(1)?, &fill, self == F::Lpad)?)
            }
            F::Ascii => Value::Int(text(0)?.chars().next().map_or(0, |c| i64::from(u32::from(c)))),
            F::SplitPart => text_value(split_part(&text(0)?, &text(1)?, int(2)?)?),
            F::RegexpLike => {
                let flags = if values.len() == 3 { text(2)? } else { Arc::from("") };
                let options = RegexOptions::parse(&flags, false)?;
                let source = text(0)?;
                Value::Bool(with_regex(&text(1)?, options, |regex| regex.is_match(&source))?)
            }
            F::RegexpReplace => {
                let flags = if values.len() == 4 { text(3)? } else { Arc::from("") };
                let options = RegexOptions::parse(&flags, true)?;
                let (source, replacement) = (text(0)?, postgres_replacement(&text(2)?));
                let replaced = with_regex(&text(1)?, options, |regex| {
                    let mut out = String::with_capacity(source.len());
                    let mut copied = 0;
                    for_each_match(regex, &source, |captures| {
                        let whole = captures.get(0).expect("a match has group 0");
                        out.push_str(&source[copied..whole.start()]);
                        captures.expand(&replacement, &mut out);
                        copied = whole.end();
                        options.global
                    });
                    out.push_str(&source[copied..]);
                    out
                })?;
                text_fits(replaced.len())?;
                text_value(replaced)
            }
            F::RegexpSubstr | F::RegexpInstr => {
                let instr = self == F::RegexpInstr;
                let optional = |position: usize, default: i64, least: i64, name: &str| -> Result<i64, ExecError> {
                    let value = if values.len() > position { int(position)? } else { default };
                    if value < least || (name == "endoption" && value > 1) {
                        return Err(ExecError::new(
                            sqlstate::INVALID_PARAMETER_VALUE,
                            format!("invalid value for parameter \"{name}\": {value}"),
                        ));
                    }
                    Ok(value)
                };
                let (start, nth) = (optional(2, 1, 1, "start")?, optional(3, 1, 1, "n")?);
                let end_option = if instr { optional(4, 0, 0, "endoption")? } else { 0 };
                let (flags_at, subexpr_at) = if instr { (5, 6) } else { (4, 5) };
                let flags = if values.len() > flags_at { text(flags_at)? } else { Arc::from("") };
                let subexpr = optional(subexpr_at, 0, 0, "subexpr")?;
                let options = RegexOptions::parse(&flags, false).map_err(|error| match flags.contains('g') {
                    true => ExecError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        format!("{}() does not support the \"global\" option", self.name()),
                    ),
                    false => error,
                })?;
                let source = text(0)?;
                let skipped = char_offset(&source, start);
                // The `nth` match's span (of its group `subexpr`, if that group took part), in bytes of `source`.
                let span = with_regex(&text(1)?, options, |regex| {
                    let mut seen = 0;
                    let mut span = None;
                    for_each_match(regex, &source[skipped..], |captures| {
                        seen += 1;
                        if seen == nth {
                            span = captures.get(subexpr as usize).map(|m| (skipped + m.start(), skipped + m.end()));
                        }
                        seen < nth
                    });
                    span
                })?;
                match (span, instr) {
                    (Some((from, to)), false) => text_value(source[from..to].to_string()),
                    (None, false) => Value::Null,
                    (Some((from, to)), true) => {
                        let at = if end_option == 1 { to } else { from };
                        Value::Int(source[..at].chars().count() as i64 + 1)
                    }
                    (None, true) => Value::Int(0),
                }
            }
            F::RegexpCount => {
                let source = text(0)?;
                let start = if values.len() >= 3 { int(2)? } else { 1 };
                if start < 1 {
                    return Err(ExecError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        format!("invalid value for parameter \"start\": {start}"),
                    ));
                }
                let flags = if values.len() == 4 { text(3)? } else { Arc::from("") };
                let options = RegexOptions::parse(&flags, false)?;
                let skipped = char_offset(&source, start);
                let count = with_regex(&text(1)?, options, |regex| {
                    let mut count = 0;
                    for_each_match(regex, &source[skipped..], |_| {
                        count += 1;
                        true
                    });
                    count
                })?;
                Value::Int(count as i64)
            }
            F::OctetLength => Value::Int(text(0)?.len() as i64),
            F::BitLength => Value::Int(text(0)?.len() as i64 * 8),
            F::Initcap => {
                let mut word = false;
                text_value(
                    text(0)?
                        .chars()
                        .map(|c| {
                            let mapped = if word { lower_char(c) } else { upper_char(c) };
                            word = c.is_alphanumeric();
                            mapped
                        })
                        .collect(),
                )
            }
            F::Translate => {
                let (source, from, to) = (text(0)?, text(1)?, text(2)?);
                let to: Vec<char> = to.chars().collect();
                text_value(
                    source
                        .chars()
                        .filter_map(|c| match from.chars().position(|f| f == c) {
                            Some(at) => to.get(at).copied(),
                            None => Some(c),
                        })
                        .collect(),
                )
            }
            F::Chr => text_value(chr(int(0)?)?.to_string()),
            F::Md5 => {
                use md5::Digest;
                let digest = md5::Md5::digest(text(0)?.as_bytes());
                text_value(digest.iter().map(|byte| format!("{byte:02x}")).collect())
            }
            F::ToHex => {
                let n = int(0)?;
                // data_type is the argument's here (see `eval`).
                text_value(if data_type == DataType::Integer { format!("{:x}", n as i32) } else { format!("{n:x}") })
            }
            F::Gcd | F::Lcm => {
                let (a, b) = (int(0)?, int(1)?);
                let (a, b) = (i128::from(a), i128::from(b));
                let divisor = gcd(a, b);
                let result = if self == F::Gcd {
                    divisor
                } else if divisor == 0 {
                    0
                } else {
                    (a / divisor * b).abs()
                };
                checked_int(i64::try_from(result).ok(), data_type)?
            }
            F::WidthBucket => width_bucket(double(0)?, double(1)?, double(2)?, int(3)?)?,
            // Both operands have the result's type, so the result does too.
            F::BitAnd => Value::Int(int(0)? & int(1)?),
            F::BitOr => Value::Int(int(0)? | int(1)?),
            F::BitXor => Value::Int(int(0)? ^ int(1)?),
            F::BitNot => Value::Int(!int(0)?),
            F::Int2 => {
                let whole = match values.first() {
                    Some(&Value::Double(v)) => crate::expr::cast(Value::Double(v), DataType::BigInt).ok(),
                    Some(&Value::Int(v)) => Some(Value::Int(v)),
                    Some(&Value::Numeric(v)) => i64::try_from(v).ok().map(Value::Int),
                    other => return Err(ExecError::internal(format!("int2: argument is {other:?}"))),
                };
                match whole {
                    Some(Value::Int(v)) if i16::try_from(v).is_ok() => Value::Int(v),
                    _ => return Err(ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "smallint out of range")),
                }
            }
            F::ShiftLeft | F::ShiftRight => {
                // The count as C's shift sees it on x86: its low bits (a negative count wraps round too).
                let (value, count) = (int(0)?, int(1)? as u32);
                Value::Int(match (self == F::ShiftLeft, data_type == DataType::Integer) {
                    (true, true) => i64::from((value as i32).wrapping_shl(count)),
                    (false, true) => i64::from((value as i32).wrapping_shr(count)),
                    (true, false) => value.wrapping_shl(count),
                    (false, false) => value.wrapping_shr(count),
                })
            }
            F::Coalesce | F::Greatest | F::Least | F::Concat | F::ConcatWs | F::SingleRow => {
                return Err(ExecError::internal(format!("{} is not strict", self.name())));
            }
        })
    }
}

/// Euclid's greatest common divisor, never negative (`gcd(0, 0)` is 0).
/// `c` in upper case, one character for one, as PostgreSQL's builtin C.UTF-8 locale maps it: `é` becomes `É`;
/// a character whose upper case is several (`ß`) stays as it is.
pub fn upper_char(c: char) -> char {
    one_for_one(c.to_uppercase(), c)
}

/// `c` in lower case, one character for one (see [`upper_char`]).
pub fn lower_char(c: char) -> char {
    one_for_one(c.to_lowercase(), c)
}

/// The one character `c` maps to, or `c` itself where it maps to several.
fn one_for_one(mut mapped: impl Iterator<Item = char>, c: char) -> char {
    match (mapped.next(), mapped.next()) {
        (Some(single), None) => single,
        _ => c,
    }
}

fn gcd(mut a: i128, mut b: i128) -> i128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a.abs()
}

/// `chr(n)`, with PostgreSQL's errors for UTF-8.
fn chr(n: i64) -> Result<char, ExecError> {
    if n == 0 {
        return Err(ExecError::new(sqlstate::PROGRAM_LIMIT_EXCEEDED, "null character not permitted"));
    }
    if n < 0 {
        return Err(ExecError::new(sqlstate::INVALID_PARAMETER_VALUE, "character number must be positive"));
    }
    let code = u32::try_from(n).unwrap_or(u32::MAX);
    if code > 0x10FFFF {
        return Err(ExecError::new(
            sqlstate::PROGRAM_LIMIT_EXCEEDED,
            format!("requested character too large for encoding: {n}"),
        ));
    }
    char::from_u32(code).ok_or_else(|| {
        ExecError::new(sqlstate::PROGRAM_LIMIT_EXCEEDED, format!("requested character not valid for encoding: {n}"))
    })
}

/// `width_bucket(x, low, high, count)` as PostgreSQL 15 computes it for doubles (buckets may run downwards when
/// `low > high`).
fn width_bucket(x: f64, low: f64, high: f64, count: i64) -> Result<Value, ExecError> {
    let invalid = |message: &str| ExecError::new(sqlstate::INVALID_ARGUMENT_FOR_WIDTH_BUCKET, message.to_string());
    if count <= 0 {
        return Err(invalid("count must be greater than zero"));
    }
    if x.is_nan() || low.is_nan() || high.is_nan() {
        return Err(invalid("operand, lower bound, and upper bound cannot be NaN"));
    }
    if !low.is_finite() || !high.is_finite() {
        return Err(invalid("lower and upper bounds must be finite"));
    }
    if low == high {
        return Err(invalid("lower bound cannot equal upper bound"));
    }
    let inside = |offset: f64, span: f64, half_offset: f64, half_span: f64| {
        let fraction = if span.is_finite() { offset / span } else { half_offset / half_span };
        let bucket = (count as f64 * fraction) as i64;
        // The quotient could round up to the upper bound's bucket.
        bucket.min(count - 1) + 1
    };
    let over = || {
        count
            .checked_add(1)
            .filter(|b| i32::try_from(*b).is_ok())
            .ok_or_else(|| ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "integer out of range"))
    };
    let bucket = if low < high {
        if x < low {
            0
        } else if x >= high {
            over()?
        } else {
            inside(x - low, high - low, x / 2.0 - low / 2.0, high / 2.0 - low / 2.0)
        }
    } else if x > low {
        0
    } else if x <= high {
        over()?
    } else {
        inside(low - x, low - high, low / 2.0 - x / 2.0, low / 2.0 - high / 2.0)
    };
    Ok(Value::Int(bucket))
}

/// How [`round_decimal`] drops digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rounding {
    /// Half away from zero (`round`).
    HalfAwayFromZero,
    /// Toward zero (`trunc`).
    TowardZero,
}

/// `x` rounded to `places` decimal places (left of the point when negative) as PostgreSQL's
/// `round(x::numeric, places)` does: the double is first written with 15 significant digits (PostgreSQL's
/// float8-to-numeric conversion), and those decimal digits are rounded. So `round(9.45, 1)` is 9.5 although the
/// double nearest 9.45 lies just below it, which is what a user who wrote 9.45 expects; scaling by a power of ten
/// and rounding the scaled double would say 9.5 here but 0.8 for `trunc(0.9 - 1e-16, 1)`, and rounding the exact
/// binary value says 9.4.
pub(crate) fn round_decimal(x: f64, places: i64, rounding: Rounding) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x + 0.0;
    }
    // `d.dddddddddddddde±x`: 15 significant digits.
    let written = format!("{:.14e}", x.abs());
    let (mantissa, exponent) = written.split_once('e').expect("exponent notation");
    let digits: u64 = mantissa.replace('.', "").parse().expect("15 digits");
    let exponent: i64 = exponent.parse().expect("an exponent");
    // `digits` × 10^(exponent - 14); drop the digits worth less than 10^-places.
    let dropped = 14 - exponent - places.clamp(-400, 400);
    let kept = match dropped {
        // No digit to drop: the 15 digits are the answer (where they round to a double at all: the largest
        // double's 15 digits are beyond it, and it is whole anyway).
        ..=0 => {
            let written: f64 = written.parse().expect("a decimal number");
            return if written.is_finite() { written.copysign(x) + 0.0 } else { x };
        }
        1..=15 => {
            let unit = 10u64.pow(dropped as u32);
            let (quotient, remainder) = (digits / unit, digits % unit);
            match rounding {
                Rounding::HalfAwayFromZero if remainder >= unit / 2 => quotient + 1,
                _ => quotient,
            }
        }
        // Fewer than 10^15 < half of 10^16 units: nothing is left.
        _ => 0,
    };
    let scale = exponent - 14 + dropped;
    let rounded: f64 = format!("{kept}e{scale}").parse().expect("a decimal number");
    if x < 0.0 { -rounded + 0.0 } else { rounded }
}

/// The flags of a regular-expression function, PostgreSQL's (a later flag overrides an earlier one): `i`
/// (case-insensitive) and `c` (case-sensitive, the default); `n` or `m` (newline-sensitive), `p` (partial),
/// `w` (inverse partial) and `s` (not newline-sensitive, the default); `x` (expanded syntax) and `t` (tight, the
/// default); `q` (the pattern is a literal string); and, for `regexp_replace`, `g` (every match). `b` and `e`
/// (basic and extended REs, not advanced ones) are refused with 0A000.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct RegexOptions {
    case_insensitive: bool,
    global: bool,
    /// `.` and negated bracket expressions do not match a newline (`n`, `m`, `p`).
    dot_stops_at_newline: bool,
    /// `^` and `$` match at the start and end of each line (`n`, `m`, `w`).
    anchors_at_lines: bool,
    /// White space and `#` comments outside bracket expressions are not part of the pattern (`x`).
    expanded: bool,
    /// The pattern is a literal string (`q`).
    literal: bool,
}

impl RegexOptions {
    fn parse(flags: &str, replacing: bool) -> Result<RegexOptions, ExecError> {
        let mut options = RegexOptions::default();
        for flag in flags.chars() {
            match flag {
                'i' => options.case_insensitive = true,
                'c' => options.case_insensitive = false,
                'g' if replacing => options.global = true,
                'n' | 'm' => (options.dot_stops_at_newline, options.anchors_at_lines) = (true, true),
                'p' => (options.dot_stops_at_newline, options.anchors_at_lines) = (true, false),
                'w' => (options.dot_stops_at_newline, options.anchors_at_lines) = (false, true),
                's' => (options.dot_stops_at_newline, options.anchors_at_lines) = (false, false),
                'x' => options.expanded = true,
                't' => options.expanded = false,
                'q' => options.literal = true,
                'b' | 'e' => {
                    return Err(ExecError::new(
                        sqlstate::FEATURE_NOT_SUPPORTED,
                        format!("regular expression option \"{flag}\" (basic or extended syntax) is not supported"),
                    )
                    .with_hint("numadb's regular expressions are PostgreSQL's advanced ones (AREs)."));
                }
                other => {
                    return Err(ExecError::new(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        format!("invalid regular expression option: \"{other}\""),
                    )
                    .with_hint("numadb takes the flags i, c, n, m, p, w, s, x, t, q and (in regexp_replace) g."));
                }
            }
        }
        Ok(options)
    }
}

/// Regular expressions compiled per thread, by pattern and case: a pattern is compiled once per worker rather
/// than once per row. The cache is emptied when it holds this many.
const REGEX_CACHE_MAX: usize = 64;
/// The largest compiled program a pattern may make: a pattern written to exhaust memory is 2201B, not an
/// allocation failure.
const REGEX_SIZE_MAX_BYTES: usize = 1 << 22;

thread_local! {
    static REGEXES: std::cell::RefCell<std::collections::HashMap<(String, RegexOptions), regex::Regex>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// `f` of the compiled `pattern`: PostgreSQL's syntax for everyday patterns (classes, `[[:alpha:]]`, `\d \w \s`,
/// quantifiers, groups, alternation, anchors) brought to a Rust `regex` by [`postgres_pattern`]; back-references
/// and look-around are refused with 2201B.
fn with_regex<T>(pattern: &str, options: RegexOptions, f: impl FnOnce(&regex::Regex) -> T) -> Result<T, ExecError> {
    REGEXES.with(|cache| {
        let mut cache = cache.borrow_mut();
        let key = (pattern.to_string(), RegexOptions { global: false, ..options });
        if !cache.contains_key(&key) {
            let translated = if options.literal {
                regex::escape(pattern)
            } else {
                postgres_pattern(&if options.expanded { unexpanded(pattern) } else { pattern.to_string() }, options)?
            };
            let regex = regex::RegexBuilder::new(&translated)
                .case_insensitive(options.case_insensitive)
                .multi_line(options.anchors_at_lines)
                .size_limit(REGEX_SIZE_MAX_BYTES)
                .build()
                .map_err(|error| {
                    let reason = error.to_string().lines().last().unwrap_or_default().trim().to_string();
                    ExecError::new(
                        sqlstate::INVALID_REGULAR_EXPRESSION,
                        format!("invalid regular expression: {reason}"),
                    )
                })?;
            if cache.len() >= REGEX_CACHE_MAX {
                cache.clear();
            }
            cache.insert(key.clone(), regex);
        }
        Ok(f(&cache[&key]))
    })
}

/// The byte offset of character `start` (1-based) of `text`; its length past the end.
fn char_offset(text: &str, start: i64) -> usize {
    text.char_indices().nth((start - 1) as usize).map_or(text.len(), |(byte, _)| byte)
}

/// `f` of each match of `regex` in `text`, left to right, while `f` returns true. As in PostgreSQL, an empty match
/// right after a match is one (`regexp_replace('abc', 'b?', '-', 'g')` is `-a--c-`), where the crate's iterators
/// skip it.
fn for_each_match<'t>(regex: &regex::Regex, text: &'t str, mut f: impl FnMut(regex::Captures<'t>) -> bool) {
    let mut at = 0;
    while let Some(captures) = regex.captures_at(text, at) {
        let (start, end) = captures.get(0).map_or((at, at), |whole| (whole.start(), whole.end()));
        if !f(captures) {
            return;
        }
        at = match text[end..].chars().next() {
            _ if end > start => end,
            Some(next) => end + next.len_utf8(),
            None => return,
        };
    }
}

/// A PostgreSQL regular expression (an ARE) in the `regex` crate's syntax, where the two differ on what a pattern
/// matches. PostgreSQL's classes are its locale's (here a UTF-8 one: Unicode letters, ASCII digits):
///
/// - `.` and a negated bracket expression match a newline (`(?s)`), unless the flags make the pattern newline-sensitive
///   (`n`, `m`, `p`: then neither does, the bracket taking `\n` among its excluded characters);
/// - `\d` and `\D` are ASCII digits (the crate's are Unicode's); `\w` and `\s` are Unicode's in both;
/// - `[:alpha:]`, `[:upper:]`, `[:lower:]`, `[:alnum:]` and `[:space:]` are Unicode's (the crate's are ASCII);
/// - `\y \Y \m \M \Z` are word boundaries and the end of the text (`\b`, `\B`, `\b{start}`, `\b{end}`, `\z`),
///   and `\b` a backspace;
/// - in a bracket expression `[` (other than `[:`, `[=`, `[.`), `&` and `~` are literal, where the crate
///   nests classes and takes `&&` and `~~` as set operations.
///
/// Anything else is passed on as written.
fn postgres_pattern(pattern: &str, options: RegexOptions) -> Result<String, ExecError> {
    let mut out = String::with_capacity(pattern.len() + 8);
    if !options.dot_stops_at_newline {
        out.push_str("(?s)");
    }
    // PostgreSQL's word-boundary brackets, which look like a class.
    let pattern = pattern.replace("[[:<:]]", "\\m").replace("[[:>:]]", "\\M");
    let mut chars = pattern.chars().peekable();
    // Inside a bracket expression, and whether a `]` there would be its first character (so literal).
    let mut in_class = false;
    let mut class_start = false;
    while let Some(c) = chars.next() {
        if in_class {
            let first = std::mem::replace(&mut class_start, false);
            match c {
                '^' if first && out.ends_with('[') => {
                    out.push('^');
                    if options.dot_stops_at_newline {
                        out.push_str("\\n");
                    }
                    class_start = true;
                }
                ']' if first => out.push_str("\\]"),
                ']' => {
                    out.push(']');
                    in_class = false;
                }
                '[' if chars.peek() == Some(&':') => {
                    chars.next();
                    let mut name = String::new();
                    while let Some(inner) = chars.next() {
                        if inner == ':' && chars.peek() == Some(&']') {
                            chars.next();
                            break;
                        }
                        name.push(inner);
                    }
                    match name.as_str() {
                        "alpha" => out.push_str("\\p{Alphabetic}"),
                        "upper" => out.push_str("\\p{Uppercase}"),
                        "lower" => out.push_str("\\p{Lowercase}"),
                        "alnum" => out.push_str("\\p{Alphabetic}\\p{Nd}"),
                        "space" => out.push_str("\\s"),
                        "blank" | "cntrl" | "digit" | "graph" | "print" | "punct" | "xdigit" => {
                            out.push_str(&format!("[:{name}:]"))
                        }
                        _ => {
                            return Err(ExecError::new(
                                sqlstate::INVALID_REGULAR_EXPRESSION,
                                "invalid regular expression: invalid character class",
                            ));
                        }
                    }
                }
                '[' if matches!(chars.peek(), Some('=' | '.')) => out.push('['),
                '[' | '&' | '~' => {
                    out.push('\\');
                    out.push(c);
                }
                '\\' => match chars.next() {
                    Some('d') => out.push_str("0-9"),
                    Some(other) => {
                        out.push('\\');
                        out.push(other);
                    }
                    None => out.push_str("\\\\"),
                },
                other => out.push(other),
            }
            continue;
        }
        match c {
            '[' => {
                out.push('[');
                in_class = true;
                class_start = true;
            }
            '\\' => match chars.next() {
                Some('d') => out.push_str("[0-9]"),
                Some('D') => out.push_str("[^0-9]"),
                Some('b') => out.push_str("\\x08"),
                Some('y') => out.push_str("\\b"),
                Some('Y') => out.push_str("\\B"),
                Some('m') => out.push_str("\\b{start}"),
                Some('M') => out.push_str("\\b{end}"),
                Some('Z') => out.push_str("\\z"),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            other => out.push(other),
        }
    }
    Ok(out)
}

/// An expanded-syntax pattern (flag `x`) without its white space and `#` comments, which PostgreSQL ignores
/// outside bracket expressions; an escaped space or `#` is kept, as the character itself.
fn unexpanded(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    // Inside a bracket expression, and whether a `]` there would be its first character (so literal).
    let (mut in_class, mut class_start) = (false, false);
    while let Some(c) = chars.next() {
        if in_class {
            let first = std::mem::replace(&mut class_start, false);
            match c {
                '^' if first && out.ends_with('[') => class_start = true,
                ']' if !first => in_class = false,
                '[' if matches!(chars.peek(), Some(':' | '=' | '.')) => {
                    // `[:alpha:]`: copied whole, so that its `]` does not end the bracket.
                    let close = chars.next().expect("peeked");
                    out.push(c);
                    out.push(close);
                    while let Some(inner) = chars.next() {
                        out.push(inner);
                        if inner == close && chars.peek() == Some(&']') {
                            out.push(chars.next().expect("peeked"));
                            break;
                        }
                    }
                    continue;
                }
                _ => {}
            }
            out.push(c);
            continue;
        }
        match c {
            '\\' => match chars.next() {
                Some(kept @ (' ' | '\t' | '\n' | '\r' | '#')) => out.push(kept),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            '#' => {
                for skipped in chars.by_ref() {
                    if skipped == '\n' {
                        break;
                    }
                }
            }
            c if c.is_whitespace() => {}
            '[' => {
                out.push(c);
                (in_class, class_start) = (true, true);
            }
            other => out.push(other),
        }
    }
    out
}

/// A PostgreSQL replacement string (`\1`…`\9` a group, `\&` the match, `\\` a backslash) in the `regex`
/// crate's syntax (`${1}`, `${0}`, `$$` for a dollar sign).
fn postgres_replacement(replacement: &str) -> String {
    let mut out = String::with_capacity(replacement.len());
    let mut chars = replacement.chars();
    while let Some(c) = chars.next() {
        match c {
            '$' => out.push_str("$$"),
            '\\' => match chars.next() {
                Some(digit @ '1'..='9') => out.push_str(&format!("${{{digit}}}")),
                Some('&') => out.push_str("${0}"),
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            other => out.push(other),
        }
    }
    out
}

/// A double result, or 22003 when finite inputs overflowed.
fn finite(value: f64, inputs_finite: bool) -> Result<Value, ExecError> {
    if value.is_infinite() && inputs_finite {
        return Err(ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: overflow"));
    }
    Ok(Value::Double(value))
}

fn underflow() -> ExecError {
    ExecError::new(sqlstate::NUMERIC_VALUE_OUT_OF_RANGE, "value out of range: underflow")
}

/// PostgreSQL's errors for the argument of a logarithm.
fn logarithm_argument(x: f64) -> Result<(), ExecError> {
    let message = if x == 0.0 {
        "cannot take logarithm of zero"
    } else if x < 0.0 {
        "cannot take logarithm of a negative number"
    } else {
        return Ok(());
    };
    Err(ExecError::new(sqlstate::INVALID_ARGUMENT_FOR_LOGARITHM, message))
}

/// `x ^ y` with PostgreSQL's errors: no real result is 2201F, a finite result beyond (or below) a double 22003.
fn power(x: f64, y: f64) -> Result<Value, ExecError> {
    if x == 0.0 && y < 0.0 {
        return Err(ExecError::new(
            sqlstate::INVALID_ARGUMENT_FOR_POWER_FUNCTION,
            "zero raised to a negative power is undefined",
        ));
    }
    if x < 0.0 && y.is_finite() && y.floor() != y {
        return Err(ExecError::new(
            sqlstate::INVALID_ARGUMENT_FOR_POWER_FUNCTION,
            "a negative number raised to a non-integer power yields a complex result",
        ));
    }
    let result = x.powf(y);
    let inputs_finite = x.is_finite() && y.is_finite();
    if result == 0.0 && x != 0.0 && inputs_finite {
        return Err(underflow());
    }
    finite(result, inputs_finite)
}

/// 54000 when a text of `bytes` bytes would be larger than a value may be.
fn text_fits(bytes: usize) -> Result<(), ExecError> {
    if bytes > TEXT_BYTES_MAX {
        return Err(ExecError::new(sqlstate::PROGRAM_LIMIT_EXCEEDED, "requested length too large"));
    }
    Ok(())
}

/// PostgreSQL's `substring(source FROM start FOR count)`: the characters at 1-based positions
/// `start .. start + count` that exist (a start before 1 shortens the result).
fn substring(source: &str, start: i64, count: Option<i64>) -> Result<String, ExecError> {
    let skipped = usize::try_from(start.saturating_sub(1)).unwrap_or(0);
    let taken = match count {
        Some(count) if count < 0 => {
            return Err(ExecError::new(sqlstate::SUBSTRING_ERROR, "negative substring length not allowed"));
        }
        // The end position, `start + count`, exclusive; what lies before position 1 is not there.
        Some(count) => usize::try_from(start.saturating_add(count).saturating_sub(1).max(0)).unwrap_or(usize::MAX),
        None => usize::MAX,
    };
    Ok(source.chars().take(taken).skip(skipped).collect())
}

/// `lpad`/`rpad`: `source` cut or filled with repetitions of `fill` to `length` characters (a source shorter than
/// `length` stays as it is when `fill` is empty).
fn pad(source: &str, length: i64, fill: &str, left: bool) -> Result<String, ExecError> {
    let length = usize::try_from(length).unwrap_or(0);
    let have = source.chars().count();
    if have >= length {
        return Ok(source.chars().take(length).collect());
    }
    if fill.is_empty() {
        return Ok(source.to_string());
    }
    let filling = length - have;
    let fill_bytes = fill.chars().map(char::len_utf8).max().unwrap_or(1);
    text_fits(source.len().saturating_add(filling.saturating_mul(fill_bytes)))?;
    let padding = fill.chars().cycle().take(filling);
    Ok(if left { padding.chain(source.chars()).collect() } else { source.chars().chain(padding).collect() })
}

/// `split_part(source, delimiter, n)`: field `n` (1-based; from the end when negative) of `source` split at
/// `delimiter`, empty when there is no such field; field 0 is 22023.
fn split_part(source: &str, delimiter: &str, n: i64) -> Result<String, ExecError> {
    if n == 0 {
        return Err(ExecError::new(sqlstate::INVALID_PARAMETER_VALUE, "field position must not be zero"));
    }
    if delimiter.is_empty() {
        // The whole string is the only field.
        return Ok(if n == 1 || n == -1 { source.to_string() } else { String::new() });
    }
    let field = if n > 0 {
        source.split(delimiter).nth((n - 1) as usize)
    } else {
        source.rsplit(delimiter).nth((-(n + 1)) as usize)
    };
    Ok(field.unwrap_or_default().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(function: ScalarFunction, args: &[Value]) -> Result<Value, ExecError> {
        let exprs: Vec<Expr> = args
            .iter()
            .map(|v| {
                let data_type = match v {
                    Value::Int(_) => DataType::BigInt,
                    Value::Double(_) => DataType::Double,
                    Value::Bool(_) => DataType::Boolean,
                    _ => DataType::Text,
                };
                Expr::literal(v.clone(), data_type)
            })
            .collect();
        let data_type = match function.signature().returns {
            Returns::Type(t) => t,
            Returns::FirstArgument | Returns::WiderArgument => exprs.first().map_or(DataType::Text, Expr::data_type),
        };
        function.eval(&exprs, data_type, &[], &[])
    }

    fn text(s: &str) -> Value {
        Value::text(s)
    }

    fn ok_text(function: ScalarFunction, args: &[Value]) -> String {
        match call(function, args) {
            Ok(Value::Text(t)) => t.to_string(),
            other => panic!("{function:?}({args:?}) gave {other:?}"),
        }
    }

    fn ok_double(function: ScalarFunction, args: &[Value]) -> f64 {
        match call(function, args) {
            Ok(Value::Double(v)) => v,
            other => panic!("{function:?}({args:?}) gave {other:?}"),
        }
    }

    fn code(function: ScalarFunction, args: &[Value]) -> &'static str {
        match call(function, args) {
            Err(e) => e.sqlstate,
            Ok(v) => panic!("{function:?}({args:?}) gave {v:?}, not an error"),
        }
    }

    #[test]
    fn every_name_resolves_and_every_signature_is_consistent() {
        for name in FUNCTION_NAMES.iter().filter(|n| !matches!(**n, "mod" | "position" | "trim")) {
            let function = ScalarFunction::from_name(name, 1).unwrap_or_else(|| panic!("{name} has no function"));
            let signature = function.signature();
            assert!(signature.required <= signature.parameters.len() || signature.variadic, "{name}");
            assert!(signature.takes(signature.required), "{name}");
        }
        assert_eq!(ScalarFunction::from_name("log", 1), Some(ScalarFunction::Log10));
        assert_eq!(ScalarFunction::from_name("log", 2), Some(ScalarFunction::Log));
        assert_eq!(ScalarFunction::from_name("nosuch", 1), None);
    }

    #[test]
    fn rounding_follows_postgresql_numeric() {
        use ScalarFunction::{Ceil, Floor, Round, Sign, Trunc};
        let d = Value::Double;
        for (x, expected) in [(2.5, 3.0), (-2.5, -3.0), (2.4999, 2.0), (0.5, 1.0), (-0.4, 0.0)] {
            let rounded = ok_double(Round, &[d(x)]);
            assert_eq!(rounded, expected, "round({x})");
            assert!(rounded.is_sign_positive() || expected < 0.0, "round({x}) is a negative zero");
        }
        assert_eq!(ok_double(Round, &[d(2.345), Value::Int(2)]), 2.35);
        assert_eq!(ok_double(Round, &[d(1234.5), Value::Int(-2)]), 1200.0);
        assert_eq!(ok_double(Round, &[d(1234.5), Value::Int(-400)]), 0.0);
        assert_eq!(ok_double(Round, &[d(1.0e300), Value::Int(20)]), 1.0e300, "already whole at that scale");
        assert_eq!(ok_double(Round, &[d(0.1), Value::Int(400)]), 0.1);
        assert_eq!(ok_double(Round, &[d(1.0e-300), Value::Int(2)]), 0.0);
        assert_eq!(ok_double(Round, &[d(9.95), Value::Int(-1)]), 10.0);
        assert_eq!(ok_double(Round, &[d(-0.5), Value::Int(-1)]), 0.0);
        assert_eq!(ok_double(Round, &[d(0.6), Value::Int(-1)]), 0.0);
        assert_eq!(ok_double(Round, &[d(5.0), Value::Int(-1)]), 10.0);
        assert_eq!(ok_double(Round, &[d(-5.0), Value::Int(-1)]), -10.0);
        // The decimal digits a user wrote, not the binary value just below or above them, are rounded (as
        // PostgreSQL rounds a double converted to numeric).
        assert_eq!(ok_double(Round, &[d(9.45), Value::Int(1)]), 9.5);
        assert_eq!(ok_double(Round, &[d(-8.35), Value::Int(1)]), -8.4);
        assert_eq!(ok_double(Round, &[d(1.005), Value::Int(2)]), 1.01);
        assert_eq!(ok_double(Trunc, &[d(0.9 - 1e-16), Value::Int(1)]), 0.9);
        assert_eq!(ok_double(Round, &[d(0.1 + 0.2), Value::Int(20)]), 0.3, "the 15 digits PostgreSQL keeps");
        assert_eq!(ok_double(Round, &[d(f64::MAX)]), f64::MAX);
        assert_eq!(ok_double(Round, &[d(f64::MIN_POSITIVE)]), 0.0);
        assert_eq!(ok_double(Round, &[d(123_456_789_012_345.5)]), 123_456_789_012_346.0);
        assert_eq!(ok_double(Trunc, &[d(-2.7)]), -2.0);
        assert_eq!(ok_double(Trunc, &[d(2.789), Value::Int(1)]), 2.7);
        assert_eq!(ok_double(Floor, &[d(-2.5)]), -3.0);
        assert_eq!(ok_double(Ceil, &[d(-2.5)]), -2.0);
        assert_eq!(ok_double(Ceil, &[Value::Int(7)]), 7.0);
        assert_eq!(ok_double(Sign, &[d(-0.3)]), -1.0);
        assert_eq!(ok_double(Sign, &[Value::Int(0)]), 0.0);
        assert!(ok_double(Round, &[d(f64::NAN)]).is_nan());
        assert_eq!(code(Round, &[d(1.7e308), Value::Int(-308)]), "22003", "rounds up past the largest double");
    }

    #[test]
    fn powers_and_logarithms_give_postgresql_errors() {
        use ScalarFunction::{Exp, Ln, Log, Log10, Power, Sqrt};
        let d = Value::Double;
        assert_eq!(ok_double(Sqrt, &[d(16.0)]), 4.0);
        assert_eq!(code(Sqrt, &[d(-1.0)]), "2201F");
        assert_eq!(ok_double(Power, &[d(2.0), d(10.0)]), 1024.0);
        assert_eq!(ok_double(Power, &[d(-2.0), d(3.0)]), -8.0);
        assert_eq!(code(Power, &[d(0.0), d(-1.0)]), "2201F");
        assert_eq!(code(Power, &[d(-8.0), d(0.5)]), "2201F");
        assert_eq!(code(Power, &[d(10.0), d(400.0)]), "22003");
        assert_eq!(code(Power, &[d(10.0), d(-400.0)]), "22003");
        assert_eq!(ok_double(Power, &[d(0.0), d(0.0)]), 1.0);
        assert_eq!(ok_double(Exp, &[d(0.0)]), 1.0);
        assert_eq!(code(Exp, &[d(1000.0)]), "22003");
        assert_eq!(code(Exp, &[d(-1000.0)]), "22003");
        assert_eq!(ok_double(Exp, &[d(f64::NEG_INFINITY)]), 0.0);
        assert_eq!(ok_double(Ln, &[d(1.0)]), 0.0);
        assert_eq!(ok_double(Log10, &[d(1000.0)]), 3.0);
        assert_eq!(ok_double(Log, &[d(2.0), d(8.0)]), 3.0);
        assert_eq!(code(Ln, &[d(0.0)]), "2201E");
        assert_eq!(code(Log10, &[d(-1.0)]), "2201E");
        assert_eq!(code(Log, &[d(1.0), d(8.0)]), "22012");
        assert_eq!(code(Log, &[d(0.0), d(8.0)]), "2201E");
    }

    #[test]
    fn substring_counts_characters_from_one_as_postgresql() {
        use ScalarFunction::Substring;
        let i = Value::Int;
        for (start, count, expected) in [
            (2, Some(3), "ell"),
            (0, Some(3), "he"),
            (-5, Some(3), ""),
            (-1, Some(4), "he"),
            (4, None, "lo"),
            (-3, None, "hello"),
            (9, Some(2), ""),
            (2, Some(0), ""),
            (i64::MAX, Some(i64::MAX), ""),
            (i64::MIN, Some(i64::MAX), ""),
            (1, Some(i64::MAX), "hello"),
        ] {
            let mut args = vec![text("hello"), i(start)];
            args.extend(count.map(i));
            assert_eq!(ok_text(Substring, &args), expected, "substring('hello', {start}, {count:?})");
        }
        assert_eq!(ok_text(Substring, &[text("ñandú"), i(2), i(3)]), "and");
        assert_eq!(code(Substring, &[text("hello"), i(1), i(-1)]), "22011");
    }

    #[test]
    fn text_functions_follow_postgresql() {
        use ScalarFunction as F;
        let i = Value::Int;
        assert_eq!(call(F::Strpos, &[text("ñandú"), text("dú")]).unwrap(), i(4));
        assert_eq!(call(F::Strpos, &[text("abc"), text("")]).unwrap(), i(1));
        assert_eq!(call(F::Strpos, &[text("abc"), text("x")]).unwrap(), i(0));
        assert_eq!(ok_text(F::Replace, &[text("banana"), text("an"), text("AN")]), "bANANa");
        assert_eq!(ok_text(F::Replace, &[text("banana"), text(""), text("x")]), "banana");
        assert_eq!(ok_text(F::Btrim, &[text("  x y  ")]), "x y");
        assert_eq!(ok_text(F::Btrim, &[text("xxhixyx"), text("xy")]), "hi");
        assert_eq!(ok_text(F::Ltrim, &[text("\t x ")]), "\t x ", "only spaces by default");
        assert_eq!(ok_text(F::Rtrim, &[text("x  ")]), "x");
        assert_eq!(ok_text(F::Left, &[text("héllo"), i(2)]), "hé");
        assert_eq!(ok_text(F::Left, &[text("hello"), i(-2)]), "hel");
        assert_eq!(ok_text(F::Left, &[text("hello"), i(-9)]), "");
        assert_eq!(ok_text(F::Right, &[text("hello"), i(2)]), "lo");
        assert_eq!(ok_text(F::Right, &[text("hello"), i(-2)]), "llo");
        assert_eq!(ok_text(F::Right, &[text("hello"), i(99)]), "hello");
        assert_eq!(ok_text(F::Repeat, &[text("ab"), i(3)]), "ababab");
        assert_eq!(ok_text(F::Repeat, &[text("ab"), i(-3)]), "");
        assert_eq!(code(F::Repeat, &[text("ab"), i(1 << 30)]), "54000");
        assert_eq!(ok_text(F::Reverse, &[text("añb")]), "bña");
        assert_eq!(call(F::StartsWith, &[text("alphabet"), text("alph")]).unwrap(), Value::Bool(true));
        assert_eq!(ok_text(F::Lpad, &[text("hi"), i(5), text("xy")]), "xyxhi");
        assert_eq!(ok_text(F::Rpad, &[text("hi"), i(5)]), "hi   ");
        assert_eq!(ok_text(F::Lpad, &[text("hello"), i(2)]), "he");
        assert_eq!(ok_text(F::Lpad, &[text("hi"), i(5), text("")]), "hi");
        assert_eq!(ok_text(F::Lpad, &[text("hi"), i(-1)]), "");
        assert_eq!(code(F::Rpad, &[text("hi"), i(i64::MAX), text("é")]), "54000");
        assert_eq!(call(F::Ascii, &[text("é")]).unwrap(), i(233));
        assert_eq!(call(F::Ascii, &[text("")]).unwrap(), i(0));
        assert_eq!(ok_text(F::SplitPart, &[text("a,b,,c"), text(","), i(2)]), "b");
        assert_eq!(ok_text(F::SplitPart, &[text("a,b,,c"), text(","), i(3)]), "");
        assert_eq!(ok_text(F::SplitPart, &[text("a,b,,c"), text(","), i(-1)]), "c");
        assert_eq!(ok_text(F::SplitPart, &[text("a,b,,c"), text(","), i(9)]), "");
        assert_eq!(ok_text(F::SplitPart, &[text("abc"), text(""), i(1)]), "abc");
        assert_eq!(code(F::SplitPart, &[text("abc"), text(","), i(0)]), "22023");
    }

    #[test]
    fn regular_expressions_follow_postgresql() {
        use ScalarFunction::{RegexpCount, RegexpLike, RegexpReplace};
        let matches = |s: &str, p: &str, flags: &str| {
            let mut args = vec![text(s), text(p)];
            if !flags.is_empty() {
                args.push(text(flags));
            }
            call(RegexpLike, &args).unwrap()
        };
        assert_eq!(matches("numadb", "^num", ""), Value::Bool(true));
        assert_eq!(matches("numadb", "ma", ""), Value::Bool(true), "a match anywhere, not the whole string");
        assert_eq!(matches("NumaDB", "^numa", ""), Value::Bool(false));
        assert_eq!(matches("NumaDB", "^numa", "i"), Value::Bool(true));
        assert_eq!(matches("a1b22", "[[:digit:]]{2}", ""), Value::Bool(true));
        // What PostgreSQL 15 (UTF-8) answers for each, where the crate's own syntax would answer otherwise.
        for (s, p, expected) in [
            ("a\nb", "a.b", true),
            ("a\nb", "a[^x]b", true),
            ("٣", "\\d", false),
            ("٣", "[\\d]", false),
            ("٣", "\\w", true),
            ("é", "\\w", true),
            ("é", "^\\W$", false),
            ("é", "[[:alpha:]]", true),
            ("É", "^[[:upper:]]$", true),
            ("٣", "[[:alnum:]]", true),
            ("foo bar", "\\yfoo\\y", true),
            ("foobar", "foo\\y", false),
            ("foo bar", "\\mbar\\M", true),
            ("a[b", "[[]", true),
            ("a&b", "^a[&&]b$", true),
            ("a~b", "^a[~~]b$", true),
            ("x]", "[]]", true),
            ("a^", "[^^]", true),
            ("^", "^[^^]$", false),
            ("ab", "b\\Z", true),
            ("ABC", "[[:<:]]A", true),
            (":", "[[:<:]]", false),
            ("ab cd", "b[[:>:]]", true),
        ] {
            assert_eq!(matches(s, p, ""), Value::Bool(expected), "{s:?} ~ {p:?}");
        }
        assert_eq!(code(RegexpLike, &[text("x"), text("(")]), "2201B");
        assert_eq!(code(RegexpLike, &[text("x"), text("(a)\\1")]), "2201B", "no back-references");
        assert_eq!(code(RegexpLike, &[text("x"), text("x"), text("z")]), "22023");
        let replace = |args: &[&str]| ok_text(RegexpReplace, &args.iter().map(|a| text(a)).collect::<Vec<_>>());
        assert_eq!(replace(&["foobarbaz", "b..", "X"]), "fooXbaz");
        assert_eq!(replace(&["foobarbaz", "b..", "X", "g"]), "fooXX");
        assert_eq!(replace(&["foobarbaz", "b(.)(.)", "[\\2\\1|\\&]", "g"]), "foo[ra|bar][za|baz]");
        assert_eq!(replace(&["a.b", "\\.", "$"]), "a$b", "a dollar sign is literal");
        assert_eq!(replace(&["ABC", "b", "x", "gi"]), "AxC");
        // An empty match right after a match counts, as in PostgreSQL.
        assert_eq!(replace(&["abc", "b?", "-", "g"]), "-a--c-");
        assert_eq!(replace(&["abc", "b?", "-"]), "-abc");
        assert_eq!(code(RegexpLike, &[text("a"), text("[[:foo:]]")]), "2201B", "no such class");
        assert_eq!(code(RegexpReplace, &[text("a"), text("a"), text("b"), text("z")]), "22023");
        let count = |args: &[Value]| call(RegexpCount, args).unwrap();
        assert_eq!(count(&[text("ababab"), text("ab")]), Value::Int(3));
        assert_eq!(count(&[text("aaaa"), text("aa")]), Value::Int(2), "matches do not overlap");
        assert_eq!(count(&[text("abc"), text("c?")]), Value::Int(4), "empty matches, one after the c");
        assert_eq!(count(&[text("ñabab"), text("ab"), Value::Int(3)]), Value::Int(1), "from the third character");
        assert_eq!(count(&[text("ab"), text("ab"), Value::Int(9)]), Value::Int(0));
        assert_eq!(code(RegexpCount, &[text("ab"), text("ab"), Value::Int(0)]), "22023");
    }

    /// PostgreSQL 15's answers.
    #[test]
    fn regular_expression_flags_follow_postgresql() {
        use ScalarFunction::{RegexpCount, RegexpLike, RegexpReplace};
        let replace = |args: [&str; 4]| call(RegexpReplace, &args.map(text)).unwrap();
        let two_lines = "ab\ncd";
        assert_eq!(replace([two_lines, "^c", "X", "n"]), text("ab\nXd"), "anchors at lines");
        assert_eq!(replace([two_lines, "^c", "X", ""]), text(two_lines));
        assert_eq!(replace([two_lines, "b.c", "X", ""]), text("aXd"));
        assert_eq!(replace([two_lines, "b.c", "X", "n"]), text(two_lines), "the dot stops at a newline");
        assert_eq!(replace([two_lines, "b[^x]c", "X", "p"]), text(two_lines), "so does a negated bracket");
        assert_eq!(replace([two_lines, "b$", "X", "p"]), text(two_lines), "partial: anchors at the ends only");
        assert_eq!(replace([two_lines, "b$", "X", "w"]), text("aX\ncd"));
        assert_eq!(replace([two_lines, "b.c", "X", "w"]), text("aXd"));
        assert_eq!(replace([two_lines, "b\\Dc", "X", "n"]), text("aXd"), "\\D still matches a newline");
        assert_eq!(replace(["a.b.c", ".", "-", "gq"]), text("a-b-c"), "a literal pattern");
        assert_eq!(replace(["A.b", "a.", "-", "qi"]), text("-b"));
        assert_eq!(replace(["abc def", "c d  # comment", "X", "x"]), text("abc def"), "expanded: no spaces");
        assert_eq!(replace(["abc def", "c\\ d", "X", "x"]), text("abXef"), "an escaped space is one");
        assert_eq!(replace(["abc def", "c[ ]d", "X", "x"]), text("abXef"), "spaces in brackets count");
        assert_eq!(replace(["a#b", "a\\#b", "X", "x"]), text("X"));
        assert_eq!(replace(["ab", "a b", "X", "xt"]), text("ab"), "tight again");
        assert_eq!(replace(["x[:a]y", "[[:alpha:] ]", "-", "gx"]), text("-[:-]-"));
        assert_eq!(call(RegexpLike, &[text("x\ny"), text("^y$"), text("m")]).unwrap(), Value::Bool(true));
        assert_eq!(call(RegexpLike, &[text("ab"), text("A"), text("ic")]).unwrap(), Value::Bool(false));
        let count = call(RegexpCount, &[text("a\nb\nc"), text("^."), Value::Int(1), text("n")]).unwrap();
        assert_eq!(count, Value::Int(3));
        assert_eq!(code(RegexpReplace, &["ab", "a", "X", "z"].map(text)), "22023");
        assert_eq!(code(RegexpReplace, &["ab", "a", "X", "b"].map(text)), "0A000");
    }

    /// PostgreSQL 15's answers.
    #[test]
    fn regexp_substr_and_instr_find_the_nth_match() {
        use ScalarFunction::{RegexpInstr, RegexpSubstr};
        let int = Value::Int;
        let substr = |args: &[Value]| call(RegexpSubstr, args).unwrap();
        let instr = |args: &[Value]| call(RegexpInstr, args).unwrap();
        let address = text("number of your street, town zip, FR");
        assert_eq!(substr(&[address.clone(), text("[^,]+"), int(1), int(2)]), text(" town zip"));
        assert_eq!(instr(&[address, text("[^,]+"), int(1), int(2)]), int(23));
        let letters = || text("ABCDEFGHI");
        assert_eq!(substr(&[letters(), text("(c..)(...)"), int(1), int(1), text("i"), int(2)]), text("FGH"));
        assert_eq!(instr(&[letters(), text("(c..)(...)"), int(1), int(1), int(0), text("i"), int(2)]), int(6));
        assert_eq!(instr(&[letters(), text("(c..)(...)"), int(1), int(1), int(1), text("i")]), int(9), "past it");
        assert_eq!(substr(&[text("abcabc"), text("b"), int(3)]), text("b"));
        assert_eq!(substr(&[text("abc"), text("x")]), Value::Null);
        assert_eq!(substr(&[text("abc"), text("(x)?b"), int(1), int(1), text(""), int(1)]), Value::Null);
        assert_eq!(substr(&[text("abc"), text("b"), int(1), int(1), text(""), int(5)]), Value::Null);
        assert_eq!(instr(&[text("abc"), text("x")]), int(0));
        assert_eq!(instr(&[text("héllo wörld"), text("w.r"), int(1), int(1), int(1)]), int(10), "characters");
        assert_eq!(instr(&[text("aaa"), text("a*"), int(1), int(2)]), int(4), "the empty match after a match");
        assert_eq!(code(RegexpSubstr, &[text("abc"), text("b"), int(0)]), "22023");
        assert_eq!(code(RegexpSubstr, &[text("abc"), text("b"), int(1), int(0)]), "22023");
        assert_eq!(code(RegexpInstr, &[text("abc"), text("b"), int(1), int(1), int(2)]), "22023");
        assert_eq!(code(RegexpSubstr, &[text("abc"), text("b"), int(1), int(1), text("g")]), "22023");
        assert_eq!(code(RegexpSubstr, &[text("abc"), text("b"), int(1), int(1), text(""), int(-1)]), "22023");
    }

    #[test]
    fn concat_skips_nulls_and_writes_values_as_postgresql_prints_them() {
        use ScalarFunction::{Concat, ConcatWs};
        let args = [text("a"), Value::Null, Value::Int(1), Value::Double(2.5), Value::Bool(true)];
        assert_eq!(ok_text(Concat, &args), "a12.5t");
        assert_eq!(ok_text(Concat, &[Value::Null]), "");
        assert!(!Concat.signature().takes(0) && !ConcatWs.signature().takes(1));
        let mut with_separator = vec![text("-")];
        with_separator.extend(args.iter().cloned());
        assert_eq!(ok_text(ConcatWs, &with_separator), "a-1-2.5-t");
        assert_eq!(call(ConcatWs, &[Value::Null, text("a")]).unwrap(), Value::Null);
    }

    #[test]
    fn strict_functions_return_null_for_a_null_argument() {
        use ScalarFunction as F;
        for function in [F::Round, F::Sqrt, F::Power, F::Substring, F::Replace, F::Lpad, F::SplitPart, F::Left] {
            let required = function.signature().required;
            let mut args = vec![Value::Null; required];
            if required > 1 {
                args[0] = text("x");
            }
            assert_eq!(call(function, &args).unwrap(), Value::Null, "{function:?}");
        }
    }
}
