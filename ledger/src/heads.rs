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
    /// One statement walks the index by kind for `first_kind` and seeks each run's
    /// bounds and newest events in the index by run and kind (schema 2), then each
    /// newest event is read by its id; the fields are read by SQLite's JSON functions, so
    /// no payload is decoded into Rust whole (a `run_started` holds the pinned
    /// environment, kilobytes).
    pub fn run_heads(
        &self,
        first_kind: &str,
        newest: &[&[&str]],
        fields: &[&str],
    ) -> Result<Vec<RunHead>, LedgerError> {
        let path = self.path.clone();
        let tx = self.conn.unchecked_transaction().map_err(sql_err(&path))?;
        // One statement for every run: its first event found through the index by kind,
        // then its last event and its newest of each set of kinds by seeks in the run
        // index; only then the few newest events are read, each by its id.
        let mut params: Vec<rusqlite::types::Value> = vec![first_kind.to_string().into()];
        let first = extract("s.payload", fields, &mut params);
        let mut sets = String::new();
        for kinds in newest {
            let mut places = Vec::with_capacity(kinds.len());
            for kind in *kinds {
                params.push(kind.to_string().into());
                places.push(format!("?{}", params.len()));
            }
            sets.push_str(&if places.is_empty() {
                ", NULL".to_string()
            } else {
                format!(
                    ", (SELECT MAX(id) FROM events WHERE run_id = s.run_id AND kind IN ({}))",
                    places.join(", ")
                )
            });
        }
        let mut stmt = tx
            .prepare(&format!(
                "SELECT s.run_id, {first}, \
                   (SELECT at FROM events WHERE id = \
                      (SELECT MAX(id) FROM events WHERE run_id = s.run_id)){sets} \
                 FROM events s \
                 WHERE s.kind = ?1 AND s.run_id IS NOT NULL \
                   AND s.id = (SELECT MIN(id) FROM events WHERE run_id = s.run_id) \
                 ORDER BY s.id"
            ))
            .map_err(sql_err(&path))?;
        let mut found: Vec<(String, Fields, String, Vec<Option<i64>>)> = Vec::new();
        {
            let mut rows = stmt
                .query(rusqlite::params_from_iter(params))
                .map_err(sql_err(&path))?;
            while let Some(row) = rows.next().map_err(sql_err(&path))? {
                let run_id: String = row.get(0).map_err(sql_err(&path))?;
                let first: Option<String> = row.get(1).map_err(sql_err(&path))?;
                let last_at: String = row.get(2).map_err(sql_err(&path))?;
                let mut ids = Vec::with_capacity(newest.len());
                for i in 0..newest.len() {
                    ids.push(row.get::<_, Option<i64>>(3 + i).map_err(sql_err(&path))?);
                }
                found.push((run_id, split(first.as_deref(), fields.len()), last_at, ids));
            }
        }
        let mut params: Vec<rusqlite::types::Value> = vec![rusqlite::types::Value::Null];
        let selected = extract("payload", fields, &mut params);
        let mut by_id = tx
            .prepare(&format!("SELECT kind, {selected} FROM events WHERE id = ?1"))
            .map_err(sql_err(&path))?;
        let mut heads = Vec::with_capacity(found.len());
        for (run_id, first, last_at, ids) in found {
            let mut newest = Vec::with_capacity(ids.len());
            for id in ids {
                newest.push(match id {
                    Some(id) => {
                        params[0] = id.into();
                        by_id
                            .query_row(rusqlite::params_from_iter(params.iter()), |r| {
                                let kind: String = r.get(0)?;
                                let text: Option<String> = r.get(1)?;
                                Ok((kind, split(text.as_deref(), fields.len())))
                            })
                            .optional()
                            .map_err(sql_err(&path))?
                    }
                    None => None,
                });
            }
            heads.push(RunHead {
                run_id,
                first,
                last_at,
                newest,
            });
        }
        Ok(heads)
    }
}

/// The SQL that reads `fields` (JSON paths) of the payload `column` in one parse, its
/// paths bound as parameters appended to `params`: `json_extract` with two or more
/// paths answers a JSON array of their values (null where a path leads nowhere), so a
/// lone path is asked twice to get an array all the same.
fn extract(column: &str, fields: &[&str], params: &mut Vec<rusqlite::types::Value>) -> String {
    let mut paths: Vec<&str> = fields.to_vec();
    if paths.len() == 1 {
        paths.push(paths[0]);
    }
    if paths.is_empty() {
        return "NULL".to_string();
    }
    let mut places = Vec::with_capacity(paths.len());
    for path in paths {
        params.push(path.to_string().into());
        places.push(format!("?{}", params.len()));
    }
    format!("json_extract({column}, {})", places.join(", "))
}

/// The values of [`extract`]'s answer `text`, one per field.
fn split(text: Option<&str>, fields: usize) -> Fields {
    let mut values: Vec<serde_json::Value> = text
        .and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_default();
    values.resize(fields.max(values.len()), serde_json::Value::Null);
    values
        .into_iter()
        .take(fields)
        .map(|v| (!v.is_null()).then_some(v))
        .collect()
}
