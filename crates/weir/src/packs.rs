//! The tool packs this build registers: one function per pack, each behind
//! the cargo feature of the same name (all on by default). `--tools` and
//! `--no-tools` choose among every pack's tools, by tool or pack name
//! (`selection.rs`); `--no-exec` and the like are `--no-tools PACK`.
//!
//! | feature | pack | tools | `weir serve` options |
//! |---|---|---|---|
//! | `exec` | `weir-pack-exec` | `execute_code`, `validate_code`, `list_languages` | `--no-exec`, `--exec-sandbox` |
//! | `critique` | `weir-pack-critique` | `roast` (its `brief`: general, codebase, architecture, security, idea), `critique_status` | `--no-critique`, `--critique-clis`, `--critique-models`, `--critique-home`, `--critique-env`, `--critique-max-parallel`, `--critique-timeout`, `--critique-breaker-failures`, `--critique-breaker-cooldown`, `--critique-cache-ttl`, `--root` |
//! | `agents` | `weir-pack-agents` | `agent_run` (its `weir_tools` served in process by weir-mcp, `in_process.rs`) | `--no-tools agents`, `--critique-models`, `--critique-home`, `--critique-env`, `--critique-timeout`, `--root` |
//! | `llmstxt` | `weir-pack-llmstxt` | `llmstxt_generate`, `llmstxt_validate` | `--llm-endpoint`, `--llm-model`, `--llm-api-key`, `--llm-timeout`, `--llm-idle-timeout`, `--llmstxt-clone-host`, `--root` |
//! | `plan` | `weir-pack-plan` | `plan_run` (and `weir plan run`); its steps reach the declared upstream servers through weir's client | `--upstream`, `--upstreams`, `--upstream-token-env` |
//! | `codeintel` | `weir-pack-codeintel` | `index_repo`, `search_symbols`, `find_references`, `get_architecture`, `explore`, `understand`, `prepare_change` (and `weir index`) | `--no-codeintel`, `--root` (`--codeintel-root` is its alias) |
//! | (weir-mcp) | `runs` | `runs_list`, `runs_get`, `runs_events`, `runs_cancel`, `runs_artifact`, `runs_wait`, `get_status` | |
//! | `fixtures` | `weir-fixtures`, with `--fixtures` only | the conformance suite's tools and `stream` | `--fixtures` |
//! | (always) | the declared upstreams' tools (`upstream_tools.rs`), as `NAME__tool` | each upstream tool; under `weir wrap`, the one upstream's by their own names and no pack | `--upstream`, `--upstreams`, `--upstream-token-env`; `weir wrap -- CMD…` |

#[cfg(feature = "critique")]
mod critique_hints;
mod selection;

use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use weir_runtime::{Pack, Roots};

pub(crate) use selection::{RUNS, Selection};

use crate::cli::ServeArgs;
use crate::in_process::InProcessTools;
use crate::remote_caller::ClientCaller;

/// The directories callers may name: `--root` (or `WEIR_ROOTS`), else the
/// directory weir started in.
pub(crate) fn roots(args: &ServeArgs) -> anyhow::Result<Roots> {
    if args.roots.is_empty() {
        let here = std::env::current_dir()
            .context("reading the current directory (the default --root)")?;
        return Roots::new([here]).context("the current directory as the default --root");
    }
    Roots::new(&args.roots).context("in --root (or WEIR_ROOTS)")
}

