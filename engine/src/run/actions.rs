//! Recorded actions that are not gates: skip, abandon, notes, annotations, blockers.
//!
//! None of them accepts a phase. Skipping and abandoning end work with a
//! reason; a blocker stops the run visibly until `resume` clears it.

use serde_json::json;

use super::Engine;
use super::RunError;
use super::state::RunState;
use crate::ledger::Ledger;

impl Engine {
    pub(super) fn with_active_run(
        &self,
    ) -> Result<(crate::worktree_lock::Guard, Ledger, RunState), RunError> {
        let guard = self.lock("advance")?;
        let ledger = Ledger::open(&self.location.database)?;
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
        ledger.append(
            Some(&state.run_id),
            "cycle_skipped",
            &json!({ "n": n, "reason": reason }),
        )?;
        self.open_next(&mut ledger, &state.run_id, &state.plan, Some(n))?;
        self.reload(&ledger, &state.run_id)
    }

    /// Ends the run as abandoned, with a reason.
    pub fn abandon(&self, reason: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        ledger.append(
            Some(&state.run_id),
            "run_abandoned",
            &json!({ "reason": reason, "pid": std::process::id() }),
        )?;
        self.reload(&ledger, &state.run_id)
    }

    /// Records a note against the current cycle.
    pub fn note(&self, text: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        ledger.append(
            Some(&state.run_id),
            "note",
            &json!({ "n": Self::current_n(&state), "text": text }),
        )?;
        self.reload(&ledger, &state.run_id)
    }

    /// Records an annotation `key = value` on the current cycle.
    pub fn annotate(&self, key: &str, value: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        ledger.append(
            Some(&state.run_id),
            "annotation",
            &json!({ "n": Self::current_n(&state), "key": key, "value": value }),
        )?;
        self.reload(&ledger, &state.run_id)
    }

    /// Blocks the run until `resume --unblock`.
    pub fn raise_blocker(&self, kind: &str, detail: &str) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        ledger.append(
            Some(&state.run_id),
            "blocker_raised",
            &json!({ "n": Self::current_n(&state), "kind": kind, "detail": detail }),
        )?;
        self.reload(&ledger, &state.run_id)
    }

    /// Clears a blocker (with `unblock`) and records the human's note.
    pub fn resume(&self, unblock: bool, note: Option<&str>) -> Result<RunState, RunError> {
        let (_guard, mut ledger, state) = self.with_active_run()?;
        if unblock && state.blocker.is_some() {
            ledger.append(
                Some(&state.run_id),
                "blocker_cleared",
                &json!({ "n": Self::current_n(&state), "note": note }),
            )?;
        } else if let Some(note) = note {
            ledger.append(
                Some(&state.run_id),
                "note",
                &json!({ "n": Self::current_n(&state), "text": note }),
            )?;
        }
        self.reload(&ledger, &state.run_id)
    }

    pub(super) fn reload(&self, ledger: &Ledger, run_id: &str) -> Result<RunState, RunError> {
        let events = ledger.events(Some(run_id))?;
        RunState::project(&events).ok_or(RunError::NoActiveRun)
    }
}

impl Engine {
    /// Records a `tdd test` observation against the current cycle of the active run, if any.
    ///
    /// Returns the run id it was recorded in. `leaf` names the leaf that asked, when a leaf
    /// did (its evidence for a verdict). Refused when a run is active and the ledger fails
    /// verification.
    pub fn record_test(
        &self,
        payload: serde_json::Value,
        leaf: Option<&str>,
    ) -> Result<Option<String>, RunError> {
        let mut ledger = Ledger::open(&self.location.database)?;
        let Some(state) = self.active_run(&ledger)? else {
            return Ok(None);
        };
        self.ensure_ledger_intact()?;
        let (n, phase) = state
            .current()
            .map(|i| (state.cycles[i].n, state.cycles[i].phase))
            .unzip();
        let mut payload = payload;
        payload["n"] = json!(n);
        payload["phase"] = json!(phase);
        payload["leaf"] = json!(leaf);
        ledger.append(Some(&state.run_id), "test_observed", &payload)?;
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
        let candidates =
            super::advance::new_tests(adapter.as_ref(), &project, &cycle.known_at_open)?;
        if !candidates.contains(&qualified) {
            return Err(RunError::TargetNotNew {
                id: qualified,
                candidates,
            });
        }
        ledger.append(
            Some(&state.run_id),
            "target_named",
            &json!({ "n": cycle.n, "planned": planned.tests, "test": qualified }),
        )?;
        self.reload(&ledger, &state.run_id)
    }
}
