//! The tools' arguments: their JSON schemas and their checks, with messages
//! that name the field and say what would be accepted.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use weir_core::RunError;
use weir_runtime::kit::{self, Object};

use super::jail::refused_variable;
use super::output::Encoding;

/// Largest `code`, in bytes.
pub(crate) const MAX_CODE_BYTES: usize = 1 << 20;
/// Largest `stdin`, in bytes.
pub(crate) const MAX_STDIN_BYTES: usize = 1 << 20;
/// Most `files`, and their largest total size once decoded.
pub(crate) const MAX_FILES: usize = 64;
pub(crate) const MAX_FILES_BYTES: usize = 8 << 20;
/// Most `args` and `env` entries.
pub(crate) const MAX_ARGS: usize = 256;
pub(crate) const MAX_ENV: usize = 64;

/// `execute_code`'s arguments, as sent.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ExecuteArgs {
    pub(crate) language: String,
    pub(crate) code: String,
    #[serde(default)]
    pub(crate) stdin: Option<String>,
    #[serde(default)]
    pub(crate) args: Vec<String>,
    #[serde(default)]
    pub(crate) timeout_s: Option<f64>,
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(crate) files: Vec<Object<FileArg>>,
    #[serde(default)]
    pub(crate) output_encoding: Option<String>,
}

/// A file to put in the run's directory before the code runs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FileArg {
    path: String,
    content: String,
    #[serde(default)]
    encoding: Option<String>,
}

/// `execute_code`'s arguments, checked.
#[derive(Debug)]
pub(crate) struct Execute {
    pub(crate) language: String,
    pub(crate) code: String,
    pub(crate) stdin: Option<Vec<u8>>,
    pub(crate) args: Vec<String>,
    pub(crate) timeout: Duration,
    pub(crate) env: Vec<(String, String)>,
    pub(crate) files: Vec<(PathBuf, Vec<u8>)>,
    pub(crate) encoding: Encoding,
}

/// `validate_code`'s arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ValidateArgs {
    pub(crate) language: String,
    pub(crate) code: String,
}

/// `list_languages`'s arguments: none. Parsed all the same, so that the
/// parser refuses what the schema refuses (a field the tool would ignore).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {}

/// What to do after an invalid argument: where to learn what runs here.
const REMEDIATION: &str = "fix the argument and call again; list_languages tells what runs here";

/// An invalid-arguments error saying `message`, pointing at what runs here.
pub(crate) fn invalid(message: impl Into<String>) -> RunError {
    kit::invalid(message).with_remediation(REMEDIATION)
}

/// Parses `arguments`, an object, into `T`, with serde's message on failure.
pub(crate) fn parse<T: serde::de::DeserializeOwned>(arguments: Value) -> Result<T, RunError> {
    kit::parse_object(arguments).map_err(|error| error.with_remediation(REMEDIATION))
}

