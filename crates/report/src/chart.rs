//! SVG charts: heatmaps for matrices, curves with logarithmic axes, bars with error bars.
//!
//! Drawn with `plotters` on its SVG backend only, with no font feature: text is emitted as SVG `<text>` elements
//! that the viewer renders, so nothing here needs fontconfig, freetype or any system library, and the crate builds
//! offline with cargo alone. Every chart is a `String` holding one `<svg>` document, which the HTML builder inlines
//! and the CLI writes to a `.svg` file; [`crate::png`] rasterises the same document to PNG in pure Rust.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// Width and height of every chart, in SVG pixels.
pub const CHART_SIZE: (u32, u32) = (860, 480);
/// Font family of every label.
const FONT: &str = "sans-serif";
/// Colours of successive series (colour-blind-safe, after Okabe and Ito).
pub const PALETTE: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
];

/// A chart that could not be drawn (plotters reports drawing errors; with the SVG backend they are bugs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChartError(pub String);

impl std::fmt::Display for ChartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "drawing a chart: {}", self.0)
    }
}

impl std::error::Error for ChartError {}

pub(crate) fn error(e: impl std::fmt::Display) -> ChartError {
    ChartError(e.to_string())
}

/// A matrix shown as coloured cells with their values written in.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    /// The chart's title.
    pub title: String,
    /// Row labels, top to bottom (the CPU domains).
    pub rows: Vec<String>,
    /// Column labels, left to right (the memory nodes).
    pub columns: Vec<String>,
    /// `values[row][column]`; `None` for a cell not measured.
    pub values: Vec<Vec<Option<f64>>>,
    /// The unit, shown in the title (`ns`, `MB/s`).
    pub unit: String,
    /// Decimals of the written values.
    pub decimals: usize,
    /// Whether a larger value is better (bandwidth: darker = more) or worse (latency: darker = slower).
    pub higher_is_better: bool,
}

/// Draws a heatmap.
pub fn heatmap(map: &Heatmap) -> Result<String, ChartError> {
    let mut svg = String::new();
    {
        let (rows, columns) = (map.rows.len().max(1), map.columns.len().max(1));
        let root = SVGBackend::with_string(&mut svg, heatmap_size(rows, columns)).into_drawing_area();
        root.fill(&WHITE).map_err(error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(format!("{} ({})", map.title, map.unit), (FONT, 20))
            .margin(16)
            .x_label_area_size(36)
            .y_label_area_size(110)
            .build_cartesian_2d(0f64..columns as f64, rows as f64..0f64)
            .map_err(error)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_labels(columns * 2 + 1)
            .y_labels(rows * 2 + 1)
            .x_label_formatter(&|x| label_at(&map.columns, *x))
            .y_label_formatter(&|y| label_at(&map.rows, *y))
            .x_desc("memory node")
            .y_desc("CPU domain")
            .label_style((FONT, 14))
            .draw()
            .map_err(error)?;
        let known: Vec<f64> = map.values.iter().flatten().flatten().copied().collect();
        let low = known.iter().copied().fold(f64::INFINITY, f64::min);
        let high = known.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        for (r, row) in map.values.iter().enumerate() {
            for (c, value) in row.iter().enumerate() {
                let (x, y) = (c as f64, r as f64);
                let colour = match value {
                    Some(v) => {
                        let t = if high > low { (v - low) / (high - low) } else { 0.5 };
                        shade(t)
                    }
                    None => RGBColor(230, 230, 230),
                };
                chart
                    .draw_series(std::iter::once(Rectangle::new(
                        [(x + 0.02, y + 0.02), (x + 0.98, y + 0.98)],
                        colour.filled(),
                    )))
                    .map_err(error)?;
                let text = value.map_or("not measured".to_string(), |v| format!("{v:.d$}", d = map.decimals));
                let dark = value.is_some_and(|v| high > low && (v - low) / (high - low) > 0.6);
                let style = TextStyle::from((FONT, 16).into_font()).color(if dark { &WHITE } else { &BLACK }).pos(
                    plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Center,
                    ),
                );
                chart.draw_series(std::iter::once(Text::new(text, (x + 0.5, y + 0.5), style))).map_err(error)?;
            }
        }
        root.present().map_err(error)?;
    }
    Ok(svg)
}

/// A heatmap grows with its cells (a 1×1 matrix should not fill a page), up to [`CHART_SIZE`].
fn heatmap_size(rows: usize, columns: usize) -> (u32, u32) {
    let width = (200 + 150 * columns as u32).min(CHART_SIZE.0);
    let height = (130 + 60 * rows as u32).min(CHART_SIZE.1);
    (width.max(420), height.max(220))
}

