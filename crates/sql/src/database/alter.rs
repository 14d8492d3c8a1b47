//! `ALTER TABLE`'s changes of columns and names: `ADD [COLUMN]`, `DROP [COLUMN]`, `RENAME [COLUMN] a TO b` and
//! `RENAME TO u`, with PostgreSQL's errors. (The placement forms, `NUMA NODE` and `SET (numa_placement = …)`,
//! are numadb's own: `parse.rs` and `Session::alter_placement`.)
//!
//! A table's columns never change in place. Plans, snapshots and writes under way name columns by position,
//! and a table whose columns moved under them would have them read or write the wrong column. The statement
//! makes an altered copy instead ([`Table::alter`]: the chunks of the columns that stay are shared, an added
//! column is a constant per partition), which the catalog puts in the old table's place in one step while the
//! old table's writers' lock is held. Queries holding the old table finish on its snapshot; a write that reaches
//! the old table afterwards finds it retired, having written nothing, and the session runs the statement again
//! against the copy (`Session::run_parsed`), much as PostgreSQL's would have waited for the ALTER's lock and then
//! seen the altered table. Prepared statements plan again, and fail with PostgreSQL's 0A000 where the columns of
//! their result changed (`Session::execute_prepared`).
//!
//! The actions of one statement are all made or none: each is checked against the columns the ones before it
//! leave, and the copy is made once. As in PostgreSQL, which runs them in passes, every DROP comes before every
//! ADD (`DROP COLUMN a, ADD COLUMN a text` replaces a column; `ADD COLUMN a int, DROP COLUMN a` finds no `a` to
//! drop), and a RENAME is a statement of its own.
//!
//! Views are kept as their query's text and planned where they are read, so which columns a view depends on is
//! not recorded: a change that makes a view plan differently, or not at all, is found by planning it against the
//! altered table. For DROP COLUMN such a view is a dependent object, as in PostgreSQL (2BP01, or dropped with
//! CASCADE); PostgreSQL's views follow a rename, which numadb's text could only do by rewriting the view, so a
//! rename that a view would notice is refused (0A000), and so is an added column that would make a view's
//! column names ambiguous. A view's `SELECT *` takes the columns its tables have when it is read (see
//! `view.rs`), so an added column shows in it.

use std::sync::Arc;

use numadb_execution::{ExecError, sqlstate};
use numadb_storage::{ColumnChange, ColumnDef, Replaced, Table, TableOptions};
use sqlparser::ast::{self, AlterTableOperation, ObjectName};

use super::{QueryOutput, Session, TABLE_COLUMNS_MAX, table_name, undefined_table, unsupported};
use crate::bind::{Binder, TableSource, fold, object_name};

/// A DROP COLUMN of the statement: the column, whether CASCADE drops the views that depend on it.
struct DroppedColumn {
    column: String,
    cascade: bool,
}

impl Session {
    /// `ALTER TABLE [IF EXISTS] t action [, …]` for ADD COLUMN, DROP COLUMN and the RENAME forms.
    pub(super) fn alter_table(&mut self, alter: &ast::AlterTable) -> Result<QueryOutput, ExecError> {
        if alter.table_type.is_some() || alter.location.is_some() || alter.on_cluster.is_some() {
            return Err(unsupported("this ALTER TABLE form"));
        }
        // `ONLY` changes nothing: numadb has no inheritance.
        if let [schema, _] = object_name(&alter.name).as_slice()
            && schema != "public"
        {
            return Err(ExecError::new(sqlstate::WRONG_OBJECT_TYPE, format!("\"{}\" is not a table", alter.name)));
        }
        let name = table_name(&alter.name)?;
        let Some(table) = self.db.catalog.table(&name) else {
            if alter.if_exists && !self.db.views.contains(&name) {
                self.notices.push(format!("relation \"{name}\" does not exist, skipping"));
                return Ok(QueryOutput::command("ALTER TABLE"));
            }
            return Err(self.db.missing_table(&name));
        };
        let rename = alter
            .operations
            .iter()
            .any(|op| matches!(op, AlterTableOperation::RenameColumn { .. } | AlterTableOperation::RenameTable { .. }));
        if rename && alter.operations.len() > 1 {
            return Err(ExecError::new(
                sqlstate::SYNTAX_ERROR,
                "syntax error: RENAME cannot be combined with other ALTER TABLE actions",
            ));
        }
        match alter.operations.as_slice() {
            [AlterTableOperation::RenameTable { table_name: new_name }] => self.rename_table(&table, new_name),
            [AlterTableOperation::RenameColumn { old_column_name, new_column_name }] => {
                self.rename_column(&table, &fold(old_column_name), &fold(new_column_name))
            }
            operations => self.change_columns(&table, operations),
        }
    }

