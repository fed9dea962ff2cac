//! Recorded actions that are not gates: skip, abandon, notes, annotations, blockers.
//!
//! None of them accepts a phase. Skipping and abandoning end work with a
//! reason; a blocker stops the run visibly until `resume` clears it.

use super::RunError;
use super::RunEvent;
use super::Session;
use super::events;
use super::state::RunState;
use super::tx::RunTx;
use crate::ledger::Ledger;

/// What [`RunTx::resume`] does with a blocker the run has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocker {
    /// Leave it: the note is recorded and the run stays blocked.
    Keep,
    /// Clear it (recorded as `blocker_cleared`, with the note).
    Clear,
}

/// The number of the run's current cycle, if one is open.
fn current_n(state: &RunState) -> Option<u32> {
    state.current().map(|i| state.cycles[i].n)
}

impl RunTx<'_> {
    /// Marks the current cycle SKIPPED with a reason and opens the next one.
    pub fn skip_cycle(mut self, reason: &str) -> Result<RunState, RunError> {
        let state = self.active()?;
        let n = current_n(&state).ok_or(RunError::NoActiveRun)?;
        let event = RunEvent::CycleSkipped(events::CycleSkipped {
            n,
            reason: reason.to_string(),
        });
        self.ledger.record(Some(&state.run_id), &event)?;
        self.engine
            .open_next(&mut self.ledger, &state.run_id, &state.plan, Some(n))?;
        self.engine.reload(&self.ledger, &state.run_id)
    }

    /// Ends the run as abandoned, with a reason.
    pub fn abandon(mut self, reason: &str) -> Result<RunState, RunError> {
        let state = self.active()?;
        let event = RunEvent::RunAbandoned(events::RunAbandoned {
            reason: reason.to_string(),
            pid: std::process::id(),
        });
        self.ledger.record(Some(&state.run_id), &event)?;
        self.engine.reload(&self.ledger, &state.run_id)
    }

    /// Records a note against the current cycle.
    pub fn note(mut self, text: &str) -> Result<RunState, RunError> {
        let state = self.active()?;
        let event = RunEvent::Note(events::Note {
            n: current_n(&state),
            text: text.to_string(),
        });
        self.ledger.record(Some(&state.run_id), &event)?;
        self.engine.reload(&self.ledger, &state.run_id)
    }

    /// Records a tool call an agent CLI's hook denied, on the current cycle (`n` is
    /// filled in here). Appends only: the run's state does not change.
    pub fn hook_denied(mut self, mut denied: events::HookDenied) -> Result<(), RunError> {
        let state = self.active()?;
        denied.n = current_n(&state);
        denied.phase = state
            .current()
            .map(|i| state.cycles[i].phase.trailer().to_string());
        self.ledger
            .record(Some(&state.run_id), &RunEvent::HookDenied(denied))?;
        Ok(())
    }

    /// The bracket after a tool call the hook could not read ahead (a shell command):
    /// the locked files it changed since the phase began are restored to the phase's
    /// base, those it created removed, by the same rule and the same revert the gate
    /// uses ([`super::PhaseLocks::lock_of`]), and the call is recorded as `hook_reverted`.
    /// `Ok(None)` when it changed no locked file, or no run is active or cycle open.
    pub fn revert_after_tool(
        mut self,
        mut call: events::HookReverted,
        started: std::time::Instant,
    ) -> Result<Option<events::HookReverted>, RunError> {
        let Some(state) = self.engine.active_run(&self.ledger)? else {
            return Ok(None);
        };
        let Some((cycle, planned)) = state.current_cycle() else {
            return Ok(None);
        };
        let Some(tree) = cycle.snapshot.clone() else {
            return Ok(None);
        };
        let locks = super::PhaseLocks::for_cycle(&self.engine.config, planned, cycle.phase)?;
        let report = super::snapshot::Snapshot { tree }
            .check_and_revert(&self.engine.work_tree, |p| locks.lock_of(p).is_some())?;
        if !report.reverted_any() {
            return Ok(None);
        }
        call.n = Some(cycle.n);
        call.phase = Some(cycle.phase.trailer().to_string());
        call.restored = report.restored;
        call.removed = report.removed;
        call.latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.ledger
            .record(Some(&state.run_id), &RunEvent::HookReverted(call.clone()))?;
        Ok(Some(call))
    }

    /// Records an annotation `key = value` on the current cycle.
    pub fn annotate(mut self, key: &str, value: &str) -> Result<RunState, RunError> {
        let state = self.active()?;
        let event = RunEvent::Annotation(events::Annotation {
            n: current_n(&state),
            key: key.to_string(),
            value: value.to_string(),
        });
        self.ledger.record(Some(&state.run_id), &event)?;
        self.engine.reload(&self.ledger, &state.run_id)
    }

    /// Blocks the run until `resume --unblock`.
    pub fn raise_blocker(mut self, kind: &str, detail: &str) -> Result<RunState, RunError> {
        let state = self.active()?;
        let event = RunEvent::BlockerRaised(events::Blocker {
            n: current_n(&state),
            kind: kind.to_string(),
            detail: detail.to_string(),
        });
        self.ledger.record(Some(&state.run_id), &event)?;
        self.engine.reload(&self.ledger, &state.run_id)
    }

    /// Records the human's note, and with [`Blocker::Clear`] clears the run's blocker.
    pub fn resume(mut self, blocker: Blocker, note: Option<&str>) -> Result<RunState, RunError> {
        let state = self.active()?;
        if blocker == Blocker::Clear && state.blocker.is_some() {
            let event = RunEvent::BlockerCleared(events::BlockerCleared {
                n: current_n(&state),
                note: note.map(str::to_string),
            });
            self.ledger.record(Some(&state.run_id), &event)?;
        } else if let Some(note) = note {
            let event = RunEvent::Note(events::Note {
                n: current_n(&state),
                text: note.to_string(),
            });
            self.ledger.record(Some(&state.run_id), &event)?;
        }
        self.engine.reload(&self.ledger, &state.run_id)
    }
}

