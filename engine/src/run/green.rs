//! GREEN and the REFACTOR close, decided in the clean room from the candidate commit.
//!
//! The candidate is HEAD's tree plus the phase's changes that may be committed (inside
//! the cycle's roots, neither tests nor undeclared harness files), built from the scan's
//! bytes. The suites run on exactly that tree in the clean room with the pinned
//! environment; the same tree is what gets committed. A GREEN first runs only its
//! targets, so a refused GREEN costs one run of the target, not of the suite.

use serde_json::json;

use super::events::GreenWithoutChange;
use super::events::RunEvent;

use super::Progress;
use super::RunError;
use super::Session;
use super::advance::AdvanceOutcome;
use super::advance::Ctx;
use super::candidate;
use super::candidate::Candidate;
use super::cleanroom::CleanRoomError;
use super::deciding::FirstWalk;
use super::deciding::InstallCheck;
use super::gates::Refused;
use super::gates::green_gate;
use super::gates::suite_gate;
use super::phase::Phase;
use super::snapshot::Snapshot;
use crate::git::Git;
use crate::ledger::Ledger;
use crate::observe::Project;
use crate::observe::Selection;
use crate::observe::TargetStatus;
use crate::observe::adapter_for;
use crate::observe::lookup;
use crate::observe::observe_target;

/// What a close is judged on: the tree, the projects to sweep, and the commit the
/// candidate builds on.
type Prepared = (Snapshot, Vec<String>, String);

impl Session {
    pub(super) fn green_or_refactor(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        progress: &dyn Progress,
    ) -> Result<(), RunError> {
        // A REFACTOR close walks the installations from its start, so that the walk
        // (longer than a run) is well ahead when its suites end; GREEN once its
        // targets passed ([`InstallCheck`]).
        let refactor = ctx.phase == Phase::AwaitingRefactor;
        let first = if refactor {
            FirstWalk::Now
        } else {
            FirstWalk::AfterTargets
        };
        let mut installs = InstallCheck::start(ctx.pinned.as_ref(), first);
        self.enforce_locks(ledger, ctx, outcome)?;
        let (now, sweep, head) = if refactor {
            match self.before_close(ledger, ctx, progress)? {
                Ok(prepared) => prepared,
                Err(refusal) => return self.refuse(ledger, ctx, outcome, refusal),
            }
        } else {
            (
                ctx.now.clone(),
                ctx.planned.projects.clone(),
                ctx.head.clone(),
            )
        };
        let git = Git::new(&self.work_tree);
        // Artifact commits made at the close move the base; otherwise it is the phase's.
        let head_tree = if head == ctx.head {
            ctx.head_tree.clone()
        } else {
            candidate::tree_of(&git, &head)?
        };
        let candidate = candidate::build(&git, &head_tree, &now.tree, |p| {
            ctx.in_roots(p) && !ctx.is_test(p) && !ctx.is_harness(p)
        })?;
        if let Some(refusal) = self.target_edited(ctx, &head_tree, &candidate)? {
            return self.refuse(ledger, ctx, outcome, refusal);
        }
        if !refactor && candidate.is_empty() {
            let event = RunEvent::GreenWithoutChange(GreenWithoutChange {
                n: ctx.planned.n,
                tree: candidate.tree.clone(),
            });
            ledger.record(Some(&ctx.state.run_id), &event)?;
        }
        let judged = std::thread::scope(|scope| {
            // The ledger's log is started beside the runs, so the decision's first
            // record does not wait for the disk.
            let log = &mut *ledger;
            let started = scope.spawn(move || log.start_log());
            let judged =
                self.judge_in_clean_room(ctx, outcome, &candidate, &sweep, &mut installs, progress);
            let _ = started.join();
            judged
        });
        let judged = match judged {
            Err(RunError::CleanRoom(CleanRoomError::LinkLeavesTree { path, target })) => {
                Ok(Some(link_leaves_tree(ctx.phase, &path, &target)))
            }
            other => other,
        };
        if let Some(refusal) = judged? {
            return self.refuse(ledger, ctx, outcome, refusal);
        }
        if !refactor
            && let Some(refusal) = self.sensitivity(ledger, ctx, outcome, &head_tree, progress)?
        {
            // As after the suites: a changed installation is named first.
            installs.finish()?;
            return self.refuse(ledger, ctx, outcome, refusal);
        }
        let (message, to) = if refactor {
            let message = ctx.planned.commit_refactor.clone();
            (
                message.unwrap_or_else(|| format!("refactor: {}", ctx.planned.title)),
                Phase::Closed,
            )
        } else {
            let message = ctx.planned.commit_green.clone();
            (
                message.unwrap_or_else(|| format!("feat: {}", ctx.planned.title)),
                Phase::AwaitingRefactor,
            )
        };
        installs.after_runs()?;
        // Its watches are let go of now, beside the commit: the kernel takes a while.
        drop(installs);
        self.commit_candidate(ledger, ctx, outcome, &head, &candidate, &message, to)
    }

