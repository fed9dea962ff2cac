//! Reaping, and killing what is left of the leaf's tree once the leaf has ended.
//!
//! The supervisor is the subreaper of everything the leaf started, so every
//! descendant is either still below a living ancestor (found by parentage), or
//! re-parented to the supervisor, or still in the supervisor's session. After the
//! leaf is reaped, any of them still alive has leaked; each is killed and counted.

use std::collections::HashSet;
use std::time::Duration;
use std::time::Instant;

use nix::errno::Errno;
use nix::poll::PollFd;
use nix::poll::PollFlags;
use nix::poll::PollTimeout;
use nix::sys::signal::Signal;
use nix::sys::wait::WaitPidFlag;
use nix::sys::wait::WaitStatus;
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use super::procfs;
use super::signals;
use super::signals::Incoming;
use crate::records::ProcessId;

/// How long the supervisor keeps killing leftovers before it gives up and records
/// what it could not kill in `supervisor.log`.
const CLEANUP_BOUND: Duration = Duration::from_secs(10);

/// How the leaf ended, as `waitpid` reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LeafStatus {
    Code(i32),
    Signal(i32),
}

/// What one round of reaping found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reaped {
    /// The leaf's status, if the leaf was among the children reaped.
    pub leaf: Option<LeafStatus>,
    /// False once `waitpid` reported that no child is left at all.
    pub children_left: bool,
}

/// Reaps every child that has ended (the leaf and re-parented orphans alike).
pub(super) fn reap(leaf_pid: i32) -> Reaped {
    let mut reaped = Reaped {
        leaf: None,
        children_left: true,
    };
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid.as_raw() == leaf_pid => {
                reaped.leaf = Some(LeafStatus::Code(code));
            }
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid.as_raw() == leaf_pid => {
                reaped.leaf = Some(LeafStatus::Signal(signal as i32));
            }
            Ok(WaitStatus::StillAlive) => return reaped,
            Err(Errno::ECHILD) => {
                reaped.children_left = false;
                return reaped;
            }
            Err(Errno::EINTR) | Ok(_) => continue,
            Err(error) => {
                super::supervise::log(format_args!("waitpid failed: {error}"));
                return reaped;
            }
        }
    }
}

/// The live processes of our tree (excluding the supervisor), for the heartbeat.
pub(super) fn live_tree() -> Vec<ProcessId> {
    let me = std::process::id() as i32;
    // Session membership identifies our tree only if the session is ours. Should
    // `setsid` have failed, the session is the caller's, and matching it would kill
    // the caller; parentage alone is used then (-1 matches no session).
    let session = match nix::unistd::getsid(None) {
        Ok(sid) if sid.as_raw() == me => me,
        _ => -1,
    };
    match procfs::scan() {
        Ok(all) => procfs::tree(&all, me, session)
            .into_iter()
            .filter(|process| !process.is_zombie())
            .map(|process| process.id())
            .collect(),
        Err(error) => {
            super::supervise::log(format_args!("scanning /proc failed: {error}"));
            Vec::new()
        }
    }
}

/// Kills every process still alive in our tree, the leaf's group first, until none is
/// left. Returns how many distinct processes had to be killed.
pub(super) fn kill_leftovers(leaf_pid: i32, incoming: &Incoming) -> u32 {
    let deadline = Instant::now() + CLEANUP_BOUND;
    let mut killed: HashSet<ProcessId> = HashSet::new();
    loop {
        // As the subreaper, we are an ancestor of every live descendant: each has a
        // living chain of parents ending at one of our children. No child left means
        // no descendant left, and the /proc scan below can be skipped.
        let subreaper = nix::sys::prctl::get_child_subreaper().unwrap_or(false);
        if !reap(leaf_pid).children_left && subreaper {
            break;
        }
        let alive = live_tree();
        if alive.is_empty() {
            break;
        }
        // SIGKILL to the leaf's process group: the leaf has ended, so whatever is left
        // in its group is work nobody waits for. It must not go on writing into the
        // work tree that the engine is about to observe, so there is no SIGTERM and no
        // grace here; any grace was given to the group while the leaf was alive.
        let _ = signals::to_group(leaf_pid, Signal::SIGKILL);
        for process in &alive {
            killed.insert(*process);
            // SIGKILL to each remaining descendant by identity, for those that left the
            // leaf's group (setsid, setpgid, double fork). Same reason as above.
            signals::to_process(*process, Signal::SIGKILL);
        }
        if Instant::now() >= deadline {
            let left: Vec<i32> = alive.iter().map(|process| process.pid).collect();
            super::supervise::log(format_args!(
                "processes still alive after cleanup: {left:?}"
            ));
            break;
        }
        wait_for_child_event(incoming, Duration::from_millis(20));
    }
    u32::try_from(killed.len()).unwrap_or(u32::MAX)
}

/// Blocks until a signal arrives (SIGCHLD when a killed child dies) or `bound` passes.
fn wait_for_child_event(incoming: &Incoming, bound: Duration) {
    let timeout = PollTimeout::try_from(bound).unwrap_or(PollTimeout::NONE);
    let mut fds = [PollFd::new(
        std::os::fd::AsFd::as_fd(&incoming.wakeups),
        PollFlags::POLLIN,
    )];
    let _ = nix::poll::poll(&mut fds, timeout);
    super::wake::drain(&incoming.wakeups);
}
