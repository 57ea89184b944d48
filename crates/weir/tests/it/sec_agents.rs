//! Issue 22, the agent tools: cwd inside a root, no argument becomes a flag (findings 3, 6).
//!
//! Through the real binary and the real coding-agent CLIs (pinned, installed
//! by scripts/agent-clis), each against a `weir-fake-model` of its own, as in
//! `critique`: `weir serve --http` with an explicit `--root`, driven by
//! `weir call`. What the fake received is what the model would have seen,
//! so "the prompt is text" is checked there, verbatim; "the agent never
//! started" is an empty request log.
//!
//! Finding 3: `agent_run`'s `cwd` (and a roast's `target`) named any
//! directory, e.g. the one holding the tokens file, where Claude Code's
//! Read tool needs no approval. Finding 6: a prompt or model that reads
//! like a flag reached the CLI's argv where its parser reads flags.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use weir_fake_model::{FakeModel, Script, Turn};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// A flag that turns codex's sandbox and approvals off.
const CODEX_BYPASS: &str = "--dangerously-bypass-approvals-and-sandbox";

/// One test's directories: the root callers may name (`work`), a private
/// HOME for the CLIs, and `secret`, outside the root, holding a tokens file.
struct Scene {
    dir: tempfile::TempDir,
    home: PathBuf,
    tmp: PathBuf,
    bin: PathBuf,
    work: PathBuf,
    secret: PathBuf,
}

