//! A streaming client for OpenAI-compatible chat completions: no MCP, no
//! runs, just a prompt in and tokens out.
//!
//! [`ChatClient::start`] sends `POST {endpoint}/chat/completions` with
//! `stream: true` and returns once the first token has arrived (or the
//! answer ended empty); [`ChatStream::next`] then hands out the rest. What
//! servers do, and what it does about it:
//!
//! | the server | the client |
//! |---|---|
//! | never sends `data: [DONE]` | a clean end of the body ends the answer ([`Ending::EndOfBody`]) |
//! | sends `finish_reason` late (own chunk, after usage) or never | reads on to `[DONE]` or the end; the reason is advisory ([`ChatStream::finish_reason`]); after a reason, silence for the idle timeout also ends the answer |
//! | drops the connection mid-answer | [`LlmError::Dropped`] with the count of tokens already handed out: never a silently short answer |
//! | sends `: keep-alive` comments | skipped (the stream is read by weir-core's SSE parser, [`weir_core::sse`]) |
//! | answers 5xx/429, refuses, or is slow before the first token | retried with doubling backoff, only before the first token ([`ChatConfig::retries`]) |
//! | is slow | timeouts: connect, first token (per attempt), idle between tokens, and the whole answer ([`ChatConfig::total_timeout`], retries included) |
//! | streams forever, sends an endless line, or a huge body | bounds: one SSE line or event ([`ChatConfig::max_line_bytes`]), the body ([`ChatConfig::max_body_bytes`]), an error body ([`ERROR_BODY_BYTES`], only its start is kept), and the answer (about `max_tokens` pieces, as sent in the request); each ends the call with its own error ([`LlmError::is_bound`]) |
//! | keeps failing | a circuit breaker per client (one endpoint), weir-core's [`CircuitBreaker`](weir_core::CircuitBreaker): refused calls fail at once with [`LlmError::BreakerOpen`] |
//! | ignores `stream: true` | the whole JSON completion is read as one token |
//!
//! Dropping a [`ChatStream`] (or the future of `start`) closes its
//! connection: an HTTP/1 body not read to its end cannot go back to the
//! pool, so the server sees the client go and can stop generating.

pub(crate) mod chunk;
mod client;
mod stream;

use std::time::Duration;

use serde::Serialize;
use weir_core::BreakerConfig;

pub use client::ChatClient;
pub use stream::{ChatStream, Ending};

/// Where the model is and how patient to be with it.
#[derive(Clone, Debug)]
pub struct ChatConfig {
    /// The API's base URL, e.g. `http://127.0.0.1:8080/v1` (requests go to
    /// `{endpoint}/chat/completions`); a URL that already ends in
    /// `/chat/completions` is used as it is.
    pub endpoint: String,
    /// The model to ask for.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Time to open the TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Time from sending the request to the first token, per attempt.
    pub first_token_timeout: Duration,
    /// Most time between two tokens.
    pub idle_timeout: Duration,
    /// Attempts after the first, made only before any token arrived.
    pub retries: u32,
    /// The wait before the first retry; doubled for each next one.
    pub backoff: Duration,
    /// When the endpoint's breaker opens, and for how long.
    pub breaker: BreakerConfig,
    /// Most time for a whole answer, from the request to its end, retries
    /// included: a server that keeps the stream alive forever (keep-alive
    /// comments, a token now and then) is cut off here.
    pub total_timeout: Duration,
    /// Most bytes of one SSE line, and of one event's data: a line with
    /// no end is not held in memory past this.
    pub max_line_bytes: usize,
    /// Most bytes of a response body, streamed or whole.
    pub max_body_bytes: usize,
}

/// Most bytes of an error response read (for its message); the rest is
/// never read: the connection is closed.
pub const ERROR_BODY_BYTES: usize = 64 * 1024;

impl ChatConfig {
    /// A configuration with the defaults: connect 5 s, first token 60 s
    /// (a small local model on two cores reads a prompt in a second or two;
    /// a busy shared one may queue), idle 30 s, 120 s for a whole answer,
    /// 2 retries from 250 ms, a breaker that opens after 3 failed calls in
    /// a row for 30 s; a line (or event) of at most 1 MiB, a body of at
    /// most 8 MiB.
    pub fn new(endpoint: impl Into<String>, model: impl Into<String>) -> ChatConfig {
        ChatConfig {
            endpoint: endpoint.into(),
            model: model.into(),
            api_key: None,
            connect_timeout: Duration::from_secs(5),
            first_token_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            retries: 2,
            backoff: Duration::from_millis(250),
            breaker: BreakerConfig {
                failure_threshold: 3,
                cooldown_ms: 30_000,
            },
            total_timeout: Duration::from_secs(120),
            max_line_bytes: 1 << 20,
            max_body_bytes: 8 << 20,
        }
    }
}

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: &'static str,
    /// The text.
    pub content: String,
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Message {
        Message {
            role: "system",
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Message {
        Message {
            role: "user",
            content: content.into(),
        }
    }
}

/// What to ask.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The conversation.
    pub messages: Vec<Message>,
    /// Most tokens of the answer.
    pub max_tokens: u32,
    /// Sampling temperature (0 for the most likely answer).
    pub temperature: f32,
}

