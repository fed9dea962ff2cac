//! `tdd ledger path` and `tdd ledger verify` against real SQLite files.

use std::path::PathBuf;

use tdd_engine::ledger::Ledger;

use crate::support::Env;

fn database(env: &Env) -> PathBuf {
    let (exit, value) = env.json(&["ledger", "path"]);
    assert_eq!(exit, 0, "{value}");
    PathBuf::from(value["data"]["database"].as_str().expect("database path"))
}

fn seed(env: &Env, n: usize) -> PathBuf {
    let db = database(env);
    let mut ledger = Ledger::open(&db).expect("open");
    for i in 0..n {
        ledger
            .append(Some("run"), "note", &serde_json::json!({ "i": i }))
            .expect("append");
    }
    db
}

#[test]
fn the_ledger_lives_under_tdd_ledger_home_outside_the_work_tree() {
    let env = Env::new();
    let db = database(&env);
    assert!(db.starts_with(env.ledger_home.path()), "{}", db.display());
    let root = env.root().canonicalize().expect("canonical");
    assert!(!db.starts_with(&root));
}

#[test]
fn a_ledger_home_inside_the_work_tree_is_refused() {
    let inside = Env::new();
    let home = inside.root().join("ledger");
    let env = inside.with_env("TDD_LEDGER_HOME", home.to_str().expect("utf-8"));
    let (exit, value) = env.json(&["ledger", "path"]);
    assert_eq!(exit, 2);
    assert_eq!(value["error"]["reason"], "ledger_home_invalid");
    assert!(
        !home.exists(),
        "nothing may be created inside the work tree"
    );
}

#[test]
fn verify_counts_an_intact_chain() {
    let env = Env::new();
    seed(&env, 7);
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["events"], 7);
}

#[test]
fn verify_before_any_event_reports_zero_and_creates_nothing() {
    let env = Env::new();
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 0);
    assert_eq!(value["data"]["events"], 0);
    assert!(!database(&env).exists());
}

fn tampered(sql: &str) -> serde_json::Value {
    let env = Env::new();
    let db = seed(&env, 5);
    rusqlite::Connection::open(&db)
        .expect("sqlite client")
        .execute_batch(sql)
        .expect("tamper");
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 1, "{value}");
    assert_eq!(value["error"]["reason"], "ledger_tampered");
    value
}

#[test]
fn verify_catches_an_update_made_with_another_sqlite_client() {
    let value =
        tampered("DROP TRIGGER events_no_update; UPDATE events SET payload = '{}' WHERE id = 2;");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("event 2")),
        "{value}"
    );
}

#[test]
fn verify_catches_a_delete_made_with_another_sqlite_client() {
    let value = tampered("DROP TRIGGER events_no_delete; DELETE FROM events WHERE id = 4;");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("event 5")),
        "{value}"
    );
    let value = tampered("DROP TRIGGER events_no_delete; DELETE FROM events WHERE id = 5;");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("chain head")),
        "{value}"
    );
}

#[test]
fn verify_refuses_a_ledger_from_a_newer_tdd() {
    let env = Env::new();
    let db = seed(&env, 1);
    rusqlite::Connection::open(&db)
        .expect("open")
        .execute_batch("PRAGMA user_version = 42;")
        .expect("bump");
    let (exit, value) = env.json(&["ledger", "verify"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "ledger_too_new");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("42"))
    );
}

/// Ways the ledger's files can be damaged or replaced between two commands, each made
/// at `db` (which holds a real ledger when called).
const DAMAGE: &[&str] = &[
    "random",
    "garbage_after_header",
    "truncated",
    "directory",
    "named_pipe",
    "symlink",
    "named_pipe_as_wal",
];

fn damage(db: &std::path::Path, how: &str) {
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    let _ = std::fs::remove_file(&wal);
    if how != "named_pipe_as_wal" && how != "truncated" {
        let _ = std::fs::remove_file(db);
    }
    let mkfifo = |path: &std::path::Path| {
        let made = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo");
        assert!(made.success());
    };
    match how {
        "random" => std::fs::write(
            db,
            (0..8192u32)
                .map(|i| (i * 7919 % 251) as u8)
                .collect::<Vec<_>>(),
        ),
        "garbage_after_header" => std::fs::write(db, b"SQLite format 3\0garbage that is no page"),
        "truncated" => {
            let bytes = std::fs::read(db).expect("ledger");
            std::fs::write(db, &bytes[..bytes.len().min(1500)])
        }
        "directory" => std::fs::create_dir(db),
        "named_pipe" => {
            mkfifo(db);
            Ok(())
        }
        "symlink" => std::os::unix::fs::symlink("/etc/passwd", db),
        "named_pipe_as_wal" => {
            mkfifo(&wal);
            Ok(())
        }
        other => panic!("no damage {other}"),
    }
    .expect("damage");
}

#[test]
fn a_damaged_ledger_is_refused_with_its_path_never_a_crash_or_a_hang() {
    for how in DAMAGE {
        let env = Env::new();
        env.write(
            "tdd.toml",
            "[project.py]\nadapter = \"pytest\"\ntest_paths = [\"tests/\"]\n",
        );
        env.write("tests/test_a.py", "def test_a():\n    pass\n");
        env.write(".gitignore", "__pycache__/\n.pytest_cache/\n");
        env.commit_all("a project");
        let db = seed(&env, 40);
        damage(&db, how);
        for args in [
            &["status"][..],
            &["ledger", "verify"],
            &["test"],
            &["advance"],
        ] {
            let out = env
                .tdd()
                .args(args)
                .arg("--json")
                .timeout(std::time::Duration::from_secs(120))
                .output()
                .expect("tdd runs");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert_eq!(
                out.status.code(),
                Some(1),
                "{how}, {args:?}: {text} {out:?}"
            );
            let value: serde_json::Value = serde_json::from_str(text.trim()).expect("envelope");
            assert_eq!(
                value["error"]["reason"], "ledger_corrupt",
                "{how}, {args:?}: {value}"
            );
            let message = value["error"]["message"].as_str().unwrap_or_default();
            assert!(message.contains("ledger.sqlite3"), "{how}: {value}");
        }
    }
}

#[test]
fn export_prints_every_event_as_one_chained_json_line_and_filters_by_run() {
    let env = Env::new();
    let (code, text) = env.on_terminal(&["ledger", "export"]);
    assert_eq!(
        (code, text.as_str()),
        (0, ""),
        "no ledger: nothing to export"
    );
    let db = seed(&env, 3);
    let mut ledger = Ledger::open(&db).expect("open");
    ledger
        .append(Some("other"), "note", &serde_json::json!({ "i": 9 }))
        .expect("append");
    drop(ledger);
    let (code, text) = env.on_terminal(&["ledger", "export"]);
    assert_eq!(code, 0, "{text}");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is one JSON object"))
        .collect();
    assert_eq!(lines.len(), 4, "{text}");
    for (i, event) in lines.iter().enumerate() {
        assert_eq!(event["id"], i as i64 + 1, "{event}");
        if i > 0 {
            assert_eq!(event["prev_hash"], lines[i - 1]["hash"], "{text}");
        }
    }
    assert_eq!(lines[3]["payload"]["i"], 9);
    let (code, value) = env.json(&["ledger", "export", "--run", "run"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["count"], 3, "{value}");
    let (code, value) = env.json(&["ledger", "export", "--run", "nope"]);
    assert_eq!(code, 2, "{value}");
    assert_eq!(value["error"]["reason"], "run_not_found", "{value}");
}
