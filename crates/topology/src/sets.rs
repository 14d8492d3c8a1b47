//! Sets of CPU and node ids in the kernel's list syntax (`0-3,8,10-11`).
//!
//! sysfs and `/proc/self/status` describe CPU and node sets either as lists (`cpulist`, `Mems_allowed_list`) or as
//! comma-separated 32-bit hex words (`cpumap`, `Mems_allowed`). Both parse into one small sorted set type. Ids are
//! `u32` because the kernel's ids are small non-negative integers; a set is stored as a sorted, deduplicated vector
//! because the sets here are small (at most a few thousand CPUs) and are read far more often than they change.

use std::fmt;
use std::marker::PhantomData;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Marker for the kind of id a set holds, so a CPU set cannot be passed where a node set is expected.
pub trait IdKind: Copy + Eq + Ord + fmt::Debug + Default {
    /// Word used in messages ("cpu", "node").
    const NOUN: &'static str;
}

/// CPU (hardware thread) ids, as Linux numbers them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default, Hash)]
pub struct CpuKind;
impl IdKind for CpuKind {
    const NOUN: &'static str = "cpu";
}

/// NUMA node ids, as Linux numbers them.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default, Hash)]
pub struct NodeKind;
impl IdKind for NodeKind {
    const NOUN: &'static str = "node";
}

/// A sorted set of ids of one kind.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct IdSet<K: IdKind> {
    ids: Vec<u32>,
    kind: PhantomData<K>,
}

/// A set of CPU ids.
pub type CpuSet = IdSet<CpuKind>;
/// A set of NUMA node ids.
pub type NodeSet = IdSet<NodeKind>;

/// Why a list or mask string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} in {text:?}")]
pub struct SetParseError {
    /// The text that failed to parse (trimmed).
    pub text: String,
    /// What was wrong with it.
    pub message: String,
}

/// Upper bound on any id we accept from text: the kernel's `NR_CPUS` maximum is 8192 and `MAX_NUMNODES` 1024, so
/// a larger number means the file is corrupt, and accepting it would let a range like `0-4294967295` allocate
/// gigabytes.
pub const MAX_ID: u32 = 1 << 16;

impl<K: IdKind> IdSet<K> {
    /// The empty set.
    pub fn new() -> Self {
        Self { ids: Vec::new(), kind: PhantomData }
    }

    /// A set from any ids (duplicates are removed).
    pub fn from_ids(ids: impl IntoIterator<Item = u32>) -> Self {
        let mut ids: Vec<u32> = ids.into_iter().collect();
        ids.sort_unstable();
        ids.dedup();
        Self { ids, kind: PhantomData }
    }

    /// Parses the kernel's list syntax: comma-separated ids and inclusive ranges, e.g. `0-3,8,10-11`.
    /// An empty (or all-whitespace) string is the empty set, as sysfs writes for a node without CPUs.
    pub fn parse_list(text: &str) -> Result<Self, SetParseError> {
        let trimmed = text.trim();
        let error = |message: String| SetParseError { text: trimmed.to_string(), message };
        let mut ids = Vec::new();
        if trimmed.is_empty() {
            return Ok(Self::new());
        }
        for part in trimmed.split(',') {
            let part = part.trim();
            // The kernel also accepts `a-b:stride/group`; sysfs never writes it, so reject it clearly.
            let (low_text, high_text) = match part.split_once('-') {
                Some((low, high)) => (low, high),
                None => (part, part),
            };
            let parse_id = |t: &str| -> Result<u32, SetParseError> {
                let id: u32 = t.trim().parse().map_err(|_| error(format!("{:?} is not a {} id", t.trim(), K::NOUN)))?;
                if id >= MAX_ID {
                    return Err(error(format!("{} id {id} is larger than {}", K::NOUN, MAX_ID - 1)));
                }
                Ok(id)
            };
            let low = parse_id(low_text)?;
            let high = parse_id(high_text)?;
            if high < low {
                return Err(error(format!("range {low}-{high} runs backwards")));
            }
            ids.extend(low..=high);
        }
        Ok(Self::from_ids(ids))
    }

