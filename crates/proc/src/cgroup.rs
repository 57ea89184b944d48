//! Control groups: one group per run, so that memory and processes are
//! counted, capped and killed for the whole run, not process by process.
//!
//! cgroup v2 is preferred. On a machine that still binds the memory or pids
//! controller to a cgroup v1 hierarchy (hybrid setups), that hierarchy is
//! used for it. Either way this process only ever creates groups below its
//! own cgroup: an *owner* group named by the caller, and a group per run in
//! it. A group is used only where this process may create it; where it may
//! not, [`Cgroups::memory`] and [`Cgroups::pids`] say why, so that the caller
//! can say which limits are only per process.

use std::fs::OpenOptions;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::process::Signal;

/// Which cgroup interface a hierarchy speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CgroupVersion {
    /// The unified hierarchy.
    V2,
    /// A legacy, per-controller hierarchy.
    V1,
}

impl std::fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CgroupVersion::V2 => "cgroup v2",
            CgroupVersion::V1 => "cgroup v1",
        })
    }
}

/// The controllers weir caps runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Controller {
    Memory,
    Pids,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Memory => "memory",
            Controller::Pids => "pids",
        }
    }
}

/// One hierarchy weir creates groups in, below its own cgroup.
#[derive(Clone, Debug)]
struct Tree {
    version: CgroupVersion,
    controllers: Vec<Controller>,
    /// This process's own cgroup in the hierarchy: owner groups go here.
    base: PathBuf,
}

/// Where runs' groups go, found at start: for each controller, the
/// hierarchy that gives it, or why none does.
#[derive(Debug)]
pub struct Cgroups {
    trees: Vec<Tree>,
    owner: String,
    memory: Result<CgroupVersion, String>,
    pids: Result<CgroupVersion, String>,
}

/// What a run's group caps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupLimits {
    /// Memory of all its processes together, their tmpfs files included.
    pub memory_bytes: u64,
    /// Processes (and threads) at once.
    pub pids: u64,
}

/// A run's group: one directory per hierarchy in use.
#[derive(Debug)]
pub struct Group {
    dirs: Vec<Dir>,
}

/// A group's directory in one hierarchy.
#[derive(Debug)]
struct Dir {
    version: CgroupVersion,
    /// The hierarchy caps memory (its statistics are read here).
    memory: bool,
    path: PathBuf,
}

impl Cgroups {
    /// Finds where this process may create groups with the memory and pids
    /// controllers, and creates the owner group `owner` there. Never fails:
    /// what cannot be used is reported by [`Cgroups::memory`] and
    /// [`Cgroups::pids`].
    pub fn find(owner: &str) -> Cgroups {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let mut trees = Vec::new();
        let v2 = v2_base(&mounts, &own).and_then(|base| {
            create_owner(&base, owner, CgroupVersion::V2)?;
            Ok(base)
        });
        let v2_reason = match v2 {
            Ok(base) => {
                trees.push(Tree {
                    version: CgroupVersion::V2,
                    controllers: vec![Controller::Memory, Controller::Pids],
                    base,
                });
                None
            }
            Err(why) => Some(why),
        };
        let mut found = |controller: Controller| -> Result<CgroupVersion, String> {
            if let Some(tree) = trees.iter().find(|t| t.controllers.contains(&controller)) {
                return Ok(tree.version);
            }
            let v1 = v1_base(&mounts, &own, controller).and_then(|base| {
                create_owner(&base, owner, CgroupVersion::V1)?;
                Ok(base)
            });
            match v1 {
                Ok(base) => {
                    trees.push(Tree {
                        version: CgroupVersion::V1,
                        controllers: vec![controller],
                        base,
                    });
                    Ok(CgroupVersion::V1)
                }
                Err(v1_reason) => Err(format!(
                    "{}; {v1_reason}",
                    v2_reason.as_deref().unwrap_or("cgroup v2 cannot be used")
                )),
            }
        };
        let memory = found(Controller::Memory);
        let pids = found(Controller::Pids);
        Cgroups {
            trees,
            owner: owner.to_owned(),
            memory,
            pids,
        }
    }

    /// No cgroups at all, and why: for when they were found but cannot be
    /// joined.
    pub fn none(why: &str) -> Cgroups {
        Cgroups {
            trees: Vec::new(),
            owner: String::new(),
            memory: Err(why.to_owned()),
            pids: Err(why.to_owned()),
        }
    }

