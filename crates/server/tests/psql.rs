//! A scripted psql session (`tests/clients/psql_session.sql`): tables, `\dt`, `\d`, `\di`, `\dn`, COPY,
//! PREPARE/EXECUTE, errors with their SQLSTATEs, settings, the numadb schema. The output must equal
//! `tests/expected/psql_session.out`; `NUMADB_BLESS=1` rewrites that file from the current output (review the
//! diff before committing it).

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;

#[test]
fn a_scripted_psql_session_prints_what_we_expect() {
    let Some(psql) = tool("psql") else { return };
    let server = start_with("");
    let directory = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let script = std::fs::read(directory.join("clients/psql_session.sql")).unwrap();
    let mut child = Command::new(psql)
        .args(["-X", "--echo-all", "-h", "127.0.0.1", "-p", &server.port().to_string(), "-U", "tester", "-d", "numadb"])
        .env("PGCONNECT_TIMEOUT", "10")
        .env("LC_ALL", "C.UTF-8")
        .env_remove("PGPASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&script).unwrap();
    let output = child.wait_with_output().unwrap();
    // psql interleaves errors (stderr) with results (stdout) on a terminal; here each goes to its own pipe, so
    // they are compared separately.
    let actual = format!(
        "-- stdout\n{}-- stderr\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let expected_path = directory.join("expected/psql_session.out");
    if std::env::var("NUMADB_BLESS").as_deref() == Ok("1") {
        std::fs::write(&expected_path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap_or_default();
    if actual != expected {
        let actual_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("psql_session.actual");
        std::fs::write(&actual_path, &actual).unwrap();
        panic!(
            "psql's output differs from {}; the actual output is in {} (NUMADB_BLESS=1 accepts it)",
            expected_path.display(),
            actual_path.display()
        );
    }
    assert!(output.status.success(), "psql exited with {}", output.status);
}
