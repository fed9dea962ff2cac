//! The clean room: a checkout of exactly one git tree, where deciding runs happen.
//!
//! GREEN, the REFACTOR close, the sensitivity check and the baseline run here, never
//! in the agent's live directory. The checkout lives under the ledger home (one per
//! work tree) and is kept between gates so incremental builds stay warm; before each
//! use it is reset to exactly the tree to judge:
//!
//! - files are written from git's objects by the engine itself, so no filter,
//!   attribute or index flag of the repository takes part;
//! - every file not in the tree is removed (caches, bytecode, build output, files a
//!   previous run's tests wrote), and a file is kept only when its bytes, read from
//!   disk as they are now, hash to the tree's id for its path with the tree's mode; no
//!   record of what was written before is trusted, since anyone who can write the
//!   clean room can write a record beside it;
//! - the only things that are not from the tree are the dependency directories of
//!   [`DEPENDENCY_DIRS`], linked to the live tree's (see docs/engine.md for why they
//!   are trusted).

use std::collections::HashMap;
use std::collections::HashSet;
use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::path::PathBuf;

use sha2::Digest;

use super::beneath;
use super::beneath::Kind;
use super::beneath::Way;
use super::candidate::os_path;
use super::links::Link;
use crate::git::GitError;
use crate::run::scan::Objects;

/// Directories of installed dependencies that a clean room links to the live tree's
/// instead of taking from the commit (they are ignored, and far too large to copy).
pub const DEPENDENCY_DIRS: &[&str] = &["node_modules", ".venv", "venv"];

/// Why the clean room could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum CleanRoomError {
    /// git failed to list or read the tree.
    #[error("while reading the tree to judge")]
    Git(#[from] GitError),
    /// A file of the clean room could not be written or removed.
    #[error("while preparing the clean room at {}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// git printed something this module cannot read.
    #[error("git printed an unexpected object record: {0}")]
    Protocol(String),
    /// The tree holds a symlink whose target is outside the tree: a run on it would read
    /// bytes that no commit holds.
    #[error("{path} is a symlink to {target}, outside the repository")]
    LinkLeavesTree {
        /// The link's path in the tree (lossy UTF-8).
        path: String,
        /// Where it points (lossy UTF-8).
        target: String,
    },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> CleanRoomError + '_ {
    move |source| CleanRoomError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// One work tree's clean room.
#[derive(Debug, Clone)]
pub struct CleanRoom {
    root: PathBuf,
    /// Where earlier versions kept a record of what they wrote; removed, never read.
    legacy_manifest: PathBuf,
}

/// One file of the tree: mode and object id.
type Entries = HashMap<Vec<u8>, (String, String)>;

impl CleanRoom {
    /// The clean room of `work_tree`, kept under `state_dir` (the ledger's directory).
    pub fn of(state_dir: &Path, work_tree: &Path) -> CleanRoom {
        let key = hex::encode(sha2::Sha256::digest(
            work_tree.as_os_str().as_encoded_bytes(),
        ));
        let base = state_dir.join("cleanroom").join(&key[..16]);
        CleanRoom {
            root: base.join("tree"),
            legacy_manifest: base.join("manifest"),
        }
    }

    /// The checkout's root: the work-tree root of every deciding run.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// A directory beside the checkout for build output that must survive resets.
    pub fn build_dir(&self, name: &str) -> PathBuf {
        let build = self.root.with_file_name("build");
        // Never `build/`: a path ending in a separator follows a link put there.
        if name.is_empty() {
            build
        } else {
            build.join(name)
        }
    }

    /// A directory for the build output of runs in the live work tree this clean room
    /// belongs to: that work tree's own, apart from the clean room's build directory and
    /// from every other work tree's.
    pub fn live_build_dir(&self, name: &str) -> PathBuf {
        self.root.with_file_name("live-build").join(name)
    }

    /// Removes the build output of the live work tree's runs, for a work tree that is
    /// going away (a verifier's scratch worktree). Only a real directory is removed: a
    /// link in its place is removed itself, never followed.
    pub fn remove_live_build(&self) {
        let dir = self.root.with_file_name("live-build");
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {
                let _ = std::fs::remove_dir_all(&dir);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(&dir);
            }
            Err(_) => {}
        }
        if let Some(base) = dir.parent() {
            // The clean room's own directory, when nothing else is in it.
            let _ = std::fs::remove_dir(base);
        }
    }

    /// Resets the checkout to exactly `tree` of the repository at `live`, linking the
    /// dependency directories found at `roots` (relative project roots) of the live tree.
    /// A tree with a symlink that leads outside it is refused before anything is written
    /// ([`CleanRoomError::LinkLeavesTree`]).
    pub fn materialize(
        &self,
        live: &Path,
        tree: &str,
        roots: &[String],
    ) -> Result<(), CleanRoomError> {
        let objects = crate::run::scan::locate(live)?.objects();
        let entries = list_tree(&objects, tree)?;
        let links = dependency_links(live, roots, &entries);
        if let Some((path, target)) = links_leaving(&objects, &entries, &links)?
            .into_iter()
            .next()
        {
            return Err(CleanRoomError::LinkLeavesTree {
                path: String::from_utf8_lossy(&path).into_owned(),
                target: String::from_utf8_lossy(&target).into_owned(),
            });
        }
        self.real_dirs()?;
        match self.reset_to(&objects, &entries, &links) {
            Ok(()) => Ok(()),
            // Something a run left cannot be changed in place (a read-only directory, a
            // file turned into a directory): start from an empty checkout instead.
            Err(CleanRoomError::Io { .. }) => {
                remove_all(&self.root)?;
                self.reset_to(&objects, &entries, &links)
            }
            Err(other) => Err(other),
        }
    }

    /// Makes every directory of the clean room (its own directory under the state
    /// directory, the checkout, the build directory) a real directory: one replaced by a
    /// link, a file or a pipe is removed (the link itself, never what it points to) and
    /// made anew, so a reset or a build never writes or removes anything outside.
    fn real_dirs(&self) -> Result<(), CleanRoomError> {
        let base = self.root.parent().unwrap_or(&self.root);
        let mut dirs: Vec<PathBuf> = base.parent().map(Path::to_path_buf).into_iter().collect();
        dirs.extend([base.to_path_buf(), self.root.clone(), self.build_dir("")]);
        for dir in &dirs {
            real_dir(dir).map_err(io(dir))?;
        }
        Ok(())
    }

    fn reset_to(
        &self,
        objects: &Objects,
        entries: &Entries,
        links: &[(PathBuf, PathBuf)],
    ) -> Result<(), CleanRoomError> {
        std::fs::create_dir_all(&self.root).map_err(io(&self.root))?;
        remove_all(&self.legacy_manifest)?;
        let top = beneath::open_dir(&self.root).map_err(io(&self.root))?;
        let mut candidates = Vec::new();
        sweep(&top, &self.root, b"", entries, links, &mut candidates)?;
        let kept = keep_matching(objects, entries, &top, candidates)?;
        remove_empty_dirs(&top, &self.root)?;
        let missing: Vec<(&Vec<u8>, &(String, String))> = entries
            .iter()
            .filter(|(path, _)| !kept.contains(*path))
            .collect();
        write_objects(objects, &top, &self.root, &missing)?;
        for (rel, target) in links {
            let at = self.root.join(rel);
            let link = || -> std::io::Result<()> {
                let (parents, name) = beneath::parents_and_name(rel.as_os_str().as_bytes())?;
                let dir = beneath::dir_of(&top, &parents, Way::Make)?;
                if beneath::kind_at(&dir, name)?.is_none() {
                    nix::unistd::symlinkat(target, &dir, os_path(name))?;
                }
                Ok(())
            };
            link().map_err(io(&at))?;
        }
        Ok(())
    }
}

