//! A watch on what the runners load from outside the commit, kept while a gate's
//! deciding runs run, so that the check before the commit need not walk every entry
//! again.
//!
//! The walk beside the runs adds a kernel watch (inotify) on each directory before it
//! lists it, and on each file with more than one name (a write through another name is
//! reported to that name's directory, not to this one). A change made before a watch
//! was added leaves a change time the same walk sees; one made after it is queued by
//! the kernel in the writing call itself. So once the runs have ended, an empty queue
//! and each root still the directory that was watched prove what the walk again would
//! have: nothing under the roots changed since run start. Anything else (an event, a
//! queue overflow, a watch the kernel refused, a root that is a link or a file) sends
//! the check back to the walk, which names what changed.
//!
//! The directories above each root are watched for being moved or removed themselves
//! (and the links on the way are recorded) from the moment a gate begins
//! ([`super::PinnedEnv::watch_above_installs`]): a root's path that led to another
//! directory while a run ran, even one put back since, leaves nothing a walk of the
//! root could see, so it refuses ([`InstallWatch::moved`]).
//!
//! What the queue cannot see: a write through a shared memory map (by a process that
//! opened the file for writing, which no confined runner or leaf can), or one made by
//! another machine on a network file system. docs/security.md names it.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicI64;
use std::sync::atomic::Ordering;

use nix::sys::inotify::AddWatchFlags;
use nix::sys::inotify::InitFlags;
use nix::sys::inotify::Inotify;
use nix::sys::inotify::WatchDescriptor;

use super::install::Stat;

/// Every event that leaves a change behind: content, metadata (times, mode, link count),
/// entries created, removed or moved in or out, and the watched object itself removed
/// or moved. Opening, reading and closing are not watched.
fn changes() -> AddWatchFlags {
    AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_DONT_FOLLOW
}

/// Kernel watches on the pinned roots, added by the walk that checks them
/// ([`super::PinnedEnv::verify_installs_watching`]) and asked once the runs are over
/// ([`super::PinnedEnv::verify_after_runs`]). Dropping it removes every watch, on a
/// thread of its own (see its `Drop`).
#[derive(Debug)]
pub struct InstallWatch {
    inotify: Option<Inotify>,
    /// Set for good once a change was queued (or the queue could not be read): the
    /// queue is read only once per event.
    changed: AtomicBool,
    /// How many more watches this may add: a quarter of the user's limit, so that a
    /// gate never starves the user's own file watchers (an editor's, a dev server's).
    budget: AtomicI64,
    /// Whether any watch was added: only then is there anything for the kernel to let go.
    watching: AtomicBool,
    /// Roots whose every directory (and every file with several names) is watched,
    /// with the device and inode their path named when their watch was added.
    whole: Mutex<BTreeMap<PathBuf, (u64, u64)>>,
    /// The directories above each root, watched for being moved or removed themselves,
    /// by their watch, each with the root it leads to.
    above: Mutex<BTreeMap<WatchDescriptor, (PathBuf, PathBuf)>>,
    /// The links on the way to each root, with what `lstat` said of them when its walk
    /// began, and the root.
    links: Mutex<Vec<(PathBuf, LinkRecord, PathBuf)>>,
    /// The first directory above a root seen moved, removed or replaced, with the root.
    moved: Mutex<Option<(PathBuf, PathBuf)>>,
    /// The roots whose way is watched already, each with whether every watch was added.
    above_done: Mutex<BTreeMap<PathBuf, bool>>,
}

impl Drop for InstallWatch {
    /// Removes every watch. The kernel lets go of many watches slowly (it waits out a
    /// grace period first: about 20 ms for the few thousand directories of an
    /// interpreter's library), and nothing reads the queue once this is dropped, so
    /// they are removed on a thread of their own and the gate goes on at once; where
    /// no thread can be made, here.
    fn drop(&mut self) {
        let Some(inotify) = self.inotify.take() else {
            return;
        };
        if self.watching.load(Ordering::Relaxed) {
            // A spawn that fails drops the closure, and the watches with it, here.
            let _ = std::thread::Builder::new()
                .name("watch release".to_string())
                .spawn(move || drop(inotify));
        }
    }
}