    /// Which hierarchy caps the memory of a run, or why none can.
    pub fn memory(&self) -> Result<CgroupVersion, &str> {
        self.memory.as_ref().copied().map_err(String::as_str)
    }

    /// Which hierarchy caps the processes of a run, or why none can.
    pub fn pids(&self) -> Result<CgroupVersion, &str> {
        self.pids.as_ref().copied().map_err(String::as_str)
    }

    /// Whether any group would be created at all.
    pub fn in_use(&self) -> bool {
        !self.trees.is_empty()
    }

    /// Creates the group `name` in the owner group, with `limits` on the
    /// controllers in use.
    pub fn create(&self, name: &str, limits: GroupLimits) -> std::io::Result<Group> {
        let mut group = Group { dirs: Vec::new() };
        for tree in &self.trees {
            let dir = tree.base.join(&self.owner).join(name);
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
                Err(error) => {
                    let _ = group.remove();
                    return Err(error);
                }
            }
            group.dirs.push(Dir {
                version: tree.version,
                memory: tree.controllers.contains(&Controller::Memory),
                path: dir.clone(),
            });
            let written = tree
                .controllers
                .iter()
                .try_for_each(|controller| write_limit(&dir, tree.version, *controller, limits));
            if let Err(error) = written {
                let _ = group.remove();
                return Err(error);
            }
        }
        Ok(group)
    }

    /// The names of the owner groups that start with `prefix`, this one's
    /// excepted.
    pub fn owners(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .trees
            .iter()
            .filter_map(|tree| std::fs::read_dir(&tree.base).ok())
            .flatten()
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with(prefix) && *name != self.owner)
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Kills every process in owner group `owner` (another one's, whose
    /// owner is known to be gone) and removes it with its groups.
    pub fn remove_owner(&self, owner: &str) {
        for tree in &self.trees {
            let dir = tree.base.join(owner);
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    let group = Group {
                        dirs: vec![Dir {
                            version: tree.version,
                            memory: false,
                            path: entry.path(),
                        }],
                    };
                    group.kill();
                    let _ = group.remove();
                }
            }
            let _ = std::fs::remove_dir(&dir);
        }
    }
}

impl Group {
    /// Open `cgroup.procs` files of the group, for [`Handover::cgroups`](crate::Handover).
    pub fn join(&self) -> std::io::Result<Vec<OwnedFd>> {
        self.dirs
            .iter()
            .map(|dir| {
                // Opened close-on-exec, as std opens every file: no child
                // but the one it is handed to inherits it.
                OpenOptions::new()
                    .write(true)
                    .open(dir.path.join("cgroup.procs"))
                    .map(OwnedFd::from)
            })
            .collect()
    }

    /// SIGKILL to every process in the group.
    pub fn kill(&self) {
        for dir in &self.dirs {
            let path = &dir.path;
            if dir.version == CgroupVersion::V2
                && std::fs::write(path.join("cgroup.kill"), "1").is_ok()
            {
                continue;
            }
            // No `cgroup.kill` (cgroup v1, or a kernel before 5.14): kill
            // what is listed, again while new ones appear (forks between a
            // read and the kills); the pids cap bounds the rounds.
            for _ in 0..64 {
                let pids: Vec<i32> = procs(path)
                    .into_iter()
                    .filter(|pid| crate::tree::alive(*pid))
                    .collect();
                if pids.is_empty() {
                    break;
                }
                for pid in pids {
                    crate::signal(pid, Signal::KILL);
                }
            }
        }
    }

    /// Whether no living process is left in the group (a zombie, dead but
    /// not yet reaped, may still be listed: it runs nothing).
    pub fn is_empty(&self) -> bool {
        self.dirs
            .iter()
            .flat_map(|dir| procs(&dir.path))
            .all(|pid| !crate::tree::alive(pid))
    }

    /// How many times the kernel killed a process of the group because the
    /// group reached its memory cap; `None` when memory is not capped here.
    pub fn oom_kills(&self) -> Option<u64> {
        let dir = self.dirs.iter().find(|dir| dir.memory)?;
        let (file, key) = match dir.version {
            CgroupVersion::V2 => ("memory.events", "oom_kill"),
            CgroupVersion::V1 => ("memory.oom_control", "oom_kill"),
        };
        let text = std::fs::read_to_string(dir.path.join(file)).ok()?;
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.trim().parse().ok())
    }

    /// The most memory the group held at once; `None` when not known.
    pub fn peak_memory(&self) -> Option<u64> {
        let dir = self.dirs.iter().find(|dir| dir.memory)?;
        let file = match dir.version {
            CgroupVersion::V2 => "memory.peak",
            CgroupVersion::V1 => "memory.max_usage_in_bytes",
        };
        std::fs::read_to_string(dir.path.join(file))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Removes the group (it must be empty); a group already gone is not an
    /// error.
    pub fn remove(&self) -> std::io::Result<()> {
        let mut result = Ok(());
        for dir in &self.dirs {
            match std::fs::remove_dir(&dir.path) {
                Ok(()) => {}
                Err(error) if error.kind() == ErrorKind::NotFound => {}
                Err(error) => result = Err(error),
            }
        }
        result
    }
}

