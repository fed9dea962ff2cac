//! `tdd doctor`: healthy and unhealthy work trees, and secrets never printed.

use crate::support::Env;

fn check<'a>(value: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    value["data"]["checks"]
        .as_array()
        .and_then(|checks| checks.iter().find(|c| c["check"] == name))
        .unwrap_or_else(|| panic!("no check {name} in {value}"))
}

#[test]
fn a_configured_cargo_repository_is_healthy() {
    let env = Env::new();
    env.write("tdd.toml", "[project.app]\nadapter = \"cargo\"\n");
    let (exit, value) = env.json(&["doctor"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(value["data"]["healthy"], true);
    assert_eq!(check(&value, "runner.app")["ok"], true);
    assert_eq!(check(&value, "ledger")["ok"], true);
    assert!(
        check(&value, "git")["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("git "))
    );
}

#[test]
fn a_missing_config_and_a_missing_runner_fail_with_hints() {
    let env = Env::new();
    let (exit, value) = env.json(&["doctor"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "unhealthy");
    assert_eq!(check(&value, "config")["hint"], "run `tdd init`");

    env.write("tdd.toml", "[project.web]\nadapter = \"vitest\"\n");
    let (exit, value) = env.json(&["doctor"]);
    assert_eq!(exit, 1);
    let runner = check(&value, "runner.web");
    assert_eq!(runner["ok"], false);
    assert!(
        runner["hint"]
            .as_str()
            .is_some_and(|h| h.contains("npm install")),
        "{runner}"
    );
}

#[test]
fn the_forge_token_is_reported_but_never_printed() {
    let secret = "ghp_s3cr3t-value-that-must-not-leak";
    let env = Env::new().with_env("GITHUB_TOKEN", secret);
    env.write("tdd.toml", "[project.app]\nadapter = \"cargo\"\n");
    let out = env.tdd().args(["doctor", "--json"]).output().expect("runs");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(secret));
    let value = crate::support::envelope(&out);
    assert_eq!(check(&value, "forge_token")["ok"], true);
}

#[test]
fn doctor_on_a_terminal_is_a_readable_table() {
    let env = Env::new();
    env.write("tdd.toml", "[project.app]\nadapter = \"cargo\"\n");
    let (exit, text) = env.on_terminal(&["doctor"]);
    assert_eq!(exit, 0, "{text}");
    assert!(text.contains("ok    git"), "{text}");
    assert!(!text.contains("envelope_version"), "{text}");
}

/// Writes an executable script at `path` that prints `line`.
fn fake_program(path: &std::path::Path, line: &str) {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("dir");
    }
    std::fs::write(path, format!("#!/bin/sh\necho '{line}'\n")).expect("script");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn the_runner_is_probed_the_way_the_engine_starts_it() {
    // A uv project: the engine runs `uv run python -m pytest`, so doctor asks uv.
    let bin = tempfile::tempdir().expect("bin");
    fake_program(&bin.path().join("uv"), "pytest 9.9.9 through uv");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = Env::new().with_env("PATH", &path);
    env.write("uv.lock", "version = 1\n");
    env.write("tdd.toml", "[project.py]\nadapter = \"pytest\"\n");
    let (exit, value) = env.json(&["doctor"]);
    let runner = check(&value, "runner.py");
    assert_eq!(runner["ok"], true, "{value} ({exit})");
    assert_eq!(
        runner["detail"],
        "pytest: pytest 9.9.9 through uv (`uv run python -m pytest --version`)"
    );

    // A node runner installed above the project root, where the engine finds it.
    let env = Env::new();
    fake_program(&env.root().join("node_modules/.bin/vitest"), "vitest/9.9.9");
    env.write(
        "tdd.toml",
        "[project.web]\nadapter = \"vitest\"\nroot = \"web\"\n",
    );
    env.write("web/package.json", "{}\n");
    let (_, value) = env.json(&["doctor"]);
    let runner = check(&value, "runner.web");
    assert_eq!(runner["ok"], true, "{value}");
    assert!(
        runner["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("vitest: vitest/9.9.9")),
        "{runner}"
    );
}

#[test]
fn only_the_configured_providers_are_checked_and_an_uncommitted_config_is_named() {
    let env = Env::new().with_env("PATH", &crate::snapshots::path_without_agents());
    env.write(
        "tdd.toml",
        "[project.app]\nadapter = \"cargo\"\n\n[conductor]\nprovider = \"scripted\"\n\n[provider.scripted]\nargs = [\"fixture.toml\"]\n",
    );
    let (exit, value) = env.json(&["doctor"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(check(&value, "agent.scripted")["ok"], true, "{value}");
    for other in ["agent.claude", "agent.codex", "agent.aider"] {
        assert!(
            !value["data"]["checks"].to_string().contains(other),
            "{other} is not configured: {value}"
        );
    }
    let committed = check(&value, "config_committed");
    assert_eq!(committed["ok"], false, "{value}");
    assert_eq!(committed["severity"], "warning", "{value}");
    assert_eq!(committed["detail"], "tdd.toml is not committed", "{value}");
    assert!(
        committed["hint"]
            .as_str()
            .is_some_and(|h| h.contains("git add tdd.toml")),
        "{value}"
    );
    env.commit_all("configure tdd");
    let (_, value) = env.json(&["doctor"]);
    assert_eq!(check(&value, "config_committed")["ok"], true, "{value}");

    // A configured agent CLI that is not installed: conduct could not start a leaf.
    env.write(
        "tdd.toml",
        "[project.app]\nadapter = \"cargo\"\n\n[conductor]\nprovider = \"scripted\"\nverifier_provider = \"claude\"\n\n[provider.scripted]\nargs = [\"fixture.toml\"]\n",
    );
    let (exit, value) = env.json(&["doctor"]);
    assert_eq!(exit, 1, "{value}");
    let claude = check(&value, "agent.claude");
    assert_eq!(
        (claude["ok"].clone(), claude["severity"].clone()),
        (false.into(), "error".into())
    );
    assert_eq!(
        check(&value, "config_committed")["detail"],
        "tdd.toml has changes that are not committed"
    );
    // A provider that names nothing: the configuration's own check says where, and
    // no provider check guesses.
    env.write(
        "tdd.toml",
        "[project.app]\nadapter = \"cargo\"\n\n[conductor]\nprovider = \"mine\"\n",
    );
    let (exit, value) = env.json(&["doctor"]);
    assert_eq!(exit, 1, "{value}");
    assert!(
        check(&value, "config")["detail"]
            .as_str()
            .is_some_and(|d| d.contains("tdd.toml:5:1") && d.contains("`mine`")),
        "{value}"
    );
    let names = value["data"]["checks"].to_string();
    assert!(!names.contains("\"agent"), "{value}");
}
