//! What every command may need from its surroundings, resolved lazily and once.

use std::path::PathBuf;

use tdd_engine::config::Config;
use tdd_engine::git::Git;
use tdd_engine::git::GitProbe;
use tdd_engine::ledger::LedgerLocation;

use crate::error::CommandError;
use crate::output::Output;

/// The directory a command acts on and the output it writes to.
#[derive(Debug)]
pub struct Ctx {
    /// The directory given by `-C`, or the current directory.
    pub cwd: PathBuf,
    /// The output handle.
    pub out: Output,
    /// Where diagnostics go as JSON lines once a command names a file.
    pub trace: crate::diagnostics::TraceFile,
}

impl Ctx {
    /// The top of the git work tree containing `cwd`.
    pub fn work_tree(&self) -> Result<PathBuf, CommandError> {
        Ok(Git::new(&self.cwd).toplevel()?)
    }

    /// The work tree's `tdd.toml`, parsed; a missing file is refused with a hint to `tdd init`.
    pub fn config(&self) -> Result<(PathBuf, Config), CommandError> {
        let root = self.work_tree()?;
        match Config::load_from_root(&root)? {
            Some(found) => Ok(found),
            None => Err(CommandError::refused(
                "config_missing",
                format!("no tdd.toml at {}", root.display()),
            )
            .hint("run `tdd init` to write one")),
        }
    }

    /// The engine of this work tree, with its configuration loaded.
    pub fn engine(&self) -> Result<tdd_engine::run::Engine, CommandError> {
        let (path, config) = self.config()?;
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        Ok(tdd_engine::run::Engine::new(
            &self.work_tree()?,
            config,
            &text,
        )?)
    }

    /// Where this repository's ledger lives.
    pub fn ledger_location(&self) -> Result<LedgerLocation, CommandError> {
        Ok(LedgerLocation::resolve(&self.cwd, &GitProbe)?)
    }
}
