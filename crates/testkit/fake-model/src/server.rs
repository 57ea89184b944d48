//! The HTTP side: [`FakeModel`], routing, the record of requests, and the
//! writer that paces an SSE answer.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::answer::{Answer, Frame, Request};
use crate::script::{Outcome, Script, Streaming, Turn, tokens};
use crate::{Error, anthropic, chat, gemini, responses};

/// A running fake model endpoint, serving HTTP on a loopback port from a
/// task of the tokio runtime it was started on. Dropping it stops the
/// server: streams still being written are cut, and the port is released
/// once the server task has wound down ([`FakeModel::shutdown`] waits for
/// that).
#[derive(Debug)]
pub struct FakeModel {
    url: String,
    shared: Arc<Shared>,
    server: Option<JoinHandle<()>>,
}

/// Which API a request spoke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Anthropic Messages, as Claude Code speaks it.
    ///
    /// `POST /v1/messages` (Claude Code adds `?beta=true`) streams, when the
    /// request says `"stream": true`, SSE events named after their `type`:
    /// `message_start`, then per content block `content_block_start`, `ping`,
    /// the block's `content_block_delta`s (`text_delta`, `input_json_delta`, or
    /// `thinking_delta`s and one `signature_delta`) and `content_block_stop`,
    /// then `message_delta` (`stop_reason` `end_turn` or `tool_use`, `usage`)
    /// and `message_stop`. Otherwise the whole message is one JSON object.
    /// `POST /v1/messages/count_tokens` answers `{"input_tokens": n}`.
    Anthropic,
    /// OpenAI Responses, as codex speaks it.
    ///
    /// `POST /v1/responses` streams SSE events named after their `type`, each
    /// with a `sequence_number`: `response.created`, `response.in_progress`,
    /// then per output item `response.output_item.added`, its deltas and
    /// `response.output_item.done`, then `response.completed` with `usage`.
    /// The items: `message` (`response.content_part.added`,
    /// `response.output_text.delta`s, `response.output_text.done`,
    /// `response.content_part.done`), `reasoning` with a summary
    /// (`response.reasoning_summary_part.added`,
    /// `response.reasoning_summary_text.delta`s, …`.done`), `function_call`
    /// (`call_id`, `name`, `response.function_call_arguments.delta`s, …`.done`)
    /// and, for a freeform tool's string input, `custom_tool_call`
    /// (`response.custom_tool_call_input.delta`s, …`.done`). With
    /// `"stream": false` the completed response is one JSON object.
    OpenAiResponses,
    /// OpenAI Chat Completions, as OpenAI-compatible servers speak it.
    ///
    /// `POST /v1/chat/completions` with `"stream": true` streams SSE `data:`
    /// lines (no event names) of `chat.completion.chunk` objects: a first chunk
    /// with `delta: {"role": "assistant", "content": ""}`, then one chunk per
    /// delta (`content`; `reasoning_content`, the field compatible servers use
    /// for reasoning; `tool_calls` with `id`, `type`, `function.name` first and
    /// then `function.arguments` pieces), a chunk with `finish_reason` (`stop`
    /// or `tool_calls`) and an empty delta, a usage chunk with empty `choices`
    /// when the request set `stream_options.include_usage`, and
    /// `data: [DONE]`. The turn's [`Streaming`] can move or drop the
    /// `finish_reason` and drop `[DONE]`. Otherwise one `chat.completion`.
    OpenAiChat,
    /// Gemini, as the Gemini CLI speaks it.
    ///
    /// `POST /v1beta/models/{model}:streamGenerateContent?alt=sse` streams SSE
    /// `data:` lines (no event names), each a `GenerateContentResponse`:
    /// `{"candidates":[{"content":{"role":"model","parts":[…]},"index":0}]}`,
    /// one part per chunk (`{"text"}`, `{"text","thought":true}` for reasoning,
    /// `{"functionCall":{"name","args"}}`, which is never split), then a last
    /// chunk with `"finishReason":"STOP"` (for function calls too, as the API
    /// does) and `usageMetadata`. Without `alt=sse` the same chunks come as one
    /// JSON array. `:generateContent` answers one response with every part.
    ///
    /// Gemini's model router (the CLI's `auto` model) asks `:generateContent`
    /// for JSON (`generationConfig.responseMimeType: application/json` with
    /// `responseJsonSchema` or `responseSchema`): that is answered with an
    /// object made from the schema, and takes no turn of the script.
    /// `:countTokens` answers `{"totalTokens": n}`.
    Gemini,
}

