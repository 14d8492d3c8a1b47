//! PostgreSQL as a peer in the same run: a private cluster (initdb in a temporary directory, a free port, no
//! effect on any other PostgreSQL), and pgbench as the client both servers see.
//!
//! Run as root, the cluster belongs to the `postgres` user (initdb refuses root), through `runuser`.

use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// USER_HZ: the unit of CPU times in /proc (100 on every Linux that numadb runs on).
const TICKS_PER_SECOND: f64 = 100.0;

/// Where PostgreSQL's programs are.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The directory of initdb, pg_ctl and postgres.
    pub server: PathBuf,
    /// psql.
    pub psql: PathBuf,
    /// pgbench.
    pub pgbench: PathBuf,
}

fn in_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths).map(|d| d.join(name)).find(|p| p.is_file())
}

impl Binaries {
    /// Finds PostgreSQL: initdb on the PATH, else the newest /usr/lib/postgresql/*/bin (Debian's layout).
    pub fn find() -> Result<Binaries, String> {
        let server =
            in_path("initdb").and_then(|p| p.canonicalize().ok()).and_then(|p| p.parent().map(Path::to_path_buf));
        let server = server.or_else(|| {
            let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
                .ok()?
                .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
                .filter(|p| p.join("initdb").is_file())
                .collect();
            versions.sort_by_key(|p| {
                p.parent().and_then(|v| v.file_name()).and_then(|v| v.to_str()).and_then(|v| v.parse::<u32>().ok())
            });
            versions.pop()
        });
        let server = server.ok_or("PostgreSQL's initdb was not found (apt-get install postgresql)")?;
        let tool = |name: &str| {
            in_path(name)
                .or_else(|| Some(server.join(name)).filter(|p| p.is_file()))
                .ok_or(format!("{name} was not found (apt-get install postgresql-client)"))
        };
        Ok(Binaries { psql: tool("psql")?, pgbench: tool("pgbench")?, server })
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

/// A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon after).
pub fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}

fn running_as_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A private PostgreSQL cluster; stopped and deleted when dropped.
pub struct Cluster {
    binaries: Binaries,
    directory: tempfile::TempDir,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The user the cluster was made for (and that clients connect as).
    pub user: String,
    /// Run PostgreSQL's programs as this user (`runuser`), when numadb runs as root.
    run_as: Option<String>,
    /// The settings it was started with.
    pub settings: Vec<(String, String)>,
}

impl Cluster {
    /// Creates and starts a cluster with `settings` (`postgres -c name=value`).
    pub fn start(binaries: &Binaries, settings: &[(&str, &str)]) -> Result<Cluster, String> {
        let directory = tempfile::Builder::new()
            .prefix("numadb-postgres-")
            .tempdir()
            .map_err(|e| format!("creating a directory for PostgreSQL: {e}"))?;
        let run_as = running_as_root().then(|| "postgres".to_string());
        if let Some(user) = &run_as {
            let status = Command::new("chown").args(["-R", user]).arg(directory.path()).status();
            if !status.is_ok_and(|s| s.success()) {
                return Err(format!(
                    "running as root, PostgreSQL needs a user of its own: chown to {user} failed (is PostgreSQL installed?)"
                ));
            }
        }
        let cluster = Cluster {
            binaries: binaries.clone(),
            port: free_port()?,
            user: "bench".into(),
            run_as,
            settings: settings.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(),
            directory,
        };
        let data = cluster.data();
        cluster.run(
            "initdb",
            &["-D", &data, "-A", "trust", "-U", &cluster.user, "-E", "UTF8", "--locale", "C", "--no-sync"],
        )?;
        let mut options =
            format!("-p {} -k {} -c listen_addresses=127.0.0.1", cluster.port, cluster.directory.path().display());
        for (name, value) in &cluster.settings {
            options.push_str(&format!(" -c {name}={value}"));
        }
        let log = cluster.directory.path().join("postgres.log").display().to_string();
        cluster.run("pg_ctl", &["-D", &data, "-o", &options, "-l", &log, "-w", "-t", "60", "start"]).map_err(|e| {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            format!("{e}\n{log}")
        })?;
        Ok(cluster)
    }

    fn data(&self) -> String {
        self.directory.path().join("data").display().to_string()
    }

    fn command(&self, program: &Path) -> Command {
        match &self.run_as {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(program);
                command
            }
            None => Command::new(program),
        }
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let output = self
            .command(&self.binaries.server.join(program))
            .args(args)
            .current_dir(self.directory.path())
            .output()
            .map_err(|e| format!("running {program}: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "{program} failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Runs SQL through psql over TCP; its unaligned, tuples-only output.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let output = Command::new(&self.binaries.psql)
            .args(["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", &self.user, "-d", "postgres", "-c", sql])
            .output()
            .map_err(|e| format!("running psql: {e}"))?;
        if !output.status.success() {
            return Err(format!("psql failed on {sql}: {}", String::from_utf8_lossy(&output.stderr)));
        }
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    }

    /// `COPY … FROM STDIN` with the data `write` produces.
    pub fn copy_in(&self, copy: &str, write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>) -> Result<(), String> {
        let mut child = Command::new(&self.binaries.psql)
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", &self.user, "-d", "postgres", "-c", copy])
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
        std::fs::read_to_string(self.directory.path().join("data/postmaster.pid"))
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

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    }
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
