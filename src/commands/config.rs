//! `tdd config show`: the configuration as `tdd` resolved it, defaults included.

use serde_json::json;
use tdd_engine::config::Config;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::output::Outcome;

/// Inspect the configuration.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print tdd.toml as resolved, with every default filled in.
    Show,
}

impl ConfigCommand {
    /// The envelope's command name.
    pub fn name(&self) -> &'static str {
        match self {
            ConfigCommand::Show => "config show",
        }
    }
}

/// Runs `tdd config ...`.
pub fn cmd_config(ctx: &Ctx, cmd: ConfigCommand) -> Result<Outcome, CommandError> {
    match cmd {
        ConfigCommand::Show => show(ctx),
    }
}

fn show(ctx: &Ctx) -> Result<Outcome, CommandError> {
    let (path, config, text) = ctx.config()?;
    let rendered = toml::to_string_pretty(&config).map_err(|e| {
        CommandError::internal(
            "render_failed",
            format!("cannot render the configuration: {e}"),
        )
    })?;
    let data = json!({
        "path": path,
        "sha256": Config::text_sha256(&text),
        "config": config,
    });
    Ok(Outcome::new(
        data,
        format!("# {}\n{rendered}", path.display()),
    ))
}
