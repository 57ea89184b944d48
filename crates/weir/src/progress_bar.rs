//! A live one-line progress display for a terminal's stderr: a bar (a
//! spinner when the total is unknown), the count, percent, the server's
//! message and an ETA from the rate so far. Drawn at most every 80 ms: a
//! report that comes sooner waits for [`ProgressBar::due`] (the caller's
//! timer), so the bar never shows a report older than the newest. Cleared
//! before anything else is printed, then drawn again.

use std::io::Write;
use std::time::{Duration, Instant};

use crate::output;

const CELLS: usize = 24;
const REDRAW: Duration = Duration::from_millis(80);
const SPINNER: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// What the bar shows.
#[derive(Clone, Debug, Default)]
struct Shown {
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
}

pub(crate) struct ProgressBar {
    started: Instant,
    /// The first progress report: where the rate is measured from.
    first: Option<(Instant, f64)>,
    shown: Option<Shown>,
    /// A word in front, e.g. "task working" or "cancelling".
    status: Option<String>,
    drawn: bool,
    last_draw: Option<Instant>,
    /// Something changed since the bar was last drawn.
    dirty: bool,
    frame: usize,
    width: usize,
}

impl ProgressBar {
    pub(crate) fn new() -> ProgressBar {
        let width = std::env::var("COLUMNS")
            .ok()
            .and_then(|columns| columns.parse().ok())
            .filter(|columns| *columns >= 40)
            .unwrap_or(80);
        ProgressBar {
            started: Instant::now(),
            first: None,
            shown: None,
            status: None,
            drawn: false,
            last_draw: None,
            dirty: false,
            frame: 0,
            width,
        }
    }

    /// A new progress report, drawn now unless the last draw was less
    /// than [`REDRAW`] ago (then it is [`ProgressBar::due`]).
    #[cfg_attr(not(feature = "codeintel"), allow(dead_code))]
    pub(crate) fn update(&mut self, progress: f64, total: Option<f64>, message: Option<&str>) {
        self.record(progress, total, message);
        if self.due().is_some_and(|due| due <= Instant::now()) {
            self.draw();
        }
    }

    /// A new progress report, drawn by the caller when it is due.
    pub(crate) fn record(&mut self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let now = Instant::now();
        self.first.get_or_insert((now, progress));
        let message = message
            .map(str::to_owned)
            .or_else(|| self.shown.as_ref().and_then(|shown| shown.message.clone()));
        self.shown = Some(Shown {
            progress,
            total,
            message,
        });
        self.dirty = true;
    }

    /// Sets the word in front of the bar, and redraws.
    #[cfg_attr(not(feature = "codeintel"), allow(dead_code))]
    pub(crate) fn status(&mut self, status: &str) {
        self.set_status(status);
        self.draw();
    }

    /// Sets the word in front of the bar (drawn with the next draw).
    pub(crate) fn set_status(&mut self, status: &str) {
        self.status = Some(status.to_owned());
        self.dirty = true;
    }

    /// When the newest state should be drawn: at once the first time,
    /// else [`REDRAW`] after the last draw; `None` when it is drawn.
    pub(crate) fn due(&self) -> Option<Instant> {
        if !self.dirty {
            return None;
        }
        Some(
            self.last_draw
                .map_or_else(Instant::now, |last| last + REDRAW),
        )
    }

