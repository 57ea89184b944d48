//! Whether a work tree's tracked files differ from git's index, told from
//! `.git/index` here instead of by `git status` (which runs the
//! repository's fsmonitor, hooks and filter drivers; see [`crate::git`]).
//!
//! Like git: an entry whose stat data (modification time, size, inode,
//! mode) matches the file is unchanged, unless it is racily clean (the file
//! changed in the same second the index was written); the others are
//! hashed as git hashes a blob and compared with the entry's object id.
//! Unlike git, nothing is filtered first: a file an eol or LFS filter would
//! rewrite, whose stat data moved, counts as changed.
//!
//! Reads index versions 2, 3 and 4; a split index (`link` extension) is
//! not read (the caller says it cannot tell). Files are opened with
//! [`weir_runtime::open_beneath`], so an entry never leads a read out of
//! the work tree.

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path};

use sha2::{Digest, Sha256};

/// An index larger than this is not read (git's own are rarely 100 MB).
const MAX_INDEX_BYTES: u64 = 256 << 20;

/// One entry, as much of it as the comparison needs.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) path: String,
    pub(crate) mtime: (u32, u32),
    pub(crate) ino: u32,
    pub(crate) mode: u32,
    pub(crate) size: u32,
    pub(crate) oid: Vec<u8>,
    /// 0 when merged; 1 to 3 during a conflict.
    pub(crate) stage: u16,
    /// `skip-worktree`: not in the work tree by design (sparse checkout).
    pub(crate) skip_worktree: bool,
    /// `intent-to-add`: added with `git add -N`, no content yet.
    pub(crate) intent_to_add: bool,
}

/// Why an index was not read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum IndexFileError {
    #[error("git's index is not in a format weir reads ({0})")]
    Format(&'static str),
    #[error("git's index is split (core.splitIndex), which weir does not read")]
    Split,
}

/// Parses an index file; `oid_len` is 20 (SHA-1) or 32 (SHA-256).
pub(crate) fn parse(bytes: &[u8], oid_len: usize) -> Result<Vec<Entry>, IndexFileError> {
    let bad = IndexFileError::Format;
    let mut at = Cursor { bytes, at: 0 };
    if at.take(4).ok_or(bad("short"))? != b"DIRC" {
        return Err(bad("no DIRC signature"));
    }
    let version = at.u32().ok_or(bad("short"))?;
    if !(2..=4).contains(&version) {
        return Err(bad("unknown version"));
    }
    let count = at.u32().ok_or(bad("short"))? as usize;
    let mut entries = Vec::with_capacity(count.min(1 << 20));
    let mut previous = Vec::<u8>::new();
    for _ in 0..count {
        let start = at.at;
        let _ctime = (at.u32(), at.u32());
        let mtime = (at.u32().ok_or(bad("short"))?, at.u32().ok_or(bad("short"))?);
        let _dev = at.u32();
        let ino = at.u32().ok_or(bad("short"))?;
        let mode = at.u32().ok_or(bad("short"))?;
        let _uid_gid = (at.u32(), at.u32());
        let size = at.u32().ok_or(bad("short"))?;
        let oid = at.take(oid_len).ok_or(bad("short"))?.to_vec();
        let flags = at.u16().ok_or(bad("short"))?;
        let extended = if version >= 3 && flags & 0x4000 != 0 {
            at.u16().ok_or(bad("short"))?
        } else {
            0
        };
        let path = if version == 4 {
            // The previous path, less its last N bytes, then this suffix.
            let strip = at.varint().ok_or(bad("bad path prefix"))?;
            let keep = previous
                .len()
                .checked_sub(strip)
                .ok_or(bad("bad path prefix"))?;
            let suffix = at.until_nul().ok_or(bad("unterminated path"))?;
            previous.truncate(keep);
            previous.extend_from_slice(suffix);
            previous.clone()
        } else {
            let path = at.until_nul().ok_or(bad("unterminated path"))?.to_vec();
            // 1 to 8 NULs pad the entry to a multiple of 8 bytes.
            let len = at.at - start;
            let padded = (len + 7) & !7;
            at.at = start + padded.max(len);
            path
        };
        entries.push(Entry {
            path: String::from_utf8_lossy(&path).into_owned(),
            mtime,
            ino,
            mode,
            size,
            oid,
            stage: (flags >> 12) & 3,
            skip_worktree: extended & 0x4000 != 0,
            intent_to_add: extended & 0x2000 != 0,
        });
    }
    // Extensions: a four-byte name and a length each, then the checksum.
    let checksum = bytes.len().saturating_sub(oid_len);
    while at.at + 8 <= checksum {
        let name = at.take(4).ok_or(bad("short"))?;
        let len = at.u32().ok_or(bad("short"))? as usize;
        if name == b"link" {
            return Err(IndexFileError::Split);
        }
        at.take(len).ok_or(bad("short extension"))?;
    }
    Ok(entries)
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let slice = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(slice)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn until_nul(&mut self) -> Option<&'a [u8]> {
        let len = self.bytes.get(self.at..)?.iter().position(|&b| b == 0)?;
        let slice = self.take(len)?;
        self.at += 1;
        Some(slice)
    }

    /// git's offset varint (varint.c): 7 bits a byte, each continuation
    /// adding one before the shift.
    fn varint(&mut self) -> Option<usize> {
        let mut byte = *self.take(1)?.first()?;
        let mut value = usize::from(byte & 0x7f);
        while byte & 0x80 != 0 {
            byte = *self.take(1)?.first()?;
            value = value.checked_add(1)?.checked_mul(128)? | usize::from(byte & 0x7f);
        }
        Some(value)
    }
}

