//! The `tdd` command-line tool.

mod cli;
mod commands;
mod context;
mod diagnostics;
mod error;
mod exit;
mod logtext;
mod output;
mod supervision;

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = commands::leaf_modes::intercept(&args) {
        return std::process::ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    cli::main().into()
}
