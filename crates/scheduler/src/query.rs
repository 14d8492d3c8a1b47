//! Queries: a task graph submitted as a unit, its cancellation, its errors and its counters.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::Shared;
use crate::task::TaskSpec;

/// Identifies a task within a [`TaskGraph`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeId(pub(crate) usize);

/// Tasks and the order they must run in: a task runs after all tasks it was added after have finished. Built
/// completely before it is submitted, so running it needs no locks to track dependencies.
#[derive(Default)]
pub struct TaskGraph {
    pub(crate) nodes: Vec<GraphNodeSpec>,
}

pub(crate) struct GraphNodeSpec {
    pub(crate) spec: TaskSpec,
    pub(crate) dependencies: usize,
    pub(crate) dependents: Vec<usize>,
}

impl TaskGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty graph with room for `tasks` tasks.
    pub fn with_capacity(tasks: usize) -> Self {
        Self { nodes: Vec::with_capacity(tasks) }
    }

    /// Adds a task that can run at once.
    pub fn add(&mut self, spec: TaskSpec) -> NodeId {
        self.add_after(&[], spec)
    }

    /// Adds a task that runs after every task in `dependencies` has finished.
    pub fn add_after(&mut self, dependencies: &[NodeId], spec: TaskSpec) -> NodeId {
        let id = self.nodes.len();
        let mut unique: Vec<usize> = dependencies.iter().map(|d| d.0).filter(|&d| d < id).collect();
        unique.sort_unstable();
        unique.dedup();
        for &dependency in &unique {
            self.nodes[dependency].dependents.push(id);
        }
        self.nodes.push(GraphNodeSpec { spec, dependencies: unique.len(), dependents: Vec::new() });
        NodeId(id)
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the graph has no tasks.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// Why a query did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// A task returned an error; the rest of the query was cancelled.
    #[error("{0}")]
    Task(String),
    /// A task panicked; the worker survived, the rest of the query was cancelled.
    #[error("a task panicked: {0}")]
    Panic(String),
    /// The query was cancelled before it finished.
    #[error("query cancelled")]
    Cancelled,
    /// The scheduler shut down before the query finished.
    #[error("the scheduler shut down")]
    Shutdown,
}

/// A graph node at run time.
pub(crate) struct GraphNode {
    pub(crate) spec: Mutex<Option<TaskSpec>>,
    pub(crate) remaining: AtomicUsize,
    pub(crate) dependents: Vec<usize>,
}

/// The shared state of one running query.
pub(crate) struct QueryState {
    pub(crate) id: u64,
    cancelled: AtomicBool,
    error: Mutex<Option<QueryError>>,
    /// Tasks created (ready, waiting on dependencies, or spawned) and not yet finished.
    outstanding: AtomicUsize,
    done: Mutex<bool>,
    done_signal: Condvar,
    pub(crate) graph: Vec<GraphNode>,
    pub(crate) started: Instant,
    /// When the first task started, in nanoseconds after submission (`u64::MAX` until one has).
    first_task_start_ns: AtomicU64,
    /// When the last task ended, in nanoseconds after submission.
    last_task_end_ns: AtomicU64,
    /// Time the workers spent in the query's task bodies, summed over workers.
    task_busy_ns: AtomicU64,
    node_column: Vec<Option<usize>>,
    node_ids: Vec<u32>,
    domain_names: Vec<String>,
    tasks_run: Vec<AtomicU64>,
    tasks_stolen: Vec<AtomicU64>,
    tasks_skipped: AtomicU64,
    /// Row-major (running domain × memory node) bytes.
    bytes: Vec<AtomicU64>,
}

