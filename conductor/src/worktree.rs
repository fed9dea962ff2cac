//! The conductor's own `git worktree` (`[conductor] worktree = true` or `--worktree`).
//!
//! The work branch is checked out in a separate work tree beside the repository,
//! `<repo>-tdd-issue-<n>`, so the user's checkout, branch and uncommitted files are never
//! touched. The place is derived from the repository alone (its main work tree and the
//! issue number), so a resume started from any of the repository's work trees finds it.
//! It is a sibling rather than a directory under the ledger home so that no leaf working
//! in it sits next to the ledger.

use std::path::Path;
use std::path::PathBuf;

use tdd_engine::git::Git;

use crate::lock::Position;
use crate::lock::read_position;

/// Why the conductor's worktree could not be created or reused.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The path is taken by something that is not a worktree of this repository.
    #[error("{} exists and is not a git worktree of this repository", path.display())]
    Occupied {
        /// The conductor's worktree path.
        path: PathBuf,
    },
    /// The path is a worktree of this repository with another branch checked out.
    #[error("the worktree {} has `{found}` checked out, not `{branch}`", path.display())]
    OtherBranch {
        /// The conductor's worktree path.
        path: PathBuf,
        /// The work branch.
        branch: String,
        /// What is checked out there (a branch, or `HEAD` when detached).
        found: String,
    },
    /// git refused to add the worktree (the branch is checked out elsewhere, say).
    #[error("failed to add the worktree {}", path.display())]
    Add {
        /// The conductor's worktree path.
        path: PathBuf,
        /// git's failure.
        source: tdd_engine::git::GitError,
    },
    /// The repository's worktrees could not be listed.
    #[error(transparent)]
    Git(#[from] tdd_engine::git::GitError),
}

/// The conductor's worktree for issue `issue` of the repository whose main work tree is
/// `main` (see [`main_work_tree`]): `<main>-tdd-issue-<n>` beside it. The same for every
/// work tree of the repository, so a resume from anywhere finds it.
pub fn path_for(main: &Path, issue: u64) -> PathBuf {
    let name = main
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".to_string());
    let parent = main.parent().unwrap_or(main);
    parent.join(format!("{name}-tdd-issue-{issue}"))
}

/// The main work tree of the repository of `from`: `from`'s own work tree when that is
/// the main one (its git directory is the common one: also for submodules and separate
/// git directories, whose git directory is elsewhere), else the first that git lists.
pub fn main_work_tree(from: &Path) -> Result<PathBuf, WorktreeError> {
    if let Some(found) = tdd_engine::git::discover(from) {
        let git_dir = found.git_dir.canonicalize().unwrap_or(found.git_dir);
        if git_dir == found.common_dir {
            return Ok(found.toplevel);
        }
    }
    Ok(worktrees(from)?
        .into_iter()
        .next()
        .map_or_else(|| from.to_path_buf(), |(path, _)| path))
}

/// The branches of the repository's worktrees by path (`HEAD` for a detached one), from
/// `git worktree list --porcelain` run in `from`.
fn worktrees(from: &Path) -> Result<Vec<(PathBuf, String)>, WorktreeError> {
    let text = Git::new(from).text(["worktree", "list", "--porcelain"])?;
    let mut found = Vec::new();
    for block in text.split("\n\n") {
        let mut path = None;
        let mut branch = "HEAD".to_string();
        for line in block.lines() {
            if let Some(p) = line.strip_prefix("worktree ") {
                path = Some(PathBuf::from(p));
            } else if let Some(b) = line.strip_prefix("branch ") {
                branch = b.trim_start_matches("refs/heads/").to_string();
            }
        }
        if let Some(path) = path {
            let path = path.canonicalize().unwrap_or(path);
            found.push((path, branch));
        }
    }
    Ok(found)
}

