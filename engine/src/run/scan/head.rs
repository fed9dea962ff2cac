//! HEAD's branch moved in-process, as `git update-ref -m MESSAGE HEAD NEW OLD` moves it
//! where git would do nothing more than move the ref file and append to its two reflogs.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;

use gix_hash::ObjectId;

use super::Located;
use super::refs::HeadRef;
use super::refs::RefRead;
use super::refs::safe_ref_name;
use super::refs::write_ref_file;
use super::refs_are_files;
use crate::git::GitError;

/// What configuration bears on the move of HEAD's branch beyond the ref file and the
/// reflogs that exist: hooks (`core.hooksPath`), the files' permissions
/// (`core.sharedRepository`), syncing refs to disk (`core.fsync`), whatever an include
/// brings, and a lock timeout. A config file that mentions any of these words leaves the
/// move to git.
const HEAD_MENTIONS: [&[u8]; 5] = [
    b"hookspath",
    b"sharedrepository",
    b"fsync",
    b"include",
    b"locktimeout",
];

/// One move of HEAD's branch: to `new` from `old`, logged as `committer` (an identity
/// with its date, as a commit header carries it) with `message`.
pub(crate) struct HeadMove<'a> {
    /// The commit HEAD's branch moves to.
    pub(crate) new: &'a ObjectId,
    /// The commit it must hold when the move is made.
    pub(crate) old: &'a ObjectId,
    /// Who made the move, and when: `Name <email> SECONDS ZONE`.
    pub(crate) committer: &'a [u8],
    /// The reflogs' message.
    pub(crate) message: &'a str,
}

impl Located {
    /// Moves the branch HEAD names as `git update-ref -m MESSAGE HEAD NEW OLD` does: with
    /// HEAD and the branch locked, the branch's value checked once the locks are held (a
    /// concurrent update makes this one fail rather than be lost), one line appended to
    /// HEAD's reflog and to the branch's, then the branch's file replaced.
    ///
    /// `Ok(false)` leaves the move to git, having changed nothing: refs that are not
    /// files, HEAD detached or not a branch this reads, either reflog missing (git
    /// decides whether to make one), a lock held by another (git waits for it) or one
    /// that cannot be made, a `reference-transaction` hook, a link on the way to any
    /// file written, or configuration that bears on the move ([`HEAD_MENTIONS`], or any
    /// given in the environment).
    pub(crate) fn move_head(&self, to: &HeadMove<'_>) -> Result<bool, GitError> {
        self.move_head_in(to, &|var| std::env::var_os(var))
    }

