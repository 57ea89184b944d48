//! The exec pack through the runtime: real interpreters, real processes,
//! the sandbox this machine has. (The same tools through `weir serve` and
//! an MCP client, with the hostile programs, are in `crates/weir/tests/it/exec.rs`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weir_core::{EventKind, FailureCode, RunEvent};
use weir_pack_exec::{ExecConfig, ExecPack, SandboxMode};
use weir_runtime::{EventLog, MemoryLog, Pack, RunOptions, Scheduler, SchedulerConfig};

/// What a run left in its log, sorted out.
#[derive(Debug)]
struct Run {
    events: Vec<RunEvent>,
    /// `(group, text)` of every partial, in order.
    partials: Vec<(String, String)>,
    warnings: Vec<String>,
    /// The structured result (of `completed`, or the one a `failed` run
    /// still carries), or the error of a `failed` run without one.
    result: Value,
    summary: String,
    /// How a run that failed failed: `(code, message)`.
    failed: Option<(FailureCode, String)>,
}

impl Run {
    fn output(&self, group: &str) -> String {
        self.partials
            .iter()
            .filter(|(g, _)| g == group)
            .map(|(_, text)| text.as_str())
            .collect()
    }
}

async fn pack(config: ExecConfig) -> ExecPack {
    ExecPack::detect(config).await.unwrap()
}

fn quick() -> ExecConfig {
    ExecConfig {
        kill_grace: Duration::from_millis(500),
        ..ExecConfig::default()
    }
}

/// The two ways the pack runs programs, and the sandbox each reports. The
/// sandbox is required, not `auto`: scripts/test installs bubblewrap, so a
/// machine where it cannot work fails here instead of testing the fallback
/// twice.
const MODES: [(SandboxMode, &str); 2] = [
    (SandboxMode::Require, "bubblewrap"),
    (SandboxMode::Off, "none"),
];

fn quick_in(sandbox: SandboxMode) -> ExecConfig {
    ExecConfig { sandbox, ..quick() }
}

async fn scheduler(pack: &ExecPack) -> (Arc<dyn EventLog>, Scheduler) {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log.clone(), pack.tools(), SchedulerConfig::default())
        .await
        .unwrap();
    (log, scheduler)
}

/// Calls `tool` with `arguments` and waits for the run to end.
async fn call(pack: &ExecPack, tool: &str, arguments: Value) -> Run {
    let (log, scheduler) = scheduler(pack).await;
    let handle = scheduler
        .submit(tool, arguments, RunOptions::default())
        .await
        .unwrap();
    let run_id = handle.run_id().clone();
    handle.finished().await.unwrap();
    collect(log.read(&run_id, 0, 100_000).await.unwrap())
}

fn collect(events: Vec<RunEvent>) -> Run {
    let mut run = Run {
        events: events.clone(),
        partials: Vec::new(),
        warnings: Vec::new(),
        result: Value::Null,
        summary: String::new(),
        failed: None,
    };
    for event in events {
        match event.kind {
            EventKind::Partial(partial) => {
                for block in partial.content {
                    let weir_core::Content::Text { text } = block else {
                        panic!("a non-text block: {block:?}")
                    };
                    run.partials
                        .push((partial.group.clone().unwrap_or_default(), text));
                }
            }
            EventKind::Warning(warning) => run.warnings.push(warning.message),
            EventKind::Completed(completed) => {
                run.result = completed.structured.unwrap_or_default();
                if let Some(weir_core::Content::Text { text }) = completed.content.first() {
                    run.summary = text.clone();
                }
            }
            EventKind::Failed(failed) => {
                let error = failed.error;
                run.failed = Some((error.code, error.message.clone()));
                run.result = match error.result {
                    Some(result) => {
                        if let Some(weir_core::Content::Text { text }) = result.content.first() {
                            run.summary = text.clone();
                        }
                        result.structured.unwrap_or_default()
                    }
                    None => json!({ "error": error.message }),
                };
            }
            EventKind::Canceled(canceled) => run.result = json!({ "canceled": canceled.reason }),
            _ => {}
        }
    }
    run
}

/// `(progress, phase, message)` of each progress event.
fn progress(run: &Run) -> Vec<(f64, &str, String)> {
    run.events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::Progress(progress) => Some((
                progress.progress,
                progress.phase.as_deref().unwrap_or_default(),
                progress.message.clone().unwrap_or_default(),
            )),
            _ => None,
        })
        .collect()
}

