//! ALTER TABLE while other sessions write and read: ADD and DROP COLUMN replace the table with an altered copy,
//! and no INSERT, UPDATE or DELETE made meanwhile may be lost, none may fail, and every query must see at least
//! what was acknowledged before it began, each row once. Nothing here depends on timing: the threads only run
//! side by side, as often as the machine lets them.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

use numadb_sql::{Database, Session};
use numadb_storage::Value;

/// Rows loaded before the threads start (ids 0..PRELOADED, `k` 0): sealed partitions and a delta.
const PRELOADED: i64 = 5000;
/// Ids from here on are inserted while the table is altered, by inserter `i` from `FIRST_INSERTED * (i + 1)`.
const FIRST_INSERTED: i64 = 1_000_000;
/// Rows the deleter removes, one statement each (ids `DOOMED..DOOMED + DOOMED_ROWS`).
const DOOMED: i64 = 500_000;
const DOOMED_ROWS: i64 = 150;
/// ADD/DROP rounds of the altering session.
const ALTER_ROUNDS: usize = 24;

fn int(value: &Value) -> i64 {
    match value {
        Value::Int(v) => *v,
        other => panic!("not an integer: {other:?}"),
    }
}

fn one_row(session: &mut Session, sql: &str) -> Vec<Value> {
    let mut output = session.execute_one(sql).unwrap_or_else(|e| panic!("{sql}: {} {}", e.sqlstate, e.message));
    assert_eq!(output.rows.len(), 1, "{sql}");
    output.rows.remove(0)
}

fn spawn(name: &str, work: impl FnOnce() + Send + 'static) -> thread::JoinHandle<()> {
    thread::Builder::new()
        .name(name.to_string())
        .stack_size(numadb_sql::text::STATEMENT_STACK_BYTES)
        .spawn(work)
        .unwrap()
}

#[test]
fn writes_and_queries_during_add_and_drop_column_lose_nothing() {
    let database = Database::new().unwrap();
    let mut setup = database.session();
    setup
        .execute_one("CREATE TABLE t (c0 INTEGER, id BIGINT PRIMARY KEY, k INTEGER) WITH (partition_rows = 1024)")
        .unwrap();
    setup.execute_one(&format!("INSERT INTO t SELECT 0, g, 0 FROM generate_series(0, {}) g", PRELOADED - 1)).unwrap();
    setup
        .execute_one(&format!(
            "INSERT INTO t SELECT 0, g, 0 FROM generate_series({DOOMED}, {}) g",
            DOOMED + DOOMED_ROWS - 1
        ))
        .unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let acknowledged = Arc::new(AtomicU64::new(0));
    let updates = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for inserter in 0..2i64 {
        let (database, done, acknowledged) = (Arc::clone(&database), Arc::clone(&done), Arc::clone(&acknowledged));
        writers.push(spawn("inserter", move || {
            let mut session = database.session();
            let mut next = FIRST_INSERTED * (inserter + 1);
            // At least some rows after the last ALTER, and as many as the ALTERs leave time for.
            let mut after_done = 0;
            while after_done < 5 {
                after_done += usize::from(done.load(Ordering::Relaxed));
                // Named columns, so the statement means the same whatever columns come and go around them.
                let values: Vec<String> = (next..next + 20).map(|id| format!("({id}, 1)")).collect();
                let sql = format!("INSERT INTO t (id, k) VALUES {}", values.join(", "));
                let output = session.execute_one(&sql).unwrap_or_else(|e| panic!("{} {}", e.sqlstate, e.message));
                assert_eq!(output.tag, "INSERT 0 20");
                acknowledged.fetch_add(20, Ordering::SeqCst);
                next += 20;
            }
        }));
    }
    {
        let (database, done, updates) = (Arc::clone(&database), Arc::clone(&done), Arc::clone(&updates));
        writers.push(spawn("updater", move || {
            let mut session = database.session();
            let mut id = 0;
            while !done.load(Ordering::Relaxed) || id < 10 {
                let sql = format!("UPDATE t SET k = k + 1 WHERE id = {}", id % PRELOADED);
                let output = session.execute_one(&sql).unwrap_or_else(|e| panic!("{} {}", e.sqlstate, e.message));
                assert_eq!(output.tag, "UPDATE 1");
                updates.fetch_add(1, Ordering::SeqCst);
                id += 7;
            }
        }));
    }
    {
        let database = Arc::clone(&database);
        writers.push(spawn("deleter", move || {
            let mut session = database.session();
            for id in DOOMED..DOOMED + DOOMED_ROWS {
                let output = session.execute_one(&format!("DELETE FROM t WHERE id = {id}")).unwrap();
                assert_eq!(output.tag, "DELETE 1");
            }
        }));
    }
    let reader = {
        let (database, done, acknowledged) = (Arc::clone(&database), Arc::clone(&done), Arc::clone(&acknowledged));
        spawn("reader", move || {
            let mut session = database.session();
            let mut queries = 0;
            while !done.load(Ordering::Relaxed) || queries < 5 {
                let before = acknowledged.load(Ordering::SeqCst);
                let row = one_row(
                    &mut session,
                    &format!("SELECT count(*), count(DISTINCT id) FROM t WHERE id >= {FIRST_INSERTED}"),
                );
                let (rows, ids) = (int(&row[0]) as u64, int(&row[1]) as u64);
                assert!(rows >= before, "a query saw {rows} inserted rows, {before} were acknowledged before it");
                assert_eq!(rows, ids, "a row seen twice");
                // Through the primary key, whichever position it has.
                let row = one_row(&mut session, &format!("SELECT id FROM t WHERE id = {}", queries % PRELOADED));
                assert_eq!(int(&row[0]), queries % PRELOADED);
                // A row being inserted now: there or not, but never a row of another statement's making.
                let probe = FIRST_INSERTED + before as i64 / 2 + 10;
                let output = session.execute_one(&format!("SELECT id, k FROM t WHERE id = {probe}")).unwrap();
                assert!(output.rows.iter().all(|r| *r == [Value::Int(probe), Value::Int(1)]), "{:?}", output.rows);
                let row = one_row(&mut session, "SELECT count(*) FROM t WHERE k >= 0 AND id < 5000");
                assert_eq!(int(&row[0]), PRELOADED);
                queries += 1;
            }
        })
    };

    // The altering session: an added column, a column in front of the key dropped (the key and k move), both in
    // one statement.
    let mut alter = database.session();
    for round in 0..ALTER_ROUNDS {
        let (this, next) = (format!("c{round}"), format!("c{}", round + 1));
        let statements = match round % 2 {
            0 => vec![
                format!("ALTER TABLE t ADD COLUMN {next} INTEGER DEFAULT {}", round + 1),
                format!("ALTER TABLE t DROP COLUMN {this}"),
            ],
            _ => vec![format!("ALTER TABLE t DROP COLUMN {this}, ADD COLUMN {next} INTEGER DEFAULT {}", round + 1)],
        };
        for sql in statements {
            alter.execute_one(&sql).unwrap_or_else(|e| panic!("{sql}: {} {}", e.sqlstate, e.message));
        }
        // The added column has its value in every row, old or new.
        let row =
            one_row(&mut alter, &format!("SELECT count(*), count(*) FILTER (WHERE {next} = {}) FROM t", round + 1));
        assert_eq!(int(&row[1]), int(&row[0]), "rows without the added column's value: {row:?}");
    }
    done.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.join().unwrap();
    }
    reader.join().unwrap();

    let mut check = database.session();
    let inserted = acknowledged.load(Ordering::SeqCst) as i64;
    let row = one_row(
        &mut check,
        &format!("SELECT count(*), count(DISTINCT id), sum(k) FROM t WHERE id >= {FIRST_INSERTED}"),
    );
    assert_eq!((int(&row[0]), int(&row[1]), int(&row[2])), (inserted, inserted, inserted), "inserted rows lost");
    let row = one_row(&mut check, &format!("SELECT count(*), sum(k) FROM t WHERE id < {PRELOADED}"));
    assert_eq!((int(&row[0]), int(&row[1])), (PRELOADED, updates.load(Ordering::SeqCst) as i64), "updates lost");
    let row = one_row(&mut check, &format!("SELECT count(*) FROM t WHERE id >= {DOOMED} AND id < {FIRST_INSERTED}"));
    assert_eq!(int(&row[0]), 0, "deletes lost");
    let last = format!("c{ALTER_ROUNDS}");
    let row = one_row(&mut check, &format!("SELECT count(*) FILTER (WHERE {last} IS NULL) FROM t"));
    assert_eq!(int(&row[0]), 0, "a row without the added column's value");
    let error = check.execute_one("INSERT INTO t (id, k) VALUES (7, 0)").unwrap_err();
    assert_eq!(error.sqlstate, "23505", "the primary key still holds");
}

