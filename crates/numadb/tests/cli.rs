//! The `numadb` command line as a user meets it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn numadb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_numadb")).args(args).output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> String {
    repository().join("fixtures/sysfs").join(name).display().to_string()
}

#[test]
fn help_lists_the_subcommands() {
    let output = numadb(&["--help"]);
    assert!(output.status.success());
    assert!(stdout(&output).contains("topo"), "{}", stdout(&output));
    let output = numadb(&["topo", "--help"]);
    assert!(stdout(&output).contains("--root"));
    assert!(stdout(&output).contains("--json-schema"));
}

#[test]
fn the_committed_json_schema_is_the_one_numadb_prints() {
    let output = numadb(&["topo", "--json-schema"]);
    assert!(output.status.success());
    let committed = std::fs::read_to_string(repository().join("docs/schema/topo.schema.json")).unwrap();
    assert_eq!(
        stdout(&output),
        committed,
        "docs/schema/topo.schema.json is stale: regenerate it with `numadb topo --json-schema`"
    );
}

#[test]
fn topo_summarises_a_snc_machine() {
    let output = numadb(&["topo", "--root", &fixture("skylake-2s-snc2")]);
    assert!(output.status.success(), "{}", stderr(&output));
    // Compare with runs of spaces folded, so column widths do not matter.
    let fold = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
    let text = fold(&stdout(&output));
    for expected in [
        "Machine   Intel(R) Xeon(R) Platinum 8180 CPU @ 2.50GHz",
        "Shape     2 package(s), 56 core(s), 2 thread(s) per core, 112 CPU(s) online; 4 node(s); 2 L3 group(s)",
        "  0  10  11  21  21",
        "  L3     38.5 MiB  56 CPU(s)",
        "  0       node0  0-3,7-9,14-17,21-23,56-59,63-65,70-73,77-79  0             1 @11 · 2-3 @21",
        "SMT siblings  0+56  1+57",
    ] {
        let expected = fold(expected);
        assert!(text.contains(&expected), "missing {expected:?} in:\n{text}");
    }
    let output = numadb(&["topo", "--root", &fixture("skylake-2s-snc2"), "--domains", "package"]);
    assert!(fold(&stdout(&output)).contains("1 package1 28-55,84-111 2-3 0 @21"), "{}", stdout(&output));
}

#[test]
fn topo_lists_offline_cpus_and_memory_only_nodes() {
    let output = numadb(&["topo", "--root", &fixture("offline-gaps"), "--cpus"]);
    let text = stdout(&output);
    assert!(text.contains("12 CPU(s)") || text.contains("10 CPU(s) online (2 offline: 12-13)"), "{text}");
    assert!(text.contains("  12   no      -     -"), "{text}");
    assert!(text.contains("Allowed   CPUs 0-3,8-11   memory nodes 0"), "{text}");
    let output = numadb(&["topo", "--root", &fixture("cxl-memory-only-node")]);
    let text = stdout(&output);
    assert!(text.contains("  1     (memory only)  128 GiB"), "{text}");
    assert!(text.contains("2 node(s) (1 without CPUs)"), "{text}");
}

#[test]
fn topo_json_has_every_granularity() {
    let output = numadb(&["topo", "--root", &fixture("epyc-2s-nps4"), "--json"]);
    let document: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(document["domains"]["node"]["domains"].as_array().unwrap().len(), 8);
    assert_eq!(document["domains"]["package"]["domains"].as_array().unwrap().len(), 2);
    assert_eq!(document["domains"]["l3"]["domains"].as_array().unwrap().len(), 16);
    assert_eq!(document["topology"]["distances"]["rows"][0], serde_json::json!([10, 12, 12, 12, 32, 32, 32, 32]));
}

#[test]
fn a_broken_root_is_a_clear_error_not_a_panic() {
    let output = numadb(&["topo", "--root", "/nonexistent-root"]);
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("numadb: error: reading the topology below /nonexistent-root"), "{message}");
    assert!(message.contains("cannot read /nonexistent-root/sys/devices/system/cpu/possible"), "{message}");
    assert!(!message.contains("panicked"), "{message}");

    let output = numadb(&["topo", "--domains", "sockets"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("expected node, package, l3 or machine"));
}

#[test]
fn capture_writes_a_tree_that_reads_back() {
    let destination = tempfile::tempdir().unwrap();
    let target = destination.path().join("captured");
    let output = numadb(&["topo", "--root", &fixture("epyc-2s-nps4"), "--capture", target.to_str().unwrap()]);
    assert!(output.status.success(), "{}", stderr(&output));
    let original = numadb(&["topo", "--root", &fixture("epyc-2s-nps4"), "--json"]);
    let captured = numadb(&["topo", "--root", target.to_str().unwrap(), "--json"]);
    let mut original: serde_json::Value = serde_json::from_slice(&original.stdout).unwrap();
    let mut captured: serde_json::Value = serde_json::from_slice(&captured.stdout).unwrap();
    original["topology"]["source"] = serde_json::Value::Null;
    captured["topology"]["source"] = serde_json::Value::Null;
    assert_eq!(original, captured);
}

