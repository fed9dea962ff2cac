//! How a conduct run reports: a step's comment, the draft PR, and the record of a bail.

use serde_json::json;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::conductor::Summary;
use crate::error::ConductError;
use crate::error::Doing;
use crate::error::Halt;
use crate::events::Bailed;
use crate::events::ConductorEvent;
use crate::events::ForgeUnreachable;
use crate::forge::ForgeError;
use crate::forge::RunMark;

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
            run_id: self.cursor.run_id().map(str::to_string),
            issue: self.issue.number(),
            branch: self.branch.clone(),
            steps_done: ticks.iter().filter(|(_, t)| *t).count(),
            steps: ticks.len(),
            dir: self.dir.clone(),
            pr: self.forge.pr_location(),
            worktree: self.own_worktree.then(|| self.work_tree.clone()),
        }
    }

    /// Records a bail: the half-done step reset, the record in the ledger and on the forge.
    pub(crate) fn bail(&self, bail: &Bail) -> Result<(), ConductError> {
        self.progress.event(
            "conduct_bailed",
            json!(bail),
            &format!(
                "bailed: {} ({}): {}",
                bail.cause.as_str(),
                bail.class.words(),
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
            run_id: self.cursor.run_id().map(str::to_string),
        }))?;
        let body = crate::report::bail_comment(bail);
        self.best_effort(self.forge.comment("bail", &body).map(drop))?;
        if !crate::plan::ticks_at_head(&self.work_tree, &self.plan_path).is_empty() {
            let status = format!("bailed `{}`: see the comment below", bail.cause.as_str());
            self.best_effort(self.write_run_comment(&status))?;
        }
        self.best_effort(self.forge.mark(RunMark::Bailed))?;
        // The PR is best effort here: the bail itself is recorded above.
        self.publish_best_effort()
    }

    /// Records a stop on the forge, best effort: the stop itself is in the ledger.
    pub(crate) fn report_stop(&self, mode: &str) -> Result<(), ConductError> {
        let body = crate::report::stop_comment(mode);
        self.best_effort(self.forge.comment("bail", &body).map(drop))?;
        if !crate::plan::ticks_at_head(&self.work_tree, &self.plan_path).is_empty() {
            let status = format!("stopped ({mode}); `tdd conduct` again resumes it");
            self.best_effort(self.write_run_comment(&status))?;
        }
        self.publish_best_effort()
    }

    /// Records a forge failure that must not end the run as `forge_unreachable`.
    pub(crate) fn best_effort(&self, result: Result<(), ForgeError>) -> Result<(), ConductError> {
        if let Err(err) = result {
            if let ForgeError::Ledger(err) = err {
                return Err(ConductError::from(err).while_doing("recording a forge comment"));
            }
            self.journal
                .record(&ConductorEvent::ForgeUnreachable(ForgeUnreachable {
                    error: err.to_string(),
                }))?;
        }
        Ok(())
    }

    /// Creates or edits the run's comment: the branch, the plan and where the run
    /// stands (`status`).
    pub(crate) fn write_run_comment(&self, status: &str) -> Result<(), ForgeError> {
        let body = crate::report::run_comment(self, status);
        self.forge.comment("run", &body).map(drop)
    }

    /// Publishes the work: the branch and its commit statuses (on a forge that hosts
    /// them), then the draft PR from the ledger; "Closes #n" once `complete`. A forge
    /// that cannot be written bails `forge_unreachable` (or `forge_denied`).
    pub(crate) fn publish(&self, complete: bool) -> Result<(), Halt> {
        let planned = !crate::plan::ticks_at_head(&self.work_tree, &self.plan_path).is_empty();
        if self.forge.needs_commits() && !planned {
            // Nothing committed on the branch yet: there is no PR to open.
            return Ok(());
        }
        let statuses = crate::report::statuses(self)
            .map_err(|e| ConductError::from(e).while_doing("reading the phase commits"))?;
        if self.forge.needs_commits() {
            // The branch and its ledger travel together: a clone continues from it.
            self.engine
                .publish_ledger()
                .doing(|| "publishing the ledger in git")?;
        }
        self.forge.push(&self.work_tree, &self.branch, &statuses)?;
        let body = crate::report::pr_body(self, complete)
            .map_err(|e| ConductError::from(e).while_doing("writing the draft PR"))?;
        let title = format!("#{} {}", self.issue.number(), self.issue.title());
        self.forge
            .open_or_update_draft_pr(&self.branch, &title, &body)?;
        if complete {
            self.best_effort(self.forge.mark(RunMark::Done))?;
        }
        tdd_engine::failpoint::hit("conduct_pr_written");
        Ok(())
    }

    /// Writes the draft PR when the run ends anyway (a bail, a stop): a forge that
    /// cannot be written is recorded as `forge_unreachable` instead.
    pub(crate) fn publish_best_effort(&self) -> Result<(), ConductError> {
        match self.publish(false) {
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
