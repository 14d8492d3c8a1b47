//! Every stealing and binding policy, on fixture topologies.
//!
//! Logical topologies (four domains on a two-CPU machine) use `Pinning::Logical`: pinning is recorded, not applied,
//! and the tests check what the scheduler decided. A two-domain topology over this machine's CPUs 0 and 1 uses
//! real pinning and checks with `getcpu`. The emulated multi-node guests run the real-pinning tests on real
//! multi-node kernels (`crates/guest-tests/tests/scheduler.rs`).
//!
//! Tests that must observe an ordering make it deterministic instead of hoping for it: a "gate" task holds the
//! only worker of a domain until the scenario is set up, so what runs next is decided by policy, not timing.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use numadb_scheduler::{
    Binding, Pinning, Priority, QueryError, Scheduler, SchedulerConfig, Stealing, TaskContext, TaskGraph, TaskSpec,
    WorkerLayout,
};
use numadb_topology::{CpuSet, DomainGranularity, MachineSpec, Topology};

/// 2 sockets × 2 SNC nodes, `cores` cores each, SLIT 10/11/21.
fn snc(cores: u32) -> Topology {
    MachineSpec::from_json(&format!(
        r#"{{"name":"snc","nodes":[{{"package":0,"cores":{cores},"memory_mib":64}},{{"package":0,"cores":{cores},"memory_mib":64}},
              {{"package":1,"cores":{cores},"memory_mib":64}},{{"package":1,"cores":{cores},"memory_mib":64}}],
            "distances":[[10,11,21,21],[11,10,21,21],[21,21,10,11],[21,21,11,10]]}}"#
    ))
    .unwrap()
    .to_topology()
    .unwrap()
}

/// Two domains over this machine's first two allowed CPUs (CPU ids 0 and 1 must exist: the development VM and CI).
fn host_two_domains() -> Topology {
    MachineSpec::from_json(
        r#"{"name":"host2","nodes":[{"package":0,"cores":1,"memory_mib":64},{"package":0,"cores":1,"memory_mib":64}],
            "distances":[[10,20],[20,10]]}"#,
    )
    .unwrap()
    .to_topology()
    .unwrap()
}

fn logical(stealing: Stealing, binding: Binding, layout: WorkerLayout) -> SchedulerConfig {
    SchedulerConfig { granularity: DomainGranularity::Node, layout, stealing, binding, pinning: Pinning::Logical }
}

/// Where each task ran: (preferred domain, worker domain, running domain, stolen).
type Log = Arc<Mutex<Vec<(Option<u32>, u32, u32, bool)>>>;

fn logging_task(log: &Log, preferred: Option<u32>, work: Duration) -> TaskSpec {
    let log = Arc::clone(log);
    TaskSpec::new(move |ctx: &TaskContext<'_>| {
        std::thread::sleep(work);
        log.lock().unwrap().push((ctx.preferred_domain(), ctx.worker_domain(), ctx.running_domain(), ctx.was_stolen()));
        Ok(())
    })
    .prefer_maybe(preferred)
}

#[test]
fn with_stealing_off_no_task_runs_outside_its_preferred_domain() {
    let scheduler = Scheduler::new(&snc(2), logical(Stealing::OFF, Binding::None, WorkerLayout::All)).unwrap();
    assert_eq!(scheduler.worker_count(), 8);
    let log: Log = Arc::default();
    let mut graph = TaskGraph::new();
    // Heavily skewed: most tasks prefer domain 0, so other domains' workers are idle and would love to steal.
    for index in 0..400u32 {
        let preferred = if index % 10 == 0 { index / 10 % 4 } else { 0 };
        graph.add(logging_task(&log, Some(preferred), Duration::from_micros(50)));
    }
    let report = scheduler.run(graph).unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 400);
    assert!(log.iter().all(|&(preferred, worker, _, stolen)| preferred == Some(worker) && !stolen), "{log:?}");
    assert_eq!(report.tasks_stolen.iter().sum::<u64>(), 0);
    assert_eq!(report.tasks_run.iter().sum::<u64>(), 400);
    assert_eq!(scheduler.counters().tasks_stolen(), 0);
}

