//! Linux process machinery: `/proc`, signals, wake-ups and the supervisor process.
//!
//! The rest of the crate reads files and calls into this module; every system call
//! that touches another process lives here, and every signal sent has a comment
//! saying which signal, to whom, and why.

pub(crate) mod attached;
mod capture;
mod cleanup;
pub(crate) mod lost;
pub(crate) mod procfs;
mod run;
mod signals;
mod supervise;
pub(crate) mod tree;
pub(crate) mod wake;

pub(crate) use capture::cut_marker;
pub use supervise::run_supervisor;
