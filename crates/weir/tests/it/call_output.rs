//! `weir call`'s text output, as a person and a script see it (issue 24,
//! findings 2 and 3): a program's stdout and stderr byte for byte on
//! weir's stdout and stderr, redirected to files and on a terminal (a pty
//! from `script`), each byte once; code intelligence's items as
//! `path:line: context`, not JSON.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `weir serve --stdio --memory` (the exec tools on) as a `--stdio` command.
fn exec_server() -> String {
    format!("{WEIR} serve --stdio --memory")
}

/// `weir call … execute_code` of Python `code`, redirected to pipes.
fn call_python(code: &str) -> Output {
    Command::new(WEIR)
        .args(["call", "--stdio", &exec_server(), "execute_code"])
        .arg("--json")
        .arg(json!({"language": "python", "code": code}).to_string())
        .stdin(Stdio::null())
        .env_remove("WEIR_TOKEN")
        .output()
        .unwrap()
}

/// Python `code` run directly, as the program's own output.
fn python(code: &str) -> Output {
    Command::new("python3")
        .args(["-c", code])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// weir's stderr around the program's: the run's line first, the exit
/// summary last; returns the program's part.
fn programs_stderr(stderr: &str) -> &str {
    let (first, rest) = stderr.split_once('\n').expect("the run's line");
    let id = first
        .strip_prefix("run ")
        .and_then(|rest| rest.split_once(':'))
        .map(|(id, _)| id)
        .unwrap_or_else(|| panic!("no run line: {stderr:?}"));
    assert_eq!(first, format!("run {id}: weir runs tail {id}"));
    let summary = rest.trim_end_matches('\n');
    let at = summary.rfind("\n[exit code").map_or(0, |at| at + 1);
    assert!(
        summary[at..].starts_with("[exit code 0"),
        "no exit summary last: {stderr:?}"
    );
    &rest[..at]
}

/// Both streams, interleaved, with lines cut by pauses, text that is not
/// ASCII, and a last stdout line without its newline.
const INTERLEAVED: &str = r#"
import sys, time
for i in range(200):
    print(f"out {i} ünïcode ✓")
    if i % 50 == 0:
        print(f"err {i}", file=sys.stderr)
        sys.stdout.flush(); sys.stderr.flush()
        time.sleep(0.02)
sys.stdout.write("half a ")
sys.stdout.flush()
time.sleep(0.05)
sys.stdout.write("line\n")
sys.stderr.write("warning: last\n")
sys.stdout.write("no newline at the end")
"#;

/// Redirected to files: stdout is exactly what the program wrote, stderr
/// is what it wrote between weir's run line and exit summary; nothing is
/// printed twice.
#[test]
fn redirected_each_stream_holds_what_the_program_wrote_byte_for_byte() {
    let direct = python(INTERLEAVED);
    let output = call_python(INTERLEAVED);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&output.stdout), text(&direct.stdout));
    assert_eq!(programs_stderr(&stderr), text(&direct.stderr));
}

/// A million lines redirected to a file: the file is the program's
/// output, with no recap of it appended.
#[test]
fn a_million_lines_redirected_get_nothing_appended() {
    let code = "for i in range(1_000_000): print(i)";
    let output = call_python(code);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let expected: String = (0..1_000_000).map(|i| format!("{i}\n")).collect();
    assert!(
        output.stdout == expected.as_bytes(),
        "{} bytes, expected {}; ends {:?}",
        output.stdout.len(),
        expected.len(),
        text(&output.stdout[output.stdout.len().saturating_sub(200)..])
    );
}

/// `command` run by `script` on a pty, with `term` as TERM; what the
/// terminal received.
fn on_a_pty(command: &str, term: &str) -> Vec<u8> {
    let output = Command::new("script")
        .args(["-qefc", command, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env("TERM", term)
        .env("COLUMNS", "100")
        .env_remove("WEIR_TOKEN")
        .stdin(Stdio::null())
        .output()
        .expect("script (util-linux) runs the command on a pty");
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stdout));
    output.stdout
}

/// A program that takes a while (so that progress is reported), both
/// streams taking turns with pauses between, so that they reach the
/// terminal in one order however they travel.
const TURNS: &str = r#"
import sys, time
for i in range(12):
    print(f"out {i} ✓", flush=True)
    time.sleep(0.06)
    if i % 4 == 3:
        print(f"err {i}", file=sys.stderr, flush=True)
        time.sleep(0.06)
sys.stdout.write("a line in ")
sys.stdout.flush()
time.sleep(0.1)
print("two writes", flush=True)
"#;

/// Writes `code` and the `weir call` that runs it to `dir`; returns the
/// two shell commands (direct, through weir).
fn pty_commands(dir: &Path, code: &str) -> (String, String) {
    let program = dir.join("program.py");
    std::fs::write(&program, code).unwrap();
    let args = dir.join("args.json");
    std::fs::write(
        &args,
        json!({"language": "python", "code": code}).to_string(),
    )
    .unwrap();
    let direct = format!("exec python3 {}", program.display());
    let server = exec_server();
    let weir = format!(
        "exec {WEIR} call --stdio '{server}' execute_code --json \"$(cat {})\"",
        args.display()
    );
    (direct, weir)
}

