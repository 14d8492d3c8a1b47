//! Running plans: morsel tasks on the scheduler, partial results per domain, post-processing.
//!
//! Every scan of a statement (a `UNION ALL` has several) becomes tasks of *one* task graph, so the scans run
//! concurrently and the statement finishes when the slowest does (the thesis's "UNION ALL to synchronise the
//! scans of the two tables"). A scan is cut into morsels of one partition's blocks ([`morsel_blocks_for`]);
//! each morsel task prefers the domain holding the bytes it reads and reports them, per node, to the byte
//! matrix. Aggregating scans merge their tasks' partial results in one merge task per domain (preferring that
//! domain), then once on the calling thread.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use numadb_scheduler::{NodeId, QueryReport, Scheduler, TaskContext, TaskGraph, TaskSpec};
use numadb_storage::bitpack::{self, BLOCK_ROWS, BlockMask, MASK_WORDS};
use numadb_storage::{ColumnData, Combine, CombinedMasks, Dictionary, IntColumn, Partition, TableSnapshot, Value};

use crate::aggregate::{Accumulator, AggregateCall, AggregateFunction, GroupState, PartialAggregate};
use crate::error::{ExecError, sqlstate};
use crate::expr::Expr;
use crate::filter::{Filter, compile_where, tail_mask};
use crate::group::{self, GroupsPart, IntGroups, KeyRange};
use crate::keys::{KeyBitmap, KeySet};
use crate::plan::{
    Dedup, JoinKeys, JoinKind, JoinPlan, LookupPlan, Plan, ScanOutput, ScanPlan, SeriesPlan, SetOp, SortKey,
};
use crate::textkeys::TextKeys;
use crate::window::{append_windows, compare_sort_keys};

/// Every row of a full block.
const ALL_ROWS: BlockMask = [u64::MAX; MASK_WORDS];

/// The fewest blocks per morsel when the size is left to the executor ([`morsel_blocks_for`]): 256 blocks =
/// 262 144 rows, large enough that a task's fixed costs (dispatch, a cold start of its streams, accounting) are
/// a few per cent of its scan. On the thesis aggregation over 50 million rows with 2 threads, 256-block morsels
/// scanned 2-3% faster than 128-block ones, and 64-block and 16-block morsels 5% and 45% slower than 128.
pub const MORSEL_BLOCKS_MIN: usize = 256;

/// The most blocks per morsel when the size is left to the executor: 1024 blocks, a quarter of a default
/// partition. On the thesis aggregation (50 million rows, 2 workers, one process alternating sizes query by
/// query), 1024-block morsels scanned 1-2% faster than 256-block ones while the memory ran at ~50 GB/s and 4% faster
/// at ~80 GB/s; 2048 and 4096 gained at most one point more, with 8 to 16 times fewer tasks to balance.
pub const MORSEL_BLOCKS_MAX: usize = 1024;

/// The tasks per worker a scan is cut into at least, while its morsels stay within [`MORSEL_BLOCKS_MIN`] and
/// [`MORSEL_BLOCKS_MAX`]: enough that work stealing can even out workers that fall behind.
pub const MORSEL_TASKS_PER_WORKER: usize = 16;

/// The morsels of a scan over partitions of `partition_blocks` blocks by `workers` workers, in the order their
/// tasks are queued: (partition, its blocks). Each has `fixed` blocks (`numadb.morsel_rows`) or else
/// [`morsel_blocks_for`], but a partition's last, which has what is left; and when the size is the executor's but
/// gives fewer than [`MORSEL_TASKS_PER_WORKER`] per worker, the scan's last `workers` morsels are cut into
/// [`TAIL_MORSEL_PARTS`] each.
///
/// Why the tail is cut: a worker that finds the queue empty waits for the others' last morsels, on average half a
/// morsel each, which matters when each worker has few. On a 16-CPU machine (50 million rows, 256-block morsels,
/// 12 per worker) EXPLAIN ANALYZE showed the workers busy 90-96% of the span from the first task's start to the
/// last one's end; with the tail cut, 92-98%, and the thesis scans took 1.5-7% less time (medians of 4 rounds of
/// 10 runs, binaries alternated). Fixed 128-block morsels everywhere scanned the full table 4% faster than 256-block
/// ones but the selective scans 20% slower: small morsels only at the end keep the large ones' lower cost per
/// block. With 2 workers and morsels enough for 16 each, the cut cost 3-7% (20 million rows, 512-block morsels)
/// and is not made.
pub fn morsels_of(partition_blocks: &[usize], workers: usize, fixed: Option<usize>) -> Vec<(usize, Range<usize>)> {
    let table_blocks = partition_blocks.iter().sum();
    let size = fixed.unwrap_or_else(|| morsel_blocks_for(table_blocks, workers)).max(1);
    let mut morsels = Vec::new();
    for (partition, &blocks) in partition_blocks.iter().enumerate() {
        for start in (0..blocks).step_by(size) {
            morsels.push((partition, start..(start + size).min(blocks)));
        }
    }
    if fixed.is_none() && morsels.len() < workers * MORSEL_TASKS_PER_WORKER {
        let tail = morsels.split_off(morsels.len().saturating_sub(workers.max(1)));
        let part = (size / TAIL_MORSEL_PARTS).max(1);
        for (partition, blocks) in tail {
            morsels
                .extend(blocks.clone().step_by(part).map(|start| (partition, start..(start + part).min(blocks.end))));
        }
    }
    morsels
}

/// Into how many morsels each of a scan's last ones is cut ([`morsels_of`]).
pub const TAIL_MORSEL_PARTS: usize = 4;

/// Blocks per morsel for a scan of `table_blocks` blocks by `workers` workers, unless `numadb.morsel_rows` says:
/// as large as [`MORSEL_TASKS_PER_WORKER`] tasks per worker allow, a power of two between [`MORSEL_BLOCKS_MIN`]
/// and [`MORSEL_BLOCKS_MAX`] (so morsels tile a partition of a power-of-two size). The thesis tables (50 million
/// rows) get 1024-block morsels with 2 workers and 256-block ones with 16.
pub fn morsel_blocks_for(table_blocks: usize, workers: usize) -> usize {
    let wanted =
        (table_blocks / (workers.max(1) * MORSEL_TASKS_PER_WORKER)).clamp(MORSEL_BLOCKS_MIN, MORSEL_BLOCKS_MAX);
    1 << wanted.ilog2()
}

/// How to run a statement.
pub struct Executor<'a> {
    /// The scheduler whose workers run the tasks (`None` for plans without scans: [`Plan::scans`]).
    pub scheduler: Option<&'a Scheduler>,
    /// Parameter values (`$1` first).
    pub params: &'a [Value],
    /// When `statement_timeout` runs out, counted from the statement's start: its subqueries, scans and the
    /// operators after them all stop there.
    pub deadline: Option<Instant>,
    /// Bytes the statement's result rows may take in memory (`numadb.max_result_mb`); beyond, it fails with
    /// 53200 rather than take the server's memory.
    pub result_bytes_max: Option<u64>,
    /// Blocks per morsel (`numadb.morsel_rows`); `None` leaves it to [`morsel_blocks_for`].
    pub morsel_blocks: Option<usize>,
    /// Blocks a scan loop keeps prefetched ahead of the one it reads (`numadb.scan_prefetch_blocks`).
    pub prefetch_blocks: usize,
    /// Whether joins scan an input with the other's keys ([`JoinPlan::key_filter`]; `numadb.join_key_filter`).
    pub join_key_filter: bool,
    /// Set by another thread to cancel the statement (PostgreSQL's cancel request).
    pub cancel: Option<&'a std::sync::atomic::AtomicBool>,
}

/// Rows an operator on the session's thread handles between looks at the cancel flag and the deadline.
const INTERRUPT_CHECK_ROWS: usize = 1 << 16;
/// How often a waiting statement looks at its cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(10);

/// Counters of one scan, for `EXPLAIN ANALYZE`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScanStats {
    /// The table.
    pub table: String,
    /// Scan tasks.
    pub tasks: usize,
    /// Partitions scanned.
    pub partitions: usize,
    /// Rows looked at.
    pub rows_scanned: u64,
    /// Rows that passed the filter.
    pub rows_selected: u64,
    /// Encoded bytes read.
    pub bytes_read: u64,
    /// Time spent in scan tasks, summed over tasks.
    pub task_time: Duration,
    /// Time spent merging partial results (tasks and calling thread).
    pub merge_time: Duration,
    /// Groups that workers' tables, grown past the caches, spilled into the merge's partitions (a group found
    /// again after a spill counts again).
    pub groups_spilled: u64,
    /// Whether the merge's partitions were ranges of the GROUP BY key's values, not hash partitions
    /// (`KeyRange`).
    pub merged_by_key_range: bool,
}

/// What running a statement produced.
#[derive(Debug, Clone, Default)]
pub struct ExecutionResult {
    /// Result rows.
    pub rows: Vec<Vec<Value>>,
    /// Per-scan counters.
    pub scans: Vec<ScanStats>,
    /// The scheduler's report (tasks per domain, stolen, byte matrix), when tasks ran.
    pub report: Option<QueryReport>,
    /// Rows found through indexes.
    pub index_rows: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Time after the tasks: merging, sorting, projecting on the calling thread.
    pub post_time: Duration,
    /// The operators that ran on the calling thread (index lookups, constant rows, `UNION ALL`, and the phases of
    /// what follows a scan: filter and projection, `DISTINCT`, `ORDER BY`, `LIMIT`), in the order they finished;
    /// scans have their own counters in [`ExecutionResult::scans`].
    pub operators: Vec<OperatorStats>,
}

/// One operator's counters, for `EXPLAIN ANALYZE`.
#[derive(Debug, Clone, PartialEq)]
pub struct OperatorStats {
    /// What it is: `Index Lookup on TBL_0`, `Sort`, `Limit`, …
    pub name: String,
    /// Rows it produced.
    pub rows_out: u64,
    /// Wall time on the calling thread.
    pub time: Duration,
}

impl ExecutionResult {
    /// Adds the counters of a part of the statement that ran as a statement of its own (a subquery, a join's
    /// keyed scan): its scans and operators after those already here, its report added to this one.
    fn absorb(&mut self, part: ExecutionResult) {
        self.scans.extend(part.scans);
        self.operators.extend(part.operators);
        self.index_rows += part.index_rows;
        self.post_time += part.post_time;
        self.report = match (self.report.take(), part.report) {
            (Some(mut total), Some(more)) => {
                total.add(&more);
                Some(total)
            }
            (total, more) => total.or(more),
        };
    }

    fn operator(&mut self, name: impl Into<String>, rows_out: usize, started: Instant) {
        self.operators.push(OperatorStats { name: name.into(), rows_out: rows_out as u64, time: started.elapsed() });
    }
}

enum TaskOutput {
    Rows(Vec<Vec<Value>>),
    /// Rows back to back, for a scan whose rows become a [`JoinProbe`] ([`ScanJob::values`]): no allocation per row
    /// on the workers, and none to free on the session thread.
    Values(Vec<Value>),
    /// A task's groups: those of the general path, and those [`IntGroups`] found, kept as they are when the scan
    /// merges per domain (grouping sets, no GROUP BY): the domain's merge task adds them up as integers and makes
    /// the general path's groups of them once, not once per task.
    Aggregate(PartialAggregate, Option<Box<IntGroups>>),
    /// The general path's groups cut into [`ScanJob::merge_parts`] hash partitions, one per merge task (the
    /// groups [`IntGroups`] found are the worker's then: [`ScanJob::worker_groups`]).
    AggregateParts(Vec<PartialAggregate>),
}

/// A worker's groups of a scan ([`ScanJob::worker_groups`]).
#[derive(Default)]
enum WorkerGroups {
    #[default]
    None,
    /// While the scan's tasks run.
    Groups(Box<IntGroups>),
    /// Cut for the merge tasks, each of which takes its own.
    Parts(Vec<Option<GroupsPart>>),
}

/// One scan's shared state while its tasks run.
struct ScanJob {
    /// The table's name, for `EXPLAIN ANALYZE`.
    table: String,
    snapshot: TableSnapshot,
    filter: Option<Filter>,
    output: ScanOutput,
    /// A join's build side that the tasks join their selected rows with, aggregating the joined rows
    /// ([`JoinProbe`]): `output` is then over the joined rows.
    probe: Option<Arc<JoinProbe>>,
    /// Whether the tasks lay their rows back to back ([`TaskOutput::Values`]) rather than one vector each.
    values: bool,
    /// Columns the scan reads (filter and output), for row materialisation.
    columns_read: Vec<usize>,
    /// Columns the output reads (aggregate arguments, group keys, projections) on blocks with selected rows.
    output_columns: Vec<usize>,
    params: Arc<[Value]>,
    /// Blocks the columns' scan loops keep prefetched ahead.
    prefetch_blocks: usize,
    slots: Vec<Mutex<Option<TaskOutput>>>,
    /// A LIMIT's row count (with its OFFSET): the rows of the first morsels, in order, are all it needs.
    rows_wanted: Option<u64>,
    /// An ORDER BY with a LIMIT right over the scan: each task need only hand on its best rows.
    top_n: Option<TopN>,
    /// An ORDER BY with a LIMIT right over a GROUP BY's rows: each merge task need only hand on its best groups.
    top_groups: Option<TopGroups>,
    /// For such an ORDER BY on an integer first key: the tightest bound any task has found on it so far (its
    /// `OFFSET + LIMIT`-th best first key; [`NO_SHARED_BOUND`] before any). That many rows of one task are no
    /// worse, so a row strictly worse cannot be among the statement's best, whichever task reads it: each task
    /// passes over blocks by the better of this and its own bound ([`TopRows::block_cannot_beat`]).
    top_bound: AtomicI64,
    /// Rows each morsel produced, [`MORSEL_RUNNING`] until it finished.
    morsel_rows: Vec<AtomicU64>,
    /// Under a LIMIT ([`ScanJob::rows_wanted`]): the errors output rows raised, each with its morsel, which
    /// stopped there with the rows before it. PostgreSQL stops evaluating at the LIMIT, so a row past it raises
    /// nothing: an error counts only if fewer rows than wanted come before it ([`ScanJob::limit_error`]).
    limit_errors: Mutex<Vec<(usize, ExecError)>>,
    /// The statement's memory for result rows.
    budget: Arc<ResultBudget>,
    merged: Mutex<Vec<PartialAggregate>>,
    /// Merge tasks of a GROUP BY that [`IntGroups`] takes with integer keys and no grouping sets, each adding up
    /// one hash partition of every worker's groups and finishing its rows (0: one merge per domain instead, of
    /// whole partials). With many groups a merge per domain was most of the statement's time, on one worker: a
    /// GROUP BY of 3 million groups over 5 million rows spent 3 s there, against 2 s of scanning.
    /// With many rows ([`MANY_MERGE_PARTS_ROWS`]), at least [`MANY_MERGE_PARTS`] partitions, more than workers:
    /// each worker's groups spill into them when its table grows past the caches ([`IntGroups::spill_into`]),
    /// and a partition's share of millions of groups is then added up in a table the caches hold.
    merge_parts: usize,
    /// The rows each partition's merge task finished.
    merged_rows: Mutex<Vec<Vec<Vec<Value>>>>,
    /// With `merge_parts`, per worker: the groups its tasks found block at a time, which each of its tasks takes
    /// on. Per task, a GROUP BY of 200 000 groups over 5 million rows (23 tasks, 2 workers) found 143 000 groups
    /// in each task and merged 3.3 million; per worker, each worker finds every group once.
    worker_groups: Vec<Mutex<WorkerGroups>>,
    /// With `merge_parts`: how the merge tasks take the workers' groups, set by the first merge task before any
    /// are taken.
    merge_source: OnceLock<MergeSource>,
    error: Mutex<Option<ExecError>>,
    rows_scanned: AtomicU64,
    rows_selected: AtomicU64,
    bytes_read: AtomicU64,
    task_ns: AtomicU64,
    merge_ns: AtomicU64,
    /// Groups the workers' tables spilled ([`ScanStats::groups_spilled`]).
    groups_spilled: AtomicU64,
    /// Whether the tasks aggregate a block at a time ([`IntGroups`]).
    block_groups: bool,
    /// With `block_groups`, per aggregate: its FILTER compiled, evaluated on each block with selected rows
    /// ([`group::filters_per_block`]); empty where no aggregate has one.
    aggregate_filters: Vec<Option<Filter>>,
    /// The numbers of the strings of the GROUP BY's text keys and of text aggregate arguments, which
    /// [`IntGroups`] groups and aggregates by.
    text_keys: TextKeys,
    tasks: usize,
}

/// How a GROUP BY's merge tasks take the workers' groups ([`ScanJob::merge_partitions`]).
enum MergeSource {
    /// Each worker's groups are cut into the partitions by the first merge task to reach them: hash partitions,
    /// or ranges of the key's values where every worker found its groups through its direct table
    /// ([`KeyRange::of`]).
    Cut(Option<KeyRange>),
    /// Ranges of the key's values, which each merge task reads where the workers' tables hold them
    /// ([`IntGroups::merged_range`]): where the tables could be cut by range and keep no distinct sets.
    InPlace { range: KeyRange, tables: Vec<IntGroups> },
}

/// Memory the rows a statement's scans and joins produce take, against its limit.
struct ResultBudget {
    used_bytes: AtomicU64,
    max_bytes: Option<u64>,
}

impl ResultBudget {
    /// Counts `rows` (just produced) against the limit.
    fn charge(&self, rows: &[Vec<Value>]) -> Result<(), ExecError> {
        self.charge_bytes(rows.iter().map(|row| row_bytes(row)).sum())
    }

    /// Counts rows laid back to back (`values`, [`TaskOutput::Values`]) against the limit.
    fn charge_values(&self, values: &[Value]) -> Result<(), ExecError> {
        self.charge_bytes(row_bytes(values) - std::mem::size_of::<Vec<Value>>() as u64)
    }

    fn charge_bytes(&self, bytes: u64) -> Result<(), ExecError> {
        let Some(max_bytes) = self.max_bytes else { return Ok(()) };
        if self.used_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes <= max_bytes {
            return Ok(());
        }
        Err(ExecError::new(sqlstate::OUT_OF_MEMORY, "out of memory")
            .with_detail(format!(
                "The statement's result rows would take more than {} MB (numadb.max_result_mb).",
                max_bytes >> 20
            ))
            .with_hint("Add a LIMIT or an aggregate, or raise numadb.max_result_mb (0: no limit)."))
    }
}

/// Memory a result row takes: the vector, its values, and the text they point to.
fn row_bytes(row: &[Value]) -> u64 {
    let text: usize = row.iter().map(|v| if let Value::Text(t) = v { t.len() + 16 } else { 0 }).sum();
    (std::mem::size_of::<Vec<Value>>() + std::mem::size_of_val(row) + text) as u64
}

/// Scans of at least this many rows cut their groups into [`MANY_MERGE_PARTS`] partitions, or one per worker if
/// there are more workers ([`ScanJob::merge_parts`]); smaller scans one per worker. Either way one merge task per
/// worker adds up its share of the partitions.
const MANY_MERGE_PARTS_ROWS: u64 = 1 << 20;

/// See [`MANY_MERGE_PARTS_ROWS`]: with `GROUP BY "C1"` over 5 million rows (3.16 million groups), a partition
/// holds about 12 000 groups, whose merge table (1 MiB) the caches hold. With 64 partitions of 50 000 groups,
/// that GROUP BY took 540 ms instead of 505 here (2 workers); `GROUP BY "C1" % 200000` took the same either way.
const MANY_MERGE_PARTS: usize = 256;

/// A morsel whose rows are not known yet.
const MORSEL_RUNNING: u64 = u64::MAX;

impl ScanJob {
    /// Whether the morsels before `index` have all finished and produced the rows a LIMIT wants, so that this
    /// one need not run. The result is then the same as without skipping: the first rows in morsel order.
    fn enough_before(&self, index: usize) -> bool {
        let Some(wanted) = self.rows_wanted else { return false };
        let mut produced = 0u64;
        for rows in &self.morsel_rows[..index] {
            match rows.load(Ordering::Acquire) {
                MORSEL_RUNNING => return false,
                rows => produced += rows,
            }
            if produced >= wanted {
                return true;
            }
        }
        false
    }

    /// The first error a row under the LIMIT raised, if fewer rows than it wants come before that row
    /// ([`ScanJob::limit_errors`]); once every morsel has finished.
    fn limit_error(&self) -> Option<ExecError> {
        let mut errors = std::mem::take(&mut *self.limit_errors.lock().unwrap_or_else(|p| p.into_inner()));
        let wanted = self.rows_wanted?;
        errors.sort_by_key(|(morsel, _)| *morsel);
        let (morsel, error) = errors.into_iter().next()?;
        // The morsel's own rows all come before its error.
        let before: u64 = self.morsel_rows[..=morsel]
            .iter()
            .map(|rows| match rows.load(Ordering::Acquire) {
                MORSEL_RUNNING => 0,
                rows => rows,
            })
            .sum();
        (before < wanted).then_some(error)
    }

    fn fail(&self, error: ExecError) -> numadb_scheduler::TaskError {
        let message = error.message.clone();
        let mut slot = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if slot.is_none() {
            *slot = Some(error);
        }
        numadb_scheduler::TaskError::new(message)
    }

    /// A task's aggregate output cut into the partitions of the groups that the merge tasks add up, where the
    /// scan has them ([`ScanJob::merge_parts`]); any other output as it is.
    fn partitioned(&self, output: TaskOutput) -> TaskOutput {
        match output {
            TaskOutput::Aggregate(partial, groups) if self.merge_parts > 0 => {
                // A task's own groups go to its worker's (`run_morsel`); any left here join those of worker 0.
                if let Some(groups) = groups {
                    self.return_worker_groups(0, groups);
                }
                TaskOutput::AggregateParts(group::split_partial(partial, self.merge_parts, &self.text_keys))
            }
            output => output,
        }
    }

    /// The groups worker `worker`'s earlier tasks of this scan found, for its next task to go on with.
    fn take_worker_groups(&self, worker: usize) -> Option<Box<IntGroups>> {
        let slot = self.worker_groups.get(worker.checked_rem(self.worker_groups.len())?)?;
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::take(&mut *slot) {
            WorkerGroups::Groups(groups) => Some(groups),
            _ => None,
        }
    }

