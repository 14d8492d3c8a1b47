//! `COPY … FROM`: CSV and PostgreSQL text format, fed in chunks (the wire protocol's CopyData messages or a
//! file), checked as they come and added when the input ends, all or nothing (as in PostgreSQL, a COPY that
//! fails at its last line, is cancelled or loses its client leaves the table as it was). Rows wait as values up
//! to a partition's worth, then are encoded into a partition set aside, so a large load waits in its compressed
//! form; the partitions join the table in one step at the end. Columns the COPY does not name take their
//! defaults. A table that ALTER TABLE replaces while a COPY reads its input fails the COPY with 40001 at the end
//! (nothing added): the rows were read for the old columns, and the input cannot be read again.
//!
//! The CSV reader is hand-written rather than taken from the `csv` crate because PostgreSQL's CSV distinguishes
//! an unquoted empty field (NULL) from a quoted one (`""`, the empty string), which that crate does not report.

use std::sync::Arc;

use numadb_execution::expr::parse_value;
use numadb_execution::{ExecError, sqlstate};
use numadb_storage::{ColumnDef, ColumnInput, Partition, StorageError, Table, Value};
use sqlparser::ast::{CopyLegacyCsvOption, CopyLegacyOption, CopyOption, CopySource, CopyTarget};

use crate::bind::{fold, object_name};
use crate::database::{QueryOutput, Session};

/// Loads at least this large (COPY, INSERT, CREATE TABLE … AS) are sealed into a partition at the end, encoded
/// and placed: the delta's rows are scanned one by one (40 ms to group 500 000 of them, 7 ms once sealed), and
/// sealing smaller loads would leave many small partitions. Smaller loads are sealed once the delta has gathered
/// as many rows ([`numadb_storage::DELTA_SEAL_ROWS`]).
const SEAL_AFTER_ROWS: u64 = numadb_storage::DELTA_SEAL_ROWS as u64;

/// Seals `table`'s delta after a statement loaded `loaded` rows into it, if that is a load ([`SEAL_AFTER_ROWS`]).
pub(crate) fn seal_after_load(table: &Table, loaded: u64) -> Result<(), ExecError> {
    if loaded >= SEAL_AFTER_ROWS {
        table.seal()?;
    }
    Ok(())
}

/// How the input is formatted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyFormat {
    /// CSV (else PostgreSQL's text format).
    pub csv: bool,
    /// Field separator.
    pub delimiter: u8,
    /// The text that means NULL.
    pub null: String,
    /// Whether the first line is a header to skip.
    pub header: bool,
    /// CSV quote character.
    pub quote: u8,
}

impl Default for CopyFormat {
    fn default() -> Self {
        CopyFormat { csv: false, delimiter: b'\t', null: "\\N".into(), header: false, quote: b'"' }
    }
}

impl CopyFormat {
    /// From `COPY`'s options (`WITH (FORMAT csv, HEADER, DELIMITER ',', NULL '')` or the legacy `CSV HEADER`).
    pub fn from_options(options: &[CopyOption], legacy: &[CopyLegacyOption]) -> Result<Self, ExecError> {
        let mut format = CopyFormat::default();
        let mut delimiter = None;
        let mut null = None;
        for option in options {
            match option {
                CopyOption::Format(name) => match fold(name).as_str() {
                    "csv" => format.csv = true,
                    "text" => format.csv = false,
                    other => return Err(unsupported_copy(&format!("COPY format \"{other}\""))),
                },
                CopyOption::Delimiter(c) => delimiter = Some(*c),
                CopyOption::Null(text) => null = Some(text.clone()),
                CopyOption::Header(h) => format.header = *h,
                CopyOption::Quote(c) => format.quote = ascii(*c)?,
                CopyOption::Encoding(_) | CopyOption::Freeze(_) => {}
                other => return Err(unsupported_copy(&format!("COPY option {other}"))),
            }
        }
        for option in legacy {
            match option {
                // `CSV HEADER`, as psql's `\copy … csv header` sends it: the CSV options come inside.
                CopyLegacyOption::Csv(csv_options) => {
                    format.csv = true;
                    for csv_option in csv_options {
                        match csv_option {
                            CopyLegacyCsvOption::Header => format.header = true,
                            CopyLegacyCsvOption::Quote(c) => format.quote = ascii(*c)?,
                            other => return Err(unsupported_copy(&format!("COPY option {other}"))),
                        }
                    }
                }
                CopyLegacyOption::Header => format.header = true,
                CopyLegacyOption::Delimiter(c) => delimiter = Some(*c),
                CopyLegacyOption::Null(text) => null = Some(text.clone()),
                other => return Err(unsupported_copy(&format!("COPY option {other}"))),
            }
        }
        if format.csv {
            format.delimiter = b',';
            format.null = String::new();
        }
        if let Some(c) = delimiter {
            format.delimiter = ascii(c)?;
        }
        if let Some(text) = null {
            format.null = text;
        }
        Ok(format)
    }
}

