use std::process::Command;

use serde_json::json;

use super::*;

fn fresh() -> (tempfile::TempDir, Ledger) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ledger = Ledger::open(&dir.path().join(DATABASE_FILE)).expect("open");
    (dir, ledger)
}

fn fill(ledger: &mut Ledger, n: usize) {
    for i in 0..n {
        ledger
            .append(Some("run-1"), "note", &json!({ "i": i }))
            .expect("append");
    }
}

/// Runs SQL as any other SQLite client would, outside the `Ledger` API.
fn tamper(ledger: &Ledger, sql: &str) {
    let conn = rusqlite::Connection::open(ledger.path()).expect("open raw");
    conn.execute_batch(sql).expect("tamper");
}

#[test]
fn an_untouched_chain_verifies() {
    let (_dir, mut ledger) = fresh();
    fill(&mut ledger, 5);
    let report = ledger.verify().expect("verify");
    assert_eq!(
        report,
        Verification {
            events: 5,
            rehashed: 5,
            broken: None
        }
    );
    let events = ledger.events(Some("run-1")).expect("events");
    assert_eq!(events[0].prev_hash, GENESIS_HASH);
    assert_eq!(events[1].prev_hash, events[0].hash);
}

#[test]
fn the_guards_refuse_update_and_delete() {
    let (_dir, mut ledger) = fresh();
    fill(&mut ledger, 2);
    let conn = rusqlite::Connection::open(ledger.path()).expect("open raw");
    assert!(
        conn.execute("UPDATE events SET kind = 'x' WHERE id = 1", [])
            .is_err()
    );
    assert!(conn.execute("DELETE FROM events WHERE id = 1", []).is_err());
}

#[test]
fn an_update_is_caught_at_the_edited_event() {
    let (_dir, mut ledger) = fresh();
    fill(&mut ledger, 5);
    tamper(
        &ledger,
        "DROP TRIGGER events_no_update; UPDATE events SET payload = '{\"i\":99}' WHERE id = 3;",
    );
    let broken = ledger.verify().expect("verify").broken.expect("caught");
    assert_eq!(broken.event_id, Some(3));
}

#[test]
fn an_update_that_rehashes_is_caught_at_the_next_event() {
    let (_dir, mut ledger) = fresh();
    fill(&mut ledger, 5);
    let e = &ledger.events(None).expect("events")[2];
    let forged = event_hash(
        &e.prev_hash,
        e.run_id.as_deref(),
        "forged",
        &e.payload.to_string(),
        &e.at,
    );
    tamper(
        &ledger,
        &format!(
            "DROP TRIGGER events_no_update; UPDATE events SET kind = 'forged', hash = '{forged}' WHERE id = 3;"
        ),
    );
    let broken = ledger.verify().expect("verify").broken.expect("caught");
    assert_eq!(broken.event_id, Some(4));
}

#[test]
fn an_edit_past_the_first_batch_is_caught_at_the_edited_event() {
    let (_dir, mut ledger) = fresh();
    fill(&mut ledger, chain::BATCH_EVENTS + 100);
    let target = chain::BATCH_EVENTS + 50;
    tamper(
        &ledger,
        &format!(
            "DROP TRIGGER events_no_update; UPDATE events SET payload = '{{}}' WHERE id = {target};"
        ),
    );
    let report = ledger.verify().expect("verify");
    assert_eq!(report.broken.expect("caught").event_id, Some(target as i64));
    assert_eq!(report.events, target as u64 - 1);
}

#[test]
fn a_delete_in_the_middle_is_caught() {
    let (_dir, mut ledger) = fresh();
    fill(&mut ledger, 5);
    tamper(
        &ledger,
        "DROP TRIGGER events_no_delete; DELETE FROM events WHERE id = 2;",
    );
    let broken = ledger.verify().expect("verify").broken.expect("caught");
    assert_eq!(broken.event_id, Some(3));
}

#[test]
fn a_delete_of_the_last_event_is_caught() {
    let (_dir, mut ledger) = fresh();
    fill(&mut ledger, 5);
    tamper(
        &ledger,
        "DROP TRIGGER events_no_delete; DELETE FROM events WHERE id = 5;",
    );
    let broken = ledger.verify().expect("verify").broken.expect("caught");
    assert_eq!(broken.event_id, None);
    assert!(broken.reason.contains("head"), "{}", broken.reason);
}