/// On a terminal (no progress bar: TERM=dumb): the terminal gets the
/// program's bytes as the program run directly puts them there, between
/// weir's run line and its exit summary.
#[test]
fn on_a_pty_the_terminal_gets_what_the_program_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let (direct, weir) = pty_commands(dir.path(), TURNS);
    let direct = text(&on_a_pty(&direct, "dumb"));
    let through = text(&on_a_pty(&weir, "dumb"));
    let (first, rest) = through.split_once("\r\n").expect("the run's line");
    assert!(first.starts_with("run "), "{through:?}");
    let at = rest
        .rfind("[exit code 0")
        .unwrap_or_else(|| panic!("{through:?}"));
    assert_eq!(&rest[..at], direct);
    assert!(rest[at..].ends_with("]\r\n"), "{through:?}");
}

/// What a terminal shows after `bytes`: lines, after carriage returns
/// and erased lines (`ESC [2K`) did their work.
fn screen(bytes: &str) -> Vec<String> {
    let mut lines = vec![Vec::<char>::new()];
    let mut column = 0;
    let mut chars = bytes.chars().peekable();
    while let Some(c) = chars.next() {
        let line = lines.last_mut().unwrap();
        match c {
            '\r' => column = 0,
            '\n' => {
                lines.push(Vec::new());
                column = 0;
            }
            '\x1b' => {
                let sequence: String = chars.by_ref().take(3).collect();
                assert_eq!(sequence, "[2K", "an escape the bar does not use");
                line.clear();
            }
            c => {
                if column < line.len() {
                    line[column] = c;
                } else {
                    line.push(c);
                }
                column += 1;
            }
        }
    }
    lines
        .into_iter()
        .map(|line| line.into_iter().collect())
        .collect()
}

/// On a terminal with the progress bar: the bar is drawn while the
/// program runs, never over its output, and when the call ends the screen
/// shows the program's lines, whole, between weir's two.
#[test]
fn on_a_pty_the_progress_bar_never_covers_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let (direct, weir) = pty_commands(dir.path(), TURNS);
    let direct = screen(&text(&on_a_pty(&direct, "dumb")));
    let raw = text(&on_a_pty(&weir, "xterm"));
    assert!(raw.contains("\x1b[2K"), "no progress bar drawn: {raw:?}");
    let shown = screen(&raw);
    assert!(shown[0].starts_with("run "), "{shown:?}");
    let last = shown.len() - 2; // the screen ends with an empty line
    assert!(shown[last].starts_with("[exit code 0"), "{shown:?}");
    assert_eq!(shown[1..last], direct[..direct.len() - 1], "{raw:?}");
}

#[cfg(feature = "codeintel")]
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `weir call find_references` on the polyglot fixture, in `output` form.
#[cfg(feature = "codeintel")]
fn find_references(dir: &Path, output: &str) -> Output {
    let repo = dir.join("polyglot");
    let server = format!(
        "{WEIR} --data-dir {} serve --stdio --no-exec --no-critique --root {}",
        dir.join("data").display(),
        dir.display()
    );
    Command::new(WEIR)
        .args(["call", "--stdio", &server, "find_references", "--json"])
        .arg(json!({"repo": repo, "symbol": "area"}).to_string())
        .args(["--output", output])
        .stdin(Stdio::null())
        .env_remove("WEIR_TOKEN")
        .output()
        .unwrap()
}

/// Code intelligence in text: each item `path:line: context`, a blank
/// line between files, in the order the tool streamed them (read from the
/// same call's JSON lines); no JSON line among them.
#[cfg(feature = "codeintel")]
#[test]
fn find_references_in_text_reads_as_path_line_context_grouped_by_file() {
    let dir = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../packs/codeintel/tests/data/polyglot");
    copy_tree(&fixture, &dir.path().join("polyglot"));
    let jsonl = find_references(dir.path(), "jsonl");
    assert_eq!(jsonl.status.code(), Some(0), "{}", text(&jsonl.stderr));
    let mut expected = String::new();
    let mut last_group: Option<String> = None;
    for line in text(&jsonl.stdout).lines() {
        let line: serde_json::Value = serde_json::from_str(line).unwrap();
        if line["type"] != "partial" {
            continue;
        }
        let group = line["structured"]["group"].as_str().unwrap().to_owned();
        for item in line["structured"]["items"].as_array().unwrap() {
            let path = item["location"]["fileId"].as_str().unwrap();
            if last_group.as_ref() != Some(&group) {
                if last_group.is_some() {
                    expected.push('\n');
                }
                assert_eq!(path, group, "grouped by file");
                last_group = Some(group.clone());
            }
            let context = item["context"].as_str().unwrap().trim();
            let line = &item["location"]["startLine"];
            expected.push_str(&format!("{path}:{line}: {context}\n"));
        }
    }
    assert!(expected.lines().count() > 5, "{expected}");
    let output = find_references(dir.path(), "text");
    let shown = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(
        shown.starts_with(&expected),
        "{shown}\n---expected---\n{expected}"
    );
    // Then the headline alone (the result's listing repeats the items);
    // no item as JSON.
    let rest = &shown[expected.len()..];
    assert!(rest.starts_with("find_references \"area\""), "{rest}");
    assert_eq!(
        rest.lines().count(),
        1,
        "only the headline after the items: {rest}"
    );
    assert!(
        !shown.lines().any(|line| line.starts_with("{\"")),
        "a JSON line: {shown}"
    );
}

