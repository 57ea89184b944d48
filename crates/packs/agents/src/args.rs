//! `agent_run`'s arguments: the schema and the checks, with messages that
//! name the field and say what would be accepted.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};
use weir_core::RunError;
use weir_runtime::Roots;
use weir_runtime::kit::{self, invalid};

/// Largest `prompt`, in bytes.
pub(crate) const MAX_PROMPT_BYTES: usize = 1 << 20;
/// The CLIs `cli` may name.
pub(crate) use weir_agents::BUILT_IN_CLIS as KNOWN_CLIS;
/// What a model name looks like (`weir_agents::check_name`), for the
/// schema.
use weir_agents::NAME_PATTERN as MODEL_PATTERN;

/// `agent_run`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentRunArgs {
    pub(crate) cli: String,
    pub(crate) prompt: String,
    #[serde(default)]
    pub(crate) model: Option<String>,
    /// As sent; [`AgentRunArgs::parse`] resolves it into `work_dir`.
    #[serde(default)]
    cwd: Option<String>,
    /// Tools of this server offered to the agent (Claude Code only).
    #[serde(default)]
    pub(crate) weir_tools: Vec<String>,
    /// `cwd` resolved inside a root (canonical), if given.
    #[serde(skip)]
    pub(crate) work_dir: Option<PathBuf>,
}

impl AgentRunArgs {
    /// The arguments, checked; `cwd` must resolve inside one of `roots`.
    pub(crate) fn parse(arguments: Value, roots: &Roots) -> Result<AgentRunArgs, RunError> {
        let mut args: AgentRunArgs = kit::parse_object(arguments)?;
        if !KNOWN_CLIS.contains(&args.cli.as_str()) {
            return Err(invalid(format!(
                "cli: unknown CLI {:?}; known: {}",
                args.cli,
                KNOWN_CLIS.join(", ")
            )));
        }
        if args.prompt.trim().is_empty() {
            return Err(invalid("prompt is empty"));
        }
        if args.prompt.len() > MAX_PROMPT_BYTES {
            return Err(invalid(format!(
                "prompt is larger than {MAX_PROMPT_BYTES} bytes"
            )));
        }
        if let Some(model) = &args.model {
            weir_agents::check_name("model", model)
                .map_err(|error| invalid(format!("model: {error}")))?;
        }
        if let Some(cwd) = &args.cwd {
            let dir = roots.resolve_argument("cwd", cwd)?;
            if !dir.is_dir() {
                return Err(invalid(format!(
                    "cwd {cwd} is not a directory on the server"
                )));
            }
            args.work_dir = Some(dir);
        }
        let mut named = std::collections::BTreeSet::new();
        if let Some(tool) = args.weir_tools.iter().find(|tool| !named.insert(*tool)) {
            return Err(invalid(format!("weir_tools names {tool} twice")));
        }
        if !args.weir_tools.is_empty() && args.cli != "claude" {
            return Err(invalid(format!(
                "weir_tools: only claude can be offered weir's tools (in-process MCP servers are Claude Code's), not {}",
                args.cli
            )));
        }
        Ok(args)
    }
}

