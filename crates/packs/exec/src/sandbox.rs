//! The sandbox: bubblewrap, when it is installed and works here.
//!
//! **What a run sees.** Not the host's root: an empty root (read-only once
//! built) holding only the system directories programs need, read-only
//! ([`SYSTEM_PATHS`], the ones this machine has; a symlink such as
//! `/bin -> usr/bin` stays a symlink), a `/proc` and a `/dev` of its own, and
//! three tmpfs of its own with a size each: `/tmp`, `/dev/shm` and the
//! working directory [`SANDBOX_WORKDIR`], which bubblewrap fills with the
//! run's files. So the data directory and its store, weir's configuration,
//! home directories, the host's temporary directories and every other run's
//! directory are simply not there. An allow-list rather than the host's `/`
//! with holes in it: what is not listed cannot leak, whoever the run's user
//! is — and when weir is not root, runs share its uid, so permissions alone
//! would show them everything weir can read. Paths the operator names as
//! hidden (the data directory, say) are masked too when they lie inside a
//! listed directory.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};

/// The system directories a sandboxed run sees, read-only, when this
/// machine has them: programs, libraries, their configuration.
pub(crate) const SYSTEM_PATHS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix",
];

/// Where a sandboxed run's working directory is, inside the sandbox.
pub(crate) const SANDBOX_WORKDIR: &str = "/work";

/// How runs are isolated, as found at start.
#[derive(Clone, Debug)]
pub(crate) enum Isolation {
    /// Inside bubblewrap: new user, PID, network, IPC and UTS namespaces;
    /// only system directories, read-only; private `/tmp`, `/dev/shm`,
    /// `/dev` and working directory, sized.
    Bubblewrap(Bubblewrap),
    /// No sandbox: limits only, and why.
    None {
        /// Why there is no sandbox, and what to do about it.
        reason: String,
    },
}

impl Isolation {
    /// `"bubblewrap"` or `"none"`: what `meta` and results say.
    pub(crate) fn mode(&self) -> &'static str {
        match self {
            Isolation::Bubblewrap(_) => "bubblewrap",
            Isolation::None { .. } => "none",
        }
    }

    /// What it does and does not protect, for `meta` and `list_languages`.
    pub(crate) fn describe(&self) -> Value {
        match self {
            Isolation::Bubblewrap(bwrap) => json!({
                "mode": "bubblewrap",
                "version": bwrap.version,
                "network": "none (a new network namespace with only loopback)",
                "filesystem": format!(
                    "only system directories, read-only ({}); no data directory, home directories, host temporary directories or other runs; private /tmp, /dev/shm and /dev; the working directory {SANDBOX_WORKDIR} is the run's own tmpfs, gone with it",
                    bwrap.shown().join(", ")
                ),
                "environment": "the caller's env reaches only the program, inside the sandbox; bubblewrap itself runs with an empty environment",
                "processes": "own PID namespace: every process of the run ends with it",
            }),
            Isolation::None { reason } => json!({
                "mode": "none",
                "reason": reason,
                "network": "the host's: NOT isolated",
                "filesystem": "the host's, with the run user's permissions: NOT isolated",
                "environment": "the caller's env reaches the interpreter, which is the program",
                "processes": "the run's process group (and, when weir runs as root, every process of the run's own uid) is killed when the run ends",
            }),
        }
    }
}

/// What the sandbox shows of the host: each entry one bubblewrap setup
/// operation, in order.
#[derive(Clone, Debug)]
enum Shown {
    /// A directory, read-only.
    Directory(PathBuf),
    /// A symlink, recreated: `/bin -> usr/bin`.
    Symlink { path: PathBuf, target: PathBuf },
    /// A hidden directory inside a shown one: an empty, read-only tmpfs.
    MaskedDirectory(PathBuf),
    /// A hidden file inside a shown directory: `/dev/null` in its place.
    MaskedFile(PathBuf),
}

/// bubblewrap, found and understood.
#[derive(Clone, Debug)]
pub(crate) struct Bubblewrap {
    pub(crate) path: PathBuf,
    pub(crate) version: String,
    /// Supports `--disable-userns` (0.8+): no new user namespaces inside.
    disable_userns: bool,
    /// Supports `--size` for a tmpfs (0.5+); without it, the sandbox's
    /// tmpfs have no size cap, and the limits say so.
    pub(crate) tmpfs_size: bool,
    view: Vec<Shown>,
}

