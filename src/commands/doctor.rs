//! `tdd doctor`: is this machine and work tree ready for `tdd`?

use std::path::Path;

use serde::Serialize;
use serde_json::json;
use tdd_engine::config::AdapterKind;
use tdd_engine::config::Config;
use tdd_engine::git::Git;
use tdd_engine::git::GitProbe;
use tdd_engine::ledger::Ledger;
use tdd_engine::ledger::LedgerLocation;
use tdd_engine::observe::Probe;
use tdd_engine::observe::Project;
use tdd_engine::observe::adapter_for;

use crate::context::Ctx;
use crate::error::CommandError;
use crate::error::error_chain;
use crate::output::NextAction;
use crate::output::Outcome;
use crate::output::Verb;

mod providers;

/// Check git, the work tree, tdd.toml, each project's test runner, the ledger,
/// agent CLIs and the forge token. Exit 0 when healthy, 1 otherwise.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {}

/// How much a failed check matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Severity {
    /// `tdd` cannot work until this is fixed.
    Error,
    /// Some features are unavailable.
    Warning,
}

/// One line of the report.
#[derive(Debug, Serialize)]
struct Check {
    check: String,
    ok: bool,
    severity: Severity,
    detail: String,
    hint: Option<String>,
}

impl Check {
    fn pass(check: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            check: check.into(),
            ok: true,
            severity: Severity::Error,
            detail: detail.into(),
            hint: None,
        }
    }

    fn fail(
        check: impl Into<String>,
        severity: Severity,
        detail: impl Into<String>,
        hint: impl Into<String>,
    ) -> Check {
        Check {
            check: check.into(),
            ok: false,
            severity,
            detail: detail.into(),
            hint: Some(hint.into()),
        }
    }
}

/// One check per agent CLI whose project settings run `tdd hook` before its tools
/// (`tdd init --hooks`), each with its self-test: the wired command, fed a write no
/// agent may make, must block it, and the CLI itself (Claude Code, Codex), when it is
/// on `PATH`, must run it and block its scripted write. None where no CLI is wired,
/// which is a choice, not a fault.
fn hooks_checks(root: &std::path::Path) -> Vec<Check> {
    use tdd_leaves::hook::Harness;
    Harness::ALL
        .into_iter()
        .filter_map(|harness| {
            let file = harness.settings_file();
            let text = std::fs::read_to_string(root.join(file)).ok()?;
            if !tdd_leaves::hook_config::wired(harness, &text) {
                return None;
            }
            let name = format!("hooks.{}", harness.as_str());
            let test = super::hook_selftest::run(root, harness);
            let cli = test
                .blocked
                .then(|| super::hook_cli::check(harness))
                .flatten();
            if let Some(cli) = cli.as_ref().filter(|c| c.found.is_some() && !c.blocked) {
                return Some(Check::fail(
                    name,
                    Severity::Error,
                    format!("{file} runs the hook and it answers, but the CLI does not heed it: {}", cli.summary()),
                    format!("run `tdd hook {} selftest` for the whole report; the gate still reverts a locked change", harness.as_str()),
                ));
            }
            Some(if test.blocked {
                Check::pass(
                    name,
                    format!(
                        "`{}` runs before its tools ({file}); its self-test blocked a write to git's internals in {} ms{}",
                        harness.hook_command(),
                        test.latency_ms,
                        cli.as_ref().map(|c| format!("; {}", c.summary())).unwrap_or_default()
                    ),
                )
            } else {
                Check::fail(
                    name,
                    Severity::Error,
                    format!("{file} runs the hook, but its self-test failed: {}", test.detail),
                    format!("check `command -v tdd` on the harness's PATH, then `tdd hook {} selftest`", harness.as_str()),
                )
            })
        })
        .collect()
}

