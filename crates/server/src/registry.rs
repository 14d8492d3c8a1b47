//! The connections a server has: their slots (bounded by `max_connections`), their cancel keys, the sockets
//! shutdown closes, and the counters the benchmarks read (socket writes per transaction among them).

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Counters over the server's life (monotonic; read them before and after a run and subtract).
#[derive(Debug, Default)]
pub struct Counters {
    /// Sessions started (after authentication).
    pub sessions: AtomicU64,
    /// Connections refused because `max_connections` sessions were running.
    pub refused: AtomicU64,
    /// Cancel requests that matched a session.
    pub cancels: AtomicU64,
    /// `ReadyForQuery` messages sent: one per simple query and one per `Sync`, a transaction in pgbench's sense.
    pub ready_for_query: AtomicU64,
    /// `write` system calls on client sockets.
    pub socket_writes: AtomicU64,
    /// `read` system calls on client sockets.
    pub socket_reads: AtomicU64,
    /// Bytes written to clients.
    pub bytes_out: AtomicU64,
    /// Bytes read from clients.
    pub bytes_in: AtomicU64,
    /// Statements executed (engine and catalog emulation).
    pub statements: AtomicU64,
    /// Errors sent (`ErrorResponse`).
    pub errors: AtomicU64,
    /// Connections closed for a protocol violation.
    pub protocol_violations: AtomicU64,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// See [`Counters::sessions`].
    pub sessions: u64,
    /// See [`Counters::refused`].
    pub refused: u64,
    /// See [`Counters::cancels`].
    pub cancels: u64,
    /// See [`Counters::ready_for_query`].
    pub ready_for_query: u64,
    /// See [`Counters::socket_writes`].
    pub socket_writes: u64,
    /// See [`Counters::socket_reads`].
    pub socket_reads: u64,
    /// See [`Counters::bytes_out`].
    pub bytes_out: u64,
    /// See [`Counters::bytes_in`].
    pub bytes_in: u64,
    /// See [`Counters::statements`].
    pub statements: u64,
    /// See [`Counters::errors`].
    pub errors: u64,
    /// See [`Counters::protocol_violations`].
    pub protocol_violations: u64,
    /// Sessions open now.
    pub sessions_open: u64,
}

impl Stats {
    /// The change from `earlier` to `self` (counters only; `sessions_open` is kept).
    pub fn since(&self, earlier: &Stats) -> Stats {
        Stats {
            sessions: self.sessions - earlier.sessions,
            refused: self.refused - earlier.refused,
            cancels: self.cancels - earlier.cancels,
            ready_for_query: self.ready_for_query - earlier.ready_for_query,
            socket_writes: self.socket_writes - earlier.socket_writes,
            socket_reads: self.socket_reads - earlier.socket_reads,
            bytes_out: self.bytes_out - earlier.bytes_out,
            bytes_in: self.bytes_in - earlier.bytes_in,
            statements: self.statements - earlier.statements,
            errors: self.errors - earlier.errors,
            protocol_violations: self.protocol_violations - earlier.protocol_violations,
            sessions_open: self.sessions_open,
        }
    }
}

/// One session, as other threads see it.
pub struct Entry {
    /// `BackendKeyData`'s process id.
    pub process_id: i32,
    /// `BackendKeyData`'s secret key.
    pub secret_key: i32,
    /// The session's cancel flag (raised by a matching cancel request, or at shutdown).
    pub cancel: Arc<AtomicBool>,
    /// A handle on the socket, to wake the connection's thread at shutdown.
    pub socket: TcpStream,
    /// Whether a statement is running (shutdown lets it finish, for a while).
    pub busy: AtomicBool,
    /// The user.
    pub user: String,
    /// The database name the client asked for.
    pub database: String,
    /// The client's address.
    pub peer: Option<SocketAddr>,
    /// When the session started.
    pub started: Instant,
    /// `application_name`.
    pub application: Mutex<String>,
}

/// Every open session, and the slots.
#[derive(Default)]
pub struct Registry {
    entries: Mutex<HashMap<i32, Arc<Entry>>>,
    /// Sessions holding a slot.
    sessions: AtomicUsize,
    /// Connections whose thread is still in the startup exchange.
    handshakes: AtomicUsize,
    next_process_id: AtomicI32,
    /// Counters.
    pub counters: Counters,
}

