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
//! placement = { TBL_0 = "domain(0)", TBL_1 = "domain(last)" }
//! ```
//!
//! Placements are those of `ALTER TABLE … SET (numa_placement = …)` (`node(N)`, `interleave(NODES)`,
//! `round_robin(NODES)`, `first_touch`, `os_default`) plus names that make one file fit every machine:
//! `domain(N)` and `domain(last)` are the node of the N-th (last) NUMA node with CPUs, and `all` in a node list is
//! every node with memory. Worker layouts may say `domain(last)` too. A configuration that needs more domains than
//! the machine has is skipped, and the result set says why.
//!
//! Placement changes between configurations are made with `ALTER TABLE … SET (numa_placement = …)`: the tables are
//! loaded once and their pages migrated, which is also what a user of the system would do. The same runner drives
//! an in-process database or a `numadb serve` over the wire; traffic then comes from the `numadb.traffic` view.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use numadb_scheduler::ByteMatrix;
use numadb_sql::Database;
use numadb_topology::{NodeSet, Topology};
use serde::{Deserialize, Serialize};

use crate::Machine;
use crate::driver::{self, RunResult, RunSpec, Stop, Target, Workload};

/// The experiments that ship with numadb: (name, TOML).
pub const BUILTIN: [(&str, &str); 8] = [
    ("tour", include_str!("../experiments/tour.toml")),
    ("random-access", include_str!("../experiments/random-access.toml")),
    ("aggregation", include_str!("../experiments/aggregation.toml")),
    ("placement", include_str!("../experiments/placement.toml")),
    ("layout", include_str!("../experiments/layout.toml")),
    ("stealing", include_str!("../experiments/stealing.toml")),
    ("binding", include_str!("../experiments/binding.toml")),
    ("one-big-domain", include_str!("../experiments/one-big-domain.toml")),
];

/// A built-in experiment by name.
pub fn builtin(name: &str) -> Option<ExperimentFile> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, text)| ExperimentFile::parse(text).expect("built-in files parse"))
}

/// An experiment file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    /// A name for reports.
    #[serde(default = "default_name")]
    pub name: String,
    /// What the experiment shows, for reports.
    #[serde(default)]
    pub description: String,
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

/// A configuration with its symbolic names resolved for one machine.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resolved {
    /// `SET` name/value pairs.
    pub settings: Vec<(String, String)>,
    /// (table, placement) pairs for `ALTER TABLE … SET (numa_placement = …)`.
    pub placement: Vec<(String, String)>,
}

impl Configuration {
    /// The settings and placements of the configuration on a machine of this shape, or why the machine cannot
    /// run it.
    pub fn resolve(&self, shape: &Shape) -> Result<Resolved, String> {
        let context = |e: String| format!("configuration {:?}: {e}", self.name);
        let domains = shape.domains.get(self.domains.as_str()).map_or(0, Vec::len);
        let workers = match self.workers.trim() {
            "domain(last)" if domains == 0 => return Err(context(format!("no {} domains", self.domains))),
            "domain(last)" => format!("domain({})", domains - 1),
            other => other.to_string(),
        };
        if let Some(n) =
            workers.strip_prefix("domain(").and_then(|r| r.strip_suffix(')')).and_then(|n| n.parse::<usize>().ok())
            && n >= domains
        {
            return Err(context(format!(
                "workers = {workers:?} needs {} {} domains; this machine has {domains}",
                n + 1,
                self.domains
            )));
        }
        let settings = vec![
            ("numadb.stealing".into(), self.stealing.clone()),
            ("numadb.binding".into(), self.binding.clone()),
            ("numadb.workers".into(), workers),
            ("numadb.domains".into(), self.domains.clone()),
        ];
        let placement = self
            .placement
            .iter()
            .map(|(table, placement)| Ok((table.clone(), resolve_placement(placement, shape).map_err(context)?)))
            .collect::<Result<_, String>>()?;
        Ok(Resolved { settings, placement })
    }
}

/// What symbolic names resolve against: each granularity's domains (their memory nodes) and the nodes with memory.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Shape {
    /// Memory nodes of each domain, by granularity name (`node`, `package`, `l3`, `machine`).
    pub domains: BTreeMap<String, Vec<NodeSet>>,
    /// Every node with memory the process may allocate from.
    pub memory_nodes: NodeSet,
}