#[test]
fn a_dropped_guard_alone_is_caught() {
    let (_dir, mut ledger) = fresh();
    fill(&mut ledger, 1);
    tamper(&ledger, "DROP TRIGGER events_no_delete;");
    let broken = ledger.verify().expect("verify").broken.expect("caught");
    assert!(broken.reason.contains("events_no_delete"));
}

/// A schema changed by another client (a trigger that aborts or never ends, a table
/// dropped, a column recast) is refused at every open, before anything of it runs.
#[test]
fn a_schema_tdd_did_not_write_is_refused_at_every_open() {
    for (sql, said) in [
        (
            "CREATE TRIGGER zz BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'no'); END;",
            "trigger `zz`",
        ),
        ("DROP TABLE chain_head;", "table `chain_head` is gone"),
        ("CREATE VIEW v AS SELECT 1;", "view `v`"),
        ("CREATE INDEX one_kind ON events (at);", "index `one_kind`"),
    ] {
        let (dir, mut ledger) = fresh();
        fill(&mut ledger, 2);
        tamper(&ledger, sql);
        drop(ledger);
        let path = dir.path().join(DATABASE_FILE);
        for err in [
            Ledger::open(&path).map(|_| ()).expect_err("refused"),
            Ledger::open_read_only(&path)
                .map(|_| ())
                .expect_err("refused read-only"),
        ] {
            assert!(
                matches!(&err, LedgerError::Damaged { what, .. } if what.contains(said)),
                "{sql}: {err}"
            );
        }
    }
}

/// A table of another program's runs nothing: the ledger opens and verifies with it.
#[test]
fn another_programs_table_beside_the_ledger_is_left_alone() {
    let (dir, mut ledger) = fresh();
    fill(&mut ledger, 2);
    tamper(
        &ledger,
        "CREATE TABLE notes (key TEXT PRIMARY KEY, value TEXT);",
    );
    drop(ledger);
    let mut ledger = Ledger::open(&dir.path().join(DATABASE_FILE)).expect("opens");
    fill(&mut ledger, 1);
    assert!(ledger.verify().expect("verify").broken.is_none());
}

/// A payload that is not JSON, or not text, written by another client: a refusal
/// naming the ledger, never an internal error.
#[test]
fn a_payload_of_another_kind_is_damage() {
    for payload in ["'{not json'", "CAST('{}' AS BLOB)"] {
        let (dir, mut ledger) = fresh();
        fill(&mut ledger, 2);
        tamper(
            &ledger,
            &format!(
                "DROP TRIGGER events_no_update; UPDATE events SET payload = {payload} WHERE id = 2; \
                 CREATE TRIGGER events_no_update BEFORE UPDATE ON events \
                 BEGIN SELECT RAISE(ABORT, 'the tdd ledger is append-only'); END;"
            ),
        );
        drop(ledger);
        let ledger = Ledger::open(&dir.path().join(DATABASE_FILE)).expect("the schema is whole");
        let read = ledger.events(None);
        assert!(
            matches!(
                read,
                Err(LedgerError::Damaged { .. } | LedgerError::BadPayload { id: 2 })
            ),
            "{payload}: {read:?}"
        );
    }
}

#[test]
fn a_newer_schema_is_refused_naming_both_versions() {
    let (dir, ledger) = fresh();
    tamper(&ledger, "PRAGMA user_version = 99;");
    drop(ledger);
    let err = Ledger::open(&dir.path().join(DATABASE_FILE)).expect_err("refused");
    let text = err.to_string();
    assert!(
        text.contains("99") && text.contains(&SCHEMA_VERSION.to_string()),
        "{text}"
    );
    assert!(matches!(
        Ledger::open_read_only(&dir.path().join(DATABASE_FILE)),
        Err(LedgerError::TooNew { .. })
    ));
}

#[test]
fn read_only_open_of_a_missing_ledger_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(DATABASE_FILE);
    assert!(Ledger::open_read_only(&path).expect("open").is_none());
    assert!(!path.exists());
}

