//! numadb's NUMA-aware task scheduler, after SAP HANA's (thesis §2.6, figure 6).
//!
//! # The problem
//! A column scan is memory-bound: it runs fastest on a CPU whose memory controller holds the column. A general
//! work-stealing pool (rayon, tokio) knows nothing of that: any idle thread takes any task, so on a machine with
//! several NUMA domains a scan reads remote memory as often as not. But never moving work is no answer either:
//! when one domain's data is hot and another's cold, half the machine sits idle. HANA's answer, which this crate
//! implements so that each of its knobs can be measured, is:
//!
//! - **one queue per domain** (a domain is a NUMA node by default; a package or an L3 group on request). A task
//!   may name a *preferred domain* — scans name the domain holding their partition — and is queued there. A task
//!   without a preference goes to the submitting worker's domain, or round-robin for outside submitters;
//! - **workers** belong to a domain and take tasks from its queue first. Which CPUs get workers is the *layout*:
//!   all CPUs, one domain only, or half the cores of each domain (the thesis's three);
//! - an idle worker may **steal** from other domains' queues: never (`off`), only from domains within a distance
//!   (`neighbor`: with SNC2 that is the other half of the socket, never the other socket) or from any domain,
//!   nearest first. Victims are visited in tiers of equal distance and a tier is exhausted before the next
//!   (HotSLAW's hierarchical victim selection). A steal takes one task or half the victim's queue up to a cap;
//!   the extra tasks go to the thief's domain queue, where all its workers can take them;
//! - **binding** decides how far the operating system may move workers: `none` (never pinned), `preferred`
//!   (pinned to the preferred domain's CPUs while running a task that has one), `opportunistic` (also while
//!   running that task's direct children; HANA's default) and `always` (pinned to their domain for life).
//!
//! # Design
//! Queues are `crossbeam_deque::Injector`s, two per domain (high and normal priority). Tasks belong to a query:
//! a [`TaskGraph`] built completely before submission (dependencies are known up front, so finishing a task only
//! decrements counters: no locks), plus children spawned at run time. The query tracks outstanding tasks,
//! the first error (a task error or a caught panic: a panicking task fails its query, never its worker),
//! cancellation (tasks not yet started are skipped) and its counters, among them the (running domain × memory
//! node) byte matrix that tasks fill through [`TaskContext::account_read`]. Idle workers sleep on their domain's
//! condition variable; a submission wakes a sleeper of the target domain or, when none sleeps, of the nearest
//! domain allowed to steal from it.
//!
//! The policy decisions are pure functions in [`policy`], testable without threads. With [`Pinning::Logical`]
//! pinning is recorded instead of applied, so the same scheduler runs a four-domain fixture topology on a
//! two-CPU machine; the emulated multi-node guests run the same tests with real pinning.
//!
//! Architecture invariant: the scheduler knows domains, CPUs and tasks, never tables or partitions. Callers turn
//! "where is this partition" into a preferred domain.

mod config;
mod counters;
pub mod policy;
mod query;
mod task;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, fence};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_deque::Injector;
use crossbeam_utils::CachePadded;
use numadb_topology::{CpuSet, Domains, Topology, TopologyError};

pub use config::{
    Binding, NEAREST, Pinning, STEAL_BATCH_CAP_DEFAULT, SchedulerConfig, StealBatch, StealMode, Stealing, WorkerLayout,
};
pub use counters::{DomainCountersSnapshot, SchedulerCounters};
use query::QueryState;
pub use query::{ByteMatrix, NodeId, Query, QueryError, QueryReport, TaskGraph};
pub use task::{Priority, TaskContext, TaskError, TaskResult, TaskSpec};

use counters::DomainCounters;
use query::GraphNode;
use task::Task;

/// Longest an idle worker sleeps before looking at the queues again. Wake-ups are explicit; this bounds the cost
/// of a missed one.
const IDLE_WAIT_MAX: Duration = Duration::from_millis(50);

