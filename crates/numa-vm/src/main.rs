//! `numa-vm`: numadb's emulated multi-node test harness.
//!
//! numadb's claims about placement and pinning must be tested on machines with several NUMA nodes, but developers
//! and CI have one-node machines. This tool boots a stock Debian kernel under QEMU (software emulation, about five
//! seconds per boot) with the NUMA topology of a machine description (`machines/*.json`: nodes, CPUs per node,
//! memory per node, SMT, the SLIT matrix), with a busybox initramfs holding the numadb binary, the test binaries
//! and their shared libraries, and reports the guest's exit status.
//!
//! `numa-vm test` builds the guest test suite (`crates/guest-tests`, compiled with `--features guest`) and the
//! `numadb` binary (in the workspace's target directory, reusing `cargo test --workspace`'s artifacts), then runs
//! them in each built-in machine with automatic NUMA balancing off, and once more with it on. `numa-vm run --machine FILE -- COMMAND` boots any description and runs any command, with
//! `numadb` on the guest's PATH: that is how to check numadb against a topology that is not in the repository.
//!
//! What it needs on the host (installed with apt-get when missing and running as root): `qemu-system-x86_64`,
//! a static busybox (`busybox-static`), `xz`, and, once, `apt-get download` of the `linux-image-amd64` kernel,
//! kept in the cache directory.

mod cpio;
mod qemu;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use numadb_topology::MachineSpec;

use crate::qemu::{Accel, Boot};

/// Boot QEMU guests with a chosen NUMA topology and run numadb's tests (or any command) inside them.
#[derive(Parser, Debug)]
#[command(name = "numa-vm", version, about, long_about, max_term_width = 110)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Subcommand, Debug)]
enum Task {
    /// Build the guest test suite and run it in every built-in machine (balancing off), then on the SNC machine
    /// once with automatic NUMA balancing on and once with one host thread per vCPU.
    Test(TestArgs),
    /// Boot one machine and run a shell command in it, with `numadb` on PATH; exits with the command's status.
    Run(RunArgs),
    /// Print the QEMU topology arguments for a machine description.
    QemuArgs {
        /// A built-in machine name or a JSON description file.
        #[arg(long)]
        machine: String,
    },
    /// List the built-in machines.
    Machines,
}

#[derive(Args, Debug)]
struct CommonArgs {
    /// Seconds before a guest is killed.
    #[arg(long, default_value_t = 300)]
    timeout: u64,
    /// How QEMU runs the vCPUs.
    #[arg(long, value_enum, default_value = "single")]
    accel: Accel,
    /// Directory for the kernel, the initramfs images and the console logs.
    #[arg(long, env = "NUMADB_VM_CACHE")]
    cache: Option<PathBuf>,
    /// Use this kernel image instead of downloading Debian's.
    #[arg(long, env = "NUMADB_VM_KERNEL")]
    kernel: Option<PathBuf>,
    /// Build the guest binaries in release mode.
    #[arg(long)]
    release: bool,
    /// The QEMU CPU model. Intel's vendor string makes the guest kernel read SMT siblings from CPUID leaf 0xB,
    /// which QEMU's emulation provides (with AMD's it would need `topoext`).
    #[arg(long, default_value = "max,vendor=GenuineIntel")]
    cpu: String,
}

#[derive(Args, Debug)]
struct TestArgs {
    /// Machines to run (built-in names or JSON files); default: all built-in machines.
    #[arg(long = "machine")]
    machines: Vec<String>,
    /// Skip the extra run with automatic NUMA balancing on.
    #[arg(long)]
    no_balancing_run: bool,
    /// Skip the extra run with one host thread per vCPU (real parallelism in the guest, for race coverage).
    #[arg(long)]
    no_mttcg_run: bool,
    /// Only run guest tests whose name contains this string.
    #[arg(long)]
    filter: Option<String>,
    #[command(flatten)]
    common: CommonArgs,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// A built-in machine name or a JSON description file.
    #[arg(long)]
    machine: String,
    /// Boot with automatic NUMA balancing on (default off).
    #[arg(long)]
    balancing: bool,
    /// Extra files to copy into the guest's /tests.
    #[arg(long = "file")]
    files: Vec<PathBuf>,
    /// Also build and copy the guest test binaries.
    #[arg(long)]
    with_tests: bool,
    #[command(flatten)]
    common: CommonArgs,
    /// The shell command to run in the guest (in /tests, with numadb on PATH).
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.task {
        Task::Test(args) => test(args),
        Task::Run(args) => run(args),
        Task::QemuArgs { machine } => load_machine(&machine).and_then(|(spec, _)| {
            println!("{}", qemu::topology_args(&spec)?.join(" "));
            Ok(0)
        }),
        Task::Machines => {
            for (name, path) in builtin_machines() {
                println!("{name}\t{}", path.display());
            }
            Ok(0)
        }
    };
    match result {
        Ok(0) => ExitCode::SUCCESS,
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1).max(1)),
        Err(error) => {
            eprintln!("numa-vm: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn builtin_machines() -> Vec<(String, PathBuf)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("machines");
    let mut machines: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "json"))
                .map(|p| (p.file_stem().unwrap_or_default().to_string_lossy().into_owned(), p))
                .collect()
        })
        .unwrap_or_default();
    machines.sort();
    machines
}

