//! What the fuzz targets share: a runtime whose clock the target drives, a
//! fixtures server, and JSON built from the fuzzer's bytes.
//!
//! Each target is one file in `fuzz_targets/`; `scripts/fuzz` builds and
//! runs them.

use std::sync::Arc;
use std::time::Duration;

use arbitrary::{Result, Unstructured};
use async_trait::async_trait;
use serde_json::{Map, Number, Value};
use weir_core::{Completed, RunError};
use weir_mcp::{McpServer, ServerConfig};
use weir_runtime::{EventLog, MemoryLog, RunContext, Scheduler, SchedulerConfig, Tool, ToolInfo};

/// A fresh single-threaded runtime with its clock paused, one per input:
/// dropping it ends every task the input started, and no input waits on
/// the wall clock (a tool's 50 ms pause, a 200 ms grace, a 30 s handshake
/// limit pass as soon as nothing else can run, or as [`spawn_clock`] says).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a tokio runtime")
}

/// Moves the paused clock on by a millisecond each time the scheduler gets
/// round to it. A paused clock otherwise only jumps when every task is
/// waiting, and a tool streaming as fast as it can never waits: its run
/// would outlast every timeout (and the fuzzer's patience) at no cost to
/// the tool. With this, time passes in proportion to work, the same way for
/// the same input.
pub fn spawn_clock() {
    tokio::spawn(async {
        loop {
            tokio::time::advance(Duration::from_millis(1)).await;
        }
    });
}

/// A server with the fixture tools and catalog, on a memory log, with
/// `config`.
pub async fn fixtures_server(config: ServerConfig) -> McpServer {
    let log: Arc<dyn EventLog> = Arc::new(MemoryLog::new());
    let tools = weir_fixtures::fixture_tools()
        .into_iter()
        .map(|tool| {
            if tool.info().name == "stream" {
                Arc::new(SmallStream(tool)) as Arc<dyn Tool>
            } else {
                tool
            }
        })
        .collect();
    let scheduler = Scheduler::start(log, tools, SchedulerConfig::default())
        .await
        .expect("the scheduler starts");
    McpServer::new(scheduler, Arc::new(weir_fixtures::FixtureCatalog), config)
}

/// Most items a fuzzed `stream` call gets.
const STREAM_COUNT: u64 = 64;
/// Most bytes per item a fuzzed `stream` call gets.
const STREAM_SIZE: u64 = 1024;

/// The `stream` fixture with its output capped. It streams up to 10^7
/// items of up to 1 MiB by design; a fuzzer asks for that at once, and
/// the memory log keeps it all. Bigger numbers are lowered, everything
/// else (wrong types, unknown fields) reaches the fixture unchanged.
struct SmallStream(Arc<dyn Tool>);

#[async_trait]
impl Tool for SmallStream {
    fn info(&self) -> ToolInfo {
        self.0.info()
    }

    async fn run(&self, ctx: RunContext, mut arguments: Value) -> Result<Completed, RunError> {
        // As numbers, not integers: the fixture takes `1e7` as a count.
        for (key, cap) in [("count", STREAM_COUNT), ("size", STREAM_SIZE)] {
            if let Some(n) = arguments.get(key).and_then(Value::as_f64)
                && n > cap as f64
            {
                arguments[key] = cap.into();
            }
        }
        self.0.run(ctx, arguments).await
    }
}

/// The words JSON built by [`value`] draws on: a random byte string almost
/// never spells a property name, and a parser that is only ever handed
/// unknown names is fuzzed at its front door only.
pub struct Vocabulary {
    /// Object keys.
    pub keys: &'static [&'static str],
    /// String values.
    pub strings: &'static [&'static str],
}

/// Deepest nesting [`value`] builds.
pub const MAX_DEPTH: u32 = 6;

/// A JSON value from the fuzzer's bytes: mostly words of `vocabulary`,
/// numbers at the edges parsers get wrong, now and then anything.
pub fn value(u: &mut Unstructured<'_>, vocabulary: &Vocabulary, depth: u32) -> Result<Value> {
    let kinds = if depth >= MAX_DEPTH { 4 } else { 6 };
    Ok(match u.int_in_range(0..=kinds - 1)? {
        0 => match u.int_in_range(0..=2)? {
            0 => Value::Null,
            _ => Value::Bool(u.arbitrary()?),
        },
        1 => number(u)?,
        2 | 3 => Value::String(string(u, vocabulary.strings)?),
        4 => {
            let len = u.int_in_range(0..=4)?;
            let mut items = Vec::with_capacity(len);
            for _ in 0..len {
                items.push(value(u, vocabulary, depth + 1)?);
            }
            Value::Array(items)
        }
        _ => Value::Object(object(u, vocabulary, depth)?),
    })
}

/// An object of up to eight members, keys mostly from `vocabulary`.
pub fn object(
    u: &mut Unstructured<'_>,
    vocabulary: &Vocabulary,
    depth: u32,
) -> Result<Map<String, Value>> {
    let len = u.int_in_range(0..=8)?;
    let mut members = Map::new();
    for _ in 0..len {
        let key = string(u, vocabulary.keys)?;
        members.insert(key, value(u, vocabulary, depth + 1)?);
    }
    Ok(members)
}

/// A word of `words`, a word with something after it, or any text.
pub fn string(u: &mut Unstructured<'_>, words: &[&str]) -> Result<String> {
    Ok(match u.int_in_range(0..=7)? {
        0 => u.arbitrary()?,
        1 => format!("{}{}", u.choose(words)?, u.arbitrary::<&str>()?),
        _ => (*u.choose(words)?).to_owned(),
    })
}

/// Numbers at the edges: zero and its sign, bounds of the integer types,
/// the largest exact float integer, tiny and huge floats, and any.
fn number(u: &mut Unstructured<'_>) -> Result<Value> {
    const EDGES: &[f64] = &[
        0.0,
        -0.0,
        0.5,
        1.0,
        -1.0,
        1e-300,
        1e300,
        9007199254740992.0,
        18446744073709551616.0,
        60.0,
        600.0,
        600.000001,
        10000001.0,
    ];
    Ok(match u.int_in_range(0..=5)? {
        0 => Value::from(u.arbitrary::<i64>()?),
        1 => Value::from(u.arbitrary::<u64>()?),
        2 => Value::from(*u.choose(&[0i64, 1, -1, i64::MIN, i64::MAX, 10, 64, 65, 100])?),
        3 => Value::from(u64::MAX),
        4 => Number::from_f64(*u.choose(EDGES)?).map_or(Value::Null, Value::Number),
        _ => Number::from_f64(u.arbitrary()?).map_or(Value::Null, Value::Number),
    })
}