/// One request the fake received, whatever it was.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// The API it spoke; `None` for a path the fake does not serve (it got
    /// a 404).
    pub protocol: Option<Protocol>,
    /// `POST`, `GET`, …
    pub method: String,
    /// The path and query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// The headers in the order received, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `Null` when empty or not JSON.
    pub body: Value,
    /// The index of the script turn it took, if it took one: requests that
    /// are not model turns, and those that came after the last turn, take
    /// none.
    pub turn: Option<usize>,
}

impl RecordedRequest {
    /// The value of the first header called `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

impl FakeModel {
    /// Starts serving `script` on a free port of 127.0.0.1, on the current
    /// tokio runtime.
    pub fn start(script: Script) -> Result<FakeModel, Error> {
        FakeModel::bind(script, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
    }

    /// Starts serving `script` on `addr`, on the current tokio runtime.
    pub fn bind(script: Script, addr: SocketAddr) -> Result<FakeModel, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        // std's bind is synchronous, so `start` needs no `.await`; tokio
        // takes the socket over below.
        let listener = std::net::TcpListener::bind(addr)
            .and_then(|listener| {
                listener.set_nonblocking(true)?;
                Ok(listener)
            })
            .map_err(|source| Error::Bind { addr, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| Error::Bind { addr, source })?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener)
                .map_err(|source| Error::Bind { addr, source })?
        };
        let shared = Arc::new(Shared {
            turns: script.turns,
            log: Mutex::new(Log::default()),
            recorded: watch::Sender::new(0),
            shutdown: CancellationToken::new(),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(shared.clone())
            // Agents resend the whole conversation each turn: bodies grow
            // past axum's 2 MB default in long sessions.
            .layer(DefaultBodyLimit::max(64 << 20));
        let stop = shared.shutdown.clone();
        let server = runtime.spawn(async move {
            // axum retries failed accepts itself; serve returns only once
            // shut down, so its io::Result carries nothing to act on.
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
        });
        Ok(FakeModel {
            url: format!("http://{local}"),
            shared,
            server: Some(server),
        })
    }

    /// The base URL, `http://127.0.0.1:PORT`, with no trailing slash: what
    /// Claude Code's `ANTHROPIC_BASE_URL` and the Gemini CLI's
    /// `GOOGLE_GEMINI_BASE_URL` take; OpenAI clients take it with `/v1`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Every request received so far, in order of arrival.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.lock().requests.clone()
    }

    /// Waits until at least `count` requests have arrived, then returns them
    /// all (the binary logs requests with it; tests can wait for a client).
    pub async fn wait_for_requests(&self, count: usize) -> Vec<RecordedRequest> {
        let mut recorded = self.shared.recorded.subscribe();
        // The sender lives in `shared`, which `self` holds: it cannot close.
        let _ = recorded.wait_for(|received| *received >= count).await;
        self.requests()
    }

