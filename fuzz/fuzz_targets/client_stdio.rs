//! The client's reading of a stdio server's output (weir-client,
//! `connection/stdio.rs`: `route`, which reads each line, turns it into an
//! `Incoming` and routes it by request id and token), and behind it the
//! handshake, `tools/list` and a tool call, all reading what the server
//! wrote. The input is that output.
//!
//! `route` is not a function of bytes (it reads a child's stdout and
//! answers on its stdin), so the target drives the public `Client` against
//! a real child: `sleep`, which writes nothing; the target writes the
//! input into the child's stdout pipe itself, through
//! `/proc/<pid>/fd/1`. Time is virtual and nothing else runs, so when the
//! runtime has nothing to do the client is waiting for the server: then
//! the next turn of the input is written. At the end the child is killed,
//! and the client must finish.
//!
//! Input: one byte of options (bit 0: 2026-07-28 (`server/discover`) rather
//! than `initialize`; bit 1: call as a task; bit 2: a 5 s call timeout;
//! bit 3: ask for log messages), then turns separated by 0xFF (never a byte
//! of UTF-8). `PID` in the input stands for this process's id: the client
//! puts it in its progress and partial-result tokens, so an input that
//! spelled it out would work in one run only. Inputs over 60 KiB are
//! skipped (scripts/fuzz makes at most 8 KiB): under a pipe's 64 KiB,
//! writing a turn never blocks.
//!
//! Properties: nothing panics; the call's stream ends, after the server
//! exits at the latest, with exactly one result or error, last; progress
//! is a number.
#![no_main]

use std::collections::VecDeque;
use std::fs::File;
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::{Mutex, OnceLock};
use std::task::Poll;
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use serde_json::json;
use weir_client::{
    CallEvent, CallOptions, Client, ClientOptions, Revision, StdioCommand, Target, TaskMode,
};
use weir_core::LogLevel;

const MAX_TURNS: usize = 8;
/// Longest input run (once `PID` is spelled out), under the 64 KiB a pipe
/// holds.
const MAX_INPUT: usize = 60 * 1024;
/// Consecutive idle rounds of the runtime that count as "waiting for the
/// server": a line read in one round wakes the task it is for in the next.
const IDLE_ROUNDS: usize = 4;

/// Children of this process already served, as (pid, start time), the
/// newest last: a killed child can linger a moment. The start time tells a
/// pid that came round again (they do, every 32768 on some machines) from
/// one served before.
fn served() -> &'static Mutex<VecDeque<(u32, u64)>> {
    static SERVED: OnceLock<Mutex<VecDeque<(u32, u64)>>> = OnceLock::new();
    SERVED.get_or_init(Mutex::default)
}

