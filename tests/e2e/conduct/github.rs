//! `tdd conduct` against a fake GitHub on loopback (wiremock with a stateful responder
//! that records every request) and a bare repository as the `origin` remote.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;

use serde_json::Value;
use serde_json::json;
use wiremock::Mock;
use wiremock::MockServer;
use wiremock::Request;
use wiremock::Respond;
use wiremock::ResponseTemplate;

use super::resume::ISSUE_TWO;
use super::resume::project_two;
use super::*;
use crate::support::Env;
use crate::support::code;

pub(super) const TOKEN: &str = "ghp_FAKE0token0for0tests0Zq7xW";
const REPO: &str = "/repos/acme/calc";

/// One request as the fake saw it.
#[derive(Debug, Clone)]
pub(super) struct Seen {
    method: String,
    /// The path with its query.
    path: String,
    body: String,
    authorized: bool,
}

impl Seen {
    pub(super) fn line(&self) -> String {
        format!(
            "{} {}",
            self.method,
            self.path.split('?').next().unwrap_or("")
        )
    }
}

#[derive(Debug, Default)]
pub(super) struct State {
    issue: Value,
    pub(super) comments: Vec<(u64, String)>,
    pub(super) pulls: Vec<Value>,
    statuses: Vec<Value>,
    labels: Vec<String>,
    next_id: u64,
    /// Answered in order to the requests matching `method path-prefix`, once each,
    /// with a `Retry-After` header when given.
    faults: VecDeque<(String, String, u16, Option<u64>)>,
    /// Answered to every request.
    deny: Option<u16>,
    /// The `X-OAuth-Scopes` of the token, when it is a classic one.
    scopes: Option<String>,
    seen: Vec<Seen>,
}

#[derive(Clone)]
struct Fake(Arc<Mutex<State>>);

fn reply(status: u16, body: Value) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(body)
}

impl Respond for Fake {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mut s = self.0.lock().expect("state");
        let method = request.method.to_string();
        let path = match request.url.query() {
            Some(q) => format!("{}?{q}", request.url.path()),
            None => request.url.path().to_string(),
        };
        let authorized = request
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            == Some(format!("Bearer {TOKEN}").as_str());
        s.seen.push(Seen {
            method: method.clone(),
            path: path.clone(),
            body: String::from_utf8_lossy(&request.body).into_owned(),
            authorized,
        });
        if let Some(status) = s.deny {
            return reply(status, json!({ "message": "Bad credentials" }));
        }
        if let Some(i) = s
            .faults
            .iter()
            .position(|(m, p, _, _)| *m == method && path.starts_with(p.as_str()))
        {
            let (_, _, status, retry_after) = s.faults.remove(i).expect("fault");
            let answer = reply(
                status,
                json!({ "message": "You have exceeded a secondary rate limit" }),
            );
            return match retry_after {
                Some(secs) => answer.insert_header("retry-after", secs.to_string().as_str()),
                None => answer,
            };
        }
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        route(&mut s, &method, &path, &body)
    }
}

