//! The published ledger's git objects: a commit whose tree holds the chain as JSON
//! lines in fixed chunks, the chain head, and the snapshot trees a resume needs.
//!
//! ```text
//! format               "tdd ledger export 1"
//! head                 "<count>:<hash>", the chain head the export holds
//! events/0000000001.jsonl   events 1 to 1024, one stored event per line
//! events/0000001025.jsonl   ... then the events after the last full chunk,
//!                           in pieces of 8 (`layout`)
//! snapshots/<tree id>  the active run's snapshot trees (kept reachable, and carried by a push)
//! ```
//!
//! A full chunk or piece never changes, so an export after a phase writes one blob (the
//! last piece) and three trees, and git stores and sends each finished chunk once.

use gix_hash::ObjectId;
use gix_object::tree::Entry;
use gix_object::tree::EntryKind;

use super::PublishError;
use crate::git::GitError;
use crate::ledger::Anchor;
use crate::ledger::StoredEvent;
use crate::run::scan::Objects;

/// The first line of an export's `format` file.
pub(super) const FORMAT: &str = "tdd ledger export 1\n";
/// Events per chunk file.
pub(super) const CHUNK: u64 = 1024;
/// Events per piece of the stretch after the last full chunk.
pub(super) const PIECE: u64 = 8;

/// The chunk files an export of `count` events holds, as (first, last) event ids: one
/// of [`CHUNK`] events for each full stretch, then the events after them in pieces of
/// [`PIECE`], the last piece holding what is left. A publication after a phase so
/// rewrites one piece, never the whole stretch since the last full chunk; a stretch
/// that fills becomes one chunk. Readers take chunks of any length that follow on.
pub(super) fn layout(count: u64) -> Vec<(u64, u64)> {
    let full = count / CHUNK * CHUNK;
    let chunks = (0..count / CHUNK).map(|k| (k * CHUNK + 1, (k + 1) * CHUNK));
    let pieces = (full..count)
        .step_by(usize::try_from(PIECE).unwrap_or(usize::MAX))
        .map(move |before| (before + 1, (before + PIECE).min(count)));
    chunks.chain(pieces).collect()
}

/// An export read back: the chain it holds and where it came from.
#[derive(Debug)]
pub(super) struct Export {
    /// The chain head it declares.
    pub head: Anchor,
    /// The chunk files by first event id, with their blob ids.
    pub chunks: Vec<(u64, ObjectId)>,
}

/// The name of the chunk file that starts at event `first`.
pub(super) fn chunk_name(first: u64) -> String {
    format!("{first:010}.jsonl")
}

/// The JSON lines of `events`.
pub(super) fn encode_chunk(events: &[StoredEvent]) -> Result<Vec<u8>, PublishError> {
    let mut out = Vec::new();
    for event in events {
        serde_json::to_writer(&mut out, event).map_err(|e| PublishError::Encode(e.to_string()))?;
        out.push(b'\n');
    }
    Ok(out)
}

/// Writes the tree of an export: `chunks` (sorted by first id), `head` and `snapshots`.
pub(super) fn write_tree(
    objects: &Objects,
    head: &Anchor,
    chunks: &[(u64, ObjectId)],
    snapshots: &[ObjectId],
) -> Result<ObjectId, GitError> {
    let blob = |data: &[u8]| objects.write(gix_object::Kind::Blob, data);
    let events = gix_object::Tree {
        entries: chunks
            .iter()
            .map(|(first, id)| entry(EntryKind::Blob, &chunk_name(*first), *id))
            .collect(),
    };
    let mut root = vec![
        entry(EntryKind::Tree, "events", objects.write_tree(&events)?),
        entry(EntryKind::Blob, "format", blob(FORMAT.as_bytes())?),
        entry(
            EntryKind::Blob,
            "head",
            blob(format!("{head}\n").as_bytes())?,
        ),
    ];
    if !snapshots.is_empty() {
        let mut kept: Vec<Entry> = snapshots
            .iter()
            .map(|id| entry(EntryKind::Tree, &id.to_string(), *id))
            .collect();
        kept.sort_by(|a, b| a.filename.cmp(&b.filename));
        kept.dedup_by(|a, b| a.filename == b.filename);
        let tree = objects.write_tree(&gix_object::Tree { entries: kept })?;
        root.push(entry(EntryKind::Tree, "snapshots", tree));
    }
    objects.write_tree(&gix_object::Tree { entries: root })
}

fn entry(kind: EntryKind, name: &str, oid: ObjectId) -> Entry {
    Entry {
        mode: kind.into(),
        filename: name.into(),
        oid,
    }
}

/// Why an export could not be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// git's object store failed, or an object is missing or damaged.
    Git(GitError),
    /// The export is not as tdd writes it; the words name what.
    Malformed(String),
}

impl From<GitError> for ReadError {
    fn from(err: GitError) -> Self {
        ReadError::Git(err)
    }
}

