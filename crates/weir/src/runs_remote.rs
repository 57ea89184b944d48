//! `weir runs … --url URL`: a weir server's runs over its HTTP run API —
//! the dashboard's `/api/runs` for the pages, the run, its events, its
//! artifacts' raw bytes and cancel, and `GET /runs/{id}/events` (SSE) to
//! follow a run, reconnecting without losing or repeating an event.
//!
//! The API, not the `runs_*` tools over MCP: it sends an artifact as its
//! raw bytes (the tool pages it as JSON text or base64), resolves an id's
//! start on the server among every run the caller may see (the tools could
//! only search a listed page), filters by several states, and answers
//! whatever tools `--tools`/`--no-tools` or a token's grants leave served:
//! who sees which run is the one rule it applies.

use std::io::Write;

use reqwest::header::{AUTHORIZATION, ORIGIN};
use reqwest::{Method, RequestBuilder, Response, StatusCode};
use serde::Deserialize;
use serde_json::Value;
use weir_client::follow_run;
use weir_core::{RunEvent, RunId, RunState, Seq};
use weir_runtime::log::RunSummary;

use crate::exit::Outcome;
use crate::output;

/// Runs per page asked of the API (its most).
const LIST_PAGE: usize = 500;
/// Events per page asked of the API (its most).
const EVENTS_PAGE: usize = 1000;

/// The server could not be reached: the command exits 4, as `weir call`
/// and `weir runs tail --url` do.
#[derive(Debug)]
pub(crate) struct Unreachable(String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// A weir server's run API.
pub(crate) struct Api {
    http: reqwest::Client,
    /// The server's root, without a trailing `/` (or `/mcp`).
    base: String,
    /// As given, for messages and hints.
    url: String,
    token: Option<String>,
}

/// A run as the API describes it (`RunView`).
#[derive(Deserialize)]
struct ApiRun {
    run_id: RunId,
    tool: String,
    state: RunState,
    events: Seq,
    created_ts: u64,
    updated_ts: u64,
    finished_ts: Option<u64>,
    owner: Option<String>,
    #[serde(default)]
    client: Option<String>,
    #[serde(default)]
    parent: Option<RunId>,
    node: String,
}

impl ApiRun {
    fn summary(self, arguments: Value) -> RunSummary {
        RunSummary {
            run_id: self.run_id,
            tool: self.tool,
            arguments,
            node: self.node,
            state: self.state,
            events: self.events,
            created_ts: self.created_ts,
            updated_ts: self.updated_ts,
            finished_ts: self.finished_ts,
            owner: self.owner,
            client: self.client,
            parent: self.parent,
        }
    }
}

impl Api {
    pub(crate) fn new(url: &str, token: Option<String>) -> anyhow::Result<Api> {
        let trimmed = url.trim_end_matches('/');
        let base = trimmed.strip_suffix("/mcp").unwrap_or(trimmed).to_owned();
        if reqwest::Url::parse(&base).is_err() {
            anyhow::bail!(
                "{url:?} is not a URL: give the server's MCP endpoint, e.g. http://127.0.0.1:8765/mcp"
            );
        }
        let http = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(10))
            .build()?;
        Ok(Api {
            http,
            base,
            url: url.to_owned(),
            token,
        })
    }

    /// The URL as given.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let request = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(token) => request.header(AUTHORIZATION, format!("Bearer {token}")),
            None => request,
        }
    }

    /// Sends `request`; only a server out of reach is an error here.
    async fn send_raw(&self, request: RequestBuilder) -> Result<Response, Unreachable> {
        request.send().await.map_err(|error| {
            Unreachable(format!(
                "cannot reach the weir server at {}: {}",
                self.url,
                root_cause(&error)
            ))
        })
    }

    /// Sends `request`; an answer other than 2xx is an error in the
    /// server's words, and a 404 is `missing`.
    async fn send(&self, request: RequestBuilder, missing: &str) -> anyhow::Result<Response> {
        let response = self.send_raw(request).await?;
        self.check(response, missing).await
    }

    async fn check(&self, response: Response, missing: &str) -> anyhow::Result<Response> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let body = response.text().await.unwrap_or_default();
        let said = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|body| body["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or(body);
        match status {
            StatusCode::NOT_FOUND => anyhow::bail!("{missing}"),
            // A prefix too short or ambiguous: the server's words say so.
            StatusCode::BAD_REQUEST | StatusCode::CONFLICT => anyhow::bail!("{said}"),
            StatusCode::UNAUTHORIZED => anyhow::bail!(
                "{} refused the token: {said} (pass the server's bearer token: --token or WEIR_TOKEN)",
                self.url
            ),
            _ => anyhow::bail!("{} answered HTTP {status}: {said}", self.url),
        }
    }

    async fn json(&self, request: RequestBuilder, missing: &str) -> anyhow::Result<Value> {
        let response = self.send(request, missing).await?;
        response.json().await.map_err(|error| {
            anyhow::anyhow!(
                "{} answered something that is not weir's run API ({error}); is it a weir server?",
                self.url
            )
        })
    }

    /// Up to `limit` runs, newest first: their summaries (with no
    /// arguments: the list leaves them out) and the records as served.
    pub(crate) async fn list(
        &self,
        states: &[RunState],
        tool: Option<&str>,
        limit: usize,
    ) -> anyhow::Result<(Vec<RunSummary>, Vec<Value>)> {
        let states: Vec<&str> = states.iter().map(|state| state.as_str()).collect();
        let mut records = Vec::new();
        let mut cursor: Option<String> = None;
        while records.len() < limit {
            let mut query = vec![
                ("state", states.join(",")),
                ("limit", (limit - records.len()).min(LIST_PAGE).to_string()),
            ];
            query.extend(tool.map(|tool| ("tool", tool.to_owned())));
            query.extend(cursor.take().map(|cursor| ("cursor", cursor)));
            let request = self.request(Method::GET, "/api/runs").query(&query);
            let mut page = self.json(request, "this server has no run API").await?;
            let runs = page["runs"].take();
            records.extend(runs.as_array().cloned().unwrap_or_default());
            match page["next_cursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => break,
            }
        }
        records.truncate(limit);
        let summaries = records
            .iter()
            .map(|record| Ok(ApiRun::deserialize(record)?.summary(Value::Null)))
            .collect::<Result<_, serde_json::Error>>()?;
        Ok((summaries, records))
    }

    /// The run whose id is `id` or starts with it (the server decides,
    /// among the runs this caller may see).
    pub(crate) async fn run(&self, id: &RunId) -> anyhow::Result<RunSummary> {
        let request = self.request(Method::GET, &format!("/api/runs/{id}"));
        let missing = format!(
            "no run {id} on {}: list runs with `weir runs list --url {}`",
            self.url, self.url
        );
        let mut detail = self.json(request, &missing).await?;
        let arguments = detail["arguments"].take();
        Ok(ApiRun::deserialize(&detail["run"])?.summary(arguments))
    }

    /// Up to `limit` events of run `id` from seq `from`.
    pub(crate) async fn events(
        &self,
        id: &RunId,
        from: Seq,
        limit: usize,
    ) -> anyhow::Result<Vec<RunEvent>> {
        let mut events: Vec<RunEvent> = Vec::new();
        let mut next = from;
        while events.len() < limit {
            let page_limit = (limit - events.len()).min(EVENTS_PAGE);
            let request = self
                .request(Method::GET, &format!("/api/runs/{id}/events"))
                .query(&[
                    ("from", next.to_string()),
                    ("limit", page_limit.to_string()),
                ]);
            let page = self.json(request, &format!("no run {id}")).await?;
            let page: Vec<RunEvent> = serde_json::from_value(page["events"].clone())?;
            let Some(last) = page.last() else { break };
            next = last.seq + 1;
            events.extend(page);
        }
        Ok(events)
    }

    /// Asks the server to cancel run `id`. `false` when it had ended.
    pub(crate) async fn cancel(&self, id: &RunId, reason: &str) -> anyhow::Result<bool> {
        // The server takes state-changing API requests only with its own
        // origin (a defence against other sites' pages in a browser, which
        // cannot send it); a command line holding the token is no such page.
        let origin = reqwest::Url::parse(&self.base)?
            .origin()
            .ascii_serialization();
        let request = self
            .request(Method::POST, &format!("/api/runs/{id}/cancel"))
            .query(&[("reason", reason)])
            .header(ORIGIN, origin);
        let response = self.send_raw(request).await?;
        if response.status() == StatusCode::CONFLICT {
            return Ok(false);
        }
        self.check(response, &format!("no run {id}")).await?;
        Ok(true)
    }

    /// Writes artifact `name` of run `id` to `out` as it arrives; its size.
    pub(crate) async fn artifact(
        &self,
        id: &RunId,
        name: &str,
        out: &mut dyn Write,
    ) -> anyhow::Result<u64> {
        let request = self.request(
            Method::GET,
            &format!("/api/runs/{id}/artifacts/{}", encode_segment(name)),
        );
        let missing = format!(
            "run {id} has no artifact {name:?}: its artifact events name its files (`weir runs events {id} --url {}`)",
            self.url
        );
        let mut response = self.send(request, &missing).await?;
        let expected = response.content_length();
        let mut written = 0u64;
        while let Some(chunk) = response.chunk().await.map_err(|error| {
            Unreachable(format!(
                "the artifact's download from {} broke off: {}",
                self.url,
                root_cause(&error)
            ))
        })? {
            out.write_all(&chunk)?;
            written += chunk.len() as u64;
        }
        if let Some(expected) = expected.filter(|expected| *expected != written) {
            anyhow::bail!("the artifact has {expected} bytes but {written} arrived");
        }
        Ok(written)
    }
}

