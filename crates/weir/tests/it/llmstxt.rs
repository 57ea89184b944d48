//! llmstxt_generate through the real binary: `weir serve --http` with the
//! real small model (SmolLM2-135M, run by node-llama-cpp behind the
//! OpenAI-compatible server of crates/testkit/llm-server, installed by
//! scripts/llm-model), called with `weir call`: the model's tokens arrive
//! as partial results before the result, and the three files it writes are
//! valid by llmstxt_validate. Without an endpoint: a valid, marked
//! fallback. The model is too weak to judge its prose; the stream and the
//! files' validity are what is checked.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// A process killed on drop.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `command` and returns it with the first stdout or stderr line
/// containing `marker`'s word starting with `http://`.
fn start_until_url(mut command: Command, marker: &str, from_stderr: bool) -> (Killed, String) {
    if from_stderr {
        command.stderr(Stdio::piped()).stdout(Stdio::null());
    } else {
        command.stdout(Stdio::piped()).stderr(Stdio::inherit());
    }
    let mut child = command.stdin(Stdio::null()).spawn().unwrap();
    let stream: Box<dyn std::io::Read + Send> = if from_stderr {
        Box::new(child.stderr.take().unwrap())
    } else {
        Box::new(child.stdout.take().unwrap())
    };
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let _ = sender.send(line);
        }
    });
    let child = Killed(child);
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("no {marker:?} line within 120 s"));
        if line.contains(marker) {
            let url = line
                .split_whitespace()
                .find(|w| w.starts_with("http://"))
                .unwrap();
            // Keep draining, so the process never blocks on a full pipe.
            std::thread::spawn(move || lines.iter().for_each(drop));
            return (child, url.to_owned());
        }
    }
}

