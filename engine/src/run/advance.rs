//! `advance`: observe, decide through the gates, record, and commit by phase.

use serde::Serialize;

use super::events::AdvanceRefused;
use super::events::CycleRef;
use super::events::PhaseChanged;
use super::events::RecordedRefusal;
use super::events::RunEvent;
use super::events::UndeclaredFileTouched;

use super::Progress;
use super::RunError;
use super::Session;
use super::candidate;
use super::candidate::Candidate;
use super::commit::anchor_trailers;
use super::gates::RedDecision;
use super::gates::Refused;
use super::locks::PhaseLocks;
use super::phase::Phase;
use super::phase::Verb;
use super::snapshot::Snapshot;
use super::state::RunState;
use super::tx::RunTx;
use crate::ledger::Ledger;
use crate::observe::Observation;
use crate::plan::PlannedCycle;

/// What [`Session::advance`] does when the work tree is exactly as it was at the cycle's
/// last refused advance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unchanged {
    /// Refuse at once (`no_change`) without running anything: nothing could differ.
    Refuse,
    /// Judge it again (`--retry`), as for a flaky suite or a fixed environment.
    Judge,
}

/// What one `advance` did.
#[derive(Debug, Clone, Serialize)]
pub struct AdvanceOutcome {
    /// The run.
    pub run_id: String,
    /// The cycle advanced (or refused).
    pub cycle: u32,
    /// The phase before.
    pub from: Phase,
    /// The phase after (equal to `from` when refused).
    pub to: Phase,
    /// The commit made, if any.
    pub commit: Option<String>,
    /// Why the gate said no, with the evidence.
    pub refused: Option<Refused>,
    /// The RED decision, when RED was judged.
    pub red: Option<RedDecision>,
    /// Locked files that were put back.
    pub reverted: Vec<String>,
    /// Changed files outside the cycle's roots, left uncommitted.
    pub undeclared: Vec<String>,
    /// What changed in the dependencies since they were last pinned, taken as this
    /// cycle's own because its plan declares `changes_dependencies` (recorded as
    /// `dependencies_changed`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies_changed: Vec<String>,
    /// The observations the decision rests on.
    pub observations: Vec<Observation>,
    /// What to do next.
    pub next: Verb,
    /// Whether the whole run is now complete.
    pub run_complete: bool,
}

/// The cycle being advanced, with everything the gates need.
pub(super) struct Ctx<'a> {
    pub(super) state: &'a RunState,
    pub(super) planned: &'a PlannedCycle,
    /// The targets: the plan's, or the one adopted or named in their place.
    pub(super) targets: Vec<String>,
    pub(super) locks: PhaseLocks,
    pub(super) base: Snapshot,
    pub(super) now: Snapshot,
    pub(super) phase: Phase,
    /// Who the phase commit is by, probed while the runners work.
    pub(super) stamp: super::stamp::Probe,
    /// The next phase's base, when scanned while the clean room runs the suites.
    pub(super) next_base: super::snapshot::EarlyScan,
    /// The commit the ledger recorded at the current phase's start, which HEAD was
    /// checked to be: what every candidate of the phase is built on, never HEAD as
    /// read later.
    pub(super) head: String,
    /// The tree of `head`, read with it.
    pub(super) head_tree: String,
    /// What deciding runs see: the run's pinned environment, with the dependencies
    /// renewed when the cycle declares `changes_dependencies`.
    pub(super) pinned: Option<std::sync::Arc<crate::observe::hermetic::PinnedEnv>>,
}

impl Ctx<'_> {
    pub(super) fn is_test(&self, path: &str) -> bool {
        self.locks.is_test(path)
    }

    /// A harness file this cycle does not declare: locked in every phase.
    pub(super) fn is_harness(&self, path: &str) -> bool {
        self.locks.is_harness(path)
    }

    pub(super) fn is_impl(&self, path: &str) -> bool {
        self.locks.is_impl(path)
    }

    pub(super) fn in_roots(&self, path: &str) -> bool {
        self.locks.in_roots(path) || path == self.state.contract.path
    }

    /// The target id qualified with its project, as observations name it.
    pub(super) fn qualified(&self, test: &str) -> String {
        let project = self.project_of(test);
        if test.starts_with(&format!("{project}::")) {
            test.to_string()
        } else {
            format!("{project}::{test}")
        }
    }

    pub(super) fn project_of(&self, test: &str) -> String {
        self.planned
            .projects
            .iter()
            .find(|p| test.starts_with(&format!("{p}::")))
            .unwrap_or(&self.planned.projects[0])
            .clone()
    }
}