fn kinds(run: &Run) -> Vec<&'static str> {
    run.events.iter().map(|e| e.kind.type_name()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_comes_first_and_says_which_sandbox_ran() {
    for (sandbox, mode) in MODES {
        let pack = pack(quick_in(sandbox)).await;
        let run = call(
            &pack,
            "execute_code",
            json!({"language": "python", "code": "print('hi')"}),
        )
        .await;
        assert_eq!(
            kinds(&run),
            ["started", "meta", "partial", "progress", "completed"]
        );
        let EventKind::Meta(meta) = &run.events[1].kind else {
            unreachable!()
        };
        assert_eq!(meta.info["sandbox"]["mode"], mode);
        assert_eq!(meta.info["language"], "python");
        assert!(
            meta.info["interpreter"]
                .as_str()
                .unwrap()
                .contains("python")
        );
        assert_eq!(meta.backends, [mode]);
        assert_eq!(run.partials, [("stdout".to_owned(), "hi\n".to_owned())]);
        assert_eq!(run.result["exit_code"], 0);
        assert_eq!(run.result["signal"], Value::Null);
        assert_eq!(run.result["sandbox"], mode);
        assert_eq!(run.result["truncated"], false);
        assert!(
            run.summary.starts_with("[exit code 0 after"),
            "{}",
            run.summary
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_and_stderr_are_tagged_and_kept_in_order() {
    let pack = pack(quick()).await;
    let code = "import sys, time\nfor i in range(3):\n    print(f'out {i}')\n    time.sleep(0.05)\n    print(f'err {i}', file=sys.stderr)\n    time.sleep(0.05)\nsys.exit(3)";
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": code}),
    )
    .await;
    let tagged: Vec<String> = run
        .partials
        .iter()
        .map(|(group, text)| format!("{group}: {}", text.trim_end()))
        .collect();
    assert_eq!(
        tagged,
        [
            "stdout: out 0",
            "stderr: err 0",
            "stdout: out 1",
            "stderr: err 1",
            "stdout: out 2",
            "stderr: err 2"
        ]
    );
    assert_eq!(run.result["exit_code"], 3);
    assert_eq!(run.result["stdout_bytes"], 18);
    assert_eq!(run.result["stderr_bytes"], 18);
    // A non-zero exit fails the run, which keeps its whole result.
    assert_eq!(kinds(&run).last(), Some(&"failed"));
    assert_eq!(
        run.failed,
        Some((
            FailureCode::ToolError,
            "the program exited with code 3".to_owned()
        ))
    );
    assert!(run.summary.starts_with("[exit code 3 after"), "{run:?}");
}

/// A program killed by a signal fails the run, its output and result kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_killed_by_a_signal_fails_with_its_result() {
    let pack = pack(quick()).await;
    let code =
        "import os, signal\nprint('before', flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)";
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": code}),
    )
    .await;
    assert_eq!(run.output("stdout"), "before\n");
    assert_eq!(run.result["signal"], "SIGSEGV", "{run:?}");
    assert_eq!(run.result["exit_code"], Value::Null);
    assert_eq!(
        run.failed,
        Some((
            FailureCode::ToolError,
            "the program was killed by SIGSEGV".to_owned()
        ))
    );
    assert!(run.summary.starts_with("[killed by SIGSEGV"), "{run:?}");
}

/// Each line a program prints is reported as progress after its partial:
/// lines so far (both streams), the newest as the message, phase
/// `running`; a line continued later counts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_counts_the_lines_and_shows_the_newest() {
    let pack = pack(quick()).await;
    let code = "import sys, time\nprint('first', flush=True)\ntime.sleep(0.15)\nprint('  second, indented  ', file=sys.stderr, flush=True)\ntime.sleep(0.15)\nprint('third, ', end='', flush=True)\ntime.sleep(0.15)\nsys.stdout.write('continued\\n\\n\\n')\nsys.stdout.flush()";
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": code}),
    )
    .await;
    assert_eq!(
        progress(&run),
        [
            (1.0, "running", "first".to_owned()),
            (2.0, "running", "second, indented".to_owned()),
            (3.0, "running", "third,".to_owned()),
            (5.0, "running", "continued".to_owned()),
        ]
    );
    // Each report follows the partial it counts.
    let kinds = kinds(&run);
    let reported: Vec<&str> = kinds
        .iter()
        .filter(|kind| ["partial", "progress"].contains(kind))
        .copied()
        .collect();
    assert_eq!(reported, ["partial", "progress"].repeat(4));
    let EventKind::Meta(meta) = &run.events[1].kind else {
        unreachable!()
    };
    assert_eq!(meta.progress_unit, Some(weir_core::ProgressUnit::Lines));
}

