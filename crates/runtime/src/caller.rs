//! A tool calling other tools: a tool of this server as a child run
//! ([`RunContext::call`]), or a tool of another MCP server through a
//! [`RemoteCaller`] the binary plugs in.
//!
//! A child run is an ordinary run with a parent: it has its own log, is
//! listed with its parent's id ([`RunSummary::parent`]) and its parent's
//! owner, and the parent's log records that it started (a `meta` event
//! whose `info` is `{"child": {"run_id", "tool"}}`). It never outlives its
//! parent: cancelling the parent (or its time limit) cancels it, and a
//! parent whose tool returns while children still run cancels them; either
//! way the parent's terminal event is written after theirs.
//!
//! A child takes a slot of its tool but none of the global ones: its
//! parent holds one for the whole tree while it waits. When its tool has
//! no free slot it may run in its parent's *lane* instead (one per run,
//! lent to one child at a time), so a parent always has a child that can
//! run and no nesting can deadlock (the rule, and why it holds:
//! `scheduler/slots.rs`).
//!
//! [`RunSummary::parent`]: crate::log::RunSummary::parent

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use weir_core::{Completed, Content, EventKind, Meta, RunError, RunEvent, RunId};

use crate::context::RunContext;
use crate::handle::{RunHandle, SubmitError};
use crate::log::{EventLog, Subscription};
use crate::{ToolInfo, with_streamed_fields};

/// Why a call did not start or did not end in a terminal event.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The calling run was not started by a scheduler (a context made by
    /// hand in a test), or its scheduler has stopped.
    #[error("run {0} cannot start other runs: it does not belong to a running scheduler")]
    NoScheduler(RunId),
    /// The scheduler refused the call (unknown tool, bad arguments, busy).
    #[error(transparent)]
    Submit(#[from] SubmitError),
    /// The child ended without a terminal event in the log (the store
    /// refused it; recovery closes the run at the next start).
    #[error(
        "child run {0} ended without a terminal event the store would take; see `weir runs show {0}`"
    )]
    Unfinished(RunId),
}

/// A child run started by [`RunContext::call`].
pub struct ChildRun {
    run_id: RunId,
    handle: RunHandle,
    log: Arc<dyn EventLog>,
    /// Its tool's [text fields](ToolInfo::with_text_fields), which
    /// [`follow`](ChildRun::follow) fills in.
    text_fields: Vec<String>,
}

impl std::fmt::Debug for ChildRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildRun")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl ChildRun {
    /// The child's id.
    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The child's events from its `started` on, live, ending after its
    /// terminal event.
    pub fn events(&self) -> Subscription {
        self.log.subscribe_from(&self.run_id, 0)
    }

    /// Waits for the child to end and returns its terminal event.
    pub async fn finished(self) -> Result<RunEvent, CallError> {
        let run_id = self.run_id;
        self.handle
            .finished()
            .await
            .ok_or(CallError::Unfinished(run_id))
    }

    /// Follows the child's log to its end: its terminal event, and the
    /// text it streamed as partial results on the way, at most
    /// `max_streamed` bytes (cut at a character boundary, with a note). A
    /// tool that streams its output leaves it out of its final content, so
    /// a caller that passes the child's result on needs both; when its tool
    /// declares text fields, the structured result of a child that
    /// completed, or failed with a result ([`RunError::with_result`]), has
    /// them filled in ([`with_streamed_fields`]), each cut at
    /// `max_streamed`.
    pub async fn follow(self, max_streamed: usize) -> Result<ChildEnd, CallError> {
        let run_id = self.run_id.clone();
        let mut events = self.events();
        let mut streamed = String::new();
        let mut fields: Vec<(String, String)> = self
            .text_fields
            .iter()
            .map(|group| (group.clone(), String::new()))
            .collect();
        let mut terminal = None;
        while let Some(Ok(event)) = events.next().await {
            match &event.kind {
                EventKind::Partial(partial) => {
                    let text = Content::text_of(&partial.content);
                    if streamed.len() < max_streamed {
                        streamed.push_str(&text);
                    }
                    let field = fields
                        .iter_mut()
                        .find(|(group, _)| partial.group.as_ref() == Some(group));
                    if let Some((_, field)) = field
                        && field.len() < max_streamed
                    {
                        field.push_str(&text);
                    }
                }
                kind if kind.is_terminal() => {
                    terminal = Some(kind.clone());
                    break;
                }
                _ => {}
            }
        }
        let mut terminal = match terminal {
            Some(kind) => kind,
            // The subscription broke off: the run's handle still has its end.
            None => self.finished().await?.kind,
        };
        clip(&mut streamed, max_streamed);
        let result = match &mut terminal {
            EventKind::Completed(done) => Some(done),
            EventKind::Failed(failed) => failed.error.result.as_deref_mut(),
            _ => None,
        };
        if let Some(done) = result {
            let mut truncated = false;
            for (_, text) in &mut fields {
                truncated |= clip(text, max_streamed);
            }
            done.structured =
                with_streamed_fields(done.structured.take(), fields, truncated, &run_id);
        }
        Ok(ChildEnd { streamed, terminal })
    }
}

