//! `run start`: a clean tree, a registered plan, a baseline per project, cycle 1 open.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::json;

use super::Progress;
use super::RunError;
use super::RunEvent;
use super::Session;
use super::events::BaselineCaptured;
use super::phase::Phase;
use super::state::Baseline;
use super::state::ContractRef;
use super::state::RunStarted;
use super::tx::RunTx;
use crate::config::DeclaredSplit;
use crate::git::Git;
use crate::ledger::Ledger;
use crate::observe::Observation;
use crate::observe::Outcome;
use crate::observe::Selection;
use crate::observe::adapter_for;

/// What `run start` did.
#[derive(Debug, Clone, Serialize)]
pub struct StartOutcome {
    /// The new run's id.
    pub run_id: String,
    /// The plan it follows.
    pub contract: ContractRef,
    /// Per project: failing and passing counts at baseline, or the runner error.
    pub baselines: BTreeMap<String, serde_json::Value>,
    /// The first open cycle.
    pub cycle: u32,
    /// Its phase.
    pub phase: Phase,
    /// Entries of the caller's `PATH` the run's runners will not search (empty and
    /// relative ones), as given.
    pub path_dropped: Vec<String>,
}

fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let stamp = crate::ledger::clock::now_rfc3339().replace(['-', ':'], "");
    let stamp: String = stamp.chars().take(15).collect();
    format!(
        "run-{stamp}-{:06x}",
        (nanos as u64 ^ u64::from(std::process::id())) & 0xff_ffff
    )
}

/// The `baseline_captured` event: the baseline, its failures split by `known_failures`
/// (so reports can show which were declared), and the observation it rests on.
fn captured(
    name: &str,
    baseline: &Baseline,
    split: &DeclaredSplit,
    observation: &Observation,
) -> RunEvent {
    RunEvent::BaselineCaptured(BaselineCaptured {
        project: name.to_string(),
        baseline: baseline.clone(),
        declared: split.declared.clone(),
        undeclared: split.undeclared.clone(),
        unmatched_known_failures: split.unmatched.clone(),
        observation: observation.clone(),
    })
}

impl Session {
    /// The body of [`RunTx::start`], on the ledger the transaction verified.
    fn start_in(
        &self,
        ledger: &mut Ledger,
        plan_path: &Path,
        progress: &dyn Progress,
    ) -> Result<StartOutcome, RunError> {
        if let Some(active) = self.active_run(ledger)? {
            return Err(RunError::RunActive {
                run_id: active.run_id,
            });
        }
        let files = Git::new(&self.work_tree).dirty_paths()?;
        if !files.is_empty() {
            return Err(RunError::DirtyTree { files });
        }
        let contract = self.validated_contract(plan_path)?;
        let registered = ledger.typed::<RunEvent>(None, &["plan_registered"])?;
        let last = registered.iter().rev().find_map(|(_, event)| match event {
            RunEvent::PlanRegistered(earlier) if earlier.path == contract.path => {
                Some(earlier.blob.clone())
            }
            _ => None,
        });
        if let Some(blob) = last {
            if blob != contract.blob {
                return Err(RunError::PlanChanged {
                    path: contract.path,
                    registered: blob,
                    now: contract.blob,
                });
            }
        } else {
            super::register::record_contract(ledger, &contract)?;
        }
        let run_id = new_run_id();
        let pinned = std::sync::Arc::new(self.capture_env()?);
        let contract_ref = ContractRef {
            path: contract.path.clone(),
            blob: contract.blob.clone(),
            sha256: contract.sha256.clone(),
        };
        let started = RunStarted {
            worktree: self.work_tree.display().to_string(),
            contract: contract_ref.clone(),
            plan: contract.plan.clone(),
            config_sha: self.config_sha.clone(),
            start_sha: contract.commit.clone(),
            pinned_env: Some(pinned.as_ref().clone()),
        };
        ledger.record(Some(&run_id), &RunEvent::RunStarted(started))?;
        let mut cycle_projects: Vec<String> = contract
            .plan
            .cycles
            .iter()
            .flat_map(|c| c.projects.iter().cloned())
            .collect();
        cycle_projects.sort();
        cycle_projects.dedup();
        // Projects downstream through artifacts are swept at close, so they need a baseline.
        let (_, downstream) = super::artifacts::reachable(&self.config, &cycle_projects);
        let mut projects = cycle_projects;
        projects.extend(downstream);
        projects.sort();
        projects.dedup();
        let mut baselines = BTreeMap::new();
        for name in &projects {
            let summary = self.baseline(ledger, &run_id, name, &pinned, progress)?;
            baselines.insert(name.clone(), summary);
        }
        let (cycle, phase) = self
            .open_next(ledger, &run_id, &contract.plan, None)?
            .ok_or(RunError::NoActiveRun)?;
        Ok(StartOutcome {
            run_id,
            contract: contract_ref,
            baselines,
            cycle,
            phase,
            path_dropped: pinned.dropped_path.clone(),
        })
    }

