//! Issue 24 finding 6: the README is a front door, and the examples of the
//! README and docs/ cannot rot.
//!
//! - Every shell block fenced ` ```sh runnable ` in README.md or docs/*.md
//!   runs through the real binary (`weir` on `PATH`), with `sh -e`, in a
//!   fresh directory with its own `HOME` and data directory, within a time
//!   limit; a failing block is named by file and line. No marked block at
//!   all is a failure too, so the test cannot pass empty.
//! - README.md stays under 300 lines, gives the test command and names
//!   every command `weir --help` (and `weir runs --help`, `weir plan
//!   --help`) lists.
//! - Every relative link of those pages leads to a file, and to a heading
//!   of it when it names one.
//!
//! The convention is documented in docs/development.md, "Examples that run".

use std::collections::HashSet;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const WEIR: &str = env!("CARGO_BIN_EXE_weir");

/// Most time one block may take: the slowest runs a handful of calls,
/// each a server started and stopped.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The fence that marks a block to run.
const MARK: &str = "```sh runnable";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// README.md and docs/*.md, as (path from the root, text), in a fixed order.
fn pages() -> Vec<(String, String)> {
    let mut names = vec!["README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("read docs/")
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    names.extend(docs);
    names
        .into_iter()
        .map(|name| {
            let text = std::fs::read_to_string(root().join(&name)).expect("read a page");
            (name, text)
        })
        .collect()
}

/// A block to run: where its fence is, and its lines.
#[derive(Debug)]
struct Example {
    /// `docs/exec.md:21`: the page and the line of the opening fence.
    place: String,
    script: String,
}

/// The blocks of `text` fenced ` ```sh runnable `. Panics on one left open.
fn runnable_examples(file: &str, text: &str) -> Vec<Example> {
    let mut examples = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, line)) = lines.next() {
        if line.trim_end() != MARK {
            continue;
        }
        let mut script = String::new();
        let closed = lines.by_ref().any(|(_, line)| {
            let end = line.trim() == "```";
            if !end {
                script.push_str(line);
                script.push('\n');
            }
            end
        });
        let place = format!("{file}:{}", index + 1);
        assert!(
            closed,
            "{place}: a runnable block without its closing fence"
        );
        examples.push(Example { place, script });
    }
    examples
}

/// Runs one block as a user would, in a fresh directory with its own home
/// and data directory; Err names the block's place and says what it printed.
fn run(example: &Example) -> Result<Duration, String> {
    let scratch = tempfile::tempdir().unwrap();
    let home = scratch.path().join("home");
    let work = scratch.path().join("work");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let out_path = scratch.path().join("stdout");
    let err_path = scratch.path().join("stderr");
    let weir_dir = Path::new(WEIR).parent().unwrap();
    let path = format!(
        "{}:{}",
        weir_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = Command::new("sh");
    command
        .args(["-e", "-c", &example.script])
        .current_dir(&work)
        .env("PATH", path)
        .env("HOME", &home)
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).unwrap())
        .stderr(File::create(&err_path).unwrap())
        .process_group(0);
    // Nothing of weir's own configuration from the environment the tests
    // run in: a reader's shell has none either.
    for (key, _) in std::env::vars() {
        if key.starts_with("WEIR_") {
            command.env_remove(key);
        }
    }
    let started = Instant::now();
    let mut child = command.spawn().expect("spawn sh");
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > TIMEOUT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Whatever the block left running goes with it (its process group).
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stderr(Stdio::null())
        .status();
    let _ = child.wait();
    let took = started.elapsed();
    let printed = || {
        format!(
            "stdout:\n{}\nstderr:\n{}",
            std::fs::read_to_string(&out_path).unwrap_or_default(),
            std::fs::read_to_string(&err_path).unwrap_or_default()
        )
    };
    match status {
        Some(status) if status.success() => Ok(took),
        Some(status) => Err(format!(
            "{}: the example failed ({status}):\n{}\n{}",
            example.place,
            example.script,
            printed()
        )),
        None => Err(format!(
            "{}: the example ran past {TIMEOUT:?}:\n{}\n{}",
            example.place,
            example.script,
            printed()
        )),
    }
}

