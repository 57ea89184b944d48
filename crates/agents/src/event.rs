//! The one event type every CLI's stream is normalized into.

use serde::Serialize;
use serde_json::Value;

/// What an agent did, normalized across CLIs. Every session ends with
/// exactly one [`AgentEvent::Exited`], its last event.
///
/// Text comes twice, for two kinds of reader: [`TextDelta`](Self::TextDelta)s
/// as the CLI streams them (joined, they are everything the agent said), and
/// a [`Message`](Self::Message) per complete assistant message. A reader
/// takes one or the other. A CLI that prints only whole messages (codex, or
/// Claude Code without partial messages) gives each message as one delta.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A session (or, in Claude Code's control mode, a turn) began.
    SessionStarted {
        /// The CLI's session or thread id, for resuming it.
        session_id: Option<String>,
        /// The model it uses, if it says.
        model: Option<String>,
    },
    /// Text as it is typed.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// Reasoning as it is typed (only CLIs that show it).
    ThinkingDelta {
        /// The new reasoning text.
        text: String,
    },
    /// A piece of a tool call's arguments (JSON text) as it is typed.
    ToolInputDelta {
        /// The content block's index in its message.
        index: u64,
        /// The next piece of the arguments' JSON text.
        partial_json: String,
    },
    /// The agent calls a tool.
    ToolUse {
        /// The call's id, as its result names it.
        id: String,
        /// The tool.
        name: String,
        /// Its arguments.
        input: Value,
    },
    /// A tool's result.
    ToolResult {
        /// The call it answers.
        id: String,
        /// Its output as text.
        content: String,
        /// Whether the tool failed (or was denied).
        is_error: bool,
    },
    /// A complete assistant message.
    Message {
        /// Its text.
        text: String,
    },
    /// The CLI asked whether a tool may run, and the session's
    /// [`PermissionPolicy`](crate::PermissionPolicy) answered; or (without a
    /// policy) the CLI reports a tool it denied.
    PermissionRequest {
        /// The tool.
        tool_name: String,
        /// Its arguments.
        input: Value,
        /// The tool call's id, when the CLI gives it.
        tool_use_id: Option<String>,
        /// What was decided.
        allowed: bool,
    },
    /// A hook of the session's ([`Hook`](crate::Hook)) was called (Claude
    /// Code's control mode), and answered.
    HookCalled {
        /// The hook event, e.g. `PreToolUse`.
        event: String,
        /// The CLI's hook input (for tool events, `tool_name` and
        /// `tool_input`).
        input: Value,
        /// The tool call it is about, for tool events.
        tool_use_id: Option<String>,
        /// The hook's answer.
        output: Value,
    },
    /// The end of a turn, with the CLI's own accounting.
    Result(AgentResult),
    /// An error the CLI reported (or the driver met) that is not a result.
    Error {
        /// What happened.
        message: String,
    },
    /// A line the parser does not know, kept as it was (JSON when it is
    /// JSON, else a string).
    Unknown {
        /// The line.
        line: Value,
    },
    /// The process ended: always the last event.
    Exited {
        /// Its exit code, if it exited.
        code: Option<i32>,
        /// The signal that killed it, if one did.
        signal: Option<i32>,
        /// The end of what it wrote to stderr (at most 4 KiB), for errors.
        stderr_tail: String,
    },
}

/// The end of a turn.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct AgentResult {
    /// The final answer's text, when the CLI gives one.
    pub text: Option<String>,
    /// Whether the turn failed (an API error, an interrupt, a limit).
    pub is_error: bool,
    /// The CLI's own word for how it ended (`success`,
    /// `error_during_execution`, `turn.failed`, …).
    pub subtype: Option<String>,
    /// Tokens, when the CLI counts them.
    pub usage: Option<Usage>,
    /// Cost in US dollars, when the CLI computes it (Claude Code, at list
    /// prices).
    pub cost_usd: Option<f64>,
    /// How long the turn took, by the CLI's clock.
    pub duration_ms: Option<u64>,
    /// The session's id, for resuming it.
    pub session_id: Option<String>,
}

