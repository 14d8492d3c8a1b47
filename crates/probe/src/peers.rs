//! Peers in the same run: likwid-bench beside the prober's own bandwidth kernels, and the latency cross-checks.
//!
//! Figures measured on different days on a shared VM are not comparable; a ratio measured in one run is. So
//! `numadb probe peers` runs likwid-bench's load and copy kernels (hand-written assembly per ISA, the
//! strongest independent bandwidth reference available as a Debian package) with the same total buffer and
//! thread count as the prober, back to back, and prints the ratio. likwid-bench's `-w S0:SIZE:N` runs N threads on
//! the first N hardware threads of socket 0 with SIZE split between them and first-touched by the first thread;
//! the prober's side uses the same CPUs with the same split, buffers bound to the CPUs' node.
//!
//! The latency cross-checks need no foreign tool: the cache curve's L1 plateau against the documented load-to-use
//! latency in cycles (the core clock measured with a dependent-add chain, see [`crate::clock`]), and the curve's
//! DRAM plateau against the latency matrix's local cell at the same stride, window and page size.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How long one likwid-bench run may take before it is killed (it normally runs about a second).
pub const LIKWID_TIMEOUT: Duration = Duration::from_secs(120);
/// Agreement tolerance of the latency cross-checks.
pub const CROSS_CHECK_TOLERANCE: f64 = 0.03;
/// likwid-bench's read kernels, widest first.
pub const LIKWID_READ_KERNELS: [&str; 4] = ["load_avx512", "load_avx", "load_sse", "load"];
/// likwid-bench's copy kernels, widest first.
pub const LIKWID_COPY_KERNELS: [&str; 4] = ["copy_avx512", "copy_avx", "copy_sse", "copy"];

/// The likwid-bench executable, if installed.
pub fn likwid_bench() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("likwid-bench")).find(|candidate| candidate.is_file())
}

