//! The state of a run, projected from its ledger events and nothing else.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde::Serialize;

use super::phase::Phase;
use super::phase::Verb;
use crate::ledger::Event;
use crate::plan::Plan;

/// The committed plan a run follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContractRef {
    /// The plan's repository-relative path.
    pub path: String,
    /// The git blob id it was read from.
    pub blob: String,
    /// SHA-256 of its bytes.
    pub sha256: String,
}

/// What one project's baseline looked like.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    /// Tests that already failed before the run: subtracted from later gates.
    pub failing: BTreeSet<String>,
    /// Tests that passed before the run: they must stay green.
    pub passing: BTreeSet<String>,
}

/// Why the last `advance` of a cycle was refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Refusal {
    /// The machine-readable reason.
    pub reason: String,
    /// What to do about it.
    pub verb: Verb,
    /// The work-tree snapshot the refusal was computed on.
    pub tree: String,
}

/// One cycle's projected state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CycleState {
    /// The plan's cycle number.
    pub n: u32,
    /// The current phase.
    pub phase: Phase,
    /// The snapshot tree taken when the current phase began.
    pub snapshot: Option<String>,
    /// Commits made, by phase trailer.
    pub commits: Vec<(String, String)>,
    /// The last refusal in the current phase, if the phase has not moved since.
    pub refusal: Option<Refusal>,
    /// Advances attempted in this cycle.
    pub attempts: u32,
}

/// How a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Cycles remain.
    Active,
    /// Every cycle is closed or skipped.
    Completed,
    /// Abandoned with a reason.
    Abandoned,
}

/// A run as its events say it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunState {
    /// The run id.
    pub run_id: String,
    /// The work tree the run belongs to.
    pub worktree: String,
    /// The plan contract.
    pub contract: ContractRef,
    /// The plan.
    pub plan: Plan,
    /// Baselines by project.
    pub baseline: BTreeMap<String, Baseline>,
    /// Cycles in plan order.
    pub cycles: Vec<CycleState>,
    /// Active, completed or abandoned.
    pub status: RunStatus,
    /// Events the state was projected from.
    pub events: u64,
}

/// The payload of `run_started`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunStarted {
    /// The work tree.
    pub worktree: String,
    /// The plan contract.
    pub contract: ContractRef,
    /// The plan.
    pub plan: Plan,
    /// SHA-256 of tdd.toml at start.
    pub config_sha: String,
    /// HEAD at start.
    pub start_sha: String,
}

impl RunState {
    /// Folds a run's events, oldest first; `None` when they do not start with `run_started`.
    pub fn project(events: &[Event]) -> Option<RunState> {
        let first = events.first()?;
        if first.kind != "run_started" {
            return None;
        }
        let started: RunStarted = serde_json::from_value(first.payload.clone()).ok()?;
        let cycles = started
            .plan
            .cycles
            .iter()
            .map(|c| CycleState {
                n: c.n,
                phase: Phase::initial(c.kind),
                snapshot: None,
                commits: Vec::new(),
                refusal: None,
                attempts: 0,
            })
            .collect();
        let mut state = RunState {
            run_id: first.run_id.clone().unwrap_or_default(),
            worktree: started.worktree,
            contract: started.contract,
            plan: started.plan,
            baseline: BTreeMap::new(),
            cycles,
            status: RunStatus::Active,
            events: 0,
        };
        for event in events {
            state.apply(event);
        }
        Some(state)
    }

    fn cycle_mut(&mut self, payload: &serde_json::Value) -> Option<&mut CycleState> {
        let n = payload.get("n")?.as_u64()?;
        self.cycles.iter_mut().find(|c| u64::from(c.n) == n)
    }

    fn apply(&mut self, event: &Event) {
        self.events += 1;
        let p = &event.payload;
        match event.kind.as_str() {
            "baseline_captured" => {
                if let (Some(project), Ok(baseline)) = (
                    p.get("project").and_then(|v| v.as_str()),
                    serde_json::from_value::<Baseline>(p.clone()),
                ) {
                    self.baseline.insert(project.to_string(), baseline);
                }
            }
            "cycle_opened" => {
                if let Some(c) = self.cycle_mut(p) {
                    c.snapshot = p
                        .get("snapshot")
                        .and_then(|v| v.as_str())
                        .map(str::to_string);
                }
            }
            "advance_refused" => {
                if let Some(c) = self.cycle_mut(p) {
                    c.attempts += 1;
                    c.refusal =
                        serde_json::from_value(p.get("refusal").cloned().unwrap_or_default()).ok();
                }
            }
            "phase_changed" => {
                if let Some(c) = self.cycle_mut(p) {
                    c.attempts += 1;
                    c.refusal = None;
                    if let Ok(to) =
                        serde_json::from_value::<Phase>(p.get("to").cloned().unwrap_or_default())
                    {
                        c.phase = to;
                    }
                    c.snapshot = p
                        .get("snapshot")
                        .and_then(|v| v.as_str())
                        .map(str::to_string);
                    if let (Some(phase), Some(commit)) = (
                        p.get("committed_phase").and_then(|v| v.as_str()),
                        p.get("commit").and_then(|v| v.as_str()),
                    ) {
                        c.commits.push((phase.to_string(), commit.to_string()));
                    }
                }
            }
            "cycle_skipped" => {
                if let Some(c) = self.cycle_mut(p) {
                    c.phase = Phase::Skipped;
                }
            }
            "run_abandoned" => self.status = RunStatus::Abandoned,
            _ => {}
        }
        if self.status == RunStatus::Active && self.cycles.iter().all(|c| c.phase.is_final()) {
            self.status = RunStatus::Completed;
        }
    }

    /// The index of the cycle being worked on: the first that is not closed or skipped.
    pub fn current(&self) -> Option<usize> {
        self.cycles.iter().position(|c| !c.phase.is_final())
    }

    /// The verb for where the run stands: the last refusal's, else the phase's.
    pub fn verb(&self) -> Verb {
        match (self.status, self.current()) {
            (RunStatus::Abandoned, _) => Verb::Blocked,
            (_, None) | (RunStatus::Completed, _) => Verb::Complete,
            (RunStatus::Active, Some(i)) => {
                let cycle = &self.cycles[i];
                cycle
                    .refusal
                    .as_ref()
                    .map_or(cycle.phase.verb(), |r| r.verb)
            }
        }
    }
}
