//! The directories an operator lets callers name: `weir serve --root DIR`
//! (repeatable; `WEIR_ROOTS`), by default the directory `weir serve`
//! started in.
//!
//! Every path a caller sends (a repository to index, an llms.txt source, an
//! agent's working directory) is resolved with [`Roots::resolve`]: made
//! absolute, every symlink followed (`realpath`), then refused unless it
//! lies inside one of the roots. Files read later, inside a resolved
//! directory, are opened with [`open_beneath`], which refuses a symlink (or
//! `..`) that leads out of it, so a tree changed after the check cannot
//! lead a read outside either.
//!
//! ```
//! use weir_runtime::{Roots, RootsError};
//! let scratch = tempfile::tempdir().unwrap();
//! let dir = scratch.path();
//! std::fs::create_dir(dir.join("repo")).unwrap();
//! let roots = Roots::new([dir]).unwrap();
//! assert!(roots.resolve("repo").unwrap().ends_with("repo"));
//! assert!(matches!(roots.resolve("/etc"), Err(RootsError::Outside { .. })));
//! assert!(matches!(roots.resolve("repo/../.."), Err(RootsError::Outside { .. })));
//! ```

use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use weir_core::{FailureCode, RunError};

/// The directories callers may name, each canonical (absolute, no symlink
/// in it). Never empty.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots {
    dirs: Arc<[PathBuf]>,
}

/// Why a path was refused.
#[derive(Debug, thiserror::Error)]
pub enum RootsError {
    /// No path at all.
    #[error("the path is empty")]
    Empty,
    /// The path does not exist (or cannot be resolved).
    #[error("cannot open {path:?}: {error}")]
    NotFound {
        /// The path as named.
        path: String,
        /// What the system said.
        error: io::Error,
    },
    /// The path resolves outside every root.
    #[error(
        "{} is outside the directories this server lets callers name ({roots}); the operator adds one with `weir serve --root DIR`",
        path.display()
    )]
    Outside {
        /// The path, resolved.
        path: PathBuf,
        /// The roots, for the message.
        roots: String,
    },
    /// A root given by the operator does not exist or is not a directory.
    #[error("the root {path:?} cannot be used: {error}")]
    BadRoot {
        /// The root as given.
        path: PathBuf,
        /// What the system said.
        error: io::Error,
    },
    /// The operator gave no root.
    #[error("no root directory given")]
    NoRoots,
}

impl From<RootsError> for RunError {
    fn from(error: RootsError) -> RunError {
        let remediation = match &error {
            RootsError::Outside { .. } => {
                "name a directory inside one of the roots the message lists"
            }
            _ => "pass the path of an existing directory inside one of the server's roots",
        };
        RunError::new(FailureCode::InvalidArguments, error.to_string())
            .with_remediation(remediation)
    }
}

impl Roots {
    /// The roots `dirs`, each resolved; an error when one is missing, is
    /// not a directory, or none is given.
    pub fn new<P: AsRef<Path>>(dirs: impl IntoIterator<Item = P>) -> Result<Roots, RootsError> {
        let mut resolved: Vec<PathBuf> = Vec::new();
        for dir in dirs {
            let dir = dir.as_ref();
            let canonical = std::fs::canonicalize(dir).map_err(|error| RootsError::BadRoot {
                path: dir.to_owned(),
                error,
            })?;
            if !canonical.is_dir() {
                return Err(RootsError::BadRoot {
                    path: dir.to_owned(),
                    error: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
                });
            }
            if !resolved.contains(&canonical) {
                resolved.push(canonical);
            }
        }
        if resolved.is_empty() {
            return Err(RootsError::NoRoots);
        }
        Ok(Roots {
            dirs: resolved.into(),
        })
    }

    /// The roots, canonical, in the order given.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// `named` (absolute, or relative to the first root), resolved through
    /// every symlink and checked to be inside a root.
    pub fn resolve(&self, named: &str) -> Result<PathBuf, RootsError> {
        if named.trim().is_empty() {
            return Err(RootsError::Empty);
        }
        let joined = self.dirs[0].join(named);
        let canonical = std::fs::canonicalize(&joined).map_err(|error| RootsError::NotFound {
            path: named.to_owned(),
            error,
        })?;
        if self.contains(&canonical) {
            Ok(canonical)
        } else {
            Err(RootsError::Outside {
                path: canonical,
                roots: self.describe(),
            })
        }
    }

