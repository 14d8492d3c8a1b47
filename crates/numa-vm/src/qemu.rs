//! Turning a machine description into a QEMU command line, and running it.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use numadb_topology::MachineSpec;

/// How QEMU emulates the CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Accel {
    /// One host thread runs every vCPU: fastest when there are more vCPUs than host cores.
    Single,
    /// One host thread per vCPU (MTTCG): real parallelism, for race coverage.
    Multi,
}

/// The arguments that give QEMU the machine's shape: sockets, CPUs, memory per node and the SLIT matrix.
pub fn topology_args(spec: &MachineSpec) -> anyhow::Result<Vec<String>> {
    spec.validate()?;
    let cpus_per_package = packages_cpu_counts(spec)?;
    let packages = cpus_per_package.len() as u32;
    let cpus_per_socket = cpus_per_package[0];
    let total_cpus = spec.cpu_count();
    let total_mib: u64 = spec.nodes.iter().map(|n| n.memory_mib).sum();
    let mut args = vec![
        "-smp".to_string(),
        format!(
            "{total_cpus},sockets={packages},cores={},threads={}",
            cpus_per_socket / spec.threads_per_core,
            spec.threads_per_core
        ),
        "-m".to_string(),
        format!("{total_mib}M"),
    ];
    for (id, (node, cpus)) in spec.nodes.iter().zip(spec.node_cpus()).enumerate() {
        args.push("-object".into());
        args.push(format!("memory-backend-ram,id=mem{id},size={}M", node.memory_mib));
        args.push("-numa".into());
        match (cpus.first(), cpus.last()) {
            (Some(first), Some(last)) => args.push(format!("node,nodeid={id},cpus={first}-{last},memdev=mem{id}")),
            _ => args.push(format!("node,nodeid={id},memdev=mem{id}")),
        }
    }
    for (from, row) in spec.distances.iter().enumerate() {
        for (to, &distance) in row.iter().enumerate() {
            if from != to {
                args.push("-numa".into());
                args.push(format!("dist,src={from},dst={to},val={distance}"));
            }
        }
    }
    Ok(args)
}

/// QEMU gives every socket the same number of CPUs, in order; check the description fits that.
fn packages_cpu_counts(spec: &MachineSpec) -> anyhow::Result<Vec<u32>> {
    let mut counts: Vec<(u32, u32)> = Vec::new();
    for node in spec.nodes.iter().filter(|n| n.cores > 0) {
        let cpus = node.cores * spec.threads_per_core;
        match counts.last_mut() {
            Some((package, count)) if *package == node.package => *count += cpus,
            _ => counts.push((node.package, cpus)),
        }
    }
    for (index, (package, _)) in counts.iter().enumerate() {
        if *package != index as u32 {
            bail!("{}: packages must be numbered 0, 1, 2, … in node order (found package {package})", spec.name);
        }
    }
    if counts.windows(2).any(|pair| pair[0].1 != pair[1].1) {
        bail!("{}: QEMU needs the same number of CPUs in every package", spec.name);
    }
    Ok(counts.into_iter().map(|(_, count)| count).collect())
}

/// Everything needed to boot one guest.
pub struct Boot<'a> {
    pub spec: &'a MachineSpec,
    pub kernel: &'a Path,
    pub initramfs: &'a Path,
    pub kernel_args: Vec<String>,
    pub accel: Accel,
    /// QEMU's `-cpu` model.
    pub cpu: String,
    pub timeout: Duration,
    pub log: &'a Path,
    /// Prefix for the guest's lines echoed to our standard error.
    pub label: String,
}

/// The marker the guest's init prints last.
pub const EXIT_MARKER: &str = "=== GUEST_EXIT_CODE=";