#[test]
fn neighbor_stealing_never_reaches_beyond_its_maximum_distance() {
    let scheduler = Scheduler::new(&snc(1), logical(Stealing::neighbor(11), Binding::None, WorkerLayout::All)).unwrap();
    let log: Log = Arc::default();
    let mut graph = TaskGraph::new();
    // 200 ms of work for domain 0's single worker: domain 1's worker (distance 11) is woken to steal, domains 2
    // and 3 (distance 21) are idle the whole time and must not touch it.
    for _ in 0..200 {
        graph.add(logging_task(&log, Some(0), Duration::from_millis(1)));
    }
    let report = scheduler.run(graph).unwrap();
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 200);
    assert!(log.iter().all(|&(_, worker, _, _)| worker == 0 || worker == 1), "a task ran beyond distance 11: {log:?}");
    assert!(log.iter().any(|&(_, worker, _, stolen)| worker == 1 && stolen), "domain 1 never stole");
    assert_eq!(report.tasks_run[2] + report.tasks_run[3], 0);
    let counters = scheduler.counters();
    assert_eq!(counters.domains[1].tasks_stolen_in_by_distance.keys().copied().collect::<Vec<_>>(), vec![11]);
    assert_eq!(counters.domains[2].tasks_stolen_in + counters.domains[3].tasks_stolen_in, 0);
    assert_eq!(counters.domains[0].tasks_stolen_out, counters.domains[1].tasks_stolen_in);
}

/// Sets up queues while the only worker (in domain 0) is held by a gate, then releases it and returns the order in
/// which it ran the other tasks (their preferred domains).
fn order_after_gate(stealing: Stealing, queued: &[(u32, usize)]) -> (Vec<u32>, Scheduler) {
    let topology = snc(1);
    let config = logical(stealing, Binding::None, WorkerLayout::OneDomain(0));
    let scheduler = Scheduler::new(&topology, config).unwrap();
    assert_eq!(scheduler.worker_count(), 1);
    let gate = Arc::new(Barrier::new(2));
    let worker_gate = Arc::clone(&gate);
    let mut gate_graph = TaskGraph::new();
    gate_graph.add(TaskSpec::new(move |_| {
        worker_gate.wait(); // the worker has started the gate
        worker_gate.wait(); // the scenario is queued
        Ok(())
    }));
    let gate_query = scheduler.submit(gate_graph);
    gate.wait();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut graph = TaskGraph::new();
    for &(domain, count) in queued {
        for _ in 0..count {
            let order = Arc::clone(&order);
            graph.add(
                TaskSpec::new(move |ctx| {
                    order.lock().unwrap().push(ctx.preferred_domain().unwrap());
                    Ok(())
                })
                .prefer(domain),
            );
        }
    }
    let query = scheduler.submit(graph);
    gate.wait();
    gate_query.wait().unwrap();
    query.wait().unwrap();
    let order = order.lock().unwrap().clone();
    (order, scheduler)
}

#[test]
fn victims_are_visited_nearest_first_and_a_tier_is_exhausted_before_the_next() {
    let (order, scheduler) = order_after_gate(Stealing::ANY, &[(3, 5), (2, 5), (1, 5)]);
    assert_eq!(order.len(), 15);
    // Domain 1 is at distance 11, domains 2 and 3 at 21: all of 1 before any of 2 or 3.
    assert!(order[..5].iter().all(|&d| d == 1), "{order:?}");
    assert!(order[5..].iter().all(|&d| d == 2 || d == 3), "{order:?}");
    let counters = scheduler.counters();
    assert_eq!(counters.domains[0].tasks_stolen_in_by_distance.get(&11), Some(&5));
    assert_eq!(counters.domains[0].tasks_stolen_in_by_distance.get(&21), Some(&10));
}

