//! Event loops for busy servers: idle sessions wait here instead of on their own threads, and the messages
//! that cannot block (Parse, Bind, Describe, Sync, and Execute of a unique-index lookup) are answered right
//! here, so that a prepared point lookup costs one read and one write and no thread switch.
//!
//! Why both: with few sessions, a session's thread blocked in `read` is woken by the kernel's synchronous wakeup
//! on the CPU the client just left, which is the cheapest round trip there is (measured here with pgbench and
//! a canned server: 270k transactions/s with 2 clients against 160k through an event loop). With more sessions
//! than CPUs, every transaction would cost a thread switch, and an event loop that finds many sessions ready at
//! once and answers them in turn wins (220k against 145k with 32 clients). So sessions park in an event loop
//! only while more sessions are open than [`ServerConfig::event_loop_sessions`](crate::ServerConfig), and only
//! after a few round trips of fast messages; anything else (a simple query, a scan, COPY, a write that would
//! block, a malformed message, shutdown) hands the session back to its thread, which picks up exactly where
//! the loop stopped.

use std::collections::HashMap;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};

use crate::connection::{Conn, decode_error};
use crate::handler::{Flow, Sink};
use crate::protocol::backend::Output;
use crate::protocol::frontend::{self, HEADER_BYTES};
use crate::server::Shared;

/// The waker's token.
const WAKER: Token = Token(usize::MAX);
/// Messages answered for one session per wakeup before the session goes back to its thread (a client that
/// pipelines thousands of statements must not hold the loop from the others).
const MESSAGES_PER_WAKE_MAX: usize = 512;
/// Bytes read ahead of the messages answered, at most (a little more: one read's worth).
const READ_AHEAD_BYTES_MAX: usize = 1 << 20;
/// How often an idle loop looks whether the server is shutting down.
const POLL_TIMEOUT: Duration = Duration::from_millis(200);

/// A session in a loop, and how to give it back to its thread.
struct Parked {
    conn: Conn,
    back: SyncSender<Conn>,
    /// Tells this session's entry in the mailbox from the others.
    id: u64,
}

/// One event loop's mailbox.
pub struct EventLoop {
    incoming: Mutex<Vec<Parked>>,
    waker: Waker,
}

/// Starts `count` event loops on their own threads.
pub fn start(count: usize) -> io::Result<Vec<Arc<EventLoop>>> {
    let mut loops = Vec::with_capacity(count);
    for index in 0..count {
        let poll = Poll::new()?;
        let event_loop =
            Arc::new(EventLoop { incoming: Mutex::new(Vec::new()), waker: Waker::new(poll.registry(), WAKER)? });
        let running = Arc::clone(&event_loop);
        std::thread::Builder::new()
            .name(format!("numadb-loop{index}"))
            .stack_size(numadb_sql::text::STATEMENT_STACK_BYTES)
            .spawn(move || run(poll, &running))?;
        loops.push(event_loop);
    }
    Ok(loops)
}

/// Hands a session to an event loop and waits until it comes back (`None`: the session ended there).
pub(crate) fn park(shared: &Shared, conn: Conn, hint: usize) -> Option<Conn> {
    let loops = shared.event_loops()?;
    let event_loop = &loops[hint % loops.len()];
    if conn.io.stream.set_nonblocking(true).is_err() {
        return Some(conn);
    }
    let (back, receiver): (SyncSender<Conn>, Receiver<Conn>) = sync_channel(1);
    let id = NEXT_PARK.fetch_add(1, Ordering::Relaxed);
    event_loop.incoming.lock().unwrap_or_else(|p| p.into_inner()).push(Parked { conn, back, id });
    let woken = event_loop.waker.wake().is_ok();
    if !woken || shared.is_shutting_down() {
        // The loop may be gone (it ends at shutdown once its mailbox is empty): take the session back unless
        // the loop already has it (then it sends it back).
        let mut incoming = event_loop.incoming.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(position) = incoming.iter().position(|p| p.id == id) {
            let parked = incoming.swap_remove(position);
            let _ = parked.conn.io.stream.set_nonblocking(false);
            return Some(parked.conn);
        }
    }
    let mut conn = receiver.recv().ok()?;
    if conn.io.stream.set_nonblocking(false).is_err() {
        return None;
    }
    conn.fast_streak = 0;
    Some(conn)
}

/// Numbers parkings (see [`Parked::id`]).
static NEXT_PARK: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Output stays in the buffer: fast messages write little, and the loop writes once per wakeup.
struct Buffered;

impl Sink for Buffered {
    fn flush(&mut self, _: &mut Output) -> io::Result<()> {
        Ok(())
    }
}

/// What to do with a session after a wakeup.
enum Outcome {
    /// Keep waiting here.
    Stay,
    /// Give it back to its thread.
    Back,
    /// It ended (the client went away or sent Terminate).
    Close,
}

