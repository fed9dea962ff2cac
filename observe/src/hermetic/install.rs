//! What a runner loads from outside the commit judged: its installation (the
//! interpreter's standard library and site-packages, the user site, the real
//! executable behind a version-manager shim) and the project's dependency directories
//! (`node_modules`, `.venv`), fingerprinted at `run start` and checked before and
//! after a gate's deciding runs.
//!
//! A fingerprint is built from what `stat` says of every entry under a root, links
//! never followed: its path, type, inode, size, mode, modification time and change
//! time. The change time is the kernel's: no unprivileged process can set it, and any
//! write, rename, link, unlink or mode change sets it to now. So a file edited and its
//! times put back, a `.pth` planted and removed again, a module swapped for another of
//! the same size: each leaves a change time no fingerprint taken before it holds, and
//! no file need be read to see it. A file whose change time is too close to the moment
//! the fingerprint was taken to tell a later write from an earlier one (the kernel's
//! file times are coarse) has its bytes hashed too, as git does for its racy entries.
//! Entries are grouped by the root's top-level entry
//! (a package, a module), so a refusal names what changed, and the groups are walked
//! on every core.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;

use nix::fcntl::AtFlags;
use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;

use super::watch::InstallWatch;
use super::watch::RootWatch;

/// The most entries walked under one root; a root beyond it is pinned as `too large`
/// (its top-level entries only), so that a fingerprint never takes unbounded time.
const MAX_ENTRIES: usize = 400_000;

/// The most links followed from a root, as the kernel's own bound on a path's links.
const MAX_LINKS: usize = 40;

/// One root of what runners load, fingerprinted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallPin {
    /// The directory (or single file) fingerprinted, as an absolute path.
    pub root: PathBuf,
    /// What it is, in words: `python3's site-packages`, `dependency directory`.
    pub what: String,
    /// The fingerprint of each top-level entry under the root (the root itself under
    /// `.`): 16 hex digits of SHA-256 over the `stat` records of the entry and
    /// everything below it.
    pub parts: BTreeMap<String, String>,
    /// How many entries the fingerprint covers.
    pub entries: u64,
    /// When the fingerprint was taken, in nanoseconds since the epoch: files changed
    /// within [`RACY_NS`] of it are fingerprinted by their bytes as well.
    #[serde(default)]
    pub taken_ns: i64,
    /// Top-level entries left out because they are pinned as roots of their own (the
    /// `site-packages` inside an interpreter's library directory).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip: Vec<String>,
    /// Whether only the root itself is fingerprinted, with the names it lists, not
    /// what is below them: for a directory an interpreter searches as it starts (for a
    /// `pyvenv.cfg`, a zip of its library, a shared library) where nothing of the kind
    /// is, so that one planted there later is seen.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shallow: bool,
}

/// How close to the fingerprint's moment a change time must be for the file's bytes to
/// be hashed as well: well beyond the coarsest file-time granularity.
const RACY_NS: i64 = 2_000_000_000;

impl InstallPin {
    /// Fingerprints `root` (a link at the root itself is followed, none below it);
    /// `None` when nothing is there.
    pub fn take(root: &Path, what: &str) -> Option<InstallPin> {
        InstallPin::take_skipping(root, what, Vec::new())
    }

    /// The same, leaving out the top-level entries named in `skip`.
    pub fn take_skipping(root: &Path, what: &str, skip: Vec<String>) -> Option<InstallPin> {
        InstallPin::taken(root, what, skip, false)
    }

    /// Fingerprints the directory `root` itself and the names it lists, nothing below
    /// them ([`InstallPin::shallow`]); `None` when nothing is there.
    pub fn take_shallow(root: &Path, what: &str) -> Option<InstallPin> {
        InstallPin::taken(root, what, Vec::new(), true)
    }

    fn taken(root: &Path, what: &str, skip: Vec<String>, shallow: bool) -> Option<InstallPin> {
        InstallPin::taken_noting(root, what, skip, shallow, None)
    }