/// Loads a machine by built-in name or file path; returns it with its JSON text.
fn load_machine(name_or_path: &str) -> anyhow::Result<(MachineSpec, String)> {
    let path = match builtin_machines().into_iter().find(|(name, _)| name == name_or_path) {
        Some((_, path)) => path,
        None => PathBuf::from(name_or_path),
    };
    let text = std::fs::read_to_string(&path).with_context(|| {
        let names: Vec<String> = builtin_machines().into_iter().map(|(n, _)| n).collect();
        format!("{name_or_path} is neither a built-in machine ({}) nor a readable file", names.join(", "))
    })?;
    let spec = MachineSpec::from_json(&text).with_context(|| format!("reading {}", path.display()))?;
    qemu::topology_args(&spec)?;
    Ok((spec, text))
}

fn cache_dir(common: &CommonArgs) -> anyhow::Result<PathBuf> {
    let dir = common.cache.clone().unwrap_or_else(|| workspace_root().join("target/numa-vm"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program} >/dev/null 2>&1"))
        .status()
        .is_ok_and(|s| s.success())
}

const BUSYBOX: &str = "/bin/busybox";

fn busybox_is_static() -> bool {
    std::fs::read(BUSYBOX).is_ok_and(|bytes| elf_is_static(&bytes))
}

/// Whether a 64-bit little-endian ELF file has no program interpreter (no `PT_INTERP` header): it runs in an
/// initramfs without a dynamic loader.
fn elf_is_static(bytes: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let read = |offset: usize, width: usize| -> Option<u64> {
        let slice = bytes.get(offset..offset + width)?;
        Some(slice.iter().rev().fold(0u64, |value, &byte| (value << 8) | u64::from(byte)))
    };
    if !bytes.starts_with(b"\x7fELF\x02\x01") {
        return false;
    }
    let (Some(table), Some(entry_size), Some(count)) = (read(0x20, 8), read(0x36, 2), read(0x38, 2)) else {
        return false;
    };
    (0..count).all(|index| read((table + index * entry_size) as usize, 4).is_some_and(|kind| kind != PT_INTERP as u64))
}

/// Makes sure qemu, a static busybox and xz are installed, installing them with apt-get when we are root.
fn ensure_host_tools() -> anyhow::Result<()> {
    let mut missing = Vec::new();
    if !have("qemu-system-x86_64") {
        missing.push("qemu-system-x86");
    }
    if !busybox_is_static() {
        missing.push("busybox-static");
    }
    if !have("xz") {
        missing.push("xz-utils");
    }
    if missing.is_empty() {
        return Ok(());
    }
    let is_root = Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !is_root || !have("apt-get") {
        bail!("missing host packages; install them with: sudo apt-get install {}", missing.join(" "));
    }
    eprintln!("numa-vm: installing {}", missing.join(" "));
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends {} >/dev/null",
            missing.join(" ")
        ))
        .status()?;
    if !status.success() {
        bail!("apt-get install {} failed", missing.join(" "));
    }
    Ok(())
}

