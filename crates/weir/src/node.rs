//! One node: `weir serve`'s options made into its run store, its packs'
//! (and upstreams') tools, the scheduler that runs them and, on a shared
//! Redis, its membership among the nodes there. `weir serve` and `weir
//! plan run` (with the options after its `--`) both assemble theirs here,
//! so the same options mean the same node: `plan run -- --redis URL` keeps
//! its runs in that Redis, as `serve --redis URL` does.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use weir_runtime::{EventLog, MemoryLog, Scheduler, SchedulerConfig, Tool};

use crate::cli::ServeArgs;
use crate::in_process::InProcessTools;
use crate::packs;
use crate::remote_caller::ClientCaller;
use crate::store;
use crate::upstream_tools::{self, Naming};
use crate::upstreams::Upstreams;

/// Whether the node serves the upstreams' tools as its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UpstreamTools {
    /// Listed from each upstream and served (`weir serve`, `weir wrap`).
    Served,
    /// Only reached through the caller, by the plan pack's steps (`weir
    /// plan run`, which serves no one).
    #[cfg_attr(not(feature = "plan"), allow(dead_code))]
    Reached,
}

/// An assembled node, running.
pub(crate) struct Node {
    pub(crate) scheduler: Scheduler,
    /// The store, as `weir serve` names it when it starts.
    pub(crate) store: String,
    /// The declared upstreams, for the packs and the served upstream tools.
    pub(crate) caller: Arc<ClientCaller>,
    /// Each pack's served tools by its name, for a tokens file's grants.
    pub(crate) served: Vec<(String, Vec<String>)>,
    /// `--tools` and `--no-tools`.
    pub(crate) selection: Arc<packs::Selection>,
    /// How the upstreams' tools are named.
    pub(crate) naming: Naming,
    /// How often an upstream is asked whether it is alive.
    pub(crate) heartbeat: Duration,
    /// Each upstream whose tools are served, and their names, to follow
    /// its changes.
    pub(crate) followed: Vec<(String, BTreeSet<String>)>,
    /// weir's own tools `--tools` and `--no-tools` left out.
    pub(crate) hidden_tools: BTreeSet<String>,
    /// This node's lease among the nodes on a Redis: held while the node is.
    _membership: Option<Membership>,
}

/// The node `args` describes, its runs in `data_dir` unless `--memory` or
/// `--redis` says otherwise, started.
pub(crate) async fn assemble(
    data_dir: &Path,
    args: &ServeArgs,
    upstreams: Upstreams,
    upstream_tools: UpstreamTools,
) -> anyhow::Result<Node> {
    let (log, store, membership) = open_store(data_dir, args).await?;
    let caller = Arc::new(ClientCaller::new(upstreams));
    let selection = Arc::new(packs::Selection::from_args(args));
    let mut tools = Tools::default();
    tools
        .offered
        .push((packs::RUNS.to_owned(), weir_mcp::builtin_tool_names()));
    let roots = packs::roots(args)?;
    let in_process = Arc::new(InProcessTools::default());
    let packs = packs::enabled(args, data_dir, &roots, caller.clone(), in_process.clone());
    for pack in packs.await? {
        if let Some(warning) = pack.warning() {
            eprintln!("weir: warning: {warning}");
        }
        tools.add(&selection, pack.name(), pack.tools());
    }
    // The upstreams' tools, which may not shadow weir's (`upstream:NAME`
    // in a tokens file's grants).
    let naming = if args.wrap {
        Naming::AsIs
    } else {
        Naming::Prefixed
    };
    let heartbeat = Duration::from_secs(args.upstream_heartbeat.max(1));
    let mut followed = Vec::new();
    if upstream_tools == UpstreamTools::Served {
        let taken = tools
            .tools
            .iter()
            .map(|tool| tool.info().name)
            .chain(weir_mcp::builtin_tool_names())
            .collect();
        for (server, upstream) in upstream_tools::discover(&caller, naming, &taken, heartbeat).await
        {
            let names = tools.add(&selection, &weir_runtime::upstream_grant(&server), upstream);
            followed.push((server, names.into_iter().collect()));
        }
    }
    selection.check(&tools.offered)?;
    let hidden_tools = weir_mcp::builtin_tool_names()
        .into_iter()
        .filter(|tool| !selection.serves(packs::RUNS, tool))
        .collect();
    let config = scheduler_config(args, membership.as_ref());
    let scheduler = Scheduler::start(log, tools.tools, config).await?;
    // The server that answers the agents' in-process servers: weir-mcp's,
    // over this scheduler, its results cut where /mcp cuts them.
    in_process.fill(weir_mcp::McpServer::new(
        scheduler.clone(),
        Arc::new(weir_mcp::catalog::EmptyCatalog),
        weir_mcp::ServerConfig {
            result_limit: args.result_limit,
            ..weir_mcp::ServerConfig::default()
        },
    ));
    if let Some(node) = &membership {
        serve_node(node, &scheduler);
    }
    Ok(Node {
        scheduler,
        store,
        caller,
        served: tools.served,
        selection,
        naming,
        heartbeat,
        followed,
        hidden_tools,
        _membership: membership,
    })
}

/// The tools chosen so far, and what was offered to choose from.
#[derive(Default)]
struct Tools {
    tools: Vec<Arc<dyn Tool>>,
    /// Each pack's served tools by its name.
    served: Vec<(String, Vec<String>)>,
    /// Each pack's tools before `--tools` and `--no-tools` chose among
    /// them, for [`packs::Selection::check`].
    offered: Vec<(String, Vec<String>)>,
}

impl Tools {
    /// Adds those of pack `pack`'s `tools` that `selection` serves;
    /// returns their names.
    fn add(
        &mut self,
        selection: &packs::Selection,
        pack: &str,
        tools: Vec<Arc<dyn Tool>>,
    ) -> Vec<String> {
        let all = tools.iter().map(|tool| tool.info().name).collect();
        self.offered.push((pack.to_owned(), all));
        let kept: Vec<_> = tools
            .into_iter()
            .filter(|tool| selection.serves(pack, &tool.info().name))
            .collect();
        let names: Vec<String> = kept.iter().map(|tool| tool.info().name).collect();
        self.served.push((pack.to_owned(), names.clone()));
        self.tools.extend(kept);
        names
    }
}

/// The run store of `--memory`, `--redis` or the data directory, named as
/// `weir serve` says it, and the node's membership on a Redis.
async fn open_store(
    data_dir: &Path,
    args: &ServeArgs,
) -> anyhow::Result<(Arc<dyn EventLog>, String, Option<Membership>)> {
    if args.memory {
        return Ok((Arc::new(MemoryLog::new()), "memory".into(), None));
    }
    if let Some(url) = &args.redis {
        let (log, store, node) = open_redis(url, args).await?;
        return Ok((log, store, Some(node)));
    }
    let log = store::sqlite(data_dir)?;
    let path = store::db_path(data_dir);
    Ok((Arc::new(log), format!("sqlite:{}", path.display()), None))
}

fn scheduler_config(args: &ServeArgs, membership: Option<&Membership>) -> SchedulerConfig {
    SchedulerConfig {
        max_concurrent: args.max_concurrent,
        max_per_tool: args.max_concurrent,
        max_queue: args.max_queue,
        retention: (args.retention_days > 0)
            .then(|| Duration::from_secs(args.retention_days * 86_400)),
        node: membership.map_or_else(|| SchedulerConfig::default().node, node_name),
        ..SchedulerConfig::default()
    }
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
