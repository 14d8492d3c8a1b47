//! The `numadb` system schema: the machine, the placement of every table, the schedulers' counters and the
//! last statements' byte matrices, as tables any client can query.
//!
//! Each view is materialised when a statement names it, into a small temporary table that the normal scan path
//! reads, so every SQL feature works on views too.

use std::sync::Arc;

use numadb_execution::{ExecError, sqlstate};
use numadb_storage::{ColumnDef, DataType, Table, TableOptions, Value};

use crate::database::Database;

fn column(name: &str, data_type: DataType) -> ColumnDef {
    ColumnDef::new(name, data_type, true)
}

fn materialise(name: &str, columns: Vec<ColumnDef>, rows: Vec<Vec<Value>>) -> Result<Arc<Table>, ExecError> {
    let table = Table::new(name, columns, None, TableOptions::default())?;
    table.insert(rows)?;
    Ok(Arc::new(table))
}

fn int(v: impl TryInto<i64>) -> Value {
    v.try_into().map(Value::Int).unwrap_or(Value::Null)
}

/// The names of the system views.
pub const VIEWS: [&str; 8] =
    ["nodes", "domains", "tables", "placement", "scheduler", "traffic", "node_traffic", "queries"];

/// How `numadb.scheduler` and `numadb.traffic` name a scheduler: its settings, as `SET` would take them.
pub fn scheduler_label(config: &numadb_scheduler::SchedulerConfig) -> String {
    format!(
        "stealing={} binding={} workers={} domains={}",
        config.stealing,
        config.binding,
        config.layout,
        config.granularity.name()
    )
}