/// Stack for a worker thread. Tasks evaluate a statement's expressions by recursing once per level of their
/// trees, as deep as the statement's own thread lets a statement be (a chain of thousands of `+`), and may drop
/// a plan's last reference, whose drop recurses as deep; a thread's default 2 MiB overflowed at about a thousand
/// levels and aborted the whole process. A statement thread's stack is this size too
/// (`numadb_sql::text::STATEMENT_STACK_BYTES`, which says what the depth takes); address space: pages are only
/// touched as deep as a task goes.
pub const WORKER_STACK_BYTES: usize = if cfg!(debug_assertions) { 256 << 20 } else { 64 << 20 };

/// Why a scheduler could not be built.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// The configuration does not fit the topology.
    #[error("invalid scheduler configuration: {0}")]
    InvalidConfig(String),
    /// The topology cannot provide the requested domains.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// A worker thread could not be started.
    #[error("starting a worker thread: {0}")]
    Spawn(String),
}

/// One domain's queues and the place its idle workers sleep.
struct DomainQueue {
    high: Injector<Task>,
    normal: Injector<Task>,
    lock: Mutex<()>,
    wake: Condvar,
    sleepers: AtomicUsize,
}

/// What all workers and submitters share.
pub(crate) struct Shared {
    pub(crate) domains: Domains,
    pub(crate) config: SchedulerConfig,
    pub(crate) node_ids: Vec<u32>,
    pub(crate) node_column: Vec<Option<usize>>,
    queues: Vec<CachePadded<DomainQueue>>,
    has_workers: Vec<bool>,
    domains_with_workers: Vec<u32>,
    /// Per domain: the CPUs its workers were planned for (`Binding::Always` pins to these).
    pub(crate) worker_cpus: Vec<CpuSet>,
    /// The process's allowed CPUs: where an unpinned worker may run.
    pub(crate) allowed_cpus: CpuSet,
    /// Per thief domain: victim tiers, nearest first.
    pub(crate) tiers: Vec<Vec<Vec<u32>>>,
    /// Per victim domain: domains with workers that may steal from it, nearest first.
    thieves: Vec<Vec<u32>>,
    pub(crate) counters: Vec<CachePadded<DomainCounters>>,
    /// Tasks run, per worker (one cache line each: the hottest counter must not be shared).
    pub(crate) worker_tasks_run: Vec<CachePadded<AtomicU64>>,
    worker_domains: Vec<u32>,
    /// Domain of each CPU id (for accounting unpinned workers by where they run).
    pub(crate) cpu_domain: Vec<Option<u32>>,
    /// Bytes read by all queries since the counters were last reset, row-major (running domain × memory node).
    traffic: Vec<AtomicU64>,
    /// Nodes with CPUs: the rows of `node_traffic`.
    cpu_nodes: Vec<u32>,
    /// Row of each node id in `node_traffic`.
    cpu_node_row: Vec<Option<usize>>,
    /// The same bytes by the node of the CPU that read them (row) and the memory node (column): locality as the
    /// memory controllers see it, whatever the domains.
    node_traffic: Vec<AtomicU64>,
    pub(crate) shutdown: AtomicBool,
    pub(crate) alive_workers: AtomicUsize,
    next_query: AtomicU64,
    round_robin: AtomicUsize,
}

