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

/// A file worth a link that is not linked, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LeftOut {
    pub(crate) path: String,
    pub(crate) why: String,
}

/// Most [`LeftOut`]s recorded one by one (a vendored tree can hold
/// thousands); the count goes on.
const MAX_LEFT_OUT_NAMED: usize = 500;

/// What [`gather`] found.
#[derive(Debug)]
pub(crate) struct Gathered {
    pub(crate) files: Vec<File>,
    /// Files a reader could have been pointed at but is not: generated,
    /// results, vendored, lock files, near-duplicates, past the limits.
    /// At most [`MAX_LEFT_OUT_NAMED`] of them; `left_out` counts all.
    pub(crate) left_out_files: Vec<LeftOut>,
    /// How many were left out in all.
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

/// Why the file at `path` is left out even when it is documentation or a
/// manifest: what a build, a benchmark or a package manager wrote, what
/// another project wrote (vendored), test data, a lock file. `None`: it
/// is the project's own.
pub(crate) fn generated(path: &str) -> Option<&'static str> {
    let (dirs, name) = match path.rsplit_once('/') {
        Some((dirs, name)) => (dirs, name),
        None => ("", path),
    };
    let lower = name.to_ascii_lowercase();
    if lower.ends_with(".lock")
        || matches!(
            lower.as_str(),
            "package-lock.json" | "npm-shrinkwrap.json" | "pnpm-lock.yaml" | "go.sum"
        )
    {
        return Some("lock file");
    }
    dirs.split('/').find_map(|dir| match dir {
        "results" | "generated" | "gen" | "dist" | "build" | "out" | "coverage" | "snapshots"
        | "__snapshots__" | "htmlcov" | "site-packages" => Some("generated or results"),
        "target" => Some("build output"),
        "node_modules" | "vendor" | "vendored" | "third_party" | "third-party" => Some("vendored"),
        "testdata" | "fixtures" | "__fixtures__" | "test-fixtures" => Some("test fixtures"),
        _ => None,
    })
}

/// Whether `path` lies in a folder of benchmarks, tests, fuzzing or
/// scripts: a manifest there describes tooling, not the project's
/// packages.
fn tooling(path: &str) -> bool {
    path.rsplit_once('/').is_some_and(|(dirs, _)| {
        dirs.split('/').any(|dir| {
            matches!(
                dir,
                "bench" | "benches" | "benchmarks" | "tests" | "test" | "fuzz" | "scripts" | "ci"
            )
        })
    })
}

/// The kind of the file at `path` (relative, `/`-separated), or `None`
/// for files not worth a link (including what [`generated`] names).
#[cfg(test)]
fn classify(path: &str) -> Option<Kind> {
    if generated(path).is_some() {
        return None;
    }
    kind_of(path)
}

