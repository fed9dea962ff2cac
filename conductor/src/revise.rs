//! Revise rounds: a REJECT within the budget undoes the phase and hands its findings
//! to the next developer leaf; where a phase stands is read back from the journal, so
//! a resumed conductor continues exactly there.

use tdd_engine::git::Git;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;
use tdd_engine::run::RunState;
use tdd_leaves::Decision;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::error::Halt;
use crate::events::ConductorEvent;
use crate::events::PhaseRecord;
use crate::events::PhaseUndone;
use crate::events::PhaseVerdict;
use crate::step::Timing;
use crate::step::ms;

/// Where a phase resumes: its next developer attempt, the revise rounds spent, and the
/// findings of an unanswered REJECT.
#[derive(Debug)]
pub(crate) struct Resume {
    /// The next developer attempt.
    pub(crate) attempt: u32,
    /// Revise rounds spent.
    pub(crate) revisions: u32,
    /// The findings of an unanswered REJECT.
    pub(crate) findings: Vec<String>,
    /// Refused advances so far: a resume does not refill the refusals tolerated.
    pub(crate) refusals: u32,
}

/// The findings a recorded REJECT hands to the revise leaf: its findings, else its
/// reason.
fn findings_of(verdict: &PhaseVerdict) -> Vec<String> {
    answerable(&verdict.reason, &verdict.findings)
}

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

/// What a revise leaf is told of a REJECT: its findings, else its reason.
pub(crate) fn answerable(reason: &str, findings: &[String]) -> Vec<String> {
    if findings.is_empty() {
        vec![reason.to_string()]
    } else {
        findings.to_vec()
    }
}

impl Conductor<'_> {
    /// On a resume, the last phase commit a killed conductor left unjudged (or judged,
    /// with the verdict not yet acted on) is settled before anything else: the current
    /// cycle's RED or GREEN commit, or the REFACTOR that closed the cycle before it.
    /// An ACCEPT is recorded; a REJECT within the budget undoes the phase (reopening a
    /// REFACTOR) and leaves its findings for the revise leaf.
    pub(crate) fn settle_unjudged(&mut self) -> Result<(), Halt> {
        let Some(run_id) = self.run_id.clone() else {
            return Ok(());
        };
        let events =
            tdd_engine::ledger::Ledger::open(&self.location.database)?.events(Some(&run_id))?;
        let Some(state) =
            RunState::project(&events).map_err(tdd_engine::ledger::LedgerError::from)?
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
        &mut self,
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

    /// A REJECT beyond the budget bails.
    pub(crate) fn reject(
        &self,
        planned: &PlannedCycle,
        phase: Phase,
        reason: &str,
        findings: &[String],
        revisions: u32,
    ) -> Result<(), Halt> {
        let (n, name) = (planned.n, phase.trailer());
        let findings = format!("{reason}; findings: {}", findings.join("; "));
        // Every REJECT of this step and phase in this conduct run counts, including
        // those of earlier invocations: a resume does not refill the budget.
        let rejects = self
            .journal
            .verdicts()?
            .iter()
            .filter(|v| v.step == n && v.phase == name && v.decision == Decision::Reject)
            .count();
        let budget = self.config.conductor.revise_budget;
        if rejects > usize::try_from(budget).unwrap_or(usize::MAX) {
            return Err(Bail::new(
                BailCause::ReviseBudgetExhausted,
                format!("the verifier rejected {name} of step {n} {rejects} times ({revisions} revise rounds in this invocation, budget {budget}): {findings}"),
                "read the findings, fix the step by hand or raise [conductor] revise_budget, then run `tdd conduct` again",
            )
            .at(n, name)
            .into());
        }
        Ok(())
    }

    /// Undoes a rejected phase's commit so its revision starts where the phase did: the
    /// previous phase for RED and GREEN, the reopened REFACTOR of the closed cycle. The
    /// undo is journaled (`phase_undone`), so a resume never takes a revision that
    /// happens to recreate `commit` for the rejected commit itself.
    pub(crate) fn undo_rejected(&self, n: u32, phase: Phase, commit: &str) -> Result<(), Halt> {
        if phase == Phase::AwaitingRefactor {
            self.engine.reopen_refactor(n)?;
        } else {
            self.engine.rollback(true)?;
        }
        self.journal
            .record(&ConductorEvent::PhaseUndone(PhaseUndone {
                step: n,
                phase: phase.trailer().to_string(),
                commit: commit.to_string(),
            }))?;
        Ok(())
    }

    /// Where phase `name` of step `n` stands since the step last (re)started: the next
    /// developer attempt, the revise rounds spent, the refused advances and the findings
    /// of a REJECT that no developer has answered yet. A conductor resumed between a REJECT and its revise
    /// continues exactly there.
    pub(crate) fn resume_point(&self, n: u32, name: &str) -> Result<Resume, Halt> {
        let mut point = Resume {
            attempt: 1,
            revisions: 0,
            findings: Vec::new(),
            refusals: 0,
        };
        for event in self.journal.events()? {
            if event.step() != Some(n) {
                continue;
            }
            match event {
                ConductorEvent::StepReset(_) => {
                    point = Resume {
                        attempt: 1,
                        revisions: 0,
                        findings: Vec::new(),
                        refusals: 0,
                    }
                }
                ConductorEvent::GateRefused(p) if p.phase == name => {
                    point.attempt += 1;
                    point.refusals += 1;
                }
                ConductorEvent::PhaseVerdict(p)
                    if p.phase == name && p.decision == Decision::Reject =>
                {
                    point.attempt += 1;
                    point.revisions += 1;
                    point.findings = findings_of(&p);
                }
                ConductorEvent::PhaseVerdict(p) if p.phase == name => point.findings.clear(),
                ConductorEvent::PhaseAccepted(p) if p.phase == name => point.findings.clear(),
                _ => {}
            }
        }
        Ok(point)
    }
}