#[test]
fn batch_stealing_takes_half_the_victim_queue_up_to_the_cap() {
    let (order, scheduler) = order_after_gate(Stealing::ANY.batched(4), &[(1, 10)]);
    assert_eq!(order.len(), 10);
    let counters = scheduler.counters();
    // 10 queued: steal min(4, 5) = 4, then 3 of 6, then 2 of 3, then the last one.
    let sizes: Vec<(usize, u64)> = counters.domains[0].steal_batch_sizes.iter().map(|(&s, &n)| (s, n)).collect();
    assert_eq!(sizes, vec![(1, 1), (2, 1), (3, 1), (4, 1)]);
    assert_eq!(counters.domains[0].steal_operations, 4);
    assert_eq!(counters.domains[0].tasks_stolen_in, 10);
    assert_eq!(counters.domains[1].tasks_stolen_out, 10);

    let (_, single) = order_after_gate(Stealing::ANY, &[(1, 10)]);
    let counters = single.counters();
    assert_eq!(counters.domains[0].steal_operations, 10);
    assert_eq!(counters.domains[0].steal_batch_sizes.get(&1), Some(&10));
}

#[test]
fn tasks_for_a_domain_nobody_may_steal_from_are_rerouted_not_lost() {
    let (order, scheduler) = order_after_gate(Stealing::OFF, &[(2, 3), (0, 2)]);
    assert_eq!(order.len(), 5);
    let counters = scheduler.counters();
    assert_eq!(counters.domains[0].tasks_rerouted_in, 3);
    assert_eq!(counters.tasks_stolen(), 0);
}

#[test]
fn high_priority_tasks_run_first() {
    let topology = snc(1);
    let scheduler =
        Scheduler::new(&topology, logical(Stealing::OFF, Binding::None, WorkerLayout::OneDomain(0))).unwrap();
    let gate = Arc::new(Barrier::new(2));
    let worker_gate = Arc::clone(&gate);
    let mut gate_graph = TaskGraph::new();
    gate_graph.add(TaskSpec::new(move |_| {
        worker_gate.wait();
        worker_gate.wait();
        Ok(())
    }));
    let gate_query = scheduler.submit(gate_graph);
    gate.wait();
    let order = Arc::new(Mutex::new(Vec::new()));
    let mut graph = TaskGraph::new();
    for (index, priority) in
        [Priority::Normal, Priority::High, Priority::Normal, Priority::High].into_iter().enumerate()
    {
        let order = Arc::clone(&order);
        graph.add(
            TaskSpec::new(move |_| {
                order.lock().unwrap().push(index);
                Ok(())
            })
            .prefer(0)
            .priority(priority),
        );
    }
    let query = scheduler.submit(graph);
    gate.wait();
    gate_query.wait().unwrap();
    query.wait().unwrap();
    assert_eq!(*order.lock().unwrap(), vec![1, 3, 0, 2]);
}

#[test]
fn binding_always_keeps_every_worker_on_its_domains_cpus() {
    let topology = host_two_domains();
    let config = SchedulerConfig {
        granularity: DomainGranularity::Node,
        layout: WorkerLayout::All,
        stealing: Stealing::ANY,
        binding: Binding::Always,
        pinning: Pinning::Os,
    };
    let scheduler = Scheduler::new(&topology, config).unwrap();
    let observations = Arc::new(Mutex::new(Vec::new()));
    let mut graph = TaskGraph::new();
    for index in 0..200u32 {
        let observations = Arc::clone(&observations);
        graph.add(
            TaskSpec::new(move |ctx| {
                let cpu = numadb_placement::current_cpu().unwrap().cpu;
                observations.lock().unwrap().push((ctx.worker_domain(), cpu, ctx.pinned_cpus()));
                std::thread::sleep(Duration::from_micros(100));
                Ok(())
            })
            .prefer(index % 2),
        );
    }
    scheduler.run(graph).unwrap();
    let observations = observations.lock().unwrap();
    assert_eq!(observations.len(), 200);
    for (domain, cpu, pinned) in observations.iter() {
        // Domain d of this topology is CPU d.
        assert_eq!(*cpu, *domain, "a worker of domain {domain} ran on CPU {cpu}");
        assert_eq!(pinned.as_ref(), Some(&CpuSet::from_ids([*domain])));
    }
}

