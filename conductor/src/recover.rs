//! Resume recovery: what a conductor killed anywhere left behind is put back in order
//! before the step loop goes on. HEAD is realigned with the ledger where a kill fell
//! inside the engine, the checklist at HEAD must agree with the closed cycles, the
//! current phase's half-done work is dropped (or the half-done step reset whole), and
//! the last phase commit left unjudged is judged.

use tdd_engine::git::Git;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;
use tdd_engine::run::RollbackTo;
use tdd_engine::run::RunState;
use tdd_leaves::Decision;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::decide::findings_of;
use crate::error::Halt;
use crate::events::ConductorEvent;
use crate::events::HeadRealigned;
use crate::events::PhaseRecord;
use crate::events::PhaseReset;
use crate::events::PhaseVerdict;
use crate::events::StepReset;
use crate::plan::ticks_at_head;
use crate::step::Timing;
use crate::step::ms;

/// The phase whose commits carry `name` (`red`, `green`, `refactor`).
fn phase_named(name: &str) -> Phase {
    match name {
        "red" => Phase::AwaitingTest,
        "green" => Phase::AwaitingImpl,
        _ => Phase::AwaitingRefactor,
    }
}

/// The last phase commit of the run, as (cycle index, phase name, commit): the current
/// cycle's RED or GREEN commit, else the REFACTOR that closed the cycle before it (or
/// the last one) while the current cycle has not moved.
fn last_phase_commit(state: &RunState) -> Option<(usize, &'static str, String)> {
    let current = state.current();
    if let Some(i) = current
        && let Some((tag, sha)) = state.cycles[i].commits.last()
    {
        let name = ["red", "green"].into_iter().find(|n| n == tag)?;
        return Some((i, name, sha.clone()));
    }
    let upto = current.unwrap_or(state.cycles.len());
    let index = upto.checked_sub(1)?;
    let cycle = &state.cycles[index];
    match (cycle.phase, cycle.commits.last()) {
        (Phase::Closed, Some((tag, sha))) if tag == "refactor" => {
            Some((index, "refactor", sha.clone()))
        }
        _ => None,
    }
}

