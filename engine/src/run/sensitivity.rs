//! The automatic sensitivity check at GREEN: with the cycle's implementation
//! diff reversed, the target must fail, or the test does not test the change.
//!
//! The check runs in a scratch `git worktree` detached at the RED commit. The
//! test files there are the ones GREEN sees (tests are locked after RED), and
//! the implementation is the one before GREEN: exactly "the GREEN tree with
//! this cycle's implementation diff reversed". The user's work tree is not
//! touched.

use std::path::Path;
use std::path::PathBuf;

use crate::git::Git;
use crate::git::GitError;
use crate::observe::Observation;
use crate::observe::ObserveError;
use crate::observe::Project;
use crate::observe::TargetStatus;
use crate::observe::TargetVerdict;
use crate::observe::adapter_for;
use crate::observe::observe_target;

/// A scratch worktree, removed (and pruned) when dropped.
struct Scratch {
    git: Git,
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let path = self.path.display().to_string();
        let _ = self.git.output(["worktree", "remove", "--force", &path]);
        let _ = self.git.output(["worktree", "prune"]);
    }
}

/// What the check saw.
#[derive(Debug, Clone)]
pub struct SensitivityResult {
    /// The target's status with the implementation reversed.
    pub verdict: TargetVerdict,
    /// The run behind it.
    pub observation: Observation,
}

impl SensitivityResult {
    /// Whether the target failed without the implementation, as it must.
    pub fn sensitive(&self) -> bool {
        !matches!(
            self.verdict.status,
            TargetStatus::Passed | TargetStatus::RunnerError
        )
    }
}

/// Errors of the check itself (not of the test).
#[derive(Debug, thiserror::Error)]
pub enum SensitivityError {
    /// git could not make the scratch worktree.
    #[error(transparent)]
    Git(#[from] GitError),
    /// The runner failed to start.
    #[error(transparent)]
    Observe(#[from] ObserveError),
    /// No temporary directory.
    #[error("cannot create a scratch directory: {0}")]
    Temp(std::io::Error),
}

/// Runs `target` of `project` in a scratch worktree at `rev`; `build_cache` is a directory
/// reserved for scratch builds (never the work tree's own build directory).
pub fn check_at(
    work_tree: &Path,
    rev: &str,
    project: &Project,
    target: &str,
    build_cache: &Path,
) -> Result<SensitivityResult, SensitivityError> {
    let git = Git::new(work_tree);
    let dir = tempfile::Builder::new()
        .prefix("tdd-sensitivity-")
        .tempdir()
        .map_err(SensitivityError::Temp)?;
    let path = dir.path().join("tree");
    let path_text = path.display().to_string();
    git.output(["worktree", "add", "--detach", "--quiet", &path_text, rev])?;
    let scratch = Scratch {
        git,
        path,
        _dir: dir,
    };
    let mut config = project.config.clone();
    if config.adapter == crate::config::AdapterKind::Cargo
        && !config.env.contains_key("CARGO_TARGET_DIR")
    {
        // A build directory of its own: sharing the work tree's would let cargo take the
        // scratch build (newer, same artifact names) as fresh for the real tree. Scratch
        // checkouts always have newer sources than this cache, so it only saves dependencies.
        let target_dir = build_cache.join(&project.name).join("cargo-target");
        config
            .env
            .insert("CARGO_TARGET_DIR".into(), target_dir.display().to_string());
    }
    let scratch_project = Project::new(&scratch.path, &project.name, config)?;
    let adapter = adapter_for(scratch_project.config.adapter);
    let (observation, verdict) = observe_target(adapter.as_ref(), &scratch_project, target)?;
    Ok(SensitivityResult {
        verdict,
        observation,
    })
}
