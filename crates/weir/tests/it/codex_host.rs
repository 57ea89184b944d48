//! Issue 24, finding 9: the real Codex CLI (pinned in tests/agent-clis,
//! installed by scripts/agent-clis) as the MCP host of `weir serve
//! --stdio`, headless (`codex exec`, approval policy `never`), fully offline
//! against `weir-fake-model`, with the `[mcp_servers.weir]` table of the
//! documentation's Codex config as written (read from README.md, else
//! docs/; `command = "weir"` finds the test's weir first on PATH, through a
//! script that copies what goes in and out, as hosts.rs does).
//!
//! Codex defers MCP tools: its first request offers the model none of
//! weir's tools, only its own `tool_search`. The scripted model searches
//! (a `tool_search_call` codex runs itself, answering with the
//! `mcp__weir` namespace), then calls tools of that namespace (a
//! `function_call` with `namespace: "mcp__weir"`), then answers. The tests
//! check both sides: the `tools/call`s weir got (with codex's progress
//! token) and the progress it sent, and what codex handed its model in the
//! next request — weir's own answer, the JSON of `structuredContent` (codex
//! passes that instead of `content`, as Claude Code does), for a program
//! whose output the test computes.
//!
//! Codex 0.169.0 decides by a tool's hints whether a call needs approval
//! (its `auto` mode; [`codex_asks`]): a destructive tool always, a
//! read-only one never, any other unless it says it is neither destructive
//! nor open-world. Headless, a call that needs approval is refused ("MCP
//! tool call requires approval, but approval policy is never") and never
//! reaches the server. The documented `default_tools_approval_mode =
//! "approve"` lets every weir tool through; without it, `runs_cancel`
//! (destructive) is refused while `list_languages` (read-only) runs.
//!
//! Like hosts.rs: no environment but PATH, a private HOME and TMPDIR
//! (weir's data directory is the default one under that HOME), stdin
//! `/dev/null`, the CLI's process group killed when it ends, nothing of the
//! test left running. These tests never skip; they run in nextest's
//! `agent-clis` group, one at a time.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use weir_fake_model::agent_clis::{self, CliRun, of_type, run_to_end};
use weir_fake_model::{FakeModel, RecordedRequest, Script, Turn};

use crate::hosts::Scene;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");
/// The namespace codex puts the server `weir`'s tools in.
const NAMESPACE: &str = "mcp__weir";
/// The line that approves every weir tool for headless codex.
const APPROVAL: &str = r#"default_tools_approval_mode = "approve""#;
/// A run that does not exist, for `runs_cancel`.
const NO_RUN: &str = "01a2000000000000000000000000beef";

/// The `[mcp_servers.weir]` table of the first TOML block that has one in
/// README.md, else in docs/*.md: the documented Codex config, as written.
fn documented_server_table() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .into_iter()
        .flatten()
        .filter_map(|entry| Some(entry.ok()?.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for block in text.split("```toml\n").skip(1) {
            let block = block.split("```").next().unwrap_or_default();
            let mut lines = block
                .lines()
                .skip_while(|l| l.trim() != "[mcp_servers.weir]");
            let Some(header) = lines.next() else { continue };
            let body: Vec<&str> = lines.take_while(|l| !l.starts_with('[')).collect();
            return format!("{header}\n{}\n", body.join("\n"));
        }
    }
    panic!("no TOML block with [mcp_servers.weir] in {files:?}: where is the Codex config?");
}

/// The program the model runs: three sums of powers, 200 ms apart, of a
/// bound that changes from run to run.
fn program(n: u64) -> String {
    format!(
        "import time\nn = {n}\nfor k in (1, 2, 3):\n    \
         print(f'sum of i**{{k}} below {{n}}: {{sum(i**k for i in range(n))}}', flush=True)\n    \
         time.sleep(0.2)\n"
    )
}

/// What [`program`] prints, computed here.
fn printed(n: u64) -> Vec<String> {
    (1..=3u32)
        .map(|k| {
            let sum: u64 = (0..n).map(|i| i.pow(k)).sum();
            format!("sum of i**{k} below {n}: {sum}")
        })
        .collect()
}

/// A bound between 1000 and 1999 that differs between runs.
fn bound() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    1000 + u64::from(nanos % 1000)
}

