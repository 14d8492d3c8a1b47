//! Was the machine quiet? The CPU time other processes (and the hypervisor) took while we measured.
//!
//! A latency or bandwidth figure taken while a compiler runs on the other core is a figure of that compiler too:
//! on the development VM a neighbour's build moved the 2-thread read bandwidth by 30% and the L1 plateau by 20%.
//! The prober cannot stop other work, but it can say that there was some: it reads the machine's CPU time
//! (`/proc/stat`) and its own (`/proc/self/stat`) before and after, and reports the share of the machine's CPU
//! time that went to anything else, and the hypervisor's *steal* time (a vCPU waiting for a physical CPU).

use serde::{Deserialize, Serialize};

/// Above this share of the machine's CPU time used by others, a report warns that its figures are disturbed.
pub const BUSY_SHARE_WARNING: f64 = 0.05;

/// CPU time counters at one instant, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// All CPUs, every state.
    pub total: u64,
    /// All CPUs, idle and waiting for I/O.
    pub idle: u64,
    /// All CPUs, stolen by the hypervisor.
    pub steal: u64,
    /// This process, user and system.
    pub own: u64,
}

impl CpuTimes {
    /// Reads the counters now (`None` where /proc is not readable).
    pub fn now() -> Option<CpuTimes> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        Self::parse(&stat, &own)
    }

    /// Parses `/proc/stat` and `/proc/self/stat` texts.
    pub fn parse(stat: &str, own_stat: &str) -> Option<CpuTimes> {
        let line = stat.lines().find(|l| l.starts_with("cpu "))?;
        let values: Vec<u64> = line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
        // user nice system idle iowait irq softirq steal guest guest_nice; guest time is already in user.
        let field = |i: usize| values.get(i).copied().unwrap_or(0);
        let total = (0..8).map(field).sum();
        // The process name may contain spaces and parentheses: fields count from the last ')'.
        let after_name = own_stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        // After the name: state is field 3 of the file, utime 14 and stime 15, so indices 11 and 12 here.
        let own = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        Some(CpuTimes { total, idle: field(3) + field(4), steal: field(7), own })
    }
}

/// What the rest of the machine did during a measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interference {
    /// Share of the machine's CPU time (all CPUs) used by other processes and the kernel on their behalf.
    pub others_share: f64,
    /// Share of the machine's CPU time stolen by the hypervisor.
    pub steal_share: f64,
}

impl Interference {
    /// Between two readings.
    pub fn between(before: &CpuTimes, after: &CpuTimes) -> Option<Interference> {
        let total = after.total.checked_sub(before.total)?;
        if total == 0 {
            return None;
        }
        let idle = after.idle.saturating_sub(before.idle);
        let steal = after.steal.saturating_sub(before.steal);
        let own = after.own.saturating_sub(before.own);
        let busy = total.saturating_sub(idle).saturating_sub(steal);
        Some(Interference {
            others_share: busy.saturating_sub(own) as f64 / total as f64,
            steal_share: steal as f64 / total as f64,
        })
    }

    /// Whether others took enough to disturb the figures.
    pub fn disturbed(&self) -> bool {
        self.others_share + self.steal_share > BUSY_SHARE_WARNING
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str = "4242 (numadb (probe)) R 1 2 3 4 5 6 7 8 9 10 150 50 0 0 20 0";

    #[test]
    fn counters_are_parsed() {
        let times = CpuTimes::parse("cpu  100 0 50 800 10 0 5 20 0 0\ncpu0 1 2 3\n", OWN).unwrap();
        assert_eq!(times, CpuTimes { total: 985, idle: 810, steal: 20, own: 200 });
        assert!(CpuTimes::parse("", OWN).is_none());
        assert!(CpuTimes::now().is_some());
    }

    #[test]
    fn others_are_what_is_busy_and_not_us() {
        let before = CpuTimes { total: 1000, idle: 500, steal: 0, own: 100 };
        // 1000 ticks pass: 400 idle, 100 stolen, we used 300, so others used 200.
        let after = CpuTimes { total: 2000, idle: 900, steal: 100, own: 400 };
        let interference = Interference::between(&before, &after).unwrap();
        assert!((interference.others_share - 0.2).abs() < 1e-12);
        assert!((interference.steal_share - 0.1).abs() < 1e-12);
        assert!(interference.disturbed());
        let quiet = CpuTimes { total: 2000, idle: 1000, steal: 0, own: 600 };
        assert!(!Interference::between(&before, &quiet).unwrap().disturbed());
        assert!(Interference::between(&before, &before).is_none());
    }
}