fn route(s: &mut State, method: &str, path: &str, body: &Value) -> ResponseTemplate {
    let (bare, query) = path.split_once('?').unwrap_or((path, ""));
    let rest = bare.strip_prefix(REPO).unwrap_or("/unknown");
    let parts: Vec<&str> = rest.split('/').skip(1).collect();
    match (method, parts.as_slice()) {
        ("GET", []) => {
            let answer = reply(
                200,
                json!({ "default_branch": "main", "private": true, "permissions": { "pull": true, "push": true } }),
            );
            match &s.scopes {
                Some(scopes) => answer.insert_header("x-oauth-scopes", scopes.as_str()),
                None => answer,
            }
        }
        ("GET", ["issues"]) => reply(200, json!([])),
        ("GET", ["issues", "1"]) => {
            let mut issue = s.issue.clone();
            issue["labels"] = json!(
                s.labels
                    .iter()
                    .map(|l| json!({ "name": l }))
                    .collect::<Vec<_>>()
            );
            reply(200, issue)
        }
        ("GET", ["issues", "1", "comments"]) => {
            let page = if query.contains("page=1") {
                s.comments.clone()
            } else {
                Vec::new()
            };
            let list: Vec<Value> = page
                .iter()
                .map(|(id, b)| json!({ "id": id, "body": b }))
                .collect();
            reply(200, json!(list))
        }
        ("POST", ["issues", "1", "comments"]) => {
            s.next_id += 1;
            let id = 1000 + s.next_id;
            let text = body["body"].as_str().unwrap_or_default().to_string();
            s.comments.push((id, text.clone()));
            reply(201, json!({ "id": id, "body": text }))
        }
        ("PATCH", ["issues", "comments", id]) => {
            let id: u64 = id.parse().unwrap_or(0);
            match s.comments.iter_mut().find(|(c, _)| *c == id) {
                Some(comment) => {
                    comment.1 = body["body"].as_str().unwrap_or_default().to_string();
                    reply(200, json!({ "id": id, "body": comment.1 }))
                }
                None => reply(404, json!({ "message": "Not Found" })),
            }
        }
        ("POST", ["issues", "1", "labels"]) => {
            for l in body["labels"].as_array().into_iter().flatten() {
                s.labels.push(l.as_str().unwrap_or_default().to_string());
            }
            reply(200, json!([]))
        }
        ("DELETE", ["issues", "1", "labels", name]) => {
            let name = name.replace("%3A", ":");
            s.labels.retain(|l| *l != name);
            reply(200, json!([]))
        }
        ("GET", ["pulls"]) => {
            let head = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("head="))
                .unwrap_or_default()
                .replace("%3A", ":");
            let found: Vec<Value> = s
                .pulls
                .iter()
                .filter(|p| format!("acme:{}", p["head"]["ref"].as_str().unwrap_or("")) == head)
                .cloned()
                .collect();
            reply(200, json!(found))
        }
        ("GET", ["pulls", n]) => match s
            .pulls
            .iter()
            .find(|p| p["number"].as_u64() == n.parse().ok())
        {
            Some(pr) => reply(200, pr.clone()),
            None => reply(404, json!({ "message": "Not Found" })),
        },
        ("POST", ["pulls"]) => {
            let number = s.pulls.len() as u64 + 7;
            let pr = json!({
                "number": number, "html_url": format!("https://github.example/acme/calc/pull/{number}"),
                "title": body["title"], "body": body["body"], "draft": body["draft"],
                "head": { "ref": body["head"] }, "base": { "ref": body["base"] },
            });
            s.pulls.push(pr.clone());
            reply(201, pr)
        }
        ("PATCH", ["pulls", n]) => match s
            .pulls
            .iter_mut()
            .find(|p| p["number"].as_u64() == n.parse().ok())
        {
            Some(pr) => {
                pr["title"] = body["title"].clone();
                pr["body"] = body["body"].clone();
                reply(200, pr.clone())
            }
            None => reply(404, json!({ "message": "Not Found" })),
        },
        ("POST", ["statuses", sha]) => {
            s.statuses
                .push(json!({ "sha": sha, "state": body["state"], "context": body["context"] }));
            reply(201, json!({ "id": 1 }))
        }
        _ => reply(
            404,
            json!({ "message": format!("no route for {method} {path}") }),
        ),
    }
}

/// A fake GitHub serving issue #1 of acme/calc, and the runtime that keeps it.
pub(super) struct GitHub {
    runtime: tokio::runtime::Runtime,
    server: MockServer,
    fake: Fake,
}

impl GitHub {
    pub(super) fn start(issue_markdown: &str) -> GitHub {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let (title, body) = issue_markdown
            .strip_prefix("# ")
            .and_then(|t| t.split_once('\n'))
            .expect("an issue with a title");
        let fake = Fake(Arc::new(Mutex::new(State {
            issue: json!({ "number": 1, "title": title, "body": body.trim() }),
            labels: vec!["enhancement".into()],
            ..State::default()
        })));
        let server = runtime.block_on(async {
            let server = MockServer::start().await;
            Mock::given(wiremock::matchers::any())
                .respond_with(fake.clone())
                .mount(&server)
                .await;
            server
        });
        GitHub {
            runtime,
            server,
            fake,
        }
    }

