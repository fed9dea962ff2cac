//! Hidden modes in which `tdd` is a leaf, not a command: checked before argument
//! parsing, since a leaf prints what its script says and no envelope.
//!
//! - `tdd __scripted-leaf ...`: a scripted leaf (`tdd_leaves::providers::scripted`).
//!
//! The supervisor process (`tdd __supervise`) is an ordinary hidden subcommand.

use tdd_leaves::providers::scripted::SCRIPTED_LEAF_COMMAND;

/// The exit code of a hidden mode, when `args` (program first) asks for one.
/// Arguments are read as the OS gives them: a leaf's arguments that are not UTF-8 make it
/// exit 2 with a message, never a panic.
pub fn intercept(args: &[std::ffi::OsString]) -> Option<i32> {
    if args.get(1).is_none_or(|mode| mode != SCRIPTED_LEAF_COMMAND) {
        return None;
    }
    let mut words = Vec::with_capacity(args.len().saturating_sub(2));
    for (n, arg) in args.iter().enumerate().skip(2) {
        match arg.to_str() {
            Some(word) => words.push(word.to_string()),
            None => {
                crate::output::write_err(&format!(
                    "tdd: argument {n} to the scripted leaf is not UTF-8 ({}); pass it as UTF-8\n",
                    arg.to_string_lossy()
                ));
                return Some(2);
            }
        }
    }
    Some(tdd_leaves::providers::scripted::run_leaf(&words))
}
