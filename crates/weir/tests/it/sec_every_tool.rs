//! Issue 22, every registered tool, every string field: no path, URL or
//! command a caller sends reaches the host.
//!
//! One `weir serve --stdio` with its default settings (every pack of the
//! build, `--root` a scratch directory) is asked for its tools; each
//! tool's input schema is walked for string fields (arrays of strings
//! included), and every such field is sent, in an otherwise minimal call,
//! each of a set of hostile values: shell commands (plain, `$(…)`, git's
//! `ext::` transport, a flag), paths out of the root (absolute, `../…`,
//! `file://`), URLs of a listener this test holds, and a plan whose steps
//! name a host command and that listener. Whatever each call answers, after
//! all of them:
//! - no command ran: the marker files the commands would create do not
//!   exist (the programs `execute_code` runs see neither this directory nor
//!   the network: that is its sandbox, and the one exception the rule has);
//! - nothing connected to the listener;
//! - no answer carries the secret kept outside the root.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

/// A scratch directory under `/var/tmp` (the sandbox has a `/tmp` of its
/// own), named after this test and process.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(format!(
        "/var/tmp/weir-every-tool-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A loopback listener that counts the connections it is offered.
struct Listener {
    port: u16,
    connections: Arc<AtomicUsize>,
}

impl Listener {
    fn start() -> Listener {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                counted.fetch_add(1, Ordering::SeqCst);
                // Answer nothing: a client waits, then gives up.
                drop(stream);
            }
        });
        Listener { port, connections }
    }
}

/// The hostile values for call number `n`: each command would create a
/// file named after `n` in `marks`.
fn hostile_values(n: usize, marks: &Path, outside: &Path, port: u16) -> Vec<String> {
    let mark = |kind: &str| marks.join(format!("{kind}-{n}")).display().to_string();
    let up = "../".repeat(24);
    let outside_text = outside.display().to_string();
    vec![
        format!("touch {}", mark("cmd")),
        format!("$(touch {})", mark("sub")),
        format!("; touch {} #", mark("semi")),
        format!("ext::sh -c touch% {}", mark("ext")),
        format!("--upload-pack=touch {}", mark("flag")),
        outside_text.clone(),
        format!("{outside_text}/secret.txt"),
        format!("{up}{}", outside_text.trim_start_matches('/')),
        format!("file://{outside_text}"),
        format!("http://127.0.0.1:{port}/repo.git"),
        format!(
            "steps:\n  - {{id: a, tool: list_languages, server: {{command: \"touch {}\"}}}}\n  - {{id: b, tool: list_languages, server: {{url: \"http://127.0.0.1:{port}/mcp\"}}}}\n",
            mark("plan")
        ),
    ]
}

/// JSON pointers of the string fields of `schema` (an object schema),
/// with whether each is an array of strings.
fn string_fields(schema: &Value, at: &str, found: &mut Vec<(String, bool)>) {
    let Some(properties) = schema["properties"].as_object() else {
        return;
    };
    for (name, property) in properties {
        let pointer = format!("{at}/{name}");
        if accepts(property, "string") {
            found.push((pointer.clone(), false));
        }
        if accepts(property, "array") && accepts(&property["items"], "string") {
            found.push((pointer.clone(), true));
        }
        if accepts(property, "object") {
            string_fields(property, &pointer, found);
        }
    }
}

/// Whether `schema` takes values of JSON type `kind`.
fn accepts(schema: &Value, kind: &str) -> bool {
    match &schema["type"] {
        Value::String(one) => one == kind,
        Value::Array(many) => many.iter().any(|t| t == kind),
        _ => schema["enum"].as_array().is_some_and(|values| {
            values.iter().any(|v| match kind {
                "string" => v.is_string(),
                _ => false,
            })
        }),
    }
}

/// The smallest arguments `schema` accepts: each required field with a
/// plain value of its type (an enum's first value).
fn minimal(schema: &Value) -> Value {
    let mut arguments = Map::new();
    for name in schema["required"].as_array().into_iter().flatten() {
        let name = name.as_str().unwrap();
        let property = &schema["properties"][name];
        let value = if let Some(first) = property["enum"].as_array().and_then(|e| e.first()) {
            first.clone()
        } else if accepts(property, "string") {
            json!("x")
        } else if accepts(property, "integer") || accepts(property, "number") {
            json!(1)
        } else if accepts(property, "boolean") {
            json!(false)
        } else if accepts(property, "array") {
            json!([])
        } else {
            minimal(property)
        };
        arguments.insert(name.to_owned(), value);
    }
    Value::Object(arguments)
}

/// `value` set at `pointer` in `arguments`, making the objects on the way.
fn set(arguments: &mut Value, pointer: &str, value: Value) {
    let mut at = arguments;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (index, part) in parts.iter().enumerate() {
        if !at.is_object() {
            *at = json!({});
        }
        let object = at.as_object_mut().unwrap();
        if index + 1 == parts.len() {
            object.insert((*part).to_owned(), value);
            return;
        }
        at = object
            .entry((*part).to_owned())
            .or_insert_with(|| json!({}));
    }
}

struct Serve {
    child: Child,
    stdin: ChildStdin,
    messages: mpsc::Receiver<Value>,
}

