//! The confinement of every runner the engine starts: baselines, RED's runs, `tdd test`,
//! and the deciding runs in the clean room. Project code is the agent's, so it runs with
//! less than the engine's rights, by hand as inside `tdd conduct`.
//!
//! A runner writes only the place its run is in (the live work tree but its `.git`, or
//! the clean room's checkout and build directory), its own scratch directory (also its
//! `TMPDIR`, added by `tdd-observe`), its toolchain's build output, and
//! `[sandbox] write`. The build output (Go's `GOCACHE`, cargo's `CARGO_TARGET_DIR`) is
//! never a directory the user shares with other projects: project code could plant
//! compiled objects there that a later run trusts (Go's cache does not re-hash what it
//! reads back), and a runner in one work tree could reach one in another. Runs in the
//! live work tree build into a directory of that work tree's own (a relative
//! `CARGO_TARGET_DIR` already is); deciding runs into the clean room's build directory.
//! It
//! reads no credential file, nothing of the ledger directory (the ledger, other leaves'
//! files) but its checkout, and nothing `[sandbox] deny_read` names.
//! `[sandbox] enabled = false` turns it off; where the kernel has no Landlock the
//! level recorded with each invocation says `none`.

use std::path::Path;
use std::path::PathBuf;

use super::Session;
use crate::config::SandboxConfig;
use crate::observe::Project;
use crate::observe::config::AdapterKind;
use crate::observe::sandbox::Policy;

/// Where a run of project code happens.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RunsIn<'a> {
    /// The live work tree: `tdd test`, RED's runs, baselines. Its `.git` stays read-only.
    Live,
    /// The clean room's checkout `tree` and its build directory `build`.
    CleanRoom {
        /// The checkout.
        tree: &'a Path,
        /// Build output kept across resets.
        build: &'a Path,
    },
}

impl Session {
    /// `project` with its runners confined for a run in `place`, unless `[sandbox]`
    /// turns confinement off.
    pub(crate) fn confine(&self, mut project: Project, place: RunsIn<'_>) -> Project {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let (mut write, deny_write) = match place {
            RunsIn::Live => (
                vec![self.work_tree.clone()],
                git_dirs_within(&self.work_tree),
            ),
            RunsIn::CleanRoom { tree, build } => {
                (vec![tree.to_path_buf(), build.to_path_buf()], Vec::new())
            }
        };
        // The toolchain's own build output, for the projects whose toolchain writes it:
        // a directory of this work tree's own, or of the clean room's.
        let own = |name: &str| match place {
            RunsIn::Live => self.clean_room().live_build_dir(name),
            RunsIn::CleanRoom { build, .. } => build.join(name),
        };
        let redirect = match project.config.adapter {
            AdapterKind::Go => Some(("GOCACHE", own("go-build"))),
            AdapterKind::Cargo => {
                let declared = project.config.env.get("CARGO_TARGET_DIR");
                let inside = declared.is_some_and(|d| Path::new(d).is_relative());
                (!inside).then(|| {
                    let name = format!("{}-cargo-target", project.name);
                    ("CARGO_TARGET_DIR", own(&name))
                })
            }
            _ => None,
        };
        if let Some((var, dir)) = redirect {
            // The toolchain's build directory must be a real directory of tdd's: a link
            // in its place (to a directory outside) is removed, never built into.
            let _ = super::cleanroom::real_dir(&dir);
            project
                .config
                .env
                .insert(var.to_string(), dir.display().to_string());
            write.push(dir);
        }
        // Landlock grants only what exists: the build directories are made first, as
        // their toolchain would make them.
        for dir in &write {
            let _ = std::fs::create_dir_all(dir);
        }
        match runner_policy(
            &self.config.sandbox,
            home.as_deref(),
            &self.location.dir,
            write,
            deny_write,
        ) {
            Some(policy) => project.confined(policy),
            None => project,
        }
    }
}