#[test]
fn binding_preferred_pins_only_while_a_task_has_a_preference() {
    let topology = host_two_domains();
    let config = SchedulerConfig {
        granularity: DomainGranularity::Node,
        layout: WorkerLayout::OneDomain(0),
        stealing: Stealing::ANY,
        binding: Binding::Preferred,
        pinning: Pinning::Os,
    };
    let scheduler = Scheduler::new(&topology, config).unwrap();
    let observations = Arc::new(Mutex::new(Vec::new()));
    let mut graph = TaskGraph::new();
    for index in 0..60u32 {
        let observations = Arc::clone(&observations);
        let preferred = match index % 3 {
            0 => Some(0),
            1 => Some(1),
            _ => None,
        };
        graph.add(
            TaskSpec::new(move |ctx| {
                let cpu = numadb_placement::current_cpu().unwrap().cpu;
                let affinity = numadb_placement::thread_affinity().unwrap();
                observations.lock().unwrap().push((ctx.preferred_domain(), ctx.bound_domain(), cpu, affinity));
                Ok(())
            })
            .prefer_maybe(preferred),
        );
    }
    scheduler.run(graph).unwrap();
    let allowed = numadb_placement::system_topology().unwrap().allowed.cpus.clone();
    for (preferred, bound, cpu, affinity) in observations.lock().unwrap().iter() {
        assert_eq!(bound, preferred);
        match preferred {
            // The only worker serves domain 0, yet moves to CPU 1 for a task preferring domain 1.
            Some(domain) => {
                assert_eq!(cpu, domain);
                assert_eq!(affinity, &CpuSet::from_ids([*domain]));
            }
            None => assert_eq!(affinity, &allowed, "unpinned after a preferred task"),
        }
    }
}

#[test]
fn binding_opportunistic_also_binds_direct_children() {
    let topology = snc(1);
    let scheduler =
        Scheduler::new(&topology, logical(Stealing::ANY, Binding::Opportunistic, WorkerLayout::All)).unwrap();
    let observations = Arc::new(Mutex::new(Vec::new()));
    let parent_observations = Arc::clone(&observations);
    let mut graph = TaskGraph::new();
    graph.add(
        TaskSpec::new(move |ctx| {
            parent_observations.lock().unwrap().push(("parent", ctx.bound_domain()));
            let child_observations = Arc::clone(&parent_observations);
            ctx.spawn(TaskSpec::new(move |child| {
                child_observations.lock().unwrap().push(("child", child.bound_domain()));
                let grandchild_observations = Arc::clone(&child_observations);
                child.spawn(TaskSpec::new(move |grandchild| {
                    grandchild_observations.lock().unwrap().push(("grandchild", grandchild.bound_domain()));
                    Ok(())
                }));
                Ok(())
            }));
            Ok(())
        })
        .prefer(2),
    );
    scheduler.run(graph).unwrap();
    let mut observations = observations.lock().unwrap().clone();
    observations.sort();
    assert_eq!(observations, vec![("child", Some(2)), ("grandchild", None), ("parent", Some(2))]);

    // Under `preferred`, children are not bound.
    let scheduler = Scheduler::new(&topology, logical(Stealing::ANY, Binding::Preferred, WorkerLayout::All)).unwrap();
    let child_bound = Arc::new(Mutex::new(Some(99)));
    let slot = Arc::clone(&child_bound);
    let mut graph = TaskGraph::new();
    graph.add(
        TaskSpec::new(move |ctx| {
            let slot = Arc::clone(&slot);
            ctx.spawn(TaskSpec::new(move |child| {
                *slot.lock().unwrap() = child.bound_domain();
                Ok(())
            }));
            Ok(())
        })
        .prefer(2),
    );
    scheduler.run(graph).unwrap();
    assert_eq!(*child_bound.lock().unwrap(), None);
}

