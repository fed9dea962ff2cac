//! The one way the engine runs git: the `git` CLI, with a scrubbed environment.
//!
//! What the engine reads of git's data without running git (the index, trees, blobs and
//! refs of the clean room, the candidate commit, the scan and the ledger's branch walk)
//! it reads through gix, in `run/scan/`, `run/candidate.rs`, `run/cleanroom.rs` and
//! `integrity/walk.rs`; this module is for everything that runs a `git` process.
//!
//! Every call is an argv vector. Variables that would redirect git to another
//! repository, index or work tree (`GIT_DIR`, `GIT_WORK_TREE`, `GIT_INDEX_FILE`
//! and friends) are removed, so a `tdd` started from a git hook or inside
//! another tool acts on the directory it was pointed at and nothing else.

use std::ffi::OsStr;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Output;

mod wait;

pub(crate) use wait::Watch;

/// Variables removed from every git invocation.
const SCRUBBED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_PREFIX",
];

/// Why a git call failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The `git` executable could not be started.
    #[error("failed to run git (is it installed and on PATH?)")]
    Spawn(#[source] std::io::Error),
    /// git ran and exited non-zero.
    #[error("`git {args}` failed: {stderr}")]
    Failed {
        /// The arguments, space-joined, for the message.
        args: String,
        /// git's stderr, trimmed.
        stderr: String,
    },
    /// git sat waiting to open a named pipe (FIFO) in the repository or its config, and
    /// was stopped rather than waited for forever.
    #[error(
        "`git {args}` was stopped: it was waiting to open a named pipe (FIFO), which no \
         one writes; one stands where git reads a file (the index, a config, HEAD, a \
         .gitignore or .gitattributes)"
    )]
    Stalled {
        /// The arguments, space-joined, for the message.
        args: String,
    },
    /// A file git keeps (the index) is a named pipe, a device or a directory.
    #[error(
        "{path} is not a regular file: a named pipe, a device or a directory stands where git keeps a file"
    )]
    NotRegular {
        /// The path, for a person to read.
        path: String,
    },
    /// An object the engine needs is not in the repository's object database.
    #[error("object {id} is missing from the repository's object database")]
    ObjectMissing {
        /// The object's id (hex).
        id: String,
    },
    /// An object's bytes do not hash to the id it is stored under: the object database
    /// was damaged, or rewritten, or an alternate, a pack or a replacement serves other
    /// bytes under that name. The bytes are never used.
    #[error(
        "object {id} in the repository's object database does not match its id (its bytes \
         hash to {found}): the object store is damaged or was rewritten"
    )]
    ObjectDamaged {
        /// The id the object was asked for (hex).
        id: String,
        /// The id its bytes hash to (hex).
        found: String,
    },
    /// An object the database holds cannot be read: its file is truncated, not zlib,
    /// not a regular file or unreadable, or its pack is damaged. Nothing is read from it.
    #[error(
        "object {id} in the repository's object database cannot be read ({reason}): the \
         object store is damaged"
    )]
    ObjectUnreadable {
        /// The id of the object asked for (hex).
        id: String,
        /// Why it could not be read, as the object store said.
        reason: String,
    },
    /// An object could not be stored: something else stands at its path in the object
    /// database (a directory, a pipe), or the database is not writable.
    #[error("object {id} cannot be written to the repository's object database ({reason})")]
    ObjectUnwritable {
        /// The object's id (hex).
        id: String,
        /// What the object store said.
        reason: String,
    },
    /// git's index file is not an index (truncated, garbage, another file linked in its
    /// place): nothing is judged from it.
    #[error("{path} is not a git index git can read ({why})")]
    IndexDamaged {
        /// The index file, for a person to read.
        path: String,
        /// What decoding it said.
        why: String,
    },
    /// A revision (HEAD) that names no commit git can read: `.git/HEAD`, the branch it
    /// names or the commit itself is damaged or missing.
    #[error(
        "{rev} names no commit git can read ({why}): .git/HEAD, the branch it names or the commit is damaged"
    )]
    Unresolved {
        /// The revision asked for.
        rev: String,
        /// What git said, or `no such commit`.
        why: String,
    },
    /// A ref the engine moves in-process (as `git update-ref NAME NEW OLD` would) was not
    /// moved: its lock file exists (another process is updating it, or one stopped before
    /// it finished), or it no longer holds the value it was read at.
    #[error("cannot lock ref '{reference}': {why}")]
    RefNotMoved {
        /// The ref, e.g. `refs/tdd/ledger/main`.
        reference: String,
        /// Why, for a person to read.
        why: String,
        /// The lock file that stands in the way, when that is why.
        lock: Option<PathBuf>,
    },
    /// The directory is not inside a git work tree.
    #[error("{} is not inside a git work tree", .0.display())]
    NotARepository(PathBuf),
    /// A changed file in the work tree is larger than the engine records in a commit it
    /// judges: it is refused from its size alone, before a byte of it is read.
    #[error(
        "{path} is {}, more than the {} tdd records of one changed file",
        gib(*.size),
        gib(*.limit)
    )]
    FileTooLarge {
        /// The file, for a person to read.
        path: String,
        /// Its size in bytes.
        size: u64,
        /// The most tdd records, in bytes.
        limit: u64,
    },
    /// The changed files of the work tree hold more bytes together than the engine
    /// hashes in one look: refused before the rest is read.
    #[error(
        "the changed files in the work tree hold more than {} together, more than tdd records in one commit it judges",
        gib(*.limit)
    )]
    ChangesTooLarge {
        /// The most tdd hashes in one look, in bytes.
        limit: u64,
    },
    /// git printed something that is not valid UTF-8 where text was expected.
    #[error("git printed output that is not UTF-8")]
    NotUtf8,
    /// A file-system operation on the work tree failed (not git itself).
    #[error("failed to {what} {path}")]
    WorkTree {
        /// What was being attempted, e.g. `restore`.
        what: String,
        /// The path, for a person to read.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// A git invocation rooted at one directory.
#[derive(Debug, Clone)]
pub struct Git {
    dir: PathBuf,
}

/// `-c` settings that let git reach a remote only over the transports it trusts by
/// default (`file`, `git`, `http`, `https`, `ssh`): no `ext::` command and no remote
/// helper a URL names, whatever a configuration allows.
pub const TRUSTED_TRANSPORTS: [&str; 6] = [
    "protocol.allow=never",
    "protocol.file.allow=always",
    "protocol.git.allow=always",
    "protocol.http.allow=always",
    "protocol.https.allow=always",
    "protocol.ssh.allow=always",
];

impl Git {
    /// A wrapper that runs git as if started in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Git {
        Git { dir: dir.into() }
    }

    /// The directory git runs in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A `Command` for `git ARGS` with the scrubbed environment, not yet run.
    pub fn command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new("git");
        // No hook and no file-system monitor: each is a program the repository's
        // configuration names, which git would start with the engine's rights and
        // wait for however long it runs (a `reference-transaction` hook on every ref
        // the engine moves, a `post-index-change` hook on every index it writes). The
        // empty graft file set below makes git 2.47 and later advise, before its own
        // words, that grafts are deprecated; that advice is not git's answer, so it is
        // turned off (an unknown advice key is ignored by older git).
        cmd.arg("-C")
            .arg(&self.dir)
            .args([
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "core.fsmonitor=false",
                "-c",
                "advice.graftFileDeprecated=false",
            ])
            .args(args);
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        // Replacement refs and grafts would make git show other objects or other parents
        // than the ids name; what the engine reads of history is what the ids hold.
        cmd.env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_GRAFT_FILE", "/dev/null");
        cmd
    }

    /// Runs `git ARGS` and returns its raw output, failing on a non-zero exit.
    pub fn output<I, S>(&self, args: I) -> Result<Output, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let finished = wait::run(self.command(args.clone()), None).map_err(GitError::Spawn)?;
        let joined = || {
            let args: Vec<String> = args
                .into_iter()
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect();
            args.join(" ")
        };
        if finished.stalled {
            return Err(GitError::Stalled { args: joined() });
        }
        let out = finished.output;
        if !out.status.success() {
            return Err(GitError::Failed {
                args: joined(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(out)
    }

    /// Runs `git ARGS` with `input` on its stdin and returns stdout, failing on a non-zero
    /// exit. stdin is fed from a thread, so git may write any amount before reading all.
    pub fn output_with_stdin<I, S>(&self, args: I, input: &[u8]) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let what: Vec<String> = args
            .clone()
            .into_iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        run_piped(self.command(args), Some(input), &what.join(" "), &[])
    }

    /// Runs `git ARGS` and returns stdout with the trailing newline removed.
    pub fn text<I, S>(&self, args: I) -> Result<String, GitError>
    where
        I: IntoIterator<Item = S> + Clone,
        S: AsRef<OsStr>,
    {
        let out = self.output(args)?;
        let text = String::from_utf8(out.stdout).map_err(|_| GitError::NotUtf8)?;
        Ok(text.trim_end_matches('\n').to_string())
    }

    /// The installed git's version string, e.g. `2.47.3`.
    pub fn version() -> Result<String, GitError> {
        let out = Command::new("git")
            .arg("--version")
            .output()
            .map_err(GitError::Spawn)?;
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(text.trim().trim_start_matches("git version ").to_string())
    }

    /// The work tree's top-level directory, or `NotARepository`.
    pub fn toplevel(&self) -> Result<PathBuf, GitError> {
        if let Some(found) = discover(&self.dir) {
            return Ok(found.toplevel);
        }
        match self.text(["rev-parse", "--show-toplevel"]) {
            Ok(path) if !path.is_empty() => Ok(PathBuf::from(path)),
            Ok(_) | Err(GitError::Failed { .. }) => Err(GitError::NotARepository(self.dir.clone())),
            Err(other) => Err(other),
        }
    }

    /// The canonical common git directory, shared by every worktree of a repository.
    pub fn common_dir(&self) -> Result<PathBuf, GitError> {
        if let Some(found) = discover(&self.dir) {
            return Ok(found.common_dir);
        }
        let raw = match self.text(["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
            Ok(path) => path,
            Err(GitError::Failed { .. }) => {
                return Err(GitError::NotARepository(self.dir.clone()));
            }
            Err(other) => return Err(other),
        };
        let path = PathBuf::from(raw);
        Ok(path.canonicalize().unwrap_or(path))
    }

    /// Paths with uncommitted changes (tracked or untracked, not ignored), staged or not.
    ///
    /// Each path is in the lossless form of [`crate::repo_path::encode`], so a name that
    /// is not UTF-8 is carried exactly. A rename or copy contributes both its source and
    /// its destination, so committing the listed paths commits the whole move.
    pub fn dirty_paths(&self) -> Result<Vec<String>, GitError> {
        let mut args = crate::run::scan::filters_off(self)?;
        args.extend(
            ["status", "--porcelain=v1", "-z", "--untracked-files=all"]
                .map(std::ffi::OsString::from),
        );
        let out = self.output(&args)?;
        Ok(parse_status(&out.stdout))
    }
}

/// The paths of `git status --porcelain=v1 -z` output.
fn parse_status(out: &[u8]) -> Vec<String> {
    let mut paths = Vec::new();
    let mut entries = out.split(|b| *b == 0).filter(|e| !e.is_empty());
    while let Some(entry) = entries.next() {
        let (status, path) = entry.split_at(entry.len().min(3));
        paths.push(crate::repo_path::encode(path));
        if status.starts_with(b"R") || status.starts_with(b"C") {
            // With `-z` a rename or copy is followed by its source path.
            if let Some(source) = entries.next() {
                paths.push(crate::repo_path::encode(source));
            }
        }
    }
    paths
}

/// Runs a git `cmd` built by [`Git::command`] (with whatever environment the caller
/// added), feeding `input` on stdin when given, and returns stdout. Exit codes in `ok`
/// count as success besides 0; `what` names the call in an error. stdin is fed from a
/// thread, so git may fill its stdout pipe before it has read all of its input.
pub fn run_piped(
    cmd: Command,
    input: Option<&[u8]>,
    what: &str,
    ok: &[i32],
) -> Result<Vec<u8>, GitError> {
    let finished = wait::run(cmd, input).map_err(GitError::Spawn)?;
    if finished.stalled {
        return Err(GitError::Stalled {
            args: what.to_string(),
        });
    }
    let out = finished.output;
    let code = out.status.code().unwrap_or(-1);
    if !out.status.success() && !ok.contains(&code) {
        return Err(GitError::Failed {
            args: what.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(out.stdout)
}

/// A repository found by reading the file system, the way git itself finds one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The work tree's top-level directory.
    pub toplevel: PathBuf,
    /// This work tree's own git directory (its index and HEAD live here).
    pub git_dir: PathBuf,
    /// The canonical common git directory.
    pub common_dir: PathBuf,
}

/// Finds the work tree containing `dir` without starting git: the nearest ancestor with a
/// `.git` directory, or a `.git` file naming one (`gitdir: ...`, as worktrees and
/// submodules have), whose common directory is given by its `commondir` file.
///
/// Returns `None` for anything unusual (no `HEAD`, unreadable files); callers then ask git,
/// which stays the authority. Starting git costs a few milliseconds per call, which matters
/// to commands such as `tdd status` that a leaf runs often.
pub fn discover(dir: &Path) -> Option<Discovered> {
    let start = dir.canonicalize().ok()?;
    let toplevel = start
        .ancestors()
        .find(|a| a.join(".git").exists())?
        .to_path_buf();
    let dot_git = toplevel.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        let text = crate::read::regular_text(&dot_git).ok()?;
        let target = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
        if target.is_absolute() {
            target
        } else {
            toplevel.join(target)
        }
    };
    if !git_dir.join("HEAD").is_file() {
        return None;
    }
    let common_dir = match crate::read::regular_text(&git_dir.join("commondir")) {
        Ok(text) => {
            let common = PathBuf::from(text.trim());
            if common.is_absolute() {
                common
            } else {
                git_dir.join(common)
            }
        }
        Err(_) => git_dir.clone(),
    };
    Some(Discovered {
        toplevel,
        git_dir,
        common_dir: common_dir.canonicalize().ok()?,
    })
}

/// The ledger's questions about git, answered through this wrapper: where a repository's
/// ledger lives is keyed by git's common directory, and a ledger home inside a work tree
/// is refused.
///
/// Guarantees: `common_dir` fails with `LedgerError::NotARepository` outside a repository
/// and with `LedgerError::Git` holding the [`GitError`] for any other git failure.
#[derive(Debug, Clone, Copy, Default)]
pub struct GitProbe;

impl tdd_ledger::RepositoryProbe for GitProbe {
    fn common_dir(&self, dir: &Path) -> Result<PathBuf, tdd_ledger::LedgerError> {
        Git::new(dir).common_dir().map_err(|err| match err {
            GitError::NotARepository(path) => tdd_ledger::LedgerError::NotARepository(path),
            other => tdd_ledger::LedgerError::Git(Box::new(other)),
        })
    }

    fn work_tree_containing(&self, path: &Path) -> Option<PathBuf> {
        discover(path).map(|found| found.toplevel)
    }
}

/// `bytes` in GiB, for a person to read: `2.5 GiB`, `1 GiB`.
fn gib(bytes: u64) -> String {
    let gib = bytes as f64 / f64::from(1u32 << 30);
    if gib.fract() == 0.0 {
        format!("{gib:.0} GiB")
    } else {
        format!("{gib:.1} GiB")
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    use tdd_testutil::repo as init_repo;

    #[test]
    fn toplevel_and_common_dir_resolve_inside_a_repo() {
        let dir = init_repo();
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).expect("mkdir");
        let git = Git::new(&sub);
        let top = git.toplevel().expect("toplevel");
        assert_eq!(top.canonicalize().ok(), dir.path().canonicalize().ok());
        assert!(git.common_dir().expect("common dir").ends_with(".git"));
    }

    #[test]
    fn outside_a_repo_is_not_a_repository() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = Git::new(dir.path()).toplevel().expect_err("not a repo");
        assert!(matches!(err, GitError::NotARepository(_)));
    }

    #[test]
    fn discovery_agrees_with_git_in_a_repo_and_a_worktree() {
        let dir = init_repo();
        let git = Git::new(dir.path());
        git.output([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "c",
        ])
        .expect("commit");
        let wt = dir.path().join("wt");
        git.output([
            std::ffi::OsStr::new("worktree"),
            "add".as_ref(),
            "-q".as_ref(),
            wt.as_os_str(),
        ])
        .expect("worktree add");
        let sub = wt.join("deep/er");
        std::fs::create_dir_all(&sub).expect("mkdir");
        for place in [dir.path().to_path_buf(), sub] {
            let found = discover(&place).expect("discovered");
            let by_git = |args: &[&str]| {
                PathBuf::from(Git::new(&place).text(args).expect("git answers"))
                    .canonicalize()
                    .expect("canonical")
            };
            assert_eq!(found.toplevel, by_git(&["rev-parse", "--show-toplevel"]));
            assert_eq!(
                found.common_dir,
                by_git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
            );
        }
        let outside = tempfile::tempdir().expect("tempdir");
        assert_eq!(discover(outside.path()), None);
    }

    #[test]
    fn worktrees_of_one_repository_share_a_ledger() {
        use tdd_ledger::LedgerLocation;
        let repo = init_repo();
        let git = Git::new(repo.path());
        std::fs::write(repo.path().join("f"), "x").expect("write");
        tdd_testutil::commit_all(repo.path(), "c");
        let other = tempfile::tempdir().expect("tempdir");
        let wt = other.path().join("wt");
        git.output([
            std::ffi::OsStr::new("worktree"),
            "add".as_ref(),
            "-q".as_ref(),
            wt.as_os_str(),
        ])
        .expect("worktree add");
        let env = |k: &str| {
            (k == "TDD_LEDGER_HOME").then(|| std::ffi::OsString::from("/tmp/tdd-ledger-test"))
        };
        let a = LedgerLocation::resolve_with(repo.path(), &GitProbe, env).expect("main");
        let b = LedgerLocation::resolve_with(&wt, &GitProbe, env).expect("worktree");
        assert_eq!(a.database, b.database);
    }

    #[test]
    fn a_ledger_home_inside_a_real_work_tree_is_refused() {
        use tdd_ledger::LedgerError;
        use tdd_ledger::LedgerLocation;
        let repo = init_repo();
        let inside = repo.path().join("ledger-here");
        let err = LedgerLocation::resolve_with(repo.path(), &GitProbe, |k| {
            (k == "TDD_LEDGER_HOME").then(|| inside.clone().into_os_string())
        })
        .expect_err("refused");
        assert!(
            matches!(err, LedgerError::HomeInsideWorkTree { .. }),
            "{err:?}"
        );
        let outside = tempfile::tempdir().expect("tempdir");
        let err = LedgerLocation::resolve_with(outside.path(), &GitProbe, |k| {
            (k == "TDD_LEDGER_HOME").then(|| std::ffi::OsString::from("/tmp/tdd-ledger-test"))
        })
        .expect_err("not a repository");
        assert!(matches!(err, LedgerError::NotARepository(_)), "{err:?}");
    }

    #[test]
    fn dirty_paths_lists_untracked_and_modified_files() {
        let dir = init_repo();
        std::fs::write(dir.path().join("new.txt"), "x").expect("write");
        let dirty = Git::new(dir.path()).dirty_paths().expect("status");
        assert_eq!(dirty, vec!["new.txt".to_string()]);
    }

    #[test]
    fn dirty_paths_carry_renames_and_names_that_are_not_utf8() {
        let dir = init_repo();
        let git = Git::new(dir.path());
        std::fs::write(dir.path().join("old.txt"), "x").expect("write");
        tdd_testutil::commit_all(dir.path(), "c");
        git.output(["mv", "old.txt", "new.txt"]).expect("mv");
        let odd = std::ffi::OsStr::from_bytes(b"odd-\xff.txt");
        std::fs::write(dir.path().join(odd), "y").expect("write");
        let mut dirty = git.dirty_paths().expect("status");
        dirty.sort();
        assert_eq!(dirty, vec!["\"odd-\\377.txt\"", "new.txt", "old.txt"]);
        assert_eq!(crate::repo_path::decode(&dirty[0]), b"odd-\xff.txt");
    }
}
