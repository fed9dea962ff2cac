//! The configuration chain above a checkout: files a runner reads from the directories
//! above the tree it runs in (pytest's configuration and conftest files, cargo's
//! configuration, Go's workspace, Node's manifests and modules, Python's start-up
//! hooks). What was there at `run start` is the user's setup; anything that appears,
//! goes or changes there afterwards could change a deciding run without being in the
//! commit judged, so it refuses the run instead.

use std::path::Path;
use std::path::PathBuf;

use serde::Deserialize;
use serde::Serialize;

/// The names looked for in every directory above a checkout, and in the toolchains'
/// homes: each changes what a runner loads when found there.
pub const NAMES: &[&str] = &[
    "pytest.toml",
    ".pytest.toml",
    "pytest.ini",
    ".pytest.ini",
    "pyproject.toml",
    "tox.ini",
    "setup.cfg",
    "conftest.py",
    "sitecustomize.py",
    "usercustomize.py",
    ".cargo/config",
    ".cargo/config.toml",
    "go.work",
    "go.mod",
    "package.json",
    "node_modules",
    ".npmrc",
    "tsconfig.json",
    "babel.config.js",
    ".babelrc",
    "vitest.config.ts",
    "vitest.config.js",
    "jest.config.js",
    ".mocharc.json",
    ".mocharc.yml",
    ".mocharc.js",
];

/// One entry of the chain: a path that exists, and what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainEntry {
    /// The file or directory.
    pub path: PathBuf,
    /// `sha256:<hex>` of a regular file's bytes, `directory`, `link:<target>`, or
    /// `special` (a named pipe, a socket, a device: never opened).
    pub content: String,
}

/// The files in the captured home a runner reads its user configuration from: Go's
/// (`go env -w` writes `GOFLAGS`, `GOTOOLCHAIN`, `GOEXPERIMENT` there) and npm's (which
/// can hand every script a `node-options`); and the global folders Node's `require`
/// searches last (`~/.node_modules`, `~/.node_libraries`), where a package no manifest
/// names would be found.
pub const HOME_NAMES: &[&str] = &[
    ".config/go/env",
    ".npmrc",
    ".node_modules",
    ".node_libraries",
];

/// Every entry of [`NAMES`] in the directories above `tree` (not in `tree` itself,
/// whose files are the commit's), `config`/`config.toml` in `cargo_home` and each of
/// [`HOME_NAMES`] in `home`, in a stable order.
pub(crate) fn scan(tree: &Path, cargo_home: Option<&Path>, home: Option<&Path>) -> Vec<ChainEntry> {
    let mut paths: Vec<PathBuf> = tree
        .ancestors()
        .skip(1)
        .flat_map(|dir| NAMES.iter().map(move |name| dir.join(name)))
        .collect();
    if let Some(home) = cargo_home {
        paths.extend(["config", "config.toml"].iter().map(|n| home.join(n)));
    }
    if let Some(home) = home {
        paths.extend(HOME_NAMES.iter().map(|n| home.join(n)));
    }
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter_map(|path| describe(&path).map(|content| ChainEntry { path, content }))
        .collect()
}

/// What `path` is, looked at without following a link and without opening anything
/// but a regular file; `None` when nothing is there.
fn describe(path: &Path) -> Option<String> {
    let meta = path.symlink_metadata().ok()?;
    let kind = meta.file_type();
    Some(if kind.is_symlink() {
        let target = std::fs::read_link(path).unwrap_or_default();
        format!("link:{}", target.display())
    } else if kind.is_dir() {
        "directory".to_string()
    } else if kind.is_file() {
        match super::hash_file(path) {
            Ok(sha) => format!("sha256:{sha}"),
            Err(e) => format!("unreadable: {e}"),
        }
    } else {
        "special".to_string()
    })
}

/// The first difference between the chain `was` and the chain `now`: the path, what it
/// was and what it is (`absent` for nothing there).
pub(crate) fn first_change(
    was: &[ChainEntry],
    now: &[ChainEntry],
) -> Option<(PathBuf, String, String)> {
    let content = |entries: &[ChainEntry], path: &Path| {
        entries
            .iter()
            .find(|e| e.path == path)
            .map_or_else(|| "absent".to_string(), |e| e.content.clone())
    };
    was.iter()
        .chain(now)
        .map(|e| e.path.as_path())
        .find(|path| content(was, path) != content(now, path))
        .map(|path| (path.to_path_buf(), content(was, path), content(now, path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_holds_what_is_above_the_tree_and_sees_any_change() {
        let dir = tempfile::tempdir().expect("dir");
        let tree = dir.path().join("a/b/tree");
        std::fs::create_dir_all(&tree).expect("tree");
        // The tree's own files are the commit's, not the chain's.
        std::fs::write(tree.join("pytest.ini"), "[pytest]\n").expect("own");
        std::fs::write(dir.path().join("a/pyproject.toml"), "[tool]\n").expect("above");
        let was = scan(&tree, None, None);
        assert_eq!(was.len(), 1, "{was:?}");
        assert!(was[0].content.starts_with("sha256:"));
        assert_eq!(first_change(&was, &scan(&tree, None, None)), None);
        // One appears higher up.
        std::fs::create_dir_all(dir.path().join("a/b/.cargo")).expect("cargo");
        std::fs::write(dir.path().join("a/b/.cargo/config.toml"), "[env]\n").expect("cfg");
        let (path, before, after) = first_change(&was, &scan(&tree, None, None)).expect("seen");
        assert!(path.ends_with("a/b/.cargo/config.toml"));
        assert_eq!((before.as_str(), &after[..7]), ("absent", "sha256:"));
        std::fs::remove_file(dir.path().join("a/b/.cargo/config.toml")).expect("rm");
        // One is rewritten, or becomes a pipe: never opened.
        std::fs::write(dir.path().join("a/pyproject.toml"), "[tool.pytest]\n").expect("edit");
        assert!(first_change(&was, &scan(&tree, None, None)).is_some());
        std::fs::remove_file(dir.path().join("a/pyproject.toml")).expect("rm");
        let made = std::process::Command::new("mkfifo")
            .arg(dir.path().join("a/pyproject.toml"))
            .status()
            .expect("mkfifo");
        assert!(made.success());
        let now = scan(&tree, None, None);
        assert_eq!(now[0].content, "special");
    }

    #[test]
    fn node_s_global_folders_in_the_home_are_part_of_the_chain() {
        let dir = tempfile::tempdir().expect("dir");
        let tree = dir.path().join("tree");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&tree).expect("tree");
        std::fs::create_dir_all(&home).expect("home");
        let was = scan(&tree, None, Some(&home));
        std::fs::create_dir_all(home.join(".node_modules/subimpl")).expect("planted");
        let (path, before, after) =
            first_change(&was, &scan(&tree, None, Some(&home))).expect("seen");
        assert!(path.ends_with(".node_modules"), "{path:?}");
        assert_eq!((before.as_str(), after.as_str()), ("absent", "directory"));
    }
}