/// The label of the cell (or bar slot) whose centre is at `position` (labels are drawn only at centres: 0.5, 1.5, …).
fn label_at(labels: &[String], position: f64) -> String {
    let index = position - 0.5;
    if index >= 0.0 && (index - index.round()).abs() < 1e-6 {
        labels.get(index.round() as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// A light-to-dark blue ramp: 0 is pale, 1 is dark.
fn shade(t: f64) -> RGBColor {
    let t = t.clamp(0.0, 1.0);
    let lerp = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
    RGBColor(lerp(222.0, 8.0), lerp(235.0, 48.0), lerp(247.0, 107.0))
}

/// One line of a curve chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub name: String,
    /// (x, y) points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// A labelled vertical or horizontal line across a chart (a cache size, a plateau).
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    /// Where it is, in data units.
    pub at: f64,
    /// Its label.
    pub label: String,
}

/// Lines over (optionally logarithmic) axes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CurveChart {
    /// The chart's title.
    pub title: String,
    /// X axis description.
    pub x_label: String,
    /// Y axis description.
    pub y_label: String,
    /// Logarithmic x axis.
    pub x_log: bool,
    /// Logarithmic y axis.
    pub y_log: bool,
    /// Show x values as byte sizes (`4 KiB`, `1 GiB`).
    pub x_bytes: bool,
    /// The lines.
    pub series: Vec<Series>,
    /// Vertical lines labelled near the top (reported sizes, say).
    pub x_markers: Vec<Marker>,
    /// Vertical lines labelled near the bottom, in another colour (measured features, say).
    pub x_markers_low: Vec<Marker>,
    /// Horizontal lines.
    pub y_markers: Vec<Marker>,
}

/// Draws a curve chart.
pub fn curve(chart_spec: &CurveChart) -> Result<String, ChartError> {
    if chart_spec.x_log && chart_spec.x_bytes {
        // Byte sizes read best at powers of two: plot log2(x) on a linear axis and label its integers.
        let log2 = |x: f64| x.max(f64::MIN_POSITIVE).log2();
        let transformed = CurveChart {
            x_log: false,
            series: chart_spec
                .series
                .iter()
                .map(|s| Series { name: s.name.clone(), points: s.points.iter().map(|&(x, y)| (log2(x), y)).collect() })
                .collect(),
            x_markers: chart_spec.x_markers.iter().map(|m| Marker { at: log2(m.at), label: m.label.clone() }).collect(),
            x_markers_low: chart_spec
                .x_markers_low
                .iter()
                .map(|m| Marker { at: log2(m.at), label: m.label.clone() })
                .collect(),
            ..chart_spec.clone()
        };
        return curve_inner(&transformed, true);
    }
    curve_inner(chart_spec, false)
}

fn curve_inner(chart_spec: &CurveChart, x_is_log2_bytes: bool) -> Result<String, ChartError> {
    let points: Vec<(f64, f64)> = chart_spec.series.iter().flat_map(|s| s.points.iter().copied()).collect();
    let (mut x0, mut x1) = bounds(
        points.iter().map(|p| p.0).chain(chart_spec.x_markers.iter().chain(&chart_spec.x_markers_low).map(|m| m.at)),
    );
    let (mut y0, mut y1) = bounds(points.iter().map(|p| p.1).chain(chart_spec.y_markers.iter().map(|m| m.at)));
    if chart_spec.x_log {
        (x0, x1) = (x0.max(f64::MIN_POSITIVE) / 1.5, x1 * 1.5);
    } else if x_is_log2_bytes {
        (x0, x1) = (x0.floor() - 0.5, x1.ceil() + 0.5);
    } else {
        let pad = (x1 - x0).max(1e-9) * 0.05;
        (x0, x1) = (x0 - pad, x1 + pad);
    }
    if chart_spec.y_log {
        (y0, y1) = (y0.max(f64::MIN_POSITIVE) / 1.5, y1 * 1.5);
    } else {
        (y0, y1) = (0f64.min(y0), y1 * 1.1 + 1e-9);
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, CHART_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(error)?;
        match (chart_spec.x_log, chart_spec.y_log) {
            (true, true) => draw_curve(&root, chart_spec, x_is_log2_bytes, (x0..x1).log_scale(), (y0..y1).log_scale())?,
            (true, false) => draw_curve(&root, chart_spec, x_is_log2_bytes, (x0..x1).log_scale(), y0..y1)?,
            (false, true) => draw_curve(&root, chart_spec, x_is_log2_bytes, x0..x1, (y0..y1).log_scale())?,
            (false, false) => draw_curve(&root, chart_spec, x_is_log2_bytes, x0..x1, y0..y1)?,
        }
        root.present().map_err(error)?;
    }
    Ok(svg)
}

fn bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (low, high) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
    if low.is_finite() { (low, high.max(low)) } else { (1.0, 10.0) }
}