    /// Hands a task's groups back to its worker ([`ScanJob::take_worker_groups`]); for a scan with
    /// [`ScanJob::merge_parts`], which has a slot per worker.
    fn return_worker_groups(&self, worker: usize, mut groups: Box<IntGroups>) {
        let index = worker % self.worker_groups.len().max(1);
        let Some(slot) = self.worker_groups.get(index) else {
            debug_assert!(false, "groups handed back to a scan without worker slots");
            return;
        };
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        // Another task with the same worker index (not a case the scheduler makes) left its groups: add them.
        if let WorkerGroups::Groups(other) = std::mem::take(&mut *slot) {
            groups.merge(*other);
        }
        *slot = WorkerGroups::Groups(groups);
    }

    /// How the merge tasks are to take the workers' groups: by ranges of the key ([`KeyRange::of`]) if every
    /// worker found its groups through its direct table and no task's groups took the general path (whose
    /// partials were cut into hash partitions as the tasks ended), read in place where none keeps distinct sets.
    fn choose_merge_source(&self) -> MergeSource {
        for slot in &self.slots {
            if let Some(TaskOutput::AggregateParts(partials)) = &*slot.lock().unwrap_or_else(|p| p.into_inner())
                && partials.iter().any(|partial| !partial.groups.is_empty())
            {
                return MergeSource::Cut(None);
            }
        }
        let mut workers: Vec<_> =
            self.worker_groups.iter().map(|slot| slot.lock().unwrap_or_else(|p| p.into_inner())).collect();
        let tables = || {
            workers.iter().filter_map(|worker| match &**worker {
                WorkerGroups::Groups(groups) => Some(&**groups),
                _ => None,
            })
        };
        let Some(range) = KeyRange::of(tables()) else { return MergeSource::Cut(None) };
        if tables().any(IntGroups::keeps_distinct_sets) {
            return MergeSource::Cut(Some(range));
        }
        let tables = workers
            .iter_mut()
            .filter_map(|worker| match std::mem::take(&mut **worker) {
                WorkerGroups::Groups(groups) => Some(*groups),
                _ => None,
            })
            .collect();
        MergeSource::InPlace { range, tables }
    }

    /// Adds up each partition in `parts` of every worker's groups and of every task's general-path groups, and
    /// finishes their rows: a merge task's share of the partitions. Each task's and each worker's slot is locked
    /// once for all of them.
    fn merge_partitions(&self, parts: &[usize]) -> Result<(), ExecError> {
        let started = Instant::now();
        let ScanOutput::Aggregate { group_by, aggregates, .. } = &self.output else {
            return Err(ExecError::internal("a merge of groups for a scan without aggregates"));
        };
        let source = self.merge_source.get_or_init(|| self.choose_merge_source());
        let (range, in_place) = match source {
            MergeSource::Cut(range) => (*range, None),
            MergeSource::InPlace { range, tables } => (Some(*range), Some((*range, tables))),
        };
        let mut general: Vec<PartialAggregate> = parts.iter().map(|_| PartialAggregate::default()).collect();
        for slot in &self.slots {
            if let Some(TaskOutput::AggregateParts(partials)) = &mut *slot.lock().unwrap_or_else(|p| p.into_inner()) {
                for (general, &part) in general.iter_mut().zip(parts) {
                    if let Some(partial) = partials.get_mut(part) {
                        general.merge(std::mem::take(partial));
                    }
                }
            }
        }
        // Each merge task starts at a different worker, so that the first to reach a worker's groups, which cuts
        // them into parts for all, is a different one for each: in worker order, every merge task waited on the
        // first to cut worker 0's, then worker 1's, and so on (16 workers: 2.5 million groups cut one worker
        // at a time).
        let workers = self.worker_groups.len();
        let first = parts.first().copied().unwrap_or(0);
        // Per partition, the workers' groups in it, all taken before any is added up: a partition's table is
        // then made, filled and finished while the caches hold it.
        let mut worker_parts: Vec<Vec<GroupsPart>> = parts.iter().map(|_| Vec::new()).collect();
        for slot in (0..workers).map(|offset| &self.worker_groups[(first + offset) % workers]) {
            let taken: Vec<Option<GroupsPart>> = {
                let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
                if let WorkerGroups::Groups(_) = &*slot
                    && let WorkerGroups::Groups(worker) = std::mem::take(&mut *slot)
                {
                    self.groups_spilled.fetch_add(worker.groups_spilled(), Ordering::Relaxed);
                    let worker_parts = worker.into_parts(self.merge_parts, range);
                    *slot = WorkerGroups::Parts(worker_parts.into_iter().map(Some).collect());
                }
                match &mut *slot {
                    WorkerGroups::Parts(worker_parts) => {
                        parts.iter().map(|&part| worker_parts.get_mut(part).and_then(Option::take)).collect()
                    }
                    _ => Vec::new(),
                }
            };
            for (into, worker_part) in worker_parts.iter_mut().zip(taken) {
                into.extend(worker_part);
            }
        }
        // Each partition's rows as they come: the session thread lays every task's side by side once, sized from
        // the start. (Appended to one vector here, a task's 1.6 million rows of `GROUP BY "C1"` grew it by
        // copying and faulting in fresh pages, a twentieth of the merge.)
        let mut chunks: Vec<Vec<Vec<Value>>> = Vec::with_capacity(parts.len());
        // With an ORDER BY … LIMIT over the groups, only this task's best (those its HAVING keeps) go on.
        let having = self.top_groups.as_ref().and_then(|top| top.filter.as_ref());
        let having = having.map(|filter| compile_where(filter, &self.params)).transpose()?;
        let checked = self.top_groups.as_ref().map_or(&[][..], |top| &top.checked[..]);
        let mut best = self.top_groups.as_ref().map(|top| TopRows::new(&top.top, &self.top_bound));
        let mut offered = 0;
        for ((taken, mut general), &part) in worker_parts.into_iter().zip(general).zip(parts) {
            let mut groups = in_place
                .and_then(|(range, tables)| IntGroups::merged_range(tables, aggregates, range, part, self.merge_parts));
            for worker_part in taken {
                groups.get_or_insert_with(|| IntGroups::new(group_by.len(), aggregates, 0)).merge_part(worker_part);
            }
            let part_rows = if general.groups.is_empty() {
                groups
                    .map_or_else(|| Ok(Vec::new()), |groups| groups.into_rows(group_by, aggregates, &self.text_keys))?
            } else {
                // Groups the general path found (rows of the delta, blocks the block-at-a-time path gave back): by
                // their key values, with these.
                if let Some(groups) = groups {
                    general.merge(groups.into_partial(group_by, aggregates, &self.text_keys));
                }
                general.finish(aggregates, true)?
            };
            if let Some(best) = &mut best {
                for row in part_rows {
                    if let Some(filter) = &having
                        && !filter.passes_row(&row, &self.params)?
                    {
                        continue;
                    }
                    for expr in checked {
                        expr.eval(&row, &self.params)?;
                    }
                    best.offer_row(row, offered, &self.params)?;
                    offered += 1;
                }
            } else if !part_rows.is_empty() {
                self.budget.charge(&part_rows)?;
                chunks.push(part_rows);
            }
        }
        if let Some(best) = best {
            let rows = best.finish();
            self.budget.charge(&rows)?;
            chunks.push(rows);
        }
        self.merged_rows.lock().unwrap_or_else(|p| p.into_inner()).extend(chunks);
        self.merge_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// A morsel: a block range of one partition, or the unsealed delta.
#[derive(Clone)]
enum Morsel {
    Blocks { partition: usize, blocks: Range<usize> },
    Delta,
}

/// Runs a plan.
pub fn execute(plan: &Plan, executor: &Executor<'_>) -> Result<ExecutionResult, ExecError> {
    check_interrupts(executor)?;
    // The subqueries first: a choice may wait for their values ([`KeyRange::reads_subquery`]).
    if let Plan::Subqueries { subqueries, main } = plan {
        return execute_with_subqueries(subqueries, main, executor);
    }
    if plan.chooses_as_it_runs() {
        return execute(&plan.chosen(executor.params)?, executor);
    }
    let started = Instant::now();
    let mut graph = TaskGraph::new();
    let mut jobs: Vec<Arc<ScanJob>> = Vec::new();
    let params: Arc<[Value]> = Arc::from(executor.params.to_vec());
    let budget = Arc::new(ResultBudget { used_bytes: AtomicU64::new(0), max_bytes: executor.result_bytes_max });
    collect_scans(plan, executor, &params, &budget, &mut graph, &mut jobs)?;
    let report = if graph.is_empty() {
        None
    } else {
        let scheduler = executor.scheduler.ok_or_else(|| ExecError::internal("a plan with scans needs a scheduler"))?;
        let query = scheduler.submit(graph);
        let outcome = wait(query, executor);
        for job in &jobs {
            if let Some(error) = job.error.lock().unwrap_or_else(|p| p.into_inner()).take() {
                return Err(error);
            }
            if let Some(error) = job.limit_error() {
                return Err(error);
            }
        }
        match outcome {
            Ok(report) => Some(report),
            Err(numadb_scheduler::QueryError::Cancelled)
                if executor.cancel.is_none_or(|c| !c.load(Ordering::Relaxed)) && executor.deadline.is_some() =>
            {
                return Err(timed_out());
            }
            Err(error) => return Err(error.into()),
        }
    };
    let post_started = Instant::now();
    let mut result = ExecutionResult { report, ..Default::default() };
    let mut next_job = 0;
    result.rows = finish(plan, executor, &jobs, &mut next_job, &budget, &mut result)?;
    // The scans of the statement's graph, then those operators ran as statements of their own (keyed scans).
    let later_scans = std::mem::take(&mut result.scans);
    for job in &jobs {
        result.scans.push(ScanStats {
            table: job.table.clone(),
            tasks: job.tasks,
            partitions: job.snapshot.partitions.len(),
            rows_scanned: job.rows_scanned.load(Ordering::Relaxed),
            rows_selected: job.rows_selected.load(Ordering::Relaxed),
            bytes_read: job.bytes_read.load(Ordering::Relaxed),
            task_time: Duration::from_nanos(job.task_ns.load(Ordering::Relaxed)),
            merge_time: Duration::from_nanos(job.merge_ns.load(Ordering::Relaxed)),
            groups_spilled: job.groups_spilled.load(Ordering::Relaxed),
            merged_by_key_range: matches!(
                job.merge_source.get(),
                Some(MergeSource::Cut(Some(_)) | MergeSource::InPlace { .. })
            ),
        });
    }
    result.scans.extend(later_scans);
    result.post_time = post_started.elapsed();
    result.elapsed = started.elapsed();
    Ok(result)
}

/// Runs a statement's subqueries in order, each with the earlier ones' results substituted, then the statement
/// with all of them; the counters of every part add up in the one result (`EXPLAIN ANALYZE` shows them all).
fn execute_with_subqueries(
    subqueries: &[Plan],
    main: &Plan,
    executor: &Executor<'_>,
) -> Result<ExecutionResult, ExecError> {
    let started = Instant::now();
    let mut results: Vec<Vec<Vec<Value>>> = Vec::with_capacity(subqueries.len());
    let mut parts = Vec::with_capacity(subqueries.len());
    for subquery in subqueries {
        let plan = subquery.try_map_exprs(&mut |e| e.substitute_subqueries(&results))?;
        let mut part = execute(&plan, executor)?;
        results.push(std::mem::take(&mut part.rows));
        parts.push(part);
    }
    let plan = main.try_map_exprs(&mut |e| e.substitute_subqueries(&results))?;
    let mut statement = execute(&plan, executor)?;
    // In plan order: the subqueries' scans and operators, then the statement's.
    let mut result = ExecutionResult { rows: std::mem::take(&mut statement.rows), ..Default::default() };
    parts.into_iter().chain(std::iter::once(statement)).for_each(|part| result.absorb(part));
    result.elapsed = started.elapsed();
    Ok(result)
}

fn timed_out() -> ExecError {
    ExecError::new(sqlstate::QUERY_CANCELED, "canceling statement due to statement timeout")
}

/// An error if the statement was cancelled or ran out of time: checked between operators on the session's
/// thread (the scans' tasks are stopped by [`wait`]).
fn check_interrupts(executor: &Executor<'_>) -> Result<(), ExecError> {
    if executor.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
        return Err(numadb_scheduler::QueryError::Cancelled.into());
    }
    if executor.deadline.is_some_and(|d| Instant::now() >= d) {
        return Err(timed_out());
    }
    Ok(())
}

/// Waits for the statement's tasks, cancelling them on timeout or when the cancel flag is raised.
fn wait(query: numadb_scheduler::Query, executor: &Executor<'_>) -> Result<QueryReport, numadb_scheduler::QueryError> {
    let deadline = executor.deadline;
    let Some(cancel) = executor.cancel else {
        return match deadline {
            Some(deadline) => query.wait_timeout(deadline.saturating_duration_since(Instant::now())),
            None => query.wait(),
        };
    };
    while !query.wait_for(CANCEL_POLL) {
        if cancel.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
            query.cancel();
            break;
        }
    }
    query.wait()
}

/// Adds the tasks of every scan in `plan` to `graph`, in plan order.
fn collect_scans(
    plan: &Plan,
    executor: &Executor<'_>,
    params: &Arc<[Value]>,
    budget: &Arc<ResultBudget>,
    graph: &mut TaskGraph,
    jobs: &mut Vec<Arc<ScanJob>>,
) -> Result<(), ExecError> {
    match plan {
        Plan::Scan(scan) => {
            jobs.push(add_scan(scan, executor, params, budget, graph, ScanNeeds::default())?);
            Ok(())
        }
        // `ORDER BY … LIMIT` right over a scan's rows: each task keeps only the rows that can be among the first
        // `OFFSET + LIMIT`, so a top-10 of millions of rows hands on tens, not millions, to the sort. Right over a
        // GROUP BY's rows, with or without HAVING: each merge task keeps only such groups, so a top-10 of millions
        // of groups hands on a few thousand to the sort on the session thread.
        Plan::Post {
            input,
            filter,
            projection,
            distinct: Dedup::No,
            order_by,
            offset,
            limit: Some(limit),
            with_ties: false,
        } if let Plan::Scan(scan) = input.as_ref()
            && !order_by.is_empty()
            && !order_by.iter().any(|key| key.expr.is_volatile())
            && match (&scan.output, filter) {
                (ScanOutput::Rows(_), filter) => filter.is_none(),
                (ScanOutput::Aggregate { .. }, filter) => !filter.as_ref().is_some_and(Expr::is_volatile),
            } =>
        {
            let limit = row_count(limit, params, "LIMIT")?;
            let offset = offset.as_ref().map(|e| row_count(e, params, "OFFSET")).transpose()?.flatten().unwrap_or(0);
            let count = limit.map(|limit| limit.saturating_add(offset)).filter(|&count| count <= TOP_N_MAX_ROWS);
            let needs = match &scan.output {
                ScanOutput::Rows(_) => {
                    ScanNeeds { top_n: count.map(|count| TopN::new(order_by, count, scan)), ..ScanNeeds::default() }
                }
                ScanOutput::Aggregate { .. } => ScanNeeds {
                    top_groups: count.map(|count| TopGroups {
                        filter: filter.clone(),
                        checked: projection
                            .iter()
                            .flatten()
                            .filter(|e| !matches!(e, Expr::Column { .. } | Expr::Literal { .. }))
                            .cloned()
                            .collect(),
                        top: TopN { keys: order_by.clone(), read_keys: None, count },
                    }),
                    ..ScanNeeds::default()
                },
            };
            jobs.push(add_scan(scan, executor, params, budget, graph, needs)?);
            Ok(())
        }
        // `LIMIT` right over a scan's rows (no filter, sort or DISTINCT between): the scan needs only its first
        // `OFFSET + LIMIT` rows.
        Plan::Post { input, filter: None, distinct: Dedup::No, order_by, offset, limit: Some(limit), .. }
            if order_by.is_empty()
                && matches!(input.as_ref(), Plan::Scan(ScanPlan { output: ScanOutput::Rows(_), .. })) =>
        {
            let Plan::Scan(scan) = input.as_ref() else { unreachable!("matched above") };
            let limit = row_count(limit, params, "LIMIT")?;
            let offset = offset.as_ref().map(|e| row_count(e, params, "OFFSET")).transpose()?.flatten().unwrap_or(0);
            let wanted = limit.map(|limit| (limit as u64).saturating_add(offset as u64));
            let needs = ScanNeeds { rows_wanted: wanted, ..ScanNeeds::default() };
            jobs.push(add_scan(scan, executor, params, budget, graph, needs)?);
            Ok(())
        }
        Plan::UnionAll(inputs) => {
            inputs.iter().try_for_each(|p| collect_scans(p, executor, params, budget, graph, jobs))
        }
        // The hashed side of a join probed in the other input's scan tasks (its rows back to back when it is a
        // scan); the probing scan runs later, from `finish`.
        Plan::Aggregate { input, aggregates, .. }
            if let Some((join, _)) = join_under_aggregate(input)
                && let Some(probing) = ProbePlan::of(join, aggregates, executor.join_key_filter) =>
        {
            match probing.other_rows_scan() {
                Some(scan) => {
                    let needs = ScanNeeds { values: true, ..ScanNeeds::default() };
                    jobs.push(add_scan(scan, executor, params, budget, graph, needs)?);
                    Ok(())
                }
                None => collect_scans(probing.other, executor, params, budget, graph, jobs),
            }
        }
        Plan::Post { input, .. } | Plan::Aggregate { input, .. } | Plan::Window { input, .. } => {
            collect_scans(input, executor, params, budget, graph, jobs)
        }
        // A join's keyed scan runs later, from `finish`, once the other input's keys are known.
        Plan::Join(join) if let Some(filter) = keyed_input(join, executor) => {
            let other = if filter.scans_right { &join.left } else { &join.right };
            collect_scans(other, executor, params, budget, graph, jobs)
        }
        Plan::SetOperation { left, right, .. } | Plan::Join(JoinPlan { left, right, .. }) => {
            collect_scans(left, executor, params, budget, graph, jobs)?;
            collect_scans(right, executor, params, budget, graph, jobs)
        }
        Plan::Lookup(_) | Plan::Values(_) | Plan::Series(_) | Plan::Recursive { .. } | Plan::WorkingTable { .. } => {
            Ok(())
        }
        Plan::Subqueries { .. } => Err(ExecError::internal("subqueries are only planned around a whole statement")),
    }
}

/// What a scan's consumer asks of its tasks beyond the plan.
#[derive(Default)]
struct ScanNeeds {
    /// A LIMIT's row count (with its OFFSET): see [`ScanJob::rows_wanted`].
    rows_wanted: Option<u64>,
    /// An ORDER BY with a LIMIT right over the scan: see [`ScanJob::top_n`].
    top_n: Option<TopN>,
    /// An ORDER BY with a LIMIT right over a GROUP BY: see [`ScanJob::top_groups`].
    top_groups: Option<TopGroups>,
    /// Rows back to back: see [`ScanJob::values`].
    values: bool,
}

