//! What to set up so that an agent that did not answer does next time:
//! the CLI's install command, its login or key, the variable or file its
//! error points at. Read from the outcome and the CLI's own error text,
//! since the CLIs say "not logged in" each in their own words.

use crate::report::Status;

/// Where the agents' variables and files come from, for every piece of
/// advice.
const WHERE: &str = "in weir serve's environment or with --critique-env KEY=VALUE; files under the agents' HOME (--critique-home, else weir's)";

/// What to configure for `cli`, whose part ended with `status` and
/// `error`; `None` when it answered.
pub(crate) fn advice(cli: &str, status: Status, error: Option<&str>) -> Option<String> {
    let error = error.unwrap_or("").to_lowercase();
    let has = |words: &[&str]| words.iter().any(|word| error.contains(word));
    let advice = match status {
        Status::Ok => return None,
        Status::Missing => format!(
            "install it where weir serve finds it on PATH: npm install -g {}",
            package(cli)
        ),
        Status::TimedOut => {
            "it ran past --critique-timeout: raise it, or give it less to read (a smaller target)"
                .to_owned()
        }
        Status::Failed | Status::BreakerOpen => match cli {
            "claude"
                if has(&[
                    "not logged in",
                    "/login",
                    "invalid api key",
                    "401",
                    "authentication",
                ]) =>
            {
                format!(
                    "not logged in: run `claude` once as the user weir runs as and /login, or set ANTHROPIC_API_KEY (and ANTHROPIC_BASE_URL for a local endpoint) ({WHERE})"
                )
            }
            "gemini" if has(&["invalid auth method"]) => format!(
                "GOOGLE_GEMINI_BASE_URL is set, so the Gemini CLI needs an auth type chosen: {{\"security\":{{\"auth\":{{\"selectedType\":\"gemini-api-key\"}}}}}} in $HOME/.gemini/settings.json, and GEMINI_API_KEY ({WHERE})"
            ),
            "gemini" if has(&["auth method", "gemini_api_key", "api key", "401", "403"]) => {
                format!(
                    "not logged in: set GEMINI_API_KEY (and GOOGLE_GEMINI_BASE_URL for a local endpoint), or run `gemini` once and log in ({WHERE})"
                )
            }
            "gemini" if has(&["trusted directory"]) => format!(
                "the Gemini CLI does not trust the folder: leave GEMINI_CLI_TRUST_WORKSPACE unset (weir sets it to true) or set it to true ({WHERE})"
            ),
            "codex" if has(&["401", "unauthorized", "login", "api key", "openai_api_key"]) => {
                format!(
                    "not logged in: run `codex login` as the user weir runs as, or set OPENAI_API_KEY, or name a model provider in $CODEX_HOME/config.toml ({WHERE})"
                )
            }
            "codex"
                if has(&[
                    "lookup address",
                    "reconnecting",
                    "error sending request",
                    "connection",
                ]) =>
            {
                format!(
                    "cannot reach its model endpoint: check the network, or the base_url of the model provider in $CODEX_HOME/config.toml ({WHERE})"
                )
            }
            _ if has(&[
                "connection refused",
                "econnrefused",
                "fetch failed",
                "lookup address",
            ]) =>
            {
                format!(
                    "cannot reach its model endpoint: check the network, or the base URL it is given ({WHERE})"
                )
            }
            _ => format!(
                "see its error; `weir agent --cli {cli} \"hi\"` runs it alone and shows all it prints (its login or key: {})",
                login(cli)
            ),
        },
    };
    Some(advice)
}

/// The npm package a CLI is installed from.
fn package(cli: &str) -> &'static str {
    match cli {
        "claude" => "@anthropic-ai/claude-code",
        "codex" => "@openai/codex",
        _ => "@google/gemini-cli",
    }
}

/// How a CLI is logged in, in short.
fn login(cli: &str) -> &'static str {
    match cli {
        "claude" => "`claude` then /login, or ANTHROPIC_API_KEY",
        "codex" => "`codex login`, or OPENAI_API_KEY",
        _ => "GEMINI_API_KEY, or `gemini` and log in",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cli_gets_its_own_advice() {
        let failed = |cli, error| advice(cli, Status::Failed, Some(error)).unwrap();
        assert_eq!(advice("claude", Status::Ok, None), None);
        assert!(
            failed("claude", "Not logged in · Please run /login").contains("ANTHROPIC_API_KEY")
        );
        assert!(
            failed(
                "gemini",
                "exited with code 41: Invalid auth method selected."
            )
            .contains("\"selectedType\":\"gemini-api-key\"")
        );
        assert!(
            failed(
                "gemini",
                "exited with code 41: Please set an Auth method in your settings.json"
            )
            .contains("set GEMINI_API_KEY")
        );
        assert!(failed("codex", "unexpected status 401 Unauthorized").contains("codex login"));
        assert!(
            advice("codex", Status::Missing, Some("codex was not found"))
                .unwrap()
                .contains("npm install -g @openai/codex")
        );
        assert!(
            failed("gemini", "exited with code 1: something odd")
                .contains("weir agent --cli gemini")
        );
    }
}
