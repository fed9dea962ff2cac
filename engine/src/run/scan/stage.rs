//! The user's index brought in line with a commit for the paths it committed, written
//! in-process as `git reset -q COMMIT -- PATHS` writes it, where git would do nothing
//! more than replace those entries.

use std::io::Write as _;
use std::path::Path;

use gix_hash::ObjectId;
use gix_index::entry::Flags;
use gix_index::entry::Mode;
use gix_index::entry::Stat;
use nix::sys::stat::FileStat;

use super::Located;
use super::objects::store_error;
use crate::git::GitError;

/// What configuration bears on writing the index beyond its bytes: syncing it to disk
/// (`core.fsync`), its permissions (`core.sharedRepository`), hooks
/// (`core.hooksPath`, for `post-index-change`) and whatever an include brings. A config
/// file that mentions any of these words leaves the update to git.
const STAGE_MENTIONS: [&[u8]; 4] = [b"fsync", b"sharedrepository", b"hookspath", b"include"];

/// One committed path: its bytes as git stores them, and its mode and blob in the
/// commit (`None` when the commit removed it).
pub(crate) type Staged<'a> = (&'a [u8], Option<(u32, ObjectId)>);

impl Located {
    /// Sets the index entries of `paths` to the commit's, as `git reset -q COMMIT --
    /// PATHS` does: each entry replaced, added or removed, its stat data taken from the
    /// file when the file holds exactly the committed content (else left for git to
    /// check), the directories above it marked for git to build again; then written under
    /// the index's lock file and renamed over it.
    ///
    /// `Ok(false)` leaves the update to git, having changed nothing: an index this does
    /// not write back byte for byte as it read it (another version, extensions beyond the
    /// cached trees, no trailing checksum, a conflict in it), a path flagged
    /// (skip-worktree, intent-to-add, assume-unchanged), a submodule, an entry that would
    /// stand where a directory of entries is, a lock held, a `post-index-change` hook, or
    /// configuration that bears on the write ([`STAGE_MENTIONS`], or any given in the
    /// environment).
    pub(crate) fn stage(&self, paths: &[Staged<'_>]) -> Result<bool, GitError> {
        self.stage_in(paths, &|var| std::env::var_os(var))
    }

    /// [`Located::stage`] with the environment `env`.
    pub(super) fn stage_in(
        &self,
        paths: &[Staged<'_>],
        env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<bool, GitError> {
        let kind = super::object_format(&self.common_dir);
        let configured = ["GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG"]
            .iter()
            .any(|var| env(var).is_some());
        let index = self.git_dir.join("index");
        if configured
            || self
                .common_dir
                .join("hooks/post-index-change")
                .symlink_metadata()
                .is_ok()
            || !index.symlink_metadata().is_ok_and(|m| m.is_file())
            || !super::settings::mentions_none_of(
                &super::settings::config_files(self, env),
                &STAGE_MENTIONS,
            )
        {
            return Ok(false);
        }
        let lock = self.git_dir.join("index.lock");
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
        {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(false),
            Err(e) => return Err(crate::run::safe_fs::io_error("lock", &lock, e)),
        };
        let written = self
            .staged_index(&index, paths, kind)
            .and_then(|bytes| match bytes {
                Some(bytes) => file
                    .write_all(&bytes)
                    .and_then(|()| std::fs::rename(&lock, &index))
                    .map(|()| true)
                    .map_err(|e| crate::run::safe_fs::io_error("write", &index, e)),
                None => Ok(false),
            });
        if !matches!(written, Ok(true)) {
            let _ = std::fs::remove_file(&lock);
        }
        written
    }

    /// The bytes of the index at `path` with `paths` staged, or `None` when this does
    /// not write it as git would (see [`Located::stage`]).
    fn staged_index(
        &self,
        path: &Path,
        paths: &[Staged<'_>],
        kind: gix_hash::Kind,
    ) -> Result<Option<Vec<u8>>, GitError> {
        let Some(read) = crate::observe::read_regular_file(path) else {
            return Ok(None);
        };
        let options = gix_index::decode::Options::default();
        let Ok((state, _)) =
            gix_index::State::from_bytes(&read, filetime::FileTime::zero(), kind, options)
        else {
            return Ok(None);
        };
        let mut file = gix_index::File::from_state(state, path);
        // Only an index written back exactly as read (checksum included) is written here:
        // whatever this would drop or change is left to git.
        if encode(&file)? != read
            || file.is_sparse()
            || file.entries().iter().any(|e| e.stage_raw() != 0)
        {
            return Ok(None);
        }
        let mut added = Vec::new();
        for (name, new) in paths {
            match self.stage_one(&mut file, name, *new, kind) {
                Some(None) => {}
                Some(Some(entry)) => added.push((*name, entry)),
                None => return Ok(None),
            }
        }
        for (name, (stat, id, mode)) in added {
            file.dangerously_push_entry(stat, id, Flags::empty(), mode, name.into());
        }
        file.sort_entries();
        if stands_over_a_directory(&file, paths) {
            return Ok(None);
        }
        encode(&file).map(Some)
    }

    /// Sets `name`'s entry in `file` to `new` (removed when `None`) and marks the cached
    /// trees above it for rebuilding. Gives the entry to add when `file` has none for
    /// `name` (added after all paths are staged, so lookups stay sorted), `None` when the
    /// entry is one this leaves to git.
    fn stage_one(
        &self,
        file: &mut gix_index::File,
        name: &[u8],
        new: Option<(u32, ObjectId)>,
        kind: gix_hash::Kind,
    ) -> Option<Option<(Stat, ObjectId, Mode)>> {
        let at = file.entry_index_by_path(name.into());
        let flagged = Flags::SKIP_WORKTREE | Flags::INTENT_TO_ADD | Flags::ASSUME_VALID;
        if let Ok(at) = at
            && file.entries()[at].flags.intersects(flagged)
        {
            return None;
        }
        if let Some(tree) = file.tree_mut() {
            invalidate(tree, name);
        }
        let Some((bits, id)) = new else {
            if let Ok(at) = at {
                file.remove_entry_at_index(at);
            }
            return Some(None);
        };
        let mode = match bits {
            0o100644 => Mode::FILE,
            0o100755 => Mode::FILE_EXECUTABLE,
            0o120000 => Mode::SYMLINK,
            // A submodule's entry is git's to settle.
            _ => return None,
        };
        let stat = self
            .stat_if_holding(name, mode, &id, kind)
            .unwrap_or_default();
        match at {
            Ok(at) => {
                let entry = &mut file.entries_mut()[at];
                entry.id = id;
                entry.mode = mode;
                entry.stat = stat;
                entry.flags = Flags::empty();
                Some(None)
            }
            Err(_) => Some(Some((stat, id, mode))),
        }
    }

    /// The stat data of the work tree's file `name` when it is of `mode` and holds
    /// exactly blob `id`, unchanged while it was read; `None` otherwise.
    fn stat_if_holding(
        &self,
        name: &[u8],
        mode: Mode,
        id: &ObjectId,
        kind: gix_hash::Kind,
    ) -> Option<Stat> {
        let path = self.root.join(crate::repo_path::os(name));
        let before = nix::sys::stat::lstat(&path).ok()?;
        let kind_of = before.st_mode & nix::libc::S_IFMT;
        let content = match mode {
            Mode::SYMLINK if kind_of == nix::libc::S_IFLNK => {
                use std::os::unix::ffi::OsStrExt as _;
                std::fs::read_link(&path)
                    .ok()?
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            }
            Mode::FILE | Mode::FILE_EXECUTABLE if kind_of == nix::libc::S_IFREG => {
                let executable = before.st_mode & 0o100 != 0;
                if executable != (mode == Mode::FILE_EXECUTABLE) {
                    return None;
                }
                crate::observe::read_regular_file(&path)?
            }
            _ => return None,
        };
        let hashed = gix_object::compute_hash(kind, gix_object::Kind::Blob, &content).ok()?;
        let after = nix::sys::stat::lstat(&path).ok()?;
        (hashed == *id && same_stat(&before, &after)).then(|| stat_of(&after))
    }
}

/// The index `file` as git writes it: entries, the cached trees, the trailing checksum.
fn encode(file: &gix_index::File) -> Result<Vec<u8>, GitError> {
    let mut bytes = Vec::new();
    let options = gix_index::write::Options {
        extensions: gix_index::write::Extensions::Given {
            tree_cache: true,
            end_of_index_entry: false,
        },
        skip_hash: false,
    };
    file.write_to(&mut bytes, options)
        .map_err(|e| store_error("encode the index", &std::io::Error::other(e.to_string())))?;
    Ok(bytes)
}

/// Whether a staged path stands where other entries make it a directory, or below one
/// that is an entry: git settles those itself.
fn stands_over_a_directory(file: &gix_index::File, paths: &[Staged<'_>]) -> bool {
    let entries: std::collections::HashSet<&[u8]> =
        file.entries().iter().map(|e| &**e.path(file)).collect();
    paths
        .iter()
        .filter(|(_, new)| new.is_some())
        .any(|(name, _)| {
            let mut dir = Vec::from(*name);
            dir.push(b'/');
            let below = file
                .entries()
                .iter()
                .any(|e| e.path(file).starts_with(&dir));
            let above = name
                .iter()
                .enumerate()
                .filter(|(_, b)| **b == b'/')
                .any(|(i, _)| entries.contains(&name[..i]));
            below || above
        })
}

/// Marks the cached tree of every directory above `path` for rebuilding, and drops the
/// one of a directory `path` itself replaces, as git's `cache_tree_invalidate_path`.
fn invalidate(tree: &mut gix_index::extension::Tree, path: &[u8]) {
    tree.num_entries = None;
    match path.iter().position(|b| *b == b'/') {
        None => tree.children.retain(|child| child.name.as_slice() != path),
        Some(slash) => {
            let (name, rest) = (&path[..slash], &path[slash + 1..]);
            if let Some(child) = tree.children.iter_mut().find(|c| c.name.as_slice() == name) {
                invalidate(child, rest);
            }
        }
    }
}

/// Whether two `lstat`s of one path saw the same file, unchanged.
fn same_stat(a: &FileStat, b: &FileStat) -> bool {
    (
        a.st_dev,
        a.st_ino,
        a.st_mode,
        a.st_size,
        a.st_mtime,
        a.st_mtime_nsec,
        a.st_ctime,
        a.st_ctime_nsec,
    ) == (
        b.st_dev,
        b.st_ino,
        b.st_mode,
        b.st_size,
        b.st_mtime,
        b.st_mtime_nsec,
        b.st_ctime,
        b.st_ctime_nsec,
    )
}

/// An `lstat` as the index keeps it: each field cut to 32 bits, as git cuts it.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "the index keeps the low 32 bits of each field, as git does"
)]
fn stat_of(meta: &FileStat) -> Stat {
    let time = |secs: i64, nsecs: i64| gix_index::entry::stat::Time {
        secs: secs as u32,
        nsecs: nsecs as u32,
    };
    Stat {
        mtime: time(meta.st_mtime, meta.st_mtime_nsec),
        ctime: time(meta.st_ctime, meta.st_ctime_nsec),
        dev: meta.st_dev as u32,
        ino: meta.st_ino as u32,
        uid: meta.st_uid,
        gid: meta.st_gid,
        size: meta.st_size as u32,
    }
}

#[cfg(test)]
mod tests;
