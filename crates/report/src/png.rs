//! PNG copies of the SVG charts, rendered in pure Rust (`resvg`: an SVG parser and a software rasteriser).
//!
//! Text needs a font file, and no font ships with numadb: the system's fonts are read directly from the usual
//! directories (`/usr/share/fonts`, … — parsed by `fontdb`, no fontconfig or freetype library involved). On a
//! machine without any font the PNG still has every shape and no text, and [`fonts_available`] says so; the SVG
//! files, whose text the viewer renders, stay the reference.

use std::sync::{Arc, OnceLock};

use resvg::{tiny_skia, usvg};

use crate::chart::ChartError;

/// The system's fonts, loaded once per process (scanning the font directories takes tens of milliseconds).
fn fonts() -> Arc<usvg::fontdb::Database> {
    static FONTS: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut database = usvg::fontdb::Database::new();
            database.load_system_fonts();
            database.set_sans_serif_family("DejaVu Sans");
            Arc::new(database)
        })
        .clone()
}

/// Whether any system font was found (without one, PNG charts have no text).
pub fn fonts_available() -> bool {
    !fonts().is_empty()
}

/// Renders an SVG document (a chart of [`crate::chart`]) to PNG bytes, on white.
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>, ChartError> {
    let options = usvg::Options { fontdb: fonts(), ..usvg::Options::default() };
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| ChartError(format!("parsing SVG: {e}")))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| ChartError(format!("an empty {}×{} image", size.width(), size.height())))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| ChartError(format!("encoding PNG: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::{Bar, BarChart, bars};

    #[test]
    fn a_chart_renders_to_a_png_of_its_size() {
        let svg = bars(&BarChart {
            title: "Bandwidth".into(),
            y_label: "MB/s".into(),
            bars: vec![Bar { label: "read".into(), value: 2.0, low: 1.0, high: 3.0 }],
        })
        .unwrap();
        let png = svg_to_png(&svg).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // The IHDR chunk holds the width and height, big-endian, after the signature and chunk header.
        let width = u32::from_be_bytes(png[16..20].try_into().unwrap());
        let height = u32::from_be_bytes(png[20..24].try_into().unwrap());
        assert_eq!((width, height), crate::chart::CHART_SIZE);
        assert!(svg_to_png("not svg").is_err());
    }
}
