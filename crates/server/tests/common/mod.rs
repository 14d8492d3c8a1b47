//! What the server tests share: a server on a free port, the external tools they drive, and a raw protocol
//! client (pgwire's frontend encoders and backend decoders) for what no driver lets a test control: the exact
//! bytes on the wire.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Buf, BytesMut};
use numadb_server::{RunningServer, Server, ServerConfig};
use numadb_sql::{Database, Session};
use pgwire::messages::extendedquery::{Bind, Close, Describe, Execute, Parse, Sync};
use pgwire::messages::simplequery::Query;
use pgwire::messages::startup::Startup;
use pgwire::messages::{DecodeContext, Message, PgWireBackendMessage, PgWireFrontendMessage, ProtocolVersion};

/// A server for one test, on its own port, with its own database.
pub struct TestServer {
    /// The server (shut down when dropped).
    pub running: RunningServer,
    /// Its database.
    pub db: Arc<Database>,
}

impl TestServer {
    /// The address.
    pub fn address(&self) -> SocketAddr {
        self.running.address()
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.address().port()
    }

    /// A `postgres://` URL for `user` (no password).
    pub fn url(&self, user: &str) -> String {
        format!("postgres://{user}@127.0.0.1:{}/numadb", self.port())
    }
}

/// Starts a server on 127.0.0.1 and a free port; `setup` prepares the database first.
pub fn start(config: ServerConfig, setup: impl FnOnce(&mut Session)) -> TestServer {
    let db = Database::new().expect("a database");
    setup(&mut db.session());
    let config = ServerConfig { listen: "127.0.0.1:0".into(), ..config };
    let running = Server::bind(Arc::clone(&db), config).expect("binding a free port").spawn();
    TestServer { running, db }
}

/// Starts a server with the default configuration and the statements in `sql` run first.
pub fn start_with(sql: &str) -> TestServer {
    start(ServerConfig::default(), |session| {
        for result in session.execute(sql) {
            result.expect("setup statement");
        }
    })
}

/// The path of an external tool, or `None` (with a message) when it is missing and tools are not required.
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|dir| dir.join(name)).find(|path| path.is_file()));
    if found.is_none() {
        let message = format!("{name} is not installed (scripts/install-deps.sh installs it)");
        assert!(std::env::var("NUMADB_REQUIRE_TOOLS").as_deref() != Ok("1"), "{message}");
        eprintln!("skipped: {message}");
    }
    found
}

/// A Python with `module` importable (`NUMADB_PYTHON`, else python3), or `None` as for [`tool`].
pub fn python_with(module: &str) -> Option<String> {
    let python = std::env::var("NUMADB_PYTHON").unwrap_or_else(|_| "python3".into());
    let works =
        Command::new(&python).args(["-c", &format!("import {module}")]).output().is_ok_and(|o| o.status.success());
    if works {
        return Some(python);
    }
    let message = format!("{python} cannot import {module}; run scripts/install-deps.sh (or `make test`)");
    assert!(std::env::var("NUMADB_REQUIRE_TOOLS").as_deref() != Ok("1"), "{message}");
    eprintln!("skipped: {message}");
    None
}

/// A client that speaks the protocol message by message.
pub struct RawClient {
    pub stream: TcpStream,
    buffer: BytesMut,
    context: DecodeContext,
}

/// Encodes frontend messages into one packet.
pub fn packet(messages: Vec<PgWireFrontendMessage>) -> Vec<u8> {
    let mut buffer = BytesMut::new();
    for message in messages {
        message.encode(&mut buffer).expect("encodable");
    }
    buffer.to_vec()
}

pub fn parse(name: &str, sql: &str, types: &[u32]) -> PgWireFrontendMessage {
    PgWireFrontendMessage::Parse(Parse::new(
        (!name.is_empty()).then(|| name.to_string()),
        sql.to_string(),
        types.to_vec(),
    ))
}