/// Runs `tdd doctor`.
pub fn cmd_doctor(ctx: &Ctx, _args: DoctorArgs) -> Result<Outcome, CommandError> {
    let mut checks = Vec::new();
    checks.push(match Git::version() {
        Ok(v) => Check::pass("git", format!("git {v}")),
        Err(e) => Check::fail("git", Severity::Error, e.to_string(), "install git"),
    });
    let work_tree = Git::new(&ctx.cwd).toplevel().ok();
    checks.push(match &work_tree {
        Some(root) => Check::pass("work_tree", root.display().to_string()),
        None => Check::fail(
            "work_tree",
            Severity::Error,
            format!("{} is not inside a git work tree", ctx.cwd.display()),
            "run tdd inside a git repository, or pass -C <dir>",
        ),
    });
    let config = work_tree
        .as_deref()
        .and_then(|root| config_checks(ctx, root, &mut checks));
    checks.push(ledger_check(ctx));
    // A tdd.toml that did not load has its own failed check; its providers are unknown.
    if work_tree.is_none() || config.is_some() {
        checks.extend(providers::checks(config.as_ref()));
    }
    if let Some(root) = &work_tree {
        checks.extend(hooks_checks(root));
    }
    checks.push(sandbox_check());
    checks.push(runner_namespaces_check());
    checks.push(forge_token_check());
    if let Some(check) = github_check(work_tree.as_deref()) {
        checks.push(check);
    }
    let healthy = checks
        .iter()
        .all(|c| c.ok || c.severity == Severity::Warning);
    let failing = checks
        .iter()
        .filter(|c| !c.ok && c.severity == Severity::Error)
        .count();
    let text = render(&checks);
    let data = json!({ "healthy": healthy, "checks": checks });
    if healthy {
        Ok(Outcome::new(data, text).next(NextAction::terminal(Verb::Complete, "tdd is ready")))
    } else {
        let first_hint = checks
            .iter()
            .find(|c| !c.ok && c.severity == Severity::Error)
            .and_then(|c| c.hint.clone())
            .unwrap_or_default();
        Err(
            CommandError::refused("unhealthy", format!("{failing} check(s) failed"))
                .hint(first_hint)
                .data(data)
                .text(text),
        )
    }
}

/// Whether leaves and the runners of project code can be confined here: the kernel's
/// Landlock, as `[sandbox]` gets it.
fn sandbox_check() -> Check {
    let level = tdd_sandbox::probe();
    match &level {
        tdd_sandbox::Level::Full { abi } => Check::pass(
            "sandbox",
            format!(
                "Landlock ABI {abi}: leaves and test runners can be fully confined ([sandbox] enabled = true)"
            ),
        ),
        tdd_sandbox::Level::Partial { abi, missing } => Check::fail(
            "sandbox",
            Severity::Warning,
            format!("Landlock ABI {abi} confines leaves and test runners partly: {missing}"),
            "a kernel of Linux 6.12 or newer confines leaves fully; `[sandbox] require = true` refuses to start leaves here",
        ),
        tdd_sandbox::Level::None { reason } => Check::fail(
            "sandbox",
            Severity::Warning,
            format!("leaves and test runners cannot be confined: {reason}"),
            "enable Landlock (the kernel's `lsm=` boot list) to confine leaves and the project code tdd runs; `[sandbox] require = true` refuses to start leaves here",
        ),
        tdd_sandbox::Level::Disabled => Check::pass("sandbox", "disabled"),
    }
}

/// Whether each test runner can have processes, IPC and a network of its own here.
fn runner_namespaces_check() -> Check {
    let have = tdd_sandbox::namespaces();
    if have.processes && have.network {
        return Check::pass(
            "runner_namespaces",
            "each test runner gets its own PID, IPC and network (loopback only) namespaces: nothing it starts or listens on outlives it",
        );
    }
    let mut missing = Vec::new();
    if !have.processes {
        missing.push("PID and IPC namespaces (a test's daemon can outlive its run until the `tdd` command ends it)");
    }
    if !have.network {
        missing.push("a network namespace (test code keeps this machine's network)");
    }
    Check::fail(
        "runner_namespaces",
        Severity::Warning,
        format!(
            "this kernel refuses unprivileged user namespaces for: {}",
            missing.join("; ")
        ),
        "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, or the AppArmor userns restriction off) to give each test runner its own",
    )
}