impl Default for InstallWatch {
    fn default() -> InstallWatch {
        InstallWatch::new()
    }
}

impl InstallWatch {
    /// A watch with nothing watched yet. Where the kernel gives no inotify instance
    /// (none left for this user), nothing will be, and every check walks.
    pub fn new() -> InstallWatch {
        InstallWatch {
            inotify: Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok(),
            changed: AtomicBool::new(false),
            budget: AtomicI64::new(watch_budget()),
            watching: AtomicBool::new(false),
            whole: Mutex::new(BTreeMap::new()),
            above: Mutex::new(BTreeMap::new()),
            links: Mutex::new(Vec::new()),
            moved: Mutex::new(None),
            above_done: Mutex::new(BTreeMap::new()),
        }
    }

    /// The same, allowed `budget` watches in all.
    #[cfg(test)]
    fn with_budget(budget: i64) -> InstallWatch {
        let watch = InstallWatch::new();
        watch.budget.store(budget, Ordering::Relaxed);
        watch
    }

    /// Whether nothing under `root` can have changed since its walk, as far as the
    /// kernel's queue tells: the root was watched whole, its path still names that
    /// directory, and no change of any watched root is queued.
    pub(super) fn holds(&self, root: &Path) -> bool {
        let watched = self
            .whole
            .lock()
            .ok()
            .and_then(|whole| whole.get(root).copied());
        let Some(identity) = watched else {
            return false;
        };
        let still = std::fs::symlink_metadata(root)
            .is_ok_and(|meta| meta.is_dir() && (meta.dev(), meta.ino()) == identity);
        still && self.quiet()
    }

    /// Whether no change was ever queued: nothing to read, and the queue readable (an
    /// error reading it counts as a change). A directory above a root seen moved or
    /// removed is kept for [`InstallWatch::moved`].
    fn quiet(&self) -> bool {
        let Some(inotify) = self.inotify.as_ref() else {
            self.changed.store(true, Ordering::Release);
            return false;
        };
        loop {
            match inotify.read_events() {
                Err(nix::errno::Errno::EAGAIN) => break,
                Ok(events) if !events.is_empty() => {
                    self.changed.store(true, Ordering::Release);
                    self.note_moved(&events);
                }
                _ => {
                    self.changed.store(true, Ordering::Release);
                    break;
                }
            }
        }
        !self.changed.load(Ordering::Acquire)
    }

    /// Keeps the first directory above a root that `events` say was moved or removed
    /// itself.
    fn note_moved(&self, events: &[nix::sys::inotify::InotifyEvent]) {
        let gone = AddWatchFlags::IN_MOVE_SELF | AddWatchFlags::IN_DELETE_SELF;
        let Ok(above) = self.above.lock() else {
            return;
        };
        let first = events
            .iter()
            .filter(|event| event.mask.intersects(gone))
            .find_map(|event| above.get(&event.wd).cloned());
        if let (Some(first), Ok(mut moved)) = (first, self.moved.lock()) {
            moved.get_or_insert(first);
        }
    }

    /// The first directory above a pinned root (with the root) that was moved, removed
    /// or, a link, replaced since that root's walk began: even put back since, the
    /// root's path led elsewhere meanwhile, which no walk of the root itself can see.
    pub(super) fn moved(&self) -> Option<(PathBuf, PathBuf)> {
        let _ = self.quiet();
        if let Some(moved) = self.moved.lock().ok().and_then(|moved| moved.clone()) {
            return Some(moved);
        }
        let links = self.links.lock().ok()?;
        links
            .iter()
            .find(|(link, was, _)| link_record(link) != Some(*was))
            .map(|(link, _, root)| (link.clone(), root.clone()))
    }

