//! Sensitivity: a test must be able to fail.
//!
//! The automatic check at GREEN: with the cycle's implementation diff reversed,
//! the target must fail, or the test does not test the change. The manual check
//! at SENSITIVITY_REQUIRED (pins, red-first violations) is judged from recorded
//! `tdd test` runs and a byte-exact restore.
//!
//! The check runs in a scratch `git worktree` detached at the RED commit. The
//! test files there are the ones GREEN sees (tests are locked after RED), and
//! the implementation is the one before GREEN: exactly "the GREEN tree with
//! this cycle's implementation diff reversed". The user's work tree is not
//! touched.

use std::path::Path;
use std::path::PathBuf;

use serde_json::json;

use super::Progress;
use super::RunError;
use super::advance::AdvanceOutcome;
use super::advance::Ctx;
use super::gates::Refused;
use super::phase::Phase;
use super::phase::Verb;
use crate::git::Git;
use crate::git::GitError;
use crate::ledger::Ledger;
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

impl super::Engine {
    /// The manual check of a passed-on-arrival target: since the phase began, `tdd test` must
    /// have seen every target fail, and the tree must now be the phase's snapshot byte for
    /// byte, with the targets passing again.
    pub(super) fn manual_sensitivity(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        cycle: &super::state::CycleState,
        outcome: &mut AdvanceOutcome,
        progress: &dyn Progress,
    ) -> Result<(), RunError> {
        let unverified: Vec<String> = ctx
            .planned
            .tests
            .iter()
            .map(|t| ctx.qualified(t))
            .filter(|t| !cycle.failed_in_phase.contains(t))
            .collect();
        if !unverified.is_empty() {
            let detail = format!(
                "break the behaviour, run `tdd test` on {} and see it fail, restore the code exactly, then advance",
                unverified.join(", ")
            );
            return self.refuse(
                ledger,
                ctx,
                outcome,
                Refused {
                    reason: "sensitivity_unverified",
                    verb: Verb::RunSensitivityCheck,
                    detail,
                },
            );
        }
        if ctx.now.tree != ctx.base.tree {
            let changed: Vec<String> = ctx
                .base
                .changes_to(&self.work_tree, &ctx.now)?
                .into_iter()
                .map(|c| c.path)
                .collect();
            let detail = format!(
                "the tree is not restored byte for byte; changed: {}",
                changed.join(", ")
            );
            return self.refuse(
                ledger,
                ctx,
                outcome,
                Refused {
                    reason: "restore_mismatch",
                    verb: Verb::RunSensitivityCheck,
                    detail,
                },
            );
        }
        for test in &ctx.targets {
            let name = ctx.project_of(test);
            let project = self.project(&name)?;
            progress.event(
                "target_run",
                json!({ "target": test, "phase": ctx.phase }),
                &format!("running target {test}..."),
            );
            let (observation, verdict) =
                observe_target(adapter_for(project.config.adapter).as_ref(), &project, test)?;
            outcome.observations.push(observation);
            if verdict.status != crate::observe::TargetStatus::Passed {
                let detail = format!(
                    "{test} must pass again after the restore: {}",
                    verdict.detail.unwrap_or_default()
                );
                return self.refuse(
                    ledger,
                    ctx,
                    outcome,
                    Refused {
                        reason: "target_failing",
                        verb: Verb::RunSensitivityCheck,
                        detail,
                    },
                );
            }
        }
        self.commit_and_move(ledger, ctx, outcome, |_| false, "", Phase::AwaitingRefactor)
    }

    /// Every target must fail with the cycle's implementation reversed (the RED commit).
    pub(super) fn sensitivity(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        progress: &dyn Progress,
    ) -> Result<Option<Refused>, RunError> {
        for test in &ctx.targets {
            let name = ctx.project_of(test);
            let project = self.project(&name)?;
            progress.event(
                "sensitivity_check",
                json!({ "target": test }),
                &format!("sensitivity: running {test} without the implementation..."),
            );
            let result = super::sensitivity::check_at(
                &self.work_tree,
                "HEAD",
                &project,
                test,
                &self.location.dir.join("sensitivity"),
            )
            .map_err(|e| match e {
                super::sensitivity::SensitivityError::Git(g) => RunError::Git(g),
                super::sensitivity::SensitivityError::Observe(o) => RunError::Observe(o),
                super::sensitivity::SensitivityError::Temp(source) => RunError::Io {
                    what: "creating a scratch worktree".into(),
                    source,
                },
            })?;
            let sensitive = result.sensitive();
            let status = result.verdict.status;
            outcome.observations.push(result.observation);
            if status == crate::observe::TargetStatus::RunnerError {
                let detail = result.verdict.detail.unwrap_or_default();
                return Ok(Some(Refused {
                    reason: "runner_error",
                    verb: Verb::ResolveBlocker,
                    detail: format!(
                        "the sensitivity run of {test} could not be observed: {detail}"
                    ),
                }));
            }
            if !sensitive {
                ledger.append(
                    Some(&ctx.state.run_id),
                    "insensitive_test",
                    &json!({ "n": ctx.planned.n, "target": test }),
                )?;
                return Ok(Some(Refused {
                    reason: "insensitive_test",
                    verb: Verb::RollbackToRed,
                    detail: format!(
                        "{test} still passes with this cycle's implementation reversed: it does not test the change"
                    ),
                }));
            }
        }
        Ok(None)
    }
}