impl Serve {
    fn start(root: &Path, data: &Path, home: &Path) -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .args([
                "serve",
                "--stdio",
                "--critique-timeout",
                "10",
                "--max-queue",
                "100000",
            ])
            .arg("--root")
            .arg(root)
            .arg("--data-dir")
            .arg(data)
            .current_dir(root)
            .env_remove("WEIR_TOKEN")
            .env_remove("WEIR_ROOTS")
            .env("HOME", home)
            .env("WEIR_REMOTE_TOKEN", "weir-own-credential-never-forwarded")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, messages) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(message) = serde_json::from_str::<Value>(&line) else {
                    continue;
                };
                if sender.send(message).is_err() {
                    break;
                }
            }
        });
        let mut serve = Serve {
            child,
            stdin,
            messages,
        };
        serve.send(json!({
            "jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "weir-every-tool-test", "version": "0"}
            }
        }));
        serve.wait_for(&[json!("init")], Duration::from_secs(60));
        serve.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        serve
    }

    fn send(&mut self, message: Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Reads until every id in `ids` is answered; the answers by id.
    fn wait_for(&mut self, ids: &[Value], within: Duration) -> Vec<(Value, Value)> {
        let until = Instant::now() + within;
        let mut answers = Vec::new();
        while answers.len() < ids.len() {
            let left = until.saturating_duration_since(Instant::now());
            let message = self.messages.recv_timeout(left).unwrap_or_else(|_| {
                let answered: Vec<&Value> = answers.iter().map(|(id, _)| id).collect();
                panic!("no answer within {within:?} to some of {ids:?}; answered {answered:?}")
            });
            if ids.contains(&message["id"]) {
                answers.push((message["id"].clone(), message));
            }
        }
        answers
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn no_string_in_any_tool_argument_reaches_a_host_command_an_outside_path_or_an_undeclared_address()
{
    let base = scratch("base");
    let root = base.join("root");
    let data = base.join("data");
    let home = base.join("home");
    let marks = base.join("marks");
    let outside = base.join("outside");
    for dir in [&root, &data, &home, &marks, &outside] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let secret = format!("weir-outside-secret-{}", std::process::id());
    std::fs::write(
        outside.join("secret.txt"),
        format!("def {secret}(): pass\n"),
    )
    .unwrap();
    std::fs::write(outside.join("README.md"), format!("# {secret}\n")).unwrap();
    std::fs::create_dir_all(root.join("repo")).unwrap();
    std::fs::write(root.join("repo/lib.py"), "def inside():\n    return 1\n").unwrap();
    let listener = Listener::start();

    let mut serve = Serve::start(&root, &data, &home);
    serve.send(json!({"jsonrpc": "2.0", "id": "list", "method": "tools/list"}));
    let listed = serve.wait_for(&[json!("list")], Duration::from_secs(30));
    let tools = listed[0].1["result"]["tools"].as_array().unwrap().clone();
    assert!(
        tools.len() > 10,
        "the default packs are registered: {tools:?}"
    );

    let mut calls: Vec<(String, Value)> = Vec::new();
    let mut fields_seen = 0;
    for tool in &tools {
        let name = tool["name"].as_str().unwrap().to_owned();
        let schema = &tool["inputSchema"];
        let base_arguments = minimal(schema);
        let mut fields = Vec::new();
        string_fields(schema, "", &mut fields);
        fields_seen += fields.len();
        calls.push((name.clone(), base_arguments.clone()));
        for (pointer, is_array) in &fields {
            for value in hostile_values(calls.len(), &marks, &outside, listener.port) {
                let value = if *is_array {
                    json!([value])
                } else {
                    json!(value)
                };
                let mut arguments = base_arguments.clone();
                set(&mut arguments, pointer, value);
                calls.push((name.clone(), arguments));
            }
        }
    }
    assert!(fields_seen > 30, "string fields walked: {fields_seen}");

    // In batches, so that the slots and the queue are not what refuses.
    let mut answers = Vec::new();
    for (batch_index, batch) in calls.chunks(24).enumerate() {
        let mut ids = Vec::new();
        for (index, (tool, arguments)) in batch.iter().enumerate() {
            let id = json!(format!("c{batch_index}-{index}"));
            serve.send(json!({
                "jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}
            }));
            ids.push(id);
        }
        for (id, answer) in serve.wait_for(&ids, Duration::from_secs(180)) {
            let index: usize = id
                .as_str()
                .unwrap()
                .rsplit('-')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            answers.push((batch[index].clone(), answer));
        }
    }

    // Commands that escaped would still be finishing: give them a moment.
    std::thread::sleep(Duration::from_millis(500));
    let ran: Vec<String> = std::fs::read_dir(&marks)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let call_of = |mark: &str| {
        let n: usize = mark.rsplit('-').next().unwrap().parse().unwrap();
        calls.get(n).map(|(t, a)| format!("{t} {a}"))
    };
    assert!(
        ran.is_empty(),
        "host commands ran from tool arguments: {:?}",
        ran.iter().map(|m| (m, call_of(m))).collect::<Vec<_>>()
    );
    assert_eq!(
        listener.connections.load(Ordering::SeqCst),
        0,
        "a tool argument made weir connect to an address nobody declared"
    );
    for ((tool, arguments), answer) in &answers {
        assert!(
            !answer.to_string().contains(&secret),
            "{tool} {arguments} read outside the root: {answer}"
        );
    }
    eprintln!(
        "{} tools, {fields_seen} string fields, {} calls: no command, no connection, no outside read",
        tools.len(),
        calls.len()
    );
    let _ = std::fs::remove_dir_all(&base);
}
