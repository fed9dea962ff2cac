//! The chain as stored, byte for byte, read out for publishing and taken in from a
//! published copy.
//!
//! A published ledger is only as good as what taking it in checks: [`Ledger::import`]
//! appends nothing unless every incoming event continues the local chain (the one at
//! the local head has the local head's hash), links to the one before it, and hashes
//! to its own `hash` from its own fields. A copy edited anywhere, reordered or spliced
//! is refused whole; the local ledger is never changed by a refused import.

use rusqlite::OptionalExtension;
use rusqlite::TransactionBehavior;
use rusqlite::params;

use super::Ledger;
use super::LedgerError;
use super::chain::GENESIS_HASH;
use super::chain::event_hash;
use super::sql_err;

/// One event exactly as the ledger stores it: the payload is the stored text the hash
/// covers, not a re-encoding of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredEvent {
    /// Position in the chain, from 1.
    pub id: u64,
    /// The run the event belongs to, if any.
    pub run_id: Option<String>,
    /// The snake_case kind.
    pub kind: String,
    /// The payload's stored JSON text.
    pub payload: String,
    /// UTC RFC 3339 time of recording.
    pub at: String,
    /// The hash of the event before it (the genesis hash for event 1).
    pub prev_hash: String,
    /// This event's hash.
    pub hash: String,
}

impl StoredEvent {
    /// Whether the event's fields hash to its `hash`.
    pub fn hashes_right(&self) -> bool {
        event_hash(
            &self.prev_hash,
            self.run_id.as_deref(),
            &self.kind,
            &self.payload,
            &self.at,
        ) == self.hash
    }
}

/// Why a published chain was not taken in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportRefused {
    /// The incoming chain and the local one differ at an event both hold.
    #[error(
        "the ledger here holds {local} events and the published one differs from it at event {at} (two ledgers went separate ways)"
    )]
    Diverged {
        /// Events in the local chain.
        local: u64,
        /// The first event id at which they differ (or the local head).
        at: u64,
    },
    /// The incoming chain is itself broken at an event.
    #[error("the published ledger is broken at event {id}: {reason}")]
    Broken {
        /// The event.
        id: u64,
        /// What does not match.
        reason: String,
    },
}

/// What an import did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Imported {
    /// Events in the local chain before.
    pub before: u64,
    /// Events appended.
    pub appended: u64,
}

/// Checks that `events` are a whole chain from event 1: numbered from 1 without a gap,
/// each linked to the one before and hashing to its own `hash`, with JSON payloads. What
/// [`Ledger::import`] checks of what it appends, for a caller that must not create a
/// ledger for a chain it would refuse.
pub fn check_chain(events: &[StoredEvent]) -> Result<(), ImportRefused> {
    match first_broken(events, 1, GENESIS_HASH) {
        Some((id, reason)) => Err(ImportRefused::Broken { id, reason }),
        None => Ok(()),
    }
}

impl Ledger {
    /// The events after event `after`, oldest first, exactly as stored.
    pub fn stored_events_after(&self, after: u64) -> Result<Vec<StoredEvent>, LedgerError> {
        let path = &self.path;
        let mut stmt = self
            .conn
            .prepare(
                "SELECT id, run_id, kind, payload, at, prev_hash, hash FROM events \
                 WHERE id > ?1 ORDER BY id",
            )
            .map_err(sql_err(path))?;
        let rows = stmt
            .query_map([i64::try_from(after).unwrap_or(i64::MAX)], |r| {
                Ok(StoredEvent {
                    id: u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                    run_id: r.get(1)?,
                    kind: r.get(2)?,
                    payload: r.get(3)?,
                    at: r.get(4)?,
                    prev_hash: r.get(5)?,
                    hash: r.get(6)?,
                })
            })
            .map_err(sql_err(path))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(sql_err(path))
    }

