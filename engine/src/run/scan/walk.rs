//! One walk of the work tree, on every core, that finds what changed since the index.
//!
//! Each directory is read once. A tracked file is `lstat`ed (relative to its directory)
//! and taken as the index records it only when every stat field matches; otherwise, and
//! for every untracked file git would not ignore, its bytes are hashed and stored. A
//! directory git ignores is entered only when it holds tracked files, and an untracked
//! nested repository is left alone.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;

use gix_index::entry::Mode;
use nix::dir::Dir;
use nix::dir::Type as DirType;
use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode as NixMode;
use nix::sys::stat::fstatat;

use super::ignores::Base;
use super::ignores::Rules;
use super::index::Below;
use super::index::Index;
use super::objects::Objects;
use super::objects::Recorded;
use crate::git::GitError;
use crate::run::safe_fs;

/// What the walk found.
#[derive(Default)]
pub(super) struct Found {
    /// Positions of index entries whose file (or submodule) is on disk as recorded.
    pub(super) unchanged: Vec<usize>,
    /// Paths recorded from disk, with their mode and blob.
    pub(super) recorded: Vec<(Vec<u8>, Recorded)>,
}

/// The read-only inputs of a walk.
pub(super) struct Walk<'a> {
    pub(super) root: &'a Path,
    pub(super) index: &'a Index,
    pub(super) base: &'a Base,
    pub(super) objects: &'a Objects,
    /// How many more bytes of changed files this walk may hash
    /// ([`super::objects::RECORD_ALL_AT_MOST`] to begin with).
    pub(super) left: std::sync::atomic::AtomicU64,
}

/// One directory to read.
struct Job {
    dir: PathBuf,
    /// Its path from the root, without a trailing slash; empty for the root.
    rel: Vec<u8>,
    rules: Arc<Rules>,
    /// Inside a directory git ignores: only tracked files count.
    ignored: bool,
    /// The index entries below it.
    below: Below,
}

/// The directories left to read, and how many are being read now.
struct Queue {
    jobs: Vec<Job>,
    busy: usize,
    /// Threads waiting for a job: only then is there anyone to wake.
    waiting: usize,
    failed: Option<GitError>,
}

fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    let mut path = Vec::with_capacity(rel.len() + 1 + name.len());
    if !rel.is_empty() {
        path.extend_from_slice(rel);
        path.push(b'/');
    }
    path.extend_from_slice(name);
    path
}

