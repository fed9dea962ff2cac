//! What a test step wrote into the build directory its build step filled.
//!
//! A build directory (cargo's target directory) is kept from one run to the next so
//! builds stay warm, and a later build links what it finds there when the sources
//! that made it did not change. The tests of one run are the agent's code: had they
//! replaced a compiled artifact, a later candidate would be built with it although
//! its own commit holds no such code. So the build and the tests run as two steps,
//! and a [`Watch`] started between them finds afterwards whatever the tests created,
//! changed or removed there, by change time, which no process can set back: a write
//! found empties the whole directory (the next build starts cold), and the run says
//! so. What the build step itself wrote is its commit's, and stays.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;

/// Top-level entries a test step may write without consequence: the scratch
/// directory cargo gives integration tests (`CARGO_TARGET_TMPDIR`), and what tools
/// that build in their own directory of it keep there (trybuild's `tests/`, nextest's
/// store); no build reads them.
const WRITABLE: &[&str] = &["tmp", "tests", "nextest"];

/// Top-level caches any cargo step may rewrite and cargo itself checks: removed alone
/// when a test step changed them, never the reason to empty everything.
const CACHES: &[&str] = &[".rustc_info.json"];

/// The mark a watch writes in the build directory, its clock.
const MARK: &str = ".tdd-watch";

/// How long a watch waits for the mark's time to move (a second on a file system that
/// keeps whole seconds, a clock tick elsewhere).
const MARK_BOUND: std::time::Duration = std::time::Duration::from_secs(3);

/// More entries than this are not walked: the directory is emptied as if written.
const MAX_ENTRIES: usize = 2_000_000;

/// A watch on a build directory from the end of a build step: every write into it
/// after [`Watch::start`] has a change time after `since`, and none before.
#[derive(Debug)]
pub(crate) struct Watch {
    root: PathBuf,
    /// The root directory's identity (device, inode): one put in its place is another.
    identity: (u64, u64),
    since: i64,
}

/// What a test step did to the build directory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Written {
    /// Nothing the next build would read.
    Nothing,
    /// A cache cargo checks was rewritten, and removed.
    Cache,
    /// `path` was written: the directory was emptied (or could not be, `emptied`).
    Artifact {
        /// The first entry found written, relative to the build directory.
        path: PathBuf,
        /// Whether the directory was emptied.
        emptied: bool,
    },
}

impl Written {
    /// What happened, in words, for the observation's diagnostics; `None` when
    /// nothing the next build reads was written.
    pub(crate) fn words(&self) -> Option<String> {
        match self {
            Written::Nothing | Written::Cache => None,
            Written::Artifact {
                path,
                emptied: true,
            } => Some(format!(
                "the tests wrote {} in the build directory after it was built: it was emptied, so no later build uses what they wrote",
                path.display()
            )),
            Written::Artifact {
                path,
                emptied: false,
            } => Some(format!(
                "the tests wrote {} in the build directory after it was built, and it could not be emptied",
                path.display()
            )),
        }
    }
}

impl Watch {
    /// Starts watching `root` once everything before this call has written it. The file
    /// system is the clock: a mark written in `root` takes a change time no earlier than
    /// any handed out before it (file times only move forward), and the mark is written
    /// again until its time moves past that first one (at once where the kernel hands
    /// out fine-grained times to a file whose time was read, within a clock tick, or a
    /// second on a file system that keeps whole seconds), so every later write has a
    /// later time. `None` when `root` is not a directory (nothing to watch); a mark
    /// that cannot be written, or whose time does not move within [`MARK_BOUND`],
    /// leaves a watch that finds everything written.
    pub(crate) fn start(root: &Path) -> Option<Watch> {
        let meta = std::fs::symlink_metadata(root).ok()?;
        if !meta.is_dir() {
            return None;
        }
        Some(Watch {
            root: root.to_path_buf(),
            identity: (meta.dev(), meta.ino()),
            since: mark(&root.join(MARK)).unwrap_or(i64::MIN),
        })
    }

    /// What was written under the root since the watch started (links not followed),
    /// and the cleanup made for it: a rewritten cache is removed, any other write
    /// empties the directory.
    pub(crate) fn settle(&self) -> Written {
        if let Some(path) = self.first_written() {
            let emptied = discard(&self.root);
            return Written::Artifact { path, emptied };
        }
        let mut written = Written::Nothing;
        for name in CACHES {
            let cache = self.root.join(name);
            if std::fs::symlink_metadata(&cache).is_ok_and(|m| self.changed(&m)) {
                let _ = std::fs::remove_file(&cache);
                written = Written::Cache;
            }
        }
        written
    }

