//! The tools of the declared upstream MCP servers, served by weir as its
//! own: each upstream tool is a weir tool (`NAME__tool`, or its own name
//! under `weir wrap`) with the upstream's title, description, schemas and
//! annotations, and each call of it is a run of weir's. What the upstream
//! reports meanwhile (progress, log messages, partial results) becomes the
//! run's events; its result (content, structured content, `isError`) is
//! the run's result; cancelling the run drops the call, which cancels it
//! on the upstream (`notifications/cancelled`, or `tasks/cancel`). While
//! the upstream reports no progress, the run sends a heartbeat every
//! `--upstream-heartbeat` (15 s), so that a host whose timeout resets on progress keeps
//! waiting.
//!
//! The upstreams' tools are listed once, when weir starts: weir's tool
//! registry is fixed when its scheduler starts, and a host reads
//! `tools/list` once, at its first request, so a list read later would
//! reach it late or never. An upstream that cannot be reached then is
//! left out with a warning; weir serves the rest.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_core::{Completed, EventKind, FailureCode, RunError};
use weir_runtime::{Heartbeat, RemoteCaller, RunContext, Tool, ToolInfo};

use crate::remote_caller::ClientCaller;

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
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for description in listed {
            let Some(tool) = upstream_tool(caller, &server, &description, naming, heartbeat) else {
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
        served.push((server, tools));
    }
    served
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
        let (events, mut reported) = mpsc::channel(64);
        // The scheduler's time limit applies; dropping this future (cancel,
        // time limit) cancels the call on the upstream.
        let call = self
            .caller
            .call(&self.server, &self.tool, arguments, None, events);
        tokio::pin!(call);
        let mut heart = Heartbeat::new(self.heartbeat);
        loop {
            tokio::select! {
                // What the upstream said before its result goes first.
                biased;
                Some(kind) = reported.recv() => {
                    heart.saw(&kind);
                    emit(&ctx, kind).await?;
                }
                ended = &mut call => {
                    // The call has returned: all it reported is queued.
                    while let Ok(kind) = reported.try_recv() {
                        emit(&ctx, kind).await?;
                    }
                    return ended;
                }
                () = tokio::time::sleep_until(heart.due()) => {
                    let quiet = heart.quiet_for().as_secs();
                    let beat = heart.beat(format!(
                        "still working: no progress from the upstream {} for {quiet} s",
                        self.server
                    ));
                    emit(&ctx, beat.into()).await?;
                }
            }
        }
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
