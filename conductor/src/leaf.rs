//! Running one leaf under the supervisor: stop requests honoured before launch, the
//! position kept for `tdd status`, stuck leaves retried, lost ones bailed.

use std::time::Duration;
use std::time::Instant;

use serde_json::json;
use tdd_leaves::Request;
use tdd_leaves::Response;
use tdd_supervisor::ExitClass;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::error::Doing;
use crate::error::Halt;
use crate::events::ConductorEvent;
use crate::events::LeafRetried;
use crate::lock::Position;

/// Which provider runs the leaf.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// The developer provider (also planners).
    Developer,
    /// The verifier provider.
    Verifier,
}

impl Conductor<'_> {
    /// A pending stop request, as a halt.
    pub(crate) fn check_stop(&self) -> Result<(), Halt> {
        match self.leaves.supervisor().read_stop() {
            Some(request) => Err(Halt::Stop(request.mode.as_str().to_string())),
            None => Ok(()),
        }
    }

    /// Runs one leaf to its end and returns its response and its wall time. A leaf
    /// killed for a limit is run again up to `stuck_retries` times.
    pub(crate) fn run_leaf(
        &self,
        who: Who,
        mut request: Request,
        step: u32,
        phase: &str,
    ) -> Result<(Response, Duration), Halt> {
        request.run_id = self.cursor.run_id().map(str::to_string);
        request.wall_timeout = Duration::from_secs(self.config.conductor.leaf_timeout_s);
        request.idle_timeout = Some(Duration::from_secs(self.config.conductor.idle_timeout_s));
        let role = request.role();
        // Developers (revisions too) learn of a locked write when they try it; a
        // planner has no phase to be held to, and a verifier writes nothing.
        request.hooks = self.config.conductor.hooks && role == tdd_prompts::Role::Developer;
        request.sandbox = self.sandbox_for(&request);
        if let Some(relay) = &self.relay {
            request.set_env.push((
                crate::relay::RELAY_VAR.to_string(),
                relay.socket().display().to_string(),
            ));
        }
        let span = tracing::info_span!(
            "leaf",
            role = role.as_str(),
            step,
            phase,
            leaf = tracing::field::Empty
        );
        let _entered = span.enter();
        let mut stuck = 0;
        loop {
            self.check_stop()?;
            let began = Instant::now();
            tdd_engine::failpoint::hit(&format!("conduct_before_leaf_{phase}"));
            let provider = match who {
                Who::Developer => &self.developer,
                Who::Verifier => &self.verifier,
            };
            // The position is written before the launch, so the leaf itself (and anyone
            // watching) never sees the previous leaf's.
            let doing = || format!("starting the {} leaf of step {step} {phase}", role.as_str());
            let mut run = self
                .leaves
                .prepare(provider.as_ref(), request.clone())
                .doing(doing)?;
            self.lock.set_position(&Position {
                issue: self.issue.number(),
                step,
                of: self.steps_planned(),
                phase: phase.to_string(),
                leaf: Some(run.id().to_string()),
                leaf_started_s: Some(tdd_engine::ledger::clock::unix_seconds()),
                pid: std::process::id(),
            });
            let policy = run.policy().cloned();
            // Admitted to the relay until this iteration ends, however it ends.
            let admission = match (&self.relay, run.policy()) {
                (Some(relay), Some(policy)) => Some(relay.admit(
                    run.id(),
                    &request.workdir,
                    policy,
                    &run.files().dir.join("tmp"),
                )),
                _ => None,
            };
            self.leaves.start(&mut run).doing(doing)?;
            if let (Some(admission), Some(root)) = (&admission, run.supervisor_process()) {
                admission.launched(root);
            }
            span.record("leaf", run.id());
            self.progress.event(
                "leaf_started",
                json!({ "leaf": run.id(), "role": role.as_str(), "step": step, "phase": phase }),
                &format!(
                    "step {step} {phase}: {} leaf {} started",
                    role.as_str(),
                    run.id()
                ),
            );
            self.warn_untested_cli(&run);
            tdd_engine::failpoint::hit(&format!("conduct_after_leaf_{phase}"));
            let response = provider
                .response(&self.leaves, &mut run, None)
                .doing(|| format!("reading the response of leaf {}", run.id()))?
                .ok_or_else(|| {
                    Halt::Error(crate::error::ConductError::config(format!(
                        "leaf {} did not end",
                        run.id()
                    )))
                })?;
            let elapsed = began.elapsed();
            tracing::info!(exit = ?response.exit, wall_ms = crate::step::ms(elapsed), "leaf ended");
            let heard = admission.as_ref().map(|a| a.heard()).unwrap_or_default();
            *self.cursor.denied.borrow_mut() = policy.as_ref().and_then(|policy| {
                let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
                crate::denied::find(&run, role.as_str(), policy, &heard, &env)
            });
            match &response.exit {
                ExitClass::Exited { .. } => return Ok((response, elapsed)),
                ExitClass::Stopped => return Err(Halt::Stop("now".into())),
                ExitClass::KillStuck { .. } if stuck < self.config.conductor.stuck_retries => {
                    stuck += 1;
                    self.journal
                        .record(&ConductorEvent::LeafRetried(LeafRetried {
                            leaf: response.leaf_id.clone(),
                            step,
                            phase: phase.to_string(),
                            retry: stuck,
                        }))?;
                }
                class => return Err(self.leaf_bail(class, &response, step, phase).into()),
            }
        }
    }

    /// Reports, once per CLI per conduct, that the leaf just started runs a CLI version
    /// its provider was not tested with: its streams or flags may have changed.
    fn warn_untested_cli(&self, run: &tdd_leaves::LeafRun) {
        let Some(cli) = run.cli() else {
            return;
        };
        let Some(warning) = cli.warning() else {
            return;
        };
        if !self.warned_clis.borrow_mut().insert(cli.provider.clone()) {
            return;
        }
        tracing::warn!(provider = cli.provider.as_str(), version = ?cli.version, "untested CLI version");
        self.progress.event(
            "cli_untested",
            json!({
                "leaf": run.id(),
                "provider": cli.provider,
                "version": cli.version,
                "tested_versions": cli.tested_versions,
            }),
            &format!("warning: {warning}"),
        );
    }

    /// The confinement of a leaf of `who` working on `request`.
    fn sandbox_for(&self, request: &Request) -> tdd_supervisor::Sandbox {
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let ledger_dir = self
            .leaves
            .database()
            .parent()
            .unwrap_or(&self.dir)
            .to_path_buf();
        let plan = std::path::Path::new(&self.plan_path);
        if request.role() == tdd_prompts::Role::Planner
            && let Some(dir) = plan.parent()
        {
            // A confined planner may write only the plan's directory, which must be
            // there for the grant to name it.
            let _ = std::fs::create_dir_all(request.workdir.join(dir));
        }
        crate::sandbox::for_leaf(
            &self.config.sandbox,
            &crate::sandbox::Place {
                role: request.role(),
                workdir: &request.workdir,
                plan,
                ledger_dir: &ledger_dir,
                home: home.as_deref(),
                own_worktree: self.own_worktree,
                work_tree: &self.work_tree,
            },
        )
    }

    fn leaf_bail(&self, class: &ExitClass, response: &Response, step: u32, phase: &str) -> Bail {
        let (cause, action): (BailCause, String) = match class {
            ExitClass::KillStuck { .. } => (
                BailCause::KillStuck,
                "the leaf kept running into its time limits: raise [conductor] leaf_timeout_s or idle_timeout_s, or simplify the step".into(),
            ),
            ExitClass::KilledExternal { .. } => (
                BailCause::KilledExternal,
                "something outside tdd killed the leaf: find out what, then run `tdd conduct` again".into(),
            ),
            ExitClass::SpawnFailed { error } if error.starts_with("sandbox") => (
                BailCause::SupervisorLost,
                "this machine cannot confine leaves as [sandbox] require = true asks: run `tdd doctor`, or set require = false to run with what the kernel offers".into(),
            ),
            _ => (
                BailCause::SupervisorLost,
                format!(
                    "the leaf's supervisor was lost or the leaf never started: read what it printed with `tdd logs {}`, check `tdd leaves show {}` and the provider's command, then run `tdd conduct` again",
                    response.leaf_id, response.leaf_id
                ),
            ),
        };
        Bail::new(
            cause,
            format!("leaf {} {}", response.leaf_id, class.words()),
            action,
        )
        .at(step, phase)
        .tail(&response.text)
    }

    /// The number of steps in the plan at HEAD (0 before the plan is committed). A
    /// committed plan's steps do not change, so the count is read from git once.
    pub(crate) fn steps_planned(&self) -> u32 {
        self.cursor.steps_planned(|| {
            let n = crate::plan::ticks_at_head(&self.work_tree, &self.plan_path).len();
            u32::try_from(n).unwrap_or(u32::MAX)
        })
    }
}
