//! Core clock: a calibrated delay for injecting load, and an honest estimate of the core frequency.
//!
//! Converting a latency in nanoseconds to cycles needs the frequency the core actually runs at, which under
//! turbo, power management or a hypervisor is neither the nominal frequency nor `/proc/cpuinfo`'s "cpu MHz" (a
//! snapshot, or inside a VM the host's TSC rate). No performance counters are needed to measure it: a chain of
//! dependent register-to-register adds retires one add per cycle on every out-of-order x86 core of the last
//! fifteen years (the add has a latency of one cycle and each depends on the previous one), so cycles = adds, and
//! the frequency is adds / seconds. The loop is written in assembly so that the compiler cannot fold the adds into
//! one — and with a register operand, because recent Intel cores fold immediate adds themselves (see
//! [`spin_cycles`]).

use std::time::{Duration, Instant};

/// Dependent adds per loop iteration of [`spin_cycles`]; the loop's own decrement and branch run in parallel.
const ADDS_PER_ITERATION: u64 = 8;
/// How long the frequency estimate spins per attempt.
const FREQUENCY_SAMPLE: Duration = Duration::from_millis(20);
/// Attempts of the frequency estimate; the fastest wins (an interrupted attempt only looks slower).
const FREQUENCY_ATTEMPTS: usize = 5;

/// Spins for about `cycles` core cycles (a chain of dependent adds; no memory access, no system call).
/// Returns a value that depends on the work, so the spin cannot be optimised away.
pub fn spin_cycles(cycles: u64) -> u64 {
    let iterations = cycles / ADDS_PER_ITERATION;
    if iterations == 0 {
        return 0;
    }
    spin_iterations(iterations)
}

#[cfg(target_arch = "x86_64")]
fn spin_iterations(iterations: u64) -> u64 {
    let mut counter = iterations;
    let mut value: u64 = 0;
    // The step is in a register on purpose: Golden Cove and later Intel cores fold chains of `add reg, imm` at
    // rename (measured on the development VM: 19 "GHz" with immediates, 3.6 GHz with a register operand, which
    // `imul`'s 3-cycle latency confirms), so an immediate step would not cost a cycle per add.
    let step: u64 = 1;
    // SAFETY: the assembly reads and writes only the two registers it names, touches no memory or stack and
    // leaves the flags to the compiler (they are clobbered, which `asm!` assumes unless `preserves_flags`).
    unsafe {
        std::arch::asm!(
            "2:",
            "add {value}, {step}",
            "add {value}, {step}",
            "add {value}, {step}",
            "add {value}, {step}",
            "add {value}, {step}",
            "add {value}, {step}",
            "add {value}, {step}",
            "add {value}, {step}",
            "dec {counter}",
            "jnz 2b",
            value = inout(reg) value,
            counter = inout(reg) counter,
            step = in(reg) step,
            options(nomem, nostack),
        );
    }
    debug_assert_eq!(counter, 0);
    value
}

#[cfg(not(target_arch = "x86_64"))]
fn spin_iterations(iterations: u64) -> u64 {
    let mut value = 0u64;
    for _ in 0..iterations * ADDS_PER_ITERATION {
        value = std::hint::black_box(value.wrapping_add(1));
    }
    value
}

/// The core frequency as measured by timing a dependent-add chain, in Hz. On x86-64 this is exact to the
/// clock's resolution; elsewhere the portable loop is not one add per cycle and the result is `None`.
pub fn estimate_core_hz() -> Option<f64> {
    estimate_core_hz_with(FREQUENCY_SAMPLE, FREQUENCY_ATTEMPTS)
}

/// As [`estimate_core_hz`], with `attempts` samples of `sample` each (the fastest wins). Turbo frequencies drift
/// by 10% within seconds on the development VM, so a conversion of nanoseconds to cycles should use an estimate
/// taken next to the measurement it converts.
pub fn estimate_core_hz_with(sample: Duration, attempts: usize) -> Option<f64> {
    if !cfg!(target_arch = "x86_64") {
        return None;
    }
    // A short warm-up lets the core leave a low-power state first.
    std::hint::black_box(spin_cycles(10_000_000));
    let cycles = 1u64 << 20;
    let mut best: Option<f64> = None;
    for _ in 0..attempts.max(1) {
        let start = Instant::now();
        let mut spun = 0;
        while start.elapsed() < sample {
            std::hint::black_box(spin_cycles(cycles));
            spun += cycles;
        }
        let hz = spun as f64 / start.elapsed().as_secs_f64();
        best = Some(best.map_or(hz, |b: f64| b.max(hz)));
    }
    best
}

