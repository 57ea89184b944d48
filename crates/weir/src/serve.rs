//! `weir serve`: the MCP server over stdio or HTTP.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use weir_mcp::catalog::{Catalog, EmptyCatalog};
use weir_mcp::transport::http::HttpOptions;
use weir_mcp::transport::http::credentials::{Credentials, ServedTools};
use weir_mcp::{McpServer, ServerConfig, transport};
use weir_runtime::{EventLog, MemoryLog, Scheduler, SchedulerConfig};

use crate::cli::{DEFAULT_HTTP_ADDR, ServeArgs, WrapArgs};
use crate::exit::Outcome;
use crate::packs;
use crate::remote_caller::ClientCaller;
use crate::store;
use crate::upstream_catalog;
use crate::upstream_tools::{self, Naming};
use crate::upstreams::Upstreams;

pub(crate) async fn run(data_dir: &Path, args: ServeArgs) -> anyhow::Result<Outcome> {
    let upstreams = Upstreams::from_args(&args.upstreams)?;
    serve(data_dir, args, upstreams).await
}

/// `weir wrap`: `weir serve` (stdio unless --http) with the command as its
/// one upstream, whose tools keep their names, and no pack of weir's.
pub(crate) async fn wrap(data_dir: &Path, wrap: WrapArgs) -> anyhow::Result<Outcome> {
    let WrapArgs { mut serve, command } = wrap;
    if !Upstreams::from_args(&serve.upstreams)?.is_empty() {
        anyhow::bail!(
            "weir wrap serves one server, the command after `--`; to serve several, declare them to weir serve with --upstream or --upstreams"
        );
    }
    serve.wrap = true;
    serve.stdio = serve.http.is_none();
    let upstreams = Upstreams::wrapped(&command)?;
    self::serve(data_dir, serve, upstreams).await
}

