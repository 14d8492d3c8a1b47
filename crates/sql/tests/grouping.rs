//! GROUP BY with many groups: each worker's tasks add to one table of groups, and as many merge tasks as workers
//! each add up one hash partition of the groups and finish its rows. Every grouping here is checked against the
//! same groups computed here from the table's rows: keys spanning few values (the direct table) and many (the
//! hash index), NULL and boolean keys, DISTINCT aggregates and none (the merge tasks then read the workers' tables
//! where they are, when every worker found its groups through its direct table), rows still in a table's unsealed
//! delta (grouped row by row), and many small tasks.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use numadb_sql::{Database, Session};
use numadb_storage::Value;

fn int(value: &Value) -> Option<i64> {
    match value {
        Value::Int(v) => Some(*v),
        Value::Null => None,
        other => panic!("not an integer: {other:?}"),
    }
}

/// A key value as it is compared here: NULL, an integer, a boolean or a string (shared with the row it came from).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Null,
    Int(i64),
    Bool(bool),
    Text(Arc<str>),
}

fn key(value: &Value) -> Key {
    match value {
        Value::Null => Key::Null,
        Value::Int(v) => Key::Int(*v),
        Value::Bool(b) => Key::Bool(*b),
        Value::Text(s) => Key::Text(Arc::clone(s)),
        other => panic!("not a key here: {other:?}"),
    }
}

/// Per group (key values), over its rows' `v`: count(*), sum, min, max, count(DISTINCT v % 7). Hashed, not
/// sorted: over a million groups, comparing keys in a tree took most of this test's time in a debug build.
type Expected = HashMap<Vec<Key>, (i64, i64, i64, i64, usize)>;

/// The groups of `rows` by their `key_columns`, over their `v_column` (never NULL here).
fn expected(rows: &[Vec<Value>], key_columns: &[usize], v_column: usize) -> Expected {
    // A group's count, sum, minimum, maximum and the values of `v % 7` (-6..=6) met, as bits.
    let mut groups: HashMap<Vec<Key>, (i64, i64, i64, i64, u16)> = HashMap::new();
    for row in rows {
        let key: Vec<Key> = key_columns.iter().map(|&c| key(&row[c])).collect();
        let v = int(&row[v_column]).expect("v is never NULL here");
        let group = groups.entry(key).or_insert((0, 0, i64::MAX, i64::MIN, 0));
        group.0 += 1;
        group.1 += v;
        group.2 = group.2.min(v);
        group.3 = group.3.max(v);
        group.4 |= 1 << (v % 7 + 6);
    }
    groups
        .into_iter()
        .map(|(key, (count, sum, min, max, distinct))| (key, (count, sum, min, max, distinct.count_ones() as usize)))
        .collect()
}

/// The groups as numadb computes them; without `distinct`, with no DISTINCT aggregate (whose sets the merge
/// tasks take, so that they cannot read the workers' tables where they are) and 0 for its count.
fn grouped(session: &mut Session, keys: &[&str], table: &str, distinct: bool) -> Expected {
    let list = keys.join(", ");
    let last = if distinct { "count(DISTINCT v % 7)" } else { "0" };
    let sql = format!("SELECT {list}, count(*), sum(v), min(v), max(v), {last} FROM {table} GROUP BY {list}");
    let rows = session.execute_one(&sql).unwrap_or_else(|e| panic!("{sql}: {e:?}")).rows;
    let mut out = Expected::new();
    for row in rows {
        let key: Vec<Key> = row[..keys.len()].iter().map(key).collect();
        let values: Vec<i64> = row[keys.len()..].iter().map(|v| int(v).expect("an aggregate")).collect();
        let state = (values[0], values[1], values[2], values[3], values[4] as usize);
        assert!(out.insert(key.clone(), state).is_none(), "{sql}: group {key:?} came out twice");
    }
    out
}

/// `groups` with 0 for the count of distinct values ([`grouped`] without `distinct`).
fn without_distinct(groups: &Expected) -> Expected {
    groups.iter().map(|(key, &(count, sum, min, max, _))| (key.clone(), (count, sum, min, max, 0))).collect()
}