    /// Whether the canonical path `path` is a root or lies inside one.
    pub fn contains(&self, path: &Path) -> bool {
        self.root_of(path).is_some()
    }

    /// The root that the canonical path `path` lies in.
    pub fn root_of(&self, path: &Path) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|root| path.starts_with(root))
            .map(PathBuf::as_path)
    }

    /// The roots, for messages: `/a, /b`.
    pub fn describe(&self) -> String {
        self.dirs
            .iter()
            .map(|dir| dir.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `named`, a call's argument `field`, [resolved](Roots::resolve): a
    /// path that does not exist, or lies outside the roots, is refused as
    /// invalid arguments naming the field and what would be accepted.
    pub fn resolve_argument(&self, field: &str, named: &str) -> Result<PathBuf, RunError> {
        self.resolve(named).map_err(|error| match error {
            RootsError::NotFound { .. } | RootsError::Empty => crate::kit::invalid(format!(
                "{field} {named} does not exist on the server (a path inside {}: absolute, or relative to {})",
                self.describe(),
                self.dirs[0].display()
            )),
            other => {
                let mut error = RunError::from(other);
                error.message = format!("{field}: {}", error.message);
                error
            }
        })
    }
}

/// Paths no program a tool starts may work in or above (weir's data
/// directory, its tokens file): a program reads what is under its working
/// directory without asking.
#[derive(Clone, Debug, Default)]
pub struct PrivatePaths(Vec<PathBuf>);

impl PrivatePaths {
    /// `paths`, each resolved as working directories are (through every
    /// symlink, where it exists), so that a symlink in either does not
    /// hide one inside the other.
    pub fn new(paths: &[PathBuf]) -> PrivatePaths {
        let resolve = |path: &PathBuf| {
            std::fs::canonicalize(path)
                .unwrap_or_else(|_| std::path::absolute(path).unwrap_or_else(|_| path.clone()))
        };
        PrivatePaths(paths.iter().map(resolve).collect())
    }

    /// Refuses `dir` (a resolved working directory, named in messages by
    /// `what`) when it is, lies inside, or holds one of the paths.
    pub fn check(&self, what: &str, dir: &Path) -> Result<(), RunError> {
        let Some(private) = self
            .0
            .iter()
            .find(|private| dir.starts_with(private) || private.starts_with(dir))
        else {
            return Ok(());
        };
        Err(RunError::new(
            FailureCode::InvalidArguments,
            format!(
                "{what}: an agent working in {} could read {}, which holds this server's own data or credentials",
                dir.display(),
                private.display()
            ),
        )
        .with_remediation(
            "name a directory that neither holds nor lies inside it (the operator can keep weir's data directory and tokens file outside the --root directories)",
        ))
    }
}

/// Opens `relative` (a path inside `dir`, which should be canonical) for
/// reading, refusing any path that would leave `dir`: an absolute path, a
/// `..` above it, or a symlink anywhere on the way that points out of it.
/// On Linux the kernel checks each step (`openat2` with
/// `RESOLVE_BENEATH`), so a symlink swapped in after an earlier check is
/// refused too; elsewhere the resolved path is checked after opening.
pub fn open_beneath(dir: &Path, relative: &Path) -> io::Result<File> {
    if relative.is_absolute()
        || relative
            .components()
            .any(|part| matches!(part, Component::ParentDir))
    {
        return Err(outside(dir, relative));
    }
    open_beneath_os(dir, relative)
}

fn outside(dir: &Path, relative: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("{} leads outside {}", relative.display(), dir.display()),
    )
}