/// The processes listed in `dir`'s `cgroup.procs`.
fn procs(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().parse().ok())
        .collect()
}

fn write_limit(
    dir: &Path,
    version: CgroupVersion,
    controller: Controller,
    limits: GroupLimits,
) -> std::io::Result<()> {
    let write = |file: &str, value: u64| std::fs::write(dir.join(file), value.to_string());
    match (version, controller) {
        (_, Controller::Pids) => write("pids.max", limits.pids),
        (CgroupVersion::V2, Controller::Memory) => {
            write("memory.max", limits.memory_bytes)?;
            // Swap would let a run hold more than its cap; absent when the
            // kernel does not account swap.
            match write("memory.swap.max", 0) {
                Err(error) if error.kind() != ErrorKind::NotFound => Err(error),
                _ => Ok(()),
            }
        }
        (CgroupVersion::V1, Controller::Memory) => {
            write("memory.limit_in_bytes", limits.memory_bytes)?;
            // Memory and swap together, the same: no swap. Absent (or
            // refused) without swap accounting, which then needs no cap.
            let _ = write("memory.memsw.limit_in_bytes", limits.memory_bytes);
            Ok(())
        }
    }
}

/// Creates owner group `owner` in `base`, handing it the controllers for
/// its children in cgroup v2.
fn create_owner(base: &Path, owner: &str, version: CgroupVersion) -> Result<(), String> {
    let dir = base.join(owner);
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::AlreadyExists => {}
        Err(error) => {
            return Err(format!(
                "{version}: weir cannot create groups in its own cgroup {} ({error}): it is not delegated to weir's user, or mounted read-only",
                base.display()
            ));
        }
    }
    if version == CgroupVersion::V2
        && let Err(error) = std::fs::write(dir.join("cgroup.subtree_control"), "+memory +pids")
    {
        let _ = std::fs::remove_dir(&dir);
        return Err(format!(
            "{version}: could not enable the memory and pids controllers in {} ({error})",
            dir.display()
        ));
    }
    Ok(())
}

/// This process's cgroup v2 directory, when it offers the memory and pids
/// controllers and they are (or can be) enabled for its children.
fn v2_base(mounts: &str, own: &str) -> Result<PathBuf, String> {
    let path = own
        .lines()
        .find_map(|line| line.strip_prefix("0::"))
        .ok_or("cgroup v2: this process is in no cgroup v2 hierarchy")?;
    let mount = mounts
        .lines()
        .filter_map(Mount::parse)
        .find(|mount| mount.fstype == "cgroup2")
        .ok_or("cgroup v2 is not mounted")?;
    let base = mount.dir_of(path).ok_or_else(|| {
        format!("cgroup v2: weir's cgroup {path} is outside the mounted hierarchy")
    })?;
    let offered = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    let offered: Vec<&str> = offered.split_whitespace().collect();
    if !offered.contains(&"memory") || !offered.contains(&"pids") {
        return Err(format!(
            "cgroup v2 does not offer the memory and pids controllers to weir's cgroup {} (it offers: {}); on this machine they may be bound to cgroup v1",
            base.display(),
            if offered.is_empty() {
                "none".to_owned()
            } else {
                offered.join(" ")
            }
        ));
    }
    let enabled = std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
    let enabled: Vec<&str> = enabled.split_whitespace().collect();
    if enabled.contains(&"memory") && enabled.contains(&"pids") {
        return Ok(base);
    }
    match std::fs::write(base.join("cgroup.subtree_control"), "+memory +pids") {
        Ok(()) => Ok(base),
        Err(error) if error.raw_os_error() == Some(rustix::io::Errno::BUSY.raw_os_error()) => {
            Err(format!(
                "cgroup v2: weir's cgroup {} holds processes of its own, and cgroup v2 hands controllers only to the children of a cgroup without any; run weir in a cgroup of its own that is delegated to it (e.g. a systemd service with Delegate=yes whose main process sits in a child group), or as the only process of a container",
                base.display()
            ))
        }
        Err(error) => Err(format!(
            "cgroup v2: weir may not enable the memory and pids controllers in its cgroup {} ({error}): it is not delegated to weir's user, or mounted read-only",
            base.display()
        )),
    }
}

