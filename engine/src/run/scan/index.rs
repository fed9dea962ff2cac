//! The user's index, read in-process from a private copy, as the scan's stat cache.
//!
//! Only what the scan may trust is used: the path list (what is tracked), each entry's
//! stat data and blob id (trusted only while every stat field still matches the file),
//! and the cached tree ids of directories nothing changed in. Flags that tell git to
//! look away are read so they can be reported, never obeyed.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;

use gix_index::entry::Flags;
use gix_index::entry::Mode;
use nix::sys::stat::FileStat;

use super::STRICT;
use crate::git::Git;
use crate::git::GitError;
use crate::run::safe_fs;

/// The index `git read-tree` writes for a scan of a repository without one, removed
/// when the scan ends.
struct TempIndex {
    path: PathBuf,
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The entries below one directory: a range of positions, and how many bytes of each
/// path name the directory (with its slash).
pub(super) struct Below {
    range: std::ops::Range<usize>,
    skip: usize,
}

impl Below {
    /// The first position of the range, where a search through it starts.
    pub(super) fn start(&self) -> usize {
        self.range.start
    }

    /// Whether no entry lies below the directory.
    pub(super) fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

/// The tracked paths with their stat data, read from a copy of the user's index (or of
/// HEAD's tree when there is no index).
pub(super) struct Index {
    pub(super) file: gix_index::File,
    /// The modification time of the user's index: an entry whose file changed at or
    /// after it may hold stat data git took before the last write ("racily clean").
    written: (i64, i64),
}

/// The bytes of the regular file at `path` and its modification time, both of the one
/// file opened (a rename over `path` midway changes neither). A FIFO, a device or a
/// directory there is an error, never a wait or an endless read.
fn read_whole(path: &Path) -> std::io::Result<(Vec<u8>, (i64, i64))> {
    let (bytes, meta) = crate::read::regular_with_meta(path)?;
    Ok((bytes, (meta.mtime(), meta.mtime_nsec())))
}

/// The index in `bytes`, its trailing checksum not verified (the scan trusts no entry
/// beyond what `lstat` confirms, so a checksum would prove nothing more).
fn decode(bytes: &[u8], path: PathBuf, kind: gix_hash::Kind) -> Result<gix_index::File, GitError> {
    let options = gix_index::decode::Options::default();
    let (state, _) = gix_index::State::from_bytes(bytes, filetime::FileTime::zero(), kind, options)
        .map_err(|e| GitError::IndexDamaged {
            path: path.display().to_string(),
            why: e.to_string(),
        })?;
    Ok(gix_index::File::from_state(state, path))
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

impl Index {
    /// Reads the index of the repository whose git directory is `git_dir`.
    ///
    /// The user's index is read whole into memory with one open file, and only that copy
    /// is decoded, so neither git replacing it nor anyone truncating it can change what
    /// the scan sees midway (a mapped file would fault on truncation).
    pub(super) fn load(git: &Git, git_dir: &Path, kind: gix_hash::Kind) -> Result<Index, GitError> {
        let real = git_dir.join("index");
        let (bytes, written) = match read_whole(&real) {
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Index::from_head(git, git_dir, kind);
            }
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(GitError::NotRegular {
                    path: real.display().to_string(),
                });
            }
            Err(e) => return Err(safe_fs::io_error("read the index", &real, e)),
        };
        Ok(Index {
            file: decode(&bytes, real, kind)?,
            written,
        })
    }

    /// The index of a repository without one (a bare checkout, a deleted index): HEAD's
    /// tree is what is tracked, when there is a HEAD.
    fn from_head(git: &Git, git_dir: &Path, kind: gix_hash::Kind) -> Result<Index, GitError> {
        let copy = TempIndex {
            path: git_dir.join(format!("tdd-index-{}-{}", std::process::id(), unique())),
        };
        let never = (i64::MAX, 0);
        if git
            .text(["rev-parse", "--verify", "--quiet", "HEAD"])
            .is_err()
        {
            let file = gix_index::File::from_state(gix_index::State::new(kind), copy.path.clone());
            return Ok(Index {
                file,
                written: never,
            });
        }
        let mut cmd = git.command(STRICT.iter().chain(&["read-tree", "HEAD"]));
        cmd.env("GIT_INDEX_FILE", &copy.path);
        crate::git::run_piped(cmd, None, "read-tree HEAD", &[])?;
        let (bytes, _) = read_whole(&copy.path)
            .map_err(|e| safe_fs::io_error("read the index", &copy.path, e))?;
        Ok(Index {
            file: decode(&bytes, copy.path.clone(), kind)?,
            written: never,
        })
    }

