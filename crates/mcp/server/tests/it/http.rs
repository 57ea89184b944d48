//! The server over real HTTP: sessions, security, SSE, resume from the log.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::BoxStream;
use serde_json::{Value, json};
use weir_core::sse::{SseEvent, SseParser};
use weir_runtime::{EventLog, MemoryLog};
use weir_web::GuardOptions as HttpOptions;

use crate::support::server;

async fn start(options: HttpOptions) -> (String, Arc<dyn EventLog>) {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let server = server(log.clone(), 512 * 1024).await;
    let (bound, address) = tokio::sync::oneshot::channel::<SocketAddr>();
    tokio::spawn(crate::support::serve_http(
        server,
        "127.0.0.1:0".parse().unwrap(),
        options,
        |addr| {
            bound.send(addr).unwrap();
        },
    ));
    (format!("http://{}", address.await.unwrap()), log)
}

/// Reads SSE events from a response body, with weir-core's parser.
struct SseReader {
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    parser: SseParser,
    events: std::collections::VecDeque<SseEvent>,
}

impl SseReader {
    fn new(response: reqwest::Response) -> SseReader {
        let body = response
            .bytes_stream()
            .map(|chunk| chunk.map(|bytes| bytes.to_vec()))
            .boxed();
        SseReader {
            body,
            parser: SseParser::new(usize::MAX),
            events: std::collections::VecDeque::new(),
        }
    }

    async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(event) = self.events.pop_front() {
                return Some(event);
            }
            let chunk = self.body.next().await?.ok()?;
            let events = self.parser.push(&chunk).expect("no bound");
            self.events.extend(events);
        }
    }
}

struct McpHttp {
    url: String,
    http: reqwest::Client,
    session: Option<String>,
}

impl McpHttp {
    fn new(base: &str) -> McpHttp {
        McpHttp {
            url: format!("{base}/mcp"),
            http: reqwest::Client::new(),
            session: None,
        }
    }

    fn post(&self, body: Value) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(session) = &self.session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request
    }

    async fn initialize(&mut self, capabilities: Value) {
        let response = self
            .post(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        self.session = Some(
            response.headers()["mcp-session-id"]
                .to_str()
                .unwrap()
                .to_owned(),
        );
        let initialized = self
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .send()
            .await
            .unwrap();
        assert_eq!(initialized.status(), 202);
    }
}

#[tokio::test]
async fn foreign_hosts_origins_and_missing_tokens_are_refused() {
    let (base, _) = start(HttpOptions {
        credentials: weir_web::credentials::Credentials::single("s3cret"),
        ..HttpOptions::default()
    })
    .await;
    let client = reqwest::Client::new();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let send = |origin: Option<&str>, host: Option<&str>, token: Option<&str>| {
        let mut request = client
            .post(format!("{base}/mcp"))
            .header("content-type", "application/json")
            .json(&ping);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        request.send()
    };
    assert_eq!(
        send(Some("http://evil.example.com"), None, Some("s3cret"))
            .await
            .unwrap()
            .status(),
        403
    );
    assert_eq!(
        send(None, Some("evil.example.com"), Some("s3cret"))
            .await
            .unwrap()
            .status(),
        403
    );
    let no_token = send(None, None, None).await.unwrap();
    assert_eq!(no_token.status(), 401);
    assert_eq!(no_token.headers()["www-authenticate"], "Bearer");
    assert_eq!(send(None, None, Some("wrong")).await.unwrap().status(), 401);
    let ok = send(Some("http://localhost:3000"), None, Some("s3cret"))
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(
        ok.json::<Value>().await.unwrap()["result"]["resultType"],
        "complete"
    );
}

