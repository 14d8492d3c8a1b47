//! The two facts every sample rests on, checked rather than assumed: the buffer is on the node the matrix says,
//! and the thread stayed on its CPU.

use std::collections::BTreeMap;

use numadb_placement::{PageHistogram, PlacementError, current_cpu};
use serde::{Deserialize, Serialize};

/// What the kernel says about where a buffer's pages are, against the node they were bound to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlacementCheck {
    /// The node the buffer was bound to.
    pub node: u32,
    /// Base pages queried.
    pub pages: usize,
    /// Pages on `node`.
    pub on_node: usize,
    /// Pages on other nodes, by node.
    pub elsewhere: BTreeMap<u32, usize>,
    /// Pages whose location the kernel could not say (not present, or in flux under NUMA balancing).
    pub unknown: usize,
    /// The verdict.
    pub verdict: PlacementVerdict,
}

/// Whether a buffer is where the matrix says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlacementVerdict {
    /// Every page is on the node.
    Verified,
    /// No page is elsewhere, but some could not be located (unknown is not wrong; it is not proof either).
    PartlyUnknown,
    /// Some pages are on another node: the measurement is not of the cell it claims to be.
    Wrong,
}

impl PlacementCheck {
    /// Judges a page histogram against the node the buffer was bound to.
    pub fn judge(histogram: &PageHistogram, node: u32) -> PlacementCheck {
        let on_node = histogram.on_node(node);
        let elsewhere: BTreeMap<u32, usize> =
            histogram.per_node.iter().filter(|&(&n, &count)| n != node && count > 0).map(|(&n, &c)| (n, c)).collect();
        let verdict = if !elsewhere.is_empty() {
            PlacementVerdict::Wrong
        } else if histogram.unknown > 0 || on_node < histogram.pages {
            PlacementVerdict::PartlyUnknown
        } else {
            PlacementVerdict::Verified
        };
        PlacementCheck { node, pages: histogram.pages, on_node, elsewhere, unknown: histogram.unknown, verdict }
    }

    /// Whether every page is on the node.
    pub fn is_verified(&self) -> bool {
        self.verdict == PlacementVerdict::Verified
    }

    /// `verified: 262144/262144 pages on node 0` or what went wrong.
    pub fn describe(&self) -> String {
        match self.verdict {
            PlacementVerdict::Verified => {
                format!("verified: {}/{} pages on node {}", self.on_node, self.pages, self.node)
            }
            PlacementVerdict::PartlyUnknown => format!(
                "{}/{} pages on node {}, {} not locatable (none elsewhere)",
                self.on_node, self.pages, self.node, self.unknown
            ),
            PlacementVerdict::Wrong => {
                let elsewhere: Vec<String> = self.elsewhere.iter().map(|(n, c)| format!("{c} on node {n}")).collect();
                format!(
                    "WRONG NODE: {}/{} pages on node {}, {}",
                    self.on_node,
                    self.pages,
                    self.node,
                    elsewhere.join(", ")
                )
            }
        }
    }
}

/// Where a sample's thread was before and after the sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuWitness {
    /// The CPU before.
    pub before: u32,
    /// The CPU after.
    pub after: u32,
}

impl CpuWitness {
    /// Whether the thread was on `cpu` at both ends.
    pub fn stayed_on(&self, cpu: u32) -> bool {
        self.before == cpu && self.after == cpu
    }
}

/// Runs `sample` and records the CPU (`getcpu`) just before and just after it. A thread pinned to one CPU cannot
/// move, so a witness that disagrees with the pinning means the pinning failed (a cpuset changed under us) and the
/// sample is discarded.
pub fn witnessed<T>(sample: impl FnOnce() -> T) -> Result<(T, CpuWitness), PlacementError> {
    let before = current_cpu()?.cpu;
    let value = sample();
    let after = current_cpu()?.cpu;
    Ok((value, CpuWitness { before, after }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(per_node: &[(u32, usize)], unknown: usize) -> PageHistogram {
        let pages = per_node.iter().map(|(_, c)| c).sum::<usize>() + unknown;
        PageHistogram {
            pages,
            page_size_bytes: 4096,
            per_node: per_node.iter().copied().collect(),
            unknown,
            unknown_by_errno: Default::default(),
        }
    }

    #[test]
    fn every_page_on_the_node_is_verified() {
        let check = PlacementCheck::judge(&histogram(&[(2, 512)], 0), 2);
        assert_eq!(check.verdict, PlacementVerdict::Verified);
        assert!(check.is_verified());
        assert_eq!(check.describe(), "verified: 512/512 pages on node 2");
    }

    #[test]
    fn a_page_on_another_node_is_wrong() {
        let check = PlacementCheck::judge(&histogram(&[(2, 511), (0, 1)], 0), 2);
        assert_eq!(check.verdict, PlacementVerdict::Wrong);
        assert_eq!(check.elsewhere, BTreeMap::from([(0, 1)]));
        assert!(check.describe().contains("WRONG NODE"), "{}", check.describe());
        // A buffer entirely on the wrong node.
        assert_eq!(PlacementCheck::judge(&histogram(&[(1, 512)], 0), 2).verdict, PlacementVerdict::Wrong);
    }

    #[test]
    fn unknown_pages_are_not_wrong_but_not_verified() {
        let check = PlacementCheck::judge(&histogram(&[(2, 500)], 12), 2);
        assert_eq!(check.verdict, PlacementVerdict::PartlyUnknown);
        assert!(!check.is_verified());
        // Unknown pages plus a misplaced one: wrong wins.
        assert_eq!(PlacementCheck::judge(&histogram(&[(2, 500), (3, 1)], 11), 2).verdict, PlacementVerdict::Wrong);
    }

    #[test]
    fn a_witness_that_moved_is_caught() {
        assert!(CpuWitness { before: 3, after: 3 }.stayed_on(3));
        assert!(!CpuWitness { before: 3, after: 4 }.stayed_on(3));
        assert!(!CpuWitness { before: 2, after: 3 }.stayed_on(3));
        let (value, witness) = witnessed(|| 7).unwrap();
        assert_eq!(value, 7);
        let _ = witness;
    }
}
