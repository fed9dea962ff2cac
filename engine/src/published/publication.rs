//! One publication, in two halves: what it reads of the ledger ([`gather`]), then the
//! git objects and the ref it writes ([`Gathered::write`]), which touch the ledger no
//! more and so may go on beside another use of its connection (a checkpoint).

use std::collections::HashMap;
use std::path::Path;

use gix_hash::ObjectId;

use super::PublishError;
use super::Published;
use super::export;
use crate::git::Git;
use crate::git::GitError;
use crate::ledger::Anchor;
use crate::ledger::Ledger;
use crate::ledger::StoredEvent;
use crate::run::scan::Located;

/// What a publication read: of the ledger, all it needs; of the previous export, the
/// chunks it can keep.
pub(crate) enum Gathered {
    /// The ref already holds this chain head: nothing to write.
    Current(Published),
    /// A new export to write.
    New(Export),
}

/// A new export, read and not yet written.
pub(crate) struct Export {
    reference: String,
    work_tree: std::path::PathBuf,
    located: Located,
    head: Anchor,
    previous: Option<ObjectId>,
    /// The previous export's chunks by (first, last) event: the same bytes again where
    /// this chain continues the one it holds.
    reused: HashMap<(u64, u64), ObjectId>,
    /// The events of the chunks not reused, in id order.
    events: Vec<StoredEvent>,
}

/// Reads what publishing the ledger at its current head under the ref of the branch
/// checked out in `work_tree` takes: `Ok(None)` with HEAD detached.
pub(crate) fn gather(ledger: &Ledger, work_tree: &Path) -> Result<Option<Gathered>, PublishError> {
    let Some(branch) = super::current_branch(work_tree)? else {
        return Ok(None);
    };
    let reference = super::ledger_ref(&branch);
    let git = Git::new(work_tree);
    let located = crate::run::scan::locate(work_tree)?;
    let objects = located.objects();
    let head = ledger.anchor()?;
    let previous = super::resolve(&located, &git, &reference)?;
    let mut reused: HashMap<(u64, u64), ObjectId> = HashMap::new();
    if let Some(prev) = &previous {
        let checked = objects.handle()?;
        let tree = objects.tree_of_commit(prev)?;
        let old = match export::read_tree(&checked, &tree) {
            Ok(old) => Some(old),
            // One tdd did not write is written over.
            Err(export::ReadError::Malformed(_)) => None,
            Err(export::ReadError::Git(err)) => return Err(err.into()),
        };
        if let Some(old) = old {
            if old.head == head {
                return Ok(Some(Gathered::Current(Published {
                    reference,
                    commit: prev.to_string(),
                    events: head.count,
                    written: false,
                })));
            }
            if ledger.hash_at(old.head.count)?.as_deref() == Some(old.head.hash.as_str()) {
                let lasts = old
                    .chunks
                    .iter()
                    .skip(1)
                    .map(|(first, _)| first.saturating_sub(1));
                let lasts = lasts.chain(std::iter::once(old.head.count));
                reused = old
                    .chunks
                    .iter()
                    .zip(lasts)
                    .map(|((first, id), last)| ((*first, last), *id))
                    .collect();
            }
        }
    }
    let from = export::layout(head.count)
        .into_iter()
        .find(|span| !reused.contains_key(span))
        .map(|(first, _)| first - 1);
    let events = match from {
        Some(from) => ledger.stored_events_after(from)?,
        None => Vec::new(),
    };
    Ok(Some(Gathered::New(Export {
        reference,
        work_tree: work_tree.to_path_buf(),
        located,
        head,
        previous,
        reused,
        events,
    })))
}

impl Gathered {
    /// Writes the export (its chunks, its tree keeping the trees `snapshots` reachable,
    /// its commit) and moves the ref to it, only from the value it was read at: a
    /// concurrent publisher makes this one fail, never lose the other's export.
    pub(crate) fn write(self, snapshots: &[String]) -> Result<Published, PublishError> {
        match self {
            Gathered::Current(published) => Ok(published),
            Gathered::New(export) => export.write(snapshots),
        }
    }
}

impl Export {
    fn write(self, snapshots: &[String]) -> Result<Published, PublishError> {
        let Export {
            reference,
            work_tree,
            located,
            head,
            previous,
            reused,
            events,
        } = self;
        let objects = located.objects();
        let wanted = export::layout(head.count);
        let mut chunks = Vec::with_capacity(wanted.len());
        for (first, last) in wanted {
            if let Some(id) = reused.get(&(first, last)) {
                chunks.push((first, *id));
                continue;
            }
            // The events are in id order: those of the span are one slice of them.
            let span = &events[events.partition_point(|e| e.id < first)..];
            let span = &span[..span.partition_point(|e| e.id <= last)];
            let Some(start) = span.first().map(|e| e.id) else {
                continue;
            };
            let blob = objects.write(gix_object::Kind::Blob, &export::encode_chunk(span)?)?;
            chunks.push((start, blob));
        }
        let kept: Vec<ObjectId> = snapshots
            .iter()
            .filter_map(|id| ObjectId::from_hex(id.as_bytes()).ok())
            .collect();
        let tree = export::write_tree(&objects, &head, &chunks, &kept)?;
        let commit = write_commit(&objects, tree, previous.as_ref(), &head)?;
        // In-process where git would do no more than move the ref file; else by git.
        if !located.move_ref(&reference, &commit, previous.as_ref())? {
            let old = previous.map_or_else(
                || ObjectId::null(objects.kind()).to_string(),
                |p| p.to_string(),
            );
            Git::new(&work_tree).output([
                "update-ref",
                "-m",
                "tdd: publish the ledger",
                &reference,
                &commit.to_string(),
                &old,
            ])?;
        }
        Ok(Published {
            reference,
            commit: commit.to_string(),
            events: head.count,
            written: true,
        })
    }
}

fn write_commit(
    objects: &crate::run::scan::Objects,
    tree: ObjectId,
    parent: Option<&ObjectId>,
    head: &Anchor,
) -> Result<ObjectId, GitError> {
    let secs = crate::ledger::clock::unix_seconds();
    let who = format!("tdd <tdd@localhost> {secs} +0000");
    let parent = parent.map(|p| format!("parent {p}\n")).unwrap_or_default();
    let body = format!(
        "tree {tree}\n{parent}author {who}\ncommitter {who}\n\ntdd ledger: {} events\n\n{}: {head}\n",
        head.count,
        crate::ledger::LEDGER_TRAILER
    );
    objects.write(gix_object::Kind::Commit, body.as_bytes())
}
