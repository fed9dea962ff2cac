//! Sensitivity: a test must be able to fail.
//!
//! The automatic check at GREEN: with the cycle's implementation diff reversed,
//! the target must fail, or the test does not test the change. The manual check
//! at SENSITIVITY_REQUIRED (pins, red-first violations) is judged from recorded
//! `tdd test` runs and a byte-exact restore.
//!
//! The check runs in the clean room on the RED commit's tree (HEAD while GREEN is
//! judged): the test files there are the ones GREEN sees (tests are locked after RED),
//! and the implementation is the one before GREEN, exactly "the GREEN tree with this
//! cycle's implementation diff reversed". The target must be found there and fail in
//! its own body (as a RED must); a target missing there proves nothing. The user's
//! work tree is not touched.

use serde_json::json;

use super::events::InsensitiveTest;
use super::events::RunEvent;

use super::Progress;
use super::RunError;
use super::advance::AdvanceOutcome;
use super::advance::Ctx;
use super::gates::RedDecision;
use super::gates::Refused;
use super::gates::red_gate;
use super::phase::Phase;
use super::phase::Verb;
use crate::ledger::Ledger;
use crate::observe::adapter_for;
use crate::observe::observe_target;

impl super::Session {
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
            let project = self.run_project(&name, ctx.pinned.as_ref())?;
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

    /// Every target must fail in its own body with the cycle's implementation reversed
    /// (`red_tree`, the RED commit's tree), in the clean room.
    pub(super) fn sensitivity(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        red_tree: &str,
        progress: &dyn Progress,
    ) -> Result<Option<Refused>, RunError> {
        for test in &ctx.targets {
            let name = ctx.project_of(test);
            progress.event(
                "sensitivity_check",
                json!({ "target": test }),
                &format!("sensitivity: running {test} without the implementation..."),
            );
            let projects =
                self.in_clean_room(ctx.pinned.as_ref(), red_tree, std::slice::from_ref(&name))?;
            let Some(project) = projects.first() else {
                return Err(RunError::UnknownProject { name });
            };
            let adapter = adapter_for(project.config.adapter);
            let (observation, verdict) = observe_target(adapter.as_ref(), project, test)?;
            let kind = observation
                .tests
                .get(&verdict.id)
                .and_then(|r| r.failure.as_ref())
                .map(|f| f.kind);
            outcome.observations.push(observation);
            match red_gate(project.config.adapter, &verdict, kind) {
                RedDecision::Red { .. } => {}
                RedDecision::PassedOnArrival => {
                    let event = RunEvent::InsensitiveTest(InsensitiveTest {
                        n: ctx.planned.n,
                        target: test.clone(),
                    });
                    ledger.record(Some(&ctx.state.run_id), &event)?;
                    return Ok(Some(Refused {
                        reason: "insensitive_test",
                        verb: Verb::RollbackToRed,
                        detail: format!(
                            "{test} still passes with this cycle's implementation reversed: it does not test the change"
                        ),
                    }));
                }
                RedDecision::Refuse(why) if why.reason == "runner_error" => {
                    return Ok(Some(Refused {
                        reason: "runner_error",
                        verb: Verb::ResolveBlocker,
                        detail: format!(
                            "the sensitivity run of {test} could not be observed: {}",
                            why.detail
                        ),
                    }));
                }
                RedDecision::Refuse(why) => {
                    return Ok(Some(Refused {
                        reason: "sensitivity_inconclusive",
                        verb: Verb::RollbackToRed,
                        detail: format!(
                            "with this cycle's implementation reversed, {test} did not fail in its own body ({}: {}); a test that is missing or cannot load there proves nothing",
                            why.reason, why.detail
                        ),
                    }));
                }
            }
        }
        Ok(None)
    }
}
