//! Keeping a quiet run audible: a `progress` event after a stretch without
//! one, whose value a progress-only client still takes.
//!
//! Hosts time a tool call out unless progress arrives (the TypeScript SDK
//! resets its 60 s timeout on each progress notification when asked to;
//! proxies drop silent streams). MCP wants each progress value strictly
//! above the last, and the server sends a client only those, so a
//! heartbeat that repeated the last value would reach the log but not the
//! host. A [`Heartbeat`] watches the progress a run reports and makes each
//! beat's value the smallest step above it.

use std::time::Duration;

use tokio::time::Instant;
use weir_core::{EventKind, Progress};

/// The step a beat adds to the last progress value: small beside any count
/// a tool reports, large enough that the next count is still above it.
const STEP: f64 = 1e-3;

/// When a run has reported no progress for `every`, the progress that says
/// it is still going. Feed it every event the run emits ([`Heartbeat::saw`]);
/// sleep until [`Heartbeat::due`]; then emit [`Heartbeat::beat`].
#[derive(Clone, Debug)]
pub struct Heartbeat {
    every: Duration,
    quiet_since: Instant,
    /// The highest progress value reported, by the run or a beat.
    last: Option<f64>,
    /// The total the run reported last.
    total: Option<f64>,
}

impl Heartbeat {
    /// A heartbeat after `every` of silence, counted from now.
    pub fn new(every: Duration) -> Heartbeat {
        Heartbeat {
            every,
            quiet_since: Instant::now(),
            last: None,
            total: None,
        }
    }

    /// The run emitted `event`. Only progress ends the silence (a host's
    /// timeout is reset by progress notifications, not by log messages or
    /// partial results, which some clients never see); its value is
    /// remembered so that beats stay above it.
    pub fn saw(&mut self, event: &EventKind) {
        if let EventKind::Progress(progress) = event
            && progress.progress.is_finite()
        {
            self.quiet_since = Instant::now();
            self.last = Some(
                self.last
                    .map_or(progress.progress, |last| last.max(progress.progress)),
            );
            self.total = progress.total.or(self.total);
        }
    }

    /// When the next beat is due, if nothing is emitted before.
    pub fn due(&self) -> Instant {
        self.quiet_since + self.every
    }

    /// The beat: a progress just above the last value (0 before any), with
    /// the last total and `message`. Counts as emitted.
    pub fn beat(&mut self, message: impl Into<String>) -> Progress {
        let value = match self.last {
            None => 0.0,
            Some(last) => (last + STEP).max(last.next_up()),
        };
        self.last = Some(value);
        self.quiet_since = Instant::now();
        Progress {
            progress: value,
            total: self.total,
            message: Some(message.into()),
            ..Progress::default()
        }
    }

    /// How long the run has been quiet.
    pub fn quiet_for(&self) -> Duration {
        self.quiet_since.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn progress(value: f64, total: Option<f64>) -> EventKind {
        Progress {
            progress: value,
            total,
            ..Progress::default()
        }
        .into()
    }

    #[tokio::test(start_paused = true)]
    async fn beats_come_after_silence_and_each_is_above_the_last_progress() {
        let mut heart = Heartbeat::new(Duration::from_secs(15));
        let start = Instant::now();
        assert_eq!(heart.due(), start + Duration::from_secs(15));
        assert_eq!(heart.beat("quiet").progress, 0.0);
        let second = heart.beat("quiet");
        assert!(second.progress > 0.0);
        tokio::time::advance(Duration::from_secs(5)).await;
        heart.saw(&progress(3.0, Some(4.0)));
        assert_eq!(heart.due(), start + Duration::from_secs(20));
        // A log message is not progress: the host hears nothing of it.
        tokio::time::advance(Duration::from_secs(5)).await;
        let log = weir_core::Log {
            level: weir_core::LogLevel::Info,
            stream: weir_core::LogStream::default(),
            text: "busy".into(),
        };
        heart.saw(&log.into());
        assert_eq!(heart.due(), start + Duration::from_secs(20));
        // A lower value reported late does not pull the beats down.
        heart.saw(&progress(2.0, None));
        let beat = heart.beat("still going");
        assert!(beat.progress > 3.0 && beat.progress < 3.01, "{beat:?}");
        assert_eq!(beat.total, Some(4.0));
        assert_eq!(beat.message.as_deref(), Some("still going"));
        assert!(heart.beat("again").progress > beat.progress);
        // Past where a fixed step is lost in rounding, the next float up.
        heart.saw(&progress(1e300, None));
        assert!(heart.beat("big").progress > 1e300);
    }
}
