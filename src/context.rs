//! What every command may need from its surroundings, resolved when it first asks.
//!
//! The work tree is resolved once per command and kept; the configuration is read
//! once per call (a command that writes `tdd.toml`, such as `tdd init`, sees what it
//! wrote), and the engine is built from exactly the text that was parsed.

use std::cell::OnceCell;
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
    /// The work tree, once resolved.
    work_tree: OnceCell<PathBuf>,
}

impl Ctx {
    /// A context acting on `cwd`, nothing resolved yet.
    pub fn new(cwd: PathBuf, out: Output, trace: crate::diagnostics::TraceFile) -> Ctx {
        Ctx {
            cwd,
            out,
            trace,
            work_tree: OnceCell::new(),
        }
    }

    /// The top of the git work tree containing `cwd`, asked of git the first time only.
    pub fn work_tree(&self) -> Result<PathBuf, CommandError> {
        if let Some(found) = self.work_tree.get() {
            return Ok(found.clone());
        }
        let found = Git::new(&self.cwd).toplevel()?;
        Ok(self.work_tree.get_or_init(|| found).clone())
    }

    /// The work tree's `tdd.toml`: its path, parsed, and the text that was parsed (read
    /// once); a missing file is refused with a hint to `tdd init`.
    pub fn config(&self) -> Result<(PathBuf, Config, String), CommandError> {
        let root = self.work_tree()?;
        match Config::load_text_from_root(&root)? {
            Some(found) => Ok(found),
            None => Err(CommandError::refused(
                "config_missing",
                format!("no tdd.toml at {}", root.display()),
            )
            .hint("run `tdd init` to write one")),
        }
    }

    /// The engine of this work tree, with its configuration loaded.
    pub fn engine(&self) -> Result<tdd_engine::run::Session, CommandError> {
        let (_, config, text) = self.config()?;
        Ok(tdd_engine::run::Session::new(
            &self.work_tree()?,
            config,
            &text,
            tdd_conductor::EVENT_KINDS,
        )?)
    }

    /// The engine, for a command that runs test suites: a `TDD_CORE_BUDGET` that is not a
    /// whole number of cores is refused first, before any runner starts.
    pub fn suite_engine(&self) -> Result<tdd_engine::run::Session, CommandError> {
        tdd_engine::observe::lease::Budget::from_env()?;
        self.engine()
    }

    /// Where this repository's ledger lives.
    pub fn ledger_location(&self) -> Result<LedgerLocation, CommandError> {
        Ok(LedgerLocation::resolve(&self.cwd, &GitProbe)?)
    }
}
