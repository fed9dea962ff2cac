//! Where a repository's ledger lives: outside every work tree, one per repository.

use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;

use sha2::Digest;

use super::LedgerError;
use crate::git::Git;
use crate::git::GitError;

/// The file name of a repository's ledger database.
pub const DATABASE_FILE: &str = "ledger.sqlite3";

/// The resolved ledger home and the per-repository directory inside it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LedgerLocation {
    /// The ledger home (`$TDD_LEDGER_HOME`, `$XDG_DATA_HOME/tdd` or `~/.local/share/tdd`).
    pub home: PathBuf,
    /// Which variable decided the home.
    pub home_source: &'static str,
    /// The canonical git common directory the ledger is keyed by.
    pub repository: PathBuf,
    /// The per-repository state directory (ledger, leaves, run files).
    pub dir: PathBuf,
    /// The SQLite database.
    pub database: PathBuf,
}

impl LedgerLocation {
    /// Resolves the ledger of the repository containing `dir` from the process environment.
    pub fn resolve(dir: &Path) -> Result<LedgerLocation, LedgerError> {
        LedgerLocation::resolve_with(dir, |key| std::env::var_os(key))
    }

    /// Resolves the ledger with `env` standing in for the process environment.
    pub fn resolve_with(
        dir: &Path,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<LedgerLocation, LedgerError> {
        let (home, home_source) = ledger_home(&env)?;
        let repository = Git::new(dir).common_dir().map_err(|err| match err {
            GitError::NotARepository(path) => LedgerError::NotARepository(path),
            other => LedgerError::Git(other),
        })?;
        refuse_inside_work_tree(&home)?;
        let dir = home.join("repos").join(repository_key(&repository));
        let database = dir.join(DATABASE_FILE);
        Ok(LedgerLocation {
            home,
            home_source,
            repository,
            dir,
            database,
        })
    }
}

/// The ledger home and the variable it came from.
fn ledger_home(
    env: &impl Fn(&str) -> Option<OsString>,
) -> Result<(PathBuf, &'static str), LedgerError> {
    let non_empty = |key: &str| env(key).filter(|v| !v.is_empty()).map(PathBuf::from);
    let (path, source) = if let Some(path) = non_empty("TDD_LEDGER_HOME") {
        (path, "TDD_LEDGER_HOME")
    } else if let Some(path) = non_empty("XDG_DATA_HOME") {
        (path.join("tdd"), "XDG_DATA_HOME")
    } else if let Some(path) = non_empty("HOME") {
        (path.join(".local/share/tdd"), "HOME")
    } else {
        return Err(LedgerError::NoHome);
    };
    if !path.is_absolute() {
        return Err(LedgerError::RelativeHome {
            path,
            variable: source,
        });
    }
    Ok((path, source))
}

/// A stable, readable directory name for a repository: `<name>-<hash prefix>`.
pub fn repository_key(common_dir: &Path) -> String {
    let digest = hex::encode(sha2::Sha256::digest(
        common_dir.as_os_str().as_encoded_bytes(),
    ));
    let base = if common_dir.file_name().is_some_and(|n| n == ".git") {
        common_dir.parent().unwrap_or(common_dir)
    } else {
        common_dir
    };
    let name: String = base
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "{}-{}",
        if name.is_empty() { "repo" } else { &name },
        &digest[..16]
    )
}

/// Refuses a home that lies inside any git work tree, so no agent can reach the ledger by path.
fn refuse_inside_work_tree(home: &Path) -> Result<(), LedgerError> {
    let mut probe = home;
    while !probe.exists() {
        match probe.parent() {
            Some(parent) => probe = parent,
            None => return Ok(()),
        }
    }
    match crate::git::discover(probe) {
        Some(found) => Err(LedgerError::HomeInsideWorkTree {
            home: home.to_path_buf(),
            work_tree: found.toplevel,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        Git::new(dir.path())
            .output(["init", "-q"])
            .expect("git init");
        dir
    }

    #[test]
    fn tdd_ledger_home_is_honoured() {
        let repo = repo();
        let home = tempfile::tempdir().expect("tempdir");
        let home_path = home.path().to_path_buf();
        let loc = LedgerLocation::resolve_with(repo.path(), |k| {
            (k == "TDD_LEDGER_HOME").then(|| home_path.clone().into_os_string())
        })
        .expect("resolves");
        assert!(loc.database.starts_with(home.path()));
        assert_eq!(loc.home_source, "TDD_LEDGER_HOME");
    }

    #[test]
    fn xdg_then_home_are_fallbacks() {
        let repo = repo();
        let loc = LedgerLocation::resolve_with(repo.path(), |k| match k {
            "HOME" => Some("/nonexistent-home".into()),
            _ => None,
        })
        .expect("resolves");
        assert_eq!(
            loc.home,
            PathBuf::from("/nonexistent-home/.local/share/tdd")
        );
        let loc = LedgerLocation::resolve_with(repo.path(), |k| match k {
            "XDG_DATA_HOME" => Some("/nonexistent-xdg".into()),
            "HOME" => Some("/nonexistent-home".into()),
            _ => None,
        })
        .expect("resolves");
        assert_eq!(loc.home, PathBuf::from("/nonexistent-xdg/tdd"));
    }

    #[test]
    fn a_home_inside_a_work_tree_is_refused() {
        let repo = repo();
        let inside = repo.path().join("ledger-here");
        let err = LedgerLocation::resolve_with(repo.path(), |k| {
            (k == "TDD_LEDGER_HOME").then(|| inside.clone().into_os_string())
        })
        .expect_err("refused");
        assert!(
            matches!(err, LedgerError::HomeInsideWorkTree { .. }),
            "{err:?}"
        );
    }

    #[test]
    fn worktrees_of_one_repository_share_a_key() {
        let repo = repo();
        let git = Git::new(repo.path());
        std::fs::write(repo.path().join("f"), "x").expect("write");
        git.output(["add", "f"]).expect("add");
        git.output([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "c",
        ])
        .expect("commit");
        let other = tempfile::tempdir().expect("tempdir");
        let wt = other.path().join("wt");
        git.output([
            std::ffi::OsStr::new("worktree"),
            "add".as_ref(),
            "-q".as_ref(),
            wt.as_os_str(),
        ])
        .expect("worktree add");
        let env =
            |k: &str| (k == "TDD_LEDGER_HOME").then(|| OsString::from("/tmp/tdd-ledger-test"));
        let a = LedgerLocation::resolve_with(repo.path(), env).expect("main");
        let b = LedgerLocation::resolve_with(&wt, env).expect("worktree");
        assert_eq!(a.database, b.database);
    }
}