/// Reads the export whose tree is `tree` (the tree of the ref's commit), every object
/// checked against its id. [`ReadError::Malformed`] names what is not as tdd writes it:
/// a missing file, a file where a directory belongs, or an entry naming an object of
/// another kind than its mode says.
pub(super) fn read_tree(
    objects: &crate::run::scan::Checked,
    tree: &gix_hash::oid,
) -> Result<Export, ReadError> {
    let root = list(objects, tree)?;
    let find = |name: &str| root.iter().find(|(n, _, _)| n == name);
    let Some((_, _, format)) = find("format") else {
        return Err(ReadError::Malformed("it has no `format` file".into()));
    };
    if blob(objects, format)? != FORMAT.as_bytes() {
        return Err(ReadError::Malformed(
            "its `format` is not `tdd ledger export 1`".into(),
        ));
    }
    let Some((_, false, head)) = find("head") else {
        return Err(ReadError::Malformed("it has no `head` file".into()));
    };
    let head_text = String::from_utf8_lossy(&blob(objects, head)?).into_owned();
    let head = match Anchor::parse(&head_text) {
        Ok(head) => head,
        Err(e) => return Err(ReadError::Malformed(format!("its `head` {e}"))),
    };
    let Some((_, true, events)) = find("events") else {
        return Err(ReadError::Malformed("it has no `events` directory".into()));
    };
    let mut chunks = Vec::new();
    for (name, is_tree, id) in list(objects, events)? {
        let first = name
            .strip_suffix(".jsonl")
            .filter(|n| n.len() == 10 && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok());
        match first {
            Some(first) if !is_tree => chunks.push((first, id)),
            _ => {
                return Err(ReadError::Malformed(format!(
                    "`events/{name}` is not a chunk file tdd writes"
                )));
            }
        }
    }
    chunks.sort_by_key(|(first, _)| *first);
    if matches!(find("snapshots"), Some((_, false, _))) {
        return Err(ReadError::Malformed(
            "`snapshots` is not a directory".into(),
        ));
    }
    Ok(Export { head, chunks })
}

/// Decodes the chunks of `export` into the chain they hold, checking that each chunk
/// starts where its name says and that together they hold exactly events 1 to the
/// declared head.
pub(super) fn read_events(
    objects: &crate::run::scan::Checked,
    export: &Export,
) -> Result<Vec<StoredEvent>, ReadError> {
    // The blobs read (and checked against their ids) in turn, then decoded on every core.
    let mut blobs = Vec::with_capacity(export.chunks.len());
    for (first, id) in &export.chunks {
        blobs.push((*first, blob(objects, id)?));
    }
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(blobs.len().max(1));
    let per = blobs.len().div_ceil(threads).max(1);
    let decoded: Vec<Result<Vec<StoredEvent>, String>> = std::thread::scope(|scope| {
        let parts: Vec<_> = blobs
            .chunks(per)
            .map(|part| {
                let handle = scope.spawn(move || {
                    part.iter()
                        .map(|(first, data)| decode_chunk(*first, data))
                        .collect::<Vec<_>>()
                });
                (part, handle)
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|(part, handle)| {
                handle.join().unwrap_or_else(|_| {
                    part.iter()
                        .map(|(first, _)| {
                            Err(format!("{} could not be decoded", chunk_name(*first)))
                        })
                        .collect()
                })
            })
            .collect()
    });
    let mut events: Vec<StoredEvent> = Vec::new();
    for ((first, _), chunk) in blobs.iter().zip(decoded) {
        if *first != events.len() as u64 + 1 {
            return Err(ReadError::Malformed(format!(
                "its chunk {} does not follow event {}",
                chunk_name(*first),
                events.len()
            )));
        }
        match chunk {
            Ok(chunk) => events.extend(chunk),
            Err(why) => return Err(ReadError::Malformed(why)),
        }
    }
    let last = events.last().map(|e| (e.id, e.hash.as_str()));
    let declared = (export.head.count, export.head.hash.as_str());
    let matches = match last {
        Some(last) => last == declared,
        None => declared.0 == 0,
    };
    if !matches || events.len() as u64 != export.head.count {
        return Err(ReadError::Malformed(format!(
            "its `head` declares {} events, but its chunks hold {}",
            export.head.count,
            events.len()
        )));
    }
    Ok(events)
}

/// The events of the chunk that starts at event `first`, one stored event per line.
fn decode_chunk(first: u64, data: &[u8]) -> Result<Vec<StoredEvent>, String> {
    let mut events = Vec::new();
    for (line_no, line) in data.split(|b| *b == b'\n').enumerate() {
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice::<StoredEvent>(line) {
            Ok(event) => events.push(event),
            Err(e) => {
                return Err(format!(
                    "line {} of {} is not an event: {e}",
                    line_no + 1,
                    chunk_name(first)
                ));
            }
        }
    }
    Ok(events)
}

/// The entries of tree `id`: name, whether a tree, id. Another kind of object where a
/// tree belongs is [`ReadError::Malformed`].
fn list(
    objects: &crate::run::scan::Checked,
    id: &gix_hash::oid,
) -> Result<Vec<(String, bool, ObjectId)>, ReadError> {
    let mut buf = Vec::new();
    let data = objects.find(id, &mut buf)?;
    if data.kind != gix_object::Kind::Tree {
        return Err(ReadError::Malformed(format!(
            "its directory {id} is a {}, not a directory",
            data.kind
        )));
    }
    let tree = gix_object::TreeRef::from_bytes(data.data, id.kind()).map_err(|e| {
        GitError::ObjectUnreadable {
            id: id.to_string(),
            reason: format!("it is not a tree git can read: {e}"),
        }
    })?;
    Ok(tree
        .entries
        .iter()
        .map(|e| {
            (
                String::from_utf8_lossy(e.filename).into_owned(),
                e.mode.is_tree(),
                e.oid.to_owned(),
            )
        })
        .collect())
}

/// The bytes of blob `id`. Another kind of object where a file belongs is
/// [`ReadError::Malformed`].
fn blob(objects: &crate::run::scan::Checked, id: &gix_hash::oid) -> Result<Vec<u8>, ReadError> {
    let mut buf = Vec::new();
    let data = objects.find(id, &mut buf)?;
    if data.kind != gix_object::Kind::Blob {
        return Err(ReadError::Malformed(format!(
            "its file {id} is a {}, not a file",
            data.kind
        )));
    }
    Ok(data.data.to_vec())
}
