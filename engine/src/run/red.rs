//! RED: the cycle's targets are observed in the live tree and must fail for a reason
//! of their own body; implementation files are locked; the commit holds tests only.

use serde_json::json;

use super::Progress;
use super::RunError;
use super::Session;
use super::advance::AdvanceOutcome;
use super::advance::Ctx;
use super::candidate;
use super::events::RedFirstViolation;
use super::events::RunEvent;
use super::events::TargetAdopted;
use super::gates::RedDecision;
use super::gates::Refused;
use super::gates::red_gate;
use super::phase::Phase;
use super::phase::Verb;
use crate::ledger::Ledger;
use crate::observe::Adapter;
use crate::observe::Project;
use crate::observe::TargetStatus;
use crate::observe::adapter_for;
use crate::observe::observe_target;

impl Session {
    /// RED (and a pin cycle's test): the targets must fail in their own bodies (a pin's
    /// must pass); implementation files are locked, and only tests are committed.
    pub(super) fn red(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
        progress: &dyn Progress,
    ) -> Result<(), RunError> {
        self.enforce_locks(ledger, ctx, outcome)?;
        let git = crate::git::Git::new(&self.work_tree);
        let head = &ctx.head;
        let head_tree = &ctx.head_tree;
        let red_commit = candidate::build(&git, head_tree, &ctx.now.tree, |p| {
            ctx.is_test(p) && !ctx.is_harness(p)
        })?;
        if let Some(refusal) = self.baseline_tests_changed(ctx, head_tree, &red_commit)? {
            return self.refuse(ledger, ctx, outcome, refusal);
        }
        // Who the commit will be by is learned while the targets run.
        ctx.stamp.start(&self.work_tree);
        let mut passed_all = true;
        let mut decision = None;
        for test in &ctx.targets {
            let name = ctx.project_of(test);
            let project = self.run_project(&name, ctx.pinned.as_ref())?;
            let adapter = adapter_for(project.config.adapter);
            progress.event(
                "target_run",
                json!({ "target": test, "phase": ctx.phase }),
                &format!("running target {test}..."),
            );
            let (mut observation, mut verdict) = observe_target(adapter.as_ref(), &project, test)?;
            if verdict.status == TargetStatus::NotFound && ctx.targets.len() == 1 {
                match self.adopt_new_test(
                    ledger,
                    ctx,
                    adapter.as_ref(),
                    &project,
                    test,
                    progress,
                )? {
                    Ok(Some(only)) => {
                        (observation, verdict) = observe_target(adapter.as_ref(), &project, &only)?;
                    }
                    Ok(None) => {}
                    Err(refusal) => {
                        outcome.observations.push(observation);
                        return self.refuse(ledger, ctx, outcome, refusal);
                    }
                }
            }
            let kind = observation
                .tests
                .get(&verdict.id)
                .and_then(|r| r.failure.as_ref())
                .map(|f| f.kind);
            let this = red_gate(project.config.adapter, &verdict, kind);
            outcome.observations.push(observation);
            match this {
                RedDecision::Refuse(refusal) => {
                    outcome.red = Some(RedDecision::Refuse(refusal.clone()));
                    return self.refuse(ledger, ctx, outcome, refusal);
                }
                RedDecision::PassedOnArrival => {}
                RedDecision::Red { .. } => passed_all = false,
            }
            decision = Some(this);
        }
        let pin = ctx.phase == Phase::AwaitingPin;
        if passed_all && !pin {
            let event = RunEvent::RedFirstViolation(RedFirstViolation {
                n: ctx.planned.n,
                tests: ctx.targets.clone(),
            });
            ledger.record(Some(&ctx.state.run_id), &event)?;
        }
        if pin && !passed_all {
            let refusal = Refused {
                reason: "pin_failed",
                verb: Verb::WriteTest,
                detail: "a pin test must pass on arrival: it pins behaviour that already exists"
                    .into(),
            };
            return self.refuse(ledger, ctx, outcome, refusal);
        }
        outcome.red = decision;
        let to = if passed_all {
            Phase::SensitivityRequired
        } else {
            Phase::AwaitingImpl
        };
        let message = ctx
            .planned
            .commit_red
            .clone()
            .or(if pin {
                ctx.planned.commit_pin.clone()
            } else {
                None
            })
            .unwrap_or_else(|| format!("test: {}", ctx.planned.title));
        self.commit_candidate(ledger, ctx, outcome, head, &red_commit, &message, to)
    }

    /// The plan's target `test` is not collected: the one test new in this cycle stands in
    /// for it (recorded as `target_adopted`); with none, nothing changes; with several,
    /// the refusal asks to name one.
    fn adopt_new_test(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        adapter: &dyn Adapter,
        project: &Project,
        test: &str,
        progress: &dyn Progress,
    ) -> Result<Result<Option<String>, Refused>, RunError> {
        let known = ctx
            .state
            .cycles
            .iter()
            .find(|c| c.n == ctx.planned.n)
            .map(|c| c.known_at_open.clone())
            .unwrap_or_default();
        let candidates = new_tests(adapter, project, &known)?;
        match candidates.as_slice() {
            [only] => {
                let event = RunEvent::TargetAdopted(TargetAdopted {
                    n: ctx.planned.n,
                    planned: test.to_string(),
                    test: only.clone(),
                });
                ledger.record(Some(&ctx.state.run_id), &event)?;
                progress.event(
                    "target_adopted",
                    json!({ "planned": test, "test": only }),
                    &format!("{test} not found; adopting the one new test {only}"),
                );
                Ok(Ok(Some(only.clone())))
            }
            [] => Ok(Ok(None)),
            many => Ok(Err(Refused {
                reason: "ambiguous_target",
                verb: Verb::NameTargetTest,
                detail: format!(
                    "{test} is not collected and several tests are new in this cycle: {}; name one with `tdd target <id>`",
                    many.join(", ")
                ),
            })),
        }
    }
}

/// Collected tests of `project` that were not known when the cycle opened.
pub(crate) fn new_tests(
    adapter: &dyn crate::observe::Adapter,
    project: &Project,
    known: &std::collections::BTreeSet<String>,
) -> Result<Vec<String>, RunError> {
    let collection = adapter.collect(project)?;
    Ok(collection
        .ids
        .into_iter()
        .filter(|id| !known.contains(id))
        .collect())
}
