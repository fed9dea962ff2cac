//! A leaf in the foreground with the caller's terminal: an interactive session a person
//! drives (`tdd agent`), confined exactly as a supervised leaf is.

use std::process::Command;
use std::time::Duration;
use std::time::Instant;

use crate::ExitClass;
use crate::LaunchError;
use crate::LeafSpec;
use crate::ProcessId;
use crate::Signal;

/// How an attached leaf ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedExit {
    /// Its exit code, or the signal that ended it.
    pub class: ExitClass,
    /// The confinement it ran under, when one was asked for.
    pub sandbox: Option<tdd_sandbox::Level>,
    /// From its start to its end.
    pub duration: Duration,
}

/// Catches SIGINT and SIGQUIT (doing nothing with them) until dropped: while a session
/// runs, the keys the person presses are the session's, not this process's. Caught, not
/// ignored: a caught signal's action is reset at exec, an ignored one would be handed on.
struct Caught(Vec<signal_hook::SigId>);

impl Caught {
    fn terminal_signals() -> Caught {
        let pressed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        Caught(
            [libc::SIGINT, libc::SIGQUIT]
                .iter()
                .filter_map(|signal| {
                    signal_hook::flag::register(*signal, std::sync::Arc::clone(&pressed)).ok()
                })
                .collect(),
        )
    }
}

impl Drop for Caught {
    fn drop(&mut self) {
        for id in self.0.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

impl LeafSpec {
    /// Runs the leaf in the foreground and waits for it: its standard streams are this
    /// process's own (the person's terminal), it stays in this process's process group
    /// (the terminal's keys and signals reach it; this process catches SIGINT and
    /// SIGQUIT meanwhile and does nothing with them), and it is confined exactly as [`crate::Supervisor::launch`]
    /// confines a leaf, with the same environment and directory. `launched` is told its
    /// process before it is waited for. No limit applies: the person ends it. What it
    /// started and left running is the caller's to end (as the subreaper,
    /// [`crate::end_descendants`]).
    pub fn run_attached(
        &self,
        launched: impl FnOnce(ProcessId),
    ) -> Result<AttachedExit, LaunchError> {
        let invalid = |reason: String| LaunchError::InvalidSpec { reason };
        let (program, args) = self
            .argv
            .split_first()
            .ok_or_else(|| invalid("no program to run".into()))?;
        let mut command = Command::new(program);
        command.args(args).env_clear().envs(&self.env);
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        let sandbox = super::supervise::confine(&self.sandbox, &mut command).map_err(invalid)?;
        // Before the spawn: a caught signal's action does not reach the child.
        let _caught = Caught::terminal_signals();
        let mut child = command
            .spawn()
            .map_err(|e| invalid(format!("{program}: {e}")))?;
        let started = Instant::now();
        let pid = i32::try_from(child.id()).map_err(|_| invalid("pid out of range".into()))?;
        if let Ok(process) = ProcessId::of(pid) {
            launched(process);
        }
        let status = child
            .wait()
            .map_err(|e| invalid(format!("waiting for {program}: {e}")))?;
        let class = {
            use std::os::unix::process::ExitStatusExt;
            match (status.code(), status.signal()) {
                (Some(code), _) => ExitClass::Exited { code },
                (None, Some(signal)) => ExitClass::KilledExternal {
                    signal: Signal::from_raw(signal),
                },
                (None, None) => ExitClass::Exited { code: 1 },
            }
        };
        Ok(AttachedExit {
            class,
            sandbox,
            duration: started.elapsed(),
        })
    }
}