/// How a child run ended, as [`ChildRun::follow`] saw it.
#[derive(Debug)]
pub struct ChildEnd {
    /// The text it streamed as partial results, cut at the limit asked.
    pub streamed: String,
    /// Its terminal event's kind.
    pub terminal: EventKind,
}

/// Cuts `text` to `max` bytes at a character boundary, saying so; whether
/// it did.
fn clip(text: &mut String, max: usize) -> bool {
    if text.len() <= max {
        return false;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("\n[cut at {} KiB]\n", max / 1024));
    true
}

impl RunContext {
    /// Starts `tool` of this server with `arguments` as a child of this run:
    /// checked and queued like any call, with its own time limit when
    /// `timeout` is given (else the tool's or the scheduler's). Records the
    /// child's id in this run's log (a `meta` event whose `info` is
    /// `{"child": {"run_id", "tool"}}`) before it returns.
    ///
    /// The child is listed with this run as its parent and this run's
    /// owner, and never outlives it: cancelling this run (or its time
    /// limit) cancels the child, and when this run's tool returns while the
    /// child still runs, the child is cancelled; either way this run's
    /// terminal event is written after the child's. The child takes a
    /// slot of its tool, or this run's lane when its tool has none free,
    /// but none of the global ones: this run holds one for both.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// # use std::sync::Arc;
    /// # use async_trait::async_trait;
    /// # use serde_json::{Value, json};
    /// use weir_core::{Completed, Content, EventKind, FailureCode, RunError};
    /// use weir_runtime::{EventLog, MemoryLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo};
    ///
    /// struct Hello;
    /// #[async_trait]
    /// impl Tool for Hello {
    ///     fn info(&self) -> ToolInfo { ToolInfo::new("hello", "Says hello.", json!({"type": "object"})) }
    ///     async fn run(&self, _ctx: RunContext, _args: Value) -> Result<Completed, RunError> {
    ///         Ok(Completed { content: vec![Content::text("hello")], structured: None })
    ///     }
    /// }
    /// /// Calls `hello` and passes its result on.
    /// struct Relay;
    /// #[async_trait]
    /// impl Tool for Relay {
    ///     fn info(&self) -> ToolInfo { ToolInfo::new("relay", "Calls hello.", json!({"type": "object"})) }
    ///     async fn run(&self, ctx: RunContext, _args: Value) -> Result<Completed, RunError> {
    ///         let failed = |e: weir_runtime::CallError| RunError::new(FailureCode::ToolError, e.to_string());
    ///         let child = ctx.call("hello", json!({}), None).await.map_err(failed)?;
    ///         match child.finished().await.map_err(failed)?.kind {
    ///             EventKind::Completed(done) => Ok(done),
    ///             other => Err(RunError::new(FailureCode::ToolError, format!("hello ended {}", other.type_name()))),
    ///         }
    ///     }
    /// }
    ///
    /// let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    /// let scheduler = Scheduler::start(log.clone(), vec![Arc::new(Hello), Arc::new(Relay)], SchedulerConfig::default()).await.unwrap();
    /// let run = scheduler.submit("relay", json!({}), RunOptions::default()).await.unwrap();
    /// let parent = run.run_id().clone();
    /// let EventKind::Completed(done) = run.finished().await.unwrap().kind else { panic!() };
    /// assert_eq!(done.content, vec![Content::text("hello")]);
    /// let EventKind::Meta(meta) = &log.read(&parent, 1, 1).await.unwrap()[0].kind else { panic!() };
    /// let child = weir_core::RunId::parse(meta.info["child"]["run_id"].as_str().unwrap()).unwrap();
    /// assert_eq!(log.get_run(&child).await.unwrap().unwrap().parent, Some(parent));
    /// # }
    /// ```
    pub async fn call(
        &self,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
    ) -> Result<ChildRun, CallError> {
        let no_scheduler = || CallError::NoScheduler(self.run_id().clone());
        let children = self.children().ok_or_else(no_scheduler)?;
        let handle = children
            .spawn(tool, arguments, timeout)
            .await
            .ok_or_else(no_scheduler)??;
        let run_id = handle.run_id().clone();
        let started = Meta {
            info: json!({ "child": { "run_id": run_id, "tool": tool } }),
            ..Meta::default()
        };
        // A run that is ending cannot record it; its child is stopped with it.
        let _ = self.emit(started).await;
        let text_fields = children
            .tools()
            .into_iter()
            .find(|info| info.name == tool)
            .map(|info| info.text_fields)
            .unwrap_or_default();
        Ok(ChildRun {
            run_id,
            handle,
            log: self.log().clone(),
            text_fields,
        })
    }
}

