//! `numadb`: one binary for everything numadb does. Each subcommand lives in its own module; this file only parses
//! the command line and turns errors into a message and an exit status.

/// `print!` to standard output, except that a reader that went away (`numadb … | head`) ends the program quietly
/// with status 0, as it ends a C tool (by SIGPIPE), instead of a panic.
macro_rules! out {
    ($($arg:tt)*) => { $crate::write_stdout(format_args!($($arg)*)) };
}

/// `println!` as [`out!`].
macro_rules! outln {
    () => { $crate::write_stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

mod bench;
mod format;
mod probe;
mod serve;
mod sql;
mod topo;
mod tour;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc, not glibc's malloc: the executor hands rows between operators as vectors of values, so a join or a
/// sort of a million rows is a million small allocations and frees. With mimalloc's per-thread free lists the
/// bench's join (5 M rows) took 64 ms instead of 124 ms. Table columns are not on this heap: they are mapped and
/// placed by `numadb-placement`.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// numadb: a NUMA-aware in-memory column store that also measures the memory system it runs on.
///
/// Start with `numadb tour`: it reads this machine's topology, probes its memory, loads the thesis's tables and
/// runs both thesis workloads under contrasting placements and scheduling policies, in about two minutes, and
/// writes a report. Then go deeper with `numadb topo`, `numadb probe`, `numadb sql` and `numadb bench`.
#[derive(Parser, Debug)]
#[command(name = "numadb", version, about, long_about, propagate_version = true, max_term_width = 110)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Topo(topo::TopoArgs),
    Sql(sql::SqlArgs),
    Serve(serve::ServeArgs),
    Bench(bench::BenchArgs),
    Probe(probe::ProbeArgs),
    Tour(tour::TourArgs),
}

/// What [`out!`] and [`outln!`] do.
fn write_stdout(text: std::fmt::Arguments) {
    use std::io::Write;
    if let Err(error) = std::io::stdout().lock().write_fmt(text) {
        if error.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("numadb: error: cannot write to standard output: {error}");
        std::process::exit(1);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Topo(args) => topo::run(args),
        Command::Sql(args) => sql::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Probe(args) => probe::run(args),
        Command::Tour(args) => tour::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("numadb: error: {error}");
            for cause in error.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::FAILURE
        }
    }
}
