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

/// The kind of the event that starts an engine run.
const RUN_STARTED: &str = "run_started";

/// What the ledger's index of run starts holds of a `run_started` (schema 3), as the
/// expressions the index was made with: a query that asks exactly these is answered
/// from the index, without reading the payload.
const START_FIELDS: [&str; 2] = [
    "json_extract(payload, '$.worktree')",
    "json_array_length(payload, '$.plan.cycles')",
];

/// The first schema with the index of run starts.
const START_INDEX_SCHEMA: i64 = 3;

/// Where a run stands: where it was started and how long its plan is, when its newest
/// event was recorded, and the newest event of each set of kinds asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct RunHead {
    /// The run id.
    pub run_id: String,
    /// The work tree its `run_started` names.
    pub worktree: Option<String>,
    /// How many cycles its plan has.
    pub cycles: Option<u64>,
    /// When its newest event was recorded (UTC RFC 3339).
    pub last_at: String,
    /// For each set of kinds asked for, its newest event of those kinds, if any: the
    /// event's kind and its asked fields.
    pub newest: Vec<Option<(String, Fields)>>,
}

impl Ledger {
    /// The id of the newest `run_started` or `run_adopted` event whose payload names
    /// `worktree` (at `$.worktree`): the event the latest run of that work tree follows
    /// from. Read by SQLite's JSON functions, so no payload is decoded into Rust; the
    /// starts are read from the index of run starts where the schema has it, so no
    /// start's payload (its plan and pinned environment, tens of kilobytes) is parsed
    /// however many runs the ledger holds. Adoptions are few and small: theirs are.
    pub fn newest_start_in(&self, worktree: &str) -> Result<Option<u64>, LedgerError> {
        let indexed = self.schema_version()? >= START_INDEX_SCHEMA;
        let adopted = format!(
            "SELECT MAX(id) FROM events WHERE kind = 'run_adopted' \
             AND json_valid(payload) AND {} = ?1",
            START_FIELDS[0]
        );
        let mut newest: Option<i64> = None;
        for sql in [newest_start_sql(indexed), adopted] {
            let id: Option<i64> = self
                .conn
                .query_row(&sql, [worktree], |r| r.get(0))
                .map_err(sql_err(&self.path))?;
            newest = newest.max(id);
        }
        Ok(newest.and_then(|id| u64::try_from(id).ok()))
    }

    /// Every engine run (a run whose first event is a `run_started`), oldest run first,
    /// with the work tree and plan length of that start, the time of its newest event,
    /// and for each of `newest` (sets of kinds) its newest event of those kinds with its
    /// payload `fields` (JSON paths). One read transaction, so the view is consistent
    /// while others append.
    ///
    /// One statement reads the starts from the index of run starts (schema 3; a ledger
    /// opened read-only at an older schema has its starts read from their payloads) and
    /// seeks each run's bounds and newest events in the index by run and kind; then
    /// each newest event is read by its id. Fields are read by SQLite's JSON functions,
    /// so no payload is decoded into Rust whole.
    pub fn run_heads(
        &self,
        newest: &[&[&str]],
        fields: &[&str],
    ) -> Result<Vec<RunHead>, LedgerError> {
        let path = self.path.clone();
        // Every page is read once: a small cache recycles its memory instead of taking
        // fresh memory (and a page fault) for each page read. Set back after.
        let cache: i64 = self
            .conn
            .query_row("PRAGMA cache_size", [], |r| r.get(0))
            .map_err(sql_err(&path))?;
        self.conn
            .pragma_update(None, "cache_size", -256)
            .map_err(sql_err(&path))?;
        let heads = self.run_heads_read(newest, fields);
        self.conn
            .pragma_update(None, "cache_size", cache)
            .map_err(sql_err(&path))?;
        heads
    }

