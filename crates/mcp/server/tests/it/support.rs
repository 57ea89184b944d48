//! A test tool set and a line-protocol client for the server.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
use weir_core::{Completed, Content, Partial, Progress, RunError};
use weir_mcp::catalog::EmptyCatalog;
use weir_mcp::{McpServer, ServerConfig};
use weir_runtime::{EventLog, MemoryLog, RunContext, Scheduler, SchedulerConfig, Tool, ToolInfo};

/// Emits `count` text partials (`item i`) with progress, `pause_ms` apart.
pub(crate) struct LinesTool;

#[async_trait]
impl Tool for LinesTool {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "lines",
            "emits count lines",
            json!({"type": "object", "properties": {"count": {"type": "integer", "minimum": 0}, "pause_ms": {"type": "integer"}}, "required": ["count"]}),
        );
        info.streams = true;
        info
    }
    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let count = args["count"].as_u64().unwrap_or(0);
        let pause = Duration::from_millis(args["pause_ms"].as_u64().unwrap_or(0));
        for i in 0..count {
            let _ = ctx
                .emit(Partial {
                    content: vec![Content::text(format!("item {i}"))],
                    ..Partial::default()
                })
                .await;
            let _ = ctx
                .emit(Progress {
                    progress: (i + 1) as f64,
                    total: Some(count as f64),
                    ..Progress::default()
                })
                .await;
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
        }
        Ok(Completed {
            content: vec![Content::text(format!("{count} lines"))],
            structured: Some(json!({"count": count})),
        })
    }
}

/// A stand-in for a program runner such as `execute_code`: writes each
/// `[group, text]` of `writes` as a partial of that group (`stdout`,
/// `stderr`), stores what went to stdout as the artifact `stdout.txt`, and
/// completes with `{"exit_code": 0}` and a summary block. Its stdout and
/// stderr are text fields, so its structured result carries them.
pub(crate) struct ProgramTool;

#[async_trait]
impl Tool for ProgramTool {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "program",
            "writes text to stdout and stderr",
            json!({"type": "object", "properties": {"writes": {"type": "array", "items": {"type": "array", "items": {"type": "string"}}}}, "required": ["writes"]}),
        );
        info.output_schema = Some(json!({
            "type": "object",
            "properties": {"exit_code": {"type": "integer"}},
            "required": ["exit_code"],
        }));
        info.streams = true;
        info.with_text_fields(&["stdout", "stderr"])
    }
    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let mut stdout = String::new();
        for write in args["writes"].as_array().into_iter().flatten() {
            let (group, text) = (
                write[0].as_str().unwrap_or("stdout"),
                write[1].as_str().unwrap_or(""),
            );
            if group == "stdout" {
                stdout.push_str(text);
            }
            let _ = ctx
                .emit(Partial {
                    content: vec![Content::text(text)],
                    group: Some(group.into()),
                    ..Partial::default()
                })
                .await;
        }
        let _ = ctx
            .artifact("stdout.txt", "text/plain", stdout.into_bytes())
            .await;
        Ok(Completed {
            content: vec![Content::text("[exit code 0]")],
            structured: Some(json!({"exit_code": 0})),
        })
    }
}

pub(crate) async fn server(log: Arc<dyn EventLog>, result_limit: usize) -> McpServer {
    let config = SchedulerConfig {
        retention: None,
        ..SchedulerConfig::default()
    };
    let mut tools: Vec<Arc<dyn Tool>> = vec![Arc::new(LinesTool)];
    tools.extend(weir_fixtures::conformance_tools());
    let scheduler = Scheduler::start(log, tools, config).await.unwrap();
    McpServer::new(
        scheduler,
        Arc::new(EmptyCatalog),
        ServerConfig {
            result_limit,
            ..ServerConfig::default()
        },
    )
}

/// A client on the other end of `serve_lines`.
pub(crate) struct LineClient {
    to_server: DuplexStream,
    from_server: Lines<BufReader<DuplexStream>>,
}

impl LineClient {
    pub(crate) async fn start(log: Arc<dyn EventLog>) -> LineClient {
        LineClient::over(server(log, 512 * 1024).await)
    }

    /// A client of `server`, for tests that need other tools or a catalog.
    pub(crate) fn over(server: McpServer) -> LineClient {
        let (client_out, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, client_in) = tokio::io::duplex(1 << 20);
        tokio::spawn(weir_mcp::transport::stdio::serve_lines(
            server, server_in, server_out,
        ));
        LineClient {
            to_server: client_out,
            from_server: BufReader::new(client_in).lines(),
        }
    }

    pub(crate) async fn memory() -> LineClient {
        LineClient::start(Arc::new(MemoryLog::new())).await
    }

    pub(crate) async fn send_raw(&mut self, line: &str) {
        self.to_server.write_all(line.as_bytes()).await.unwrap();
        self.to_server.write_all(b"\n").await.unwrap();
    }

    pub(crate) async fn send(&mut self, message: Value) {
        self.send_raw(&message.to_string()).await;
    }

    pub(crate) async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.from_server.next_line())
            .await
            .expect("server answered within 10 s")
            .unwrap()
            .expect("server still open");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends a request and collects everything up to its response.
    pub(crate) async fn call(
        &mut self,
        id: i64,
        method: &str,
        params: Value,
    ) -> (Vec<Value>, Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let mut notifications = Vec::new();
        loop {
            let message = self.next().await;
            if message.get("id") == Some(&json!(id)) {
                return (notifications, message);
            }
            notifications.push(message);
        }
    }

    pub(crate) async fn initialize(&mut self, capabilities: Value) -> Value {
        let (_, response) = self
            .call(0, "initialize", json!({"protocolVersion": "2025-11-25", "capabilities": capabilities, "clientInfo": {"name": "t", "version": "1"}}))
            .await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        response
    }
}

/// Checks the notifications of one streaming `lines` call: progress strictly
/// increasing, partials dense from 0 and complete. Returns (progress, partials).
pub(crate) fn check_stream(notifications: &[Value], count: u64) -> (usize, usize) {
    let progress: Vec<f64> = notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .map(|n| n["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "progress not strictly increasing: {progress:?}"
    );
    let partials: Vec<&Value> = notifications
        .iter()
        .filter(|n| n["method"] == "notifications/tools/partial_result")
        .collect();
    for (i, partial) in partials.iter().enumerate() {
        assert_eq!(partial["params"]["seq"], json!(i), "partial seq not dense");
        assert_eq!(
            partial["params"]["content"][0]["text"],
            json!(format!("item {i}"))
        );
    }
    assert!(
        partials.is_empty() || partials.len() as u64 == count,
        "{} partials of {count}",
        partials.len()
    );
    (progress.len(), partials.len())
}

/// Serves `server`'s `/mcp` and weir-web's routes behind weir-web's guard
/// on `addr`, composed as the `weir` binary composes them (its
/// `src/http.rs`): the guard's principal of a request is `/mcp`'s caller.
pub(crate) async fn serve_http(
    server: weir_mcp::McpServer,
    addr: std::net::SocketAddr,
    options: weir_web::GuardOptions,
    on_bound: impl FnOnce(std::net::SocketAddr),
) -> std::io::Result<()> {
    options.check()?;
    let web = weir_web::routes(server.scheduler().clone());
    let mcp = weir_mcp::transport::http::routes(server);
    let app = weir_web::guarded(mcp.merge(web), options);
    weir_mcp::transport::http::serve(app, addr, on_bound).await
}
