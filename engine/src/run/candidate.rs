//! The candidate commit of a phase: exactly the bytes that were judged, committed as judged.
//!
//! A phase commit is built as a tree from HEAD's tree plus the selected changes of a
//! work-tree scan, without the user's index (so neither its flags nor its filters take
//! part), and that same tree is what the clean room runs and what is committed. A file
//! the agent changes after the scan changes neither the verdict nor the commit.

use crate::git::Git;
use crate::git::GitError;
use crate::run::scan::Objects;
use crate::run::stamp::Stamp;
use crate::run::stamp::now;

/// One path whose entry differs between two trees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TreeChange {
    /// The path, as git stores it (bytes, `/`-separated).
    pub path: Vec<u8>,
    /// The new mode and object id, `None` when the path is gone.
    pub new: Option<(u32, gix_hash::ObjectId)>,
}

impl TreeChange {
    /// The path for matching against lock globs (lossy where it is not UTF-8).
    pub(crate) fn display(&self) -> String {
        crate::repo_path::display(&self.path).into_owned()
    }

    /// The path for the ledger and the envelope: lossless (git's quoting where it is not
    /// UTF-8).
    pub(crate) fn recorded(&self) -> String {
        crate::repo_path::encode(&self.path)
    }
}

/// A tree made of a base tree plus some of the changes of another.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    /// The resulting tree id.
    pub tree: String,
    /// The changes taken into it.
    pub chosen: Vec<TreeChange>,
    /// The changes left out.
    pub left: Vec<TreeChange>,
}

impl Candidate {
    /// Whether the candidate changes nothing of its base.
    pub(crate) fn is_empty(&self) -> bool {
        self.chosen.is_empty()
    }

    /// The chosen paths, for people and for the ledger.
    pub(crate) fn chosen_paths(&self) -> Vec<String> {
        self.chosen.iter().map(TreeChange::recorded).collect()
    }
}

/// The tree of `rev` (a commit or a tree).
pub(crate) fn tree_of(git: &Git, rev: &str) -> Result<String, GitError> {
    let objects = crate::run::scan::locate(git.dir())?.objects();
    let commit = match gix_hash::ObjectId::from_hex(rev.as_bytes()) {
        Ok(id) => id,
        Err(_) => commit_id(git, rev)?,
    };
    Ok(objects.tree_of_commit(&commit)?.to_string())
}

/// The commit `rev` names, as git resolves it.
fn commit_id(git: &Git, rev: &str) -> Result<gix_hash::ObjectId, GitError> {
    let text = git
        .text([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ])
        .map_err(|e| match e {
            GitError::Failed { stderr, .. } => GitError::Unresolved {
                rev: rev.to_string(),
                why: if stderr.is_empty() {
                    "no such commit".to_string()
                } else {
                    stderr
                },
            },
            other => other,
        })?;
    gix_hash::ObjectId::from_hex(text.trim().as_bytes()).map_err(|_| GitError::Failed {
        args: format!("rev-parse {rev}"),
        stderr: format!("unexpected output: {text}"),
    })
}

/// HEAD's commit and its tree: HEAD read from the ref files in process where it can be
/// (git as the fallback), the commit always read and checked against its id in process.
pub(crate) fn head_and_tree(git: &Git) -> Result<(String, String), GitError> {
    let located = crate::run::scan::locate(git.dir())?;
    let objects = located.objects();
    if let Some((head, tree)) = located.head(&objects)? {
        return Ok((head.to_string(), tree.to_string()));
    }
    let head = commit_id(git, "HEAD")?;
    Ok((head.to_string(), objects.tree_of_commit(&head)?.to_string()))
}

/// The entries that differ between trees `from` and `to`, renames not detected.
fn diff_trees(objects: &Objects, from: &str, to: &str) -> Result<Vec<TreeChange>, GitError> {
    Ok(objects
        .diff_trees(from, to)?
        .into_iter()
        .map(|c| TreeChange {
            path: c.path,
            new: c.new,
        })
        .collect())
}

