//! The typed data a caller sees: call events, results, tool descriptions,
//! and their conversion from MCP's wire JSON (the one place that reads it).

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use weir_core::{Content, LogLevel};
use weir_mcp_wire::revision::meta_key;

use crate::error::ClientError;

/// One thing that happened during a call. A call's stream yields any number
/// of `Progress`, `Partial`, `Log` and `Task` events, then exactly one
/// `Result` or `Error`, last.
#[derive(Clone, Debug)]
pub enum CallEvent {
    /// `notifications/progress` for this call.
    Progress {
        /// How far, strictly increasing.
        progress: f64,
        /// Out of how much, when known.
        total: Option<f64>,
        /// What the server says it is doing.
        message: Option<String>,
    },
    /// A SEP-2998 partial result: a piece of the result, in `seq` order
    /// (each `seq` at most once, also across a resumed stream).
    Partial {
        /// Dense from 0 per call, as the server numbered it.
        seq: u64,
        /// Content blocks of this piece.
        content: Vec<Content>,
        /// Its structured part, if any.
        structured: Option<Value>,
    },
    /// A logging notification (`notifications/message`).
    Log {
        /// Severity.
        level: LogLevel,
        /// The server's logger name, e.g. `stdout`.
        logger: Option<String>,
        /// The message: usually a string, any JSON value.
        data: Value,
    },
    /// The call runs as a task, and its status is now this.
    Task {
        /// The task's id.
        task_id: String,
        /// Its status.
        status: TaskStatus,
        /// The server's `statusMessage`.
        message: Option<String>,
    },
    /// A weir server named the run behind the call, as it started (the
    /// call asks with `_meta["io.weir/run"]`; other servers say nothing).
    Run {
        /// The run's id, for `weir runs` and the `runs_*` tools.
        run_id: String,
    },
    /// Terminal: the tool's result (which may be a tool error, `is_error`).
    Result(CallResult),
    /// Terminal: the call did not produce a result.
    Error(ClientError),
}

impl CallEvent {
    /// Whether this event ends the call.
    pub fn is_terminal(&self) -> bool {
        matches!(self, CallEvent::Result(_) | CallEvent::Error(_))
    }
}

/// A `CallToolResult`, typed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallResult {
    /// The content blocks, complete (the server's final word: partials were
    /// a preview of it).
    pub content: Vec<Content>,
    /// `structuredContent`, if any.
    pub structured: Option<Value>,
    /// Whether the tool reported an error (`isError`).
    pub is_error: bool,
    /// The run behind it, when a weir server says.
    pub run: Option<RunEnd>,
}

/// What a weir server says on a result about the run behind it
/// (`_meta["io.weir/run"]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunEnd {
    /// The run's id.
    pub run_id: String,
    /// How it ended: `completed`, `failed` or `canceled`.
    pub state: String,
    /// How many of the result's first content blocks the call's partial
    /// results carried (merged by stream): a client that showed the
    /// partials need not show these again.
    pub streamed: usize,
    /// The content was cut at the server's result limit (its last two
    /// blocks say so and link to the run).
    pub truncated: bool,
}

/// A task's status (both task designs use these names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for input from a client.
    InputRequired,
    /// Terminal: finished with a result.
    Completed,
    /// Terminal: failed.
    Failed,
    /// Terminal: cancelled.
    Cancelled,
}

impl TaskStatus {
    /// Whether the task has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The wire name, e.g. `input_required`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

/// Whether a tool may, must or must not run as a task (2025-11-25
/// `execution.taskSupport`; absent means forbidden).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskSupport {
    /// Never as a task.
    Forbidden,
    /// Either way.
    Optional,
    /// Only as a task.
    Required,
}

/// A tool as `tools/list` describes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolDescription {
    /// Its name, to call it by.
    pub name: String,
    /// A human-readable title, if given.
    pub title: Option<String>,
    /// What it does.
    pub description: Option<String>,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its `structuredContent`, if declared.
    pub output_schema: Option<Value>,
    /// Whether it runs as a task.
    pub task_support: TaskSupport,
    /// Whether it streams partial results (`annotations.streamingHint`).
    pub streams: bool,
}

