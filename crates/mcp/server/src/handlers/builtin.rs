//! weir's own tools and resources over its runs: for clients that support
//! no streaming at all, every run can still be listed, paged through,
//! cancelled and read afterwards.

use std::sync::LazyLock;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use weir_core::{RunId, RunState};
use weir_mcp_wire::jsonrpc::RpcError;
use weir_runtime::Principal;
use weir_runtime::log::RunFilter;

use crate::errors::internal;
use crate::protocol::SUPPORTED_VERSIONS;
use crate::state::ServerState;

/// Most events `runs_events` returns per page.
const MAX_PAGE: u64 = 1000;
/// Most bytes `runs_artifact` returns per page.
const MAX_ARTIFACT_PAGE: u64 = 256 * 1024;
/// How long `runs_wait` waits unless told: below the 60 s after which
/// many hosts give up on a call.
const DEFAULT_WAIT_S: f64 = 30.0;
/// The longest `runs_wait` waits.
const MAX_WAIT_S: f64 = 600.0;

fn run_id_schema() -> Value {
    json!({ "type": "string", "description": "The run's id (a task's id)." })
}

/// The MCP hints of a tool of weir's own: each reads weir's records
/// but `runs_cancel`, which ends a run for good (again, to no more effect).
fn hints(read_only: bool) -> Value {
    json!({
        "readOnlyHint": read_only,
        "destructiveHint": !read_only,
        "idempotentHint": true,
        "openWorldHint": false,
    })
}

/// An object schema: `properties`, all of them `required` but `optional`.
fn object(properties: Value, optional: &[&str]) -> Value {
    let required: Vec<&String> = properties
        .as_object()
        .expect("properties are an object")
        .keys()
        .filter(|name| !optional.contains(&name.as_str()))
        .collect();
    json!({ "type": "object", "properties": properties, "required": required })
}

/// A run's summary (`RunSummary` as JSON), in `runs_list` and `runs_get`.
fn run_schema() -> Value {
    let ts = || json!({ "type": "integer", "minimum": 0, "description": "Unix ms." });
    object(
        json!({
            "run_id": run_id_schema(),
            "tool": { "type": "string" },
            "arguments": {},
            "node": { "type": "string" },
            "state": { "type": "string", "description": "pending, working, input_required, completed, failed or canceled." },
            "events": { "type": "integer", "minimum": 0, "description": "Events in its log." },
            "created_ts": ts(),
            "updated_ts": ts(),
            "finished_ts": { "type": ["integer", "null"], "minimum": 0, "description": "Unix ms; null while it runs." },
            "owner": { "type": "string", "description": "The credential that started it." },
        }),
        &["owner"],
    )
}

