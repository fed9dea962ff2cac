//! The provider contract suite: every check of [`checks::CHECKS`] runs against every
//! registered provider, each built for the check's scenario; the provider-specific
//! promises about a CLI's argv are the cases of [`argv::ARGV_CASES`].
//!
//! Adding a provider adds one line to [`PROVIDERS`] and no test edits. Real-CLI
//! providers run against fake executables put first on `PATH` that replay the
//! recorded streams under `tests/fixtures/` (the manifest names the CLI version each
//! imitates).
//!
//! This binary has its own `main` so that it can also be the processes the tests
//! need: `__supervise <dir>` (the supervisor, as `tdd __supervise`),
//! `__scripted-leaf ...` (a scripted leaf, as `tdd __scripted-leaf`) and
//! `__fake-cli ...` (a fake agent CLI). Tests wait for events, never for time.

mod argv;
mod checks;
mod fake;
mod support;

use libtest_mimic::Trial;
use tdd_engine::config::ProviderConfig;
use tdd_leaves::Provider;
use tdd_leaves::Scripted;
use tdd_leaves::providers::aider::Aider;
use tdd_leaves::providers::claude::Claude;
use tdd_leaves::providers::codex::Codex;
use tdd_leaves::providers::command::CommandProvider;

use crate::support::Sandbox;
use crate::support::Scenario;

/// A registered provider: its name and how to build it in a sandbox, with its fake
/// CLI (or fixture) set up for a scenario.
pub struct Case {
    name: &'static str,
    make: Make,
}

/// Builds a provider in a sandbox for a scenario.
type Make = fn(&Sandbox, Scenario) -> Result<Box<dyn Provider>, String>;

/// Every provider the suite checks. One line per provider.
const PROVIDERS: &[Case] = &[
    Case {
        name: "scripted",
        make: scripted,
    },
    Case {
        name: "claude",
        make: claude,
    },
    Case {
        name: "codex",
        make: codex,
    },
    Case {
        name: "aider",
        make: aider,
    },
    Case {
        name: "command",
        make: command,
    },
];

fn scripted(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    let env_file = sandbox.dir.join("env.txt");
    let actions = match scenario {
        Scenario::Ok => format!(
            "[[leaf.do]]\naction = \"run\"\nargv = [\"sh\", \"-c\", \"env > '{}'\"]\n\
             [[leaf.do]]\naction = \"print\"\ntext = \"Wrote the failing test.\\n\"\n\
             [[leaf.do]]\naction = \"usage\"\ninput_tokens = 1200\noutput_tokens = 300\ncost_usd = 0.0\n",
            env_file.display()
        ),
        Scenario::Crash => {
            "[[leaf.do]]\naction = \"print\"\ntext = \"starting\\n\"\n[[leaf.do]]\naction = \"exit\"\ncode = 3\n".into()
        }
        Scenario::Hang => "[[leaf.do]]\naction = \"hang\"\n".into(),
    };
    let fixture = sandbox.dir.join("fixture.toml");
    let text = format!("version = 1\n\n[[leaf]]\nrole = \"developer\"\n{actions}");
    std::fs::write(&fixture, text).map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Ok(Box::new(Scripted::new(fixture, exe, ["__scripted-leaf"])))
}

fn claude(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    sandbox.fake("claude", scenario)?;
    Ok(Box::new(Claude::new(None)))
}

fn codex(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    sandbox.fake("codex", scenario)?;
    Ok(Box::new(Codex::new(None)))
}

fn aider(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    sandbox.fake("aider", scenario)?;
    Ok(Box::new(Aider::new(None)))
}

fn command(sandbox: &Sandbox, scenario: Scenario) -> Result<Box<dyn Provider>, String> {
    sandbox.fake("my-agent", scenario)?;
    let config = ProviderConfig {
        command: "my-agent".into(),
        args: vec![
            "--prompt-file".into(),
            "{prompt_file}".into(),
            "--role={role}".into(),
            "--phase={phase}".into(),
            "--step={step}".into(),
            "--in={workdir}".into(),
        ],
        env: vec!["MY_AGENT_API_KEY".into()],
        model: None,
    };
    Ok(Box::new(CommandProvider::new("my-agent", config)))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("__supervise") => {
            let dir = std::path::PathBuf::from(args.get(2).cloned().unwrap_or_default());
            std::process::exit(tdd_supervisor::run_supervisor(
                &dir,
                &tdd_supervisor::NoopReporter,
            ));
        }
        Some("__scripted-leaf") => {
            std::process::exit(tdd_leaves::providers::scripted::run_leaf(&args[2..]))
        }
        Some("__fake-cli") => std::process::exit(fake::run(&args[2..])),
        _ => {}
    }
    let arguments = libtest_mimic::Arguments::from_args();
    let mut trials = Vec::new();
    for case in PROVIDERS {
        for check in checks::CHECKS {
            trials.push(Trial::test(
                format!("{}::{}", case.name, check.name),
                move || checks::run(case, check).map_err(Into::into),
            ));
        }
    }
    for case in argv::ARGV_CASES {
        trials.push(Trial::test(case.name, move || {
            argv::check(case).map_err(Into::into)
        }));
    }
    libtest_mimic::run(&arguments, trials).exit();
}
