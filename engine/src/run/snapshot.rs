//! Snapshots of the work tree as git trees, and the lock check that reverts to one.
//!
//! A snapshot is the tree of every tracked and untracked (not ignored) file,
//! written through a temporary index (`GIT_INDEX_FILE`) so the user's staging
//! area is never touched, and kept reachable under `refs/tdd/`.

use std::path::Path;
use std::path::PathBuf;

use serde::Serialize;

use crate::git::Git;
use crate::git::GitError;

/// A work-tree state recorded as a git tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Snapshot {
    /// The tree id.
    pub tree: String,
}

/// What a lock check changed back.
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
    /// The path relative to the work-tree root.
    pub path: String,
}

struct TempIndex {
    path: PathBuf,
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Runs git with `GIT_INDEX_FILE` pointing at `index`, optionally feeding `stdin`, and
/// returns stdout as raw bytes.
fn with_index(
    git: &Git,
    index: &Path,
    args: &[&str],
    stdin: Option<&[u8]>,
) -> Result<Vec<u8>, GitError> {
    use std::io::Write;
    let mut cmd = git.command(args);
    cmd.env("GIT_INDEX_FILE", index)
        .stdin(if stdin.is_some() {
            std::process::Stdio::piped()
        } else {
            std::process::Stdio::null()
        })
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().map_err(GitError::Spawn)?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(bytes).map_err(GitError::Spawn)?;
    }
    let out = child.wait_with_output().map_err(GitError::Spawn)?;
    if !out.status.success() {
        return Err(GitError::Failed {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out.stdout)
}

fn text(bytes: Vec<u8>) -> String {
    String::from_utf8_lossy(&bytes).trim_end().to_string()
}

impl Snapshot {
    /// Records the work tree as it is now, keeping it reachable as `refs/tdd/<name>`.
    pub fn take(work_tree: &Path, name: &str) -> Result<Snapshot, GitError> {
        let snapshot = Snapshot::scan(work_tree)?;
        let git = Git::new(work_tree);
        let commit = git.text([
            "commit-tree",
            &snapshot.tree,
            "-m",
            &format!("tdd snapshot {name}"),
        ]);
        if let Ok(commit) = commit {
            let _ = git.output(["update-ref", &format!("refs/tdd/{name}"), &commit]);
        }
        Ok(snapshot)
    }

    /// The tree of the work tree as it is now, without keeping a ref.
    ///
    /// Starts from a copy of the user's index, so only files whose stat data changed are
    /// hashed; the two scans (tracked files changed, untracked files) run in parallel,
    /// since on a large tree each is a walk of every directory.
    pub fn scan(work_tree: &Path) -> Result<Snapshot, GitError> {
        let git = Git::new(work_tree);
        let dirs = git.text(["rev-parse", "--absolute-git-dir", "--git-path", "index"])?;
        let mut lines = dirs.lines();
        let git_dir = PathBuf::from(lines.next().unwrap_or_default());
        let real_index = PathBuf::from(lines.next().unwrap_or_default());
        let real_index = if real_index.is_absolute() {
            real_index
        } else {
            work_tree.join(real_index)
        };
        let index = TempIndex {
            path: git_dir.join(format!("tdd-index-{}-{}", std::process::id(), unique())),
        };
        if real_index.exists() {
            std::fs::copy(&real_index, &index.path).map_err(GitError::Spawn)?;
        } else if git
            .text(["rev-parse", "--verify", "--quiet", "HEAD"])
            .is_ok()
        {
            with_index(&git, &index.path, &["read-tree", "HEAD"], None)?;
        }
        let (changed, untracked) = std::thread::scope(|scope| {
            let changed = scope.spawn(|| {
                with_index(
                    &git,
                    &index.path,
                    &["diff-files", "-z", "--name-only"],
                    None,
                )
            });
            let untracked = with_index(
                &git,
                &index.path,
                &["ls-files", "-z", "--others", "--exclude-standard"],
                None,
            );
            (
                changed.join().unwrap_or(Err(GitError::Failed {
                    args: "diff-files".into(),
                    stderr: "the scanning thread panicked".into(),
                })),
                untracked,
            )
        });
        let mut paths = changed?;
        paths.extend(untracked?);
        if !paths.is_empty() {
            with_index(
                &git,
                &index.path,
                &["update-index", "-z", "--add", "--remove", "--stdin"],
                Some(&paths),
            )?;
        }
        let tree = text(with_index(&git, &index.path, &["write-tree"], None)?);
        Ok(Snapshot { tree })
    }

    /// The paths that differ between this snapshot and `other`.
    pub fn changes_to(&self, work_tree: &Path, other: &Snapshot) -> Result<Vec<Change>, GitError> {
        let git = Git::new(work_tree);
        let out = git.output([
            "diff-tree",
            "-r",
            "-z",
            "--no-renames",
            "--name-status",
            &self.tree,
            &other.tree,
        ])?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut fields = text.split('\0').filter(|f| !f.is_empty());
        let mut changes = Vec::new();
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            changes.push(Change {
                status: status.chars().next().unwrap_or('M'),
                path: path.to_string(),
            });
        }
        Ok(changes)
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
    pub fn revert_locked(
        &self,
        work_tree: &Path,
        now: &Snapshot,
        locked: impl Fn(&str) -> bool,
    ) -> Result<LockReport, GitError> {
        let mut report = LockReport::default();
        if now.tree == self.tree {
            return Ok(report);
        }
        let git = Git::new(work_tree);
        for change in self.changes_to(work_tree, now)? {
            if !locked(&change.path) {
                report.kept.push(change.path);
                continue;
            }
            let full = work_tree.join(&change.path);
            if change.status == 'A' {
                std::fs::remove_file(&full).map_err(GitError::Spawn)?;
                report.removed.push(change.path);
            } else {
                let blob = git.output([
                    "cat-file",
                    "blob",
                    &format!("{}:{}", self.tree, change.path),
                ])?;
                if let Some(parent) = full.parent() {
                    std::fs::create_dir_all(parent).map_err(GitError::Spawn)?;
                }
                std::fs::write(&full, blob.stdout).map_err(GitError::Spawn)?;
                report.restored.push(change.path);
            }
        }
        Ok(report)
    }
}