/// Makes `dir` a real directory: a link, a file or a pipe in its place is removed (the
/// link itself, never what it points to) and a directory made, with any missing above.
pub(crate) fn real_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => std::fs::remove_file(dir)?,
        Err(_) => {}
    }
    std::fs::create_dir_all(dir)
}

/// Removes `path` and, for a directory, everything in it, giving directories back their
/// write permission first (a test may have taken it away); links are removed, never
/// followed, and nothing outside `path` is removed ([`beneath::remove_tree_at`]).
fn remove_all(path: &Path) -> Result<(), CleanRoomError> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Ok(());
    };
    let dir = match beneath::open_dir(parent) {
        Ok(dir) => dir,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(parent)(e)),
    };
    beneath::remove_tree_at(&dir, name.as_bytes()).map_err(io(path))
}

/// Whether a tree path is Python bytecode, which the clean room never writes: bytecode
/// is what the interpreter runs instead of the source next to it, so a committed `.pyc`
/// could stand in for code the gates never read.
fn is_bytecode(path: &[u8]) -> bool {
    path.ends_with(b".pyc")
        || path.ends_with(b".pyo")
        || path
            .split(|b| *b == b'/')
            .any(|part| part == b"__pycache__")
}

fn list_tree(objects: &Objects, tree: &str) -> Result<Entries, CleanRoomError> {
    let mut entries = Entries::new();
    for (path, (mode, id)) in objects.list_tree(tree)? {
        if !is_bytecode(&path) {
            entries.insert(path, (format!("{mode:06o}"), id.to_string()));
        }
    }
    Ok(entries)
}

