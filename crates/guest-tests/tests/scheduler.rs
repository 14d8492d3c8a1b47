//! The scheduler's policies with real pinning on a real multi-node kernel: every check here uses `getcpu`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use numadb_scheduler::{
    Binding, NEAREST, Pinning, Scheduler, SchedulerConfig, Stealing, TaskGraph, TaskSpec, WorkerLayout, policy,
};
use numadb_topology::{DomainGranularity, Topology};

fn live() -> Topology {
    Topology::from_system().unwrap()
}

fn config(layout: WorkerLayout, stealing: Stealing, binding: Binding) -> SchedulerConfig {
    SchedulerConfig { granularity: DomainGranularity::Node, layout, stealing, binding, pinning: Pinning::Os }
}

/// Runs `tasks` tasks preferring `preferred(i)`, each recording (preferred, worker domain, CPU it ran on).
fn run(scheduler: &Scheduler, tasks: u32, preferred: impl Fn(u32) -> Option<u32>) -> Vec<(Option<u32>, u32, u32)> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut graph = TaskGraph::new();
    for index in 0..tasks {
        let log = Arc::clone(&log);
        graph.add(
            TaskSpec::new(move |ctx| {
                std::thread::sleep(Duration::from_micros(300));
                let cpu = numadb_placement::current_cpu().unwrap().cpu;
                log.lock().unwrap().push((ctx.preferred_domain(), ctx.worker_domain(), cpu));
                Ok(())
            })
            .prefer_maybe(preferred(index)),
        );
    }
    scheduler.run(graph).unwrap();
    Arc::try_unwrap(log).unwrap().into_inner().unwrap()
}

#[test]
fn stealing_off_and_binding_always_keep_every_task_on_its_domains_cpus() {
    let topology = live();
    let scheduler = Scheduler::new(&topology, config(WorkerLayout::All, Stealing::OFF, Binding::Always)).unwrap();
    let domains = scheduler.domains().clone();
    let count = domains.len() as u32;
    // Skewed: most tasks prefer domain 0.
    let log = run(&scheduler, 200, |i| Some(if i % 4 == 0 { i / 4 % count } else { 0 }));
    assert_eq!(log.len(), 200);
    for (preferred, worker, cpu) in log {
        let preferred = preferred.unwrap();
        assert_eq!(worker, preferred, "a task preferring domain {preferred} ran on a worker of domain {worker}");
        assert!(domains.get(preferred).unwrap().cpus.contains(cpu), "domain {preferred}'s task ran on CPU {cpu}");
    }
    assert_eq!(scheduler.counters().tasks_stolen(), 0);
}

#[test]
fn neighbor_stealing_never_runs_a_task_beyond_the_nearest_domains() {
    let topology = live();
    let stealing = Stealing::neighbor(NEAREST);
    let scheduler = Scheduler::new(&topology, config(WorkerLayout::All, stealing, Binding::Always)).unwrap();
    let domains = scheduler.domains().clone();
    let mut reachable: Vec<u32> = policy::victim_tiers(&domains, 0, stealing.mode).into_iter().flatten().collect();
    reachable.push(0);
    let log = run(&scheduler, 150, |_| Some(0));
    for (_, worker, cpu) in &log {
        // Thieves are the domains that may steal from 0: with symmetric distances, 0's nearest neighbours.
        let thief_ok = *worker == 0 || policy::may_steal(&domains, *worker, 0, stealing.mode);
        assert!(thief_ok, "domain {worker} may not steal from domain 0 but ran its task");
        assert!(domains.get(*worker).unwrap().cpus.contains(*cpu), "worker of domain {worker} ran on CPU {cpu}");
    }
    let counters = scheduler.counters();
    for domain in &counters.domains {
        for &distance in domain.tasks_stolen_in_by_distance.keys() {
            let nearest = domains.get(domain.domain).unwrap().by_distance[0].distance;
            assert_eq!(distance, nearest, "domain {} stole from distance {distance}", domain.name);
        }
    }
}

#[test]
fn preferred_binding_moves_the_worker_to_the_tasks_domain() {
    let topology = live();
    let scheduler =
        Scheduler::new(&topology, config(WorkerLayout::OneDomain(0), Stealing::ANY, Binding::Preferred)).unwrap();
    let domains = scheduler.domains().clone();
    let last = domains.len() as u32 - 1;
    let log = run(&scheduler, 40, |i| Some(if i % 2 == 0 { last } else { 0 }));
    for (preferred, worker, cpu) in log {
        assert_eq!(worker, 0, "only domain 0 has workers");
        let preferred = preferred.unwrap();
        assert!(domains.get(preferred).unwrap().cpus.contains(cpu), "a task preferring {preferred} ran on CPU {cpu}");
    }
}

#[test]
fn binding_always_keeps_workers_home_even_when_stealing() {
    let topology = live();
    let scheduler = Scheduler::new(&topology, config(WorkerLayout::All, Stealing::ANY, Binding::Always)).unwrap();
    let domains = scheduler.domains().clone();
    let log = run(&scheduler, 120, |_| Some(0));
    for (_, worker, cpu) in log {
        assert!(domains.get(worker).unwrap().cpus.contains(cpu), "worker of domain {worker} ran on CPU {cpu}");
    }
    let report = scheduler.shutdown();
    assert_eq!(report.workers_alive, 0);
}
