//! Where each run stands, read without walking its events: what `tdd fleet` shows of a
//! ledger that conductors are writing.

use rusqlite::OptionalExtension;

use super::Ledger;
use super::LedgerError;
use super::sql_err;

/// Values read from an event's payload by JSON path (`$.worktree`), in the order the
/// paths were asked for: `None` where the payload has nothing at that path.
pub type Fields = Vec<Option<serde_json::Value>>;

/// Where a run stands: fields of its first event, when its newest event was recorded,
/// and the newest event of each set of kinds asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RunHead {
    /// The run id.
    pub run_id: String,
    /// The asked fields of its first event (for an engine run, `run_started`).
    pub first: Fields,
    /// When its newest event was recorded (UTC RFC 3339).
    pub last_at: String,
    /// For each set of kinds asked for, its newest event of those kinds, if any: the
    /// event's kind and its asked fields.
    pub newest: Vec<Option<(String, Fields)>>,
}

impl Ledger {
    /// Every run whose first event is of kind `first_kind`, oldest run first, with the
    /// payload `fields` (JSON paths) of that event, the time of its newest event, and
    /// for each of `newest` (sets of kinds) its newest event of those kinds with the same
    /// fields. One read transaction, so the view is consistent while others append.
    /// Costs an index walk and a few point reads per run; the fields are read by
    /// SQLite's JSON functions, so no payload is decoded whole (a `run_started` holds
    /// the pinned environment, kilobytes).
    pub fn run_heads(
        &self,
        first_kind: &str,
        newest: &[&[&str]],
        fields: &[&str],
    ) -> Result<Vec<RunHead>, LedgerError> {
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
        // `json_quote` keeps each value's JSON type (a string stays quoted, an array
        // stays JSON); a payload with nothing at a path gives SQL NULL (`json_type` is
        // NULL there, and `'null'` for a JSON null).
        let selected: String = (0..fields.len())
            .map(|i| {
                let n = i + 2;
                format!(
                    ", CASE WHEN json_type(payload, ?{n}) IS NULL THEN NULL \
                     ELSE json_quote(json_extract(payload, ?{n})) END"
                )
            })
            .collect();
        let mut by_id = tx
            .prepare(&format!(
                "SELECT kind, at{selected} FROM events WHERE id = ?1"
            ))
            .map_err(sql_err(&path))?;
        let mut read = |id: i64| -> Result<Option<(String, String, Fields)>, LedgerError> {
            let mut params: Vec<rusqlite::types::Value> = vec![id.into()];
            params.extend(
                fields
                    .iter()
                    .map(|f| rusqlite::types::Value::from(f.to_string())),
            );
            by_id
                .query_row(rusqlite::params_from_iter(params), |r| {
                    let kind: String = r.get(0)?;
                    let at: String = r.get(1)?;
                    let mut values = Vec::with_capacity(fields.len());
                    for i in 0..fields.len() {
                        let text: Option<String> = r.get(i + 2)?;
                        values.push(text.and_then(|t| serde_json::from_str(&t).ok()));
                    }
                    Ok((kind, at, values))
                })
                .optional()
                .map_err(sql_err(&path))
        };
        let mut newest_of = tx
            .prepare(
                "SELECT id FROM events WHERE run_id = ?1 \
                 AND kind IN (SELECT value FROM json_each(?2)) ORDER BY id DESC LIMIT 1",
            )
            .map_err(sql_err(&path))?;
        let sets: Vec<String> = newest
            .iter()
            .map(|kinds| serde_json::to_string(kinds).unwrap_or_else(|_| "[]".into()))
            .collect();
        let mut heads = Vec::new();
        for (run_id, first, last) in bounds {
            let Some((kind, _, first)) = read(first)? else {
                continue;
            };
            if kind != first_kind {
                continue;
            }
            let Some((_, last_at, _)) = read(last)? else {
                continue;
            };
            let mut found = Vec::with_capacity(sets.len());
            for set in &sets {
                let id: Option<i64> = newest_of
                    .query_row(rusqlite::params![run_id, set], |r| r.get(0))
                    .optional()
                    .map_err(sql_err(&path))?;
                found.push(match id {
                    Some(id) => read(id)?.map(|(kind, _, fields)| (kind, fields)),
                    None => None,
                });
            }
            heads.push(RunHead {
                run_id,
                first,
                last_at,
                newest: found,
            });
        }
        Ok(heads)
    }
}
