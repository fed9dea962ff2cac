//! `tdd hook`'s events around an agent's turn: after a shell command ran (the bracket's
//! check) and when the agent would end its turn.

use tdd_engine::observe::TargetStatus;
use tdd_leaves::hook::Harness;
use tdd_leaves::hook::ToolCall;

use super::hook::phase_name;
use super::hook::read_event;
use super::hook::set_up;
use crate::context::Ctx;
use crate::error::CommandError;

/// The bracket's second half, after a shell command ran: the locked files it changed
/// since the phase began are restored (the gate's own revert, recorded as
/// `hook_reverted`), and the reason names them for the agent. `None` for a tool that is
/// no shell (its writes were judged before it ran), with no run or cycle open, or when
/// the command changed no locked file.
pub(super) fn post_tool_use(
    ctx: &Ctx,
    harness: Harness,
    started: std::time::Instant,
) -> Result<Option<String>, CommandError> {
    let text = read_event()?;
    let call = ToolCall::parse_from(harness, &text)
        .map_err(|e| CommandError::bad_input("hook_input", e.to_string()))?;
    if !call.is_shell() || !set_up(ctx)? {
        return Ok(None);
    }
    let engine = ctx.engine()?;
    let call = tdd_engine::run::events::HookReverted {
        n: None,
        phase: None,
        harness: harness.as_str().to_string(),
        tool: call.tool.clone(),
        restored: Vec::new(),
        removed: Vec::new(),
        latency_ms: 0,
    };
    let Some(reverted) = engine.begin()?.revert_after_tool(call, started)? else {
        return Ok(None);
    };
    let mut undone = Vec::new();
    if !reverted.restored.is_empty() {
        undone.push(format!("restored {}", reverted.restored.join(", ")));
    }
    if !reverted.removed.is_empty() {
        undone.push(format!("removed {}", reverted.removed.join(", ")));
    }
    Ok(Some(format!(
        "tdd: that command changed files locked in this phase, and tdd undid it: {}. They stay as the phase began until the phase moves; `tdd status` says what is locked and what to do instead.",
        undone.join("; ")
    )))
}

/// How many times in a row, in one phase, the end of a turn is refused before it is let
/// through (and a note says so): the agent may be stuck, and a person should look.
const STOP_LIMIT: u32 = 3;

/// Why the agent must not end its turn yet, or `None` when it may: in RED while a target
/// does not fail by an assertion, in GREEN while one does not pass, each run now in the
/// work tree as `tdd test` runs it. Other phases, no run or no open cycle: it may. After
/// [`STOP_LIMIT`] refusals in a row in one phase the turn ends, and a note says so.
pub(super) fn stop(
    ctx: &Ctx,
    harness: Harness,
    started: std::time::Instant,
) -> Result<Option<String>, CommandError> {
    use tdd_engine::run::Phase;
    read_event()?;
    if !set_up(ctx)? {
        return Ok(None);
    }
    let engine = ctx.engine()?;
    let view = engine.view()?;
    let Some((state, locks)) = view.locks()? else {
        return Ok(None);
    };
    let Some((cycle, planned)) = state.current_cycle() else {
        return Ok(None);
    };
    let (wanted, words) = match locks.phase() {
        Phase::AwaitingTest | Phase::AwaitingPin => (
            TargetStatus::FailedAssertion,
            "RED wants it to fail on an assertion: write the failing test (and a stub, if the cycle declares one)",
        ),
        Phase::AwaitingImpl => (
            TargetStatus::Passed,
            "GREEN wants it to pass: implement the behaviour",
        ),
        _ => return Ok(None),
    };
    let denied = view.stops_denied_in_phase(&state.run_id)?;
    if denied >= STOP_LIMIT {
        let text = format!(
            "the stop hook let the turn end after refusing it {denied} times in a row in {}",
            phase_name(locks.phase())
        );
        engine.begin_unlocked()?.note(&text)?;
        return Ok(None);
    }
    let targets = cycle
        .target_override
        .clone()
        .map_or_else(|| planned.tests.clone(), |t| vec![t]);
    let report = engine.test(
        tdd_engine::run::TestRequest::Targets {
            ids: &targets,
            project: planned.projects.first().map(String::as_str),
        },
        None,
        &ctx.out,
    )?;
    let off = off_targets(&report.targets, wanted);
    if off.is_empty() {
        return Ok(None);
    }
    let reason = format!(
        "tdd: not done yet. Cycle {} ({}) is in {}, and its target, run now, is not where the gate wants it: {}. {words}; then `tdd advance`.",
        planned.n,
        planned.title,
        phase_name(locks.phase()),
        off.join(", ")
    );
    let denied = tdd_engine::run::events::HookDenied {
        n: None,
        phase: None,
        harness: harness.as_str().to_string(),
        tool: tdd_engine::run::STOP_TOOL.to_string(),
        paths: targets,
        reason: reason.clone(),
        latency_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    engine.begin_unlocked()?.hook_denied(denied)?;
    Ok(Some(reason))
}

/// The targets of `verdicts` not at `wanted`, each as "`id` is status".
fn off_targets(
    verdicts: &[tdd_engine::observe::TargetVerdict],
    wanted: TargetStatus,
) -> Vec<String> {
    verdicts
        .iter()
        .filter(|v| v.status != wanted)
        .map(|v| {
            let status = serde_json::to_value(v.status)
                .ok()
                .and_then(|s| s.as_str().map(str::to_string))
                .unwrap_or_default();
            format!("`{}` is {status}", v.id)
        })
        .collect()
}
