//! `tdd test`: run tests through the project's adapter and print what was observed.

use serde_json::json;
use tdd_engine::observe::Observation;
use tdd_engine::observe::Outcome as TestOutcome;
use tdd_engine::observe::TargetStatus;
use tdd_engine::observe::TargetVerdict;
use tdd_engine::run::TestRequest;

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
    /// Run every project's whole suite (the default without ids).
    #[arg(long, conflicts_with = "targets")]
    all: bool,
}

/// Runs `tdd test`.
pub fn cmd_test(ctx: &Ctx, args: TestArgs) -> Result<Outcome, CommandError> {
    let request = if args.targets.is_empty() {
        TestRequest::Suites {
            project: args.project.as_deref(),
        }
    } else {
        TestRequest::Targets {
            ids: &args.targets,
            project: args.project.as_deref(),
        }
    };
    // Only a leaf whose token checks out is recorded as the one that ran the tests.
    let leaf = crate::commands::leaf_status::verified_leaf_id(ctx);
    let report = ctx
        .suite_engine()?
        .test(request, leaf.as_deref(), &ctx.out)?;
    let text = render(&report.observations, &report.targets);
    // With targets the verdict is authoritative: a runner that choked on an unknown id was
    // still observed, and the verdict says `not_found`.
    let unobserved: Vec<String> = if report.targets.is_empty() {
        report
            .observations
            .iter()
            .filter_map(|o| o.runner_error.clone())
            .collect()
    } else {
        report
            .targets
            .iter()
            .filter(|v| v.status == TargetStatus::RunnerError)
            .map(|v| v.detail.clone().unwrap_or_default())
            .collect()
    };
    let data = json!(report);
    if let Some(detail) = unobserved.first() {
        return Err(CommandError::refused(
            "runner_error",
            format!("the runner could not be observed: {detail}"),
        )
        // `tdd doctor` only checks that the runner starts; a runner that
        // started and then failed says why in its own output.
        .hint(
            "the runner's own output says why: see `invocations` (argv, exit, stdout, \
             stderr) in `tdd test --json`, or run that argv in the project",
        )
        .data(data)
        .text(text));
    }
    Ok(Outcome::new(data, text))
}

fn render(observations: &[Observation], verdicts: &[TargetVerdict]) -> String {
    let mut text = String::new();
    // A load error is printed once, under its project; a target it stopped says so.
    let load_errors: std::collections::HashMap<String, &str> = observations
        .iter()
        .flat_map(|o| &o.collection_errors)
        .map(|e| (format!("{}: {}", e.scope, e.message), e.scope.as_str()))
        .collect();
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
        if !v.matched.is_empty() {
            text.push_str(&format!("      matched: {}\n", v.matched.join(", ")));
        }
        match v.detail.as_ref().map(|d| (d, load_errors.get(d))) {
            Some((_, Some(scope))) => {
                text.push_str(&format!(
                    "      {scope} does not load (the error is below)\n"
                ));
            }
            Some((detail, None)) => text.push_str(&excerpt(detail)),
            None => {}
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
        for diagnostic in &o.diagnostics {
            text.push_str(&format!("skipped from the report: {diagnostic}\n"));
        }
        if let Some(err) = &o.runner_error {
            text.push_str(&format!("runner error: {err}\n"));
            if !o.collection_errors.is_empty() {
                text.push_str(
                    "      the load error above stopped the runner: fix it, and the runner runs the tests\n",
                );
            } else if let Some(last) = o.invocations.last() {
                text.push_str(&format!(
                    "      {} ended with {}\n",
                    last.argv.join(" "),
                    exit_text(&last.exit)
                ));
                text.push_str(&excerpt(last.stderr.trim()));
            }
        }
    }
    text
}

fn exit_text(exit: &tdd_engine::observe::Exit) -> String {
    use tdd_engine::observe::Exit;
    match exit {
        Exit::Code { code } => format!("exit {code}"),
        Exit::Signal { signal } => format!("signal {signal}"),
        Exit::TimedOut { after_seconds } => format!("a timeout after {after_seconds}s"),
        Exit::NotStarted { message } => format!("no start: {message}"),
    }
}

fn excerpt(message: &str) -> String {
    message
        .lines()
        .take(12)
        .map(|l| format!("      {l}\n"))
        .collect()
}
