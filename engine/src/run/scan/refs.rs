//! HEAD read and the engine's own refs written in-process, where the repository keeps
//! its refs as files; anything else (a reftable, an odd HEAD) is left to git.

use std::io::Write as _;

use gix_hash::ObjectId;

use super::Located;
use super::objects::Objects;
use super::objects::store_error;
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
        if !refs_are_files(&self.common_dir) {
            return None;
        }
        let head = crate::observe::read_regular_file(&self.git_dir.join("HEAD"))?;
        let head = head.trim_ascii();
        match head.strip_prefix(b"ref:") {
            Some(name) => self.resolve(name.trim_ascii()),
            None => ObjectId::from_hex(head).ok(),
        }
    }

    /// The id of the branch ref `name` (`refs/heads/...`): its loose file, else its line
    /// in `packed-refs`.
    fn resolve(&self, name: &[u8]) -> Option<ObjectId> {
        let name = std::str::from_utf8(name).ok()?;
        if !name.starts_with("refs/heads/") || name.split('/').any(|p| p.is_empty() || p == "..") {
            return None;
        }
        let loose = self.common_dir.join(name);
        match std::fs::symlink_metadata(&loose) {
            Ok(_) => {
                let text = crate::observe::read_regular_file(&loose)?;
                ObjectId::from_hex(text.trim_ascii()).ok()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let packed =
                    crate::observe::read_regular_file(&self.common_dir.join("packed-refs"))?;
                packed.split(|b| *b == b'\n').find_map(|line| {
                    let (id, rest) =
                        line.split_at_checked(line.iter().position(|b| *b == b' ')?)?;
                    (rest.get(1..)? == name.as_bytes())
                        .then(|| ObjectId::from_hex(id).ok())
                        .flatten()
                })
            }
            Err(_) => None,
        }
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
        let safe = name
            .split('/')
            .all(|p| !p.is_empty() && p != ".." && !p.starts_with('.') && !p.ends_with(".lock"))
            && !name
                .bytes()
                .any(|b| b.is_ascii_control() || b" ~^:?*[\\".contains(&b));
        if !refs_are_files(&self.common_dir) || !safe {
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
        // As git writes a ref: a lock file beside it, renamed over it.
        let lock = path.with_file_name(format!(
            "{}.lock",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("ref")
        ));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
            .map_err(|e| safe_fs::io_error("lock", &lock, e))?;
        let written = file
            .write_all(format!("{commit}\n").as_bytes())
            .and_then(|()| std::fs::rename(&lock, &path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&lock);
            return Err(store_error("write a ref", &e));
        }
        Ok(true)
    }
}
