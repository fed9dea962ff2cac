//! The doctor's checks of the providers `tdd conduct` would use here, and of the
//! configuration being committed (what `tdd run start` and `tdd conduct` read).

use std::path::Path;

use tdd_engine::config::Config;
use tdd_engine::git::Git;
use tdd_leaves::providers::SelfExe;

use super::Check;
use super::Severity;

/// The agent CLIs tdd has a built-in provider for; only these have tested versions and
/// keys or logins to look for.
const BUILT_IN_CLIS: [&str; 3] = ["claude", "codex", "aider"];

/// The providers `tdd conduct` would start leaves with: `[conductor] provider` and
/// `verifier_provider` (which defaults to the provider), each once.
pub(super) fn configured(config: &Config) -> Vec<String> {
    let mut names: Vec<String> = config.conductor.provider.iter().cloned().collect();
    if let Some(verifier) = &config.conductor.verifier_provider
        && !names.contains(verifier)
    {
        names.push(verifier.clone());
    }
    names
}

/// One check per configured provider (`agent.<name>`), or, with none configured or no
/// `tdd.toml`, one warning that `tdd conduct` will need one.
pub(super) fn checks(config: Option<&Config>) -> Vec<Check> {
    let Some((config, names)) = config
        .map(|c| (c, configured(c)))
        .filter(|(_, names)| !names.is_empty())
    else {
        return vec![Check::fail(
            "agent",
            Severity::Warning,
            "no provider is configured for `tdd conduct`",
            "set `[conductor] provider` in tdd.toml (claude, codex, aider, scripted, or a \
             command of yours under [provider.NAME]), or pass `tdd conduct --provider NAME`",
        )];
    };
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let this = SelfExe::current().unwrap_or_else(|_| SelfExe {
        program: "tdd".into(),
        args: Vec::new(),
    });
    names
        .iter()
        .map(|name| one(name, config, &this, &env))
        .collect()
}

/// The check of the provider `name`: it resolves (a built-in or a `[provider.NAME]`
/// table), its program is on `PATH`, and a built-in CLI has a tested version and a key
/// or a login.
fn one(
    name: &str,
    config: &Config,
    this: &SelfExe,
    env: &std::collections::BTreeMap<String, String>,
) -> Check {
    let check = format!("agent.{name}");
    let provider = match tdd_leaves::providers::build(name, config, this) {
        Ok(provider) => provider,
        Err(e) => {
            return Check::fail(
                check,
                Severity::Error,
                e.to_string(),
                "fix `[conductor] provider` or the provider's table in tdd.toml (docs/providers.md)",
            );
        }
    };
    let Some(cli) = tdd_leaves::versions::check(provider.as_ref(), env) else {
        return Check::pass(check, format!("{name}: built into tdd, needs nothing"));
    };
    let Some(program) = &cli.program else {
        return Check::fail(
            check,
            Severity::Error,
            format!("{name} is configured in tdd.toml but is not on PATH"),
            format!(
                "install {name}, or set `[conductor] provider` to one that is installed \
                 (`scripted` needs nothing)"
            ),
        );
    };
    let built_in = BUILT_IN_CLIS.contains(&name);
    let version = cli
        .version
        .clone()
        .unwrap_or_else(|| "(version unknown)".into());
    if !built_in {
        return Check::pass(check, format!("{name}: {} {version}", program.display()));
    }
    let tested = cli.tested_versions.join(", ");
    let credentials = cli.credentials.clone().map_or_else(
        || "no key or login".to_string(),
        |c| format!("credentials: {c}"),
    );
    let detail = format!(
        "{name} {version} at {} (tested with {tested}); {credentials}",
        program.display()
    );
    if let Some(warning) = cli.warning() {
        Check::fail(
            check,
            Severity::Warning,
            detail,
            format!("{warning}; install a tested version if leaves misbehave"),
        )
    } else if cli.credentials.is_none() {
        Check::fail(
            check,
            Severity::Warning,
            detail,
            format!(
                "set the {name} provider's API key or log in with `{name}` (docs/providers.md)"
            ),
        )
    } else {
        Check::pass(check, detail)
    }
}

/// A warning when `tdd.toml` differs from what is committed (or is not committed at
/// all): `tdd run start` refuses a tree with uncommitted changes, and `tdd conduct`
/// reads the committed file.
pub(super) fn committed_check(root: &Path) -> Check {
    let status = Git::new(root).output(["status", "--porcelain=v1", "--", "tdd.toml"]);
    match status {
        Ok(out) if out.stdout.is_empty() => {
            Check::pass("config_committed", "tdd.toml is committed")
        }
        Ok(out) => {
            let untracked = out.stdout.starts_with(b"??");
            Check::fail(
                "config_committed",
                Severity::Warning,
                if untracked {
                    "tdd.toml is not committed"
                } else {
                    "tdd.toml has changes that are not committed"
                },
                "commit it (`git add tdd.toml && git commit -m \"Configure tdd\"`): `tdd run start` \
                 refuses a tree with uncommitted changes, and `tdd conduct` reads the committed file",
            )
        }
        Err(e) => Check::fail(
            "config_committed",
            Severity::Warning,
            format!("could not ask git whether tdd.toml is committed: {e}"),
            "run `git status` to see why",
        ),
    }
}
