//! The policy decisions, as pure functions of the topology and the configuration: which CPUs get workers, which
//! queues a thief looks at and in what order, how many tasks one steal takes. Keeping them free of threads and
//! clocks makes every decision testable deterministically on fixture topologies.

use numadb_topology::{CpuSet, Domains, Topology};

use crate::SchedulerError;
use crate::config::{NEAREST, StealBatch, StealMode, WorkerLayout};

/// One worker to start: its domain and the CPU it stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerPlan {
    /// The domain whose queue the worker serves.
    pub domain: u32,
    /// The CPU it was planned for (with `Binding::Always` it is pinned to its domain's worker CPUs).
    pub cpu: u32,
}

/// The workers a layout asks for, in domain order then CPU order.
pub fn plan_workers(
    topology: &Topology,
    domains: &Domains,
    layout: &WorkerLayout,
) -> Result<Vec<WorkerPlan>, SchedulerError> {
    let mut plans = Vec::new();
    match layout {
        WorkerLayout::All => {
            for domain in &domains.domains {
                plans.extend(domain.allowed_cpus.iter().map(|cpu| WorkerPlan { domain: domain.id, cpu }));
            }
        }
        WorkerLayout::OneDomain(id) => {
            let domain = domains.get(*id).ok_or_else(|| {
                SchedulerError::InvalidConfig(format!(
                    "domain {id} does not exist (the {} domains are 0-{})",
                    domains.granularity.name(),
                    domains.len().saturating_sub(1)
                ))
            })?;
            plans.extend(domain.allowed_cpus.iter().map(|cpu| WorkerPlan { domain: domain.id, cpu }));
        }
        WorkerLayout::HalfCores => {
            for domain in &domains.domains {
                // Cores of the domain in order of their machine-wide number, each with its allowed threads.
                let mut cores: Vec<(u32, Vec<u32>)> = Vec::new();
                for cpu in domain.allowed_cpus.iter() {
                    let core = topology.cpu(cpu).and_then(|c| c.core).unwrap_or(cpu);
                    match cores.iter_mut().find(|(id, _)| *id == core) {
                        Some((_, threads)) => threads.push(cpu),
                        None => cores.push((core, vec![cpu])),
                    }
                }
                cores.sort_by_key(|(core, _)| *core);
                let keep = (cores.len() / 2).max(1);
                for (_, threads) in cores.into_iter().take(keep) {
                    plans.extend(threads.into_iter().map(|cpu| WorkerPlan { domain: domain.id, cpu }));
                }
            }
        }
        WorkerLayout::Cpus(cpus) => {
            for cpu in cpus.iter() {
                let domain = domains.domain_of_cpu(cpu).filter(|d| d.allowed_cpus.contains(cpu)).ok_or_else(|| {
                    let allowed: CpuSet = domains.domains.iter().flat_map(|d| d.allowed_cpus.iter()).collect();
                    SchedulerError::InvalidConfig(format!("CPU {cpu} cannot run a worker (usable CPUs: {allowed})"))
                })?;
                plans.push(WorkerPlan { domain: domain.id, cpu });
            }
        }
    }
    if plans.is_empty() {
        return Err(SchedulerError::InvalidConfig(format!("the worker layout {layout} leaves no CPU for a worker")));
    }
    Ok(plans)
}

/// The domains a worker of `thief` may steal from, as tiers of equal distance, nearest tier first (HotSLAW's
/// hierarchical victim selection: a tier is exhausted before the next is looked at).
pub fn victim_tiers(domains: &Domains, thief: u32, mode: StealMode) -> Vec<Vec<u32>> {
    let Some(domain) = domains.get(thief) else { return Vec::new() };
    let limit = match mode {
        StealMode::Off => return Vec::new(),
        StealMode::Any => u32::MAX,
        StealMode::Neighbor { max_distance: NEAREST } => domain.by_distance.first().map_or(0, |n| n.distance),
        StealMode::Neighbor { max_distance } => max_distance,
    };
    let mut tiers: Vec<Vec<u32>> = Vec::new();
    for group in domain.by_distance.chunk_by(|a, b| a.distance == b.distance) {
        if group[0].distance > limit {
            break;
        }
        tiers.push(group.iter().map(|n| n.domain).collect());
    }
    tiers
}

/// Whether a worker of `thief` may take tasks from `victim`'s queue.
pub fn may_steal(domains: &Domains, thief: u32, victim: u32, mode: StealMode) -> bool {
    victim_tiers(domains, thief, mode).iter().any(|tier| tier.contains(&victim))
}

/// How many tasks one steal takes from a queue holding `victim_len` tasks.
pub fn batch_size(victim_len: usize, batch: StealBatch) -> usize {
    match batch {
        StealBatch::One => 1,
        StealBatch::Half { cap } => victim_len.div_ceil(2).clamp(1, cap.max(1)),
    }
}

