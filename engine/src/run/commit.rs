//! Commits by phase: only the named paths, with the run's trailers and the ledger's
//! chain head as an anchor.

use std::path::Path;

use super::RunError;
use crate::git::Git;
use crate::git::GitError;
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
/// trailer with the chain head of `ledger` as of now.
///
/// Every event appended before this call is anchored by the commit: `tdd ledger
/// verify` later checks that the chain still has exactly that hash at that position.
/// The event that records the commit itself comes after it, and is anchored by the
/// next phase commit.
pub fn commit_anchored(
    work_tree: &Path,
    ledger: &Ledger,
    paths: &[String],
    message: &str,
    trailers: &[(&str, String)],
) -> Result<Option<String>, RunError> {
    let mut all = trailers.to_vec();
    all.push((LEDGER_TRAILER, ledger.anchor()?.to_string()));
    Ok(commit_paths(work_tree, paths, message, &all)?)
}
