//! A critique's report: each agent's outcome and text, and the findings,
//! as the result shows them and the report store keeps them.

use serde::Serialize;
use serde_json::{Value, json};
use weir_core::{BreakerSnapshot, Completed, Content};

use crate::findings::{Finding, Severity};
use crate::paging::{Cursor, page};

/// How one agent's part ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    /// It answered.
    Ok,
    /// It ran and failed: an API error, a crash, a non-zero exit.
    Failed,
    /// Its program is not installed (not on PATH).
    Missing,
    /// It ran past the agent time limit and was killed.
    TimedOut,
    /// Its breaker is open: it was not run.
    BreakerOpen,
}

/// One agent's outcome.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AgentOutcome {
    pub(crate) cli: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    pub(crate) status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// What to configure so that it answers next time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) setup: Option<String>,
    pub(crate) duration_ms: u64,
    /// Bytes of text it wrote.
    pub(crate) output_bytes: usize,
    pub(crate) findings: usize,
    #[serde(skip_serializing_if = "Value::is_null")]
    pub(crate) usage: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cost_usd: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session_id: Option<String>,
    /// Its breaker after this run.
    pub(crate) breaker: BreakerSnapshot,
}

/// A finding and the agent that made it.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct AgentFinding {
    pub(crate) agent: String,
    #[serde(flatten)]
    pub(crate) finding: Finding,
}

/// A whole critique, as stored under its context id.
#[derive(Clone, Debug)]
pub(crate) struct Report {
    pub(crate) context_id: String,
    /// Markdown: each agent's section, follow-ups after a rule.
    pub(crate) text: String,
    /// Worst first, then in the order found.
    pub(crate) findings: Vec<AgentFinding>,
    /// The outcomes of the latest round.
    pub(crate) agents: Vec<AgentOutcome>,
    /// Rounds so far: 1, then one more per resume.
    pub(crate) rounds: u32,
}

/// One agent's section of the report.
pub(crate) fn section(outcome: &AgentOutcome, text: &str) -> String {
    let model = outcome
        .model
        .as_deref()
        .map(|model| format!(" ({model})"))
        .unwrap_or_default();
    let status = match (&outcome.status, &outcome.error) {
        (Status::Ok, _) => String::new(),
        (status, Some(error)) => format!(" — {}: {error}", status_word(*status)),
        (status, None) => format!(" — {}", status_word(*status)),
    };
    let body = if text.trim().is_empty() {
        "_(no output)_".to_owned()
    } else {
        text.trim_end().to_owned()
    };
    format!("## {}{model}{status}\n\n{body}\n\n", outcome.cli)
}

fn status_word(status: Status) -> &'static str {
    match status {
        Status::Ok => "ok",
        Status::Failed => "failed",
        Status::Missing => "not installed",
        Status::TimedOut => "timed out",
        Status::BreakerOpen => "skipped, breaker open",
    }
}

/// The findings sorted worst first (stable: equal ones keep their order).
pub(crate) fn sort_findings(findings: &mut [AgentFinding]) {
    findings.sort_by_key(|finding| finding.finding.severity);
}

/// Which text a result leads with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// A critique just run (or cached): the outcomes and the findings; the
    /// agents' text came as partials before it.
    Critique,
    /// A page asked for: the page's text first, then a one-line summary.
    Page,
}

