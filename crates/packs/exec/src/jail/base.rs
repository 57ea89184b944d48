//! Where a server keeps its runs' directories on the host, and how the next
//! server to start tells a dead server's leftovers from a live one's.
//!
//! The base is `<work dir>/weir-exec-<uid>`, shared by the servers of one
//! user. When runs execute as uids of their own, each of those uids must be
//! able to pass through every directory above its run's: a private
//! temporary directory (0700, what `mktemp -d` and service managers give)
//! would lock them out, so the base then goes under the first of the work
//! directory, `/var/tmp` and `/tmp` that lets them through, and the base
//! itself is 0711 (passable, not listable).
//!
//! Each server makes a directory of its own in the base and holds an
//! exclusive `flock` on it for as long as it lives; the kernel drops the
//! lock when the process dies, however it dies. At start a server takes
//! the lock of every other directory in the base it can: each one it gets
//! belonged to a server that is gone, and is removed with what it holds.
//! A directory still locked is a live server's and is left alone — also
//! across PID namespaces and containers sharing the directory, where a pid
//! would mean nothing. (`systemd-tmpfiles` also leaves `flock`ed
//! directories alone when it cleans temporary directories.)

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::JailError;
use super::cell::remove_tree;

/// The prefix of every server's own directory, and of its owner cgroup.
pub(super) const OWNER_PREFIX: &str = "weir-exec-";

/// This server's own directory in the base, locked while it lives.
#[derive(Debug)]
pub(crate) struct Base {
    root: PathBuf,
    own: PathBuf,
    name: String,
    /// Runs share weir's uid (so may have changed their files' modes).
    shared_uid: bool,
    /// Why the base is not under the work directory asked for, if it is not.
    moved: Option<String>,
    /// The lock, held for the life of the server.
    _lock: File,
}

impl Base {
    /// Makes (or opens) the base for `work_dir`, and in it this server's
    /// own directory, locked. `other_uids`: runs execute as uids of their
    /// own, which must be able to reach their directories.
    pub(crate) fn open(work_dir: &Path, other_uids: bool) -> Result<Base, JailError> {
        let uid = rustix::process::getuid().as_raw();
        let base_name = format!("weir-exec-{uid}");
        let mut refusals = Vec::new();
        let mut candidates = vec![work_dir.to_owned()];
        if other_uids {
            candidates.extend([PathBuf::from("/var/tmp"), PathBuf::from("/tmp")]);
        }
        let mut chosen = None;
        for candidate in &candidates {
            match passable(candidate, other_uids) {
                Ok(()) => {
                    chosen = Some(candidate.join(&base_name));
                    break;
                }
                Err(why) => refusals.push(why),
            }
        }
        let Some(root) = chosen else {
            return Err(JailError::Unreachable {
                message: refusals.join("; "),
            });
        };
        let moved = (!refusals.is_empty()).then(|| {
            format!(
                "run directories are under {}, not under {}: {}",
                root.display(),
                work_dir.display(),
                refusals.join("; ")
            )
        });
        let mode = if other_uids { 0o711 } else { 0o700 };
        make_dir(&root, uid, mode)?;
        let name = owner_name();
        // Made under a name sweeps skip, locked, then renamed into place:
        // no other server ever sees it unlocked.
        let fresh = root.join(format!(".new-{name}"));
        let own = root.join(&name);
        let prepare = |path: &Path| {
            let path = path.to_owned();
            move |source| JailError::Prepare { path, source }
        };
        std::fs::DirBuilder::new()
            .mode(mode)
            .create(&fresh)
            .map_err(prepare(&fresh))?;
        std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(mode))
            .map_err(prepare(&fresh))?;
        let lock = File::open(&fresh).map_err(prepare(&fresh))?;
        lock.lock().map_err(prepare(&fresh))?;
        std::fs::rename(&fresh, &own).map_err(prepare(&own))?;
        Ok(Base {
            root,
            own,
            name,
            shared_uid: !other_uids,
            moved,
            _lock: lock,
        })
    }

    /// This server's own directory: run directories go in it.
    pub(crate) fn dir(&self) -> &Path {
        &self.own
    }

    /// This server's name: its directory's, and its owner cgroup's.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The base, shared with the other servers of this user.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Why the base is not under the work directory asked for, if it is not.
    pub(crate) fn moved(&self) -> Option<&str> {
        self.moved.as_deref()
    }

    /// Removes what servers that are gone left in the base: each other
    /// directory whose lock can be taken. `also` is called with its name,
    /// lock held, before it is removed (for what else it owned). Returns
    /// how many were swept.
    pub(crate) fn sweep(&self, also: impl Fn(&str)) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return 0;
        };
        let mut swept = 0;
        for entry in entries.flatten() {
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let path = entry.path();
            if name == self.name
                || !name.starts_with(OWNER_PREFIX)
                || !entry.file_type().is_ok_and(|t| t.is_dir())
            {
                continue;
            }
            let Ok(lock) = File::open(&path) else {
                continue;
            };
            if lock.try_lock().is_err() {
                continue; // a live server's
            }
            also(&name);
            match remove_tree(&path, self.shared_uid) {
                Ok(()) => swept += 1,
                Err(error) => tracing::warn!(
                    dir = %path.display(), %error,
                    "could not remove what a server that is gone left; remove it by hand"
                ),
            }
        }
        swept
    }
}

impl Drop for Base {
    fn drop(&mut self) {
        // Its runs are over (they hold the pack, which holds this).
        let _ = remove_tree(&self.own, self.shared_uid);
    }
}

