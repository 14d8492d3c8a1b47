//! The worker loop: take a task from the own domain's queue, else steal by the policy, else sleep; run the task
//! under the binding policy; account for it; release what depended on it.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::Instant;

use crossbeam_deque::{Injector, Steal};
use numadb_topology::CpuSet;

use crate::config::{Binding, Pinning};
use crate::policy::batch_size;
use crate::query::QueryError;
use crate::task::{Priority, Task, TaskContext};
use crate::{IDLE_WAIT_MAX, Shared};

thread_local! {
    /// The domain of the worker running on this thread, if it is one: tasks submitted from inside a task without
    /// a preference go to the submitting worker's domain.
    pub(crate) static WORKER_DOMAIN: Cell<Option<u32>> = const { Cell::new(None) };
}

/// What a worker knows about itself; lives on the worker's own thread.
pub(crate) struct WorkerView {
    pub(crate) shared: Arc<Shared>,
    pub(crate) domain: u32,
    pub(crate) index: usize,
    /// The CPUs the worker is pinned to (`None`: its whole allowed set).
    pub(crate) pinned: RefCell<Option<CpuSet>>,
    /// The domain the worker is currently pinned to by `Preferred`/`Opportunistic` binding.
    bound_to: Cell<Option<u32>>,
    /// Tasks taken from the own queue, for sampling its length now and then.
    pops: Cell<u64>,
    /// Finished tasks not yet reported to their query (see [`Pending`]).
    pending: RefCell<Option<Pending>>,
}

/// A worker reports finished tasks to their query in batches: every report touches cache lines all workers share
/// (the query's outstanding count and per-domain counters), and for short tasks that traffic costs more than the
/// task. The batch is flushed when the worker turns to another query or domain, before it sleeps, and every
/// [`PENDING_FLUSH_EVERY`] tasks, so a query never waits on a worker that has moved on.
struct Pending {
    query: Arc<crate::query::QueryState>,
    running_domain: u32,
    finished: usize,
    runs: u64,
    stolen: u64,
    /// Earliest start and latest end of the batch's tasks, nanoseconds after the query's submission.
    first_start_ns: u64,
    last_end_ns: u64,
    /// Time in the batch's task bodies.
    busy_ns: u64,
}

/// Most finished tasks a worker holds back from their query.
const PENDING_FLUSH_EVERY: usize = 64;

/// The queue length is sampled once per this many tasks a worker takes from its own queue: sampling reads two
/// shared indices and updates three shared counters, too much to do for every task.
const QUEUE_SAMPLE_EVERY: u64 = 64;

/// Takes one task from an injector, retrying while another thread is mid-operation.
fn pop(injector: &Injector<Task>) -> Option<Task> {
    loop {
        match injector.steal() {
            Steal::Success(task) => return Some(task),
            Steal::Empty => return None,
            Steal::Retry => std::hint::spin_loop(),
        }
    }
}

pub(crate) fn run_worker(shared: Arc<Shared>, domain: u32, index: usize) {
    WORKER_DOMAIN.with(|cell| cell.set(Some(domain)));
    let view = WorkerView {
        shared,
        domain,
        index,
        pinned: RefCell::new(None),
        bound_to: Cell::new(None),
        pops: Cell::new(0),
        pending: RefCell::new(None),
    };
    if view.shared.config.binding == Binding::Always {
        let cpus = view.shared.worker_cpus[domain as usize].clone();
        view.pin(&cpus);
    }
    while !view.shared.shutdown.load(Ordering::Acquire) {
        match view.find_task() {
            Some(task) => view.run(task),
            None => {
                view.flush();
                view.idle();
            }
        }
    }
    view.flush();
    view.shared.alive_workers.fetch_sub(1, Ordering::AcqRel);
}

impl WorkerView {
    /// Reports the held-back finished tasks to their query.
    fn flush(&self) {
        if let Some(pending) = self.pending.borrow_mut().take() {
            pending.query.record_runs(pending.running_domain, pending.runs, pending.stolen);
            pending.query.record_task_times(pending.first_start_ns, pending.last_end_ns, pending.busy_ns);
            pending.query.finish_many(pending.finished);
        }
    }

    /// Counts a finished (`ran`, between `times`) or skipped task of `query` towards the batch.
    fn account(
        &self,
        query: &Arc<crate::query::QueryState>,
        running_domain: u32,
        times: Option<(Instant, Instant)>,
        stolen: bool,
    ) {
        let ran = times.is_some();
        let same = self
            .pending
            .borrow()
            .as_ref()
            .is_some_and(|p| Arc::ptr_eq(&p.query, query) && p.running_domain == running_domain);
        if !same {
            self.flush();
            *self.pending.borrow_mut() = Some(Pending {
                query: Arc::clone(query),
                running_domain,
                finished: 0,
                runs: 0,
                stolen: 0,
                first_start_ns: u64::MAX,
                last_end_ns: 0,
                busy_ns: 0,
            });
        }
        let full = {
            let mut pending = self.pending.borrow_mut();
            let pending = pending.as_mut().expect("just set");
            pending.finished += 1;
            pending.runs += u64::from(ran);
            pending.stolen += u64::from(ran && stolen);
            if let Some((start, end)) = times {
                let after_submission = |at: Instant| at.saturating_duration_since(query.started).as_nanos() as u64;
                pending.first_start_ns = pending.first_start_ns.min(after_submission(start));
                pending.last_end_ns = pending.last_end_ns.max(after_submission(end));
                pending.busy_ns += end.saturating_duration_since(start).as_nanos() as u64;
            }
            pending.finished >= PENDING_FLUSH_EVERY
        };
        if full {
            self.flush();
        }
    }