    /// [`InstallPin::take_skipping`], with the path of every link met below the root
    /// (the root's own links on the way not included): what those lead to is loaded
    /// too, and may lie outside every root.
    pub(crate) fn take_noting_links(
        root: &Path,
        what: &str,
        skip: Vec<String>,
    ) -> Option<(InstallPin, Vec<PathBuf>)> {
        let links = Mutex::new(Vec::new());
        let pin = InstallPin::taken_noting(root, what, skip, false, Some(&links))?;
        Some((pin, links.into_inner().unwrap_or_default()))
    }

    fn taken_noting(
        root: &Path,
        what: &str,
        skip: Vec<String>,
        shallow: bool,
        links: Option<&Mutex<Vec<PathBuf>>>,
    ) -> Option<InstallPin> {
        // A root on a kernel's file system (`/proc`, `/sys`: a dependency directory linked
        // there) has no end to walk: only its own record and the names it lists are
        // pinned, and those change, so a gate over it is refused, never held.
        let shallow = shallow || on_kernel_file_system(root);
        let taken_ns = now_ns();
        let walk = Walk {
            taken_ns,
            skip: &skip,
            shallow,
            links,
        };
        let (parts, entries) = fingerprint(root, &walk, Share::EveryCore, None)?;
        Some(InstallPin {
            root: root.to_path_buf(),
            what: what.to_string(),
            parts,
            entries,
            taken_ns,
            skip,
            shallow,
        })
    }

    /// Whether this pins a dependency (a dependency directory of the live tree, a cargo
    /// dependency's or a Go module's sources) rather than a runner's installation: a
    /// cycle that declares `changes_dependencies` may change those.
    pub fn is_dependency(&self) -> bool {
        [
            super::DEPENDENCY_DIRECTORY,
            super::CARGO_DEPENDENCY,
            super::GO_MODULE,
        ]
        .contains(&self.what.as_str())
    }

    /// The first difference between this fingerprint and `root` now: the path that
    /// changed, what it was and what it is (`present`, `absent`, `changed since run
    /// start`). An entry below the root is named before the root itself, whose own
    /// record changes with any entry added or removed.
    pub fn first_change(&self, share: Share) -> Option<(PathBuf, String, String)> {
        self.first_change_with(share, None)
    }

    /// [`InstallPin::first_change`], with a kernel watch added on each directory before
    /// it is listed (and on each file with several names): when nothing changed, `watch`
    /// then tells whether anything under the root changes later without a walk
    /// ([`InstallWatch`]).
    pub fn first_change_watched(
        &self,
        share: Share,
        watch: &InstallWatch,
    ) -> Option<(PathBuf, String, String)> {
        let root = watch.root(&self.root);
        let change = self.first_change_with(share, Some(&root));
        root.done(change.is_none());
        change
    }

    /// Whether this pin, whose root the kernel resolves to `real`, fingerprints `path`
    /// (a canonical path): the root itself, or below it in an entry it does not leave
    /// out.
    pub(crate) fn covers(&self, real: &Path, path: &Path) -> bool {
        let Ok(below) = path.strip_prefix(real) else {
            return false;
        };
        match below.components().next() {
            None => true,
            Some(first) => {
                !self.shallow
                    && !self
                        .skip
                        .iter()
                        .any(|s| s.as_bytes() == first.as_os_str().as_bytes())
            }
        }
    }

    /// Whether `watch` proves that nothing under the root changed since its watched
    /// walk found it unchanged.
    pub fn held_by(&self, watch: &InstallWatch) -> bool {
        watch.holds(&self.root)
    }

    fn first_change_with(
        &self,
        share: Share,
        watch: Option<&RootWatch<'_>>,
    ) -> Option<(PathBuf, String, String)> {
        let walk = Walk {
            taken_ns: self.taken_ns,
            skip: &self.skip,
            shallow: self.shallow,
            links: None,
        };
        let Some((now, _)) = fingerprint(&self.root, &walk, share, watch) else {
            return Some((self.root.clone(), "present".into(), "absent".into()));
        };
        let word = |present: bool| if present { "present" } else { "absent" };
        let mut names: Vec<&String> = self.parts.keys().chain(now.keys()).collect();
        names.sort_by_key(|name| (name.as_str() == ".", name.as_str()));
        names
            .into_iter()
            .find(|name| self.parts.get(*name) != now.get(*name))
            .map(|name| {
                let (was, is) = (self.parts.contains_key(name), now.contains_key(name));
                let path = match name.as_str() {
                    "." => self.root.clone(),
                    _ => self.root.join(name),
                };
                let is = if was && is {
                    "changed since run start".to_string()
                } else {
                    word(is).to_string()
                };
                (path, word(was).to_string(), is)
            })
    }
}

