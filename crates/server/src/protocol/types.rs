//! PostgreSQL types on the wire: OIDs, sizes, and the text and binary formats of values (PostgreSQL's
//! `*out`/`*in` and `*send`/`*recv` functions for the types numadb has, plus the ones clients send or the
//! catalog emulation answers with).

use std::fmt::Write as _;

use bytes::{BufMut, BytesMut};
use numadb_execution::expr::parse_value;
use numadb_execution::{ExecError, sqlstate};
use numadb_storage::{DataType, Value};

/// A wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `0`.
    Text,
    /// `1`.
    Binary,
}

impl Format {
    /// From a format code.
    pub fn from_code(code: i16) -> Result<Format, ExecError> {
        match code {
            0 => Ok(Format::Text),
            1 => Ok(Format::Binary),
            other => {
                Err(ExecError::new(sqlstate::INVALID_PARAMETER_VALUE, format!("unsupported format code: {other}")))
            }
        }
    }

    /// The code.
    pub fn code(self) -> i16 {
        match self {
            Format::Text => 0,
            Format::Binary => 1,
        }
    }
}

/// The PostgreSQL types numadb reads or writes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PgType {
    /// `bool` (16).
    Bool,
    /// `"char"` (18).
    Char,
    /// `name` (19).
    Name,
    /// `int8` (20).
    Int8,
    /// `int2` (21).
    Int2,
    /// `int4` (23).
    Int4,
    /// `text` (25).
    Text,
    /// `oid` (26).
    Oid,
    /// `float4` (700).
    Float4,
    /// `float8` (701).
    Float8,
    /// `unknown` (705).
    Unknown,
    /// `bpchar` (1042).
    Bpchar,
    /// `varchar` (1043).
    Varchar,
    /// `numeric` (1700).
    Numeric,
}

impl PgType {
    /// The type's OID.
    pub fn oid(self) -> u32 {
        match self {
            PgType::Bool => 16,
            PgType::Char => 18,
            PgType::Name => 19,
            PgType::Int8 => 20,
            PgType::Int2 => 21,
            PgType::Int4 => 23,
            PgType::Text => 25,
            PgType::Oid => 26,
            PgType::Float4 => 700,
            PgType::Float8 => 701,
            PgType::Unknown => 705,
            PgType::Bpchar => 1042,
            PgType::Varchar => 1043,
            PgType::Numeric => 1700,
        }
    }

    /// The type with an OID, if numadb knows it.
    pub fn from_oid(oid: u32) -> Option<PgType> {
        Some(match oid {
            16 => PgType::Bool,
            18 => PgType::Char,
            19 => PgType::Name,
            20 => PgType::Int8,
            21 => PgType::Int2,
            23 => PgType::Int4,
            25 => PgType::Text,
            26 => PgType::Oid,
            700 => PgType::Float4,
            701 => PgType::Float8,
            705 => PgType::Unknown,
            1042 => PgType::Bpchar,
            1043 => PgType::Varchar,
            1700 => PgType::Numeric,
            _ => return None,
        })
    }

    /// `pg_type.typlen`.
    pub fn size(self) -> i16 {
        match self {
            PgType::Bool | PgType::Char => 1,
            PgType::Int2 => 2,
            PgType::Int4 | PgType::Oid | PgType::Float4 => 4,
            PgType::Int8 | PgType::Float8 => 8,
            PgType::Name => 64,
            PgType::Unknown => -2,
            PgType::Text | PgType::Bpchar | PgType::Varchar | PgType::Numeric => -1,
        }
    }

    /// The wire type of a numadb column type.
    pub fn of(data_type: DataType) -> PgType {
        match data_type {
            DataType::Integer => PgType::Int4,
            DataType::BigInt => PgType::Int8,
            DataType::Double => PgType::Float8,
            DataType::Text => PgType::Text,
            DataType::Boolean => PgType::Bool,
            DataType::Numeric => PgType::Numeric,
        }
    }

    /// The numadb type a parameter declared with this type gets (`None`: numadb infers it from the statement).
    /// `int2` widens to INTEGER (numadb has no smaller integer); `numeric` and `unknown` are inferred.
    pub fn declared(self) -> Option<DataType> {
        match self {
            PgType::Int2 | PgType::Int4 => Some(DataType::Integer),
            PgType::Int8 => Some(DataType::BigInt),
            PgType::Float4 | PgType::Float8 => Some(DataType::Double),
            PgType::Text | PgType::Varchar | PgType::Bpchar | PgType::Name | PgType::Char => Some(DataType::Text),
            PgType::Bool => Some(DataType::Boolean),
            PgType::Oid | PgType::Unknown | PgType::Numeric => None,
        }
    }