/// A program that prints fast is reported at most every 50 ms, the last
/// report with every line; lines past the output cap count too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_of_many_lines_is_coalesced_and_ends_with_the_last_count() {
    let pack = pack(ExecConfig {
        max_output_bytes: 100_000,
        ..quick()
    })
    .await;
    let code = "import time\nfor i in range(200000):\n    print(f'line {i}')\n    if i % 20000 == 0:\n        time.sleep(0.03)";
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": code}),
    )
    .await;
    assert_eq!(run.result["truncated"], true);
    let reports = progress(&run);
    let (last, _, message) = reports.last().unwrap();
    assert_eq!(*last, 200_000.0);
    assert_eq!(message, "line 199999");
    assert!(reports.windows(2).all(|w| w[0].0 < w[1].0), "{reports:?}");
    let times: Vec<u64> = run
        .events
        .iter()
        .filter(|event| matches!(event.kind, EventKind::Progress(_)))
        .map(|event| event.ts)
        .collect();
    let span = times.last().unwrap() - times.first().unwrap();
    // One every 50 ms at most, and one more at the end.
    assert!(
        times.len() as u64 <= span / 50 + 2,
        "{} reports in {span} ms",
        times.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_without_its_end_is_sent_after_a_short_pause_and_before_the_other_stream() {
    let pack = pack(ExecConfig {
        idle_flush: Duration::from_millis(200),
        ..quick()
    })
    .await;
    // "name? " waits 0.6 s for its end: sent after 0.2 s. "x" waits 0.05 s,
    // less than that, but stderr speaks: "x" goes first, so the order holds.
    let code = "import sys, time\nprint('name? ', end='', flush=True)\ntime.sleep(0.6)\nprint('x', end='', flush=True)\ntime.sleep(0.05)\nprint('warn', file=sys.stderr, flush=True)\ntime.sleep(0.05)\nprint('done')";
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": code}),
    )
    .await;
    let partials: Vec<&RunEvent> = run
        .events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Partial(_)))
        .collect();
    assert_eq!(
        run.partials,
        [
            ("stdout".to_owned(), "name? ".to_owned()),
            ("stdout".to_owned(), "x".to_owned()),
            ("stderr".to_owned(), "warn\n".to_owned()),
            ("stdout".to_owned(), "done\n".to_owned()),
        ]
    );
    // The prompt was sent during the pause, not with the next write.
    let gap = partials[1].ts - partials[0].ts;
    assert!(
        gap >= 250,
        "the prompt waited for the next write: {gap} ms apart"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_is_replaced_with_one_warning_or_sent_exactly_as_base64() {
    let pack = pack(quick()).await;
    let code = "import sys\nsys.stdout.buffer.write(b'ok \\xff\\xfe\\n')\nsys.stdout.buffer.write(b'\\x00\\x80 again\\n')";
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": code}),
    )
    .await;
    assert_eq!(
        run.output("stdout"),
        "ok \u{fffd}\u{fffd}\n\u{0}\u{fffd} again\n"
    );
    assert_eq!(run.warnings.len(), 1, "{:?}", run.warnings);
    assert!(run.warnings[0].contains("stdout is not valid UTF-8"));
    assert_eq!(run.result["invalid_utf8"], true);

    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": code, "output_encoding": "base64"}),
    )
    .await;
    use base64::Engine as _;
    let bytes: Vec<u8> = run
        .partials
        .iter()
        .flat_map(|(_, text)| {
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .unwrap()
        })
        .collect();
    assert_eq!(bytes, b"ok \xff\xfe\n\x00\x80 again\n");
    // The stream is encoded as one whole: its chunks joined are its base64.
    assert_eq!(
        run.output("stdout"),
        base64::engine::general_purpose::STANDARD.encode(b"ok \xff\xfe\n\x00\x80 again\n")
    );
    assert!(run.warnings.is_empty());
    assert_eq!(run.result["output_encoding"], "base64");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_longer_than_a_chunk_is_split_between_characters() {
    let pack = pack(ExecConfig {
        chunk_bytes: 1000,
        ..quick()
    })
    .await;
    // 3,000 two-byte characters: 6,000 bytes on one line.
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": "print('é' * 3000)"}),
    )
    .await;
    assert!(run.partials.len() >= 6, "{}", run.partials.len());
    for (_, text) in &run.partials {
        assert!(text.len() <= 1000);
        assert!(!text.contains('\u{fffd}'));
    }
    assert_eq!(run.output("stdout"), format!("{}\n", "é".repeat(3000)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_beyond_the_cap_is_counted_and_dropped_after_a_notice() {
    let pack = pack(ExecConfig {
        max_output_bytes: 1000,
        ..quick()
    })
    .await;
    let code = "for i in range(10000):\n    print(f'line {i:05}')";
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": code}),
    )
    .await;
    let shown = run.output("stdout");
    assert_eq!(shown.len(), 1000);
    assert!(shown.starts_with("line 00000\nline 00001\n"));
    let notices = run.output("weir");
    assert!(
        notices.contains("output limit of 1000 bytes reached"),
        "{notices}"
    );
    assert_eq!(run.result["truncated"], true);
    assert_eq!(run.result["stdout_bytes"], 110_000);
    assert_eq!(run.result["shown_bytes"], 1000);
    assert_eq!(run.result["exit_code"], 0);
    assert!(
        run.summary
            .contains("output truncated: 1000 of 110000 bytes shown"),
        "{}",
        run.summary
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_args_env_and_files_reach_the_program_in_a_fresh_directory() {
    for (sandbox, mode) in MODES {
        let pack = pack(quick_in(sandbox)).await;
        let code = "import os, sys\nprint(sys.stdin.read().strip())\nprint(sys.argv[1:])\nprint(os.environ['GREETING'])\nprint(open('data/in.txt').read())\nprint(open('blob.bin', 'rb').read())\nprint(os.getcwd())\nprint(sorted(k for k in os.environ if k.startswith('WEIR')))";
        let run = call(
            &pack,
            "execute_code",
            json!({
                "language": "py",
                "code": code,
                "stdin": "from stdin\n",
                "args": ["a", "b c"],
                "env": {"GREETING": "hello"},
                "files": [
                    {"path": "data/in.txt", "content": "from a file"},
                    {"path": "blob.bin", "content": "AAEC", "encoding": "base64"}
                ]
            }),
        )
        .await;
        let out = run.output("stdout");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            &lines[..6],
            [
                "from stdin",
                "['a', 'b c']",
                "hello",
                "from a file",
                "b'\\x00\\x01\\x02'",
                lines[5]
            ]
        );
        // Sandboxed, the working directory is the run's own tmpfs; without the
        // sandbox, a directory of its own in this server's directory on the host.
        let dir = std::path::Path::new(lines[5]);
        if mode == "bubblewrap" {
            assert_eq!(dir, std::path::Path::new("/work"));
        } else {
            let server_dir = dir.parent().unwrap().file_name().unwrap();
            assert!(server_dir.to_str().unwrap().starts_with("weir-exec-"));
        }
        assert_eq!(
            lines[6], "[]",
            "nothing of the server's environment leaks in"
        );
        if mode == "none" {
            assert!(
                !dir.exists(),
                "the run's directory is removed: {}",
                dir.display()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_language_runs_here_and_reports_its_exit_code() {
    let pack = pack(quick()).await;
    let listed = call(&pack, "list_languages", json!({})).await;
    let programs = [
        ("python", "import sys\nprint('hi from python')\nsys.exit(2)"),
        (
            "javascript",
            "console.log('hi from javascript'); process.exit(2)",
        ),
        ("bash", "echo \"hi from ${BASH_VERSION:+bash}\"; exit 2"),
        ("sh", "echo 'hi from sh'; exit 2"),
        ("ruby", "puts 'hi from ruby'; exit 2"),
        ("perl", "print \"hi from perl\\n\"; exit 2;"),
    ];
    let mut ran = Vec::new();
    for language in listed.result["languages"].as_array().unwrap() {
        let name = language["name"].as_str().unwrap();
        if language["available"] != true {
            assert!(language["reason"].as_str().is_some_and(|r| !r.is_empty()));
            continue;
        }
        let (_, code) = programs.iter().find(|(n, _)| *n == name).unwrap();
        let run = call(
            &pack,
            "execute_code",
            json!({"language": name, "code": code}),
        )
        .await;
        assert_eq!(
            run.output("stdout"),
            format!("hi from {name}\n"),
            "{name}: {run:?}"
        );
        assert_eq!(run.result["exit_code"], 2, "{name}");
        assert_eq!(
            run.failed.as_ref().map(|(_, why)| why.as_str()),
            Some("the program exited with code 2"),
            "{name}"
        );
        ran.push(name.to_owned());
    }
    // Every language weir advertises runs here: scripts/test installs the
    // interpreters, so a machine without one fails rather than passing with
    // the language untested.
    let advertised: Vec<&str> = programs.iter().map(|(name, _)| *name).collect();
    assert_eq!(ran, advertised, "not run here: {}", listed.summary);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_code_checks_syntax_without_running_the_program() {
    let pack = pack(quick()).await;
    let run = call(
        &pack,
        "validate_code",
        json!({"language": "python", "code": "print('would run')\ndef f(:\n    pass"}),
    )
    .await;
    assert_eq!(run.result["valid"], false);
    let diagnostics = run.result["diagnostics"].as_str().unwrap();
    assert!(diagnostics.contains("SyntaxError"), "{diagnostics}");
    assert!(diagnostics.contains("line 2"), "{diagnostics}");
    assert!(!diagnostics.contains("would run"));

    let run = call(
        &pack,
        "validate_code",
        json!({"language": "python", "code": "print('ok')"}),
    )
    .await;
    assert_eq!(run.result["valid"], true);
    assert_eq!(run.result["diagnostics"], "");

    let run = call(
        &pack,
        "validate_code",
        json!({"language": "bash", "code": "if then fi"}),
    )
    .await;
    assert_eq!(run.result["valid"], false);
    assert!(
        run.result["diagnostics"]
            .as_str()
            .unwrap()
            .contains("syntax error")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_languages_says_what_is_here_and_which_sandbox() {
    for (sandbox, mode) in MODES {
        let pack = pack(quick_in(sandbox)).await;
        let run = call(&pack, "list_languages", json!({})).await;
        let names: Vec<&str> = run.result["languages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["python", "javascript", "bash", "sh", "ruby", "perl"]
        );
        let python = &run.result["languages"][0];
        assert_eq!(python["available"], true);
        assert!(python["version"].as_str().unwrap().starts_with('3'));
        assert_eq!(run.result["sandbox"]["mode"], mode);
        assert!(run.summary.contains(&format!(
            "sandbox: {}",
            if mode == "none" { "NONE" } else { "bubblewrap" }
        )));
        let limits = &run.result["limits"];
        assert_eq!(limits["processes"]["count"], 64, "{limits}");
        // Each limit says what it applies to, or that it does not, and why.
        for (name, limit) in limits.as_object().unwrap() {
            let Some(per) = limit.get("per") else {
                continue; // the timeouts and the output cap: per run, by weir
            };
            assert!(
                ["run", "process", "file", "user", "none"].contains(&per.as_str().unwrap()),
                "{name}: {limit}"
            );
            if per == "none" {
                assert!(
                    limit["why"].as_str().is_some_and(|why| !why.is_empty()),
                    "{name}: {limit}"
                );
            } else {
                assert!(limit["how"].is_string(), "{name}: {limit}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_bubblewrap_the_pack_says_so_and_refuses_when_it_is_required() {
    // A PATH with an interpreter and no bwrap.
    let dir = std::env::temp_dir().join(format!("weir-tools-test-path-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::os::unix::fs::symlink("/bin/sh", dir.join("sh"));
    let config = ExecConfig {
        path: Some(dir.clone().into()),
        ..quick()
    };
    let pack = pack(config.clone()).await;
    let reason = pack.unsandboxed_reason().unwrap();
    assert!(reason.contains("not installed"), "{reason}");
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "sh", "code": "echo plain"}),
    )
    .await;
    let EventKind::Meta(meta) = &run.events[1].kind else {
        unreachable!()
    };
    assert_eq!(meta.info["sandbox"]["mode"], "none");
    assert!(
        meta.info["sandbox"]["network"]
            .as_str()
            .unwrap()
            .contains("NOT isolated")
    );
    assert_eq!(run.result["sandbox"], "none");
    assert!(run.summary.ends_with("sandbox: none]"), "{}", run.summary);
    let tool = pack
        .tools()
        .into_iter()
        .find(|t| t.info().name == "execute_code")
        .unwrap();
    assert!(tool.info().description.contains("NO SANDBOX"));

    let required = ExecPack::detect(ExecConfig {
        sandbox: SandboxMode::Require,
        ..config
    })
    .await;
    let error = required.err().unwrap().to_string();
    assert!(
        error.contains("required but cannot be used here"),
        "{error}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_missing_languages_are_refused_with_what_is_available() {
    let pack = pack(quick()).await;
    let (_, scheduler) = scheduler(&pack).await;
    let refused = scheduler
        .submit(
            "execute_code",
            json!({"language": "cobol", "code": ""}),
            RunOptions::default(),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("arguments.language must be one of"),
        "{refused}"
    );
    assert!(refused.contains("python"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_sends_sigterm_then_sigkill_and_reports_both() {
    let pack = pack(quick()).await;
    let code = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ignoring SIGTERM', flush=True)\nwhile True:\n    time.sleep(0.05)";
    let started = Instant::now();
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "python", "code": code, "timeout_s": 0.5}),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(run.output("stdout"), "ignoring SIGTERM\n");
    assert_eq!(run.result["timed_out"], true);
    assert_eq!(run.result["signals_sent"], json!(["SIGTERM", "SIGKILL"]));
    assert_eq!(run.result["signal"], "SIGKILL");
    assert_eq!(run.result["exit_code"], Value::Null);
    assert_eq!(
        run.failed,
        Some((
            FailureCode::Timeout,
            "the program timed out after 0.5 s (sent SIGTERM then SIGKILL)".to_owned()
        ))
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
    assert!(
        run.summary
            .contains("timed out at 0.5 s, sent SIGTERM then SIGKILL"),
        "{}",
        run.summary
    );
    // Progress says so as it happens: the line, then each step.
    assert_eq!(
        progress(&run),
        [
            (1.0, "running", "ignoring SIGTERM".to_owned()),
            (
                1.0,
                "timed out",
                "no end within 0.5 s: sent SIGTERM".to_owned()
            ),
            (
                1.0,
                "killed",
                "still running 0.5 s after SIGTERM: sent SIGKILL".to_owned()
            ),
        ]
    );

    // A program that obeys SIGTERM ends with it.
    let run = call(
        &pack,
        "execute_code",
        json!({"language": "sh", "code": "sleep 30", "timeout_s": 0.3}),
    )
    .await;
    assert_eq!(run.result["signals_sent"], json!(["SIGTERM"]));
    assert_eq!(run.result["signal"], "SIGTERM");
    assert_eq!(run.failed.map(|(code, _)| code), Some(FailureCode::Timeout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_is_killed_within_a_second_and_leaves_nothing() {
    let pack = pack(quick()).await;
    let (log, scheduler) = scheduler(&pack).await;
    let marker = format!("cancel-marker-{}", std::process::id());
    let code = "import subprocess, sys, time\nsubprocess.Popen(['sh', '-c', 'sleep 300; :', sys.argv[1]])\nprint('started', flush=True)\nwhile True:\n    time.sleep(1)";
    let handle = scheduler
        .submit(
            "execute_code",
            json!({"language": "python", "code": code, "args": [marker]}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let run_id = handle.run_id().clone();
    // Wait for the program to be running.
    let mut events = log.subscribe_from(&run_id, 0);
    while let Some(event) = events.next().await {
        if matches!(event.unwrap().kind, EventKind::Partial(_)) {
            break;
        }
    }
    assert!(!processes_with(&marker).is_empty(), "the program runs");
    let cancelled = Instant::now();
    assert!(scheduler.cancel(&run_id, "test cancel"));
    let terminal = handle.finished().await.unwrap();
    assert!(
        matches!(terminal.kind, EventKind::Canceled(_)),
        "{terminal:?}"
    );
    wait_for_no_process_with(&marker, Duration::from_secs(1));
    assert!(
        cancelled.elapsed() < Duration::from_secs(1),
        "{:?}",
        cancelled.elapsed()
    );
}

/// Pids whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(marker))
        })
        .collect()
}

fn wait_for_no_process_with(marker: &str, within: Duration) {
    let until = Instant::now() + within;
    loop {
        let left = processes_with(marker);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < until, "processes left behind: {left:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}
