//! The streaming client against each quirk and fault, one test each, on a
//! real socket.

use std::time::{Duration, Instant};

use weir_core::{BreakerConfig, BreakerState};
use weir_pack_llmstxt::llm::{ChatClient, ChatConfig, ChatRequest, Ending, LlmError, Message};

use crate::script::{Reply, Scripted, Step, answer, done, finish, token};

fn config(url: &str) -> ChatConfig {
    ChatConfig {
        first_token_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        backoff: Duration::from_millis(20),
        ..ChatConfig::new(url, "scripted")
    }
}

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::system("Be brief."), Message::user("Say hello.")],
        max_tokens: 16,
        temperature: 0.0,
    }
}

/// Every token of the answer, or the error and the tokens before it.
async fn collect(client: &ChatClient) -> (Vec<String>, Result<Option<Ending>, LlmError>) {
    let mut stream = match client.start(&request()).await {
        Ok(stream) => stream,
        Err(error) => return (Vec::new(), Err(error)),
    };
    let mut tokens = Vec::new();
    loop {
        match stream.next().await {
            Ok(Some(token)) => tokens.push(token),
            Ok(None) => return (tokens, Ok(stream.ending())),
            Err(error) => return (tokens, Err(error)),
        }
    }
}

#[tokio::test]
async fn the_request_is_a_streamed_chat_completion() {
    let server = Scripted::start(vec![answer(&["Hel", "lo"])]).await;
    let client = ChatClient::new(config(&server.url)).unwrap();
    let (tokens, ending) = collect(&client).await;
    assert_eq!(tokens, ["Hel", "lo"]);
    assert_eq!(ending.unwrap(), Some(Ending::Done));
    let body = server.seen.lock().unwrap().requests[0].clone();
    assert_eq!(body["stream"], true);
    assert_eq!(body["model"], "scripted");
    assert_eq!(body["max_tokens"], 16);
    assert_eq!(body["messages"][1]["content"], "Say hello.");
    assert_eq!(client.breaker().state, BreakerState::Closed);
}

#[tokio::test]
async fn no_done_the_end_of_the_body_ends_the_answer() {
    // No [DONE], no finish_reason, keep-alive comments between tokens.
    let server = Scripted::start(vec![Reply::Stream(vec![
        Step::Send(": keep-alive\n\n".into()),
        token("a"),
        Step::Send(": ping\r\n\r\n".into()),
        token("b"),
    ])])
    .await;
    let client = ChatClient::new(config(&server.url)).unwrap();
    let mut stream = client.start(&request()).await.unwrap();
    let mut tokens = Vec::new();
    while let Some(token) = stream.next().await.unwrap() {
        tokens.push(token);
    }
    assert_eq!(tokens, ["a", "b"]);
    assert_eq!(stream.ending(), Some(Ending::EndOfBody));
    assert_eq!(stream.finish_reason(), None);
    assert_eq!(client.breaker().consecutive_failures, 0);
}

#[tokio::test]
async fn late_finish_reason_is_read_and_never_cuts_the_answer() {
    // The reason comes alone after the last token, then usage, then more
    // silence than the idle timeout with the connection left open: the
    // answer is whole (FinishThenSilence), not stalled.
    let usage = Step::Send("data: {\"choices\":[],\"usage\":{\"completion_tokens\":2}}\n\n".into());
    let server = Scripted::start(vec![
        Reply::Stream(vec![
            token("x"),
            token("y"),
            finish("length"),
            usage,
            Step::Hold,
        ]),
        // And a server that sends the reason before a last token.
        Reply::Stream(vec![token("x"), finish("stop"), token("y"), done()]),
    ])
    .await;
    let client = ChatClient::new(ChatConfig {
        idle_timeout: Duration::from_millis(300),
        ..config(&server.url)
    })
    .unwrap();
    let mut stream = client.start(&request()).await.unwrap();
    assert_eq!(stream.next().await.unwrap().as_deref(), Some("x"));
    assert_eq!(stream.next().await.unwrap().as_deref(), Some("y"));
    assert_eq!(stream.next().await.unwrap(), None);
    assert_eq!(stream.finish_reason(), Some("length"));
    assert_eq!(stream.ending(), Some(Ending::FinishThenSilence));
    let (tokens, ending) = collect(&client).await;
    assert_eq!(tokens, ["x", "y"], "a token after the reason is kept");
    assert_eq!(ending.unwrap(), Some(Ending::Done));
}

