//! The HTTP transport as a client reaches it: requests built from the
//! input (method, target, headers, body) go through the real router
//! (composed as the `weir` binary composes it, in its `src/http.rs`:
//! weir-web's guard that checks Host, Origin and the bearer token, then
//! weir-mcp's `POST|GET|DELETE /mcp` and weir-web's
//! `GET /runs/{id}/events`, where a JSON body becomes an `Incoming`),
//! against a server with the fixture tools, without a socket.
//!
//! Properties:
//! - the guard's verdict is the rule's: a request whose Host (or target
//!   authority) is not loopback or the allowed host, whose Origin is not
//!   loopback or the allowed origin, or that lacks the token when one is
//!   set, is refused with 400, 403 or 401 as the rule says, and a request
//!   that passes is never answered 401 or 403 by anything behind it;
//! - nothing answers 5xx;
//! - a JSON answer is one JSON-RPC message, and every SSE `data:` line is
//!   JSON.
//!
//! A header value `SESSION` stands for the session id the server handed
//! out last, so that sequences of requests reach a session's methods.
#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri, header};
use futures_util::StreamExt;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use tower::ServiceExt;
use weir_fuzz::{Vocabulary, object, string, value};
use weir_mcp::McpServer;
use weir_mcp::ServerConfig;
use weir_mcp::transport::http::headers::{parse_authority, parse_origin};
use weir_web::GuardOptions as HttpOptions;
use weir_web::credentials::Credentials;

/// `/mcp` and weir-web's routes behind weir-web's guard, the guard's
/// principal of a request `/mcp`'s caller: the `weir` binary's router.
fn router(server: McpServer, options: HttpOptions) -> axum::Router {
    let web = weir_web::routes(server.scheduler().clone());
    let mcp = weir_mcp::transport::http::routes(server);
    weir_web::guarded(mcp.merge(web), options)
}

const TOKEN: &str = "s3cret";
const ALLOWED_HOST: &str = "weir.internal";
const ALLOWED_ORIGIN: &str = "https://app.example";
const MAX_REQUESTS: usize = 6;
/// How long (virtual) an answer's body is read: an SSE stream may stay
/// open for as long as its session lives.
const READ_FOR: Duration = Duration::from_secs(5);

/// Header values, whole or as a start: what the guard decides on.
const WORDS: &[&str] = &[
    "localhost",
    "localhost:8765",
    "LOCALHOST",
    "127.0.0.1",
    "127.0.0.1:8765",
    "127.1",
    "[::1]",
    "[::1]:8765",
    "[::ffff:127.0.0.1]",
    "weir.internal",
    "weir.internal:1",
    "evil.com",
    "127.0.0.1.evil.com",
    "localhost:80.evil.com",
    "[::1]evil.com",
    "http://localhost:3000",
    "https://127.0.0.1",
    "http://[::1]:8080",
    "https://app.example",
    "https://app.example:443",
    "http://app.example",
    "null",
    "file://localhost",
    "Bearer s3cret",
    "bearer s3cret",
    "BEARER   s3cret",
    "Bearer s3cre",
    "Basic czNjcmV0",
    "application/json",
    "application/json; charset=utf-8",
    "application/jsonx",
    "application/json; charset=latin1",
    "text/event-stream",
    "application/json, text/event-stream",
    "2025-11-25",
    "2026-07-28",
    "2025-06-18",
    "SESSION",
    "tools/call",
    "initialize",
    "0",
    "18446744073709551615",
];

const METHODS: &[&str] = &[
    "initialize",
    "notifications/initialized",
    "ping",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/result",
    "tasks/list",
    "tasks/cancel",
    "tasks/update",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "notifications/cancelled",
];

