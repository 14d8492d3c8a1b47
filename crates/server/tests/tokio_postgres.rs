//! tokio-postgres (the Rust driver) against numadb: prepared statements with binary parameters and results for
//! every type, declared parameter types, errors, transactions, COPY, pipelined queries, cancel and SCRAM.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use futures_util::{SinkExt, future};
use numadb_server::auth::Verifier;
use numadb_server::{Authentication, ServerConfig};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::{Client, NoTls};

const SETUP: &str = "CREATE TABLE t (k INTEGER PRIMARY KEY, b BIGINT, d DOUBLE PRECISION, s TEXT, f BOOLEAN);
                     INSERT INTO t VALUES (1, 10000000000, 1.5, 'one', true), (2, -2, -0.25, NULL, false);";

async fn connect(url: &str) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await?;
    tokio::spawn(connection);
    Ok(client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_with_binary_parameters_and_results() {
    let server = start_with(SETUP);
    let client = connect(&server.url("rust")).await.unwrap();
    let statement = client.prepare("SELECT k, b, d, s, f FROM t WHERE k = $1").await.unwrap();
    assert_eq!(statement.params(), &[Type::INT4]);
    assert_eq!(
        statement.columns().iter().map(|c| c.type_().clone()).collect::<Vec<_>>(),
        vec![Type::INT4, Type::INT8, Type::FLOAT8, Type::TEXT, Type::BOOL]
    );
    let row = client.query_one(&statement, &[&1i32]).await.unwrap();
    assert_eq!(row.get::<_, i32>(0), 1);
    assert_eq!(row.get::<_, i64>(1), 10_000_000_000);
    assert_eq!(row.get::<_, f64>(2), 1.5);
    assert_eq!(row.get::<_, Option<String>>(3).as_deref(), Some("one"));
    assert!(row.get::<_, bool>(4));
    let row = client.query_one(&statement, &[&2i32]).await.unwrap();
    assert_eq!(row.get::<_, Option<String>>(3), None);
    assert!(client.query_opt(&statement, &[&3i32]).await.unwrap().is_none());
    // The client declares int2 and int8 for INTEGER and BIGINT parameters.
    let typed =
        client.prepare_typed("SELECT s FROM t WHERE k = $1 AND b > $2", &[Type::INT2, Type::INT8]).await.unwrap();
    assert_eq!(typed.params(), &[Type::INT2, Type::INT8]);
    let row = client.query_one(&typed, &[&1i16, &0i64]).await.unwrap();
    assert_eq!(row.get::<_, String>(0), "one");
    // Parameters of every type, and NULL.
    client
        .execute("INSERT INTO t VALUES ($1, $2, $3, $4, $5)", &[&3i32, &Option::<i64>::None, &2.25f64, &"three", &true])
        .await
        .unwrap();
    let row = client.query_one("SELECT b, d, s FROM t WHERE k = $1", &[&3i32]).await.unwrap();
    assert_eq!(row.get::<_, Option<i64>>(0), None);
    assert_eq!(row.get::<_, f64>(1), 2.25);
    // Simple queries.
    let messages = client.simple_query("SELECT count(*) FROM t; SELECT 'x'").await.unwrap();
    let values: Vec<String> = messages
        .iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
            _ => None,
        })
        .collect();
    assert_eq!(values, vec!["3", "x"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_prepared_range_is_looked_up_or_scanned_as_its_values_ask() {
    // 40 000 keys: a range lookup may find at most 40 000 / 2048 = 19 of them; wider ranges are scanned.
    let server = start_with(
        "CREATE TABLE w (k INTEGER PRIMARY KEY, v INTEGER); INSERT INTO w SELECT g, g % 7 FROM generate_series(1, 40000) AS s(g);",
    );
    let client = connect(&server.url("rust")).await.unwrap();
    let counted = client.prepare("SELECT count(*), sum(k) FROM w WHERE k BETWEEN $1 AND $2").await.unwrap();
    assert_eq!(counted.params(), &[Type::INT4, Type::INT4]);
    let sum = |low: i64, high: i64| (high - low + 1) * (low + high) / 2;
    for (low, high) in [(100i32, 110i32), (100, 118), (100, 119), (1, 40000), (39990, 50000), (-5, 3), (7, 6)] {
        let row = client.query_one(&counted, &[&low, &high]).await.unwrap();
        let (low, high) = (i64::from(low.max(1)), i64::from(high.min(40000)));
        let expected = (high >= low).then(|| (high - low + 1, sum(low, high)));
        let found = (row.get::<_, i64>(0), row.get::<_, Option<i64>>(1));
        assert_eq!(found, (expected.map_or(0, |e| e.0), expected.map(|e| e.1)), "{low}..={high}");
    }
    // EXPLAIN with the same values shows which way each took.
    let plan = |low: i32, high: i32| {
        let client = &client;
        async move {
            let rows =
                client.query("EXPLAIN SELECT count(*) FROM w WHERE k >= $1 AND k < $2", &[&low, &high]).await.unwrap();
            rows.iter().map(|row| row.get::<_, String>(0)).collect::<Vec<_>>().join("\n")
        }
    };
    assert!(plan(10, 29).await.contains("Index Lookup on w using k"), "{}", plan(10, 29).await);
    assert!(plan(10, 30).await.contains("Parallel Scan on w"), "{}", plan(10, 30).await);
    // A DELETE bounded by parameters deletes exactly the rows in its range.
    let deleted = client.execute("DELETE FROM w WHERE k > $1 AND k <= $2", &[&1000i32, &1500i32]).await.unwrap();
    assert_eq!(deleted, 500);
    let row = client.query_one(&counted, &[&990i32, &1510i32]).await.unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, Option<i64>>(1)), (21, Some(sum(990, 1000) + sum(1501, 1510))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_transactions_copy_and_pipelining() {
    let server = start_with(SETUP);
    let mut client = connect(&server.url("rust")).await.unwrap();
    for (sql, code) in [
        ("SELECT * FROM nosuch", SqlState::UNDEFINED_TABLE),
        ("SELECT nosuch FROM t", SqlState::UNDEFINED_COLUMN),
        ("SELEC 1", SqlState::SYNTAX_ERROR),
        ("SELECT 2147483647 + 1", SqlState::NUMERIC_VALUE_OUT_OF_RANGE),
    ] {
        let error = client.query(sql, &[]).await.unwrap_err();
        assert_eq!(error.code(), Some(&code), "{sql}: {error}");
    }
    // A transaction; an error inside one fails it until rollback.
    let transaction = client.transaction().await.unwrap();
    transaction.execute("INSERT INTO t (k) VALUES (10)", &[]).await.unwrap();
    assert!(transaction.query("SELECT * FROM nosuch", &[]).await.is_err());
    let error = transaction.query("SELECT 1", &[]).await.unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::IN_FAILED_SQL_TRANSACTION));
    transaction.rollback().await.unwrap();
    // COPY FROM STDIN.
    let sink = client.copy_in("COPY t (k, s) FROM STDIN WITH (FORMAT csv)").await.unwrap();
    futures_util::pin_mut!(sink);
    for k in 100..1100 {
        sink.send(bytes::Bytes::from(format!("{k},row {k}\n"))).await.unwrap();
    }
    assert_eq!(sink.finish().await.unwrap(), 1000);
    // Pipelining: tokio-postgres sends concurrent queries without waiting for each answer.
    let statement = client.prepare("SELECT s FROM t WHERE k = $1").await.unwrap();
    let keys: Vec<i32> = (100..300).collect();
    let parameters: Vec<[&(dyn tokio_postgres::types::ToSql + Sync); 1]> = keys.iter().map(|k| [k as _]).collect();
    let answers = future::try_join_all(parameters.iter().map(|p| client.query_one(&statement, p))).await.unwrap();
    for (k, row) in keys.iter().zip(answers) {
        assert_eq!(row.get::<_, String>(0), format!("row {k}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_request_stops_a_running_query() {
    let server = start(ServerConfig::default(), |session| {
        numadb_sql::thesis::load_thesis_tables(session, 1_000_000, 3, None, None).unwrap()
    });
    let client = connect(&server.url("rust")).await.unwrap();
    let token = client.cancel_token();
    // Runs until stopped: every row has half the table as partners (a fixed number of scans could end before
    // the cancel request comes, as 400 UNION ALL scans came to once scans got faster).
    let long_query = "SELECT count(*) FROM \"TBL_0\" a JOIN \"TBL_0\" b ON a.\"C1\" % 2 = b.\"C2\" % 2";
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        token.cancel_query(NoTls).await.unwrap();
    });
    let error = client.simple_query(long_query).await.unwrap_err();
    assert_eq!(error.code(), Some(&SqlState::QUERY_CANCELED), "{error}");
    canceller.await.unwrap();
    assert_eq!(client.query_one("SELECT 1", &[]).await.unwrap().get::<_, i32>(0), 1);
    assert_eq!(server.running.handle().stats().cancels, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scram_sha_256_lets_the_right_password_in() {
    let mut users = BTreeMap::new();
    users.insert("alice".to_string(), Verifier::from_password("wonder land"));
    // A verifier given in PostgreSQL's format works the same.
    users.insert("bob".to_string(), Verifier::parse(&Verifier::from_password("builder").to_string()).unwrap());
    let server =
        start(ServerConfig { authentication: Authentication::Scram(users), ..ServerConfig::default() }, |_| {});
    let port = server.port();
    let url = |user: &str, password: &str| format!("host=127.0.0.1 port={port} user={user} password='{password}'");
    let client = connect(&url("alice", "wonder land")).await.unwrap();
    assert_eq!(client.query_one("SELECT current_user", &[]).await.unwrap().get::<_, String>(0), "alice");
    connect(&url("bob", "builder")).await.unwrap();
    for (user, password) in [("alice", "wrong"), ("nobody", "wonder land")] {
        let Err(error) = connect(&url(user, password)).await else { panic!("{user} got in with {password}") };
        assert_eq!(error.code(), Some(&SqlState::INVALID_PASSWORD), "{user}: {error}");
    }
    // Without a password the client cannot answer the SCRAM challenge.
    assert!(connect(&format!("host=127.0.0.1 port={port} user=alice")).await.is_err());
}
