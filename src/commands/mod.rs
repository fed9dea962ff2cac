//! One module per subcommand: its `XxxArgs` (the help text) and its `cmd_xxx`.

pub mod advance;
pub mod annotate;
pub mod blocker;
pub mod config;
pub mod cycle;
pub mod doctor;
pub mod init;
pub mod leaf_modes;
pub mod leaf_show;
pub mod leaf_status;
pub mod ledger;
pub mod note;
pub mod plan;
pub mod resume;
pub mod rollback;
pub mod run;
pub mod status;
pub mod target;
pub mod test;
pub mod verdict;
