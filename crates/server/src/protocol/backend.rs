//! Encoding what the server sends: pgwire's backend messages, written into one buffer per connection that is
//! flushed to the socket only when the connection is about to wait for the client (see `connection.rs`).
//!
//! Rows are the hot path (a point lookup sends BindComplete, RowDescription, DataRow, CommandComplete and
//! ReadyForQuery), so `DataRow` is written here field by field straight into the buffer, and a statement's
//! RowDescription is encoded once and copied thereafter. Everything else goes through pgwire's encoders.

use bytes::{BufMut, BytesMut};
use numadb_execution::ExecError;
use pgwire::messages::Message;
use pgwire::messages::data::{FieldDescription, NoData, ParameterDescription, RowDescription};
use pgwire::messages::extendedquery::{BindComplete, CloseComplete, ParseComplete, PortalSuspended};
use pgwire::messages::response::{
    CommandComplete, EmptyQueryResponse, ErrorResponse, NoticeResponse, ReadyForQuery, TransactionStatus,
};
use pgwire::messages::startup::{Authentication, BackendKeyData, NegotiateProtocolVersion, ParameterStatus, SecretKey};

use crate::protocol::types::{Column, Format};

/// Reported parameter values are cut to this many bytes (libpq rejects ordinary messages over 30 000 bytes).
const PARAMETER_STATUS_VALUE_BYTES_MAX: usize = 1024;

/// How severe an error is: `Error` ends the statement, `Fatal` the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// `ERROR`.
    Error,
    /// `FATAL`.
    Fatal,
}

impl Severity {
    fn name(self) -> &'static str {
        match self {
            Severity::Error => "ERROR",
            Severity::Fatal => "FATAL",
        }
    }
}

/// The bytes waiting to be written to one client.
#[derive(Default)]
pub struct Output {
    buffer: BytesMut,
}

impl Output {
    /// An empty buffer.
    pub fn new() -> Self {
        Output { buffer: BytesMut::with_capacity(8192) }
    }

