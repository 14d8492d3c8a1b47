//! NUMA-placed memory regions, their verification and their migration.

use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ptr::NonNull;

use numadb_topology::{NodeSet, Topology};

use crate::{HUGE_PAGE_BYTES, PlacementError, Policy, sys, system_topology};

/// Where each page of a region belongs: `nodes[(page / pages_per_unit) % nodes.len()]`.
struct PageTarget {
    nodes: Vec<u32>,
    pages_per_unit: usize,
}

impl PageTarget {
    fn node(&self, page: usize) -> u32 {
        self.nodes[(page / self.pages_per_unit) % self.nodes.len()]
    }
}

/// Whether a region asks for transparent huge pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum HugePages {
    /// 4 KiB pages only (`MADV_NOHUGEPAGE`): placement and migration are exact to the base page.
    #[default]
    Never,
    /// Ask for 2 MiB transparent huge pages (`MADV_HUGEPAGE`); the region is 2 MiB aligned and sized. The kernel
    /// may still use base pages where it cannot find a huge one.
    Transparent,
    /// Leave it to the system's THP setting.
    System,
}

/// How many pages one `move_pages` call handles: bounds the temporary arrays to a few MiB.
const PAGES_PER_MOVE_CALL: usize = 1 << 16;
/// How many times migration retries pages that did not move (busy, locked, under writeback).
const MIGRATION_ATTEMPTS_MAX: u32 = 5;
/// Pause between migration attempts.
const MIGRATION_RETRY_PAUSE: std::time::Duration = std::time::Duration::from_millis(20);

/// Where a region's pages are, as the kernel reports them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageHistogram {
    /// Base pages queried.
    pub pages: usize,
    /// Size of a base page.
    pub page_size_bytes: usize,
    /// Pages per node.
    pub per_node: BTreeMap<u32, usize>,
    /// Pages whose status was negative: not yet touched, or temporarily unmapped (NUMA balancing).
    pub unknown: usize,
    /// The unknown pages by the errno the kernel gave (`ENOENT`: not present; `EFAULT`: not mapped now).
    pub unknown_by_errno: BTreeMap<i32, usize>,
}

impl PageHistogram {
    /// Pages known to be on `node`.
    pub fn on_node(&self, node: u32) -> usize {
        self.per_node.get(&node).copied().unwrap_or(0)
    }

    /// Pages whose node is known.
    pub fn known(&self) -> usize {
        self.per_node.values().sum()
    }

    /// Whether every page is known and on `node`.
    pub fn all_on(&self, node: u32) -> bool {
        self.unknown == 0 && self.on_node(node) == self.pages
    }

    /// Whether every *known* page is on one of `nodes`.
    pub fn known_within(&self, nodes: &NodeSet) -> bool {
        self.per_node.keys().all(|&node| nodes.contains(node))
    }

    /// Adds another histogram's counts (for a table made of many regions).
    pub fn add(&mut self, other: &PageHistogram) {
        self.pages += other.pages;
        self.page_size_bytes = self.page_size_bytes.max(other.page_size_bytes);
        for (&node, &count) in &other.per_node {
            *self.per_node.entry(node).or_default() += count;
        }
        self.unknown += other.unknown;
        for (&errno, &count) in &other.unknown_by_errno {
            *self.unknown_by_errno.entry(errno).or_default() += count;
        }
    }
}

/// What a migration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// Where the pages were before.
    pub before: PageHistogram,
    /// Where they are now.
    pub after: PageHistogram,
    /// `mbind` plus `move_pages` retries.
    pub attempts: u32,
}

/// An anonymous memory mapping with a NUMA policy. Unmapped on drop.
pub struct Region {
    start: NonNull<u8>,
    /// Usable length (a multiple of the page size, or of 2 MiB for huge pages).
    length: usize,
    /// What was mapped, including alignment slack, for `munmap`.
    mapping_start: *mut u8,
    mapping_length: usize,
    /// Behind a lock because migration changes it through `&self`: moving pages never changes their contents, so
    /// a region can be migrated while other threads read it.
    policy: std::sync::Mutex<Policy>,
    huge_pages: HugePages,
    page_size: usize,
}

// SAFETY: a Region owns its mapping exclusively; the raw pointers are not shared with anything else, so moving it
// to another thread or sharing `&Region` (which only permits reads) is as safe as for a `Box<[u8]>`.
unsafe impl Send for Region {}
// SAFETY: see `Send`: `&Region` only exposes reads of the mapping and syscalls that do not mutate its contents.
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("start", &self.start)
            .field("length", &self.length)
            .field("policy", &self.policy())
            .field("huge_pages", &self.huge_pages)
            .finish()
    }
}

