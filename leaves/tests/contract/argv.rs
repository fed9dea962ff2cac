//! Provider-specific promises about how a CLI is started: one table of cases (a
//! provider, the role its leaf plays, what its argv must show) and one checker.

use tdd_leaves::Provider;
use tdd_leaves::providers::aider::Aider;
use tdd_leaves::providers::claude::Claude;
use tdd_leaves::providers::codex::Codex;
use tdd_prompts::Role;

use crate::support::Sandbox;
use crate::support::fail;

/// What the argv of a leaf must show.
pub enum Expect {
    /// Each of these is one argument.
    Arguments(&'static [&'static str]),
    /// The argv, joined by spaces, holds each of these.
    Contains(&'static [&'static str]),
    /// Each tool follows `--disallowedTools` and is not among the tools between
    /// `--allowedTools` and `--disallowedTools`.
    Denied(&'static [&'static str]),
}

/// One case: a provider started for a role.
pub struct ArgvCase {
    /// The trial's name.
    pub name: &'static str,
    /// The provider.
    pub provider: fn() -> Box<dyn Provider>,
    /// The role of the leaf.
    pub role: Role,
    /// What its argv must show.
    pub expect: Expect,
}

fn claude() -> Box<dyn Provider> {
    Box::new(Claude::new(None))
}

fn codex() -> Box<dyn Provider> {
    Box::new(Codex::new(None))
}

fn aider() -> Box<dyn Provider> {
    Box::new(Aider::new(None))
}

/// Every provider-specific promise.
pub const ARGV_CASES: &[ArgvCase] = &[
    ArgvCase {
        name: "claude::a_verifier_cannot_write",
        provider: claude,
        role: Role::Verifier,
        expect: Expect::Denied(&["Write", "Edit", "NotebookEdit"]),
    },
    ArgvCase {
        name: "claude::a_developer_runs_headless_in_its_session",
        provider: claude,
        role: Role::Developer,
        expect: Expect::Arguments(&[
            "-p",
            "--verbose",
            "--session-id",
            "--permission-mode",
            "--append-system-prompt",
        ]),
    },
    ArgvCase {
        name: "codex::a_verifier_runs_in_a_read_only_sandbox",
        provider: codex,
        role: Role::Verifier,
        expect: Expect::Contains(&["--sandbox read-only"]),
    },
    ArgvCase {
        name: "codex::a_developer_may_write_its_workspace",
        provider: codex,
        role: Role::Developer,
        expect: Expect::Contains(&["--sandbox workspace-write"]),
    },
    ArgvCase {
        name: "aider::locked_files_are_read_only",
        provider: aider,
        role: Role::Developer,
        expect: Expect::Contains(&[
            "--message-file /leaf/prompt.md",
            "--yes-always",
            "--no-auto-commits",
            "--no-stream",
            "--no-pretty",
            "--read app/duration.py",
        ]),
    },
];

/// The one checker: the argv the provider starts the case's leaf with shows what the
/// case expects.
pub fn check(case: &ArgvCase) -> Result<(), String> {
    let sandbox = Sandbox::new()?;
    let request = match case.role {
        Role::Verifier => sandbox.verifier_request()?,
        Role::Developer | Role::Planner => sandbox.developer_request()?,
    };
    let files = tdd_leaves::LeafFiles {
        dir: "/leaf".into(),
        prompt: "/leaf/prompt.md".into(),
        result: "/leaf/result.json".into(),
    };
    let argv = (case.provider)()
        .invocation(&request, &files)
        .map_err(|e| e.to_string())?
        .argv;
    match case.expect {
        Expect::Arguments(flags) => {
            for flag in flags {
                if !argv.iter().any(|a| a == flag) {
                    return fail("missing flag", flag);
                }
            }
        }
        Expect::Contains(parts) => {
            let joined = argv.join(" ");
            for part in parts {
                if !joined.contains(part) {
                    return fail("argv", (part, joined));
                }
            }
        }
        Expect::Denied(tools) => {
            let denied_at = argv
                .iter()
                .position(|a| a == "--disallowedTools")
                .ok_or("no deny list")?;
            let allowed_at = argv
                .iter()
                .position(|a| a == "--allowedTools")
                .ok_or("no allow list")?;
            let denied = &argv[denied_at + 1..];
            let allowed = argv
                .get(allowed_at + 1..denied_at)
                .ok_or("allow list after deny list")?;
            for tool in tools {
                if !denied.iter().any(|t| t == tool) || allowed.iter().any(|t| t == tool) {
                    return fail("verifier tools", &argv);
                }
            }
        }
    }
    Ok(())
}