#[test]
fn graphs_run_dependents_after_their_dependencies() {
    let scheduler = Scheduler::new(&snc(2), logical(Stealing::ANY, Binding::None, WorkerLayout::All)).unwrap();
    let partials = Arc::new(Mutex::new(Vec::new()));
    let total = Arc::new(Mutex::new(None));
    let mut graph = TaskGraph::new();
    let scans: Vec<_> = (0..32u64)
        .map(|part| {
            let partials = Arc::clone(&partials);
            graph.add(
                TaskSpec::new(move |_| {
                    let sum: u64 = (part * 1000..(part + 1) * 1000).sum();
                    partials.lock().unwrap().push(sum);
                    Ok(())
                })
                .prefer((part % 4) as u32),
            )
        })
        .collect();
    let merge_partials = Arc::clone(&partials);
    let merge_total = Arc::clone(&total);
    let merge = graph.add_after(
        &scans,
        TaskSpec::new(move |_| {
            let partials = merge_partials.lock().unwrap();
            assert_eq!(partials.len(), 32, "the merge ran before every scan finished");
            *merge_total.lock().unwrap() = Some(partials.iter().sum::<u64>());
            Ok(())
        }),
    );
    let check_total = Arc::clone(&total);
    graph.add_after(
        &[merge],
        TaskSpec::new(move |_| {
            assert!(check_total.lock().unwrap().is_some());
            Ok(())
        }),
    );
    let report = scheduler.run(graph).unwrap();
    assert_eq!(*total.lock().unwrap(), Some((0..32_000u64).sum()));
    assert_eq!(report.tasks_run.iter().sum::<u64>(), 34);
}

#[test]
fn errors_and_panics_fail_the_query_but_not_the_workers() {
    let scheduler = Scheduler::new(&snc(1), logical(Stealing::ANY, Binding::None, WorkerLayout::All)).unwrap();
    let mut graph = TaskGraph::new();
    let failing = graph.add(TaskSpec::new(|_| Err("integer out of range".into())));
    let ran_after = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&ran_after);
    graph.add_after(
        &[failing],
        TaskSpec::new(move |_| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }),
    );
    assert_eq!(scheduler.run(graph).unwrap_err(), QueryError::Task("integer out of range".into()));
    assert_eq!(ran_after.load(Ordering::SeqCst), 0, "a dependent of a failed task ran");

    for _ in 0..8 {
        let mut graph = TaskGraph::new();
        graph.add(TaskSpec::new(|_| panic!("boom")));
        assert_eq!(scheduler.run(graph).unwrap_err(), QueryError::Panic("boom".into()));
    }
    // Every worker is still there.
    let mut graph = TaskGraph::new();
    let done = Arc::new(AtomicUsize::new(0));
    for domain in 0..4 {
        let done = Arc::clone(&done);
        graph.add(
            TaskSpec::new(move |_| {
                done.fetch_add(1, Ordering::SeqCst);
                Ok(())
            })
            .prefer(domain),
        );
    }
    scheduler.run(graph).unwrap();
    assert_eq!(done.load(Ordering::SeqCst), 4);
    assert_eq!(scheduler.shutdown().workers_alive, 0);
}