#[tokio::test]
async fn sessions_are_required_checked_and_ended_by_delete() {
    let (base, _) = start(HttpOptions::default()).await;
    let mut client = McpHttp::new(&base);
    let no_session = client
        .post(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_session.status(), 400);
    client.session = Some("not-a-session".into());
    assert_eq!(
        client
            .post(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
    client.session = None;
    client.initialize(json!({})).await;
    let pong = client
        .post(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(pong.json::<Value>().await.unwrap()["result"], json!({}));
    let malformed = client
        .http
        .post(&client.url)
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    assert_eq!(malformed.status(), 400);
    assert_eq!(
        malformed.json::<Value>().await.unwrap()["error"]["code"],
        -32700
    );
    let wrong_type = client
        .http
        .post(&client.url)
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_type.status(), 415);
    let session = client.session.clone().unwrap();
    let deleted = client
        .http
        .delete(&client.url)
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 200);
    assert_eq!(
        client
            .post(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
            .send()
            .await
            .unwrap()
            .status(),
        404
    );
}

/// Resume (docs/design.md, "Delivery projections"): a client dropped at random points of a 10,000-item
/// stream, resuming each time with `Last-Event-ID`, receives every item
/// exactly once, then the response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_resumes_from_last_event_id_without_loss_or_repeat() {
    let (base, _) = start(HttpOptions::default()).await;
    let mut client = McpHttp::new(&base);
    client.initialize(json!({"partialResults": {}})).await;
    let count = 10_000u64;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "lines", "arguments": {"count": count},
        "_meta": {"partialResultToken": "items", "progressToken": "p"}}});
    let mut stream = SseReader::new(client.post(call).send().await.unwrap());
    let mut seen = vec![0u32; count as usize];
    let mut last_id: Option<String> = None;
    let mut last_progress = 0.0;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64; // xorshift: deterministic "random" drop points
    let mut drops = 0;
    let response = 'outer: loop {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let drop_after = 1 + rng % 2500;
        for _ in 0..drop_after {
            let Some(event) = stream.next().await else {
                panic!("stream ended without a response")
            };
            let message: Value = serde_json::from_str(&event.data).unwrap();
            if message.get("id") == Some(&json!(7)) {
                break 'outer message;
            }
            if let Some(id) = event.id {
                last_id = Some(id);
            }
            match message["method"].as_str() {
                Some("notifications/tools/partial_result") => {
                    seen[message["params"]["seq"].as_u64().unwrap() as usize] += 1
                }
                Some("notifications/progress") => {
                    let progress = message["params"]["progress"].as_f64().unwrap();
                    assert!(
                        progress > last_progress,
                        "progress went from {last_progress} to {progress}"
                    );
                    last_progress = progress;
                }
                other => panic!("unexpected message {other:?}"),
            }
        }
        // Drop the connection and resume where we were.
        drops += 1;
        let resumed = client
            .http
            .get(&client.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", client.session.as_ref().unwrap())
            .header("last-event-id", last_id.clone().expect("saw an event id"))
            .send()
            .await
            .unwrap();
        assert_eq!(resumed.status(), 200);
        stream = SseReader::new(resumed);
    };
    assert!(
        drops >= 3,
        "only {drops} drops: the test did not exercise resume"
    );
    let missing = seen.iter().filter(|n| **n == 0).count();
    let repeated = seen.iter().filter(|n| **n > 1).count();
    assert_eq!((missing, repeated), (0, 0), "after {drops} drops");
    assert_eq!(
        response["result"]["structuredContent"],
        json!({"count": count})
    );
}

#[tokio::test]
async fn closing_a_stateless_stream_cancels_its_run() {
    let (base, log) = start(HttpOptions::default()).await;
    let http = reqwest::Client::new();
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "lines", "arguments": {"count": 100000, "pause_ms": 10},
        "_meta": {"progressToken": 1, "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let response = http
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .json(&call)
        .send()
        .await
        .unwrap();
    let mut stream = SseReader::new(response);
    stream.next().await.expect("a first progress event");
    drop(stream);
    let mut state = String::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let runs = log.list_runs(&Default::default()).await.unwrap();
        state = runs[0].state.to_string();
        if state == "canceled" {
            break;
        }
    }
    assert_eq!(state, "canceled");
}

#[tokio::test]
async fn stateless_requests_need_their_meta_and_removed_methods_are_404() {
    let (base, _) = start(HttpOptions::default()).await;
    let http = reqwest::Client::new();
    let post = |body: Value| {
        http.post(format!("{base}/mcp"))
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .json(&body)
            .send()
    };
    let bare = post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}))
        .await
        .unwrap();
    assert_eq!(bare.status(), 400);
    let error = bare.json::<Value>().await.unwrap()["error"].clone();
    assert_eq!(error["code"], -32602);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("clientCapabilities"),
        "{error}"
    );
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    for removed in ["ping", "initialize", "logging/setLevel", "no/such/method"] {
        let response =
            post(json!({"jsonrpc": "2.0", "id": 2, "method": removed, "params": {"_meta": meta}}))
                .await
                .unwrap();
        assert_eq!(response.status(), 404, "{removed}");
        assert_eq!(
            response.json::<Value>().await.unwrap()["error"]["code"],
            -32601
        );
    }
}

#[tokio::test]
async fn header_and_meta_versions_must_agree() {
    let (base, _) = start(HttpOptions::default()).await;
    let response = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert_eq!(
        response.json::<Value>().await.unwrap()["error"]["code"],
        -32020
    );
}

#[tokio::test]
async fn run_events_are_plain_sse_resumable_by_last_event_id() {
    let (base, log) = start(HttpOptions::default()).await;
    let mut client = McpHttp::new(&base);
    client.initialize(json!({})).await;
    let done = client
        .post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "lines", "arguments": {"count": 3}}}))
        .send()
        .await
        .unwrap();
    SseReader::new(done).next().await.unwrap();
    let run_id = log.list_runs(&Default::default()).await.unwrap()[0]
        .run_id
        .clone();
    let http = reqwest::Client::new();
    let mut all = SseReader::new(
        http.get(format!("{base}/runs/{run_id}/events"))
            .send()
            .await
            .unwrap(),
    );
    let mut names = Vec::new();
    while let Some(event) = all.next().await {
        names.push(event.event.unwrap());
    }
    assert_eq!(
        names,
        [
            "meta", "chunk", "progress", "chunk", "progress", "chunk", "progress", "done"
        ]
    );
    let mut resumed = SseReader::new(
        http.get(format!("{base}/runs/{run_id}/events"))
            .header("last-event-id", "5")
            .send()
            .await
            .unwrap(),
    );
    let first = resumed.next().await.unwrap();
    assert_eq!(first.id.as_deref(), Some("6"));
    assert_eq!(
        serde_json::from_str::<Value>(&first.data).unwrap()["seq"],
        6
    );
    let missing = http
        .get(format!("{base}/runs/nope/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);
}
