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
fn a_cargo_fuzz_crate_is_not_proposed_as_a_test_project() {
    let env = Env::new();
    env.write(
        "Cargo.toml",
        "[package]\nname = \"ryu\"\nversion = \"1.0.0\"\nedition = \"2021\"\n",
    );
    env.write("src/lib.rs", "");
    env.write(
        "fuzz/Cargo.toml",
        "[package]\nname = \"ryu-fuzz\"\nversion = \"0.0.0\"\npublish = false\n\n[package.metadata]\ncargo-fuzz = true\n\n[dependencies]\nlibfuzzer-sys = \"0.4\"\n\n[workspace]\n\n[[bin]]\nname = \"fuzz_ryu\"\npath = \"fuzz_targets/fuzz_ryu.rs\"\ntest = false\n",
    );
    let value = init(&env);
    assert_eq!(adapters(&value), vec![pair(".", "cargo")], "{value}");
    let warnings = value["data"]["warnings"].to_string();
    assert!(warnings.contains("fuzz/ is a cargo-fuzz crate"), "{value}");
}

#[test]
fn a_second_crate_with_no_test_is_not_proposed_and_one_with_tests_is() {
    let env = Env::new();
    env.write(
        "Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    env.write("src/lib.rs", "pub fn f() {}\n");
    env.write(
        "bench-tool/Cargo.toml",
        "[package]\nname = \"bench-tool\"\n",
    );
    env.write("bench-tool/src/main.rs", "fn main() {}\n");
    env.write("helper/Cargo.toml", "[package]\nname = \"helper\"\n");
    env.write(
        "helper/src/lib.rs",
        "pub fn g() {}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn g() {}\n}\n",
    );
    let value = init(&env);
    assert_eq!(
        adapters(&value),
        vec![pair(".", "cargo"), pair("helper", "cargo")],
        "{value}"
    );
    let warnings = value["data"]["warnings"].to_string();
    assert!(
        warnings.contains("bench-tool/ is a crate with no test in it"),
        "{value}"
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
    // Named after the package, not the adapter.
    let project = &config["project"]["x"];
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

/// The one project init proposed, after checking the written file loads.
fn only_project(env: &Env) -> serde_json::Value {
    let value = init(env);
    let projects = value["data"]["projects"].as_array().expect("projects");
    assert_eq!(projects.len(), 1, "{value}");
    projects[0].clone()
}

/// Commits the proposal, runs every test through it, and gives the totals.
fn run_all(env: &Env) -> serde_json::Value {
    env.commit_all("the project and its tdd.toml");
    let (exit, value) = env.json(&["test", "--all"]);
    assert_eq!(exit, 0, "{value}");
    value["data"]["observations"][0]["totals"].clone()
}

#[test]
fn pytests_declared_testpaths_and_the_package_name_are_used_and_run() {
    // As toolz: the tests live inside the package, and pytest.ini says so.
    let env = Env::new();
    env.write("pyproject.toml", "[project]\nname = \"Toolz\"\n");
    env.write("pytest.ini", "[pytest]\ntestpaths =\n    toolz/tests\n");
    env.write("toolz/__init__.py", "def inc(x):\n    return x + 1\n");
    env.write(
        "toolz/tests/test_inc.py",
        "from toolz import inc\n\n\ndef test_inc():\n    assert inc(1) == 2\n",
    );
    let project = only_project(&env);
    assert_eq!(project["name"], "toolz");
    assert_eq!(project["test_paths"], serde_json::json!(["toolz/tests/"]));
    assert_eq!(project["test_paths_from"], "pytest.ini (testpaths)");
    assert_eq!(project["tests_matched"], 1);
    let text = std::fs::read_to_string(env.root().join("tdd.toml")).expect("written");
    assert!(text.contains("[project.toolz]"), "{text}");
    assert!(text.contains("\"!toolz/tests/**\""), "{text}");
    assert_eq!(run_all(&env)["passed"], 1);
}

#[test]
fn a_test_file_at_the_root_is_found_when_nothing_is_declared() {
    // As six: one test module beside the code, and no testpaths.
    let env = Env::new();
    env.write("setup.cfg", "[metadata]\nname = six\n");
    env.write("six.py", "def two():\n    return 2\n");
    env.write(
        "test_six.py",
        "import six\n\n\ndef test_two():\n    assert six.two() == 2\n\n\ndef test_three():\n    assert six.two() + 1 == 3\n",
    );
    let project = only_project(&env);
    assert_eq!(project["name"], "six");
    assert_eq!(project["test_paths"], serde_json::json!(["test_six.py"]));
    assert_eq!(project["test_paths_from"], "test files on disk");
    // six.py, at the root, is implementation; the test module is a test.
    assert_eq!(project["impl_globs"][0], "**/*.py");
    assert!(
        project["impl_globs"]
            .as_array()
            .expect("globs")
            .contains(&serde_json::json!("!test_six.py")),
        "{project}"
    );
    assert_eq!(run_all(&env)["passed"], 2);
}

#[test]
fn the_test_script_of_package_json_gives_node_test_its_files() {
    // As classnames: `node --test ./tests/*.js`, code in index.js at the root.
    let env = Env::new();
    env.write(
        "package.json",
        r#"{"name": "classnames", "scripts": {"test": "node --test ./tests/*.js"}}"#,
    );
    env.write(
        "index.js",
        "module.exports = (...a) => a.filter(Boolean).join(' ');\n",
    );
    env.write(
        "tests/index.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\nconst cn = require('../index.js');\n\ntest('joins', () => {\n  assert.strictEqual(cn('a', false, 'b'), 'a b');\n});\n",
    );
    env.write("tests/fixture.json", "{}");
    let project = only_project(&env);
    assert_eq!(project["name"], "classnames");
    assert_eq!(project["adapter"], "node-test");
    assert_eq!(project["test_paths"], serde_json::json!(["tests/*.js"]));
    assert_eq!(project["test_paths_from"], "package.json (scripts.test)");
    let implementation = project["impl_globs"].as_array().expect("globs");
    assert!(
        implementation.contains(&serde_json::json!("**/*.js")),
        "{project}"
    );
    assert!(
        implementation.contains(&serde_json::json!("!tests/*.js")),
        "{project}"
    );
    let totals = run_all(&env);
    assert_eq!(totals["passed"], 1, "{totals}");
    assert_eq!(totals["total"], 1, "{totals}");
}

#[test]
fn mocha_flags_of_the_test_script_become_runner_args() {
    let env = Env::new();
    env.write(
        "package.json",
        r#"{"name": "jsonpath", "devDependencies": {"mocha": "^10"}, "scripts": {"test": "mocha -u tdd --reporter dot test && jshint lib"}}"#,
    );
    env.write("test/query.js", "suite('query', () => {});\n");
    let project = only_project(&env);
    assert_eq!(project["adapter"], "mocha");
    assert_eq!(project["runner_args"], serde_json::json!(["-u", "tdd"]));
    assert_eq!(project["test_paths"], serde_json::json!(["test/"]));
    let (_, shown) = env.json(&["config", "show"]);
    assert_eq!(
        shown["data"]["config"]["project"]["jsonpath"]["runner_args"],
        serde_json::json!(["-u", "tdd"])
    );
}

#[test]
fn a_declaration_that_matches_no_test_is_reported_and_the_tests_on_disk_are_used() {
    let env = Env::new();
    env.write(
        "package.json",
        r#"{"name": "x", "scripts": {"test": "node --test spec/*.js"}}"#,
    );
    env.write("tests/a.test.js", "require('node:test')('t', () => {});\n");
    let value = init(&env);
    let project = &value["data"]["projects"][0];
    assert_eq!(project["test_paths"], serde_json::json!(["tests/"]));
    assert_eq!(project["test_paths_from"], "test files on disk");
    let warnings = value["data"]["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{value}");
    assert!(
        warnings[0]
            .as_str()
            .is_some_and(|w| w.contains("spec/*.js") && w.contains("matches no test file")),
        "{value}"
    );
}

#[test]
fn a_project_without_any_test_gets_the_convention_and_a_warning() {
    let env = Env::new();
    env.write("pyproject.toml", "[project]\nname = \"fresh\"\n");
    env.write("fresh.py", "");
    let (exit, text) = env.on_terminal(&["init"]);
    assert_eq!(exit, 0, "{text}");
    assert!(
        text.contains("warning: project fresh (.): no test file found"),
        "{text}"
    );
    let shown = std::fs::read_to_string(env.root().join("tdd.toml")).expect("written");
    assert!(shown.contains("test_paths = [\"tests/\"]"), "{shown}");
}

/// A one-crate cargo project with no tdd.toml yet, for `tdd init --hooks`.
pub(crate) fn cargo_app() -> Env {
    let env = Env::new();
    env.write(
        "Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    env.write("src/lib.rs", "pub fn f() {}\n");
    env
}

#[test]
fn init_hooks_wires_tdd_hook_beside_the_users_own_entries_once() {
    let env = cargo_app();
    let mine = r#"{"model": "opus", "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}]}}"#;
    env.write(".claude/settings.json", mine);
    let (code, value) = env.json(&["init", "--hooks", "claude,codex"]);
    assert_eq!(code, 0, "{value}");
    assert!(env.root().join("tdd.toml").is_file());
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(env.root().join(".claude/settings.json")).expect("settings"),
    )
    .expect("json");
    assert_eq!(settings["model"], "opus");
    let pre = settings["hooks"]["PreToolUse"].as_array().expect("entries");
    assert_eq!(pre[0]["hooks"][0]["command"], "./lint.sh");
    let command = pre[1]["hooks"][0]["command"].as_str().expect("ours");
    assert_eq!(command, "tdd hook claude pre-tool-use");
    // Shell commands are bracketed: checked after they ran.
    let post = settings["hooks"]["PostToolUse"]
        .as_array()
        .expect("entries");
    assert_eq!(post[0]["matcher"], "Bash");
    assert_eq!(
        post[0]["hooks"][0]["command"],
        "tdd hook claude post-tool-use"
    );
    let codex = std::fs::read_to_string(env.root().join(".codex/hooks.json")).expect("codex");
    assert!(codex.contains("tdd hook codex pre-tool-use"), "{codex}");
    assert!(codex.contains("tdd hook codex post-tool-use"), "{codex}");
    assert_eq!(
        settings["hooks"]["Stop"][0]["hooks"][0]["command"],
        "tdd hook claude stop"
    );
    // The command wired is one `tdd hook` takes: with no run, a write is let through.
    let bin = assert_cmd::cargo::cargo_bin("tdd");
    let argv: Vec<&str> = command.split(' ').skip(1).collect();
    let out = env
        .tdd_at(&bin)
        .args(&argv)
        .write_stdin(
            r#"{"tool_name":"Write","tool_input":{"file_path":"src/lib.rs","content":"x"}}"#,
        )
        .output()
        .expect("hook");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // Again: tdd.toml and both settings are left as they are.
    let before = std::fs::read_to_string(env.root().join(".claude/settings.json")).expect("s");
    let (code, value) = env.json(&["init", "--hooks", "claude,codex"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["config"], "kept", "{value}");
    assert!(
        value["data"]["hooks"]
            .as_array()
            .expect("hooks")
            .iter()
            .all(|h| h["changed"] == false),
        "{value}"
    );
    let after = std::fs::read_to_string(env.root().join(".claude/settings.json")).expect("s");
    assert_eq!(before, after);
    // And doctor says which CLIs are wired.
    let (_, doctor) = env.json(&["doctor"]);
    let checks = doctor["data"]["checks"].to_string();
    assert!(
        checks.contains("hooks.claude") && checks.contains("hooks.codex"),
        "{doctor}"
    );
}

#[test]
fn init_hooks_refuses_settings_that_are_not_json_naming_the_line() {
    let env = Env::new();
    env.write("Cargo.toml", "[package]\nname = \"app\"\n");
    env.write(".claude/settings.json", "{\n  \"hooks\": [1,\n");
    let (code, value) = env.json(&["init", "--hooks", "claude"]);
    assert_eq!(code, 2, "{value}");
    assert_eq!(value["error"]["reason"], "hooks_config_invalid");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(".claude/settings.json:3"), "{value}");
    // Refused before anything was written.
    assert!(!env.root().join("tdd.toml").exists());
    let (code, value) = env.json(&["init", "--hooks", "cursor"]);
    assert_eq!(code, 2, "{value}");
    assert_eq!(value["error"]["reason"], "harness_unknown");
}
