//! Waking a supervisor: a FIFO named `wake` in the leaf directory.
//!
//! The supervisor opens its FIFO read-write and non-blocking, so it never sees
//! end-of-file and can poll it with its pipes. A caller that wants the supervisor to
//! re-read its requests now (a kill, a `now` stop) writes one byte. Unlike a signal,
//! a FIFO cannot hit the wrong process when a pid is reused: with no supervisor
//! reading, opening it fails with `ENXIO` and nothing happens.

use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::io::Read;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::sys::stat::Mode;

/// Creates the FIFO (replacing a stale one) and opens it for the supervisor.
pub(crate) fn open_for_supervisor(path: &Path) -> io::Result<File> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    nix::unistd::mkfifo(path, Mode::S_IRUSR | Mode::S_IWUSR)?;
    OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Wakes the supervisor reading `path`, if one is. Never blocks, never fails: a
/// missing reader or a full FIFO (a wake-up is already pending) are both fine.
pub(crate) fn poke(path: &Path) {
    let opened = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    if let Ok(mut fifo) = opened {
        let _ = fifo.write(b"!");
    }
}

/// Reads and discards whatever is pending on a non-blocking descriptor.
pub(crate) fn drain(mut source: impl Read) {
    let mut buffer = [0u8; 64];
    while matches!(source.read(&mut buffer), Ok(n) if n > 0) {}
}
