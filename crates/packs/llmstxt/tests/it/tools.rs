//! The two tools run by a real scheduler over the memory log, against the
//! scripted server: tokens streamed before the result, milestones, the
//! four artifacts and their validity, a broken answer replaced (and said
//! to be), the fallback, a git URL (refused unless its host is allowed,
//! then cloned by a git run with a fixed configuration), sources and
//! files outside the roots refused, and a cancel that closes the model's
//! connection.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use weir_core::{EventKind, RunEvent};
use weir_pack_llmstxt::llm::ChatConfig;
use weir_pack_llmstxt::{CloneConfig, LlmsTxtConfig, LlmsTxtPack, validate};
use weir_runtime::{EventLog, MemoryLog, Pack, Roots, RunOptions, Scheduler, SchedulerConfig};

use crate::script::{Reply, Scripted, Step, answer, token};

/// A small repository: docs, a manifest, an example, a license, and a
/// file its .gitignore hides.
fn fixture(dir: &Path) {
    let files = [
        (
            "README.md",
            "# Demo\n\nDemo counts words in text files. It is small.\n\n## Use\n\nRun it.\n",
        ),
        (
            "docs/guide.md",
            "# Guide\n\nHow to count words with Demo, step by step.\n",
        ),
        (
            "Cargo.toml",
            "[package]\nname = \"demo\"\ndescription = \"Counts words.\"\n",
        ),
        ("examples/count.rs", "fn main() { println!(\"3\"); }\n"),
        ("LICENSE", "MIT License\n"),
        (".gitignore", "secret.md\n"),
        ("secret.md", "# Secret\n\nNot for llms.txt.\n"),
        ("src/lib.rs", "pub fn count() {}\n"),
    ];
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

struct Ran {
    events: Vec<RunEvent>,
    log: Arc<dyn EventLog>,
}

impl Ran {
    fn result(&self) -> &Value {
        match &self.events.last().unwrap().kind {
            EventKind::Completed(done) => done.structured.as_ref().unwrap(),
            other => panic!("the run did not complete: {other:?}"),
        }
    }

    fn tokens(&self) -> String {
        self.events
            .iter()
            .filter_map(|event| match &event.kind {
                EventKind::Partial(partial) if partial.group.as_deref() == Some("model") => Some(
                    partial
                        .content
                        .iter()
                        .map(|c| match c {
                            weir_core::Content::Text { text } => text.clone(),
                            _ => String::new(),
                        })
                        .collect::<String>(),
                ),
                _ => None,
            })
            .collect()
    }

    async fn artifact(&self, name: &str) -> String {
        let run = &self.events[0].run_id;
        let bytes = self
            .log
            .read_artifact(run, name, 0..u64::MAX)
            .await
            .unwrap();
        String::from_utf8(bytes).unwrap()
    }
}

/// The configuration of these tests: the temporary directory is the root
/// (every fixture is made in it).
fn config(model: Option<ChatConfig>) -> LlmsTxtConfig {
    LlmsTxtConfig {
        model,
        ..LlmsTxtConfig::new(Roots::new([std::env::temp_dir()]).unwrap())
    }
}

async fn scheduler(model: Option<ChatConfig>) -> (Scheduler, Arc<dyn EventLog>) {
    scheduler_with(config(model)).await
}

async fn scheduler_with(config: LlmsTxtConfig) -> (Scheduler, Arc<dyn EventLog>) {
    let pack = LlmsTxtPack::new(config).unwrap();
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let scheduler = Scheduler::start(log.clone(), pack.tools(), SchedulerConfig::default())
        .await
        .unwrap();
    (scheduler, log)
}

async fn run(model: Option<ChatConfig>, tool: &str, arguments: Value) -> Ran {
    run_with(config(model), tool, arguments).await
}

async fn run_with(config: LlmsTxtConfig, tool: &str, arguments: Value) -> Ran {
    let (scheduler, log) = scheduler_with(config).await;
    let run = scheduler
        .submit(tool, arguments, RunOptions::default())
        .await
        .unwrap();
    let id = run.run_id().clone();
    run.finished().await;
    let events = log.read(&id, 0, 10_000).await.unwrap();
    Ran { events, log }
}

fn model(url: &str) -> ChatConfig {
    ChatConfig {
        backoff: Duration::from_millis(10),
        ..ChatConfig::new(url, "scripted")
    }
}

async fn checked(text: &str, format: &str) -> Value {
    let ran = run(
        None,
        "llmstxt_validate",
        json!({"text": text, "format": format}),
    )
    .await;
    ran.result().clone()
}

#[tokio::test]
async fn with_a_model_tokens_stream_before_four_valid_artifacts() {
    let repo = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let server = Scripted::start(vec![answer(&["A word", " counter."])]).await;
    let ran = run(
        Some(model(&server.url)),
        "llmstxt_generate",
        json!({"source": repo.path()}),
    )
    .await;
    let result = ran.result();
    assert_eq!(result["mode"], "model", "{result}");
    assert_eq!(result["summary"], "A word counter.");
    // One prompt for the summary, one per link.
    assert_eq!(server.requests(), 1 + 5);
    let tokens = ran.tokens();
    assert!(
        tokens.starts_with("summary: A word counter.\nREADME.md: A word counter.\n"),
        "{tokens}"
    );
    let first_token = ran
        .events
        .iter()
        .position(|e| matches!(&e.kind, EventKind::Partial(_)))
        .unwrap();
    let first_artifact = ran
        .events
        .iter()
        .position(|e| matches!(&e.kind, EventKind::Artifact(_)))
        .unwrap();
    assert!(first_token < first_artifact);
    let phases: Vec<String> = ran
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Progress(p) => Some(format!(
                "{} {}",
                p.phase.clone().unwrap_or_default(),
                p.progress
            )),
            _ => None,
        })
        .collect();
    // gathered, summarized, section k/n for Docs, Packages, Examples, Optional, written.
    assert_eq!(
        phases,
        [
            "gathered 1",
            "summarized 2",
            "section 3",
            "section 4",
            "section 5",
            "section 6",
            "written 7"
        ]
    );

    let llms = ran.artifact("llms.txt").await;
    assert_eq!(llms, result["llms_txt"]);
    let read = validate(&llms);
    assert!(read.valid, "{:?}\n{llms}", read.errors);
    assert!(!llms.contains("secret"), ".gitignore is honoured:\n{llms}");
    let sections: Vec<&str> = read
        .document
        .sections
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(sections, ["Docs", "Packages", "Examples", "Optional"]);
    assert_eq!(read.document.sections[0].links[0].url, "README.md");
    assert_eq!(
        read.document.sections[0].links[0].note.as_deref(),
        Some("A word counter.")
    );
    assert_eq!(
        checked(&ran.artifact("llms-full.txt").await, "llms-full.txt").await["valid"],
        true
    );
    let ctx = ran.artifact("llms-ctx.txt").await;
    assert_eq!(checked(&ctx, "llms-ctx.txt").await["valid"], true);
    assert!(
        !ctx.contains("MIT License"),
        "llms-ctx.txt leaves Optional out"
    );
    assert!(ctx.contains("Demo counts words"));
    let json: Value = serde_json::from_str(&ran.artifact("llms.json").await).unwrap();
    assert_eq!(json["mode"], "model");
    assert_eq!(json["model"]["tokens"], 12);
}

