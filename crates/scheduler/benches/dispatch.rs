//! The scheduler against rayon, measured in the same run on the same machine.
//!
//! `cargo bench -p numadb-scheduler --bench dispatch` prints:
//! 1. dispatch throughput: empty tasks per second per worker (one graph of independent tasks vs a rayon scope);
//! 2. submit-to-start latency: one task at a time into an idle pool, submit to first instruction of the task;
//! 3. a skewed workload (every task prefers one domain) against the balanced one under each stealing policy,
//!    with rayon doing the same work as the reference.
//!
//! On a one-node machine there is only one domain, so the skew scenario splits the allowed CPUs into two logical
//! domains (real pinning, real threads); on a multi-node machine it uses the real node domains.
//!
//! Every figure is the median of several repetitions; the spread (min-max) is printed beside it. Ratios are
//! numadb / rayon: above 1 means numadb is faster (throughput) or slower (latency, time), as labelled.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numadb_scheduler::{Binding, Pinning, Scheduler, SchedulerConfig, Stealing, TaskGraph, TaskSpec, WorkerLayout};
use numadb_topology::{DomainGranularity, MachineSpec, NodeSpec, Topology};

const REPETITIONS: usize = 7;
const EMPTY_TASKS: usize = 200_000;
const LATENCY_SAMPLES: usize = 2_000;
const SKEW_TASKS: usize = 4_000;
const BURN_ITERATIONS: u64 = 20_000;

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    values[values.len() / 2]
}

fn spread(values: &[f64]) -> String {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{min:.3}-{max:.3}")
}

/// A fixed amount of CPU work that the optimiser cannot remove.
fn burn(iterations: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for _ in 0..iterations {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    std::hint::black_box(x)
}

/// The domains to skew over: the machine's own when it has several nodes, else two logical halves of its CPUs.
fn skew_topology(machine: &Topology) -> (Topology, String) {
    if machine.nodes_with_cpus().len() >= 2 {
        return (machine.clone(), "the machine's NUMA nodes".to_string());
    }
    let cpus: Vec<u32> = machine.allowed.cpus.iter().collect();
    let half = (cpus.len() / 2).max(1) as u32;
    let spec = MachineSpec {
        name: "two-logical-domains".into(),
        threads_per_core: 1,
        nodes: vec![
            NodeSpec { package: 0, cores: half, memory_mib: 64 },
            NodeSpec { package: 0, cores: cpus.len() as u32 - half, memory_mib: 64 },
        ],
        distances: vec![vec![10, 20], vec![20, 10]],
    };
    (spec.to_topology().expect("a valid split"), format!("two logical domains over CPUs {}", machine.allowed.cpus))
}

fn config(stealing: Stealing) -> SchedulerConfig {
    SchedulerConfig {
        granularity: DomainGranularity::Node,
        layout: WorkerLayout::All,
        stealing,
        binding: Binding::Always,
        pinning: Pinning::Os,
    }
}

/// Tasks per second per worker for: numadb (graph submitted from this thread), rayon with `spawn` from this
/// thread (the same situation: a client thread hands work to the pool), and rayon's `scope`, whose spawning loop
/// runs on a pool thread and pushes to that worker's own deque (rayon's best case; no outside submission).
fn dispatch_throughput(
    scheduler: &Scheduler,
    pool: &rayon::ThreadPool,
    workers: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut ours = Vec::new();
    let mut rayon_spawn = Vec::new();
    let mut rayon_scope = Vec::new();
    for _ in 0..REPETITIONS {
        let counter = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let mut graph = TaskGraph::with_capacity(EMPTY_TASKS);
        for _ in 0..EMPTY_TASKS {
            let counter = Arc::clone(&counter);
            graph.add(TaskSpec::new(move |_| {
                counter.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }));
        }
        scheduler.run(graph).unwrap();
        ours.push(EMPTY_TASKS as f64 / started.elapsed().as_secs_f64() / workers as f64);

        let done = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let counter = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        for _ in 0..EMPTY_TASKS {
            let counter = Arc::clone(&counter);
            let done = Arc::clone(&done);
            pool.spawn(move || {
                if counter.fetch_add(1, Ordering::AcqRel) + 1 == EMPTY_TASKS as u64 {
                    *done.0.lock().unwrap() = true;
                    done.1.notify_all();
                }
            });
        }
        let mut finished = done.0.lock().unwrap();
        while !*finished {
            finished = done.1.wait(finished).unwrap();
        }
        drop(finished);
        rayon_spawn.push(EMPTY_TASKS as f64 / started.elapsed().as_secs_f64() / workers as f64);

        let counter = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        pool.scope(|scope| {
            for _ in 0..EMPTY_TASKS {
                let counter = Arc::clone(&counter);
                scope.spawn(move |_| {
                    counter.fetch_add(1, Ordering::Relaxed);
                });
            }
        });
        rayon_scope.push(EMPTY_TASKS as f64 / started.elapsed().as_secs_f64() / workers as f64);
    }
    (ours, rayon_spawn, rayon_scope)
}

fn submit_to_start(scheduler: &Scheduler, pool: &rayon::ThreadPool) -> (Vec<f64>, Vec<f64>) {
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..LATENCY_SAMPLES {
        let started_at = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&started_at);
        let mut graph = TaskGraph::new();
        let submitted = Instant::now();
        graph.add(TaskSpec::new(move |_| {
            *slot.lock().unwrap() = Some(Instant::now());
            Ok(())
        }));
        scheduler.run(graph).unwrap();
        let start = started_at.lock().unwrap().unwrap();
        ours.push(start.duration_since(submitted).as_secs_f64() * 1e6);

        let (sender, receiver) = std::sync::mpsc::channel();
        let submitted = Instant::now();
        pool.spawn(move || sender.send(Instant::now()).unwrap());
        let start = receiver.recv().unwrap();
        theirs.push(start.duration_since(submitted).as_secs_f64() * 1e6);
        // Let both pools go idle between samples, as a lone query would find them.
        std::thread::sleep(Duration::from_micros(200));
    }
    (ours, theirs)
}

