//! A repository's files worth describing: README, docs, manifests,
//! examples, and the files people look for but rarely need (license,
//! changelog), read as git sees the tree (`.gitignore`, `.ignore`, hidden
//! files left out), ranked, and capped in count and bytes. Blocking IO:
//! call it from a blocking task.
//!
//! Nothing outside the tree is read: the walk does not follow symlinks
//! (a symlinked file or directory is left out), and each file is opened
//! with [`open_beneath`], so a path swapped for a symlink after the walk
//! cannot lead out of the tree either.

use std::path::{Path, PathBuf};

use ignore::WalkBuilder;
use weir_runtime::open_beneath;

/// How much to take.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Most files kept.
    pub(crate) max_files: usize,
    /// Most bytes read of one file; the rest is cut (and said to be).
    pub(crate) max_file_bytes: usize,
    /// Most bytes read in all; files past it are left out.
    pub(crate) max_total_bytes: usize,
}

/// Most entries walked: a vast tree is sampled, not read whole.
const MAX_WALKED: usize = 200_000;

/// What a file is to a reader, in the order they are wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// The README at the root.
    Readme,
    /// Other documentation (markdown, reStructuredText, AsciiDoc).
    Doc,
    /// A package manifest (Cargo.toml, package.json, …).
    Manifest,
    /// A file under `examples/`.
    Example,
    /// License, changelog, contributing guide: the Optional section.
    Meta,
}

/// A file kept.
#[derive(Clone, Debug)]
pub(crate) struct File {
    /// Relative to the root, `/`-separated.
    pub(crate) path: String,
    pub(crate) kind: Kind,
    /// Its text, at most `max_file_bytes` of it (invalid UTF-8 replaced).
    pub(crate) text: String,
    /// Its size on disk.
    pub(crate) bytes: u64,
    /// Whether `text` is only the start of it.
    pub(crate) truncated: bool,
}

/// What [`gather`] found.
#[derive(Debug)]
pub(crate) struct Gathered {
    pub(crate) files: Vec<File>,
    /// Files of a kept kind that the limits left out.
    pub(crate) left_out: usize,
    /// Entries walked.
    pub(crate) walked: usize,
    /// Whether the walk stopped at [`MAX_WALKED`].
    pub(crate) walk_capped: bool,
}

/// Why a tree could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GatherError {
    #[error("{0} is not a directory: give the root of a repository")]
    NotADirectory(PathBuf),
    #[error("cannot read {path}: {source}")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
}

const MANIFESTS: &[&str] = &[
    "Cargo.toml",
    "package.json",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "Gemfile",
    "composer.json",
    "mix.exs",
    "Package.swift",
    "deno.json",
];

const META: &[&str] = &[
    "changelog",
    "changes",
    "history",
    "license",
    "licence",
    "copying",
    "contributing",
    "code_of_conduct",
    "security",
    "notice",
    "authors",
];

const DOC_EXTENSIONS: &[&str] = &["md", "mdx", "markdown", "rst", "adoc", "txt"];
const EXAMPLE_EXTENSIONS: &[&str] = &[
    "rs", "py", "js", "mjs", "ts", "go", "java", "rb", "c", "cc", "cpp", "h", "sh", "md", "toml",
    "json", "yaml", "yml", "kt", "swift", "ex", "exs", "php", "cs",
];

/// The kind of the file at `path` (relative, `/`-separated), or `None`
/// for files not worth a link.
pub(crate) fn classify(path: &str) -> Option<Kind> {
    let (dirs, name) = match path.rsplit_once('/') {
        Some((dirs, name)) => (Some(dirs), name),
        None => (None, path),
    };
    let lower = name.to_ascii_lowercase();
    let stem = lower.split('.').next().unwrap_or_default();
    let extension = lower.rsplit_once('.').map(|(_, ext)| ext);
    let depth = dirs.map_or(0, |dirs| dirs.split('/').count());
    let in_examples = dirs.is_some_and(|dirs| {
        dirs.split('/')
            .any(|dir| dir == "examples" || dir == "example")
    });
    // Test data describes nothing.
    if dirs.is_some_and(|dirs| {
        dirs.split('/').any(|dir| {
            matches!(
                dir,
                "testdata" | "fixtures" | "vendor" | "third_party" | "node_modules" | "target"
            )
        })
    }) {
        return None;
    }
    if depth == 0 && stem == "readme" {
        return Some(Kind::Readme);
    }
    if depth == 0 && META.contains(&stem) {
        return Some(Kind::Meta);
    }
    if MANIFESTS.contains(&name) && depth <= 3 && !in_examples {
        return Some(Kind::Manifest);
    }
    if in_examples && extension.is_some_and(|ext| EXAMPLE_EXTENSIONS.contains(&ext)) {
        return Some(Kind::Example);
    }
    let is_doc = match extension {
        // Plain text is documentation only in a docs folder.
        Some("txt") => {
            dirs.is_some_and(|dirs| dirs.split('/').any(|dir| dir == "docs" || dir == "doc"))
        }
        Some(ext) => DOC_EXTENSIONS.contains(&ext),
        None => false,
    };
    is_doc.then_some(Kind::Doc)
}

