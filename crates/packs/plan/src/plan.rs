//! A plan as written (YAML or JSON), and every check made before anything
//! runs: [`Plan::read`] (or [`Plan::parse`]) reads it, refusing one over
//! [`MAX_PLAN_BYTES`] before parsing it, and [`Plan::check`] turns it into
//! a [`Checked`] plan or says everything that is wrong with it at once.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::template::{self, Reference};

/// Most attempts a step may make (its first one included).
pub const MAX_ATTEMPTS: u32 = 10;

/// Longest first backoff a retry may ask for; later ones double it, up to
/// [`MAX_BACKOFF_MS`].
pub const MAX_BACKOFF_MS: u64 = 30_000;

/// Most bytes of a plan, as JSON or YAML text: a larger one is refused
/// before it is parsed.
pub const MAX_PLAN_BYTES: usize = 1024 * 1024;

/// Most steps of a plan.
pub const MAX_STEPS: usize = 1000;

/// Most plans running inside each other: a `plan_run` with this many
/// `plan_run`s above it refuses to start.
pub const MAX_DEPTH: usize = 8;

/// A plan: steps, each a tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// What the plan is for, shown in its run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The steps, in the order they are listed (and reported).
    pub steps: Vec<Step>,
}

/// One tool call of a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Unique within the plan: 1 to 64 of `A-Z a-z 0-9 _ -`.
    pub id: String,
    /// The tool to call.
    pub tool: String,
    /// The upstream server to call it on, by the name the operator
    /// declared it under (`weir serve --upstream NAME=…`); this server's
    /// tool when absent. Never an address or a command.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "server_name"
    )]
    pub server: Option<String>,
    /// The tool's arguments; strings may hold `${steps.ID.…}` references.
    #[serde(default = "empty_object")]
    pub args: Value,
    /// The steps whose terminal event this one waits for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// When it runs, once the steps it follows have ended (all must hold);
    /// else it is skipped.
    #[serde(default, rename = "if", skip_serializing_if = "Option::is_none")]
    pub condition: Option<Conditions>,
    /// Attempts after a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<Retry>,
    /// Time limit of each attempt, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// `server: NAME`; anything else (the `{url}` and `{command}` forms plans
/// once had) is refused with what to write instead.
fn server_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) => Ok(Some(name)),
        Some(_) => Err(serde::de::Error::custom(
            "`server` is the name of an upstream server the operator declared \
             (weir serve --upstream NAME=…); a plan cannot give a URL or a command",
        )),
    }
}

/// One condition, or a list that must all hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Conditions {
    /// One.
    One(Condition),
    /// All of these.
    All(Vec<Condition>),
}

/// A condition as written: `{step, outcome}` (how a step ended) or
/// `{path, equals | not_equals | exists}` (a value of an earlier step).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// The step whose outcome is tested.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The outcome (or outcomes, any of which) it must have had.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OneOrMany<Outcome>>,
    /// A reference to a value: `steps.ID.result.field…`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The value must equal this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<Value>,
    /// The value must not equal this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_equals: Option<Value>,
    /// The value must be there and not null (`true`), or not (`false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exists: Option<bool>,
}

/// One value or a list of them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// One.
    One(T),
    /// Several.
    Many(Vec<T>),
}

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Its last attempt completed.
    Completed,
    /// Its last attempt failed (or it could not start).
    Failed,
    /// Its run was cancelled.
    Canceled,
    /// It did not run: its condition did not hold.
    Skipped,
}

impl Outcome {
    /// The name, as plans spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Canceled => "canceled",
            Outcome::Skipped => "skipped",
        }
    }
}

/// Bounded retries: `attempts` in all, the first retry `backoff_ms` after
/// a failure, each later one twice as long as the one before (at most
/// [`MAX_BACKOFF_MS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retry {
    /// Attempts in all, the first included: 1 to [`MAX_ATTEMPTS`].
    pub attempts: u32,
    /// The wait before the first retry, in milliseconds.
    #[serde(default = "default_backoff")]
    pub backoff_ms: u64,
}

fn default_backoff() -> u64 {
    500
}

