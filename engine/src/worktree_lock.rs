//! One implementation of a per-work-tree lock, with the holder named.
//!
//! Two locks are taken through it, each on a file of its own: the engine's lock that
//! serialises baselines and advances in a work tree (`run`), and the conductor's lock
//! that allows one `tdd conduct` per work tree. Both name their file after [`key`] of
//! the work tree.
//!
//! The lock is a POSIX record lock (`fcntl(F_SETLK)`) on that file. Why a record lock
//! and not `flock`: when the lock is taken, F_GETLK makes the kernel name the holder's
//! pid, so a contender never depends on the holder having written anything yet (with
//! `flock`, a contender could read the holder's record before it was written and name
//! pid 0). The kernel drops the lock when the holder exits, however it exits.
//!
//! What the holder is doing (`baseline`, `advance`, `conduct`) and since when sits in a
//! record file named after its pid, written atomically (temporary file and rename)
//! *before* the lock is attempted: whoever sees the lock held can read the holder's
//! record.
//!
//! The catch of record locks, that closing any descriptor of the file in the holding
//! process drops its lock, cannot bite: only [`acquire`] and [`holder`] open a lock
//! file, both under one in-process registry of the files this process holds, and
//! neither opens a file that is in it: a second acquisition or a probe inside the same
//! process is answered from the registry.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;

use nix::errno::Errno;
use nix::fcntl::FcntlArg;
use nix::libc;
use sha2::Digest;

/// Lock files held by this process.
static HELD: Mutex<BTreeSet<PathBuf>> = Mutex::new(BTreeSet::new());

/// A held per-work-tree lock; released when dropped (or when the process dies).
///
/// Dropping it removes the holder's record, then closes (and so unlocks) the file.
#[derive(Debug)]
pub struct Guard {
    file: Option<File>,
    path: PathBuf,
    record: PathBuf,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.record);
        // Close (and so unlock) before forgetting the path: a thread of this process that
        // then opens the file cannot have its own lock dropped by this close.
        drop(self.file.take());
        held().remove(&self.path);
    }
}

/// Who holds the lock.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    /// The holder's process id, as the kernel reports it; never 0.
    pub pid: u32,
    /// What it is doing: `baseline`, `advance` or `conduct`; empty when its record was
    /// gone by the time it was read.
    pub what: String,
    /// When it took the lock (UTC RFC 3339), empty when unknown.
    pub since: String,
}

fn held() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    HELD.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Takes the lock on the file `path` (creating it and its directory), or names who
/// holds it.
///
/// Guarantees: at most one holder per lock file across processes and threads; a
/// returned [`Holder`] names a process that held the lock when it was asked (never pid
/// 0), with what it was doing.
pub fn acquire(path: &Path, what: &str) -> std::io::Result<Result<Guard, Holder>> {
    let path = path.to_path_buf();
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let own = std::process::id();
    let mut registry = held();
    if registry.contains(&path) {
        return Ok(Err(read_record(&path, own).unwrap_or(Holder {
            pid: own,
            what: what.to_string(),
            since: String::new(),
        })));
    }
    let record = record_path(&path, own);
    write_record(&record, what)?;
    let outcome = lock_or_holder(&path, what);
    match outcome {
        Ok(Ok(file)) => {
            registry.insert(path.clone());
            Ok(Ok(Guard {
                file: Some(file),
                path,
                record,
            }))
        }
        Ok(Err(holder)) => {
            let _ = std::fs::remove_file(&record);
            Ok(Err(holder))
        }
        Err(e) => {
            let _ = std::fs::remove_file(&record);
            Err(e)
        }
    }
}

