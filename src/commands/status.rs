//! `tdd status`: where the active run stands and the one thing to do next.

use serde_json::json;
use tdd_engine::run::RunState;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

/// Show the active run: cycle k of n, its phase, its target and the verb to follow.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {}

/// Runs `tdd status`.
pub fn cmd_status(ctx: &Ctx, _args: StatusArgs) -> Result<Outcome, CommandError> {
    // Inside a leaf, the leaf's own assignment and nothing else.
    if let Some(outcome) = crate::commands::leaf_status::inside_leaf(ctx)? {
        return Ok(outcome);
    }
    let engine = ctx.engine()?;
    // Checked as a change would be: a ledger that fails verification is refused here too.
    let view = engine.view()?;
    let adopted = engine
        .adopted()
        .map(|a| (json!(a), format!("{}\n", a.describe())))
        .unwrap_or_default();
    let conductor = conductor_position(ctx, engine.work_tree());
    let elsewhere = conductors_elsewhere(ctx, engine.work_tree(), &conductor.0);
    // With no conductor running here, how the last one ended decides what to do next:
    // a bailed or stopped conduct is resumed by `tdd conduct`, whatever the run shows.
    let last = match (&conductor.0, ctx.ledger_location()) {
        (serde_json::Value::Null, Ok(location)) => {
            tdd_conductor::journal::last_conduct(&location.database, engine.work_tree())
                .ok()
                .flatten()
        }
        _ => None,
    };
    let last_data = last.as_ref().map(|l| {
        json!({
            "issue": l.issue,
            "issue_path": l.issue_path,
            "ended": l.ended.as_ref().map(tdd_engine::ledger::TypedEvent::kind),
        })
    });
    let after = after_conduct(last.as_ref());
    let lease = cores();
    let Some(state) = view.status()? else {
        let (next, said) = after.unwrap_or_else(|| (start_run(), String::new()));
        let data = json!({
            "active": false,
            "conductor": conductor.0,
            "conductors_elsewhere": elsewhere.0,
            "last_conduct": last_data,
            "adopted": adopted.0,
            "lease": lease.0,
        });
        let text = format!(
            "{}no active run\n{said}{}{}{}",
            adopted.1, conductor.1, elsewhere.1, lease.1
        );
        return Ok(Outcome::new(data, text).next(next));
    };
    let (mut data, mut text, mut next) = describe(&state);
    data["conductor"] = conductor.0;
    data["conductors_elsewhere"] = elsewhere.0;
    data["last_conduct"] = last_data.unwrap_or_default();
    data["adopted"] = adopted.0;
    text.insert_str(0, &adopted.1);
    data["lease"] = lease.0;
    if let Some((resume, said)) = after.filter(|(n, _)| n.verb == Verb::ResumeConduct) {
        text.push_str(&said);
        next = resume;
    }
    let text = format!("{text}{}{}{}", conductor.1, elsewhere.1, lease.1);
    Ok(Outcome::new(data, text).next(next))
}

/// How the machine's cores are shared now, as data and a text line: the line only while
/// some conductor holds a lease (else every runner gets the whole budget, as `{workers}`
/// always did), or when the budget or the leases cannot be read.
fn cores() -> (serde_json::Value, String) {
    use tdd_engine::observe::lease::BudgetSource;
    let survey = match tdd_engine::observe::lease::survey() {
        Ok(survey) => survey,
        Err(err) => {
            let message = tdd_supervisor::error_chain(&err);
            return (
                json!({ "error": message }),
                format!("cores: not known ({message})\n"),
            );
        }
    };
    let holders = match survey.leases.len() {
        0 => return (json!(survey), String::new()),
        1 => "1 conductor holds a lease".to_string(),
        n => format!("{n} conductors hold leases"),
    };
    let set_by = match survey.budget.from {
        BudgetSource::Variable => " set by TDD_CORE_BUDGET",
        BudgetSource::Machine => "",
    };
    let text = format!(
        "cores: {} of {}{set_by} ({holders} on this machine)\n",
        survey.workers, survey.budget.cores
    );
    (json!(survey), text)
}

/// What to do with no run active and no conductor: start one.
fn start_run() -> NextAction {
    NextAction::new(
        Verb::StartRun,
        "no run is active here: start one with `tdd run start --plan <path>`, or let \
         `tdd conduct <issue>` drive one",
    )
}

/// What to do after the last `tdd conduct` here ended as `last` says, and a line saying
/// how it ended; `None` when no conduct ran here or it has not ended.
fn after_conduct(
    last: Option<&tdd_conductor::journal::LastConduct>,
) -> Option<(NextAction, String)> {
    use tdd_conductor::ConductorEvent;
    let last = last?;
    let (issue, path) = (last.issue, &last.issue_path);
    match &last.ended {
        Some(ConductorEvent::Bailed(bailed)) => {
            let b = &bailed.bail;
            let at = match (b.step, &b.phase) {
                (Some(step), Some(phase)) => format!(" at step {step} ({phase})"),
                (Some(step), None) => format!(" at step {step}"),
                _ => String::new(),
            };
            let line = format!(
                "the last `tdd conduct` here, of issue #{issue}, bailed{at}: {}\n",
                b.detail
            );
            let next = NextAction::new(
                Verb::ResumeConduct,
                format!(
                    "{}; then `tdd conduct {path}` resumes issue #{issue} at its first \
                     unticked step",
                    b.action.trim_end_matches('.')
                ),
            );
            Some((next, line))
        }
        Some(ConductorEvent::Stopped(_)) => Some((
            NextAction::new(
                Verb::ResumeConduct,
                format!("`tdd conduct {path}` resumes issue #{issue} where the stop left it"),
            ),
            format!("the last `tdd conduct` here, of issue #{issue}, was stopped\n"),
        )),
        Some(ConductorEvent::Completed(_)) => Some((
            NextAction::terminal(
                Verb::Complete,
                format!(
                    "issue #{issue} is done; conduct another with `tdd conduct <issue>`, or \
                     start a run by hand with `tdd run start --plan <path>`"
                ),
            ),
            format!("the last `tdd conduct` here completed issue #{issue}\n"),
        )),
        _ => None,
    }
}

