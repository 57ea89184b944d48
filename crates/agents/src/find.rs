//! Where a CLI's program is, or a clear error saying how to get it.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use crate::{AgentError, CliKind};

/// The program to run for `cli`: `explicit` when given (a path, or a name
/// looked up on `path`), else the CLI's own name on `path`.
pub(crate) fn program(
    cli: &CliKind,
    explicit: Option<&Path>,
    path: Option<&OsStr>,
) -> Result<PathBuf, AgentError> {
    let wanted = explicit.unwrap_or_else(|| Path::new(cli.name()));
    if wanted.components().count() > 1 || wanted.is_absolute() {
        return if executable(wanted) {
            Ok(wanted.to_owned())
        } else {
            Err(not_found(cli, vec![wanted.to_owned()]))
        };
    }
    let dirs: Vec<PathBuf> = path
        .map(|path| std::env::split_paths(path).collect())
        .unwrap_or_default();
    dirs.iter()
        .map(|dir| dir.join(wanted))
        .find(|candidate| executable(candidate))
        .ok_or_else(|| not_found(cli, dirs.clone()))
}

fn executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn not_found(cli: &CliKind, searched: Vec<PathBuf>) -> AgentError {
    let package = match cli {
        CliKind::Claude => Some(("Claude Code", "@anthropic-ai/claude-code")),
        CliKind::Codex => Some(("Codex", "@openai/codex")),
        CliKind::Gemini => Some(("the Gemini CLI", "@google/gemini-cli")),
        CliKind::Custom { .. } => None,
    };
    let install = match package {
        Some((what, package)) => format!(
            "install {what} from the npm registry (`npm install -g {package}`) so that `{}` is on PATH, or give the program's path",
            cli.name()
        ),
        None => format!(
            "install `{}` so that it is on PATH, or give the program's path",
            cli.name()
        ),
    };
    AgentError::NotFound {
        cli: cli.name().to_owned(),
        searched,
        install,
    }
}
