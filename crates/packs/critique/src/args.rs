//! The tools' arguments: their schemas, the presets, and the checks, with
//! messages that name the field and say what would be accepted.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};
use weir_core::RunError;
use weir_runtime::{Roots, kit};

use crate::paging::Cursor;

/// Largest `content` (and `context`), in bytes.
pub(crate) const MAX_CONTENT_BYTES: usize = 1 << 20;
/// The CLIs `clis` may name.
pub(crate) use weir_agents::BUILT_IN_CLIS as KNOWN_CLIS;
/// What a model name looks like (`weir_agents::check_name`), for the
/// schemas.
pub(crate) use weir_agents::NAME_PATTERN as MODEL_PATTERN;

pub(crate) use weir_runtime::kit::invalid;

/// `model` (the argument `field`), checked to be a model name that cannot
/// be read as a flag on the agent's command line.
pub(crate) fn check_model(field: &str, model: &str) -> Result<(), RunError> {
    weir_agents::check_name("model", model).map_err(|error| invalid(format!("{field}: {error}")))
}

/// Who the agents are asked to be (`roast`'s `brief`), and which input
/// that needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Preset {
    /// `general`: anything, on a path or content.
    General,
    /// `codebase`: a directory or file.
    Codebase,
    /// `architecture`: a design, on a path or content.
    Architecture,
    /// `security`: a path or content, for vulnerabilities.
    Security,
    /// `idea`: an idea, as content.
    Idea,
}

/// Which input a preset needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Needs {
    TargetOrContent,
    Target,
    Content,
}

impl Preset {
    pub(crate) const ALL: [Preset; 5] = [
        Preset::General,
        Preset::Codebase,
        Preset::Architecture,
        Preset::Security,
        Preset::Idea,
    ];

    /// Its name as `brief` takes it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Preset::General => "general",
            Preset::Codebase => "codebase",
            Preset::Architecture => "architecture",
            Preset::Security => "security",
            Preset::Idea => "idea",
        }
    }

    fn named(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|preset| preset.name() == name)
    }

    fn needs(self) -> Needs {
        match self {
            Preset::Codebase => Needs::Target,
            Preset::Idea => Needs::Content,
            _ => Needs::TargetOrContent,
        }
    }

    /// The agents' brief.
    pub(crate) fn brief(self) -> &'static str {
        match self {
            Preset::General => {
                "You are a brutally honest, expert critic. Find what is wrong with the work below: flaws, risks, mistakes and weak reasoning. Be specific and concrete; no praise, no padding."
            }
            Preset::Codebase => {
                "You are a senior engineer doing a brutally honest code review. Read the code in your working directory and find real problems: bugs, race conditions, error handling, security holes, poor abstractions, missing tests, performance traps. Cite file and line for each."
            }
            Preset::Architecture => {
                "You are a principal architect reviewing a system design with brutal honesty. Find where it breaks: scaling limits, single points of failure, consistency and failure modes, coupling, operational burden and cost."
            }
            Preset::Security => {
                "You are a penetration tester reviewing this for security with hostile intent. Find exploitable vulnerabilities: injection, broken authentication or authorization, secrets, unsafe deserialization, path traversal, trust boundary mistakes. Cite file and line where they apply."
            }
            Preset::Idea => {
                "You are a skeptical investor and domain expert. Tear this idea apart with brutal honesty: feasibility, market, competition, cost, risks and the ways it will fail."
            }
        }
    }
}

/// `roast`'s arguments, as sent.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RoastArgs {
    #[serde(default)]
    brief: Option<String>,
    #[serde(default)]
    target: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    context: Option<String>,
    #[serde(default)]
    clis: Option<Vec<String>>,
    #[serde(default)]
    models: Option<BTreeMap<String, String>>,
    #[serde(default)]
    max_parallel: Option<u64>,
    #[serde(default)]
    context_id: Option<String>,
    #[serde(default)]
    resume: Option<bool>,
    #[serde(default)]
    offset: Option<u64>,
    #[serde(default)]
    limit: Option<u64>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    refresh: Option<bool>,
}

/// What a roast call asks for, checked.
#[derive(Debug, PartialEq)]
pub(crate) enum Request {
    /// A page of a stored report; no agent runs.
    Page {
        context_id: String,
        offset: usize,
        limit: usize,
    },
    /// Agents to run.
    Run(RunRequest),
}

