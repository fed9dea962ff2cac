//! `tdd metrics`: how a run, or every run of one plan, went, in counts and rates.

use serde_json::json;
use tdd_report::Which;
use tdd_report::metrics::GroupBy;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Print a run's metrics: steps declared, closed and skipped; the RED-first violation
/// rate; developer attempts per phase; revise rounds; the verdict accept rate per
/// phase; bails by cause; leaves by how they ended; the engine's and the agents'
/// shares of the time; tokens and cost per step. From the ledger alone.
#[derive(Debug, clap::Args)]
pub struct MetricsArgs {
    /// The run: a conduct id or an engine run id; by default the last one conducted,
    /// else started, in this work tree.
    #[arg(long, conflicts_with = "all")]
    run: Option<String>,
    /// Every run in this repository's ledger, summed per plan contract (runs of
    /// different plans are never added up).
    #[arg(long)]
    all: bool,
    /// Also group the leaves by provider or by model.
    #[arg(long, value_enum)]
    by: Option<By>,
}

/// What `--by` groups leaves by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum By {
    /// The provider that ran them.
    Provider,
    /// The model their command line names.
    Model,
}

/// Runs `tdd metrics`.
pub fn cmd_metrics(ctx: &Ctx, args: MetricsArgs) -> Result<Outcome, CommandError> {
    let location = ctx.ledger_location()?;
    let work_tree = ctx.work_tree()?;
    let by = args.by.map(|b| match b {
        By::Provider => GroupBy::Provider,
        By::Model => GroupBy::Model,
    });
    if !args.all {
        let which = args.run.map_or(Which::Latest, Which::Id);
        let report = tdd_report::build(&location.database, &work_tree, &which)
            .map_err(crate::commands::report::report_error)?;
        let metrics = tdd_report::metrics::of(std::slice::from_ref(&report), by);
        let text = tdd_report::metrics::text(&metrics);
        return Ok(Outcome::new(json!({ "metrics": [metrics] }), text));
    }
    let reports = tdd_report::all_runs(&location.database, &work_tree)
        .map_err(crate::commands::report::report_error)?;
    // One sum per plan contract, in the order each contract first ran.
    let mut contracts: Vec<Option<String>> = Vec::new();
    for r in &reports {
        if !contracts.contains(&r.header.contract) {
            contracts.push(r.header.contract.clone());
        }
    }
    let all: Vec<tdd_report::metrics::Metrics> = contracts
        .iter()
        .map(|c| {
            let same: Vec<tdd_report::RunReport> = reports
                .iter()
                .filter(|r| &r.header.contract == c)
                .cloned()
                .collect();
            tdd_report::metrics::of(&same, by)
        })
        .collect();
    let mut text = format!(
        "{} run(s) of {} plan contract(s); runs are summed only with runs of the same plan\n",
        reports.len(),
        contracts.len()
    );
    for m in &all {
        text.push('\n');
        text.push_str(&tdd_report::metrics::text(m));
    }
    Ok(Outcome::new(json!({ "metrics": all }), text))
}
