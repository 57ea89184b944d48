//! Plans, as a caller sends them to `plan_run`: the input's bytes as the
//! plan's text (YAML, JSON being YAML too) and, when they are JSON, as the
//! plan's object. Each goes through what `plan_run` does before anything
//! runs: `Plan::read` (the size limit first), `Plan::check` against a few
//! tools and declared servers, and the pack's redaction of the plan for
//! the store (`Tool::redact`), with a redactor that hides one field.
//!
//! Properties:
//! - nothing panics, loops or blows up (YAML aliases included);
//! - a plan over `MAX_STEPS` steps is refused with that problem alone;
//! - a plan that reads is stored as a plan that reads again, with the same
//!   steps (ids, tools, servers), every `key` argument of the `secret`
//!   tool redacted, every argument of a step on an upstream redacted.
#![no_main]

use std::collections::BTreeSet;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use weir_pack_plan::{MAX_STEPS, Plan, PlanError, PlanPack, Problem};
use weir_runtime::{Pack, REDACTED, Redactor, Tool, ToolInfo};

/// Hides the `key` argument of the `secret` tool (a tool whose schema
/// marked it), and nothing else.
struct HideKey;

impl Redactor for HideKey {
    fn redact(&self, tool: &str, arguments: &Value) -> Value {
        let mut stored = arguments.clone();
        if tool == "secret"
            && let Some(key) = stored.get_mut("key")
        {
            *key = REDACTED.into();
        }
        stored
    }
}

fn plan_run() -> &'static (std::sync::Arc<dyn Tool>, ToolInfo) {
    static TOOL: OnceLock<(std::sync::Arc<dyn Tool>, ToolInfo)> = OnceLock::new();
    TOOL.get_or_init(|| {
        let tool = PlanPack::new(None).tools().remove(0);
        let info = tool.info();
        (tool, info)
    })
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|name| (*name).to_owned()).collect()
}

/// The steps as (id, tool, server), to compare a plan with its stored form.
fn shape(plan: &Plan) -> Vec<(String, String, Option<String>)> {
    plan.steps
        .iter()
        .map(|step| (step.id.clone(), step.tool.clone(), step.server.clone()))
        .collect()
}

fn exercise(given: Value) {
    let tools = names(&["echo", "secret", "plan_run"]);
    let servers = names(&["docs"]);
    let read = Plan::read(&given);
    if let Ok(plan) = &read {
        match plan.clone().check(&tools, &servers) {
            Err(PlanError::Invalid(problems)) if plan.steps.len() > MAX_STEPS => {
                assert_eq!(problems, [Problem::TooManySteps(plan.steps.len())]);
            }
            Err(error) => {
                let _ = error.to_string();
            }
            Ok(_) => assert!(plan.steps.len() <= MAX_STEPS),
        }
    }
    let (tool, info) = plan_run();
    let stored = tool.redact(info, &json!({ "plan": given }), &HideKey);
    let stored = &stored["plan"];
    let Ok(plan) = read else {
        // A plan that cannot be read is not stored at all.
        assert!(
            stored
                .as_str()
                .is_some_and(|s| s.starts_with("[not stored")),
            "{stored}"
        );
        return;
    };
    if plan.steps.len() > MAX_STEPS {
        return;
    }
    let again = Plan::read(stored).unwrap_or_else(|error| panic!("{error}: {stored}"));
    assert_eq!(shape(&again), shape(&plan));
    for step in &again.steps {
        if step.server.is_some() {
            if let Some(args) = step.args.as_object() {
                assert!(args.values().all(|value| value == REDACTED), "{stored}");
            }
        } else if step.tool == "secret"
            && let Some(key) = step.args.get("key")
        {
            assert_eq!(key, REDACTED, "{stored}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    exercise(Value::String(text.to_owned()));
    if let Ok(object) = serde_json::from_str::<Value>(text) {
        exercise(object);
    }
});