#[test]
fn many_groups_merged_in_partitions_are_the_groups_of_the_rows() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, 131_072, 5, Some(16_384), None).unwrap();
    session
        .execute_one("CREATE TABLE g (k INTEGER, b BOOLEAN, w BIGINT, v INTEGER) WITH (partition_rows = 16384)")
        .unwrap();
    // k spans 70 000 values (one direct table), w spans 3 million (the hash index); a NULL k every 97 rows.
    session
        .execute_one(
            "INSERT INTO g SELECT CASE WHEN \"C2\" % 97 = 0 THEN NULL ELSE \"C1\" % 70000 END, \"C3\" % 3 = 0, \
             \"C4\" * 23, \"C5\" FROM \"TBL_0\"",
        )
        .unwrap();
    // A few rows stay in the unsealed delta, with keys the sealed rows have and keys they do not.
    session
        .execute_one(
            "INSERT INTO g VALUES (5, true, 1, 7), (NULL, NULL, NULL, 8), (-3, false, 46, 9), (5, true, 1, 700)",
        )
        .unwrap();
    let rows = session.execute_one("SELECT k, b, w, v FROM g").unwrap().rows;
    assert_eq!(rows.len(), 131_076);
    for morsel_rows in ["auto", "1024"] {
        session.execute_one(&format!("SET numadb.morsel_rows = '{morsel_rows}'")).unwrap();
        for (keys, columns) in [(&["k"][..], &[0][..]), (&["k", "b"], &[0, 1]), (&["w"], &[2]), (&["b", "w"], &[1, 2])]
        {
            let want = expected(&rows, columns, 3);
            let got = grouped(&mut session, keys, "g", true);
            assert_eq!(got.len(), want.len(), "GROUP BY {keys:?}, morsels of {morsel_rows} rows");
            assert!(got == want, "GROUP BY {keys:?}, morsels of {morsel_rows} rows: the groups differ");
            let got = grouped(&mut session, keys, "g", false);
            assert!(got == without_distinct(&want), "GROUP BY {keys:?} with no DISTINCT aggregate: the groups differ");
        }
    }
    // The plan says how the groups are merged; grouping sets keep one merge per domain.
    let mut plan = |sql: &str| -> String {
        let rows = session.execute_one(&format!("EXPLAIN {sql}")).unwrap().rows;
        rows.iter().map(|row| row[0].to_string()).collect::<Vec<_>>().join("\n")
    };
    assert!(plan("SELECT k, count(*) FROM g GROUP BY k").contains("merged in partitions of the groups"));
    assert!(plan("SELECT k, count(*) FROM g GROUP BY ROLLUP (k)").contains("partial per domain"));
}

#[test]
fn an_error_in_a_task_of_a_partitioned_grouping_fails_the_statement_and_not_the_session() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    session.execute_one("CREATE TABLE d (k INTEGER, v INTEGER) WITH (partition_rows = 1024)").unwrap();
    let values: Vec<String> = (0..8192).map(|i| format!("({}, {})", i % 3, i % 1000)).collect();
    session.execute_one(&format!("INSERT INTO d VALUES {}", values.join(", "))).unwrap();
    session.execute_one("SET numadb.morsel_rows = 1024").unwrap();
    // Some task divides by zero half-way through the workers' groups.
    let error = session.execute_one("SELECT 100 / v, count(*) FROM d GROUP BY 1").unwrap_err();
    assert_eq!(error.sqlstate, "22012", "{error:?}");
    let rows = session.execute_one("SELECT k, count(*), sum(v) FROM d GROUP BY k ORDER BY k").unwrap().rows;
    let expected: Vec<Vec<Value>> = (0..3)
        .map(|k| {
            let vs: Vec<i64> = (0..8192).filter(|i| i % 3 == k).map(|i| i % 1000).collect();
            vec![Value::Int(k), Value::Int(vs.len() as i64), Value::Int(vs.iter().sum())]
        })
        .collect();
    assert_eq!(rows, expected);
}

