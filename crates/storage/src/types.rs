//! SQL types and values as storage knows them.

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// A column type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DataType {
    /// 32-bit signed integer (`INTEGER`, `INT`, `INT4`).
    Integer,
    /// 64-bit signed integer (`BIGINT`, `INT8`).
    BigInt,
    /// 64-bit IEEE float (`DOUBLE PRECISION`, `FLOAT8`).
    Double,
    /// Variable-length text (`TEXT`, `VARCHAR`).
    Text,
    /// `BOOLEAN`.
    Boolean,
    /// PostgreSQL's `numeric`, whole numbers only: the type of `sum` over bigints, which overflows a bigint where
    /// PostgreSQL's exact sum does not. Never a column's type (storage packs 64-bit integers at most), and not
    /// castable to (`::numeric` would promise fractions).
    Numeric,
}

impl DataType {
    /// The PostgreSQL name.
    pub fn sql_name(self) -> &'static str {
        match self {
            DataType::Integer => "integer",
            DataType::BigInt => "bigint",
            DataType::Double => "double precision",
            DataType::Text => "text",
            DataType::Boolean => "boolean",
            DataType::Numeric => "numeric",
        }
    }

    /// Whether values are integers stored with frame-of-reference bit packing.
    pub fn is_integer(self) -> bool {
        matches!(self, DataType::Integer | DataType::BigInt)
    }

    /// Whether arithmetic applies.
    pub fn is_numeric(self) -> bool {
        matches!(self, DataType::Integer | DataType::BigInt | DataType::Double | DataType::Numeric)
    }

    /// The range an integer type holds.
    pub fn integer_range(self) -> Option<(i64, i64)> {
        match self {
            DataType::Integer => Some((i64::from(i32::MIN), i64::from(i32::MAX))),
            DataType::BigInt => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.sql_name())
    }
}

/// A single value. Integers of both widths are `Int`; the column type says which.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A double.
    Double(f64),
    /// A string.
    Text(Arc<str>),
    /// A boolean.
    Bool(bool),
    /// A `numeric` (whole; see [`DataType::Numeric`]).
    Numeric(i128),
}

impl Value {
    /// Whether this is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A text value.
    pub fn text(text: &str) -> Value {
        Value::Text(Arc::from(text))
    }

