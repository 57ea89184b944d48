//! What a caller plugs into Claude Code's control mode besides a permission
//! policy: in-process MCP servers (the CLI's `mcp_message` requests) and
//! hook callbacks (its `hook_callback` requests).

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// An MCP server that lives in the caller's process: Claude Code lists its
/// tools to the model as `mcp__NAME__TOOL` and sends each of its JSON-RPC
/// messages (`initialize`, `notifications/initialized`, `tools/list`,
/// `tools/call`, …) through the control protocol. This crate only carries
/// the messages; the server speaks MCP itself.
#[async_trait::async_trait]
pub trait SdkMcpServer: Send + Sync {
    /// Its name, unique in a session: the `NAME` of `mcp__NAME__TOOL`.
    fn name(&self) -> &str;

    /// Handles one JSON-RPC message and returns the JSON-RPC response to a
    /// request, or `None` for a notification (the driver then
    /// acknowledges it as the CLI expects). The session keeps reading
    /// while this runs, so a long tool call holds nothing up.
    async fn handle(&self, message: Value) -> Option<Value>;
}

/// A hook: Claude Code calls `callback` at `event` for the tools
/// `matcher` names.
#[derive(Clone)]
pub struct Hook {
    /// The hook event, as Claude Code names it: `PreToolUse`,
    /// `PostToolUse`, `UserPromptSubmit`, `Stop`, …
    pub event: String,
    /// For tool events, the tools it applies to (`Bash`, `Edit|Write`,
    /// `mcp__weir__.*`); `None` for all.
    pub matcher: Option<String>,
    /// What answers it.
    pub callback: Arc<dyn HookCallback>,
}

impl Hook {
    /// `callback` at `event`, for the tools `matcher` names (all when
    /// `None`).
    pub fn new(
        event: impl Into<String>,
        matcher: Option<&str>,
        callback: Arc<dyn HookCallback>,
    ) -> Hook {
        Hook {
            event: event.into(),
            matcher: matcher.map(str::to_owned),
            callback,
        }
    }
}

impl fmt::Debug for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hook")
            .field("event", &self.event)
            .field("matcher", &self.matcher)
            .finish_non_exhaustive()
    }
}

/// One call of a hook, as Claude Code sends it.
#[derive(Clone, Debug, PartialEq)]
pub struct HookCall {
    /// The event (`hook_event_name` of the input), e.g. `PreToolUse`.
    pub event: String,
    /// The CLI's hook input: `hook_event_name`, `session_id`, `cwd` and,
    /// for tool events, `tool_name` and `tool_input` (and `tool_response`
    /// after the tool).
    pub input: Value,
    /// The tool call it is about, for tool events.
    pub tool_use_id: Option<String>,
}

/// Answers a hook with Claude Code's hook output: `{}` to go on;
/// `{"decision": "block", "reason": "…"}` to stop the action (the model is
/// told the reason); for `PreToolUse`, `{"hookSpecificOutput":
/// {"hookEventName": "PreToolUse", "permissionDecision": "allow" | "deny"
/// | "ask", "permissionDecisionReason": "…"}}`. Any
/// `Fn(&HookCall) -> Value` is one.
#[async_trait::async_trait]
pub trait HookCallback: Send + Sync {
    /// The hook's output for `call`.
    async fn call(&self, call: &HookCall) -> Value;
}

#[async_trait::async_trait]
impl<F: Fn(&HookCall) -> Value + Send + Sync> HookCallback for F {
    async fn call(&self, call: &HookCall) -> Value {
        self(call)
    }
}