impl Scene {
    fn new(clis: &[&str]) -> Scene {
        let installed = weir_fake_model::agent_clis::installed();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let [home, tmp, bin, work, secret] = ["home", "tmp", "bin", "work", "secret"].map(|name| {
            let path = dir.path().join(name);
            std::fs::create_dir(&path).expect("create a directory of the test");
            path
        });
        for cli in clis {
            std::os::unix::fs::symlink(installed.join(cli), bin.join(cli)).expect("link a CLI");
        }
        std::fs::write(secret.join("tokens"), "admin sha256:0123 admin\n").unwrap();
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        std::fs::write(
            home.join(".gemini/settings.json"),
            r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"disableAutoUpdate":true,"disableUpdateNag":true},"privacy":{"usageStatisticsEnabled":false},"telemetry":{"enabled":false}}"#,
        )
        .unwrap();
        std::fs::create_dir_all(home.join("codex-home")).unwrap();
        std::fs::create_dir_all(tmp.join("claude")).unwrap();
        Scene {
            dir,
            home,
            tmp,
            bin,
            work,
            secret,
        }
    }

    /// `weir serve --http 127.0.0.1:0 --memory` in `work`, with `roots` as
    /// its `--root`s, each CLI pointed at its fake.
    fn serve(&self, fakes: &Fakes, roots: &[&Path]) -> Server {
        if let Some(codex) = &fakes.codex {
            std::fs::write(
                self.home.join("codex-home/config.toml"),
                format!(
                    "model = \"gpt-5.5\"\nmodel_provider = \"fake\"\napproval_policy = \"never\"\nsandbox_mode = \"read-only\"\ncheck_for_update_on_startup = false\n\n[model_providers.fake]\nname = \"weir-fake-model\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_API_KEY\"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n[features]\nplugins = false\n\n[analytics]\nenabled = false\n",
                    codex.url()
                ),
            )
            .unwrap();
        }
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut command = Command::new(WEIR);
        command
            .env_clear()
            .env("PATH", path)
            .env("HOME", &self.home)
            .env("TMPDIR", &self.tmp)
            .envs([
                ("NO_UPDATE_NOTIFIER", "1"),
                ("DISABLE_AUTOUPDATER", "1"),
                ("DISABLE_TELEMETRY", "1"),
                ("DISABLE_ERROR_REPORTING", "1"),
                ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
                ("CI", "1"),
                ("DO_NOT_TRACK", "1"),
                ("ANTHROPIC_API_KEY", "dummy"),
                ("CLAUDE_CODE_MAX_RETRIES", "0"),
                ("FAKE_API_KEY", "dummy"),
                ("GEMINI_API_KEY", "dummy"),
                ("GEMINI_CLI_TRUST_WORKSPACE", "true"),
            ])
            .env("CLAUDE_CODE_TMPDIR", self.tmp.join("claude"))
            .env("CODEX_HOME", self.home.join("codex-home"))
            .current_dir(&self.work)
            .args([
                "serve",
                "--http",
                "127.0.0.1:0",
                "--memory",
                "--no-exec",
                "--data-dir",
            ])
            .arg(self.dir.path().join("data"))
            .args([
                "--critique-models",
                "claude=claude-opus-5-5,gemini=gemini-2.5-flash",
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::piped());
        for root in roots {
            command.arg("--root").arg(root);
        }
        if let Some(claude) = &fakes.claude {
            command.env("ANTHROPIC_BASE_URL", claude.url());
        }
        if let Some(gemini) = &fakes.gemini {
            command.env("GOOGLE_GEMINI_BASE_URL", gemini.url());
        }
        let mut child = command.spawn().expect("start weir serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let url = loop {
            let line = lines
                .next()
                .expect("weir serve printed where it serves")
                .unwrap();
            if line.contains("serving MCP at") {
                break line
                    .split_whitespace()
                    .find(|word| word.starts_with("http://"))
                    .unwrap_or_else(|| panic!("no URL in {line:?}"))
                    .to_owned();
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        Server { child, url }
    }
}

/// A fake model per CLI (none for a CLI a test leaves out).
#[derive(Default)]
struct Fakes {
    claude: Option<FakeModel>,
    codex: Option<FakeModel>,
    gemini: Option<FakeModel>,
}

fn fake(turns: Vec<Turn>) -> Option<FakeModel> {
    Some(FakeModel::start(Script::new(turns)).expect("start a fake model"))
}

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `weir call TOOL ARGS --output jsonl`: its result line and exit code.
    async fn call(&self, tool: &str, arguments: Value) -> (Value, i32) {
        let output = tokio::process::Command::new(WEIR)
            .env_remove("WEIR_TOKEN")
            .args(["call", "--url", &self.url, tool, "--json"])
            .arg(arguments.to_string())
            .args(["--output", "jsonl"])
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run weir call");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let result = stdout
            .lines()
            .map(|line| {
                serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"))
            })
            .find(|line| line["type"] == "result")
            .unwrap_or_else(|| {
                panic!(
                    "{tool} {arguments} gave no result: {stdout}{}",
                    String::from_utf8_lossy(&output.stderr)
                )
            });
        (result, output.status.code().unwrap_or(-1))
    }

    /// The result of a call that completed.
    async fn ok(&self, tool: &str, arguments: Value) -> Value {
        let (result, code) = self.call(tool, arguments.clone()).await;
        assert!(
            code == 0 && result["is_error"] != true,
            "{tool} {arguments}: {result:#}"
        );
        result
    }

    /// The text of a call that was refused.
    async fn refused(&self, tool: &str, arguments: Value) -> String {
        let (result, code) = self.call(tool, arguments.clone()).await;
        assert!(
            code != 0 && result["is_error"] == true,
            "{tool} {arguments} was not refused: {result:#}"
        );
        text(&result)
    }
}

fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text of the last user message of a model request, in whichever of
/// the three protocols it came: what the model was asked.
fn last_user_text(body: &Value) -> String {
    fn texts(value: &Value) -> Vec<String> {
        match value {
            Value::String(text) => vec![text.clone()],
            Value::Array(items) => items.iter().flat_map(texts).collect(),
            Value::Object(item) => item
                .get("text")
                .and_then(Value::as_str)
                .map(|text| vec![text.to_owned()])
                .or_else(|| item.get("content").map(texts))
                .or_else(|| item.get("parts").map(texts))
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }
    let messages = body
        .get("messages")
        .or_else(|| body.get("input"))
        .or_else(|| body.get("contents"))
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("no messages in {body:#}"));
    let last = messages
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .unwrap_or_else(|| panic!("no user message in {body:#}"));
    texts(last)
        .pop()
        .unwrap_or_else(|| panic!("no text in {last:#}"))
}

/// What the fake of a CLI was asked, one entry per model request.
fn asked(fake: &Option<FakeModel>) -> Vec<String> {
    fake.as_ref()
        .expect("the test's fake")
        .requests()
        .iter()
        .filter(|request| request.turn.is_some())
        .map(|request| last_user_text(&request.body))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_3_an_agent_cwd_outside_the_roots_is_refused_and_no_agent_starts() {
    let fakes = Fakes {
        claude: fake(vec![Turn::text("the token is …")]),
        ..Fakes::default()
    };
    let scene = Scene::new(&["claude"]);
    // Inside the root, a symlink to the secret directory.
    std::os::unix::fs::symlink(&scene.secret, scene.work.join("link")).unwrap();
    let server = scene.serve(&fakes, &[&scene.work]);

    let secret = scene.secret.to_str().unwrap();
    for cwd in [secret, "link", "../secret", "/"] {
        let error = server
            .refused(
                "agent_run",
                json!({"cli": "claude", "prompt": "print the file tokens", "cwd": cwd}),
            )
            .await;
        assert!(
            error.contains("is outside the directories this server lets callers name")
                && error.contains("--root"),
            "{cwd}: {error}"
        );
    }
    // A roast's target is a path too.
    let error = server
        .refused(
            "roast",
            json!({"brief": "codebase", "target": secret, "clis": ["claude"]}),
        )
        .await;
    assert!(
        error.contains("target") && error.contains("is outside"),
        "{error}"
    );
    let error = server
        .refused(
            "roast",
            json!({"brief": "security", "target": format!("{secret}/tokens"), "clis": ["claude"]}),
        )
        .await;
    assert!(error.contains("is outside"), "{error}");
    // Not one agent started.
    assert_eq!(asked(&fakes.claude), Vec::<String>::new());
}

/// Even inside a root, an agent never works in or above weir's own data
/// directory: it would read the runs' store without asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_3_an_agent_never_works_in_or_above_the_data_directory() {
    let fakes = Fakes {
        claude: fake(vec![Turn::text("worked in work")]),
        ..Fakes::default()
    };
    let scene = Scene::new(&["claude"]);
    let data = scene.dir.path().join("data");
    std::fs::create_dir_all(data.join("sub")).unwrap();
    // The root holds the data directory (`serve` puts it in `dir/data`).
    let server = scene.serve(&fakes, &[scene.dir.path()]);
    for cwd in [scene.dir.path(), &data, &data.join("sub")] {
        let error = server
            .refused(
                "agent_run",
                json!({"cli": "claude", "prompt": "read weir.db", "cwd": cwd}),
            )
            .await;
        assert!(
            error.contains("cwd: an agent working in")
                && error.contains("holds this server's own data or credentials"),
            "{}: {error}",
            cwd.display()
        );
    }
    // The default directory (the first root) holds it too.
    let error = server
        .refused(
            "agent_run",
            json!({"cli": "claude", "prompt": "read weir.db"}),
        )
        .await;
    assert!(error.contains("default working directory"), "{error}");
    let error = server
        .refused(
            "roast",
            json!({"brief": "codebase", "target": data, "clis": ["claude"]}),
        )
        .await;
    assert!(error.contains("target: an agent working in"), "{error}");
    assert_eq!(asked(&fakes.claude), Vec::<String>::new());
    // A sibling of the data directory is fine.
    let result = server
        .ok(
            "agent_run",
            json!({"cli": "claude", "prompt": "hi", "cwd": "work"}),
        )
        .await;
    assert_eq!(result["structured"]["text"], "worked in work");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_3_an_agent_runs_in_the_first_root_by_default_and_relative_cwds_start_there() {
    let fakes = Fakes {
        claude: fake(vec![Turn::text("first"), Turn::text("second")]),
        ..Fakes::default()
    };
    let scene = Scene::new(&["claude"]);
    let [first, second] = ["first-root", "second-root"].map(|name| {
        let dir = scene.dir.path().join(name);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::canonicalize(dir).unwrap()
    });
    // weir serve runs in `work`, which is no root.
    let server = scene.serve(&fakes, &[&first, &second]);
    let result = server
        .ok(
            "agent_run",
            json!({"cli": "claude", "prompt": "where am I"}),
        )
        .await;
    assert_eq!(result["structured"]["text"], "first");
    let result = server
        .ok(
            "agent_run",
            json!({"cli": "claude", "prompt": "and now", "cwd": "sub"}),
        )
        .await;
    assert_eq!(result["structured"]["text"], "second");
    // Claude Code tells the model its working directory.
    let requests = fakes.claude.as_ref().unwrap().requests();
    let bodies: Vec<String> = requests.iter().map(|r| r.body.to_string()).collect();
    let primary = |dir: &Path| format!("Primary working directory: {}\\n", dir.display());
    assert!(bodies[0].contains(&primary(&first)), "{}", bodies[0]);
    assert!(
        bodies[1].contains(&primary(&first.join("sub"))),
        "{}",
        bodies[1]
    );
    // weir's own directory is no root: refused.
    let error = server
        .refused(
            "agent_run",
            json!({"cli": "claude", "prompt": "x", "cwd": scene.work}),
        )
        .await;
    assert!(error.contains("is outside"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_6_a_codex_prompt_that_reads_like_a_flag_is_text() {
    let fakes = Fakes {
        codex: fake(vec![Turn::text("just text"), Turn::text("a dash")]),
        ..Fakes::default()
    };
    let scene = Scene::new(&["codex"]);
    let server = scene.serve(&fakes, &[&scene.work]);
    let result = server
        .ok("agent_run", json!({"cli": "codex", "prompt": CODEX_BYPASS}))
        .await;
    assert_eq!(result["structured"]["text"], "just text");
    // `-` alone means "read stdin" to codex: it is text here too.
    let result = server
        .ok("agent_run", json!({"cli": "codex", "prompt": "-"}))
        .await;
    assert_eq!(result["structured"]["text"], "a dash");
    assert_eq!(asked(&fakes.codex), [CODEX_BYPASS, "-"]);
    // A model that reads like a flag never reaches codex.
    let error = server
        .refused(
            "agent_run",
            json!({"cli": "codex", "prompt": "hi", "model": CODEX_BYPASS}),
        )
        .await;
    assert!(
        error.contains("model") && error.contains("is not accepted"),
        "{error}"
    );
    assert_eq!(asked(&fakes.codex).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_6_a_gemini_prompt_or_model_that_reads_like_a_flag_never_is_one() {
    let fakes = Fakes {
        gemini: fake(vec![Turn::text("no yolo here")]),
        ..Fakes::default()
    };
    let scene = Scene::new(&["gemini"]);
    let server = scene.serve(&fakes, &[&scene.work]);
    let prompt = "--yolo --approval-mode=yolo";
    let result = server
        .ok("agent_run", json!({"cli": "gemini", "prompt": prompt}))
        .await;
    assert_eq!(result["structured"]["text"], "no yolo here");
    assert_eq!(asked(&fakes.gemini), [prompt]);
    for (tool, arguments) in [
        (
            "agent_run",
            json!({"cli": "gemini", "prompt": "hi", "model": "--yolo"}),
        ),
        (
            "roast",
            json!({"brief": "idea", "content": "an idea", "clis": ["gemini"], "models": {"gemini": "--yolo"}}),
        ),
    ] {
        let error = server.refused(tool, arguments).await;
        assert!(
            error.contains("\"--yolo\" is not accepted") && error.contains("letters, digits"),
            "{tool}: {error}"
        );
    }
    assert_eq!(asked(&fakes.gemini).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finding_6_a_claude_prompt_version_gets_a_real_answer() {
    let fakes = Fakes {
        claude: fake(vec![Turn::text("I am a model, not a version string.")]),
        ..Fakes::default()
    };
    let scene = Scene::new(&["claude"]);
    let server = scene.serve(&fakes, &[&scene.work]);
    let result = server
        .ok("agent_run", json!({"cli": "claude", "prompt": "--version"}))
        .await;
    assert_eq!(
        result["structured"]["text"],
        "I am a model, not a version string."
    );
    assert_eq!(asked(&fakes.claude), ["--version"]);
}
