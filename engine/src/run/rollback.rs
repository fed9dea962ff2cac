//! Going back: to the start of the current phase, to the start of the previous one, or
//! into the REFACTOR of a cycle that has just closed.

use super::events::RolledBack;
use super::events::RunEvent;

use super::RunError;
use super::Session;
use super::phase::Phase;
use super::snapshot::Snapshot;
use super::state::PhaseStart;
use super::state::RunState;
use super::state::RunStatus;
use super::tx::RunTx;
use crate::git::Git;
use crate::ledger::Ledger;

/// How far [`RunTx::rollback`] goes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RollbackTo {
    /// The start of the current phase: what the phase changed is undone.
    PhaseStart,
    /// The start of the previous phase of the same cycle, moving HEAD back over the
    /// commit that phase made.
    PreviousPhase,
}

impl Session {
    /// The body of [`RunTx::rollback`], on the ledger the transaction verified.
    fn rollback_in(&self, ledger: &mut Ledger, to: RollbackTo) -> Result<RunState, RunError> {
        let to_previous = to == RollbackTo::PreviousPhase;
        let state = self.latest_run(ledger)?.ok_or(RunError::NoActiveRun)?;
        let fresh = state
            .current()
            .is_none_or(|i| state.cycles[i].history.len() < 2);
        if to_previous
            && fresh
            && state.status != RunStatus::Abandoned
            && let Some(reopened) = self.reopen_closed(ledger, &state)?
        {
            return Ok(reopened);
        }
        if state.status != RunStatus::Active {
            return Err(RunError::NoActiveRun);
        }
        let index = state.current().ok_or(RunError::NoActiveRun)?;
        let cycle = &state.cycles[index];
        let depth = if to_previous { 2 } else { 1 };
        let Some(start) = cycle
            .history
            .len()
            .checked_sub(depth)
            .and_then(|i| cycle.history.get(i))
            .cloned()
        else {
            return Err(RunError::NoPreviousPhase {
                n: cycle.n,
                phase: cycle.phase,
            });
        };
        let state = self.roll_back_to(ledger, &state, cycle.n, cycle.phase, &start, to_previous)?;
        Ok(state)
    }

    /// The body of [`RunTx::reopen_refactor`], on the ledger the transaction verified.
    fn reopen_refactor_in(&self, ledger: &mut Ledger, n: u32) -> Result<RunState, RunError> {
        let state = self
            .latest_run(ledger)?
            .filter(|s| s.status != RunStatus::Abandoned)
            .ok_or(RunError::NoActiveRun)?;
        let upto = state.current().unwrap_or(state.cycles.len());
        let last = upto.checked_sub(1).map(|i| state.cycles[i].n);
        if last == Some(n)
            && let Some(reopened) = self.reopen_closed(ledger, &state)?
        {
            return Ok(reopened);
        }
        let (n, phase) = state.current().map_or((0, Phase::Closed), |i| {
            (state.cycles[i].n, state.cycles[i].phase)
        });
        Err(RunError::NoPreviousPhase { n, phase })
    }

    /// Reopens the last closed cycle's REFACTOR when that is possible, else `None`.
    fn reopen_closed(
        &self,
        ledger: &mut Ledger,
        state: &RunState,
    ) -> Result<Option<RunState>, RunError> {
        let upto = state.current().unwrap_or(state.cycles.len());
        if state
            .current()
            .is_some_and(|i| state.cycles[i].history.len() > 1)
        {
            return Ok(None);
        }
        // Only the cycle right before the current one: a skipped cycle in between
        // would be opened again in its place when the reopened one closes.
        let Some(closed) = upto.checked_sub(1).map(|i| &state.cycles[i]) else {
            return Ok(None);
        };
        let head = Git::new(&self.work_tree).text(["rev-parse", "HEAD"])?;
        let refactor = closed
            .commits
            .last()
            .filter(|(phase, sha)| phase == "refactor" && *sha == head);
        let start = closed
            .history
            .iter()
            .rev()
            .find(|h| h.phase == Phase::AwaitingRefactor);
        let (Phase::Closed, Some(_), Some(start)) = (closed.phase, refactor, start) else {
            return Ok(None);
        };
        let start = start.clone();
        self.roll_back_to(ledger, state, closed.n, closed.phase, &start, true)
            .map(Some)
    }

    /// With `move_head`, moves HEAD back to `start.head` (a mixed reset, when it
    /// differs); restores the tree to `start.snapshot` exactly and records
    /// `rolled_back` for cycle `n`, whose `undone_from` is the HEAD moved away from
    /// (the phase's start when HEAD stayed).
    fn roll_back_to(
        &self,
        ledger: &mut Ledger,
        state: &RunState,
        n: u32,
        from: Phase,
        start: &PhaseStart,
        move_head: bool,
    ) -> Result<RunState, RunError> {
        let git = Git::new(&self.work_tree);
        let mut head = git.text(["rev-parse", "HEAD"])?;
        if !move_head {
            head = start.head.clone();
        } else if head != start.head {
            // A mixed reset moves HEAD and the index back over the phase's commit and leaves
            // the files alone; the restore below then makes them exact.
            // `reset` refreshes the index after it, hashing the work tree's files.
            let mut args = crate::run::scan::filters_off(&git)?;
            args.extend(["reset", "-q", &start.head].map(std::ffi::OsString::from));
            git.output(&args)?;
            crate::failpoint::hit("rollback_head_moved");
        }
        let report = Snapshot {
            tree: start.snapshot.clone(),
        }
        .check_and_revert(&self.work_tree, |_| true)?;
        let event = RunEvent::RolledBack(RolledBack {
            n,
            from,
            to: start.phase,
            snapshot: start.snapshot.clone(),
            head: start.head.clone(),
            undone_from: head,
            restored: report.restored,
            removed: report.removed,
        });
        ledger.record(Some(&state.run_id), &event)?;
        self.reload(ledger, &state.run_id)
    }
}

impl RunTx<'_> {
    /// Restores the exact tree from the start of the current phase, or with
    /// [`RollbackTo::PreviousPhase`] from the start of the previous phase of the same
    /// cycle, moving HEAD back over the commit that phase made. Recorded as
    /// `rolled_back`.
    ///
    /// To the previous phase at the very start of a cycle (or after the last cycle
    /// closed), the previous phase is the REFACTOR that closed the cycle before: see
    /// [`RunTx::reopen_refactor`].
    pub fn rollback(mut self, to: RollbackTo) -> Result<RunState, RunError> {
        let state = self.engine.rollback_in(&mut self.ledger, to)?;
        self.engine
            .checkpoint_and_publish(&mut self.ledger, state.active_id());
        Ok(state)
    }

    /// Reopens the REFACTOR of cycle `n`, so a revised REFACTOR can be advanced again:
    /// HEAD moves back over the REFACTOR commit and the tree becomes exactly what
    /// REFACTOR started from. Refused (`NoPreviousPhase`) unless `n` closed last, right
    /// before the current cycle, HEAD is its REFACTOR commit and the current cycle has
    /// not moved since it opened. Works on a run that completed with cycle `n`, which
    /// is active again afterwards.
    pub fn reopen_refactor(mut self, n: u32) -> Result<RunState, RunError> {
        let state = self.engine.reopen_refactor_in(&mut self.ledger, n)?;
        self.engine
            .checkpoint_and_publish(&mut self.ledger, state.active_id());
        Ok(state)
    }
}
