//! What a tool is to the runtime.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, RunError, RunId};

use crate::RunContext;

/// A tool's description: what clients see, and how the scheduler treats it.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolInfo {
    /// Unique name, e.g. `execute_code`.
    pub name: String,
    /// A title for people, if the tool has one (MCP's `title`).
    pub title: Option<String>,
    /// What it does, for people and models.
    pub description: String,
    /// JSON Schema of its arguments.
    pub input_schema: Value,
    /// JSON Schema of its structured result, if it has one, as listed.
    /// weir's packs list what every result carries
    /// (`weir_core::output_contract` of the full shape), since a host
    /// pays for every byte of `tools/list`.
    pub output_schema: Option<Value>,
    /// Whether it delivers its result incrementally (`partial` events).
    pub streams: bool,
    /// Time limit of one run, unless the caller sets one; the scheduler's
    /// default applies when `None`.
    pub timeout: Option<Duration>,
    /// Most runs of this tool at once; the scheduler's default when `None`.
    pub max_concurrent: Option<usize>,
    /// Groups of streamed text that the final structured result carries
    /// too, each as a string field named after its group; set with
    /// [`ToolInfo::with_text_fields`], which declares them in
    /// `output_schema`. Empty by default.
    pub text_fields: Vec<String>,
    /// Top-level argument fields whose values are secrets, set with
    /// [`ToolInfo::with_secret_fields`]: the tool gets them, the log never
    /// does. Empty by default. Fields the input schema marks secret
    /// (`"writeOnly": true` or `"x-weir-secret": true`, at any depth) are
    /// secret too, listed here or not.
    pub secret_fields: Vec<String>,
    /// MCP tool annotations (`readOnlyHint`, `destructiveHint`, …) shown
    /// as given; `None` by default. The server adds `streamingHint` for a
    /// tool that [`streams`](ToolInfo::streams).
    pub annotations: Option<Value>,
}

/// What a tool does to the world it touches, as MCP's tool annotations
/// say it (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
/// `openWorldHint`). Hosts decide by them which calls need a person's
/// approval: headless Codex, for one, refuses a tool that does not say it
/// is read-only. Set with [`ToolInfo::with_hints`], all four at once, so
/// none is left to a host's default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hints {
    /// It changes nothing: it reads, or answers from weir's own records
    /// (a cache it keeps up to date counts as reading).
    pub read_only: bool,
    /// It may delete or overwrite what was there, rather than only add.
    pub destructive: bool,
    /// Calling it again with the same arguments changes nothing more.
    pub idempotent: bool,
    /// It reaches beyond this machine's files and processes: the network,
    /// a model's endpoint, another server.
    pub open_world: bool,
}

