//! The event contract (docs/design.md): what a run's log is made of.
//!
//! The JSON form is part of weir's public surface (SSE, `runs_events`, the
//! SQLite store), so field names and tags here are stable: add optional fields,
//! never rename.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Position of an event in its run's log. Dense from 0: `started` is 0.
pub type Seq = u64;

/// A run's identifier: 1 to 64 characters of `[A-Za-z0-9_-]`, so it is safe in
/// a URL path, a file name, a Redis key and an SSE `id:` alike.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct RunId(String);

/// A string that is not a valid [`RunId`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid run id {0:?}: use 1 to 64 characters of A-Z, a-z, 0-9, '_' or '-'")]
pub struct InvalidRunId(pub String);

impl RunId {
    /// Checks `s` and wraps it.
    pub fn parse(s: &str) -> Result<RunId, InvalidRunId> {
        let valid = !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if valid {
            Ok(RunId(s.to_owned()))
        } else {
            Err(InvalidRunId(s.to_owned()))
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for RunId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for RunId {
    type Err = InvalidRunId;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunId::parse(s)
    }
}

impl<'de> Deserialize<'de> for RunId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        RunId::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// One entry of a run's log.
///
/// ```
/// use weir_core::{EventKind, RunEvent, RunId, Warning};
/// let event = RunEvent {
///     run_id: RunId::parse("r1").unwrap(),
///     seq: 3,
///     ts: 1_700_000_000_000,
///     kind: EventKind::Warning(Warning { message: "slow disk".into() }),
/// };
/// assert_eq!(
///     serde_json::to_string(&event).unwrap(),
///     r#"{"run_id":"r1","seq":3,"ts":1700000000000,"type":"warning","message":"slow disk"}"#
/// );
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunEvent {
    /// The run this event belongs to.
    pub run_id: RunId,
    /// Dense position in the run's log.
    pub seq: Seq,
    /// Wall-clock time the runtime recorded the event, in Unix milliseconds.
    pub ts: u64,
    /// What happened; serialized flat, with `type` as the tag.
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What an event says. Exactly one terminal kind (`completed`, `failed`,
/// `canceled`) ends every run's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    /// Always seq 0.
    Started(Started),
    /// Facts about the run: expected total, backends, free-form info.
    Meta(Meta),
    /// A progress report.
    Progress(Progress),
    /// A log line, possibly from a child process's stdout or stderr.
    Log(Log),
    /// A piece of the result.
    Partial(Partial),
    /// A file the run produced, stored beside the log.
    Artifact(ArtifactRef),
    /// A non-fatal problem.
    Warning(Warning),
    /// The run waits for its caller to answer a question.
    InputRequired(InputRequired),
    /// The run stopped waiting for its caller's answer.
    InputEnded(InputEnded),
    /// Terminal: the tool returned a result.
    Completed(Completed),
    /// Terminal: the tool failed, panicked, timed out or was interrupted.
    Failed(Failed),
    /// Terminal: somebody cancelled the run.
    Canceled(Canceled),
}

impl EventKind {
    /// Whether this kind ends a run.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            EventKind::Completed(_) | EventKind::Failed(_) | EventKind::Canceled(_)
        )
    }

    /// The `type` tag, as it appears in JSON.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::Started(_) => "started",
            EventKind::Meta(_) => "meta",
            EventKind::Progress(_) => "progress",
            EventKind::Log(_) => "log",
            EventKind::Partial(_) => "partial",
            EventKind::Artifact(_) => "artifact",
            EventKind::Warning(_) => "warning",
            EventKind::InputRequired(_) => "input_required",
            EventKind::InputEnded(_) => "input_ended",
            EventKind::Completed(_) => "completed",
            EventKind::Failed(_) => "failed",
            EventKind::Canceled(_) => "canceled",
        }
    }
}

/// Payload of `started`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Started {
    /// Name of the tool the run executes.
    pub tool: String,
    /// The arguments it was called with.
    pub arguments: Value,
    /// The node (host or configured name) executing it.
    pub node: String,
}