/// Workers whose tables outgrow the caches spill their groups into the merge's partitions and start afresh, so a
/// key is spilled many times from one worker; the merge adds every copy up. Over 1.1 million rows (more than
/// enough for many more partitions than workers) and over 300 000 (one per worker), with one worker and with
/// all, keys through the hash index (`w`: nearly every row its own group), through the direct table (`k`), and
/// both together.
#[test]
fn groups_spilled_from_full_tables_are_the_groups_of_the_rows() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, 1_100_000, 11, None, None).unwrap();
    for (table, rows) in [("big", 1_100_000), ("small", 300_000)] {
        session
            .execute_one(&format!(
                "CREATE TABLE {table} (k INTEGER, w BIGINT, d INTEGER, v INTEGER, a INTEGER, z INTEGER, j INTEGER)"
            ))
            .unwrap();
        // w repeats a key now and then (C1 is uniform in 1..N), and the rows of one key lie far apart. d spans a
        // million values, which one direct table covers, and its groups' states outgrow what a table holds before
        // it is spilled. a and z are every row's own group, the table's blocks in order of a (now and then NULL)
        // and against the order of z: a direct table grows block after block at one end or the other. j is a too,
        // but its second half jumps five million on: a worker's morsels of both halves have keys too far apart for
        // one direct table, and its table spills instead of leaving its groups out of a new one.
        session
            .execute_one(&format!(
                "INSERT INTO {table} SELECT \"C1\" % 200000, CASE WHEN \"C2\" % 101 = 0 THEN NULL ELSE \"C1\" * 7 END, \
                 \"C0\" % 1000000, \"C3\", CASE WHEN \"C0\" % 300001 = 0 THEN NULL ELSE \"C0\" END, -\"C0\", \
                 CASE WHEN \"C0\" <= {rows} / 2 THEN \"C0\" ELSE \"C0\" + 5000000 END \
                 FROM \"TBL_0\" WHERE \"C0\" <= {rows}"
            ))
            .unwrap();
        let all = session.execute_one(&format!("SELECT k, w, d, v, a, z, j FROM {table}")).unwrap().rows;
        // Two keys too: spilled and merged as one key of two values.
        let keys_and_columns = [
            (&["w"][..], &[1][..]),
            (&["k"], &[0]),
            (&["k", "w"], &[0, 1]),
            (&["d"], &[2]),
            (&["a"], &[4]),
            (&["z"], &[5]),
            (&["j"], &[6]),
        ];
        for (keys, columns) in keys_and_columns {
            let want = expected(&all, columns, 3);
            for workers in ["cpus(0)", "all"] {
                session.execute_one(&format!("SET numadb.workers = '{workers}'")).unwrap();
                let got = grouped(&mut session, keys, table, true);
                assert_eq!(got.len(), want.len(), "{table}: GROUP BY {keys:?} with {workers} workers");
                assert!(got == want, "{table}: GROUP BY {keys:?} with {workers} workers: the groups differ");
                let got = grouped(&mut session, keys, table, false);
                assert!(got == without_distinct(&want), "{table}: GROUP BY {keys:?} with no DISTINCT aggregate");
            }
        }
    }
    // EXPLAIN ANALYZE says when the tables spilled: with nearly a group per row (w), not with k's 200 000. One
    // worker, so that it sees all the rows on any machine.
    session.execute_one("SET numadb.workers = 'cpus(0)'").unwrap();
    let explain = |session: &mut Session, key: &str| -> String {
        let sql = format!("EXPLAIN ANALYZE SELECT {key}, count(*) FROM big GROUP BY {key}");
        let rows = session.execute_one(&sql).unwrap().rows;
        rows.iter().map(|row| row[0].to_string()).collect::<Vec<_>>().join("\n")
    };
    assert!(explain(&mut session, "w").contains("spilled"), "{}", explain(&mut session, "w"));
    // d's million groups: with COUNT(*) alone, one direct table holds them all; with SUM, MIN and MAX too, their
    // states outgrow what one table holds, and it spills.
    assert!(!explain(&mut session, "d").contains("spilled"), "{}", explain(&mut session, "d"));
    let sql = "EXPLAIN ANALYZE SELECT d, count(*), sum(v), min(v), max(v) FROM big GROUP BY d";
    let text: Vec<String> = session.execute_one(sql).unwrap().rows.iter().map(|row| row[0].to_string()).collect();
    assert!(text.iter().any(|line| line.contains("spilled")), "{text:?}");
    assert!(!explain(&mut session, "k").contains("spilled"), "{}", explain(&mut session, "k"));
    // And that k's groups, all in the workers' direct tables, were merged in ranges of its values, and w's not.
    assert!(explain(&mut session, "k").contains("merged in ranges"), "{}", explain(&mut session, "k"));
    assert!(!explain(&mut session, "w").contains("merged in ranges"), "{}", explain(&mut session, "w"));
    assert!(!explain(&mut session, "k, w").contains("merged in ranges"), "{}", explain(&mut session, "k, w"));
}

