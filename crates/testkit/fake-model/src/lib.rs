//! A fake model endpoint for tests: an HTTP server on a loopback port that
//! answers the model APIs the coding-agent CLIs and weir's own model clients
//! speak, from a [`Script`] of canned turns, streaming them as the real APIs
//! do.
//!
//! **For:** tests that run the real Claude Code, Codex and Gemini CLIs fully
//! offline (each CLI's base URL pointed at [`FakeModel::url`]), and tests of
//! an OpenAI-compatible client, including its handling of slow streams,
//! keep-alive comments, a `finish_reason` that comes late or never, a
//! missing `[DONE]`, a connection cut mid-answer, and HTTP errors. Every
//! request is recorded ([`FakeModel::requests`]), so a test can check what a
//! client sent, e.g. that the request after a tool call carries the tool's
//! result. `weir-fake-model --script FILE [--port N]` serves a script by
//! hand.
//!
//! **Not for:** production, or anything that needs a model: it does not read
//! the prompt, it plays the script. It is not a validator of requests (it
//! accepts any body), nor a complete implementation of any API: it speaks
//! the subset the CLIs use, and token counts are made up (about one per
//! four bytes). Loopback only, no TLS, no authentication (any key is taken).
//!
//! | type | what it is |
//! |---|---|
//! | [`FakeModel`] | the running server: [`start`](FakeModel::start), [`url`](FakeModel::url), [`requests`](FakeModel::requests); stops on drop |
//! | [`Script`], [`Turn`] | what it answers; serde, so a test can write it as JSON |
//! | [`Streaming`], [`FinishReason`] | how a turn is streamed: deltas, delays, misbehaviours |
//! | [`RecordedRequest`], [`Protocol`] | what a client sent |
//!
//! **Turns.** Each model request takes the next turn, whatever its
//! protocol: a text turn, a tool call (optionally after text), a call of a
//! tool in a namespace or of the client's tool search (codex's deferred MCP
//! tools), thinking then text, or an HTTP error (status and body, in the protocol's own
//! error shape unless a body is given). A tool call's input may take a
//! value from the previous tool result, which a script fixed before the run
//! cannot know (a run id): an object
//! `{"$from_result": {"after": "Run ", "before": " "}}` (the text between
//! two markers) or `{"$from_result": {"pointer": "/run_id"}}` (the result's
//! text as JSON, at a JSON pointer) anywhere in it is replaced by that
//! value; a request whose tool result lacks it gets a 400 saying so.
//! Requests that are not model turns
//! (Anthropic's `count_tokens`, Gemini's `countTokens` and its model
//! router's JSON requests) take none. A model request after the last turn
//! gets a 400 in its protocol's error shape naming the request (its number,
//! method and path) and the script's length; it is recorded like any other.
//! Any other path gets a 404 naming the paths served.
//!
//! **Protocols** (the variants of [`Protocol`] give each one's events in order):
//!
//! | protocol | endpoint | streamed as |
//! |---|---|---|
//! | Anthropic Messages | `POST /v1/messages[?beta=true]`, `/v1/messages/count_tokens` | `message_start`, per block `content_block_start`, `ping`, `content_block_delta`s, `content_block_stop`; `message_delta` (`end_turn` / `tool_use`), `message_stop` |
//! | OpenAI Responses | `POST /v1/responses` | `response.created`, `response.output_item.added`, `response.output_text.delta`…, `response.output_item.done` (`message`, `function_call` (with `namespace` for a [`Turn::NamespacedCall`]), `custom_tool_call`, `tool_search_call`, `reasoning`), `response.completed` |
//! | Gemini | `POST /v1beta/models/{m}:streamGenerateContent?alt=sse`, `:generateContent`, `:countTokens` | `data: {"candidates":[{"content":{"role":"model","parts":[…]}}]}` per delta, then `finishReason: STOP` and `usageMetadata` |
//! | OpenAI Chat Completions | `POST /v1/chat/completions` | `data: {"choices":[{"delta":{…}}]}` per delta, `finish_reason`, `data: [DONE]` |
//!
//! Each answers JSON instead when the request does not ask for a stream.
//!
//! ```
//! use weir_fake_model::{FakeModel, Protocol, Script, Streaming, Turn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let fake = FakeModel::start(Script::new([
//!     Turn::text("Hello there!").streamed(Streaming { deltas: 2, ..Streaming::default() }),
//! ]))
//! .unwrap();
//!
//! let body = reqwest::Client::new()
//!     .post(format!("{}/v1/chat/completions", fake.url()))
//!     .json(&serde_json::json!({"model": "m", "stream": true, "messages": []}))
//!     .send()
//!     .await
//!     .unwrap()
//!     .text()
//!     .await
//!     .unwrap();
//! assert!(body.contains(r#""delta":{"content":"Hello "}"#));
//! assert!(body.contains(r#""delta":{"content":"there!"}"#));
//! assert!(body.ends_with("data: [DONE]\n\n"));
//!
//! let requests = fake.requests();
//! assert_eq!(requests[0].protocol, Some(Protocol::OpenAiChat));
//! assert_eq!(requests[0].turn, Some(0));
//! # }
//! ```
#![warn(missing_docs)]

pub mod agent_clis;
mod answer;
mod anthropic;
mod chat;
mod fill;
mod gemini;
mod responses;
mod script;
mod server;

use std::net::SocketAddr;
use std::path::PathBuf;

pub use script::{FinishReason, Script, Streaming, Turn};
pub use server::{FakeModel, Protocol, RecordedRequest};

/// Why a fake could not start, or a script could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `FakeModel::start` was called outside a tokio runtime.
    #[error(
        "weir-fake-model: start it inside a tokio runtime (e.g. in a #[tokio::test]); it serves from a task of the current runtime"
    )]
    NoRuntime,
    /// The address could not be bound.
    #[error(
        "weir-fake-model: cannot listen on {addr}: {source}; pick another port, or 0 for any free one"
    )]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A script file could not be read.
    #[error("weir-fake-model: cannot read the script {}: {source}", path.display())]
    ReadScript {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A script file is not a valid script.
    #[error(
        "weir-fake-model: {} is not a script: {source}; expected {{\"turns\": [{{\"type\": \"text\", \"text\": \"…\"}}, …]}}",
        path.display()
    )]
    ParseScript {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}