/// Builds the tree of `base` plus the changes of `now` that `select` picks (by path).
pub(crate) fn build(
    git: &Git,
    base: &str,
    now: &str,
    select: impl Fn(&str) -> bool,
) -> Result<Candidate, GitError> {
    let objects = crate::run::scan::locate(git.dir())?.objects();
    let (chosen, left): (Vec<TreeChange>, Vec<TreeChange>) = diff_trees(&objects, base, now)?
        .into_iter()
        .partition(|c| select(&c.display()));
    if chosen.is_empty() {
        return Ok(Candidate {
            tree: base.to_string(),
            chosen,
            left,
        });
    }
    let edits: Vec<_> = chosen
        .iter()
        .map(|change| (change.path.as_slice(), change.new))
        .collect();
    let tree = objects.edit_tree(base, &edits)?.to_string();
    Ok(Candidate { tree, chosen, left })
}

/// What a commit is anchored with: its trailers and, when known, who it is by.
pub(crate) type Anchoring<'t> = (Vec<(&'t str, String)>, Option<Stamp>);

/// Commits `candidate` on top of HEAD (which must still be `parent`), moves HEAD to it, and
/// brings the user's index in line for the committed paths only. The work tree is not
/// touched: a file changed after the scan shows as a change against the new commit.
///
/// `anchor` gives the commit's trailers and stamp (recording what the trailers name); it
/// runs while the index takes the committed paths from the candidate's tree, which is
/// the commit's, so neither waits for the other. When `anchor` fails or HEAD is no
/// longer `parent`, HEAD stays where it is and the index entries of the committed paths
/// are HEAD's; when the index cannot take them, HEAD is moved back to `parent`.
pub(crate) fn commit<'t, E: From<GitError>>(
    git: &Git,
    parent: &str,
    candidate: &Candidate,
    message: &str,
    anchor: impl FnOnce() -> Result<Anchoring<'t>, E>,
) -> Result<Option<String>, E> {
    if candidate.is_empty() {
        return Ok(None);
    }
    let reset_to = |rev: &str| reset_paths_to(git, candidate, rev);
    std::thread::scope(|scope| {
        let reset = scope.spawn(|| match staged_in_process(git, candidate) {
            Ok(true) => Ok(()),
            // Left to git, or not written here for a reason git will name.
            Ok(false) | Err(_) => reset_to(&candidate.tree).map(drop),
        });
        let made = anchor().and_then(|(trailers, stamp)| {
            let commit = write_commit(git, parent, candidate, message, &trailers, stamp.as_ref())?;
            let subject = message.lines().next().unwrap_or_default();
            let message = format!("tdd: {subject}");
            if !moved_in_process(git, parent, &commit, stamp.as_ref(), &message)? {
                git.output(["update-ref", "-m", &message, "HEAD", &commit, parent])?;
            }
            Ok(commit)
        });
        let reset = reset.join().unwrap_or_else(|_| {
            Err(GitError::Failed {
                args: "reset".into(),
                stderr: "the thread bringing the index in line panicked".into(),
            })
        });
        match made {
            Ok(commit) => match reset {
                Ok(()) => Ok(Some(commit)),
                Err(err) => {
                    // The index could not take the committed paths (a lock left in
                    // `.git`, say): HEAD goes back to `parent`, where the ledger still
                    // says it is, and the step fails with why.
                    let _ = git.output([
                        "update-ref",
                        "-m",
                        "tdd: undo a commit the index could not follow",
                        "HEAD",
                        parent,
                        &commit,
                    ]);
                    Err(err.into())
                }
            },
            Err(err) => {
                // HEAD did not move: the index follows HEAD back.
                let _ = reset_to("HEAD");
                Err(err)
            }
        }
    })
}

/// Sets the index entries of the paths `candidate` commits to those of `rev`, with git:
/// `reset` refreshes the index after it, hashing the committed paths' files.
fn reset_paths_to(git: &Git, candidate: &Candidate, rev: &str) -> Result<Vec<u8>, GitError> {
    let mut pathspecs = Vec::new();
    for change in &candidate.chosen {
        pathspecs.extend_from_slice(&change.path);
        pathspecs.push(0);
    }
    let mut args = crate::run::scan::filters_off(git)?;
    args.extend(
        [
            "--literal-pathspecs",
            "reset",
            "-q",
            rev,
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ]
        .map(std::ffi::OsString::from),
    );
    git.output_with_stdin(&args, &pathspecs)
}

