//! The anchored ledger end to end: phase commits carry the chain head, `tdd ledger
//! verify` walks the branch, and run commands refuse a ledger that fails it.

use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;
use tdd_engine::ledger::GENESIS_HASH;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::event_hash;

use crate::support::Env;

const CALC: &str = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return 0\n";
const SUB: &str = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n";
const TEST: &str = "from calc import sub\n\ndef test_sub():\n    assert sub(5, 2) == 3\n";
const PLAN: &str = "---\ncycles:\n  - n: 1\n    project: py\n    title: subtraction\n    test: tests/test_sub.py::test_sub\n---\n";

fn project() -> Env {
    let env = Env::new();
    env.write("calc.py", CALC);
    env.write("pytest.ini", "[pytest]\npythonpath = .\n");
    env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
    env.write("tdd.toml", "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.py\"]\ntest = [\"tests/**\"]\n\n[conductor]\nprovider = \"scripted\"\n\n[provider.scripted]\ncommand = \"tdd\"\nargs = [\"unused.toml\"]\n");
    env.write(".tdd/plan.md", PLAN);
    env.commit_all("calc");
    let (exit, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{value}");
    env
}

/// RED with a refusal first and a locked implementation file put back on the way.
fn red(env: &Env) {
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 1, "no test yet: {value}");
    env.write("tests/test_sub.py", TEST);
    env.write("calc.py", SUB);
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    assert_eq!(value["data"]["reverted"][0], "calc.py", "{value}");
}

fn green(env: &Env) {
    env.write("calc.py", SUB);
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR", "{value}");
}

fn database(env: &Env) -> PathBuf {
    let (exit, value) = env.json(&["ledger", "path"]);
    assert_eq!(exit, 0, "{value}");
    PathBuf::from(value["data"]["database"].as_str().expect("database path"))
}

fn head(env: &Env) -> String {
    env.git(&["rev-parse", "HEAD"]).trim().to_string()
}

/// The database and the files SQLite keeps beside it.
fn files(db: &Path) -> Vec<PathBuf> {
    ["", "-wal", "-shm"]
        .iter()
        .map(|suffix| PathBuf::from(format!("{}{suffix}", db.display())))
        .collect()
}

fn remove(db: &Path) {
    for file in files(db) {
        if file.exists() {
            std::fs::remove_file(&file).expect("remove ledger file");
        }
    }
}

/// Removes every event of `kinds` the way an attacker with a SQLite client would: the
/// guards dropped, the chain recomputed over what is left, the head row put right and
/// the guards put back, so the chain alone verifies again.
fn delete_and_recompute(db: &Path, kinds: &[&str]) -> usize {
    let conn = rusqlite::Connection::open(db).expect("sqlite client");
    conn.execute_batch("DROP TRIGGER events_no_update; DROP TRIGGER events_no_delete;")
        .expect("drop guards");
    let mut removed = 0;
    for kind in kinds {
        removed += conn
            .execute("DELETE FROM events WHERE kind = ?1", [kind])
            .expect("delete");
    }
    type Row = (i64, Option<String>, String, String, String);
    let rows: Vec<Row> = conn
        .prepare("SELECT id, run_id, kind, payload, at FROM events ORDER BY id")
        .expect("prepare")
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    let mut prev = GENESIS_HASH.to_string();
    for (id, run_id, kind, payload, at) in &rows {
        let hash = event_hash(&prev, run_id.as_deref(), kind, payload, at);
        conn.execute(
            "UPDATE events SET prev_hash = ?1, hash = ?2 WHERE id = ?3",
            rusqlite::params![prev, hash, id],
        )
        .expect("rechain");
        prev = hash;
    }
    conn.execute(
        "UPDATE chain_head SET count = ?1, hash = ?2 WHERE id = 1",
        rusqlite::params![rows.len() as i64, prev],
    )
    .expect("head");
    conn.execute_batch(
        "CREATE TRIGGER events_no_update BEFORE UPDATE ON events \
         BEGIN SELECT RAISE(ABORT, 'the tdd ledger is append-only'); END; \
         CREATE TRIGGER events_no_delete BEFORE DELETE ON events \
         BEGIN SELECT RAISE(ABORT, 'the tdd ledger is append-only'); END;",
    )
    .expect("guards back");
    removed
}

