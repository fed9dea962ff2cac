//! Wiring `tdd hook` into an agent CLI's project settings, beside whatever the user has
//! there: the entry is added once, nothing of the user's is removed or rewritten.

use serde_json::Map;
use serde_json::Value;
use serde_json::json;

use crate::harness::HookEvent;
use crate::hook::Harness;

impl Harness {
    /// The project settings file its hooks are read from, relative to the work tree.
    pub fn settings_file(self) -> &'static str {
        match self {
            Harness::Claude => ".claude/settings.json",
            Harness::Codex => ".codex/hooks.json",
            Harness::Gemini => ".gemini/settings.json",
            Harness::Copilot => ".github/hooks/tdd.json",
        }
    }

    /// The tools its entry for `event` matches (a regular expression), where the
    /// harness filters by tool: every tool that writes before a tool runs, the shell
    /// after (its writes a hook reads only best effort ahead, so they are checked after
    /// it ran). Copilot CLI's entries match every tool; `tdd hook` lets by what does
    /// not write.
    fn matcher(self, event: HookEvent) -> Option<&'static str> {
        match (self, event) {
            (Harness::Claude, HookEvent::PreToolUse) => {
                Some("Bash|Write|Edit|MultiEdit|NotebookEdit")
            }
            (Harness::Codex, HookEvent::PreToolUse) => {
                Some("^(Bash|shell|apply_patch|Edit|Write)$")
            }
            (Harness::Gemini, HookEvent::PreToolUse) => {
                Some("^(write_file|replace|run_shell_command)$")
            }
            (Harness::Claude, HookEvent::PostToolUse) => Some("Bash"),
            (Harness::Codex, HookEvent::PostToolUse) => {
                Some("^(Bash|shell|exec_command|local_shell)$")
            }
            (Harness::Gemini, HookEvent::PostToolUse) => Some("^run_shell_command$"),
            _ => None,
        }
    }

    /// The command its `PreToolUse` entry runs.
    pub fn hook_command(self) -> String {
        self.command(HookEvent::PreToolUse)
    }

    /// The entry that runs `tdd hook` for `event`, in the harness's own shape.
    fn entry(self, event: HookEvent) -> Value {
        let command = self.command(event);
        match self {
            // Copilot CLI: a command per entry, as a shell line, with its timeout.
            Harness::Copilot => json!({ "type": "command", "bash": command, "timeoutSec": 30 }),
            _ => {
                let mut entry = json!({ "hooks": [{ "type": "command", "command": command }] });
                if let Some(matcher) = self.matcher(event) {
                    entry["matcher"] = json!(matcher);
                }
                entry
            }
        }
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
    Shape(String),
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
    let object = root
        .as_object_mut()
        .ok_or_else(|| WireError::Shape("the file".into()))?;
    let hooks = object
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
        .ok_or_else(|| WireError::Shape("hooks".into()))?;
    let mut changed = false;
    for event in HookEvent::ALL {
        let name = harness.event_name(event);
        let entries = hooks
            .entry(name)
            .or_insert_with(|| Value::Array(Vec::new()))
            .as_array_mut()
            .ok_or_else(|| WireError::Shape(format!("hooks.{name}")))?;
        if !is_wired(entries, &harness.command(event)) {
            entries.push(harness.entry(event));
            changed = true;
        }
    }
    // Copilot CLI reads only files that say which format they are in.
    if harness == Harness::Copilot && !object.contains_key("version") {
        object.insert("version".into(), json!(1));
        changed = true;
    }
    if !changed {
        return Ok((existing.unwrap_or_default().to_string(), false));
    }
    let mut text = serde_json::to_string_pretty(&root).unwrap_or_default();
    text.push('\n');
    Ok((text, true))
}

/// The command line the settings text `existing` runs before a tool for `harness`, when
/// it runs `tdd hook` there: the entry as the harness would run it.
pub fn wired_command(harness: Harness, existing: &str) -> Option<String> {
    let root = serde_json::from_str::<Value>(existing).ok()?;
    let entries = root
        .get("hooks")?
        .get(harness.event_name(HookEvent::PreToolUse))?
        .as_array()?;
    let command = harness.hook_command();
    let runs = |hook: &Value| -> Option<String> {
        ["command", "bash"].iter().find_map(|key| {
            hook.get(key)
                .and_then(Value::as_str)
                .filter(|c| c.trim_start().starts_with(&command))
                .map(str::to_string)
        })
    };
    entries.iter().find_map(|entry| {
        runs(entry).or_else(|| {
            entry
                .get("hooks")
                .and_then(Value::as_array)
                .and_then(|hooks| hooks.iter().find_map(runs))
        })
    })
}

/// Whether the settings text `existing` already runs `tdd hook` for `harness` before
/// a tool (a file that does not parse runs nothing).
pub fn wired(harness: Harness, existing: &str) -> bool {
    wired_command(harness, existing).is_some()
}

/// Whether one of `entries` runs `command`: a command hook of a matcher group, or (in
/// Copilot CLI's shape) the entry's own shell line.
fn is_wired(entries: &[Value], command: &str) -> bool {
    let runs = |hook: &Value| {
        ["command", "bash"].iter().any(|key| {
            hook.get(key)
                .and_then(Value::as_str)
                .is_some_and(|c| c.trim_start().starts_with(command))
        })
    };
    entries.iter().any(|entry| {
        runs(entry)
            || entry
                .get("hooks")
                .and_then(Value::as_array)
                .is_some_and(|hooks| hooks.iter().any(runs))
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
            Err(WireError::Shape(shape)) if shape == "hooks.PreToolUse"
        ));
    }
}
