//! `weir runs` through the real binary on each place runs live (issue 24,
//! finding 7): a data directory, a weir server (`--url`, with a token) and
//! a Redis store (`--redis`, a real `redis-server`). Each lists, shows, reads
//! events, writes an artifact's raw bytes and cancels, naming runs by the
//! unique start of their ids; a start that is too short or matches several
//! runs says so.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, FailureCode, RunError};
use weir_runtime::{EventLog, RunContext, RunOptions, Scheduler, SchedulerConfig, Tool, ToolInfo};
use weir_store_sqlite::{SqliteLog, SqliteOptions};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
const TOKEN: &str = "runs-cli-token";

/// The artifact `produce` stores: every byte value (so not UTF-8), over
/// several of the chunks a store or the API sends at a time.
fn payload() -> Vec<u8> {
    (0..=255u8).cycle().take(3 * 1024 * 1024 + 17).collect()
}

/// Stores [`payload`] as `data.bin`; fails when asked to.
struct Produce;

#[async_trait]
impl Tool for Produce {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("produce", "stores a file", json!({"type": "object"}))
    }
    async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        if args["fail"].as_bool() == Some(true) {
            return Err(RunError::new(FailureCode::ToolError, "asked to fail"));
        }
        ctx.artifact("data.bin", "application/octet-stream", payload())
            .await
            .map_err(|error| RunError::new(FailureCode::Internal, error.to_string()))?;
        Ok(Completed {
            content: vec![Content::text("stored data.bin")],
            structured: None,
        })
    }
}

/// Runs until cancelled.
struct Hold;

#[async_trait]
impl Tool for Hold {
    fn info(&self) -> ToolInfo {
        ToolInfo::new("hold", "waits to be cancelled", json!({"type": "object"}))
    }
    async fn run(&self, ctx: RunContext, _: Value) -> Result<Completed, RunError> {
        ctx.cancelled().await;
        Ok(Completed {
            content: Vec::new(),
            structured: None,
        })
    }
}

async fn scheduler(log: Arc<dyn EventLog>) -> Scheduler {
    let config = SchedulerConfig {
        retention: None,
        ..SchedulerConfig::default()
    };
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Produce), Arc::new(Hold)];
    Scheduler::start(log, tools, config).await.unwrap()
}

/// A finished `produce` run (and a failed one): their ids.
async fn finished_runs(scheduler: &Scheduler) -> (String, String) {
    let mut ids = Vec::new();
    for args in [json!({}), json!({"fail": true})] {
        let run = scheduler
            .submit("produce", args, RunOptions::default())
            .await
            .unwrap();
        ids.push(run.run_id().to_string());
        run.finished().await.unwrap();
    }
    (ids.remove(0), ids.remove(0))
}

