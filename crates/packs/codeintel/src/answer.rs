//! How every query answers: a query runs on a blocking thread and hands its
//! items, in order, to a [`Sink`]; the run's task turns them into `meta`,
//! then `partial` chunks grouped by file (at most 50 items, 16 KB each),
//! and the query's summary becomes the final result.
//!
//! **Pages.** One call streams one page: the items from the cursor's
//! offset up to the page's size in items and bytes. Past the page the query
//! keeps counting (so the summary's totals and counts by file are whole)
//! but sends nothing; the summary's `nextCursor` asks for the next page.
//! So a run's partials stay well under the server's result limit.
//!
//! **The final result is the answer.** Most hosts show their model only the
//! final result, never the partials, so a list tool's final result holds
//! the page's items themselves ([`listing`]): as lines grouped by file in
//! `content`, and compact in `structuredContent`. The page then also stops
//! where either form would pass the token budget ([`Page::budget_bytes`]),
//! so that the result fits what a host passes its model.
//!
//! **Backpressure and cancellation.** The channel between the query and the
//! run holds a few items; when the run cannot write (its log is behind),
//! the query waits. Cancelling the run drops its future, which raises the
//! query's flag ([`CancelOnDrop`]): the query stops at its next item, and
//! tree-sitter at its next step.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use weir_core::{
    ChunkLimits, Chunker, Completed, Content, FailureCode, Meta, Milestone, Partial, RunError,
    Warning,
};
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
    /// Most bytes of streamed items (as JSON).
    pub(crate) max_bytes: usize,
    /// For a list tool: most bytes the page's items take in each form of
    /// the final result (the lines, the compact items); `None` when the
    /// final result is a summary only.
    pub(crate) budget_bytes: Option<usize>,
}

/// One item of a page, as the final result shows it.
#[derive(Clone, Debug)]
pub(crate) struct Listed {
    /// The line that introduces its run of items: its file, or its group.
    header: String,
    line: String,
    compact: Value,
}

/// What the final result's two forms of a page have used so far.
#[derive(Default)]
struct Used {
    lines: usize,
    compact: usize,
    last_header: Option<String>,
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
    /// The page's items for the final result (list tools only).
    listed: Vec<Listed>,
    used: Used,
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
        let listed = self.page.budget_bytes.map(|_| listed(group, &item));
        if self.sent >= self.page.max_items
            || (self.sent > 0 && self.sent_bytes + bytes > self.page.max_bytes)
            || (self.sent > 0 && !self.fits(listed.as_ref()))
        {
            self.full = true;
            return Ok(());
        }
        self.sent += 1;
        self.sent_bytes += bytes;
        if let Some(listed) = listed {
            self.keep(listed);
        }
        self.sender
            .blocking_send(Produced::Item {
                group: group.to_owned(),
                item,
            })
            .map_err(|_| Stopped)
    }

    /// What `listed` adds to each form: its line (and its header's, when
    /// it starts a new run), and its compact JSON.
    fn costs(&self, listed: &Listed) -> (usize, usize) {
        let header = match &self.used.last_header {
            Some(last) if *last == listed.header => 0,
            _ => listed.header.len() + 1,
        };
        (
            header + listed.line.len() + 1,
            listed.compact.to_string().len() + 1,
        )
    }

    /// Whether `listed` still fits the page's budget in both forms.
    fn fits(&self, listed: Option<&Listed>) -> bool {
        let (Some(budget), Some(listed)) = (self.page.budget_bytes, listed) else {
            return true;
        };
        let (lines, compact) = self.costs(listed);
        self.used.lines + lines <= budget && self.used.compact + compact <= budget
    }

    fn keep(&mut self, listed: Listed) {
        let (lines, compact) = self.costs(&listed);
        self.used.lines += lines;
        self.used.compact += compact;
        self.used.last_header = Some(listed.header.clone());
        self.listed.push(listed);
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

/// What a query run gave: its summary, when its first chunk went out, and
/// (for a list tool) the page's items as the final result shows them.
pub(crate) struct Streamed {
    pub(crate) summary: Value,
    pub(crate) first_chunk_ms: Option<u64>,
    pub(crate) listed: Vec<Listed>,
}

/// Runs `query` on a blocking thread and streams what it gives to `ctx`.
pub(crate) async fn stream<F>(
    ctx: &RunContext,
    page: Page,
    heartbeat: Duration,
    query: F,
) -> Result<Streamed, RunError>
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
        listed: Vec::new(),
        used: Used::default(),
    };
    let worker = tokio::task::spawn_blocking(move || {
        let summary = query(&mut sink);
        (summary, sink.listed)
    });
    let limits = ChunkLimits {
        max_items: CHUNK_ITEMS,
        max_bytes: CHUNK_BYTES,
    };
    let mut chunker = Chunker::new(limits);
    let mut first_chunk_ms = None;
    let mut heartbeat = Heartbeat::new(heartbeat);
    loop {
        // Whatever is queued goes into chunks; when the queue is empty, the
        // chunk so far goes out rather than wait for the query.
        let produced = match received.try_recv() {
            Ok(produced) => Some(produced),
            Err(mpsc::error::TryRecvError::Empty) => {
                if let Some(chunk) = std::mem::replace(&mut chunker, Chunker::new(limits)).finish()
                {
                    first_chunk_ms.get_or_insert(started.elapsed().as_millis() as u64);
                    ctx.emit(partial(chunk)).await?;
                    heartbeat.emitted();
                }
                loop {
                    tokio::select! {
                        produced = received.recv() => break produced,
                        _ = tokio::time::sleep_until(heartbeat.due()) => {
                            heartbeat.beat(ctx, "querying").await?;
                        }
                    }
                }
            }
            Err(mpsc::error::TryRecvError::Disconnected) => None,
        };
        match produced {
            Some(Produced::Meta(meta)) => {
                ctx.emit(meta).await?;
                heartbeat.emitted();
            }
            Some(Produced::Warning(message)) => {
                ctx.emit(Warning { message }).await?;
                heartbeat.emitted();
            }
            Some(Produced::Item { group, item }) => {
                if let Some(chunk) = chunker.push(item, Some(&group)) {
                    first_chunk_ms.get_or_insert(started.elapsed().as_millis() as u64);
                    ctx.emit(partial(chunk)).await?;
                    heartbeat.emitted();
                }
            }
            None => break,
        }
    }
    if let Some(chunk) = chunker.finish() {
        first_chunk_ms.get_or_insert(started.elapsed().as_millis() as u64);
        ctx.emit(partial(chunk)).await?;
    }
    let (summary, listed) = worker
        .await
        .map_err(|e| RunError::new(FailureCode::Internal, format!("the query failed: {e}")))?;
    Ok(Streamed {
        summary: summary?,
        first_chunk_ms,
        listed,
    })
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