    /// Total order used by ORDER BY and sorting: NULLs last (PostgreSQL's default for ascending order), numbers
    /// compared numerically across integer and double, NaN above every other double (as in PostgreSQL).
    pub fn sort_cmp(&self, other: &Value) -> Ordering {
        match (self, other) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Greater,
            (_, Value::Null) => Ordering::Less,
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::Numeric(a), Value::Numeric(b)) => a.cmp(b),
            (Value::Numeric(a), Value::Int(b)) => a.cmp(&i128::from(*b)),
            (Value::Int(a), Value::Numeric(b)) => i128::from(*a).cmp(b),
            (Value::Numeric(a), Value::Double(b)) => compare_doubles(*a as f64, *b),
            (Value::Double(a), Value::Numeric(b)) => compare_doubles(*a, *b as f64),
            (Value::Int(a), Value::Double(b)) => compare_doubles(*a as f64, *b),
            (Value::Double(a), Value::Int(b)) => compare_doubles(*a, *b as f64),
            (Value::Double(a), Value::Double(b)) => compare_doubles(*a, *b),
            (Value::Text(a), Value::Text(b)) => a.as_bytes().cmp(b.as_bytes()),
            (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
            // Mixed kinds never meet in a well-typed plan; order them by kind to stay total.
            (a, b) => a.kind_rank().cmp(&b.kind_rank()),
        }
    }

    fn kind_rank(&self) -> u8 {
        match self {
            Value::Bool(_) => 0,
            Value::Int(_) | Value::Double(_) | Value::Numeric(_) => 1,
            Value::Text(_) => 2,
            Value::Null => 3,
        }
    }

    /// Parses the text form of a value of `data_type` (as in CSV files and the text wire format).
    pub fn parse(text: &str, data_type: DataType) -> Result<Value, String> {
        let trimmed = text.trim();
        match data_type {
            DataType::Integer | DataType::BigInt => {
                // Digits past 64 bits are out of range, not bad syntax (as in PostgreSQL).
                let digits = trimmed.strip_prefix(['+', '-']).unwrap_or(trimmed);
                let well_formed = !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit());
                if !well_formed {
                    return Err(format!("invalid input syntax for type {data_type}: \"{text}\""));
                }
                let value = trimmed.parse::<i128>().unwrap_or(i128::MAX);
                let (min, max) = data_type.integer_range().expect("integer type");
                if value < i128::from(min) || value > i128::from(max) {
                    return Err(format!("value \"{text}\" is out of range for type {data_type}"));
                }
                Ok(Value::Int(value as i64))
            }
            DataType::Double => {
                let value = match trimmed.to_ascii_lowercase().as_str() {
                    "nan" => f64::NAN,
                    "infinity" | "inf" | "+infinity" | "+inf" => f64::INFINITY,
                    "-infinity" | "-inf" => f64::NEG_INFINITY,
                    _ => {
                        let value = trimmed
                            .parse::<f64>()
                            .map_err(|_| format!("invalid input syntax for type double precision: \"{text}\""))?;
                        // Digits beyond the range of a double (`1e400`, `1e-400`) are an error, not an infinity or
                        // a zero.
                        let mantissa = trimmed.split(['e', 'E']).next().unwrap_or_default();
                        let lost = value == 0.0 && mantissa.contains(|c: char| ('1'..='9').contains(&c));
                        if value.is_infinite() || lost {
                            return Err(format!("\"{text}\" is out of range for type double precision"));
                        }
                        value
                    }
                };
                Ok(Value::Double(value))
            }
            DataType::Numeric => {
                // Whole numbers, and ones whose fraction is zeros (`12.00`): the fraction is not kept.
                let whole = match trimmed.split_once('.') {
                    Some((whole, fraction)) if fraction.bytes().all(|b| b == b'0') && !whole.is_empty() => whole,
                    _ => trimmed,
                };
                whole.parse::<i128>().map(Value::Numeric).map_err(|_| {
                    format!("invalid input syntax for type numeric: \"{text}\" (numadb's numeric holds whole numbers)")
                })
            }
            DataType::Text => Ok(Value::text(text)),
            DataType::Boolean => {
                // PostgreSQL's words, or any prefix of them that is not ambiguous (`tr`, `of`, but not `o`).
                let word = trimmed.to_ascii_lowercase();
                let prefix_of = |full: &str, shortest: usize| word.len() >= shortest && full.starts_with(&word);
                if word == "1" || prefix_of("true", 1) || prefix_of("yes", 1) || prefix_of("on", 2) {
                    Ok(Value::Bool(true))
                } else if word == "0" || prefix_of("false", 1) || prefix_of("no", 1) || prefix_of("off", 2) {
                    Ok(Value::Bool(false))
                } else {
                    Err(format!("invalid input syntax for type boolean: \"{text}\""))
                }
            }
        }
    }

    /// PostgreSQL's text output of the value (`None` for NULL).
    pub fn to_pg_text(&self) -> Option<String> {
        match self {
            Value::Null => None,
            Value::Int(v) => Some(v.to_string()),
            Value::Numeric(v) => Some(v.to_string()),
            Value::Double(v) => Some(format_double(*v)),
            Value::Text(v) => Some(v.to_string()),
            Value::Bool(v) => Some(if *v { "t" } else { "f" }.to_string()),
        }
    }
}

/// PostgreSQL's output of a double: shortest round-trip digits, `Infinity`, `-Infinity`, `NaN`.
pub fn format_double(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "Infinity".into() } else { "-Infinity".into() }
    } else if value == 0.0 {
        if value.is_sign_negative() { "-0".into() } else { "0".into() }
    } else {
        let text = format!("{value}");
        // Rust prints large and small magnitudes without an exponent; PostgreSQL switches to e-notation outside
        // 1e-4..1e15, like %g with 15+ significant digits.
        let magnitude = value.abs();
        if !(1e-4..1e15).contains(&magnitude) {
            let formatted = format!("{value:e}");
            let (mantissa, exponent) = formatted.split_once('e').unwrap_or((&formatted, "0"));
            let exponent: i32 = exponent.parse().unwrap_or(0);
            let sign = if exponent < 0 { '-' } else { '+' };
            return format!("{mantissa}e{sign}{:02}", exponent.abs());
        }
        text
    }
}