fn ascii(c: char) -> Result<u8, ExecError> {
    u8::try_from(c).ok().filter(u8::is_ascii).ok_or_else(|| {
        ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, "COPY delimiter and quote must be single-byte characters")
    })
}

fn unsupported_copy(what: &str) -> ExecError {
    ExecError::new(sqlstate::FEATURE_NOT_SUPPORTED, format!("{what} is not supported"))
}

/// A field: its text, or `None` for NULL.
type Field = Option<String>;

/// Splits `data` into complete records; returns them and how many bytes they used. With `at_end`, a last record
/// without a newline counts too.
fn split_records(data: &[u8], format: &CopyFormat, at_end: bool) -> Result<(Vec<Vec<Field>>, usize), String> {
    let mut records = Vec::new();
    let mut consumed = 0;
    let mut fields: Vec<Field> = Vec::new();
    let mut field: Vec<u8> = Vec::new();
    let mut quoted = false;
    let mut in_quotes = false;
    let mut i = 0;
    let finish_field = |field: &mut Vec<u8>, quoted: &mut bool, fields: &mut Vec<Field>| -> Result<(), String> {
        let text = String::from_utf8(std::mem::take(field))
            .map_err(|_| "invalid byte sequence for encoding \"UTF8\"".to_string())?;
        let value = if format.csv {
            if !*quoted && text == format.null { None } else { Some(text) }
        } else if text == format.null {
            None
        } else {
            Some(unescape_text(&text)?)
        };
        fields.push(value);
        *quoted = false;
        Ok(())
    };
    while i < data.len() {
        let byte = data[i];
        if format.csv && in_quotes {
            if byte == format.quote {
                if data.get(i + 1) == Some(&format.quote) {
                    field.push(format.quote);
                    i += 2;
                    continue;
                }
                if i + 1 == data.len() && !at_end {
                    break; // The next chunk decides whether this quote is doubled.
                }
                in_quotes = false;
            } else {
                field.push(byte);
            }
            i += 1;
            continue;
        }
        if format.csv && byte == format.quote && field.is_empty() && !quoted {
            in_quotes = true;
            quoted = true;
        } else if byte == format.delimiter {
            finish_field(&mut field, &mut quoted, &mut fields)?;
        } else if byte == b'\n' {
            if field.last() == Some(&b'\r') && !quoted {
                field.pop();
            }
            finish_field(&mut field, &mut quoted, &mut fields)?;
            records.push(std::mem::take(&mut fields));
            consumed = i + 1;
        } else if !format.csv && byte == b'\\' && i + 1 < data.len() {
            field.push(byte);
            field.push(data[i + 1]);
            i += 1;
        } else {
            field.push(byte);
        }
        i += 1;
    }
    if at_end && (consumed < data.len()) {
        if in_quotes {
            return Err("unterminated CSV quoted field".into());
        }
        if !(field.is_empty() && fields.is_empty() && !quoted) {
            finish_field(&mut field, &mut quoted, &mut fields)?;
            records.push(fields);
        }
        consumed = data.len();
    }
    Ok((records, consumed))
}

