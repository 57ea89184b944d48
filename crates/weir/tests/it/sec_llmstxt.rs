//! Issue 22, llms.txt: sources inside a root, no clone of an undeclared address, a bounded model client (findings 5, 11).
//!
//! Through the real binary: `weir serve --http` (its peak memory read from
//! `/proc/PID/status`), driven with `weir call`. The model endpoint is a
//! tiny hostile HTTP server started here on 127.0.0.1, a thread writing
//! raw HTTP: it streams tokens forever, sends one endless line, answers
//! 500 with a 1 GiB body, or drips keep-alives forever; its own loops are
//! bounded in bytes and time, so a test against a weir without the bounds
//! fails instead of hanging. A well-behaved variant records every request,
//! to show what reaches a model.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
/// The model's whole-answer time given to weir in these tests.
const LLM_TIMEOUT_S: u64 = 5;
/// The acceptance bound on weir's peak resident memory.
const MAX_RSS_KIB: u64 = 256 * 1024;
/// How long a run may take here at most: the configured time, plus
/// starting `weir call`, gathering the files and writing the artifacts on
/// a loaded machine.
const RUN_BOUND: Duration = Duration::from_secs(LLM_TIMEOUT_S + 25);

/// A process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `weir serve --http` in memory with `extra` arguments; its process and URL.
fn weir_server(extra: &[&str]) -> (Killed, String) {
    let mut command = Command::new(WEIR);
    command
        .args(["serve", "--http", "127.0.0.1:0", "--memory", "--no-exec"])
        .args(extra)
        .env_remove("WEIR_TOKEN")
        .env_remove("WEIR_ROOTS")
        .env_remove("WEIR_LLM_ENDPOINT")
        .env_remove("WEIR_LLM_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let child = Killed(child);
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = sender.send(line);
        }
    });
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("weir serve says where it serves within 60 s");
        if line.contains("serving MCP at") {
            let url = line
                .split_whitespace()
                .find(|w| w.starts_with("http://"))
                .unwrap()
                .to_owned();
            std::thread::spawn(move || lines.iter().for_each(drop));
            return (child, url);
        }
    }
}

/// The peak resident memory of `process`, in KiB.
fn peak_rss_kib(process: &Killed) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", process.0.id())).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// What one `weir call` printed, how it ended, and how long it took.
struct Called {
    lines: Vec<Value>,
    stdout: String,
    succeeded: bool,
    took: Duration,
}

impl Called {
    fn result(&self) -> &Value {
        let last = self.lines.last().expect("a result line");
        assert_eq!(last["type"], "result", "{}", self.stdout);
        last
    }
}

/// `weir call --url URL --output jsonl TOOL ARGS…`, killed (and failed) past `bound`.
fn call(url: &str, args: &[&str], bound: Duration) -> Called {
    let started = Instant::now();
    let mut child = Killed(
        Command::new(WEIR)
            .args(["call", "--url", url, "--output", "jsonl"])
            .args(args)
            .env_remove("WEIR_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut stdout = child.0.stdout.take().unwrap();
    let (sender, read) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        let _ = sender.send(text);
    });
    let stdout = read
        .recv_timeout(bound)
        .unwrap_or_else(|_| panic!("weir call {args:?} did not end within {bound:?}"));
    let succeeded = child.0.wait().unwrap().success();
    let lines = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    Called {
        lines,
        stdout,
        succeeded,
        took: started.elapsed(),
    }
}

/// How the fake model endpoint answers.
#[derive(Clone, Copy, Debug)]
enum Behaviour {
    /// A short, well-formed streamed answer.
    Answer,
    /// Tokens as fast as the socket takes them, forever.
    EndlessTokens,
    /// A 200, then one `data:` line that never ends.
    EndlessLine,
    /// HTTP 500 with a body of 1 GiB.
    HugeErrorBody,
    /// One token, then a keep-alive comment every 100 ms, forever.
    Drip,
}

/// Most bytes one hostile answer writes, and the longest it writes for:
/// a weir without bounds makes the test fail, not hang.
const MAX_ANSWER_BYTES: u64 = 1 << 30;
const MAX_ANSWER_TIME: Duration = Duration::from_secs(60);

