//! The state of a run, projected from its ledger events and nothing else.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde::Serialize;

use super::events::AdvanceRefused;
use super::events::Annotation;
use super::events::Blocker;
use super::events::CycleOpened;
use super::events::PhaseChanged;
use super::events::RolledBack;
use super::events::RunEvent;
use super::events::TargetAdopted;
use super::events::TargetNamed;
use super::events::TestObserved;
use super::phase::Phase;
use super::phase::Verb;
use crate::ledger::Event;
use crate::ledger::EventError;
use crate::ledger::Kinds;
use crate::ledger::decode;
use crate::observe::Observation;
use crate::observe::TargetStatus;
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseStart {
    /// The phase.
    pub phase: Phase,
    /// The work tree's snapshot tree at its start.
    pub snapshot: String,
    /// HEAD at its start.
    pub head: String,
}

/// Every test id of `observations`.
fn observed_ids<'a>(observations: impl IntoIterator<Item = &'a Observation>) -> Vec<String> {
    observations
        .into_iter()
        .flat_map(|o| o.tests.keys().cloned())
        .collect()
}

/// How a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub blocker: Option<Blocker>,
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

/// A run's state as it is kept between commands ([`super::memo`]): every field,
/// those `tdd status` does not show too.
#[derive(Serialize)]
pub(super) struct Keep<'s> {
    state: &'s RunState,
    pinned_env: Option<&'s crate::observe::hermetic::PinnedEnv>,
    suite_ids: &'s BTreeSet<String>,
}

/// [`Keep`] as read back.
#[derive(Deserialize)]
pub(super) struct Kept {
    state: RunState,
    pinned_env: Option<crate::observe::hermetic::PinnedEnv>,
    suite_ids: BTreeSet<String>,
}

