//! Enforcing the locks on the work tree before a gate judges: locked changes reverted,
//! index flags that hide edits from git cleared, both recorded.

use super::events::IndexFlagsCleared;
use super::events::LockedFileReverted;
use super::events::RunEvent;

use super::RunError;
use super::Session;
use super::advance::AdvanceOutcome;
use super::advance::Ctx;
use super::phase::Phase;
use crate::ledger::Ledger;

impl Session {
    /// Reverts the changes since the phase began that its locks forbid
    /// ([`super::locks::PhaseLocks::lock_of`]) and records them, harness files
    /// (`harness_changed`) apart from the phase's own locks.
    pub(super) fn enforce_locks(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        outcome: &mut AdvanceOutcome,
    ) -> Result<(), RunError> {
        let report = ctx.base.revert_locked(&self.work_tree, &ctx.now, |p| {
            ctx.locks.lock_of(p).is_some()
        })?;
        if !report.reverted_any() {
            return Ok(());
        }
        let phase_kind = if ctx.phase == Phase::AwaitingTest {
            "implementation_during_red"
        } else {
            "test_edited_outside_red"
        };
        let split = |paths: &[String]| -> (Vec<String>, Vec<String>) {
            paths.iter().cloned().partition(|p| ctx.is_harness(p))
        };
        let (harness_restored, restored) = split(&report.restored);
        let (harness_removed, removed) = split(&report.removed);
        for (kind, restored, removed) in [
            ("harness_changed", harness_restored, harness_removed),
            (phase_kind, restored, removed),
        ] {
            if restored.is_empty() && removed.is_empty() {
                continue;
            }
            let event = RunEvent::LockedFileReverted(LockedFileReverted {
                n: ctx.planned.n,
                phase: ctx.phase,
                kind: kind.to_string(),
                restored,
                removed,
            });
            ledger.record(Some(&ctx.state.run_id), &event)?;
        }
        outcome.reverted = report.reverted();
        Ok(())
    }

    /// Clears assume-unchanged and skip-worktree on locked paths in the user's index (a
    /// way to hide an edit from git, never from the scan) and records it as
    /// `index_flags_cleared`. A skip-worktree entry whose file is absent is a sparse
    /// checkout's, and is left alone.
    pub(super) fn undo_index_flags(
        &self,
        ledger: &mut Ledger,
        ctx: &Ctx<'_>,
        flagged: Vec<super::FlaggedPath>,
    ) -> Result<(), RunError> {
        let locked: Vec<super::FlaggedPath> = flagged
            .into_iter()
            .filter(|f| {
                let bytes = crate::repo_path::decode(&f.path);
                let shown = crate::repo_path::display(&bytes);
                let is_locked =
                    ctx.is_test(&shown) || ctx.is_impl(&shown) || ctx.is_harness(&shown);
                let on_disk =
                    std::fs::symlink_metadata(self.work_tree.join(crate::repo_path::os(&bytes)))
                        .is_ok();
                is_locked && (f.assume_unchanged || on_disk)
            })
            .collect();
        if locked.is_empty() {
            return Ok(());
        }
        super::clear_index_flags(&self.work_tree, &locked)?;
        let event = RunEvent::IndexFlagsCleared(IndexFlagsCleared {
            n: ctx.planned.n,
            phase: ctx.phase,
            paths: locked,
        });
        ledger.record(Some(&ctx.state.run_id), &event)?;
        Ok(())
    }
}