/// The conductors running in the repository's conductor worktrees (`tdd conduct
/// --worktree`), as data and text lines; looked for only when none runs here.
fn conductors_elsewhere(
    ctx: &Ctx,
    work_tree: &std::path::Path,
    here: &serde_json::Value,
) -> (serde_json::Value, String) {
    let found = match ctx.ledger_location() {
        Ok(location) if here.is_null() => {
            tdd_conductor::worktree::running_elsewhere(&location.dir, work_tree)
        }
        _ => Vec::new(),
    };
    let mut text = String::new();
    let mut data = Vec::new();
    for (path, p) in found {
        text.push_str(&format!(
            "conductor (pid {}) in the worktree {}: issue #{}, step {} of {}, {}\n",
            p.pid,
            path.display(),
            p.issue,
            p.step,
            p.of,
            p.phase
        ));
        let mut entry = json!(p);
        entry["worktree"] = json!(path);
        data.push(entry);
    }
    (json!(data), text)
}

/// The position of a `tdd conduct` running in this work tree, as data and a text line.
fn conductor_position(ctx: &Ctx, work_tree: &std::path::Path) -> (serde_json::Value, String) {
    let position = ctx
        .ledger_location()
        .ok()
        .and_then(|l| tdd_conductor::read_position(&l.dir, work_tree));
    let Some(p) = position else {
        return (serde_json::Value::Null, String::new());
    };
    let age = p
        .leaf_started_s
        .map(|s| tdd_engine::ledger::clock::unix_seconds().saturating_sub(s));
    let leaf = match (&p.leaf, age) {
        (Some(leaf), Some(age)) => format!(", leaf {leaf} running for {age} s"),
        _ => String::new(),
    };
    let text = format!(
        "conductor (pid {}): issue #{}, step {} of {}, {}{leaf}\n",
        p.pid, p.issue, p.step, p.of, p.phase
    );
    let mut data = json!(p);
    data["leaf_age_s"] = json!(age);
    (data, text)
}

/// The run as data, text and the next action: what every run command reports.
pub fn describe(state: &RunState) -> (serde_json::Value, String, NextAction) {
    let verb = state.verb();
    let total = state.cycles.len();
    if let Some(blocker) = &state.blocker {
        let data = json!({ "active": true, "run_id": state.run_id, "blocked": true, "blocker": blocker, "cycles": state.cycles });
        let text = format!(
            "run {} is BLOCKED: {}\n",
            state.run_id,
            blocker.detail.as_str()
        );
        let detail = "a human resolves the blocker, then runs `tdd resume --unblock --note ...`";
        return (data, text, NextAction::new(Verb::Blocked, detail));
    }
    if state.status == tdd_engine::run::RunStatus::Abandoned {
        let data = json!({ "active": false, "run_id": state.run_id, "abandoned": true });
        return (
            data,
            format!("run {} was abandoned\n", state.run_id),
            NextAction::terminal(Verb::Complete, "the run was abandoned"),
        );
    }
    let Some(index) = state.current() else {
        let data = json!({ "active": true, "run_id": state.run_id, "complete": true });
        return (
            data,
            format!("run {}: every cycle is closed\n", state.run_id),
            NextAction::terminal(Verb::Complete, "every cycle is closed"),
        );
    };
    let cycle = &state.cycles[index];
    let planned = &state.plan.cycles[index];
    let targets = cycle
        .target_override
        .clone()
        .map_or_else(|| planned.tests.clone(), |t| vec![t]);
    let detail = match &cycle.refusal {
        Some(r) => format!(
            "last advance refused ({}); next: {}",
            r.reason,
            r.verb.words()
        ),
        None => format!(
            "cycle {} ({}) is at {}; targets: {}",
            planned.n,
            planned.title,
            cycle.phase,
            targets.join(", ")
        ),
    };
    let data = json!({
        "active": true,
        "run_id": state.run_id,
        "plan": state.contract,
        "cycle": { "n": planned.n, "index": index + 1, "of": total, "title": planned.title,
                   "phase": cycle.phase, "kind": planned.kind, "tests": targets, "planned_tests": planned.tests,
                   "criterion": planned.criterion, "attempts": cycle.attempts, "refusal": cycle.refusal },
        "cycles": state.cycles,
    });
    let text = format!(
        "run {} · {} · cycle {} of {}: {} · {}\n  targets: {}\n",
        state.run_id,
        state.contract.path,
        index + 1,
        total,
        planned.title,
        cycle.phase,
        targets.join(", ")
    );
    (data, text, NextAction::new(verb, detail))
}