/// What the model does: search codex's tools, call three of weir's, answer.
fn script(n: u64) -> Script {
    Script::new([
        Turn::ToolSearch {
            query: "run a program, list the languages, cancel a run".into(),
            limit: Some(50),
        },
        Turn::namespaced_call(
            NAMESPACE,
            "execute_code",
            json!({"language": "python", "code": program(n)}),
        ),
        Turn::namespaced_call(NAMESPACE, "list_languages", json!({})),
        Turn::namespaced_call(NAMESPACE, "runs_cancel", json!({"run_id": NO_RUN})),
        Turn::text("Done."),
    ])
}

/// What one codex run left behind.
struct Hosted {
    /// Kept to the end of the test: its directories, and on drop whatever
    /// it left running is killed.
    _scene: Scene,
    run: CliRun,
    requests: Vec<RecordedRequest>,
    /// What codex wrote to weir.
    sent: Vec<Value>,
    /// What weir wrote to codex.
    received: Vec<Value>,
}

/// Runs `codex exec` with `server_table` as its `[mcp_servers.weir]`, the
/// model playing [`script`].
async fn host(server_table: &str, n: u64) -> Hosted {
    let scene = Scene::new();
    let fake = FakeModel::start(script(n)).expect("start the fake model");
    // `weir` on PATH: the test's binary, what passes copied.
    let bin = scene.root.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let shim = bin.join("weir");
    std::fs::write(
        &shim,
        format!(
            "#!/bin/sh\ntee '{}' | '{WEIR}' \"$@\" | tee '{}'\n",
            scene.sent.display(),
            scene.received.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let env = agent_clis::point_at("codex", &fake, &scene.home, &scene.tmp);
    let config = scene.home.join(".codex/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push('\n');
    text.push_str(server_table);
    std::fs::write(&config, text).unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    let mut command = scene.command("codex");
    command
        .envs(env)
        .env("PATH", format!("{}:{path}", bin.display()))
        .args(["exec", "--json", "--skip-git-repo-check", "-m", "gpt-5.5"])
        .arg("run the program, list the languages, cancel the run");
    let run = run_to_end(command, "codex", &fake).await;
    scene.assert_nothing_left();
    let requests = fake.requests();
    let sent = Scene::messages(&scene.sent);
    let received = Scene::messages(&scene.received);
    Hosted {
        _scene: scene,
        run,
        requests,
        sent,
        received,
    }
}

impl Hosted {
    /// The annotations weir listed for `tool`.
    fn annotations(&self, tool: &str) -> Value {
        self.received
            .iter()
            .filter_map(|message| message["result"]["tools"].as_array())
            .flatten()
            .find(|listed| listed["name"] == tool)
            .unwrap_or_else(|| panic!("weir never listed {tool}: {:#?}", self.received))
            ["annotations"]
            .clone()
    }

    /// codex's `tools/call` of `tool` and weir's answer to it, if it made one.
    fn weir_call(&self, tool: &str) -> Option<(&Value, &Value)> {
        let call = self
            .sent
            .iter()
            .find(|m| m["method"] == "tools/call" && m["params"]["name"] == tool)?;
        let answer = self
            .received
            .iter()
            .find(|m| m["id"] == call["id"] && m["method"].is_null())
            .unwrap_or_else(|| panic!("weir never answered {call}: {:#?}", self.received));
        Some((call, answer))
    }

    /// The text codex handed its model as `tool`'s output: the
    /// `function_call_output` for the model's call of `tool` in the
    /// `mcp__weir` namespace, in the request after it.
    fn model_got(&self, tool: &str) -> String {
        for request in &self.requests {
            let input = request.body["input"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let Some(call) = input.iter().find(|item| {
                item["type"] == "function_call"
                    && item["namespace"] == NAMESPACE
                    && item["name"] == tool
            }) else {
                continue;
            };
            let output = input
                .iter()
                .find(|item| {
                    item["type"] == "function_call_output" && item["call_id"] == call["call_id"]
                })
                .unwrap_or_else(|| panic!("no output for {call} in {:#}", request.body));
            return match &output["output"] {
                Value::String(text) => text.clone(),
                parts => parts
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|part| part["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
            };
        }
        panic!(
            "the model's call of {tool} never came back to it: {:#?}",
            self.requests
        )
    }
}

/// Whether Codex 0.169.0, in its default (`auto`) approval mode, asks
/// before calling a tool with these hints: a destructive tool always, a
/// read-only one never, any other unless it is neither destructive nor
/// open-world (MCP's defaults for an absent hint: destructive, open-world).
fn codex_asks(hints: &Value) -> bool {
    let hint = |name: &str| hints[name].as_bool();
    if hint("destructiveHint") == Some(true) {
        return true;
    }
    if hint("readOnlyHint") == Some(true) {
        return false;
    }
    hint("destructiveHint").unwrap_or(true) || hint("openWorldHint").unwrap_or(true)
}

/// The JSON codex put after "Output:" (the text of `structuredContent`).
fn output_json(seen: &str) -> Value {
    let json = seen
        .split_once("Output:\n")
        .map(|(_, json)| json)
        .unwrap_or_else(|| panic!("no Output: in what the model got: {seen}"));
    serde_json::from_str(json)
        .unwrap_or_else(|error| panic!("the model got no JSON ({error}): {seen}"))
}

/// The model got weir's answer to `tool` as weir sent it: the JSON of its
/// `structuredContent` when it has one, else every text block.
fn assert_model_got_weirs_answer(hosted: &Hosted, tool: &str) -> Value {
    let (_, answer) = hosted
        .weir_call(tool)
        .unwrap_or_else(|| panic!("codex never called {tool}: {:#?}", hosted.sent));
    let result = &answer["result"];
    let seen = hosted.model_got(tool);
    if result["structuredContent"].is_object() {
        assert_eq!(
            output_json(&seen),
            result["structuredContent"],
            "the model's {tool} output is not weir's"
        );
    } else {
        for block in result["content"].as_array().unwrap() {
            let text = block["text"].as_str().unwrap();
            assert!(
                seen.contains(text),
                "the model's {tool} output lacks {text:?}: {seen}"
            );
        }
    }
    result.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_with_the_documented_config_finds_weir_by_tool_search_and_hands_its_model_weirs_output()
 {
    let table = documented_server_table();
    assert!(
        table.contains(r#"command = "weir""#) && table.contains(APPROVAL),
        "the documented [mcp_servers.weir] lacks the command or the approval line:\n{table}"
    );
    let n = bound();
    let hosted = host(&table, n).await;
    let requests = &hosted.requests;
    assert_eq!(
        requests.len(),
        5,
        "one request per model turn: {requests:#?}"
    );

    // Deferred: the first request offers codex's tool search, none of weir's.
    let offered: Vec<&Value> = requests[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert!(
        offered.iter().any(|tool| tool["type"] == "tool_search"),
        "{offered:#?}"
    );
    assert!(
        !offered
            .iter()
            .any(|tool| tool["name"] == NAMESPACE || tool.to_string().contains("execute_code")),
        "codex offered weir's tools without a search: {offered:#?}"
    );
    let input = requests[0].body["input"].to_string();
    eprintln!(
        "codex's first request names the namespace {NAMESPACE} in its input: {}",
        input.contains(NAMESPACE)
    );
    // The search's answer: the namespace, with the tools the model calls.
    let found = requests[1].body["input"]
        .as_array()
        .unwrap()
        .iter()
        .find(|item| item["type"] == "tool_search_output")
        .unwrap_or_else(|| panic!("no tool_search_output in {:#}", requests[1].body));
    let namespace = found["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["type"] == "namespace" && tool["name"] == NAMESPACE)
        .unwrap_or_else(|| panic!("the search found no {NAMESPACE}: {found:#}"));
    let names: Vec<&str> = namespace["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    for tool in ["execute_code", "list_languages", "runs_cancel"] {
        assert!(
            names.contains(&tool),
            "the search did not load {tool}: {names:?}"
        );
    }

    // execute_code: the program's output, computed here, reached the model.
    let result = assert_model_got_weirs_answer(&hosted, "execute_code");
    let expected = printed(n).join("\n") + "\n";
    assert_eq!(result["structuredContent"]["stdout"], expected.as_str());
    assert_eq!(result["structuredContent"]["exit_code"], 0);
    assert_eq!(result["isError"], Value::Null, "{result}");

    // Codex sent a progress token, and weir named the printed lines in
    // progress notifications before the result.
    let (call, _) = hosted.weir_call("execute_code").unwrap();
    let token = &call["params"]["_meta"]["progressToken"];
    assert!(
        token.is_number() || token.is_string(),
        "no progress token: {call}"
    );
    let answered = hosted
        .received
        .iter()
        .position(|m| m["id"] == call["id"] && m["method"].is_null())
        .unwrap();
    let progress: Vec<&Value> = hosted.received[..answered]
        .iter()
        .filter(|m| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == *token
        })
        .map(|m| &m["params"])
        .collect();
    assert!(!progress.is_empty(), "weir sent no progress for the call");
    let lines = printed(n);
    for params in &progress {
        let message = params["message"].as_str().unwrap_or_default();
        assert!(
            lines.iter().any(|line| message.contains(line.as_str())),
            "a progress message names no printed line: {params}"
        );
    }

    // list_languages (read-only) and runs_cancel (destructive) both reach
    // weir, approved; the model gets weir's answers, runs_cancel's error
    // included.
    let languages = assert_model_got_weirs_answer(&hosted, "list_languages");
    assert!(
        languages["structuredContent"]["languages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|language| language["name"] == "python"),
        "{languages}"
    );
    let cancel = assert_model_got_weirs_answer(&hosted, "runs_cancel");
    assert_eq!(cancel["isError"], true, "{cancel}");
    assert!(cancel.to_string().contains(NO_RUN), "{cancel}");

    // Codex's own account: three MCP calls of the server weir, then the answer.
    let items: Vec<&Value> = of_type(&hosted.run.lines, "item.completed")
        .into_iter()
        .map(|line| &line["item"])
        .collect();
    let calls: Vec<(&str, &str)> = items
        .iter()
        .filter(|item| item["type"] == "mcp_tool_call")
        .map(|item| {
            assert_eq!(item["server"], "weir", "{item}");
            (
                item["tool"].as_str().unwrap(),
                item["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    eprintln!(
        "codex's MCP calls: {calls:?}; progress notifications: {}",
        progress.len()
    );
    let tools: Vec<&str> = calls.iter().map(|(tool, _)| *tool).collect();
    assert_eq!(tools, ["execute_code", "list_languages", "runs_cancel"]);
    assert_eq!(calls[0].1, "completed");
    assert_eq!(calls[1].1, "completed");
    let answer = items
        .iter()
        .rfind(|item| item["type"] == "agent_message")
        .unwrap();
    assert_eq!(answer["text"], "Done.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_without_the_approval_line_refuses_a_destructive_tool_and_runs_a_read_only_one() {
    let table = documented_server_table();
    assert!(table.contains(APPROVAL), "{table}");
    let without: String = table
        .lines()
        .filter(|line| line.trim() != APPROVAL)
        .map(|line| format!("{line}\n"))
        .collect();
    let hosted = host(&without, bound()).await;

    // The hints that decide it, as weir listed them.
    let cancel = hosted.annotations("runs_cancel");
    assert_eq!(cancel["destructiveHint"], true, "{cancel}");
    assert_eq!(hosted.annotations("list_languages")["readOnlyHint"], true);

    for tool in ["execute_code", "list_languages", "runs_cancel"] {
        let hints = hosted.annotations(tool);
        let seen = hosted.model_got(tool);
        if codex_asks(&hints) {
            assert!(
                hosted.weir_call(tool).is_none(),
                "codex called {tool} ({hints}) without approval"
            );
            assert!(
                seen.contains("requires approval, but approval policy is never"),
                "the model was not told {tool} was refused: {seen}"
            );
        } else {
            assert_model_got_weirs_answer(&hosted, tool);
        }
        eprintln!(
            "{tool} {hints}: {}",
            if codex_asks(&hints) { "refused" } else { "ran" }
        );
    }
    assert!(codex_asks(&cancel));
    let items: Vec<&Value> = of_type(&hosted.run.lines, "item.completed")
        .into_iter()
        .map(|line| &line["item"])
        .filter(|item| item["type"] == "mcp_tool_call" && item["tool"] == "runs_cancel")
        .collect();
    assert_eq!(items.len(), 1, "{:#?}", hosted.run.lines);
    assert_eq!(items[0]["status"], "failed", "{}", items[0]);
}