/// The guest kernel: `--kernel`, or Debian's `linux-image-amd64` downloaded once and decompressed to an ELF
/// `vmlinux` (booted through PVH, which skips several seconds of in-guest decompression under emulation).
fn ensure_kernel(common: &CommonArgs, cache: &Path) -> anyhow::Result<PathBuf> {
    if let Some(kernel) = &common.kernel {
        return Ok(kernel.clone());
    }
    let vmlinux = cache.join("vmlinux");
    if vmlinux.exists() {
        return Ok(vmlinux);
    }
    let vmlinuz = cache.join("vmlinuz");
    if !vmlinuz.exists() {
        eprintln!("numa-vm: downloading Debian's kernel (once)");
        let download = cache.join("kernel-download");
        let _ = std::fs::remove_dir_all(&download);
        std::fs::create_dir_all(&download)?;
        let script = r#"set -e
pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
[ -n "$pkg" ] || { echo "apt-cache knows no linux-image-amd64 (run apt-get update)" >&2; exit 1; }
apt-get -o APT::Sandbox::User=root download "$pkg" >/dev/null
dpkg-deb -x ./*.deb extracted
cp extracted/boot/vmlinuz-* ../vmlinuz"#;
        let status = Command::new("sh").arg("-c").arg(script).current_dir(&download).status()?;
        let _ = std::fs::remove_dir_all(&download);
        if !status.success() || !vmlinuz.exists() {
            bail!("could not download the kernel; pass one with --kernel PATH (a bzImage or an ELF vmlinux)");
        }
    }
    // The bzImage carries an xz stream; its decompressed payload is the ELF kernel.
    let image = std::fs::read(&vmlinuz)?;
    const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";
    let Some(offset) = image.windows(XZ_MAGIC.len()).position(|w| w == XZ_MAGIC) else {
        eprintln!("numa-vm: the kernel is not xz-compressed; booting the compressed image");
        return Ok(vmlinuz);
    };
    let stream = cache.join("vmlinux.xz");
    std::fs::write(&stream, &image[offset..])?;
    let output = Command::new("xz").args(["-dc", "--single-stream"]).arg(&stream).output()?;
    let _ = std::fs::remove_file(&stream);
    if output.stdout.starts_with(b"\x7fELF") {
        std::fs::write(&vmlinux, &output.stdout)?;
        Ok(vmlinux)
    } else {
        eprintln!("numa-vm: could not decompress the kernel; booting the compressed image");
        Ok(vmlinuz)
    }
}

/// The built-in machine that `numa-vm test` also boots with automatic NUMA balancing on, and with one host
/// thread per vCPU.
const EXTRA_RUNS_MACHINE: &str = "2s-snc2";

/// Builds the `numadb` binary and, with `tests`, the guest test executables, in the workspace's own target
/// directory. With `tests` the build selects what `cargo test --workspace` selects, plus the guest feature, so
/// dependencies get the same unified features and the artifacts of the workspace's test build (which `make test`
/// runs first) are reused as they are: only the guest tests themselves are compiled. A separate statically linked
/// build compiled every dependency once more, about ten minutes of CI on two cores. The binaries are dynamically
/// linked; [`write_initramfs`] copies their shared libraries into the guest. Returns (numadb, test executables).
fn build_binaries(common: &CommonArgs, tests: bool) -> anyhow::Result<(PathBuf, Vec<PathBuf>)> {
    if std::env::consts::ARCH != "x86_64" {
        bail!("the harness boots x86-64 guests with the host's binaries and needs an x86-64 host");
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut build = Command::new(&cargo);
    build.current_dir(workspace_root());
    if tests {
        build.args(["test", "--no-run", "--workspace", "--features", "numadb-guest-tests/guest"]);
    } else {
        build.args(["build", "-p", "numadb", "--bin", "numadb"]);
    }
    build.arg("--message-format=json").stderr(std::process::Stdio::inherit());
    if common.release {
        build.arg("--release");
    }
    eprintln!("numa-vm: building numadb{}", if tests { " and the guest tests" } else { "" });
    let output = build.output()?;
    if !output.status.success() {
        bail!("building the guest binaries failed");
    }
    let (numadb, executables) = built_artifacts(&String::from_utf8_lossy(&output.stdout));
    let numadb = numadb.context("cargo built no numadb binary")?;
    if tests && executables.is_empty() {
        bail!("cargo built no guest test executables");
    }
    Ok((numadb, executables))
}

/// From cargo's JSON messages: the `numadb` binary, and the test executables of the guest-tests crate.
fn built_artifacts(messages: &str) -> (Option<PathBuf>, Vec<PathBuf>) {
    let (mut numadb, mut executables) = (None, Vec::new());
    for line in messages.lines() {
        let Ok(message) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let Some(executable) = message["executable"].as_str().filter(|_| message["reason"] == "compiler-artifact")
        else {
            continue;
        };
        let kind = &message["target"]["kind"];
        let is_test = message["profile"]["test"] == true;
        // The binary itself, not the unit-test harness of its crate, which has the same name and kind.
        if *kind == serde_json::json!(["bin"]) && message["target"]["name"] == "numadb" && !is_test {
            numadb = Some(PathBuf::from(executable));
        } else if *kind == serde_json::json!(["test"])
            && is_test
            && message["manifest_path"].as_str().is_some_and(|path| path.ends_with("guest-tests/Cargo.toml"))
        {
            executables.push(PathBuf::from(executable));
        }
    }
    (numadb, executables)
}

/// The shared libraries a dynamically linked executable loads, its dynamic loader included, as `ldd` resolves
/// them on this host (the guest runs the host's own copies, at the same paths).
fn shared_libraries(executable: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let output = Command::new("ldd").arg(executable).output().context("running ldd")?;
    let listing = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        bail!("ldd {} failed: {}", executable.display(), String::from_utf8_lossy(&output.stderr).trim());
    }
    parse_ldd(&listing).with_context(|| format!("the libraries of {}", executable.display()))
}

/// The library paths in `ldd`'s listing: `name => /path (address)` lines and the loader's `/path (address)`;
/// the vDSO has no file. A library `ldd` could not find is an error.
fn parse_ldd(listing: &str) -> anyhow::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    for line in listing.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let resolved = line.split_once("=>").map_or(line, |(_, target)| target.trim());
        if resolved.starts_with("not found") {
            bail!("ldd found no {}", line.split_whitespace().next().unwrap_or(line));
        }
        if let Some(path) = resolved.split_whitespace().next().filter(|path| path.starts_with('/')) {
            paths.push(PathBuf::from(path));
        }
    }
    Ok(paths)
}

/// An executable's bytes without debug information (`strip --strip-debug`): debug builds carry hundreds of
/// megabytes of it, and the initramfs lives in the guest's memory. The bytes as they are when `strip` fails.
fn stripped(file: &Path, scratch: &Path) -> anyhow::Result<Vec<u8>> {
    let copy = scratch.join(format!("stripped-{}.tmp", std::process::id()));
    let status = Command::new("strip").arg("--strip-debug").arg("-o").arg(&copy).arg(file).status();
    let bytes = match status {
        Ok(status) if status.success() => std::fs::read(&copy)?,
        _ => std::fs::read(file).with_context(|| format!("reading {}", file.display()))?,
    };
    let _ = std::fs::remove_file(&copy);
    Ok(bytes)
}

const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/tests:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
for c in /sys/devices/system/cpu/cpu[0-9]*/online; do echo 1 > $c; done
echo "=== GUEST UP kernel=$(uname -r) cpus=$(nproc) numa_balancing=$(cat /proc/sys/kernel/numa_balancing 2>/dev/null)"
for n in /sys/devices/system/node/node[0-9]*; do
  echo "=== $(basename $n) cpus=[$(cat $n/cpulist)] distance=[$(cat $n/distance)] free_kib=$(awk '/MemFree/ {print $4}' $n/meminfo)"
done
cd /tests
sh ./run.sh
rc=$?
echo
echo "=== GUEST_EXIT_CODE=$rc"
poweroff -f
"#;

/// Writes the initramfs: busybox, /init, the machine description, the given files in /tests (executables
/// without their debug information), and the shared libraries of the dynamically linked ones at their host paths.
fn write_initramfs(path: &Path, machine_json: &str, run_script: &str, files: &[PathBuf]) -> anyhow::Result<()> {
    let mut archive = cpio::Archive::new();
    let mut directories = std::collections::BTreeSet::new();
    for dir in ["bin", "dev", "proc", "sys", "tmp", "tests"] {
        archive.directory(dir);
        directories.insert(PathBuf::from(dir));
    }
    archive.char_device("dev/console", 0o600, 5, 1);
    archive.char_device("dev/null", 0o666, 1, 3);
    archive.file("bin/busybox", 0o755, &std::fs::read(BUSYBOX).context("reading /bin/busybox")?);
    archive.file("init", 0o755, INIT.as_bytes());
    archive.file("tests/machine.json", 0o644, machine_json.as_bytes());
    archive.file("tests/run.sh", 0o755, run_script.as_bytes());
    let scratch = path.parent().unwrap_or(Path::new("."));
    let mut libraries = std::collections::BTreeSet::new();
    for file in files {
        let name = file.file_name().context("file without a name")?.to_string_lossy();
        let bytes = stripped(file, scratch)?;
        if bytes.starts_with(b"\x7fELF") && !elf_is_static(&bytes) {
            libraries.extend(shared_libraries(file)?);
        }
        archive.file(&format!("tests/{name}"), 0o755, &bytes);
    }
    for library in libraries {
        let relative = library.strip_prefix("/").unwrap_or(&library);
        // The kernel's unpacker creates no directories of its own: each one comes before what it holds.
        let mut parents: Vec<&Path> = relative.ancestors().skip(1).filter(|p| !p.as_os_str().is_empty()).collect();
        parents.reverse();
        for parent in parents {
            if directories.insert(parent.to_path_buf()) {
                archive.directory(&parent.to_string_lossy());
            }
        }
        let bytes = std::fs::read(&library).with_context(|| format!("reading {}", library.display()))?;
        archive.file(&relative.to_string_lossy(), 0o755, &bytes);
    }
    let mut out = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    archive.write_to(&mut out)?;
    Ok(())
}

/// Kernel arguments for one boot: NUMA balancing and the environment of the guest's script (the kernel hands
/// unknown `NAME=value` arguments to init as environment variables).
fn kernel_args(balancing: bool) -> Vec<String> {
    vec![
        format!("numa_balancing={}", if balancing { "enable" } else { "disable" }),
        "NUMADB_GUEST_MACHINE=/tests/machine.json".into(),
        format!("NUMADB_GUEST_BALANCING={}", if balancing { "on" } else { "off" }),
        "NUMADB_BIN=/tests/numadb".into(),
        "RUST_BACKTRACE=1".into(),
    ]
}

fn test(args: TestArgs) -> anyhow::Result<i32> {
    ensure_host_tools()?;
    let cache = cache_dir(&args.common)?;
    let kernel = ensure_kernel(&args.common, &cache)?;
    let (numadb, tests) = build_binaries(&args.common, true)?;
    let names: Vec<String> = if args.machines.is_empty() {
        builtin_machines().into_iter().map(|(name, _)| name).collect()
    } else {
        args.machines.clone()
    };
    let mut files = vec![numadb];
    files.extend(tests.iter().cloned());
    let filter = args.filter.as_deref().unwrap_or("");
    let mut run_script = String::from("rc=0\n");
    for test in &tests {
        let name = test.file_name().unwrap_or_default().to_string_lossy();
        run_script.push_str(&format!(
            "echo \"=== running {name}\"\n./{name} --test-threads=1 --show-output {filter} || rc=1\n"
        ));
    }
    run_script.push_str("exit $rc\n");

    // (machine, balancing, accel) runs: every machine with balancing off, and the SNC machine (or the first one
    // asked for) once more with balancing on and once more with truly parallel vCPUs.
    let mut runs: Vec<(String, bool, Accel)> = names.iter().map(|n| (n.clone(), false, args.common.accel)).collect();
    let extra = names.iter().find(|n| n.as_str() == EXTRA_RUNS_MACHINE).or(names.first()).cloned();
    if let Some(machine) = &extra {
        if !args.no_balancing_run {
            runs.push((machine.clone(), true, args.common.accel));
        }
        if !args.no_mttcg_run && args.common.accel != Accel::Multi {
            runs.push((machine.clone(), false, Accel::Multi));
        }
    }
    let mut failures = Vec::new();
    for (name, balancing, accel) in &runs {
        let (spec, json) = load_machine(name)?;
        let label = format!(
            "{}{}{}",
            spec.name,
            if *balancing { "+balancing" } else { "" },
            if *accel == Accel::Multi && args.common.accel != Accel::Multi { "+mttcg" } else { "" }
        );
        let initramfs = cache.join(format!("{label}.cpio"));
        write_initramfs(&initramfs, &json, &run_script, &files)?;
        let log = cache.join(format!("{label}.log"));
        let code = qemu::boot(&Boot {
            spec: &spec,
            kernel: &kernel,
            initramfs: &initramfs,
            kernel_args: kernel_args(*balancing),
            accel: *accel,
            cpu: args.common.cpu.clone(),
            timeout: Duration::from_secs(args.common.timeout),
            log: &log,
            label: label.clone(),
        })?;
        let _ = std::fs::remove_file(&initramfs);
        if code == 0 {
            eprintln!("numa-vm: {label}: passed");
        } else {
            eprintln!("numa-vm: {label}: FAILED (guest exit status {code}; log: {})", log.display());
            failures.push(label);
        }
    }
    if failures.is_empty() {
        eprintln!("numa-vm: all {} guest runs passed", runs.len());
        Ok(0)
    } else {
        eprintln!("numa-vm: failed: {}", failures.join(", "));
        Ok(1)
    }
}

fn run(args: RunArgs) -> anyhow::Result<i32> {
    ensure_host_tools()?;
    let (spec, json) = load_machine(&args.machine)?;
    let cache = cache_dir(&args.common)?;
    let kernel = ensure_kernel(&args.common, &cache)?;
    let (numadb, tests) = build_binaries(&args.common, args.with_tests)?;
    let mut files = vec![numadb];
    files.extend(tests);
    files.extend(args.files.iter().cloned());
    let label = format!("{}-run", spec.name);
    let initramfs = cache.join(format!("{label}.cpio"));
    write_initramfs(&initramfs, &json, &format!("{}\n", args.command.join(" ")), &files)?;
    let log = cache.join(format!("{label}.log"));
    let code = qemu::boot(&Boot {
        spec: &spec,
        kernel: &kernel,
        initramfs: &initramfs,
        kernel_args: kernel_args(args.balancing),
        accel: args.common.accel,
        cpu: args.common.cpu.clone(),
        timeout: Duration::from_secs(args.common.timeout),
        log: &log,
        label,
    })?;
    let _ = std::fs::remove_file(&initramfs);
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_and_dynamic_elf_files_are_told_apart() {
        let shell = std::fs::read("/bin/sh").unwrap();
        assert!(!elf_is_static(&shell), "/bin/sh is dynamically linked on every Debian");
        assert!(!elf_is_static(b"#!/bin/sh\n"));
        assert!(!elf_is_static(b"\x7fELF\x02\x01"));
    }

    #[test]
    fn the_numadb_binary_is_told_from_its_unit_test_harness() {
        let artifact = |name: &str, kind: &str, test: bool, manifest: &str, executable: &str| {
            serde_json::json!({
                "reason": "compiler-artifact",
                "target": { "name": name, "kind": [kind] },
                "profile": { "test": test },
                "manifest_path": manifest,
                "executable": executable,
            })
            .to_string()
        };
        let messages = [
            artifact("numadb", "bin", false, "/w/crates/numadb/Cargo.toml", "/w/target/debug/numadb"),
            artifact("guest", "test", true, "/w/crates/guest-tests/Cargo.toml", "/w/target/debug/deps/guest-1"),
            artifact("cli", "test", true, "/w/crates/numadb/Cargo.toml", "/w/target/debug/deps/cli-2"),
            // Cargo lists the binary's own unit-test harness under the same name and kind, here after it.
            artifact("numadb", "bin", true, "/w/crates/numadb/Cargo.toml", "/w/target/debug/deps/numadb-3"),
            "not json".into(),
        ]
        .join("\n");
        let (numadb, tests) = built_artifacts(&messages);
        assert_eq!(numadb, Some(PathBuf::from("/w/target/debug/numadb")));
        assert_eq!(tests, [PathBuf::from("/w/target/debug/deps/guest-1")]);
    }

    #[test]
    fn ldd_listings_give_every_library_and_the_loader() {
        let listing = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x7f10)\n\
                       \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x7f20)\n\t/lib64/ld-linux-x86-64.so.2 (0x7f30)\n";
        let paths = parse_ldd(listing).unwrap();
        assert_eq!(
            paths,
            ["/lib/x86_64-linux-gnu/libgcc_s.so.1", "/lib/x86_64-linux-gnu/libc.so.6", "/lib64/ld-linux-x86-64.so.2"]
                .map(PathBuf::from)
        );
        let missing = parse_ldd("\tlibfoo.so.1 => not found\n").unwrap_err();
        assert!(missing.to_string().contains("libfoo.so.1"), "{missing}");
    }

    #[test]
    fn a_dynamic_executable_brings_its_loader_and_libc() {
        let libraries = shared_libraries(Path::new("/bin/sh")).unwrap();
        assert!(libraries.iter().any(|path| path.to_string_lossy().contains("ld-linux")), "{libraries:?}");
        assert!(libraries.iter().any(|path| path.to_string_lossy().contains("libc.so")), "{libraries:?}");
        assert!(libraries.iter().all(|path| path.is_file()), "{libraries:?}");
    }

    #[test]
    fn built_in_machines_load() {
        let machines = builtin_machines();
        assert!(machines.len() >= 3);
        for (name, _) in machines {
            let (spec, _) = load_machine(&name).unwrap();
            assert_eq!(spec.name, name);
        }
        assert!(load_machine("no-such-machine").unwrap_err().to_string().contains("2s-snc2"));
    }
}
