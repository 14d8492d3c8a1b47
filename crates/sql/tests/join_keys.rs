//! A join that scans one input with the other's keys (`numadb.join_key_filter`, on by default) returns exactly
//! what the join of the whole inputs returns: for every join kind, NULL keys, keys repeated on both sides, keys too
//! far apart for a bitmap, an other side with no keys, a key that is an expression on the other side, several
//! keys, and rows still in a table's unsealed delta; also where the scanned input is a scan's groups by the key
//! (a decorrelated keyed subquery). Its scan hands on only the rows that can have a partner.

use numadb_sql::{Database, Session};

fn rows(session: &mut Session, sql: &str) -> Vec<String> {
    let result = session.execute_one(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    let mut rows: Vec<String> = result.rows.iter().map(|row| format!("{row:?}")).collect();
    rows.sort();
    rows
}

/// `fact` (20 000 rows: 19 sealed partitions and 544 rows in the delta) and `dim` (2 500 rows: 2 partitions
/// and 452 in the delta), both with NULL keys and repeated keys; `wide`, keys at both ends of BIGINT.
fn tables(session: &mut Session) {
    for sql in [
        "CREATE TABLE dim (k BIGINT, grp INTEGER, name TEXT) WITH (partition_rows = 1024)",
        "INSERT INTO dim SELECT CASE WHEN g % 50 = 0 THEN NULL ELSE (g * 3) % 4000 END, g % 7, 'n' || g \
         FROM generate_series(1, 2500) g",
        "CREATE TABLE fact (id INTEGER, k INTEGER, v INTEGER) WITH (partition_rows = 1024)",
        "INSERT INTO fact SELECT g, CASE WHEN g % 97 = 0 THEN NULL ELSE (g * 7) % 9000 END, g % 13 \
         FROM generate_series(1, 20000) g",
        "CREATE TABLE wide (k BIGINT)",
        "INSERT INTO wide VALUES (-9223372036854775808), (9223372036854775807), (0), (21), (NULL), (21)",
    ] {
        session.execute_one(sql).unwrap_or_else(|e| panic!("{sql}: {e:?}"));
    }
}

const QUERIES: &[&str] = &[
    "SELECT f.id, d.name FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp = 3",
    "SELECT f.id, d.name FROM fact f LEFT JOIN dim d ON f.k = d.k AND d.grp = 3",
    "SELECT d.name, f.id FROM dim d LEFT JOIN fact f ON d.k = f.k WHERE d.grp = 2",
    "SELECT d.name, f.id FROM dim d RIGHT JOIN fact f ON d.k = f.k AND f.v = 4",
    "SELECT f.id, d.name FROM fact f RIGHT JOIN dim d ON f.k = d.k WHERE d.grp = 5",
    "SELECT f.id, d.name FROM fact f FULL JOIN dim d ON f.k = d.k AND d.grp = 1",
    "SELECT f.id, d.name FROM fact f JOIN dim d ON f.k = d.k AND f.v > d.grp",
    "SELECT a.id, b.id FROM fact a JOIN fact b ON a.k = b.k WHERE a.id < 300",
    "SELECT f.id, w.k FROM fact f JOIN wide w ON f.k = w.k",
    "SELECT f.id, w.k FROM wide w LEFT JOIN fact f ON w.k = f.k",
    "SELECT f.id FROM fact f JOIN dim d ON f.k = d.k WHERE d.name = 'none'",
    "SELECT f.id, d.name FROM fact f JOIN dim d ON f.k = d.k + 1 WHERE d.grp < 2",
    "SELECT f.id, d.name FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp = 1 AND f.v * 2 > 5",
    "SELECT f.id, d.name FROM fact f JOIN dim d ON f.k = d.k AND f.v = d.grp",
    "SELECT f.id, d.name FROM fact f JOIN dim d ON f.id = d.k WHERE f.v < 3",
    "SELECT count(*), sum(f.v), count(DISTINCT d.name) FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp <> 6",
    "SELECT d.grp, count(*) FROM fact f JOIN dim d ON f.k = d.k GROUP BY d.grp",
    // Aggregates over an inner join: probed and aggregated in the keyed scan's tasks (see
    // `an_aggregate_over_a_join_is_probed_in_the_scans_tasks`), except where the build side would be larger.
    "SELECT count(*), sum(f.v), min(d.name), max(f.id) FROM fact f JOIN dim d ON f.k = d.k AND f.v > d.grp \
     WHERE d.grp < 5",
    "SELECT d.grp, f.v, count(*), avg(f.id), sum(d.k) FROM fact f JOIN dim d ON f.k = d.k \
     WHERE f.id % 3 = 0 AND d.grp > 0 GROUP BY d.grp, f.v",
    "SELECT count(*), sum(b.id) FROM fact a JOIN fact b ON a.k = b.k WHERE a.id < 300",
    "SELECT count(*), sum(w.k), max(f.id) FROM fact f JOIN wide w ON f.k = w.k WHERE w.k IS NOT NULL",
    "SELECT count(*), sum(f.v) FROM fact f JOIN dim d ON f.k = d.k WHERE d.name = 'none'",
    "SELECT d.grp, count(*) FROM fact f JOIN dim d ON f.k = d.k WHERE d.name = 'none' GROUP BY d.grp",
    "SELECT d.grp, sum(f.v) FROM fact f JOIN dim d ON f.k = d.k + 1 WHERE d.grp < 4 GROUP BY d.grp",
    "SELECT d.grp, f.v, count(*) FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp < 3 \
     GROUP BY ROLLUP (d.grp, f.v)",
    "SELECT d.grp, count(*) FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp <> 2 GROUP BY d.grp \
     HAVING count(*) > 10",
    "SELECT count(DISTINCT f.v), count(*) FILTER (WHERE f.v > d.grp) FROM fact f JOIN dim d ON f.k = d.k \
     WHERE d.grp = 4",
    "SELECT d.grp, count(*) FROM fact f JOIN dim d ON f.k = d.k GROUP BY d.grp ORDER BY 2 DESC LIMIT 3",
    // `COUNT(*)`s alone: each probing row counts its partners (`fact.k` repeats for ids g, g + 9000 and
    // g + 18000, so the hashed side's keys have 2 or 3 rows each, and NULL keys none); with a condition beyond
    // the key, or a FILTER, the joined rows are made again.
    "SELECT count(*) FROM fact a JOIN fact b ON a.k = b.k WHERE a.id % 9000 < 300",
    "SELECT count(*) FROM fact a JOIN fact b ON a.k = b.k WHERE a.id < 3000",
    "SELECT count(*), count(*) FROM fact a JOIN fact b ON a.k = b.k WHERE a.v = 4",
    "SELECT count(*) FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp <> 6",
    "SELECT count(*) FROM fact a JOIN fact b ON a.k = b.k AND a.id < b.id WHERE a.id < 3000",
    "SELECT count(*) FILTER (WHERE a.v = 1), count(*) FROM fact a JOIN fact b ON a.k = b.k WHERE a.id < 3000",
    // The hashed side larger than the scanned table (`dim`, scanned second): joined on the session thread.
    "SELECT count(*), sum(f.v), min(d.name) FROM fact f JOIN dim d ON f.k = d.k",
    // The hashed side a derived table that aggregates, or a join itself.
    "SELECT count(*), sum(x.n) FROM (SELECT k, count(*) AS n FROM dim WHERE grp = 2 GROUP BY k) x \
     JOIN fact f ON f.k = x.k",
    "SELECT count(*), sum(f.v), max(d.name) FROM dim d JOIN wide w ON d.k = w.k JOIN fact f ON f.k = d.k",
    // The right input a scan's groups by the key (a decorrelated keyed subquery, a derived table with GROUP BY):
    // grouped only over the rows whose key the left input has (`JoinPlan::group_key_filter`).
    "SELECT d.name, (SELECT sum(f.v) FROM fact f WHERE f.k = d.k) FROM dim d WHERE d.grp = 3",
    "SELECT d.name, (SELECT count(*) FROM fact f WHERE f.k = d.k) FROM dim d WHERE d.k < 100",
    "SELECT d.name, (SELECT sum(f.v) FROM fact f WHERE f.k = d.k) FROM dim d WHERE d.name = 'none'",
    "SELECT w.k, (SELECT count(*) FROM fact f WHERE f.k = w.k), (SELECT min(f.id) FROM fact f WHERE f.k = w.k) \
     FROM wide w",
    "SELECT d.name, x.n, x.m FROM dim d LEFT JOIN (SELECT k, count(*) AS n, max(v) AS m FROM fact GROUP BY k \
     HAVING max(v) > 6) x ON x.k = d.k WHERE d.grp = 2",
    "SELECT d.name, x.n FROM dim d JOIN (SELECT max(v) AS m, k AS kk, count(*) AS n FROM fact GROUP BY k) x \
     ON x.kk = d.k AND x.m > d.grp WHERE d.grp < 3",
    "SELECT d.name, x.p, x.n FROM dim d JOIN (SELECT k, v % 2 AS p, count(*) AS n FROM fact GROUP BY k, v % 2) x \
     ON x.k = d.k WHERE d.grp = 1",
    "SELECT d.name, x.n FROM dim d JOIN (SELECT k, v, count(*) AS n FROM fact GROUP BY k, v) x \
     ON x.k = d.k AND x.v = d.grp WHERE d.grp > 4",
    "SELECT count(*), sum(x.n) FROM dim d JOIN (SELECT k, count(*) AS n FROM fact GROUP BY k) x ON x.k = d.k \
     WHERE d.grp = 4",
    "SELECT d.grp, max(x.n) FROM dim d LEFT JOIN (SELECT k, count(*) AS n FROM fact WHERE v < 9 GROUP BY k) x \
     ON x.k = d.k GROUP BY d.grp",
    // A filtered left scan and a right scan's groups: the groups are filtered by the left's keys, under an
    // aggregate too.
    "SELECT f.id, x.n FROM fact f JOIN (SELECT k, count(*) AS n FROM dim GROUP BY k) x ON x.k = f.k WHERE f.id < 500",
    "SELECT f.id, x.n FROM fact f LEFT JOIN (SELECT k, count(*) AS n FROM dim GROUP BY k) x ON x.k = f.k \
     WHERE f.id < 500",
    "SELECT count(*), sum(x.n) FROM fact f JOIN (SELECT k, count(*) AS n FROM dim GROUP BY k) x ON x.k = f.k \
     WHERE f.id < 500",
    "SELECT f.id FROM fact f WHERE f.v = 3 AND EXISTS (SELECT 1 FROM dim d WHERE d.k = f.k AND d.grp = 2)",
    "SELECT f.id FROM fact f WHERE f.v = 3 AND NOT EXISTS (SELECT 1 FROM dim d WHERE d.k = f.k AND d.grp = 2)",
    "SELECT f.id, EXISTS (SELECT 1 FROM dim d WHERE d.k = f.k AND d.grp < 3) FROM fact f WHERE f.id < 700",
    "SELECT count(*) FROM fact f WHERE f.id < 5000 AND NOT EXISTS (SELECT 1 FROM dim d WHERE d.k = f.k)",
    // Groups a key filter would change: not filtered.
    "SELECT d.name, x.n FROM dim d LEFT JOIN (SELECT k, count(*) AS n FROM fact GROUP BY k ORDER BY k LIMIT 50) x \
     ON x.k = d.k WHERE d.grp = 0",
    "SELECT d.name, x.n FROM dim d LEFT JOIN (SELECT k, count(*) AS n FROM fact GROUP BY ROLLUP (k)) x \
     ON x.k = d.k WHERE d.grp = 0",
    "SELECT d.name, x.n FROM dim d LEFT JOIN (SELECT DISTINCT k, count(*) AS n FROM fact GROUP BY k) x \
     ON x.k = d.k WHERE d.grp = 6",
    "SELECT d.name, x.n FROM dim d RIGHT JOIN (SELECT k, count(*) AS n FROM fact GROUP BY k) x ON x.k = d.k \
     WHERE x.n > 2",
    "SELECT d.name, x.n FROM dim d FULL JOIN (SELECT k, count(*) AS n FROM fact WHERE id < 50 GROUP BY k) x \
     ON x.k = d.k WHERE d.grp = 5 OR d.grp IS NULL",
];

#[test]
fn joins_return_the_same_rows_with_and_without_scanning_by_the_other_inputs_keys() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    tables(&mut session);
    for sql in QUERIES {
        session.execute_one("SET numadb.join_key_filter = off").unwrap();
        let whole = rows(&mut session, sql);
        session.execute_one("SET numadb.join_key_filter = on").unwrap();
        let keyed = rows(&mut session, sql);
        assert_eq!(keyed, whole, "{sql}");
    }
    // The queries are not all trivially empty. `fact.k` is 0 for ids 9000 and 18000, 21 for ids 3, 9003 and
    // 18003 (7 is invertible modulo 9000), and `wide` holds 21 twice: 2 + 3 × 2 rows.
    assert_eq!(rows(&mut session, "SELECT count(*) FROM fact f JOIN wide w ON f.k = w.k"), ["[Int(8)]"]);
    let matched = rows(&mut session, "SELECT count(*) FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp = 3");
    assert_ne!(matched, ["[Int(0)]"]);
}