const VOCABULARY: Vocabulary = Vocabulary {
    keys: &[
        "name",
        "arguments",
        "_meta",
        "protocolVersion",
        "capabilities",
        "clientInfo",
        "progressToken",
        "partialResultToken",
        "partialResults",
        "task",
        "ttl",
        "taskId",
        "uri",
        "cursor",
        "level",
        "requestId",
        "reason",
        "ref",
        "argument",
        "value",
        "type",
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/logLevel",
        "io.modelcontextprotocol/tasks",
        "extensions",
        "elicitation",
        "sampling",
        "count",
        "size",
        "interval_ms",
        "mode",
        "run_id",
        "from",
        "limit",
        "state",
        "tool",
        "id",
        "jsonrpc",
        "method",
        "params",
        "result",
        "error",
    ],
    strings: &[
        "2025-11-25",
        "2026-07-28",
        "2025-06-18",
        "test_simple_text",
        "test_error_handling",
        "test_tool_with_logging",
        "test_tool_with_progress",
        "test_sampling",
        "test_elicitation",
        "test_image_content",
        "json_schema_2020_12_tool",
        "stream",
        "runs_list",
        "runs_get",
        "runs_events",
        "runs_cancel",
        "runs_artifact",
        "get_status",
        "test://static-text",
        "test://static-binary",
        "test://template/1/data",
        "weir://runs/",
        "test_simple_prompt",
        "test_prompt_with_arguments",
        "debug",
        "info",
        "error",
        "items",
        "text",
        "2.0",
        "ref/prompt",
        "ref/resource",
        "working",
        "completed",
    ],
};

#[derive(Arbitrary, Debug)]
enum Verb {
    Get,
    Post,
    Delete,
    Put,
}

#[derive(Arbitrary, Debug)]
enum Text {
    Word(u8),
    WordThen(u8, Vec<u8>),
    Raw(Vec<u8>),
}

