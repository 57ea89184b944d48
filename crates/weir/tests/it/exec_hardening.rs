//! The exec pack's hardening (issue 10), attacked as an attacker would,
//! through the real `weir serve --stdio`: the caller's environment must
//! never reach a process outside the sandbox (finding 1), a run must see
//! neither the data directory nor other runs (2), memory, the working
//! directory and `/dev/shm` are capped per run (3), a crashed server's run
//! directories are swept at the next start (4), and a private `TMPDIR`
//! leaves every language runnable (9).
//!
//! Each test names its finding. Scratch directories live under `/var/tmp`
//! (not `/tmp`: the sandbox has a `/tmp` of its own, and a test must be
//! able to tell the two apart), named after the test and this process.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A `weir serve --stdio` and the client side of its MCP session.
struct Serve {
    child: Child,
    stdin: ChildStdin,
    messages: mpsc::Receiver<Value>,
    next_id: u64,
}

/// What one `tools/call` brought.
#[derive(Debug)]
struct Answer {
    /// `(group, text)` of each partial result.
    partials: Vec<(String, String)>,
    /// The result, or the JSON-RPC error.
    result: Value,
}

impl Answer {
    fn output(&self, group: &str) -> String {
        self.partials
            .iter()
            .filter(|(g, _)| g == group)
            .map(|(_, text)| text.as_str())
            .collect()
    }

    fn structured(&self) -> &Value {
        &self.result["structuredContent"]
    }

    /// A refusal: a tool error or a JSON-RPC error, with its text.
    fn refusal(&self) -> Option<String> {
        if let Some(message) = self.result["error"]["message"].as_str() {
            return Some(message.to_owned());
        }
        (self.result["isError"] == true).then(|| self.result["content"].to_string())
    }
}