impl Session {
    /// The run `run_id` projected again from `ledger`, after a change was recorded.
    pub(super) fn reload(&self, ledger: &Ledger, run_id: &str) -> Result<RunState, RunError> {
        let events = ledger.events(Some(run_id))?;
        RunState::project(&events, &self.kinds)?.ok_or(RunError::NoActiveRun)
    }
}

impl Session {
    /// Records a `tdd test` observation against the current cycle of the active run, if any.
    ///
    /// Returns the run id it was recorded in. `observed.leaf` names the leaf that asked,
    /// when a leaf did (its evidence for a verdict); its cycle and phase are the run's.
    /// Refused when a run is active and the ledger fails verification.
    pub fn record_test(&self, observed: events::TestObserved) -> Result<Option<String>, RunError> {
        let Some(ledger) = Ledger::open_read_only(&self.location.database)? else {
            return Ok(None);
        };
        if self.active_run(&ledger)?.is_none() {
            return Ok(None);
        }
        drop(ledger);
        // No lock: a `tdd test` records its run while a phase is being judged.
        let mut tx = self.begin_unlocked()?;
        let Some(state) = self.active_run(&tx.ledger)? else {
            return Ok(None);
        };
        let (n, phase) = state
            .current()
            .map(|i| (state.cycles[i].n, state.cycles[i].phase))
            .unzip();
        let event = RunEvent::TestObserved(events::TestObserved {
            n,
            phase,
            ..observed
        });
        tx.ledger.record(Some(&state.run_id), &event)?;
        Ok(Some(state.run_id))
    }
}

impl RunTx<'_> {
    /// Names the current cycle's target among the tests that are new in this cycle, when
    /// the plan's target was not found and several new tests could be it.
    pub fn name_target(mut self, id: &str) -> Result<RunState, RunError> {
        let state = self.active()?;
        let index = state.current().ok_or(RunError::NoActiveRun)?;
        let (cycle, planned) = (&state.cycles[index], &state.plan.cycles[index]);
        let project_name = planned
            .projects
            .iter()
            .find(|p| id.starts_with(&format!("{p}::")))
            .unwrap_or(&planned.projects[0])
            .clone();
        let qualified = if id.starts_with(&format!("{project_name}::")) {
            id.to_string()
        } else {
            format!("{project_name}::{id}")
        };
        let project = self.engine.project(&project_name)?;
        let adapter = crate::observe::adapter_for(project.config.adapter);
        let candidates = super::red::new_tests(adapter.as_ref(), &project, &cycle.known_at_open)?;
        if !candidates.contains(&qualified) {
            return Err(RunError::TargetNotNew {
                id: qualified,
                candidates,
            });
        }
        let event = RunEvent::TargetNamed(events::TargetNamed {
            n: cycle.n,
            planned: planned.tests.clone(),
            test: qualified,
        });
        self.ledger.record(Some(&state.run_id), &event)?;
        self.engine.reload(&self.ledger, &state.run_id)
    }
}