    /// What REFACTOR checks before its suites: annotations, lint and typecheck, stale
    /// artifacts (regenerated and committed). Gives the tree to judge, the projects to
    /// sweep (the cycle's and those downstream through artifacts) and the commit the
    /// candidate builds on (the phase's, or the last artifact commit made on it), or the
    /// refusal.
    fn before_close(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        progress: &dyn Progress,
    ) -> Result<Result<Prepared, Refused>, RunError> {
        let missing = ctx.state.missing_annotations(ctx.planned.n);
        if !missing.is_empty() {
            return Ok(Err(Refused {
                reason: "missing_annotations",
                verb: super::phase::Verb::AnnotateCycle,
                detail: format!(
                    "the plan requires these annotations before the cycle closes: {}",
                    missing.join(", ")
                ),
            }));
        }
        if let Some(refusal) = self.close_gates(ctx, progress)? {
            return Ok(Err(refusal));
        }
        let projects = &ctx.planned.projects;
        let run_id = &ctx.state.run_id;
        let mut head = ctx.head.clone();
        if let Some(refusal) =
            self.refresh_artifacts(ledger, run_id, ctx.planned.n, projects, &mut head, progress)?
        {
            return Ok(Err(refusal));
        }
        let now = if head != ctx.head {
            // Regenerated artifacts were committed: judge the tree as it is now.
            Snapshot::scan(&self.work_tree)?
        } else {
            ctx.now.clone()
        };
        let mut sweep = projects.clone();
        let (_, downstream) = super::artifacts::reachable(&self.config, projects);
        sweep.extend(
            downstream
                .into_iter()
                .filter(|p| self.config.project.get(p).is_some_and(|c| c.in_close_sweep)),
        );
        Ok(Ok((now, sweep, head)))
    }

    /// Runs the targets (GREEN), then the suites of `sweep`, on the candidate tree in the
    /// clean room. `Some` is the refusal the first failing gate gave.
    ///
    /// A suite whose targets already passed alone runs without them where its runner can
    /// deselect by id, and is judged with their results added: one suite run in total.
    ///
    /// The runners and the configuration chain (a few files judged by bytes) are checked
    /// first. The walk of what the runners load (`installs`) is begun once GREEN's
    /// targets passed (with a REFACTOR close, at its start); a refusal from then on
    /// waits for it, and a changed installation refuses first, whatever the suites said.
    /// A GREEN refused on its targets is refused on them, walking nothing.
    fn judge_in_clean_room(
        &self,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        candidate: &Candidate,
        sweep: &[String],
        installs: &mut InstallCheck,
        progress: &dyn Progress,
    ) -> Result<Option<Refused>, RunError> {
        if let Some(env) = ctx.pinned.as_deref() {
            env.verify_runners()?;
        }
        let judged =
            self.judge_pinned_in_clean_room(ctx, outcome, candidate, sweep, installs, progress);
        // A refusal waits for the walk, which names a changed installation first; a
        // pass leaves it going beside the sensitivity run, to be waited for after it
        // ([`InstallCheck::after_runs`]).
        if !matches!(judged, Ok(None)) {
            installs.finish()?;
        }
        judged
    }

