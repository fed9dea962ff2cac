//! `tdd hook <harness> selftest`: the hook wired in a harness's settings, run as the
//! harness runs it (`tdd` found on `PATH`), is fed a write no agent may make and must
//! block it in the harness's own format. `tdd doctor` runs it for every wired harness.
//! Only tdd's own line is ever run: a wired line with anything more is reported, not
//! executed.
//!
//! It proves the wiring (the command resolves on `PATH` to a `tdd` that answers, in the
//! format that harness reads, and blocks); the harness's own dispatch of its hooks is
//! the second half (`hook_cli.rs`), run after it by `tdd hook <harness> selftest` and
//! by doctor. It runs in a scratch repository of its own, so the user's run and ledger
//! are never touched.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use serde_json::json;
use tdd_leaves::hook::Harness;

/// What the self-test found.
#[derive(Debug, Clone, Serialize)]
pub struct SelfTest {
    /// The harness.
    pub harness: &'static str,
    /// The settings file read.
    pub settings: String,
    /// The command its settings run before a tool, when they run `tdd hook`.
    pub command: Option<String>,
    /// Whether the write was blocked in the harness's format.
    pub blocked: bool,
    /// From the command's start to its answer, in milliseconds.
    pub latency_ms: u64,
    /// What happened, in words.
    pub detail: String,
}

/// Runs the self-test of `harness` as wired in the work tree `root`.
pub fn run(root: &Path, harness: Harness) -> SelfTest {
    let settings = harness.settings_file();
    let mut test = SelfTest {
        harness: harness.as_str(),
        settings: settings.to_string(),
        command: None,
        blocked: false,
        latency_ms: 0,
        detail: String::new(),
    };
    let text = std::fs::read_to_string(root.join(settings)).unwrap_or_default();
    let Some(command) = tdd_leaves::hook_config::wired_command(harness, &text) else {
        test.detail = format!("{settings} runs no `{}`", harness.hook_command());
        return test;
    };
    test.command = Some(command.clone());
    // Only tdd's own line is run: the settings are the repository's, and a line with
    // more in it (`...; curl ... | sh`) is not tdd's to execute.
    if command.trim() != harness.hook_command() {
        test.detail = format!(
            "not run: the wired line `{command}` is not exactly `{}`; run it by hand if you trust it",
            harness.hook_command()
        );
        return test;
    }
    match feed(harness) {
        Ok((blocked, latency_ms, detail)) => {
            test.blocked = blocked;
            test.latency_ms = latency_ms;
            test.detail = detail;
        }
        Err(detail) => test.detail = detail,
    }
    test
}

/// Feeds the hook, `tdd hook <harness> pre-tool-use` with `tdd` found on `PATH` as the
/// harness finds it, run in a scratch repository, a write to that repository's
/// `.git/config`: whether it blocked, how long it took, and what it said.
fn feed(harness: Harness) -> Result<(bool, u64, String), String> {
    let command = harness.hook_command();
    let scratch = tempfile::Builder::new()
        .prefix("tdd-hook-selftest-")
        .tempdir()
        .map_err(|e| format!("no scratch directory: {e}"))?;
    let repo = scratch.path().join("repo");
    std::fs::create_dir(&repo).map_err(|e| format!("no scratch repository: {e}"))?;
    scratch_repository(&repo)?;
    let target = repo.join(".git/config").display().to_string();
    let event = event(harness, &target, &repo);
    let started = Instant::now();
    let mut child = Command::new("tdd")
        .args(["hook", harness.as_str(), "pre-tool-use"])
        .current_dir(&repo)
        .env("TDD_LEDGER_HOME", scratch.path().join("ledgers"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{command}` could not start: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(event.to_string().as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`{command}` did not end: {e}"))?;
    let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    Ok(match out.status.code() {
        Some(0) => match denial(harness, &stdout) {
            Some(reason) => (true, latency_ms, format!("denied: {reason}")),
            None => (
                false,
                latency_ms,
                format!("let a write to .git/config through: {}", stdout.trim()),
            ),
        },
        Some(2) => (
            true,
            latency_ms,
            format!("blocked by exit 2: {}", stderr.trim()),
        ),
        other => (
            false,
            latency_ms,
            format!(
                "exited {other:?}, which {} does not take as a block: {}",
                harness.as_str(),
                stderr.trim()
            ),
        ),
    })
}

/// Makes the empty directory `repo` a git repository with a `tdd.toml`: tdd is set up
/// there, and no run is.
pub(super) fn scratch_repository(repo: &Path) -> Result<(), String> {
    // Git's hints go nowhere: doctor's output is tdd's.
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(repo)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("git init: {e}"))?;
    if !init.success() {
        return Err("git init failed in the scratch repository".into());
    }
    std::fs::write(
        repo.join(tdd_engine::config::CONFIG_FILE),
        "[project.app]\nadapter = \"junit\"\ntest_command = \"true {report}\"\n",
    )
    .map_err(|e| format!("no scratch tdd.toml: {e}"))
}

/// A write of `target` as `harness` describes it to its hook.
fn event(harness: Harness, target: &str, cwd: &Path) -> Value {
    match harness {
        Harness::Copilot => json!({
            "timestamp": 0, "cwd": cwd, "toolName": "create",
            "toolArgs": json!({ "path": target, "file_text": "x" }).to_string(),
        }),
        Harness::Gemini => json!({
            "hook_event_name": "BeforeTool", "cwd": cwd, "tool_name": "write_file",
            "tool_input": { "file_path": target, "content": "x" },
        }),
        Harness::Claude | Harness::Codex => json!({
            "hook_event_name": "PreToolUse", "cwd": cwd, "tool_name": "Write",
            "tool_input": { "file_path": target, "content": "x" },
        }),
    }
}

/// The reason of a denial in `harness`'s format, if `stdout` is one.
fn denial(harness: Harness, stdout: &str) -> Option<String> {
    let answer: Value = serde_json::from_str(stdout.trim()).ok()?;
    let (decision, reason) = match harness {
        Harness::Claude | Harness::Codex => (
            answer.pointer("/hookSpecificOutput/permissionDecision"),
            answer.pointer("/hookSpecificOutput/permissionDecisionReason"),
        ),
        Harness::Gemini => (answer.get("decision"), answer.get("reason")),
        Harness::Copilot => (
            answer.get("permissionDecision"),
            answer.get("permissionDecisionReason"),
        ),
    };
    (decision?.as_str()? == "deny")
        .then(|| reason.and_then(Value::as_str).unwrap_or("").to_string())
}