    /// ADD COLUMN and DROP COLUMN actions, drops first.
    fn change_columns(
        &mut self,
        table: &Arc<Table>,
        operations: &[AlterTableOperation],
    ) -> Result<QueryOutput, ExecError> {
        let mut adds = Vec::new();
        let mut drops = Vec::new();
        for operation in operations {
            match operation {
                AlterTableOperation::AddColumn { if_not_exists, column_def, column_position, .. } => {
                    if let Some(position) = column_position {
                        return Err(ExecError::new(
                            sqlstate::SYNTAX_ERROR,
                            format!("syntax error at or near \"{position}\""),
                        ));
                    }
                    adds.push((column_def, *if_not_exists));
                }
                AlterTableOperation::DropColumn { column_names, if_exists, drop_behavior, .. } => {
                    let [column] = column_names.as_slice() else {
                        return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "syntax error at or near \",\""));
                    };
                    drops.push((fold(column), *if_exists, matches!(drop_behavior, Some(ast::DropBehavior::Cascade))));
                }
                other => {
                    let text = other.to_string();
                    let words: Vec<&str> = text.split_whitespace().take(2).collect();
                    return Err(unsupported(&format!("ALTER TABLE … {}", words.join(" "))));
                }
            }
        }
        let mut columns: Vec<ColumnDef> = table.columns().to_vec();
        let mut primary_key = table.primary_key();
        let mut changes = Vec::new();
        let mut dropped = Vec::new();
        for (column, if_exists, cascade) in drops {
            let Some(position) = columns.iter().position(|c| c.name == column) else {
                if if_exists {
                    self.notices
                        .push(format!("column \"{column}\" of relation \"{}\" does not exist, skipping", table.name()));
                    continue;
                }
                return Err(ExecError::new(
                    sqlstate::UNDEFINED_COLUMN,
                    format!("column \"{column}\" of relation \"{}\" does not exist", table.name()),
                ));
            };
            columns.remove(position);
            primary_key = primary_key.filter(|&key| key != position).map(|key| key - usize::from(key > position));
            changes.push(ColumnChange::Drop(position));
            dropped.push(DroppedColumn { column, cascade });
        }
        for (column, if_not_exists) in adds {
            let (definition, primary) = self.column_definition(column)?;
            if primary && primary_key.is_some() {
                return Err(ExecError::new(
                    sqlstate::INVALID_TABLE_DEFINITION,
                    format!("multiple primary keys for table \"{}\" are not allowed", table.name()),
                ));
            }
            if primary {
                return Err(unsupported("ADD COLUMN … PRIMARY KEY")
                    .with_hint("Add the column, fill it, then CREATE UNIQUE INDEX on it."));
            }
            if columns.iter().any(|c| c.name == definition.name) {
                if if_not_exists {
                    self.notices.push(format!(
                        "column \"{}\" of relation \"{}\" already exists, skipping",
                        definition.name,
                        table.name()
                    ));
                    continue;
                }
                return Err(ExecError::new(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{}\" of relation \"{}\" already exists", definition.name, table.name()),
                ));
            }
            if columns.len() >= TABLE_COLUMNS_MAX {
                return Err(ExecError::new(
                    sqlstate::TOO_MANY_COLUMNS,
                    format!("tables can have at most {TABLE_COLUMNS_MAX} columns"),
                ));
            }
            changes.push(ColumnChange::Add { value: definition.default_value(), definition: definition.clone() });
            columns.push(definition);
        }
        if changes.is_empty() {
            return Ok(QueryOutput::command("ALTER TABLE"));
        }
        if columns.is_empty() {
            // PostgreSQL allows a table of no columns (its rows are still counted); numadb counts a table's rows
            // by its columns' values.
            return Err(unsupported(&format!("dropping every column of table \"{}\"", table.name()))
                .with_hint("Drop the table instead, or add a column in the same statement."));
        }
        let views = self.views_dropped_with(table, &columns, primary_key, &dropped)?;
        self.install(table, table.name(), &changes, &views)
    }

    /// The views a statement's drops take with them (CASCADE): those that plan differently, or not at all, once
    /// the table has `columns`, and the views that read them. A view that depends on a column dropped without
    /// CASCADE is PostgreSQL's 2BP01; a view that only the statement's added columns break is refused.
    fn views_dropped_with(
        &self,
        table: &Table,
        columns: &[ColumnDef],
        primary_key: Option<usize>,
        dropped: &[DroppedColumn],
    ) -> Result<Vec<String>, ExecError> {
        let affected = self.views_affected(table, table.name(), columns, primary_key)?;
        if affected.is_empty() {
            return Ok(Vec::new());
        }
        let mut taken: Vec<String> = Vec::new();
        for gone in dropped {
            let position = table.column_index(&gone.column).unwrap_or(usize::MAX);
            let mut alone: Vec<ColumnDef> = table.columns().to_vec();
            alone.retain(|c| c.name != gone.column);
            let key = table.primary_key().filter(|&k| k != position).map(|k| k - usize::from(k > position));
            let dependents: Vec<String> = self
                .views_affected(table, table.name(), &alone, key)?
                .into_iter()
                .map(|(view, _)| view)
                .filter(|view| !taken.contains(view))
                .collect();
            if dependents.is_empty() {
                continue;
            }
            if !gone.cascade {
                return Err(dependent_views(&self.db.views, &gone.column, table.name(), &dependents));
            }
            taken.extend(dependents);
        }
        // What no drop changes alone: the drops together, or the added columns.
        for (view, broken) in affected {
            if taken.contains(&view) {
                continue;
            }
            if dropped.is_empty() {
                if broken {
                    return Err(view_would_change(&view, table.name()));
                }
                // An added column in a view's `SELECT *`: views take their tables' columns as they are read.
                continue;
            }
            match dropped.iter().find(|d| !d.cascade) {
                Some(restricted) => {
                    return Err(dependent_views(&self.db.views, &restricted.column, table.name(), &[view]));
                }
                None => taken.push(view),
            }
        }
        let mut views = taken.clone();
        for view in &taken {
            for reader in self.db.views.dependents_closure(view) {
                if !views.contains(&reader) {
                    views.push(reader);
                }
            }
        }
        Ok(views)
    }

    /// `ALTER TABLE t RENAME [COLUMN] from TO to`.
    fn rename_column(&mut self, table: &Arc<Table>, from: &str, to: &str) -> Result<QueryOutput, ExecError> {
        let position = table
            .column_index(from)
            .ok_or_else(|| ExecError::new(sqlstate::UNDEFINED_COLUMN, format!("column \"{from}\" does not exist")))?;
        if table.column_index(to).is_some() {
            return Err(ExecError::new(
                sqlstate::DUPLICATE_COLUMN,
                format!("column \"{to}\" of relation \"{}\" already exists", table.name()),
            ));
        }
        let mut columns = table.columns().to_vec();
        columns[position].name = to.to_string();
        if let Some((view, _)) = self.views_affected(table, table.name(), &columns, table.primary_key())?.first() {
            return Err(view_would_change(view, table.name()));
        }
        self.install(table, table.name(), &[ColumnChange::Rename(position, to.to_string())], &[])
    }

    /// `ALTER TABLE t RENAME TO u`.
    fn rename_table(
        &mut self,
        table: &Arc<Table>,
        new_name: &ast::RenameTableNameKind,
    ) -> Result<QueryOutput, ExecError> {
        let ast::RenameTableNameKind::To(new_name) = new_name else {
            return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "syntax error at or near \"AS\""));
        };
        let parts = object_name(new_name);
        let [new_name] = parts.as_slice() else {
            return Err(ExecError::new(sqlstate::SYNTAX_ERROR, "syntax error at or near \".\""));
        };
        if *new_name == table.name() || self.db.catalog.table(new_name).is_some() || self.db.views.contains(new_name) {
            return Err(ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{new_name}\" already exists")));
        }
        if let Some(view) = self.db.views.dependents(table.name()).first() {
            return Err(view_would_change(view, table.name()));
        }
        self.install(table, new_name, &[], &[])
    }

    /// Makes the altered copy of `table` and puts it in the catalog in the table's place, dropping `views`.
    fn install(
        &mut self,
        table: &Arc<Table>,
        name: &str,
        changes: &[ColumnChange],
        views: &[String],
    ) -> Result<QueryOutput, ExecError> {
        table.alter(name, changes, |altered| {
            self.db.catalog.replace(table.name(), table, altered).map_err(|why| match why {
                Replaced::Gone => undefined_table(table.name()),
                Replaced::NameTaken => {
                    ExecError::new(sqlstate::DUPLICATE_TABLE, format!("relation \"{name}\" already exists"))
                }
            })?;
            for view in views {
                self.db.views.remove(view);
            }
            Ok::<_, ExecError>(())
        })?;
        Ok(QueryOutput::command("ALTER TABLE"))
    }

    /// The views that read `table` (directly or through other views) and plan differently once it is called
    /// `name` and has `columns`, each with whether it would not plan at all (else its columns change). A view that
    /// does not plan now is left out: nothing the statement does breaks it.
    fn views_affected(
        &self,
        table: &Table,
        name: &str,
        columns: &[ColumnDef],
        primary_key: Option<usize>,
    ) -> Result<Vec<(String, bool)>, ExecError> {
        let readers = self.db.views.dependents_closure(table.name());
        if readers.is_empty() || columns.is_empty() {
            return Ok(Vec::new());
        }
        // Planning needs the columns, not the rows.
        let options = TableOptions { partition_rows: table.partition_rows(), ..TableOptions::default() };
        let altered = Altered {
            db: &self.db,
            old_name: table.name(),
            table: Arc::new(Table::new(name, columns.to_vec(), primary_key, options)?),
        };
        let mut affected = Vec::new();
        for reader in readers {
            let Some(view) = self.db.views.get(&reader) else { continue };
            let Ok(before) = Binder::without_params(self.db.as_ref()).plan_query(&view.query) else { continue };
            match Binder::without_params(&altered).plan_query(&view.query) {
                Err(_) => affected.push((reader, true)),
                Ok(after) if after.columns != before.columns => affected.push((reader, false)),
                Ok(_) => {}
            }
        }
        Ok(affected)
    }
}