/// A roast's final result: the outcomes, the findings and a page of the
/// report, in both `content` (as `shape` says) and `structuredContent`.
pub(crate) fn result(
    report: &Report,
    offset: usize,
    limit: usize,
    cached: bool,
    shape: Shape,
) -> Completed {
    let page = page(&report.text, offset, limit);
    let next_cursor = page.next_offset.map(|offset| {
        Cursor {
            context_id: report.context_id.clone(),
            offset,
        }
        .encode()
    });
    let mut counts = [0usize; 5];
    for finding in &report.findings {
        counts[finding.finding.severity as usize] += 1;
    }
    let by_severity: serde_json::Map<String, Value> = [
        Severity::Critical,
        Severity::High,
        Severity::Medium,
        Severity::Low,
        Severity::Info,
    ]
    .iter()
    .map(|severity| {
        (
            severity.name().to_owned(),
            counts[*severity as usize].into(),
        )
    })
    .collect();
    let mut text = String::new();
    let answered = report
        .agents
        .iter()
        .filter(|agent| agent.status == Status::Ok)
        .count();
    text.push_str(&format!(
        "Critique {}{}: {answered} of {} agents answered; {} findings.\n",
        report.context_id,
        if cached { " (cached)" } else { "" },
        report.agents.len(),
        report.findings.len()
    ));
    for agent in report.agents.iter().filter(|_| shape == Shape::Critique) {
        let error = agent
            .error
            .as_deref()
            .map(|error| format!(": {error}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "- {}: {}{error} ({} findings, {} ms)\n",
            agent.cli,
            status_word(agent.status),
            agent.findings,
            agent.duration_ms
        ));
        if let Some(setup) = &agent.setup {
            text.push_str(&format!("  to set up: {setup}\n"));
        }
    }
    if shape == Shape::Critique && !report.findings.is_empty() {
        text.push_str("\nFindings:\n");
        for finding in &report.findings {
            let f = &finding.finding;
            let location = match (&f.file, f.line) {
                (Some(file), Some(line)) => format!(" {file}:{line}"),
                (Some(file), None) => format!(" {file}"),
                _ => String::new(),
            };
            let category = f
                .category
                .as_deref()
                .map(|category| format!(" ({category})"))
                .unwrap_or_default();
            text.push_str(&format!(
                "- [{}]{category}{location} {} — {}\n",
                f.severity.name().to_uppercase(),
                f.text,
                finding.agent
            ));
        }
    }
    let mut content = match shape {
        // First, so that a result limit smaller than the page cuts the rest.
        Shape::Page => vec![Content::text(page.text.clone()), Content::text(text)],
        Shape::Critique => vec![Content::text(text)],
    };
    content.push(Content::text(match &next_cursor {
        Some(cursor) => format!(
            "[report bytes {}..{} of {}; next page: cursor \"{cursor}\" (or context_id \"{}\" with offset {})]",
            page.offset,
            page.offset + page.text.len(),
            page.total,
            report.context_id,
            page.offset + page.text.len()
        ),
        None => format!(
            "[report bytes {}..{} of {}, the end; context_id \"{}\" pages it again, or continues the critique with resume]",
            page.offset,
            page.offset + page.text.len(),
            page.total,
            report.context_id
        ),
    }));
    Completed {
        content,
        structured: Some(json!({
            "context_id": report.context_id,
            "cached": cached,
            "rounds": report.rounds,
            "agents": report.agents,
            "findings": report.findings,
            "findings_by_severity": by_severity,
            "report": {
                "offset": page.offset,
                "text": page.text,
                "total_bytes": page.total,
                "next_offset": page.next_offset,
                "next_cursor": next_cursor,
            },
        })),
    }
}

/// `roast`'s output schema: the shape a client checks, the descriptions
/// left to the tool's (each property's name says enough).
pub(crate) fn output_schema() -> Value {
    let integer = json!({"type": "integer"});
    json!({
        "type": "object",
        "properties": {
            "context_id": {"type": "string"},
            "cached": {"type": "boolean"},
            "rounds": integer,
            "agents": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "cli": {"type": "string"},
                    "status": {"type": "string", "enum": ["ok", "failed", "missing", "timed_out", "breaker_open"]},
                    "error": {"type": "string"},
                    "setup": {"type": "string"}
                },
                "required": ["cli", "status"]
            }},
            "findings": {"type": "array", "items": {
                "type": "object",
                "properties": {
                    "agent": {"type": "string"},
                    "severity": {"type": "string", "enum": ["critical", "high", "medium", "low", "info"]},
                    "file": {"type": "string"},
                    "line": integer,
                    "text": {"type": "string"}
                },
                "required": ["agent", "severity", "text"]
            }},
            "report": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "total_bytes": integer,
                    "next_cursor": {"type": ["string", "null"]}
                },
                "required": ["text", "total_bytes", "next_cursor"]
            }
        },
        "required": ["context_id", "cached", "rounds", "agents", "findings", "report"]
    })
}

#[cfg(test)]
mod tests {
    use weir_core::{BreakerState, check_arguments, output_contract};

    use super::*;

    /// A roast's structuredContent, cached or not, first page or a later
    /// one, fits the full schema and so the one `roast` lists (issue 24).
    #[test]
    fn a_result_fits_the_schema_and_the_listed_contract() {
        let outcome = |cli: &str, status, error: Option<&str>| AgentOutcome {
            cli: cli.into(),
            model: None,
            status,
            error: error.map(str::to_owned),
            setup: error.map(|_| "log in".to_owned()),
            duration_ms: 12,
            output_bytes: 40,
            findings: 1,
            usage: Value::Null,
            cost_usd: Some(0.01),
            session_id: None,
            breaker: BreakerSnapshot {
                state: BreakerState::Closed,
                consecutive_failures: 0,
                retry_in_ms: None,
            },
        };
        let report = Report {
            context_id: "c1".into(),
            text: "## claude\n\nx".repeat(50),
            findings: vec![AgentFinding {
                agent: "claude".into(),
                finding: Finding {
                    severity: Severity::High,
                    category: Some("security".into()),
                    file: Some("a.rs".into()),
                    line: Some(3),
                    text: "a shell command".into(),
                },
            }],
            agents: vec![
                outcome("claude", Status::Ok, None),
                outcome("codex", Status::Failed, Some("not logged in")),
            ],
            rounds: 1,
        };
        let full = output_schema();
        let listed = output_contract(&full);
        for (offset, cached, shape) in [(0, false, Shape::Critique), (100, true, Shape::Page)] {
            let structured = result(&report, offset, 64, cached, shape)
                .structured
                .unwrap();
            assert_eq!(check_arguments(&full, &structured), Ok(()), "{structured}");
            assert_eq!(
                check_arguments(&listed, &structured),
                Ok(()),
                "{structured}"
            );
        }
    }
}
