//! The raw system calls: the only code in numadb that talks to the kernel about memory policy, page location,
//! migration and affinity.
//!
//! libc exposes the syscall numbers for `mbind`, `get_mempolicy`, `set_mempolicy` and `move_pages` but no wrappers
//! (glibc leaves them to libnuma, which we do not link), so each is a thin, typed wrapper around `libc::syscall`.
//! Node and CPU masks are passed as arrays of 64-bit words sized for the largest machine the kernel supports
//! ([`NODE_MASK_BITS`], [`CPU_MASK_BITS`]); the kernel ignores the unused high bits.

use std::io;

use numadb_topology::{CpuSet, NodeSet};

/// `MPOL_*` modes (`linux/mempolicy.h`).
pub const MPOL_DEFAULT: i32 = 0;
pub const MPOL_PREFERRED: i32 = 1;
pub const MPOL_BIND: i32 = 2;
pub const MPOL_INTERLEAVE: i32 = 3;
pub const MPOL_LOCAL: i32 = 4;
/// `get_mempolicy` flags.
const MPOL_F_MEMS_ALLOWED: libc::c_ulong = 1 << 2;
/// `mbind` / `move_pages` flags.
pub const MPOL_MF_MOVE: u32 = 1 << 1;

/// Bits in the node masks we pass: the kernel's `MAX_NUMNODES` limit is 1024.
pub const NODE_MASK_BITS: usize = 1024;
/// Bits in the CPU masks we pass: the kernel's `NR_CPUS` limit is 8192.
pub const CPU_MASK_BITS: usize = 8192;

type NodeMaskWords = [u64; NODE_MASK_BITS / 64];

fn node_mask(nodes: &NodeSet) -> NodeMaskWords {
    let mut mask = [0u64; NODE_MASK_BITS / 64];
    for node in nodes.iter().filter(|&n| (n as usize) < NODE_MASK_BITS) {
        mask[node as usize / 64] |= 1 << (node % 64);
    }
    mask
}

fn nodes_of_mask(mask: &NodeMaskWords) -> NodeSet {
    (0..NODE_MASK_BITS as u32).filter(|&n| mask[n as usize / 64] & (1 << (n % 64)) != 0).collect()
}

fn cpu_mask(cpus: &CpuSet) -> Vec<u64> {
    let mut mask = vec![0u64; CPU_MASK_BITS / 64];
    for cpu in cpus.iter().filter(|&c| (c as usize) < CPU_MASK_BITS) {
        mask[cpu as usize / 64] |= 1 << (cpu % 64);
    }
    mask
}

fn check(result: libc::c_long) -> io::Result<libc::c_long> {
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(result) }
}

/// `mbind(2)`: sets the memory policy of `[address, address + length)`. With `MPOL_MF_MOVE` in `flags`, pages
/// already present are migrated to comply.
///
/// # Safety
/// `address` must be page-aligned and `[address, address + length)` must be a mapping owned by the caller.
pub unsafe fn mbind(address: *mut u8, length: usize, mode: i32, nodes: &NodeSet, flags: u32) -> io::Result<()> {
    let mask = node_mask(nodes);
    let (mask_pointer, max_node) =
        if nodes.is_empty() { (std::ptr::null(), 0) } else { (mask.as_ptr(), NODE_MASK_BITS as libc::c_ulong + 1) };
    // SAFETY: the caller guarantees the range is a mapping it owns; the mask outlives the call and holds
    // `NODE_MASK_BITS` bits, which is what `max_node - 1` tells the kernel to read.
    let result = unsafe { libc::syscall(libc::SYS_mbind, address, length, mode, mask_pointer, max_node, flags) };
    check(result).map(|_| ())
}

/// `set_mempolicy(2)` for the calling thread.
pub fn set_mempolicy(mode: i32, nodes: &NodeSet) -> io::Result<()> {
    let mask = node_mask(nodes);
    let (mask_pointer, max_node) =
        if nodes.is_empty() { (std::ptr::null(), 0) } else { (mask.as_ptr(), NODE_MASK_BITS as libc::c_ulong + 1) };
    // SAFETY: the mask outlives the call and holds the number of bits `max_node - 1` announces.
    let result = unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, mask_pointer, max_node) };
    check(result).map(|_| ())
}

/// `get_mempolicy(2)` for the calling thread: its mode and node set.
pub fn get_mempolicy() -> io::Result<(i32, NodeSet)> {
    let mut mode: libc::c_int = 0;
    let mut mask: NodeMaskWords = [0; NODE_MASK_BITS / 64];
    // SAFETY: `mode` and `mask` are valid for writes of the sizes announced; address 0 with flags 0 asks for the
    // thread's policy.
    let result = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            &mut mode as *mut libc::c_int,
            mask.as_mut_ptr(),
            NODE_MASK_BITS as libc::c_ulong + 1,
            std::ptr::null::<u8>(),
            0 as libc::c_ulong,
        )
    };
    check(result)?;
    Ok((mode & 0xff, nodes_of_mask(&mask)))
}