/// The one integer a `SELECT count(*) …` returns.
fn count(session: &mut Session, sql: &str) -> u64 {
    let counted = rows(session, sql);
    let Some(number) = counted[0].strip_prefix("[Int(").and_then(|s| s.strip_suffix(")]")) else {
        panic!("{sql}: {counted:?}")
    };
    number.parse().unwrap()
}

/// The rows selected by the `Scan fact` line of `EXPLAIN ANALYZE`.
fn fact_rows_selected(session: &mut Session, sql: &str) -> u64 {
    rows_selected(session, sql, "fact")
}

/// The rows selected by the `Scan <table>` line of `EXPLAIN ANALYZE` (the first, if it scans the table twice).
fn rows_selected(session: &mut Session, sql: &str, table: &str) -> u64 {
    let explain = session.execute_one(&format!("EXPLAIN ANALYZE {sql}")).unwrap();
    let lines: Vec<String> = explain.rows.iter().map(|r| r[0].to_string()).collect();
    let line = format!("Scan {table}:");
    let scan = lines.iter().find(|l| l.trim_start().starts_with(&line)).unwrap_or_else(|| panic!("{lines:#?}"));
    scan.split(" selected").next().unwrap().rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn the_keyed_scan_hands_on_only_rows_whose_key_the_other_input_has() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    tables(&mut session);
    let sql = "SELECT count(*) FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp = 3";
    let explain = rows(&mut session, &format!("EXPLAIN {sql}")).join("\n");
    assert!(
        explain.contains("Key Filter: the left scan runs second, keeping rows whose k is a key of the right input")
    );
    let with_partner = count(&mut session, "SELECT count(*) FROM fact WHERE k IN (SELECT k FROM dim WHERE grp = 3)");
    assert_eq!(fact_rows_selected(&mut session, sql), with_partner);
    session.execute_one("SET numadb.join_key_filter = off").unwrap();
    assert_eq!(fact_rows_selected(&mut session, sql), 20_000);
    assert!(!rows(&mut session, &format!("EXPLAIN {sql}")).join("\n").contains("Key Filter"));
    let error = session.execute_one("SET numadb.join_key_filter = maybe").unwrap_err();
    assert_eq!(error.sqlstate, "22023");
}

