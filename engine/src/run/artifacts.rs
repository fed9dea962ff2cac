//! The close sweep before a cycle closes: lint and typecheck gates, and generated
//! artifacts (stale ones are regenerated and committed on their own; the suites of the
//! projects that consume them run in the sweep).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::json;

use super::events::Artifact;
use super::events::ArtifactFailed;
use super::events::ArtifactRegenerated;
use super::events::RunEvent;

use super::Progress;
use super::RunError;
use super::Session;
use super::advance::Ctx;
use super::commit::changed_paths;
use super::commit::commit_anchored;
use super::gates::Refused;
use super::phase::Verb;
use crate::config::Config;
use crate::ledger::Ledger;
use crate::observe::Exit;

/// Artifacts reachable from `projects` (in production order) and the projects downstream
/// of them that are not among `projects`.
pub(crate) fn reachable(config: &Config, projects: &[String]) -> (Vec<String>, Vec<String>) {
    let mut order: Vec<String> = Vec::new();
    let mut producers: BTreeSet<String> = projects.iter().cloned().collect();
    loop {
        let next: Vec<String> = config
            .artifact
            .iter()
            .filter(|(name, a)| {
                !order.contains(name)
                    && a.produced_by
                        .as_ref()
                        .is_some_and(|p| producers.contains(p))
            })
            .map(|(name, _)| name.clone())
            .collect();
        if next.is_empty() {
            break;
        }
        for name in next {
            producers.insert(format!("artifact.{name}"));
            order.push(name);
        }
    }
    let downstream: BTreeSet<String> = order
        .iter()
        .flat_map(|name| config.artifact[name].consumed_by.iter())
        .filter(|c| {
            !c.starts_with("artifact.") && !projects.contains(c) && config.project.contains_key(*c)
        })
        .cloned()
        .collect();
    (order, downstream.into_iter().collect())
}

/// Runs `command` through `sh -c` in `dir` as one of `project`'s runners (project code:
/// confined, without the caller's secrets, under the project's timeout); `Ok(None)` on
/// success, else the last 20 lines of its output and how it ended.
fn run_shell(
    project: &crate::observe::Project,
    label: &str,
    command: &str,
    dir: &Path,
) -> Result<Option<String>, RunError> {
    let ran = crate::observe::run_shell(project, label, command, dir)?;
    let ended = match &ran.exit {
        Exit::Code { code: 0 } => return Ok(None),
        Exit::Code { code } => format!("exited with code {code}"),
        Exit::Signal { signal } => format!("ended by signal {signal}"),
        Exit::TimedOut { after_seconds } => {
            format!("killed after the project's timeout of {after_seconds} s")
        }
        Exit::NotStarted { message } => format!("could not start: {message}"),
    };
    let text = format!("{}{}", ran.stdout, ran.stderr);
    let lines: Vec<&str> = text.lines().collect();
    let mut tail = lines[lines.len().saturating_sub(20)..].join("\n");
    if !tail.is_empty() {
        tail.push('\n');
    }
    tail.push_str(&format!("({ended})"));
    Ok(Some(tail))
}

impl Session {
    /// The project an artifact's commands run as: its producer when that is a project,
    /// else the first of the cycle's projects, rooted at the work tree (where the
    /// artifact's paths are).
    fn artifact_project(
        &self,
        artifact: &crate::config::ArtifactConfig,
        projects: &[String],
    ) -> Result<crate::observe::Project, RunError> {
        let name = artifact
            .produced_by
            .as_ref()
            .filter(|p| self.config.project.contains_key(*p))
            .or_else(|| projects.first())
            .ok_or_else(|| RunError::UnknownProject {
                name: "(the producer of an artifact)".into(),
            })?;
        let mut project = self.project(name)?;
        project.root = self.work_tree.clone();
        Ok(project)
    }
}

