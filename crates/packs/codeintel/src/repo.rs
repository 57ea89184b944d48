//! Which repository a call means, and where its index lives.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use weir_core::{FailureCode, RunError};

use crate::CodeIntelConfig;

/// The repository a caller names at `path` (absolute, or relative to the
/// first root): resolved through every symlink and refused unless it lies
/// inside one of the configured roots.
pub(crate) fn resolve(config: &CodeIntelConfig, path: &str) -> Result<PathBuf, RunError> {
    let root = config.roots.resolve(path)?;
    if !root.is_dir() {
        return Err(RunError::new(
            FailureCode::InvalidArguments,
            format!("{path:?} is not a directory"),
        )
        .with_remediation("pass the repository's directory"));
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

/// The most bytes read of one file for its lines (context, columns): more
/// than any source file the index parses (2 MiB).
pub(crate) const MAX_READ_BYTES: u64 = 8 << 20;

/// The content of `relative`, a file inside the repository at `root`: at
/// most `limit` bytes, of a regular file only (never a FIFO that would
/// block or a device), opened with [`weir_runtime::open_beneath`] so no
/// symlink (or `..`, or absolute path) leads the read out of `root`,
/// even one swapped in after the index was made.
pub(crate) fn read_beneath(root: &Path, relative: &str, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let relative = Path::new(relative);
    let not_a_file = || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file");
    // Before opening: opening a FIFO would wait for a writer.
    if !std::fs::metadata(root.join(relative))?.is_file() {
        return Err(not_a_file());
    }
    let file = weir_runtime::open_beneath(root, relative)?;
    if !file.metadata()?.is_file() {
        return Err(not_a_file());
    }
    let mut content = Vec::new();
    file.take(limit).read_to_end(&mut content)?;
    Ok(content)
}

/// Why `path`, a file a SCIP document names, is not a file of the
/// repository at `root` (`None` when it is, or when it does not exist: a
/// missing file is never read).
pub(crate) fn outside_reason(root: &Path, path: &str) -> Option<String> {
    use std::path::Component;
    if path.is_empty() || path.contains('\0') {
        return Some("an empty or invalid path".into());
    }
    let relative = Path::new(path);
    if relative.is_absolute() {
        return Some("an absolute path".into());
    }
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Some("a path that leaves the repository (`..`)".into());
    }
    match std::fs::metadata(root.join(relative)) {
        Err(_) => None,
        Ok(metadata) if !metadata.is_file() => Some("not a regular file".into()),
        Ok(_) => match weir_runtime::open_beneath(root, relative) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Some(format!("it leads out of the repository ({error})"))
            }
            _ => None,
        },
    }
}
