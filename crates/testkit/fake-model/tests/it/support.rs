//! One way to talk to a fake: POST a JSON body, read the SSE events back.

use serde_json::Value;
use weir_fake_model::{FakeModel, Script, Streaming, Turn};

/// A fake serving `turns`.
pub(crate) fn fake(turns: impl IntoIterator<Item = Turn>) -> FakeModel {
    FakeModel::start(Script::new(turns)).expect("start the fake")
}

/// `deltas` deltas, nothing else changed.
pub(crate) fn deltas(deltas: usize) -> Streaming {
    Streaming {
        deltas,
        ..Streaming::default()
    }
}

pub(crate) async fn post(fake: &FakeModel, path: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", fake.url()))
        .json(&body)
        .send()
        .await
        .expect("the fake answers")
}

/// One SSE event: its `event:` name, if any, and its `data:` text.
#[derive(Debug)]
pub(crate) struct Event {
    pub(crate) name: Option<String>,
    pub(crate) data: String,
}

impl Event {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_str(&self.data)
            .unwrap_or_else(|error| panic!("event data is not JSON ({error}): {}", self.data))
    }
}

/// The events of an SSE body, comments (`:` lines) left out. Every event
/// must end with a blank line.
pub(crate) fn events(body: &str) -> Vec<Event> {
    assert!(
        body.is_empty() || body.ends_with("\n\n"),
        "an SSE body ends with a blank line: {body:?}"
    );
    body.split("\n\n")
        .filter(|block| !block.is_empty())
        .filter_map(|block| {
            let (mut name, mut data) = (None, None);
            for line in block.lines() {
                if let Some(value) = line.strip_prefix("event: ") {
                    name = Some(value.to_owned());
                } else if let Some(value) = line.strip_prefix("data: ") {
                    assert!(data.is_none(), "one data line per event: {block:?}");
                    data = Some(value.to_owned());
                } else {
                    assert!(line.starts_with(':'), "unexpected SSE line {line:?}");
                }
            }
            data.map(|data| Event { name, data })
        })
        .collect()
}

/// A streamed answer: checks the status and content type, returns the events.
pub(crate) async fn stream(fake: &FakeModel, path: &str, body: Value) -> Vec<Event> {
    let response = post(fake, path, body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"],
        "text/event-stream",
        "{path}"
    );
    events(&response.text().await.expect("read the stream"))
}

/// The `type` of each event's data.
pub(crate) fn types(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|event| event.json()["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}
