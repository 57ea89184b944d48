//! Progress that only moves forward, with an estimate of the time left.
//!
//! MCP requires `progress` to increase strictly with each notification; tools
//! report whatever they have. The tracker drops reports that do not move
//! forward and estimates the remaining time from the average rate so far.

use crate::event::Progress;

/// Filters progress reports down to strictly increasing ones.
///
/// ```
/// use weir_core::ProgressTracker;
/// let mut tracker = ProgressTracker::new(0);
/// let first = tracker.advance(25.0, Some(100.0), 1_000).unwrap();
/// assert_eq!(first.eta_ms, Some(3_000)); // 25 per second, 75 to go
/// assert!(tracker.advance(25.0, Some(100.0), 2_000).is_none()); // not forward
/// assert!(tracker.advance(10.0, Some(100.0), 2_000).is_none());
/// ```
#[derive(Debug, Clone)]
pub struct ProgressTracker {
    started_ms: u64,
    last: Option<f64>,
}

impl ProgressTracker {
    /// A tracker for work that began at `started_ms` (any monotonic clock in
    /// milliseconds, the same one passed to [`ProgressTracker::advance`]).
    pub fn new(started_ms: u64) -> ProgressTracker {
        ProgressTracker {
            started_ms,
            last: None,
        }
    }

    /// A report worth sending, or `None` when `progress` is not beyond the
    /// last one sent (or is not a finite number).
    pub fn advance(&mut self, progress: f64, total: Option<f64>, now_ms: u64) -> Option<Progress> {
        if !progress.is_finite() || self.last.is_some_and(|last| progress <= last) {
            return None;
        }
        self.last = Some(progress);
        let elapsed_ms = now_ms.saturating_sub(self.started_ms) as f64;
        let eta_ms = total
            .filter(|total| {
                total.is_finite() && *total >= progress && progress > 0.0 && elapsed_ms > 0.0
            })
            .map(|total| ((total - progress) * elapsed_ms / progress).round() as u64);
        Some(Progress {
            progress,
            total,
            eta_ms,
            ..Progress::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn what_passes_is_strictly_increasing(reports in prop::collection::vec(-5.0f64..100.0, 0..100)) {
            let mut tracker = ProgressTracker::new(0);
            let passed: Vec<f64> = reports
                .iter()
                .enumerate()
                .filter_map(|(i, p)| tracker.advance(*p, Some(100.0), i as u64).map(|r| r.progress))
                .collect();
            prop_assert!(passed.windows(2).all(|w| w[0] < w[1]));
            // Nothing larger than what passed was dropped.
            let max = reports.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(reports.is_empty() || passed.last() == Some(&max));
        }
    }

    #[test]
    fn nan_and_infinity_are_refused() {
        let mut tracker = ProgressTracker::new(0);
        assert!(tracker.advance(f64::NAN, None, 1).is_none());
        assert!(tracker.advance(f64::INFINITY, None, 1).is_none());
        assert_eq!(tracker.advance(1.0, None, 1).unwrap().eta_ms, None);
    }
}