impl Shape {
    /// The shape of a topology.
    pub fn of(topology: &Topology) -> Self {
        let mut domains = BTreeMap::new();
        for granularity in numadb_topology::DomainGranularity::ALL {
            if let Ok(found) = topology.domains(granularity) {
                domains.insert(
                    granularity.name().to_string(),
                    found.domains.iter().map(|d| d.memory_nodes.clone()).collect(),
                );
            }
        }
        let memory_nodes = topology
            .nodes
            .iter()
            .filter(|n| n.memory_bytes > 0 && topology.allowed.nodes.contains(n.id))
            .map(|n| n.id)
            .collect();
        Shape { domains, memory_nodes }
    }

    /// A made-up machine with `count` nodes, one domain each: for checking a file's syntax.
    fn uniform(count: u32) -> Self {
        let per_node: Vec<NodeSet> = (0..count).map(|n| NodeSet::from_ids([n])).collect();
        let mut domains = BTreeMap::new();
        for name in ["node", "package", "l3"] {
            domains.insert(name.to_string(), per_node.clone());
        }
        domains.insert("machine".to_string(), vec![(0..count).collect()]);
        Shape { domains, memory_nodes: (0..count).collect() }
    }

    /// The shape a `numadb serve` reports in `numadb.domains` and `numadb.nodes`.
    fn from_server(admin: &mut Admin) -> Result<Self, String> {
        let mut domains: BTreeMap<String, Vec<NodeSet>> = BTreeMap::new();
        for row in
            admin.query("SELECT granularity, domain, memory_nodes FROM numadb.domains ORDER BY granularity, domain")?
        {
            let nodes = NodeSet::parse_list(&row[2]).map_err(|e| e.to_string())?;
            domains.entry(row[0].clone()).or_default().push(nodes);
        }
        let mut memory_nodes = NodeSet::new();
        for row in admin.query("SELECT node FROM numadb.nodes WHERE memory_bytes > 0")? {
            memory_nodes.insert(row[0].parse().map_err(|_| format!("bad node id {:?}", row[0]))?);
        }
        Ok(Shape { domains, memory_nodes })
    }
}