/// A content block from MCP JSON, its strings moved out rather than
/// copied (a result or a stream of partials holds thousands). Block types
/// this client does not know, and known ones missing a field they need,
/// become text holding their JSON, so nothing the server said is lost.
pub(crate) fn content_from_wire(mut block: Value) -> Content {
    if let Some(known) = known_content(&mut block) {
        return known;
    }
    Content::Text {
        text: block.to_string(),
    }
}

/// The typed block, if `block` is one this client knows and has the
/// fields it needs; then its strings are taken (left empty). Checked
/// before anything is taken, so an unknown block stays whole.
fn known_content(block: &mut Value) -> Option<Content> {
    let has = |value: &Value, key: &str| value.get(key).is_some_and(Value::is_string);
    let kind = match block.get("type").and_then(Value::as_str) {
        Some(kind @ ("text" | "image" | "audio" | "resource" | "resource_link")) => kind,
        _ => return None,
    };
    Some(match kind {
        "text" if has(block, "text") => Content::Text {
            text: take(block, "text")?,
        },
        "image" if has(block, "data") && has(block, "mimeType") => Content::Image {
            data: take(block, "data")?,
            mime_type: take(block, "mimeType")?,
        },
        "audio" if has(block, "data") && has(block, "mimeType") => Content::Audio {
            data: take(block, "data")?,
            mime_type: take(block, "mimeType")?,
        },
        "resource" if block.get("resource").is_some_and(|r| has(r, "uri")) => {
            let resource = block.get_mut("resource")?;
            Content::Resource {
                uri: take(resource, "uri")?,
                mime_type: take(resource, "mimeType"),
                text: take(resource, "text"),
                blob: take(resource, "blob"),
            }
        }
        "resource_link" if has(block, "uri") => {
            let uri = take(block, "uri")?;
            Content::ResourceLink {
                name: take(block, "name").unwrap_or_else(|| uri.clone()),
                uri,
                mime_type: take(block, "mimeType"),
            }
        }
        _ => return None,
    })
}

/// The string at `key` of `object`, moved out.
fn take(object: &mut Value, key: &str) -> Option<String> {
    match object.get_mut(key)? {
        Value::String(text) => Some(std::mem::take(text)),
        _ => None,
    }
}

fn contents_from_wire(blocks: Option<Value>) -> Vec<Content> {
    match blocks {
        Some(Value::Array(blocks)) => blocks.into_iter().map(content_from_wire).collect(),
        _ => Vec::new(),
    }
}

/// A `CallToolResult` from its JSON.
pub(crate) fn result_from_wire(mut result: Value) -> Result<CallResult, ClientError> {
    if !result.get("content").is_none_or(Value::is_array) {
        return Err(ClientError::Protocol(format!(
            "a tools/call result's content is not a list: {}",
            clip(&result)
        )));
    }
    let mut field = |key: &str| result.as_object_mut().and_then(|object| object.remove(key));
    let content = contents_from_wire(field("content"));
    let structured = field("structuredContent");
    Ok(CallResult {
        content,
        structured,
        is_error: result.get("isError").and_then(Value::as_bool) == Some(true),
        run: run_end(&result),
    })
}

/// A `CallToolResult` from the text the server wrote: its blocks read
/// into their types without a JSON tree of the whole (a result of a
/// stream holds thousands), as [`result_from_wire`] reads them.
pub(crate) fn result_from_raw(result: &RawValue) -> Result<CallResult, ClientError> {
    #[derive(Deserialize)]
    struct Fields<'a> {
        #[serde(default, borrow, deserialize_with = "present_raw")]
        content: Option<&'a RawValue>,
        #[serde(
            rename = "structuredContent",
            default,
            borrow,
            deserialize_with = "present_raw"
        )]
        structured: Option<&'a RawValue>,
        #[serde(rename = "isError", borrow)]
        is_error: Option<&'a RawValue>,
        #[serde(rename = "_meta", borrow)]
        meta: Option<&'a RawValue>,
    }
    // What is not a result of the usual shape is read the usual way,
    // which says what is wrong with it (or makes what it can of it).
    let by_value = || result_from_wire(serde_json::from_str(result.get()).unwrap_or_default());
    let Ok(fields) = serde_json::from_str::<Fields>(result.get()) else {
        return by_value();
    };
    let content = match fields
        .content
        .map(|blocks| read::<Vec<&RawValue>>(Some(blocks)))
    {
        None => Vec::new(),
        Some(None) => return by_value(),
        Some(Some(blocks)) => blocks.into_iter().map(content_from_raw).collect(),
    };
    Ok(CallResult {
        content,
        structured: fields.structured.map(|structured| {
            serde_json::from_str(structured.get()).expect("a JSON text is a JSON value")
        }),
        is_error: read::<bool>(fields.is_error) == Some(true),
        run: read::<Value>(fields.meta).and_then(|meta| run_end_of(&meta)),
    })
}

