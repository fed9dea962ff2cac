//! The `Conductor`: one issue, driven from plan to draft PR (or a bail, or a stop).

use std::path::Path;
use std::path::PathBuf;

use serde_json::json;
use tdd_engine::config::Config;
use tdd_engine::git::Git;
use tdd_engine::ledger::LedgerLocation;
use tdd_engine::observe::lease::Lease;
use tdd_engine::run::Progress;
use tdd_engine::run::Session;
use tdd_leaves::Leaves;
use tdd_leaves::Provider;
use tdd_prompts::Issue;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::cursor::Begun;
use crate::cursor::Cursor;
use crate::error::ConductError;
use crate::error::Doing;
use crate::error::Halt;
use crate::events::Completed;
use crate::events::ConductStarted;
use crate::events::ConductorEvent;
use crate::events::OrphanLeafEnded;
use crate::events::Resumed;
use crate::events::Stopped;
use crate::forge::Forge;
use crate::forge::ForgeSpec;
use crate::journal::Journal;
use crate::lock::WorktreeLock;
use crate::open::binary_sha256;

/// The run comment's status once every step is done.
const DONE: &str = "done: every step is finished; the draft PR is ready for review";

/// What `tdd conduct` was asked to do.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the issue comes from and progress goes: a local file or a GitHub issue.
    pub forge: ForgeSpec,
    /// The developer and planner provider (else `[conductor] provider`).
    pub provider: Option<String>,
    /// The verifier provider (else `[conductor] verifier_provider`, else the provider).
    pub verifier_provider: Option<String>,
    /// Stop (exit 0, resumable) after this many steps in this invocation.
    pub max_steps: Option<u32>,
    /// The running `tdd` binary (leaves and supervisors are launched through it).
    pub tdd_exe: PathBuf,
    /// What a resume does when the running binary is not the one the run started with.
    pub new_binary: NewBinary,
    /// Where the conductor works.
    pub place: Place,
    /// The command-line parser's check of what a leaf asks the relay to run.
    pub relay_args: crate::relay::ArgsCheck,
    /// The run report's header figures for the top of the draft PR.
    pub pr_figures: crate::report::Figures,
    /// Where a reviewer finds the run report.
    pub report_place: crate::report::ReportPlace,
}

/// What a resume does when the running `tdd` binary is not the one the run started with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NewBinary {
    /// Refuse to resume (`binary_changed`), naming both hashes.
    #[default]
    Refuse,
    /// Go on with the new binary, recording the change (`--accept-new-binary`).
    Accept,
}

/// Where the conductor works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Place {
    /// Where `[conductor] worktree` says (or where an open conduct of the issue already
    /// works).
    #[default]
    AsConfigured,
    /// In the conductor's own `git worktree` (see [`crate::worktree`]) whatever the
    /// configuration says (`--worktree`).
    OwnWorktree,
}

/// How a conduct invocation ended.
#[derive(Debug)]
pub enum Finish {
    /// Every step is done; the draft PR is up to date.
    Completed(Summary),
    /// `--max-steps` steps were done; `tdd conduct` again continues.
    Paused(Summary),
    /// The run bailed (exit 4).
    Bailed(Summary, Bail),
    /// A stop was requested (exit 5).
    Stopped(Summary, String),
}

/// Where the run's records are.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    /// The conduct id.
    pub conduct: String,
    /// The engine run, once started.
    pub run_id: Option<String>,
    /// The issue number.
    pub issue: u64,
    /// The work branch.
    pub branch: String,
    /// Steps done (ticked), and their number.
    pub steps_done: usize,
    /// The number of steps planned.
    pub steps: usize,
    /// The run's directory (thread.md, pr.md).
    pub dir: PathBuf,
    /// The draft PR: its file (local forge) or its URL (empty before it is opened).
    pub pr: String,
    /// The conductor's own git worktree, where the branch and its commits are, when the
    /// run works in one; `None` when it works in the user's work tree.
    pub worktree: Option<PathBuf>,
}

