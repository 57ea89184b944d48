//! The client against a real weir server over real HTTP, with a TCP proxy
//! between them that cuts connections: resume after a cut mid-stream
//! (2025-11-25), a task followed across dropped connections (2026-07-28),
//! and cancellation when a call's stream is dropped (both revisions).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weir_client::{CallEvent, CallOptions, Client, ClientOptions, Revision, TaskMode, TaskStatus};
use weir_mcp::catalog::EmptyCatalog;
use weir_mcp::{McpServer, ServerConfig};
use weir_runtime::{EventLog, MemoryLog, Principal, Scheduler, SchedulerConfig};

/// A weir server with the fixture tools (`stream`) on a real socket.
async fn fixture_server() -> (SocketAddr, Arc<dyn EventLog>) {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let config = SchedulerConfig {
        retention: None,
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::start(log.clone(), weir_fixtures::fixture_tools(), config)
        .await
        .unwrap();
    let server = McpServer::new(scheduler, Arc::new(EmptyCatalog), ServerConfig::default());
    let (bound, address) = tokio::sync::oneshot::channel();
    // As `weir serve --http` without a token: every request the local caller.
    let app = weir_mcp::transport::http::routes(server).layer(axum::Extension(Principal::local()));
    tokio::spawn(weir_mcp::transport::http::serve(
        app,
        "127.0.0.1:0".parse().unwrap(),
        |addr| bound.send(addr).unwrap(),
    ));
    (address.await.unwrap(), log)
}

/// A TCP proxy that can cut connections: each one after `cut_after` bytes
/// from the server (mid-event, typically), or all at once on [`sever`],
/// refusing new ones for a while after.
struct Proxy {
    addr: SocketAddr,
    state: Arc<ProxyState>,
}

#[derive(Default)]
struct ProxyState {
    cut_after: Option<usize>,
    cuts: AtomicUsize,
    refused: AtomicUsize,
    refusing_until: Mutex<Option<Instant>>,
    live: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Proxy {
    async fn start(upstream: SocketAddr, cut_after: Option<usize>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(ProxyState {
            cut_after,
            ..ProxyState::default()
        });
        let accepting = state.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let refusing = accepting
                    .refusing_until
                    .lock()
                    .unwrap()
                    .is_some_and(|until| Instant::now() < until);
                if refusing {
                    accepting.refused.fetch_add(1, Ordering::Relaxed);
                    drop(client);
                    continue;
                }
                let server = TcpStream::connect(upstream).await.unwrap();
                let pipe = tokio::spawn(pipe(client, server, accepting.clone()));
                accepting.live.lock().unwrap().push(pipe.abort_handle());
            }
        });
        Proxy { addr, state }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Cuts every open connection and refuses new ones for `window`.
    fn sever(&self, window: Duration) {
        *self.state.refusing_until.lock().unwrap() = Some(Instant::now() + window);
        for connection in self.state.live.lock().unwrap().drain(..) {
            connection.abort();
        }
    }

    fn cuts(&self) -> usize {
        self.state.cuts.load(Ordering::Relaxed)
    }
}

/// Copies both ways until either side closes, or until the server has sent
/// `cut_after` bytes; then drops both sockets.
async fn pipe(client: TcpStream, server: TcpStream, state: Arc<ProxyState>) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = tokio::io::copy(&mut client_read, &mut server_write);
    let down = async {
        let mut budget = state.cut_after.unwrap_or(usize::MAX);
        let mut buffer = vec![0u8; 4096];
        loop {
            let read = server_read.read(&mut buffer).await.unwrap_or(0);
            if read == 0 {
                return;
            }
            let sent = read.min(budget);
            if client_write.write_all(&buffer[..sent]).await.is_err() {
                return;
            }
            budget -= sent;
            if budget == 0 {
                state.cuts.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    };
    tokio::select! {
        _ = up => {}
        () = down => {}
    }
}

async fn connect(url: String, revision: Revision) -> Client {
    let options = ClientOptions {
        revision,
        ..ClientOptions::default()
    };
    Client::connect(weir_client::Target::Http { url, token: None }, options)
        .await
        .unwrap()
}

/// Everything a call yields, until its end (at most a minute).
async fn collect(mut call: weir_client::CallStream) -> Vec<CallEvent> {
    let mut events = Vec::new();
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(event) = call.next().await {
            events.push(event);
        }
    })
    .await
    .expect("the call ended within a minute");
    events
}

