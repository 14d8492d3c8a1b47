//! Small formatting helpers shared by the subcommands' human-readable output.

/// Formats a byte count with a binary unit: `4.2 GiB`, `48 KiB`, `512 B` (the report crate's formatter, so that
/// terminal output and report files agree).
pub use numadb_report::bytes;

/// Lays out rows as left-aligned columns separated by two spaces, the first row being the header.
pub fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[c]));
            }
        }
        out.push_str("  ");
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let text = table(&[vec!["a".into(), "bb".into()], vec!["ccc".into(), "d".into()]]);
        assert_eq!(text, "  a    bb\n  ccc  d\n");
    }
}
