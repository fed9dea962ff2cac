//! Changes made beneath a directory held open, one path component at a time, never
//! through a link.
//!
//! A process the agent's code left running may swap any directory of the clean room or
//! of the work tree for a link to a directory outside, at any instant. Every function
//! here opens each directory on the way with `O_NOFOLLOW` relative to the one before
//! it, and makes, writes or removes an entry relative to the directory that holds it
//! (`mkdirat`, `openat`, `unlinkat`, `renameat`): a link swapped in is an error or is
//! itself the thing removed, and nothing outside the directory first opened is written
//! or removed, whenever the swap happens.

use std::ffi::OsStr;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;
use nix::sys::stat::SFlag;
use nix::unistd::UnlinkatFlags;

/// What is at a name: the kinds a sweep or a restore tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// A real directory.
    Dir,
    /// A regular file.
    File,
    /// A symbolic link (never followed).
    Link,
    /// A pipe, a socket or a device.
    Other,
}

/// How [`dir_of`] treats a component that is missing or is not a real directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Way {
    /// Only open: a missing component or one that is not a directory is an error.
    Open,
    /// As [`Way::Open`], giving each directory owner read, write and search permission
    /// where it lacks them.
    Writable,
    /// Make a missing directory; one that is not a directory is an error.
    Make,
    /// Make a missing directory, replace a link, a file or anything else by one (the
    /// entry itself is removed, never what a link points to), and give a directory
    /// owner write and search permission where it lacks them.
    Replace,
}

const DIR_FLAGS: OFlag = OFlag::O_DIRECTORY
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC)
    .union(OFlag::O_RDONLY);

/// Opens the directory at `path`, never following a link at its last component.
pub(crate) fn open_dir(path: &Path) -> std::io::Result<OwnedFd> {
    Ok(nix::fcntl::open(path, DIR_FLAGS, Mode::empty())?)
}

/// Opens the directory `name` (one component) in `at`, never following a link.
pub(crate) fn open_dir_at(at: impl AsFd, name: &[u8]) -> std::io::Result<OwnedFd> {
    Ok(nix::fcntl::openat(
        at,
        OsStr::from_bytes(name),
        DIR_FLAGS,
        Mode::empty(),
    )?)
}

/// The components of the repository path `path`; one that is empty, `.` or `..` (a path
/// that could climb) is an error.
pub(crate) fn components(path: &[u8]) -> std::io::Result<Vec<&[u8]>> {
    let parts: Vec<&[u8]> = path.split(|b| *b == b'/').collect();
    if parts.iter().any(|p| matches!(*p, b"" | b"." | b"..")) {
        return Err(std::io::Error::other(
            "a path of the tree climbs or is empty",
        ));
    }
    Ok(parts)
}

/// The directories of the repository path `path` and its last component, as
/// [`components`] splits them.
pub(crate) fn parents_and_name(path: &[u8]) -> std::io::Result<(Vec<&[u8]>, &[u8])> {
    let mut parts = components(path)?;
    let name = parts.pop().unwrap_or(path);
    Ok((parts, name))
}

