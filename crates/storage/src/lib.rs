//! Storage: tables of typed columns, split into NUMA-placed partitions, with compressed encodings and indexes.
//!
//! - [`bitpack`]: 1024-row blocks of bit-packed integer codes and the SIMD kernels that evaluate range
//!   predicates on them without decompressing.
//! - [`column`](mod@column): one column of one partition: frame-of-reference integers, dictionary-encoded text,
//!   doubles, NULL bitmaps, all in placed memory that knows which node holds it.
//! - [`table`]: partitions, the delta of recent inserts, snapshots, bulk appends, placement changes, and the
//!   altered copies ALTER TABLE puts in a table's place.
//! - [`index`]: sorted and hash indexes.
//! - [`placement`]: table placement policies (`node`, `round_robin`, `interleave`, `first_touch`, `os_default`).
//!
//! Architecture invariant: storage knows where its partitions live, never who scans them. It has no threads and
//! no scheduler; the execution layer decides which worker builds or reads a partition.

pub mod bitpack;
pub mod catalog;
pub mod column;
pub mod index;
pub mod placement;
pub mod table;
pub mod types;

pub use catalog::{Catalog, Replaced};
pub use column::{
    ColumnChunk, ColumnData, Combine, CombinedMasks, Dictionary, IntColumn, PREFETCH_BLOCKS_DEFAULT,
    PREFETCH_BLOCKS_MAX, QuarterZones, RangeLeaf, combine_range_leaves, reads_by_quarters,
};
pub use index::{DuplicateKey, Index, IndexKind};
pub use placement::TablePlacement;
pub use table::{
    ChunkPlacement, ColumnChange, ColumnInput, DELTA_SEAL_ROWS, Delta, IndexedRows, PARTITION_ROWS_DEFAULT, Partition,
    RowChange, StorageError, Table, TableOptions, TableSnapshot, check_placement,
};
pub use types::{ColumnDef, DataType, FitError, Value, compare_doubles, format_double};
