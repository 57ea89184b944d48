//! What of a caller's text may reach a CLI's command line, and how.
//!
//! The prompt never stands where a CLI's parser reads flags: Claude Code
//! gets it after `--`, Codex on stdin (its `-` argument; after `--` a
//! prompt `-` would still mean "read stdin"), the Gemini CLI as one
//! `--prompt=TEXT` argument (its parser ignores a prompt after `--`, and
//! a prompt on stdin is turned back into a separate `--prompt TEXT` when
//! the CLI relaunches itself in its sandbox). Each was checked against the
//! real CLI with prompts such as `--version` and
//! `--dangerously-bypass-approvals-and-sandbox`: the model receives them as
//! text. Names that must stand alone as an argument (a model, a session
//! id) match [`check_name`]'s pattern, which no flag matches.

use crate::{AgentError, AgentOptions};

/// The longest model name or session id accepted.
const MAX_NAME: usize = 128;

/// The rule of [`check_name`], for messages.
pub(crate) const NAME_RULE: &str =
    "1 to 128 ASCII letters, digits and . _ : / @ -, starting with a letter or digit";

/// [`check_name`]'s rule as a JSON Schema `pattern`, for the tool schemas
/// that take a model or session id (the argument is checked again here).
pub const NAME_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,127}$";

/// Whether `value` (a model name, a session or thread id) may stand alone
/// on a CLI's command line: 1 to 128 ASCII letters, digits and `._:/@-`,
/// the first a letter or digit — so never a flag (`-…`). `what` names it
/// in the error ("model", "session id").
///
/// # Errors
///
/// [`AgentError::Invalid`] saying what is accepted.
///
/// ```
/// use weir_agents::check_name;
/// for model in ["claude-opus-5-5", "gpt-5.5", "gemini-2.5-flash", "openrouter/meta/llama-3:70b@v2"] {
///     assert!(check_name("model", model).is_ok(), "{model}");
/// }
/// for bad in ["--yolo", "-m", "", "a b", "x;rm", "é"] {
///     assert!(check_name("model", bad).is_err(), "{bad}");
/// }
/// ```
pub fn check_name(what: &'static str, value: &str) -> Result<(), AgentError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "._:/@-".contains(c);
    let fine = value.len() <= MAX_NAME
        && value
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && value.chars().all(allowed);
    if fine {
        Ok(())
    } else {
        Err(AgentError::Invalid {
            what,
            value: shorten(value),
            rule: NAME_RULE,
        })
    }
}

/// Every caller string of `options` that reaches the CLI's arguments,
/// checked. [`AgentOptions::args`] and the program are the embedder's own
/// and pass as they are.
pub(crate) fn check(options: &AgentOptions) -> Result<(), AgentError> {
    if let Some(model) = &options.model {
        check_name("model", model)?;
    }
    if let Some(session) = &options.resume {
        check_name("session id", session)?;
    }
    // No command line carries a NUL; say so rather than fail the spawn.
    if options.prompt.contains('\0') {
        return Err(AgentError::Invalid {
            what: "prompt",
            value: shorten(&options.prompt),
            rule: "text without NUL characters",
        });
    }
    Ok(())
}

/// `value` for a message: at most 64 characters, escaped.
fn shorten(value: &str) -> String {
    let cut: String = value.chars().take(64).collect();
    if cut.len() < value.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}