/// `ORDER BY … LIMIT` over a GROUP BY merged in partitions: each merge task hands on only its best groups (those
/// its HAVING keeps), and the statement returns exactly the rows of the whole sort followed by the limit. Orders
/// by aggregates and keys, ascending and descending with NULLs either way, with OFFSET, HAVING and LIMIT 0; an
/// error in a HAVING, a sort key or the select list fails the statement as it does without the limit.
#[test]
fn the_best_groups_of_an_order_by_with_a_limit_are_chosen_by_the_merge_tasks() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, 262_144, 13, Some(32_768), None).unwrap();
    session.execute_one("CREATE TABLE h (k INTEGER, w BIGINT, v INTEGER)").unwrap();
    // k through the direct table (a NULL group too), w through the hash index (many groups of one row).
    session
        .execute_one(
            "INSERT INTO h SELECT CASE WHEN \"C2\" % 89 = 0 THEN NULL ELSE \"C1\" % 20000 END, \"C1\" * 3, \"C3\" \
             FROM \"TBL_0\"",
        )
        .unwrap();
    let groups = |session: &mut Session, key: &str| -> usize {
        let sql = format!("SELECT count(*) FROM (SELECT {key} FROM h GROUP BY {key}) s");
        int(&session.execute_one(&sql).unwrap().rows[0][0]).unwrap() as usize
    };
    let cases = [
        ("k", "", "count(*) DESC, k NULLS FIRST"),
        ("k", "", "k DESC NULLS LAST"),
        ("k", "", "sum(v), k"),
        ("k", " HAVING count(*) > 13", "max(v) - min(v) DESC, k NULLS LAST"),
        ("w", "", "count(*) DESC, w"),
        ("w", " HAVING min(v) % 5 = 1", "sum(v) DESC, w DESC"),
        ("w", "", "w % 1000, w"),
    ];
    for (key, having, order) in cases {
        let select = format!("SELECT {key}, count(*), sum(v) FROM h GROUP BY {key}{having} ORDER BY {order}");
        let all = session.execute_one(&select).unwrap().rows;
        for (limit, offset) in [(0, 0), (1, 0), (10, 0), (7, 25), (300, 5)] {
            let sql = format!("{select} LIMIT {limit} OFFSET {offset}");
            let rows = session.execute_one(&sql).unwrap_or_else(|e| panic!("{sql}: {e:?}")).rows;
            let want: Vec<Vec<Value>> = all.iter().skip(offset).take(limit).cloned().collect();
            assert_eq!(rows, want, "{sql}");
        }
        // Far fewer groups than there are reach the session thread's sort.
        let explain = session.execute_one(&format!("EXPLAIN ANALYZE {select} LIMIT 10")).unwrap().rows;
        let text: Vec<String> = explain.iter().map(|row| row[0].to_string()).collect();
        let project = text.iter().find(|line| line.contains("Project: ")).unwrap_or_else(|| panic!("{text:?}"));
        let handed_on: usize = project.split("Project: ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert!(handed_on * 20 < groups(&mut session, key), "{select}: {project}");
    }
    // A NULL limit is no limit; a volatile sort key is not judged in the merge tasks.
    let all = session.execute_one("SELECT k, count(*) FROM h GROUP BY k ORDER BY 2, 1").unwrap().rows;
    let rows = session.execute_one("SELECT k, count(*) FROM h GROUP BY k ORDER BY 2, 1 LIMIT NULL").unwrap().rows;
    assert_eq!(rows, all);
    let sql = "SELECT k, count(*) FROM h GROUP BY k ORDER BY random() LIMIT 3";
    assert_eq!(session.execute_one(sql).unwrap().rows.len(), 3);
    // Errors in a HAVING or a sort key are the statement's, with the limit or without, and the session goes on.
    let tails = [
        ("count(*)", "HAVING 10 / (count(*) - 1) > 0 ORDER BY w"),
        ("count(*)", "ORDER BY 10 / (count(*) - 1), w"),
        // In the select list alone: PostgreSQL evaluates it for every group, before the sort and the limit.
        ("10 / (count(*) - 1)", "ORDER BY count(*) DESC, w"),
    ];
    for (output, tail) in tails {
        for limit in ["", " LIMIT 5"] {
            let sql = format!("SELECT w, {output} FROM h GROUP BY w {tail}{limit}");
            assert_eq!(session.execute_one(&sql).unwrap_err().sqlstate, "22012", "{sql}");
        }
    }
    let rows = session.execute_one("SELECT k, count(*) FROM h GROUP BY k ORDER BY 1 NULLS FIRST LIMIT 1").unwrap().rows;
    assert_eq!(rows[0][0], Value::Null);
}

