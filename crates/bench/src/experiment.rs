//! Experiment matrices: the thesis's knobs (placement, worker layout, stealing, binding, domain granularity)
//! crossed with its workloads (random access; aggregation at every skew and range predicate), described in a TOML
//! file, run by the driver, and collected into one result set.
//!
//! ```toml
//! name = "skew"
//! rows = 5000000                 # per table
//! connections = 56
//! warmup_seconds = 1
//! queries_per_connection = 512   # or: duration_seconds = 10
//!
//! [[workload]]
//! kind = "aggregation"           # or "random_access"
//! range_pred = [10000, 100000, 1000000]
//! skew = [0, 3, 6]
//!
//! [[configuration]]
//! name = "each table on its own node, neighbour stealing"
//! stealing = "neighbor"          # off | neighbor | neighbor(D) | any, optionally +batch
//! binding = "opportunistic"      # none | preferred | opportunistic | always
//! workers = "all"                # all | half | domain(N) | cpus(LIST)
//! domains = "node"               # node | package | l3 | machine
//! placement = { TBL_0 = "node(0)", TBL_1 = "node(1)" }
//! ```
//!
//! Placement changes between configurations are made with `ALTER TABLE … SET (numa_placement = …)`: the tables are
//! loaded once and their pages migrated, which is also what a user of the system would do.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use numadb_scheduler::ByteMatrix;
use numadb_sql::Database;
use serde::{Deserialize, Serialize};

use crate::Machine;
use crate::driver::{self, RunResult, RunSpec, Stop, Target, Workload};

/// An experiment file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    /// A name for reports.
    #[serde(default = "default_name")]
    pub name: String,
    /// Rows per thesis table.
    #[serde(default = "default_rows")]
    pub rows: u64,
    /// Client connections (the thesis: 56).
    #[serde(default = "default_connections")]
    pub connections: usize,
    /// Unmeasured seconds before each cell.
    #[serde(default = "default_warmup")]
    pub warmup_seconds: f64,
    /// Measured seconds per cell (or use `queries_per_connection`).
    pub duration_seconds: Option<f64>,
    /// Queries per connection per cell (the thesis: 512).
    pub queries_per_connection: Option<u64>,
    /// Seed of data and keys.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Workloads.
    #[serde(rename = "workload", default)]
    pub workloads: Vec<WorkloadSpec>,
    /// Configurations.
    #[serde(rename = "configuration", default)]
    pub configurations: Vec<Configuration>,
}

fn default_name() -> String {
    "experiment".into()
}
fn default_rows() -> u64 {
    5_000_000
}
fn default_connections() -> usize {
    56
}
fn default_warmup() -> f64 {
    1.0
}
fn default_seed() -> u64 {
    42
}

/// A workload of a matrix.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadSpec {
    /// `random_access` or `aggregation`.
    pub kind: String,
    /// Aggregation: the range predicates.
    #[serde(default)]
    pub range_pred: Vec<u64>,
    /// Aggregation: predicates on TBL_0 (0-6).
    #[serde(default)]
    pub skew: Vec<u32>,
}

/// A configuration of a matrix.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Configuration {
    /// A name for reports.
    pub name: String,
    /// `numadb.stealing`.
    #[serde(default = "default_stealing")]
    pub stealing: String,
    /// `numadb.binding`.
    #[serde(default = "default_binding")]
    pub binding: String,
    /// `numadb.workers`.
    #[serde(default = "default_workers")]
    pub workers: String,
    /// `numadb.domains`.
    #[serde(default = "default_domains")]
    pub domains: String,
    /// Placement per table (`TBL_0`, `TBL_1`); unnamed tables keep theirs.
    #[serde(default)]
    pub placement: BTreeMap<String, String>,
}

fn default_stealing() -> String {
    "neighbor".into()
}
fn default_binding() -> String {
    "opportunistic".into()
}
fn default_workers() -> String {
    "all".into()
}
fn default_domains() -> String {
    "node".into()
}

impl Configuration {
    /// The session settings of the configuration.
    pub fn settings(&self) -> Vec<(String, String)> {
        vec![
            ("numadb.stealing".into(), self.stealing.clone()),
            ("numadb.binding".into(), self.binding.clone()),
            ("numadb.workers".into(), self.workers.clone()),
            ("numadb.domains".into(), self.domains.clone()),
        ]
    }
}

