//! The runtime's [`RemoteCaller`] over weir's MCP client: how weir calls a
//! tool of an upstream MCP server the operator declared ([`Upstreams`]) —
//! for a plan step (`server: NAME`) and for the upstream tools weir serves
//! as its own (`upstream_tools`) — without a pack depending on an MCP
//! crate. A caller names the upstream; how it is reached and with which
//! credential is the declaration's (weir's own token is never sent).
//!
//! One connection per upstream, shared by every call (one server process
//! for a stdio upstream, one session for HTTP), made at the first need and
//! made again at the next call after it broke (the process died, the
//! session was lost): a call in flight when it breaks fails with the
//! client's message, once. A stdio upstream that dies is also started
//! again by itself, after a backoff (1 s, doubling to 1 min while it keeps
//! dying within a minute of its start), so that it is ready before the
//! next call. Dropping a call cancels it on the other server (the client's
//! `CallStream` does that). Each upstream's limits (at most N calls at
//! once, a time limit per call) apply here, and what happened to it is
//! kept as its health, for `get_status`.
//!
//! An upstream declared `"isolation": "per-caller"` has one connection
//! (process, session) per caller, by the name of the credential its run's
//! caller presented, each made at its caller's first call and ended after
//! `idleSeconds` (600) without a call; callers without a name (stdio, HTTP
//! without tokens), plan steps, the listing at start and the resources
//! passed through use the one shared connection.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::{Mutex, Semaphore, mpsc};
use weir_client::{
    CallEvent, CallOptions, Client, ClientError, ClientOptions, StdioCommand, Target,
};
use weir_core::{
    Completed, Content, EventKind, FailureCode, Log, LogLevel, LogStream, Partial, Progress,
    RunError,
};
use weir_runtime::RemoteCaller;

use crate::upstreams::{DEFAULT_IDLE, Isolation, Limits, Upstream, Upstreams};

/// The first wait before starting a dead stdio upstream again.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between starts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// A server that ran this long before dying starts again after the first
/// backoff: it was not crash-looping.
const STABLE_AFTER: Duration = Duration::from_secs(60);
/// How often a stdio upstream's supervisor looks whether it died.
const WATCH_EVERY: Duration = Duration::from_millis(200);

/// Calls the declared upstreams with weir's client.
pub(crate) struct ClientCaller {
    upstreams: Arc<Upstreams>,
    /// Each upstream's connection, limits and health, by name.
    slots: BTreeMap<String, Arc<Slot>>,
    /// The per-caller upstreams' connections, by upstream, then caller.
    callers: BTreeMap<String, Arc<Callers>>,
}

/// One per-caller upstream's connections, by the caller's name.
struct Callers {
    slots: std::sync::Mutex<BTreeMap<String, Arc<Slot>>>,
    /// How long one may go without a call before it is ended.
    idle: Duration,
    /// The task that ends idle ones runs (from the first on).
    reaping: AtomicBool,
}