    fn counters(&self) -> &crate::counters::DomainCounters {
        &self.shared.counters[self.domain as usize]
    }

    fn find_task(&self) -> Option<Task> {
        let shared = &self.shared;
        let queue = &shared.queues[self.domain as usize];
        if self.pops.get().is_multiple_of(QUEUE_SAMPLE_EVERY) {
            self.counters().sample_queue_length(queue.high.len() + queue.normal.len());
        }
        if let Some(task) = pop(&queue.high).or_else(|| pop(&queue.normal)) {
            self.pops.set(self.pops.get() + 1);
            return Some(task);
        }
        let batch = shared.config.stealing.batch;
        for tier in &shared.tiers[self.domain as usize] {
            // Start at a different victim per worker so thieves of one domain spread over a tier.
            for offset in 0..tier.len() {
                let victim = tier[(self.index + offset) % tier.len()];
                let victim_queue = &shared.queues[victim as usize];
                let available = victim_queue.high.len() + victim_queue.normal.len();
                if available == 0 {
                    continue;
                }
                let Some(mut first) = pop(&victim_queue.high).or_else(|| pop(&victim_queue.normal)) else {
                    continue;
                };
                first.stolen = true;
                let mut moved = 1;
                for _ in 1..batch_size(available, batch) {
                    let Some(mut task) = pop(&victim_queue.high).or_else(|| pop(&victim_queue.normal)) else { break };
                    task.stolen = true;
                    shared.push(self.domain, task);
                    moved += 1;
                }
                self.counters().record_steal(victim, moved);
                shared.counters[victim as usize].tasks_stolen_out.fetch_add(moved as u64, Ordering::Relaxed);
                if moved > 1 {
                    shared.wake(self.domain, moved - 1);
                }
                return Some(first);
            }
        }
        None
    }

    fn idle(&self) {
        let shared = &self.shared;
        let queue = &shared.queues[self.domain as usize];
        let started = Instant::now();
        let guard = queue.lock.lock().unwrap_or_else(|p| p.into_inner());
        queue.sleepers.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if !shared.shutdown.load(Ordering::Acquire) && !shared.has_work_for(self.domain) {
            let _ = queue.wake.wait_timeout(guard, IDLE_WAIT_MAX);
        } else {
            drop(guard);
        }
        queue.sleepers.fetch_sub(1, Ordering::SeqCst);
        self.counters().idle_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    fn pin(&self, cpus: &CpuSet) {
        if self.shared.config.pinning == Pinning::Os && numadb_placement::pin_current_thread(cpus).is_err() {
            self.counters().pin_failures.fetch_add(1, Ordering::Relaxed);
            return;
        }
        *self.pinned.borrow_mut() = Some(cpus.clone());
    }

    fn unpin(&self) {
        if self.shared.config.pinning == Pinning::Os
            && numadb_placement::pin_current_thread(&self.shared.allowed_cpus).is_err()
        {
            self.counters().pin_failures.fetch_add(1, Ordering::Relaxed);
        }
        *self.pinned.borrow_mut() = None;
    }

    /// Pins to `target`'s CPUs, or unpins for `None`, unless already there.
    fn bind(&self, target: Option<u32>) {
        if self.bound_to.get() == target {
            return;
        }
        match target.and_then(|d| self.shared.domains.get(d)) {
            Some(domain) => self.pin(&domain.allowed_cpus),
            None => self.unpin(),
        }
        self.bound_to.set(target);
    }

    fn run(&self, task: Task) {
        let shared = &self.shared;
        let Task { body, query, node, preferred, inherited_binding, priority: _, stolen } = task;
        if query.is_cancelled() {
            query.record_skipped();
            self.counters().tasks_skipped.fetch_add(1, Ordering::Relaxed);
            if let Some(node) = node {
                shared.release_dependents(&query, node, self.domain);
            }
            self.account(&query, self.domain, None, false);
            return;
        }
        let binding = shared.config.binding;
        let bound_domain = match binding {
            Binding::None => None,
            Binding::Always => Some(self.domain),
            Binding::Preferred => {
                self.bind(preferred);
                preferred
            }
            Binding::Opportunistic => {
                let target = preferred.or(inherited_binding);
                self.bind(target);
                target
            }
        };
        let running_domain = bound_domain.unwrap_or_else(|| match shared.config.pinning {
            Pinning::Os => numadb_placement::current_cpu()
                .ok()
                .and_then(|location| shared.cpu_domain.get(location.cpu as usize).copied().flatten())
                .unwrap_or(self.domain),
            Pinning::Logical => self.domain,
        });
        let child_binding = if binding == Binding::Opportunistic && preferred.is_some() { bound_domain } else { None };
        let context = TaskContext {
            worker: self,
            query: &query,
            preferred,
            bound_domain,
            running_domain,
            running_node: std::cell::OnceCell::new(),
            stolen,
            child_binding,
        };
        let start = Instant::now();
        match catch_unwind(AssertUnwindSafe(|| body(&context))) {
            Ok(Ok(())) => {}
            Ok(Err(error)) => query.fail(QueryError::Task(error.message)),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".to_string());
                query.fail(QueryError::Panic(message));
            }
        }
        let end = Instant::now();
        shared.worker_tasks_run[self.index].fetch_add(1, Ordering::Relaxed);
        if let Some(node) = node {
            shared.release_dependents(&query, node, self.domain);
        }
        self.account(&query, running_domain, Some((start, end)), stolen);
    }
}

impl Priority {
    pub(crate) fn is_high(self) -> bool {
        self == Priority::High
    }
}