/// `_meta["io.weir/run"]` of a result, when it is whole.
fn run_end(result: &Value) -> Option<RunEnd> {
    run_end_of(result.get("_meta")?)
}

/// `io.weir/run` of a result's `_meta`, when it is whole.
fn run_end_of(meta: &Value) -> Option<RunEnd> {
    let run = meta.get(meta_key::WEIR_RUN)?;
    Some(RunEnd {
        run_id: run.get("id")?.as_str()?.to_owned(),
        state: run.get("state")?.as_str()?.to_owned(),
        streamed: usize::try_from(run.get("streamed")?.as_u64()?).ok()?,
        truncated: run.get("truncated")?.as_bool()?,
    })
}

/// A `notifications/weir/run`'s params as an event.
pub(crate) fn run_from_wire(params: &Value) -> Option<CallEvent> {
    Some(CallEvent::Run {
        run_id: params.get("runId")?.as_str()?.to_owned(),
    })
}

/// The fields of a notification's params that events are made of, each
/// borrowed from the text the server wrote: read leniently (a field of
/// the wrong type is as good as absent, as a `Value` lookup would have
/// it), and nothing else of the params is built.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Fields<'a> {
    #[serde(rename = "progressToken", borrow)]
    progress_token: Option<&'a RawValue>,
    #[serde(borrow)]
    progress: Option<&'a RawValue>,
    #[serde(borrow)]
    total: Option<&'a RawValue>,
    #[serde(borrow)]
    message: Option<&'a RawValue>,
    #[serde(rename = "partialResultToken", borrow)]
    partial_token: Option<&'a RawValue>,
    #[serde(borrow)]
    seq: Option<&'a RawValue>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(rename = "structuredContent", borrow)]
    structured: Option<&'a RawValue>,
    #[serde(borrow)]
    level: Option<&'a RawValue>,
    #[serde(borrow)]
    logger: Option<&'a RawValue>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
}

impl<'a> Fields<'a> {
    fn of(params: &'a RawValue) -> Option<Fields<'a>> {
        serde_json::from_str(params.get()).ok()
    }
}

/// The string a JSON text holds, borrowed when it has no escapes.
pub(crate) fn raw_string(raw: &RawValue) -> Option<Cow<'_, str>> {
    match serde_json::from_str::<&str>(raw.get()) {
        Ok(text) => Some(Cow::Borrowed(text)),
        Err(_) => serde_json::from_str::<String>(raw.get())
            .ok()
            .map(Cow::Owned),
    }
}

/// A field that is there, as the text the server wrote, `null` included
/// (`Option` alone reads `null` as absent).
pub(crate) fn present_raw<'de, D: Deserializer<'de>>(
    field: D,
) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(field).map(Some)
}

/// A JSON text as `T`, if it is one.
fn read<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> Option<T> {
    serde_json::from_str(raw?.get()).ok()
}

/// A string field, owned.
fn text_of(raw: Option<&RawValue>) -> Option<String> {
    raw_string(raw?).map(Cow::into_owned)
}

/// A `notifications/tools/partial_result`'s params as its token and event.
pub(crate) fn partial_from_wire(params: &RawValue) -> Option<(Cow<'_, str>, CallEvent)> {
    /// The usual shape, read in one pass (its blocks split as it goes).
    #[derive(Deserialize)]
    struct Usual<'a> {
        #[serde(rename = "partialResultToken", borrow)]
        token: &'a RawValue,
        seq: u64,
        #[serde(borrow, default)]
        content: Vec<&'a RawValue>,
        #[serde(rename = "structuredContent", borrow)]
        structured: Option<&'a RawValue>,
    }
    if let Ok(plain) = serde_json::from_str::<Plain>(params.get()) {
        return Some((
            raw_string(plain.token)?,
            CallEvent::Partial {
                seq: plain.seq,
                content: plain.content.into_iter().map(Content::from).collect(),
                structured: read(plain.structured),
            },
        ));
    }
    if let Ok(usual) = serde_json::from_str::<Usual>(params.get()) {
        return Some((
            raw_string(usual.token)?,
            CallEvent::Partial {
                seq: usual.seq,
                content: usual.content.into_iter().map(content_from_raw).collect(),
                structured: read(usual.structured),
            },
        ));
    }
    // Any other shape, leniently (content that is not a list: none).
    let fields = Fields::of(params)?;
    let token = raw_string(fields.partial_token?)?;
    let seq = read(fields.seq)?;
    Some((
        token,
        CallEvent::Partial {
            seq,
            content: contents_from_raw(fields.content),
            structured: read(fields.structured),
        },
    ))
}