/// Adds a scan's tasks, as `needs` asks: a LIMIT's `rows_wanted` lets tasks whose earlier morsels already produced
/// that many rows skip their work.
fn add_scan(
    scan: &ScanPlan,
    executor: &Executor<'_>,
    params: &Arc<[Value]>,
    budget: &Arc<ResultBudget>,
    graph: &mut TaskGraph,
    ScanNeeds { rows_wanted, top_n, top_groups, values }: ScanNeeds,
) -> Result<Arc<ScanJob>, ExecError> {
    let snapshot = scan.table.snapshot();
    let mut filter = scan.filter.as_ref().map(|f| compile_where(f, params)).transpose()?;
    // A LEFT join's probing left input keeps its rows without partners: no keys filter it.
    if let Some(JoinKeys { column, keys, probe }) = &scan.join_keys
        && !probe.as_ref().is_some_and(|probe| probe.preserves_scanned)
    {
        // After the WHERE clause's kernels, so that it decodes only blocks they leave rows in, and before its
        // leaves evaluated on rows, so that they skip the rows it drops. A WHERE clause of kernels alone stays one
        // part, which its kernels may evaluate together.
        let keys = Filter::IntKeys { column: *column, keys: Arc::clone(keys), sorted: None };
        filter = Some(match filter {
            None => keys,
            Some(Filter::And(mut parts)) if parts.iter().any(Filter::reads_rows) => {
                let first_on_rows = parts.iter().position(Filter::reads_rows).unwrap_or(parts.len());
                parts.insert(first_on_rows, keys);
                Filter::And(parts)
            }
            Some(filter) => Filter::And(vec![filter, keys]),
        });
    }
    let mut columns_read = Vec::new();
    if let Some(filter) = &filter {
        filter.columns(&mut columns_read);
    }
    let probe = scan.join_keys.as_ref().and_then(|keys| keys.probe.clone());
    let workers = executor.scheduler.map_or(1, Scheduler::worker_count).max(1);
    // Whether the tasks aggregate a block at a time (`group.rs`), and the numbers of the text columns that
    // aggregation reads: not where they hold too many strings to number, nor where nothing is grouped and every
    // aggregate is summarised per block without it.
    let (block_groups, text_keys) = match &scan.output {
        ScanOutput::Aggregate { group_by, aggregates, .. }
            if probe.is_none()
                && group::applies(group_by, aggregates)
                && (!group_by.is_empty() || !aggregates.iter().all(summarised_per_block)) =>
        {
            match TextKeys::new(group_by, aggregates, &snapshot.partitions) {
                Some(text_keys) => (true, text_keys),
                None => (false, TextKeys::default()),
            }
        }
        _ => (false, TextKeys::default()),
    };
    let aggregate_filters = match &scan.output {
        ScanOutput::Aggregate { aggregates, .. } if block_groups && aggregates.iter().any(|a| a.filter.is_some()) => {
            aggregates
                .iter()
                .map(|call| call.filter.as_ref().map(|filter| compile_where(filter, params)).transpose())
                .collect::<Result<_, _>>()?
        }
        _ => Vec::new(),
    };
    let merge_parts = if block_groups && group::merges_by_partition(&scan.output) {
        if snapshot.rows() >= MANY_MERGE_PARTS_ROWS { workers.max(MANY_MERGE_PARTS) } else { workers }
    } else {
        0
    };
    let mut output_columns = Vec::new();
    match (&scan.output, &probe) {
        // The output is over joined rows: what the scan reads for them is its input's row.
        (_, Some(probe)) => {
            probe.scan_projections.iter().for_each(|e| e.columns(&mut output_columns));
            if !output_columns.contains(&probe.scan_key_column) {
                output_columns.push(probe.scan_key_column);
            }
        }
        (ScanOutput::Rows(projections), None) => projections.iter().for_each(|e| e.columns(&mut output_columns)),
        (ScanOutput::Aggregate { group_by, aggregates, .. }, None) => {
            group_by.iter().for_each(|e| e.columns(&mut output_columns));
            aggregates.iter().for_each(|a| a.columns(&mut output_columns));
        }
    }
    output_columns.sort_unstable();
    for &column in &output_columns {
        if !columns_read.contains(&column) {
            columns_read.push(column);
        }
    }
    columns_read.sort_unstable();
    let scheduler = executor.scheduler.ok_or_else(|| ExecError::internal("a plan with scans needs a scheduler"))?;
    let partition_blocks: Vec<usize> = snapshot.partitions.iter().map(|partition| partition.blocks()).collect();
    let mut morsels: Vec<Morsel> = morsels_of(&partition_blocks, scheduler.worker_count(), executor.morsel_blocks)
        .into_iter()
        .map(|(partition, blocks)| Morsel::Blocks { partition, blocks })
        .collect();
    if snapshot.delta.rows() > 0 {
        morsels.push(Morsel::Delta);
    }
    let domains = scheduler.domains();
    // Each partition's preferred domain, once: the node holding most of the columns' bytes.
    let homes: Vec<Option<u32>> = snapshot
        .partitions
        .iter()
        .map(|partition| partition.home_node(&columns_read).and_then(|node| domains.domain_of_node(node)).map(|d| d.id))
        .collect();
    let preferred: Vec<Option<u32>> = morsels
        .iter()
        .map(|morsel| match morsel {
            Morsel::Blocks { partition, .. } => homes[*partition],
            Morsel::Delta => None,
        })
        .collect();
    let job = Arc::new(ScanJob {
        table: scan.table.name().to_string(),
        slots: (0..morsels.len()).map(|_| Mutex::new(None)).collect(),
        rows_wanted,
        top_bound: AtomicI64::new(NO_SHARED_BOUND),
        top_n,
        top_groups: top_groups.filter(|_| merge_parts > 0),
        morsel_rows: (0..morsels.len()).map(|_| AtomicU64::new(MORSEL_RUNNING)).collect(),
        limit_errors: Mutex::new(Vec::new()),
        budget: Arc::clone(budget),
        merged: Mutex::new(Vec::new()),
        snapshot,
        filter,
        output: scan.output.clone(),
        probe,
        values,
        columns_read,
        output_columns,
        params: Arc::clone(params),
        prefetch_blocks: executor.prefetch_blocks,
        error: Mutex::new(None),
        rows_scanned: AtomicU64::new(0),
        rows_selected: AtomicU64::new(0),
        bytes_read: AtomicU64::new(0),
        task_ns: AtomicU64::new(0),
        merge_ns: AtomicU64::new(0),
        groups_spilled: AtomicU64::new(0),
        merge_parts,
        merged_rows: Mutex::new(Vec::new()),
        worker_groups: (0..if merge_parts > 0 { workers } else { 0 }).map(|_| Mutex::default()).collect(),
        merge_source: OnceLock::new(),
        block_groups,
        aggregate_filters,
        text_keys,
        tasks: morsels.len(),
    });
    let mut by_domain: BTreeMap<Option<u32>, Vec<NodeId>> = BTreeMap::new();
    let mut members: BTreeMap<Option<u32>, Vec<usize>> = BTreeMap::new();
    for (index, morsel) in morsels.into_iter().enumerate() {
        let task_job = Arc::clone(&job);
        let node = graph.add(
            TaskSpec::new(move |ctx| {
                if task_job.enough_before(index) {
                    task_job.morsel_rows[index].store(0, Ordering::Release);
                    return Ok(());
                }
                let started = Instant::now();
                let mut limit_error = None;
                let outcome = run_morsel(&task_job, &morsel, ctx, &mut limit_error);
                task_job.task_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
                match outcome {
                    Ok(output) => {
                        let output = task_job.partitioned(output);
                        if let TaskOutput::Rows(rows) = &output {
                            task_job.morsel_rows[index].store(rows.len() as u64, Ordering::Release);
                        }
                        if let Some(error) = limit_error {
                            task_job.limit_errors.lock().unwrap_or_else(|p| p.into_inner()).push((index, error));
                        }
                        *task_job.slots[index].lock().unwrap_or_else(|p| p.into_inner()) = Some(output);
                        Ok(())
                    }
                    Err(error) => Err(task_job.fail(error)),
                }
            })
            .prefer_maybe(preferred[index]),
        );
        by_domain.entry(preferred[index]).or_default().push(node);
        members.entry(preferred[index]).or_default().push(index);
    }
    if merge_parts > 0 {
        // One merge task per worker, each adding up every `merge_tasks`-th hash partition of the groups, spread
        // over the domains the scan's tasks preferred. (A task per partition, 64 of them, doubled the time of a
        // GROUP BY over the few rows a filter selects of a large table: 0.13 -> 0.29 ms.)
        let nodes: Vec<NodeId> = by_domain.values().flatten().copied().collect();
        let domains: Vec<u32> = by_domain.keys().filter_map(|&domain| domain).collect();
        let merge_tasks = workers.min(merge_parts);
        for task in 0..merge_tasks {
            let merge_job = Arc::clone(&job);
            let domain = (!domains.is_empty()).then(|| domains[task % domains.len()]);
            graph.add_after(
                &nodes,
                TaskSpec::new(move |_| {
                    let parts: Vec<usize> = (task..merge_job.merge_parts).step_by(merge_tasks).collect();
                    merge_job.merge_partitions(&parts).map_err(|error| merge_job.fail(error))
                })
                .prefer_maybe(domain),
            );
        }
    } else if matches!(scan.output, ScanOutput::Aggregate { .. }) {
        // One merge per domain, near that domain's partials.
        for (domain, nodes) in by_domain {
            let merge_job = Arc::clone(&job);
            let indexes = members.remove(&domain).unwrap_or_default();
            graph.add_after(
                &nodes,
                TaskSpec::new(move |_| {
                    let started = Instant::now();
                    let mut merged = PartialAggregate::default();
                    let mut int_groups: Option<Box<IntGroups>> = None;
                    for index in indexes {
                        let slot = merge_job.slots[index].lock().unwrap_or_else(|p| p.into_inner()).take();
                        if let Some(TaskOutput::Aggregate(partial, task_groups)) = slot {
                            merged.merge(partial);
                            match (&mut int_groups, task_groups) {
                                (Some(groups), Some(task_groups)) => groups.merge(*task_groups),
                                (None, task_groups) => int_groups = task_groups,
                                (Some(_), None) => {}
                            }
                        }
                    }
                    if let (Some(groups), ScanOutput::Aggregate { group_by, aggregates, .. }) =
                        (int_groups, &merge_job.output)
                    {
                        merged.merge(groups.into_partial(group_by, aggregates, &merge_job.text_keys));
                    }
                    merge_job.merged.lock().unwrap_or_else(|p| p.into_inner()).push(merged);
                    merge_job.merge_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    Ok(())
                })
                .prefer_maybe(domain),
            );
        }
    }
    Ok(job)
}

/// Decoded integer blocks of the current block, by column, so that several expressions over one column decode it
/// once. A column's buffer is kept from block to block (it was allocated and freed per block and column: a tenth
/// of a join's scan tasks' time went to that).
struct BlockCache {
    block: usize,
    ints: Vec<Option<Box<[i64; BLOCK_ROWS]>>>,
    /// Whether a column's buffer holds the current block.
    current: Vec<bool>,
}

impl BlockCache {
    fn new(columns: usize) -> Self {
        BlockCache { block: usize::MAX, ints: (0..columns).map(|_| None).collect(), current: vec![false; columns] }
    }

    fn ints(&mut self, partition: &Partition, column: usize, block: usize) -> Option<&[i64; BLOCK_ROWS]> {
        let ColumnData::Int(ints) = partition.column(column).data() else { return None };
        Some(self.decoded(ints, column, block))
    }

    /// Block `block` of column `column`'s integers `ints` (its values or its codes), decoded once per block.
    fn decoded(&mut self, ints: &IntColumn, column: usize, block: usize) -> &[i64; BLOCK_ROWS] {
        if self.block != block {
            self.block = block;
            self.current.iter_mut().for_each(|current| *current = false);
        }
        let decoded = self.ints[column].get_or_insert_with(|| Box::new([0i64; BLOCK_ROWS]));
        if !self.current[column] {
            ints.decode_block(block, decoded);
            self.current[column] = true;
        }
        decoded
    }

    /// Text column `column`'s dictionary in `partition` and its codes in block `block` (`None` if it is not a
    /// text column), decoded once per block like [`BlockCache::ints`].
    fn codes<'p>(
        &mut self,
        partition: &'p Partition,
        column: usize,
        block: usize,
    ) -> Option<(&'p Dictionary, &[i64; BLOCK_ROWS])> {
        let ColumnData::Text { dictionary, codes } = partition.column(column).data() else { return None };
        Some((dictionary, self.decoded(codes, column, block)))
    }

    /// Fills `row` with the values of `columns` at partition row `r`.
    fn fill_row(&mut self, partition: &Partition, columns: &[usize], r: usize, row: &mut [Value]) {
        for &c in columns {
            row[c] = self.value(partition, c, r);
        }
    }

    /// The value of column `c` at partition row `r`.
    #[inline]
    fn value(&mut self, partition: &Partition, c: usize, r: usize) -> Value {
        let chunk = partition.column(c);
        if chunk.is_null(r) {
            Value::Null
        } else if let Some(decoded) = self.ints(partition, c, r / BLOCK_ROWS) {
            Value::Int(decoded[r % BLOCK_ROWS])
        } else {
            chunk.value(r)
        }
    }
}

/// Calls `f` with each row set in `mask`, in order, until it fails.
///
/// Tried and not kept: a plain loop over the 64 rows of a word of all rows (every word of an unfiltered scan's
/// full blocks). `GROUP BY "C1" % 100` over 5 million rows, whose aggregation loops all come here, took 17.1 ms
/// with it against 14.6 without (old and new binary alternated three times).
#[inline]
fn try_for_each_set(mask: &BlockMask, mut f: impl FnMut(usize) -> Result<(), ExecError>) -> Result<(), ExecError> {
    for (word_index, &word) in mask.iter().enumerate() {
        let mut bits = word;
        while bits != 0 {
            f(word_index * 64 + bits.trailing_zeros() as usize)?;
            bits &= bits - 1;
        }
    }
    Ok(())
}

/// Calls `f` with each row set in `mask`, in order.
#[inline]
pub(crate) fn for_each_set(mask: &BlockMask, mut f: impl FnMut(usize)) {
    // Never fails: `f` cannot.
    let _ = try_for_each_set(mask, |i| {
        f(i);
        Ok(())
    });
}

thread_local! {
    /// A worker's filter masks, kept from one morsel to the next: setting up a morsel's 32 KiB of masks anew took
    /// 14% of a thesis aggregation whose zone maps settled every block.
    static MORSEL_MASKS: Cell<Option<CombinedMasks>> = const { Cell::new(None) };
}

/// Runs a morsel. Under a LIMIT, a row whose output raises an error ends the morsel, with the rows before it, and
/// the error is left in `limit_error` ([`ScanJob::limit_errors`]).
fn run_morsel(
    job: &ScanJob,
    morsel: &Morsel,
    ctx: &TaskContext<'_>,
    limit_error: &mut Option<ExecError>,
) -> Result<TaskOutput, ExecError> {
    if ctx.is_cancelled() {
        return Ok(TaskOutput::Rows(Vec::new()));
    }
    let params = &job.params[..];
    let width = job.columns_read.last().map_or(0, |&c| c + 1);
    let (partition, blocks, numbers) = match morsel {
        Morsel::Delta => return run_delta(job, width, ctx, limit_error),
        Morsel::Blocks { partition, blocks } => {
            (&job.snapshot.partitions[*partition], blocks.clone(), job.text_keys.numbers_in(*partition))
        }
    };
    // Bytes really loaded, per column: the filter's leaves report theirs; the output adds the blocks it decodes.
    let mut reads = vec![0u64; partition.columns().len()];
    let mut masks = MORSEL_MASKS.take().unwrap_or_else(|| CombinedMasks::new(Combine::Or, 0));
    if let Some(filter) = &job.filter {
        filter.true_masks(partition, blocks.clone(), params, job.prefetch_blocks, &mut reads, &mut masks)?;
    }
    // Blocks whose masks the filter left at an OR's identity select nothing: most of a selective scan's.
    let unwritten_select_nothing = job.filter.is_some() && masks.combine() == Combine::Or;
    let rows_in_partition = partition.rows();
    let mut selected_total = 0u64;
    let mut cache = BlockCache::new(width);
    let mut row = vec![Value::Null; width];
    // Output rows of plain columns (a join's inputs, `SELECT *`) are copied out of the row, not evaluated.
    let plain_columns: Option<Vec<usize>> = match &job.output {
        ScanOutput::Rows(projections) => projections
            .iter()
            .map(|e| match e {
                Expr::Column { index, .. } if *index < width => Some(*index),
                _ => None,
            })
            .collect(),
        ScanOutput::Aggregate { .. } => None,
    };
    let mut output = match &job.output {
        ScanOutput::Rows(_) if job.values => TaskOutput::Values(Vec::new()),
        ScanOutput::Rows(_) => TaskOutput::Rows(Vec::new()),
        ScanOutput::Aggregate { .. } => TaskOutput::Aggregate(PartialAggregate::default(), None),
    };
    let mut plain_state: Option<Vec<Accumulator>> = None;
    // Integer keys and arguments go a block at a time (`group.rs`): with GROUP BY, and without it where some
    // aggregate is more than a plain column (an expression, DISTINCT), which `aggregate_block` takes row by row.
    let mut int_groups = match &job.output {
        ScanOutput::Aggregate { group_by, aggregates, .. } if job.block_groups => {
            let worker = if job.merge_parts > 0 { job.take_worker_groups(ctx.worker_index()) } else { None };
            Some(worker.unwrap_or_else(|| {
                let mut groups = IntGroups::new(group_by.len(), aggregates, partition.columns().len());
                groups.spill_into(job.merge_parts);
                Box::new(groups)
            }))
        }
        _ => None,
    };
    // The rows each aggregate's FILTER keeps in the block at hand (`ScanJob::aggregate_filters`).
    let (mut filtered, mut filter_scratch) = (Vec::new(), Vec::new());
    let mut filter_reads = if job.aggregate_filters.is_empty() { Vec::new() } else { vec![0; reads.len()] };
    let mut top = job.top_n.as_ref().map(|top_n| TopRows::new(top_n, &job.top_bound));
    let (mut probe_buffers, mut joined_rows) = (ProbeBuffers::default(), 0u64);
    // `COUNT(*)`s alone (the thesis query) need only the number of selected rows: counted per block, added once.
    let counts_only = job.output_columns.is_empty()
        && job.probe.is_none()
        && matches!(&job.output, ScanOutput::Aggregate { group_by, aggregates, .. }
            if group_by.is_empty()
                && aggregates.iter().all(|a| a.function == AggregateFunction::CountStar && a.filter.is_none()));
    // The rows of the morsel's blocks before `end` (a position): what it scanned when it stops there.
    let rows_before = |end: usize| {
        let rows_end = ((blocks.start + end) * BLOCK_ROWS).min(rows_in_partition);
        rows_end.saturating_sub(blocks.start * BLOCK_ROWS) as u64
    };
    let positions: Box<dyn Iterator<Item = usize>> =
        if unwritten_select_nothing { Box::new(masks.written()) } else { Box::new(0..blocks.len()) };
    let mut stopped_at = blocks.len();
    for position in positions {
        let block = blocks.start + position;
        // Under a LIMIT, a morsel's first rows are all the statement can need of it (and of those after it).
        if let (Some(wanted), TaskOutput::Rows(rows)) = (job.rows_wanted, &output)
            && rows.len() as u64 >= wanted
        {
            stopped_at = position;
            break;
        }
        // Only a partition's last block can be partly filled.
        let full = (block + 1) * BLOCK_ROWS <= rows_in_partition;
        let tail = if full { ALL_ROWS } else { tail_mask(rows_in_partition, block) };
        let mask: BlockMask = match (job.filter.is_some(), full) {
            (false, _) => tail,
            (true, true) => masks.get(position),
            (true, false) => {
                let filtered = masks.get(position);
                std::array::from_fn(|i| filtered[i] & tail[i])
            }
        };
        let selected = bitpack::count(&mask);
        selected_total += u64::from(selected);
        if selected == 0 || counts_only {
            continue;
        }
        if let Some(top) = &top
            && top.block_cannot_beat(partition, block, &mask)
        {
            continue;
        }
        for &column in &job.output_columns {
            reads[column] += partition.column(column).bytes_of_blocks(block..block + 1);
        }
        let first_row = block * BLOCK_ROWS;
        if let (Some(probe), ScanOutput::Aggregate { group_by, aggregates, .. }, TaskOutput::Aggregate(partial, _)) =
            (&job.probe, &job.output, &mut output)
        {
            let into = (&group_by[..], &aggregates[..], &mut plain_state, partial);
            let block_rows = (&**partition, block, &mask);
            if !probe_block(
                job,
                probe,
                block_rows,
                &mut cache,
                &mut row,
                &mut probe_buffers,
                &mut joined_rows,
                into,
                ctx,
            )? {
                // The statement reports why it was cancelled; the task just stops.
                return Ok(TaskOutput::Rows(Vec::new()));
            }
            continue;
        }
        if let (Some(groups), ScanOutput::Aggregate { group_by, aggregates, .. }) = (&mut int_groups, &job.output) {
            // Each aggregate's FILTER on the selected rows; one that raises an error sends the block down the
            // general path, which raises the error it meets first, as it does for the arguments' errors.
            filtered.clear();
            let mut filters_failed = false;
            for filter in &job.aggregate_filters {
                filtered.push(match filter {
                    Some(filter) => {
                        // The bytes are the output's (`output_columns` holds the filters' columns).
                        let reads = &mut filter_reads;
                        match filter.true_rows_among(partition, block, params, &mask, reads, &mut filter_scratch) {
                            Ok(kept) => Some(kept),
                            Err(_) => {
                                filters_failed = true;
                                break;
                            }
                        }
                    }
                    None => None,
                });
            }
            if !filters_failed
                && groups.add_block(group_by, aggregates, partition, &numbers, block, &mask, &filtered, params).is_ok()
            {
                continue;
            }
        }
        match (&job.output, &mut output) {
            (ScanOutput::Aggregate { group_by, aggregates, .. }, TaskOutput::Aggregate(..)) if group_by.is_empty() => {
                let state = plain_state.get_or_insert_with(|| aggregates.iter().map(Accumulator::new).collect());
                for (call, accumulator) in aggregates.iter().zip(state.iter_mut()) {
                    aggregate_block(
                        call,
                        accumulator,
                        partition,
                        block,
                        &mask,
                        selected,
                        &mut cache,
                        &mut row,
                        params,
                    )?;
                }
            }
            (ScanOutput::Aggregate { group_by, aggregates, .. }, TaskOutput::Aggregate(partial, _)) => {
                try_for_each_set(&mask, |i| {
                    cache.fill_row(partition, &job.columns_read, first_row + i, &mut row);
                    group_row(group_by, aggregates, partial, &row, params)
                })?;
            }
            (ScanOutput::Rows(projections), TaskOutput::Rows(_)) if let Some(top) = &mut top => {
                let first_keys = top.first_key_block(partition, block, &mask, params)?;
                let candidates = first_keys.as_ref().map_or(mask, |keys| top.unbeaten(keys, &mask));
                try_for_each_set(&candidates, |i| {
                    cache.fill_row(partition, &job.columns_read, first_row + i, &mut row);
                    top.offer(projections, &row, first_row + i, params)
                })?;
            }
            // Plain columns are read on their own, not through a row of every column the scan reads (the filter's
            // too).
            (ScanOutput::Rows(_), TaskOutput::Values(values)) if let Some(columns) = &plain_columns => {
                let before = values.len();
                for_each_set(&mask, |i| {
                    values.extend(columns.iter().map(|&c| cache.value(partition, c, first_row + i)));
                });
                job.budget.charge_values(&values[before..])?;
            }
            (ScanOutput::Rows(projections), TaskOutput::Values(values)) => {
                let before = values.len();
                try_for_each_set(&mask, |i| {
                    cache.fill_row(partition, &job.columns_read, first_row + i, &mut row);
                    for expr in projections {
                        values.push(read_or_eval(expr, &row, params)?);
                    }
                    Ok(())
                })?;
                job.budget.charge_values(&values[before..])?;
            }
            (ScanOutput::Rows(_), TaskOutput::Rows(rows)) if let Some(columns) = &plain_columns => {
                let before = rows.len();
                for_each_set(&mask, |i| {
                    rows.push(columns.iter().map(|&c| cache.value(partition, c, first_row + i)).collect());
                });
                job.budget.charge(&rows[before..])?;
            }
            (ScanOutput::Rows(projections), TaskOutput::Rows(rows)) => {
                let before = rows.len();
                // Under a LIMIT, rows are made only until there are enough, and one that raises an error ends
                // the morsel (PostgreSQL evaluates no row past the LIMIT: `SELECT -x … WHERE id > 4990 LIMIT 3`
                // raises nothing for a row 5000 whose x is BIGINT's smallest).
                let wanted = job.rows_wanted.map_or(usize::MAX, |wanted| wanted as usize);
                try_for_each_set(&mask, |i| {
                    if rows.len() >= wanted || limit_error.is_some() {
                        return Ok(());
                    }
                    cache.fill_row(partition, &job.columns_read, first_row + i, &mut row);
                    match projections.iter().map(|e| e.eval(&row, params)).collect::<Result<Vec<_>, _>>() {
                        Ok(values) => rows.push(values),
                        Err(error) if job.rows_wanted.is_some() => *limit_error = Some(error),
                        Err(error) => return Err(error),
                    }
                    Ok(())
                })?;
                job.budget.charge(&rows[before..])?;
                if limit_error.is_some() {
                    stopped_at = position + 1;
                    break;
                }
            }
            _ => return Err(ExecError::internal("scan output and task output disagree")),
        }
    }
    MORSEL_MASKS.set(Some(masks));
    if let Some(probe) = &job.probe {
        probe.joined_rows.fetch_add(joined_rows, Ordering::Relaxed);
    }
    job.rows_scanned.fetch_add(rows_before(stopped_at), Ordering::Relaxed);
    job.rows_selected.fetch_add(selected_total, Ordering::Relaxed);
    // Account the bytes read on the nodes that hold them.
    for (column, &bytes) in reads.iter().enumerate().filter(|(_, b)| **b > 0) {
        job.bytes_read.fetch_add(bytes, Ordering::Relaxed);
        for &(node, share) in partition.column(column).node_shares().iter() {
            ctx.account_read(node, (bytes as f64 * share).round() as u64);
        }
    }
    if counts_only
        && selected_total > 0
        && let ScanOutput::Aggregate { aggregates, .. } = &job.output
    {
        let state = plain_state.get_or_insert_with(|| aggregates.iter().map(Accumulator::new).collect());
        for accumulator in state.iter_mut() {
            accumulator.add_ints(selected_total as i64, 0, 0, 0);
        }
    }
    if let (Some(state), TaskOutput::Aggregate(partial, _)) = (plain_state, &mut output) {
        partial.groups.insert(Vec::new(), state);
    }
    if let (Some(groups), TaskOutput::Aggregate(_, kept)) = (int_groups, &mut output) {
        if job.merge_parts > 0 {
            job.return_worker_groups(ctx.worker_index(), groups);
        } else {
            *kept = Some(groups);
        }
    }
    if let (Some(top), TaskOutput::Rows(rows)) = (top, &mut output) {
        *rows = top.finish();
        job.budget.charge(rows)?;
    }
    Ok(output)
}