/// A system view by schema and name.
pub fn view(db: &Database, schema: &str, name: &str) -> Result<Arc<Table>, ExecError> {
    if schema != "numadb" {
        return Err(ExecError::new(sqlstate::UNDEFINED_TABLE, format!("relation \"{schema}.{name}\" does not exist")));
    }
    let topology = db.topology();
    match name {
        "nodes" => {
            let rows = topology
                .nodes
                .iter()
                .map(|node| {
                    let distances = topology
                        .distances
                        .nodes
                        .iter()
                        .map(|&to| topology.distances.get(node.id, to).map_or("?".into(), |d| d.to_string()))
                        .collect::<Vec<_>>()
                        .join(" ");
                    vec![
                        int(node.id),
                        Value::text(&node.cpus.to_list_string()),
                        int(node.memory_bytes),
                        Value::text(&distances),
                    ]
                })
                .collect();
            materialise(
                "nodes",
                vec![
                    column("node", DataType::Integer),
                    column("cpus", DataType::Text),
                    column("memory_bytes", DataType::BigInt),
                    column("distances", DataType::Text),
                ],
                rows,
            )
        }
        "domains" => {
            let mut rows = Vec::new();
            for granularity in numadb_topology::DomainGranularity::ALL {
                let Ok(domains) = topology.domains(granularity) else { continue };
                for domain in &domains.domains {
                    let neighbours = domain
                        .by_distance
                        .iter()
                        .map(|n| format!("{}@{}", n.domain, n.distance))
                        .collect::<Vec<_>>()
                        .join(" ");
                    rows.push(vec![
                        Value::text(granularity.name()),
                        int(domain.id),
                        Value::text(&domain.name),
                        Value::text(&domain.cpus.to_list_string()),
                        Value::text(&domain.memory_nodes.to_list_string()),
                        Value::text(&neighbours),
                    ]);
                }
            }
            materialise(
                "domains",
                vec![
                    column("granularity", DataType::Text),
                    column("domain", DataType::Integer),
                    column("name", DataType::Text),
                    column("cpus", DataType::Text),
                    column("memory_nodes", DataType::Text),
                    column("by_distance", DataType::Text),
                ],
                rows,
            )
        }
        "tables" => {
            let rows = db
                .catalog()
                .tables()
                .iter()
                .map(|table| {
                    let (bytes, sealed_rows) = table.column_bytes();
                    let total: u64 = bytes.iter().sum();
                    let snapshot = table.snapshot();
                    vec![
                        Value::text(table.name()),
                        int(table.rows()),
                        int(snapshot.partitions.len()),
                        int(snapshot.delta.rows()),
                        Value::text(&table.placement(None).to_string()),
                        int(total),
                        if sealed_rows > 0 { Value::Double(total as f64 / sealed_rows as f64) } else { Value::Null },
                        int(snapshot.indexes.iter().map(|i| i.bytes()).sum::<u64>()),
                    ]
                })
                .collect();
            materialise(
                "tables",
                vec![
                    column("table_name", DataType::Text),
                    column("rows", DataType::BigInt),
                    column("partitions", DataType::Integer),
                    column("unsealed_rows", DataType::BigInt),
                    column("placement", DataType::Text),
                    column("bytes", DataType::BigInt),
                    column("bytes_per_row", DataType::Double),
                    column("index_bytes", DataType::BigInt),
                ],
                rows,
            )
        }
        "placement" => {
            let mut rows = Vec::new();
            for table in db.catalog().tables() {
                for chunk in table.placement_report()? {
                    let per_node = chunk
                        .pages
                        .per_node
                        .iter()
                        .map(|(node, pages)| format!("{node}:{pages}"))
                        .collect::<Vec<_>>()
                        .join(" ");
                    let dominant = chunk.pages.per_node.iter().max_by_key(|entry| *entry.1).map(|entry| *entry.0);
                    rows.push(vec![
                        Value::text(table.name()),
                        int(chunk.partition),
                        Value::text(&chunk.column),
                        int(chunk.rows),
                        int(chunk.bytes),
                        Value::text(&chunk.policy),
                        int(chunk.pages.pages),
                        Value::text(&per_node),
                        int(chunk.pages.unknown),
                        dominant.map_or(Value::Null, int),
                    ]);
                }
            }
            materialise(
                "placement",
                vec![
                    column("table_name", DataType::Text),
                    column("partition", DataType::Integer),
                    column("column_name", DataType::Text),
                    column("rows", DataType::BigInt),
                    column("bytes", DataType::BigInt),
                    column("policy", DataType::Text),
                    column("pages", DataType::BigInt),
                    column("pages_per_node", DataType::Text),
                    column("unknown_pages", DataType::BigInt),
                    column("node", DataType::Integer),
                ],
                rows,
            )
        }
        "scheduler" => {
            let mut rows = Vec::new();
            for (config, scheduler) in db.schedulers() {
                let label = scheduler_label(&config);
                for domain in scheduler.counters().domains {
                    let by_distance = domain
                        .tasks_stolen_in_by_distance
                        .iter()
                        .map(|(d, n)| format!("{d}:{n}"))
                        .collect::<Vec<_>>()
                        .join(" ");
                    rows.push(vec![
                        Value::text(&label),
                        int(domain.domain),
                        Value::text(&domain.name),
                        int(domain.workers),
                        int(domain.tasks_run),
                        int(domain.tasks_stolen_in),
                        Value::text(&by_distance),
                        int(domain.tasks_stolen_out),
                        Value::Double(domain.idle_ns as f64 / 1e6),
                        Value::Double(domain.queue_length_mean),
                        int(domain.queue_length_max),
                    ]);
                }
            }
            materialise(
                "scheduler",
                vec![
                    column("scheduler", DataType::Text),
                    column("domain", DataType::Integer),
                    column("name", DataType::Text),
                    column("workers", DataType::Integer),
                    column("tasks_run", DataType::BigInt),
                    column("tasks_stolen_in", DataType::BigInt),
                    column("stolen_by_distance", DataType::Text),
                    column("tasks_stolen_out", DataType::BigInt),
                    column("idle_ms", DataType::Double),
                    column("queue_length_mean", DataType::Double),
                    column("queue_length_max", DataType::BigInt),
                ],
                rows,
            )
        }
        "traffic" => {
            // Cumulative since each scheduler started: clients take differences (the benchmark driver does).
            let mut rows = Vec::new();
            for (config, scheduler) in db.schedulers() {
                let label = scheduler_label(&config);
                let matrix = scheduler.counters().bytes_read;
                let domains = scheduler.domains();
                for (row, cells) in matrix.bytes.iter().enumerate() {
                    for (&node, &bytes) in matrix.memory_nodes.iter().zip(cells) {
                        let local = domains.domains.get(row).is_some_and(|d| d.memory_nodes.contains(node));
                        rows.push(vec![
                            Value::text(&label),
                            int(row),
                            Value::text(matrix.worker_domains.get(row).map_or("", String::as_str)),
                            int(node),
                            int(bytes),
                            Value::Bool(local),
                        ]);
                    }
                }
            }
            materialise(
                "traffic",
                vec![
                    column("scheduler", DataType::Text),
                    column("domain", DataType::Integer),
                    column("domain_name", DataType::Text),
                    column("node", DataType::Integer),
                    column("bytes_read", DataType::BigInt),
                    column("local", DataType::Boolean),
                ],
                rows,
            )
        }
        "node_traffic" => {
            // The same bytes by the node of the CPU that read them: locality whatever the domains.
            let mut rows = Vec::new();
            for (config, scheduler) in db.schedulers() {
                let label = scheduler_label(&config);
                let matrix = scheduler.counters().bytes_read_by_cpu_node;
                for (row, cells) in matrix.bytes.iter().enumerate() {
                    let cpu_node =
                        matrix.worker_domains.get(row).and_then(|n| n.strip_prefix("node")?.parse::<u32>().ok());
                    for (&node, &bytes) in matrix.memory_nodes.iter().zip(cells) {
                        rows.push(vec![
                            Value::text(&label),
                            cpu_node.map_or(Value::Null, int),
                            int(node),
                            int(bytes),
                            Value::Bool(cpu_node == Some(node)),
                        ]);
                    }
                }
            }
            materialise(
                "node_traffic",
                vec![
                    column("scheduler", DataType::Text),
                    column("cpu_node", DataType::Integer),
                    column("node", DataType::Integer),
                    column("bytes_read", DataType::BigInt),
                    column("local", DataType::Boolean),
                ],
                rows,
            )
        }
        "queries" => {
            let rows = db
                .query_log()
                .into_iter()
                .map(|entry| {
                    let total = entry.bytes.as_ref().map_or(0, |m| m.total());
                    let matrix = entry.bytes.as_ref().map_or(String::new(), |m| {
                        m.worker_domains
                            .iter()
                            .zip(&m.bytes)
                            .map(|(domain, row)| {
                                let cells = m
                                    .memory_nodes
                                    .iter()
                                    .zip(row)
                                    .map(|(n, b)| format!("n{n}:{b}"))
                                    .collect::<Vec<_>>()
                                    .join(",");
                                format!("{domain}[{cells}]")
                            })
                            .collect::<Vec<_>>()
                            .join(" ")
                    });
                    vec![
                        int(entry.id),
                        int(entry.session),
                        Value::text(&entry.statement),
                        Value::Double(entry.elapsed.as_secs_f64() * 1e3),
                        int(entry.tasks.iter().sum::<u64>()),
                        int(entry.stolen),
                        int(total),
                        int(entry.local_bytes),
                        int(total - entry.local_bytes.min(total)),
                        Value::text(&matrix),
                    ]
                })
                .collect();
            materialise(
                "queries",
                vec![
                    column("query_id", DataType::BigInt),
                    column("session", DataType::BigInt),
                    column("statement", DataType::Text),
                    column("elapsed_ms", DataType::Double),
                    column("tasks", DataType::BigInt),
                    column("tasks_stolen", DataType::BigInt),
                    column("bytes_read", DataType::BigInt),
                    column("local_bytes", DataType::BigInt),
                    column("remote_bytes", DataType::BigInt),
                    column("byte_matrix", DataType::Text),
                ],
                rows,
            )
        }
        _ => Err(ExecError::new(sqlstate::UNDEFINED_TABLE, format!("relation \"numadb.{name}\" does not exist"))
            .with_hint(format!("the numadb schema has {}", VIEWS.join(", ")))),
    }
}
