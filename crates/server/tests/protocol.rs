//! The protocol byte by byte, through a raw client: startup, the simple and extended query protocols, formats,
//! errors, transaction status, and how many socket writes a round trip costs.

mod common;

use common::*;
use numadb_server::ServerConfig;

const SETUP: &str = "CREATE TABLE t (k INTEGER PRIMARY KEY, b BIGINT, d DOUBLE PRECISION, s TEXT, f BOOLEAN);
                     INSERT INTO t VALUES (1, 10000000000, 1.5, 'one', true), (2, -2, -0.25, NULL, false),
                                          (3, 3, NULL, 'three', NULL);";

fn server() -> TestServer {
    start_with(SETUP)
}

#[test]
fn startup_reports_parameters_and_a_cancel_key() {
    let server = server();
    let (_, replies) = RawClient::connect(server.address(), "alice");
    assert_eq!(replies.first(), Some(&Reply::Authentication(0)));
    let parameter = |name: &str| {
        replies.iter().find_map(|r| match r {
            Reply::ParameterStatus(n, v) if n == name => Some(v.clone()),
            _ => None,
        })
    };
    assert_eq!(parameter("server_version").as_deref(), Some("15.0"));
    assert_eq!(parameter("client_encoding").as_deref(), Some("UTF8"));
    assert_eq!(parameter("DateStyle").as_deref(), Some("ISO, MDY"));
    assert_eq!(parameter("integer_datetimes").as_deref(), Some("on"));
    assert_eq!(parameter("standard_conforming_strings").as_deref(), Some("on"));
    assert!(replies.iter().any(|r| matches!(r, Reply::BackendKeyData(..))));
    assert_eq!(replies.last(), Some(&Reply::ReadyForQuery(b'I')));
}

#[test]
fn tls_and_gss_requests_are_refused_and_the_session_goes_on_in_the_clear() {
    let server = server();
    for code in [80_877_103i32, 80_877_104] {
        let mut client = RawClient::connect_only(server.address());
        let mut request = 8i32.to_be_bytes().to_vec();
        request.extend(code.to_be_bytes());
        client.send_bytes(&request);
        let mut answer = [0u8; 1];
        std::io::Read::read_exact(&mut client.stream, &mut answer).unwrap();
        assert_eq!(&answer, b"N");
    }
}

#[test]
fn a_newer_minor_protocol_version_is_negotiated_down() {
    let server = server();
    let mut client = RawClient::connect_only(server.address());
    let mut body = (3i32 << 16 | 2).to_be_bytes().to_vec();
    for part in ["user", "bob", "_pq_.something", "x", ""] {
        body.extend(part.as_bytes());
        body.push(0);
    }
    let mut packet = ((body.len() + 4) as i32).to_be_bytes().to_vec();
    packet.extend(body);
    client.send_bytes(&packet);
    let replies = client.until_ready();
    assert!(matches!(&replies[0], Reply::Other(text) if text.contains("NegotiateProtocolVersion")), "{replies:?}");
    assert_eq!(replies.last(), Some(&Reply::ReadyForQuery(b'I')));
}

#[test]
fn simple_queries_run_every_statement_and_stop_at_the_first_error() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    let replies = client.simple("SELECT k, s FROM t ORDER BY k; SELECT count(*) FROM t");
    assert_eq!(replies[0], Reply::RowDescription(vec![("k".into(), 23, 0), ("s".into(), 25, 0)]));
    assert_eq!(
        rows(&replies),
        vec![
            vec![Some("1".into()), Some("one".into())],
            vec![Some("2".into()), None],
            vec![Some("3".into()), Some("three".into())],
            vec![Some("3".into())]
        ]
    );
    assert!(replies.contains(&Reply::CommandComplete("SELECT 3".into())));
    assert!(replies.contains(&Reply::CommandComplete("SELECT 1".into())));
    let replies = client.simple("SELECT 1; SELECT * FROM nosuch; SELECT 2");
    assert_eq!(errors(&replies)[0].sqlstate(), "42P01");
    assert_eq!(rows(&replies), vec![vec![Some("1".into())]], "the statement after the error does not run");
    assert_eq!(client.simple(" ; -- nothing\n"), vec![Reply::EmptyQuery, Reply::ReadyForQuery(b'I')]);
    let replies = client.simple("SELEC 1");
    assert_eq!(errors(&replies)[0].sqlstate(), "42601");
    let replies = client.simple("SELECT 'unterminated");
    assert_eq!(errors(&replies)[0].sqlstate(), "42601");
}

