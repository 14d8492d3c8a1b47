//! Ranges bounded by a prepared statement's parameters: whichever way each execution takes (a range lookup
//! through the sorted index where its values bound few rows, a scan otherwise), it returns what the same
//! statement with its values written as constants returns, and what the rows say when read one by one; an UPDATE
//! or DELETE bounded by parameters changes the same rows as one bounded by constants.

use numadb_sql::{Database, Session};
use numadb_storage::Value;

/// `tp`: 5 300 rows in 1 024-row partitions and a delta; `k` its primary key (sorted), `b` (duplicates, NULLs)
/// and `s` (text) with sorted indexes, `v` without one.
fn table(session: &mut Session, name: &str) {
    let statements = [
        format!(
            "CREATE TABLE {name} (k BIGINT PRIMARY KEY, b INTEGER, s TEXT, v INTEGER) WITH (partition_rows = 1024)"
        ),
        format!("CREATE INDEX {name}_b ON {name} USING sorted (b)"),
        format!("CREATE INDEX {name}_s ON {name} USING sorted (s)"),
        format!(
            "INSERT INTO {name} SELECT g, CASE WHEN g % 37 = 0 THEN NULL ELSE (g * 7919) % 2600 END, \
             'w' || lpad(((g * 104729) % 6000)::text, 4, '0'), g % 11 FROM generate_series(1, 5000) AS x(g)"
        ),
        // Into the delta, after the sealed partitions.
        format!(
            "INSERT INTO {name} SELECT g, g % 2600, 'w' || lpad((g % 6000)::text, 4, '0'), g % 11 \
             FROM generate_series(5001, 5300) AS x(g)"
        ),
    ];
    for statement in statements {
        session.execute_one(&statement).unwrap();
    }
}

/// A random bound for column `column`: a value within or beyond its values, now and then NULL.
fn value(rng: &mut fastrand::Rng, column: &str) -> String {
    if rng.u32(0..30) == 0 {
        return "NULL".into();
    }
    match column {
        "k" => rng.i64(-100..5500).to_string(),
        "b" => rng.i64(-50..2700).to_string(),
        _ => format!("'w{:04}'", rng.u32(0..6100)),
    }
}

/// `template` with its parameters `$1`, `$2`, … written as `values`.
fn with_values(template: &str, values: &[String]) -> String {
    let mut sql = template.to_string();
    // From the last, so `$1` does not match the start of `$10`.
    for (i, value) in values.iter().enumerate().rev() {
        sql = sql.replace(&format!("${}", i + 1), value);
    }
    sql
}

fn rows(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    session.execute_one(sql).unwrap_or_else(|e| panic!("{sql}: {}", e.message)).rows
}

/// A WHERE clause bounding `column` by parameters (and now and then a constant, or another condition).
fn range_filter(rng: &mut fastrand::Rng, column: &str) -> (String, usize) {
    let (filter, params) = match rng.u32(0..7) {
        0 => (format!("{column} BETWEEN $1 AND $2"), 2),
        1 => (format!("{column} >= $1 AND {column} < $2"), 2),
        2 => (format!("$1 < {column} AND {column} <= $2"), 2),
        3 => (format!("{column} > $1"), 1),
        4 => (format!("{column} <= $1"), 1),
        5 => (format!("{column} >= $1 AND {column} >= $2 AND {column} < $3"), 3),
        _ => {
            let constant = std::iter::repeat_with(|| value(rng, column)).find(|v| v != "NULL").unwrap();
            (format!("{column} > $1 AND {column} < {constant}"), 1)
        }
    };
    match rng.u32(0..4) {
        0 => (format!("{filter} AND v <> 3"), params),
        1 => (format!("{filter} AND k % 2 = 0"), params),
        _ => (filter, params),
    }
}

