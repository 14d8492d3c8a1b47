//! Loading data in parallel: each partition is generated (or encoded) by a task that prefers the domain of the
//! node the partition is placed on, so the bytes are written by a worker near their memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use numadb_scheduler::{Scheduler, TaskGraph, TaskSpec};
use numadb_storage::{ColumnInput, Partition, Table};

use crate::error::{ExecError, sqlstate};

/// SplitMix64: a small, fast, well-mixed generator; seeded per (seed, partition, column) so that generated data
/// does not depend on which worker ran which partition or in what order.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64, partition: u64, column: u64) -> Self {
        let mut mixer = SplitMix64(
            seed ^ partition.wrapping_mul(0xA076_1D64_78BD_642F) ^ column.wrapping_mul(0xE703_7ED1_A0B4_28DB),
        );
        mixer.next();
        mixer
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `1..=n` (Lemire's multiply-shift with rejection: exactly uniform).
    fn uniform(&mut self, n: u64) -> u64 {
        let threshold = n.wrapping_neg() % n;
        loop {
            let product = u128::from(self.next()) * u128::from(n);
            if (product as u64) >= threshold {
                return (product >> 64) as u64 + 1;
            }
        }
    }
}

/// Where a generator task leaves its partition (or why it could not build it).
type PartitionSlot = Mutex<Option<Result<Partition, ExecError>>>;

/// Fills an empty table with the thesis schema's data: column 0 = row number + 1 (the primary key, 1..N),
/// every other column uniform in `1..=N`. Columns must be INTEGER or BIGINT. Finished rows are added to
/// `progress` as they are generated.
pub fn generate_thesis_rows(
    scheduler: &Scheduler,
    table: &Table,
    rows: u64,
    seed: u64,
    progress: &AtomicU64,
) -> Result<(), ExecError> {
    if table.rows() != 0 {
        return Err(ExecError::new(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("table \"{}\" is not empty", table.name()),
        ));
    }
    if table.columns().iter().any(|c| !c.data_type.is_integer()) {
        return Err(ExecError::new(sqlstate::DATATYPE_MISMATCH, "the thesis generator fills integer columns only"));
    }
    if rows > u64::from(u32::MAX)
        || (rows > i32::MAX as u64 && table.columns().iter().any(|c| c.data_type == numadb_storage::DataType::Integer))
    {
        return Err(ExecError::new(
            sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
            format!("{rows} rows do not fit the table's integer columns"),
        ));
    }
    let (first_index, first_row) = table.next_partition_slot()?;
    let per_partition = table.partition_rows() as u64;
    let partitions = rows.div_ceil(per_partition) as usize;
    let slots: Arc<Vec<PartitionSlot>> = Arc::new((0..partitions).map(|_| Mutex::new(None)).collect());
    let schema: Arc<Vec<numadb_storage::ColumnDef>> = Arc::new(table.columns().to_vec());
    let domains = scheduler.domains();
    let progress_counter = Arc::new(AtomicU64::new(0));
    let mut graph = TaskGraph::new();
    for p in 0..partitions {
        let index = first_index + p;
        let start = first_row + p as u64 * per_partition;
        let count = per_partition.min(rows - p as u64 * per_partition) as usize;
        let policies = table.policies_for_partition(index);
        let preferred =
            table.placement(None).intended_node(index).and_then(|node| domains.domain_of_node(node)).map(|d| d.id);
        let slots = Arc::clone(&slots);
        let schema = Arc::clone(&schema);
        let task_progress = Arc::clone(&progress_counter);
        graph.add(
            TaskSpec::new(move |_| {
                let columns = (0..schema.len())
                    .map(|c| {
                        if c == 0 {
                            ColumnInput::Ints((start as i64 + 1..start as i64 + 1 + count as i64).collect())
                        } else {
                            let mut rng = SplitMix64::new(seed, index as u64, c as u64);
                            ColumnInput::Ints((0..count).map(|_| rng.uniform(rows) as i64).collect())
                        }
                    })
                    .collect();
                let built = Partition::build(index, start, &schema, columns, &policies).map_err(ExecError::from);
                *slots[p].lock().unwrap_or_else(|e| e.into_inner()) = Some(built);
                task_progress.fetch_add(count as u64, Ordering::Relaxed);
                Ok(())
            })
            .prefer_maybe(preferred),
        );
    }
    let query = scheduler.submit(graph);
    // Relay progress to the caller's counter (which it may share between loads) while the tasks run.
    let mut relayed = 0;
    let mut relay = || {
        let now = progress_counter.load(Ordering::Relaxed);
        progress.fetch_add(now - relayed, Ordering::Relaxed);
        relayed = now;
    };
    while !query.wait_for(std::time::Duration::from_millis(50)) {
        relay();
    }
    relay();
    query.wait()?;
    let mut built = Vec::with_capacity(partitions);
    for slot in slots.iter() {
        match slot.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(Ok(partition)) => built.push(partition),
            Some(Err(error)) => return Err(error),
            None => return Err(ExecError::internal("a generator task produced nothing")),
        }
    }
    table.append_partitions(built)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_uniform_and_in_range() {
        let mut rng = SplitMix64::new(42, 0, 1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let v = rng.uniform(10);
            assert!((1..=10).contains(&v));
            counts[v as usize - 1] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
        let a: Vec<u64> = {
            let mut r = SplitMix64::new(7, 3, 2);
            (0..5).map(|_| r.next()).collect()
        };
        let b: Vec<u64> = {
            let mut r = SplitMix64::new(7, 3, 2);
            (0..5).map(|_| r.next()).collect()
        };
        assert_eq!(a, b);
    }
}
