//! What the fake answers: a [`Script`] of [`Turn`]s, their JSON form, and
//! the protocol-independent [`Reply`] each protocol renders.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Error;

/// The answers to give, in order: each model request, whatever its
/// protocol, takes the next turn. Requests that are not model turns
/// (`count_tokens`, Gemini's model router) take none.
///
/// Its JSON form, for scripts written as files:
///
/// ```json
/// {"turns": [
///   {"type": "text", "text": "Hello!", "stream": {"deltas": 3, "delay_ms": 50}},
///   {"type": "tool_call", "text": "Let me look.", "name": "Bash", "input": {"command": "ls"}},
///   {"type": "tool_search", "query": "run code"},
///   {"type": "namespaced_call", "namespace": "mcp__weir", "name": "list_languages", "input": {}},
///   {"type": "thinking", "thinking": "The user wants a greeting.", "text": "Hi."},
///   {"type": "error", "status": 500, "message": "scripted failure"}
/// ]}
/// ```
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// The turns, the first answering the first model request.
    pub turns: Vec<Turn>,
}

impl Script {
    /// A script of these turns.
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Script {
        Script {
            turns: turns.into_iter().collect(),
        }
    }

    /// Reads a script from a JSON file (the form shown on [`Script`]).
    pub fn from_file(path: &Path) -> Result<Script, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::ReadScript {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| Error::ParseScript {
            path: path.to_owned(),
            source,
        })
    }
}

/// One answer of the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Turn {
    /// Plain text; the turn ends the model's answer (`end_turn`, `stop`,
    /// `STOP`).
    Text {
        /// The text, split into deltas as `stream` says.
        text: String,
        /// How the answer is streamed.
        #[serde(default, skip_serializing_if = "Streaming::is_default")]
        stream: Streaming,
    },
    /// A call of one of the client's tools, optionally after some text; the
    /// client runs the tool and sends its result in the next request.
    ToolCall {
        /// Text before the call (the "I'll run a command." of an agent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The tool's name, as the client declared it.
        name: String,
        /// The tool's arguments: a JSON object. A JSON string is the input
        /// of a freeform tool (codex's `apply_patch`): the Responses API
        /// sends it as a `custom_tool_call`; the other protocols as-is.
        #[serde(default)]
        input: Value,
        /// How the answer is streamed; the arguments' JSON text is split
        /// into deltas as well.
        #[serde(default, skip_serializing_if = "Streaming::is_default")]
        stream: Streaming,
    },
    /// A call of a tool the client keeps in a namespace: codex puts an MCP
    /// server's tools, once its tool search has loaded them, in
    /// `mcp__SERVER` and refuses them by their flat name. The Responses API
    /// sends it as a `function_call` with `namespace`; the other protocols,
    /// which have no namespaces, as a call of `{namespace}__{name}` (Claude
    /// Code's flat form of MCP tools).
    NamespacedCall {
        /// Text before the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// The namespace, e.g. `mcp__weir`.
        namespace: String,
        /// The tool's name inside it, e.g. `execute_code`.
        name: String,
        /// The tool's arguments: a JSON object.
        #[serde(default)]
        input: Value,
        /// How the answer is streamed, arguments included.
        #[serde(default, skip_serializing_if = "Streaming::is_default")]
        stream: Streaming,
    },
    /// A call of the client's own tool search: codex defers MCP tools
    /// behind its built-in `tool_search` and loads the ones it finds (as
    /// namespaces) for the next request. The Responses API sends it as a
    /// `tool_search_call` item run by the client (`execution: "client"`,
    /// `arguments: {query, limit}`); the other protocols as a call of a tool
    /// named `tool_search` with those arguments.
    ToolSearch {
        /// What to search for: the words of the tools' names and
        /// descriptions.
        query: String,
        /// How many tools at most (the client's default when absent).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<u64>,
    },
    /// Reasoning, then text.
    Thinking {
        /// The reasoning (Anthropic `thinking`, Responses reasoning
        /// summary, Gemini thought part, Chat `reasoning_content`).
        thinking: String,
        /// The answer after it.
        text: String,
        /// How the answer is streamed.
        #[serde(default, skip_serializing_if = "Streaming::is_default")]
        stream: Streaming,
    },
    /// An HTTP error instead of an answer.
    Error {
        /// The HTTP status, e.g. 400, 429, 500.
        status: u16,
        /// The message, put in the protocol's own error shape.
        #[serde(default = "default_error_message")]
        message: String,
        /// The whole body instead, sent as-is (overrides `message`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<Value>,
    },
}

fn default_error_message() -> String {
    "scripted error".to_owned()
}

impl Turn {
    /// A text answer in one delta.
    pub fn text(text: impl Into<String>) -> Turn {
        Turn::Text {
            text: text.into(),
            stream: Streaming::default(),
        }
    }

