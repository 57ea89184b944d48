//! The three tools of the pack, as the runtime sees them.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use weir_core::{Completed, Content, FailureCode, RunError};
use weir_runtime::{Hints, RunContext, Tool, ToolInfo};

use super::Shared;
use super::args::{self, Execute, ExecuteArgs, ListArgs, ValidateArgs};
use super::jail::{Collected, Launch, describe_status};
use super::language::Language;
use super::sandbox::Isolation;

/// Most bytes of diagnostics `validate_code` returns.
const MAX_DIAGNOSTICS: usize = 64 * 1024;
/// Time limit of a syntax check.
const CHECK_TIMEOUT: Duration = Duration::from_secs(20);

/// `execute_code`.
pub(crate) struct ExecuteCode(pub(crate) Arc<Shared>);
/// `validate_code`.
pub(crate) struct ValidateCode(pub(crate) Arc<Shared>);
/// `list_languages`.
pub(crate) struct ListLanguages(pub(crate) Arc<Shared>);

/// What a program run without the sandbox may do: anything its user can.
const UNSANDBOXED: Hints = Hints {
    read_only: false,
    destructive: true,
    idempotent: false,
    open_world: true,
};

/// One sentence on the sandbox, for tool descriptions.
fn sandbox_sentence(isolation: &Isolation) -> String {
    match isolation {
        Isolation::Bubblewrap(_) => "Sandbox: bubblewrap, no network, system directories read-only, a fresh working directory per run.".into(),
        Isolation::None { reason } => format!(
            "NO SANDBOX on this server ({reason}): programs can use the network and their user's files."
        ),
    }
}

/// `bytes` for people: in MiB when it is a whole number of them.
fn size(bytes: u64) -> String {
    match bytes % (1 << 20) {
        0 if bytes > 0 => format!("{} MiB", bytes >> 20),
        _ => format!("{bytes} bytes"),
    }
}

/// What can run here, for tool descriptions.
fn languages_sentence(pack: &Shared) -> String {
    match pack.unavailable_reason() {
        Some(why) => {
            format!("No language is available on this server ({why}): every call is refused.")
        }
        None => format!("Languages here: {}.", pack.available_summary()),
    }
}

#[async_trait]
impl Tool for ExecuteCode {
    fn info(&self) -> ToolInfo {
        let pack = &self.0;
        let config = &pack.config;
        let mut info = ToolInfo::new(
            "execute_code",
            format!(
                "Runs a program and returns its stdout, stderr and exit code, streaming output as it runs. A non-zero exit, a signal or the timeout fails the call (isError), output kept. {} {} Limits: {} of output, {}.",
                languages_sentence(pack),
                sandbox_sentence(pack.jail.isolation()),
                size(config.max_output_bytes),
                pack.jail.limits_sentence(),
            ),
            args::execute_schema(
                &pack.accepted_names(),
                config.max_timeout,
                config.default_timeout,
            ),
        );
        info.output_schema = Some(args::execute_output_schema());
        // The server puts the streamed output in the structured result too,
        // for hosts that show their model only that.
        // The values of `env` are often credentials: the program gets them,
        // the run's log (and every reader of it) only their names.
        let mut info = info
            .with_text_fields(&["stdout", "stderr"])
            .with_secret_fields(&["env"]);
        // Listed: what every result carries, typed (no descriptions).
        info.output_schema = info.output_schema.as_ref().map(weir_core::output_contract);
        // In the sandbox a program changes nothing that outlives its run
        // and reaches no network.
        let mut info = info.with_hints(match pack.jail.isolation() {
            Isolation::Bubblewrap(_) => Hints {
                read_only: false,
                destructive: false,
                idempotent: false,
                open_world: false,
            },
            Isolation::None { .. } => UNSANDBOXED,
        });
        info.streams = true;
        // The tool enforces the caller's timeout itself (and reports it);
        // this is the scheduler's backstop.
        info.timeout = Some(config.max_timeout + config.kill_grace + Duration::from_secs(30));
        info.max_concurrent = Some(config.max_concurrent);
        info
    }

    async fn run(&self, ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let call = self.arguments(arguments)?;
        super::run::execute(&self.0, &ctx, call).await
    }
}

impl ExecuteCode {
    /// The call's arguments, checked: all that is decided before anything
    /// runs.
    pub(crate) fn arguments(&self, arguments: Value) -> Result<Execute, RunError> {
        let pack = &self.0;
        let call: ExecuteArgs = args::parse(arguments)?;
        let file = pack.language(&call.language)?.spec.file;
        call.check(file, pack.config.default_timeout, pack.config.max_timeout)
    }
}

#[async_trait]
impl Tool for ValidateCode {
    fn info(&self) -> ToolInfo {
        let pack = &self.0;
        let mut info = ToolInfo::new(
            "validate_code",
            // execute_code's description names the languages and the
            // sandbox; said again here only when something is wrong.
            format!(
                "Checks a program's syntax without running it (perl -c runs BEGIN blocks), with execute_code's languages, sandbox and limits.{}{}",
                match pack.unavailable_reason() {
                    Some(_) => format!(" {}", languages_sentence(pack)),
                    None => String::new(),
                },
                match pack.jail.isolation() {
                    isolation @ Isolation::None { .. } =>
                        format!(" {}", sandbox_sentence(isolation)),
                    Isolation::Bubblewrap(_) => String::new(),
                }
            ),
            args::validate_schema(&pack.accepted_names()),
        );
        info.output_schema = Some(weir_core::output_contract(&json!({
            "type": "object",
            "properties": {
                "valid": {"type": "boolean"},
                "language": {"type": "string"},
                "checker": {"type": "string", "description": "e.g. compile()."},
                "check_status": {"type": "string", "description": "e.g. exit code 1."},
                "diagnostics": {"type": "string", "description": format!("The checker's output, at most {} KiB.", MAX_DIAGNOSTICS >> 10)},
                "timed_out": {"type": "boolean"}
            },
            "required": ["valid", "language", "checker", "check_status", "diagnostics", "timed_out"]
        })));
        info.timeout = Some(CHECK_TIMEOUT + Duration::from_secs(10));
        info.max_concurrent = Some(pack.config.max_concurrent);
        // Checking runs the checker, never the program; but Perl's -c runs
        // BEGIN blocks, which only the sandbox keeps from changing anything.
        info.with_hints(match pack.jail.isolation() {
            Isolation::Bubblewrap(_) => Hints::READ_ONLY,
            Isolation::None { .. } => UNSANDBOXED,
        })
    }

