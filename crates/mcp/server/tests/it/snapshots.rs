//! Wire snapshots: one JSON-RPC transcript per method and protocol revision,
//! so that any change to what the server says shows up in review as a diff.
//!
//! Each test is data: the steps a stdio client takes, and the transcript
//! they produce (`→` client to server, `←` server to client; a message is
//! compact JSON when it fits in [`WIDTH`] columns, else broken over lines).
//! `UPDATE_EXPECT=1 cargo test -p weir-mcp --test it snapshots` rewrites
//! them. With cargo test, not nextest: nextest runs each test in a process
//! of its own, and expect-test can only account for the lines an update
//! adds above a later snapshot within one process.
//!
//! Why the transcripts are stable:
//! - A step waits for its response before the next step is sent, and a
//!   request's notifications and its response leave through one channel in
//!   the order the request produced them, so a transcript is in the server's
//!   own order and is not sorted. Only [`Step::Start`] leaves a response
//!   outstanding; whatever arrives later is caught before the closing ping.
//! - What differs between runs is redacted by [`Redactor`]: run (= task) ids
//!   become `<run-N>` in order of first appearance, timestamps `<time>`, the
//!   server's version `<version>`; object keys are sorted.
//! - Progress notifications less than 20 ms apart (by event time) are
//!   coalesced, so the streaming steps pace their items 50 ms apart, and
//!   tasks that must still be working when they are read are long.

use std::sync::Arc;
use std::time::Duration;

use expect_test::{Expect, expect};
use serde_json::{Map, Value, json};
use weir_mcp::{McpServer, ServerConfig};
use weir_runtime::{MemoryLog, Scheduler, SchedulerConfig};

use crate::support::LineClient;

/// Columns a message may take on one line before it is broken over several.
const WIDTH: usize = 100;

/// Fields that hold a point in time (events and runs in Unix ms, tasks in ISO 8601).
const TIME_KEYS: [&str; 6] = [
    "ts",
    "created_ts",
    "updated_ts",
    "finished_ts",
    "createdAt",
    "lastUpdatedAt",
];

