//! Process-group handling on Unix.
//!
//! Runners fork workers (pytest-xdist, vitest threads, `go test` per
//! package binaries, cargo's rustc jobs). Killing only the direct child
//! would leave those running and holding the machine, so the runner is the
//! leader of its own process group and the whole group is signalled.

use std::os::unix::process::CommandExt;
use std::process::Command;
use std::process::ExitStatus;
use std::sync::mpsc::Receiver;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::signal::killpg;
use nix::unistd::Pid;

/// Time a runner gets after SIGTERM to flush reports and stop its workers.
const GRACE: Duration = Duration::from_secs(2);

/// Makes the child the leader of a new process group (pgid = its pid).
pub(super) fn own_process_group(command: &mut Command) {
    command.process_group(0);
}

/// Terminates the group led by `pid`: SIGTERM, a short grace, then SIGKILL.
///
/// SIGTERM first because runners handle it (pytest and jest print partial
/// results, cargo stops rustc cleanly). SIGKILL follows unconditionally:
/// members that ignore SIGTERM or outlive the leader must not survive the
/// observation. Once the leader is reaped its pgid cannot be reused while
/// any member lives, so the final SIGKILL cannot hit an unrelated group.
pub(super) fn kill_group(pid: u32, waiter: &Receiver<std::io::Result<ExitStatus>>) {
    let Ok(raw) = i32::try_from(pid) else {
        return;
    };
    let group = Pid::from_raw(raw);
    // ESRCH (already gone) is the only expected error and needs no action.
    let _ = killpg(group, Signal::SIGTERM);
    if waiter.recv_timeout(GRACE).is_err() {
        let _ = killpg(group, Signal::SIGKILL);
        // The leader is now dead; wait for the waiter thread to reap it.
        let _ = waiter.recv();
    } else {
        let _ = killpg(group, Signal::SIGKILL);
    }
}
