//! One walk of the work tree, on every core, that finds what changed since the index.
//!
//! Each directory is read once. A tracked file is `lstat`ed (relative to its directory)
//! and taken as the index records it only when every stat field matches; otherwise, and
//! for every untracked file git would not ignore, its bytes are hashed and stored. A
//! directory git ignores is entered only when it holds tracked files, and an untracked
//! nested repository is left alone.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
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
}

/// One directory to read.
struct Job {
    dir: PathBuf,
    /// Its path from the root, without a trailing slash; empty for the root.
    rel: Vec<u8>,
    rules: Arc<Rules>,
    /// Inside a directory git ignores: only tracked files count.
    ignored: bool,
}

/// The directories left to read, and how many are being read now.
struct Queue {
    jobs: Vec<Job>,
    busy: usize,
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
            }],
            busy: 0,
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
        let mut found = Found::default();
        for part in parts {
            found.unchanged.extend(part.unchanged);
            found.recorded.extend(part.recorded);
        }
        found.unchanged.sort_unstable();
        Ok(found)
    }

    /// One thread's share: takes directories until none is left and none is being read.
    fn work(&self, queue: &Mutex<Queue>, ready: &Condvar) -> Found {
        let mut found = Found::default();
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
                    q = ready.wait(q).unwrap_or_else(|p| p.into_inner());
                }
            };
            let Some(job) = job else {
                ready.notify_all();
                return found;
            };
            let mut more = Vec::new();
            let result = self.visit(job, &mut found, &mut more);
            let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
            q.busy -= 1;
            match result {
                Ok(()) => q.jobs.extend(more),
                Err(error) => {
                    q.failed.get_or_insert(error);
                }
            }
            ready.notify_all();
        }
    }

    /// Reads one directory: records its files, queues its subdirectories.
    fn visit(&self, job: Job, found: &mut Found, more: &mut Vec<Job>) -> Result<(), GitError> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW;
        let fd = match nix::fcntl::open(&job.dir, flags, NixMode::empty()) {
            Ok(fd) => fd,
            Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => return Ok(()),
            Err(e) => return Err(safe_fs::io_error("list", &job.dir, e.into())),
        };
        let mut names = list(&fd).map_err(|e| safe_fs::io_error("list", &job.dir, e.into()))?;
        // In byte order, as the index is: each lookup starts where the last one ended.
        names.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let rules = if !job.ignored && names.iter().any(|(name, _)| name == b".gitignore") {
            Rules::child(&job.rules, &job.dir, true)
        } else {
            Arc::clone(&job.rules)
        };
        let below = self.index.below(&job.rel);
        let mut place = Place {
            job: &job,
            fd: &fd,
            below: &below,
            cursor: below.start(),
            rules: &rules,
        };
        for (name, kind) in &names {
            let kind = match kind {
                Some(kind) => Some(*kind),
                // The file system did not say: ask `lstat`.
                None => match fstatat(&fd, name.as_slice(), AtFlags::AT_SYMLINK_NOFOLLOW) {
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
        let tracked_below = self.index.has_below(place.below, place.cursor, name);
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
    fd: &'a OwnedFd,
    below: &'a Below,
    /// Where the next lookup in `below` starts.
    cursor: usize,
    rules: &'a Arc<Rules>,
}

/// The names in the directory open at `fd` (but `.`, `..` and `.git`), and their types
/// where the file system tells them.
fn list(fd: &OwnedFd) -> nix::Result<Vec<(Vec<u8>, Option<DirType>)>> {
    let mut dir = Dir::from_fd(
        fd.try_clone()
            .map_err(|e| Errno::from_raw(e.raw_os_error().unwrap_or(0)))?,
    )?;
    let mut names = Vec::new();
    for entry in dir.iter() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." && name != b".git" {
            names.push((name.to_vec(), entry.file_type()));
        }
    }
    Ok(names)
}
