//! Session settings: `SET`, `SHOW`, `RESET`.
//!
//! numadb's own settings (`numadb.*`) choose the scheduler a session's statements run on; the PostgreSQL ones
//! that drivers send at connection time (`client_encoding`, `DateStyle`, …) are accepted and reported back so
//! that clients work unchanged.

use std::collections::BTreeMap;
use std::time::Duration;

use numadb_execution::{ExecError, sqlstate};
use numadb_scheduler::{Binding, Pinning, SchedulerConfig, Stealing, WorkerLayout};
use numadb_topology::DomainGranularity;

/// A setting numadb knows.
struct Known {
    name: &'static str,
    default: &'static str,
    description: &'static str,
}

const KNOWN: &[Known] = &[
    Known {
        name: "numadb.stealing",
        default: "neighbor",
        description: "Which other domains' queues idle workers take tasks from: off, neighbor, neighbor(DISTANCE), any; append +batch or +batch(N) to steal half a queue",
    },
    Known {
        name: "numadb.binding",
        default: "opportunistic",
        description: "How far the OS may move workers: none, preferred, opportunistic, always",
    },
    Known {
        name: "numadb.workers",
        default: "all",
        description: "Which CPUs get workers: all, half (half the cores of each domain), domain(N), cpus(LIST)",
    },
    Known {
        name: "numadb.domains",
        default: "node",
        description: "Scheduling domains: node (one per NUMA node), package (one per socket: as if SNC/NPS were off), l3 (one per shared L3), machine (one domain: the NUMA-unaware baseline)",
    },
    Known {
        name: "numadb.morsel_rows",
        default: "auto",
        description: "Rows per scan task (a multiple of 1024; auto: 262144 to 1048576, as large as 16 tasks per worker allow)",
    },
    Known {
        name: "numadb.scan_prefetch_blocks",
        default: "2",
        description: "Blocks a scan keeps asked for ahead of the one it decodes (half as many, rounded up, where it reads whole blocks in one stream; 0: leave it to the hardware prefetchers; at most 8)",
    },
    Known {
        name: "numadb.join_key_filter",
        default: "on",
        description: "Whether a hash join on an integer column scans that input after the other, keeping only rows whose key the other input has (on, off)",
    },
    Known {
        name: "numadb.max_result_mb",
        default: "auto",
        description: "Memory a statement's result rows may take before it fails with 53200, in MB (auto: a quarter of the machine's memory; 0: no limit)",
    },
    Known {
        name: "statement_timeout",
        default: "0",
        description: "Cancel statements running longer than this many milliseconds (0: never)",
    },
    Known {
        name: "server_version",
        default: "15.0",
        description: "The PostgreSQL version numadb's protocol and catalog behave like",
    },
    Known { name: "server_encoding", default: "UTF8", description: "Server encoding" },
    Known { name: "client_encoding", default: "UTF8", description: "Client encoding" },
    Known { name: "datestyle", default: "ISO, MDY", description: "Date display style" },
    Known { name: "timezone", default: "UTC", description: "Time zone" },
    Known { name: "integer_datetimes", default: "on", description: "Datetimes are integer based" },
    Known {
        name: "standard_conforming_strings",
        default: "on",
        description: "Backslashes in ordinary strings are literal",
    },
    Known { name: "application_name", default: "", description: "Name of the client application" },
    Known { name: "extra_float_digits", default: "1", description: "Extra digits for floating-point output" },
    Known { name: "search_path", default: "\"$user\", public", description: "Schema search order" },
    Known { name: "transaction_isolation", default: "read committed", description: "Transaction isolation level" },
    Known { name: "is_superuser", default: "on", description: "Whether the user is a superuser" },
    Known { name: "max_connections", default: "100", description: "Connections the server accepts" },
];

/// One session's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    values: BTreeMap<String, String>,
    /// The scheduler configuration the values select, kept parsed: every statement asks for it.
    scheduler: SchedulerConfig,
    statement_timeout: Option<Duration>,
    morsel_blocks: Option<usize>,
    prefetch_blocks: usize,
    max_result_mb: Option<u64>,
    join_key_filter: bool,
}