/// The rank of a file among those of its kind: shallow before deep, the
/// root's before a docs folder's before the rest, then by path.
fn rank(kind: Kind, path: &str) -> (Kind, usize, bool, String) {
    let depth = path.matches('/').count();
    let in_docs = path.starts_with("docs/") || path.starts_with("doc/");
    (kind, depth.min(2), !in_docs, path.to_owned())
}

/// The files of the tree at `root` worth describing, best first, within
/// `limits`.
pub(crate) fn gather(root: &Path, limits: Limits) -> Result<Gathered, GatherError> {
    if !root.is_dir() {
        return Err(GatherError::NotADirectory(root.to_owned()));
    }
    let mut candidates = Vec::new();
    let mut walked = 0;
    let mut walk_capped = false;
    let walk = WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        // `.git/info/exclude` may sit elsewhere (a `.git` file names its
        // directory): only the tree's own ignore files are read.
        .git_exclude(false)
        .git_global(false)
        // Ignore files above the tree (outside it, perhaps outside every
        // root) are not read.
        .parents(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(Some(12))
        .build();
    for entry in walk {
        walked += 1;
        if walked > MAX_WALKED {
            walk_capped = true;
            break;
        }
        // An unreadable entry (permissions, a vanished file) is skipped:
        // the rest of the tree still describes the project.
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(relative) = entry.path().strip_prefix(root) else {
            continue;
        };
        let Some(relative) = relative.to_str() else {
            continue;
        };
        let relative = relative.replace(std::path::MAIN_SEPARATOR, "/");
        if let Some(kind) = classify(&relative) {
            let bytes = entry.metadata().map_or(0, |meta| meta.len());
            candidates.push((rank(kind, &relative), kind, relative, bytes));
        }
    }
    candidates.sort();
    let mut files = Vec::new();
    let mut total = 0usize;
    let mut left_out = 0;
    for (_, kind, path, bytes) in candidates {
        if files.len() >= limits.max_files || total >= limits.max_total_bytes {
            left_out += 1;
            continue;
        }
        let budget = limits.max_file_bytes.min(limits.max_total_bytes - total);
        let read = match read_start(root, &path, budget) {
            Ok(read) => read,
            // Left the tree since the walk (a swapped symlink): skipped.
            Err(error) if error.kind() == std::io::ErrorKind::PermissionDenied => continue,
            Err(source) => {
                return Err(GatherError::Unreadable {
                    path: root.join(&path),
                    source,
                });
            }
        };
        let Some(data) = read else {
            // Binary: nothing to describe.
            continue;
        };
        total += data.len();
        let truncated = (data.len() as u64) < bytes;
        files.push(File {
            path,
            kind,
            text: String::from_utf8_lossy(&data).into_owned(),
            bytes,
            truncated,
        });
    }
    Ok(Gathered {
        files,
        left_out,
        walked: walked.min(MAX_WALKED),
        walk_capped,
    })
}

/// The first `budget` bytes of the file `relative` beneath `root`, cut
/// back to a character boundary; `None` when it looks binary (a NUL byte).
fn read_start(root: &Path, relative: &str, budget: usize) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read as _;
    let mut data = Vec::new();
    open_beneath(root, Path::new(relative))?
        .take(budget as u64)
        .read_to_end(&mut data)?;
    if data.contains(&0) {
        return Ok(None);
    }
    if let Err(error) = std::str::from_utf8(&data)
        && error.error_len().is_none()
    {
        // Cut inside a character: drop its first bytes.
        data.truncate(error.valid_up_to());
    }
    Ok(Some(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_classified_as_readers_want_them() {
        let cases = [
            ("README.md", Some(Kind::Readme)),
            ("readme", Some(Kind::Readme)),
            ("docs/README.md", Some(Kind::Doc)),
            ("ARCHITECTURE.md", Some(Kind::Doc)),
            ("docs/guide/intro.rst", Some(Kind::Doc)),
            ("docs/notes.txt", Some(Kind::Doc)),
            ("notes.txt", None),
            ("Cargo.toml", Some(Kind::Manifest)),
            ("crates/core/Cargo.toml", Some(Kind::Manifest)),
            ("a/b/c/d/Cargo.toml", None),
            ("examples/demo.rs", Some(Kind::Example)),
            ("crates/x/examples/run.py", Some(Kind::Example)),
            ("examples/image.png", None),
            ("LICENSE", Some(Kind::Meta)),
            ("LICENSE-MIT", None),
            ("CHANGELOG.md", Some(Kind::Meta)),
            ("src/lib.rs", None),
            ("tests/fixtures/README.md", None),
        ];
        for (path, kind) in cases {
            assert_eq!(classify(path), kind, "{path}");
        }
    }

    #[test]
    fn ranks_put_the_readme_first_and_shallow_docs_before_deep() {
        let mut paths = [
            ("LICENSE", Kind::Meta),
            ("src/deep/notes.md", Kind::Doc),
            ("docs/design.md", Kind::Doc),
            ("Cargo.toml", Kind::Manifest),
            ("ARCHITECTURE.md", Kind::Doc),
            ("README.md", Kind::Readme),
        ];
        paths.sort_by_key(|(path, kind)| rank(*kind, path));
        let order: Vec<&str> = paths.iter().map(|(path, _)| *path).collect();
        assert_eq!(
            order,
            [
                "README.md",
                "ARCHITECTURE.md",
                "docs/design.md",
                "src/deep/notes.md",
                "Cargo.toml",
                "LICENSE"
            ]
        );
    }
}
