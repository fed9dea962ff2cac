//! Recorded actions that are not gates: skip, abandon, notes, annotations, blockers.
//!
//! None of them accepts a phase. Skipping and abandoning end work with a
//! reason; a blocker stops the run visibly until `resume` clears it.

use super::Engine;
use super::RunError;
use super::RunEvent;
use super::events;
use super::state::RunState;
use crate::ledger::Ledger;

impl Engine {
    pub(super) fn with_active_run(
        &self,
    ) -> Result<(crate::worktree_lock::Guard, Ledger, RunState), RunError> {
        let guard = self.lock("advance")?;
        let ledger = self.ledger_for_change()?;
        let state = self.active_run(&ledger)?.ok_or(RunError::NoActiveRun)?;
        Ok((guard, ledger, state))
    }

    fn current_n(state: &RunState) -> Option<u32> {
        state.current().map(|i| state.cycles[i].n)
    }

    /// Marks the current cycle SKIPPED with a reason and opens the next one.
    pub fn skip_cycle(&self, reason: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        let n = Self::current_n(&state).ok_or(RunError::NoActiveRun)?;
        let event = RunEvent::CycleSkipped(events::CycleSkipped {
            n,
            reason: reason.to_string(),
        });
        ledger.record(Some(&state.run_id), &event)?;
        self.open_next(&mut ledger, &state.run_id, &state.plan, Some(n))?;
        self.reload(&ledger, &state.run_id)
    }

    /// Ends the run as abandoned, with a reason.
    pub fn abandon(&self, reason: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        let event = RunEvent::RunAbandoned(events::RunAbandoned {
            reason: reason.to_string(),
            pid: std::process::id(),
        });
        ledger.record(Some(&state.run_id), &event)?;
        self.reload(&ledger, &state.run_id)
    }

    /// Records a note against the current cycle.
    pub fn note(&self, text: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        let event = RunEvent::Note(events::Note {
            n: Self::current_n(&state),
            text: text.to_string(),
        });
        ledger.record(Some(&state.run_id), &event)?;
        self.reload(&ledger, &state.run_id)
    }

    /// Records an annotation `key = value` on the current cycle.
    pub fn annotate(&self, key: &str, value: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        let event = RunEvent::Annotation(events::Annotation {
            n: Self::current_n(&state),
            key: key.to_string(),
            value: value.to_string(),
        });
        ledger.record(Some(&state.run_id), &event)?;
        self.reload(&ledger, &state.run_id)
    }

    /// Blocks the run until `resume --unblock`.
    pub fn raise_blocker(&self, kind: &str, detail: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        let event = RunEvent::BlockerRaised(events::Blocker {
            n: Self::current_n(&state),
            kind: kind.to_string(),
            detail: detail.to_string(),
        });
        ledger.record(Some(&state.run_id), &event)?;
        self.reload(&ledger, &state.run_id)
    }

    /// Clears a blocker (with `unblock`) and records the human's note.
    pub fn resume(&self, unblock: bool, note: Option<&str>) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        if unblock && state.blocker.is_some() {
            let event = RunEvent::BlockerCleared(events::BlockerCleared {
                n: Self::current_n(&state),
                note: note.map(str::to_string),
            });
            ledger.record(Some(&state.run_id), &event)?;
        } else if let Some(note) = note {
            let event = RunEvent::Note(events::Note {
                n: Self::current_n(&state),
                text: note.to_string(),
            });
            ledger.record(Some(&state.run_id), &event)?;
        }
        self.reload(&ledger, &state.run_id)
    }

    pub(super) fn reload(&self, ledger: &Ledger, run_id: &str) -> Result<RunState, RunError> {
        let events = ledger.events(Some(run_id))?;
        RunState::project(&events)?.ok_or(RunError::NoActiveRun)
    }
}

impl Engine {
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
        let mut ledger = self.ledger_for_change()?;
        let Some(state) = self.active_run(&ledger)? else {
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
        ledger.record(Some(&state.run_id), &event)?;
        Ok(Some(state.run_id))
    }
}

impl Engine {
    /// Names the current cycle's target among the tests that are new in this cycle, when
    /// the plan's target was not found and several new tests could be it.
    pub fn name_target(&self, id: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
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
        let project = self.project(&project_name)?;
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
        ledger.record(Some(&state.run_id), &event)?;
        self.reload(&ledger, &state.run_id)
    }
}
