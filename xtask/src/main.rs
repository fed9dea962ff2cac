//! `cargo xtask test`: every test of the workspace, on a machine that has only Rust.
//!
//! Part of the suite runs real test runners (pytest, Go, vitest, jest and mocha from an
//! npm fixture, cargo-nextest) and drives the binary on a terminal through `script`.
//! Those tests fail, never skip, when a runner is missing, so this task first installs
//! what is missing (see `setup`: nothing is installed that is already there), then runs
//! the tests and ends with one line for the whole workspace:
//! `workspace: N passed, M failed`.
//!
//! The compile-fail suite of `tdd-leaves` (`leaves/tests/blind.rs`, about two minutes)
//! is `#[ignore]`d so that a plain `cargo test` stays fast; it runs here with `--all`,
//! and always under CI (`CI` set to anything but `false` or `0`).
#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a developer tool: its progress goes to stderr, its closing line to stdout"
)]

#[cfg(test)]
mod graph;
mod real_clis;
mod results;
mod setup;
#[cfg(test)]
mod tests;

use std::io::BufRead;
use std::io::BufReader;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::ExitCode;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

use results::Totals;

const USAGE: &str = "usage: cargo xtask test [--all] [--no-real-clis] | clis | capture

  test            install the missing test runners, then run every test of the workspace
  --all           also run the compile-fail suite (leaves/tests/blind.rs); on by default under CI
  --no-real-clis  neither install the agent CLIs (about 1.4 GB) nor run the tests that drive
                  them; for local runs only, CI always runs them
  clis            install the pinned agent CLIs (claude, codex, aider) and print their directory
  capture         re-record leaves/tests/fixtures from the real CLIs against the fake model APIs";

/// What `cargo xtask test` was asked to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Selection {
    /// The compile-fail suite too.
    all: bool,
    /// The real agent CLIs installed and their tests run.
    real_clis: bool,
}