    /// Watches every directory above `root` for being moved or removed itself, and
    /// records every link on the way, once for each root (the first watch and record
    /// see the most): false when a watch could not be added.
    pub(super) fn watch_above(&self, root: &Path) -> bool {
        if let Some(done) = self
            .above_done
            .lock()
            .ok()
            .and_then(|done| done.get(root).copied())
        {
            return done;
        }
        let added = self.add_above(root);
        if let Ok(mut done) = self.above_done.lock() {
            done.insert(root.to_path_buf(), added);
        }
        added
    }

    /// [`InstallWatch::watch_above`] done now.
    fn add_above(&self, root: &Path) -> bool {
        let Some(inotify) = self.inotify.as_ref() else {
            return false;
        };
        // Added to what a walk watches on the same directory, never in its place.
        let mask = AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::from_bits_retain(nix::libc::IN_MASK_ADD);
        for dir in root.ancestors().skip(1) {
            if let Some(record) = link_record(dir)
                && std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink())
                && let Ok(mut links) = self.links.lock()
            {
                links.push((dir.to_path_buf(), record, root.to_path_buf()));
            }
            // Not counted against the budget: a root has as many as its path has
            // components, and roots share most of them (the kernel keeps one watch
            // per directory).
            let Ok(wd) = inotify.add_watch(dir, mask) else {
                return false;
            };
            self.watching.store(true, Ordering::Relaxed);
            if let Ok(mut above) = self.above.lock() {
                above
                    .entry(wd)
                    .or_insert_with(|| (dir.to_path_buf(), root.to_path_buf()));
            }
        }
        true
    }

    /// The walk of one root: call [`RootWatch::dir`] before listing each directory and
    /// [`RootWatch::file`] for each entry that is not one, then [`RootWatch::done`].
    pub(super) fn root(&self, root: &Path) -> RootWatch<'_> {
        let above = self.watch_above(root);
        let identity = std::fs::symlink_metadata(root)
            .ok()
            .filter(std::fs::Metadata::is_dir)
            .filter(|_| above)
            .map(|meta| (meta.dev(), meta.ino()));
        RootWatch {
            watch: self,
            root: root.to_path_buf(),
            // A root that is a link, a file or absent is walked again, never trusted to
            // a watch: its link could be retargeted in a directory no watch covers.
            identity,
            broken: AtomicBool::new(identity.is_none() || self.inotify.is_none()),
        }
    }
}

/// What `lstat` says of an entry: device, inode and change time (seconds, nanoseconds).
type LinkRecord = (u64, u64, i64, i64);

/// What `lstat` says of `path`; `None` when nothing is there.
fn link_record(path: &Path) -> Option<LinkRecord> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|meta| (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec()))
}

/// A quarter of the watches the kernel lets this user hold
/// (`/proc/sys/fs/inotify/max_user_watches`; 8,192 where it cannot be read, the
/// kernel's old default).
fn watch_budget() -> i64 {
    let limit = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .ok()
        .and_then(|text| text.trim().parse::<i64>().ok())
        .unwrap_or(8_192);
    limit / 4
}

/// The watches added by the walk of one root.
#[derive(Debug)]
pub(super) struct RootWatch<'a> {
    watch: &'a InstallWatch,
    root: PathBuf,
    identity: Option<(u64, u64)>,
    broken: AtomicBool,
}

