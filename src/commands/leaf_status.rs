//! `tdd status` inside a leaf: the leaf's own assignment, the same facts as its
//! prompt and nothing more.

use serde_json::json;
use tdd_engine::ledger::Ledger;
use tdd_leaves::identity::AuthError;
use tdd_leaves::identity::Claimed;
use tdd_prompts::Role;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

/// The assignment of the leaf this process runs in, when it runs in one.
pub fn inside_leaf(ctx: &Ctx) -> Result<Option<Outcome>, CommandError> {
    let Some(claimed) = Claimed::from_env() else {
        return Ok(None);
    };
    let location = ctx.ledger_location()?;
    let Some(ledger) = Ledger::open_read_only(&location.database)? else {
        return Err(crate::commands::verdict::leaf_token_invalid(&format!(
            "no leaf {} is recorded: this repository has no ledger",
            claimed.leaf_id
        )));
    };
    let leaf = match tdd_leaves::identity::authenticate(&ledger, &claimed) {
        Ok(leaf) => leaf,
        Err(AuthError::Ledger(error)) => return Err(error.into()),
        Err(error) => {
            return Err(crate::commands::verdict::leaf_token_invalid(
                &error.to_string(),
            ));
        }
    };
    let a = &leaf.assignment;
    let list = |key: &str| {
        a[key]
            .as_array()
            .map(|v| {
                v.iter()
                    .filter_map(|x| x.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    let (verb, detail) = match (leaf.role, leaf.phase.as_str()) {
        (Role::Verifier, _) => (
            Verb::GiveVerdict,
            "run the target tests yourself with `tdd test`, then answer with `tdd verdict`",
        ),
        (Role::Planner, _) => (Verb::WritePlan, "write the plan, one cycle per criterion"),
        (_, "green") => (Verb::WriteImplementation, "make the target tests pass"),
        (_, "refactor") => (
            Verb::RefactorOrAdvance,
            "restructure under green tests, or stop",
        ),
        _ => (Verb::WriteTest, "write the failing target test"),
    };
    let mut text = format!(
        "leaf {} · {} · {} · step {} of issue #{}\n",
        leaf.leaf_id, leaf.role, leaf.phase, leaf.step, leaf.issue
    );
    if !list("targets").is_empty() {
        text.push_str(&format!("  targets: {}\n", list("targets")));
    }
    if let Some(spec) = a["behaviour_spec"].as_str() {
        text.push_str(&format!("  behaviour: {spec}\n"));
    }
    if let Some(commit) = a["repo_at"].as_str() {
        text.push_str(&format!("  commit: {commit}\n"));
    }
    if let Some(criterion) = a["criterion"].as_str() {
        text.push_str(&format!("  criterion: {criterion}\n"));
    }
    let data = json!({
        "leaf": true,
        "leaf_id": leaf.leaf_id,
        "step": leaf.step,
        "attempt": leaf.attempt,
        "assignment": leaf.assignment,
    });
    Ok(Some(
        Outcome::new(data, text).next(NextAction::new(verb, detail)),
    ))
}

/// The id of the leaf this process runs in, when its token checks out against the
/// ledger; `None` outside a leaf or for a claim that does not.
pub fn verified_leaf_id(ctx: &Ctx) -> Option<String> {
    let claimed = Claimed::from_env()?;
    let location = ctx.ledger_location().ok()?;
    let ledger = Ledger::open_read_only(&location.database).ok()??;
    tdd_leaves::identity::authenticate(&ledger, &claimed)
        .ok()
        .map(|leaf| leaf.leaf_id)
}