#[test]
fn the_runnable_examples_of_the_readme_and_docs_run() {
    let examples: Vec<Example> = pages()
        .iter()
        .flat_map(|(file, text)| runnable_examples(file, text))
        .collect();
    assert!(
        !examples.is_empty(),
        "no block fenced `{MARK}` in README.md or docs/*.md"
    );
    let mut failures = Vec::new();
    for example in &examples {
        match run(example) {
            Ok(took) => eprintln!("{}: ran in {took:.1?}", example.place),
            Err(failure) => failures.push(failure),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} runnable examples failed:\n\n{}",
        failures.len(),
        examples.len(),
        failures.join("\n\n")
    );
}

/// The runner itself: a broken block fails, named by its place, and the
/// marked blocks are found with their lines (the test above would pass
/// vacuously otherwise).
#[test]
fn a_broken_example_fails_naming_its_file_and_line() {
    let page = "# A page\n\n```sh\nfalse\n```\n\n```sh runnable\nweir --version\n```\n\n```sh runnable\nweir runs lisst\necho never\n```\n";
    let examples = runnable_examples("docs/page.md", page);
    let places: Vec<&str> = examples.iter().map(|e| e.place.as_str()).collect();
    assert_eq!(places, ["docs/page.md:7", "docs/page.md:11"]);
    assert!(run(&examples[0]).is_ok());
    let failure = run(&examples[1]).unwrap_err();
    assert!(
        failure.starts_with("docs/page.md:11: the example failed"),
        "{failure}"
    );
    assert!(
        failure.contains("stdout:\n\nstderr:"),
        "set -e stops at the failing line: {failure}"
    );
}

/// The commands a `--help` lists under "Commands:".
fn commands(args: &[&str]) -> Vec<String> {
    let output = Command::new(WEIR).args(args).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let help = String::from_utf8(output.stdout).unwrap();
    let listed: Vec<String> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(!listed.is_empty(), "no commands in weir {args:?}:\n{help}");
    listed
}

#[test]
fn the_readme_is_a_front_door_naming_every_command() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(
        lines < 300,
        "README.md has {lines} lines; the manual goes in docs/"
    );
    assert!(
        readme.contains("scripts/test"),
        "README.md no longer gives the test command"
    );
    let mut missing = Vec::new();
    for (prefix, args) in [
        ("weir", &["--help"][..]),
        ("weir runs", &["runs", "--help"][..]),
        ("weir plan", &["plan", "--help"][..]),
    ] {
        for command in commands(args) {
            // `weir help` stands for clap's help of every level.
            if command == "help" && prefix != "weir" {
                continue;
            }
            let named = format!("`{prefix} {command}");
            let found = [format!("{named}`"), format!("{named} ")]
                .iter()
                .any(|form| readme.contains(form.as_str()));
            if !found {
                missing.push(named + "`");
            }
        }
    }
    assert!(missing.is_empty(), "README.md does not name {missing:?}");
}

/// GitHub's anchor of a heading: lower case, letters, digits, `-` and `_`
/// kept, spaces made `-`, the rest dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            lines.push((index + 1, line));
        }
    }
    lines
}

/// The anchors of a markdown file's headings (a repeated one gets `-1`, …).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    for (_, line) in prose(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let base = slug(heading.trim_start_matches('#'));
        let mut anchor = base.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the `[text](target)` links of a line.
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

#[test]
fn relative_links_of_the_readme_and_docs_lead_somewhere() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for (file, text) in pages() {
        let dir = Path::new(&file).parent().unwrap().to_owned();
        for (number, line) in prose(&text) {
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let resolved = if path.is_empty() {
                    PathBuf::from(&file)
                } else {
                    dir.join(path)
                };
                let full = root().join(&resolved);
                if !full.exists() {
                    broken.push(format!(
                        "{file}:{number}: {target}: no {}",
                        resolved.display()
                    ));
                } else if !anchor.is_empty() {
                    let target_text = std::fs::read_to_string(&full).unwrap_or_default();
                    if !anchors(&target_text).contains(anchor) {
                        broken.push(format!(
                            "{file}:{number}: {target}: no heading #{anchor} in {}",
                            resolved.display()
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} relative links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