/// Who holds the lock on the file `path`, without taking it; `None` when nobody does
/// (or the file does not exist).
///
/// Guarantees: never takes, and never drops, a lock of this process: a file this
/// process holds is answered from the in-process registry without being opened. A
/// returned holder names its pid as the kernel reports it (never 0); `what` and `since`
/// are empty when its record is gone.
pub fn holder(path: &Path) -> std::io::Result<Option<Holder>> {
    let own = std::process::id();
    // The registry stays locked while the file is open, so no thread of this process can
    // take the lock meanwhile and have it dropped when the probe closes its descriptor.
    let registry = held();
    if registry.contains(path) {
        return Ok(Some(read_record(path, own).unwrap_or(Holder {
            pid: own,
            what: String::new(),
            since: String::new(),
        })));
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut lock = whole_file(libc::F_WRLCK);
    nix::fcntl::fcntl(&file, FcntlArg::F_GETLK(&mut lock))?;
    drop(file);
    drop(registry);
    if lock.l_type == libc::F_UNLCK as libc::c_short || lock.l_pid <= 0 {
        return Ok(None);
    }
    let pid = lock.l_pid.unsigned_abs();
    Ok(Some(read_record(path, pid).unwrap_or(Holder {
        pid,
        what: String::new(),
        since: String::new(),
    })))
}

/// The name a work tree's lock files are keyed by: 16 hex digits of the SHA-256 of its
/// path, the same for every spelling of the path that is byte for byte equal.
pub fn key(work_tree: &Path) -> String {
    let digest = hex::encode(sha2::Sha256::digest(
        work_tree.as_os_str().as_encoded_bytes(),
    ));
    digest[..16].to_string()
}

/// Opens the lock file and takes the record lock, or asks the kernel who has it.
fn lock_or_holder(path: &Path, what: &str) -> std::io::Result<Result<File, Holder>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    // Each round either takes the lock or finds a holder and its record; a holder that
    // releases (and removes its record) meanwhile only sends us round again, and it
    // cannot do so forever in practice.
    let mut last = None;
    for _ in 0..10_000 {
        let mut lock = whole_file(libc::F_WRLCK);
        match nix::fcntl::fcntl(&file, FcntlArg::F_SETLK(&lock)) {
            Ok(_) => return Ok(Ok(file)),
            Err(Errno::EAGAIN | Errno::EACCES) => {}
            Err(e) => return Err(e.into()),
        }
        nix::fcntl::fcntl(&file, FcntlArg::F_GETLK(&mut lock))?;
        if lock.l_type != libc::F_UNLCK as libc::c_short && lock.l_pid > 0 {
            let pid = lock.l_pid.unsigned_abs();
            if let Some(holder) = read_record(path, pid) {
                return Ok(Err(holder));
            }
            last = Some(pid);
        }
    }
    match last {
        Some(pid) => Ok(Err(Holder {
            pid,
            what: what.to_string(),
            since: String::new(),
        })),
        None => Err(std::io::Error::other(
            "the work-tree lock kept changing hands",
        )),
    }
}

/// A record-lock request of `kind` covering the whole file, however long it grows.
fn whole_file(kind: libc::c_int) -> libc::flock {
    libc::flock {
        l_type: kind as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        l_pid: 0,
    }
}

/// The holder `pid` as its record describes it, if the record is there.
fn read_record(lock: &Path, pid: u32) -> Option<Holder> {
    crate::read::regular_text(&record_path(lock, pid))
        .ok()
        .and_then(|text| serde_json::from_str::<Holder>(&text).ok())
        .filter(|h| h.pid == pid)
}

/// Writes this process's record atomically: a temporary file renamed into place.
fn write_record(record: &Path, what: &str) -> std::io::Result<()> {
    let holder = Holder {
        pid: std::process::id(),
        what: what.to_string(),
        since: crate::ledger::clock::now_rfc3339(),
    };
    let text = serde_json::to_string(&holder).map_err(std::io::Error::other)?;
    let dir = record.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(text.as_bytes())?;
    temp.persist(record).map_err(|e| e.error)?;
    Ok(())
}

fn record_path(lock: &Path, pid: u32) -> PathBuf {
    lock.with_extension(format!("{pid}.json"))
}

#[cfg(test)]
mod tests;