#[test]
fn a_read_only_ledger_refuses_writes() {
    let (dir, mut ledger) = fresh();
    fill(&mut ledger, 1);
    let mut ro = Ledger::open_read_only(&dir.path().join(DATABASE_FILE))
        .expect("open")
        .expect("exists");
    assert!(ro.append(None, "note", &json!({})).is_err());
    assert_eq!(ro.verify().expect("verify").events, 1);
}

#[test]
fn a_stray_rollback_journal_is_refused_naming_it() {
    let (dir, mut ledger) = fresh();
    fill(&mut ledger, 1);
    drop(ledger);
    let path = dir.path().join(DATABASE_FILE);
    let journal = dir.path().join(format!("{DATABASE_FILE}-journal"));
    std::fs::write(&journal, "garbage").expect("journal");
    let err = Ledger::open_read_only(&path).expect_err("refused");
    assert!(
        matches!(&err, LedgerError::StrayJournal { journal: named, .. } if *named == journal),
        "{err:?}"
    );
    assert!(err.to_string().contains("rollback journal"), "{err}");
}

#[test]
fn a_database_another_connection_holds_is_busy() {
    let (_dir, mut ledger) = fresh();
    fill(&mut ledger, 1);
    let holder = rusqlite::Connection::open(ledger.path()).expect("open raw");
    holder.execute_batch("BEGIN EXCLUSIVE").expect("lock");
    // A second connection that does not wait: SQLite's own "database is locked".
    let other = rusqlite::Connection::open(ledger.path()).expect("open other");
    other.busy_timeout(Duration::ZERO).expect("no wait");
    let source = other
        .execute_batch("BEGIN IMMEDIATE")
        .expect_err("locked out");
    let err = sql_err(ledger.path())(source);
    assert!(
        matches!(&err, LedgerError::Busy { path } if path == ledger.path()),
        "{err:?}"
    );
    assert!(err.to_string().contains("another process"), "{err}");
}

const WORKER_ENV: &str = "TDD_LEDGER_APPEND_WORKER";
const PROCESSES: usize = 8;
const PER_PROCESS: usize = 500;

/// Eight processes (this test binary re-executed) append 500 events each at once.
#[test]
fn concurrent_processes_keep_one_chain() {
    if let Some(db) = std::env::var_os(WORKER_ENV) {
        let mut ledger = Ledger::open(std::path::Path::new(&db)).expect("worker open");
        let me = std::process::id();
        for i in 0..PER_PROCESS {
            ledger
                .append(None, "worker", &json!({ "pid": me, "i": i }))
                .expect("worker append");
        }
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join(DATABASE_FILE);
    drop(Ledger::open(&db).expect("create"));
    let exe = std::env::current_exe().expect("test binary");
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "tests::concurrent_processes_keep_one_chain",
                    "--test-threads=1",
                ])
                .env(WORKER_ENV, &db)
                .stdout(std::process::Stdio::null())
                .spawn()
                .expect("spawn worker")
        })
        .collect();
    for mut child in children {
        assert!(child.wait().expect("wait").success(), "a worker failed");
    }
    let ledger = Ledger::open_read_only(&db).expect("open").expect("exists");
    let report = ledger.verify().expect("verify");
    assert_eq!(
        report,
        Verification {
            events: (PROCESSES * PER_PROCESS) as u64,
            rehashed: (PROCESSES * PER_PROCESS) as u64,
            broken: None
        }
    );
}

#[test]
fn a_database_whose_schema_was_never_created_reads_as_no_ledger() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join(DATABASE_FILE);
    std::fs::write(&db, b"").expect("an empty database file");
    assert!(Ledger::open_read_only(&db).expect("open").is_none());
    drop(Ledger::open(&db).expect("create"));
    assert!(Ledger::open_read_only(&db).expect("open").is_some());
}

