//! Commits by phase: only the named paths, with the run's trailers and the ledger's
//! chain head as an anchor.

use std::collections::HashSet;
use std::path::Path;

use super::RunError;
use super::safe_fs;
use crate::git::Git;
use crate::git::GitError;
use crate::ledger::COMMIT_STARTED;
use crate::ledger::LEDGER_TRAILER;
use crate::ledger::Ledger;
use crate::repo_path;

/// Paths with uncommitted changes, tracked or untracked (not ignored), staged or not.
///
/// Each path is in the lossless form of [`crate::repo_path::encode`]; a rename lists both
/// its ends. Any name the file system allows is listed, UTF-8 or not.
pub fn changed_paths(work_tree: &Path) -> Result<Vec<String>, GitError> {
    Git::new(work_tree).dirty_paths()
}

/// Commits exactly `paths` (additions, edits and deletions) with `message` and trailers.
///
/// `paths` are in the form [`changed_paths`] gives. Each is staged as it is on disk: a
/// path that is gone (deleted, already `git rm`-ed, the old end of a rename, or behind
/// a symlinked directory) is removed from the index. Returns the new commit, or `None`
/// when none of `paths` differs from HEAD. Files outside `paths` stay as they are,
/// staged or not.
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
    let (present, gone) = stage_as_on_disk(&git, work_tree, paths)?;
    let staged = staged_paths(&git)?;
    let chosen: Vec<Vec<u8>> = present
        .into_iter()
        .chain(gone)
        .filter(|p| staged.contains(p))
        .collect();
    if chosen.is_empty() {
        return Ok(None);
    }
    let trailer_text: Vec<String> = trailers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let trailer_text = trailer_text.join("\n");
    // No automatic maintenance after each phase commit: it is the repository owner's
    // to schedule, and it would run on every advance. Paths go through a NUL-separated
    // pathspec file and are taken literally, so any byte in a name is committed as is.
    let commit = [
        "--literal-pathspecs",
        "-c",
        "maintenance.auto=false",
        "commit",
        "-q",
        "--no-verify",
        "-m",
        message,
        "-m",
        &trailer_text,
        "--pathspec-from-file=-",
        "--pathspec-file-nul",
    ];
    with_stdin(&git, &commit, &nul_list(&chosen))?;
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
    let event = super::RunEvent::CommitStarted(super::events::CommitStarted {
        files: paths.to_vec(),
        message: message.to_string(),
        trailers: trailers
            .iter()
            .map(|(key, value)| ((*key).to_string(), value.clone()))
            .collect(),
    });
    debug_assert_eq!(crate::ledger::TypedEvent::kind(&event), COMMIT_STARTED);
    ledger.record(run_id, &event)?;
    let mut all = trailers.to_vec();
    all.push((LEDGER_TRAILER, ledger.anchor()?.to_string()));
    Ok(all)
}

/// A repository path as bytes.
type RawPath = Vec<u8>;

/// Stages each of `paths` as it is on disk; returns the paths present and those gone.
fn stage_as_on_disk(
    git: &Git,
    work_tree: &Path,
    paths: &[String],
) -> Result<(Vec<RawPath>, Vec<RawPath>), GitError> {
    let root = work_tree
        .canonicalize()
        .map_err(|e| safe_fs::io_error("resolve", work_tree, e))?;
    let (mut present, mut gone) = (Vec::new(), Vec::new());
    for path in paths {
        let bytes = repo_path::decode(path);
        let meta = safe_fs::lstat_in_tree(&root, &bytes)?;
        let submodule = || root.join(repo_path::os(&bytes)).join(".git").exists();
        match meta {
            Some(meta) if !meta.is_dir() || submodule() => present.push(bytes),
            _ => gone.push(bytes),
        }
    }
    let add = ["update-index", "--add", "--remove", "-z", "--stdin"];
    with_stdin(git, &add, &nul_list(&present))?;
    let remove = ["update-index", "--force-remove", "-z", "--stdin"];
    with_stdin(git, &remove, &nul_list(&gone))?;
    Ok((present, gone))
}

fn nul_list(paths: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for path in paths {
        out.extend_from_slice(path);
        out.push(0);
    }
    out
}

/// The paths whose staged state differs from HEAD (every staged path before a first
/// commit).
fn staged_paths(git: &Git) -> Result<HashSet<Vec<u8>>, GitError> {
    let born = git
        .output(["rev-parse", "--verify", "--quiet", "HEAD"])
        .is_ok();
    let out = if born {
        git.output([
            "diff-index",
            "--cached",
            "-z",
            "--name-only",
            "--no-renames",
            "HEAD",
        ])?
    } else {
        git.output(["ls-files", "-z", "--cached"])?
    };
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(<[u8]>::to_vec)
        .collect())
}

/// Runs `git ARGS` with `input` on stdin, unless `input` is empty.
fn with_stdin(git: &Git, args: &[&str], input: &[u8]) -> Result<(), GitError> {
    if !input.is_empty() {
        git.output_with_stdin(args, input)?;
    }
    Ok(())
}
