//! What each leaf may touch, from its role and the `[sandbox]` table.
//!
//! Leaves are confined unless `[sandbox] enabled = false`. Every confined leaf reads and runs what the machine has, except the credential
//! files below and `[sandbox] deny_read`. It writes only:
//! - a developer: its work tree, but not the git directory in it (`.git`, a directory
//!   when working in place, a pointer file in the conductor's worktree, whose git
//!   directory lives outside and is out of reach);
//! - a verifier: its scratch worktree (builds and caches its tests write), never the
//!   developer's work tree;
//! - a planner: the directory of the plan file;
//! - all: its own files directory, which holds its private home (with the CLI's own
//!   state, see `tdd_leaves::home`) and its private `TMPDIR`, and `[sandbox] write`.
//!   Nothing in the user's home directory is writable: a grant there would be a
//!   channel from one leaf to the next. The ledger directory is out of reach
//!   (read and write) but for the leaf's own files; `tdd test`, `tdd status`,
//!   `tdd verdict` and `tdd stop` inside a leaf go through the conductor
//!   ([`crate::relay`]).

use std::path::Path;
use std::path::PathBuf;

use tdd_engine::config::SandboxConfig;
use tdd_prompts::Role;
use tdd_sandbox::Policy;
use tdd_supervisor::Sandbox;

/// Credential files no leaf may read, relative to the home directory.
pub use tdd_sandbox::CREDENTIALS;

/// Where a leaf works, for its policy.
pub struct Place<'a> {
    /// The leaf's role.
    pub role: Role,
    /// The leaf's working directory (the developer's work tree, the verifier's
    /// scratch worktree).
    pub workdir: &'a Path,
    /// The plan file, for a planner.
    pub plan: &'a Path,
    /// The repository's ledger directory.
    pub ledger_dir: &'a Path,
    /// The caller's home directory.
    pub home: Option<&'a Path>,
    /// Whether the work tree is the conductor's own worktree (its git directory is
    /// elsewhere) rather than the user's checkout.
    pub own_worktree: bool,
    /// The developers' work tree, which a verifier (working in its scratch worktree)
    /// must not read: none of its files, tracked, untracked or ignored, only its `.git`,
    /// which the scratch worktree's git needs.
    pub work_tree: &'a Path,
}

/// Every entry at the top of `tree` but `.git`, as paths.
fn tree_entries_but_git(tree: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(tree) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name() != ".git")
        .map(|e| e.path())
        .collect()
}

/// The confinement `config` asks for a leaf at `place`.
pub fn for_leaf(config: &SandboxConfig, place: &Place<'_>) -> Sandbox {
    if !config.enabled {
        return Sandbox::Disabled;
    }
    let in_home = |rel: &str| -> Option<PathBuf> {
        match rel.strip_prefix("~/") {
            Some(rest) => place.home.map(|h| h.join(rest)),
            None => Some(PathBuf::from(rel)),
        }
    };
    let mut policy = Policy::default();
    match place.role {
        Role::Developer => {
            policy.write.push(place.workdir.to_path_buf());
            // In place, `.git` is the repository itself; in the conductor's worktree it
            // is a pointer file whose git directory is outside and out of reach anyway.
            if !place.own_worktree {
                policy.deny_write.push(place.workdir.join(".git"));
            }
        }
        Role::Verifier => {
            // A scratch worktree made for this verifier alone: its tests build there.
            // Its git directory lives in the repository, out of reach.
            policy.write.push(place.workdir.to_path_buf());
            // The developers' tree is not the commit judged: what a developer left there
            // (an ignored note, a build output) must not reach the verifier.
            if place.work_tree != place.workdir {
                policy
                    .deny_read
                    .extend(tree_entries_but_git(place.work_tree));
            }
        }
        Role::Planner => {
            let dir = place.plan.parent().unwrap_or(place.workdir);
            policy.write.push(place.workdir.join(dir));
        }
    }
    // The ledger and every run's files are out of reach, read or write (a blind
    // verifier must not read a developer's output); `tdd test`, `tdd status` and
    // `tdd verdict` reach the engine through the conductor's relay.
    policy.deny_read.push(place.ledger_dir.to_path_buf());
    policy
        .write
        .extend(config.write.iter().filter_map(|p| in_home(p)));
    if let Some(home) = place.home {
        policy
            .deny_read
            .extend(CREDENTIALS.iter().map(|rel| home.join(rel)));
    }
    policy
        .deny_read
        .extend(config.deny_read.iter().filter_map(|p| in_home(p)));
    policy.write_files = tdd_sandbox::DEVICES.iter().map(PathBuf::from).collect();
    policy.without_landlock = std::env::var_os(tdd_sandbox::NO_LANDLOCK_VAR).is_some();
    // Bounded like the suites: processes, memory, and the private TMPDIR the leaf's
    // runtime sets (`private_tmp`, in its own files).
    policy.limits = config.limits();
    Sandbox::Confined {
        policy,
        require: config.require,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place<'a>(role: Role, home: &'a Path) -> Place<'a> {
        Place {
            role,
            workdir: Path::new("/w/repo"),
            plan: Path::new(".tdd/issue-1.md"),
            ledger_dir: Path::new("/l/repos/r"),
            home: Some(home),
            own_worktree: false,
            work_tree: Path::new("/w/repo"),
        }
    }

    #[test]
    fn each_role_writes_its_own_place_and_nobody_reads_credentials() {
        let on = SandboxConfig {
            enabled: true,
            deny_read: vec!["~/secrets".into()],
            write: vec!["~/.cache/pip".into()],
            ..SandboxConfig::default()
        };
        let home = Path::new("/h");
        let Sandbox::Confined { policy, require } = for_leaf(&on, &place(Role::Developer, home))
        else {
            panic!("confined")
        };
        assert!(!require);
        assert!(policy.write.contains(&PathBuf::from("/w/repo")));
        assert!(policy.deny_write.contains(&PathBuf::from("/w/repo/.git")));
        // No CLI state in the user's home is writable: each leaf has its own.
        assert!(policy.write.iter().all(|p| !p.starts_with("/h/.claude")));
        assert!(!policy.write.contains(&PathBuf::from("/h/.npm")));
        assert!(policy.write.contains(&PathBuf::from("/h/.cache/pip")));
        assert!(
            policy
                .deny_read
                .contains(&PathBuf::from("/h/.git-credentials"))
        );
        assert!(policy.deny_read.contains(&PathBuf::from("/h/.config/gh")));
        assert!(policy.deny_read.contains(&PathBuf::from("/h/secrets")));
        let Sandbox::Confined { policy, .. } = for_leaf(&on, &place(Role::Planner, home)) else {
            panic!("confined")
        };
        assert!(policy.write.contains(&PathBuf::from("/w/repo/.tdd")));
        assert!(!policy.write.contains(&PathBuf::from("/w/repo")));
        // Confined unless turned off.
        assert!(matches!(
            for_leaf(&SandboxConfig::default(), &place(Role::Developer, home)),
            Sandbox::Confined { .. }
        ));
        let off = SandboxConfig {
            enabled: false,
            ..SandboxConfig::default()
        };
        assert_eq!(
            for_leaf(&off, &place(Role::Developer, home)),
            Sandbox::Disabled
        );
    }
}
