//! PostgreSQL as a peer in the same run: a throwaway cluster of its own ([`TempPostgres`]: initdb in a temporary
//! directory, a free port, no effect on any other PostgreSQL on the machine), its client programs ([`Binaries`]),
//! and pgbench as the client both servers see ([`pgbench`]).
//!
//! Run as root, the cluster belongs to the `postgres` account (PostgreSQL refuses to run as root).

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// USER_HZ: the unit of CPU times in /proc (100 on every Linux that numadb runs on).
const TICKS_PER_SECOND: f64 = 100.0;

/// Where PostgreSQL's programs are.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The directory of initdb, pg_ctl and postgres ([`TempPostgres::find_binaries`]).
    pub server: PathBuf,
    /// psql.
    pub psql: PathBuf,
    /// pgbench.
    pub pgbench: PathBuf,
}

impl Binaries {
    /// Finds the server's programs and the clients psql and pgbench (on `PATH`, else beside the server's).
    pub fn find() -> Result<Binaries, String> {
        let server = TempPostgres::find_binaries().map_err(|e| e.to_string())?;
        Ok(Binaries { psql: client_program(&server, "psql")?, pgbench: client_program(&server, "pgbench")?, server })
    }

    /// `postgres --version`.
    pub fn version(&self) -> String {
        Command::new(self.server.join("postgres"))
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "PostgreSQL (unknown version)".into())
    }
}

/// A client program on `PATH`, else in the server's directory (Debian's layout keeps pgbench there).
fn client_program(server: &Path, name: &str) -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .and_then(|paths| std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file()))
        .or_else(|| Some(server.join(name)).filter(|p| p.is_file()))
        .ok_or(format!("{name} was not found (apt-get install postgresql-client postgresql)"))
}

/// Why a temporary PostgreSQL could not be started.
#[derive(Debug, thiserror::Error)]
pub enum TempPostgresError {
    /// No PostgreSQL server binaries on this machine.
    #[error("PostgreSQL is not installed: {0}")]
    NotInstalled(String),
    /// They are there, but the cluster did not start.
    #[error("starting a temporary PostgreSQL failed: {0}")]
    Failed(String),
}

/// The account the server runs as when we are root (PostgreSQL refuses to run as root).
#[derive(Debug, Clone)]
struct Account {
    name: String,
    uid: u32,
    gid: u32,
}

/// A PostgreSQL cluster of its own in a temporary directory, listening on a Unix socket in that directory and on a
/// free localhost port, with trust authentication for the `postgres` superuser; stopped and deleted on drop.
///
/// PostgreSQL refuses to run as root. Run as root, the cluster belongs to the `postgres` account (which Debian's
/// package creates), or `nobody` when there is none: the directory is given to that account and `initdb` and
/// `pg_ctl` run under its uid and gid (with no supplementary groups), so nothing else on the machine changes.
///
/// Beyond the defaults the cluster has `max_connections = 200` (the driver opens up to 56 and more) and the
/// durability settings of a throwaway cluster (`fsync`, `synchronous_commit` and `full_page_writes` off,
/// `wal_level = minimal`): they make loading faster and do not touch the read-only workloads. Query settings
/// (`shared_buffers`, `work_mem`, parallelism) are PostgreSQL's defaults.
#[derive(Debug)]
pub struct TempPostgres {
    bin: PathBuf,
    settings: Vec<(String, String)>,
    data: PathBuf,
    port: u16,
    account: Option<Account>,
    version: String,
    // Declared last, so it is removed after `drop` has stopped the server.
    directory: tempfile::TempDir,
}

/// What the cluster adds to `postgresql.conf`.
const TEMP_SETTINGS: &str = "
listen_addresses = '127.0.0.1'
max_connections = 200
fsync = off
synchronous_commit = off
full_page_writes = off
wal_level = minimal
max_wal_senders = 0
";

impl TempPostgres {
    /// Starts a cluster with the binaries of [`TempPostgres::find_binaries`].
    pub fn start() -> Result<Self, TempPostgresError> {
        Self::start_with(&[])
    }

