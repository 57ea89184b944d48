//! MCP over a child process's stdin and stdout, one JSON-RPC message per
//! line.
//!
//! One task reads what the server writes and routes it: responses by request
//! id, progress and partial-result notifications by their token, logging and
//! task-status notifications to every call in flight (stdio does not say
//! which call those belong to). The server's stderr is kept (its last lines)
//! to explain why it exited.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::process::{Pid, Signal};
use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::mpsc;

use super::exchange::{
    Delivery, Exchange, Inbound, Message, Parsed, Tokens, answer_server_request, parse,
};
use super::lines::{LineRead, read_line, read_line_start};
use crate::MAX_MESSAGE_BYTES;
use crate::error::ClientError;
use crate::options::StdioCommand;

/// How many of the server's last stderr lines are kept.
const STDERR_LINES: usize = 8;
/// How long a server gets to exit after its stdin closes (weir takes a
/// few hundred ms), and again after SIGTERM.
const EXIT_GRACE: Duration = Duration::from_millis(1000);

/// A running server process.
pub(crate) struct StdioConnection {
    lines: mpsc::Sender<Line>,
    shared: Arc<Shared>,
    child: Arc<Mutex<Child>>,
    /// How many `notifications/tools/list_changed` the server has sent.
    tools_changed: tokio::sync::watch::Receiver<u64>,
}

enum Line {
    Message(Vec<u8>),
    /// Close the server's stdin.
    Close,
}

#[derive(Default)]
struct Shared {
    routes: Mutex<Routes>,
    stderr: Mutex<VecDeque<String>>,
    /// Set once the server's stdout has closed.
    gone: Mutex<Option<ClientError>>,
}

#[derive(Default)]
struct Routes {
    next_key: u64,
    entries: HashMap<u64, Route>,
}

struct Route {
    /// The request id, as JSON text.
    request_id: String,
    tokens: Tokens,
    sender: mpsc::Sender<Delivery>,
}

/// Keeps a request's route while its exchange lives.
struct Registration {
    key: u64,
    shared: Arc<Shared>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock(&self.shared.routes).entries.remove(&self.key);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn gone(&self) -> Option<ClientError> {
        lock(&self.gone).clone()
    }