impl Walk<'_> {
    /// Walks the whole work tree with up to `threads` threads.
    pub(super) fn run(&self, threads: usize) -> Result<Found, GitError> {
        let queue = Mutex::new(Queue {
            jobs: vec![Job {
                dir: self.root.to_path_buf(),
                rel: Vec::new(),
                rules: Rules::root(),
                ignored: false,
                below: self.index.root(),
            }],
            busy: 0,
            waiting: 0,
            failed: None,
        });
        let ready = Condvar::new();
        let parts: Vec<Found> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..threads.max(1))
                .map(|_| scope.spawn(|| self.work(&queue, &ready)))
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().unwrap_or_default())
                .collect()
        });
        let mut queue = queue.into_inner().unwrap_or_else(|p| p.into_inner());
        if let Some(error) = queue.failed.take() {
            return Err(error);
        }
        if !queue.jobs.is_empty() || queue.busy != 0 {
            return Err(GitError::Failed {
                args: "scan".into(),
                stderr: "a scanning thread panicked".into(),
            });
        }
        // Each thread's positions are in no common order: mark them, then read them off
        // in index order (cheaper than sorting a list as long as the index).
        let mut taken = vec![false; self.index.entries().len()];
        let mut found = Found::default();
        for part in parts {
            for at in part.unchanged {
                taken[at] = true;
            }
            found.recorded.extend(part.recorded);
        }
        found.unchanged = (0..taken.len()).filter(|&at| taken[at]).collect();
        Ok(found)
    }

    /// One thread's share: takes directories until none is left and none is being read.
    fn work(&self, queue: &Mutex<Queue>, ready: &Condvar) -> Found {
        let mut found = Found::default();
        let mut names = Names::default();
        loop {
            let job = {
                let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                loop {
                    if q.failed.is_some() {
                        break None;
                    }
                    if let Some(job) = q.jobs.pop() {
                        q.busy += 1;
                        break Some(job);
                    }
                    if q.busy == 0 {
                        break None;
                    }
                    q.waiting += 1;
                    q = ready.wait(q).unwrap_or_else(|p| p.into_inner());
                    q.waiting -= 1;
                }
            };
            let Some(job) = job else {
                ready.notify_all();
                return found;
            };
            let mut more = Vec::new();
            let result = self.visit(job, &mut found, &mut more, &mut names);
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            q.busy -= 1;
            match result {
                Ok(()) => q.jobs.extend(more),
                Err(error) => {
                    q.failed.get_or_insert(error);
                }
            }
            // Waking costs a system call even when nobody waits.
            if q.waiting > 0 {
                ready.notify_all();
            }
        }
    }

    /// Reads one directory: records its files, queues its subdirectories.
    fn visit(
        &self,
        job: Job,
        found: &mut Found,
        more: &mut Vec<Job>,
        names: &mut Names,
    ) -> Result<(), GitError> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
        let mut dir = match Dir::open(&job.dir, flags, NixMode::empty()) {
            Ok(dir) => dir,
            Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => return Ok(()),
            Err(e) => return Err(safe_fs::io_error("list", &job.dir, e.into())),
        };
        // In byte order, as the index is: each lookup starts where the last one ended.
        names
            .read(&mut dir)
            .map_err(|e| safe_fs::io_error("list", &job.dir, e.into()))?;
        let fd = dir.as_fd();
        let rules = if !job.ignored && names.iter().any(|(name, _)| name == b".gitignore") {
            Rules::child(&job.rules, &job.dir, true)
        } else {
            Arc::clone(&job.rules)
        };
        let mut place = Place {
            job: &job,
            fd,
            below: &job.below,
            cursor: job.below.start(),
            rules: &rules,
        };
        for (name, kind) in names.iter() {
            let kind = match kind {
                Some(kind) => Some(kind),
                // The file system did not say: ask `lstat`.
                None => match fstatat(fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(meta) => type_of(meta.st_mode),
                    Err(_) => continue,
                },
            };
            match kind {
                Some(DirType::Directory) => {
                    if let Some(next) = self.directory(&mut place, name, found) {
                        more.push(next);
                    }
                }
                Some(DirType::File | DirType::Symlink) => {
                    self.file(&mut place, name, found)?;
                }
                // A FIFO, socket or device is nothing git records: a tracked path that
                // became one counts as removed.
                _ => {}
            }
        }
        Ok(())
    }

    /// The job for a subdirectory, or `None` when it is not to be read.
    fn directory(&self, place: &mut Place<'_>, name: &[u8], found: &mut Found) -> Option<Job> {
        if let Some(at) = self.index.find_in(place.below, &mut place.cursor, name) {
            let entry = &self.index.entries()[at];
            // A submodule, or a directory a sparse index leaves out, keeps its entry.
            if entry.mode == Mode::COMMIT || entry.mode == Mode::DIR {
                found.unchanged.push(at);
                return None;
            }
        }
        let full = place.job.dir.join(OsStr::from_bytes(name));
        let below = self.index.child(place.below, place.cursor, name);
        let tracked_below = !below.is_empty();
        if !tracked_below && full.join(".git").symlink_metadata().is_ok() {
            // An untracked nested repository: its files are its own repository's.
            return None;
        }
        let ignored = place.job.ignored || place.rules.ignores(self.base, &full, true);
        if ignored && !tracked_below {
            return None;
        }
        Some(Job {
            dir: full,
            rel: join(&place.job.rel, name),
            rules: Arc::clone(place.rules),
            ignored,
            below,
        })
    }

    /// Takes a file or symlink as the index has it, or records it from disk.
    fn file(&self, place: &mut Place<'_>, name: &[u8], found: &mut Found) -> Result<(), GitError> {
        let tracked = self.index.find_in(place.below, &mut place.cursor, name);
        let full = || place.job.dir.join(OsStr::from_bytes(name));
        if tracked.is_none()
            && (place.job.ignored || place.rules.ignores(self.base, &full(), false))
        {
            return Ok(());
        }
        let meta = match fstatat(place.fd, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(meta) => meta,
            Err(Errno::ENOENT | Errno::ENOTDIR) => return Ok(()),
            Err(e) => return Err(safe_fs::io_error("inspect", &full(), e.into())),
        };
        if let Some(at) = tracked
            && self.index.unchanged(&self.index.entries()[at], &meta)
        {
            found.unchanged.push(at);
            return Ok(());
        }
        let format = meta.st_mode & nix::libc::S_IFMT;
        if format != nix::libc::S_IFREG && format != nix::libc::S_IFLNK {
            // No longer a file (the type was unknown, or it changed): nothing to record.
            return Ok(());
        }
        let symlink = format == nix::libc::S_IFLNK;
        let size = u64::try_from(meta.st_size).unwrap_or(0);
        let within = self.left.fetch_update(
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
            |left| left.checked_sub(size),
        );
        if within.is_err() {
            return Err(GitError::ChangesTooLarge {
                limit: super::objects::RECORD_ALL_AT_MOST,
            });
        }
        if let Some(recorded) = self.objects.record(&full(), symlink, true)? {
            found.recorded.push((join(&place.job.rel, name), recorded));
        }
        Ok(())
    }
}

/// The directory entry type of an `lstat` mode.
fn type_of(mode: nix::libc::mode_t) -> Option<DirType> {
    match mode & nix::libc::S_IFMT {
        nix::libc::S_IFDIR => Some(DirType::Directory),
        nix::libc::S_IFREG => Some(DirType::File),
        nix::libc::S_IFLNK => Some(DirType::Symlink),
        _ => None,
    }
}

/// The directory a walk step is in.
struct Place<'a> {
    job: &'a Job,
    fd: BorrowedFd<'a>,
    below: &'a Below,
    /// Where the next lookup in `below` starts.
    cursor: usize,
    rules: &'a Arc<Rules>,
}

/// The names in one directory (but `.`, `..` and `.git`) with their types where the
/// file system tells them, kept in one buffer that a thread reuses for every directory.
#[derive(Default)]
struct Names {
    bytes: Vec<u8>,
    items: Vec<(std::ops::Range<usize>, Option<DirType>)>,
}

impl Names {
    /// Replaces the names with those of `dir`, in byte order.
    fn read(&mut self, dir: &mut Dir) -> nix::Result<()> {
        self.bytes.clear();
        self.items.clear();
        for entry in dir.iter() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." && name != b".git" {
                let start = self.bytes.len();
                self.bytes.extend_from_slice(name);
                self.items
                    .push((start..self.bytes.len(), entry.file_type()));
            }
        }
        let bytes = &self.bytes;
        self.items
            .sort_unstable_by(|a, b| bytes[a.0.clone()].cmp(&bytes[b.0.clone()]));
        Ok(())
    }

    /// The names in byte order.
    fn iter(&self) -> impl Iterator<Item = (&[u8], Option<DirType>)> {
        self.items
            .iter()
            .map(|(range, kind)| (&self.bytes[range.clone()], *kind))
    }
}
