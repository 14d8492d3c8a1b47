//! Helpers for the tests that run inside emulated multi-node guests.
//!
//! `numa-vm` boots a guest with the topology of a machine description and passes the description's path in
//! `NUMADB_GUEST_MACHINE`, whether automatic NUMA balancing is on in `NUMADB_GUEST_BALANCING`, and the static
//! `numadb` binary's path in `NUMADB_BIN`. The tests compare what the live kernel shows with the description.

use numadb_topology::{MachineSpec, Topology};

/// The machine description the guest was booted with.
pub fn machine() -> MachineSpec {
    let path = std::env::var("NUMADB_GUEST_MACHINE")
        .expect("NUMADB_GUEST_MACHINE is not set: these tests run inside a numa-vm guest (`numa-vm test`)");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("reading {path}: {error}"));
    MachineSpec::from_json(&text).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// The topology a machine of the guest's shape must show.
pub fn expected_topology() -> Topology {
    machine().to_topology().expect("a valid machine description")
}

/// Whether the guest was booted with automatic NUMA balancing on.
pub fn balancing_on() -> bool {
    std::env::var("NUMADB_GUEST_BALANCING").is_ok_and(|value| value == "on")
}

/// The static numadb binary inside the guest.
pub fn numadb_binary() -> String {
    std::env::var("NUMADB_BIN").unwrap_or_else(|_| "/tests/numadb".into())
}

/// Node ids of the guest that have memory, ascending.
pub fn memory_nodes() -> Vec<u32> {
    expected_topology().nodes.iter().map(|node| node.id).collect()
}
