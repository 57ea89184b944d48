//! The pack's two tools, as the runtime sees them.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, FailureCode, RunError};
use weir_runtime::{Hints, Roots, RunContext, Tool, ToolInfo, open_beneath};

use crate::args::{self, Format, Subject};
use crate::llm::ChatClient;
use crate::source::CloneConfig;
use crate::spec::{self, Finding};
use crate::{formats, generate};

/// `llmstxt_generate`.
pub(crate) struct GenerateTool {
    pub(crate) client: Option<Arc<ChatClient>>,
    pub(crate) roots: Roots,
    pub(crate) clone: Arc<CloneConfig>,
}
/// `llmstxt_validate`.
pub(crate) struct ValidateTool {
    pub(crate) roots: Roots,
}

fn findings_schema() -> Value {
    json!({"type": "array", "items": {"type": "object", "properties": {
        "line": {"type": "integer", "minimum": 0, "description": "1-based; 0 for the file as a whole."},
        "message": {"type": "string"}
    }, "required": ["line", "message"]}})
}

#[async_trait]
impl Tool for GenerateTool {
    fn info(&self) -> ToolInfo {
        let roots = self.roots.describe();
        let hosts = if self.clone.hosts.is_empty() {
            "none on this server".to_owned()
        } else {
            self.clone.hosts.join(", ")
        };
        let model = match &self.client {
            Some(client) => format!(
                "The summary and notes come from the model {} at {}, streamed; where it fails, from the repository's own text.",
                client.config().model,
                client.url()
            ),
            None => "No model is configured here: the summary and notes come from the repository's own text.".into(),
        };
        let mut info = ToolInfo::new(
            "llmstxt_generate",
            format!(
                "Generates llms.txt (llmstxt.org), llms-full.txt, llms-ctx.txt and llms.json for a repository: a directory inside the roots ({roots}) or an https:// git URL of an allowed host ({hosts}). {model} The files are the run's artifacts (runs_artifact); write: true also puts them in the source directory (overwrite: true to replace files there)."
            ),
            args::generate_schema(),
        );
        let string = json!({"type": "string"});
        info.output_schema = Some(weir_core::output_contract(&json!({
            "type": "object",
            "properties": {
                "name": string,
                "summary": string,
                "mode": {"type": "string", "enum": ["model", "mixed", "fallback"], "description": "What came from the model: all, some or none."},
                "llms_txt": {"type": "string", "description": "The llms.txt written."},
                "warnings": {"type": "array", "items": string, "description": "The validator's notes."},
                "files": {"type": "integer", "minimum": 0},
                "left_out": {"type": "integer", "minimum": 0, "description": "Files not linked: generated, results, vendored, lock files, near-duplicates, past the limits."},
                "left_out_files": {"type": "array", "items": {"type": "object", "properties": {"path": string, "why": string}, "required": ["path", "why"]}},
                "written": {"type": "array", "items": string, "description": "With write: the files written."},
                "sections": {"type": "array", "items": {"type": "object"}},
                "artifacts": {"type": "array", "items": {"type": "object", "properties": {
                    "name": string, "uri": string, "mime": string, "bytes": {"type": "integer"}
                }, "required": ["name", "uri", "mime", "bytes"]}},
                "model": {"type": "object", "description": "Calls, tokens, failures, or why it was not used."},
            },
            "required": ["name", "summary", "mode", "llms_txt", "warnings", "files", "left_out", "sections", "artifacts", "model"],
        })));
        info.streams = true;
        info.timeout = Some(generate::TIMEOUT);
        // Each run reads a tree and may hold a model for minutes.
        info.max_concurrent = Some(4);
        // With write and overwrite it replaces the llms.txt files in the
        // source directory; it asks a model (or clones a repository) over
        // the network, and a model answers differently each time.
        info.with_hints(Hints {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        })
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let call = args::generate(arguments)?;
        generate::run(self.client.as_deref(), &self.roots, &self.clone, &ctx, call).await
    }
}