/// weir's own tools as `tools/list` shows them. Built once: every
/// `tools/call` looks its name and input schema up here.
///
/// Each returns its answer twice, as `structuredContent` and as the same
/// JSON in a text block, and declares what it always carries as
/// `outputSchema` (`weir_core::output_contract` of its shape): hosts that
/// hand the model only one of the two lose nothing.
pub(crate) static TOOLS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let tool =
        |name: &str, description: &str, properties: Value, required: &[&str], output: Value| {
            json!({
                "name": name,
                "description": description,
                "inputSchema": { "type": "object", "properties": properties, "required": required },
                "outputSchema": weir_core::output_contract(&output),
                "execution": { "taskSupport": "forbidden" },
                "annotations": hints(name != "runs_cancel"),
            })
        };
    let artifact = object(
        json!({
            "name": { "type": "string" },
            "uri": { "type": "string", "description": "weir://runs/{run_id}/artifacts/{name}" },
            "mime": { "type": "string" },
            "bytes": { "type": "integer", "minimum": 0 },
            "sha256": { "type": "string" },
        }),
        &[],
    );
    let event = object(
        json!({
            "run_id": run_id_schema(),
            "seq": { "type": "integer", "minimum": 0 },
            "ts": { "type": "integer", "minimum": 0 },
            "type": { "type": "string", "description": "started, progress, log, partial, …, then completed, failed or canceled." },
        }),
        &[],
    );
    vec![
        tool(
            "runs_list",
            "List recent runs (tool calls), newest first, with their state.",
            json!({
                "state": { "type": "string", "enum": ["pending", "working", "completed", "failed", "canceled"] },
                "tool": { "type": "string" },
                "limit": { "type": "integer", "minimum": 1, "maximum": 1000 },
            }),
            &[],
            object(
                json!({ "runs": { "type": "array", "items": run_schema() } }),
                &[],
            ),
        ),
        tool(
            "runs_get",
            "One run: tool, arguments (secrets redacted), state, timing.",
            json!({ "run_id": run_id_schema() }),
            &["run_id"],
            object(json!({ "run": run_schema() }), &[]),
        ),
        tool(
            "runs_events",
            "A page of a run's events from seq `from` (continue at next_seq).",
            json!({
                "run_id": run_id_schema(),
                "from": { "type": "integer", "minimum": 0 },
                "limit": { "type": "integer", "minimum": 1, "maximum": MAX_PAGE },
            }),
            &["run_id"],
            object(
                json!({
                    "run_id": run_id_schema(),
                    "state": run_schema()["properties"]["state"].clone(),
                    "events": { "type": "array", "items": event },
                    "next_seq": { "type": "integer", "minimum": 0 },
                    "done": { "type": "boolean", "description": "The run ended and this page reached its end." },
                }),
                &[],
            ),
        ),
        tool(
            "runs_cancel",
            "Cancel a run that is still going; it ends as canceled.",
            json!({ "run_id": run_id_schema(), "reason": { "type": "string" } }),
            &["run_id"],
            object(
                json!({
                    "run_id": run_id_schema(),
                    "cancelled": { "type": "boolean" },
                }),
                &[],
            ),
        ),
        tool(
            "runs_artifact",
            "Read a page of bytes of a file a run produced.",
            json!({
                "run_id": run_id_schema(),
                "name": { "type": "string" },
                "offset": { "type": "integer", "minimum": 0 },
                "length": { "type": "integer", "minimum": 1, "maximum": MAX_ARTIFACT_PAGE },
            }),
            &["run_id", "name"],
            object(
                json!({
                    "artifact": artifact,
                    "offset": { "type": "integer", "minimum": 0 },
                    "next_offset": { "type": "integer", "minimum": 0 },
                    "done": { "type": "boolean" },
                    "data": object(
                        json!({
                            "text": { "type": "string", "description": "When UTF-8." },
                            "base64": { "type": "string", "description": "When not UTF-8." },
                        }),
                        &["text", "base64"],
                    ),
                }),
                &[],
            ),
        ),
        runs_wait_tool(),
        tool(
            "get_status",
            "weir's version, protocol revisions, store, streaming capabilities and which tools stream.",
            json!({}),
            &[],
            object(
                json!({
                    "name": { "type": "string" },
                    "version": { "type": "string" },
                    "protocolVersions": { "type": "array", "items": { "type": "string" } },
                    "store": { "type": "string" },
                    "queued": { "type": "integer", "minimum": 0 },
                    "streaming": { "type": "object" },
                    "streamingTools": { "type": "array", "items": { "type": "string" } },
                }),
                &[],
            ),
        ),
    ]
});

/// `runs_wait`. It answers with the run's own result, whose
/// `structuredContent` has the run's tool's shape, so it declares no
/// `outputSchema` (a client would check every tool's result against it).
fn runs_wait_tool() -> Value {
    json!({
        "name": "runs_wait",
        "description": "Wait for a run to end and return its result as its tool would have; if it has not ended within timeout_s, says so: call again, or runs_cancel.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "run_id": run_id_schema(),
                "timeout_s": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": MAX_WAIT_S as u64,
                    "description": format!("Seconds (default {DEFAULT_WAIT_S})."),
                },
            },
            "required": ["run_id"],
        },
        "execution": { "taskSupport": "forbidden" },
        "annotations": hints(true),
    })
}

/// `runs_wait`: the run's result once it has ended, or, after `timeout_s`,
/// that it is still working. Following its log waits for the end.
async fn wait(
    state: &ServerState,
    caller: &Principal,
    arguments: &Value,
) -> Result<Value, RpcError> {
    let run_id = match run_id_arg(arguments) {
        Ok(run_id) => run_id,
        Err(message) => return Ok(tool_error(message)),
    };
    let log = state.scheduler.log();
    let seen = log.get_run(&run_id).await.map_err(internal)?;
    if !seen.is_some_and(|run| caller.sees(&run)) {
        return Ok(tool_error(format!(
            "no run {run_id}; list runs with runs_list"
        )));
    }
    let wait_s = arguments
        .get("timeout_s")
        .and_then(Value::as_f64)
        .unwrap_or(DEFAULT_WAIT_S)
        .clamp(0.0, MAX_WAIT_S);
    let waited = tokio::time::timeout(
        Duration::from_secs_f64(wait_s),
        crate::follow::final_result(state, &run_id),
    )
    .await;
    if let Ok(result) = waited {
        return result;
    }
    let run = log.get_run(&run_id).await.map_err(internal)?;
    let run_state = run.map_or(RunState::Working, |run| run.state);
    Ok(still_working(&run_id, run_state))
}

