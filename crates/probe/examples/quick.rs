//! A quick look at one latency figure and one bandwidth figure (for development; `numadb probe` is the tool).
use std::time::Duration;

use numadb_placement::HugePages;
use numadb_probe::matrix::NoProgress;
use numadb_probe::{Isa, Traffic, bandwidth, latency, plan};

fn main() {
    let topology = numadb_placement::system_topology().unwrap();
    let axes = numadb_probe::MatrixAxes::of(topology, numadb_topology::DomainGranularity::Node).unwrap();
    let mb: usize = std::env::args().nth(1).map_or(1024, |a| a.parse().unwrap());
    let t = std::time::Instant::now();
    let options = plan::default_latency_options(mb << 20, HugePages::Never);
    let m = latency::measure_matrix(&axes, &options, &NoProgress).unwrap();
    for cell in &m.cells {
        for cpu in &cell.cpus {
            println!("latency 4k cpu {} {:?}", cpu.cpu, cpu.summary.map(|s| (s.median, s.min, s.max)));
        }
    }
    println!("{:?} {:?}", m.buffers[0].placement.verdict, t.elapsed());
    for threads in [1usize, 2] {
        for isa in Isa::available() {
            let options = bandwidth::BandwidthOptions {
                buffer_bytes: mb << 20,
                traffic: Traffic::Read,
                isa,
                huge_pages: HugePages::Never,
                sample: Duration::from_millis(300),
                repetitions: 3,
            };
            let cpus: Vec<u32> = (0..threads as u32).collect();
            let cell = bandwidth::measure_cell(&cpus, 0, &options, &NoProgress).unwrap();
            println!("read {threads} threads {}: {:?}", isa.name(), cell.mb_per_s.map(|s| s.median));
        }
    }
}
