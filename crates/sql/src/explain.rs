//! `EXPLAIN ANALYZE`: what a statement did, with the scheduler's counters and the byte matrix.

use numadb_execution::ExecutionResult;
use numadb_scheduler::Scheduler;
use numadb_topology::format_bytes as bytes;

/// The lines `EXPLAIN ANALYZE` adds after the plan.
pub fn analyze_lines(result: &ExecutionResult, scheduler: &Scheduler) -> Vec<String> {
    let mut lines = Vec::new();
    let task_wall = result.elapsed.saturating_sub(result.post_time);
    lines.push(format!(
        "Execution Time: {:.3} ms (tasks {:.3} ms, then {:.3} ms merging and post-processing on the session thread)",
        result.elapsed.as_secs_f64() * 1e3,
        task_wall.as_secs_f64() * 1e3,
        result.post_time.as_secs_f64() * 1e3
    ));
    for scan in &result.scans {
        lines.push(format!(
            "Scan {}: {} tasks over {} partitions, {} rows scanned, {} selected, {} read, task time {:.3} ms, merge {:.3} ms",
            scan.table,
            scan.tasks,
            scan.partitions,
            scan.rows_scanned,
            scan.rows_selected,
            bytes(scan.bytes_read),
            scan.task_time.as_secs_f64() * 1e3,
            scan.merge_time.as_secs_f64() * 1e3
        ));
        if scan.groups_spilled > 0 {
            lines.push(format!(
                "Scan {}: the workers' tables of groups outgrew the caches and spilled {} groups into the merge's partitions",
                scan.table, scan.groups_spilled
            ));
        }
        if scan.merged_by_key_range {
            lines.push(format!(
                "Scan {}: every worker found its groups through a table indexed by the key's value, and the groups were merged in ranges of the key's values",
                scan.table
            ));
        }
    }
    if result.index_rows > 0 {
        lines.push(format!("Index lookups found {} rows (run on the session thread)", result.index_rows));
    }
    for operator in &result.operators {
        lines.push(format!(
            "{}: {} rows, {:.3} ms on the session thread",
            operator.name,
            operator.rows_out,
            operator.time.as_secs_f64() * 1e3
        ));
    }
    let Some(report) = &result.report else {
        lines.push("No scheduler tasks ran.".to_string());
        return lines;
    };
    let per_domain: Vec<String> = report
        .domain_names
        .iter()
        .zip(report.tasks_run.iter().zip(&report.tasks_stolen))
        .map(|(name, (run, stolen))| format!("{name}={run} (stolen {stolen})"))
        .collect();
    lines.push(format!("Tasks per domain: {}", per_domain.join(", ")));
    if !report.task_span.is_zero() {
        let workers = scheduler.worker_count().max(1);
        lines.push(format!(
            "Workers: the first task started {:.3} ms after submission and the last ended {:.3} ms after it; the {} workers were busy {:.1}% of that span",
            report.dispatch.as_secs_f64() * 1e3,
            (report.dispatch + report.task_span).as_secs_f64() * 1e3,
            workers,
            report.task_busy.as_secs_f64() * 100.0 / (report.task_span.as_secs_f64() * workers as f64)
        ));
    }
    let matrix = &report.bytes_read;
    lines.push("Bytes read (rows: domain the task ran in; columns: memory node):".to_string());
    let header: Vec<String> = matrix.memory_nodes.iter().map(|n| format!("{:>12}", format!("node {n}"))).collect();
    lines.push(format!("  {:<12}{}", "", header.join("")));
    for (name, row) in matrix.worker_domains.iter().zip(&matrix.bytes) {
        let cells: Vec<String> = row.iter().map(|&b| format!("{:>12}", bytes(b))).collect();
        lines.push(format!("  {name:<12}{}", cells.join("")));
    }
    let local_nodes: Vec<_> = scheduler.domains().domains.iter().map(|d| d.memory_nodes.clone()).collect();
    let total = matrix.total();
    let local = matrix.local_bytes(&local_nodes);
    if total > 0 {
        lines.push(format!(
            "Local: {:.1}% of {} ({} remote)",
            local as f64 * 100.0 / total as f64,
            bytes(total),
            bytes(total - local)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use crate::Database;

    fn explain_analyze(sql: &str) -> Vec<String> {
        let db = Database::new().unwrap();
        let mut session = db.session();
        session.execute_one("CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT)").unwrap();
        let values: Vec<String> = (1..=100).map(|i| format!("({i}, 'v{}')", i % 7)).collect();
        session.execute_one(&format!("INSERT INTO t VALUES {}", values.join(", "))).unwrap();
        let output = session.execute_one(&format!("EXPLAIN ANALYZE {sql}")).unwrap();
        output.rows.iter().map(|row| row[0].to_string()).collect()
    }

    fn line<'a>(lines: &'a [String], prefix: &str) -> &'a str {
        lines.iter().find(|l| l.trim_start().starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} in {lines:#?}"))
    }

    #[test]
    fn each_operator_after_the_scan_has_its_rows_and_time() {
        // DISTINCT over a table is the scan's grouping: of its 7 groups, each merge task hands on its best 3.
        let lines = explain_analyze("SELECT DISTINCT b FROM t WHERE a <= 50 ORDER BY b DESC LIMIT 3");
        assert!(line(&lines, "Scan t:").contains("50 selected"), "{lines:#?}");
        assert!(line(&lines, "Group Key:").ends_with("b"), "{lines:#?}");
        let project = line(&lines, "Project:");
        let project_rows: usize = project["Project: ".len()..].split(' ').next().unwrap().parse().unwrap();
        assert!((3..=7).contains(&project_rows), "{lines:#?}");
        // Under a LIMIT the sort takes only the first OFFSET + LIMIT of those rows.
        assert!(line(&lines, "Sort:").starts_with("Sort: 3 rows, "), "{lines:#?}");
        assert!(line(&lines, "Limit:").starts_with("Limit: 3 rows, "), "{lines:#?}");
        assert!(line(&lines, "Limit:").ends_with(" ms on the session thread"));
        // Over rows that are no scan's, DISTINCT runs after them.
        let lines = explain_analyze("SELECT DISTINCT x FROM (VALUES (1), (1), (2)) v(x)");
        assert!(line(&lines, "Distinct:").starts_with("Distinct: 2 rows, "), "{lines:#?}");
    }

    #[test]
    fn a_projecting_subquerys_where_and_grouping_run_in_the_scan() {
        let lines = explain_analyze(
            "SELECT g, count(*) FROM (SELECT a % 10 AS g, b FROM t WHERE a > 5) s WHERE g < 3 GROUP BY g",
        );
        assert!(line(&lines, "-> Parallel Scan on t").contains("hash aggregate"), "{lines:#?}");
        assert_eq!(line(&lines, "Filter:").trim(), "Filter: ((a > 5) AND ((a % 10) < 3))", "{lines:#?}");
        assert_eq!(line(&lines, "Group Key:").trim(), "Group Key: (a % 10)", "{lines:#?}");
        assert!(!lines.iter().any(|l| l.contains("Filter (HAVING)") || l.contains("Aggregate:")), "{lines:#?}");
        // A volatile column stays where it is evaluated once.
        let lines = explain_analyze("SELECT count(*) FROM (SELECT random() AS r FROM t) s WHERE r < 0.5");
        assert!(line(&lines, "Filter (HAVING):").starts_with("Filter (HAVING): "), "{lines:#?}");
    }

    #[test]
    fn lookups_and_union_all_are_operators_too() {
        let lines = explain_analyze("(SELECT b FROM t WHERE a = 5) UNION ALL (SELECT b FROM t WHERE a = 6)");
        assert_eq!(lines.iter().filter(|l| l.starts_with("Index Lookup on t: 1 rows")).count(), 2, "{lines:#?}");
        assert!(line(&lines, "Append:").starts_with("Append: 2 rows, "), "{lines:#?}");
    }
}
