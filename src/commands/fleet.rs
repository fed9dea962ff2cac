//! `tdd fleet`: every run in the ledger home, where it stands and who drives it.

use serde_json::json;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// List every run of this repository's ledger (or, with --all-repos, of every
/// repository in the ledger home): its work tree, step k of n and phase, the leaf
/// running now and for how long, the age of its last event, and whether it is stale
/// (no conductor and no event for 30 minutes). Reads the ledgers read-only, while
/// conductors write them.
#[derive(Debug, clap::Args)]
pub struct FleetArgs {
    /// Every repository in the ledger home, not only this one.
    #[arg(long)]
    all_repos: bool,
}

/// Runs `tdd fleet`.
pub fn cmd_fleet(ctx: &Ctx, args: FleetArgs) -> Result<Outcome, CommandError> {
    let dirs = if args.all_repos {
        let home = ledger_home(ctx)?;
        let mut dirs: Vec<std::path::PathBuf> = std::fs::read_dir(home.join("repos"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        dirs
    } else {
        vec![ctx.ledger_location()?.dir]
    };
    let now = tdd_engine::ledger::clock::unix_seconds();
    let rows =
        tdd_report::fleet::fleet(&dirs, now).map_err(crate::commands::report::report_error)?;
    let text = tdd_report::fleet::text(&rows);
    Ok(Outcome::new(json!({ "runs": rows }), text))
}

/// The ledger home, found as for this repository; outside a repository, from
/// `TDD_LEDGER_HOME` or the default under the home directory.
fn ledger_home(ctx: &Ctx) -> Result<std::path::PathBuf, CommandError> {
    if let Ok(location) = ctx.ledger_location() {
        return Ok(location.home);
    }
    Ok(tdd_engine::ledger::LedgerLocation::home_from_env()?)
}
