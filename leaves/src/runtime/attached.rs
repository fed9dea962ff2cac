//! A prepared leaf run in the foreground with the caller's terminal (`tdd agent`),
//! recorded as every leaf is: started, then finished with what it touched.

use tdd_supervisor::AttachedExit;
use tdd_supervisor::ExitClass;
use tdd_supervisor::ProcessId;

use super::LeafError;
use super::LeafRun;
use super::Leaves;
use super::State;
use super::touched;
use crate::envelope::Completion;
use crate::events::LeafFinished;
use crate::events::LeafStarted;
use crate::events::LeavesEvent;

/// What the supervisor id of an attached leaf is recorded as: it had no supervisor.
pub const ATTACHED: &str = "attached";

impl Leaves {
    /// Runs a prepared leaf in the foreground with this process's terminal
    /// ([`tdd_supervisor::LeafSpec::run_attached`]: confined as a supervised leaf,
    /// no limits, the person ends it), recording `leaf_started` before and
    /// `leaf_finished` after, with the files of its work directory it changed.
    /// `launched` is told its process first. Refuses a leaf that is not freshly
    /// prepared.
    pub fn run_attached(
        &self,
        run: &mut LeafRun,
        launched: impl FnOnce(ProcessId),
    ) -> Result<(AttachedExit, Option<Vec<String>>), LeafError> {
        let State::Prepared(spec) = &run.state else {
            return Err(LeafError::State {
                id: run.id.clone(),
                why: "is not freshly prepared",
            });
        };
        let spec = spec.clone();
        run.state = State::AbortedBeforeStart;
        let mut ledger = self.ledger()?;
        run.before = tdd_engine::run::Snapshot::scan(&run.workdir).ok();
        let level = spec.sandbox_mode().clone();
        let started = LeavesEvent::LeafStarted(LeafStarted {
            leaf_id: run.id.clone(),
            supervisor_id: ATTACHED.to_string(),
            sandbox: sandbox_label(&level),
            cli_version: run.cli.as_ref().and_then(|cli| cli.version.clone()),
        });
        ledger.record(run.run_id.as_deref(), &started)?;
        let exit = spec.run_attached(launched)?;
        let completion = match &exit.class {
            ExitClass::Exited { code: 0 } => Completion::Completed,
            ExitClass::Exited { code } => Completion::Failed {
                reason: format!("the session exited with code {code}"),
            },
            other => Completion::Crashed {
                reason: format!("the session ended: {other:?}"),
            },
        };
        let touched = touched(&run.workdir, run.before.as_ref());
        let finished = LeavesEvent::LeafFinished(LeafFinished {
            leaf_id: run.id.clone(),
            exit: exit.class.clone(),
            completion,
            session_id: None,
            turns: None,
            usage: None,
            cost_usd: None,
            duration_ms: u64::try_from(exit.duration.as_millis()).ok(),
            touched: touched.clone(),
        });
        ledger.record(run.run_id.as_deref(), &finished)?;
        run.collected = true;
        Ok((exit, touched))
    }
}

/// The label a leaf's confinement is recorded under, as the supervisor would record it
/// (`landlock-v7`, `none`, `disabled`), when one was asked for.
fn sandbox_label(mode: &tdd_supervisor::Sandbox) -> Option<String> {
    match mode {
        tdd_supervisor::Sandbox::Off => None,
        tdd_supervisor::Sandbox::Disabled => Some(tdd_sandbox::Level::Disabled.label()),
        tdd_supervisor::Sandbox::Confined { policy, .. } => {
            let level = if policy.without_landlock {
                tdd_sandbox::Level::None {
                    reason: "asked to act as without Landlock".into(),
                }
            } else {
                tdd_sandbox::probe()
            };
            Some(level.label())
        }
    }
}
