//! Results held in memory: `LIMIT` over a scan's rows stops the scan once the first morsels hold enough rows, and
//! returns exactly what the whole scan followed by the limit would: the first rows in morsel order (so the same
//! rows every time); a result larger than `numadb.max_result_mb` fails with 53200.

use numadb_sql::Database;
use numadb_storage::Value;

fn keys(rows: &[Vec<Value>]) -> Vec<i64> {
    rows.iter().map(|r| if let Value::Int(v) = r[0] { v } else { panic!("{r:?}") }).collect()
}

#[test]
fn a_limit_reads_only_the_first_morsels_and_returns_the_rows_of_the_whole_scan() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    // 64 partitions of 4096 rows, morsels of one block: 256 tasks.
    numadb_sql::thesis::load_thesis_tables(&mut session, 262_144, 9, Some(4096), None).unwrap();
    session.execute_one("SET numadb.morsel_rows = 1024").unwrap();
    for filter in ["", " WHERE \"C1\" < 20000", " WHERE \"C2\" % 3 = 0 OR \"C3\" IS NULL"] {
        let all = keys(&session.execute_one(&format!("SELECT \"C0\" FROM \"TBL_0\"{filter}")).unwrap().rows);
        for (limit, offset) in [(0, 0), (1, 0), (5, 3), (1500, 700), (100_000, 0), (10, 1_000_000)] {
            let sql = format!("SELECT \"C0\" FROM \"TBL_0\"{filter} LIMIT {limit} OFFSET {offset}");
            let expected: Vec<i64> = all.iter().copied().skip(offset).take(limit).collect();
            for _ in 0..3 {
                assert_eq!(keys(&session.execute_one(&sql).unwrap().rows), expected, "{sql}");
            }
        }
    }
    // Few rows wanted: far fewer scanned than the table holds.
    let explain = session.execute_one("EXPLAIN ANALYZE SELECT * FROM \"TBL_0\" LIMIT 5").unwrap();
    let text: Vec<String> = explain.rows.iter().map(|r| r[0].to_string()).collect();
    let scan = text.iter().find(|l| l.contains("rows scanned")).expect("a scan line");
    let scanned: u64 = scan.split(" rows scanned").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap();
    assert!(scanned < 262_144 / 4, "{scan}");
}

#[test]
fn a_result_larger_than_numadb_max_result_mb_is_an_error_not_the_servers_memory() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, 262_144, 9, Some(65_536), None).unwrap();
    // 262 144 rows of 7 values take about 50 MB as rows.
    session.execute_one("SET numadb.max_result_mb = 10").unwrap();
    let error = session.execute_one("SELECT * FROM \"TBL_0\"").unwrap_err();
    assert_eq!(error.sqlstate, "53200");
    // Aggregates, small results and limits are untouched; the session goes on.
    let count = session.execute_one("SELECT count(*), max(\"C3\") FROM \"TBL_0\"").unwrap();
    assert_eq!(count.rows[0][0], Value::Int(262_144));
    assert_eq!(session.execute_one("SELECT * FROM \"TBL_0\" LIMIT 10").unwrap().rows.len(), 10);
    // So are the groups of a GROUP BY merged in partitions: about 166 000 of them, some 16 MB as rows.
    let error = session.execute_one("SELECT \"C1\", count(*), sum(\"C2\") FROM \"TBL_0\" GROUP BY 1").unwrap_err();
    assert_eq!(error.sqlstate, "53200");
    session.execute_one("SET numadb.max_result_mb = 0").unwrap();
    assert_eq!(session.execute_one("SELECT * FROM \"TBL_0\"").unwrap().rows.len(), 262_144);
    assert_eq!(session.execute_one("SET numadb.max_result_mb = 'lots'").unwrap_err().sqlstate, "22023");
}

#[test]
fn a_join_whose_output_outgrows_numadb_max_result_mb_is_an_error_and_a_timeout_stops_it() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    session.execute_one("CREATE TABLE small (k INTEGER)").unwrap();
    let values: Vec<String> = (0..2000).map(|k| format!("({k})")).collect();
    session.execute_one(&format!("INSERT INTO small VALUES {}", values.join(", "))).unwrap();
    // 2000 × 2000 × 2000 = 8·10⁹ rows: far beyond 10 MB. The join's output is counted as it grows, so the
    // statement fails early instead of building it.
    session.execute_one("SET numadb.max_result_mb = 10").unwrap();
    let error = session.execute_one("SELECT count(*) FROM small a, small b, small c WHERE a.k <> c.k").unwrap_err();
    assert_eq!(error.sqlstate, "53200");
    // Without the limit, statement_timeout stops a nested loop that produces nothing (4·10⁸ candidate pairs, each
    // rejected): it looks at the deadline as it goes.
    session.execute_one("SET numadb.max_result_mb = 0").unwrap();
    session.execute_one("CREATE TABLE more (k INTEGER)").unwrap();
    for _ in 0..10 {
        session.execute_one("INSERT INTO more SELECT k FROM small").unwrap();
    }
    session.execute_one("SET statement_timeout = 200").unwrap();
    let error = session.execute_one("SELECT count(*) FROM more a JOIN more b ON a.k + b.k < 0").unwrap_err();
    assert_eq!(error.sqlstate, "57014", "{}", error.message);
    session.execute_one("SET statement_timeout = 0").unwrap();
    // An aggregate over a hash join whose one key has tens of thousands of rows on each side: some 10⁹ joined
    // rows, aggregated in the scan's tasks, which look at the cancel flag as they go. `same` stays in its table's
    // delta (one task scans it row by row), `sealed` is sealed into partitions.
    session.execute_one("CREATE TABLE same (k INTEGER)").unwrap();
    session.execute_one("INSERT INTO same SELECT 1 FROM generate_series(1, 30000)").unwrap();
    session.execute_one("CREATE TABLE sealed (k INTEGER)").unwrap();
    session.execute_one("INSERT INTO sealed SELECT 1 FROM generate_series(1, 70000)").unwrap();
    session.execute_one("SET statement_timeout = 200").unwrap();
    for table in ["same", "sealed"] {
        let sql = format!("SELECT count(*), sum(a.k + b.k) FROM {table} a JOIN {table} b ON a.k = b.k");
        let error = session.execute_one(&sql).unwrap_err();
        assert_eq!(error.sqlstate, "57014", "{table}: {}", error.message);
        assert!(error.message.contains("statement timeout"), "{table}: {}", error.message);
    }
    session.execute_one("SET statement_timeout = 0").unwrap();
    // The session goes on, and a join within the limit answers.
    let rows = session.execute_one("SELECT count(*) FROM small a JOIN small b ON a.k = b.k").unwrap().rows;
    assert_eq!(rows[0][0], Value::Int(2000));
    let rows = session.execute_one("SELECT count(*) FROM same a JOIN small b ON a.k = b.k").unwrap().rows;
    assert_eq!(rows[0][0], Value::Int(30000));
}
