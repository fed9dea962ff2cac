//! One module per subcommand: its `XxxArgs` (the help text) and its `cmd_xxx`.

pub mod config;
pub mod doctor;
pub mod exec;
pub mod init;
pub mod kill;
pub mod leaves;
pub mod ledger;
pub mod logs;
pub mod plan;
pub mod stop;
pub mod supervise;
pub mod wait;