/// One conduct run of one issue in one work tree.
pub struct Conductor<'p> {
    pub(crate) work_tree: PathBuf,
    pub(crate) config: Config,
    pub(crate) engine: Session,
    pub(crate) location: LedgerLocation,
    pub(crate) leaves: Leaves,
    pub(crate) developer: Box<dyn Provider>,
    pub(crate) verifier: Box<dyn Provider>,
    pub(crate) journal: Journal,
    pub(crate) forge: Box<dyn Forge>,
    pub(crate) issue: Issue,
    pub(crate) branch: String,
    pub(crate) plan_path: String,
    pub(crate) dir: PathBuf,
    pub(crate) options: Options,
    pub(crate) progress: &'p dyn Progress,
    pub(crate) lock: WorktreeLock,
    /// How this invocation stands to the earlier conduct runs of the issue.
    pub(crate) begun: Begun,
    /// This conductor's share of the machine's cores, held until it is dropped.
    pub(crate) _lease: Lease,
    /// What moves while the conductor works; everything else here is fixed at open.
    pub(crate) cursor: Cursor,
    /// Whether `work_tree` is the conductor's own worktree rather than the user's.
    pub(crate) own_worktree: bool,
    /// The engine's door for confined leaves, when `[sandbox]` confines them.
    pub(crate) relay: Option<crate::relay::Relay>,
    /// The CLIs whose untested version was already reported in this process.
    pub(crate) warned_clis: std::cell::RefCell<std::collections::BTreeSet<String>>,
}

impl std::fmt::Debug for Conductor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conductor")
            .field("work_tree", &self.work_tree)
            .field("conduct", &self.journal.conduct())
            .finish()
    }
}

impl<'p> Conductor<'p> {
    /// Runs (or resumes) the issue to the end, a bail, a stop or `--max-steps`.
    pub fn run(self) -> Result<Finish, ConductError> {
        let span = tracing::info_span!(
            "conduct",
            conduct = self.journal.conduct(),
            issue = self.issue.number(),
            run_id = tracing::field::Empty,
        );
        let _entered = span.enter();
        if self.begun == Begun::Finished {
            return self.republish();
        }
        let driven = self.drive();
        if let Some(run_id) = self.cursor.run_id() {
            span.record("run_id", run_id);
        }
        tracing::info!(outcome = driven_outcome(&driven), "conduct ended");
        match driven {
            Ok(paused) => {
                let summary = self.summary();
                if paused {
                    return Ok(Finish::Paused(summary));
                }
                self.journal.record(&ConductorEvent::Completed(Completed {
                    run_id: self.cursor.run_id().map(str::to_string),
                }))?;
                Ok(Finish::Completed(summary))
            }
            Err(Halt::Bail(bail)) => {
                let bail = match self.cursor.denied.borrow_mut().take() {
                    Some(denied) => crate::denied::explain(bail, &denied),
                    None => bail,
                };
                self.bail(&bail)?;
                Ok(Finish::Bailed(self.summary(), bail))
            }
            Err(Halt::Stop(mode)) => {
                self.journal.record(&ConductorEvent::Stopped(Stopped {
                    mode: mode.clone(),
                    run_id: self.cursor.run_id().map(str::to_string),
                }))?;
                self.report_stop(&mode)?;
                Ok(Finish::Stopped(self.summary(), mode))
            }
            Err(Halt::Error(err)) => Err(err),
        }
    }