/// Longest context or docs a line shows, in characters.
const LINE_TEXT: usize = 160;

/// The first line of `text`, trimmed, cut at `max` characters.
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line = line.trim();
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// An item as the final result shows it: under its file when it has a
/// place (a use, a definition), else under its group (a tier, a module
/// list); a ranked item named by its stableId keeps its group, so the
/// ranking is not regrouped.
fn listed(group: &str, item: &Value) -> Listed {
    let location = item.get("location").filter(|l| l.is_object());
    let ranked = item.get("stableId").and_then(Value::as_str);
    let (header, line) = match (location, ranked) {
        (Some(location), None) => (
            location["fileId"].as_str().unwrap_or_default().to_owned(),
            located_line(location, item),
        ),
        (_, Some(stable_id)) => (format!("[{group}]"), ranked_line(stable_id, item)),
        (None, None) => (format!("[{group}]"), fields_line(item)),
    };
    Listed {
        header,
        line,
        compact: compact(item),
    }
}

/// `  20:12 definition struct [tags]: pub struct RunContext {`
fn located_line(location: &Value, item: &Value) -> String {
    let mut what = item["kind"].as_str().unwrap_or("item").to_owned();
    if let Some(kind) = item["symbolKind"].as_str() {
        what = format!("{what} {kind}");
    }
    if let Some(backend) = item["backend"].as_str() {
        what = format!("{what} [{backend}]");
    }
    format!(
        "  {}:{} {what}: {}",
        location["startLine"],
        location["startColumn"],
        first_line(item["context"].as_str().unwrap_or_default(), LINE_TEXT)
    )
}

/// `  src/shapes.rs:2:Circle class: A circle of radius r.`
fn ranked_line(stable_id: &str, item: &Value) -> String {
    let text = item["docs"]
        .as_str()
        .filter(|docs| !docs.trim().is_empty())
        .or(item["context"].as_str())
        .unwrap_or_default();
    format!(
        "  {stable_id} {}: {}",
        item["kind"].as_str().unwrap_or("item"),
        first_line(text, LINE_TEXT)
    )
}

/// Fields that name an item: first on its line.
const NAMING: [&str; 5] = ["from", "to", "path", "file", "name"];

/// `  from=crates/core to=crates/runtime kind=reference strength=3`: any
/// other item, its naming fields first, without what [`compact`] drops.
fn fields_line(item: &Value) -> String {
    let Value::Object(fields) = compact(item) else {
        return format!("  {}", first_line(&item.to_string(), LINE_TEXT));
    };
    let naming = NAMING.iter().filter_map(|key| fields.get_key_value(*key));
    let rest = fields
        .iter()
        .filter(|(key, _)| !NAMING.contains(&key.as_str()));
    let pairs: Vec<String> = naming
        .chain(rest)
        .map(|(key, value)| match value {
            Value::String(text) => format!("{key}={}", first_line(text, LINE_TEXT)),
            other => format!("{key}={}", first_line(&other.to_string(), LINE_TEXT)),
        })
        .collect();
    format!("  {}", pairs.join(" "))
}