#[test]
fn cancellation_stops_the_remaining_tasks() {
    let scheduler = Scheduler::new(&snc(1), logical(Stealing::ANY, Binding::None, WorkerLayout::All)).unwrap();
    let ran = Arc::new(AtomicUsize::new(0));
    // Tasks the scheduler started but that found the query cancelled when they looked.
    let saw_cancel = Arc::new(AtomicUsize::new(0));
    let mut graph = TaskGraph::new();
    for _ in 0..2000 {
        let (ran, saw_cancel) = (Arc::clone(&ran), Arc::clone(&saw_cancel));
        graph.add(TaskSpec::new(move |ctx| {
            if ctx.is_cancelled() {
                saw_cancel.fetch_add(1, Ordering::SeqCst);
                return Ok(());
            }
            ran.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(1));
            Ok(())
        }));
    }
    let query = scheduler.submit(graph);
    while ran.load(Ordering::SeqCst) < 10 {
        std::thread::yield_now();
    }
    query.cancel();
    assert_eq!(query.wait().unwrap_err(), QueryError::Cancelled);
    let ran_before_cancel = ran.load(Ordering::SeqCst);
    assert!(ran_before_cancel < 2000, "all {ran_before_cancel} tasks ran");
    let skipped: u64 = scheduler.counters().domains.iter().map(|d| d.tasks_skipped).sum();
    assert_eq!(skipped as usize + ran_before_cancel + saw_cancel.load(Ordering::SeqCst), 2000);

    // A timeout cancels too.
    let mut graph = TaskGraph::new();
    for _ in 0..1000 {
        graph.add(TaskSpec::new(|_| {
            std::thread::sleep(Duration::from_millis(2));
            Ok(())
        }));
    }
    let error = scheduler.submit(graph).wait_timeout(Duration::from_millis(20)).unwrap_err();
    assert_eq!(error, QueryError::Cancelled);
}

#[test]
fn shutdown_joins_every_worker_and_ends_queued_queries() {
    let topology = snc(2);
    let scheduler = Scheduler::new(&topology, logical(Stealing::OFF, Binding::None, WorkerLayout::All)).unwrap();
    let workers = scheduler.worker_count();
    let mut graph = TaskGraph::new();
    for _ in 0..100 {
        graph.add(
            TaskSpec::new(|_| {
                std::thread::sleep(Duration::from_millis(5));
                Ok(())
            })
            .prefer(0),
        );
    }
    let query = scheduler.submit(graph);
    std::thread::sleep(Duration::from_millis(10));
    let report = scheduler.shutdown();
    assert_eq!(report.workers_joined, workers);
    assert_eq!(report.workers_alive, 0);
    assert_eq!(query.wait().unwrap_err(), QueryError::Shutdown);
}

#[test]
fn byte_accounting_fills_the_domain_by_node_matrix() {
    let topology = snc(1);
    let scheduler = Scheduler::new(&topology, logical(Stealing::OFF, Binding::Always, WorkerLayout::All)).unwrap();
    let mut graph = TaskGraph::new();
    for domain in 0..4u32 {
        graph.add(
            TaskSpec::new(move |ctx| {
                ctx.account_read(domain, 1000);
                ctx.account_read((domain + 1) % 4, 10);
                Ok(())
            })
            .prefer(domain),
        );
    }
    let report = scheduler.run(graph).unwrap();
    let matrix = &report.bytes_read;
    assert_eq!(matrix.memory_nodes, vec![0, 1, 2, 3]);
    assert_eq!(matrix.total(), 4040);
    for domain in 0..4u32 {
        assert_eq!(matrix.get(domain as usize, domain), 1000);
        assert_eq!(matrix.get(domain as usize, (domain + 1) % 4), 10);
    }
    let local: Vec<_> = scheduler.domains().domains.iter().map(|d| d.memory_nodes.clone()).collect();
    assert_eq!(matrix.local_bytes(&local), 4000);
    // The scheduler keeps the sum over queries until its counters are reset; by reading CPU's node (here, under
    // logical pinning, the node of the domain the task ran in) the matrix is the same.
    let counters = scheduler.counters();
    assert_eq!(counters.bytes_read, *matrix);
    assert_eq!(counters.bytes_read_by_cpu_node.worker_domains, ["node0", "node1", "node2", "node3"]);
    assert_eq!(counters.bytes_read_by_cpu_node.bytes, matrix.bytes);
    scheduler.reset_counters();
    assert_eq!(scheduler.counters().bytes_read.total(), 0);
    assert_eq!(scheduler.counters().bytes_read_by_cpu_node.total(), 0);
}