#[test]
fn a_keyed_subquery_groups_only_the_rows_whose_key_the_outer_rows_have() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    tables(&mut session);
    let sql = "SELECT d.name, (SELECT sum(f.v) FROM fact f WHERE f.k = d.k) FROM dim d WHERE d.grp = 3";
    let explain = rows(&mut session, &format!("EXPLAIN {sql}")).join("\n");
    assert!(
        explain.contains(
            "Key Filter: the right input's scan runs second, grouping only rows whose k is a key of the left input"
        ),
        "{explain}"
    );
    let with_partner = count(&mut session, "SELECT count(*) FROM fact WHERE k IN (SELECT k FROM dim WHERE grp = 3)");
    assert!(with_partner > 0 && with_partner < 20_000, "{with_partner}");
    assert_eq!(fact_rows_selected(&mut session, sql), with_partner);
    // The same with the groups a derived table's, and the left a filtered scan that could have been filtered by
    // the groups' keys instead.
    let joined = "SELECT f.id, x.n FROM fact f JOIN (SELECT k, count(*) AS n FROM dim GROUP BY k) x ON x.k = f.k \
                  WHERE f.id < 300";
    let explain = rows(&mut session, &format!("EXPLAIN {joined}")).join("\n");
    assert!(explain.contains("grouping only rows whose k is a key of the left input"), "{explain}");
    assert!(rows_selected(&mut session, joined, "dim") < 300, "{explain}");
    // So they are under an aggregate: the join is not probed in the left scan's tasks, which would need every
    // group first.
    let aggregated = "SELECT count(*), sum(x.n) FROM fact f JOIN (SELECT k, count(*) AS n FROM dim GROUP BY k) x \
                      ON x.k = f.k WHERE f.id < 300";
    let explain = rows(&mut session, &format!("EXPLAIN {aggregated}")).join("\n");
    assert!(explain.contains("grouping only rows whose k is a key of the left input"), "{explain}");
    assert!(rows_selected(&mut session, aggregated, "dim") < 300, "{explain}");
    // Without a filter on the left the join is probed in the left scan's tasks, and EXPLAIN says so.
    let probed = "SELECT count(*), sum(x.n) FROM fact f JOIN (SELECT k, count(*) AS n FROM dim GROUP BY k) x \
                  ON x.k = f.k";
    let explain = rows(&mut session, &format!("EXPLAIN {probed}")).join("\n");
    assert!(
        explain.contains("Key Filter: the left scan runs second, keeping rows whose k is a key of the right input"),
        "{explain}"
    );
    // A LIMIT over the groups keeps them whole.
    let limited = "SELECT d.name, x.n FROM dim d LEFT JOIN (SELECT k, count(*) AS n FROM fact GROUP BY k LIMIT 5) x \
                   ON x.k = d.k WHERE d.grp = 3";
    assert!(!rows(&mut session, &format!("EXPLAIN {limited}")).join("\n").contains("Key Filter"));
    assert_eq!(fact_rows_selected(&mut session, limited), 20_000);
    session.execute_one("SET numadb.join_key_filter = off").unwrap();
    assert_eq!(fact_rows_selected(&mut session, sql), 20_000);
    assert!(!rows(&mut session, &format!("EXPLAIN {sql}")).join("\n").contains("Key Filter"));
}