    /// Takes in `events`, a whole published chain from event 1, oldest first: the
    /// events this ledger already holds are checked to be the same (the incoming event
    /// at the local head must carry the local head's hash, which covers every event
    /// before it), and the rest are appended after checking each links to the one
    /// before and hashes to its own `hash`. All or nothing, in one write transaction.
    pub fn import(
        &mut self,
        events: &[StoredEvent],
    ) -> Result<Result<Imported, ImportRefused>, LedgerError> {
        let path = self.path.clone();
        // Not an append of tdd's own: the next check walks the whole chain.
        self.reseal.release();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(&path))?;
        let (count, head): (i64, String) = tx
            .query_row("SELECT count, hash FROM chain_head WHERE id = 1", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .map_err(sql_err(&path))?;
        let local = u64::try_from(count).unwrap_or(0);
        let published = u64::try_from(events.len()).unwrap_or(u64::MAX);
        if published < local {
            // Behind this ledger: nothing to take in if it is this ledger's own prefix.
            let ours: Option<String> = match events.last() {
                Some(last) => tx
                    .query_row(
                        "SELECT hash FROM events WHERE id = ?1",
                        [i64::try_from(last.id).unwrap_or(i64::MAX)],
                        |r| r.get(0),
                    )
                    .optional()
                    .map_err(sql_err(&path))?,
                None => Some(GENESIS_HASH.to_string()),
            };
            let same = events.last().is_none_or(|last| last.id == published)
                && ours.as_deref() == Some(events.last().map_or(GENESIS_HASH, |l| l.hash.as_str()));
            return Ok(if same {
                Ok(Imported {
                    before: local,
                    appended: 0,
                })
            } else {
                Err(ImportRefused::Diverged {
                    local,
                    at: published,
                })
            });
        }
        if let Err(refused) = continues(events, local, &head) {
            return Ok(Err(refused));
        }
        let mut prev = head;
        let mut appended = 0u64;
        // Prepared once for the whole chain: a published ledger holds thousands.
        let mut insert = tx
            .prepare(
                "INSERT INTO events (id, run_id, kind, payload, at, prev_hash, hash) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(sql_err(&path))?;
        let appending = events
            .get(usize::try_from(local).unwrap_or(usize::MAX)..)
            .unwrap_or_default();
        if let Some((id, reason)) = first_broken(appending, local + 1, &prev) {
            return Ok(Err(ImportRefused::Broken { id, reason }));
        }
        for event in appending {
            insert
                .execute(params![
                    i64::try_from(event.id).unwrap_or(i64::MAX),
                    event.run_id,
                    event.kind,
                    event.payload,
                    event.at,
                    event.prev_hash,
                    event.hash
                ])
                .map_err(sql_err(&path))?;
            prev = event.hash.clone();
            appended += 1;
        }
        drop(insert);
        if appended > 0 {
            tx.execute(
                "UPDATE chain_head SET count = ?1, hash = ?2 WHERE id = 1",
                params![count + i64::try_from(appended).unwrap_or(0), prev],
            )
            .map_err(sql_err(&path))?;
        }
        tx.commit().map_err(sql_err(&path))?;
        Ok(Ok(Imported {
            before: local,
            appended,
        }))
    }
}

/// Whether `events` hold the local chain of `local` events ending in `head` as their
/// prefix.
fn continues(events: &[StoredEvent], local: u64, head: &str) -> Result<(), ImportRefused> {
    if local == 0 {
        return Ok(());
    }
    let Some(at_head) = usize::try_from(local - 1).ok().and_then(|i| events.get(i)) else {
        return Err(ImportRefused::Diverged { local, at: local });
    };
    if at_head.id != local || at_head.hash != head {
        return Err(ImportRefused::Diverged { local, at: local });
    }
    Ok(())
}

/// Why `event`, expected as event `id` after the hash `prev`, does not belong there:
/// its number or its link (its own contents are [`unsound`]'s).
fn unlinked(event: &StoredEvent, id: u64, prev: &str) -> Option<String> {
    if event.id != id {
        return Some(format!(
            "it is numbered {} where event {id} belongs",
            event.id
        ));
    }
    let expected_prev = if id == 1 { GENESIS_HASH } else { prev };
    if event.prev_hash != expected_prev {
        return Some("its prev_hash does not match the event before it".to_string());
    }
    None
}

/// Why `event`'s own contents are not an event of a chain: they do not hash to its hash,
/// or its payload is not JSON.
fn unsound(event: &StoredEvent) -> Option<&'static str> {
    if !event.hashes_right() {
        return Some("its contents do not match its hash (the event was edited)");
    }
    // Checked for being JSON without building it: a published chain holds megabytes.
    if serde_json::from_str::<serde::de::IgnoredAny>(&event.payload).is_err() {
        return Some("its payload is not JSON");
    }
    None
}

