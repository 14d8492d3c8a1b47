//! Decoding what clients send: framing and every frontend message, total over its input.
//!
//! Every function here returns an error instead of panicking, whatever the bytes: lengths are checked against
//! the configured maximum before a byte of the body is buffered, every read is bounds-checked, counts are
//! checked against the bytes that remain, strings must be NUL-terminated inside their message and be UTF-8,
//! and a message must be consumed exactly (trailing bytes are an error). pgwire's decoders trust the length
//! field and index into the buffer (a `Bind` whose body is shorter than its counts make it panic), so the server
//! decodes frontend messages here and keeps pgwire for the backend side; `tests/hostile.rs`, the fuzz target in
//! `crates/server/fuzz` and the property tests below hold this module to that.
//!
//! Decoded messages borrow from the input buffer: a point lookup's Bind/Execute/Sync allocates only the
//! parameter vector.

use std::fmt;

/// `SSLRequest`'s code in a startup packet.
pub const SSL_REQUEST_CODE: i32 = 80_877_103;
/// `GSSENCRequest`'s code.
pub const GSSENC_REQUEST_CODE: i32 = 80_877_104;
/// `CancelRequest`'s code.
pub const CANCEL_REQUEST_CODE: i32 = 80_877_102;
/// Protocol 3.0, the version numadb speaks.
pub const PROTOCOL_3_0: i32 = 3 << 16;
/// The largest startup packet accepted (PostgreSQL's `MAX_STARTUP_PACKET_LENGTH`).
pub const STARTUP_PACKET_BYTES_MAX: usize = 10_000;
/// Bytes of a regular message's header: the type byte and the length.
pub const HEADER_BYTES: usize = 5;

/// A message that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// What is wrong, in PostgreSQL's words where it has them.
    pub message: String,
    /// Whether the stream can no longer be framed (a bad length or an unknown message type): the connection must
    /// end. Otherwise only this message was bad and the next one starts where its length said.
    pub fatal: bool,
    /// Invalid UTF-8 (SQLSTATE 22021) rather than a malformed message (08P01).
    pub bad_encoding: bool,
}

impl DecodeError {
    fn malformed(message: impl Into<String>) -> Self {
        DecodeError { message: message.into(), fatal: false, bad_encoding: false }
    }