fn draw_curve<X, Y>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    spec: &CurveChart,
    x_is_log2_bytes: bool,
    x_range: X,
    y_range: Y,
) -> Result<(), ChartError>
where
    X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    X::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
    Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&spec.title, (FONT, 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(x_range, y_range)
        .map_err(error)?;
    let x_format = |x: &f64| {
        if x_is_log2_bytes {
            // Only whole powers of two get a label.
            if (x - x.round()).abs() < 1e-6 && *x >= 0.0 {
                crate::bytes(2f64.powf(x.round()) as u64)
            } else {
                String::new()
            }
        } else if spec.x_bytes {
            crate::bytes(*x as u64)
        } else {
            format!("{x}")
        }
    };
    let y_format = |y: &f64| {
        let magnitude = y.abs();
        if magnitude >= 100.0 || *y == 0.0 {
            format!("{y:.0}")
        } else if magnitude >= 1.0 {
            format!("{y:.1}")
        } else {
            format!("{y:.2}")
        }
    };
    chart
        .configure_mesh()
        .y_label_formatter(&y_format)
        .x_desc(&spec.x_label)
        .y_desc(&spec.y_label)
        .x_label_formatter(&x_format)
        .label_style((FONT, 13))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(error)?;
    let (x_range, y_range) = (chart.x_range(), chart.y_range());
    let x_marker_rows =
        [(&spec.x_markers, true, RGBColor(150, 150, 150)), (&spec.x_markers_low, false, RGBColor(0, 114, 178))];
    for (markers, top, colour) in x_marker_rows {
        for (i, marker) in markers.iter().enumerate() {
            let style = ShapeStyle::from(colour).stroke_width(1);
            chart
                .draw_series(DashedLineSeries::new([(marker.at, y_range.start), (marker.at, y_range.end)], 6, 4, style))
                .map_err(error)?;
            // Stagger labels over three rows so that neighbouring markers do not overwrite each other.
            let row = (i % 3) as f64 * 0.05;
            let y = label_height(&y_range, if top { 0.96 - row } else { 0.03 + row }, spec.y_log);
            chart
                .draw_series(std::iter::once(Text::new(
                    marker.label.clone(),
                    (marker.at, y),
                    (FONT, 12).into_font().color(&colour),
                )))
                .map_err(error)?;
        }
    }
    for marker in &spec.y_markers {
        let style = ShapeStyle::from(RGBColor(200, 120, 120)).stroke_width(1);
        chart
            .draw_series(DashedLineSeries::new([(x_range.start, marker.at), (x_range.end, marker.at)], 6, 4, style))
            .map_err(error)?;
        chart
            .draw_series(std::iter::once(Text::new(
                marker.label.clone(),
                (x_range.start, marker.at),
                (FONT, 12).into_font().color(&RGBColor(160, 60, 60)),
            )))
            .map_err(error)?;
    }
    for (i, series) in spec.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        chart
            .draw_series(LineSeries::new(series.points.iter().copied(), colour.stroke_width(2)))
            .map_err(error)?
            .label(series.name.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], colour.stroke_width(2)));
        chart.draw_series(series.points.iter().map(|&p| Circle::new(p, 3, colour.filled()))).map_err(error)?;
    }
    if spec.series.len() > 1 || spec.series.first().is_some_and(|s| !s.name.is_empty()) {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(RGBColor(200, 200, 200))
            .label_font((FONT, 13))
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(error)?;
    }
    Ok(())
}

/// A y value at `fraction` of the axis height (in log space for a log axis).
fn label_height(range: &std::ops::Range<f64>, fraction: f64, log: bool) -> f64 {
    if log {
        (range.start.ln() + (range.end.ln() - range.start.ln()) * fraction).exp()
    } else {
        range.start + (range.end - range.start) * fraction
    }
}

/// One bar with its spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Its label under the axis.
    pub label: String,
    /// The bar's height (a median).
    pub value: f64,
    /// The lower end of the error bar (the smallest sample).
    pub low: f64,
    /// The upper end of the error bar (the largest sample).
    pub high: f64,
}

/// Bars with error bars.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BarChart {
    /// The chart's title.
    pub title: String,
    /// Y axis description.
    pub y_label: String,
    /// The bars, left to right.
    pub bars: Vec<Bar>,
}

