//! One client connection on its own thread: the startup exchange (TLS and GSS refused, cancel requests,
//! protocol version, authentication, session parameters), then the message loop.
//!
//! The loop decodes every complete message in the input buffer, lets the [`Handler`] answer each into one
//! output buffer, and writes that buffer with one `write` when no complete message is left — that is, just
//! before the thread would block waiting for the client. A prepared transaction (Bind, Describe, Execute, Sync
//! in one packet) therefore costs one read and one write, and a pipeline of them costs one write in all. Large
//! results go out every [`OUTPUT_FLUSH_BYTES`](crate::handler::OUTPUT_FLUSH_BYTES) while they are encoded.
//!
//! A thread per connection keeps a slow or dead client's cost on its own thread: it blocks in `read` or `write`
//! and nobody else waits for it. Statements run on that thread too (point lookups run on the caller's thread in
//! numadb, scans on the scheduler's workers while the caller waits), so a lookup costs no hand-off.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use numadb_execution::{ExecError, sqlstate};
use pgwire::messages::startup::Authentication as AuthMessage;

use crate::auth::{self, ScramError, ScramExchange, Verifier};
use crate::config::Authentication;
use crate::handler::{Flow, Handler, Identity, Sink};
use crate::protocol::backend::{Output, Severity};
use crate::protocol::frontend::{self, DecodeError, HEADER_BYTES, STARTUP_PACKET_BYTES_MAX, StartupPacket};
use crate::registry::{Entry, Handshake};
use crate::server::Shared;

/// Bytes read from the socket at a time.
const READ_BYTES: usize = 16 << 10;
/// The input buffer is given back when it grew past this for one large message.
const INPUT_KEEP_BYTES: usize = 1 << 20;

/// The socket, the bytes read but not yet handled, and the counters.
pub(crate) struct Io {
    pub(crate) stream: TcpStream,
    /// Bytes read land in `buffer[end..]`; `buffer[start..end]` are read but not handled yet. The buffer stays
    /// initialised at its length, so a read does not clear memory first.
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    pub(crate) shared: Arc<Shared>,
}

impl Io {
    pub(crate) fn new(stream: TcpStream, shared: Arc<Shared>) -> Self {
        Io { stream, buffer: vec![0; READ_BYTES], start: 0, end: 0, shared }
    }

    /// Reads more input; `Ok(false)` at the end of the stream (on a non-blocking socket, `WouldBlock` when there
    /// is nothing to read).
    pub(crate) fn fill(&mut self) -> io::Result<bool> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
            if self.buffer.len() > INPUT_KEEP_BYTES {
                self.buffer = vec![0; READ_BYTES];
            }
        } else if self.start > 0 && self.buffer.len() - self.end < READ_BYTES {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.buffer.len() - self.end < READ_BYTES {
            // A message larger than what is buffered: grow by what a read brings, never by what a length field
            // claims.
            self.buffer.resize(self.end + READ_BYTES, 0);
        }
        let read = loop {
            match self.stream.read(&mut self.buffer[self.end..]) {
                Ok(read) => break read,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        self.end += read;
        let counters = &self.shared.registry.counters;
        counters.socket_reads.fetch_add(1, Ordering::Relaxed);
        counters.bytes_in.fetch_add(read as u64, Ordering::Relaxed);
        Ok(read > 0)
    }

    /// The bytes read and not yet handled.
    pub(crate) fn pending(&self) -> &[u8] {
        &self.buffer[self.start..self.end]
    }

    /// Marks `count` pending bytes handled.
    pub(crate) fn consume(&mut self, count: usize) {
        self.start = (self.start + count).min(self.end);
    }
}

/// A session between statements: what moves between its thread and an event loop.
pub(crate) struct Conn {
    pub(crate) io: Io,
    pub(crate) out: Output,
    pub(crate) handler: Handler,
    /// Round trips in a row, on the session's thread, that only had messages an event loop could handle.
    pub(crate) fast_streak: u32,
}

/// Writes output to the socket, counting system calls.
pub(crate) struct SocketSink<'a> {
    pub(crate) stream: &'a TcpStream,
    pub(crate) shared: &'a Shared,
}

