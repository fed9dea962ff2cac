//! End-to-end tests of the built `tdd` binary: one test binary, a module per area.

mod cli;
mod conduct;
mod config;
mod doctor;
mod engine_actions;
mod engine_cargo;
mod engine_machine;
mod engine_pytest;
mod exec;
mod init;
mod integrity_gates;
mod integrity_ledger;
mod integrity_tests_seen;
mod integrity_worktree;
mod leaf_roles;
mod leafsupport;
mod leaves;
mod ledger;
mod model_api;
mod plan;
mod real_clis;
mod snapshots;
mod stop;
mod support;
mod test_cmd;