impl ExperimentFile {
    /// Parses and checks a file's text.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: ExperimentFile = toml::from_str(text).map_err(|e| e.to_string())?;
        file.check()?;
        Ok(file)
    }

    fn check(&self) -> Result<(), String> {
        if self.workloads.is_empty() {
            return Err("an experiment needs at least one [[workload]]".into());
        }
        if self.configurations.is_empty() {
            return Err("an experiment needs at least one [[configuration]]".into());
        }
        if self.duration_seconds.is_some() == self.queries_per_connection.is_some() {
            return Err("give exactly one of duration_seconds and queries_per_connection".into());
        }
        for workload in &self.workloads {
            match workload.kind.as_str() {
                "random_access" => {}
                "aggregation" => {
                    if workload.range_pred.is_empty() || workload.skew.is_empty() {
                        return Err("an aggregation workload needs range_pred and skew lists".into());
                    }
                    if let Some(k) = workload.skew.iter().find(|&&k| k > 6) {
                        return Err(format!("skew {k} is not between 0 and 6"));
                    }
                }
                other => return Err(format!("unknown workload kind {other:?} (random_access or aggregation)")),
            }
        }
        let mut settings = numadb_sql::Settings::default();
        for configuration in &self.configurations {
            for (name, value) in configuration.settings() {
                settings
                    .set(&name, &value)
                    .map_err(|e| format!("configuration {:?}: {}", configuration.name, e.message))?;
            }
            for (table, placement) in &configuration.placement {
                if table != "TBL_0" && table != "TBL_1" {
                    return Err(format!("configuration {:?}: unknown table {table:?}", configuration.name));
                }
                placement
                    .parse::<numadb_storage::TablePlacement>()
                    .map_err(|e| format!("configuration {:?}: {e}", configuration.name))?;
            }
        }
        Ok(())
    }

    /// The workloads of the matrix, expanded.
    pub fn expanded_workloads(&self) -> Vec<Workload> {
        let mut out = Vec::new();
        for workload in &self.workloads {
            match workload.kind.as_str() {
                "random_access" => out.push(Workload::RandomAccess { rows: self.rows }),
                _ => {
                    for &range_pred in &workload.range_pred {
                        for &k in &workload.skew {
                            out.push(Workload::Aggregation { k, range_pred });
                        }
                    }
                }
            }
        }
        out
    }

    fn stop(&self) -> Stop {
        match (self.queries_per_connection, self.duration_seconds) {
            (Some(n), _) => Stop::QueriesPerConnection(n),
            (None, Some(s)) => Stop::Duration(Duration::from_secs_f64(s)),
            (None, None) => Stop::Duration(Duration::from_secs(5)),
        }
    }
}

/// One cell of a result set.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// The configuration's name.
    pub configuration: String,
    /// The workload.
    pub workload: Workload,
    /// What the driver measured.
    pub run: RunResult,
    /// Bytes read per (domain, node) during the cell, when the target reports it.
    pub traffic: Option<ByteMatrix>,
    /// Of those, bytes from a node local to the reading domain.
    pub local_bytes: u64,
    /// Tasks stolen during the cell.
    pub tasks_stolen: u64,
}

/// The result set of one experiment run.
#[derive(Debug, Clone, Serialize)]
pub struct ResultSet {
    /// The experiment as given.
    pub experiment: ExperimentFile,
    /// The machine.
    pub machine: Machine,
    /// Cells, configuration by configuration.
    pub cells: Vec<Cell>,
}

