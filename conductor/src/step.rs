//! One step: RED, GREEN and REFACTOR, each a developer leaf, the engine's advance and
//! a blind verifier, with revise rounds on REJECT.

use std::time::Duration;
use std::time::Instant;

use serde_json::json;
use tdd_engine::git::Git;
use tdd_engine::plan::PlannedCycle;
use tdd_engine::run::Phase;
use tdd_engine::run::RunState;
use tdd_engine::run::Snapshot;
use tdd_leaves::Decision;
use tdd_leaves::Request;
use tdd_leaves::VerifierVerdict;
use tdd_prompts::CommitSha;
use tdd_prompts::DeveloperInput;
use tdd_prompts::Prompt;
use tdd_prompts::RepoFacts;
use tdd_prompts::Step;
use tdd_prompts::TestId;
use tdd_prompts::VerifierInput;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::error::ConductError;
use crate::error::Halt;
use crate::leaf::Who;

/// Refused advances of one phase tolerated before `gate_refused_repeatedly`.
const MAX_REFUSALS: u32 = 2;

/// Where a phase resumes: its next developer attempt, the revise rounds spent, and the
/// findings of an unanswered REJECT.
#[derive(Debug)]
struct Resume {
    attempt: u32,
    revisions: u32,
    findings: Vec<String>,
}

