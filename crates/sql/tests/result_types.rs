//! Every value a query returns carries its column's declared type: clients that read results in binary format
//! decode by the column type, so an integer in a DOUBLE PRECISION column would be read as garbage.

use numadb_sql::Database;
use numadb_storage::{DataType, Value};

fn value_fits(value: &Value, data_type: DataType) -> bool {
    match (value, data_type) {
        (Value::Null, _) => true,
        (Value::Int(v), DataType::Integer) => i32::try_from(*v).is_ok(),
        (Value::Int(_), DataType::BigInt) => true,
        (Value::Double(_), DataType::Double) => true,
        (Value::Text(_), DataType::Text) => true,
        (Value::Bool(_), DataType::Boolean) => true,
        _ => false,
    }
}

#[test]
fn values_carry_their_columns_types() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    for statement in [
        "CREATE TABLE t (a INTEGER, b BIGINT, d DOUBLE PRECISION, s TEXT, f BOOLEAN)",
        "INSERT INTO t VALUES (1, 10, 1.5, 'x', true), (-2, NULL, NULL, NULL, false), (NULL, 30, 2.0, 'y', NULL)",
    ] {
        session.execute_one(statement).unwrap();
    }
    let queries = [
        "SELECT a FROM t UNION ALL SELECT d FROM t",
        "SELECT round(a), round(d, 1), floor(b), ceil(a), sign(b), trunc(a), abs(a), abs(b), abs(d) FROM t",
        "SELECT sqrt(abs(a)), power(a, 2), a ^ b, mod(b, 3), mod(a, 2), exp(a), log(2, b), pi() FROM t",
        "SELECT length(s), strpos(s, 'x'), position('y' in s), ascii(s), starts_with(s, 'x') FROM t",
        "SELECT concat(a, d, f), concat_ws(s, a), left(s, a), substring(s from a), lpad(s, a), trim(s) FROM t",
        "SELECT a FROM t UNION ALL SELECT b FROM t UNION ALL SELECT a FROM t ORDER BY 1",
        "SELECT b, a FROM t UNION ALL SELECT a, d FROM t",
        "SELECT a FROM t UNION SELECT d FROM t",
        "SELECT CASE WHEN f THEN a ELSE d END, CASE WHEN f THEN a ELSE b END, CASE WHEN f THEN 1 END FROM t",
        "SELECT coalesce(a, d), coalesce(a, b), coalesce(d, 0), greatest(a, b), least(a, 1.5), nullif(a, 1) FROM t",
        "SELECT nullif(a, d), nullif(b, d), nullif(a, b), nullif(d, a) FROM t",
        "SELECT abs(a), abs(b), abs(d), length(s), lower(s), a IS DISTINCT FROM 1 FROM t",
        "SELECT sum(a), sum(d), avg(a), count(DISTINCT a), sum(DISTINCT a), min(s), max(b) FROM t",
        "SELECT a + b, a * 2, a + d, -a, a % 2, b / 2 FROM t",
    ];
    for query in queries {
        let output = session.execute_one(query).unwrap_or_else(|e| panic!("{query}: {e:?}"));
        assert!(!output.rows.is_empty(), "{query}");
        for row in &output.rows {
            for (value, column) in row.iter().zip(&output.columns) {
                assert!(
                    value_fits(value, column.data_type),
                    "{query}: {value:?} in column {} of type {}",
                    column.name,
                    column.data_type
                );
            }
        }
    }
}

#[test]
fn result_columns_are_named_as_postgresql_names_them() {
    let database = Database::new().unwrap();
    let mut session = database.session();
    let output = session
        .execute_one("SELECT substr('abc', 2), substring('abc' FROM 2), substring('abc', 2), - - 1, 1 AS one")
        .unwrap();
    let names: Vec<&str> = output.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["substr", "substring", "substring", "?column?", "one"]);
    // A cast is named by its type's internal name; a COLLATE clause keeps its operand's name.
    let output = session
        .execute_one(
            "SELECT 1::integer, 1::smallint, 1::bigint, 1::double precision, 1::real, 1::float(24), 1::float,              'a'::varchar(3), 'a'::char(3), true::boolean, s COLLATE \"C\" FROM (SELECT 'x' AS s) t",
        )
        .unwrap();
    let names: Vec<&str> = output.columns.iter().map(|c| c.name.as_str()).collect();
    let want = ["int4", "int2", "int8", "float8", "float4", "float4", "float8", "varchar", "bpchar", "bool", "s"];
    assert_eq!(names, want);
}