#[test]
fn every_type_in_text_and_binary() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    client.send(vec![
        parse("", "SELECT k, b, d, s, f FROM t WHERE k = $1", &[]),
        bind("", "", &[], &[Some(b"1")], &[1]),
        describe(b'P', ""),
        execute("", 0),
        sync(),
    ]);
    let replies = client.until_ready();
    assert_eq!(
        replies[2],
        Reply::RowDescription(vec![
            ("k".into(), 23, 1),
            ("b".into(), 20, 1),
            ("d".into(), 701, 1),
            ("s".into(), 25, 1),
            ("f".into(), 16, 1)
        ])
    );
    assert_eq!(
        replies[3],
        Reply::DataRow(vec![
            Some(1i32.to_be_bytes().to_vec()),
            Some(10_000_000_000i64.to_be_bytes().to_vec()),
            Some(1.5f64.to_be_bytes().to_vec()),
            Some(b"one".to_vec()),
            Some(vec![1]),
        ])
    );
    // Text, and a mix of formats per column.
    client.send(vec![bind("", "", &[], &[Some(b"2")], &[0, 1, 0, 0, 1]), execute("", 0), sync()]);
    let replies = client.until_ready();
    assert_eq!(
        replies[1],
        Reply::DataRow(vec![
            Some(b"2".to_vec()),
            Some((-2i64).to_be_bytes().to_vec()),
            Some(b"-0.25".to_vec()),
            None,
            Some(vec![0])
        ])
    );
}

#[test]
fn parameter_types_are_inferred_and_integers_arrive_in_any_width() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    client.send(vec![parse("s", "SELECT s FROM t WHERE k = $1 AND b > $2", &[]), describe(b'S', "s"), sync()]);
    let replies = client.until_ready();
    assert_eq!(replies[1], Reply::ParameterDescription(vec![23, 20]));
    assert_eq!(replies[2], Reply::RowDescription(vec![("s".into(), 25, 0)]));
    // int2, int4 and int8 binary values for the int4 and int8 parameters.
    for (k, b) in [
        (&3i16.to_be_bytes()[..], &0i16.to_be_bytes()[..]),
        (&3i32.to_be_bytes(), &0i64.to_be_bytes()),
        (&3i64.to_be_bytes(), &0i32.to_be_bytes()),
    ] {
        client.send(vec![bind("", "s", &[1], &[Some(k), Some(b)], &[]), execute("", 0), sync()]);
        let replies = client.until_ready();
        assert_eq!(rows(&replies), vec![vec![Some("three".into())]], "{replies:?}");
    }
    // Declared int2 and int8 types are what ParameterDescription then reports.
    client.send(vec![parse("", "SELECT s FROM t WHERE k = $1", &[21]), describe(b'S', ""), sync()]);
    assert_eq!(client.until_ready()[1], Reply::ParameterDescription(vec![21]));
    client.send(vec![bind("", "", &[1], &[Some(&1i16.to_be_bytes())], &[]), execute("", 0), sync()]);
    assert_eq!(rows(&client.until_ready()), vec![vec![Some("one".into())]]);
    // A binary value of the wrong size, text that is not a number, a value out of range.
    for (format, value, sqlstate) in [(1, &[1u8, 2, 3][..], "22P03"), (0, b"x1", "22P02"), (0, b"99999999999", "22003")]
    {
        client.send(vec![bind("", "s", &[format], &[Some(value), Some(b"0")], &[]), execute("", 0), sync()]);
        let replies = client.until_ready();
        assert_eq!(errors(&replies)[0].sqlstate(), sqlstate, "{replies:?}");
    }
}