    /// Collects and runs one project's whole suite and records what already fails.
    fn baseline(
        &self,
        ledger: &mut Ledger,
        run_id: &str,
        name: &str,
        pinned: &std::sync::Arc<crate::observe::hermetic::PinnedEnv>,
        progress: &dyn Progress,
    ) -> Result<serde_json::Value, RunError> {
        // The baseline is observed where the gates will judge: the clean room at HEAD.
        let git = Git::new(&self.work_tree);
        let head_tree = super::candidate::tree_of(&git, "HEAD")?;
        let projects = self.in_clean_room(Some(pinned), &head_tree, &[name.to_string()])?;
        let Some(project) = projects.into_iter().next() else {
            return Err(RunError::UnknownProject {
                name: name.to_string(),
            });
        };
        let adapter = adapter_for(project.config.adapter);
        progress.event(
            "baseline_started",
            json!({ "project": name }),
            &format!("baseline of {name}: running the whole suite..."),
        );
        let observation = adapter.run(&project, &Selection::All)?;
        let mut baseline = Baseline::default();
        for (id, result) in &observation.tests {
            match result.outcome {
                Outcome::Passed => {
                    baseline.passing.insert(id.clone());
                }
                Outcome::Failed | Outcome::Error => {
                    baseline.failing.insert(id.clone());
                }
                Outcome::Skipped => {}
            }
        }
        baseline.broken = observation
            .collection_errors
            .iter()
            .map(|e| e.scope.clone())
            .collect();
        let split = self.declared_split(name, &baseline, progress)?;
        let summary = json!({
            "passing": baseline.passing.len(),
            "failing": baseline.failing.len(),
            "wall_ms": observation.wall_ms,
            "runner_error": observation.runner_error,
            "collection_errors": observation.collection_errors.len(),
            "declared": split.declared,
            "undeclared": split.undeclared,
            "unmatched_known_failures": split.unmatched,
        });
        ledger.record(
            Some(run_id),
            &captured(name, &baseline, &split, &observation),
        )?;
        let declared = match split.declared.len() {
            0 => String::new(),
            n => format!(", {n} declared in known_failures"),
        };
        progress.event(
            "baseline_captured",
            json!({ "project": name, "summary": summary }),
            &format!(
                "baseline of {name}: {} passing, {} failing{declared} ({} ms)",
                baseline.passing.len(),
                baseline.failing.len(),
                observation.wall_ms
            ),
        );
        Ok(summary)
    }

    /// Splits a baseline's failures (failing tests and broken scopes) by the project's
    /// `known_failures`, and warns about every entry that matched none of them.
    fn declared_split(
        &self,
        name: &str,
        baseline: &Baseline,
        progress: &dyn Progress,
    ) -> Result<DeclaredSplit, RunError> {
        let known = self.config.known_failures(name)?;
        let failures = baseline.failing.iter().chain(&baseline.broken);
        let split = known.split(failures.map(String::as_str));
        if !split.unmatched.is_empty() {
            progress.event(
                "known_failures_unmatched",
                json!({ "project": name, "entries": split.unmatched }),
                &format!(
                    "warning: known_failures of {name} match no failure at baseline: {}",
                    split.unmatched.join(", ")
                ),
            );
        }
        Ok(split)
    }
}

impl RunTx<'_> {
    /// Starts a run of the committed plan at `plan_path`: a clean tree, the plan
    /// registered, the environment and runners pinned, a baseline of every project,
    /// cycle 1 open. Open the transaction with [`Session::begin_baseline`], so a second
    /// start meanwhile is refused as a baseline in progress.
    pub fn start(
        mut self,
        plan_path: &Path,
        progress: &dyn Progress,
    ) -> Result<StartOutcome, RunError> {
        self.engine.start_in(&mut self.ledger, plan_path, progress)
    }
}
