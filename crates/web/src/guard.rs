//! Every route's gate: DNS-rebinding protection (`Host`, `Origin`) and the
//! bearer token, checked before any handler runs (SECURITY.md, "The HTTP
//! server"). The [`Principal`] the token names goes to every handler (`/mcp`'s
//! too, when the binary composes it here) as a request extension. The one place the headers of [`crate::headers`] are judged.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use weir_runtime::Principal;

use crate::credentials::Credentials;
use crate::headers::{bearer_token, parse_authority, parse_origin};

/// Security settings of the HTTP server.
#[derive(Clone, Debug, Default)]
pub struct GuardOptions {
    /// Origins allowed besides loopback ones (`http(s)://localhost:*`,
    /// `http(s)://127.0.0.0/8:*`, `http(s)://[::1]:*`), as
    /// `scheme://host[:port]`, e.g. `https://app.example`; compared as
    /// origins (case, default ports), not as text.
    pub allowed_origins: Vec<String>,
    /// Hosts allowed in `Host` besides loopback (for a non-loopback bind):
    /// `host` (any port) or `host:port`, e.g. `weir.internal:8765`.
    pub allowed_hosts: Vec<String>,
    /// When there are any, every request but the dashboard's static files
    /// needs `Authorization: Bearer <token>` with one of their tokens, and
    /// is served as the identity that token names: one that is not an admin
    /// sees only its own runs.
    pub credentials: Credentials,
}

impl GuardOptions {
    /// Refuses allowed hosts and origins that could never match a request,
    /// so a typo is found at start rather than as a 403 later.
    pub fn check(&self) -> std::io::Result<()> {
        let invalid =
            |message: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, message);
        for host in &self.allowed_hosts {
            parse_authority(host.as_bytes()).map_err(|error| {
                invalid(format!(
                    "allowed host {host:?} is not host[:port] ({error}); write e.g. example.com or example.com:8765"
                ))
            })?;
        }
        for origin in &self.allowed_origins {
            parse_origin(origin.as_bytes()).map_err(|error| {
                invalid(format!(
                    "allowed origin {origin:?} is not scheme://host[:port] ({error}); write e.g. https://app.example"
                ))
            })?;
        }
        Ok(())
    }
}

/// `router` behind the guard: every route, the ones merged in before
/// included, answers only requests the guard admits.
pub fn guarded(router: Router, options: GuardOptions) -> Router {
    router.layer(middleware::from_fn_with_state(Arc::new(options), guard))
}

/// A refusal in JSON-RPC's error form (`invalid request`, no id): MCP
/// clients read the body of any answer from `/mcp` as JSON-RPC, and a
/// person reads its `message`.
pub fn refusal(status: StatusCode, message: &str) -> Response {
    const INVALID_REQUEST: i32 = -32600;
    let body = json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": INVALID_REQUEST, "message": message },
    });
    (status, axum::Json(body)).into_response()
}

async fn guard(
    State(options): State<Arc<GuardOptions>>,
    mut request: Request,
    next: Next,
) -> Response {
    match admit(&options, request.method(), request.uri(), request.headers()) {
        Ok(identity) => {
            if let Some(identity) = identity {
                request.extensions_mut().insert(identity);
            }
            next.run(request).await
        }
        Err(refusal) => refusal,
    }
}

/// Whether the path is one of the dashboard's static files: the page has no
/// data in it, and a browser cannot send a bearer token when it follows a
/// link, so these need no token (their `Host` and `Origin` are checked all
/// the same). The page then asks for the token and sends it with each call.
fn is_static(method: &Method, path: &str) -> bool {
    *method == Method::GET && (path == "/" || path.starts_with("/assets/"))
}

