//! The MCP hints of the critique pack's tools, for those that do not
//! declare their own: every tool weir serves declares all four, and hosts
//! gate calls by them (headless Codex refuses a tool not marked read-only).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use weir_core::{Completed, RunError};
use weir_runtime::{Hints, Pack, Redactor, RunContext, Tool, ToolInfo};

/// The critique pack, its tools hinted.
pub(crate) struct Hinted<P>(pub(crate) P);

impl<P: Pack> Pack for Hinted<P> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.0
            .tools()
            .into_iter()
            .map(|tool| Arc::new(HintedTool(tool)) as Arc<dyn Tool>)
            .collect()
    }

    fn warning(&self) -> Option<String> {
        self.0.warning()
    }
}

/// What a critique tool does: every one but `critique_status` runs coding
/// agents, which talk to their model's service (open world). A roast's
/// agents are told to only read, but nothing but their CLIs' own rules
/// holds them to it, so it is not read-only.
fn hints(tool: &str) -> Hints {
    match tool {
        "critique_status" => Hints::READ_ONLY,
        _ => Hints {
            read_only: false,
            destructive: false,
            idempotent: false,
            open_world: true,
        },
    }
}

/// Whether `info` declares every one of the four hints itself.
fn declares_hints(info: &ToolInfo) -> bool {
    let annotations = info.annotations.as_ref();
    [
        "readOnlyHint",
        "destructiveHint",
        "idempotentHint",
        "openWorldHint",
    ]
    .iter()
    .all(|hint| annotations.is_some_and(|given| given[*hint].is_boolean()))
}

struct HintedTool(Arc<dyn Tool>);

#[async_trait]
impl Tool for HintedTool {
    fn info(&self) -> ToolInfo {
        let info = self.0.info();
        if declares_hints(&info) {
            return info;
        }
        let hints = hints(&info.name);
        info.with_hints(hints)
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        self.0.run(ctx, arguments).await
    }

    fn redact(&self, info: &ToolInfo, arguments: &Value, tools: &dyn Redactor) -> Value {
        self.0.redact(info, arguments, tools)
    }
}