    /// A tool call, with no text before it.
    pub fn tool_call(name: impl Into<String>, input: Value) -> Turn {
        Turn::ToolCall {
            text: None,
            name: name.into(),
            input,
            stream: Streaming::default(),
        }
    }

    /// A call of `name` in `namespace` (see [`Turn::NamespacedCall`]), with
    /// no text before it.
    pub fn namespaced_call(
        namespace: impl Into<String>,
        name: impl Into<String>,
        input: Value,
    ) -> Turn {
        Turn::NamespacedCall {
            text: None,
            namespace: namespace.into(),
            name: name.into(),
            input,
            stream: Streaming::default(),
        }
    }

    /// A call of the client's tool search for `query` (see
    /// [`Turn::ToolSearch`]).
    pub fn tool_search(query: impl Into<String>) -> Turn {
        Turn::ToolSearch {
            query: query.into(),
            limit: None,
        }
    }

    /// Reasoning, then text.
    pub fn thinking(thinking: impl Into<String>, text: impl Into<String>) -> Turn {
        Turn::Thinking {
            thinking: thinking.into(),
            text: text.into(),
            stream: Streaming::default(),
        }
    }

    /// An HTTP error with this status and message.
    pub fn error(status: u16, message: impl Into<String>) -> Turn {
        Turn::Error {
            status,
            message: message.into(),
            body: None,
        }
    }

    /// This turn streamed as `streaming` says (no effect on an error or a
    /// tool search, which is sent whole).
    pub fn streamed(mut self, streaming: Streaming) -> Turn {
        match &mut self {
            Turn::Text { stream, .. }
            | Turn::ToolCall { stream, .. }
            | Turn::NamespacedCall { stream, .. }
            | Turn::Thinking { stream, .. } => *stream = streaming,
            Turn::ToolSearch { .. } | Turn::Error { .. } => {}
        }
        self
    }

    /// The turn's kind, for error messages and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Turn::Text { .. } => "text",
            Turn::ToolCall { .. } => "tool_call",
            Turn::NamespacedCall { .. } => "namespaced_call",
            Turn::ToolSearch { .. } => "tool_search",
            Turn::Thinking { .. } => "thinking",
            Turn::Error { .. } => "error",
        }
    }
}

/// How a turn is streamed, and the misbehaviours a client's robustness
/// tests ask for. `keep_alive` and `drop_after` apply to every streaming
/// protocol; `done` and `finish_reason` to Chat Completions only.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Streaming {
    /// Into how many deltas each text (and the tool arguments) is split, at
    /// character boundaries; at least 1, at most one per character.
    pub deltas: usize,
    /// The pause before each delta but the first, in milliseconds: a slow
    /// stream.
    pub delay_ms: u64,
    /// An SSE comment line (`: keep-alive`) before every event, as proxies
    /// and some servers send; clients must ignore it.
    pub keep_alive: bool,
    /// Cut the connection after this many deltas (or after the last one, if
    /// there are fewer), before the events that end the answer.
    pub drop_after: Option<usize>,
    /// Chat Completions: end with `data: [DONE]` (the default); false ends
    /// the body without it.
    pub done: bool,
    /// Chat Completions: where `finish_reason` comes.
    pub finish_reason: FinishReason,
}

impl Default for Streaming {
    fn default() -> Streaming {
        Streaming {
            deltas: 1,
            delay_ms: 0,
            keep_alive: false,
            drop_after: None,
            done: true,
            finish_reason: FinishReason::Separate,
        }
    }
}

impl Streaming {
    fn is_default(&self) -> bool {
        *self == Streaming::default()
    }
}

/// Where a Chat Completions stream puts `finish_reason`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// In a chunk of its own with an empty delta, right after the last
    /// content delta: what OpenAI sends.
    #[default]
    Separate,
    /// In the chunk of the last content delta, as some compatible servers do.
    WithLastDelta,
    /// Late: after the usage chunk (whose `choices` is empty) and a pause of
    /// `delay_ms`, so a client that stops at the content or the usage misses
    /// it.
    Late,
    /// Never sent: the stream ends with `[DONE]` (or not, see `done`) only.
    Never,
}

/// A turn's answer as blocks of deltas, the shape every protocol renders.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) blocks: Vec<Block>,
}

#[derive(Debug)]
pub(crate) enum Block {
    Thinking(Vec<String>),
    Text(Vec<String>),
    ToolCall {
        /// The name the protocols without namespaces call.
        name: String,
        input: Value,
        /// The arguments' JSON text (or a freeform input), in pieces.
        pieces: Vec<String>,
        /// What the Responses API makes of it.
        form: CallForm,
    },
}

