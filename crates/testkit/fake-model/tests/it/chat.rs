//! OpenAI Chat Completions, with the misbehaviours a client must survive.

use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use weir_fake_model::{FinishReason, Protocol, Streaming, Turn};

use crate::support::{deltas, events, fake, post};

fn request(stream: bool, include_usage: bool) -> Value {
    let mut request = json!({
        "model": "chat-test", "stream": stream,
        "messages": [{"role": "user", "content": "hi"}],
    });
    if include_usage {
        request["stream_options"] = json!({"include_usage": true});
    }
    request
}

/// A stream's body in a compact form, one entry per event: `role`,
/// `content:<text>`, `reasoning:<text>`, `call:<name>`, `args:<text>`,
/// `finish:<reason>` (alone, or appended to a delta's entry), `usage`,
/// `[DONE]`.
fn shape(body: &str) -> Vec<String> {
    events(body)
        .iter()
        .map(|event| {
            if event.data == "[DONE]" {
                return "[DONE]".to_owned();
            }
            let chunk = event.json();
            assert_eq!(chunk["object"], "chat.completion.chunk");
            assert!(event.name.is_none());
            let Some(choice) = chunk["choices"].get(0) else {
                assert!(chunk["usage"]["total_tokens"].as_u64().unwrap() > 0);
                return "usage".to_owned();
            };
            let delta = &choice["delta"];
            let mut entry = if delta.get("role").is_some() {
                assert_eq!(delta["content"], "");
                "role".to_owned()
            } else if let Some(text) = delta["content"].as_str() {
                format!("content:{text}")
            } else if let Some(text) = delta["reasoning_content"].as_str() {
                format!("reasoning:{text}")
            } else if let Some(name) = delta["tool_calls"][0]["function"]["name"].as_str() {
                format!("call:{name}")
            } else if let Some(text) = delta["tool_calls"][0]["function"]["arguments"].as_str() {
                format!("args:{text}")
            } else {
                assert_eq!(delta, &json!({}));
                String::new()
            };
            if let Some(reason) = choice["finish_reason"].as_str() {
                if !entry.is_empty() {
                    entry.push(' ');
                }
                entry.push_str(&format!("finish:{reason}"));
            }
            entry
        })
        .collect()
}

#[tokio::test]
async fn text_streams_role_deltas_finish_usage_and_done() {
    let fake = fake([Turn::text("Hello world").streamed(deltas(2))]);
    let response = post(&fake, "/v1/chat/completions", request(true, true)).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    assert_eq!(
        shape(&response.text().await.unwrap()),
        [
            "role",
            "content:Hello ",
            "content:world",
            "finish:stop",
            "usage",
            "[DONE]"
        ]
    );
    assert_eq!(fake.requests()[0].protocol, Some(Protocol::OpenAiChat));
}

#[tokio::test]
async fn quirks_move_or_drop_the_finish_reason_and_done() {
    // (streaming, whether the request asks for usage, the expected shape)
    let cases = [
        (
            Streaming {
                done: false,
                ..deltas(2)
            },
            false,
            vec!["role", "content:ab", "content:cd", "finish:stop"],
        ),
        (
            Streaming {
                finish_reason: FinishReason::Never,
                ..deltas(2)
            },
            false,
            vec!["role", "content:ab", "content:cd", "[DONE]"],
        ),
        (
            Streaming {
                finish_reason: FinishReason::WithLastDelta,
                ..deltas(2)
            },
            true,
            vec![
                "role",
                "content:ab",
                "content:cd finish:stop",
                "usage",
                "[DONE]",
            ],
        ),
        (
            Streaming {
                finish_reason: FinishReason::Late,
                ..deltas(2)
            },
            true,
            vec![
                "role",
                "content:ab",
                "content:cd",
                "usage",
                "finish:stop",
                "[DONE]",
            ],
        ),
        (
            Streaming {
                finish_reason: FinishReason::Never,
                done: false,
                ..deltas(1)
            },
            false,
            vec!["role", "content:abcd"],
        ),
    ];
    for (streaming, include_usage, expected) in cases {
        let fake = fake([Turn::text("abcd").streamed(streaming.clone())]);
        let body = post(&fake, "/v1/chat/completions", request(true, include_usage))
            .await
            .text()
            .await
            .unwrap();
        assert_eq!(shape(&body), expected, "{streaming:?}");
    }
}

#[tokio::test]
async fn keep_alive_comments_come_before_every_event() {
    let fake = fake([Turn::text("ab").streamed(Streaming {
        keep_alive: true,
        ..deltas(2)
    })]);
    let body = post(&fake, "/v1/chat/completions", request(true, false))
        .await
        .text()
        .await
        .unwrap();
    let comments = body.lines().filter(|line| *line == ": keep-alive").count();
    let events = events(&body).len();
    assert_eq!(comments, events);
    assert_eq!(
        shape(&body),
        ["role", "content:a", "content:b", "finish:stop", "[DONE]"]
    );
}