/// Bases opened by this process, so that each has a name of its own.
static OPENED: AtomicU64 = AtomicU64::new(0);

/// A name for this server: `weir-exec-<PID namespace>-<pid>-<start time>-<n>`,
/// which tells, from the same PID namespace, whether the server is still
/// alive (see [`gone`]).
fn owner_name() -> String {
    let pid = std::process::id() as i32;
    format!(
        "{OWNER_PREFIX}{}-{pid}-{}-{}",
        pid_namespace().unwrap_or(0),
        weir_proc::start_time(pid).unwrap_or(0),
        OPENED.fetch_add(1, Ordering::Relaxed)
    )
}

/// This process's PID namespace (its inode number).
fn pid_namespace() -> Option<u64> {
    std::fs::metadata("/proc/self/ns/pid")
        .ok()
        .map(|meta| meta.ino())
}

/// Whether the server that named itself `name` is certainly gone: it named
/// a process of this PID namespace, and no such process lives (its pid is
/// free, or taken by a later process). A server of another namespace, or a
/// name not of this form, is never taken for gone: only its lock, in its
/// base, can tell.
pub(super) fn gone(name: &str) -> bool {
    let mut fields = name
        .strip_prefix(OWNER_PREFIX)
        .unwrap_or_default()
        .split('-')
        .map(|field| field.parse::<u64>().ok());
    let (Some(Some(namespace)), Some(Some(pid)), Some(Some(start))) =
        (fields.next(), fields.next(), fields.next())
    else {
        return false;
    };
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    pid_namespace() == Some(namespace) && weir_proc::start_time(pid) != Some(start)
}

/// Makes `dir` (or checks the one there) as this uid's alone: a directory,
/// not a link, owned by `uid`, writable by nobody else, with `mode`. In a
/// temporary directory anyone may have made it first.
fn make_dir(dir: &Path, uid: u32, mode: u32) -> Result<(), JailError> {
    let prepare = |source| JailError::Prepare {
        path: dir.to_owned(),
        source,
    };
    match std::fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(error) => return Err(prepare(error)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(prepare)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o022 != 0 {
        return Err(JailError::Unusable {
            path: dir.to_owned(),
            message: format!(
                "it must be a directory owned by uid {uid} and writable only by it; remove it, or give weir another temporary directory (TMPDIR)"
            ),
        });
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).map_err(prepare)
}

/// Whether other users (the run uids, which have no groups) may pass
/// through `dir` and each directory above it; when `other_uids` is false,
/// only that it is a directory.
fn passable(dir: &Path, other_uids: bool) -> Result<(), String> {
    let real = std::fs::canonicalize(dir)
        .map_err(|error| format!("{} cannot be used: {error}", dir.display()))?;
    if !real.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    if !other_uids {
        return Ok(());
    }
    for ancestor in real.ancestors() {
        let mode = std::fs::metadata(ancestor)
            .map_err(|error| format!("{} cannot be read: {error}", ancestor.display()))?
            .mode();
        if mode & 0o001 == 0 {
            return Err(format!(
                "{} (mode {:o}) does not let the run uids through",
                ancestor.display(),
                mode & 0o7777
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_servers_directory_is_swept_and_a_live_ones_kept() {
        let work = std::env::temp_dir().join(format!("weir-base-test-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let live = Base::open(&work, false).unwrap();
        std::fs::write(live.dir().join("file"), "x").unwrap();
        // A server that died: its directory, unlocked.
        let dead = live.root().join(format!("{OWNER_PREFIX}0-1-dead"));
        std::fs::create_dir_all(dead.join("run")).unwrap();
        let other = Base::open(&work, false).unwrap();
        let seen = std::sync::Mutex::new(Vec::new());
        assert_eq!(
            other.sweep(|name| seen.lock().unwrap().push(name.to_owned())),
            1
        );
        assert_eq!(*seen.lock().unwrap(), [format!("{OWNER_PREFIX}0-1-dead")]);
        assert!(!dead.exists());
        assert!(live.dir().join("file").exists(), "a live server's is kept");
        drop(live);
        drop(other);
        std::fs::remove_dir_all(&work).unwrap();
    }

    #[test]
    fn a_server_is_gone_only_when_its_process_certainly_is() {
        let own = owner_name();
        assert!(!gone(&own), "{own}");
        let namespace = pid_namespace().unwrap();
        let start = weir_proc::start_time(std::process::id() as i32).unwrap();
        let pid = std::process::id();
        // A later process with this pid, or no process at all.
        assert!(gone(&format!(
            "{OWNER_PREFIX}{namespace}-{pid}-{}-0",
            start + 1
        )));
        assert!(gone(&format!("{OWNER_PREFIX}{namespace}-{}-1-0", i32::MAX)));
        // Another namespace, or a name of another form: not for this to say.
        assert!(!gone(&format!(
            "{OWNER_PREFIX}{}-{}-1-0",
            namespace + 1,
            i32::MAX
        )));
        assert!(!gone(&format!("{OWNER_PREFIX}0-1-dead")));
        assert!(!gone("something-else"));
    }

    #[test]
    fn a_private_directory_is_passed_over_for_run_uids() {
        let private =
            std::env::temp_dir().join(format!("weir-base-private-{}", std::process::id()));
        std::fs::create_dir_all(&private).unwrap();
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
        let why = passable(&private, true).unwrap_err();
        assert!(why.contains("mode 700"), "{why}");
        assert!(passable(&private, false).is_ok());
        std::fs::remove_dir_all(&private).unwrap();
    }
}