/// Undoes `commit` (made of `candidate` on `parent` by [`commit`]) when the step that
/// made it fails after it: HEAD goes back to `parent`, where the ledger still says it
/// is, if it is still `commit`, and the index entries of the committed paths follow
/// it. The work tree is not touched. Best effort: what fails here is left as it is, and
/// the step's own failure is what is reported.
pub(crate) fn undo(git: &Git, parent: &str, commit: &str, candidate: &Candidate) {
    let moved_back = git.output([
        "update-ref",
        "-m",
        "tdd: undo a commit whose step failed",
        "HEAD",
        parent,
        commit,
    ]);
    if moved_back.is_ok() {
        let _ = reset_paths_to(git, candidate, parent);
    }
}

/// Sets the index entries of the paths `candidate` commits to the candidate's, in-process;
/// `Ok(false)` when that is left to git ([`crate::run::scan::Located::stage`]), having
/// changed nothing.
fn staged_in_process(git: &Git, candidate: &Candidate) -> Result<bool, GitError> {
    let paths: Vec<crate::run::scan::Staged<'_>> = candidate
        .chosen
        .iter()
        .map(|change| (change.path.as_slice(), change.new))
        .collect();
    crate::run::scan::locate(git.dir())?.stage(&paths)
}

/// Moves HEAD's branch from `parent` to `commit` in-process, logged as the stamp's
/// committer; `Ok(false)` when there is no stamp or the move is left to git
/// ([`crate::run::scan::Located::move_head`]), having changed nothing.
fn moved_in_process(
    git: &Git,
    parent: &str,
    commit: &str,
    stamp: Option<&Stamp>,
    message: &str,
) -> Result<bool, GitError> {
    let Some(stamp) = stamp else {
        return Ok(false);
    };
    let (Ok(new), Ok(old)) = (
        gix_hash::ObjectId::from_hex(commit.as_bytes()),
        gix_hash::ObjectId::from_hex(parent.as_bytes()),
    ) else {
        return Ok(false);
    };
    let committer = stamp.committer_at(now());
    crate::run::scan::locate(git.dir())?.move_head(&crate::run::scan::HeadMove {
        new: &new,
        old: &old,
        committer: &committer,
        message,
    })
}

/// Writes the commit object of `candidate` on `parent`: by the stamp's identity and
/// time when there is one, else as `git commit-tree` makes it.
fn write_commit(
    git: &Git,
    parent: &str,
    candidate: &Candidate,
    message: &str,
    trailers: &[(&str, String)],
    stamp: Option<&Stamp>,
) -> Result<String, GitError> {
    let trailer_text: Vec<String> = trailers.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    let trailer_text = trailer_text.join("\n");
    match stamp {
        Some(stamp) => {
            let object =
                stamp.commit_object(&candidate.tree, parent, message, &trailer_text, now());
            let objects = crate::run::scan::locate(git.dir())?.objects();
            Ok(objects
                .write(gix_object::Kind::Commit, &object)?
                .to_string())
        }
        None => git.text([
            "commit-tree",
            &candidate.tree,
            "-p",
            parent,
            "-m",
            message,
            "-m",
            &trailer_text,
        ]),
    }
}

