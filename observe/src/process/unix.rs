//! Process-group handling on Unix.
//!
//! Runners fork workers (pytest-xdist, vitest threads, `go test` per
//! package binaries, cargo's rustc jobs). Killing only the direct child
//! would leave those running and holding the machine, so the runner is the
//! leader of its own process group and the whole group is signalled.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
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

/// Kills what is left of the group led by `pid` once the leader has exited and been
/// reaped: a test's background process must not go on writing into the tree or
/// holding the machine after the run is observed. While any member lives the pgid
/// cannot be reused, so the signal reaches only that group; ESRCH (none left) is the
/// usual answer.
pub(super) fn kill_leftovers(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = killpg(Pid::from_raw(raw), Signal::SIGKILL);
    }
}

/// The file `execvp` would start for `program` when the child's `PATH` is `path`, for a
/// bare name on a `PATH` of absolute directories. The standard library forks this whole
/// process to look such a name up on a `PATH` it changed; naming the file lets it start
/// the child with `posix_spawn` instead. `None` leaves the lookup to the standard library
/// (a name with a slash, a relative or empty `PATH` entry before any match, no match).
pub(super) fn locate_program(program: &str, path: &str) -> Option<PathBuf> {
    if program.is_empty() || program.contains('/') {
        return None;
    }
    for dir in std::env::split_paths(path) {
        if !dir.is_absolute() {
            return None;
        }
        let file = dir.join(program);
        let runnable = std::fs::metadata(&file).is_ok_and(|m| m.is_file())
            && nix::unistd::access(&file, nix::unistd::AccessFlags::X_OK).is_ok();
        if runnable {
            return Some(file);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn a_bare_name_is_found_as_execvp_finds_it() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let (first, second) = (dir.path().join("a"), dir.path().join("b"));
        for d in [&first, &second] {
            std::fs::create_dir(d).expect("mkdir");
        }
        let tool = |d: &Path, mode: u32| {
            let file = d.join("tool");
            std::fs::write(&file, "#!/bin/sh\n").expect("write");
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).expect("chmod");
        };
        tool(&first, 0o644);
        tool(&second, 0o755);
        let path = format!("{}:{}", first.display(), second.display());
        assert_eq!(locate_program("tool", &path), Some(second.join("tool")));
        assert_eq!(locate_program("missing", &path), None);
        assert_eq!(locate_program("./tool", &path), None);
        let relative_first = format!("rel:{}", second.display());
        assert_eq!(locate_program("tool", &relative_first), None);
    }
}
