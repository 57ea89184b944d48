//! The tools' arguments: schemas and checks, with messages that name the
//! field and say what is accepted.

use serde::Deserialize;
use serde_json::{Value, json};
use weir_core::RunError;

use crate::gather::Limits;

/// Defaults and bounds of `llmstxt_generate`'s limits.
const MAX_FILES: (usize, usize) = (40, 500);
const MAX_FILE_KB: (usize, usize) = (64, 1024);
const MAX_TOTAL_KB: (usize, usize) = (1024, 16 * 1024);
const MAX_MODEL_LINKS: (usize, usize) = (24, 200);
/// Largest text or file `llmstxt_validate` reads.
pub(crate) const MAX_VALIDATE_BYTES: usize = 4 << 20;

use weir_runtime::kit::{invalid, parse_object as parse};

/// `llmstxt_generate`'s arguments, as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GenerateArgs {
    source: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    use_model: Option<bool>,
    #[serde(default)]
    max_files: Option<usize>,
    #[serde(default)]
    max_file_kb: Option<usize>,
    #[serde(default)]
    max_total_kb: Option<usize>,
    #[serde(default)]
    max_model_links: Option<usize>,
    #[serde(default)]
    write: bool,
    #[serde(default)]
    overwrite: bool,
}

/// `llmstxt_generate`'s arguments, checked.
#[derive(Debug)]
pub(crate) struct Generate {
    pub(crate) source: String,
    pub(crate) name: Option<String>,
    pub(crate) base_url: Option<String>,
    pub(crate) use_model: bool,
    pub(crate) limits: Limits,
    pub(crate) max_model_links: usize,
    /// Write llms.txt, llms-full.txt and llms-ctx.txt into the source
    /// directory too.
    pub(crate) write: Write,
}

/// Whether the files go into the source directory, and over files there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Write {
    /// Artifacts only.
    No,
    /// Into the source directory; a file already there stops the run.
    New,
    /// Into the source directory, replacing files there.
    Overwrite,
}

fn bounded(
    field: &str,
    value: Option<usize>,
    (default, max): (usize, usize),
) -> Result<usize, RunError> {
    match value {
        None => Ok(default),
        Some(value) if (1..=max).contains(&value) || (value == 0 && field == "max_model_links") => {
            Ok(value)
        }
        Some(value) => Err(invalid(format!(
            "{field} is {value}; give 1 to {max} (default {default})"
        ))),
    }
}

pub(crate) fn generate(arguments: Value) -> Result<Generate, RunError> {
    let args: GenerateArgs = parse(arguments)?;
    if args.source.trim().is_empty() {
        return Err(invalid(
            "source is empty: give a directory inside the server's roots or an allowed https:// git URL",
        ));
    }
    Ok(Generate {
        source: args.source,
        name: args.name.filter(|name| !name.trim().is_empty()),
        base_url: args.base_url.filter(|url| !url.trim().is_empty()),
        use_model: args.use_model.unwrap_or(true),
        limits: Limits {
            max_files: bounded("max_files", args.max_files, MAX_FILES)?,
            max_file_bytes: bounded("max_file_kb", args.max_file_kb, MAX_FILE_KB)? * 1024,
            max_total_bytes: bounded("max_total_kb", args.max_total_kb, MAX_TOTAL_KB)? * 1024,
        },
        max_model_links: bounded("max_model_links", args.max_model_links, MAX_MODEL_LINKS)?,
        write: match (args.write, args.overwrite) {
            (false, false) => Write::No,
            (true, false) => Write::New,
            (true, true) => Write::Overwrite,
            (false, true) => {
                return Err(invalid(
                    "overwrite replaces files that write: true writes: send both",
                ));
            }
        },
    })
}

pub(crate) fn generate_schema() -> Value {
    let limit = |what: &str, (default, max): (usize, usize)| json!({"type": "integer", "minimum": 1, "maximum": max, "default": default, "description": what});
    let mut model_links = limit(
        "Most links whose notes the model writes (0: none).",
        MAX_MODEL_LINKS,
    );
    model_links["minimum"] = 0.into();
    json!({
        "type": "object",
        "properties": {
            "source": {"type": "string", "description": "The repository: a directory inside the server's roots, or an https:// git URL of an allowed host (see the tool's description)."},
            "name": {"type": "string", "description": "The H1; default: from the manifest or README."},
            "base_url": {"type": "string", "description": "Prefix of every link; default: relative paths."},
            "use_model": {"type": "boolean", "default": true, "description": "false: no model, the deterministic fallback."},
            "max_files": limit("Most files linked and read.", MAX_FILES),
            "max_file_kb": limit("Most KiB read of one file.", MAX_FILE_KB),
            "max_total_kb": limit("Most KiB read in all.", MAX_TOTAL_KB),
            "max_model_links": model_links,
            "write": {"type": "boolean", "default": false, "description": "Also write llms.txt, llms-full.txt and llms-ctx.txt into the source directory; a file already there stops the run."},
            "overwrite": {"type": "boolean", "default": false, "description": "With write: replace files already there."},
        },
        "required": ["source"],
        "additionalProperties": false,
    })
}

/// Which format `llmstxt_validate` checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    LlmsTxt,
    Full,
    Ctx,
}