/// What an advance reads of the work tree and of HEAD: it needs nothing of the run, so
/// it is read while the run is projected from the ledger, and each result is taken
/// where it is first needed, after the run's own refusals.
struct Seen {
    /// The work tree's scan, with the paths whose index entries carried flags.
    scanned: Result<(Snapshot, Vec<super::FlaggedPath>), crate::git::GitError>,
    /// HEAD and its tree, read once in process: when HEAD is the recorded commit
    /// (checked before any gate), its tree is the base of every candidate of the phase.
    head: Result<(String, String), crate::git::GitError>,
}

impl Seen {
    /// Reads the work tree at `work_tree` and its HEAD on a thread of their own while
    /// `work` runs here.
    fn beside<T>(work_tree: &std::path::Path, work: impl FnOnce() -> T) -> (T, Seen) {
        std::thread::scope(|scope| {
            let seen = scope.spawn(|| Seen {
                scanned: Snapshot::scan_flagged(work_tree),
                head: candidate::head_and_tree(&crate::git::Git::new(work_tree)),
            });
            let done = work();
            let seen = seen.join().unwrap_or_else(|_| {
                let panicked = || crate::git::GitError::Failed {
                    args: "scan".into(),
                    stderr: "the scanning thread panicked".into(),
                };
                Seen {
                    scanned: Err(panicked()),
                    head: Err(panicked()),
                }
            });
            (done, seen)
        })
    }
}

impl RunTx<'_> {
    /// Observes the current cycle and moves it forward if the gate allows; `unchanged`
    /// says what to do with a tree the last refusal already judged.
    pub fn advance(
        mut self,
        unchanged: Unchanged,
        progress: &dyn Progress,
    ) -> Result<AdvanceOutcome, RunError> {
        if self.engine.config.sandbox.enabled {
            // What the kernel lets a confined runner have is asked once per process, in
            // throwaway children: asked now, beside the scan and the candidate's
            // building, the first runner does not wait for it. A thread that cannot be
            // made leaves the probes to that runner.
            let _ = std::thread::Builder::new()
                .name("namespace probes".to_string())
                .spawn(crate::observe::sandbox::probe_namespaces);
        }
        let outcome = self
            .engine
            .advance_in(&mut self.ledger, unchanged, progress)?;
        if outcome.commit.is_some() || outcome.run_complete {
            let active = (!outcome.run_complete).then_some(outcome.run_id.as_str());
            self.engine.checkpoint_and_publish(&mut self.ledger, active);
        }
        Ok(outcome)
    }
}