impl Default for Settings {
    fn default() -> Self {
        let mut settings = Settings {
            values: KNOWN.iter().map(|k| (k.name.to_string(), k.default.to_string())).collect(),
            scheduler: SchedulerConfig::default(),
            statement_timeout: None,
            morsel_blocks: None,
            prefetch_blocks: numadb_storage::PREFETCH_BLOCKS_DEFAULT,
            max_result_mb: None,
            join_key_filter: true,
        };
        settings.refresh();
        settings
    }
}

/// Reported back to clients when they change (PostgreSQL's `ParameterStatus`).
pub const REPORTED: &[&str] = &[
    "server_version",
    "server_encoding",
    "client_encoding",
    "datestyle",
    "timezone",
    "integer_datetimes",
    "standard_conforming_strings",
    "application_name",
    "is_superuser",
];

fn invalid(name: &str, value: &str, reason: String) -> ExecError {
    ExecError::new(sqlstate::INVALID_PARAMETER_VALUE, format!("invalid value for parameter \"{name}\": \"{value}\""))
        .with_detail(reason)
}

/// Parses a `statement_timeout` value: milliseconds, or a number with `ms`, `s`, `min`.
fn parse_timeout(value: &str) -> Option<Duration> {
    let value = value.trim().to_ascii_lowercase();
    let (number, scale) = if let Some(n) = value.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = value.strip_suffix("min") {
        (n, 60_000.0)
    } else if let Some(n) = value.strip_suffix('s') {
        (n, 1000.0)
    } else {
        (value.as_str(), 1.0)
    };
    let milliseconds: f64 = number.trim().parse().ok()?;
    // PostgreSQL's limit is INT_MAX milliseconds; 'Infinity' and 'NaN' parse as floats but are no timeout.
    let milliseconds = milliseconds * scale;
    (0.0..=f64::from(i32::MAX)).contains(&milliseconds).then(|| Duration::from_secs_f64(milliseconds / 1000.0))
}

