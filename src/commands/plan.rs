//! `tdd plan register`: validate a committed plan and record it as a contract.

use std::path::PathBuf;

use serde_json::json;
use tdd_engine::ledger::Ledger;
use tdd_engine::plan::CycleKind;
use tdd_engine::plan::read_committed;

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
    let (_, config) = ctx.config()?;
    let root = ctx.work_tree()?;
    let known: Vec<String> = config.project.keys().cloned().collect();
    let plan_path = ctx.cwd.join(&path);
    let plan_path = plan_path.canonicalize().unwrap_or(plan_path);
    let root = root.canonicalize().unwrap_or(root);
    let contract = read_committed(&root, &plan_path, Some(&known))?;
    let outside = tdd_engine::run::targets_outside_tests(&config, &contract.plan);
    if !outside.is_empty() {
        return Err(tdd_engine::plan::PlanError::Invalid {
            path: plan_path,
            message: outside.join("; "),
        }
        .into());
    }
    let location = ctx.ledger_location()?;
    let mut ledger = Ledger::open(&location.database)?;
    let reused = ledger
        .events_of_kind(None, "plan_registered")?
        .iter()
        .any(|e| e.payload["blob"] == contract.blob.as_str());
    let count = |k: CycleKind| contract.plan.cycles.iter().filter(|c| c.kind == k).count();
    let kinds = json!({
        "standard": count(CycleKind::Standard),
        "contract": count(CycleKind::Contract),
        "pin": count(CycleKind::Pin),
        "refactor": count(CycleKind::Refactor),
    });
    if !reused {
        ledger.append(
            None,
            "plan_registered",
            &serde_json::to_value(&contract).unwrap_or_default(),
        )?;
    }
    let text = format!(
        "registered {} as contract {} ({} cycles{})\n",
        contract.path,
        &contract.blob[..12.min(contract.blob.len())],
        contract.plan.cycles.len(),
        if reused { ", already registered" } else { "" }
    );
    let data = json!({
        "contract_id": contract.blob,
        "path": contract.path,
        "commit": contract.commit,
        "sha256": contract.sha256,
        "cycles": contract.plan.cycles,
        "kinds": kinds,
        "reused": reused,
    });
    Ok(Outcome::new(data, text))
}
