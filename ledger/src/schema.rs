//! Schema versions and forward migrations.

use std::path::Path;

use rusqlite::Connection;

use super::LedgerError;
use super::sql_err;

/// The newest schema this binary writes and reads.
pub const SCHEMA_VERSION: i64 = 3;

/// Migrations in order; entry `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE events (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id    TEXT,
    kind      TEXT NOT NULL,
    payload   TEXT NOT NULL,
    at        TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL UNIQUE
);
CREATE INDEX events_by_run ON events (run_id, id);
CREATE TABLE chain_head (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    count INTEGER NOT NULL,
    hash  TEXT NOT NULL
);
INSERT INTO chain_head (id, count, hash)
    VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');
CREATE TRIGGER events_no_update BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'the tdd ledger is append-only'); END;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'the tdd ledger is append-only'); END;
"#,
    // Reads by kind without a walk: a run's newest event of some kinds (where it
    // stands, where it moved: `tdd fleet`), and every event of some kinds (the run
    // starts, the commits the check looks up).
    r#"
CREATE INDEX events_by_run_kind ON events (run_id, kind, id);
CREATE INDEX events_by_kind ON events (kind, id);
"#,
    // Where each run was started and how long its plan is, held in an index of the
    // `run_started` events alone, so `tdd fleet` answers without reading a start's
    // payload (the pinned environment, kilobytes). The expressions are
    // `heads::START_FIELDS`, character for character; `kind` is a column of it too, or
    // SQLite would read each row to check the kind the index's own clause implies.
    r#"
CREATE INDEX events_run_starts ON events (
    run_id,
    kind,
    json_extract(payload, '$.worktree'),
    json_array_length(payload, '$.plan.cycles')
) WHERE kind = 'run_started';
"#,
];

/// Names of the triggers that make `events` append-only; verify checks they still exist.
pub(crate) const GUARDS: &[&str] = &["events_no_update", "events_no_delete"];

/// The database's `user_version`.
pub(crate) fn user_version(conn: &Connection, path: &Path) -> Result<i64, LedgerError> {
    conn.query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(sql_err(path))
}

/// Brings the schema up to [`SCHEMA_VERSION`], refusing a database from a newer binary.
pub(crate) fn migrate(conn: &Connection, path: &Path) -> Result<(), LedgerError> {
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(sql_err(path))?;
    let result = migrate_locked(conn, path);
    let end = if result.is_ok() { "COMMIT" } else { "ROLLBACK" };
    conn.execute_batch(end).map_err(sql_err(path))?;
    result
}

fn migrate_locked(conn: &Connection, path: &Path) -> Result<(), LedgerError> {
    let found = user_version(conn, path)?;
    if found > SCHEMA_VERSION {
        return Err(LedgerError::TooNew {
            path: path.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let start = usize::try_from(found).unwrap_or(0);
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(start) {
        conn.execute_batch(sql).map_err(sql_err(path))?;
        conn.pragma_update(None, "user_version", index as i64 + 1)
            .map_err(sql_err(path))?;
    }
    if found == 0 {
        conn.execute(
            "INSERT OR IGNORE INTO meta (key, value) VALUES ('created_at', ?1)",
            [super::clock::now_rfc3339()],
        )
        .map_err(sql_err(path))?;
    }
    check_shape(conn, path)
}

/// Refuses, for a read-only open, a database this binary cannot read.
pub(crate) fn check_readable(conn: &Connection, path: &Path) -> Result<(), LedgerError> {
    let found = user_version(conn, path)?;
    if found > SCHEMA_VERSION {
        return Err(LedgerError::TooNew {
            path: path.to_path_buf(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        check_shape(conn, path)?;
    }
    Ok(())
}

/// One object of a schema: its type, its name and its SQL with whitespace runs made one
/// space (SQLite keeps the statement as it was written).
type Object = (String, String, Option<String>);

/// The objects of `conn`'s schema, sorted.
fn objects(conn: &Connection) -> rusqlite::Result<Vec<Object>> {
    let mut statement = conn.prepare("SELECT type, name, sql FROM sqlite_master")?;
    let rows = statement.query_map([], |row| {
        let sql: Option<String> = row.get(2)?;
        Ok((
            row.get(0)?,
            row.get(1)?,
            sql.map(|sql| sql.split_whitespace().collect::<Vec<_>>().join(" ")),
        ))
    })?;
    let mut found = rows.collect::<rusqlite::Result<Vec<Object>>>()?;
    found.sort();
    Ok(found)
}

/// The objects the migrations make, built once per process in memory.
fn expected() -> Option<&'static [Object]> {
    static EXPECTED: std::sync::OnceLock<Option<Vec<Object>>> = std::sync::OnceLock::new();
    EXPECTED
        .get_or_init(|| {
            let conn = Connection::open_in_memory().ok()?;
            MIGRATIONS
                .iter()
                .try_for_each(|sql| conn.execute_batch(sql))
                .ok()?;
            objects(&conn).ok()
        })
        .as_deref()
}

/// SHA-256 of the objects the migrations make ([`shape_of`]): what the schema of a
/// database of the newest version must hash to. A unit test checks it against the
/// migrations, so a new one cannot forget it.
const SHAPE: &str = "7bae93e032bb7abfeaae7af13808ce99db7aa91b442cb45e59cb2084c6dc2062";

/// The SHA-256 (hex) of `objects`, each field and object ended by a zero byte.
fn shape_of(objects: &[Object]) -> String {
    use sha2::Digest as _;
    let mut hasher = sha2::Sha256::new();
    for (kind, name, sql) in objects {
        for field in [kind.as_str(), name.as_str(), sql.as_deref().unwrap_or("")] {
            hasher.update(field.as_bytes());
            hasher.update([0]);
        }
        hasher.update([0]);
    }
    hex::encode(hasher.finalize())
}

/// Refuses a database of the newest schema whose own tables, indexes and triggers are
/// not exactly those the migrations make (a column's type changed, a table dropped), or
/// that holds anything else that runs as the ledger is read or written: a trigger, a
/// view or an index tdd never made (one that aborts every write, or never ends). A
/// table of another program's, with its own automatic index, runs nothing and is left
/// alone; so is a dropped append-only guard, which the chain's check names as
/// tampering. Nothing of it is run before this look.
pub(crate) fn check_shape(conn: &Connection, path: &Path) -> Result<(), LedgerError> {
    let found = objects(conn).map_err(sql_err(path))?;
    if shape_of(&found) == SHAPE {
        return Ok(());
    }
    let Some(expected) = expected() else {
        return Err(LedgerError::Damaged {
            path: path.to_path_buf(),
            what: "its schema is not the one tdd writes".to_string(),
        });
    };
    let inert = |(kind, _, sql): &Object| kind == "table" || (kind == "index" && sql.is_none());
    let guard = |(kind, name, _): &Object| kind == "trigger" && GUARDS.contains(&name.as_str());
    let differs = found
        .iter()
        .find(|object| !expected.contains(object) && !inert(object))
        .map(|(kind, name, _)| format!("it has a {kind} `{name}` tdd never made, or changed"))
        .or_else(|| {
            expected
                .iter()
                .find(|object| !found.contains(object) && !guard(object))
                .map(|(kind, name, _)| format!("its {kind} `{name}` is gone"))
        });
    match differs {
        None => Ok(()),
        Some(what) => Err(LedgerError::Damaged {
            path: path.to_path_buf(),
            what: format!("its schema is not the one tdd writes: {what}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_is_what_the_migrations_make() {
        let expected = expected().expect("the migrations run in memory");
        assert_eq!(shape_of(expected), SHAPE);
    }
}
