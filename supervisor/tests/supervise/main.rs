//! Integration tests of supervised leaves, with real processes.
//!
//! This test binary has its own `main` (libtest-mimic) so that it can also play the
//! parts the tests need real executables for:
//!
//! - `<exe> __supervise <leaf-dir>` is the supervisor process, exactly as the `tdd`
//!   binary's hidden subcommand is: it calls `run_supervisor`;
//! - `<exe> __helper <mode> ...` are leaves and grandchildren with behaviour a shell
//!   cannot express portably (a double-forked daemon).
//!
//! Everything else runs as ordinary tests. No test sleeps to synchronise: each waits
//! for an event (a file appears, a pid vanishes) with a generous bound.

mod classify;
mod external;
mod helpers;
mod leaks;
mod listing;
mod output;
mod stops;
mod support;
mod timeouts;

use std::path::PathBuf;

use tdd_supervisor::JsonLinesReporter;
use tdd_supervisor::NoopReporter;
use tdd_supervisor::Reporter;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__supervise") => std::process::exit(supervise(&args[2..])),
        Some("__helper") => std::process::exit(helpers::run(&args[2..])),
        _ => {}
    }
    let arguments = libtest_mimic::Arguments::from_args();
    let trials = [
        classify::trials(),
        external::trials(),
        leaks::trials(),
        listing::trials(),
        output::trials(),
        stops::trials(),
        timeouts::trials(),
    ]
    .into_iter()
    .flatten()
    .collect();
    libtest_mimic::run(&arguments, trials).exit();
}

/// The supervisor process: reports into `events.jsonl` in the leaf directory.
fn supervise(args: &[String]) -> i32 {
    let Some(dir) = args.first().map(PathBuf::from) else {
        return 2;
    };
    let reporter: Box<dyn Reporter> = match JsonLinesReporter::open(&dir.join("events.jsonl")) {
        Ok(reporter) => Box::new(reporter),
        Err(_) => Box::new(NoopReporter),
    };
    tdd_supervisor::run_supervisor(&dir, reporter.as_ref())
}