/// The packs `args` asks for, built (each may probe the machine first),
/// the plan pack's steps reaching the upstreams through `caller`.
/// `data_dir` holds the runs' store: no pack may let a run see it. `weir
/// wrap` has no pack.
#[cfg_attr(not(feature = "exec"), allow(unused_variables))]
#[cfg_attr(not(feature = "plan"), allow(unused_variables))]
#[cfg_attr(not(feature = "agents"), allow(unused_variables))]
pub(crate) async fn enabled(
    args: &ServeArgs,
    data_dir: &Path,
    roots: &Roots,
    caller: Arc<ClientCaller>,
    in_process: Arc<InProcessTools>,
) -> anyhow::Result<Vec<Box<dyn Pack>>> {
    let mut packs: Vec<Box<dyn Pack>> = Vec::new();
    if args.wrap {
        return Ok(packs);
    }
    // --tools and --no-tools (and --no-exec…): no pack is built for
    // nothing.
    let selection = Selection::from_args(args);
    if args.fixtures && selection.builds("fixtures") {
        packs.push(fixtures()?);
    }
    #[cfg(feature = "exec")]
    if selection.builds("exec") {
        packs.push(Box::new(exec(&args.exec, data_dir).await?));
    }
    // No agent works in or above weir's own data or credentials.
    #[cfg(any(feature = "critique", feature = "agents"))]
    let private: Vec<_> = std::iter::once(data_dir.to_owned())
        .chain(args.tokens_file.clone())
        .collect();
    #[cfg(feature = "critique")]
    if selection.builds("critique") {
        let pack = critique(&args.critique, roots, private.clone())?;
        packs.push(Box::new(critique_hints::Hinted(pack)));
    }
    #[cfg(feature = "agents")]
    if selection.builds("agents") {
        let pack = agents(&args.critique, roots, private, in_process)?;
        packs.push(Box::new(pack));
    }
    #[cfg(feature = "llmstxt")]
    if selection.builds("llmstxt") {
        packs.push(Box::new(llmstxt(&args.llm, roots)?));
    }
    #[cfg(feature = "plan")]
    if selection.builds("plan") {
        packs.push(Box::new(weir_pack_plan::PlanPack::new(Some(caller))));
    }
    #[cfg(feature = "codeintel")]
    if selection.builds("codeintel") {
        packs.push(Box::new(codeintel(args, data_dir, roots)));
    }
    Ok(packs)
}

/// The conformance fixtures' pack (`--fixtures`).
#[cfg(feature = "fixtures")]
fn fixtures() -> anyhow::Result<Box<dyn Pack>> {
    Ok(Box::new(weir_fixtures::FixturesPack))
}

#[cfg(not(feature = "fixtures"))]
fn fixtures() -> anyhow::Result<Box<dyn Pack>> {
    anyhow::bail!(FIXTURES_LEFT_OUT)
}

/// What `--fixtures` gets from a build without them.
#[cfg(not(feature = "fixtures"))]
pub(crate) const FIXTURES_LEFT_OUT: &str = "this weir was built without its `fixtures` feature; build it with the feature to use --fixtures";

/// Where the code indexes live: one SQLite file per repository.
#[cfg(feature = "codeintel")]
pub(crate) fn codeintel_dir(data_dir: &Path) -> std::path::PathBuf {
    data_dir.join("codeintel")
}

#[cfg(feature = "codeintel")]
fn codeintel(
    args: &ServeArgs,
    data_dir: &Path,
    roots: &Roots,
) -> weir_pack_codeintel::CodeIntelPack {
    // With --memory nothing goes to the data directory: the indexes (a
    // cache of the repositories) go to the temporary directory instead.
    let dir = if args.memory {
        std::env::temp_dir().join("weir-codeintel")
    } else {
        codeintel_dir(data_dir)
    };
    // A caller's repository must resolve inside the roots.
    let mut config = weir_pack_codeintel::CodeIntelConfig::new(dir, roots.clone());
    // A page's streamed items count against the result limit: half of it
    // leaves the summary room.
    config.page_bytes = config.page_bytes.min(args.result_limit / 2).max(16 * 1024);
    // The final result's content (the page's lines, then a few lines of
    // summary) gets the other half.
    let fits = (args.result_limit / 2).saturating_sub(8 * 1024) / 4;
    config.result_tokens = args.codeintel.result_tokens.min(fits).max(64);
    weir_pack_codeintel::CodeIntelPack::new(config)
}

