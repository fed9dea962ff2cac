//! The process exit codes `tdd` documents in docs/cli.md; no other code is ever returned.

/// How a `tdd` command ended, as an exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The command did what was asked.
    Ok,
    /// A gate or a precondition said no; the envelope says why.
    Refused,
    /// Usage, configuration, plan or argument error.
    BadInput,
    /// A bounded wait ran out while the thing waited on is still running.
    StillRunning,
    /// A conductor run bailed.
    Bailed,
    /// A conductor run stopped on request.
    Stopped,
    /// A bug in `tdd` (including a panic).
    Internal,
    /// A code derived from a leaf's exit class: `tdd exec` passes the leaf's own code
    /// on (124 kill_stuck, 125 supervisor_lost, 127 spawn_failed, 130 stopped, 137
    /// killed_external); `tdd wait` gives 1 and 2 their documented meanings.
    Leaf(u8),
    /// The exit code of the same command run by the conductor on a confined leaf's
    /// behalf (one of the codes above).
    Relayed(u8),
}

impl Exit {
    /// The numeric process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Ok => 0,
            Exit::Refused => 1,
            Exit::BadInput => 2,
            Exit::StillRunning => 3,
            Exit::Bailed => 4,
            Exit::Stopped => 5,
            Exit::Internal => 70,
            Exit::Leaf(code) | Exit::Relayed(code) => code,
        }
    }
}

impl From<Exit> for std::process::ExitCode {
    fn from(exit: Exit) -> Self {
        std::process::ExitCode::from(exit.code())
    }
}