impl Serve {
    /// Starts `weir serve --stdio` with `args` and `env` added to this
    /// process's environment, and opens a session that takes partial results.
    fn start(args: &[&str], env: &[(&str, &Path)]) -> Serve {
        let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
        command
            .args(["serve", "--stdio"])
            .args(args)
            .env_remove("WEIR_TOKEN")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let message: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut server = Serve {
            child,
            stdin,
            messages,
            next_id: 1,
        };
        server.send(json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"partialResults": {}},
                "clientInfo": {"name": "weir-exec-hardening-test", "version": "0"}
            }
        }));
        let initialized = server.next(Duration::from_secs(30));
        assert_eq!(initialized["id"], 0, "{initialized}");
        server.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn sandboxed(mode: &str) -> Serve {
        Serve::start(&["--memory", "--exec-sandbox", mode], &[])
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn next(&self, within: Duration) -> Value {
        self.messages
            .recv_timeout(within)
            .expect("the server answers in time")
    }

    /// Sends a `tools/call` asking for partial results; returns its id.
    fn call(&mut self, tool: &str, arguments: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {
                "name": tool,
                "arguments": arguments,
                "_meta": {"progressToken": format!("p{id}"), "partialResultToken": format!("r{id}")}
            }
        }));
        id
    }

    /// Reads until the answer to call `id`; partial results of other calls
    /// are dropped.
    fn answer(&mut self, id: u64, within: Duration) -> Answer {
        let until = Instant::now() + within;
        let mut partials = Vec::new();
        loop {
            let message = self.next(until.saturating_duration_since(Instant::now()));
            if message["method"] == "notifications/tools/partial_result" {
                if message["params"]["partialResultToken"] == format!("r{id}") {
                    partials.push(partial(&message));
                }
            } else if message["id"] == id {
                let result = if message["error"].is_null() {
                    message["result"].clone()
                } else {
                    json!({"error": message["error"]})
                };
                return Answer { partials, result };
            }
        }
    }

    fn run(&mut self, tool: &str, arguments: Value) -> Answer {
        let id = self.call(tool, arguments);
        self.answer(id, Duration::from_secs(60))
    }

    /// Reads until the first partial result of call `id`: its text.
    fn first_output(&mut self, id: u64) -> String {
        loop {
            let message = self.next(Duration::from_secs(30));
            if message["method"] == "notifications/tools/partial_result"
                && message["params"]["partialResultToken"] == format!("r{id}")
            {
                return partial(&message).1;
            }
            assert_ne!(message["id"], id, "the call ended before it wrote");
        }
    }

    /// `tools/list`, without weir's own tools.
    fn tools(&mut self) -> Vec<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
        loop {
            let message = self.next(Duration::from_secs(10));
            if message["id"] == id {
                return message["result"]["tools"].as_array().unwrap().clone();
            }
        }
    }

    fn limits(&mut self) -> Value {
        let listed = self.run("list_languages", json!({}));
        listed.structured()["limits"].clone()
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    fn crash(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn partial(message: &Value) -> (String, String) {
    let params = &message["params"];
    (
        params["structuredContent"]["group"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        params["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// A fresh directory `/var/tmp/weir-it-<name>-<pid>` with `mode`.
fn scratch(name: &str, mode: u32) -> PathBuf {
    let dir = PathBuf::from(format!("/var/tmp/weir-it-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

/// Runs `check` for both ways of running code, sandboxed and with limits
/// only, at once.
fn in_both_modes(check: impl Fn(&str) + Sync) {
    std::thread::scope(|scope| {
        for mode in ["require", "off"] {
            let check = &check;
            scope.spawn(move || check(mode));
        }
    });
}

/// Standard base64, for a binary file in `files` (and, in `exec`, what
/// base64 output must read).
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            text.push(if i <= chunk.len() {
                ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    text
}

/// A shared object whose constructor leaves a file in `marks` named after
/// the process it was loaded into, holding that process's executable: the
/// proof that a loader variable took effect, and where. `None` when this
/// machine has no C compiler.
fn preload_library(marks: &Path) -> Option<Vec<u8>> {
    let dir = scratch("preload-build", 0o755);
    let source = dir.join("inject.c");
    std::fs::write(
        &source,
        r#"#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void escaped(void) {
    char exe[512] = {0};
    char path[1024];
    readlink("/proc/self/exe", exe, sizeof exe - 1);
    snprintf(path, sizeof path, "%s/%d", MARKS, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        dprintf(fd, "%s\n", exe);
        close(fd);
    }
}
"#,
    )
    .unwrap();
    let library = dir.join("inject.so");
    let built = Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(&library)
        .arg(format!("-DMARKS=\"{}\"", marks.display()))
        .arg(&source)
        .status();
    let bytes = match built {
        Ok(status) if status.success() => Some(std::fs::read(&library).unwrap()),
        _ => None,
    };
    std::fs::remove_dir_all(&dir).unwrap();
    bytes
}

/// The processes below `root`.
fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let ppid = stat[stat.rfind(')')? + 2..]
                .split(' ')
                .nth(1)?
                .parse()
                .ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, ppid)| *ppid == parent)
                .map(|(pid, _)| *pid),
        );
        i += 1;
    }
    found.remove(0);
    found
}

#[test]
fn issue10_finding1_env_reaches_only_the_program_and_loader_variables_are_refused() {
    let marks = scratch("preload-marks", 0o1777);
    let library = preload_library(&marks);
    in_both_modes(|mode| {
        let mut server = Serve::sandboxed(mode);
        // The attack of the finding: a library in `files`, preloaded by the
        // loader of whatever process weir starts with the caller's `env`.
        if let Some(library) = &library {
            let answer = server.run(
                "execute_code",
                json!({
                    "language": "sh", "code": "echo ran",
                    "env": {"LD_PRELOAD": "./inject.so"},
                    "files": [{"path": "inject.so", "content": base64(library), "encoding": "base64"}]
                }),
            );
            let refusal = answer.refusal();
            assert!(
                refusal.as_ref().is_some_and(|r| r.contains("LD_PRELOAD")),
                "{mode}: {answer:?}"
            );
        }
        // Every variable that changes what the loader or the C library does
        // before the program starts is refused, whatever the sandbox mode.
        for name in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "LD_AUDIT",
            "GCONV_PATH",
            "GLIBC_TUNABLES",
            "MALLOC_ARENA_MAX",
            "HOSTALIASES",
            "LOCPATH",
            "NLSPATH",
            "RESOLV_HOST_CONF",
        ] {
            let answer = server.run(
                "execute_code",
                json!({"language": "sh", "code": "echo ran", "env": {name: "/nonexistent"}}),
            );
            let refusal = answer.refusal();
            assert!(
                refusal.as_ref().is_some_and(|r| r.contains(name)),
                "{mode}: {name} was not refused: {answer:?}"
            );
        }
    });
    let escaped: Vec<String> = std::fs::read_dir(&marks)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .collect();
    assert!(
        escaped.is_empty(),
        "the preloaded library ran in: {escaped:?}"
    );
    std::fs::remove_dir_all(&marks).unwrap();

    // A harmless variable reaches the program, and never bubblewrap, whose
    // environment and command line other users of the host could read.
    let mut server = Serve::sandboxed("require");
    let canary = format!("weir-canary-{}", std::process::id());
    let code = "import os, sys, time\nprint(os.environ['WEIR_CANARY'], flush=True)\ntime.sleep(3)";
    let id = server.call(
        "execute_code",
        json!({"language": "python", "code": code, "env": {"WEIR_CANARY": canary}}),
    );
    assert_eq!(server.first_output(id), format!("{canary}\n"));
    let mut outer = 0;
    let mut inner = 0;
    for pid in descendants(server.child.id()) {
        let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) else {
            continue;
        };
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let holds = |bytes: &[u8]| String::from_utf8_lossy(bytes).contains(&canary);
        if exe.ends_with("bwrap") {
            outer += 1;
            assert!(
                !holds(&environ),
                "bubblewrap ({pid}) has the caller's variable in its environment: {}",
                String::from_utf8_lossy(&environ)
            );
            assert!(
                !holds(&cmdline),
                "bubblewrap ({pid}) has the caller's variable on its command line"
            );
        } else if exe.to_string_lossy().contains("python") {
            inner += 1;
        }
    }
    assert!(outer > 0 && inner > 0, "bwrap {outer}, python {inner}");
    let answer = server.answer(id, Duration::from_secs(30));
    assert_eq!(answer.structured()["exit_code"], 0, "{answer:?}");
}

#[test]
fn issue10_finding2_a_run_sees_neither_the_data_directory_nor_other_runs() {
    // World-readable, as an operator's directories often are: only the
    // sandbox's view can keep them out of reach.
    let data = scratch("data", 0o755);
    let tmp = scratch("run-tmp", 0o755);
    let data_arg = data.display().to_string();
    let mut server = Serve::start(
        &["--exec-sandbox", "require", "--data-dir", &data_arg],
        &[("TMPDIR", &tmp)],
    );
    // Run A keeps a secret in its directory, and lives on.
    let keeper = "import os, time\nopen('secret.txt', 'w').write('A-secret')\nprint(os.getcwd(), flush=True)\ntime.sleep(5)";
    let a = server.call(
        "execute_code",
        json!({"language": "python", "code": keeper}),
    );
    let a_dir = server.first_output(a).trim().to_owned();
    assert!(data.join("weir.db").exists(), "the store is in {data_arg}");
    // Run B, at the same time, looks for A's secret and for the store.
    let seeker = r#"
import os, sys
for path in sys.argv[1:]:
    try:
        if os.path.isdir(path):
            print(path, 'listed', sorted(os.listdir(path)))
        else:
            print(path, 'read', open(path, errors='replace').read(200))
    except OSError as error:
        print(path, 'refused', type(error).__name__)
print('own', sorted(os.listdir('.')))
"#;
    let looked_at = [
        data_arg.clone(),
        data.join("weir.db").display().to_string(),
        tmp.display().to_string(),
        a_dir.clone(),
        format!("{a_dir}/secret.txt"),
    ];
    let b = server.run(
        "execute_code",
        json!({"language": "python", "code": seeker, "args": looked_at}),
    );
    let out = b.output("stdout");
    let own = out
        .lines()
        .find_map(|line| line.strip_prefix("own "))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(!own.contains("secret.txt"), "{out}");
    for path in &looked_at {
        let line = out
            .lines()
            .find(|line| line.starts_with(&format!("{path} ")))
            .unwrap_or_else(|| panic!("no line for {path}: {out}"));
        // A's directory has the very path of B's own (each run sees its
        // own there): then B finds only its own files in it. Anything else
        // is not there at all.
        if line.contains(" listed ") && path == &a_dir {
            assert!(line.ends_with(own), "{line}\n{out}");
        } else {
            assert!(line.contains(" refused "), "{line}\n{out}");
        }
    }
    assert!(!out.contains("A-secret"), "{out}");
    let a = server.answer(a, Duration::from_secs(30));
    assert_eq!(a.structured()["exit_code"], 0, "{a:?}");
    drop(server);
    std::fs::remove_dir_all(&data).unwrap();
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn issue10_finding3_memory_is_capped_for_the_whole_run() {
    in_both_modes(|mode| {
        let mut server = Serve::sandboxed(mode);
        // Six children, each holding 450 MiB (written, so resident) for
        // 3 s at the same time: 2.7 GiB in all, each under the 512 MiB a
        // single process may have.
        let code = r#"
import subprocess, sys
child = "import time\nb = b'x' * (450 << 20)\nprint('holding', flush=True)\ntime.sleep(3)"
children = [subprocess.Popen([sys.executable, '-c', child]) for _ in range(6)]
codes = [c.wait() for c in children]
print('held', sum(1 for code in codes if code == 0), codes, flush=True)
"#;
        let answer = server.run(
            "execute_code",
            json!({"language": "python", "code": code, "timeout_s": 60}),
        );
        let out = answer.output("stdout");
        let held: u64 = out
            .lines()
            .find_map(|line| line.strip_prefix("held "))
            .and_then(|rest| rest.split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("{mode}: {answer:?}"));
        let limits = server.limits();
        let memory = &limits["run_memory"];
        // The per-run cap needs a cgroup weir may make (v1, or v2 with a
        // delegated subtree). Where there is none weir says so (the
        // `"per": "none"` report, checked by the exec pack's tests), but
        // this test is about the cap: it fails there rather than pass on
        // the report.
        assert_eq!(
            memory["per"], "run",
            "{mode}: no per-run memory cap on this machine, so this test cannot check it \
             (the tests need a cgroup weir may make): {limits}"
        );
        let cap = memory["bytes"].as_u64().unwrap();
        assert!(
            held * (450 << 20) <= cap,
            "{mode}: {held} children held 450 MiB each under a cap of {cap} bytes: {out}"
        );
        assert!(
            answer.structured()["oom_kills"].as_u64() > Some(0),
            "{mode}: the result says the cap was reached: {answer:?}"
        );
    });
}

#[test]
fn issue10_finding3_the_working_directory_and_dev_shm_are_capped_and_private() {
    let mut server = Serve::sandboxed("require");
    let name = format!("weir-it-shm-{}", std::process::id());
    // Fills a directory with 16 MiB files (under the per-file limit) until
    // 512 MiB or the first error.
    let code = r#"
import os, sys
def fill(where, name):
    written = 0
    try:
        for i in range(32):
            with open(os.path.join(where, f'{name}-{i}'), 'wb') as f:
                for _ in range(16):
                    f.write(b'x' * (1 << 20))
                    written += 1 << 20
        print(where, 'took', written >> 20, 'MiB', flush=True)
    except OSError as error:
        print(where, 'full after', written >> 20, 'MiB:', error.strerror, flush=True)
fill('.', 'fill')
fill('/dev/shm', sys.argv[1])
"#;
    let answer = server.run(
        "execute_code",
        json!({"language": "python", "code": code, "args": [name]}),
    );
    let out = answer.output("stdout");
    let limits = server.limits();
    for (place, limit) in [(".", "workdir"), ("/dev/shm", "shm")] {
        let line = out
            .lines()
            .find(|line| line.starts_with(&format!("{place} ")))
            .unwrap_or_else(|| panic!("{place}: {answer:?}"));
        assert!(
            line.contains("full after") && line.ends_with("No space left on device"),
            "{line}"
        );
        let mib: u64 = line.split(' ').nth(3).unwrap().parse().unwrap();
        let cap = limits[limit]["bytes"].as_u64().unwrap_or(0);
        assert!(mib << 20 <= cap, "{place}: {mib} MiB past {limits}");
        assert_eq!(limits[limit]["per"], "run", "{limits}");
    }
    let host_shm: Vec<_> = std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().starts_with(&name))
        .collect();
    assert!(host_shm.is_empty(), "the run wrote to the host's /dev/shm");

    // Without the sandbox there is no such cap, and the limits say so.
    let limits = Serve::sandboxed("off").limits();
    assert_eq!(limits["workdir"]["per"], "none", "{limits}");
    assert_eq!(limits["shm"]["per"], "none", "{limits}");
}

#[test]
fn issue10_finding4_a_crashed_servers_run_directory_is_swept_at_the_next_start() {
    let tmp = scratch("sweep", 0o755);
    let start = || Serve::start(&["--memory", "--exec-sandbox", "off"], &[("TMPDIR", &tmp)]);
    let hold = "import os, time\nprint(os.getcwd(), flush=True)\ntime.sleep(60)";
    let mut doomed = start();
    let id = doomed.call(
        "execute_code",
        json!({"language": "python", "code": hold, "timeout_s": 120}),
    );
    let dir = PathBuf::from(doomed.first_output(id).trim());
    assert!(dir.starts_with(&tmp), "{}", dir.display());
    // A server that stays alive, with a run of its own.
    let mut alive = start();
    let id = alive.call(
        "execute_code",
        json!({"language": "python", "code": hold, "timeout_s": 120}),
    );
    let alive_dir = PathBuf::from(alive.first_output(id).trim());
    doomed.crash();
    assert!(dir.exists(), "the crash left the run's directory");
    // The next start sweeps what the dead server left, and nothing of the
    // living one's.
    let mut next = start();
    let until = Instant::now() + Duration::from_secs(5);
    while dir.exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!dir.exists(), "{} survived the next start", dir.display());
    assert!(alive_dir.exists(), "a live server's run lost its directory");
    let answer = next.run(
        "execute_code",
        json!({"language": "python", "code": "print('after')"}),
    );
    assert_eq!(answer.output("stdout"), "after\n");
    drop(alive);
    drop(next);
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn issue10_finding9_a_private_tmpdir_leaves_every_language_runnable() {
    // What `mktemp -d` gives: 0700, owned by whoever runs weir.
    let tmp = scratch("private-tmp", 0o700);
    in_both_modes(|mode| {
        let mut server = Serve::start(&["--memory", "--exec-sandbox", mode], &[("TMPDIR", &tmp)]);
        let tools = server.tools();
        let execute = tools
            .iter()
            .find(|tool| tool["name"] == "execute_code")
            .unwrap();
        let names = &execute["inputSchema"]["properties"]["language"]["enum"];
        assert!(
            names
                .as_array()
                .is_some_and(|names| names.contains(&json!("python"))),
            "{mode}: {execute}"
        );
        let answer = server.run(
            "execute_code",
            json!({"language": "python", "code": "print('ran')"}),
        );
        assert_eq!(answer.output("stdout"), "ran\n", "{mode}: {answer:?}");
    });
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn issue10_finding9_with_no_language_the_tools_say_why_and_offer_no_empty_choice() {
    let empty = scratch("empty-path", 0o755);
    let mut server = Serve::start(&["--memory"], &[("PATH", &empty)]);
    let tools = server.tools();
    let execute = tools
        .iter()
        .find(|tool| tool["name"] == "execute_code")
        .unwrap();
    let language = &execute["inputSchema"]["properties"]["language"];
    assert!(
        language["enum"]
            .as_array()
            .is_none_or(|names| !names.is_empty()),
        "an empty enum admits no value: {language}"
    );
    let description = execute["description"].as_str().unwrap();
    assert!(
        description.contains("No language is available"),
        "{description}"
    );
    let answer = server.run(
        "execute_code",
        json!({"language": "python", "code": "print(1)"}),
    );
    let refusal = answer.refusal().unwrap_or_default();
    assert!(
        refusal.contains("python is not available here") && refusal.contains("in PATH"),
        "{answer:?}"
    );
    drop(server);
    std::fs::remove_dir_all(&empty).unwrap();
}