/// The first of `events` (expected as events `first_id`, `first_id + 1`, ... after the
/// hash `prev`) that does not belong there, with its id and why. Each event's own
/// contents are checked on every core, the links in order.
fn first_broken(events: &[StoredEvent], first_id: u64, prev: &str) -> Option<(u64, String)> {
    let contents = crate::parallel::on_every_core(events, 64, unsound, |_| {
        Some("it could not be checked (a checking thread failed)")
    });
    let mut prev = prev;
    for ((i, event), unsound) in events.iter().enumerate().zip(contents) {
        let reason =
            unlinked(event, first_id + i as u64, prev).or_else(|| unsound.map(str::to_string));
        if let Some(reason) = reason {
            return Some((event.id, reason));
        }
        prev = &event.hash;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger_with(n: usize) -> (tempfile::TempDir, Ledger) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut ledger = Ledger::open(&dir.path().join("ledger.db")).expect("opens");
        for i in 0..n {
            ledger
                .append(Some("run-1"), "note", &serde_json::json!({ "i": i }))
                .expect("appends");
        }
        (dir, ledger)
    }

    #[test]
    fn a_published_chain_continues_an_empty_or_shorter_ledger_and_verifies() {
        let (_a, source) = ledger_with(7);
        let published = source.stored_events_after(0).expect("reads");
        let (_b, mut empty) = ledger_with(0);
        let done = empty.import(&published).expect("runs").expect("taken in");
        assert_eq!(
            done,
            Imported {
                before: 0,
                appended: 7
            }
        );
        assert_eq!(empty.verify().expect("verifies").broken, None);
        assert_eq!(empty.stored_events_after(0).expect("reads"), published);
        // Again: nothing to append.
        let again = empty.import(&published).expect("runs").expect("taken in");
        assert_eq!(again.appended, 0);
        // A prefix of it takes in the rest.
        let (_c, mut short) = ledger_with(0);
        short
            .import(&published[..3])
            .expect("runs")
            .expect("taken in");
        let rest = short.import(&published).expect("runs").expect("taken in");
        assert_eq!(
            rest,
            Imported {
                before: 3,
                appended: 4
            }
        );
    }

    #[test]
    fn a_payload_that_is_not_json_is_refused_even_when_it_hashes_right() {
        let (_a, source) = ledger_with(2);
        let mut published = source.stored_events_after(0).expect("reads");
        let last = &mut published[1];
        last.payload = "{\"i\": 1".to_string();
        last.hash = event_hash(
            &last.prev_hash,
            last.run_id.as_deref(),
            &last.kind,
            &last.payload,
            &last.at,
        );
        let (_b, mut target) = ledger_with(0);
        let refused = target
            .import(&published)
            .expect("runs")
            .expect_err("refused");
        assert!(
            matches!(&refused, ImportRefused::Broken { id: 2, reason } if reason.contains("not JSON")),
            "{refused}"
        );
    }

    #[test]
    fn an_edited_spliced_or_foreign_chain_is_refused_whole() {
        let (_a, source) = ledger_with(5);
        let published = source.stored_events_after(0).expect("reads");
        let (_b, mut target) = ledger_with(0);
        let mut edited = published.clone();
        edited[3].payload = "{\"i\":99}".to_string();
        let refused = target.import(&edited).expect("runs").expect_err("refused");
        assert!(
            matches!(refused, ImportRefused::Broken { id: 4, .. }),
            "{refused}"
        );
        assert_eq!(target.count().expect("counts"), 0, "nothing was taken in");
        assert!(check_chain(&published).is_ok());
        assert!(matches!(
            check_chain(&edited),
            Err(ImportRefused::Broken { id: 4, .. })
        ));
        let mut spliced = published.clone();
        spliced.remove(2);
        let refused = target.import(&spliced).expect("runs").expect_err("refused");
        assert!(matches!(refused, ImportRefused::Broken { .. }), "{refused}");
        // A ledger with its own different events does not take another chain in.
        let (_c, mut other) = ledger_with(2);
        let refused = other
            .import(&published)
            .expect("runs")
            .expect_err("refused");
        assert_eq!(refused, ImportRefused::Diverged { local: 2, at: 2 });
        // A published chain behind this ledger's own is nothing to take in; one behind
        // another chain is refused.
        let (_d, mut longer) = ledger_with(0);
        longer.import(&published).expect("runs").expect("taken in");
        let behind = longer
            .import(&published[..2])
            .expect("runs")
            .expect("its prefix");
        assert_eq!(
            behind,
            Imported {
                before: 5,
                appended: 0
            }
        );
        let (_e, mut foreign) = ledger_with(4);
        let refused = foreign
            .import(&published[..2])
            .expect("runs")
            .expect_err("refused");
        assert!(
            matches!(refused, ImportRefused::Diverged { local: 4, .. }),
            "{refused}"
        );
    }
}