/// The answer about a run that has not ended: what it is doing and how to
/// get its outcome. Also what a call deferred by `--defer-after` answers.
/// The text is in `structuredContent` too: hosts that hand their model the
/// structured form alone (Claude Code does) would drop the instructions.
pub(crate) fn still_working(run_id: &RunId, run_state: RunState) -> Value {
    let text = format!(
        "Run {run_id} is still working (state: {run_state}); it goes on without you. To get its result, call the runs_wait tool with {{\"run_id\": \"{run_id}\"}} (it waits up to timeout_s seconds, then says so again); to stop it, call runs_cancel."
    );
    json!({
        "content": [{ "type": "text", "text": text }],
        "structuredContent": {
            "run_id": run_id,
            "state": run_state,
            "still_working": true,
            "next": "runs_wait",
            "message": text,
        },
    })
}

/// A successful answer: `value` as `structuredContent`, and the same JSON,
/// pretty-printed, as text.
fn structured(value: Value) -> Value {
    json!({
        "content": [{ "type": "text", "text": serde_json::to_string_pretty(&value).unwrap_or_default() }],
        "structuredContent": value,
    })
}

fn tool_error(message: String) -> Value {
    json!({ "content": [{ "type": "text", "text": message }], "isError": true })
}

/// `arguments[name]`, which the input schema has checked is a non-negative
/// integer, however JSON spelled it: `5`, `5.0`, `1e30`. One past `u64::MAX`
/// reads as `u64::MAX` (`as` saturates), which is past the end of every run
/// and every artifact: a position too large means "nothing there", never a
/// wrap to the start.
fn u64_arg(arguments: &Value, name: &str) -> Option<u64> {
    let value = arguments.get(name)?;
    value
        .as_u64()
        .or_else(|| value.as_f64().map(|float| float as u64))
}

fn run_id_arg(arguments: &Value) -> Result<RunId, String> {
    let text = arguments
        .get("run_id")
        .and_then(Value::as_str)
        .ok_or("arguments.run_id is required")?;
    RunId::parse(text).map_err(|error| error.to_string())
}

/// Handles a call to one of weir's own tools; `None` if `name` is not one.
pub(crate) async fn call(
    state: &ServerState,
    caller: &Principal,
    name: &str,
    arguments: &Value,
) -> Option<Result<Value, RpcError>> {
    let tool = TOOLS.iter().find(|tool| tool["name"] == name)?;
    if let Err(message) = weir_core::check_arguments(&tool["inputSchema"], arguments) {
        return Some(Ok(tool_error(format!("invalid arguments: {message}"))));
    }
    if name == "runs_wait" {
        return Some(wait(state, caller, arguments).await);
    }
    Some(match answer(state, caller, name, arguments).await {
        Ok(Ok(value)) => Ok(structured(value)),
        Ok(Err(message)) => Ok(tool_error(message)),
        Err(error) => Err(error),
    })
}