/// PostgreSQL text format escapes: `\t`, `\n` and the other letters, a byte in 1-3 octal digits (`\101`) or 1-2
/// hex digits (`\x41`); any other character escaped is itself. The bytes must still be UTF-8, without NUL.
fn unescape_text(text: &str) -> Result<String, String> {
    if !text.contains('\\') {
        return Ok(text.to_string());
    }
    let bytes = text.as_bytes();
    // The value of up to `max` digits of `radix` from `at`, and how many there were.
    let digits = |at: usize, radix: u32, max: usize| -> (u32, usize) {
        let (mut value, mut count) = (0, 0);
        while count < max
            && let Some(digit) = bytes.get(at + count).and_then(|&b| char::from(b).to_digit(radix))
        {
            value = value * radix + digit;
            count += 1;
        }
        (value, count)
    };
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'\\' {
            out.push(bytes[i]);
            i += 1;
            continue;
        }
        let Some(&escaped) = bytes.get(i + 1) else {
            out.push(b'\\');
            break;
        };
        i += 2;
        let byte = match escaped {
            b't' => b'\t',
            b'n' => b'\n',
            b'r' => b'\r',
            b'b' => 0x08,
            b'f' => 0x0c,
            b'v' => 0x0b,
            b'0'..=b'7' => {
                let (value, count) = digits(i - 1, 8, 3);
                i += count - 1;
                value as u8
            }
            b'x' if digits(i, 16, 2).1 > 0 => {
                let (value, count) = digits(i, 16, 2);
                i += count;
                value as u8
            }
            other => other,
        };
        if byte == 0 {
            return Err("invalid byte sequence for encoding \"UTF8\": 0x00".into());
        }
        out.push(byte);
    }
    String::from_utf8(out).map_err(|_| "invalid byte sequence for encoding \"UTF8\"".to_string())
}

/// Loads rows into a table from a stream of chunks.
pub struct CopyLoader {
    table: Arc<Table>,
    columns: Vec<usize>,
    format: CopyFormat,
    /// A row before its fields are read: the columns' defaults (the ones the COPY does not name keep them).
    defaults: Vec<Value>,
    buffer: Vec<u8>,
    /// Rows not yet encoded, a vector of values per table column.
    pending: Vec<Vec<Value>>,
    /// Partitions encoded from earlier rows, to be appended when the input ends.
    staged: Vec<Partition>,
    loaded: u64,
    line: u64,
    header_pending: bool,
}

impl CopyLoader {
    /// A loader for `columns` of `table` (all columns when empty).
    pub fn new(table: Arc<Table>, columns: Vec<usize>, format: CopyFormat) -> Self {
        let columns = if columns.is_empty() { (0..table.columns().len()).collect() } else { columns };
        let header_pending = format.header;
        let width = table.columns().len();
        let defaults = table.columns().iter().map(ColumnDef::default_value).collect();
        CopyLoader {
            table,
            columns,
            format,
            defaults,
            buffer: Vec::new(),
            pending: vec![Vec::new(); width],
            staged: Vec::new(),
            loaded: 0,
            line: 0,
            header_pending,
        }
    }

    /// The number of columns each row has.
    pub fn width(&self) -> usize {
        self.columns.len()
    }

