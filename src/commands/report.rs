//! `tdd report`: one self-contained HTML page of a run, computed from the ledger.

use std::path::Path;
use std::path::PathBuf;

use serde_json::json;
use tdd_report::ReportError;
use tdd_report::Which;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Write the run report: one HTML file that opens from disk with no server and no
/// network (a timeline of every leaf and engine run, the test deltas, the evidence of
/// every gate), computed from the ledger alone.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// The run: a conduct id (`conduct-…`) or an engine run id (`run-…`); by default
    /// the last one conducted, else started, in this work tree.
    #[arg(long)]
    run: Option<String>,
    /// Where to write the page; by default `report.html` in the conduct's run directory,
    /// or `reports/<run id>.html` in the ledger directory for a run driven by hand.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Runs `tdd report`.
pub fn cmd_report(ctx: &Ctx, args: ReportArgs) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    let which = args.run.clone().map_or(Which::Latest, Which::Id);
    let report =
        tdd_report::build(&location.database, &ctx.work_tree()?, &which).map_err(report_error)?;
    let path = match args.out {
        Some(out) => out,
        None => default_path(&location.dir, &report),
    };
    write_page(&path, &report)?;
    let text = format!("report: {}\n", path.display());
    Ok(Outcome::new(
        json!({ "path": path, "report": report }),
        text,
    ))
}

/// Writes `report`'s page to `path` (its directory made), through a temporary file and
/// a rename, so a reader never sees half a page.
pub fn write_page(path: &Path, report: &tdd_report::RunReport) -> Result<(), CommandError> {
    let fail = |e: std::io::Error| {
        CommandError::refused(
            "report_unwritable",
            format!("failed to write the report {}: {e}", path.display()),
        )
        .hint("pass --out with a file in a directory you can write")
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let partial = path.with_extension("html.partial");
    std::fs::write(&partial, tdd_report::html::page(report)).map_err(fail)?;
    std::fs::rename(&partial, path).map_err(fail)
}

/// Where a run's page goes unless told: beside its conduct's draft PR, or under the
/// ledger directory for a run driven by hand.
pub fn default_path(ledger_dir: &Path, report: &tdd_report::RunReport) -> PathBuf {
    match (&report.header.conduct, &report.header.run_id) {
        (Some(conduct), _) => ledger_dir.join("conduct").join(conduct).join("report.html"),
        (None, Some(run)) => ledger_dir.join("reports").join(format!("{run}.html")),
        (None, None) => ledger_dir.join("reports").join("report.html"),
    }
}

/// A report error as the command's error, with a hint that leads somewhere.
pub fn report_error(err: ReportError) -> CommandError {
    match err {
        ReportError::NoLedger { .. } | ReportError::NoRun => {
            CommandError::refused("no_run", err.to_string())
                .hint("start one with `tdd conduct <issue>` or `tdd run start`, then run `tdd report`")
        }
        ReportError::NotFound { .. } => CommandError::bad_input("run_not_found", err.to_string())
            .hint("`tdd status` names the active run; `tdd ledger export` lists every event with its `run_id`"),
        // Only a thread that panicked says this: a bug in tdd, as a panic is.
        ReportError::Unreadable { .. } => CommandError::internal("ledger_unreadable", err.to_string()),
        ReportError::Ledger(e) => e.into(),
        ReportError::Event(e) => tdd_engine::ledger::LedgerError::from(e).into(),
    }
}
