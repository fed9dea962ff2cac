//! Planning: the planner leaf, the plan's validation (as `tdd plan register` does it),
//! the committed projection `.tdd/issue-<n>.md` with its step checklist, and the
//! engine run that follows it.

use std::path::Path;

use serde_json::Value;
use serde_json::json;
use tdd_engine::git::Git;
use tdd_engine::plan::Plan;
use tdd_prompts::PlannerInput;
use tdd_prompts::Prompt;
use tdd_prompts::RepoFacts;

use crate::bail::Bail;
use crate::bail::BailCause;
use crate::conductor::Conductor;
use crate::error::Halt;
use crate::events::ConductorEvent;
use crate::events::EngineRun;
use crate::events::PlanInvalid;

/// The steps of a plan file's checklist and whether each is ticked, in order.
pub fn ticks(text: &str) -> Vec<(u32, bool)> {
    text.lines()
        .filter_map(|line| {
            let (ticked, rest) = if let Some(rest) = line.strip_prefix("- [x] Step ") {
                (true, rest)
            } else {
                (false, line.strip_prefix("- [ ] Step ")?)
            };
            let n = rest.split(':').next()?.trim().parse().ok()?;
            Some((n, ticked))
        })
        .collect()
}

/// The checklist of the plan committed at HEAD (empty when there is none).
pub fn ticks_at_head(work_tree: &Path, plan_path: &str) -> Vec<(u32, bool)> {
    ticks_at(work_tree, "HEAD", plan_path)
}

/// The checklist of the plan committed at `rev` (empty when there is none).
pub fn ticks_at(work_tree: &Path, rev: &str, plan_path: &str) -> Vec<(u32, bool)> {
    Git::new(work_tree)
        .text(["show", &format!("{rev}:{plan_path}")])
        .map(|text| ticks(&text))
        .unwrap_or_default()
}

/// Ticks step `n` in a plan file's text.
pub fn tick(text: &str, n: u32) -> String {
    let open = format!("- [ ] Step {n}:");
    let done = format!("- [x] Step {n}:");
    let mut out: String = text
        .lines()
        .map(|l| match l.strip_prefix(&open) {
            Some(rest) => format!("{done}{rest}\n"),
            None => format!("{l}\n"),
        })
        .collect();
    if !text.ends_with('\n') {
        out.pop();
    }
    out
}

/// The front-matter block of a plan (through its closing `---` line).
fn front_matter(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("---\n")?;
    let end = rest.find("\n---")?;
    let close = 4 + end + 4;
    let close = text[close..]
        .find('\n')
        .map_or(text.len(), |i| close + i + 1);
    Some(&text[..close])
}

/// What makes project `name`'s baseline `summary` (from `run start`) red beyond the
/// failures its `known_failures` declare, or `None` when nothing does. A runner error is
/// never declarable: without results there is no baseline to excuse failures against.
fn undeclared_red(name: &str, summary: &Value) -> Option<String> {
    if let Some(error) = summary["runner_error"].as_str() {
        return Some(format!("{name}: runner error: {error}"));
    }
    let undeclared: Vec<&str> = match summary["undeclared"].as_array() {
        Some(ids) => ids.iter().filter_map(Value::as_str).collect(),
        // A summary without the split: every failure counts.
        None if summary["failing"].as_u64().unwrap_or(0) > 0 => vec!["failing tests"],
        None => Vec::new(),
    };
    if undeclared.is_empty() {
        return None;
    }
    Some(format!("{name}: {}", undeclared.join(", ")))
}