#[tokio::test]
async fn an_answer_that_breaks_off_is_replaced_and_said_to_be() {
    let repo = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let server = Scripted::start(vec![
        answer(&["Counts words."]),
        Reply::Stream(vec![token("The READ"), Step::Drop]),
        answer(&["Fine."]),
    ])
    .await;
    let ran = run(
        Some(model(&server.url)),
        "llmstxt_generate",
        json!({"source": repo.path()}),
    )
    .await;
    let result = ran.result();
    assert_eq!(result["mode"], "mixed");
    let readme = &result["sections"][0]["links"][0];
    assert_eq!(readme["note_from"], "repository");
    assert_eq!(
        readme["note"],
        "Demo counts words in text files. It is small."
    );
    assert!(
        ran.tokens().contains("README.md: The READ\n"),
        "the partial answer was streamed"
    );
    let warnings: Vec<&str> = ran
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Warning(w) => Some(w.message.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("note for README.md (its answer broke off)"),
        "{}",
        warnings[0]
    );
    assert!(
        warnings[0].contains("dropped after 1 tokens"),
        "{}",
        warnings[0]
    );
    assert!(validate(&ran.artifact("llms.txt").await).valid);
}

#[tokio::test]
async fn without_a_model_the_fallback_is_valid_and_marked() {
    let repo = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let ran = run(
        None,
        "llmstxt_generate",
        json!({"source": repo.path(), "base_url": "https://example.invalid/demo/"}),
    )
    .await;
    let result = ran.result();
    assert_eq!(result["mode"], "fallback");
    assert_eq!(result["name"], "demo");
    assert_eq!(result["summary"], "Counts words.");
    let llms = ran.artifact("llms.txt").await;
    assert!(
        llms.contains("<!-- Generated via fallback path (no model): no model is configured"),
        "{llms}"
    );
    assert!(llms.contains("- [Guide](https://example.invalid/demo/docs/guide.md): How to count words with Demo, step by step.\n"), "{llms}");
    assert!(validate(&llms).valid);
    assert_eq!(ran.tokens(), "");
}