/// The checks of `tdd.toml` (it loads, it is committed) and of each project's runner;
/// the configuration when it loaded.
fn config_checks(ctx: &Ctx, root: &Path, checks: &mut Vec<Check>) -> Option<Config> {
    let config = match Config::load_from_root(root) {
        Ok(Some((path, config))) => {
            checks.push(Check::pass(
                "config",
                match config.project.len() {
                    1 => format!("{} (1 project)", path.display()),
                    n => format!("{} ({n} projects)", path.display()),
                },
            ));
            checks.push(providers::committed_check(root));
            config
        }
        Ok(None) => {
            checks.push(Check::fail(
                "config",
                Severity::Error,
                "no tdd.toml in the work tree",
                "run `tdd init`",
            ));
            return None;
        }
        Err(e) => {
            let hint = e.hint().unwrap_or_default();
            checks.push(Check::fail("config", Severity::Error, e.to_string(), hint));
            return None;
        }
    };
    for (name, project) in &config.project {
        let check = format!("runner.{name}");
        ctx.out.progress(
            "probe_runner",
            json!({ "project": name, "adapter": project.adapter }),
            &format!(
                "probing the {} runner of project {name}...",
                project.adapter
            ),
        );
        let probe = match Project::new(root, name, project.clone()) {
            Ok(observed) => adapter_for(project.adapter).probe(&observed),
            Err(e) => Probe {
                argv: Vec::new(),
                version: None,
                error: Some(error_chain(&e)),
            },
        };
        let asked = probe.argv.join(" ");
        checks.push(match (probe.version, probe.error) {
            (Some(version), _) => {
                Check::pass(check, format!("{}: {version} (`{asked}`)", project.adapter))
            }
            (None, why) => Check::fail(
                check,
                Severity::Error,
                format!("{}: {}", project.adapter, why.unwrap_or_default()),
                install_hint(project.adapter),
            ),
        });
    }
    Some(config)
}

fn install_hint(adapter: AdapterKind) -> String {
    match adapter {
        AdapterKind::Pytest => {
            "install pytest (`pip install pytest`) in the project's environment".into()
        }
        AdapterKind::Vitest | AdapterKind::Jest | AdapterKind::Mocha => {
            format!(
                "run `npm install` in the project (or a directory above it) so node_modules/.bin/{adapter} exists"
            )
        }
        AdapterKind::Go => "install Go and make sure `go` is on PATH".into(),
        AdapterKind::Cargo => "install Rust (cargo) and make sure it is on PATH".into(),
        AdapterKind::NodeTest => "install Node.js 20 or newer".into(),
        AdapterKind::Junit => "make the first word of test_command an executable on PATH".into(),
    }
}

