//! The output pump of an `execute_code` run: turns what the program writes
//! into events — `partial`s of whole lines tagged with their stream, in the
//! order read; progress (the lines so far, in a phase); warnings; the cap.

use std::time::Duration;

use tokio::time::Instant;
use weir_core::{Content, Milestone, Partial, Warning};
use weir_runtime::{EmitError, RunContext};

use crate::output::{
    Base64Stream, Budget, Encoding, LineCount, LineCutter, Stream, decode, last_line,
};

/// Progress reports closer together than this wait, the newest count and
/// line replacing older ones: a million lines make at most a report every
/// this often, not a million (the server coalesces too, but every report
/// is an event in the log).
const PROGRESS_EVERY: Duration = Duration::from_millis(50);
/// Longest progress message (the newest line), in characters: as long as
/// the server lets the lines it turns into progress itself be.
const MESSAGE_CHARS: usize = 100;

/// One stream's state.
struct Side {
    cutter: LineCutter,
    bytes: u64,
    /// Since when the start of a line has been waiting for its end.
    pending_since: Option<Instant>,
    warned_invalid: bool,
    /// With base64 output: the bytes past the last 3-byte boundary.
    base64: Base64Stream,
}

/// The run's progress as `execute_code` reports it (`RunContext::milestone`):
/// the lines the program wrote so far, both streams together, shown or
/// past the output cap (counted as the server counts streamed text, see
/// [`LineCount`]; with base64 output, the program's lines, not the base64
/// text's), the newest line with something on it as the message, in a
/// phase: `running`, then `timed out` when the timeout sent SIGTERM and
/// `killed` when SIGKILL followed. Lines keep counting in those phases:
/// what a program prints as it is stopped counts too.
///
/// A phase begins with a report of its own, at once, whose count is the
/// count so far: it reaches the log (SSE, `runs_events`, `weir runs tail`)
/// but a progress-only MCP client, whose progress must increase, sees the
/// phase only with the next line counted, if the program prints one.
/// Counting the phase as a line would say the program printed a line it
/// did not.
struct Lines {
    count: LineCount,
    phase: &'static str,
    newest: Option<String>,
    /// Lines counted since the last report.
    unreported: bool,
    last_report: Option<Instant>,
}

/// Turns the program's output into events: `partial`s of whole lines,
/// tagged with their stream, in the order read; progress; warnings; the
/// cap.
pub(super) struct Pump<'a> {
    pub(super) ctx: &'a RunContext,
    encoding: Encoding,
    budget: Budget,
    sides: [Side; 2],
    lines: Lines,
    truncated: bool,
    invalid_utf8: bool,
}

/// What the output came to.
pub(super) struct Report {
    pub(super) stdout: u64,
    pub(super) stderr: u64,
    pub(super) shown: u64,
    pub(super) truncated: bool,
    pub(super) invalid_utf8: bool,
}