    /// Parses the kernel's mask syntax: comma-separated 32-bit hex words, most significant first
    /// (`00000000,00000003` is ids 0 and 1), as in `cpumap` and `Cpus_allowed`.
    pub fn parse_mask(text: &str) -> Result<Self, SetParseError> {
        let trimmed = text.trim();
        let error = |message: String| SetParseError { text: trimmed.to_string(), message };
        let words: Vec<&str> = trimmed.split(',').collect();
        let mut ids = Vec::new();
        for (index_from_low, word) in words.iter().rev().enumerate() {
            let value = u32::from_str_radix(word.trim(), 16)
                .map_err(|_| error(format!("{:?} is not a 32-bit hex word", word.trim())))?;
            for bit in 0..32u32 {
                if value & (1 << bit) != 0 {
                    let id = index_from_low as u64 * 32 + u64::from(bit);
                    if id >= u64::from(MAX_ID) {
                        return Err(error(format!("{} id {id} is larger than {}", K::NOUN, MAX_ID - 1)));
                    }
                    ids.push(id as u32);
                }
            }
        }
        Ok(Self::from_ids(ids))
    }

    /// The ids in ascending order.
    pub fn ids(&self) -> &[u32] {
        &self.ids
    }

    /// Iterates the ids in ascending order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + ExactSizeIterator + '_ {
        self.ids.iter().copied()
    }

    /// Number of ids.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the set has no ids.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        self.ids.binary_search(&id).is_ok()
    }

    /// The smallest id, if any.
    pub fn first(&self) -> Option<u32> {
        self.ids.first().copied()
    }

    /// The largest id, if any.
    pub fn last(&self) -> Option<u32> {
        self.ids.last().copied()
    }

    /// Adds an id.
    pub fn insert(&mut self, id: u32) {
        if let Err(position) = self.ids.binary_search(&id) {
            self.ids.insert(position, id);
        }
    }

    /// Ids in both sets.
    pub fn intersection(&self, other: &Self) -> Self {
        Self { ids: self.iter().filter(|&id| other.contains(id)).collect(), kind: PhantomData }
    }

    /// Ids in either set.
    pub fn union(&self, other: &Self) -> Self {
        Self::from_ids(self.iter().chain(other.iter()))
    }

    /// Ids in `self` but not in `other`.
    pub fn difference(&self, other: &Self) -> Self {
        Self { ids: self.iter().filter(|&id| !other.contains(id)).collect(), kind: PhantomData }
    }

    /// Whether every id of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.iter().all(|id| other.contains(id))
    }

    /// The kernel's list syntax (`0-3,8`); the empty set is the empty string.
    pub fn to_list_string(&self) -> String {
        let mut out = String::new();
        let mut index = 0;
        while index < self.ids.len() {
            let start = self.ids[index];
            let mut end = start;
            while index + 1 < self.ids.len() && self.ids[index + 1] == end + 1 {
                index += 1;
                end = self.ids[index];
            }
            if !out.is_empty() {
                out.push(',');
            }
            if start == end {
                out.push_str(&start.to_string());
            } else {
                out.push_str(&format!("{start}-{end}"));
            }
            index += 1;
        }
        out
    }
}

impl<K: IdKind> fmt::Debug for IdSet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s[{}]", K::NOUN, self.to_list_string())
    }
}

/// Displays in list syntax, or `none` for the empty set so that messages never show an empty gap.
impl<K: IdKind> fmt::Display for IdSet<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ids.is_empty() { f.write_str("none") } else { f.write_str(&self.to_list_string()) }
    }
}

impl<K: IdKind> FromIterator<u32> for IdSet<K> {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        Self::from_ids(iter)
    }
}