/// Payload of `meta`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// How many items the run expects to produce, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Backends that contribute to the result, e.g. `["scip", "git"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backends: Vec<String>,
    /// Anything else worth telling a watcher.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub info: Value,
    /// What the run's partials count in when they are shown as progress
    /// (to a client that asked for progress and not for partial results).
    /// `None`: structured items count as items, text as lines.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "ProgressUnit::lenient"
    )]
    pub progress_unit: Option<ProgressUnit>,
}

/// What a run's partials count in, as progress: its `meta` says which
/// ([`Meta::progress_unit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProgressUnit {
    /// Each structured item, and each content block, is one.
    Items,
    /// Lines of text: each text block adds its lines; in a `group` (a
    /// program's stdout, say) text that continues an unfinished line adds
    /// no new one. Other blocks and structured items are one each.
    Lines,
    /// Bytes of text (UTF-8), and of other blocks and items as JSON.
    Bytes,
}

impl ProgressUnit {
    /// Reads a unit, and a unit this version does not know as none: a log
    /// written by a newer weir stays readable (its partials are counted by
    /// the default rule).
    fn lenient<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ProgressUnit>, D::Error> {
        let unit = Option::<Value>::deserialize(d)?;
        Ok(unit.and_then(|unit| ProgressUnit::deserialize(unit).ok()))
    }
}

/// Payload of `progress`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// Work done so far, in the unit of `total`.
    pub progress: f64,
    /// Work to do in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// Human-readable status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Name of the current phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Estimated milliseconds until done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_ms: Option<u64>,
}

/// Payload of `log`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Log {
    /// Severity, with MCP's (syslog's) names.
    pub level: LogLevel,
    /// Which output stream of a child process the line came from.
    #[serde(default)]
    pub stream: LogStream,
    /// The text, without a trailing newline.
    pub text: String,
}

/// Log severities, the eight that MCP logging notifications use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(missing_docs)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// The origin of a log line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    /// A child's standard output.
    Stdout,
    /// A child's standard error.
    Stderr,
    /// The tool itself.
    #[default]
    None,
}

/// Payload of `partial`: result data delivered before the run ends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    /// Content blocks, e.g. a line of output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Content>,
    /// Structured items, e.g. a chunk of references.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Value>,
    /// Logical group the data belongs to (a file, a module, an agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
}

/// A block of result content. A protocol-neutral subset of MCP's content
/// types; the MCP layer owns the conversion.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Content {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 data.
        data: String,
        /// e.g. `image/png`.
        mime_type: String,
    },
    /// Audio, base64-encoded.
    Audio {
        /// Base64 data.
        data: String,
        /// e.g. `audio/wav`.
        mime_type: String,
    },
    /// A resource embedded whole: text or base64 `blob`.
    Resource {
        /// The resource's URI.
        uri: String,
        /// Its media type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Text content.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Base64 binary content (when not text).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        blob: Option<String>,
    },
    /// A link to a resource the client can read, e.g. an artifact.
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// A short name.
        name: String,
        /// Its media type, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

impl Content {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Content {
        Content::Text { text: text.into() }
    }

    /// The text of `blocks`: their text blocks run together, the others
    /// left out.
    pub fn text_of(blocks: &[Content]) -> String {
        blocks
            .iter()
            .filter_map(|block| match block {
                Content::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Payload of `artifact`: where a stored file is and what it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactRef {
    /// Name, unique within the run.
    pub name: String,
    /// `weir://runs/{run_id}/artifacts/{name}`.
    pub uri: String,
    /// Media type.
    pub mime: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Hex SHA-256 of the content.
    pub sha256: String,
}

/// Payload of `warning`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// What went wrong, and what it means for the result.
    pub message: String,
}

/// What a run asks its caller for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    /// A completion from the caller's model.
    Sampling,
    /// Structured input from the user.
    Elicitation,
}

/// Payload of `input_required`: the run asked its caller a question and
/// waits for the answer. The runtime writes it (a tool asks through
/// `RunContext::ask`), one wait at a time, and ends each wait with
/// `input_ended` or the terminal event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputRequired {
    /// What is asked for.
    pub input: InputKind,
    /// What the user is asked, for an elicitation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How long the run waits for the answer, in milliseconds.
    pub timeout_ms: u64,
}

/// Payload of `input_ended`: the wait that the last `input_required` began
/// is over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputEnded {
    /// How it ended.
    pub outcome: InputOutcome,
}

