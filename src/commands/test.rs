//! `tdd test`: run tests through the project's adapter and print what was observed.

use serde_json::json;
use tdd_engine::config::Config;
use tdd_engine::observe::Observation;
use tdd_engine::observe::Outcome as TestOutcome;
use tdd_engine::observe::Project;
use tdd_engine::observe::Selection;
use tdd_engine::observe::TargetStatus;
use tdd_engine::observe::TargetVerdict;
use tdd_engine::observe::adapter_for;
use tdd_engine::observe::observe_target;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Run tests through the project's adapter and report every outcome with failure
/// excerpts. Exit 0 when the run was observed, whatever the tests did; 1 when the runner
/// could not be observed. While a run is active the observation is recorded against its
/// current cycle.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Test ids to run alone (`project::native-id` or the runner's native id).
    targets: Vec<String>,
    /// The project to run (required when tdd.toml declares several and ids are not qualified).
    #[arg(long)]
    project: Option<String>,
    /// Run every project's whole suite.
    #[arg(long, conflicts_with = "targets")]
    all: bool,
}

/// Runs `tdd test`.
pub fn cmd_test(ctx: &Ctx, args: TestArgs) -> Result<Outcome, CommandError> {
    let (_, config) = ctx.config()?;
    let root = ctx.work_tree()?;
    let mut observations = Vec::new();
    let mut verdicts = Vec::new();
    if args.targets.is_empty() {
        let names: Vec<String> = match (&args.project, args.all) {
            (Some(p), _) => vec![known(&config, p)?],
            (None, _) => config.project.keys().cloned().collect(),
        };
        for name in names {
            let project = project(&config, &root, &name)?;
            ctx.out.progress(
                "suite_run",
                json!({ "project": name }),
                &format!("running the {name} suite..."),
            );
            observations.push(
                adapter_for(project.config.adapter)
                    .run(&project, &Selection::All)
                    .map_err(observe_err)?,
            );
        }
    } else {
        for target in &args.targets {
            let name = project_for(&config, target, args.project.as_deref())?;
            let project = project(&config, &root, &name)?;
            ctx.out.progress(
                "target_run",
                json!({ "target": target }),
                &format!("running {target}..."),
            );
            let adapter = adapter_for(project.config.adapter);
            let (observation, verdict) =
                observe_target(adapter.as_ref(), &project, target).map_err(observe_err)?;
            observations.push(observation);
            verdicts.push(verdict);
        }
    }
    let payload = json!({ "observations": observations, "targets": verdicts });
    // Only a leaf whose token checks out is recorded as the one that ran the tests.
    let leaf = crate::commands::leaf_status::verified_leaf_id(ctx);
    let recorded = ctx
        .engine()?
        .record_test(payload.clone(), leaf.as_deref())?;
    // A verifier judges in its own scratch worktree, where no run is active: its runs
    // are still recorded (without a run), as the evidence its verdict needs.
    if recorded.is_none()
        && let Some(leaf) = &leaf
    {
        let mut evidence = payload.clone();
        evidence["leaf"] = json!(leaf);
        tdd_engine::ledger::Ledger::open(&ctx.ledger_location()?.database)?.append(
            None,
            "test_observed",
            &evidence,
        )?;
    }
    let mut data = payload;
    data["recorded_in_run"] = json!(recorded);
    let text = render(&observations, &verdicts);
    // With targets the verdict is authoritative: a runner that choked on an unknown id was
    // still observed, and the verdict says `not_found`.
    let unobserved: Vec<String> = if verdicts.is_empty() {
        observations
            .iter()
            .filter_map(|o| o.runner_error.clone())
            .collect()
    } else {
        verdicts
            .iter()
            .filter(|v| v.status == TargetStatus::RunnerError)
            .map(|v| v.detail.clone().unwrap_or_default())
            .collect()
    };
    if let Some(detail) = unobserved.first() {
        return Err(CommandError::refused(
            "runner_error",
            format!("the runner could not be observed: {detail}"),
        )
        .hint("run `tdd doctor` to check the project's runner")
        .data(data)
        .text(text));
    }
    Ok(Outcome::new(data, text))
}

fn known(config: &Config, name: &str) -> Result<String, CommandError> {
    if config.project.contains_key(name) {
        return Ok(name.to_string());
    }
    let names: Vec<String> = config.project.keys().cloned().collect();
    let hint = tdd_engine::config::nearest_key(name, &names).map_or_else(
        || format!("declared projects: {}", names.join(", ")),
        |n| format!("did you mean `{n}`?"),
    );
    Err(CommandError::bad_input(
        "unknown_project",
        format!("no project `{name}` in tdd.toml"),
    )
    .hint(hint))
}

fn project_for(config: &Config, target: &str, flag: Option<&str>) -> Result<String, CommandError> {
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
        0 => Err(
            CommandError::refused("config_missing", "tdd.toml declares no project")
                .hint("add a [project.NAME] table"),
        ),
        _ => Err(CommandError::bad_input(
            "ambiguous_target",
            format!("`{target}` does not name its project and tdd.toml declares several"),
        )
        .hint("qualify the id as `project::id` or pass --project")),
    }
}

fn project(config: &Config, root: &std::path::Path, name: &str) -> Result<Project, CommandError> {
    let name = known(config, name)?;
    let project_config = config.project[&name].clone();
    Project::new(root, &name, project_config).map_err(observe_err)
}

fn observe_err(err: tdd_engine::observe::ObserveError) -> CommandError {
    CommandError::refused("runner_unavailable", crate::error::error_chain(&err))
        .hint("run `tdd doctor` to check the project's runner")
}

fn render(observations: &[Observation], verdicts: &[TargetVerdict]) -> String {
    let mut text = String::new();
    for v in verdicts {
        let mark = if v.status == TargetStatus::Passed {
            "PASS"
        } else {
            "FAIL"
        };
        let status = serde_json::to_value(v.status)
            .ok()
            .and_then(|s| s.as_str().map(str::to_string))
            .unwrap_or_default();
        text.push_str(&format!("{mark}  {:<18} {}\n", status, v.id));
        if let Some(detail) = &v.detail {
            text.push_str(&excerpt(detail));
        }
    }
    for o in observations {
        let t = &o.totals;
        text.push_str(&format!(
            "{}: {} passed, {} failed, {} errors, {} skipped ({} ms)\n",
            o.project, t.passed, t.failed, t.errors, t.skipped, o.wall_ms
        ));
        if verdicts.is_empty() {
            for (id, result) in o
                .tests
                .iter()
                .filter(|(_, r)| matches!(r.outcome, TestOutcome::Failed | TestOutcome::Error))
            {
                text.push_str(&format!("FAIL  {id}\n"));
                if let Some(f) = &result.failure {
                    text.push_str(&excerpt(&f.message));
                }
            }
        }
        for e in &o.collection_errors {
            text.push_str(&format!(
                "ERROR {} does not load:\n{}",
                e.scope,
                excerpt(&e.message)
            ));
        }
        if let Some(err) = &o.runner_error {
            text.push_str(&format!("runner error: {err}\n"));
        }
    }
    text
}

fn excerpt(message: &str) -> String {
    message
        .lines()
        .take(12)
        .map(|l| format!("      {l}\n"))
        .collect()
}
