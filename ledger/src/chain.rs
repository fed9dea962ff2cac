//! The hash chain: how events are linked, appended and verified.

use std::path::Path;

use rusqlite::Connection;
use rusqlite::OptionalExtension;
use rusqlite::params;
use sha2::Digest;

use super::Break;
use super::Event;
use super::LedgerError;
use super::Verification;
use super::schema::GUARDS;
use super::seal::Point;
use super::sql_err;

/// The `prev_hash` of the first event.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The SHA-256 that links an event into the chain.
///
/// Every field is length-prefixed, so no two different events hash alike by
/// shifting bytes between fields.
pub fn event_hash(
    prev_hash: &str,
    run_id: Option<&str>,
    kind: &str,
    payload: &str,
    at: &str,
) -> String {
    let mut hasher = sha2::Sha256::new();
    for field in [prev_hash, run_id.unwrap_or(""), kind, payload, at] {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    hex::encode(hasher.finalize())
}

/// Appends inside an open IMMEDIATE transaction, so the head read and the insert are atomic.
pub(crate) fn append_in(
    conn: &Connection,
    run_id: Option<&str>,
    kind: &str,
    payload: &serde_json::Value,
) -> Result<Event, rusqlite::Error> {
    let (count, prev_hash): (i64, String) =
        conn.query_row("SELECT count, hash FROM chain_head WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?;
    let payload_text = payload.to_string();
    let at = super::clock::now_rfc3339();
    let hash = event_hash(&prev_hash, run_id, kind, &payload_text, &at);
    conn.execute(
        "INSERT INTO events (run_id, kind, payload, at, prev_hash, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![run_id, kind, payload_text, at, prev_hash, hash],
    )?;
    let id = conn.last_insert_rowid();
    conn.execute(
        "UPDATE chain_head SET count = ?1, hash = ?2 WHERE id = 1",
        params![count + 1, hash],
    )?;
    Ok(Event {
        id,
        run_id: run_id.map(str::to_string),
        kind: kind.to_string(),
        payload: payload.clone(),
        at,
        prev_hash,
        hash,
    })
}

/// An event's columns: id, run id, kind, payload, time, previous hash, hash.
pub(crate) type Row = (i64, Option<String>, String, String, String, String, String);

pub(crate) fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

/// Reads events oldest first.
pub(crate) fn read_events(
    conn: &Connection,
    run_id: Option<&str>,
    kind: Option<&str>,
    path: &Path,
) -> Result<Vec<Event>, LedgerError> {
    // One run's events come through the (run_id, id) index.
    let sql = if run_id.is_some() {
        "SELECT id, run_id, kind, payload, at, prev_hash, hash FROM events \
         WHERE run_id = ?1 AND (?2 IS NULL OR kind = ?2) ORDER BY id"
    } else {
        "SELECT id, run_id, kind, payload, at, prev_hash, hash FROM events \
         WHERE ?1 IS NULL AND (?2 IS NULL OR kind = ?2) ORDER BY id"
    };
    query(conn, sql, &[&run_id, &kind], path)
}

/// Reads the events of run `run_id` after event `after` (by id), oldest first.
pub(crate) fn read_run_after(
    conn: &Connection,
    run_id: &str,
    after: u64,
    path: &Path,
) -> Result<Vec<Event>, LedgerError> {
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let sql = "SELECT id, run_id, kind, payload, at, prev_hash, hash FROM events \
               WHERE run_id = ?1 AND id > ?2 ORDER BY id";
    query(conn, sql, &[&run_id, &after], path)
}

/// Reads events of any of `kinds` oldest first, optionally only one run's.
pub(crate) fn read_kinds(
    conn: &Connection,
    run_id: Option<&str>,
    kinds: &[&str],
    path: &Path,
) -> Result<Vec<Event>, LedgerError> {
    // The kinds go in as one JSON array parameter, however many there are.
    let kinds = serde_json::json!(kinds).to_string();
    let sql = "SELECT id, run_id, kind, payload, at, prev_hash, hash FROM events \
               WHERE (?1 IS NULL OR run_id = ?1) \
               AND kind IN (SELECT value FROM json_each(?2)) ORDER BY id";
    query(conn, sql, &[&run_id, &kinds], path)
}

/// Reads, oldest first, the events filed under `id` and the unfiled ones (no run id)
/// whose payload holds `id` at the JSON path `tag` (e.g. `$.conduct`).
pub(crate) fn read_filed(
    conn: &Connection,
    id: &str,
    tag: &str,
    kind: Option<&str>,
    path: &Path,
) -> Result<Vec<Event>, LedgerError> {
    let sql = "SELECT id, run_id, kind, payload, at, prev_hash, hash FROM events \
               WHERE run_id = ?1 AND (?2 IS NULL OR kind = ?2) \
               UNION ALL \
               SELECT id, run_id, kind, payload, at, prev_hash, hash FROM events \
               WHERE run_id IS NULL AND json_extract(payload, ?3) = ?1 \
               AND (?2 IS NULL OR kind = ?2) ORDER BY id";
    query(conn, sql, &[&id, &kind, &tag], path)
}

fn query(
    conn: &Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
    path: &Path,
) -> Result<Vec<Event>, LedgerError> {
    let mut stmt = conn.prepare(sql).map_err(sql_err(path))?;
    let rows = stmt.query_map(params, row).map_err(sql_err(path))?;
    let mut events = Vec::new();
    for r in rows {
        events.push(event_of(r.map_err(sql_err(path))?)?);
    }
    Ok(events)
}

/// A row as an event; a payload that is not JSON is [`LedgerError::BadPayload`].
pub(crate) fn event_of(row: Row) -> Result<Event, LedgerError> {
    let (id, run_id, kind, payload, at, prev_hash, hash) = row;
    let payload = serde_json::from_str(&payload).map_err(|_| LedgerError::BadPayload { id })?;
    Ok(Event {
        id,
        run_id,
        kind,
        payload,
        at,
        prev_hash,
        hash,
    })
}

/// Walks the chain in one read transaction, from `from` (a point verified before, its
/// events taken as they are) or from the first event; stops at the first mismatch.
/// With the verification, the chain's head as a point when it is intact.
pub(crate) fn verify(
    conn: &Connection,
    path: &Path,
    from: Option<&Point>,
) -> Result<(Verification, Option<Point>), LedgerError> {
    conn.execute_batch("BEGIN").map_err(sql_err(path))?;
    let result = verify_locked(conn, path, from);
    conn.execute_batch("COMMIT").map_err(sql_err(path))?;
    result
}

/// The point the walk starts after: `from` when its last event is still there with
/// its hash (a seal that names anything else is not trusted: the walk starts at the
/// first event), else the start of the chain.
fn start(conn: &Connection, path: &Path, from: Option<&Point>) -> Result<Point, LedgerError> {
    let genesis = Point {
        events: 0,
        last_id: 0,
        head: GENESIS_HASH.to_string(),
    };
    let Some(from) = from.filter(|p| p.events > 0) else {
        return Ok(genesis);
    };
    let stored: Option<String> = conn
        .query_row(
            "SELECT hash FROM events WHERE id = ?1",
            [from.last_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_err(path))?;
    Ok(if stored.as_deref() == Some(from.head.as_str()) {
        from.clone()
    } else {
        genesis
    })
}

fn verify_locked(
    conn: &Connection,
    path: &Path,
    from: Option<&Point>,
) -> Result<(Verification, Option<Point>), LedgerError> {
    let start = start(conn, path, from)?;
    let mut rehashed: u64 = 0;
    let broken = |events, rehashed, event_id, reason: String| {
        Ok((
            Verification {
                events,
                rehashed,
                broken: Some(Break { event_id, reason }),
            },
            None,
        ))
    };
    let sql = "SELECT id, run_id, kind, payload, at, prev_hash, hash FROM events WHERE id > ?1 ORDER BY id";
    let mut stmt = conn.prepare(sql).map_err(sql_err(path))?;
    let mut rows = stmt.query([start.last_id]).map_err(sql_err(path))?;
    let mut expected_prev = start.head.clone();
    let mut last_id = start.last_id;
    let mut walked: u64 = start.events;
    // Every event's hash is recomputed from its own fields, so the events of a batch are
    // hashed on every core at once; the links between them are checked in order.
    let mut batch: Vec<Row> = Vec::new();
    let mut batch_bytes = 0usize;
    let mut done = false;
    while !done {
        match rows.next().map_err(sql_err(path))? {
            Some(r) => {
                let row = row(r).map_err(sql_err(path))?;
                batch_bytes += row.3.len();
                batch.push(row);
                if batch_bytes < BATCH_BYTES && batch.len() < BATCH_EVENTS {
                    continue;
                }
            }
            None => done = true,
        }
        if let Some((index, reason)) = first_break(&batch, &expected_prev) {
            return broken(
                walked + index as u64,
                rehashed + index as u64,
                Some(batch[index].0),
                reason,
            );
        }
        walked += batch.len() as u64;
        rehashed += batch.len() as u64;
        if let Some(last) = batch.last() {
            expected_prev = last.6.clone();
            last_id = last.0;
        }
        batch.clear();
        batch_bytes = 0;
    }
    let (count, head): (i64, String) = conn
        .query_row("SELECT count, hash FROM chain_head WHERE id = 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(sql_err(path))?;
    if u64::try_from(count).ok() != Some(walked) || head != expected_prev {
        let reason = format!(
            "the chain head records {count} events ending in {}, but {walked} events end in {} (events at the end were removed or the head was edited)",
            short(&head),
            short(&expected_prev)
        );
        return broken(walked, rehashed, None, reason);
    }
    for guard in GUARDS {
        let present: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'trigger' AND name = ?1",
                [guard],
                |r| r.get(0),
            )
            .map_err(sql_err(path))?;
        if present == 0 {
            return broken(
                walked,
                rehashed,
                None,
                format!("the append-only guard `{guard}` was dropped"),
            );
        }
    }
    let head = Point {
        events: walked,
        last_id,
        head: expected_prev,
    };
    Ok((
        Verification {
            events: walked,
            rehashed,
            broken: None,
        },
        Some(head),
    ))
}

/// How many payload bytes are read, at most, before a batch is hashed.
const BATCH_BYTES: usize = 8 * 1024 * 1024;
/// How many events are read, at most, before a batch is hashed.
pub(crate) const BATCH_EVENTS: usize = 4096;

/// The first event of `batch` that breaks the chain, by its index, and why: a
/// `prev_hash` that is not the hash before it (checked first, as a walk in order
/// would), or contents that do not match its hash.
fn first_break(batch: &[Row], prev: &str) -> Option<(usize, String)> {
    let link = batch.iter().enumerate().position(|(i, r)| {
        let before = if i == 0 {
            prev
        } else {
            batch[i - 1].6.as_str()
        };
        r.5 != before
    });
    let edited = first_edited(&batch[..link.unwrap_or(batch.len())]);
    match (edited, link) {
        (Some(i), _) => Some((
            i,
            "its contents do not match its hash (the event was edited)".to_string(),
        )),
        (None, Some(i)) => Some((
            i,
            format!(
                "its prev_hash does not match the event before it (an event was removed or reordered before event {})",
                batch[i].0
            ),
        )),
        (None, None) => None,
    }
}

/// The index of the first event of `rows` whose fields do not hash to its `hash`,
/// hashing on as many threads as the machine has cores.
fn first_edited(rows: &[Row]) -> Option<usize> {
    let matches = |r: &Row| event_hash(&r.5, r.1.as_deref(), &r.2, &r.3, &r.4) == r.6;
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    if threads < 2 || rows.len() < 64 {
        return rows.iter().position(|r| !matches(r));
    }
    let size = rows.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let chunks: Vec<_> = rows
            .chunks(size)
            .enumerate()
            .map(|(n, chunk)| {
                scope.spawn(move || chunk.iter().position(|r| !matches(r)).map(|i| n * size + i))
            })
            .collect();
        // A thread that panicked found nothing it could vouch for: count the event it
        // began with as broken rather than pass the chain.
        chunks
            .into_iter()
            .enumerate()
            .filter_map(|(n, handle)| handle.join().unwrap_or(Some(n * size)))
            .min()
    })
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` rows linked as the ledger links them.
    fn chain(n: usize) -> Vec<Row> {
        let mut prev = GENESIS_HASH.to_string();
        (0..n)
            .map(|i| {
                let payload = format!("{{\"i\":{i}}}");
                let at = "2026-01-01T00:00:00Z".to_string();
                let hash = event_hash(&prev, Some("r"), "note", &payload, &at);
                let row = (
                    i as i64 + 1,
                    Some("r".to_string()),
                    "note".to_string(),
                    payload,
                    at,
                    prev.clone(),
                    hash.clone(),
                );
                prev = hash;
                row
            })
            .collect()
    }

    #[test]
    fn the_first_break_is_found_in_whichever_thread_hashes_it() {
        let rows = chain(300);
        assert_eq!(first_break(&rows, GENESIS_HASH), None);
        for at in [0, 1, 63, 64, 149, 150, 151, 298, 299] {
            let mut edited = rows.clone();
            edited[at].3 = "{\"i\":-1}".to_string();
            let (index, reason) = first_break(&edited, GENESIS_HASH).expect("found");
            assert_eq!(index, at);
            assert!(reason.contains("edited"), "{reason}");
        }
    }

    #[test]
    fn an_earlier_break_wins_whatever_its_kind() {
        let rows = chain(300);
        // An edit late, a broken link early: the link is reported.
        let mut broken = rows.clone();
        broken[280].3 = "{}".to_string();
        broken[40].5 = GENESIS_HASH.to_string();
        let (index, reason) = first_break(&broken, GENESIS_HASH).expect("found");
        assert_eq!(index, 40);
        assert!(reason.contains("prev_hash"), "{reason}");
        // An edit early, a broken link late: the edit is reported.
        let mut broken = rows.clone();
        broken[20].3 = "{}".to_string();
        broken[200].5 = GENESIS_HASH.to_string();
        assert_eq!(first_break(&broken, GENESIS_HASH).map(|b| b.0), Some(20));
        // Both at one event: the link is checked first, as a walk in order would.
        let mut broken = rows.clone();
        broken[90].3 = "{}".to_string();
        broken[90].5 = GENESIS_HASH.to_string();
        let (index, reason) = first_break(&broken, GENESIS_HASH).expect("found");
        assert_eq!(index, 90);
        assert!(reason.contains("prev_hash"), "{reason}");
        // A batch that does not follow the one before it breaks at its first event.
        assert_eq!(first_break(&rows[1..], GENESIS_HASH).map(|b| b.0), Some(0));
    }
}