/// Resume (docs/design.md, "Delivery projections"), from the client: a 3,000-item stream whose connection
/// is cut every 16 KiB (mid-event) arrives whole — every item once, in
/// order — and then the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_mid_event_resumes_with_last_event_id_losing_and_repeating_nothing() {
    let (server, _) = fixture_server().await;
    let proxy = Proxy::start(server, Some(16 * 1024)).await;
    let client = connect(proxy.url(), Revision::Sessions).await;
    assert_eq!(client.protocol_version(), "2025-11-25");
    let count = 3000u64;
    let call = client.call_stream(
        "stream",
        json!({"count": count, "size": 20, "mode": "items"}),
        CallOptions::default(),
    );
    let events = collect(call).await;
    let mut items = Vec::new();
    let mut seqs = Vec::new();
    for event in &events {
        if let CallEvent::Partial {
            seq, structured, ..
        } = event
        {
            seqs.push(*seq);
            for item in structured.as_ref().unwrap()["items"].as_array().unwrap() {
                items.push(item["i"].as_u64().unwrap());
            }
        }
    }
    assert!(
        proxy.cuts() >= 10,
        "only {} cuts: the test did not exercise resume",
        proxy.cuts()
    );
    let expected: Vec<u64> = (0..count).collect();
    assert_eq!(seqs, expected, "partial seqs: none lost, none repeated");
    assert_eq!(items, expected, "items: none lost, none repeated");
    match events.last().unwrap() {
        CallEvent::Result(result) => {
            assert!(!result.is_error);
            assert_eq!(result.structured, Some(json!({"count": count})));
        }
        other => panic!("the call ended with {other:?}"),
    }
}

/// In 2026-07-28 there is no resume; a task survives: every connection is
/// cut and new ones refused for a while, and the client's polls back off
/// and carry on until the task's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_followed_across_dropped_connections() {
    let (server, log) = fixture_server().await;
    let proxy = Proxy::start(server, None).await;
    let client = connect(proxy.url(), Revision::Negotiate).await;
    assert_eq!(client.protocol_version(), "2026-07-28");
    let options = CallOptions {
        task: TaskMode::Always,
        ..CallOptions::default()
    };
    let mut call = client.call_stream(
        "stream",
        json!({"count": 40, "interval_ms": 25, "size": 10}),
        options,
    );
    let first = call.next().await.unwrap();
    assert!(
        matches!(
            first,
            CallEvent::Task {
                status: TaskStatus::Working,
                ..
            }
        ),
        "{first:?}"
    );
    proxy.sever(Duration::from_millis(700));
    let mut rest = collect(call).await;
    assert!(
        proxy.state.refused.load(Ordering::Relaxed) >= 1,
        "no poll hit the outage"
    );
    let last = rest.pop().unwrap();
    let CallEvent::Result(result) = last else {
        panic!("the call ended with {last:?}")
    };
    assert_eq!(result.structured, Some(json!({"count": 40})));
    assert_eq!(result.content.len(), 41, "every item and the summary");
    assert!(matches!(
        rest.last(),
        Some(CallEvent::Task {
            status: TaskStatus::Completed,
            ..
        })
    ));
    let runs = log.list_runs(&Default::default()).await.unwrap();
    assert_eq!(runs[0].state.to_string(), "completed");
}

/// Dropping a call's stream cancels its run on the server: by
/// `notifications/cancelled` in 2025-11-25, by closing the stream in
/// 2026-07-28.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_call_cancels_its_run_in_both_revisions() {
    for revision in [Revision::Sessions, Revision::Stateless] {
        let (server, log) = fixture_server().await;
        let client = connect(format!("http://{server}/mcp"), revision).await;
        let mut call = client.call_stream(
            "stream",
            json!({"count": 10_000, "interval_ms": 10}),
            CallOptions::default(),
        );
        // A weir server names the run first (the call asks, `io.weir/run`).
        let named = call.next().await.unwrap();
        let runs = log.list_runs(&Default::default()).await.unwrap();
        assert!(
            matches!(&named, CallEvent::Run { run_id } if *run_id == runs[0].run_id.to_string()),
            "{named:?}"
        );
        let first = call.next().await.unwrap();
        assert!(
            matches!(first, CallEvent::Partial { seq: 0, .. }),
            "{first:?}"
        );
        drop(call);
        let mut state = String::new();
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            state = log.list_runs(&Default::default()).await.unwrap()[0]
                .state
                .to_string();
            if state == "canceled" {
                break;
            }
        }
        assert_eq!(state, "canceled", "{revision:?}");
        let events = log
            .read(
                &log.list_runs(&Default::default()).await.unwrap()[0].run_id,
                0,
                100_000,
            )
            .await
            .unwrap();
        let reason: Value = serde_json::to_value(&events.last().unwrap().kind).unwrap();
        let expected = match revision {
            Revision::Sessions => "the caller dropped the call",
            _ => "the client closed the response stream",
        };
        assert_eq!(reason["reason"], expected, "{revision:?}");
    }
}
