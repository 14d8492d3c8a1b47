//! Tables: sealed, encoded, placed partitions plus a small unsealed delta of recent inserts.
//!
//! A table is appended to (the engine's workloads are read-mostly); UPDATE and DELETE rewrite it from the first
//! partition they change (see [`Table::rewrite`]). Bulk loads
//! build whole partitions (possibly on many threads, each on the node its partition goes to) and append them;
//! single-row inserts go to the *delta*, a plain row store that is encoded into a partition once it holds a
//! partition's worth of rows, or [`DELTA_SEAL_ROWS`] after an insert (a delta merge). Readers take a
//! [`TableSnapshot`]: the partitions and the delta as they were, shared by reference counting, so a scan never
//! blocks an insert and never sees half of one (the delta is copy-on-write: an insert copies it only while a
//! snapshot holds it).
//!
//! A table's name and columns are fixed for its life: ALTER TABLE makes an altered copy ([`Table::alter`]) that
//! takes the table's place, so what was bound to the old columns reads them, or writes nothing.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use numadb_placement::{PageHistogram, PlacementError, Policy};

use crate::column::ColumnChunk;
use crate::index::{DuplicateKey, Index, IndexKind};
use crate::placement::TablePlacement;
use crate::types::{ColumnDef, DataType, FitError, Value};

/// Default rows per partition: 4 Mi rows, so that a 26-bit column partition (13 MiB) is worth huge pages.
pub const PARTITION_ROWS_DEFAULT: usize = 1 << 22;
/// Delta rows that INSERTs may gather before they are sealed into a partition of their own (a delta merge, as
/// SAP HANA merges its delta into the main store past a size): the delta is scanned a row at a time, by one task,
/// with no encoding and no placement. 300 000 rows inserted 2 000 at a time, left in the delta, took 34 ms to
/// filter and aggregate and 21 ms to group; sealed, 7.5 and 1.3 ms (2 workers). Partitions this small are still
/// 32 blocks each, and sealing them takes an INSERT in 65 536 a few milliseconds.
pub const DELTA_SEAL_ROWS: usize = 1 << 16;
/// Smallest partition size accepted (one block).
pub const PARTITION_ROWS_MIN: usize = crate::bitpack::BLOCK_ROWS;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A unique index already holds the key.
    #[error(transparent)]
    Duplicate(#[from] DuplicateKey),
    /// NULL in a NOT NULL column.
    #[error("null value in column \"{column}\" of relation \"{table}\" violates not-null constraint")]
    NotNull {
        /// Table.
        table: String,
        /// Column.
        column: String,
    },
    /// A value its column's declared type refuses ([`ColumnDef::fit`]).
    #[error(transparent)]
    Fit(#[from] FitError),
    /// A row or value that does not fit the table.
    #[error("{0}")]
    Invalid(String),
    /// Memory placement failed.
    #[error(transparent)]
    Placement(#[from] PlacementError),
    /// The table was replaced by its altered copy ([`Table::alter`]) before this write could start: nothing was
    /// written, and the write may be made again to the table that took its place.
    #[error("relation \"{0}\" was altered by another statement while this one ran")]
    Retired(String),
    /// `ADD COLUMN … NOT NULL` whose value for the rows already there is NULL (PostgreSQL's words).
    #[error("column \"{column}\" of relation \"{table}\" contains null values")]
    ContainsNulls {
        /// Table.
        table: String,
        /// Column.
        column: String,
    },
}

/// One change of [`Table::alter`], made to the columns as the changes before it left them.
#[derive(Debug, Clone, PartialEq)]
pub enum ColumnChange {
    /// Appends a column; every row already there takes `value` (of the column's type, or NULL).
    Add {
        /// The new column.
        definition: ColumnDef,
        /// Its value in the rows already there.
        value: Value,
    },
    /// Removes the column at this position, with the indexes on it (the primary key's too); the columns after it
    /// move up by one.
    Drop(usize),
    /// Renames the column at this position.
    Rename(usize, String),
}

/// What [`Table::rewrite`] does with a row.
#[derive(Debug, Clone, PartialEq)]
pub enum RowChange {
    /// Leaves it as it is.
    Keep,
    /// Removes it.
    Delete,
    /// Puts these values (one per column, of the column's type) in its place.
    Replace(Vec<Value>),
}

/// The rows of an UPDATE or DELETE that an index finds ([`Table::rewrite_where`]).
#[derive(Debug, Clone, Copy)]
pub enum IndexedRows<'a> {
    /// Those whose key is one of these values (a NULL finds none).
    Keys(&'a [Value]),
    /// Those whose key lies within these bounds, through a sorted index.
    Range(Bound<&'a Value>, Bound<&'a Value>),
}

/// How a column's values are handed to [`Partition::build`].
pub enum ColumnInput {
    /// Any values of the column's type (or NULL).
    Values(Vec<Value>),
    /// Non-null integers (the fast path for generated data).
    Ints(Vec<i64>),
}

impl ColumnInput {
    fn len(&self) -> usize {
        match self {
            ColumnInput::Values(values) => values.len(),
            ColumnInput::Ints(values) => values.len(),
        }
    }
}

/// A contiguous range of a table's rows, encoded column by column.
pub struct Partition {
    index: usize,
    first_row: u64,
    rows: usize,
    /// Shared with the partition's copy in a table whose columns changed ([`Table::alter`]), which keeps the
    /// chunks of the columns that stay rather than encoding them again.
    columns: Vec<Arc<ColumnChunk>>,
}

impl Partition {
    /// Encodes a partition. `policies[c]` places column `c`.
    pub fn build(
        index: usize,
        first_row: u64,
        schema: &[ColumnDef],
        columns: Vec<ColumnInput>,
        policies: &[Policy],
    ) -> Result<Partition, StorageError> {
        if columns.len() != schema.len() || policies.len() != schema.len() {
            return Err(StorageError::Invalid(format!(
                "a partition needs {} columns, got {} (and {} placements)",
                schema.len(),
                columns.len(),
                policies.len()
            )));
        }
        let rows = columns.first().map_or(0, ColumnInput::len);
        if columns.iter().any(|c| c.len() != rows) {
            return Err(StorageError::Invalid("the columns of a partition differ in length".into()));
        }
        let mut chunks = Vec::with_capacity(schema.len());
        for ((definition, input), policy) in schema.iter().zip(columns).zip(policies) {
            let chunk = match input {
                ColumnInput::Ints(values) if definition.data_type.is_integer() => {
                    ColumnChunk::from_ints(definition.data_type, &values, policy)?
                }
                ColumnInput::Ints(values) => {
                    let values: Vec<Value> = values.into_iter().map(Value::Int).collect();
                    ColumnChunk::from_values(definition.data_type, &values, policy)?
                }
                ColumnInput::Values(values) => ColumnChunk::from_values(definition.data_type, &values, policy)?,
            };
            chunks.push(Arc::new(chunk));
        }
        Ok(Partition { index, first_row, rows, columns: chunks })
    }

    /// The partition's position in its table.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The table row id of the partition's first row.
    pub fn first_row(&self) -> u64 {
        self.first_row
    }

    /// Rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Blocks of 1024 rows (the last may be partial).
    pub fn blocks(&self) -> usize {
        self.rows.div_ceil(crate::bitpack::BLOCK_ROWS)
    }

    /// A column.
    pub fn column(&self, column: usize) -> &ColumnChunk {
        &self.columns[column]
    }

    /// All columns.
    pub fn columns(&self) -> &[Arc<ColumnChunk>] {
        &self.columns
    }

    /// The node holding most of the bytes of `columns` (by the last verification), if one holds more than half:
    /// the node a task scanning these columns should run near.
    pub fn home_node(&self, columns: &[usize]) -> Option<u32> {
        let mut weight: BTreeMap<u32, f64> = BTreeMap::new();
        let mut total = 0.0;
        for &column in columns {
            let chunk = &self.columns[column];
            let bytes = chunk.bytes() as f64;
            total += bytes;
            for &(node, share) in chunk.node_shares().iter() {
                *weight.entry(node).or_default() += share * bytes;
            }
        }
        weight.into_iter().filter(|&(_, w)| w * 2.0 > total).map(|(node, _)| node).next()
    }
}

/// Inserted rows not yet encoded into a partition.
#[derive(Clone, Default)]
pub struct Delta {
    first_row: u64,
    columns: Vec<Vec<Value>>,
}

impl Delta {
    /// Rows.
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, Vec::len)
    }

    /// The row id of the first row.
    pub fn first_row(&self) -> u64 {
        self.first_row
    }

    /// A column's values.
    pub fn column(&self, column: usize) -> &[Value] {
        &self.columns[column]
    }
}

