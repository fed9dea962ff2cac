//! `tdd leaves show <id> --prompt`: what a leaf was told, exactly.

use serde_json::json;
use tdd_engine::ledger::Ledger;
use tdd_leaves::events::LeavesEvent;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Show one leaf's record: role, provider, assignment; with --prompt, exactly the
/// prompt it was given.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// The leaf id (TDD_LEAF_ID) or the supervisor's id of the leaf.
    id: String,
    /// Print the prompt, byte for byte, instead of the record.
    #[arg(long)]
    prompt: bool,
}

/// Runs `tdd leaves show`.
pub fn cmd_leaves_show(ctx: &Ctx, args: ShowArgs) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    let (record, sandbox) = match Ledger::open_read_only(&location.database)? {
        Some(ledger) => {
            let record = tdd_leaves::identity::find_leaf(&ledger, &args.id)?;
            let sandbox = match &record {
                Some(r) => sandbox_of(&ledger, &r.leaf_id)?,
                None => None,
            };
            (record, sandbox)
        }
        None => (None, None),
    };
    let Some(record) = record else {
        return Err(CommandError::bad_input(
            "leaf_not_found",
            format!(
                "no leaf {} is recorded in this repository's ledger",
                args.id
            ),
        )
        .hint("list leaves with `tdd leaves`"));
    };
    if args.prompt {
        let data = json!({ "leaf_id": record.leaf_id, "prompt": record.prompt });
        return Ok(Outcome::new(data, record.prompt.text.clone()));
    }
    let sandbox_text = sandbox.as_deref().unwrap_or("not asked for");
    let text = format!(
        "leaf {}\n  role: {}\n  provider: {}\n  issue #{} · step {} · {} · attempt {}\n  prompt: {} ({} bytes, {} fixed, {} issue-specific)\n  sandbox: {sandbox_text}\n  output: `tdd logs {}`\n",
        record.leaf_id,
        record.role,
        record.provider,
        record.issue,
        record.step,
        record.phase,
        record.attempt,
        record.prompt.template,
        record.prompt.bytes,
        record.prompt.fixed_bytes,
        record.prompt.variable_bytes,
        record.leaf_id,
    );
    let mut data = serde_json::to_value(&record).unwrap_or_default();
    if let Some(prompt) = data.get_mut("prompt").and_then(|p| p.as_object_mut()) {
        prompt.remove("text");
    }
    if let Some(object) = data.as_object_mut() {
        object.insert("sandbox".into(), json!(sandbox));
    }
    Ok(Outcome::new(data, text))
}

/// The confinement the leaf ran under, from its `leaf_started` event: `None` when it
/// never started or no confinement was asked for.
fn sandbox_of(ledger: &Ledger, leaf_id: &str) -> Result<Option<String>, CommandError> {
    let started = ledger.typed::<LeavesEvent>(None, &["leaf_started"])?;
    Ok(started
        .into_iter()
        .rev()
        .find_map(|(_, event)| match event {
            LeavesEvent::LeafStarted(started) if started.leaf_id == leaf_id => {
                Some(started.sandbox)
            }
            _ => None,
        })
        .flatten())
}
