//! Detached, supervised leaf processes.
//!
//! A leaf (an agent CLI, a test command, anything) runs under a small supervisor
//! process: the caller's own binary re-executed in an internal mode, which calls
//! [`run_supervisor`]. The supervisor leads a session of its own, so the caller and
//! its terminal can die without taking the leaf down; it is the child subreaper of
//! everything the leaf starts; it runs the leaf in a process group of its own with
//! an allow-listed environment, enforces wall and idle timeouts and an output cap
//! (SIGTERM to the group, grace, SIGKILL), kills every leftover descendant when the
//! leaf ends, and records launch, heartbeats and exit as files in the leaf's
//! directory. Any process can read those files through a [`LeafHandle`].
//!
//! The crate depends on no crate of the workspace; events leave through
//! [`Reporter`]. It supports Linux only: it relies on `/proc` and
//! `PR_SET_CHILD_SUBREAPER`.

#[cfg(not(target_os = "linux"))]
compile_error!("tdd-supervisor supports Linux only: it relies on /proc and PR_SET_CHILD_SUBREAPER");

mod class;
mod clock;
mod error;
mod handle;
mod launch;
mod list;
mod records;
mod report;
mod spec;
mod stop;
mod tail;
mod unix;

pub use class::ExitClass;
pub use class::KillReason;
pub use class::Signal;
pub use error::LaunchError;
pub use error::LeafError;
pub use error::RecordError;
pub use error::StopError;
pub use error::error_chain;
pub use handle::Kill;
pub use handle::LeafHandle;
pub use handle::LeafStatus;
pub use handle::WaitOutcome;
pub use launch::DEFAULT_LAUNCH_TIMEOUT;
pub use launch::Supervisor;
pub use list::LeafState;
pub use list::LeafSummary;
pub use records::ExitRecord;
pub use records::FORMAT_VERSION;
pub use records::Heartbeat;
pub use records::LaunchRecord;
pub use records::ProcessId;
pub use records::Sandbox;
pub use report::JsonLinesReporter;
pub use report::LeafEvent;
pub use report::NoopReporter;
pub use report::ReportError;
pub use report::Reporter;
pub use spec::Confine;
pub use spec::DEFAULT_GRACE;
pub use spec::DEFAULT_HEARTBEAT;
pub use spec::LeafSpec;
pub use stop::STOP_FILE;
pub use stop::StopMode;
pub use stop::StopRequest;
pub use stop::clear_stop;
pub use stop::read_stop;
pub use stop::request_stop;
pub use tail::Follower;
pub use tail::tail_bytes;
pub use unix::attached::AttachedExit;
pub use unix::run_supervisor;
pub use unix::tree::become_subreaper;
pub use unix::tree::descends_from;
pub use unix::tree::end_descendants;
pub use unix::tree::end_tree;

/// The line the supervisor appends to an output file it cut at `cap` bytes.
pub fn output_cut_marker(cap: u64) -> String {
    unix::cut_marker(cap)
}