    fn is_integer(self) -> bool {
        matches!(self, PgType::Int2 | PgType::Int4 | PgType::Int8 | PgType::Oid)
    }
}

/// A result column on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Its name.
    pub name: String,
    /// Its type.
    pub pg_type: PgType,
}

impl Column {
    /// A column.
    pub fn new(name: impl Into<String>, pg_type: PgType) -> Self {
        Column { name: name.into(), pg_type }
    }
}

/// How a session prints doubles (`extra_float_digits`): above 0, the shortest exact form (PostgreSQL 12+);
/// otherwise `15 + extra_float_digits` significant digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FloatDigits(pub i32);

impl Default for FloatDigits {
    fn default() -> Self {
        FloatDigits(1)
    }
}

/// Writes `value` of `pg_type` in `format`; an error when the value does not fit the type (a bug upstream).
pub fn encode_value(
    value: &Value,
    pg_type: PgType,
    format: Format,
    digits: FloatDigits,
    out: &mut BytesMut,
) -> Result<(), ExecError> {
    match format {
        Format::Text => encode_text(value, pg_type, digits, out),
        Format::Binary => encode_binary(value, pg_type, out),
    }
}

fn mismatch(value: &Value, pg_type: PgType) -> ExecError {
    ExecError::internal(format!("a value {value:?} in a column of type {pg_type:?}"))
}

fn encode_text(value: &Value, pg_type: PgType, digits: FloatDigits, out: &mut BytesMut) -> Result<(), ExecError> {
    match value {
        Value::Int(v) => {
            let mut buffer = itoa_buffer();
            out.put_slice(format_i64(*v, &mut buffer));
        }
        Value::Double(v) => {
            if digits.0 > 0 {
                out.put_slice(numadb_storage::types::format_double(*v).as_bytes());
            } else {
                out.put_slice(format_double_rounded(*v, (15 + digits.0).max(1) as usize).as_bytes());
            }
        }
        Value::Numeric(v) => out.put_slice(v.to_string().as_bytes()),
        Value::Text(v) => out.put_slice(v.as_bytes()),
        Value::Bool(v) => out.put_u8(if *v { b't' } else { b'f' }),
        Value::Null => return Err(mismatch(value, pg_type)),
    }
    Ok(())
}

fn encode_binary(value: &Value, pg_type: PgType, out: &mut BytesMut) -> Result<(), ExecError> {
    match (value, pg_type) {
        (Value::Int(v), PgType::Int8) => out.put_i64(*v),
        (Value::Int(v), PgType::Int4) => out.put_i32(i32::try_from(*v).map_err(|_| mismatch(value, pg_type))?),
        (Value::Int(v), PgType::Int2) => out.put_i16(i16::try_from(*v).map_err(|_| mismatch(value, pg_type))?),
        (Value::Int(v), PgType::Oid) => out.put_u32(u32::try_from(*v).map_err(|_| mismatch(value, pg_type))?),
        (Value::Int(v), PgType::Float8) => out.put_f64(*v as f64),
        (Value::Double(v), PgType::Float8) => out.put_f64(*v),
        (Value::Double(v), PgType::Float4) => out.put_f32(*v as f32),
        (Value::Numeric(v), PgType::Numeric) => encode_numeric(*v, out),
        (Value::Int(v), PgType::Numeric) => encode_numeric(i128::from(*v), out),
        (Value::Bool(v), PgType::Bool) => out.put_u8(u8::from(*v)),
        (Value::Text(v), PgType::Text | PgType::Varchar | PgType::Name | PgType::Bpchar | PgType::Unknown) => {
            out.put_slice(v.as_bytes())
        }
        (Value::Text(v), PgType::Char) => out.put_slice(v.as_bytes()),
        _ => return Err(mismatch(value, pg_type)),
    }
    Ok(())
}