/// Whether any tracked file under `work_tree` differs from the index of
/// the git directory `git_dir`; `oid_len` as for [`parse`]. An error when
/// the index cannot be read.
pub(crate) fn work_tree_changed(
    work_tree: &Path,
    git_dir: &Path,
    oid_len: usize,
) -> Result<bool, String> {
    match std::fs::metadata(git_dir.join("index")) {
        // No index yet: nothing is tracked in the work tree (what HEAD
        // has is then staged as deleted, which `git diff-index` tells).
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        // A FIFO would make the open wait for a writer.
        Ok(metadata) if !metadata.is_file() => {
            return Err("git's index is not a regular file".into());
        }
        _ => {}
    }
    let file = match weir_runtime::open_beneath(git_dir, Path::new("index")) {
        Ok(file) => file,
        // No index yet: nothing is tracked in the work tree (what HEAD
        // has is then staged as deleted, which `git diff-index` tells).
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(error) => return Err(format!("cannot read git's index: {error}")),
    };
    let index_mtime = file
        .metadata()
        .map_err(|e| e.to_string())?
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default();
    let mut bytes = Vec::new();
    file.take(MAX_INDEX_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read git's index: {e}"))?;
    let entries = parse(&bytes, oid_len).map_err(|e| e.to_string())?;
    for entry in &entries {
        if entry.stage != 0 || entry.intent_to_add {
            return Ok(true); // a conflict, or a file added without content
        }
        if entry.skip_worktree
            || entry.mode & 0o170000 == 0o160000
            || entry.mode & 0o170000 == 0o040000
        {
            continue; // sparse, a submodule, a sparse directory
        }
        if entry_changed(work_tree, entry, index_mtime) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Whether one entry's file differs from it.
fn entry_changed(work_tree: &Path, entry: &Entry, index_mtime: std::time::Duration) -> bool {
    let relative = Path::new(&entry.path);
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return true; // git never writes such a path: do not follow it
    }
    let Ok(metadata) = std::fs::symlink_metadata(work_tree.join(relative)) else {
        return true; // deleted
    };
    let kind = entry.mode & 0o170000;
    let is_link = metadata.file_type().is_symlink();
    if (kind == 0o120000) != is_link || (!is_link && !metadata.is_file()) {
        return true; // a file became a link, a directory, …
    }
    if kind == 0o100000 {
        let executable = metadata.mode() & 0o111 != 0;
        if executable != (entry.mode & 0o111 != 0) {
            return true;
        }
    }
    // git keeps the low 32 bits of each number.
    let same_stat = metadata.mtime() as u32 == entry.mtime.0
        && metadata.mtime_nsec() as u32 == entry.mtime.1
        && metadata.size() as u32 == entry.size
        && metadata.ino() as u32 == entry.ino;
    let racy = u64::from(entry.mtime.0) >= index_mtime.as_secs();
    if same_stat && !racy {
        return false;
    }
    if metadata.size() as u32 != entry.size && entry.size != 0 {
        return true;
    }
    let content = if is_link {
        match std::fs::read_link(work_tree.join(relative)) {
            Ok(target) => target.into_os_string().into_encoded_bytes(),
            Err(_) => return true,
        }
    } else {
        let mut content = Vec::new();
        match weir_runtime::open_beneath(work_tree, relative)
            .and_then(|mut f| f.read_to_end(&mut content))
        {
            Ok(_) => content,
            Err(_) => return true,
        }
    };
    blob_id(&content, entry.oid.len()) != entry.oid
}

/// git's object id of a blob with `content`.
pub(crate) fn blob_id(content: &[u8], oid_len: usize) -> Vec<u8> {
    let header = format!("blob {}\0", content.len());
    if oid_len == 32 {
        let mut hasher = Sha256::new();
        hasher.update(header.as_bytes());
        hasher.update(content);
        hasher.finalize().to_vec()
    } else {
        let mut hasher = sha1_smol::Sha1::new();
        hasher.update(header.as_bytes());
        hasher.update(content);
        hasher.digest().bytes().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An index entry as git writes it (version 2 or 3), padded.
    fn entry_v2(path: &str, oid: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        for n in [1u32, 0, 2, 5, 0, 7, 0o100644, 0, 0, 3] {
            out.extend_from_slice(&n.to_be_bytes());
        }
        out.extend_from_slice(oid);
        out.extend_from_slice(&(path.len() as u16).to_be_bytes());
        out.extend_from_slice(path.as_bytes());
        let len = out.len() + 1;
        out.resize((len + 7) & !7, 0);
        out
    }

    #[test]
    fn versions_2_and_4_read_the_same_entries() {
        let oid = blob_id(b"abc", 20);
        assert_eq!(
            oid.iter().map(|b| format!("{b:02x}")).collect::<String>(),
            "f2ba8f84ab5c1bce84a7b441cb1959cfc7093b7f",
            "git hash-object of abc"
        );
        let mut v2 = b"DIRC".to_vec();
        v2.extend_from_slice(&2u32.to_be_bytes());
        v2.extend_from_slice(&2u32.to_be_bytes());
        v2.extend(entry_v2("src/a.rs", &oid));
        v2.extend(entry_v2("src/b.rs", &oid));
        v2.extend_from_slice(&[0; 20]);
        let entries = parse(&v2, 20).unwrap();
        assert_eq!(entries.len(), 2);
        assert_eq!(entries[1].path, "src/b.rs");
        assert_eq!(
            (entries[0].mtime, entries[0].size, entries[0].ino),
            ((2, 5), 3, 7)
        );

        // Version 4: the second path keeps all but one byte of the first.
        let mut v4 = b"DIRC".to_vec();
        v4.extend_from_slice(&4u32.to_be_bytes());
        v4.extend_from_slice(&2u32.to_be_bytes());
        for (strip, suffix) in [(0u8, "src/a.rs"), (4, "b.rs")] {
            for n in [1u32, 0, 2, 5, 0, 7, 0o100644, 0, 0, 3] {
                v4.extend_from_slice(&n.to_be_bytes());
            }
            v4.extend_from_slice(&oid);
            v4.extend_from_slice(&8u16.to_be_bytes());
            v4.push(strip);
            v4.extend_from_slice(suffix.as_bytes());
            v4.push(0);
        }
        v4.extend_from_slice(&[0; 20]);
        assert_eq!(parse(&v4, 20).unwrap(), entries);
    }

    #[test]
    fn broken_indexes_are_errors_not_panics() {
        assert!(parse(b"", 20).is_err());
        assert!(parse(b"DIRC\0\0\0\x02\0\0\0\x05", 20).is_err());
        let mut v4 = b"DIRC\0\0\0\x04\0\0\0\x01".to_vec();
        v4.extend_from_slice(&[0; 62]);
        v4.push(9); // strips more than there is
        assert!(parse(&v4, 20).is_err());
    }
}