/// Replaces `domain(N)`, `domain(last)` and `all` in a placement by node ids.
fn resolve_placement(text: &str, shape: &Shape) -> Result<String, String> {
    let lowered = text.trim().to_ascii_lowercase();
    let node_domains = shape.domains.get("node").map(Vec::as_slice).unwrap_or_default();
    if let Some(argument) = lowered.strip_prefix("domain(").and_then(|r| r.strip_suffix(')')) {
        let index = match argument.trim() {
            "last" => node_domains.len().checked_sub(1).ok_or("the machine has no NUMA node with CPUs")?,
            n => n.parse::<usize>().map_err(|_| format!("{text:?}: expected domain(N) or domain(last)"))?,
        };
        let nodes = node_domains.get(index).ok_or_else(|| {
            format!("{text:?} needs {} NUMA nodes with CPUs; this machine has {}", index + 1, node_domains.len())
        })?;
        let node = nodes.iter().next().ok_or_else(|| format!("{text:?}: the domain has no memory node"))?;
        return Ok(format!("node({node})"));
    }
    if lowered.contains("(all)") {
        if shape.memory_nodes.is_empty() {
            return Err("the machine has no memory node this process may use".into());
        }
        return Ok(lowered.replace("(all)", &format!("({})", shape.memory_nodes.to_list_string())));
    }
    Ok(lowered)
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
        // A day at most: these become `Duration`s, which hold no NaN, infinity or negative time.
        for (name, seconds) in
            [("warmup_seconds", Some(self.warmup_seconds)), ("duration_seconds", self.duration_seconds)]
        {
            if let Some(seconds) = seconds
                && !(0.0..=86_400.0).contains(&seconds)
            {
                return Err(format!("{name} must be between 0 and 86400 (got {seconds})"));
            }
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
            for (name, value) in configuration.resolve(&Shape::uniform(64))?.settings {
                settings
                    .set(&name, &value)
                    .map_err(|e| format!("configuration {:?}: {}", configuration.name, e.message))?;
            }
            for (table, placement) in &configuration.placement {
                if table != "TBL_0" && table != "TBL_1" {
                    return Err(format!("configuration {:?}: unknown table {table:?}", configuration.name));
                }
                // Symbolic names resolve against a machine with plenty of domains, to check the syntax only.
                let wide = Shape::uniform(64);
                resolve_placement(placement, &wide)
                    .and_then(|p| p.parse::<numadb_storage::TablePlacement>())
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

    /// Applies command-line overrides.
    pub fn override_with(&mut self, overrides: &Overrides) -> Result<(), String> {
        if let Some(rows) = overrides.rows {
            self.rows = rows;
        }
        if let Some(connections) = overrides.connections {
            self.connections = connections;
        }
        if let Some(seconds) = overrides.duration_seconds {
            self.duration_seconds = Some(seconds);
            self.queries_per_connection = None;
        }
        if let Some(queries) = overrides.queries_per_connection {
            self.queries_per_connection = Some(queries);
            self.duration_seconds = None;
        }
        if let Some(seconds) = overrides.warmup_seconds {
            self.warmup_seconds = seconds;
        }
        if self.rows == 0 || self.rows > i32::MAX as u64 {
            return Err(format!("rows must be between 1 and {}", i32::MAX));
        }
        if self.connections == 0 {
            return Err("connections must be at least 1".into());
        }
        self.check()
    }

    /// Measured cells the matrix has (before skipping configurations a machine cannot run).
    pub fn cell_count(&self) -> usize {
        self.configurations.len() * self.expanded_workloads().len()
    }

    fn stop(&self) -> Stop {
        match (self.queries_per_connection, self.duration_seconds) {
            (Some(n), _) => Stop::QueriesPerConnection(n),
            (None, Some(s)) => Stop::Duration(Duration::from_secs_f64(s)),
            (None, None) => Stop::Duration(Duration::from_secs(5)),
        }
    }
}

/// Command-line overrides of an experiment file.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// Rows per table.
    pub rows: Option<u64>,
    /// Client connections.
    pub connections: Option<usize>,
    /// Measured seconds per cell.
    pub duration_seconds: Option<f64>,
    /// Queries per connection per cell.
    pub queries_per_connection: Option<u64>,
    /// Warm-up seconds per cell.
    pub warmup_seconds: Option<f64>,
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
    /// Bytes read per (domain, node) during the cell.
    pub traffic: ByteMatrix,
    /// Of those, bytes from a node local to the reading domain.
    pub local_bytes: u64,
    /// Local bytes of each row of `traffic`.
    pub local_bytes_by_domain: Vec<u64>,
    /// The same bytes by the node of the CPU that read them (rows) and the memory node (columns): locality as
    /// the memory controllers see it, whatever the configuration's domains (one big domain is "local" to itself).
    pub node_traffic: ByteMatrix,
    /// Of those, bytes read from the reading CPU's own node.
    pub node_local_bytes: u64,
    /// Scan tasks run during the cell.
    pub tasks_run: u64,
    /// Of those, tasks stolen from another domain's queue.
    pub tasks_stolen: u64,
}

impl Cell {
    /// Bytes read from the reading CPU's own node, as a share of all bytes read (`None` when nothing was
    /// scanned).
    pub fn local_share(&self) -> Option<f64> {
        let total = self.node_traffic.total();
        (total > 0).then(|| self.node_local_bytes as f64 / total as f64)
    }

    /// Per reading node (by name): bytes from its own node and from others.
    pub fn node_local_remote(&self) -> Vec<(String, u64, u64)> {
        self.node_traffic
            .worker_domains
            .iter()
            .enumerate()
            .map(|(row, name)| {
                let own = name.strip_prefix("node").and_then(|n| n.parse::<u32>().ok());
                let local = own.map_or(0, |node| self.node_traffic.get(row, node));
                let total: u64 = self.node_traffic.bytes.get(row).map_or(0, |r| r.iter().sum());
                (name.clone(), local, total - local)
            })
            .collect()
    }
}

/// A configuration the machine could not run.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    /// The configuration's name.
    pub configuration: String,
    /// Why.
    pub reason: String,
}

/// A peer system's run of a workload with the same clients.
#[derive(Debug, Clone, Serialize)]
pub struct PeerCell {
    /// The peer and its version.
    pub peer: String,
    /// The workload.
    pub workload: Workload,
    /// What the driver measured, or why the peer could not run it.
    pub run: Result<RunResult, String>,
}

/// The result set of one experiment run.
#[derive(Debug, Clone, Serialize)]
pub struct ResultSet {
    /// The experiment as run (after overrides).
    pub experiment: ExperimentFile,
    /// The machine the clients ran on.
    pub machine: Machine,
    /// `in-process` or the server's URL.
    pub target: String,
    /// Cells, configuration by configuration.
    pub cells: Vec<Cell>,
    /// Configurations the machine could not run.
    pub skipped: Vec<Skipped>,
    /// What each configuration that ran resolved to on this machine: (name, resolved).
    pub resolved: Vec<(String, Resolved)>,
    /// Peers' runs of the same workloads.
    pub peers: Vec<PeerCell>,
    /// Where a peer's answers differed from numadb's (one line each; empty when all agreed).
    pub peer_disagreements: Vec<String>,
    /// When the run started (UTC, RFC 3339).
    pub started_at: String,
}

