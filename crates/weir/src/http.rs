//! `weir serve --http`'s one router: weir-mcp's `/mcp` and weir-web's
//! routes (`/runs/{id}/events`, the dashboard and its API), every one
//! behind weir-web's guard, whose `weir_runtime::Principal` of a request
//! is the caller `/mcp` serves (so the same runs and calls). Composed here
//! so that neither crate depends on the other.

use std::net::SocketAddr;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use weir_mcp::McpServer;
use weir_web::GuardOptions;

/// Every route `weir serve --http` serves, behind the guard.
pub(crate) fn router(server: McpServer, options: GuardOptions) -> Router {
    let limit = server.max_message_bytes();
    let web = weir_web::routes(server.scheduler().clone());
    let mcp = weir_mcp::transport::http::routes(server);
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