#[tokio::test]
async fn a_drop_mid_answer_is_an_error_after_the_tokens_not_a_short_answer() {
    let server = Scripted::start(vec![Reply::Stream(vec![
        token("one"),
        token(" two"),
        Step::Sleep(50),
        Step::Drop,
    ])])
    .await;
    let client = ChatClient::new(config(&server.url)).unwrap();
    let (tokens, ended) = collect(&client).await;
    assert_eq!(tokens, ["one", " two"]);
    let error = ended.unwrap_err();
    assert!(
        matches!(error, LlmError::Dropped { tokens: 2, .. }),
        "{error:?}"
    );
    assert_eq!(error.tokens_before(), 2);
    assert!(error.to_string().contains("incomplete"), "{error}");
    assert_eq!(server.requests(), 1, "never retried after a token");
    assert_eq!(client.breaker().consecutive_failures, 1);
}

#[tokio::test]
async fn a_500_then_success_is_retried_before_the_first_token() {
    let server = Scripted::start(vec![
        Reply::Status(500, r#"{"error":{"message":"warming up"}}"#),
        Reply::Stream(vec![token("ok"), done()]),
    ])
    .await;
    let client = ChatClient::new(config(&server.url)).unwrap();
    let mut stream = client.start(&request()).await.unwrap();
    assert_eq!(stream.attempts(), 2);
    assert_eq!(stream.next().await.unwrap().as_deref(), Some("ok"));
    assert_eq!(stream.next().await.unwrap(), None);
    assert_eq!(server.requests(), 2);
    assert_eq!(client.breaker().consecutive_failures, 0);

    // A client error is not retried, and says what the server said.
    let refused = Scripted::start(vec![Reply::Status(400, "unknown model")]).await;
    let client = ChatClient::new(config(&refused.url)).unwrap();
    let error = client.start(&request()).await.err().unwrap();
    assert!(
        matches!(&error, LlmError::Status { status: 400, body } if body == "unknown model"),
        "{error:?}"
    );
    assert_eq!(refused.requests(), 1);
}

#[tokio::test]
async fn a_slow_first_token_is_waited_for_within_its_timeout_and_retried_past_it() {
    let server = Scripted::start(vec![Reply::Stream(vec![
        Step::Send(": queued\n\n".into()),
        Step::Sleep(400),
        token("late"),
        done(),
    ])])
    .await;
    let client = ChatClient::new(config(&server.url)).unwrap();
    let mut stream = client.start(&request()).await.unwrap();
    let waited = stream.first_token_after().unwrap();
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert_eq!(stream.attempts(), 1);
    assert_eq!(stream.next().await.unwrap().as_deref(), Some("late"));

    // Past the timeout: each attempt gives up at the timeout, then the call.
    let client = ChatClient::new(ChatConfig {
        first_token_timeout: Duration::from_millis(150),
        retries: 1,
        ..config(&server.url)
    })
    .unwrap();
    let before = server.requests();
    let started = Instant::now();
    let error = client.start(&request()).await.err().unwrap();
    assert!(matches!(error, LlmError::FirstTokenTimeout(_)), "{error:?}");
    assert_eq!(server.requests() - before, 2);
    // Two attempts of 150 ms; without the timeout each would wait for the
    // token 400 ms in and succeed (the error above). The bound, generous
    // for a loaded machine, fails a timeout that fires seconds late.
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "gave up at the timeout, {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_breaker_opens_after_failed_calls_and_refuses_without_a_request() {
    let server = Scripted::start(vec![Reply::Status(503, "overloaded")]).await;
    let client = ChatClient::new(ChatConfig {
        retries: 0,
        breaker: BreakerConfig {
            failure_threshold: 2,
            cooldown_ms: 60_000,
        },
        ..config(&server.url)
    })
    .unwrap();
    for _ in 0..2 {
        assert!(matches!(
            client.start(&request()).await,
            Err(LlmError::Status { status: 503, .. })
        ));
    }
    let refused = client.start(&request()).await.err().unwrap();
    assert!(
        matches!(refused, LlmError::BreakerOpen { failures: 2, .. }),
        "{refused:?}"
    );
    assert_eq!(server.requests(), 2, "a refused call sends nothing");
    assert_eq!(client.breaker().state, BreakerState::Open);
}

#[tokio::test]
async fn an_error_in_the_stream_is_reported_with_the_tokens_before_it() {
    let server = Scripted::start(vec![Reply::Stream(vec![
        token("par"),
        Step::Send("data: {\"error\":{\"message\":\"model crashed\"}}\n\n".into()),
    ])])
    .await;
    let client = ChatClient::new(config(&server.url)).unwrap();
    let (tokens, ended) = collect(&client).await;
    assert_eq!(tokens, ["par"]);
    assert!(
        matches!(ended, Err(LlmError::Server { tokens: 1, ref message }) if message == "model crashed")
    );
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let server = Scripted::start(vec![Reply::Stream(vec![
        token("a"),
        token("b"),
        Step::Hold,
    ])])
    .await;
    let client = ChatClient::new(config(&server.url)).unwrap();
    let mut stream = client.start(&request()).await.unwrap();
    assert_eq!(stream.next().await.unwrap().as_deref(), Some("a"));
    let left = server.client_left.notified();
    drop(stream);
    tokio::time::timeout(Duration::from_secs(2), left)
        .await
        .expect("the server sees the client close its connection");
    assert_eq!(server.seen.lock().unwrap().closed_by_client, 1);
}

#[tokio::test]
async fn an_unreachable_endpoint_is_retried_then_named() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = ChatClient::new(ChatConfig {
        retries: 1,
        ..config(&format!("http://127.0.0.1:{port}/v1/"))
    })
    .unwrap();
    assert_eq!(
        client.url(),
        format!("http://127.0.0.1:{port}/v1/chat/completions")
    );
    let error = client.start(&request()).await.err().unwrap();
    assert!(matches!(error, LlmError::Unreachable { .. }), "{error:?}");
    assert!(error.to_string().contains("--llm-endpoint"), "{error}");
    assert!(matches!(
        ChatClient::new(ChatConfig::new("ftp://x", "m")),
        Err(LlmError::BadEndpoint { .. })
    ));
}