/// Where an experiment runs.
#[derive(Clone)]
pub enum ExperimentTarget {
    /// Sessions of an in-process database.
    InProcess(Arc<Database>),
    /// A `numadb serve` (a `postgres://` URL).
    Wire(String),
}

impl ExperimentTarget {
    /// `in-process` or the URL.
    pub fn describe(&self) -> String {
        match self {
            ExperimentTarget::InProcess(_) => "in-process".into(),
            ExperimentTarget::Wire(url) => url.clone(),
        }
    }
}

/// How far an experiment has got.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Cells finished.
    pub cells_done: usize,
    /// Cells in all.
    pub cells: usize,
    /// What is happening now.
    pub message: String,
}

/// The admin session's scheduler: unlike any experiment's (no domain is within distance 1 of another).
const ADMIN_SETTINGS: [(&str, &str); 2] = [("numadb.stealing", "neighbor(1)"), ("numadb.binding", "none")];

/// The session that loads and places tables and reads counters, in-process or over the wire.
enum Admin {
    InProcess(Box<numadb_sql::Session>),
    Wire(Box<postgres::Client>),
}

impl Admin {
    fn connect(target: &ExperimentTarget) -> Result<Self, String> {
        let mut admin = match target {
            ExperimentTarget::InProcess(database) => Admin::InProcess(Box::new(database.session())),
            ExperimentTarget::Wire(url) => Admin::Wire(Box::new(
                postgres::Client::connect(url, postgres::NoTls).map_err(|e| format!("connecting to {url}: {e}"))?,
            )),
        };
        // The admin's own queries (the counter views) run on a scheduler no configuration uses, so that they
        // never show up in a cell's tasks or byte matrix.
        for (name, value) in ADMIN_SETTINGS {
            admin.execute(&format!("SET {name} = '{value}'"))?;
        }
        Ok(admin)
    }

    fn execute(&mut self, sql: &str) -> Result<(), String> {
        match self {
            Admin::InProcess(session) => {
                session.execute_one(sql).map(|_| ()).map_err(|e| format!("{}: {}", e.sqlstate, e.message))
            }
            Admin::Wire(client) => client.batch_execute(sql).map_err(|e| wire_error(&e)),
        }
    }

    /// A query's rows as text (NULL as the empty string).
    fn query(&mut self, sql: &str) -> Result<Vec<Vec<String>>, String> {
        match self {
            Admin::InProcess(session) => {
                let output = session.execute_one(sql).map_err(|e| format!("{}: {}", e.sqlstate, e.message))?;
                Ok(output
                    .rows
                    .iter()
                    .map(|row| {
                        row.iter()
                            .map(|v| match v {
                                numadb_storage::Value::Null => String::new(),
                                numadb_storage::Value::Bool(b) => if *b { "t" } else { "f" }.to_string(),
                                other => other.to_string(),
                            })
                            .collect()
                    })
                    .collect())
            }
            Admin::Wire(client) => {
                let messages = client.simple_query(sql).map_err(|e| wire_error(&e))?;
                Ok(messages
                    .iter()
                    .filter_map(|m| match m {
                        postgres::SimpleQueryMessage::Row(row) => {
                            Some((0..row.len()).map(|i| row.get(i).unwrap_or("").to_string()).collect())
                        }
                        _ => None,
                    })
                    .collect())
            }
        }
    }

    /// The thesis tables with `rows` rows each, loading them when they are missing or of another size.
    fn ensure_thesis_tables(&mut self, rows: u64, seed: u64, progress: &mut dyn FnMut(String)) -> Result<(), String> {
        let counts: Vec<Option<u64>> = ["TBL_0", "TBL_1"]
            .iter()
            .map(|t| {
                self.query(&format!("SELECT count(*) FROM \"{t}\""))
                    .ok()
                    .and_then(|r| r.first().and_then(|row| row[0].parse().ok()))
            })
            .collect();
        if counts.iter().all(|&c| c == Some(rows)) {
            return Ok(());
        }
        progress(format!("loading TBL_0 and TBL_1 ({rows} rows each)"));
        self.execute("DROP TABLE IF EXISTS \"TBL_0\", \"TBL_1\"")?;
        self.execute(&format!("CALL numadb.load_thesis({rows}, {seed})"))
    }