/// The directory reached from `top` through `parts`, each opened without following a
/// link, and made or replaced on the way as `way` says.
pub(crate) fn dir_of(top: &OwnedFd, parts: &[&[u8]], way: Way) -> std::io::Result<OwnedFd> {
    let mut dir = top.try_clone()?;
    for part in parts {
        if matches!(way, Way::Make | Way::Replace) {
            match nix::sys::stat::mkdirat(
                &dir,
                OsStr::from_bytes(part),
                Mode::from_bits_truncate(0o755),
            ) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if way == Way::Writable {
            writable(&dir, part)?;
        } else if way == Way::Replace {
            match kind_at(&dir, part)? {
                Some(Kind::Dir) => writable(&dir, part)?,
                Some(_) => {
                    unlink_at(&dir, part)?;
                    nix::sys::stat::mkdirat(
                        &dir,
                        OsStr::from_bytes(part),
                        Mode::from_bits_truncate(0o755),
                    )?;
                }
                None => {}
            }
        }
        dir = open_dir_at(&dir, part)?;
    }
    Ok(dir)
}

/// What is at `name` in `dir`, without following a link; `None` when nothing is.
pub(crate) fn kind_at(dir: impl AsFd, name: &[u8]) -> std::io::Result<Option<Kind>> {
    match nix::sys::stat::fstatat(dir, OsStr::from_bytes(name), AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(kind_of(stat.st_mode))),
        Err(Errno::ENOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn kind_of(mode: nix::libc::mode_t) -> Kind {
    match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
        SFlag::S_IFDIR => Kind::Dir,
        SFlag::S_IFREG => Kind::File,
        SFlag::S_IFLNK => Kind::Link,
        _ => Kind::Other,
    }
}

/// The names in the directory `dir` (without `.` and `..`), with what each is.
pub(crate) fn entries(dir: &OwnedFd) -> std::io::Result<Vec<(Vec<u8>, Kind)>> {
    let mut listing = nix::dir::Dir::from_fd(dir.try_clone()?)?;
    let mut names = Vec::new();
    for entry in listing.iter() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let kind = match entry.file_type() {
            Some(nix::dir::Type::Directory) => Kind::Dir,
            Some(nix::dir::Type::File) => Kind::File,
            Some(nix::dir::Type::Symlink) => Kind::Link,
            Some(_) => Kind::Other,
            None => match kind_at(dir, name)? {
                Some(kind) => kind,
                None => continue,
            },
        };
        names.push((name.to_vec(), kind));
    }
    // The listing reads from a shared offset: start the next one from the top.
    nix::unistd::lseek(dir, 0, nix::unistd::Whence::SeekSet)?;
    Ok(names)
}

/// Removes the file, link or other non-directory `name` in `dir` (a link itself, never
/// what it points to).
pub(crate) fn unlink_at(dir: impl AsFd, name: &[u8]) -> std::io::Result<()> {
    Ok(nix::unistd::unlinkat(
        dir,
        OsStr::from_bytes(name),
        UnlinkatFlags::NoRemoveDir,
    )?)
}

/// Removes `name` in `dir` and, for a directory, everything in it, giving each directory
/// back its owner's permissions first (a test may have taken them away). A link is
/// removed itself and never followed; a directory swapped for a link midway is an error,
/// and nothing outside `dir` is removed or changed.
pub(crate) fn remove_tree_at(dir: &OwnedFd, name: &[u8]) -> std::io::Result<()> {
    match kind_at(dir, name)? {
        None => Ok(()),
        Some(Kind::Dir) => {
            let inner = open_writable(dir, name)?;
            for (child, _) in entries(&inner)? {
                remove_tree_at(&inner, &child)?;
            }
            Ok(nix::unistd::unlinkat(
                dir,
                OsStr::from_bytes(name),
                UnlinkatFlags::RemoveDir,
            )?)
        }
        Some(_) => unlink_at(dir, name),
    }
}

/// Opens the directory `name` in `dir` for listing and changing, first giving it owner
/// read, write and search permission if it lacks them.
fn open_writable(dir: &OwnedFd, name: &[u8]) -> std::io::Result<OwnedFd> {
    writable(dir, name)?;
    open_dir_at(dir, name)
}

/// Gives the directory `name` in `dir` owner read, write and search permission if it
/// lacks them. The change is made through a handle on the directory itself (opened
/// without following a link), so a link swapped in is never changed through.
pub(crate) fn writable(dir: &OwnedFd, name: &[u8]) -> std::io::Result<()> {
    let handle = nix::fcntl::openat(
        dir,
        OsStr::from_bytes(name),
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let stat = nix::sys::stat::fstat(&handle)?;
    let mode = stat.st_mode & 0o7777;
    if mode & 0o700 == 0o700 {
        return Ok(());
    }
    // A handle opened with `O_PATH` cannot be changed directly; its name under
    // /proc/self/fd is the very inode it holds, whatever happened to `name` since.
    let own = format!("/proc/self/fd/{}", handle.as_raw_fd());
    let fixed = std::fs::Permissions::from_mode(mode | 0o700);
    std::fs::set_permissions(own, fixed)
}

#[cfg(test)]
mod tests;
