//! HEAD read and the engine's own refs written in-process, where the repository keeps
//! its refs as files; anything else (a reftable, an odd HEAD) is left to git.

use std::io::Write as _;

use gix_hash::ObjectId;

use super::Located;
use super::objects::Objects;
use super::refs_are_files;
use crate::git::GitError;
use crate::run::safe_fs;

impl Located {
    /// The commit HEAD names and its tree, read from the ref files and the object
    /// database, the commit checked against its id; `Ok(None)` when HEAD is unborn or
    /// stored in a way this does not read, an error when the commit is missing or damaged.
    pub(crate) fn head(&self, objects: &Objects) -> Result<Option<(ObjectId, ObjectId)>, GitError> {
        let Some(commit) = self.head_id() else {
            return Ok(None);
        };
        let tree = objects.tree_of_commit(&commit)?;
        Ok(Some((commit, tree)))
    }

    /// The commit id HEAD names, from the ref files; `None` when HEAD is unborn or stored
    /// in a way this does not read.
    fn head_id(&self) -> Option<ObjectId> {
        match self.head_ref()? {
            HeadRef::Branch(name) => match self.read_ref(&format!("refs/heads/{name}")) {
                RefRead::Found(id) => Some(id),
                RefRead::Absent | RefRead::Unread => None,
            },
            HeadRef::Detached(id) => Some(id),
        }
    }

    /// What HEAD names, from its file: `None` when the refs are not files or HEAD is
    /// not a branch of `refs/heads/` or a commit id (the caller then asks git).
    pub(crate) fn head_ref(&self) -> Option<HeadRef> {
        if !refs_are_files(&self.common_dir) {
            return None;
        }
        let head = crate::observe::read_regular_file(&self.git_dir.join("HEAD"))?;
        let head = head.trim_ascii();
        match head.strip_prefix(b"ref:") {
            Some(name) => {
                let name = std::str::from_utf8(name.trim_ascii()).ok()?;
                let branch = name.strip_prefix("refs/heads/")?;
                safe_ref_name(name).then(|| HeadRef::Branch(branch.to_string()))
            }
            None => ObjectId::from_hex(head).ok().map(HeadRef::Detached),
        }
    }

    /// The id ref `name` (`refs/heads/...`, `refs/tdd/...`) holds: its loose file (read
    /// only when the file itself is no link), else its line in `packed-refs`.
    pub(crate) fn read_ref(&self, name: &str) -> RefRead {
        let shared = name.starts_with("refs/heads/") || name.starts_with("refs/tdd/");
        if !shared || !safe_ref_name(name) || !refs_are_files(&self.common_dir) {
            return RefRead::Unread;
        }
        let loose = self.common_dir.join(name);
        match std::fs::symlink_metadata(&loose) {
            Ok(meta) if meta.is_file() => {
                match crate::observe::read_regular_file(&loose).map(|text| {
                    ObjectId::from_hex(text.trim_ascii()).map_or(RefRead::Unread, RefRead::Found)
                }) {
                    Some(read) => read,
                    None => RefRead::Unread,
                }
            }
            // A directory of that name holds other refs, not this one.
            Ok(meta) if meta.is_dir() => self.packed(name),
            Ok(_) => RefRead::Unread,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.packed(name),
            Err(_) => RefRead::Unread,
        }
    }

    /// Ref `name`'s line in `packed-refs`.
    fn packed(&self, name: &str) -> RefRead {
        match self.packed_refs() {
            Packed::None => RefRead::Absent,
            Packed::Unread => RefRead::Unread,
            Packed::Refs(refs) => refs
                .into_iter()
                .find(|(line_name, _)| line_name == name)
                .map_or(RefRead::Absent, |(_, id)| RefRead::Found(id)),
        }
    }