/// Above this many rows (`OFFSET + LIMIT`) an ORDER BY's tasks hand on all their rows rather than their best.
const TOP_N_MAX_ROWS: usize = 1 << 16;

/// The sort keys and row count of an `ORDER BY … LIMIT` right over a scan (see [`TopRows`]).
#[derive(Debug, Clone)]
struct TopN {
    /// The ORDER BY keys, over the scan's output rows.
    keys: Vec<SortKey>,
    /// The same keys over the rows the scan reads, when its output columns are plain columns of them (they cannot
    /// fail): a row is then judged before it is projected, and only rows kept are.
    read_keys: Option<Vec<SortKey>>,
    /// `OFFSET + LIMIT`.
    count: usize,
}

impl TopN {
    fn new(keys: &[SortKey], count: usize, scan: &ScanPlan) -> TopN {
        let read_keys = match &scan.output {
            ScanOutput::Rows(projections) if projections.iter().all(|p| matches!(p, Expr::Column { .. })) => keys
                .iter()
                .map(|key| Ok(SortKey { expr: over_read_rows(&key.expr, projections)?, ..key.clone() }))
                .collect::<Result<Vec<_>, ExecError>>()
                .ok(),
            _ => None,
        };
        TopN { keys: keys.to_vec(), read_keys, count }
    }
}

/// The HAVING clause, sort keys and row count of an `ORDER BY … LIMIT` right over a GROUP BY's rows, which its merge
/// tasks apply to the groups each finishes ([`ScanJob::merge_partitions`]). The session thread still filters, sorts
/// and limits the groups they hand on, as it would all of them: each task's best `count` hold the statement's.
#[derive(Debug, Clone)]
struct TopGroups {
    /// Over the grouped rows, as the sort keys (`TopN::read_keys` is `None`).
    filter: Option<Expr>,
    /// The select list's expressions that may fail (not plain columns or constants), over the grouped rows: each
    /// group its HAVING keeps has them evaluated, as PostgreSQL's aggregate evaluates its output for every group
    /// before the sort and limit (`SELECT w, 10 / (count(*) - 1) … ORDER BY … LIMIT 5` divides by zero).
    checked: Vec<Expr>,
    top: TopN,
}

/// `expr` over a scan's output rows, rewritten over the rows the scan reads: each output column becomes the
/// expression that projects it.
fn over_read_rows(expr: &Expr, projections: &[Expr]) -> Result<Expr, ExecError> {
    match expr {
        Expr::Column { index, .. } => {
            projections.get(*index).cloned().ok_or_else(|| ExecError::internal("sort key past the scan's output"))
        }
        _ => expr.try_map_children(&mut |e| over_read_rows(e, projections)),
    }
}

/// [`ScanJob::top_bound`] before a task has published one (no first key is past it either way).
const NO_SHARED_BOUND: i64 = i64::MIN;

/// The best `count` rows one task has seen by the sort keys, ties going to the earlier row: exactly the rows of
/// its morsel that can be among the statement's first `count`, since the final sort is stable over the rows in
/// scan order. Rows are kept as candidates and cut down to `count` (a selection, not a sort) whenever twice as
/// many have gathered; after the first cut, the `count`-th row's keys are a bound that a row must sort strictly
/// before to be kept at all, so most rows of a large morsel cost a key evaluation and one comparison.
struct TopRows<'k> {
    keys: &'k [SortKey],
    /// The job's shared bound on the first key ([`ScanJob::top_bound`]), stored as the key's value for a
    /// descending key and negated (saturating) for an ascending one, so that larger is always tighter.
    shared: &'k AtomicI64,
    read_keys: Option<&'k [SortKey]>,
    count: usize,
    /// (keys, row number, row).
    candidates: Vec<(Vec<Value>, usize, Vec<Value>)>,
    bound: Option<Vec<Value>>,
    /// Reused buffers for the projected row being offered and its keys.
    values: Vec<Value>,
    row_keys: Vec<Value>,
}

impl<'k> TopRows<'k> {
    fn new(top: &'k TopN, shared: &'k AtomicI64) -> TopRows<'k> {
        TopRows {
            keys: &top.keys,
            shared,
            read_keys: top.read_keys.as_deref(),
            count: top.count,
            candidates: Vec::new(),
            bound: None,
            values: Vec::new(),
            row_keys: Vec::new(),
        }
    }

    /// Projects `row` (row number `number` in scan order) and keeps it if it may be among the best.
    fn offer(&mut self, projections: &[Expr], row: &[Value], number: usize, params: &[Value]) -> Result<(), ExecError> {
        if self.count == 0 {
            return Ok(());
        }
        self.row_keys.clear();
        if let Some(read_keys) = self.read_keys {
            for key in read_keys {
                self.row_keys.push(key.expr.eval(row, params)?);
            }
        } else {
            self.project(projections, row, params)?;
            for key in self.keys {
                self.row_keys.push(key.expr.eval(&self.values, params)?);
            }
        }
        if let Some(bound) = &self.bound
            && compare_sort_keys(&self.row_keys, bound, self.keys).is_ge()
        {
            return Ok(());
        }
        if self.read_keys.is_some() {
            self.project(projections, row, params)?;
        }
        self.candidates.push((self.row_keys.clone(), number, self.values.clone()));
        if self.candidates.len() >= 2 * self.count + 64 {
            self.cut();
        }
        Ok(())
    }

    /// Keeps `row` (number `number` in its task's order) if it may be among the best, by keys over the row itself:
    /// a row beaten is dropped where it is, never copied.
    fn offer_row(&mut self, row: Vec<Value>, number: usize, params: &[Value]) -> Result<(), ExecError> {
        if self.count == 0 {
            return Ok(());
        }
        self.row_keys.clear();
        for key in self.keys {
            self.row_keys.push(key.expr.eval(&row, params)?);
        }
        if let Some(bound) = &self.bound
            && compare_sort_keys(&self.row_keys, bound, self.keys).is_ge()
        {
            return Ok(());
        }
        self.candidates.push((self.row_keys.clone(), number, row));
        if self.candidates.len() >= 2 * self.count + 64 {
            self.cut();
        }
        Ok(())
    }

    /// Once there is a bound, the first key is an integer expression over the rows read and the other keys are
    /// plain columns or constants, that key for the selected rows of a block (`mask`), evaluated a block at a
    /// time: a row whose first key sorts after the bound's is out ([`TopRows::beaten`]) before its row is even
    /// filled in.
    fn first_key_block(
        &self,
        partition: &Partition,
        block: usize,
        mask: &BlockMask,
        params: &[Value],
    ) -> Result<Option<crate::vector::IntBlock>, ExecError> {
        let (Some(_), Some([first, rest @ ..])) = (&self.bound, self.read_keys) else { return Ok(None) };
        // A row passed over has its other keys never evaluated: only keys that cannot fail may be left out so.
        let cannot_fail = |key: &SortKey| matches!(key.expr, Expr::Column { .. } | Expr::Literal { .. });
        if !crate::vector::is_int_expr(&first.expr) || !rest.iter().all(cannot_fail) {
            return Ok(None);
        }
        // Its bytes are counted where the output columns are (once per block with selected rows).
        let mut reads = vec![0u64; partition.columns().len()];
        let unselected: BlockMask = std::array::from_fn(|word| !mask[word]);
        crate::vector::int_block_of(&first.expr, partition, block, params, &unselected, &mut reads).map(Some)
    }

    /// Whether no selected row of block `block` can beat the bound: the first sort key is a column whose zone map
    /// puts every value of the block after the bound's first key (strictly: a tie may still win on the next
    /// keys), and no selected row is NULL there (NULLs sort by their own rule). Such a block is passed over
    /// unread: once the bound is good, a top-10 of millions of random values has one block in hundreds to read.
    fn block_cannot_beat(&self, partition: &Partition, block: usize, mask: &BlockMask) -> bool {
        let Some([first, ..]) = self.read_keys else { return false };
        let Expr::Column { index, .. } = &first.expr else { return false };
        // The tighter of this task's bound and the job's, as a value that is larger when tighter.
        let own = match self.bound.as_ref().and_then(|b| b.first()) {
            Some(Value::Int(own)) => Some(if first.descending { *own } else { own.saturating_neg() }),
            _ => None,
        };
        let shared = self.shared.load(Ordering::Relaxed);
        let tightest = match own {
            Some(own) => own.max(shared),
            None if shared != NO_SHARED_BOUND => shared,
            None => return false,
        };
        let chunk = partition.column(*index);
        let ColumnData::Int(ints) = chunk.data() else { return false };
        let Some(meta) = ints.blocks().get(block) else { return false };
        if let Some(nulls) = chunk.null_mask(block)
            && nulls.iter().zip(mask).any(|(null, selected)| null & selected != 0)
        {
            return false;
        }
        // Every value of the block is strictly worse than the bound (`-base` may saturate: only ever to a bound no
        // value is past).
        if first.descending { meta.max < tightest } else { meta.base.saturating_neg() < tightest }
    }

    /// Whether row `row` of a block sorts after the bound by its first key alone.
    fn beaten(&self, first_keys: &crate::vector::IntBlock, row: usize) -> bool {
        let (Some(bound), Some(first)) = (&self.bound, self.keys.first()) else { return false };
        let key = first_keys.value(row);
        compare_sort_keys(std::slice::from_ref(&key), &bound[..1], std::slice::from_ref(first)).is_gt()
    }

    /// The rows of `mask` that the bound does not beat by their first key alone ([`TopRows::beaten`]). Where the
    /// bound's first key is an integer, the block's non-NULL keys are compared with it in one pass the compiler
    /// vectorizes (a top-10 of millions of rows compares nearly all of them, and a comparison of `Value`s row by
    /// row was a third of its time); NULL keys, which sort by their own rule, and other bounds go row by row.
    fn unbeaten(&self, first_keys: &crate::vector::IntBlock, mask: &BlockMask) -> BlockMask {
        let (Some(bound), Some(first)) = (&self.bound, self.keys.first()) else { return *mask };
        let by_row = |rows: &BlockMask| -> BlockMask {
            let mut kept = [0u64; MASK_WORDS];
            for_each_set(rows, |i| {
                if !self.beaten(first_keys, i) {
                    kept[i / 64] |= 1 << (i % 64);
                }
            });
            kept
        };
        let Value::Int(bound) = bound[0] else { return by_row(mask) };
        let (values, nulls) = (first_keys.values(), first_keys.nulls());
        let bits = if first.descending {
            crate::vector::rows_where(values, |key| key >= bound)
        } else {
            crate::vector::rows_where(values, |key| key <= bound)
        };
        let mut kept: BlockMask = std::array::from_fn(|word| bits[word] & mask[word] & !nulls[word]);
        let null_rows: BlockMask = std::array::from_fn(|word| mask[word] & nulls[word]);
        if null_rows.iter().any(|&word| word != 0) {
            let null_kept = by_row(&null_rows);
            kept = std::array::from_fn(|word| kept[word] | null_kept[word]);
        }
        kept
    }

    fn project(&mut self, projections: &[Expr], row: &[Value], params: &[Value]) -> Result<(), ExecError> {
        self.values.clear();
        for expr in projections {
            self.values.push(expr.eval(row, params)?);
        }
        Ok(())
    }

    /// Keeps the best `count` candidates, and their worst's keys as the bound.
    fn cut(&mut self) {
        if self.candidates.len() <= self.count {
            return;
        }
        let keys = self.keys;
        self.candidates.select_nth_unstable_by(self.count - 1, |(a, a_number, _), (b, b_number, _)| {
            compare_sort_keys(a, b, keys).then(a_number.cmp(b_number))
        });
        self.candidates.truncate(self.count);
        let bound = self.candidates[self.count - 1].0.clone();
        // An integer first key's bound is published for the job's other tasks.
        if let (Some(Value::Int(value)), Some([first, ..])) = (bound.first(), self.read_keys) {
            let tighter_when_larger = if first.descending { *value } else { value.saturating_neg() };
            self.shared.fetch_max(tighter_when_larger, Ordering::Relaxed);
        }
        self.bound = Some(bound);
    }

    /// The rows kept, in scan order.
    fn finish(mut self) -> Vec<Vec<Value>> {
        self.cut();
        self.candidates.sort_unstable_by_key(|(_, number, _)| *number);
        self.candidates.into_iter().map(|(_, _, row)| row).collect()
    }
}

/// The rows of a finished aggregation over `keys` group keys: its groups', or with grouping sets each set's,
/// rolled up from them (the partial grouped by every key), laid out by [`spread_grouping_set`]. Each set's rows are
/// charged to `budget`: many sets over many groups can outgrow it.
fn finish_groups(
    partial: PartialAggregate,
    keys: usize,
    aggregates: &[AggregateCall],
    sets: Option<&[Vec<usize>]>,
    budget: Option<&ResultBudget>,
) -> Result<Vec<Vec<Value>>, ExecError> {
    let Some(sets) = sets else { return partial.finish(aggregates, keys > 0) };
    // Each set's groups are rolled up from the fewest groups already made that have its keys: the finest
    // grouping's (every key: the partial itself, taken as it is), or a larger set's. `ROLLUP (k, i)` over 135 000
    // groups rolled each set up from all of them, cloning every group for the finest set: 170 ms on the session
    // thread, where PostgreSQL sorts and stops at a LIMIT of 100 in 28.
    //
    // Each set is charged to `budget` as its groups are made, for the rows they will be (their text when the rows
    // are): all the sets' groups are held until the last is made, and many sets over many groups outgrow it.
    let row_bytes_before_text =
        (std::mem::size_of::<Vec<Value>>() + (keys + aggregates.len() + 1) * std::mem::size_of::<Value>()) as u64;
    let charge_groups = |groups: &PartialAggregate| -> Result<u64, ExecError> {
        let bytes = groups.groups.len().max(1) as u64 * row_bytes_before_text;
        budget.map_or(Ok(()), |budget| budget.charge_bytes(bytes))?;
        Ok(bytes)
    };
    let every_key: Vec<usize> = (0..keys).collect();
    let mut charged = vec![0u64; sets.len()];
    for (position, set) in sets.iter().enumerate() {
        if *set == every_key {
            charged[position] = charge_groups(&partial)?;
        }
    }
    let mut made: Vec<Option<PartialAggregate>> = sets.iter().map(|_| None).collect();
    let mut by_size: Vec<usize> = (0..sets.len()).collect();
    by_size.sort_by_key(|&position| std::cmp::Reverse(sets[position].len()));
    for &position in &by_size {
        let set = &sets[position];
        if *set == every_key {
            continue;
        }
        let mut source: (&PartialAggregate, &[usize]) = (&partial, &every_key);
        for (other, other_groups) in made.iter().enumerate() {
            if let Some(other_groups) = other_groups
                && other_groups.groups.len() < source.0.groups.len()
                && set.iter().all(|key| sets[other].contains(key))
            {
                source = (other_groups, &sets[other]);
            }
        }
        let positions: Vec<usize> = set.iter().map(|key| source.1.iter().position(|k| k == key).unwrap_or(0)).collect();
        let groups = source.0.roll_up(&positions);
        charged[position] = charge_groups(&groups)?;
        made[position] = Some(groups);
    }
    // The sets of every key (usually one) take the partial: the last as it is, any before it a copy.
    let finest: Vec<usize> = (0..sets.len()).filter(|&position| sets[position] == every_key).collect();
    if let Some((&last, before)) = finest.split_last() {
        for &position in before {
            made[position] = Some(partial.clone());
        }
        made[last] = Some(partial);
    }
    let mut output = Vec::new();
    for (position, set) in sets.iter().enumerate() {
        let groups = made[position].take().unwrap_or_default();
        let grouped: Vec<Vec<Value>> = groups
            .finish(aggregates, !set.is_empty())?
            .into_iter()
            .map(|row| spread_grouping_set(row, set, keys, position))
            .collect();
        if let Some(budget) = budget {
            let bytes: u64 = grouped.iter().map(|row| row_bytes(row)).sum();
            budget.charge_bytes(bytes.saturating_sub(charged[position]))?;
        }
        output.extend(grouped);
    }
    Ok(output)
}

/// A row grouped by grouping set `set` (its keys, then the aggregates) laid out as every set's rows are: all
/// `keys` key columns, NULL where the key is not in the set, then the aggregates, then the set's `position`.
fn spread_grouping_set(mut row: Vec<Value>, set: &[usize], keys: usize, position: usize) -> Vec<Value> {
    if set.len() == keys && set.iter().enumerate().all(|(k, &key)| k == key) {
        // Every key in order (the finest set): the row is laid out already.
        row.push(Value::Int(position as i64));
        return row;
    }
    let mut spread = Vec::with_capacity(keys + row.len() - set.len() + 1);
    spread.resize(keys, Value::Null);
    let mut values = row.into_iter();
    for (&key, value) in set.iter().zip(values.by_ref()) {
        spread[key] = value;
    }
    spread.extend(values);
    spread.push(Value::Int(position as i64));
    spread
}

fn group_row(
    group_by: &[Expr],
    aggregates: &[AggregateCall],
    partial: &mut PartialAggregate,
    row: &[Value],
    params: &[Value],
) -> Result<(), ExecError> {
    let feed = |state: &mut [Accumulator]| -> Result<(), ExecError> {
        for (call, accumulator) in aggregates.iter().zip(state.iter_mut()) {
            call.feed(accumulator, row, params)?;
        }
        Ok(())
    };
    // The key is built on the stack and copied to the heap only for a new group: most rows find theirs with one
    // hash lookup.
    const STACK_KEYS: usize = 4;
    if group_by.len() > STACK_KEYS {
        let key = group_by.iter().map(|e| e.eval(row, params)).collect::<Result<Vec<_>, _>>()?;
        return feed(partial.groups.entry(key).or_insert_with(|| aggregates.iter().map(Accumulator::new).collect()));
    }
    let mut key: [Value; STACK_KEYS] = std::array::from_fn(|_| Value::Null);
    for (slot, expr) in key.iter_mut().zip(group_by) {
        *slot = expr.eval(row, params)?;
    }
    let key = &key[..group_by.len()];
    if let Some(state) = partial.groups.get_mut(key) {
        return feed(state);
    }
    let mut state: GroupState = aggregates.iter().map(Accumulator::new).collect();
    feed(&mut state)?;
    partial.groups.insert(key.to_vec(), state);
    Ok(())
}

/// Whether [`aggregate_block`] adds a block of `call` without going row by row (when its column holds integers).
fn summarised_per_block(call: &AggregateCall) -> bool {
    call.filter.is_none()
        && (call.function == AggregateFunction::CountStar
            || (matches!(call.argument, Some(Expr::Column { .. }))
                && !call.distinct
                && call.function.summarises_blocks()))
}

/// Adds one block's selected rows to an aggregate, with fast paths for `COUNT(*)` and plain integer columns.
#[allow(clippy::too_many_arguments)]
fn aggregate_block(
    call: &AggregateCall,
    accumulator: &mut Accumulator,
    partition: &Partition,
    block: usize,
    mask: &BlockMask,
    selected: u32,
    cache: &mut BlockCache,
    row: &mut [Value],
    params: &[Value],
) -> Result<(), ExecError> {
    if call.filter.is_none() {
        if call.function == AggregateFunction::CountStar {
            accumulator.add_ints(i64::from(selected), 0, 0, 0);
            return Ok(());
        }
        if let Some(Expr::Column { index, .. }) = &call.argument
            && !call.distinct
            && call.function.summarises_blocks()
            && let Some(values) = cache.ints(partition, *index, block)
        {
            let nulls = partition.column(*index).null_mask(block);
            let valid: BlockMask = match nulls {
                Some(n) => std::array::from_fn(|i| mask[i] & !n[i]),
                None => *mask,
            };
            let (count, sum, min, max) = crate::vector::masked_summary(values, &valid);
            accumulator.add_ints(count, sum, min, max);
            return Ok(());
        }
        // Integer arithmetic (a CASE, a cast) where the block-at-a-time grouping does not take the statement's
        // aggregates (another has FILTER, or is a variance): evaluated a block at a time, on the selected rows
        // alone (the others raise nothing), rather than row by row.
        if let Some(argument) = &call.argument
            && !matches!(argument, Expr::Column { .. })
            && !call.distinct
            && call.function.summarises_blocks()
            && crate::vector::is_int_expr(argument)
        {
            let unselected: BlockMask = std::array::from_fn(|i| !mask[i]);
            // The scan accounts for the bytes of the columns it outputs, these included.
            let mut reads = vec![0; partition.columns().len()];
            let values = crate::vector::int_block_of(argument, partition, block, params, &unselected, &mut reads)?;
            let valid: BlockMask = std::array::from_fn(|i| mask[i] & !values.nulls()[i]);
            let (count, sum, min, max) = crate::vector::masked_summary(values.values(), &valid);
            accumulator.add_ints(count, sum, min, max);
            return Ok(());
        }
        // COUNT, MIN and MAX of a text column: by its codes, which keep its strings' order within the partition
        // (row by row, `min(s), max(s2), count(s)` over a million rows took 180 ms; DuckDB 31).
        if let Some(Expr::Column { index, .. }) = &call.argument
            && !call.distinct
            && matches!(call.function, AggregateFunction::Count | AggregateFunction::Min | AggregateFunction::Max)
            && let Some((dictionary, codes)) = cache.codes(partition, *index, block)
        {
            let nulls = partition.column(*index).null_mask(block);
            let valid: BlockMask = match nulls {
                Some(n) => std::array::from_fn(|i| mask[i] & !n[i]),
                None => *mask,
            };
            let (count, _, min, max) = crate::vector::masked_summary(codes, &valid);
            if count > 0 {
                match call.function {
                    AggregateFunction::Count => accumulator.add_ints(count, 0, i64::MAX, i64::MIN),
                    AggregateFunction::Min => accumulator.add(&Value::text(dictionary.get(min as usize)), false),
                    _ => accumulator.add(&Value::text(dictionary.get(max as usize)), false),
                }
            }
            return Ok(());
        }
    }
    // Row by row: an argument that is an expression, or a FILTER deciding which rows count.
    let mut columns = Vec::new();
    call.columns(&mut columns);
    let first_row = block * BLOCK_ROWS;
    try_for_each_set(mask, |i| {
        cache.fill_row(partition, &columns, first_row + i, row);
        call.feed(accumulator, row, params)
    })
}