/// A fake OpenAI-compatible endpoint on 127.0.0.1: a thread accepting up
/// to 64 connections for at most 3 minutes, a thread per connection.
struct Endpoint {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl Endpoint {
    fn start(behaviour: Behaviour) -> Endpoint {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopped) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(180);
            let mut accepted = 0;
            while accepted < 64 && Instant::now() < until && !stopped.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((socket, _)) => {
                        accepted += 1;
                        let (seen, stopped) = (seen.clone(), stopped.clone());
                        std::thread::spawn(move || answer(socket, behaviour, &seen, &stopped));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Endpoint {
            url,
            requests,
            stop,
        }
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

/// Reads one HTTP request (head and `content-length` body, at most 4 MiB).
fn read_request(socket: &mut TcpStream) -> Option<String> {
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut data = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let read = socket.read(&mut buffer).ok()?;
        if read == 0 || data.len() > 4 << 20 {
            return None;
        }
        data.extend_from_slice(&buffer[..read]);
    };
    let head = String::from_utf8_lossy(&data[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or(0)
        .min(4 << 20);
    while data.len() < head_end + length {
        let read = socket.read(&mut buffer).ok()?;
        if read == 0 {
            break;
        }
        data.extend_from_slice(&buffer[..read]);
    }
    Some(String::from_utf8_lossy(&data[head_end..]).into_owned())
}

/// Answers one connection as `behaviour` says.
fn answer(
    mut socket: TcpStream,
    behaviour: Behaviour,
    seen: &Mutex<Vec<String>>,
    stop: &AtomicBool,
) {
    let Some(body) = read_request(&mut socket) else {
        return;
    };
    seen.lock().unwrap().push(body);
    // A client that stops reading ends the answer too.
    let _ = socket.set_write_timeout(Some(Duration::from_secs(5)));
    let token = |text: &str| {
        format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"finish_reason\":null}}]}}\n\n"
        )
    };
    let sse_head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
    // Writes `piece` (made by `next`) until the bounds, a stop or a write error.
    let endless = |socket: &mut TcpStream, next: &dyn Fn() -> Vec<u8>, pause: Duration| {
        let until = Instant::now() + MAX_ANSWER_TIME;
        let mut written = 0u64;
        while written < MAX_ANSWER_BYTES && Instant::now() < until && !stop.load(Ordering::SeqCst) {
            let piece = next();
            if socket.write_all(&piece).is_err() {
                return;
            }
            written += piece.len() as u64;
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
        }
    };
    match behaviour {
        Behaviour::Answer => {
            let _ = socket.write_all(
                format!(
                    "{sse_head}{}{}data: [DONE]\n\n",
                    token("A small"),
                    token(" project.")
                )
                .as_bytes(),
            );
        }
        Behaviour::EndlessTokens => {
            if socket.write_all(sse_head.as_bytes()).is_ok() {
                let piece = token("word ").repeat(64).into_bytes();
                endless(&mut socket, &|| piece.clone(), Duration::ZERO);
            }
        }
        Behaviour::EndlessLine => {
            let start =
                format!("{sse_head}data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"");
            if socket.write_all(start.as_bytes()).is_ok() {
                let piece = vec![b'a'; 64 * 1024];
                endless(&mut socket, &|| piece.clone(), Duration::ZERO);
            }
        }
        Behaviour::HugeErrorBody => {
            let head = format!(
                "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: {MAX_ANSWER_BYTES}\r\nconnection: close\r\n\r\n"
            );
            if socket.write_all(head.as_bytes()).is_ok() {
                let piece = vec![b'x'; 64 * 1024];
                endless(&mut socket, &|| piece.clone(), Duration::ZERO);
            }
        }
        Behaviour::Drip => {
            if socket
                .write_all(format!("{sse_head}{}", token("Hi")).as_bytes())
                .is_ok()
            {
                endless(
                    &mut socket,
                    &|| b": keep-alive\n\n".to_vec(),
                    Duration::from_millis(100),
                );
            }
        }
    }
}

/// A small repository to describe, in `dir`.
fn fixture(dir: &Path) {
    for (path, text) in [
        (
            "README.md",
            "# Tally\n\nTally counts words in text files.\n",
        ),
        (
            "docs/usage.md",
            "# Usage\n\nRun `tally FILE` to count words.\n",
        ),
        ("docs/design.md", "# Design\n\nOne pass over each file.\n"),
        (
            "Cargo.toml",
            "[package]\nname = \"tally\"\ndescription = \"Counts words.\"\n",
        ),
    ] {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// A root holding a small repository: (the root, the repository in it).
fn root_with_repo() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let repo = root.path().join("tally");
    fixture(&repo);
    (root, repo)
}

/// Runs llmstxt_generate on a small repository against a hostile endpoint
/// with `--llm-timeout 5`: the run ends by itself, with the fallback where
/// the model failed, and weir's peak memory stays under 256 MiB.
fn against(behaviour: Behaviour) -> Called {
    let endpoint = Endpoint::start(behaviour);
    let (root, repo) = root_with_repo();
    let (weir, url) = weir_server(&[
        "--root",
        root.path().to_str().unwrap(),
        "--llm-endpoint",
        &endpoint.url,
        "--llm-model",
        "hostile",
        "--llm-timeout",
        &LLM_TIMEOUT_S.to_string(),
    ]);
    let called = call(
        &url,
        &["llmstxt_generate", &format!("source={}", repo.display())],
        Duration::from_secs(150),
    );
    let peak = peak_rss_kib(&weir);
    eprintln!(
        "{behaviour:?}: the run took {:?}; weir's peak RSS was {} MiB",
        called.took,
        peak / 1024
    );
    assert!(
        called.took < RUN_BOUND && peak < MAX_RSS_KIB,
        "{behaviour:?}: the run took {:?} (bound {RUN_BOUND:?}); weir's peak RSS was {} MiB (bound {} MiB)",
        called.took,
        peak / 1024,
        MAX_RSS_KIB / 1024
    );
    assert!(
        !endpoint.requests().is_empty(),
        "{behaviour:?}: the model was asked"
    );
    let result = called.result();
    assert_eq!(
        result["is_error"], false,
        "{behaviour:?}: {}",
        called.stdout
    );
    let structured = &result["structured"];
    assert_eq!(
        structured["mode"], "fallback",
        "{behaviour:?}: {structured}"
    );
    assert!(
        structured["llms_txt"]
            .as_str()
            .unwrap()
            .starts_with("# tally\n\n> Counts words."),
        "{structured}"
    );
    called
}

/// The model's failures the run reported, as one text.
fn failures(called: &Called) -> String {
    called.result()["structured"]["model"]["failures"].to_string()
}

#[test]
fn finding5_an_endless_token_stream_ends_at_the_answer_cap_in_bounded_memory() {
    let called = against(Behaviour::EndlessTokens);
    let why = failures(&called);
    assert!(why.contains("ran longer than asked (max_tokens"), "{why}");
}

#[test]
fn finding5_one_endless_line_ends_at_the_line_cap_in_bounded_memory() {
    let called = against(Behaviour::EndlessLine);
    let why = failures(&called);
    assert!(why.contains("line longer than"), "{why}");
}

#[test]
fn finding5_a_1_gib_error_body_is_read_only_in_part() {
    let called = against(Behaviour::HugeErrorBody);
    let why = failures(&called);
    assert!(why.contains("HTTP 500"), "{why}");
    // Only the start of the body is kept for the message.
    assert!(why.len() < 16 * 1024, "{} bytes", why.len());
}

#[test]
fn finding5_an_answer_that_drips_forever_ends_at_the_configured_time() {
    let called = against(Behaviour::Drip);
    let why = failures(&called);
    assert!(why.contains(&format!("{LLM_TIMEOUT_S} s")), "{why}");
}

/// A directory no other user may read, outside every root, holding a
/// secret that looks like a repository's README.
fn private_repo(secret: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("weir-private-")
        .tempdir_in(std::env::temp_dir())
        .unwrap();
    std::fs::write(
        dir.path().join("README.md"),
        format!("# Secrets\n\nThe admin token is {secret}.\n"),
    )
    .unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

#[test]
fn finding11_a_source_outside_the_roots_is_refused_and_never_reaches_the_model() {
    let secret = "SECRET-outside-the-roots-7f3a";
    let private = private_repo(secret);
    let endpoint = Endpoint::start(Behaviour::Answer);
    let root = tempfile::tempdir().unwrap();
    let (_weir, url) = weir_server(&[
        "--root",
        root.path().to_str().unwrap(),
        "--llm-endpoint",
        &endpoint.url,
        "--llm-model",
        "recording",
    ]);
    // By absolute path, and by a path that climbs out of the root.
    let climbing = format!(
        "{}/../..{}",
        root.path().display(),
        private.path().display()
    );
    for source in [private.path().to_str().unwrap(), climbing.as_str()] {
        let called = call(
            &url,
            &["llmstxt_generate", &format!("source={source}")],
            Duration::from_secs(60),
        );
        assert!(!called.succeeded, "{source}: {}", called.stdout);
        assert_eq!(called.result()["is_error"], true, "{}", called.stdout);
        assert!(called.stdout.contains("outside"), "{}", called.stdout);
        assert!(called.stdout.contains("--root"), "{}", called.stdout);
        assert!(!called.stdout.contains(secret), "{}", called.stdout);
    }
    let asked = endpoint.requests();
    assert!(
        asked.iter().all(|request| !request.contains(secret)),
        "the secret reached the model: {asked:?}"
    );
    assert!(asked.is_empty(), "{asked:?}");
}

#[test]
fn finding11_llmstxt_validate_reads_no_file_outside_the_roots() {
    let secret = "SECRET-validate-9c1e";
    let private = private_repo(secret);
    let root = tempfile::tempdir().unwrap();
    let (_weir, url) = weir_server(&["--root", root.path().to_str().unwrap()]);
    let path = private.path().join("README.md");
    let called = call(
        &url,
        &["llmstxt_validate", &format!("path={}", path.display())],
        Duration::from_secs(60),
    );
    assert_eq!(called.result()["is_error"], true, "{}", called.stdout);
    assert!(called.stdout.contains("outside"), "{}", called.stdout);
    assert!(!called.stdout.contains(secret), "{}", called.stdout);
}

/// A git repository at `dir` with one commit.
fn git_repo(dir: &Path) {
    fixture(dir);
    for args in [
        &["init", "--quiet"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "--quiet",
            "-m",
            "first",
        ],
    ] {
        let status = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }
}

#[test]
fn finding11_file_and_loopback_urls_are_not_cloned_and_nothing_connects() {
    let root = tempfile::tempdir().unwrap();
    let repo = root.path().join("tally");
    std::fs::create_dir(&repo).unwrap();
    git_repo(&repo);
    // A listener on loopback, counting whoever connects.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connections = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (counted, stopped) = (connections.clone(), stop.clone());
    let watcher = std::thread::spawn(move || {
        let until = Instant::now() + Duration::from_secs(180);
        while Instant::now() < until && !stopped.load(Ordering::SeqCst) {
            if let Ok((socket, _)) = listener.accept() {
                counted.fetch_add(1, Ordering::SeqCst);
                drop(socket);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    // Even with a clone host allowed, none of these is it.
    let (_weir, url) = weir_server(&[
        "--root",
        root.path().to_str().unwrap(),
        "--llmstxt-clone-host",
        "example.invalid",
    ]);
    for source in [
        format!("file://{}", repo.display()),
        format!("http://127.0.0.1:{port}/x.git"),
        format!("https://127.0.0.1:{port}/x.git"),
        format!("ssh://127.0.0.1:{port}/x.git"),
        format!("git://127.0.0.1:{port}/x.git"),
        "git@127.0.0.1:x.git".to_owned(),
        format!("https://localhost:{port}/x.git"),
        format!("https://example.invalid@127.0.0.1:{port}/x.git"),
        format!("https://example.invalid:{port}/x.git"),
    ] {
        let called = call(
            &url,
            &[
                "llmstxt_generate",
                &format!("source={source}"),
                "use_model=false",
            ],
            Duration::from_secs(60),
        );
        assert!(
            !called.succeeded,
            "{source} was accepted: {}",
            called.stdout
        );
        assert_eq!(called.result()["is_error"], true, "{}", called.stdout);
        assert!(
            called.stdout.contains("--llmstxt-clone-host"),
            "{source}: {}",
            called.stdout
        );
    }
    // Long enough for a connection that was made to be seen.
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::SeqCst);
    watcher.join().unwrap();
    assert_eq!(
        connections.load(Ordering::SeqCst),
        0,
        "something connected to the loopback port"
    );
}

#[test]
fn finding11_a_symlink_inside_the_source_is_not_followed_out_of_it() {
    let secret = "SECRET-behind-a-symlink-41b2";
    let private = private_repo(secret);
    std::fs::write(
        private.path().join("guide.md"),
        format!("# Guide\n\nThe guide says {secret}.\n"),
    )
    .unwrap();
    let (root, repo) = root_with_repo();
    // A file, a directory and a manifest that point out of the tree.
    symlink(private.path().join("README.md"), repo.join("docs/leak.md")).unwrap();
    symlink(private.path(), repo.join("docs/outside")).unwrap();
    symlink(private.path().join("guide.md"), repo.join("CHANGELOG.md")).unwrap();
    let endpoint = Endpoint::start(Behaviour::Answer);
    let (_weir, url) = weir_server(&[
        "--root",
        root.path().to_str().unwrap(),
        "--llm-endpoint",
        &endpoint.url,
        "--llm-model",
        "recording",
    ]);
    let called = call(
        &url,
        &["llmstxt_generate", &format!("source={}", repo.display())],
        Duration::from_secs(60),
    );
    assert!(called.succeeded, "{}", called.stdout);
    let structured = &called.result()["structured"];
    assert!(!called.stdout.contains(secret), "{}", called.stdout);
    let paths: Vec<&str> = structured["sections"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|section| section["links"].as_array().unwrap())
        .filter_map(|link| link["path"].as_str())
        .collect();
    assert!(paths.contains(&"docs/usage.md"), "{paths:?}");
    for outside in ["docs/leak.md", "docs/outside/guide.md", "CHANGELOG.md"] {
        assert!(!paths.contains(&outside), "{outside} was read: {paths:?}");
    }
    let asked = endpoint.requests();
    assert!(!asked.is_empty());
    assert!(
        asked.iter().all(|request| !request.contains(secret)),
        "the secret reached the model: {asked:?}"
    );
}
