//! Writes into the work tree that never land anywhere but the path they name.
//!
//! The agent may have replaced any path component with a symlink (to another
//! file of the repository or to one outside it), hard-linked a locked file to
//! another one, or put a directory where a file was. Every function here
//! walks the path one component at a time with `lstat`, never following a
//! symlink: a component that is not a real directory is removed (the link
//! itself, never its target) and a directory created in its place. Files are
//! written to a fresh temporary file in the target's directory and renamed
//! over the path, so a hard link or a symlink at the path is replaced, not
//! written through. Before anything is written, the resolved directory is
//! checked to be inside the canonical work tree.

use std::fs::Metadata;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::path::PathBuf;

use crate::git::GitError;
use crate::repo_path;

/// Git's mode of a symbolic link.
pub(crate) const MODE_SYMLINK: u32 = 0o120000;
/// Git's mode of an executable file.
pub(crate) const MODE_EXECUTABLE: u32 = 0o100755;
/// Git's mode of a submodule.
pub(crate) const MODE_GITLINK: u32 = 0o160000;

pub(crate) fn io_error(what: &str, path: &Path, source: std::io::Error) -> GitError {
    GitError::WorkTree {
        what: what.to_string(),
        path: path.display().to_string(),
        source,
    }
}

/// The components of a repository path, refusing anything that could climb out.
fn components(rel: &[u8]) -> Option<Vec<&[u8]>> {
    let parts: Vec<&[u8]> = rel.split(|b| *b == b'/').collect();
    let safe = parts
        .iter()
        .all(|p| !p.is_empty() && *p != b"." && *p != b".." && *p != b".git");
    safe.then_some(parts)
}

/// `lstat` of `rel` inside `root`, or `None` when it does not exist as such: absent, or
/// behind a component that is not a real directory (a symlink, a file).
pub(crate) fn lstat_in_tree(root: &Path, rel: &[u8]) -> Result<Option<Metadata>, GitError> {
    let Some(parts) = components(rel) else {
        return Ok(None);
    };
    let mut current = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        current.push(repo_path::os(part));
        let meta = match current.symlink_metadata() {
            Ok(meta) => meta,
            Err(e) if is_absent(&e) => return Ok(None),
            Err(e) => return Err(io_error("inspect", &current, e)),
        };
        if i + 1 == parts.len() {
            return Ok(Some(meta));
        }
        if !meta.is_dir() {
            return Ok(None);
        }
    }
    Ok(None)
}

fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
    )
}

/// Makes every parent component of `rel` a real, writable directory inside `root` and
/// returns the last one; `root` must be canonical.
fn real_parent(root: &Path, parts: &[&[u8]]) -> Result<PathBuf, GitError> {
    let mut current = root.to_path_buf();
    let parents = &parts[..parts.len().saturating_sub(1)];
    for part in parents {
        current.push(repo_path::os(part));
        match current.symlink_metadata() {
            Ok(meta) if meta.is_dir() => ensure_writable(&current, &meta)?,
            Ok(_) => {
                // A symlink or a file where a directory belongs: remove the entry itself.
                std::fs::remove_file(&current).map_err(|e| io_error("remove", &current, e))?;
                std::fs::create_dir(&current).map_err(|e| io_error("create", &current, e))?;
            }
            Err(e) if is_absent(&e) => {
                std::fs::create_dir(&current).map_err(|e| io_error("create", &current, e))?;
            }
            Err(e) => return Err(io_error("inspect", &current, e)),
        }
    }
    let resolved = current
        .canonicalize()
        .map_err(|e| io_error("resolve", &current, e))?;
    if !resolved.starts_with(root) {
        return Err(io_error(
            "refuse to write outside the work tree at",
            &resolved,
            std::io::Error::other("the directory resolves outside the work tree"),
        ));
    }
    Ok(resolved)
}