impl Text {
    fn bytes(&self, session: Option<&str>) -> Vec<u8> {
        let word = |i: &u8| WORDS[usize::from(*i) % WORDS.len()].as_bytes().to_vec();
        let bytes = match self {
            Text::Word(i) => word(i),
            Text::WordThen(i, rest) => [word(i), rest.clone()].concat(),
            Text::Raw(bytes) => bytes.clone(),
        };
        match session {
            Some(id) if bytes == b"SESSION" => id.as_bytes().to_vec(),
            _ => bytes,
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Target {
    Mcp,
    /// `/runs/{id}/events` with a query.
    Events(Text, Text),
    /// `http://{authority}/mcp`: an absolute-form target names a host too.
    Absolute(Text),
    Raw(Text),
}

#[derive(Arbitrary, Debug)]
enum Name {
    Host,
    Origin,
    Authorization,
    ContentType,
    Accept,
    SessionId,
    ProtocolVersion,
    McpMethod,
    LastEventId,
    Other(String),
}

/// A body: a JSON-RPC message (made well enough to reach the methods),
/// any JSON, or any bytes.
#[derive(Debug)]
struct Payload(Vec<u8>);

impl<'a> Arbitrary<'a> for Payload {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let message = match u.int_in_range(0..=7)? {
            0 => return Ok(Payload(u.arbitrary()?)),
            1 => value(u, &VOCABULARY, 0)?,
            _ => {
                let mut message = json!({"jsonrpc": "2.0", "method": u.choose(METHODS)?});
                match u.int_in_range(0..=3)? {
                    0 => {}
                    1 => message["id"] = json!(string(u, VOCABULARY.strings)?),
                    _ => message["id"] = json!(u.int_in_range(0..=3)?),
                }
                if u.arbitrary()? {
                    message["params"] = Value::Object(object(u, &VOCABULARY, 1)?);
                }
                message
            }
        };
        Ok(Payload(
            serde_json::to_vec(&message).expect("JSON values serialize"),
        ))
    }
}

#[derive(Arbitrary, Debug)]
struct Exchange {
    verb: Verb,
    target: Target,
    headers: Vec<(Name, Text)>,
    body: Payload,
}

#[derive(Arbitrary, Debug)]
struct Input {
    token: bool,
    exchanges: Vec<Exchange>,
}

fn build(exchange: &Exchange, session: Option<&str>) -> Option<Request<Body>> {
    let uri = match &exchange.target {
        Target::Mcp => Uri::from_static("/mcp"),
        Target::Events(id, query) => {
            let text = format!(
                "/runs/{}/events?{}",
                String::from_utf8_lossy(&id.bytes(None)),
                String::from_utf8_lossy(&query.bytes(None))
            );
            Uri::try_from(text).ok()?
        }
        Target::Absolute(authority) => {
            let mut text = b"http://".to_vec();
            text.extend(authority.bytes(None));
            text.extend(b"/mcp");
            Uri::try_from(text).ok()?
        }
        Target::Raw(text) => Uri::try_from(text.bytes(None)).ok()?,
    };
    let method = match exchange.verb {
        Verb::Get => Method::GET,
        Verb::Post => Method::POST,
        Verb::Delete => Method::DELETE,
        Verb::Put => Method::PUT,
    };
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .body(Body::from(exchange.body.0.clone()))
        .ok()?;
    for (name, text) in &exchange.headers {
        let name = match name {
            Name::Host => header::HOST,
            Name::Origin => header::ORIGIN,
            Name::Authorization => header::AUTHORIZATION,
            Name::ContentType => header::CONTENT_TYPE,
            Name::Accept => header::ACCEPT,
            Name::SessionId => HeaderName::from_static("mcp-session-id"),
            Name::ProtocolVersion => HeaderName::from_static("mcp-protocol-version"),
            Name::McpMethod => HeaderName::from_static("mcp-method"),
            Name::LastEventId => HeaderName::from_static("last-event-id"),
            Name::Other(name) => match HeaderName::try_from(name.as_str()) {
                Ok(name) => name,
                Err(_) => continue,
            },
        };
        if let Ok(value) = HeaderValue::from_bytes(&text.bytes(session)) {
            request.headers_mut().append(name, value);
        }
    }
    Some(request)
}

/// `localhost`, a dotted-quad in 127/8 or a bracketed `::1`, as the
/// standard library reads them: the rule, independently of the parser.
fn loopback_literal(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<Ipv4Addr>()
            .is_ok_and(|ip| ip.octets()[0] == 127)
        || host
            .strip_prefix('[')
            .and_then(|inner| inner.strip_suffix(']'))
            .and_then(|inner| inner.parse::<Ipv6Addr>().ok())
            .is_some_and(|ip| ip == Ipv6Addr::LOCALHOST)
}

fn without_port(value: &str) -> &str {
    match value.rsplit_once(':') {
        Some((host, port))
            if (1..=5).contains(&port.len())
                && port.bytes().all(|b| b.is_ascii_digit())
                && port.parse::<u32>().is_ok_and(|p| p <= 65535) =>
        {
            host
        }
        _ => value,
    }
}

/// The guard's rule (SECURITY.md): `Some(status)` when the request must be
/// refused.
fn refusal(token: bool, method: &Method, uri: &Uri, headers: &HeaderMap) -> Option<StatusCode> {
    let mut hosts: Vec<&[u8]> = headers
        .get_all(header::HOST)
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    if hosts.len() > 1 {
        return Some(StatusCode::BAD_REQUEST);
    }
    hosts.extend(uri.authority().map(|a| a.as_str().as_bytes()));
    if hosts.is_empty() {
        return Some(StatusCode::BAD_REQUEST);
    }
    for host in hosts {
        if parse_authority(host).is_err() {
            return Some(StatusCode::BAD_REQUEST);
        }
        let text = std::str::from_utf8(host).expect("an authority is ASCII");
        let name = without_port(text);
        if !loopback_literal(name) && !name.eq_ignore_ascii_case(ALLOWED_HOST) {
            return Some(StatusCode::FORBIDDEN);
        }
    }
    let origins: Vec<&[u8]> = headers
        .get_all(header::ORIGIN)
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    match origins.as_slice() {
        [] => {}
        [origin] => {
            let Ok(parsed) = parse_origin(origin) else {
                return Some(StatusCode::FORBIDDEN);
            };
            let text = std::str::from_utf8(origin).expect("an origin is ASCII");
            let (scheme, rest) = text.split_once("://").expect("an origin has ://");
            let web = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
            let allowed = parse_origin(ALLOWED_ORIGIN.as_bytes())
                .unwrap()
                .same(&parsed);
            let loopback = web && loopback_literal(without_port(rest));
            if !loopback && !allowed {
                return Some(StatusCode::FORBIDDEN);
            }
        }
        _ => return Some(StatusCode::FORBIDDEN),
    }
    // The dashboard's actions (a non-GET under /api/) need the page's own
    // origin: `http`, and the host and port of Host (and of an
    // absolute-form target).
    if *method != Method::GET && uri.path().starts_with("/api/") {
        let hosts = headers
            .get_all(header::HOST)
            .iter()
            .map(|v| v.as_bytes())
            .chain(uri.authority().map(|a| a.as_str().as_bytes()));
        let own = match origins.as_slice() {
            [origin] => {
                let origin = parse_origin(origin).expect("checked above");
                origin.scheme.eq_ignore_ascii_case("http")
                    && hosts.into_iter().all(|host| {
                        parse_authority(host).is_ok_and(|host| {
                            origin.authority.host.same(&host.host)
                                && origin.port() == Some(host.port.unwrap_or(80))
                        })
                    })
            }
            _ => false,
        };
        if !own {
            return Some(StatusCode::FORBIDDEN);
        }
    }
    // The dashboard's static files need no token (a browser following a
    // link cannot send one).
    let page = *method == Method::GET && (uri.path() == "/" || uri.path().starts_with("/assets/"));
    if token && !page {
        let values: Vec<&[u8]> = headers
            .get_all(header::AUTHORIZATION)
            .iter()
            .map(|v| v.as_bytes())
            .collect();
        let good = match values.as_slice() {
            [value] => {
                value.len() > 7
                    && value[..6].eq_ignore_ascii_case(b"bearer")
                    && value[6] == b' '
                    && value[6..]
                        .iter()
                        .skip_while(|&&b| b == b' ')
                        .eq(TOKEN.as_bytes())
            }
            _ => false,
        };
        if !good {
            return Some(StatusCode::UNAUTHORIZED);
        }
    }
    None
}

fn check_json(bytes: &[u8]) {
    let value: Value = serde_json::from_slice(bytes).unwrap_or_else(|e| {
        panic!(
            "a JSON answer is not JSON ({e}): {:?}",
            String::from_utf8_lossy(bytes)
        )
    });
    assert_eq!(value["jsonrpc"], "2.0", "{value}");
}

/// Reads the body for a while; checks what came.
/// `api`: an answer of the dashboard's JSON API, plain JSON rather than
/// JSON-RPC unless it is a refusal.
async fn check_body(response: axum::response::Response, api: bool) {
    let refused = response.status().is_client_error();
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let mut body = Vec::new();
    let mut stream = response.into_body().into_data_stream();
    let _ = tokio::time::timeout(READ_FOR, async {
        while let Some(Ok(chunk)) = stream.next().await {
            body.extend_from_slice(&chunk);
        }
    })
    .await;
    if json && (!api || refused) {
        check_json(&body);
    } else if json {
        let _: Value = serde_json::from_slice(&body).expect("an API answer is JSON");
    }
    if sse {
        // Whole frames only: the last may have been cut off by the timeout.
        let whole = body
            .windows(2)
            .rposition(|w| w == b"\n\n")
            .map_or(0, |at| at + 2);
        for line in body[..whole].split(|&b| b == b'\n') {
            if let Some(data) = line.strip_prefix(b"data:") {
                let _: Value = serde_json::from_slice(data).unwrap_or_else(|e| {
                    panic!(
                        "an SSE data line is not JSON ({e}): {:?}",
                        String::from_utf8_lossy(data)
                    )
                });
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = Input::arbitrary_take_rest(Unstructured::new(data)) else {
        return;
    };
    let runtime = weir_fuzz::runtime();
    runtime.block_on(async {
        weir_fuzz::spawn_clock();
        let server = weir_fuzz::fixtures_server(ServerConfig::default()).await;
        let options = HttpOptions {
            allowed_origins: vec![ALLOWED_ORIGIN.into()],
            allowed_hosts: vec![ALLOWED_HOST.into()],
            credentials: if input.token {
                Credentials::single(TOKEN)
            } else {
                Credentials::none()
            },
        };
        let app = router(server, options);
        let mut session: Option<String> = None;
        for exchange in input.exchanges.iter().take(MAX_REQUESTS) {
            let Some(request) = build(exchange, session.as_deref()) else {
                continue;
            };
            let expected = refusal(
                input.token,
                request.method(),
                request.uri(),
                request.headers(),
            );
            let api = request.uri().path().starts_with("/api/");
            let described = format!(
                "{} {} {:?}",
                request.method(),
                request.uri(),
                request.headers()
            );
            let response = app
                .clone()
                .oneshot(request)
                .await
                .expect("the router is infallible");
            let status = response.status();
            match expected {
                Some(refused) => assert_eq!(status, refused, "{described}"),
                None => assert!(
                    status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                    "{described} passes the guard's rule, answered {status}"
                ),
            }
            assert!(!status.is_server_error(), "{described} answered {status}");
            if let Some(id) = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
            {
                session = Some(id.to_owned());
            }
            check_body(response, api).await;
        }
    });
});