    /// Feeds a chunk of input.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), ExecError> {
        self.buffer.extend_from_slice(chunk);
        self.process(false)
    }

    fn process(&mut self, at_end: bool) -> Result<(), ExecError> {
        let (records, consumed) = split_records(&self.buffer, &self.format, at_end).map_err(|m| self.error(m))?;
        self.buffer.drain(..consumed);
        for record in records {
            self.line += 1;
            if self.header_pending {
                self.header_pending = false;
                continue;
            }
            if record.len() == 1 && record[0].as_deref() == Some("\\.") {
                continue; // The end-of-data marker (psql sends it after the data, in CSV as in text format).
            }
            self.add_record(record)?;
        }
        if self.pending_rows() >= self.table.partition_rows() {
            self.stage()?;
        }
        Ok(())
    }

    fn pending_rows(&self) -> usize {
        self.pending.first().map_or(0, Vec::len)
    }

    /// Encodes the pending rows into a partition set aside, placed for the slot it will most likely take.
    fn stage(&mut self) -> Result<(), ExecError> {
        if self.pending_rows() == 0 {
            return Ok(());
        }
        let index = self.table.next_staged_slot() + self.staged.len();
        let policies = self.table.policies_for_partition(index);
        let columns = self.pending.iter_mut().map(|c| ColumnInput::Values(std::mem::take(c))).collect();
        self.staged.push(Partition::build(index, 0, self.table.columns(), columns, &policies)?);
        Ok(())
    }

    fn error(&self, message: String) -> ExecError {
        ExecError::new(sqlstate::BAD_COPY_FILE_FORMAT, message).with_detail(format!(
            "COPY {}, line {}",
            self.table.name(),
            self.line + 1
        ))
    }

    fn add_record(&mut self, record: Vec<Field>) -> Result<(), ExecError> {
        if record.len() != self.columns.len() {
            // `error` names the line being split; this one was counted already.
            self.line -= 1;
            return Err(self.error(if record.len() > self.columns.len() {
                "extra data after last expected column".to_string()
            } else {
                format!("missing data for column \"{}\"", self.table.columns()[self.columns[record.len()]].name)
            }));
        }
        let mut row = self.defaults.clone();
        for (field, &column) in record.into_iter().zip(&self.columns) {
            row[column] = Value::Null;
            if let Some(text) = field {
                let definition = &self.table.columns()[column];
                let detail = || format!("COPY {}, line {}, column {}", self.table.name(), self.line, definition.name);
                row[column] = parse_value(&text, definition.data_type).map_err(|error| error.with_detail(detail()))?;
                definition
                    .fit(&mut row[column])
                    .map_err(|error| ExecError::from(StorageError::from(error)).with_detail(detail()))?;
            }
        }
        // NOT NULL is checked now, to name the line (uniqueness is checked when the rows join the table).
        if let Some(definition) =
            row.iter().zip(self.table.columns()).find_map(|(v, d)| (v.is_null() && !d.nullable).then_some(d))
        {
            return Err(ExecError::new(
                sqlstate::NOT_NULL_VIOLATION,
                format!(
                    "null value in column \"{}\" of relation \"{}\" violates not-null constraint",
                    definition.name,
                    self.table.name()
                ),
            )
            .with_detail(format!("COPY {}, line {}", self.table.name(), self.line)));
        }
        for (column, value) in self.pending.iter_mut().zip(row) {
            column.push(value);
        }
        self.loaded += 1;
        Ok(())
    }

    /// Ends the input and adds every row to the table (or none, on an error); returns the number of rows.
    pub fn finish(mut self) -> Result<u64, ExecError> {
        self.process(true)?;
        if self.staged.is_empty() && self.loaded < SEAL_AFTER_ROWS {
            // Fewer rows than a load seals: inserted as rows, into the table's delta. (Larger loads are built into
            // a partition from their columns as they are: turned into rows, inserted into the delta and sealed
            // from there, a million rows of 18 columns took 6 s to COPY, most of it faulting in the copies.)
            let count = self.pending_rows();
            let pending = std::mem::take(&mut self.pending);
            let mut rows: Vec<Vec<Value>> = (0..count).map(|_| Vec::with_capacity(pending.len())).collect();
            for column in pending {
                rows.iter_mut().zip(column).for_each(|(row, value)| row.push(value));
            }
            self.table.insert(rows)?;
            seal_after_load(&self.table, self.loaded)?;
        } else {
            self.stage()?;
            self.table.append_staged(std::mem::take(&mut self.staged))?;
        }
        Ok(self.loaded)
    }
}