impl Retry {
    /// The wait before attempt `next` (2 for the first retry).
    pub fn backoff(&self, next: u32) -> std::time::Duration {
        let doubled = self
            .backoff_ms
            .saturating_mul(1u64 << (next.saturating_sub(2)).min(20));
        std::time::Duration::from_millis(doubled.min(MAX_BACKOFF_MS))
    }
}

/// Why a plan cannot run.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The text is not a plan (YAML or JSON syntax, a missing or unknown
    /// field).
    #[error("the plan cannot be read: {0}")]
    Parse(String),
    /// The plan is larger than [`MAX_PLAN_BYTES`]; it was not parsed.
    #[error(
        "the plan is larger than {} KiB of JSON or YAML, the most a plan may be; split it into smaller plans",
        MAX_PLAN_BYTES / 1024
    )]
    TooLarge,
    /// The plan reads, but is wrong; every problem is listed.
    #[error("the plan is not valid:\n- {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n- "))]
    Invalid(Vec<Problem>),
}

/// One thing wrong with a plan.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// No steps at all.
    #[error("it has no steps; list at least one under `steps`")]
    NoSteps,
    /// A step id that cannot be used.
    #[error("step id {0:?} is not valid: use 1 to 64 of A-Z, a-z, 0-9, '_' or '-'")]
    BadId(String),
    /// Two steps share an id.
    #[error("two steps are named {0:?}; step ids must be unique")]
    DuplicateId(String),
    /// `after` names a step that does not exist.
    #[error("step {step:?} runs after {missing:?}, which is not a step of this plan")]
    UnknownAfter {
        /// The step.
        step: String,
        /// The name it gave.
        missing: String,
    },
    /// The steps wait for each other in a circle.
    #[error("steps wait for each other in a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// No such tool.
    #[error(
        "step {step:?} calls tool {tool:?}, which this server does not have; it has: {available}"
    )]
    UnknownTool {
        /// The step.
        step: String,
        /// The tool.
        tool: String,
        /// The tools there are, comma-separated.
        available: String,
    },
    /// More than [`MAX_STEPS`] steps.
    #[error("it has {0} steps; a plan may have at most {MAX_STEPS}: split it into smaller plans")]
    TooManySteps(usize),
    /// A `server` the operator did not declare.
    #[error(
        "step {step:?} calls server {server:?}, which is not declared; {}",
        if declared.is_empty() {
            "no upstream servers are declared (the operator declares them with weir serve --upstream NAME=URL)".to_owned()
        } else {
            format!("the declared servers are: {declared}")
        }
    )]
    UnknownServer {
        /// The step.
        step: String,
        /// The name it gave.
        server: String,
        /// The declared names, comma-separated.
        declared: String,
    },
    /// `args` is not an object.
    #[error("step {0:?}: args must be an object of the tool's arguments")]
    ArgsNotObject(String),
    /// A template or condition path that cannot be read.
    #[error("step {step:?}: {message}")]
    BadReference {
        /// The step.
        step: String,
        /// What is wrong.
        message: String,
    },
    /// A reference to a step that will not have ended when this one starts.
    #[error(
        "step {step:?} uses {reference} but does not run after step {target:?} (add it to `after`)"
    )]
    NotBefore {
        /// The step.
        step: String,
        /// The reference as written.
        reference: String,
        /// The step it names.
        target: String,
    },
    /// A condition that is neither `{step, outcome}` nor `{path, test}`.
    #[error(
        "step {0:?}: a condition is either {{step, outcome}} or {{path, and one of equals, not_equals, exists}}"
    )]
    BadCondition(String),
    /// Retries out of bounds.
    #[error(
        "step {0:?}: retry.attempts must be 1 to {MAX_ATTEMPTS}, and retry.backoff_ms at most {MAX_BACKOFF_MS}"
    )]
    BadRetry(String),
    /// A zero time limit.
    #[error("step {0:?}: timeout_ms must be at least 1")]
    BadTimeout(String),
}

/// A condition, checked.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// Step `step` ended in one of `outcomes`.
    Outcome {
        /// The step.
        step: String,
        /// Any of these.
        outcomes: Vec<Outcome>,
    },
    /// A value of an earlier step passes `test`.
    Value {
        /// Where the value is.
        reference: Reference,
        /// What it must be.
        test: Test,
    },
}