/// The nodes the calling thread may allocate from (`get_mempolicy(MPOL_F_MEMS_ALLOWED)`).
pub fn mems_allowed() -> io::Result<NodeSet> {
    let mut mask: NodeMaskWords = [0; NODE_MASK_BITS / 64];
    // SAFETY: `mask` is valid for writes of `NODE_MASK_BITS` bits; no mode pointer is needed for this flag.
    let result = unsafe {
        libc::syscall(
            libc::SYS_get_mempolicy,
            std::ptr::null_mut::<libc::c_int>(),
            mask.as_mut_ptr(),
            NODE_MASK_BITS as libc::c_ulong + 1,
            std::ptr::null::<u8>(),
            MPOL_F_MEMS_ALLOWED,
        )
    };
    check(result)?;
    Ok(nodes_of_mask(&mask))
}

/// `move_pages(2)` on the calling process. With `target_nodes` `None` it only queries: `status[i]` becomes the node
/// of `pages[i]` or a negative errno. With targets, it migrates and `status[i]` is the node reached or an errno.
///
/// # Safety
/// Every pointer in `pages` must lie in a mapping of the calling process (the kernel checks this, but the caller
/// must not have the mapping freed concurrently).
pub unsafe fn move_pages(pages: &[*mut u8], target_nodes: Option<&[i32]>, status: &mut [i32]) -> io::Result<()> {
    assert_eq!(pages.len(), status.len(), "one status per page");
    if let Some(targets) = target_nodes {
        assert_eq!(pages.len(), targets.len(), "one target per page");
    }
    let targets = target_nodes.map_or(std::ptr::null(), <[i32]>::as_ptr);
    let flags = if target_nodes.is_some() { libc::c_int::try_from(MPOL_MF_MOVE).unwrap_or(2) } else { 0 };
    // SAFETY: the three arrays hold `pages.len()` elements each (asserted above) and outlive the call; pid 0 means
    // this process, whose mappings the caller guarantees.
    let result = unsafe {
        libc::syscall(
            libc::SYS_move_pages,
            0 as libc::c_int,
            pages.len() as libc::c_ulong,
            pages.as_ptr(),
            targets,
            status.as_mut_ptr(),
            flags,
        )
    };
    check(result).map(|_| ())
}

/// `sched_setaffinity(2)` for the calling thread.
pub fn set_thread_affinity(cpus: &CpuSet) -> io::Result<()> {
    let mask = cpu_mask(cpus);
    // SAFETY: the mask holds `mask.len() * 8` bytes and outlives the call; tid 0 is the calling thread.
    let result = unsafe { libc::syscall(libc::SYS_sched_setaffinity, 0 as libc::pid_t, mask.len() * 8, mask.as_ptr()) };
    check(result).map(|_| ())
}

/// `sched_getaffinity(2)` for the calling thread.
pub fn thread_affinity() -> io::Result<CpuSet> {
    let mut mask = vec![0u64; CPU_MASK_BITS / 64];
    // SAFETY: the mask is valid for writes of the announced size; tid 0 is the calling thread.
    let result =
        unsafe { libc::syscall(libc::SYS_sched_getaffinity, 0 as libc::pid_t, mask.len() * 8, mask.as_mut_ptr()) };
    check(result)?;
    Ok((0..CPU_MASK_BITS as u32).filter(|&c| mask[c as usize / 64] & (1 << (c % 64)) != 0).collect())
}

/// `getcpu(2)`: the CPU and node the calling thread is running on right now.
pub fn getcpu() -> io::Result<(u32, u32)> {
    let mut cpu: libc::c_uint = 0;
    let mut node: libc::c_uint = 0;
    // SAFETY: both out-pointers are valid for writes; the third (cache) argument is unused by the kernel.
    let result = unsafe {
        libc::syscall(libc::SYS_getcpu, &mut cpu as *mut libc::c_uint, &mut node as *mut libc::c_uint, 0usize)
    };
    check(result)?;
    Ok((cpu, node))
}

/// `mmap(2)` of anonymous, private, read-write memory.
pub fn map_anonymous(length: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no existing memory.
    let address = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            length,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if address == libc::MAP_FAILED { Err(io::Error::last_os_error()) } else { Ok(address.cast()) }
}

/// `munmap(2)`.
///
/// # Safety
/// The range must be a mapping (or part of one) that nothing references any more.
pub unsafe fn unmap(address: *mut u8, length: usize) -> io::Result<()> {
    // SAFETY: guaranteed by the caller.
    let result = unsafe { libc::munmap(address.cast(), length) };
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// `madvise(2)`.
///
/// # Safety
/// The range must be a mapping owned by the caller; `advice` must not discard data the caller still needs.
pub unsafe fn madvise(address: *mut u8, length: usize, advice: i32) -> io::Result<()> {
    // SAFETY: guaranteed by the caller.
    let result = unsafe { libc::madvise(address.cast(), length, advice) };
    if result < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// The base page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as usize } else { 4096 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_round_trip() {
        let nodes = NodeSet::parse_list("0,3,63-64,1023").unwrap();
        assert_eq!(nodes_of_mask(&node_mask(&nodes)), nodes);
        let cpus = CpuSet::parse_list("0,65,8191").unwrap();
        let mask = cpu_mask(&cpus);
        assert_eq!(mask[0], 1);
        assert_eq!(mask[1], 2);
        assert_eq!(mask[127], 1 << 63);
    }
}
