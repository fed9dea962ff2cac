//! `tdd plan register`: validate a committed plan and record it as a contract.

use std::path::PathBuf;

use serde_json::json;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Work with plan contracts.
#[derive(Debug, clap::Subcommand)]
pub enum PlanCommand {
    /// Validate the committed version of a markdown plan (YAML front-matter) and record it
    /// in the ledger as a contract identified by its git blob.
    Register {
        /// The plan file, relative to the current directory.
        path: PathBuf,
    },
}

impl PlanCommand {
    /// The envelope's command name.
    pub fn name(&self) -> &'static str {
        match self {
            PlanCommand::Register { .. } => "plan register",
        }
    }
}

/// Runs `tdd plan ...`.
pub fn cmd_plan(ctx: &Ctx, cmd: PlanCommand) -> Result<Outcome, CommandError> {
    match cmd {
        PlanCommand::Register { path } => register(ctx, path),
    }
}

fn register(ctx: &Ctx, path: PathBuf) -> Result<Outcome, CommandError> {
    let plan_path = ctx.cwd.join(&path);
    let plan_path = plan_path.canonicalize().unwrap_or(plan_path);
    let registered = ctx.engine()?.begin_unlocked()?.register_plan(&plan_path)?;
    let contract = &registered.contract;
    let text = format!(
        "registered {} as contract {} ({} cycles{})\n",
        contract.path,
        &contract.blob[..12.min(contract.blob.len())],
        contract.plan.cycles.len(),
        if registered.reused {
            ", already registered"
        } else {
            ""
        }
    );
    let data = json!({
        "contract_id": contract.blob,
        "path": contract.path,
        "commit": contract.commit,
        "sha256": contract.sha256,
        "cycles": contract.plan.cycles,
        "kinds": registered.kinds,
        "reused": registered.reused,
    });
    Ok(Outcome::new(data, text))
}