impl RootWatch<'_> {
    /// Watches the directory at `path`; called before it is listed.
    pub(super) fn dir(&self, path: &Path) {
        self.add(path, AddWatchFlags::IN_ONLYDIR);
    }

    /// Watches the file `meta` (what the walk recorded) describes at `path` when it has
    /// more than one name. A write through another name between the look at the file
    /// and its watch is seen by the change time it left: the root is then walked again.
    pub(super) fn file(&self, path: &Path, meta: &Stat) {
        if meta.nlink > 1 && !meta.is_symlink() {
            self.add(path, AddWatchFlags::empty());
            let key = |m: &Stat| (m.dev, m.ino, m.ctime);
            let now = std::fs::symlink_metadata(path).map(|now| Stat::of(&now));
            if !now.is_ok_and(|now| key(&now) == key(meta)) {
                self.give_up();
            }
        }
    }

    /// Gives up on watching this root whole (a directory that could not be listed, an
    /// entry that could not be looked at, a walk cut short): it is walked again.
    pub(super) fn give_up(&self) {
        self.broken.store(true, Ordering::Relaxed);
    }

    fn add(&self, path: &Path, extra: AddWatchFlags) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        let within = self.watch.budget.fetch_sub(1, Ordering::Relaxed) > 0;
        let added = within
            && self
                .watch
                .inotify
                .as_ref()
                .is_some_and(|inotify| inotify.add_watch(path, changes() | extra).is_ok());
        if added {
            self.watch.watching.store(true, Ordering::Relaxed);
        } else {
            self.broken.store(true, Ordering::Relaxed);
        }
    }

    /// Ends the walk: the root is trusted to its watches from now on only if every one
    /// was added and the walk found it unchanged (`unchanged`).
    pub(super) fn done(self, unchanged: bool) {
        let Some(identity) = self.identity else {
            return;
        };
        if unchanged
            && !self.broken.load(Ordering::Relaxed)
            && let Ok(mut whole) = self.watch.whole.lock()
        {
            whole.insert(self.root, identity);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::InstallPin;
    use super::super::Share;
    use super::*;

    /// A small installation under `<dir>/lib/site-packages`.
    fn installation() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path().join("lib/site-packages");
        for (path, body) in [
            ("_pytest/main.py", "def main(): pass\n"),
            ("_pytest/config/__init__.py", ""),
            ("pluggy/__init__.py", "x = 1\n"),
            ("six.py", "six = 6\n"),
        ] {
            let file = root.join(path);
            std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
            std::fs::write(file, body).expect("write");
        }
        (dir, root)
    }

    /// The pin of `root`, walked once with `watch`, found unchanged.
    fn watched(root: &Path, watch: &InstallWatch) -> InstallPin {
        let pin = InstallPin::take(root, "site").expect("pin");
        assert_eq!(pin.first_change_watched(Share::EveryCore, watch), None);
        pin
    }

    #[test]
    fn a_root_walked_whole_and_left_alone_is_held_without_a_walk() {
        let (_dir, root) = installation();
        let watch = InstallWatch::new();
        let pin = watched(&root, &watch);
        // Reading is no change.
        std::fs::read(root.join("_pytest/main.py")).expect("read");
        assert!(pin.held_by(&watch));
        assert!(pin.held_by(&watch), "asking again changes nothing");
    }

    #[test]
    fn an_edit_deep_inside_after_the_walk_is_not_held_and_the_walk_names_it() {
        let (_dir, root) = installation();
        let watch = InstallWatch::new();
        let pin = watched(&root, &watch);
        std::fs::write(root.join("_pytest/config/__init__.py"), "").expect("rewrite");
        assert!(!pin.held_by(&watch));
        let (path, _, _) = pin
            .first_change(Share::EveryCore)
            .expect("the walk sees it");
        assert_eq!(path, root.join("_pytest"));
    }

    #[test]
    fn a_file_written_through_a_name_outside_the_root_is_not_held() {
        let (dir, root) = installation();
        let other = dir.path().join("elsewhere.py");
        std::fs::hard_link(root.join("six.py"), &other).expect("link");
        let watch = InstallWatch::new();
        let pin = watched(&root, &watch);
        // Reported to the directory of the name written through, which is not watched.
        std::fs::write(&other, "six = 7\n").expect("write through the other name");
        assert!(!pin.held_by(&watch));
    }

    #[test]
    fn a_directory_above_a_root_moved_away_and_back_while_watched_is_named() {
        let (dir, root) = installation();
        let watch = InstallWatch::new();
        let pin = watched(&root, &watch);
        assert_eq!(watch.moved(), None);
        // A copy in its place for a while, then the original back: the root and all
        // below it are as they were, and its path named the copy meanwhile.
        let lib = dir.path().join("lib");
        std::fs::rename(&lib, dir.path().join("lib-away")).expect("away");
        std::fs::create_dir_all(lib.join("site-packages")).expect("copy");
        std::fs::remove_dir_all(&lib).expect("copy gone");
        std::fs::rename(dir.path().join("lib-away"), &lib).expect("back");
        assert_eq!(
            pin.first_change(Share::EveryCore),
            None,
            "no walk can see it"
        );
        assert_eq!(watch.moved(), Some((lib, root)));
    }

    #[test]
    fn a_link_on_the_way_to_a_root_replaced_and_put_back_is_named() {
        let (dir, root) = installation();
        let link = dir.path().join("current");
        std::os::unix::fs::symlink(dir.path().join("lib"), &link).expect("link");
        let through = link.join("site-packages");
        let watch = InstallWatch::new();
        let _pin = watched(&through, &watch);
        assert_eq!(watch.moved(), None);
        // Pointed elsewhere, then back at the same directory: a link made anew.
        std::fs::remove_file(&link).expect("unlink");
        std::os::unix::fs::symlink(dir.path(), &link).expect("elsewhere");
        std::fs::remove_file(&link).expect("unlink");
        std::os::unix::fs::symlink(dir.path().join("lib"), &link).expect("back");
        assert_eq!(watch.moved(), Some((link, through)));
        assert!(root.is_dir());
    }

    #[test]
    fn a_root_whose_path_names_another_directory_now_is_not_held() {
        let (dir, root) = installation();
        let watch = InstallWatch::new();
        let pin = watched(&root, &watch);
        // Its parent moved aside and a copy put in its place: no watched object moved.
        std::fs::rename(dir.path().join("lib"), dir.path().join("lib-old")).expect("mv");
        std::fs::create_dir_all(root.join("_pytest")).expect("mkdir");
        assert!(!pin.held_by(&watch));
    }

    #[test]
    fn a_root_that_is_a_link_or_was_walked_without_a_watch_is_never_held() {
        let (dir, root) = installation();
        let link = dir.path().join("site");
        std::os::unix::fs::symlink(&root, &link).expect("ln");
        let watch = InstallWatch::new();
        assert!(!watched(&link, &watch).held_by(&watch));
        let plain = InstallPin::take(&root, "site").expect("pin");
        assert_eq!(plain.first_change(Share::EveryCore), None);
        assert!(!plain.held_by(&watch));
    }

    #[test]
    fn a_root_needing_more_watches_than_a_quarter_of_the_users_limit_is_walked_again() {
        let (_dir, root) = installation();
        // Four directories to watch; the budget allows three.
        let watch = InstallWatch::with_budget(3);
        assert!(!watched(&root, &watch).held_by(&watch));
        let watch = InstallWatch::with_budget(4);
        assert!(watched(&root, &watch).held_by(&watch));
        assert!(watch_budget() > 0);
    }

    #[test]
    fn a_walk_that_found_a_change_vouches_for_nothing_after() {
        let (_dir, root) = installation();
        let pin = InstallPin::take(&root, "site").expect("pin");
        std::fs::write(root.join("planted.pth"), "import os\n").expect("plant");
        let watch = InstallWatch::new();
        assert!(pin.first_change_watched(Share::EveryCore, &watch).is_some());
        // Nothing is written after the walk, so the queue is empty: the walk's own
        // finding is what keeps the root from being held.
        assert!(!pin.held_by(&watch));
    }
}
