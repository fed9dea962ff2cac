//! Snapshots of the work tree as git trees, and the lock check that reverts to one.
//!
//! A snapshot is the tree of every tracked and untracked (not ignored) file, hashed
//! from the bytes on disk in-process (the user's staging area is never touched), and
//! kept reachable under `refs/tdd/`.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use serde::Serialize;

use super::safe_fs;
use super::scan;
use super::scan::FlaggedPath;
use super::scan::Objects;
use super::scan::TreeFile;
use crate::git::Git;
use crate::git::GitError;
use crate::repo_path;

/// A work-tree state recorded as a git tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// The tree id.
    pub tree: String,
}

/// What a lock check changed back. Paths are in the lossless form of
/// [`crate::repo_path::encode`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LockReport {
    /// Locked files that were modified or deleted, restored to the snapshot.
    pub restored: Vec<String>,
    /// Locked files that were created, removed.
    pub removed: Vec<String>,
    /// Changed files the locks allow, kept as they are.
    pub kept: Vec<String>,
}

impl LockReport {
    /// Whether any locked file had to be put back.
    pub fn reverted_any(&self) -> bool {
        !self.restored.is_empty() || !self.removed.is_empty()
    }

    /// Every reverted path, restored then removed.
    pub fn reverted(&self) -> Vec<String> {
        self.restored.iter().chain(&self.removed).cloned().collect()
    }
}

/// One changed path between two trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// `A`, `M`, `D` or `T` as git prints it.
    pub status: char,
    /// The path relative to the work-tree root, in the lossless form of
    /// [`crate::repo_path::encode`].
    pub path: String,
}

/// A scan of the work tree made on a thread while the clean room runs the suites, for
/// the base of the phase that follows: the live tree is not touched by those runs, and a
/// change made after the scan counts against the next phase. Read once; dropping it
/// waits for the thread.
#[derive(Debug, Default)]
pub(crate) struct EarlyScan {
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<Result<Snapshot, GitError>>>>,
}

impl EarlyScan {
    /// Starts the scan of `work_tree` unless one was started; returns at once.
    pub(crate) fn start(&self, work_tree: &Path) {
        let mut thread = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if thread.is_none() {
            let work_tree = work_tree.to_path_buf();
            *thread = std::thread::Builder::new()
                .name("tdd-scan".into())
                .spawn(move || Snapshot::scan(&work_tree))
                .ok();
        }
    }

    /// The scan, once it is done; `None` when none was started (or it could not be).
    pub(crate) fn take(&self) -> Option<Result<Snapshot, GitError>> {
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()?;
        Some(thread.join().unwrap_or_else(|_| {
            Err(GitError::Failed {
                args: "snapshot".into(),
                stderr: "the scanning thread panicked".into(),
            })
        }))
    }
}

impl Drop for EarlyScan {
    fn drop(&mut self) {
        let _ = self.take();
    }
}

impl Snapshot {
    /// Records the work tree as it is now, keeping it reachable as `refs/tdd/<name>`.
    pub fn take(work_tree: &Path, name: &str) -> Result<Snapshot, GitError> {
        Snapshot::keep(work_tree, name, Snapshot::scan(work_tree)?)
    }

    /// Keeps `snapshot`, a scan of `work_tree`, reachable as `refs/tdd/<name>`.
    pub(crate) fn keep(
        work_tree: &Path,
        name: &str,
        snapshot: Snapshot,
    ) -> Result<Snapshot, GitError> {
        let message = format!("tdd snapshot {name}");
        let located = scan::locate(work_tree)?;
        let kept = located.keep_tree(&located.objects(), name, &snapshot.tree, &message);
        if !matches!(kept, Ok(true)) {
            // Refs git keeps another way: let git write the commit and the ref.
            let git = Git::new(work_tree);
            let commit = git.text(["commit-tree", &snapshot.tree, "-m", &message]);
            if let Ok(commit) = commit {
                let _ = git.output(["update-ref", &format!("refs/tdd/{name}"), &commit]);
            }
        }
        Ok(snapshot)
    }

    /// The tree of the bytes in the work tree now (tracked and untracked, not ignored),
    /// without keeping a ref.
    ///
    /// Starts from a copy of the user's index, so only files whose stat data changed are
    /// hashed, but no index flag, filter or stat-relaxing setting can hide a change: see
    /// [`crate::run::FlaggedPath`] and the `scan` module. The user's index is not touched.
    pub fn scan(work_tree: &Path) -> Result<Snapshot, GitError> {
        Ok(Snapshot {
            tree: scan::scan(work_tree)?.tree,
        })
    }