impl RunContext {
    /// The tools this run can start with [`RunContext::call`] (this
    /// server's), sorted by name; empty when the run does not belong to a
    /// running scheduler. For checking a call before anything starts, or
    /// offering the tools to someone else.
    pub fn callable_tools(&self) -> Vec<ToolInfo> {
        self.children()
            .map(|children| children.tools())
            .unwrap_or_default()
    }

    /// Whether this run's caller may reach the upstream server `name`
    /// through a [`RemoteCaller`]: granted [`upstream_grant`]`(name)`, or
    /// held to no grant at all. A run outside a scheduler has no caller to
    /// hold it.
    pub fn may_reach_upstream(&self, name: &str) -> bool {
        self.children()
            .is_none_or(|children| children.grants(&upstream_grant(name)))
    }

    /// The tools of the runs this one was started under, its parent's
    /// first and its root's last; empty for a run a client started. For a
    /// tool that bounds how deep it nests (a plan running plans).
    pub fn ancestors(&self) -> Vec<String> {
        self.children()
            .map(|children| children.ancestors())
            .unwrap_or_default()
    }
}

/// The grant of the upstream server `name` in a caller's scope
/// (`packs=upstream:NAME` in a tokens file): its tools, resources and
/// prompts, and plan steps that call it.
pub fn upstream_grant(name: &str) -> String {
    format!("upstream:{name}")
}

