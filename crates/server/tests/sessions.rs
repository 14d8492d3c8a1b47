//! Sessions and safety: the connection limit, statement timeouts, clients that stop reading or vanish,
//! graceful shutdown, and password authentication through libpq (psql).

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use numadb_server::auth::Verifier;
use numadb_server::{Authentication, ServerConfig};

/// A statement that runs until it is stopped: a join of `table` with itself on a key of two values, so every
/// row has half the table as partners (10^11 joined rows for 500 000 rows). Until stop 30 this was 400 UNION ALL
/// scans; once scans got faster they took 180 ms, less than the shutdown grace the tests wait out, and the
/// statement ended before shutdown could cancel it. The join's tasks check for cancellation as they count.
fn long_query(table: &str) -> String {
    format!("SELECT count(*) FROM \"{table}\" a JOIN \"{table}\" b ON a.\"C1\" % 2 = b.\"C2\" % 2")
}

fn thesis(config: ServerConfig, rows: u64) -> TestServer {
    start(config, |session| numadb_sql::thesis::load_thesis_tables(session, rows, 5, None, None).unwrap())
}

/// Waits (bounded) until `condition` holds.
fn eventually(what: &str, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn one_session_beyond_the_limit_is_refused_with_53300_and_cancel_still_works() {
    let server = thesis(ServerConfig { max_connections: 3, ..ServerConfig::default() }, 500_000);
    let (mut busy, startup) = RawClient::connect(server.address(), "a");
    let (process_id, secret) = startup
        .iter()
        .find_map(|r| match r {
            Reply::BackendKeyData(pid, secret) => Some((*pid, *secret)),
            _ => None,
        })
        .unwrap();
    let _others: Vec<_> = (0..2).map(|_| RawClient::connect(server.address(), "b").0).collect();
    let (_, replies) = RawClient::connect(server.address(), "too many");
    assert_eq!(replies, vec![Reply::Error("FATAL".into(), "53300".into(), "sorry, too many clients already".into())]);
    // With every slot taken, a cancel request still reaches the running statement.
    busy.send(vec![query(&long_query("TBL_0"))]);
    eventually("the statement runs", || server.running.handle().sessions().iter().any(|s| s.busy));
    let mut cancel = TcpStream::connect(server.address()).unwrap();
    let mut request = 16i32.to_be_bytes().to_vec();
    request.extend(80_877_102i32.to_be_bytes());
    request.extend(process_id.to_be_bytes());
    request.extend(secret.to_be_bytes());
    cancel.write_all(&request).unwrap();
    let replies = busy.until_ready();
    assert_eq!(errors(&replies)[0].sqlstate(), "57014", "{replies:?}");
    // A wrong key cancels nothing.
    assert_eq!(server.running.handle().stats().cancels, 1);
    let mut wrong = TcpStream::connect(server.address()).unwrap();
    request[12..16].copy_from_slice(&(secret ^ 1).to_be_bytes());
    wrong.write_all(&request).unwrap();
    let _ = wrong.read(&mut [0u8; 1]);
    assert_eq!(server.running.handle().stats().cancels, 1);
}

#[test]
fn statement_timeout_cancels_long_statements_set_or_given_at_startup() {
    let server = thesis(ServerConfig::default(), 500_000);
    let (mut client, _) = RawClient::connect(server.address(), "t");
    let replies = client.simple(&format!("SET statement_timeout = '50ms'; {}", long_query("TBL_0")));
    let error = errors(&replies)[0].clone();
    assert_eq!(error.sqlstate(), "57014");
    assert!(matches!(&error, Reply::Error(_, _, m) if m.contains("statement timeout")), "{error:?}");
    assert_eq!(rows(&client.simple("SELECT 1")), vec![vec![Some("1".into())]]);
    // Through the startup packet's options, as `PGOPTIONS='-c statement_timeout=50'` sends it.
    let Some(psql) = tool("psql") else { return };
    let output = Command::new(psql)
        .args(["-X", "-h", "127.0.0.1", "-p", &server.port().to_string(), "-U", "t", "-d", "numadb", "-c"])
        .arg(long_query("TBL_1"))
        .env("PGOPTIONS", "-c statement_timeout=50")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("canceling statement due to statement timeout"), "{stderr}");
}

#[test]
fn statement_timeout_bounds_the_whole_statement_not_each_subquery() {
    let server = thesis(ServerConfig::default(), 500_000);
    let (mut client, _) = RawClient::connect(server.address(), "t");
    // 400 scalar subqueries, each far shorter than the timeout (every block read, by the kernels), together far
    // longer.
    let subqueries: Vec<String> =
        (0..400).map(|i| format!("(SELECT COUNT(*) FROM \"TBL_0\" WHERE \"C1\" < {})", 250_000 + i)).collect();
    let sql = format!("SET statement_timeout = '10ms'; SELECT {}", subqueries.join(", "));
    let replies = client.simple(&sql);
    let error = errors(&replies).first().map(|e| (*e).clone());
    assert!(
        matches!(&error, Some(Reply::Error(_, code, m)) if code == "57014" && m.contains("statement timeout")),
        "{error:?}"
    );
}