impl QueryState {
    pub(crate) fn new(id: u64, shared: &Shared, graph: Vec<GraphNode>, tasks: usize) -> Self {
        let domains = shared.domains.len();
        let columns = shared.node_ids.len();
        QueryState {
            id,
            cancelled: AtomicBool::new(false),
            error: Mutex::new(None),
            outstanding: AtomicUsize::new(tasks),
            done: Mutex::new(tasks == 0),
            done_signal: Condvar::new(),
            graph,
            started: Instant::now(),
            first_task_start_ns: AtomicU64::new(u64::MAX),
            last_task_end_ns: AtomicU64::new(0),
            task_busy_ns: AtomicU64::new(0),
            node_column: shared.node_column.clone(),
            node_ids: shared.node_ids.clone(),
            domain_names: shared.domains.domains.iter().map(|d| d.name.clone()).collect(),
            tasks_run: (0..domains).map(|_| AtomicU64::new(0)).collect(),
            tasks_stolen: (0..domains).map(|_| AtomicU64::new(0)).collect(),
            tasks_skipped: AtomicU64::new(0),
            bytes: (0..domains * columns).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Records the first failure and cancels the rest.
    pub(crate) fn fail(&self, error: QueryError) {
        let mut slot = self.error.lock().unwrap_or_else(|poison| poison.into_inner());
        if slot.is_none() {
            *slot = Some(error);
        }
        drop(slot);
        self.cancel();
    }

    pub(crate) fn add_outstanding(&self, count: usize) {
        self.outstanding.fetch_add(count, Ordering::AcqRel);
    }

    /// Marks one task finished; wakes the waiter when it was the last.
    pub(crate) fn finish_one(&self) {
        self.finish_many(1);
    }

    /// Marks `count` tasks finished; wakes the waiter when they were the last.
    pub(crate) fn finish_many(&self, count: usize) {
        if count > 0 && self.outstanding.fetch_sub(count, Ordering::AcqRel) == count {
            let mut done = self.done.lock().unwrap_or_else(|poison| poison.into_inner());
            *done = true;
            self.done_signal.notify_all();
        }
    }

    pub(crate) fn record_runs(&self, domain: u32, runs: u64, stolen: u64) {
        if runs > 0
            && let Some(counter) = self.tasks_run.get(domain as usize)
        {
            counter.fetch_add(runs, Ordering::Relaxed);
        }
        if stolen > 0
            && let Some(counter) = self.tasks_stolen.get(domain as usize)
        {
            counter.fetch_add(stolen, Ordering::Relaxed);
        }
    }

    /// Adds a worker's batch of task timings: the earliest start and latest end among them (nanoseconds after
    /// submission) and the time spent in their bodies.
    pub(crate) fn record_task_times(&self, first_start_ns: u64, last_end_ns: u64, busy_ns: u64) {
        if busy_ns == 0 && first_start_ns == u64::MAX {
            return;
        }
        self.first_task_start_ns.fetch_min(first_start_ns, Ordering::Relaxed);
        self.last_task_end_ns.fetch_max(last_end_ns, Ordering::Relaxed);
        self.task_busy_ns.fetch_add(busy_ns, Ordering::Relaxed);
    }

    pub(crate) fn record_skipped(&self) {
        self.tasks_skipped.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn account_read(&self, domain: u32, node: u32, bytes: u64) {
        let Some(Some(column)) = self.node_column.get(node as usize) else { return };
        let index = domain as usize * self.node_ids.len() + column;
        if let Some(cell) = self.bytes.get(index) {
            cell.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    fn wait_done(&self, timeout: Option<Duration>) -> bool {
        let mut done = self.done.lock().unwrap_or_else(|poison| poison.into_inner());
        let deadline = timeout.map(|t| Instant::now() + t);
        while !*done {
            match deadline {
                None => done = self.done_signal.wait(done).unwrap_or_else(|poison| poison.into_inner()),
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        return false;
                    }
                    done = self
                        .done_signal
                        .wait_timeout(done, deadline - now)
                        .unwrap_or_else(|poison| poison.into_inner())
                        .0;
                }
            }
        }
        true
    }

    fn report(&self) -> QueryReport {
        let load = |counters: &[AtomicU64]| counters.iter().map(|c| c.load(Ordering::Relaxed)).collect::<Vec<u64>>();
        let columns = self.node_ids.len();
        let flat = load(&self.bytes);
        let first_start_ns = self.first_task_start_ns.load(Ordering::Relaxed);
        let (dispatch, task_span) = if first_start_ns == u64::MAX {
            (Duration::ZERO, Duration::ZERO)
        } else {
            let last_end_ns = self.last_task_end_ns.load(Ordering::Relaxed).max(first_start_ns);
            (Duration::from_nanos(first_start_ns), Duration::from_nanos(last_end_ns - first_start_ns))
        };
        QueryReport {
            query_id: self.id,
            elapsed: self.started.elapsed(),
            dispatch,
            task_span,
            task_busy: Duration::from_nanos(self.task_busy_ns.load(Ordering::Relaxed)),
            domain_names: self.domain_names.clone(),
            tasks_run: load(&self.tasks_run),
            tasks_stolen: load(&self.tasks_stolen),
            tasks_skipped: self.tasks_skipped.load(Ordering::Relaxed),
            bytes_read: ByteMatrix {
                worker_domains: self.domain_names.clone(),
                memory_nodes: self.node_ids.clone(),
                bytes: flat.chunks(columns.max(1)).map(<[u64]>::to_vec).collect(),
            },
        }
    }
}

/// Bytes read, by the domain a task ran in (rows) and the memory node it read from (columns): the software
/// equivalent of memory-controller counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ByteMatrix {
    /// Row names.
    pub worker_domains: Vec<String>,
    /// Column node ids.
    pub memory_nodes: Vec<u32>,
    /// `bytes[row][column]`.
    pub bytes: Vec<Vec<u64>>,
}

impl ByteMatrix {
    /// All bytes.
    pub fn total(&self) -> u64 {
        self.bytes.iter().flatten().sum()
    }

    /// Bytes read by domain `row` from node `node`.
    pub fn get(&self, row: usize, node: u32) -> u64 {
        let Some(column) = self.memory_nodes.iter().position(|&n| n == node) else { return 0 };
        self.bytes.get(row).and_then(|r| r.get(column)).copied().unwrap_or(0)
    }

    /// Bytes read from a node local to the reading domain, given each domain's local nodes.
    pub fn local_bytes(&self, local_nodes: &[numadb_topology::NodeSet]) -> u64 {
        self.bytes
            .iter()
            .enumerate()
            .map(|(row, cells)| {
                cells
                    .iter()
                    .zip(&self.memory_nodes)
                    .filter(|&(_, &node)| local_nodes.get(row).is_some_and(|set| set.contains(node)))
                    .map(|(&bytes, _)| bytes)
                    .sum::<u64>()
            })
            .sum()
    }

    /// Adds another matrix of the same shape.
    pub fn add(&mut self, other: &ByteMatrix) {
        for (row, other_row) in self.bytes.iter_mut().zip(&other.bytes) {
            for (cell, other_cell) in row.iter_mut().zip(other_row) {
                *cell += other_cell;
            }
        }
    }
}

/// What a finished query did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueryReport {
    /// The query's id.
    pub query_id: u64,
    /// From submission to the last task.
    pub elapsed: Duration,
    /// From submission to the start of the first task: how long the workers took to wake and take it.
    pub dispatch: Duration,
    /// From the start of the first task to the end of the last.
    pub task_span: Duration,
    /// Time the workers spent running the tasks, summed over workers: against `task_span` × workers, how busy
    /// they were while the query ran (the rest is waiting for tasks, mostly at the end).
    pub task_busy: Duration,
    /// Domain names, the index of the per-domain vectors.
    pub domain_names: Vec<String>,
    /// Tasks run, by the domain they ran in.
    pub tasks_run: Vec<u64>,
    /// Of those, tasks taken from another domain's queue, by the thief's domain.
    pub tasks_stolen: Vec<u64>,
    /// Tasks skipped because the query was cancelled or failed.
    pub tasks_skipped: u64,
    /// Bytes read per (running domain, memory node).
    pub bytes_read: ByteMatrix,
}

impl QueryReport {
    /// Adds the counters of another query run by the same scheduler (a statement's subqueries and the statement
    /// itself report as one): times, tasks per domain, skipped tasks, bytes per (domain, node).
    pub fn add(&mut self, other: &QueryReport) {
        self.elapsed += other.elapsed;
        self.dispatch += other.dispatch;
        self.task_span += other.task_span;
        self.task_busy += other.task_busy;
        self.tasks_skipped += other.tasks_skipped;
        self.tasks_run.iter_mut().zip(&other.tasks_run).for_each(|(a, b)| *a += b);
        self.tasks_stolen.iter_mut().zip(&other.tasks_stolen).for_each(|(a, b)| *a += b);
        self.bytes_read.add(&other.bytes_read);
    }
}

/// A submitted query: wait for it, or cancel it.
pub struct Query {
    pub(crate) state: Arc<QueryState>,
}

impl Query {
    /// The query's id.
    pub fn id(&self) -> u64 {
        self.state.id
    }