impl Shared {
    /// Adds to the scheduler's cumulative byte matrix.
    pub(crate) fn account_traffic(&self, domain: u32, node: u32, bytes: u64) {
        let Some(Some(column)) = self.node_column.get(node as usize) else { return };
        if let Some(cell) = self.traffic.get(domain as usize * self.node_ids.len() + column) {
            cell.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// Adds to the cumulative matrix by reading CPU's node.
    pub(crate) fn account_node_traffic(&self, cpu_node: u32, node: u32, bytes: u64) {
        let Some(Some(column)) = self.node_column.get(node as usize) else { return };
        let Some(Some(row)) = self.cpu_node_row.get(cpu_node as usize) else { return };
        if let Some(cell) = self.node_traffic.get(row * self.node_ids.len() + column) {
            cell.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// The node whose memory a domain's workers treat as theirs first (for logical pinning, which runs nowhere).
    pub(crate) fn domain_home_node(&self, domain: u32) -> Option<u32> {
        self.domains.domains.get(domain as usize).and_then(|d| d.memory_nodes.iter().next())
    }

    pub(crate) fn push(&self, domain: u32, task: Task) {
        let queue = &self.queues[domain as usize];
        if task.priority.is_high() { queue.high.push(task) } else { queue.normal.push(task) }
    }

    /// Wakes up to `count` sleeping workers that can take tasks just queued in `domain`: the domain's own first,
    /// then those of the nearest domains allowed to steal from it.
    pub(crate) fn wake(&self, domain: u32, count: usize) {
        fence(Ordering::SeqCst);
        let mut remaining = count;
        let candidates = std::iter::once(domain).chain(self.thieves[domain as usize].iter().copied());
        for candidate in candidates {
            if remaining == 0 {
                return;
            }
            let queue = &self.queues[candidate as usize];
            let sleepers = queue.sleepers.load(Ordering::SeqCst);
            if sleepers == 0 {
                continue;
            }
            let _guard = queue.lock.lock().unwrap_or_else(|p| p.into_inner());
            if remaining >= sleepers {
                queue.wake.notify_all();
            } else {
                (0..remaining).for_each(|_| queue.wake.notify_one());
            }
            remaining = remaining.saturating_sub(sleepers);
        }
    }

    /// Whether a worker of `domain` could find a task now (own queue, or a queue it may steal from).
    pub(crate) fn has_work_for(&self, domain: u32) -> bool {
        let non_empty = |d: u32| {
            let queue = &self.queues[d as usize];
            !queue.high.is_empty() || !queue.normal.is_empty()
        };
        non_empty(domain) || self.tiers[domain as usize].iter().flatten().any(|&victim| non_empty(victim))
    }

    /// The domain for a task without a preference.
    fn fallback_domain(&self, submitter_domain: Option<u32>) -> u32 {
        if self.domains_with_workers.len() == 1 {
            return self.domains_with_workers[0];
        }
        match submitter_domain.filter(|&d| self.has_workers.get(d as usize).copied().unwrap_or(false)) {
            Some(domain) => domain,
            None => {
                let next = self.round_robin.fetch_add(1, Ordering::Relaxed);
                self.domains_with_workers[next % self.domains_with_workers.len()]
            }
        }
    }

    /// Queues a task whose dependencies are done and returns the domain it was queued in; the caller wakes a
    /// worker for it (one wake-up for many tasks when it queues many).
    fn enqueue(
        &self,
        query: &Arc<query::QueryState>,
        spec: TaskSpec,
        node: Option<usize>,
        inherited_binding: Option<u32>,
        submitter_domain: Option<u32>,
    ) -> u32 {
        let fallback = self.fallback_domain(submitter_domain);
        let (domain, rerouted) =
            policy::queue_for(&self.domains, &self.has_workers, spec.preferred, fallback, self.config.stealing.mode);
        if rerouted {
            self.counters[domain as usize].tasks_rerouted_in.fetch_add(1, Ordering::Relaxed);
        }
        let task = Task {
            body: spec.body,
            query: Arc::clone(query),
            node,
            preferred: spec.preferred,
            inherited_binding,
            priority: spec.priority,
            stolen: false,
        };
        self.push(domain, task);
        domain
    }

    /// Queues a task spawned by a running task.
    pub(crate) fn submit_dynamic(
        &self,
        query: &Arc<query::QueryState>,
        spec: TaskSpec,
        inherited_binding: Option<u32>,
        submitter_domain: Option<u32>,
    ) {
        query.add_outstanding(1);
        let domain = self.enqueue(query, spec, None, inherited_binding, submitter_domain);
        self.wake(domain, 1);
    }

    /// Releases the graph nodes that waited for `node`.
    pub(crate) fn release_dependents(&self, query: &Arc<query::QueryState>, node: usize, from_domain: u32) {
        for &dependent in &query.graph[node].dependents {
            let graph_node = &query.graph[dependent];
            if graph_node.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
                let spec = graph_node.spec.lock().unwrap_or_else(|p| p.into_inner()).take();
                if let Some(spec) = spec {
                    let domain = self.enqueue(query, spec, Some(dependent), None, Some(from_domain));
                    self.wake(domain, 1);
                }
            }
        }
    }

    /// After the workers are gone: skips every queued task so that waiters return.
    fn drain(&self) {
        loop {
            let mut drained_any = false;
            for (domain, queue) in self.queues.iter().enumerate() {
                while let Some(task) = queue.high.steal().success().or_else(|| queue.normal.steal().success()) {
                    drained_any = true;
                    task.query.fail(QueryError::Shutdown);
                    task.query.record_skipped();
                    self.counters[domain].tasks_skipped.fetch_add(1, Ordering::Relaxed);
                    if let Some(node) = task.node {
                        self.release_dependents(&task.query, node, domain as u32);
                    }
                    task.query.finish_one();
                }
            }
            if !drained_any {
                return;
            }
        }
    }
}

/// A running scheduler: its workers, queues and counters. Dropping it shuts it down.
pub struct Scheduler {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    workers: Vec<policy::WorkerPlan>,
}

/// What shutting down did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Worker threads joined.
    pub workers_joined: usize,
    /// Worker threads still running afterwards (always 0 unless a task never returns).
    pub workers_alive: usize,
}

impl Scheduler {
    /// Starts a scheduler on `topology` (which must be this machine's unless `config.pinning` is `Logical`).
    pub fn new(topology: &Topology, config: SchedulerConfig) -> Result<Self, SchedulerError> {
        let domains = topology.domains(config.granularity)?;
        if let StealBatch::Half { cap: 0 } = config.stealing.batch {
            return Err(SchedulerError::InvalidConfig("a batch steal must take at least one task".into()));
        }
        let plans = policy::plan_workers(topology, &domains, &config.layout)?;
        let domain_count = domains.len();
        let mut has_workers = vec![false; domain_count];
        let mut worker_cpus = vec![CpuSet::new(); domain_count];
        let mut workers_per_domain = vec![0usize; domain_count];
        for plan in &plans {
            has_workers[plan.domain as usize] = true;
            worker_cpus[plan.domain as usize].insert(plan.cpu);
            workers_per_domain[plan.domain as usize] += 1;
        }
        let domains_with_workers: Vec<u32> = (0..domain_count as u32).filter(|&d| has_workers[d as usize]).collect();
        let tiers: Vec<Vec<Vec<u32>>> = (0..domain_count as u32)
            .map(|d| {
                if has_workers[d as usize] {
                    policy::victim_tiers(&domains, d, config.stealing.mode)
                } else {
                    Vec::new()
                }
            })
            .collect();
        let thieves: Vec<Vec<u32>> = (0..domain_count as u32)
            .map(|victim| {
                let mut thieves: Vec<(u32, u32)> = (0..domain_count as u32)
                    .filter(|&thief| tiers[thief as usize].iter().flatten().any(|&v| v == victim))
                    .map(|thief| (domains.distance(thief, victim).unwrap_or(u32::MAX), thief))
                    .collect();
                thieves.sort_unstable();
                thieves.into_iter().map(|(_, thief)| thief).collect()
            })
            .collect();
        let node_ids: Vec<u32> = topology.node_ids().iter().collect();
        let mut node_column = vec![None; node_ids.iter().max().map_or(0, |&m| m as usize + 1)];
        for (column, &node) in node_ids.iter().enumerate() {
            node_column[node as usize] = Some(column);
        }
        let cpu_nodes: Vec<u32> = topology.nodes_with_cpus().iter().collect();
        let mut cpu_node_row = vec![None; node_column.len()];
        for (row, &node) in cpu_nodes.iter().enumerate() {
            if let Some(slot) = cpu_node_row.get_mut(node as usize) {
                *slot = Some(row);
            }
        }
        let mut cpu_domain = vec![None; topology.cpus.iter().map(|c| c.id as usize + 1).max().unwrap_or(0)];
        for domain in &domains.domains {
            for cpu in domain.cpus.iter() {
                cpu_domain[cpu as usize] = Some(domain.id);
            }
        }
        let allowed_cpus = match config.pinning {
            Pinning::Os => numadb_placement::thread_affinity().unwrap_or_else(|_| topology.allowed.cpus.clone()),
            Pinning::Logical => topology.allowed.cpus.clone(),
        };
        let shared = Arc::new(Shared {
            queues: (0..domain_count)
                .map(|_| {
                    CachePadded::new(DomainQueue {
                        high: Injector::new(),
                        normal: Injector::new(),
                        lock: Mutex::new(()),
                        wake: Condvar::new(),
                        sleepers: AtomicUsize::new(0),
                    })
                })
                .collect(),
            counters: workers_per_domain
                .iter()
                .map(|&w| CachePadded::new(DomainCounters::new(domain_count, w)))
                .collect(),
            worker_tasks_run: plans.iter().map(|_| CachePadded::new(AtomicU64::new(0))).collect(),
            worker_domains: plans.iter().map(|p| p.domain).collect(),
            domains,
            config,
            node_ids,
            node_column,
            has_workers,
            domains_with_workers,
            worker_cpus,
            allowed_cpus,
            tiers,
            thieves,
            cpu_domain,
            traffic: (0..domain_count * topology.nodes.len()).map(|_| AtomicU64::new(0)).collect(),
            node_traffic: (0..cpu_nodes.len() * topology.nodes.len()).map(|_| AtomicU64::new(0)).collect(),
            cpu_nodes,
            cpu_node_row,
            shutdown: AtomicBool::new(false),
            alive_workers: AtomicUsize::new(plans.len()),
            next_query: AtomicU64::new(1),
            round_robin: AtomicUsize::new(0),
        });
        let mut threads = Vec::with_capacity(plans.len());
        for (index, plan) in plans.iter().enumerate() {
            let worker_shared = Arc::clone(&shared);
            let domain = plan.domain;
            let spawned = std::thread::Builder::new()
                .name(format!("numadb-w{}-{index}", plan.domain))
                .stack_size(WORKER_STACK_BYTES)
                .spawn(move || worker::run_worker(worker_shared, domain, index));
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(error) => {
                    shared.alive_workers.fetch_sub(plans.len() - index, Ordering::AcqRel);
                    let mut partial = Scheduler { shared, threads, workers: plans };
                    partial.stop();
                    return Err(SchedulerError::Spawn(error.to_string()));
                }
            }
        }
        Ok(Scheduler { shared, threads, workers: plans })
    }

    /// Submits a task graph as one query.
    pub fn submit(&self, graph: TaskGraph) -> Query {
        let shared = &self.shared;
        let id = shared.next_query.fetch_add(1, Ordering::Relaxed);
        let total = graph.nodes.len();
        // Only tasks that take part in dependencies get a run-time graph node; independent tasks (most of a scan)
        // cost nothing beyond their queue entry.
        const UNTRACKED: u32 = u32::MAX;
        let tracked = |node: &query::GraphNodeSpec| node.dependencies > 0 || !node.dependents.is_empty();
        let mut runtime_index: Vec<u32> = Vec::new();
        let mut runtime: Vec<GraphNode> = Vec::new();
        if graph.nodes.iter().any(tracked) {
            runtime_index = graph
                .nodes
                .iter()
                .scan(0u32, |next, node| {
                    Some(if tracked(node) {
                        *next += 1;
                        *next - 1
                    } else {
                        UNTRACKED
                    })
                })
                .collect();
            runtime = graph
                .nodes
                .iter()
                .filter(|node| tracked(node))
                .map(|node| GraphNode {
                    spec: Mutex::new(None),
                    // Waiting nodes start one above their dependency count: the submitter holds that one until
                    // the node's task is stored, so a dependency finishing early cannot release an empty node.
                    remaining: AtomicUsize::new(if node.dependencies > 0 { node.dependencies + 1 } else { 0 }),
                    dependents: node.dependents.iter().map(|&d| runtime_index[d] as usize).collect(),
                })
                .collect();
        }
        let state = Arc::new(QueryState::new(id, shared, runtime, total));
        let submitter = worker::WORKER_DOMAIN.with(|d| d.get());
        let mut queued_per_domain = vec![0usize; shared.domains.len()];
        for (index, node) in graph.nodes.into_iter().enumerate() {
            let runtime_node = runtime_index.get(index).copied().filter(|&r| r != UNTRACKED).map(|r| r as usize);
            let ready_spec = match runtime_node {
                Some(r) if node.dependencies > 0 => {
                    let graph_node = &state.graph[r];
                    *graph_node.spec.lock().unwrap_or_else(|p| p.into_inner()) = Some(node.spec);
                    if graph_node.remaining.fetch_sub(1, Ordering::AcqRel) != 1 {
                        continue;
                    }
                    // Every dependency finished while we were submitting: queue it ourselves.
                    graph_node.spec.lock().unwrap_or_else(|p| p.into_inner()).take()
                }
                _ => Some(node.spec),
            };
            if let Some(spec) = ready_spec {
                let domain = shared.enqueue(&state, spec, runtime_node, None, submitter);
                queued_per_domain[domain as usize] += 1;
            }
        }
        for (domain, &count) in queued_per_domain.iter().enumerate() {
            if count > 0 {
                shared.wake(domain as u32, count);
            }
        }
        Query { state }
    }

    /// Submits a graph and waits for it.
    pub fn run(&self, graph: TaskGraph) -> Result<QueryReport, QueryError> {
        self.submit(graph).wait()
    }

    /// The domains the scheduler works with.
    pub fn domains(&self) -> &Domains {
        &self.shared.domains
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &SchedulerConfig {
        &self.shared.config
    }

    /// Number of worker threads.
    pub fn worker_count(&self) -> usize {
        self.workers.len()
    }

    /// Each worker's domain and planned CPU.
    pub fn workers(&self) -> &[policy::WorkerPlan] {
        &self.workers
    }

    /// Whether a domain has workers.
    pub fn has_workers(&self, domain: u32) -> bool {
        self.shared.has_workers.get(domain as usize).copied().unwrap_or(false)
    }

    /// A snapshot of every domain's counters.
    pub fn counters(&self) -> SchedulerCounters {
        let shared = &self.shared;
        let flat: Vec<u64> = shared.traffic.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let bytes_read = ByteMatrix {
            worker_domains: shared.domains.domains.iter().map(|d| d.name.clone()).collect(),
            memory_nodes: shared.node_ids.clone(),
            bytes: flat.chunks(shared.node_ids.len().max(1)).map(<[u64]>::to_vec).collect(),
        };
        let flat: Vec<u64> = shared.node_traffic.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        let bytes_read_by_cpu_node = ByteMatrix {
            worker_domains: shared.cpu_nodes.iter().map(|n| format!("node{n}")).collect(),
            memory_nodes: shared.node_ids.clone(),
            bytes: flat.chunks(shared.node_ids.len().max(1)).map(<[u64]>::to_vec).collect(),
        };
        SchedulerCounters {
            bytes_read,
            bytes_read_by_cpu_node,
            domains: self
                .shared
                .counters
                .iter()
                .enumerate()
                .map(|(domain, counters)| {
                    let tasks_run = self
                        .shared
                        .worker_domains
                        .iter()
                        .zip(&self.shared.worker_tasks_run)
                        .filter(|&(&d, _)| d == domain as u32)
                        .map(|(_, counter)| counter.load(Ordering::Relaxed))
                        .sum();
                    counters.snapshot(domain as u32, &self.shared.domains, tasks_run)
                })
                .collect(),
        }
    }

    /// Sets every counter back to zero (between the runs of a benchmark).
    pub fn reset_counters(&self) {
        self.shared.counters.iter().for_each(|c| c.reset());
        self.shared.worker_tasks_run.iter().for_each(|c| c.store(0, Ordering::Relaxed));
        self.shared.traffic.iter().for_each(|c| c.store(0, Ordering::Relaxed));
        self.shared.node_traffic.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    }

    /// Stops the workers (each finishes the task it is running), skips the tasks still queued (their queries end
    /// with `QueryError::Shutdown`) and joins every worker thread.
    pub fn shutdown(mut self) -> ShutdownReport {
        self.stop()
    }

    fn stop(&mut self) -> ShutdownReport {
        let shared = &self.shared;
        shared.shutdown.store(true, Ordering::Release);
        for queue in &shared.queues {
            let _guard = queue.lock.lock().unwrap_or_else(|p| p.into_inner());
            queue.wake.notify_all();
        }
        let mut joined = 0;
        for handle in self.threads.drain(..) {
            if handle.join().is_ok() {
                joined += 1;
            }
        }
        shared.drain();
        ShutdownReport { workers_joined: joined, workers_alive: shared.alive_workers.load(Ordering::Acquire) }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if !self.threads.is_empty() {
            self.stop();
        }
    }
}