    /// The refs `packed-refs` lists, read only when every line is as git writes it (a
    /// header, `<id> <name>`, a tag's peeled `^<id>`, each ended by a newline) and
    /// every name one this reads; anything else is left to git.
    fn packed_refs(&self) -> Packed {
        let path = self.common_dir.join("packed-refs");
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Packed::None,
            Ok(meta) if meta.is_file() && meta.len() <= MAX_PACKED => {}
            _ => return Packed::Unread,
        }
        let Some(text) = crate::observe::read_regular_file(&path) else {
            return Packed::Unread;
        };
        if !text.is_empty() && !text.ends_with(b"\n") {
            return Packed::Unread;
        }
        let mut refs = Vec::new();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            if line.starts_with(b"#") || line.starts_with(b"^") {
                continue;
            }
            let parsed = line.iter().position(|b| *b == b' ').and_then(|space| {
                let id = ObjectId::from_hex(&line[..space]).ok()?;
                let name = std::str::from_utf8(&line[space + 1..]).ok()?;
                safe_ref_name(name).then(|| (name.to_string(), id))
            });
            match parsed {
                Some(entry) => refs.push(entry),
                None => return Packed::Unread,
            }
        }
        Packed::Refs(refs)
    }

    /// Every ref under `prefix` (`refs/tdd/<run id>/`) and the id it holds, loose files
    /// over `packed-refs` lines, sorted by name; `None` when the refs are not files or
    /// one cannot be read here (the caller then asks git).
    pub(crate) fn refs_under(&self, prefix: &str) -> Option<Vec<(String, ObjectId)>> {
        if !prefix.starts_with("refs/tdd/")
            || !prefix.ends_with('/')
            || !safe_ref_name(prefix.trim_end_matches('/'))
            || !refs_are_files(&self.common_dir)
        {
            return None;
        }
        let mut found = std::collections::BTreeMap::new();
        match self.packed_refs() {
            Packed::None => {}
            Packed::Unread => return None,
            Packed::Refs(refs) => {
                found.extend(
                    refs.into_iter()
                        .filter(|(name, _)| name.starts_with(prefix)),
                );
            }
        }
        let mut dirs = vec![prefix.trim_end_matches('/').to_string()];
        while let Some(dir) = dirs.pop() {
            let path = self.common_dir.join(&dir);
            // A directory that is a link is not listed: git's own refs are directories.
            match std::fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                _ => return None,
            }
            let Ok(listing) = std::fs::read_dir(&path) else {
                return None;
            };
            for entry in listing {
                let entry = entry.ok()?;
                let name = format!("{dir}/{}", entry.file_name().to_str()?);
                if name.ends_with(".lock") {
                    continue;
                }
                match entry.file_type().ok()? {
                    kind if kind.is_dir() => dirs.push(name),
                    kind if kind.is_file() => match self.read_ref(&name) {
                        RefRead::Found(id) => {
                            found.insert(name, id);
                        }
                        RefRead::Absent => {}
                        RefRead::Unread => return None,
                    },
                    _ => return None,
                }
            }
        }
        Some(found.into_iter().collect())
    }

    /// Points `refs/tdd/<name>` at a new commit of `tree` (message `message`, the
    /// engine's own identity), so the tree stays reachable. `Ok(false)` when the refs
    /// are not files; the caller then asks git.
    pub(crate) fn keep_tree(
        &self,
        objects: &Objects,
        name: &str,
        tree: &str,
        message: &str,
    ) -> Result<bool, GitError> {
        if !refs_are_files(&self.common_dir) || !safe_ref_name(name) {
            return Ok(false);
        }
        let secs = crate::run::stamp::now();
        let who = format!("tdd <tdd@localhost> {secs} +0000");
        let body = format!("tree {tree}\nauthor {who}\ncommitter {who}\n\n{message}\n");
        let commit = objects.write(gix_object::Kind::Commit, body.as_bytes())?;
        let path = self.common_dir.join("refs/tdd").join(name);
        let Some(dir) = path.parent() else {
            return Ok(false);
        };
        std::fs::create_dir_all(dir).map_err(|e| safe_fs::io_error("create", dir, e))?;
        write_ref_file(
            &path,
            &commit,
            |lock, e| safe_fs::io_error("lock", lock, e),
            || Ok(true),
        )
    }
}

