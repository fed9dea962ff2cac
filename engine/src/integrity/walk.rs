//! The branch walk: every commit reachable from HEAD that carries a `TDD-Run` trailer.
//!
//! The walk reads the object database in-process, in `git log`'s default order (newest
//! commit time first), and parses trailers as git does. Commits are read as they are
//! stored: replacement refs and grafts do not apply. Where the history is shallow, an
//! object is missing or HEAD is not a ref file this reads, one `git log` call (without
//! replacement refs) answers instead.

use std::io::BufRead;
use std::io::BufReader;
use std::io::Read;
use std::path::Path;
use std::process::Stdio;

use gix_traverse::commit::Simple;
use gix_traverse::commit::simple::CommitTimeOrder;
use gix_traverse::commit::simple::Sorting;

use crate::git::Git;
use crate::git::GitError;
use crate::ledger::LEDGER_TRAILER;

/// The trailer naming the run that made a commit.
pub const RUN_TRAILER: &str = "TDD-Run";

/// One `git log -z` record per commit: the sha, the `TDD-Run` values and the
/// `TDD-Ledger` values, separated by US (0x1f); several values of one key by RS (0x1e).
const FORMAT: &str = "--format=%H%x1f%(trailers:key=TDD-Run,valueonly,unfold,separator=%x1e)\
                      %x1f%(trailers:key=TDD-Ledger,valueonly,unfold,separator=%x1e)";

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
/// branch. The walk stops early when `scope` is reached.
pub fn run_commits(work_tree: &Path, scope: Scope) -> Result<Vec<RunCommit>, GitError> {
    match walk_objects(work_tree, scope) {
        Some(found) => found,
        None => log_commits(work_tree, scope),
    }
}

/// The walk over the object database; `None` where git must answer instead.
fn walk_objects(work_tree: &Path, scope: Scope) -> Option<Result<Vec<RunCommit>, GitError>> {
    let located = crate::run::scan::locate(work_tree).ok()?;
    if located.common_dir.join("shallow").exists() {
        return None;
    }
    let objects = located.objects();
    let head = match located.head(&objects) {
        Ok(Some((head, _))) => head,
        Ok(None) => return None,
        Err(err) => return Some(Err(err)),
    };
    let odb = match objects.handle() {
        Ok(odb) => odb,
        Err(err) => return Some(Err(err)),
    };
    let newest_first = Sorting::ByCommitTime(CommitTimeOrder::NewestFirst);
    let walk = match Simple::new(Some(head), &odb).sorting(newest_first) {
        Ok(walk) => walk,
        Err(err) => return Some(Err(walk_error(&err))),
    };
    let mut commits = Vec::new();
    let mut buf = Vec::new();
    for info in walk {
        let id = match info {
            Ok(info) => info.id,
            Err(err) => return Some(Err(walk_error(&err))),
        };
        let data = match odb.find(&id, &mut buf) {
            Ok(data) => data,
            Err(err) => return Some(Err(err)),
        };
        let commit = gix_object::CommitRef::from_bytes(data.data, objects.kind()).ok()?;
        let (run, anchor) = match run_trailers(&commit) {
            Ok(found) => found,
            Err(err) => return Some(Err(err)),
        };
        let Some(run_id) = run else {
            continue;
        };
        let anchored = anchor.is_some();
        commits.push(RunCommit {
            sha: id.to_string(),
            run_id,
            anchor,
            is_head: id == head,
        });
        if anchored && scope == Scope::ToNewestAnchor {
            break;
        }
    }
    Some(Ok(commits))
}

/// A failure of the history walk as a [`GitError`]: a missing or damaged object (found
/// anywhere in the error's chain) as itself, anything else as a failed read.
fn walk_error(err: &gix_error::Error) -> GitError {
    match err.downcast_any_ref::<GitError>() {
        Some(GitError::ObjectMissing { id }) => GitError::ObjectMissing { id: id.clone() },
        Some(GitError::ObjectDamaged { id, found }) => GitError::ObjectDamaged {
            id: id.clone(),
            found: found.clone(),
        },
        Some(GitError::ObjectUnreadable { id, reason }) => GitError::ObjectUnreadable {
            id: id.clone(),
            reason: reason.clone(),
        },
        // The walk's own lookups say a missing object (or one that is not a regular file,
        // which the checked store never opens) in gix's words: the id is in them.
        _ if err.is_not_found() => GitError::ObjectMissing {
            id: object_id_in(&err.to_string()).unwrap_or_else(|| "of the history".into()),
        },
        _ => GitError::Failed {
            args: "walk the history".into(),
            stderr: err.to_string(),
        },
    }
}