fn ledger_check(ctx: &Ctx) -> Check {
    let location = match LedgerLocation::resolve(&ctx.cwd, &GitProbe) {
        Ok(location) => location,
        Err(e) => {
            let detail = error_chain(&e);
            let hint = CommandError::from(e).hint.clone().unwrap_or_default();
            return Check::fail("ledger", Severity::Error, detail, hint);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&location.home) {
        return Check::fail(
            "ledger",
            Severity::Error,
            format!("cannot create {}: {e}", location.home.display()),
            "make the ledger home writable, or set TDD_LEDGER_HOME",
        );
    }
    match Ledger::open_read_only(&location.database) {
        Ok(Some(ledger)) => match ledger.count() {
            Ok(n) => Check::pass(
                "ledger",
                format!(
                    "{} ({n} events, outside the work tree)",
                    location.database.display()
                ),
            ),
            Err(e) => Check::fail(
                "ledger",
                Severity::Error,
                error_chain(&e),
                "run `tdd ledger verify`",
            ),
        },
        Ok(None) => Check::pass(
            "ledger",
            format!(
                "{} (not created yet, outside the work tree)",
                location.database.display()
            ),
        ),
        Err(e) => {
            let hint = CommandError::from(e).hint.clone().unwrap_or_default();
            Check::fail(
                "ledger",
                Severity::Error,
                format!("cannot open {}", location.database.display()),
                hint,
            )
        }
    }
}

fn forge_token_check() -> Check {
    let present = ["GITHUB_TOKEN", "GH_TOKEN"]
        .into_iter()
        .find(|k| std::env::var_os(k).is_some_and(|v| !v.is_empty()));
    match present {
        Some(name) => Check::pass("forge_token", format!("{name} is set (value not shown)")),
        None => Check::fail(
            "forge_token",
            Severity::Warning,
            "neither GITHUB_TOKEN nor GH_TOKEN is set",
            "set GITHUB_TOKEN to use --forge github; the local forge needs none",
        ),
    }
}

/// When the GitHub forge applies (the `origin` remote is on GitHub, or
/// `GITHUB_API_URL` names an API for it) and a token is found: whether the token can
/// read the repository's issues and push, and what it lacks.
fn github_check(work_tree: Option<&Path>) -> Option<Check> {
    use tdd_conductor::forge::github::spec;
    let origin = Git::new(work_tree?)
        .text(["remote", "get-url", "origin"])
        .ok()?;
    let (host, repo) = spec::remote_repo(&origin)?;
    let api = std::env::var("GITHUB_API_URL")
        .ok()
        .filter(|u| !u.is_empty());
    if host != "github.com" && api.is_none() {
        return None;
    }
    let api = api.unwrap_or_else(|| spec::api_for_host(&host));
    let name = format!("forge.github {repo}");
    let Some(token) = tdd_conductor::forge::github::resolve_token(|k| std::env::var(k).ok()) else {
        return Some(Check::fail(
            name,
            Severity::Warning,
            "no token: GITHUB_TOKEN, GH_TOKEN and `gh auth token` give none",
            "set GITHUB_TOKEN (or log in with `gh auth login`) to conduct this repository's issues",
        ));
    };
    Some(
        match tdd_conductor::forge::github::access(&api, &repo, &token) {
            Ok(access) if access.missing.is_empty() && access.read_issues && access.push => {
                Check::pass(
                    name,
                    format!("the token from {} can read issues and push", token.source()),
                )
            }
            Ok(access) => Check::fail(
                name,
                Severity::Warning,
                format!(
                    "the token from {}: read issues {}, push {}; missing: {}",
                    token.source(),
                    if access.read_issues { "yes" } else { "no" },
                    if access.push { "yes" } else { "no" },
                    if access.missing.is_empty() {
                        "-".to_string()
                    } else {
                        access.missing.join(", ")
                    }
                ),
                "grant the missing scopes or permissions to the token (a classic token needs `repo`)",
            ),
            Err(err) => Check::fail(
                name,
                Severity::Warning,
                err.to_string(),
                "check the token (`gh auth status`), the `origin` remote and GITHUB_API_URL",
            ),
        },
    )
}

fn render(checks: &[Check]) -> String {
    let mut text = String::new();
    for c in checks {
        let mark = match (c.ok, c.severity) {
            (true, _) => "ok  ",
            (false, Severity::Warning) => "warn",
            (false, Severity::Error) => "FAIL",
        };
        text.push_str(&format!("{mark}  {:<20} {}\n", c.check, c.detail));
        if let (false, Some(hint)) = (c.ok, &c.hint) {
            text.push_str(&format!("      {:<20} hint: {hint}\n", ""));
        }
    }
    text
}