/// Text keys are grouped by their strings' numbers across the table's partitions, each of which has a dictionary
/// of its own: here 8 partitions whose dictionaries of `s` overlap in part (a partition's strings run from `s0`
/// to a bound that grows from one partition to the next), a few strings throughout (`t`), NULLs and the empty
/// string, and unsealed rows with strings of the partitions and strings of none. Alone and with integer keys
/// (then too many slots for the direct table: through the hash index, spilled), with DISTINCT aggregates and
/// none, on one worker and all, in large and small morsels; under ORDER BY … LIMIT, whose merge tasks hand on
/// their best groups; and in grouping sets, merged per domain. And text columns as the arguments of MIN, MAX,
/// COUNT and COUNT(DISTINCT), numbered alike.
#[test]
fn text_keys_numbered_across_partitions_are_the_groups_of_the_rows() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, 131_072, 7, Some(16_384), None).unwrap();
    session
        .execute_one("CREATE TABLE tk (s TEXT, t TEXT, k INTEGER, v INTEGER) WITH (partition_rows = 16384)")
        .unwrap();
    session
        .execute_one(
            "INSERT INTO tk SELECT CASE WHEN \"C2\" % 89 = 0 THEN NULL WHEN \"C2\" % 97 = 0 THEN '' \
             ELSE 's' || (\"C1\" % (2000 + (\"C0\" / 16384) * 9000)) END, 't' || (\"C0\" % 3), \"C3\" % 50, \"C4\" \
             FROM \"TBL_0\"",
        )
        .unwrap();
    session
        .execute_one(
            "INSERT INTO tk VALUES ('s5', 't1', 3, 1), ('zz-in-no-partition', 't9', 4, 2), (NULL, 't0', NULL, 3), \
             ('s5', NULL, 3, 4), ('', 't1', 1, 5), ('zz-in-no-partition', 't1', 4, 6)",
        )
        .unwrap();
    let rows = session.execute_one("SELECT s, t, k, v FROM tk").unwrap().rows;
    assert_eq!(rows.len(), 131_078);
    let keys_and_columns = [
        (&["s"][..], &[0][..]),
        (&["t"], &[1]),
        (&["s", "t"], &[0, 1]),
        (&["s", "k"], &[0, 2]),
        (&["k", "s"], &[2, 0]),
        (&["t", "s", "k"], &[1, 0, 2]),
    ];
    for (keys, columns) in keys_and_columns {
        let want = expected(&rows, columns, 3);
        for (workers, morsel_rows) in [("cpus(0)", "auto"), ("all", "auto"), ("all", "1024")] {
            session.execute_one(&format!("SET numadb.workers = '{workers}'")).unwrap();
            session.execute_one(&format!("SET numadb.morsel_rows = '{morsel_rows}'")).unwrap();
            let context = format!("GROUP BY {keys:?} with {workers} workers, morsels of {morsel_rows} rows");
            let got = grouped(&mut session, keys, "tk", true);
            assert_eq!(got.len(), want.len(), "{context}");
            assert!(got == want, "{context}: the groups differ");
            let got = grouped(&mut session, keys, "tk", false);
            assert!(got == without_distinct(&want), "{context}, no DISTINCT aggregate: the groups differ");
        }
    }
    session.execute_one("SET numadb.workers = 'all'").unwrap();
    session.execute_one("SET numadb.morsel_rows = 'auto'").unwrap();
    let plan = session.execute_one("EXPLAIN SELECT s, count(*) FROM tk GROUP BY s").unwrap().rows;
    let plan: Vec<String> = plan.iter().map(|row| row[0].to_string()).collect();
    assert!(plan.iter().any(|line| line.contains("merged in partitions of the groups")), "{plan:?}");

    // Each string's count, in byte order (NULL last), for the LIMITs and the grouping sets.
    let mut counts: BTreeMap<Option<String>, i64> = BTreeMap::new();
    for row in &rows {
        let s = match &row[0] {
            Value::Text(s) => Some(s.to_string()),
            Value::Null => None,
            other => panic!("s is {other:?}"),
        };
        *counts.entry(s).or_default() += 1;
    }
    let mut in_order: Vec<(Option<String>, i64)> = counts.clone().into_iter().filter(|(s, _)| s.is_some()).collect();
    in_order.push((None, counts[&None]));
    let text = |value: &Value| match value {
        Value::Text(s) => Some(s.to_string()),
        Value::Null => None,
        other => panic!("a key of {other:?}"),
    };
    for (order, offset, limit) in [("ASC", 0, 5), ("DESC", 2, 7), ("ASC", 3000, 4)] {
        let sql = format!("SELECT s, count(*) FROM tk GROUP BY s ORDER BY s {order} LIMIT {limit} OFFSET {offset}");
        let got: Vec<(Option<String>, i64)> =
            session.execute_one(&sql).unwrap().rows.iter().map(|row| (text(&row[0]), int(&row[1]).unwrap())).collect();
        let mut sorted = in_order.clone();
        if order == "DESC" {
            sorted.reverse();
        }
        let want: Vec<(Option<String>, i64)> = sorted.into_iter().skip(offset).take(limit).collect();
        assert_eq!(got, want, "{sql}");
    }
    // MIN, MAX, COUNT and COUNT(DISTINCT) of a text column, by integer and text keys and by none: the strings'
    // numbers keep their byte order, and so do a partition's codes.
    type TextSummary = (Option<String>, Option<String>, i64, usize);
    type TextAdding = (Option<String>, Option<String>, i64, BTreeSet<String>);
    for (keys, columns) in [(&["t"][..], &[1][..]), (&["k"], &[2]), (&["t", "k"], &[1, 2]), (&[], &[])] {
        let mut want: BTreeMap<Vec<Key>, TextAdding> = BTreeMap::new();
        for row in &rows {
            let group = want.entry(columns.iter().map(|&c| key(&row[c])).collect()).or_default();
            if let Some(s) = text(&row[0]) {
                group.0 = Some(group.0.take().map_or(s.clone(), |min: String| min.min(s.clone())));
                group.1 = Some(group.1.take().map_or(s.clone(), |max: String| max.max(s.clone())));
                group.2 += 1;
                group.3.insert(s);
            }
        }
        let want: BTreeMap<Vec<Key>, TextSummary> =
            want.into_iter().map(|(key, (min, max, count, set))| (key, (min, max, count, set.len()))).collect();
        for workers in ["cpus(0)", "all"] {
            session.execute_one(&format!("SET numadb.workers = '{workers}'")).unwrap();
            let list = keys.join(", ");
            let (select, group_by) = if keys.is_empty() {
                (String::new(), String::new())
            } else {
                (format!("{list}, "), format!(" GROUP BY {list}"))
            };
            let sql = format!("SELECT {select}min(s), max(s), count(s), count(DISTINCT s) FROM tk{group_by}");
            let mut got: BTreeMap<Vec<Key>, TextSummary> = BTreeMap::new();
            for row in session.execute_one(&sql).unwrap().rows {
                let n = keys.len();
                let summary =
                    (text(&row[n]), text(&row[n + 1]), int(&row[n + 2]).unwrap(), int(&row[n + 3]).unwrap() as usize);
                assert!(got.insert(row[..n].iter().map(key).collect(), summary).is_none(), "{sql}: {row:?} twice");
            }
            assert!(got == want, "{sql} with {workers} workers: the groups differ");
            if keys.is_empty() {
                // Without COUNT(DISTINCT), each block's codes are summarised where they are. Over the sealed rows
                // alone (the unsealed ones have v <= 6, and the smallest string): the same summaries.
                let sql = "SELECT min(s), max(s), count(s) FROM tk WHERE v > 6";
                let row = &session.execute_one(sql).unwrap().rows[0];
                let sealed: Vec<String> =
                    rows.iter().filter(|row| int(&row[3]).unwrap() > 6).filter_map(|row| text(&row[0])).collect();
                let want = (sealed.iter().min().cloned(), sealed.iter().max().cloned(), sealed.len() as i64);
                let got = (text(&row[0]), text(&row[1]), int(&row[2]).unwrap());
                assert_eq!(got, want, "{sql} with {workers} workers");
            }
        }
    }
    session.execute_one("SET numadb.workers = 'all'").unwrap();

    // Partitions with more strings in all than are numbered (2^18): the general path, with the same groups.
    session.execute_one("CREATE TABLE many (s TEXT, v INTEGER) WITH (partition_rows = 131072)").unwrap();
    session.execute_one("INSERT INTO many SELECT 'm' || (i % 300000), i FROM generate_series(1, 393216) i").unwrap();
    let sql =
        "SELECT count(*), sum(n)::bigint, max(n), min(s), max(s) FROM (SELECT s, count(*) AS n FROM many GROUP BY s) g";
    let row = &session.execute_one(sql).unwrap().rows[0];
    let summary = (int(&row[0]), int(&row[1]), int(&row[2]), text(&row[3]), text(&row[4]));
    let want = (Some(300_000), Some(393_216), Some(2), Some("m0".to_string()), Some("m99999".to_string()));
    assert_eq!(summary, want, "{sql}");
    let plan = session.execute_one("EXPLAIN SELECT s, count(*) FROM many GROUP BY s").unwrap().rows;
    let plan: Vec<String> = plan.iter().map(|row| row[0].to_string()).collect();
    assert!(plan.iter().any(|line| line.contains("hash aggregate, partial per domain")), "{plan:?}");
    let sql = "SELECT s, GROUPING(s), count(*) FROM tk GROUP BY GROUPING SETS ((s), ())";
    let mut by_set: BTreeMap<Option<String>, i64> = BTreeMap::new();
    let mut total = None;
    for row in session.execute_one(sql).unwrap().rows {
        match int(&row[1]) {
            Some(0) => assert!(by_set.insert(text(&row[0]), int(&row[2]).unwrap()).is_none(), "{sql}: {row:?} twice"),
            _ => total = int(&row[2]),
        }
    }
    assert_eq!(by_set, counts, "{sql}");
    assert_eq!(total, Some(rows.len() as i64), "{sql}");
}

