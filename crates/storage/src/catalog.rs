//! The catalog: tables by name.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::table::Table;

/// All tables of a database. Names are stored exactly as the SQL layer resolved them (folded to lower case
/// unless quoted).
#[derive(Default)]
pub struct Catalog {
    tables: RwLock<BTreeMap<String, Arc<Table>>>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    /// A table by name.
    pub fn table(&self, name: &str) -> Option<Arc<Table>> {
        self.tables.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// Adds a table; `false` when the name is taken.
    pub fn add(&self, table: Table) -> bool {
        let mut tables = self.tables.write().unwrap_or_else(|p| p.into_inner());
        if tables.contains_key(table.name()) {
            return false;
        }
        tables.insert(table.name().to_string(), Arc::new(table));
        true
    }

    /// Removes a table; returns it.
    pub fn remove(&self, name: &str) -> Option<Arc<Table>> {
        self.tables.write().unwrap_or_else(|p| p.into_inner()).remove(name)
    }

    /// All tables, by name.
    pub fn tables(&self) -> Vec<Arc<Table>> {
        self.tables.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }
}
