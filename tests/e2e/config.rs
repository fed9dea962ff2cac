//! `tdd config show` and how configuration errors reach the user.

use crate::support::Env;

#[test]
fn config_show_fills_in_defaults() {
    let env = Env::new();
    env.write("tdd.toml", "[project.app]\nadapter = \"pytest\"\n");
    let (exit, value) = env.json(&["config", "show"]);
    assert_eq!(exit, 0);
    let app = &value["data"]["config"]["project"]["app"];
    assert_eq!(app["root"], ".");
    assert_eq!(app["timeout"], 1800);
    assert_eq!(value["data"]["config"]["conductor"]["revise_budget"], 2);
    assert_eq!(value["data"]["sha256"].as_str().map(str::len), Some(64));
    // No [sandbox] table: confinement is on, and says so.
    assert_eq!(
        value["data"]["config"]["sandbox"]["enabled"], true,
        "{value}"
    );
    let (exit, text) = env.on_terminal(&["config", "show"]);
    assert_eq!(exit, 0, "{text}");
    assert!(text.contains("[sandbox]\nenabled = true"), "{text}");
}

#[test]
fn config_show_says_when_the_sandbox_is_turned_off() {
    let env = Env::new();
    env.write(
        "tdd.toml",
        "[project.app]\nadapter = \"pytest\"\n\n[sandbox]\nenabled = false\n",
    );
    let (exit, value) = env.json(&["config", "show"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(
        value["data"]["config"]["sandbox"]["enabled"], false,
        "{value}"
    );
}

#[test]
fn an_unknown_key_exits_2_with_file_line_column_and_the_nearest_key() {
    let env = Env::new();
    env.write(
        "tdd.toml",
        "[project.app]\nadapter = \"pytest\"\ntest_path = [\"tests\"]\n",
    );
    let (exit, value) = env.json(&["config", "show"]);
    assert_eq!(exit, 2);
    assert_eq!(value["error"]["reason"], "config_invalid");
    assert!(
        value["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("tdd.toml:3:1")),
        "{value}"
    );
    assert_eq!(value["data"]["suggestion"], "test_paths");
    assert_eq!(value["next_action"]["verb"], "fix_config");
}

/// A project name tdd would name a directory after must be a plain name: one that
/// climbs (`..`) or is absolute would put a build directory outside tdd's own.
#[test]
fn a_project_name_that_is_a_path_exits_2_naming_it() {
    let env = Env::new();
    for name in ["../../escape", "/tmp/abs", ".hidden"] {
        env.write(
            "tdd.toml",
            &format!("[project.\"{name}\"]\nadapter = \"cargo\"\n"),
        );
        let (exit, value) = env.json(&["config", "show"]);
        assert_eq!(exit, 2, "{name}: {value}");
        assert_eq!(value["error"]["reason"], "config_invalid", "{value}");
        assert!(
            value["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(name) && m.contains("plain name")),
            "{value}"
        );
    }
}

#[test]
fn a_wrong_type_on_a_terminal_shows_the_snippet() {
    let env = Env::new();
    env.write(
        "tdd.toml",
        "[project.app]\nadapter = \"pytest\"\ntimeout = \"soon\"\n",
    );
    let (exit, text) = env.on_terminal(&["config", "show"]);
    assert_eq!(exit, 2, "{text}");
    assert!(
        text.contains("tdd.toml:3:11: invalid type: string \"soon\""),
        "{text}"
    );
    assert!(
        text.contains("3 | timeout = \"soon\"") && text.contains("^^^^^^"),
        "{text}"
    );
    assert!(text.contains("\nhint: "), "{text}");
    assert!(
        !text.contains("\x1b["),
        "NO_COLOR must disable colour: {text:?}"
    );
}

#[test]
fn a_missing_config_is_refused_with_a_hint_to_init() {
    let env = Env::new();
    let (exit, value) = env.json(&["config", "show"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "config_missing");
    assert!(
        value["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("tdd init"))
    );
}

#[test]
fn the_example_config_in_full_vocabulary_loads() {
    let env = Env::new();
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tdd.toml");
    env.write(
        "tdd.toml",
        &std::fs::read_to_string(example).expect("example"),
    );
    let (exit, value) = env.json(&["config", "show"]);
    assert_eq!(exit, 0, "{value}");
    assert_eq!(
        value["data"]["config"]["artifact"]["api_client"]["generated"],
        true
    );
    assert_eq!(
        value["data"]["config"]["provider"]["local-agent"]["model"],
        "small"
    );
}