    async fn run(&self, _ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let pack = &self.0;
        let (language, code) = self.arguments(arguments)?;
        let interpreter = language.found.as_ref().map_err(|reason| {
            RunError::new(
                FailureCode::ToolError,
                format!("{} is not available here: {reason}", language.spec.name),
            )
        })?;
        let launch = Launch {
            program: interpreter.path.clone(),
            args: language.check_args(),
            env: Vec::new(),
            stdin: None,
        };
        let files = [(language.spec.file.into(), code.into_bytes())];
        let Collected {
            status,
            output,
            timed_out,
        } = pack
            .jail
            .run_collected("check", launch, &files, CHECK_TIMEOUT, MAX_DIAGNOSTICS)
            .await
            .map_err(|error| {
                RunError::new(
                    FailureCode::ToolError,
                    format!("the syntax check could not run: {error}"),
                )
            })?;
        let valid = status.success() && !timed_out;
        let diagnostics = String::from_utf8_lossy(&output).into_owned();
        let check_status = describe_status(status);
        let text = match (valid, timed_out) {
            (true, _) => format!("valid {} ({})", language.spec.name, language.spec.checker),
            (false, true) => format!(
                "the syntax check did not finish within {} s",
                CHECK_TIMEOUT.as_secs()
            ),
            (false, false) => format!(
                "invalid {} ({}, {check_status}):\n{diagnostics}",
                language.spec.name, language.spec.checker,
            ),
        };
        Ok(Completed {
            content: vec![Content::text(text)],
            structured: Some(json!({
                "valid": valid,
                "language": language.spec.name,
                "checker": language.spec.checker,
                "check_status": check_status,
                "diagnostics": diagnostics,
                "timed_out": timed_out,
            })),
        })
    }
}

impl ValidateCode {
    /// The call's arguments, checked: the language asked for (found here
    /// or not) and the code.
    pub(crate) fn arguments(&self, arguments: Value) -> Result<(&Language, String), RunError> {
        let call: ValidateArgs = args::parse(arguments)?;
        if call.code.len() > args::MAX_CODE_BYTES {
            return Err(args::invalid(format!(
                "code is larger than {} bytes",
                args::MAX_CODE_BYTES
            )));
        }
        Ok((self.0.language(&call.language)?, call.code))
    }
}

#[async_trait]
impl Tool for ListLanguages {
    fn info(&self) -> ToolInfo {
        let mut info = ToolInfo::new(
            "list_languages",
            "The languages execute_code can run here (with versions, or why missing), the sandbox in use and every limit.",
            args::list_schema(),
        );
        info.output_schema = Some(weir_core::output_contract(&json!({
            "type": "object",
            "properties": {
                "languages": {"type": "array", "items": {"type": "object"}},
                "sandbox": {"type": "object"},
                "run_as": {"type": "string"},
                "workdir": {"type": "string"},
                "limits": {"type": "object"}
            },
            "required": ["languages", "sandbox", "run_as", "workdir", "limits"]
        })));
        info.with_hints(Hints::READ_ONLY)
    }

    async fn run(&self, _ctx: RunContext, arguments: Value) -> Result<Completed, RunError> {
        let ListArgs {} = args::parse(arguments)?;
        let pack = &self.0;
        let mut text = String::new();
        for language in &pack.languages {
            let spec = language.spec;
            let _ = match &language.found {
                Ok(found) => writeln!(
                    text,
                    "{}{} ({})",
                    spec.name,
                    found
                        .version
                        .as_ref()
                        .map(|v| format!(" {v}"))
                        .unwrap_or_default(),
                    found.path.display()
                ),
                Err(reason) => writeln!(text, "{}: not available ({reason})", spec.name),
            };
        }
        let _ = match pack.jail.isolation() {
            Isolation::Bubblewrap(bwrap) => writeln!(
                text,
                "sandbox: bubblewrap {} (no network; only system directories, read-only; private /tmp, /dev/shm and working directory)",
                bwrap.version
            ),
            Isolation::None { reason } => writeln!(
                text,
                "sandbox: NONE ({reason}); programs run with limits only"
            ),
        };
        let _ = writeln!(text, "limits: {}", pack.jail.limits_sentence());
        let config = &pack.config;
        let mut limits = pack.jail.describe_limits();
        limits["default_timeout_s"] = config.default_timeout.as_secs_f64().into();
        limits["max_timeout_s"] = config.max_timeout.as_secs_f64().into();
        limits["kill_grace_s"] = config.kill_grace.as_secs_f64().into();
        limits["output_bytes"] = config.max_output_bytes.into();
        Ok(Completed {
            content: vec![Content::text(text)],
            structured: Some(json!({
                "languages": pack.languages.iter().map(|l| l.describe()).collect::<Vec<_>>(),
                "sandbox": pack.jail.isolation().describe(),
                "run_as": pack.jail.users().describe(),
                "workdir": pack.jail.describe_workdir(),
                "limits": limits,
            })),
        })
    }
}