/// Boots the guest, echoes its console, and returns the exit status its script reported.
pub fn boot(boot: &Boot<'_>) -> anyhow::Result<i32> {
    let mut command = Command::new("qemu-system-x86_64");
    let accel = match boot.accel {
        Accel::Single => "tcg,thread=single",
        Accel::Multi => "tcg,thread=multi",
    };
    command
        .args(["-accel", accel, "-cpu", &boot.cpu, "-machine", "q35"])
        .args(topology_args(boot.spec)?)
        .arg("-kernel")
        .arg(boot.kernel)
        .arg("-initrd")
        .arg(boot.initramfs)
        // `maxcpus=1`: the kernel unpacks the initramfs into memory of the node of the CPU it runs on, and with
        // every CPU up that was any node, so a small node could start with most of its memory taken by the test
        // binaries and a test bound there was OOM-killed. With one CPU at boot they always land on node 0 (which
        // the machine descriptions size for it); `/init` brings the other CPUs up before anything else runs.
        .arg("-append")
        .arg(format!("console=ttyS0 quiet panic=-1 maxcpus=1 rdinit=/init {}", boot.kernel_args.join(" ")))
        .args(["-nographic", "-nodefaults", "-no-reboot", "-serial", "stdio", "-monitor", "none"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = command.spawn().context("starting qemu-system-x86_64")?;
    let stdout = child.stdout.take().context("qemu's standard output")?;
    let stderr = child.stderr.take().context("qemu's standard error")?;
    let stderr_reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            text.push_str(&line);
            text.push('\n');
        }
        text
    });

    // A watchdog kills QEMU when the time is up; reading stops when QEMU's output closes.
    let pid = child.id();
    let timeout = boot.timeout;
    let (done_sender, done_receiver) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_receiver.recv_timeout(timeout).is_err() {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            return true;
        }
        false
    });

    let mut log = std::fs::File::create(boot.log).with_context(|| format!("creating {}", boot.log.display()))?;
    let mut exit_code = None;
    for line in BufReader::new(stdout).split(b'\n').map_while(Result::ok) {
        let line = String::from_utf8_lossy(&line).replace('\r', "");
        writeln!(log, "{line}")?;
        eprintln!("[{}] {line}", boot.label);
        if let Some(code) = line.strip_prefix(EXIT_MARKER) {
            exit_code = code.split_whitespace().next().and_then(|c| c.parse::<i32>().ok());
        }
    }
    let status = child.wait().context("waiting for qemu")?;
    let _ = done_sender.send(());
    let timed_out = watchdog.join().unwrap_or(false);
    let qemu_errors = stderr_reader.join().unwrap_or_default();
    if !qemu_errors.trim().is_empty() {
        writeln!(log, "--- qemu standard error ---\n{qemu_errors}")?;
    }
    eprintln!("[{}] guest finished in {:.1} s", boot.label, started.elapsed().as_secs_f64());
    if timed_out {
        bail!("{}: the guest did not finish within {} s (log: {})", boot.label, timeout.as_secs(), boot.log.display());
    }
    match exit_code {
        Some(code) => Ok(code),
        None => bail!(
            "{}: the guest reported no exit status (qemu {status}); {}log: {}",
            boot.label,
            if qemu_errors.trim().is_empty() { String::new() } else { format!("qemu said: {} ", qemu_errors.trim()) },
            boot.log.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(path: &str) -> MachineSpec {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("machines").join(path)).unwrap();
        MachineSpec::from_json(&text).unwrap()
    }

    #[test]
    fn snc_machine_becomes_two_sockets_with_four_nodes() {
        let args = topology_args(&spec("2s-snc2.json")).unwrap();
        let text = args.join(" ");
        assert!(text.starts_with("-smp 4,sockets=2,cores=2,threads=1 -m 2304M"), "{text}");
        assert!(text.contains("-numa node,nodeid=2,cpus=2-2,memdev=mem2"), "{text}");
        assert!(text.contains("memory-backend-ram,id=mem0,size=768M"), "{text}");
        assert!(text.contains("-numa dist,src=0,dst=1,val=11"), "{text}");
        assert!(text.contains("-numa dist,src=3,dst=0,val=21"), "{text}");
        assert_eq!(args.iter().filter(|a| a.starts_with("dist,")).count(), 12);
    }

    #[test]
    fn memory_only_nodes_have_no_cpus_and_smt_is_kept() {
        let text = topology_args(&spec("1s-smt-cxl.json")).unwrap().join(" ");
        assert!(text.starts_with("-smp 4,sockets=1,cores=2,threads=2"), "{text}");
        assert!(text.contains("-numa node,nodeid=1,cpus=2-3,memdev=mem1"), "{text}");
        assert!(text.contains("-numa node,nodeid=2,memdev=mem2 "), "{text}");
    }

    #[test]
    fn asymmetric_distances_are_passed_in_both_directions() {
        let text = topology_args(&spec("8node-asym.json")).unwrap().join(" ");
        assert!(text.contains("dist,src=0,dst=1,val=12"), "{text}");
        assert!(text.contains("dist,src=1,dst=0,val=13"), "{text}");
        assert!(text.contains("dist,src=7,dst=0,val=33"), "{text}");
    }

    #[test]
    fn unequal_sockets_are_refused() {
        let mut machine = spec("2s-snc2.json");
        machine.nodes[3].cores = 2;
        assert!(topology_args(&machine).unwrap_err().to_string().contains("same number of CPUs"));
    }
}