/// What a value must be.
#[derive(Clone, Debug, PartialEq)]
pub enum Test {
    /// Equal to this (numbers by value: `1` equals `1.0`).
    Equals(Value),
    /// Not equal to this.
    NotEquals(Value),
    /// There and not null, or not.
    Exists(bool),
}

/// A plan that passed every check: steps in the order written, with their
/// conditions parsed.
#[derive(Clone, Debug)]
pub struct Checked {
    /// The plan as written.
    pub plan: Plan,
    /// Each step's conditions, by index.
    pub checks: Vec<Vec<Check>>,
}

impl Plan {
    /// Reads a plan from YAML (JSON is YAML too).
    pub fn parse(text: &str) -> Result<Plan, PlanError> {
        serde_yaml_ng::from_str(text).map_err(|error| PlanError::Parse(error.to_string()))
    }

    /// A plan given as a JSON value, an object or a string of YAML, that
    /// is refused unparsed ([`PlanError::TooLarge`]) when its text (or the
    /// object's JSON) is over [`MAX_PLAN_BYTES`]. The one way a plan from
    /// a caller is read.
    pub fn read(value: &Value) -> Result<Plan, PlanError> {
        if over_limit(value) {
            return Err(PlanError::TooLarge);
        }
        Plan::from_value(value.clone())
    }

    /// A plan given as a JSON value: an object, or a string of YAML.
    pub fn from_value(value: Value) -> Result<Plan, PlanError> {
        match value {
            Value::String(text) => Plan::parse(&text),
            other => {
                serde_json::from_value(other).map_err(|error| PlanError::Parse(error.to_string()))
            }
        }
    }

    /// Checks everything that can be checked before a step runs: the
    /// number of steps, ids, `after` (no unknown step, no cycle), tools
    /// (`tools` this server has; `servers` the upstreams the operator
    /// declared), conditions, retries, time limits, and every `${…}`
    /// reference (its form, and that it names a step this one runs
    /// after). Lists every problem found.
    pub fn check(
        self,
        tools: &BTreeSet<String>,
        servers: &BTreeSet<String>,
    ) -> Result<Checked, PlanError> {
        if self.steps.len() > MAX_STEPS {
            // Nothing else is looked at: the checks below are not made
            // for plans this large.
            return Err(PlanError::Invalid(vec![Problem::TooManySteps(
                self.steps.len(),
            )]));
        }
        let mut problems = Vec::new();
        if self.steps.is_empty() {
            problems.push(Problem::NoSteps);
        }
        let mut ids = BTreeSet::new();
        for step in &self.steps {
            if !valid_id(&step.id) {
                problems.push(Problem::BadId(step.id.clone()));
            }
            if !ids.insert(step.id.as_str()) {
                problems.push(Problem::DuplicateId(step.id.clone()));
            }
        }
        for step in &self.steps {
            for after in &step.after {
                if !ids.contains(after.as_str()) {
                    problems.push(Problem::UnknownAfter {
                        step: step.id.clone(),
                        missing: after.clone(),
                    });
                }
            }
            match &step.server {
                Some(server) if !servers.contains(server) => {
                    problems.push(Problem::UnknownServer {
                        step: step.id.clone(),
                        server: server.clone(),
                        declared: servers.iter().cloned().collect::<Vec<_>>().join(", "),
                    })
                }
                Some(_) => {}
                None if !tools.contains(&step.tool) => problems.push(Problem::UnknownTool {
                    step: step.id.clone(),
                    tool: step.tool.clone(),
                    available: tools.iter().cloned().collect::<Vec<_>>().join(", "),
                }),
                None => {}
            }
            if !step.args.is_object() {
                problems.push(Problem::ArgsNotObject(step.id.clone()));
            }
            if let Some(retry) = &step.retry
                && !((1..=MAX_ATTEMPTS).contains(&retry.attempts)
                    && retry.backoff_ms <= MAX_BACKOFF_MS)
            {
                problems.push(Problem::BadRetry(step.id.clone()));
            }
            if step.timeout_ms == Some(0) {
                problems.push(Problem::BadTimeout(step.id.clone()));
            }
        }
        if let Some(cycle) = find_cycle(&self.steps) {
            problems.push(Problem::Cycle(cycle));
        }
        let before = ancestors(&self.steps);
        let mut checks = Vec::new();
        for step in &self.steps {
            let earlier = before.get(step.id.as_str()).cloned().unwrap_or_default();
            // (reference as written, the step it names)
            let mut used: Vec<(String, String)> = Vec::new();
            match template::references(&step.args) {
                Ok(references) => {
                    for reference in references {
                        used.push((reference.written(), reference.step));
                    }
                }
                Err(message) => problems.push(Problem::BadReference {
                    step: step.id.clone(),
                    message,
                }),
            }
            let written = match &step.condition {
                None => Vec::new(),
                Some(Conditions::One(one)) => vec![one.clone()],
                Some(Conditions::All(all)) => all.clone(),
            };
            let mut parsed = Vec::new();
            for condition in written {
                match check_condition(condition) {
                    Ok(Ok(check)) => {
                        let (reference, target) = match &check {
                            Check::Outcome { step, .. } => {
                                (format!("the outcome of {step:?}"), step.clone())
                            }
                            Check::Value { reference, .. } => {
                                (reference.written(), reference.step.clone())
                            }
                        };
                        used.push((reference, target));
                        parsed.push(check);
                    }
                    Ok(Err(message)) => problems.push(Problem::BadReference {
                        step: step.id.clone(),
                        message,
                    }),
                    Err(()) => problems.push(Problem::BadCondition(step.id.clone())),
                }
            }
            for (reference, target) in used {
                if !earlier.contains(target.as_str()) {
                    problems.push(Problem::NotBefore {
                        step: step.id.clone(),
                        reference,
                        target,
                    });
                }
            }
            checks.push(parsed);
        }
        if problems.is_empty() {
            Ok(Checked { plan: self, checks })
        } else {
            Err(PlanError::Invalid(problems))
        }
    }
}