    /// The cumulative traffic and task counters of the scheduler with these settings.
    fn counters(&mut self, settings: &[(String, String)]) -> Result<Counters, String> {
        let mut parsed = numadb_sql::Settings::default();
        for (name, value) in settings {
            parsed.set(name, value).map_err(|e| e.message)?;
        }
        let label = numadb_sql::system::scheduler_label(parsed.scheduler_config()).replace('\'', "''");
        let mut counters = Counters::default();
        for row in self.query(&format!(
            "SELECT domain, domain_name, node, bytes_read, local FROM numadb.traffic WHERE scheduler = '{label}'"
        ))? {
            let number = |i: usize| row[i].parse::<u64>().map_err(|_| format!("bad number {:?}", row[i]));
            counters
                .traffic
                .insert((number(0)? as usize, row[1].clone(), number(2)? as u32), (number(3)?, row[4] == "t"));
        }
        for row in self
            .query(&format!("SELECT cpu_node, node, bytes_read FROM numadb.node_traffic WHERE scheduler = '{label}'"))?
        {
            let number = |i: usize| row[i].parse::<u64>().map_err(|_| format!("bad number {:?}", row[i]));
            counters.node_traffic.insert((number(0)? as u32, number(1)? as u32), number(2)?);
        }
        for row in self.query(&format!(
            "SELECT sum(tasks_run), sum(tasks_stolen_in) FROM numadb.scheduler WHERE scheduler = '{label}'"
        ))? {
            counters.tasks_run = row[0].parse().unwrap_or(0);
            counters.tasks_stolen = row[1].parse().unwrap_or(0);
        }
        Ok(counters)
    }
}

fn wire_error(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => error.to_string(),
    }
}

/// Cumulative counters of one scheduler, as the system views report them.
#[derive(Debug, Clone, Default)]
struct Counters {
    /// (domain, domain name, node) → (bytes, local).
    traffic: BTreeMap<(usize, String, u32), (u64, bool)>,
    /// (reading CPU's node, memory node) → bytes.
    node_traffic: BTreeMap<(u32, u32), u64>,
    tasks_run: u64,
    tasks_stolen: u64,
}

impl Counters {
    /// The node matrix between `before` and `self`, with the bytes read from the reading CPU's own node.
    fn node_since(&self, before: &Counters) -> (ByteMatrix, u64) {
        let cpu_nodes: NodeSet = self.node_traffic.keys().map(|(cpu_node, _)| *cpu_node).collect();
        let memory_nodes: NodeSet = self.node_traffic.keys().map(|(_, node)| *node).collect();
        let cpu_nodes: Vec<u32> = cpu_nodes.iter().collect();
        let memory_nodes: Vec<u32> = memory_nodes.iter().collect();
        let mut bytes = vec![vec![0u64; memory_nodes.len()]; cpu_nodes.len()];
        let mut local = 0;
        for (&(cpu_node, node), &after) in &self.node_traffic {
            let delta = after.saturating_sub(before.node_traffic.get(&(cpu_node, node)).copied().unwrap_or(0));
            let row = cpu_nodes.iter().position(|&n| n == cpu_node).expect("listed");
            let column = memory_nodes.iter().position(|&n| n == node).expect("listed");
            bytes[row][column] += delta;
            if cpu_node == node {
                local += delta;
            }
        }
        let worker_domains = cpu_nodes.iter().map(|n| format!("node{n}")).collect();
        (ByteMatrix { worker_domains, memory_nodes, bytes }, local)
    }

    /// What happened between `before` and `self`: a byte matrix, its local bytes per row, tasks run and stolen.
    fn since(&self, before: &Counters) -> (ByteMatrix, Vec<u64>, u64, u64) {
        let mut worker_domains: Vec<(usize, String)> = self.traffic.keys().map(|(d, n, _)| (*d, n.clone())).collect();
        worker_domains.dedup();
        let memory_nodes: NodeSet = self.traffic.keys().map(|(_, _, node)| *node).collect();
        let memory_nodes: Vec<u32> = memory_nodes.iter().collect();
        let mut bytes = vec![vec![0u64; memory_nodes.len()]; worker_domains.len()];
        let mut local = vec![0u64; worker_domains.len()];
        for ((domain, name, node), &(after, is_local)) in &self.traffic {
            let earlier = before.traffic.get(&(*domain, name.clone(), *node)).map_or(0, |b| b.0);
            let delta = after.saturating_sub(earlier);
            let row = worker_domains.iter().position(|(d, _)| d == domain).expect("listed");
            let column = memory_nodes.iter().position(|n| n == node).expect("listed");
            bytes[row][column] += delta;
            if is_local {
                local[row] += delta;
            }
        }
        let matrix =
            ByteMatrix { worker_domains: worker_domains.into_iter().map(|(_, n)| n).collect(), memory_nodes, bytes };
        (
            matrix,
            local,
            self.tasks_run.saturating_sub(before.tasks_run),
            self.tasks_stolen.saturating_sub(before.tasks_stolen),
        )
    }
}

