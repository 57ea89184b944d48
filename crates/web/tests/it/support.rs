//! The server under test and the tool its runs run.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, Progress, RunError, RunId};
use weir_runtime::{
    EventLog, MemoryLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo,
};
use weir_web::credentials::Credentials;
use weir_web::{GuardOptions, guarded, routes};

/// `wait`: reports progress, stores an artifact, then waits for `ms`
/// (default: until cancelled) and completes with a Mermaid graph. Its `key`
/// argument is a secret.
struct Wait;

#[async_trait]
impl Tool for Wait {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("wait", "Waits.", json!({"type": "object"})).with_secret_fields(&["key"])
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let _ = ctx
            .emit(Progress {
                progress: 1.0,
                total: Some(2.0),
                message: Some("half".into()),
                phase: Some("waiting".into()),
                eta_ms: None,
            })
            .await;
        let _ = ctx
            .artifact("notes.txt", "text/plain", b"hello artifact".to_vec())
            .await;
        match arguments["ms"].as_u64() {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => ctx.cancelled().await,
        }
        Ok(Completed {
            content: vec![Content::Text {
                text: "done".into(),
            }],
            structured: Some(json!({"mermaid": "graph LR\n  a --> b\n"})),
        })
    }
}

pub(crate) const TOKENS: &str =
    "alice token:alice-token\nbob token:bob-token\nroot token:root-token admin\n";

pub(crate) struct Server {
    pub(crate) scheduler: Scheduler,
    pub(crate) base: String,
    pub(crate) http: reqwest::Client,
}

impl Server {
    pub(crate) async fn start() -> Server {
        Server::on(Arc::new(MemoryLog::new())).await
    }

    /// The server on `log`, which may hold runs already.
    pub(crate) async fn on(log: Arc<dyn EventLog>) -> Server {
        let scheduler = Scheduler::start(
            log,
            vec![Arc::new(Wait) as Arc<dyn Tool>],
            SchedulerConfig::default(),
        )
        .await
        .unwrap();
        let options = GuardOptions {
            credentials: Credentials::parse(TOKENS).unwrap(),
            ..GuardOptions::default()
        };
        let app = guarded(routes(scheduler.clone()), options);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Server {
            scheduler,
            base,
            http: reqwest::Client::new(),
        }
    }

    /// Starts `wait` as `owner`; its run id.
    pub(crate) async fn start_run(&self, owner: &str, arguments: Value) -> RunId {
        let options = RunOptions {
            owner: Some(owner.into()),
            ..RunOptions::default()
        };
        let handle = self
            .scheduler
            .submit("wait", arguments, options)
            .await
            .unwrap();
        handle.run_id().clone()
    }

    /// `GET path` as `who` (a name in [`TOKENS`]): status and JSON body.
    pub(crate) async fn get(&self, who: &str, path: &str) -> (u16, Value) {
        let response = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(format!("{who}-token"))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// `POST path` as `who`, with `origin` when given.
    pub(crate) async fn post(&self, who: &str, path: &str, origin: Option<&str>) -> (u16, Value) {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(format!("{who}-token"))
            .header("content-type", "application/json")
            .body("{}");
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Waits (up to 5 s) until the run's state is `state`.
    pub(crate) async fn wait_state(&self, run_id: &RunId, state: &str) {
        for _ in 0..100 {
            let (_, body) = self.get("root", &format!("/api/runs/{run_id}")).await;
            if body["run"]["state"] == state {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("run {run_id} did not become {state}");
    }
}
