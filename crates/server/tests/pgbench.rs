//! pgbench against numadb: the thesis's point lookup as a prepared statement (the benchmark's workload), mixed
//! with aggregations that need the session's thread, in each of pgbench's protocols. Every transaction must
//! succeed.

mod common;

use std::process::Command;

use common::*;
use numadb_server::ServerConfig;

const ROWS: u64 = 100_000;

fn thesis_server(config: ServerConfig) -> TestServer {
    start(config, |session| numadb_sql::thesis::load_thesis_tables(session, ROWS, 7, Some(16_384), None).unwrap())
}

/// Runs pgbench; its output. Panics unless every transaction succeeded.
fn pgbench(server: &TestServer, protocol: &str, clients: u32, transactions: u32, scripts: &[(&str, &str)]) -> String {
    let pgbench = tool("pgbench").expect("checked by the caller");
    let directory = tempfile::tempdir().unwrap();
    let mut arguments: Vec<String> = vec![
        "-n".into(),
        "-h".into(),
        "127.0.0.1".into(),
        "-p".into(),
        server.port().to_string(),
        "-U".into(),
        "bench".into(),
        "-M".into(),
        protocol.into(),
        "-c".into(),
        clients.to_string(),
        "-j".into(),
        "2".into(),
        "-t".into(),
        transactions.to_string(),
    ];
    for (name, script) in scripts {
        // `name@weight` weighs the script against the others.
        let (file, weight) = name.split_once('@').map_or((*name, None), |(f, w)| (f, Some(w)));
        let path = directory.path().join(file);
        std::fs::write(&path, script).unwrap();
        arguments.push("-f".into());
        arguments.push(match weight {
            Some(weight) => format!("{}@{weight}", path.display()),
            None => path.display().to_string(),
        });
    }
    arguments.push("numadb".into());
    let output = Command::new(pgbench).args(&arguments).env("PGCONNECT_TIMEOUT", "10").output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "pgbench failed:\n{text}");
    let expected = format!("number of transactions actually processed: {0}/{0}", clients * transactions);
    assert!(text.contains(&expected), "not every transaction ran:\n{text}");
    assert!(text.contains("number of failed transactions: 0 (0.000%)"), "failed transactions:\n{text}");
    assert!(!text.contains("aborted"), "a client aborted:\n{text}");
    text
}

const LOOKUP: &str = "\\set k random(1, 100000)\nSELECT \"C1\" FROM \"TBL_0\" WHERE \"C0\" = :k;\n";
const AGGREGATION: &str = "\\set p random(1000, 50000)\n\
    (SELECT COUNT(*) FROM \"TBL_0\" WHERE \"C1\" < :p OR \"C2\" < :p) UNION ALL (SELECT COUNT(*) FROM \"TBL_1\" WHERE \"C3\" < :p);\n";

#[test]
fn pgbench_prepared_lookups_have_no_failures() {
    if tool("pgbench").is_none() {
        return;
    }
    let server = thesis_server(ServerConfig::default());
    let before = server.running.handle().stats();
    pgbench(&server, "prepared", 4, 2000, &[("lookup.sql", LOOKUP)]);
    let during = server.running.handle().stats().since(&before);
    assert_eq!(during.errors, 0);
    // One write per transaction, give or take the connections' startup and the statements pgbench prepares.
    let transactions = 4 * 2000;
    assert!(
        during.socket_writes <= transactions + 4 * 4,
        "{} writes for {transactions} transactions",
        during.socket_writes
    );
}

#[test]
fn pgbench_in_every_protocol_with_lookups_and_aggregations_mixed() {
    if tool("pgbench").is_none() {
        return;
    }
    // Event loops for any number of sessions, so that sessions move between their threads and the loops.
    let server = thesis_server(ServerConfig { event_loop_sessions: 0, ..ServerConfig::default() });
    for protocol in ["prepared", "extended", "simple"] {
        pgbench(&server, protocol, 8, 100, &[("lookup.sql@9", LOOKUP), ("aggregation.sql@1", AGGREGATION)]);
    }
}
