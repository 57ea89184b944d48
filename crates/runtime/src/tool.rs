//! What a tool is to the runtime.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use weir_core::{Completed, RunError};

use crate::RunContext;

/// A tool's description: what clients see, and how the scheduler treats it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolInfo {
    /// Unique name, e.g. `execute_code`.
    pub name: String,
    /// What it does, for people and models.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its structured result, if it has one.
    pub output_schema: Option<Value>,
    /// Whether it delivers its result incrementally (`partial` events).
    pub streams: bool,
    /// Time limit of one run, unless the caller sets one; the scheduler's
    /// default applies when `None`.
    pub timeout: Option<Duration>,
    /// Most runs of this tool at once; the scheduler's default when `None`.
    pub max_concurrent: Option<usize>,
}

impl ToolInfo {
    /// A description with the scheduler's defaults and no output schema.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema: None,
            streams: false,
            timeout: None,
            max_concurrent: None,
        }
    }
}

/// A long-running tool. It reports through its [`RunContext`] and returns its
/// final result; it never writes a terminal event itself and never knows
/// which protocol its caller speaks.
///
/// **Cancellation drops the future.** On cancel or timeout the runtime drops
/// the future returned by `run` (after which it writes `canceled` or
/// `failed`), so cleanup that must happen, such as killing a child process,
/// belongs in a `Drop` impl. Long loops can also watch
/// [`RunContext::cancelled`] to stop early.
///
/// ```
/// use async_trait::async_trait;
/// use serde_json::{Value, json};
/// use weir_core::{Completed, Content, Progress, RunError};
/// use weir_runtime::{RunContext, Tool, ToolInfo};
///
/// struct Count;
///
/// #[async_trait]
/// impl Tool for Count {
///     fn info(&self) -> ToolInfo {
///         ToolInfo::new("count", "Counts to n.", json!({"type": "object"}))
///     }
///     async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
///         let n = args["n"].as_u64().unwrap_or(3);
///         for i in 1..=n {
///             let _ = ctx.emit(Progress { progress: i as f64, total: Some(n as f64), ..Default::default() }).await;
///         }
///         Ok(Completed { content: vec![Content::text(format!("counted to {n}"))], structured: None })
///     }
/// }
/// ```
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The tool's description; read once, when it is registered.
    fn info(&self) -> ToolInfo;

    /// Executes one run.
    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError>;
}

/// Tools that belong together and are registered as one, e.g. the code
/// execution pack. A pack is built (and may probe the machine) before the
/// scheduler starts; the binary enables each pack by a cargo feature.
pub trait Pack {
    /// A short name for logs and `get_status`, e.g. `exec`.
    fn name(&self) -> &'static str;

    /// The pack's tools, ready to register with the scheduler.
    fn tools(&self) -> Vec<std::sync::Arc<dyn Tool>>;

    /// Something an operator should know at start (e.g. that programs run
    /// without a sandbox, and why), printed as a warning. `None` by default.
    fn warning(&self) -> Option<String> {
        None
    }
}