/// PostgreSQL's binary `numeric` of a whole number: `ndigits`, `weight` (of the first base-10000 digit), `sign`,
/// `dscale` (0), then the digits, trailing zero digits left out as PostgreSQL leaves them out.
fn encode_numeric(value: i128, out: &mut BytesMut) {
    const NUMERIC_POS: u16 = 0x0000;
    const NUMERIC_NEG: u16 = 0x4000;
    let mut magnitude = value.unsigned_abs();
    let mut digits = Vec::new();
    while magnitude > 0 {
        digits.push((magnitude % 10_000) as u16);
        magnitude /= 10_000;
    }
    digits.reverse();
    let weight = digits.len().saturating_sub(1) as i16;
    while digits.last() == Some(&0) {
        digits.pop();
    }
    out.put_u16(digits.len() as u16);
    out.put_i16(weight);
    out.put_u16(if value < 0 { NUMERIC_NEG } else { NUMERIC_POS });
    out.put_u16(0);
    digits.iter().for_each(|&d| out.put_u16(d));
}

/// A stack buffer for integer formatting.
fn itoa_buffer() -> [u8; 20] {
    [0; 20]
}

/// Formats an integer into `buffer` (faster than `fmt` on the row path).
fn format_i64(value: i64, buffer: &mut [u8; 20]) -> &[u8] {
    let negative = value < 0;
    let mut magnitude = value.unsigned_abs();
    let mut position = buffer.len();
    loop {
        position -= 1;
        buffer[position] = b'0' + (magnitude % 10) as u8;
        magnitude /= 10;
        if magnitude == 0 {
            break;
        }
    }
    if negative {
        // i64::MIN has 19 digits, so there is room for the sign in 20 bytes.
        position -= 1;
        buffer[position] = b'-';
    }
    &buffer[position..]
}

