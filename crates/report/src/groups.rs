//! Bar charts with more than one bar per label: grouped bars (one colour per series, as the thesis's throughput
//! figures compare configurations at every skew) and stacked bars (parts of a whole, as its memory-traffic panels
//! split each domain's bytes into local and remote).
//!
//! Same drawing rules as [`crate::chart`]: plotters' SVG backend only, a legend when there is more than one series.

use plotters::prelude::*;

use crate::chart::{Bar, ChartError, PALETTE, bar_chart, error, error_bar};

/// One series of a grouped bar chart: a bar (with its spread) per group, or nothing where it was not measured.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupedSeries {
    /// Legend text.
    pub name: String,
    /// One entry per group; the bar's label is ignored.
    pub bars: Vec<Option<Bar>>,
}

/// Groups of bars side by side, one colour per series, with error bars.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GroupedBarChart {
    /// The chart's title.
    pub title: String,
    /// Y axis description.
    pub y_label: String,
    /// Group labels under the axis.
    pub groups: Vec<String>,
    /// The series.
    pub series: Vec<GroupedSeries>,
}

/// Draws a grouped bar chart.
pub fn grouped_bars(spec: &GroupedBarChart) -> Result<String, ChartError> {
    let groups = spec.groups.len().max(1);
    let series = spec.series.len().max(1);
    let top = spec
        .series
        .iter()
        .flat_map(|s| s.bars.iter().flatten())
        .map(|b| b.high.max(b.value))
        .fold(0f64, f64::max)
        .max(1e-9)
        * 1.25;
    bar_chart(&spec.title, &spec.y_label, &spec.groups, top, 0, spec.series.len() > 1, |chart| {
        // Each group spans [g + 0.1, g + 0.9); its series share that width.
        let width = 0.8 / series as f64;
        for (s, one) in spec.series.iter().enumerate() {
            let colour = PALETTE[s % PALETTE.len()];
            let mut legend_drawn = false;
            for (g, bar) in one.bars.iter().enumerate().take(groups) {
                let Some(bar) = bar else { continue };
                let left = g as f64 + 0.1 + s as f64 * width;
                let right = left + width * 0.9;
                let drawn = chart
                    .draw_series(std::iter::once(Rectangle::new([(left, 0.0), (right, bar.value)], colour.filled())))
                    .map_err(error)?;
                if !legend_drawn {
                    drawn
                        .label(one.name.clone())
                        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
                    legend_drawn = true;
                }
                error_bar(chart, (left + right) / 2.0, width * 0.2, bar, 1)?;
            }
        }
        Ok(())
    })
}

/// One stacked bar: its segments bottom to top, in the order of [`StackedBarChart::segment_names`].
#[derive(Debug, Clone, PartialEq)]
pub struct StackedBar {
    /// Its label under the axis.
    pub label: String,
    /// Segment heights.
    pub segments: Vec<f64>,
}

/// Bars made of parts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StackedBarChart {
    /// The chart's title.
    pub title: String,
    /// Y axis description.
    pub y_label: String,
    /// The legend: what each segment is.
    pub segment_names: Vec<String>,
    /// The bars, left to right.
    pub bars: Vec<StackedBar>,
}

/// Draws a stacked bar chart.
pub fn stacked_bars(spec: &StackedBarChart) -> Result<String, ChartError> {
    let top = spec.bars.iter().map(|b| b.segments.iter().sum::<f64>()).fold(0f64, f64::max).max(1e-9) * 1.2;
    let labels: Vec<String> = spec.bars.iter().map(|b| b.label.clone()).collect();
    bar_chart(&spec.title, &spec.y_label, &labels, top, 1, !spec.segment_names.is_empty(), |chart| {
        for (segment, name) in spec.segment_names.iter().enumerate() {
            let colour = PALETTE[segment % PALETTE.len()];
            let rectangles: Vec<_> = spec
                .bars
                .iter()
                .enumerate()
                .map(|(i, bar)| {
                    let bottom: f64 = bar.segments.iter().take(segment).sum();
                    let height = bar.segments.get(segment).copied().unwrap_or(0.0);
                    let x = i as f64;
                    Rectangle::new([(x + 0.2, bottom), (x + 0.8, bottom + height)], colour.filled())
                })
                .collect();
            chart
                .draw_series(rectangles)
                .map_err(error)?
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bar(value: f64) -> Bar {
        Bar { label: String::new(), value, low: value * 0.9, high: value * 1.1 }
    }

    #[test]
    fn grouped_bars_draw_every_measured_bar_and_a_legend() {
        let svg = grouped_bars(&GroupedBarChart {
            title: "Throughput".into(),
            y_label: "queries/s".into(),
            groups: vec!["k=0".into(), "k=3".into(), "k=6".into()],
            series: vec![
                GroupedSeries { name: "stealing off".into(), bars: vec![Some(bar(10.0)), Some(bar(30.0)), None] },
                GroupedSeries {
                    name: "stealing any".into(),
                    bars: vec![Some(bar(25.0)), Some(bar(31.0)), Some(bar(24.0))],
                },
            ],
        })
        .unwrap();
        for text in ["k=0", "k=3", "k=6", "stealing off", "stealing any", "Throughput"] {
            assert!(svg.contains(text), "{text} missing");
        }
        // 5 bars plus 2 legend swatches plus the background.
        assert!(svg.matches("<rect").count() >= 7, "{}", svg.matches("<rect").count());
    }

    #[test]
    fn stacked_bars_draw_their_segments_and_legend() {
        let svg = stacked_bars(&StackedBarChart {
            title: "Traffic".into(),
            y_label: "GiB".into(),
            segment_names: vec!["local".into(), "remote".into()],
            bars: vec![
                StackedBar { label: "node0".into(), segments: vec![3.0, 1.0] },
                StackedBar { label: "node1".into(), segments: vec![0.0, 2.0] },
            ],
        })
        .unwrap();
        for text in ["node0", "node1", "local", "remote", "Traffic"] {
            assert!(svg.contains(text), "{text} missing");
        }
    }

    #[test]
    fn empty_charts_still_draw() {
        assert!(grouped_bars(&GroupedBarChart::default()).is_ok());
        assert!(stacked_bars(&StackedBarChart::default()).is_ok());
    }
}