impl RunState {
    /// The state with every field, to be kept.
    pub(super) fn keep(&self) -> Keep<'_> {
        Keep {
            state: self,
            pinned_env: self.pinned_env.as_deref(),
            suite_ids: &self.suite_ids,
        }
    }

    /// The state [`RunState::keep`] kept.
    pub(super) fn from_kept(kept: Kept) -> RunState {
        RunState {
            pinned_env: kept.pinned_env.map(std::sync::Arc::new),
            suite_ids: kept.suite_ids,
            ..kept.state
        }
    }
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
    /// Folds a run's events, oldest first; `None` when they do not start with
    /// `run_started`. An event of a kind no domain of `known` declares, or one of the
    /// engine's whose payload does not parse, is an error naming it; events of other
    /// domains (leaves, the supervisor, the conductor) are passed over.
    pub fn project(events: &[Event], known: &Kinds) -> Result<Option<RunState>, EventError> {
        let Some(first) = events.first() else {
            return Ok(None);
        };
        let Some(RunEvent::RunStarted(started)) = decode::<RunEvent>(first, known)? else {
            return Ok(None);
        };
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
            state.follow(event, known)?;
        }
        Ok(Some(state))
    }

    /// The state with `event` (recorded after those it was projected from) applied, as
    /// [`RunState::project`] would have it with `event` last.
    pub(crate) fn follow(&mut self, event: &Event, known: &Kinds) -> Result<(), EventError> {
        self.events += 1;
        if let Some(typed) = decode::<RunEvent>(event, known)? {
            self.apply(typed);
        }
        Ok(())
    }

    fn cycle_mut(&mut self, n: u32) -> Option<&mut CycleState> {
        self.cycles.iter_mut().find(|c| c.n == n)
    }

    fn apply(&mut self, event: RunEvent) {
        match event {
            RunEvent::BaselineCaptured(b) => {
                self.suite_ids.extend(observed_ids([&b.observation]));
                self.baseline.insert(b.project, b.baseline);
            }
            RunEvent::CycleOpened(e) => self.cycle_opened(e),
            RunEvent::AdvanceRefused(e) => self.advance_refused(e),
            // No transition without an observation: a phase change that carries none is
            // not a phase change, whoever wrote it.
            RunEvent::PhaseChanged(e) if !e.observations.is_empty() => self.phase_changed(e),
            RunEvent::TargetAdopted(TargetAdopted { n, test, .. })
            | RunEvent::TargetNamed(TargetNamed { n, test, .. }) => {
                if let Some(c) = self.cycle_mut(n) {
                    c.target_override = Some(test);
                    c.refusal = None;
                }
            }
            RunEvent::RolledBack(e) => self.rolled_back(e),
            RunEvent::TestObserved(e) => self.test_observed(e),
            RunEvent::CycleSkipped(e) => {
                if let Some(c) = self.cycle_mut(e.n) {
                    c.phase = Phase::Skipped;
                }
            }
            RunEvent::RunAbandoned(_) => self.status = RunStatus::Abandoned,
            RunEvent::BlockerRaised(blocker) => self.blocker = Some(blocker),
            RunEvent::BlockerCleared(_) => {
                self.blocker = None;
                for c in &mut self.cycles {
                    c.refusal = None;
                }
            }
            RunEvent::Note(note) => self.notes.push(note.text),
            RunEvent::Annotation(a) => self.annotated(a),
            RunEvent::RunAdopted(a) => self.worktree = a.worktree,
            RunEvent::DependenciesChanged(e) => self.dependencies_changed(&e),
            // Recorded for people and audits; they do not move the state.
            RunEvent::PlanRegistered(_)
            | RunEvent::RunStarted(_)
            | RunEvent::PhaseChanged(_)
            | RunEvent::CycleClosed(_)
            | RunEvent::RunCompleted(_)
            | RunEvent::LockedFileReverted(_)
            | RunEvent::IndexFlagsCleared(_)
            | RunEvent::GreenWithoutChange(_)
            | RunEvent::RedFirstViolation(_)
            | RunEvent::UndeclaredFileTouched(_)
            | RunEvent::StaleArtifact(_)
            | RunEvent::ArtifactRegenerateFailed(_)
            | RunEvent::ArtifactRegenerated(_)
            | RunEvent::InsensitiveTest(_)
            | RunEvent::CommitStarted(_)
            | RunEvent::HookDenied(_)
            | RunEvent::HookReverted(_) => {}
        }
        self.settle_status();
    }

    /// Later gates check the dependencies against the fingerprints `e` took, if its
    /// cycle's plan declares `changes_dependencies` (no other cycle's can move a pin);
    /// every pin but the dependencies' stays as it was.
    fn dependencies_changed(&mut self, e: &super::events::DependenciesChanged) {
        let declared = self
            .plan
            .cycles
            .iter()
            .any(|c| c.n == e.n && c.changes_dependencies);
        if let (true, Some(pinned)) = (declared, &self.pinned_env) {
            let renewed = pinned.as_ref().clone().with_dependencies_of(&e.installs);
            self.pinned_env = Some(std::sync::Arc::new(renewed));
        }
    }

    /// Completed once every cycle is closed or skipped, active otherwise; an abandoned
    /// run stays abandoned.
    fn settle_status(&mut self) {
        if self.status != RunStatus::Abandoned {
            let done = self.cycles.iter().all(|c| c.phase.is_final());
            self.status = if done {
                RunStatus::Completed
            } else {
                RunStatus::Active
            };
        }
    }

    fn cycle_opened(&mut self, e: CycleOpened) {
        let known = self.suite_ids.clone();
        let Some(c) = self.cycle_mut(e.n) else {
            return;
        };
        c.history = vec![PhaseStart {
            phase: c.phase,
            snapshot: e.snapshot.clone(),
            head: e.head,
        }];
        c.snapshot = Some(e.snapshot);
        c.known_at_open = known;
        // Opened afresh after the cycle before it was reopened: nothing of the earlier
        // opening carries over.
        c.refusal = None;
        c.attempts = 0;
        c.target_override = None;
        c.failed_in_phase.clear();
    }

    fn advance_refused(&mut self, e: AdvanceRefused) {
        if let Some(c) = self.cycle_mut(e.n) {
            c.attempts += 1;
            c.refusal = Some(Refusal {
                reason: e.refusal.reason,
                verb: e.refusal.verb,
                tree: e.refusal.tree,
            });
        }
    }

    /// Targets `tdd test` saw failing in the cycle's current phase.
    fn test_observed(&mut self, e: TestObserved) {
        let (Some(n), Some(phase)) = (e.n, e.phase) else {
            return;
        };
        let Some(c) = self.cycle_mut(n).filter(|c| c.phase == phase) else {
            return;
        };
        c.failed_in_phase.extend(
            e.targets
                .into_iter()
                .filter(|t| {
                    matches!(
                        t.status,
                        TargetStatus::FailedAssertion
                            | TargetStatus::FailedError
                            | TargetStatus::CompileError
                    )
                })
                .map(|t| t.id),
        );
    }

    fn annotated(&mut self, a: Annotation) {
        let Some(n) = a.n else {
            return;
        };
        self.annotations
            .entry(n)
            .or_default()
            .insert(a.key, a.value);
        // An annotation is a change the next advance must look at, even on an unchanged
        // tree.
        if let Some(c) = self.cycle_mut(n) {
            c.refusal = None;
        }
    }

    fn phase_changed(&mut self, e: PhaseChanged) {
        if matches!(e.from, Phase::AwaitingImpl | Phase::AwaitingRefactor) {
            self.suite_ids.extend(observed_ids(&e.observations));
        }
        let Some(c) = self.cycle_mut(e.n) else {
            return;
        };
        c.attempts += 1;
        c.refusal = None;
        c.failed_in_phase.clear();
        c.phase = e.to;
        c.snapshot = Some(e.snapshot.clone());
        c.history.push(PhaseStart {
            phase: e.to,
            snapshot: e.snapshot,
            head: e.head,
        });
        if let (Some(phase), Some(commit)) = (e.committed_phase, e.commit) {
            c.commits.push((phase, commit));
        }
    }

    fn rolled_back(&mut self, e: RolledBack) {
        let Some(c) = self.cycle_mut(e.n) else {
            return;
        };
        let keep = c
            .history
            .iter()
            .rposition(|h| h.phase == e.to)
            .map_or(c.history.len(), |i| i + 1);
        c.history.truncate(keep);
        c.phase = e.to;
        c.snapshot = Some(e.snapshot);
        c.refusal = None;
        c.failed_in_phase.clear();
        // Rolling back to the previous phase undoes the one commit that phase made.
        if e.undone_from != e.head {
            c.commits.pop();
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

    /// The run's id while it is active; `None` once it completed or was abandoned.
    pub fn active_id(&self) -> Option<&str> {
        (self.status == RunStatus::Active).then_some(self.run_id.as_str())
    }

    /// The index of the cycle being worked on: the first that is not closed or skipped.
    pub fn current(&self) -> Option<usize> {
        self.cycles.iter().position(|c| !c.phase.is_final())
    }

    /// The cycle being worked on, with its plan: `None` once every cycle is done.
    pub fn current_cycle(&self) -> Option<(&CycleState, &crate::plan::PlannedCycle)> {
        let index = self.current()?;
        Some((self.cycles.get(index)?, self.plan.cycles.get(index)?))
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
