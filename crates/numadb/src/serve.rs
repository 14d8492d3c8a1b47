//! `numadb serve`: the PostgreSQL wire-protocol server.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use numadb_server::auth::Verifier;
use numadb_server::{Authentication, Server, ServerConfig};
use numadb_sql::Database;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Serve numadb over the PostgreSQL protocol: psql, pgbench, psycopg, JDBC, tokio-postgres
/// and other clients connect unchanged.
///
///   numadb serve --load-thesis 5000000       # then, in another terminal:
///   psql -h 127.0.0.1 -p 5432 -U me          # any user and database (trust)
///   => \dt                                   -- TBL_0, TBL_1
///   => SELECT "C1" FROM "TBL_0" WHERE "C0" = 42;
///   => SELECT * FROM numadb.placement;       -- where every partition is
///   pgbench -h 127.0.0.1 -n -M prepared -f lookup.sql -c 8 -T 10
///
/// Supported: the simple and extended query protocols (named and unnamed statements and
/// portals, text and binary formats), PREPARE/EXECUTE, SET/SHOW (numadb.stealing,
/// numadb.binding, numadb.workers, statement_timeout, ...), COPY ... FROM STDIN, psql's \d,
/// \dt, \di, \dv, \dn and \l, cancel requests, SCRAM-SHA-256. TLS is not offered (clients
/// with sslmode=prefer go on in the clear; keep the default 127.0.0.1 or a trusted network).
/// numadb has no transactions: BEGIN/COMMIT/ROLLBACK are accepted, statements take effect at
/// once.
///
/// SIGTERM or SIGINT shuts down gracefully: no new connections, idle sessions end, running
/// statements get --shutdown-grace to finish and are then cancelled; the exit status is 0.
/// A second signal cancels at once.
#[derive(Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct ServeArgs {
    /// Address to listen on (host:port). Use 0.0.0.0:5432 to accept other machines' clients (with a password).
    #[arg(long, default_value = "127.0.0.1:5432", value_name = "HOST:PORT")]
    listen: String,
    /// Sessions served at once; the next client is refused with SQLSTATE 53300.
    #[arg(long, default_value_t = 100, value_name = "N")]
    max_connections: usize,
    /// Require SCRAM-SHA-256 authentication for this user (with --password).
    #[arg(long, value_name = "NAME", requires = "password")]
    user: Option<String>,
    /// The password of --user (or set NUMADB_PASSWORD).
    #[arg(long, env = "NUMADB_PASSWORD", hide_env_values = true, value_name = "PASSWORD")]
    password: Option<String>,
    /// Require SCRAM-SHA-256 authentication for the users in this file: one `user:secret` per line, where the
    /// secret is a password or a SCRAM verifier (`SCRAM-SHA-256$4096:salt$StoredKey:ServerKey`, as
    /// PostgreSQL's pg_authid stores them or --print-verifier prints them). Lines starting with # are comments.
    #[arg(long, value_name = "FILE")]
    password_file: Option<PathBuf>,
    /// Print the SCRAM verifier of --password (for a password file) and exit.
    #[arg(long, requires = "password")]
    print_verifier: bool,
    /// Start by creating the thesis tables TBL_0 and TBL_1 with N rows each (C0 = 1..N, C1..C6 uniform in 1..N).
    #[arg(long, value_name = "N")]
    load_thesis: Option<u64>,
    /// Seed of the generated data.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// On shutdown, how long running statements may continue before they are cancelled.
    #[arg(long, default_value = "5s", value_parser = parse_duration, value_name = "DURATION")]
    shutdown_grace: Duration,
    /// How long a client has to authenticate.
    #[arg(long, default_value = "60s", value_parser = parse_duration, value_name = "DURATION")]
    startup_timeout: Duration,
    /// The largest message a client may send, in bytes.
    #[arg(long, default_value_t = 256 << 20, value_name = "BYTES")]
    max_message_bytes: usize,
}

/// `500ms`, `5s`, `2min` or plain seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, scale) = if let Some(n) = text.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = text.strip_suffix("min") {
        (n, 60.0)
    } else if let Some(n) = text.strip_suffix('s') {
        (n, 1.0)
    } else {
        (text, 1.0)
    };
    let value: f64 = number.trim().parse().map_err(|_| format!("\"{text}\" is not a duration (500ms, 5s, 2min)"))?;
    if !(0.0..=86_400.0).contains(&value) {
        return Err(format!("\"{text}\" is out of range"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

fn read_password_file(path: &PathBuf) -> anyhow::Result<BTreeMap<String, Verifier>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut users = BTreeMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((user, secret)) = line.split_once(':') else {
            bail!("{}:{}: expected user:secret", path.display(), number + 1);
        };
        let verifier =
            Verifier::from_secret(secret).map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), number + 1))?;
        users.insert(user.to_string(), verifier);
    }
    if users.is_empty() {
        bail!("{} names no user", path.display());
    }
    Ok(users)
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    if args.print_verifier {
        let password = args.password.as_deref().unwrap_or_default();
        outln!("{}", Verifier::from_password(password));
        return Ok(());
    }
    let mut users = match &args.password_file {
        Some(path) => read_password_file(path)?,
        None => BTreeMap::new(),
    };
    if let (Some(user), Some(password)) = (&args.user, &args.password) {
        users.insert(user.clone(), Verifier::from_password(password));
    } else if args.password.is_some() && args.password_file.is_none() {
        bail!("--password needs --user (the user it belongs to)");
    }
    if args.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    let authentication = if users.is_empty() { Authentication::Trust } else { Authentication::Scram(users) };
    let database = Database::new().map_err(|e| anyhow::anyhow!("{e}"))?;
    if let Some(rows) = args.load_thesis {
        let mut session = database.session();
        crate::sql::load_thesis(&mut session, rows, args.seed)?;
    }
    let config = ServerConfig {
        listen: args.listen.clone(),
        max_connections: args.max_connections,
        authentication,
        message_bytes_max: args.max_message_bytes,
        startup_timeout: args.startup_timeout,
        shutdown_grace: args.shutdown_grace,
        ..ServerConfig::default()
    };
    let describe_auth = format!("{:?}", config.authentication);
    let server = Server::bind(database.clone(), config).with_context(|| format!("listening on {}", args.listen))?;
    let address = server.local_addr();
    let handle = server.handle();
    let mut signals = Signals::new([SIGTERM, SIGINT]).context("installing the SIGTERM/SIGINT handlers")?;
    std::thread::Builder::new().name("numadb-signals".into()).spawn(move || {
        let mut received = 0;
        for signal in signals.forever() {
            received += 1;
            let name = if signal == SIGTERM { "SIGTERM" } else { "SIGINT" };
            if received == 1 {
                eprintln!("numadb serve: {name}: shutting down (no new connections; running statements may finish)");
                handle.shutdown();
            } else {
                eprintln!("numadb serve: {name} again: cancelling running statements");
                handle.cancel_all();
            }
        }
    })?;
    eprintln!(
        "numadb serve: listening on {address} (PostgreSQL protocol 3.0, at most {} sessions, {describe_auth} \
         authentication)",
        args.max_connections
    );
    eprintln!("  connect with: psql -h {} -p {} -U $USER", address.ip(), address.port());
    let report = server.run();
    database.shutdown();
    eprintln!(
        "numadb serve: stopped ({} session(s) open at shutdown, {} statement(s) cancelled{})",
        report.sessions,
        report.cancelled,
        if report.abandoned > 0 {
            format!(", {} session(s) did not end in time", report.abandoned)
        } else {
            String::new()
        }
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("2min").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }
}
