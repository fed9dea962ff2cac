//! `tdd ledger verify` and `tdd ledger path`.

use serde_json::json;
use tdd_engine::integrity;
use tdd_engine::integrity::Integrity;
use tdd_engine::integrity::Scope;
use tdd_engine::ledger::Ledger;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

/// Inspect this repository's ledger.
#[derive(Debug, clap::Subcommand)]
pub enum LedgerCommand {
    /// Walk the hash chain and the run commits of the branch; exit 1 naming the first
    /// event that does not match, or every commit that disagrees with the ledger.
    Verify,
    /// Print where this repository's ledger lives.
    Path,
}

impl LedgerCommand {
    /// The envelope's command name.
    pub fn name(&self) -> &'static str {
        match self {
            LedgerCommand::Verify => "ledger verify",
            LedgerCommand::Path => "ledger path",
        }
    }
}

/// Runs `tdd ledger ...`.
pub fn cmd_ledger(ctx: &Ctx, cmd: LedgerCommand) -> Result<Outcome, CommandError> {
    match cmd {
        LedgerCommand::Verify => verify(ctx),
        LedgerCommand::Path => path(ctx),
    }
}

fn verify(ctx: &Ctx) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    ctx.out.debug(&format!(
        "opening {} read-only",
        location.database.display()
    ));
    let found = integrity::check(&location.database, &ctx.work_tree()?, Scope::Full)?;
    let schema_version = match Ledger::open_read_only(&location.database)? {
        Some(ledger) => Some(ledger.schema_version()?),
        None => None,
    };
    let mut data = json!(found);
    data["database"] = json!(location.database);
    data["exists"] = json!(found.ledger_exists);
    data["schema_version"] = json!(schema_version);
    data["broken"] = json!(found.chain);
    if !found.is_intact() {
        return Err(tampered(&found, &location.database).data(data));
    }
    // Every phase commit of the run active here must still be on the branch: one reset
    // or amended away is work the ledger vouches for that the branch no longer holds.
    let off_branch = match ctx.engine() {
        Ok(engine) => engine.phase_commits_off_branch()?,
        Err(_) => Vec::new(),
    };
    data["phase_commits_off_branch"] = json!(
        off_branch
            .iter()
            .map(|(n, phase, commit)| json!({ "cycle": n, "phase": phase, "commit": commit }))
            .collect::<Vec<_>>()
    );
    if let Some((_, _, first)) = off_branch.first() {
        let mut text = String::new();
        for (n, phase, commit) in &off_branch {
            text.push_str(&format!(
                "cycle {n}: the {phase} commit {commit} is not on this branch\n"
            ));
        }
        return Err(CommandError::refused(
            "phase_commit_missing",
            format!(
                "{} phase commit(s) recorded by the active run are not on this branch: it was reset, amended or rebased after tdd recorded them",
                off_branch.len()
            ),
        )
        .hint(format!(
            "put the branch back on the recorded work with `git reset --keep {first}` (or find it with `git reflog`), then run `tdd ledger verify` again"
        ))
        .text(text)
        .data(data));
    }
    let text = format!(
        "ledger intact: {} events{}; {} run commits on this branch, {} anchored\n",
        found.events,
        if found.ledger_exists {
            ""
        } else {
            " (no ledger yet)"
        },
        found.run_commits,
        found.anchors
    );
    Ok(Outcome::new(data, text).next(NextAction::terminal(
        Verb::Complete,
        "the ledger chain is intact and matches the branch",
    )))
}

/// The refusal for a ledger that fails verification, naming every commit concerned.
fn tampered(found: &Integrity, database: &std::path::Path) -> CommandError {
    let mut text = String::new();
    for problem in &found.problems {
        text.push_str(&format!(
            "commit {} (run {}): {}\n",
            problem.commit, problem.run_id, problem.reason
        ));
    }
    let hint = format!(
        "the ledger at {} does not match what tdd recorded; {}",
        database.display(),
        integrity::RESTORE_HINT
    );
    CommandError::refused("ledger_tampered", found.summary())
        .hint(hint)
        .text(text)
}

fn path(ctx: &Ctx) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    let exists = location.database.exists();
    let data = json!({
        "database": location.database,
        "dir": location.dir,
        "home": location.home,
        "home_source": location.home_source,
        "repository": location.repository,
        "exists": exists,
    });
    Ok(Outcome::new(
        data,
        format!("{}\n", location.database.display()),
    ))
}
