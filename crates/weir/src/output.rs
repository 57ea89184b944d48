//! How runs and events look to a person.

use weir_core::{Content, EventKind, RunEvent};
use weir_runtime::log::RunSummary;

/// `2026-11-22 05:31:28.123` (UTC) from Unix milliseconds.
pub(crate) fn utc(ts_ms: u64) -> String {
    weir_core::utc_display(ts_ms)
}

/// `1.5s`, `2m03s`, `1h02m`.
pub(crate) fn duration(ms: u64) -> String {
    weir_core::human_duration(ms)
}

/// One table row per run, under [`RUN_HEADER`].
pub(crate) fn run_row(run: &RunSummary) -> String {
    let took = run
        .finished_ts
        .map(|end| duration(end.saturating_sub(run.created_ts)))
        .unwrap_or_default();
    format!(
        "{:<32}  {:<20}  {:<9}  {:>7}  {}  {}",
        run.run_id,
        clip(&run.tool, 20),
        run.state,
        run.events,
        utc(run.created_ts),
        took
    )
}

pub(crate) const RUN_HEADER: &str = "ID                                TOOL                  STATE       EVENTS  CREATED (UTC)            TOOK";

/// What `weir runs show` prints of a run, a line per field; `last` is
/// its latest event, which says how it ended when it has.
pub(crate) fn run_details(run: &RunSummary, last: Option<&RunEvent>) -> String {
    let mut lines = vec![
        format!("run       {}", run.run_id),
        format!("tool      {}", run.tool),
        format!("arguments {}", run.arguments),
        format!("node      {}", run.node),
    ];
    // Who asked, where the run says.
    for (label, value) in [
        ("owner     ", run.owner.as_deref()),
        ("client    ", run.client.as_deref()),
        (
            "parent    ",
            run.parent.as_ref().map(|parent| parent.as_str()),
        ),
    ] {
        if let Some(value) = value {
            lines.push(format!("{label}{value}"));
        }
    }
    lines.extend([
        format!("state     {}", run.state),
        format!("events    {}", run.events),
        format!("created   {} UTC", utc(run.created_ts)),
    ]);
    if let Some(finished) = run.finished_ts {
        let took = duration(finished.saturating_sub(run.created_ts));
        lines.push(format!("finished  {} UTC ({took})", utc(finished)));
    }
    if let Some(last) = last.filter(|event| event.kind.is_terminal()) {
        lines.push(format!("outcome   {}", describe(&last.kind)));
    }
    lines.push(String::new());
    lines.join("\n")
}

/// `seq  time  type  what`, one line.
pub(crate) fn event_line(event: &RunEvent) -> String {
    format!(
        "{:>6}  {}  {:<9}  {}",
        event.seq,
        &utc(event.ts)[11..],
        event.kind.type_name(),
        describe(&event.kind)
    )
}

