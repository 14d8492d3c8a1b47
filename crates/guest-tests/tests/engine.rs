//! The engine on a real multi-node kernel: where data is placed, where scans run, and the byte matrices that
//! EXPLAIN ANALYZE reports must come out exactly as the configuration implies.

use numadb_sql::{Database, Session};
use numadb_storage::Value;
use numadb_topology::Topology;

const ROWS: u64 = 40_000;
const PARTITION_ROWS: u64 = 4096;

fn nodes_with_cpus() -> Vec<u32> {
    Topology::from_system().unwrap().nodes_with_cpus().iter().collect()
}

fn session() -> Session {
    Database::new().unwrap().session()
}

fn run(session: &mut Session, sql: &str) -> Vec<Vec<Value>> {
    session.execute_one(sql).unwrap_or_else(|e| panic!("{sql}: {}: {}", e.sqlstate, e.message)).rows
}

/// Creates `t` with `ROWS` rows (k = 1..ROWS, v = k % 100) placed by `placement`.
fn load(session: &mut Session, placement: &str) {
    run(
        session,
        &format!(
            "CREATE TABLE t (k INTEGER PRIMARY KEY, v INTEGER) WITH (numa_placement = '{placement}', partition_rows = {PARTITION_ROWS})"
        ),
    );
    let mut values = Vec::new();
    for k in 1..=ROWS {
        values.push(format!("({k}, {})", k % 100));
        if values.len() == 5000 {
            run(session, &format!("INSERT INTO t VALUES {}", values.join(", ")));
            values.clear();
        }
    }
    session.database().catalog().table("t").unwrap().seal().unwrap();
}

/// The byte matrix of the last query: (running domain name, node, bytes) for every non-zero cell.
fn matrix(session: &Session) -> Vec<(String, u32, u64)> {
    let report = session.last_result().unwrap().report.as_ref().expect("tasks ran").bytes_read.clone();
    let mut cells = Vec::new();
    for (row, name) in report.worker_domains.iter().enumerate() {
        for (column, &node) in report.memory_nodes.iter().enumerate() {
            let bytes = report.bytes[row][column];
            if bytes > 0 {
                cells.push((name.clone(), node, bytes));
            }
        }
    }
    cells
}

#[test]
fn a_table_on_node_0_scanned_by_workers_only_on_node_1_reads_100_percent_remote() {
    let nodes = nodes_with_cpus();
    let (data_node, worker_node) = (nodes[0], nodes[1]);
    for stealing in ["off", "any"] {
        let mut session = session();
        load(&mut session, &format!("node({data_node})"));
        run(&mut session, &format!("SET numadb.workers = 'domain({})'", worker_node));
        run(&mut session, &format!("SET numadb.stealing = '{stealing}'"));
        run(&mut session, "SET numadb.binding = 'always'");
        let rows = run(&mut session, "SELECT count(*), sum(v) FROM t WHERE v < 50");
        // v = k % 100 takes each value 0..99 400 times: 50 of them pass, summing to 400 * (0 + … + 49).
        assert_eq!(rows, vec![vec![Value::Int(20_000), Value::Int(490_000)]]);
        let cells = matrix(&session);
        assert!(!cells.is_empty());
        for (domain, node, _) in &cells {
            assert_eq!(*node, data_node, "stealing {stealing}: bytes read from node {node}: {cells:?}");
            assert_eq!(domain, &format!("node{worker_node}"), "stealing {stealing}: a task ran in {domain}: {cells:?}");
        }
    }
}

#[test]
fn binding_always_with_stealing_off_reads_100_percent_local() {
    let nodes = nodes_with_cpus();
    let list = nodes.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
    let mut session = session();
    load(&mut session, &format!("round_robin({list})"));
    run(&mut session, "SET numadb.stealing = 'off'");
    run(&mut session, "SET numadb.binding = 'always'");
    let rows = run(&mut session, "SELECT count(*) FROM t WHERE v >= 10");
    assert_eq!(rows, vec![vec![Value::Int(ROWS as i64 * 9 / 10)]]);
    let cells = matrix(&session);
    for (domain, node, _) in &cells {
        assert_eq!(domain, &format!("node{node}"), "remote bytes: {cells:?}");
    }
    let nodes_read: std::collections::BTreeSet<u32> = cells.iter().map(|c| c.1).collect();
    assert_eq!(nodes_read.len(), nodes.len(), "every node's partitions were scanned: {cells:?}");
}

#[test]
fn placement_is_verified_and_migration_keeps_answers_while_queries_run() {
    let nodes = nodes_with_cpus();
    let mut session = session();
    load(&mut session, &format!("node({})", nodes[0]));
    let placement = run(
        &mut session,
        &format!(
            "SELECT count(*) FROM numadb.placement WHERE table_name = 't' AND (node <> {} OR unknown_pages > 0)",
            nodes[0]
        ),
    );
    assert_eq!(placement, vec![vec![Value::Int(0)]]);
    let expected = run(&mut session, "SELECT count(*), sum(k), min(v), max(v) FROM t WHERE v BETWEEN 10 AND 60");
    let database = session.database().clone();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let mut reader = database.session();
            let mut queries = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let rows = run(&mut reader, "SELECT count(*), sum(k), min(v), max(v) FROM t WHERE v BETWEEN 10 AND 60");
                assert_eq!(rows, expected, "an answer changed while the table moved");
                queries += 1;
            }
            queries
        });
        for round in 0..6 {
            let node = nodes[(round + 1) % nodes.len()];
            run(&mut session, &format!("ALTER TABLE t NUMA NODE ('{node}')"));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.join().unwrap() > 0);
    });
    let last = nodes[6 % nodes.len()];
    let moved = run(
        &mut session,
        &format!(
            "SELECT count(*) FROM numadb.placement WHERE table_name = 't' AND (node <> {last} OR unknown_pages > 0)"
        ),
    );
    assert_eq!(moved, vec![vec![Value::Int(0)]], "every page is on node {last}");
}

#[test]
fn the_thesis_tables_go_on_their_own_nodes() {
    let nodes = nodes_with_cpus();
    let mut session = session();
    run(&mut session, "CALL numadb.load_thesis(50000, 1, 8192)");
    for (table, node) in [("TBL_0", nodes[0]), ("TBL_1", nodes[1 % nodes.len()])] {
        let rows = run(
            &mut session,
            &format!(
                "SELECT count(*) FROM numadb.placement WHERE table_name = '{table}' AND (node <> {node} OR unknown_pages > 0)"
            ),
        );
        assert_eq!(rows, vec![vec![Value::Int(0)]], "{table} is not all on node {node}");
    }
    let counts = run(&mut session, "SELECT count(*) FROM \"TBL_0\" UNION ALL SELECT count(*) FROM \"TBL_1\"");
    assert_eq!(counts, vec![vec![Value::Int(50000)], vec![Value::Int(50000)]]);
}
