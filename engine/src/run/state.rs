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
    /// Files, packages or binaries that already failed to load or compile.
    #[serde(default)]
    pub broken: BTreeSet<String>,
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
    /// Where each phase of this cycle began, oldest first; the last is the current phase.
    pub history: Vec<PhaseStart>,
    /// Test ids known when the cycle opened (from the last whole-suite run): a test not
    /// among them is new in this cycle and may be adopted as its target.
    pub known_at_open: BTreeSet<String>,
    /// The target adopted or named in place of the plan's, when the plan's was not found.
    pub target_override: Option<String>,
    /// Target ids `tdd test` observed failing since the current phase began (the evidence
    /// of a manual sensitivity check).
    pub failed_in_phase: BTreeSet<String>,
}

/// The state a phase began from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseStart {
    /// The phase.
    pub phase: Phase,
    /// The work tree's snapshot tree at its start.
    pub snapshot: String,
    /// HEAD at its start.
    pub head: String,
}

fn phase_start(phase: Phase, p: &serde_json::Value) -> Option<PhaseStart> {
    Some(PhaseStart {
        phase,
        snapshot: p.get("snapshot")?.as_str()?.to_string(),
        head: p
            .get("head")
            .and_then(|h| h.as_str())
            .unwrap_or_default()
            .to_string(),
    })
}

