//! `weir serve --http`'s one router: weir-mcp's `/mcp` and weir-web's
//! routes (`/runs/{id}/events`, the dashboard and its API), every one
//! behind weir-web's guard, whose identity of a request becomes the
//! `Caller` `/mcp` serves (same name, admin flag and tools, so the same
//! runs and calls). Composed here so that neither crate depends on the
//! other.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use weir_mcp::{Caller, McpServer};
use weir_web::{GuardOptions, Identity};

/// Every route `weir serve --http` serves, behind the guard.
pub(crate) fn router(server: McpServer, options: GuardOptions) -> Router {
    let limit = server.max_message_bytes();
    let web = weir_web::routes(server.scheduler().clone());
    let mcp =
        weir_mcp::transport::http::routes(server).layer(axum::middleware::map_request(with_caller));
    weir_web::guarded(mcp.merge(web).layer(DefaultBodyLimit::max(limit)), options)
}

/// Serves [`router`] on `addr` until the process ends, `on_bound` told the
/// bound address; options the guard cannot hold are refused first.
pub(crate) async fn serve(
    server: McpServer,
    addr: SocketAddr,
    options: GuardOptions,
    on_bound: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    options.check()?;
    weir_mcp::transport::http::serve(router(server, options), addr, on_bound).await
}

/// The request, with the caller of the identity the guard admitted.
async fn with_caller(mut request: Request) -> Request {
    if let Some(identity) = request.extensions().get::<Identity>() {
        let caller = caller_of(identity);
        request.extensions_mut().insert(caller);
    }
    request
}

fn caller_of(identity: &Identity) -> Caller {
    let caller = match identity.name() {
        Some(name) => Caller::named(name, identity.is_admin()),
        None => Caller::local(),
    };
    caller.with_tools(identity.allowed_tools().cloned())
}
