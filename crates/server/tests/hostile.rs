//! Hostile input against a live server: random bytes, truncated and mutated messages, lying lengths, oversized
//! messages, statements deep enough to overflow a stack, clients that never finish their startup. The server
//! must survive all of it, and a well-behaved session running at the same time must not notice.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::*;
use numadb_server::ServerConfig;
use pgwire::messages::PgWireFrontendMessage;

const SETUP: &str = "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT);
                     INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three');";

fn random_bytes(rng: &mut fastrand::Rng, n: usize) -> Vec<u8> {
    std::iter::repeat_with(|| rng.u8(..)).take(n).collect()
}

fn startup_packet(user: &str) -> Vec<u8> {
    let mut body = (3i32 << 16).to_be_bytes().to_vec();
    for part in ["user", user, "database", "numadb", ""] {
        body.extend(part.as_bytes());
        body.push(0);
    }
    let mut packet = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    packet.extend(body);
    packet
}

/// Valid messages to mutate.
fn valid_messages() -> Vec<Vec<u8>> {
    vec![
        packet(vec![parse("s", "SELECT v FROM t WHERE k = $1", &[23])]),
        packet(vec![bind("", "s", &[1], &[Some(&1i32.to_be_bytes())], &[1])]),
        packet(vec![describe(b'S', "s"), describe(b'P', "")]),
        packet(vec![execute("", 0), sync()]),
        packet(vec![query("SELECT count(*) FROM t")]),
        packet(vec![close(b'S', "s")]),
        packet(vec![PgWireFrontendMessage::CopyData(pgwire::messages::copy::CopyData::new(
            bytes::Bytes::from_static(b"4,four\n"),
        ))]),
    ]
}

