//! `weir serve`: the MCP server over stdio or HTTP.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use weir_mcp::catalog::{Catalog, EmptyCatalog};
use weir_mcp::{McpServer, ServerConfig, transport};
use weir_web::GuardOptions;
use weir_web::credentials::{Credentials, ServedTools};

use crate::cli::{DEFAULT_HTTP_ADDR, ServeArgs, WrapArgs};
use crate::exit::Outcome;
use crate::http;
use crate::node::{self, UpstreamTools};
use crate::remote_caller::ClientCaller;
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
    let node = node::assemble(data_dir, &args, upstreams, UpstreamTools::Served).await?;
    let catalog = catalog(&args)?;
    let store = node.store.clone();
    let caller = node.caller.clone();
    let naming = node.naming;
    let server = McpServer::new(
        node.scheduler.clone(),
        catalog,
        ServerConfig {
            result_limit: args.result_limit,
            store: store.clone(),
            defer_after: args.defer_after.map(Duration::from_secs),
            hidden_tools: node.hidden_tools.clone(),
            status_parts: upstream_status(&caller),
            upstreams: upstream_catalog::pass_through(&caller, naming == Naming::Prefixed),
            tools_list_changes: !node.followed.is_empty(),
            ..ServerConfig::default()
        },
    );
    let selection = node.selection.clone();
    let following = Arc::new(upstream_tools::Following {
        caller: caller.clone(),
        naming,
        heartbeat: node.heartbeat,
        scheduler: node.scheduler.clone(),
        server: server.clone(),
        keep: Arc::new(move |upstream: &str, tool: &str| {
            selection.serves(&weir_runtime::upstream_grant(upstream), tool)
        }),
    });
    for (upstream, names) in node.followed.clone() {
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
            let credentials = read_tokens_file(path, &served_tools(node.served.clone()))?;
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
    let options = GuardOptions {
        allowed_origins: args.allowed_origins,
        allowed_hosts: args.allowed_hosts,
        credentials,
    };
    http::serve(server, addr, options, |bound| {
        eprintln!("weir: serving MCP at http://{bound}/mcp ({secured}); run events at http://{bound}/runs/{{id}}/events; the runs dashboard at http://{bound}/; store {store}");
    })
    .await
    .with_context(|| format!("serving HTTP on {addr} (is the port in use? pick another with --http ADDR)"))?;
    Ok(Outcome::Completed)
}

/// The resources and prompts served: the fixtures' with `--fixtures`.
fn catalog(args: &ServeArgs) -> anyhow::Result<Arc<dyn Catalog>> {
    if !args.fixtures {
        return Ok(Arc::new(EmptyCatalog));
    }
    #[cfg(feature = "fixtures")]
    return Ok(Arc::new(weir_fixtures::FixtureCatalog));
    #[cfg(not(feature = "fixtures"))]
    anyhow::bail!(crate::packs::FIXTURES_LEFT_OUT)
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

/// What this server serves, by pack, for the grants of a tokens file:
/// the packs' tools, each upstream's (`upstream:NAME`) and weir's own
/// (`runs`). The agent tools, which a line
/// without a grant does not get, are the agents pack's and the critique
/// pack's but `critique_status` (it starts nothing): a tool either pack
/// adds later is held back until someone decides otherwise.
fn served_tools(packs: Vec<(String, Vec<String>)>) -> ServedTools {
    let mut served = ServedTools::default();
    for (pack, tools) in packs {
        if pack == "critique" || pack == "agents" {
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