#[test]
fn one_big_domain_still_tells_which_node_read_which_node() {
    // The machine as one domain: every byte is "local" to it, but the node matrix keeps the nodes apart.
    let topology = snc(1);
    let config = SchedulerConfig {
        granularity: DomainGranularity::Machine,
        ..logical(Stealing::ANY, Binding::None, WorkerLayout::All)
    };
    let scheduler = Scheduler::new(&topology, config).unwrap();
    let mut graph = TaskGraph::new();
    graph.add(TaskSpec::new(|ctx| {
        ctx.account_read(0, 100);
        ctx.account_read(3, 50);
        Ok(())
    }));
    scheduler.run(graph).unwrap();
    let counters = scheduler.counters();
    assert_eq!(counters.bytes_read.worker_domains.len(), 1);
    let local: Vec<_> = scheduler.domains().domains.iter().map(|d| d.memory_nodes.clone()).collect();
    assert_eq!(counters.bytes_read.local_bytes(&local), 150);
    // Logical pinning runs the machine domain's tasks "on" its first node.
    let by_node = &counters.bytes_read_by_cpu_node;
    assert_eq!((by_node.get(0, 0), by_node.get(0, 3)), (100, 50));
    let diagonal: Vec<_> = by_node.memory_nodes.iter().map(|&n| numadb_topology::NodeSet::from_ids([n])).collect();
    assert_eq!(by_node.local_bytes(&diagonal), 100);
}

#[test]
fn worker_layouts_follow_the_thesis() {
    let topology = snc(2);
    let one = Scheduler::new(&topology, logical(Stealing::ANY, Binding::None, WorkerLayout::OneDomain(1))).unwrap();
    assert_eq!(one.workers().iter().map(|w| w.domain).collect::<Vec<_>>(), vec![1, 1]);
    assert!(one.has_workers(1) && !one.has_workers(0));
    let half = Scheduler::new(&topology, logical(Stealing::ANY, Binding::None, WorkerLayout::HalfCores)).unwrap();
    assert_eq!(half.worker_count(), 4);
    let per_package = SchedulerConfig {
        granularity: DomainGranularity::Package,
        ..logical(Stealing::ANY, Binding::None, WorkerLayout::All)
    };
    let packages = Scheduler::new(&topology, per_package).unwrap();
    assert_eq!(packages.domains().len(), 2);
    assert_eq!(packages.worker_count(), 8);
    let error =
        Scheduler::new(&topology, logical(Stealing::ANY, Binding::None, WorkerLayout::OneDomain(7))).err().unwrap();
    assert!(error.to_string().contains("domain 7 does not exist"), "{error}");
}

#[test]
fn a_report_times_the_dispatch_the_task_span_and_the_workers_busy_time() {
    let scheduler = Scheduler::new(&snc(2), logical(Stealing::ANY, Binding::None, WorkerLayout::All)).unwrap();
    let log: Log = Arc::default();
    let mut graph = TaskGraph::new();
    for _ in 0..16 {
        graph.add(logging_task(&log, None, Duration::from_millis(3)));
    }
    let report = scheduler.run(graph).unwrap();
    assert_eq!(log.lock().unwrap().len(), 16);
    // Each task sleeps 3 ms inside its body: the busy time counts all 16 of them, the span at least one.
    assert!(report.task_busy >= Duration::from_millis(48), "{report:?}");
    assert!(report.task_span >= Duration::from_millis(3), "{report:?}");
    // Busy time cannot exceed what the workers had in the span, and the span lies inside the query's time.
    let workers = scheduler.worker_count() as u32;
    assert!(report.task_busy <= report.task_span * workers, "{report:?}");
    assert!(report.dispatch + report.task_span <= report.elapsed, "{report:?}");
    // Reports of two queries add up, as a statement's subqueries do.
    let mut total = report.clone();
    total.add(&report);
    assert_eq!(total.task_busy, report.task_busy * 2);
    assert_eq!(total.task_span, report.task_span * 2);
}