    fn fatal(message: impl Into<String>) -> Self {
        DecodeError { message: message.into(), fatal: true, bad_encoding: false }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// What a statement or portal name in `Describe` and `Close` refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `S`: a prepared statement.
    Statement,
    /// `P`: a portal.
    Portal,
}

/// A decoded frontend message (after startup).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frontend<'a> {
    /// `Q`: a simple query (one or more statements).
    Query(&'a str),
    /// `P`: parse a statement; parameter type OIDs (0 = unspecified).
    Parse {
        /// Statement name (`""` is the unnamed statement).
        name: &'a str,
        /// Its text.
        query: &'a str,
        /// Declared parameter types.
        param_types: Vec<u32>,
    },
    /// `B`: bind parameters to a statement, making a portal.
    Bind {
        /// Portal name.
        portal: &'a str,
        /// Statement name.
        statement: &'a str,
        /// Parameter format codes (none: all text; one: for all; else one each).
        param_formats: Vec<i16>,
        /// Parameter values (`None` is NULL).
        params: Vec<Option<&'a [u8]>>,
        /// Result column format codes (same rules).
        result_formats: Vec<i16>,
    },
    /// `D`: describe a statement or portal.
    Describe {
        /// Which kind.
        target: Target,
        /// Its name.
        name: &'a str,
    },
    /// `E`: execute a portal, at most `max_rows` rows (0: all).
    Execute {
        /// Portal name.
        portal: &'a str,
        /// Row limit.
        max_rows: i32,
    },
    /// `C`: close a statement or portal.
    Close {
        /// Which kind.
        target: Target,
        /// Its name.
        name: &'a str,
    },
    /// `S`.
    Sync,
    /// `H`.
    Flush,
    /// `X`.
    Terminate,
    /// `d`: a chunk of COPY data.
    CopyData(&'a [u8]),
    /// `c`.
    CopyDone,
    /// `f`: the client aborts a COPY.
    CopyFail(&'a str),
    /// `p`: a password or SASL message; its meaning depends on the authentication exchange.
    Password(&'a [u8]),
}

impl Frontend<'_> {
    /// The message's type byte (for logs and errors).
    pub fn tag(&self) -> u8 {
        match self {
            Frontend::Query(_) => b'Q',
            Frontend::Parse { .. } => b'P',
            Frontend::Bind { .. } => b'B',
            Frontend::Describe { .. } => b'D',
            Frontend::Execute { .. } => b'E',
            Frontend::Close { .. } => b'C',
            Frontend::Sync => b'S',
            Frontend::Flush => b'H',
            Frontend::Terminate => b'X',
            Frontend::CopyData(_) => b'd',
            Frontend::CopyDone => b'c',
            Frontend::CopyFail(_) => b'f',
            Frontend::Password(_) => b'p',
        }
    }
}

/// The first packet of a connection (it has no type byte).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupPacket {
    /// The client asks for TLS.
    SslRequest,
    /// The client asks for GSSAPI encryption.
    GssEncRequest,
    /// Cancel the statement running in another connection.
    Cancel {
        /// That connection's process id.
        process_id: i32,
        /// Its secret key.
        secret_key: i32,
    },
    /// A session: the protocol version and the parameters (`user`, `database`, `options`, …).
    Startup {
        /// Major version (3).
        major: u16,
        /// Minor version.
        minor: u16,
        /// Parameters in the order sent.
        parameters: Vec<(String, String)>,
    },
}

/// The frame at the start of `input`: `Ok(None)` until it is complete. `body_bytes_max` bounds the body;
/// a larger length, a length below 4 or an unknown type byte is a fatal error (the stream cannot be framed).
pub fn frame(input: &[u8], body_bytes_max: usize) -> Result<Option<(u8, &[u8])>, DecodeError> {
    let Some(header) = input.get(..HEADER_BYTES) else {
        // Check the type byte as soon as it arrives, so garbage fails fast.
        if let Some(&tag) = input.first() {
            check_tag(tag)?;
        }
        return Ok(None);
    };
    let tag = header[0];
    check_tag(tag)?;
    let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    if length < 4 {
        return Err(DecodeError::fatal(format!("invalid message length {length}")));
    }
    let body_bytes = length as usize - 4;
    if body_bytes > body_bytes_max {
        return Err(DecodeError::fatal(format!(
            "invalid message length {length}: messages are limited to {body_bytes_max} bytes"
        )));
    }
    Ok(input.get(HEADER_BYTES..HEADER_BYTES + body_bytes).map(|body| (tag, body)))
}

/// Bytes of the frame at the start of `input` once complete (header included); `None` while its header is
/// incomplete. Call after [`frame`] accepted the header.
pub fn frame_bytes(input: &[u8]) -> Option<usize> {
    let header = input.get(..HEADER_BYTES)?;
    let length = i32::from_be_bytes([header[1], header[2], header[3], header[4]]);
    usize::try_from(length).ok().map(|l| l + 1)
}

fn check_tag(tag: u8) -> Result<(), DecodeError> {
    match tag {
        b'Q' | b'P' | b'B' | b'D' | b'E' | b'C' | b'S' | b'H' | b'X' | b'd' | b'c' | b'f' | b'p' => Ok(()),
        other => Err(DecodeError::fatal(format!("invalid frontend message type {other}"))),
    }
}

/// Decodes one framed message.
pub fn decode(tag: u8, body: &[u8]) -> Result<Frontend<'_>, DecodeError> {
    let mut reader = Reader::new(body);
    let message = match tag {
        b'Q' => Frontend::Query(reader.text()?),
        b'P' => {
            let name = reader.cstr()?;
            let query = reader.text()?;
            let count = reader.count(4)?;
            let mut param_types = Vec::with_capacity(count);
            for _ in 0..count {
                param_types.push(reader.u32()?);
            }
            Frontend::Parse { name, query, param_types }
        }
        b'B' => {
            let portal = reader.cstr()?;
            let statement = reader.cstr()?;
            let count = reader.count(2)?;
            let mut param_formats = Vec::with_capacity(count);
            for _ in 0..count {
                param_formats.push(reader.i16()?);
            }
            let count = reader.count(4)?;
            let mut params = Vec::with_capacity(count);
            for _ in 0..count {
                let length = reader.i32()?;
                params.push(match length {
                    -1 => None,
                    length if length < -1 => {
                        return Err(DecodeError::malformed(format!("invalid parameter length {length}")));
                    }
                    length => Some(reader.bytes(length as usize)?),
                });
            }
            let count = reader.count(2)?;
            let mut result_formats = Vec::with_capacity(count);
            for _ in 0..count {
                result_formats.push(reader.i16()?);
            }
            Frontend::Bind { portal, statement, param_formats, params, result_formats }
        }
        b'D' => {
            let target = reader.target()?;
            Frontend::Describe { target, name: reader.cstr()? }
        }
        b'E' => {
            let portal = reader.cstr()?;
            Frontend::Execute { portal, max_rows: reader.i32()? }
        }
        b'C' => {
            let target = reader.target()?;
            Frontend::Close { target, name: reader.cstr()? }
        }
        b'S' => Frontend::Sync,
        b'H' => Frontend::Flush,
        b'X' => Frontend::Terminate,
        b'd' => return Ok(Frontend::CopyData(body)),
        b'c' => Frontend::CopyDone,
        b'f' => Frontend::CopyFail(reader.text()?),
        b'p' => return Ok(Frontend::Password(body)),
        other => return Err(DecodeError::fatal(format!("invalid frontend message type {other}"))),
    };
    reader.finish(tag)?;
    Ok(message)
}

/// Decodes a startup-phase packet from its body (the bytes after the length word). The caller checks the
/// length against [`STARTUP_PACKET_BYTES_MAX`].
pub fn decode_startup(body: &[u8]) -> Result<StartupPacket, DecodeError> {
    let mut reader = Reader::new(body);
    let code = reader.i32().map_err(|_| DecodeError::fatal("invalid length of startup packet"))?;
    let packet = match code {
        SSL_REQUEST_CODE => StartupPacket::SslRequest,
        GSSENC_REQUEST_CODE => StartupPacket::GssEncRequest,
        CANCEL_REQUEST_CODE => {
            let process_id = reader.i32()?;
            let secret_key = reader.i32()?;
            StartupPacket::Cancel { process_id, secret_key }
        }
        version => {
            let major = (version >> 16) as u16;
            let minor = (version & 0xffff) as u16;
            if major != 3 {
                return Err(DecodeError::fatal(format!(
                    "unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.0"
                )));
            }
            let mut parameters = Vec::new();
            loop {
                let name = reader.cstr()?;
                if name.is_empty() {
                    break;
                }
                let value = reader.cstr()?;
                parameters.push((name.to_string(), value.to_string()));
            }
            StartupPacket::Startup { major, minor, parameters }
        }
    };
    if reader.remaining() != 0 {
        return Err(DecodeError::fatal("invalid startup packet layout: expected terminator as last byte"));
    }
    Ok(packet)
}

/// A bounds-checked cursor over a message body.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, position: 0 }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    fn insufficient() -> DecodeError {
        DecodeError::malformed("insufficient data left in message")
    }

    pub(crate) fn bytes(&mut self, count: usize) -> Result<&'a [u8], DecodeError> {
        if count > self.remaining() {
            return Err(Self::insufficient());
        }
        let slice = &self.bytes[self.position..self.position + count];
        self.position += count;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.bytes(N)?);
        Ok(array)
    }

    pub(crate) fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array()?))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array()?))
    }

    /// A 16-bit element count, unsigned as PostgreSQL reads it (up to 65 535 parameters), checked against the
    /// bytes left (each element takes at least `element_bytes`).
    fn count(&mut self, element_bytes: usize) -> Result<usize, DecodeError> {
        let count = usize::from(u16::from_be_bytes(self.array()?));
        if count * element_bytes > self.remaining() {
            return Err(Self::insufficient());
        }
        Ok(count)
    }

    /// A NUL-terminated byte string (without the NUL).
    fn cbytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let rest = &self.bytes[self.position..];
        let end =
            rest.iter().position(|&b| b == 0).ok_or_else(|| DecodeError::malformed("invalid string in message"))?;
        self.position += end + 1;
        Ok(&rest[..end])
    }

    /// A NUL-terminated name or parameter (UTF-8).
    pub(crate) fn cstr(&mut self) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.cbytes()?).map_err(|_| DecodeError::malformed("invalid string in message"))
    }

    /// A NUL-terminated SQL text (invalid UTF-8 is SQLSTATE 22021, as in PostgreSQL).
    fn text(&mut self) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.cbytes()?).map_err(|error| DecodeError {
            message: format!("invalid byte sequence for encoding \"UTF8\" at offset {}", error.valid_up_to()),
            fatal: false,
            bad_encoding: true,
        })
    }

    fn target(&mut self) -> Result<Target, DecodeError> {
        match self.array::<1>()?[0] {
            b'S' => Ok(Target::Statement),
            b'P' => Ok(Target::Portal),
            other => Err(DecodeError::malformed(format!(
                "invalid DESCRIBE/CLOSE message subtype {}",
                char::from(other).escape_default()
            ))),
        }
    }

    fn finish(&self, tag: u8) -> Result<(), DecodeError> {
        if self.remaining() == 0 {
            Ok(())
        } else {
            Err(DecodeError::malformed(format!(
                "invalid message format: {} bytes left over in a message of type '{}'",
                self.remaining(),
                char::from(tag).escape_default()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, BytesMut};
    use pgwire::messages::PgWireFrontendMessage;
    use pgwire::messages::extendedquery::{Bind, Close, Describe, Execute, Parse, Sync};
    use pgwire::messages::simplequery::Query;

    use super::*;

    fn encoded(message: PgWireFrontendMessage) -> Vec<u8> {
        let mut buffer = BytesMut::new();
        message.encode(&mut buffer).unwrap();
        buffer.to_vec()
    }

    fn decode_all(mut input: &[u8]) -> Result<Vec<Frontend<'_>>, DecodeError> {
        let mut messages = Vec::new();
        while let Some((tag, body)) = frame(input, 1 << 20)? {
            messages.push(decode(tag, body)?);
            input = &input[HEADER_BYTES + body.len()..];
        }
        Ok(messages)
    }

    #[test]
    fn messages_pgwire_encodes_decode_to_the_same_fields() {
        let bind = Bind::new(
            Some("portal".into()),
            Some("statement".into()),
            vec![1],
            vec![Some(bytes::Bytes::from_static(&[0, 0, 0, 7])), None],
            vec![0, 1],
        );
        let mut input = encoded(PgWireFrontendMessage::Parse(Parse::new(
            Some("statement".into()),
            "SELECT $1, $2".into(),
            vec![23, 0],
        )));
        input.extend(encoded(PgWireFrontendMessage::Bind(bind)));
        input.extend(encoded(PgWireFrontendMessage::Describe(Describe::new(b'P', Some("portal".into())))));
        input.extend(encoded(PgWireFrontendMessage::Execute(Execute::new(Some("portal".into()), 10))));
        input.extend(encoded(PgWireFrontendMessage::Close(Close::new(b'S', None))));
        input.extend(encoded(PgWireFrontendMessage::Sync(Sync::new())));
        input.extend(encoded(PgWireFrontendMessage::Query(Query::new("SELECT 1; SELECT 2".into()))));
        let messages = decode_all(&input).unwrap();
        assert_eq!(
            messages,
            vec![
                Frontend::Parse { name: "statement", query: "SELECT $1, $2", param_types: vec![23, 0] },
                Frontend::Bind {
                    portal: "portal",
                    statement: "statement",
                    param_formats: vec![1],
                    params: vec![Some(&[0, 0, 0, 7][..]), None],
                    result_formats: vec![0, 1],
                },
                Frontend::Describe { target: Target::Portal, name: "portal" },
                Frontend::Execute { portal: "portal", max_rows: 10 },
                Frontend::Close { target: Target::Statement, name: "" },
                Frontend::Sync,
                Frontend::Query("SELECT 1; SELECT 2"),
            ]
        );
    }

    #[test]
    fn incomplete_frames_wait_and_bad_lengths_are_fatal() {
        let input = encoded(PgWireFrontendMessage::Sync(Sync::new()));
        for cut in 0..input.len() {
            assert_eq!(frame(&input[..cut], 100), Ok(None), "cut at {cut}");
        }
        assert!(frame(b"S\0\0\0\x03", 100).unwrap_err().fatal);
        assert!(frame(b"S\xff\xff\xff\xff", 100).unwrap_err().fatal);
        assert!(frame(b"Q\0\0\x10\0", 100).unwrap_err().fatal, "over the limit before the body arrives");
        assert!(frame(b"\x00", 100).unwrap_err().fatal, "unknown type byte fails at once");
        assert!(frame(b"!", 100).unwrap_err().message.contains("invalid frontend message type 33"));
    }

    #[test]
    fn truncated_and_overlong_bodies_are_errors_not_panics() {
        let bind = encoded(PgWireFrontendMessage::Bind(Bind::new(
            None,
            Some("s".into()),
            vec![0, 1],
            vec![Some(bytes::Bytes::from_static(b"12345")), None],
            vec![1],
        )));
        let body = &bind[HEADER_BYTES..];
        for cut in 0..body.len() {
            let error = decode(b'B', &body[..cut]).unwrap_err();
            assert!(!error.fatal, "a bad body leaves framing intact");
        }
        let mut longer = body.to_vec();
        longer.push(0);
        assert!(decode(b'B', &longer).unwrap_err().message.contains("left over"));
        assert!(decode(b'B', &[0, 0, 0x7f, 0xff]).is_err(), "a count larger than the body");
        assert!(decode(b'B', &[0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe]).is_err(), "parameter length -2");
        assert!(decode(b'D', b"Xname\0").is_err());
        assert!(decode(b'Q', b"SELECT 1").is_err(), "no terminator");
        let error = decode(b'Q', b"SELECT '\xff'\0").unwrap_err();
        assert!(error.bad_encoding);
    }

    #[test]
    fn startup_packets() {
        let mut body = BytesMut::new();
        body.put_i32(PROTOCOL_3_0);
        for part in ["user", "alice", "database", "db", ""] {
            body.put_slice(part.as_bytes());
            body.put_u8(0);
        }
        assert_eq!(
            decode_startup(&body).unwrap(),
            StartupPacket::Startup {
                major: 3,
                minor: 0,
                parameters: vec![("user".into(), "alice".into()), ("database".into(), "db".into())]
            }
        );
        assert_eq!(decode_startup(&SSL_REQUEST_CODE.to_be_bytes()).unwrap(), StartupPacket::SslRequest);
        let mut cancel = CANCEL_REQUEST_CODE.to_be_bytes().to_vec();
        cancel.extend(7i32.to_be_bytes());
        cancel.extend((-9i32).to_be_bytes());
        assert_eq!(decode_startup(&cancel).unwrap(), StartupPacket::Cancel { process_id: 7, secret_key: -9 });
        assert!(decode_startup(&(2i32 << 16).to_be_bytes()).unwrap_err().message.contains("unsupported"));
        assert!(decode_startup(&body[..body.len() - 1]).is_err(), "no final terminator");
        assert!(decode_startup(&[1, 2]).is_err());
    }

    /// Mutates valid message streams (bit flips, truncations, insertions, length rewrites, random bytes) and
    /// decodes them: every outcome is fine except a panic.
    #[test]
    fn mutated_message_streams_never_panic() {
        let seeds: Vec<Vec<u8>> = vec![
            encoded(PgWireFrontendMessage::Parse(Parse::new(Some("s".into()), "SELECT $1".into(), vec![23]))),
            encoded(PgWireFrontendMessage::Bind(Bind::new(
                None,
                Some("s".into()),
                vec![1],
                vec![Some(bytes::Bytes::from_static(&[0, 0, 0, 1]))],
                vec![1],
            ))),
            encoded(PgWireFrontendMessage::Describe(Describe::new(b'S', Some("s".into())))),
            encoded(PgWireFrontendMessage::Execute(Execute::new(None, 0))),
            encoded(PgWireFrontendMessage::Close(Close::new(b'P', None))),
            encoded(PgWireFrontendMessage::Query(Query::new("SELECT 1".into()))),
            b"d\0\0\0\x08abcd".to_vec(),
            b"f\0\0\0\x09oops\0".to_vec(),
        ];
        // Seeded: a failure reproduces.
        let mut rng = fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15);
        for _ in 0..200_000 {
            let mut input = Vec::new();
            for _ in 0..1 + rng.usize(..3) {
                input.extend(&seeds[rng.usize(..seeds.len())]);
            }
            for _ in 0..1 + rng.usize(..4) {
                let at = rng.usize(..input.len().max(1));
                match rng.usize(..6) {
                    0 if !input.is_empty() => input[at] ^= 1 << rng.usize(..8),
                    1 => input.truncate(at),
                    2 => input.insert(at.min(input.len()), rng.u64(..) as u8),
                    3 if input.len() >= at + 5 => {
                        input[at + 1..at + 5].copy_from_slice(&(rng.u64(..) as i32 % 64).to_be_bytes())
                    }
                    4 if !input.is_empty() => input[at] = rng.u64(..) as u8,
                    _ => input.extend((0..rng.usize(..16)).map(|_| rng.u64(..) as u8)),
                }
            }
            let _ = decode_all(&input);
            let _ = decode_startup(&input);
        }
    }
}
