//! The `tdd` command-line tool.

mod cli;
mod commands;
mod context;
mod error;
mod exit;
mod failpoint;
mod output;
mod supervision;

fn main() -> std::process::ExitCode {
    cli::main().into()
}
