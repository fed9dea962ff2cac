//! Trees read and edited in-process: the paths that differ between two trees (what
//! `git diff-tree -r --no-renames --raw` prints, in the same order), a tree's files
//! (`git ls-tree -r`), the blob at a path, and a tree with some paths changed.

use std::cmp::Ordering;

use gix_hash::ObjectId;

use super::objects::Objects;
use crate::git::GitError;

/// A mode and an object id.
pub(crate) type Side = (u32, ObjectId);

/// One path whose entry differs between two trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeDiff {
    /// `A`, `D`, `M` or `T` (the kind changed: file, symlink, submodule).
    pub(crate) status: char,
    /// The path from the root, as git stores it.
    pub(crate) path: Vec<u8>,
    /// The entry in the old tree, `None` when added.
    pub(crate) old: Option<Side>,
    /// The entry in the new tree, `None` when deleted.
    pub(crate) new: Option<Side>,
}

const TREE: u32 = 0o040000;

/// One entry of a tree: name, mode, id.
type Entry = (Vec<u8>, u32, ObjectId);

/// Git's order of tree entries: by name, a tree's name read as if it ended in `/`.
fn git_order(a: &Entry, b: &Entry) -> Ordering {
    let (an, bn) = (&a.0, &b.0);
    let common = an.len().min(bn.len());
    an[..common].cmp(&bn[..common]).then_with(|| {
        let next =
            |name: &[u8], mode: u32| name.get(common).copied().or((mode == TREE).then_some(b'/'));
        next(an, a.1).cmp(&next(bn, b.1))
    })
}

/// Whether a tree and a non-tree: how `git_order` tells the same name apart.
fn kind_differs(a: u32, b: u32) -> bool {
    a & 0o170000 != b & 0o170000
}

impl Objects {
    /// The paths that differ between the trees `from` and `to` (hex ids), recursively.
    pub(crate) fn diff_trees(&self, from: &str, to: &str) -> Result<Vec<TreeDiff>, GitError> {
        let mut changes = Vec::new();
        if from == to {
            return Ok(changes);
        }
        let parse = parse_id;
        let odb = self.handle()?;
        let mut prefix = Vec::new();
        let mut reader = Reader {
            odb: &odb,
            buf: Vec::new(),
        };
        reader.walk(
            Some(parse(from)?),
            Some(parse(to)?),
            &mut prefix,
            &mut changes,
        )?;
        Ok(changes)
    }
}

/// A change to make to a tree: a path, and its new mode and id (`None` removes it).
pub(crate) type Edit<'a> = (&'a [u8], Option<Side>);