pub fn bind(
    portal: &str,
    statement: &str,
    formats: &[i16],
    params: &[Option<&[u8]>],
    results: &[i16],
) -> PgWireFrontendMessage {
    PgWireFrontendMessage::Bind(Bind::new(
        (!portal.is_empty()).then(|| portal.to_string()),
        (!statement.is_empty()).then(|| statement.to_string()),
        formats.to_vec(),
        params.iter().map(|p| p.map(bytes::Bytes::copy_from_slice)).collect(),
        results.to_vec(),
    ))
}

pub fn describe(kind: u8, name: &str) -> PgWireFrontendMessage {
    PgWireFrontendMessage::Describe(Describe::new(kind, (!name.is_empty()).then(|| name.to_string())))
}

pub fn execute(portal: &str, max_rows: i32) -> PgWireFrontendMessage {
    PgWireFrontendMessage::Execute(Execute::new((!portal.is_empty()).then(|| portal.to_string()), max_rows))
}

pub fn close(kind: u8, name: &str) -> PgWireFrontendMessage {
    PgWireFrontendMessage::Close(Close::new(kind, (!name.is_empty()).then(|| name.to_string())))
}

pub fn sync() -> PgWireFrontendMessage {
    PgWireFrontendMessage::Sync(Sync::new())
}

pub fn query(sql: &str) -> PgWireFrontendMessage {
    PgWireFrontendMessage::Query(Query::new(sql.to_string()))
}

/// A backend message in a form tests compare easily.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    ParseComplete,
    BindComplete,
    CloseComplete,
    NoData,
    PortalSuspended,
    EmptyQuery,
    ParameterDescription(Vec<u32>),
    /// (name, type OID, format) per column.
    RowDescription(Vec<(String, u32, i16)>),
    /// Fields, `None` for NULL.
    DataRow(Vec<Option<Vec<u8>>>),
    CommandComplete(String),
    /// (severity, SQLSTATE, message).
    Error(String, String, String),
    Notice(String),
    ReadyForQuery(u8),
    ParameterStatus(String, String),
    /// Process id and secret key.
    BackendKeyData(i32, i32),
    CopyInResponse(i16),
    Authentication(i32),
    Other(String),
}

impl Reply {
    /// A DataRow's fields as text.
    pub fn texts(&self) -> Vec<Option<String>> {
        match self {
            Reply::DataRow(fields) => {
                fields.iter().map(|f| f.as_ref().map(|b| String::from_utf8_lossy(b).into_owned())).collect()
            }
            other => panic!("not a DataRow: {other:?}"),
        }
    }

    /// An error's SQLSTATE.
    pub fn sqlstate(&self) -> &str {
        match self {
            Reply::Error(_, code, _) => code,
            other => panic!("not an error: {other:?}"),
        }
    }
}

fn reply(message: PgWireBackendMessage) -> Reply {
    match message {
        PgWireBackendMessage::ParseComplete(_) => Reply::ParseComplete,
        PgWireBackendMessage::BindComplete(_) => Reply::BindComplete,
        PgWireBackendMessage::CloseComplete(_) => Reply::CloseComplete,
        PgWireBackendMessage::NoData(_) => Reply::NoData,
        PgWireBackendMessage::PortalSuspended(_) => Reply::PortalSuspended,
        PgWireBackendMessage::EmptyQueryResponse(_) => Reply::EmptyQuery,
        PgWireBackendMessage::ParameterDescription(d) => Reply::ParameterDescription(d.types),
        PgWireBackendMessage::RowDescription(d) => {
            Reply::RowDescription(d.fields.into_iter().map(|f| (f.name, f.type_id, f.format_code)).collect())
        }
        PgWireBackendMessage::DataRow(row) => {
            let mut data = row.data;
            let mut fields = Vec::new();
            for _ in 0..row.field_count {
                let length = data.get_i32();
                fields.push((length >= 0).then(|| data.split_to(length as usize).to_vec()));
            }
            Reply::DataRow(fields)
        }
        PgWireBackendMessage::CommandComplete(c) => Reply::CommandComplete(c.tag),
        PgWireBackendMessage::ErrorResponse(e) => {
            let field =
                |code: u8| e.fields.iter().find(|(c, _)| *c == code).map(|(_, v)| v.clone()).unwrap_or_default();
            Reply::Error(field(b'V'), field(b'C'), field(b'M'))
        }
        PgWireBackendMessage::NoticeResponse(n) => {
            Reply::Notice(n.fields.iter().find(|(c, _)| *c == b'M').map(|(_, v)| v.clone()).unwrap_or_default())
        }
        PgWireBackendMessage::ReadyForQuery(r) => Reply::ReadyForQuery(r.status as u8),
        PgWireBackendMessage::ParameterStatus(p) => Reply::ParameterStatus(p.name, p.value),
        PgWireBackendMessage::BackendKeyData(k) => Reply::BackendKeyData(k.pid, k.secret_key.as_i32().unwrap_or(0)),
        PgWireBackendMessage::CopyInResponse(c) => Reply::CopyInResponse(c.columns),
        PgWireBackendMessage::Authentication(a) => Reply::Authentication(match a {
            pgwire::messages::startup::Authentication::Ok => 0,
            pgwire::messages::startup::Authentication::SASL(_) => 10,
            _ => -1,
        }),
        other => Reply::Other(format!("{other:?}")),
    }
}

