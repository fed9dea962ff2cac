//! The step loop's decisions, as pure functions of what the engine and the journal
//! recorded: which move a cycle's phase calls for, where a phase resumes, and when the
//! refusals or the REJECTs of a phase are too many. The loop (`step.rs`, `revise.rs`)
//! acts on them; these tests pin them without a leaf, a suite or a repository.

use tdd_engine::run::Phase;
use tdd_leaves::Decision;

use crate::events::ConductorEvent;
use crate::events::PhaseVerdict;

/// How many refused advances of one phase the conductor hands back to a developer leaf;
/// one more bails (`gate_refused_repeatedly`).
pub(crate) const MAX_REFUSALS: u32 = 2;

/// What the step loop does with a cycle, from the phase the engine projects for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Move {
    /// The cycle is over (closed or skipped), or gone from the run: the step is done.
    Done,
    /// A developer leaf works on this phase, then the engine judges it.
    Drive(Phase),
    /// No leaf moves this phase: a person must answer (`needs_user`).
    AskUser(Phase),
}

/// The move for a cycle at `phase`; `None` when the run or the cycle is gone.
pub(crate) fn next_move(phase: Option<Phase>) -> Move {
    match phase {
        None | Some(Phase::Closed | Phase::Skipped) => Move::Done,
        Some(phase @ (Phase::AwaitingTest | Phase::AwaitingImpl | Phase::AwaitingRefactor)) => {
            Move::Drive(phase)
        }
        Some(other) => Move::AskUser(other),
    }
}

/// Where a phase resumes: its next developer attempt, the revise rounds spent, and the
/// findings of an unanswered REJECT.
#[derive(Debug, Clone, PartialEq, Eq)]
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

impl Resume {
    /// A phase nobody has worked on yet.
    fn fresh() -> Resume {
        Resume {
            attempt: 1,
            revisions: 0,
            findings: Vec::new(),
            refusals: 0,
        }
    }
}

/// What a revise leaf is told to answer: the findings, else the reason.
pub(crate) fn answerable(reason: &str, findings: &[String]) -> Vec<String> {
    if findings.is_empty() {
        vec![reason.to_string()]
    } else {
        findings.to_vec()
    }
}

/// The findings a recorded REJECT hands to the revise leaf.
pub(crate) fn findings_of(verdict: &PhaseVerdict) -> Vec<String> {
    answerable(&verdict.reason, &verdict.findings)
}

/// Where phase `name` of step `n` resumes, folded from the journal's events in order:
/// a step reset starts it over; each refusal and each REJECT is one more attempt; a
/// REJECT's findings stay unanswered until a later verdict or acceptance of the phase.
pub(crate) fn resume_point(events: &[ConductorEvent], n: u32, name: &str) -> Resume {
    let mut point = Resume::fresh();
    for event in events.iter().filter(|e| e.step() == Some(n)) {
        match event {
            ConductorEvent::StepReset(_) => point = Resume::fresh(),
            ConductorEvent::GateRefused(p) if p.phase == name => {
                point.attempt += 1;
                point.refusals += 1;
            }
            ConductorEvent::PhaseVerdict(p)
                if p.phase == name && p.decision == Decision::Reject =>
            {
                point.attempt += 1;
                point.revisions += 1;
                point.findings = findings_of(p);
            }
            ConductorEvent::PhaseVerdict(p) if p.phase == name => point.findings.clear(),
            ConductorEvent::PhaseAccepted(p) if p.phase == name => point.findings.clear(),
            _ => {}
        }
    }
    point
}

/// True when `refusals` refused advances of one phase are more than the conductor hands
/// back to a developer.
pub(crate) fn refusals_exhausted(refusals: u32) -> bool {
    refusals > MAX_REFUSALS
}

