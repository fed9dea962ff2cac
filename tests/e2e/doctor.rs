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