impl Objects {
    /// Every entry of the tree `tree` (hex id) that is not itself a tree, with its path
    /// from the root, in git's order: what `git ls-tree -r --full-tree` lists.
    pub(crate) fn list_tree(&self, tree: &str) -> Result<Vec<(Vec<u8>, Side)>, GitError> {
        let odb = self.handle()?;
        let mut reader = Reader {
            odb: &odb,
            buf: Vec::new(),
        };
        let mut out = Vec::new();
        let mut stack = vec![(Vec::new(), parse_id(tree)?)];
        // Depth first, children in order: a stack of pending trees in reverse.
        while let Some((prefix, id)) = stack.pop() {
            let mut subtrees = Vec::new();
            for (name, mode, oid) in reader.entries(Some(id))? {
                let mut path = prefix.clone();
                path.extend_from_slice(&name);
                if mode == TREE {
                    path.push(b'/');
                    subtrees.push((path, oid));
                } else {
                    out.push((path, (mode, oid)));
                }
            }
            stack.extend(subtrees.into_iter().rev());
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The mode and id of the entry at `path` in the tree `tree` (hex id), if any.
    pub(crate) fn entry_at(&self, tree: &str, path: &[u8]) -> Result<Option<Side>, GitError> {
        let odb = self.handle()?;
        let mut reader = Reader {
            odb: &odb,
            buf: Vec::new(),
        };
        let mut current = parse_id(tree)?;
        let mut parts = path.split(|b| *b == b'/').peekable();
        while let Some(part) = parts.next() {
            let last = parts.peek().is_none();
            let found = reader
                .entries(Some(current))?
                .into_iter()
                .find(|(name, mode, _)| name == part && (last || *mode == TREE));
            match found {
                Some((_, mode, id)) if last => return Ok(Some((mode, id))),
                Some((_, _, id)) => current = id,
                None => return Ok(None),
            }
        }
        Ok(None)
    }

    /// The tree `base` (hex id) with `edits` made, stored; its id. A path set where a
    /// directory was replaces the directory, and the reverse, as `git update-index`
    /// does; a directory left empty disappears.
    pub(crate) fn edit_tree(&self, base: &str, edits: &[Edit<'_>]) -> Result<ObjectId, GitError> {
        let odb = self.handle()?;
        let mut reader = Reader {
            odb: &odb,
            buf: Vec::new(),
        };
        match reader.edit(self, Some(parse_id(base)?), edits)? {
            Some(id) => Ok(id),
            None => self.write_tree(&gix_object::Tree::empty()),
        }
    }
}

fn parse_id(id: &str) -> Result<ObjectId, GitError> {
    // Words that are no object id name no object the database holds.
    ObjectId::from_hex(id.trim().as_bytes()).map_err(|_| GitError::ObjectMissing {
        id: id.trim().to_string(),
    })
}

struct Reader<'a> {
    odb: &'a super::objects::Checked,
    buf: Vec<u8>,
}

impl Reader<'_> {
    fn entries(&mut self, id: Option<ObjectId>) -> Result<Vec<Entry>, GitError> {
        let Some(id) = id else {
            return Ok(Vec::new());
        };
        let data = self.odb.find(&id, &mut self.buf)?;
        let mut entries = Vec::new();
        for entry in gix_object::TreeRefIter::from_bytes(data.data, id.kind()) {
            let entry = entry.map_err(|e| GitError::ObjectUnreadable {
                id: id.to_string(),
                reason: format!("it is not a tree git can read: {e}"),
            })?;
            let mode = u32::from(entry.mode.value());
            entries.push((entry.filename.to_vec(), mode, entry.oid.to_owned()));
        }
        Ok(entries)
    }

    /// The tree `tree` with `edits` (paths relative to it) made; `None` when empty.
    fn edit(
        &mut self,
        objects: &Objects,
        tree: Option<ObjectId>,
        edits: &[Edit<'_>],
    ) -> Result<Option<ObjectId>, GitError> {
        let mut entries = self.entries(tree)?;
        // Direct edits by name, and the edits below each subdirectory name.
        let mut direct: Vec<(&[u8], Option<Side>)> = Vec::new();
        let mut nested: std::collections::BTreeMap<&[u8], Vec<Edit<'_>>> = Default::default();
        for (path, side) in edits {
            match path.iter().position(|b| *b == b'/') {
                None => direct.push((path, *side)),
                Some(slash) => nested
                    .entry(&path[..slash])
                    .or_default()
                    .push((&path[slash + 1..], *side)),
            }
        }
        for (name, below) in nested {
            let at = entries.iter().position(|(n, m, _)| n == name && *m == TREE);
            let subtree = at.map(|i| entries[i].2);
            let edited = self.edit(objects, subtree, &below)?;
            if let Some(i) = at {
                entries.remove(i);
            }
            if let Some(id) = edited {
                // A directory with files in it replaces a file of its name.
                entries.retain(|(n, m, _)| !(n == name && *m != TREE));
                entries.push((name.to_vec(), TREE, id));
            }
        }
        for (name, side) in direct {
            entries.retain(|(n, m, _)| !(n == name && *m != TREE));
            if let Some((mode, id)) = side {
                // A file replaces a directory of its name.
                entries.retain(|(n, _, _)| n != name);
                entries.push((name.to_vec(), mode, id));
            }
        }
        if entries.is_empty() {
            return Ok(None);
        }
        let mut tree = gix_object::Tree {
            entries: entries
                .into_iter()
                .map(|(name, mode, oid)| gix_object::tree::Entry {
                    mode: super::tree::kind_of(mode).into(),
                    filename: name.into(),
                    oid,
                })
                .collect(),
        };
        tree.entries.sort();
        objects.write_tree(&tree).map(Some)
    }

    fn walk(
        &mut self,
        from: Option<ObjectId>,
        to: Option<ObjectId>,
        prefix: &mut Vec<u8>,
        out: &mut Vec<TreeDiff>,
    ) -> Result<(), GitError> {
        let old = self.entries(from)?;
        let new = self.entries(to)?;
        let (mut i, mut j) = (0, 0);
        while i < old.len() || j < new.len() {
            let order = match (old.get(i), new.get(j)) {
                (Some(a), Some(b)) => git_order(a, b),
                (Some(_), None) => Ordering::Less,
                _ => Ordering::Greater,
            };
            match order {
                Ordering::Less => {
                    self.one(Some(&old[i]), None, prefix, out)?;
                    i += 1;
                }
                Ordering::Greater => {
                    self.one(None, Some(&new[j]), prefix, out)?;
                    j += 1;
                }
                Ordering::Equal => {
                    self.one(Some(&old[i]), Some(&new[j]), prefix, out)?;
                    i += 1;
                    j += 1;
                }
            }
        }
        Ok(())
    }

    /// One name present in either tree or both (then of the same tree-ness).
    fn one(
        &mut self,
        old: Option<&Entry>,
        new: Option<&Entry>,
        prefix: &mut Vec<u8>,
        out: &mut Vec<TreeDiff>,
    ) -> Result<(), GitError> {
        let same = matches!((old, new), (Some(a), Some(b)) if a.1 == b.1 && a.2 == b.2);
        if same {
            return Ok(());
        }
        let Some(name) = old.or(new).map(|e| e.0.as_slice()) else {
            return Ok(());
        };
        let len = prefix.len();
        prefix.extend_from_slice(name);
        let tree = |e: Option<&Entry>| e.filter(|e| e.1 == TREE).map(|e| e.2);
        if old.or(new).is_some_and(|e| e.1 == TREE) {
            prefix.push(b'/');
            self.walk(tree(old), tree(new), prefix, out)?;
        } else {
            let status = match (old, new) {
                (None, _) => 'A',
                (_, None) => 'D',
                (Some(a), Some(b)) if kind_differs(a.1, b.1) => 'T',
                _ => 'M',
            };
            out.push(TreeDiff {
                status,
                path: prefix.clone(),
                old: old.map(|e| (e.1, e.2)),
                new: new.map(|e| (e.1, e.2)),
            });
        }
        prefix.truncate(len);
        Ok(())
    }
}