/// What the client does next. Params may name `<run-N>`, a run seen earlier
/// in the transcript; it is sent as the real id.
enum Step {
    /// A request; records everything up to its response.
    Request(&'static str, Value),
    /// A request left outstanding; records only the next message.
    Start(&'static str, Value),
    /// A notification: nothing comes back.
    Notify(&'static str, Value),
    /// A line that is not JSON-RPC, and its one answer.
    Raw(&'static str),
    /// A request repeated until its result has this `status`; only the last
    /// exchange is recorded, since how many polls a run takes is timing, not
    /// protocol. Each poll reuses the id, answered by then, so the recorded
    /// ids stay dense; only stateless steps poll, and no session sees reuse.
    Poll(&'static str, Value, &'static str),
}

use Step::{Notify, Poll, Raw, Request, Start};

/// How the client opens, before the recorded steps.
enum Opening {
    /// Nothing: stateless requests, or the handshake itself.
    Bare,
    /// `initialize` with these client capabilities and
    /// `notifications/initialized`, off the record: the handshake has its
    /// own transcript, and a change to it should show up there only.
    Session(Value),
}

/// The fixtures' tools and catalog, as a server of the default configuration.
async fn fixtures_server() -> McpServer {
    let scheduler = Scheduler::start(
        Arc::new(MemoryLog::new()),
        weir_fixtures::fixture_tools(),
        SchedulerConfig::default(),
    )
    .await
    .unwrap();
    McpServer::new(
        scheduler,
        Arc::new(weir_fixtures::FixtureCatalog),
        ServerConfig::default(),
    )
}

/// `params` as a 2026-07-28 request: `_meta` names the revision and carries
/// the client's capabilities, beside whatever `_meta` `params` has.
fn stateless(mut params: Value, capabilities: Value) -> Value {
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = "2026-07-28".into();
    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
    params
}

/// Plays `steps` against a fresh server and compares the transcript with `expect`.
async fn check(opening: Opening, steps: Vec<Step>, expect: Expect) {
    check_on(fixtures_server().await, opening, steps, expect).await;
}

/// [`check`], against `server`: for the few transcripts that need a tool
/// the fixtures do not have.
async fn check_on(server: McpServer, opening: Opening, steps: Vec<Step>, expect: Expect) {
    let mut client = LineClient::over(server);
    if let Opening::Session(capabilities) = opening {
        client.initialize(capabilities).await;
    }
    let mut transcript = Transcript::default();
    let request = |id: i64, method: &str, params: &Value| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut id = 0;
    for step in steps {
        match step {
            Request(method, params) => {
                id += 1;
                let params = transcript.redactor.restore(params);
                transcript.record("→", request(id, method, &params));
                let (notifications, response) = client.call(id, method, params).await;
                for message in notifications.into_iter().chain([response]) {
                    transcript.record("←", message);
                }
            }
            Start(method, params) => {
                id += 1;
                let sent = request(id, method, &transcript.redactor.restore(params));
                client.send(sent.clone()).await;
                transcript.record("→", sent);
                transcript.record("←", client.next().await);
            }
            Notify(method, params) => {
                let params = transcript.redactor.restore(params);
                let sent = json!({"jsonrpc": "2.0", "method": method, "params": params});
                client.send(sent.clone()).await;
                transcript.record("→", sent);
            }
            Raw(line) => {
                client.send_raw(line).await;
                transcript.text.push_str(&format!("→ {line}\n"));
                transcript.record("←", client.next().await);
            }
            Poll(method, params, status) => {
                id += 1;
                let params = transcript.redactor.restore(params);
                let mut attempts = 0;
                let (notifications, response) = loop {
                    let (notifications, response) = client.call(id, method, params.clone()).await;
                    attempts += 1;
                    if response["result"]["status"] == status || attempts == 250 {
                        break (notifications, response);
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                };
                transcript.record("→", request(id, method, &params));
                for message in notifications.into_iter().chain([response]) {
                    transcript.record("←", message);
                }
            }
        }
    }
    // Whatever the server sends that no step waited for (a response owed to
    // no one, a late notification) arrives before this ping's answer, and
    // so lands in the transcript.
    let (stray, _) = client.call(id + 1, "ping", json!({})).await;
    for message in stray {
        transcript.record("←", message);
    }
    expect.assert_eq(&transcript.text);
}

#[derive(Default)]
struct Transcript {
    redactor: Redactor,
    text: String,
}

impl Transcript {
    fn record(&mut self, arrow: &str, message: Value) {
        self.text.push_str(arrow);
        self.text.push(' ');
        render(&self.redactor.redact(message), 2, &mut self.text);
        self.text.push('\n');
    }
}

/// Replaces what changes from run to run with stable names.
#[derive(Default)]
struct Redactor {
    /// Run ids in order of first appearance: `<run-1>` is `runs[0]`.
    runs: Vec<String>,
}

impl Redactor {
    fn redact(&mut self, value: Value) -> Value {
        match value {
            Value::String(text) => Value::String(self.redact_text(&text)),
            Value::Array(items) => items.into_iter().map(|item| self.redact(item)).collect(),
            Value::Object(object) => {
                // Sorted whatever serde_json's map is (preserve_order keeps
                // insertion order), so the snapshot does not hang on features.
                let mut entries: Vec<(String, Value)> = object.into_iter().collect();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                let redacted = entries.into_iter().map(|(key, value)| {
                    // A point in time is a number or a string; an object
                    // under such a key is a schema's property, kept.
                    let value = if TIME_KEYS.contains(&key.as_str())
                        && (value.is_number() || value.is_string())
                    {
                        Value::from("<time>")
                    } else {
                        self.redact(value)
                    };
                    (key, value)
                });
                Value::Object(redacted.collect::<Map<String, Value>>())
            }
            other => other,
        }
    }

    fn redact_text(&mut self, text: &str) -> String {
        if text == env!("CARGO_PKG_VERSION") {
            return "<version>".into();
        }
        // weir's own tools and `weir://runs/…` resources carry JSON as text.
        if text.starts_with(['{', '['])
            && let Ok(inner) = serde_json::from_str::<Value>(text)
        {
            let inner = self.redact(inner);
            let rendered = if text.contains('\n') {
                serde_json::to_string_pretty(&inner)
            } else {
                serde_json::to_string(&inner)
            };
            return rendered.expect("JSON values serialize");
        }
        // A run id is a v7 UUID in its simple form: a word of 32 hex digits.
        let is_run_id = |word: &str| {
            word.len() == 32
                && word
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        text.split_inclusive(|c: char| !c.is_ascii_alphanumeric())
            .map(|piece| {
                let word = piece.trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
                if !is_run_id(word) {
                    return piece.to_owned();
                }
                let n = match self.runs.iter().position(|run| run == word) {
                    Some(n) => n,
                    None => {
                        self.runs.push(word.to_owned());
                        self.runs.len() - 1
                    }
                };
                format!("<run-{}>{}", n + 1, &piece[word.len()..])
            })
            .collect()
    }

    /// `value` with each `<run-N>` replaced by the id it stands for.
    fn restore(&self, value: Value) -> Value {
        let mut text = value.to_string();
        for (n, run) in self.runs.iter().enumerate() {
            text = text.replace(&format!("<run-{}>", n + 1), run);
        }
        serde_json::from_str(&text).expect("still JSON")
    }
}

/// Appends `value` to `out`: compact if the line stays within [`WIDTH`]
/// columns, else one member per line, indented two more than `indent`.
fn render(value: &Value, indent: usize, out: &mut String) {
    let column = out.len() - out.rfind('\n').map_or(0, |newline| newline + 1);
    let compact = compact(value);
    let members: Vec<(Option<&String>, &Value)> = match value {
        Value::Object(object) => object.iter().map(|(k, v)| (Some(k), v)).collect(),
        Value::Array(items) => items.iter().map(|v| (None, v)).collect(),
        _ => Vec::new(),
    };
    if column + compact.chars().count() <= WIDTH || members.is_empty() {
        out.push_str(&compact);
        return;
    }
    let (open, close) = if value.is_object() {
        ('{', '}')
    } else {
        ('[', ']')
    };
    out.push(open);
    let inner = indent + 2;
    for (i, (key, member)) in members.iter().enumerate() {
        out.push('\n');
        out.push_str(&" ".repeat(inner));
        if let Some(key) = key {
            out.push_str(&Value::from(key.as_str()).to_string());
            out.push_str(": ");
        }
        render(member, inner, out);
        if i + 1 < members.len() {
            out.push(',');
        }
    }
    out.push('\n');
    out.push_str(&" ".repeat(indent));
    out.push(close);
}

/// `value` on one line, spaced as people write JSON: `{"a": 1, "b": [2, 3]}`.
fn compact(value: &Value) -> String {
    match value {
        Value::Object(object) => {
            let members: Vec<String> = object
                .iter()
                .map(|(key, member)| format!("{}: {}", Value::from(key.as_str()), compact(member)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(compact).collect();
            format!("[{}]", items.join(", "))
        }
        scalar => scalar.to_string(),
    }
}

// ---- 2025-11-25: the session revision --------------------------------------

#[tokio::test]
async fn session_initialize() {
    check(
        Opening::Bare,
        vec![
            Request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
            ),
            Notify("notifications/initialized", json!({})),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "initialize",
                "params": {
                  "capabilities": {},
                  "clientInfo": {"name": "t", "version": "1"},
                  "protocolVersion": "2025-11-25"
                }
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "capabilities": {
                    "completions": {},
                    "logging": {},
                    "prompts": {"listChanged": false},
                    "resources": {"listChanged": false, "subscribe": true},
                    "tasks": {"cancel": {}, "list": {}, "requests": {"tools": {"call": {}}}},
                    "tools": {"listChanged": false}
                  },
                  "protocolVersion": "2025-11-25",
                  "serverInfo": {"name": "weir", "version": "<version>"}
                }
              }
            → {"jsonrpc": "2.0", "method": "notifications/initialized", "params": {}}
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_ping() {
    check(
        Opening::Session(json!({})),
        vec![Request("ping", json!({}))],
        expect![[r#"
            → {"id": 1, "jsonrpc": "2.0", "method": "ping", "params": {}}
            ← {"id": 1, "jsonrpc": "2.0", "result": {}}
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_tools_list() {
    check(
        Opening::Session(json!({})),
        vec![Request("tools/list", json!({}))],
        expect![[r##"
            → {"id": 1, "jsonrpc": "2.0", "method": "tools/list", "params": {}}
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "tools": [
                    {
                      "description": "Tool with JSON Schema 2020-12 features",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {
                        "$defs": {
                          "address": {
                            "$anchor": "addressDef",
                            "properties": {"city": {"type": "string"}, "street": {"type": "string"}},
                            "type": "object"
                          }
                        },
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "additionalProperties": false,
                        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                        "else": {"required": ["email"]},
                        "if": {
                          "properties": {"contactMethod": {"const": "phone"}},
                          "required": ["contactMethod"]
                        },
                        "properties": {
                          "address": {"$ref": "#/$defs/address"},
                          "contactMethod": {"enum": ["phone", "email"], "type": "string"},
                          "email": {"type": "string"},
                          "name": {"type": "string"},
                          "phone": {"type": "string"}
                        },
                        "then": {"required": ["phone"]},
                        "type": "object"
                      },
                      "name": "json_schema_2020_12_tool"
                    },
                    {
                      "annotations": {"streamingHint": true},
                      "description": "Streams `count` partial results of `size` bytes each, `interval_ms` apart, as text blocks or structured items, reporting progress; a fixture for tests and benchmarks.",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {
                        "additionalProperties": false,
                        "properties": {
                          "count": {
                            "default": 10,
                            "description": "How many items to stream.",
                            "maximum": 10000000,
                            "minimum": 0,
                            "type": "integer"
                          },
                          "interval_ms": {
                            "default": 0,
                            "description": "Pause between items, in milliseconds.",
                            "maximum": 60000,
                            "minimum": 0,
                            "type": "integer"
                          },
                          "mode": {
                            "default": "text",
                            "description": "`text`: each item is a text content block; `items`: each is a structured item {i, data}.",
                            "enum": ["text", "items"],
                            "type": "string"
                          },
                          "size": {
                            "default": 100,
                            "description": "Bytes per item: the text block's length, or the length of the item's `data`.",
                            "maximum": 1048576,
                            "minimum": 0,
                            "type": "integer"
                          }
                        },
                        "type": "object"
                      },
                      "name": "stream",
                      "outputSchema": {
                        "properties": {"count": {"description": "Items streamed.", "type": "integer"}},
                        "required": ["count"],
                        "type": "object"
                      }
                    },
                    {
                      "description": "Returns one WAV audio block, mime type audio/wav (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_audio_content"
                    },
                    {
                      "description": "Asks the user for a username and an email (elicitation/create) and returns the answer (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {
                        "properties": {
                          "message": {"type": "string"},
                          "timeout_ms": {
                            "description": "How long to wait for the client's answer, in milliseconds (default 600000).",
                            "minimum": 1,
                            "type": "integer"
                          }
                        },
                        "required": ["message"],
                        "type": "object"
                      },
                      "name": "test_elicitation"
                    },
                    {
                      "description": "Elicits a form whose fields all carry defaults (SEP-1034, conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_elicitation_sep1034_defaults"
                    },
                    {
                      "description": "Elicits a form with every enum style: untitled, titled, legacy enumNames, multi-select (SEP-1330, conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_elicitation_sep1330_enums"
                    },
                    {
                      "description": "Returns one embedded text resource, test://embedded-resource (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_embedded_resource"
                    },
                    {
                      "description": "Always fails, so the result has isError: true (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_error_handling"
                    },
                    {
                      "description": "Returns one PNG image block (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_image_content"
                    },
                    {
                      "description": "Returns a text block, a PNG image and an embedded JSON resource (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_multiple_content_types"
                    },
                    {
                      "description": "Asks the client's model to complete `prompt` (sampling/createMessage) and returns the answer (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {
                        "properties": {
                          "prompt": {"type": "string"},
                          "timeout_ms": {
                            "description": "How long to wait for the client's answer, in milliseconds (default 600000).",
                            "minimum": 1,
                            "type": "integer"
                          }
                        },
                        "required": ["prompt"],
                        "type": "object"
                      },
                      "name": "test_sampling"
                    },
                    {
                      "description": "Returns one text block (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_simple_text"
                    },
                    {
                      "description": "Sends three info log messages about 50 ms apart, then returns text (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_tool_with_logging"
                    },
                    {
                      "description": "Reports progress 0, 50 and 100 of 100 about 50 ms apart, then returns text (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_tool_with_progress"
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "List recent runs (tool calls), newest first, with their state.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "limit": {"maximum": 1000, "minimum": 1, "type": "integer"},
                          "state": {
                            "enum": ["pending", "working", "completed", "failed", "canceled"],
                            "type": "string"
                          },
                          "tool": {"type": "string"}
                        },
                        "required": [],
                        "type": "object"
                      },
                      "name": "runs_list",
                      "outputSchema": {
                        "properties": {"runs": {"items": {"type": "object"}, "type": "array"}},
                        "required": ["runs"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "One run: tool, arguments (secrets redacted), state, timing.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"}
                        },
                        "required": ["run_id"],
                        "type": "object"
                      },
                      "name": "runs_get",
                      "outputSchema": {
                        "properties": {"run": {"type": "object"}},
                        "required": ["run"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "A page of a run's events from seq `from` (continue at next_seq).",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "from": {"minimum": 0, "type": "integer"},
                          "limit": {"maximum": 1000, "minimum": 1, "type": "integer"},
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"}
                        },
                        "required": ["run_id"],
                        "type": "object"
                      },
                      "name": "runs_events",
                      "outputSchema": {
                        "properties": {
                          "done": {"type": "boolean"},
                          "events": {"items": {"type": "object"}, "type": "array"},
                          "next_seq": {"type": "integer"},
                          "run_id": {"type": "string"},
                          "state": {"type": "string"}
                        },
                        "required": ["done", "events", "next_seq", "run_id", "state"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": true,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": false
                      },
                      "description": "Cancel a run that is still going; it ends as canceled.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "reason": {"type": "string"},
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"}
                        },
                        "required": ["run_id"],
                        "type": "object"
                      },
                      "name": "runs_cancel",
                      "outputSchema": {
                        "properties": {"cancelled": {"type": "boolean"}, "run_id": {"type": "string"}},
                        "required": ["cancelled", "run_id"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "Read a page of bytes of a file a run produced.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "length": {"maximum": 262144, "minimum": 1, "type": "integer"},
                          "name": {"type": "string"},
                          "offset": {"minimum": 0, "type": "integer"},
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"}
                        },
                        "required": ["run_id", "name"],
                        "type": "object"
                      },
                      "name": "runs_artifact",
                      "outputSchema": {
                        "properties": {
                          "artifact": {"type": "object"},
                          "data": {"type": "object"},
                          "done": {"type": "boolean"},
                          "next_offset": {"type": "integer"},
                          "offset": {"type": "integer"}
                        },
                        "required": ["artifact", "data", "done", "next_offset", "offset"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "Wait for a run to end and return its result as its tool would have; if it has not ended within timeout_s, says so: call again, or runs_cancel.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"},
                          "timeout_s": {
                            "description": "Seconds (default 30).",
                            "maximum": 600,
                            "minimum": 0,
                            "type": "number"
                          }
                        },
                        "required": ["run_id"],
                        "type": "object"
                      },
                      "name": "runs_wait"
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "weir's version, protocol revisions, store, streaming capabilities and which tools stream.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {"properties": {}, "required": [], "type": "object"},
                      "name": "get_status",
                      "outputSchema": {
                        "properties": {
                          "name": {"type": "string"},
                          "protocolVersions": {"items": {"type": "string"}, "type": "array"},
                          "queued": {"type": "integer"},
                          "store": {"type": "string"},
                          "streaming": {"type": "object"},
                          "streamingTools": {"items": {"type": "string"}, "type": "array"},
                          "version": {"type": "string"}
                        },
                        "required": [
                          "name",
                          "protocolVersions",
                          "queued",
                          "store",
                          "streaming",
                          "streamingTools",
                          "version"
                        ],
                        "type": "object"
                      }
                    }
                  ]
                }
              }
        "##]],
    )
    .await;
}

#[tokio::test]
async fn session_tools_call_with_a_progress_token() {
    check(
        Opening::Session(json!({})),
        vec![Request(
            "tools/call",
            json!({"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "p1"}}),
        )],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"_meta": {"progressToken": "p1"}, "arguments": {}, "name": "test_tool_with_progress"}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {
                  "message": "Completed step 0 of 100",
                  "progress": 0.0,
                  "progressToken": "p1",
                  "total": 100.0
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {
                  "message": "Completed step 50 of 100",
                  "progress": 50.0,
                  "progressToken": "p1",
                  "total": 100.0
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {
                  "message": "Completed step 100 of 100",
                  "progress": 100.0,
                  "progressToken": "p1",
                  "total": 100.0
                }
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {"content": [{"text": "Tool with progress executed successfully", "type": "text"}]}
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_tools_call_with_partial_results() {
    check(
        Opening::Session(json!({"partialResults": {}})),
        vec![Request(
            "tools/call",
            json!({"name": "stream", "arguments": {"count": 3, "size": 12, "interval_ms": 50}, "_meta": {"progressToken": "p1", "partialResultToken": "r1"}}),
        )],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {
                  "_meta": {"partialResultToken": "r1", "progressToken": "p1"},
                  "arguments": {"count": 3, "interval_ms": 50, "size": 12},
                  "name": "stream"
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/tools/partial_result",
                "params": {
                  "content": [{"text": "00000000:xxx", "type": "text"}],
                  "partialResultToken": "r1",
                  "seq": 0
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progress": 1.0, "progressToken": "p1", "total": 3.0}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/tools/partial_result",
                "params": {
                  "content": [{"text": "00000001:xxx", "type": "text"}],
                  "partialResultToken": "r1",
                  "seq": 1
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progress": 2.0, "progressToken": "p1", "total": 3.0}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/tools/partial_result",
                "params": {
                  "content": [{"text": "00000002:xxx", "type": "text"}],
                  "partialResultToken": "r1",
                  "seq": 2
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progress": 3.0, "progressToken": "p1", "total": 3.0}
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "content": [
                    {"text": "00000000:xxx", "type": "text"},
                    {"text": "00000001:xxx", "type": "text"},
                    {"text": "00000002:xxx", "type": "text"},
                    {"text": "streamed 3 items", "type": "text"}
                  ],
                  "structuredContent": {"count": 3}
                }
              }
        "#]],
    )
    .await;
}

/// Only a progress token: the first item is counted as progress (with its
/// text as the message) until the tool reports progress of its own, which
/// then is what the client gets; a value not above the last one sent is not
/// sent (the fixture's own `1` after the counted `1`).
#[tokio::test]
async fn session_tools_call_with_only_a_progress_token() {
    check(
        Opening::Session(json!({})),
        vec![Request(
            "tools/call",
            json!({"name": "stream", "arguments": {"count": 3, "size": 12, "interval_ms": 50}, "_meta": {"progressToken": "p1"}}),
        )],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {
                  "_meta": {"progressToken": "p1"},
                  "arguments": {"count": 3, "interval_ms": 50, "size": 12},
                  "name": "stream"
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"message": "00000000:xxx", "progress": 1.0, "progressToken": "p1", "total": 3.0}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progress": 2.0, "progressToken": "p1", "total": 3.0}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progress": 3.0, "progressToken": "p1", "total": 3.0}
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "content": [
                    {"text": "00000000:xxx", "type": "text"},
                    {"text": "00000001:xxx", "type": "text"},
                    {"text": "00000002:xxx", "type": "text"},
                    {"text": "streamed 3 items", "type": "text"}
                  ],
                  "structuredContent": {"count": 3}
                }
              }
        "#]],
    )
    .await;
}

/// A program-like tool (the test suite's `program`, a stand-in for
/// `execute_code`) that wrote to stdout and stderr: the final result has
/// one block per stretch of a stream, each saying its stream since there
/// are two, then the tool's summary; its structured result carries each
/// stream's text (its text fields), whether it was cut, and the run.
#[tokio::test]
async fn session_tools_call_of_a_program_writing_two_streams() {
    let mut tools = weir_fixtures::fixture_tools();
    tools.push(Arc::new(crate::support::ProgramTool));
    let scheduler = Scheduler::start(
        Arc::new(MemoryLog::new()),
        tools,
        SchedulerConfig::default(),
    )
    .await
    .unwrap();
    let server = McpServer::new(
        scheduler,
        Arc::new(weir_fixtures::FixtureCatalog),
        ServerConfig::default(),
    );
    check_on(
        server,
        Opening::Session(json!({})),
        vec![Request(
            "tools/call",
            json!({"name": "program", "arguments": {"writes": [
                ["stdout", "one\n"], ["stdout", "two\n"], ["stderr", "careful\n"], ["stdout", "three\n"]
            ]}}),
        )],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {
                  "arguments": {
                    "writes": [
                      ["stdout", "one\n"],
                      ["stdout", "two\n"],
                      ["stderr", "careful\n"],
                      ["stdout", "three\n"]
                    ]
                  },
                  "name": "program"
                }
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "content": [
                    {"text": "[stdout]\none\ntwo\n", "type": "text"},
                    {"text": "[stderr]\ncareful\n", "type": "text"},
                    {"text": "[stdout]\nthree\n", "type": "text"},
                    {"text": "[exit code 0]", "type": "text"}
                  ],
                  "structuredContent": {
                    "exit_code": 0,
                    "output_truncated": false,
                    "output_uri": "weir://runs/<run-1>",
                    "stderr": "careful\n",
                    "stdout": "one\ntwo\nthree\n"
                  }
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_tools_call_of_a_failing_tool() {
    check(
        Opening::Session(json!({})),
        vec![Request(
            "tools/call",
            json!({"name": "test_error_handling", "arguments": {}}),
        )],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": {}, "name": "test_error_handling"}
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "content": [{"text": "This tool intentionally returns an error for testing", "type": "text"}],
                  "isError": true
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_tools_call_of_an_unknown_tool() {
    check(
        Opening::Session(json!({})),
        vec![Request(
            "tools/call",
            json!({"name": "nope", "arguments": {}}),
        )],
        expect![[r#"
            → {"id": 1, "jsonrpc": "2.0", "method": "tools/call", "params": {"arguments": {}, "name": "nope"}}
            ← {
                "error": {
                  "code": -32602,
                  "message": "unknown tool \"nope\"; available tools: json_schema_2020_12_tool, stream, test_audio_content, test_elicitation, test_elicitation_sep1034_defaults, test_elicitation_sep1330_enums, test_embedded_resource, test_error_handling, test_image_content, test_multiple_content_types, test_sampling, test_simple_text, test_tool_with_logging, test_tool_with_progress"
                },
                "id": 1,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_tools_call_with_bad_arguments() {
    check(
        Opening::Session(json!({})),
        vec![
            // The schema refuses it: a tool error the model can correct.
            Request(
                "tools/call",
                json!({"name": "stream", "arguments": {"count": "many"}}),
            ),
            // Not even an object: the request itself is wrong.
            Request("tools/call", json!({"name": "stream", "arguments": [1]})),
            Request("tools/call", json!({"arguments": {}})),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": {"count": "many"}, "name": "stream"}
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "content": [
                    {
                      "text": "invalid arguments: arguments.count must be an integer, got a string",
                      "type": "text"
                    }
                  ],
                  "isError": true
                }
              }
            → {
                "id": 2,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": [1], "name": "stream"}
              }
            ← {
                "error": {"code": -32602, "message": "\"arguments\" must be an object"},
                "id": 2,
                "jsonrpc": "2.0"
              }
            → {"id": 3, "jsonrpc": "2.0", "method": "tools/call", "params": {"arguments": {}}}
            ← {
                "error": {"code": -32602, "message": "missing string field \"name\" in params"},
                "id": 3,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_tools_call_as_a_task_then_tasks_result() {
    check(
        Opening::Session(json!({"tasks": {}})),
        vec![
            Request(
                "tools/call",
                json!({"name": "stream", "arguments": {"count": 3, "size": 12, "interval_ms": 50}, "task": {"ttl": 60000}}),
            ),
            // Waits for the run to end.
            Request("tasks/result", json!({"taskId": "<run-1>"})),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {
                  "arguments": {"count": 3, "interval_ms": 50, "size": 12},
                  "name": "stream",
                  "task": {"ttl": 60000}
                }
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "task": {
                    "createdAt": "<time>",
                    "lastUpdatedAt": "<time>",
                    "pollInterval": 500,
                    "status": "working",
                    "taskId": "<run-1>",
                    "ttl": 604800000
                  }
                }
              }
            → {"id": 2, "jsonrpc": "2.0", "method": "tasks/result", "params": {"taskId": "<run-1>"}}
            ← {
                "id": 2,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/related-task": {"taskId": "<run-1>"}},
                  "content": [
                    {"text": "00000000:xxx", "type": "text"},
                    {"text": "00000001:xxx", "type": "text"},
                    {"text": "00000002:xxx", "type": "text"},
                    {"text": "streamed 3 items", "type": "text"}
                  ],
                  "structuredContent": {"count": 3}
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_tasks_get() {
    check(
        Opening::Session(json!({"tasks": {}})),
        vec![
            Request(
                "tools/call",
                json!({"name": "stream", "arguments": {"count": 1000, "interval_ms": 50}, "task": {}}),
            ),
            Request("tasks/get", json!({"taskId": "<run-1>"})),
            Request("tasks/get", json!({"taskId": "nope"})),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": {"count": 1000, "interval_ms": 50}, "name": "stream", "task": {}}
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "task": {
                    "createdAt": "<time>",
                    "lastUpdatedAt": "<time>",
                    "pollInterval": 500,
                    "status": "working",
                    "taskId": "<run-1>",
                    "ttl": 604800000
                  }
                }
              }
            → {"id": 2, "jsonrpc": "2.0", "method": "tasks/get", "params": {"taskId": "<run-1>"}}
            ← {
                "id": 2,
                "jsonrpc": "2.0",
                "result": {
                  "createdAt": "<time>",
                  "lastUpdatedAt": "<time>",
                  "pollInterval": 500,
                  "status": "working",
                  "taskId": "<run-1>",
                  "ttl": 604800000
                }
              }
            → {"id": 3, "jsonrpc": "2.0", "method": "tasks/get", "params": {"taskId": "nope"}}
            ← {
                "error": {"code": -32602, "message": "unknown task \"nope\": list runs with the runs_list tool"},
                "id": 3,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_tasks_list() {
    check(
        Opening::Session(json!({"tasks": {}})),
        vec![
            Request(
                "tools/call",
                json!({"name": "stream", "arguments": {"count": 1000, "interval_ms": 50}, "task": {}}),
            ),
            Request("tasks/list", json!({})),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": {"count": 1000, "interval_ms": 50}, "name": "stream", "task": {}}
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "task": {
                    "createdAt": "<time>",
                    "lastUpdatedAt": "<time>",
                    "pollInterval": 500,
                    "status": "working",
                    "taskId": "<run-1>",
                    "ttl": 604800000
                  }
                }
              }
            → {"id": 2, "jsonrpc": "2.0", "method": "tasks/list", "params": {}}
            ← {
                "id": 2,
                "jsonrpc": "2.0",
                "result": {
                  "tasks": [
                    {
                      "createdAt": "<time>",
                      "lastUpdatedAt": "<time>",
                      "pollInterval": 500,
                      "status": "working",
                      "taskId": "<run-1>",
                      "ttl": 604800000
                    }
                  ]
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_tasks_cancel() {
    check(
        Opening::Session(json!({"tasks": {}})),
        vec![
            Request(
                "tools/call",
                json!({"name": "stream", "arguments": {"count": 1000, "interval_ms": 50}, "task": {}}),
            ),
            // Answers once the cancellation is in the run's log.
            Request("tasks/cancel", json!({"taskId": "<run-1>"})),
            Request("tasks/cancel", json!({"taskId": "<run-1>"})),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": {"count": 1000, "interval_ms": 50}, "name": "stream", "task": {}}
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "task": {
                    "createdAt": "<time>",
                    "lastUpdatedAt": "<time>",
                    "pollInterval": 500,
                    "status": "working",
                    "taskId": "<run-1>",
                    "ttl": 604800000
                  }
                }
              }
            → {"id": 2, "jsonrpc": "2.0", "method": "tasks/cancel", "params": {"taskId": "<run-1>"}}
            ← {
                "id": 2,
                "jsonrpc": "2.0",
                "result": {
                  "createdAt": "<time>",
                  "lastUpdatedAt": "<time>",
                  "pollInterval": 500,
                  "status": "cancelled",
                  "taskId": "<run-1>",
                  "ttl": 604800000
                }
              }
            → {"id": 3, "jsonrpc": "2.0", "method": "tasks/cancel", "params": {"taskId": "<run-1>"}}
            ← {
                "error": {
                  "code": -32602,
                  "message": "task <run-1> has already ended (canceled); it cannot be cancelled"
                },
                "id": 3,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_resources_list() {
    check(
        Opening::Session(json!({})),
        vec![Request("resources/list", json!({}))],
        expect![[r#"
            → {"id": 1, "jsonrpc": "2.0", "method": "resources/list", "params": {}}
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "resources": [
                    {
                      "description": "A static text resource (conformance fixture).",
                      "mimeType": "text/plain",
                      "name": "static-text",
                      "uri": "test://static-text"
                    },
                    {
                      "description": "A static binary resource, a 1x1 PNG (conformance fixture).",
                      "mimeType": "image/png",
                      "name": "static-binary",
                      "uri": "test://static-binary"
                    },
                    {
                      "description": "A resource to subscribe to and unsubscribe from (conformance fixture).",
                      "mimeType": "text/plain",
                      "name": "watched-resource",
                      "uri": "test://watched-resource"
                    }
                  ]
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_resources_read_of_a_run() {
    check(
        Opening::Session(json!({})),
        vec![
            Request(
                "tools/call",
                json!({"name": "test_simple_text", "arguments": {}}),
            ),
            // The call's result carries no run id; the run list does.
            Request("tools/call", json!({"name": "runs_list", "arguments": {}})),
            Request("resources/read", json!({"uri": "weir://runs/<run-1>"})),
            Request("resources/read", json!({"uri": "weir://runs/nope"})),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": {}, "name": "test_simple_text"}
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {"content": [{"text": "This is a simple text response for testing.", "type": "text"}]}
              }
            → {
                "id": 2,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": {}, "name": "runs_list"}
              }
            ← {
                "id": 2,
                "jsonrpc": "2.0",
                "result": {
                  "content": [
                    {
                      "text": "{\n  \"runs\": [\n    {\n      \"arguments\": {},\n      \"client\": \"t/1\",\n      \"created_ts\": \"<time>\",\n      \"events\": 2,\n      \"finished_ts\": \"<time>\",\n      \"node\": \"local\",\n      \"run_id\": \"<run-1>\",\n      \"state\": \"completed\",\n      \"tool\": \"test_simple_text\",\n      \"updated_ts\": \"<time>\"\n    }\n  ]\n}",
                      "type": "text"
                    }
                  ],
                  "structuredContent": {
                    "runs": [
                      {
                        "arguments": {},
                        "client": "t/1",
                        "created_ts": "<time>",
                        "events": 2,
                        "finished_ts": "<time>",
                        "node": "local",
                        "run_id": "<run-1>",
                        "state": "completed",
                        "tool": "test_simple_text",
                        "updated_ts": "<time>"
                      }
                    ]
                  }
                }
              }
            → {
                "id": 3,
                "jsonrpc": "2.0",
                "method": "resources/read",
                "params": {"uri": "weir://runs/<run-1>"}
              }
            ← {
                "id": 3,
                "jsonrpc": "2.0",
                "result": {
                  "contents": [
                    {
                      "mimeType": "application/json",
                      "text": "{\"events\":[{\"arguments\":{},\"node\":\"local\",\"run_id\":\"<run-1>\",\"seq\":0,\"tool\":\"test_simple_text\",\"ts\":\"<time>\",\"type\":\"started\"},{\"content\":[{\"text\":\"This is a simple text response for testing.\",\"type\":\"text\"}],\"run_id\":\"<run-1>\",\"seq\":1,\"ts\":\"<time>\",\"type\":\"completed\"}],\"run\":{\"arguments\":{},\"client\":\"t/1\",\"created_ts\":\"<time>\",\"events\":2,\"finished_ts\":\"<time>\",\"node\":\"local\",\"run_id\":\"<run-1>\",\"state\":\"completed\",\"tool\":\"test_simple_text\",\"updated_ts\":\"<time>\"}}",
                      "uri": "weir://runs/<run-1>"
                    }
                  ]
                }
              }
            → {"id": 4, "jsonrpc": "2.0", "method": "resources/read", "params": {"uri": "weir://runs/nope"}}
            ← {
                "error": {
                  "code": -32002,
                  "data": {"uri": "weir://runs/nope"},
                  "message": "resource not found: weir://runs/nope"
                },
                "id": 4,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_prompts_list() {
    check(
        Opening::Session(json!({})),
        vec![Request("prompts/list", json!({}))],
        expect![[r#"
            → {"id": 1, "jsonrpc": "2.0", "method": "prompts/list", "params": {}}
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "prompts": [
                    {
                      "description": "A prompt without arguments (conformance fixture).",
                      "name": "test_simple_prompt"
                    },
                    {
                      "arguments": [
                        {"description": "First test argument", "name": "arg1", "required": true},
                        {"description": "Second test argument", "name": "arg2", "required": true}
                      ],
                      "description": "A prompt with two required arguments (conformance fixture).",
                      "name": "test_prompt_with_arguments"
                    },
                    {
                      "arguments": [
                        {"description": "URI of the resource to embed", "name": "resourceUri", "required": true}
                      ],
                      "description": "A prompt that embeds the resource it is given (conformance fixture).",
                      "name": "test_prompt_with_embedded_resource"
                    },
                    {
                      "description": "A prompt with an image (conformance fixture).",
                      "name": "test_prompt_with_image"
                    }
                  ]
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_logging_set_level_then_a_tool_that_logs() {
    check(
        Opening::Session(json!({})),
        vec![
            Request("logging/setLevel", json!({"level": "info"})),
            Request(
                "tools/call",
                json!({"name": "test_tool_with_logging", "arguments": {}}),
            ),
            Request("logging/setLevel", json!({"level": "loud"})),
        ],
        expect![[r#"
            → {"id": 1, "jsonrpc": "2.0", "method": "logging/setLevel", "params": {"level": "info"}}
            ← {"id": 1, "jsonrpc": "2.0", "result": {}}
            → {
                "id": 2,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": {}, "name": "test_tool_with_logging"}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"data": "Tool execution started", "level": "info", "logger": "weir"}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"data": "Tool processing data", "level": "info", "logger": "weir"}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"data": "Tool execution completed", "level": "info", "logger": "weir"}
              }
            ← {
                "id": 2,
                "jsonrpc": "2.0",
                "result": {"content": [{"text": "Tool with logging executed successfully", "type": "text"}]}
              }
            → {"id": 3, "jsonrpc": "2.0", "method": "logging/setLevel", "params": {"level": "loud"}}
            ← {
                "error": {
                  "code": -32602,
                  "message": "logging/setLevel needs \"level\": one of debug, info, notice, warning, error, critical, alert, emergency"
                },
                "id": 3,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_notifications_cancelled() {
    check(
        Opening::Session(json!({"sampling": {}})),
        vec![
            // The tool asks the client and waits: a point where the run is
            // certainly going, whatever the machine's pace.
            Start(
                "tools/call",
                json!({"name": "test_sampling", "arguments": {"prompt": "2+2?"}}),
            ),
            Notify(
                "notifications/cancelled",
                json!({"requestId": 1, "reason": "user pressed stop"}),
            ),
            // Request 1 is owed no response.
            Request("ping", json!({})),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {"arguments": {"prompt": "2+2?"}, "name": "test_sampling"}
              }
            ← {
                "id": "weir-1",
                "jsonrpc": "2.0",
                "method": "sampling/createMessage",
                "params": {
                  "maxTokens": 100,
                  "messages": [{"content": {"text": "2+2?", "type": "text"}, "role": "user"}]
                }
              }
            → {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"reason": "user pressed stop", "requestId": 1}
              }
            → {"id": 2, "jsonrpc": "2.0", "method": "ping", "params": {}}
            ← {"id": 2, "jsonrpc": "2.0", "result": {}}
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_unknown_method() {
    check(
        Opening::Session(json!({})),
        vec![Request("tools/frobnicate", json!({}))],
        expect![[r#"
            → {"id": 1, "jsonrpc": "2.0", "method": "tools/frobnicate", "params": {}}
            ← {
                "error": {
                  "code": -32601,
                  "message": "unknown method \"tools/frobnicate\"; see tools/list, resources/list and prompts/list for what this server offers"
                },
                "id": 1,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn session_parse_error() {
    check(
        Opening::Session(json!({})),
        vec![Raw("{this is not json")],
        expect![[r#"
            → {this is not json
            ← {
                "error": {"code": -32700, "message": "invalid JSON: key must be a string at line 1 column 2"},
                "id": null,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}

// ---- 2026-07-28: the stateless revision ------------------------------------

#[tokio::test]
async fn stateless_server_discover() {
    check(
        Opening::Bare,
        vec![Request("server/discover", stateless(json!({}), json!({})))],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "server/discover",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  }
                }
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "cacheScope": "private",
                  "capabilities": {
                    "completions": {},
                    "extensions": {"io.modelcontextprotocol/tasks": {}},
                    "logging": {},
                    "prompts": {"listChanged": false},
                    "resources": {"listChanged": false, "subscribe": true},
                    "tools": {"listChanged": false}
                  },
                  "resultType": "complete",
                  "supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
                  "ttlMs": 0
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn stateless_tools_list() {
    check(
        Opening::Bare,
        vec![Request("tools/list", stateless(json!({}), json!({})))],
        expect![[r##"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/list",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  }
                }
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "cacheScope": "private",
                  "resultType": "complete",
                  "tools": [
                    {
                      "description": "Tool with JSON Schema 2020-12 features",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {
                        "$defs": {
                          "address": {
                            "$anchor": "addressDef",
                            "properties": {"city": {"type": "string"}, "street": {"type": "string"}},
                            "type": "object"
                          }
                        },
                        "$schema": "https://json-schema.org/draft/2020-12/schema",
                        "additionalProperties": false,
                        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                        "else": {"required": ["email"]},
                        "if": {
                          "properties": {"contactMethod": {"const": "phone"}},
                          "required": ["contactMethod"]
                        },
                        "properties": {
                          "address": {"$ref": "#/$defs/address"},
                          "contactMethod": {"enum": ["phone", "email"], "type": "string"},
                          "email": {"type": "string"},
                          "name": {"type": "string"},
                          "phone": {"type": "string"}
                        },
                        "then": {"required": ["phone"]},
                        "type": "object"
                      },
                      "name": "json_schema_2020_12_tool"
                    },
                    {
                      "annotations": {"streamingHint": true},
                      "description": "Streams `count` partial results of `size` bytes each, `interval_ms` apart, as text blocks or structured items, reporting progress; a fixture for tests and benchmarks.",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {
                        "additionalProperties": false,
                        "properties": {
                          "count": {
                            "default": 10,
                            "description": "How many items to stream.",
                            "maximum": 10000000,
                            "minimum": 0,
                            "type": "integer"
                          },
                          "interval_ms": {
                            "default": 0,
                            "description": "Pause between items, in milliseconds.",
                            "maximum": 60000,
                            "minimum": 0,
                            "type": "integer"
                          },
                          "mode": {
                            "default": "text",
                            "description": "`text`: each item is a text content block; `items`: each is a structured item {i, data}.",
                            "enum": ["text", "items"],
                            "type": "string"
                          },
                          "size": {
                            "default": 100,
                            "description": "Bytes per item: the text block's length, or the length of the item's `data`.",
                            "maximum": 1048576,
                            "minimum": 0,
                            "type": "integer"
                          }
                        },
                        "type": "object"
                      },
                      "name": "stream",
                      "outputSchema": {
                        "properties": {"count": {"description": "Items streamed.", "type": "integer"}},
                        "required": ["count"],
                        "type": "object"
                      }
                    },
                    {
                      "description": "Returns one WAV audio block, mime type audio/wav (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_audio_content"
                    },
                    {
                      "description": "Asks the user for a username and an email (elicitation/create) and returns the answer (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {
                        "properties": {
                          "message": {"type": "string"},
                          "timeout_ms": {
                            "description": "How long to wait for the client's answer, in milliseconds (default 600000).",
                            "minimum": 1,
                            "type": "integer"
                          }
                        },
                        "required": ["message"],
                        "type": "object"
                      },
                      "name": "test_elicitation"
                    },
                    {
                      "description": "Elicits a form whose fields all carry defaults (SEP-1034, conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_elicitation_sep1034_defaults"
                    },
                    {
                      "description": "Elicits a form with every enum style: untitled, titled, legacy enumNames, multi-select (SEP-1330, conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_elicitation_sep1330_enums"
                    },
                    {
                      "description": "Returns one embedded text resource, test://embedded-resource (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_embedded_resource"
                    },
                    {
                      "description": "Always fails, so the result has isError: true (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_error_handling"
                    },
                    {
                      "description": "Returns one PNG image block (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_image_content"
                    },
                    {
                      "description": "Returns a text block, a PNG image and an embedded JSON resource (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_multiple_content_types"
                    },
                    {
                      "description": "Asks the client's model to complete `prompt` (sampling/createMessage) and returns the answer (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {
                        "properties": {
                          "prompt": {"type": "string"},
                          "timeout_ms": {
                            "description": "How long to wait for the client's answer, in milliseconds (default 600000).",
                            "minimum": 1,
                            "type": "integer"
                          }
                        },
                        "required": ["prompt"],
                        "type": "object"
                      },
                      "name": "test_sampling"
                    },
                    {
                      "description": "Returns one text block (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_simple_text"
                    },
                    {
                      "description": "Sends three info log messages about 50 ms apart, then returns text (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_tool_with_logging"
                    },
                    {
                      "description": "Reports progress 0, 50 and 100 of 100 about 50 ms apart, then returns text (conformance fixture).",
                      "execution": {"taskSupport": "optional"},
                      "inputSchema": {"properties": {}, "type": "object"},
                      "name": "test_tool_with_progress"
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "List recent runs (tool calls), newest first, with their state.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "limit": {"maximum": 1000, "minimum": 1, "type": "integer"},
                          "state": {
                            "enum": ["pending", "working", "completed", "failed", "canceled"],
                            "type": "string"
                          },
                          "tool": {"type": "string"}
                        },
                        "required": [],
                        "type": "object"
                      },
                      "name": "runs_list",
                      "outputSchema": {
                        "properties": {"runs": {"items": {"type": "object"}, "type": "array"}},
                        "required": ["runs"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "One run: tool, arguments (secrets redacted), state, timing.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"}
                        },
                        "required": ["run_id"],
                        "type": "object"
                      },
                      "name": "runs_get",
                      "outputSchema": {
                        "properties": {"run": {"type": "object"}},
                        "required": ["run"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "A page of a run's events from seq `from` (continue at next_seq).",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "from": {"minimum": 0, "type": "integer"},
                          "limit": {"maximum": 1000, "minimum": 1, "type": "integer"},
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"}
                        },
                        "required": ["run_id"],
                        "type": "object"
                      },
                      "name": "runs_events",
                      "outputSchema": {
                        "properties": {
                          "done": {"type": "boolean"},
                          "events": {"items": {"type": "object"}, "type": "array"},
                          "next_seq": {"type": "integer"},
                          "run_id": {"type": "string"},
                          "state": {"type": "string"}
                        },
                        "required": ["done", "events", "next_seq", "run_id", "state"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": true,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": false
                      },
                      "description": "Cancel a run that is still going; it ends as canceled.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "reason": {"type": "string"},
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"}
                        },
                        "required": ["run_id"],
                        "type": "object"
                      },
                      "name": "runs_cancel",
                      "outputSchema": {
                        "properties": {"cancelled": {"type": "boolean"}, "run_id": {"type": "string"}},
                        "required": ["cancelled", "run_id"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "Read a page of bytes of a file a run produced.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "length": {"maximum": 262144, "minimum": 1, "type": "integer"},
                          "name": {"type": "string"},
                          "offset": {"minimum": 0, "type": "integer"},
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"}
                        },
                        "required": ["run_id", "name"],
                        "type": "object"
                      },
                      "name": "runs_artifact",
                      "outputSchema": {
                        "properties": {
                          "artifact": {"type": "object"},
                          "data": {"type": "object"},
                          "done": {"type": "boolean"},
                          "next_offset": {"type": "integer"},
                          "offset": {"type": "integer"}
                        },
                        "required": ["artifact", "data", "done", "next_offset", "offset"],
                        "type": "object"
                      }
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "Wait for a run to end and return its result as its tool would have; if it has not ended within timeout_s, says so: call again, or runs_cancel.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {
                        "properties": {
                          "run_id": {"description": "The run's id (a task's id).", "type": "string"},
                          "timeout_s": {
                            "description": "Seconds (default 30).",
                            "maximum": 600,
                            "minimum": 0,
                            "type": "number"
                          }
                        },
                        "required": ["run_id"],
                        "type": "object"
                      },
                      "name": "runs_wait"
                    },
                    {
                      "annotations": {
                        "destructiveHint": false,
                        "idempotentHint": true,
                        "openWorldHint": false,
                        "readOnlyHint": true
                      },
                      "description": "weir's version, protocol revisions, store, streaming capabilities and which tools stream.",
                      "execution": {"taskSupport": "forbidden"},
                      "inputSchema": {"properties": {}, "required": [], "type": "object"},
                      "name": "get_status",
                      "outputSchema": {
                        "properties": {
                          "name": {"type": "string"},
                          "protocolVersions": {"items": {"type": "string"}, "type": "array"},
                          "queued": {"type": "integer"},
                          "store": {"type": "string"},
                          "streaming": {"type": "object"},
                          "streamingTools": {"items": {"type": "string"}, "type": "array"},
                          "version": {"type": "string"}
                        },
                        "required": [
                          "name",
                          "protocolVersions",
                          "queued",
                          "store",
                          "streaming",
                          "streamingTools",
                          "version"
                        ],
                        "type": "object"
                      }
                    }
                  ],
                  "ttlMs": 0
                }
              }
        "##]],
    )
    .await;
}

#[tokio::test]
async fn stateless_tools_call() {
    check(
        Opening::Bare,
        vec![
            Request(
                "tools/call",
                stateless(
                    json!({"name": "test_simple_text", "arguments": {}}),
                    json!({}),
                ),
            ),
            Request(
                "tools/call",
                stateless(
                    json!({"name": "stream", "arguments": {"count": 3, "size": 12, "interval_ms": 50}, "_meta": {"progressToken": "p1", "partialResultToken": "r1"}}),
                    json!({"partialResults": {}}),
                ),
            ),
            Request(
                "tools/call",
                stateless(
                    json!({"name": "test_tool_with_logging", "arguments": {}, "_meta": {"io.modelcontextprotocol/logLevel": "info"}}),
                    json!({}),
                ),
            ),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "arguments": {},
                  "name": "test_simple_text"
                }
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "content": [{"text": "This is a simple text response for testing.", "type": "text"}],
                  "resultType": "complete"
                }
              }
            → {
                "id": 2,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {"partialResults": {}},
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "partialResultToken": "r1",
                    "progressToken": "p1"
                  },
                  "arguments": {"count": 3, "interval_ms": 50, "size": 12},
                  "name": "stream"
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/tools/partial_result",
                "params": {
                  "content": [{"text": "00000000:xxx", "type": "text"}],
                  "partialResultToken": "r1",
                  "seq": 0
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progress": 1.0, "progressToken": "p1", "total": 3.0}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/tools/partial_result",
                "params": {
                  "content": [{"text": "00000001:xxx", "type": "text"}],
                  "partialResultToken": "r1",
                  "seq": 1
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progress": 2.0, "progressToken": "p1", "total": 3.0}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/tools/partial_result",
                "params": {
                  "content": [{"text": "00000002:xxx", "type": "text"}],
                  "partialResultToken": "r1",
                  "seq": 2
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progress": 3.0, "progressToken": "p1", "total": 3.0}
              }
            ← {
                "id": 2,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "content": [
                    {"text": "00000000:xxx", "type": "text"},
                    {"text": "00000001:xxx", "type": "text"},
                    {"text": "00000002:xxx", "type": "text"},
                    {"text": "streamed 3 items", "type": "text"}
                  ],
                  "resultType": "complete",
                  "structuredContent": {"count": 3}
                }
              }
            → {
                "id": 3,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/logLevel": "info",
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "arguments": {},
                  "name": "test_tool_with_logging"
                }
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"data": "Tool execution started", "level": "info", "logger": "weir"}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"data": "Tool processing data", "level": "info", "logger": "weir"}
              }
            ← {
                "jsonrpc": "2.0",
                "method": "notifications/message",
                "params": {"data": "Tool execution completed", "level": "info", "logger": "weir"}
              }
            ← {
                "id": 3,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "content": [{"text": "Tool with logging executed successfully", "type": "text"}],
                  "resultType": "complete"
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn stateless_tasks_get_and_update() {
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    check(
        Opening::Bare,
        vec![
            Request(
                "tools/call",
                stateless(
                    json!({"name": "stream", "arguments": {"count": 3, "size": 12, "interval_ms": 50}}),
                    tasks.clone(),
                ),
            ),
            Poll(
                "tasks/get",
                stateless(json!({"taskId": "<run-1>"}), tasks.clone()),
                "completed",
            ),
            Request(
                "tasks/update",
                stateless(
                    json!({"taskId": "<run-1>", "inputResponses": {}}),
                    tasks.clone(),
                ),
            ),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {
                      "extensions": {"io.modelcontextprotocol/tasks": {}}
                    },
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "arguments": {"count": 3, "interval_ms": 50, "size": 12},
                  "name": "stream"
                }
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "createdAt": "<time>",
                  "lastUpdatedAt": "<time>",
                  "pollIntervalMs": 500,
                  "resultType": "task",
                  "status": "working",
                  "taskId": "<run-1>",
                  "ttlMs": 604800000
                }
              }
            → {
                "id": 2,
                "jsonrpc": "2.0",
                "method": "tasks/get",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {
                      "extensions": {"io.modelcontextprotocol/tasks": {}}
                    },
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "taskId": "<run-1>"
                }
              }
            ← {
                "id": 2,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "createdAt": "<time>",
                  "lastUpdatedAt": "<time>",
                  "pollIntervalMs": 500,
                  "result": {
                    "content": [
                      {"text": "00000000:xxx", "type": "text"},
                      {"text": "00000001:xxx", "type": "text"},
                      {"text": "00000002:xxx", "type": "text"},
                      {"text": "streamed 3 items", "type": "text"}
                    ],
                    "structuredContent": {"count": 3}
                  },
                  "resultType": "complete",
                  "status": "completed",
                  "taskId": "<run-1>",
                  "ttlMs": 604800000
                }
              }
            → {
                "id": 3,
                "jsonrpc": "2.0",
                "method": "tasks/update",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {
                      "extensions": {"io.modelcontextprotocol/tasks": {}}
                    },
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "inputResponses": {},
                  "taskId": "<run-1>"
                }
              }
            ← {
                "id": 3,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "resultType": "complete"
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn stateless_tasks_cancel() {
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    check(
        Opening::Bare,
        vec![
            Request(
                "tools/call",
                stateless(
                    json!({"name": "stream", "arguments": {"count": 1000, "interval_ms": 50}}),
                    tasks.clone(),
                ),
            ),
            // Answers at once; the run ends soon after.
            Request(
                "tasks/cancel",
                stateless(json!({"taskId": "<run-1>"}), tasks.clone()),
            ),
            Poll(
                "tasks/get",
                stateless(json!({"taskId": "<run-1>"}), tasks.clone()),
                "cancelled",
            ),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/call",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {
                      "extensions": {"io.modelcontextprotocol/tasks": {}}
                    },
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "arguments": {"count": 1000, "interval_ms": 50},
                  "name": "stream"
                }
              }
            ← {
                "id": 1,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "createdAt": "<time>",
                  "lastUpdatedAt": "<time>",
                  "pollIntervalMs": 500,
                  "resultType": "task",
                  "status": "working",
                  "taskId": "<run-1>",
                  "ttlMs": 604800000
                }
              }
            → {
                "id": 2,
                "jsonrpc": "2.0",
                "method": "tasks/cancel",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {
                      "extensions": {"io.modelcontextprotocol/tasks": {}}
                    },
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "taskId": "<run-1>"
                }
              }
            ← {
                "id": 2,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "resultType": "complete"
                }
              }
            → {
                "id": 3,
                "jsonrpc": "2.0",
                "method": "tasks/get",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {
                      "extensions": {"io.modelcontextprotocol/tasks": {}}
                    },
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "taskId": "<run-1>"
                }
              }
            ← {
                "id": 3,
                "jsonrpc": "2.0",
                "result": {
                  "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "weir", "version": "<version>"}},
                  "createdAt": "<time>",
                  "lastUpdatedAt": "<time>",
                  "pollIntervalMs": 500,
                  "resultType": "complete",
                  "status": "cancelled",
                  "taskId": "<run-1>",
                  "ttlMs": 604800000
                }
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn stateless_missing_meta() {
    check(
        Opening::Bare,
        vec![Request(
            "tools/list",
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        )],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "tools/list",
                "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
              }
            ← {
                "error": {
                  "code": -32602,
                  "message": "a 2026-07-28 request must carry _meta io.modelcontextprotocol/clientCapabilities; add them to params._meta"
                },
                "id": 1,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}

#[tokio::test]
async fn stateless_removed_methods() {
    let tasks = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    check(
        Opening::Bare,
        vec![
            Request("ping", stateless(json!({}), json!({}))),
            Request(
                "initialize",
                stateless(
                    json!({"protocolVersion": "2026-07-28", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
                    json!({}),
                ),
            ),
            Request("tasks/list", stateless(json!({}), tasks.clone())),
            Request(
                "tasks/result",
                stateless(json!({"taskId": "nope"}), tasks),
            ),
        ],
        expect![[r#"
            → {
                "id": 1,
                "jsonrpc": "2.0",
                "method": "ping",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  }
                }
              }
            ← {
                "error": {"code": -32601, "message": "ping does not exist in protocol revision 2026-07-28"},
                "id": 1,
                "jsonrpc": "2.0"
              }
            → {
                "id": 2,
                "jsonrpc": "2.0",
                "method": "initialize",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "capabilities": {},
                  "clientInfo": {"name": "t", "version": "1"},
                  "protocolVersion": "2026-07-28"
                }
              }
            ← {
                "error": {
                  "code": -32601,
                  "message": "initialize does not exist in protocol revision 2026-07-28"
                },
                "id": 2,
                "jsonrpc": "2.0"
              }
            → {
                "id": 3,
                "jsonrpc": "2.0",
                "method": "tasks/list",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {
                      "extensions": {"io.modelcontextprotocol/tasks": {}}
                    },
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  }
                }
              }
            ← {
                "error": {"code": -32601, "message": "tasks/list does not exist in this protocol revision"},
                "id": 3,
                "jsonrpc": "2.0"
              }
            → {
                "id": 4,
                "jsonrpc": "2.0",
                "method": "tasks/result",
                "params": {
                  "_meta": {
                    "io.modelcontextprotocol/clientCapabilities": {
                      "extensions": {"io.modelcontextprotocol/tasks": {}}
                    },
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28"
                  },
                  "taskId": "nope"
                }
              }
            ← {
                "error": {"code": -32602, "message": "unknown task \"nope\": list runs with the runs_list tool"},
                "id": 4,
                "jsonrpc": "2.0"
              }
        "#]],
    )
    .await;
}
