//! One answer, token by token: the body read as it arrives, under the
//! first-token and idle timeouts, ended by `[DONE]`, by the end of the
//! body, or by silence after a `finish_reason` — and an error, never a
//! short answer, when the connection drops. Bounded: the whole answer's
//! time, one line's bytes, the body's bytes and the answer's length each
//! end the call with an error of their own ([`Bounds`]).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;
use weir_core::CircuitBreaker;
use weir_core::sse::SseParser;

use super::LlmError;
use super::chunk::{self, ChunkEvent};

/// How an answer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// `data: [DONE]`.
    Done,
    /// The body ended cleanly without `[DONE]` (for a chunked body, its
    /// last chunk arrived: the server meant to stop).
    EndOfBody,
    /// A `finish_reason` came, then nothing for the idle timeout: the
    /// server neither sent `[DONE]` nor closed.
    FinishThenSilence,
}

/// What one answer may take: past any of these the call ends.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    /// When the whole answer must be in, retries included.
    pub(super) deadline: Instant,
    /// The time that deadline was set from, for the message.
    pub(super) total: Duration,
    /// Most bytes of one SSE line or event.
    pub(super) max_line: usize,
    /// Most bytes of the body.
    pub(super) max_body: usize,
    /// The request's `max_tokens`, for the message.
    pub(super) max_tokens: u32,
}

impl Bounds {
    /// Most pieces of text read: a server sends at most one per token, a
    /// few spare for servers that count differently.
    fn max_pieces(&self) -> u64 {
        u64::from(self.max_tokens) + u64::from(self.max_tokens) / 4 + 8
    }

    /// Most characters read: far more than `max_tokens` tokens make.
    fn max_chars(&self) -> usize {
        self.max_tokens as usize * 32 + 256
    }
}

/// The breaker a stream reports to once its answer is whole or broken.
pub(super) struct Report {
    pub(super) breaker: Arc<Mutex<CircuitBreaker>>,
    pub(super) clock: std::time::Instant,
}

impl Report {
    pub(super) fn succeeded(&self) {
        let now = self.clock.elapsed().as_millis() as u64;
        self.breaker.lock().expect("breaker lock").succeeded(now);
    }

    pub(super) fn failed(&self) {
        let now = self.clock.elapsed().as_millis() as u64;
        self.breaker.lock().expect("breaker lock").failed(now);
    }
}

/// A streaming answer. [`next`](ChatStream::next) hands out its tokens;
/// dropping it closes the connection.
pub struct ChatStream {
    /// `None` once the body is read to its end or abandoned after `[DONE]`.
    response: Option<reqwest::Response>,
    /// The body is one JSON completion, not SSE.
    whole_json: bool,
    parser: SseParser,
    pending: VecDeque<ChunkEvent>,
    /// The first token, read before the stream was handed out.
    primed: Option<String>,
    tokens: u64,
    finish: Option<String>,
    ending: Option<Ending>,
    /// Why data was skipped, the first time it was.
    unreadable: Option<String>,
    first_deadline: Instant,
    first_token_timeout: Duration,
    idle: Duration,
    bounds: Bounds,
    /// Bytes of the body read so far.
    body_bytes: usize,
    /// Characters of the answer handed out so far.
    chars: usize,
    started: Instant,
    first_token_after: Option<Duration>,
    attempts: u32,
    /// Where to report the outcome; `None` until the stream is handed out
    /// (the client reports the attempts before), and after reporting.
    report: Option<Report>,
}