/// `name` as one URL path segment.
fn encode_segment(name: &str) -> String {
    let mut encoded = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            encoded.push(byte as char);
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// The innermost cause: "Connection refused (os error 111)".
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// Follows run `id` on the server over `GET /runs/{id}/events`.
pub(crate) async fn tail(
    url: &str,
    token: Option<String>,
    id: &RunId,
    from: u64,
    json: bool,
) -> anyhow::Result<Outcome> {
    let mut events = follow_run(url, token, id.as_str(), from);
    let mut out = std::io::stdout().lock();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(error) => {
                eprintln!("weir: {error}");
                return Ok(Outcome::Unreachable);
            }
        };
        if json {
            writeln!(out, "{}", serde_json::to_string(&event)?)?;
        } else {
            writeln!(out, "{}", output::event_line(&event))?;
        }
        out.flush()?;
        // Applied to a working run, only a terminal event changes the state.
        if let Some(state) = RunState::Working
            .apply(&event.kind)
            .ok()
            .filter(|state| state.is_terminal())
        {
            return Ok(Outcome::from(state));
        }
    }
    // Started past the end: the server said how the run ended.
    if let Some(state) = events.ended() {
        return Ok(Outcome::from(state));
    }
    eprintln!(
        "weir: the stream of run {id} ended before the run did; run the command again to go on"
    );
    Ok(Outcome::Unreachable)
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_artifact_name_is_one_path_segment() {
        assert_eq!(super::encode_segment("llms.txt"), "llms.txt");
        assert_eq!(super::encode_segment("a b/c%"), "a%20b%2Fc%25");
    }
}
