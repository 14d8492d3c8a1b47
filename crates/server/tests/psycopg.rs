//! psycopg 3 (the Python driver) against numadb: `tests/clients/psycopg_client.py` with the server's URL.

mod common;

use std::process::Command;

use common::*;

#[test]
fn psycopg_prepared_statements_binary_results_errors_copy_pipeline_and_cancel() {
    let Some(python) = python_with("psycopg") else { return };
    let server = start_with("");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/psycopg_client.py");
    let output = Command::new(python).args([script, &server.url("pyuser")]).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success() && stdout.trim_end().ends_with("ok"), "psycopg client failed:\n{stdout}\n{stderr}");
}