/// How a root is fingerprinted: when, what is left out, and whether only the root
/// itself and the names it lists are ([`InstallPin::shallow`]).
struct Walk<'a> {
    taken_ns: i64,
    skip: &'a [String],
    shallow: bool,
    /// Where the walk puts the path of every link it meets, when asked.
    links: Option<&'a Mutex<Vec<PathBuf>>>,
}

/// The fingerprint of every top-level entry under `root`, and the number of entries;
/// with `watch`, each directory is watched before it is listed.
fn fingerprint(
    root: &Path,
    walk: &Walk<'_>,
    share: Share,
    watch: Option<&RootWatch<'_>>,
) -> Option<(BTreeMap<String, String>, u64)> {
    let Walk {
        taken_ns,
        skip,
        shallow,
        links,
    } = *walk;
    let meta = root.metadata().ok()?;
    let mut parts = BTreeMap::new();
    let mut own = sha2::Sha256::new();
    record(
        &mut own,
        b".",
        &Stat::of(&meta),
        || root.to_path_buf(),
        taken_ns,
    );
    // A root that is a link (a virtual environment's interpreter) is followed, and every
    // link on the way is part of its record: retargeted, it is another root.
    let mut at = root.to_path_buf();
    for _ in 0..MAX_LINKS {
        let Ok(target) = std::fs::read_link(&at) else {
            break;
        };
        own.update(target.as_os_str().as_bytes());
        own.update([0]);
        at = at
            .parent()
            .map_or_else(|| target.clone(), |dir| dir.join(&target));
    }
    let mut entries = 1u64;
    if meta.is_dir() {
        if let Some(watch) = watch {
            watch.dir(root);
        }
        let mut names: Vec<std::ffi::OsString> = match std::fs::read_dir(root) {
            Ok(dir) => dir
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .filter(|name| !skip.iter().any(|s| s.as_bytes() == name.as_bytes()))
                .collect(),
            Err(e) => {
                if let Some(w) = watch {
                    w.give_up();
                }
                own.update(e.to_string().as_bytes());
                Vec::new()
            }
        };
        if shallow {
            // The names, not what they hold: an entry planted and left is seen by its
            // name even within the root's change-time tick, one planted and removed
            // again by the root's change time.
            names.sort_unstable();
            for name in &names {
                own.update(name.as_bytes());
                own.update([0]);
            }
            parts.insert(".".to_string(), short(own));
            return Some((parts, entries));
        }
        let walked = walk_parts(root, &names, taken_ns, share, watch, links);
        for (name, (digest, count)) in names.iter().zip(walked) {
            entries += count;
            parts.insert(name.to_string_lossy().into_owned(), digest);
        }
    }
    parts.insert(".".to_string(), short(own));
    Some((parts, entries))
}

/// How many of the machine's cores a walk takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Share {
    /// Every core: nothing else is running.
    EveryCore,
    /// Every core but one (at least one): a runner runs beside the walk and keeps a
    /// core to itself, so the walk does not slow the run it guards.
    BesideARunner,
}