/// `tdd ledger verify` fails with `ledger_tampered`, naming `commit` among its problems.
fn verify_names(env: &Env, commit: &str) -> Value {
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "ledger_tampered", "{value}");
    let named = value["data"]["problems"]
        .as_array()
        .is_some_and(|p| p.iter().any(|p| p["commit"] == commit));
    assert!(named, "{commit} is not named: {value}");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(&commit[..12])),
        "{value}"
    );
    value
}

/// `tdd ARGS` refuses with `ledger_tampered`, exit 1, saying what failed and what to do.
fn refuses(env: &Env, args: &[&str]) -> Value {
    let (exit, value) = env.json(args);
    assert_eq!(exit, 1, "{args:?}: {value}");
    assert_eq!(
        value["error"]["reason"], "ledger_tampered",
        "{args:?}: {value}"
    );
    let hint = value["error"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("backup"), "{args:?}: {value}");
    value
}

#[test]
fn deleted_events_with_a_recomputed_chain_are_caught_by_the_anchors() {
    let env = project();
    red(&env);
    let red_commit = head(&env);
    green(&env);
    let green_commit = head(&env);
    let db = database(&env);
    assert_eq!(env.json(&["ledger", "verify"]).0, 0);
    let removed = delete_and_recompute(&db, &["advance_refused", "locked_file_reverted"]);
    assert_eq!(removed, 2, "one refusal and one revert were recorded");
    let value = verify_names(&env, &green_commit);
    assert!(
        value["data"]["broken"].is_null(),
        "the chain alone verifies: {value}"
    );
    let problems = value["data"]["problems"].as_array().expect("problems");
    assert!(
        problems.iter().any(|p| p["commit"] == red_commit.as_str()),
        "{value}"
    );
    refuses(&env, &["status"]);
    // A run is active: `tdd test` would record against it.
    refuses(&env, &["test", "tests/test_sub.py::test_sub"]);
    env.write("calc.py", &format!("\"\"\"Arithmetic.\"\"\"\n\n{SUB}"));
    refuses(&env, &["advance"]);
    assert_eq!(
        head(&env),
        green_commit,
        "a refused advance commits nothing"
    );
}

#[test]
fn an_older_copy_of_the_ledger_put_back_is_caught() {
    let env = project();
    red(&env);
    let db = database(&env);
    let backup = tempfile::tempdir().expect("tempdir");
    let copies: Vec<(PathBuf, PathBuf)> = files(&db)
        .into_iter()
        .filter(|f| f.exists())
        .map(|f| {
            let copy = backup.path().join(f.file_name().expect("file name"));
            std::fs::copy(&f, &copy).expect("copy");
            (f, copy)
        })
        .collect();
    green(&env);
    remove(&db);
    for (file, copy) in &copies {
        std::fs::copy(copy, file).expect("put back");
    }
    let value = verify_names(&env, &head(&env));
    let reasons = value["data"]["problems"].to_string();
    assert!(reasons.contains("older copy"), "{value}");
    refuses(&env, &["status"]);
    refuses(&env, &["advance"]);
}

#[test]
fn a_removed_ledger_is_caught_and_not_recreated() {
    let env = project();
    red(&env);
    let db = database(&env);
    remove(&db);
    let value = verify_names(&env, &head(&env));
    assert_eq!(value["data"]["exists"], false, "{value}");
    refuses(&env, &["status"]);
    refuses(&env, &["advance"]);
    let issue = env.home.path().join("issue-1.md");
    std::fs::write(&issue, "# Sub\n\n## Acceptance criteria\n\n- [ ] sub\n").expect("issue");
    refuses(&env, &["conduct", issue.to_str().expect("utf-8")]);
    let out = env
        .tdd()
        .args(["verdict", "accept", "--reason", "fine", "--json"])
        .env("TDD_LEAF_ID", "leaf-1")
        .env("TDD_LEAF_TOKEN", "token")
        .output()
        .expect("tdd runs");
    assert_eq!(crate::support::code(&out), 1);
    let value = crate::support::envelope(&out);
    assert_eq!(value["error"]["reason"], "ledger_tampered", "{value}");
    assert!(
        !db.exists(),
        "a refused command leaves no new ledger behind"
    );
}

