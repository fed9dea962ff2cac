//! Shared test support: a supervisor on a temporary state directory, leaf specs, and
//! waiting for events with generous bounds.

use std::fs;
use std::path::Path;
use std::path::PathBuf;

use tdd_supervisor::ExitRecord;
use tdd_supervisor::LeafHandle;
use tdd_supervisor::LeafSpec;
use tdd_supervisor::ProcessId;
use tdd_supervisor::Supervisor;
use tdd_supervisor::WaitOutcome;

/// Generous bound for anything a test waits for; it is never the expected duration.
pub use tdd_testutil::BOUND;

/// The `PATH` every leaf gets, so tests do not depend on the caller's.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A supervisor whose state directory lives as long as this value.
pub struct Env {
    pub temp: tempfile::TempDir,
    pub supervisor: Supervisor,
}

impl Env {
    pub fn new() -> Env {
        let temp = tempfile::tempdir().expect("temp dir");
        let exe = std::env::current_exe().expect("own executable");
        let supervisor = Supervisor::new(temp.path().join("state"), exe, ["__supervise"]);
        Env { temp, supervisor }
    }

    /// A scratch path inside the temporary directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.temp.path().join(name)
    }

    pub fn launch(&self, spec: &LeafSpec) -> LeafHandle {
        self.supervisor.launch(spec).expect("launches")
    }
}

/// `/bin/sh -c script` with only `PATH` in its environment.
pub fn sh(script: &str) -> LeafSpec {
    LeafSpec::new(["/bin/sh", "-c", script]).env("PATH", PATH)
}

/// A helper mode of this test binary as the leaf.
pub fn helper(args: &[&str]) -> LeafSpec {
    let exe = std::env::current_exe().expect("own executable");
    let mut argv = vec![exe.to_string_lossy().into_owned(), String::from("__helper")];
    argv.extend(args.iter().map(|arg| (*arg).to_owned()));
    LeafSpec::new(argv).env("PATH", PATH)
}

/// Waits for the leaf to finish (within the bound) and returns its exit record.
pub fn finish(handle: &mut LeafHandle) -> ExitRecord {
    match handle.wait(Some(BOUND)).expect("wait works") {
        WaitOutcome::Finished(exit) => exit,
        WaitOutcome::StillRunning => panic!("leaf {} still running after {BOUND:?}", handle.id()),
    }
}

pub use tdd_testutil::wait_until;

/// Waits for a file holding a pid and returns that process's identity.
pub fn pid_from_file(path: &Path) -> ProcessId {
    let mut text = String::new();
    wait_until(&format!("{}", path.display()), || {
        text = fs::read_to_string(path).unwrap_or_default();
        text.trim().parse::<i32>().is_ok()
    });
    let pid: i32 = text.trim().parse().expect("a pid");
    ProcessId::of(pid).expect("the recorded process is alive")
}

/// The live (non-zombie) members of a process group.
pub fn group_members(pgid: i32) -> Vec<i32> {
    live_processes()
        .into_iter()
        .filter(|(_, pgrp, _)| *pgrp == pgid)
        .map(|(pid, _, _)| pid)
        .collect()
}

/// The session id of a live process.
pub fn session_of(pid: i32) -> Option<i32> {
    live_processes()
        .into_iter()
        .find(|(p, _, _)| *p == pid)
        .map(|(_, _, session)| session)
}

/// `(pid, pgrp, session)` of every live process.
fn live_processes() -> Vec<(i32, i32, i32)> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = text.rfind(')') else {
            continue;
        };
        let fields: Vec<&str> = text[close + 1..].split_whitespace().collect();
        if fields.len() < 4 || matches!(fields[0], "Z" | "X" | "x") {
            continue;
        }
        if let (Ok(pgrp), Ok(session)) = (fields[2].parse(), fields[3].parse()) {
            out.push((pid, pgrp, session));
        }
    }
    out
}

/// The events the supervisor reported, one JSON value per line.
pub fn events(handle: &LeafHandle) -> Vec<serde_json::Value> {
    let text = fs::read_to_string(handle.dir().join("events.jsonl")).unwrap_or_default();
    text.lines()
        .map(|line| serde_json::from_str(line).expect("an event line"))
        .collect()
}

/// Registers test functions under `module::name`.
#[macro_export]
macro_rules! trials {
    ($($test:ident),* $(,)?) => {
        vec![$(
            libtest_mimic::Trial::test(
                concat!(module_path!(), "::", stringify!($test)).trim_start_matches("supervise::"),
                || { $test(); Ok(()) },
            )
        ),*]
    };
}