/// A partial of text blocks only (what nearly every tool streams), its
/// texts read straight into their strings in the one pass over the
/// params: no block is scanned again. Any other partial fails to read
/// as this, and is read as [`partial_from_wire`]'s usual shape, which
/// types a text block the same.
#[derive(Deserialize)]
struct Plain<'a> {
    #[serde(rename = "partialResultToken", borrow)]
    token: &'a RawValue,
    seq: u64,
    #[serde(default)]
    content: Vec<TextBlock>,
    #[serde(rename = "structuredContent", borrow)]
    structured: Option<&'a RawValue>,
}

/// `{"type": "text", "text": …}`, other fields ignored (as
/// [`content_from_raw`] ignores them).
#[derive(Deserialize)]
struct TextBlock {
    #[serde(rename = "type")]
    _kind: TextKind,
    text: String,
}

#[derive(Deserialize)]
enum TextKind {
    #[serde(rename = "text")]
    Text,
}

impl From<TextBlock> for Content {
    fn from(block: TextBlock) -> Content {
        Content::Text { text: block.text }
    }
}

/// A `notifications/progress`'s params as its token and event.
pub(crate) fn progress_from_wire(params: &RawValue) -> Option<(Cow<'_, str>, CallEvent)> {
    let fields = Fields::of(params)?;
    let token = raw_string(fields.progress_token?)?;
    Some((
        token,
        CallEvent::Progress {
            progress: read(fields.progress)?,
            total: read(fields.total),
            message: text_of(fields.message),
        },
    ))
}

/// A `notifications/message`'s params as an event.
pub(crate) fn log_from_wire(params: &RawValue) -> Option<CallEvent> {
    let fields = Fields::of(params)?;
    Some(CallEvent::Log {
        level: read(fields.level).unwrap_or(LogLevel::Info),
        logger: text_of(fields.logger),
        data: read(fields.data).unwrap_or(Value::Null),
    })
}

/// Content blocks as the server wrote them (anything but a list: none).
fn contents_from_raw(blocks: Option<&RawValue>) -> Vec<Content> {
    read::<Vec<&RawValue>>(blocks)
        .unwrap_or_default()
        .into_iter()
        .map(content_from_raw)
        .collect()
}

/// A content block's fields, borrowed.
#[derive(Deserialize, Default)]
#[serde(default)]
struct BlockFields<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<&'a RawValue>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    #[serde(rename = "mimeType", borrow)]
    mime_type: Option<&'a RawValue>,
    #[serde(borrow)]
    uri: Option<&'a RawValue>,
    #[serde(borrow)]
    name: Option<&'a RawValue>,
    #[serde(borrow)]
    blob: Option<&'a RawValue>,
    #[serde(borrow)]
    resource: Option<&'a RawValue>,
}

/// A content block from the text the server wrote: typed as
/// [`content_from_wire`] types it, and one this client does not know (or
/// short of a field it needs) kept as that text, exactly as written.
fn content_from_raw(block: &RawValue) -> Content {
    known_raw_content(block).unwrap_or_else(|| Content::Text {
        text: block.get().to_owned(),
    })
}

fn known_raw_content(block: &RawValue) -> Option<Content> {
    let fields: BlockFields = read(Some(block))?;
    let kind = raw_string(fields.kind?)?;
    let text = |raw| text_of(raw);
    Some(match &*kind {
        "text" => Content::Text {
            text: text(fields.text)?,
        },
        "image" => Content::Image {
            data: text(fields.data)?,
            mime_type: text(fields.mime_type)?,
        },
        "audio" => Content::Audio {
            data: text(fields.data)?,
            mime_type: text(fields.mime_type)?,
        },
        "resource" => {
            let resource: BlockFields = read(fields.resource)?;
            Content::Resource {
                uri: text(resource.uri)?,
                mime_type: text(resource.mime_type),
                text: text(resource.text),
                blob: text(resource.blob),
            }
        }
        "resource_link" => {
            let uri = text(fields.uri)?;
            Content::ResourceLink {
                name: text(fields.name).unwrap_or_else(|| uri.clone()),
                uri,
                mime_type: text(fields.mime_type),
            }
        }
        _ => return None,
    })
}