/// Runs an experiment in-process: loads the thesis tables, then every configuration × workload cell.
pub fn run_in_process(
    experiment: &ExperimentFile,
    database: Arc<Database>,
    mut progress: impl FnMut(&str),
) -> Result<ResultSet, String> {
    let machine = Machine::describe(database.topology());
    let mut admin = database.session();
    if database.catalog().table("TBL_0").is_none() {
        progress(&format!("loading TBL_0 and TBL_1 ({} rows each)", experiment.rows));
        numadb_sql::thesis::load_thesis_tables(&mut admin, experiment.rows, experiment.seed, None, None)
            .map_err(|e| e.message)?;
    }
    let mut cells = Vec::new();
    let workloads = experiment.expanded_workloads();
    for configuration in &experiment.configurations {
        for (table, placement) in &configuration.placement {
            progress(&format!("{}: placing {table} by {placement}", configuration.name));
            admin
                .execute_one(&format!("ALTER TABLE \"{table}\" SET (numa_placement = '{placement}')"))
                .map_err(|e| format!("{}: {}", e.sqlstate, e.message))?;
        }
        let target = Target::InProcess { database: Arc::clone(&database), settings: configuration.settings() };
        let mut settings = numadb_sql::Settings::default();
        for (name, value) in configuration.settings() {
            settings.set(&name, &value).map_err(|e| e.message)?;
        }
        let scheduler = database.scheduler(settings.scheduler_config()).map_err(|e| e.message)?;
        let local_nodes: Vec<_> = scheduler.domains().domains.iter().map(|d| d.memory_nodes.clone()).collect();
        for workload in &workloads {
            progress(&format!("{}: {}", configuration.name, workload.label()));
            let spec = RunSpec {
                workload: workload.clone(),
                connections: experiment.connections,
                warmup: Duration::from_secs_f64(experiment.warmup_seconds),
                stop: experiment.stop(),
                seed: experiment.seed,
            };
            scheduler.reset_counters();
            let run = driver::run(&target, &spec)?;
            let counters = scheduler.counters();
            let traffic = counters.bytes_read.clone();
            cells.push(Cell {
                configuration: configuration.name.clone(),
                workload: workload.clone(),
                run,
                local_bytes: traffic.local_bytes(&local_nodes),
                tasks_stolen: counters.tasks_stolen(),
                traffic: Some(traffic),
            });
        }
    }
    Ok(ResultSet { experiment: experiment.clone(), machine, cells })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"
        name = "small"
        rows = 20000
        connections = 3
        warmup_seconds = 0
        queries_per_connection = 5

        [[workload]]
        kind = "aggregation"
        range_pred = [1000]
        skew = [0, 3]

        [[workload]]
        kind = "random_access"

        [[configuration]]
        name = "stealing off, always bound"
        stealing = "off"
        binding = "always"
        placement = { TBL_0 = "node(0)" }

        [[configuration]]
        name = "one big domain"
        domains = "machine"
        stealing = "any+batch"
    "#;

    #[test]
    fn files_parse_and_are_checked() {
        let file = ExperimentFile::parse(SMALL).unwrap();
        assert_eq!(file.expanded_workloads().len(), 3);
        assert_eq!(file.configurations[1].binding, "opportunistic");
        for (bad, reason) in [
            (SMALL.replace("skew = [0, 3]", "skew = [7]"), "between 0 and 6"),
            (SMALL.replace("binding = \"always\"", "binding = \"tight\""), "invalid value"),
            (
                SMALL.replace("queries_per_connection = 5", "queries_per_connection = 5\nduration_seconds = 1"),
                "exactly one",
            ),
            (SMALL.replace("TBL_0 = ", "TBL_9 = "), "unknown table"),
            (SMALL.replace("kind = \"random_access\"", "kind = \"joins\""), "unknown workload"),
            (format!("{SMALL}\nextra = 1"), "unknown field"),
        ] {
            let error = ExperimentFile::parse(&bad).unwrap_err();
            assert!(error.contains(reason), "{reason}: {error}");
        }
    }

    #[test]
    fn a_small_matrix_runs_in_process_and_accounts_its_traffic() {
        let file = ExperimentFile::parse(SMALL).unwrap();
        let result = run_in_process(&file, Database::new().unwrap(), |_| {}).unwrap();
        assert_eq!(result.cells.len(), 6);
        for cell in &result.cells {
            assert_eq!(cell.run.errors, 0, "{cell:?}");
            assert_eq!(cell.run.queries, 15);
            let traffic = cell.traffic.as_ref().unwrap();
            match cell.workload {
                // Scans read bytes (all local on a one-node machine); lookups run on the session thread.
                Workload::Aggregation { .. } => {
                    assert!(traffic.total() > 0);
                    assert_eq!(cell.local_bytes, traffic.total());
                }
                Workload::RandomAccess { .. } => assert_eq!(traffic.total(), 0),
            }
        }
    }
}