#[test]
fn an_honest_run_verifies_with_every_phase_commit_anchored() {
    let env = project();
    red(&env);
    green(&env);
    env.write("calc.py", &format!("\"\"\"Arithmetic.\"\"\"\n\n{SUB}"));
    let (exit, value) = env.json(&["advance"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["next_action"]["verb"], "complete", "{value}");
    assert!(
        value["data"]["commit"].is_string(),
        "the REFACTOR commits: {value}"
    );
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["run_commits"], 3, "{value}");
    assert_eq!(value["data"]["anchors"], 3, "{value}");
    let anchors = env.git(&["log", "--format=%(trailers:key=TDD-Ledger,valueonly)", "-3"]);
    let anchors: Vec<&str> = anchors.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(anchors.len(), 3, "{anchors:?}");
    let db = database(&env);
    let ledger = Ledger::open_read_only(&db).expect("open").expect("exists");
    for anchor in anchors {
        let (count, hash) = anchor.split_once(':').expect("count:hash");
        let count: u64 = count.parse().expect("count");
        assert_eq!(ledger.hash_at(count).expect("hash").as_deref(), Some(hash));
    }
    assert_eq!(env.json(&["status"]).0, 0);
}

#[test]
fn a_commit_of_an_older_release_is_checked_only_for_its_event() {
    let env = project();
    red(&env);
    let (_, status) = env.json(&["status"]);
    let run_id = status["data"]["run_id"]
        .as_str()
        .expect("run id")
        .to_string();
    // An artifact commit as an older release wrote it: run trailers, no anchor.
    let message = format!("TDD-Run: {run_id}\nTDD-Cycle: 1\nTDD-Phase: artifact");
    env.git(&[
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "chore(x): regenerate",
        "-m",
        &message,
    ]);
    let old = head(&env);
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 1, "not recorded yet: {value}");
    assert_eq!(
        value["data"]["problems"][0]["commit"],
        old.as_str(),
        "{value}"
    );
    let db = database(&env);
    Ledger::open(&db)
        .expect("open")
        .append(
            Some(&run_id),
            "artifact_regenerated",
            &serde_json::json!({ "n": 1, "artifact": "x", "files": [], "commit": old }),
        )
        .expect("record");
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["anchors"], 1, "{value}");
    let (exit, value) = env.json(&["status"]);
    assert_eq!(exit, 0, "{value}");
}

#[test]
fn a_process_killed_between_a_commit_and_its_record_is_not_tampering() {
    let env = project();
    red(&env);
    let red_commit = head(&env);
    env.write("calc.py", SUB);
    let out = env
        .tdd()
        .args(["advance", "--json"])
        .env("TDD_FAILPOINT", "advance_committed=kill")
        .output()
        .expect("tdd runs");
    assert!(!out.status.success(), "killed at the failpoint");
    let green_commit = head(&env);
    assert_ne!(green_commit, red_commit, "the GREEN commit was made");
    // The commit at HEAD is accounted for by its own anchor.
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 0, "{value}");
    let (exit, value) = env.json(&["status"]);
    assert_eq!(exit, 0, "{value}");
    // Whatever the next advance decides, it does not make the ledger fail.
    let (exit, value) = env.json(&["advance"]);
    assert_ne!(value["error"]["reason"], "ledger_tampered", "{value}");
    assert!(exit == 0 || exit == 1, "{value}");
    let (exit, value) = env.json(&["status"]);
    assert_eq!(exit, 0, "{value}");
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 0, "{value}");
}