/// `weir ARGS` with no token or Redis from the environment but `env`.
fn weir(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(WEIR)
        .args(args)
        .env_remove("WEIR_TOKEN")
        .env_remove("WEIR_REDIS")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The longest start two ids share.
fn common_start(a: &str, b: &str) -> String {
    a.chars()
        .zip(b.chars())
        .take_while(|(x, y)| x == y)
        .map(|(x, _)| x)
        .collect()
}

/// The checks every place passes: `place` is the arguments that name it.
fn reads_runs_by_their_start(place: &[&str], env: &[(&str, &str)], ok: &str, bad: &str) {
    let with = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(place);
        weir(&all, env)
    };
    let list = with(&["runs", "list"]);
    assert_eq!(list.status.code(), Some(0), "{}", text(&list.stderr));
    let table = text(&list.stdout);
    assert!(table.contains(ok) && table.contains(bad), "{table}");

    // A unique start names its run; show exits by how the run ended.
    let show = with(&["runs", "show", &ok[..12]]);
    assert_eq!(show.status.code(), Some(0), "{}", text(&show.stderr));
    let shown = text(&show.stdout);
    assert!(
        shown.contains(&format!("run       {ok}")) && shown.contains("state     completed"),
        "{shown}"
    );
    let failed = with(&["runs", "show", &bad[..12]]);
    assert_eq!(failed.status.code(), Some(1), "{}", text(&failed.stderr));
    assert!(text(&failed.stdout).contains("tool_error: asked to fail"));

    let events = with(&["runs", "events", &ok[..12], "--json"]);
    let types: Vec<String> = text(&events.stdout)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["type"].to_string())
        .collect();
    assert_eq!(
        types,
        ["\"started\"", "\"artifact\"", "\"completed\""],
        "{}",
        text(&events.stderr)
    );

    // The artifact's raw bytes, to stdout and to a file.
    let artifact = with(&["runs", "artifact", &ok[..12], "data.bin"]);
    assert_eq!(
        artifact.status.code(),
        Some(0),
        "{}",
        text(&artifact.stderr)
    );
    assert!(
        artifact.stdout == payload(),
        "stdout holds the artifact's bytes exactly"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("out.bin");
    let written = with(&[
        "runs",
        "artifact",
        ok,
        "data.bin",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(written.status.code(), Some(0), "{}", text(&written.stderr));
    assert!(written.stdout.is_empty());
    assert!(std::fs::read(&file).unwrap() == payload());
    let missing = with(&["runs", "artifact", ok, "nope.bin"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        text(&missing.stderr).contains("nope.bin"),
        "{}",
        text(&missing.stderr)
    );

    // Cancelling a run that has ended cancels nothing and says how it ended.
    let late = with(&["runs", "cancel", &ok[..12]]);
    assert_eq!(late.status.code(), Some(0), "{}", text(&late.stderr));
    assert!(text(&late.stderr).contains("had already ended"));

    // A start shared by both runs names neither, and lists them.
    let shared = common_start(ok, bad);
    assert!(shared.len() >= 4, "ids made together share their start");
    let ambiguous = with(&["runs", "show", &shared]);
    assert_eq!(ambiguous.status.code(), Some(1));
    let said = text(&ambiguous.stderr);
    assert!(
        said.contains(ok) && said.contains(bad) && said.contains("give more characters"),
        "{said}"
    );
    let short = with(&["runs", "events", &ok[..3]]);
    assert_eq!(short.status.code(), Some(1));
    assert!(
        text(&short.stderr).contains("at least 4 characters"),
        "{}",
        text(&short.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_s_runs_by_their_start_and_cancel_needs_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = SqliteLog::open(dir.path().join("weir.db"), SqliteOptions::default()).unwrap();
    let scheduler = scheduler(Arc::new(log)).await;
    let (ok, bad) = finished_runs(&scheduler).await;
    let data_dir = dir.path().to_str().unwrap().to_owned();
    let place = ["--data-dir", data_dir.as_str()];
    tokio::task::block_in_place(|| reads_runs_by_their_start(&place, &[], &ok, &bad));

    // A run going on in another process: the data directory cannot stop it.
    let held = scheduler
        .submit("hold", json!({}), RunOptions::default())
        .await
        .unwrap();
    let id = held.run_id().to_string();
    let cancel = tokio::task::block_in_place(|| {
        weir(&["runs", "cancel", &id[..14], "--data-dir", &data_dir], &[])
    });
    assert_eq!(cancel.status.code(), Some(1));
    let said = text(&cancel.stderr);
    assert!(
        said.contains("a data directory takes no cancel requests") && said.contains("--url"),
        "{said}"
    );
    assert!(
        !scheduler
            .log()
            .get_run(held.run_id())
            .await
            .unwrap()
            .unwrap()
            .state
            .is_terminal()
    );
    scheduler.cancel(held.run_id(), "test over");
}

/// `weir serve` (with `args`) until dropped, and where it serves MCP.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(data_dir: &Path, args: &[&str]) -> Server {
        let mut child = Command::new(WEIR)
            .arg("--data-dir")
            .arg(data_dir)
            .args(["serve", "--http", "127.0.0.1:0", "--fixtures"])
            .args(args)
            .env_remove("WEIR_TOKEN")
            .env_remove("WEIR_TOKENS_FILE")
            .env_remove("WEIR_REDIS")
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let (found, address) = mpsc::channel();
        // Reads stderr to its end, so the server never blocks on it.
        std::thread::spawn(move || {
            let mut seen = String::new();
            let mut buffer = [0u8; 4096];
            let mut sent = false;
            while let Ok(n) = stderr.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
                if let Some(rest) = seen.split("serving MCP at ").nth(1)
                    && let Some(end) = rest.find("/mcp")
                    && !sent
                {
                    let _ = found.send(Ok(format!("{}/mcp", &rest[..end])));
                    sent = true;
                }
            }
            let _ = found.send(Err(seen));
        });
        let url = address
            .recv_timeout(Duration::from_secs(60))
            .expect("weir serve says where it serves within 60 s")
            .unwrap_or_else(|stderr| panic!("weir serve did not start: {stderr}"));
        Server { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `weir call --url URL stream …` long enough to be cancelled, and the id
/// of its run once `list` (the arguments that name the place) shows it working.
// The call is handed to the caller, which waits for it.
#[allow(clippy::zombie_processes)]
fn start_long_call(url: &str, env: &[(&str, &str)], place: &[&str]) -> (Child, String) {
    let mut call = Command::new(WEIR)
        .args([
            "call",
            "--url",
            url,
            "stream",
            "count=100000",
            "interval_ms=20",
        ])
        .env_remove("WEIR_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut args = vec![
            "runs", "list", "--tool", "stream", "--state", "working", "--json",
        ];
        args.extend_from_slice(place);
        let listed: Value = serde_json::from_slice(&weir(&args, env).stdout).unwrap_or_default();
        if let Some(id) = listed[0]["run_id"].as_str() {
            return (call, id.to_owned());
        }
        if Instant::now() >= deadline {
            let _ = call.kill();
            let _ = call.wait();
            panic!("the call's run never showed as working");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Cancels the long call's run by the start of its id; `weir runs cancel`
/// and the call itself exit 3, and `show` says why it ended.
fn cancels_the_call(call: Child, id: &str, place: &[&str], env: &[(&str, &str)]) {
    let with = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(place);
        weir(&all, env)
    };
    let cancel = with(&["runs", "cancel", &id[..14], "--reason", "enough of it"]);
    assert_eq!(cancel.status.code(), Some(3), "{}", text(&cancel.stderr));
    assert_eq!(
        text(&cancel.stdout).trim(),
        format!("run {id} canceled: enough of it")
    );
    let call = call.wait_with_output().unwrap();
    assert_eq!(call.status.code(), Some(3), "the cancelled call exits 3");
    let show = with(&["runs", "show", id]);
    assert_eq!(show.status.code(), Some(3));
    assert!(
        text(&show.stdout).contains("outcome   enough of it"),
        "{}",
        text(&show.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_s_runs_through_url_with_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let log = SqliteLog::open(dir.path().join("weir.db"), SqliteOptions::default()).unwrap();
    let written = scheduler(Arc::new(log)).await;
    let (ok, bad) = finished_runs(&written).await;
    drop(written);
    tokio::task::block_in_place(|| {
        let server = Server::start(dir.path(), &["--token", TOKEN]);
        let url = server.url.clone();
        let place = ["--url", url.as_str()];
        let env = [("WEIR_TOKEN", TOKEN)];

        let refused = weir(&["runs", "list", "--url", &url], &[]);
        assert_eq!(refused.status.code(), Some(1));
        assert!(text(&refused.stderr).contains("--token or WEIR_TOKEN"));

        reads_runs_by_their_start(&place, &env, &ok, &bad);
        let (call, id) = start_long_call(&url, &env, &place);
        cancels_the_call(call, &id, &place, &env);

        // Through --token as well as the environment.
        let flag = weir(
            &["runs", "show", &ok[..12], "--url", &url, "--token", TOKEN],
            &[],
        );
        assert_eq!(flag.status.code(), Some(0), "{}", text(&flag.stderr));

        drop(server);
        let gone = weir(&["runs", "list", "--url", &url], &env);
        assert_eq!(gone.status.code(), Some(4), "an unreachable server exits 4");
        assert!(
            text(&gone.stderr).contains("cannot reach"),
            "{}",
            text(&gone.stderr)
        );
    });
}

#[cfg(feature = "redis")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_store_s_runs_read_directly_and_cancelled_through_its_channel() {
    use weir_store_redis::{RedisLog, RedisOptions};

    let redis = redis_server::Redis::start();
    let log = RedisLog::open(&redis.url(), RedisOptions::default()).unwrap();
    let written = scheduler(Arc::new(log)).await;
    let (ok, bad) = finished_runs(&written).await;
    drop(written);
    let url = redis.url();
    tokio::task::block_in_place(|| {
        let place = ["--redis", url.as_str()];
        reads_runs_by_their_start(&place, &[], &ok, &bad);
        // A node executes the call; this command is no node, and reaches
        // it through the store.
        let dir = tempfile::tempdir().unwrap();
        let node = Server::start(dir.path(), &["--redis", &url, "--node", "n1"]);
        let (call, id) = start_long_call(&node.url, &[], &place);
        cancels_the_call(call, &id, &place, &[]);
    });
}

/// A `redis-server` on a free port, its data in a temporary directory.
#[cfg(feature = "redis")]
mod redis_server {
    use std::io::{BufRead, BufReader};
    use std::net::TcpListener;
    use std::process::{Child, Command, Stdio};

    pub(super) struct Redis {
        child: Child,
        port: u16,
        _dir: tempfile::TempDir,
    }

    impl Redis {
        pub(super) fn start() -> Redis {
            let dir = tempfile::tempdir().unwrap();
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let mut child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir.path())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap_or_else(|error| {
                    panic!(
                        "could not start redis-server ({error}): these tests need it on PATH; \
                         install it with `apt-get install redis-server` (scripts/test does when root)"
                    )
                });
            let stdout = BufReader::new(child.stdout.take().unwrap());
            let mut lines = stdout.lines();
            let ready = lines
                .by_ref()
                .map_while(Result::ok)
                .any(|line| line.contains("Ready to accept connections"));
            assert!(ready, "redis-server did not start");
            // Its later lines go nowhere; the pipe must not fill.
            std::thread::spawn(move || lines.for_each(drop));
            Redis {
                child,
                port,
                _dir: dir,
            }
        }

        pub(super) fn url(&self) -> String {
            format!("redis://127.0.0.1:{}/0", self.port)
        }
    }

    impl Drop for Redis {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// With named tokens, a start of an id matches only the caller's own runs:
/// another's run is neither found nor counted nor named.
#[test]
fn a_start_of_an_id_matches_only_the_callers_own_runs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "alice token:alice-token\nbob token:bob-token\n").unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let server = Server::start(dir.path(), &["--tokens-file", tokens.to_str().unwrap()]);
    let url = server.url.as_str();
    let call = |token: &str| {
        let called = weir(
            &[
                "call", "--url", url, "stream", "count=1", "--output", "jsonl",
            ],
            &[("WEIR_TOKEN", token)],
        );
        assert_eq!(called.status.code(), Some(0), "{}", text(&called.stderr));
        let first: Value =
            serde_json::from_str(text(&called.stdout).lines().next().unwrap()).unwrap();
        first["run_id"].as_str().unwrap().to_owned()
    };
    let alices = call("alice-token");
    let bobs = call("bob-token");
    let as_bob = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--url", url]);
        weir(&all, &[("WEIR_TOKEN", "bob-token")])
    };
    let shown = as_bob(&["runs", "show", &alices[..12]]);
    assert_eq!(shown.status.code(), Some(1));
    assert!(
        text(&shown.stderr).contains("no run"),
        "{}",
        text(&shown.stderr)
    );
    let cancel = as_bob(&["runs", "cancel", &alices]);
    assert_eq!(cancel.status.code(), Some(1));
    // Both ids start alike; for bob the start names his run alone.
    let shared = common_start(&alices, &bobs);
    assert!(shared.len() >= 4, "ids made together share their start");
    let mine = as_bob(&["runs", "show", &shared]);
    assert_eq!(mine.status.code(), Some(0), "{}", text(&mine.stderr));
    let said = text(&mine.stdout);
    assert!(said.contains(&bobs) && !said.contains(&alices), "{said}");
}

/// A run its server was killed under (SIGKILL) is closed `interrupted`
/// when a server starts on the data directory again: `weir runs show`,
/// `events` and `tail`, on the data directory and through the server,
/// say `interrupted` once (issue 24 finding 10); `show` names the client
/// that asked for the run (`weir call` calls itself weir-cli).
#[test]
fn a_run_closed_by_a_crash_at_start_says_interrupted_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let id = {
        let server = Server::start(dir.path(), &[]);
        let (mut call, id) = start_long_call(&server.url, &[], &["--data-dir", data]);
        drop(server);
        let _ = call.wait();
        id
    };
    let server = Server::start(dir.path(), &[]);
    for place in [["--data-dir", data], ["--url", server.url.as_str()]] {
        for (command, code) in [("show", 1), ("events", 0), ("tail", 1)] {
            let mut args = vec!["runs", command, id.as_str()];
            args.extend(place);
            let output = weir(&args, &[]);
            let printed = text(&output.stdout);
            assert_eq!(
                output.status.code(),
                Some(code),
                "{args:?}: {printed}{}",
                text(&output.stderr)
            );
            let line = printed
                .lines()
                .find(|line| line.contains("the server stopped"))
                .unwrap_or_else(|| panic!("{args:?}: no failure in {printed}"));
            assert_eq!(line.matches("interrupted").count(), 1, "{args:?}: {line}");
        }
    }
    let show = text(&weir(&["runs", "show", &id, "--data-dir", data], &[]).stdout);
    assert!(show.contains("\nclient    weir-cli/"), "{show}");
}
