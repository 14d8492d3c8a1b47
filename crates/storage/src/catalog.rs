//! The catalog: tables by name.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::table::Table;

/// Why [`Catalog::replace`] did not replace a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replaced {
    /// The old table is no longer in the catalog under its name (dropped, or itself replaced).
    Gone,
    /// Another table has the new name.
    NameTaken,
}

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

    /// Puts `new` in the place of `old`, which must still be the table called `old_name` (else
    /// [`Replaced::Gone`]); under a new name, that name must be free ([`Replaced::NameTaken`]). In one step, so
    /// no statement finds both tables or neither.
    pub fn replace(&self, old_name: &str, old: &Arc<Table>, new: Table) -> Result<Arc<Table>, Replaced> {
        let mut tables = self.tables.write().unwrap_or_else(|p| p.into_inner());
        if !tables.get(old_name).is_some_and(|current| Arc::ptr_eq(current, old)) {
            return Err(Replaced::Gone);
        }
        if new.name() != old_name && tables.contains_key(new.name()) {
            return Err(Replaced::NameTaken);
        }
        tables.remove(old_name);
        let new = Arc::new(new);
        tables.insert(new.name().to_string(), Arc::clone(&new));
        Ok(new)
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