    pub(super) fn uri(&self) -> String {
        self.server.uri()
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.fake.0.lock().expect("state")
    }

    pub(super) fn seen(&self) -> Vec<Seen> {
        self.state().seen.clone()
    }

    fn writes(&self) -> Vec<Seen> {
        self.seen()
            .into_iter()
            .filter(|s| s.method != "GET")
            .collect()
    }

    fn fail(&self, method: &str, path: &str, status: u16, retry_after: Option<u64>, times: usize) {
        let mut s = self.state();
        for _ in 0..times {
            s.faults
                .push_back((method.into(), format!("{REPO}{path}"), status, retry_after));
        }
    }

    fn count(&self, line: &str) -> usize {
        self.seen().iter().filter(|s| s.line() == line).count()
    }

    fn clear_seen(&self) {
        self.state().seen.clear();
    }
}

impl Drop for GitHub {
    fn drop(&mut self) {
        // The server's pool is returned on the runtime that made it.
        let _entered = self.runtime.enter();
    }
}

/// An environment whose `origin` is a bare repository and whose GitHub is `github`.
pub(super) fn github_env(github: &GitHub) -> (Env, tempfile::TempDir) {
    let env = Env::new()
        .with_env("GITHUB_TOKEN", TOKEN)
        .with_env("GITHUB_API_URL", &github.uri());
    let origin = tempfile::tempdir().expect("origin");
    git_in(origin.path(), &["init", "-q", "--bare", "-b", "main"]);
    env.git(&[
        "remote",
        "add",
        "origin",
        origin.path().to_str().expect("utf-8"),
    ]);
    (env, origin)
}

fn conduct(env: &Env) -> (i32, Value) {
    env.json(&[
        "conduct",
        "1",
        "--forge",
        "github",
        "--repo",
        "acme/calc",
        "--state-labels",
    ])
}

fn assert_no_token_anywhere(github: &GitHub, env: &Env, value: &Value) {
    for seen in github.seen() {
        assert!(
            seen.authorized,
            "{} {} was not authorized",
            seen.method, seen.path
        );
        assert!(
            !seen.body.contains(TOKEN),
            "the token in {} {}",
            seen.method,
            seen.path
        );
        assert!(!seen.path.contains(TOKEN), "the token in a path");
    }
    assert!(
        !value.to_string().contains(TOKEN),
        "the token in the envelope"
    );
    // The ledger home holds the run directory (trace.jsonl, leaf files and their
    // recorded environments) and the ledger itself.
    for (path, text) in files_under(env.ledger_home.path()) {
        assert!(!text.contains(TOKEN), "the token in {}", path.display());
    }
}

