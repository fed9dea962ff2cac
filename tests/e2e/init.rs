//! `tdd init`: detection per ecosystem, refusal to overwrite, rules.json import.

use crate::support::Env;

fn init(env: &Env) -> serde_json::Value {
    let (exit, value) = env.json(&["init"]);
    assert_eq!(exit, 0, "{value}");
    // The written file must load as it stands.
    let (exit, shown) = env.json(&["config", "show"]);
    assert_eq!(exit, 0, "generated tdd.toml does not load: {shown}");
    value
}

fn adapters(value: &serde_json::Value) -> Vec<(String, String)> {
    value["data"]["projects"]
        .as_array()
        .expect("projects")
        .iter()
        .map(|p| {
            (
                p["root"].as_str().unwrap_or("").to_string(),
                p["adapter"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn pair(root: &str, adapter: &str) -> (String, String) {
    (root.to_string(), adapter.to_string())
}

#[test]
fn each_ecosystem_marker_is_detected() {
    let cases: &[(&str, &str, &str)] = &[
        ("Cargo.toml", "[package]\nname = \"x\"\n", "cargo"),
        ("pyproject.toml", "[project]\nname = \"x\"\n", "pytest"),
        ("pytest.ini", "[pytest]\n", "pytest"),
        ("setup.cfg", "[metadata]\n", "pytest"),
        ("tox.ini", "[tox]\n", "pytest"),
        ("go.mod", "module example.com/x\n", "go"),
        (
            "package.json",
            r#"{"devDependencies":{"vitest":"^3"}}"#,
            "vitest",
        ),
        (
            "package.json",
            r#"{"devDependencies":{"jest":"^29"}}"#,
            "jest",
        ),
        (
            "package.json",
            r#"{"dependencies":{"mocha":"^10"}}"#,
            "mocha",
        ),
        (
            "package.json",
            r#"{"scripts":{"test":"node --test"}}"#,
            "node-test",
        ),
    ];
    for (marker, contents, adapter) in cases {
        let env = Env::new();
        env.write(marker, contents);
        let value = init(&env);
        assert_eq!(
            adapters(&value),
            vec![pair(".", adapter)],
            "marker {marker}"
        );
    }
}

#[test]
fn projects_one_level_down_and_unclassified_directories_are_reported() {
    let env = Env::new();
    env.write("backend/pyproject.toml", "[project]\nname = \"b\"\n");
    env.write(
        "frontend/package.json",
        r#"{"devDependencies":{"vitest":"^3"}}"#,
    );
    env.write("docs/index.md", "# docs\n");
    env.write("node_modules/x/package.json", "{}");
    let value = init(&env);
    assert_eq!(
        adapters(&value),
        vec![pair("backend", "pytest"), pair("frontend", "vitest")]
    );
    assert_eq!(value["data"]["unclassified"], serde_json::json!(["docs"]));
    let text = std::fs::read_to_string(env.root().join("tdd.toml")).expect("written");
    assert!(
        text.contains("[project.backend.locks]") && text.contains("\"!**/test_*.py\""),
        "{text}"
    );
}

#[test]
fn a_cargo_workspace_is_one_project() {
    let env = Env::new();
    env.write("Cargo.toml", "[workspace]\nmembers = [\"core\"]\n");
    env.write("core/Cargo.toml", "[package]\nname = \"core\"\n");
    let value = init(&env);
    assert_eq!(adapters(&value), vec![pair(".", "cargo")]);
}

#[test]
fn an_existing_config_is_not_overwritten_without_force() {
    let env = Env::new();
    env.write("Cargo.toml", "[package]\nname = \"x\"\n");
    let original = "# mine\n[project.mine]\nadapter = \"cargo\"\n";
    env.write("tdd.toml", original);
    let (exit, value) = env.json(&["init"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "config_exists");
    assert_eq!(
        std::fs::read_to_string(env.root().join("tdd.toml")).expect("read"),
        original
    );
    let (exit, _) = env.json(&["init", "--force"]);
    assert_eq!(exit, 0);
    assert_ne!(
        std::fs::read_to_string(env.root().join("tdd.toml")).expect("read"),
        original
    );
}

#[test]
fn enforcer_rules_json_is_imported() {
    let env = Env::new();
    env.write("pyproject.toml", "[project]\nname = \"x\"\n");
    env.write(
        ".tdd/rules.json",
        r#"{"blockedInRed":["src/**","!src/**/*_test.py"],"blockedInGreen":["tests/**"],"testCommands":["pytest -q"],"timeoutSeconds":90}"#,
    );
    let value = init(&env);
    assert_eq!(value["data"]["imported_rules"], true);
    let (_, shown) = env.json(&["config", "show"]);
    let config = &shown["data"]["config"];
    assert_eq!(
        config["locks"]["impl"],
        serde_json::json!(["src/**", "!src/**/*_test.py"])
    );
    assert_eq!(config["locks"]["test"], serde_json::json!(["tests/**"]));
    let project = &config["project"]["pytest"];
    assert_eq!(project["test_command"], "pytest -q");
    assert_eq!(project["timeout"], 90);
}

#[test]
fn a_malformed_rules_json_is_bad_input_with_its_position() {
    let env = Env::new();
    env.write(".tdd/rules.json", "{\"blockedInRed\": [\n  \"src/**\",\n}");
    let (exit, value) = env.json(&["init"]);
    assert_eq!(exit, 2);
    assert_eq!(value["error"]["reason"], "rules_invalid");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("rules.json:3:")),
        "{value}"
    );
    assert!(!env.root().join("tdd.toml").exists());
}
