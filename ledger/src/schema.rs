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
    Ok(())
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
    Ok(())
}