impl Region {
    /// Maps at least `length_bytes` of zeroed memory with `policy`, checked against this machine. Pages are not
    /// touched: they are placed when first written (see [`Region::populate`]).
    pub fn new(length_bytes: usize, policy: Policy, huge_pages: HugePages) -> Result<Self, PlacementError> {
        Self::new_checked(length_bytes, policy, huge_pages, system_topology()?)
    }

    /// As [`Region::new`], checking nodes against the given topology (which must describe this machine).
    pub fn new_checked(
        length_bytes: usize,
        policy: Policy,
        huge_pages: HugePages,
        topology: &Topology,
    ) -> Result<Self, PlacementError> {
        policy.check(topology)?;
        let page_size = sys::page_size();
        let granule = if huge_pages == HugePages::Transparent { HUGE_PAGE_BYTES } else { page_size };
        let length = length_bytes.max(1).div_ceil(granule) * granule;
        // Over-allocate by one granule so the start can be aligned to it, then trim the slack.
        let mapping_length = length + granule - page_size;
        let mapping_start = sys::map_anonymous(mapping_length)
            .map_err(|error| PlacementError::syscall(format!("mmap({mapping_length} bytes)"), error))?;
        let aligned = (mapping_start as usize).div_ceil(granule) * granule;
        let start = aligned as *mut u8;
        let region = Region {
            start: NonNull::new(start).expect("mmap never returns a null mapping"),
            length,
            mapping_start,
            mapping_length,
            policy: std::sync::Mutex::new(Policy::OsDefault),
            huge_pages,
            page_size,
        };
        let advice = match huge_pages {
            HugePages::Never => Some(libc::MADV_NOHUGEPAGE),
            HugePages::Transparent => Some(libc::MADV_HUGEPAGE),
            HugePages::System => None,
        };
        if let Some(advice) = advice {
            // SAFETY: the range is inside the mapping just created and owned by `region`; the advice only
            // changes how future faults are served.
            unsafe { sys::madvise(start, length, advice) }
                .map_err(|error| PlacementError::syscall(format!("madvise({huge_pages:?})"), error))?;
        }
        region.apply_policy(&policy, 0)?;
        *region.policy.lock().unwrap_or_else(|p| p.into_inner()) = policy;
        Ok(region)
    }

    fn apply_policy(&self, policy: &Policy, flags: u32) -> Result<(), PlacementError> {
        if *policy == Policy::OsDefault && flags == 0 {
            return Ok(());
        }
        let (mode, nodes) = policy.mode_and_nodes();
        // SAFETY: the range is exactly this region's part of its own mapping.
        unsafe { sys::mbind(self.start.as_ptr(), self.length, mode, &nodes, flags) }
            .map_err(|error| PlacementError::syscall(format!("mbind({policy})"), error))
    }

    /// Start of the region.
    pub fn as_ptr(&self) -> *mut u8 {
        self.start.as_ptr()
    }

    /// Usable length in bytes (at least what was asked for).
    pub fn len(&self) -> usize {
        self.length
    }

