//! Test support shared by the workspace's crates (a dev-dependency only): hermetic git
//! repositories, waiting on a real event with a generous bound, and process liveness.
//!
//! Nothing here sleeps to synchronise: [`wait_until`] polls a condition that a real
//! event makes true, and fails the test with what it waited for once the bound passes.

#![allow(
    clippy::unwrap_used,
    reason = "test support: a failure is the test's failure"
)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;
use std::time::Instant;

/// How long a test waits for a real process or file before it fails: generous, so a
/// loaded two-core machine never makes a correct test fail.
pub const BOUND: Duration = Duration::from_secs(60);

/// Polls `condition` until it holds; panics naming `what` after [`BOUND`].
pub fn wait_until(what: &str, condition: impl FnMut() -> bool) {
    wait_within(what, BOUND, condition);
}

/// Polls `condition` until it holds; panics naming `what` after `bound`.
pub fn wait_within(what: &str, bound: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + bound;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// True when the process `pid` whose start time (field 22 of `/proc/<pid>/stat`, in clock
/// ticks) is `start` exists and is not a zombie: a recycled pid is not the same process.
pub fn alive(pid: i64, start: u64) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let Some(close) = text.rfind(')') else {
        return false;
    };
    let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let zombie = matches!(fields.first(), Some(&"Z") | Some(&"X"));
    !zombie && fields.get(19).and_then(|f| f.parse::<u64>().ok()) == Some(start)
}

/// `git ARGS` in `dir` with a pinned identity and no system or global configuration;
/// panics with git's stderr when it fails. Returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    git_with(dir, args, &[])
}

/// [`git`] with the variables `env` added, such as `GIT_COMMITTER_DATE`.
pub fn git_with(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh git repository in a temporary directory (removed when dropped).
pub fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "-q"]);
    dir
}

/// Stages everything in `dir` and commits it with `message`.
pub fn commit_all(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
}

/// A copy of the ledger the last release wrote for the demo, conducted to the end (the
/// first schema; `engine/tests/ledgers/demo-0.1.0.sqlite3`), in a directory of its own:
/// the directory, which must outlive the test's use of it, and the database's path.
pub fn demo_ledger() -> (tempfile::TempDir, std::path::PathBuf) {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/ledgers/demo-0.1.0.sqlite3");
    let dir = tempfile::tempdir().expect("tempdir");
    let copy = dir.path().join("ledger.sqlite3");
    std::fs::copy(&fixture, &copy).expect("copy the fixture");
    (dir, copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_commits_and_this_process_is_alive() {
        let dir = repo();
        std::fs::write(dir.path().join("f"), "x").unwrap();
        commit_all(dir.path(), "first");
        assert_eq!(git(dir.path(), &["log", "--format=%s"]).trim(), "first");
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let close = stat.rfind(')').unwrap();
        let start: u64 = stat[close + 1..]
            .split_whitespace()
            .nth(19)
            .unwrap()
            .parse()
            .unwrap();
        assert!(alive(i64::from(std::process::id()), start));
        assert!(!alive(i64::from(std::process::id()), start + 1));
        let mut polls = 0;
        wait_until("three polls", || {
            polls += 1;
            polls == 3
        });
    }
}