/// The symlinks of `entries` that resolve outside the tree, or into one of the dependency
/// directories `links` brings in from the live tree, with their targets.
fn links_leaving(
    objects: &Objects,
    entries: &Entries,
    links: &[(PathBuf, PathBuf)],
) -> Result<Vec<Link>, CleanRoomError> {
    let mut reader = objects.reader()?;
    let mut targets = HashMap::new();
    for (path, (mode, id)) in entries {
        if mode == "120000" {
            targets.insert(path.clone(), reader.read(id)?.to_vec());
        }
    }
    let outside: Vec<Vec<u8>> = links
        .iter()
        .map(|(rel, _)| rel.as_os_str().as_bytes().to_vec())
        .collect();
    Ok(super::links::leaving_tree(&targets, &outside))
}

/// Dependency directories of the live tree to link, by path relative to the checkout.
fn dependency_links(live: &Path, roots: &[String], entries: &Entries) -> Vec<(PathBuf, PathBuf)> {
    let mut dirs: Vec<String> = roots
        .iter()
        .map(|r| r.trim_matches('/').trim_start_matches("./").to_string())
        .map(|r| if r == "." { String::new() } else { r })
        .collect();
    dirs.push(String::new());
    dirs.sort();
    dirs.dedup();
    let mut links = Vec::new();
    for dir in dirs {
        for name in DEPENDENCY_DIRS {
            let rel = Path::new(&dir).join(name);
            let prefix = rel.as_os_str().as_bytes();
            let tracked = entries
                .keys()
                .any(|p| p.starts_with(prefix) && p.get(prefix.len()).is_none_or(|b| *b == b'/'));
            let target = live.join(&rel);
            if !tracked && std::fs::metadata(&target).is_ok_and(|m| m.is_dir()) {
                links.push((rel, target));
            }
        }
    }
    links
}

/// A file the tree also has at its path: kept if its bytes are the tree's.
struct Candidate {
    key: Vec<u8>,
    path: PathBuf,
    symlink: bool,
}

/// Walks the directory `dir` (at `at`, the tree path `rel`), removing every file, link
/// or other thing the tree does not have at its path (links to the dependency
/// directories excepted), and collecting the rest as candidates to keep. Each directory
/// is opened beneath the one before it and each removal is made in the directory that
/// holds the entry, so a link swapped in midway is never followed.
fn sweep(
    dir: &OwnedFd,
    at: &Path,
    rel: &[u8],
    entries: &Entries,
    links: &[(PathBuf, PathBuf)],
    candidates: &mut Vec<Candidate>,
) -> Result<(), CleanRoomError> {
    for (name, kind) in beneath::entries(dir).map_err(io(at))? {
        let path = at.join(os_path(&name));
        let key = if rel.is_empty() {
            name.clone()
        } else {
            [rel, b"/", &name].concat()
        };
        match kind {
            Kind::Dir => {
                let inner = beneath::open_dir_at(dir, &name).map_err(io(&path))?;
                sweep(&inner, &path, &key, entries, links, candidates)?;
            }
            Kind::Link if is_dependency_link(dir, &name, &key, links) => {}
            Kind::File | Kind::Link if entries.contains_key(&key) => {
                let symlink = kind == Kind::Link;
                candidates.push(Candidate { key, path, symlink });
            }
            _ => beneath::unlink_at(dir, &name).map_err(io(&path))?,
        }
    }
    Ok(())
}

/// Whether the link `name` in `dir` (the tree path `key`) is the link a reset makes to a
/// dependency directory of the live tree.
fn is_dependency_link(
    dir: &OwnedFd,
    name: &[u8],
    key: &[u8],
    links: &[(PathBuf, PathBuf)],
) -> bool {
    links.iter().any(|(l, t)| {
        l.as_os_str().as_bytes() == key
            && nix::fcntl::readlinkat(dir, os_path(name)).is_ok_and(|r| r == t.as_os_str())
    })
}

