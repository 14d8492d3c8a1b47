//! Storage: tables of typed columns, split into NUMA-placed partitions, with compressed encodings and indexes.

pub mod bitpack;
