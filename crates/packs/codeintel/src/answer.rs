//! How every query answers: a query runs on a blocking thread and hands its
//! items, in order, to a [`Sink`]; the run's task turns them into `meta`,
//! then `partial` chunks grouped by file (at most 50 items, 16 KB each),
//! and the query's summary becomes the final result.
//!
//! **Pages.** One call streams one page: the items from the cursor's
//! offset up to the page's size in items and bytes. Past the page the query
//! keeps counting (so the summary's totals and counts by file are whole)
//! but sends nothing; the summary's `nextCursor` asks for the next page.
//! So a run's partials stay well under the server's result limit, and the
//! final result (a summary) does too.
//!
//! **Backpressure and cancellation.** The channel between the query and the
//! run holds a few items; when the run cannot write (its log is behind),
//! the query waits. Cancelling the run drops its future, which raises the
//! query's flag ([`CancelOnDrop`]): the query stops at its next item, and
//! tree-sitter at its next step.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_core::{ChunkLimits, Chunker, FailureCode, Meta, Milestone, Partial, RunError, Warning};
use weir_runtime::RunContext;

/// Items per partial chunk.
pub(crate) const CHUNK_ITEMS: usize = 50;
/// Bytes per partial chunk (its items as a JSON array).
pub(crate) const CHUNK_BYTES: usize = 16 * 1024;

/// Raises the flag when dropped: the run's future is dropped on cancel.
pub(crate) struct CancelOnDrop(pub(crate) Arc<AtomicUsize>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(1, Ordering::SeqCst);
    }
}

/// Keeps a run from going quiet: after `every` without an event, a
/// `progress` heartbeat (the phase as it was, the count kept, a message),
/// so that a client or a proxy that drops silent streams keeps this one.
pub(crate) struct Heartbeat {
    every: Duration,
    last: tokio::time::Instant,
}

impl Heartbeat {
    pub(crate) fn new(every: Duration) -> Heartbeat {
        Heartbeat {
            every,
            last: tokio::time::Instant::now(),
        }
    }

    /// Something was just emitted.
    pub(crate) fn emitted(&mut self) {
        self.last = tokio::time::Instant::now();
    }

    /// When the next heartbeat is due.
    pub(crate) fn due(&self) -> tokio::time::Instant {
        self.last + self.every
    }

    /// Reports that `phase` is still going.
    pub(crate) async fn beat(
        &mut self,
        ctx: &RunContext,
        phase: &str,
    ) -> Result<(), weir_runtime::EmitError> {
        let quiet = self.last.elapsed().as_secs();
        ctx.milestone(
            Milestone::new(phase)
                .message(format!("heartbeat: still {phase} ({quiet} s without news)")),
        )
        .await?;
        self.emitted();
        Ok(())
    }
}

/// Which part of an answer a call streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Page {
    pub(crate) offset: u64,
    pub(crate) max_items: u64,
    pub(crate) max_bytes: usize,
}

/// What the query thread sends the run.
enum Produced {
    Meta(Meta),
    Item { group: String, item: Value },
    Warning(String),
}

/// The query stopped because the run did (cancelled, or gone).
#[derive(Debug)]
pub(crate) struct Stopped;

impl From<Stopped> for RunError {
    fn from(_: Stopped) -> RunError {
        RunError::new(FailureCode::Internal, "the query was stopped")
    }
}

/// Where a query puts what it finds.
pub(crate) struct Sink {
    sender: mpsc::Sender<Produced>,
    cancel: Arc<AtomicUsize>,
    page: Page,
    /// Items offered so far (the position in the whole answer).
    seen: u64,
    sent: u64,
    sent_bytes: usize,
    /// Past the page: counting only.
    full: bool,
    pub(crate) warnings: Vec<String>,
    started: Instant,
}

/// How a page went, for the summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PageReport {
    pub(crate) total: u64,
    pub(crate) offset: u64,
    pub(crate) returned: u64,
    /// The offset of the next page, when there is more.
    pub(crate) next: Option<u64>,
}