#[test]
fn portals_suspend_and_resume_and_statements_close() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    client.send(vec![
        query("BEGIN"),
        parse("all", "SELECT k FROM t ORDER BY k", &[]),
        bind("p", "all", &[], &[], &[]),
        execute("p", 2),
        execute("p", 2),
        execute("p", 2),
        sync(),
    ]);
    let mut replies = client.until_ready();
    replies.extend(client.until_ready());
    let tail: Vec<_> = replies.iter().skip_while(|r| **r != Reply::BindComplete).cloned().collect();
    assert_eq!(
        tail,
        vec![
            Reply::BindComplete,
            Reply::DataRow(vec![Some(b"1".to_vec())]),
            Reply::DataRow(vec![Some(b"2".to_vec())]),
            Reply::PortalSuspended,
            Reply::DataRow(vec![Some(b"3".to_vec())]),
            Reply::CommandComplete("SELECT 1".into()),
            Reply::CommandComplete("SELECT 0".into()),
            Reply::ReadyForQuery(b'T'),
        ]
    );
    client.send(vec![close(b'P', "p"), close(b'S', "all"), execute("p", 0), sync()]);
    let replies = client.until_ready();
    assert_eq!(replies[0..2], [Reply::CloseComplete, Reply::CloseComplete]);
    assert_eq!(errors(&replies)[0].sqlstate(), "34000");
    assert_eq!(client.simple("COMMIT").last(), Some(&Reply::ReadyForQuery(b'I')));
    // Closing what does not exist is not an error.
    client.send(vec![close(b'S', "nothing"), sync()]);
    assert_eq!(client.until_ready(), vec![Reply::CloseComplete, Reply::ReadyForQuery(b'I')]);
}