/// An item without what a model does not need: its place flattened
/// (`file`, `line`, `column`; the end only when it is another line), no
/// nulls, no `moduleId` or `isTest` (the path says both), and for an item
/// named by its stableId (`path:line:name`) no separate place or name.
fn compact(item: &Value) -> Value {
    let Value::Object(fields) = item else {
        return item.clone();
    };
    let ranked = fields.contains_key("stableId");
    let mut out = Map::new();
    if let Some(location) = fields.get("location").filter(|l| l.is_object()) {
        if !ranked {
            out.insert("file".into(), location["fileId"].clone());
            out.insert("line".into(), location["startLine"].clone());
            out.insert("column".into(), location["startColumn"].clone());
        }
        if !location["endLine"].is_null() && location["endLine"] != location["startLine"] {
            out.insert("endLine".into(), location["endLine"].clone());
        }
    }
    for (key, value) in fields {
        let redundant =
            matches!(key.as_str(), "location" | "moduleId" | "isTest") || (ranked && key == "name");
        if !redundant && !value.is_null() {
            out.insert(key.clone(), value.clone());
        }
    }
    Value::Object(out)
}

/// How the answer was found, in one phrase: the query's own words when it
/// gives them (`precision`), else from its provenance.
fn precision(summary: &Value) -> String {
    if let Some(precision) = summary["precision"].as_str() {
        return precision.to_owned();
    }
    let backends: Vec<&str> = summary["provenance"]["backends"]
        .as_array()
        .map(|all| all.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match summary["provenance"]["completeness"].as_str() {
        Some("exact") => "exact: every item from the SCIP index".into(),
        Some("mixed") => {
            "partly exact: SCIP where its index covers the files, elsewhere matched by name".into()
        }
        _ => format!(
            "syntactic, from {}: not compiler-resolved",
            backends.join(", ")
        ),
    }
}

/// Which part of the answer this page is, and how to get the next.
fn page_phrase(summary: &Value, tool: &str) -> String {
    let total = summary["total"].as_u64().unwrap_or(0);
    let offset = summary["offset"].as_u64().unwrap_or(0);
    let returned = summary["returned"].as_u64().unwrap_or(0);
    if summary["truncated"] != true {
        return format!("all {total} here");
    }
    let range = if returned == 0 {
        format!("none of {total} here (from {offset})")
    } else {
        format!("items {}-{} of {total} here", offset + 1, offset + returned)
    };
    match summary["nextCursor"].as_str() {
        Some(cursor) => format!(
            "{range}; for the next page call {tool} again with the same arguments and cursor=\"{cursor}\""
        ),
        None => format!("{range}, the last page"),
    }
}

/// A list tool's final result: `what` (the tool's own words on the whole
/// answer) with the page and the precision as the first line, then the
/// page's items as lines grouped by file in `content`; the summary without
/// what the items make redundant, with the same first line (`headline`)
/// and the items (`items`) in `structuredContent`.
pub(crate) fn listing(
    tool: &str,
    what: &str,
    mut summary: Value,
    listed: Vec<Listed>,
) -> Completed {
    let headline = format!(
        "{what}; {}; precision: {}",
        page_phrase(&summary, tool),
        precision(&summary)
    );
    let mut text = headline.clone();
    let mut last_header: Option<&str> = None;
    for item in &listed {
        if last_header != Some(item.header.as_str()) {
            text.push('\n');
            text.push_str(&item.header);
            last_header = Some(&item.header);
        }
        text.push('\n');
        text.push_str(&item.line);
    }
    let warnings = summary["provenance"]["warnings"].as_array().cloned();
    for warning in warnings.iter().flatten().filter_map(Value::as_str) {
        text.push_str("\nwarning: ");
        text.push_str(warning);
    }
    if let Some(fields) = summary.as_object_mut() {
        // The items themselves replace the sample; `total` is the count.
        for redundant in ["topItems", "totalCount", "truncationInfo"] {
            fields.remove(redundant);
        }
        fields.insert("headline".into(), Value::String(headline));
        fields.insert(
            "items".into(),
            Value::Array(listed.into_iter().map(|item| item.compact).collect()),
        );
    }
    Completed {
        content: vec![Content::text(text)],
        structured: Some(summary),
    }
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
                budget_bytes: None,
            };
            let streamed = stream(&ctx, page, Duration::from_millis(100), |sink| {
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
                structured: Some(streamed.summary),
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
