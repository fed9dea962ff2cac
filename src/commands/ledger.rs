//! `tdd ledger verify` and `tdd ledger path`.

use serde_json::json;
use tdd_engine::ledger::Ledger;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

/// Inspect this repository's ledger.
#[derive(Debug, clap::Subcommand)]
pub enum LedgerCommand {
    /// Walk the hash chain; exit 1 naming the first event that does not match.
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
    let Some(ledger) = Ledger::open_read_only(&location.database)? else {
        let data = json!({ "database": location.database, "events": 0, "exists": false });
        return Ok(Outcome::new(
            data,
            "ledger intact: 0 events (no ledger yet)\n",
        ));
    };
    let report = ledger.verify()?;
    let data = json!({
        "database": location.database,
        "events": report.events,
        "exists": true,
        "schema_version": ledger.schema_version()?,
        "broken": report.broken,
    });
    match report.broken {
        None => Ok(
            Outcome::new(data, format!("ledger intact: {} events\n", report.events)).next(
                NextAction::terminal(Verb::Complete, "the ledger chain is intact"),
            ),
        ),
        Some(broken) => {
            let at = broken
                .event_id
                .map_or_else(|| "the chain head".to_string(), |id| format!("event {id}"));
            Err(CommandError::refused(
                "ledger_tampered",
                format!("ledger chain broken at {at}: {}", broken.reason),
            )
            .hint(format!(
                "the ledger at {} was edited outside tdd; runs recorded in it cannot be trusted",
                location.database.display()
            ))
            .data(data))
        }
    }
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