    /// [`Session::judge_in_clean_room`] without the check of the pins.
    fn judge_pinned_in_clean_room(
        &self,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        candidate: &Candidate,
        sweep: &[String],
        installs: &mut InstallCheck,
        progress: &dyn Progress,
    ) -> Result<Option<Refused>, RunError> {
        let projects = self.in_clean_room(ctx.pinned.as_ref(), &candidate.tree, sweep)?;
        let mut alone = Vec::new();
        if ctx.phase == Phase::AwaitingImpl {
            match self.targets_first(ctx, outcome, &projects, progress)? {
                Ok(passed) => alone = passed,
                Err(refusal) => return Ok(Some(refusal)),
            }
        }
        installs.watch_from_now();
        // Who the commit will be by, and the next phase's base, are learned while the
        // suites run (not before: a GREEN refused on its targets makes no commit).
        ctx.stamp.start(&self.work_tree);
        ctx.next_base.start(&self.work_tree);
        for project in &projects {
            let name = &project.name;
            let adapter = adapter_for(project.config.adapter);
            progress.event(
                "suite_run",
                json!({ "project": name, "phase": ctx.phase }),
                &format!("running the {name} suite..."),
            );
            let ran_alone: Vec<&TargetRun> = alone.iter().filter(|t| t.project == *name).collect();
            let selection = if ran_alone.is_empty() {
                Selection::All
            } else {
                Selection::AllExcept(ran_alone.iter().flat_map(|t| t.natives()).collect())
            };
            let ran = adapter.run(project, &selection)?;
            let observation = ran_alone.iter().fold(ran.clone(), |whole, t| {
                whole.with_results_of(&t.observation)
            });
            outcome.observations.push(ran);
            let mut result = Ok(());
            for target in ctx.targets.iter().filter(|t| ctx.project_of(t) == *name) {
                let key = adapter.target_key(project, project.native_id(target)?);
                let verdict = lookup(&observation, None, &key);
                let baseline = ctx.state.baseline.get(name);
                result = result.and(green_gate(&observation, &verdict, baseline));
            }
            if ctx.targets.is_empty() || !ctx.planned.projects.contains(name) {
                result = suite_gate(&observation, ctx.state.baseline.get(name));
            }
            if let Err(refusal) = result {
                return Ok(Some(refusal));
            }
        }
        Ok(None)
    }

    /// Runs each GREEN target alone: a target that does not pass refuses GREEN at the cost
    /// of its own run, before any suite runs. Gives the runs of the targets that passed.
    fn targets_first(
        &self,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        projects: &[Project],
        progress: &dyn Progress,
    ) -> Result<Result<Vec<TargetRun>, Refused>, RunError> {
        let mut passed = Vec::new();
        for target in &ctx.targets {
            let name = ctx.project_of(target);
            let Some(project) = projects.iter().find(|p| p.name == name) else {
                continue;
            };
            progress.event(
                "target_run",
                json!({ "target": target, "phase": ctx.phase }),
                &format!("running target {target}..."),
            );
            let adapter = adapter_for(project.config.adapter);
            let (observation, verdict) = observe_target(adapter.as_ref(), project, target)?;
            outcome.observations.push(observation.clone());
            if verdict.status != TargetStatus::Passed {
                let baseline = ctx.state.baseline.get(&name);
                if let Err(refusal) = green_gate(&observation, &verdict, baseline) {
                    return Ok(Err(refusal));
                }
                continue;
            }
            passed.push(TargetRun {
                project: name,
                observation,
            });
        }
        Ok(Ok(passed))
    }
}

/// A GREEN target that passed in a run of its own.
struct TargetRun {
    /// The project it belongs to.
    project: String,
    /// The run.
    observation: crate::observe::Observation,
}

impl TargetRun {
    /// The runner-native id of every test the run reported (a parametrized target's
    /// cases, say): what the suite run may leave out.
    fn natives(&self) -> Vec<String> {
        let prefix = format!("{}::", self.project);
        self.observation
            .tests
            .keys()
            .filter_map(|id| id.strip_prefix(&prefix).map(str::to_string))
            .collect()
    }
}

/// The refusal of a candidate with a symlink out of the repository: what the tests would
/// read through it is not in the commit, so no verdict on it holds from the commit alone.
fn link_leaves_tree(phase: Phase, path: &str, target: &str) -> Refused {
    Refused {
        reason: "link_outside_tree",
        verb: phase.verb(),
        detail: format!(
            "{path} is a symlink to {target}, outside the repository or into a dependency \
             directory no commit holds (`node_modules`, `.venv`, ...): a gate decision must \
             hold from the commit alone; commit the file itself, or point the link at a \
             committed file"
        ),
    }
}
