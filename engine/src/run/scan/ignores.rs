//! Which untracked paths git would ignore: `.gitignore` files from the path's directory
//! up to the root, then `.git/info/exclude`, then the user's `core.excludesFile`.

use std::path::Path;
use std::sync::Arc;

use ignore::Match;
use ignore::gitignore::Gitignore;
use ignore::gitignore::GitignoreBuilder;

/// The ignore rules in force in one directory: its own `.gitignore` (if any) over its
/// parent's rules.
pub(super) struct Rules {
    own: Option<Gitignore>,
    parent: Option<Arc<Rules>>,
}

/// The rules that hold everywhere: `.git/info/exclude` over `core.excludesFile`.
pub(super) struct Base {
    layers: Vec<Gitignore>,
}

fn read(root: &Path, file: &Path) -> Option<Gitignore> {
    if !file.is_file() {
        return None;
    }
    let mut builder = GitignoreBuilder::new(root);
    // A line git cannot parse is skipped by git too; the other lines still hold.
    let _ = builder.add(file);
    builder.build().ok().filter(|g| !g.is_empty())
}

impl Base {
    /// The repository-wide rules of the work tree `root`.
    pub(super) fn new(root: &Path, git_dir: &Path, excludes_file: Option<&Path>) -> Base {
        let layers = [
            Some(git_dir.join("info/exclude")),
            excludes_file.map(Path::to_path_buf),
        ]
        .into_iter()
        .flatten()
        .filter_map(|file| read(root, &file))
        .collect();
        Base { layers }
    }
}

impl Rules {
    /// The rules of the work tree's root directory.
    pub(super) fn root() -> Arc<Rules> {
        Arc::new(Rules {
            own: None,
            parent: None,
        })
    }

    /// The rules of directory `dir` (whose `.gitignore` exists when `has_file`), below
    /// `parent`.
    pub(super) fn child(parent: &Arc<Rules>, dir: &Path, has_file: bool) -> Arc<Rules> {
        let own = if has_file {
            read(dir, &dir.join(".gitignore"))
        } else {
            None
        };
        if own.is_none() {
            return Arc::clone(parent);
        }
        Arc::new(Rules {
            own,
            parent: Some(Arc::clone(parent)),
        })
    }

    /// Whether git would ignore the untracked `path` (absolute, inside the work tree).
    pub(super) fn ignores(&self, base: &Base, path: &Path, is_dir: bool) -> bool {
        let mut rules = Some(self);
        while let Some(level) = rules {
            if let Some(own) = &level.own {
                match own.matched(path, is_dir) {
                    Match::Ignore(_) => return true,
                    Match::Whitelist(_) => return false,
                    Match::None => {}
                }
            }
            rules = level.parent.as_deref();
        }
        for layer in &base.layers {
            match layer.matched(path, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }
}