#[test]
fn a_prepared_range_returns_what_its_constants_return_looked_up_or_scanned() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    table(&mut session, "tp");
    let mut rng = fastrand::Rng::with_seed(0x0052_414e_4745);
    let (mut looked_up, mut scanned) = (0, 0);
    for case in 0..300 {
        let column = ["k", "b", "s"][rng.usize(0..3)];
        let (filter, params) = range_filter(&mut rng, column);
        let template = match rng.u32(0..3) {
            0 => format!("SELECT k, b, s FROM tp WHERE {filter} ORDER BY k"),
            1 => format!("SELECT count(*), sum(v), min(k), max(k), min(s) FROM tp WHERE {filter}"),
            _ => format!("SELECT v, count(*) FROM tp WHERE {filter} GROUP BY v ORDER BY v"),
        };
        let values: Vec<String> = (0..params).map(|_| value(&mut rng, column)).collect();
        // Narrow ranges now and then, so the lookup is taken as often as the scan.
        let values = match (params, values.first().map(|v| v.as_str())) {
            (2, Some(first)) if first != "NULL" && column != "s" && rng.bool() => {
                let low: i64 = first.parse().unwrap();
                vec![first.to_string(), (low + rng.i64(0..30)).to_string()]
            }
            _ => values,
        };
        let name = format!("p{case}");
        session.execute_one(&format!("PREPARE {name} AS {template}")).unwrap();
        let execute = format!("EXECUTE {name}({})", values.join(", "));
        let constants = with_values(&template, &values);
        assert_eq!(rows(&mut session, &execute), rows(&mut session, &constants), "{execute}: {template}");
        let plan: Vec<String> =
            rows(&mut session, &format!("EXPLAIN {execute}")).iter().map(|r| r[0].to_string()).collect();
        if plan.iter().any(|line| line.contains(&format!("Index Lookup on tp using {column}"))) {
            looked_up += 1;
        } else if plan.iter().any(|line| line.contains("Parallel Scan on tp")) {
            scanned += 1;
        }
    }
    // The table's 5 300 rows let a lookup find at most 16 of them: both ways must have been taken often.
    assert!(looked_up >= 30 && scanned >= 30, "{looked_up} lookups, {scanned} scans");
    // What the rows say, read one by one: the keys of `b BETWEEN 100 AND 110`.
    session.execute_one("PREPARE keys_of AS SELECT k FROM tp WHERE b BETWEEN $1 AND $2 ORDER BY k").unwrap();
    let all = rows(&mut session, "SELECT k, b FROM tp ORDER BY k");
    let expected: Vec<Vec<Value>> = all
        .iter()
        .filter(|row| matches!(row[1], Value::Int(b) if (100..=110).contains(&b)))
        .map(|row| vec![row[0].clone()])
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(rows(&mut session, "EXECUTE keys_of(100, 110)"), expected);
}

#[test]
fn a_change_bounded_by_parameters_changes_what_one_bounded_by_constants_does() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    // `by_params` is changed through prepared statements, `by_constants` by the same statements written out.
    table(&mut session, "by_params");
    table(&mut session, "by_constants");
    let mut rng = fastrand::Rng::with_seed(0x0043_4841_4e47);
    for case in 0..60 {
        let column = ["k", "b", "s"][rng.usize(0..3)];
        let (filter, params) = range_filter(&mut rng, column);
        let template = if rng.bool() {
            format!("UPDATE {{table}} SET v = v + 100, b = b + 1 WHERE {filter}")
        } else {
            format!("DELETE FROM {{table}} WHERE {filter}")
        };
        let values: Vec<String> = (0..params).map(|_| value(&mut rng, column)).collect();
        let name = format!("c{case}");
        session.execute_one(&format!("PREPARE {name} AS {}", template.replace("{table}", "by_params"))).unwrap();
        let by_params = session.execute_one(&format!("EXECUTE {name}({})", values.join(", "))).unwrap();
        let by_constants =
            session.execute_one(&with_values(&template.replace("{table}", "by_constants"), &values)).unwrap();
        assert_eq!(by_params.tag, by_constants.tag, "{template} with {values:?}");
        assert_eq!(
            rows(&mut session, "SELECT * FROM by_params ORDER BY k"),
            rows(&mut session, "SELECT * FROM by_constants ORDER BY k"),
            "{template} with {values:?}"
        );
    }
    assert!(session.execute_one("SELECT count(*) FROM by_params").unwrap().rows[0][0] != Value::Int(5300));
}