/// The unsealed delta, row by row. Under a LIMIT, as [`run_morsel`].
fn run_delta(
    job: &ScanJob,
    width: usize,
    ctx: &TaskContext<'_>,
    limit_error: &mut Option<ExecError>,
) -> Result<TaskOutput, ExecError> {
    let delta = &job.snapshot.delta;
    let params = &job.params[..];
    let filter_expr = job.filter.as_ref();
    let mut row = vec![Value::Null; width];
    let mut rows_out = Vec::new();
    let mut partial = PartialAggregate::default();
    let mut selected = 0u64;
    let (mut probe_buffers, mut joined_rows) = (ProbeBuffers::default(), 0u64);
    let mut scanned = delta.rows();
    for r in 0..delta.rows() {
        if let (Some(wanted), ScanOutput::Rows(_)) = (job.rows_wanted, &job.output)
            && rows_out.len() as u64 >= wanted
        {
            scanned = r;
            break;
        }
        for &c in &job.columns_read {
            row[c] = delta.column(c)[r].clone();
        }
        if let Some(filter) = filter_expr
            && !filter.passes_row(&row, params)?
        {
            continue;
        }
        selected += 1;
        match &job.output {
            ScanOutput::Aggregate { group_by, aggregates, .. } if let Some(probe) = &job.probe => {
                let joined = probe.join(&row, params, &mut probe_buffers, &mut |joined| {
                    count_joined(&mut joined_rows, ctx)?;
                    group_row(group_by, aggregates, &mut partial, joined, params)
                });
                // The statement reports why it was cancelled; the task just stops.
                if joined.is_err() && ctx.is_cancelled() {
                    return Ok(TaskOutput::Rows(Vec::new()));
                }
                joined?;
            }
            ScanOutput::Rows(projections) => {
                match projections.iter().map(|e| e.eval(&row, params)).collect::<Result<Vec<_>, _>>() {
                    Ok(values) => rows_out.push(values),
                    Err(error) if job.rows_wanted.is_some() => {
                        *limit_error = Some(error);
                        scanned = r + 1;
                        break;
                    }
                    Err(error) => return Err(error),
                }
            }
            ScanOutput::Aggregate { group_by, aggregates, .. } => {
                group_row(group_by, aggregates, &mut partial, &row, params)?
            }
        }
    }
    if let Some(probe) = &job.probe {
        probe.joined_rows.fetch_add(joined_rows, Ordering::Relaxed);
    }
    job.budget.charge(&rows_out)?;
    job.rows_scanned.fetch_add(scanned as u64, Ordering::Relaxed);
    job.rows_selected.fetch_add(selected, Ordering::Relaxed);
    Ok(match job.output {
        ScanOutput::Rows(_) if job.values => TaskOutput::Values(rows_out.into_iter().flatten().collect()),
        ScanOutput::Rows(_) => TaskOutput::Rows(rows_out),
        ScanOutput::Aggregate { .. } => TaskOutput::Aggregate(partial, None),
    })
}

/// Produces the rows of `plan` after its tasks have run.
fn finish(
    plan: &Plan,
    executor: &Executor<'_>,
    jobs: &[Arc<ScanJob>],
    next_job: &mut usize,
    budget: &ResultBudget,
    result: &mut ExecutionResult,
) -> Result<Vec<Vec<Value>>, ExecError> {
    check_interrupts(executor)?;
    match plan {
        Plan::Scan(scan) => {
            let job = &jobs[*next_job];
            *next_job += 1;
            finish_scan(scan, job, budget)
        }
        Plan::Lookup(lookup) => {
            let started = Instant::now();
            let (rows, found) = run_lookup(lookup, executor.params)?;
            result.index_rows += found;
            result.operator(format!("Index Lookup on {}", lookup.table.name()), rows.len(), started);
            Ok(rows)
        }
        Plan::Series(series) => {
            let started = Instant::now();
            let rows = generate_series(series, executor, budget)?;
            result.operator("Function Scan on generate_series", rows.len(), started);
            Ok(rows)
        }
        Plan::Values(rows) => {
            let started = Instant::now();
            let rows = rows
                .iter()
                .map(|row| row.iter().map(|e| e.eval(&[], executor.params)).collect::<Result<Vec<_>, _>>())
                .collect::<Result<Vec<_>, _>>()?;
            result.operator("Values", rows.len(), started);
            Ok(rows)
        }
        Plan::UnionAll(inputs) => {
            let parts = inputs
                .iter()
                .map(|input| finish(input, executor, jobs, next_job, budget, result))
                .collect::<Result<Vec<_>, _>>()?;
            let started = Instant::now();
            let rows: Vec<Vec<Value>> = parts.into_iter().flatten().collect();
            result.operator("Append", rows.len(), started);
            Ok(rows)
        }
        Plan::Subqueries { .. } => Err(ExecError::internal("subqueries are only planned around a whole statement")),
        Plan::WorkingTable { .. } => Err(ExecError::internal("a working table outside its recursion")),
        Plan::Recursive { id, base, step, distinct } => {
            let started = Instant::now();
            let rows = recursive_union(*id, base, step, *distinct, executor, budget)?;
            result.operator(if *distinct { "Recursive Union" } else { "Recursive Union All" }, rows.len(), started);
            Ok(rows)
        }
        Plan::SetOperation { op, all, left, right } => {
            let left = finish(left, executor, jobs, next_job, budget, result)?;
            let right = finish(right, executor, jobs, next_job, budget, result)?;
            let started = Instant::now();
            let rows = set_operation(*op, *all, left, right, executor)?;
            let name = format!("{}{}", op.keyword(), if *all { " ALL" } else { "" });
            result.operator(name, rows.len(), started);
            Ok(rows)
        }
        Plan::Join(join) => {
            let (left, right) = join_inputs(join, executor, jobs, next_job, budget, result)?;
            let started = Instant::now();
            let rows = join_rows(join, left, right, executor, budget)?;
            result.operator(join_operator(join), rows.len(), started);
            Ok(rows)
        }
        // An aggregate over a join takes the joined rows as they come: they are never held (nor copied). Where it
        // can, the join probes and aggregates inside the tasks of one input's scan instead ([`JoinProbe`]).
        Plan::Aggregate { input, group_by, aggregates, sets }
            if let Some((join, filter)) = join_under_aggregate(input)
                && (filter.is_none() || ProbePlan::of(join, aggregates, executor.join_key_filter).is_some()) =>
        {
            let call = AggregateOverJoin { join, filter, group_by, aggregates, sets: sets.as_deref() };
            let (left, right) = match probed_join_aggregate(&call, executor, jobs, next_job, budget, result)? {
                Probed::Aggregated(rows) => return Ok(rows),
                Probed::Inputs(left, right) => (left, right),
                Probed::NotApplicable => join_inputs(join, executor, jobs, next_job, budget, result)?,
            };
            let started = Instant::now();
            let mut partial = PartialAggregate::default();
            let mut joined = 0;
            if group_by.is_empty() {
                // One group: its state is at hand, not looked up per row.
                let mut state: GroupState = aggregates.iter().map(Accumulator::new).collect();
                join_into(join, left, right, executor, &mut |row| {
                    if !passes(filter, row, executor.params)? {
                        return Ok(());
                    }
                    joined += 1;
                    aggregates.iter().zip(state.iter_mut()).try_for_each(|(call, a)| call.feed(a, row, executor.params))
                })?;
                if joined > 0 {
                    partial.groups.insert(Vec::new(), state);
                }
            } else {
                join_into(join, left, right, executor, &mut |row| {
                    if !passes(filter, row, executor.params)? {
                        return Ok(());
                    }
                    joined += 1;
                    group_row(group_by, aggregates, &mut partial, row, executor.params)
                })?;
            }
            result.operator(join_operator(join), joined, started);
            let started = Instant::now();
            let output = finish_groups(partial, group_by.len(), aggregates, sets.as_deref(), Some(budget))?;
            result.operator("Aggregate", output.len(), started);
            Ok(output)
        }
        Plan::Aggregate { input, group_by, aggregates, sets } => {
            let rows = finish(input, executor, jobs, next_job, budget, result)?;
            let started = Instant::now();
            let mut partial = PartialAggregate::default();
            let fed_one_state = group_by.is_empty() && sets.is_none();
            let mut state: GroupState =
                if fed_one_state { aggregates.iter().map(Accumulator::new).collect() } else { Vec::new() };
            for (position, row) in rows.iter().enumerate() {
                if position % INTERRUPT_CHECK_ROWS == 0 {
                    check_interrupts(executor)?;
                }
                if fed_one_state {
                    // One group, whose state is fed row after row: through `group_row`, every row hashed the
                    // empty key to find it (an outer COUNT and SUM over 200 000 grouped rows took 10 ms).
                    for (call, accumulator) in aggregates.iter().zip(state.iter_mut()) {
                        call.feed(accumulator, row, executor.params)?;
                    }
                } else {
                    group_row(group_by, aggregates, &mut partial, row, executor.params)?;
                }
            }
            if fed_one_state && !rows.is_empty() {
                partial.groups.insert(Vec::new(), state);
            }
            drop_rows_elsewhere(rows);
            let output = finish_groups(partial, group_by.len(), aggregates, sets.as_deref(), Some(budget))?;
            result.operator("Aggregate", output.len(), started);
            Ok(output)
        }
        Plan::Window { input, calls } => {
            let mut rows = finish(input, executor, jobs, next_job, budget, result)?;
            let started = Instant::now();
            append_windows(&mut rows, calls, executor.params, &|| check_interrupts(executor))?;
            result.operator("Window", rows.len(), started);
            Ok(rows)
        }
        Plan::Post { input, filter, projection, distinct, order_by, offset, limit, with_ties } => {
            let rows = finish(input, executor, jobs, next_job, budget, result)?;
            let rows = post_process(
                rows,
                filter.as_ref(),
                projection.as_deref(),
                *distinct,
                order_by,
                offset.as_ref(),
                limit.as_ref().map(|limit| (limit, *with_ties)),
                executor.params,
                result,
            )?;
            // A sort is not interrupted; what follows it is.
            check_interrupts(executor)?;
            Ok(rows)
        }
    }
}

/// Rows a statement is done with, freed on a thread of their own when there are many: each row was allocated
/// on a worker, and freeing 3 million of them on the session thread took it about as long as aggregating them.
fn drop_rows_elsewhere(rows: Vec<Vec<Value>>) {
    /// Fewer rows are freed where they are: a thread costs some 20 µs to start.
    const ROWS_DROPPED_ELSEWHERE: usize = 1 << 16;
    if rows.len() >= ROWS_DROPPED_ELSEWHERE {
        // Should no thread start, the rows are freed here, with the closure.
        let _ = std::thread::Builder::new().name("numadb-free".into()).spawn(move || drop(rows));
    }
}

/// The rows of a `generate_series` call, as PostgreSQL makes them: none when an argument is NULL, 22023 for a
/// zero step. They are made in chunks, each counted against the statement's `numadb.max_result_mb` and followed
/// by a look at the cancel flag and the deadline, so `generate_series(1, 10000000000)` fails cleanly instead of
/// taking the machine's memory.
fn generate_series(
    series: &SeriesPlan,
    executor: &Executor<'_>,
    budget: &ResultBudget,
) -> Result<Vec<Vec<Value>>, ExecError> {
    const CHUNK_ROWS: usize = 1 << 16;
    let argument = |expr: &Expr| match expr.eval(&[], executor.params)? {
        Value::Int(v) => Ok(Some(v)),
        Value::Null => Ok(None),
        other => Err(ExecError::internal(format!("a generate_series argument evaluated to {other:?}"))),
    };
    let (Some(start), Some(stop), Some(step)) =
        (argument(&series.start)?, argument(&series.stop)?, argument(&series.step)?)
    else {
        return Ok(Vec::new());
    };
    if step == 0 {
        return Err(ExecError::new(sqlstate::INVALID_PARAMETER_VALUE, "step size cannot equal zero"));
    }
    let mut rows = Vec::new();
    let mut next = Some(start);
    while let Some(value) = next.filter(|&v| if step > 0 { v <= stop } else { v >= stop }) {
        rows.push(vec![Value::Int(value)]);
        // Past the type's end there is nothing more to make (and the bound is within it).
        next = value.checked_add(step);
        if rows.len() % CHUNK_ROWS == 0 {
            budget.charge(&rows[rows.len() - CHUNK_ROWS..])?;
            check_interrupts(executor)?;
        }
    }
    budget.charge(&rows[rows.len() - rows.len() % CHUNK_ROWS..])?;
    Ok(rows)
}

/// A join's rows. With equality keys, the smaller input goes into a hash table by its keys and each row of the
/// other one, in order, looks up its candidates; without keys, every right row is a candidate for every left row.
/// A candidate is a partner when the rest of the condition is TRUE. Rows without a partner follow as the join kind
/// asks: the probing side's right after their probe, the hashed side's at the end. The output counts against
/// the statement's `numadb.max_result_mb` (with the rows its scans produced) as it grows, and the loop looks at the cancel flag and the deadline as it goes (a nested
/// loop can run long while producing little).
fn join_rows(
    join: &JoinPlan,
    left: Vec<Vec<Value>>,
    right: Vec<Vec<Value>>,
    executor: &Executor<'_>,
    budget: &ResultBudget,
) -> Result<Vec<Vec<Value>>, ExecError> {
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut charged = 0;
    join_into(join, left, right, executor, &mut |row| {
        rows.push(row.to_vec());
        if rows.len() - charged >= INTERRUPT_CHECK_ROWS {
            budget.charge(&rows[charged..])?;
            charged = rows.len();
        }
        Ok(())
    })?;
    budget.charge(&rows[charged..])?;
    Ok(rows)
}

/// Where a join hands its rows: collected ([`join_rows`]) or aggregated as they come, never held.
type RowSink<'s> = &'s mut dyn FnMut(&[Value]) -> Result<(), ExecError>;

/// Joins `left` and `right`, handing each joined row to `emit`.
fn join_into(
    join: &JoinPlan,
    left: Vec<Vec<Value>>,
    right: Vec<Vec<Value>>,
    executor: &Executor<'_>,
    emit: RowSink<'_>,
) -> Result<(), ExecError> {
    let params = executor.params;
    // `=` is never TRUE with a NULL: a NULL key (`None`) has no partner.
    match (join.left_keys.as_slice(), join.right_keys.as_slice()) {
        ([], _) => join_with_keys::<()>(join, left, right, executor, emit, None),
        // Integer keys (the common case) hash and compare as plain integers.
        ([left_key], [right_key]) if left_key.data_type().is_integer() && right_key.data_type().is_integer() => {
            let key = |expr: &Expr, row: &[Value]| -> Result<Option<i64>, ExecError> {
                // A column (the common key) is read, not evaluated.
                let value = match expr {
                    Expr::Column { index, .. } if *index < row.len() => match &row[*index] {
                        Value::Int(v) => return Ok(Some(*v)),
                        Value::Null => return Ok(None),
                        other => other.clone(),
                    },
                    _ => expr.eval(row, params)?,
                };
                match value {
                    Value::Int(v) => Ok(Some(v)),
                    Value::Null => Ok(None),
                    other => Err(ExecError::internal(format!("an integer join key evaluated to {other:?}"))),
                }
            };
            let keys = |hash_left: bool, row: &[Value]| key(if hash_left { left_key } else { right_key }, row);
            let probes = |hash_left: bool, row: &[Value]| key(if hash_left { right_key } else { left_key }, row);
            join_with_keys(join, left, right, executor, emit, Some((&keys, &probes)))
        }
        ([left_key], [right_key]) => {
            let key = |expr: &Expr, row: &[Value]| -> Result<Option<Value>, ExecError> {
                let value = expr.eval(row, params)?;
                Ok((!value.is_null()).then_some(value))
            };
            let keys = |hash_left: bool, row: &[Value]| key(if hash_left { left_key } else { right_key }, row);
            let probes = |hash_left: bool, row: &[Value]| key(if hash_left { right_key } else { left_key }, row);
            join_with_keys(join, left, right, executor, emit, Some((&keys, &probes)))
        }
        (left_keys, right_keys) => {
            let key = |exprs: &[Expr], row: &[Value]| -> Result<Option<Vec<Value>>, ExecError> {
                let values = exprs.iter().map(|k| k.eval(row, params)).collect::<Result<Vec<_>, _>>()?;
                Ok((!values.iter().any(Value::is_null)).then_some(values))
            };
            let keys = |hash_left: bool, row: &[Value]| key(if hash_left { left_keys } else { right_keys }, row);
            let probes = |hash_left: bool, row: &[Value]| key(if hash_left { right_keys } else { left_keys }, row);
            join_with_keys(join, left, right, executor, emit, Some((&keys, &probes)))
        }
    }
}

/// Rows of values, as operators hand them on.
type Rows = Vec<Vec<Value>>;

/// A join's inputs' rows: both finished, or the one the other's keys filter ([`JoinPlan::key_filter`]) scanned
/// after the other.
fn join_inputs(
    join: &JoinPlan,
    executor: &Executor<'_>,
    jobs: &[Arc<ScanJob>],
    next_job: &mut usize,
    budget: &ResultBudget,
    result: &mut ExecutionResult,
) -> Result<(Rows, Rows), ExecError> {
    let Some(filter) = keyed_input(join, executor) else {
        return Ok((
            finish(&join.left, executor, jobs, next_job, budget, result)?,
            finish(&join.right, executor, jobs, next_job, budget, result)?,
        ));
    };
    let (other, other_key, scanned) = if filter.scans_right {
        (&join.left, &join.left_keys[filter.key], &join.right)
    } else {
        (&join.right, &join.right_keys[filter.key], &join.left)
    };
    let other = finish(other, executor, jobs, next_job, budget, result)?;
    let keys = join_keys(&other, other_key, executor)?;
    // A scan of rows, or a scan's groups ([`JoinPlan::group_key_filter`]).
    let keys = JoinKeys { column: filter.column, keys: Arc::new(keys), probe: None };
    let scanned = keyed_plan(&crate::plan::with_scan_keys(scanned, keys)?, executor, budget, result)?;
    Ok(if filter.scans_right { (other, scanned) } else { (scanned, other) })
}

/// The join's line in EXPLAIN ANALYZE.
fn join_operator(join: &JoinPlan) -> String {
    let method = if join.left_keys.is_empty() { "Nested Loop" } else { "Hash Join" };
    format!("{method} ({})", join.kind.keyword())
}

/// Which input of a join [`join_inputs`] makes second, with the other's keys ([`JoinPlan::keyed_input`]), unless
/// the session turned that off.
fn keyed_input(join: &JoinPlan, executor: &Executor<'_>) -> Option<crate::plan::KeyFilter> {
    if executor.join_key_filter { join.keyed_input() } else { None }
}

/// The distinct non-NULL values of a join key over its input's rows.
fn join_keys(rows: &[Vec<Value>], key: &Expr, executor: &Executor<'_>) -> Result<KeySet, ExecError> {
    let keys: Vec<i64> = int_keys_of(rows.iter().map(Vec::as_slice), key, executor)?.into_iter().flatten().collect();
    Ok(KeySet::of(&keys))
}

/// An integer join key over each row of `values` (rows of `width` values back to back; `None`: NULL).
fn int_keys(
    values: &[Value],
    width: usize,
    key: &Expr,
    executor: &Executor<'_>,
) -> Result<Vec<Option<i64>>, ExecError> {
    int_keys_of(values.chunks_exact(width.max(1)), key, executor)
}

/// An integer join key over each of `rows` (`None`: NULL). A key that is a column is read, not evaluated.
fn int_keys_of<'r>(
    rows: impl ExactSizeIterator<Item = &'r [Value]>,
    key: &Expr,
    executor: &Executor<'_>,
) -> Result<Vec<Option<i64>>, ExecError> {
    let mut keys = Vec::with_capacity(rows.len());
    for (position, row) in rows.enumerate() {
        if position % INTERRUPT_CHECK_ROWS == 0 {
            check_interrupts(executor)?;
        }
        let evaluated;
        let value = match key {
            Expr::Column { index, .. } if *index < row.len() => &row[*index],
            _ => {
                evaluated = key.eval(row, executor.params)?;
                &evaluated
            }
        };
        keys.push(match value {
            Value::Int(key) => Some(*key),
            Value::Null => None,
            other => return Err(ExecError::internal(format!("an integer join key evaluated to {other:?}"))),
        });
    }
    Ok(keys)
}

/// A join's input scanned with the other input's keys ([`JoinPlan::key_filter`]): a statement of its own (its
/// own task graph), whose counters, operators and byte matrix join the statement's and whose rows count against
/// its `numadb.max_result_mb`.
fn keyed_scan(
    scan: &ScanPlan,
    column: usize,
    keys: KeySet,
    executor: &Executor<'_>,
    budget: &ResultBudget,
    result: &mut ExecutionResult,
) -> Result<Vec<Vec<Value>>, ExecError> {
    let keyed = ScanPlan { join_keys: Some(JoinKeys { column, keys: Arc::new(keys), probe: None }), ..scan.clone() };
    keyed_plan(&Plan::Scan(keyed), executor, budget, result)
}

/// A join's input whose scan was handed the other input's keys, run as [`keyed_scan`] runs it.
fn keyed_plan(
    plan: &Plan,
    executor: &Executor<'_>,
    budget: &ResultBudget,
    result: &mut ExecutionResult,
) -> Result<Vec<Vec<Value>>, ExecError> {
    let mut part = execute(plan, executor)?;
    let rows = std::mem::take(&mut part.rows);
    budget.charge(&rows)?;
    result.absorb(part);
    Ok(rows)
}

/// How a join finds a row's key: given whether the left input is the hashed one, the hashed side's key of a row
/// and the probing side's (`None`: NULL, no partner).
type KeyOf<'k, K> = &'k dyn Fn(bool, &[Value]) -> Result<Option<K>, ExecError>;