    /// Like [`Snapshot::scan`], also naming the paths whose index entries were flagged
    /// assume-unchanged or skip-worktree (hashed from disk regardless), so the caller can
    /// report them and clear them with [`crate::run::clear_index_flags`].
    pub fn scan_flagged(work_tree: &Path) -> Result<(Snapshot, Vec<FlaggedPath>), GitError> {
        let scanned = scan::scan(work_tree)?;
        Ok((Snapshot { tree: scanned.tree }, scanned.flagged))
    }

    /// The paths that differ between this snapshot and `other`, in the lossless form of
    /// [`crate::repo_path::encode`].
    pub fn changes_to(&self, work_tree: &Path, other: &Snapshot) -> Result<Vec<Change>, GitError> {
        let objects = scan::locate(work_tree)?.objects();
        Ok(raw_changes(&objects, &self.tree, &other.tree)?
            .into_iter()
            .map(|c| Change {
                status: c.status,
                path: repo_path::encode(&c.path),
            })
            .collect())
    }

    /// The files of this snapshot that are not on disk in `work_tree` as it has them:
    /// changed, removed, replaced by a link or a directory, or hard-linked, in the
    /// lossless form of [`crate::repo_path::encode`]. Files the snapshot does not hold
    /// (new untracked ones, build output) are not looked at, and nothing is written.
    ///
    /// Every file git's stat check calls unchanged is checked again by `lstat` and by its
    /// bytes, as a lock check does, so a change made within a second is seen too.
    pub fn tracked_drift(&self, work_tree: &Path) -> Result<Vec<String>, GitError> {
        let root = work_tree
            .canonicalize()
            .map_err(|e| work_tree_error("resolve", work_tree, e))?;
        let now = Snapshot::scan(&root)?;
        let objects = scan::locate(&root)?.objects();
        let changes = raw_changes(&objects, &self.tree, &now.tree)?;
        let mut drift: Vec<String> = changes
            .iter()
            .filter(|c| c.old_mode != 0)
            .map(|c| repo_path::encode(&c.path))
            .collect();
        let seen: HashSet<&[u8]> = changes.iter().map(|c| c.path.as_slice()).collect();
        let keep = |path: &[u8]| !seen.contains(path);
        let files = match scan::take_listed(&now.tree) {
            Some(listed) => listed.files(keep),
            None => tree_files(&objects, &self.tree, keep)?,
        };
        let unseen: Vec<&TreeFile> = files.iter().collect();
        for (path, _, _) in drifted(&objects, &root, &unseen)? {
            drift.push(repo_path::encode(path));
        }
        Ok(drift)
    }

    /// Reverts every change to a `locked` path since this snapshot; other changes are kept.
    ///
    /// A modified or deleted locked file gets the snapshot's bytes back; a created one is
    /// removed. Ignored files are never looked at, and the user's index is not touched.
    pub fn check_and_revert(
        &self,
        work_tree: &Path,
        locked: impl Fn(&str) -> bool,
    ) -> Result<LockReport, GitError> {
        let now = Snapshot::scan(work_tree)?;
        self.revert_locked(work_tree, &now, locked)
    }