/// Runs an experiment: loads the thesis tables where they are missing, then every configuration × workload cell.
pub fn run(
    experiment: &ExperimentFile,
    target: &ExperimentTarget,
    topology: &Topology,
    mut progress: impl FnMut(Progress),
) -> Result<ResultSet, String> {
    let started_at = numadb_report::utc_now();
    let machine = Machine::describe(topology);
    let mut admin = Admin::connect(target)?;
    let shape = match target {
        ExperimentTarget::InProcess(database) => Shape::of(database.topology()),
        ExperimentTarget::Wire(_) => Shape::from_server(&mut admin)?,
    };
    let workloads = experiment.expanded_workloads();
    let cells_total = experiment.cell_count();
    let mut cells_done = 0;
    let mut report =
        |cells_done: usize, message: String| progress(Progress { cells_done, cells: cells_total, message });
    admin.ensure_thesis_tables(experiment.rows, experiment.seed, &mut |m| report(0, m))?;
    let mut cells = Vec::new();
    let mut skipped = Vec::new();
    let mut resolved_all = Vec::new();
    for configuration in &experiment.configurations {
        let resolved = match configuration.resolve(&shape) {
            Ok(resolved) => resolved,
            Err(reason) => {
                cells_done += workloads.len();
                report(cells_done, format!("skipping {:?}: {reason}", configuration.name));
                skipped.push(Skipped { configuration: configuration.name.clone(), reason });
                continue;
            }
        };
        resolved_all.push((configuration.name.clone(), resolved.clone()));
        for (table, placement) in &resolved.placement {
            report(cells_done, format!("{}: placing {table} on {placement}", configuration.name));
            admin.execute(&format!("ALTER TABLE \"{table}\" SET (numa_placement = '{placement}')"))?;
        }
        let client_target = match target {
            ExperimentTarget::InProcess(database) => {
                Target::InProcess { database: Arc::clone(database), settings: resolved.settings.clone() }
            }
            ExperimentTarget::Wire(url) => Target::Wire { url: url.clone(), settings: resolved.settings.clone() },
        };
        for workload in &workloads {
            report(cells_done, format!("{}: {}", configuration.name, workload.label()));
            let spec = RunSpec {
                workload: workload.clone(),
                connections: experiment.connections,
                warmup: Duration::from_secs_f64(experiment.warmup_seconds),
                stop: experiment.stop(),
                seed: experiment.seed,
            };
            // Counters are read when the warm-up ends, and again at the end.
            let mut before = Err(String::new());
            let run = driver::run_observed(&client_target, &spec, &mut || before = admin.counters(&resolved.settings))
                .map_err(|e| format!("{}: {e}", configuration.name))?;
            let before = before?;
            let after = admin.counters(&resolved.settings)?;
            let (traffic, local_bytes_by_domain, tasks_run, tasks_stolen) = after.since(&before);
            let (node_traffic, node_local_bytes) = after.node_since(&before);
            cells.push(Cell {
                configuration: configuration.name.clone(),
                workload: workload.clone(),
                run,
                traffic,
                local_bytes: local_bytes_by_domain.iter().sum(),
                local_bytes_by_domain,
                node_traffic,
                node_local_bytes,
                tasks_run,
                tasks_stolen,
            });
            cells_done += 1;
        }
    }
    report(cells_done, "done".into());
    Ok(ResultSet {
        experiment: experiment.clone(),
        machine,
        target: target.describe(),
        cells,
        skipped,
        resolved: resolved_all,
        peers: Vec::new(),
        peer_disagreements: Vec::new(),
        started_at,
    })
}

/// A peer to compare with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// DuckDB through its Python package.
    DuckDb,
    /// PostgreSQL at a URL, or a throwaway cluster started for the run.
    Postgres(Option<String>),
}