/// A model's tokens (llmstxt_generate with a model endpoint; here the
/// project's fake, each answer in several deltas) are joined as text:
/// each answer reads whole on its line, not a token per line, and is not
/// printed again after the stream.
#[cfg(feature = "llmstxt")]
#[test]
fn a_models_tokens_are_joined_as_text() {
    use weir_fake_model::{FakeModel, Script, Streaming, Turn};
    let answers = [
        "Tally counts the words of text files.",
        "How to run tally on a file.",
        "The license it ships under.",
    ];
    let streaming = Streaming {
        deltas: 6,
        delay_ms: 5,
        ..Streaming::default()
    };
    // The fake serves on a runtime of its own while the test waits.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _entered = runtime.enter();
    let fake = FakeModel::start(Script::new(
        answers
            .iter()
            .map(|answer| Turn::text(*answer).streamed(streaming.clone())),
    ))
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("tally");
    for (path, text) in [
        ("README.md", "# Tally\n\nTally counts words.\n"),
        ("docs/usage.md", "# Usage\n\nRun `tally FILE`.\n"),
        ("LICENSE", "MIT License\n"),
    ] {
        let path = repo.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let server = format!(
        "{WEIR} serve --stdio --memory --no-exec --no-critique --root {} --llm-endpoint {}/v1 --llm-model fake",
        dir.path().display(),
        fake.url()
    );
    let output = Command::new(WEIR)
        .args(["call", "--stdio", &server, "llmstxt_generate", "--json"])
        .arg(json!({"source": repo, "max_model_links": 2}).to_string())
        .stdin(Stdio::null())
        .env_remove("WEIR_TOKEN")
        .env_remove("WEIR_LLM_ENDPOINT")
        .env_remove("WEIR_LLM_MODEL")
        .output()
        .unwrap();
    let shown = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    // The stream, then the document it wrote (which quotes the answers).
    let (stream, document) = shown
        .split_once("# Tally\n")
        .unwrap_or_else(|| panic!("no document: {shown}"));
    assert!(document.contains(answers[0]), "{document}");
    let lines: Vec<&str> = stream.lines().collect();
    assert_eq!(
        lines.len(),
        answers.len(),
        "one line per answer: {stream:?}"
    );
    for (line, answer) in lines.iter().zip(answers) {
        let (label, said) = line.split_once(": ").unwrap_or_else(|| panic!("{line:?}"));
        assert!(!label.is_empty() && said == answer, "{line:?}");
    }
}

/// On a terminal the progress bar shows the newest report, not the one
/// before it (issue 24 finding 10): a program that prints five lines
/// quickly and then goes quiet leaves the bar saying its fifth line while
/// it is quiet, though that report came sooner than the bar redraws.
#[test]
fn on_a_pty_the_progress_bar_shows_the_newest_line_while_the_program_is_quiet() {
    const QUIET: &str = "import time\nfor i in range(1, 6):\n    print(f'step {i}', flush=True)\n    time.sleep(0.02)\ntime.sleep(1.5)\n";
    let dir = tempfile::tempdir().unwrap();
    let (_, weir) = pty_commands(dir.path(), QUIET);
    let raw = text(&on_a_pty(&weir, "xterm"));
    let quiet = &raw[..raw
        .find("[exit code 0")
        .unwrap_or_else(|| panic!("{raw:?}"))];
    // Every drawing of the bar follows an erase; the last one before the
    // exit summary is what the terminal showed while the program was quiet.
    let bar = quiet
        .rsplit("\x1b[2K")
        .find(|drawn| drawn.contains("running"))
        .unwrap_or_else(|| panic!("no bar drawn: {raw:?}"));
    assert!(
        bar.contains(" 5 ") && bar.contains("step 5"),
        "while the program was quiet the bar said {bar:?}: {raw:?}"
    );
}

/// A program that writes past execute_code's output cap: weir's notice
/// reaches stderr once, saying `weir:` once (issue 24 finding 10: the
/// tool's warning repeated it as `[warning] weir: weir: output limit …`).
#[test]
fn the_output_cap_is_said_once_with_one_weir_prefix() {
    let code = "import sys\nsys.stdout.write('x' * (17 << 20))\n";
    let output = call_python(code);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(output.stdout.len(), 16 << 20, "the cap's worth on stdout");
    assert!(!stderr.contains("weir: weir:"), "{stderr}");
    assert_eq!(stderr.matches("output limit").count(), 1, "{stderr}");
    assert!(
        stderr.contains("[weir: output limit of 16777216 bytes reached;"),
        "{stderr}"
    );
}
