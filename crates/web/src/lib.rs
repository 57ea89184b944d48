//! weir's web edge: the guard in front of every HTTP route, the `/runs` and
//! `/api` routes over the run log, and the runs dashboard at `/`.
//!
//! **For:** what a browser or a plain HTTP client sees of runs, and who may
//! see it. [`guarded`] puts [`GuardOptions`]' checks (`Host`, `Origin`, the
//! bearer token, parsed by [`headers`] and resolved by [`credentials`] to a
//! [`Principal`](weir_runtime::Principal)) in front of a router; [`routes`] gives
//! `GET /runs/{id}/events` (SSE, `Last-Event-ID`), the JSON API
//! (`/api/runs` paged, `/api/runs/live`, `/api/runs/{id}`, its events page,
//! artifacts, `POST /api/runs/{id}/cancel`, `/api/tools`) and the page (`GET /`,
//! `/assets/*`, embedded with `include_str!`).
//!
//! **Not for:** MCP. weir-mcp serves `/mcp` and composes it with these
//! routes behind the one guard; this crate knows runs, not JSON-RPC
//! sessions, and depends on weir-core and weir-runtime only.
//!
//! ```
//! use weir_web::{GuardOptions, guarded, routes};
//! # async fn serve(scheduler: weir_runtime::Scheduler) {
//! let app = guarded(routes(scheduler), GuardOptions::default());
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//! # drop(listener); let _ = app;
//! # }
//! ```

pub mod credentials;
/// The request headers the guard parses (in weir-core, which weir-mcp
/// shares).
pub use weir_core::headers;

mod api;
mod assets;
mod events;
mod guard;
mod index;

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::routing::{get, post};
use weir_runtime::Scheduler;

pub use guard::{GuardOptions, guarded, refusal};

/// What the routes share.
struct Web {
    scheduler: Scheduler,
    /// The run index's poller, started by its first watcher.
    index: OnceLock<index::Index>,
}

impl Web {
    fn index(&self) -> &index::Index {
        self.index
            .get_or_init(|| index::Index::start(self.scheduler.clone()))
    }
}

/// The run routes and the dashboard, to be served behind [`guarded`] (every
/// handler but the static files expects the guard's
/// [`Principal`](weir_runtime::Principal)).
pub fn routes(scheduler: Scheduler) -> Router {
    let web = Arc::new(Web {
        scheduler,
        index: OnceLock::new(),
    });
    Router::new()
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::asset))
        .route("/runs/{run_id}/events", get(events::run_events))
        .route("/api/tools", get(api::tools))
        .route("/api/runs", get(api::list))
        .route("/api/runs/live", get(index::live))
        .route("/api/runs/{run_id}", get(api::detail))
        .route("/api/runs/{run_id}/events", get(api::events))
        .route("/api/runs/{run_id}/artifacts/{name}", get(api::artifact))
        .route("/api/runs/{run_id}/cancel", post(api::cancel))
        .with_state(web)
}