impl<'a, K: IdKind> IntoIterator for &'a IdSet<K> {
    type Item = u32;
    type IntoIter = std::iter::Copied<std::slice::Iter<'a, u32>>;
    fn into_iter(self) -> Self::IntoIter {
        self.ids.iter().copied()
    }
}

/// Serialised as a JSON array of ids: easy for machines, and `jq` users can format it themselves.
impl<K: IdKind> Serialize for IdSet<K> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.ids.serialize(serializer)
    }
}

impl<'de, K: IdKind> Deserialize<'de> for IdSet<K> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ids = Vec::<u32>::deserialize(deserializer)?;
        if let Some(&bad) = ids.iter().find(|&&id| id >= MAX_ID) {
            return Err(serde::de::Error::custom(format!("{} id {bad} is larger than {}", K::NOUN, MAX_ID - 1)));
        }
        Ok(Self::from_ids(ids))
    }
}

impl<K: IdKind> JsonSchema for IdSet<K> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        format!("{}_ids", K::NOUN).into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = <Vec<u32>>::json_schema(generator);
        schema.insert("description".into(), format!("Sorted {} ids without duplicates.", K::NOUN).into());
        schema.insert("uniqueItems".into(), true.into());
        schema
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_syntax_round_trips() {
        for text in ["", "0", "0-3", "0-3,8,10-11", "1,3,5", "0-63,128-191"] {
            let set = CpuSet::parse_list(text).unwrap();
            assert_eq!(set.to_list_string(), text);
        }
        assert_eq!(CpuSet::parse_list(" 0-1\n").unwrap().ids(), &[0, 1]);
        assert_eq!(CpuSet::parse_list("3,1-2,2").unwrap().to_list_string(), "1-3");
    }

    #[test]
    fn list_syntax_rejects_garbage_with_a_message() {
        let error = CpuSet::parse_list("0-3,x").unwrap_err();
        assert!(error.to_string().contains("\"x\" is not a cpu id"), "{error}");
        let error = NodeSet::parse_list("5-2").unwrap_err();
        assert!(error.to_string().contains("runs backwards"), "{error}");
        let error = CpuSet::parse_list("0-4294967295").unwrap_err();
        assert!(error.to_string().contains("larger than"), "{error}");
        assert!(CpuSet::parse_list("1-2-3").is_err());
        assert!(CpuSet::parse_list(",").is_err());
    }

    #[test]
    fn mask_syntax_is_most_significant_word_first() {
        assert_eq!(CpuSet::parse_mask("00000000,00000003").unwrap().ids(), &[0, 1]);
        assert_eq!(CpuSet::parse_mask("00000001,80000000").unwrap().ids(), &[31, 32]);
        assert_eq!(NodeSet::parse_mask("0000000f\n").unwrap().to_list_string(), "0-3");
        assert!(CpuSet::parse_mask("zz").is_err());
    }

    #[test]
    fn set_algebra() {
        let a = CpuSet::parse_list("0-5").unwrap();
        let b = CpuSet::parse_list("4-9").unwrap();
        assert_eq!(a.intersection(&b).to_list_string(), "4-5");
        assert_eq!(a.union(&b).to_list_string(), "0-9");
        assert_eq!(a.difference(&b).to_list_string(), "0-3");
        assert!(a.intersection(&b).is_subset(&a));
        assert!(!a.is_subset(&b));
        assert_eq!(CpuSet::new().to_string(), "none");
    }

    #[test]
    fn json_is_an_array_and_rejects_huge_ids() {
        let set = NodeSet::parse_list("0,2-3").unwrap();
        assert_eq!(serde_json::to_string(&set).unwrap(), "[0,2,3]");
        let back: NodeSet = serde_json::from_str("[3,0,2,2]").unwrap();
        assert_eq!(back, set);
        assert!(serde_json::from_str::<NodeSet>("[99999999]").is_err());
    }
}
