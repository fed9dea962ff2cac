//! Wiring `tdd hook` into an agent CLI's project settings, beside whatever the user has
//! there: the entry is added once, nothing of the user's is removed or rewritten.

use serde_json::Map;
use serde_json::Value;
use serde_json::json;

use crate::hook::Harness;

impl Harness {
    /// Its name as `tdd hook` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Harness::Claude => "claude",
            Harness::Codex => "codex",
        }
    }

    /// The project settings file its hooks are read from, relative to the work tree.
    pub fn settings_file(self) -> &'static str {
        match self {
            Harness::Claude => ".claude/settings.json",
            Harness::Codex => ".codex/hooks.json",
        }
    }

    /// The tools its `PreToolUse` entry matches: every tool that writes.
    fn matcher(self) -> &'static str {
        match self {
            Harness::Claude => "Bash|Write|Edit|MultiEdit|NotebookEdit",
            Harness::Codex => "^(Bash|shell|apply_patch|Edit|Write)$",
        }
    }

    /// The command its `PreToolUse` entry runs.
    pub fn hook_command(self) -> String {
        format!("tdd hook {} pre-tool-use", self.as_str())
    }

    /// The tools its `PostToolUse` entry matches: the shell, whose writes a hook can only
    /// read best effort ahead, so they are checked after it ran.
    fn shell_matcher(self) -> &'static str {
        match self {
            Harness::Claude => "Bash",
            Harness::Codex => "^(Bash|shell|exec_command|local_shell)$",
        }
    }

    /// The command its `PostToolUse` entry runs.
    pub fn after_command(self) -> String {
        format!("tdd hook {} post-tool-use", self.as_str())
    }

    /// The command its `Stop` entry runs.
    pub fn stop_command(self) -> String {
        format!("tdd hook {} stop", self.as_str())
    }

    /// The command its `SessionStart` entry runs.
    pub fn session_command(self) -> String {
        format!("tdd hook {} session-start", self.as_str())
    }
}

/// Why the settings could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The file is not JSON.
    #[error("line {line}, column {column}: {message}")]
    NotJson {
        /// Where.
        line: usize,
        /// Where.
        column: usize,
        /// What.
        message: String,
    },
    /// It is JSON, but not the shape the CLI reads (`hooks.PreToolUse` a list).
    #[error("`{0}` is not what the CLI expects there")]
    Shape(&'static str),
}

/// The settings `existing` (the file's text, if there is one) with `harness`'s
/// `PreToolUse`, `PostToolUse`, `Stop` and `SessionStart` entries for `tdd hook` added, and whether anything
/// changed: an event that already has an entry running the command gets none. Every
/// other key and entry is kept as it is.
pub fn wire(harness: Harness, existing: Option<&str>) -> Result<(String, bool), WireError> {
    let mut root: Value = match existing.filter(|t| !t.trim().is_empty()) {
        None => Value::Object(Map::new()),
        Some(text) => serde_json::from_str(text).map_err(|e| WireError::NotJson {
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?,
    };
    let object = root.as_object_mut().ok_or(WireError::Shape("the file"))?;
    let hooks = object
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or(WireError::Shape("hooks"))?;
    let mut changed = false;
    for (event, shape, entry) in [
        (
            "PreToolUse",
            "hooks.PreToolUse",
            json!({
                "matcher": harness.matcher(),
                "hooks": [{ "type": "command", "command": harness.hook_command() }],
            }),
        ),
        (
            "PostToolUse",
            "hooks.PostToolUse",
            json!({
                "matcher": harness.shell_matcher(),
                "hooks": [{ "type": "command", "command": harness.after_command() }],
            }),
        ),
        (
            "Stop",
            "hooks.Stop",
            json!({ "hooks": [{ "type": "command", "command": harness.stop_command() }] }),
        ),
        (
            "SessionStart",
            "hooks.SessionStart",
            json!({ "hooks": [{ "type": "command", "command": harness.session_command() }] }),
        ),
    ] {
        let entries = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or(WireError::Shape(shape))?;
        let command = entry["hooks"][0]["command"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if !is_wired(entries, &command) {
            entries.push(entry);
            changed = true;
        }
    }
    if !changed {
        return Ok((existing.unwrap_or_default().to_string(), false));
    }
    let mut text = serde_json::to_string_pretty(&root).unwrap_or_default();
    text.push('\n');
    Ok((text, true))
}

/// Whether the settings text `existing` already runs `tdd hook` for `harness` before
/// a tool (a file that does not parse runs nothing).
pub fn wired(harness: Harness, existing: &str) -> bool {
    serde_json::from_str::<Value>(existing).is_ok_and(|root| {
        root.pointer("/hooks/PreToolUse")
            .and_then(Value::as_array)
            .is_some_and(|pre| is_wired(pre, &harness.hook_command()))
    })
}

fn is_wired(entries: &[Value], command: &str) -> bool {
    entries.iter().any(|entry| {
        entry
            .get("hooks")
            .and_then(Value::as_array)
            .is_some_and(|hooks| {
                hooks.iter().any(|h| {
                    h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(|c| c.trim_start().starts_with(command))
                })
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_added_beside_the_users_own_and_only_once() {
        let mine = r#"{"model": "opus", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}], "Notification": []}}"#;
        let (text, changed) = wire(Harness::Claude, Some(mine)).expect("wired");
        assert!(changed);
        let value: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(value["model"], "opus");
        assert_eq!(value["hooks"]["Notification"], json!([]));
        assert_eq!(
            value["hooks"]["Stop"][0]["hooks"][0]["command"],
            "tdd hook claude stop"
        );
        let pre = value["hooks"]["PreToolUse"].as_array().expect("list");
        assert_eq!(pre.len(), 2);
        assert_eq!(pre[0]["hooks"][0]["command"], "./lint.sh");
        assert_eq!(
            pre[1]["hooks"][0]["command"],
            "tdd hook claude pre-tool-use"
        );
        assert!(wired(Harness::Claude, &text));
        assert!(!wired(Harness::Codex, &text));
        let (again, changed) = wire(Harness::Claude, Some(&text)).expect("again");
        assert!(!changed);
        assert_eq!(again, text);
    }

    #[test]
    fn a_new_file_and_a_file_that_is_not_settings() {
        let (text, changed) = wire(Harness::Codex, None).expect("new");
        assert!(changed);
        assert!(text.contains("apply_patch") && text.contains("tdd hook codex pre-tool-use"));
        match wire(Harness::Claude, Some("{\n  \"hooks\": [1,\n")) {
            Err(WireError::NotJson { line, .. }) => assert_eq!(line, 3),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            wire(Harness::Claude, Some(r#"{"hooks": {"PreToolUse": {}}}"#)),
            Err(WireError::Shape("hooks.PreToolUse"))
        ));
    }
}