#[cfg(feature = "llmstxt")]
pub(crate) fn llmstxt(
    args: &crate::cli::LlmArgs,
    roots: &Roots,
) -> anyhow::Result<weir_pack_llmstxt::LlmsTxtPack> {
    use std::time::Duration;
    use weir_pack_llmstxt::llm::ChatConfig;
    use weir_pack_llmstxt::{CloneConfig, LlmsTxtConfig};
    let model = match (&args.llm_endpoint, &args.llm_model) {
        (Some(endpoint), Some(model)) => {
            let total = Duration::from_secs(args.llm_timeout);
            let defaults = ChatConfig::new(endpoint, model);
            Some(ChatConfig {
                api_key: args.llm_api_key.clone(),
                total_timeout: total,
                idle_timeout: Duration::from_secs(args.llm_idle_timeout),
                first_token_timeout: defaults.first_token_timeout.min(total),
                ..defaults
            })
        }
        (Some(_), None) => anyhow::bail!("--llm-endpoint needs --llm-model (or WEIR_LLM_MODEL)"),
        _ => None,
    };
    let clone = CloneConfig::default().allow_hosts(&args.llmstxt_clone_hosts)?;
    weir_pack_llmstxt::LlmsTxtPack::new(LlmsTxtConfig {
        model,
        roots: roots.clone(),
        clone,
    })
    .context("starting the llms.txt tools (check --llm-endpoint)")
}

#[cfg(feature = "exec")]
async fn exec(
    args: &crate::cli::ExecArgs,
    data_dir: &Path,
) -> anyhow::Result<weir_pack_exec::ExecPack> {
    weir_pack_exec::ExecPack::detect(weir_pack_exec::ExecConfig {
        sandbox: args.exec_sandbox,
        // The sandbox shows only system directories; should the data
        // directory be inside one (say /opt/weir), it is masked there.
        hidden: vec![data_dir.to_owned()],
        ..weir_pack_exec::ExecConfig::default()
    })
    .await
    .context("starting the code execution tools (--no-exec leaves them out)")
}

/// The agents' environment: `--critique-home` as `HOME`, then
/// `--critique-env`.
#[cfg(any(feature = "critique", feature = "agents"))]
fn agent_env(args: &crate::cli::CritiqueArgs) -> Vec<(String, String)> {
    let home = args
        .critique_home
        .iter()
        .map(|home| ("HOME".to_owned(), home.display().to_string()));
    home.chain(args.critique_env.iter().cloned()).collect()
}

#[cfg(feature = "agents")]
fn agents(
    args: &crate::cli::CritiqueArgs,
    roots: &Roots,
    private: Vec<std::path::PathBuf>,
    in_process: Arc<InProcessTools>,
) -> anyhow::Result<weir_pack_agents::AgentsPack> {
    let config = weir_pack_agents::AgentsConfig {
        models: args.critique_models.iter().cloned().collect(),
        env: agent_env(args),
        agent_timeout: std::time::Duration::from_secs(args.critique_timeout.max(1)),
        // The agent works inside a root: the first, unless the call names
        // another directory inside one.
        work_dir: roots.dirs()[0].clone(),
        roots: Some(roots.clone()),
        private,
    };
    // weir_tools: this node's own MCP server answers the agent.
    weir_pack_agents::AgentsPack::new(config, Some(in_process))
        .context("starting agent_run (--no-tools agents leaves it out)")
}

#[cfg(feature = "critique")]
fn critique(
    args: &crate::cli::CritiqueArgs,
    roots: &Roots,
    private: Vec<std::path::PathBuf>,
) -> anyhow::Result<weir_pack_critique::CritiquePack> {
    use std::time::Duration;
    let env = agent_env(args);
    weir_pack_critique::CritiquePack::new(weir_pack_critique::CritiqueConfig {
        clis: args.critique_clis.clone(),
        models: args.critique_models.iter().cloned().collect(),
        env,
        max_parallel: args.critique_max_parallel.max(1),
        agent_timeout: Duration::from_secs(args.critique_timeout.max(1)),
        breaker: weir_core::BreakerConfig {
            failure_threshold: args.critique_breaker_failures.max(1),
            cooldown_ms: args.critique_breaker_cooldown.saturating_mul(1000),
        },
        cache_ttl: Duration::from_secs(args.critique_cache_ttl),
        // An agent works inside a root: the first, unless the call names
        // another directory inside one.
        work_dir: roots.dirs()[0].clone(),
        roots: Some(roots.clone()),
        private,
        ..weir_pack_critique::CritiqueConfig::default()
    })
    .context("starting the critique tools (--no-critique leaves them out)")
}