/// Prepares a `COPY table [(columns)] FROM …` statement: the loader, or an error for other forms.
pub fn copy_loader(
    session: &Session,
    source: &CopySource,
    to: bool,
    options: &[CopyOption],
    legacy: &[CopyLegacyOption],
) -> Result<CopyLoader, ExecError> {
    if to {
        return Err(unsupported_copy("COPY TO"));
    }
    let CopySource::Table { table_name, columns } = source else {
        return Err(unsupported_copy("COPY of a query"));
    };
    let name = object_name(table_name).last().cloned().unwrap_or_default();
    let table = session
        .database()
        .catalog()
        .table(&name)
        .ok_or_else(|| ExecError::new(sqlstate::UNDEFINED_TABLE, format!("relation \"{name}\" does not exist")))?;
    let positions = columns
        .iter()
        .map(|c| {
            let column = fold(c);
            table.column_index(&column).ok_or_else(|| {
                ExecError::new(
                    sqlstate::UNDEFINED_COLUMN,
                    format!("column \"{column}\" of relation \"{name}\" does not exist"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CopyLoader::new(table, positions, CopyFormat::from_options(options, legacy)?))
}

/// Runs a `COPY` statement given as SQL (from a file; `STDIN` needs the wire protocol).
pub fn copy_statement(
    session: &mut Session,
    source: &CopySource,
    to: bool,
    target: &CopyTarget,
    options: &[CopyOption],
    legacy: &[CopyLegacyOption],
) -> Result<QueryOutput, ExecError> {
    let mut loader = copy_loader(session, source, to, options, legacy)?;
    match target {
        CopyTarget::File { filename } => {
            use std::io::Read;
            let mut file = std::fs::File::open(filename).map_err(|e| {
                ExecError::new(
                    sqlstate::UNDEFINED_OBJECT,
                    format!("could not open file \"{filename}\" for reading: {e}"),
                )
            })?;
            let progress = session.progress();
            progress.start(file.metadata().map(|m| m.len()).unwrap_or(0));
            let mut chunk = vec![0u8; 1 << 20];
            loop {
                let read = file.read(&mut chunk).map_err(|e| {
                    ExecError::new(sqlstate::SYSTEM_ERROR, format!("could not read file \"{filename}\": {e}"))
                })?;
                if read == 0 {
                    break;
                }
                loader.feed(&chunk[..read])?;
                progress.advance(read as u64);
            }
            let rows = loader.finish()?;
            Ok(QueryOutput { columns: Vec::new(), rows: Vec::new(), tag: format!("COPY {rows}"), notices: Vec::new() })
        }
        CopyTarget::Stdin => Err(ExecError::new(
            sqlstate::FEATURE_NOT_SUPPORTED,
            "COPY FROM STDIN needs a client that sends data (psql against numadb serve)",
        )
        .with_hint("In numadb sql, use COPY table FROM '/path/file.csv' WITH (FORMAT csv)")),
        _ => Err(unsupported_copy("this COPY target")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csv() -> CopyFormat {
        CopyFormat { csv: true, delimiter: b',', null: String::new(), ..CopyFormat::default() }
    }

    #[test]
    fn csv_tells_null_from_the_empty_string_and_handles_quotes() {
        let (records, used) = split_records(b"1,,\"\"\n2,\"a,\"\"b\"\"\nc\",x\r\n3,", &csv(), false).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[0], vec![Some("1".into()), None, Some(String::new())]);
        assert_eq!(records[1], vec![Some("2".into()), Some("a,\"b\"\nc".into()), Some("x".into())]);
        assert_eq!(used, 23);
        let (records, _) = split_records(b"3,", &csv(), true).unwrap();
        assert_eq!(records, vec![vec![Some("3".into()), None]]);
        assert!(split_records(b"\"open", &csv(), true).is_err());
    }

    #[test]
    fn text_format_unescapes_and_knows_null() {
        let format = CopyFormat::default();
        let (records, _) = split_records(b"1\t\\N\ta\\tb\n", &format, false).unwrap();
        assert_eq!(records, vec![vec![Some("1".into()), None, Some("a\tb".into())]]);
        // Bytes in octal and hex, as PostgreSQL reads them (UTF-8 from its bytes); `\x` without a digit is `x`.
        let (records, _) = split_records(b"\\101\\x42\\103\\xq\\303\\251\\7\\1012\n", &format, false).unwrap();
        assert_eq!(records, vec![vec![Some("ABCxq\u{e9}\u{7}A2".into())]]);
        assert!(split_records(b"\\0\n", &format, false).is_err());
        assert!(split_records(b"\\303\n", &format, false).is_err());
    }

    #[test]
    fn legacy_csv_options_are_read() {
        let parsed = crate::parse::parse("COPY t FROM STDIN WITH CSV HEADER QUOTE ''''").unwrap();
        let crate::parse::Parsed::Sql(statement) = &parsed[0] else { panic!("{parsed:?}") };
        let sqlparser::ast::Statement::Copy { options, legacy_options, .. } = statement.as_ref() else {
            panic!("{statement:?}")
        };
        let format = CopyFormat::from_options(options, legacy_options).unwrap();
        assert!(format.csv && format.header && format.quote == b'\'', "{format:?}");
    }

    #[test]
    fn records_split_across_chunks() {
        let format = csv();
        let data = b"1,\"x\ny\"\n2,z\n";
        for cut in 0..data.len() {
            let (mut records, used) = split_records(&data[..cut], &format, false).unwrap();
            let mut rest = data[used..cut].to_vec();
            rest.extend_from_slice(&data[cut..]);
            let (more, _) = split_records(&rest, &format, true).unwrap();
            records.extend(more);
            assert_eq!(records.len(), 2, "cut at {cut}");
            assert_eq!(records[0][1], Some("x\ny".into()), "cut at {cut}");
        }
    }

    #[test]
    fn copy_from_a_file_reports_its_progress_in_bytes_of_the_file() {
        let db = crate::Database::new().unwrap();
        let mut session = db.session();
        session.execute_one("CREATE TABLE t (a INTEGER, b TEXT)").unwrap();
        let file = tempfile::NamedTempFile::new().unwrap();
        let text: String = (0..50_000).map(|i| format!("{i},row {i}\n")).collect();
        std::fs::write(file.path(), &text).unwrap();
        let progress = session.progress();
        assert_eq!(progress.get(), (0, 0));
        let sql = format!("COPY t FROM '{}' WITH (FORMAT csv)", file.path().display());
        assert_eq!(session.execute_one(&sql).unwrap().tag, "COPY 50000");
        assert_eq!(progress.get(), (text.len() as u64, text.len() as u64));
        // The next statement starts from nothing again.
        session.execute_one("SELECT COUNT(*) FROM t").unwrap();
        assert_eq!(progress.get(), (0, 0));
    }

    /// A COPY is all or nothing, also when its rows span several partitions built aside: an error on the last
    /// line (or a duplicate key against rows already there) leaves the table as it was; a good one adds every
    /// row, with its keys indexed, after the rows that were there.
    #[test]
    fn copy_adds_all_its_rows_or_none() {
        // Partitions of 1024 rows (staged as the input goes), and the default (one partition built at the end).
        for options in [" WITH (partition_rows = 1024)", ""] {
            copy_adds_all_its_rows_or_none_into(options);
        }
    }

    fn copy_adds_all_its_rows_or_none_into(options: &str) {
        let db = crate::Database::new().unwrap();
        let mut session = db.session();
        session.execute_one(&format!("CREATE TABLE t (k INTEGER PRIMARY KEY, b TEXT){options}")).unwrap();
        session.execute_one("INSERT INTO t VALUES (-1, 'before'), (-2, 'before')").unwrap();
        let count =
            |session: &mut crate::Session| session.execute_one("SELECT count(*) FROM t").unwrap().rows[0][0].clone();
        let copy = |session: &mut crate::Session, text: &str| {
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), text).unwrap();
            session.execute_one(&format!("COPY t FROM '{}' WITH (FORMAT csv)", file.path().display()))
        };
        let good: String = (0..100_000).map(|i| format!("{i},row {i}\n")).collect();
        let error = copy(&mut session, &format!("{good}oops,last\n")).unwrap_err();
        assert_eq!(error.sqlstate, sqlstate::INVALID_TEXT_REPRESENTATION);
        assert_eq!(count(&mut session), Value::Int(2));
        let error = copy(&mut session, &format!("{good}-1,duplicate of a row already there\n")).unwrap_err();
        assert_eq!(error.sqlstate, sqlstate::UNIQUE_VIOLATION);
        assert_eq!(count(&mut session), Value::Int(2));
        assert_eq!(copy(&mut session, &good).unwrap().tag, "COPY 100000");
        assert_eq!(count(&mut session), Value::Int(100_002));
        let row = session.execute_one("SELECT b FROM t WHERE k = 4321").unwrap().rows;
        assert_eq!(row, vec![vec![Value::text("row 4321")]]);
        let explain = session.execute_one("EXPLAIN SELECT b FROM t WHERE k = 4321").unwrap();
        assert!(format!("{:?}", explain.rows).contains("Index"), "{:?}", explain.rows);
        let before = session.execute_one("SELECT k FROM t WHERE b = 'before' ORDER BY k").unwrap().rows;
        assert_eq!(before, vec![vec![Value::Int(-2)], vec![Value::Int(-1)]]);
        assert_eq!(copy(&mut session, &good).unwrap_err().sqlstate, sqlstate::UNIQUE_VIOLATION);
        // Every row is in a sealed partition: none was left in the delta.
        let sealed = session
            .execute_one("SELECT sum(rows) FROM numadb.placement WHERE table_name = 't' AND column_name = 'k'")
            .unwrap()
            .rows;
        assert_eq!(sealed, vec![vec![Value::Int(100_002)]], "{options}");
    }

    /// A `varchar(n)` column takes a longer text from COPY only if the excess is spaces, which it drops, on both
    /// of COPY's paths (rows into the delta, partitions built aside); a longer one fails the COPY, naming its line.
    #[test]
    fn copy_fits_texts_to_their_column_length() {
        let db = crate::Database::new().unwrap();
        let mut session = db.session();
        session.execute_one("CREATE TABLE t (k INTEGER, s VARCHAR(4)) WITH (partition_rows = 1024)").unwrap();
        let copy = |session: &mut crate::Session, text: &str| {
            let file = tempfile::NamedTempFile::new().unwrap();
            std::fs::write(file.path(), text).unwrap();
            session.execute_one(&format!("COPY t FROM '{}' WITH (FORMAT csv)", file.path().display()))
        };
        for rows in [10, 5000] {
            let good: String = (0..rows).map(|i| format!("{i},\"{:<6}\"\n", i % 1000)).collect();
            let error = copy(&mut session, &format!("{good}{rows},abcde\n")).unwrap_err();
            assert_eq!(error.sqlstate, sqlstate::STRING_DATA_RIGHT_TRUNCATION, "{rows} rows: {error:?}");
            assert!(error.message.contains("character varying(4)"), "{}", error.message);
            let line = format!("line {}", rows + 1);
            assert!(error.detail.as_deref().is_some_and(|d| d.contains(&line)), "{:?}", error.detail);
            session.execute_one("DELETE FROM t").unwrap();
            assert_eq!(copy(&mut session, &good).unwrap().tag, format!("COPY {rows}"));
            let lengths = session.execute_one("SELECT max(length(s)), min(length(s)), count(*) FROM t").unwrap().rows;
            assert_eq!(lengths, vec![vec![Value::Int(4), Value::Int(4), Value::Int(rows)]], "{rows} rows");
            let row = session.execute_one("SELECT s FROM t WHERE k = 7").unwrap().rows;
            assert_eq!(row, vec![vec![Value::text("7   ")]]);
            session.execute_one("DELETE FROM t").unwrap();
        }
    }
}
