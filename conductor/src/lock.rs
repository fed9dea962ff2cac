//! One conductor per work tree (the engine's work-tree lock, on a file of its own), and where
//! it stands (for `tdd status`).

use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;
use tdd_engine::worktree_lock;
use tdd_engine::worktree_lock::Guard;

/// The lock and position files of the conductor of `work_tree`, under the
/// repository's ledger directory.
fn paths(ledger_dir: &Path, work_tree: &Path) -> (PathBuf, PathBuf) {
    let key = worktree_lock::key(work_tree);
    let dir = ledger_dir.join("conduct");
    (
        dir.join(format!("lock-{key}")),
        dir.join(format!("position-{key}.json")),
    )
}

/// Held while a conductor runs in a work tree; released (and its position removed)
/// when dropped or when the process dies.
///
/// Taken through the engine's [`worktree_lock`], on a file of its own: it never
/// contends with the engine's advance lock of the same work tree, which the conductor
/// takes (in-process) while it holds this one.
#[derive(Debug)]
pub struct WorktreeLock {
    _guard: Guard,
    position: PathBuf,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another conductor holds it.
    #[error("another conductor (pid {pid}) is running in this work tree")]
    Held {
        /// The holder's pid, as the kernel reports it.
        pid: String,
    },
    /// The lock file could not be opened.
    #[error("failed to open the conductor lock {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl WorktreeLock {
    /// Takes the lock of `work_tree` without waiting.
    ///
    /// Guarantees: at most one conductor per work tree across processes and threads;
    /// [`LockError::Held`] names the process that holds it.
    pub fn acquire(ledger_dir: &Path, work_tree: &Path) -> Result<WorktreeLock, LockError> {
        let (lock, position) = paths(ledger_dir, work_tree);
        match worktree_lock::acquire(&lock, "conduct") {
            Ok(Ok(guard)) => Ok(WorktreeLock {
                _guard: guard,
                position,
            }),
            Ok(Err(holder)) => Err(LockError::Held {
                pid: holder.pid.to_string(),
            }),
            Err(source) => Err(LockError::Io { path: lock, source }),
        }
    }

    /// Records where the conductor stands.
    pub fn set_position(&self, position: &Position) {
        if let Ok(text) = serde_json::to_string(position) {
            // Best effort: the position is a display aid, never a source of truth.
            let _ = std::fs::write(&self.position, text);
        }
    }
}

impl Drop for WorktreeLock {
    fn drop(&mut self) {
        // Before the guard is dropped (fields drop after this), so a reader that sees the
        // lock free never finds a position left by this conductor.
        let _ = std::fs::remove_file(&self.position);
    }
}

/// Where a running conductor stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Position {
    /// The issue number.
    pub issue: u64,
    /// The step (plan cycle) under way; 0 while planning.
    pub step: u32,
    /// The number of steps (0 before the plan exists).
    pub of: u32,
    /// `plan`, `red`, `green`, `refactor`.
    pub phase: String,
    /// The running leaf, if any.
    pub leaf: Option<String>,
    /// When that leaf started, in seconds since the Unix epoch
    /// (`tdd_engine::ledger::clock::unix_seconds`).
    pub leaf_started_s: Option<u64>,
    /// The conductor's pid.
    pub pid: u32,
}

/// The position of the conductor running in `work_tree`, if one is running.
pub fn read_position(ledger_dir: &Path, work_tree: &Path) -> Option<Position> {
    let (lock, position) = paths(ledger_dir, work_tree);
    if !matches!(worktree_lock::holder(&lock), Ok(Some(_))) {
        // Nobody holds it (or it cannot be probed): whatever position file is left is stale.
        return None;
    }
    serde_json::from_str(&std::fs::read_to_string(position).ok()?).ok()
}

/// Whether any conductor other than the one of `work_tree` may be running in this
/// repository: false (and certain) when no other position file exists. Costs a
/// directory listing, no process.
pub fn others_may_run(ledger_dir: &Path, work_tree: &Path) -> bool {
    let (_, own) = paths(ledger_dir, work_tree);
    let Ok(entries) = std::fs::read_dir(ledger_dir.join("conduct")) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name.starts_with("position-") && name.ends_with(".json") && e.path() != own
    })
}