/// The kind of the file at `path` by its name and place alone.
fn kind_of(path: &str) -> Option<Kind> {
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

/// Whether `path` is documentation of the project as a whole: at the
/// root, or in its docs folder.
pub(crate) fn top_level(path: &str) -> bool {
    !path.contains('/') || path.starts_with("docs/") || path.starts_with("doc/")
}

/// The rank of a file: what a reader needs first is kept first when the
/// limits cut — the README, the project's docs, its policies (security,
/// contributing, license), its root manifest — then examples, then the
/// docs and manifests of its parts; shallow before deep, then by path.
/// Files alike but for digits in their names come together, the last by
/// path (the newest, for dates) first.
fn rank(kind: Kind, path: &str) -> (u8, usize, String, std::cmp::Reverse<String>) {
    let tier = match kind {
        Kind::Readme => 0,
        Kind::Doc if top_level(path) => 1,
        Kind::Meta => 2,
        Kind::Manifest if !path.contains('/') => 3,
        Kind::Example => 4,
        Kind::Doc => 5,
        Kind::Manifest => 6,
    };
    (
        tier,
        path.matches('/').count(),
        shape(path),
        std::cmp::Reverse(path.to_owned()),
    )
}

/// How much of two files' starts, digits aside, must agree for the later
/// to stand for the earlier.
const ALIKE_BYTES: usize = 512;

/// `path` with each run of digits as `#`: files alike but for a date, a
/// number or a version share it (`results/20261126-131043.md`).
fn shape(path: &str) -> String {
    let mut shaped = String::with_capacity(path.len());
    for c in path.chars() {
        if !c.is_ascii_digit() {
            shaped.push(c);
        } else if !shaped.ends_with('#') {
            shaped.push('#');
        }
    }
    shaped
}

/// The files of the tree at `root` worth describing, best first, within
/// `limits`.
pub(crate) fn gather(root: &Path, limits: Limits) -> Result<Gathered, GatherError> {
    if !root.is_dir() {
        return Err(GatherError::NotADirectory(root.to_owned()));
    }
    let mut candidates = Vec::new();
    let mut left_out = LeftOuts::default();
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
        match (generated(&relative), kind_of(&relative)) {
            (None, Some(Kind::Manifest)) if tooling(&relative) => {
                left_out.push(relative, "a manifest of the project's tooling".to_owned());
            }
            (None, Some(kind)) => {
                let bytes = entry.metadata().map_or(0, |meta| meta.len());
                candidates.push((rank(kind, &relative), kind, relative, bytes));
            }
            // Named only when a reader might have looked for it there.
            (Some(why), kind) if kind.is_some() || why == "lock file" => {
                left_out.push(relative, why.to_owned());
            }
            _ => {}
        }
    }
    candidates.sort();
    let mut files: Vec<File> = Vec::new();
    let mut total = 0usize;
    for (_, kind, path, bytes) in candidates {
        if files.len() >= limits.max_files || total >= limits.max_total_bytes {
            left_out.push(
                path,
                format!(
                    "past the limits ({} files, {} KiB)",
                    limits.max_files,
                    limits.max_total_bytes / 1024
                ),
            );
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
        let text = String::from_utf8_lossy(&data).into_owned();
        // Alike but for digits in name and start (dated results, numbered
        // runs): the newest, read first, stands for the rest.
        let start = shape(&text[..text.floor_char_boundary(ALIKE_BYTES)]);
        if let Some(kept) = files.iter().find(|kept| {
            shape(&kept.path) == shape(&path)
                && shape(&kept.text[..kept.text.floor_char_boundary(ALIKE_BYTES)]) == start
        }) {
            left_out.push(path, format!("near-duplicate of {}", kept.path));
            continue;
        }
        total += data.len();
        let truncated = (data.len() as u64) < bytes;
        files.push(File {
            path,
            kind,
            text,
            bytes,
            truncated,
        });
    }
    // Read newest first among files alike; listed in path order.
    files.sort_by_cached_key(|file| {
        let (tier, depth, ..) = rank(file.kind, &file.path);
        (tier, depth, file.path.clone())
    });
    Ok(Gathered {
        files,
        left_out: left_out.count,
        left_out_files: left_out.named,
        walked: walked.min(MAX_WALKED),
        walk_capped,
    })
}

/// The files left out: the first [`MAX_LEFT_OUT_NAMED`] by name, all
/// counted.
#[derive(Default)]
struct LeftOuts {
    named: Vec<LeftOut>,
    count: usize,
}

impl LeftOuts {
    fn push(&mut self, path: String, why: String) {
        self.count += 1;
        if self.named.len() < MAX_LEFT_OUT_NAMED {
            self.named.push(LeftOut { path, why });
        }
    }
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
            ("bench/redis/results/20261126-131043.md", None),
            ("node_modules/left-pad/README.md", None),
            ("Cargo.lock", None),
        ];
        for (path, kind) in cases {
            assert_eq!(classify(path), kind, "{path}");
        }
        for (path, why) in [
            (
                "bench/redis/results/20261126-131043.md",
                Some("generated or results"),
            ),
            ("Cargo.lock", Some("lock file")),
            ("web/package-lock.json", Some("lock file")),
            ("node_modules/left-pad/README.md", Some("vendored")),
            ("crates/x/tests/fixtures/README.md", Some("test fixtures")),
            ("docs/guide.md", None),
        ] {
            assert_eq!(generated(path), why, "{path}");
        }
    }

    #[test]
    fn files_alike_but_for_digits_share_a_shape() {
        assert_eq!(
            shape("bench/results/20261126-131043.md"),
            "bench/results/#-#.md"
        );
        assert_eq!(
            shape("bench/results/20261126-131048.md"),
            "bench/results/#-#.md"
        );
        assert_ne!(shape("docs/v1.md"), shape("docs/guide.md"));
    }

    #[test]
    fn a_tree_keeps_what_matters_and_names_what_it_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, text) in [
            ("README.md", "# demo\n\nA demo.\n"),
            ("SECURITY.md", "# Security\n\nReport to x.\n"),
            ("Cargo.lock", "# lock\n"),
            ("bench/results/2026-01-01.md", "# r\n"),
            ("docs/run-1.md", "# run 1\n\nA run.\n"),
            ("docs/run-2.md", "# run 2\n\nA run.\n"),
            ("docs/run-3.md", "# run 3\n\nA run.\n"),
            ("docs/chapter1.md", "# Install\n"),
            ("docs/chapter2.md", "# Use\n"),
            ("a/b/notes.md", "# deep\n"),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let limits = Limits {
            max_files: 5,
            max_file_bytes: 1024,
            max_total_bytes: 1 << 20,
        };
        let gathered = gather(root, limits).unwrap();
        let kept: Vec<&str> = gathered.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            kept,
            [
                "README.md",
                "docs/chapter1.md",
                "docs/chapter2.md",
                "docs/run-3.md",
                "SECURITY.md"
            ]
        );
        let why = |path: &str| {
            gathered
                .left_out_files
                .iter()
                .find(|left| left.path == path)
                .map(|left| left.why.as_str())
        };
        assert_eq!(why("Cargo.lock"), Some("lock file"));
        assert_eq!(
            why("bench/results/2026-01-01.md"),
            Some("generated or results")
        );
        assert_eq!(
            why("docs/run-1.md"),
            Some("near-duplicate of docs/run-3.md")
        );
        assert!(why("a/b/notes.md").unwrap().starts_with("past the limits"));
        assert_eq!(gathered.left_out, gathered.left_out_files.len());
    }

    #[test]
    fn ranks_put_what_a_reader_needs_first() {
        let mut paths = [
            ("LICENSE", Kind::Meta),
            ("src/deep/notes.md", Kind::Doc),
            ("crates/x/Cargo.toml", Kind::Manifest),
            ("docs/design.md", Kind::Doc),
            ("Cargo.toml", Kind::Manifest),
            ("ARCHITECTURE.md", Kind::Doc),
            ("README.md", Kind::Readme),
            ("examples/a.rs", Kind::Example),
        ];
        paths.sort_by_key(|(path, kind)| rank(*kind, path));
        let order: Vec<&str> = paths.iter().map(|(path, _)| *path).collect();
        assert_eq!(
            order,
            [
                "README.md",
                "ARCHITECTURE.md",
                "docs/design.md",
                "LICENSE",
                "Cargo.toml",
                "examples/a.rs",
                "src/deep/notes.md",
                "crates/x/Cargo.toml"
            ]
        );
    }
}