impl ExecuteArgs {
    /// Checks everything the schema cannot: sizes in bytes, names, paths.
    pub(crate) fn check(
        self,
        main_file: &str,
        default_timeout: Duration,
        max_timeout: Duration,
    ) -> Result<Execute, RunError> {
        if self.code.len() > MAX_CODE_BYTES {
            return Err(invalid(format!(
                "code is {} bytes; at most {MAX_CODE_BYTES} are accepted (put data in `files`)",
                self.code.len()
            )));
        }
        if self
            .stdin
            .as_ref()
            .is_some_and(|s| s.len() > MAX_STDIN_BYTES)
        {
            return Err(invalid(format!(
                "stdin is larger than {MAX_STDIN_BYTES} bytes; put large inputs in `files`"
            )));
        }
        if self.args.len() > MAX_ARGS || self.args.iter().any(|a| a.contains('\0')) {
            return Err(invalid(format!(
                "args must be at most {MAX_ARGS} strings without NUL characters"
            )));
        }
        let timeout = match self.timeout_s {
            None => default_timeout,
            Some(seconds)
                if seconds.is_finite() && seconds > 0.0 && seconds <= max_timeout.as_secs_f64() =>
            {
                Duration::from_secs_f64(seconds)
            }
            Some(seconds) => {
                return Err(invalid(format!(
                    "timeout_s must be more than 0 and at most {}, got {seconds}",
                    max_timeout.as_secs_f64()
                )));
            }
        };
        if self.env.len() > MAX_ENV {
            return Err(invalid(format!("env may set at most {MAX_ENV} variables")));
        }
        for (name, value) in &self.env {
            let valid = name.bytes().enumerate().all(|(i, b)| {
                b == b'_' || b.is_ascii_alphabetic() || (i > 0 && b.is_ascii_digit())
            });
            if name.is_empty() || !valid || value.contains('\0') {
                return Err(invalid(format!(
                    "env.{name}: names are letters, digits and '_' (not starting with a digit); values have no NUL"
                )));
            }
            if let Some(why) = refused_variable(name) {
                return Err(invalid(format!(
                    "env.{name} is refused: {why}. weir never passes loader or C-library variables to a program, whatever the sandbox mode; leave it out"
                )));
            }
        }
        if self.files.len() > MAX_FILES {
            return Err(invalid(format!("at most {MAX_FILES} files are accepted")));
        }
        let mut files = Vec::with_capacity(self.files.len());
        let mut total = 0;
        for (i, Object(file)) in self.files.into_iter().enumerate() {
            let path = relative_path(&file.path)
                .ok_or_else(|| invalid(format!("files[{i}].path {:?} must be a relative path inside the run's directory, without '..'", file.path)))?;
            if path == Path::new(main_file) {
                return Err(invalid(format!(
                    "files[{i}].path {main_file:?} is where the code goes; pick another name"
                )));
            }
            let bytes = match file.encoding.as_deref() {
                None | Some("utf8") => file.content.into_bytes(),
                Some("base64") => base64::engine::general_purpose::STANDARD
                    .decode(file.content.trim())
                    .map_err(|error| {
                        invalid(format!("files[{i}].content is not base64: {error}"))
                    })?,
                Some(other) => {
                    return Err(invalid(format!(
                        "files[{i}].encoding must be \"utf8\" or \"base64\", got {other:?}"
                    )));
                }
            };
            total += bytes.len();
            if total > MAX_FILES_BYTES {
                return Err(invalid(format!(
                    "files hold more than {MAX_FILES_BYTES} bytes in all"
                )));
            }
            files.push((path, bytes));
        }
        let encoding = match self.output_encoding.as_deref() {
            None | Some("utf8") => Encoding::Utf8,
            Some("base64") => Encoding::Base64,
            Some(other) => {
                return Err(invalid(format!(
                    "output_encoding must be \"utf8\" or \"base64\", got {other:?}"
                )));
            }
        };
        Ok(Execute {
            language: self.language,
            code: self.code,
            stdin: self.stdin.map(String::into_bytes),
            args: self.args,
            timeout,
            env: self.env.into_iter().collect(),
            files,
            encoding,
        })
    }
}

/// `path` when it is relative and stays inside: only plain components.
fn relative_path(path: &str) -> Option<PathBuf> {
    let path = Path::new(path);
    let plain = path.components().all(|c| matches!(c, Component::Normal(_)));
    (plain && !path.as_os_str().is_empty() && !path.to_string_lossy().contains('\0'))
        .then(|| path.components().collect())
}

/// `execute_code`'s input schema; `languages` are the names accepted here.
pub(crate) fn execute_schema(
    languages: &[String],
    max_timeout: Duration,
    default_timeout: Duration,
) -> Value {
    json!({
        "type": "object",
        "properties": {
            "language": language_schema(languages),
            "code": {"type": "string", "maxLength": MAX_CODE_BYTES, "description": "The program's source."},
            "stdin": {"type": "string", "maxLength": MAX_STDIN_BYTES, "description": "Standard input (empty when absent)."},
            "args": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_ARGS, "description": "Command-line arguments."},
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": max_timeout.as_secs_f64(),
                "description": format!("Wall-clock limit in seconds (default {}).", default_timeout.as_secs_f64())
            },
            "env": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "maxProperties": MAX_ENV,
                "description": "For the program only, never logged; loader variables (LD_*, MALLOC_*, …) are refused."
            },
            "files": {
                "type": "array",
                "maxItems": MAX_FILES,
                "description": "Files to create in the working directory first.",
                "items": {
                    "type": "object",
                    "required": ["path", "content"],
                    "additionalProperties": false,
                    "properties": {
                        "path": {"type": "string", "description": "Relative path."},
                        "content": {"type": "string"},
                        "encoding": {"type": "string", "enum": ["utf8", "base64"], "description": "Default utf8."}
                    }
                }
            },
            "output_encoding": {
                "type": "string",
                "enum": ["utf8", "base64"],
                "description": "utf8 (default): text, invalid bytes as U+FFFD; base64: the exact bytes."
            }
        },
        "required": ["language", "code"],
        "additionalProperties": false
    })
}

/// The `language` argument: one of `languages`. With none available an
/// empty `enum` would admit no value and read as a schema bug; the
/// property then says why instead, and a call is refused with the reason.
fn language_schema(languages: &[String]) -> Value {
    if languages.is_empty() {
        return json!({
            "type": "string",
            "description": "No language is available on this server (list_languages says why); every call is refused."
        });
    }
    json!({
        "type": "string",
        "enum": languages,
        "description": "See list_languages."
    })
}

