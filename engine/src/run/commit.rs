//! Commits by phase: only the named paths, with the run's trailers and the ledger's
//! chain head as an anchor.

use std::path::Path;

use super::RunError;
use crate::git::Git;
use crate::git::GitError;
use crate::ledger::COMMIT_STARTED;
use crate::ledger::LEDGER_TRAILER;
use crate::ledger::Ledger;

/// Paths with uncommitted changes, tracked or untracked (not ignored).
pub fn changed_paths(work_tree: &Path) -> Result<Vec<String>, GitError> {
    Git::new(work_tree).dirty_paths()
}

/// Commits exactly `paths` (additions, edits and deletions) with `message` and trailers.
///
/// Returns the new commit, or `None` when `paths` is empty. Files outside `paths`
/// stay as they are, staged or not.
pub fn commit_paths(
    work_tree: &Path,
    paths: &[String],
    message: &str,
    trailers: &[(&str, String)],
) -> Result<Option<String>, GitError> {
    if paths.is_empty() {
        return Ok(None);
    }
    let git = Git::new(work_tree);
    let mut add: Vec<&str> = vec!["add", "-A", "--"];
    add.extend(paths.iter().map(String::as_str));
    git.output(&add)?;
    let trailer_text: Vec<String> = trailers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let trailer_text = trailer_text.join("\n");
    // No automatic maintenance after each phase commit: it is the repository owner's
    // to schedule, and it would run on every advance.
    let mut commit: Vec<&str> = vec![
        "-c",
        "maintenance.auto=false",
        "commit",
        "-q",
        "--no-verify",
        "-m",
        message,
        "-m",
        &trailer_text,
        "--",
    ];
    commit.extend(paths.iter().map(String::as_str));
    git.output(&commit)?;
    Ok(Some(git.text(["rev-parse", "HEAD"])?))
}

/// Commits exactly `paths` like [`commit_paths`], adding to `trailers` a `TDD-Ledger`
/// trailer with the chain head of `ledger`.
///
/// A `commit_started` event (the run's, naming the files and the message) is appended
/// first, so the anchor always covers an event no earlier state of the ledger has: a
/// copy of the ledger from before the commit is then told apart from a process that
/// ended between the commit and its record. Every event up to that one is anchored by
/// the commit; the event that records the commit comes after it and is anchored by the
/// next one. Nothing is appended when `paths` is empty.
pub fn commit_anchored(
    work_tree: &Path,
    ledger: &mut Ledger,
    paths: &[String],
    message: &str,
    trailers: &[(&str, String)],
) -> Result<Option<String>, RunError> {
    if paths.is_empty() {
        return Ok(None);
    }
    let all = anchor_trailers(ledger, paths, message, trailers)?;
    Ok(commit_paths(work_tree, paths, message, &all)?)
}

/// Appends the `commit_started` event of a commit of `paths` about to be made and returns
/// `trailers` plus the `TDD-Ledger` trailer that anchors the chain up to that event.
pub(crate) fn anchor_trailers<'a>(
    ledger: &mut Ledger,
    paths: &[String],
    message: &str,
    trailers: &[(&'a str, String)],
) -> Result<Vec<(&'a str, String)>, RunError> {
    let run_id = trailers
        .iter()
        .find(|(key, _)| *key == crate::integrity::RUN_TRAILER)
        .map(|(_, value)| value.as_str());
    let facts: serde_json::Map<String, serde_json::Value> = trailers
        .iter()
        .map(|(key, value)| ((*key).to_string(), value.clone().into()))
        .collect();
    let payload = serde_json::json!({ "files": paths, "message": message, "trailers": facts });
    ledger.append(run_id, COMMIT_STARTED, &payload)?;
    let mut all = trailers.to_vec();
    all.push((LEDGER_TRAILER, ledger.anchor()?.to_string()));
    Ok(all)
}
