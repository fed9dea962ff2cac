//! The lock against real processes: the test binary re-runs itself as the contender.

use std::io::BufRead;
use std::io::Read;
use std::io::Write;
use std::process::Command;
use std::process::Stdio;

use super::*;

const CHILD: &str = "TDD_GUARD_TEST_CHILD";

/// In a child process (`CHILD` set to `MODE:STATE_DIR`): `hold` takes the lock, says
/// `locked` and holds it until stdin closes; `churn` takes and drops it many times.
#[test]
fn guard_child() {
    let Ok(spec) = std::env::var(CHILD) else {
        return;
    };
    let (mode, state) = spec.split_once(':').expect("MODE:STATE_DIR");
    let lock = lock_file(Path::new(state));
    if mode == "hold" {
        let guard = acquire(&lock, "baseline").expect("io").expect("free");
        let mut out = std::io::stdout();
        writeln!(out, "locked").expect("stdout");
        out.flush().expect("stdout");
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        drop(guard);
    } else {
        for _ in 0..2_000 {
            drop(acquire(&lock, "baseline").expect("io"));
        }
    }
}

/// The lock file of the work tree `/work-tree` under `state`.
fn lock_file(state: &Path) -> PathBuf {
    state
        .join("locks")
        .join(format!("{}.lock", key(Path::new("/work-tree"))))
}

fn child(mode: &str, state: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "worktree_lock::tests::guard_child",
            "--nocapture",
            "-q",
        ])
        .env(CHILD, format!("{mode}:{}", state.display()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("child starts")
}

#[test]
fn a_second_process_is_told_the_holders_pid_and_what_it_does() {
    let state = tempfile::tempdir().expect("state");
    let mut owner = child("hold", state.path());
    let mut lines = std::io::BufReader::new(owner.stdout.take().expect("stdout")).lines();
    let said = lines.find(|l| l.as_deref().is_ok_and(|l| l.contains("locked")));
    assert!(said.is_some(), "the child took the lock");
    let lock = lock_file(state.path());
    let busy = acquire(&lock, "advance")
        .expect("io")
        .expect_err("held by the child");
    assert_eq!(busy.pid, owner.id());
    assert_eq!(busy.what, "baseline");
    assert!(!busy.since.is_empty());
    let probed = holder(&lock).expect("io").expect("held");
    assert_eq!(probed, busy, "a probe names the same holder");
    drop(owner.stdin.take());
    assert!(owner.wait().expect("child exits").success());
    assert_eq!(holder(&lock).expect("io"), None, "nobody holds it");
    let guard = acquire(&lock, "advance").expect("io");
    assert!(guard.is_ok(), "free once the holder is gone");
}

#[test]
fn a_contender_never_names_pid_zero_while_the_lock_changes_hands() {
    let state = tempfile::tempdir().expect("state");
    let mut churn = child("churn", state.path());
    let pid = churn.id();
    while churn.try_wait().expect("wait").is_none() {
        if let Err(holder) = acquire(&lock_file(state.path()), "advance").expect("io") {
            assert_eq!(holder.pid, pid, "{holder:?}");
            assert_eq!(holder.what, "baseline", "{holder:?}");
        }
    }
    assert!(churn.wait().expect("child exits").success());
}

#[test]
fn within_one_process_the_second_acquisition_is_refused_and_the_first_kept() {
    let state = tempfile::tempdir().expect("state");
    let lock = lock_file(state.path());
    let first = acquire(&lock, "advance").expect("io").expect("free");
    let second = acquire(&lock, "baseline").expect("io");
    let holder = second.expect_err("held");
    assert_eq!(holder.pid, std::process::id());
    assert_eq!(holder.what, "advance");
    drop(first);
    assert!(acquire(&lock, "baseline").expect("io").is_ok());
}

#[test]
fn a_probe_in_the_holding_process_keeps_the_lock() {
    let state = tempfile::tempdir().expect("state");
    let lock = lock_file(state.path());
    assert_eq!(holder(&lock).expect("io"), None, "no file, no holder");
    let guard = acquire(&lock, "conduct").expect("io").expect("free");
    let probed = holder(&lock).expect("io").expect("held");
    assert_eq!(probed.pid, std::process::id());
    assert_eq!(probed.what, "conduct");
    // The probe opened nothing, so the record lock is still ours: another process
    // still finds it held.
    let mut contender = child("hold", state.path());
    drop(contender.stdin.take());
    assert!(
        !contender.wait().expect("child exits").success(),
        "the child could not take the lock the probe left held"
    );
    drop(guard);
    assert_eq!(holder(&lock).expect("io"), None, "released on drop");
}

#[test]
fn the_key_depends_on_the_work_tree_alone() {
    assert_eq!(key(Path::new("/a")), key(Path::new("/a")));
    assert_ne!(key(Path::new("/a")), key(Path::new("/b")));
    assert_eq!(key(Path::new("/a")).len(), 16);
}