/// PostgreSQL's order of doubles: -0 equals 0, every NaN (whatever its sign and payload) equals every other and
/// sorts above all numbers, Infinity included.
pub fn compare_doubles(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

impl PartialEq for Value {
    /// SQL-agnostic structural equality used by tests and grouping: NULL equals NULL here, and doubles compare as
    /// PostgreSQL orders them (so NaN groups with NaN and -0 with 0, as in PostgreSQL's GROUP BY).
    fn eq(&self, other: &Value) -> bool {
        self.sort_cmp(other) == Ordering::Equal
    }
}

impl Eq for Value {}

impl std::hash::Hash for Value {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        match self {
            Value::Null => 0u8.hash(state),
            // Integers and integral doubles must hash alike because they compare equal; but only those a double
            // holds exactly hash as one. Hashed as doubles, the integers past 2^53 that round to the same double
            // (about 1 024 of them near BIGINT's ends) all hashed alike: GROUP BY a BIGINT column of 1 000 such
            // values took 830 ms over a million rows, comparing keys along one chain. An integer no double holds
            // equals a double only by rounding: where a plan compares the two kinds, it casts the integer side to a
            // double first (a join's keys: `bind::join`), and a key's values otherwise share a type.
            Value::Int(v) => hash_integer(i128::from(*v), state),
            Value::Numeric(v) => hash_integer(*v, state),
            Value::Double(v) => {
                let normalised = match *v {
                    v if v.is_nan() => f64::NAN,
                    0.0 => 0.0f64,
                    v => v,
                };
                normalised.to_bits().hash(state)
            }
            Value::Text(v) => v.hash(state),
            Value::Bool(v) => v.hash(state),
        }
    }
}

/// Hashes an integer (an INTEGER, a BIGINT or a NUMERIC sum) as [`Value`]'s `Hash` wants: as its double where a double
/// holds it exactly, so that it hashes as the integral double it equals; otherwise as itself.
fn hash_integer<H: std::hash::Hasher>(value: i128, state: &mut H) {
    let double = value as f64;
    if double as i128 == value {
        std::hash::Hash::hash(&double.to_bits(), state);
    } else {
        std::hash::Hash::hash(&value, state);
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.to_pg_text() {
            Some(text) => f.write_str(&text),
            None => f.write_str("NULL"),
        }
    }
}

/// A column's definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ColumnDef {
    /// Name as written (already case-folded by the SQL layer).
    pub name: String,
    /// Type.
    pub data_type: DataType,
    /// Whether NULL is allowed.
    pub nullable: bool,
    /// The most characters a text value may hold (`varchar(n)`, `char(n)`); `None` for any length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<u32>,
    /// Declared `smallint`: stored as an integer, but its values must fit in 16 bits.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub smallint: bool,
    /// The value a row that names no value for the column takes (`DEFAULT`, a constant: evaluated once when the
    /// column is defined); `None` is NULL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
}

impl ColumnDef {
    /// A column of any length.
    pub fn new(name: impl Into<String>, data_type: DataType, nullable: bool) -> Self {
        ColumnDef { name: name.into(), data_type, nullable, max_chars: None, smallint: false, default: None }
    }

    /// The value of a row that names none for the column.
    pub fn default_value(&self) -> Value {
        self.default.clone().unwrap_or(Value::Null)
    }

    /// `value` as this column stores it: a text longer than [`ColumnDef::max_chars`] loses the excess if it is all
    /// spaces, as PostgreSQL does, and is refused otherwise; an integer outside a `smallint`'s range is refused
    /// (the messages are PostgreSQL's).
    pub fn fit(&self, value: &mut Value) -> Result<(), FitError> {
        if let (true, Value::Int(v)) = (self.smallint, &*value) {
            return match i16::try_from(*v) {
                Ok(_) => Ok(()),
                Err(_) => Err(FitError::OutOfRange("smallint out of range".into())),
            };
        }
        let (Some(max_chars), Value::Text(text)) = (self.max_chars, &*value) else { return Ok(()) };
        // Bytes bound characters from above: most values are settled without counting.
        if text.len() <= max_chars as usize {
            return Ok(());
        }
        let Some((end, _)) = text.char_indices().nth(max_chars as usize) else { return Ok(()) };
        if !text[end..].bytes().all(|b| b == b' ') {
            return Err(FitError::TooLong(format!("value too long for type character varying({max_chars})")));
        }
        *value = Value::text(&text[..end]);
        Ok(())
    }
}

