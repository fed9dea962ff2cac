//! The ledger (`tdd-ledger`): one SQLite database per repository, outside every work tree.
//!
//! Events are append-only and hash-chained: each event's hash covers the
//! previous hash, its run, kind, payload and time, and a one-row head records
//! the count and last hash. [`Ledger::verify`] therefore catches an edited
//! event, a deleted event (anywhere, including the last) and removed guards.
//! Phase commits carry the chain head as an [`Anchor`], so a recomputed chain or an
//! older copy of the database is caught against git as well (the engine's `integrity`).
//! Concurrent appenders serialise on SQLite's write lock and never fork the
//! chain.
//!
//! The crate depends on no other crate of the workspace and runs no git: where the
//! ledger lives is decided from facts about the repository that the caller supplies
//! through a [`RepositoryProbe`].

mod anchor;
mod chain;
pub mod clock;
mod heads;
mod location;
mod memo;
pub mod parallel;
pub mod redact;
mod schema;
pub mod seal;
mod transfer;
mod typed;

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use rusqlite::Connection;
use rusqlite::OpenFlags;
use rusqlite::OptionalExtension;
use rusqlite::TransactionBehavior;

pub use anchor::Anchor;
pub use anchor::AnchorParseError;
pub use anchor::COMMIT_EVENT_KINDS;
pub use anchor::COMMIT_STARTED;
pub use anchor::LEDGER_TRAILER;
pub use chain::GENESIS_HASH;
pub use chain::event_hash;
pub use heads::Fields;
pub use heads::RunHead;
pub use location::DATABASE_FILE;
pub use location::LedgerLocation;
pub use location::RepositoryProbe;
pub use location::repository_key;
pub use schema::SCHEMA_VERSION;
pub use transfer::ImportRefused;
pub use transfer::Imported;
pub use transfer::StoredEvent;
pub use transfer::check_chain;
pub use typed::EventError;
pub use typed::Kinds;
pub use typed::TypedEvent;
pub use typed::decode;
pub use typed::decode_own;
pub use typed::encode;

/// How long a writer waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the ledger could not be located, opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    /// No variable gave a ledger home.
    #[error("no ledger home: none of TDD_LEDGER_HOME, XDG_DATA_HOME or HOME is set")]
    NoHome,
    /// The configured home is a relative path.
    #[error("ledger home {} (from {variable}) is not an absolute path", path.display())]
    RelativeHome {
        /// The relative path.
        path: PathBuf,
        /// The variable it came from.
        variable: &'static str,
    },
    /// The home lies inside a git work tree, where an agent could edit it.
    #[error("ledger home {} is inside the git work tree {}", home.display(), work_tree.display())]
    HomeInsideWorkTree {
        /// The refused home.
        home: PathBuf,
        /// The work tree that contains it.
        work_tree: PathBuf,
    },
    /// An event could not be encoded or read as its domain's type.
    #[error(transparent)]
    Event(#[from] EventError),
    /// The directory is not inside a git repository.
    #[error("{} is not inside a git repository", .0.display())]
    NotARepository(PathBuf),
    /// git failed while locating the repository: the [`RepositoryProbe`]'s own error,
    /// kept whole, so the caller can recover its type (the engine's `GitError`).
    #[error(transparent)]
    Git(Box<dyn std::error::Error + Send + Sync + 'static>),
    /// The ledger directory could not be created.
    #[error("failed to create ledger directory {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The database, or the directory holding it, cannot be opened or written by this
    /// user (its mode, a read-only file system): a refusal naming it, never a crash.
    #[error("ledger {} cannot be opened for writing: {source}", path.display())]
    Denied {
        /// The database.
        path: PathBuf,
        /// What SQLite said.
        source: rusqlite::Error,
    },
    /// The database was written by a newer `tdd`.
    #[error(
        "ledger {} has schema version {found}, newer than the {supported} this tdd supports",
        path.display()
    )]
    TooNew {
        /// The database.
        path: PathBuf,
        /// Its schema version.
        found: i64,
        /// The newest version this binary knows.
        supported: i64,
    },
    /// SQLite failed.
    #[error("ledger database {} failed", path.display())]
    Sqlite {
        /// The database.
        path: PathBuf,
        /// The SQLite error.
        source: rusqlite::Error,
    },
    /// The database, or a file SQLite keeps beside it, is not what tdd wrote: not a
    /// regular file (a named pipe, a directory, a link), or not a SQLite database.
    /// Never opened, never rewritten: a refusal with the path, not a crash or a hang.
    #[error("ledger {} is damaged: {what}", path.display())]
    Damaged {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// The ledger home is no directory, or a directory tdd keeps in it (`repos`, the
    /// repository's directory, its leaves, reports, conducts or locks) is something
    /// else now (a link, a file): nothing is read or written through it, whichever
    /// command asks.
    #[error("{} is not a directory: tdd's own state there was replaced ({found})", path.display())]
    StateNotADirectory {
        /// The path.
        path: PathBuf,
        /// What stands there instead, in words.
        found: &'static str,
    },
    /// A rollback journal stands beside the database and SQLite must roll it back before
    /// reading (a "hot journal"). The ledger keeps a write-ahead log, never a rollback
    /// journal, and a read never rolls one back: the file was left by another program
    /// or planted.
    #[error(
        "ledger {} cannot be read: a rollback journal {} stands beside it, which tdd never \
         writes (the ledger keeps a write-ahead log)",
        path.display(),
        journal.display()
    )]
    StrayJournal {
        /// The database.
        path: PathBuf,
        /// The journal file.
        journal: PathBuf,
    },
    /// Another process holds the database's lock (a write in progress, or a program that
    /// opened the ledger and keeps a transaction open) for longer than tdd waits.
    #[error(
        "ledger {} is locked: another process holds it (tdd waited {} seconds)",
        path.display(),
        BUSY_TIMEOUT.as_secs()
    )]
    Busy {
        /// The database.
        path: PathBuf,
    },
    /// A stored payload is not JSON.
    #[error("event {id} has a payload that is not JSON")]
    BadPayload {
        /// The event id.
        id: i64,
    },
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Event {
    /// Position in the chain, from 1.
    pub id: i64,
    /// The run the event belongs to, if any.
    pub run_id: Option<String>,
    /// What happened, as a snake_case kind.
    pub kind: String,
    /// The event's facts.
    pub payload: serde_json::Value,
    /// UTC RFC 3339 time of recording.
    pub at: String,
    /// The hash of the previous event (or the genesis hash).
    pub prev_hash: String,
    /// This event's hash.
    pub hash: String,
}

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verification {
    /// Events walked (those up to a sealed point counted, not rehashed).
    pub events: u64,
    /// Events whose hash was recomputed: all of them, or those after a sealed point.
    #[serde(skip)]
    pub rehashed: u64,
    /// The first problem, if any; `None` means the chain is intact.
    pub broken: Option<Break>,
}

