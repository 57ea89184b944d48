//! The script's rules (turns in order across protocols, running out), the
//! record of requests, shutting down, and the binary.

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use weir_fake_model::{Error, FakeModel, FinishReason, Protocol, Script, Streaming, Turn};

use crate::support::{deltas, fake, post, stream};

#[tokio::test]
async fn turns_are_taken_in_order_whatever_the_protocol_and_every_request_is_recorded() {
    let fake = fake([
        Turn::text("one"),
        Turn::text("two"),
        Turn::text("three"),
        Turn::text("four"),
    ]);
    let client = reqwest::Client::new();
    let first = client
        .post(format!("{}/v1/messages?beta=true", fake.url()))
        .header("x-api-key", "dummy")
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "m", "stream": true, "messages": []}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(first.contains(r#""text":"one""#));
    let second = stream(&fake, "/v1/responses", json!({"stream": true, "input": []})).await;
    assert!(second.iter().any(|event| event.json()["delta"] == "two"));
    let third = stream(
        &fake,
        "/v1beta/models/g:streamGenerateContent?alt=sse",
        json!({"contents": []}),
    )
    .await;
    assert_eq!(
        third[0].json()["candidates"][0]["content"]["parts"][0]["text"],
        "three"
    );
    let fourth = post(&fake, "/v1/chat/completions", json!({"stream": true}))
        .await
        .text()
        .await
        .unwrap();
    assert!(fourth.contains(r#""content":"four""#));

    let requests = fake.requests();
    let summary: Vec<(Option<Protocol>, &str, Option<usize>)> = requests
        .iter()
        .map(|request| (request.protocol, request.path.as_str(), request.turn))
        .collect();
    assert_eq!(
        summary,
        [
            (Some(Protocol::Anthropic), "/v1/messages?beta=true", Some(0)),
            (Some(Protocol::OpenAiResponses), "/v1/responses", Some(1)),
            (
                Some(Protocol::Gemini),
                "/v1beta/models/g:streamGenerateContent?alt=sse",
                Some(2)
            ),
            (Some(Protocol::OpenAiChat), "/v1/chat/completions", Some(3)),
        ]
    );
    let first = &requests[0];
    assert_eq!(first.method, "POST");
    assert_eq!(first.header("X-Api-Key"), Some("dummy"));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(
        first.body,
        json!({"model": "m", "stream": true, "messages": []})
    );
}

#[tokio::test]
async fn a_request_after_the_last_turn_gets_an_error_naming_it_in_its_protocol_shape() {
    let fake = fake([Turn::text("only")]);
    post(&fake, "/v1/chat/completions", json!({"stream": true}))
        .await
        .text()
        .await
        .unwrap();

    // (path, where the message is in the body)
    let cases = [
        ("/v1/messages", "/error/message"),
        ("/v1/responses", "/error/message"),
        (
            "/v1beta/models/g:streamGenerateContent?alt=sse",
            "/error/message",
        ),
        ("/v1/chat/completions", "/error/message"),
    ];
    for (number, (path, pointer)) in cases.into_iter().enumerate() {
        let response = post(&fake, path, json!({"stream": true})).await;
        assert_eq!(response.status(), 400, "{path}");
        let body: Value = response.json().await.unwrap();
        let message = body
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default();
        let request = format!("request #{} (POST {path})", number + 1);
        assert!(message.contains(&request), "{path}: {message}");
        assert!(message.contains("the script has 1 turn(s)"), "{message}");
    }
    // Each in its protocol's own error shape.
    let anthropic: Value = post(&fake, "/v1/messages", json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(anthropic["type"], "error");
    assert_eq!(anthropic["error"]["type"], "invalid_request_error");

    let turns: Vec<Option<usize>> = fake.requests().iter().map(|request| request.turn).collect();
    assert_eq!(turns, [Some(0), None, None, None, None, None]);
}

#[tokio::test]
async fn an_unknown_path_gets_a_404_naming_what_is_served_and_is_recorded() {
    let fake = fake([Turn::text("unused")]);
    let response = reqwest::get(format!("{}/v1/models", fake.url()))
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("GET /v1/models"), "{message}");
    assert!(message.contains("/v1/chat/completions"), "{message}");

    let requests = fake.requests();
    assert_eq!(requests[0].protocol, None);
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].body, Value::Null);
    assert_eq!(requests[0].turn, None);
    // The turn is still there.
    let body = post(&fake, "/v1/chat/completions", json!({"stream": true}))
        .await
        .text()
        .await
        .unwrap();
    assert!(body.contains("unused"));
}

#[test]
fn the_json_form_reads_as_the_types_do() {
    let json = r#"{"turns": [
        {"type": "text", "text": "Hello!", "stream": {"deltas": 3, "delay_ms": 50}},
        {"type": "tool_call", "text": "Let me look.", "name": "Bash", "input": {"command": "ls"}},
        {"type": "thinking", "thinking": "The user wants a greeting.", "text": "Hi."},
        {"type": "tool_search", "query": "run code"},
        {"type": "namespaced_call", "namespace": "mcp__weir", "name": "list_languages", "input": {}},
        {"type": "error", "status": 500, "message": "scripted failure"},
        {"type": "error", "status": 400},
        {"type": "text", "text": "x", "stream": {"done": false, "finish_reason": "late", "keep_alive": true, "drop_after": 1}}
    ]}"#;
    let script: Script = serde_json::from_str(json).unwrap();
    let expected = Script::new([
        Turn::text("Hello!").streamed(Streaming {
            delay_ms: 50,
            ..deltas(3)
        }),
        Turn::ToolCall {
            text: Some("Let me look.".into()),
            name: "Bash".into(),
            input: json!({"command": "ls"}),
            stream: Streaming::default(),
        },
        Turn::thinking("The user wants a greeting.", "Hi."),
        Turn::tool_search("run code"),
        Turn::namespaced_call("mcp__weir", "list_languages", json!({})),
        Turn::error(500, "scripted failure"),
        Turn::error(400, "scripted error"),
        Turn::text("x").streamed(Streaming {
            done: false,
            finish_reason: FinishReason::Late,
            keep_alive: true,
            drop_after: Some(1),
            ..Streaming::default()
        }),
    ]);
    assert_eq!(script, expected);
    // And back: serializing gives the same script.
    let again: Script = serde_json::from_value(serde_json::to_value(&script).unwrap()).unwrap();
    assert_eq!(again, script);

    // Misspelt fields are refused, not ignored.
    let typo = serde_json::from_str::<Script>(r#"{"turns": [{"type": "text", "txt": "x"}]}"#);
    assert!(typo.unwrap_err().to_string().contains("txt"));
    let typo = serde_json::from_str::<Script>(
        r#"{"turns": [{"type": "text", "text": "x", "stream": {"delta": 2}}]}"#,
    );
    assert!(typo.unwrap_err().to_string().contains("delta"));
}