    /// Whether the region is empty (never: a region has at least one page).
    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The policy the region was created or last migrated with.
    pub fn policy(&self) -> Policy {
        self.policy.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The huge-page request the region was made with.
    pub fn huge_pages(&self) -> HugePages {
        self.huge_pages
    }

    /// The base page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Base pages in the region.
    pub fn page_count(&self) -> usize {
        self.length / self.page_size
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: the region owns `length` bytes of readable, initialised (zero-filled by the kernel) memory.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.length) }
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as for `as_slice`, and `&mut self` guarantees exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.length) }
    }

    /// Writes one byte in every page so that every page is allocated now, on the node its policy picks (for
    /// first-touch: the node of the calling thread's CPU).
    pub fn populate(&mut self) {
        let page_size = self.page_size;
        for page in self.as_mut_slice().chunks_mut(page_size) {
            // A volatile write so the store is not elided for a page that is already zero.
            // SAFETY: `page` is a valid, exclusively borrowed byte of the region.
            unsafe { std::ptr::write_volatile(page.as_mut_ptr(), 0) };
        }
    }

    fn page_pointers(&self, first_page: usize, count: usize) -> Vec<*mut u8> {
        // `wrapping_add` keeps this free of unsafe; every pointer stays inside the mapping.
        (first_page..first_page + count).map(|page| self.start.as_ptr().wrapping_add(page * self.page_size)).collect()
    }

    /// Asks the kernel where every base page of the region is.
    pub fn page_locations(&self) -> Result<PageHistogram, PlacementError> {
        let pages = self.page_count();
        let mut histogram = PageHistogram { pages, page_size_bytes: self.page_size, ..Default::default() };
        let mut status = Vec::new();
        for first in (0..pages).step_by(PAGES_PER_MOVE_CALL) {
            let count = PAGES_PER_MOVE_CALL.min(pages - first);
            let pointers = self.page_pointers(first, count);
            status.clear();
            status.resize(count, 0);
            // SAFETY: every pointer lies in this region's mapping, which `&self` keeps alive.
            unsafe { sys::move_pages(&pointers, None, &mut status) }
                .map_err(|error| PlacementError::syscall("move_pages(query)", error))?;
            for &value in &status {
                if value >= 0 {
                    *histogram.per_node.entry(value as u32).or_default() += 1;
                } else {
                    histogram.unknown += 1;
                    *histogram.unknown_by_errno.entry(-value).or_default() += 1;
                }
            }
        }
        Ok(histogram)
    }

    /// Changes the region's policy and moves the pages already present to comply, preserving their contents.
    /// For `node(n)` the result is verified page by page and stragglers are retried with `move_pages` up to
    /// `MIGRATION_ATTEMPTS_MAX` times; pages never touched stay untouched (they will be placed by the new
    /// policy when first written).
    ///
    /// It takes `&self`: the kernel preserves every page's contents while it moves it, so readers on other
    /// threads see the same bytes before, during and after (they may wait a moment on a page in flight).
    pub fn migrate(&self, policy: Policy) -> Result<MigrationReport, PlacementError> {
        self.migrate_checked(policy, system_topology()?)
    }

    /// As [`Region::migrate`], checking nodes against the given topology.
    pub fn migrate_checked(&self, policy: Policy, topology: &Topology) -> Result<MigrationReport, PlacementError> {
        policy.check(topology)?;
        let before = self.page_locations()?;
        self.apply_policy(&policy, sys::MPOL_MF_MOVE)?;
        *self.policy.lock().unwrap_or_else(|p| p.into_inner()) = policy.clone();
        let mut attempts = 1;
        // `mbind(MPOL_MF_MOVE)` only moves pages that are on a node outside the policy's set: a page on node 0
        // already "complies" with interleave(0-3). So every page whose policy names one node is sent there
        // explicitly, until none is elsewhere.
        let target = self.target_of(&policy);
        if let Some(target) = &target {
            while self.move_stragglers(target)? > 0 {
                if attempts >= MIGRATION_ATTEMPTS_MAX {
                    let after = self.page_locations()?;
                    return Err(PlacementError::MigrationIncomplete {
                        policy,
                        pages: after.pages,
                        misplaced: self.count_misplaced(target)?,
                        attempts,
                    });
                }
                attempts += 1;
                std::thread::sleep(MIGRATION_RETRY_PAUSE);
            }
        }
        let after = self.page_locations()?;
        Ok(MigrationReport { before, after, attempts })
    }

    /// The node each base page must be on under `policy`, when the policy decides it: one node, or interleaved
    /// round-robin over the nodes in units of the region's page granule (2 MiB with huge pages, which move whole).
    fn target_of(&self, policy: &Policy) -> Option<PageTarget> {
        match policy {
            Policy::Node(node) => Some(PageTarget { nodes: vec![*node], pages_per_unit: 1 }),
            Policy::Interleave(nodes) if !nodes.is_empty() => {
                let unit = if self.huge_pages == HugePages::Transparent { HUGE_PAGE_BYTES } else { self.page_size };
                Some(PageTarget { nodes: nodes.iter().collect(), pages_per_unit: (unit / self.page_size).max(1) })
            }
            _ => None,
        }
    }

    /// Each page's node now (negative: not present or unknown), batch by batch.
    fn for_each_page_status(&self, mut visit: impl FnMut(usize, &[*mut u8], &[i32])) -> Result<(), PlacementError> {
        let pages = self.page_count();
        let mut status = Vec::new();
        for first in (0..pages).step_by(PAGES_PER_MOVE_CALL) {
            let count = PAGES_PER_MOVE_CALL.min(pages - first);
            let pointers = self.page_pointers(first, count);
            status.clear();
            status.resize(count, 0);
            // SAFETY: every pointer lies in this region's mapping, which `&self` keeps alive.
            unsafe { sys::move_pages(&pointers, None, &mut status) }
                .map_err(|error| PlacementError::syscall("move_pages(query)", error))?;
            visit(first, &pointers, &status);
        }
        Ok(())
    }

    /// Present pages not on their target node.
    fn count_misplaced(&self, target: &PageTarget) -> Result<usize, PlacementError> {
        let mut misplaced = 0;
        self.for_each_page_status(|first, _, status| {
            misplaced += status
                .iter()
                .enumerate()
                .filter(|&(i, &node)| node >= 0 && node as u32 != target.node(first + i))
                .count();
        })?;
        Ok(misplaced)
    }

    /// Moves every present page that is not on its target node there with `move_pages`; returns how many pages
    /// were misplaced before the move.
    fn move_stragglers(&self, target: &PageTarget) -> Result<usize, PlacementError> {
        let mut moves: Vec<(*mut u8, i32)> = Vec::new();
        self.for_each_page_status(|first, pointers, status| {
            for (i, (&pointer, &node)) in pointers.iter().zip(status).enumerate() {
                let wanted = target.node(first + i);
                if node >= 0 && node as u32 != wanted {
                    moves.push((pointer, wanted as i32));
                }
            }
        })?;
        for batch in moves.chunks(PAGES_PER_MOVE_CALL) {
            let pointers: Vec<*mut u8> = batch.iter().map(|m| m.0).collect();
            let targets: Vec<i32> = batch.iter().map(|m| m.1).collect();
            let mut result = vec![0; batch.len()];
            // SAFETY: the pointers are pages of this region's mapping, which `&self` keeps alive.
            unsafe { sys::move_pages(&pointers, Some(&targets), &mut result) }
                .map_err(|error| PlacementError::syscall("move_pages(move)", error))?;
        }
        Ok(moves.len())
    }

    /// Bytes of transparent huge pages (`AnonHugePages` in `/proc/self/smaps`) in the mappings that hold the
    /// region. Adjacent mappings with identical settings can be merged by the kernel, so this may include a
    /// neighbour's huge pages; it is exact for a region that has no such neighbour.
    pub fn transparent_huge_bytes(&self) -> std::io::Result<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps")?;
        let start = self.start.as_ptr() as usize;
        let end = start + self.length;
        let mut total = 0;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((low, high)) = range.split_once('-')
                && let (Ok(low), Ok(high)) = (usize::from_str_radix(low, 16), usize::from_str_radix(high, 16))
            {
                inside = low < end && high > start;
                continue;
            }
            if inside && let Some(rest) = line.strip_prefix("AnonHugePages:") {
                let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                total += kib * 1024;
            }
        }
        Ok(total)
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by this region and nothing borrows it any more (drop has `&mut self`).
        // An error here could only mean the mapping is already gone; there is nothing useful to do about it.
        let _ = unsafe { sys::unmap(self.mapping_start, self.mapping_length) };
    }
}