/// Whether `value` is over [`MAX_PLAN_BYTES`] as text (a string's bytes,
/// an object's JSON), found without making the text: writing stops at the
/// limit.
fn over_limit(value: &Value) -> bool {
    /// Counts bytes, failing past the limit.
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            if self.0 > MAX_PLAN_BYTES {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    match value {
        Value::String(text) => text.len() > MAX_PLAN_BYTES,
        other => serde_json::to_writer(Counter(0), other).is_err(),
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `Err(())`: not a condition's shape; `Ok(Err)`: a path that cannot be read.
fn check_condition(condition: Condition) -> Result<Result<Check, String>, ()> {
    let Condition {
        step,
        outcome,
        path,
        equals,
        not_equals,
        exists,
    } = condition;
    let tests = [
        equals.map(Test::Equals),
        not_equals.map(Test::NotEquals),
        exists.map(Test::Exists),
    ];
    let mut tests = tests.into_iter().flatten();
    match (step, outcome, path, tests.next(), tests.next()) {
        (Some(step), Some(outcome), None, None, None) => Ok(Ok(Check::Outcome {
            step,
            outcomes: match outcome {
                OneOrMany::One(one) => vec![one],
                OneOrMany::Many(many) => many,
            },
        })),
        (None, None, Some(path), Some(test), None) => {
            Ok(Reference::parse(&path).map(|reference| Check::Value { reference, test }))
        }
        _ => Err(()),
    }
}

/// A cycle of `after`s, as step ids from one step back to itself, if there
/// is one (unknown names are reported elsewhere and ignored here).
fn find_cycle(steps: &[Step]) -> Option<Vec<String>> {
    let after: BTreeMap<&str, &[String]> = steps
        .iter()
        .map(|step| (step.id.as_str(), step.after.as_slice()))
        .collect();
    // 0 unseen, 1 on the path, 2 done.
    let mut mark: BTreeMap<&str, u8> = BTreeMap::new();
    fn visit<'a>(
        id: &'a str,
        after: &BTreeMap<&'a str, &'a [String]>,
        mark: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match mark.get(id) {
            Some(2) => return None,
            Some(1) => {
                let from = path.iter().position(|on| *on == id).expect("on the path");
                let mut cycle: Vec<String> = path[from..].iter().map(|s| (*s).to_owned()).collect();
                cycle.push(id.to_owned());
                return Some(cycle);
            }
            _ => {}
        }
        mark.insert(id, 1);
        path.push(id);
        for next in after.get(id).copied().unwrap_or_default() {
            if let Some((known, _)) = after.get_key_value(next.as_str())
                && let Some(cycle) = visit(known, after, mark, path)
            {
                return Some(cycle);
            }
        }
        path.pop();
        mark.insert(id, 2);
        None
    }
    for step in steps {
        if let Some(cycle) = visit(&step.id, &after, &mut mark, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}

/// Each step's transitive `after`s: the steps sure to have ended when it
/// starts.
fn ancestors(steps: &[Step]) -> BTreeMap<&str, BTreeSet<&str>> {
    let after: BTreeMap<&str, &[String]> = steps
        .iter()
        .map(|step| (step.id.as_str(), step.after.as_slice()))
        .collect();
    let mut all = BTreeMap::new();
    for step in steps {
        let mut seen = BTreeSet::new();
        let mut todo: Vec<&str> = step.after.iter().map(String::as_str).collect();
        while let Some(id) = todo.pop() {
            if let Some((known, more)) = after.get_key_value(id)
                && seen.insert(*known)
            {
                todo.extend(more.iter().map(String::as_str));
            }
        }
        all.insert(step.id.as_str(), seen);
    }
    all
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tools() -> BTreeSet<String> {
        ["stream", "echo"].map(str::to_owned).into()
    }

    fn servers() -> BTreeSet<String> {
        ["docs", "github"].map(str::to_owned).into()
    }

    fn problems(yaml: &str) -> Vec<Problem> {
        match Plan::parse(yaml).unwrap().check(&tools(), &servers()) {
            Err(PlanError::Invalid(problems)) => problems,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_plan_reads_from_yaml_with_every_field() {
        let plan = Plan::parse(
            r#"
name: demo
steps:
  - id: fetch
    tool: stream
    args: {count: 3}
    retry: {attempts: 3, backoff_ms: 10}
    timeout_ms: 500
  - id: ok
    tool: echo
    after: [fetch]
    if: {path: steps.fetch.result.count, equals: 3}
    args: {n: "${steps.fetch.result.count}"}
  - id: failed
    tool: echo
    after: [fetch]
    if:
      - {step: fetch, outcome: [failed, canceled]}
      - {path: steps.fetch.error, exists: true}
"#,
        )
        .unwrap();
        let checked = plan.check(&tools(), &servers()).unwrap();
        assert_eq!(
            checked.plan.steps[0].retry,
            Some(Retry {
                attempts: 3,
                backoff_ms: 10
            })
        );
        assert_eq!(checked.plan.steps[0].args, json!({"count": 3}));
        assert_eq!(checked.plan.steps[2].args, json!({}));
        assert_eq!(
            checked.checks[2][0],
            Check::Outcome {
                step: "fetch".into(),
                outcomes: vec![Outcome::Failed, Outcome::Canceled]
            }
        );
        assert!(matches!(
            &checked.checks[1][0],
            Check::Value { test: Test::Equals(value), .. } if *value == json!(3)
        ));
    }

    #[test]
    fn the_same_plan_reads_from_json() {
        let value = json!({"steps": [{"id": "a", "tool": "echo", "args": {"x": 1}}]});
        let from_object = Plan::from_value(value.clone()).unwrap();
        let from_text = Plan::from_value(json!(value.to_string())).unwrap();
        assert_eq!(from_object, from_text);
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let found = problems(
            r#"
steps:
  - {id: a, tool: nope, after: [ghost]}
  - {id: a, tool: echo}
  - {id: "b c", tool: echo, args: [1]}
  - {id: d, tool: echo, retry: {attempts: 0}, timeout_ms: 0}
  - {id: e, tool: echo, args: {x: "${steps.d.result.x}"}, if: {step: d}}
  - {id: f, tool: echo, server: elsewhere}
  - {id: g, tool: anything, server: docs}
"#,
        );
        assert_eq!(
            found,
            [
                Problem::DuplicateId("a".into()),
                Problem::BadId("b c".into()),
                Problem::UnknownAfter {
                    step: "a".into(),
                    missing: "ghost".into()
                },
                Problem::UnknownTool {
                    step: "a".into(),
                    tool: "nope".into(),
                    available: "echo, stream".into()
                },
                Problem::ArgsNotObject("b c".into()),
                Problem::BadRetry("d".into()),
                Problem::BadTimeout("d".into()),
                Problem::UnknownServer {
                    step: "f".into(),
                    server: "elsewhere".into(),
                    declared: "docs, github".into()
                },
                Problem::BadCondition("e".into()),
                Problem::NotBefore {
                    step: "e".into(),
                    reference: "${steps.d.result.x}".into(),
                    target: "d".into()
                },
            ]
        );
        let message = Plan::parse("steps: [{id: a, tool: nope}]")
            .unwrap()
            .check(&tools(), &servers())
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "the plan is not valid:\n- step \"a\" calls tool \"nope\", which this server does not have; it has: echo, stream"
        );
    }

    #[test]
    fn cycles_are_named_step_by_step() {
        let found = problems(
            "steps:\n  - {id: a, tool: echo, after: [c]}\n  - {id: b, tool: echo, after: [a]}\n  - {id: c, tool: echo, after: [b]}\n  - {id: d, tool: echo, after: [d]}\n",
        );
        assert_eq!(
            found,
            [Problem::Cycle(vec![
                "a".into(),
                "c".into(),
                "b".into(),
                "a".into()
            ]),]
        );
        let found = problems("steps:\n  - {id: d, tool: echo, after: [d]}\n");
        assert_eq!(found, [Problem::Cycle(vec!["d".into(), "d".into()])]);
    }

    #[test]
    fn a_reference_must_name_a_step_that_ends_before() {
        // Transitively before is enough; a sibling is not.
        let found = problems(
            r#"
steps:
  - {id: a, tool: echo}
  - {id: b, tool: echo, after: [a]}
  - {id: c, tool: echo, after: [b], args: {x: "${steps.a.text}"}}
  - {id: d, tool: echo, after: [a], args: {x: "${steps.b.outcome}"}}
  - {id: e, tool: echo, args: {x: "${steps.zz.result}"}}
"#,
        );
        assert_eq!(
            found,
            [
                Problem::NotBefore {
                    step: "d".into(),
                    reference: "${steps.b.outcome}".into(),
                    target: "b".into()
                },
                Problem::NotBefore {
                    step: "e".into(),
                    reference: "${steps.zz.result}".into(),
                    target: "zz".into()
                },
            ]
        );
    }

    #[test]
    fn unreadable_plans_say_what_is_wrong() {
        let typo = Plan::parse("steps: [{id: a, tool: echo, afterr: [b]}]").unwrap_err();
        assert!(
            typo.to_string().contains("unknown field `afterr`"),
            "{typo}"
        );
        let syntax = Plan::parse("steps: [").unwrap_err();
        assert!(
            syntax.to_string().starts_with("the plan cannot be read: "),
            "{syntax}"
        );
        assert_eq!(problems("steps: []"), [Problem::NoSteps]);
    }

    /// Issue 22, findings 1 and 4: a step cannot name a URL or a command,
    /// only a declared server; it says what to write instead.
    #[test]
    fn a_server_is_a_declared_name_never_an_address_or_a_command() {
        for server in [
            r#"{command: "touch /tmp/x"}"#,
            r#"{url: "http://127.0.0.1:1/mcp"}"#,
            "[a]",
        ] {
            let error = Plan::parse(&format!("steps: [{{id: a, tool: t, server: {server}}}]"))
                .unwrap_err()
                .to_string();
            assert!(
                error.contains("`server` is the name of an upstream server the operator declared"),
                "{error}"
            );
        }
        let none = Plan::parse("steps: [{id: a, tool: t, server: docs}]")
            .unwrap()
            .check(&tools(), &BTreeSet::new())
            .unwrap_err()
            .to_string();
        assert!(
            none.contains("no upstream servers are declared") && none.contains("--upstream"),
            "{none}"
        );
    }

    /// Issue 22, finding 10: a plan over the byte limit is refused before
    /// it is parsed, as text or as an object; over the step limit, by
    /// `check`, which looks at nothing else then.
    #[test]
    fn plans_are_bounded_in_bytes_and_steps() {
        let step = json!({"id": "s", "tool": "echo", "args": {"pad": "x".repeat(100)}});
        let huge = json!({"steps": vec![step; 12_000]});
        assert!(matches!(Plan::read(&huge), Err(PlanError::TooLarge)));
        let text = json!(huge.to_string());
        assert!(matches!(Plan::read(&text), Err(PlanError::TooLarge)));
        assert!(
            PlanError::TooLarge.to_string().contains("1024 KiB"),
            "{}",
            PlanError::TooLarge
        );
        let steps: Vec<Value> = (0..=MAX_STEPS)
            .map(|i| json!({"id": format!("s{i}"), "tool": "echo"}))
            .collect();
        let many = Plan::read(&json!({ "steps": steps })).unwrap();
        let Err(PlanError::Invalid(problems)) = many.check(&tools(), &servers()) else {
            panic!()
        };
        assert_eq!(problems, [Problem::TooManySteps(MAX_STEPS + 1)]);
    }

    /// Steps `s0..sN` where each may follow any earlier one.
    fn dag(edges: &[Vec<usize>]) -> Vec<Step> {
        edges
            .iter()
            .enumerate()
            .map(|(i, after)| Step {
                id: format!("s{i}"),
                tool: "echo".into(),
                server: None,
                args: json!({}),
                after: after
                    .iter()
                    .filter(|&&j| j < i)
                    .map(|j| format!("s{j}"))
                    .collect(),
                condition: None,
                retry: None,
                timeout_ms: None,
            })
            .collect()
    }

    proptest::proptest! {
        /// Steps that only follow earlier ones always pass, and may use
        /// the results of every step they follow, directly or not.
        #[test]
        fn a_plan_without_cycles_passes(edges in proptest::collection::vec(proptest::collection::vec(0usize..12, 0..4), 1..12)) {
            let mut steps = dag(&edges);
            let last = steps.len() - 1;
            let reachable = ancestors(&steps).remove(format!("s{last}").as_str()).unwrap_or_default();
            let reachable: Vec<String> = reachable.into_iter().map(str::to_owned).collect();
            steps[last].args = json!({"x": reachable.iter().map(|id| format!("${{steps.{id}.outcome}}")).collect::<Vec<_>>()});
            let plan = Plan { name: None, steps };
            proptest::prop_assert!(plan.check(&tools(), &servers()).is_ok());
        }

        /// One edge back from an earlier step to a later one that follows
        /// it makes a cycle, and the cycle reported is made of real edges.
        #[test]
        fn a_cycle_is_always_found_and_real(edges in proptest::collection::vec(proptest::collection::vec(0usize..12, 0..4), 2..12)) {
            let mut steps = dag(&edges);
            // Make a chain s0 <- s1 <- … so that closing it is a cycle.
            for (i, step) in steps.iter_mut().enumerate().skip(1) {
                let before = format!("s{}", i - 1);
                if !step.after.contains(&before) {
                    step.after.push(before);
                }
            }
            let last = format!("s{}", steps.len() - 1);
            steps[0].after.push(last);
            let after: BTreeMap<String, Vec<String>> =
                steps.iter().map(|step| (step.id.clone(), step.after.clone())).collect();
            let cycle = find_cycle(&steps).expect("a cycle");
            proptest::prop_assert_eq!(cycle.first(), cycle.last());
            for pair in cycle.windows(2) {
                proptest::prop_assert!(after[&pair[0]].contains(&pair[1]), "{:?}", cycle);
            }
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let retry = Retry {
            attempts: 5,
            backoff_ms: 100,
        };
        let waits: Vec<u64> = (2..=5)
            .map(|next| retry.backoff(next).as_millis() as u64)
            .collect();
        assert_eq!(waits, [100, 200, 400, 800]);
        let long = Retry {
            attempts: 10,
            backoff_ms: 20_000,
        };
        assert_eq!(long.backoff(3).as_millis() as u64, MAX_BACKOFF_MS);
    }
}
