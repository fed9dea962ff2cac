//! `tdd verdict accept|reject`: the verifier leaf's answer.

use serde_json::json;
use tdd_engine::ledger::Ledger;
use tdd_leaves::Decision;
use tdd_leaves::identity::AuthError;
use tdd_leaves::identity::Claimed;
use tdd_leaves::verdict::Refusal;
use tdd_leaves::verdict::VerdictError;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

/// Give the verdict of the phase you verify. Only the verifier leaf launched for the
/// phase may (its TDD_LEAF_TOKEN is checked); an ACCEPT needs your own `tdd test`
/// runs of every target test.
#[derive(Debug, clap::Args)]
pub struct VerdictArgs {
    /// `accept` or `reject`.
    #[arg(value_parser = ["accept", "reject"])]
    decision: String,
    /// Why, in one or two sentences.
    #[arg(long, value_parser = clap::builder::NonEmptyStringValueParser::new())]
    reason: String,
    /// One concrete problem (repeat for several).
    #[arg(long = "finding", value_name = "TEXT")]
    findings: Vec<String>,
}

/// Runs `tdd verdict`.
pub fn cmd_verdict(ctx: &Ctx, args: VerdictArgs) -> Result<Outcome, CommandError> {
    let decision = if args.decision == "accept" {
        Decision::Accept
    } else {
        Decision::Reject
    };
    let Some(claimed) = Claimed::from_env() else {
        return Err(CommandError::refused(
            "verdict_outside_leaf",
            "`tdd verdict` is given by a verifier leaf, and this process is not one",
        )
        .hint("the conductor launches verifiers; TDD_LEAF_ID and TDD_LEAF_TOKEN identify them"));
    };
    let location = ctx.ledger_location()?;
    tdd_engine::integrity::ensure_intact(
        &location.database,
        &ctx.work_tree()?,
        &tdd_conductor::EVENT_KINDS,
    )?;
    let mut ledger = Ledger::open(&location.database)?;
    let leaf = match tdd_leaves::identity::authenticate(&ledger, &claimed) {
        Ok(leaf) => leaf,
        Err(AuthError::Ledger(error)) => return Err(error.into()),
        Err(error) => {
            tdd_leaves::verdict::record_refusal(
                &mut ledger,
                None,
                &claimed.leaf_id,
                "leaf_token_invalid",
                decision,
            )?;
            return Err(leaf_token_invalid(&error.to_string()));
        }
    };
    match tdd_leaves::verdict::submit(&mut ledger, &leaf, decision, &args.reason, &args.findings) {
        Ok(verdict) => {
            let text = format!(
                "verdict recorded: {} for {} of step {} (leaf {})\n",
                args.decision, verdict.phase, verdict.step, verdict.leaf_id
            );
            Ok(Outcome::new(&verdict, text).next(NextAction::terminal(
                Verb::Complete,
                "the verdict is recorded: stop now",
            )))
        }
        Err(VerdictError::Ledger(error)) => Err(error.into()),
        Err(VerdictError::Refused(refusal)) => Err(refused(&refusal)),
    }
}

/// The refusal for a claim whose token does not check out (also used by `tdd status`).
pub fn leaf_token_invalid(message: &str) -> CommandError {
    CommandError::refused("leaf_token_invalid", message.to_string())
        .hint("only the leaf the conductor launched holds its token; the attempt is recorded")
}

fn refused(refusal: &Refusal) -> CommandError {
    let message = refusal.to_string();
    match refusal {
        Refusal::NotVerifier { .. } => CommandError::refused("verdict_not_verifier", message).hint(
            "a developer or planner leaf does not judge its own work; the attempt is recorded",
        ),
        Refusal::Superseded { .. } => CommandError::refused("verdict_superseded", message)
            .hint("a newer verifier was launched for this phase"),
        Refusal::LeafOver { .. } => CommandError::refused("verdict_leaf_over", message)
            .hint("a verdict is given while the verifier runs"),
        Refusal::AlreadyGiven { .. } => CommandError::refused("verdict_already_given", message)
            .hint("each verifier gives one verdict"),
        Refusal::NoEvidence { missing } => {
            CommandError::refused("verdict_without_evidence", message)
                .hint("run each target with `tdd test <test id>` yourself, then give the verdict")
                .data(json!({ "missing": missing }))
        }
    }
}