/// A typed, NUMA-placed, zero-initialised buffer of `len` values of `T`. Unmapped on drop.
pub struct NumaBuffer<T: bytemuck::Pod> {
    region: Region,
    len: usize,
    element: PhantomData<T>,
}

impl<T: bytemuck::Pod> NumaBuffer<T> {
    /// A buffer of `len` zeroes placed by `policy`.
    pub fn zeroed(len: usize, policy: Policy, huge_pages: HugePages) -> Result<Self, PlacementError> {
        let bytes = len.checked_mul(size_of::<T>()).ok_or_else(|| {
            PlacementError::InvalidPolicy(format!("a buffer of {len} values of {} bytes overflows", size_of::<T>()))
        })?;
        let region = Region::new(bytes, policy, huge_pages)?;
        Ok(Self { region, len, element: PhantomData })
    }

    /// A buffer holding a copy of `values`, placed by `policy` (the copy is written by the calling thread, which
    /// matters only for `FirstTouch`).
    pub fn from_slice(values: &[T], policy: Policy, huge_pages: HugePages) -> Result<Self, PlacementError> {
        let mut buffer = Self::zeroed(values.len(), policy, huge_pages)?;
        buffer.copy_from_slice(values);
        Ok(buffer)
    }

    /// The underlying region (for page queries and migration).
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// The underlying region, mutably.
    pub fn region_mut(&mut self) -> &mut Region {
        &mut self.region
    }
}

impl<T: bytemuck::Pod> std::ops::Deref for NumaBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // The region is page-aligned (so aligned for any `T`) and at least `len * size_of::<T>()` long.
        bytemuck::cast_slice(&self.region.as_slice()[..self.len * size_of::<T>()])
    }
}

impl<T: bytemuck::Pod> std::ops::DerefMut for NumaBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        let bytes = self.len * size_of::<T>();
        bytemuck::cast_slice_mut(&mut self.region.as_mut_slice()[..bytes])
    }
}

impl<T: bytemuck::Pod + std::fmt::Debug> std::fmt::Debug for NumaBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NumaBuffer").field("len", &self.len).field("region", &self.region).finish()
    }
}
