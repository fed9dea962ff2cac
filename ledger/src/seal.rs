//! The seal: where the chain was last verified, and what `stat` said of the ledger's
//! files then, so the check every command makes rehashes only the events after it.
//!
//! Rehashing every payload is what makes the chain and its git anchors worth anything,
//! and on a ledger of ten thousand events it costs tens of milliseconds. A seal kept
//! beside the database records a point of the chain verified whole (its event count,
//! the id and hash of its last event) together with a key of the ledger's files: the
//! device, inode, size, modification and change times of the database, and of its
//! write-ahead log the same but with the SHA-256 of its bytes in place of its change
//! time (SQLite run as root gives the log its owner again on every open, which sets
//! the change time without changing a byte). While the key is the same, nothing was
//! written to the files since the point was verified, so the events up to it are as
//! they were and only those after it are rehashed. Any write changes the key: an edit
//! of an old event, even one of the same length with its modification time put back,
//! sets the change time, which no process can set back.
//!
//! A key is kept only once it is *settled*: when the kernel's coarse clock, from which
//! file times are taken, has passed the database's change time, so that a write after
//! the key was taken cannot leave that change time as it was.
//!
//! tdd's own writes keep the seal: a [`Ledger`](crate::Ledger) opened for writing on
//! files whose key is the seal's checks before each write that nothing else wrote
//! since its own last one, and when it closes keeps the seal's point for the files as
//! it left them; the events it appended are rehashed by the next check. A write by
//! anything else in between is not absorbed: the ledger keeps no seal and the next
//! check walks the whole chain.
//!
//! The seal is a file the ledger's owner can write; docs/security.md says what that
//! means by hand and why no conducted leaf reaches it. `tdd ledger verify` never reads it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use serde::Deserialize;
use serde::Serialize;

/// What `stat` says of one of the ledger's files (device, inode, size, modification
/// and change times in ns), or nothing when it is not there.
pub type FileKey = Option<[i64; 5]>;

/// The longest a ledger that closes waits for its key to settle; past it, no seal is
/// kept and the next check walks the whole chain.
const SETTLE_WITHIN: Duration = Duration::from_millis(50);

/// A verified point of the chain: how many events it holds, and its last event's id
/// and hash (the genesis hash and id 0 for an empty chain).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Point {
    /// Events up to and including the last one.
    pub events: u64,
    /// The last event's id.
    pub last_id: i64,
    /// The last event's hash.
    pub head: String,
}

/// What is kept beside the database.
#[derive(Debug, Serialize, Deserialize)]
struct Seal {
    key: Vec<FileKey>,
    point: Point,
}

/// The key of the ledger's files, taken before a look at them, and whether it is
/// settled (a later write is sure to change it).
#[derive(Debug, Clone)]
pub struct Taken {
    database: PathBuf,
    key: Vec<FileKey>,
    settled: bool,
}

impl Taken {
    /// The key of the ledger at `database` as it is now.
    pub fn now(database: &Path) -> Taken {
        let before = coarse_now();
        let key = files_key(database);
        let settled = settled(&key, before);
        Taken {
            database: database.to_path_buf(),
            key,
            settled,
        }
    }

    /// Whether this key is still the one the seal was kept for (a point is held only
    /// while it is).
    pub(crate) fn matches(&self, other: &[FileKey]) -> bool {
        !self.key.is_empty() && self.key == other
    }

    /// Whether a write after this key was taken is sure to change it.
    pub fn is_settled(&self) -> bool {
        self.settled
    }

    /// The key itself, for a caller that keeps its own record of the files (the hook's
    /// glance).
    pub fn key(&self) -> &[FileKey] {
        &self.key
    }

    /// The verified point the seal holds, when the files are still those it was
    /// kept for.
    pub fn sealed_point(&self) -> Option<Point> {
        read(&self.database)
            .filter(|seal| self.matches(&seal.key))
            .map(|seal| seal.point)
    }

