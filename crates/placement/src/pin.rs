//! Thread affinity and thread memory policy.

use numadb_topology::{CpuSet, NodeSet};

use crate::{PlacementError, Policy, sys, system_topology};

/// Where the calling thread is running right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuLocation {
    /// The CPU.
    pub cpu: u32,
    /// Its node.
    pub node: u32,
}

/// The CPU and node the calling thread runs on at this instant (`getcpu`). Unless the thread is pinned to one
/// CPU, the answer may be stale by the time it is read.
pub fn current_cpu() -> Result<CpuLocation, PlacementError> {
    let (cpu, node) = sys::getcpu().map_err(|error| PlacementError::syscall("getcpu", error))?;
    Ok(CpuLocation { cpu, node })
}

/// The CPUs the calling thread may run on.
pub fn thread_affinity() -> Result<CpuSet, PlacementError> {
    sys::thread_affinity().map_err(|error| PlacementError::syscall("sched_getaffinity", error))
}

/// Restricts the calling thread to `cpus`. Every CPU must be one this process may run on; the error lists those.
pub fn pin_current_thread(cpus: &CpuSet) -> Result<(), PlacementError> {
    let allowed = &system_topology()?.allowed.cpus;
    if cpus.is_empty() || !cpus.is_subset(allowed) {
        return Err(PlacementError::CpusNotAllowed { requested: cpus.clone(), allowed: allowed.clone() });
    }
    sys::set_thread_affinity(cpus).map_err(|error| PlacementError::syscall(format!("sched_setaffinity({cpus})"), error))
}

/// Pins the calling thread until the guard is dropped, then restores the affinity it had before. The guard must be
/// dropped on the thread that made it (it is not `Send`).
pub struct PinGuard {
    previous: CpuSet,
    _not_send: std::marker::PhantomData<*const ()>,
}

impl PinGuard {
    /// Pins the calling thread to `cpus`, remembering its current affinity.
    pub fn pin(cpus: &CpuSet) -> Result<Self, PlacementError> {
        let previous = thread_affinity()?;
        pin_current_thread(cpus)?;
        Ok(Self { previous, _not_send: std::marker::PhantomData })
    }

    /// The affinity that will be restored.
    pub fn previous(&self) -> &CpuSet {
        &self.previous
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        // Restoring to a set the thread had a moment ago can only fail if the cpuset shrank meanwhile; the thread
        // then keeps the narrower pinning, which is safe.
        let _ = sys::set_thread_affinity(&self.previous);
    }
}

/// Sets the calling thread's memory policy: where its future page faults allocate.
pub fn set_thread_policy(policy: &Policy) -> Result<(), PlacementError> {
    policy.check(system_topology()?)?;
    let (mode, nodes) = policy.mode_and_nodes();
    sys::set_mempolicy(mode, &nodes).map_err(|error| PlacementError::syscall(format!("set_mempolicy({policy})"), error))
}

/// The calling thread's memory policy as the kernel reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadPolicy {
    /// `default`, `preferred`, `bind`, `interleave` or `local`.
    pub mode: &'static str,
    /// The nodes of the policy (empty for `default` and `local`).
    pub nodes: NodeSet,
}

/// The calling thread's memory policy.
pub fn thread_policy() -> Result<ThreadPolicy, PlacementError> {
    let (mode, nodes) = sys::get_mempolicy().map_err(|error| PlacementError::syscall("get_mempolicy", error))?;
    let mode = match mode {
        sys::MPOL_DEFAULT => "default",
        sys::MPOL_PREFERRED if nodes.is_empty() => "local",
        sys::MPOL_PREFERRED => "preferred",
        sys::MPOL_BIND => "bind",
        sys::MPOL_INTERLEAVE => "interleave",
        sys::MPOL_LOCAL => "local",
        _ => "other",
    };
    Ok(ThreadPolicy { mode, nodes })
}
