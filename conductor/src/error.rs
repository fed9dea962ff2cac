//! Failures of the conductor's machinery, and how a run is interrupted.

use crate::bail::Bail;

/// Something the conductor relies on failed (not a bail: the run's state is unknown).
#[derive(Debug, thiserror::Error)]
pub enum ConductError {
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] tdd_engine::run::RunError),
    /// The ledger failed.
    #[error(transparent)]
    Ledger(#[from] tdd_engine::ledger::LedgerError),
    /// git failed.
    #[error(transparent)]
    Git(#[from] tdd_engine::git::GitError),
    /// A leaf could not be prepared, launched or read.
    #[error(transparent)]
    Leaf(#[from] tdd_leaves::LeafError),
    /// A provider could not be built.
    #[error(transparent)]
    Provider(#[from] tdd_leaves::ProviderError),
    /// A prompt could not be rendered.
    #[error(transparent)]
    Prompt(#[from] tdd_prompts::PromptError),
    /// A commit sha could not be resolved.
    #[error(transparent)]
    Sha(#[from] tdd_prompts::ShaError),
    /// The issue names no criterion for a cycle.
    #[error(transparent)]
    Spec(#[from] tdd_prompts::SpecError),
    /// Another conductor runs here.
    #[error(transparent)]
    Lock(#[from] crate::lock::LockError),
    /// The issue could not be read.
    #[error(transparent)]
    Issue(#[from] crate::issue::IssueError),
    /// The conductor's own worktree could not be created or reused.
    #[error(transparent)]
    Worktree(#[from] crate::worktree::WorktreeError),
    /// A file of the conductor's own could not be written or read.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
    /// The configuration does not allow a run.
    #[error("{0}")]
    Config(String),
    /// A resume with a different `tdd` binary than the run started with.
    #[error("this run started with tdd binary {recorded}, and this one is {now}")]
    BinaryChanged {
        /// The SHA-256 recorded for the run.
        recorded: String,
        /// The SHA-256 of the running binary.
        now: String,
    },
}

/// Why the loop stopped before the issue was done.
#[derive(Debug)]
pub enum Halt {
    /// The run bailed.
    Bail(Bail),
    /// A stop was requested (`at-ledger`, `at-leaf`, `now`).
    Stop(String),
    /// The machinery failed.
    Error(ConductError),
}

macro_rules! halt_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Halt {
            fn from(err: $t) -> Halt {
                Halt::Error(err.into())
            }
        }
    )*};
}

halt_from!(
    tdd_engine::run::RunError,
    tdd_engine::ledger::LedgerError,
    tdd_engine::git::GitError,
    tdd_leaves::LeafError,
    tdd_leaves::ProviderError,
    tdd_prompts::PromptError,
    tdd_prompts::ShaError,
    tdd_prompts::SpecError,
    crate::lock::LockError,
    crate::issue::IssueError
);

impl From<ConductError> for Halt {
    fn from(err: ConductError) -> Halt {
        Halt::Error(err)
    }
}

impl From<crate::forge::ForgeError> for Halt {
    fn from(err: crate::forge::ForgeError) -> Halt {
        // The ledger behind the forge's comment ids is ours, not the forge's.
        if let crate::forge::ForgeError::Ledger(err) = err {
            return Halt::Error(ConductError::Ledger(err));
        }
        Halt::Bail(crate::bail::Bail::new(
            crate::bail::BailCause::ForgeUnreachable,
            format!("the forge could not be written: {err}"),
            "make the forge reachable (for the local forge: the ledger home writable), then run `tdd conduct` again",
        ))
    }
}

impl From<Bail> for Halt {
    fn from(bail: Bail) -> Halt {
        Halt::Bail(bail)
    }
}
