//! Cleaning up after a lost supervisor, from whichever process noticed the loss.
//!
//! When the supervisor vanishes (SIGKILL, OOM killer), its leaf goes on running,
//! re-parented to init. A reader that finds the supervisor gone (by pid and start
//! time) kills what is left of the tree, using only identities it can trust:
//!
//! - the processes recorded by pid and start time (the leaf, and every descendant in
//!   the last heartbeat);
//! - members of the supervisor's session and of the leaf's process group. The kernel
//!   never hands out a pid while a process group or session still uses it as its id,
//!   so these numbers still mean our session and group unless a process *now holds
//!   that pid* with another start time; in that case the number was recycled after
//!   our session and group had died out, and it is not used.

use std::collections::HashSet;
use std::time::Duration;

use nix::sys::signal::Signal;

use super::procfs;
use super::procfs::ProcStat;
use super::signals;
use crate::records::Heartbeat;
use crate::records::LaunchRecord;
use crate::records::ProcessId;

/// Rounds of scan-and-kill before giving up on processes that refuse to die.
const ROUNDS: usize = 50;

/// Kills every process of a lost supervisor's tree. Returns how many were killed.
pub(crate) fn kill_lost_tree(launch: &LaunchRecord, heartbeat: Option<&Heartbeat>) -> u32 {
    let mut killed: HashSet<ProcessId> = HashSet::new();
    for _ in 0..ROUNDS {
        let Ok(all) = procfs::scan() else { break };
        let targets = targets(&all, launch, heartbeat);
        if targets.is_empty() {
            break;
        }
        for target in targets {
            // SIGKILL to each process left by a lost supervisor. Nobody supervises it
            // any more, nobody will read its output, and it may be writing into the
            // work tree: there is no one to give a grace period on behalf of.
            if signals::to_process(target, Signal::SIGKILL) {
                killed.insert(target);
            }
        }
        // These are not our children, so no SIGCHLD tells us when they are gone; a
        // short pause before the next scan bounds the loop instead.
        std::thread::sleep(Duration::from_millis(10));
    }
    u32::try_from(killed.len()).unwrap_or(u32::MAX)
}

/// The live processes that belong to the lost tree.
fn targets(
    all: &[ProcStat],
    launch: &LaunchRecord,
    heartbeat: Option<&Heartbeat>,
) -> Vec<ProcessId> {
    let me = std::process::id() as i32;
    let mut recorded: HashSet<ProcessId> = HashSet::from([launch.leaf]);
    if let Some(heartbeat) = heartbeat {
        recorded.extend(heartbeat.descendants.iter().copied());
    }
    let session = launch.supervisor.pid;
    let session_trusted = number_trusted(all, launch.supervisor);
    let group_trusted = number_trusted(all, launch.leaf) && launch.pgid == launch.leaf.pid;
    all.iter()
        .filter(|process| !process.is_zombie() && process.pid != me)
        .filter(|process| {
            recorded.contains(&process.id())
                || (session_trusted
                    && process.session == session
                    && process.start_time >= launch.supervisor.start_time)
                || (group_trusted
                    && process.pgrp == launch.pgid
                    && process.start_time >= launch.leaf.start_time)
        })
        .map(ProcStat::id)
        .collect()
}

/// True when the number `original.pid`, used as a session or group id, still refers
/// to `original`'s session or group: nobody holds the pid, or `original` still does.
fn number_trusted(all: &[ProcStat], original: ProcessId) -> bool {
    match all.iter().find(|process| process.pid == original.pid) {
        None => true,
        Some(holder) => holder.start_time == original.start_time,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pid: i32, pgrp: i32, session: i32, start_time: u64) -> ProcStat {
        ProcStat {
            pid,
            state: b'S',
            ppid: 1,
            pgrp,
            session,
            start_time,
        }
    }

    fn launch() -> LaunchRecord {
        LaunchRecord {
            version: 1,
            id: "leaf".into(),
            leaf: ProcessId {
                pid: 200,
                start_time: 50,
            },
            pgid: 200,
            supervisor: ProcessId {
                pid: 100,
                start_time: 40,
            },
            launched_at: String::new(),
            sandbox: None,
        }
    }

    #[test]
    fn members_of_our_session_and_group_are_targets() {
        let all = [
            stat(200, 200, 100, 50),
            stat(201, 200, 100, 60),
            stat(300, 300, 300, 70),
        ];
        let mut pids: Vec<i32> = targets(&all, &launch(), None)
            .iter()
            .map(|p| p.pid)
            .collect();
        pids.sort_unstable();
        assert_eq!(pids, vec![200, 201]);
    }

    #[test]
    fn recycled_numbers_are_not_trusted() {
        // Pid 100 (the supervisor's) and pid 200 (the leaf's) now belong to a process
        // that started later and leads its own session and group with those numbers.
        let all = [stat(100, 100, 100, 900), stat(200, 200, 100, 901)];
        assert!(targets(&all, &launch(), None).is_empty());
    }

    #[test]
    fn heartbeat_descendants_are_targets_by_identity() {
        let heartbeat = Heartbeat {
            version: 1,
            at: String::new(),
            seq: 1,
            stdout_bytes: 0,
            stderr_bytes: 0,
            last_output_at: None,
            descendants: vec![ProcessId {
                pid: 400,
                start_time: 80,
            }],
        };
        // 400 escaped both session and group (setsid) but is in the heartbeat; 401 is
        // unrelated; pid 100 was recycled, so the session number is not trusted.
        let all = [
            stat(400, 400, 400, 80),
            stat(401, 401, 401, 81),
            stat(100, 100, 100, 900),
        ];
        let found = targets(&all, &launch(), Some(&heartbeat));
        assert_eq!(
            found,
            vec![ProcessId {
                pid: 400,
                start_time: 80
            }]
        );
    }
}