/// A join key. Integer keys also fill a bitmap of the build side's keys ([`KeyBitmap`]).
trait JoinKey: std::hash::Hash + Eq {
    /// The key as an integer, for the bitmap.
    fn as_int(&self) -> Option<i64> {
        None
    }
}

impl JoinKey for () {}
impl JoinKey for Value {}
impl JoinKey for Vec<Value> {}
impl JoinKey for i64 {
    fn as_int(&self) -> Option<i64> {
        Some(*self)
    }
}

/// Where a join finds the build rows with a key: the first of them and the one after it ([`END`] for none), the
/// rest through the build side's `next_same_key` chain.
enum Partners<K> {
    /// A hash table of the keys.
    Hashed(HashMap<K, (usize, usize), foldhash::fast::RandomState>),
    /// Integer keys no more than [`DENSE_SLOTS_PER_KEY`] integers apart on average: slot `key - low` holds the
    /// first build row with the key, plus one ([`NO_ROW`]: none), with [`MORE_ROWS`] set when others follow. A
    /// probe is then one read at a known address, which the probe loop prefetches a few rows ahead; the hash
    /// table's control bytes and bucket were two reads it cannot.
    Dense { low: i64, slots: Vec<u32> },
}

/// End of a chain of build rows.
const END: usize = usize::MAX;
/// A dense slot without a row.
const NO_ROW: u32 = 0;
/// A dense slot's flag: more rows have its key.
const MORE_ROWS: u32 = 1 << 31;
/// The most dense slots per distinct key (beyond, a hash table), and at least this many slots are allowed.
const DENSE_SLOTS_PER_KEY: u64 = 16;
const DENSE_SLOTS_MIN: u64 = 1 << 16;
/// Probing rows between the prefetch of a dense slot and its read (the partner row is asked for halfway).
const PROBE_PREFETCH_ROWS: usize = 16;

/// Dense slots per bucket of [`dense_slots`]: 512 KiB of them, which stay in a core's L2 cache while their rows
/// are written.
const BUILD_BUCKET_SLOTS: usize = 1 << 17;

/// A dense table's slots for the build rows whose slot offsets are `offsets` (in row order, `None` for a NULL
/// key; one per entry of `next_same_key`, each below `span`), chaining rows with the same key in `next_same_key`,
/// in row order.
///
/// Rows land in their slots last to first. Written straight in row order, a table larger than the caches takes a
/// cache miss per row: 3.5 ms for the 500 000 rows of `bench queries`' join over 20 MB of slots, most of the
/// build. So a table of more than a few buckets of `bucket_slots` slots is written a bucket at a time: the rows
/// are first sorted into their buckets (stably, one counting pass and one pass writing `(row, offset)` pairs to
/// as many sequential streams as there are buckets), then each bucket's slots are laid (cleared) and its rows,
/// last to first, write them while they are in cache. A slot's rows keep their order, so the table is the one
/// the direct loop writes. On that join the build went from 4.4 to 2.3-3.4 ms and the statement from 16.6-17.9
/// to 15.0-15.9 ms (binaries alternated three times, 100 runs each).
///
/// The buckets do not save the misses where slots are as sparse as there (a tenth of them used: most lines are
/// written once), but cleared just before they are written, the lines are already in cache; cleared all at once,
/// they had left it (4.4 ms written in buckets as well).
fn dense_slots(
    offsets: impl DoubleEndedIterator<Item = Option<u64>> + ExactSizeIterator + Clone,
    span: usize,
    next_same_key: &mut [usize],
    bucket_slots: usize,
) -> Vec<u32> {
    let mut place = |slots: &mut [u32], position: usize, offset: usize| {
        let slot = &mut slots[offset];
        if *slot != NO_ROW {
            next_same_key[position] = (*slot & !MORE_ROWS) as usize - 1;
            *slot = (position as u32 + 1) | MORE_ROWS;
        } else {
            *slot = position as u32 + 1;
        }
    };
    let bucket_shift = bucket_slots.max(1).ilog2();
    let buckets = span.div_ceil(1 << bucket_shift);
    if buckets <= 4 || u32::try_from(span).is_err() {
        let mut slots = vec![NO_ROW; span];
        for (position, offset) in offsets.enumerate().rev() {
            if let Some(offset) = offset {
                place(&mut slots, position, offset as usize);
            }
        }
        return slots;
    }
    // Where each bucket's rows start in `sorted`, then (the second pass moving each start along) where they end.
    let mut ends = vec![0usize; buckets + 1];
    for offset in offsets.clone().flatten() {
        ends[(offset >> bucket_shift) as usize + 1] += 1;
    }
    for bucket in 1..=buckets {
        ends[bucket] += ends[bucket - 1];
    }
    let mut sorted = vec![(0u32, 0u32); ends[buckets]];
    for (position, offset) in offsets.enumerate() {
        let Some(offset) = offset else { continue };
        let next = &mut ends[(offset >> bucket_shift) as usize];
        sorted[*next] = (position as u32, offset as u32);
        *next += 1;
    }
    // The slots are laid a bucket at a time, just before their rows are written: a slot vector cleared at once
    // would have left the cache by then.
    let mut slots = Vec::with_capacity(span);
    let mut start = 0;
    for (bucket, &end) in ends[..buckets].iter().enumerate() {
        slots.resize(span.min((bucket + 1) << bucket_shift), NO_ROW);
        for &(position, offset) in sorted[start..end].iter().rev() {
            place(&mut slots, position as usize, offset as usize);
        }
        start = end;
    }
    slots
}

impl<K: JoinKey> Partners<K> {
    /// The partners of `keys` (the build rows', in order), chaining rows with the same key in `next_same_key`.
    fn build(keys: Vec<Option<K>>, next_same_key: &mut [usize]) -> Partners<K> {
        if let Some((low, span)) = Self::dense_span(&keys) {
            let offsets =
                keys.iter().map(|key| key.as_ref().and_then(JoinKey::as_int).map(|v| v.wrapping_sub(low) as u64));
            let slots = dense_slots(offsets, span, next_same_key, BUILD_BUCKET_SLOTS);
            return Partners::Dense { low, slots };
        }
        let mut table: HashMap<K, (usize, usize), foldhash::fast::RandomState> = HashMap::default();
        table.reserve(keys.len());
        for (position, key) in keys.into_iter().enumerate().rev() {
            let Some(key) = key else { continue };
            match table.entry(key) {
                std::collections::hash_map::Entry::Occupied(mut entry) => {
                    let (first, _) = *entry.get();
                    next_same_key[position] = first;
                    *entry.get_mut() = (position, first);
                }
                std::collections::hash_map::Entry::Vacant(entry) => {
                    entry.insert((position, END));
                }
            }
        }
        Partners::Hashed(table)
    }

    /// The smallest key and the number of slots, when every key is an integer and they are close enough.
    fn dense_span(keys: &[Option<K>]) -> Option<(i64, usize)> {
        if keys.len() >= MORE_ROWS as usize - 1 {
            return None;
        }
        let (mut low, mut high, mut count) = (i64::MAX, i64::MIN, 0u64);
        for key in keys.iter().flatten() {
            let value = key.as_int()?;
            (low, high, count) = (low.min(value), high.max(value), count + 1);
        }
        let span = (high as i128 - low as i128 + 1) as u128;
        (count > 0 && span <= u128::from((count * DENSE_SLOTS_PER_KEY).max(DENSE_SLOTS_MIN)))
            .then_some((low, span as usize))
    }

    /// The slot of `key` in a dense table.
    #[inline]
    fn slot<'s>(low: i64, slots: &'s [u32], key: &K) -> Option<&'s u32> {
        let offset = key.as_int()? as i128 - low as i128;
        usize::try_from(offset).ok().and_then(|offset| slots.get(offset))
    }

    /// The first two build rows with `key`.
    #[inline]
    fn get(&self, key: &K, next_same_key: &[usize]) -> (usize, usize) {
        match self {
            Partners::Hashed(table) => table.get(key).copied().unwrap_or((END, END)),
            Partners::Dense { low, slots } => match Self::slot(*low, slots, key) {
                None | Some(&NO_ROW) => (END, END),
                Some(&slot) => {
                    let first = (slot & !MORE_ROWS) as usize - 1;
                    (first, if slot & MORE_ROWS != 0 { next_same_key[first] } else { END })
                }
            },
        }
    }

    /// Asks for where [`Partners::get`] will look for `key` (dense tables only).
    #[inline]
    fn prefetch(&self, key: &K) {
        if let Partners::Dense { low, slots } = self
            && let Some(slot) = Self::slot(*low, slots, key)
        {
            bitpack::prefetch_line(slot);
        }
    }

    /// The first build row with `key`, if a dense table has one (its slot should be in cache by now).
    #[inline]
    fn dense_first(&self, key: &K) -> Option<usize> {
        match self {
            Partners::Dense { low, slots } => match Self::slot(*low, slots, key) {
                None | Some(&NO_ROW) => None,
                Some(&slot) => Some((slot & !MORE_ROWS) as usize - 1),
            },
            Partners::Hashed(_) => None,
        }
    }
}

/// A hash join's build side, probed inside the tasks of the scan of its other input.
///
/// This is for an aggregate over an inner join whose probing input is a scan handed the build side's keys
/// ([`JoinPlan::key_filter`]): the star-schema join with an aggregate on top, `bench queries`' join. Each task joins
/// the rows it selects with their partners and aggregates the joined rows, as a scan aggregates its own rows. So
/// the probing input's rows are never gathered as vectors of values (each an allocation made on a worker and
/// freed on the session thread), and the probes run on every worker rather than on the session thread alone. The
/// hashed side's rows, when they come from a scan, are laid back to back by its tasks (`TaskOutput::Values`).
/// On that join (5 million rows per table, 2 workers, binaries run back to back) the statement took 30-32 ms
/// against 57-60 ms with the join on the session thread: 42 ms with the probes in the tasks, the rest from
/// the hashed side's rows back to back.
pub struct JoinProbe {
    /// The build side's rows, back to back, [`JoinProbe::build_width`] values each.
    build_rows: Vec<Value>,
    build_width: usize,
    /// Where each key's build rows are.
    partners: Partners<i64>,
    next_same_key: Vec<usize>,
    /// Whether the build side is the join's left input (so the scanned one is its right).
    build_is_left: bool,
    /// The scanned input's row, over the table row the scan reads: the scan plan's projections.
    scan_projections: Vec<Expr>,
    /// The table column holding the scanned input's key.
    scan_key_column: usize,
    /// The rest of the join condition, over the joined row.
    condition: Option<Expr>,
    /// Whether the aggregate over the join is `COUNT(*)`s alone, with no condition beyond the key: each probing
    /// row then counts its partners ([`JoinProbe::partner_count`]), and neither its row nor theirs is read.
    counts_only: bool,
    /// A LEFT join's scanned left input ([`ProbePlan`]): a row that meets no partner is joined with NULLs.
    preserves_scanned: bool,
    /// The WHERE over the joined rows, which a joined row passes before it is aggregated.
    filter: Option<Expr>,
    /// Joined rows the tasks produced, for EXPLAIN ANALYZE.
    joined_rows: AtomicU64,
}

/// A task's scratch rows for [`JoinProbe::join`], reused from row to row.
#[derive(Default)]
struct ProbeBuffers {
    scanned: Vec<Value>,
    joined: Vec<Value>,
    /// A block's selected rows with a non-NULL key: (row in block, key).
    keyed: Vec<(usize, i64)>,
    /// A block's selected rows with a NULL key, where a LEFT join keeps them.
    unkeyed: Vec<usize>,
}

impl JoinProbe {
    /// The build side of `rows` (the join's other input, `width` values each, back to back) by `keys` (theirs,
    /// in order), for the aggregate over the join `call`, probed from the scan of `plan`.
    fn build(
        rows: Vec<Value>,
        width: usize,
        keys: Vec<Option<i64>>,
        plan: &ProbePlan<'_>,
        call: &AggregateOverJoin<'_>,
    ) -> JoinProbe {
        let preserves_scanned = plan.preserves_scanned;
        let mut next_same_key = vec![END; keys.len()];
        let partners = Partners::build(keys, &mut next_same_key);
        let condition = call.join.condition.clone();
        let counts_only = condition.is_none()
            && !preserves_scanned
            && call.filter.is_none()
            && call.group_by.is_empty()
            && call.aggregates.iter().all(|a| a.function == AggregateFunction::CountStar && a.filter.is_none());
        JoinProbe {
            build_rows: rows,
            build_width: width,
            partners,
            next_same_key,
            build_is_left: plan.filter.scans_right,
            scan_projections: plan.projections.to_vec(),
            scan_key_column: plan.filter.column,
            condition,
            counts_only,
            preserves_scanned,
            filter: call.filter.cloned(),
            joined_rows: AtomicU64::new(0),
        }
    }

    /// A scanned row that met no partner, joined with NULLs for the other side's columns (a LEFT join's), handed
    /// to `emit`.
    fn join_nulls(
        &self,
        table_row: &[Value],
        params: &[Value],
        buffers: &mut ProbeBuffers,
        emit: RowSink<'_>,
    ) -> Result<(), ExecError> {
        let ProbeBuffers { joined, .. } = buffers;
        joined.clear();
        for expr in &self.scan_projections {
            joined.push(read_or_eval(expr, table_row, params)?);
        }
        joined.resize(joined.len() + self.build_width, Value::Null);
        emit(joined)
    }

    /// Asks for where the partners of the key probed `PROBE_PREFETCH_ROWS` rows from now and of the one half as
    /// far are: the key's slot, then (its slot asked for earlier) its first build row. As in the session thread's
    /// probe loop: a probe is otherwise two cache misses in a row.
    /// A probe that only counts its partners (`rows` false) reads no build row, so none is asked for.
    #[inline]
    fn prefetch(&self, ahead: Option<i64>, nearer: Option<i64>, rows: bool) {
        if let Some(ahead) = ahead {
            self.partners.prefetch(&ahead);
        }
        if rows
            && let Some(nearer) = nearer
            && let Some(first) = self.partners.dense_first(&nearer)
            && let Some(value) = self.build_rows.get(first * self.build_width)
        {
            bitpack::prefetch_line(value);
        }
    }

    /// How many build rows the key whose first two are `(candidate, following)` has ([`JoinProbe::partners_of`]):
    /// what a join that only counts its rows needs of them, without reading one.
    #[inline]
    fn partner_count(&self, (candidate, mut following): (usize, usize)) -> u64 {
        if candidate == END {
            return 0;
        }
        let mut count = 1;
        while following != END {
            count += 1;
            following = self.next_same_key[following];
        }
        count
    }

    /// Joins one row the scan selected (`table_row`, indexed by table column) with its partners
    /// ([`JoinProbe::join_row`]).
    #[inline]
    fn join(
        &self,
        table_row: &[Value],
        params: &[Value],
        buffers: &mut ProbeBuffers,
        emit: RowSink<'_>,
    ) -> Result<(), ExecError> {
        let partners = match &table_row[self.scan_key_column] {
            Value::Int(key) => self.partners_of(*key),
            // `=` is never TRUE with a NULL.
            Value::Null => (END, END),
            other => return Err(ExecError::internal(format!("an integer join key is {other:?}"))),
        };
        self.join_row(partners, table_row, params, buffers, emit)
    }

    /// Joins one row the scan selected with its partners (its key's first two build rows, [`END`] for none or a
    /// NULL key), handing each joined row that meets the join's condition and then passes the WHERE over the
    /// joined rows to `emit`; a LEFT join's row that meets none is joined with NULLs instead.
    #[inline]
    fn join_row(
        &self,
        partners: (usize, usize),
        table_row: &[Value],
        params: &[Value],
        buffers: &mut ProbeBuffers,
        emit: RowSink<'_>,
    ) -> Result<(), ExecError> {
        let filter = self.filter.as_ref();
        if filter.is_none() && !self.preserves_scanned {
            return self.join_partners(partners, table_row, params, buffers, emit).map(|_| ());
        }
        let mut emit_passing = |joined: &[Value]| if passes(filter, joined, params)? { emit(joined) } else { Ok(()) };
        let met = self.join_partners(partners, table_row, params, buffers, &mut emit_passing)?;
        if met == 0 && self.preserves_scanned {
            self.join_nulls(table_row, params, buffers, &mut emit_passing)?;
        }
        Ok(())
    }

    /// The first two build rows with `key` ([`END`] for none).
    #[inline]
    fn partners_of(&self, key: i64) -> (usize, usize) {
        self.partners.get(&key, &self.next_same_key)
    }

    /// Joins a row whose key's first two build rows ([`JoinProbe::partners_of`]) are known with those that meet
    /// the join's condition, handing each joined row to `emit`. Returns how many met it.
    #[inline]
    fn join_partners(
        &self,
        (mut candidate, mut following): (usize, usize),
        table_row: &[Value],
        params: &[Value],
        buffers: &mut ProbeBuffers,
        emit: RowSink<'_>,
    ) -> Result<u64, ExecError> {
        if candidate == END {
            return Ok(0);
        }
        let ProbeBuffers { scanned, joined, .. } = buffers;
        scanned.clear();
        for expr in &self.scan_projections {
            scanned.push(read_or_eval(expr, table_row, params)?);
        }
        let mut count = 0;
        while candidate != END {
            let this = candidate;
            candidate = following;
            following = if candidate == END { END } else { self.next_same_key[candidate] };
            let build_row = &self.build_rows[this * self.build_width..(this + 1) * self.build_width];
            let (left, right) = if self.build_is_left { (build_row, &scanned[..]) } else { (&scanned[..], build_row) };
            joined.clear();
            joined.extend_from_slice(left);
            joined.extend_from_slice(right);
            if let Some(condition) = &self.condition
                && !matches!(condition.eval(joined, params)?, Value::Bool(true))
            {
                continue;
            }
            count += 1;
            emit(joined)?;
        }
        Ok(count)
    }
}

/// A scan task's part of a [`JoinProbe`]: joins the selected rows of a block (`mask` over `block` of `partition`)
/// with their partners and aggregates the joined rows `into` (GROUP BY keys, aggregates, the task's one group
/// without GROUP BY, its groups with). Returns `false` when the statement was cancelled meanwhile: a key with many
/// partners can make a morsel's joined rows far outnumber its rows. Kept out of line: `run_morsel`'s loop is every
/// scan's.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn probe_block(
    job: &ScanJob,
    probe: &JoinProbe,
    (partition, block, mask): (&Partition, usize, &BlockMask),
    cache: &mut BlockCache,
    row: &mut [Value],
    buffers: &mut ProbeBuffers,
    joined_rows: &mut u64,
    (group_by, aggregates, plain_state, partial): (
        &[Expr],
        &[AggregateCall],
        &mut Option<GroupState>,
        &mut PartialAggregate,
    ),
    ctx: &TaskContext<'_>,
) -> Result<bool, ExecError> {
    let params = &job.params[..];
    let first_row = block * BLOCK_ROWS;
    // The block's keys first, so that each probe can ask for its partners some rows ahead.
    let mut keyed = std::mem::take(&mut buffers.keyed);
    keyed.clear();
    let key_chunk = partition.column(probe.scan_key_column);
    let Some(keys) = cache.ints(partition, probe.scan_key_column, block) else {
        return Err(ExecError::internal("a probing join key that is not an integer column"));
    };
    // A LEFT join's rows with a NULL key are joined with NULLs after the others.
    let mut unkeyed = std::mem::take(&mut buffers.unkeyed);
    unkeyed.clear();
    for_each_set(mask, |i| {
        if !key_chunk.is_null(first_row + i) {
            keyed.push((i, keys[i]));
        } else if probe.preserves_scanned {
            unkeyed.push(i);
        }
    });
    let counts_only = probe.counts_only;
    let (mut error, mut counted) = (None, 0u64);
    for (position, &(i, key)) in keyed.iter().enumerate() {
        let ahead = keyed.get(position + PROBE_PREFETCH_ROWS).map(|&(_, key)| key);
        probe.prefetch(ahead, keyed.get(position + PROBE_PREFETCH_ROWS / 2).map(|&(_, key)| key), !counts_only);
        // A row without a partner is not even read (but for a LEFT join's).
        let partners = probe.partners_of(key);
        if partners.0 == END && !probe.preserves_scanned {
            continue;
        }
        if counts_only {
            let partners = probe.partner_count(partners);
            counted += partners;
            if let Err(e) = count_joined_many(joined_rows, partners, ctx) {
                error = Some(e);
                break;
            }
            continue;
        }
        cache.fill_row(partition, &job.columns_read, first_row + i, row);
        let joined = probe.join_row(partners, row, params, buffers, &mut |joined| {
            count_joined(joined_rows, ctx)?;
            aggregate_joined(group_by, aggregates, plain_state, partial, joined, params)
        });
        if let Err(e) = joined {
            error = Some(e);
            break;
        }
    }
    for &i in &unkeyed {
        if error.is_some() {
            break;
        }
        cache.fill_row(partition, &job.columns_read, first_row + i, row);
        let joined = probe.join_row((END, END), row, params, buffers, &mut |joined| {
            count_joined(joined_rows, ctx)?;
            aggregate_joined(group_by, aggregates, plain_state, partial, joined, params)
        });
        error = joined.err();
    }
    buffers.keyed = keyed;
    buffers.unkeyed = unkeyed;
    if counted > 0 {
        let state = plain_state.get_or_insert_with(|| aggregates.iter().map(Accumulator::new).collect());
        for accumulator in state.iter_mut() {
            accumulator.add_ints(counted as i64, 0, 0, 0);
        }
    }
    if ctx.is_cancelled() {
        return Ok(false);
    }
    error.map_or(Ok(true), Err)
}

/// Whether `row` passes `filter` (TRUE; no filter passes every row).
#[inline]
fn passes(filter: Option<&Expr>, row: &[Value], params: &[Value]) -> Result<bool, ExecError> {
    match filter {
        None => Ok(true),
        Some(filter) => Ok(matches!(filter.eval(row, params)?, Value::Bool(true))),
    }
}

/// `expr` over `row`: a plain column is copied out rather than evaluated.
#[inline]
fn read_or_eval(expr: &Expr, row: &[Value], params: &[Value]) -> Result<Value, ExecError> {
    match expr {
        Expr::Column { index, .. } if *index < row.len() => Ok(row[*index].clone()),
        _ => expr.eval(row, params),
    }
}

