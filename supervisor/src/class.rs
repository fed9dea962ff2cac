//! How a leaf ended: one ordered enum, shared by the records, the reporter and callers.
//!
//! The order of the variants is the order of the decision the supervisor makes:
//! a leaf that ended by itself is `Exited`; one we killed is `KillStuck` or
//! `Stopped`; one somebody else killed is `KilledExternal`; and the two classes
//! where supervision itself failed come last.

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;
use serde::Deserializer;
use serde::Serialize;
use serde::Serializer;

/// The class of a finished leaf. Exactly one is recorded per leaf, in `exit.json`.
///
/// Serialised with a `class` tag in snake case, for example
/// `{"class":"kill_stuck","reason":"wall_timeout"}`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "class", rename_all = "snake_case", deny_unknown_fields)]
pub enum ExitClass {
    /// The leaf exited by itself with this code, and nobody had signalled it.
    Exited {
        /// The exit code, `0..=255`.
        code: i32,
    },
    /// The supervisor killed the leaf's group (SIGTERM, grace, SIGKILL) for this reason.
    /// Whatever status the leaf then died with, it is this class.
    KillStuck {
        /// Which limit the leaf ran into.
        reason: KillReason,
    },
    /// The leaf died of a signal the supervisor did not send, or the supervisor was
    /// itself asked to terminate (SIGTERM, SIGINT, SIGHUP, SIGQUIT) and passed that on.
    KilledExternal {
        /// The signal the leaf died of, or the one the supervisor received.
        signal: Signal,
    },
    /// The supervisor process vanished without recording an exit. Detected by a reader
    /// through the supervisor's pid and start time; the reader then killed the leaf's tree.
    SupervisorLost,
    /// Killed on request: a `now` stop request, or a kill through [`crate::LeafHandle::kill`].
    Stopped,
    /// The leaf never ran: the program was missing, a file could not be opened, or a
    /// `now` stop was pending when the supervisor came to spawn it.
    SpawnFailed {
        /// What went wrong, as the operating system said it.
        error: String,
    },
}

impl ExitClass {
    /// The snake-case tag, as serialised (`exited`, `kill_stuck`, ...).
    pub fn tag(&self) -> &'static str {
        match self {
            ExitClass::Exited { .. } => "exited",
            ExitClass::KillStuck { .. } => "kill_stuck",
            ExitClass::KilledExternal { .. } => "killed_external",
            ExitClass::SupervisorLost => "supervisor_lost",
            ExitClass::Stopped => "stopped",
            ExitClass::SpawnFailed { .. } => "spawn_failed",
        }
    }

    /// How the leaf ended, in words for a person ("exited with code 4", "killed by tdd:
    /// it ran past its wall timeout").
    pub fn words(&self) -> String {
        match self {
            ExitClass::Exited { code } => format!("exited with code {code}"),
            ExitClass::KillStuck { reason } => format!("killed by tdd: {}", reason.words()),
            ExitClass::KilledExternal { signal } => {
                format!("killed by signal {signal}, which tdd did not send")
            }
            ExitClass::SupervisorLost => {
                "its supervisor vanished, and the leaf was ended with it".to_string()
            }
            ExitClass::Stopped => "stopped on request".to_string(),
            ExitClass::SpawnFailed { error } => format!("never started: {error}"),
        }
    }

    /// How the leaf ended in a few words, for a table's column ("exited with code 4",
    /// "killed: wall timeout", "never started"); [`ExitClass::words`] says it whole.
    pub fn brief(&self) -> String {
        match self {
            ExitClass::Exited { code } => format!("exited with code {code}"),
            ExitClass::KillStuck { reason } => {
                format!("killed: {}", reason.to_string().replace('_', " "))
            }
            ExitClass::KilledExternal { signal } => format!("killed by {signal}"),
            ExitClass::SupervisorLost => "supervisor lost".to_string(),
            ExitClass::Stopped => "stopped on request".to_string(),
            ExitClass::SpawnFailed { .. } => "never started".to_string(),
        }
    }

    /// True only for `Exited { code: 0 }`.
    pub fn is_success(&self) -> bool {
        matches!(self, ExitClass::Exited { code: 0 })
    }
}