    /// Keeps `point` as verified for the files as this key found them, when the key
    /// is settled; nothing otherwise. Best effort: a seal not kept costs the next
    /// check a whole walk.
    pub fn seal(&self, point: &Point) {
        if self.settled && !self.key.is_empty() {
            write(
                &self.database,
                &Seal {
                    key: self.key.clone(),
                    point: point.clone(),
                },
            );
        }
    }
}

/// The key of the database at `database` and its write-ahead log; empty (matching
/// nothing, sealing nothing) when the log is larger than [`MAX_WAL`] or cannot be read.
pub fn files_key(database: &Path) -> Vec<FileKey> {
    match wal_key(&wal_of(database)) {
        Ok(wal) => vec![stat(database), wal],
        Err(Unkeyable) => Vec::new(),
    }
}

/// The most of a write-ahead log that is hashed for a key: SQLite keeps its own near
/// 4 MB; a larger one (or a sparse one claiming to be) is not read at all.
pub(crate) const MAX_WAL: u64 = 64 * 1024 * 1024;

/// The most of a seal file that is read.
const MAX_SEAL: u64 = 64 * 1024;

/// A log no key is taken of.
struct Unkeyable;

/// The key with the log's change time, not its bytes: what a writer compares between
/// its own writes while its connection is open (no open by anyone else re-owns the log
/// meanwhile without that counting as a write by someone else).
pub(crate) fn raw_key(database: &Path) -> Vec<FileKey> {
    vec![stat(database), stat(&wal_of(database))]
}

/// A writer's hold on the seal: armed while every write to the files since it opened
/// them was its own.
#[derive(Debug)]
pub(crate) struct Reseal {
    database: PathBuf,
    held: Option<(Point, Vec<FileKey>)>,
}

impl Reseal {
    /// No hold: the ledger keeps no seal when it closes.
    pub(crate) fn none(database: &Path) -> Reseal {
        Reseal {
            database: database.to_path_buf(),
            held: None,
        }
    }

    /// A hold on `point` when the files are still those `taken` found before the
    /// connection was opened (the open itself writes nothing a key counts); none
    /// otherwise.
    pub(crate) fn hold(database: &Path, taken: &Taken, point: Point) -> Reseal {
        let raw = raw_key(database);
        let held = taken.matches(&files_key(database)).then_some((point, raw));
        Reseal {
            database: database.to_path_buf(),
            held,
        }
    }

    /// Before a write, and before the connection closes: the hold is let go when
    /// anything else wrote since this ledger's own last write.
    pub(crate) fn check_own(&mut self) {
        if self
            .held
            .as_ref()
            .is_some_and(|(_, last)| *last != raw_key(&self.database))
        {
            self.held = None;
        }
    }

    /// After one of its own writes: the files as they now are are its own.
    pub(crate) fn after_write(&mut self) {
        if let Some((_, last)) = &mut self.held {
            *last = raw_key(&self.database);
        }
    }

    /// Lets the hold go (a write that is not an append, such as an import).
    pub(crate) fn release(&mut self) {
        self.held = None;
    }
}

impl Drop for Reseal {
    /// Runs after the connection closed (it is the ledger's last field): keeps the
    /// held point for the files as the close left them, taken right after it, once the
    /// clock has passed their change time with nothing written since.
    fn drop(&mut self) {
        let Some((point, _)) = self.held.take() else {
            return;
        };
        if std::thread::panicking() {
            return;
        }
        let raw = raw_key(&self.database);
        let taken = Taken {
            database: self.database.clone(),
            key: files_key(&self.database),
            settled: true,
        };
        let deadline = Instant::now() + SETTLE_WITHIN;
        loop {
            let before = coarse_now();
            if raw_key(&self.database) != raw {
                return;
            }
            if settled(&taken.key, before) {
                taken.seal(&point);
                return;
            }
            if Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The seal's file beside `database`.
fn seal_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_os_string();
    name.push("-seal.json");
    PathBuf::from(name)
}

/// The write-ahead log of `database`.
fn wal_of(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_os_string();
    name.push("-wal");
    PathBuf::from(name)
}

/// `path`'s record, its link not followed.
fn stat(path: &Path) -> FileKey {
    let meta = path.symlink_metadata().ok()?;
    Some([
        i64::try_from(meta.dev()).unwrap_or(i64::MAX),
        i64::try_from(meta.ino()).unwrap_or(i64::MAX),
        i64::try_from(meta.size()).unwrap_or(i64::MAX),
        meta.mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.mtime_nsec()),
        meta.ctime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.ctime_nsec()),
    ])
}