/// A consistent view of a table for one statement.
#[derive(Clone)]
pub struct TableSnapshot {
    /// Sealed partitions, in row order.
    pub partitions: Vec<Arc<Partition>>,
    /// Rows inserted since the last sealed partition.
    pub delta: Arc<Delta>,
    /// The table's indexes.
    pub indexes: Vec<Arc<Index>>,
}

impl TableSnapshot {
    /// Rows in the snapshot.
    pub fn rows(&self) -> u64 {
        self.delta.first_row + self.delta.rows() as u64
    }

    /// The value at a row id.
    pub fn value(&self, row: u64, column: usize) -> Option<Value> {
        if row >= self.delta.first_row {
            return self.delta.columns.get(column)?.get((row - self.delta.first_row) as usize).cloned();
        }
        let position = self.partitions.partition_point(|p| p.first_row + p.rows as u64 <= row);
        let partition = self.partitions.get(position)?;
        Some(partition.column(column).value((row - partition.first_row) as usize))
    }

    /// The index on `column` (a unique one first, then sorted before hash), if any.
    pub fn index_on(&self, column: usize) -> Option<&Arc<Index>> {
        self.indexes_on(column).next()
    }

    /// A sorted index on `column` (the kind that finds ranges), if there is one.
    pub fn sorted_index_on(&self, column: usize) -> Option<&Arc<Index>> {
        self.indexes_on(column).find(|index| index.kind() == IndexKind::Sorted)
    }

    /// Indexes on `column`, unique ones first.
    pub fn indexes_on(&self, column: usize) -> impl Iterator<Item = &Arc<Index>> {
        let mut found: Vec<&Arc<Index>> = self.indexes.iter().filter(|i| i.column() == column).collect();
        found.sort_by_key(|i| (!i.is_unique(), i.kind() != IndexKind::Sorted));
        found.into_iter()
    }
}

struct TableState {
    partitions: Vec<Arc<Partition>>,
    delta: Arc<Delta>,
    indexes: Vec<Arc<Index>>,
    placement: TablePlacement,
    column_placement: BTreeMap<usize, TablePlacement>,
}

/// Checks that every node a placement names can hold this process's memory.
pub fn check_placement(placement: &TablePlacement) -> Result<(), StorageError> {
    let nodes = placement.nodes();
    if nodes.is_empty() {
        return Ok(());
    }
    let topology = numadb_placement::system_topology()?;
    for node in nodes.iter() {
        topology.check_memory_node(node).map_err(PlacementError::from)?;
    }
    Ok(())
}

/// Options of a new table.
#[derive(Debug, Clone)]
pub struct TableOptions {
    /// Rows per partition.
    pub partition_rows: usize,
    /// Placement of every column (unless overridden per column).
    pub placement: TablePlacement,
    /// Kind of the primary-key index.
    pub primary_key_index: IndexKind,
    /// Name of the primary-key index; `None` is `{table}_pkey` (which a table since renamed may still hold).
    pub primary_key_name: Option<String>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            partition_rows: PARTITION_ROWS_DEFAULT,
            placement: TablePlacement::OsDefault,
            primary_key_index: IndexKind::Sorted,
            primary_key_name: None,
        }
    }
}

/// Where one column of one partition is, as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkPlacement {
    /// Partition position.
    pub partition: usize,
    /// Column name.
    pub column: String,
    /// Rows.
    pub rows: usize,
    /// Encoded bytes.
    pub bytes: u64,
    /// The policy it was placed with.
    pub policy: String,
    /// Where its pages are.
    pub pages: PageHistogram,
}

/// A table.
///
/// Its name and columns never change: `ALTER TABLE` makes a new table ([`Table::alter`]) that the catalog puts in
/// its place, so a statement bound to a table's columns reads them as they were bound, and a snapshot stays
/// consistent with them.
pub struct Table {
    name: String,
    columns: Vec<ColumnDef>,
    primary_key: Option<usize>,
    /// The primary key's index (it keeps its name when the table is renamed, as PostgreSQL's does).
    primary_index: Option<String>,
    partition_rows: usize,
    state: RwLock<TableState>,
    /// Serialises writers (inserts, bulk appends, placement changes, ALTER TABLE); readers never take it.
    writer: Mutex<()>,
    /// Set, under `writer`, once an altered copy has taken the table's place: writers that get `writer` after
    /// that fail with [`StorageError::Retired`] rather than write to a table nobody will read again.
    retired: AtomicBool,
}

impl Table {
    /// A new, empty table.
    pub fn new(
        name: &str,
        columns: Vec<ColumnDef>,
        primary_key: Option<usize>,
        options: TableOptions,
    ) -> Result<Table, StorageError> {
        if columns.is_empty() {
            return Err(StorageError::Invalid(format!("table \"{name}\" needs at least one column")));
        }
        if let Some(column) = columns.iter().find(|c| c.data_type == DataType::Numeric) {
            return Err(StorageError::Invalid(format!(
                "column \"{}\" is numeric, which storage cannot hold",
                column.name
            )));
        }
        check_placement(&options.placement)?;
        if options.partition_rows < PARTITION_ROWS_MIN {
            return Err(StorageError::Invalid(format!("partitions must hold at least {PARTITION_ROWS_MIN} rows")));
        }
        let mut columns = columns;
        let mut indexes = Vec::new();
        let primary_index = primary_key.map(|_| options.primary_key_name.clone().unwrap_or(format!("{name}_pkey")));
        if let (Some(key), Some(index_name)) = (primary_key, &primary_index) {
            let definition = columns.get_mut(key).ok_or_else(|| StorageError::Invalid("no such key column".into()))?;
            if matches!(definition.data_type, DataType::Double | DataType::Boolean) {
                return Err(StorageError::Invalid(format!(
                    "a primary key on a {} column is not supported",
                    definition.data_type
                )));
            }
            definition.nullable = false;
            indexes.push(Arc::new(
                Index::build(
                    index_name,
                    key,
                    &definition.name,
                    options.primary_key_index,
                    true,
                    definition.data_type == DataType::Text,
                    std::iter::empty(),
                )
                .expect("an empty index has no duplicates"),
            ));
        }
        let delta = Delta { first_row: 0, columns: vec![Vec::new(); columns.len()] };
        Ok(Table {
            name: name.to_string(),
            columns,
            primary_key,
            primary_index,
            partition_rows: options.partition_rows,
            state: RwLock::new(TableState {
                partitions: Vec::new(),
                delta: Arc::new(delta),
                indexes,
                placement: options.placement,
                column_placement: BTreeMap::new(),
            }),
            writer: Mutex::new(()),
            retired: AtomicBool::new(false),
        })
    }

