//! `numadb serve` as a user runs it: it listens, answers a client, and exits 0 on SIGTERM or SIGINT.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A startup packet for `user`, then a simple query.
fn session_bytes(user: &str, sql: &str) -> Vec<u8> {
    let mut body = (3i32 << 16).to_be_bytes().to_vec();
    for part in ["user", user, ""] {
        body.extend(part.as_bytes());
        body.push(0);
    }
    let mut bytes = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    bytes.extend(body);
    bytes.push(b'Q');
    bytes.extend(((sql.len() + 5) as i32).to_be_bytes());
    bytes.extend(sql.as_bytes());
    bytes.push(0);
    bytes
}

fn serve_then_signal(signal: &str) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_numadb"))
        .args(["serve", "--listen", "127.0.0.1:0", "--load-thesis", "1000"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut address = None;
    let mut line = String::new();
    while address.is_none() && stderr.read_line(&mut line).unwrap() > 0 {
        if let Some(rest) = line.split("listening on ").nth(1) {
            address = rest.split_whitespace().next().map(str::to_string);
        }
        line.clear();
    }
    let address = address.expect("numadb serve says where it listens");
    let mut stream = TcpStream::connect(&address).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    stream.write_all(&session_bytes("me", "SELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" = 7")).unwrap();
    // Read until the query's ReadyForQuery (the second 'Z' message).
    let mut received: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    while received.windows(6).filter(|w| w[0] == b'Z' && w[1..5] == 5i32.to_be_bytes()).count() < 2 {
        let read = stream.read(&mut chunk).unwrap();
        assert!(read > 0, "the server closed the connection");
        received.extend(&chunk[..read]);
    }
    assert!(received.windows(8).any(|w| w == b"SELECT 1"), "a row came back");
    let status = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    // The open session is told the server is going away; the process exits 0.
    let mut rest = Vec::new();
    let _ = stream.read_to_end(&mut rest);
    assert!(rest.windows(5).any(|w| w == b"57P01"), "the session was terminated with 57P01");
    let status = child.wait().unwrap();
    let mut remaining = String::new();
    stderr.read_to_string(&mut remaining).unwrap();
    assert!(status.success(), "exit status {status}: {remaining}");
    assert!(remaining.contains("stopped"), "{remaining}");
}

#[test]
fn serve_answers_a_client_and_exits_0_on_sigterm() {
    serve_then_signal("-TERM");
}

#[test]
fn serve_exits_0_on_sigint() {
    serve_then_signal("-INT");
}

#[test]
fn serve_help_and_verifiers() {
    let output = Command::new(env!("CARGO_BIN_EXE_numadb")).args(["serve", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&output.stdout);
    for flag in ["--listen", "--max-connections", "--password-file", "--load-thesis", "psql"] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_numadb"))
        .args(["serve", "--print-verifier", "--password", "pw"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("SCRAM-SHA-256$4096:"));
    let output = Command::new(env!("CARGO_BIN_EXE_numadb"))
        .args(["serve", "--listen", "127.0.0.1:0", "--password", "pw"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "a password without a user is refused");
}