#[test]
fn after_an_error_messages_are_skipped_until_sync() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    client.send(vec![
        parse("", "SELECT nosuchcolumn FROM t", &[]),
        bind("", "", &[], &[], &[]),
        execute("", 0),
        sync(),
        parse("ok", "SELECT 1", &[]),
        bind("", "ok", &[], &[], &[]),
        execute("", 0),
        sync(),
    ]);
    let replies = client.until_ready();
    assert_eq!(replies.len(), 2, "{replies:?}");
    assert_eq!(replies[0].sqlstate(), "42703");
    let replies = client.until_ready();
    assert_eq!(rows(&replies), vec![vec![Some("1".into())]]);
    // Statement name clashes and parameter counts.
    client.send(vec![parse("ok", "SELECT 2", &[]), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "42P05");
    client.send(vec![bind("", "ok", &[], &[Some(b"1")], &[]), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "08P01");
    client.send(vec![bind("", "missing", &[], &[], &[]), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "26000");
    client.send(vec![parse("", "SELECT 1; SELECT 2", &[]), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "42601");
}

#[test]
fn sql_prepare_and_protocol_statements_share_names() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    let replies = client.simple("PREPARE q(int) AS SELECT s FROM t WHERE k = $1; EXECUTE q(3)");
    assert_eq!(rows(&replies), vec![vec![Some("three".into())]]);
    client.send(vec![bind("", "q", &[], &[Some(b"1")], &[]), describe(b'P', ""), execute("", 0), sync()]);
    assert_eq!(rows(&client.until_ready()), vec![vec![Some("one".into())]]);
    client.simple("DEALLOCATE q");
    client.send(vec![bind("", "q", &[], &[Some(b"1")], &[]), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "26000");
    // Statements numadb answers itself (here `SELECT version()` and an empty one) deallocate like the others.
    client.send(vec![parse("v", "SELECT version()", &[]), parse("e", "", &[]), parse("w", "SELECT 1", &[]), sync()]);
    client.until_ready();
    assert_eq!(client.simple("DEALLOCATE v")[0], Reply::CommandComplete("DEALLOCATE".into()));
    assert_eq!(client.simple("DEALLOCATE ALL")[0], Reply::CommandComplete("DEALLOCATE ALL".into()));
    client.send(vec![parse("v", "SELECT 2", &[]), parse("e", "SELECT 3", &[]), parse("w", "SELECT 4", &[]), sync()]);
    let replies = client.until_ready();
    assert!(errors(&replies).is_empty(), "{replies:?}");
}

#[test]
fn transaction_status_follows_begin_errors_and_rollback() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    assert_eq!(client.simple("BEGIN").last(), Some(&Reply::ReadyForQuery(b'T')));
    let replies = client.simple("SELECT * FROM nosuch");
    assert_eq!(replies.last(), Some(&Reply::ReadyForQuery(b'E')));
    let replies = client.simple("SELECT 1");
    assert_eq!(replies[0].sqlstate(), "25P02");
    client.send(vec![parse("", "SELECT 1", &[]), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "25P02");
    let replies = client.simple("COMMIT");
    assert_eq!(replies, vec![Reply::CommandComplete("ROLLBACK".into()), Reply::ReadyForQuery(b'I')]);
    assert_eq!(rows(&client.simple("SELECT 1")), vec![vec![Some("1".into())]]);
    // Outside a transaction block an error leaves the session idle.
    assert_eq!(client.simple("SELECT * FROM nosuch").last(), Some(&Reply::ReadyForQuery(b'I')));
}

#[test]
fn set_reports_parameter_changes_and_show_reads_settings() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    let replies = client.simple("SET application_name = 'tests'");
    assert!(replies.contains(&Reply::ParameterStatus("application_name".into(), "tests".into())), "{replies:?}");
    let replies = client.simple("SET numadb.stealing = 'off'; SHOW numadb.stealing");
    assert_eq!(rows(&replies), vec![vec![Some("off".into())]]);
    let replies = client.simple("SHOW TRANSACTION ISOLATION LEVEL");
    assert_eq!(rows(&replies), vec![vec![Some("read committed".into())]]);
    let replies = client.simple("SELECT current_setting('numadb.stealing'), current_database(), version()");
    let row = &rows(&replies)[0];
    assert_eq!(row[0].as_deref(), Some("off"));
    assert_eq!(row[1].as_deref(), Some("numadb"));
    assert!(row[2].as_deref().unwrap().starts_with("PostgreSQL 15"));
    assert_eq!(errors(&client.simple("SET numadb.binding = 'sometimes'"))[0].sqlstate(), "22023");
    // numadb speaks UTF-8 only.
    assert_eq!(errors(&client.simple("SET client_encoding = 'LATIN1'"))[0].sqlstate(), "22023");
    assert_eq!(rows(&client.simple("SHOW client_encoding")), vec![vec![Some("UTF8".into())]]);
    assert!(errors(&client.simple("SET client_encoding = 'unicode'")).is_empty());
}

#[test]
fn copy_from_stdin_loads_rows_and_reports_bad_data() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    client.send(vec![query("COPY t (k, s) FROM STDIN WITH (FORMAT csv); SELECT count(*) FROM t")]);
    assert_eq!(client.next(), Some(Reply::CopyInResponse(2)));
    let mut data = Vec::new();
    for chunk in [&b"10,ten\n11,"[..], b"\"el,even\"\n12,\n"] {
        data.extend(packet(vec![pgwire::messages::PgWireFrontendMessage::CopyData(
            pgwire::messages::copy::CopyData::new(bytes::Bytes::copy_from_slice(chunk)),
        )]));
    }
    data.extend(packet(vec![pgwire::messages::PgWireFrontendMessage::CopyDone(
        pgwire::messages::copy::CopyDone::new(),
    )]));
    client.send_bytes(&data);
    let replies = client.until_ready();
    assert_eq!(replies[0], Reply::CommandComplete("COPY 3".into()));
    assert_eq!(rows(&replies), vec![vec![Some("6".into())]], "the statement after COPY runs too");
    let replies = client.simple("SELECT s FROM t WHERE k = 11");
    assert_eq!(rows(&replies), vec![vec![Some("el,even".into())]]);
    // A bad row fails the COPY; later copy data is dropped and the session goes on.
    client.send(vec![query("COPY t (k) FROM STDIN WITH (FORMAT csv)")]);
    assert_eq!(client.next(), Some(Reply::CopyInResponse(1)));
    client.send(vec![
        pgwire::messages::PgWireFrontendMessage::CopyData(pgwire::messages::copy::CopyData::new(
            bytes::Bytes::from_static(b"not a number\n"),
        )),
        pgwire::messages::PgWireFrontendMessage::CopyDone(pgwire::messages::copy::CopyDone::new()),
    ]);
    let replies = client.until_ready();
    assert_eq!(errors(&replies)[0].sqlstate(), "22P02");
    assert_eq!(rows(&client.simple("SELECT 1")), vec![vec![Some("1".into())]]);
    // The client gives up.
    client.send(vec![query("COPY t FROM STDIN")]);
    assert_eq!(client.next(), Some(Reply::CopyInResponse(5)));
    client.send(vec![pgwire::messages::PgWireFrontendMessage::CopyFail(pgwire::messages::copy::CopyFail::new(
        "no thanks".into(),
    ))]);
    let replies = client.until_ready();
    assert_eq!(errors(&replies)[0].sqlstate(), "57014");
}

/// A prepared transaction (Bind, Describe, Execute, Sync in one packet) is answered with one socket write, with
/// the session on its thread and parked in an event loop; a pipeline of transactions also with one.
#[test]
fn one_socket_write_per_prepared_transaction() {
    for event_loop_sessions in [usize::MAX, 0] {
        let server = start(ServerConfig { event_loop_sessions, ..ServerConfig::default() }, |session| {
            for result in session.execute(SETUP) {
                result.unwrap();
            }
        });
        let (mut client, _) = RawClient::connect(server.address(), "u");
        client.send(vec![parse("lookup", "SELECT s FROM t WHERE k = $1", &[]), sync()]);
        client.until_ready();
        // Let the session settle where it will serve (its thread, or an event loop after a few round trips).
        for _ in 0..20 {
            client.send(vec![bind("", "lookup", &[], &[Some(b"1")], &[]), execute("", 0), sync()]);
            client.until_ready();
        }
        let transactions = 200;
        let before = server.running.handle().stats();
        for i in 0..transactions {
            let key = (1 + i % 3).to_string();
            client.send(vec![
                bind("", "lookup", &[], &[Some(key.as_bytes())], &[]),
                describe(b'P', ""),
                execute("", 0),
                sync(),
            ]);
            let replies = client.until_ready();
            assert_eq!(replies.len(), 5, "{replies:?}");
        }
        // The server counts a write after it returns, which may be after the client read the answer.
        let settled = |before: &numadb_server::Stats, writes: u64| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                let during = server.running.handle().stats().since(before);
                if during.socket_writes >= writes || std::time::Instant::now() > deadline {
                    return during;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        let during = settled(&before, transactions);
        assert_eq!(during.ready_for_query, transactions);
        assert_eq!(
            during.socket_writes, transactions,
            "one write per transaction (event_loop_sessions {event_loop_sessions})"
        );
        // Twenty transactions in one packet: one write.
        let mut pipeline = Vec::new();
        for _ in 0..20 {
            pipeline.extend([bind("", "lookup", &[], &[Some(b"2")], &[]), execute("", 0), sync()]);
        }
        let before = server.running.handle().stats();
        client.send(pipeline);
        for _ in 0..20 {
            client.until_ready();
        }
        settled(&before, 1);
        // Any further write would have been counted by now.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let during = server.running.handle().stats().since(&before);
        assert_eq!(during.ready_for_query, 20);
        assert_eq!(during.socket_writes, 1, "a pipeline is answered with one write");
    }
}

/// The statements a session sends answer the same whether it is on its thread or parked in an event loop.
#[test]
fn event_loops_answer_like_threads() {
    let server = start(ServerConfig { event_loop_sessions: 0, ..ServerConfig::default() }, |session| {
        for result in session.execute(SETUP) {
            result.unwrap();
        }
    });
    let (mut client, _) = RawClient::connect(server.address(), "u");
    client.send(vec![parse("q", "SELECT s FROM t WHERE k = $1", &[]), sync()]);
    client.until_ready();
    for round in 0..50 {
        let key = (1 + round % 3).to_string();
        client.send(vec![bind("", "q", &[], &[Some(key.as_bytes())], &[]), execute("", 0), sync()]);
        let replies = client.until_ready();
        let expected = match round % 3 {
            0 => Some("one".to_string()),
            1 => None,
            _ => Some("three".to_string()),
        };
        assert_eq!(rows(&replies), vec![vec![expected]]);
        // Now and then something only the session's thread does.
        if round % 7 == 0 {
            let replies = client.simple("SELECT count(*) FROM t WHERE d IS NULL");
            assert_eq!(rows(&replies), vec![vec![Some("1".into())]]);
        }
        if round % 11 == 0 {
            client.send(vec![bind("", "q", &[], &[Some(b"zz")], &[]), execute("", 0), sync()]);
            assert_eq!(client.until_ready()[0].sqlstate(), "22P02");
        }
    }
}

#[test]
fn a_finished_portal_without_rows_cannot_run_again() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    client.send(vec![
        parse("", "INSERT INTO t VALUES (9, 9, 9, 'nine', true)", &[]),
        bind("", "", &[], &[], &[]),
        execute("", 0),
        execute("", 0),
        sync(),
    ]);
    let replies = client.until_ready();
    assert!(replies.contains(&Reply::CommandComplete("INSERT 0 1".into())), "{replies:?}");
    assert_eq!(errors(&replies).len(), 1, "{replies:?}");
    assert_eq!(errors(&replies)[0].sqlstate(), "55000");
    assert_eq!(replies.last(), Some(&Reply::ReadyForQuery(b'I')));
    assert_eq!(rows(&client.simple("SELECT count(*) FROM t WHERE k = 9")), vec![vec![Some("1".into())]]);
}

#[test]
fn a_malformed_sync_is_an_error_that_still_ends_the_cycle() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    // Sync has no body; this one has two bytes.
    client.send_bytes(&[b'S', 0, 0, 0, 6, 1, 2]);
    let replies = client.until_ready();
    assert_eq!(errors(&replies)[0].sqlstate(), "08P01");
    assert_eq!(replies.last(), Some(&Reply::ReadyForQuery(b'I')));
    assert_eq!(rows(&client.simple("SELECT 1")), vec![vec![Some("1".into())]]);
}