#[test]
fn a_client_that_stops_reading_blocks_nobody_else() {
    let server = thesis(ServerConfig::default(), 300_000);
    // Ask for every row and never read the answer (megabytes: the socket buffers fill and the session's writes
    // block).
    let mut stuck = TcpStream::connect(server.address()).unwrap();
    let mut startup = Vec::new();
    {
        let mut body = (3i32 << 16).to_be_bytes().to_vec();
        for part in ["user", "stuck", ""] {
            body.extend(part.as_bytes());
            body.push(0);
        }
        startup.extend(((body.len() + 4) as i32).to_be_bytes());
        startup.extend(body);
    }
    stuck.write_all(&startup).unwrap();
    stuck.write_all(&packet(vec![query("SELECT * FROM \"TBL_0\"")])).unwrap();
    eventually("the stuck session is writing", || server.running.handle().stats().bytes_out > 1 << 20);
    // Everybody else goes on, prepared lookups and scans alike.
    let (mut client, _) = RawClient::connect(server.address(), "other");
    client.send(vec![parse("q", "SELECT \"C0\" FROM \"TBL_0\" WHERE \"C0\" = $1", &[]), sync()]);
    client.until_ready();
    for key in 1..50 {
        client.send(vec![bind("", "q", &[], &[Some(key.to_string().as_bytes())], &[]), execute("", 0), sync()]);
        assert_eq!(rows(&client.until_ready()), vec![vec![Some(key.to_string())]]);
    }
    assert_eq!(rows(&client.simple("SELECT count(*) FROM \"TBL_1\"")), vec![vec![Some("300000".into())]]);
    // The stuck client vanishes: its session ends and frees its slot.
    drop(stuck);
    eventually("the stuck session ends", || server.running.handle().stats().sessions_open == 1);
}

#[test]
fn graceful_shutdown_ends_idle_sessions_lets_statements_finish_then_cancels_them() {
    let server =
        thesis(ServerConfig { shutdown_grace: Duration::from_millis(300), ..ServerConfig::default() }, 500_000);
    let address = server.address();
    let (mut idle, _) = RawClient::connect(address, "idle");
    let (mut busy, _) = RawClient::connect(address, "busy");
    busy.send(vec![query(&long_query("TBL_0"))]);
    eventually("the long statement runs", || server.running.handle().sessions().iter().any(|s| s.busy));
    let report = server.running.shutdown();
    assert_eq!(report.sessions, 2);
    assert_eq!(report.cancelled, 1, "{report:?}");
    assert_eq!(report.abandoned, 0);
    // The idle session was told why it ends; so was the busy one, whose statement shutdown cancelled (57P01, as
    // in PostgreSQL, not a cancel request's 57014).
    let idle_replies = idle.until_closed();
    assert_eq!(idle_replies.last().map(Reply::sqlstate), Some("57P01"), "{idle_replies:?}");
    let busy_replies = busy.until_closed();
    let codes: Vec<&str> = errors(&busy_replies).iter().map(|e| e.sqlstate()).collect();
    assert!(!codes.is_empty() && codes.iter().all(|c| *c == "57P01"), "{busy_replies:?}");
    assert!(TcpStream::connect(address).is_err(), "the listener is closed");
}

#[test]
fn psql_authenticates_with_scram_sha_256() {
    let Some(psql) = tool("psql") else { return };
    let mut users = BTreeMap::new();
    users.insert("carol".to_string(), Verifier::from_password("s3cret pass"));
    let server =
        start(ServerConfig { authentication: Authentication::Scram(users), ..ServerConfig::default() }, |_| {});
    let run = |user: &str, password: &str| {
        Command::new(&psql)
            .args(["-X", "-At", "-h", "127.0.0.1", "-p", &server.port().to_string(), "-U", user, "-d", "numadb"])
            .args(["-c", "SELECT current_user"])
            .env("PGPASSWORD", password)
            .env("PGCONNECT_TIMEOUT", "10")
            .output()
            .unwrap()
    };
    let good = run("carol", "s3cret pass");
    assert!(good.status.success(), "{}", String::from_utf8_lossy(&good.stderr));
    assert_eq!(String::from_utf8_lossy(&good.stdout).trim(), "carol");
    for (user, password) in [("carol", "wrong"), ("mallory", "s3cret pass")] {
        let bad = run(user, password);
        assert!(!bad.status.success());
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(stderr.contains(&format!("password authentication failed for user \"{user}\"")), "{stderr}");
    }
}