    /// Stops the server and waits until it has: streams are cut and the
    /// port is free when this returns.
    pub async fn shutdown(mut self) {
        self.shared.shutdown.cancel();
        if let Some(server) = self.server.take() {
            // A panic in the server task is the only error, and it has
            // nothing left to clean up.
            let _ = server.await;
        }
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

#[derive(Debug)]
struct Shared {
    turns: Vec<Turn>,
    log: Mutex<Log>,
    /// How many requests `log` holds, for `wait_for_requests`.
    recorded: watch::Sender<usize>,
    /// Cancelled when the fake is dropped: stops the server and every
    /// stream still being written.
    shutdown: CancellationToken,
}

#[derive(Debug, Default)]
struct Log {
    requests: Vec<RecordedRequest>,
    next_turn: usize,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        // A panic elsewhere while holding the lock leaves a consistent log
        // (each push is one step): keep serving.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a request is, by method, path and (for Gemini's router) body.
enum Endpoint {
    /// A model turn: takes the next turn of the script.
    Turn(TurnEndpoint),
    /// Answered without a turn.
    Free(FreeEndpoint),
}

enum TurnEndpoint {
    Messages,
    Responses,
    Chat,
    Gemini { model: String, shape: gemini::Shape },
}

enum FreeEndpoint {
    CountTokens,
    GeminiCountTokens,
    /// Gemini's model router: a request for JSON of a schema.
    GeminiRouter {
        model: String,
    },
}

impl Endpoint {
    fn of(method: &Method, uri: &Uri, body: &Value) -> Option<Endpoint> {
        if method != Method::POST {
            return None;
        }
        let endpoint = match uri.path() {
            "/v1/messages" => Endpoint::Turn(TurnEndpoint::Messages),
            "/v1/messages/count_tokens" => Endpoint::Free(FreeEndpoint::CountTokens),
            "/v1/responses" => Endpoint::Turn(TurnEndpoint::Responses),
            "/v1/chat/completions" => Endpoint::Turn(TurnEndpoint::Chat),
            path => {
                let (model, method) = path.strip_prefix("/v1beta/models/")?.split_once(':')?;
                let model = model.to_owned();
                let sse = uri
                    .query()
                    .is_some_and(|query| query.split('&').any(|pair| pair == "alt=sse"));
                match method {
                    "streamGenerateContent" => Endpoint::Turn(TurnEndpoint::Gemini {
                        model,
                        shape: if sse {
                            gemini::Shape::Sse
                        } else {
                            gemini::Shape::Array
                        },
                    }),
                    "generateContent" if gemini::json_schema(body).is_some() => {
                        Endpoint::Free(FreeEndpoint::GeminiRouter { model })
                    }
                    "generateContent" => Endpoint::Turn(TurnEndpoint::Gemini {
                        model,
                        shape: gemini::Shape::Whole,
                    }),
                    "countTokens" => Endpoint::Free(FreeEndpoint::GeminiCountTokens),
                    _ => return None,
                }
            }
        };
        Some(endpoint)
    }

    fn protocol(&self) -> Protocol {
        match self {
            Endpoint::Turn(TurnEndpoint::Messages) | Endpoint::Free(FreeEndpoint::CountTokens) => {
                Protocol::Anthropic
            }
            Endpoint::Turn(TurnEndpoint::Responses) => Protocol::OpenAiResponses,
            Endpoint::Turn(TurnEndpoint::Chat) => Protocol::OpenAiChat,
            Endpoint::Turn(TurnEndpoint::Gemini { .. })
            | Endpoint::Free(FreeEndpoint::GeminiCountTokens | FreeEndpoint::GeminiRouter { .. }) => {
                Protocol::Gemini
            }
        }
    }

    /// The model asked for: Gemini's is in the path, the others' in the body.
    fn model(&self, body: &Value) -> String {
        match self {
            Endpoint::Turn(TurnEndpoint::Gemini { model, .. })
            | Endpoint::Free(FreeEndpoint::GeminiRouter { model }) => model.clone(),
            _ => body["model"].as_str().unwrap_or("fake-model").to_owned(),
        }
    }
}

fn error_body(protocol: Protocol, status: u16, message: &str) -> Value {
    match protocol {
        Protocol::Anthropic => anthropic::error_body(status, message),
        Protocol::OpenAiResponses | Protocol::OpenAiChat => responses::error_body(status, message),
        Protocol::Gemini => gemini::error_body(status, message),
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |path| path.as_str().to_owned());
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let endpoint = Endpoint::of(&method, &uri, &json);

    // Turns are given out in the order requests are recorded: one lock.
    // `turn`: for a model turn, the turn if one was left.
    let (seq, turn) = {
        let mut log = shared.lock();
        let seq = log.requests.len();
        let turn = match &endpoint {
            Some(Endpoint::Turn(_)) => {
                let index = log.next_turn;
                log.next_turn += 1;
                Some(shared.turns.get(index).map(|turn| (index, turn)))
            }
            _ => None,
        };
        log.requests.push(RecordedRequest {
            protocol: endpoint.as_ref().map(Endpoint::protocol),
            method: method.to_string(),
            path: path.clone(),
            headers: headers
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                    (name.as_str().to_owned(), value)
                })
                .collect(),
            body: json.clone(),
            turn: turn.flatten().map(|(index, _)| index),
        });
        shared.recorded.send_replace(log.requests.len());
        (seq, turn.flatten().map(|(_, turn)| turn))
    };

    let Some(endpoint) = endpoint else {
        let message = format!(
            "weir-fake-model serves no {method} {path}: it serves POST /v1/messages, \
             /v1/messages/count_tokens, /v1/responses, /v1/chat/completions and \
             /v1beta/models/{{model}}:streamGenerateContent|generateContent|countTokens"
        );
        return answer(
            Answer::Json {
                status: StatusCode::NOT_FOUND,
                body: json!({"error": {"code": 404, "message": message}}),
            },
            &shared,
        );
    };
    let protocol = endpoint.protocol();
    let request = Request {
        seq,
        model: endpoint.model(&json),
        stream: json["stream"] == true,
        input_tokens: tokens(body.len()),
        body: json,
    };

    let endpoint = match endpoint {
        Endpoint::Free(free) => {
            let answered = match free {
                FreeEndpoint::CountTokens => {
                    Answer::json(json!({"input_tokens": request.input_tokens}))
                }
                FreeEndpoint::GeminiCountTokens => {
                    Answer::json(json!({"totalTokens": request.input_tokens}))
                }
                FreeEndpoint::GeminiRouter { .. } => gemini::schema_answer(&request),
            };
            return answer(answered, &shared);
        }
        Endpoint::Turn(endpoint) => endpoint,
    };
    let Some(turn) = turn else {
        // 400 rather than a 5xx: no client here retries it with backoff, so
        // a test that ran out of turns fails fast, saying why.
        let message = format!(
            "weir-fake-model: request #{seq} ({method} {path}) came after the script's last \
             turn: the script has {} turn(s), all taken by earlier requests (see requests())",
            shared.turns.len()
        );
        let status = StatusCode::BAD_REQUEST;
        let body = error_body(protocol, status.as_u16(), &message);
        return answer(Answer::Json { status, body }, &shared);
    };

    // A call whose arguments come from the previous tool result (see fill.rs).
    let filled = match crate::fill::fill(turn, protocol, &request.body) {
        None => None,
        Some(Ok(filled)) => Some(filled),
        Some(Err(message)) => {
            let status = StatusCode::BAD_REQUEST;
            let body = error_body(protocol, status.as_u16(), &message);
            return answer(Answer::Json { status, body }, &shared);
        }
    };
    let turn = filled.as_ref().unwrap_or(turn);
    let (reply, streaming) = match Outcome::of(turn) {
        Outcome::Reply(reply, streaming) => (reply, streaming),
        Outcome::Error {
            status,
            message,
            body,
        } => {
            let body = body
                .cloned()
                .unwrap_or_else(|| error_body(protocol, status, message));
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return answer(Answer::Json { status, body }, &shared);
        }
    };
    let rendered = match endpoint {
        TurnEndpoint::Messages => anthropic::render(&reply, streaming, &request),
        TurnEndpoint::Responses => responses::render(&reply, streaming, &request),
        TurnEndpoint::Chat => chat::render(&reply, streaming, &request),
        TurnEndpoint::Gemini { shape, .. } => gemini::render(&reply, streaming, &request, shape),
    };
    answer(rendered, &shared)
}

fn answer(answer: Answer, shared: &Shared) -> Response {
    match answer {
        Answer::Json { status, body } => (status, axum::Json(body)).into_response(),
        Answer::Sse { frames, streaming } => {
            let (sender, receiver) = mpsc::channel(16);
            tokio::spawn(write_sse(
                frames,
                streaming,
                sender,
                shared.shutdown.clone(),
            ));
            let body = Body::from_stream(futures_util::stream::unfold(
                receiver,
                |mut receiver| async move { receiver.recv().await.map(|chunk| (chunk, receiver)) },
            ));
            (
                [
                    (header::CONTENT_TYPE, "text/event-stream"),
                    (header::CACHE_CONTROL, "no-cache"),
                ],
                body,
            )
                .into_response()
        }
    }
}

/// Writes `frames` to a response body, paced and cut as `streaming` says.
/// An `Err` sent into the body makes hyper abort the connection: that is
/// how a stream is dropped mid-answer.
async fn write_sse(
    frames: Vec<Frame>,
    streaming: Streaming,
    body: mpsc::Sender<io::Result<Bytes>>,
    shutdown: CancellationToken,
) {
    let delay = Duration::from_millis(streaming.delay_ms);
    // The frame before which `drop_after` cuts: the (n+1)-th delta, else the
    // frame after the last delta.
    let cut = streaming.drop_after.map(|after| {
        let deltas: Vec<usize> = frames
            .iter()
            .enumerate()
            .filter(|(_, frame)| matches!(frame, Frame::Delta(_)))
            .map(|(index, _)| index)
            .collect();
        deltas
            .get(after)
            .copied()
            .unwrap_or_else(|| deltas.last().map_or(0, |last| last + 1))
    });
    let mut deltas_sent = 0;
    for (index, frame) in frames.into_iter().enumerate() {
        if cut == Some(index) {
            // hyper buffers what it reads from the body and flushes it when
            // the body has nothing more for now; an error read straight
            // after the data would abort the connection with the data
            // still unsent. So let it take everything, then flush.
            while body.capacity() < body.max_capacity() && !body.is_closed() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = body
                .send(Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "weir-fake-model: connection dropped mid-answer, as scripted (drop_after)",
                )))
                .await;
            return;
        }
        let pause = match &frame {
            Frame::Delta(_) => deltas_sent > 0,
            Frame::Pause => true,
            Frame::Event(_) => false,
        };
        if pause && !delay.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = shutdown.cancelled() => {
                    let _ = body
                        .send(Err(io::Error::other("weir-fake-model: shut down mid-answer")))
                        .await;
                    return;
                }
            }
        }
        let text = match frame {
            Frame::Delta(text) => {
                deltas_sent += 1;
                text
            }
            Frame::Event(text) => text,
            Frame::Pause => continue,
        };
        let text = if streaming.keep_alive {
            format!(": keep-alive\n\n{text}")
        } else {
            text
        };
        if body.send(Ok(Bytes::from(text))).await.is_err() {
            // The client hung up.
            return;
        }
    }
}
