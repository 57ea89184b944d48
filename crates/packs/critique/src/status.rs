//! `critique_status`: each CLI's circuit breaker, the configured models,
//! and what the cache and report store hold.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, RunError};
use weir_runtime::{RunContext, Tool, ToolInfo, kit};

use crate::Shared;
use crate::args::KNOWN_CLIS;

/// `critique_status`'s parser: an empty object.
pub(crate) fn no_arguments(arguments: &Value) -> Result<(), RunError> {
    if kit::object_args(arguments)?.is_empty() {
        Ok(())
    } else {
        Err(kit::invalid("critique_status takes no arguments"))
    }
}

/// `critique_status`.
pub(crate) struct CritiqueStatus(pub(crate) Arc<Shared>);

#[async_trait]
impl Tool for CritiqueStatus {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "critique_status",
            "The critique agents' state: each CLI's circuit breaker (closed, open with the time until it tries again, half-open) and last failure, the configured agents and models, and how many critiques are cached.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        );
        info.output_schema = Some(weir_core::output_contract(&json!({
            "type": "object",
            "properties": {
                "agents": {"type": "array", "items": {"type": "object", "properties": {
                    "cli": {"type": "string"},
                    "configured": {"type": "boolean", "description": "Whether roast runs it when the call names no clis."},
                    "model": {"type": ["string", "null"]},
                    "breaker": {"type": "object"},
                    "last_error": {"type": ["string", "null"]}
                }, "required": ["cli", "configured", "breaker"]}},
                "breaker_config": {"type": "object"},
                "cached_critiques": {"type": "integer"},
                "reports": {"type": "integer"}
            },
            "required": ["agents", "breaker_config", "cached_critiques", "reports"]
        })));
        info
    }

    async fn run(&self, _ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        no_arguments(&arguments)?;
        let shared = &self.0;
        let now = shared.now_ms();
        let agents: Vec<Value> = KNOWN_CLIS
            .iter()
            .map(|cli| {
                let (breaker, last_error) =
                    shared.with_breaker(cli, |breaker, last| (breaker.snapshot(now), last.clone()));
                json!({
                    "cli": cli,
                    "configured": shared.config.clis.iter().any(|known| known == cli),
                    "model": shared.config.models.get(*cli),
                    "breaker": breaker,
                    "last_error": last_error,
                })
            })
            .collect();
        let text = agents
            .iter()
            .map(|agent| {
                let retry = agent["breaker"]["retry_in_ms"]
                    .as_u64()
                    .map(|ms| format!(", retry in {} s", ms.div_ceil(1000)))
                    .unwrap_or_default();
                format!(
                    "{}: breaker {} ({} failures in a row{retry}){}",
                    agent["cli"].as_str().unwrap_or(""),
                    agent["breaker"]["state"].as_str().unwrap_or(""),
                    agent["breaker"]["consecutive_failures"],
                    agent["last_error"]
                        .as_str()
                        .map(|error| format!("; last error: {error}"))
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let cached = shared.cache.lock().expect("cache lock").len();
        let reports = shared.reports.lock().expect("reports lock").len();
        Ok(Completed {
            content: vec![Content::text(format!(
                "{text}\n{cached} critiques cached, {reports} reports kept"
            ))],
            structured: Some(json!({
                "agents": agents,
                "breaker_config": shared.config.breaker,
                "cached_critiques": cached,
                "reports": reports,
            })),
        })
    }
}