#[async_trait]
impl Tool for ValidateTool {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "llmstxt_validate",
            "Checks an llms.txt against the llmstxt.org spec, or an llms-full.txt / llms-ctx.txt against llmstxt_generate's forms: errors and warnings by line.",
            args::validate_schema(),
        );
        info.output_schema = Some(weir_core::output_contract(&json!({
            "type": "object",
            "properties": {
                "valid": {"type": "boolean"},
                "format": {"type": "string"},
                "errors": findings_schema(),
                "warnings": findings_schema(),
                "document": {"type": "object", "description": "The llms.txt as read."},
            },
            "required": ["valid", "format", "errors", "warnings"],
        })));
        info.with_hints(Hints::READ_ONLY)
    }

    async fn run(&self, _ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let (subject, format) = args::validate(arguments)?;
        let text = match subject {
            Subject::Text(text) => text,
            Subject::Path(path) => read(&self.roots, &path).await?,
        };
        let (errors, warnings, document) = match format {
            Format::LlmsTxt => {
                let checked = spec::validate(&text);
                (checked.errors, checked.warnings, Some(checked.document))
            }
            Format::Full => (formats::check_full(&text), Vec::new(), None),
            Format::Ctx => (formats::check_ctx(&text), Vec::new(), None),
        };
        let valid = errors.is_empty();
        let list = |findings: &[Finding]| {
            findings
                .iter()
                .map(|f| format!("\n  line {}: {}", f.line, f.message))
                .collect::<String>()
        };
        let text = match valid {
            true => format!(
                "valid {}{}",
                format.name(),
                if warnings.is_empty() {
                    String::new()
                } else {
                    format!("; warnings:{}", list(&warnings))
                }
            ),
            false => format!(
                "invalid {}:{}{}",
                format.name(),
                list(&errors),
                if warnings.is_empty() {
                    String::new()
                } else {
                    format!("\nwarnings:{}", list(&warnings))
                }
            ),
        };
        let mut structured = json!({"valid": valid, "format": format.name(), "errors": errors, "warnings": warnings});
        if let Some(document) = document {
            structured["document"] = json!(document);
        }
        Ok(Completed {
            content: vec![Content::text(text)],
            structured: Some(structured),
        })
    }
}

/// A file's text, bounded: a file inside `roots`, opened beneath its root.
async fn read(roots: &Roots, path: &str) -> Result<String, RunError> {
    let resolved = roots.resolve(path)?;
    let roots = roots.clone();
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || read_beneath(&roots, &resolved, &path))
        .await
        .map_err(|error| RunError::new(FailureCode::Internal, format!("reading a file: {error}")))?
}

fn read_beneath(roots: &Roots, resolved: &std::path::Path, path: &str) -> Result<String, RunError> {
    use std::io::Read as _;
    let refused = |message: String| RunError::new(FailureCode::ToolError, message);
    let root = roots
        .root_of(resolved)
        .expect("a resolved path lies in a root");
    let relative = resolved.strip_prefix(root).unwrap_or(resolved);
    let file = open_beneath(root, relative)
        .map_err(|error| refused(format!("cannot read {path}: {error}")))?;
    let meta = file
        .metadata()
        .map_err(|error| refused(format!("cannot read {path}: {error}")))?;
    if !meta.is_file() {
        return Err(refused(format!("{path} is not a file")));
    }
    let mut bytes = Vec::new();
    file.take(args::MAX_VALIDATE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| refused(format!("cannot read {path}: {error}")))?;
    if bytes.len() > args::MAX_VALIDATE_BYTES {
        return Err(refused(format!(
            "{path} is more than {} bytes; at most that many are checked",
            args::MAX_VALIDATE_BYTES
        )));
    }
    String::from_utf8(bytes).map_err(|_| refused(format!("{path} is not UTF-8 text")))
}