    /// The writers' lock, for a write to this table: [`StorageError::Retired`] once an altered copy has
    /// taken the table's place.
    fn writer(&self) -> Result<MutexGuard<'_, ()>, StorageError> {
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if self.retired.load(Ordering::Relaxed) {
            return Err(StorageError::Retired(self.name.clone()));
        }
        Ok(writer)
    }

    /// Whether an altered copy has taken the table's place ([`Table::alter`]).
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, TableState> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, TableState> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The columns.
    pub fn columns(&self) -> &[ColumnDef] {
        &self.columns
    }

    /// The position of a column by name.
    pub fn column_index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    /// The primary-key column.
    pub fn primary_key(&self) -> Option<usize> {
        self.primary_key
    }

    /// The name of the primary key's index (`t_pkey`, kept when the table is renamed, as PostgreSQL keeps it).
    pub fn primary_index(&self) -> Option<&str> {
        self.primary_index.as_deref()
    }

    /// Rows per partition.
    pub fn partition_rows(&self) -> usize {
        self.partition_rows
    }

    /// A consistent view for one statement.
    pub fn snapshot(&self) -> TableSnapshot {
        let state = self.read();
        TableSnapshot {
            partitions: state.partitions.clone(),
            delta: Arc::clone(&state.delta),
            indexes: state.indexes.clone(),
        }
    }

    /// Rows.
    pub fn rows(&self) -> u64 {
        let state = self.read();
        state.delta.first_row + state.delta.rows() as u64
    }

    /// The placement of the table (or of one column).
    pub fn placement(&self, column: Option<usize>) -> TablePlacement {
        let state = self.read();
        column.and_then(|c| state.column_placement.get(&c).cloned()).unwrap_or_else(|| state.placement.clone())
    }

    /// The policies for partition `index`, one per column.
    pub fn policies_for_partition(&self, index: usize) -> Vec<Policy> {
        let state = self.read();
        (0..self.columns.len())
            .map(|c| state.column_placement.get(&c).unwrap_or(&state.placement).policy_for_partition(index))
            .collect()
    }

    /// Checks and inserts rows (each with one value per column, already of the column's type). Returns the
    /// number inserted. All rows are checked before any is inserted: a failing statement inserts nothing.
    pub fn insert(&self, mut rows: Vec<Vec<Value>>) -> Result<u64, StorageError> {
        let _writer = self.writer()?;
        for row in &mut rows {
            if row.len() != self.columns.len() {
                return Err(StorageError::Invalid(format!(
                    "INSERT has {} values but table \"{}\" has {} columns",
                    row.len(),
                    self.name,
                    self.columns.len()
                )));
            }
            for (value, definition) in row.iter_mut().zip(&self.columns) {
                if value.is_null() && !definition.nullable {
                    return Err(StorageError::NotNull { table: self.name.clone(), column: definition.name.clone() });
                }
                definition.fit(value)?;
            }
        }
        let indexes = self.read().indexes.clone();
        for index in &indexes {
            let keys: Vec<Value> = rows.iter().map(|r| r[index.column()].clone()).collect();
            index.check_insert(&keys)?;
        }
        let inserted = rows.len() as u64;
        let mut state = self.write();
        let first_new = state.delta.first_row + state.delta.rows() as u64;
        for index in &indexes {
            let entries: Vec<(Value, u32)> = rows
                .iter()
                .enumerate()
                .filter(|(_, r)| !r[index.column()].is_null())
                .map(|(i, r)| (r[index.column()].clone(), (first_new + i as u64) as u32))
                .collect();
            index.insert(&entries);
        }
        let delta = Arc::make_mut(&mut state.delta);
        // Room for every row at once: grown by doubling, a million rows of 18 columns were copied some 20 times.
        delta.columns.iter_mut().for_each(|column| column.reserve(rows.len()));
        for row in rows {
            for (column, value) in delta.columns.iter_mut().zip(row) {
                column.push(value);
            }
        }
        while state.delta.rows() >= self.partition_rows {
            self.seal_locked(&mut state, self.partition_rows)?;
        }
        if state.delta.rows() >= DELTA_SEAL_ROWS {
            // Only an optimisation: the rows are inserted, and a seal that fails (its placement refused) leaves
            // them in the delta, where they are read as well, for a later insert to seal. The statement succeeded.
            let rows = state.delta.rows();
            let _ = self.seal_locked(&mut state, rows);
        }
        Ok(inserted)
    }

    /// Encodes up to `rows` delta rows into a new partition.
    fn seal_locked(&self, state: &mut TableState, rows: usize) -> Result<(), StorageError> {
        let take = rows.min(state.delta.rows());
        if take == 0 {
            return Ok(());
        }
        let index = state.partitions.len();
        let policies: Vec<Policy> = (0..self.columns.len())
            .map(|c| state.column_placement.get(&c).unwrap_or(&state.placement).policy_for_partition(index))
            .collect();
        let first_row = state.delta.first_row;
        // Encoded from the delta's values in place, and the rows taken out of the delta only once the partition
        // is built: a partition that fails to build (its placement refused) leaves them where they were, under
        // the indexes that point at them.
        let chunks = (self.columns.iter().zip(&state.delta.columns).zip(&policies))
            .map(|((definition, values), policy)| {
                ColumnChunk::from_values(definition.data_type, &values[..take], policy).map(Arc::new)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let partition = Partition { index, first_row, rows: take, columns: chunks };
        let delta = Arc::make_mut(&mut state.delta);
        delta.columns.iter_mut().for_each(|c| drop(c.drain(..take)));
        delta.first_row += take as u64;
        state.partitions.push(Arc::new(partition));
        Ok(())
    }

    /// Encodes all delta rows into a partition (after a load, so that everything is compressed and placed).
    pub fn seal(&self) -> Result<(), StorageError> {
        let _writer = match self.writer() {
            Ok(writer) => writer,
            // Nobody writes to the table any more; its altered copy has the rows and seals them itself.
            Err(StorageError::Retired(_)) => return Ok(()),
            Err(error) => return Err(error),
        };
        let mut state = self.write();
        let rows = state.delta.rows();
        self.seal_locked(&mut state, rows)
    }

    /// Where the next bulk-built partition starts: `(partition index, first row id)`. Seals the delta first.
    pub fn next_partition_slot(&self) -> Result<(usize, u64), StorageError> {
        self.seal()?;
        let state = self.read();
        Ok((state.partitions.len(), state.delta.first_row))
    }

    /// Appends partitions built with [`Partition::build`] from consecutive slots, checking keys against the
    /// unique indexes. When the table was empty, indexes are rebuilt from the data in one pass. Text lengths are
    /// the builder's to fit ([`ColumnDef::fit`]: COPY fits each value as it parses it).
    pub fn append_partitions(&self, partitions: Vec<Partition>) -> Result<u64, StorageError> {
        let _writer = self.writer()?;
        self.append_locked(partitions)
    }

    /// Appends partitions built aside (a COPY's, staged until its input ended), at whatever slots come next:
    /// the delta is sealed first and the partitions take the following positions and row ids. All or nothing,
    /// as [`Table::append_partitions`]. The partitions were placed for the slots expected when they were built;
    /// if other writers took those meanwhile, round-robin placement is off by as many partitions.
    pub fn append_staged(&self, mut partitions: Vec<Partition>) -> Result<u64, StorageError> {
        let _writer = self.writer()?;
        let (mut next_index, mut next_row) = {
            let mut state = self.write();
            let rows = state.delta.rows();
            self.seal_locked(&mut state, rows)?;
            (state.partitions.len(), state.delta.first_row)
        };
        for partition in &mut partitions {
            partition.index = next_index;
            partition.first_row = next_row;
            next_index += 1;
            next_row += partition.rows as u64;
        }
        self.append_locked(partitions)
    }

    /// The slot the next partition built aside will most likely take (the delta, if any, is sealed first).
    pub fn next_staged_slot(&self) -> usize {
        let state = self.read();
        state.partitions.len() + usize::from(state.delta.rows() > 0)
    }

    fn append_locked(&self, partitions: Vec<Partition>) -> Result<u64, StorageError> {
        let (mut next_index, mut next_row, indexes, was_empty) = {
            let state = self.read();
            (state.partitions.len(), state.delta.first_row, state.indexes.clone(), state.delta.first_row == 0)
        };
        if self.read().delta.rows() > 0 {
            return Err(StorageError::Invalid("seal the table before appending partitions".into()));
        }
        let mut added = 0u64;
        for partition in &partitions {
            if partition.index != next_index || partition.first_row != next_row {
                return Err(StorageError::Invalid(format!(
                    "partition {} starting at row {} does not follow partition {} ending at row {next_row}",
                    partition.index,
                    partition.first_row,
                    next_index.wrapping_sub(1)
                )));
            }
            next_index += 1;
            next_row += partition.rows as u64;
            added += partition.rows as u64;
        }
        if next_row > u64::from(u32::MAX) {
            return Err(StorageError::Invalid(format!("a table holds at most {} rows", u32::MAX)));
        }
        let keys_of = |column: usize| {
            partitions.iter().flat_map(move |p| {
                (0..p.rows).map(move |r| (p.column(column).value(r), (p.first_row + r as u64) as u32))
            })
        };
        let mut rebuilt = Vec::new();
        for index in &indexes {
            if was_empty {
                rebuilt.push(Arc::new(self.rebuild_index(index, keys_of(index.column()))?));
            } else {
                let entries: Vec<(Value, u32)> = keys_of(index.column()).filter(|(k, _)| !k.is_null()).collect();
                let keys: Vec<Value> = entries.iter().map(|(k, _)| k.clone()).collect();
                index.check_insert(&keys)?;
                rebuilt.push(Arc::clone(index));
            }
        }
        for (position, definition) in self.columns.iter().enumerate() {
            if !definition.nullable && partitions.iter().any(|p| p.column(position).has_nulls()) {
                return Err(StorageError::NotNull { table: self.name.clone(), column: definition.name.clone() });
            }
        }
        if !was_empty {
            for index in &indexes {
                let entries: Vec<(Value, u32)> = keys_of(index.column()).filter(|(k, _)| !k.is_null()).collect();
                index.insert(&entries);
            }
        }
        let mut state = self.write();
        state.partitions.extend(partitions.into_iter().map(Arc::new));
        Arc::make_mut(&mut state.delta).first_row = next_row;
        if was_empty {
            state.indexes = rebuilt;
        }
        Ok(added)
    }

    /// An index like `index` (name, column, kind, uniqueness) over these (key, row id) entries.
    fn rebuild_index(&self, index: &Index, entries: impl Iterator<Item = (Value, u32)>) -> Result<Index, StorageError> {
        let definition = &self.columns[index.column()];
        let text = definition.data_type == DataType::Text;
        Ok(Index::build(
            index.name(),
            index.column(),
            &definition.name,
            index.kind(),
            index.is_unique(),
            text,
            entries,
        )?)
    }

    /// TRUNCATE: removes every row at once (the indexes are emptied, the placement stays). Readers keep the
    /// snapshot they took; writers wait. Returns how many rows there were.
    pub fn truncate(&self) -> Result<u64, StorageError> {
        let _writer = self.writer()?;
        let snapshot = self.snapshot();
        let mut indexes = Vec::with_capacity(snapshot.indexes.len());
        for index in &snapshot.indexes {
            indexes.push(Arc::new(self.rebuild_index(index, std::iter::empty())?));
        }
        let mut state = self.write();
        state.partitions = Vec::new();
        state.delta = Arc::new(Delta { first_row: 0, columns: vec![Vec::new(); self.columns.len()] });
        state.indexes = indexes;
        Ok(snapshot.rows())
    }

    /// UPDATE and DELETE: `decide` sees every row, in row order, and says what becomes of it. See
    /// [`Table::rewrite_where`].
    pub fn rewrite<E: From<StorageError>>(
        &self,
        decide: impl FnMut(&[Value]) -> Result<RowChange, E>,
    ) -> Result<u64, E> {
        self.rewrite_where(None, decide)
    }

    /// UPDATE and DELETE: `decide` says what becomes of each row it sees, in row order; with `key` =
    /// `(column, rows)`, it sees only the rows an index on that column finds ([`IndexedRows`]), each once (the
    /// others stay).
    ///
    /// A partition without a change is kept as it is while its rows keep their ids; the others are encoded anew
    /// from the rows that remain (placed as the table's placement says for their positions), the last incomplete
    /// one left as the delta. Indexes are rebuilt unless no row moved and no indexed value changed. All or nothing:
    /// an error from `decide`, a NULL in a NOT NULL column or a duplicate key leaves the table untouched. Readers
    /// keep the snapshot they took; writers wait. Returns how many rows were deleted or replaced.
    pub fn rewrite_where<E: From<StorageError>>(
        &self,
        key: Option<(usize, IndexedRows<'_>)>,
        mut decide: impl FnMut(&[Value]) -> Result<RowChange, E>,
    ) -> Result<u64, E> {
        let _writer = self.writer()?;
        let snapshot = self.snapshot();
        let width = self.columns.len();
        // The rows `decide` sees: all, or those the index finds, in row order.
        let candidates: Option<Vec<u64>> = match key {
            None => None,
            Some((column, found)) => {
                let missing = || StorageError::Invalid("no index on the key".into());
                let mut rows = Vec::new();
                match found {
                    IndexedRows::Keys(values) => {
                        let index = snapshot.index_on(column).ok_or_else(missing)?;
                        for value in values.iter().filter(|value| !value.is_null()) {
                            index.lookup(value, |row| rows.push(u64::from(row)));
                        }
                    }
                    IndexedRows::Range(low, high) => {
                        let index = snapshot.sorted_index_on(column).ok_or_else(missing)?;
                        index.lookup_range(low, high, |row| rows.push(u64::from(row)));
                    }
                }
                rows.sort_unstable();
                rows.dedup();
                Some(rows)
            }
        };
        let indexed: Vec<usize> = snapshot.indexes.iter().map(|i| i.column()).collect();
        let mut changed = 0u64;
        let mut indexed_values_changed = false;
        let mut partitions: Vec<Arc<Partition>> = Vec::new();
        let mut pending: Vec<Vec<Value>> = vec![Vec::new(); width];
        let mut next_row = 0u64;
        let mut row = vec![Value::Null; width];
        let sources = snapshot.partitions.iter().map(Some).chain(std::iter::once(None));
        for partition in sources {
            let (first_row, rows) = match partition {
                Some(p) => (p.first_row, p.rows),
                None => (snapshot.delta.first_row, snapshot.delta.rows()),
            };
            let read = |r: usize, c: usize| match partition {
                Some(p) => p.column(c).value(r),
                None => snapshot.delta.columns[c][r].clone(),
            };
            let seen: Vec<usize> = match &candidates {
                None => (0..rows).collect(),
                Some(all) => {
                    let inside = all.partition_point(|&id| id < first_row)
                        ..all.partition_point(|&id| id < first_row + rows as u64);
                    all[inside].iter().map(|&id| (id - first_row) as usize).collect()
                }
            };
            let mut changes: Vec<(usize, RowChange)> = Vec::new();
            for r in seen {
                for (c, value) in row.iter_mut().enumerate() {
                    *value = read(r, c);
                }
                match decide(&row)? {
                    RowChange::Keep => {}
                    RowChange::Replace(mut values) => {
                        if values.len() != width {
                            return Err(StorageError::Invalid(format!(
                                "a row of table \"{}\" needs {width} values, got {}",
                                self.name,
                                values.len()
                            ))
                            .into());
                        }
                        for (value, definition) in values.iter_mut().zip(&self.columns) {
                            if value.is_null() && !definition.nullable {
                                return Err(StorageError::NotNull {
                                    table: self.name.clone(),
                                    column: definition.name.clone(),
                                }
                                .into());
                            }
                            definition.fit(value).map_err(StorageError::from)?;
                        }
                        indexed_values_changed |= indexed.iter().any(|&c| values[c] != row[c]);
                        changes.push((r, RowChange::Replace(values)));
                    }
                    RowChange::Delete => changes.push((r, RowChange::Delete)),
                }
            }
            changed += changes.len() as u64;
            // Unchanged and where it was: kept as it is.
            if let Some(p) = partition
                && changes.is_empty()
                && pending[0].is_empty()
                && next_row == p.first_row
                && partitions.len() == p.index
            {
                partitions.push(Arc::clone(p));
                next_row += p.rows as u64;
                continue;
            }
            let mut changes = changes.into_iter().peekable();
            for r in 0..rows {
                let change = match changes.peek() {
                    Some((at, _)) if *at == r => changes.next().map(|(_, change)| change),
                    _ => None,
                };
                match change {
                    Some(RowChange::Delete) => continue,
                    Some(RowChange::Replace(values)) => pending.iter_mut().zip(values).for_each(|(c, v)| c.push(v)),
                    _ => pending.iter_mut().enumerate().for_each(|(c, column)| column.push(read(r, c))),
                }
                // A partition's worth, or the end of a partition that keeps its size (an UPDATE's).
                let full = pending[0].len() == self.partition_rows;
                let boundary = partition.is_some()
                    && r + 1 == rows
                    && next_row + pending[0].len() as u64 == first_row + rows as u64;
                if full || boundary {
                    self.build_pending(&mut pending, &mut partitions, &mut next_row)?;
                }
            }
        }
        if changed == 0 {
            return Ok(0);
        }
        // The rows left over, as an insert leaves them ([`DELTA_SEAL_ROWS`]): after a DELETE, every partition
        // after the first changed one is cut anew at `partition_rows`, and what falls short of that (a whole table
        // built by INSERTs) went back to the delta.
        if pending.first().is_some_and(|column| column.len() >= DELTA_SEAL_ROWS) {
            self.build_pending(&mut pending, &mut partitions, &mut next_row)?;
        }
        let delta = Delta { first_row: next_row, columns: pending };
        let moved = delta.first_row + delta.rows() as u64 != snapshot.rows();
        let indexes = if moved || indexed_values_changed {
            // Every index again, over the new rows (a duplicate key fails here, before anything is replaced).
            let mut indexes = Vec::with_capacity(snapshot.indexes.len());
            for index in &snapshot.indexes {
                let column = index.column();
                let entries = partitions
                    .iter()
                    .flat_map(|p| {
                        (0..p.rows).map(move |r| (p.column(column).value(r), (p.first_row + r as u64) as u32))
                    })
                    .chain(
                        delta.columns[column]
                            .iter()
                            .enumerate()
                            .map(|(r, v)| (v.clone(), (delta.first_row + r as u64) as u32)),
                    );
                indexes.push(Arc::new(self.rebuild_index(index, entries)?));
            }
            indexes
        } else {
            snapshot.indexes.clone()
        };
        let mut state = self.write();
        state.partitions = partitions;
        state.delta = Arc::new(delta);
        state.indexes = indexes;
        Ok(changed)
    }

    /// A rewrite's pending rows (one vector per column, emptied) built into the partition after `partitions`,
    /// starting at row `next_row`, which moves past them ([`Table::rewrite_where`]).
    fn build_pending(
        &self,
        pending: &mut [Vec<Value>],
        partitions: &mut Vec<Arc<Partition>>,
        next_row: &mut u64,
    ) -> Result<(), StorageError> {
        let index = partitions.len();
        let rows = pending.first().map_or(0, Vec::len);
        let columns = pending.iter_mut().map(|c| ColumnInput::Values(std::mem::take(c))).collect();
        let built = Partition::build(index, *next_row, &self.columns, columns, &self.policies_for_partition(index))?;
        partitions.push(Arc::new(built));
        *next_row += rows as u64;
        Ok(())
    }

    /// Adds an index over the current rows.
    pub fn create_index(&self, name: &str, column: usize, kind: IndexKind, unique: bool) -> Result<(), StorageError> {
        let _writer = self.writer()?;
        let snapshot = self.snapshot();
        let definition = &self.columns[column];
        let rows = snapshot.rows();
        let entries = (0..rows).map(|row| (snapshot.value(row, column).unwrap_or(Value::Null), row as u32));
        let index = Index::build(
            name,
            column,
            &definition.name,
            kind,
            unique,
            definition.data_type == DataType::Text,
            entries,
        )?;
        self.write().indexes.push(Arc::new(index));
        Ok(())
    }

    /// Drops an index by name; returns whether it existed. The primary key's index cannot be dropped.
    pub fn drop_index(&self, name: &str) -> Result<bool, StorageError> {
        let _writer = self.writer()?;
        let mut state = self.write();
        let before = state.indexes.len();
        let primary = self.primary_index.as_deref();
        state.indexes.retain(|i| i.name() != name || Some(i.name()) == primary);
        Ok(state.indexes.len() != before)
    }

    /// ALTER TABLE: a table named `name` whose columns are this one's with `changes` made, holding this table's
    /// rows, handed to `install` (which puts it in this table's place in the catalog). Once `install` succeeds,
    /// this table is retired.
    ///
    /// Writers wait while the copy is made (this holds the writers' lock) and then find the table retired: a
    /// write made before the copy is in it, one that comes after fails with [`StorageError::Retired`] having
    /// written nothing, and can run again against the copy. So no write is lost, and none is made to columns
    /// bound before they changed. Readers go on with their snapshots of this table, whose columns and rows stay
    /// as they were. The copy shares the chunks of the columns that stay and the indexes' keys (row ids do not
    /// move); an added column is encoded per partition as a constant and placed by the table's placement for
    /// that partition, and every delta row takes its value. Placements set per column follow their columns.
    /// All or nothing: an error from `changes` or from `install` leaves this table as it was.
    pub fn alter<R, E: From<StorageError>>(
        &self,
        name: &str,
        changes: &[ColumnChange],
        install: impl FnOnce(Table) -> Result<R, E>,
    ) -> Result<R, E> {
        let _writer = self.writer()?;
        let altered = self.altered(name, changes)?;
        let installed = install(altered)?;
        self.retired.store(true, Ordering::Relaxed);
        Ok(installed)
    }

    /// The copy [`Table::alter`] makes (under the writers' lock).
    fn altered(&self, name: &str, changes: &[ColumnChange]) -> Result<Table, StorageError> {
        let (partitions, delta, indexes, placement, mut column_placement) = {
            let state = self.read();
            (
                state.partitions.clone(),
                Arc::clone(&state.delta),
                state.indexes.clone(),
                state.placement.clone(),
                state.column_placement.clone(),
            )
        };
        let mut columns = self.columns.clone();
        let mut primary_key = self.primary_key;
        let mut chunks: Vec<Vec<Arc<ColumnChunk>>> = partitions.iter().map(|p| p.columns.clone()).collect();
        let mut delta_columns = delta.columns.clone();
        // Each index, with where its column is now.
        let mut indexed: Vec<(Arc<Index>, usize)> = indexes.iter().map(|i| (Arc::clone(i), i.column())).collect();
        let rows = delta.first_row + delta.rows() as u64;
        let no_column = |position: usize| {
            StorageError::Invalid(format!("table \"{}\" has no column at position {position}", self.name))
        };
        for change in changes {
            match change {
                ColumnChange::Add { definition, value } => {
                    if columns.iter().any(|c| c.name == definition.name) {
                        return Err(StorageError::Invalid(format!(
                            "column \"{}\" of relation \"{}\" already exists",
                            definition.name, self.name
                        )));
                    }
                    let fits = matches!(
                        (definition.data_type, value),
                        (_, Value::Null)
                            | (DataType::Integer | DataType::BigInt, Value::Int(_))
                            | (DataType::Double, Value::Double(_))
                            | (DataType::Boolean, Value::Bool(_))
                            | (DataType::Text, Value::Text(_))
                    );
                    if definition.data_type == DataType::Numeric || !fits {
                        return Err(StorageError::Invalid(format!(
                            "column \"{}\" cannot be a {} holding {value:?}",
                            definition.name, definition.data_type
                        )));
                    }
                    let mut value = value.clone();
                    definition.fit(&mut value)?;
                    if value.is_null() && !definition.nullable && rows > 0 {
                        return Err(StorageError::ContainsNulls {
                            table: self.name.clone(),
                            column: definition.name.clone(),
                        });
                    }
                    for (partition, chunks) in partitions.iter().zip(&mut chunks) {
                        let policy = placement.policy_for_partition(partition.index);
                        let chunk = ColumnChunk::constant(definition.data_type, &value, partition.rows, &policy)?;
                        chunks.push(Arc::new(chunk));
                    }
                    delta_columns.push(vec![value; delta.rows()]);
                    columns.push(definition.clone());
                }
                &ColumnChange::Drop(position) => {
                    if position >= columns.len() {
                        return Err(no_column(position));
                    }
                    columns.remove(position);
                    for chunks in &mut chunks {
                        chunks.remove(position);
                    }
                    delta_columns.remove(position);
                    indexed.retain(|&(_, column)| column != position);
                    let after = |column: usize| if column > position { column - 1 } else { column };
                    for (_, column) in &mut indexed {
                        *column = after(*column);
                    }
                    primary_key = primary_key.filter(|&key| key != position).map(after);
                    column_placement = std::mem::take(&mut column_placement)
                        .into_iter()
                        .filter(|&(column, _)| column != position)
                        .map(|(column, placement)| (after(column), placement))
                        .collect();
                }
                ColumnChange::Rename(position, name) => {
                    if *position >= columns.len() {
                        return Err(no_column(*position));
                    }
                    if columns.iter().enumerate().any(|(c, column)| c != *position && column.name == *name) {
                        return Err(StorageError::Invalid(format!(
                            "column \"{name}\" of relation \"{}\" already exists",
                            self.name
                        )));
                    }
                    columns[*position].name = name.clone();
                }
            }
        }
        if columns.is_empty() {
            return Err(StorageError::Invalid(format!("table \"{}\" needs at least one column", self.name)));
        }
        let indexes = indexed
            .into_iter()
            .map(|(index, column)| {
                let column_name = &columns[column].name;
                if column == index.column() && column_name == index.column_name() {
                    index
                } else {
                    Arc::new(index.moved(column, column_name))
                }
            })
            .collect();
        // New partitions even where the chunks are the same: what is kept per partition elsewhere (a text
        // column's numbering over partitions) names columns by position.
        let partitions = partitions
            .iter()
            .zip(chunks)
            .map(|(p, columns)| Arc::new(Partition { index: p.index, first_row: p.first_row, rows: p.rows, columns }))
            .collect();
        Ok(Table {
            name: name.to_string(),
            columns,
            primary_key,
            primary_index: primary_key.and(self.primary_index.clone()),
            partition_rows: self.partition_rows,
            state: RwLock::new(TableState {
                partitions,
                delta: Arc::new(Delta { first_row: delta.first_row, columns: delta_columns }),
                indexes,
                placement,
                column_placement,
            }),
            writer: Mutex::new(()),
            retired: AtomicBool::new(false),
        })
    }

    /// Changes the placement of the table (or of one column) and moves the existing partitions' pages while
    /// queries keep running; returns where the pages are afterwards.
    pub fn set_placement(
        &self,
        placement: TablePlacement,
        column: Option<usize>,
    ) -> Result<Vec<ChunkPlacement>, StorageError> {
        check_placement(&placement)?;
        let _writer = self.writer()?;
        let partitions = {
            let mut state = self.write();
            match column {
                Some(c) => {
                    state.column_placement.insert(c, placement.clone());
                }
                None => {
                    state.placement = placement.clone();
                    state.column_placement.clear();
                }
            }
            state.partitions.clone()
        };
        for partition in &partitions {
            for (c, chunk) in partition.columns.iter().enumerate() {
                if column.is_none_or(|wanted| wanted == c) {
                    chunk.migrate(&placement.policy_for_partition(partition.index))?;
                }
            }
        }
        self.placement_report()
    }

    /// Where every column of every partition is, asking the kernel now.
    pub fn placement_report(&self) -> Result<Vec<ChunkPlacement>, StorageError> {
        let snapshot = self.snapshot();
        let mut report = Vec::new();
        for partition in &snapshot.partitions {
            for (c, chunk) in partition.columns.iter().enumerate() {
                report.push(ChunkPlacement {
                    partition: partition.index,
                    column: self.columns[c].name.clone(),
                    rows: partition.rows,
                    bytes: chunk.bytes(),
                    policy: chunk.policy().to_string(),
                    pages: chunk.verify()?,
                });
            }
        }
        Ok(report)
    }

    /// Encoded bytes per column (sealed partitions only) and the rows they hold.
    pub fn column_bytes(&self) -> (Vec<u64>, u64) {
        let snapshot = self.snapshot();
        let mut bytes = vec![0u64; self.columns.len()];
        let mut rows = 0u64;
        for partition in &snapshot.partitions {
            rows += partition.rows as u64;
            for (slot, chunk) in bytes.iter_mut().zip(&partition.columns) {
                *slot += chunk.bytes();
            }
        }
        (bytes, rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Vec<ColumnDef> {
        vec![ColumnDef::new("id", DataType::Integer, false), ColumnDef::new("name", DataType::Text, true)]
    }

    fn small() -> TableOptions {
        TableOptions { partition_rows: 1024, ..TableOptions::default() }
    }

    /// The table's rows as (id, name) pairs, in row order, read through a snapshot.
    fn contents(table: &Table) -> Vec<(i64, Value)> {
        let snapshot = table.snapshot();
        (0..snapshot.rows())
            .map(|row| match (snapshot.value(row, 0), snapshot.value(row, 1)) {
                (Some(Value::Int(id)), Some(name)) => (id, name),
                other => panic!("row {row} is {other:?}"),
            })
            .collect()
    }

    #[test]
    fn inserts_gathering_a_delta_of_delta_seal_rows_seal_it_into_a_partition() {
        let table = Table::new("t", schema(), Some(0), TableOptions::default()).unwrap();
        let rows =
            |ids: std::ops::Range<i64>| ids.map(|i| vec![Value::Int(i), Value::text(&format!("n{i}"))]).collect();
        let seal = DELTA_SEAL_ROWS as i64;
        let gathered = (seal - 1) / 1000 * 1000;
        for first in (0..gathered).step_by(1000) {
            table.insert(rows(first..first + 1000)).unwrap();
        }
        assert_eq!((table.snapshot().partitions.len(), table.snapshot().delta.rows()), (0, gathered as usize));
        // The INSERT that brings the delta to DELTA_SEAL_ROWS seals it, its own rows too.
        table.insert(rows(gathered..seal + 10)).unwrap();
        let sealed = table.snapshot();
        assert_eq!((sealed.partitions.len(), sealed.delta.rows()), (1, 0));
        assert_eq!(sealed.partitions[0].rows(), DELTA_SEAL_ROWS + 10);
        table.insert(rows(seal + 10..seal + 15)).unwrap();
        assert_eq!(table.snapshot().delta.rows(), 5);
        let expected: Vec<(i64, Value)> = (0..seal + 15).map(|i| (i, Value::text(&format!("n{i}")))).collect();
        assert_eq!(contents(&table), expected);
        // The primary key is still enforced over the sealed rows.
        assert!(table.insert(rows(7..8)).is_err());
        // A DELETE cuts the partitions after it anew; what falls short of a partition's worth is sealed as an
        // insert would, not put back in the delta.
        let deleted = table
            .rewrite(|row| {
                Ok::<_, StorageError>(if row[0] == Value::Int(3) { RowChange::Delete } else { RowChange::Keep })
            })
            .unwrap();
        assert_eq!(deleted, 1);
        let after = table.snapshot();
        assert_eq!((after.partitions.len(), after.delta.rows()), (1, 0));
        let expected: Vec<(i64, Value)> =
            (0..seal + 15).filter(|&i| i != 3).map(|i| (i, Value::text(&format!("n{i}")))).collect();
        assert_eq!(contents(&table), expected);
    }

    #[test]
    fn rewrite_deletes_and_replaces_rows_keeps_untouched_partitions_and_rebuilds_indexes() {
        let table = Table::new("t", schema(), Some(0), small()).unwrap();
        table.insert((0..5000).map(|i| vec![Value::Int(i), Value::text(&format!("n{i}"))]).collect()).unwrap();
        let before = table.snapshot();
        assert_eq!((before.partitions.len(), before.delta.rows()), (4, 5000 - 4096));

        // Delete every third row from 2500 on (partition 2 is the first changed), rename the ids 1500..1510
        // (partition 1), and leave partition 0 alone.
        let changed = table
            .rewrite(|row| {
                let Value::Int(id) = row[0] else { panic!("ids are integers") };
                Ok::<_, StorageError>(match id {
                    1500..1510 => RowChange::Replace(vec![Value::Int(id + 100_000), Value::Null]),
                    2500.. if id % 3 == 0 => RowChange::Delete,
                    _ => RowChange::Keep,
                })
            })
            .unwrap();
        let deleted = (2500..5000).filter(|i| i % 3 == 0).count() as u64;
        assert_eq!(changed, 10 + deleted);
        let expected: Vec<(i64, Value)> = (0..5000)
            .filter(|&i| !(i >= 2500 && i % 3 == 0))
            .map(|i| match i {
                1500..1510 => (i + 100_000, Value::Null),
                _ => (i, Value::text(&format!("n{i}"))),
            })
            .collect();
        assert_eq!(contents(&table), expected);
        let after = table.snapshot();
        assert!(
            Arc::ptr_eq(&after.partitions[0], &before.partitions[0]),
            "the partition before the first change stays"
        );
        assert!(!Arc::ptr_eq(&after.partitions[1], &before.partitions[1]), "a changed partition is rebuilt");
        assert!(after.delta.rows() < table.partition_rows(), "full partitions are sealed");
        for (position, partition) in after.partitions.iter().enumerate() {
            assert_eq!(partition.index(), position);
        }
        // The old snapshot still reads the old rows.
        assert_eq!(before.value(2502, 0), Some(Value::Int(2502)));
        // The primary key's index follows the new row ids.
        let pk = after.index_on(0).unwrap();
        assert_eq!(
            pk.lookup_one(&Value::Int(101_505)).map(|r| after.value(u64::from(r), 0)),
            Some(Some(Value::Int(101_505)))
        );
        assert_eq!(pk.lookup_one(&Value::Int(1505)), None);
        assert_eq!(pk.lookup_one(&Value::Int(2502)), None);
        assert_eq!(
            pk.lookup_one(&Value::Int(4999)).map(|r| after.value(u64::from(r), 0)),
            Some(Some(Value::Int(4999)))
        );
        // Inserts go on after the rewrite.
        table.insert(vec![vec![Value::Int(7), Value::text("again")]]).unwrap_err();
        table.insert(vec![vec![Value::Int(2502), Value::text("again")]]).unwrap();
        assert_eq!(contents(&table).last(), Some(&(2502, Value::text("again"))));
    }

    #[test]
    fn an_update_in_place_rebuilds_only_its_partition_and_a_key_limits_the_rows_seen() {
        let table = Table::new("t", schema(), Some(0), small()).unwrap();
        table.insert((0..5000).map(|i| vec![Value::Int(i), Value::text(&format!("n{i}"))]).collect()).unwrap();
        let before = table.snapshot();
        // Through the primary key: `decide` sees the one row with id 3000 (partition 2), which keeps its id.
        let mut seen = Vec::new();
        let changed = table
            .rewrite_where(Some((0, IndexedRows::Keys(&[Value::Int(3000)]))), |row| {
                seen.push(row.to_vec());
                Ok::<_, StorageError>(RowChange::Replace(vec![row[0].clone(), Value::text("renamed")]))
            })
            .unwrap();
        assert_eq!((changed, seen.len()), (1, 1));
        assert_eq!(seen[0][0], Value::Int(3000));
        let after = table.snapshot();
        for unchanged in [0, 1, 3] {
            assert!(Arc::ptr_eq(&after.partitions[unchanged], &before.partitions[unchanged]), "partition {unchanged}");
        }
        assert!(!Arc::ptr_eq(&after.partitions[2], &before.partitions[2]));
        assert!(Arc::ptr_eq(&after.indexes[0], &before.indexes[0]), "no row moved, no key changed: same index");
        assert_eq!(after.value(3000, 1), Some(Value::text("renamed")));
        assert_eq!(after.value(2999, 1), Some(Value::text("n2999")));
        // A key with no row changes nothing.
        assert_eq!(
            table
                .rewrite_where(Some((0, IndexedRows::Keys(&[Value::Int(-1)]))), |_| Ok::<_, StorageError>(
                    RowChange::Delete
                ))
                .unwrap(),
            0
        );
        assert_eq!(table.rows(), 5000);
        // Through a range of the (sorted) primary key: the rows within it, once each, in row order, across a
        // partition boundary (row 2048).
        let mut seen = Vec::new();
        let range = IndexedRows::Range(Bound::Excluded(&Value::Int(2040)), Bound::Included(&Value::Int(2050)));
        let deleted = table
            .rewrite_where(Some((0, range)), |row| {
                seen.push(row[0].clone());
                Ok::<_, StorageError>(if row[0] == Value::Int(2045) { RowChange::Delete } else { RowChange::Keep })
            })
            .unwrap();
        assert_eq!(seen, (2041..=2050).map(Value::Int).collect::<Vec<_>>());
        assert_eq!((deleted, table.rows()), (1, 4999));
        // A hash index takes no range.
        let hashed =
            Table::new("h", schema(), Some(0), TableOptions { primary_key_index: IndexKind::Hash, ..small() }).unwrap();
        let range = IndexedRows::Range(Bound::Unbounded, Bound::Unbounded);
        assert!(hashed.rewrite_where(Some((0, range)), |_| Ok::<_, StorageError>(RowChange::Delete)).is_err());
    }

    #[test]
    fn truncate_empties_the_table_and_its_indexes_and_inserts_start_again() {
        let table = Table::new("t", schema(), Some(0), small()).unwrap();
        table.insert((0..3000).map(|i| vec![Value::Int(i), Value::text(&format!("n{i}"))]).collect()).unwrap();
        let before = table.snapshot();
        assert_eq!(table.truncate().unwrap(), 3000);
        assert_eq!(table.rows(), 0);
        assert_eq!(before.rows(), 3000, "a snapshot taken before still reads the old rows");
        assert_eq!(table.snapshot().index_on(0).unwrap().lookup_one(&Value::Int(5)), None);
        table.insert(vec![vec![Value::Int(5), Value::text("again")]]).unwrap();
        assert_eq!(contents(&table), vec![(5, Value::text("again"))]);
        assert_eq!(table.snapshot().index_on(0).unwrap().lookup_one(&Value::Int(5)), Some(0));
    }

    #[test]
    fn a_failed_rewrite_changes_nothing() {
        let table = Table::new("t", schema(), Some(0), small()).unwrap();
        table.insert((0..3000).map(|i| vec![Value::Int(i), Value::text(&format!("n{i}"))]).collect()).unwrap();
        let before = contents(&table);
        // A duplicate key (id 2999 onto 2998), a NULL in the NOT NULL key, and an error from the caller.
        let duplicate = table.rewrite(|row| {
            Ok::<_, StorageError>(match &row[0] {
                Value::Int(2999) => RowChange::Replace(vec![Value::Int(2998), Value::Null]),
                _ => RowChange::Keep,
            })
        });
        assert!(matches!(duplicate, Err(StorageError::Duplicate(_))), "{duplicate:?}");
        let null = table.rewrite(|row| {
            Ok::<_, StorageError>(match &row[0] {
                Value::Int(5) => RowChange::Replace(vec![Value::Null, Value::Null]),
                _ => RowChange::Delete,
            })
        });
        assert!(matches!(null, Err(StorageError::NotNull { .. })), "{null:?}");
        let mut seen = 0;
        let failed = table.rewrite(|_| {
            seen += 1;
            if seen == 2500 { Err(StorageError::Invalid("stop".into())) } else { Ok(RowChange::Delete) }
        });
        assert!(failed.is_err());
        assert_eq!(contents(&table), before);
        assert_eq!(table.rewrite(|_| Ok::<_, StorageError>(RowChange::Keep)).unwrap(), 0);
        assert_eq!(table.rewrite(|_| Ok::<_, StorageError>(RowChange::Delete)).unwrap(), 3000);
        assert_eq!(table.rows(), 0);
        assert!(table.snapshot().partitions.is_empty());
    }

    #[test]
    fn inserts_seal_into_partitions_and_stay_readable() {
        let table = Table::new("t", schema(), Some(0), small()).unwrap();
        for start in (0..3000).step_by(500) {
            let rows = (start..start + 500).map(|i| vec![Value::Int(i), Value::text(&format!("n{i}"))]).collect();
            table.insert(rows).unwrap();
        }
        let snapshot = table.snapshot();
        assert_eq!(snapshot.partitions.len(), 2);
        assert_eq!(snapshot.delta.rows(), 3000 - 2048);
        assert_eq!(snapshot.rows(), 3000);
        for row in [0u64, 1023, 1024, 2047, 2048, 2999] {
            assert_eq!(snapshot.value(row, 0), Some(Value::Int(row as i64)));
            assert_eq!(snapshot.value(row, 1), Some(Value::text(&format!("n{row}"))));
        }
        let pk = snapshot.index_on(0).unwrap();
        assert_eq!(pk.lookup_one(&Value::Int(2500)), Some(2500));
        let error = table.insert(vec![vec![Value::Int(7), Value::Null]]).unwrap_err();
        assert!(error.to_string().contains("duplicate key value violates unique constraint \"t_pkey\""));
        let error = table.insert(vec![vec![Value::Null, Value::Null]]).unwrap_err();
        assert!(error.to_string().contains("null value in column \"id\""));
        assert_eq!(table.rows(), 3000, "failed statements insert nothing");
        table.seal().unwrap();
        assert_eq!(table.snapshot().partitions.len(), 3);
        assert_eq!(table.snapshot().value(2999, 0), Some(Value::Int(2999)));
    }

    #[test]
    fn bulk_partitions_append_in_order_and_rebuild_indexes() {
        let table = Table::new("t", schema(), Some(0), small()).unwrap();
        let (index, first) = table.next_partition_slot().unwrap();
        let build = |index: usize, first: u64, keys: std::ops::Range<i64>| {
            let names = keys.clone().map(|k| Value::text(&k.to_string())).collect();
            Partition::build(
                index,
                first,
                table.columns(),
                vec![ColumnInput::Ints(keys.collect()), ColumnInput::Values(names)],
                &table.policies_for_partition(index),
            )
            .unwrap()
        };
        let parts = vec![build(index, first, 0..1024), build(index + 1, first + 1024, 1024..1500)];
        assert_eq!(table.append_partitions(parts).unwrap(), 1500);
        assert_eq!(table.snapshot().index_on(0).unwrap().lookup_one(&Value::Int(1400)), Some(1400));
        let duplicate = build(2, 1500, 0..10);
        assert!(table.append_partitions(vec![duplicate]).unwrap_err().to_string().contains("duplicate key"));
        let gap = build(2, 1600, 5000..5010);
        assert!(table.append_partitions(vec![gap]).unwrap_err().to_string().contains("does not follow"));
        table.insert(vec![vec![Value::Int(99_999), Value::Null]]).unwrap();
        assert_eq!(table.snapshot().index_on(0).unwrap().lookup_one(&Value::Int(99_999)), Some(1500));
    }

    #[test]
    fn placement_is_verified_and_can_change() {
        let table = Table::new("t", schema(), Some(0), small()).unwrap();
        let rows = (0..5000).map(|i| vec![Value::Int(i), Value::text("x")]).collect();
        table.insert(rows).unwrap();
        table.seal().unwrap();
        let node = numadb_placement::system_topology().unwrap().nodes_with_cpus().first().unwrap();
        let report = table.set_placement(TablePlacement::Node(node), None).unwrap();
        assert_eq!(report.len(), 5 * 2);
        for chunk in &report {
            assert_eq!(chunk.policy, format!("node({node})"));
            assert!(chunk.pages.all_on(node), "{chunk:?}");
        }
        assert_eq!(table.snapshot().partitions[0].home_node(&[0, 1]), Some(node));
        assert_eq!(table.placement(None), TablePlacement::Node(node));
        let error = table.set_placement(TablePlacement::Node(99), Some(1)).unwrap_err();
        assert!(error.to_string().contains("NUMA node 99 does not exist"));
        assert_eq!(table.snapshot().value(4321, 0), Some(Value::Int(4321)));
    }

    #[test]
    fn an_altered_copy_shares_what_stays_moves_keys_and_placements_and_retires_the_table() {
        let columns = vec![
            ColumnDef::new("a", DataType::Integer, true),
            ColumnDef::new("id", DataType::Integer, false),
            ColumnDef::new("name", DataType::Text, true),
        ];
        let table = Table::new("t", columns, Some(1), small()).unwrap();
        table
            .insert((0..2500).map(|i| vec![Value::Int(-i), Value::Int(i), Value::text(&format!("n{i}"))]).collect())
            .unwrap();
        table.create_index("by_name", 2, IndexKind::Hash, false).unwrap();
        let node = numadb_placement::system_topology().unwrap().nodes_with_cpus().first().unwrap();
        table.set_placement(TablePlacement::Node(node), Some(2)).unwrap();
        let before = table.snapshot();
        assert_eq!((before.partitions.len(), before.delta.rows()), (2, 2500 - 2048));

        let changes = [
            ColumnChange::Drop(0),
            ColumnChange::Add { definition: ColumnDef::new("c", DataType::BigInt, false), value: Value::Int(7) },
            ColumnChange::Rename(1, "label".into()),
        ];
        // Installed nowhere: handed back.
        let altered = table.alter("u", &changes, Ok::<Table, StorageError>).unwrap();
        assert!(table.is_retired());
        let names: Vec<&str> = altered.columns().iter().map(|c| c.name.as_str()).collect();
        assert_eq!((altered.name(), names, altered.primary_key()), ("u", vec!["id", "label", "c"], Some(0)));

        let after = altered.snapshot();
        assert_eq!(after.rows(), 2500);
        for (old, new) in before.partitions.iter().zip(&after.partitions) {
            assert!(!Arc::ptr_eq(old, new), "a new partition, numbered by its new columns");
            assert!(Arc::ptr_eq(&old.columns[1], &new.columns[0]) && Arc::ptr_eq(&old.columns[2], &new.columns[1]));
            assert!(new.column(2).bytes() < 1024, "a constant column is a few bytes a block");
        }
        for row in [0u64, 1023, 1024, 2047, 2048, 2499] {
            let id = row as i64;
            assert_eq!(after.value(row, 0), Some(Value::Int(id)));
            assert_eq!(after.value(row, 1), Some(Value::text(&format!("n{id}"))));
            assert_eq!(after.value(row, 2), Some(Value::Int(7)), "row {row}");
            assert_eq!(before.value(row, 0), Some(Value::Int(-id)), "the old snapshot reads the old columns");
        }
        // The indexes follow their columns and keep their keys; the placement of `name` follows it.
        let pk = after.index_on(0).unwrap();
        assert_eq!((pk.name(), pk.lookup_one(&Value::Int(2222))), ("t_pkey", Some(2222)));
        assert_eq!(after.index_on(1).unwrap().column_name(), "label");
        assert_eq!(after.index_on(1).unwrap().lookup_one(&Value::text("n5")), Some(5));
        assert!(after.index_on(2).is_none());
        assert_eq!(altered.placement(Some(1)), TablePlacement::Node(node));
        assert_eq!(altered.placement(Some(2)), TablePlacement::OsDefault);
        assert_eq!(after.partitions[0].column(1).policy(), Policy::Node(node));

        // The old table takes no more writes; the copy takes them, under its constraints.
        let retired = table.insert(vec![vec![Value::Int(0), Value::Int(9999), Value::Null]]).unwrap_err();
        assert!(matches!(retired, StorageError::Retired(ref name) if name == "t"), "{retired:?}");
        assert!(matches!(table.rewrite(|_| Ok::<_, StorageError>(RowChange::Delete)), Err(StorageError::Retired(_))));
        assert!(matches!(table.truncate(), Err(StorageError::Retired(_))));
        assert!(table.seal().is_ok(), "a seal is only an optimisation");
        assert!(matches!(
            altered.insert(vec![vec![Value::Int(5), Value::Null, Value::Int(1)]]),
            Err(StorageError::Duplicate(_))
        ));
        assert!(matches!(
            altered.insert(vec![vec![Value::Int(5000), Value::Null, Value::Null]]),
            Err(StorageError::NotNull { .. })
        ));
        altered.insert(vec![vec![Value::Int(5000), Value::text("new"), Value::Int(8)]]).unwrap();
        assert_eq!(altered.snapshot().index_on(0).unwrap().lookup_one(&Value::Int(5000)), Some(2500));
        assert_eq!(before.rows(), 2500);

        // Dropping the key's column drops the key and its index.
        let keyless = altered.alter("u", &[ColumnChange::Drop(0)], Ok::<Table, StorageError>).unwrap();
        assert_eq!((keyless.primary_key(), keyless.snapshot().indexes.len()), (None, 1));
        keyless.insert(vec![vec![Value::text("dup"), Value::Int(1)], vec![Value::text("dup"), Value::Int(1)]]).unwrap();
    }

    #[test]
    fn an_alter_that_fails_leaves_the_table_as_it_was() {
        let table = Table::new("t", schema(), Some(0), small()).unwrap();
        table.insert((0..1500).map(|i| vec![Value::Int(i), Value::Null]).collect()).unwrap();
        let not_null = ColumnDef::new("c", DataType::Integer, false);
        let add = |value: Value| [ColumnChange::Add { definition: not_null.clone(), value }];
        let install = |_: Table| -> Result<(), StorageError> { panic!("nothing to install") };
        let error = table.alter("t", &add(Value::Null), install).unwrap_err();
        assert_eq!(error.to_string(), "column \"c\" of relation \"t\" contains null values");
        assert!(table.alter("t", &add(Value::text("x")), install).is_err(), "a value of another type");
        assert!(table.alter("t", &[ColumnChange::Drop(2)], install).is_err());
        assert!(table.alter("t", &[ColumnChange::Drop(0), ColumnChange::Drop(0)], install).is_err(), "no column left");
        assert!(table.alter("t", &[ColumnChange::Rename(1, "id".into())], install).is_err());
        // An install that fails (the catalog's name taken) retires nothing.
        let refused: Result<(), StorageError> =
            table.alter("t", &add(Value::Int(1)), |_| Err(StorageError::Invalid("taken".into())));
        assert!(refused.is_err());
        assert!(!table.is_retired());
        table.insert(vec![vec![Value::Int(1500), Value::Null]]).unwrap();
        assert_eq!(contents(&table).len(), 1501);
    }

    #[test]
    fn indexes_can_be_added_and_dropped() {
        let table = Table::new("t", schema(), None, small()).unwrap();
        table.insert((0..100).map(|i| vec![Value::Int(i % 10), Value::Null]).collect()).unwrap();
        table.create_index("by_id", 0, IndexKind::Hash, false).unwrap();
        let mut rows = 0;
        table.snapshot().index_on(0).unwrap().lookup(&Value::Int(3), |_| rows += 1);
        assert_eq!(rows, 10);
        assert!(table.create_index("u", 0, IndexKind::Sorted, true).is_err());
        assert!(table.drop_index("by_id").unwrap());
        assert!(!table.drop_index("by_id").unwrap());
    }
}
