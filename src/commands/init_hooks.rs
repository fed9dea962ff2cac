//! `tdd init --hooks`: `tdd hook` wired into agent CLIs' project settings.

use std::path::Path;

use serde_json::json;
use tdd_leaves::hook::Harness;
use tdd_leaves::hook_config::WireError;

use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

/// Wires each of `harnesses` into its settings file under `root`, after `config` (the
/// outcome of writing tdd.toml, when it was written now).
pub fn wire_all(
    root: &Path,
    harnesses: &[Harness],
    config: Option<Outcome>,
) -> Result<Outcome, CommandError> {
    let mut text = String::new();
    let mut wired = Vec::new();
    for harness in harnesses {
        let (path, changed) = wire(root, *harness)?;
        text.push_str(&format!(
            "hooks: {} `{}` in {}\n",
            if changed { "wired" } else { "already wired:" },
            harness.hook_command(),
            path.display()
        ));
        wired.push(json!({ "harness": harness.as_str(), "path": path, "changed": changed }));
    }
    let files: Vec<&str> = harnesses.iter().map(|h| h.settings_file()).collect();
    let commit = format!(
        "commit {} before `tdd run start` (during a run tdd locks them), then check with `tdd doctor`",
        files.join(" and ")
    );
    let data = match &config {
        Some(outcome) => {
            let mut data = outcome.data.clone();
            data["hooks"] = json!(wired);
            data
        }
        None => json!({ "config": "kept", "hooks": wired }),
    };
    let mut full = match &config {
        Some(outcome) => outcome.text.clone(),
        None => format!(
            "{} exists: left as it is\n",
            tdd_engine::config::CONFIG_FILE
        ),
    };
    full.push_str(&text);
    Ok(Outcome::new(data, full).next(NextAction::new(Verb::ReviewConfig, commit)))
}

/// Checks that every settings file of `harnesses` can take the entry, writing nothing:
/// run before tdd.toml is written, so a refusal leaves the tree as it was.
pub fn check_all(root: &Path, harnesses: &[Harness]) -> Result<(), CommandError> {
    for harness in harnesses {
        merged(root, *harness)?;
    }
    Ok(())
}

/// Merges `harness`'s entry into its settings file; returns the file and whether it
/// changed. A file that is not JSON, or not the CLI's shape, is refused as it is.
fn wire(root: &Path, harness: Harness) -> Result<(std::path::PathBuf, bool), CommandError> {
    let (path, text, changed) = merged(root, harness)?;
    if changed {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_error(dir, &e))?;
        }
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, text).map_err(|e| io_error(&partial, &e))?;
        std::fs::rename(&partial, &path).map_err(|e| io_error(&path, &e))?;
    }
    Ok((path, changed))
}

/// The settings file of `harness`, its text with the entry merged, and whether that
/// differs from what is there.
fn merged(
    root: &Path,
    harness: Harness,
) -> Result<(std::path::PathBuf, String, bool), CommandError> {
    let path = root.join(harness.settings_file());
    let existing = match std::fs::symlink_metadata(&path) {
        Ok(meta) if !meta.is_file() => {
            return Err(CommandError::refused(
                "hooks_config_unwritable",
                format!("{} is not a regular file", path.display()),
            )
            .hint("replace it with a file, then run `tdd init --hooks` again"));
        }
        Ok(_) => Some(std::fs::read_to_string(&path).map_err(|e| io_error(&path, &e))?),
        Err(_) => None,
    };
    let (text, changed) =
        tdd_leaves::hook_config::wire(harness, existing.as_deref()).map_err(|e| {
            let message = match &e {
                WireError::NotJson { line, .. } => {
                    format!("{}:{line}: {e}", path.display())
                }
                WireError::Shape(_) => format!("{}: {e}", path.display()),
            };
            CommandError::bad_input("hooks_config_invalid", message).hint(format!(
                "fix the JSON of {} (or move it aside), then run `tdd init --hooks {}` again",
                harness.settings_file(),
                harness.as_str()
            ))
        })?;
    Ok((path, text, changed))
}

fn io_error(path: &Path, e: &std::io::Error) -> CommandError {
    CommandError::refused(
        "hooks_config_unwritable",
        format!("cannot write {}: {e}", path.display()),
    )
    .hint("make the directory writable, then run `tdd init --hooks` again")
}