    /// [`Ledger::run_heads`]' reads, in one transaction: one statement for every run
    /// (its start from the index of run starts, its last event and its newest of each
    /// set of kinds by seeks in the run indexes), then the few newest events by id.
    fn run_heads_read(
        &self,
        newest: &[&[&str]],
        fields: &[&str],
    ) -> Result<Vec<RunHead>, LedgerError> {
        let path = self.path.clone();
        let tx = self.conn.unchecked_transaction().map_err(sql_err(&path))?;
        let indexed = self.schema_version()? >= START_INDEX_SCHEMA;
        let (sql, params) = starts_sql(newest, indexed);
        let mut stmt = tx.prepare(&sql).map_err(sql_err(&path))?;
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(sql_err(&path))?;
        let mut starts = Vec::new();
        while let Some(row) = rows.next().map_err(sql_err(&path))? {
            starts.push(Start::read(row, newest.len()).map_err(sql_err(&path))?);
        }
        drop(rows);
        let mut params: Vec<rusqlite::types::Value> = vec![rusqlite::types::Value::Null];
        let selected = extract("payload", fields, &mut params);
        let mut by_id = tx
            .prepare(&format!(
                "SELECT kind, {selected} FROM events WHERE id = ?1"
            ))
            .map_err(sql_err(&path))?;
        let mut read = |id: i64| {
            params[0] = id.into();
            by_id
                .query_row(rusqlite::params_from_iter(params.iter()), |r| {
                    let text: Option<String> = r.get(1)?;
                    Ok((r.get::<_, String>(0)?, split(text.as_deref(), fields.len())))
                })
                .optional()
                .map_err(sql_err(&path))
        };
        let mut heads = Vec::with_capacity(starts.len());
        for start in starts {
            let mut newest = Vec::with_capacity(start.newest.len());
            for id in start.newest {
                newest.push(match id {
                    Some(id) => read(id)?,
                    None => None,
                });
            }
            heads.push(RunHead {
                run_id: start.run_id,
                worktree: start.worktree,
                cycles: start.cycles,
                last_at: start.last_at,
                newest,
            });
        }
        Ok(heads)
    }
}

/// One row of [`starts_sql`]: a run's start, its last event's time and the ids of its
/// newest event of each set of kinds.
struct Start {
    run_id: String,
    worktree: Option<String>,
    cycles: Option<u64>,
    last_at: String,
    newest: Vec<Option<i64>>,
}

impl Start {
    fn read(row: &rusqlite::Row<'_>, sets: usize) -> rusqlite::Result<Start> {
        let mut newest = Vec::with_capacity(sets);
        for i in 0..sets {
            newest.push(row.get::<_, Option<i64>>(4 + i)?);
        }
        Ok(Start {
            run_id: row.get(0)?,
            // A work tree that is not text, or a plan that is not an array, is none.
            worktree: row.get(1).ok().flatten(),
            cycles: row
                .get::<_, Option<i64>>(2)
                .ok()
                .flatten()
                .and_then(|n| u64::try_from(n).ok()),
            last_at: row.get(3)?,
            newest,
        })
    }
}

/// The statement that reads the id of the newest `run_started` naming the work tree
/// `?1`: from the index of run starts alone when the schema has it (`indexed`), from
/// the payloads otherwise.
pub(crate) fn newest_start_sql(indexed: bool) -> String {
    if indexed {
        format!(
            "SELECT MAX(id) FROM events INDEXED BY events_run_starts \
             WHERE kind = '{RUN_STARTED}' AND {} = ?1",
            START_FIELDS[0]
        )
    } else {
        format!(
            "SELECT MAX(id) FROM events WHERE kind = '{RUN_STARTED}' \
             AND json_valid(payload) AND {} = ?1",
            START_FIELDS[0]
        )
    }
}

/// The statement that reads every run's start (through the index of run starts when
/// the schema has it), its last event's time and, per set of `newest` kinds, the id of
/// its newest event of those kinds; with the kinds as its parameters.
pub(crate) fn starts_sql(
    newest: &[&[&str]],
    indexed: bool,
) -> (String, Vec<rusqlite::types::Value>) {
    let mut params: Vec<rusqlite::types::Value> = Vec::new();
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
                ", (SELECT MAX(id) FROM events AS k WHERE k.run_id = s.run_id AND k.kind IN ({}))",
                places.join(", ")
            )
        });
    }
    let indexed = if indexed {
        "INDEXED BY events_run_starts"
    } else {
        ""
    };
    let sql = format!(
        "SELECT run_id, {}, {}, \
           (SELECT at FROM events AS e WHERE e.id = \
              (SELECT MAX(id) FROM events AS m WHERE m.run_id = s.run_id)){sets} \
         FROM events AS s {indexed} \
         WHERE kind = '{RUN_STARTED}' AND run_id IS NOT NULL \
           AND id = (SELECT MIN(id) FROM events AS f WHERE f.run_id = s.run_id) \
         ORDER BY id",
        START_FIELDS[0], START_FIELDS[1],
    );
    (sql, params)
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
