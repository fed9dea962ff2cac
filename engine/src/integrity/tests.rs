//! The check against real git repositories and ledgers.

use serde_json::json;

use super::*;
use crate::git::Git;

struct Repo {
    dir: tempfile::TempDir,
    database: std::path::PathBuf,
    _home: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        let dir = tempfile::tempdir().expect("tempdir");
        Git::new(dir.path()).output(["init", "-q"]).expect("init");
        let home = tempfile::tempdir().expect("tempdir");
        let database = home.path().join("ledger.sqlite3");
        Repo {
            dir,
            database,
            _home: home,
        }
    }

    fn commit(&self, body: &str) -> String {
        let dir = self.dir.path();
        tdd_testutil::git(
            dir,
            &["commit", "-q", "--allow-empty", "-m", "phase", "-m", body],
        );
        tdd_testutil::git(dir, &["rev-parse", "HEAD"])
            .trim()
            .to_string()
    }

    /// A phase commit anchored at the ledger's head, recorded like the engine does.
    fn phase(&self, ledger: &mut Ledger) -> String {
        let anchor = ledger.anchor().expect("anchor");
        let sha = self.commit(&format!("TDD-Run: r\nTDD-Ledger: {anchor}"));
        ledger
            .append(Some("r"), "phase_changed", &json!({ "commit": sha }))
            .expect("append");
        sha
    }

    fn check(&self, scope: Scope) -> Integrity {
        check(&self.database, self.dir.path(), scope).expect("check")
    }
}

fn started(repo: &Repo) -> Ledger {
    let mut ledger = Ledger::open(&repo.database).expect("open");
    ledger
        .append(Some("r"), "run_started", &json!({}))
        .expect("append");
    ledger
}

#[test]
fn an_honest_branch_and_an_older_release_commit_verify() {
    let repo = Repo::new();
    let mut ledger = started(&repo);
    let old = repo.commit("TDD-Run: r\nTDD-Cycle: 1");
    ledger
        .append(Some("r"), "phase_changed", &json!({ "commit": old }))
        .expect("append");
    repo.phase(&mut ledger);
    repo.phase(&mut ledger);
    let full = repo.check(Scope::Full);
    assert!(full.is_intact(), "{full:?}");
    assert_eq!((full.run_commits, full.anchors), (3, 2));
    assert_eq!(repo.check(Scope::ToNewestAnchor).run_commits, 1);
}

#[test]
fn an_anchor_beyond_the_chain_is_an_older_copy() {
    let repo = Repo::new();
    let mut ledger = started(&repo);
    let sha = repo.commit(&format!(
        "TDD-Run: r\nTDD-Ledger: 9:{}",
        crate::ledger::GENESIS_HASH
    ));
    ledger
        .append(Some("r"), "phase_changed", &json!({ "commit": sha }))
        .expect("append");
    let found = repo.check(Scope::ToNewestAnchor);
    assert_eq!(found.problems.len(), 1, "{found:?}");
    assert_eq!(found.problems[0].commit, sha);
    assert!(found.problems[0].reason.contains("older copy"), "{found:?}");
}

#[test]
fn a_missing_ledger_with_run_commits_fails_and_an_unrecorded_head_is_a_crash_window() {
    let repo = Repo::new();
    repo.commit("TDD-Run: r\nTDD-Cycle: 1");
    let found = repo.check(Scope::Full);
    assert!(
        !found.ledger_exists && found.problems.len() == 1,
        "{found:?}"
    );
    assert!(matches!(
        ensure_intact(&repo.database, repo.dir.path(), &crate::ledger::Kinds::NONE),
        Err(IntegrityError::Tampered(_))
    ));
}

#[test]
fn an_unrecorded_commit_at_head_is_accounted_for_only_by_its_commit_started_anchor() {
    // Anchored at an event that is not its commit_started: what an older copy of the
    // ledger looks like.
    let repo = Repo::new();
    let ledger = started(&repo);
    let anchor = ledger.anchor().expect("anchor");
    repo.commit(&format!("TDD-Run: r\nTDD-Ledger: {anchor}"));
    let found = repo.check(Scope::Full);
    assert!(found.problems[0].reason.contains("no event"), "{found:?}");
    // The commit at HEAD whose record never came: its commit_started anchor accounts
    // for it (whatever else its run records), until its run records another commit.
    let repo = Repo::new();
    let mut ledger = started(&repo);
    ledger
        .append(Some("r"), "commit_started", &json!({}))
        .expect("append");
    let anchor = ledger.anchor().expect("anchor");
    repo.commit(&format!("TDD-Run: r\nTDD-Ledger: {anchor}"));
    assert!(repo.check(Scope::Full).is_intact());
    ledger
        .append(Some("r"), "advance_refused", &json!({}))
        .expect("append");
    assert!(repo.check(Scope::Full).is_intact());
    ledger
        .append(Some("r"), "phase_changed", &json!({ "commit": "another" }))
        .expect("append");
    let found = repo.check(Scope::Full);
    assert!(found.problems[0].reason.contains("no event"), "{found:?}");
}