/// Hashes every candidate from disk, on every core, and removes each one whose mode or
/// bytes are not the tree's (in its own directory, opened beneath `top`); returns the
/// paths kept.
fn keep_matching(
    objects: &Objects,
    entries: &Entries,
    top: &OwnedFd,
    candidates: Vec<Candidate>,
) -> Result<HashSet<Vec<u8>>, CleanRoomError> {
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(8);
    let per = candidates.len().div_ceil(workers).max(64);
    let matched: Vec<Result<Vec<bool>, GitError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = candidates
            .chunks(per)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|c| matches_tree(objects, entries, c))
                        .collect::<Result<Vec<bool>, GitError>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(GitError::Failed {
                        args: "hash the clean room".into(),
                        stderr: "a hashing thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    let mut flags = Vec::with_capacity(candidates.len());
    for chunk in matched {
        flags.extend(chunk?);
    }
    let mut kept = HashSet::new();
    for (candidate, matches) in candidates.into_iter().zip(flags) {
        if matches {
            kept.insert(candidate.key);
        } else {
            remove_beneath(top, &candidate.key).map_err(io(&candidate.path))?;
        }
    }
    Ok(kept)
}

/// Removes the file or link at the tree path `path` beneath `top`, reaching its
/// directory without following a link.
fn remove_beneath(top: &OwnedFd, path: &[u8]) -> std::io::Result<()> {
    let (parents, name) = beneath::parents_and_name(path)?;
    beneath::unlink_at(beneath::dir_of(top, &parents, Way::Open)?, name)
}

/// Whether the file at `candidate` holds, as it is on disk now, exactly the tree's
/// object and mode for its path.
fn matches_tree(
    objects: &Objects,
    entries: &Entries,
    candidate: &Candidate,
) -> Result<bool, GitError> {
    let Some((mode, id)) = entries.get(&candidate.key) else {
        return Ok(false);
    };
    Ok(
        match objects.record(&candidate.path, candidate.symlink, false) {
            Ok(Some((found_mode, found_id))) => {
                format!("{found_mode:06o}") == *mode
                    && gix_hash::ObjectId::from_hex(id.as_bytes())
                        .is_ok_and(|want| want == found_id)
            }
            // Larger than any file recorded: not the tree's, and written again unread.
            Ok(None) | Err(GitError::FileTooLarge { .. }) => false,
            Err(e) => return Err(e),
        },
    )
}

/// Removes every directory beneath `dir` (at `at`) left empty by the sweep (`dir` itself
/// stays): an empty directory is no part of a tree, and one named like a package could
/// be imported as one.
fn remove_empty_dirs(dir: &OwnedFd, at: &Path) -> Result<bool, CleanRoomError> {
    let mut empty = true;
    for (name, kind) in beneath::entries(dir).map_err(io(at))? {
        let path = at.join(os_path(&name));
        if kind == Kind::Dir {
            let inner = beneath::open_dir_at(dir, &name).map_err(io(&path))?;
            if remove_empty_dirs(&inner, &path)? {
                nix::unistd::unlinkat(dir, os_path(&name), nix::unistd::UnlinkatFlags::RemoveDir)
                    .map_err(|e| io(&path)(e.into()))?;
                continue;
            }
        }
        empty = false;
    }
    Ok(empty)
}

/// Writes the objects of `missing` into the checkout `top` (at `root`).
fn write_objects(
    objects: &Objects,
    top: &OwnedFd,
    root: &Path,
    missing: &[(&Vec<u8>, &(String, String))],
) -> Result<(), CleanRoomError> {
    let mut reader = None;
    for (path, (mode, id)) in missing {
        let at = root.join(os_path(path));
        // Written one directory at a time, a path of any length could be made; but no
        // runner could open one longer than the kernel takes whole (`PATH_MAX`).
        if at.as_os_str().len() >= nix::libc::PATH_MAX as usize {
            let too_long = std::io::Error::from_raw_os_error(nix::libc::ENAMETOOLONG);
            return Err(io(&at)(too_long));
        }
        // A submodule is an empty directory: its own tree is not part of this repository.
        if mode == "160000" {
            beneath::components(path)
                .and_then(|parts| beneath::dir_of(top, &parts, Way::Make))
                .map_err(io(&at))?;
            continue;
        }
        let reader = match &mut reader {
            Some(reader) => reader,
            None => reader.insert(objects.reader()?),
        };
        write_entry(top, path, mode, reader.read(id)?).map_err(io(&at))?;
    }
    Ok(())
}

/// Writes one entry at `path` beneath `top`, never through a link: the checkout was
/// swept, so nothing is at `path`, and each directory on the way is made and opened
/// without following one ([`beneath::dir_of`]).
fn write_entry(top: &OwnedFd, path: &[u8], mode: &str, bytes: &[u8]) -> std::io::Result<()> {
    use nix::fcntl::OFlag;
    let (parents, name) = beneath::parents_and_name(path)?;
    let dir = beneath::dir_of(top, &parents, Way::Make)?;
    let name = os_path(name);
    if mode == "120000" {
        return nix::unistd::symlinkat(os_path(bytes), &dir, name).map_err(Into::into);
    }
    let perms = if mode == "100755" { 0o755 } else { 0o644 };
    let fd = nix::fcntl::openat(
        &dir,
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::from_bits_truncate(perms),
    )?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.set_permissions(std::fs::Permissions::from_mode(perms))
}

#[cfg(test)]
mod tests;