/// A task's status from its wire name.
pub(crate) fn task_status_from_wire(status: &str) -> Option<TaskStatus> {
    Some(match status {
        "working" => TaskStatus::Working,
        "input_required" => TaskStatus::InputRequired,
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "cancelled" | "canceled" => TaskStatus::Cancelled,
        _ => return None,
    })
}

/// A Task object (or a task status notification's params) as an event.
pub(crate) fn task_from_wire(task: &Value) -> Option<CallEvent> {
    Some(CallEvent::Task {
        task_id: task.get("taskId")?.as_str()?.to_owned(),
        status: task_status_from_wire(task.get("status")?.as_str()?)?,
        message: string(task, "statusMessage"),
    })
}

/// A tool from `tools/list`.
pub(crate) fn tool_from_wire(tool: &Value) -> Option<ToolDescription> {
    let text = |key: &str| string(tool, key);
    let task_support = match tool
        .pointer("/execution/taskSupport")
        .and_then(Value::as_str)
    {
        Some("required") => TaskSupport::Required,
        Some("optional") => TaskSupport::Optional,
        _ => TaskSupport::Forbidden,
    };
    Some(ToolDescription {
        name: text("name")?,
        title: text("title"),
        description: text("description"),
        input_schema: tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        output_schema: tool.get("outputSchema").cloned(),
        task_support,
        streams: tool
            .pointer("/annotations/streamingHint")
            .and_then(Value::as_bool)
            == Some(true),
    })
}