/// `execute_code`'s output schema. Beside these fields the server adds
/// `stdout` and `stderr` (the program's streams, cut when
/// `output_truncated`), `output_truncated` and `output_uri`
/// (`ToolInfo::with_text_fields`).
pub(crate) fn execute_output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "language": {"type": "string"},
            "exit_code": {"type": ["integer", "null"], "description": "null when a signal ended it."},
            "signal": {"type": ["string", "null"]},
            "timed_out": {"type": "boolean"},
            "signals_sent": {"type": "array", "items": {"type": "string"}},
            "leftovers_killed": {"type": "boolean", "description": "weir killed processes the program left running."},
            "duration_ms": {"type": "integer"},
            "stdout_bytes": {"type": "integer"},
            "stderr_bytes": {"type": "integer"},
            "shown_bytes": {"type": "integer"},
            "truncated": {"type": "boolean", "description": "Output past output_limit_bytes was counted, not kept."},
            "output_limit_bytes": {"type": "integer"},
            "invalid_utf8": {"type": "boolean", "description": "Invalid bytes shown as U+FFFD."},
            "output_encoding": {"type": "string", "enum": ["utf8", "base64"]},
            "sandbox": {"type": "string", "enum": ["bubblewrap", "none"]},
            "memory_peak_bytes": {"type": ["integer", "null"], "description": "null where memory is not capped per run."},
            "oom_kills": {"type": ["integer", "null"], "description": "null where memory is not capped per run."}
        },
        "required": ["language", "exit_code", "signal", "timed_out", "signals_sent", "leftovers_killed", "duration_ms", "stdout_bytes", "stderr_bytes", "shown_bytes", "truncated", "output_limit_bytes", "invalid_utf8", "output_encoding", "sandbox", "memory_peak_bytes", "oom_kills"]
    })
}

/// `validate_code`'s input schema.
pub(crate) fn validate_schema(languages: &[String]) -> Value {
    json!({
        "type": "object",
        "properties": {
            "language": language_schema(languages),
            "code": {"type": "string", "maxLength": MAX_CODE_BYTES}
        },
        "required": ["language", "code"],
        "additionalProperties": false
    })
}

/// `list_languages`'s input schema: no arguments.
pub(crate) fn list_schema() -> Value {
    json!({"type": "object", "properties": {}, "additionalProperties": false})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(arguments: Value) -> Result<Execute, String> {
        parse::<ExecuteArgs>(arguments)
            .and_then(|args| {
                args.check("main.py", Duration::from_secs(30), Duration::from_secs(60))
            })
            .map_err(|error| error.message)
    }

    #[test]
    fn defaults_and_files_are_filled_in() {
        let checked = check(json!({
            "language": "python", "code": "print(1)",
            "files": [{"path": "data/a.txt", "content": "aGk=", "encoding": "base64"}],
            "env": {"MY_VAR": "1"}, "output_encoding": "base64"
        }))
        .unwrap();
        assert_eq!(checked.timeout, Duration::from_secs(30));
        assert_eq!(
            checked.files,
            [(PathBuf::from("data/a.txt"), b"hi".to_vec())]
        );
        assert_eq!(checked.env, [("MY_VAR".to_owned(), "1".to_owned())]);
        assert_eq!(checked.encoding, Encoding::Base64);
    }

    #[test]
    fn paths_outside_the_directory_and_bad_values_are_refused() {
        let with = |extra: Value| {
            let mut arguments = json!({"language": "python", "code": ""});
            arguments
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            check(arguments).unwrap_err()
        };
        for path in ["../x", "/etc/passwd", "a/../../b", ""] {
            let error = with(json!({"files": [{"path": path, "content": ""}]}));
            assert!(error.contains("relative path"), "{path}: {error}");
        }
        assert!(
            with(json!({"files": [{"path": "main.py", "content": ""}]}))
                .contains("where the code goes")
        );
        assert!(with(json!({"timeout_s": 0})).contains("timeout_s"));
        assert!(with(json!({"timeout_s": 61})).contains("at most 60"));
        assert!(with(json!({"env": {"1X": "a"}})).contains("env.1X"));
        let loader = with(json!({"env": {"LD_PRELOAD": "./x.so"}}));
        assert!(loader.contains("env.LD_PRELOAD is refused"), "{loader}");
        assert!(with(json!({"output_encoding": "hex"})).contains("output_encoding"));
        assert!(with(json!({"surprise": 1})).contains("unknown field"));
    }

    #[test]
    fn arrays_in_place_of_objects_are_refused() {
        // serde's derive alone reads a struct from its fields in order; the
        // schema wants objects, and so does the parser (found by fuzzing).
        let file = check(json!({
            "language": "python", "code": "",
            "files": [["data.txt", "hex", null]]
        }))
        .unwrap_err();
        assert!(file.contains("expected a map"), "{file}");
        let whole = check(json!(["python", "print(1)"])).unwrap_err();
        assert!(whole.contains("expected a map"), "{whole}");
    }
}