    /// [`Located::move_head`] with the environment `env`.
    pub(super) fn move_head_in(
        &self,
        to: &HeadMove<'_>,
        env: &dyn Fn(&str) -> Option<std::ffi::OsString>,
    ) -> Result<bool, GitError> {
        let configured = ["GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG"]
            .iter()
            .any(|var| env(var).is_some());
        if configured
            || !refs_are_files(&self.common_dir)
            || self
                .common_dir
                .join("hooks/reference-transaction")
                .symlink_metadata()
                .is_ok()
            || !super::settings::mentions_none_of(
                &super::settings::config_files(self, env),
                &HEAD_MENTIONS,
            )
        {
            return Ok(false);
        }
        let Some(HeadRef::Branch(branch)) = self.head_ref() else {
            return Ok(false);
        };
        let name = format!("refs/heads/{branch}");
        let logs = [
            self.git_dir.join("logs/HEAD"),
            self.common_dir.join("logs").join(&name),
        ];
        if !safe_ref_name(&name)
            || linked_on_the_way(&self.common_dir, &name)
            || linked_on_the_way(&self.common_dir, &format!("logs/{name}"))
            || linked_on_the_way(&self.git_dir, "logs/HEAD")
            || !logs
                .iter()
                .all(|log| log.symlink_metadata().is_ok_and(|m| m.is_file()))
        {
            return Ok(false);
        }
        let head_lock = self.git_dir.join("HEAD.lock");
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&head_lock)
        {
            Ok(_) => {}
            // Held by another (git waits for it), or not to be made here: git says why.
            Err(_) => return Ok(false),
        }
        let moved = self.move_locked_branch(&name, &branch, &logs, to);
        let _ = std::fs::remove_file(&head_lock);
        moved
    }

    /// The move of [`Located::move_head`] once HEAD is locked: HEAD must still name
    /// `branch`, whose ref `name` is then locked, checked, logged and written.
    fn move_locked_branch(
        &self,
        name: &str,
        branch: &str,
        logs: &[std::path::PathBuf; 2],
        to: &HeadMove<'_>,
    ) -> Result<bool, GitError> {
        if self.head_ref() != Some(HeadRef::Branch(branch.to_string())) {
            return Ok(false);
        }
        let refused = |why: String| GitError::Failed {
            args: "update-ref HEAD".into(),
            stderr: format!("cannot lock ref 'HEAD': {why}"),
        };
        let path = self.common_dir.join(name);
        let mut unlocked = false;
        let locked = |lock: &Path, e: std::io::Error| {
            unlocked = true;
            crate::run::safe_fs::io_error("lock", lock, e)
        };
        let written = write_ref_file(&path, to.new, locked, || match self.read_ref(name) {
            RefRead::Found(id) if id == *to.old => {
                let line = reflog_line(to);
                for log in logs {
                    append(log, &line)?;
                }
                Ok(true)
            }
            RefRead::Found(id) => Err(refused(format!(
                "'{name}' is at {id}, not at {} where it was read",
                to.old
            ))),
            RefRead::Absent => Err(refused(format!("'{name}' is gone"))),
            RefRead::Unread => Ok(false),
        });
        match written {
            // A branch locked by another is left to git, which waits for its lock; one
            // whose lock cannot be made (a packed branch's directory gone, say) too, as
            // git makes what it needs or says why not.
            Err(_) if unlocked => Ok(false),
            other => other,
        }
    }
}

/// The reflog line git writes for `to`: old and new ids, the committer with the date,
/// a tab and the message with its whitespace runs made one space and trimmed.
fn reflog_line(to: &HeadMove<'_>) -> Vec<u8> {
    let mut line = format!("{} {} ", to.old, to.new).into_bytes();
    line.extend_from_slice(to.committer);
    line.push(b'\t');
    let mut message = Vec::new();
    let mut was_space = true;
    for b in to.message.bytes() {
        let space = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        if !(was_space && space) {
            message.push(if space { b' ' } else { b });
        }
        was_space = space;
    }
    while message.last() == Some(&b' ') {
        message.pop();
    }
    line.extend_from_slice(&message);
    line.push(b'\n');
    line
}

