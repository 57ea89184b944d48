//! The sandbox: bubblewrap, when it is installed and works here.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::{Value, json};

/// How runs are isolated, as found at start.
#[derive(Clone, Debug)]
pub(crate) enum Isolation {
    /// Inside bubblewrap: new user, PID, network, IPC and UTS namespaces;
    /// the root read-only; private `/tmp` and `/dev`; the run's directory
    /// the only writable place that outlives the run.
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
                "filesystem": "root read-only; private /tmp and /dev; the run's directory is the only writable place that outlives the run",
                "processes": "own PID namespace: every process of the run ends with it",
            }),
            Isolation::None { reason } => json!({
                "mode": "none",
                "reason": reason,
                "network": "the host's: NOT isolated",
                "filesystem": "the host's, with the run user's permissions: NOT isolated",
                "processes": "the run's process group (and, when weir runs as root, every process of the run's own uid) is killed when the run ends",
            }),
        }
    }
}

/// bubblewrap, found and understood.
#[derive(Clone, Debug)]
pub(crate) struct Bubblewrap {
    pub(crate) path: PathBuf,
    pub(crate) version: String,
    /// Supports `--disable-userns` (0.8+): no new user namespaces inside.
    disable_userns: bool,
    /// Supports `--size` for a tmpfs (0.5+).
    tmpfs_size: bool,
}

impl Bubblewrap {
    /// Finds `bwrap` in `path` and asks it what it supports. Whether it can
    /// actually create a sandbox here is for the caller to try.
    pub(crate) async fn find(path: Option<&std::ffi::OsStr>) -> Result<Bubblewrap, String> {
        let bwrap = path
            .into_iter()
            .flat_map(std::env::split_paths)
            .map(|dir| dir.join("bwrap"))
            .find(|candidate| candidate.is_file())
            .ok_or_else(|| {
                "bubblewrap (bwrap) is not installed; install it (e.g. `apt-get install bubblewrap`) to run code without network access and with a read-only filesystem".to_owned()
            })?;
        let output = |arg: &'static str| {
            let bwrap = bwrap.clone();
            async move {
                tokio::process::Command::new(&bwrap)
                    .arg(arg)
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
        })
    }

    /// bwrap's arguments to run a command in `dir` (which must exist), up
    /// to and including the `--` before the command.
    pub(crate) fn args(&self, dir: &Path, tmp_bytes: u64) -> Vec<OsString> {
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
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ]
        .map(OsString::from)
        .into();
        if self.disable_userns {
            args.push("--disable-userns".into());
        }
        if self.tmpfs_size {
            args.push("--size".into());
            args.push(tmp_bytes.to_string().into());
        }
        args.extend(["--tmpfs", "/tmp"].map(OsString::from));
        args.extend([
            "--bind".into(),
            dir.into(),
            dir.into(),
            "--chdir".into(),
            dir.into(),
            "--".into(),
        ]);
        args
    }
}