#[test]
fn a_join_over_thesis_tables_scans_the_whole_table_by_the_filtered_ones_keys() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, 100_000, 5, Some(8192), None).unwrap();
    let sql =
        "SELECT a.\"C0\", b.\"C3\" FROM \"TBL_0\" a JOIN \"TBL_1\" b ON a.\"C1\" = b.\"C0\" WHERE a.\"C2\" < 3000";
    let keyed = rows(&mut session, sql);
    session.execute_one("SET numadb.join_key_filter = off").unwrap();
    assert_eq!(keyed, rows(&mut session, sql));
    assert!(!keyed.is_empty());
}

/// The lines of `EXPLAIN ANALYZE sql`.
fn explain_analyze(session: &mut Session, sql: &str) -> String {
    let explain = session.execute_one(&format!("EXPLAIN ANALYZE {sql}")).unwrap();
    explain.rows.iter().map(|r| r[0].to_string()).collect::<Vec<_>>().join("\n")
}

#[test]
fn an_aggregate_over_a_join_is_probed_in_the_scans_tasks() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    tables(&mut session);
    const PROBED: &str = "probed and aggregated in the scan's tasks";
    // The filtered dimension is the build side; every fact row with a partner is joined in the fact scan's tasks.
    let sql = "SELECT d.grp, count(*), sum(f.v) FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp <> 6 GROUP BY d.grp";
    let explain = explain_analyze(&mut session, sql);
    assert!(explain.contains(PROBED), "{explain}");
    let joined = rows(&mut session, "SELECT count(*) FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp <> 6");
    let line = explain.lines().find(|l| l.contains(PROBED)).unwrap();
    let count = line.split(": ").nth(1).unwrap().split(' ').next().unwrap();
    assert_eq!(joined, [format!("[Int({count})]")], "the operator counts the joined rows");
    // So it does when the tasks only count each row's partners (keys repeat in a self-join of `fact`).
    let counted = "SELECT count(*) FROM fact a JOIN fact b ON a.k = b.k WHERE a.id % 9000 < 300";
    let explain = explain_analyze(&mut session, counted);
    let line = explain.lines().find(|l| l.contains(PROBED)).unwrap_or_else(|| panic!("{explain}"));
    let count = line.split(": ").nth(1).unwrap().split(' ').next().unwrap();
    assert_eq!(rows(&mut session, counted), [format!("[Int({count})]")]);
    // Every row with one of the hashed side's keys is in the hashed side too (a key's rows are the ids of one
    // residue modulo 9000), so each key with n rows there joins n × n times: 2650, not the 890 non-NULL rows.
    let squares = "SELECT sum(n * n)::bigint FROM (SELECT k, count(*) AS n FROM fact WHERE id % 9000 < 300 \
                   AND k IS NOT NULL GROUP BY k) x";
    assert_eq!(rows(&mut session, counted), rows(&mut session, squares));
    assert_eq!(rows(&mut session, counted), ["[Int(2650)]"]);
    // Without the key filter, and where the build side would outgrow the scanned table (unfiltered `fact` against
    // `dim`, which is scanned second), the join runs on the session thread as before.
    let larger = "SELECT count(*) FROM fact f JOIN dim d ON f.k = d.k";
    assert!(!explain_analyze(&mut session, larger).contains(PROBED));
    // An ordered aggregate would see its values in the tasks' order.
    let ordered = "SELECT string_agg(d.name, ',') FROM fact f JOIN dim d ON f.k = d.k WHERE d.grp = 3";
    assert!(!explain_analyze(&mut session, ordered).contains(PROBED));
    session.execute_one("SET numadb.join_key_filter = off").unwrap();
    assert!(!explain_analyze(&mut session, sql).contains(PROBED));
}