    /// Like [`Snapshot::check_and_revert`], against a scan `now` the caller already took.
    ///
    /// `locked` sees each path as a person would read it (invalid UTF-8 shown as U+FFFD);
    /// the file system is acted on with the exact bytes. Besides the changes git sees, a
    /// locked regular file of this snapshot that is now hard-linked (`nlink > 1`), a
    /// symlink, a directory, or whose bytes differ from the snapshot's (git's stat check
    /// can be fooled within a second) is restored. Guarantees: nothing outside the work
    /// tree is written or removed, a symlink or hard link at a locked path is replaced
    /// rather than written through, and the snapshot's file mode (or symlink) comes back.
    pub fn revert_locked(
        &self,
        work_tree: &Path,
        now: &Snapshot,
        locked: impl Fn(&str) -> bool,
    ) -> Result<LockReport, GitError> {
        let root = work_tree
            .canonicalize()
            .map_err(|e| work_tree_error("resolve", work_tree, e))?;
        let objects = scan::locate(&root)?.objects();
        let changes = raw_changes(&objects, &self.tree, &now.tree)?;
        let mut report = LockReport::default();
        let mut restore = Vec::new();
        for change in &changes {
            if !locked(&repo_path::display(&change.path)) {
                report.kept.push(repo_path::encode(&change.path));
            } else if change.old_mode == 0 {
                if safe_fs::remove(&root, &change.path)? {
                    report.removed.push(repo_path::encode(&change.path));
                }
            } else {
                restore.push((
                    change.path.as_slice(),
                    change.old_mode,
                    change.old_oid.as_str(),
                ));
            }
        }
        // Locked files git saw unchanged have the same entry in both trees; the scan that
        // produced `now` usually still holds that tree's listing.
        let seen: HashSet<&[u8]> = changes.iter().map(|c| c.path.as_slice()).collect();
        let keep = |path: &[u8]| locked(&repo_path::display(path)) && !seen.contains(path);
        let files = match scan::take_listed(&now.tree) {
            Some(listed) => listed.files(keep),
            None => tree_files(&objects, &self.tree, keep)?,
        };
        let unseen: Vec<&TreeFile> = files.iter().collect();
        for (path, mode, oid) in drifted(&objects, &root, &unseen)? {
            restore.push((path.as_slice(), *mode, oid.as_str()));
        }
        let oids: Vec<&str> = restore.iter().map(|(_, _, oid)| *oid).collect();
        let blobs = objects.read_blobs(&oids)?;
        for ((path, mode, _), bytes) in restore.iter().zip(blobs) {
            if safe_fs::restore(&root, path, *mode, &bytes)? {
                report.restored.push(repo_path::encode(path));
            }
        }
        Ok(report)
    }
}

fn work_tree_error(what: &str, path: &Path, source: std::io::Error) -> GitError {
    GitError::WorkTree {
        what: what.to_string(),
        path: path.display().to_string(),
        source,
    }
}

/// One changed path between two trees: its status, and its mode and blob before.
struct RawChange {
    status: char,
    old_mode: u32,
    old_oid: String,
    path: Vec<u8>,
}

fn raw_changes(objects: &Objects, from: &str, to: &str) -> Result<Vec<RawChange>, GitError> {
    Ok(objects
        .diff_trees(from, to)?
        .into_iter()
        .map(|c| RawChange {
            status: c.status,
            old_mode: c.old.map_or(0, |(mode, _)| mode),
            old_oid: c.old.map(|(_, id)| id.to_string()).unwrap_or_default(),
            path: c.path,
        })
        .collect())
}

/// The files among `files` (locked files of the snapshot that git saw unchanged) whose
/// bytes on disk are not the snapshot's after all.
///
/// The scan trusts the index's stat data, which the agent can forge, and git compares
/// times only to the second; and a hard link or a symlink changes nothing a stat cache
/// looks at. So each such file is checked by `lstat` (a regular file with one link and
/// the snapshot's executable bit) and then by its bytes, hashed without filters.
fn drifted<'a>(
    objects: &Objects,
    root: &Path,
    files: &[&'a TreeFile],
) -> Result<Vec<&'a TreeFile>, GitError> {
    let mut drifted = Vec::new();
    for &file in files {
        let (path, mode, oid) = file;
        let meta = safe_fs::lstat_in_tree(root, path)?;
        let intact = meta.as_ref().is_some_and(|m| {
            let exec = m.mode() & 0o100 != 0;
            m.is_file() && m.nlink() == 1 && exec == (*mode == safe_fs::MODE_EXECUTABLE)
        });
        let same = match meta {
            Some(meta) if intact => {
                let full = root.join(repo_path::os(path));
                objects
                    .record(&full, meta.file_type().is_symlink(), false)?
                    .is_some_and(|(now_mode, id)| now_mode == *mode && id.to_hex() == oid.as_str())
            }
            _ => false,
        };
        if !same {
            drifted.push(file);
        }
    }
    Ok(drifted)
}

/// The regular files of `tree` that `keep` accepts: path, mode, blob id.
fn tree_files(
    objects: &Objects,
    tree: &str,
    keep: impl Fn(&[u8]) -> bool,
) -> Result<Vec<TreeFile>, GitError> {
    Ok(objects
        .list_tree(tree)?
        .into_iter()
        .filter(|(path, (mode, _))| {
            (*mode == 0o100644 || *mode == safe_fs::MODE_EXECUTABLE) && keep(path)
        })
        .map(|(path, (mode, id))| (path, mode, id.to_string()))
        .collect())
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
pub(super) mod tests;