async fn serve(data_dir: &Path, args: ServeArgs, upstreams: Upstreams) -> anyhow::Result<Outcome> {
    // Logs go to stderr: stdout may be the MCP channel.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let mut membership = None;
    let (log, store): (Arc<dyn EventLog>, String) = if args.memory {
        (Arc::new(MemoryLog::new()), "memory".into())
    } else if let Some(url) = &args.redis {
        let (log, store, node) = open_redis(url, &args).await?;
        membership = Some(node);
        (log, store)
    } else {
        let log = store::sqlite(data_dir)?;
        let path = store::db_path(data_dir);
        (Arc::new(log), format!("sqlite:{}", path.display()))
    };
    let catalog: Arc<dyn Catalog> = if args.fixtures {
        Arc::new(weir_fixtures::FixtureCatalog)
    } else {
        Arc::new(EmptyCatalog)
    };
    let mut tools = Vec::new();
    // Each pack's tools by its name, for the grants of a tokens file.
    let mut served = Vec::new();
    // Each pack's tools before --tools and --no-tools chose among them.
    let selection = Arc::new(packs::Selection::from_args(&args));
    let mut offered = vec![(packs::RUNS.to_owned(), weir_mcp::builtin_tool_names())];
    let roots = packs::roots(&args)?;
    let caller = Arc::new(ClientCaller::new(upstreams));
    for pack in packs::enabled_with(&args, data_dir, &roots, caller.clone()).await? {
        if let Some(warning) = pack.warning() {
            eprintln!("weir: warning: {warning}");
        }
        let (names, pack_tools) = select(&selection, pack.name(), pack.tools(), &mut offered);
        served.push((pack.name().to_owned(), names));
        tools.extend(pack_tools);
    }
    // The upstreams' tools, which may not shadow weir's (`upstream:NAME`
    // in a tokens file's grants).
    let naming = if args.wrap {
        Naming::AsIs
    } else {
        Naming::Prefixed
    };
    let taken = tools
        .iter()
        .map(|tool| tool.info().name)
        .chain(weir_mcp::builtin_tool_names())
        .collect();
    let heartbeat = Duration::from_secs(args.upstream_heartbeat.max(1));
    // Each upstream's tools, kept current when its list changes.
    let mut followed = Vec::new();
    for (server, upstream) in upstream_tools::discover(&caller, naming, &taken, heartbeat).await {
        let pack = format!("upstream:{server}");
        let (names, upstream) = select(&selection, &pack, upstream, &mut offered);
        followed.push((server, names.iter().cloned().collect()));
        served.push((pack, names));
        tools.extend(upstream);
    }
    selection.check(&offered)?;
    let hidden_tools = weir_mcp::builtin_tool_names()
        .into_iter()
        .filter(|tool| !selection.serves(packs::RUNS, tool))
        .collect();
    let config = SchedulerConfig {
        max_concurrent: args.max_concurrent,
        max_per_tool: args.max_concurrent,
        max_queue: args.max_queue,
        retention: (args.retention_days > 0)
            .then(|| Duration::from_secs(args.retention_days * 86_400)),
        node: membership
            .as_ref()
            .map_or_else(|| SchedulerConfig::default().node, node_name),
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::start(log, tools, config).await?;
    if let Some(node) = &membership {
        serve_node(node, &scheduler);
    }
    let server = McpServer::new(
        scheduler.clone(),
        catalog,
        ServerConfig {
            result_limit: args.result_limit,
            store: store.clone(),
            defer_after: args.defer_after.map(Duration::from_secs),
            hidden_tools,
            status_parts: upstream_status(&caller),
            upstreams: upstream_catalog::pass_through(&caller, naming == Naming::Prefixed),
            tools_list_changes: !followed.is_empty(),
            ..ServerConfig::default()
        },
    );
    let following = Arc::new(upstream_tools::Following {
        caller: caller.clone(),
        naming,
        heartbeat,
        scheduler,
        server: server.clone(),
        keep: Arc::new(move |upstream: &str, tool: &str| {
            selection.serves(&format!("upstream:{upstream}"), tool)
        }),
    });
    for (upstream, names) in followed {
        upstream_tools::follow_changes(following.clone(), upstream, names);
    }
    if args.stdio {
        let scheduler = server.scheduler().clone();
        transport::stdio::serve_stdio(server)
            .await
            .context("serving stdio")?;
        // The client is gone: end its runs as canceled rather than leaving
        // them to be found interrupted at the next start.
        scheduler
            .shutdown("the client closed stdin", Duration::from_secs(2))
            .await;
        caller.close().await;
        return Ok(Outcome::Completed);
    }
    let addr = args
        .http
        .unwrap_or_else(|| DEFAULT_HTTP_ADDR.parse().expect("valid default"));
    let (credentials, secured) = match (&args.token, &args.tokens_file) {
        (_, Some(path)) => {
            let credentials = read_tokens_file(path, &served_tools(served))?;
            let names: Vec<&str> = credentials.names().collect();
            let secured = format!(
                "bearer tokens of {}: {}; each sees only its own runs unless admin",
                path.display(),
                names.join(", ")
            );
            (credentials, secured)
        }
        (Some(token), None) => (Credentials::single(token), "bearer token required".into()),
        (None, None) => (
            Credentials::none(),
            "no token (pass --token or --tokens-file to require one)".into(),
        ),
    };
    let options = HttpOptions {
        allowed_origins: args.allowed_origins,
        allowed_hosts: args.allowed_hosts,
        credentials,
    };
    transport::http::serve_http(server, addr, options, |bound| {
        eprintln!("weir: serving MCP at http://{bound}/mcp ({secured}); run events at http://{bound}/runs/{{id}}/events; the runs dashboard at http://{bound}/; store {store}");
    })
    .await
    .with_context(|| format!("serving HTTP on {addr} (is the port in use? pick another with --http ADDR)"))?;
    Ok(Outcome::Completed)
}

/// `get_status`'s `upstreams`: each declared upstream's health, when there
/// are any.
fn upstream_status(caller: &Arc<ClientCaller>) -> Vec<weir_mcp::StatusPart> {
    if weir_runtime::RemoteCaller::servers(caller.as_ref()).is_empty() {
        return Vec::new();
    }
    let caller = caller.clone();
    vec![weir_mcp::StatusPart {
        key: "upstreams".into(),
        report: Arc::new(move || caller.status()),
    }]
}

/// Of `tools`, the pack `pack`'s, those `selection` serves, and their
/// names; every one is recorded in `offered`, for
/// [`packs::Selection::check`].
fn select(
    selection: &packs::Selection,
    pack: &str,
    tools: Vec<Arc<dyn weir_runtime::Tool>>,
    offered: &mut Vec<(String, Vec<String>)>,
) -> (Vec<String>, Vec<Arc<dyn weir_runtime::Tool>>) {
    let all = tools.iter().map(|tool| tool.info().name).collect();
    offered.push((pack.to_owned(), all));
    let kept: Vec<_> = tools
        .into_iter()
        .filter(|tool| selection.serves(pack, &tool.info().name))
        .collect();
    let names = kept.iter().map(|tool| tool.info().name).collect();
    (names, kept)
}

/// This node among those sharing a Redis: its lease, kept while it serves.
#[cfg(feature = "redis")]
type Membership = weir_store_redis::Node;
#[cfg(not(feature = "redis"))]
type Membership = std::convert::Infallible;

/// The Redis store of `--redis`, checked to answer, and this node's lease
/// on it (refused when a live node has the same `--node` name).
#[cfg(feature = "redis")]
async fn open_redis(
    url: &str,
    args: &ServeArgs,
) -> anyhow::Result<(Arc<dyn EventLog>, String, Membership)> {
    use weir_store_redis::{Node, NodeOptions};
    let log = store::redis(url).await?;
    let name = match &args.node {
        Some(name) => name.clone(),
        None => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|host| host.trim().to_owned())
                .unwrap_or_else(|_| "node".into());
            format!("{host}-{}", std::process::id())
        }
    };
    let options = NodeOptions {
        name,
        lease: Duration::from_millis(args.node_lease_ms.max(300)),
    };
    let node = Node::join(&log, options).await?;
    let store = format!("redis:{url} as node {}", node.name());
    Ok((Arc::new(log), store, node))
}