    /// The encoded bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buffer
    }

    /// Bytes waiting.
    pub fn len(&self) -> usize {
        self.buffer.len()
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// Forgets the bytes (after they were written).
    pub fn clear(&mut self) {
        self.buffer.clear();
        // A large result leaves a large buffer behind; give it back rather than keep it per connection.
        if self.buffer.capacity() > 1 << 20 {
            self.buffer = BytesMut::with_capacity(8192);
        }
    }

    /// Drops the first `count` bytes (they were written).
    pub fn consume(&mut self, count: usize) {
        let count = count.min(self.buffer.len());
        bytes::Buf::advance(&mut self.buffer, count);
    }

    /// Appends raw, already encoded bytes (a cached RowDescription).
    pub fn raw(&mut self, bytes: &[u8]) {
        self.buffer.put_slice(bytes);
    }

    /// Encodes a pgwire message. pgwire writes the type byte before it checks the length, so a failed encode is
    /// cut back off; the callers only pass messages whose sizes they bound.
    fn message<M: Message>(&mut self, message: &M) {
        let mark = self.buffer.len();
        if message.encode(&mut self.buffer).is_err() {
            self.buffer.truncate(mark);
        }
    }

    /// `AuthenticationOk` and friends.
    pub fn authentication(&mut self, authentication: Authentication) {
        self.message(&authentication);
    }

    /// `ParameterStatus`.
    pub fn parameter_status(&mut self, name: &str, value: &str) {
        let mut end = value.len().min(PARAMETER_STATUS_VALUE_BYTES_MAX);
        while !value.is_char_boundary(end) {
            end -= 1;
        }
        self.message(&ParameterStatus::new(name.to_string(), value[..end].to_string()));
    }

    /// `BackendKeyData`.
    pub fn backend_key_data(&mut self, process_id: i32, secret_key: i32) {
        self.message(&BackendKeyData::new(process_id, SecretKey::I32(secret_key)));
    }

    /// `NegotiateProtocolVersion`: the newest minor version numadb speaks and the options it ignored.
    pub fn negotiate_protocol_version(&mut self, newest_minor: i32, unsupported: Vec<String>) {
        self.message(&NegotiateProtocolVersion::new(newest_minor, unsupported));
    }

    /// `ReadyForQuery`.
    pub fn ready_for_query(&mut self, status: TransactionStatus) {
        self.message(&ReadyForQuery::new(status));
    }

    /// `ParseComplete`.
    pub fn parse_complete(&mut self) {
        self.message(&ParseComplete::new());
    }

    /// `BindComplete`.
    pub fn bind_complete(&mut self) {
        self.message(&BindComplete::new());
    }

    /// `CloseComplete`.
    pub fn close_complete(&mut self) {
        self.message(&CloseComplete::new());
    }

    /// `NoData`.
    pub fn no_data(&mut self) {
        self.message(&NoData::new());
    }

    /// `PortalSuspended`.
    pub fn portal_suspended(&mut self) {
        self.message(&PortalSuspended::new());
    }

    /// `EmptyQueryResponse`.
    pub fn empty_query(&mut self) {
        self.message(&EmptyQueryResponse::new());
    }

    /// `CommandComplete`.
    pub fn command_complete(&mut self, tag: String) {
        self.message(&CommandComplete::new(tag));
    }

    /// `ParameterDescription`.
    pub fn parameter_description(&mut self, type_oids: Vec<u32>) {
        self.message(&ParameterDescription::new(type_oids));
    }

    /// `RowDescription` with one format for every column or one per column (as `Bind` gives them).
    pub fn row_description(&mut self, columns: &[Column], formats: &[Format]) {
        let fields = columns
            .iter()
            .enumerate()
            .map(|(i, column)| {
                FieldDescription::new(
                    column.name.clone(),
                    0,
                    0,
                    column.pg_type.oid(),
                    column.pg_type.size(),
                    -1,
                    format_of(formats, i).code(),
                )
            })
            .collect();
        self.message(&RowDescription::new(fields));
    }

    /// `CopyInResponse` for `columns` text or CSV columns.
    pub fn copy_in_response(&mut self, columns: usize) {
        let columns = i16::try_from(columns).unwrap_or(i16::MAX);
        self.message(&pgwire::messages::copy::CopyInResponse::new(0, columns, vec![0; columns as usize]));
    }

    /// `ErrorResponse` with the SQLSTATE, message, detail and hint of `error`.
    pub fn error(&mut self, severity: Severity, error: &ExecError) {
        self.message(&ErrorResponse::new(fields(severity.name(), error)));
    }

    /// `NoticeResponse`.
    pub fn notice(&mut self, error: &ExecError) {
        self.message(&NoticeResponse::new(fields("NOTICE", error)));
    }

    /// Starts a `DataRow` of `columns` fields; returns where its length goes. Fields follow with
    /// [`Output::field_null`] and [`Output::field_bytes`] / [`Output::field_with`]; [`Output::end_data_row`] closes it.
    pub fn begin_data_row(&mut self, columns: usize) -> usize {
        self.buffer.put_u8(b'D');
        let start = self.buffer.len();
        self.buffer.put_i32(0);
        self.buffer.put_i16(columns as i16);
        start
    }

    /// A NULL field.
    pub fn field_null(&mut self) {
        self.buffer.put_i32(-1);
    }

    /// A field given as bytes.
    pub fn field_bytes(&mut self, bytes: &[u8]) {
        self.buffer.put_i32(bytes.len() as i32);
        self.buffer.put_slice(bytes);
    }

    /// A field written by `write` straight into the buffer.
    pub fn field_with(&mut self, write: impl FnOnce(&mut BytesMut)) {
        let start = self.buffer.len();
        self.buffer.put_i32(0);
        write(&mut self.buffer);
        let length = (self.buffer.len() - start - 4) as i32;
        self.buffer[start..start + 4].copy_from_slice(&length.to_be_bytes());
    }

    /// Closes the `DataRow` begun at `start`.
    pub fn end_data_row(&mut self, start: usize) {
        let length = (self.buffer.len() - start) as i32;
        self.buffer[start..start + 4].copy_from_slice(&length.to_be_bytes());
    }

    /// Drops everything after `mark` (a row that failed to encode half way).
    pub fn truncate(&mut self, mark: usize) {
        self.buffer.truncate(mark);
    }
}

/// The format of column `i` given a `Bind`'s result format list (none: text; one: for all; else one each).
pub fn format_of(formats: &[Format], i: usize) -> Format {
    match formats {
        [] => Format::Text,
        [one] => *one,
        many => many.get(i).copied().unwrap_or(Format::Text),
    }
}

fn fields(severity: &str, error: &ExecError) -> Vec<(u8, String)> {
    let mut fields = vec![
        (b'S', severity.to_string()),
        (b'V', severity.to_string()),
        (b'C', error.sqlstate.to_string()),
        (b'M', error.message.clone()),
    ];
    if let Some(detail) = &error.detail {
        fields.push((b'D', detail.clone()));
    }
    if let Some(hint) = &error.hint {
        fields.push((b'H', hint.clone()));
    }
    fields
}