#[test]
fn counts_beyond_what_the_protocol_can_carry_are_refused() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    let wide = format!("SELECT {}", vec!["1"; 40_000].join(", "));
    assert_eq!(client.simple(&wide)[0].sqlstate(), "54011");
    client.send(vec![parse("", "SELECT $70000", &[]), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "54011");
    assert_eq!(rows(&client.simple("SELECT 1")), vec![vec![Some("1".into())]]);
}

#[test]
fn a_parked_session_that_sends_and_closes_still_has_its_statements_run() {
    // Every session parks in an event loop after a few round trips of fast messages.
    let server = start(ServerConfig { event_loop_sessions: 0, ..ServerConfig::default() }, |session| {
        for result in session.execute(SETUP) {
            result.unwrap();
        }
    });
    for key in 100..120 {
        let (mut client, _) = RawClient::connect(server.address(), "u");
        for _ in 0..10 {
            client.send(vec![sync()]);
            client.until_ready();
        }
        let insert = format!("INSERT INTO t VALUES ({key}, 0, 0, 'fire and forget', false)");
        let mut bytes = packet(vec![query(&insert)]);
        bytes.extend_from_slice(&[b'X', 0, 0, 0, 4]);
        client.send_bytes(&bytes);
        client.close_write();
        client.until_closed();
    }
    let (mut client, _) = RawClient::connect(server.address(), "u");
    let replies = client.simple("SELECT count(*) FROM t WHERE s = 'fire and forget'");
    assert_eq!(rows(&replies), vec![vec![Some("20".into())]]);
}

