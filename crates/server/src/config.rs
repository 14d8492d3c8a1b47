//! What a server is told at start: where to listen, how many sessions, how clients authenticate, the limits.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::auth::Verifier;

/// The port PostgreSQL and its clients default to.
pub const DEFAULT_PORT: u16 = 5432;

/// How clients prove who they are.
#[derive(Clone, Default)]
pub enum Authentication {
    /// Anyone may connect as any user (for local use; the server binds to 127.0.0.1 by default).
    #[default]
    Trust,
    /// SCRAM-SHA-256 against these users' verifiers; other users are refused (after a mock exchange, so that a
    /// client cannot tell which users exist).
    Scram(BTreeMap<String, Verifier>),
}

impl std::fmt::Debug for Authentication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Authentication::Trust => f.write_str("trust"),
            Authentication::Scram(users) => {
                write!(
                    f,
                    "scram-sha-256 ({} user(s): {})",
                    users.len(),
                    users.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            }
        }
    }
}

/// A server's configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `host:port` to listen on (a host name, an IPv4 or a bracketed IPv6 address).
    pub listen: String,
    /// Sessions served at once; one more is refused with SQLSTATE 53300.
    pub max_connections: usize,
    /// Connections still in their startup exchange (TLS refusal, startup packet, authentication) beyond the
    /// sessions; beyond both, new connections are refused at once.
    pub handshakes_max: usize,
    /// Authentication.
    pub authentication: Authentication,
    /// The largest message a client may send (PostgreSQL's limit is 1 GiB).
    pub message_bytes_max: usize,
    /// How long a client has to finish its startup exchange (PostgreSQL's `authentication_timeout`).
    pub startup_timeout: Duration,
    /// On shutdown, how long running statements may go on before they are cancelled.
    pub shutdown_grace: Duration,
    /// Idle time before TCP keepalive probes (so that dead clients free their slot).
    pub keepalive_idle: Duration,
    /// Event loops (0: none; every session waits on its own thread).
    pub event_loops: usize,
    /// Sessions park in the event loops only while more than this many are open (see `event_loop.rs`).
    pub event_loop_sessions: usize,
}

/// CPUs this process may use.
fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: format!("127.0.0.1:{DEFAULT_PORT}"),
            max_connections: 100,
            handshakes_max: 64,
            authentication: Authentication::Trust,
            message_bytes_max: 256 << 20,
            startup_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(5),
            keepalive_idle: Duration::from_secs(60),
            event_loops: cpus(),
            event_loop_sessions: cpus(),
        }
    }
}