impl Session {
    /// The body of [`RunTx::advance`], on the ledger the transaction verified.
    fn advance_in(
        &self,
        ledger: &mut Ledger,
        unchanged: Unchanged,
        progress: &dyn Progress,
    ) -> Result<AdvanceOutcome, RunError> {
        let (state, seen) = Seen::beside(&self.work_tree, || self.active_run(ledger));
        let state = state?.ok_or(RunError::NoActiveRun)?;
        self.check_config(&state)?;
        if let Some(blocker) = &state.blocker {
            return Err(RunError::Blocked {
                detail: serde_json::json!(blocker).to_string(),
            });
        }
        let Some(index) = state.current() else {
            return Err(RunError::NoActiveRun);
        };
        let cycle = &state.cycles[index];
        let planned = &state.plan.cycles[index];
        let _span = tracing::info_span!(
            "gate",
            run_id = state.run_id.as_str(),
            cycle = cycle.n,
            phase = ?cycle.phase,
        )
        .entered();
        let locks = PhaseLocks::for_cycle(&self.config, planned, cycle.phase)?;
        let (now, flagged) = seen.scanned?;
        let base = Snapshot {
            tree: cycle.snapshot.clone().unwrap_or_else(|| now.tree.clone()),
        };
        let targets = cycle
            .target_override
            .clone()
            .map_or_else(|| planned.tests.clone(), |t| vec![t]);
        if matches!(cycle.phase, Phase::AwaitingImpl | Phase::AwaitingRefactor) {
            self.prepare_clean_room_runners();
        }
        let (head, head_tree) = seen.head?;
        let recorded = cycle.history.last().map(|start| start.head.clone());
        let mut ctx = Ctx {
            state: &state,
            planned,
            targets,
            locks,
            base,
            now,
            phase: cycle.phase,
            stamp: super::stamp::Probe::default(),
            next_base: super::snapshot::EarlyScan::default(),
            head: recorded.clone().unwrap_or_else(|| head.clone()),
            head_tree,
            pinned: state.pinned_env.clone(),
        };
        let blank = AdvanceOutcome {
            run_id: state.run_id.clone(),
            cycle: cycle.n,
            from: cycle.phase,
            to: cycle.phase,
            commit: None,
            refused: None,
            red: None,
            reverted: Vec::new(),
            undeclared: Vec::new(),
            dependencies_changed: Vec::new(),
            observations: Vec::new(),
            next: cycle.phase.verb(),
            run_complete: false,
        };
        if let Some(recorded) = recorded.filter(|r| *r != head) {
            let refusal = head_moved(&recorded, &head);
            return Ok(AdvanceOutcome {
                next: refusal.verb,
                refused: Some(refusal),
                ..blank
            });
        }
        if unchanged == Unchanged::Refuse
            && cycle
                .refusal
                .as_ref()
                .is_some_and(|r| r.tree == ctx.now.tree)
        {
            let refusal = Refused { reason: "no_change", verb: cycle.refusal.as_ref().map_or(cycle.phase.verb(), |r| r.verb), detail: "the work tree is unchanged since the last refused advance; change it, or pass --retry".into() };
            return Ok(AdvanceOutcome {
                next: refusal.verb,
                refused: Some(refusal),
                ..blank
            });
        }
        self.undo_index_flags(ledger, &ctx, flagged)?;
        let mut outcome = blank;
        if planned.changes_dependencies
            && matches!(cycle.phase, Phase::AwaitingImpl | Phase::AwaitingRefactor)
            && let Some((renewed, changed)) = self.renew_dependencies(ledger, &state, cycle.n)?
        {
            ctx.pinned = Some(renewed);
            outcome.dependencies_changed = changed;
        }
        match cycle.phase {
            Phase::AwaitingTest | Phase::AwaitingPin => {
                self.red(ledger, &ctx, &mut outcome, progress)?
            }
            Phase::AwaitingImpl | Phase::AwaitingRefactor => {
                self.green_or_refactor(ledger, &ctx, &mut outcome, progress)?
            }
            Phase::SensitivityRequired => {
                self.manual_sensitivity(ledger, &ctx, cycle, &mut outcome, progress)?
            }
            Phase::Closed | Phase::Skipped => return Err(RunError::NoActiveRun),
        }
        tracing::info!(
            to = ?outcome.to,
            refused = outcome.refused.as_ref().map(|r| r.reason),
            commit = outcome.commit.as_deref(),
            "gate decided"
        );
        Ok(outcome)
    }

    pub(super) fn refuse(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        refusal: Refused,
    ) -> Result<(), RunError> {
        let event = RunEvent::AdvanceRefused(AdvanceRefused {
            n: ctx.planned.n,
            phase: ctx.phase,
            refusal: RecordedRefusal {
                reason: refusal.reason.to_string(),
                verb: refusal.verb,
                tree: ctx.now.tree.clone(),
            },
            detail: refusal.detail.clone(),
            observations: outcome.observations.clone(),
        });
        ledger.record(Some(&ctx.state.run_id), &event)?;
        outcome.next = refusal.verb;
        outcome.refused = Some(refusal);
        Ok(())
    }

    /// Commits the changes of the phase's scan that `select` picks, exactly as scanned,
    /// records the move and opens what follows.
    pub(super) fn commit_and_move(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        select: impl Fn(&str) -> bool,
        message: &str,
        to: Phase,
    ) -> Result<(), RunError> {
        let git = crate::git::Git::new(&self.work_tree);
        let candidate = candidate::build(&git, &ctx.head_tree, &ctx.now.tree, select)?;
        self.commit_candidate(ledger, ctx, outcome, &ctx.head, &candidate, message, to)
    }

