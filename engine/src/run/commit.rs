//! Commits by phase: only the named paths, with the run's trailers.

use std::path::Path;

use crate::git::Git;
use crate::git::GitError;

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