fn run(mut poll: Poll, event_loop: &EventLoop) {
    let mut events = Events::with_capacity(256);
    let mut sessions: HashMap<usize, Parked> = HashMap::new();
    let mut next_token = 0usize;
    let mut shared: Option<Arc<Shared>> = None;
    loop {
        if poll.poll(&mut events, Some(POLL_TIMEOUT)).is_err() {
            std::thread::sleep(Duration::from_millis(1));
        }
        let adopted: Vec<Parked> = std::mem::take(&mut *event_loop.incoming.lock().unwrap_or_else(|p| p.into_inner()));
        for mut parked in adopted {
            shared.get_or_insert_with(|| Arc::clone(&parked.conn.io.shared));
            let token = next_token;
            next_token = next_token.wrapping_add(1) % (usize::MAX - 1);
            let fd = parked.conn.io.stream.as_raw_fd();
            if poll.registry().register(&mut SourceFd(&fd), Token(token), Interest::READABLE).is_err() {
                let _ = parked.back.send(parked.conn);
                continue;
            }
            // Input may have arrived before the registration: answer what is there now.
            match serve(&mut parked.conn) {
                Outcome::Stay => {
                    sessions.insert(token, parked);
                }
                outcome => leave(&poll, parked, outcome),
            }
        }
        for event in events.iter() {
            let token = event.token();
            if token == WAKER {
                continue;
            }
            let Some(mut parked) = sessions.remove(&token.0) else { continue };
            match serve(&mut parked.conn) {
                Outcome::Stay => {
                    sessions.insert(token.0, parked);
                }
                outcome => leave(&poll, parked, outcome),
            }
        }
        if let Some(shared) = &shared
            && shared.is_shutting_down()
        {
            // Every session goes back to its thread, which tells the client and ends it.
            for (_, parked) in sessions.drain() {
                leave(&poll, parked, Outcome::Back);
            }
            if event_loop.incoming.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
                return;
            }
        }
    }
}

fn leave(poll: &Poll, parked: Parked, outcome: Outcome) {
    let fd = parked.conn.io.stream.as_raw_fd();
    let _ = poll.registry().deregister(&mut SourceFd(&fd));
    match outcome {
        // The thread waits on the channel; dropping the sender tells it the session is over.
        Outcome::Close => drop(parked),
        Outcome::Back | Outcome::Stay => {
            let _ = parked.back.send(parked.conn);
        }
    }
}

/// Reads what the client sent, answers the fast messages, writes the answers.
fn serve(conn: &mut Conn) -> Outcome {
    let shared = Arc::clone(&conn.io.shared);
    if shared.is_shutting_down() {
        return Outcome::Back;
    }
    // Reads stop at end of input, at an empty socket, or once READ_AHEAD_BYTES_MAX are waiting: a client that
    // streams faster than it is answered must not grow the buffer without bound or hold the loop.
    let mut read_everything = false;
    loop {
        if conn.io.pending().len() >= READ_AHEAD_BYTES_MAX {
            break;
        }
        match conn.io.fill() {
            Ok(true) => {}
            // End of input: what the client sent before closing is still answered, by its thread (which then
            // reads the end itself and closes).
            Ok(false) if conn.io.pending().is_empty() => return Outcome::Close,
            Ok(false) => return Outcome::Back,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                read_everything = true;
                break;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Outcome::Close,
        }
    }
    // The loop's readiness is edge-triggered: a socket not read to its end wakes it no more, so the session's
    // thread takes over.
    let mut outcome = if read_everything { Outcome::Stay } else { Outcome::Back };
    let Conn { io, out, handler, .. } = conn;
    let body_bytes_max = shared.config.message_bytes_max;
    let mut answered = 0;
    loop {
        let (tag, body) = match frontend::frame(io.pending(), body_bytes_max) {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            // The thread reports protocol violations.
            Err(_) => {
                outcome = Outcome::Back;
                break;
            }
        };
        if answered == MESSAGES_PER_WAKE_MAX {
            outcome = Outcome::Back;
            break;
        }
        let message = match frontend::decode(tag, body) {
            Ok(message) if handler.is_fast(&message) => message,
            Ok(_) => {
                outcome = Outcome::Back;
                break;
            }
            Err(error) if !error.fatal => {
                let frame_bytes = HEADER_BYTES + body.len();
                handler.malformed(&decode_error(&error), tag, out);
                io.consume(frame_bytes);
                answered += 1;
                continue;
            }
            Err(_) => {
                outcome = Outcome::Back;
                break;
            }
        };
        let frame_bytes = HEADER_BYTES + body.len();
        let flow = match handler.handle(message, out, &mut Buffered) {
            Ok(flow) => flow,
            Err(_) => return Outcome::Close,
        };
        io.consume(frame_bytes);
        answered += 1;
        if flow == Flow::Close {
            let _ = write_some(conn);
            return Outcome::Close;
        }
    }
    if !write_some(conn) {
        // The client does not take the answer yet: its thread waits for it.
        outcome = Outcome::Back;
    }
    if matches!(outcome, Outcome::Stay) && !shared.event_loops_wanted() {
        outcome = Outcome::Back;
    }
    outcome
}

/// Writes as much output as the socket takes now; whether all of it went.
fn write_some(conn: &mut Conn) -> bool {
    let counters = &conn.io.shared.registry.counters;
    let mut written_total = 0;
    let bytes = conn.out.bytes();
    while written_total < bytes.len() {
        counters.socket_writes.fetch_add(1, Ordering::Relaxed);
        match (&conn.io.stream).write(&bytes[written_total..]) {
            Ok(0) => break,
            Ok(written) => {
                counters.bytes_out.fetch_add(written as u64, Ordering::Relaxed);
                written_total += written;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    if written_total == bytes.len() {
        conn.out.clear();
        true
    } else {
        conn.out.consume(written_total);
        false
    }
}