/// `Ok(Err(..))` is a tool-level error the caller can act on. A run the
/// caller may not see is answered as a run that does not exist.
async fn answer(
    state: &ServerState,
    caller: &Principal,
    name: &str,
    arguments: &Value,
) -> Result<Result<Value, String>, RpcError> {
    let scheduler = &state.scheduler;
    let log = scheduler.log();
    let missing = |run_id: &RunId| format!("no run {run_id}; list runs with runs_list");
    match name {
        "runs_list" => {
            let filter = caller.narrow(RunFilter {
                states: arguments
                    .get("state")
                    .and_then(Value::as_str)
                    .and_then(|s| s.parse::<RunState>().ok())
                    .into_iter()
                    .collect(),
                tool: arguments
                    .get("tool")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                node: None,
                owner: None,
                limit: Some(
                    usize::try_from(u64_arg(arguments, "limit").unwrap_or(20))
                        .unwrap_or(usize::MAX),
                ),
            });
            let runs = log.list_runs(&filter).await.map_err(internal)?;
            Ok(Ok(json!({ "runs": runs })))
        }
        "get_status" => {
            let streaming: Vec<String> = scheduler
                .tools()
                .filter(|t| t.streams && caller.may_call(&t.name))
                .map(|t| t.name)
                .collect();
            let mut status = json!({
                "name": state.config.name,
                "version": state.config.version,
                "protocolVersions": SUPPORTED_VERSIONS,
                "store": state.config.store,
                "queued": scheduler.queued(),
                "streaming": {
                    "progress": true,
                    "partialResults": "SEP-2998 draft: declare partialResults and send _meta.partialResultToken",
                    "tasks": ["2025-11-25", "io.modelcontextprotocol/tasks"],
                    "sse": "GET /runs/{run_id}/events (HTTP transport)",
                    "resumable": "Last-Event-ID on the call's SSE stream (2025-11-25)",
                },
                "streamingTools": streaming,
            });
            for part in &state.config.status_parts {
                status[&part.key] = (part.report)();
            }
            Ok(Ok(status))
        }
        _ => {
            let run_id = match run_id_arg(arguments) {
                Ok(run_id) => run_id,
                Err(message) => return Ok(Err(message)),
            };
            let seen = log.get_run(&run_id).await.map_err(internal)?;
            let Some(run) = seen.filter(|run| caller.sees(run)) else {
                return Ok(Err(missing(&run_id)));
            };
            match name {
                "runs_get" => Ok(Ok(json!({ "run": run }))),
                "runs_events" => {
                    let from = u64_arg(arguments, "from").unwrap_or(0);
                    let limit = u64_arg(arguments, "limit").unwrap_or(100).min(MAX_PAGE);
                    let events = log
                        .read(&run_id, from, limit as usize)
                        .await
                        .map_err(internal)?;
                    // Only a seq of `u64::MAX` has no successor; no store
                    // holds one, and saturating keeps `next_seq` past the end.
                    let next_seq = events
                        .last()
                        .map_or(from, |event| event.seq.saturating_add(1));
                    let done = run.state.is_terminal() && next_seq >= run.events;
                    Ok(Ok(
                        json!({ "run_id": run_id, "state": run.state, "events": events, "next_seq": next_seq, "done": done }),
                    ))
                }
                "runs_cancel" => {
                    let reason = arguments
                        .get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or("cancelled with runs_cancel");
                    if run.state.is_terminal() {
                        return Ok(Err(format!(
                            "run {run_id} has already ended ({})",
                            run.state
                        )));
                    }
                    let cancelled = scheduler.cancel(&run_id, reason);
                    Ok(Ok(json!({ "run_id": run_id, "cancelled": cancelled })))
                }
                "runs_artifact" => {
                    let name = arguments
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let artifact = match log.artifact(&run_id, name).await {
                        Ok(artifact) => artifact,
                        Err(error) => return Ok(Err(error.to_string())),
                    };
                    let offset = u64_arg(arguments, "offset").unwrap_or(0);
                    let length = u64_arg(arguments, "length")
                        .unwrap_or(64 * 1024)
                        .min(MAX_ARTIFACT_PAGE);
                    let bytes = log
                        .read_artifact(&run_id, name, offset..offset.saturating_add(length))
                        .await
                        .map_err(internal)?;
                    let next = offset.saturating_add(bytes.len() as u64);
                    let data = match String::from_utf8(bytes) {
                        Ok(text) => json!({ "text": text }),
                        Err(binary) => json!({ "base64": base64(binary.as_bytes()) }),
                    };
                    Ok(Ok(
                        json!({ "artifact": artifact, "offset": offset, "next_offset": next, "done": next >= artifact.bytes, "data": data }),
                    ))
                }
                _ => unreachable!("checked against TOOLS above"),
            }
        }
    }
}

pub(crate) fn run_resource_templates() -> Vec<Value> {
    vec![
        json!({
            "uriTemplate": "weir://runs/{run_id}",
            "name": "run",
            "description": "A run: its summary and its first 1,000 events (page with the runs_events tool).",
            "mimeType": "application/json",
        }),
        json!({
            "uriTemplate": "weir://runs/{run_id}/artifacts/{name}",
            "name": "run artifact",
            "description": "A file a run produced (first 256 KiB; page with the runs_artifact tool).",
        }),
    ]
}