/// Why [`ColumnDef::fit`] refused a value; each holds PostgreSQL's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    /// A text longer than `varchar(n)` allows (22001).
    #[error("{0}")]
    TooLong(String),
    /// An integer past a `smallint` (22003).
    #[error("{0}")]
    OutOfRange(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_follows_postgres() {
        assert_eq!(Value::parse(" 42 ", DataType::Integer).unwrap(), Value::Int(42));
        assert!(Value::parse("2147483648", DataType::Integer).unwrap_err().contains("out of range for type integer"));
        assert_eq!(Value::parse("2147483648", DataType::BigInt).unwrap(), Value::Int(2_147_483_648));
        assert!(Value::parse("4x", DataType::BigInt).unwrap_err().contains("invalid input syntax for type bigint"));
        assert!(Value::parse("-", DataType::BigInt).unwrap_err().contains("invalid input syntax for type bigint"));
        for past_64_bits in
            ["9223372036854775808", "-9223372036854775809", "123456789012345678901234567890123456789012"]
        {
            assert!(Value::parse(past_64_bits, DataType::BigInt).unwrap_err().contains("out of range for type bigint"));
        }
        assert_eq!(Value::parse("+9223372036854775807", DataType::BigInt).unwrap(), Value::Int(i64::MAX));
        assert_eq!(Value::parse("yes", DataType::Boolean).unwrap(), Value::Bool(true));
        assert!(Value::parse("maybe", DataType::Boolean).is_err());
        assert!(matches!(Value::parse("NaN", DataType::Double).unwrap(), Value::Double(v) if v.is_nan()));
        assert_eq!(Value::parse("-Infinity", DataType::Double).unwrap(), Value::Double(f64::NEG_INFINITY));
    }

    #[test]
    fn equal_values_hash_alike_and_large_integers_hash_apart() {
        let hasher = std::hash::RandomState::new();
        let hash_with = |value: &Value| std::hash::BuildHasher::hash_one(&hasher, value);
        assert_eq!(hash_with(&Value::Int(3)), hash_with(&Value::Double(3.0)));
        assert_eq!(hash_with(&Value::Int(-(1 << 53))), hash_with(&Value::Double(-(2f64.powi(53)))));
        assert_eq!(hash_with(&Value::Int(i64::MIN)), hash_with(&Value::Double(i64::MIN as f64)));
        assert_eq!(hash_with(&Value::Int(0)), hash_with(&Value::Double(-0.0)));
        for v in [i64::MAX, i64::MIN + 1, (1 << 53) + 1, 42] {
            assert_eq!(hash_with(&Value::Int(v)), hash_with(&Value::Numeric(i128::from(v))), "{v}");
        }
        // A thousand BIGINTs that round to one or two doubles: hashed as doubles they all collided.
        let near_min: std::collections::HashSet<u64> =
            (0..1000).map(|offset| hash_with(&Value::Int(i64::MIN + 200 + offset))).collect();
        assert_eq!(near_min.len(), 1000);
        let near_max: std::collections::HashSet<u64> =
            (0..1000).map(|offset| hash_with(&Value::Numeric(i128::from(i64::MAX) * 3 - offset))).collect();
        assert_eq!(near_max.len(), 1000);
    }

    #[test]
    fn doubles_print_like_postgres() {
        assert_eq!(format_double(1.5), "1.5");
        assert_eq!(format_double(100.0), "100");
        assert_eq!(format_double(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_double(1e20), "1e+20");
        assert_eq!(format_double(1.5e-7), "1.5e-07");
        assert_eq!(format_double(f64::INFINITY), "Infinity");
        assert_eq!(format_double(f64::NAN), "NaN");
    }

    #[test]
    fn ordering_puts_nulls_last_and_compares_numbers_across_kinds() {
        let mut values = [Value::Null, Value::Int(3), Value::Double(2.5), Value::Double(f64::NAN), Value::Int(-1)];
        values.sort_by(Value::sort_cmp);
        assert_eq!(values[0], Value::Int(-1));
        assert_eq!(values[1], Value::Double(2.5));
        assert_eq!(values[2], Value::Int(3));
        assert!(matches!(values[3], Value::Double(v) if v.is_nan()));
        assert_eq!(values[4], Value::Null);
        assert_eq!(Value::Int(2), Value::Double(2.0));
    }
}