impl RawClient {
    /// Connects without starting a session.
    pub fn connect_only(address: SocketAddr) -> RawClient {
        let stream = TcpStream::connect(address).expect("connect");
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut context = DecodeContext::new(ProtocolVersion::PROTOCOL3_0);
        context.awaiting_frontend_ssl = false;
        context.awaiting_frontend_startup = false;
        RawClient { stream, buffer: BytesMut::new(), context }
    }

    /// Connects and starts a session as `user` (trust); returns the startup's replies.
    pub fn connect(address: SocketAddr, user: &str) -> (RawClient, Vec<Reply>) {
        let mut client = RawClient::connect_only(address);
        let mut startup = Startup::new();
        startup.parameters.insert("user".into(), user.into());
        startup.parameters.insert("database".into(), "numadb".into());
        let mut buffer = BytesMut::new();
        startup.encode(&mut buffer).unwrap();
        client.send_bytes(&buffer);
        let replies = client.until_ready();
        (client, replies)
    }

    /// Sends bytes as they are.
    pub fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send");
    }

    /// Closes the client's side for writing (what it sent stays in flight; replies can still be read).
    pub fn close_write(&mut self) {
        self.stream.shutdown(std::net::Shutdown::Write).expect("shutdown");
    }

    /// Sends messages in one packet.
    pub fn send(&mut self, messages: Vec<PgWireFrontendMessage>) {
        let bytes = packet(messages);
        self.send_bytes(&bytes);
    }

    /// The next message, or `None` when the server closed the connection.
    pub fn next(&mut self) -> Option<Reply> {
        loop {
            if let Ok(Some(message)) = PgWireBackendMessage::decode(&mut self.buffer, &self.context) {
                return Some(reply(message));
            }
            let mut chunk = [0u8; 65536];
            match self.stream.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(read) => self.buffer.extend_from_slice(&chunk[..read]),
            }
        }
    }

    /// Messages up to and including `ReadyForQuery` (or the end of the connection).
    pub fn until_ready(&mut self) -> Vec<Reply> {
        let mut replies = Vec::new();
        while let Some(reply) = self.next() {
            let done = matches!(reply, Reply::ReadyForQuery(_));
            replies.push(reply);
            if done {
                break;
            }
        }
        replies
    }

    /// Runs a simple query; its replies up to `ReadyForQuery`.
    pub fn simple(&mut self, sql: &str) -> Vec<Reply> {
        self.send(vec![query(sql)]);
        self.until_ready()
    }

    /// Everything until the server closes the connection.
    pub fn until_closed(&mut self) -> Vec<Reply> {
        let mut replies = Vec::new();
        while let Some(reply) = self.next() {
            replies.push(reply);
        }
        replies
    }
}

/// The data rows of some replies, as text.
pub fn rows(replies: &[Reply]) -> Vec<Vec<Option<String>>> {
    replies.iter().filter(|r| matches!(r, Reply::DataRow(_))).map(Reply::texts).collect()
}

/// The errors among some replies.
pub fn errors(replies: &[Reply]) -> Vec<&Reply> {
    replies.iter().filter(|r| matches!(r, Reply::Error(..))).collect()
}