impl Callers {
    fn slots(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Slot>>> {
        self.slots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One upstream as weir keeps it.
struct Slot {
    upstream: Upstream,
    limits: Limits,
    /// The open connection; `None` until needed or after it broke.
    client: Mutex<Option<Arc<Client>>>,
    /// `limits.max_concurrent` calls' permits.
    permits: Option<Semaphore>,
    health: std::sync::Mutex<Health>,
    /// A stdio upstream's supervisor runs (from its first start on).
    supervised: AtomicBool,
    /// weir is closing (or, for a caller's own, ended it as idle): no
    /// more starts.
    closed: AtomicBool,
    /// When its last call ended or its newest began.
    last_used: std::sync::Mutex<Instant>,
}

/// What happened to an upstream, as `get_status` tells it.
#[derive(Clone, Debug, Default)]
struct Health {
    /// `not started`, `up`, `down` (died or unreachable) or `restarting`.
    state: &'static str,
    /// Since when (Unix ms) it is in that state.
    since_ms: u64,
    calls: u64,
    in_flight: u64,
    failed: u64,
    /// Starts after the first.
    restarts: u64,
    /// The newest failure to reach it or of its process.
    last_error: Option<String>,
    /// A restart is due then (Unix ms).
    next_start_ms: Option<u64>,
}

impl Slot {
    fn new(upstream: Upstream, limits: Limits) -> Slot {
        Slot {
            upstream,
            limits,
            client: Mutex::new(None),
            permits: limits.max_concurrent.map(Semaphore::new),
            health: std::sync::Mutex::new(Health {
                state: "not started",
                since_ms: weir_runtime::now_ms(),
                ..Health::default()
            }),
            supervised: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            last_used: std::sync::Mutex::new(Instant::now()),
        }
    }

    fn touch(&self) {
        *self
            .last_used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Instant::now();
    }

    /// Unused and idle for `idle`.
    fn idle_for(&self, idle: Duration) -> bool {
        let last = *self
            .last_used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.health().in_flight == 0 && last.elapsed() >= idle
    }

    fn health(&self) -> std::sync::MutexGuard<'_, Health> {
        self.health
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Records the state it is now in.
    fn now(&self, state: &'static str, error: Option<String>) {
        let mut health = self.health();
        if health.state != state {
            health.state = state;
            health.since_ms = weir_runtime::now_ms();
        }
        if error.is_some() {
            health.last_error = error;
        }
        if state != "restarting" {
            health.next_start_ms = None;
        }
    }

    /// `get_status`'s account of it.
    fn status(&self) -> Value {
        let health = self.health().clone();
        let transport = match &self.upstream {
            Upstream::Stdio { .. } => "stdio",
            Upstream::Http { .. } => "http",
        };
        json!({
            "transport": transport,
            "state": health.state,
            "since": weir_core::iso8601(health.since_ms),
            "calls": health.calls,
            "inFlight": health.in_flight,
            "failed": health.failed,
            "restarts": health.restarts,
            "lastError": health.last_error,
            "nextStart": health.next_start_ms.map(weir_core::iso8601),
            "maxConcurrent": self.limits.max_concurrent,
            "timeoutSeconds": self.limits.timeout.map(|t| t.as_secs_f64()),
        })
    }
}

/// Counts a call in flight until dropped.
struct InFlight<'a>(&'a Slot);

impl<'a> InFlight<'a> {
    fn start(slot: &'a Slot) -> InFlight<'a> {
        let mut health = slot.health();
        health.calls += 1;
        health.in_flight += 1;
        drop(health);
        slot.touch();
        InFlight(slot)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.health().in_flight -= 1;
        self.0.touch();
    }
}

impl ClientCaller {
    pub(crate) fn new(upstreams: Upstreams) -> ClientCaller {
        let slots = upstreams
            .names()
            .into_iter()
            .filter_map(|name| {
                let upstream = upstreams.get(&name)?.clone();
                let limits = upstreams.limits(&name);
                Some((name, Arc::new(Slot::new(upstream, limits))))
            })
            .collect();
        let callers = upstreams
            .names()
            .into_iter()
            .filter_map(|name| {
                let limits = upstreams.limits(&name);
                (limits.isolation == Isolation::PerCaller).then(|| {
                    let callers = Callers {
                        slots: std::sync::Mutex::new(BTreeMap::new()),
                        idle: limits.idle.unwrap_or(DEFAULT_IDLE),
                        reaping: AtomicBool::new(false),
                    };
                    (name, Arc::new(callers))
                })
            })
            .collect();
        ClientCaller {
            upstreams: Arc::new(upstreams),
            slots,
            callers,
        }
    }

    /// The connection `caller`'s calls of `server` use: its own for a
    /// per-caller upstream, else the shared one; `None` for an upstream
    /// not declared.
    fn slot(&self, server: &str, caller: Option<&str>) -> Option<Arc<Slot>> {
        let shared = self.slots.get(server)?;
        let (Some(caller), Some(callers)) = (caller, self.callers.get(server)) else {
            return Some(shared.clone());
        };
        let mut slots = callers.slots();
        let slot = slots
            .entry(caller.to_owned())
            .or_insert_with(|| Arc::new(Slot::new(shared.upstream.clone(), shared.limits)))
            .clone();
        slot.touch();
        if !callers.reaping.swap(true, Ordering::SeqCst) {
            tokio::spawn(end_idle(callers.clone()));
        }
        Some(slot)
    }

    /// Whether `server` gives each caller a connection of its own (so a
    /// call must say whose it is).
    pub(crate) fn per_caller(&self, server: &str) -> bool {
        self.callers.contains_key(server)
    }

    /// Every upstream's health, by name (`get_status`'s `upstreams`).
    pub(crate) fn status(&self) -> Value {
        let upstreams: serde_json::Map<String, Value> = self
            .slots
            .iter()
            .map(|(name, slot)| {
                let mut status = slot.status();
                if let Some(callers) = self.callers.get(name) {
                    let each: serde_json::Map<String, Value> = callers
                        .slots()
                        .iter()
                        .map(|(caller, slot)| (caller.clone(), slot.status()))
                        .collect();
                    status["isolation"] = json!("per-caller");
                    status["idleSeconds"] = json!(callers.idle.as_secs_f64());
                    status["callers"] = Value::Object(each);
                }
                (name.clone(), status)
            })
            .collect();
        Value::Object(upstreams)
    }

    /// Every tool `server` offers, as it described it (`tools/list`).
    pub(crate) async fn list_tools(&self, server: &str) -> Result<Vec<Value>, RunError> {
        let client = self.client(server).await?;
        match client.list_tools_json().await {
            Ok(tools) => Ok(tools),
            Err(error) => {
                self.forget(server, &client, &error).await;
                Err(failed(server, &error))
            }
        }
    }

    /// `server`'s result for one request other than a tool call (its
    /// resources and prompts, passed through), or its refusal as it gave it.
    pub(crate) async fn request(
        &self,
        server: &str,
        method: &str,
        params: Value,
    ) -> Result<Value, ClientError> {
        let client = self
            .client(server)
            .await
            .map_err(|error| ClientError::Unreachable {
                url: server.to_owned(),
                reason: error.message,
            })?;
        let answer = client.request(method, params).await;
        if let Err(error) = &answer {
            self.forget(server, &client, error).await;
        }
        answer
    }

    /// The count of `notifications/tools/list_changed` from `server`'s open
    /// connection (`None`: none open, or a 2026-07-28 HTTP server, which
    /// has no stream for it). A connection made again has a count of its
    /// own.
    pub(crate) async fn tools_changed(
        &self,
        server: &str,
    ) -> Option<tokio::sync::watch::Receiver<u64>> {
        let slot = self.slots.get(server)?;
        let open = slot.client.lock().await;
        open.as_ref()?.tools_changed()
    }

    /// Ends every open connection (a stdio upstream's process is asked to
    /// exit: stdin closed, then SIGTERM, then SIGKILL).
    pub(crate) async fn close(&self) {
        let own: Vec<Arc<Slot>> = self
            .callers
            .values()
            .flat_map(|callers| std::mem::take(&mut *callers.slots()).into_values())
            .collect();
        for slot in own {
            end(slot).await;
        }
        for slot in self.slots.values() {
            slot.closed.store(true, Ordering::SeqCst);
            let client = slot.client.lock().await.take();
            if let Some(client) = client.and_then(Arc::into_inner) {
                client.close().await;
            }
        }
    }

    /// The open connection to `server`, connecting if there is none.
    async fn client(&self, server: &str) -> Result<Arc<Client>, RunError> {
        self.client_in(server, self.slots.get(server)).await
    }

    /// `slot`'s open connection (one of `server`'s), connecting if there is
    /// none.
    async fn client_in(
        &self,
        server: &str,
        slot: Option<&Arc<Slot>>,
    ) -> Result<Arc<Client>, RunError> {
        let Some(slot) = slot else {
            return Err(RunError::new(
                FailureCode::InvalidArguments,
                format!(
                    "no upstream server {server:?} is declared; the declared ones are: {}",
                    self.upstreams.names().join(", ")
                ),
            ));
        };
        // Held while connecting: calls that arrive meanwhile share the one
        // connection rather than each starting a server.
        let mut open = slot.client.lock().await;
        if let Some(client) = open.as_ref() {
            return Ok(client.clone());
        }
        let client = match connect(&slot.upstream).await {
            Ok(client) => client,
            Err(error) => {
                slot.now("down", Some(error.to_string()));
                return Err(failed(server, &error));
            }
        };
        if slot.health().state != "not started" {
            slot.health().restarts += 1;
        }
        slot.now("up", None);
        *open = Some(client.clone());
        if matches!(slot.upstream, Upstream::Stdio { .. })
            && !slot.supervised.swap(true, Ordering::SeqCst)
        {
            tokio::spawn(supervise(slot.clone(), client.clone()));
        }
        Ok(client)
    }

    /// After `error` on `client`: when the connection itself is lost, the
    /// next call connects again (unless another call already did).
    async fn forget(&self, server: &str, client: &Arc<Client>, error: &ClientError) {
        forget_in(self.slots.get(server), client, error).await;
    }
}

/// After `error` on `client`, `slot`'s connection: when it is lost, the
/// next call connects again (unless another call already did).
async fn forget_in(slot: Option<&Arc<Slot>>, client: &Arc<Client>, error: &ClientError) {
    if !connection_lost(error) {
        return;
    }
    if let Some(slot) = slot {
        let mut open = slot.client.lock().await;
        if open.as_ref().is_some_and(|open| Arc::ptr_eq(open, client)) {
            *open = None;
            slot.now("down", Some(error.to_string()));
        }
    }
}

/// Ends a caller's own connection, idle (or weir closing): no more starts
/// (its supervisor stops), and its process is asked to exit.
async fn end(slot: Arc<Slot>) {
    slot.closed.store(true, Ordering::SeqCst);
    slot.now("ended", None);
    let Some(mut client) = slot.client.lock().await.take() else {
        return;
    };
    // The supervisor lets its copy go within one look.
    for _ in 0..10 {
        match Arc::try_unwrap(client) {
            Ok(client) => return client.close().await,
            Err(shared) => client = shared,
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
    // Dropped here; the last copy's drop kills a stdio server's process.
}

/// Ends the connections of a per-caller upstream that have had no call for
/// its `idle` time, looking a few times within it.
async fn end_idle(callers: Arc<Callers>) {
    let every = (callers.idle / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    loop {
        tokio::time::sleep(every).await;
        let idle: Vec<Arc<Slot>> = {
            let mut slots = callers.slots();
            let names: Vec<String> = slots
                .iter()
                .filter(|(_, slot)| slot.idle_for(callers.idle))
                .map(|(name, _)| name.clone())
                .collect();
            names.iter().filter_map(|name| slots.remove(name)).collect()
        };
        for slot in idle {
            end(slot).await;
        }
    }
}

async fn connect(upstream: &Upstream) -> Result<Arc<Client>, ClientError> {
    let (target, options) = target(upstream);
    Ok(Arc::new(Client::connect(target, options).await?))
}

/// Keeps a stdio upstream running: when its process dies (idle or in a
/// call), starts it again after a backoff, unless a call already did.
async fn supervise(slot: Arc<Slot>, mut client: Arc<Client>) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let started = Instant::now();
        let error = loop {
            tokio::time::sleep(WATCH_EVERY).await;
            if slot.closed.load(Ordering::SeqCst) {
                return;
            }
            if let Some(error) = client.gone() {
                break error.to_string();
            }
            // A call found it broken and forgot it, or connected anew.
            match slot.client.lock().await.as_ref() {
                None => break "the connection broke".to_owned(),
                Some(open) if !Arc::ptr_eq(open, &client) => client = open.clone(),
                Some(_) => {}
            }
        };
        {
            let mut open = slot.client.lock().await;
            if open.as_ref().is_some_and(|open| Arc::ptr_eq(open, &client)) {
                *open = None;
            }
        }
        slot.now("down", Some(error));
        if started.elapsed() >= STABLE_AFTER {
            backoff = FIRST_BACKOFF;
        }
        match restart(&slot, &mut backoff).await {
            Some(restarted) => client = restarted,
            None => return,
        }
    }
}

/// Starts the upstream again after `backoff` (doubled at each try), until
/// it starts or a call started it meanwhile; `None` once weir closes.
async fn restart(slot: &Slot, backoff: &mut Duration) -> Option<Arc<Client>> {
    loop {
        {
            let mut health = slot.health();
            health.next_start_ms = Some(weir_runtime::now_ms() + backoff.as_millis() as u64);
        }
        slot.now("restarting", None);
        tokio::time::sleep(*backoff).await;
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
        let mut open = slot.client.lock().await;
        if slot.closed.load(Ordering::SeqCst) {
            return None;
        }
        if let Some(client) = open.as_ref() {
            return Some(client.clone());
        }
        match connect(&slot.upstream).await {
            Ok(client) => {
                slot.health().restarts += 1;
                slot.now("up", None);
                *open = Some(client.clone());
                return Some(client);
            }
            Err(error) => slot.now("restarting", Some(error.to_string())),
        }
    }
}

/// Where `upstream` is and how weir's client introduces itself to it.
fn target(upstream: &Upstream) -> (Target, ClientOptions) {
    let mut options = ClientOptions {
        name: "weir".into(),
        log_level: Some(LogLevel::Info),
        ..ClientOptions::default()
    };
    let target = match upstream {
        Upstream::Http { url, headers } => {
            options.headers = headers.clone();
            // The declaration's headers carry its credential, if any.
            Target::Http {
                url: url.clone(),
                token: None,
            }
        }
        Upstream::Stdio { program, args, env } => Target::Stdio(StdioCommand {
            program: program.into(),
            args: args.iter().map(Into::into).collect(),
            env: Some(
                env.iter()
                    .map(|(key, value)| (key.into(), value.into()))
                    .collect(),
            ),
        }),
    };
    (target, options)
}

/// Whether `error` means the connection is gone, not just this call.
fn connection_lost(error: &ClientError) -> bool {
    match error {
        ClientError::ServerExited { .. }
        // Over stdio the upstream was stopped for it; over HTTP a new
        // session costs little.
        | ClientError::MessageTooLarge { .. }
        | ClientError::Closed
        | ClientError::Unreachable { .. }
        | ClientError::StreamLost { .. }
        | ClientError::Spawn { .. } => true,
        ClientError::Http { .. } => session_lost(error),
        _ => false,
    }
}

/// Whether an HTTP upstream no longer knows weir's session (it restarted,
/// or ended the session): 404 as the protocol says, or the 400 "No valid
/// session ID provided" of the TypeScript SDK's servers. The request was
/// not run then, so it may be sent again on a new session.
fn session_lost(error: &ClientError) -> bool {
    match error {
        ClientError::Http { status: 404, .. } => true,
        ClientError::Http {
            status: 400,
            message,
            ..
        } => message.to_ascii_lowercase().contains("session"),
        _ => false,
    }
}

/// Where a call's reports (progress, partial results, log messages) go.
/// A run's tool records them in its log as they come (no hand-over to
/// another loop per notification); [`RemoteCaller::call`]'s caller reads
/// them from a channel.
#[async_trait]
pub(crate) trait Reports: Send + Sync {
    /// Takes one report; `Err` ends the call (with that error).
    async fn report(&self, kind: EventKind) -> Result<(), RunError>;
}

#[async_trait]
impl Reports for mpsc::Sender<EventKind> {
    async fn report(&self, kind: EventKind) -> Result<(), RunError> {
        // A receiver that is gone does not stop the call.
        let _ = self.send(kind).await;
        Ok(())
    }
}

#[async_trait]
impl RemoteCaller for ClientCaller {
    fn servers(&self) -> Vec<String> {
        self.upstreams.names()
    }

    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
        events: mpsc::Sender<EventKind>,
    ) -> Result<Completed, RunError> {
        self.call_as(server, None, tool, arguments, timeout, &events)
            .await
    }
}

impl ClientCaller {
    /// [`RemoteCaller::call`] for `caller` (the name of its credential):
    /// on its own connection when `server` is per-caller; its reports go
    /// to `reports`, in order.
    pub(crate) async fn call_as(
        &self,
        server: &str,
        caller: Option<&str>,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
        reports: &dyn Reports,
    ) -> Result<Completed, RunError> {
        let slot = self.slot(server, caller);
        let slot = slot.as_ref();
        let limits = slot.map(|slot| slot.limits).unwrap_or_default();
        // The sooner of the caller's time limit and the upstream's.
        let timeout = match (timeout, limits.timeout) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let _permit = match slot.and_then(|slot| slot.permits.as_ref()) {
            Some(permits) => Some(take_turn(server, permits, reports).await?),
            None => None,
        };
        let _counted = slot.map(|slot| InFlight::start(slot));
        let outcome = self
            .call_now(server, slot, tool, arguments, timeout, reports)
            .await;
        if outcome.is_err()
            && let Some(slot) = slot
        {
            slot.health().failed += 1;
        }
        outcome
    }
}

/// A permit of an upstream's `maxConcurrent`, said in the run's log when
/// the call has to wait for it.
async fn take_turn<'a>(
    server: &str,
    permits: &'a Semaphore,
    reports: &dyn Reports,
) -> Result<tokio::sync::SemaphorePermit<'a>, RunError> {
    if let Ok(permit) = permits.try_acquire() {
        return Ok(permit);
    }
    reports
        .report(
            Log {
                level: LogLevel::Info,
                stream: LogStream::default(),
                text: format!(
                    "waiting for a turn: the upstream {server} takes a limited number of calls at once (maxConcurrent)"
                ),
            }
            .into(),
        )
        .await?;
    Ok(permits
        .acquire()
        .await
        .expect("the semaphore is never closed"))
}

impl ClientCaller {
    /// One call, once its turn came, on `slot`'s connection.
    async fn call_now(
        &self,
        server: &str,
        slot: Option<&Arc<Slot>>,
        tool: &str,
        arguments: Value,
        timeout: Option<Duration>,
        reports: &dyn Reports,
    ) -> Result<Completed, RunError> {
        // A session the upstream lost is made again once, and the call,
        // which the upstream refused unrun, sent on it.
        let mut retried = false;
        'session: loop {
            let client = self.client_in(server, slot).await?;
            let mut call = client.call_stream(
                tool,
                arguments.clone(),
                CallOptions {
                    timeout,
                    ..CallOptions::default()
                },
            );
            let mut reported_any = false;
            loop {
                let event = call
                    .next()
                    .await
                    .unwrap_or(CallEvent::Error(ClientError::Closed));
                let forwarded = match event {
                    CallEvent::Error(error) => {
                        forget_in(slot, &client, &error).await;
                        if !retried && !reported_any && session_lost(&error) {
                            retried = true;
                            continue 'session;
                        }
                        return Err(call_failed(server, tool, timeout, &error));
                    }
                    CallEvent::Result(result) => return ended(server, tool, result),
                    other => match reported(other) {
                        Some(kind) => kind,
                        None => continue,
                    },
                };
                reported_any = true;
                reports.report(forwarded).await?;
            }
        }
    }
}

