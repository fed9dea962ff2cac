//! The `Provider` contract every agent CLI implements.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

use serde_json::Map;
use serde_json::Value;
use tdd_supervisor::ExitRecord;

use crate::envelope::AbortOutcome;
use crate::envelope::Capabilities;
use crate::envelope::Request;
use crate::envelope::Response;
use crate::envelope::Usage;
use crate::runtime::LeafError;
use crate::runtime::LeafRun;
use crate::runtime::Leaves;

/// Files a leaf's runtime prepares before launch, outside the work tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafFiles {
    /// The leaf's own directory of files.
    pub dir: PathBuf,
    /// The prompt, exactly as recorded.
    pub prompt: PathBuf,
    /// Where a provider may ask its CLI to write a machine-readable result.
    pub result: PathBuf,
    /// The directory of the ledger database, which `tdd` inside the leaf writes
    /// (`tdd test`, `tdd verdict`): a sandboxing CLI must let the leaf write there.
    pub ledger_dir: PathBuf,
}

/// How to start a provider's CLI for one request. Pure data; nothing is run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Invocation {
    /// The argument vector, program first (looked up on the leaf's `PATH`).
    pub argv: Vec<String>,
    /// Variables of the caller's environment the CLI needs (its keys, its config
    /// directory). Added to the base allow-list; forge tokens are dropped anyway.
    pub pass_env: Vec<String>,
    /// Variables set to fixed values.
    pub set_env: Vec<(String, String)>,
    /// Feed the prompt file to the CLI's stdin.
    pub prompt_on_stdin: bool,
}

/// What a leaf left behind, for the provider to read.
#[derive(Debug)]
pub struct LeafOutput<'a> {
    /// Its stdout (at most the supervisor's output cap).
    pub stdout: &'a str,
    /// Its stderr.
    pub stderr: &'a str,
    /// The supervisor's exit record.
    pub exit: &'a ExitRecord,
    /// Its files.
    pub files: &'a LeafFiles,
}

/// What a provider read from a leaf's output.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// The CLI's terminal event was seen (for CLIs without one: it exited 0).
    pub terminal: bool,
    /// The CLI reported an error in its terminal event.
    pub error: Option<String>,
    /// That error says the model could not be reached or refused the credentials
    /// (the leaf is then `provider_unavailable`, not `failed`).
    pub unavailable: bool,
    /// The final text.
    pub text: String,
    /// The session id.
    pub session_id: Option<String>,
    /// Turns taken.
    pub turns: Option<u32>,
    /// Token usage.
    pub usage: Option<Usage>,
    /// Cost in USD.
    pub cost_usd: Option<f64>,
    /// CLI-specific facts.
    pub meta: Map<String, Value>,
}

/// Why a provider could not build an invocation.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    /// A template of the `command` provider holds an unknown placeholder.
    #[error("argument `{arg}` holds an unknown placeholder `{{{placeholder}}}`")]
    Placeholder {
        /// The argument.
        arg: String,
        /// The placeholder.
        placeholder: String,
    },
    /// The provider is configured wrongly.
    #[error("{0}")]
    Config(String),
    /// A file the provider writes for its CLI could not be written.
    #[error("failed to write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A file the provider needs could not be read.
    #[error("failed to read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// One agent CLI behind the contract. Every run goes through the supervisor:
/// `run` and `abort` are implemented once, here, on top of [`Leaves`]; a provider
/// only says how to start its CLI and how to read what it printed.
pub trait Provider: Send + Sync {
    /// The provider's name (recorded in the leaf's record, nowhere else).
    fn name(&self) -> &str;

    /// What it can do.
    fn capabilities(&self) -> Capabilities;

    /// How to start the CLI for `request`.
    fn invocation(&self, request: &Request, files: &LeafFiles)
    -> Result<Invocation, ProviderError>;

    /// Reads the leaf's output.
    fn parse(&self, output: &LeafOutput<'_>) -> Parsed;

    /// Adjusts an invocation to the caller's environment (`caller`: every variable of
    /// the process that launches leaves), for CLIs that want a setting as a flag or
    /// under another name. Only what the provider allow-lists reaches the leaf anyway.
    /// The default changes nothing.
    fn adapt(&self, invocation: &mut Invocation, caller: &BTreeMap<String, String>) {
        let _ = (invocation, caller);
    }

    /// Wires `tdd hook` into this one invocation of the CLI (its session only, never the
    /// user's or the project's settings), after [`Provider::adapt`] and with the leaf's
    /// private home already in `invocation.set_env`. Whether it did: the default wires
    /// nothing, for a CLI with no hooks.
    fn wire_hooks(&self, invocation: &mut Invocation) -> Result<bool, ProviderError> {
        let _ = invocation;
        Ok(false)
    }

    /// Where its CLI keeps its state and what of the user's a leaf is seeded with (see
    /// [`crate::home`]). The default: no state of its own, an empty private home.
    fn cli_state(&self) -> crate::home::CliState {
        crate::home::CliState::NONE
    }

    /// The executable of the versioned CLI this provider drives, if it drives one.
    fn program(&self) -> Option<&str> {
        None
    }

    /// The CLI versions this provider was tested with, as `major.minor` prefixes
    /// (`"2.1"`); empty when it does not wrap a versioned CLI.
    fn tested_versions(&self) -> &'static [&'static str] {
        &[]
    }

    /// Prepares, records and launches a leaf under the supervisor.
    fn run(&self, leaves: &Leaves, request: Request) -> Result<LeafRun, LeafError> {
        let mut run = leaves.prepare(self, request)?;
        leaves.start(&mut run)?;
        Ok(run)
    }

    /// Ends a run whatever its state; calling it again does nothing more.
    fn abort(&self, leaves: &Leaves, run: &mut LeafRun) -> Result<AbortOutcome, LeafError> {
        leaves.abort(run)
    }

    /// Waits for the leaf to end (at most `max`) and reads its response.
    fn response(
        &self,
        leaves: &Leaves,
        run: &mut LeafRun,
        max: Option<std::time::Duration>,
    ) -> Result<Option<Response>, LeafError> {
        leaves.collect(self, run, max)
    }
}

/// Reads a file into text, lossily, or an empty string when it does not exist or is
/// not a regular file. A leaf can write the directories these files are in, so the path
/// is opened without following a link and without blocking on a named pipe: a leaf
/// cannot make the conductor read (and record) another file in its place.
pub(crate) fn read_lossy(path: &Path) -> String {
    read_regular(path)
        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default()
}

/// The bytes of the regular file at `path`, opened without following a link and
/// without blocking; `None` for anything else.
pub(crate) fn read_regular(path: &Path) -> Option<Vec<u8>> {
    tdd_engine::observe::read_regular_file(path)
}

/// The last `max` bytes of `text`, cut at a character boundary.
pub(crate) fn tail(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

#[cfg(test)]
mod read_tests {
    use super::*;

    #[test]
    fn a_leaf_file_behind_a_link_or_a_pipe_reads_as_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "credential").expect("write");
        let link = dir.path().join("result.json");
        std::os::unix::fs::symlink(&secret, &link).expect("link");
        assert_eq!(read_lossy(&link), "");
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        assert_eq!(read_lossy(&fifo), "");
        assert_eq!(read_lossy(&secret), "credential");
    }
}
