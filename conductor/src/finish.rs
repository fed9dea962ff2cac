//! How a conduct run reports: a step's comment, the draft PR, and the record of a bail.

use serde_json::json;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::conductor::Summary;
use crate::error::ConductError;
use crate::error::Halt;
use crate::events::Bailed;
use crate::events::ConductorEvent;
use crate::events::ForgeUnreachable;
use crate::forge::Forge;

impl Conductor<'_> {
    /// Creates or edits step `n`'s comment on the forge.
    pub(crate) fn write_step_comment(&self, n: u32) -> Result<(), Halt> {
        let body = crate::report::step_comment(self, n)?;
        if let Err(err) = self.forge.comment(&format!("step-{n}"), &body) {
            return Err(match Halt::from(err) {
                Halt::Bail(bail) => bail.at(n, "report").into(),
                other => other,
            });
        }
        tdd_engine::failpoint::hit("conduct_comment_written");
        Ok(())
    }

    /// Where the run's records are.
    pub fn summary(&self) -> Summary {
        let ticks = crate::plan::ticks_at_head(&self.work_tree, &self.plan_path);
        Summary {
            conduct: self.journal.conduct().to_string(),
            run_id: self.run_id.clone(),
            issue: self.issue.number(),
            branch: self.branch.clone(),
            steps_done: ticks.iter().filter(|(_, t)| *t).count(),
            steps: ticks.len(),
            dir: self.dir.clone(),
            pr: self.forge.pr_path(),
            worktree: self.own_worktree.then(|| self.work_tree.clone()),
        }
    }

    /// Records a bail: the half-done step reset, the record in the ledger and on the forge.
    pub(crate) fn bail(&mut self, bail: &Bail) -> Result<(), ConductError> {
        self.progress.event(
            "conduct_bailed",
            json!(bail),
            &format!(
                "bailed: {} ({:?}): {}",
                bail.cause.as_str(),
                bail.class,
                bail.detail
            ),
        );
        // A dirty tree or a disagreement is the human's to look at: nothing is reset.
        let untouchable = [BailCause::DirtyTree, BailCause::LedgerGitMismatch];
        if !untouchable.contains(&bail.cause)
            && let Err(Halt::Error(err)) = self.reset_half_done_step()
        {
            return Err(err);
        }
        self.journal.record(&ConductorEvent::Bailed(Bailed {
            bail: bail.clone(),
            run_id: self.run_id.clone(),
        }))?;
        let body = crate::report::bail_comment(bail);
        if let Err(err) = self.forge.comment("bail", &body) {
            self.journal
                .record(&ConductorEvent::ForgeUnreachable(ForgeUnreachable {
                    error: err.to_string(),
                }))?;
        }
        // The PR is best effort here: the bail itself is recorded above.
        self.publish_best_effort()
    }

    /// Writes the draft PR from the ledger; a forge that cannot be written bails
    /// `forge_unreachable`.
    pub(crate) fn publish(&self) -> Result<(), Halt> {
        let body = crate::report::pr_body(self)
            .map_err(|e| ConductError::from(e).while_doing("writing the draft PR"))?;
        let title = format!("#{} {}", self.issue.number(), self.issue.title());
        self.forge
            .open_or_update_draft_pr(&self.branch, &title, &body)?;
        tdd_engine::failpoint::hit("conduct_pr_written");
        Ok(())
    }

    /// Writes the draft PR when the run ends anyway (a bail, a stop): a forge that
    /// cannot be written is recorded as `forge_unreachable` instead.
    pub(crate) fn publish_best_effort(&self) -> Result<(), ConductError> {
        match self.publish() {
            Ok(()) => Ok(()),
            Err(Halt::Error(err)) => Err(err),
            Err(Halt::Bail(bail)) => {
                Ok(self
                    .journal
                    .record(&ConductorEvent::ForgeUnreachable(ForgeUnreachable {
                        error: bail.detail,
                    }))?)
            }
            Err(Halt::Stop(_)) => Ok(()),
        }
    }
}