impl ChatStream {
    pub(super) fn new(
        response: reqwest::Response,
        first_deadline: Instant,
        first_token_timeout: Duration,
        idle: Duration,
        started: Instant,
        bounds: Bounds,
    ) -> ChatStream {
        let whole_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.contains("json"));
        ChatStream {
            response: Some(response),
            whole_json,
            parser: SseParser::new(bounds.max_line),
            pending: VecDeque::new(),
            primed: None,
            tokens: 0,
            finish: None,
            ending: None,
            unreadable: None,
            first_deadline,
            first_token_timeout,
            idle,
            bounds,
            body_bytes: 0,
            chars: 0,
            started,
            first_token_after: None,
            attempts: 1,
            report: None,
        }
    }

    /// Reads up to the first token (or the end of an empty answer), which
    /// [`next`](ChatStream::next) hands out first. Errors here are the
    /// attempt's, for the client to retry.
    pub(super) async fn prime(&mut self) -> Result<(), LlmError> {
        self.primed = self.advance().await?;
        Ok(())
    }

    pub(super) fn handed_out(&mut self, attempts: u32, report: Report) {
        self.attempts = attempts;
        if self.ending.is_some() {
            // Already whole (an empty answer, or one token then the end).
            report.succeeded();
        } else {
            self.report = Some(report);
        }
    }

    /// The next piece of the answer; `Ok(None)` once it is whole. An error
    /// after some tokens means the answer is incomplete
    /// ([`LlmError::tokens_before`]).
    pub async fn next(&mut self) -> Result<Option<String>, LlmError> {
        if let Some(token) = self.primed.take() {
            return Ok(Some(token));
        }
        let step = self.advance().await;
        if let Some(report) = &self.report {
            match &step {
                Err(_) => report.failed(),
                Ok(None) => report.succeeded(),
                Ok(Some(_)) => return step,
            }
            self.report = None;
        }
        step
    }

    /// The rest of the answer as one string.
    pub async fn text(mut self) -> Result<String, LlmError> {
        let mut text = String::new();
        while let Some(token) = self.next().await? {
            text.push_str(&token);
        }
        Ok(text)
    }

    /// Tokens handed out (or primed) so far.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// The `finish_reason` the server gave, if it gave one.
    pub fn finish_reason(&self) -> Option<&str> {
        self.finish.as_deref()
    }

    /// How the answer ended, once it has.
    pub fn ending(&self) -> Option<Ending> {
        self.ending
    }

    /// From [`ChatClient::start`](super::ChatClient::start) to the first
    /// token, retries included.
    pub fn first_token_after(&self) -> Option<Duration> {
        self.first_token_after
    }

    /// Attempts `start` made (1 when the first one answered).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    async fn advance(&mut self) -> Result<Option<String>, LlmError> {
        loop {
            while let Some(event) = self.pending.pop_front() {
                match event {
                    ChunkEvent::Token(token) => {
                        self.chars += token.chars().count();
                        if self.tokens + 1 > self.bounds.max_pieces()
                            || self.chars > self.bounds.max_chars()
                        {
                            return Err(self.broken(LlmError::AnswerTooLong {
                                max_tokens: self.bounds.max_tokens,
                                max_pieces: self.bounds.max_pieces(),
                                max_chars: self.bounds.max_chars(),
                                tokens: self.tokens,
                            }));
                        }
                        self.tokens += 1;
                        if self.first_token_after.is_none() {
                            self.first_token_after = Some(self.started.elapsed());
                        }
                        return Ok(Some(token));
                    }
                    ChunkEvent::Finish(reason) => self.finish = Some(reason),
                    ChunkEvent::Done => {
                        // No need to wait for the body's end: some servers
                        // keep the connection open after [DONE].
                        self.pending.clear();
                        self.response = None;
                        self.ending = Some(Ending::Done);
                    }
                    ChunkEvent::Error(message) => {
                        self.response = None;
                        return Err(LlmError::Server {
                            tokens: self.tokens,
                            message,
                        });
                    }
                    ChunkEvent::Unreadable(why) => {
                        self.unreadable.get_or_insert(why);
                    }
                }
            }
            if self.ending.is_some() {
                return match self.unreadable.take() {
                    Some(why) if self.tokens == 0 => Err(LlmError::Unreadable(why)),
                    _ => Ok(None),
                };
            }
            self.read().await?;
        }
    }

    /// Reads what the body has next into `pending`, or sets `ending`.
    async fn read(&mut self) -> Result<(), LlmError> {
        let Some(response) = &mut self.response else {
            self.ending = Some(Ending::EndOfBody);
            return Ok(());
        };
        let now = Instant::now();
        let wait = if self.tokens == 0 {
            self.first_deadline.saturating_duration_since(now)
        } else {
            self.idle
        }
        .min(self.bounds.deadline.saturating_duration_since(now));
        let max_body = self.bounds.max_body;
        let already = self.body_bytes;
        let read = if self.whole_json {
            tokio::time::timeout(wait, async {
                let mut body = Vec::new();
                while let Some(piece) = response.chunk().await? {
                    body.extend_from_slice(&piece);
                    if already + body.len() > max_body {
                        // Past the bound: stop reading; the caller refuses it.
                        break;
                    }
                }
                Ok::<_, reqwest::Error>(Some(body))
            })
            .await
        } else {
            tokio::time::timeout(wait, async {
                Ok(response.chunk().await?.map(|piece| piece.to_vec()))
            })
            .await
        };
        if let Ok(Ok(Some(bytes))) = &read {
            self.body_bytes += bytes.len();
            if self.body_bytes > max_body {
                return Err(self.broken(LlmError::BodyTooLarge {
                    limit: max_body,
                    tokens: self.tokens,
                }));
            }
        }
        match read {
            Err(_) if self.finish.is_some() => {
                self.response = None;
                self.ending = Some(Ending::FinishThenSilence);
            }
            Err(_) if Instant::now() >= self.bounds.deadline => {
                return Err(self.broken(LlmError::TimedOut {
                    limit: self.bounds.total,
                    tokens: self.tokens,
                }));
            }
            Err(_) if self.tokens == 0 => {
                return Err(LlmError::FirstTokenTimeout(self.first_token_timeout));
            }
            Err(_) => {
                return Err(LlmError::Stalled {
                    idle: self.idle,
                    tokens: self.tokens,
                });
            }
            Ok(Err(error)) => {
                self.response = None;
                return Err(LlmError::Dropped {
                    tokens: self.tokens,
                    reason: error_chain(&error),
                });
            }
            Ok(Ok(Some(bytes))) if self.whole_json => {
                self.response = None;
                let value: serde_json::Value = serde_json::from_slice(&bytes)
                    .map_err(|error| LlmError::Unreadable(format!("a JSON body: {error}")))?;
                self.pending.extend(chunk::decode_value(&value));
                self.ending = Some(Ending::EndOfBody);
            }
            Ok(Ok(Some(bytes))) => {
                let events = match self.parser.push(&bytes) {
                    Ok(events) => events,
                    Err(overflow) => {
                        return Err(self.broken(LlmError::LineTooLong {
                            limit: overflow.limit,
                            tokens: self.tokens,
                        }));
                    }
                };
                // The event type is not read: OpenAI-compatible servers
                // send none, and the chunk itself says what it is.
                for event in events {
                    self.pending.extend(chunk::decode(&event.data));
                }
            }
            Ok(Ok(None)) => {
                self.response = None;
                match self.parser.finish() {
                    Ok(Some(event)) => self.pending.extend(chunk::decode(&event.data)),
                    Ok(None) => {}
                    Err(overflow) => {
                        return Err(self.broken(LlmError::LineTooLong {
                            limit: overflow.limit,
                            tokens: self.tokens,
                        }));
                    }
                }
                // `[DONE]` in that last event wins; else the body's end.
                if !self.pending.contains(&ChunkEvent::Done) {
                    self.ending = Some(Ending::EndOfBody);
                }
            }
        }
        Ok(())
    }
}

impl ChatStream {
    /// `error`, after closing the connection: nothing more is read.
    fn broken(&mut self, error: LlmError) -> LlmError {
        self.response = None;
        self.pending.clear();
        error
    }
}

/// An error with its causes, which say what actually happened ("connection
/// closed before message completed").
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