impl fmt::Display for ExitClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitClass::Exited { code } => write!(f, "exited({code})"),
            ExitClass::KillStuck { reason } => write!(f, "kill_stuck({reason})"),
            ExitClass::KilledExternal { signal } => write!(f, "killed_external({signal})"),
            ExitClass::SupervisorLost => f.write_str("supervisor_lost"),
            ExitClass::Stopped => f.write_str("stopped"),
            ExitClass::SpawnFailed { error } => write!(f, "spawn_failed({error})"),
        }
    }
}

/// Why the supervisor killed a leaf that was still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KillReason {
    /// It ran longer than the wall timeout.
    WallTimeout,
    /// Neither stdout nor stderr produced a byte for the idle timeout.
    IdleTimeout,
    /// One of its output streams reached the maximum output bytes.
    OutputLimit,
}

impl KillReason {
    /// The limit in words ("it ran past its wall timeout").
    pub fn words(self) -> &'static str {
        match self {
            KillReason::WallTimeout => "it ran past its wall timeout",
            KillReason::IdleTimeout => "it printed nothing for its idle timeout",
            KillReason::OutputLimit => "its output reached the limit",
        }
    }
}

impl fmt::Display for KillReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KillReason::WallTimeout => "wall_timeout",
            KillReason::IdleTimeout => "idle_timeout",
            KillReason::OutputLimit => "output_limit",
        })
    }
}

/// A signal number, serialised by name (`"SIGKILL"`) so records read the same on every
/// architecture. Unknown numbers serialise as their decimal text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Signal(i32);

impl Signal {
    /// SIGKILL, the signal that cannot be caught.
    pub const KILL: Signal = Signal(libc::SIGKILL);
    /// SIGTERM, the polite request to terminate.
    pub const TERM: Signal = Signal(libc::SIGTERM);

    /// Wraps a raw signal number.
    pub fn from_raw(number: i32) -> Signal {
        Signal(number)
    }

    /// The raw signal number.
    pub fn number(self) -> i32 {
        self.0
    }

    /// The conventional name (`SIGKILL`), if the number is a known signal.
    pub fn name(self) -> Option<&'static str> {
        nix::sys::signal::Signal::try_from(self.0)
            .ok()
            .map(|signal| signal.as_str())
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "{}", self.0),
        }
    }
}

impl FromStr for Signal {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if let Ok(number) = text.parse::<i32>() {
            return Ok(Signal(number));
        }
        nix::sys::signal::Signal::from_str(text)
            .map(|signal| Signal(signal as i32))
            .map_err(|_| format!("unknown signal {text:?}"))
    }
}

impl Serialize for Signal {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Signal {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_serialise_with_snake_case_tags() {
        let cases = [
            (
                ExitClass::Exited { code: 1 },
                r#"{"class":"exited","code":1}"#,
            ),
            (
                ExitClass::KillStuck {
                    reason: KillReason::IdleTimeout,
                },
                r#"{"class":"kill_stuck","reason":"idle_timeout"}"#,
            ),
            (
                ExitClass::KilledExternal {
                    signal: Signal::KILL,
                },
                r#"{"class":"killed_external","signal":"SIGKILL"}"#,
            ),
            (ExitClass::SupervisorLost, r#"{"class":"supervisor_lost"}"#),
            (ExitClass::Stopped, r#"{"class":"stopped"}"#),
            (
                ExitClass::SpawnFailed {
                    error: "gone".into(),
                },
                r#"{"class":"spawn_failed","error":"gone"}"#,
            ),
        ];
        for (class, json) in cases {
            let text = serde_json::to_string(&class).expect("serialises");
            assert_eq!(text, json);
            let back: ExitClass = serde_json::from_str(&text).expect("parses back");
            assert_eq!(back, class);
        }
    }

    #[test]
    fn unknown_fields_and_signals_are_rejected() {
        assert!(serde_json::from_str::<ExitClass>(r#"{"class":"exited","code":1,"x":1}"#).is_err());
        assert!(serde_json::from_str::<Signal>(r#""SIGNOPE""#).is_err());
        assert_eq!(
            serde_json::from_str::<Signal>(r#""9""#).ok(),
            Some(Signal::KILL)
        );
    }

    #[test]
    fn display_is_compact() {
        let class = ExitClass::KillStuck {
            reason: KillReason::WallTimeout,
        };
        assert_eq!(class.to_string(), "kill_stuck(wall_timeout)");
        assert!(ExitClass::Exited { code: 0 }.is_success());
        assert!(!ExitClass::Exited { code: 1 }.is_success());
    }
}