/// Adds owner write and search permission to a directory that lacks it, so a restore
/// cannot be blocked by a `chmod` of the agent's.
fn ensure_writable(dir: &Path, meta: &Metadata) -> Result<(), GitError> {
    let mode = meta.permissions().mode();
    if mode & 0o300 != 0o300 {
        let fixed = std::fs::Permissions::from_mode(mode | 0o700);
        std::fs::set_permissions(dir, fixed).map_err(|e| io_error("make writable", dir, e))?;
    }
    Ok(())
}

/// Puts the snapshot's entry back at `rel`: `bytes` as a regular file with git `mode`
/// (`100644` or `100755`), or as a symlink whose target is `bytes` (`120000`).
///
/// Guarantees: nothing outside `root` (canonical) is written; a symlink, hard link or
/// directory at `rel` is replaced, never written through; the result is a fresh inode.
/// Returns `false` (and touches nothing) for a path git could never have given or for a
/// submodule.
pub(crate) fn restore(root: &Path, rel: &[u8], mode: u32, bytes: &[u8]) -> Result<bool, GitError> {
    let Some(parts) = components(rel) else {
        return Ok(false);
    };
    if mode == MODE_GITLINK {
        return Ok(false);
    }
    let dir = real_parent(root, &parts)?;
    let target = dir.join(repo_path::os(parts[parts.len() - 1]));
    if let Ok(meta) = target.symlink_metadata()
        && meta.is_dir()
    {
        // A directory where the file was; it is inside the work tree (checked above).
        std::fs::remove_dir_all(&target).map_err(|e| io_error("remove", &target, e))?;
    }
    let temp = temp_name(&dir);
    if mode == MODE_SYMLINK {
        std::os::unix::fs::symlink(repo_path::os(bytes), &temp)
            .map_err(|e| io_error("create", &temp, e))?;
    } else {
        write_new(&temp, bytes, mode).inspect_err(|_| {
            let _ = std::fs::remove_file(&temp);
        })?;
    }
    std::fs::rename(&temp, &target).map_err(|e| {
        let _ = std::fs::remove_file(&temp);
        io_error("replace", &target, e)
    })?;
    Ok(true)
}

/// A name in `dir` that no entry has yet (checked again by `O_EXCL` when created).
fn temp_name(dir: &Path) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut n = 0u32;
    loop {
        let candidate = dir.join(format!(".tdd-restore-{}-{nanos}-{n}", std::process::id()));
        if candidate.symlink_metadata().is_err() {
            return candidate;
        }
        n += 1;
    }
}

/// Creates `path` exclusively (never following a link) with `bytes` and the permission
/// bits of git `mode`.
fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), GitError> {
    use std::os::unix::fs::OpenOptionsExt;
    let perm = if mode == MODE_EXECUTABLE {
        0o755
    } else {
        0o644
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(perm)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
        .map_err(|e| io_error("create", path, e))?;
    file.write_all(bytes)
        .map_err(|e| io_error("write", path, e))?;
    // The umask may have taken bits away; the snapshot's mode is what counts.
    file.set_permissions(std::fs::Permissions::from_mode(perm))
        .map_err(|e| io_error("set the mode of", path, e))
}

/// Removes the file or symlink at `rel` (the link itself, never its target).
///
/// A path behind a component that is not a real directory is not in the work tree as
/// such and is left alone, as is a directory (a created file was never one). Returns
/// whether something was removed.
pub(crate) fn remove(root: &Path, rel: &[u8]) -> Result<bool, GitError> {
    let Some(meta) = lstat_in_tree(root, rel)? else {
        return Ok(false);
    };
    if meta.is_dir() {
        return Ok(false);
    }
    let path = root.join(repo_path::os(rel));
    if let Some(parent) = path.parent()
        && let Ok(parent_meta) = parent.symlink_metadata()
    {
        ensure_writable(parent, &parent_meta)?;
    }
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if is_absent(&e) => Ok(false),
        Err(e) => Err(io_error("remove", &path, e)),
    }
}

#[cfg(test)]
mod tests;
