//! Process trees for callers other than the supervisor: whether a process descends
//! from a given one (the relay's check of who is asking), and ending every descendant
//! of this process (a `tdd` command that ran project code leaves nothing behind).

use std::collections::HashSet;
use std::time::Duration;
use std::time::Instant;

use nix::sys::signal::Signal;

use super::procfs;
use super::signals;
use crate::records::ProcessId;

/// How far up a chain of parents [`descends_from`] looks before it gives up.
const MAX_DEPTH: usize = 4096;

/// How long [`end_descendants`] keeps killing before it gives up.
const END_BOUND: Duration = Duration::from_secs(10);

/// Whether the live process `pid` is `ancestor` or one of its descendants, by the
/// chain of parents `/proc` shows now. `ancestor` is matched by pid and start time, so
/// a recycled pid never counts; a process that cannot be read does not descend.
pub fn descends_from(pid: i32, ancestor: ProcessId) -> bool {
    let mut current = pid;
    for _ in 0..MAX_DEPTH {
        let Ok(stat) = procfs::read_stat(current) else {
            return false;
        };
        if stat.is_zombie() && current == pid {
            return false;
        }
        if stat.pid == ancestor.pid {
            return stat.start_time == ancestor.start_time;
        }
        if stat.ppid <= 1 {
            return false;
        }
        current = stat.ppid;
    }
    false
}

/// Makes this process the child subreaper of what it starts: a descendant whose parent
/// dies (a double fork, a daemon that called `setsid`) is re-parented here rather than
/// to init, so [`end_descendants`] still finds it. Returns whether the kernel agreed.
pub fn become_subreaper() -> bool {
    nix::sys::prctl::set_child_subreaper(true).is_ok()
}

/// Kills (SIGKILL) every live descendant of this process, again and again until none
/// is left or ten seconds have passed, and returns how many distinct processes it
/// killed. Call it only when every child this process waits for has been reaped:
/// whatever is still alive then was left behind.
pub fn end_descendants() -> u32 {
    // A subreaper is an ancestor of every live descendant through a chain of living
    // parents that ends at one of its children: with no child at all, ended or alive,
    // nothing is below it, and `/proc` need not be read.
    if nix::sys::prctl::get_child_subreaper().unwrap_or(false) && no_child_at_all() {
        return 0;
    }
    let killed = kill_below(std::process::id() as i32);
    reap_killed(&killed);
    u32::try_from(killed.len()).unwrap_or(u32::MAX)
}

/// Kills the live process `root` and everything below it: its descendants first, while
/// `root` still holds them together (a subreaper `root` adopts those whose parent
/// died), then `root` itself. The caller reaps `root` if it is its child. Returns how
/// many processes were killed.
pub fn end_tree(root: ProcessId) -> u32 {
    if !procfs::is_alive(root) {
        return 0;
    }
    let mut killed = kill_below(root.pid);
    if procfs::is_alive(root) {
        signals::to_process(root, Signal::SIGKILL);
        killed.insert(root);
    }
    u32::try_from(killed.len()).unwrap_or(u32::MAX)
}

/// Whether this process has no child, alive or ended and not yet reaped; nothing is
/// reaped by asking (a `Child` someone else waits for keeps its status).
fn no_child_at_all() -> bool {
    use nix::sys::wait::Id;
    use nix::sys::wait::WaitPidFlag;
    let asked = WaitPidFlag::WEXITED
        | WaitPidFlag::WSTOPPED
        | WaitPidFlag::WCONTINUED
        | WaitPidFlag::WNOHANG
        | WaitPidFlag::WNOWAIT;
    matches!(
        nix::sys::wait::waitid(Id::All, asked),
        Err(nix::errno::Errno::ECHILD)
    )
}

/// SIGKILL to every live descendant of `root` by parentage, round after round until a
/// scan finds none or [`END_BOUND`] has passed.
fn kill_below(root: i32) -> HashSet<ProcessId> {
    let deadline = Instant::now() + END_BOUND;
    let mut killed: HashSet<ProcessId> = HashSet::new();
    loop {
        let alive: Vec<ProcessId> = match procfs::scan() {
            // -1 matches no session: parentage alone, never the caller's session.
            Ok(all) => procfs::tree(&all, root, -1)
                .into_iter()
                .filter(|p| !p.is_zombie())
                .map(|p| p.id())
                .collect(),
            Err(_) => Vec::new(),
        };
        if alive.is_empty() || Instant::now() >= deadline {
            break;
        }
        for process in alive {
            killed.insert(process);
            signals::to_process(process, Signal::SIGKILL);
        }
        // A killed process turns into a zombie within moments; the next scan skips it.
        std::thread::sleep(Duration::from_millis(2));
    }
    killed
}

/// Reaps those of `killed` that are children of this process, without waiting and
/// without touching any other child (a `Child` someone else waits for keeps its status).
fn reap_killed(killed: &HashSet<ProcessId>) {
    use nix::sys::wait::WaitPidFlag;
    let me = std::process::id() as i32;
    for process in killed {
        if procfs::read_stat(process.pid)
            .is_ok_and(|s| s.ppid == me && s.start_time == process.start_time)
        {
            let _ = nix::sys::wait::waitpid(
                nix::unistd::Pid::from_raw(process.pid),
                Some(WaitPidFlag::WNOHANG),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_alive_or_ended_counts_and_asking_does_not_reap_it() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        assert!(!no_child_at_all(), "a live child was not seen");
        child.kill().expect("kill");
        // Ended, not reaped: still a child until its status is taken.
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let ended = nix::sys::wait::waitid(
            nix::sys::wait::Id::Pid(pid),
            nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT,
        );
        assert!(ended.is_ok(), "{ended:?}");
        assert!(!no_child_at_all(), "an ended child was not seen");
        // Its status is still there for the one who waits for it.
        let status = child.wait().expect("the child's status was taken");
        assert!(!status.success());
    }

    #[test]
    fn a_child_descends_from_this_process_and_not_the_other_way() {
        let me = ProcessId::of(std::process::id() as i32).expect("self");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let pid = child.id() as i32;
        assert!(descends_from(pid, me));
        let theirs = ProcessId::of(pid).expect("child");
        assert!(!descends_from(me.pid, theirs));
        // The same pid with another start time is another process.
        let other = ProcessId {
            pid: me.pid,
            start_time: me.start_time + 1,
        };
        assert!(!descends_from(pid, other));
        let _ = child.kill();
        let _ = child.wait();
    }
}
