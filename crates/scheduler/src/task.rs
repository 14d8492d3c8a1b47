//! Tasks as the submitter describes them, and the context a running task sees.

use std::sync::Arc;

use numadb_topology::CpuSet;

use crate::query::QueryState;
use crate::worker::WorkerView;

/// What a task body returns: nothing, or why it failed.
pub type TaskResult = Result<(), TaskError>;

/// A task's failure, which fails its query. Any error type converts into it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct TaskError {
    /// What went wrong.
    pub message: String,
}

impl TaskError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }
}

impl From<String> for TaskError {
    fn from(message: String) -> Self {
        Self { message }
    }
}

impl From<&str> for TaskError {
    fn from(message: &str) -> Self {
        Self { message: message.to_string() }
    }
}

/// Which queue of a domain a task goes to: high-priority tasks are taken first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Priority {
    /// Ordinary work.
    #[default]
    Normal,
    /// Taken before any normal task of the same domain (and stolen first).
    High,
}

pub(crate) type TaskBody = Box<dyn FnOnce(&TaskContext<'_>) -> TaskResult + Send + 'static>;

/// A task before it is submitted: a body plus where it would like to run.
pub struct TaskSpec {
    pub(crate) body: TaskBody,
    pub(crate) preferred: Option<u32>,
    pub(crate) priority: Priority,
}

impl TaskSpec {
    /// A task running `body`, with no preferred domain and normal priority.
    pub fn new(body: impl FnOnce(&TaskContext<'_>) -> TaskResult + Send + 'static) -> Self {
        Self { body: Box::new(body), preferred: None, priority: Priority::Normal }
    }

    /// Prefer a domain: the task is queued there (column scans prefer the domain holding their partition).
    pub fn prefer(mut self, domain: u32) -> Self {
        self.preferred = Some(domain);
        self
    }

    /// Prefer a domain or not.
    pub fn prefer_maybe(mut self, domain: Option<u32>) -> Self {
        self.preferred = domain;
        self
    }

    /// Set the priority.
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
}

impl std::fmt::Debug for TaskSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskSpec").field("preferred", &self.preferred).field("priority", &self.priority).finish()
    }
}

/// A task in a queue.
pub(crate) struct Task {
    pub(crate) body: TaskBody,
    pub(crate) query: Arc<QueryState>,
    /// The graph node the task stands for, whose dependents it releases when done; `None` for a dynamic child.
    pub(crate) node: Option<usize>,
    pub(crate) preferred: Option<u32>,
    /// Under opportunistic binding: the domain the task's parent was bound to.
    pub(crate) inherited_binding: Option<u32>,
    pub(crate) priority: Priority,
    /// Whether the task was taken from another domain's queue.
    pub(crate) stolen: bool,
}

/// What a running task can see and do.
pub struct TaskContext<'a> {
    pub(crate) worker: &'a WorkerView,
    pub(crate) query: &'a Arc<QueryState>,
    pub(crate) preferred: Option<u32>,
    pub(crate) bound_domain: Option<u32>,
    pub(crate) running_domain: u32,
    /// The node of the CPU the task runs on (or of its domain, under logical pinning), looked up at the first
    /// [`TaskContext::account_read`], so that tasks that read nothing pay no system call.
    pub(crate) running_node: std::cell::OnceCell<Option<u32>>,
    pub(crate) stolen: bool,
    /// The binding a child spawned by this task inherits (opportunistic binding, direct children only).
    pub(crate) child_binding: Option<u32>,
}

impl TaskContext<'_> {
    /// The domain whose queue the worker serves.
    pub fn worker_domain(&self) -> u32 {
        self.worker.domain
    }

    /// The worker's index (0-based, in domain order).
    pub fn worker_index(&self) -> usize {
        self.worker.index
    }

    /// The domain the task prefers.
    pub fn preferred_domain(&self) -> Option<u32> {
        self.preferred
    }

    /// The domain the worker is pinned to while running this task (by the binding policy), if any.
    pub fn bound_domain(&self) -> Option<u32> {
        self.bound_domain
    }

    /// The CPUs the worker is pinned to right now (`None`: not pinned).
    pub fn pinned_cpus(&self) -> Option<CpuSet> {
        self.worker.pinned.borrow().clone()
    }

    /// The domain the task is accounted to: where the worker is pinned, or otherwise the domain of the CPU it
    /// was on when the task started (its own domain under logical pinning).
    pub fn running_domain(&self) -> u32 {
        self.running_domain
    }

    /// Whether the task was taken from another domain's queue.
    pub fn was_stolen(&self) -> bool {
        self.stolen
    }

    /// The query's id.
    pub fn query_id(&self) -> u64 {
        self.query.id
    }

    /// Whether the query was cancelled (long tasks should check and return early).
    pub fn is_cancelled(&self) -> bool {
        self.query.is_cancelled()
    }

    /// Records that the task read `bytes` from memory on `node`; the query's byte matrix adds them to the row of
    /// [`TaskContext::running_domain`].
    pub fn account_read(&self, node: u32, bytes: u64) {
        self.query.account_read(self.running_domain, node, bytes);
        self.worker.shared.account_traffic(self.running_domain, node, bytes);
        let shared = &self.worker.shared;
        let cpu_node = *self.running_node.get_or_init(|| match shared.config.pinning {
            crate::Pinning::Os => numadb_placement::current_cpu().ok().map(|l| l.node),
            crate::Pinning::Logical => shared.domain_home_node(self.running_domain),
        });
        if let Some(cpu_node) = cpu_node {
            shared.account_node_traffic(cpu_node, node, bytes);
        }
    }

    /// Submits a child task to the same query. Under opportunistic binding, a child of a task that was bound to a
    /// domain is bound there too.
    pub fn spawn(&self, spec: TaskSpec) {
        self.worker.shared.submit_dynamic(self.query, spec, self.child_binding, Some(self.worker.domain));
    }
}