#[test]
fn portals_end_with_their_transaction_and_run_nothing_in_a_failed_block() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    let open_portal = |client: &mut RawClient| {
        client.send(vec![parse("", "SELECT k FROM t ORDER BY k", &[]), bind("p", "", &[], &[], &[]), execute("p", 1)]);
        client.send(vec![sync()]);
        client.until_ready()
    };
    // In a block: suspended, then the block fails, then the portal yields nothing more.
    client.simple("BEGIN");
    assert!(open_portal(&mut client).contains(&Reply::PortalSuspended));
    assert_eq!(errors(&client.simple("SELECT 1 / 0"))[0].sqlstate(), "22012");
    client.send(vec![execute("p", 1), sync()]);
    let replies = client.until_ready();
    assert_eq!(errors(&replies)[0].sqlstate(), "25P02");
    assert!(rows(&replies).is_empty(), "{replies:?}");
    client.simple("ROLLBACK");
    // COMMIT ends the block's portals.
    client.simple("BEGIN");
    assert!(open_portal(&mut client).contains(&Reply::PortalSuspended));
    client.simple("COMMIT");
    client.send(vec![execute("p", 1), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "34000");
    // Outside a block, a simple query ends the implicit transaction, and the portals with it.
    client.send(vec![parse("", "SELECT k FROM t ORDER BY k", &[]), bind("q", "", &[], &[], &[]), execute("q", 1)]);
    client.simple("SELECT 7");
    client.send(vec![execute("q", 1), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "34000");
}

#[test]
fn a_failed_block_rolled_back_undoes_its_settings_and_says_so() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    client.simple("SET application_name = 'before'");
    let replies = client.simple("BEGIN; SET application_name = 'inside'; SELECT 1 / 0");
    assert!(replies.contains(&Reply::ParameterStatus("application_name".into(), "inside".into())), "{replies:?}");
    let replies = client.simple("ROLLBACK");
    assert!(replies.contains(&Reply::ParameterStatus("application_name".into(), "before".into())), "{replies:?}");
    assert_eq!(rows(&client.simple("SHOW application_name")), vec![vec![Some("before".into())]]);
}

#[test]
fn an_unknown_format_code_is_22023_and_the_session_goes_on() {
    let server = server();
    let (mut client, _) = RawClient::connect(server.address(), "u");
    client.send(vec![parse("q", "SELECT k FROM t WHERE k = $1", &[]), sync()]);
    client.until_ready();
    client.send(vec![bind("", "q", &[7], &[Some(b"1")], &[]), execute("", 0), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "22023");
    client.send(vec![bind("", "q", &[], &[Some(b"1")], &[9]), execute("", 0), sync()]);
    assert_eq!(client.until_ready()[0].sqlstate(), "22023");
    assert_eq!(rows(&client.simple("SELECT 1")), vec![vec![Some("1".into())]]);
}
