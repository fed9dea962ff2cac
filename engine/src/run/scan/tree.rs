//! The tree objects of a scanned work tree, written in-process.
//!
//! A directory nothing changed in keeps the tree id the index caches for it, when the
//! cache counts exactly the entries the directory has; every other directory's tree is
//! built from its entries and stored.

use std::collections::HashMap;
use std::collections::HashSet;

use gix_hash::ObjectId;
use gix_index::extension::Tree as CachedTree;
use gix_object::tree::Entry;
use gix_object::tree::EntryKind;

use super::objects::Objects;
use crate::git::GitError;
use crate::run::safe_fs;

/// One entry of the scanned work tree: its path from the root, git mode and object id.
pub(super) struct Item<'a> {
    pub(super) path: &'a [u8],
    pub(super) mode: u32,
    pub(super) id: ObjectId,
}

/// Builds trees over items sorted by path.
pub(super) struct Builder<'a> {
    pub(super) objects: &'a Objects,
    /// The directories (without a trailing slash; the root is empty) with a changed,
    /// added or removed path below them.
    pub(super) touched: HashSet<&'a [u8]>,
}

/// Every directory above `path`, the root (empty) included.
pub(super) fn parents(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::once(&path[..0]).chain(
        path.iter()
            .enumerate()
            .filter(|(_, b)| **b == b'/')
            .map(move |(i, _)| &path[..i]),
    )
}

/// The items of two lists sorted by path, in path order.
pub(super) fn merge<'a>(
    left: impl Iterator<Item = Item<'a>>,
    right: Vec<Item<'a>>,
) -> Vec<Item<'a>> {
    let mut merged = Vec::with_capacity(left.size_hint().0 + right.len());
    let mut right = right.into_iter().peekable();
    for item in left {
        while let Some(next) = right.next_if(|r| r.path < item.path) {
            merged.push(next);
        }
        merged.push(item);
    }
    merged.extend(right);
    merged
}

pub(super) fn kind_of(mode: u32) -> EntryKind {
    match mode {
        0o100755 => EntryKind::BlobExecutable,
        safe_fs::MODE_SYMLINK => EntryKind::Link,
        safe_fs::MODE_GITLINK => EntryKind::Commit,
        0o040000 => EntryKind::Tree,
        _ => EntryKind::Blob,
    }
}

impl Builder<'_> {
    /// The id of the tree of `items` (sorted by path) below `dir`, whose paths start
    /// with `dir` and a slash after the first `skip` bytes; `None` when there are none.
    pub(super) fn build(
        &self,
        dir: &[u8],
        skip: usize,
        items: &[Item<'_>],
        cached: Option<&CachedTree>,
    ) -> Result<Option<ObjectId>, GitError> {
        if items.is_empty() {
            return Ok(None);
        }
        if let Some(cached) = cached
            && cached.num_entries == Some(u32::try_from(items.len()).unwrap_or(u32::MAX))
            && !self.touched.contains(dir)
        {
            return Ok(Some(cached.id));
        }
        let mut entries = Vec::new();
        // Looking a child up by name in a long list would cost a scan each.
        let children: HashMap<&[u8], &CachedTree> = cached
            .map(|c| c.children.iter().map(|t| (t.name.as_slice(), t)).collect())
            .unwrap_or_default();
        let mut i = 0;
        while i < items.len() {
            let rest = &items[i].path[skip..];
            let Some(slash) = rest.iter().position(|b| *b == b'/') else {
                entries.push(Entry {
                    mode: kind_of(items[i].mode).into(),
                    filename: rest.into(),
                    oid: items[i].id,
                });
                i += 1;
                continue;
            };
            let name = &rest[..slash];
            // Everything below `name/` is contiguous in path order.
            let prefix = &items[i].path[..skip + slash + 1];
            let end = i + items[i..]
                .iter()
                .position(|item| !item.path.starts_with(prefix))
                .unwrap_or(items.len() - i);
            let child = children.get(name).copied();
            let sub = &items[i].path[..skip + slash];
            if let Some(id) = self.build(sub, skip + slash + 1, &items[i..end], child)? {
                entries.push(Entry {
                    mode: EntryKind::Tree.into(),
                    filename: name.into(),
                    oid: id,
                });
            }
            i = end;
        }
        entries.sort();
        let tree = gix_object::Tree { entries };
        self.objects.write_tree(&tree).map(Some)
    }
}
