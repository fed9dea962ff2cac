//! Writes into the work tree that never land anywhere but the path they name.
//!
//! The agent may have replaced any path component with a symlink (to another
//! file of the repository or to one outside it), hard-linked a locked file to
//! another one, or put a directory where a file was, and a process it left
//! running may do so while a restore runs. Every function here walks the path
//! one directory at a time beneath the work tree held open, never following a
//! symlink ([`super::beneath`]): a component that is not a real directory is
//! removed (the link itself, never its target) and a directory created in its
//! place. Files are written to a fresh temporary file in the target's
//! directory and renamed over the path within that directory, so a hard link
//! or a symlink at the path is replaced, not written through, and a link
//! swapped in midway is an error, never a way outside.

use std::fs::Metadata;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::beneath;
use super::beneath::Kind;
use super::beneath::Way;
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
    let target = root.join(repo_path::os(rel));
    let (name, parents) = (parts[parts.len() - 1], &parts[..parts.len() - 1]);
    let dir = beneath::open_dir(root)
        .and_then(|top| beneath::dir_of(&top, parents, Way::Replace))
        .map_err(|e| io_error("make the directory of", &target, e))?;
    if beneath::kind_at(&dir, name).map_err(|e| io_error("inspect", &target, e))? == Some(Kind::Dir)
    {
        // A directory where the file was: removed beneath the directory held open.
        beneath::remove_tree_at(&dir, name).map_err(|e| io_error("remove", &target, e))?;
    }
    let temp = make_temp(&dir, mode, bytes).map_err(|e| io_error("create beside", &target, e))?;
    nix::fcntl::renameat(&dir, repo_path::os(&temp), &dir, repo_path::os(name)).map_err(|e| {
        let _ = beneath::unlink_at(&dir, &temp);
        io_error("replace", &target, e.into())
    })?;
    Ok(true)
}

/// Makes a new entry in `dir` under a name no entry has (`O_EXCL`, never following a
/// link) holding the snapshot's entry, and returns its name.
fn make_temp(dir: &OwnedFd, mode: u32, bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    for n in 0u32.. {
        let name = format!(".tdd-restore-{}-{nanos}-{n}", std::process::id()).into_bytes();
        let made = if mode == MODE_SYMLINK {
            nix::unistd::symlinkat(repo_path::os(bytes), dir, repo_path::os(&name))
                .map_err(std::io::Error::from)
        } else {
            write_new(dir, &name, bytes, mode)
        };
        match made {
            Ok(()) => return Ok(name),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free name for a temporary file"))
}

/// Creates `name` in `dir` exclusively (never following a link) with `bytes` and the
/// permission bits of git `mode`; on a failed write, nothing is left behind.
fn write_new(dir: &OwnedFd, name: &[u8], bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use nix::fcntl::OFlag;
    let perm = if mode == MODE_EXECUTABLE {
        0o755
    } else {
        0o644
    };
    let fd = nix::fcntl::openat(
        dir,
        repo_path::os(name),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::from_bits_truncate(perm),
    )?;
    let mut file = std::fs::File::from(fd);
    // The umask may have taken bits away; the snapshot's mode is what counts.
    let written = file
        .write_all(bytes)
        .and_then(|()| file.set_permissions(std::fs::Permissions::from_mode(perm)));
    if written.is_err() {
        let _ = beneath::unlink_at(dir, name);
    }
    written
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
    let Some(parts) = components(rel) else {
        return Ok(false);
    };
    if meta.is_dir() {
        return Ok(false);
    }
    let path = root.join(repo_path::os(rel));
    let (name, parents) = (parts[parts.len() - 1], &parts[..parts.len() - 1]);
    let dir = match beneath::open_dir(root)
        .and_then(|top| beneath::dir_of(&top, parents, Way::Writable))
    {
        Ok(dir) => dir,
        Err(e) if is_absent(&e) || e.raw_os_error() == Some(nix::libc::ELOOP) => return Ok(false),
        Err(e) => return Err(io_error("open the directory of", &path, e)),
    };
    match beneath::kind_at(&dir, name) {
        Ok(Some(Kind::Dir) | None) => Ok(false),
        Ok(Some(_)) => match beneath::unlink_at(&dir, name) {
            Ok(()) => Ok(true),
            Err(e) if is_absent(&e) => Ok(false),
            Err(e) => Err(io_error("remove", &path, e)),
        },
        Err(e) => Err(io_error("inspect", &path, e)),
    }
}

#[cfg(test)]
mod tests;