#[cfg(not(feature = "redis"))]
async fn open_redis(
    url: &str,
    _args: &ServeArgs,
) -> anyhow::Result<(Arc<dyn EventLog>, String, Membership)> {
    match store::redis(url).await? {}
}

#[cfg(feature = "redis")]
fn node_name(node: &Membership) -> String {
    node.name().to_owned()
}

#[cfg(not(feature = "redis"))]
fn node_name(node: &Membership) -> String {
    match *node {}
}

#[cfg(feature = "redis")]
fn serve_node(node: &Membership, scheduler: &Scheduler) {
    node.serve(scheduler);
}

#[cfg(not(feature = "redis"))]
fn serve_node(node: &Membership, _scheduler: &Scheduler) {
    match *node {}
}

/// What this server serves, by pack, for the grants of a tokens file:
/// the packs' tools, each upstream's (`upstream:NAME`) and weir's own
/// (`runs`). The agent tools, which a line
/// without a grant does not get, are the critique pack's but
/// `critique_status` (it starts nothing): a tool that pack adds later is
/// held back until someone decides otherwise.
fn served_tools(packs: Vec<(String, Vec<String>)>) -> ServedTools {
    let mut served = ServedTools::default();
    for (pack, tools) in packs {
        if pack == "critique" {
            let agents = tools.iter().filter(|tool| *tool != "critique_status");
            served.agent_tools.extend(agents.cloned());
        }
        let mut tools: std::collections::BTreeSet<String> = tools.into_iter().collect();
        if pack.starts_with("upstream:") {
            // Not a tool: the grant of the upstream's resources and
            // prompts, which the MCP server looks for.
            tools.insert(pack.clone());
        }
        served.packs.insert(pack, tools);
    }
    let own = weir_mcp::builtin_tool_names().into_iter().collect();
    served.packs.insert("runs".to_owned(), own);
    served
}

/// The credentials of `--tokens-file`, their grants checked against what
/// this server serves. A file others may write is refused
/// (they could add an admin), as is one others may read that holds tokens
/// themselves; one others may read that holds only digests is served, with
/// a warning (a weak token can be guessed from its digest).
fn read_tokens_file(path: &Path, served: &ServedTools) -> anyhow::Result<Credentials> {
    use std::os::unix::fs::MetadataExt;
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the tokens file {shown}"))?;
    let credentials = Credentials::parse(&text)
        .and_then(|credentials| credentials.resolve(served))
        .with_context(|| format!("in the tokens file {shown}"))?;
    let mode = std::fs::metadata(path)
        .with_context(|| format!("reading the tokens file {shown}"))?
        .mode()
        & 0o777;
    if mode & 0o022 != 0 {
        anyhow::bail!(
            "the tokens file {shown} may be written by other users (mode {mode:o}), who could add a token of their own: chmod 600 {shown}"
        );
    }
    if mode & 0o044 != 0 {
        if credentials.holds_tokens() {
            anyhow::bail!(
                "the tokens file {shown} holds tokens (token:...) and may be read by other users (mode {mode:o}): chmod 600 {shown}, or write each token's SHA-256 (sha256:...) instead"
            );
        }
        eprintln!(
            "weir: warning: the tokens file {shown} may be read by other users (mode {mode:o}); it holds only digests, but a weak token can be guessed from its digest: chmod 600 {shown}"
        );
    }
    Ok(credentials)
}