impl Format {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::LlmsTxt => "llms.txt",
            Format::Full => "llms-full.txt",
            Format::Ctx => "llms-ctx.txt",
        }
    }

    fn parse(name: &str) -> Option<Format> {
        [Format::LlmsTxt, Format::Full, Format::Ctx]
            .into_iter()
            .find(|format| format.name() == name)
    }

    /// The format a file's name says: `llms-ctx*.txt`, `llms-full.txt`, else llms.txt.
    fn of_path(path: &str) -> Format {
        let name = path.rsplit('/').next().unwrap_or(path);
        if name.starts_with("llms-ctx") {
            Format::Ctx
        } else if name.starts_with("llms-full") {
            Format::Full
        } else {
            Format::LlmsTxt
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ValidateArgs {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    format: Option<String>,
}

/// What `llmstxt_validate` checks: a text (or a file's path), and its format.
#[derive(Debug)]
pub(crate) enum Subject {
    Text(String),
    Path(String),
}

pub(crate) fn validate(arguments: Value) -> Result<(Subject, Format), RunError> {
    let args: ValidateArgs = parse(arguments)?;
    let format = match &args.format {
        Some(name) => Format::parse(name).ok_or_else(|| {
            invalid(format!(
                "format is {name:?}; give llms.txt, llms-full.txt or llms-ctx.txt"
            ))
        })?,
        None => args
            .path
            .as_deref()
            .map_or(Format::LlmsTxt, Format::of_path),
    };
    let subject = match (args.text, args.path) {
        (Some(text), None) if text.len() <= MAX_VALIDATE_BYTES => Subject::Text(text),
        (Some(text), None) => {
            return Err(invalid(format!(
                "text is {} bytes; at most {MAX_VALIDATE_BYTES} are checked",
                text.len()
            )));
        }
        (None, Some(path)) => Subject::Path(path),
        _ => {
            return Err(invalid(
                "give exactly one of text (the file's content) and path (a file inside the server's roots)",
            ));
        }
    };
    Ok((subject, format))
}

pub(crate) fn validate_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "The file's content."},
            "path": {"type": "string", "description": "A file inside the server's roots, instead of text."},
            "format": {"type": "string", "enum": ["llms.txt", "llms-full.txt", "llms-ctx.txt"], "description": "Default: by path's file name, else llms.txt."},
        },
        "additionalProperties": false,
    })
}

#[cfg(test)]
mod tests {
    use weir_runtime::Roots;
    use weir_runtime::tool_contract::{ToolCheck, check_pack, fields_of, info_of};

    use super::*;
    use crate::{LlmsTxtConfig, LlmsTxtPack};

    /// Every tool's schema and parser agree (the check every pack runs).
    #[test]
    fn every_tool_s_schema_and_parser_agree() {
        let roots = Roots::new([std::env::temp_dir()]).unwrap();
        let pack = LlmsTxtPack::new(LlmsTxtConfig::new(roots)).unwrap();
        let info = |name: &str| info_of(&pack, name);
        check_pack(
            &pack,
            vec![
                ToolCheck::new(info("llmstxt_generate"), |arguments| {
                    generate(arguments).map(drop)
                })
                .fields(fields_of::<GenerateArgs>())
                // overwrite: true needs write: true.
                .base(json!({"source": ".", "write": true})),
                ToolCheck::new(info("llmstxt_validate"), |arguments| {
                    validate(arguments).map(drop)
                })
                .fields(fields_of::<ValidateArgs>())
                .base(json!({"text": "# Name"}))
                .except("path", "instead of text, never beside it: checked below"),
                // The same with path instead of text.
                ToolCheck::new(info("llmstxt_validate"), |arguments| {
                    validate(arguments).map(drop)
                })
                .base(json!({"path": "llms.txt"}))
                .except("text", "instead of path, never beside it: checked above"),
            ],
        );
    }

    #[test]
    fn generate_arguments_are_checked_with_their_bounds() {
        let call = generate(json!({"source": "."})).unwrap();
        assert_eq!(
            (
                call.limits.max_files,
                call.limits.max_file_bytes,
                call.max_model_links
            ),
            (40, 64 * 1024, 24)
        );
        assert!(call.use_model);
        let zero = generate(json!({"source": ".", "max_model_links": 0})).unwrap();
        assert_eq!(zero.max_model_links, 0);
        for (arguments, needle) in [
            (json!({"source": " "}), "source is empty"),
            (
                json!({"source": ".", "max_files": 0}),
                "max_files is 0; give 1 to 500",
            ),
            (
                json!({"source": ".", "max_file_kb": 5000}),
                "max_file_kb is 5000",
            ),
            (json!({"source": ".", "colour": 1}), "unknown field"),
        ] {
            let error = generate(arguments).unwrap_err();
            assert_eq!(error.code, weir_core::FailureCode::InvalidArguments);
            assert!(error.message.contains(needle), "{}", error.message);
        }
    }

    #[test]
    fn validate_takes_text_or_path_and_infers_the_format() {
        assert!(matches!(
            validate(json!({"text": "# x"})),
            Ok((Subject::Text(_), Format::LlmsTxt))
        ));
        assert!(matches!(
            validate(json!({"path": "out/llms-ctx.txt"})),
            Ok((Subject::Path(_), Format::Ctx))
        ));
        assert!(matches!(
            validate(json!({"path": "llms.txt", "format": "llms-full.txt"})),
            Ok((_, Format::Full))
        ));
        for arguments in [json!({}), json!({"text": "a", "path": "b"})] {
            assert!(
                validate(arguments)
                    .unwrap_err()
                    .message
                    .contains("exactly one")
            );
        }
        assert!(
            validate(json!({"text": "a", "format": "md"}))
                .unwrap_err()
                .message
                .contains("llms-ctx.txt")
        );
    }
}