/// One hostile connection: sends `payload` (after a valid startup when `start_session`), reads whatever comes
/// back for a moment, and closes.
fn hostile(address: std::net::SocketAddr, start_session: bool, payload: &[u8]) {
    let Ok(mut stream) = TcpStream::connect(address) else { return };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
    if start_session {
        let _ = stream.write_all(&startup_packet("hostile"));
    }
    let _ = stream.write_all(payload);
    let mut sink = [0u8; 4096];
    for _ in 0..4 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

/// Runs well-behaved statements until `stop`, checking every answer; the number it ran.
fn witness(address: std::net::SocketAddr, stop: Arc<AtomicBool>) -> usize {
    let (mut client, _) = RawClient::connect(address, "witness");
    client.send(vec![parse("lookup", "SELECT v FROM t WHERE k = $1", &[]), sync()]);
    assert_eq!(client.until_ready()[0], Reply::ParseComplete);
    let mut rounds = 0;
    while !stop.load(Ordering::Relaxed) || rounds < 10 {
        client.send(vec![bind("", "lookup", &[], &[Some(b"2")], &[]), execute("", 0), sync()]);
        assert_eq!(rows(&client.until_ready()), vec![vec![Some("two".into())]]);
        assert_eq!(rows(&client.simple("SELECT count(*) FROM t WHERE k > 1")), vec![vec![Some("2".into())]]);
        rounds += 1;
    }
    rounds
}

#[test]
fn random_truncated_and_mutated_messages_never_disturb_another_session() {
    let server = start(ServerConfig { startup_timeout: Duration::from_secs(2), ..ServerConfig::default() }, |s| {
        for result in s.execute(SETUP) {
            result.unwrap();
        }
    });
    let address = server.address();
    let stop = Arc::new(AtomicBool::new(false));
    let witness_thread = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || witness(address, stop))
    };
    // Seeded: a failure reproduces.
    let mut rng = fastrand::Rng::with_seed(0x5EED_1234_ABCD_0042);
    let valid = valid_messages();
    let mut threads = Vec::new();
    for case in 0..600 {
        let start_session = case % 4 != 0;
        let payload = match case % 8 {
            // Random bytes.
            0 | 1 => {
                let n = rng.usize(..200);
                random_bytes(&mut rng, n)
            }
            // Valid messages, truncated.
            2 => {
                let mut bytes: Vec<u8> = valid[rng.usize(..valid.len())].clone();
                bytes.truncate(rng.usize(..bytes.len()));
                bytes
            }
            // Valid messages with bytes flipped, inserted or lengths rewritten.
            3 | 4 => {
                let mut bytes: Vec<u8> = (0..3).flat_map(|_| valid[rng.usize(..valid.len())].clone()).collect();
                for _ in 0..1 + rng.usize(..4) {
                    let at = rng.usize(..bytes.len());
                    match rng.usize(..3) {
                        0 => bytes[at] ^= 1 << rng.usize(..8),
                        1 => bytes.insert(at, rng.u64(..) as u8),
                        _ if at + 5 <= bytes.len() => {
                            bytes[at + 1..at + 5].copy_from_slice(&((rng.u64(..) % 64) as i32).to_be_bytes())
                        }
                        _ => {}
                    }
                }
                bytes
            }
            // Lengths that lie: huge, negative, below the header.
            5 => {
                let tag = b"QPBDESHXdcf"[rng.usize(..11)];
                let length = [i32::MAX, i32::MIN, -1, 0, 3, 1 << 30][rng.usize(..6)];
                let mut bytes = vec![tag];
                bytes.extend(length.to_be_bytes());
                bytes.extend(random_bytes(&mut rng, 16));
                bytes
            }
            // Startup packets that lie (the session was not started for these).
            6 => {
                let mut bytes = [8i32, 10_001, -5, 1 << 30][rng.usize(..4)].to_be_bytes().to_vec();
                bytes.extend((rng.u64(..) as i32).to_be_bytes());
                let n = rng.usize(..64);
                bytes.extend(random_bytes(&mut rng, n));
                bytes
            }
            // A valid session that stops half way through a message.
            _ => {
                let mut bytes = packet(vec![query("SELECT 1")]);
                bytes.extend(&valid[1][..valid[1].len() / 2]);
                bytes
            }
        };
        let start_session = start_session && case % 8 != 6;
        threads.push(std::thread::spawn(move || hostile(address, start_session, &payload)));
        if threads.len() == 16 {
            for thread in threads.drain(..) {
                thread.join().unwrap();
            }
        }
    }
    for thread in threads {
        thread.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = witness_thread.join().expect("the well-behaved session saw only right answers");
    assert!(rounds >= 10);
    // The server still serves new sessions, and told the hostile ones what was wrong.
    let (mut client, _) = RawClient::connect(address, "after");
    assert_eq!(rows(&client.simple("SELECT v FROM t WHERE k = 3")), vec![vec![Some("three".into())]]);
    assert!(server.running.handle().stats().protocol_violations > 0);
}

#[test]
fn an_oversized_message_is_refused_before_its_body_arrives() {
    let server = start(ServerConfig { message_bytes_max: 1 << 20, ..ServerConfig::default() }, |_| {});
    let (mut client, _) = RawClient::connect(server.address(), "big");
    // Announce 1 GiB and send nothing more: the server must answer without waiting for (or buffering) it.
    let mut header = vec![b'Q'];
    header.extend((1i32 << 30).to_be_bytes());
    client.send_bytes(&header);
    let replies = client.until_closed();
    assert_eq!(replies.len(), 1, "{replies:?}");
    assert_eq!(replies[0], Reply::Error("FATAL".into(), "08P01".into(), replies[0].clone().message()));
    // Just under the limit is fine.
    let (mut client, _) = RawClient::connect(server.address(), "big");
    let sql = format!("SELECT '{}'", "x".repeat((1 << 20) - 100));
    assert_eq!(rows(&client.simple(&sql))[0][0].as_ref().map(String::len), Some((1 << 20) - 100));
}