#[cfg(target_os = "linux")]
fn open_beneath_os(dir: &Path, relative: &Path) -> io::Result<File> {
    use rustix::fs::{Mode, OFlags, ResolveFlags, open, openat2};
    let base = open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    match openat2(
        &base,
        relative,
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => Ok(File::from(fd)),
        // EXDEV: the kernel refused a step out of `dir`.
        Err(rustix::io::Errno::XDEV) => Err(outside(dir, relative)),
        // A kernel older than 5.6: check the resolved path instead.
        Err(rustix::io::Errno::NOSYS) => open_checked(dir, relative),
        Err(errno) => Err(errno.into()),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_beneath_os(dir: &Path, relative: &Path) -> io::Result<File> {
    open_checked(dir, relative)
}

/// The portable fallback: resolve, check, open (a swap between the check
/// and the open is not caught).
fn open_checked(dir: &Path, relative: &Path) -> io::Result<File> {
    let resolved = std::fs::canonicalize(dir.join(relative))?;
    let base = std::fs::canonicalize(dir)?;
    if !resolved.starts_with(&base) {
        return Err(outside(dir, relative));
    }
    File::open(resolved)
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::fs::symlink;

    use super::*;

    /// A scratch directory, removed when the first half is dropped, and
    /// its canonical path.
    fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::Builder::new()
            .prefix(&format!("weir-roots-{name}-"))
            .tempdir()
            .unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        (dir, path)
    }

    #[test]
    fn a_symlink_out_of_a_root_is_outside() {
        let (_scratch, dir) = scratch("symlink");
        let (_outside, outside_dir) = scratch("symlink-target");
        std::fs::create_dir(dir.join("root")).unwrap();
        symlink(&outside_dir, dir.join("root/link")).unwrap();
        let roots = Roots::new([dir.join("root")]).unwrap();
        let error = roots.resolve("link").unwrap_err();
        assert!(matches!(error, RootsError::Outside { .. }), "{error}");
        assert!(error.to_string().contains("--root"), "{error}");
    }

    #[test]
    fn relative_paths_start_at_the_first_root_and_absolute_ones_are_checked() {
        let (_scratch, dir) = scratch("relative");
        std::fs::create_dir_all(dir.join("a/sub")).unwrap();
        std::fs::create_dir_all(dir.join("b")).unwrap();
        let roots = Roots::new([dir.join("a"), dir.join("b")]).unwrap();
        assert_eq!(roots.resolve("sub").unwrap(), dir.join("a/sub"));
        assert_eq!(
            roots.resolve(dir.join("b").to_str().unwrap()).unwrap(),
            dir.join("b")
        );
        assert!(matches!(
            roots.resolve(dir.to_str().unwrap()),
            Err(RootsError::Outside { .. })
        ));
        assert!(matches!(roots.resolve(""), Err(RootsError::Empty)));
        assert!(matches!(
            roots.resolve("missing"),
            Err(RootsError::NotFound { .. })
        ));
        // A root that is a prefix of another name is not that name's root.
        std::fs::create_dir_all(dir.join("ab")).unwrap();
        assert!(!roots.contains(&dir.join("ab")));
    }

    #[test]
    fn no_root_or_a_missing_one_is_an_error() {
        assert!(matches!(
            Roots::new(Vec::<PathBuf>::new()),
            Err(RootsError::NoRoots)
        ));
        assert!(matches!(
            Roots::new(["/nonexistent/weir-root"]),
            Err(RootsError::BadRoot { .. })
        ));
    }

    #[test]
    fn open_beneath_refuses_every_way_out() {
        let (_scratch, dir) = scratch("beneath");
        let (_secret, secret) = scratch("beneath-secret");
        std::fs::write(secret.join("token"), "admin-token").unwrap();
        std::fs::write(dir.join("ok.txt"), "inside").unwrap();
        std::fs::create_dir(dir.join("sub")).unwrap();
        symlink(secret.join("token"), dir.join("file-link")).unwrap();
        symlink(&secret, dir.join("sub/dir-link")).unwrap();
        symlink("ok.txt", dir.join("inner-link")).unwrap();

        let mut text = String::new();
        open_beneath(&dir, Path::new("ok.txt"))
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        assert_eq!(text, "inside");
        // A symlink that stays inside is followed.
        assert!(open_beneath(&dir, Path::new("inner-link")).is_ok());
        for way_out in ["file-link", "sub/dir-link/token", "../x", "/etc/passwd"] {
            let error = open_beneath(&dir, Path::new(way_out)).unwrap_err();
            assert_eq!(
                error.kind(),
                io::ErrorKind::PermissionDenied,
                "{way_out}: {error}"
            );
        }
    }
}