    /// Commits `candidate` on `head` (nothing when it is empty), records the move and opens
    /// what follows.
    #[expect(
        clippy::too_many_arguments,
        reason = "one call per phase, each argument distinct"
    )]
    pub(super) fn commit_candidate(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        head: &str,
        candidate: &Candidate,
        message: &str,
        to: Phase,
    ) -> Result<(), RunError> {
        let git = crate::git::Git::new(&self.work_tree);
        let chosen = candidate.chosen_paths();
        let undeclared: Vec<String> = candidate
            .left
            .iter()
            .filter(|c| {
                let p = c.display();
                !ctx.in_roots(&p) && !ctx.is_harness(&p)
            })
            .map(|c| c.recorded())
            .collect();
        if !undeclared.is_empty() {
            let event = RunEvent::UndeclaredFileTouched(UndeclaredFileTouched {
                n: ctx.planned.n,
                phase: ctx.phase,
                files: undeclared.clone(),
            });
            ledger.record(Some(&ctx.state.run_id), &event)?;
        }
        let trailers = [
            ("TDD-Run", ctx.state.run_id.clone()),
            ("TDD-Cycle", ctx.planned.n.to_string()),
            ("TDD-Phase", ctx.phase.trailer().to_string()),
        ];
        let name = format!(
            "{}/cycle-{}-{}",
            ctx.state.run_id,
            ctx.planned.n,
            to.trailer()
        );
        // The next phase's base is the work tree as it is now (or as scanned while the
        // clean room ran), which the commit does not touch: it is scanned while git writes
        // the commit and moves HEAD.
        let (commit, snapshot) = std::thread::scope(|scope| {
            let snapshot = scope.spawn(|| match ctx.next_base.take() {
                Some(scanned) => Snapshot::keep(&self.work_tree, &name, scanned?),
                None => Snapshot::take(&self.work_tree, &name),
            });
            let commit = candidate::commit(&git, head, candidate, message, || {
                let trailers = anchor_trailers(ledger, &chosen, message, &trailers)?;
                Ok::<_, RunError>((trailers, ctx.stamp.take(&self.work_tree)))
            });
            let snapshot = snapshot.join().unwrap_or_else(|_| {
                Err(crate::git::GitError::Failed {
                    args: "snapshot".into(),
                    stderr: "the snapshot thread panicked".into(),
                })
            });
            (commit, snapshot)
        });
        let commit = commit?;
        crate::failpoint::hit("advance_committed");
        let snapshot = match (snapshot, &commit) {
            (Ok(snapshot), _) => snapshot,
            (Err(err), Some(made)) => {
                // The next phase's base could not be recorded (a file too large to
                // keep, say): the step fails, and HEAD goes back to where the ledger
                // says it is.
                candidate::undo(&git, head, made, candidate);
                return Err(err.into());
            }
            (Err(err), None) => return Err(err.into()),
        };
        let event = RunEvent::PhaseChanged(PhaseChanged {
            n: ctx.planned.n,
            from: ctx.phase,
            to,
            commit: commit.clone(),
            committed_phase: commit.as_ref().map(|_| ctx.phase.trailer().to_string()),
            files: chosen,
            snapshot: snapshot.tree,
            head: commit.clone().unwrap_or_else(|| head.to_string()),
            red: outcome
                .red
                .as_ref()
                .map(serde_json::to_value)
                .transpose()
                .map_err(|e| RunError::Io {
                    what: "encoding the RED decision".into(),
                    source: std::io::Error::other(e),
                })?,
            observations: outcome.observations.clone(),
        });
        ledger.record(Some(&ctx.state.run_id), &event)?;
        outcome.to = to;
        outcome.commit = commit;
        outcome.undeclared = undeclared;
        outcome.next = to.verb();
        if to == Phase::Closed {
            self.close_and_open_next(ledger, ctx, outcome)?;
        }
        Ok(())
    }

    fn close_and_open_next(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
    ) -> Result<(), RunError> {
        let event = RunEvent::CycleClosed(CycleRef { n: ctx.planned.n });
        ledger.record(Some(&ctx.state.run_id), &event)?;
        match self.open_next(
            ledger,
            &ctx.state.run_id,
            &ctx.state.plan,
            Some(ctx.planned.n),
        )? {
            Some((_, phase)) => outcome.next = phase.verb(),
            None => {
                outcome.next = Verb::Complete;
                outcome.run_complete = true;
            }
        }
        Ok(())
    }
}

/// The refusal of an advance whose HEAD is not the commit the ledger recorded for the
/// phase: a commit made outside tdd (by hand, by an agent, a `git reset` or an amend)
/// is never the base of what a gate judges.
fn head_moved(recorded: &str, head: &str) -> Refused {
    let short = |sha: &str| sha.chars().take(12).collect::<String>();
    let (recorded, head) = (short(recorded), short(head));
    Refused {
        reason: "head_moved",
        verb: Verb::ResolveBlocker,
        detail: format!(
            "HEAD is {head}, but the run recorded {recorded} as the commit this phase builds on: a commit made or removed outside tdd is not judged. Put HEAD back with `git reset --soft {recorded}` (your changes stay in the work tree), then run `tdd advance` again"
        ),
    }
}
