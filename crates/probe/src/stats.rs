//! Repetitions, medians and spreads: how one number is made from several samples, and when to distrust it.
//!
//! Every figure the prober prints is the *median* of its repetitions (robust to the one sample a VM's neighbour
//! spoils), shown with the smallest and largest sample and their spread. Repetitions whose spread exceeds
//! [`DISAGREEMENT_THRESHOLD`] are flagged, and every report says so: on shared machines a 15% spread is common
//! (five multichase samples of one run spanned 141–171 ns on the development VM), and a figure that hides it is a
//! figure nobody should compare against.

use serde::{Deserialize, Serialize};

/// Repetitions whose `(max - min) / median` exceeds this disagree, and the report says so.
pub const DISAGREEMENT_THRESHOLD: f64 = 0.10;

/// The summary of repeated samples of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Samples that went into it.
    pub samples: usize,
    /// The median (the mean of the two middle samples for an even count).
    pub median: f64,
    /// The smallest sample.
    pub min: f64,
    /// The largest sample.
    pub max: f64,
    /// The arithmetic mean.
    pub mean: f64,
    /// `(max - min) / median`: 0.05 means the samples span 5% of the median.
    pub spread: f64,
    /// Whether `spread` exceeds [`DISAGREEMENT_THRESHOLD`].
    pub disagrees: bool,
}

impl Summary {
    /// Summarises `values`; `None` when there are none or any is not finite.
    pub fn of(values: &[f64]) -> Option<Summary> {
        if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
            return None;
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 };
        let (min, max) = (sorted[0], sorted[n - 1]);
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let spread = if median > 0.0 { (max - min) / median } else { 0.0 };
        Some(Summary { samples: n, median, min, max, mean, spread, disagrees: spread > DISAGREEMENT_THRESHOLD })
    }
}

/// The thesis's cell: over the CPUs of a domain, the smallest, average and largest per-CPU median.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread3 {
    /// Smallest per-CPU value.
    pub min: f64,
    /// Average of the per-CPU values.
    pub avg: f64,
    /// Largest per-CPU value.
    pub max: f64,
}

impl Spread3 {
    /// Min, average and max of `values`; `None` when empty.
    pub fn of(values: &[f64]) -> Option<Spread3> {
        if values.is_empty() {
            return None;
        }
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let avg = values.iter().sum::<f64>() / values.len() as f64;
        Some(Spread3 { min, avg, max })
    }

    /// `-2.8 79.3 +2.3`: min and max as offsets from the average, as the thesis's tables print them.
    pub fn thesis_cell(&self, decimals: usize) -> String {
        format!(
            "-{:.d$} {:.d$} +{:.d$}",
            (self.avg - self.min).max(0.0),
            self.avg,
            (self.max - self.avg).max(0.0),
            d = decimals
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max_and_spread() {
        let s = Summary::of(&[100.0, 104.0, 98.0, 102.0, 101.0]).unwrap();
        assert_eq!(s.samples, 5);
        assert_eq!(s.median, 101.0);
        assert_eq!((s.min, s.max), (98.0, 104.0));
        assert!((s.mean - 101.0).abs() < 1e-9);
        assert!((s.spread - 6.0 / 101.0).abs() < 1e-12);
        assert!(!s.disagrees);
    }

    #[test]
    fn an_even_count_takes_the_middle_pair() {
        assert_eq!(Summary::of(&[4.0, 1.0, 3.0, 2.0]).unwrap().median, 2.5);
    }

    #[test]
    fn repetitions_more_than_ten_percent_apart_disagree() {
        assert!(Summary::of(&[100.0, 111.0, 105.0]).unwrap().disagrees);
        assert!(!Summary::of(&[100.0, 109.0, 105.0]).unwrap().disagrees);
        // A single wild sample among many still counts: the spread is max - min.
        assert!(Summary::of(&[141.0, 142.0, 143.0, 171.0, 142.0]).unwrap().disagrees);
    }

    #[test]
    fn nothing_to_summarise() {
        assert!(Summary::of(&[]).is_none());
        assert!(Summary::of(&[1.0, f64::NAN]).is_none());
        assert!(Spread3::of(&[]).is_none());
    }

    #[test]
    fn thesis_cells_print_offsets_from_the_average() {
        let cell = Spread3::of(&[76.5, 79.3, 82.1]).unwrap();
        assert_eq!(cell.thesis_cell(1), "-2.8 79.3 +2.8");
    }
}
