//! One baseline or advance at a time per work tree, with the holder named.

use std::fs::File;
use std::io::Read;
use std::io::Seek;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use sha2::Digest;

/// A held per-work-tree lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub struct Guard {
    _file: File,
}

/// Who holds the lock.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Holder {
    /// The holder's process id.
    pub pid: u32,
    /// `baseline` or `advance`.
    pub what: String,
    /// When it took the lock.
    pub since: String,
}

/// Takes the lock of `work_tree` under `state_dir`, or names who holds it.
pub fn acquire(
    state_dir: &Path,
    work_tree: &Path,
    what: &str,
) -> std::io::Result<Result<Guard, Holder>> {
    let path = lock_path(state_dir, work_tree);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {
            let holder = Holder {
                pid: std::process::id(),
                what: what.to_string(),
                since: crate::ledger::now_rfc3339(),
            };
            file.set_len(0)?;
            file.rewind()?;
            file.write_all(
                serde_json::to_string(&holder)
                    .unwrap_or_default()
                    .as_bytes(),
            )?;
            file.flush()?;
            Ok(Ok(Guard { _file: file }))
        }
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            let holder = serde_json::from_str(&text).unwrap_or(Holder {
                pid: 0,
                what: what.to_string(),
                since: String::new(),
            });
            Ok(Err(holder))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

fn lock_path(state_dir: &Path, work_tree: &Path) -> PathBuf {
    let key = hex::encode(sha2::Sha256::digest(
        work_tree.as_os_str().as_encoded_bytes(),
    ));
    state_dir.join("locks").join(format!("{}.lock", &key[..16]))
}