/// The first object id (40 or 64 hex digits) in `text`.
fn object_id_in(text: &str) -> Option<String> {
    text.split(|c: char| !c.is_ascii_hexdigit())
        .find(|word| word.len() == 40 || word.len() == 64)
        .map(str::to_string)
}

/// The first non-empty `TDD-Run` and `TDD-Ledger` values of `commit`'s trailers.
fn run_trailers(
    commit: &gix_object::CommitRef<'_>,
) -> Result<(Option<String>, Option<String>), GitError> {
    let (mut run, mut anchor) = (None, None);
    for trailer in commit.message_trailers() {
        let slot = if trailer.token.eq_ignore_ascii_case(RUN_TRAILER.as_bytes()) {
            &mut run
        } else if trailer
            .token
            .eq_ignore_ascii_case(LEDGER_TRAILER.as_bytes())
        {
            &mut anchor
        } else {
            continue;
        };
        let value = std::str::from_utf8(trailer.value.as_ref()).map_err(|_| GitError::NotUtf8)?;
        if slot.is_none() && !value.trim().is_empty() {
            *slot = Some(value.trim().to_string());
        }
    }
    Ok((run, anchor))
}

/// The walk by one `git log` process, stopped early when `scope` is reached.
fn log_commits(work_tree: &Path, scope: Scope) -> Result<Vec<RunCommit>, GitError> {
    let git = Git::new(work_tree);
    let args = ["--no-replace-objects", "log", "-z", FORMAT, "HEAD", "--"];
    let mut child = git
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(GitError::Spawn)?;
    // A named pipe at a ref or at HEAD would make git wait on it for ever.
    let watch = crate::git::Watch::start(&child);
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
        watch.end();
        let _ = child.kill();
        let _ = child.wait();
        return Ok(commits);
    }
    let stalled = watch.end();
    if stalled {
        let _ = child.wait();
        return Err(GitError::Stalled {
            args: args.join(" "),
        });
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
    match git.output(["rev-parse", "--verify", "--quiet", "HEAD"]) {
        Ok(_) => {}
        Err(GitError::Failed { .. }) => return Ok(Vec::new()),
        Err(other) => return Err(other),
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

    /// Commits with `message` at commit time `at` (seconds), on whatever HEAD is.
    fn commit_at(dir: &Path, message: &str, at: u64) {
        let date = format!("@{at} +0000");
        let args = [
            "commit",
            "-q",
            "--allow-empty",
            "--cleanup=verbatim",
            "-m",
            message,
        ];
        let dates = [
            ("GIT_AUTHOR_DATE", date.as_str()),
            ("GIT_COMMITTER_DATE", date.as_str()),
        ];
        tdd_testutil::git_with(dir, &args, &dates);
    }

    #[test]
    fn the_walk_in_process_agrees_with_git_log_on_order_and_trailers() {
        let dir = tdd_testutil::repo();
        let path = dir.path();
        let messages = [
            "one paragraph only\nTDD-Run: not-a-trailer",
            "s\n\nTDD-Run: a\nTDD-Cycle: 1",
            "s\n\ntdd-run: lower\ntdd-ledger: 1:aa",
            "s\n\nTDD-Run : spaced\n",
            "s\n\nTDD-Run: folded\n  value\nTDD-Ledger: 2:bb",
            "s\n\nprose that is not a trailer\nmore prose\nstill prose\nTDD-Run: minority",
            "s\n\nTDD-Run: early\n\nthen a last paragraph",
            "s\n\nTDD-Run:\nTDD-Run: second-wins-over-empty",
            "s\n\nSigned-off-by: x <x@y>\nnot a trailer line\nTDD-Run: mixed",
        ];
        for (i, message) in messages.iter().enumerate() {
            commit_at(path, message, 1_700_000_000 + i as u64 * 10);
        }
        // A side branch whose commits interleave by time with the main line, merged back.
        tdd_testutil::git(path, &["checkout", "-q", "-b", "side", "HEAD~4"]);
        commit_at(path, "s\n\nTDD-Run: side-old", 1_700_000_005);
        commit_at(
            path,
            "s\n\nTDD-Run: side-new\nTDD-Ledger: 3:cc",
            1_700_000_200,
        );
        tdd_testutil::git(path, &["checkout", "-q", "-"]);
        tdd_testutil::git(path, &["merge", "-q", "--no-ff", "--no-edit", "side"]);
        commit_at(path, "s\n\nTDD-Run: top", 1_700_000_300);
        for scope in [Scope::Full, Scope::ToNewestAnchor] {
            let walked = walk_objects(path, scope)
                .expect("read in-process")
                .expect("walk");
            let logged = log_commits(path, scope).expect("git log");
            assert_eq!(walked, logged, "{scope:?}");
        }
        let ids: Vec<String> = walk_objects(path, Scope::Full)
            .expect("read in-process")
            .expect("walk")
            .into_iter()
            .map(|c| c.run_id)
            .collect();
        assert!(ids.contains(&"side-old".to_string()), "{ids:?}");
        assert!(ids.contains(&"folded value".to_string()), "{ids:?}");
        assert!(!ids.contains(&"not-a-trailer".to_string()), "{ids:?}");
    }

    #[test]
    fn a_graft_does_not_hide_older_run_commits() {
        let dir = tdd_testutil::repo();
        commit_at(
            dir.path(),
            "s\n\nTDD-Run: old\nTDD-Ledger: 1:aa",
            1_700_000_000,
        );
        commit_at(dir.path(), "s\n\nTDD-Run: new", 1_700_000_010);
        let head = tdd_testutil::git(dir.path(), &["rev-parse", "HEAD"]);
        std::fs::create_dir_all(dir.path().join(".git/info")).expect("mkdir");
        std::fs::write(dir.path().join(".git/info/grafts"), head).expect("graft");
        let shown = tdd_testutil::git(dir.path(), &["log", "--format=%s"]);
        assert_eq!(shown.lines().count(), 1, "git log stops at the graft");
        let runs: Vec<String> = run_commits(dir.path(), Scope::ToNewestAnchor)
            .expect("walk")
            .into_iter()
            .map(|c| c.run_id)
            .collect();
        assert_eq!(runs, vec!["new".to_string(), "old".to_string()]);
    }

    #[test]
    fn a_shallow_clone_is_walked_by_git_without_replacement_refs() {
        let origin = tdd_testutil::repo();
        commit_at(origin.path(), "s\n\nTDD-Run: old", 1_700_000_000);
        commit_at(origin.path(), "s\n\nTDD-Run: new", 1_700_000_010);
        let clone = tempfile::tempdir().expect("tempdir");
        let url = format!("file://{}", origin.path().display());
        let target = clone.path().join("c");
        tdd_testutil::git(
            clone.path(),
            &[
                "clone",
                "-q",
                "--depth",
                "1",
                &url,
                &target.display().to_string(),
            ],
        );
        assert!(walk_objects(&target, Scope::Full).is_none());
        // A replacement ref changes what git shows, not what the walk reads.
        let forged = tdd_testutil::git(
            &target,
            &["commit-tree", "HEAD^{tree}", "-m", "s\n\nTDD-Run: forged"],
        );
        tdd_testutil::git(&target, &["replace", "HEAD", forged.trim()]);
        let shown = tdd_testutil::git(&target, &["log", "-1", "--format=%B"]);
        assert!(shown.contains("forged"), "{shown}");
        let runs: Vec<String> = run_commits(&target, Scope::Full)
            .expect("walk")
            .into_iter()
            .map(|c| c.run_id)
            .collect();
        assert_eq!(runs, vec!["new".to_string()]);
    }
}
