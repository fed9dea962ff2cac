//! `tdd advance`: observe the current cycle and move it forward if the gate allows.

use serde_json::json;
use tdd_engine::run::Unchanged;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;

/// Run what the current phase requires (the target at RED, the suite at GREEN, lint,
/// typecheck and suite at REFACTOR), revert changes to locked files, and move the cycle
/// only if the observation allows it. The phase is never an argument.
#[derive(Debug, clap::Args)]
pub struct AdvanceArgs {
    /// Try again even though the work tree is unchanged since the last refusal.
    #[arg(long)]
    retry: bool,
}

/// Runs `tdd advance`.
pub fn cmd_advance(ctx: &Ctx, args: AdvanceArgs) -> Result<Outcome, CommandError> {
    let engine = ctx.suite_engine()?;
    let unchanged = if args.retry {
        Unchanged::Judge
    } else {
        Unchanged::Refuse
    };
    let outcome = engine.begin()?.advance(unchanged, &ctx.out)?;
    let data = json!(outcome);
    if let Some(refusal) = &outcome.refused {
        let mut message = format!(
            "advance refused at cycle {} ({}): {}",
            outcome.cycle, outcome.from, refusal.reason
        );
        if !outcome.reverted.is_empty() {
            message.push_str(&format!(
                "; reverted locked files: {}",
                outcome.reverted.join(", ")
            ));
        }
        return Err(CommandError::refused(refusal.reason, message)
            .verb(refusal.verb)
            .hint(refusal.detail.clone())
            .data(data));
    }
    let mut text = format!(
        "cycle {}: {} -> {}",
        outcome.cycle, outcome.from, outcome.to
    );
    if let Some(commit) = &outcome.commit {
        text.push_str(&format!(" (commit {})", &commit[..12.min(commit.len())]));
    }
    text.push('\n');
    if !outcome.reverted.is_empty() {
        text.push_str(&format!(
            "reverted locked files: {}\n",
            outcome.reverted.join(", ")
        ));
    }
    if !outcome.undeclared.is_empty() {
        text.push_str(&format!(
            "left uncommitted (outside the cycle's roots): {}\n",
            outcome.undeclared.join(", ")
        ));
    }
    if !outcome.dependencies_changed.is_empty() {
        text.push_str(&format!(
            "dependencies changed, as cycle {} declares (pinned anew): {}\n",
            outcome.cycle,
            outcome.dependencies_changed.join("; ")
        ));
    }
    let next = if outcome.run_complete {
        text.push_str("the run is complete: every cycle is closed\n");
        NextAction::terminal(outcome.next, "every cycle is closed: the run is complete")
    } else if outcome.to == tdd_engine::run::Phase::Closed {
        NextAction::new(
            outcome.next,
            format!(
                "cycle {} is closed; the next cycle is open: run `tdd status` for its assignment",
                outcome.cycle
            ),
        )
    } else {
        NextAction::new(
            outcome.next,
            format!(
                "cycle {} is at {}: run `tdd status` for the assignment",
                outcome.cycle, outcome.to
            ),
        )
    };
    Ok(Outcome::new(data, text).next(next))
}