/// The kernels this likwid-bench offers (`likwid-bench -a`).
pub fn likwid_kernels(binary: &PathBuf) -> Vec<String> {
    Command::new(binary)
        .arg("-a")
        .output()
        .map(|output| {
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .filter_map(|line| line.split_once(" - ").map(|(name, _)| name.trim().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// One likwid-bench run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LikwidRun {
    /// The kernel (`load_avx512`).
    pub kernel: String,
    /// The workgroup argument (`S0:1000000kB:2`).
    pub workgroup: String,
    /// Its reported MByte/s (10^6 bytes), or why there is none.
    pub mb_per_s: Result<f64, String>,
}

/// Runs `likwid-bench -t KERNEL -w S0:SIZEkB:THREADS` and parses its MByte/s.
pub fn run_likwid(binary: &PathBuf, kernel: &str, total_bytes: usize, threads: usize) -> LikwidRun {
    // likwid's kB is 1000 bytes.
    let workgroup = format!("S0:{}kB:{threads}", total_bytes / 1000);
    let mb_per_s = run_bounded(Command::new(binary).args(["-t", kernel, "-w", &workgroup]), LIKWID_TIMEOUT)
        .and_then(|stdout| parse_likwid_mbytes(&stdout).ok_or_else(|| format!("no MByte/s in its output: {stdout}")));
    LikwidRun { kernel: kernel.to_string(), workgroup, mb_per_s }
}

/// Runs a command with a time limit; returns its standard output, or why it failed.
fn run_bounded(command: &mut Command, limit: Duration) -> Result<String, String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start: {e}"))?;
    let started = Instant::now();
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => {
                let mut stdout = String::new();
                let mut stderr = String::new();
                if let Some(mut out) = child.stdout.take() {
                    let _ = out.read_to_string(&mut stdout);
                }
                if let Some(mut err) = child.stderr.take() {
                    let _ = err.read_to_string(&mut stderr);
                }
                return if status.success() {
                    Ok(stdout)
                } else {
                    Err(format!("exited with {status}: {}", stderr.trim()))
                };
            }
            None if started.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("killed after {limit:?}"));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The `MByte/s:` figure of likwid-bench's output.
pub fn parse_likwid_mbytes(stdout: &str) -> Option<f64> {
    stdout
        .lines()
        .find_map(|line| line.trim().strip_prefix("MByte/s:"))
        .and_then(|value| value.trim().parse::<f64>().ok())
}

/// The best figure among runs.
pub fn best(runs: &[LikwidRun]) -> Option<(&LikwidRun, f64)> {
    runs.iter().filter_map(|run| run.mb_per_s.as_ref().ok().map(|&v| (run, v))).max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The kernel with the highest median over its runs, and that median (a kernel run several times counts once).
pub fn best_by_median(runs: &[LikwidRun]) -> Option<(String, f64)> {
    let mut kernels: Vec<&str> = runs.iter().map(|r| r.kernel.as_str()).collect();
    kernels.sort_unstable();
    kernels.dedup();
    kernels
        .into_iter()
        .filter_map(|kernel| {
            let values: Vec<f64> =
                runs.iter().filter(|r| r.kernel == kernel).filter_map(|r| r.mb_per_s.as_ref().ok().copied()).collect();
            Some((kernel.to_string(), crate::stats::Summary::of(&values)?.median))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// A measured figure against a reference, with the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CrossCheck {
    /// What is compared.
    pub what: String,
    /// The prober's figure.
    pub measured: f64,
    /// The reference.
    pub reference: f64,
    /// `measured / reference`.
    pub ratio: f64,
    /// Whether the ratio is within the tolerance of 1.
    pub agrees: bool,
    /// The tolerance.
    pub tolerance: f64,
}

impl CrossCheck {
    /// Compares `measured` with `reference`.
    pub fn new(what: impl Into<String>, measured: f64, reference: f64, tolerance: f64) -> CrossCheck {
        let ratio = measured / reference;
        CrossCheck {
            what: what.into(),
            measured,
            reference,
            ratio,
            agrees: (ratio - 1.0).abs() <= tolerance,
            tolerance,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "Cycles:\t\t\t2851622664\nTime:\t\t\t1.096860e+00 sec\nData volume (Byte):\t32000000000\nMByte/s:\t\t29174.19\nCycles per update:\t0.712906\n";

    #[test]
    fn likwid_output_is_parsed() {
        assert_eq!(parse_likwid_mbytes(OUTPUT), Some(29174.19));
        assert_eq!(parse_likwid_mbytes("nothing here"), None);
    }

    #[test]
    fn the_best_run_wins_and_failures_are_skipped() {
        let runs = vec![
            LikwidRun { kernel: "load".into(), workgroup: "S0:1kB:1".into(), mb_per_s: Ok(10.0) },
            LikwidRun { kernel: "load_avx".into(), workgroup: "S0:1kB:1".into(), mb_per_s: Err("x".into()) },
            LikwidRun { kernel: "load_sse".into(), workgroup: "S0:1kB:1".into(), mb_per_s: Ok(12.0) },
        ];
        assert_eq!(best(&runs).unwrap().0.kernel, "load_sse");
        assert!(best(&[]).is_none());
        let mut repeated = runs.clone();
        repeated.push(LikwidRun { kernel: "load_sse".into(), workgroup: "S0:1kB:1".into(), mb_per_s: Ok(8.0) });
        repeated.push(LikwidRun { kernel: "load_sse".into(), workgroup: "S0:1kB:1".into(), mb_per_s: Ok(9.0) });
        // load_sse's median (9) is now below load's single run (10).
        assert_eq!(best_by_median(&repeated), Some(("load".to_string(), 10.0)));
    }

    #[test]
    fn cross_checks_compare_ratios() {
        let check = CrossCheck::new("L1", 5.1, 5.0, CROSS_CHECK_TOLERANCE);
        assert!(check.agrees);
        assert!((check.ratio - 1.02).abs() < 1e-9);
        assert!(!CrossCheck::new("DRAM", 150.0, 140.0, CROSS_CHECK_TOLERANCE).agrees);
    }

    #[test]
    fn a_command_that_hangs_is_killed() {
        let result = run_bounded(Command::new("sleep").arg("10"), Duration::from_millis(200));
        assert!(result.unwrap_err().contains("killed"));
        assert_eq!(run_bounded(Command::new("echo").arg("hi"), LIKWID_TIMEOUT).unwrap(), "hi\n");
    }
}
