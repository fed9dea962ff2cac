//! Running one git process to the end, and stopping it when it waits on a named pipe.
//!
//! git opens the index, its config files, `HEAD`, and every `.gitignore` and
//! `.gitattributes` it meets with a plain `open`. A named pipe (FIFO) at any of those
//! paths makes that `open` wait for a writer that never comes, and the git process
//! (and the `tdd` command waiting on it) would wait forever. Anyone who can write in the
//! work tree or `.git` can put one there, so every git process the engine starts is
//! watched: one that sits waiting to open a FIFO is killed, and the call fails with
//! [`GitError::Stalled`](super::GitError::Stalled) instead of hanging.

use std::io::Read;
use std::io::Write;
use std::process::Command;
use std::process::Output;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::sys::wait::Id;
use nix::sys::wait::WaitPidFlag;
use nix::unistd::Pid;

/// How often the watch looks at the process.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// How many looks in a row must find the process waiting on a FIFO before it is
/// stopped: a writer that exists connects at once, so a second of waiting means none
/// will.
const LOOKS_BEFORE_STOP: u32 = 4;

/// How long a terminated git process has to clean up before it is killed.
const GRACE: Duration = Duration::from_secs(5);

/// What one git process did: its output, and whether it was stopped while waiting to
/// open a named pipe.
pub(super) struct Finished {
    pub(super) output: Output,
    pub(super) stalled: bool,
}

/// Runs `cmd` with `input` on its stdin (or none), collecting stdout and stderr, until
/// it exits or is stopped for waiting on a FIFO. The process is always reaped.
pub(super) fn run(mut cmd: Command, input: Option<&[u8]>) -> std::io::Result<Finished> {
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (done, watching) = mpsc::channel::<()>();
    let (stalled, out, err, exited) = std::thread::scope(|scope| {
        if let (Some(bytes), Some(mut pipe)) = (input, stdin) {
            // A write error means git stopped reading; its exit status tells why.
            scope.spawn(move || pipe.write_all(bytes));
        }
        let out = scope.spawn(move || drain(stdout));
        let err = scope.spawn(move || drain(stderr));
        let watch = scope.spawn(move || watch(pid, &watching));
        // The process is waited for but not reaped, so its pid cannot be reused while
        // the watch may still signal it.
        let exited = exited_unreaped(pid);
        drop(done);
        let stalled = watch.join().unwrap_or(false);
        (stalled, out.join(), err.join(), exited)
    });
    exited?;
    let status = child.wait()?;
    let broken = || std::io::Error::other("a pipe reader panicked");
    Ok(Finished {
        output: Output {
            status,
            stdout: out.map_err(|_| broken())??,
            stderr: err.map_err(|_| broken())??,
        },
        stalled,
    })
}

/// A watch on a git process whose output the caller streams itself: the process is
/// stopped when it waits to open a FIFO, as [`run`] stops its own.
pub(crate) struct Watch {
    done: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<bool>>,
}

impl Watch {
    /// Starts watching `child`, which the caller must not reap before [`Watch::end`]
    /// (or dropping the watch): until then its pid names no other process.
    pub(crate) fn start(child: &std::process::Child) -> Watch {
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let (done, watching) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || watch(pid, &watching));
        Watch {
            done: Some(done),
            thread: Some(thread),
        }
    }

    /// Ends the watch; true when it stopped the process for waiting on a FIFO.
    pub(crate) fn end(mut self) -> bool {
        self.stop()
    }

    fn stop(&mut self) -> bool {
        drop(self.done.take());
        self.thread
            .take()
            .is_some_and(|thread| thread.join().unwrap_or(false))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop();
    }
}

fn drain(pipe: Option<impl Read>) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        pipe.read_to_end(&mut bytes)?;
    }
    Ok(bytes)
}

/// Blocks until the process `pid` has exited, leaving it to be reaped.
fn exited_unreaped(pid: Pid) -> std::io::Result<()> {
    loop {
        match nix::sys::wait::waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Looks at `pid` until `done` says it exited; stops it, and returns true, when it has
/// been waiting to open a FIFO for [`LOOKS_BEFORE_STOP`] looks in a row.
fn watch(pid: Pid, done: &mpsc::Receiver<()>) -> bool {
    let mut looks = 0;
    loop {
        match done.recv_timeout(LOOK_EVERY) {
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            _ => return false,
        }
        looks = if waits_on_fifo(pid) { looks + 1 } else { 0 };
        if looks >= LOOKS_BEFORE_STOP {
            // Not yet reaped (see `run`), so the pid is still this process. SIGTERM
            // first: git removes its lock files (`index.lock`) when terminated, and
            // the wait for a FIFO's writer is interrupted by a signal.
            let _ = nix::sys::signal::kill(pid, Signal::SIGTERM);
            if let Err(mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(GRACE) {
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
            }
            return true;
        }
    }
}

/// Whether `pid` is asleep in the kernel's wait for the other end of a named pipe.
fn waits_on_fifo(pid: Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/wchan"))
        .is_ok_and(|wchan| wchan.trim() == "wait_for_partner")
}