#[test]
fn bench_lists_and_prints_the_built_in_experiments() {
    let output = numadb(&["bench", "list"]);
    assert!(output.status.success(), "{}", stderr(&output));
    for name in ["tour", "random-access", "aggregation", "placement", "layout", "stealing", "binding", "one-big-domain"]
    {
        assert!(stdout(&output).contains(name), "{name}: {}", stdout(&output));
    }
    let output = numadb(&["bench", "list", "stealing"]);
    assert!(stdout(&output).contains("[[configuration]]") && stdout(&output).contains("any+batch"));
    let output = numadb(&["bench", "list", "nope"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("no built-in experiment \"nope\""), "{}", stderr(&output));
}

#[test]
fn bench_run_writes_a_report_and_json_and_rejects_bad_files() {
    let dir = std::env::temp_dir().join(format!("numadb-cli-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tiny.toml");
    std::fs::write(
        &file,
        r#"
        name = "tiny"
        rows = 10000
        connections = 2
        warmup_seconds = 0
        queries_per_connection = 3
        [[workload]]
        kind = "aggregation"
        range_pred = [500]
        skew = [3]
        [[configuration]]
        name = "off"
        stealing = "off"
        "#,
    )
    .unwrap();
    let out = dir.join("out");
    let output = numadb(&[
        "bench",
        "run",
        file.to_str().unwrap(),
        "--json",
        "--compare",
        "duckdb",
        "--probe-budget",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let document: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let cells = document["results"]["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0]["run"]["queries"], 6);
    assert!(out.join("report.html").exists() && out.join("cells.csv").exists());
    // The peer ran the same workload with the same clients (or says why it could not).
    let peers = document["results"]["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 1);
    assert_eq!(peers[0]["workload"], cells[0]["workload"]);
    if std::env::var("NUMADB_REQUIRE_TOOLS").is_ok_and(|v| v == "1") {
        assert_eq!(peers[0]["run"]["Ok"]["queries"], 6, "{}", peers[0]);
        assert_eq!(document["results"]["peer_disagreements"].as_array().unwrap().len(), 0);
    }
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Peers, same clients and data"));
    // Overrides apply, and a bad override is refused before anything runs.
    let output =
        numadb(&["bench", "run", file.to_str().unwrap(), "--connections", "0", "--out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("connections must be at least 1"), "{}", stderr(&output));
    std::fs::write(&file, "name = 3").unwrap();
    let output = numadb(&["bench", "run", file.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("tiny.toml"), "{}", stderr(&output));
    let output = numadb(&["bench", "run", "no-such-experiment"]);
    assert!(stderr(&output).contains("neither a built-in experiment"), "{}", stderr(&output));
    let output = numadb(&["bench", "run", "tour", "--compare", "oracle"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("compare with duckdb, postgres"), "{}", stderr(&output));
    let output = numadb(&["bench", "run", "no-such-experiment"]);
    assert!(stderr(&output).contains("neither a built-in experiment"), "{}", stderr(&output));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_tour_probes_runs_the_workloads_and_writes_one_report() {
    let dir = std::env::temp_dir().join(format!("numadb-cli-tour-{}", std::process::id()));
    let output = numadb(&[
        "tour",
        "--probe-budget",
        "3",
        "--rows",
        "30000",
        "--duration",
        "1",
        "--connections",
        "2",
        "--json",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let document: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert!(document["topology"]["nodes"].as_array().is_some_and(|n| !n.is_empty()));
    assert!(document["probe"]["latency"].as_array().is_some_and(|m| !m.is_empty()), "the probe ran");
    // Five configurations × (random access + three skews), each with queries and no errors.
    let cells = document["results"]["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 20);
    for cell in cells {
        assert!(cell["run"]["queries"].as_u64().unwrap() > 0, "{cell}");
        assert_eq!(cell["run"]["errors"], 0, "{cell}");
    }
    let findings = document["findings"].as_array().unwrap();
    assert!(findings.iter().any(|f| f["topic"] == "configuration"));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for text in ["Findings", "Memory latency and bandwidth", "probe/report.html", "Experiment: tour", "<svg"] {
        assert!(html.contains(text), "{text} missing from the tour's page");
    }
    assert!(dir.join("probe/report.html").exists() && dir.join("tour.json").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sql_json_is_one_document_with_columns_in_order_and_errors_with_their_sqlstate() {
    let output = numadb(&[
        "sql",
        "--json",
        "-c",
        "CREATE TABLE t (a INTEGER, b TEXT, d DOUBLE PRECISION); INSERT INTO t VALUES (2, 'x', 0.5), (1, NULL, NULL)",
        "-c",
        "SELECT b, a, a AS b, d FROM t ORDER BY a",
        "-c",
        "SELECT missing FROM t",
    ]);
    assert!(!output.status.success(), "the failed statement makes the exit status 1");
    let document: serde_json::Value = serde_json::from_str(&stdout(&output)).expect("--json prints one document");
    let statements = document.as_array().unwrap();
    assert_eq!(statements.len(), 4, "{document:#}");
    assert_eq!(statements[0]["command"], "CREATE TABLE");
    assert_eq!(statements[1]["command"], "INSERT 0 2");
    let select = &statements[2];
    assert_eq!(select["command"], "SELECT 2");
    let names: Vec<&str> = select["columns"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["b", "a", "b", "d"], "in the query's order, a repeated name kept");
    assert_eq!(select["columns"][1]["type"], "integer");
    assert_eq!(select["rows"], serde_json::json!([[null, 1, 1, null], ["x", 2, 2, 0.5]]));
    assert_eq!(statements[3]["error"]["sqlstate"], "42703", "{document:#}");
    assert!(stderr(&output).contains("42703"), "the error is on stderr too");
}

#[test]
fn sql_file_runs_backslash_commands_and_statements_in_order_until_an_error() {
    let directory = tempfile::tempdir().unwrap();
    let script = directory.path().join("script.sql");
    std::fs::write(
        &script,
        "\\timing on\nCREATE TABLE t (a INTEGER);\nINSERT INTO t VALUES (1), (2);\n\\timing off\n\
         UPDATE t SET a = a * 10\n  WHERE a = 2;\nSELECT a FROM t ORDER BY a;\nSELECT missing FROM t;\nSELECT 'never';\n",
    )
    .unwrap();
    let output = numadb(&["sql", "-f", script.to_str().unwrap()]);
    assert!(!output.status.success(), "the failed statement makes the exit status 1");
    let (out, err) = (stdout(&output), stderr(&output));
    assert!(out.contains("Timing is on.") && out.contains("Timing is off."), "{out}");
    assert_eq!(err.matches("Time: ").count(), 2, "the statements between on and off are timed, not those after: {err}");
    assert!(out.contains("UPDATE 1"), "{out}");
    let rows: Vec<&str> = out.lines().map(str::trim).filter(|l| *l == "1" || *l == "20").collect();
    assert_eq!(rows, ["1", "20"], "{out}");
    assert!(err.contains("42703"), "{err}");
    assert!(!out.contains("never"), "nothing runs after the error: {out}");
}

#[test]
fn a_file_runs_statement_by_statement_and_a_command_as_one_message() {
    let directory = tempfile::tempdir().unwrap();
    let script = directory.path().join("script.sql");
    let text =
        "CREATE TABLE t (a INTEGER); INSERT INTO t VALUES (7);\nSELECT a + 1 AS b FROM t; SELEC 3;\nSELECT 'never';\n";
    std::fs::write(&script, text).unwrap();
    let output = numadb(&["sql", "-f", script.to_str().unwrap()]);
    assert!(!output.status.success());
    let (out, err) = (stdout(&output), stderr(&output));
    // psql's way with a file: what comes before the bad statement ran, and its error says where it is.
    assert!(out.contains("INSERT 0 1") && out.lines().any(|line| line.trim() == "8"), "{out}");
    assert!(err.contains("42601") && err.contains("at Line: 2, Column: 27"), "{err}");
    assert!(!out.contains("never"), "{out}");
    // The same text as one -c message: the syntax error is found before anything runs.
    let output = numadb(&["sql", "-c", text]);
    assert!(!output.status.success());
    assert!(!stdout(&output).contains("INSERT"), "{}", stdout(&output));
    assert!(stderr(&output).contains("at Line: 2, Column: 27"), "{}", stderr(&output));
}

#[test]
fn the_shell_answers_the_deepest_statement_accepted_and_refuses_deeper_ones() {
    let directory = tempfile::tempdir().unwrap();
    let script = directory.path().join("deep.sql");
    // 5 000 operators is the most a statement may hold: far deeper than the main thread's stack allows.
    let sum = |operators: usize| format!("SELECT 1{};\n", "+1".repeat(operators));
    std::fs::write(&script, format!("{}{}SELECT 'after';\n", sum(5_000), sum(5_001))).unwrap();
    let output = numadb(&["sql", "-f", script.to_str().unwrap()]);
    let (out, err) = (stdout(&output), stderr(&output));
    assert!(out.lines().any(|line| line.trim() == "5001"), "the deepest accepted statement is answered: {out}{err}");
    assert!(err.contains("54001"), "a deeper one is refused, not a crash: {err}");
    assert_eq!(output.status.code(), Some(1), "{err}");
}

#[test]
fn a_reader_that_goes_away_ends_the_shell_quietly() {
    use std::io::Read;
    // 100 000 rows of output: far more than a pipe holds, so numadb is still writing when the reader leaves.
    let mut child = Command::new(env!("CARGO_BIN_EXE_numadb"))
        .args([
            "sql",
            "-c",
            "CREATE TABLE d (v INTEGER); INSERT INTO d VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9)",
            "-c",
            "SELECT a.v, b.v, c.v, e.v, f.v FROM d a, d b, d c, d e, d f",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is closed here (the handle was dropped).
    let output = child.wait_with_output().unwrap();
    let err = stderr(&output);
    assert!(!err.contains("panicked"), "{err}");
    assert!(output.status.success(), "{:?}: {err}", output.status);
}