impl Sink {
    /// Whether the run has been cancelled.
    pub(crate) fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed) != 0 || self.sender.is_closed()
    }

    pub(crate) fn meta(&self, meta: Meta) -> Result<(), Stopped> {
        self.sender
            .blocking_send(Produced::Meta(meta))
            .map_err(|_| Stopped)
    }

    /// A warning: in the log now, and in the summary's provenance.
    pub(crate) fn warning(&mut self, message: String) -> Result<(), Stopped> {
        self.warnings.push(message.clone());
        self.sender
            .blocking_send(Produced::Warning(message))
            .map_err(|_| Stopped)
    }

    /// The next item of the answer, in `group` (a file, a tier). Sent when
    /// it is on this call's page; counted either way.
    pub(crate) fn item(&mut self, group: &str, item: Value) -> Result<(), Stopped> {
        if self.cancelled() {
            return Err(Stopped);
        }
        let position = self.seen;
        self.seen += 1;
        if position < self.page.offset || self.full {
            return Ok(());
        }
        let bytes = item.to_string().len() + 1;
        if self.sent >= self.page.max_items
            || (self.sent > 0 && self.sent_bytes + bytes > self.page.max_bytes)
        {
            self.full = true;
            return Ok(());
        }
        self.sent += 1;
        self.sent_bytes += bytes;
        self.sender
            .blocking_send(Produced::Item {
                group: group.to_owned(),
                item,
            })
            .map_err(|_| Stopped)
    }

    pub(crate) fn page(&self) -> PageReport {
        PageReport {
            total: self.seen,
            offset: self.page.offset,
            returned: self.sent,
            next: self.full.then_some(self.page.offset + self.sent),
        }
    }

    pub(crate) fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }
}

/// Runs `query` on a blocking thread and streams what it gives to `ctx`;
/// returns the query's summary and when the first chunk went out.
pub(crate) async fn stream<F>(
    ctx: &RunContext,
    page: Page,
    heartbeat: Duration,
    query: F,
) -> Result<(Value, Option<u64>), RunError>
where
    F: FnOnce(&mut Sink) -> Result<Value, RunError> + Send + 'static,
{
    let started = Instant::now();
    let cancel = Arc::new(AtomicUsize::new(0));
    let _cancel_on_drop = CancelOnDrop(cancel.clone());
    let (sender, mut received) = mpsc::channel(CHUNK_ITEMS * 2);
    let mut sink = Sink {
        sender,
        cancel,
        page,
        seen: 0,
        sent: 0,
        sent_bytes: 0,
        full: false,
        warnings: Vec::new(),
        started,
    };
    let worker = tokio::task::spawn_blocking(move || query(&mut sink));
    let limits = ChunkLimits {
        max_items: CHUNK_ITEMS,
        max_bytes: CHUNK_BYTES,
    };
    let mut chunker = Chunker::new(limits);
    let mut first_chunk_ms = None;
    let mut heartbeat = Heartbeat::new(heartbeat);
    let ended = |e: weir_runtime::EmitError| RunError::new(FailureCode::Internal, e.to_string());
    loop {
        // Whatever is queued goes into chunks; when the queue is empty, the
        // chunk so far goes out rather than wait for the query.
        let produced = match received.try_recv() {
            Ok(produced) => Some(produced),
            Err(mpsc::error::TryRecvError::Empty) => {
                if let Some(chunk) = std::mem::replace(&mut chunker, Chunker::new(limits)).finish()
                {
                    first_chunk_ms.get_or_insert(started.elapsed().as_millis() as u64);
                    ctx.emit(partial(chunk)).await.map_err(ended)?;
                    heartbeat.emitted();
                }
                loop {
                    tokio::select! {
                        produced = received.recv() => break produced,
                        _ = tokio::time::sleep_until(heartbeat.due()) => {
                            heartbeat.beat(ctx, "querying").await.map_err(ended)?;
                        }
                    }
                }
            }
            Err(mpsc::error::TryRecvError::Disconnected) => None,
        };
        match produced {
            Some(Produced::Meta(meta)) => {
                ctx.emit(meta).await.map_err(ended)?;
                heartbeat.emitted();
            }
            Some(Produced::Warning(message)) => {
                ctx.emit(Warning { message }).await.map_err(ended)?;
                heartbeat.emitted();
            }
            Some(Produced::Item { group, item }) => {
                if let Some(chunk) = chunker.push(item, Some(&group)) {
                    first_chunk_ms.get_or_insert(started.elapsed().as_millis() as u64);
                    ctx.emit(partial(chunk)).await.map_err(ended)?;
                    heartbeat.emitted();
                }
            }
            None => break,
        }
    }
    if let Some(chunk) = chunker.finish() {
        first_chunk_ms.get_or_insert(started.elapsed().as_millis() as u64);
        ctx.emit(partial(chunk)).await.map_err(ended)?;
    }
    let summary = worker
        .await
        .map_err(|e| RunError::new(FailureCode::Internal, format!("the query failed: {e}")))??;
    Ok((summary, first_chunk_ms))
}