/// The selection of `cargo xtask test FLAGS`, or `None` for an unknown or repeated flag.
fn selection(flags: &[&str], ci: bool) -> Option<Selection> {
    let mut chosen = Selection {
        all: ci,
        real_clis: true,
    };
    let mut seen = Vec::new();
    for flag in flags {
        if seen.contains(flag) {
            return None;
        }
        seen.push(*flag);
        match *flag {
            "--all" => chosen.all = true,
            "--no-real-clis" => chosen.real_clis = false,
            _ => return None,
        }
    }
    Some(chosen)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["test", flags @ ..] => match selection(flags, in_ci()) {
            Some(chosen) if !chosen.real_clis && in_ci() => {
                eprintln!(
                    "error: --no-real-clis is for local runs: CI runs the tests of the real agent CLIs\n\
                     hint: run `cargo xtask test` (CI is set, so CI=false to run as a developer would)"
                );
                ExitCode::from(2)
            }
            Some(chosen) => test(chosen),
            None => {
                eprintln!("{USAGE}");
                ExitCode::from(2)
            }
        },
        ["clis"] => clis(),
        ["capture"] => capture(),
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Installs the pinned agent CLIs and prints the directory that holds them.
fn clis() -> ExitCode {
    match real_clis::install() {
        Ok(()) => {
            println!("{}", real_clis::dir().display());
            ExitCode::SUCCESS
        }
        Err(missing) => {
            for item in &missing {
                eprintln!("error: {}: {}", item.name, item.how);
            }
            ExitCode::FAILURE
        }
    }
}

/// Re-records the recorded streams of the contract suite: the real-CLI e2e tests
/// write each developer leaf's stream into `leaves/tests/fixtures` when
/// `TDD_CAPTURE_FIXTURES` names that directory.
fn capture() -> ExitCode {
    if clis() != ExitCode::SUCCESS {
        return ExitCode::FAILURE;
    }
    let root = workspace_root();
    let fixtures = root.join("leaves/tests/fixtures");
    let ok = Command::new(cargo())
        .args([
            "test",
            "--test",
            "e2e",
            "real_clis",
            "--",
            "--test-threads=1",
        ])
        .env(real_clis::ENV, real_clis::dir())
        .env("TDD_CAPTURE_FIXTURES", &fixtures)
        .current_dir(&root)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        eprintln!(
            "xtask: recorded streams written under {}; review them with git diff",
            fixtures.display()
        );
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Installs the runners, runs the tests, prints the closing line.
fn test(chosen: Selection) -> ExitCode {
    let root = workspace_root();
    if let Err(missing) = setup::install(&root, chosen) {
        eprintln!(
            "\nerror: cannot run the tests: {} missing and could not be installed",
            plural(
                missing.len(),
                "tool the tests need is",
                "tools the tests need are"
            )
        );
        for item in &missing {
            eprintln!("  {}: {}", item.name, item.how);
        }
        eprintln!("\nhint: install them, then run `cargo xtask test` again");
        return ExitCode::FAILURE;
    }

    let mut totals = Totals::default();
    if !chosen.real_clis {
        eprintln!(
            "xtask: not run: the tests that drive the real agent CLIs (--no-real-clis); \
             they say they skipped"
        );
    }
    let mut cargo_ok = run_tests(
        &root,
        "workspace tests",
        &["test", "--workspace", "--no-fail-fast"],
        chosen.real_clis,
        &mut totals,
    );
    if chosen.all {
        cargo_ok &= run_tests(
            &root,
            "compile-fail suite",
            // `--workspace`, not `-p tdd-leaves`: the same features as the run above, so
            // nothing is rebuilt. Built alone, tdd-leaves unifies its dependencies'
            // features differently and cargo rebuilds minutes of them first.
            &["test", "--workspace", "--test", "blind", "--", "--ignored"],
            chosen.real_clis,
            &mut totals,
        );
    } else {
        eprintln!(
            "xtask: not run: the compile-fail suite (leaves/tests/blind.rs, ignored by \
             cargo test); `cargo xtask test --all` runs it, and CI always does"
        );
    }

    let ok = cargo_ok && totals.failed == 0 && totals.binaries > 0;
    if !cargo_ok && totals.failed == 0 {
        eprintln!("xtask: cargo test failed before any test failed (see its output above)");
    }
    println!(
        "workspace: {} passed, {} failed",
        totals.passed, totals.failed
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs `cargo ARGS` in `root`, copying its stdout through and adding its `test result:`
/// lines to `totals`; with `real_clis`, the tests find the agent CLIs through
/// `TDD_REAL_CLIS`, else they skip. True when cargo exits successfully.
fn run_tests(
    root: &Path,
    label: &str,
    args: &[&str],
    real_clis: bool,
    totals: &mut Totals,
) -> bool {
    eprintln!("\nxtask: {label}: cargo {}", args.join(" "));
    let started = Instant::now();
    let mut command = Command::new(cargo());
    if real_clis {
        command.env(real_clis::ENV, real_clis::dir());
    } else {
        command.env_remove(real_clis::ENV);
    }
    let mut child = match command
        .args(args)
        .current_dir(root)
        .stdout(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(error) => {
            eprintln!("xtask: cannot start cargo: {error}");
            return false;
        }
    };
    if let Some(stdout) = child.stdout.take() {
        let mut reader = BufReader::new(stdout);
        let mut out = std::io::stdout().lock();
        let mut line = Vec::new();
        // Bytes, not `String`: a test may print output that is not UTF-8.
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            totals.add_line(&String::from_utf8_lossy(&line));
            // A closed stdout (`| head`) must not stop the tests half-way.
            let _ = out.write_all(&line).and_then(|()| out.flush());
            line.clear();
        }
    }
    let status = child.wait();
    eprintln!("xtask: {label} took {}", minutes_seconds(started.elapsed()));
    status.is_ok_and(|s| s.success())
}

/// The cargo that runs us (`cargo xtask` sets `CARGO`), else the one on `PATH`.
pub(crate) fn cargo() -> PathBuf {
    std::env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from)
}

/// The workspace root: the parent of this package's directory.
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// True under CI: `CI` is set, as every CI service does, to anything but `false` or `0`.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

fn minutes_seconds(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    format!("{}m{:02}s", secs / 60, secs % 60)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}
