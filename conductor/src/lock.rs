//! One conductor per work tree (a file lock), and where it stands (for `tdd status`).

use std::fs::File;
use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;
use sha2::Digest;

/// The lock and position files of the conductor of `work_tree`, under the
/// repository's ledger directory.
fn paths(ledger_dir: &Path, work_tree: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let key = hex::encode(&sha2::Sha256::digest(work_tree.display().to_string().as_bytes())[..8]);
    let dir = ledger_dir.join("conduct");
    (
        dir.join(format!("lock-{key}")),
        dir.join(format!("lock-{key}.pid")),
        dir.join(format!("position-{key}.json")),
    )
}

/// Held while a conductor runs in a work tree; released (and its position removed)
/// when dropped or when the process dies.
#[derive(Debug)]
pub struct WorktreeLock {
    _file: File,
    position: PathBuf,
}

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another conductor holds it.
    #[error("another conductor (pid {pid}) is running in this work tree")]
    Held {
        /// The holder's pid, as it recorded it.
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
    pub fn acquire(ledger_dir: &Path, work_tree: &Path) -> Result<WorktreeLock, LockError> {
        let (lock, pid, position) = paths(ledger_dir, work_tree);
        let io = |source| LockError::Io {
            path: lock.clone(),
            source,
        };
        if let Some(parent) = lock.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock)
            .map_err(io)?;
        if file.try_lock().is_err() {
            let holder = std::fs::read_to_string(&pid).unwrap_or_else(|_| "unknown".into());
            return Err(LockError::Held {
                pid: holder.trim().to_string(),
            });
        }
        std::fs::write(&pid, std::process::id().to_string()).map_err(io)?;
        Ok(WorktreeLock {
            _file: file,
            position,
        })
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
    /// When that leaf started, in seconds since the Unix epoch.
    pub leaf_started_s: Option<u64>,
    /// The conductor's pid.
    pub pid: u32,
}

/// The position of the conductor running in `work_tree`, if one is running.
pub fn read_position(ledger_dir: &Path, work_tree: &Path) -> Option<Position> {
    let (lock, _, position) = paths(ledger_dir, work_tree);
    let file = File::options().write(true).open(&lock).ok()?;
    if file.try_lock().is_ok() {
        // Nobody holds it: whatever position file is left is stale.
        return None;
    }
    serde_json::from_str(&std::fs::read_to_string(position).ok()?).ok()
}

/// Whether any conductor other than the one of `work_tree` may be running in this
/// repository: false (and certain) when no other position file exists. Costs a
/// directory listing, no process.
pub fn others_may_run(ledger_dir: &Path, work_tree: &Path) -> bool {
    let (_, _, own) = paths(ledger_dir, work_tree);
    let Ok(entries) = std::fs::read_dir(ledger_dir.join("conduct")) else {
        return false;
    };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name.starts_with("position-") && name.ends_with(".json") && e.path() != own
    })
}

/// Seconds since the Unix epoch.
pub fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