/// Walks each of `names` under `root` on the cores `share` gives, and returns each
/// one's digest and entry count, in the order of `names`.
fn walk_parts(
    root: &Path,
    names: &[std::ffi::OsString],
    taken_ns: i64,
    share: Share,
    watch: Option<&RootWatch<'_>>,
    links: Option<&Mutex<Vec<PathBuf>>>,
) -> Vec<(String, u64)> {
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<(String, u64)>>> = Mutex::new(vec![None; names.len()]);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let threads = match share {
        Share::EveryCore => cores,
        Share::BesideARunner => cores.saturating_sub(1).max(1),
    }
    .min(names.len().max(1));
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(name) = names.get(i) else { break };
                    let done = walk_one(&root.join(name), name.as_bytes(), taken_ns, watch, links);
                    if let Ok(mut slots) = out.lock() {
                        slots[i] = Some(done);
                    }
                }
            });
        }
    });
    out.into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|slot| slot.unwrap_or_else(|| ("unwalked".to_string(), 0)))
        .collect()
}

/// The digest and entry count of `path` and everything below it, links not followed.
/// Each directory is opened relative to the one it was listed from (never through a
/// link), and its entries are looked at relative to it, so their paths are not
/// resolved again from the root (only a racy file's bytes and a watch are reached by
/// path). A directory waiting its turn keeps its parent open only down to
/// [`HELD_DEPTH`]; deeper ones are opened by path, so a walk holds a bounded number of
/// descriptors however deep the tree.
fn walk_one(
    path: &Path,
    rel: &[u8],
    taken_ns: i64,
    watch: Option<&RootWatch<'_>>,
    links: Option<&Mutex<Vec<PathBuf>>>,
) -> (String, u64) {
    let note = |link: PathBuf| {
        if let Some(mut links) = links.and_then(|l| l.lock().ok()) {
            links.push(link);
        }
    };
    let mut hasher = sha2::Sha256::new();
    let mut count = 1u64;
    let meta = match path.symlink_metadata() {
        Ok(meta) => Stat::of(&meta),
        Err(e) => {
            if let Some(w) = watch {
                w.give_up();
            }
            hasher.update(rel);
            hasher.update(e.to_string().as_bytes());
            return (short(hasher), count);
        }
    };
    record(&mut hasher, rel, &meta, || path.to_path_buf(), taken_ns);
    if meta.is_symlink() {
        note(path.to_path_buf());
    }
    let mut dirs: Vec<Pending> = Vec::new();
    if meta.is_dir() {
        dirs.push(Pending {
            parent: None,
            path: path.to_path_buf(),
            rel: rel.to_vec(),
            depth: 0,
        });
    } else if let Some(watch) = watch {
        watch.file(path, &meta);
    }
    while let Some(pending) = dirs.pop() {
        if let Some(watch) = watch {
            watch.dir(&pending.path);
        }
        let (dir, mut names) = match pending.list() {
            Ok(listed) => listed,
            Err(e) => {
                if let Some(w) = watch {
                    w.give_up();
                }
                hasher.update(&pending.rel);
                hasher.update(e.to_string().as_bytes());
                continue;
            }
        };
        // Sorted, so the digest does not depend on the order the directory lists them.
        names.sort_unstable();
        let dir = std::rc::Rc::new(dir);
        // Each entry's path relative to the root, built in one buffer: the directory's
        // path and a slash, then the entry's name in place of the last one's.
        let mut child_rel = pending.rel.clone();
        child_rel.push(b'/');
        let base = child_rel.len();
        for name in names {
            count += 1;
            if count as usize > MAX_ENTRIES {
                if let Some(w) = watch {
                    w.give_up();
                }
                hasher.update(b"too large");
                return (short(hasher), count);
            }
            child_rel.truncate(base);
            child_rel.extend_from_slice(name.as_bytes());
            let at = || {
                pending
                    .path
                    .join(std::ffi::OsStr::from_bytes(name.as_bytes()))
            };
            match nix::sys::stat::fstatat(&*dir, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(stat) => {
                    let meta = Stat::of_raw(&stat);
                    if meta.is_symlink() {
                        note(at());
                        let reachable = fits_a_path(&at());
                        hash_link(
                            &mut hasher,
                            &child_rel,
                            &meta,
                            reachable.then_some((&dir, &name)),
                        );
                    } else {
                        record(&mut hasher, &child_rel, &meta, at, taken_ns);
                    }
                    if meta.is_dir() {
                        let path = at();
                        let depth = pending.depth + 1;
                        dirs.push(Pending {
                            parent: (depth <= HELD_DEPTH).then(|| (std::rc::Rc::clone(&dir), name)),
                            path,
                            rel: child_rel.clone(),
                            depth,
                        });
                    } else if let Some(watch) = watch {
                        watch.file(&at(), &meta);
                    }
                }
                Err(e) => {
                    if let Some(w) = watch {
                        w.give_up();
                    }
                    hasher.update(&child_rel);
                    hasher.update(std::io::Error::from(e).to_string().as_bytes());
                }
            }
        }
    }
    (short(hasher), count)
}