    /// Whether `meta` was changed since the watch started.
    fn changed(&self, meta: &std::fs::Metadata) -> bool {
        changed_ns(meta) > self.since
    }

    /// The first file under the root changed since the watch started (else a changed
    /// directory), leaving out
    /// the top-level ones a test may write ([`WRITABLE`], [`CACHES`]). The root's own
    /// time moves with any of those, so the root is judged by its identity.
    fn first_written(&self) -> Option<PathBuf> {
        match std::fs::symlink_metadata(&self.root) {
            Ok(meta) if meta.is_dir() && (meta.dev(), meta.ino()) == self.identity => {}
            _ => return Some(PathBuf::from(".")),
        }
        let mut dirs = vec![PathBuf::new()];
        let mut seen = 0usize;
        // A directory's time moves with any entry added or removed in it: the entry is
        // what is named, the directory only when nothing under it was written (an entry
        // removed).
        let mut changed_dir = None;
        while let Some(rel) = dirs.pop() {
            let Ok(listing) = std::fs::read_dir(self.root.join(&rel)) else {
                return Some(rel);
            };
            for entry in listing {
                let Ok(entry) = entry else {
                    return Some(rel);
                };
                let name = entry.file_name();
                let top = rel.as_os_str().is_empty();
                if top
                    && WRITABLE
                        .iter()
                        .chain(CACHES)
                        .chain([&MARK])
                        .any(|w| name == *w)
                {
                    continue;
                }
                seen += 1;
                let child = rel.join(&name);
                if seen > MAX_ENTRIES {
                    return Some(child);
                }
                match entry.metadata() {
                    Ok(meta) if meta.is_dir() => {
                        if self.changed(&meta) && changed_dir.is_none() {
                            changed_dir = Some(child.clone());
                        }
                        dirs.push(child);
                    }
                    Ok(meta) if self.changed(&meta) => return Some(child),
                    Ok(_) => {}
                    Err(_) => return Some(child),
                }
            }
        }
        changed_dir
    }
}

/// Puts `root` aside and an empty directory in its place, then removes what was put
/// aside (links not followed, directories a test made unreadable opened up again).
/// Whether `root` is now an empty directory.
fn discard(root: &Path) -> bool {
    let Some(name) = root.file_name() else {
        return false;
    };
    let mut aside_name = name.to_os_string();
    aside_name.push(format!(".discarded-{}", std::process::id()));
    let aside = root.with_file_name(aside_name);
    if std::fs::rename(root, &aside).is_err() {
        return false;
    }
    let emptied = std::fs::create_dir(root).is_ok();
    if std::fs::remove_dir_all(&aside).is_err() {
        open_up(&aside);
        let _ = std::fs::remove_dir_all(&aside);
    }
    emptied
}

/// Gives the owner every right on each directory under `dir` (not through links), so a
/// tree a test locked can be removed.
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        let Ok(listing) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(entry.path());
            }
        }
    }
}

/// The change time of `meta`, in ns.
fn changed_ns(meta: &std::fs::Metadata) -> i64 {
    meta.ctime()
        .saturating_mul(1_000_000_000)
        .saturating_add(meta.ctime_nsec())
}