impl Conductor<'_> {
    /// On a resume: the ticked boxes at HEAD must be exactly the closed cycles (a
    /// skipped cycle's box stays unticked).
    pub(crate) fn check_agreement(&self) -> Result<(), Halt> {
        let Some(state) = self.engine.status()? else {
            return Ok(());
        };
        let ticked: Vec<u32> = ticks_at_head(&self.work_tree, &self.plan_path)
            .into_iter()
            .filter(|(_, t)| *t)
            .map(|(n, _)| n)
            .collect();
        let closed: Vec<u32> = state
            .cycles
            .iter()
            .filter(|c| c.phase == tdd_engine::run::Phase::Closed)
            .map(|c| c.n)
            .collect();
        if ticked != closed {
            return Err(Bail::new(
                BailCause::LedgerGitMismatch,
                format!("git ticks steps {ticked:?} in {} but the ledger closed {closed:?}", self.plan_path),
                "inspect `git log` and `tdd status`; make them agree (reset the branch or tick the plan), then run `tdd conduct` again",
            )
            .into());
        }
        Ok(())
    }

    /// On a resume, before git and the ledger are compared: a conductor killed inside the
    /// engine, between a phase's commit and its record or between an undo moving HEAD
    /// back over a phase commit and its record, left HEAD one engine commit ahead of the
    /// ledger or one behind it. HEAD is put back where the ledger has it (a mixed reset;
    /// `restore_phase_start` then makes the files exact), so the work of that phase is
    /// redone (or its undo) as if the kill came just before it. Any other difference is
    /// not the engine's, and is left to `check_agreement`.
    pub(crate) fn realign_head(&self) -> Result<(), Halt> {
        // The engine run of this conduct run, active or completed (a killed undo of the
        // last REFACTOR finds the run completed in the ledger).
        let Some(run_id) = self.journal.engine_run()? else {
            return Ok(());
        };
        let events =
            tdd_engine::ledger::Ledger::open(&self.location.database)?.events(Some(&run_id))?;
        let Some(state) = tdd_engine::run::RunState::project(&events, self.engine.kinds())
            .map_err(tdd_engine::ledger::LedgerError::from)?
            .filter(|s| s.status != tdd_engine::run::RunStatus::Abandoned)
        else {
            return Ok(());
        };
        // Where the ledger has HEAD: the current phase's start, else (every cycle
        // closed) the last phase commit.
        let expected = match state.current() {
            Some(i) => state.cycles[i].history.last().map(|h| h.head.clone()),
            None => state
                .cycles
                .iter()
                .rev()
                .find_map(|c| c.commits.last().map(|(_, sha)| sha.clone())),
        };
        let Some(expected) = expected.filter(|e| !e.is_empty()) else {
            return Ok(());
        };
        let git = Git::new(&self.work_tree);
        let head = git.text(["rev-parse", "HEAD"])?;
        if head == expected {
            return Ok(());
        }
        let parent = |sha: &str| git.text(["rev-parse", "--verify", "--quiet", &format!("{sha}^")]);
        // A phase commit of this run; not an artifact's regeneration, which the ledger
        // records on its own.
        let ours = |sha: &str| {
            git.text(["show", "-s", "--format=%B", sha]).is_ok_and(|m| {
                m.contains(&format!("TDD-Run: {}", state.run_id))
                    && !m.contains("TDD-Phase: artifact")
            })
        };
        // Ahead: HEAD is a phase commit of this run on top of the ledger's HEAD. Behind:
        // the ledger's HEAD is a phase commit of this run on top of HEAD.
        let ahead = parent(&head).is_ok_and(|p| p == expected) && ours(&head);
        let behind = parent(&expected).is_ok_and(|p| p == head) && ours(&expected);
        if !ahead && !behind {
            return Ok(());
        }
        git.output(["reset", "-q", &expected])?;
        self.journal
            .record(&ConductorEvent::HeadRealigned(HeadRealigned {
                from: head,
                to: expected,
                ahead,
            }))?;
        Ok(())
    }

    /// On a resume: whatever a killed conductor's leaf left half-done in the current
    /// phase is dropped, the tree restored exactly to that phase's start. The phases
    /// before it stand; `settle_unjudged` then judges the last one if it was not.
    pub(crate) fn restore_phase_start(&self) -> Result<(), Halt> {
        let Some(state) = self.engine.status()? else {
            return self.reset_half_done_step();
        };
        let Some(cycle) = state.current().map(|i| &state.cycles[i]) else {
            return Ok(());
        };
        if !cycle.history.is_empty() {
            self.engine.begin()?.rollback(RollbackTo::PhaseStart)?;
        }
        self.journal
            .record(&ConductorEvent::PhaseReset(PhaseReset {
                step: cycle.n,
                phase: cycle.phase.trailer().to_string(),
            }))?;
        Ok(())
    }

    /// Puts the current step back to where it began: every phase it committed is rolled
    /// back through the engine, and the tree restored to the step's start.
    pub(crate) fn reset_half_done_step(&self) -> Result<(), Halt> {
        let Some(state) = self.engine.status()? else {
            // No engine run: only an uncommitted plan can be left over.
            if ticks_at_head(&self.work_tree, &self.plan_path).is_empty() {
                let _ = std::fs::remove_file(self.work_tree.join(&self.plan_path));
            }
            return Ok(());
        };
        let Some(index) = state.current() else {
            return Ok(());
        };
        let mut depth = state.cycles[index].history.len();
        while depth > 1 {
            self.engine.begin()?.rollback(RollbackTo::PreviousPhase)?;
            depth -= 1;
        }
        if depth == 1 {
            self.engine.begin()?.rollback(RollbackTo::PhaseStart)?;
        }
        self.journal.record(&ConductorEvent::StepReset(StepReset {
            step: state.cycles[index].n,
        }))?;
        Ok(())
    }

    /// On a resume, the last phase commit a killed conductor left unjudged (or judged,
    /// with the verdict not yet acted on) is settled before anything else: the current
    /// cycle's RED or GREEN commit, or the REFACTOR that closed the cycle before it.
    /// An ACCEPT is recorded; a REJECT within the budget undoes the phase (reopening a
    /// REFACTOR) and leaves its findings for the revise leaf.
    pub(crate) fn settle_unjudged(&self) -> Result<(), Halt> {
        let Some(run_id) = self.cursor.run_id() else {
            return Ok(());
        };
        let events =
            tdd_engine::ledger::Ledger::open(&self.location.database)?.events(Some(run_id))?;
        let Some(state) = RunState::project(&events, self.engine.kinds())
            .map_err(tdd_engine::ledger::LedgerError::from)?
        else {
            return Ok(());
        };
        let Some((index, name, commit)) = last_phase_commit(&state) else {
            return Ok(());
        };
        let n = state.cycles[index].n;
        let (mut accepted, mut verdict) = (false, None);
        for event in self.journal.events()? {
            if event.step() != Some(n) {
                continue;
            }
            // A commit's sha does not make it the one judged before: a revise (or a
            // restarted step) that writes the same tree on the same parent within the
            // same second makes the same sha again. A verdict or acceptance counts only
            // until that commit was undone or its step reset; after that, the commit at
            // HEAD is new work and is judged afresh.
            let this = |phase: &str, judged: &str| phase == name && judged == commit;
            match event {
                ConductorEvent::StepReset(_) => (accepted, verdict) = (false, None),
                ConductorEvent::PhaseAccepted(p) if this(&p.phase, &p.commit) => accepted = true,
                ConductorEvent::PhaseVerdict(p) if this(&p.phase, &p.commit) => verdict = Some(p),
                ConductorEvent::PhaseUndone(p) if this(&p.phase, &p.commit) => {
                    (accepted, verdict) = (false, None)
                }
                _ => {}
            }
        }
        if accepted {
            return Ok(());
        }
        let planned = state.plan.cycles[index].clone();
        self.settle(&planned, phase_named(name), &commit, verdict)
    }

    /// Judges `commit`, the work of `phase` of `planned` (unless `recorded` already
    /// holds its verdict), and acts on the verdict.
    fn settle(
        &self,
        planned: &PlannedCycle,
        phase: Phase,
        commit: &str,
        recorded: Option<PhaseVerdict>,
    ) -> Result<(), Halt> {
        let name = phase.trailer();
        let mut timing = Timing::default();
        let revisions = self.resume_point(planned.n, name)?.revisions;
        let decision = match recorded {
            Some(p) => {
                let findings = findings_of(&p);
                (p.decision == Decision::Accept, p.reason, findings)
            }
            None => {
                let base = Git::new(&self.work_tree).text(["rev-parse", &format!("{commit}^")])?;
                let v = self.judge(planned, phase, commit, &base, revisions, &mut timing)?;
                (v.decision == Decision::Accept, v.reason, v.findings)
            }
        };
        if let (false, reason, findings) = decision {
            // `resume_point` hands these findings to the revise leaf.
            let rounds = revisions.saturating_sub(1);
            self.undo_rejected(planned.n, phase, commit)?;
            self.reject(planned, phase, &reason, &findings, rounds)?;
            return Ok(());
        }
        self.record_phase(PhaseRecord {
            step: planned.n,
            phase: name.to_string(),
            commit: commit.to_string(),
            revisions,
            leaf_ms: ms(timing.leaf),
            engine_ms: 0,
            cost_usd: 0.0,
            reverted: Vec::new(),
            undeclared: Vec::new(),
            red_first_violation: false,
        })?;
        if phase == Phase::AwaitingRefactor {
            // The accepted REFACTOR closed its step, which `step` then comments on before
            // the next begins; the resume goes straight on to the next step, so the
            // comment is written here, or a bail there would leave the step without it.
            self.write_step_comment(planned.n)?;
            self.publish(false)?;
        }
        Ok(())
    }
}
