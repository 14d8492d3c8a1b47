//! Execution: plans turned into morsel tasks on the NUMA-aware scheduler.
//!
//! - [`expr`]: typed expressions with PostgreSQL semantics.
//! - [`function`]: scalar functions (numeric and text), their signatures and PostgreSQL's errors.
//! - [`filter`]: WHERE clauses compiled into block filters over encoded data (SIMD kernels on packed codes).
//! - [`keys`]: sets of integer join keys, which a join's probing scan filters its blocks by.
//! - [`aggregate`]: aggregate functions, partial and merged.
//! - [`plan`]: the physical plans the SQL layer builds.
//! - [`run`]: executing plans: one task graph per statement, tasks preferring their data's domain, byte
//!   accounting per (running domain, memory node).
//! - [`window`]: window functions over materialized rows.
//! - [`load`]: parallel, placement-aware data generation.
//!
//! Architecture invariant: execution is where the scheduler (domains, tasks) meets storage (partitions, nodes):
//! it is the only layer that turns "partition p lives on node n" into "task t prefers domain d".

pub mod aggregate;
pub mod distinct;
pub mod error;
pub mod expr;
pub mod filter;
pub mod function;
mod group;
pub mod keys;
pub mod load;
pub mod plan;
pub mod run;
mod textkeys;
mod vector;
pub mod window;

pub use aggregate::{AggregateCall, AggregateFunction};
pub use error::{ExecError, sqlstate};
pub use expr::{BinaryOp, Expr, ScalarFunction};
pub use plan::{
    Dedup, JoinKind, JoinPlan, KeyRange, LookupPlan, Plan, ScanOutput, ScanPlan, SeriesPlan, SetOp, SortKey,
};
pub use run::{
    ExecutionResult, Executor, MORSEL_BLOCKS_MAX, MORSEL_BLOCKS_MIN, MORSEL_TASKS_PER_WORKER, OperatorStats, ScanStats,
    execute, morsel_blocks_for, morsels_of,
};
pub use window::{WindowCall, WindowFunction};
