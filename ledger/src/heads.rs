//! Where each run stands, read without walking its events: what `tdd fleet` shows of a
//! ledger that conductors are writing.

use rusqlite::OptionalExtension;

use super::Event;
use super::Ledger;
use super::LedgerError;
use super::sql_err;

/// A run's first event, its newest, and its newest of some kinds.
#[derive(Debug, Clone, PartialEq)]
pub struct RunHead {
    /// The run id.
    pub run_id: String,
    /// Its first event (for an engine run, `run_started`).
    pub first: Event,
    /// Its newest event.
    pub last: Event,
    /// Its newest event of the kinds asked for, if it has one.
    pub last_of: Option<Event>,
}

impl Ledger {
    /// Every run whose first event is of kind `first_kind`, with that event, its newest
    /// event and its newest event of `kinds`, oldest run first. One read transaction,
    /// so the view is consistent while others append; costs an index walk and a few
    /// point reads per run, never a scan of every payload.
    pub fn run_heads(&self, first_kind: &str, kinds: &[&str]) -> Result<Vec<RunHead>, LedgerError> {
        let path = self.path.clone();
        let tx = self.conn.unchecked_transaction().map_err(sql_err(&path))?;
        // Each run id once, by skipping through the run index (a seek per run, never a
        // walk of every entry), then each run's first and last event by seeks too.
        let mut runs = Vec::new();
        {
            let mut stmt = tx
                .prepare(
                    "WITH RECURSIVE r(run) AS ( \
                       SELECT MIN(run_id) FROM events WHERE run_id IS NOT NULL \
                       UNION ALL \
                       SELECT (SELECT MIN(run_id) FROM events WHERE run_id > r.run) \
                       FROM r WHERE r.run IS NOT NULL) \
                     SELECT run FROM r WHERE run IS NOT NULL",
                )
                .map_err(sql_err(&path))?;
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(0))
                .map_err(sql_err(&path))?;
            for row in rows {
                runs.push(row.map_err(sql_err(&path))?);
            }
        }
        let mut bounds = Vec::new();
        {
            let mut first = tx
                .prepare("SELECT MIN(id) FROM events WHERE run_id = ?1")
                .map_err(sql_err(&path))?;
            let mut last = tx
                .prepare("SELECT MAX(id) FROM events WHERE run_id = ?1")
                .map_err(sql_err(&path))?;
            for run in runs {
                let a: i64 = first
                    .query_row([&run], |r| r.get(0))
                    .map_err(sql_err(&path))?;
                let b: i64 = last
                    .query_row([&run], |r| r.get(0))
                    .map_err(sql_err(&path))?;
                bounds.push((run, a, b));
            }
        }
        bounds.sort_by_key(|(_, first, _)| *first);
        let by_id = |id: i64| -> Result<Option<Event>, LedgerError> {
            tx.query_row(
                "SELECT id, run_id, kind, payload, at, prev_hash, hash FROM events WHERE id = ?1",
                [id],
                super::chain::row,
            )
            .optional()
            .map_err(sql_err(&path))?
            .map(super::chain::event_of)
            .transpose()
        };
        let kinds_json = serde_json::to_string(kinds).unwrap_or_else(|_| "[]".into());
        let mut heads = Vec::new();
        for (run_id, first, last) in bounds {
            let Some(first) = by_id(first)? else { continue };
            if first.kind != first_kind {
                continue;
            }
            let Some(last) = by_id(last)? else { continue };
            let newest: Option<i64> = tx
                .query_row(
                    "SELECT id FROM events WHERE run_id = ?1 \
                     AND kind IN (SELECT value FROM json_each(?2)) ORDER BY id DESC LIMIT 1",
                    rusqlite::params![run_id, kinds_json],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql_err(&path))?;
            let last_of = match newest {
                Some(id) => by_id(id)?,
                None => None,
            };
            heads.push(RunHead {
                run_id,
                first,
                last,
                last_of,
            });
        }
        Ok(heads)
    }
}