#[test]
fn statements_deep_enough_to_overflow_a_stack_are_refused() {
    let server = start_with(SETUP);
    let (mut client, _) = RawClient::connect(server.address(), "deep");
    let unions = |n: usize| vec!["(SELECT count(*) FROM t)"; n + 1].join(" UNION ALL ");
    // The most the server lets through runs (on the session's thread in the simple protocol, and through Parse,
    // which an event loop may run).
    assert_eq!(rows(&client.simple(&unions(numadb_server::sql_text::SET_OPERATIONS_MAX))).len(), 1001);
    let sum = format!("SELECT 1{}", "+1".repeat(numadb_server::sql_text::OPERATORS_MAX));
    let total = Some((numadb_server::sql_text::OPERATORS_MAX + 1).to_string());
    assert_eq!(rows(&client.simple(&sum)), vec![vec![total.clone()]]);
    client.send(vec![parse("", &sum, &[]), bind("", "", &[], &[], &[]), execute("", 0), sync()]);
    assert_eq!(rows(&client.until_ready()), vec![vec![total]]);
    // As deep over a table's sealed partitions, whose rows the workers' tasks compute: a worker's stack is as
    // deep as a statement's (its default 2 MiB overflowed at about a thousand `+`, aborting the server).
    let setup = "CREATE TABLE deep (a INTEGER) WITH (partition_rows = 1024); \
                 INSERT INTO deep SELECT g FROM generate_series(1, 5000) AS s(g)";
    client.simple(setup);
    // As many operators as a statement may hold (`count(*)`'s star and `>` count).
    let ones = "+1".repeat(numadb_server::sql_text::OPERATORS_MAX - 2);
    let sum = format!("SELECT sum(a{ones}) FROM deep");
    assert_eq!(rows(&client.simple(&sum)), vec![vec![Some((12_502_500 + 5000 * 4998).to_string())]]);
    let count = format!("SELECT count(*) FROM deep WHERE a{ones} > 5000");
    assert_eq!(rows(&client.simple(&count)), vec![vec![Some("4998".into())]]);
    // One more is refused; so is deep nesting.
    for sql in [
        unions(numadb_server::sql_text::SET_OPERATIONS_MAX + 1),
        format!("SELECT 1{}", "+1".repeat(numadb_server::sql_text::OPERATORS_MAX + 1)),
        format!("SELECT {}1{}", "(".repeat(100_000), ")".repeat(100_000)),
        format!("SELECT {}1", "NOT ".repeat(200_000)),
        format!("SELECT {}1", "- ".repeat(200_000)),
    ] {
        let replies = client.simple(&sql);
        assert_eq!(errors(&replies).len(), 1, "{replies:?}");
        client.send(vec![parse("", &sql, &[]), sync()]);
        assert_eq!(errors(&client.until_ready()).len(), 1);
    }
    assert_eq!(rows(&client.simple("SELECT 1")), vec![vec![Some("1".into())]]);
}

#[test]
fn clients_that_never_finish_their_startup_are_dropped() {
    let server = start(
        ServerConfig {
            max_connections: 2,
            handshakes_max: 4,
            startup_timeout: Duration::from_millis(300),
            ..ServerConfig::default()
        },
        |_| {},
    );
    // Six connections that say nothing: four wait in their handshake, the rest are refused at once.
    let mut silent: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(server.address()).unwrap()).collect();
    for stream in &mut silent {
        stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut buffer = Vec::new();
        // The server ends each of them (a refusal, or the startup timeout).
        let _ = stream.read_to_end(&mut buffer);
    }
    let (mut client, _) = RawClient::connect(server.address(), "patient");
    assert_eq!(rows(&client.simple("SELECT 1")), vec![vec![Some("1".into())]]);
}

trait Message {
    fn message(self) -> String;
}

impl Message for Reply {
    fn message(self) -> String {
        match self {
            Reply::Error(_, _, message) => message,
            other => panic!("not an error: {other:?}"),
        }
    }
}
