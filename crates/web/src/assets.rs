//! The dashboard's static files, compiled into the binary: no CDN, no
//! build step, nothing read from disk at run time.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const GRAPH_JS: &str = include_str!("../assets/graph.js");
const APP_CSS: &str = include_str!("../assets/app.css");

/// Scripts and styles from this server only, and no framing by other sites.
const POLICY: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

fn file(mime: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, mime),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}

/// GET `/`: the page.
pub(crate) async fn index() -> Response {
    file("text/html; charset=utf-8", INDEX_HTML)
}

/// GET `/assets/{name}`.
pub(crate) async fn asset(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "app.js" => file("text/javascript; charset=utf-8", APP_JS),
        "graph.js" => file("text/javascript; charset=utf-8", GRAPH_JS),
        "app.css" => file("text/css; charset=utf-8", APP_CSS),
        _ => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}