/// Makes `path` a worktree of the repository of `from` with `branch` checked out: reused
/// when it already is one, else added (the branch is created at `from`'s `HEAD` when it
/// does not exist yet). Returns whether it was created. Nothing in `from` changes: not its
/// branch, index or files.
pub fn ensure(from: &Path, path: &Path, branch: &str) -> Result<bool, WorktreeError> {
    let git = Git::new(from);
    if path.exists() {
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        let listed = worktrees(from)?;
        let Some((_, found)) = listed.into_iter().find(|(p, _)| *p == canonical) else {
            return Err(WorktreeError::Occupied {
                path: path.to_path_buf(),
            });
        };
        if found != branch {
            return Err(WorktreeError::OtherBranch {
                path: path.to_path_buf(),
                branch: branch.to_string(),
                found,
            });
        }
        return Ok(false);
    }
    // A worktree whose directory was deleted is still registered: forget it first.
    git.output(["worktree", "prune"])?;
    let exists = git
        .output([
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ])
        .is_ok();
    let path_arg = path.as_os_str();
    let result = if exists {
        git.output([
            "worktree".as_ref(),
            "add".as_ref(),
            "-q".as_ref(),
            path_arg,
            branch.as_ref(),
        ])
    } else {
        git.output([
            "worktree".as_ref(),
            "add".as_ref(),
            "-q".as_ref(),
            "-b".as_ref(),
            branch.as_ref(),
            path_arg,
            "HEAD".as_ref(),
        ])
    };
    result.map_err(|source| WorktreeError::Add {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(true)
}

/// The conductors running in this repository's conductor worktrees other than
/// `work_tree`, each with its worktree and where it stands, so `tdd status` in the user's
/// work tree can point at a run that works elsewhere. Best effort: empty when git cannot
/// list the worktrees.
pub fn running_elsewhere(ledger_dir: &Path, work_tree: &Path) -> Vec<(PathBuf, Position)> {
    // `tdd status` runs often: git is asked only when some other conductor may run.
    if !crate::lock::others_may_run(ledger_dir, work_tree) {
        return Vec::new();
    }
    let (Ok(listed), Ok(main)) = (worktrees(work_tree), main_work_tree(work_tree)) else {
        return Vec::new();
    };
    let parent = main.parent().unwrap_or(&main).to_path_buf();
    let prefix = format!(
        "{}-tdd-issue-",
        main.file_name()
            .map_or("repo".into(), |n| n.to_string_lossy())
    );
    let here = work_tree
        .canonicalize()
        .unwrap_or_else(|_| work_tree.to_path_buf());
    listed
        .into_iter()
        .filter(|(path, _)| *path != here)
        .filter(|(path, _)| path.parent() == Some(parent.as_path()))
        .filter(|(path, _)| {
            path.file_name()
                .map(|name| name.to_string_lossy())
                .and_then(|name| name.strip_prefix(&prefix).map(str::to_string))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|(path, _)| read_position(ledger_dir, &path).map(|p| (path, p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commit(dir: &Path) {
        std::fs::write(dir.join("f"), "x").expect("write");
        tdd_testutil::commit_all(dir, "c");
    }

    #[test]
    fn the_path_is_beside_the_main_work_tree() {
        let path = path_for(Path::new("/src/calc"), 7);
        assert_eq!(path, PathBuf::from("/src/calc-tdd-issue-7"));
        let bare = path_for(Path::new("/src/calc.git"), 7);
        assert_eq!(bare, PathBuf::from("/src/calc.git-tdd-issue-7"));
    }

    #[test]
    fn a_separate_git_dir_puts_the_worktree_beside_the_work_tree() {
        let root = tempfile::tempdir().expect("tempdir");
        let (tree, gitdir) = (root.path().join("calc"), root.path().join("store/calc.git"));
        std::fs::create_dir_all(root.path().join("store")).expect("mkdir");
        let status = std::process::Command::new("git")
            .args(["init", "-q", "--separate-git-dir"])
            .arg(&gitdir)
            .arg(&tree)
            .status()
            .expect("git init");
        assert!(status.success());
        commit(&tree);
        let main = main_work_tree(&tree).expect("main work tree");
        assert_eq!(main, tree.canonicalize().expect("canonical"));
        assert_eq!(
            path_for(&main, 3),
            root.path()
                .canonicalize()
                .expect("canonical")
                .join("calc-tdd-issue-3")
        );
    }

    #[test]
    fn a_worktree_is_added_then_reused_and_the_user_tree_is_untouched() {
        let root = tempfile::tempdir().expect("tempdir");
        let repo = root.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        Git::new(&repo).output(["init", "-q"]).expect("init");
        commit(&repo);
        std::fs::write(repo.join("notes.txt"), "mine").expect("write");
        let before = Git::new(&repo)
            .text(["rev-parse", "--abbrev-ref", "HEAD"])
            .expect("branch");
        let wt = root.path().join("repo-tdd-issue-1");
        assert!(ensure(&repo, &wt, "tdd/issue-1-x").expect("added"));
        assert!(!ensure(&repo, &wt, "tdd/issue-1-x").expect("reused"));
        let there = Git::new(&wt)
            .text(["rev-parse", "--abbrev-ref", "HEAD"])
            .expect("branch");
        assert_eq!(there, "tdd/issue-1-x");
        let here = Git::new(&repo)
            .text(["rev-parse", "--abbrev-ref", "HEAD"])
            .expect("branch");
        assert_eq!(here, before);
        assert!(repo.join("notes.txt").exists());
        let err = ensure(&repo, &wt, "tdd/issue-2-y").expect_err("other branch");
        assert!(matches!(err, WorktreeError::OtherBranch { .. }), "{err:?}");
        let stranger = root.path().join("stranger");
        std::fs::create_dir(&stranger).expect("mkdir");
        let err = ensure(&repo, &stranger, "tdd/issue-1-x").expect_err("occupied");
        assert!(matches!(err, WorktreeError::Occupied { .. }), "{err:?}");
    }
}