    /// Erases the bar (before other output).
    pub(crate) fn clear(&mut self) {
        if self.drawn {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r\x1b[2K");
            let _ = stderr.flush();
            self.drawn = false;
        }
    }

    /// Draws the bar again (after other output).
    pub(crate) fn draw(&mut self) {
        if self.shown.is_none() && self.status.is_none() {
            return;
        }
        let now = Instant::now();
        self.frame += 1;
        let line = self.line(now);
        let mut stderr = std::io::stderr().lock();
        let _ = write!(stderr, "\r\x1b[2K{line}");
        let _ = stderr.flush();
        self.drawn = true;
        self.dirty = false;
        self.last_draw = Some(now);
    }

    /// The line as of `now`, at most `width - 1` characters.
    fn line(&self, now: Instant) -> String {
        let mut line = String::new();
        if let Some(status) = &self.status {
            line.push_str(status);
            line.push_str("  ");
        }
        let shown = self.shown.clone().unwrap_or_default();
        match shown.total.filter(|total| *total > 0.0) {
            Some(total) => {
                let fraction = (shown.progress / total).clamp(0.0, 1.0);
                let full = (fraction * CELLS as f64).round() as usize;
                line.push('[');
                line.extend(std::iter::repeat_n('█', full));
                line.extend(std::iter::repeat_n('░', CELLS - full));
                line.push_str(&format!(
                    "] {}/{} {:>3.0}%",
                    number(shown.progress),
                    number(total),
                    fraction * 100.0
                ));
            }
            None => {
                line.push(SPINNER[self.frame % SPINNER.len()]);
                if self.shown.is_some() {
                    line.push_str(&format!(" {}", number(shown.progress)));
                }
            }
        }
        let eta = self
            .eta(now)
            .map(|eta| format!(" · ETA {}", output::duration(eta)));
        let elapsed = format!(
            " · {}",
            output::duration((now - self.started).as_millis() as u64)
        );
        let tail = eta.unwrap_or(elapsed);
        if let Some(message) = &shown.message {
            let room = self
                .width
                .saturating_sub(line.chars().count() + tail.chars().count() + 3);
            if room > 3 {
                line.push_str("  ");
                line.extend(message.replace('\n', " ").chars().take(room));
            }
        }
        line.push_str(&tail);
        line.chars().take(self.width - 1).collect()
    }

    /// Time left at the rate since the first report, in ms.
    fn eta(&self, now: Instant) -> Option<u64> {
        let shown = self.shown.as_ref()?;
        let total = shown.total?;
        let (since, from) = self.first?;
        let done = shown.progress - from;
        let elapsed = (now - since).as_secs_f64();
        if done <= 0.0 || elapsed <= 0.0 || shown.progress >= total {
            return None;
        }
        let left = (total - shown.progress) / (done / elapsed);
        Some((left * 1000.0) as u64)
    }
}

/// `3`, `2.5`.
fn number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_shows_bar_count_percent_message_and_eta() {
        let mut bar = ProgressBar::new();
        bar.width = 80;
        let start = Instant::now();
        bar.first = Some((start, 0.0));
        bar.shown = Some(Shown {
            progress: 25.0,
            total: Some(100.0),
            message: Some("step 25".into()),
        });
        let line = bar.line(start + Duration::from_secs(5));
        assert_eq!(
            line,
            "[██████░░░░░░░░░░░░░░░░░░] 25/100  25%  step 25 · ETA 15s"
        );
        bar.status = Some("cancelling…".into());
        bar.shown.as_mut().unwrap().message = Some("x".repeat(200));
        let line = bar.line(start + Duration::from_secs(5));
        assert_eq!(line.chars().count(), 79);
        assert!(line.starts_with("cancelling…  [") && line.ends_with(" · ETA 15s"));
    }

    /// A report that comes within the redraw interval is drawn when the
    /// interval is up, not left behind until the next report.
    #[test]
    fn a_report_too_soon_is_due_at_the_end_of_the_interval() {
        let mut bar = ProgressBar::new();
        assert_eq!(bar.due(), None);
        bar.record(1.0, Some(10.0), None);
        assert!(bar.due().unwrap() <= Instant::now());
        bar.draw();
        bar.clear();
        assert_eq!(bar.due(), None);
        let drawn = bar.last_draw.unwrap();
        bar.update(2.0, Some(10.0), None);
        assert_eq!(bar.due(), Some(drawn + REDRAW), "too soon: not drawn");
    }

    #[test]
    fn without_a_total_it_spins_and_shows_elapsed_time() {
        let mut bar = ProgressBar::new();
        bar.shown = Some(Shown {
            progress: 2.5,
            total: None,
            message: None,
        });
        let line = bar.line(bar.started + Duration::from_millis(1500));
        assert_eq!(line, "⠋ 2.5 · 1.5s");
    }
}
