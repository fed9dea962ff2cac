//! Observation against the real runners, in temporary projects.
//!
//! Every adapter gets a passing test, an assertion failure, an exception, a
//! skipped test, a file that fails to import or compile, and a target id
//! that does not exist. A runner that is not installed makes its tests fail
//! with what to install; `cargo xtask test` installs them all.

mod cargo;
mod common;
mod go;
mod js;
mod node;
mod pytest;
