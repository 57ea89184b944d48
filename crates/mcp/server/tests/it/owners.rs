//! Runs have owners over HTTP: with named credentials a caller sees only
//! its own runs (an admin every run), and a session is its opener's.
//! The binary's own test (`crates/weir/tests/it/ownership.rs`) covers every
//! read path with a real program and a secret; this one is the server's.

use std::net::SocketAddr;

use serde_json::{Value, json};
use weir_runtime::{EventLog, MemoryLog};
use weir_web::GuardOptions as HttpOptions;
use weir_web::credentials::Credentials;

use crate::support::server;

const TOKENS: &str = "alice token:alice-token\nbob token:bob-token\nroot token:root-token admin\n";

async fn start() -> String {
    let log: std::sync::Arc<dyn EventLog> = std::sync::Arc::new(MemoryLog::new());
    let server = server(log, 512 * 1024).await;
    let options = HttpOptions {
        credentials: Credentials::parse(TOKENS).unwrap(),
        ..HttpOptions::default()
    };
    let (bound, address) = tokio::sync::oneshot::channel::<SocketAddr>();
    tokio::spawn(crate::support::serve_http(
        server,
        "127.0.0.1:0".parse().unwrap(),
        options,
        |addr| {
            bound.send(addr).unwrap();
        },
    ));
    format!("http://{}", address.await.unwrap())
}

/// A stateless request as `token`: the JSON-RPC answer (the last SSE data
/// line of a streamed one).
async fn stateless(base: &str, token: &str, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = reqwest::Client::new()
        .post(format!("{base}/mcp"))
        .bearer_auth(token)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // A JSON answer, or the last event of a stream (weir-core's parser).
    let data = weir_core::sse::SseParser::new(usize::MAX)
        .push(body.as_bytes())
        .expect("no bound")
        .pop()
        .map_or(body, |event| event.data);
    serde_json::from_str(&data).unwrap()
}

async fn runs_of(base: &str, token: &str) -> Vec<(String, String)> {
    let listed = stateless(
        base,
        token,
        "tools/call",
        json!({"name": "runs_list", "arguments": {}}),
    )
    .await;
    listed["result"]["structuredContent"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| {
            (
                run["run_id"].as_str().unwrap().to_owned(),
                run["owner"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_caller_sees_its_own_runs_and_an_admin_every_run() {
    let base = start().await;
    let call = json!({"name": "lines", "arguments": {"count": 1}});
    for token in ["alice-token", "bob-token"] {
        let done = stateless(&base, token, "tools/call", call.clone()).await;
        assert_ne!(done["result"]["isError"], true, "{done}");
    }
    let alices = runs_of(&base, "alice-token").await;
    let bobs = runs_of(&base, "bob-token").await;
    assert_eq!(alices.len(), 1);
    assert_eq!(alices[0].1, "alice");
    assert_eq!(bobs.len(), 1);
    assert_eq!(bobs[0].1, "bob");
    let all = runs_of(&base, "root-token").await;
    assert_eq!(all, [bobs[0].clone(), alices[0].clone()]);

    let get = |token: &'static str, run_id: String| {
        let base = base.clone();
        async move {
            stateless(
                &base,
                token,
                "tools/call",
                json!({"name": "runs_get", "arguments": {"run_id": run_id}}),
            )
            .await
        }
    };
    let refused = get("bob-token", alices[0].0.clone()).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert_eq!(
        refused["result"]["content"][0]["text"],
        format!("no run {}; list runs with runs_list", alices[0].0)
    );
    let own = get("alice-token", alices[0].0.clone()).await;
    assert_eq!(own["result"]["structuredContent"]["run"]["owner"], "alice");
    let task = stateless(
        &base,
        "bob-token",
        "tasks/get",
        json!({"taskId": alices[0].0}),
    )
    .await;
    assert_eq!(task["error"]["code"], -32602, "{task}");
}

#[tokio::test]
async fn a_session_is_its_openers() {
    let base = start().await;
    let client = reqwest::Client::new();
    let post = |token: &str, session: Option<&str>, body: Value| {
        let mut request = client
            .post(format!("{base}/mcp"))
            .bearer_auth(token)
            .json(&body);
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let opened = post(
        "alice-token",
        None,
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"}}}),
    )
    .await
    .unwrap();
    let session = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let borrowed = post("bob-token", Some(&session), ping.clone())
        .await
        .unwrap();
    assert_eq!(borrowed.status(), 404);
    let admin = post("root-token", Some(&session), ping.clone())
        .await
        .unwrap();
    assert_eq!(
        admin.status(),
        404,
        "a session is its opener's, admin or not"
    );
    let ended = client
        .delete(format!("{base}/mcp"))
        .bearer_auth("bob-token")
        .header("mcp-session-id", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), 404);
    let own = post("alice-token", Some(&session), ping).await.unwrap();
    assert_eq!(own.status(), 200);
}
