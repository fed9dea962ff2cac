//! The scan's own listing of the tree it wrote, kept for the lock check that follows.

use std::cell::RefCell;
use std::collections::HashMap;

use super::split_nul;
use crate::run::safe_fs;

/// A regular file of a tree: path, git mode, blob id.
pub(crate) type TreeFile = (Vec<u8>, u32, String);

/// What the regular files of a scanned tree are, from the scan's own listing: the
/// index entries it started from, overridden by every path it hashed from disk.
///
/// Kept for the lock check that follows a scan, which would otherwise list the whole
/// tree again (`git ls-tree -r`, the largest cost on a large tree).
pub(crate) struct Listed {
    pub(super) tree: String,
    pub(super) listing: Vec<u8>,
    pub(super) recorded: Recorded,
}

/// Every path a scan recorded from disk: its mode and blob when it is a regular file.
pub(super) type Recorded = HashMap<Vec<u8>, Option<(u32, String)>>;

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

impl Listed {
    /// The regular files of the tree that `keep` accepts.
    pub(crate) fn files(&self, keep: impl Fn(&[u8]) -> bool) -> Vec<TreeFile> {
        let mut files = Vec::new();
        for entry in split_nul(&self.listing) {
            // `TAG SP MODE SP OID SP STAGE TAB PATH`; untracked entries have no tab.
            let Some(tab) = entry.iter().position(|b| *b == b'\t') else {
                continue;
            };
            let path = &entry[tab + 1..];
            let meta = String::from_utf8_lossy(entry.get(2..tab).unwrap_or_default());
            let mut parts = meta.split(' ');
            let (Some(mode), Some(oid), Some("0")) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let mode = u32::from_str_radix(mode, 8).unwrap_or(0);
            let regular = mode == 0o100644 || mode == safe_fs::MODE_EXECUTABLE;
            if regular && !self.recorded.contains_key(path) && keep(path) {
                files.push((path.to_vec(), mode, oid.to_string()));
            }
        }
        for (path, entry) in &self.recorded {
            if let Some((mode, oid)) = entry
                && keep(path)
            {
                files.push((path.clone(), *mode, oid.clone()));
            }
        }
        files
    }
}

/// Keeps `listed` as this thread's last scan.
pub(super) fn keep(listed: Listed) {
    LAST.with_borrow_mut(|last| *last = Some(listed));
}
