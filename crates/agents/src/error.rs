//! Why a session could not start, or a request to it failed.

use std::path::PathBuf;

/// Why a session could not start, or a request to it failed.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The CLI's program is not installed where it was looked for.
    #[error("{cli} was not found (looked in: {}); {install}", searched.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))]
    NotFound {
        /// The CLI's name.
        cli: String,
        /// Where it was looked for.
        searched: Vec<PathBuf>,
        /// How to install it, or point at it.
        install: String,
    },
    /// The program exists but could not be started.
    #[error("cannot start {}: {source}", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A private home or the output pipes could not be set up.
    #[error("cannot prepare the agent's {what}: {source}")]
    Setup {
        /// What.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The options ask for something this CLI cannot do.
    #[error("{cli} cannot {what}: {hint}")]
    Unsupported {
        /// The CLI's name.
        cli: String,
        /// What was asked.
        what: &'static str,
        /// What to do instead.
        hint: &'static str,
    },
    /// A caller's value that may not reach the CLI's command line (a
    /// model or session id that could be read as a flag, a prompt with a
    /// NUL).
    #[error("the {what} {value} is not accepted: it must be {rule}")]
    Invalid {
        /// What it is: `model`, `session id`, `prompt`.
        what: &'static str,
        /// The value, quoted and shortened.
        value: String,
        /// What would be accepted.
        rule: &'static str,
    },
    /// The session has ended (or its input was closed): nothing more can be
    /// sent to it.
    #[error("the agent's session has ended; start a new one (or resume it by its session id)")]
    Ended,
}
