//! weir's own tools and resources over its runs: for clients that support
//! no streaming at all, every run can still be listed, paged through,
//! cancelled and read afterwards.

use serde_json::{Value, json};
use weir_core::{RunId, RunState};
use weir_runtime::log::RunFilter;

use crate::protocol::SUPPORTED_VERSIONS;
use crate::server::{McpServer, internal};
use weir_mcp_wire::jsonrpc::RpcError;

/// Most events `runs_events` returns per page.
const MAX_PAGE: u64 = 1000;
/// Most bytes `runs_artifact` returns per page.
const MAX_ARTIFACT_PAGE: u64 = 256 * 1024;

fn run_id_schema() -> Value {
    json!({ "type": "string", "description": "The run's id (the task id, for calls made as tasks)." })
}

pub(crate) fn run_tool_list() -> Vec<Value> {
    let tool = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({
            "name": name,
            "description": description,
            "inputSchema": { "type": "object", "properties": properties, "required": required },
            "execution": { "taskSupport": "forbidden" },
            "annotations": { "readOnlyHint": name != "runs_cancel" },
        })
    };
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
        ),
        tool(
            "runs_get",
            "Show one run: tool, arguments, state, event count, timing.",
            json!({ "run_id": run_id_schema() }),
            &["run_id"],
        ),
        tool(
            "runs_events",
            "Read a page of a run's events from a sequence number (use next_seq to continue).",
            json!({
                "run_id": run_id_schema(),
                "from": { "type": "integer", "minimum": 0 },
                "limit": { "type": "integer", "minimum": 1, "maximum": MAX_PAGE },
            }),
            &["run_id"],
        ),
        tool(
            "runs_cancel",
            "Cancel a run that is still going; it ends as canceled.",
            json!({ "run_id": run_id_schema(), "reason": { "type": "string" } }),
            &["run_id"],
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
        ),
        tool(
            "get_status",
            "weir's version, protocol revisions, store, streaming capabilities and which tools stream.",
            json!({}),
            &[],
        ),
    ]
}

fn structured(value: Value) -> Value {
    json!({
        "content": [{ "type": "text", "text": serde_json::to_string_pretty(&value).unwrap_or_default() }],
        "structuredContent": value,
    })
}

fn tool_error(message: String) -> Value {
    json!({ "content": [{ "type": "text", "text": message }], "isError": true })
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
    server: &McpServer,
    name: &str,
    arguments: &Value,
) -> Option<Result<Value, RpcError>> {
    let known = run_tool_list().iter().any(|tool| tool["name"] == name);
    if !known {
        return None;
    }
    if let Err(message) = weir_core::check_arguments(
        &run_tool_list().into_iter().find(|t| t["name"] == name)?["inputSchema"],
        arguments,
    ) {
        return Some(Ok(tool_error(format!("invalid arguments: {message}"))));
    }
    Some(match answer(server, name, arguments).await {
        Ok(Ok(value)) => Ok(structured(value)),
        Ok(Err(message)) => Ok(tool_error(message)),
        Err(error) => Err(error),
    })
}

/// `Ok(Err(..))` is a tool-level error the caller can act on.
async fn answer(
    server: &McpServer,
    name: &str,
    arguments: &Value,
) -> Result<Result<Value, String>, RpcError> {
    let scheduler = &server.inner.scheduler;
    let log = scheduler.log();
    let missing = |run_id: &RunId| format!("no run {run_id}; list runs with runs_list");
    match name {
        "runs_list" => {
            let filter = RunFilter {
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
                limit: Some(arguments.get("limit").and_then(Value::as_u64).unwrap_or(20) as usize),
            };
            let runs = log.list_runs(&filter).await.map_err(internal)?;
            Ok(Ok(json!({ "runs": runs })))
        }
        "get_status" => {
            let streaming: Vec<&str> = scheduler
                .tools()
                .filter(|t| t.streams)
                .map(|t| t.name.as_str())
                .collect();
            Ok(Ok(json!({
                "name": server.inner.config.name,
                "version": server.inner.config.version,
                "protocolVersions": SUPPORTED_VERSIONS,
                "store": server.inner.config.store,
                "queued": scheduler.queued(),
                "streaming": {
                    "progress": true,
                    "partialResults": "SEP-2998 draft: declare partialResults and send _meta.partialResultToken",
                    "tasks": ["2025-11-25", "io.modelcontextprotocol/tasks"],
                    "sse": "GET /runs/{run_id}/events (HTTP transport)",
                    "resumable": "Last-Event-ID on the call's SSE stream (2025-11-25)",
                },
                "streamingTools": streaming,
            })))
        }
        _ => {
            let run_id = match run_id_arg(arguments) {
                Ok(run_id) => run_id,
                Err(message) => return Ok(Err(message)),
            };
            let Some(run) = log.get_run(&run_id).await.map_err(internal)? else {
                return Ok(Err(missing(&run_id)));
            };
            match name {
                "runs_get" => Ok(Ok(json!({ "run": run }))),
                "runs_events" => {
                    let from = arguments.get("from").and_then(Value::as_u64).unwrap_or(0);
                    let limit = arguments
                        .get("limit")
                        .and_then(Value::as_u64)
                        .unwrap_or(100)
                        .min(MAX_PAGE);
                    let events = log
                        .read(&run_id, from, limit as usize)
                        .await
                        .map_err(internal)?;
                    let next_seq = events.last().map_or(from, |event| event.seq + 1);
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
                    let offset = arguments.get("offset").and_then(Value::as_u64).unwrap_or(0);
                    let length = arguments
                        .get("length")
                        .and_then(Value::as_u64)
                        .unwrap_or(64 * 1024)
                        .min(MAX_ARTIFACT_PAGE);
                    let bytes = log
                        .read_artifact(&run_id, name, offset..offset.saturating_add(length))
                        .await
                        .map_err(internal)?;
                    let next = offset + bytes.len() as u64;
                    let data = match String::from_utf8(bytes) {
                        Ok(text) => json!({ "text": text }),
                        Err(binary) => json!({ "base64": base64(binary.as_bytes()) }),
                    };
                    Ok(Ok(
                        json!({ "artifact": artifact, "offset": offset, "next_offset": next, "done": next >= artifact.bytes, "data": data }),
                    ))
                }
                _ => unreachable!("checked against run_tool_list above"),
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
    server: &McpServer,
    uri: &str,
) -> Result<Option<Value>, RpcError> {
    let Some(rest) = uri.strip_prefix("weir://runs/") else {
        return Ok(None);
    };
    let log = server.inner.scheduler.log();
    let (id, artifact) = match rest.split_once("/artifacts/") {
        Some((id, name)) => (id, Some(name)),
        None => (rest, None),
    };
    let Ok(run_id) = RunId::parse(id) else {
        return Ok(None);
    };
    let Some(run) = log.get_run(&run_id).await.map_err(internal)? else {
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

/// Standard base64 with padding.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> shift & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(plain.as_bytes()), encoded);
        }
    }
}