/// How deep below a walk's first directory a waiting directory keeps its parent
/// open: each level holds one descriptor at most, so a walk never holds more than
/// this many however deep the tree.
const HELD_DEPTH: usize = 32;

/// Whether `path` is short enough for the kernel to resolve (`PATH_MAX`, its closing
/// NUL included). What lies beyond is recorded as the error a look by path gives,
/// as every fingerprint has recorded it, though a look relative to an open directory
/// would reach it.
fn fits_a_path(path: &Path) -> bool {
    path.as_os_str().len() < usize::try_from(nix::libc::PATH_MAX).unwrap_or(4096)
}

/// A directory waiting to be listed: the directory it was listed from (open) and its
/// name there, or none for the walk's first and below [`HELD_DEPTH`]; its path, for a
/// watch and for a racy file's bytes; its path relative to the root, as recorded; and
/// how deep it is below the walk's first.
struct Pending {
    parent: Option<(std::rc::Rc<nix::dir::Dir>, std::ffi::CString)>,
    path: PathBuf,
    rel: Vec<u8>,
    depth: usize,
}

impl Pending {
    /// Opens the directory (a link in its place is refused, not followed) and gives it
    /// with the names it lists, `.` and `..` and entries that cannot be read left out.
    fn list(&self) -> std::io::Result<(nix::dir::Dir, Vec<std::ffi::CString>)> {
        use nix::fcntl::OFlag;
        if !fits_a_path(&self.path) {
            return Err(std::io::Error::from_raw_os_error(nix::libc::ENAMETOOLONG));
        }
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mode = nix::sys::stat::Mode::empty();
        let mut dir = match &self.parent {
            Some((parent, name)) => nix::dir::Dir::openat(&**parent, name.as_c_str(), flags, mode),
            None => nix::dir::Dir::open(&self.path, flags, mode),
        }?;
        let names = dir
            .iter()
            .filter_map(Result::ok)
            .map(|entry| entry.file_name().to_owned())
            .filter(|name| !matches!(name.as_bytes(), b"." | b".."))
            .collect();
        Ok((dir, names))
    }
}

/// What `stat` says of one entry, as a fingerprint records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stat {
    /// Type and permission bits.
    pub mode: u32,
    /// How many names the entry has.
    pub nlink: u64,
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, seconds and nanoseconds.
    pub mtime: (i64, i64),
    /// Change time, seconds and nanoseconds.
    pub ctime: (i64, i64),
}