/// Why a chat did not give its whole answer. Each says what happened and,
/// where it helps, what to do.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// The endpoint failed too often lately; calls are refused for a while.
    #[error(
        "the model endpoint failed {failures} times in a row; its circuit breaker refuses calls for another {retry_in_ms} ms"
    )]
    BreakerOpen {
        /// Failed calls in a row.
        failures: u32,
        /// When a call will be tried again.
        retry_in_ms: u64,
    },
    /// The endpoint URL is not one the client can call.
    #[error("the model endpoint {endpoint:?} is not a usable URL: {reason}")]
    BadEndpoint {
        /// The URL given.
        endpoint: String,
        /// Why not.
        reason: String,
    },
    /// No connection, or the request could not be sent.
    #[error(
        "could not reach the model endpoint {endpoint}: {reason} (is the server running? check --llm-endpoint)"
    )]
    Unreachable {
        /// Where.
        endpoint: String,
        /// What the connection said.
        reason: String,
    },
    /// An HTTP error status.
    #[error("the model endpoint answered HTTP {status}: {body}")]
    Status {
        /// The status code.
        status: u16,
        /// The start of the body, which usually says why.
        body: String,
    },
    /// No token within the first-token timeout, on every attempt.
    #[error("the model sent no token within {0:?} of the request")]
    FirstTokenTimeout(Duration),
    /// The answer started, then went quiet.
    #[error(
        "the model's answer stalled: no token for {idle:?} after {tokens} tokens (the answer so far is incomplete)"
    )]
    Stalled {
        /// The idle timeout.
        idle: Duration,
        /// Tokens handed out before it stalled.
        tokens: u64,
    },
    /// The connection broke in the middle of the answer.
    #[error(
        "the connection to the model dropped after {tokens} tokens: {reason} (the answer so far is incomplete)"
    )]
    Dropped {
        /// Tokens handed out before it dropped.
        tokens: u64,
        /// What the connection said.
        reason: String,
    },
    /// The server said so in the stream.
    #[error("the model endpoint reported an error after {tokens} tokens: {message}")]
    Server {
        /// Tokens handed out before it.
        tokens: u64,
        /// Its message.
        message: String,
    },
    /// The stream was not a chat completion stream.
    #[error("the model endpoint sent something that is not a chat completion: {0}")]
    Unreadable(String),
    /// The whole answer took longer than [`ChatConfig::total_timeout`].
    #[error(
        "the model's answer took longer than {} s in all (weir serve --llm-timeout); the call was ended after {tokens} tokens",
        limit.as_secs_f64()
    )]
    TimedOut {
        /// The total timeout.
        limit: Duration,
        /// Tokens handed out before it.
        tokens: u64,
    },
    /// One SSE line (or one event's data) was longer than
    /// [`ChatConfig::max_line_bytes`].
    #[error(
        "the model endpoint sent a line longer than {limit} bytes; the call was ended after {tokens} tokens"
    )]
    LineTooLong {
        /// The bound.
        limit: usize,
        /// Tokens handed out before it.
        tokens: u64,
    },
    /// The body was larger than [`ChatConfig::max_body_bytes`].
    #[error(
        "the model endpoint sent more than {limit} bytes; the call was ended after {tokens} tokens"
    )]
    BodyTooLarge {
        /// The bound.
        limit: usize,
        /// Tokens handed out before it.
        tokens: u64,
    },
    /// The answer ran past what the request's `max_tokens` allows.
    #[error(
        "the model's answer ran longer than asked (max_tokens {max_tokens}: at most {max_pieces} pieces and {max_chars} characters are read); the call was ended"
    )]
    AnswerTooLong {
        /// The request's `max_tokens`.
        max_tokens: u32,
        /// The most pieces of text read.
        max_pieces: u64,
        /// The most characters read.
        max_chars: usize,
        /// Tokens handed out before it.
        tokens: u64,
    },
}

impl LlmError {
    /// Whether another attempt may do better: failures of the connection
    /// or the server before anything was handed out.
    fn retryable(&self) -> bool {
        match self {
            LlmError::Unreachable { .. } | LlmError::FirstTokenTimeout(_) => true,
            LlmError::Status { status, .. } => *status >= 500 || *status == 429 || *status == 408,
            LlmError::Dropped { tokens, .. } | LlmError::Server { tokens, .. } => *tokens == 0,
            LlmError::BreakerOpen { .. }
            | LlmError::BadEndpoint { .. }
            | LlmError::Stalled { .. }
            | LlmError::Unreadable(_)
            // A bound broken once would be broken again.
            | LlmError::TimedOut { .. }
            | LlmError::LineTooLong { .. }
            | LlmError::BodyTooLarge { .. }
            | LlmError::AnswerTooLong { .. } => false,
        }
    }

    /// Whether the endpoint broke one of the client's bounds (time, line,
    /// body, answer): a server that does so once is not asked again in
    /// the same run.
    pub fn is_bound(&self) -> bool {
        matches!(
            self,
            LlmError::TimedOut { .. }
                | LlmError::LineTooLong { .. }
                | LlmError::BodyTooLarge { .. }
                | LlmError::AnswerTooLong { .. }
        )
    }

    /// Tokens handed out before the error: more than 0 means the caller
    /// holds an incomplete answer.
    pub fn tokens_before(&self) -> u64 {
        match self {
            LlmError::Stalled { tokens, .. }
            | LlmError::Dropped { tokens, .. }
            | LlmError::Server { tokens, .. }
            | LlmError::TimedOut { tokens, .. }
            | LlmError::LineTooLong { tokens, .. }
            | LlmError::BodyTooLarge { tokens, .. }
            | LlmError::AnswerTooLong { tokens, .. } => *tokens,
            _ => 0,
        }
    }
}
