//! The tools of the declared upstream MCP servers, served by weir as its
//! own: each upstream tool is a weir tool (`NAME__tool`, or its own name
//! under `weir wrap`) with the upstream's title, description, schemas and
//! annotations, and each call of it is a run of weir's. What the upstream
//! reports meanwhile (progress, log messages, partial results) becomes the
//! run's events; its result (content, structured content, `isError`) is
//! the run's result, less the blocks it repeats of its partials, which the
//! run's result already begins with ([`StreamedBlocks`]); cancelling the
//! run drops the call, which cancels it on the upstream
//! (`notifications/cancelled`, or `tasks/cancel`). While the upstream
//! reports no progress, the run sends a heartbeat every
//! `--upstream-heartbeat` (15 s), so that a host whose timeout resets on
//! progress keeps waiting.
//!
//! The upstreams' tools are listed when weir starts; an upstream that
//! cannot be reached then is left out with a warning, and weir serves the
//! rest. A stdio upstream that says its list changed
//! (`notifications/tools/list_changed`) has it listed again
//! ([`follow_changes`]): its tools in the scheduler's registry are
//! replaced, and weir tells its own clients the same way.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, EventKind, FailureCode, RunError};
use weir_mcp::McpServer;
use weir_runtime::{Heartbeat, RemoteCaller, RunContext, Scheduler, Tool, ToolInfo};

use crate::remote_caller::{ClientCaller, Reports};
use crate::streamed_blocks::StreamedBlocks;

/// Between an upstream's name and its tool's, in the name weir serves.
pub(crate) const SEPARATOR: &str = "__";

/// How weir names an upstream's tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Naming {
    /// `NAME__tool`: several upstreams beside weir's own tools.
    Prefixed,
    /// The upstream's own names (`weir wrap`: one upstream).
    AsIs,
}

/// One upstream tool, served as weir's.
struct UpstreamTool {
    caller: Arc<ClientCaller>,
    server: String,
    /// The upstream's name for it.
    tool: String,
    info: ToolInfo,
    heartbeat: Duration,
}

/// The tools of every declared upstream, by upstream, named by `naming`;
/// `taken` are the names already served (weir's packs and its own tools),
/// which an upstream tool may not shadow. An upstream that does not list
/// its tools, and a tool whose name is taken, are left out with a warning
/// on stderr.
pub(crate) async fn discover(
    caller: &Arc<ClientCaller>,
    naming: Naming,
    taken: &BTreeSet<String>,
    heartbeat: Duration,
) -> Vec<(String, Vec<Arc<dyn Tool>>)> {
    // Listed at once: an upstream slow to start (a first `npx` download,
    // one that never answers its handshake) holds up weir's start once,
    // not once per upstream.
    let mut listing = tokio::task::JoinSet::new();
    for server in caller.servers() {
        let caller = caller.clone();
        listing.spawn(async move {
            let listed = caller.list_tools(&server).await;
            (server, listed)
        });
    }
    let mut lists = listing.join_all().await;
    lists.sort_by(|a, b| a.0.cmp(&b.0));
    let mut served = Vec::new();
    let mut names = taken.clone();
    for (server, listed) in lists {
        let listed = match listed {
            Ok(listed) => listed,
            Err(error) => {
                eprintln!(
                    "weir: warning: the upstream {server} is left out: its tools could not be listed ({error}); weir serves without them (fix the declaration and restart weir)"
                );
                continue;
            }
        };
        let tools = upstream_tools(caller, &server, &listed, naming, heartbeat, &mut names);
        served.push((server, tools));
    }
    served
}

/// The weir tools for the tools `server` listed, but those whose names are
/// in `names` (taken; each one served is added), left out with a warning.
fn upstream_tools(
    caller: &Arc<ClientCaller>,
    server: &str,
    listed: &[Value],
    naming: Naming,
    heartbeat: Duration,
    names: &mut BTreeSet<String>,
) -> Vec<Arc<dyn Tool>> {
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for description in listed {
        let Some(tool) = upstream_tool(caller, server, description, naming, heartbeat) else {
            continue;
        };
        if !names.insert(tool.info.name.clone()) {
            eprintln!(
                "weir: warning: the tool {:?} of the upstream {server} is left out: weir already serves a tool of that name",
                tool.info.name
            );
            continue;
        }
        tools.push(Arc::new(tool));
    }
    tools
}