#[test]
fn every_command_that_changes_a_run_refuses_a_ledger_that_fails_verification() {
    let env = project();
    red(&env);
    green(&env);
    let db = database(&env);
    assert_eq!(delete_and_recompute(&db, &["advance_refused"]), 1);
    let events = |env: &Env| {
        let (_, value) = env.json(&["ledger", "verify"]);
        value["data"]["events"].clone()
    };
    let before = (head(&env), events(&env));
    assert!(before.1.is_u64(), "{before:?}");
    let commands: [&[&str]; 10] = [
        &["annotate", "--key", "reviewer", "--value", "me"],
        &["blocker", "--kind", "question", "--detail", "which sign?"],
        &["cycle", "skip", "--reason", "later"],
        &["note", "a note"],
        &["plan", "register", ".tdd/plan.md"],
        &["resume", "--note", "back"],
        &["rollback"],
        &["run", "start", "--plan", ".tdd/plan.md"],
        &["run", "abandon", "--reason", "done with it"],
        &["target", "tests/test_sub.py::test_sub"],
    ];
    for args in commands {
        refuses(&env, args);
        assert_eq!(
            (head(&env), events(&env)),
            before,
            "tdd {args:?} changed the ledger or HEAD"
        );
    }
}

/// The ledger's seal (the point verified last, with its files' key) is what spares the
/// check every command makes a rehash of the whole chain; an event edited in the
/// database file itself after it, with its length and modification time kept and the
/// guards and hashes untouched, is still refused by the next command.
#[test]
fn an_event_edited_in_place_after_the_ledger_was_sealed_is_refused_by_the_next_command() {
    let env = project();
    red(&env);
    let (exit, value) = env.json(&["note", "marker-1234 for the seal"]);
    assert_eq!(exit, 0, "{value}");
    let db = database(&env);
    let mut seal = db.clone().into_os_string();
    seal.push("-seal.json");
    let seal = PathBuf::from(seal);
    // A command once the kernel's clock has passed the last write keeps a seal (waits
    // on the file appearing, not on a time).
    let _ = std::fs::remove_file(&seal);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !seal.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no seal was ever kept"
        );
        let (exit, value) = env.json(&["status"]);
        assert_eq!(exit, 0, "{value}");
    }
    let modified = std::fs::metadata(&db)
        .and_then(|m| m.modified())
        .expect("mtime");
    let mut bytes = std::fs::read(&db).expect("read");
    let marker = b"marker-1234";
    let copies: Vec<usize> = bytes
        .windows(marker.len())
        .enumerate()
        .filter(|(_, w)| w == marker)
        .map(|(at, _)| at)
        .collect();
    assert!(!copies.is_empty(), "the note is in the database file");
    for at in copies {
        bytes[at + 7] = b'9';
    }
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .expect("open");
    std::io::Write::write_all(&mut &file, &bytes).expect("write");
    file.set_times(std::fs::FileTimes::new().set_modified(modified))
        .expect("mtime put back");
    drop(file);
    let value = refuses(&env, &["status"]);
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("edited")),
        "{value}"
    );
}

/// A change keeps the ledger's seal for the files it leaves, so the next command
/// rehashes only what the change appended: here an accepted GREEN, which commits,
/// records and publishes the ledger in git. (Run as root, SQLite re-owns the
/// write-ahead log on every open, so a second connection opened while the change
/// writes, such as one to publish, would cost every later check a walk of the whole
/// chain.)
#[test]
fn a_change_that_commits_and_publishes_keeps_the_seal_for_the_files_it_leaves() {
    use std::os::unix::fs::MetadataExt;
    let env = project();
    let db = database(&env);
    red(&env);
    green(&env);
    // Nothing else runs in between: a command's own check would seal anew.
    let mut seal = db.clone().into_os_string();
    seal.push("-seal.json");
    let seal: Value =
        serde_json::from_slice(&std::fs::read(PathBuf::from(seal)).expect("a seal is kept"))
            .expect("the seal reads");
    let meta = std::fs::symlink_metadata(&db).expect("the database");
    let ns = |secs: i64, nanos: i64| secs * 1_000_000_000 + nanos;
    let key = serde_json::json!([
        meta.dev(),
        meta.ino(),
        meta.size(),
        ns(meta.mtime(), meta.mtime_nsec()),
        ns(meta.ctime(), meta.ctime_nsec()),
    ]);
    assert_eq!(
        seal["key"][0], key,
        "the seal is for the database as GREEN left it"
    );
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    assert!(
        std::fs::metadata(&wal).map_or(true, |m| m.len() == 0),
        "the log was copied into the database"
    );
    assert_eq!(seal["key"][1], Value::Null, "{seal}");
}