/// The catalog as it will be once a table is altered, for planning the views that read it.
struct Altered<'a> {
    db: &'a super::Database,
    old_name: &'a str,
    table: Arc<Table>,
}

impl TableSource for Altered<'_> {
    fn resolve(&self, name: &ObjectName) -> Result<Arc<Table>, ExecError> {
        let parts = object_name(name);
        let local = match parts.as_slice() {
            [table] => Some(table.as_str()),
            [schema, table] if schema == "public" => Some(table.as_str()),
            _ => None,
        };
        if local == Some(self.table.name()) {
            return Ok(Arc::clone(&self.table));
        }
        if local == Some(self.old_name) {
            return Err(undefined_table(self.old_name));
        }
        self.db.resolve(name)
    }

    fn view(&self, name: &str) -> Option<Arc<crate::view::View>> {
        self.db.view(name)
    }
}

/// PostgreSQL's 2BP01 for dropping a column that `views` depend on (those that read the table, and those that
/// read them).
fn dependent_views(all: &crate::view::Views, column: &str, table: &str, views: &[String]) -> ExecError {
    let detail: Vec<String> = views
        .iter()
        .map(|v| {
            let reads = all.get(v).map(|view| view.reads.clone()).unwrap_or_default();
            match reads.iter().find(|read| views.contains(read)) {
                Some(through) if !reads.iter().any(|read| read == table) => {
                    format!("view {v} depends on view {through}")
                }
                _ => format!("view {v} depends on column {column} of table {table}"),
            }
        })
        .collect();
    ExecError::new(
        sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
        format!("cannot drop column {column} of table {table} because other objects depend on it"),
    )
    .with_detail(detail.join("\n"))
    .with_hint("Use DROP ... CASCADE to drop the dependent objects too.")
}

/// The refusal of a change that a view reading the table would notice (a rename, or an added column that makes
/// its names ambiguous): PostgreSQL's views follow such changes, numadb's are their query's text.
fn view_would_change(view: &str, table: &str) -> ExecError {
    ExecError::new(
        sqlstate::FEATURE_NOT_SUPPORTED,
        format!("cannot alter table \"{table}\" in a way that view \"{view}\" would notice"),
    )
    .with_detail("numadb keeps a view as the text of its query, which would read the table differently or not at all.")
    .with_hint("Drop the view, alter the table, and create the view again.")
}
