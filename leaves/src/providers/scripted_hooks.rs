//! A scripted leaf as an agent CLI with hooks: with `--hooks` it asks `tdd hook claude`
//! before each write and after each command, in Claude Code's own event format, and
//! does what Claude Code does with the answer: a denied write is not made (the reason
//! is printed, as the model would be told), and what tdd undid after a command is
//! printed. So a fixture plays an agent that makes the same wrong edits with and
//! without hooks.

use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::process::Stdio;

use serde_json::Value;
use serde_json::json;

use super::scripted::Action;

/// The flag that turns the hooks on for a scripted leaf.
pub(super) const HOOKS_FLAG: &str = "--hooks";

/// The event a tool call of `action` is to Claude Code's hooks: the tool and its input,
/// or `None` for an action that is no tool call.
fn tool_call(action: &Action) -> Option<(&'static str, Value)> {
    let cwd = std::env::current_dir().unwrap_or_default();
    match action {
        Action::Write { path, content } => Some((
            "Write",
            json!({ "file_path": cwd.join(path), "content": content }),
        )),
        Action::Delete { path } => Some((
            "Bash",
            json!({ "command": format!("rm -f -- {}", quoted(path)) }),
        )),
        Action::Patch { .. } => Some((
            "Bash",
            json!({ "command": "git apply --whitespace=nowarn -" }),
        )),
        Action::Run { argv, .. } => Some((
            "Bash",
            json!({ "command": argv.iter().map(|a| quoted(a)).collect::<Vec<_>>().join(" ") }),
        )),
        _ => None,
    }
}

/// `text` quoted for a POSIX shell.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// Runs `tdd hook claude <event>` (the `tdd` on the leaf's `PATH`) with the tool call of
/// `action` on its stdin: its exit code, stdout and stderr. `None` when it could not be
/// run, which Claude Code takes as a hook error that blocks nothing.
fn ask(event: &str, name: &str, tool: &str, input: &Value) -> Option<(i32, String, String)> {
    let cwd = std::env::current_dir().unwrap_or_default();
    let payload = json!({
        "session_id": std::env::var("TDD_LEAF_ID").unwrap_or_default(),
        "hook_event_name": name,
        "cwd": cwd,
        "tool_name": tool,
        "tool_input": input,
    });
    let mut child = Command::new("tdd")
        .args(["hook", "claude", event])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(payload.to_string().as_bytes());
    }
    let out = child.wait_with_output().ok()?;
    Some((
        out.status.code().unwrap_or(1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// Why the hook denied `action` before it ran, or `None` when it may run: exit 2 (the
/// reason on stderr) or a `permissionDecision` of `deny`, as Claude Code reads them.
pub(super) fn denied(action: &Action) -> Option<String> {
    let (tool, input) = tool_call(action)?;
    if matches!(action, Action::Patch { .. } | Action::Run { .. }) {
        // A command's writes are judged after it ran (the bracket), as for any shell.
        return None;
    }
    let (code, stdout, stderr) = ask("pre-tool-use", "PreToolUse", tool, &input)?;
    if code == 2 {
        return Some(stderr.trim().to_string());
    }
    let answer: Value = serde_json::from_str(stdout.trim()).ok()?;
    let specific = answer.get("hookSpecificOutput")?;
    (specific.get("permissionDecision")? == "deny").then(|| {
        specific
            .get("permissionDecisionReason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    })
}

/// What tdd said it undid after `action` (a command) ran, if anything.
pub(super) fn undone(action: &Action) -> Option<String> {
    let (tool, input) = tool_call(action)?;
    if tool != "Bash" {
        return None;
    }
    let (_, stdout, _) = ask("post-tool-use", "PostToolUse", tool, &input)?;
    let answer: Value = serde_json::from_str(stdout.trim()).ok()?;
    answer.get("reason")?.as_str().map(str::to_string)
}

/// The path a write action names, for the message that says it was not made.
pub(super) fn target(action: &Action) -> String {
    match action {
        Action::Write { path, .. } | Action::Delete { path } => {
            Path::new(path).display().to_string()
        }
        _ => String::new(),
    }
}