/// A critique to run.
#[derive(Debug, PartialEq)]
pub(crate) struct RunRequest {
    pub(crate) preset: Preset,
    pub(crate) target: Option<PathBuf>,
    pub(crate) content: Option<String>,
    pub(crate) context: Option<String>,
    /// Each agent, with its model (`None`: the configured or CLI default).
    pub(crate) agents: Vec<(String, Option<String>)>,
    pub(crate) max_parallel: Option<usize>,
    /// `resume`: the report to continue.
    pub(crate) resume: Option<String>,
    /// The first page's size.
    pub(crate) limit: usize,
    /// Skip the cache.
    pub(crate) refresh: bool,
}

/// What the defaults are where the call says nothing.
pub(crate) struct Defaults<'a> {
    pub(crate) clis: &'a [String],
    pub(crate) page_bytes: usize,
    /// Where a `target` may be.
    pub(crate) roots: &'a Roots,
}

/// Parses and checks a call of `roast`.
pub(crate) fn parse(arguments: Value, defaults: &Defaults<'_>) -> Result<Request, RunError> {
    let args: RoastArgs = kit::parse_object(arguments)?;
    let preset = match args.brief.as_deref() {
        None => Preset::General,
        Some(name) => Preset::named(name).ok_or_else(|| {
            invalid(format!(
                "brief: unknown brief {name:?}; known: {}",
                Preset::ALL.map(Preset::name).join(", ")
            ))
        })?,
    };
    let limit = match args.limit {
        Some(0) => {
            return Err(invalid(
                "limit must be at least 1 (bytes of report per page)",
            ));
        }
        Some(limit) => usize::try_from(limit).unwrap_or(usize::MAX),
        None => defaults.page_bytes,
    };
    let resume = args.resume.unwrap_or(false);
    let running = args.target.is_some() || args.content.is_some();
    if let Some(cursor) = &args.cursor {
        if running || args.context_id.is_some() || args.offset.is_some() || resume {
            return Err(invalid(
                "cursor pages a report on its own: send it with limit at most (it already names the context_id and offset)",
            ));
        }
        let cursor = Cursor::decode(cursor).map_err(invalid)?;
        return Ok(Request::Page {
            context_id: cursor.context_id,
            offset: cursor.offset,
            limit,
        });
    }
    if let Some(context_id) = &args.context_id
        && !resume
    {
        if running {
            return Err(invalid(
                "context_id without resume pages a stored report; to continue the critique with new content, set resume: true",
            ));
        }
        return Ok(Request::Page {
            context_id: context_id.clone(),
            offset: usize::try_from(args.offset.unwrap_or(0)).unwrap_or(usize::MAX),
            limit,
        });
    }
    if resume && args.context_id.is_none() {
        return Err(invalid(
            "resume continues an earlier critique: give its context_id (from that result) and the follow-up as content",
        ));
    }
    if args.offset.is_some() {
        return Err(invalid(
            "offset pages a stored report: give its context_id (a new critique always starts at offset 0)",
        ));
    }
    if resume && args.content.is_none() {
        return Err(invalid(
            "resume needs content: the follow-up question or the changed work to critique",
        ));
    }
    for (field, value) in [("content", &args.content), ("context", &args.context)] {
        if let Some(value) = value {
            if value.trim().is_empty() {
                return Err(invalid(format!("{field} is empty")));
            }
            if value.len() > MAX_CONTENT_BYTES {
                return Err(invalid(format!(
                    "{field} is larger than {MAX_CONTENT_BYTES} bytes; point target at a file instead"
                )));
            }
        }
    }
    match (preset.needs(), &args.target, &args.content, resume) {
        (Needs::Target, None, _, false) => {
            return Err(invalid(format!(
                "brief {} needs target: the directory or file to review",
                preset.name()
            )));
        }
        (Needs::Content, _, None, _) => {
            return Err(invalid(format!(
                "brief {} needs content: the idea to critique",
                preset.name()
            )));
        }
        (Needs::TargetOrContent, None, None, _) => {
            return Err(invalid(
                "roast needs target (a path to review) or content (text to critique)",
            ));
        }
        _ => {}
    }
    let target = match &args.target {
        Some(target) if target.trim().is_empty() => return Err(invalid("target is empty")),
        Some(target) => Some(defaults.roots.resolve_argument("target", target)?),
        None => None,
    };
    let clis = args.clis.unwrap_or_else(|| defaults.clis.to_vec());
    if clis.is_empty() {
        return Err(invalid(format!(
            "clis is empty: name at least one of {}",
            KNOWN_CLIS.join(", ")
        )));
    }
    let mut agents: Vec<(String, Option<String>)> = Vec::new();
    for cli in clis {
        if !KNOWN_CLIS.contains(&cli.as_str()) {
            return Err(invalid(format!(
                "clis: unknown CLI {cli:?}; known: {}",
                KNOWN_CLIS.join(", ")
            )));
        }
        if agents.iter().any(|(known, _)| *known == cli) {
            return Err(invalid(format!("clis names {cli} twice")));
        }
        agents.push((cli, None));
    }
    for (cli, model) in args.models.unwrap_or_default() {
        let Some(agent) = agents.iter_mut().find(|(name, _)| *name == cli) else {
            return Err(invalid(format!(
                "models names {cli}, which is not among the agents of this call ({})",
                agents
                    .iter()
                    .map(|(name, _)| name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if model.trim().is_empty() {
            return Err(invalid(format!("models.{cli} is empty")));
        }
        check_model(&format!("models.{cli}"), &model)?;
        agent.1 = Some(model);
    }
    let max_parallel = match args.max_parallel {
        Some(0) => return Err(invalid("max_parallel must be at least 1")),
        Some(n) => Some(usize::try_from(n).unwrap_or(usize::MAX)),
        None => None,
    };
    Ok(Request::Run(RunRequest {
        preset,
        target,
        content: args.content,
        context: args.context,
        agents,
        max_parallel,
        resume: args.context_id.filter(|_| resume),
        limit,
        refresh: args.refresh.unwrap_or(false),
    }))
}

/// `roast`'s input schema: what a model needs to call it, no more (the
/// parser's messages say the rest).
pub(crate) fn roast_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "brief": {"type": "string", "enum": Preset::ALL.map(Preset::name), "default": "general", "description": "codebase needs target; idea, content."},
            "target": {"type": "string", "description": "A path on the server (inside its roots) to review; the agents run there."},
            "content": {"type": "string", "description": "Text to critique; with resume, the follow-up.", "maxLength": MAX_CONTENT_BYTES},
            "context": {"type": "string", "description": "Background: goals, constraints, focus.", "maxLength": MAX_CONTENT_BYTES},
            "clis": {"type": "array", "items": {"type": "string", "enum": KNOWN_CLIS}, "minItems": 1, "uniqueItems": true, "description": "Agents to run; default: the server's."},
            "models": {"type": "object", "additionalProperties": {"type": "string", "pattern": MODEL_PATTERN}, "description": "A model per CLI."},
            "max_parallel": {"type": "integer", "minimum": 1},
            "context_id": {"type": "string", "description": "An earlier report: pages it, or continues it with resume."},
            "resume": {"type": "boolean"},
            "offset": {"type": "integer", "minimum": 0, "description": "With context_id: a byte offset."},
            "limit": {"type": "integer", "minimum": 1, "description": "Bytes of report per page."},
            "cursor": {"type": "string", "description": "An earlier result's next_cursor."},
            "refresh": {"type": "boolean", "description": "Skip the cache."}
        },
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
            let dir =
                std::env::temp_dir().join(format!("weir-critique-args-{}", std::process::id()));
            for sub in ["root/inside", "outside"] {
                std::fs::create_dir_all(dir.join(sub)).unwrap();
            }
            std::fs::write(dir.join("root/file.rs"), "fn main() {}").unwrap();
            Roots::new([dir.join("root")]).unwrap()
        })
    }

    fn defaults() -> Defaults<'static> {
        static CLIS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
        Defaults {
            clis: CLIS.get_or_init(|| vec!["claude".into(), "gemini".into()]),
            page_bytes: 100,
            roots: roots(),
        }
    }

    /// `arguments` with `brief` set to `preset`'s name.
    fn briefed(preset: Preset, mut arguments: Value) -> Value {
        arguments["brief"] = preset.name().into();
        arguments
    }

    fn error(preset: Preset, arguments: Value) -> String {
        parse(briefed(preset, arguments), &defaults())
            .unwrap_err()
            .message
    }

    #[test]
    fn a_run_takes_the_defaults_and_the_models() {
        let Request::Run(run) = parse(
            json!({"brief": "idea", "content": "a social network for cats", "models": {"gemini": "gemini-2.5-flash"}}),
            &defaults(),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            run.agents,
            [
                ("claude".to_owned(), None),
                ("gemini".to_owned(), Some("gemini-2.5-flash".to_owned()))
            ]
        );
        assert_eq!((run.limit, run.refresh, run.resume), (100, false, None));
        assert_eq!(run.preset, Preset::Idea);
        let Request::Run(run) = parse(json!({"content": "x"}), &defaults()).unwrap() else {
            panic!()
        };
        assert_eq!(run.preset, Preset::General, "general is the default brief");
    }

    #[test]
    fn paging_by_context_id_or_cursor() {
        assert_eq!(
            parse(
                json!({"context_id": "c1", "offset": 5, "limit": 7}),
                &defaults()
            )
            .unwrap(),
            Request::Page {
                context_id: "c1".into(),
                offset: 5,
                limit: 7
            }
        );
        assert_eq!(
            parse(json!({"cursor": "c1@40"}), &defaults()).unwrap(),
            Request::Page {
                context_id: "c1".into(),
                offset: 40,
                limit: 100
            }
        );
    }

    #[test]
    fn bad_calls_say_what_to_do() {
        assert!(
            error(Preset::Codebase, json!({"content": "x"}))
                .contains("brief codebase needs target")
        );
        assert!(
            parse(json!({"brief": "roast_idea", "content": "x"}), &defaults())
                .unwrap_err()
                .message
                .contains("unknown brief \"roast_idea\"; known: general, codebase")
        );
        assert!(error(Preset::Idea, json!({})).contains("needs content"));
        assert!(error(Preset::General, json!({})).contains("target (a path to review) or content"));
        assert!(
            error(Preset::General, json!({"content": "x", "clis": ["vim"]}))
                .contains("unknown CLI \"vim\"")
        );
        assert!(
            error(
                Preset::General,
                json!({"content": "x", "models": {"codex": "m"}})
            )
            .contains("not among the agents")
        );
        assert!(
            error(Preset::General, json!({"resume": true, "content": "x"}))
                .contains("give its context_id")
        );
        assert!(
            error(Preset::General, json!({"context_id": "c", "content": "x"}))
                .contains("set resume: true")
        );
        assert!(
            error(Preset::General, json!({"target": "/no/such/path"})).contains("does not exist")
        );
        assert!(
            error(Preset::General, json!({"cursor": "c@1", "offset": 3})).contains("on its own")
        );
        assert!(
            error(Preset::General, json!({"content": "x", "bogus": 1})).contains("unknown field")
        );
        assert!(
            error(Preset::General, json!({"content": "x", "max_parallel": 0}))
                .contains("at least 1")
        );
    }

    /// The schema and the parser agree on what is accepted.
    #[test]
    fn the_schema_matches_the_parser() {
        let schema = roast_schema();
        for preset in Preset::ALL {
            let call = briefed(
                preset,
                json!({"content": "x", "target": "file.rs", "clis": ["codex"]}),
            );
            assert!(weir_core::check_arguments(&schema, &call).is_ok(), "{call}");
            assert!(parse(call, &defaults()).is_ok(), "{preset:?}");
        }
        for bad in [
            json!({"content": "x", "clis": ["vim"]}),
            json!({"content": "x", "brief": "roast_idea"}),
        ] {
            assert!(weir_core::check_arguments(&schema, &bad).is_err(), "{bad}");
            assert!(parse(bad, &defaults()).is_err());
        }
    }

    #[test]
    fn paths_must_be_inside_the_roots() {
        let root = &roots().dirs()[0];
        let Request::Run(run) = parse(
            json!({"brief": "codebase", "target": "file.rs"}),
            &defaults(),
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(run.target, Some(root.join("file.rs")));
        for target in ["../outside", "/", "inside/../.."] {
            let message = error(Preset::Codebase, json!({ "target": target }));
            assert!(
                message.starts_with("target: ") && message.contains("--root"),
                "{target}: {message}"
            );
        }
    }

    #[test]
    fn a_model_that_reads_like_a_flag_is_refused() {
        let message = error(
            Preset::Idea,
            json!({"content": "x", "models": {"gemini": "-m"}}),
        );
        assert!(message.starts_with("models.gemini: "), "{message}");
    }

    /// Every tool's schema and parser agree (the check every pack runs).
    #[test]
    fn every_tool_s_schema_and_parser_agree() {
        use weir_runtime::tool_contract::{ToolCheck, check_pack, fields_of, info_of};

        let pack = crate::CritiquePack::new(crate::CritiqueConfig::default()).unwrap();
        let info = |name: &str| info_of(&pack, name);
        let page = "a page of a report, not a run: paging_by_context_id_or_cursor";
        check_pack(
            &pack,
            vec![
                ToolCheck::new(info("roast"), |arguments| {
                    parse(arguments, &defaults()).map(drop)
                })
                .fields(fields_of::<RoastArgs>())
                // A run needs content or a target.
                .base(json!({"content": "x"}))
                .except(
                    "brief",
                    "each preset needs its own input: the_schema_matches_the_parser",
                )
                .sample("target", json!("file.rs"))
                .sample("models", json!({"claude": "sonnet"}))
                .except(
                    "context_id",
                    "with resume: true only: bad_calls_say_what_to_do",
                )
                .except("resume", "with a context_id only: bad_calls_say_what_to_do")
                .except("offset", page)
                .except("cursor", page),
                ToolCheck::new(info("critique_status"), |arguments| {
                    crate::status::no_arguments(&arguments)
                }),
            ],
        );
    }
}
