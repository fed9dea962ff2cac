//! Sending signals, and receiving the ones the supervisor reacts to.
//!
//! Senders here are thin: the decision of which signal goes to whom, and why, is
//! made and commented at each call site. What these helpers guarantee is that a
//! signal sent to a single process goes to the process we mean: its start time is
//! checked immediately before the `kill`.

use std::io;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use nix::errno::Errno;
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::records::ProcessId;

/// Sends `signal` to every member of process group `pgid`. A group that no longer
/// exists is not an error: there is nobody left to signal.
pub(super) fn to_group(pgid: i32, signal: Signal) -> nix::Result<()> {
    match nix::sys::signal::killpg(Pid::from_raw(pgid), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Sends `signal` to the process with this identity, if it still has it. Returns
/// whether the signal was sent. The start time is read right before the `kill`, so a
/// recycled pid is left alone.
pub(super) fn to_process(id: ProcessId, signal: Signal) -> bool {
    match super::procfs::read_stat(id.pid) {
        Ok(stat) if stat.start_time == id.start_time && !stat.is_zombie() => {
            nix::sys::signal::kill(Pid::from_raw(id.pid), signal).is_ok()
        }
        _ => false,
    }
}

/// Sends `signal` to our own unreaped child. No start-time check is needed: until we
/// reap it, the kernel cannot give its pid to anybody else.
pub(super) fn to_child(pid: i32, signal: Signal) {
    let _ = nix::sys::signal::kill(Pid::from_raw(pid), signal);
}

/// The signals the supervisor process handles, delivered as bytes on a socket it
/// polls together with the leaf's pipes.
pub(super) struct Incoming {
    /// Readable whenever a handled signal arrived; drain it after each wake-up.
    pub wakeups: UnixStream,
    /// The last termination signal the supervisor received, or 0.
    terminate: Arc<AtomicUsize>,
}

impl Incoming {
    /// Installs the handlers. Handlers are reset to the default action by `exec`, so
    /// installing them also undoes any `SIG_IGN` the supervisor inherited for these
    /// signals: the leaf always starts with default dispositions.
    pub fn install() -> io::Result<Incoming> {
        let (wakeups, sender) = UnixStream::pair()?;
        wakeups.set_nonblocking(true)?;
        sender.set_nonblocking(true)?;
        let terminate = Arc::new(AtomicUsize::new(0));
        // SIGCHLD: a child of ours (the leaf, or an orphan re-parented to us as the
        // subreaper) changed state; we reap it.
        signal_hook::low_level::pipe::register(libc::SIGCHLD, sender.try_clone()?)?;
        // SIGTERM, SIGINT, SIGHUP, SIGQUIT: somebody asks the supervisor itself to end.
        // It must not die silently with the leaf still running, so it records which
        // signal and ends the leaf's group gracefully (class `killed_external`).
        for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
            let value = usize::try_from(signal).unwrap_or(usize::MAX);
            signal_hook::flag::register_usize(signal, Arc::clone(&terminate), value)?;
            signal_hook::low_level::pipe::register(signal, sender.try_clone()?)?;
        }
        Ok(Incoming { wakeups, terminate })
    }

    /// The termination signal received so far, if any.
    pub fn termination(&self) -> Option<i32> {
        match self.terminate.load(Ordering::SeqCst) {
            0 => None,
            value => i32::try_from(value).ok(),
        }
    }
}