/// What [`follow_changes`] keeps current, and where.
pub(crate) struct Following {
    pub(crate) caller: Arc<ClientCaller>,
    pub(crate) naming: Naming,
    pub(crate) heartbeat: Duration,
    pub(crate) scheduler: Scheduler,
    pub(crate) server: McpServer,
    /// Whether `--tools`/`--no-tools` serve the tool of this upstream.
    pub(crate) keep: Keep,
}

/// Whether weir serves the tool (its served name) of the upstream.
pub(crate) type Keep = Arc<dyn Fn(&str, &str) -> bool + Send + Sync>;

/// Keeps the tools of upstream `upstream` current: at each
/// `notifications/tools/list_changed` it sends, they are listed again and
/// replace the ones weir served for it (`served`) in the scheduler's
/// registry, and weir's clients are told (`notifications/tools/list_changed`).
/// A run of a tool that has gone goes on (the upstream decides what
/// becomes of the call); a call of it from then on is one of a tool that
/// does not exist. Runs until weir ends. A stdio upstream, or an HTTP one
/// in a 2025-11-25 session (weir-client listens on its session's stream
/// once asked for the count).
pub(crate) fn follow_changes(
    following: Arc<Following>,
    upstream: String,
    mut served: BTreeSet<String>,
) {
    tokio::spawn(async move {
        loop {
            let Some(mut changed) = following.caller.tools_changed(&upstream).await else {
                // Not started yet, or restarting: look again soon.
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            };
            // Until this connection ends (its process exits).
            while changed.changed().await.is_ok() {
                served = refresh(&following, &upstream, served).await;
            }
        }
    });
}

/// Lists `upstream`'s tools again and serves them in place of `served`;
/// returns the names now served (`served` unchanged when it cannot be
/// listed).
async fn refresh(
    following: &Following,
    upstream: &str,
    served: BTreeSet<String>,
) -> BTreeSet<String> {
    let listed = match following.caller.list_tools(upstream).await {
        Ok(listed) => listed,
        Err(error) => {
            eprintln!(
                "weir: warning: the upstream {upstream} said its tools changed, but they could not be listed ({error}); weir serves the ones it had"
            );
            return served;
        }
    };
    let mut names: BTreeSet<String> = following
        .scheduler
        .tools()
        .map(|info| info.name)
        .filter(|name| !served.contains(name))
        .chain(weir_mcp::builtin_tool_names())
        .collect();
    let tools = upstream_tools(
        &following.caller,
        upstream,
        &listed,
        following.naming,
        following.heartbeat,
        &mut names,
    );
    let tools: Vec<Arc<dyn Tool>> = tools
        .into_iter()
        .filter(|tool| (following.keep)(upstream, &tool.info().name))
        .collect();
    let now: BTreeSet<String> = tools.iter().map(|tool| tool.info().name).collect();
    // Some servers say so when nothing changed (server-everything, once
    // per tool it adds after the handshake): no news, nothing to tell.
    let before: Vec<ToolInfo> = following
        .scheduler
        .tools()
        .filter(|info| served.contains(&info.name))
        .collect();
    let after: Vec<ToolInfo> = tools.iter().map(|tool| tool.info()).collect();
    if before == after {
        return served;
    }
    let left_out = following.scheduler.replace_tools(&served, tools);
    following.server.tools_changed();
    now.into_iter()
        .filter(|name| !left_out.contains(name))
        .collect()
}

/// The weir tool for one tool as the upstream `server` described it.
fn upstream_tool(
    caller: &Arc<ClientCaller>,
    server: &str,
    description: &Value,
    naming: Naming,
    heartbeat: Duration,
) -> Option<UpstreamTool> {
    let text = |key: &str| description.get(key).and_then(Value::as_str);
    let tool = text("name")?.to_owned();
    let name = match naming {
        Naming::Prefixed => format!("{server}{SEPARATOR}{tool}"),
        Naming::AsIs => tool.clone(),
    };
    let input_schema = description
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| json!({ "type": "object" }));
    let mut info = ToolInfo::new(name, text("description").unwrap_or_default(), input_schema);
    info.title = text("title").map(str::to_owned);
    info.output_schema = description.get("outputSchema").cloned();
    info.annotations = description.get("annotations").cloned();
    info.streams = description
        .pointer("/annotations/streamingHint")
        .and_then(Value::as_bool)
        == Some(true);
    Some(UpstreamTool {
        caller: caller.clone(),
        server: server.to_owned(),
        tool,
        info,
        heartbeat,
    })
}