/// A double with `significant` digits, as C's `%.*g` prints it (PostgreSQL with `extra_float_digits <= 0`).
pub fn format_double_rounded(value: f64, significant: usize) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if value == 0.0 {
        return if value.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let scientific = format!("{value:.*e}", significant - 1);
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if exponent < -4 || exponent >= significant as i32 {
        let mantissa = trim_fraction(mantissa);
        let mut text = String::with_capacity(mantissa.len() + 5);
        let _ = write!(text, "{mantissa}e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.abs());
        text
    } else {
        let decimals = (significant as i32 - 1 - exponent).max(0) as usize;
        trim_fraction(&format!("{value:.decimals$}")).to_string()
    }
}

fn trim_fraction(text: &str) -> &str {
    if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { text }
}

fn bad_binary(parameter: usize) -> ExecError {
    ExecError::new("22P03", format!("incorrect binary data format in bind parameter {}", parameter + 1))
}

/// Decodes parameter `index` (0-based) sent in `format` by a client that declared `declared` (if it did) for a
/// parameter numadb typed `target`. Integers arrive as int2, int4 or int8 whatever the parameter's width, so
/// binary integers are read by their length; the engine then checks the value fits the parameter.
pub fn decode_param(
    bytes: Option<&[u8]>,
    format: Format,
    declared: Option<PgType>,
    target: DataType,
    index: usize,
) -> Result<Value, ExecError> {
    let Some(bytes) = bytes else { return Ok(Value::Null) };
    match format {
        Format::Text => {
            let text = std::str::from_utf8(bytes).map_err(|_| {
                ExecError::new(
                    "22021",
                    format!("invalid byte sequence for encoding \"UTF8\" in parameter {}", index + 1),
                )
            })?;
            if declared == Some(PgType::Numeric) && target.is_integer() {
                return parse_numeric_text(text, target);
            }
            parse_value(text, target)
        }
        Format::Binary => {
            let wire = declared.unwrap_or(PgType::of(target));
            decode_binary(bytes, wire, target).and_then(|value| conform(value, target)).ok_or_else(|| bad_binary(index))
        }
    }
}

/// A decoded binary value as the parameter's type: integers widen to doubles, integral doubles narrow to
/// integers; anything else does not fit.
fn conform(value: Value, target: DataType) -> Option<Value> {
    match (value, target) {
        (Value::Int(v), DataType::Double) => Some(Value::Double(v as f64)),
        (Value::Int(v), DataType::Integer | DataType::BigInt) => Some(Value::Int(v)),
        (Value::Double(v), DataType::Double) => Some(Value::Double(v)),
        (Value::Double(v), DataType::Integer | DataType::BigInt)
            if v.fract() == 0.0 && v >= i64::MIN as f64 && v < i64::MAX as f64 =>
        {
            Some(Value::Int(v as i64))
        }
        (Value::Int(v), DataType::Numeric) => Some(Value::Numeric(i128::from(v))),
        (Value::Double(v), DataType::Numeric) if v.fract() == 0.0 && v.abs() < 1e38 => Some(Value::Numeric(v as i128)),
        (Value::Bool(v), DataType::Boolean) => Some(Value::Bool(v)),
        (Value::Text(v), DataType::Text) => Some(Value::Text(v)),
        (Value::Text(v), other) => Value::parse(&v, other).ok(),
        _ => None,
    }
}

/// A `numeric` text value for an integer parameter: integral values only.
fn parse_numeric_text(text: &str, target: DataType) -> Result<Value, ExecError> {
    let trimmed = text.trim();
    let integral = trimmed.strip_suffix(".0").unwrap_or(trimmed);
    parse_value(integral, target)
}

fn decode_binary(bytes: &[u8], wire: PgType, target: DataType) -> Option<Value> {
    if wire.is_integer() || (wire == PgType::Unknown && target.is_integer()) {
        return decode_integer(bytes).map(Value::Int);
    }
    match wire {
        PgType::Float8 | PgType::Float4 => match bytes.len() {
            8 => Some(Value::Double(f64::from_be_bytes(bytes.try_into().ok()?))),
            4 => Some(Value::Double(f64::from(f32::from_be_bytes(bytes.try_into().ok()?)))),
            _ => None,
        },
        PgType::Bool => match bytes {
            [0] => Some(Value::Bool(false)),
            [1] => Some(Value::Bool(true)),
            _ => None,
        },
        PgType::Numeric => decode_numeric(bytes),
        PgType::Text | PgType::Varchar | PgType::Bpchar | PgType::Name | PgType::Char | PgType::Unknown => {
            let text = std::str::from_utf8(bytes).ok()?;
            if target == DataType::Text { Some(Value::text(text)) } else { Value::parse(text, target).ok() }
        }
        PgType::Int2 | PgType::Int4 | PgType::Int8 | PgType::Oid => None,
    }
}

/// A big-endian integer of 2, 4 or 8 bytes.
fn decode_integer(bytes: &[u8]) -> Option<i64> {
    Some(match bytes.len() {
        2 => i64::from(i16::from_be_bytes(bytes.try_into().ok()?)),
        4 => i64::from(i32::from_be_bytes(bytes.try_into().ok()?)),
        8 => i64::from_be_bytes(bytes.try_into().ok()?),
        _ => return None,
    })
}

/// PostgreSQL's binary `numeric`: `ndigits`, `weight`, `sign`, `dscale`, then base-10000 digits. Integral values
/// that fit become integers, the rest doubles.
fn decode_numeric(bytes: &[u8]) -> Option<Value> {
    const NUMERIC_POS: u16 = 0x0000;
    const NUMERIC_NEG: u16 = 0x4000;
    const NUMERIC_NAN: u16 = 0xC000;
    // PostgreSQL 14 on.
    const NUMERIC_PINF: u16 = 0xD000;
    const NUMERIC_NINF: u16 = 0xF000;
    let word = |i: usize| -> Option<u16> { Some(u16::from_be_bytes(bytes.get(2 * i..2 * i + 2)?.try_into().ok()?)) };
    let ndigits = word(0)? as usize;
    let weight = word(1)? as i16;
    let sign = word(2)?;
    if bytes.len() != 8 + 2 * ndigits || ndigits > 1000 {
        return None;
    }
    match sign {
        NUMERIC_NAN => return Some(Value::Double(f64::NAN)),
        NUMERIC_PINF => return Some(Value::Double(f64::INFINITY)),
        NUMERIC_NINF => return Some(Value::Double(f64::NEG_INFINITY)),
        NUMERIC_POS | NUMERIC_NEG => {}
        _ => return None,
    }
    let digits: Vec<u16> = (0..ndigits).map(|i| word(4 + i)).collect::<Option<_>>()?;
    if digits.iter().any(|&d| d >= 10_000) {
        return None;
    }
    let negative = sign == NUMERIC_NEG;
    let integral = digits.iter().enumerate().all(|(i, &d)| d == 0 || (i as i32) <= i32::from(weight));
    if integral && i32::from(weight) < 5 {
        let mut total: i128 = 0;
        for position in 0..=i32::from(weight) {
            total = total * 10_000 + i128::from(digits.get(position as usize).copied().unwrap_or(0));
        }
        let total = if negative { -total } else { total };
        if let Ok(value) = i64::try_from(total) {
            return Some(Value::Int(value));
        }
    }
    // As decimal text, parsed once: correctly rounded, as the text format's parse is (a sum of the digits'
    // scaled values in doubles came out an ulp off for a quarter of the numbers with 8 decimals).
    let mut text = String::with_capacity(4 * ndigits + 8);
    if negative {
        text.push('-');
    }
    for &d in &digits {
        write!(text, "{d:04}").ok()?;
    }
    if digits.is_empty() {
        text.push('0');
    }
    write!(text, "e{}", 4 * (i32::from(weight) + 1 - ndigits as i32)).ok()?;
    text.parse::<f64>().ok().map(Value::Double)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: Value, pg_type: PgType) -> String {
        let mut out = BytesMut::new();
        encode_value(&value, pg_type, Format::Text, FloatDigits::default(), &mut out).unwrap();
        String::from_utf8(out.to_vec()).unwrap()
    }

    fn binary(value: Value, pg_type: PgType) -> Vec<u8> {
        let mut out = BytesMut::new();
        encode_value(&value, pg_type, Format::Binary, FloatDigits::default(), &mut out).unwrap();
        out.to_vec()
    }

    #[test]
    fn text_output_matches_postgresql() {
        assert_eq!(text(Value::Int(i64::MIN), PgType::Int8), "-9223372036854775808");
        assert_eq!(text(Value::Int(0), PgType::Int4), "0");
        assert_eq!(text(Value::Int(-42), PgType::Int4), "-42");
        assert_eq!(text(Value::Double(0.1), PgType::Float8), "0.1");
        assert_eq!(text(Value::Double(1e20), PgType::Float8), "1e+20");
        assert_eq!(text(Value::Double(f64::NEG_INFINITY), PgType::Float8), "-Infinity");
        assert_eq!(text(Value::Bool(true), PgType::Bool), "t");
        assert_eq!(text(Value::text("héllo"), PgType::Text), "héllo");
        // extra_float_digits = 0: %.15g.
        assert_eq!(format_double_rounded(0.1 + 0.2, 15), "0.3");
        assert_eq!(format_double_rounded(1.0 / 3.0, 15), "0.333333333333333");
        assert_eq!(format_double_rounded(123456789012345678.0, 15), "1.23456789012346e+17");
        assert_eq!(format_double_rounded(0.0001234, 15), "0.0001234");
        assert_eq!(format_double_rounded(0.00001234, 15), "1.234e-05");
        assert_eq!(format_double_rounded(100.0, 15), "100");
    }

    #[test]
    fn binary_output_is_big_endian_of_the_column_width() {
        assert_eq!(binary(Value::Int(7), PgType::Int4), vec![0, 0, 0, 7]);
        assert_eq!(binary(Value::Int(-1), PgType::Int8), vec![0xff; 8]);
        assert_eq!(binary(Value::Double(1.5), PgType::Float8), 1.5f64.to_be_bytes().to_vec());
        assert_eq!(binary(Value::Bool(true), PgType::Bool), vec![1]);
        let mut out = BytesMut::new();
        let error = encode_value(&Value::Int(1 << 40), PgType::Int4, Format::Binary, FloatDigits::default(), &mut out);
        assert_eq!(error.unwrap_err().sqlstate, "XX000");
    }

    #[test]
    fn integer_parameters_arrive_in_any_width() {
        for (bytes, expected) in
            [(&[0, 5][..], 5), (&[0xff, 0xff, 0xff, 0xfe][..], -2), (&[0, 0, 0, 0, 0, 0, 1, 0][..], 256)]
        {
            for declared in [None, Some(PgType::Int2), Some(PgType::Int4), Some(PgType::Int8)] {
                for target in [DataType::Integer, DataType::BigInt] {
                    assert_eq!(
                        decode_param(Some(bytes), Format::Binary, declared, target, 0).unwrap(),
                        Value::Int(expected)
                    );
                }
            }
        }
        let error = decode_param(Some(&[1, 2, 3]), Format::Binary, None, DataType::Integer, 1).unwrap_err();
        assert_eq!(error.sqlstate, "22P03");
        assert!(error.message.contains("parameter 2"));
        assert_eq!(decode_param(None, Format::Binary, None, DataType::Integer, 0).unwrap(), Value::Null);
    }

    #[test]
    fn text_parameters_are_parsed_with_postgresql_errors() {
        assert_eq!(decode_param(Some(b" 42"), Format::Text, None, DataType::Integer, 0).unwrap(), Value::Int(42));
        let error = decode_param(Some(b"4x"), Format::Text, None, DataType::Integer, 0).unwrap_err();
        assert_eq!(error.sqlstate, "22P02");
        assert_eq!(error.message, "invalid input syntax for type integer: \"4x\"");
        let error = decode_param(Some(b"3000000000"), Format::Text, None, DataType::Integer, 0).unwrap_err();
        assert_eq!(error.sqlstate, "22003");
        assert_eq!(
            decode_param(Some(b"12"), Format::Text, Some(PgType::Numeric), DataType::BigInt, 0).unwrap(),
            Value::Int(12)
        );
        assert_eq!(decode_param(Some(b"\xff"), Format::Text, None, DataType::Text, 0).unwrap_err().sqlstate, "22021");
    }

    #[test]
    fn binary_numeric_parameters() {
        // 12345678: two base-10000 digits (1234, 5678), weight 1.
        let numeric = [0, 2, 0, 1, 0, 0, 0, 0, 0x04, 0xd2, 0x16, 0x2e];
        assert_eq!(decode_numeric(&numeric), Some(Value::Int(12_345_678)));
        // -1.5: digits (1, 5000), weight 0, negative, dscale 1.
        let numeric = [0, 2, 0, 0, 0x40, 0, 0, 1, 0, 1, 0x13, 0x88];
        assert_eq!(decode_numeric(&numeric), Some(Value::Double(-1.5)));
        assert_eq!(decode_numeric(&[0, 9, 0, 0]), None);
        // 0.123456: digits (1234, 5600), weight -1: the double the text "0.123456" parses to.
        let numeric = [0, 2, 0xff, 0xff, 0, 0, 0, 6, 0x04, 0xd2, 0x15, 0xe0];
        assert_eq!(decode_numeric(&numeric), Some(Value::Double(0.123456)));
        // Infinities (PostgreSQL 14 on); an unknown sign word is no numeric.
        assert_eq!(decode_numeric(&[0, 0, 0, 0, 0xd0, 0, 0, 0]), Some(Value::Double(f64::INFINITY)));
        assert_eq!(decode_numeric(&[0, 0, 0, 0, 0xf0, 0, 0, 0]), Some(Value::Double(f64::NEG_INFINITY)));
        assert_eq!(decode_numeric(&[0, 0, 0, 0, 0x80, 0, 0, 0]), None);
    }

    #[test]
    fn whole_numerics_go_out_as_postgresql_encodes_them() {
        assert_eq!(
            binary(Value::Numeric(12_345_678), PgType::Numeric),
            [0, 2, 0, 1, 0, 0, 0, 0, 0x04, 0xd2, 0x16, 0x2e]
        );
        // 10^8: one digit (1) of weight 2, the two zero digits after it left out; zero has no digits.
        assert_eq!(binary(Value::Numeric(100_000_000), PgType::Numeric), [0, 1, 0, 2, 0, 0, 0, 0, 0, 1]);
        assert_eq!(binary(Value::Numeric(0), PgType::Numeric), [0, 0, 0, 0, 0, 0, 0, 0]);
        for value in [-1, 9_999, -10_000, i128::from(i64::MIN), i128::from(i64::MAX)] {
            let bytes = binary(Value::Numeric(value), PgType::Numeric);
            assert_eq!(decode_numeric(&bytes), Some(Value::Int(value as i64)), "{value}");
        }
        let beyond_bigint = i128::from(i64::MAX) * 4;
        assert_eq!(text(Value::Numeric(beyond_bigint), PgType::Numeric), "36893488147419103228");
        let bytes = binary(Value::Numeric(-beyond_bigint), PgType::Numeric);
        assert_eq!(decode_numeric(&bytes), Some(Value::Double(-beyond_bigint as f64)));
    }
}
