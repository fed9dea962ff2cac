//! Where each run stands, read without walking its events: what `tdd fleet` shows of a
//! ledger that conductors are writing.

use rusqlite::OptionalExtension;

use super::Ledger;
use super::LedgerError;
use super::sql_err;

/// Values read from an event's payload by JSON path (`$.worktree`), in the order the
/// paths were asked for: `None` where the payload has nothing at that path (or a JSON
/// null).
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
        // One parse of each payload: `json_extract` with two or more paths answers a JSON
        // array of their values (null where a path leads nowhere); a lone path is asked
        // twice so that the answer is an array all the same.
        let mut paths: Vec<&str> = fields.to_vec();
        if paths.len() == 1 {
            paths.push(paths[0]);
        }
        let selected = if paths.is_empty() {
            "NULL".to_string()
        } else {
            let params: Vec<String> = (0..paths.len()).map(|i| format!("?{}", i + 2)).collect();
            format!("json_extract(payload, {})", params.join(", "))
        };
        let mut by_id = tx
            .prepare(&format!(
                "SELECT kind, {selected} FROM events WHERE id = ?1"
            ))
            .map_err(sql_err(&path))?;
        let mut read = |id: i64| -> Result<Option<(String, Fields)>, LedgerError> {
            let mut params: Vec<rusqlite::types::Value> = vec![id.into()];
            params.extend(
                paths
                    .iter()
                    .map(|p| rusqlite::types::Value::from(p.to_string())),
            );
            by_id
                .query_row(rusqlite::params_from_iter(params), |r| {
                    let kind: String = r.get(0)?;
                    let text: Option<String> = r.get(1)?;
                    let mut values: Vec<serde_json::Value> = text
                        .and_then(|t| serde_json::from_str(&t).ok())
                        .unwrap_or_default();
                    values.resize(fields.len().max(values.len()), serde_json::Value::Null);
                    let fields: Fields = values
                        .into_iter()
                        .take(fields.len())
                        .map(|v| (!v.is_null()).then_some(v))
                        .collect();
                    Ok((kind, fields))
                })
                .optional()
                .map_err(sql_err(&path))
        };
        let mut at_of = tx
            .prepare("SELECT at FROM events WHERE id = ?1")
            .map_err(sql_err(&path))?;
        // MAX over the run's entries of those kinds: a seek per kind in the index by run
        // and kind (schema 2), where a walk back through the run would read every event
        // of a run that has none of them.
        let mut newest_of = tx
            .prepare(
                "SELECT MAX(id) FROM events WHERE run_id = ?1 \
                 AND kind IN (SELECT value FROM json_each(?2))",
            )
            .map_err(sql_err(&path))?;
        let sets: Vec<String> = newest
            .iter()
            .map(|kinds| serde_json::to_string(kinds).unwrap_or_else(|_| "[]".into()))
            .collect();
        let mut heads = Vec::new();
        for (run_id, first, last) in bounds {
            let Some((kind, first)) = read(first)? else {
                continue;
            };
            if kind != first_kind {
                continue;
            }
            let Some(last_at) = at_of
                .query_row([last], |r| r.get::<_, String>(0))
                .optional()
                .map_err(sql_err(&path))?
            else {
                continue;
            };
            let mut found = Vec::with_capacity(sets.len());
            for set in &sets {
                let id: Option<i64> = newest_of
                    .query_row(rusqlite::params![run_id, set], |r| r.get(0))
                    .map_err(sql_err(&path))?;
                found.push(match id {
                    Some(id) => read(id)?,
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