/// How a wait for the caller's answer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputOutcome {
    /// The caller answered (declining a form is an answer too).
    Answered,
    /// The caller answered with an error, or cannot answer this kind of
    /// question.
    Refused,
    /// No answer came within the question's time limit.
    TimedOut,
    /// The caller went away (ended its session) before answering.
    Gone,
}

/// Payload of `completed`: the tool's final result.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Completed {
    /// Content blocks of the result (beyond what `partial` events carried).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<Content>,
    /// Structured result, matching the tool's output schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
}

/// Payload of `failed`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failed {
    /// What failed and what to do about it.
    pub error: RunError,
}

/// Why a run failed, in a form a person and a program can both act on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunError {
    /// Machine-readable class.
    pub code: FailureCode,
    /// What happened.
    pub message: String,
    /// What to do next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
    /// The result the run still produced, when it has one: a tool whose
    /// work ran to its end but failed (a program that exited non-zero)
    /// hands back everything it made, and the run still counts as failed
    /// (set with [`RunError::with_result`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<Completed>>,
}

impl RunError {
    /// An error of class `code`.
    pub fn new(code: FailureCode, message: impl Into<String>) -> RunError {
        RunError {
            code,
            message: message.into(),
            remediation: None,
            result: None,
        }
    }

    /// Adds what to do next.
    pub fn with_remediation(mut self, remediation: impl Into<String>) -> RunError {
        self.remediation = Some(remediation.into());
        self
    }