#[test]
fn a_two_step_issue_on_github_gets_comments_a_draft_pr_statuses_and_the_branch() {
    let github = GitHub::start(ISSUE_TWO);
    let (env, origin) = github_env(&github);
    project_two(&env, "");
    // Programs the repository's configuration names for a push, each leaving a mark if
    // started: the push carries the token in its environment, so none may start.
    let mark = env.home.path().join("started");
    let script = |name: &str, then: &str| {
        let path = env.home.path().join(name);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh
echo {name} >> '{}'
{then}
",
                mark.display()
            ),
        )
        .expect("script");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .expect("chmod");
        path.display().to_string()
    };
    let hooks = env.root().join(".git/hooks");
    std::fs::create_dir_all(&hooks).expect("hooks");
    std::fs::copy(script("pre-push", "exit 0"), hooks.join("pre-push")).expect("hook");
    env.git(&[
        "config",
        "remote.origin.receivepack",
        &script("receive-pack", "exec git-receive-pack \"$@\""),
    ]);
    let (code, value) = conduct(&env);
    assert_eq!(code, 0, "{value}");
    assert!(
        !mark.exists(),
        "{:?}",
        std::fs::read_to_string(&mark).unwrap_or_default()
    );
    let seen = github.seen();
    let lines: Vec<String> = seen.iter().map(Seen::line).collect();
    assert_eq!(lines[0], format!("GET {REPO}/issues/1"), "{lines:#?}");
    let position = |line: &str| {
        lines
            .iter()
            .position(|l| l == line)
            .unwrap_or_else(|| panic!("no {line} in {lines:#?}"))
    };
    let post_comment = position(&format!("POST {REPO}/issues/1/comments"));
    let patch_comment = lines
        .iter()
        .position(|l| l.starts_with(&format!("PATCH {REPO}/issues/comments/")))
        .expect("a comment edited in place");
    let post_pull = position(&format!("POST {REPO}/pulls"));
    let patch_pull = lines
        .iter()
        .position(|l| l.starts_with(&format!("PATCH {REPO}/pulls/")))
        .expect("the PR updated");
    let post_status = lines
        .iter()
        .position(|l| l.starts_with(&format!("POST {REPO}/statuses/")))
        .expect("a status");
    assert!(
        post_comment < post_status && post_status < post_pull && post_pull < patch_pull,
        "{lines:#?}"
    );
    assert!(post_comment < patch_comment, "{lines:#?}");
    let state = github.state();
    // One run comment and one comment per step, each carrying its marker.
    assert_eq!(state.comments.len(), 3, "{:#?}", state.comments);
    for key in ["run", "step-1", "step-2"] {
        assert!(
            state
                .comments
                .iter()
                .any(|(_, b)| b.ends_with(&format!("<!-- tdd-conduct:{key} -->"))),
            "{key}"
        );
    }
    assert!(
        state.comments[0].1.contains("**Status:** done"),
        "{}",
        state.comments[0].1
    );
    // One draft PR, opened as a draft and never made ready; "Closes" only at the end.
    assert_eq!(state.pulls.len(), 1);
    let pr = &state.pulls[0];
    assert_eq!(pr["draft"], true);
    let opened = seen
        .iter()
        .find(|s| s.line() == format!("POST {REPO}/pulls"))
        .expect("opened");
    let opened: Value = serde_json::from_str(&opened.body).expect("json");
    assert_eq!(opened["draft"], true);
    assert!(
        !opened["body"]
            .as_str()
            .unwrap_or_default()
            .contains("Closes #1"),
        "{opened}"
    );
    assert!(
        pr["body"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Closes #1."),
        "{pr}"
    );
    for s in seen
        .iter()
        .filter(|s| s.method == "PATCH" && s.path.contains("/pulls/"))
    {
        let body: Value = serde_json::from_str(&s.body).expect("json");
        assert!(
            body.get("draft").is_none() && body.get("state").is_none(),
            "{body}"
        );
    }
    assert!(!lines.iter().any(|l| l.contains("/merge")), "{lines:#?}");
    assert_eq!(value["data"]["pr"], pr["html_url"]);
    // A success status for each phase of each step, on commits of the branch.
    let contexts: Vec<String> = state
        .statuses
        .iter()
        .map(|s| {
            format!(
                "{}={}",
                s["context"].as_str().unwrap_or(""),
                s["state"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        contexts,
        [
            "tdd/red=success",
            "tdd/green=success",
            "tdd/refactor=success"
        ]
        .repeat(2),
        "{contexts:?}"
    );
    assert_eq!(state.labels, ["enhancement", "tdd:done"]);
    drop(state);
    // The branch arrived in the bare remote, with every phase commit.
    let branch = value["data"]["branch"].as_str().expect("branch");
    let remote_log = git_in(origin.path(), &["log", "--format=%H", branch]);
    let local_log = env.git(&["log", "--format=%H", branch]);
    assert_eq!(remote_log, local_log);
    for status in &github.state().statuses {
        assert!(remote_log.contains(status["sha"].as_str().expect("sha")));
    }
    assert_no_token_anywhere(&github, &env, &value);
    let trace = std::fs::read_to_string(
        PathBuf::from(value["data"]["dir"].as_str().expect("dir")).join("trace.jsonl"),
    )
    .expect("trace");
    let http: Vec<&str> = trace.lines().filter(|l| l.contains("\"http\"")).collect();
    assert!(
        !http.is_empty(),
        "no http span in the trace: {}",
        &trace[..trace.len().min(3000)]
    );

    // A second conduct of the finished issue posts nothing new.
    github.clear_seen();
    let (code, again) = conduct(&env);
    assert_eq!(code, 0, "{again}");
    assert_eq!(
        github.writes().iter().map(Seen::line).collect::<Vec<_>>(),
        Vec::<String>::new()
    );
    assert_no_token_anywhere(&github, &env, &again);
}

/// A one-step project whose planner also runs `planner_runs` (TOML `[[leaf.do]]`
/// entries); the issue is `ISSUE_ONE` on the fake.
fn one_step(env: &Env, planner_runs: &str) {
    project(env, &fixture(&good_planner(planner_runs), GOOD_VERIFIER));
}

#[test]
fn a_stopped_run_resumed_reuses_its_comments_and_pr_and_posts_nothing_twice() {
    let github = GitHub::start(ISSUE_ONE);
    let (env, _origin) = github_env(&github);
    // The planner prints its environment, then asks for a stop.
    one_step(
        &env,
        "[[leaf.do]]\naction = \"run\"\nargv = [\"env\"]\n[[leaf.do]]\naction = \"run\"\nargv = [\"tdd\", \"stop\", \"--mode\", \"at-ledger\"]\n",
    );
    let (code, value) = conduct(&env);
    assert_eq!(code, 5, "{value}");
    assert_eq!(github.count(&format!("POST {REPO}/pulls")), 1);
    let first: Vec<String> = github.writes().iter().map(Seen::line).collect();
    github.clear_seen();
    let (code, value) = conduct(&env);
    assert_eq!(code, 0, "{value}");
    let lines: Vec<String> = github.writes().iter().map(Seen::line).collect();
    // The run comment, the stop comment and the PR are edited, never posted again;
    // only step 1's comment is new.
    assert_eq!(github.count(&format!("POST {REPO}/pulls")), 0, "{lines:#?}");
    assert_eq!(
        github.count(&format!("POST {REPO}/issues/1/comments")),
        1,
        "{lines:#?}"
    );
    let state = github.state();
    assert_eq!(state.comments.len(), 3, "{first:#?}\n{lines:#?}");
    assert_eq!(state.pulls.len(), 1);
    drop(state);
    // The planner's environment was recorded, and it holds no token.
    let outputs = files_of(&ledger_dir(&value).join("leaves"), "planner-", "stdout.log");
    assert!(outputs.iter().any(|o| o.contains("PATH=")), "{outputs:?}");
    for output in &outputs {
        assert!(
            !output.contains("GITHUB_TOKEN") && !output.contains("TDD_GIT_TOKEN"),
            "{output}"
        );
    }
    assert_no_token_anywhere(&github, &env, &value);
}

#[test]
fn a_502_and_a_secondary_rate_limit_are_retried_and_recorded() {
    let github = GitHub::start(ISSUE_ONE);
    let (env, _origin) = github_env(&github);
    one_step(&env, "");
    github.fail("GET", "/issues/1", 403, Some(1), 1);
    github.fail("POST", "/pulls", 502, None, 1);
    let (code, value) = conduct(&env);
    assert_eq!(code, 0, "{value}");
    assert_eq!(
        github.count(&format!("GET {REPO}/issues/1")),
        2,
        "{:#?}",
        github.seen().iter().map(Seen::line).collect::<Vec<_>>()
    );
    assert_eq!(github.count(&format!("POST {REPO}/pulls")), 2);
    assert_eq!(github.state().pulls.len(), 1);
    let trace = std::fs::read_to_string(
        PathBuf::from(value["data"]["dir"].as_str().expect("dir")).join("trace.jsonl"),
    )
    .expect("trace");
    assert!(
        trace
            .lines()
            .any(|l| l.contains("\"http call failed\"") && l.contains("502")),
        "the 502 is traced"
    );
    // The ledger records the retry (its database holds the payloads as text).
    let recorded = files_under(env.ledger_home.path())
        .into_iter()
        .any(|(_, text)| text.contains("forge_retry") && text.contains("HTTP 502"));
    assert!(recorded, "no forge_retry event in the ledger");
}

#[test]
fn a_401_bails_forge_denied_with_exit_4_and_changes_nothing() {
    let github = GitHub::start(ISSUE_ONE);
    let (env, _origin) = github_env(&github);
    one_step(&env, "");
    github.state().deny = Some(401);
    let head = env.git(&["rev-parse", "HEAD"]);
    let (code, value) = conduct(&env);
    assert_eq!(code, 4, "{value}");
    assert_eq!(value["error"]["reason"], "forge_denied");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("401"), "{message}");
    assert!(
        value["error"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("GITHUB_TOKEN")
    );
    assert_eq!(env.git(&["rev-parse", "HEAD"]), head);
    assert_eq!(github.seen().len(), 1, "a 401 is not retried");
    assert_no_token_anywhere(&github, &env, &value);
}

#[test]
fn github_down_after_a_step_bails_and_the_next_run_publishes_the_kept_work() {
    let github = GitHub::start(ISSUE_ONE);
    let (env, origin) = github_env(&github);
    one_step(&env, "");
    // Every attempt of the first status fails.
    github.fail("POST", "/statuses/", 503, None, 4);
    let (code, value) = conduct(&env);
    assert_eq!(code, 4, "{value}");
    assert_eq!(value["error"]["reason"], "forge_unreachable");
    // The step's commits are kept and were pushed.
    let subjects_now = subjects(env.root());
    assert_eq!(
        subjects_now.last().map(String::as_str),
        Some("refactor: subtraction")
    );
    let (code, value) = conduct(&env);
    assert_eq!(code, 0, "{value}");
    let branch = value["data"]["branch"].as_str().expect("branch");
    assert_eq!(
        git_in(origin.path(), &["rev-parse", branch]),
        env.git(&["rev-parse", branch])
    );
    assert_eq!(github.state().statuses.len(), 3);
    assert!(
        github.state().pulls[0]["body"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Closes #1.")
    );
}

#[test]
fn doctor_names_the_scopes_a_classic_token_lacks() {
    let github = GitHub::start(ISSUE_ONE);
    let env = Env::new()
        .with_env("GITHUB_TOKEN", TOKEN)
        .with_env("GITHUB_API_URL", &github.uri());
    env.git(&["remote", "add", "origin", "git@github.com:acme/calc.git"]);
    let check = |value: &Value| {
        value["data"]["checks"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["check"] == "forge.github acme/calc"))
            .cloned()
            .unwrap_or_else(|| panic!("no forge.github check: {value}"))
    };
    github.state().scopes = Some("read:org, gist".into());
    let (_, value) = env.json(&["doctor"]);
    let lacking = check(&value);
    assert_eq!(lacking["ok"], false, "{lacking}");
    assert!(
        lacking["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("missing: repo"),
        "{lacking}"
    );
    github.state().scopes = Some("repo, read:org".into());
    let (_, value) = env.json(&["doctor"]);
    assert_eq!(check(&value)["ok"], true, "{value}");
    assert!(!value.to_string().contains(TOKEN));
    assert!(
        github
            .seen()
            .iter()
            .all(|s| s.authorized && s.method == "GET")
    );
}

/// The `forge_ms` of each `step_done` progress event of a conduct's stderr.
fn forge_ms(stderr: &[u8]) -> Vec<u64> {
    String::from_utf8_lossy(stderr)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let found = |v: &Value| v["forge_ms"].as_u64();
            found(&v).or_else(|| found(&v["data"]))
        })
        .collect()
}

/// Measures the forge's part of each step, GitHub (on the fake, answering at once)
/// against local files, and the requests per step. Prints; run by hand with
/// `cargo test --test e2e measure_forge -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
#[allow(clippy::print_stdout, reason = "a measurement prints what it measured")]
fn measure_forge_time_and_requests_per_step() {
    let local = Env::new();
    let issue = project_two(&local, "");
    let out = local
        .tdd()
        .args(["conduct", &issue, "--json"])
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0);
    let local_ms = forge_ms(&out.stderr);
    let github = GitHub::start(ISSUE_TWO);
    let (env, _origin) = github_env(&github);
    project_two(&env, "");
    let out = env
        .tdd()
        .args([
            "conduct",
            "1",
            "--forge",
            "github",
            "--repo",
            "acme/calc",
            "--json",
        ])
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0);
    let github_ms = forge_ms(&out.stderr);
    let envelope: Value = serde_json::from_slice(&out.stdout).expect("envelope");
    let trace = std::fs::read_to_string(
        PathBuf::from(envelope["data"]["dir"].as_str().expect("dir")).join("trace.jsonl"),
    )
    .expect("trace");
    for line in trace
        .lines()
        .filter(|l| l.contains("\"http call\"") || l.contains("git push ended"))
    {
        let v: Value = serde_json::from_str(line).expect("json");
        println!("{} {} {}", v["timestamp"], v["span"], v["fields"]);
    }
    let seen = github.seen();
    let writes = seen.iter().filter(|s| s.method != "GET").count();
    let reads = seen.len() - writes;
    let per_step: Vec<String> = seen.iter().map(Seen::line).collect();
    println!("local forge_ms per step: {local_ms:?}");
    println!("github forge_ms per step: {github_ms:?}");
    println!(
        "requests in all: {} ({writes} writes, {reads} reads)",
        seen.len()
    );
    println!("{per_step:#?}");
}