/// Writes the mark at `path` (never through a link) until its change time moves past
/// the first one it took; gives that first time, which no write before the call
/// exceeds and every write after it does. `None` when it cannot be written or its
/// time does not move within [`MARK_BOUND`].
fn mark(path: &Path) -> Option<i64> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let write = || -> Option<i64> {
        let mut file = std::fs::File::options()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
            .open(path)
            .ok()?;
        file.write_all(b"tdd").ok()?;
        // Read back through the handle: the time written, and (where the kernel hands
        // out fine-grained times) a time that was read, so the next write moves it.
        file.metadata().ok().map(|meta| changed_ns(&meta))
    };
    let first = write()?;
    let deadline = std::time::Instant::now() + MARK_BOUND;
    loop {
        if write()? > first {
            return Some(first);
        }
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let deps = dir.path().join("debug/deps");
        std::fs::create_dir_all(&deps).expect("mkdir");
        std::fs::write(deps.join("libdep.rlib"), b"honest").expect("write");
        std::fs::write(dir.path().join(".rustc_info.json"), b"{}").expect("write");
        dir
    }

    #[test]
    fn a_test_step_that_writes_nothing_leaves_the_build_as_it_was() {
        let dir = built();
        let watch = Watch::start(dir.path()).expect("a directory");
        std::fs::create_dir_all(dir.path().join("tmp/it")).expect("mkdir");
        std::fs::write(dir.path().join("tmp/it/scratch"), b"x").expect("write");
        assert_eq!(watch.settle(), Written::Nothing);
        assert!(dir.path().join("debug/deps/libdep.rlib").exists());
    }

    #[test]
    fn an_artifact_replaced_by_a_test_empties_the_build_directory() {
        let dir = built();
        let rlib = dir.path().join("debug/deps/libdep.rlib");
        let before = std::fs::metadata(&rlib).expect("stat");
        let watch = Watch::start(dir.path()).expect("a directory");
        // Same length, modification time put back: the change time still moves.
        std::fs::write(&rlib, b"poison").expect("write");
        std::fs::File::options()
            .write(true)
            .open(&rlib)
            .and_then(|f| f.set_modified(before.modified()?))
            .expect("set the modification time back");
        assert_eq!(
            watch.settle(),
            Written::Artifact {
                path: PathBuf::from("debug/deps/libdep.rlib"),
                emptied: true
            }
        );
        assert!(!rlib.exists());
        assert!(dir.path().is_dir(), "the directory is kept, empty");
    }

    #[test]
    fn a_file_planted_or_removed_by_a_test_is_found() {
        for plant in [true, false] {
            let dir = built();
            let watch = Watch::start(dir.path()).expect("a directory");
            let deps = dir.path().join("debug/deps");
            if plant {
                std::fs::write(deps.join("libother.rlib"), b"x").expect("write");
            } else {
                std::fs::remove_file(deps.join("libdep.rlib")).expect("remove");
            }
            assert!(
                matches!(watch.settle(), Written::Artifact { .. }),
                "{plant}"
            );
        }
    }

    #[test]
    fn a_tree_a_test_locked_is_emptied_all_the_same() {
        use std::os::unix::fs::PermissionsExt;
        let dir = built();
        let root = dir.path().join("target");
        std::fs::create_dir_all(root.join("debug/locked")).expect("mkdir");
        std::fs::write(root.join("debug/locked/f"), b"x").expect("write");
        let watch = Watch::start(&root).expect("a directory");
        std::fs::write(root.join("debug/planted"), b"x").expect("write");
        std::fs::set_permissions(
            root.join("debug/locked"),
            std::fs::Permissions::from_mode(0o000),
        )
        .expect("chmod");
        assert!(matches!(
            watch.settle(),
            Written::Artifact { emptied: true, .. }
        ));
        assert_eq!(std::fs::read_dir(&root).expect("list").count(), 0);
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .expect("list")
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("discarded"))
            .collect();
        assert!(left.is_empty(), "what was put aside is removed: {left:?}");
    }

    #[test]
    fn a_rewritten_rustc_cache_is_removed_alone() {
        let dir = built();
        let watch = Watch::start(dir.path()).expect("a directory");
        std::fs::write(dir.path().join(".rustc_info.json"), b"{\"x\":1}").expect("write");
        assert_eq!(watch.settle(), Written::Cache);
        assert!(!dir.path().join(".rustc_info.json").exists());
        assert!(dir.path().join("debug/deps/libdep.rlib").exists());
    }

    #[test]
    fn a_build_directory_replaced_by_a_link_is_emptied_without_following_it() {
        let dir = built();
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::write(outside.path().join("keep"), b"mine").expect("write");
        let root = dir.path().join("target");
        std::fs::create_dir(&root).expect("mkdir");
        let watch = Watch::start(&root).expect("a directory");
        std::fs::remove_dir_all(&root).expect("rmdir");
        std::os::unix::fs::symlink(outside.path(), &root).expect("link");
        assert!(matches!(watch.settle(), Written::Artifact { .. }));
        assert!(
            outside.path().join("keep").exists(),
            "nothing outside removed"
        );
        assert!(root.is_dir() && !root.is_symlink());
    }
}