    /// The entries, sorted by path then stage.
    pub(super) fn entries(&self) -> &[gix_index::Entry] {
        self.file.entries()
    }

    /// The path of `entry`.
    pub(super) fn path(&self, entry: &gix_index::Entry) -> &[u8] {
        entry.path(&self.file)
    }

    /// Whether the index has an entry at `path`, of any stage.
    pub(super) fn tracks(&self, path: &[u8]) -> bool {
        self.file.entry_index_by_path(path.into()).is_ok()
    }

    /// All entries: the range of the root directory.
    pub(super) fn root(&self) -> Below {
        Below {
            range: 0..self.entries().len(),
            skip: 0,
        }
    }

    /// The entry named `name` directly in the directory `below` covers: its position,
    /// the first of its stages. Names must be asked in ascending byte order; `cursor`
    /// (starting at [`Below::start`]) keeps the place between calls.
    pub(super) fn find_in(&self, below: &Below, cursor: &mut usize, name: &[u8]) -> Option<usize> {
        let at = self.seek(below, *cursor, name);
        *cursor = at;
        let entry = self.entries().get(at).filter(|_| at < below.range.end)?;
        (&self.path(entry)[below.skip..] == name).then_some(at)
    }

    /// The entries below the subdirectory `name` of the directory `below` covers (an
    /// empty range when none is); `from` is a position at or before the first of them.
    ///
    /// Found from the parent's range and the place the last lookup left off, so each
    /// directory costs a few comparisons near entries just read, not a search of the
    /// whole index.
    pub(super) fn child(&self, below: &Below, from: usize, name: &[u8]) -> Below {
        let mut key = Vec::with_capacity(name.len() + 1);
        key.extend_from_slice(name);
        // Every path below `name/` sorts from `name/` up to, not including, `name0`
        // (`0` is the byte after `/`).
        key.push(b'/');
        let start = self.seek(below, from, &key);
        key.pop();
        key.push(b'0');
        let end = self.seek(below, start, &key);
        Below {
            range: start..end,
            skip: below.skip + name.len() + 1,
        }
    }

    /// The first position from `from` whose path (past the directory) is not less than
    /// `key`: galloping ahead, since successive keys of one directory land close by.
    fn seek(&self, below: &Below, from: usize, key: &[u8]) -> usize {
        let entries = self.entries();
        let end = below.range.end;
        let less = |at: usize| &self.path(&entries[at])[below.skip..] < key;
        if from >= end || !less(from) {
            return from;
        }
        // `less(low)` holds; find the first position where it does not.
        let (mut low, mut step) = (from, 1);
        loop {
            let high = low + step;
            if high >= end || !less(high) {
                let high = high.min(end);
                return low
                    + 1
                    + entries[low + 1..high]
                        .partition_point(|e| &self.path(e)[below.skip..] < key);
            }
            low = high;
            step *= 2;
        }
    }

    /// Whether `entry` may be taken as the file `meta` describes without reading it:
    /// same kind, executable bit, size, inode, owner, and modification and change times
    /// (to the nanosecond where the index recorded nanoseconds), and not racily clean.
    pub(super) fn unchanged(&self, entry: &gix_index::Entry, meta: &FileStat) -> bool {
        let hash_anyway = Flags::ASSUME_VALID | Flags::SKIP_WORKTREE | Flags::INTENT_TO_ADD;
        if entry.stage_raw() != 0 || entry.flags.intersects(hash_anyway) {
            return false;
        }
        let format = meta.st_mode & nix::libc::S_IFMT;
        let exec = meta.st_mode & 0o100 != 0;
        let kind_matches = match entry.mode {
            Mode::FILE => format == nix::libc::S_IFREG && !exec,
            Mode::FILE_EXECUTABLE => format == nix::libc::S_IFREG && exec,
            Mode::SYMLINK => format == nix::libc::S_IFLNK,
            _ => false,
        };
        let stat = &entry.stat;
        let time = |recorded: gix_index::entry::stat::Time, secs: i64, nsecs: i64| {
            i64::from(recorded.secs) == secs
                && (recorded.nsecs == 0 || i64::from(recorded.nsecs) == nsecs)
        };
        let racy = (i64::from(stat.mtime.secs), i64::from(stat.mtime.nsecs)) >= self.written;
        kind_matches
            && !racy
            && time(stat.mtime, meta.st_mtime, meta.st_mtime_nsec)
            && time(stat.ctime, meta.st_ctime, meta.st_ctime_nsec)
            && stat.size == meta.st_size as u32
            && stat.ino == meta.st_ino as u32
            && stat.uid == meta.st_uid
            && stat.gid == meta.st_gid
    }
}