/// The `sleep` child just spawned, and the write end of its stdout. It is
/// looked for again for a while when not found at once.
fn the_server() -> Option<(u32, File)> {
    let start = Instant::now();
    loop {
        if let Some(found) = look_for_the_server() {
            return Some(found);
        }
        if start.elapsed() > Duration::from_secs(2) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn look_for_the_server() -> Option<(u32, File)> {
    let me = std::process::id();
    let mut served = served().lock().unwrap();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid … starttime …` (starttime is the 20th
        // field after comm, which may hold spaces and parentheses).
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = tail.split_whitespace().collect();
        let (Some(&state), Some(ppid), Some(started)) = (
            fields.first(),
            fields.get(1).and_then(|p| p.parse::<u32>().ok()),
            fields.get(19).and_then(|t| t.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if ppid != me
            || state == "Z"
            || !head.ends_with("(sleep")
            || served.contains(&(pid, started))
        {
            continue;
        }
        let Ok(stdout) = File::options()
            .write(true)
            .open(format!("/proc/{pid}/fd/1"))
        else {
            continue;
        };
        if served.len() == 4096 {
            served.pop_front();
        }
        served.push_back((pid, started));
        return Some((pid, stdout));
    }
    None
}

/// This process's children, `pid (comm) state` each, to say why none
/// was taken for the server.
fn children() -> String {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some((head, tail)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = tail.split_whitespace().take(2).collect();
        if fields.get(1) == Some(&me.as_str()) {
            found.push(format!("{head}) {}", fields[0]));
        }
    }
    let last = served().lock().unwrap().back().copied();
    format!("{found:?} (the last one served: {last:?})")
}

/// Kills the child and waits until it is a zombie (or reaped): only then
/// are its files released, so the end of its output is there before the
/// client looks again. (Its `/proc/<pid>/fd` empties a moment before: the
/// last close of a pipe is deferred to the end of the exit.)
fn kill(pid: u32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    let stat = format!("/proc/{pid}/stat");
    let start = Instant::now();
    loop {
        let state = std::fs::read_to_string(&stat).ok().and_then(|stat| {
            let (_, tail) = stat.rsplit_once(')')?;
            tail.split_whitespace().next().map(str::to_owned)
        });
        if !state.is_some_and(|state| state != "Z" && state != "X") {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "a killed child lives on"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// What a client does with a server: connect, list the tools, call one and
/// read the call to its end, close.
async fn session(options: u8) {
    let revision = match options & 1 {
        1 => Revision::Stateless,
        _ => Revision::Sessions,
    };
    let client_options = ClientOptions {
        revision,
        log_level: (options & 8 != 0).then_some(LogLevel::Debug),
        ..ClientOptions::default()
    };
    let target = Target::Stdio(StdioCommand {
        program: "sleep".into(),
        args: vec!["1000".into()],
        env: None,
    });
    let Ok(client) = Client::connect(target, client_options).await else {
        return;
    };
    let _ = client.list_tools().await;
    let call_options = CallOptions {
        task: match options & 2 {
            2 => TaskMode::Always,
            _ => TaskMode::WhenRequired,
        },
        timeout: (options & 4 != 0).then_some(Duration::from_secs(5)),
    };
    let mut call = client.call_stream("echo", json!({"text": "hi"}), call_options);
    let mut ended = false;
    while let Some(event) = call.next().await {
        assert!(!ended, "an event after the call's last: {event:?}");
        ended = event.is_terminal();
        if let CallEvent::Progress { progress, .. } = event {
            assert!(progress.is_finite(), "progress {progress}");
        }
    }
    assert!(
        ended,
        "the call's stream ended without a result or an error"
    );
    client.close().await;
}

/// `script` with every `PID` replaced by `pid`.
fn with_pid(script: &[u8], pid: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(script.len());
    let mut rest = script;
    while !rest.is_empty() {
        if rest.starts_with(b"PID") {
            out.extend_from_slice(pid);
            rest = &rest[3..];
        } else {
            out.push(rest[0]);
            rest = &rest[1..];
        }
    }
    out
}

/// Runs `session` until it is done (`true`) or waits on the server.
async fn until_idle(session: &mut Pin<&mut impl Future<Output = ()>>) -> bool {
    for _ in 0..IDLE_ROUNDS {
        tokio::select! {
            biased;
            () = session.as_mut() => return true,
            () = tokio::time::sleep(Duration::from_millis(1)) => {}
        }
    }
    false
}

fn init() {
    // libFuzzer's `main` is not Rust's: SIGPIPE would still end the
    // process. A tokio listener installs a handler for good, so a write to
    // a pipe nobody reads fails instead.
    let runtime = weir_fuzz::runtime();
    runtime.block_on(async {
        let _ = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::pipe());
    });
}

fuzz_target!(init: init(), |data: &[u8]| {
    let Some((&options, script)) = data.split_first() else {
        return;
    };
    let script = with_pid(script, std::process::id().to_string().as_bytes());
    if script.len() > MAX_INPUT {
        return;
    }
    let runtime = weir_fuzz::runtime();
    runtime.block_on(async {
        let mut session = std::pin::pin!(session(options));
        // One step: the server is spawned and asked its first question.
        let first = std::future::poll_fn(|cx| Poll::Ready(session.as_mut().poll(cx))).await;
        if first.is_ready() {
            return;
        }
        let Some((pid, mut stdout)) = the_server() else {
            panic!("no server found among this process's children: {}", children());
        };
        let mut done = false;
        for turn in script.split(|&b| b == 0xFF).take(MAX_TURNS) {
            if stdout.write_all(turn).is_err() {
                break;
            }
            done = until_idle(&mut session).await;
            if done {
                break;
            }
        }
        drop(stdout);
        kill(pid);
        if !done {
            tokio::time::timeout(Duration::from_secs(3600), session)
                .await
                .expect("the client did not finish after its server exited");
        }
    });
});
