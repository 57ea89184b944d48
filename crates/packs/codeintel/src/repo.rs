//! Which repository a call means, and where its index lives.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use weir_core::{FailureCode, RunError};

use crate::CodeIntelConfig;

/// The repository at `path` (absolute, or relative to the server's working
/// directory), resolved and checked against the configured roots.
pub(crate) fn resolve(config: &CodeIntelConfig, path: &str) -> Result<PathBuf, RunError> {
    let invalid = |message: String| RunError::new(FailureCode::InvalidArguments, message);
    if path.trim().is_empty() {
        return Err(invalid("the repository path is empty".into()));
    }
    let root = std::fs::canonicalize(path).map_err(|error| {
        invalid(format!("cannot open the repository {path:?}: {error}"))
            .with_remediation("pass the path of a directory on the server's machine")
    })?;
    if !root.is_dir() {
        return Err(invalid(format!("{path:?} is not a directory")));
    }
    if !config.roots.is_empty()
        && !config
            .roots
            .iter()
            .any(|allowed| std::fs::canonicalize(allowed).is_ok_and(|a| root.starts_with(a)))
    {
        return Err(invalid(format!(
            "{} is outside the directories this server may index ({})",
            root.display(),
            config
                .roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(root)
}

/// The index file of the repository at `root` (a canonical path): one per
/// repository, named after it and a hash of its path.
pub fn index_file(index_dir: &Path, root: &Path) -> PathBuf {
    let digest = Sha256::digest(root.as_os_str().as_encoded_bytes());
    let hash: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
    let name: String = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    index_dir.join(format!("{name}-{hash}.sqlite"))
}