/// A path as bytes for the filesystem.
pub(crate) fn os_path(bytes: &[u8]) -> &std::path::Path {
    crate::repo_path::os(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed_repo() -> (tempfile::TempDir, Git) {
        let dir = tdd_testutil::repo();
        std::fs::write(dir.path().join("calc.py"), "old\n").expect("write");
        tdd_testutil::commit_all(dir.path(), "base");
        let git = Git::new(dir.path());
        (dir, git)
    }

    fn candidate_of_work_tree(dir: &std::path::Path, git: &Git) -> (String, Candidate) {
        let (head, head_tree) = head_and_tree(git).expect("head");
        let now = crate::run::Snapshot::scan(dir).expect("scan").tree;
        (
            head,
            build(git, &head_tree, &now, |_| true).expect("candidate"),
        )
    }

    /// A committed repository whose identity is Ada's, `calc.py` changed: HEAD, the
    /// candidate of the change, and Ada's stamp when `stamped`.
    fn changed_by_ada(stamped: bool) -> (tempfile::TempDir, Git, String, Candidate, Option<Stamp>) {
        let (dir, git) = committed_repo();
        tdd_testutil::git(dir.path(), &["config", "user.name", "Ada Lovelace"]);
        tdd_testutil::git(dir.path(), &["config", "user.email", "ada@example.com"]);
        std::fs::write(dir.path().join("calc.py"), "new\n").expect("write");
        let (head, candidate) = candidate_of_work_tree(dir.path(), &git);
        let stamp = stamped
            .then(|| crate::run::stamp::Probe::default().take(dir.path()))
            .flatten();
        assert_eq!(stamp.is_some(), stamped, "the probe gives a stamp");
        (dir, git, head, candidate, stamp)
    }

    #[test]
    fn a_commit_moves_head_and_stages_exactly_what_it_committed() {
        for stamped in [false, true] {
            let (dir, git, head, candidate, stamp) = changed_by_ada(stamped);
            let made = commit(&git, &head, &candidate, "feat: new", || {
                Ok::<_, GitError>((vec![("TDD-Run", "r".to_string())], stamp))
            })
            .expect("commit")
            .expect("a commit");
            assert_eq!(
                tdd_testutil::git(dir.path(), &["rev-parse", "HEAD"]).trim(),
                made
            );
            assert_eq!(
                tdd_testutil::git(dir.path(), &["status", "--porcelain"]),
                ""
            );
            tdd_testutil::git(dir.path(), &["fsck", "--strict", "--no-dangling"]);
            let log = tdd_testutil::git(dir.path(), &["log", "-1", "--format=%an <%ae>%n%B"]);
            // The identity git gives in the engine's own environment.
            let who = git.text(["var", "GIT_AUTHOR_IDENT"]).expect("git var");
            let who = &who[..who.rfind('>').expect("an email") + 1];
            assert_eq!(
                log,
                format!("{who}\nfeat: new\n\nTDD-Run: r\n\n"),
                "stamped: {stamped}"
            );
            // HEAD's move is logged, on HEAD and on the branch, by the committer.
            let committer = git.text(["var", "GIT_COMMITTER_IDENT"]).expect("git var");
            let committer = &committer[..committer.rfind('>').expect("an email") + 1];
            let branch = tdd_testutil::git(dir.path(), &["symbolic-ref", "--short", "HEAD"]);
            for log in ["HEAD", branch.trim()] {
                let entry = tdd_testutil::git(
                    dir.path(),
                    &["reflog", "show", "-1", "--format=%H %gn <%ge> %gs", log],
                );
                assert_eq!(
                    entry,
                    format!("{made} {committer} tdd: feat: new\n"),
                    "stamped: {stamped}"
                );
            }
        }
    }

    #[test]
    fn a_commit_on_a_stale_parent_leaves_head_and_unstages_its_paths() {
        for stamped in [false, true] {
            let (dir, git, head, candidate, stamp) = changed_by_ada(stamped);
            tdd_testutil::git(
                dir.path(),
                &["commit", "-q", "--allow-empty", "-m", "moved"],
            );
            let moved = tdd_testutil::git(dir.path(), &["rev-parse", "HEAD"]);
            let anchored = || Ok::<_, GitError>((Vec::new(), stamp));
            let err = commit(&git, &head, &candidate, "feat: new", anchored).expect_err("stale");
            assert!(err.to_string().contains("cannot lock ref"), "{err}");
            assert_eq!(tdd_testutil::git(dir.path(), &["rev-parse", "HEAD"]), moved);
            assert_eq!(
                tdd_testutil::git(dir.path(), &["status", "--porcelain"]),
                " M calc.py\n",
                "the change is in the work tree only (stamped: {stamped})"
            );
        }
    }

    #[test]
    fn a_commit_whose_anchor_fails_leaves_head_and_unstages_its_paths() {
        let (dir, git) = committed_repo();
        std::fs::write(dir.path().join("calc.py"), "new\n").expect("write");
        let (head, candidate) = candidate_of_work_tree(dir.path(), &git);
        let failed = || {
            Err::<Anchoring<'static>, _>(GitError::Failed {
                args: "record".into(),
                stderr: "the ledger refused the write".into(),
            })
        };
        let err = commit(&git, &head, &candidate, "feat: new", failed).expect_err("refused");
        assert!(err.to_string().contains("the ledger refused"), "{err}");
        assert_eq!(
            tdd_testutil::git(dir.path(), &["rev-parse", "HEAD"]),
            format!("{head}\n")
        );
        assert_eq!(
            tdd_testutil::git(dir.path(), &["status", "--porcelain"]),
            " M calc.py\n",
            "the change is in the work tree only"
        );
    }
}