/// Reads a body until it ends or breaks: (the text received, whether the
/// connection broke).
async fn read_until_broken(response: reqwest::Response) -> (String, bool) {
    let mut body = response.bytes_stream();
    let mut text = String::new();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(bytes) => text.push_str(std::str::from_utf8(&bytes).unwrap()),
            Err(_) => return (text, true),
        }
    }
    (text, false)
}

#[tokio::test]
async fn drop_after_cuts_the_connection_mid_answer() {
    let fake = fake([
        Turn::text("abcd").streamed(Streaming {
            drop_after: Some(2),
            ..deltas(4)
        }),
        // More than the deltas there are: cut after the last one, before the end.
        Turn::text("ab").streamed(Streaming {
            drop_after: Some(9),
            ..deltas(2)
        }),
        Turn::text("after").streamed(deltas(1)),
    ]);
    let (text, broken) =
        read_until_broken(post(&fake, "/v1/chat/completions", request(true, false)).await).await;
    assert!(broken, "the connection is cut: {text:?}");
    assert_eq!(shape(&text), ["role", "content:a", "content:b"]);

    let (text, broken) =
        read_until_broken(post(&fake, "/v1/chat/completions", request(true, false)).await).await;
    assert!(broken);
    assert_eq!(shape(&text), ["role", "content:a", "content:b"]);

    // The fake itself carries on.
    let body = post(&fake, "/v1/chat/completions", request(true, false))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        shape(&body),
        ["role", "content:after", "finish:stop", "[DONE]"]
    );
}

#[tokio::test]
async fn a_slow_stream_sends_each_delta_after_its_delay() {
    let delay = Duration::from_millis(150);
    let fake = fake([Turn::text("abc").streamed(Streaming {
        delay_ms: delay.as_millis() as u64,
        ..deltas(3)
    })]);
    let response = post(&fake, "/v1/chat/completions", request(true, false)).await;
    let mut body = response.bytes_stream();
    let mut arrivals = Vec::new();
    let mut text = String::new();
    while let Some(chunk) = body.next().await {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        // Each delta is written (and so read) on its own: note when each
        // content delta arrived (the role chunk's empty content is not one).
        let seen = text.matches(r#""content":""#).count().saturating_sub(1);
        arrivals.resize(seen.max(arrivals.len()), Instant::now());
    }
    assert_eq!(arrivals.len(), 3, "{text}");
    for pair in arrivals.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap >= delay - Duration::from_millis(30),
            "deltas {gap:?} apart, expected about {delay:?}"
        );
    }
}

#[tokio::test]
async fn tool_calls_and_reasoning_stream_as_compatible_servers_do() {
    let fake = fake([
        Turn::ToolCall {
            text: None,
            name: "search".into(),
            input: json!({"q": "x"}),
            stream: deltas(2),
        },
        Turn::thinking("hmm", "ok"),
    ]);
    let body = post(&fake, "/v1/chat/completions", request(true, false))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        shape(&body),
        [
            "role",
            "call:search",
            r#"args:{"q":"#,
            r#"args:"x"}"#,
            "finish:tool_calls",
            "[DONE]"
        ]
    );
    let call = events(&body)[1].json()["choices"][0]["delta"]["tool_calls"][0].clone();
    assert_eq!(call["index"], 0);
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().starts_with("call_"));

    let body = post(&fake, "/v1/chat/completions", request(true, false))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        shape(&body),
        [
            "role",
            "reasoning:hmm",
            "content:ok",
            "finish:stop",
            "[DONE]"
        ]
    );
}

#[tokio::test]
async fn without_stream_the_completion_is_one_object() {
    let fake = fake([
        Turn::ToolCall {
            text: Some("Searching.".into()),
            name: "search".into(),
            input: json!({"q": "x"}),
            stream: Streaming::default(),
        },
        Turn::error(429, "slow down"),
    ]);
    let completion: Value = post(&fake, "/v1/chat/completions", request(false, false))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(completion["object"], "chat.completion");
    let choice = &completion["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], "Searching.");
    assert_eq!(
        choice["message"]["tool_calls"][0]["function"],
        json!({"name": "search", "arguments": r#"{"q":"x"}"#})
    );
    assert!(completion["usage"]["total_tokens"].as_u64().unwrap() > 0);

    let error = post(&fake, "/v1/chat/completions", request(true, false)).await;
    assert_eq!(error.status(), 429);
    assert_eq!(
        error.json::<Value>().await.unwrap()["error"]["type"],
        "rate_limit_exceeded"
    );
}