impl Settings {
    /// Sets a value after checking it.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ExecError> {
        let name = name.to_ascii_lowercase();
        let checked = match name.as_str() {
            "numadb.stealing" => {
                value.parse::<Stealing>().map(|s| s.to_string()).map_err(|e| invalid(&name, value, e))?
            }
            "numadb.binding" => {
                value.parse::<Binding>().map(|b| b.to_string()).map_err(|e| invalid(&name, value, e))?
            }
            "numadb.workers" => {
                value.parse::<WorkerLayout>().map(|w| w.to_string()).map_err(|e| invalid(&name, value, e))?
            }
            "numadb.domains" => value
                .parse::<DomainGranularity>()
                .map(|g| g.name().to_string())
                .map_err(|e| invalid(&name, value, e))?,
            "numadb.morsel_rows" if value.trim().eq_ignore_ascii_case("auto") => "auto".to_string(),
            "numadb.morsel_rows" => {
                let rows: usize =
                    value.trim().parse().map_err(|_| invalid(&name, value, "expected a row count".into()))?;
                if rows == 0 || !rows.is_multiple_of(1024) || rows > 1 << 24 {
                    return Err(invalid(&name, value, "must be a positive multiple of 1024, at most 16777216".into()));
                }
                rows.to_string()
            }
            "numadb.scan_prefetch_blocks" => {
                let blocks: usize =
                    value.trim().parse().map_err(|_| invalid(&name, value, "expected a number of blocks".into()))?;
                if blocks > numadb_storage::PREFETCH_BLOCKS_MAX {
                    return Err(invalid(
                        &name,
                        value,
                        format!("must be between 0 and {}", numadb_storage::PREFETCH_BLOCKS_MAX),
                    ));
                }
                blocks.to_string()
            }
            "numadb.join_key_filter" => match value.trim().to_ascii_lowercase().as_str() {
                "on" | "true" | "yes" | "1" => "on".to_string(),
                "off" | "false" | "no" | "0" => "off".to_string(),
                _ => return Err(invalid(&name, value, "expected on or off".into())),
            },
            "numadb.max_result_mb" if value.trim().eq_ignore_ascii_case("auto") => "auto".to_string(),
            "numadb.max_result_mb" => value
                .trim()
                .parse::<u64>()
                .map_err(|_| invalid(&name, value, "expected a number of MB, or auto".into()))?
                .to_string(),
            "statement_timeout" => {
                let timeout = parse_timeout(value).ok_or_else(|| {
                    invalid(&name, value, "expected milliseconds, or a number with ms, s or min".into())
                })?;
                timeout.as_millis().to_string()
            }
            "server_version" | "server_encoding" | "integer_datetimes" | "is_superuser" | "max_connections" => {
                return Err(ExecError::new(
                    sqlstate::INSUFFICIENT_PRIVILEGE,
                    format!("parameter \"{name}\" cannot be changed"),
                ));
            }
            _ if name.starts_with("numadb.") => {
                return Err(ExecError::new(sqlstate::UNDEFINED_OBJECT, format!("unrecognized configuration parameter \"{name}\""))
                    .with_hint("numadb's settings are numadb.stealing, numadb.binding, numadb.workers, numadb.domains, numadb.morsel_rows, numadb.scan_prefetch_blocks, numadb.join_key_filter and numadb.max_result_mb"));
            }
            // Other client settings are accepted as given (drivers set many at connection time).
            _ => value.to_string(),
        };
        self.values.insert(name, checked);
        self.refresh();
        Ok(())
    }

    /// Re-derives the parsed values from the text ones.
    fn refresh(&mut self) {
        let get = |name: &str| self.values.get(name).map(String::as_str).unwrap_or("");
        self.scheduler = SchedulerConfig {
            granularity: get("numadb.domains").parse().unwrap_or_default(),
            layout: get("numadb.workers").parse().unwrap_or(WorkerLayout::All),
            stealing: get("numadb.stealing").parse().unwrap_or(Stealing::ANY),
            binding: get("numadb.binding").parse().unwrap_or(Binding::Opportunistic),
            pinning: Pinning::Os,
        };
        let timeout_ms: u64 = get("statement_timeout").parse().unwrap_or(0);
        self.statement_timeout = (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms));
        self.morsel_blocks = get("numadb.morsel_rows").parse::<usize>().ok().map(|rows| (rows / 1024).max(1));
        self.prefetch_blocks =
            get("numadb.scan_prefetch_blocks").parse().unwrap_or(numadb_storage::PREFETCH_BLOCKS_DEFAULT);
        self.max_result_mb = get("numadb.max_result_mb").parse().ok();
        self.join_key_filter = get("numadb.join_key_filter") != "off";
    }

    /// Resets one setting (or all with `None`) to its default.
    pub fn reset(&mut self, name: Option<&str>) {
        match name {
            Some(name) => {
                let name = name.to_ascii_lowercase();
                match KNOWN.iter().find(|k| k.name == name) {
                    Some(known) => {
                        self.values.insert(name, known.default.to_string());
                    }
                    None => {
                        self.values.remove(&name);
                    }
                }
            }
            None => *self = Settings::default(),
        }
        self.refresh();
    }

    /// A setting's value.
    pub fn get(&self, name: &str) -> Result<String, ExecError> {
        let name = name.to_ascii_lowercase();
        self.values.get(&name).cloned().ok_or_else(|| {
            ExecError::new(sqlstate::UNDEFINED_OBJECT, format!("unrecognized configuration parameter \"{name}\""))
        })
    }

    /// Every setting with its description.
    pub fn all(&self) -> Vec<(String, String, String)> {
        self.values
            .iter()
            .map(|(name, value)| {
                let description = KNOWN.iter().find(|k| k.name == name).map_or("", |k| k.description);
                (name.clone(), value.clone(), description.to_string())
            })
            .collect()
    }

    /// The scheduler configuration these settings select.
    pub fn scheduler_config(&self) -> &SchedulerConfig {
        &self.scheduler
    }

    /// `statement_timeout`, if set.
    pub fn statement_timeout(&self) -> Option<Duration> {
        self.statement_timeout
    }

    /// Blocks per morsel, or `None` to leave it to the executor ([`numadb_execution::morsel_blocks_for`]).
    pub fn morsel_blocks(&self) -> Option<usize> {
        self.morsel_blocks
    }

    /// Blocks a scan loop keeps prefetched ahead of the one it reads.
    pub fn prefetch_blocks(&self) -> usize {
        self.prefetch_blocks
    }

    /// `numadb.join_key_filter`.
    pub fn join_key_filter(&self) -> bool {
        self.join_key_filter
    }

    /// `numadb.max_result_mb`: `None` for auto, `Some(0)` for no limit.
    pub fn max_result_mb(&self) -> Option<u64> {
        self.max_result_mb
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numadb_settings_are_checked_and_select_a_scheduler() {
        let mut settings = Settings::default();
        settings.set("numadb.stealing", "NEIGHBOR(11)+batch(4)").unwrap();
        settings.set("numadb.binding", "always").unwrap();
        settings.set("NUMADB.WORKERS", "half").unwrap();
        let config = settings.scheduler_config();
        assert_eq!(config.stealing.to_string(), "neighbor(11)+batch(4)");
        assert_eq!(config.binding, Binding::Always);
        assert_eq!(config.layout, WorkerLayout::HalfCores);
        let error = settings.set("numadb.binding", "sometimes").unwrap_err();
        assert_eq!(error.sqlstate, "22023");
        assert!(settings.set("numadb.nonsense", "1").unwrap_err().message.contains("unrecognized"));
        assert_eq!(settings.set("server_version", "16").unwrap_err().sqlstate, "42501");
        settings.set("statement_timeout", "2s").unwrap();
        assert_eq!(settings.get("statement_timeout").unwrap(), "2000");
        assert_eq!(settings.statement_timeout(), Some(Duration::from_secs(2)));
        for bad in ["Infinity", "NaN", "-1", "1e300", "3000000min", "soon"] {
            let error = settings.set("statement_timeout", bad).unwrap_err();
            assert_eq!(error.sqlstate, "22023", "{bad}");
        }
        assert_eq!(settings.statement_timeout(), Some(Duration::from_secs(2)), "a refused value changes nothing");
        assert!(settings.set("numadb.morsel_rows", "1000").is_err());
        // By default the executor picks the size; a value fixes it, and `auto` (any case) gives it back.
        assert_eq!(Settings::default().get("numadb.morsel_rows").unwrap(), "auto");
        assert_eq!(Settings::default().morsel_blocks(), None);
        settings.set("numadb.morsel_rows", "16384").unwrap();
        assert_eq!(settings.morsel_blocks(), Some(16));
        settings.set("numadb.morsel_rows", " AUTO ").unwrap();
        assert_eq!(settings.get("numadb.morsel_rows").unwrap(), "auto");
        assert_eq!(settings.morsel_blocks(), None);
        // The advertised prefetch default is the storage's, and the range is checked.
        let default_blocks: usize = Settings::default().get("numadb.scan_prefetch_blocks").unwrap().parse().unwrap();
        assert_eq!(default_blocks, numadb_storage::PREFETCH_BLOCKS_DEFAULT);
        assert_eq!(Settings::default().prefetch_blocks(), numadb_storage::PREFETCH_BLOCKS_DEFAULT);
        for bad in ["9", "-1", "two", ""] {
            assert_eq!(settings.set("numadb.scan_prefetch_blocks", bad).unwrap_err().sqlstate, "22023", "{bad}");
        }
        let described = KNOWN.iter().find(|k| k.name == "numadb.scan_prefetch_blocks").unwrap().description;
        assert!(described.contains(&format!("at most {}", numadb_storage::PREFETCH_BLOCKS_MAX)), "{described}");
        settings.set("numadb.scan_prefetch_blocks", " 0 ").unwrap();
        assert_eq!(settings.prefetch_blocks(), 0);
        settings.reset(Some("numadb.scan_prefetch_blocks"));
        assert_eq!(settings.prefetch_blocks(), numadb_storage::PREFETCH_BLOCKS_DEFAULT);
        settings.reset(Some("numadb.binding"));
        assert_eq!(settings.get("numadb.binding").unwrap(), "opportunistic");
        settings.set("application_name", "psql").unwrap();
        assert_eq!(settings.get("Application_Name").unwrap(), "psql");
    }
}
