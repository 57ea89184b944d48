//! Progress that only moves forward, with an estimate of the time left.
//!
//! MCP requires `progress` to increase strictly with each notification; tools
//! report whatever they have. [`ProgressTracker::advance`] drops reports that
//! do not move forward; [`ProgressTracker::milestone`] keeps every milestone
//! (its phase and message are news even when the count is not) and clamps its
//! count so that it never goes back. Both estimate the time left from the
//! pace of the work so far: the units done since the current phase began,
//! over the time it took. Time is passed in (any monotonic clock in
//! milliseconds); this crate never reads a clock.

use crate::event::Progress;

/// A step a run reports: the phase it is in, what is happening, and, when
/// it can count its work, how far along it is.
///
/// Built with chained calls and handed to
/// [`ProgressTracker::milestone`] (or to `RunContext::milestone` in
/// weir-runtime, which supplies the clock and emits the result):
///
/// ```
/// use weir_core::Milestone;
/// // Critique: three of five agents have answered.
/// let agents = Milestone::new("agents").message("codex done").progress(3, 5);
/// // Code intelligence: files indexed so far, against the total given earlier.
/// let files = Milestone::new("indexing").message("src/lib.rs").done(120);
/// // A phase with no count of its own.
/// let synthesis = Milestone::new("synthesizing");
/// # let _ = (agents, files, synthesis);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Milestone {
    phase: String,
    message: Option<String>,
    done: Option<u64>,
    total: Option<u64>,
}

impl Milestone {
    /// A milestone in `phase` (e.g. `indexing`, `running`, `timed out`),
    /// with no message and no count: the count stays where it was.
    pub fn new(phase: impl Into<String>) -> Milestone {
        Milestone {
            phase: phase.into(),
            message: None,
            done: None,
            total: None,
        }
    }

    /// What is happening, for people (e.g. `3 of 5 agents done`, or the
    /// newest line of output).
    pub fn message(mut self, message: impl Into<String>) -> Milestone {
        self.message = Some(message.into());
        self
    }

    /// `done` units of work out of `total`; the total is remembered for
    /// later milestones that give only [`Milestone::done`].
    pub fn progress(mut self, done: u64, total: u64) -> Milestone {
        self.done = Some(done);
        self.total = Some(total);
        self
    }

    /// `done` units of work, against the total given before (if any).
    pub fn done(mut self, done: u64) -> Milestone {
        self.done = Some(done);
        self
    }
}

/// Progress reports of one run, kept forward-only, with an estimate of the
/// time left.
///
/// ```
/// use weir_core::ProgressTracker;
/// let mut tracker = ProgressTracker::new(0);
/// let first = tracker.advance(25.0, Some(100.0), 1_000).unwrap();
/// assert_eq!(first.eta_ms, Some(3_000)); // 25 per second, 75 to go
/// assert!(tracker.advance(25.0, Some(100.0), 2_000).is_none()); // not forward
/// assert!(tracker.advance(10.0, Some(100.0), 2_000).is_none());
/// ```
///
/// Milestones are never dropped; their count is clamped instead:
///
/// ```
/// use weir_core::{Milestone, ProgressTracker};
/// let mut tracker = ProgressTracker::new(0);
/// let step = tracker.milestone(Milestone::new("indexing").progress(2, 10), 4_000);
/// assert_eq!((step.progress, step.eta_ms), (2.0, Some(16_000))); // 2 s a file, 8 to go
/// let late = tracker.milestone(Milestone::new("indexing").done(1), 5_000);
/// assert_eq!(late.progress, 2.0); // a late report does not move it back
/// ```
#[derive(Debug, Clone)]
pub struct ProgressTracker {
    /// Where the current phase's pace is measured from: a time, and the
    /// progress at that time.
    base_ms: u64,
    base_progress: f64,
    last: Option<f64>,
    total: Option<f64>,
    phase: Option<String>,
}

impl ProgressTracker {
    /// A tracker for work that began at `started_ms` (any monotonic clock in
    /// milliseconds, the same one passed to [`ProgressTracker::advance`] and
    /// [`ProgressTracker::milestone`]).
    pub fn new(started_ms: u64) -> ProgressTracker {
        ProgressTracker {
            base_ms: started_ms,
            base_progress: 0.0,
            last: None,
            total: None,
            phase: None,
        }
    }

    /// A report worth sending, or `None` when `progress` is not beyond the
    /// last one (or is not a finite number).
    pub fn advance(&mut self, progress: f64, total: Option<f64>, now_ms: u64) -> Option<Progress> {
        if !progress.is_finite() || self.last.is_some_and(|last| progress <= last) {
            return None;
        }
        self.last = Some(progress);
        Some(Progress {
            progress,
            total,
            eta_ms: self.eta_ms(progress, total, now_ms),
            ..Progress::default()
        })
    }