impl<'a> Pump<'a> {
    pub(super) fn new(
        ctx: &'a RunContext,
        encoding: Encoding,
        chunk_bytes: usize,
        max_output: u64,
    ) -> Pump<'a> {
        let side = || Side {
            cutter: LineCutter::new(chunk_bytes),
            bytes: 0,
            pending_since: None,
            warned_invalid: false,
            base64: Base64Stream::default(),
        };
        Pump {
            ctx,
            encoding,
            budget: Budget::new(max_output),
            sides: [side(), side()],
            lines: Lines {
                count: LineCount::default(),
                phase: "running",
                newest: None,
                unreported: false,
                last_report: None,
            },
            truncated: false,
            invalid_utf8: false,
        }
    }

    /// Bytes read from `stream`.
    pub(super) async fn bytes(&mut self, stream: Stream, bytes: &[u8]) -> Result<(), EmitError> {
        let side = &mut self.sides[stream.index()];
        side.bytes += bytes.len() as u64;
        if self.truncated {
            // Counted, not kept: after the start of a line that waited
            // in the cutter, written before them.
            side.pending_since = None;
            if let Some(waiting) = side.cutter.finish() {
                self.count(stream, &waiting);
            }
            self.count(stream, bytes);
            return self.report_progress().await;
        }
        let chunks = side.cutter.push(bytes);
        side.pending_since = match (side.cutter.has_pending(), side.pending_since) {
            (false, _) => None,
            (true, None) => Some(Instant::now()),
            (true, since) => since,
        };
        for chunk in chunks {
            // The other stream's unfinished line was written first.
            self.flush_pending(other(stream)).await?;
            self.show(stream, chunk).await?;
        }
        self.report_progress().await
    }

    /// The end of `stream`: what is left of it goes out.
    pub(super) async fn end(&mut self, stream: Stream) -> Result<(), EmitError> {
        let side = &mut self.sides[stream.index()];
        side.pending_since = None;
        if let Some(rest) = side.cutter.finish() {
            self.show(stream, rest).await?;
        }
        self.flush_base64(stream).await?;
        self.report_progress().await
    }

    /// The end of the output, read or abandoned: what base64 still carries
    /// goes out, and the last count.
    pub(super) async fn finish(&mut self) -> Result<(), EmitError> {
        for stream in [Stream::Stdout, Stream::Stderr] {
            self.flush_base64(stream).await?;
        }
        if self.lines.unreported {
            self.report_now().await?;
        }
        Ok(())
    }

    /// When an unfinished line will have waited long enough.
    pub(super) fn idle_flush_at(&self, idle: Duration) -> Option<Instant> {
        self.sides
            .iter()
            .filter_map(|side| side.pending_since)
            .min()
            .map(|since| since + idle)
    }

    /// Sends the unfinished lines that have waited `idle`.
    pub(super) async fn flush_idle(&mut self, idle: Duration) -> Result<(), EmitError> {
        let now = Instant::now();
        for stream in [Stream::Stdout, Stream::Stderr] {
            let due = self.sides[stream.index()]
                .pending_since
                .is_some_and(|since| since + idle <= now);
            if due {
                self.flush_pending(stream).await?;
            }
        }
        self.report_progress().await
    }

    async fn flush_pending(&mut self, stream: Stream) -> Result<(), EmitError> {
        let side = &mut self.sides[stream.index()];
        let Some(pending) = side.cutter.take_pending() else {
            // Only the start of a character waits: it goes with the rest
            // of it. (Left pending, the idle timer would fire at once,
            // again and again, until then.)
            side.pending_since = None;
            return Ok(());
        };
        side.pending_since = side.cutter.has_pending().then(Instant::now);
        self.show(stream, pending).await
    }

    /// Counts a chunk of the program's output (shown or not) towards
    /// progress; it is reported by [`Pump::report_progress`].
    fn count(&mut self, stream: Stream, bytes: &[u8]) {
        let lines = &mut self.lines;
        if lines.count.add(stream, bytes) > 0 {
            lines.unreported = true;
            if let Some(line) = last_line(bytes, MESSAGE_CHARS) {
                lines.newest = Some(line);
            }
        }
    }

    /// When the lines counted since the last report are due to be
    /// reported, if any were.
    pub(super) fn progress_due_at(&self) -> Option<Instant> {
        let lines = &self.lines;
        lines.unreported.then(|| {
            lines
                .last_report
                .map_or_else(Instant::now, |at| at + PROGRESS_EVERY)
        })
    }

    /// Reports the lines counted since the last report, when due: at most
    /// one report per [`PROGRESS_EVERY`].
    pub(super) async fn report_progress(&mut self) -> Result<(), EmitError> {
        if self
            .progress_due_at()
            .is_some_and(|due| due <= Instant::now())
        {
            self.report_now().await?;
        }
        Ok(())
    }

    async fn report_now(&mut self) -> Result<(), EmitError> {
        let lines = &mut self.lines;
        lines.unreported = false;
        lines.last_report = Some(Instant::now());
        let mut milestone = Milestone::new(lines.phase).done(lines.count.total());
        if let Some(newest) = &lines.newest {
            milestone = milestone.message(newest.clone());
        }
        self.ctx.milestone(milestone).await.map(drop)
    }

    /// The run enters `phase` (a step of stopping it), because of `why`:
    /// reported at once, with the count so far.
    pub(super) async fn phase(
        &mut self,
        phase: &'static str,
        why: String,
    ) -> Result<(), EmitError> {
        let lines = &mut self.lines;
        lines.phase = phase;
        lines.unreported = false;
        lines.last_report = Some(Instant::now());
        let milestone = Milestone::new(phase).message(why).done(lines.count.total());
        self.ctx.milestone(milestone).await.map(drop)
    }

    /// Emits a chunk as a `partial`, within the cap.
    async fn show(&mut self, stream: Stream, chunk: Vec<u8>) -> Result<(), EmitError> {
        self.count(stream, &chunk);
        if self.truncated {
            return Ok(());
        }
        let len = chunk.len();
        let shown = self.budget.admit(chunk);
        let kept = shown.as_ref().map_or(0, Vec::len);
        if let Some(bytes) = shown {
            let side = &mut self.sides[stream.index()];
            let (text, invalid) = match self.encoding {
                Encoding::Utf8 => decode(bytes),
                Encoding::Base64 => (side.base64.push(&bytes), false),
            };
            if !text.is_empty() {
                self.emit_text(stream, text).await?;
            }
            let side = &mut self.sides[stream.index()];
            if invalid && !side.warned_invalid {
                side.warned_invalid = true;
                self.invalid_utf8 = true;
                self.ctx
                    .emit(Warning {
                        message: format!(
                            "{} is not valid UTF-8; invalid bytes are shown as U+FFFD. Call again with output_encoding \"base64\" for the exact bytes",
                            stream.name()
                        ),
                    })
                    .await?;
            }
        }
        if kept < len {
            self.truncated = true;
            // What base64 still carries was shown: it goes before the
            // notice.
            for stream in [Stream::Stdout, Stream::Stderr] {
                self.flush_base64(stream).await?;
            }
            let notice = format!(
                "[weir: output limit of {} bytes reached; the rest of the output is counted but not shown]\n",
                self.budget.limit()
            );
            self.ctx
                .emit(Partial {
                    content: vec![Content::text(notice.clone())],
                    items: Vec::new(),
                    group: Some("weir".into()),
                })
                .await?;
            self.ctx
                .emit(Warning {
                    message: notice.trim().trim_matches(['[', ']']).to_owned(),
                })
                .await?;
        }
        Ok(())
    }

    /// The last bytes of `stream` that base64 carried, padded: its end.
    async fn flush_base64(&mut self, stream: Stream) -> Result<(), EmitError> {
        match self.sides[stream.index()].base64.finish() {
            Some(text) => self.emit_text(stream, text).await,
            None => Ok(()),
        }
    }

    async fn emit_text(&self, stream: Stream, text: String) -> Result<(), EmitError> {
        self.ctx
            .emit(Partial {
                content: vec![Content::text(text)],
                items: Vec::new(),
                group: Some(stream.name().to_owned()),
            })
            .await
    }

    pub(super) fn report(&self) -> Report {
        Report {
            stdout: self.sides[0].bytes,
            stderr: self.sides[1].bytes,
            shown: self.budget.shown(),
            truncated: self.truncated,
            invalid_utf8: self.invalid_utf8,
        }
    }
}

fn other(stream: Stream) -> Stream {
    match stream {
        Stream::Stdout => Stream::Stderr,
        Stream::Stderr => Stream::Stdout,
    }
}
