//! A registry that changes after start (`Scheduler::replace_tools`, for an
//! upstream server whose tool list changed): a call admitted from then on
//! finds the new set, and a run admitted before keeps the tool it was
//! admitted with until it ends.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, EventKind, RunError};
use weir_runtime::{
    MemoryLog, RunContext, RunOptions, Scheduler, SchedulerConfig, SubmitError, Tool, ToolInfo,
};

/// Answers `"{name} v{version}"` after `wait_ms`.
struct Versioned {
    name: &'static str,
    version: u32,
}

#[async_trait]
impl Tool for Versioned {
    fn info(&self) -> ToolInfo {
        ToolInfo::new(
            self.name,
            format!("version {}", self.version),
            json!({"type": "object"}),
        )
    }

    async fn run(&self, _ctx: RunContext, args: Value) -> Result<Completed, RunError> {
        let wait = args["wait_ms"].as_u64().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(wait)).await;
        Ok(Completed {
            content: vec![Content::text(format!("{} v{}", self.name, self.version))],
            structured: None,
        })
    }
}

fn tool(name: &'static str, version: u32) -> Arc<dyn Tool> {
    Arc::new(Versioned { name, version })
}

async fn text_of(scheduler: &Scheduler, name: &str, args: Value) -> String {
    let handle = scheduler
        .submit(name, args, RunOptions::default())
        .await
        .expect("admitted");
    match handle.finished().await.expect("ended").kind {
        EventKind::Completed(done) => format!("{:?}", done.content),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn replaced_tools_serve_new_calls_while_a_run_admitted_before_keeps_its_own() {
    let scheduler = Scheduler::start(
        Arc::new(MemoryLog::new()),
        vec![tool("a", 1), tool("b", 1), tool("kept", 1)],
        SchedulerConfig::default(),
    )
    .await
    .expect("started");
    // A slow run of `a` v1, admitted before the change.
    let slow = scheduler
        .submit("a", json!({"wait_ms": 300}), RunOptions::default())
        .await
        .expect("admitted");
    let retired: BTreeSet<String> = ["a".to_owned(), "b".to_owned()].into();
    // `a` comes back as v2, `b` goes, `c` is new; `kept` is not the
    // upstream's to replace, and its name cannot be taken.
    let left_out =
        scheduler.replace_tools(&retired, vec![tool("a", 2), tool("c", 1), tool("kept", 9)]);
    assert_eq!(left_out, ["kept"]);
    let names: Vec<String> = scheduler.tools().map(|info| info.name).collect();
    assert_eq!(names, ["a", "c", "kept"]);
    match slow.finished().await.expect("ended").kind {
        EventKind::Completed(done) => assert!(format!("{:?}", done.content).contains("a v1")),
        other => panic!("{other:?}"),
    }
    assert!(text_of(&scheduler, "a", json!({})).await.contains("a v2"));
    assert!(text_of(&scheduler, "c", json!({})).await.contains("c v1"));
    assert!(
        text_of(&scheduler, "kept", json!({}))
            .await
            .contains("kept v1")
    );
    let gone = scheduler
        .submit("b", json!({}), RunOptions::default())
        .await;
    assert!(
        matches!(gone, Err(SubmitError::UnknownTool { .. })),
        "{:?}",
        gone.err()
    );
}