    /// The progress report `milestone` makes at `now_ms`. Always a report:
    ///
    /// - its count is clamped, never below the last one (a late or
    ///   repeated count reports the last one again; without a count, the
    ///   last one, or 0 before any);
    /// - its total is the milestone's, else the last one given;
    /// - when its phase differs from the previous milestone's, the pace is
    ///   measured afresh from now: the new phase's steps, not the last
    ///   phase's, predict its end (the first phase is measured from the
    ///   tracker's start);
    /// - `eta_ms` is the units left at the pace of this phase's units so
    ///   far, when there is a total and this phase has done some.
    pub fn milestone(&mut self, milestone: Milestone, now_ms: u64) -> Progress {
        let Milestone {
            phase,
            message,
            done,
            total,
        } = milestone;
        let last = self.last.unwrap_or(0.0);
        if self
            .phase
            .as_ref()
            .is_some_and(|previous| *previous != phase)
        {
            self.base_ms = now_ms;
            self.base_progress = last;
        }
        self.phase = Some(phase.clone());
        if let Some(total) = total {
            self.total = Some(total as f64);
        }
        let progress = done.map_or(last, |done| (done as f64).max(last));
        self.last = Some(progress);
        Progress {
            progress,
            total: self.total,
            message,
            phase: Some(phase),
            eta_ms: self.eta_ms(progress, self.total, now_ms),
        }
    }

    /// Milliseconds left at the pace since the base, if it can be told.
    fn eta_ms(&self, progress: f64, total: Option<f64>, now_ms: u64) -> Option<u64> {
        let done = progress - self.base_progress;
        let elapsed_ms = now_ms.saturating_sub(self.base_ms) as f64;
        let total = total.filter(|total| total.is_finite() && *total >= progress)?;
        (done > 0.0 && elapsed_ms > 0.0)
            .then(|| ((total - progress) * elapsed_ms / done).round() as u64)
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

        /// Every milestone makes a report; counts never go back, and each
        /// is the largest count given so far.
        #[test]
        fn milestone_counts_never_go_back(counts in prop::collection::vec(prop::option::of(0u64..50), 0..60)) {
            let mut tracker = ProgressTracker::new(0);
            let mut max = 0;
            for (i, count) in counts.iter().enumerate() {
                let step = match count {
                    Some(done) => Milestone::new("p").progress(*done, 50),
                    None => Milestone::new("p"),
                };
                let report = tracker.milestone(step, i as u64 * 10);
                max = max.max(count.unwrap_or(0));
                prop_assert_eq!(report.progress, max as f64);
                prop_assert!(report.eta_ms.is_none_or(|eta| eta <= 50 * 10 * 60));
            }
        }
    }

    #[test]
    fn nan_and_infinity_are_refused() {
        let mut tracker = ProgressTracker::new(0);
        assert!(tracker.advance(f64::NAN, None, 1).is_none());
        assert!(tracker.advance(f64::INFINITY, None, 1).is_none());
        assert_eq!(tracker.advance(1.0, None, 1).unwrap().eta_ms, None);
    }

    /// The estimate is the time the steps so far really took: three steps
    /// of one second each leave two seconds for the last two; a slower
    /// step stretches it.
    #[test]
    fn the_eta_follows_the_steps_real_durations() {
        let mut tracker = ProgressTracker::new(10_000);
        let eta = |tracker: &mut ProgressTracker, done, now| {
            tracker
                .milestone(Milestone::new("agents").progress(done, 5), now)
                .eta_ms
        };
        assert_eq!(eta(&mut tracker, 0, 10_000), None); // nothing done yet
        assert_eq!(eta(&mut tracker, 1, 11_000), Some(4_000));
        assert_eq!(eta(&mut tracker, 3, 13_000), Some(2_000));
        assert_eq!(eta(&mut tracker, 4, 18_000), Some(2_000)); // 8 s for 4: 2 s each
        assert_eq!(eta(&mut tracker, 5, 19_000), Some(0));
    }

    /// A new phase is measured from its own start: a slow setup phase does
    /// not make the fast phase after it look slow.
    #[test]
    fn a_new_phase_measures_its_own_pace() {
        let mut tracker = ProgressTracker::new(0);
        let cloning = tracker.milestone(Milestone::new("cloning").progress(0, 10), 0);
        assert_eq!(cloning.eta_ms, None);
        let indexing = tracker.milestone(Milestone::new("indexing"), 60_000);
        assert_eq!((indexing.progress, indexing.eta_ms), (0.0, None));
        let first = tracker.milestone(Milestone::new("indexing").done(2), 62_000);
        assert_eq!(first.eta_ms, Some(8_000)); // 1 s a file, not 31
        assert_eq!(first.total, Some(10.0)); // remembered
    }

    /// Without a count the report keeps the last one, with the phase and
    /// message as given; without a total there is no estimate.
    #[test]
    fn a_milestone_without_a_count_keeps_the_last_one() {
        let mut tracker = ProgressTracker::new(0);
        let first = tracker.milestone(Milestone::new("running").message("a").done(7), 1_000);
        assert_eq!(
            (first.progress, first.total, first.eta_ms),
            (7.0, None, None)
        );
        let timed_out = tracker.milestone(Milestone::new("timed out").message("SIGTERM"), 2_000);
        assert_eq!(
            timed_out,
            Progress {
                progress: 7.0,
                total: None,
                message: Some("SIGTERM".into()),
                phase: Some("timed out".into()),
                eta_ms: None,
            }
        );
    }
}
