//! The listener: accepts connections, gives each a thread (or refuses it when too many are starting), and shuts
//! down gracefully — stop accepting, close idle sessions, let running statements finish for a grace period,
//! cancel those still running, close what remains.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use numadb_execution::{ExecError, sqlstate};
use numadb_sql::Database;

use crate::config::ServerConfig;
use crate::connection;
use crate::event_loop::EventLoop;
use crate::protocol::backend::{Output, Severity};
use crate::registry::{Registry, Stats};

/// How often shutdown looks whether the sessions are gone.
const SHUTDOWN_POLL: Duration = Duration::from_millis(10);
/// After cancelling, how long statements get to notice.
const CANCEL_WAIT: Duration = Duration::from_secs(2);
/// After closing the sockets, how long threads get to end.
const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// What every connection thread shares.
pub struct Shared {
    /// The database.
    pub db: Arc<Database>,
    /// The configuration.
    pub config: ServerConfig,
    /// The sessions.
    pub registry: Arc<Registry>,
    /// Set when shutdown begins.
    shutting_down: AtomicBool,
    /// Derives mock SCRAM verifiers for unknown users (random per server).
    pub mock_secret: [u8; 32],
    /// The address the listener got.
    local_addr: SocketAddr,
    /// Object ids for the catalog emulation.
    pub oids: crate::compat::Oids,
    /// The event loops, started when first needed.
    loops: OnceLock<Option<Vec<Arc<EventLoop>>>>,
}

impl Shared {
    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }

    /// Whether idle sessions should wait in the event loops: the server has them and is busy enough.
    pub fn event_loops_wanted(&self) -> bool {
        self.config.event_loops > 0 && self.registry.stats_sessions_open() > self.config.event_loop_sessions
    }

    /// The event loops (started on first use; `None` if they could not start).
    pub(crate) fn event_loops(&self) -> Option<&[Arc<EventLoop>]> {
        self.loops.get_or_init(|| crate::event_loop::start(self.config.event_loops).ok()).as_deref()
    }
}

/// A bound server, not yet accepting.
pub struct Server {
    shared: Arc<Shared>,
    listener: TcpListener,
}

/// Controls a server from other threads.
#[derive(Clone)]
pub struct ServerHandle {
    shared: Arc<Shared>,
}

/// How shutdown went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Sessions open when shutdown began.
    pub sessions: usize,
    /// Statements that were still running after the grace period and were cancelled.
    pub cancelled: usize,
    /// Sessions that had not ended by the final deadline (their threads are left to die with the process).
    pub abandoned: usize,
}