    /// Adds the result the failed run still produced: its content and
    /// structured result go to the caller with the error (in MCP, a
    /// result marked `isError` that carries them; to a plan, the step's
    /// `result` and `text`), and the run ends `failed`.
    ///
    /// ```
    /// use serde_json::json;
    /// use weir_core::{Completed, Content, FailureCode, RunError};
    /// let error = RunError::new(FailureCode::ToolError, "the program exited with code 3")
    ///     .with_result(Completed { content: vec![Content::text("[exit code 3]")], structured: Some(json!({"exit_code": 3})) });
    /// assert_eq!(error.result.unwrap().structured.unwrap()["exit_code"], 3);
    /// ```
    pub fn with_result(mut self, result: Completed) -> RunError {
        self.result = Some(Box::new(result));
        self
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        match &self.remediation {
            Some(next) => write!(f, " ({next})"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for RunError {}

/// Classes of failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCode {
    /// The tool reported an error.
    ToolError,
    /// The arguments did not fit the tool's input schema.
    InvalidArguments,
    /// The run exceeded its time limit.
    Timeout,
    /// The tool panicked.
    Panicked,
    /// The server stopped while the run was open.
    Interrupted,
    /// The worker ended without a terminal event.
    WorkerExited,
    /// weir itself failed (e.g. the event log could not be written).
    Internal,
}

/// Payload of `canceled`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Canceled {
    /// Who or what cancelled the run.
    pub reason: String,
}

/// Lets `ctx.emit(Progress { .. })` and friends build an [`EventKind`].
macro_rules! into_kind {
    ($($payload:ident),*) => {$(
        impl From<$payload> for EventKind {
            fn from(payload: $payload) -> EventKind {
                EventKind::$payload(payload)
            }
        }
    )*};
}
into_kind!(
    Started,
    Meta,
    Progress,
    Log,
    Partial,
    Warning,
    InputRequired,
    InputEnded,
    Completed,
    Failed,
    Canceled
);

impl ArtifactRef {
    /// The URI of artifact `name` of run `run_id`.
    pub fn uri_for(run_id: &RunId, name: &str) -> String {
        format!("weir://runs/{run_id}/artifacts/{name}")
    }
}

impl From<ArtifactRef> for EventKind {
    fn from(payload: ArtifactRef) -> EventKind {
        EventKind::Artifact(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(json: &str) {
        let event: RunEvent = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&event).unwrap(), json);
    }

    #[test]
    fn wire_form_is_stable() {
        roundtrip(
            r#"{"run_id":"a","seq":0,"ts":1,"type":"started","tool":"t","arguments":{"x":1},"node":"n"}"#,
        );
        roundtrip(r#"{"run_id":"a","seq":1,"ts":1,"type":"meta","total":5,"backends":["git"]}"#);
        roundtrip(r#"{"run_id":"a","seq":1,"ts":1,"type":"meta","progress_unit":"bytes"}"#);
        roundtrip(
            r#"{"run_id":"a","seq":2,"ts":1,"type":"progress","progress":1.5,"total":3.0,"message":"m","phase":"p","eta_ms":9}"#,
        );
        roundtrip(
            r#"{"run_id":"a","seq":3,"ts":1,"type":"log","level":"info","stream":"stdout","text":"hi"}"#,
        );
        roundtrip(
            r#"{"run_id":"a","seq":4,"ts":1,"type":"partial","content":[{"type":"text","text":"x"}],"items":[1],"group":"f.rs"}"#,
        );
        roundtrip(
            r#"{"run_id":"a","seq":5,"ts":1,"type":"artifact","name":"out","uri":"weir://runs/a/artifacts/out","mime":"text/plain","bytes":3,"sha256":"ab"}"#,
        );
        roundtrip(
            r#"{"run_id":"a","seq":6,"ts":1,"type":"input_required","input":"elicitation","message":"m","timeout_ms":5}"#,
        );
        roundtrip(r#"{"run_id":"a","seq":7,"ts":1,"type":"input_ended","outcome":"timed_out"}"#);
        roundtrip(r#"{"run_id":"a","seq":6,"ts":1,"type":"completed","structured":{"ok":true}}"#);
        roundtrip(
            r#"{"run_id":"a","seq":6,"ts":1,"type":"failed","error":{"code":"timeout","message":"m","remediation":"r"}}"#,
        );
        roundtrip(
            r#"{"run_id":"a","seq":6,"ts":1,"type":"failed","error":{"code":"tool_error","message":"m","result":{"content":[{"type":"text","text":"[exit code 3]"}],"structured":{"exit_code":3}}}}"#,
        );
        roundtrip(r#"{"run_id":"a","seq":6,"ts":1,"type":"canceled","reason":"client"}"#);
    }

    /// A unit this version does not know (a newer writer's) reads as none,
    /// and does not make the event unreadable.
    #[test]
    fn an_unknown_progress_unit_reads_as_none() {
        let event: RunEvent = serde_json::from_str(
            r#"{"run_id":"a","seq":1,"ts":1,"type":"meta","total":2,"progress_unit":"tokens"}"#,
        )
        .unwrap();
        let EventKind::Meta(meta) = event.kind else {
            panic!("{event:?}")
        };
        assert_eq!((meta.total, meta.progress_unit), (Some(2), None));
        let lines: Meta = serde_json::from_str(r#"{"progress_unit":"lines"}"#).unwrap();
        assert_eq!(lines.progress_unit, Some(ProgressUnit::Lines));
    }

    #[test]
    fn run_ids_are_checked() {
        assert!(RunId::parse("01J-abc_9").is_ok());
        assert!(RunId::parse("").is_err());
        assert!(RunId::parse("a/b").is_err());
        assert!(RunId::parse(&"x".repeat(65)).is_err());
        assert!(serde_json::from_str::<RunId>(r#""../etc""#).is_err());
    }
}