/// SUM, AVG, MIN, MAX and COUNT of a double column are aggregated a block at a time, by the values' bits, and
/// give what the general path gives (here the same aggregates with a FILTER that keeps every row, which only the
/// general path takes): over several partitions and unsealed rows, with NULLs, NaN, infinities, -0 and values
/// that cancel, by integer and text keys and by none; and the same error where finite values overflow.
#[test]
fn double_aggregates_by_block_are_the_general_paths() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    numadb_sql::thesis::load_thesis_tables(&mut session, 65_536, 3, Some(16_384), None).unwrap();
    session
        .execute_one("CREATE TABLE dd (k INTEGER, s TEXT, d DOUBLE PRECISION) WITH (partition_rows = 16384)")
        .unwrap();
    session
        .execute_one(
            "INSERT INTO dd SELECT \"C1\" % 300, 's' || (\"C2\" % 7), CASE WHEN \"C3\" % 53 = 0 THEN NULL \
             WHEN \"C3\" % 1009 = 0 THEN 1e300 WHEN \"C3\" % 1013 = 0 THEN -1e300 \
             ELSE (\"C4\" % 100000) / 7.0 - 7000 END FROM \"TBL_0\"",
        )
        .unwrap();
    session
        .execute_one(
            "INSERT INTO dd VALUES (1, 's1', 'NaN'), (2, 's2', 'Infinity'), (3, 's3', '-Infinity'), \
             (4, 's4', '-0'), (4, 's4', '0'), (5, NULL, NULL), (301, 's9', 2.5)",
        )
        .unwrap();
    let close = |a: &Value, b: &Value| match (a, b) {
        (Value::Double(x), Value::Double(y)) => {
            x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        _ => a == b,
    };
    let everything = " FILTER (WHERE true)";
    for (select, group_by) in [("k, ", " GROUP BY k"), ("s, ", " GROUP BY s"), ("k, s, ", " GROUP BY k, s"), ("", "")] {
        for workers in ["cpus(0)", "all"] {
            session.execute_one(&format!("SET numadb.workers = '{workers}'")).unwrap();
            let aggregates = |filter: &str| {
                format!("sum(d){filter}, avg(d){filter}, min(d){filter}, max(d){filter}, count(d){filter}")
            };
            let order = if group_by.is_empty() {
                String::new()
            } else {
                format!(" ORDER BY {}", select.trim_end_matches(", "))
            };
            let fast = format!("SELECT {select}{} FROM dd{group_by}{order}", aggregates(""));
            let general = format!("SELECT {select}{} FROM dd{group_by}{order}", aggregates(everything));
            let (fast_rows, general_rows) =
                (session.execute_one(&fast).unwrap().rows, session.execute_one(&general).unwrap().rows);
            assert_eq!(fast_rows.len(), general_rows.len(), "{fast}");
            for (a, b) in fast_rows.iter().zip(&general_rows) {
                assert!(
                    a.iter().zip(b).all(|(x, y)| close(x, y)),
                    "{fast} with {workers} workers: {a:?} against {b:?}"
                );
            }
        }
    }
    // The block path is the one taken: it has no FILTER.
    let plan = session.execute_one("EXPLAIN SELECT k, sum(d) FROM dd GROUP BY k").unwrap().rows;
    let plan: Vec<String> = plan.iter().map(|row| row[0].to_string()).collect();
    assert!(plan.iter().any(|line| line.contains("merged in partitions of the groups")), "{plan:?}");
    // Finite values that add up past the largest double: PostgreSQL's error, either way.
    session.execute_one("INSERT INTO dd SELECT 7, 's7', 1.7e308 FROM generate_series(1, 3)").unwrap();
    session.execute_one("INSERT INTO dd SELECT 7, 's7', 1.7e308 FROM generate_series(1, 70000)").unwrap();
    for filter in ["", everything] {
        let sql = format!("SELECT k, sum(d){filter} FROM dd GROUP BY k");
        let error = session.execute_one(&sql).unwrap_err();
        assert_eq!(error.sqlstate, "22003", "{sql}: {error:?}");
    }
}
