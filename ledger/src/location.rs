//! Where a repository's ledger lives: outside every work tree, one per repository.

use std::ffi::OsString;
use std::path::Path;
use std::path::PathBuf;

use sha2::Digest;

use super::LedgerError;

/// The two facts about git that place a ledger, answered by the caller.
///
/// The ledger runs no git itself: the engine answers through its git wrapper
/// (`tdd_engine::git::GitProbe`), which scrubs the variables that would redirect git.
pub trait RepositoryProbe {
    /// The canonical git common directory of the repository containing `dir`, which all
    /// of that repository's work trees share.
    ///
    /// Must fail with [`LedgerError::NotARepository`] when `dir` is in no repository, and
    /// with [`LedgerError::Git`] when git itself failed.
    fn common_dir(&self, dir: &Path) -> Result<PathBuf, LedgerError>;

    /// The top level of the git work tree that contains `path`, if any.
    fn work_tree_containing(&self, path: &Path) -> Option<PathBuf>;
}

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
    ///
    /// Guarantees: the home comes from `TDD_LEDGER_HOME`, `XDG_DATA_HOME` or `HOME` (the
    /// first non-empty one) and is absolute; it is refused when it lies inside a git work
    /// tree; nothing is created.
    pub fn resolve(dir: &Path, probe: &dyn RepositoryProbe) -> Result<LedgerLocation, LedgerError> {
        LedgerLocation::resolve_with(dir, probe, |key| std::env::var_os(key))
    }

    /// The ledger home from the process environment alone (no repository needed):
    /// `TDD_LEDGER_HOME`, `XDG_DATA_HOME/tdd` or `HOME/.local/share/tdd`, absolute.
    pub fn home_from_env() -> Result<PathBuf, LedgerError> {
        Ok(ledger_home(&|key: &str| std::env::var_os(key))?.0)
    }

    /// Resolves the ledger with `env` standing in for the process environment.
    ///
    /// Problems are reported in a fixed order: the home first, then the repository, then a
    /// home inside a work tree.
    pub fn resolve_with(
        dir: &Path,
        probe: &dyn RepositoryProbe,
        env: impl Fn(&str) -> Option<OsString>,
    ) -> Result<LedgerLocation, LedgerError> {
        let (home, home_source) = ledger_home(&env)?;
        let repository = probe.common_dir(dir)?;
        refuse_inside_work_tree(&home, probe)?;
        let dir = home.join("repos").join(repository_key(&repository));
        // The home may be a link the user made (to another disk, say); what tdd makes
        // in it may not.
        if let Ok(meta) = std::fs::metadata(&home)
            && !meta.is_dir()
        {
            return Err(LedgerError::StateNotADirectory {
                path: home,
                found: super::kind_in_words(meta.file_type()),
            });
        }
        let own = [home.join("repos"), dir.clone()]
            .into_iter()
            .chain(OWN_DIRS.iter().map(|name| dir.join(name)));
        for at in own {
            refuse_replaced(&at)?;
        }
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

/// The directories tdd keeps in a repository's directory and writes into through their
/// path: the leaves' records, the reports, the conducts' files, the work trees' locks.
const OWN_DIRS: [&str; 4] = ["leaves", "reports", "conduct", "locks"];

/// Refuses `dir`, a directory tdd keeps in the ledger home, when something else stands
/// there (looked at without following a link): a link would lead every read and write
/// elsewhere. Absent is fine: it is made when first written.
fn refuse_replaced(dir: &Path) -> Result<(), LedgerError> {
    let Ok(meta) = dir.symlink_metadata() else {
        return Ok(());
    };
    if meta.is_dir() {
        return Ok(());
    }
    Err(LedgerError::StateNotADirectory {
        path: dir.to_path_buf(),
        found: super::kind_in_words(meta.file_type()),
    })
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
fn refuse_inside_work_tree(home: &Path, probe: &dyn RepositoryProbe) -> Result<(), LedgerError> {
    let mut existing = home;
    while !existing.exists() {
        match existing.parent() {
            Some(parent) => existing = parent,
            None => return Ok(()),
        }
    }
    match probe.work_tree_containing(existing) {
        Some(work_tree) => Err(LedgerError::HomeInsideWorkTree {
            home: home.to_path_buf(),
            work_tree,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A repository at `/repo` (common dir `/repo/.git`) with a second work tree at
    /// `/elsewhere/wt`, whose work trees contain whatever lies under them.
    struct Fake;

    impl RepositoryProbe for Fake {
        fn common_dir(&self, dir: &Path) -> Result<PathBuf, LedgerError> {
            if dir.starts_with("/repo") || dir.starts_with("/elsewhere/wt") {
                Ok(PathBuf::from("/repo/.git"))
            } else {
                Err(LedgerError::NotARepository(dir.to_path_buf()))
            }
        }

        fn work_tree_containing(&self, path: &Path) -> Option<PathBuf> {
            ["/repo", "/elsewhere/wt"]
                .into_iter()
                .map(PathBuf::from)
                .find(|tree| path.starts_with(tree))
        }
    }

    #[test]
    fn tdd_ledger_home_is_honoured() {
        let home = tempfile::tempdir().expect("tempdir");
        let home_path = home.path().to_path_buf();
        let loc = LedgerLocation::resolve_with(Path::new("/repo"), &Fake, |k| {
            (k == "TDD_LEDGER_HOME").then(|| home_path.clone().into_os_string())
        })
        .expect("resolves");
        assert!(loc.database.starts_with(home.path()));
        assert_eq!(loc.home_source, "TDD_LEDGER_HOME");
        assert_eq!(loc.repository, PathBuf::from("/repo/.git"));
    }

    #[test]
    fn xdg_then_home_are_fallbacks() {
        let loc = LedgerLocation::resolve_with(Path::new("/repo"), &Fake, |k| match k {
            "HOME" => Some("/nonexistent-home".into()),
            _ => None,
        })
        .expect("resolves");
        assert_eq!(
            loc.home,
            PathBuf::from("/nonexistent-home/.local/share/tdd")
        );
        let loc = LedgerLocation::resolve_with(Path::new("/repo"), &Fake, |k| match k {
            "XDG_DATA_HOME" => Some("/nonexistent-xdg".into()),
            "HOME" => Some("/nonexistent-home".into()),
            _ => None,
        })
        .expect("resolves");
        assert_eq!(loc.home, PathBuf::from("/nonexistent-xdg/tdd"));
    }

    #[test]
    fn a_home_inside_a_work_tree_is_refused() {
        // `/repo/ledger-here` does not exist: the nearest existing ancestor is probed.
        let err = LedgerLocation::resolve_with(Path::new("/repo"), &NearestExisting, |k| {
            (k == "TDD_LEDGER_HOME").then(|| OsString::from("/tmp/tdd-inside/ledger-here"))
        })
        .expect_err("refused");
        assert!(
            matches!(err, LedgerError::HomeInsideWorkTree { ref work_tree, .. } if work_tree == Path::new("/tmp")),
            "{err:?}"
        );
    }

    /// Says `/tmp` is a work tree, and records that it was only asked about paths that
    /// exist.
    struct NearestExisting;

    impl RepositoryProbe for NearestExisting {
        fn common_dir(&self, _dir: &Path) -> Result<PathBuf, LedgerError> {
            Ok(PathBuf::from("/repo/.git"))
        }

        fn work_tree_containing(&self, path: &Path) -> Option<PathBuf> {
            assert!(path.exists(), "asked about {}", path.display());
            path.starts_with("/tmp").then(|| PathBuf::from("/tmp"))
        }
    }

    #[test]
    fn the_home_is_checked_before_the_repository() {
        let err = LedgerLocation::resolve_with(Path::new("/nowhere"), &Fake, |_| None)
            .expect_err("no home");
        assert!(matches!(err, LedgerError::NoHome), "{err:?}");
        let err = LedgerLocation::resolve_with(Path::new("/nowhere"), &Fake, |k| {
            (k == "TDD_LEDGER_HOME").then(|| OsString::from("/tmp/tdd-ledger-test"))
        })
        .expect_err("not a repository");
        assert!(matches!(err, LedgerError::NotARepository(_)), "{err:?}");
    }

    #[test]
    fn worktrees_of_one_repository_share_a_key() {
        let env =
            |k: &str| (k == "TDD_LEDGER_HOME").then(|| OsString::from("/tmp/tdd-ledger-test"));
        let a = LedgerLocation::resolve_with(Path::new("/repo"), &Fake, env).expect("main");
        let b =
            LedgerLocation::resolve_with(Path::new("/elsewhere/wt"), &Fake, env).expect("worktree");
        assert_eq!(a.database, b.database);
    }
}