    /// The issue is done: the comments and the draft PR are written again from the
    /// ledger, which writes nothing that is already up to date on the forge.
    fn republish(&self) -> Result<Finish, ConductError> {
        self.announce();
        if let Some(run_id) = self.journal.engine_run()? {
            self.cursor.found_run(run_id);
        }
        let republished = (|| -> Result<(), Halt> {
            self.write_run_comment(DONE)?;
            let branch = format!("refs/heads/{}", self.branch);
            for (n, _) in crate::plan::ticks_at(&self.work_tree, &branch, &self.plan_path) {
                self.write_step_comment(n)?;
            }
            self.publish(true)
        })();
        match republished {
            Ok(()) => Ok(Finish::Completed(self.summary())),
            Err(Halt::Bail(bail)) => Ok(Finish::Bailed(self.summary(), bail)),
            Err(Halt::Stop(mode)) => Ok(Finish::Stopped(self.summary(), mode)),
            Err(Halt::Error(err)) => Err(err),
        }
    }

    /// The run directory: the draft PR, the verifiers' scratch worktrees and the trace.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reports the start (or resume) of the run, and where it works.
    fn announce(&self) {
        // An earlier conduct that bailed before its plan was committed left nothing to
        // resume: this one starts the issue anew, and says so.
        let branch = format!("refs/heads/{}", self.branch);
        let resuming = (self.begun == Begun::Resumed)
            && !crate::plan::ticks_at(&self.work_tree, &branch, &self.plan_path).is_empty();
        let worktree = self.own_worktree.then(|| self.work_tree.clone());
        let place = worktree
            .as_ref()
            .map(|w| format!(" in the worktree {}", w.display()))
            .unwrap_or_default();
        self.progress.event(
            "conduct_started",
            json!({ "issue": self.issue.number(), "resumed": resuming, "worktree": worktree }),
            &format!(
                "{} issue #{}{place}: {}",
                if resuming { "resuming" } else { "conducting" },
                self.issue.number(),
                self.issue.title()
            ),
        );
    }

    /// The loop; `Ok(true)` when paused by `--max-steps`.
    fn drive(&self) -> Result<bool, Halt> {
        self.announce();
        self.check_binary()?;
        if self.issue.criteria().is_empty() {
            let question = crate::issue::no_criteria_question(self.issue.number());
            return Err(Bail::new(BailCause::NeedsUser, question.clone(), question)
                .at(0, "plan")
                .into());
        }
        // A stop request was for the run it stopped; this invocation starts afresh.
        let _ = self.leaves.supervisor().clear_stop();
        let n = self.issue.number();
        self.prepare_branch()
            .doing(|| format!("preparing the branch {}", self.branch))?;
        self.ensure_plan()
            .doing(|| format!("planning issue #{n}"))?;
        self.ensure_run()
            .doing(|| "starting the engine run and its baseline")?;
        self.check_agreement()
            .doing(|| "checking that the branch and the ledger agree")?;
        // The run comment only tells where the run stands: a forge that cannot take it
        // is recorded, and the step's own report decides whether the run goes on.
        self.best_effort(self.write_run_comment("running"))?;
        self.best_effort(self.forge.mark(crate::forge::RunMark::Running))?;
        self.settle_unjudged()
            .doing(|| "judging the phase a stopped conductor left unjudged")?;
        let mut done = 0;
        while let Some(state) = self.engine.status()? {
            if self.options.max_steps.is_some_and(|m| done >= m) {
                self.publish(false)?;
                return Ok(true);
            }
            let Some(index) = state.current() else { break };
            let n = state.plan.cycles[index].n;
            self.step(&state, index)
                .doing(|| format!("driving step {n}"))?;
            done += 1;
        }
        // A conductor killed between a step's close and its comment left it unwritten:
        // the upsert is idempotent, so every finished step's comment is (re)written.
        for (n, ticked) in crate::plan::ticks_at_head(&self.work_tree, &self.plan_path) {
            if ticked {
                self.write_step_comment(n)?;
            }
        }
        self.publish(true)?;
        self.write_run_comment(DONE)?;
        Ok(false)
    }