/// How a session ended: its events folded as [`AgentSession::next`]
/// passed them on, returned by [`AgentSession::finish`]. The callers judge
/// it (a roast, `agent_run` and `weir agent` each have their own verdict);
/// the fold is the same for all.
///
/// [`AgentSession::next`]: crate::AgentSession::next
/// [`AgentSession::finish`]: crate::AgentSession::finish
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ending {
    /// All the text typed ([`AgentEvent::TextDelta`]), in order.
    pub text: String,
    /// The last complete assistant message ([`AgentEvent::Message`]).
    pub last_message: Option<String>,
    /// The last turn's end ([`AgentEvent::Result`]), if one came.
    pub result: Option<AgentResult>,
    /// Every [`AgentEvent::Error`]'s message.
    pub errors: Vec<String>,
    /// How the process ended ([`AgentEvent::Exited`]), once it has.
    pub exit: Option<Exit>,
}

/// How the process ended: [`AgentEvent::Exited`]'s fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, if it exited.
    pub code: Option<i32>,
    /// The signal that killed it, if one did.
    pub signal: Option<i32>,
    /// The end of what it wrote to stderr (at most 4 KiB).
    pub stderr_tail: String,
}

impl Ending {
    /// Adds `event` to the fold.
    pub(crate) fn observe(&mut self, event: &AgentEvent) {
        match event {
            AgentEvent::TextDelta { text } => self.text.push_str(text),
            AgentEvent::Message { text } => self.last_message = Some(text.clone()),
            AgentEvent::Result(result) => self.result = Some(result.clone()),
            AgentEvent::Error { message } => self.errors.push(message.clone()),
            AgentEvent::Exited {
                code,
                signal,
                stderr_tail,
            } => {
                self.exit = Some(Exit {
                    code: *code,
                    signal: *signal,
                    stderr_tail: stderr_tail.clone(),
                });
            }
            _ => {}
        }
    }
}

/// Token counts of a turn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
}

/// `text` without terminal escape sequences (colours, cursor moves, OSC
/// titles and links): CLIs colour their errors even on a pipe, and an
/// error is read as text, in JSON, a log or a model's context.
pub(crate) fn plain_text(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates, up to a final byte.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC: up to BEL or ESC \.
                Some(']') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                // A two-character sequence (ESC 7, ESC =, …), or a lone ESC.
                _ => {}
            },
            '\u{9b}' => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            c => plain.push(c),
        }
    }
    plain
}

#[cfg(test)]
mod tests {
    use super::{AgentEvent, AgentResult, Ending, Exit, plain_text};

    #[test]
    fn an_ending_folds_the_events() {
        let mut ending = Ending::default();
        let events = [
            AgentEvent::TextDelta { text: "he".into() },
            AgentEvent::Message {
                text: "first".into(),
            },
            AgentEvent::TextDelta { text: "llo".into() },
            AgentEvent::Error {
                message: "rate limited".into(),
            },
            AgentEvent::Message {
                text: "second".into(),
            },
            AgentEvent::Result(AgentResult {
                is_error: true,
                ..AgentResult::default()
            }),
            AgentEvent::Exited {
                code: Some(1),
                signal: None,
                stderr_tail: "boom".into(),
            },
        ];
        for event in &events {
            ending.observe(event);
        }
        assert_eq!(ending.text, "hello");
        assert_eq!(ending.last_message.as_deref(), Some("second"));
        assert_eq!(ending.errors, ["rate limited"]);
        assert!(ending.result.is_some_and(|result| result.is_error));
        assert_eq!(
            ending.exit,
            Some(Exit {
                code: Some(1),
                signal: None,
                stderr_tail: "boom".into()
            })
        );
    }

    #[test]
    fn escapes_are_stripped_and_text_kept() {
        assert_eq!(
            plain_text("\u{1b}[31mGemini CLI is not running in a trusted directory.\u{1b}[0m"),
            "Gemini CLI is not running in a trusted directory."
        );
        assert_eq!(
            plain_text(
                "\u{1b}[1;38;5;208mbold\u{1b}[K \u{1b}]8;;https://x\u{7}link\u{1b}]8;;\u{1b}\\ done\u{1b}7"
            ),
            "bold link done"
        );
        assert_eq!(plain_text("plain — ünïcode\n"), "plain — ünïcode\n");
    }
}