/// Contents of a `weir://runs/...` URI; `None` for other URIs.
pub(crate) async fn read_run_resource(
    state: &ServerState,
    caller: &Principal,
    uri: &str,
) -> Result<Option<Value>, RpcError> {
    let Some(rest) = uri.strip_prefix("weir://runs/") else {
        return Ok(None);
    };
    let log = state.scheduler.log();
    let (id, artifact) = match rest.split_once("/artifacts/") {
        Some((id, name)) => (id, Some(name)),
        None => (rest, None),
    };
    let Ok(run_id) = RunId::parse(id) else {
        return Ok(None);
    };
    let seen = log.get_run(&run_id).await.map_err(internal)?;
    let Some(run) = seen.filter(|run| caller.sees(run)) else {
        return Ok(None);
    };
    let contents = match artifact {
        None => {
            let events = log
                .read(&run_id, 0, MAX_PAGE as usize)
                .await
                .map_err(internal)?;
            let text = json!({ "run": run, "events": events }).to_string();
            json!([{ "uri": uri, "mimeType": "application/json", "text": text }])
        }
        Some(name) => {
            let Ok(artifact) = log.artifact(&run_id, name).await else {
                return Ok(None);
            };
            let bytes = log
                .read_artifact(&run_id, name, 0..MAX_ARTIFACT_PAGE)
                .await
                .map_err(internal)?;
            match String::from_utf8(bytes) {
                Ok(text) => json!([{ "uri": uri, "mimeType": artifact.mime, "text": text }]),
                Err(binary) => {
                    json!([{ "uri": uri, "mimeType": artifact.mime, "blob": base64(binary.as_bytes()) }])
                }
            }
        }
    };
    Ok(Some(contents))
}

/// Bytes that are not UTF-8, as MCP's `blob` and the `runs_artifact` tool
/// carry them: standard alphabet, padded (RFC 4648 §4).
fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use serde_json::{Value, json};
    use weir_core::{Completed, FailureCode, RunError};
    use weir_runtime::{
        MemoryLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo,
    };

    use crate::catalog::EmptyCatalog;
    use crate::state::{ServerConfig, ServerState};

    /// Writes one artifact, `bytes.bin`, whose bytes are not UTF-8.
    struct Binary;

    /// Not UTF-8, and encoded with both characters where the standard
    /// alphabet differs from the URL-safe one, plus padding: "+/8=".
    const BYTES: [u8; 2] = [0xfb, 0xff];

    #[async_trait]
    impl Tool for Binary {
        fn info(&self) -> ToolInfo {
            ToolInfo::new(
                "binary",
                "Writes a binary artifact.",
                json!({"type": "object"}),
            )
        }

        async fn run(&self, ctx: RunContext, _: Value) -> Result<Completed, RunError> {
            ctx.artifact("bytes.bin", "application/octet-stream", BYTES.to_vec())
                .await
                .map_err(|error| RunError::new(FailureCode::ToolError, error.to_string()))?;
            Ok(Completed::default())
        }
    }

    #[tokio::test]
    async fn binary_artifacts_are_standard_padded_base64() {
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Binary)];
        let scheduler = Scheduler::start(
            Arc::new(MemoryLog::new()),
            tools,
            SchedulerConfig::default(),
        )
        .await
        .expect("scheduler");
        let handle = scheduler
            .submit("binary", json!({}), RunOptions::default())
            .await
            .expect("submitted");
        let run_id = handle.run_id().clone();
        handle.finished().await.expect("finished");
        let state = ServerState {
            scheduler,
            catalog: Arc::new(EmptyCatalog),
            config: ServerConfig::default(),
            announcements: tokio::sync::broadcast::channel(1).0,
        };

        let arguments = json!({ "run_id": run_id, "name": "bytes.bin" });
        let local = weir_runtime::Principal::local();
        let page = super::call(&state, &local, "runs_artifact", &arguments)
            .await
            .expect("a built-in tool")
            .expect("answered");
        assert_eq!(
            page["structuredContent"]["data"],
            json!({ "base64": "+/8=" })
        );

        let uri = format!("weir://runs/{run_id}/artifacts/bytes.bin");
        let contents = super::read_run_resource(&state, &local, &uri)
            .await
            .expect("read")
            .expect("a run resource");
        assert_eq!(contents[0]["blob"], "+/8=");
    }
}
