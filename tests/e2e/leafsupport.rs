//! Helpers for the supervision commands: leaf directories, records, live processes.

use std::path::PathBuf;
use std::process::Child;

use serde_json::Value;

use crate::support::Env;

/// Generous bound for anything a test waits for; never the expected duration.
pub use tdd_testutil::BOUND;

/// `tdd --json ARGS...` (the flag first: after `--`, it would belong to the command),
/// returning the exit code and the validated envelope.
pub fn json(env: &Env, args: &[&str]) -> (i32, Value) {
    let out = env
        .tdd()
        .arg("--json")
        .args(args)
        .output()
        .expect("tdd runs");
    (crate::support::code(&out), crate::support::envelope(&out))
}

/// The directory holding this repository's leaves.
pub fn leaves_dir(env: &Env) -> PathBuf {
    let (exit, value) = env.json(&["ledger", "path"]);
    assert_eq!(exit, 0, "{value}");
    PathBuf::from(value["data"]["dir"].as_str().expect("ledger dir")).join("leaves")
}

/// `tdd exec --detach --json ARGS...`, returning the leaf id.
pub fn detach(env: &Env, args: &[&str]) -> String {
    let mut full = vec!["exec", "--detach"];
    full.extend_from_slice(args);
    let (exit, value) = json(env, &full);
    assert_eq!(exit, 0, "{value}");
    value["data"]["id"].as_str().expect("leaf id").to_string()
}

/// A record of a leaf (`launch`, `exit`, ...), once it exists.
pub fn record(env: &Env, id: &str, name: &str) -> Option<Value> {
    let path = leaves_dir(env).join(id).join(format!("{name}.json"));
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

pub use tdd_testutil::alive;
pub use tdd_testutil::wait_until;

/// The leaf process of a launch record: `(pid, start_time)`.
pub fn leaf_process(launch: &Value) -> (i64, u64) {
    let leaf = &launch["leaf"];
    (
        leaf["pid"].as_i64().expect("pid"),
        leaf["start_time"].as_u64().expect("start time"),
    )
}

/// Starts `tdd ARGS` as a child process in the hermetic environment, so a test can
/// signal it.
pub fn spawn_tdd(env: &Env, args: &[&str]) -> Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("tdd"))
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", env.home.path())
        .env("TDD_LEDGER_HOME", env.ledger_home.path())
        .current_dir(env.root())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tdd starts")
}

/// Waits for a child within the bound and returns its exit code and stdout.
pub fn finish(child: Child) -> (i32, String) {
    let pid = child.id();
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = sender.send(child.wait_with_output());
    });
    let out = receiver
        .recv_timeout(BOUND)
        .unwrap_or_else(|_| panic!("tdd (pid {pid}) still running after {BOUND:?}"))
        .expect("tdd ran");
    (
        crate::support::code(&out),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Sends a signal to a process.
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).expect("pid fits"));
    nix::sys::signal::kill(pid, signal).expect("signal sent");
}
