//! End-to-end tests of the built `tdd` binary: one test binary, a module per area.

mod cli;
mod config;
mod doctor;
mod exec;
mod init;
mod leafsupport;
mod leaves;
mod ledger;
mod plan;
mod stop;
mod support;
