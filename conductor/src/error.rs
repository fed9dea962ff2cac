//! Failures of the conductor's machinery, and how a run is interrupted.
//!
//! A [`ConductError`] says what the conductor was doing ("while judging GREEN of step
//! 2") and carries the failure as its source; no message repeats its source, so the
//! chain reads once from the outside in.

use crate::bail::Bail;

/// Something the conductor relies on failed (not a bail: the run's state is unknown),
/// and what it was doing at the time.
#[derive(Debug, thiserror::Error)]
#[error("while {doing}")]
pub struct ConductError {
    doing: String,
    /// Whether `doing` was said where the failure happened (then an outer caller's
    /// broader description does not replace it).
    said: bool,
    #[source]
    cause: Box<Cause>,
}

impl ConductError {
    /// What the conductor was doing when it failed ("judging GREEN of step 2").
    pub fn doing(&self) -> &str {
        &self.doing
    }

    /// What failed.
    pub fn cause(&self) -> &Cause {
        &self.cause
    }

    /// Takes the error apart: what was being done, and what failed.
    pub fn into_parts(self) -> (String, Cause) {
        (self.doing, *self.cause)
    }

    /// The same failure, said to have happened while `doing`; the description nearest
    /// to the failure is kept, so a caller's broader one never replaces it.
    #[must_use]
    pub fn while_doing(mut self, doing: impl Into<String>) -> ConductError {
        if !self.said {
            self.doing = doing.into();
            self.said = true;
        }
        self
    }

    /// A file of the conductor's own could not be written or read.
    pub(crate) fn io(doing: impl Into<String>, source: std::io::Error) -> ConductError {
        ConductError {
            doing: doing.into(),
            said: true,
            cause: Box::new(Cause::Io(source)),
        }
    }

    /// The configuration (or what the conductor was given) does not allow a run.
    pub(crate) fn config(message: impl Into<String>) -> ConductError {
        ConductError::from(Cause::Config(message.into()))
    }
}

/// What failed under the conductor.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
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
    /// The core budget is not a number of cores, or the core lease could not be taken.
    #[error(transparent)]
    Lease(#[from] tdd_engine::observe::lease::LeaseError),
    /// The issue could not be read.
    #[error(transparent)]
    Issue(#[from] crate::issue::IssueError),
    /// The conductor's own worktree could not be created or reused.
    #[error(transparent)]
    Worktree(#[from] crate::worktree::WorktreeError),
    /// The forge could not be reached or refused the token while the run was opened.
    #[error(transparent)]
    Forge(crate::forge::ForgeError),
    /// A file of the conductor's own could not be written or read.
    #[error(transparent)]
    Io(std::io::Error),
    /// The ledger could not be published in git.
    #[error(transparent)]
    Published(#[from] tdd_engine::published::PublishError),
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

impl Cause {
    /// What the conductor was doing, when nothing more precise was said.
    fn default_doing(&self) -> &'static str {
        match self {
            Cause::Engine(_) => "running the engine",
            Cause::Ledger(_) => "using the ledger",
            Cause::Git(_) => "running git",
            Cause::Leaf(_) => "running a leaf",
            Cause::Provider(_) => "preparing the agent providers",
            Cause::Prompt(_) => "rendering a prompt",
            Cause::Sha(_) => "resolving a commit",
            Cause::Spec(_) => "reading the issue's behaviour spec",
            Cause::Lock(_) => "taking the work tree's conductor lock",
            Cause::Lease(_) => "taking this conductor's share of the machine's cores",
            Cause::Issue(_) => "reading the issue",
            Cause::Worktree(_) => "preparing the conductor's worktree",
            Cause::Forge(_) => "reading the issue from the forge",
            Cause::Io(_) => "writing the conductor's files",
            Cause::Published(_) => "publishing the ledger in git",
            Cause::Config(_) => "reading the configuration",
            Cause::BinaryChanged { .. } => "checking the tdd binary",
        }
    }
}

impl From<Cause> for ConductError {
    fn from(cause: Cause) -> ConductError {
        ConductError {
            doing: cause.default_doing().to_string(),
            said: false,
            cause: Box::new(cause),
        }
    }
}

macro_rules! conduct_from {
    ($($t:ty),*) => {$(
        impl From<$t> for ConductError {
            fn from(err: $t) -> ConductError {
                ConductError::from(Cause::from(err))
            }
        }

        impl From<$t> for Halt {
            fn from(err: $t) -> Halt {
                Halt::Error(err.into())
            }
        }
    )*};
}

conduct_from!(
    tdd_engine::run::RunError,
    tdd_engine::ledger::LedgerError,
    tdd_engine::git::GitError,
    tdd_leaves::LeafError,
    tdd_leaves::ProviderError,
    tdd_prompts::PromptError,
    tdd_prompts::ShaError,
    tdd_prompts::SpecError,
    crate::lock::LockError,
    tdd_engine::observe::lease::LeaseError,
    crate::issue::IssueError,
    crate::worktree::WorktreeError,
    tdd_engine::published::PublishError
);

/// Says what the conductor was doing when a step failed: `result.doing(|| "...")`.
pub(crate) trait Doing<T> {
    /// Names the work `what` describes as the one that failed, unless a description
    /// nearer the failure was already given.
    fn doing<S: Into<String>>(self, what: impl FnOnce() -> S) -> T;
}

impl<T, E: Into<ConductError>> Doing<Result<T, ConductError>> for Result<T, E> {
    fn doing<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, ConductError> {
        self.map_err(|e| e.into().while_doing(what()))
    }
}

impl<T> Doing<Result<T, Halt>> for Result<T, Halt> {
    fn doing<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, Halt> {
        self.map_err(|halt| match halt {
            Halt::Error(e) => Halt::Error(e.while_doing(what())),
            other => other,
        })
    }
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

impl From<ConductError> for Halt {
    fn from(err: ConductError) -> Halt {
        Halt::Error(err)
    }
}

impl From<crate::forge::ForgeError> for ConductError {
    fn from(err: crate::forge::ForgeError) -> ConductError {
        match err {
            // A local issue file keeps its own cause (bad input, not a forge failure).
            crate::forge::ForgeError::Issue(err) => ConductError::from(Cause::Issue(err)),
            crate::forge::ForgeError::Ledger(err) => ConductError::from(Cause::Ledger(err)),
            other => ConductError::from(Cause::Forge(other)),
        }
    }
}

impl From<crate::forge::ForgeError> for Halt {
    fn from(err: crate::forge::ForgeError) -> Halt {
        match err.bail() {
            Some(bail) => Halt::Bail(bail),
            // The ledger behind the forge's comment ids is ours, not the forge's.
            None => Halt::Error(ConductError::from(err).while_doing("recording a forge comment")),
        }
    }
}

impl From<Bail> for Halt {
    fn from(bail: Bail) -> Halt {
        Halt::Bail(bail)
    }
}