impl std::str::FromStr for Peer {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        match text.split_once('=') {
            None if text == "duckdb" => Ok(Peer::DuckDb),
            None if text == "postgres" => Ok(Peer::Postgres(None)),
            Some(("postgres", url)) if !url.is_empty() => Ok(Peer::Postgres(Some(url.to_string()))),
            _ => Err(format!("{text:?}: compare with duckdb, postgres (a throwaway cluster) or postgres=URL")),
        }
    }
}

/// Runs the experiment's workloads, with its clients, on the peers, and adds their cells to the result set.
/// `session` holds the thesis tables the experiment ran on (or identical ones): the peers are loaded from them
/// and their answers checked against numadb's.
pub fn compare(
    results: &mut ResultSet,
    peers: &[Peer],
    session: &mut numadb_sql::Session,
    mut progress: impl FnMut(String),
) -> Result<(), String> {
    let catalog = session.database().catalog();
    let tables: Vec<Arc<numadb_storage::Table>> = ["TBL_0", "TBL_1"]
        .iter()
        .map(|name| catalog.table(name).ok_or_else(|| format!("table {name} is not loaded")))
        .collect::<Result<_, _>>()?;
    let tables: Vec<&numadb_storage::Table> = tables.iter().map(Arc::as_ref).collect();
    let clients = crate::peers::Clients {
        connections: results.experiment.connections,
        warmup: Duration::from_secs_f64(results.experiment.warmup_seconds),
        stop: results.experiment.stop(),
        seed: results.experiment.seed,
    };
    let workloads = results.experiment.expanded_workloads();
    for peer in peers {
        let runs = match peer {
            Peer::DuckDb => crate::peers::duckdb(&tables, &workloads, &clients, &mut progress),
            Peer::Postgres(Some(url)) => crate::peers::postgres(url, &tables, &workloads, &clients, &mut progress),
            Peer::Postgres(None) => {
                progress("starting a throwaway PostgreSQL cluster".into());
                match crate::postgres::TempPostgres::start() {
                    Ok(server) => crate::peers::postgres(&server.url(), &tables, &workloads, &clients, &mut progress),
                    Err(error) => {
                        results.peers.extend(workloads.iter().map(|w| PeerCell {
                            peer: "PostgreSQL".into(),
                            workload: w.clone(),
                            run: Err(error.to_string()),
                        }));
                        continue;
                    }
                }
            }
        };
        results
            .peer_disagreements
            .extend(runs.disagreements_with(session).into_iter().map(|d| format!("{}: {d}", runs.peer)));
        results.peers.extend(runs.into_cells());
    }
    Ok(())
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

        [[configuration]]
        name = "needs a second domain"
        placement = { TBL_1 = "domain(1)" }
    "#;

    #[test]
    fn files_parse_and_are_checked() {
        let file = ExperimentFile::parse(SMALL).unwrap();
        assert_eq!(file.expanded_workloads().len(), 3);
        assert_eq!(file.cell_count(), 9);
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
            (SMALL.replace("warmup_seconds = 0", "warmup_seconds = -1"), "warmup_seconds must be between"),
            (SMALL.replace("warmup_seconds = 0", "warmup_seconds = inf"), "warmup_seconds must be between"),
            (SMALL.replace("queries_per_connection = 5", "duration_seconds = nan"), "duration_seconds must be between"),
        ] {
            let error = ExperimentFile::parse(&bad).unwrap_err();
            assert!(error.contains(reason), "{reason}: {error}");
        }
    }

    #[test]
    fn built_in_experiments_parse_and_cover_the_thesis_knobs() {
        let names: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
        for name in names {
            let file = builtin(name).unwrap();
            assert_eq!(file.name, name);
            assert!(!file.description.is_empty(), "{name}");
        }
        assert!(builtin("nonsense").is_none());
        let aggregation = builtin("aggregation").unwrap();
        assert_eq!(aggregation.expanded_workloads().len(), 21);
        let stealing: Vec<String> =
            builtin("stealing").unwrap().configurations.iter().map(|c| c.stealing.clone()).collect();
        assert_eq!(stealing, ["off", "neighbor", "neighbor+batch", "any", "any+batch"]);
    }

    #[test]
    fn symbolic_names_resolve_per_machine_and_unmet_needs_skip() {
        let shape = Shape {
            domains: BTreeMap::from([
                ("node".to_string(), vec![NodeSet::from_ids([0]), NodeSet::from_ids([1]), NodeSet::from_ids([2, 4])]),
                ("package".to_string(), vec![NodeSet::from_ids([0, 1]), NodeSet::from_ids([2, 4])]),
                ("machine".to_string(), vec![NodeSet::from_ids([0, 1, 2, 4])]),
            ]),
            memory_nodes: NodeSet::from_ids([0, 1, 2, 4]),
        };
        assert_eq!(resolve_placement("domain(0)", &shape).unwrap(), "node(0)");
        assert_eq!(resolve_placement("domain(last)", &shape).unwrap(), "node(2)");
        assert_eq!(resolve_placement("interleave(all)", &shape).unwrap(), "interleave(0-2,4)");
        assert_eq!(resolve_placement("node(7)", &shape).unwrap(), "node(7)");
        assert!(resolve_placement("domain(3)", &shape).unwrap_err().contains("this machine has 3"));
        let configuration = Configuration {
            name: "c".into(),
            stealing: "off".into(),
            binding: "always".into(),
            workers: "domain(last)".into(),
            domains: "package".into(),
            placement: BTreeMap::from([("TBL_1".to_string(), "domain(last)".to_string())]),
        };
        let resolved = configuration.resolve(&shape).unwrap();
        assert!(resolved.settings.contains(&("numadb.workers".into(), "domain(1)".into())));
        assert_eq!(resolved.placement, [("TBL_1".to_string(), "node(2)".to_string())]);
        let too_far = Configuration { workers: "domain(2)".into(), ..configuration };
        assert!(too_far.resolve(&shape).unwrap_err().contains("needs 3 package domains; this machine has 2"));
    }

    #[test]
    fn a_small_matrix_runs_in_process_and_accounts_its_traffic() {
        let file = ExperimentFile::parse(SMALL).unwrap();
        let database = Database::new().unwrap();
        let topology = database.topology().clone();
        let result = run(&file, &ExperimentTarget::InProcess(database), &topology, |_| {}).unwrap();
        let nodes = database_nodes();
        assert_eq!(result.cells.len(), if nodes > 1 { 9 } else { 6 });
        assert_eq!(result.skipped.len(), if nodes > 1 { 0 } else { 1 });
        for cell in &result.cells {
            assert_eq!(cell.run.errors, 0, "{cell:?}");
            assert_eq!(cell.run.queries, 15);
            let traffic = &cell.traffic;
            match cell.workload {
                // Scans read bytes (all local on a one-node machine); lookups run on the session thread.
                Workload::Aggregation { .. } => {
                    assert!(traffic.total() > 0);
                    assert_eq!(cell.local_bytes, traffic.total());
                    // The same bytes by reading node.
                    assert_eq!(cell.node_traffic.total(), traffic.total());
                    if nodes == 1 {
                        assert_eq!(cell.node_local_bytes, traffic.total());
                    }
                }
                Workload::RandomAccess { .. } => {
                    assert_eq!(traffic.total(), 0);
                    // Nor do the runner's own counter queries show up.
                    assert_eq!(cell.tasks_run, 0);
                }
            }
        }
    }

    #[test]
    fn the_same_matrix_runs_over_the_wire_against_numadb_serve() {
        let file = ExperimentFile::parse(SMALL).unwrap();
        let database = Database::new().unwrap();
        let topology = database.topology().clone();
        let config = numadb_server::ServerConfig { listen: "127.0.0.1:0".into(), ..Default::default() };
        let running = numadb_server::Server::bind(Arc::clone(&database), config).unwrap().spawn();
        let url = format!("postgres://bench@{}/numadb", running.address());
        let result = run(&file, &ExperimentTarget::Wire(url), &topology, |_| {});
        running.shutdown();
        let result = result.unwrap();
        let nodes = database_nodes();
        assert_eq!(result.cells.len(), if nodes > 1 { 9 } else { 6 });
        // The runner loaded the tables through the server (CALL numadb.load_thesis).
        assert_eq!(database.catalog().table("TBL_0").unwrap().rows(), 20_000);
        for cell in &result.cells {
            assert_eq!(cell.run.errors, 0, "{cell:?}");
            assert_eq!(cell.run.queries, 15);
            // Counters come over the wire from numadb.traffic and numadb.scheduler, as in-process.
            match cell.workload {
                Workload::Aggregation { .. } => {
                    assert!(cell.traffic.total() > 0, "{cell:?}");
                    assert_eq!(cell.node_traffic.total(), cell.traffic.total());
                    assert!(cell.tasks_run > 0);
                }
                Workload::RandomAccess { .. } => {
                    assert_eq!(cell.traffic.total(), 0);
                    assert_eq!(cell.tasks_run, 0);
                }
            }
        }
    }

    fn database_nodes() -> usize {
        Topology::from_system().unwrap().nodes_with_cpus().len()
    }
}