/// A session slot; dropping it frees the slot and forgets the session.
pub struct Slot {
    registry: Arc<Registry>,
    process_id: Option<i32>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(process_id) = self.process_id {
            self.registry.entries.lock().unwrap_or_else(|p| p.into_inner()).remove(&process_id);
        }
        self.registry.sessions.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A handshake in progress; dropping it ends it.
pub struct Handshake {
    registry: Arc<Registry>,
}

impl Drop for Handshake {
    fn drop(&mut self) {
        self.registry.handshakes.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Registry { next_process_id: AtomicI32::new(1), ..Registry::default() }
    }

    /// Starts a handshake if fewer than `limit` connections are in one.
    pub fn begin_handshake(self: &Arc<Self>, limit: usize) -> Option<Handshake> {
        let mut current = self.handshakes.load(Ordering::Acquire);
        loop {
            if current >= limit {
                return None;
            }
            match self.handshakes.compare_exchange_weak(current, current + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Handshake { registry: Arc::clone(self) }),
                Err(actual) => current = actual,
            }
        }
    }

    /// Takes a session slot if fewer than `max` sessions hold one.
    pub fn reserve(self: &Arc<Self>, max: usize) -> Option<Slot> {
        let mut current = self.sessions.load(Ordering::Acquire);
        loop {
            if current >= max {
                self.counters.refused.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            match self.sessions.compare_exchange_weak(current, current + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(Slot { registry: Arc::clone(self), process_id: None }),
                Err(actual) => current = actual,
            }
        }
    }

    /// A fresh process id for `BackendKeyData`.
    pub fn next_process_id(&self) -> i32 {
        self.next_process_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Makes a session visible to cancel requests and shutdown; it is forgotten when `slot` drops.
    pub fn register(&self, slot: &mut Slot, entry: Arc<Entry>) {
        slot.process_id = Some(entry.process_id);
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).insert(entry.process_id, entry);
        self.counters.sessions.fetch_add(1, Ordering::Relaxed);
    }

    /// Raises the cancel flag of the session with this key; whether one matched.
    pub fn cancel(&self, process_id: i32, secret_key: i32) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        match entries.get(&process_id) {
            Some(entry) if entry.secret_key == secret_key => {
                entry.cancel.store(true, Ordering::SeqCst);
                self.counters.cancels.fetch_add(1, Ordering::Relaxed);
                true
            }
            _ => false,
        }
    }

    /// The open sessions.
    pub fn entries(&self) -> Vec<Arc<Entry>> {
        let mut entries: Vec<_> = self.entries.lock().unwrap_or_else(|p| p.into_inner()).values().cloned().collect();
        entries.sort_by_key(|e| e.process_id);
        entries
    }

    /// Sessions holding a slot.
    pub fn stats_sessions_open(&self) -> usize {
        self.sessions.load(Ordering::Relaxed)
    }

    /// Sessions holding a slot plus connections in their handshake.
    pub fn connections(&self) -> usize {
        self.sessions.load(Ordering::Acquire) + self.handshakes.load(Ordering::Acquire)
    }

    /// Wakes every session's thread: idle ones see the end of their socket and close; busy ones finish their
    /// statement first.
    pub fn wake_all(&self) {
        for entry in self.entries() {
            let _ = entry.socket.shutdown(Shutdown::Read);
        }
    }

    /// Cancels every running statement.
    pub fn cancel_all(&self) {
        for entry in self.entries() {
            entry.cancel.store(true, Ordering::SeqCst);
        }
    }

    /// Closes every socket (threads stuck writing to a client that does not read get an error).
    pub fn close_all(&self) {
        for entry in self.entries() {
            let _ = entry.socket.shutdown(Shutdown::Both);
        }
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            sessions: load(&c.sessions),
            refused: load(&c.refused),
            cancels: load(&c.cancels),
            ready_for_query: load(&c.ready_for_query),
            socket_writes: load(&c.socket_writes),
            socket_reads: load(&c.socket_reads),
            bytes_out: load(&c.bytes_out),
            bytes_in: load(&c.bytes_in),
            statements: load(&c.statements),
            errors: load(&c.errors),
            protocol_violations: load(&c.protocol_violations),
            sessions_open: self.sessions.load(Ordering::Acquire) as u64,
        }
    }
}