#[test]
fn an_issue_without_criteria_bails_needs_user_with_the_question_on_the_thread() {
    let github = GitHub::start("# Subtraction\n\nUsers need to subtract.\n");
    let (env, _origin) = github_env(&github);
    one_step(&env, "");
    let head = env.git(&["rev-parse", "HEAD"]);
    let (code, value) = conduct(&env);
    assert_eq!(code, 4, "{value}");
    assert_eq!(value["error"]["reason"], "needs_user");
    let state = github.state();
    assert_eq!(state.comments.len(), 1, "{:?}", state.comments);
    assert!(
        state.comments[0].1.contains("names no acceptance criteria"),
        "{}",
        state.comments[0].1
    );
    assert!(state.pulls.is_empty());
    drop(state);
    assert_eq!(env.git(&["rev-parse", "HEAD"]), head);
}

#[test]
fn a_token_in_the_issue_or_in_a_leaf_verdict_is_posted_redacted() {
    let issue = ISSUE_TWO
        .replace(
            "# Subtraction and negation",
            &format!("# Subtraction and negation {TOKEN}"),
        )
        .replace("returns 3", &format!("returns 3, see {TOKEN}"));
    let github = GitHub::start(&issue);
    let (env, _origin) = github_env(&github);
    super::resume::project_two_rejecting(&env, &format!("sub is undocumented; {TOKEN}"));
    let (code, value) = conduct(&env);
    assert_eq!(code, 0, "{value}");
    let posted: Vec<Seen> = github.writes();
    for seen in &posted {
        assert!(!seen.body.contains(TOKEN), "the token in {}", seen.line());
    }
    let redacted = |marker: &str, text: &str| {
        posted
            .iter()
            .any(|s| s.body.contains(marker) && s.body.contains(&format!("{text}{}", "[redacted]")))
    };
    // The verifier's reason reaches step 1's comment, the issue's criterion the run
    // comment, and the title the PR: each with the token replaced.
    assert!(
        redacted("tdd-conduct:step-1", "sub is undocumented; "),
        "{:#?}",
        posted.iter().map(|s| &s.body).collect::<Vec<_>>()
    );
    assert!(
        redacted("tdd-conduct:run", "returns 3, see "),
        "{:#?}",
        posted.iter().map(|s| &s.body).collect::<Vec<_>>()
    );
    let pr = &github.state().pulls[0];
    let title = pr["title"].as_str().unwrap_or_default();
    assert!(!title.contains(TOKEN), "{title}");
    assert!(
        !value.to_string().contains(TOKEN),
        "the token in the envelope"
    );
}