/// The upstream's result as the call's: `isError` fails it, keeping the
/// result.
fn ended(server: &str, tool: &str, result: weir_client::CallResult) -> Result<Completed, RunError> {
    let completed = Completed {
        content: result.content,
        structured: result.structured,
    };
    if !result.is_error {
        return Ok(completed);
    }
    let text = Content::text_of(&completed.content);
    Err(RunError::new(
        FailureCode::ToolError,
        format!("{tool} on the upstream {server} reported an error: {text}"),
    )
    .with_result(completed))
}

/// What the call reported meanwhile, as a run event; `None` for what is
/// not a report (a task's bare status, a weir server's run id).
fn reported(event: CallEvent) -> Option<EventKind> {
    Some(match event {
        CallEvent::Progress {
            progress,
            total,
            message,
        } => Progress {
            progress,
            total,
            message,
            ..Progress::default()
        }
        .into(),
        CallEvent::Partial {
            content,
            structured,
            ..
        } => Partial {
            content,
            items: structured.into_iter().collect(),
            group: None,
        }
        .into(),
        CallEvent::Log { level, data, .. } => Log {
            level,
            stream: LogStream::default(),
            text: data
                .as_str()
                .map_or_else(|| data.to_string(), str::to_owned),
        }
        .into(),
        // What a task says of itself is the nearest an upstream that runs
        // its call as a task comes to progress: kept as a log message.
        CallEvent::Task {
            status,
            message: Some(message),
            ..
        } => Log {
            level: LogLevel::Info,
            stream: LogStream::default(),
            text: format!("{}: {message}", status.as_str()),
        }
        .into(),
        CallEvent::Task { .. } | CallEvent::Run { .. } => return None,
        CallEvent::Result(_) | CallEvent::Error(_) => return None,
    })
}

fn call_failed(
    server: &str,
    tool: &str,
    timeout: Option<Duration>,
    error: &ClientError,
) -> RunError {
    match error {
        ClientError::Timeout { .. } => RunError::new(
            FailureCode::Timeout,
            format!(
                "{tool} on the upstream {server} did not end within {}",
                weir_core::human_duration(timeout.unwrap_or_default().as_millis() as u64)
            ),
        ),
        error => failed(server, error),
    }
}

fn failed(server: &str, error: &ClientError) -> RunError {
    let again = if connection_lost(error) {
        "; the next call connects to it again"
    } else {
        ""
    };
    RunError::new(
        FailureCode::ToolError,
        format!("calling the upstream {server}: {error}{again}"),
    )
}