/// The first point where the chain stops matching.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Break {
    /// The first event that does not match, or `None` for a problem with the head or guards.
    pub event_id: Option<i64>,
    /// What does not match, as a sentence fragment.
    pub reason: String,
}

/// An open ledger database.
#[derive(Debug)]
pub struct Ledger {
    conn: Connection,
    path: PathBuf,
    /// Last, so it is dropped after the connection closed: keeps the seal for the
    /// files as this ledger's own writes left them ([`seal`]).
    reseal: seal::Reseal,
}

impl Drop for Ledger {
    /// Before the connection closes: the seal is kept only if every write since this
    /// ledger opened was its own.
    fn drop(&mut self) {
        self.reseal.check_own();
    }
}

impl Ledger {
    /// Opens (creating and migrating as needed) the ledger database at `path` for writing.
    pub fn open(path: &Path) -> Result<Ledger, LedgerError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| LedgerError::CreateDir {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        regular_files_only(path)?;
        // Taken before anything is opened: the seal is held only when the files are
        // those it was kept for, before the open and after it.
        let taken = seal::Taken::now(path);
        let sealed = taken.sealed_point();
        let conn = Connection::open(path).map_err(sql_err(path))?;
        let mut ledger = Ledger {
            conn,
            path: path.to_path_buf(),
            reseal: seal::Reseal::none(path),
        };
        ledger.configure()?;
        schema::migrate(&ledger.conn, path)?;
        if let Some(point) = sealed {
            ledger.reseal = seal::Reseal::hold(path, &taken, point);
        }
        Ok(ledger)
    }