impl Conductor<'_> {
    /// The plan is committed at HEAD, or a planner writes it (one retry), it is checked
    /// and committed with its checklist.
    pub(crate) fn ensure_plan(&self) -> Result<(), Halt> {
        if !ticks_at_head(&self.work_tree, &self.plan_path).is_empty() {
            return Ok(());
        }
        let mut errors = Vec::new();
        for attempt in 1..=2 {
            self.run_planner(attempt, &errors)?;
            match self.validate_plan() {
                Ok((plan, text)) => return self.commit_plan(&plan, &text),
                Err(why) => {
                    self.journal
                        .record(&ConductorEvent::PlanInvalid(PlanInvalid {
                            attempt,
                            errors: why.clone(),
                        }))?;
                    self.progress.event(
                        "plan_invalid",
                        json!({ "attempt": attempt, "errors": why }),
                        &format!("plan: invalid (attempt {attempt}): {why}"),
                    );
                    errors = vec![why];
                }
            }
        }
        let _ = std::fs::remove_file(self.work_tree.join(&self.plan_path));
        Err(Bail::new(
            BailCause::PlanInvalid,
            format!("the planner wrote an invalid plan twice: {}", errors.join("; ")),
            format!("write {} yourself (its format: docs/cli.md, `tdd plan register`), commit it, and run `tdd conduct` again", self.plan_path),
        )
        .at(0, "plan")
        .into())
    }

    fn run_planner(&self, attempt: u32, errors: &[String]) -> Result<(), Halt> {
        let input = PlannerInput {
            issue: self.issue.clone(),
            repo: RepoFacts::default(),
            plan_path: self.plan_path.clone(),
            errors: errors.to_vec(),
        };
        let mut request = tdd_leaves::Request::new(
            Prompt::planner(&input)?,
            self.issue.number(),
            0,
            &self.work_tree,
        );
        request.attempt = attempt;
        self.run_leaf(crate::leaf::Who::Developer, request, 0, "plan")?;
        Ok(())
    }

    /// Reads and checks the planner's plan: the engine's own parse (with the config's
    /// projects), one criterion of the issue per cycle, every criterion covered.
    fn validate_plan(&self) -> Result<(Plan, String), String> {
        let path = self.work_tree.join(&self.plan_path);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", self.plan_path))?;
        let known: Vec<String> = self.config.project.keys().cloned().collect();
        let plan = Plan::parse(&path, &text, Some(&known)).map_err(|e| e.to_string())?;
        let mut covered = std::collections::BTreeSet::new();
        for cycle in &plan.cycles {
            let spec = self.issue.spec_for(cycle).map_err(|e| e.to_string())?;
            covered.insert(spec.position().0);
        }
        if covered.len() != self.issue.criteria().len() {
            return Err(format!(
                "the plan covers {} of the issue's {} acceptance criteria",
                covered.len(),
                self.issue.criteria().len()
            ));
        }
        Ok((plan, text))
    }

    /// Writes the projection (the planner's front-matter and the step checklist) and
    /// commits it.
    fn commit_plan(&self, plan: &Plan, text: &str) -> Result<(), Halt> {
        let front = front_matter(text).unwrap_or(text);
        let mut out = format!(
            "{front}\n# Issue #{}: {}\n\n",
            self.issue.number(),
            self.issue.title()
        );
        for cycle in &plan.cycles {
            let spec = self.issue.spec_for(cycle)?;
            out.push_str(&format!(
                "- [ ] Step {}: {} ({})\n",
                cycle.n,
                cycle.title,
                spec.text()
            ));
        }
        let path = self.work_tree.join(&self.plan_path);
        std::fs::write(&path, out).map_err(|source| {
            crate::error::ConductError::io(format!("writing {}", self.plan_path), source)
        })?;
        let git = Git::new(&self.work_tree);
        git.output(["add", "--", &self.plan_path])?;
        let message = format!(
            "plan: issue #{} {}",
            self.issue.number(),
            self.issue.title()
        );
        git.output([
            "commit",
            "-q",
            "--no-verify",
            "-m",
            &message,
            "--",
            &self.plan_path,
        ])?;
        tdd_engine::failpoint::hit("conduct_plan_committed");
        self.progress.event(
            "plan_committed",
            json!({ "steps": plan.cycles.len() }),
            &format!(
                "plan: {} steps committed in {}",
                plan.cycles.len(),
                self.plan_path
            ),
        );
        Ok(())
    }

    /// The engine run of this plan: adopted when active, else started. A baseline red
    /// beyond the project's declared `known_failures` (or with a runner error) bails
    /// `baseline_red` naming the undeclared failures. A run that already completed leaves
    /// nothing to do.
    pub(crate) fn ensure_run(&self) -> Result<(), Halt> {
        if let Some(state) = self.engine.status()? {
            self.cursor.found_run(state.run_id);
            return Ok(());
        }
        if let Some(done) = self.journal.engine_run()? {
            // The engine run of this conduct run is over: every step closed, or it was
            // abandoned at a red baseline (the engine's record says which, even when
            // the conductor was killed before noting it), and then a new one starts.
            let events =
                tdd_engine::ledger::Ledger::open(&self.location.database)?.events(Some(&done))?;
            let abandoned = tdd_engine::run::RunState::project(&events, self.engine.kinds())
                .map_err(tdd_engine::ledger::LedgerError::from)?
                .is_some_and(|s| s.status == tdd_engine::run::RunStatus::Abandoned);
            if !abandoned {
                self.cursor.found_run(done);
                return Ok(());
            }
        }
        let started = self
            .engine
            .begin_baseline()?
            .start(Path::new(&self.plan_path), self.progress)?;
        self.cursor.found_run(started.run_id.clone());
        self.journal.record(&ConductorEvent::RunStarted(EngineRun {
            run_id: started.run_id.clone(),
        }))?;
        tdd_engine::failpoint::hit("conduct_run_started");
        let red: Vec<String> = started
            .baselines
            .iter()
            .filter_map(|(name, summary)| undeclared_red(name, summary))
            .collect();
        if !red.is_empty() {
            self.engine.begin()?.abandon("baseline_red")?;
            self.journal
                .record(&ConductorEvent::RunAbandoned(EngineRun {
                    run_id: started.run_id.clone(),
                }))?;
            return Err(Bail::new(
                BailCause::BaselineRed,
                format!(
                    "the baseline is red apart from its declared failures: {}",
                    red.join("; ")
                ),
                "make these pass on the base branch, or declare them in the project's `known_failures` in tdd.toml, then run `tdd conduct` again",
            )
            .into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_read_and_written() {
        let text = "---\ncycles: []\n---\n# I\n\n- [ ] Step 1: a (x)\n- [ ] Step 2: b (y)\n";
        assert_eq!(ticks(text), vec![(1, false), (2, false)]);
        let ticked = tick(text, 2);
        assert_eq!(ticks(&ticked), vec![(1, false), (2, true)]);
        assert_eq!(front_matter(text), Some("---\ncycles: []\n---\n"));
    }

    #[test]
    fn only_undeclared_failures_and_runner_errors_make_a_baseline_red() {
        let declared = json!({ "failing": 1, "runner_error": null, "declared": ["app::a a"], "undeclared": [] });
        assert_eq!(undeclared_red("app", &declared), None);
        let mixed = json!({ "failing": 2, "runner_error": null, "declared": ["app::a a"], "undeclared": ["app::b b"] });
        assert_eq!(
            undeclared_red("app", &mixed).as_deref(),
            Some("app: app::b b")
        );
        let broken = json!({ "failing": 0, "runner_error": "cargo exited 101", "undeclared": [] });
        assert_eq!(
            undeclared_red("app", &broken).as_deref(),
            Some("app: runner error: cargo exited 101")
        );
        let green = json!({ "failing": 0, "runner_error": null, "undeclared": [] });
        assert_eq!(undeclared_red("app", &green), None);
    }
}