/// This process's cgroup v1 directory for `controller`.
fn v1_base(mounts: &str, own: &str, controller: Controller) -> Result<PathBuf, String> {
    let name = controller.name();
    let path = own
        .lines()
        .find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let _id = fields.next()?;
            let controllers = fields.next()?;
            let path = fields.next()?;
            controllers.split(',').any(|c| c == name).then_some(path)
        })
        .ok_or_else(|| format!("no cgroup v1 hierarchy has the {name} controller"))?;
    let mount = mounts
        .lines()
        .filter_map(Mount::parse)
        .find(|mount| mount.fstype == "cgroup" && mount.options.split(',').any(|o| o == name))
        .ok_or_else(|| format!("the cgroup v1 {name} hierarchy is not mounted"))?;
    mount.dir_of(path).ok_or_else(|| {
        format!("cgroup v1: weir's {name} cgroup {path} is outside the mounted hierarchy")
    })
}

/// One line of `/proc/self/mountinfo`, the fields used here.
struct Mount {
    /// The directory of the filesystem mounted here (not `/` for a bind
    /// mount of a subtree, or inside a cgroup namespace's view).
    root: String,
    point: PathBuf,
    fstype: String,
    options: String,
}

impl Mount {
    /// `id parent major:minor root point options [optional…] - fstype source super-options`.
    fn parse(line: &str) -> Option<Mount> {
        let (before, after) = line.split_once(" - ")?;
        let mut before = before.split(' ');
        let root = unescape(before.nth(3)?);
        let point = PathBuf::from(unescape(before.next()?));
        let mut after = after.split(' ');
        let fstype = after.next()?.to_owned();
        let options = after.nth(1).unwrap_or_default().to_owned();
        Some(Mount {
            root,
            point,
            fstype,
            options,
        })
    }

    /// Where cgroup `path` (as `/proc/self/cgroup` names it) is under this
    /// mount, if it is.
    fn dir_of(&self, path: &str) -> Option<PathBuf> {
        let root = self.root.trim_end_matches('/');
        let rest = path.strip_prefix(root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let rest = rest.trim_start_matches('/');
        Some(if rest.is_empty() {
            self.point.clone()
        } else {
            self.point.join(rest)
        })
    }
}

/// mountinfo writes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|digits| bytes[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        match octal {
            Some(digits) => {
                out.push(
                    digits
                        .iter()
                        .fold(0u8, |n, d| n.wrapping_mul(8) + (d - b'0')),
                );
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_are_read_with_their_escapes() {
        let line =
            "35 24 0:30 / /sys/fs/cgroup/memory rw,nosuid shared:16 - cgroup cgroup rw,memory";
        let mount = Mount::parse(line).unwrap();
        assert_eq!(mount.fstype, "cgroup");
        assert_eq!(mount.options, "rw,memory");
        assert_eq!(
            mount.dir_of("/a/b"),
            Some(PathBuf::from("/sys/fs/cgroup/memory/a/b"))
        );
        let nested =
            Mount::parse("1 2 0:3 /lxc/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw").unwrap();
        assert_eq!(
            nested.dir_of("/lxc/c1/x"),
            Some(PathBuf::from("/sys/fs/cgroup/x"))
        );
        assert_eq!(nested.dir_of("/lxc/c10"), None);
        assert_eq!(nested.dir_of("/other"), None);
        assert_eq!(unescape(r"/a\040b"), "/a b");
    }

    #[test]
    fn cgroups_are_found_or_refused_with_a_reason() {
        let owner = format!("weir-proc-test-{}", std::process::id());
        let found = Cgroups::find(&owner);
        for (controller, result) in [("memory", found.memory()), ("pids", found.pids())] {
            if let Err(why) = result {
                assert!(!why.is_empty(), "{controller}: a reason");
            }
        }
        if found.in_use() {
            let group = found
                .create(
                    "g",
                    GroupLimits {
                        memory_bytes: 64 << 20,
                        pids: 8,
                    },
                )
                .unwrap();
            assert!(group.is_empty());
            group.remove().unwrap();
        }
        found.remove_owner(&owner);
    }
}