    /// Checks out the work branch: created on a fresh run from a clean tree; on a resume,
    /// the half-done step is reset first.
    fn prepare_branch(&self) -> Result<(), Halt> {
        let git = Git::new(&self.work_tree);
        if self.begun == Begun::Resumed {
            self.journal.record(&ConductorEvent::Resumed(Resumed {
                pid: std::process::id(),
            }))?;
            self.end_orphaned_leaves()?;
            // A kill inside the engine can leave HEAD one of its commits off the ledger.
            self.realign_head()?;
            // Before anything is reset: git and the ledger must agree on what is done.
            self.check_agreement()?;
            self.restore_phase_start()?;
        }
        let dirty = git.dirty_paths()?;
        if !dirty.is_empty() {
            return Err(Bail::new(
                BailCause::DirtyTree,
                format!(
                    "the work tree has uncommitted changes: {}",
                    dirty.join(", ")
                ),
                "commit or stash these files, then run `tdd conduct` again",
            )
            .into());
        }
        let current = git.text(["rev-parse", "--abbrev-ref", "HEAD"])?;
        if current != self.branch {
            let exists = git
                .output([
                    "rev-parse",
                    "--verify",
                    "--quiet",
                    &format!("refs/heads/{}", self.branch),
                ])
                .is_ok();
            if exists {
                git.output(["checkout", "-q", &self.branch])?;
            } else {
                git.output(["checkout", "-q", "-b", &self.branch])?;
            }
        }
        if self.begun != Begun::Resumed {
            let started = ConductStarted {
                issue: self.issue.number(),
                worktree: self.work_tree.display().to_string(),
                branch: self.branch.clone(),
                plan: self.plan_path.clone(),
                issue_path: self.options.forge.describe(),
                version: env!("CARGO_PKG_VERSION").to_string(),
                binary_sha256: binary_sha256(&self.options.tdd_exe)?,
            };
            self.journal
                .record(&ConductorEvent::ConductStarted(started))?;
        }
        tdd_engine::failpoint::hit("conduct_branch");
        Ok(())
    }

    /// Kills and waits for the leaves of this issue that a killed conductor left
    /// running, so none of them writes into the tree while the step is reset.
    fn end_orphaned_leaves(&self) -> Result<(), ConductError> {
        let supervisor = self.leaves.supervisor();
        let tag = format!("-i{}-", self.issue.number());
        let running = supervisor
            .list()
            .map_err(|e| {
                ConductError::from(tdd_leaves::LeafError::from(e))
                    .while_doing("ending the leaves a killed conductor left running")
            })?
            .into_iter()
            .filter(|l| l.state == tdd_supervisor::LeafState::Running)
            .filter(|l| l.id.contains(&tag) || l.name.as_deref().is_some_and(|n| n.contains(&tag)));
        for leaf in running {
            let mut handle = supervisor.open(&leaf.id).map_err(|e| {
                ConductError::from(tdd_leaves::LeafError::from(e))
                    .while_doing("ending the leaves a killed conductor left running")
            })?;
            handle.kill(tdd_supervisor::Kill::Now).map_err(|e| {
                ConductError::from(tdd_leaves::LeafError::from(e))
                    .while_doing("ending the leaves a killed conductor left running")
            })?;
            handle
                .wait(Some(std::time::Duration::from_secs(30)))
                .map_err(|e| {
                    ConductError::from(tdd_leaves::LeafError::from(e))
                        .while_doing("ending the leaves a killed conductor left running")
                })?;
            self.journal
                .record(&ConductorEvent::OrphanLeafEnded(OrphanLeafEnded {
                    supervisor_id: leaf.id,
                }))?;
        }
        Ok(())
    }
}

/// How the loop ended, as a word for the trace.
fn driven_outcome(driven: &Result<bool, Halt>) -> &'static str {
    match driven {
        Ok(true) => "paused",
        Ok(false) => "completed",
        Err(Halt::Bail(_)) => "bailed",
        Err(Halt::Stop(_)) => "stopped",
        Err(Halt::Error(_)) => "failed",
    }
}