/// The log's record with the first 8 bytes of its SHA-256 in place of its change
/// time; nothing for an absent or empty log, which holds nothing to read (a reader
/// that opens the database makes one where there was none). A log larger than
/// [`MAX_WAL`], or one that is there but cannot be read as a file, is unkeyable.
fn wal_key(path: &Path) -> Result<FileKey, Unkeyable> {
    use sha2::Digest;
    use std::io::Read;
    let Some(mut key) = stat(path) else {
        return Ok(None);
    };
    if key[2] == 0 {
        return Ok(None);
    }
    if u64::try_from(key[2]).map_or(true, |size| size > MAX_WAL) {
        return Err(Unkeyable);
    }
    let file = open_regular(path).ok_or(Unkeyable)?;
    let mut hasher = sha2::Sha256::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut reader = file.take(MAX_WAL + 1);
    let mut read = 0u64;
    loop {
        let n = reader.read(&mut chunk).map_err(|_| Unkeyable)?;
        if n == 0 {
            break;
        }
        read += n as u64;
        hasher.update(&chunk[..n]);
    }
    if read > MAX_WAL {
        return Err(Unkeyable);
    }
    let digest = hasher.finalize();
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    key[4] = i64::from_le_bytes(head);
    Ok(Some(key))
}

/// Whether a write after the coarse clock read `before` is sure to change `key`: the
/// database's change time is older than that reading (an absent database has none).
/// A change time on a whole second is taken for one of a file system that keeps
/// seconds only: it must be two seconds older.
pub(crate) fn settled(key: &[FileKey], before: i64) -> bool {
    if key.is_empty() {
        return false;
    }
    key.first().copied().flatten().is_none_or(|database| {
        let changed = database[4];
        if changed % 1_000_000_000 == 0 {
            changed.saturating_add(2_000_000_000) <= before
        } else {
            changed < before
        }
    })
}

/// The kernel's coarse real-time clock in ns, from which file times are taken (0 when
/// it cannot be read: then nothing is settled).
fn coarse_now() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_REALTIME_COARSE)
        .map(|t| {
            t.tv_sec()
                .saturating_mul(1_000_000_000)
                .saturating_add(t.tv_nsec())
        })
        .unwrap_or(0)
}

/// `path` opened for reading when it is a regular file (never a link followed or a
/// pipe waited on).
fn open_regular(path: &Path) -> Option<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(no_follow_no_block())
        .open(path)
        .ok()?;
    file.metadata().ok()?.file_type().is_file().then_some(file)
}

/// `O_NOFOLLOW | O_NONBLOCK`: a link is not followed and a pipe is not waited on.
fn no_follow_no_block() -> i32 {
    (nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits()
}

/// The seal kept for `database`, if there is one and it reads.
fn read(database: &Path) -> Option<Seal> {
    serde_json::from_slice(&read_regular(&seal_path(database), MAX_SEAL)?).ok()
}

/// Keeps `seal`, whole or not at all (a file beside it, renamed over it).
fn write(database: &Path, seal: &Seal) {
    if let Ok(bytes) = serde_json::to_vec(seal) {
        keep_whole(&seal_path(database), &bytes);
    }
}

/// The first `cap` bytes of `path` when it is a regular file that reads (never a link
/// followed or a pipe waited on).
pub(crate) fn read_regular(path: &Path, cap: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    let file = open_regular(path)?;
    let mut bytes = Vec::new();
    file.take(cap).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Writes `bytes` to `path` whole or not at all: into a new file of this process's
/// own beside it (never through a link or a file left there), renamed over `path`.
pub(crate) fn keep_whole(path: &Path, bytes: &[u8]) {
    let mut temporary = path.as_os_str().to_os_string();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut file| std::io::Write::write_all(&mut file, bytes));
    if written.is_err() || std::fs::rename(&temporary, path).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}