/// Calls tools of the other MCP servers the operator declared (its
/// upstreams), by name. The binary implements it over its MCP client and
/// hands it to the packs that need it, so that no pack depends on an MCP
/// crate. A caller names an upstream, never an address or a command: how
/// each is reached, with which credential, is the operator's declaration.
#[async_trait]
pub trait RemoteCaller: Send + Sync + 'static {
    /// The names of the servers [`call`](RemoteCaller::call) can reach,
    /// sorted; empty when the operator declared none.
    fn servers(&self) -> Vec<String>;

    /// Calls `tool` on the server named `server` and returns its result,
    /// or why there is none: an unknown name, the tool's error (`isError`)
    /// as [`FailureCode::ToolError`] with its text and, as the error's
    /// [`result`](RunError::result), its content and structured content;
    /// a server that cannot be reached or refuses the call with the
    /// client's message, `timeout` passing as [`FailureCode::Timeout`].
    /// What the call reports meanwhile (progress, partial results, log
    /// messages) goes to `events` as `progress`, `partial` and `log`
    /// kinds, in order: the call waits for room, so the receiver must be
    /// read while the call runs (a dropped receiver loses them).
    /// Dropping the future cancels the call on the server.
    ///
    /// [`FailureCode::ToolError`]: weir_core::FailureCode::ToolError
    /// [`FailureCode::Timeout`]: weir_core::FailureCode::Timeout
    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
        events: mpsc::Sender<EventKind>,
    ) -> Result<Completed, RunError>;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use serde_json::{Value, json};
    use weir_core::{Completed, Content, EventKind, FailureCode, RunError, RunId, RunState};

    use super::CallError;
    use crate::{
        EventLog, MemoryLog, RunContext, RunOptions, Scheduler, SchedulerConfig, SubmitError, Tool,
        ToolInfo,
    };

    /// Waits until its future is dropped; with `"echo"`, returns it at once.
    struct Child;

    #[async_trait]
    impl Tool for Child {
        fn info(&self) -> ToolInfo {
            ToolInfo::new("child", "waits", json!({"type": "object"}))
        }
        async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
            if let Some(echo) = args.get("echo") {
                return Ok(Completed {
                    content: vec![Content::text(echo.to_string())],
                    structured: Some(json!({ "echo": echo })),
                });
            }
            let _ = ctx;
            std::future::pending().await
        }
    }

    /// Starts `child` with `args["child"]`; `"wait"`: for its end (else
    /// returns at once, leaving it running); `"hang"`: then waits to be
    /// cancelled itself.
    struct Parent;

    #[async_trait]
    impl Tool for Parent {
        fn info(&self) -> ToolInfo {
            ToolInfo::new("parent", "calls", json!({"type": "object"}))
        }
        async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
            let failed = |e: CallError| RunError::new(FailureCode::ToolError, e.to_string());
            let tool = args["tool"].as_str().unwrap_or("child");
            let child = ctx
                .call(tool, args["child"].clone(), None)
                .await
                .map_err(failed)?;
            let id = child.run_id().to_string();
            if args["hang"] == true {
                std::future::pending::<()>().await;
            }
            if args["wait"] != true {
                return Ok(Completed {
                    structured: Some(json!({ "child": id })),
                    ..Completed::default()
                });
            }
            match child.finished().await.map_err(failed)?.kind {
                EventKind::Completed(done) => Ok(done),
                other => Err(RunError::new(FailureCode::ToolError, other.type_name())),
            }
        }
    }

    async fn scheduler() -> (Arc<dyn EventLog>, Scheduler) {
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let config = SchedulerConfig {
            retention: None,
            ..SchedulerConfig::default()
        };
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Child), Arc::new(Parent)];
        let scheduler = Scheduler::start(log.clone(), tools, config).await.unwrap();
        (log, scheduler)
    }

    /// The children the parent's log names, in order.
    async fn children(log: &Arc<dyn EventLog>, parent: &RunId) -> Vec<RunId> {
        let events = log.read(parent, 0, 100).await.unwrap();
        events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::Meta(meta) => meta.info["child"]["run_id"].as_str(),
                _ => None,
            })
            .map(|id| RunId::parse(id).unwrap())
            .collect()
    }

    /// A child is a run of its own that names its parent and has the
    /// parent's owner; the parent's log names the child; the parent gets
    /// the child's terminal event.
    #[tokio::test]
    async fn a_child_run_names_its_parent_and_takes_its_owner() {
        let (log, scheduler) = scheduler().await;
        let options = RunOptions {
            owner: Some("alice".into()),
            ..RunOptions::default()
        };
        let args = json!({"wait": true, "child": {"echo": 7}});
        let run = scheduler.submit("parent", args, options).await.unwrap();
        let parent = run.run_id().clone();
        let EventKind::Completed(done) = run.finished().await.unwrap().kind else {
            panic!("the parent did not complete")
        };
        assert_eq!(done.structured, Some(json!({"echo": 7})));
        let [child] = &children(&log, &parent).await[..] else {
            panic!("not one child")
        };
        let summary = log.get_run(child).await.unwrap().unwrap();
        assert_eq!(summary.parent.as_ref(), Some(&parent));
        assert_eq!(summary.owner.as_deref(), Some("alice"));
        assert_eq!(summary.state, RunState::Completed);
        let top = log.get_run(&parent).await.unwrap().unwrap();
        assert_eq!((top.parent, top.owner.as_deref()), (None, Some("alice")));
        let kinds: Vec<_> = log.read(&parent, 0, 10).await.unwrap();
        let kinds: Vec<_> = kinds.iter().map(|e| e.kind.type_name()).collect();
        assert_eq!(kinds, ["started", "meta", "completed"]);
    }

    /// Calls itself `depth` times, each waiting for its child; reports
    /// the ancestors the deepest one saw.
    struct Nest;

    #[async_trait]
    impl Tool for Nest {
        fn info(&self) -> ToolInfo {
            let mut info = ToolInfo::new("nest", "nests", json!({"type": "object"}));
            info.max_concurrent = Some(1);
            info
        }
        async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
            let depth = args["depth"].as_u64().unwrap_or(0);
            if depth == 0 {
                return Ok(Completed {
                    structured: Some(json!({ "ancestors": ctx.ancestors() })),
                    ..Completed::default()
                });
            }
            let failed = |e: CallError| RunError::new(FailureCode::ToolError, e.to_string());
            let child = ctx
                .call("nest", json!({"depth": depth - 1}), None)
                .await
                .map_err(failed)?;
            match child.finished().await.map_err(failed)?.kind {
                EventKind::Completed(done) => Ok(done),
                other => Err(RunError::new(FailureCode::ToolError, other.type_name())),
            }
        }
    }

    /// A tool whose limit is one nests 20 deep, each level waiting for the
    /// next: each child runs in its parent's lane when the tool's one slot
    /// is held above it, so nesting never waits for itself (slots.rs); a
    /// run knows the tools above it.
    #[tokio::test]
    async fn nesting_past_a_tools_limit_runs_in_the_parents_lane() {
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let config = SchedulerConfig {
            retention: None,
            ..SchedulerConfig::default()
        };
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Nest)];
        let scheduler = Scheduler::start(log, tools, config).await.unwrap();
        let run = scheduler
            .submit("nest", json!({"depth": 20}), RunOptions::default())
            .await
            .unwrap();
        let finished = tokio::time::timeout(std::time::Duration::from_secs(10), run.finished());
        let EventKind::Completed(done) = finished.await.expect("nesting deadlocked").unwrap().kind
        else {
            panic!("the nest did not complete")
        };
        assert_eq!(
            done.structured,
            Some(json!({"ancestors": vec!["nest"; 20]}))
        );
    }

    /// With one global slot, held by the parent, its child still runs:
    /// children take no global slot, so nesting cannot starve itself.
    #[tokio::test]
    async fn a_child_runs_in_its_parents_global_slot() {
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let config = SchedulerConfig {
            max_concurrent: 1,
            retention: None,
            ..SchedulerConfig::default()
        };
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Child), Arc::new(Parent)];
        let scheduler = Scheduler::start(log, tools, config).await.unwrap();
        let args = json!({"wait": true, "child": {"echo": "nested"}});
        let run = scheduler
            .submit("parent", args, RunOptions::default())
            .await
            .unwrap();
        let finished = tokio::time::timeout(std::time::Duration::from_secs(10), run.finished());
        let EventKind::Completed(done) =
            finished.await.expect("the child got no slot").unwrap().kind
        else {
            panic!("the parent did not complete")
        };
        assert_eq!(done.structured, Some(json!({"echo": "nested"})));
        // The global slot is still one: a second top-level run waits for it.
        let hold = scheduler
            .submit(
                "parent",
                json!({"hang": true, "child": {}}),
                RunOptions::default(),
            )
            .await
            .unwrap();
        let queued = scheduler
            .submit("child", json!({"echo": 1}), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(scheduler.queued(), 1);
        assert!(scheduler.cancel(hold.run_id(), "done"));
        assert!(queued.finished().await.unwrap().kind.is_terminal());
    }

    /// `follow` gives a child's streamed text, and fills its tool's text
    /// fields into its structured result as the MCP server does, each cut
    /// at the limit asked (and then flagged): the result of a child that
    /// completed, or failed with one.
    #[tokio::test]
    async fn following_a_child_fills_its_text_fields() {
        struct Printer;
        #[async_trait]
        impl Tool for Printer {
            fn info(&self) -> ToolInfo {
                ToolInfo::new("print", "prints", json!({"type": "object"}))
                    .with_text_fields(&["stdout", "stderr"])
            }
            async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
                for (group, text) in [
                    ("stdout", "one\n"),
                    ("stderr", "oops\n"),
                    ("stdout", "two\n"),
                ] {
                    let partial = weir_core::Partial {
                        content: vec![Content::text(text)],
                        group: Some(group.into()),
                        ..Default::default()
                    };
                    ctx.emit(partial).await.unwrap();
                }
                let fail = args["fail"] == true;
                let done = Completed {
                    structured: Some(json!({"exit_code": if fail { 3 } else { 0 }})),
                    ..Completed::default()
                };
                if fail {
                    return Err(RunError::new(FailureCode::ToolError, "exit 3").with_result(done));
                }
                Ok(done)
            }
        }
        struct Relay;
        #[async_trait]
        impl Tool for Relay {
            fn info(&self) -> ToolInfo {
                ToolInfo::new("relay", "relays", json!({"type": "object"}))
            }
            async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
                let max = args["max"].as_u64().unwrap() as usize;
                let child = ctx
                    .call("print", json!({"fail": args["fail"]}), None)
                    .await
                    .unwrap();
                let run_id = child.run_id().to_string();
                let end = child.follow(max).await.unwrap();
                let done = match end.terminal {
                    EventKind::Completed(done) => done,
                    EventKind::Failed(failed) => *failed.error.result.unwrap(),
                    other => panic!("{other:?}"),
                };
                Ok(Completed {
                    structured: Some(json!({
                        "child": run_id,
                        "streamed": end.streamed,
                        "result": done.structured,
                    })),
                    ..Completed::default()
                })
            }
        }
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Printer), Arc::new(Relay)];
        let scheduler = Scheduler::start(log, tools, SchedulerConfig::default())
            .await
            .unwrap();
        for (max, stdout, truncated, fail) in [
            (1024, "one\ntwo\n", false, false),
            (3, "one\n[cut at 0 KiB]\n", true, false),
            (1024, "one\ntwo\n", false, true),
        ] {
            let run = scheduler
                .submit(
                    "relay",
                    json!({"max": max, "fail": fail}),
                    RunOptions::default(),
                )
                .await
                .unwrap();
            let EventKind::Completed(done) = run.finished().await.unwrap().kind else {
                panic!("relay did not complete")
            };
            let relayed = done.structured.unwrap();
            let child = relayed["child"].as_str().unwrap();
            let result = &relayed["result"];
            assert_eq!(result["exit_code"], if fail { 3 } else { 0 }, "{relayed}");
            assert_eq!(result["stdout"], stdout, "{relayed}");
            assert_eq!(result["output_truncated"], truncated, "{relayed}");
            assert_eq!(result["output_uri"], format!("weir://runs/{child}"));
            if !truncated {
                assert_eq!(result["stderr"], "oops\n", "{relayed}");
                assert_eq!(relayed["streamed"], "one\noops\ntwo\n", "{relayed}");
            }
        }
    }

    /// A child's events can be followed from its `started` to its end.
    #[tokio::test]
    async fn a_child_is_followed_to_its_end() {
        struct Follow;
        #[async_trait]
        impl Tool for Follow {
            fn info(&self) -> ToolInfo {
                ToolInfo::new("follow", "follows", json!({"type": "object"}))
            }
            async fn run(&self, ctx: RunContext, _args: Value) -> Result<Completed, RunError> {
                let child = ctx.call("child", json!({"echo": 1}), None).await.unwrap();
                let mut events = child.events();
                let mut kinds = Vec::new();
                while let Some(event) = events.next().await {
                    kinds.push(json!(event.unwrap().kind.type_name()));
                }
                Ok(Completed {
                    structured: Some(json!(kinds)),
                    ..Completed::default()
                })
            }
        }
        let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
        let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Child), Arc::new(Follow)];
        let scheduler = Scheduler::start(log, tools, SchedulerConfig::default())
            .await
            .unwrap();
        let run = scheduler
            .submit("follow", json!({}), RunOptions::default())
            .await
            .unwrap();
        let EventKind::Completed(done) = run.finished().await.unwrap().kind else {
            panic!("follow did not complete")
        };
        assert_eq!(done.structured, Some(json!(["started", "completed"])));
    }

    /// Cancelling the parent cancels its running child, which ends (with
    /// a reason naming the parent) before the parent's terminal event.
    #[tokio::test]
    async fn cancelling_a_parent_cancels_its_children_first() {
        let (log, scheduler) = scheduler().await;
        let args = json!({"hang": true, "child": {}});
        let run = scheduler
            .submit("parent", args, RunOptions::default())
            .await
            .unwrap();
        let parent = run.run_id().clone();
        let child = loop {
            if let [child] = &children(&log, &parent).await[..] {
                break child.clone();
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        };
        assert!(scheduler.cancel(&parent, "stop the plan"));
        let terminal = run.finished().await.unwrap();
        assert!(
            matches!(terminal.kind, EventKind::Canceled(_)),
            "{terminal:?}"
        );
        let summary = log.get_run(&child).await.unwrap().unwrap();
        assert_eq!(summary.state, RunState::Canceled);
        assert!(summary.finished_ts.unwrap() <= terminal.ts);
        let last = log.read(&child, summary.events - 1, 1).await.unwrap();
        let EventKind::Canceled(canceled) = &last[0].kind else {
            panic!("{last:?}")
        };
        assert_eq!(
            canceled.reason,
            format!("its parent run {parent} was stopped")
        );
        assert!(
            !scheduler.cancel(&child, "again"),
            "the child is still active"
        );
    }

    /// A parent that returns while its child runs stops the child before
    /// its own terminal event: no child outlives its parent.
    #[tokio::test]
    async fn a_parent_that_ends_stops_the_children_it_left_running() {
        let (log, scheduler) = scheduler().await;
        let run = scheduler
            .submit("parent", json!({"child": {}}), RunOptions::default())
            .await
            .unwrap();
        let parent = run.run_id().clone();
        let terminal = run.finished().await.unwrap();
        assert!(matches!(terminal.kind, EventKind::Completed(_)));
        let [child] = &children(&log, &parent).await[..] else {
            panic!("not one child")
        };
        let summary = log.get_run(child).await.unwrap().unwrap();
        assert_eq!(summary.state, RunState::Canceled);
        let last = log.read(child, summary.events - 1, 1).await.unwrap();
        let EventKind::Canceled(canceled) = &last[0].kind else {
            panic!("{last:?}")
        };
        assert_eq!(canceled.reason, format!("its parent run {parent} ended"));
    }

    /// A parent's time limit stops its children too.
    #[tokio::test]
    async fn a_parent_that_times_out_stops_its_children() {
        let (log, scheduler) = scheduler().await;
        let options = RunOptions {
            timeout: Some(std::time::Duration::from_millis(200)),
            ..RunOptions::default()
        };
        let args = json!({"wait": true, "child": {}});
        let run = scheduler.submit("parent", args, options).await.unwrap();
        let parent = run.run_id().clone();
        let terminal = run.finished().await.unwrap();
        let EventKind::Failed(failed) = &terminal.kind else {
            panic!("{terminal:?}")
        };
        assert_eq!(failed.error.code, FailureCode::Timeout);
        let [child] = &children(&log, &parent).await[..] else {
            panic!("not one child")
        };
        let summary = log.get_run(child).await.unwrap().unwrap();
        assert_eq!(summary.state, RunState::Canceled);
    }

    /// A call the scheduler refuses is the caller's error, typed; a
    /// context outside a scheduler cannot call at all.
    #[tokio::test]
    async fn refused_calls_are_typed_errors() {
        let (_log, scheduler) = scheduler().await;
        let args = json!({"wait": true, "tool": "nope", "child": {}});
        let run = scheduler
            .submit("parent", args, RunOptions::default())
            .await
            .unwrap();
        let EventKind::Failed(failed) = run.finished().await.unwrap().kind else {
            panic!("the parent did not fail")
        };
        assert!(
            failed.error.message.starts_with("unknown tool \"nope\""),
            "{}",
            failed.error.message
        );
        let refused = CallError::Submit(SubmitError::UnknownTool {
            name: "nope".into(),
            available: "child, parent".into(),
        });
        assert_eq!(refused.to_string(), failed.error.message);
    }
}