/// Seconds to run the skew workload: `preferred(i)` picks each task's domain.
fn run_workload(scheduler: &Scheduler, preferred: impl Fn(usize) -> Option<u32>) -> f64 {
    let started = Instant::now();
    let mut graph = TaskGraph::new();
    for index in 0..SKEW_TASKS {
        graph.add(
            TaskSpec::new(|_| {
                burn(BURN_ITERATIONS);
                Ok(())
            })
            .prefer_maybe(preferred(index)),
        );
    }
    scheduler.run(graph).unwrap();
    started.elapsed().as_secs_f64()
}

fn main() {
    // `cargo bench ... -- NAME` runs only the sections whose name contains NAME (dispatch, latency, skew).
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    let wanted = |section: &str| filters.is_empty() || filters.iter().any(|f| section.contains(f.as_str()));
    let machine = Topology::from_system().expect("reading this machine's topology");
    let workers = machine.allowed.cpus.len();
    println!("numadb scheduler vs rayon");
    println!(
        "machine: {} | kernel {} | {} CPUs allowed | {} node(s)",
        machine.machine.cpu_model.as_deref().unwrap_or("unknown CPU"),
        machine.machine.kernel_release.as_deref().unwrap_or("?"),
        workers,
        machine.nodes.len()
    );
    let pool = rayon::ThreadPoolBuilder::new().num_threads(workers).build().unwrap();

    let scheduler = Scheduler::new(&machine, config(Stealing::ANY)).unwrap();
    if wanted("dispatch") {
        let (mut ours, mut spawn, mut scope) = dispatch_throughput(&scheduler, &pool, workers);
        let (ours_median, spawn_median, scope_median) = (median(&mut ours), median(&mut spawn), median(&mut scope));
        println!("\n1. dispatch: {EMPTY_TASKS} empty tasks, {workers} workers, median of {REPETITIONS} (min-max)");
        println!(
            "   numadb, graph submitted from a client thread  {ours_median:>10.0} tasks/s/worker ({})",
            spread(&ours)
        );
        println!(
            "   rayon, spawn from a client thread            {spawn_median:>10.0} tasks/s/worker ({})",
            spread(&spawn)
        );
        println!(
            "   rayon, scope (spawning on a pool thread)     {scope_median:>10.0} tasks/s/worker ({})",
            spread(&scope)
        );
        println!(
            "   ratio numadb / rayon spawn = {:.2} (goal >= 1.0: overhead at most rayon's); numadb / rayon scope = {:.2}",
            ours_median / spawn_median,
            ours_median / scope_median
        );
    }
    if wanted("latency") {
        let (mut ours, mut theirs) = submit_to_start(&scheduler, &pool);
        let p99 = |values: &mut Vec<f64>| {
            values.sort_by(|a, b| a.total_cmp(b));
            values[values.len() * 99 / 100]
        };
        let (ours_median, theirs_median) = (median(&mut ours), median(&mut theirs));
        println!("\n2. submit-to-start latency into an idle pool, {LATENCY_SAMPLES} samples");
        println!(
            "   numadb median {ours_median:.1} us, p99 {:.1} us\n   rayon  median {theirs_median:.1} us, p99 {:.1} us\n   ratio numadb/rayon (median) = {:.2} (lower is better)",
            p99(&mut ours),
            p99(&mut theirs),
            ours_median / theirs_median
        );
    }
    drop(scheduler);
    if !wanted("skew") {
        return;
    }

    let (topology, description) = skew_topology(&machine);
    println!(
        "\n3. skewed vs balanced: {SKEW_TASKS} tasks of {BURN_ITERATIONS} xorshift rounds, domains = {description}, binding always"
    );
    let domains = topology.domains(DomainGranularity::Node).unwrap().len() as u32;
    let mut rayon_times = Vec::new();
    for _ in 0..REPETITIONS {
        let started = Instant::now();
        pool.scope(|scope| {
            for _ in 0..SKEW_TASKS {
                scope.spawn(|_| {
                    burn(BURN_ITERATIONS);
                });
            }
        });
        rayon_times.push(started.elapsed().as_secs_f64());
    }
    let rayon_median = median(&mut rayon_times);
    println!("   rayon (no domains)          {rayon_median:.3} s ({})", spread(&rayon_times));
    println!(
        "   {:<26}  {:>10}  {:>10}  {:>13}  {:>14}",
        "stealing", "balanced s", "skewed s", "skew/balanced", "balanced/rayon"
    );
    for stealing in
        [Stealing::OFF, Stealing::neighbor(numadb_scheduler::NEAREST), Stealing::ANY, Stealing::ANY.batched(16)]
    {
        let scheduler = Scheduler::new(&topology, config(stealing)).unwrap();
        let mut balanced = Vec::new();
        let mut skewed = Vec::new();
        for _ in 0..REPETITIONS {
            balanced.push(run_workload(&scheduler, |i| Some(i as u32 % domains)));
            skewed.push(run_workload(&scheduler, |_| Some(0)));
        }
        let (balanced_median, skewed_median) = (median(&mut balanced), median(&mut skewed));
        let counters = scheduler.counters();
        println!(
            "   {:<26}  {:>10.3}  {:>10.3}  {:>13.2}  {:>14.2}   (stolen {} in the last runs)",
            stealing.to_string(),
            balanced_median,
            skewed_median,
            skewed_median / balanced_median,
            balanced_median / rayon_median,
            counters.tasks_stolen()
        );
    }
    println!("   goal: with stealing on, skew/balanced <= 1.10");
}