/// How the Responses API sends a tool call beyond a plain `function_call`
/// (or a `custom_tool_call`, for a string input).
#[derive(Debug)]
pub(crate) enum CallForm {
    Plain,
    /// A `function_call` of `name` with this `namespace`.
    InNamespace {
        namespace: String,
        name: String,
    },
    /// A `tool_search_call` run by the client.
    ToolSearch,
}

/// How a turn that is never split is streamed.
static WHOLE: Streaming = Streaming {
    deltas: 1,
    delay_ms: 0,
    keep_alive: false,
    drop_after: None,
    done: true,
    finish_reason: FinishReason::Separate,
};

/// What a turn makes the fake answer.
pub(crate) enum Outcome<'a> {
    Reply(Reply, &'a Streaming),
    Error {
        status: u16,
        message: &'a str,
        body: Option<&'a Value>,
    },
}

impl<'a> Outcome<'a> {
    pub(crate) fn of(turn: &'a Turn) -> Outcome<'a> {
        let (blocks, stream) = match turn {
            Turn::Text { text, stream } => (vec![Block::Text(split(text, stream.deltas))], stream),
            Turn::ToolCall {
                text,
                name,
                input,
                stream,
            } => {
                let mut blocks = Vec::new();
                if let Some(text) = text {
                    blocks.push(Block::Text(split(text, stream.deltas)));
                }
                blocks.push(Block::ToolCall {
                    name: name.clone(),
                    input: input.clone(),
                    pieces: split(&arguments_text(input), stream.deltas),
                    form: CallForm::Plain,
                });
                (blocks, stream)
            }
            Turn::NamespacedCall {
                text,
                namespace,
                name,
                input,
                stream,
            } => {
                let mut blocks = Vec::new();
                if let Some(text) = text {
                    blocks.push(Block::Text(split(text, stream.deltas)));
                }
                blocks.push(Block::ToolCall {
                    name: format!("{namespace}__{name}"),
                    input: input.clone(),
                    pieces: split(&arguments_text(input), stream.deltas),
                    form: CallForm::InNamespace {
                        namespace: namespace.clone(),
                        name: name.clone(),
                    },
                });
                (blocks, stream)
            }
            Turn::ToolSearch { query, limit } => {
                let mut input = serde_json::json!({"query": query});
                if let Some(limit) = limit {
                    input["limit"] = (*limit).into();
                }
                let block = Block::ToolCall {
                    name: "tool_search".to_owned(),
                    pieces: vec![arguments_text(&input)],
                    input,
                    form: CallForm::ToolSearch,
                };
                (vec![block], &WHOLE)
            }
            Turn::Thinking {
                thinking,
                text,
                stream,
            } => (
                vec![
                    Block::Thinking(split(thinking, stream.deltas)),
                    Block::Text(split(text, stream.deltas)),
                ],
                stream,
            ),
            Turn::Error {
                status,
                message,
                body,
            } => {
                return Outcome::Error {
                    status: *status,
                    message,
                    body: body.as_ref(),
                };
            }
        };
        Outcome::Reply(Reply { blocks }, stream)
    }
}

impl Reply {
    pub(crate) fn has_tool_call(&self) -> bool {
        self.blocks
            .iter()
            .any(|block| matches!(block, Block::ToolCall { .. }))
    }

    /// A made-up output token count: about one per four bytes.
    pub(crate) fn output_tokens(&self) -> u64 {
        let bytes: usize = self
            .blocks
            .iter()
            .map(|block| match block {
                Block::Thinking(pieces) | Block::Text(pieces) | Block::ToolCall { pieces, .. } => {
                    pieces.iter().map(String::len).sum::<usize>()
                }
            })
            .sum();
        tokens(bytes)
    }
}

/// A made-up token count for `bytes` of text: about one per four bytes,
/// at least one.
pub(crate) fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4).max(1)
}

/// The JSON text a tool's arguments travel as: a freeform input's own text,
/// else the JSON of the object (`{}` when absent).
pub(crate) fn arguments_text(input: &Value) -> String {
    match input {
        Value::String(text) => text.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

/// `text` in `n` pieces of nearly equal length in characters (fewer when it
/// has fewer characters; one empty piece for empty text).
fn split(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let n = n.clamp(1, chars.len().max(1));
    let (base, extra) = (chars.len() / n, chars.len() % n);
    let mut pieces = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        pieces.push(chars[start..start + len].iter().collect());
        start += len;
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn split_keeps_every_character_in_order() {
        assert_eq!(split("abcdefg", 3), ["abc", "de", "fg"]);
        assert_eq!(split("héllo", 2), ["hél", "lo"]);
        assert_eq!(split("ab", 5), ["a", "b"]);
        assert_eq!(split("", 3), [""]);
        assert_eq!(split("abc", 0), ["abc"]);
    }
}