    fn stderr_tail(&self) -> String {
        lock(&self.stderr)
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Who gets `message`.
    fn recipients(&self, message: &Message) -> Vec<mpsc::Sender<Delivery>> {
        // One call in flight (the common case) gets every notification
        // without its token being read here: the call checks it (a
        // stale call's progress is dropped there), and one that carries
        // none is everyone's anyway.
        if let Message::Notification { .. } = message {
            let routes = lock(&self.routes);
            let mut calls = routes
                .entries
                .values()
                .filter(|route| !route.tokens.is_empty());
            if let (Some(only), None) = (calls.next(), calls.next()) {
                return vec![only.sender.clone()];
            }
        }
        // Read before the lock is taken: the routes are not held while
        // the params are scanned.
        let token = message.token();
        let routes = lock(&self.routes);
        let all = routes.entries.values();
        match message {
            Message::Response { id, .. } => {
                let id = id.to_string();
                all.filter(|route| route.request_id == id)
                    .map(|route| route.sender.clone())
                    .collect()
            }
            Message::Notification { .. } => match token {
                Some(token) => all
                    .filter(|route| route.tokens.iter().any(|t| *t == token))
                    .map(|route| route.sender.clone())
                    .collect(),
                // Uncorrelated (logging, task status): every call gets it.
                None => all
                    .filter(|route| !route.tokens.is_empty())
                    .map(|route| route.sender.clone())
                    .collect(),
            },
        }
    }
}

fn to_line(message: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(message).expect("JSON values serialize");
    line.push(b'\n');
    line
}

impl StdioConnection {
    /// Starts the server in its own process group.
    pub(crate) fn spawn(command: &StdioCommand) -> Result<StdioConnection, ClientError> {
        let mut spawned = tokio::process::Command::new(&command.program);
        if let Some(env) = &command.env {
            spawned
                .env_clear()
                .envs(env.iter().map(|(key, value)| (key, value)));
        }
        let mut child = spawned
            .args(&command.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|error| ClientError::Spawn {
                command: command.display(),
                reason: error.to_string(),
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("all three were piped");
        };
        let shared = Arc::new(Shared::default());
        let child = Arc::new(Mutex::new(child));
        let (lines, queue) = mpsc::channel(256);
        let (changed, tools_changed) = tokio::sync::watch::channel(0);
        tokio::spawn(write_lines(stdin, queue));
        let stderr_done = tokio::spawn(keep_stderr(stderr, shared.clone()));
        tokio::spawn(route(
            stdout,
            shared.clone(),
            lines.downgrade(),
            child.clone(),
            stderr_done,
            changed,
        ));
        Ok(StdioConnection {
            lines,
            shared,
            child,
            tools_changed,
        })
    }

    /// Counts the server's `notifications/tools/list_changed`.
    pub(crate) fn tools_changed(&self) -> tokio::sync::watch::Receiver<u64> {
        self.tools_changed.clone()
    }

    /// Why the server is gone, once it exited (its stdout closed).
    pub(crate) fn gone(&self) -> Option<ClientError> {
        self.shared.gone()
    }

    /// Sends a request; its exchange gets its response and the notifications
    /// carrying `tokens`.
    pub(crate) async fn request(
        &self,
        message: Value,
        tokens: Tokens,
    ) -> Result<Exchange, ClientError> {
        let (sender, messages) = mpsc::channel(256);
        let key = {
            let mut routes = lock(&self.shared.routes);
            routes.next_key += 1;
            let key = routes.next_key;
            routes.entries.insert(
                key,
                Route {
                    request_id: message["id"].to_string(),
                    tokens,
                    sender,
                },
            );
            key
        };
        let registration = Registration {
            key,
            shared: self.shared.clone(),
        };
        // Checked after registering: the reader marks the server gone before
        // it tells the routes, so one of the two sees it.
        if let Some(gone) = self.shared.gone() {
            return Err(gone);
        }
        self.send(message).await?;
        Ok(Exchange::new(messages, registration))
    }

    /// Writes one message.
    pub(crate) async fn send(&self, message: Value) -> Result<(), ClientError> {
        if let Some(gone) = self.shared.gone() {
            return Err(gone);
        }
        self.lines
            .send(Line::Message(to_line(&message)))
            .await
            .map_err(|_| self.shared.gone().unwrap_or(ClientError::Closed))
    }

    /// Closes the server's stdin and waits for it to exit; if it does not,
    /// sends its process group SIGTERM, then SIGKILL (the MCP stdio
    /// shutdown sequence).
    pub(crate) async fn close(&self) {
        let _ = self.lines.send(Line::Close).await;
        for signal in [Signal::TERM, Signal::KILL] {
            if exit_status(&self.child, EXIT_GRACE).await.is_some() {
                return;
            }
            signal_group(&self.child, signal);
        }
    }
}

impl Drop for StdioConnection {
    /// Dropped without [`StdioConnection::close`]: the server (and what it
    /// started) must not outlive the client.
    fn drop(&mut self) {
        if matches!(lock(&self.child).try_wait(), Ok(None)) {
            signal_group(&self.child, Signal::TERM);
        }
    }
}

/// Signals the server's process group (it was spawned as its leader, so a
/// shell and the programs it started go together).
fn signal_group(child: &Mutex<Child>, signal: Signal) {
    let leader = lock(child).id().and_then(|id| Pid::from_raw(id as i32));
    if let Some(leader) = leader {
        // It may have exited in between: nothing left to signal then.
        let _ = rustix::process::kill_process_group(leader, signal);
    }
}

async fn write_lines(mut stdin: ChildStdin, mut queue: mpsc::Receiver<Line>) {
    while let Some(Line::Message(line)) = queue.recv().await {
        if stdin.write_all(&line).await.is_err() {
            break;
        }
        if queue.is_empty() && stdin.flush().await.is_err() {
            break;
        }
    }
    // Dropping stdin closes it: the server sees end of input.
}

async fn keep_stderr(stderr: ChildStderr, shared: Arc<Shared>) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    // 500 characters of each line are kept; up to four bytes each.
    while let Ok(true) = read_line_start(&mut reader, &mut line, 2_000).await {
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        let mut kept = lock(&shared.stderr);
        if kept.len() == STDERR_LINES {
            kept.pop_front();
        }
        kept.push_back(text.chars().take(500).collect());
    }
}

/// Reads the server's stdout until it closes, routing each message.
async fn route(
    stdout: ChildStdout,
    shared: Arc<Shared>,
    lines: mpsc::WeakSender<Line>,
    child: Arc<Mutex<Child>>,
    stderr_done: tokio::task::JoinHandle<()>,
    tools_changed: tokio::sync::watch::Sender<u64>,
) {
    // Large enough to take many lines a read when the server is ahead.
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let mut batch = Batch::default();
    let mut too_long = false;
    loop {
        // Handed over once no whole line waits in the reader (reading
        // may then wait for the server), or once it is full.
        if batch.is_full() || !reader.buffer().contains(&b'\n') {
            batch.flush().await;
        }
        match read_line(&mut reader, &mut line, MAX_MESSAGE_BYTES).await {
            Ok(LineRead::Line) => {}
            Ok(LineRead::End) | Err(_) => break,
            Ok(LineRead::TooLong) => {
                too_long = true;
                break;
            }
        }
        // Anything that is not JSON-RPC (a banner, a stray print) is skipped.
        let message = match parse(&line) {
            Some(Parsed::Message(Message::Notification { method, .. }))
                if method == "notifications/tools/list_changed" =>
            {
                tools_changed.send_modify(|count| *count += 1);
                continue;
            }
            Some(Parsed::Message(message)) => message,
            Some(Parsed::Request { id, method }) => {
                batch.flush().await;
                // Weak: once the connection is dropped, stdin may close.
                if let Some(lines) = lines.upgrade() {
                    let answer = answer_server_request(&id, &method);
                    let _ = lines.send(Line::Message(to_line(&answer))).await;
                }
                continue;
            }
            None => continue,
        };
        // A message for one call joins its batch; one for several, or
        // for another call, goes after the batch has been handed over.
        let recipients = shared.recipients(&message);
        let message = match &recipients[..] {
            [only] => batch.add(only, message, line.len()),
            _ => Some(message),
        };
        if let Some(message) = message {
            batch.flush().await;
            deliver(recipients, message).await;
        }
    }
    batch.flush().await;
    let error = if too_long {
        // Its stdout can no longer be read line by line: the server is
        // stopped, and every call waiting on it is told why.
        signal_group(&child, Signal::KILL);
        ClientError::MessageTooLarge {
            limit: MAX_MESSAGE_BYTES,
        }
    } else {
        // The server closed its stdout: it is gone, or going.
        let status = exit_status(&child, Duration::from_secs(1))
            .await
            .unwrap_or_else(|| "it closed its stdout but is still running".into());
        let _ = tokio::time::timeout(Duration::from_millis(500), stderr_done).await;
        ClientError::ServerExited {
            status,
            stderr: shared.stderr_tail(),
        }
    };
    *lock(&shared.gone) = Some(error.clone());
    let waiting: Vec<_> = lock(&shared.routes)
        .entries
        .values()
        .map(|route| route.sender.clone())
        .collect();
    for route in waiting {
        let _ = route.send(Err(error.clone()).into()).await;
    }
}

/// Hands `message` to each of `recipients`. Nearly always there is one
/// (a response, a call's own progress): it gets the message itself, not a
/// copy — a large result or a stream of partials is not cloned per message.
async fn deliver(mut recipients: Vec<mpsc::Sender<Delivery>>, message: Message) {
    let Some(last) = recipients.pop() else {
        return;
    };
    for recipient in recipients {
        let _ = recipient.send(Ok(message.clone()).into()).await;
    }
    let _ = last.send(Ok(message).into()).await;
}

/// The most messages, and about the most bytes of them, handed to a call
/// at once: a call's channel holds 256 hand-overs, which bounds what waits
/// for a slow call to this many times that.
const BATCH: usize = 64;
const BATCH_BYTES: usize = 64 * 1024;

/// Messages read one after another for one call, handed over together
/// while more lines wait in the reader: a server that writes faster than
/// its lines are routed costs one hand-over and one wake-up of the call
/// per batch, not per message. Order is kept: a message for anyone else
/// is delivered only after the batch.
#[derive(Default)]
struct Batch {
    to: Option<mpsc::Sender<Delivery>>,
    messages: Vec<Inbound>,
    /// The length of the lines they were read from.
    bytes: usize,
}

impl Batch {
    /// Adds `message` for `recipient` if the batch is for it (or empty);
    /// gives it back otherwise.
    fn add(
        &mut self,
        recipient: &mpsc::Sender<Delivery>,
        message: Message,
        bytes: usize,
    ) -> Option<Message> {
        match &self.to {
            Some(to) if !to.same_channel(recipient) => return Some(message),
            Some(_) => {}
            None => self.to = Some(recipient.clone()),
        }
        self.messages.push(Ok(message));
        self.bytes += bytes;
        None
    }

    fn is_full(&self) -> bool {
        self.messages.len() >= BATCH || self.bytes >= BATCH_BYTES
    }

    /// Hands the batch over (waiting for room in the call's channel).
    async fn flush(&mut self) {
        let Some(to) = self.to.take() else { return };
        self.bytes = 0;
        let delivery = match self.messages.len() {
            1 => Delivery::One(self.messages.pop().expect("one message")),
            _ => Delivery::Many(std::mem::take(&mut self.messages)),
        };
        let _ = to.send(delivery).await;
    }
}

/// The child's exit status, if it exits within `wait`.
async fn exit_status(child: &Mutex<Child>, wait: Duration) -> Option<String> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match lock(child).try_wait() {
            Ok(Some(status)) => return Some(status.to_string()),
            Ok(None) => {}
            Err(error) => return Some(format!("unknown status: {error}")),
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
