use std::path::Path;

use super::*;

fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(Path::new("tdd.toml"), text)
}

fn rendered(text: &str) -> String {
    let err = parse(text).expect_err("config should be rejected");
    format!("{}\nhint: {}", err.render(), err.hint().unwrap_or_default())
}

#[test]
fn tdd_cli_monorepo_config_loads_unchanged() {
    let text = r#"
ignore = ["docs/**"]

[project.backend]
root       = "backend"
adapter    = "pytest"
test_paths = ["tests/"]
lint       = ["ruff check"]
typecheck  = ["mypy ."]
test_command = "uv run pytest -n {workers}"
lease = "db"
timeout = 900
baseline_max_failure_ratio = 0.5
health_command = "pg_isready"
in_close_sweep = true
env = { DATABASE_URL = "postgres://localhost/test" }

[[project.backend.override]]
pattern = "tests/slow/**"
timeout = 3600

[project.frontend]
root       = "frontend"
adapter    = "vitest"
test_paths = ["**/__tests__/**", "**/*.test.ts"]
typecheck  = ["tsc --noEmit"]

[artifact.openapi]
path        = "schema/openapi.json"
produced_by = "backend"
regenerate  = "uv run python -m app.export_openapi"
consumed_by = ["frontend"]

[artifact.api_client]
path        = "frontend/generated"
produced_by = "artifact.openapi"     # artifacts chain
regenerate  = "npm --prefix codegen run generate"
check       = "npm --prefix codegen run check"
consumed_by = ["frontend"]
generated   = true
"#;
    let config = parse(text).expect("tdd-cli config loads");
    assert_eq!(config.project.len(), 2);
    assert_eq!(config.project["backend"].adapter, AdapterKind::Pytest);
    assert_eq!(config.project["backend"].timeout, 900);
    assert_eq!(config.project["frontend"].timeout, 1800);
    assert_eq!(config.project["backend"].overrides[0].timeout, Some(3600));
    assert!(config.artifact["api_client"].generated);
    assert_eq!(config.conductor.revise_budget, 2);
}

#[test]
fn full_tdd_config_loads() {
    let text = r#"
[project.app]
adapter = "cargo"
[locks]
impl = ["src/**", "!src/**/tests.rs"]
test = ["tests/**"]
[conductor]
provider = "claude"
verifier_provider = "mine"
leaf_timeout_s = 600
idle_timeout_s = 120
revise_budget = 3
stuck_retries = 2
branch_prefix = "tdd/"
worktree = true
[provider.mine]
command = "my-agent"
args = ["--prompt", "{prompt_file}"]
env = ["MY_AGENT_KEY"]
model = "small"
"#;
    let config = parse(text).expect("loads");
    assert_eq!(config.project["app"].root, ".");
    assert_eq!(config.locks.impl_globs.len(), 2);
    assert_eq!(config.conductor.verifier_provider.as_deref(), Some("mine"));
    assert!(config.conductor.worktree);
    assert_eq!(config.provider["mine"].env, vec!["MY_AGENT_KEY"]);
}

#[test]
fn unknown_project_key_names_position_and_nearest_key() {
    insta::assert_snapshot!(rendered(
        "[project.app]\nadapter = \"pytest\"\ntest_path = [\"tests\"]\n"
    ));
}

#[test]
fn wrong_type_names_position() {
    insta::assert_snapshot!(rendered(
        "[project.app]\nadapter = \"pytest\"\ntimeout = \"soon\"\n"
    ));
}

#[test]
fn unknown_adapter_suggests_nearest() {
    insta::assert_snapshot!(rendered("[project.app]\nadapter = \"pytset\"\n"));
}

#[test]
fn unknown_top_level_table_is_rejected() {
    insta::assert_snapshot!(rendered("[projects.app]\nadapter = \"pytest\"\n"));
}

#[test]
fn missing_adapter_is_rejected() {
    insta::assert_snapshot!(rendered("[project.app]\nroot = \".\"\n"));
}

#[test]
fn malformed_toml_is_rejected() {
    insta::assert_snapshot!(rendered("[project.app\nadapter = \"pytest\"\n"));
}

#[test]
fn dangling_artifact_reference_is_rejected() {
    insta::assert_snapshot!(rendered(
        "[project.backend]\nadapter = \"pytest\"\n[artifact.schema]\npath = \"s.json\"\nproduced_by = \"backnd\"\n"
    ));
}

#[test]
fn unknown_provider_is_rejected() {
    insta::assert_snapshot!(rendered("[conductor]\nprovider = \"cluade\"\n"));
}

#[test]
fn nearest_ignores_distant_words() {
    assert_eq!(errors_nearest("zzzzzz"), None);
    assert_eq!(errors_nearest("adaptr"), Some("adapter".to_string()));
}

fn errors_nearest(word: &str) -> Option<String> {
    diagnostic::nearest(word, ["adapter", "root", "timeout"].into_iter())
}

#[test]
fn known_failures_load_and_match_per_project() {
    let text = "[project.app]\nadapter = \"cargo\"\nknown_failures = [\"app::calc::broken broken\", \"calc::slow *\"]\n";
    let config = parse(text).expect("loads");
    let known = config.known_failures("app").expect("compiled at parse");
    assert!(known.matches("app::calc::broken broken"));
    assert!(known.matches("app::calc::slow one"));
    assert!(!known.matches("app::calc::add adds"));
    assert!(config.known_failures("missing").expect("empty").is_empty());
}

#[test]
fn an_invalid_known_failures_glob_names_the_entry() {
    insta::assert_snapshot!(rendered(
        "[project.app]\nadapter = \"cargo\"\nknown_failures = [\"app::ok\", \"app::t[oops\"]\n"
    ));
}

#[test]
fn an_empty_known_failures_entry_is_rejected() {
    insta::assert_snapshot!(rendered(
        "[project.app]\nadapter = \"cargo\"\nknown_failures = [\"\"]\n"
    ));
}

#[test]
fn a_builtin_provider_table_adjusts_it_without_a_command() {
    let config = parse("[provider.claude]\nmodel = \"sonnet\"\nenv = [\"HTTPS_PROXY\"]\n")
        .expect("a built-in table needs no command");
    assert_eq!(config.provider["claude"].command, None);
    assert_eq!(config.provider["claude"].model.as_deref(), Some("sonnet"));
}

#[test]
fn a_custom_provider_table_needs_a_command() {
    let text = rendered("[provider.mine]\nargs = [\"{prompt_file}\"]\n");
    assert!(
        text.contains("tdd.toml:1:1: missing key `command`: `mine` is not a built-in"),
        "{text}"
    );
}

#[test]
fn aider_is_refused_as_a_verifier() {
    let text = rendered("[conductor]\nverifier_provider = \"aider\"\n");
    assert!(
        text.contains("tdd.toml:2:1: `aider` cannot be a verifier"),
        "{text}"
    );
    // The verifier defaults to the provider.
    let text = rendered("[conductor]\nprovider = \"aider\"\n");
    assert!(text.contains("`aider` cannot be a verifier"), "{text}");
    parse("[conductor]\nprovider = \"aider\"\nverifier_provider = \"codex\"\n")
        .expect("aider develops, codex verifies");
}