#[async_trait]
impl Tool for UpstreamTool {
    fn info(&self) -> ToolInfo {
        self.info.clone()
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        // A per-caller upstream serves each credential on its own process.
        // Only then is the run's owner looked up: it is a read of the
        // store, which every call would wait on before the upstream hears
        // of it (a quarter of a millisecond on SQLite).
        let owner = if self.caller.per_caller(&self.server) {
            ctx.owner().await
        } else {
            None
        };
        let reports = ToRun {
            ctx: &ctx,
            heart: std::sync::Mutex::new(Heartbeat::new(self.heartbeat)),
            streamed: std::sync::Mutex::default(),
        };
        // The scheduler's time limit applies; dropping this future (cancel,
        // time limit) cancels the call on the upstream.
        let call = self.caller.call_as(
            &self.server,
            owner.as_deref(),
            &self.tool,
            arguments,
            None,
            &reports,
        );
        tokio::pin!(call);
        // One timer for the whole call, moved on only when it fires: a
        // timer made (and registered) per notification costs more than the
        // notification. It may fire early (the upstream spoke meanwhile):
        // it is then set to the new due time.
        let timer = tokio::time::sleep_until(reports.due());
        tokio::pin!(timer);
        loop {
            tokio::select! {
                // The call records what the upstream says as it comes, so
                // all of it is in the log before its result.
                biased;
                ended = &mut call => return reports.without_repeats(ended),
                () = &mut timer => {
                    let due = reports.due();
                    if due > tokio::time::Instant::now() {
                        timer.as_mut().reset(due);
                        continue;
                    }
                    let beat = {
                        let mut heart = reports.heart();
                        let quiet = heart.quiet_for().as_secs();
                        heart.beat(format!(
                            "still working: no progress from the upstream {} for {quiet} s",
                            self.server
                        ))
                    };
                    emit(&ctx, beat.into()).await?;
                    timer.as_mut().reset(reports.due());
                }
            }
        }
    }
}

/// A call's reports, recorded in its run's log as they come; what they
/// say of progress keeps the heartbeat quiet, and the blocks of its partial
/// results are remembered, so that its result does not repeat them.
struct ToRun<'a> {
    ctx: &'a RunContext,
    heart: std::sync::Mutex<Heartbeat>,
    streamed: std::sync::Mutex<StreamedBlocks>,
}

impl ToRun<'_> {
    fn heart(&self) -> std::sync::MutexGuard<'_, Heartbeat> {
        self.heart
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn streamed(&self) -> std::sync::MutexGuard<'_, StreamedBlocks> {
        self.streamed
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The call's outcome as the run's: the run's result begins with its
    /// partials, so what the upstream's result repeats of them goes.
    fn without_repeats(&self, ended: Result<Completed, RunError>) -> Result<Completed, RunError> {
        let streamed = self.streamed();
        match ended {
            Ok(mut completed) => {
                streamed.strip_repeated(&mut completed.content);
                Ok(completed)
            }
            Err(mut error) => {
                if let Some(result) = error.result.as_mut() {
                    streamed.strip_repeated(&mut result.content);
                }
                Err(error)
            }
        }
    }

    fn due(&self) -> tokio::time::Instant {
        self.heart().due()
    }
}

#[async_trait]
impl Reports for ToRun<'_> {
    async fn report(&self, kind: EventKind) -> Result<(), RunError> {
        self.heart().saw(&kind);
        if let EventKind::Partial(partial) = &kind {
            self.streamed().saw(&partial.content);
        }
        emit(self.ctx, kind).await
    }
}

async fn emit(ctx: &RunContext, kind: EventKind) -> Result<(), RunError> {
    ctx.emit(kind).await.map_err(|error| {
        RunError::new(
            FailureCode::Internal,
            format!("recording what the upstream reported: {error}"),
        )
    })
}