/// The client with small bounds, so that each is reached in a few steps.
fn bounded(url: &str) -> ChatConfig {
    ChatConfig {
        max_line_bytes: 256,
        max_body_bytes: 4096,
        total_timeout: Duration::from_secs(3),
        retries: 0,
        ..config(url)
    }
}

#[tokio::test]
async fn each_bound_ends_the_call_with_its_own_error_and_closes_the_connection() {
    // One line with no end.
    let server = Scripted::start(vec![Reply::Stream(vec![
        Step::Send(format!("data: {}", "a".repeat(300))),
        Step::Hold,
    ])])
    .await;
    let client = ChatClient::new(bounded(&server.url)).unwrap();
    let left = server.client_left.notified();
    let (_, ending) = collect(&client).await;
    let error = ending.unwrap_err();
    assert!(
        matches!(error, LlmError::LineTooLong { limit: 256, .. }),
        "{error}"
    );
    assert!(error.is_bound());
    tokio::time::timeout(Duration::from_secs(2), left)
        .await
        .expect("the connection is closed");

    // Keep-alives past the body's bound.
    let server = Scripted::start(vec![Reply::Stream(vec![
        token("Hi"),
        Step::Send(": keep-alive\n\n".repeat(400)),
        Step::Hold,
    ])])
    .await;
    let client = ChatClient::new(bounded(&server.url)).unwrap();
    let (tokens, ending) = collect(&client).await;
    assert_eq!(tokens, ["Hi"]);
    let error = ending.unwrap_err();
    assert!(
        matches!(
            error,
            LlmError::BodyTooLarge {
                limit: 4096,
                tokens: 1
            }
        ),
        "{error}"
    );

    // More pieces than max_tokens (16) allows.
    let server = Scripted::start(vec![Reply::Stream(
        (0..100).map(|_| token("w ")).chain([Step::Hold]).collect(),
    )])
    .await;
    let client = ChatClient::new(ChatConfig {
        max_body_bytes: 1 << 20,
        ..bounded(&server.url)
    })
    .unwrap();
    let (tokens, ending) = collect(&client).await;
    let error = ending.unwrap_err();
    assert!(
        matches!(error, LlmError::AnswerTooLong { max_tokens: 16, .. }),
        "{error}"
    );
    assert_eq!(tokens.len(), 16 + 4 + 8, "{error}");
    // One piece of more characters than 16 tokens make.
    let server = Scripted::start(vec![answer(&[&"long ".repeat(200)])]).await;
    let client = ChatClient::new(ChatConfig {
        max_line_bytes: 1 << 20,
        ..bounded(&server.url)
    })
    .unwrap();
    let (tokens, ending) = collect(&client).await;
    assert!(tokens.is_empty());
    assert!(
        matches!(ending, Err(LlmError::AnswerTooLong { .. })),
        "{ending:?}"
    );

    // A keep-alive now and then, forever: the total time ends it.
    let server = Scripted::start(vec![Reply::Stream(
        [token("Hi")]
            .into_iter()
            .chain((0..100).flat_map(|_| [Step::Sleep(100), Step::Send(": ping\n\n".into())]))
            .collect(),
    )])
    .await;
    let client = ChatClient::new(bounded(&server.url)).unwrap();
    let started = Instant::now();
    let (_, ending) = collect(&client).await;
    let error = ending.unwrap_err();
    assert!(
        matches!(error, LlmError::TimedOut { tokens: 1, .. }),
        "{error}"
    );
    assert!(error.to_string().contains("longer than 3 s"), "{error}");
    // Not before the 3 s total; after it, generously for a loaded machine,
    // yet well before the stream's own end (100 pings 100 ms apart).
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(7),
        "{took:?}"
    );
}