/// True when `rejects` REJECTs of one phase (across every invocation of the run) spend
/// more than `budget` revise rounds.
pub(crate) fn budget_exhausted(rejects: usize, budget: u32) -> bool {
    rejects > usize::try_from(budget).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::GateRefused;
    use crate::events::PhaseRecord;
    use crate::events::StepReset;

    fn refused(step: u32, phase: &str) -> ConductorEvent {
        ConductorEvent::GateRefused(GateRefused {
            step,
            phase: phase.into(),
            reason: "target_passes".into(),
            detail: "it passed".into(),
        })
    }

    fn verdict(step: u32, phase: &str, decision: Decision, findings: &[&str]) -> ConductorEvent {
        ConductorEvent::PhaseVerdict(PhaseVerdict {
            step,
            phase: phase.into(),
            commit: "c0ffee".into(),
            round: 0,
            decision,
            reason: "the reason".into(),
            findings: findings.iter().map(|f| f.to_string()).collect(),
            verifier: "verifier-1".into(),
        })
    }

    fn accepted(step: u32, phase: &str) -> ConductorEvent {
        ConductorEvent::PhaseAccepted(PhaseRecord {
            step,
            phase: phase.into(),
            commit: "c0ffee".into(),
            revisions: 0,
            leaf_ms: 0,
            engine_ms: 0,
            cost_usd: 0.0,
            reverted: Vec::new(),
            undeclared: Vec::new(),
            red_first_violation: false,
        })
    }

    #[test]
    fn a_cycle_is_driven_at_the_three_working_phases_and_asks_a_person_elsewhere() {
        assert_eq!(next_move(None), Move::Done);
        assert_eq!(next_move(Some(Phase::Closed)), Move::Done);
        assert_eq!(next_move(Some(Phase::Skipped)), Move::Done);
        for phase in [
            Phase::AwaitingTest,
            Phase::AwaitingImpl,
            Phase::AwaitingRefactor,
        ] {
            assert_eq!(next_move(Some(phase)), Move::Drive(phase));
        }
        assert_eq!(
            next_move(Some(Phase::SensitivityRequired)),
            Move::AskUser(Phase::SensitivityRequired)
        );
    }

    #[test]
    fn a_phase_nobody_worked_on_starts_at_the_first_attempt() {
        assert_eq!(resume_point(&[], 1, "green"), Resume::fresh());
        let other_step = [
            refused(2, "green"),
            verdict(2, "green", Decision::Reject, &[]),
        ];
        assert_eq!(resume_point(&other_step, 1, "green"), Resume::fresh());
        let other_phase = [refused(1, "red"), verdict(1, "red", Decision::Reject, &[])];
        assert_eq!(resume_point(&other_phase, 1, "green"), Resume::fresh());
    }

    #[test]
    fn refusals_and_rejects_are_attempts_and_a_reject_leaves_its_findings() {
        let events = [
            refused(1, "green"),
            verdict(1, "green", Decision::Reject, &["no test of the empty case"]),
        ];
        let point = resume_point(&events, 1, "green");
        assert_eq!(point.attempt, 3);
        assert_eq!(point.refusals, 1);
        assert_eq!(point.revisions, 1);
        assert_eq!(
            point.findings,
            vec!["no test of the empty case".to_string()]
        );
    }

    #[test]
    fn a_reject_without_findings_is_answered_by_its_reason() {
        let events = [verdict(1, "red", Decision::Reject, &[])];
        assert_eq!(
            resume_point(&events, 1, "red").findings,
            vec!["the reason".to_string()]
        );
    }

    #[test]
    fn a_later_verdict_or_acceptance_answers_the_findings_but_keeps_the_count() {
        let reject = verdict(1, "green", Decision::Reject, &["x"]);
        let answered = [reject.clone(), verdict(1, "green", Decision::Accept, &[])];
        let point = resume_point(&answered, 1, "green");
        assert!(point.findings.is_empty());
        assert_eq!(point.revisions, 1);
        let accepted = [reject, accepted(1, "green")];
        assert!(resume_point(&accepted, 1, "green").findings.is_empty());
    }

    #[test]
    fn a_step_reset_starts_every_phase_of_it_over() {
        let events = [
            refused(1, "green"),
            refused(1, "green"),
            verdict(1, "green", Decision::Reject, &["x"]),
            ConductorEvent::StepReset(StepReset { step: 1 }),
            refused(1, "green"),
        ];
        let point = resume_point(&events, 1, "green");
        assert_eq!(point.refusals, 1);
        assert_eq!(point.revisions, 0);
        assert_eq!(point.attempt, 2);
        assert!(point.findings.is_empty());
    }

    #[test]
    fn the_third_refusal_and_the_reject_past_the_budget_bail() {
        assert!(!refusals_exhausted(MAX_REFUSALS));
        assert!(refusals_exhausted(MAX_REFUSALS + 1));
        assert!(!budget_exhausted(2, 2));
        assert!(budget_exhausted(3, 2));
        assert!(budget_exhausted(1, 0));
        assert!(!budget_exhausted(0, 0));
    }
}