    /// Asks the query to stop: tasks not yet started are skipped; running tasks see
    /// [`crate::TaskContext::is_cancelled`].
    pub fn cancel(&self) {
        self.state.fail(QueryError::Cancelled);
    }

    /// Whether every task has finished or been skipped.
    pub fn is_finished(&self) -> bool {
        *self.state.done.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    /// Waits at most `timeout` for the query to finish, without consuming the handle; returns whether it has.
    pub fn wait_for(&self, timeout: Duration) -> bool {
        self.state.wait_done(Some(timeout))
    }

    /// Waits for the query and returns what it did, or why it failed.
    pub fn wait(self) -> Result<QueryReport, QueryError> {
        self.state.wait_done(None);
        self.outcome()
    }

    /// Waits at most `timeout`; when it runs out, cancels the query, waits for the tasks already running to
    /// finish, and returns `QueryError::Cancelled` (PostgreSQL's `statement_timeout`).
    pub fn wait_timeout(self, timeout: Duration) -> Result<QueryReport, QueryError> {
        if !self.state.wait_done(Some(timeout)) {
            self.cancel();
            self.state.wait_done(None);
        }
        self.outcome()
    }

    fn outcome(&self) -> Result<QueryReport, QueryError> {
        let error = self.state.error.lock().unwrap_or_else(|poison| poison.into_inner()).clone();
        match error {
            Some(error) => Err(error),
            None => Ok(self.state.report()),
        }
    }
}