#[test]
fn a_join_of_the_thesis_tables_counted_in_the_scans_tasks_counts_what_the_session_thread_does() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, 100_000, 5, Some(8192), None).unwrap();
    let sql = "SELECT count(*), sum(b.\"C3\"), min(a.\"C0\") FROM \"TBL_0\" a JOIN \"TBL_1\" b \
               ON a.\"C1\" = b.\"C0\" WHERE a.\"C2\" < 3000";
    assert!(explain_analyze(&mut session, sql).contains("probed and aggregated in the scan's tasks"));
    let probed = rows(&mut session, sql);
    session.execute_one("SET numadb.join_key_filter = off").unwrap();
    assert_eq!(probed, rows(&mut session, sql));
    assert_ne!(probed, ["[Int(0), Null, Null]"]);
    // The join counted alone (the `bench queries` join), without reading a row of either side.
    let counted = "SELECT count(*) FROM \"TBL_0\" a JOIN \"TBL_1\" b ON a.\"C1\" = b.\"C0\" WHERE a.\"C2\" < 3000";
    session.execute_one("SET numadb.join_key_filter = on").unwrap();
    assert!(explain_analyze(&mut session, counted).contains("probed and aggregated in the scan's tasks"));
    let probed = rows(&mut session, counted);
    session.execute_one("SET numadb.join_key_filter = off").unwrap();
    assert_eq!(probed, rows(&mut session, counted));
    assert_eq!(probed, [format!("[{}]", &rows(&mut session, sql)[0][1..].split(',').next().unwrap())]);
}