#[tokio::test]
async fn an_error_body_is_read_only_in_part() {
    let body: &'static str = Box::leak("x".repeat(1 << 20).into_boxed_str());
    let server = Scripted::start(vec![Reply::Status(500, body)]).await;
    let client = ChatClient::new(bounded(&server.url)).unwrap();
    let (_, ending) = collect(&client).await;
    match ending {
        Err(LlmError::Status { status: 500, body }) => assert_eq!(body.len(), 300),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn retries_stop_at_the_total_time() {
    // Every attempt waits out its first-token timeout; the total is shorter
    // than three of them.
    let server = Scripted::start(vec![Reply::Stream(vec![Step::Hold])]).await;
    let client = ChatClient::new(ChatConfig {
        first_token_timeout: Duration::from_millis(800),
        total_timeout: Duration::from_secs(1),
        retries: 5,
        ..config(&server.url)
    })
    .unwrap();
    let started = Instant::now();
    let error = client.start(&request()).await.err().unwrap();
    assert!(
        matches!(
            error,
            LlmError::TimedOut { .. } | LlmError::FirstTokenTimeout(_)
        ),
        "{error}"
    );
    // The 1 s total, generously for a loaded machine, yet under the 4.8 s
    // and more that six attempts of 800 ms would take without it.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(server.requests() <= 2, "{}", server.requests());
}
