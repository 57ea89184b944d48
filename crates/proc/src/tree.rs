//! Processes as `/proc` lists them: trees, groups, the processes of a uid.

/// One process, from `/proc/<pid>/stat`.
#[derive(Clone, Copy, Debug)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    /// Dead, waiting to be reaped by its parent (or by init, which
    /// inherited it): it runs nothing and holds nothing but its pid.
    zombie: bool,
}

fn all_processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // `pid (comm) state ppid pgrp …`; comm may hold spaces and parentheses.
            let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
            let state = fields.next()?;
            let ppid = fields.next()?.parse().ok()?;
            let pgrp = fields.next()?.parse().ok()?;
            Some(Proc {
                pid,
                ppid,
                pgrp,
                zombie: state == "Z" || state == "X",
            })
        })
        .collect()
}

/// Whether `pid` exists and is not a zombie.
pub(crate) fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rfind(')')
            .and_then(|end| stat[end + 1..].split_whitespace().next());
        !matches!(state, None | Some("Z" | "X"))
    })
}

/// When `pid` started, in clock ticks after boot: with its pid, what tells
/// a process from a later one that was given the same pid.
pub fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22; fields 3 onwards follow the command's closing parenthesis.
    stat[stat.rfind(')')? + 1..]
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()
}

/// The processes below `root`, with their depth (children are 1).
pub fn descendants(root: i32) -> Vec<(i32, usize)> {
    let all = all_processes();
    let mut found = Vec::new();
    let mut frontier = vec![root];
    let mut depth = 0;
    while !frontier.is_empty() && depth < 64 {
        depth += 1;
        let next: Vec<i32> = all
            .iter()
            .filter(|p| frontier.contains(&p.ppid))
            .map(|p| p.pid)
            .collect();
        found.extend(next.iter().map(|&pid| (pid, depth)));
        frontier = next;
    }
    found
}

/// The real uid of `pid`, from `/proc/<pid>/status`.
fn real_uid(pid: i32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The living (not zombie) processes whose real uid is `uid`.
pub fn pids_of(uid: u32) -> Vec<i32> {
    all_processes()
        .into_iter()
        .filter(|p| !p.zombie && real_uid(p.pid) == Some(uid))
        .map(|p| p.pid)
        .collect()
}

/// Whether process group `pgid` has a living (not zombie) member.
pub fn group_alive(pgid: i32) -> bool {
    all_processes().iter().any(|p| p.pgrp == pgid && !p.zombie)
}

/// How many tasks (threads included: that is what `RLIMIT_NPROC` counts)
/// `uid` has now.
pub fn tasks_of(uid: u32) -> u64 {
    all_processes()
        .into_iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{}/status", p.pid)).ok())
        .filter(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(1))
                == Some(uid.to_string().as_str())
        })
        .filter_map(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Threads:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Signal, signal};

    #[test]
    fn descendants_are_found_with_their_depth() {
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let root = child.id() as i32;
        let mut found = Vec::new();
        for _ in 0..100 {
            found = descendants(root);
            if !found.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].1, 1);
        signal(found[0].0, Signal::KILL);
        child.wait().unwrap();
    }

    #[test]
    fn a_process_has_a_start_time_and_a_missing_one_none() {
        let own = start_time(std::process::id() as i32).unwrap();
        assert!(own > 0);
        assert_eq!(start_time(std::process::id() as i32), Some(own));
        assert_eq!(start_time(i32::MAX), None);
    }

    #[test]
    fn this_process_counts_as_a_task_of_its_uid() {
        let uid = rustix::process::getuid().as_raw();
        assert!(tasks_of(uid) >= 1);
        assert!(pids_of(uid).contains(&(std::process::id() as i32)));
    }
}
