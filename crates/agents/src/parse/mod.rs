//! Each CLI's stdout, line by line, to [`AgentEvent`]s. A line no parser
//! knows becomes [`AgentEvent::Unknown`]: a CLI that adds a line type
//! loses nothing, and nothing is fatal. Lines a parser knows but that carry
//! nothing for a reader (Claude Code's `system/status`, the SSE framing of
//! its partial messages, codex's `turn.started`) give no event.
//!
//! Public so that a recorded stream can be read as a live one is (the
//! tests read the CLIs' real transcripts).

mod claude;
mod codex;
mod gemini;

use std::sync::Arc;

use serde_json::Value;

use crate::{AgentEvent, CliKind, LineParser};

pub use claude::ClaudeParser;
pub use codex::CodexParser;
pub use gemini::GeminiParser;

/// A parser for one session's stream (parsers keep state across lines:
/// the session id, text gathered into whole messages).
pub enum Parser {
    /// Claude Code's stream-json.
    Claude(ClaudeParser),
    /// `codex exec --json`.
    Codex(CodexParser),
    /// The Gemini CLI's stream-json.
    Gemini(GeminiParser),
    /// A custom command's.
    Custom(Arc<dyn LineParser>),
}

impl Parser {
    /// The parser for `cli`. `include_partial` and `control` are Claude
    /// Code's: whether text comes as partial deltas (then whole messages
    /// are not repeated as deltas), and whether permission requests are
    /// answered on the control protocol (then the denials its result lists
    /// were reported already).
    pub fn new(cli: &CliKind, include_partial: bool, control: bool) -> Parser {
        match cli {
            CliKind::Claude => Parser::Claude(ClaudeParser::new(include_partial, !control)),
            CliKind::Codex => Parser::Codex(CodexParser::default()),
            CliKind::Gemini => Parser::Gemini(GeminiParser::default()),
            CliKind::Custom { parser, .. } => Parser::Custom(Arc::clone(parser)),
        }
    }

    /// The events of one line (without its newline).
    pub fn line(&mut self, line: &str) -> Vec<AgentEvent> {
        if line.trim().is_empty() {
            return Vec::new();
        }
        if let Parser::Custom(parser) = self {
            return parser.parse(line);
        }
        let Ok(value) = serde_json::from_str::<Value>(line) else {
            return vec![unknown_text(line)];
        };
        match self {
            Parser::Claude(parser) => parser.line(value),
            Parser::Codex(parser) => parser.line(value),
            Parser::Gemini(parser) => parser.line(value),
            Parser::Custom(_) => unreachable!("handled above"),
        }
    }

    /// Every event of a whole recorded stream.
    pub fn lines(&mut self, text: &str) -> Vec<AgentEvent> {
        text.lines().flat_map(|line| self.line(line)).collect()
    }
}

/// A line that is not JSON.
fn unknown_text(line: &str) -> AgentEvent {
    AgentEvent::Unknown {
        line: Value::String(line.to_owned()),
    }
}

/// `value[key]` as an owned string, if it is one.
fn string(value: &Value, key: &str) -> Option<String> {
    value.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// `value[key]` as a number, if it is one.
fn number(value: &Value, key: &str) -> Option<u64> {
    value.get(key).and_then(Value::as_u64)
}