/// The string at `key` of a JSON object, if it is one.
fn string(object: &Value, key: &str) -> Option<String> {
    object.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// A value shortened for an error message.
pub(crate) fn clip(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_mcp_content_block_is_typed_and_unknown_ones_are_kept() {
        let blocks = json!([
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "audio", "data": "AA==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "body"}},
            {"type": "resource_link", "uri": "weir://runs/1", "name": "run 1"},
            {"type": "hologram", "depth": 3},
            {"type": "image", "data": "AA=="}
        ]);
        let content = contents_from_wire(Some(blocks));
        assert_eq!(
            content,
            [
                Content::text("hi"),
                Content::Image {
                    data: "AA==".into(),
                    mime_type: "image/png".into()
                },
                Content::Audio {
                    data: "AA==".into(),
                    mime_type: "audio/wav".into()
                },
                Content::Resource {
                    uri: "test://r".into(),
                    mime_type: Some("text/plain".into()),
                    text: Some("body".into()),
                    blob: None
                },
                Content::ResourceLink {
                    uri: "weir://runs/1".into(),
                    name: "run 1".into(),
                    mime_type: None
                },
                Content::text(r#"{"depth":3,"type":"hologram"}"#),
                // A known type short of a field it needs: kept whole, none
                // of its strings taken out.
                Content::text(r#"{"data":"AA==","type":"image"}"#),
            ]
        );
    }

    #[test]
    fn results_and_tools_are_read_leniently_but_not_blindly() {
        let result = result_from_wire(json!({"content": [{"type": "text", "text": "x"}], "isError": true, "structuredContent": {"n": 1}})).unwrap();
        assert!(result.is_error);
        assert_eq!(result.structured, Some(json!({"n": 1})));
        assert!(result_from_wire(json!({"content": "x"})).is_err());
        // Read from the server's text, the same.
        let written = json!({"content": [{"type": "text", "text": "x"}], "isError": true, "structuredContent": {"n": 1},
            "_meta": {meta_key::WEIR_RUN: {"id": "r", "state": "failed", "streamed": 1, "truncated": false}}});
        let raw = |value: &Value| RawValue::from_string(value.to_string()).unwrap();
        let read = result_from_raw(&raw(&written)).unwrap();
        assert_eq!(read, result_from_wire(written).unwrap());
        assert_eq!(read.run.unwrap().state, "failed");
        assert!(result_from_raw(&raw(&json!({"content": "x"}))).is_err());
        assert_eq!(
            result_from_raw(&raw(&json!({"structuredContent": null})))
                .unwrap()
                .structured,
            Some(Value::Null)
        );
        let tool = tool_from_wire(&json!({"name": "t", "execution": {"taskSupport": "required"}, "annotations": {"streamingHint": true}})).unwrap();
        assert_eq!(tool.task_support, TaskSupport::Required);
        assert!(tool.streams);
        assert_eq!(tool.input_schema, json!({"type": "object"}));
        let plain = tool_from_wire(&json!({"name": "p"})).unwrap();
        assert_eq!(plain.task_support, TaskSupport::Forbidden);
    }

    /// A notification's blocks, read from the server's text, are typed as
    /// a result's are; one this client does not know is kept as the
    /// server wrote it (key order, escapes, spacing), not re-encoded.
    #[test]
    fn a_partials_blocks_are_read_from_the_text_the_server_wrote() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).unwrap();
        let blocks = json!([
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "audio", "data": "AA==", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "body"}},
            {"type": "resource_link", "uri": "weir://runs/1", "name": "run 1"},
            {"type": "image", "data": "AA=="}
        ]);
        let params = RawValue::from_string(
            json!({"partialResultToken": "t", "seq": 4, "content": blocks, "extra": [1]})
                .to_string(),
        )
        .unwrap();
        let (token, event) = partial_from_wire(&params).unwrap();
        assert_eq!(token, "t");
        let CallEvent::Partial { seq, content, .. } = event else {
            panic!("{event:?}")
        };
        assert_eq!((seq, content), (4, contents_from_wire(Some(blocks))));
        let written = r#"{"partialResultToken": "t", "seq": 0, "content": [{"type": "hologram", "depth": 3, "label": "caf\u00e9"}, {"type": "text", "text": "caf\u00e9"}], "structuredContent": {"n": 1}}"#;
        let params = RawValue::from_string(written.to_owned()).unwrap();
        let (_, event) = partial_from_wire(&params).unwrap();
        let CallEvent::Partial {
            content,
            structured,
            ..
        } = event
        else {
            panic!("{event:?}")
        };
        assert_eq!(
            content,
            [
                Content::text(r#"{"type": "hologram", "depth": 3, "label": "caf\u00e9"}"#),
                Content::text("café"),
            ]
        );
        assert_eq!(structured, Some(json!({"n": 1})));
        // Text blocks only (read in one pass) type as any other partial's:
        // escapes undone, other fields ignored, and a block short of its
        // text kept as written.
        let (_, event) = partial_from_wire(&raw(r#"{"seq": 1, "content": [{"text": "caf\u00e9", "type": "te\u0078t", "annotations": {"a": 1}}, {"type": "text", "text": "b"}], "partialResultToken": "t"}"#)).unwrap();
        assert!(
            matches!(event, CallEvent::Partial { seq: 1, content, structured: None }
            if content == [Content::text("café"), Content::text("b")])
        );
        let (_, event) = partial_from_wire(&raw(
            r#"{"partialResultToken": "t", "seq": 2, "content": [{"type": "text", "text": "a"}, {"type": "text", "text": 1}]}"#,
        ))
        .unwrap();
        assert!(matches!(event, CallEvent::Partial { content, .. }
            if content == [Content::text("a"), Content::text(r#"{"type": "text", "text": 1}"#)]));
    }

    #[test]
    fn progress_and_log_fields_are_read_leniently() {
        let raw = |text: &str| RawValue::from_string(text.to_owned()).unwrap();
        let params =
            raw(r#"{"progressToken": "p", "progress": 2, "total": "many", "message": "m"}"#);
        let (token, event) = progress_from_wire(&params).unwrap();
        assert_eq!(token, "p");
        assert!(matches!(
            event,
            CallEvent::Progress { progress, total: None, message: Some(m) } if progress == 2.0 && m == "m"
        ));
        assert!(progress_from_wire(&raw(r#"{"progressToken": "p"}"#)).is_none());
        let log = log_from_wire(&raw(r#"{"level": "loud", "data": {"a": 1}}"#)).unwrap();
        assert!(matches!(
            log,
            CallEvent::Log { level: LogLevel::Info, logger: None, data } if data == json!({"a": 1})
        ));
    }
}