/// What of git's own lies in `work_tree` and must stay read-only to a run there: its
/// `.git`, and the git directory and common directory it leads to when they are
/// elsewhere in the tree (`git init --separate-git-dir=<tree>/.gitdata` leaves a
/// `.git` file naming them).
fn git_dirs_within(work_tree: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![work_tree.join(".git")];
    let Some(found) = crate::git::discover(work_tree) else {
        return dirs;
    };
    let tree = work_tree
        .canonicalize()
        .unwrap_or_else(|_| work_tree.to_path_buf());
    for dir in [found.git_dir, found.common_dir] {
        let dir = dir.canonicalize().unwrap_or(dir);
        // Named under the work tree as the runner's grants name it.
        if let Ok(inside) = dir.strip_prefix(&tree)
            && !inside.as_os_str().is_empty()
        {
            let dir = work_tree.join(inside);
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

/// The policy of a runner that writes `write` (but not `deny_write`), or `None` when
/// `config` turns confinement off.
pub(crate) fn runner_policy(
    config: &SandboxConfig,
    home: Option<&Path>,
    ledger_dir: &Path,
    mut write: Vec<PathBuf>,
    deny_write: Vec<PathBuf>,
) -> Option<Policy> {
    if !config.enabled {
        return None;
    }
    let in_home = |rel: &str| -> Option<PathBuf> {
        match rel.strip_prefix("~/") {
            Some(rest) => home.map(|h| h.join(rest)),
            None => Some(PathBuf::from(rel)),
        }
    };
    write.extend(config.write.iter().filter_map(|p| in_home(p)));
    let mut deny_read = vec![ledger_dir.to_path_buf()];
    if let Some(home) = home {
        deny_read.extend(
            crate::observe::sandbox::CREDENTIALS
                .iter()
                .map(|rel| home.join(rel)),
        );
    }
    deny_read.extend(config.deny_read.iter().filter_map(|p| in_home(p)));
    Some(Policy {
        write,
        deny_write,
        deny_read,
        write_files: crate::observe::sandbox::DEVICES
            .iter()
            .map(PathBuf::from)
            .collect(),
        without_landlock: std::env::var_os(crate::observe::sandbox::NO_LANDLOCK_VAR).is_some(),
        // Nothing the suite starts outlives it: not a test's daemon, not a `setsid`.
        own_processes: true,
        // Loopback only unless the project says its tests need the network: no
        // listener or connection of test code reaches past its run.
        own_network: !config.network,
        // Bounded: a fork bomb, a runaway allocation or a TMPDIR filled by test code
        // fails that test, not the machine.
        limits: config.limits(),
        // Each run's own TMPDIR is its scratch `tmp`, set per run by the observer.
        private_tmp: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_writes_its_place_and_reads_no_credential_nor_the_ledger() {
        let home = Path::new("/h");
        let config = SandboxConfig {
            deny_read: vec!["~/secrets".into()],
            write: vec!["~/.cache/pip".into()],
            ..SandboxConfig::default()
        };
        let policy = runner_policy(
            &config,
            Some(home),
            Path::new("/l/repos/r"),
            vec![PathBuf::from("/w/repo")],
            vec![PathBuf::from("/w/repo/.git")],
        )
        .expect("confined unless turned off");
        assert!(policy.write.contains(&PathBuf::from("/w/repo")));
        assert!(policy.write.contains(&PathBuf::from("/h/.cache/pip")));
        assert_eq!(policy.deny_write, [PathBuf::from("/w/repo/.git")]);
        for denied in ["/l/repos/r", "/h/.git-credentials", "/h/.ssh", "/h/secrets"] {
            assert!(
                policy.deny_read.contains(&PathBuf::from(denied)),
                "{denied}"
            );
        }
        let off = SandboxConfig {
            enabled: false,
            ..SandboxConfig::default()
        };
        assert!(runner_policy(&off, Some(home), Path::new("/l"), Vec::new(), Vec::new()).is_none());
    }
}