    /// Opens an existing ledger read-only; `Ok(None)` when none has been created yet: no
    /// file, or a file whose schema was never created (another process may be creating it
    /// right now, and a reader sees the database as it was before that transaction).
    pub fn open_read_only(path: &Path) -> Result<Option<Ledger>, LedgerError> {
        if path.symlink_metadata().is_err() {
            return Ok(None);
        }
        regular_files_only(path)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(sql_err(path))?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sql_err(path))?;
        let ledger = Ledger {
            conn,
            path: path.to_path_buf(),
            reseal: seal::Reseal::none(path),
        };
        schema::check_readable(&ledger.conn, path)?;
        if schema::user_version(&ledger.conn, path)? == 0 {
            return Ok(None);
        }
        Ok(Some(ledger))
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn configure(&self) -> Result<(), LedgerError> {
        let path = &self.path;
        self.conn
            .busy_timeout(BUSY_TIMEOUT)
            .map_err(sql_err(path))?;
        self.conn
            .pragma_update(None, "journal_mode", "WAL")
            .map_err(sql_err(path))?;
        // WAL with NORMAL sync survives any process crash; only a power loss can drop the
        // last transactions, and it can never corrupt the chain.
        self.conn
            .pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql_err(path))?;
        self.conn
            .pragma_update(None, "foreign_keys", "ON")
            .map_err(sql_err(path))?;
        Ok(())
    }

    /// Appends one event to the chain and returns it as stored: with every known secret
    /// of this process's environment redacted from its strings
    /// ([`redact::known_secrets`]), so no API key or token a runner's output or a
    /// message carried is ever stored.
    pub fn append(
        &mut self,
        run_id: Option<&str>,
        kind: &str,
        payload: &serde_json::Value,
    ) -> Result<Event, LedgerError> {
        let redacted = redact::redact_value(payload, redact::known_secrets());
        let payload = redacted.as_ref().unwrap_or(payload);
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql_err(&path))?;
        // Under SQLite's write lock, so no other writer of the database comes between
        // the look and the write.
        self.reseal.check_own();
        let event = chain::append_in(&tx, run_id, kind, payload).map_err(sql_err(&path))?;
        tx.commit().map_err(sql_err(&path))?;
        self.reseal.after_write();
        Ok(event)
    }

    /// Every event, oldest first, optionally only those of one run.
    pub fn events(&self, run_id: Option<&str>) -> Result<Vec<Event>, LedgerError> {
        chain::read_events(&self.conn, run_id, None, &self.path)
    }

    /// The events of run `run_id` recorded after event `after` (by id), oldest first.
    pub fn run_events_after(&self, run_id: &str, after: u64) -> Result<Vec<Event>, LedgerError> {
        chain::read_run_after(&self.conn, run_id, after, &self.path)
    }

    /// Events of one kind, oldest first, optionally only those of one run.
    pub fn events_of_kind(
        &self,
        run_id: Option<&str>,
        kind: &str,
    ) -> Result<Vec<Event>, LedgerError> {
        chain::read_events(&self.conn, run_id, Some(kind), &self.path)
    }

    /// Events of any of `kinds`, oldest first, optionally only those of one run: a
    /// domain's events, read with its enum's `KINDS`.
    pub fn events_of_kinds(
        &self,
        run_id: Option<&str>,
        kinds: &[&str],
    ) -> Result<Vec<Event>, LedgerError> {
        chain::read_kinds(&self.conn, run_id, kinds, &self.path)
    }

    /// Events filed under `id` (as their run id), oldest first, together with the
    /// events appended without a run id whose payload holds `id` at the JSON path
    /// `tag` (e.g. `$.conduct`): records written before they were filed under an id
    /// are read as if they had been. Optionally only those of one kind.
    pub fn events_filed(
        &self,
        id: &str,
        tag: &str,
        kind: Option<&str>,
    ) -> Result<Vec<Event>, LedgerError> {
        chain::read_filed(&self.conn, id, tag, kind, &self.path)
    }

    /// The number of events.
    pub fn count(&self) -> Result<u64, LedgerError> {
        let n: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
            .map_err(sql_err(&self.path))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Walks the whole chain and reports the first event or guard that does not match.
    pub fn verify(&self) -> Result<Verification, LedgerError> {
        chain::verify(&self.conn, &self.path, None).map(|(verification, _)| verification)
    }

    /// What [`Ledger::verify`] finds, rehashing only the events after the sealed point
    /// when `taken` (the files' key, taken before this ledger was opened) is the
    /// seal's; an intact chain is sealed anew at its head for those files, when their
    /// key is settled ([`seal`]). The guards and the head are checked whole either way.
    pub fn verify_sealed(&self, taken: &seal::Taken) -> Result<Verification, LedgerError> {
        let from = taken.sealed_point();
        let (verification, head) = chain::verify(&self.conn, &self.path, from.as_ref())?;
        if let (None, Some(head)) = (&verification.broken, head)
            && from.as_ref() != Some(&head)
        {
            taken.seal(&head);
        }
        Ok(verification)
    }

    /// Starts the write-ahead log afresh now, with a write that records no event: the
    /// log's header, which SQLite puts on the disk before the first write after a
    /// checkpoint, is written while the caller does longer work beside it (a gate's
    /// runs), so the events recorded next do not wait for the disk. It sets the `meta`
    /// row `log_started` to the time; no event, hash or chain head changes. Best effort:
    /// a write that cannot be made now leaves the wait to the first event, as before.
    pub fn start_log(&mut self) {
        let Ok(tx) = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
        else {
            return;
        };
        self.reseal.check_own();
        let set = tx.execute(
            "INSERT INTO meta (key, value) VALUES ('log_started', ?1) \
             ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [clock::now_rfc3339()],
        );
        if set.is_ok() && tx.commit().is_ok() {
            self.reseal.after_write();
        }
    }

    /// Copies what the write-ahead log holds into the database now rather than when the
    /// connection closes, and empties the log: for a writer done writing that still has
    /// work before it closes, so that the clock has passed the database's change time
    /// by then and keeping the seal ([`seal`]) need not wait for it. Best effort: a
    /// checkpoint that cannot run now runs at the close, as it would have.
    pub fn checkpoint(&mut self) {
        self.reseal.check_own();
        let _ = self
            .conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        self.reseal.after_write();
    }

    /// Keeps no seal when this ledger closes, though every write was its own: for a
    /// writer that must not wait for the clock to pass its write ([`seal`]); the next
    /// check rehashes the whole chain.
    pub fn forgo_seal(&mut self) {
        self.reseal.release();
    }

    /// The schema version stored in the database.
    pub fn schema_version(&self) -> Result<i64, LedgerError> {
        schema::user_version(&self.conn, &self.path)
    }

    /// A value from the key/value `meta` table.
    pub fn meta(&self, key: &str) -> Result<Option<String>, LedgerError> {
        self.conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(sql_err(&self.path))
    }
}