#[test]
fn events_of_kinds_reads_only_those_kinds_in_order() {
    let (_dir, mut ledger) = fresh();
    let json = serde_json::json!({});
    for (run, kind) in [(None, "a"), (Some("r"), "b"), (Some("s"), "a"), (None, "c")] {
        ledger.append(run, kind, &json).expect("append");
    }
    let ids = |events: Vec<crate::Event>| events.into_iter().map(|e| e.id).collect::<Vec<_>>();
    let all = ledger.events_of_kinds(None, &["a", "b"]).expect("read");
    assert_eq!(ids(all), [1, 2, 3]);
    let one_run = ledger
        .events_of_kinds(Some("s"), &["a", "b"])
        .expect("read");
    assert_eq!(ids(one_run), [3]);
    assert!(ledger.events_of_kinds(None, &[]).expect("read").is_empty());
}

#[test]
fn a_registry_names_the_domain_of_each_kind_and_finds_a_kind_declared_twice() {
    use crate::Kinds;
    const KINDS: Kinds = Kinds::new(&[
        ("Supervisor", Supervision::KINDS),
        ("Leaves", &["leaf_started", "leaf_finished"]),
    ]);
    const _: () = assert!(KINDS.distinct());
    assert_eq!(KINDS.domain_of("leaf_exited"), Some("Supervisor"));
    assert_eq!(KINDS.domain_of("leaf_started"), Some("Leaves"));
    assert_eq!(KINDS.domain_of("leaf_renamed"), None);
    assert_eq!(Kinds::NONE.domain_of("leaf_exited"), None);
    let twice = Kinds::new(&[("A", &["x", "y"]), ("B", &["y"])]);
    assert!(!twice.distinct(), "one kind in two domains");
    assert!(
        !Kinds::new(&[("A", &["x", "x"])]).distinct(),
        "one kind twice in a domain"
    );
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Leaf {
    pid: u32,
    argv: Vec<String>,
}

crate::typed_events! {
    enum Supervision in Supervisor {
        "leaf_launched" => Launched(Leaf),
        "leaf_signalled" => Signalled(Leaf),
        "leaf_exited" => Exited(Leaf),
    }
}

#[test]
fn a_typed_event_reads_back_as_written_and_a_bad_one_says_which() {
    let (_dir, mut ledger) = fresh();
    let leaf = Leaf {
        pid: 7,
        argv: vec!["claude".into(), "-p".into()],
    };
    ledger
        .record(Some("run-1"), &Supervision::Signalled(leaf.clone()))
        .expect("record");
    ledger
        .append(
            Some("run-1"),
            "leaf_exited",
            &json!({ "pid": "seven", "argv": [] }),
        )
        .expect("append");
    ledger
        .append(Some("run-1"), "leaf_started", &json!({}))
        .expect("append");
    ledger
        .append(Some("run-1"), "no_such_kind", &json!({}))
        .expect("append");
    let events = ledger.events(Some("run-1")).expect("events");
    const KNOWN: crate::Kinds = crate::Kinds::new(&[
        ("Supervisor", Supervision::KINDS),
        ("Leaves", &["leaf_started"]),
    ]);
    let decoded = |i: usize| decode::<Supervision>(&events[i], &KNOWN);
    match decoded(0) {
        Ok(Some(Supervision::Signalled(read))) => assert_eq!(read, leaf),
        other => panic!("not the event written: {other:?}"),
    }
    match decoded(1) {
        Err(EventError::Payload { id, kind, .. }) => {
            assert_eq!((id, kind.as_str()), (2, "leaf_exited"))
        }
        other => panic!("a bad payload must say so: {other:?}"),
    }
    assert!(
        matches!(decoded(2), Ok(None)),
        "another domain's kind is passed over"
    );
    assert!(matches!(
        decoded(3),
        Err(EventError::UnknownKind { id: 4, .. })
    ));
}

#[test]
fn a_typed_read_gives_the_kinds_asked_for_and_refuses_a_kind_of_another_domain() {
    let (_dir, mut ledger) = fresh();
    let leaf = |pid| Leaf {
        pid,
        argv: vec!["aider".into()],
    };
    ledger
        .record(Some("run-1"), &Supervision::Launched(leaf(1)))
        .expect("record");
    ledger
        .record(Some("run-2"), &Supervision::Exited(leaf(2)))
        .expect("record");
    ledger
        .record(Some("run-1"), &Supervision::Exited(leaf(3)))
        .expect("record");
    let exited = ledger
        .typed::<Supervision>(None, &["leaf_exited"])
        .expect("typed");
    let pids: Vec<(Option<String>, u32)> = exited
        .iter()
        .map(|(event, typed)| match typed {
            Supervision::Exited(l) => (event.run_id.clone(), l.pid),
            other => panic!("not asked for: {other:?}"),
        })
        .collect();
    assert_eq!(
        pids,
        vec![(Some("run-2".into()), 2), (Some("run-1".into()), 3)]
    );
    let of_run = ledger
        .typed::<Supervision>(Some("run-1"), Supervision::KINDS)
        .expect("typed");
    assert_eq!(of_run.len(), 2);
    // A kind of another domain, or a misspelt one, is an error, not an empty answer.
    for kind in ["leaf_started", "leaf_exitted"] {
        assert!(matches!(
            ledger.typed::<Supervision>(None, &[kind]),
            Err(LedgerError::Event(EventError::NotInDomain { .. }))
        ));
    }
    // A payload that does not parse is an error naming the event.
    ledger
        .append(Some("run-1"), "leaf_exited", &json!({ "pid": "x" }))
        .expect("append");
    assert!(matches!(
        ledger.typed::<Supervision>(None, &["leaf_exited"]),
        Err(LedgerError::Event(EventError::Payload { id: 4, .. }))
    ));
}

#[test]
fn run_heads_give_each_runs_start_last_and_newest_standing_event() {
    let (dir, mut ledger) = fresh();
    let append = |ledger: &mut Ledger, run: Option<&str>, kind: &str, n: u32| {
        let payload = if kind == "run_started" {
            serde_json::json!({ "n": n, "worktree": format!("/w/{}", run.unwrap_or("-")), "plan": { "cycles": [1, 2, 3] } })
        } else {
            serde_json::json!({ "n": n })
        };
        ledger.append(run, kind, &payload).expect("append");
    };
    append(&mut ledger, Some("run-a"), "run_started", 0);
    append(&mut ledger, Some("conduct-x"), "conduct_started", 0);
    append(&mut ledger, Some("run-a"), "cycle_opened", 1);
    append(&mut ledger, Some("run-b"), "run_started", 0);
    append(&mut ledger, None, "note", 9);
    append(&mut ledger, Some("run-a"), "phase_changed", 1);
    append(&mut ledger, Some("run-a"), "note", 2);
    // Started last, first by name: listed by when it started.
    append(&mut ledger, Some("run-0"), "run_started", 0);
    // A run whose first event is of another kind is not one of them.
    append(&mut ledger, Some("run-c"), "note", 3);
    append(&mut ledger, Some("run-c"), "run_started", 0);
    let check = |ledger: &Ledger| {
        let heads = ledger
            .run_heads(
                &[&["cycle_opened", "phase_changed"], &["note"]],
                &["$.n", "$.missing"],
            )
            .expect("heads");
        let n = |v: u32| Some(serde_json::json!(v));
        let ids: Vec<&str> = heads.iter().map(|h| h.run_id.as_str()).collect();
        assert_eq!(ids, vec!["run-a", "run-b", "run-0"]);
        for head in &heads {
            assert_eq!(head.worktree, Some(format!("/w/{}", head.run_id)));
            assert_eq!(head.cycles, Some(3));
        }
        assert_eq!(
            heads[0].newest,
            vec![
                Some(("phase_changed".to_string(), vec![n(1), None])),
                Some(("note".to_string(), vec![n(2), None])),
            ]
        );
        assert_eq!(heads[1].newest, vec![None, None]);
        assert_eq!(heads[2].newest, vec![None, None]);
        // The newest event's time: run-a's note is its last.
        assert!(heads.iter().all(|h| !h.last_at.is_empty()));
    };
    check(&ledger);
    // The starts are read from the index of run starts, not from their payloads.
    let path = dir.path().join(DATABASE_FILE);
    drop(ledger);
    let (sql, params) = crate::heads::starts_sql(&[&["note"]], true);
    // A ledger of the schema before that index, opened read-only, answers the same.
    read_from_the_index_of_run_starts_then_drop_it(&path, &sql, params);
    let old = Ledger::open_read_only(&path)
        .expect("opens")
        .expect("a ledger");
    assert_eq!(old.schema_version().expect("version"), 2);
    check(&old);
    // Opened for writing, it gets the index back.
    drop(old);
    let ledger = Ledger::open(&path).expect("opens");
    assert_eq!(ledger.schema_version().expect("version"), SCHEMA_VERSION);
    check(&ledger);
}

#[test]
fn the_newest_start_in_a_work_tree_is_read_from_the_index_of_run_starts() {
    let (dir, mut ledger) = fresh();
    let start = |ledger: &mut Ledger, run: &str, kind: &str, worktree: &str| {
        let payload =
            json!({ "worktree": worktree, "plan": { "cycles": [] }, "pad": "x".repeat(4000) });
        ledger.append(Some(run), kind, &payload).expect("append").id
    };
    let a1 = start(&mut ledger, "run-1", "run_started", "/w/a");
    let b = start(&mut ledger, "run-2", "run_started", "/w/b");
    let a3 = start(&mut ledger, "run-3", "run_started", "/w/a");
    let check = |ledger: &Ledger, a: i64| {
        assert_eq!(
            ledger.newest_start_in("/w/a").expect("a"),
            u64::try_from(a).ok()
        );
        assert_eq!(
            ledger.newest_start_in("/w/b").expect("b"),
            u64::try_from(b).ok()
        );
        assert_eq!(ledger.newest_start_in("/w/c").expect("c"), None);
    };
    assert!(a3 > a1);
    check(&ledger, a3);
    // A run moved into a work tree starts there anew.
    let adopted = start(&mut ledger, "run-2", "run_adopted", "/w/a");
    check(&ledger, adopted);
    let path = dir.path().join(DATABASE_FILE);
    drop(ledger);
    read_from_the_index_of_run_starts_then_drop_it(
        &path,
        &crate::heads::newest_start_sql(true),
        vec!["/w/a".to_string().into()],
    );
    // A ledger of the schema before that index, opened read-only, answers the same.
    let old = Ledger::open_read_only(&path)
        .expect("opens")
        .expect("a ledger");
    check(&old, adopted);
}

/// Asserts that SQLite answers `sql` from the index of run starts alone, reading no
/// start's row (nor its payload); then takes the ledger at `path` back to the schema
/// before that index.
fn read_from_the_index_of_run_starts_then_drop_it(
    path: &std::path::Path,
    sql: &str,
    params: Vec<rusqlite::types::Value>,
) {
    let conn = rusqlite::Connection::open(path).expect("sqlite");
    let plan: Vec<String> = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("plan")
        .query_map(rusqlite::params_from_iter(params), |r| {
            r.get::<_, String>(3)
        })
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("plan rows");
    assert!(
        plan.iter()
            .any(|p| p.contains("COVERING INDEX events_run_starts")),
        "{plan:?}"
    );
    conn.execute_batch("DROP INDEX events_run_starts; PRAGMA user_version = 2;")
        .expect("downgrade");
}

/// A database this user cannot open or write (its mode, its directory's, a read-only
/// file system) is denied, a refusal with its path, and never SQLite failing; a journal
/// left beside it stays a stray journal.
#[test]
fn a_database_that_cannot_be_opened_or_written_is_denied() {
    let path = Path::new("/ledger/ledger.sqlite3");
    let failure = |extended: i32| {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(extended), Some("said".into()))
    };
    for extended in [
        rusqlite::ffi::SQLITE_CANTOPEN,
        rusqlite::ffi::SQLITE_READONLY,
        rusqlite::ffi::SQLITE_READONLY_DIRECTORY,
        rusqlite::ffi::SQLITE_PERM,
    ] {
        let err = sql_err(path)(failure(extended));
        assert!(
            matches!(&err, LedgerError::Denied { path: p, .. } if p == path),
            "{extended}: {err:?}"
        );
    }
    assert!(matches!(
        sql_err(path)(failure(rusqlite::ffi::SQLITE_READONLY_ROLLBACK)),
        LedgerError::StrayJournal { .. }
    ));
}