impl Bubblewrap {
    /// Finds `bwrap` in `path` and asks it what it supports; `hidden` are
    /// paths the sandbox must not show, even inside a system directory.
    /// Whether it can actually create a sandbox here is for the caller to
    /// try.
    pub(crate) async fn find(
        path: Option<&std::ffi::OsStr>,
        hidden: &[PathBuf],
    ) -> Result<Bubblewrap, String> {
        let bwrap = path
            .into_iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("bwrap"))
            .find(|candidate| candidate.is_file())
            .ok_or_else(|| {
                "bubblewrap (bwrap) is not installed; install it (e.g. `apt-get install bubblewrap`) to run code without network access and with only system directories in view".to_owned()
            })?;
        let output = |arg: &'static str| {
            let bwrap = bwrap.clone();
            async move {
                tokio::process::Command::new(&bwrap)
                    .arg(arg)
                    .env_clear()
                    .stdin(Stdio::null())
                    .kill_on_drop(true)
                    .output()
                    .await
                    .map(|output| String::from_utf8_lossy(&output.stdout).into_owned())
                    .map_err(|error| format!("{} could not be run: {error}", bwrap.display()))
            }
        };
        let version = output("--version").await?;
        let help = output("--help").await?;
        Ok(Bubblewrap {
            version: version
                .trim()
                .trim_start_matches("bubblewrap")
                .trim()
                .to_owned(),
            disable_userns: help.contains("--disable-userns"),
            tmpfs_size: help.contains("--size"),
            path: bwrap,
            view: view(hidden),
        })
    }

    /// The system directories shown, for people.
    fn shown(&self) -> Vec<String> {
        self.view
            .iter()
            .filter_map(|shown| match shown {
                Shown::Directory(path) => Some(path.display().to_string()),
                _ => None,
            })
            .collect()
    }

    /// bwrap's arguments up to the run's files: namespaces, the view of
    /// the host, private `/proc`, `/dev`, `/tmp` and `/dev/shm` (each tmpfs
    /// `tmp_bytes`), and the working directory (`workdir_bytes`). The files
    /// go in next (`--file`), then [`Bubblewrap::finish`].
    pub(crate) fn args(&self, workdir_bytes: u64, tmp_bytes: u64) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "--unshare-all",
            // `--unshare-all` only tries a user namespace (and skips it as
            // root); ask for one: `--disable-userns` needs it.
            "--unshare-user",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--hostname",
            "weir-sandbox",
        ]
        .map(OsString::from)
        .into();
        if self.disable_userns {
            args.push("--disable-userns".into());
        }
        for shown in &self.view {
            match shown {
                Shown::Directory(path) => {
                    args.extend(["--ro-bind".into(), path.into(), path.into()]);
                }
                Shown::Symlink { path, target } => {
                    args.extend(["--symlink".into(), target.into(), path.into()]);
                }
                Shown::MaskedDirectory(path) => {
                    args.extend([
                        "--tmpfs".into(),
                        path.into(),
                        "--remount-ro".into(),
                        path.into(),
                    ]);
                }
                Shown::MaskedFile(path) => {
                    args.extend(["--ro-bind".into(), "/dev/null".into(), path.into()]);
                }
            }
        }
        args.extend(["--dev", "/dev", "--proc", "/proc"].map(OsString::from));
        for (bytes, dir) in [
            (tmp_bytes, "/tmp"),
            (tmp_bytes, "/dev/shm"),
            (workdir_bytes, SANDBOX_WORKDIR),
        ] {
            if self.tmpfs_size {
                args.extend(["--size".into(), bytes.to_string().into()]);
            }
            args.extend(["--tmpfs", dir].map(OsString::from));
        }
        args
    }

    /// The arguments after the run's files, up to and including the `--`
    /// before the command: the root made read-only (the tmpfs mounted on it
    /// stay writable), the working directory.
    pub(crate) fn finish(&self) -> Vec<OsString> {
        ["--remount-ro", "/", "--chdir", SANDBOX_WORKDIR, "--"]
            .map(OsString::from)
            .into()
    }
}

/// The host as the sandbox shows it: [`SYSTEM_PATHS`] that exist here, then
/// masks over the `hidden` paths that lie inside them.
fn view(hidden: &[PathBuf]) -> Vec<Shown> {
    let mut view = Vec::new();
    let mut roots = Vec::new();
    for path in SYSTEM_PATHS.iter().map(PathBuf::from) {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_symlink() {
            if let Ok(target) = std::fs::read_link(&path) {
                view.push(Shown::Symlink { path, target });
            }
        } else if meta.is_dir() {
            roots.push(std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone()));
            view.push(Shown::Directory(path));
        }
    }
    for path in hidden {
        // As the kernel will resolve it inside: through symlinks.
        let Ok(real) = std::fs::canonicalize(path) else {
            continue; // not there: nothing to hide
        };
        if !roots.iter().any(|root| real.starts_with(root)) {
            continue; // outside every shown directory: not there either
        }
        view.push(if real.is_dir() {
            Shown::MaskedDirectory(real)
        } else {
            Shown::MaskedFile(real)
        });
    }
    view
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_view_lists_system_directories_and_masks_hidden_paths_inside_them() {
        let hidden = [
            PathBuf::from("/etc"),
            PathBuf::from("/usr/bin/env"),
            std::env::temp_dir(),
            PathBuf::from("/nonexistent/weir"),
        ];
        let view = view(&hidden);
        let has = |wanted: &dyn Fn(&Shown) -> bool| view.iter().any(wanted);
        assert!(has(
            &|s| matches!(s, Shown::Directory(p) if p == Path::new("/usr"))
        ));
        assert!(has(
            &|s| matches!(s, Shown::MaskedDirectory(p) if p == Path::new("/etc"))
        ));
        let env = std::fs::canonicalize("/usr/bin/env").unwrap();
        assert!(has(&|s| matches!(s, Shown::MaskedFile(p) if *p == env)));
        // Outside the shown directories: not there, so nothing to mask.
        assert!(!has(
            &|s| matches!(s, Shown::MaskedDirectory(p) if p.starts_with("/tmp"))
        ));
        assert!(!has(
            &|s| matches!(s, Shown::MaskedDirectory(p) | Shown::MaskedFile(p) if p.starts_with("/nonexistent"))
        ));
        for shown in &view {
            if let Shown::Directory(path) = shown {
                assert!(SYSTEM_PATHS.contains(&path.to_str().unwrap()));
            }
        }
    }
}