#[test]
fn script_files_that_cannot_be_read_or_parsed_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    assert!(matches!(
        Script::from_file(&missing),
        Err(Error::ReadScript { path, .. }) if path == missing
    ));
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"turns": [{"type": "song"}]}"#).unwrap();
    let error = Script::from_file(&bad).unwrap_err();
    assert!(matches!(&error, Error::ParseScript { path, .. } if *path == bad));
    assert!(error.to_string().contains("bad.json"), "{error}");

    // And outside a runtime, starting says what to do.
    assert!(matches!(
        FakeModel::start(Script::default()),
        Err(Error::NoRuntime)
    ));
}

#[tokio::test]
async fn shutting_down_cuts_a_slow_stream_and_frees_the_port() {
    let fake = fake([Turn::text("abcdef").streamed(Streaming {
        delay_ms: 10_000,
        ..deltas(6)
    })]);
    let url = fake.url().to_owned();
    let response = post(&fake, "/v1/chat/completions", json!({"stream": true})).await;
    let mut body = response.bytes_stream();
    // The first delta comes at once; the second would take 10 s.
    let first = body.next().await.unwrap().unwrap();
    assert!(std::str::from_utf8(&first).unwrap().contains("role"));

    let started = std::time::Instant::now();
    fake.shutdown().await;
    assert!(started.elapsed() < Duration::from_secs(5));
    // What was left of the stream ends broken, not as a complete answer.
    let mut broke = false;
    while let Some(chunk) = body.next().await {
        broke |= chunk.is_err();
    }
    assert!(broke, "a stream cut by shutdown ends with an error");
    assert!(
        reqwest::get(format!("{url}/v1/models")).await.is_err(),
        "nothing listens on {url} any more"
    );
}

#[tokio::test]
async fn wait_for_requests_returns_once_enough_have_arrived() {
    let fake = fake([Turn::text("hi")]);
    let url = fake.url().to_owned();
    let client = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        reqwest::Client::new()
            .post(format!("{url}/v1/messages/count_tokens"))
            .json(&json!({}))
            .send()
            .await
            .unwrap();
    });
    let requests = tokio::time::timeout(Duration::from_secs(10), fake.wait_for_requests(1))
        .await
        .expect("the request arrives");
    assert_eq!(requests[0].path, "/v1/messages/count_tokens");
    client.await.unwrap();
}

#[tokio::test]
async fn the_binary_prints_its_url_and_serves_the_script_file() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns": [{"type": "text", "text": "from a file"}]}"#,
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_weir-fake-model"))
        .arg("--script")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim_end();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let body = reqwest::Client::new()
        .post(format!("{url}/v1/chat/completions"))
        .json(&json!({"stream": true}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains(r#""content":"from a file""#), "{body}");
    // It logs each request on stderr (read on a thread: the log line comes
    // a moment after the answer).
    let (sender, lines) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let _ = sender.send(line.unwrap_or_default());
        }
    });
    let logged = std::iter::from_fn(|| lines.recv_timeout(Duration::from_secs(10)).ok())
        .any(|line| line == "POST /v1/chat/completions -> turn 0");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(logged, "the request is logged on stderr");

    // A bad argument: exit 2 and the usage.
    let output = Command::new(env!("CARGO_BIN_EXE_weir-fake-model"))
        .arg("--port")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("usage: weir-fake-model"));
}
