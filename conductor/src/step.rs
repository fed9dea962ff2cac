//! One step: RED, GREEN and REFACTOR, each a developer leaf, the engine's advance and
//! a blind verifier, with revise rounds on REJECT.

use std::time::Duration;
use std::time::Instant;

use serde_json::json;
use tdd_engine::git::Git;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::AdvanceOutcome;
use tdd_engine::run::Phase;
use tdd_engine::run::RunState;
use tdd_leaves::Decision;
use tdd_leaves::Request;
use tdd_prompts::DeveloperInput;
use tdd_prompts::Prompt;
use tdd_prompts::RepoFacts;
use tdd_prompts::Step;
use tdd_prompts::TestId;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::decide::Move;
use crate::decide::Resume;
use crate::decide::next_move;
use crate::error::ConductError;
use crate::error::Doing;
use crate::error::Halt;
use crate::events::ConductorEvent;
use crate::events::GateRefused;
use crate::events::PhaseRecord;
use crate::events::StepDone;
use crate::leaf::Who;

/// Where a step's time went.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Timing {
    /// In leaves (launch to collected response).
    pub leaf: Duration,
    /// In the engine (advance, rollback: suites and gates).
    pub engine: Duration,
}

pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Conductor<'_> {
    /// Drives the step at `index` until its cycle closes, then reports it.
    pub(crate) fn step(&self, state: &RunState, index: usize) -> Result<(), Halt> {
        let planned = state.plan.cycles[index].clone();
        let n = planned.n;
        let _span = tracing::info_span!("step", n, run_id = state.run_id.as_str()).entered();
        let began = Instant::now();
        let mut timing = Timing::default();
        loop {
            let phase = self
                .engine
                .status()?
                .and_then(|state| state.cycles.iter().find(|c| c.n == n).map(|c| c.phase));
            match next_move(phase) {
                Move::Done => break,
                Move::Drive(phase) => self.phase(&planned, phase, &mut timing)?,
                Move::AskUser(phase) => return Err(self.question(&planned, phase).into()),
            }
        }
        let total = began.elapsed();
        let overhead = total.saturating_sub(timing.leaf + timing.engine);
        self.journal.record(&ConductorEvent::StepDone(StepDone {
            step: n,
            total_ms: ms(total),
            leaf_ms: ms(timing.leaf),
            engine_ms: ms(timing.engine),
            overhead_ms: ms(overhead),
        }))?;
        tdd_engine::failpoint::hit("conduct_step_done");
        let forge = Instant::now();
        self.write_step_comment(n)?;
        self.publish(false)?;
        let forge = forge.elapsed();
        self.progress.event(
            "step_done",
            json!({ "step": n, "overhead_ms": ms(overhead), "forge_ms": ms(forge) }),
            &format!("step {n} done: {}", planned.title),
        );
        Ok(())
    }

    /// The `needs_user` bail of a step at a phase no leaf can move: the question a
    /// human must answer, in full.
    fn question(&self, planned: &PlannedCycle, phase: Phase) -> Bail {
        let n = planned.n;
        let criterion = self
            .issue
            .spec_for(planned)
            .map(|s| s.text().to_string())
            .unwrap_or_else(|_| planned.title.clone());
        let tests = planned.tests.join(", ");
        let detail = if phase == Phase::SensitivityRequired {
            format!(
                "step {n}'s test {tests} passed as soon as it was written, before any implementation. Is \"{criterion}\" already true of the code? If it is, the step has nothing to build; if it is not, the test does not check it."
            )
        } else {
            format!(
                "step {n} ({tests}) is at {phase}, which needs a person: no developer leaf moves it."
            )
        };
        Bail::new(
            BailCause::NeedsUser,
            detail,
            "the step is reset; if it is already true, `tdd cycle skip --reason \"...\"` and `tdd conduct` again goes on with the next step; if not, state the criterion more precisely in the issue and `tdd conduct` again starts the step over",
        )
        .at(n, phase.trailer())
    }

    /// One phase: developer leaf, advance, verifier; revise on REJECT within budget.
    fn phase(&self, planned: &PlannedCycle, phase: Phase, timing: &mut Timing) -> Result<(), Halt> {
        let (n, name) = (planned.n, phase.trailer());
        let _span = tracing::info_span!("phase", phase = name).entered();
        // Refusals, like REJECTs, count across invocations: a stopped or killed
        // conductor's resume bails where an uninterrupted run would.
        let Resume {
            mut attempt,
            mut revisions,
            mut findings,
            mut refusals,
        } = self.resume_point(n, name)?;
        if !findings.is_empty() {
            // A REJECT before a resume: within the budget, its revise comes next.
            self.reject(planned, phase, "an earlier REJECT", &findings, revisions)?;
        }
        let mut cost = 0.0;
        let start = *timing;
        loop {
            let (response, took) = self.developer_leaf(planned, phase, attempt, &findings)?;
            timing.leaf += took;
            cost += response.cost_usd.unwrap_or(0.0);
            if phase == Phase::AwaitingRefactor {
                self.tick(n)?;
            }
            let base = Git::new(&self.work_tree).text(["rev-parse", "HEAD"])?;
            let began = Instant::now();
            let outcome = self
                .engine
                .begin()
                .and_then(|tx| tx.advance(tdd_engine::run::Unchanged::Judge, self.progress))
                .doing(|| format!("judging {} of step {n}", name.to_uppercase()))?;
            timing.engine += began.elapsed();
            tdd_engine::failpoint::hit(&format!("conduct_after_advance_{name}"));
            if let Some(refused) = &outcome.refused {
                refusals += 1;
                findings = self.refused(n, name, refused, refusals, &response.text)?;
                attempt += 1;
                continue;
            }
            let commit = outcome.commit.clone().unwrap_or_else(|| base.clone());
            self.announce_commit(n, name, &commit, &outcome);
            let verdict = self.judge(planned, phase, &commit, &base, revisions, timing)?;
            if verdict.decision == Decision::Accept {
                let spent = Timing {
                    leaf: timing.leaf - start.leaf,
                    engine: timing.engine - start.engine,
                };
                self.record_phase(PhaseRecord {
                    step: n,
                    phase: name.to_string(),
                    commit: commit.clone(),
                    revisions,
                    leaf_ms: ms(spent.leaf),
                    engine_ms: ms(spent.engine),
                    cost_usd: cost,
                    reverted: outcome.reverted.clone(),
                    undeclared: outcome.undeclared.clone(),
                    red_first_violation: outcome.red.is_some()
                        && outcome.to == Phase::SensitivityRequired,
                })?;
                return Ok(());
            }
            // Undone first: a bail then finds the step half-done and resets it whole.
            let began = Instant::now();
            self.undo_rejected(n, phase, &commit)?;
            timing.engine += began.elapsed();
            self.reject(
                planned,
                phase,
                &verdict.reason,
                &verdict.findings,
                revisions,
            )?;
            revisions += 1;
            attempt += 1;
            findings = crate::decide::answerable(&verdict.reason, &verdict.findings);
        }
    }

    /// Tells the progress stream what the engine committed for a phase.
    fn announce_commit(&self, n: u32, name: &str, commit: &str, outcome: &AdvanceOutcome) {
        let reverted = if outcome.reverted.is_empty() {
            String::new()
        } else {
            format!(
                "; the engine reverted locked {}",
                outcome.reverted.join(", ")
            )
        };
        self.progress.event(
            "phase_committed",
            json!({ "step": n, "phase": name, "commit": commit, "reverted": outcome.reverted }),
            &format!(
                "step {n} {name}: committed {} ({} -> {}){reverted}",
                &commit[..commit.len().min(10)],
                outcome.from,
                outcome.to,
            ),
        );
    }

    /// Records an accepted phase: what the PR's phase table and integrity events read.
    pub(crate) fn record_phase(&self, record: PhaseRecord) -> Result<(), Halt> {
        self.journal
            .record(&ConductorEvent::PhaseAccepted(record))?;
        Ok(())
    }

    /// Records a refused advance; bails after too many; returns the findings for the
    /// next developer attempt.
    fn refused(
        &self,
        n: u32,
        name: &str,
        refused: &tdd_engine::run::Refused,
        refusals: u32,
        output: &str,
    ) -> Result<Vec<String>, Halt> {
        self.journal
            .record(&ConductorEvent::GateRefused(GateRefused {
                step: n,
                phase: name.to_string(),
                reason: refused.reason.to_string(),
                detail: refused.detail.clone(),
            }))?;
        self.progress.event(
            "gate_refused",
            json!({ "step": n, "phase": name, "reason": refused.reason }),
            &format!(
                "step {n} {name}: the engine refused: {} ({})",
                refused.reason, refused.detail
            ),
        );
        if crate::decide::refusals_exhausted(refusals) {
            return Err(Bail::new(
                BailCause::GateRefusedRepeatedly,
                format!(
                    "the engine refused {name} of step {n} {refusals} times; last: {}: {}",
                    refused.reason, refused.detail
                ),
                "read `tdd status` for what the gate wants, do it by hand or adjust the plan, then run `tdd conduct` again",
            )
            .at(n, name)
            .tail(output)
            .into());
        }
        Ok(vec![format!("{}: {}", refused.reason, refused.detail)])
    }

    fn developer_leaf(
        &self,
        planned: &PlannedCycle,
        phase: Phase,
        attempt: u32,
        findings: &[String],
    ) -> Result<(tdd_leaves::Response, Duration), Halt> {
        let input = DeveloperInput {
            issue: self.issue.clone(),
            step: Step {
                criterion: self
                    .issue
                    .spec_for(planned)
                    .ok()
                    .map(|s| s.text().to_string()),
                cycle: planned.clone(),
            },
            phase,
            targets: TestId::planned(planned),
            repo: RepoFacts::default(),
            findings: findings.to_vec(),
        };
        let mut request = Request::new(
            Prompt::developer(&input)?,
            self.issue.number(),
            planned.n,
            &self.work_tree,
        );
        request.attempt = attempt;
        self.run_leaf(Who::Developer, request, planned.n, phase.trailer())
    }

    /// Ticks step `n` in the plan file; the REFACTOR advance commits it with the phase.
    fn tick(&self, n: u32) -> Result<(), ConductError> {
        let path = self.work_tree.join(&self.plan_path);
        let io =
            |source| ConductError::io(format!("ticking step {n} in {}", self.plan_path), source);
        let text = std::fs::read_to_string(&path).map_err(io)?;
        std::fs::write(&path, crate::plan::tick(&text, n)).map_err(io)
    }
}