pub(crate) fn agent_run_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "cli": {"type": "string", "enum": KNOWN_CLIS, "description": "The coding-agent CLI to run."},
            "prompt": {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT_BYTES, "description": "The prompt."},
            "model": {"type": "string", "pattern": MODEL_PATTERN, "description": "The model; else the server's choice or the CLI's default."},
            "cwd": {"type": "string", "description": "The agent's working directory on the server: a directory inside the server's roots (`weir serve --root`), absolute or relative to the first; else the first root."},
            "weir_tools": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "description": "claude only: tools of this server offered to the agent as the in-process MCP server `weir` (it calls them as mcp__weir__TOOL); each call is a child run of this run."}
        },
        "required": ["cli", "prompt"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A root holding `inside/` and `file.rs`, beside `outside/`.
    fn roots() -> &'static Roots {
        static ROOTS: std::sync::OnceLock<Roots> = std::sync::OnceLock::new();
        ROOTS.get_or_init(|| {
            let dir = std::env::temp_dir().join(format!("weir-agents-args-{}", std::process::id()));
            for sub in ["root/inside", "outside"] {
                std::fs::create_dir_all(dir.join(sub)).unwrap();
            }
            std::fs::write(dir.join("root/file.rs"), "fn main() {}").unwrap();
            Roots::new([dir.join("root")]).unwrap()
        })
    }

    #[test]
    fn weir_tools_are_for_claude_only() {
        let args = AgentRunArgs::parse(
            json!({"cli": "claude", "prompt": "hi", "weir_tools": ["critique_status"]}),
            roots(),
        )
        .unwrap();
        assert_eq!(args.weir_tools, ["critique_status"]);
        let error = AgentRunArgs::parse(
            json!({"cli": "codex", "prompt": "hi", "weir_tools": ["x"]}),
            roots(),
        )
        .unwrap_err();
        assert!(error.message.contains("only claude"), "{}", error.message);
        assert!(
            weir_core::check_arguments(
                &agent_run_schema(),
                &json!({"cli": "claude", "prompt": "hi", "weir_tools": ["critique_status"]})
            )
            .is_ok()
        );
    }

    #[test]
    fn cwd_must_be_a_directory_inside_the_roots() {
        let root = &roots().dirs()[0];
        let args = AgentRunArgs::parse(
            json!({"cli": "claude", "prompt": "hi", "cwd": "inside"}),
            roots(),
        )
        .unwrap();
        assert_eq!(args.work_dir, Some(root.join("inside")));
        let error = AgentRunArgs::parse(
            json!({"cli": "claude", "prompt": "hi", "cwd": root.join("../outside")}),
            roots(),
        )
        .unwrap_err();
        assert_eq!(error.code, weir_core::FailureCode::InvalidArguments);
        assert!(
            error.message.starts_with("cwd: ") && error.message.contains("outside"),
            "{}",
            error.message
        );
        let error = AgentRunArgs::parse(
            json!({"cli": "claude", "prompt": "hi", "cwd": "file.rs"}),
            roots(),
        )
        .unwrap_err();
        assert!(
            error.message.contains("not a directory"),
            "{}",
            error.message
        );
        let error = AgentRunArgs::parse(
            json!({"cli": "claude", "prompt": "hi", "cwd": "no/such/dir"}),
            roots(),
        )
        .unwrap_err();
        assert!(
            error.message.contains("does not exist"),
            "{}",
            error.message
        );
    }

    #[test]
    fn a_model_that_reads_like_a_flag_is_refused() {
        let refused = AgentRunArgs::parse(
            json!({"cli": "gemini", "prompt": "hi", "model": "--yolo"}),
            roots(),
        )
        .unwrap_err();
        assert!(
            refused
                .message
                .starts_with("model: the model \"--yolo\" is not accepted"),
            "{}",
            refused.message
        );
        // A prompt that reads like a flag is just text.
        assert!(
            AgentRunArgs::parse(json!({"cli": "codex", "prompt": "--version"}), roots()).is_ok()
        );
    }

    /// The tool's schema and parser agree (the check every pack runs).
    #[test]
    fn every_tool_s_schema_and_parser_agree() {
        use weir_runtime::tool_contract::{ToolCheck, check_pack, fields_of, info_of};

        let pack = crate::AgentsPack::new(crate::AgentsConfig::default(), None).unwrap();
        check_pack(
            &pack,
            vec![
                ToolCheck::new(info_of(&pack, "agent_run"), |arguments| {
                    AgentRunArgs::parse(arguments, roots()).map(drop)
                })
                .fields(fields_of::<AgentRunArgs>())
                .sample("model", json!("sonnet"))
                .sample("cwd", json!("inside")),
            ],
        );
    }
}