fn partial(chunk: weir_core::Chunk) -> Partial {
    Partial {
        content: Vec::new(),
        items: chunk.items,
        group: chunk.group,
    }
}

/// `state.offset`: where the next page starts, tied to the index it counts in.
pub(crate) fn cursor(state_id: &str, offset: u64) -> String {
    format!("{state_id}.{offset}")
}

/// The offset a cursor points at, and whether it was made on another state
/// of the index (then the pages may not line up, and the answer says so).
pub(crate) fn parse_cursor(cursor: &str, state_id: &str) -> Result<(u64, bool), RunError> {
    let invalid = || {
        RunError::new(
            FailureCode::InvalidArguments,
            format!("{cursor:?} is not a cursor of this tool"),
        )
        .with_remediation("pass the nextCursor of a previous answer, unchanged")
    };
    let (state, offset) = cursor.rsplit_once('.').ok_or_else(invalid)?;
    let offset = offset.parse().map_err(|_| invalid())?;
    Ok((offset, state != state_id))
}

/// The part of every summary that says how it was paged, CKB's way.
pub(crate) fn paging(page: &PageReport, state_id: &str) -> Value {
    let truncated = page.next.is_some() || page.offset > 0;
    json!({
        "total": page.total,
        "offset": page.offset,
        "returned": page.returned,
        "truncated": truncated,
        "truncationInfo": truncated.then(|| json!({
            "reason": "page",
            "originalCount": page.total,
            "returnedCount": page.returned,
        })),
        "nextCursor": page.next.map(|next| cursor(state_id, next)),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use serde_json::{Value, json};
    use weir_core::{Completed, EventKind, Meta, RunError};
    use weir_runtime::{
        EventLog, MemoryLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo,
    };

    use super::{Page, stream};

    /// A query that says what it will do, thinks for 600 ms, then answers.
    struct SlowQuery;

    #[async_trait]
    impl Tool for SlowQuery {
        fn info(&self) -> ToolInfo {
            ToolInfo::new("slow", "a slow query", json!({"type": "object"}))
        }

        async fn run(&self, ctx: RunContext, _: Value) -> Result<Completed, RunError> {
            let page = Page {
                offset: 0,
                max_items: 10,
                max_bytes: 1 << 20,
            };
            let (summary, _) = stream(&ctx, page, Duration::from_millis(100), |sink| {
                sink.meta(Meta {
                    total: Some(1),
                    backends: vec![],
                    info: Value::Null,
                    progress_unit: None,
                })?;
                std::thread::sleep(Duration::from_millis(600));
                sink.item("g", json!(1))?;
                Ok(json!({}))
            })
            .await?;
            Ok(Completed {
                content: vec![],
                structured: Some(summary),
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quiet_query_sends_heartbeats() {
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let scheduler = Scheduler::start(
            log.clone(),
            vec![Arc::new(SlowQuery)],
            SchedulerConfig::default(),
        )
        .await
        .unwrap();
        let run = scheduler
            .submit("slow", json!({}), RunOptions::default())
            .await
            .unwrap();
        let run_id = run.run_id().clone();
        run.finished().await.unwrap();
        let events = log.read(&run_id, 0, 1_000).await.unwrap();
        let kinds: Vec<String> = events
            .iter()
            .map(|e| match &e.kind {
                EventKind::Progress(p) => format!("progress {}", p.phase.as_deref().unwrap_or("")),
                other => other.type_name().to_owned(),
            })
            .collect();
        let beats = kinds.iter().filter(|k| *k == "progress querying").count();
        assert!((2..=6).contains(&beats), "{kinds:?}");
        assert_eq!(kinds[1], "meta");
        assert_eq!(&kinds[kinds.len() - 2..], ["partial", "completed"]);
        let gap = events
            .windows(2)
            .map(|w| w[1].ts.saturating_sub(w[0].ts))
            .max()
            .unwrap();
        assert!(
            gap < 500,
            "a silence of {gap} ms (the query is silent for 600)"
        );
    }
}