/// The real model's server on a free port.
fn model_server() -> (Killed, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/llm-model");
    let output = Command::new(script).output().unwrap();
    assert!(
        output.status.success(),
        "scripts/llm-model: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dir = PathBuf::from(String::from_utf8(output.stdout).unwrap().trim());
    let mut node = Command::new("node");
    node.arg(dir.join("server.mjs"))
        .args(["--model"])
        .arg(dir.join("model.gguf"))
        .args(["--port", "0", "--threads", "2"]);
    start_until_url(node, "listening", false)
}

/// `weir serve --http` in memory, with `extra` arguments; the temporary
/// directory, where the repositories are made, is its root.
fn weir_server(extra: &[&str]) -> (Killed, String) {
    let mut command = Command::new(WEIR);
    command
        .args(["serve", "--http", "127.0.0.1:0", "--memory", "--no-exec"])
        .arg("--root")
        .arg(std::env::temp_dir())
        .args(extra)
        .env_remove("WEIR_TOKEN")
        .env_remove("WEIR_LLM_ENDPOINT")
        .env_remove("WEIR_LLM_MODEL");
    start_until_url(command, "serving MCP at", true)
}

/// A small repository to describe.
fn fixture(dir: &Path) {
    for (path, text) in [
        (
            "README.md",
            "# Tally\n\nTally counts words in text files and prints the totals.\n",
        ),
        (
            "docs/usage.md",
            "# Usage\n\nRun `tally FILE` to count the words of FILE.\n",
        ),
        (
            "Cargo.toml",
            "[package]\nname = \"tally\"\ndescription = \"Counts words.\"\n",
        ),
        ("LICENSE", "MIT License\n"),
    ] {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

/// `weir call --url URL --output jsonl …`: every line, with when it was read.
fn call(url: &str, args: &[&str]) -> Vec<(Instant, Value)> {
    let mut child = Command::new(WEIR)
        .args(["call", "--url", url, "--output", "jsonl"])
        .args(args)
        .env_remove("WEIR_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let lines: Vec<(Instant, Value)> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map(|line| {
            (
                Instant::now(),
                serde_json::from_str(&line.unwrap()).unwrap(),
            )
        })
        .collect();
    assert!(
        child.wait().unwrap().success(),
        "weir call {args:?}: {lines:?}"
    );
    lines
}

fn result(lines: &[(Instant, Value)]) -> &Value {
    let (_, last) = lines.last().unwrap();
    assert_eq!(last["type"], "result", "{last}");
    assert_eq!(last["is_error"], false, "{last}");
    &last["structured"]
}

/// Reads each artifact of a finished generation back with runs_artifact
/// and checks it with llmstxt_validate; returns llms.txt.
fn check_artifacts(url: &str, generated: &Value) -> String {
    let uri = generated["artifacts"][0]["uri"].as_str().unwrap();
    let run_id = uri
        .strip_prefix("weir://runs/")
        .unwrap()
        .split('/')
        .next()
        .unwrap();
    let mut llms = String::new();
    for name in ["llms.txt", "llms-full.txt", "llms-ctx.txt"] {
        let read = call(
            url,
            &[
                "runs_artifact",
                &format!("run_id={run_id}"),
                &format!("name={name}"),
                "length=262144",
            ],
        );
        let page = result(&read);
        assert_eq!(page["done"], true);
        let text = page["data"]["text"].as_str().unwrap().to_owned();
        let checked = call(
            url,
            &[
                "llmstxt_validate",
                "--json",
                &serde_json::json!({"text": text, "format": name}).to_string(),
            ],
        );
        let verdict = result(&checked);
        assert_eq!(verdict["valid"], true, "{name}: {verdict}\n{text}");
        if name == "llms.txt" {
            llms = text;
        }
    }
    llms
}

#[test]
fn with_the_real_model_tokens_stream_live_and_three_valid_files_are_written() {
    let (_model, endpoint) = model_server();
    let (_weir, url) = weir_server(&["--llm-endpoint", &endpoint, "--llm-model", "smollm2"]);
    let repo = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let lines = call(
        &url,
        &[
            "llmstxt_generate",
            &format!("source={}", repo.path().display()),
            "max_model_links=2",
        ],
    );
    let generated = result(&lines).clone();
    assert_ne!(generated["mode"], "fallback", "{generated}");
    assert!(
        generated["model"]["tokens"].as_u64().unwrap() > 0,
        "{generated}"
    );
    assert_eq!(generated["model"]["calls"], 3, "the summary and two notes");
    // A token of the model, as a partial result, well before the result.
    let (token_at, _) = lines
        .iter()
        .find(|(_, line)| {
            line["type"] == "partial"
                && line["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| !t.is_empty() && !t.ends_with(": "))
        })
        .expect("a model token arrives as a partial result");
    let (result_at, _) = lines.last().unwrap();
    assert!(*result_at > *token_at, "the token came before the result");
    let progress: Vec<&str> = lines
        .iter()
        .filter(|(_, line)| line["type"] == "progress")
        .filter_map(|(_, line)| line["message"].as_str())
        .collect();
    assert!(
        progress.iter().any(|m| m.starts_with("gathered")),
        "{progress:?}"
    );
    assert!(
        progress.iter().any(|m| m.starts_with("written")),
        "{progress:?}"
    );
    let llms = check_artifacts(&url, &generated);
    assert!(llms.starts_with("# tally\n\n> "), "{llms}");
    assert!(!llms.contains("fallback path"), "{llms}");
}

#[test]
fn without_an_endpoint_a_valid_fallback_is_written_and_marked() {
    let (_weir, url) = weir_server(&[]);
    let repo = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let lines = call(
        &url,
        &[
            "llmstxt_generate",
            &format!("source={}", repo.path().display()),
        ],
    );
    let generated = result(&lines).clone();
    assert_eq!(generated["mode"], "fallback");
    assert_eq!(generated["summary"], "Counts words.");
    let llms = check_artifacts(&url, &generated);
    assert!(
        llms.contains("<!-- Generated via fallback path (no model): no model is configured"),
        "{llms}"
    );
    assert!(
        llms.contains("- [Usage](docs/usage.md): Run tally FILE to count the words of FILE.\n"),
        "{llms}"
    );
}

/// `weir llmstxt ARGS` with no model configured: exit code, stdout, stderr.
fn weir_llmstxt(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let output = Command::new(WEIR)
        .arg("llmstxt")
        .args(args)
        .env_remove("WEIR_LLM_ENDPOINT")
        .env_remove("WEIR_LLM_MODEL")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Issue 24 finding 8: `weir llmstxt .` on this very repository, without
/// a model, is a file worth publishing: named after the project (not its
/// directory), no benchmark results or lock files linked, the security
/// policy kept, an Optional section, what was left out named, and valid
/// by llmstxt_validate.
#[test]
fn weir_llmstxt_on_this_repository_is_worth_publishing() {
    let repo = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let (code, llms, stderr) = weir_llmstxt(&[repo.as_os_str()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(llms.starts_with("# weir\n\n> "), "{llms}");
    let links: Vec<&str> = llms
        .lines()
        .filter_map(|line| line.strip_prefix("- ["))
        .filter_map(|line| line.split_once("](")?.1.split_once(')'))
        .map(|(url, _)| url)
        .collect();
    assert!(links.len() >= 5, "{llms}");
    for url in &links {
        assert!(
            !url.contains("/results/")
                && !url.ends_with(".lock")
                && !url.ends_with("package-lock.json"),
            "{url} is generated, a result or a lock file:\n{llms}"
        );
    }
    for kept in [
        "README.md",
        "ARCHITECTURE.md",
        "SECURITY.md",
        "docs/design.md",
    ] {
        assert!(links.contains(&kept), "{kept} left out:\n{llms}");
    }
    assert!(llms.contains("\n## Optional\n"), "{llms}");
    // No note says only its own path.
    for line in llms.lines().filter(|line| line.starts_with("- [")) {
        if let Some((link, note)) = line.split_once("): ") {
            let url = link.rsplit_once("](").unwrap().1;
            assert!(!note.contains(url), "a note that repeats its path: {line}");
        }
    }
    // What was left out is named, on stderr; stdout is the file alone.
    assert!(
        stderr.contains("Left out")
            && stderr.contains("lock file: ")
            && stderr.contains("Cargo.lock"),
        "{stderr}"
    );
    assert!(stderr.contains("generated or results: bench/"), "{stderr}");
    // And it validates.
    let checked = Command::new(WEIR)
        .args([
            "call",
            "--stdio",
            "weir serve --stdio --memory --no-exec --no-critique",
            "llmstxt_validate",
            "--output",
            "jsonl",
            "--json",
        ])
        .arg(serde_json::json!({ "text": llms }).to_string())
        .env_remove("WEIR_TOKEN")
        .env(
            "PATH",
            format!(
                "{}:{}",
                Path::new(WEIR).parent().unwrap().display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    let verdict: Value = stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|line| line["type"] == "result")
        .unwrap_or_else(|| panic!("no result: {stdout}"));
    assert_eq!(verdict["structured"]["valid"], true, "{verdict:#}");
}

/// Issue 24 finding 8: the files go into the repository itself, never
/// over one already there unless asked: `weir llmstxt DIR --write`
/// refuses a present llms.txt, naming it, and writes nothing;
/// `--overwrite` replaces it; `llmstxt_generate {write: true}` through a
/// server does the same.
#[test]
fn write_puts_the_files_in_the_repository_and_never_overwrites_unasked() {
    let repo = tempfile::tempdir().unwrap();
    fixture(repo.path());
    let present = repo.path().join("llms.txt");
    std::fs::write(&present, "mine\n").unwrap();
    let (code, stdout, stderr) = weir_llmstxt(&[repo.path().as_os_str(), "--write".as_ref()]);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains(&format!("{} already exists", present.display()))
            && stderr.contains("overwrite"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&present).unwrap(), "mine\n");
    assert!(!repo.path().join("llms-full.txt").exists());

    let (code, stdout, stderr) = weir_llmstxt(&[
        repo.path().as_os_str(),
        "--write".as_ref(),
        "--overwrite".as_ref(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.is_empty(), "written, not printed: {stdout}");
    let written = std::fs::read_to_string(&present).unwrap();
    assert!(
        written.starts_with("# tally\n\n> Counts words."),
        "{written}"
    );
    for name in ["llms-full.txt", "llms-ctx.txt"] {
        assert!(repo.path().join(name).is_file(), "{name}");
    }

    // The same through a server: refused while a file is there...
    let (_weir, url) = weir_server(&[]);
    let source = format!("source={}", repo.path().display());
    let output = Command::new(WEIR)
        .args([
            "call",
            "--url",
            &url,
            "--output",
            "jsonl",
            "llmstxt_generate",
            &source,
            "write=true",
        ])
        .env_remove("WEIR_TOKEN")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let refused = String::from_utf8_lossy(&output.stdout);
    assert!(
        refused.contains("llms.txt already exists") && refused.contains("overwrite: true"),
        "{refused}"
    );
    // ...and written into a fresh one.
    let fresh = tempfile::tempdir().unwrap();
    fixture(fresh.path());
    let lines = call(
        &url,
        &[
            "llmstxt_generate",
            &format!("source={}", fresh.path().display()),
            "write=true",
        ],
    );
    let generated = result(&lines);
    assert_eq!(
        generated["written"].as_array().unwrap().len(),
        3,
        "{generated}"
    );
    assert_eq!(
        std::fs::read_to_string(fresh.path().join("llms.txt")).unwrap(),
        generated["llms_txt"].as_str().unwrap()
    );
}