impl Session {
    /// Regenerates the stale artifacts reachable from the cycle's projects, committing each
    /// as `chore(<artifact>): regenerate` on `head`, which then names the last commit
    /// made; a stale artifact that cannot be regenerated refuses the close.
    pub(crate) fn refresh_artifacts(
        &self,
        ledger: &mut Ledger,
        run_id: &str,
        n: u32,
        projects: &[String],
        head: &mut String,
        progress: &dyn Progress,
    ) -> Result<Option<Refused>, RunError> {
        let (artifacts, _) = reachable(&self.config, projects);
        for name in artifacts {
            let artifact = &self.config.artifact[&name];
            let project = self.artifact_project(artifact, projects)?;
            if let Some(check) = &artifact.check {
                progress.event(
                    "artifact_check",
                    json!({ "artifact": name }),
                    &format!("checking artifact {name}..."),
                );
                if run_shell(&project, "artifact-check", check, &self.work_tree)?.is_none() {
                    continue;
                }
            }
            let Some(regenerate) = &artifact.regenerate else {
                if artifact.check.is_some() {
                    let event = RunEvent::StaleArtifact(Artifact {
                        n,
                        artifact: name.clone(),
                    });
                    ledger.record(Some(run_id), &event)?;
                    let detail =
                        format!("artifact {name} is stale and has no `regenerate` command");
                    return Ok(Some(Refused {
                        reason: "stale_artifact",
                        verb: Verb::FixRegression,
                        detail,
                    }));
                }
                continue;
            };
            progress.event(
                "artifact_regenerate",
                json!({ "artifact": name }),
                &format!("regenerating artifact {name}..."),
            );
            if let Some(tail) =
                run_shell(&project, "artifact-regenerate", regenerate, &self.work_tree)?
            {
                let event = RunEvent::ArtifactRegenerateFailed(ArtifactFailed {
                    n,
                    artifact: name.clone(),
                    output: tail.clone(),
                });
                ledger.record(Some(run_id), &event)?;
                let detail = format!("`{regenerate}` failed for artifact {name}:\n{tail}");
                return Ok(Some(Refused {
                    reason: "artifact_regenerate_failed",
                    verb: Verb::FixRegression,
                    detail,
                }));
            }
            let prefix = format!("{}/", artifact.path.trim_end_matches('/'));
            let files: Vec<String> = changed_paths(&self.work_tree)?
                .into_iter()
                .filter(|p| p == artifact.path.trim_end_matches('/') || p.starts_with(&prefix))
                .collect();
            if files.is_empty() {
                continue;
            }
            let trailers = [
                ("TDD-Run", run_id.to_string()),
                ("TDD-Cycle", n.to_string()),
                ("TDD-Phase", "artifact".to_string()),
            ];
            let commit = commit_anchored(
                &self.work_tree,
                ledger,
                &files,
                &format!("chore({name}): regenerate"),
                &trailers,
            )?;
            if let Some(made) = &commit {
                head.clone_from(made);
            }
            let event = RunEvent::ArtifactRegenerated(ArtifactRegenerated {
                n,
                artifact: name.clone(),
                files: files.clone(),
                commit: commit.clone(),
            });
            ledger.record(Some(run_id), &event)?;
        }
        Ok(None)
    }
}

impl Session {
    /// Lint and typecheck of the cycle's projects; the first failure refuses the close.
    pub(super) fn close_gates(
        &self,
        ctx: &Ctx<'_>,
        progress: &dyn Progress,
    ) -> Result<Option<Refused>, RunError> {
        for name in &ctx.planned.projects {
            let Some(project) = self.config.project.get(name) else {
                return Err(RunError::UnknownProject { name: name.clone() });
            };
            let runs_as = self.project(name)?;
            let root = runs_as.root.clone();
            for (kind, command) in project
                .lint
                .iter()
                .map(|c| ("lint", c))
                .chain(project.typecheck.iter().map(|c| ("typecheck", c)))
            {
                progress.event(
                    "gate_run",
                    json!({ "project": name, "kind": kind, "command": command }),
                    &format!("{kind}: {command}"),
                );
                if let Some(tail) = run_shell(&runs_as, kind, command, &root)? {
                    return Ok(Some(Refused {
                        reason: "gate_failed",
                        verb: Verb::FixRegression,
                        detail: format!("{kind} `{command}` failed in {name}:\n{tail}"),
                    }));
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn artifacts_chain_and_reach_downstream_projects() {
        let config = Config::parse(
            Path::new("tdd.toml"),
            r#"
[project.backend]
adapter = "pytest"
[project.frontend]
adapter = "vitest"
[project.docs]
adapter = "junit"
[artifact.openapi]
path = "schema.json"
produced_by = "backend"
consumed_by = ["frontend"]
[artifact.client]
path = "frontend/generated"
produced_by = "artifact.openapi"
consumed_by = ["frontend", "docs"]
[artifact.unrelated]
path = "x"
produced_by = "docs"
"#,
        )
        .expect("config");
        let (order, downstream) = reachable(&config, &["backend".to_string()]);
        assert_eq!(order, vec!["openapi", "client"]);
        assert_eq!(downstream, vec!["docs", "frontend"]);
        let (order, downstream) = reachable(&config, &["frontend".to_string()]);
        assert!(order.is_empty() && downstream.is_empty());
    }
}
