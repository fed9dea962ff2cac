//! The branch walk: every commit reachable from HEAD that carries a `TDD-Run` trailer,
//! read from one `git log` call.

use std::io::BufRead;
use std::io::BufReader;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;

use crate::git::Git;
use crate::git::GitError;

/// The trailer naming the run that made a commit.
pub const RUN_TRAILER: &str = "TDD-Run";

/// One `git log -z` record per commit: the sha, the `TDD-Run` values and the
/// `TDD-Ledger` values, separated by US (0x1f); several values of one key by RS (0x1e).
const FORMAT: &str = "--format=%H%x1f%(trailers:key=TDD-Run,valueonly,separator=%x1e)\
                      %x1f%(trailers:key=TDD-Ledger,valueonly,separator=%x1e)";

/// A commit reachable from HEAD that a run made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunCommit {
    /// The full sha.
    pub sha: String,
    /// The `TDD-Run` trailer's value.
    pub run_id: String,
    /// The `TDD-Ledger` trailer's value, unparsed; `None` on commits of older releases.
    pub anchor: Option<String>,
    /// Whether the commit is HEAD itself.
    pub is_head: bool,
}

/// How far the walk goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every commit reachable from HEAD.
    Full,
    /// From HEAD down to the newest commit carrying a `TDD-Ledger` trailer, inclusive:
    /// that anchor vouches, through the hash chain, for every event recorded before it.
    ToNewestAnchor,
}

/// Reads one record; `None` for a commit without a `TDD-Run` trailer.
pub(crate) fn parse_record(record: &str, is_head: bool) -> Option<RunCommit> {
    let mut fields = record.trim_matches(['\n', '\0']).split('\x1f');
    let sha = fields.next()?.trim();
    let first = |field: Option<&str>| {
        field
            .and_then(|f| f.split('\x1e').map(str::trim).find(|v| !v.is_empty()))
            .map(str::to_string)
    };
    let run_id = first(fields.next())?;
    let anchor = first(fields.next());
    (!sha.is_empty()).then(|| RunCommit {
        sha: sha.to_string(),
        run_id,
        anchor,
        is_head,
    })
}

/// The run commits reachable from HEAD in `work_tree`, newest first; none on an unborn
/// branch. One `git log` process, stopped early when `scope` is reached.
pub fn run_commits(work_tree: &Path, scope: Scope) -> Result<Vec<RunCommit>, GitError> {
    let git = Git::new(work_tree);
    let args = ["log", "-z", FORMAT, "HEAD", "--"];
    let mut child = git
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(GitError::Spawn)?;
    let mut commits = Vec::new();
    let mut stopped = false;
    if let Some(stdout) = child.stdout.take() {
        let mut reader = BufReader::new(stdout);
        let mut record = Vec::new();
        let mut index = 0usize;
        while reader.read_until(0, &mut record).map_err(GitError::Spawn)? > 0 {
            let text = std::str::from_utf8(&record).map_err(|_| GitError::NotUtf8)?;
            if let Some(commit) = parse_record(text, index == 0) {
                let anchored = commit.anchor.is_some();
                commits.push(commit);
                if anchored && scope == Scope::ToNewestAnchor {
                    stopped = true;
                    break;
                }
            }
            record.clear();
            index += 1;
        }
    }
    if stopped {
        // The rest of the history is not needed: end git now rather than read it all.
        // The child is ours and not yet reaped, so its pid cannot name another process.
        let _ = child.kill();
        let _ = child.wait();
        return Ok(commits);
    }
    finish(&git, child, commits, &args)
}

/// Reaps a `git log` that ran to its end; an unborn HEAD is an empty history.
fn finish(
    git: &Git,
    mut child: std::process::Child,
    commits: Vec<RunCommit>,
    args: &[&str],
) -> Result<Vec<RunCommit>, GitError> {
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    let status = child.wait().map_err(GitError::Spawn)?;
    if status.success() {
        return Ok(commits);
    }
    let born = git
        .command(["rev-parse", "--verify", "--quiet", "HEAD"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(GitError::Spawn)?;
    if !born.success() {
        return Ok(Vec::new());
    }
    Err(GitError::Failed {
        args: args.join(" "),
        stderr: stderr.trim().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "56c9c6bd511c5de71db07df70e58711937a280ad";

    #[test]
    fn a_record_without_a_run_trailer_is_not_a_run_commit() {
        assert_eq!(parse_record(&format!("{SHA}\x1f\x1f"), true), None);
        assert_eq!(parse_record(&format!("{SHA}\x1f\x1f3:abc"), false), None);
        assert_eq!(parse_record("", false), None);
    }

    #[test]
    fn run_and_anchor_trailers_are_read_from_a_record() {
        let commit = parse_record(&format!("\n{SHA}\x1frun-1\x1f3:abc\0"), false).expect("run");
        assert_eq!(commit.sha, SHA);
        assert_eq!(commit.run_id, "run-1");
        assert_eq!(commit.anchor.as_deref(), Some("3:abc"));
        assert!(!commit.is_head);
    }

    #[test]
    fn an_older_release_commit_has_no_anchor_and_repeated_keys_keep_the_first() {
        let commit = parse_record(&format!("{SHA}\x1frun-1\x1erun-2\x1f"), true).expect("run");
        assert_eq!(commit.run_id, "run-1");
        assert_eq!(commit.anchor, None);
        assert!(commit.is_head);
    }

    #[test]
    fn the_walk_reads_trailers_from_git_and_stops_at_the_newest_anchor() {
        let dir = tdd_testutil::repo();
        assert_eq!(
            run_commits(dir.path(), Scope::Full).expect("unborn"),
            vec![]
        );
        let commit = |body: &str| {
            tdd_testutil::git(
                dir.path(),
                &["commit", "-q", "--allow-empty", "-m", "subject", "-m", body],
            );
        };
        commit("TDD-Run: old\nTDD-Cycle: 1");
        commit("TDD-Run: r\nTDD-Ledger: 1:aa");
        commit("no trailers here");
        commit("TDD-Run: r\nTDD-Ledger: 2:bb");
        let full = run_commits(dir.path(), Scope::Full).expect("walk");
        let runs: Vec<(&str, Option<&str>, bool)> = full
            .iter()
            .map(|c| (c.run_id.as_str(), c.anchor.as_deref(), c.is_head))
            .collect();
        assert_eq!(
            runs,
            vec![
                ("r", Some("2:bb"), true),
                ("r", Some("1:aa"), false),
                ("old", None, false)
            ]
        );
        let newest = run_commits(dir.path(), Scope::ToNewestAnchor).expect("walk");
        assert_eq!(newest, full[..1].to_vec());
    }
}