/// Writes `id` to the ref file `path` as git writes a ref: into a lock file beside it,
/// made new (so one held by another fails, as `locked` says), then renamed over it.
/// `check` runs while the lock is held: an error refuses the write, `false` leaves it to
/// git. The lock is removed whenever the ref is not written. `Ok(true)` when written.
pub(super) fn write_ref_file(
    path: &std::path::Path,
    id: &ObjectId,
    locked: impl FnOnce(&std::path::Path, std::io::Error) -> GitError,
    check: impl FnOnce() -> Result<bool, GitError>,
) -> Result<bool, GitError> {
    let lock = path.with_file_name(format!(
        "{}.lock",
        path.file_name().and_then(|n| n.to_str()).unwrap_or("ref")
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&lock)
        .map_err(|e| locked(&lock, e))?;
    let written = check().and_then(|write| {
        if !write {
            return Ok(false);
        }
        file.write_all(format!("{id}\n").as_bytes())
            .and_then(|()| std::fs::rename(&lock, path))
            .map_err(|e| crate::run::safe_fs::io_error("write", path, e))
            .map(|()| true)
    });
    if !matches!(written, Ok(true)) {
        let _ = std::fs::remove_file(&lock);
    }
    written
}

/// What configuration bears on the update of a ref outside `refs/heads/`: a reflog for
/// every ref (`core.logAllRefUpdates = always`; the value `true` that `git init` writes
/// keeps none for it), hooks (`core.hooksPath`), the files' permissions
/// (`core.sharedRepository`) and whatever an include brings. A config file that
/// mentions any of these words leaves the update to git.
const MOVE_MENTIONS: [&[u8]; 4] = [b"always", b"hookspath", b"sharedrepository", b"include"];

impl Located {
    /// Moves the engine's ref `name` (under `refs/tdd/`) to `new` from `old` (`None`: it
    /// must not exist), as `git update-ref NAME NEW OLD` does: under the ref's lock file,
    /// the value checked once the lock is held, so a concurrent update makes this one
    /// fail rather than be lost. `Ok(false)` leaves the move to git, changing nothing:
    /// refs that are not files, a ref this does not read, a reflog kept for it, a
    /// `reference-transaction` hook, or configuration that bears on the update (see
    /// [`MOVE_MENTIONS`], and any given in the environment).
    pub(crate) fn move_ref(
        &self,
        name: &str,
        new: &ObjectId,
        old: Option<&ObjectId>,
    ) -> Result<bool, GitError> {
        self.move_ref_in(name, new, old, &|var| std::env::var_os(var))
    }

    /// [`Located::move_ref`] with the environment `env`.
    pub(super) fn move_ref_in(
        &self,
        name: &str,
        new: &ObjectId,
        old: Option<&ObjectId>,
        env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<bool, GitError> {
        let configured = ["GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG"]
            .iter()
            .any(|var| env(var).is_some());
        let exists = |path: std::path::PathBuf| path.symlink_metadata().is_ok();
        if !name.starts_with("refs/tdd/")
            || !safe_ref_name(name)
            || !refs_are_files(&self.common_dir)
            || configured
            || exists(self.common_dir.join("logs").join(name))
            || exists(self.common_dir.join("hooks/reference-transaction"))
            || !super::settings::mentions_none_of(
                &super::settings::config_files(self, env),
                &MOVE_MENTIONS,
            )
        {
            return Ok(false);
        }
        let path = self.common_dir.join(name);
        let Some(dir) = path.parent() else {
            return Ok(false);
        };
        // Nothing is made or written through a link: a directory of the ref's path
        // that is one leaves the move to git.
        let mut below = self.common_dir.clone();
        for part in name.split('/') {
            below.push(part);
            if below
                .symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
            {
                return Ok(false);
            }
        }
        std::fs::create_dir_all(dir).map_err(|e| safe_fs::io_error("create", dir, e))?;
        let refused = |why: String| GitError::RefNotMoved {
            reference: name.to_string(),
            why,
            lock: None,
        };
        let locked = |lock: &std::path::Path, e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                GitError::RefNotMoved {
                    reference: name.to_string(),
                    why: format!(
                        "{} exists: another process is updating it, or one stopped before it \
                         finished",
                        lock.display()
                    ),
                    lock: Some(lock.to_path_buf()),
                }
            } else {
                safe_fs::io_error("lock", lock, e)
            }
        };
        write_ref_file(&path, new, locked, || match (self.read_ref(name), old) {
            (RefRead::Found(id), Some(old)) => (id == *old)
                .then_some(true)
                .ok_or_else(|| refused(format!("it is at {id}, not at {old} where it was read"))),
            (RefRead::Absent, None) => Ok(true),
            (RefRead::Found(id), None) => Err(refused(format!("it exists (at {id})"))),
            (RefRead::Absent, Some(old)) => Err(refused(format!("it is gone, not at {old}"))),
            (RefRead::Unread, _) => Ok(false),
        })
    }
}

/// What HEAD names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeadRef {
    /// A branch, by its short name (`main`, `feature/x`).
    Branch(String),
    /// A commit, HEAD detached.
    Detached(ObjectId),
}

/// What the ref files say of one ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RefRead {
    /// The ref holds this id.
    Found(ObjectId),
    /// No such ref.
    Absent,
    /// Stored in a way this does not read (a symbolic ref, a reftable, a file that is
    /// not one): the caller asks git.
    Unread,
}

/// The largest `packed-refs` read here; a larger one is left to git.
const MAX_PACKED: u64 = 64 * 1024 * 1024;

/// What `packed-refs` holds, as far as this reads it.
enum Packed {
    /// There is none.
    None,
    /// Not as git writes it, or too large: git is asked.
    Unread,
    /// Its refs, by name.
    Refs(Vec<(String, ObjectId)>),
}

/// Whether `name` is a ref name this reads and writes as a path: no empty, `..` or
/// hidden component, no `.lock` ending, none of the characters git refuses.
pub(super) fn safe_ref_name(name: &str) -> bool {
    name.split('/')
        .all(|p| !p.is_empty() && p != ".." && !p.starts_with('.') && !p.ends_with(".lock"))
        && !name
            .bytes()
            .any(|b| b.is_ascii_control() || b" ~^:?*[\\".contains(&b))
}
