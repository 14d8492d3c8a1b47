//! numadb's PostgreSQL wire-protocol server: psql, pgbench, psycopg, JDBC, tokio-postgres and other clients use
//! numadb unchanged.
//!
//! # Design
//!
//! **A thread per connection, and event loops when busy.** Each connection runs its startup exchange, then its
//! session, on a thread of its own; statements run on that thread as in-process calls into
//! [`numadb_sql::Session`], so a scan that takes seconds blocks nobody else, and neither does a slow or dead
//! client. With few sessions the thread waits on its socket itself, the cheapest round trip there is (the
//! kernel wakes it synchronously on the client's CPU). With more sessions than CPUs, a thread switch per
//! statement costs more than the statement, so idle sessions park in per-CPU event loops ([`event_loop`]),
//! which answer what cannot block (Parse, Bind, Describe, Sync, and Execute of a unique-index lookup, which
//! numadb runs on the calling thread in microseconds) and hand everything else back to the session's thread.
//! Sessions are bounded (`max_connections`, like PostgreSQL, which runs a process per connection), and so are
//! connections still in their startup exchange.
//!
//! **One write per round trip.** The server answers every complete message it has read into one buffer and
//! writes the buffer only when it would otherwise wait for the client ([`connection`]). PostgreSQL flushes at
//! each `ReadyForQuery`; a plain pgwire server flushes after each message (four socket writes per prepared
//! transaction where PostgreSQL does one). Here a prepared transaction costs one write, and a pipeline of them
//! also one.
//!
//! **pgwire for the protocol layer.** The server builds on the [pgwire](https://docs.rs/pgwire) crate's
//! `messages` module (no features: no TLS, no async runtime) for every backend message; frontend messages are
//! decoded by [`protocol::frontend`], a decoder that is total over its input (pgwire's decoders trust the
//! length field and panic on short bodies), fuzzed and property-tested. Its own connection driver is not used:
//! it flushes per message and runs handlers on an async runtime.
//!
//! **What the engine does not answer.** psql's `\d` commands join `pg_catalog` tables and drivers call
//! `version()` or `current_setting()`; [`compat`] recognises these statements and answers them from numadb's
//! catalog and the session.
//!
//! # Map
//!
//! - [`server`] — the listener, connection threads, graceful shutdown.
//! - [`event_loop`] — where idle sessions wait when the server is busy; the fast path of prepared lookups.
//! - [`connection`] — startup (TLS refusal, cancel requests, authentication, session parameters) and the
//!   message loop with its write coalescing.
//! - [`handler`] — the session's protocol state machine: simple and extended query protocols, portals, COPY,
//!   transaction status.
//! - [`protocol`] — decoding and encoding messages, types and formats.
//! - [`compat`] — catalog emulation and driver functions.
//! - [`auth`] — SCRAM-SHA-256.
//! - [`registry`] — sessions, cancel keys, counters.
//! - [`config`] — the configuration.

pub mod auth;
pub mod compat;
pub mod config;
pub mod connection;
pub mod event_loop;
pub mod handler;
pub mod protocol;
pub mod registry;
pub mod server;
pub use numadb_sql::text as sql_text;

pub use config::{Authentication, ServerConfig};
pub use registry::Stats;
pub use server::{RunningServer, Server, ServerHandle, SessionInfo, ShutdownReport};
