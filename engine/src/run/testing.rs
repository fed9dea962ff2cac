//! `tdd test`: run suites or single tests through their adapters in the live work tree,
//! and record what was observed (against the active run's current cycle, or, for a
//! verifier leaf outside any run, as evidence of its own).

use serde::Serialize;
use serde_json::json;

use super::Progress;
use super::RunError;
use super::RunEvent;
use super::Session;
use super::events::TestObserved;
use crate::config::Config;
use crate::observe::Observation;
use crate::observe::Project;
use crate::observe::Selection;
use crate::observe::TargetVerdict;
use crate::observe::adapter_for;
use crate::observe::observe_target;

/// What `tdd test` runs.
#[derive(Debug, Clone, Copy)]
pub enum TestRequest<'a> {
    /// The whole suite of `project`, or of every project.
    Suites {
        /// One project only.
        project: Option<&'a str>,
    },
    /// These test ids alone (`project::native-id` or the runner's native id).
    Targets {
        /// The ids.
        ids: &'a [String],
        /// The project of ids that do not name theirs.
        project: Option<&'a str>,
    },
}

/// What `tdd test` observed and where it was recorded.
#[derive(Debug, Clone, Serialize)]
pub struct TestReport {
    /// One observation per suite or target run.
    pub observations: Vec<Observation>,
    /// One verdict per target (empty for suites).
    pub targets: Vec<TargetVerdict>,
    /// The run the observation was recorded in, if one was active.
    pub recorded_in_run: Option<String>,
}

impl Session {
    /// Runs `request` in the live work tree and records the observation: in the active
    /// run (with its cycle, phase and `leaf`), or, with no run but a verified `leaf`, as
    /// that leaf's evidence. Observes whatever the tests did; fails only when a project is
    /// unknown, a target's project cannot be told, or a runner cannot be prepared.
    pub fn test(
        &self,
        request: TestRequest<'_>,
        leaf: Option<&str>,
        progress: &dyn Progress,
    ) -> Result<TestReport, RunError> {
        let mut observations = Vec::new();
        let mut targets = Vec::new();
        match request {
            TestRequest::Suites { project } => {
                let names: Vec<String> = match project {
                    Some(p) => vec![known(&self.config, p)?],
                    None => self.config.project.keys().cloned().collect(),
                };
                for name in names {
                    let project = self.live_project(&name)?;
                    progress.event(
                        "suite_run",
                        json!({ "project": name }),
                        &format!("running the {name} suite..."),
                    );
                    let adapter = adapter_for(project.config.adapter);
                    observations.push(adapter.run(&project, &Selection::All)?);
                }
            }
            TestRequest::Targets { ids, project } => {
                for target in ids {
                    let name = project_for(&self.config, target, project)?;
                    let project = self.live_project(&name)?;
                    progress.event(
                        "target_run",
                        json!({ "target": target }),
                        &format!("running {target}..."),
                    );
                    let adapter = adapter_for(project.config.adapter);
                    let (observation, verdict) =
                        observe_as_typed(adapter.as_ref(), &project, target)?;
                    observations.push(observation);
                    targets.push(verdict);
                }
            }
        }
        let observed = TestObserved {
            n: None,
            phase: None,
            leaf_id: leaf.map(str::to_string),
            observations: observations.clone(),
            targets: targets.clone(),
        };
        let recorded_in_run = self.record_test(observed.clone())?;
        // A verifier judges in its own scratch worktree, where no run is active: its runs
        // are still recorded (without a run), as the evidence its verdict needs.
        if recorded_in_run.is_none() && leaf.is_some() {
            self.record_outside_runs(&RunEvent::TestObserved(observed))?;
        }
        Ok(TestReport {
            observations,
            targets,
            recorded_in_run,
        })
    }

    /// Project `name` as it is in the live work tree.
    fn live_project(&self, name: &str) -> Result<Project, RunError> {
        let name = known(&self.config, name)?;
        let config = self.config.project[&name].clone();
        let project = Project::new(&self.work_tree, &name, config)?;
        Ok(self.confine(project, super::confine::RunsIn::Live))
    }
}

/// Observes `target` as a person typed it: with its `project::` prefix taken off, and
/// when that finds no test, whole, as the runner's own id (a cargo package named like
/// the project prints `calc::sub subtracts`, which is `calc`'s test `calc::sub
/// subtracts`, not `sub subtracts`). Only `tdd test` reads ids this way; a gate judges
/// the plan's qualified target exactly.
fn observe_as_typed(
    adapter: &dyn crate::observe::Adapter,
    project: &Project,
    target: &str,
) -> Result<(Observation, TargetVerdict), RunError> {
    let first = observe_target(adapter, project, target)?;
    let prefixed = project.native_id(target)? != target;
    if prefixed && first.1.status == crate::observe::TargetStatus::NotFound {
        let whole = format!("{}::{target}", project.name);
        let second = observe_target(adapter, project, &whole)?;
        if second.1.status != crate::observe::TargetStatus::NotFound {
            return Ok(second);
        }
    }
    Ok(first)
}

/// `name` if tdd.toml declares it, else [`RunError::NoSuchProject`] with the nearest name.
fn known(config: &Config, name: &str) -> Result<String, RunError> {
    if config.project.contains_key(name) {
        return Ok(name.to_string());
    }
    let declared: Vec<String> = config.project.keys().cloned().collect();
    Err(RunError::NoSuchProject {
        name: name.to_string(),
        nearest: crate::config::nearest_key(name, &declared),
        declared,
    })
}

/// The project `target` belongs to: `flag` when given, else its `project::` prefix, else
/// the only project.
fn project_for(config: &Config, target: &str, flag: Option<&str>) -> Result<String, RunError> {
    if let Some(name) = flag {
        return known(config, name);
    }
    if let Some((prefix, _)) = target.split_once("::")
        && config.project.contains_key(prefix)
    {
        return Ok(prefix.to_string());
    }
    match config.project.len() {
        1 => Ok(config.project.keys().next().cloned().unwrap_or_default()),
        0 => Err(RunError::NoProjects),
        _ => Err(RunError::AmbiguousTarget {
            target: target.to_string(),
        }),
    }
}
