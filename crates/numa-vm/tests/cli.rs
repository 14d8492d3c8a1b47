//! The harness's command line, run as users and `make test` run it (`make test` runs this very binary after the
//! workspace's tests, which is why it has an integration test: cargo then builds it with the workspace's features).

use std::process::Command;

fn numa_vm(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_numa-vm")).args(args).output().expect("numa-vm runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn machines_lists_every_built_in_description() {
    let (ok, out, err) = numa_vm(&["machines"]);
    assert!(ok, "{err}");
    for name in ["1s-smt-cxl", "2s-snc2", "8node-asym"] {
        assert!(out.contains(name), "{name} missing from:\n{out}");
    }
}

#[test]
fn qemu_args_give_the_machine_its_nodes_and_distances() {
    let (ok, out, err) = numa_vm(&["qemu-args", "--machine", "2s-snc2"]);
    assert!(ok, "{err}");
    for node in 0..4 {
        assert!(out.contains(&format!("node,nodeid={node},cpus={node}-{node},memdev=mem{node}")), "{out}");
    }
    assert!(out.contains("dist,src=0,dst=2,val=21"), "{out}");
}

#[test]
fn an_unknown_machine_is_a_clear_error() {
    let (ok, _, err) = numa_vm(&["qemu-args", "--machine", "no-such-machine"]);
    assert!(!ok);
    assert!(err.contains("2s-snc2"), "the error should name the built-in machines:\n{err}");
}
