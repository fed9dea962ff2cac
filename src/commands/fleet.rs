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
    /// Show the fleet again every SECONDS (2 when not given) until interrupted: on a
    /// terminal the table is redrawn in place; in JSON (--json, or stdout not a
    /// terminal) each refresh is a `fleet` event, an NDJSON line on stderr.
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "2")]
    watch: Option<u64>,
    /// With --watch, stop after this many refreshes and answer with the last.
    #[arg(long, value_name = "N", requires = "watch")]
    count: Option<u64>,
}

/// Runs `tdd fleet`.
pub fn cmd_fleet(ctx: &Ctx, args: FleetArgs) -> Result<Outcome, CommandError> {
    let dirs = ledger_dirs(ctx, args.all_repos)?;
    let Some(every) = args.watch else {
        return Ok(answer(ctx, &rows(&dirs)?));
    };
    if every == 0 {
        return Err(CommandError::bad_input(
            "watch_interval_invalid",
            "--watch takes a number of seconds of 1 or more",
        )
        .hint("tdd fleet --watch 2"));
    }
    let mut shown = 0u64;
    loop {
        let rows = rows(&dirs)?;
        shown += 1;
        if args.count.is_some_and(|n| shown >= n) {
            return Ok(answer(ctx, &rows));
        }
        let table = tdd_report::fleet::text(&rows);
        let header = format!(
            "tdd fleet, every {every}s, at {} (Ctrl-C to stop)\n",
            tdd_engine::ledger::clock::now_rfc3339()
        );
        if ctx.out.is_json() {
            ctx.out.progress(
                "fleet",
                json!({ "runs": rows }),
                &format!("{header}{table}"),
            );
        } else {
            // Text goes to a terminal only: home and clear, then the table, redrawn in
            // place.
            crate::output::write_out(&format!("\x1b[H\x1b[2J{header}{table}"));
        }
        // A refresh interval, not a synchronisation: nothing waits on it.
        std::thread::sleep(std::time::Duration::from_secs(every));
    }
}

/// The fleet of `dirs` as of now.
fn rows(dirs: &[std::path::PathBuf]) -> Result<Vec<tdd_report::fleet::FleetRow>, CommandError> {
    let now = tdd_engine::ledger::clock::unix_seconds();
    tdd_report::fleet::fleet(dirs, now).map_err(crate::commands::report::report_error)
}

/// The answer for `rows`: `data.runs`, and the table where text is shown.
fn answer(ctx: &Ctx, rows: &[tdd_report::fleet::FleetRow]) -> Outcome {
    /// `data`, serialised once, straight from the rows.
    #[derive(serde::Serialize)]
    struct Data<'a> {
        runs: &'a [tdd_report::fleet::FleetRow],
    }
    let text = if ctx.out.is_json() {
        String::new()
    } else {
        tdd_report::fleet::text(rows)
    };
    Outcome::new(Data { runs: rows }, text)
}

/// The ledger directories the fleet reads: this repository's, or with `all_repos` every
/// repository's in the ledger home.
fn ledger_dirs(ctx: &Ctx, all_repos: bool) -> Result<Vec<std::path::PathBuf>, CommandError> {
    Ok(if all_repos {
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
    })
}

/// The ledger home, found as for this repository; outside a repository, from
/// `TDD_LEDGER_HOME` or the default under the home directory.
fn ledger_home(ctx: &Ctx) -> Result<std::path::PathBuf, CommandError> {
    if let Ok(location) = ctx.ledger_location() {
        return Ok(location.home);
    }
    Ok(tdd_engine::ledger::LedgerLocation::home_from_env()?)
}
