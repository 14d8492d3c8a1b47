//! The thesis's tables: `TBL_0` and `TBL_1`, columns `C0`..`C6` INTEGER, `C0` the primary key 1..N, the others
//! uniform in 1..N (thesis §5.1, figure 8).

use std::sync::atomic::AtomicU64;

use numadb_execution::load::generate_thesis_rows;
use numadb_execution::{ExecError, sqlstate};
use numadb_storage::{ColumnDef, DataType, Table, TableOptions, TablePlacement};

use crate::database::Session;

/// The thesis tables' names.
pub const THESIS_TABLES: [&str; 2] = ["TBL_0", "TBL_1"];

/// Creates and fills `TBL_0` and `TBL_1` with `rows` rows each. Without explicit placements, table `i` goes on the
/// `i`-th node with CPUs (round-robin), as the thesis put TBL_0 on sub-domain 0a and TBL_1 on 0b.
pub fn load_thesis_tables(
    session: &mut Session,
    rows: u64,
    seed: u64,
    partition_rows: Option<usize>,
    progress: Option<&AtomicU64>,
) -> Result<(), ExecError> {
    if rows == 0 || rows > i32::MAX as u64 {
        return Err(ExecError::new(sqlstate::INVALID_PARAMETER_VALUE, format!("{rows} rows: need 1 to {}", i32::MAX)));
    }
    let db = session.database().clone();
    let nodes: Vec<u32> = db.topology().nodes_with_cpus().iter().collect();
    let scheduler = db.scheduler(session.settings().scheduler_config())?;
    let unobserved = AtomicU64::new(0);
    let progress = progress.unwrap_or(&unobserved);
    for (i, name) in THESIS_TABLES.iter().enumerate() {
        if db.catalog().table(name).is_some() {
            return Err(ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{name}\" already exists"))
                .with_hint("DROP TABLE \"TBL_0\", \"TBL_1\" first"));
        }
        let columns = (0..7).map(|c| ColumnDef::new(format!("C{c}"), DataType::Integer, c != 0)).collect();
        let placement = TablePlacement::Node(nodes[i % nodes.len()]);
        let mut options = TableOptions { placement, ..TableOptions::default() };
        if let Some(rows) = partition_rows {
            options.partition_rows = rows;
        }
        let table = Table::new(name, columns, Some(0), options)?;
        db.catalog().add(table);
        let table = db.catalog().table(name).expect("just added");
        if let Err(error) = generate_thesis_rows(&scheduler, &table, rows, seed.wrapping_add(i as u64), progress) {
            db.catalog().remove(name);
            return Err(error);
        }
    }
    Ok(())
}