impl Hints {
    /// Reads this machine only: a query.
    pub const READ_ONLY: Hints = Hints {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
}

/// What marks a property of an input schema as a secret, besides JSON
/// Schema's own `"writeOnly": true`: `"x-weir-secret": true`.
pub const SECRET_KEYWORD: &str = "x-weir-secret";

/// What a secret argument value reads as wherever a run's arguments are
/// read back ([`ToolInfo::with_secret_fields`]).
pub const REDACTED: &str = "[redacted]";

/// In a result with [text fields](ToolInfo::with_text_fields): whether the
/// streamed text was cut at the server's result limit.
pub const OUTPUT_TRUNCATED: &str = "output_truncated";

/// In a result with [text fields](ToolInfo::with_text_fields): the URI of
/// the run, where the whole output stays readable (`weir://runs/{run_id}`).
pub const OUTPUT_URI: &str = "output_uri";

/// The structured result of a completed run whose tool declared [text
/// fields](ToolInfo::with_text_fields): the tool's own (or an object of
/// the fields alone) with each field's streamed text, whether that text
/// was cut, and the run's URI, as the tool's output schema says. The one
/// way every caller that hands a run's result on fills them in (the MCP
/// server, a parent passing on its child's): the output is what a model
/// most needs to see, and some hosts show it only this.
pub fn with_streamed_fields(
    structured: Option<Value>,
    fields: Vec<(String, String)>,
    truncated: bool,
    run_id: &RunId,
) -> Option<Value> {
    if fields.is_empty() {
        return structured;
    }
    let mut structured = structured.unwrap_or_else(|| json!({}));
    if let Some(object) = structured.as_object_mut() {
        for (group, text) in fields {
            object.insert(group, Value::String(text));
        }
        object.insert(OUTPUT_TRUNCATED.into(), truncated.into());
        object.insert(OUTPUT_URI.into(), format!("weir://runs/{run_id}").into());
    }
    Some(structured)
}

/// Replaces a secret value: an object keeps its keys, every value
/// [`REDACTED`]; anything else becomes [`REDACTED`].
pub fn redact_value(value: &mut Value) {
    match value {
        Value::Object(entries) => {
            for entry in entries.values_mut() {
                *entry = REDACTED.into();
            }
        }
        other => *other = REDACTED.into(),
    }
}

/// How deep [`redact_by_schema`] follows a schema: a schema deeper than
/// this (or a recursive one, through `$ref`, which is not followed) has
/// its deeper values stored as given. Arguments nest at most 128 deep
/// (the JSON parser's limit), schemas far less.
const MAX_SCHEMA_DEPTH: usize = 64;

/// Redacts in `value` what `schema` marks secret (see [`ToolInfo::redact`]).
fn redact_by_schema(schema: &Value, value: &mut Value, depth: usize) {
    if depth > MAX_SCHEMA_DEPTH {
        return;
    }
    let Some(schema) = schema.as_object() else {
        return;
    };
    let marked = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
    if marked("writeOnly") || marked(SECRET_KEYWORD) {
        redact_value(value);
        return;
    }
    match value {
        Value::Object(entries) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let others = schema.get("additionalProperties");
            for (key, entry) in entries.iter_mut() {
                if let Some(property) = properties
                    .and_then(|properties| properties.get(key))
                    .or(others)
                {
                    redact_by_schema(property, entry, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items") {
                for entry in items {
                    redact_by_schema(item, entry, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Redacts the arguments of any registered tool, by its own rules
/// ([`Tool::redact`]): what a tool that calls other tools (a plan, whose
/// steps hold their tools' arguments) is given to redact theirs. The
/// scheduler implements it over its tools.
pub trait Redactor: Send + Sync {
    /// `arguments` of `tool` as they may be stored; a tool that is not
    /// registered has every value redacted (its secrets are unknown).
    fn redact(&self, tool: &str, arguments: &Value) -> Value;
}

impl ToolInfo {
    /// A description with the scheduler's defaults and no output schema.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema,
            output_schema: None,
            streams: false,
            timeout: None,
            max_concurrent: None,
            text_fields: Vec::new(),
            secret_fields: Vec::new(),
            annotations: None,
        }
    }

    /// Declares the tool's [`Hints`] in its annotations, beside any
    /// annotation already there.
    ///
    /// ```
    /// use serde_json::json;
    /// use weir_runtime::{Hints, ToolInfo};
    /// let info = ToolInfo::new("look", "Looks.", json!({"type": "object"})).with_hints(Hints::READ_ONLY);
    /// assert_eq!(info.annotations, Some(json!({
    ///     "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false,
    /// })));
    /// ```
    pub fn with_hints(mut self, hints: Hints) -> ToolInfo {
        let mut annotations = match self.annotations.take() {
            Some(Value::Object(given)) => given,
            _ => serde_json::Map::new(),
        };
        for (name, value) in [
            ("readOnlyHint", hints.read_only),
            ("destructiveHint", hints.destructive),
            ("idempotentHint", hints.idempotent),
            ("openWorldHint", hints.open_world),
        ] {
            annotations.insert(name.into(), value.into());
        }
        self.annotations = Some(Value::Object(annotations));
        self
    }

    /// The values of these top-level argument fields are secrets (a
    /// program's environment, an API key): the tool is called with them,
    /// but the run's log and summary — everything a client, `weir runs` or
    /// the store's file can read back — keep a redacted copy (see
    /// [`ToolInfo::redact`]).
    ///
    /// ```
    /// use serde_json::json;
    /// use weir_runtime::ToolInfo;
    /// let info = ToolInfo::new("run", "Runs a program.", json!({"type": "object"}))
    ///     .with_secret_fields(&["env"]);
    /// assert_eq!(info.secret_fields, ["env"]);
    /// ```
    pub fn with_secret_fields(mut self, fields: &[&str]) -> ToolInfo {
        self.secret_fields = fields.iter().map(|field| (*field).to_owned()).collect();
        self
    }

    /// `arguments` as they may be stored and read back: each secret value —
    /// a field [`with_secret_fields`](ToolInfo::with_secret_fields) names,
    /// or one whose property in the input schema says `"writeOnly": true`
    /// or `"x-weir-secret": true`, at any depth of `properties`,
    /// `additionalProperties` and `items` — is replaced: an object keeps
    /// its keys (a reader sees which variables were set) with every value
    /// [`REDACTED`]; any other value becomes [`REDACTED`] whole. Fields
    /// that are absent stay absent.
    ///
    /// ```
    /// use serde_json::json;
    /// use weir_runtime::ToolInfo;
    /// let schema = json!({"type": "object", "properties": {
    ///     "auth": {"type": "object", "properties": {"token": {"type": "string", "writeOnly": true}}},
    ///     "headers": {"type": "array", "items": {"type": "object", "properties": {"value": {"x-weir-secret": true}}}},
    /// }});
    /// let info = ToolInfo::new("fetch", "Fetches.", schema);
    /// let stored = info.redact(&json!({"auth": {"token": "t", "user": "u"}, "headers": [{"name": "X", "value": "v"}]}));
    /// assert_eq!(stored, json!({"auth": {"token": "[redacted]", "user": "u"}, "headers": [{"name": "X", "value": "[redacted]"}]}));
    /// ```
    ///
    /// ```
    /// use serde_json::json;
    /// use weir_runtime::ToolInfo;
    /// let info = ToolInfo::new("run", "Runs a program.", json!({"type": "object"}))
    ///     .with_secret_fields(&["env", "key"]);
    /// let stored = info.redact(&json!({"code": "x", "env": {"API_KEY": "s3cret"}, "key": "k"}));
    /// assert_eq!(stored, json!({"code": "x", "env": {"API_KEY": "[redacted]"}, "key": "[redacted]"}));
    /// ```
    pub fn redact(&self, arguments: &Value) -> Value {
        let mut stored = arguments.clone();
        redact_by_schema(&self.input_schema, &mut stored, 0);
        for field in &self.secret_fields {
            if let Some(value) = stored.get_mut(field.as_str()) {
                redact_value(value);
            }
        }
        stored
    }

    /// The final structured result also carries the text streamed in
    /// `groups` (the `group` of `partial` events), so that a host that
    /// hands its model only `structuredContent` shows the model the output.
    ///
    /// For each group the MCP server adds a string field of the same name
    /// to the tool's structured result (which must be a JSON object): the
    /// group's text, in order, as far as the server's result limit allows
    /// (the same text as the result's content blocks, which it shares the
    /// limit with), `""` when nothing came. Beside them [`OUTPUT_TRUNCATED`]
    /// (`true` when the text was cut) and [`OUTPUT_URI`] (the run, where
    /// the rest is). The server owns these fields: a value the tool set
    /// under one of these names is replaced. Nothing is added to a failed
    /// run's result, unless the run failed with one
    /// ([`RunError::with_result`]).
    ///
    /// This declares those fields in `output_schema` (an object schema is
    /// made if there is none, so set yours first), as required, so the
    /// result validates against it.
    ///
    /// ```
    /// use serde_json::json;
    /// use weir_runtime::ToolInfo;
    /// let mut info = ToolInfo::new("run_program", "Runs a program.", json!({"type": "object"}));
    /// info.output_schema = Some(json!({
    ///     "type": "object",
    ///     "properties": {"exit_code": {"type": ["integer", "null"]}},
    ///     "required": ["exit_code"],
    /// }));
    /// let info = info.with_text_fields(&["stdout", "stderr"]);
    /// let schema = info.output_schema.as_ref().unwrap();
    /// assert_eq!(schema["properties"]["stderr"]["type"], "string");
    /// assert_eq!(schema["properties"]["output_truncated"]["type"], "boolean");
    /// assert_eq!(schema["required"], json!(["exit_code", "stdout", "stderr", "output_truncated", "output_uri"]));
    /// assert_eq!(info.text_fields, ["stdout", "stderr"]);
    /// ```
    pub fn with_text_fields(mut self, groups: &[&str]) -> ToolInfo {
        let mut schema = self
            .output_schema
            .take()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({ "type": "object" }));
        let fields = groups
            .iter()
            .map(|group| {
                let description = format!("Streamed as {group}; cut when {OUTPUT_TRUNCATED}.");
                (*group, json!({ "type": "string", "description": description }))
            })
            .chain([
                (
                    OUTPUT_TRUNCATED,
                    json!({ "type": "boolean", "description": "Text cut at the result limit; all of it is at output_uri (runs_events)." }),
                ),
                (
                    OUTPUT_URI,
                    json!({ "type": "string", "description": "weir://runs/{run_id}" }),
                ),
            ]);
        for (name, field) in fields {
            schema["properties"][name] = field;
            let required = &mut schema["required"];
            if !required.is_array() {
                *required = json!([]);
            }
            let required = required.as_array_mut().expect("made an array above");
            if !required.iter().any(|known| known == name) {
                required.push(name.into());
            }
        }
        self.output_schema = Some(schema);
        self.text_fields = groups.iter().map(|group| (*group).to_owned()).collect();
        self
    }
}

/// A long-running tool. It reports through its [`RunContext`] and returns its
/// final result; it never writes a terminal event itself and never knows
/// which protocol its caller speaks.
///
/// **Cancellation drops the future.** On cancel or timeout the runtime drops
/// the future returned by `run` (after which it writes `canceled` or
/// `failed`), so cleanup that must happen, such as killing a child process,
/// belongs in a `Drop` impl. Long loops can also watch
/// [`RunContext::cancelled`] to stop early.
///
/// ```
/// use async_trait::async_trait;
/// use serde_json::{Value, json};
/// use weir_core::{Completed, Content, Progress, RunError};
/// use weir_runtime::{RunContext, Tool, ToolInfo};
///
/// struct Count;
///
/// #[async_trait]
/// impl Tool for Count {
///     fn info(&self) -> ToolInfo {
///         ToolInfo::new("count", "Counts to n.", json!({"type": "object"}))
///     }
///     async fn run(&self, ctx: RunContext, args: Value) -> Result<Completed, RunError> {
///         let n = args["n"].as_u64().unwrap_or(3);
///         for i in 1..=n {
///             let _ = ctx.emit(Progress { progress: i as f64, total: Some(n as f64), ..Default::default() }).await;
///         }
///         Ok(Completed { content: vec![Content::text(format!("counted to {n}"))], structured: None })
///     }
/// }
/// ```
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The tool's description; read once, when it is registered.
    fn info(&self) -> ToolInfo;

    /// Executes one run.
    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError>;

    /// `arguments` as the store may keep them and anyone may read them
    /// back, secrets redacted; the scheduler calls it wherever a run's
    /// arguments are stored (its summary and its `started` event). By
    /// default, by this tool's input schema ([`ToolInfo::redact`]; `info`
    /// is this tool's, as registered). A tool whose arguments hold other
    /// tools' arguments (a plan's steps) redacts those with `tools`.
    fn redact(&self, info: &ToolInfo, arguments: &Value, tools: &dyn Redactor) -> Value {
        let _ = tools;
        info.redact(arguments)
    }
}

/// Tools that belong together and are registered as one, e.g. the code
/// execution pack. A pack is built (and may probe the machine) before the
/// scheduler starts; the binary enables each pack by a cargo feature.
pub trait Pack {
    /// A short name for logs and `get_status`, e.g. `exec`.
    fn name(&self) -> &'static str;

    /// The pack's tools, ready to register with the scheduler.
    fn tools(&self) -> Vec<std::sync::Arc<dyn Tool>>;

    /// Something an operator should know at start (e.g. that programs run
    /// without a sandbox, and why), printed as a warning. `None` by default.
    fn warning(&self) -> Option<String> {
        None
    }
}