impl Server {
    /// Binds the listening socket.
    pub fn bind(db: Arc<Database>, config: ServerConfig) -> std::io::Result<Server> {
        let addresses: Vec<SocketAddr> = config.listen.to_socket_addrs()?.collect();
        let listener = TcpListener::bind(addresses.as_slice())?;
        let local_addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            db,
            config,
            registry: Arc::new(Registry::new()),
            shutting_down: AtomicBool::new(false),
            mock_secret: crate::auth::random_bytes::<32>(),
            local_addr,
            oids: crate::compat::Oids::default(),
            loops: OnceLock::new(),
        });
        Ok(Server { shared, listener })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// A handle to stop the server and read its counters.
    pub fn handle(&self) -> ServerHandle {
        ServerHandle { shared: Arc::clone(&self.shared) }
    }

    /// Accepts connections until [`ServerHandle::shutdown`], then shuts down gracefully.
    pub fn run(self) -> ShutdownReport {
        let shared = self.shared;
        let handshakes_max = shared.config.max_connections + shared.config.handshakes_max;
        for stream in self.listener.incoming() {
            if shared.is_shutting_down() {
                break;
            }
            let Ok(stream) = stream else {
                // EMFILE and friends: back off a little rather than spin.
                std::thread::sleep(Duration::from_millis(5));
                continue;
            };
            let Some(handshake) = shared.registry.begin_handshake(handshakes_max) else {
                refuse(stream);
                continue;
            };
            let thread_shared = Arc::clone(&shared);
            let spawned = std::thread::Builder::new()
                .name("numadb-conn".into())
                .stack_size(numadb_sql::text::STATEMENT_STACK_BYTES)
                .spawn(move || connection::serve(thread_shared, stream, handshake));
            if spawned.is_err() {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        drop(self.listener);
        drain(&shared)
    }

    /// Runs the server on a thread of its own.
    pub fn spawn(self) -> RunningServer {
        let handle = self.handle();
        let address = self.local_addr();
        let thread = std::thread::Builder::new()
            .name("numadb-listen".into())
            .spawn(move || self.run())
            .expect("a thread for the listener");
        RunningServer { handle, address, thread: Some(thread) }
    }
}

/// Refuses a connection without reading from it (too many are starting at once).
fn refuse(stream: TcpStream) {
    let mut out = Output::new();
    out.error(Severity::Fatal, &ExecError::new(sqlstate::TOO_MANY_CONNECTIONS, "sorry, too many clients already"));
    let _ = stream.set_nonblocking(true);
    let _ = (&stream).write_all(out.bytes());
}

/// Ends the sessions after the listener stopped.
fn drain(shared: &Shared) -> ShutdownReport {
    let registry = &shared.registry;
    let sessions = registry.entries().len();
    registry.wake_all();
    let grace_end = Instant::now() + shared.config.shutdown_grace;
    while registry.connections() > 0 && Instant::now() < grace_end {
        std::thread::sleep(SHUTDOWN_POLL);
    }
    let cancelled = registry.entries().iter().filter(|e| e.busy.load(Ordering::Acquire)).count();
    registry.cancel_all();
    let cancel_end = Instant::now() + CANCEL_WAIT;
    while registry.connections() > 0 && Instant::now() < cancel_end {
        std::thread::sleep(SHUTDOWN_POLL);
    }
    registry.close_all();
    let close_end = Instant::now() + CLOSE_WAIT;
    while registry.connections() > 0 && Instant::now() < close_end {
        std::thread::sleep(SHUTDOWN_POLL);
    }
    ShutdownReport { sessions, cancelled, abandoned: registry.connections() }
}

impl ServerHandle {
    /// Begins a graceful shutdown: the listener stops and [`Server::run`] returns once the sessions are gone.
    pub fn shutdown(&self) {
        if self.shared.shutting_down.swap(true, Ordering::AcqRel) {
            return;
        }
        // Wake the listener, which blocks in accept().
        let address = self.shared.local_addr;
        let ip = match address.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        let _ = TcpStream::connect_timeout(&SocketAddr::new(ip, address.port()), Duration::from_secs(1));
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shared.is_shutting_down()
    }

    /// Cancels every running statement now (a second signal during shutdown).
    pub fn cancel_all(&self) {
        self.shared.registry.cancel_all();
    }

    /// The counters.
    pub fn stats(&self) -> Stats {
        self.shared.registry.stats()
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// The open sessions.
    pub fn sessions(&self) -> Vec<SessionInfo> {
        self.shared
            .registry
            .entries()
            .iter()
            .map(|e| SessionInfo {
                process_id: e.process_id,
                user: e.user.clone(),
                database: e.database.clone(),
                application: e.application.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                peer: e.peer,
                busy: e.busy.load(Ordering::Acquire),
                age: e.started.elapsed(),
            })
            .collect()
    }
}

/// A session, as [`ServerHandle::sessions`] describes it.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// Its process id (in `BackendKeyData` and `pg_backend_pid()`).
    pub process_id: i32,
    /// The user.
    pub user: String,
    /// The database name the client asked for.
    pub database: String,
    /// `application_name`.
    pub application: String,
    /// The client's address.
    pub peer: Option<SocketAddr>,
    /// Whether a statement is running.
    pub busy: bool,
    /// Time since the session started.
    pub age: Duration,
}

/// A server running on its own thread (for tests and benchmarks); shut down when dropped.
pub struct RunningServer {
    handle: ServerHandle,
    address: SocketAddr,
    thread: Option<JoinHandle<ShutdownReport>>,
}

impl RunningServer {
    /// The address clients connect to.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The handle.
    pub fn handle(&self) -> &ServerHandle {
        &self.handle
    }

    /// Shuts down and waits for the listener thread.
    pub fn shutdown(mut self) -> ShutdownReport {
        self.stop().unwrap_or(ShutdownReport { sessions: 0, cancelled: 0, abandoned: 0 })
    }

    fn stop(&mut self) -> Option<ShutdownReport> {
        self.handle.shutdown();
        self.thread.take().and_then(|t| t.join().ok())
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop();
    }
}