/// The queue a task goes to. A task with a preferred domain goes to that domain's queue if the domain has workers,
/// or if workers elsewhere may steal from it; otherwise (it would starve) to the nearest domain that has workers.
/// A task without a preference goes to `fallback` (the submitter's domain).
pub fn queue_for(
    domains: &Domains,
    has_workers: &[bool],
    preferred: Option<u32>,
    fallback: u32,
    mode: StealMode,
) -> (u32, bool) {
    let Some(preferred) = preferred.filter(|&p| (p as usize) < has_workers.len()) else {
        return (fallback, false);
    };
    if has_workers[preferred as usize] {
        return (preferred, false);
    }
    let reachable = (0..has_workers.len() as u32)
        .any(|thief| has_workers[thief as usize] && may_steal(domains, thief, preferred, mode));
    if reachable {
        return (preferred, false);
    }
    let nearest = domains
        .get(preferred)
        .and_then(|d| d.by_distance.iter().find(|n| has_workers[n.domain as usize]).map(|n| n.domain))
        .unwrap_or(fallback);
    (nearest, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use numadb_topology::{DomainGranularity, MachineSpec};

    fn snc() -> Topology {
        MachineSpec::from_json(
            r#"{"name":"snc","threads_per_core":2,
                "nodes":[{"package":0,"cores":2,"memory_mib":64},{"package":0,"cores":2,"memory_mib":64},
                         {"package":1,"cores":2,"memory_mib":64},{"package":1,"cores":2,"memory_mib":64}],
                "distances":[[10,11,21,21],[11,10,21,21],[21,21,10,11],[21,21,11,10]]}"#,
        )
        .unwrap()
        .to_topology()
        .unwrap()
    }

    fn domains() -> Domains {
        snc().domains(DomainGranularity::Node).unwrap()
    }

    #[test]
    fn victims_are_tiered_by_distance() {
        let domains = domains();
        assert_eq!(victim_tiers(&domains, 0, StealMode::Off), Vec::<Vec<u32>>::new());
        assert_eq!(victim_tiers(&domains, 0, StealMode::Neighbor { max_distance: NEAREST }), vec![vec![1]]);
        assert_eq!(victim_tiers(&domains, 2, StealMode::Neighbor { max_distance: 11 }), vec![vec![3]]);
        assert_eq!(victim_tiers(&domains, 2, StealMode::Neighbor { max_distance: 20 }), vec![vec![3]]);
        assert_eq!(victim_tiers(&domains, 2, StealMode::Neighbor { max_distance: 21 }), vec![vec![3], vec![0, 1]]);
        assert_eq!(victim_tiers(&domains, 1, StealMode::Any), vec![vec![0], vec![2, 3]]);
        assert!(may_steal(&domains, 0, 1, StealMode::Neighbor { max_distance: 11 }));
        assert!(!may_steal(&domains, 0, 2, StealMode::Neighbor { max_distance: 11 }));
        assert!(!may_steal(&domains, 0, 0, StealMode::Any), "a domain does not steal from itself");
    }

    #[test]
    fn batches_take_half_the_queue_up_to_the_cap() {
        assert_eq!(batch_size(10, StealBatch::One), 1);
        let half = StealBatch::Half { cap: 4 };
        let sizes: Vec<usize> = [10, 6, 3, 1, 0].iter().map(|&len| batch_size(len, half)).collect();
        assert_eq!(sizes, vec![4, 3, 2, 1, 1]);
        assert_eq!(batch_size(7, StealBatch::Half { cap: 100 }), 4);
    }

    #[test]
    fn layouts_place_workers() {
        let topology = snc();
        let domains = topology.domains(DomainGranularity::Node).unwrap();
        let all = plan_workers(&topology, &domains, &WorkerLayout::All).unwrap();
        assert_eq!(all.len(), 16);
        let one = plan_workers(&topology, &domains, &WorkerLayout::OneDomain(1)).unwrap();
        assert_eq!(one.iter().map(|p| p.cpu).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
        assert!(one.iter().all(|p| p.domain == 1));
        // Half the cores of each domain, with both their threads: one core (two CPUs) of the two per node.
        let half = plan_workers(&topology, &domains, &WorkerLayout::HalfCores).unwrap();
        assert_eq!(half.iter().map(|p| p.cpu).collect::<Vec<_>>(), vec![0, 1, 4, 5, 8, 9, 12, 13]);
        let error = plan_workers(&topology, &domains, &WorkerLayout::OneDomain(9)).unwrap_err();
        assert!(error.to_string().contains("domain 9 does not exist"), "{error}");
        let error = plan_workers(&topology, &domains, &WorkerLayout::Cpus(CpuSet::from_ids([3, 99]))).unwrap_err();
        assert!(error.to_string().contains("CPU 99 cannot run a worker"), "{error}");
    }

    #[test]
    fn tasks_for_domains_without_workers_go_where_they_can_run() {
        let domains = domains();
        let only_zero = [true, false, false, false];
        // Domain 1 has no workers, but domain 0 may steal from it: the task waits in domain 1's queue.
        assert_eq!(queue_for(&domains, &only_zero, Some(1), 0, StealMode::Neighbor { max_distance: 11 }), (1, false));
        // Domain 2 is out of reach: rerouted to the nearest domain with workers.
        assert_eq!(queue_for(&domains, &only_zero, Some(2), 0, StealMode::Neighbor { max_distance: 11 }), (0, true));
        assert_eq!(queue_for(&domains, &only_zero, Some(1), 0, StealMode::Off), (0, true));
        assert_eq!(queue_for(&domains, &[true; 4], Some(3), 0, StealMode::Off), (3, false));
        assert_eq!(queue_for(&domains, &[true; 4], None, 2, StealMode::Off), (2, false));
    }
}