/// The findings a REJECT verdict payload hands to the revise leaf: its findings, else
/// its reason.
fn findings_of(verdict: &serde_json::Value) -> Vec<String> {
    let findings: Vec<String> = verdict["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect();
    if findings.is_empty() {
        vec![verdict["reason"].as_str().unwrap_or_default().to_string()]
    } else {
        findings
    }
}

/// Where a step's time went.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Timing {
    /// In leaves (launch to collected response).
    pub leaf: Duration,
    /// In the engine (advance, rollback: suites and gates).
    pub engine: Duration,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Removes a verifier's scratch worktree, if it is there.
fn remove_scratch(work_tree: &std::path::Path, scratch: &std::path::Path) {
    if !scratch.exists() {
        return;
    }
    // Best effort: a leftover scratch tree is harmless, and pruned the next time one
    // cannot be removed cleanly.
    let git = Git::new(work_tree);
    let removed = git
        .output([
            "worktree",
            "remove",
            "--force",
            &scratch.display().to_string(),
        ])
        .is_ok();
    if !removed {
        let _ = std::fs::remove_dir_all(scratch);
        let _ = git.output(["worktree", "prune"]);
    }
}

impl Conductor<'_> {
    /// Drives the step at `index` until its cycle closes, then reports it.
    pub(crate) fn step(&mut self, state: &RunState, index: usize) -> Result<(), Halt> {
        let planned = state.plan.cycles[index].clone();
        let n = planned.n;
        let began = Instant::now();
        let mut timing = Timing::default();
        loop {
            let Some(state) = self.engine.status()? else {
                break;
            };
            let Some(cycle) = state.cycles.iter().find(|c| c.n == n) else {
                break;
            };
            match cycle.phase {
                Phase::Closed | Phase::Skipped => break,
                phase @ (Phase::AwaitingTest | Phase::AwaitingImpl | Phase::AwaitingRefactor) => {
                    self.phase(&planned, phase, &mut timing)?
                }
                other => return Err(self.question(&planned, other).into()),
            }
        }
        let total = began.elapsed();
        let overhead = total.saturating_sub(timing.leaf + timing.engine);
        self.journal.record(
            "conduct_step_done",
            json!({ "step": n, "total_ms": ms(total), "leaf_ms": ms(timing.leaf),
                    "engine_ms": ms(timing.engine), "overhead_ms": ms(overhead) }),
        )?;
        tdd_engine::failpoint::hit("conduct_step_done");
        let forge = Instant::now();
        self.write_step_comment(n)?;
        self.publish()?;
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
    fn phase(
        &mut self,
        planned: &PlannedCycle,
        phase: Phase,
        timing: &mut Timing,
    ) -> Result<(), Halt> {
        let (n, name) = (planned.n, phase.trailer());
        let Resume {
            mut attempt,
            mut revisions,
            mut findings,
        } = self.resume_point(n, name)?;
        let mut refusals = 0;
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
            let outcome = self.engine.advance(true, self.progress)?;
            timing.engine += began.elapsed();
            tdd_engine::failpoint::hit(&format!("conduct_after_advance_{name}"));
            if let Some(refused) = &outcome.refused {
                refusals += 1;
                findings = self.refused(n, name, refused, refusals, &response.text)?;
                attempt += 1;
                continue;
            }
            let commit = outcome.commit.clone().unwrap_or_else(|| base.clone());
            self.progress.event(
                "phase_committed",
                json!({ "step": n, "phase": name, "commit": commit, "reverted": outcome.reverted }),
                &format!(
                    "step {n} {name}: committed {} ({} -> {}){}",
                    &commit[..commit.len().min(10)],
                    outcome.from,
                    outcome.to,
                    if outcome.reverted.is_empty() {
                        String::new()
                    } else {
                        format!(
                            "; the engine reverted locked {}",
                            outcome.reverted.join(", ")
                        )
                    }
                ),
            );
            let verdict = self.judge(planned, phase, &commit, &base, revisions, timing)?;
            if verdict.decision == Decision::Accept {
                self.journal.record("conduct_phase", json!({
                    "step": n, "phase": name, "commit": commit, "revisions": revisions,
                    "leaf_ms": ms(timing.leaf - start.leaf), "engine_ms": ms(timing.engine - start.engine), "cost_usd": cost,
                    "reverted": outcome.reverted, "undeclared": outcome.undeclared,
                    "red_first_violation": outcome.red.is_some() && outcome.to == Phase::SensitivityRequired,
                }))?;
                return Ok(());
            }
            // Undone first: a bail then finds the step half-done and resets it whole.
            let began = Instant::now();
            self.undo_rejected(phase)?;
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
            findings = if verdict.findings.is_empty() {
                vec![verdict.reason.clone()]
            } else {
                verdict.findings.clone()
            };
        }
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
        self.journal.record(
            "gate_refused",
            json!({ "step": n, "phase": name, "reason": refused.reason, "detail": refused.detail }),
        )?;
        self.progress.event(
            "gate_refused",
            json!({ "step": n, "phase": name, "reason": refused.reason }),
            &format!(
                "step {n} {name}: the engine refused: {} ({})",
                refused.reason, refused.detail
            ),
        );
        if refusals > MAX_REFUSALS {
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

    /// The blind verifier's verdict on `commit`, recorded with its round.
    fn judge(
        &self,
        planned: &PlannedCycle,
        phase: Phase,
        commit: &str,
        base: &str,
        revisions: u32,
        timing: &mut Timing,
    ) -> Result<VerifierVerdict, Halt> {
        let (n, name) = (planned.n, phase.trailer());
        let verdict = self.verify(planned, phase, commit, base, revisions + 1, timing)?;
        self.journal.record(
            "phase_verdict",
            json!({
                "step": n, "phase": name, "commit": commit, "round": revisions,
                "decision": verdict.decision, "reason": verdict.reason, "findings": verdict.findings,
                "verifier": verdict.leaf_id,
            }),
        )?;
        tdd_engine::failpoint::hit(&format!("conduct_after_verdict_{name}"));
        self.progress.event(
            "verdict",
            json!({ "step": n, "phase": name, "decision": verdict.decision }),
            &format!(
                "step {n} {name}: verifier says {:?}: {}",
                verdict.decision, verdict.reason
            ),
        );
        Ok(verdict)
    }

    /// A conductor killed right after a REFACTOR advance closed a cycle left that
    /// commit unjudged (or judged, with its REJECT not yet acted on): its verifier runs
    /// now, before anything else, and a REJECT within the budget reopens the REFACTOR
    /// for a revise round.
    pub(crate) fn judge_unjudged_refactors(&mut self) -> Result<(), Halt> {
        let Some(run_id) = self.run_id.clone() else {
            return Ok(());
        };
        let events =
            tdd_engine::ledger::Ledger::open(&self.location.database)?.events(Some(&run_id))?;
        let Some(state) = RunState::project(&events) else {
            return Ok(());
        };
        let journal = self.journal.events()?;
        for (index, cycle) in state.cycles.iter().enumerate() {
            let refactor = cycle.commits.iter().rev().find(|(t, _)| t == "refactor");
            let (Phase::Closed, Some((_, commit))) = (cycle.phase, refactor) else {
                continue;
            };
            let n = u64::from(cycle.n);
            let mut accepted = false;
            let mut verdict = None;
            for (kind, p) in &journal {
                match kind.as_str() {
                    _ if p["step"] != n => {}
                    "step_reset" => (accepted, verdict) = (false, None),
                    "conduct_phase" if p["phase"] == "refactor" => accepted = true,
                    "phase_verdict"
                        if p["phase"] == "refactor" && p["commit"] == commit.as_str() =>
                    {
                        verdict = Some(p.clone())
                    }
                    _ => {}
                }
            }
            if accepted {
                continue;
            }
            let planned = state.plan.cycles[index].clone();
            self.settle_refactor(&planned, commit, verdict)?;
        }
        Ok(())
    }

    /// Judges the closed REFACTOR `commit` of `planned` (unless `recorded` already holds
    /// its verdict) and acts on the verdict: accepted, or reopened for a revise round.
    fn settle_refactor(
        &mut self,
        planned: &PlannedCycle,
        commit: &str,
        recorded: Option<serde_json::Value>,
    ) -> Result<(), Halt> {
        let phase = Phase::AwaitingRefactor;
        let mut timing = Timing::default();
        let revisions = self.resume_point(planned.n, "refactor")?.revisions;
        let decision = match recorded {
            Some(p) => (
                p["decision"] == "accept",
                p["reason"].as_str().unwrap_or_default().to_string(),
                findings_of(&p),
            ),
            None => {
                let base = Git::new(&self.work_tree).text(["rev-parse", &format!("{commit}^")])?;
                let v = self.judge(planned, phase, commit, &base, revisions, &mut timing)?;
                (v.decision == Decision::Accept, v.reason, v.findings)
            }
        };
        if let (false, reason, findings) = decision {
            // `resume_point` hands these findings to the revise leaf.
            let rounds = revisions.saturating_sub(1);
            self.undo_rejected(phase)?;
            self.reject(planned, phase, &reason, &findings, rounds)?;
            return Ok(());
        }
        self.journal.record(
            "conduct_phase",
            json!({
                "step": planned.n, "phase": "refactor", "commit": commit, "revisions": revisions,
                "leaf_ms": ms(timing.leaf), "engine_ms": 0, "cost_usd": 0.0,
                "reverted": [], "undeclared": [], "red_first_violation": false,
            }),
        )?;
        Ok(())
    }

    /// A REJECT beyond the budget bails.
    fn reject(
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
            .of_kind("phase_verdict")?
            .iter()
            .filter(|v| v["step"] == n && v["phase"] == name && v["decision"] == "reject")
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
    /// previous phase for RED and GREEN, the reopened REFACTOR of the closed cycle.
    fn undo_rejected(&self, phase: Phase) -> Result<(), Halt> {
        if phase == Phase::AwaitingRefactor {
            self.engine.reopen_refactor()?;
        } else {
            self.engine.rollback(true)?;
        }
        Ok(())
    }

    /// Where phase `name` of step `n` stands since the step last (re)started: the next
    /// developer attempt, the revise rounds spent and the findings of a REJECT that no
    /// developer has answered yet. A conductor resumed between a REJECT and its revise
    /// continues exactly there.
    fn resume_point(&self, n: u32, name: &str) -> Result<Resume, Halt> {
        let mut point = Resume {
            attempt: 1,
            revisions: 0,
            findings: Vec::new(),
        };
        for (kind, p) in self.journal.events()? {
            if p["step"] != n {
                continue;
            }
            match kind.as_str() {
                "step_reset" => {
                    point = Resume {
                        attempt: 1,
                        revisions: 0,
                        findings: Vec::new(),
                    }
                }
                "gate_refused" if p["phase"] == name => point.attempt += 1,
                "phase_verdict" if p["phase"] == name && p["decision"] == "reject" => {
                    point.attempt += 1;
                    point.revisions += 1;
                    point.findings = findings_of(&p);
                }
                "phase_verdict" | "conduct_phase" if p["phase"] == name => point.findings.clear(),
                _ => {}
            }
        }
        Ok(point)
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

    /// The blind verifier of the phase's commit, in its own scratch worktree; the real
    /// work tree must be byte-identical afterwards.
    fn verify(
        &self,
        planned: &PlannedCycle,
        phase: Phase,
        commit: &str,
        base: &str,
        round: u32,
        timing: &mut Timing,
    ) -> Result<VerifierVerdict, Halt> {
        let (n, name) = (planned.n, phase.trailer());
        let git = Git::new(&self.work_tree);
        let input = VerifierInput::new(
            TestId::planned(planned),
            self.issue.spec_for(planned)?,
            CommitSha::resolve(&git, commit)?,
            Some(CommitSha::resolve(&git, base)?),
            phase,
        );
        let scratch = self.dir.join(format!("verify-s{n}-{name}-r{round}"));
        remove_scratch(&self.work_tree, &scratch);
        // The scratch worktree is made (and later removed) while the real tree is
        // scanned: git touches only its own metadata for it, never the real tree.
        let scratch_arg = scratch.display().to_string();
        let (before, added) = std::thread::scope(|scope| {
            let added = scope
                .spawn(|| git.output(["worktree", "add", "-q", "--detach", &scratch_arg, commit]));
            let before = Snapshot::scan(&self.work_tree);
            (before, added.join())
        });
        let before = before?;
        added.map_err(|_| ConductError::Config("the worktree thread panicked".into()))??;
        let mut request = Request::new(Prompt::verifier(&input)?, self.issue.number(), n, &scratch);
        request.attempt = round;
        let result = self.run_leaf(Who::Verifier, request, n, name);
        let work_tree = self.work_tree.as_path();
        let after = std::thread::scope(|scope| {
            scope.spawn(|| remove_scratch(work_tree, &scratch));
            Snapshot::scan(work_tree)
        })?;
        let (response, took) = result?;
        timing.leaf += took;
        if before.tree != after.tree {
            let changed: Vec<String> = before
                .changes_to(&self.work_tree, &after)?
                .into_iter()
                .map(|c| c.path)
                .collect();
            return Err(Bail::new(
                BailCause::VerifierModifiedTree,
                format!("verifier {} changed the real work tree: {}", response.leaf_id, changed.join(", ")),
                "the verifier provider is not read-only: fix its configuration (it must only read and run `tdd test`), then run `tdd conduct` again",
            )
            .at(n, name)
            .tail(&response.text)
            .into());
        }
        let ledger = tdd_engine::ledger::Ledger::open(&self.location.database)?;
        tdd_leaves::verdict::verdict_of(&ledger, &response.leaf_id)?.ok_or_else(|| {
            Bail::new(
                BailCause::VerdictMissing,
                format!("verifier {} ended without a verdict", response.leaf_id),
                "check the verifier's output with `tdd leaves show`; it must end with `tdd verdict accept|reject`",
            )
            .at(n, name)
            .tail(&response.text)
            .into()
        })
    }

    /// Ticks step `n` in the plan file; the REFACTOR advance commits it with the phase.
    fn tick(&self, n: u32) -> Result<(), ConductError> {
        let path = self.work_tree.join(&self.plan_path);
        let io = |source| ConductError::Io {
            what: format!("ticking step {n} in {}", self.plan_path),
            source,
        };
        let text = std::fs::read_to_string(&path).map_err(io)?;
        std::fs::write(&path, crate::plan::tick(&text, n)).map_err(io)
    }
}
