//! Reports of numadb's measurements, shared by `numadb probe` and the later `numadb bench` and `numadb tour`:
//! SVG charts ([`chart`]) and PNG copies of them ([`png`]), one self-contained HTML page ([`html`]), CSV and
//! JSON files ([`csv`], [`write_json`]), and the machine block every report starts with ([`machine`]).
//!
//! Design: a report is plain data turned into files; nothing here measures or knows what a latency is. Charts are
//! SVG strings drawn by `plotters` with its pure-Rust SVG backend only (no font or system library: text is SVG
//! `<text>`), inlined into the HTML page and also written as `.svg` files. [`OutputDir`] writes the files of one
//! run into one directory and remembers them, so that the page can list them.
//!
//! Invariant: a report page loads nothing from anywhere: no script, no stylesheet link, no remote image.

pub mod chart;
pub mod csv;
pub mod groups;
pub mod html;
pub mod machine;
pub mod png;

use std::path::{Path, PathBuf};

pub use chart::{Bar, BarChart, ChartError, CurveChart, Heatmap, Marker, Series};
pub use csv::Csv;
pub use groups::{GroupedBarChart, GroupedSeries, StackedBar, StackedBarChart};
pub use html::HtmlPage;
pub use machine::MachineBlock;

/// Formats a byte count with a binary unit: `4.2 GiB`, `48 KiB`, `512 B`.
pub use numadb_topology::format_bytes as bytes;

/// Seconds since the epoch as `YYYY-MM-DDTHH-MM-SSZ` (dashes, so that it is a portable file name).
pub fn utc_timestamp(seconds: u64) -> String {
    let days = (seconds / 86_400) as i64;
    let rest = seconds % 86_400;
    // Howard Hinnant's days-to-civil algorithm.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}-{:02}-{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// Now, as [`utc_timestamp`] writes it.
pub fn utc_now() -> String {
    let seconds = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    utc_timestamp(seconds)
}

/// Serialises `value` as pretty JSON.
pub fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("report documents serialise") + "\n"
}

/// Writes `value` as pretty JSON to `path`.
pub fn write_json<T: serde::Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    std::fs::write(path, to_json(value))
}

/// The directory one run writes its files into, and the files written so far.
#[derive(Debug, Clone)]
pub struct OutputDir {
    path: PathBuf,
    written: Vec<String>,
}

impl OutputDir {
    /// Creates the directory (and its parents).
    pub fn create(path: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(path)?;
        Ok(Self { path: path.to_path_buf(), written: Vec::new() })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `contents` to `name` inside the directory.
    pub fn write(&mut self, name: &str, contents: impl AsRef<[u8]>) -> std::io::Result<PathBuf> {
        let path = self.path.join(name);
        std::fs::write(&path, contents)?;
        self.written.push(name.to_string());
        Ok(path)
    }

    /// The names written so far, in order.
    pub fn written(&self) -> &[String] {
        &self.written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_dir_remembers_its_files() {
        let dir = std::env::temp_dir().join(format!("numadb-report-test-{}", std::process::id()));
        let mut out = OutputDir::create(&dir).unwrap();
        out.write("a.json", to_json(&serde_json::json!({"x": 1}))).unwrap();
        assert_eq!(out.written(), ["a.json"]);
        assert!(std::fs::read_to_string(dir.join("a.json")).unwrap().contains("\"x\": 1"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
