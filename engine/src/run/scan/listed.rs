//! The scan's own listing of the tree it wrote, kept for the lock check that follows.

use std::cell::RefCell;
use std::collections::HashMap;

use super::index::Index;
use super::objects::Recorded;
use crate::run::safe_fs;

/// A regular file of a tree: path, git mode, blob id.
pub(crate) type TreeFile = (Vec<u8>, u32, String);

/// What the regular files of a scanned tree are: the index entries the scan took as
/// they are, and every path it recorded from disk.
///
/// Kept for the lock check that follows a scan, which would otherwise list the whole
/// tree again (`git ls-tree -r`, the largest cost on a large tree).
pub(crate) struct Listed {
    pub(super) tree: String,
    pub(super) index: Index,
    /// Positions of the index entries the tree holds as the index has them.
    pub(super) unchanged: Vec<usize>,
    pub(super) recorded: HashMap<Vec<u8>, Recorded>,
}

thread_local! {
    /// The last scan's listing on this thread; a lock check runs on the thread that
    /// scanned, and no other thread's scan can replace the listing in between.
    static LAST: RefCell<Option<Listed>> = const { RefCell::new(None) };
}

/// The listing of the last scan on this thread if its tree is `tree`, taken.
pub(crate) fn take_listed(tree: &str) -> Option<Listed> {
    LAST.with_borrow_mut(|last| {
        if last.as_ref().is_some_and(|l| l.tree == tree) {
            last.take()
        } else {
            None
        }
    })
}

fn regular(mode: u32) -> bool {
    mode == 0o100644 || mode == safe_fs::MODE_EXECUTABLE
}

impl Listed {
    /// The regular files of the tree that `keep` accepts.
    pub(crate) fn files(&self, keep: impl Fn(&[u8]) -> bool) -> Vec<TreeFile> {
        let mut files = Vec::new();
        let entries = self.index.entries();
        for &at in &self.unchanged {
            let entry = &entries[at];
            let path = self.index.path(entry);
            let mode = entry.mode.bits();
            if regular(mode) && keep(path) {
                files.push((path.to_vec(), mode, entry.id.to_string()));
            }
        }
        for (path, (mode, id)) in &self.recorded {
            if regular(*mode) && keep(path) {
                files.push((path.clone(), *mode, id.to_string()));
            }
        }
        files
    }
}

/// Keeps `listed` as this thread's last scan.
pub(super) fn keep(listed: Listed) {
    LAST.with_borrow_mut(|last| *last = Some(listed));
}
