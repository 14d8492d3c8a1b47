//! Per-domain counters: what the scheduler did, for reports and for the byte-matrix-style "where did the work go"
//! questions (how many tasks were stolen, from how far, how long workers sat idle, how long the queues were).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use numadb_topology::Domains;
use serde::Serialize;

/// Live counters of one domain (all relaxed atomics: they are statistics, not synchronisation).
pub(crate) struct DomainCounters {
    pub(crate) workers: usize,
    /// Tasks this domain's workers took from each other domain's queue (index = victim domain).
    pub(crate) stolen_in_from: Vec<AtomicU64>,
    pub(crate) tasks_stolen_out: AtomicU64,
    pub(crate) steal_operations: AtomicU64,
    pub(crate) steal_batch_sizes: Mutex<BTreeMap<usize, u64>>,
    pub(crate) idle_ns: AtomicU64,
    pub(crate) queue_length_sum: AtomicU64,
    pub(crate) queue_length_samples: AtomicU64,
    pub(crate) queue_length_max: AtomicU64,
    pub(crate) tasks_rerouted_in: AtomicU64,
    pub(crate) tasks_skipped: AtomicU64,
    pub(crate) pin_failures: AtomicU64,
}

impl DomainCounters {
    pub(crate) fn new(domains: usize, workers: usize) -> Self {
        DomainCounters {
            workers,
            stolen_in_from: (0..domains).map(|_| AtomicU64::new(0)).collect(),
            tasks_stolen_out: AtomicU64::new(0),
            steal_operations: AtomicU64::new(0),
            steal_batch_sizes: Mutex::new(BTreeMap::new()),
            idle_ns: AtomicU64::new(0),
            queue_length_sum: AtomicU64::new(0),
            queue_length_samples: AtomicU64::new(0),
            queue_length_max: AtomicU64::new(0),
            tasks_rerouted_in: AtomicU64::new(0),
            tasks_skipped: AtomicU64::new(0),
            pin_failures: AtomicU64::new(0),
        }
    }

    pub(crate) fn sample_queue_length(&self, length: usize) {
        self.queue_length_sum.fetch_add(length as u64, Ordering::Relaxed);
        self.queue_length_samples.fetch_add(1, Ordering::Relaxed);
        self.queue_length_max.fetch_max(length as u64, Ordering::Relaxed);
    }

    pub(crate) fn record_steal(&self, victim: u32, moved: usize) {
        if let Some(counter) = self.stolen_in_from.get(victim as usize) {
            counter.fetch_add(moved as u64, Ordering::Relaxed);
        }
        self.steal_operations.fetch_add(1, Ordering::Relaxed);
        *self.steal_batch_sizes.lock().unwrap_or_else(|p| p.into_inner()).entry(moved).or_default() += 1;
    }

    pub(crate) fn reset(&self) {
        let zero = |c: &AtomicU64| c.store(0, Ordering::Relaxed);
        self.stolen_in_from.iter().for_each(zero);
        zero(&self.tasks_stolen_out);
        zero(&self.steal_operations);
        self.steal_batch_sizes.lock().unwrap_or_else(|p| p.into_inner()).clear();
        zero(&self.idle_ns);
        zero(&self.queue_length_sum);
        zero(&self.queue_length_samples);
        zero(&self.queue_length_max);
        zero(&self.tasks_rerouted_in);
        zero(&self.tasks_skipped);
        zero(&self.pin_failures);
    }

    pub(crate) fn snapshot(&self, domain: u32, domains: &Domains, tasks_run: u64) -> DomainCountersSnapshot {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let mut stolen_in_by_distance: BTreeMap<u32, u64> = BTreeMap::new();
        let mut stolen_in_from = BTreeMap::new();
        for (victim, counter) in self.stolen_in_from.iter().enumerate() {
            let count = load(counter);
            if count == 0 {
                continue;
            }
            stolen_in_from.insert(victim as u32, count);
            let distance = domains.distance(domain, victim as u32).unwrap_or(0);
            *stolen_in_by_distance.entry(distance).or_default() += count;
        }
        let samples = load(&self.queue_length_samples);
        DomainCountersSnapshot {
            domain,
            name: domains.get(domain).map(|d| d.name.clone()).unwrap_or_default(),
            workers: self.workers,
            tasks_run,
            tasks_stolen_in: stolen_in_from.values().sum(),
            tasks_stolen_in_from: stolen_in_from,
            tasks_stolen_in_by_distance: stolen_in_by_distance,
            tasks_stolen_out: load(&self.tasks_stolen_out),
            steal_operations: load(&self.steal_operations),
            steal_batch_sizes: self.steal_batch_sizes.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            idle_ns: load(&self.idle_ns),
            queue_length_mean: if samples == 0 { 0.0 } else { load(&self.queue_length_sum) as f64 / samples as f64 },
            queue_length_max: load(&self.queue_length_max),
            queue_length_samples: samples,
            tasks_rerouted_in: load(&self.tasks_rerouted_in),
            tasks_skipped: load(&self.tasks_skipped),
            pin_failures: load(&self.pin_failures),
        }
    }
}

/// One domain's counters at a moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainCountersSnapshot {
    /// Domain id.
    pub domain: u32,
    /// Domain name.
    pub name: String,
    /// Workers serving the domain's queue.
    pub workers: usize,
    /// Tasks run by the domain's workers.
    pub tasks_run: u64,
    /// Tasks the domain's workers took from other domains' queues.
    pub tasks_stolen_in: u64,
    /// The same, by victim domain.
    pub tasks_stolen_in_from: BTreeMap<u32, u64>,
    /// The same, by distance to the victim.
    pub tasks_stolen_in_by_distance: BTreeMap<u32, u64>,
    /// Tasks other domains' workers took from this domain's queue.
    pub tasks_stolen_out: u64,
    /// Steals made (a batch steal counts once).
    pub steal_operations: u64,
    /// How many steals moved how many tasks.
    pub steal_batch_sizes: BTreeMap<usize, u64>,
    /// Time the domain's workers spent waiting for work, summed over workers.
    pub idle_ns: u64,
    /// Mean length of the domain's queue, sampled every 64th time a worker took a task from it.
    pub queue_length_mean: f64,
    /// Longest queue seen.
    pub queue_length_max: u64,
    /// Samples behind the mean.
    pub queue_length_samples: u64,
    /// Tasks queued here because their preferred domain had no workers and none could steal from it.
    pub tasks_rerouted_in: u64,
    /// Tasks skipped because their query was cancelled, failed or the scheduler shut down.
    pub tasks_skipped: u64,
    /// Pinning calls the operating system refused.
    pub pin_failures: u64,
}

/// All domains' counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SchedulerCounters {
    /// One entry per domain.
    pub domains: Vec<DomainCountersSnapshot>,
    /// Bytes read by every query since the last reset, by (running domain, memory node).
    pub bytes_read: crate::ByteMatrix,
    /// The same bytes by (node of the CPU that read them, memory node): rows are the nodes with CPUs, named
    /// `node<id>`. Unlike `bytes_read`, this does not depend on how the machine was cut into domains.
    pub bytes_read_by_cpu_node: crate::ByteMatrix,
}

impl SchedulerCounters {
    /// Tasks run in all domains.
    pub fn tasks_run(&self) -> u64 {
        self.domains.iter().map(|d| d.tasks_run).sum()
    }

    /// Tasks stolen in all domains.
    pub fn tasks_stolen(&self) -> u64 {
        self.domains.iter().map(|d| d.tasks_stolen_in).sum()
    }
}