/// Counts a joined row in a scan task, and every [`INTERRUPT_CHECK_ROWS`] of them fails if the statement was
/// cancelled: a key with many partners can make a task's joined rows far outnumber its rows.
#[inline]
fn count_joined(joined_rows: &mut u64, ctx: &TaskContext<'_>) -> Result<(), ExecError> {
    *joined_rows += 1;
    if joined_rows.is_multiple_of(INTERRUPT_CHECK_ROWS as u64) && ctx.is_cancelled() {
        return Err(numadb_scheduler::QueryError::Cancelled.into());
    }
    Ok(())
}

/// [`count_joined`] for `rows` joined rows at once: fails if the statement was cancelled when their count
/// passes a multiple of [`INTERRUPT_CHECK_ROWS`].
#[inline]
fn count_joined_many(joined_rows: &mut u64, rows: u64, ctx: &TaskContext<'_>) -> Result<(), ExecError> {
    let before = *joined_rows;
    *joined_rows += rows;
    let check = INTERRUPT_CHECK_ROWS as u64;
    if before / check != *joined_rows / check && ctx.is_cancelled() {
        return Err(numadb_scheduler::QueryError::Cancelled.into());
    }
    Ok(())
}

/// Aggregates one joined row in a scan task: without GROUP BY into the task's one group (at hand, not looked
/// up), else by its key.
#[inline]
fn aggregate_joined(
    group_by: &[Expr],
    aggregates: &[AggregateCall],
    plain_state: &mut Option<GroupState>,
    partial: &mut PartialAggregate,
    joined: &[Value],
    params: &[Value],
) -> Result<(), ExecError> {
    if group_by.is_empty() {
        let state = plain_state.get_or_insert_with(|| aggregates.iter().map(Accumulator::new).collect());
        return aggregates.iter().zip(state.iter_mut()).try_for_each(|(call, a)| call.feed(a, joined, params));
    }
    group_row(group_by, aggregates, partial, joined, params)
}

/// An aggregate over a join, as [`Plan::Aggregate`] holds it.
struct AggregateOverJoin<'p> {
    join: &'p JoinPlan,
    /// A WHERE over the joined rows, between the join and the aggregate.
    filter: Option<&'p Expr>,
    group_by: &'p [Expr],
    aggregates: &'p [AggregateCall],
    sets: Option<&'p [Vec<usize>]>,
}

/// The join an aggregate's input is, directly or under a filter alone (a WHERE over the joined rows: `Plan::Post`
/// with nothing else), with that filter.
pub(crate) fn join_under_aggregate(input: &Plan) -> Option<(&JoinPlan, Option<&Expr>)> {
    match input {
        Plan::Join(join) => Some((join, None)),
        Plan::Post {
            input,
            filter: Some(filter),
            projection: None,
            distinct: Dedup::No,
            order_by,
            offset: None,
            limit: None,
            with_ties: false,
        } if order_by.is_empty() => match input.as_ref() {
            Plan::Join(join) => Some((join, Some(filter))),
            _ => None,
        },
        _ => None,
    }
}

/// What [`probed_join_aggregate`] did.
enum Probed {
    /// The aggregate's rows: the join was probed in the scan's tasks.
    Aggregated(Vec<Vec<Value>>),
    /// The join's inputs (left, right), finished: its build side turned out larger than the scanned table.
    Inputs(Rows, Rows),
    /// Nothing: the join does not allow it.
    NotApplicable,
}

/// How an aggregate over a join runs with the join's probes in one input's scan tasks ([`JoinProbe`]), when the
/// plan allows: an inner join on one integer key pair, one input (a scan) run second with the other's keys (not
/// where [`JoinPlan::keyed_input`] filters a scan's groups by a filtered left scan's keys instead), no ordered
/// aggregate (`string_agg` would see its values in the tasks' order). Decided from the plan alone, so that
/// [`collect_scans`] (which lays the other input's rows back to back when it is a scan) and
/// [`probed_join_aggregate`] agree.
struct ProbePlan<'p> {
    filter: crate::plan::KeyFilter,
    /// The other input: the hashed side.
    other: &'p Plan,
    other_key: &'p Expr,
    other_width: usize,
    /// The scan that probes, and its projections (its rows, over the table's).
    scan: &'p ScanPlan,
    projections: &'p [Expr],
    /// A LEFT join whose scanned input is its left: every scanned row is kept, with NULLs for the other side's
    /// columns where no partner meets it (the scan is then not filtered by the other side's keys).
    preserves_scanned: bool,
}

impl<'p> ProbePlan<'p> {
    fn of(join: &'p JoinPlan, aggregates: &[AggregateCall], join_key_filter: bool) -> Option<ProbePlan<'p>> {
        if join.left_keys.len() != 1 || aggregates.iter().any(|a| a.function == AggregateFunction::StringAgg) {
            return None;
        }
        let (filter, preserves_scanned) = match join.kind {
            // Not where a filtered left scan filters a scan's groups by its keys ([`JoinPlan::keyed_input`]):
            // probing would make every group of the right first, for the few the left's rows meet.
            JoinKind::Inner if join_key_filter => match (join.key_filter()?, join.keyed_input()?) {
                (rows, keyed) if rows == keyed => (rows, false),
                _ => return None,
            },
            // The left input's scan probes, keeping its rows without partners: the decorrelated scalar
            // subquery's form (`x < (SELECT avg(b.v) FROM b WHERE b.k = a.k)` is `a` left-joined with `b`'s
            // groups, filtered, then aggregated).
            JoinKind::Left if join_key_filter => {
                let Plan::Scan(ScanPlan { output: ScanOutput::Rows(projections), join_keys: None, .. }) =
                    join.left.as_ref()
                else {
                    return None;
                };
                let Expr::Column { index, .. } = &join.left_keys[0] else { return None };
                let Some(Expr::Column { index: column, data_type }) = projections.get(*index) else { return None };
                if !data_type.is_integer() || !join.right_keys[0].data_type().is_integer() {
                    return None;
                }
                (crate::plan::KeyFilter { scans_right: false, key: 0, column: *column }, true)
            }
            _ => return None,
        };
        let (other, other_key, other_width, scanned) = if filter.scans_right {
            (&join.left, &join.left_keys[0], join.left_width, &join.right)
        } else {
            (&join.right, &join.right_keys[0], join.right_width, &join.left)
        };
        let Plan::Scan(scan @ ScanPlan { output: ScanOutput::Rows(projections), .. }) = scanned.as_ref() else {
            return None;
        };
        // Rows of no columns laid back to back would not say how many there are.
        (other_width > 0).then_some(ProbePlan {
            filter,
            other,
            other_key,
            other_width,
            scan,
            projections,
            preserves_scanned,
        })
    }

    /// The other input when it is a scan producing rows: its tasks lay them back to back. (A scan that aggregates,
    /// a derived table, hands on its groups as rows.)
    fn other_rows_scan(&self) -> Option<&'p ScanPlan> {
        match self.other {
            Plan::Scan(scan @ ScanPlan { output: ScanOutput::Rows(_), .. }) => Some(scan),
            _ => None,
        }
    }
}

/// Whether an aggregate of `aggregates` over `input` probes its join in one input's scan tasks ([`ProbePlan`]), as
/// `collect_scans` and `finish` decide it: for EXPLAIN, whose `Key Filter` line is then that of the probe.
pub(crate) fn aggregate_probes_join(input: &Plan, aggregates: &[AggregateCall], join_key_filter: bool) -> bool {
    join_under_aggregate(input).is_some_and(|(join, _)| ProbePlan::of(join, aggregates, join_key_filter).is_some())
}

/// Runs an aggregate over a join with the join's probes inside one input's scan tasks ([`JoinProbe`]) when the
/// plan allows ([`ProbePlan`]) and the other input (the hashed side) is no larger than the scanned table.
fn probed_join_aggregate(
    call: &AggregateOverJoin<'_>,
    executor: &Executor<'_>,
    jobs: &[Arc<ScanJob>],
    next_job: &mut usize,
    budget: &ResultBudget,
    result: &mut ExecutionResult,
) -> Result<Probed, ExecError> {
    let join = call.join;
    let Some(plan) = ProbePlan::of(join, call.aggregates, executor.join_key_filter) else {
        return Ok(Probed::NotApplicable);
    };
    let ProbePlan { filter, other, other_key, other_width, scan, preserves_scanned, .. } = plan;
    // As `collect_scans` added the other input's scan.
    let other_values = match plan.other_rows_scan() {
        Some(_) => {
            let job = &jobs[*next_job];
            *next_job += 1;
            finish_scan_values(job, other_width)
        }
        None => finish(other, executor, jobs, next_job, budget, result)?.into_iter().flatten().collect(),
    };
    let started = Instant::now();
    let other_keys = int_keys(&other_values, other_width, other_key, executor)?;
    let keys = KeySet::of_keys(other_keys.iter().flatten().copied());
    // (A LEFT join's hashed side is its right, whatever its size, as on the session thread.)
    if other_keys.len() as u64 > scan.table.rows() && !preserves_scanned {
        // A hash table larger than the other side: join as before, hashing the smaller input.
        let other_rows = other_values.chunks(other_width).map(<[Value]>::to_vec).collect();
        let scanned_rows = keyed_scan(scan, filter.column, keys, executor, budget, result)?;
        return Ok(if filter.scans_right {
            Probed::Inputs(other_rows, scanned_rows)
        } else {
            Probed::Inputs(scanned_rows, other_rows)
        });
    }
    let build_count = other_keys.len();
    let probe = Arc::new(JoinProbe::build(other_values, other_width, other_keys, &plan, call));
    result.operator(format!("{} build side", join_operator(join)), build_count, started);
    let probing = ScanPlan {
        output: ScanOutput::Aggregate {
            group_by: call.group_by.to_vec(),
            aggregates: call.aggregates.to_vec(),
            sets: call.sets.map(<[Vec<usize>]>::to_vec),
        },
        join_keys: Some(JoinKeys { column: filter.column, keys: Arc::new(keys), probe: Some(Arc::clone(&probe)) }),
        ..scan.clone()
    };
    let started = Instant::now();
    let mut part = execute(&Plan::Scan(probing), executor)?;
    let rows = std::mem::take(&mut part.rows);
    budget.charge(&rows)?;
    result.absorb(part);
    let joined_rows = probe.joined_rows.load(Ordering::Relaxed) as usize;
    result.operator(
        format!("{}, probed and aggregated in the scan's tasks", join_operator(join)),
        joined_rows,
        started,
    );
    Ok(Probed::Aggregated(rows))
}

/// A scan's rows back to back (`width` values each), whether its tasks laid them so ([`ScanJob::values`]) or not.
fn finish_scan_values(job: &ScanJob, width: usize) -> Vec<Value> {
    let parts: Vec<TaskOutput> =
        job.slots.iter().filter_map(|slot| slot.lock().unwrap_or_else(|p| p.into_inner()).take()).collect();
    let values_in = |part: &TaskOutput| match part {
        TaskOutput::Values(values) => values.len(),
        TaskOutput::Rows(rows) => rows.len() * width,
        TaskOutput::Aggregate(..) | TaskOutput::AggregateParts(_) => 0,
    };
    // Sized once, as `finish_scan` does.
    let mut values = Vec::with_capacity(parts.iter().map(values_in).sum());
    for part in parts {
        match part {
            TaskOutput::Values(mut part) => values.append(&mut part),
            TaskOutput::Rows(rows) => values.extend(rows.into_iter().flatten()),
            TaskOutput::Aggregate(..) | TaskOutput::AggregateParts(_) => {}
        }
    }
    values
}

fn join_with_keys<K: JoinKey>(
    join: &JoinPlan,
    left: Vec<Vec<Value>>,
    right: Vec<Vec<Value>>,
    executor: &Executor<'_>,
    emit: RowSink<'_>,
    keys: Option<(KeyOf<'_, K>, KeyOf<'_, K>)>,
) -> Result<(), ExecError> {
    let params = executor.params;
    let hash_left = keys.is_some() && left.len() < right.len();
    let (build, probe) = if hash_left { (left, right) } else { (right, left) };
    let (keep_left, keep_right) =
        (matches!(join.kind, JoinKind::Left | JoinKind::Full), matches!(join.kind, JoinKind::Right | JoinKind::Full));
    let (keep_build, keep_probe) = if hash_left { (keep_left, keep_right) } else { (keep_right, keep_left) };

    // Each probe is a few cache misses into tables of megabytes; the layout below keeps them few. The build rows
    // lie back to back in one vector (one miss to read a partner, not two through its row's own allocation), and
    // the table holds each key's first two build rows (a key of one row, as a primary key is, needs no look at
    // the chain after it).
    let build_width = if hash_left { join.left_width } else { join.right_width };
    let build_rows = build.len();
    let mut partners = Partners::Hashed(HashMap::default());
    let mut next_same_key: Vec<usize> = Vec::new();
    let mut probe_keys: Vec<Option<K>> = Vec::new();
    if let Some((build_key, probe_key)) = keys {
        let mut build_keys = Vec::with_capacity(build_rows);
        for (position, row) in build.iter().enumerate() {
            if position % INTERRUPT_CHECK_ROWS == 0 {
                check_interrupts(executor)?;
            }
            build_keys.push(build_key(hash_left, row)?);
        }
        next_same_key = vec![END; build_rows];
        partners = Partners::build(build_keys, &mut next_same_key);
        // The probing keys first, so that the loop below can ask for a key's slot some rows ahead.
        probe_keys.reserve(probe.len());
        for (position, row) in probe.iter().enumerate() {
            if position % INTERRUPT_CHECK_ROWS == 0 {
                check_interrupts(executor)?;
            }
            probe_keys.push(probe_key(hash_left, row)?);
        }
    }
    let mut flat: Vec<Value> = Vec::with_capacity(build_rows * build_width);
    for row in build {
        if row.len() != build_width {
            return Err(ExecError::internal(format!("a join input row of {} columns, not {build_width}", row.len())));
        }
        flat.extend(row);
    }
    let build_row = |position: usize| &flat[position * build_width..(position + 1) * build_width];

    // Before a hash table, a bitmap of its integer keys (for the others there is none). Past 64 bits per key it
    // would be no smaller than the table. It is given up after [`BITMAP_TRIAL_PROBES`] probes if it turned fewer
    // than one in eight of them away (most probes have a partner, as when the probing side was scanned with
    // these keys): it is then one more miss per probe.
    const BITMAP_TRIAL_PROBES: u32 = 4096;
    let mut bitmap = match &partners {
        Partners::Hashed(table) => KeyBitmap::of(table.keys().filter_map(JoinKey::as_int), table.len(), 64),
        Partners::Dense { .. } => None,
    }
    .map(|bitmap| (bitmap, 0u32, 0u32));

    let mut build_matched = vec![false; if keep_build { build_rows } else { 0 }];
    let mut steps = 0usize;
    let width = join.left_width + join.right_width;
    let mut joined: Vec<Value> = Vec::with_capacity(width);
    for (index, probe_row) in probe.into_iter().enumerate() {
        steps += 1;
        if steps.is_multiple_of(INTERRUPT_CHECK_ROWS) {
            check_interrupts(executor)?;
        }
        // Two stages: the slot of the key some rows ahead, then the partner row of the key half as far ahead,
        // whose slot the first stage asked for.
        if let Some(Some(ahead)) = probe_keys.get(index + PROBE_PREFETCH_ROWS) {
            partners.prefetch(ahead);
        }
        if let Some(Some(nearer)) = probe_keys.get(index + PROBE_PREFETCH_ROWS / 2)
            && let Some(first) = partners.dense_first(nearer)
            && let Some(value) = flat.get(first * build_width)
        {
            bitpack::prefetch_line(value);
        }
        let (mut candidate, mut following) = match keys {
            Some(_) => probe_keys[index]
                .as_ref()
                .filter(|key| match (&mut bitmap, key.as_int()) {
                    (Some((bitmap, checked, turned_away)), Some(key)) => {
                        let may = bitmap.contains(key);
                        *checked += 1;
                        *turned_away += u32::from(!may);
                        may
                    }
                    _ => true,
                })
                .map_or((END, END), |key| partners.get(key, &next_same_key)),
            None if build_rows == 0 => (END, END),
            None => (0, if build_rows > 1 { 1 } else { END }),
        };
        if let Some((_, checked, turned_away)) = bitmap
            && checked >= BITMAP_TRIAL_PROBES
            && turned_away < checked / 8
        {
            bitmap = None;
        }
        let mut matched = false;
        while candidate != END {
            steps += 1;
            if steps.is_multiple_of(INTERRUPT_CHECK_ROWS) {
                check_interrupts(executor)?;
            }
            let this = candidate;
            candidate = following;
            following = match keys {
                _ if candidate == END => END,
                Some(_) => next_same_key[candidate],
                None if candidate + 1 < build_rows => candidate + 1,
                None => END,
            };
            let (left_row, right_row) = if hash_left {
                (build_row(this), probe_row.as_slice())
            } else {
                (probe_row.as_slice(), build_row(this))
            };
            joined.clear();
            joined.extend_from_slice(left_row);
            joined.extend_from_slice(right_row);
            if let Some(condition) = &join.condition
                && !matches!(condition.eval(&joined, params)?, Value::Bool(true))
            {
                continue;
            }
            matched = true;
            if keep_build {
                build_matched[this] = true;
            }
            emit(&joined)?;
        }
        if !matched && keep_probe {
            emit(&padded(probe_row, !hash_left, join.left_width, width))?;
        }
    }
    if keep_build {
        for (position, matched) in build_matched.into_iter().enumerate() {
            if !matched {
                emit(&padded(build_row(position).to_vec(), hash_left, join.left_width, width))?;
            }
        }
    }
    Ok(())
}

/// A row of one join input without a partner, padded with NULLs for the other input's columns.
fn padded(row: Vec<Value>, is_left: bool, left_width: usize, width: usize) -> Vec<Value> {
    if is_left {
        let mut row = row;
        row.resize(width, Value::Null);
        row
    } else {
        let mut padded = vec![Value::Null; left_width];
        padded.extend(row);
        padded
    }
}

/// `INTERSECT [ALL]` or `EXCEPT [ALL]`: the right input's rows are counted in a hash table, then the left
/// input's rows are kept or dropped in their order. Rows compare as `DISTINCT` compares them (NULLs equal).
/// `WITH RECURSIVE`: the base term's rows, then round after round the step's over the previous round's new rows,
/// until a round adds none; with `distinct` (UNION), rows seen before are not new. Every round is a statement
/// of its own (scans, operators) whose rows count against the budget, so a recursion that never ends stops at
/// `numadb.max_result_mb`, the statement timeout or a cancel.
fn recursive_union(
    id: usize,
    base: &Plan,
    step: &Plan,
    distinct: bool,
    executor: &Executor<'_>,
    budget: &ResultBudget,
) -> Result<Vec<Vec<Value>>, ExecError> {
    let mut seen: HashSet<Vec<Value>> = HashSet::new();
    let mut keep_new = |rows: Vec<Vec<Value>>| -> Vec<Vec<Value>> {
        if distinct { rows.into_iter().filter(|row| seen.insert(row.clone())).collect() } else { rows }
    };
    let mut working = keep_new(execute(base, executor)?.rows);
    budget.charge(&working)?;
    let mut all = working.clone();
    while !working.is_empty() {
        check_interrupts(executor)?;
        let round = step.with_working_table(id, &working);
        working = keep_new(execute(&round, executor)?.rows);
        budget.charge(&working)?;
        all.extend(working.iter().cloned());
    }
    Ok(all)
}

fn set_operation(
    op: SetOp,
    all: bool,
    left: Vec<Vec<Value>>,
    right: Vec<Vec<Value>>,
    executor: &Executor<'_>,
) -> Result<Vec<Vec<Value>>, ExecError> {
    let mut right_counts: HashMap<Vec<Value>, usize> = HashMap::with_capacity(right.len());
    for (position, row) in right.into_iter().enumerate() {
        if position % INTERRUPT_CHECK_ROWS == 0 {
            check_interrupts(executor)?;
        }
        *right_counts.entry(row).or_default() += 1;
    }
    let mut emitted: HashSet<Vec<Value>> = HashSet::new();
    let mut rows = Vec::new();
    for (position, row) in left.into_iter().enumerate() {
        if position % INTERRUPT_CHECK_ROWS == 0 {
            check_interrupts(executor)?;
        }
        let in_right = match right_counts.get_mut(&row) {
            // ALL pairs each left row with one right row: that right row is used up.
            Some(count) if *count > 0 => {
                if all {
                    *count -= 1;
                }
                true
            }
            _ => false,
        };
        let keep = match op {
            SetOp::Intersect => in_right,
            SetOp::Except => !in_right,
        };
        if keep && (all || emitted.insert(row.clone())) {
            rows.push(row);
        }
    }
    Ok(rows)
}

fn finish_scan(scan: &ScanPlan, job: &ScanJob, budget: &ResultBudget) -> Result<Vec<Vec<Value>>, ExecError> {
    match &scan.output {
        ScanOutput::Rows(projections) => {
            let parts: Vec<Vec<Vec<Value>>> = job
                .slots
                .iter()
                .filter_map(|slot| match slot.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    Some(TaskOutput::Rows(part)) => Some(part),
                    Some(TaskOutput::Values(values)) => {
                        Some(values.chunks(projections.len().max(1)).map(<[Value]>::to_vec).collect())
                    }
                    _ => None,
                })
                .collect();
            // Sized once: appended part by part, the vector of a million rows grew by copying itself (and
            // faulting in fresh pages) some twenty times.
            let mut rows = Vec::with_capacity(parts.iter().map(Vec::len).sum());
            parts.into_iter().for_each(|mut part| rows.append(&mut part));
            Ok(rows)
        }
        ScanOutput::Aggregate { .. } if job.merge_parts > 0 => {
            let started = Instant::now();
            let mut parts = std::mem::take(&mut *job.merged_rows.lock().unwrap_or_else(|p| p.into_inner()));
            let mut rows = Vec::with_capacity(parts.iter().map(Vec::len).sum());
            parts.iter_mut().for_each(|part| rows.append(part));
            job.merge_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            Ok(rows)
        }
        ScanOutput::Aggregate { group_by, aggregates, sets } => {
            let started = Instant::now();
            let mut total = PartialAggregate::default();
            for partial in job.merged.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
                total.merge(partial);
            }
            let rows = finish_groups(total, group_by.len(), aggregates, sets.as_deref(), Some(budget))?;
            job.merge_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            Ok(rows)
        }
    }
}