/// Appends `line` to the existing reflog `path` in one write, following no link.
fn append(path: &Path, line: &[u8]) -> Result<(), GitError> {
    std::fs::OpenOptions::new()
        .append(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .and_then(|mut file| file.write_all(line))
        .map_err(|e| crate::run::safe_fs::io_error("append to", path, e))
}

/// Whether any component of `relative` below `base` is a symbolic link.
fn linked_on_the_way(base: &Path, relative: &str) -> bool {
    let mut below = base.to_path_buf();
    relative.split('/').any(|part| {
        below.push(part);
        below
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository of three commits on `main`, its config its own (none of the
    /// machine's), with a runner of git in it.
    struct Moving {
        dir: tempfile::TempDir,
        located: Located,
        commits: [ObjectId; 3],
    }

    impl Moving {
        fn new() -> Moving {
            let dir = tempfile::tempdir().expect("dir");
            let root = dir.path().join("repo");
            std::fs::create_dir(&root).expect("mkdir");
            let mut moving = Moving {
                located: {
                    run_git(&root, &["init", "-q", "-b", "main"], &[]);
                    super::super::locate(&root).expect("located")
                },
                dir,
                commits: [ObjectId::null(gix_hash::Kind::Sha1); 3],
            };
            for (i, message) in ["a", "b", "c"].iter().enumerate() {
                moving.git(&["commit", "-q", "--allow-empty", "-m", message]);
                moving.commits[i] = moving.head();
            }
            moving.git(&["reset", "-q", "--soft", "HEAD~2"]);
            moving
        }

        fn git(&self, args: &[&str]) -> String {
            let env = [
                ("GIT_COMMITTER_NAME", "A U Thor"),
                ("GIT_COMMITTER_EMAIL", "a@example.com"),
                ("GIT_COMMITTER_DATE", "1700000000 +0100"),
                ("GIT_AUTHOR_NAME", "A U Thor"),
                ("GIT_AUTHOR_EMAIL", "a@example.com"),
            ];
            run_git(&self.located.root, args, &env)
        }

        fn head(&self) -> ObjectId {
            ObjectId::from_hex(self.git(&["rev-parse", "HEAD"]).as_bytes()).expect("id")
        }

        fn env(&self) -> impl Fn(&str) -> Option<std::ffi::OsString> + use<> {
            let global = self.dir.path().join("no-global-config");
            move |var: &str| match var {
                "GIT_CONFIG_NOSYSTEM" => Some("1".into()),
                "GIT_CONFIG_GLOBAL" => Some(global.clone().into_os_string()),
                _ => None,
            }
        }

        /// Moves HEAD in-process from `old` to `new` as git's test identity.
        fn move_head(&self, new: usize, old: usize) -> Result<bool, GitError> {
            let to = HeadMove {
                new: &self.commits[new],
                old: &self.commits[old],
                committer: b"A U Thor <a@example.com> 1700000000 +0100",
                message: "tdd: feat: x",
            };
            self.located.move_head_in(&to, &self.env())
        }

        fn last_log_lines(&self) -> [String; 2] {
            ["logs/HEAD", "logs/refs/heads/main"].map(|log| {
                let text = std::fs::read_to_string(self.located.git_dir.join(log)).expect("log");
                text.lines().last().expect("a line").to_string()
            })
        }
    }

    fn run_git(root: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = std::process::Command::new("git")
            .args(args)
            .envs(env.iter().copied())
            .current_dir(root)
            .output()
            .expect("git");
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn head_moves_and_logs_as_git_update_ref_moves_and_logs_it() {
        let repo = Moving::new();
        let [a, b, c] = repo.commits.map(|id| id.to_string());
        assert!(repo.move_head(1, 0).expect("moved"));
        assert_eq!(repo.head().to_string(), b);
        let ours = repo.last_log_lines();
        // git's own move, b to c, logged by the same identity at the same date.
        repo.git(&["update-ref", "-m", "tdd: feat: x", "HEAD", &c, &b]);
        let theirs = repo.last_log_lines();
        for (ours, theirs) in ours.iter().zip(&theirs) {
            assert_eq!(
                ours.replace(&format!("{a} {b}"), &format!("{b} {c}")),
                *theirs
            );
        }
        repo.git(&["fsck", "--strict", "--no-dangling"]);
        let locks = ["HEAD.lock", "refs/heads/main.lock"];
        assert!(locks.iter().all(|l| !repo.located.git_dir.join(l).exists()));
        // From a value the branch does not hold: refused, unchanged, no lock left.
        let err = repo.move_head(0, 1).expect_err("stale");
        assert!(err.to_string().contains("cannot lock ref 'HEAD'"), "{err}");
        assert_eq!(repo.head().to_string(), c);
        assert_eq!(repo.last_log_lines(), theirs, "nothing logged");
        assert!(locks.iter().all(|l| !repo.located.git_dir.join(l).exists()));
    }

    #[test]
    fn head_is_left_to_git_where_git_would_do_more_or_wait() {
        let repo = Moving::new();
        let dir = &repo.located.git_dir;
        let left_to_git = |why: &str| {
            assert!(!repo.move_head(1, 0).expect(why), "{why}");
            assert_eq!(repo.head(), repo.commits[0], "{why}");
        };
        // A lock held by another, on HEAD or on the branch: git waits for it; theirs stays.
        for lock in ["HEAD.lock", "refs/heads/main.lock"] {
            std::fs::write(dir.join(lock), "").expect("lock");
            left_to_git(lock);
            assert!(dir.join(lock).exists());
            std::fs::remove_file(dir.join(lock)).expect("unlock");
        }
        // A reflog git would decide whether to make.
        let log = dir.join("logs/refs/heads/main");
        std::fs::rename(&log, dir.join("kept")).expect("mv");
        left_to_git("no reflog for the branch");
        std::fs::rename(dir.join("kept"), &log).expect("mv back");
        // A reflog directory that is a link: nothing is written through it.
        let outside = repo.dir.path().join("outside");
        std::fs::rename(dir.join("logs/refs/heads"), &outside).expect("mv");
        std::os::unix::fs::symlink(&outside, dir.join("logs/refs/heads")).expect("ln");
        let before = std::fs::read(outside.join("main")).expect("log");
        left_to_git("a linked reflog directory");
        assert_eq!(std::fs::read(outside.join("main")).expect("log"), before);
        std::fs::remove_file(dir.join("logs/refs/heads")).expect("rm link");
        std::fs::rename(&outside, dir.join("logs/refs/heads")).expect("mv back");
        // A hook, configuration that bears on the move, configuration in the environment.
        let hook = dir.join("hooks/reference-transaction");
        std::fs::write(&hook, "#!/bin/sh\n").expect("hook");
        left_to_git("a reference-transaction hook");
        std::fs::remove_file(&hook).expect("rm hook");
        repo.git(&["config", "core.fsync", "reference"]);
        left_to_git("refs synced to disk");
        repo.git(&["config", "--unset", "core.fsync"]);
        let with_parameters = |var: &str| match var {
            "GIT_CONFIG_PARAMETERS" => Some("'core.fsync'='reference'".into()),
            other => repo.env()(other),
        };
        let to = HeadMove {
            new: &repo.commits[1],
            old: &repo.commits[0],
            committer: b"A U Thor <a@example.com> 1700000000 +0100",
            message: "m",
        };
        assert!(
            !repo
                .located
                .move_head_in(&to, &with_parameters)
                .expect("left")
        );
        // A branch only packed, its directory gone: git makes it.
        repo.git(&["checkout", "-q", "-b", "feature/x"]);
        repo.git(&["pack-refs", "--all"]);
        let _ = std::fs::remove_dir(dir.join("refs/heads/feature"));
        assert!(!dir.join("refs/heads/feature").exists());
        left_to_git("a packed branch whose directory is gone");
        repo.git(&["checkout", "-q", "main"]);
        // HEAD detached.
        repo.git(&["checkout", "-q", "--detach"]);
        left_to_git("HEAD detached");
        repo.git(&["checkout", "-q", "main"]);
        // With none of those, it moves.
        assert!(repo.move_head(1, 0).expect("moved"));
        assert_eq!(repo.head(), repo.commits[1]);
    }

    #[test]
    fn a_reflog_message_is_made_one_line_as_git_makes_it() {
        let (a, b) = (
            ObjectId::null(gix_hash::Kind::Sha1),
            ObjectId::empty_tree(gix_hash::Kind::Sha1),
        );
        let line = reflog_line(&HeadMove {
            new: &b,
            old: &a,
            committer: b"A U Thor <a@example.com> 1700000000 +0100",
            message: "  tdd: feat:\t two\n\nlines  ",
        });
        assert_eq!(
            String::from_utf8(line).expect("text"),
            format!("{a} {b} A U Thor <a@example.com> 1700000000 +0100\ttdd: feat: two lines\n")
        );
    }
}