/// Every test id in an event's `observation` or `observations`.
fn observed_ids(p: &serde_json::Value) -> Vec<String> {
    let single = p.get("observation").into_iter();
    let many = p
        .get("observations")
        .and_then(|o| o.as_array())
        .into_iter()
        .flatten();
    single
        .chain(many)
        .filter_map(|o| o.get("tests").and_then(|t| t.as_object()))
        .flat_map(|t| t.keys().cloned())
        .collect()
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
    /// The open blocker, if a leaf or a person raised one.
    pub blocker: Option<serde_json::Value>,
    /// Annotations by cycle number: key to value.
    pub annotations: BTreeMap<u32, BTreeMap<String, String>>,
    /// Notes in order.
    pub notes: Vec<String>,
    /// Events the state was projected from.
    pub events: u64,
    /// SHA-256 of tdd.toml when the run started.
    pub config_sha: String,
    /// What deciding runs see: see [`RunStarted::pinned_env`].
    #[serde(skip)]
    pub pinned_env: Option<std::sync::Arc<crate::observe::hermetic::PinnedEnv>>,
    /// Test ids of the latest whole-suite runs, by project-qualified id.
    #[serde(skip)]
    suite_ids: BTreeSet<String>,
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
    /// The environment and runners deciding runs use; absent in runs started by a
    /// release that did not pin them (those runs decide with the caller's environment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_env: Option<crate::observe::hermetic::PinnedEnv>,
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
                history: Vec::new(),
                known_at_open: BTreeSet::new(),
                target_override: None,
                failed_in_phase: BTreeSet::new(),
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
            blocker: None,
            annotations: BTreeMap::new(),
            notes: Vec::new(),
            events: 0,
            config_sha: started.config_sha,
            pinned_env: started.pinned_env.map(std::sync::Arc::new),
            suite_ids: BTreeSet::new(),
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
                self.suite_ids.extend(observed_ids(p));
                if let (Some(project), Ok(baseline)) = (
                    p.get("project").and_then(|v| v.as_str()),
                    serde_json::from_value::<Baseline>(p.clone()),
                ) {
                    self.baseline.insert(project.to_string(), baseline);
                }
            }
            "cycle_opened" => {
                let known = self.suite_ids.clone();
                if let Some(c) = self.cycle_mut(p) {
                    c.snapshot = p
                        .get("snapshot")
                        .and_then(|v| v.as_str())
                        .map(str::to_string);
                    c.history = phase_start(c.phase, p).into_iter().collect();
                    c.known_at_open = known;
                    // Opened afresh after the cycle before it was reopened: nothing of
                    // the earlier opening carries over.
                    c.refusal = None;
                    c.attempts = 0;
                    c.target_override = None;
                    c.failed_in_phase.clear();
                }
            }
            "advance_refused" => {
                if let Some(c) = self.cycle_mut(p) {
                    c.attempts += 1;
                    c.refusal =
                        serde_json::from_value(p.get("refusal").cloned().unwrap_or_default()).ok();
                }
            }
            // No transition without an observation: a phase change that carries none is
            // not a phase change, whoever wrote it.
            "phase_changed"
                if p.get("observations")
                    .and_then(|o| o.as_array())
                    .is_some_and(|o| !o.is_empty()) =>
            {
                if matches!(
                    p.get("from").and_then(|f| f.as_str()),
                    Some("AWAITING_IMPL" | "AWAITING_REFACTOR")
                ) {
                    self.suite_ids.extend(observed_ids(p));
                }
                if let Some(c) = self.cycle_mut(p) {
                    c.attempts += 1;
                    c.refusal = None;
                    c.failed_in_phase.clear();
                    if let Ok(to) =
                        serde_json::from_value::<Phase>(p.get("to").cloned().unwrap_or_default())
                    {
                        c.phase = to;
                    }
                    c.snapshot = p
                        .get("snapshot")
                        .and_then(|v| v.as_str())
                        .map(str::to_string);
                    if let Some(start) = phase_start(c.phase, p) {
                        c.history.push(start);
                    }
                    if let (Some(phase), Some(commit)) = (
                        p.get("committed_phase").and_then(|v| v.as_str()),
                        p.get("commit").and_then(|v| v.as_str()),
                    ) {
                        c.commits.push((phase.to_string(), commit.to_string()));
                    }
                }
            }
            "target_adopted" | "target_named" => {
                let test = p.get("test").and_then(|t| t.as_str()).map(str::to_string);
                if let Some(c) = self.cycle_mut(p) {
                    c.target_override = test;
                    c.refusal = None;
                }
            }
            "rolled_back" => {
                let to = p
                    .get("to")
                    .cloned()
                    .and_then(|v| serde_json::from_value::<Phase>(v).ok());
                if let (Some(c), Some(to)) = (self.cycle_mut(p), to) {
                    let keep = c
                        .history
                        .iter()
                        .rposition(|h| h.phase == to)
                        .map_or(c.history.len(), |i| i + 1);
                    c.history.truncate(keep);
                    c.phase = to;
                    c.snapshot = p
                        .get("snapshot")
                        .and_then(|v| v.as_str())
                        .map(str::to_string);
                    c.refusal = None;
                    c.failed_in_phase.clear();
                    // Rolling back to the previous phase undoes the one commit that phase made.
                    if p.get("undone_from") != p.get("head") {
                        c.commits.pop();
                    }
                }
            }
            "test_observed" => {
                let phase = p
                    .get("phase")
                    .cloned()
                    .and_then(|v| serde_json::from_value::<Phase>(v).ok());
                if let Some(c) = self.cycle_mut(p)
                    && Some(c.phase) == phase
                {
                    let failed = p
                        .get("targets")
                        .and_then(|t| t.as_array())
                        .into_iter()
                        .flatten()
                        .filter(|v| {
                            matches!(
                                v.get("status").and_then(|s| s.as_str()),
                                Some("failed_assertion" | "failed_error" | "compile_error")
                            )
                        });
                    c.failed_in_phase.extend(
                        failed.filter_map(|v| {
                            v.get("id").and_then(|i| i.as_str()).map(str::to_string)
                        }),
                    );
                }
            }
            "cycle_skipped" => {
                if let Some(c) = self.cycle_mut(p) {
                    c.phase = Phase::Skipped;
                }
            }
            "run_abandoned" => self.status = RunStatus::Abandoned,
            "blocker_raised" => self.blocker = Some(p.clone()),
            "blocker_cleared" => {
                self.blocker = None;
                for c in &mut self.cycles {
                    c.refusal = None;
                }
            }
            "note" => self.notes.push(
                p.get("text")
                    .and_then(|t| t.as_str())
                    .unwrap_or_default()
                    .to_string(),
            ),
            "annotation" => {
                if let (Some(n), Some(key), Some(value)) = (
                    p.get("n").and_then(|v| v.as_u64()),
                    p.get("key").and_then(|v| v.as_str()),
                    p.get("value").and_then(|v| v.as_str()),
                ) {
                    self.annotations
                        .entry(n as u32)
                        .or_default()
                        .insert(key.to_string(), value.to_string());
                    // An annotation is a change the next advance must look at, even on an
                    // unchanged tree.
                    if let Some(c) = self.cycles.iter_mut().find(|c| u64::from(c.n) == n) {
                        c.refusal = None;
                    }
                }
            }
            _ => {}
        }
        if self.status != RunStatus::Abandoned {
            let done = self.cycles.iter().all(|c| c.phase.is_final());
            self.status = if done {
                RunStatus::Completed
            } else {
                RunStatus::Active
            };
        }
    }

    /// Annotation keys the plan requires that cycle `n` does not carry yet.
    pub fn missing_annotations(&self, n: u32) -> Vec<String> {
        let have = self.annotations.get(&n);
        self.plan
            .annotation_keys
            .iter()
            .filter(|k| !have.is_some_and(|h| h.contains_key(*k)))
            .cloned()
            .collect()
    }

    /// The index of the cycle being worked on: the first that is not closed or skipped.
    pub fn current(&self) -> Option<usize> {
        self.cycles.iter().position(|c| !c.phase.is_final())
    }

    /// The verb for where the run stands: the last refusal's, else the phase's.
    pub fn verb(&self) -> Verb {
        if self.blocker.is_some() {
            return Verb::Blocked;
        }
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