/// The failure message a run ended with.
fn failure(ran: &Ran) -> String {
    match &ran.events.last().unwrap().kind {
        EventKind::Failed(failed) => failed.error.message.clone(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_url_is_cloned_only_from_an_allowed_host_by_a_git_with_a_fixed_configuration() {
    let repo = tempfile::tempdir().unwrap();
    fixture(repo.path());
    // Nothing allowed: no URL is cloned, a local one least of all.
    let url = format!("file://{}", repo.path().display());
    let refused = run(
        None,
        "llmstxt_generate",
        json!({"source": url, "use_model": false}),
    )
    .await;
    let message = failure(&refused);
    assert!(message.contains("--llmstxt-clone-host"), "{message}");
    assert!(message.contains("only https:// URLs"), "{message}");

    // An allowed host, cloned by a stand-in for git that records how it
    // was run and checks out the fixture.
    let scratch = tempfile::tempdir().unwrap();
    let record = scratch.path().join("record");
    let git = scratch.path().join("git");
    std::fs::write(
        &git,
        format!(
            "#!/bin/sh\nenv > '{record}.env'\nprintf '%s\\n' \"$@\" > '{record}.args'\nfor last in \"$@\"; do :; done\nmkdir -p \"$last\" && cp -R '{repo}/.' \"$last\"\n",
            record = record.display(),
            repo = repo.path().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&git, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let clone = CloneConfig {
        git: git.clone(),
        ..CloneConfig::default()
            .allow_hosts(["example.invalid"])
            .unwrap()
    };
    let ran = run_with(
        LlmsTxtConfig {
            clone: clone.clone(),
            ..config(None)
        },
        "llmstxt_generate",
        json!({"source": "https://example.invalid/me/tally.git", "use_model": false}),
    )
    .await;
    let result = ran.result();
    assert_eq!(result["files"], 5, "{result}");
    assert_eq!(result["mode"], "fallback");
    let args = std::fs::read_to_string(record.with_extension("args")).unwrap();
    for expected in [
        "protocol.allow=never",
        "protocol.https.allow=always",
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "http.followRedirects=false",
        "--no-recurse-submodules",
        "https://example.invalid/me/tally.git",
    ] {
        assert!(
            args.lines().any(|line| line == expected),
            "{expected} in {args}"
        );
    }
    // Its environment: only what a clone needs, nothing of this process's.
    let env = std::fs::read_to_string(record.with_extension("env")).unwrap();
    for line in env.lines() {
        let name = line.split('=').next().unwrap();
        assert!(
            ["PATH", "HOME", "LANG", "PWD", "SHLVL", "_", "OLDPWD"].contains(&name)
                || name.starts_with("GIT_"),
            "{name} reached git: {env}"
        );
    }
    assert!(env.contains("GIT_CONFIG_NOSYSTEM=1"), "{env}");
    assert!(env.contains("GIT_CONFIG_GLOBAL=/dev/null"), "{env}");

    // Another host, even with one allowed, is not.
    let other = run_with(
        LlmsTxtConfig {
            clone,
            ..config(None)
        },
        "llmstxt_generate",
        json!({"source": "https://elsewhere.invalid/me/tally.git"}),
    )
    .await;
    let message = failure(&other);
    assert!(message.contains("not one the operator allows"), "{message}");
    assert!(message.contains("example.invalid"), "{message}");
}

#[tokio::test]
async fn sources_and_files_outside_the_roots_are_refused() {
    let inside = tempfile::tempdir().unwrap();
    fixture(inside.path());
    let roots = Roots::new([inside.path()]).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    fixture(elsewhere.path());
    for (tool, arguments) in [
        ("llmstxt_generate", json!({"source": elsewhere.path()})),
        ("llmstxt_generate", json!({"source": "/"})),
        ("llmstxt_generate", json!({"source": ".."})),
        (
            "llmstxt_validate",
            json!({"path": elsewhere.path().join("README.md")}),
        ),
        (
            "llmstxt_validate",
            json!({"path": "../../../../etc/passwd"}),
        ),
    ] {
        let ran = run_with(LlmsTxtConfig::new(roots.clone()), tool, arguments.clone()).await;
        let message = failure(&ran);
        assert!(message.contains("outside"), "{arguments}: {message}");
    }
    // A relative source starts at the first root.
    let ran = run_with(
        LlmsTxtConfig::new(roots.clone()),
        "llmstxt_generate",
        json!({"source": "."}),
    )
    .await;
    assert_eq!(ran.result()["files"], 5);
}

#[tokio::test]
async fn cancelling_a_run_closes_the_models_connection() {
    let repo = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let server = Scripted::start(vec![Reply::Stream(vec![token("Thinking"), Step::Hold])]).await;
    let (scheduler, log) = scheduler(Some(model(&server.url))).await;
    let run = scheduler
        .submit(
            "llmstxt_generate",
            json!({"source": repo.path()}),
            RunOptions::default(),
        )
        .await
        .unwrap();
    let id = run.run_id().clone();
    // Wait for the token to reach the log, then cancel.
    let mut seen_token = false;
    for _ in 0..200 {
        let events = log.read(&id, 0, 1000).await.unwrap();
        if events.iter().any(|e| matches!(&e.kind, EventKind::Partial(p) if p.content.iter().any(|c| matches!(c, weir_core::Content::Text { text } if text == "Thinking")))) {
            seen_token = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(seen_token);
    let left = server.client_left.notified();
    assert!(scheduler.cancel(&id, "test"));
    tokio::time::timeout(Duration::from_secs(2), left)
        .await
        .expect("the model's connection is closed on cancel");
    let last = run.finished().await.unwrap();
    assert!(matches!(last.kind, EventKind::Canceled(_)), "{last:?}");
}

#[tokio::test]
async fn validate_reads_a_path_and_names_errors_with_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llms.txt");
    std::fs::write(&path, "# T\n\n> s\n\n## Docs\n\nprose here\n").unwrap();
    let ran = run(None, "llmstxt_validate", json!({"path": path})).await;
    let result = ran.result();
    assert_eq!(result["valid"], false);
    assert_eq!(result["errors"][0]["line"], 7);
    let text = match &ran.events.last().unwrap().kind {
        EventKind::Completed(done) => format!("{:?}", done.content),
        _ => unreachable!(),
    };
    assert!(text.contains("line 7: line in section"), "{text}");
}