/// Draws a bar chart.
pub fn bars(spec: &BarChart) -> Result<String, ChartError> {
    let top = spec.bars.iter().map(|b| b.high.max(b.value)).fold(0f64, f64::max).max(1e-9) * 1.15;
    let labels: Vec<String> = spec.bars.iter().map(|b| b.label.clone()).collect();
    bar_chart(&spec.title, &spec.y_label, &labels, top, 0, false, |chart| {
        for (i, bar) in spec.bars.iter().enumerate() {
            let x = i as f64;
            let colour = PALETTE[i % PALETTE.len()];
            chart
                .draw_series(std::iter::once(Rectangle::new([(x + 0.2, 0.0), (x + 0.8, bar.value)], colour.filled())))
                .map_err(error)?;
            error_bar(chart, x + 0.5, 0.1, bar, 2)?;
        }
        Ok(())
    })
}

/// The plotting area of a bar chart: x has one slot per label (slot `i` spans `[i, i + 1)`), y starts at 0.
pub(crate) type BarArea<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// Draws the frame every bar chart shares (title, axes, one label per slot, y labels with `y_decimals`) up to
/// `top`, lets `draw` put the bars in, adds the legend of the labelled series when `legend` is set (upper right),
/// and returns the SVG.
pub(crate) fn bar_chart(
    title: &str,
    y_label: &str,
    labels: &[String],
    top: f64,
    y_decimals: usize,
    legend: bool,
    draw: impl FnOnce(&mut BarArea<'_, '_>) -> Result<(), ChartError>,
) -> Result<String, ChartError> {
    let count = labels.len().max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, CHART_SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(error)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 20))
            .margin(16)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..count as f64, 0f64..top)
            .map_err(error)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(count * 2 + 1)
            .x_label_formatter(&|x| label_at(labels, *x))
            .y_desc(y_label)
            .y_label_formatter(&|y| format!("{y:.y_decimals$}"))
            .label_style((FONT, 13))
            .draw()
            .map_err(error)?;
        draw(&mut chart)?;
        if legend {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(RGBColor(200, 200, 200))
                .label_font((FONT, 13))
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(error)?;
        }
        root.present().map_err(error)?;
    }
    Ok(svg)
}

/// A bar's error bar: a vertical line from `low` to `high` at `middle`, with ticks `tick` wide on each side.
pub(crate) fn error_bar(
    chart: &mut BarArea<'_, '_>,
    middle: f64,
    tick: f64,
    bar: &Bar,
    stroke_width: u32,
) -> Result<(), ChartError> {
    let whisker = BLACK.stroke_width(stroke_width);
    for segment in [
        [(middle, bar.low), (middle, bar.high)],
        [(middle - tick, bar.low), (middle + tick, bar.low)],
        [(middle - tick, bar.high), (middle + tick, bar.high)],
    ] {
        chart.draw_series(std::iter::once(PathElement::new(segment, whisker))).map_err(error)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heatmap_writes_every_cell() {
        let svg = heatmap(&Heatmap {
            title: "Latency".into(),
            rows: vec!["node0".into(), "node1".into()],
            columns: vec!["0".into(), "1".into()],
            values: vec![vec![Some(74.0), Some(156.6)], vec![Some(152.7), None]],
            unit: "ns".into(),
            decimals: 1,
            higher_is_better: false,
        })
        .unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        for text in ["74.0", "156.6", "152.7", "not measured", "node0", "node1", "Latency (ns)"] {
            assert!(svg.contains(text), "{text} missing");
        }
    }

    #[test]
    fn a_log_curve_with_markers_draws() {
        let svg = curve(&CurveChart {
            title: "Cache curve".into(),
            x_label: "working set".into(),
            y_label: "ns".into(),
            x_log: true,
            y_log: true,
            x_bytes: true,
            series: vec![Series { name: "CPU 0".into(), points: vec![(4096.0, 1.1), (1048576.0, 4.0), (1e9, 140.0)] }],
            x_markers: vec![Marker { at: 49152.0, label: "L1 48 KiB".into() }],
            x_markers_low: vec![Marker { at: 65536.0, label: "cliff 64 KiB".into() }],
            y_markers: vec![Marker { at: 140.0, label: "DRAM 140 ns".into() }],
        })
        .unwrap();
        assert!(svg.contains("L1 48 KiB") && svg.contains("DRAM 140 ns") && svg.contains("CPU 0"));
        assert!(svg.contains("KiB") && svg.contains("<circle"), "byte-formatted axis and points");
    }

    #[test]
    fn bars_have_whiskers() {
        let svg = bars(&BarChart {
            title: "Bandwidth".into(),
            y_label: "MB/s".into(),
            bars: vec![Bar { label: "read".into(), value: 20000.0, low: 19000.0, high: 21000.0 }],
        })
        .unwrap();
        assert!(svg.contains("read") && svg.contains("<rect"));
    }

    #[test]
    fn empty_charts_still_draw() {
        assert!(curve(&CurveChart::default()).is_ok());
        assert!(bars(&BarChart::default()).is_ok());
    }
}