#[test]
fn a_plan_bound_before_an_alter_reads_the_table_as_it_was_bound() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    session
        .execute_one("CREATE TABLE t (a INTEGER, id INTEGER PRIMARY KEY, v TEXT) WITH (partition_rows = 1024)")
        .unwrap();
    session.execute_one("INSERT INTO t SELECT -g, g, 'v' || g FROM generate_series(1, 1500) g").unwrap();
    // A statement bound now, run after the table has been altered and written to (as one that resolved the table
    // just before a concurrent ALTER TABLE would be).
    let parsed = numadb_sql::parse::parse("SELECT id, v FROM t WHERE id = $1").unwrap();
    let [numadb_sql::parse::Parsed::Sql(statement)] = parsed.as_slice() else { panic!("one statement") };
    let sqlparser::ast::Statement::Query(query) = statement.as_ref() else { panic!("a query") };
    let bound = numadb_sql::bind::Binder::new(database.as_ref(), &[None]).plan_query(query).unwrap();
    session.execute_one("ALTER TABLE t DROP COLUMN a, ADD COLUMN b TEXT DEFAULT 'b'").unwrap();
    session.execute_one("INSERT INTO t VALUES (1501, 'new', 'x'), (1502, 'new', 'y')").unwrap();
    let run = |key: i64| {
        let executor = numadb_execution::Executor {
            scheduler: None,
            params: &[Value::Int(key)],
            deadline: None,
            result_bytes_max: None,
            morsel_blocks: None,
            prefetch_blocks: 0,
            join_key_filter: true,
            cancel: None,
        };
        numadb_execution::execute(&bound.plan, &executor).unwrap().rows
    };
    // The old table's columns, and its rows only: the index it shares with the altered copy knows the new rows,
    // which are not the old table's to read.
    assert_eq!(run(1200), vec![vec![Value::Int(1200), Value::text("v1200")]]);
    assert_eq!(run(1501), Vec::<Vec<Value>>::new());
    let output = session.execute_one("SELECT * FROM t WHERE id IN (1200, 1501) ORDER BY id").unwrap();
    assert_eq!(
        output.rows,
        vec![
            vec![Value::Int(1200), Value::text("v1200"), Value::text("b")],
            vec![Value::Int(1501), Value::text("new"), Value::text("x")],
        ]
    );
}