/// The gist of an event in one line.
pub(crate) fn describe(kind: &EventKind) -> String {
    let line = match kind {
        EventKind::Started(s) => {
            format!("tool={} node={} arguments={}", s.tool, s.node, s.arguments)
        }
        EventKind::Meta(m) => {
            let mut parts = Vec::new();
            if let Some(total) = m.total {
                parts.push(format!("total={total}"));
            }
            if !m.backends.is_empty() {
                parts.push(format!("backends={}", m.backends.join(",")));
            }
            if !m.info.is_null() {
                parts.push(m.info.to_string());
            }
            parts.join(" ")
        }
        EventKind::Progress(p) => {
            let mut line = match p.total {
                Some(total) => format!("{}/{}", p.progress, total),
                None => p.progress.to_string(),
            };
            for extra in [&p.phase, &p.message].into_iter().flatten() {
                line.push(' ');
                line.push_str(extra);
            }
            if let Some(eta) = p.eta_ms {
                line.push_str(&format!(" (eta {})", duration(eta)));
            }
            line
        }
        EventKind::Log(l) => format!("[{}] {}", wire_name(&l.stream), l.text),
        EventKind::Partial(p) => {
            let items = (!p.items.is_empty()).then(|| format!("{} items", p.items.len()));
            let mut line = spaced(contents(&p.content), items);
            if let Some(group) = &p.group {
                line.push_str(&format!(" [{group}]"));
            }
            line
        }
        EventKind::Artifact(a) => format!(
            "{} ({}, {} bytes) sha256:{}",
            a.uri, a.mime, a.bytes, &a.sha256
        ),
        EventKind::Warning(w) => w.message.clone(),
        EventKind::InputRequired(i) => {
            let mut line = format!(
                "waits up to {} for {}",
                duration(i.timeout_ms),
                wire_name(&i.input)
            );
            if let Some(message) = &i.message {
                line.push_str(&format!(": {message}"));
            }
            line
        }
        EventKind::InputEnded(i) => wire_name(&i.outcome),
        EventKind::Completed(c) => spaced(
            contents(&c.content),
            c.structured.as_ref().map(ToString::to_string),
        ),
        EventKind::Failed(f) => failure(&wire_name(&f.error.code), &f.error.to_string()),
        EventKind::Canceled(c) => c.reason.clone(),
    };
    clip(&line, 200)
}

/// `code: message`, once: a message that begins with its code (logs
/// written before the recovery stopped saying it: `interrupted: the server
/// stopped`) is not prefixed again.
fn failure(code: &str, message: &str) -> String {
    match message.strip_prefix(code) {
        Some(rest) if rest.starts_with(':') => message.to_owned(),
        _ => format!("{code}: {message}"),
    }
}

/// `first`, then `more` after a space when both say something.
fn spaced(first: String, more: Option<String>) -> String {
    match more {
        Some(more) if first.is_empty() => more,
        Some(more) => format!("{first} {more}"),
        None => first,
    }
}

fn contents(content: &[Content]) -> String {
    content
        .iter()
        .map(|block| match block {
            Content::Text { text } => text.clone(),
            Content::Image { mime_type, .. } => format!("<{mime_type} image>"),
            Content::Audio { mime_type, .. } => format!("<{mime_type} audio>"),
            Content::Resource { uri, .. } => format!("<resource {uri}>"),
            Content::ResourceLink { uri, .. } => uri.clone(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Shortens `text` to `max` characters on one line.
fn clip(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', "⏎");
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut clipped: String = one_line.chars().take(max - 1).collect();
        clipped.push('…');
        clipped
    }
}

/// A unit enum's name as it appears in JSON (`stdout`, `tool_error`).
fn wire_name<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_says_its_code_once() {
        assert_eq!(
            failure("interrupted", "interrupted: the server stopped"),
            "interrupted: the server stopped"
        );
        assert_eq!(failure("timeout", "too slow"), "timeout: too slow");
        assert_eq!(
            failure("tool_error", "tool_errors: x"),
            "tool_error: tool_errors: x"
        );
    }

    #[test]
    fn a_result_with_text_and_structure_keeps_them_apart() {
        let completed = EventKind::Completed(weir_core::Completed {
            content: vec![Content::text("streamed 3 items")],
            structured: Some(serde_json::json!({"count": 3})),
        });
        assert_eq!(describe(&completed), r#"streamed 3 items {"count":3}"#);
        let partial = EventKind::Partial(weir_core::Partial {
            content: vec![Content::text("page")],
            items: vec![serde_json::json!(1), serde_json::json!(2)],
            group: Some("g".into()),
        });
        assert_eq!(describe(&partial), "page 2 items [g]");
        let structured_only = EventKind::Completed(weir_core::Completed {
            structured: Some(serde_json::json!({"count": 3})),
            ..Default::default()
        });
        assert_eq!(describe(&structured_only), r#"{"count":3}"#);
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(950), "950ms");
        assert_eq!(duration(1_500), "1.5s");
        assert_eq!(duration(123_000), "2m03s");
        assert_eq!(duration(3_720_000), "1h02m");
    }
}