/// The identity when the request may be served (none for a static file);
/// `Err` is the refusal.
// A ready response as the error keeps the gate to one early return; its size
// does not matter on this path.
#[allow(clippy::result_large_err)]
fn admit(
    options: &GuardOptions,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> Result<Option<Principal>, Response> {
    // RFC 9112 §3.2: a request without a Host, with two, or with one that is
    // not an authority is a bad request. An absolute-form target names a
    // host too; both must pass.
    let mut hosts: Vec<&[u8]> = headers
        .get_all(header::HOST)
        .iter()
        .map(HeaderValue::as_bytes)
        .collect();
    if hosts.len() > 1 {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            "more than one Host header: send exactly one",
        ));
    }
    hosts.extend(
        uri.authority()
            .map(|authority| authority.as_str().as_bytes()),
    );
    if hosts.is_empty() {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            "no Host header: send Host with the address you connect to",
        ));
    }
    for value in &hosts {
        let host = parse_authority(value).map_err(|error| {
            refusal(
                StatusCode::BAD_REQUEST,
                &format!(
                    "Host {:?} is not host[:port]: {error}; send the address you connect to",
                    String::from_utf8_lossy(value)
                ),
            )
        })?;
        let allowed = host.host.is_loopback()
            || options.allowed_hosts.iter().any(|allowed| {
                parse_authority(allowed.as_bytes()).is_ok_and(|allowed| {
                    allowed.host.same(&host.host)
                        && allowed.port.is_none_or(|port| host.port == Some(port))
                })
            });
        if !allowed {
            return Err(refusal(
                StatusCode::FORBIDDEN,
                &format!(
                    "host {:?} is not allowed; start weir with --allow-host {} to permit it",
                    String::from_utf8_lossy(value),
                    host.host
                ),
            ));
        }
    }
    // Browsers send Origin on every cross-origin request (and on POSTs); a
    // client that sends none is not a page that DNS rebinding could drive.
    let mut origins = headers.get_all(header::ORIGIN).iter();
    let origin = origins.next();
    if let Some(value) = origin {
        let refused = |reason: String| {
            refusal(
                StatusCode::FORBIDDEN,
                &format!(
                    "origin {:?} is not allowed: {reason}",
                    String::from_utf8_lossy(value.as_bytes())
                ),
            )
        };
        if origins.next().is_some() {
            return Err(refused("more than one Origin header".into()));
        }
        let origin = parse_origin(value.as_bytes()).map_err(|error| refused(error.to_string()))?;
        let allowed = origin.is_loopback()
            || options.allowed_origins.iter().any(|allowed| {
                parse_origin(allowed.as_bytes()).is_ok_and(|allowed| allowed.same(&origin))
            });
        if !allowed {
            return Err(refused(format!(
                "start weir with --allow-origin {origin} to permit it"
            )));
        }
    }
    // The dashboard's actions (cancel) change state: only its own page may
    // ask for them. Any loopback origin passes the check above — another
    // local app's page too — so these need the page's own origin, which a
    // form or script of another site cannot send (CSRF).
    if *method != Method::GET && uri.path().starts_with("/api/") {
        let same = origin.is_some_and(|value| {
            parse_origin(value.as_bytes()).is_ok_and(|origin| {
                hosts.iter().all(|host| {
                    // This server speaks plain HTTP: no port is 80.
                    parse_authority(host).is_ok_and(|host| {
                        origin.scheme.eq_ignore_ascii_case("http")
                            && origin.authority.host.same(&host.host)
                            && origin.port() == Some(host.port.unwrap_or(80))
                    })
                })
            })
        });
        if !same {
            return Err(refusal(
                StatusCode::FORBIDDEN,
                "the dashboard's actions need Origin to be the dashboard's own (scheme://host:port of this server)",
            ));
        }
    }
    if is_static(method, uri.path()) {
        return Ok(None);
    }
    if options.credentials.is_empty() {
        return Ok(Some(Principal::local()));
    }
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let presented = match (values.next(), values.next()) {
        (Some(value), None) => bearer_token(value.as_bytes()),
        _ => None,
    };
    match presented.and_then(|presented| options.credentials.identify(presented)) {
        Some(identity) => Ok(Some(identity)),
        None => {
            let mut refused = refusal(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token: send Authorization: Bearer <token>",
            );
            refused
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            Err(refused)
        }
    }
}
