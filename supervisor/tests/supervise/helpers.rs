//! Helper processes run as leaves or descendants: `<exe> __helper <mode> ...`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Runs a helper mode and returns its exit code.
pub fn run(args: &[String]) -> i32 {
    match args {
        [mode, pid_file, go_file] if mode == "double-fork" => double_fork(pid_file, go_file),
        [mode, pid_file] if mode == "middle" => middle(pid_file),
        [mode, pid_file] if mode == "sleeper" => sleeper(pid_file),
        _ => 2,
    }
}

/// The leaf of the daemon test: starts `middle`, which double-forks a daemon and
/// exits, then waits for the test's go file and exits 0.
fn double_fork(pid_file: &str, go_file: &str) -> i32 {
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(_) => return 3,
    };
    let status = Command::new(exe)
        .args(["__helper", "middle", pid_file])
        .status();
    if !status.is_ok_and(|status| status.success()) {
        return 4;
    }
    while !Path::new(go_file).exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    0
}

/// The middle of a double fork: a new session, a child, and exit at once, so the
/// child is orphaned (and re-parented to the nearest subreaper).
fn middle(pid_file: &str) -> i32 {
    if nix::unistd::setsid().is_err() {
        return 5;
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(_) => return 3,
    };
    match Command::new(exe)
        .args(["__helper", "sleeper", pid_file])
        .spawn()
    {
        Ok(_) => 0,
        Err(_) => 6,
    }
}

/// The daemon: records its pid (write, then rename) and sleeps for ever.
fn sleeper(pid_file: &str) -> i32 {
    let temp = format!("{pid_file}.tmp");
    if std::fs::write(&temp, std::process::id().to_string()).is_err()
        || std::fs::rename(&temp, pid_file).is_err()
    {
        return 7;
    }
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