/// The error of a SQLite call on the database at `path`: a file that is not a database,
/// or one whose pages are corrupt, is [`LedgerError::Damaged`]; a hot rollback journal
/// beside it is [`LedgerError::StrayJournal`]; a lock another process holds past the busy
/// timeout is [`LedgerError::Busy`]; a database or directory this user may not open or
/// write is [`LedgerError::Denied`]; anything else is SQLite failing.
pub(crate) fn sql_err(path: &Path) -> impl Fn(rusqlite::Error) -> LedgerError + '_ {
    move |source| match source.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ReadOnly)
            if matches!(
                &source,
                rusqlite::Error::SqliteFailure(e, _)
                    if e.extended_code == rusqlite::ffi::SQLITE_READONLY_ROLLBACK
            ) =>
        {
            let mut journal = path.as_os_str().to_os_string();
            journal.push("-journal");
            LedgerError::StrayJournal {
                path: path.to_path_buf(),
                journal: PathBuf::from(journal),
            }
        }
        Some(
            rusqlite::ErrorCode::CannotOpen
            | rusqlite::ErrorCode::ReadOnly
            | rusqlite::ErrorCode::PermissionDenied,
        ) => LedgerError::Denied {
            path: path.to_path_buf(),
            source,
        },
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => {
            LedgerError::Busy {
                path: path.to_path_buf(),
            }
        }
        Some(rusqlite::ErrorCode::NotADatabase) => LedgerError::Damaged {
            path: path.to_path_buf(),
            what: "it is not a SQLite database (overwritten, truncated or replaced)".into(),
        },
        Some(rusqlite::ErrorCode::DatabaseCorrupt) => LedgerError::Damaged {
            path: path.to_path_buf(),
            what: format!("SQLite finds it corrupt ({source})"),
        },
        // A value of another type than tdd stores (a payload recast to bytes): written
        // by another hand.
        _ if matches!(
            source,
            rusqlite::Error::InvalidColumnType(..) | rusqlite::Error::FromSqlConversionFailure(..)
        ) =>
        {
            LedgerError::Damaged {
                path: path.to_path_buf(),
                what: format!("a value in it is not of the type tdd stores ({source})"),
            }
        }
        // tdd stores every payload as JSON: one that is not was written by another hand.
        _ if source.to_string().contains("malformed JSON") => LedgerError::Damaged {
            path: path.to_path_buf(),
            what: "an event's payload is not JSON".into(),
        },
        _ => LedgerError::Sqlite {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Refuses a database, or a write-ahead log, shared-memory or journal file beside it,
/// that exists but is not a regular file: SQLite would block opening a named pipe, or
/// follow a link out of the ledger directory. Looked at without following links.
fn regular_files_only(path: &Path) -> Result<(), LedgerError> {
    let mut files = vec![path.to_path_buf()];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_os_string();
        name.push(suffix);
        files.push(PathBuf::from(name));
    }
    for file in files {
        let Ok(meta) = file.symlink_metadata() else {
            continue;
        };
        let kind = meta.file_type();
        if kind.is_file() {
            continue;
        }
        return Err(LedgerError::Damaged {
            path: file,
            what: format!("it is {}, not the file tdd wrote", kind_in_words(kind)),
        });
    }
    Ok(())
}

/// What kind of entry `kind` is, in words (`a symbolic link`), looked at without
/// following a link.
pub(crate) fn kind_in_words(kind: std::fs::FileType) -> &'static str {
    if kind.is_symlink() {
        "a symbolic link"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_file() {
        "a regular file"
    } else {
        "a named pipe, socket or device"
    }
}

#[cfg(test)]
mod seal_tests;
#[cfg(test)]
mod tests;