/// The CPU as CPUID identifies it (from `/proc/cpuinfo`), for looking up documented figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CpuIdentity {
    /// `GenuineIntel`, `AuthenticAMD`, …
    pub vendor: String,
    /// CPUID family.
    pub family: u32,
    /// CPUID model.
    pub model: u32,
    /// The kernel's "cpu MHz" of the first CPU (a snapshot; inside a VM often the host TSC rate).
    pub reported_mhz: Option<f64>,
}

impl CpuIdentity {
    /// Reads the first processor's entry of `/proc/cpuinfo`.
    pub fn from_system() -> Option<CpuIdentity> {
        Self::parse(&std::fs::read_to_string("/proc/cpuinfo").ok()?)
    }

    /// Parses the first processor's entry of a `/proc/cpuinfo` text.
    pub fn parse(cpuinfo: &str) -> Option<CpuIdentity> {
        let field = |name: &str| {
            cpuinfo
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .find(|line| line.split(':').next().is_some_and(|key| key.trim() == name))
                .and_then(|line| line.split_once(':'))
                .map(|(_, value)| value.trim().to_string())
        };
        Some(CpuIdentity {
            vendor: field("vendor_id")?,
            family: field("cpu family")?.parse().ok()?,
            model: field("model")?.parse().ok()?,
            reported_mhz: field("cpu MHz").and_then(|mhz| mhz.parse().ok()),
        })
    }

    /// The documented L1 data-cache load-to-use latency for a pointer chase (simple addressing), in cycles, with
    /// the microarchitecture it comes from; `None` when this CPU is not in the table.
    ///
    /// Sources: Intel's optimisation reference manual (Skylake: 4 cycles for a simple address, 5 with an index;
    /// Sunny Cove and later cores: 5), AMD's software optimisation guides for families 17h–1Ah (4 cycles).
    /// Inside a VM the model is what the hypervisor shows, which is usually but not always the host's.
    pub fn documented_l1_latency_cycles(&self) -> Option<(f64, &'static str)> {
        match (self.vendor.as_str(), self.family, self.model) {
            ("GenuineIntel", 6, 78 | 85 | 94 | 142 | 158 | 165 | 166) => Some((4.0, "Skylake-derived core")),
            ("GenuineIntel", 6, 106 | 108 | 125 | 126 | 140 | 141 | 167) => {
                Some((5.0, "Sunny Cove / Willow Cove / Cypress Cove core"))
            }
            ("GenuineIntel", 6, 143 | 207 | 173 | 174 | 151 | 154 | 183 | 186 | 191) => {
                Some((5.0, "Golden Cove / Raptor Cove / Redwood Cove core"))
            }
            ("AuthenticAMD", 0x17, _) => Some((4.0, "AMD Zen / Zen 2")),
            ("AuthenticAMD", 0x19, _) => Some((4.0, "AMD Zen 3 / Zen 4")),
            ("AuthenticAMD", 0x1A, _) => Some((4.0, "AMD Zen 5")),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_returns_the_work_done() {
        assert_eq!(spin_cycles(0), 0);
        assert_eq!(spin_cycles(800), 800);
    }

    #[test]
    fn the_frequency_estimate_is_plausible() {
        // Not a timing assertion: any core from 100 MHz to 10 GHz passes; this catches a broken unit.
        if let Some(hz) = estimate_core_hz() {
            assert!((1e8..1e10).contains(&hz), "{hz} Hz");
        }
    }

    #[test]
    fn cpuinfo_is_parsed_and_looked_up() {
        let text = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\nmodel name\t: Intel(R) Xeon(R)\ncpu MHz\t\t: 2100.000\n\nprocessor\t: 1\nvendor_id\t: Other\n";
        let cpu = CpuIdentity::parse(text).unwrap();
        assert_eq!((cpu.vendor.as_str(), cpu.family, cpu.model), ("GenuineIntel", 6, 143));
        assert_eq!(cpu.reported_mhz, Some(2100.0));
        assert_eq!(cpu.documented_l1_latency_cycles().unwrap().0, 5.0);
        let zen4 = CpuIdentity { vendor: "AuthenticAMD".into(), family: 0x19, model: 17, reported_mhz: None };
        assert_eq!(zen4.documented_l1_latency_cycles().unwrap().0, 4.0);
        let unknown = CpuIdentity { vendor: "ARM".into(), family: 0, model: 0, reported_mhz: None };
        assert!(unknown.documented_l1_latency_cycles().is_none());
        assert!(CpuIdentity::parse("").is_none());
    }
}