/// Runs an index lookup on the calling thread; returns rows and the number of rows the index found.
pub fn run_lookup(lookup: &LookupPlan, params: &[Value]) -> Result<(Vec<Vec<Value>>, u64), ExecError> {
    // A NULL key finds nothing (`c = NULL` and `c IN (NULL)` are never true).
    let keys: Vec<Value> = lookup
        .keys
        .iter()
        .map(|key| key.eval(&[], params))
        .filter(|key| !key.as_ref().is_ok_and(Value::is_null))
        .collect::<Result<_, _>>()?;
    let mut out = Vec::new();
    let mut partial = PartialAggregate::default();
    let snapshot = lookup.table.snapshot();
    let gone = || ExecError::internal("the planned index is gone");
    // The index takes inserts made after the snapshot (and, for a table ALTER TABLE has since replaced, those made
    // to its copy, which shares the keys): rows past the snapshot's are not this statement's to read.
    let rows = snapshot.rows();
    let mut found_rows: Vec<u32> = Vec::new();
    let mut keep = |row: u32| {
        if u64::from(row) < rows {
            found_rows.push(row);
        }
    };
    if let Some(range) = &lookup.range {
        let index = snapshot.sorted_index_on(lookup.column).ok_or_else(gone)?;
        if let Some((low, high)) = range.values(params)? {
            index.lookup_range(low.as_ref(), high.as_ref(), &mut keep);
        }
        // In table order, as a scan finds them.
        found_rows.sort_unstable();
    } else {
        let index = snapshot.index_on(lookup.column).ok_or_else(gone)?;
        for key in &keys {
            index.lookup(key, &mut keep);
        }
    }
    if keys.len() > 1 {
        // A key listed twice (or two that are equal, `1` and `1::bigint`) finds its rows once, in table order.
        found_rows.sort_unstable();
        found_rows.dedup();
    }
    let residual = lookup.residual.as_ref().map(|r| compile_where(r, params)).transpose()?;
    let mut columns = Vec::new();
    if let Some(residual) = &residual {
        residual.columns(&mut columns);
    }
    match &lookup.output {
        ScanOutput::Rows(projections) => projections.iter().for_each(|e| e.columns(&mut columns)),
        ScanOutput::Aggregate { group_by, aggregates, .. } => {
            group_by.iter().for_each(|e| e.columns(&mut columns));
            aggregates.iter().for_each(|a| a.columns(&mut columns));
        }
    }
    let width = columns.iter().max().map_or(0, |&m| m + 1);
    let mut row = vec![Value::Null; width];
    for &found in &found_rows {
        for &c in &columns {
            row[c] = snapshot.value(u64::from(found), c).unwrap_or(Value::Null);
        }
        if let Some(residual) = &residual
            && !residual.passes_row(&row, params)?
        {
            continue;
        }
        match &lookup.output {
            ScanOutput::Rows(projections) => {
                out.push(projections.iter().map(|e| e.eval(&row, params)).collect::<Result<Vec<_>, _>>()?)
            }
            ScanOutput::Aggregate { group_by, aggregates, .. } => {
                group_row(group_by, aggregates, &mut partial, &row, params)?
            }
        }
    }
    if let ScanOutput::Aggregate { group_by, aggregates, sets } = &lookup.output {
        out = finish_groups(partial, group_by.len(), aggregates, sets.as_deref(), None)?;
    }
    Ok((out, found_rows.len() as u64))
}

/// A constant, non-negative row count for `LIMIT`/`OFFSET`.
fn row_count(expr: &Expr, params: &[Value], what: &str) -> Result<Option<usize>, ExecError> {
    match expr.eval(&[], params)? {
        Value::Null => Ok(None),
        Value::Int(n) if n >= 0 => Ok(Some(usize::try_from(n).unwrap_or(usize::MAX))),
        Value::Int(_) => Err(ExecError::new(
            if what == "LIMIT" { sqlstate::INVALID_ROW_COUNT_IN_LIMIT } else { "2201X" },
            format!("{what} must not be negative"),
        )),
        other => Err(ExecError::new(
            sqlstate::DATATYPE_MISMATCH,
            format!("argument of {what} must be an integer, not {other}"),
        )),
    }
}

/// A row's ORDER BY keys and the row (projected).
type KeyedRow = (Vec<Value>, Vec<Value>);

#[allow(clippy::too_many_arguments)]
fn post_process(
    rows: Vec<Vec<Value>>,
    filter: Option<&Expr>,
    projection: Option<&[Expr]>,
    distinct: Dedup,
    order_by: &[SortKey],
    offset: Option<&Expr>,
    limit: Option<(&Expr, bool)>,
    params: &[Value],
    result: &mut ExecutionResult,
) -> Result<Vec<Vec<Value>>, ExecError> {
    let started = Instant::now();
    let offset = offset.map(|e| row_count(e, params, "OFFSET")).transpose()?.flatten().unwrap_or(0);
    let with_ties = limit.is_some_and(|(_, with_ties)| with_ties);
    let limit = match limit {
        // PostgreSQL: a NULL count with ties is an error, not "all rows" (2201W).
        Some((e, true)) => Some(row_count(e, params, "LIMIT")?.ok_or_else(|| {
            ExecError::new(
                sqlstate::INVALID_ROW_COUNT_IN_LIMIT,
                "row count cannot be null in FETCH FIRST ... WITH TIES clause",
            )
        })?),
        Some((e, false)) => row_count(e, params, "LIMIT")?,
        None => None,
    };
    // A projection of distinct columns (a grouping's output in its select list's order, a subquery's columns)
    // moves the values out of the row rather than evaluating each: over 3 million groups evaluating it took 300 ms.
    let moved_columns: Option<Vec<usize>> = projection.and_then(|exprs| {
        let columns: Vec<usize> = exprs
            .iter()
            .map(|e| match e {
                Expr::Column { index, .. } => Some(*index),
                _ => None,
            })
            .collect::<Option<_>>()?;
        let distinct = columns.iter().collect::<HashSet<_>>().len() == columns.len();
        distinct.then_some(columns)
    });
    // A HAVING clause, or a WHERE over rows an operator produced, compiled as a scan's WHERE is: its parts that
    // cannot fail first, then the cheapest (`HAVING 10 / z > 1 AND z <> 0` divides by no zero).
    let filter = filter.map(|filter| compile_where(filter, params)).transpose()?;
    let kept_row = |row: &[Value]| -> Result<bool, ExecError> {
        match &filter {
            Some(filter) => filter.passes_row(row, params),
            None => Ok(true),
        }
    };
    // The values a row keeps, while they are put back in it in their new order.
    let mut moved: Vec<Value> = Vec::new();
    let mut project = |mut row: Vec<Value>| -> Result<Vec<Value>, ExecError> {
        Ok(match (projection, &moved_columns) {
            (Some(_), Some(columns)) if columns.iter().all(|&c| c < row.len()) => {
                if !columns.iter().enumerate().all(|(i, &c)| i == c) {
                    // In the row's own vector: a new one per row, made here and the old one freed (rows made on
                    // the workers), took 13 ms over 200 000 rows.
                    moved.extend(columns.iter().map(|&c| std::mem::replace(&mut row[c], Value::Null)));
                    row.clear();
                    row.append(&mut moved);
                }
                // The row's first columns, in order: it loses the rest.
                row.truncate(columns.len());
                row
            }
            (Some(exprs), _) => exprs.iter().map(|e| e.eval(&row, params)).collect::<Result<Vec<_>, _>>()?,
            (None, _) => row,
        })
    };
    let operator_name = match (filter.is_some(), projection.is_some()) {
        (true, true) => Some("Filter (HAVING) and Project"),
        (true, false) => Some("Filter (HAVING)"),
        (false, true) => Some("Project"),
        (false, false) => None,
    };
    if order_by.is_empty() && distinct == Dedup::No && !with_ties {
        // Nothing to sort or compare: the rows are filtered and projected where they lie, in their own vector,
        // up to the LIMIT (as PostgreSQL, which evaluates no row past it). Paired with their (no) sort keys in a
        // second vector, 3 million grouped rows took 80 ms, most of it faulting in the fresh 150 MB.
        let mut rows = rows;
        let end = limit.map_or(usize::MAX, |limit| offset.saturating_add(limit));
        let mut kept = 0;
        for position in 0..rows.len() {
            if kept == end {
                break;
            }
            if kept_row(&rows[position])? {
                rows[kept] = project(std::mem::take(&mut rows[position]))?;
                kept += 1;
            }
        }
        rows.truncate(kept);
        if let Some(name) = operator_name {
            result.operator(name, rows.len(), started);
        }
        let started = Instant::now();
        rows.drain(..offset.min(rows.len()));
        if limit.is_some() || offset > 0 {
            result.operator("Limit", rows.len(), started);
        }
        return Ok(rows);
    }
    let mut keyed: Vec<KeyedRow> = Vec::with_capacity(rows.len());
    for row in rows {
        if !kept_row(&row)? {
            continue;
        }
        let keys = order_by.iter().map(|k| k.expr.eval(&row, params)).collect::<Result<Vec<_>, _>>()?;
        keyed.push((keys, project(row)?));
    }
    if let Some(name) = operator_name {
        result.operator(name, keyed.len(), started);
    }
    if distinct == Dedup::Rows {
        let started = Instant::now();
        let mut seen = HashSet::new();
        keyed.retain(|(_, row)| seen.insert(row.clone()));
        result.operator("Distinct", keyed.len(), started);
    }
    let started = Instant::now();
    if !order_by.is_empty() {
        // With a LIMIT (and no ties or DISTINCT ON to look past it), only the first `OFFSET + LIMIT` rows need
        // sorting: they are selected first, ties going to the earlier row as in the stable sort of them all.
        let wanted = match (limit, with_ties, distinct) {
            (Some(limit), false, Dedup::No | Dedup::Rows) => Some(offset.saturating_add(limit)),
            _ => None,
        };
        if let Some(wanted) = wanted.filter(|&wanted| wanted < keyed.len()) {
            let mut numbered: Vec<(usize, KeyedRow)> = keyed.into_iter().enumerate().collect();
            let order = |(a_number, (a, _)): &(usize, KeyedRow), (b_number, (b, _)): &(usize, KeyedRow)| {
                compare_sort_keys(a, b, order_by).then(a_number.cmp(b_number))
            };
            if wanted > 0 {
                numbered.select_nth_unstable_by(wanted - 1, order);
            }
            numbered.truncate(wanted);
            numbered.sort_unstable_by(order);
            keyed = numbered.into_iter().map(|(_, pair)| pair).collect();
        } else {
            keyed.sort_by(|(a, _), (b, _)| compare_sort_keys(a, b, order_by));
        }
        result.operator("Sort", keyed.len(), started);
    }
    if let Dedup::OnSortKeys(n) = distinct {
        // Sorted, so the rows of one DISTINCT ON key are together: the first of each stays.
        let started = Instant::now();
        let on = &order_by[..n.min(order_by.len())];
        keyed.dedup_by(|(later, _), (first, _)| compare_sort_keys(first, later, on).is_eq());
        result.operator("Distinct On", keyed.len(), started);
    }
    let started = Instant::now();
    let mut end = limit.map_or(keyed.len(), |l| offset.saturating_add(l).min(keyed.len()));
    let start = offset.min(end);
    if with_ties && end > start {
        // The rows after the last one kept that sort equal to it (sorted: they follow it).
        let last = &keyed[end - 1].0;
        end += keyed[end..].iter().take_while(|(keys, _)| compare_sort_keys(last, keys, order_by).is_eq()).count();
    }
    let rows: Vec<Vec<Value>> = keyed.drain(start..end).map(|(_, row)| row).collect();
    if limit.is_some() || offset > 0 {
        result.operator("Limit", rows.len(), started);
    }
    Ok(rows)
}

/// `MASK_WORDS` is part of the kernel interface this module builds masks for.
const _: () = assert!(MASK_WORDS * 64 == BLOCK_ROWS);

#[cfg(test)]
mod tests {
    use super::*;
    use numadb_storage::DataType;

    /// The build rows `partners` gives for `key`, following the chain.
    fn chain(partners: &Partners<i64>, next_same_key: &[usize], key: i64) -> Vec<usize> {
        let (mut candidate, mut following) = partners.get(&key, next_same_key);
        let mut found = Vec::new();
        while candidate != END {
            found.push(candidate);
            candidate = following;
            following = if candidate == END { END } else { next_same_key[candidate] };
        }
        found
    }

    #[test]
    fn each_grouping_set_rolled_up_from_the_fewest_groups_is_rolled_up_from_every_key() {
        // Three keys (NULLs among them), COUNT(*), SUM and COUNT(DISTINCT) of the fourth column.
        let call = |function: AggregateFunction, distinct: bool| AggregateCall {
            function,
            argument: (function != AggregateFunction::CountStar)
                .then_some(Expr::Column { index: 3, data_type: DataType::Integer }),
            distinct,
            filter: None,
            extra: Vec::new(),
            order_by: Vec::new(),
            data_type: function.result_type(Some(DataType::Integer)),
        };
        let aggregates = [
            call(AggregateFunction::CountStar, false),
            call(AggregateFunction::Sum, false),
            call(AggregateFunction::Count, true),
        ];
        let group_by: Vec<Expr> = (0..3).map(|index| Expr::Column { index, data_type: DataType::Integer }).collect();
        let mut partial = PartialAggregate::default();
        for r in 0..5000i64 {
            let key = |modulus: i64| if r % 97 == 0 { Value::Null } else { Value::Int(r % modulus) };
            let row = [key(7), key(11), Value::Int(r % 3), Value::Int(r % 13)];
            group_row(&group_by, &aggregates, &mut partial, &row, &[]).unwrap();
        }
        // ROLLUP, CUBE, sets in another order than the keys', the finest set twice, and the empty set.
        let sets: [&[&[usize]]; 4] = [
            &[&[0, 1, 2], &[0, 1], &[0], &[]],
            &[&[0, 1, 2], &[0, 1], &[0, 2], &[1, 2], &[0], &[1], &[2], &[]],
            &[&[2, 0], &[1], &[0, 1, 2], &[2], &[0, 1, 2], &[0]],
            &[&[], &[1, 2]],
        ];
        for sets in sets {
            let sets: Vec<Vec<usize>> = sets.iter().map(|set| set.to_vec()).collect();
            let mut want: Vec<Vec<Value>> = Vec::new();
            for (position, set) in sets.iter().enumerate() {
                let rows = partial.roll_up(set).finish(&aggregates, !set.is_empty()).unwrap();
                want.extend(rows.into_iter().map(|row| spread_grouping_set(row, set, 3, position)));
            }
            let mut got = finish_groups(partial.clone(), 3, &aggregates, Some(&sets), None).unwrap();
            let order = |a: &Vec<Value>, b: &Vec<Value>| {
                a.iter().zip(b).map(|(x, y)| x.sort_cmp(y)).find(|o| o.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
            };
            want.sort_by(order);
            got.sort_by(order);
            assert_eq!(got, want, "sets {sets:?}");
        }
    }

    #[test]
    fn set_rows_are_visited_in_order_once_and_a_failure_stops_the_walk() {
        // Words of every kind: all rows, none, one row, the top and bottom rows, a pattern.
        let mask: BlockMask = std::array::from_fn(|word| match word % 6 {
            0 => u64::MAX,
            1 => 0,
            2 => 1 << 17,
            3 => 1 | 1 << 63,
            4 => 0xF0F0_0000_0000_0F0F,
            _ => u64::MAX,
        });
        let expected: Vec<usize> = (0..BLOCK_ROWS).filter(|&row| mask[row / 64] >> (row % 64) & 1 == 1).collect();
        let mut visited = Vec::new();
        for_each_set(&mask, |row| visited.push(row));
        assert_eq!(visited, expected);
        // Stopped inside a word of all rows, inside a sparse one, and halfway.
        for stop in [5, 264, expected[expected.len() / 2]] {
            let mut seen = Vec::new();
            let outcome = try_for_each_set(&mask, |row| {
                seen.push(row);
                if row == stop { Err(ExecError::internal("stop")) } else { Ok(()) }
            });
            assert!(outcome.is_err());
            assert_eq!(seen, expected.iter().copied().take_while(|&row| row <= stop).collect::<Vec<_>>());
        }
    }

    #[test]
    fn morsels_grow_with_the_table_per_worker_within_their_bounds() {
        // The thesis tables (50 million rows = 48 829 blocks): the largest morsels with 2 workers, the smallest
        // with 16, and a power of two in between.
        assert_eq!(morsel_blocks_for(48_829, 2), MORSEL_BLOCKS_MAX);
        assert_eq!(morsel_blocks_for(48_829, 16), MORSEL_BLOCKS_MIN);
        assert_eq!(morsel_blocks_for(48_829, 8), 256);
        assert_eq!(morsel_blocks_for(48_829, 4), 512);
        assert_eq!(morsel_blocks_for(20_000, 2), 512);
        // Small tables keep the smallest morsels; no workers counts as one.
        assert_eq!(morsel_blocks_for(1, 2), MORSEL_BLOCKS_MIN);
        assert_eq!(morsel_blocks_for(0, 0), MORSEL_BLOCKS_MIN);
        assert_eq!(morsel_blocks_for(usize::MAX, 1), MORSEL_BLOCKS_MAX);
        for workers in 1..40 {
            for blocks in (0..200_000).step_by(997) {
                let morsel = morsel_blocks_for(blocks, workers);
                assert!(morsel.is_power_of_two() && (MORSEL_BLOCKS_MIN..=MORSEL_BLOCKS_MAX).contains(&morsel));
                if morsel > MORSEL_BLOCKS_MIN {
                    assert!(blocks / morsel >= workers * MORSEL_TASKS_PER_WORKER, "{blocks} blocks, {workers} workers");
                }
            }
        }
    }

    #[test]
    fn morsels_tile_every_partition_in_order() {
        // A 50-million-row table in 4 Mi-row partitions: 11 of 4096 blocks and a last one of 3773.
        let partitions: Vec<usize> = std::iter::repeat_n(4096, 11).chain([3773]).collect();
        for (workers, fixed) in [(2, None), (16, None), (1, None), (2, Some(16)), (3, Some(1000))] {
            let morsels = morsels_of(&partitions, workers, fixed);
            // In order, back to back, every block once, none across a partition's end.
            let mut next = (0, 0);
            for (partition, blocks) in &morsels {
                if next.1 == partitions[next.0] {
                    next = (next.0 + 1, 0);
                }
                assert_eq!((*partition, blocks.start), next, "{workers} workers, {fixed:?}");
                assert!(!blocks.is_empty() && blocks.end <= partitions[*partition]);
                next.1 = blocks.end;
            }
            assert_eq!(next, (partitions.len() - 1, 3773));
            // One size but for partitions' ends.
            let size = fixed.unwrap_or_else(|| morsel_blocks_for(partitions.iter().sum(), workers));
            let whole = morsels_of(&partitions, workers, Some(size));
            for (partition, blocks) in &whole {
                assert!(blocks.len() == size || blocks.end == partitions[*partition], "{workers}: {blocks:?}");
            }
            // With the executor's size and few morsels per worker, the last `workers` of those are cut into
            // quarters; otherwise none.
            let cut = if fixed.is_none() && whole.len() < workers * MORSEL_TASKS_PER_WORKER { workers } else { 0 };
            let (body, tail) = whole.split_at(whole.len() - cut);
            assert_eq!(&morsels[..body.len()], body);
            let quarters: Vec<(usize, Range<usize>)> = tail
                .iter()
                .flat_map(|(partition, blocks)| {
                    let part = size / TAIL_MORSEL_PARTS;
                    blocks.clone().step_by(part).map(move |start| (*partition, start..(start + part).min(blocks.end)))
                })
                .collect();
            assert_eq!(&morsels[body.len()..], quarters, "{workers} workers");
            assert!(quarters.len() >= cut * (TAIL_MORSEL_PARTS - 1));
        }
        assert!(morsels_of(&[], 2, None).is_empty());
        // A morsel no longer than a quarter of the size stays whole.
        assert_eq!(morsels_of(&[0, 3], 2, None), vec![(1, 0..3)]);
    }

    #[test]
    fn dense_and_hashed_partners_give_every_build_row_of_a_key_in_order() {
        let near = vec![Some(5), None, Some(5), Some(-3), Some(5), Some(9), Some(-3)];
        let mut far = near.clone();
        far.push(Some(i64::MAX));
        for (keys, dense) in [(near, true), (far, false)] {
            let mut next_same_key = vec![END; keys.len()];
            let partners = Partners::build(keys.clone(), &mut next_same_key);
            assert_eq!(matches!(partners, Partners::Dense { .. }), dense);
            for probe in [i64::MIN, -4, -3, 0, 5, 6, 9, 10, i64::MAX] {
                let expected: Vec<usize> = (0..keys.len()).filter(|&p| keys[p] == Some(probe)).collect();
                assert_eq!(chain(&partners, &next_same_key, probe), expected, "{probe}, dense: {dense}");
                let first = partners.dense_first(&probe);
                assert_eq!(first, if dense { expected.first().copied() } else { None });
            }
        }
        let mut next_same_key = vec![END; 2];
        let empty: Partners<i64> = Partners::build(vec![None, None], &mut next_same_key);
        assert!(matches!(empty, Partners::Hashed(_)));
        assert_eq!(chain(&empty, &next_same_key, 0), Vec::<usize>::new());
    }

    #[test]
    fn dense_slots_written_a_bucket_at_a_time_are_those_written_in_row_order() {
        // Offsets over 1000 slots with repeats and NULLs; buckets of 8 to 1024 slots (1024: written directly).
        let mut rng = fastrand::Rng::with_seed(7);
        for rows in [0, 1, 50, 3000] {
            let offsets: Vec<Option<u64>> =
                (0..rows).map(|_| (!rng.bool() || rng.u8(..) > 20).then(|| rng.u64(..1000))).collect();
            let direct_chains = {
                let mut next_same_key = vec![END; rows];
                let slots = dense_slots(offsets.iter().copied(), 1000, &mut next_same_key, 1024);
                (slots, next_same_key)
            };
            for bucket_slots in [8, 64, 100, 200] {
                let mut next_same_key = vec![END; rows];
                let slots = dense_slots(offsets.iter().copied(), 1000, &mut next_same_key, bucket_slots);
                assert_eq!(
                    (&slots, &next_same_key),
                    (&direct_chains.0, &direct_chains.1),
                    "{rows} rows, {bucket_slots}"
                );
                // And against the offsets: each slot's chain is its rows in order.
                let partners: Partners<i64> = Partners::Dense { low: 0, slots };
                for offset in 0..1000u64 {
                    let expected: Vec<usize> = (0..rows).filter(|&p| offsets[p] == Some(offset)).collect();
                    assert_eq!(chain(&partners, &next_same_key, offset as i64), expected, "slot {offset}");
                }
            }
        }
    }
}