    /// Starts a cluster with `settings` added to (and overriding) its `postgresql.conf`.
    pub fn start_with(settings: &[(&str, &str)]) -> Result<Self, TempPostgresError> {
        let failed = TempPostgresError::Failed;
        let bin = Self::find_binaries()?;
        let account = if running_as_root() { Some(unprivileged_account().map_err(failed)?) } else { None };
        let directory = tempfile::Builder::new()
            .prefix("numadb-postgres-")
            .tempdir()
            .map_err(|e| failed(format!("creating a temporary directory: {e}")))?;
        if let Some(account) = &account {
            std::os::unix::fs::chown(directory.path(), Some(account.uid), Some(account.gid))
                .map_err(|e| failed(format!("giving {} to {}: {e}", directory.path().display(), account.name)))?;
        }
        let data = directory.path().join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb.arg("-D").arg(&data).args(["-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "-N"]);
        run_as(&mut initdb, account.as_ref(), directory.path()).map_err(|e| failed(format!("initdb: {e}")))?;
        let quote = |value: &str| format!("'{}'", value.replace('\'', "''"));
        let mut conf =
            format!("{TEMP_SETTINGS}unix_socket_directories = {}\n", quote(&directory.path().display().to_string()));
        for (name, value) in settings {
            conf.push_str(&format!("{name} = {}\n", quote(value)));
        }
        // What it runs with beyond PostgreSQL's defaults: the throwaway cluster's settings, then the caller's.
        let mut effective: Vec<(String, String)> = TEMP_SETTINGS
            .lines()
            .filter_map(|line| line.split_once(" = "))
            .filter(|(name, _)| *name != "listen_addresses")
            .map(|(name, value)| (name.to_string(), value.to_string()))
            .collect();
        for (name, value) in settings {
            effective.retain(|(n, _)| n != name);
            effective.push((name.to_string(), value.to_string()));
        }
        let settings = effective;
        std::fs::OpenOptions::new()
            .append(true)
            .open(data.join("postgresql.conf"))
            .and_then(|mut f| f.write_all(conf.as_bytes()))
            .map_err(|e| failed(format!("writing postgresql.conf: {e}")))?;
        let log = directory.path().join("postgres.log");
        // A free port can be taken between our look and the server's bind: try a few.
        let mut last_error = String::new();
        for _ in 0..4 {
            let port = free_port().map_err(failed)?;
            let mut pg_ctl = Command::new(bin.join("pg_ctl"));
            pg_ctl
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(&log)
                .args(["-w", "-t", "60", "-s", "-o"])
                .arg(format!("-p {port}"))
                .arg("start");
            match run_as(&mut pg_ctl, account.as_ref(), directory.path()) {
                Ok(()) => {
                    let mut server =
                        TempPostgres { bin, settings, data, port, account, version: String::new(), directory };
                    server.version = server.connect_and_ask_version().map_err(failed)?;
                    return Ok(server);
                }
                Err(error) => {
                    // pg_ctl may have given up waiting on a server that did start: make sure none is left behind.
                    let mut stop = Command::new(bin.join("pg_ctl"));
                    stop.arg("-D").arg(&data).args(["-m", "immediate", "-s", "stop"]);
                    let _ = run_as(&mut stop, account.as_ref(), directory.path());
                    let log_text = std::fs::read_to_string(&log).unwrap_or_default();
                    let tail: Vec<&str> = log_text.lines().rev().take(8).collect();
                    last_error = format!(
                        "pg_ctl start: {error}; log: {}",
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    );
                    if !log_text.contains("could not bind") && !log_text.contains("already in use") {
                        break;
                    }
                }
            }
        }
        Err(failed(last_error))
    }

    /// The directory holding PostgreSQL's `initdb`, `pg_ctl` and `postgres`: `NUMADB_POSTGRES_BIN`, the directory
    /// of an `initdb` on `PATH` (symbolic links followed), or the newest `/usr/lib/postgresql/*/bin` (Debian's
    /// layout, which keeps the server binaries off `PATH`).
    pub fn find_binaries() -> Result<PathBuf, TempPostgresError> {
        let complete = |dir: &Path| ["initdb", "pg_ctl", "postgres"].iter().all(|b| dir.join(b).is_file());
        if let Some(dir) = std::env::var_os("NUMADB_POSTGRES_BIN") {
            let dir = PathBuf::from(dir);
            return if complete(&dir) {
                Ok(dir)
            } else {
                Err(TempPostgresError::NotInstalled(format!(
                    "NUMADB_POSTGRES_BIN={} lacks initdb, pg_ctl or postgres",
                    dir.display()
                )))
            };
        }
        let on_path = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter_map(|dir| std::fs::canonicalize(dir.join("initdb")).ok())
            .filter_map(|initdb| initdb.parent().map(Path::to_path_buf));
        let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter_map(|e| {
                        let version = e.file_name().to_str()?.split('.').next()?.parse::<u32>().ok()?;
                        Some((version, e.path().join("bin")))
                    })
                    .collect()
            })
            .unwrap_or_default();
        debian.sort_by_key(|(version, _)| std::cmp::Reverse(*version));
        on_path.chain(debian.into_iter().map(|(_, dir)| dir)).find(|dir| complete(dir)).ok_or_else(|| {
            TempPostgresError::NotInstalled(
                "no initdb, pg_ctl and postgres on PATH or in /usr/lib/postgresql/*/bin; install the postgresql \
                 package (make deps)"
                    .into(),
            )
        })
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`: TCP over loopback, as clients of a `numadb serve` connect.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of the Unix socket (`host=` of a key-value connection string), which is also the cluster's.
    pub fn socket_directory(&self) -> &Path {
        self.directory.path()
    }

    /// The server's version (`SHOW server_version`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The account the server runs as when this process is root (`None` otherwise: it runs as us).
    pub fn account(&self) -> Option<&str> {
        self.account.as_ref().map(|a| a.name.as_str())
    }

    /// The user clients connect as (a superuser, trusted).
    pub fn user(&self) -> &str {
        "postgres"
    }

    /// The settings it runs with beyond PostgreSQL's defaults: the throwaway cluster's durability and connection
    /// settings, and those it was started with.
    pub fn settings(&self) -> &[(String, String)] {
        &self.settings
    }

    fn connect_and_ask_version(&self) -> Result<String, String> {
        let mut client = postgres::Client::connect(&self.url(), postgres::NoTls)
            .map_err(|e| format!("connecting to the new cluster: {e}"))?;
        let rows = client.simple_query("SHOW server_version").map_err(|e| e.to_string())?;
        rows.iter()
            .find_map(|message| match message {
                postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_string),
                _ => None,
            })
            .ok_or_else(|| "SHOW server_version returned no row".into())
    }

    fn psql_command(&self) -> Result<Command, String> {
        let mut command = Command::new(client_program(&self.bin, "psql")?);
        command.args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", &self.port.to_string()]).args([
            "-U",
            self.user(),
            "-d",
            "postgres",
        ]);
        Ok(command)
    }

    /// Runs SQL through psql over TCP; its unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let output =
            self.psql_command()?.args(["-At", "-c", sql]).output().map_err(|e| format!("running psql: {e}"))?;
        if !output.status.success() {
            return Err(format!("psql failed on {sql}: {}", String::from_utf8_lossy(&output.stderr)));
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    }

    /// `COPY … FROM STDIN` through psql with the data `write` produces.
    pub fn copy_in(&self, copy: &str, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
        let mut child = self
            .psql_command()?
            .args(["-c", copy])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("running psql: {e}"))?;
        let mut stdin = std::io::BufWriter::with_capacity(1 << 20, child.stdin.take().ok_or("no stdin")?);
        let written = write(&mut stdin).and_then(|()| stdin.flush());
        drop(stdin);
        let output = child.wait_with_output().map_err(|e| e.to_string())?;
        if written.is_err() || !output.status.success() {
            return Err(format!("COPY into PostgreSQL failed: {}", String::from_utf8_lossy(&output.stderr)));
        }
        Ok(())
    }

    fn postmaster(&self) -> Option<u32> {
        std::fs::read_to_string(self.data.join("postmaster.pid"))
            .ok()
            .and_then(|text| text.lines().next().and_then(|l| l.trim().parse::<u32>().ok()))
    }

    /// The postmaster's children now (its background processes, and the backends of open connections).
    pub fn children(&self) -> Vec<u32> {
        self.postmaster().map_or_else(Vec::new, children_of)
    }

    /// CPU seconds the postmaster and its ended children used, once the children not in `keep` (the backends of
    /// connections that just closed) have ended and been counted (waiting up to five seconds for them).
    pub fn cpu_seconds(&self, keep: &[u32]) -> f64 {
        let Some(pid) = self.postmaster() else { return 0.0 };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while children_of(pid).iter().any(|c| !keep.contains(c)) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        process_cpu_seconds(pid, true)
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        let mut pg_ctl = Command::new(self.bin.join("pg_ctl"));
        pg_ctl.arg("-D").arg(&self.data).args(["-m", "fast", "-w", "-t", "60", "-s", "stop"]);
        if let Err(error) = run_as(&mut pg_ctl, self.account.as_ref(), self.directory.path()) {
            eprintln!("stopping the temporary PostgreSQL in {}: {error}", self.directory.path().display());
        }
    }
}

/// Runs a command to completion as `account` (or as us), in `directory` (the account may not be allowed into our
/// working directory); its output in the error when it fails.
fn run_as(command: &mut Command, account: Option<&Account>, directory: &Path) -> Result<(), String> {
    command.current_dir(directory).stdin(Stdio::null());
    if let Some(account) = account {
        // std drops supplementary groups when root changes uid.
        command.uid(account.uid).gid(account.gid);
    }
    let output = command.output().map_err(|e| format!("{}: {e}", command.get_program().to_string_lossy()))?;
    if output.status.success() {
        return Ok(());
    }
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    Err(format!("{} ({})", text.trim(), output.status))
}

/// Whether this process runs as root (`/proc/self` belongs to the effective user).
fn running_as_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `postgres` from `/etc/passwd`, else `nobody`.
fn unprivileged_account() -> Result<Account, String> {
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(|e| format!("/etc/passwd: {e}"))?;
    let accounts: Vec<Account> = passwd
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            Some(Account {
                name: fields.first()?.to_string(),
                uid: fields.get(2)?.parse().ok()?,
                gid: fields.get(3)?.parse().ok()?,
            })
        })
        .collect();
    ["postgres", "nobody"]
        .iter()
        .find_map(|name| accounts.iter().find(|a| a.name == *name && a.uid != 0).cloned())
        .ok_or_else(|| {
            "running as root, and there is neither a postgres nor a nobody account to run PostgreSQL as".into()
        })
}

/// A port on 127.0.0.1 that nothing listens on now (the caller binds it soon after).
pub fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

/// The processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).ok().is_some_and(|stat| {
                stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}

/// CPU seconds (user + system) a process used, and with `children` those of its children it has reaped.
pub fn process_cpu_seconds(pid: u32, children: bool) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return 0.0 };
    // Fields after the command name (which may hold spaces, in parentheses).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { return 0.0 };
    let fields: Vec<f64> = rest.split_whitespace().map(|f| f.parse().unwrap_or(0.0)).collect();
    // utime, stime, cutime, cstime are fields 14..17 of the line, 12..15 after the name and state.
    let ticks = fields.get(11).unwrap_or(&0.0) + fields.get(12).unwrap_or(&0.0);
    let child_ticks = if children { fields.get(13).unwrap_or(&0.0) + fields.get(14).unwrap_or(&0.0) } else { 0.0 };
    (ticks + child_ticks) / TICKS_PER_SECOND
}

/// What pgbench reported.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PgbenchRun {
    /// Transactions per second, without connection time.
    pub tps: f64,
    /// Transactions processed.
    pub transactions: u64,
    /// Failed transactions.
    pub failed: u64,
    /// Average latency in milliseconds.
    pub latency_ms: f64,
}

/// How long pgbench runs.
#[derive(Debug, Clone, Copy)]
pub enum Length {
    /// `-T`.
    Seconds(u64),
    /// `-t` per client.
    Transactions(u64),
}

/// Runs pgbench with one script against a server on 127.0.0.1.
#[allow(clippy::too_many_arguments)]
pub fn pgbench(
    binaries: &Binaries,
    port: u16,
    user: &str,
    database: &str,
    protocol: &str,
    clients: usize,
    threads: usize,
    length: Length,
    script: &Path,
) -> Result<PgbenchRun, String> {
    let mut command = Command::new(&binaries.pgbench);
    command.args(["-n", "-h", "127.0.0.1", "-p", &port.to_string(), "-U", user, "-M", protocol]).args([
        "-c",
        &clients.to_string(),
        "-j",
        &threads.min(clients).to_string(),
    ]);
    match length {
        Length::Seconds(seconds) => command.args(["-T", &seconds.to_string()]),
        Length::Transactions(count) => command.args(["-t", &count.to_string()]),
    };
    let output = command.arg("-f").arg(script).arg(database).output().map_err(|e| format!("running pgbench: {e}"))?;
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        return Err(format!("pgbench failed:\n{text}"));
    }
    let number = |prefix: &str| -> Option<f64> {
        text.lines().find_map(|line| {
            let rest = line.trim().strip_prefix(prefix)?;
            rest.trim().split(|c: char| c.is_whitespace() || c == '/').next()?.parse().ok()
        })
    };
    Ok(PgbenchRun {
        tps: number("tps =").ok_or_else(|| format!("no tps in pgbench's output:\n{text}"))?,
        transactions: number("number of transactions actually processed:").unwrap_or(0.0) as u64,
        failed: number("number of failed transactions:").unwrap_or(0.0) as u64,
        latency_ms: number("latency average =").unwrap_or(f64::NAN),
    })
}
