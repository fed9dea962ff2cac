//! What the anchored-ledger check adds to every run command: `ensure_intact` (the chain,
//! and the branch from HEAD to its newest anchor) on a run of PHASES anchored phase
//! commits (default 51: 17 cycles of RED, GREEN and REFACTOR) over 200 ordinary
//! commits, with six events of a few KB per phase. Prints the median of several runs:
//! without the ledger's seal (every event rehashed), with it, and right after one
//! append of tdd's own; the whole check split into the chain walk and the branch walk;
//! and the full `tdd ledger verify` check.
//!
//! Run: `cargo bench -p tdd-engine --bench integrity` (PHASES=N to change the size).

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark reports on the terminal"
)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use std::time::Instant;

use serde_json::json;
use tdd_engine::integrity::Scope;
use tdd_engine::ledger::Ledger;

const RUNS: usize = 21;

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

fn git_text(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// Waits until the kernel's coarse clock has passed the ledger's change time, so the
/// next check can keep its seal.
fn settle(database: &Path) {
    while !tdd_engine::ledger::seal::Taken::now(database).is_settled() {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn median(mut f: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[RUNS / 2]
}

/// A payload of about `size` bytes, shaped like a test observation.
fn observation(size: usize) -> serde_json::Value {
    let tests: serde_json::Map<String, serde_json::Value> = (0..size / 80)
        .map(|i| {
            (
                format!("py::tests/test_{i}.py::test_case_{i}"),
                json!({ "outcome": "passed" }),
            )
        })
        .collect();
    json!({ "observations": [{ "project": "py", "tests": tests }] })
}

fn main() {
    let phases: usize = std::env::var("PHASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(51);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let database = root.join("ledger/ledger.sqlite3");
    let repo = root.join("repo");
    std::fs::create_dir_all(&repo).expect("repo dir");
    git(&repo, &["init", "-q"]);
    for i in 0..200 {
        git(
            &repo,
            &[
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                &format!("ordinary {i}"),
            ],
        );
    }
    let mut ledger = Ledger::open(&database).expect("ledger");
    ledger
        .append(Some("run"), "run_started", &json!({}))
        .expect("append");
    eprintln!("making {phases} anchored phase commits...");
    for phase in 0..phases {
        for _ in 0..3 {
            ledger
                .append(Some("run"), "test_observed", &observation(4000))
                .expect("append");
        }
        ledger
            .append(Some("run"), "commit_started", &json!({}))
            .expect("append");
        let anchor = ledger.anchor().expect("anchor");
        let body = format!(
            "TDD-Run: run\nTDD-Cycle: {}\nTDD-Ledger: {anchor}",
            phase / 3 + 1
        );
        git(
            &repo,
            &["commit", "-q", "--allow-empty", "-m", "phase", "-m", &body],
        );
        let sha = git_text(&repo, &["rev-parse", "HEAD"]);
        let mut payload = observation(8000);
        payload["commit"] = json!(sha);
        ledger
            .append(Some("run"), "phase_changed", &payload)
            .expect("append");
        ledger
            .append(Some("run"), "cycle_opened", &json!({}))
            .expect("append");
    }
    let head_sha = git_text(&repo, &["rev-parse", "HEAD"]);
    let anchor_count = ledger.anchor().expect("anchor").count.saturating_sub(2);
    drop(ledger);
    let events = Ledger::open_read_only(&database)
        .expect("open")
        .expect("exists")
        .count()
        .expect("count");
    let bytes = std::fs::metadata(&database).map(|m| m.len()).unwrap_or(0);
    println!(
        "{phases} phase commits, {events} events, ledger {} KB",
        bytes / 1024
    );
    let mut seal = database.as_os_str().to_os_string();
    seal.push("-seal.json");
    let seal = std::path::PathBuf::from(seal);
    // Without a seal, every event is rehashed (the first command after a write by
    // anything but tdd).
    let ensure = median(|| {
        let _ = std::fs::remove_file(&seal);
        tdd_engine::integrity::ensure_intact(&database, &repo, &tdd_engine::ledger::Kinds::NONE)
            .expect("intact");
    });
    // With the seal the last check kept: nothing rehashed.
    settle(&database);
    tdd_engine::integrity::ensure_intact(&database, &repo, &tdd_engine::ledger::Kinds::NONE)
        .expect("intact");
    let sealed = median(|| {
        tdd_engine::integrity::ensure_intact(&database, &repo, &tdd_engine::ledger::Kinds::NONE)
            .expect("intact");
    });
    // After one append of tdd's own, which keeps the seal: that event rehashed.
    let mut after_append: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let mut ledger = Ledger::open(&database).expect("ledger");
            ledger
                .append(Some("run"), "note", &json!({ "text": "a note" }))
                .expect("append");
            drop(ledger);
            let start = Instant::now();
            tdd_engine::integrity::ensure_intact(
                &database,
                &repo,
                &tdd_engine::ledger::Kinds::NONE,
            )
            .expect("intact");
            start.elapsed()
        })
        .collect();
    after_append.sort();
    let after_append = after_append[RUNS / 2];
    let chain = median(|| {
        let ledger = Ledger::open_read_only(&database)
            .expect("open")
            .expect("exists");
        assert!(ledger.verify().expect("verify").broken.is_none());
    });
    let walk = median(|| {
        tdd_engine::integrity::run_commits(&repo, Scope::ToNewestAnchor).expect("walk");
    });
    let queries = median(|| {
        let ledger = Ledger::open_read_only(&database)
            .expect("open")
            .expect("exists");
        assert!(
            ledger
                .recorded_among_after(anchor_count, &[head_sha.as_str()])
                .expect("recorded")
                .contains(&head_sha)
        );
        assert!(ledger.has_started_run("run").expect("runs"));
    });
    let full = median(|| {
        let found = tdd_engine::integrity::check(&database, &repo, Scope::Full).expect("check");
        assert!(found.is_intact());
    });
    println!("ensure_intact (what each run command adds), no seal: {ensure:.2?}");
    println!("ensure_intact, files as the last check sealed them: {sealed:.2?}");
    println!("ensure_intact, after one append of tdd's own:      {after_append:.2?}");
    println!("  of which the chain walk:                  {chain:.2?}");
    println!("  of which the branch walk to the anchor:   {walk:.2?}");
    println!("  of which the records of the walked commits: {queries:.2?}");
    println!("check(Full) (tdd ledger verify):            {full:.2?}");
}
