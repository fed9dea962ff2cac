//! Revise rounds: a REJECT within the budget undoes the phase and hands its findings
//! to the next developer leaf; where a phase stands is read back from the journal
//! (`decide::resume_point`), so a resumed conductor continues exactly there.

use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;
use tdd_engine::run::RollbackTo;
use tdd_leaves::Decision;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::decide::Resume;
use crate::error::Halt;
use crate::events::ConductorEvent;
use crate::events::PhaseUndone;

impl Conductor<'_> {
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
        if crate::decide::budget_exhausted(rejects, budget) {
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
            self.engine.begin()?.reopen_refactor(n)?;
        } else {
            self.engine.begin()?.rollback(RollbackTo::PreviousPhase)?;
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
        Ok(crate::decide::resume_point(
            &self.journal.events()?,
            n,
            name,
        ))
    }
}
