//! Hidden modes in which `tdd` is a leaf, not a command: checked before argument
//! parsing, since a leaf prints what its script says and no envelope.
//!
//! - `tdd __scripted-leaf ...`: a scripted leaf (`tdd_leaves::providers::scripted`).
//!
//! The supervisor process (`tdd __supervise`) is an ordinary hidden subcommand.

use tdd_leaves::providers::scripted::SCRIPTED_LEAF_COMMAND;

/// The exit code of a hidden mode, when `args` (program first) asks for one.
pub fn intercept(args: &[String]) -> Option<i32> {
    match args.get(1).map(String::as_str) {
        Some(SCRIPTED_LEAF_COMMAND) => Some(tdd_leaves::providers::scripted::run_leaf(&args[2..])),
        _ => None,
    }
}