impl Stat {
    /// From the standard library's view of it.
    pub(super) fn of(meta: &std::fs::Metadata) -> Stat {
        Stat {
            mode: meta.mode(),
            nlink: meta.nlink(),
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// From the kernel's record.
    #[allow(clippy::useless_conversion)] // the field types differ between platforms
    fn of_raw(stat: &nix::sys::stat::FileStat) -> Stat {
        Stat {
            mode: u32::from(stat.st_mode),
            nlink: u64::from(stat.st_nlink),
            dev: u64::from(stat.st_dev),
            ino: u64::from(stat.st_ino),
            size: u64::try_from(stat.st_size).unwrap_or(0),
            mtime: (i64::from(stat.st_mtime), i64::from(stat.st_mtime_nsec)),
            ctime: (i64::from(stat.st_ctime), i64::from(stat.st_ctime_nsec)),
        }
    }

    fn kind(&self) -> u32 {
        self.mode & nix::libc::S_IFMT
    }

    /// A directory.
    pub(super) fn is_dir(&self) -> bool {
        self.kind() == nix::libc::S_IFDIR
    }

    /// A symbolic link.
    pub(super) fn is_symlink(&self) -> bool {
        self.kind() == nix::libc::S_IFLNK
    }

    fn is_file(&self) -> bool {
        self.kind() == nix::libc::S_IFREG
    }
}

/// Adds one entry's `stat` record to `hasher`: path, type and mode, inode, size,
/// modification and change times, a link's target, and a racy file's bytes (`at` gives
/// the entry's path, asked for only then).
fn record(
    hasher: &mut sha2::Sha256,
    rel: &[u8],
    meta: &Stat,
    at: impl FnOnce() -> PathBuf,
    taken_ns: i64,
) {
    stat_record(hasher, rel, meta);
    let ctime_ns = meta
        .ctime
        .0
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.ctime.1);
    if meta.is_symlink() {
        if let Ok(target) = std::fs::read_link(at()) {
            hasher.update(target.as_os_str().as_bytes());
        }
    } else if meta.is_file() && ctime_ns >= taken_ns.saturating_sub(RACY_NS) {
        hash_bytes(hasher, &at());
    }
}

/// [`record`] of a link listed in `dir` as `name`, its target read there (none when
/// `at` is `None`: its path is too long to read it by).
fn hash_link(
    hasher: &mut sha2::Sha256,
    rel: &[u8],
    meta: &Stat,
    at: Option<(&nix::dir::Dir, &std::ffi::CString)>,
) {
    stat_record(hasher, rel, meta);
    if let Some((dir, name)) = at
        && let Ok(target) = nix::fcntl::readlinkat(dir, name.as_c_str())
    {
        hasher.update(target.as_bytes());
    }
}

/// The part of an entry's record every entry has: path, then type and mode, device,
/// inode, size, modification and change times.
fn stat_record(hasher: &mut sha2::Sha256, rel: &[u8], meta: &Stat) {
    hasher.update(rel);
    // The NUL and the eight values in one update: a walk makes one record per entry,
    // tens of thousands of them, and each update has its own cost.
    let mut record = [0u8; 1 + 8 * 8];
    for (slot, value) in record[1..].chunks_exact_mut(8).zip([
        u64::from(meta.mode),
        meta.dev,
        meta.ino,
        meta.size,
        u64::from_ne_bytes(meta.mtime.0.to_ne_bytes()),
        u64::from_ne_bytes(meta.mtime.1.to_ne_bytes()),
        u64::from_ne_bytes(meta.ctime.0.to_ne_bytes()),
        u64::from_ne_bytes(meta.ctime.1.to_ne_bytes()),
    ]) {
        slot.copy_from_slice(&value.to_le_bytes());
    }
    hasher.update(record);
}

/// Adds the bytes of the regular file at `at` to `hasher`: opened without following a
/// link and without blocking, so a file turned into a pipe is never waited on.
fn hash_bytes(hasher: &mut sha2::Sha256, at: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let opened = std::fs::File::options()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(at);
    match opened {
        Ok(mut file) if file.metadata().is_ok_and(|m| m.is_file()) => {
            if let Err(e) = std::io::copy(&mut file, hasher) {
                hasher.update(e.to_string().as_bytes());
            }
        }
        Ok(_) => hasher.update(b"not a regular file"),
        Err(e) => hasher.update(e.to_string().as_bytes()),
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn short(hasher: sha2::Sha256) -> String {
    hex::encode(&hasher.finalize()[..8])
}

/// Whether `path` leads to a file system the kernel makes up as it is read (proc, sysfs,
/// cgroups, debugfs, tracefs, securityfs, devpts, bpf).
pub(crate) fn on_kernel_file_system(path: &Path) -> bool {
    use nix::sys::statfs as fs;
    let made_up = [
        fs::PROC_SUPER_MAGIC,
        fs::SYSFS_MAGIC,
        fs::CGROUP_SUPER_MAGIC,
        fs::CGROUP2_SUPER_MAGIC,
        fs::DEBUGFS_MAGIC,
        fs::TRACEFS_MAGIC,
        fs::SECURITYFS_MAGIC,
        fs::DEVPTS_SUPER_MAGIC,
        fs::BPF_FS_MAGIC,
    ];
    fs::statfs(path).is_ok_and(|found| made_up.contains(&found.filesystem_type()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("dir");
        for (path, body) in [
            ("site-packages/_pytest/main.py", "def main(): pass\n"),
            ("site-packages/_pytest/__init__.py", ""),
            ("site-packages/pluggy/__init__.py", "x = 1\n"),
            ("site-packages/six.py", "six = 6\n"),
        ] {
            let file = dir.path().join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, body).expect("write");
        }
        dir
    }

    /// The bytes of a record are those every pin taken at a run start holds: a change
    /// in how they are fed to the hash would refuse every run begun before it.
    #[test]
    fn a_record_hashes_the_bytes_every_pin_has_recorded() {
        let meta = Stat {
            mode: 0o100_644,
            nlink: 1,
            dev: 2049,
            ino: 1_234_567,
            size: 42,
            mtime: (1_700_000_000, 5),
            ctime: (1_700_000_001, 999_999_999),
        };
        let mut hasher = sha2::Sha256::new();
        stat_record(&mut hasher, b"pkg/mod.py", &meta);
        assert_eq!(short(hasher), "d0f5517b07d3a047");
    }

    #[test]
    fn an_untouched_installation_is_unchanged() {
        let dir = tree();
        let pin = InstallPin::take(&dir.path().join("site-packages"), "site").expect("pin");
        assert_eq!(pin.entries, 7, "{pin:?}");
        assert_eq!(pin.first_change(Share::EveryCore), None);
    }

    #[test]
    fn an_edit_with_its_size_and_times_put_back_is_seen_and_named() {
        let dir = tree();
        let root = dir.path().join("site-packages");
        let pin = InstallPin::take(&root, "site").expect("pin");
        let file = root.join("_pytest/main.py");
        let times = std::fs::metadata(&file).expect("meta");
        // Same length, same modification time: only the change time tells.
        std::fs::write(&file, "def main(): PASS\n").expect("edit");
        let restored = std::fs::File::options()
            .write(true)
            .open(&file)
            .expect("open");
        restored
            .set_modified(times.modified().expect("mtime"))
            .expect("set mtime");
        let (path, was, now) = pin
            .first_change(Share::EveryCore)
            .expect("the edit is seen");
        assert_eq!(path, root.join("_pytest"));
        assert_eq!(
            (was.as_str(), now.as_str()),
            ("present", "changed since run start")
        );
    }

    #[test]
    fn a_file_planted_and_a_package_removed_are_named() {
        let dir = tree();
        let root = dir.path().join("site-packages");
        let pin = InstallPin::take(&root, "site").expect("pin");
        std::fs::write(root.join("evil.pth"), "import os\n").expect("plant");
        let (path, was, now) = pin.first_change(Share::EveryCore).expect("planted");
        assert_eq!(path, root.join("evil.pth"));
        assert_eq!((was.as_str(), now.as_str()), ("absent", "present"));
        std::fs::remove_file(root.join("evil.pth")).expect("rm");
        let (path, _, now) = pin
            .first_change(Share::EveryCore)
            .expect("put back is still a change");
        assert_eq!(
            (path.as_path(), now.as_str()),
            (root.as_path(), "changed since run start")
        );
        let gone = InstallPin::take(&root, "site").expect("pin");
        std::fs::remove_dir_all(root.join("pluggy")).expect("rm");
        let (path, was, now) = gone.first_change(Share::EveryCore).expect("removed");
        assert_eq!(path, root.join("pluggy"));
        assert_eq!((was.as_str(), now.as_str()), ("present", "absent"));
    }

    #[test]
    fn a_link_is_recorded_by_its_target_and_never_followed() {
        let dir = tree();
        let root = dir.path().join("site-packages");
        std::os::unix::fs::symlink("/nonexistent/elsewhere", root.join("linked")).expect("ln");
        let pin = InstallPin::take(&root, "site").expect("pin");
        assert_eq!(pin.first_change(Share::EveryCore), None);
        std::fs::remove_file(root.join("linked")).expect("rm");
        std::os::unix::fs::symlink("/nonexistent/other", root.join("linked")).expect("ln");
        let (path, _, _) = pin.first_change(Share::EveryCore).expect("retargeted");
        assert_eq!(path, root.join("linked"));
    }

    #[test]
    fn a_root_that_is_a_link_is_another_root_once_retargeted() {
        let dir = tree();
        let (a, b) = (dir.path().join("python-a"), dir.path().join("python-b"));
        // The same file under two names: only the link's own target tells them apart.
        std::fs::write(&a, "same bytes").expect("a");
        std::fs::hard_link(&a, &b).expect("b");
        let link = dir.path().join("python3");
        std::os::unix::fs::symlink(&a, &link).expect("ln");
        let pin = InstallPin::take(&link, "interpreter").expect("pin");
        assert_eq!(pin.first_change(Share::EveryCore), None);
        std::fs::remove_file(&link).expect("rm");
        std::os::unix::fs::symlink(&b, &link).expect("ln");
        let (path, _, now) = pin.first_change(Share::EveryCore).expect("retargeted");
        assert_eq!((path, now.as_str()), (link, "changed since run start"));
    }

    /// Set in the copy of this test binary that walks with few descriptors.
    const DEEP_ROOT: &str = "TDD_TEST_DEEP_ROOT";

    #[test]
    fn a_tree_deeper_than_the_descriptors_left_is_walked_alike() {
        if let Some(root) = std::env::var_os(DEEP_ROOT) {
            // The copy: as few descriptors as a busy process may have left.
            use nix::sys::resource::Resource;
            nix::sys::resource::setrlimit(Resource::RLIMIT_NOFILE, 64, 64).expect("limit");
            let pin = InstallPin::take(Path::new(&root), "deep").expect("pin");
            let parts = serde_json::to_string(&pin.parts).expect("json");
            std::io::Write::write_all(
                &mut std::io::stdout(),
                format!("PARTS {parts}\n").as_bytes(),
            )
            .expect("written");
            return;
        }
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().join("site-packages");
        // 150 levels, each with a directory still to walk beside the one walked first,
        // so every level's directory is waited on while the walk goes deeper.
        let mut deep = root.join("pkg");
        for _ in 0..150 {
            std::fs::create_dir_all(deep.join("a")).expect("mkdir");
            deep.push("b");
        }
        std::fs::create_dir_all(&deep).expect("mkdir");
        std::fs::write(deep.join("m.py"), "x = 1\n").expect("write");
        let pin = InstallPin::take(&root, "deep").expect("pin");
        assert_eq!(pin.entries, 1 + 1 + 2 * 150 + 1, "{pin:?}");
        let name =
            "hermetic::install::tests::a_tree_deeper_than_the_descriptors_left_is_walked_alike";
        let out = std::process::Command::new(std::env::current_exe().expect("exe"))
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env(DEEP_ROOT, &root)
            .output()
            .expect("the copy runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let parts = stdout
            .lines()
            .find_map(|line| line.split_once("PARTS ").map(|(_, parts)| parts))
            .unwrap_or_else(|| {
                panic!(
                    "no parts: {stdout} {}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        let expected = serde_json::to_string(&pin.parts).expect("json");
        assert_eq!(
            parts, expected,
            "a walk short of descriptors saw another tree"
        );
    }

    #[test]
    fn a_root_that_went_is_absent() {
        let dir = tree();
        let root = dir.path().join("site-packages");
        let pin = InstallPin::take(&root, "site").expect("pin");
        std::fs::remove_dir_all(&root).expect("rm");
        let (path, _, now) = pin.first_change(Share::EveryCore).expect("gone");
        assert_eq!((path, now.as_str()), (root, "absent"));
    }

    #[test]
    fn a_root_on_proc_is_pinned_by_its_names_alone_and_never_walked() {
        let pin = InstallPin::take_skipping(Path::new("/proc"), "dependency directory", Vec::new())
            .expect("pinned");
        assert!(pin.shallow, "/proc is never walked");
    }
}