impl Sink for SocketSink<'_> {
    fn flush(&mut self, out: &mut Output) -> io::Result<()> {
        let mut bytes = out.bytes();
        let counters = &self.shared.registry.counters;
        while !bytes.is_empty() {
            // Counted before the call, so that a client that has the answer also sees the count.
            counters.socket_writes.fetch_add(1, Ordering::Relaxed);
            match (&mut &*self.stream).write(bytes) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => {
                    counters.bytes_out.fetch_add(written as u64, Ordering::Relaxed);
                    bytes = &bytes[written..];
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        out.clear();
        Ok(())
    }
}

/// Serves one accepted connection to its end. Errors are the client's business (it went away, or broke the
/// protocol and was told so); nothing here can take the server down.
pub fn serve(shared: Arc<Shared>, stream: TcpStream, handshake: Handshake) {
    let peer = stream.peer_addr().ok();
    let _ = stream.set_nodelay(true);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(shared.config.keepalive_idle)
        .with_interval(std::time::Duration::from_secs(10));
    let _ = socket2::SockRef::from(&stream).set_tcp_keepalive(&keepalive);
    let mut io = Io::new(stream, Arc::clone(&shared));
    let mut out = Output::new();
    let _ = io.stream.set_read_timeout(Some(shared.config.startup_timeout));
    let _ = io.stream.set_write_timeout(Some(shared.config.startup_timeout));
    let started = match startup(&mut io, &mut out) {
        Ok(started) => started,
        Err(StartupError::Fatal(error)) => {
            out.error(Severity::Fatal, &error);
            let _ = SocketSink { stream: &io.stream, shared: &shared }.flush(&mut out);
            return;
        }
        Err(StartupError::Closed) => return,
    };
    let Some((identity, parameters, options)) = started else { return }; // A cancel request.
    let Some(mut slot) = shared.registry.reserve(shared.config.max_connections) else {
        out.error(Severity::Fatal, &ExecError::new(sqlstate::TOO_MANY_CONNECTIONS, "sorry, too many clients already"));
        let _ = SocketSink { stream: &io.stream, shared: &shared }.flush(&mut out);
        return;
    };
    if let Err(error) = authenticate(&mut io, &mut out, &identity.user) {
        if let StartupError::Fatal(error) = error {
            out.error(Severity::Fatal, &error);
            let _ = SocketSink { stream: &io.stream, shared: &shared }.flush(&mut out);
        }
        return;
    }
    let mut session = shared.db.session();
    for (name, value) in parameters.iter().chain(&options) {
        if name.eq_ignore_ascii_case("client_encoding") && !crate::handler::client_encoding_supported(value) {
            out.error(Severity::Fatal, &crate::handler::unsupported_encoding(value));
            let _ = SocketSink { stream: &io.stream, shared: &shared }.flush(&mut out);
            return;
        }
        if let Err(error) = session.settings_mut().set(name, value) {
            out.error(Severity::Fatal, &error);
            let _ = SocketSink { stream: &io.stream, shared: &shared }.flush(&mut out);
            return;
        }
    }
    let Ok(socket) = io.stream.try_clone() else { return };
    let entry = Arc::new(Entry {
        process_id: shared.registry.next_process_id(),
        secret_key: i32::from_ne_bytes(auth::random_bytes::<4>()),
        cancel: session.cancel_flag(),
        socket,
        busy: AtomicBool::new(false),
        user: identity.user.clone(),
        database: identity.database.clone(),
        peer,
        started: Instant::now(),
        application: std::sync::Mutex::new(session.settings().get("application_name").unwrap_or_default()),
    });
    shared.registry.register(&mut slot, Arc::clone(&entry));
    drop(handshake);
    let _ = io.stream.set_read_timeout(None);
    let _ = io.stream.set_write_timeout(None);

    let handler = Handler::new(Arc::clone(&shared), Arc::clone(&entry), identity, session);
    out.authentication(AuthMessage::Ok);
    handler.report_all(&mut out);
    out.backend_key_data(entry.process_id, entry.secret_key);
    out.ready_for_query(handler.transaction_status());
    let conn = Conn { io, out, handler, fast_streak: FAST_STREAK_TO_PARK };
    session_loop(conn, entry.process_id as usize);
    drop(slot);
}

/// Round trips of fast messages only after which a session's thread hands the session to an event loop
/// (when the server is busy enough for event loops to pay).
pub(crate) const FAST_STREAK_TO_PARK: u32 = 8;

/// Serves a session on its thread until it ends: answers messages with blocking I/O, and while the server is
/// busy and the session only sends what an event loop can answer, parks it in one and waits for it to come
/// back (with a message that needs this thread) or to end.
fn session_loop(mut conn: Conn, loop_hint: usize) {
    loop {
        match serve_buffered(&mut conn) {
            Ok(true) => {}
            Ok(false) | Err(_) => return,
        }
        let shared = Arc::clone(&conn.io.shared);
        if conn.fast_streak >= FAST_STREAK_TO_PARK
            && !conn.handler.is_copying()
            && shared.event_loops_wanted()
            && !shared.is_shutting_down()
        {
            match crate::event_loop::park(&shared, conn, loop_hint) {
                Some(returned) => {
                    conn = returned;
                    continue;
                }
                None => return,
            }
        }
        match conn.io.fill() {
            Ok(true) => {}
            Ok(false) | Err(_) => {
                if shared.is_shutting_down() {
                    terminate(&conn.io, &mut conn.out, &shared);
                }
                return;
            }
        }
    }
}

/// Ends a session because the server is shutting down.
pub(crate) fn terminate(io: &Io, out: &mut Output, shared: &Shared) {
    out.error(
        Severity::Fatal,
        &ExecError::new(sqlstate::ADMIN_SHUTDOWN, "terminating connection due to administrator command"),
    );
    let _ = SocketSink { stream: &io.stream, shared }.flush(out);
}

/// Answers every complete message read so far and writes the answers (one write, unless a large result went out
/// along the way). `Ok(false)` when the session is over.
fn serve_buffered(conn: &mut Conn) -> io::Result<bool> {
    let Conn { io, out, handler, fast_streak } = conn;
    let shared = Arc::clone(&io.shared);
    let body_bytes_max = shared.config.message_bytes_max;
    let mut all_fast = true;
    let mut handled = false;
    loop {
        let (tag, body) = match frontend::frame(io.pending(), body_bytes_max) {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(error) => {
                protocol_violation(out, &shared, &error);
                SocketSink { stream: &io.stream, shared: &shared }.flush(out)?;
                return Ok(false);
            }
        };
        let frame_bytes = HEADER_BYTES + body.len();
        if shared.is_shutting_down() && !handler.is_copying() {
            terminate(io, out, &shared);
            return Ok(false);
        }
        handled = true;
        let flow = match frontend::decode(tag, body) {
            Ok(message) => {
                all_fast &= handler.is_fast(&message);
                let mut sink = SocketSink { stream: &io.stream, shared: &shared };
                handler.handle(message, out, &mut sink)?
            }
            Err(error) if error.fatal => {
                protocol_violation(out, &shared, &error);
                SocketSink { stream: &io.stream, shared: &shared }.flush(out)?;
                return Ok(false);
            }
            Err(error) => {
                // The frame was intact: report it like PostgreSQL (an ERROR) and go on with the next one.
                all_fast = false;
                handler.malformed(&decode_error(&error), tag, out)
            }
        };
        io.consume(frame_bytes);
        match flow {
            Flow::Continue => {}
            Flow::Flush => SocketSink { stream: &io.stream, shared: &shared }.flush(out)?,
            Flow::Close => {
                SocketSink { stream: &io.stream, shared: &shared }.flush(out)?;
                return Ok(false);
            }
        }
    }
    // About to wait for the client: everything answered so far goes out in one write.
    if !out.is_empty() {
        SocketSink { stream: &io.stream, shared: &shared }.flush(out)?;
    }
    if handled {
        *fast_streak = if all_fast { fast_streak.saturating_add(1) } else { 0 };
    }
    Ok(true)
}

pub(crate) fn decode_error(error: &DecodeError) -> ExecError {
    let sqlstate = if error.bad_encoding { "22021" } else { sqlstate::PROTOCOL_VIOLATION };
    ExecError::new(sqlstate, error.message.clone())
}

fn protocol_violation(out: &mut Output, shared: &Shared, error: &DecodeError) {
    out.error(Severity::Fatal, &decode_error(error));
    shared.registry.counters.protocol_violations.fetch_add(1, Ordering::Relaxed);
}

/// Why a startup exchange ended without a session.
enum StartupError {
    /// Tell the client this, then close.
    Fatal(ExecError),
    /// The client went away (or timed out): just close.
    Closed,
}

impl From<io::Error> for StartupError {
    fn from(_: io::Error) -> Self {
        StartupError::Closed
    }
}

fn fatal(sqlstate: &'static str, message: impl Into<String>) -> StartupError {
    StartupError::Fatal(ExecError::new(sqlstate, message))
}

/// Startup parameters that are not settings.
const NOT_SETTINGS: [&str; 4] = ["user", "database", "options", "replication"];

/// The session's identity, its settings from the startup packet, and those from `options` (`-c name=value`);
/// `None` after a cancel request.
type Started = Option<(Identity, Vec<(String, String)>, Vec<(String, String)>)>;

fn startup(io: &mut Io, out: &mut Output) -> Result<Started, StartupError> {
    let mut negotiated_encryption = false;
    loop {
        let body = read_startup_packet(io)?;
        match frontend::decode_startup(&body).map_err(|e| fatal(sqlstate::PROTOCOL_VIOLATION, e.message))? {
            StartupPacket::SslRequest | StartupPacket::GssEncRequest if !negotiated_encryption => {
                // No TLS or GSSAPI: 'N', and the client goes on in the clear (or gives up, if it requires TLS).
                negotiated_encryption = true;
                (&io.stream).write_all(b"N")?;
            }
            StartupPacket::SslRequest | StartupPacket::GssEncRequest => {
                return Err(fatal(
                    sqlstate::PROTOCOL_VIOLATION,
                    "unsupported frontend protocol: repeated encryption request",
                ));
            }
            StartupPacket::Cancel { process_id, secret_key } => {
                // No answer either way, as in PostgreSQL.
                io.shared.registry.cancel(process_id, secret_key);
                return Ok(None);
            }
            StartupPacket::Startup { minor, parameters, .. } => {
                let mut settings = Vec::new();
                let mut unsupported_options = Vec::new();
                let mut user = None;
                let mut database = None;
                let mut options = Vec::new();
                for (name, value) in parameters {
                    match name.as_str() {
                        "user" => user = Some(value),
                        "database" => database = Some(value),
                        "options" => options = parse_options(&value).map_err(|m| fatal("22023", m))?,
                        "replication" if !matches!(value.as_str(), "false" | "off" | "no" | "0") => {
                            return Err(fatal(sqlstate::FEATURE_NOT_SUPPORTED, "numadb does not support replication"));
                        }
                        "replication" => {}
                        _ if name.starts_with("_pq_.") => unsupported_options.push(name),
                        _ => settings.push((name, value)),
                    }
                }
                let user = user
                    .filter(|u| !u.is_empty())
                    .ok_or_else(|| fatal("28000", "no PostgreSQL user name specified in startup packet"))?;
                let database = database.filter(|d| !d.is_empty()).unwrap_or_else(|| user.clone());
                if minor > 0 || !unsupported_options.is_empty() {
                    out.negotiate_protocol_version(0, unsupported_options);
                }
                settings.retain(|(name, _)| !NOT_SETTINGS.contains(&name.as_str()));
                return Ok(Some((Identity { user, database }, settings, options)));
            }
        }
    }
}

/// Reads one length-prefixed startup packet; its body after the length word.
fn read_startup_packet(io: &mut Io) -> Result<Vec<u8>, StartupError> {
    loop {
        let pending = io.pending();
        if pending.len() >= 4 {
            let length = i32::from_be_bytes([pending[0], pending[1], pending[2], pending[3]]);
            if length < 8 || length as usize > STARTUP_PACKET_BYTES_MAX {
                return Err(fatal(sqlstate::PROTOCOL_VIOLATION, "invalid length of startup packet"));
            }
            let length = length as usize;
            if pending.len() >= length {
                let body = pending[4..length].to_vec();
                io.consume(length);
                return Ok(body);
            }
        }
        if !io.fill()? {
            return Err(StartupError::Closed);
        }
    }
}

/// Reads the next regular message during authentication (a `p` message, or `X`).
fn read_message(io: &mut Io) -> Result<(u8, Vec<u8>), StartupError> {
    loop {
        let pending = io.pending();
        match frontend::frame(pending, STARTUP_PACKET_BYTES_MAX) {
            Ok(Some((tag, body))) => {
                let result = (tag, body.to_vec());
                io.consume(HEADER_BYTES + body.len());
                return Ok(result);
            }
            Ok(None) => {}
            Err(error) => return Err(fatal(sqlstate::PROTOCOL_VIOLATION, error.message)),
        }
        if !io.fill()? {
            return Err(StartupError::Closed);
        }
    }
}

fn flush(io: &Io, out: &mut Output) -> Result<(), StartupError> {
    SocketSink { stream: &io.stream, shared: &io.shared }.flush(out)?;
    Ok(())
}

fn authenticate(io: &mut Io, out: &mut Output, user: &str) -> Result<(), StartupError> {
    let (verifier, mock) = match &io.shared.config.authentication {
        Authentication::Trust => return Ok(()),
        Authentication::Scram(users) => match users.get(user) {
            Some(verifier) => (verifier.clone(), false),
            None => (Verifier::mock(user, &io.shared.mock_secret), true),
        },
    };
    let failed = || fatal(sqlstate::INVALID_PASSWORD, format!("password authentication failed for user \"{user}\""));
    let malformed = |error: ScramError| match error {
        ScramError::Malformed(message) => fatal(sqlstate::PROTOCOL_VIOLATION, message),
        ScramError::Failed => failed(),
    };
    out.authentication(AuthMessage::SASL(vec![auth::MECHANISM.to_string()]));
    flush(io, out)?;
    let mut exchange = ScramExchange::new(verifier, mock);
    // SASLInitialResponse: the mechanism, then the length of the client's first message and the message.
    let (tag, body) = read_message(io)?;
    if tag != b'p' {
        return Err(StartupError::Closed);
    }
    let mut reader = frontend::Reader::new(&body);
    let mechanism = reader.cstr().map_err(|e| fatal(sqlstate::PROTOCOL_VIOLATION, e.message))?;
    if mechanism != auth::MECHANISM {
        return Err(fatal(sqlstate::PROTOCOL_VIOLATION, "client selected an invalid SASL authentication mechanism"));
    }
    let length = reader.i32().map_err(|e| fatal(sqlstate::PROTOCOL_VIOLATION, e.message))?;
    let first = reader
        .bytes(usize::try_from(length).unwrap_or(usize::MAX))
        .map_err(|e| fatal(sqlstate::PROTOCOL_VIOLATION, e.message))?;
    let server_first = exchange.client_first(first).map_err(malformed)?;
    out.authentication(AuthMessage::SASLContinue(server_first.into()));
    flush(io, out)?;
    let (tag, body) = read_message(io)?;
    if tag != b'p' {
        return Err(StartupError::Closed);
    }
    let server_final = exchange.client_final(&body).map_err(malformed)?;
    out.authentication(AuthMessage::SASLFinal(server_final.into()));
    Ok(())
}

/// The `-c name=value` (and `--name=value`) settings in a startup packet's `options`.
fn parse_options(options: &str) -> Result<Vec<(String, String)>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut escaped = false;
    for c in options.chars() {
        match c {
            _ if escaped => {
                word.push(c);
                escaped = false;
            }
            '\\' => escaped = true,
            c if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    let mut settings = BTreeMap::new();
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let assignment = if word == "-c" {
            words.next().ok_or("option -c requires a name=value argument")?
        } else if let Some(rest) = word.strip_prefix("-c") {
            rest.to_string()
        } else if let Some(rest) = word.strip_prefix("--") {
            rest.to_string()
        } else {
            return Err(format!("invalid command-line argument for server process: {word}"));
        };
        let (name, value) = assignment
            .split_once('=')
            .ok_or_else(|| format!("invalid option \"{assignment}\": expected name=value"))?;
        settings.insert(name.replace('-', "_"), value.to_string());
    }
    Ok(settings.into_iter().collect())
}

/// The address a connection came from, for logs.
pub fn describe_peer(peer: Option<SocketAddr>) -> String {
    peer.map_or_else(|| "unknown".into(), |p| p.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_options_hold_settings() {
        assert_eq!(
            parse_options("-c statement_timeout=5s --application-name=my\\ app -cdatestyle=ISO").unwrap(),
            vec![
                ("application_name".into(), "my app".into()),
                ("datestyle".into(), "ISO".into()),
                ("statement_timeout".into(), "5s".into())
            ]
        );
        assert!(parse_options("-x").is_err());
        assert!(parse_options("-c").is_err());
        assert!(parse_options("-c novalue").is_err());
        assert!(parse_options("   ").unwrap().is_empty());
    }
}
