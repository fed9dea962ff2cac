//! `[sandbox] enabled = true`: a hostile developer and a hostile verifier, played by
//! the scripted provider, try to reach git's internals, another work tree and the
//! user's credentials; every attempt fails and the honest work still completes.

use super::*;
use crate::support::Env;

const CREDENTIAL: &str = "https://user:s3cret-credential@example.invalid";
const GH_TOKEN: &str = "gho_plantedHostsToken";
/// Python that adds a table to the SQLite database named by its first argument.
const SQL: &str = "'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"create table hostile(x)\"); c.commit()'";

/// A shell script that tries every escape and never fails itself.
fn hostile(root: &Path, other: &Path, ledger_home: &Path, sleep: u32) -> String {
    let other = other.display();
    let ledgers = format!("{}/repos/*", ledger_home.display());
    [
        "echo '#!/bin/sh' > .git/hooks/pre-commit".to_string(),
        "echo hostile >> .git/info/exclude".to_string(),
        "git config core.hooksPath /tmp/evil".to_string(),
        "git update-index --assume-unchanged tests/add.rs".to_string(),
        "git commit -q --amend --allow-empty -m hacked".to_string(),
        format!("echo planted > {other}/planted"),
        "cat \"$HOME/.git-credentials\" > \"$TMPDIR/../leak-credentials\"".to_string(),
        "cat \"$HOME/.config/gh/hosts.yml\" > \"$TMPDIR/../leak-hosts\"".to_string(),
        format!("for db in {ledgers}/ledger.sqlite3; do python3 -c {SQL} \"$db\"; done"),
        format!("cat {ledgers}/leaves/*/stdout > \"$TMPDIR/../leak-outputs\""),
        format!("(setsid sleep {sleep} > /dev/null 2>&1 &)"),
        // A verifier judges its own worktree; the developers' tree is not for it.
        format!(
            "if [ \"$TDD_ROLE\" = verifier ]; then cat {}/src/lib.rs {}/.gitignore > \"$TMPDIR/../leak-tree\" 2> /dev/null; fi",
            root.display(),
            root.display()
        ),
        "true".to_string(),
    ]
    .join("; ")
}

pub(super) fn run_hostile(script: &str) -> String {
    let script = script.replace('\\', "\\\\").replace('"', "\\\"");
    format!("[[leaf.do]]\naction = \"run\"\nargv = [\"sh\", \"-c\", \"{script}\"]\n")
}

/// The one-step project with confinement on (`extra` appended to `[sandbox]`), a
/// hostile script first in the RED developer and the verifier, credentials planted in
/// the home directory, and another work tree beside it; the issue and that work tree.
fn hostile_project(env: &Env, extra: &str, sleep: u32) -> (String, tempfile::TempDir) {
    let other = tempfile::tempdir().expect("other work tree");
    let script = run_hostile(&hostile(
        env.root(),
        other.path(),
        env.ledger_home.path(),
        sleep,
    ));
    let verifier = GOOD_VERIFIER.replace(
        "role = \"verifier\"\n",
        &format!("role = \"verifier\"\n{script}"),
    );
    let fixture = fixture(&good_planner(""), &verifier).replacen(
        "phase = \"red\"\n",
        &format!("phase = \"red\"\n{script}"),
        1,
    );
    let issue = project(env, &fixture);
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    env.write(
        "tdd.toml",
        &format!("{config}\n[sandbox]\nenabled = true\n{extra}"),
    );
    env.commit_all("confine leaves");
    std::fs::write(env.home.path().join(".git-credentials"), CREDENTIAL).expect("plant");
    std::fs::create_dir_all(env.home.path().join(".config/gh")).expect("mkdir");
    std::fs::write(
        env.home.path().join(".config/gh/hosts.yml"),
        format!("github.com:\n    oauth_token: {GH_TOKEN}\n"),
    )
    .expect("plant");
    (issue, other)
}

/// The sandbox level `tdd leaves show` gives each leaf `tdd leaves` lists, by id.
fn levels(env: &Env) -> Vec<(String, String)> {
    let (code, listed) = env.json(&["leaves"]);
    assert_eq!(code, 0, "{listed}");
    let ids: Vec<String> = listed["data"]["leaves"]
        .as_array()
        .expect("leaves")
        .iter()
        .filter_map(|l| l["id"].as_str().map(String::from))
        .collect();
    ids.into_iter()
        .map(|id| {
            let (code, shown) = env.json(&["leaves", "show", &id]);
            assert_eq!(code, 0, "{shown}");
            let level = shown["data"]["sandbox"]
                .as_str()
                .unwrap_or("absent")
                .to_string();
            (id, level)
        })
        .collect()
}

/// Whether a `sleep SECS` the hostile script left is still running (each test sleeps
/// its own number of seconds, so tests running at once do not see each other's).
fn sleeper_alive(secs: u32) -> bool {
    let secs = secs.to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|p| {
        std::fs::read(p.path().join("cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == secs.as_bytes()))
            && std::fs::read_to_string(p.path().join("stat")).is_ok_and(|s| !s.contains(") Z "))
    })
}

/// Conducts `issue` and checks what every confined hostile run must show: exit 0; the
/// honest commits and no other; git's internals, the other tree, the ledger and the
/// credentials untouched; no process left (the script's `sleep SECS`); every leaf
/// confined. Returns the envelope.
fn conduct_confined(env: &Env, issue: &str, other: &Path, sleep: u32) -> Value {
    let exclude_before =
        std::fs::read_to_string(env.root().join(".git/info/exclude")).unwrap_or_default();
    let (code, value) = env.json(&["conduct", issue]);
    assert_eq!(code, 0, "{value}");
    // The honest work is there, as the engine committed it.
    let log = subjects(env.root());
    assert_eq!(log[log.len() - 3..], STEP_ONE[1..], "{log:?}");
    assert!(!log.iter().any(|s| s == "hacked"), "{log:?}");
    // Nothing of git's changed.
    assert!(!env.root().join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(env.root().join(".git/info/exclude")).unwrap_or_default(),
        exclude_before
    );
    let hooks = std::process::Command::new("git")
        .args(["config", "--get", "core.hooksPath"])
        .current_dir(env.root())
        .output()
        .expect("git");
    assert!(hooks.stdout.is_empty(), "core.hooksPath was set");
    let flags = env.git(&["ls-files", "-v"]);
    assert!(
        flags
            .lines()
            .all(|l| !l.starts_with(|c: char| c.is_ascii_lowercase())),
        "{flags}"
    );
    // Nothing in the other work tree, no credential anywhere tdd keeps files.
    assert!(!other.join("planted").exists());
    for (path, text) in files_under(env.ledger_home.path()) {
        assert!(
            !text.contains("s3cret-credential") && !text.contains(GH_TOKEN),
            "a credential reached {}",
            path.display()
        );
    }
    // The ledger is intact and holds nothing of theirs; the leaves read no other
    // leaf's output; no process of theirs is left.
    let (code, verified) = env.json(&["ledger", "verify"]);
    assert_eq!(code, 0, "{verified}");
    let mut leaks = 0;
    for (path, text) in files_under(env.ledger_home.path()) {
        if path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("leak-"))
        {
            leaks += 1;
            assert!(text.is_empty(), "{} holds {text}", path.display());
        }
        if path.extension().is_some_and(|e| e == "sqlite3") {
            let tables = std::process::Command::new("python3")
                .args([
                    "-c",
                    "import sqlite3,sys; print([r[0] for r in sqlite3.connect(sys.argv[1]).execute('select name from sqlite_master')])",
                ])
                .arg(&path)
                .output()
                .expect("python3");
            let tables = String::from_utf8_lossy(&tables.stdout).into_owned();
            assert!(!tables.contains("hostile"), "{tables}");
        }
    }
    // The leaves' attempts left their (empty) files beside their own: the check above
    // looked at what they got.
    assert!(leaks > 0, "no leaf left the files its attempts wrote");
    assert!(!sleeper_alive(sleep), "a leaf's process outlived it");
    // No leaf's private home or temporary directory outlived it.
    let repos = env.ledger_home.path().join("repos");
    for repo in std::fs::read_dir(&repos).expect("repos").flatten() {
        let Ok(leaves) = std::fs::read_dir(repo.path().join("leaf-files")) else {
            continue;
        };
        for leaf in leaves.flatten() {
            for kept in ["home", "tmp"] {
                let path = leaf.path().join(kept);
                assert!(!path.exists(), "{} outlived its leaf", path.display());
            }
        }
    }
    // Every leaf says what it ran under.
    for (id, level) in levels(env) {
        assert!(level.starts_with("landlock-v"), "{id}: {level}");
    }
    value
}

#[test]
fn confined_leaves_cannot_reach_git_other_trees_or_credentials_and_the_run_completes() {
    let env = Env::new();
    let (issue, other) = hostile_project(&env, "", 3141);
    let value = conduct_confined(&env, &issue, other.path(), 3141);
    let levels = levels(&env);
    assert!(levels.len() >= 3, "{levels:?}");
    // And the draft PR says so.
    let pr = read(&value["data"]["pr"]);
    let line = pr
        .lines()
        .find(|l| l.starts_with("**Sandbox:**"))
        .unwrap_or_else(|| panic!("no sandbox line in {pr}"));
    assert!(
        line.contains(&format!("{} leaves landlock-v", levels.len())),
        "{line}"
    );
}

#[test]
fn without_landlock_the_run_records_none_and_require_refuses_to_start() {
    let env = Env::new().with_env("TDD_SANDBOX_NO_LANDLOCK", "1");
    let (issue, _other) = hostile_project(&env, "", 3143);
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    let levels = levels(&env);
    assert!(!levels.is_empty());
    for (id, level) in &levels {
        assert_eq!(level, "none", "{id}");
    }

    let env = Env::new().with_env("TDD_SANDBOX_NO_LANDLOCK", "1");
    let (issue, _other) = hostile_project(&env, "require = true\n", 3144);
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 4, "{value}");
    assert!(
        value
            .to_string()
            .contains("sandbox required but unavailable"),
        "{value}"
    );
    // No leaf ran: the repository is as the user left it.
    assert_eq!(
        subjects(env.root()).last().map(String::as_str),
        Some("confine leaves")
    );
}

/// A `command` provider: one shell script plays every role, trying every escape
/// first (leaving a `setsid sleep SECS` behind: each test its own `sleep`, since tests
/// run side by side and each looks for its own) and then doing the honest work its
/// role and phase ask for.
fn command_agent(env: &Env, other: &Path, sleep: u32) -> PathBuf {
    let home = env.home.path();
    for (path, text) in [
        ("agent/plan.md", PLAN_ONE.to_string()),
        ("agent/sub.rs", TEST.to_string()),
        ("agent/stub.rs", format!("{LIB}{STUB}")),
        ("agent/impl.rs", format!("{LIB}{IMPL}")),
    ] {
        let path = home.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let agent = home.join("agent");
    let a = agent.display();
    let script = format!(
        "#!/bin/sh\n{}\ncase \"$TDD_ROLE/$TDD_PHASE\" in\n\
         planner/*) cp {a}/plan.md .tdd/issue-1.md ;;\n\
         developer/red) cp {a}/sub.rs tests/sub.rs && cp {a}/stub.rs src/lib.rs ;;\n\
         developer/green) cp {a}/impl.rs src/lib.rs ;;\n\
         verifier/*) tdd test 'app::calc::sub subtracts' > /dev/null; tdd verdict accept --reason 'ran it' ;;\n\
         esac\necho done\n",
        hostile(env.root(), other, env.ledger_home.path(), sleep).replace("; ", "\n")
    );
    let path = agent.join("agent.sh");
    std::fs::write(&path, script).expect("script");
    path
}

/// The one-step project played by the hostile `command` agent in every role, with no
/// revise budget, confinement on (`sandbox` appended to `[sandbox]`), the developer's
/// RED test replaced by `test` when given, and credentials planted; the issue. The
/// agent leaves `sleep SECS` behind.
fn command_agent_project(
    env: &Env,
    other: &Path,
    (test, sleep): (Option<&str>, u32),
    sandbox: &str,
) -> String {
    let issue = project(env, &fixture(&good_planner(""), GOOD_VERIFIER));
    let agent = command_agent(env, other, sleep);
    if let Some(test) = test {
        std::fs::write(env.home.path().join("agent/sub.rs"), test).expect("test");
    }
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    let config = config
        .replace(
            "provider = \"scripted\"\nverifier_provider = \"scripted\"",
            "provider = \"agent\"\nverifier_provider = \"agent\"",
        )
        .replace("revise_budget = 1", "revise_budget = 0");
    env.write(
        "tdd.toml",
        &format!(
            "{config}\n[provider.agent]\ncommand = \"sh\"\nargs = [\"{}\"]\n\n[sandbox]\nenabled = true\n{sandbox}",
            agent.display()
        ),
    );
    env.commit_all("a command agent, confined");
    std::fs::write(env.home.path().join(".git-credentials"), CREDENTIAL).expect("plant");
    issue
}

#[test]
fn a_hostile_command_agent_in_every_role_is_confined_and_the_run_completes() {
    let env = Env::new();
    let other = tempfile::tempdir().expect("other work tree");
    let issue = command_agent_project(&env, other.path(), (None, 3142), "");
    conduct_confined(&env, &issue, other.path(), 3142);
    let levels = levels(&env);
    assert!(levels.len() >= 5, "{levels:?}");
    assert!(
        levels.iter().all(|(_, l)| l.starts_with("landlock-v")),
        "{levels:?}"
    );
}

/// The RED test as a hostile developer writes it: before its assertion, every run of it
/// (the engine's gates, the verifier's relayed `tdd test`) records its directory and
/// what it can see of identities, secrets and the user's git credentials in a file of
/// `probes` (a directory `[sandbox] write` grants), tries to write the home directory
/// and `.git`, tries to record a REJECT in the name of whoever asked for
/// the run through any relay socket it can find, and leaves a `setsid sleep SECS`
/// behind.
fn hostile_test(probes: &Path, sleep: u32) -> String {
    let tdd = assert_cmd::cargo::cargo_bin("tdd");
    let probe = format!(
        "f={probes}/run-$$; pwd > \"$f\"; env | grep -E 'TDD_LEAF|TDD_ENGINE|AWS_SECRET' >> \"$f\"\n\
         cat \"$HOME/.git-credentials\" >> \"$f\" 2> /dev/null\n\
         touch \"$HOME/planted-by-test-code\" .git/planted-by-test-code 2> /dev/null\n\
         for s in /tmp/tdd-relay-*/engine.sock \"$TDD_ENGINE_RELAY\"; do\n\
         [ -S \"$s\" ] && TDD_ENGINE_RELAY=\"$s\" {tdd} verdict reject --reason forged-by-test-code > /dev/null 2>&1\n\
         done\n\
         (setsid sleep {sleep} > /dev/null 2>&1 &)\n\
         true\n",
        probes = probes.display(),
        tdd = tdd.display()
    );
    format!(
        "#[test]\nfn subtracts() {{\n    let _ = std::process::Command::new(\"sh\").arg(\"-c\").arg({probe:?}).status();\n    assert_eq!(calc::sub(5, 2), 3);\n}}\n"
    )
}

#[test]
fn test_code_run_for_a_verifier_cannot_forge_its_verdict_see_secrets_or_outlive_the_run() {
    let env = Env::new().with_env("AWS_SECRET_ACCESS_KEY", "planted-cloud-secret");
    let other = tempfile::tempdir().expect("other work tree");
    let probes = tempfile::tempdir().expect("probes");
    let issue = command_agent_project(
        &env,
        other.path(),
        (Some(&hostile_test(probes.path(), 3146)), 3147),
        &format!("write = [{:?}]\n", probes.path().display().to_string()),
    );
    // Every verdict is the verifier's own ACCEPT, so the run completes (a forged REJECT
    // would bail it, with no revise budget), and nothing the test code started is
    // alive.
    let value = conduct_confined(&env, &issue, other.path(), 3147);
    assert!(
        !sleeper_alive(3146),
        "a process of the test code outlived the run"
    );
    let pr = read(&value["data"]["pr"]);
    assert!(!pr.contains("forged-by-test-code"), "{pr}");
    // Each run of the test code saw no identity, relay or secret; one of them ran for
    // the verifier, in its own worktree.
    let runs: Vec<String> = std::fs::read_dir(probes.path())
        .expect("probes")
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .collect();
    for run in &runs {
        assert_eq!(run.lines().count(), 1, "the test code saw: {run}");
    }
    assert!(
        runs.len() >= 3,
        "RED, GREEN and the verifier ran it: {runs:?}"
    );
    assert!(!env.home.path().join("planted-by-test-code").exists());
    assert!(!env.root().join(".git/planted-by-test-code").exists());
    let root = env.root().display().to_string();
    assert!(
        runs.iter()
            .any(|r| !r.starts_with(&root) && !r.contains("/cleanroom/")),
        "the test code never ran for the verifier: {runs:?}"
    );
    for (path, text) in files_under(env.ledger_home.path()) {
        assert!(
            !text.contains("planted-cloud-secret"),
            "a secret reached {}",
            path.display()
        );
    }
}

#[test]
fn test_code_that_rewrites_the_verifiers_checkout_gets_its_verdict_refused() {
    let env = Env::new();
    let other = tempfile::tempdir().expect("other work tree");
    // Run for the verifier (in its own checkout, not the live tree or the clean room),
    // the test code rewrites a tracked file the verifier would go on to read.
    let probe =
        "case \"$(pwd)\" in */verify-*) echo '// rewritten by test code' >> src/lib.rs ;; esac";
    let test = format!(
        "#[test]\nfn subtracts() {{\n    let _ = std::process::Command::new(\"sh\").arg(\"-c\").arg({probe:?}).status();\n    assert_eq!(calc::sub(5, 2), 3);\n}}\n"
    );
    let issue = command_agent_project(&env, other.path(), (Some(&test), 3148), "");
    // The verifier's own ACCEPT does not count: with no revise budget, the REJECT put
    // in its place ends the run, naming the file.
    let value = expect_bail(&env, &issue, "revise_budget_exhausted", "process");
    let detail = value["data"]["bail"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("src/lib.rs") && detail.contains("changed while it was verified"),
        "{value}"
    );
    // The rejected RED was rolled back: only the plan landed.
    let log = subjects(env.root());
    assert!(!log.iter().any(|s| s == STEP_ONE[1]), "{log:?}");
}

#[test]
fn a_leafs_tmpdir_is_a_memory_file_system_of_its_own_that_holds_its_quota() {
    if !tdd_sandbox::probe().confines() || !tdd_sandbox::namespaces().mounts {
        return;
    }
    let env = Env::new();
    // The RED developer fills its TMPDIR past the quota and says what it is.
    let script = run_hostile(
        "dd if=/dev/zero of=\"$TMPDIR/fill\" bs=1024 count=8192 2>&1; echo KIND-$(stat -f -c %T \"$TMPDIR\")-END",
    );
    let fixture = fixture(&good_planner(""), GOOD_VERIFIER).replacen(
        "phase = \"red\"\n",
        &format!("phase = \"red\"\n{script}"),
        1,
    );
    let issue = project(&env, &fixture);
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    env.write(
        "tdd.toml",
        &format!("{config}\n[sandbox]\nenabled = true\ntmp_mb = 4\n"),
    );
    env.commit_all("confine leaves");
    let (code, value) = env.json(&["conduct", &issue]);
    assert_eq!(code, 0, "{value}");
    let (path, said) = files_under(env.ledger_home.path())
        .into_iter()
        .find(|(_, text)| text.contains("KIND-tmpfs-END"))
        .unwrap_or_else(|| panic!("no leaf said its TMPDIR was its own memory"));
    assert!(said.contains("No space left"), "{}: {said}", path.display());
}

/// A verifier whose tool writes where the user's environment points it (Go's module
/// cache under `GOPATH`, as `go mod download` does), which no leaf may write: it ends
/// without a verdict, and the bail says that the sandbox, not the agent, stopped it,
/// naming the path, the variable and the setting that grants it.
#[test]
fn a_tool_the_sandbox_stops_bails_as_the_systems_failure_naming_path_and_variable() {
    let env = Env::new();
    let gopath = env.home.path().join("go");
    std::fs::create_dir_all(&gopath).expect("GOPATH");
    let env = env.with_env("GOPATH", gopath.to_str().expect("utf-8"));
    let verifier = run_hostile("mkdir -p \"$GOPATH/pkg/mod/cache/download\"");
    let issue = project(
        &env,
        &fixture(
            &good_planner(""),
            &format!("[[leaf]]\nrole = \"verifier\"\n{verifier}"),
        ),
    );
    let config = std::fs::read_to_string(env.root().join("tdd.toml")).expect("config");
    env.write(
        "tdd.toml",
        &format!("{config}\n[sandbox]\nenabled = true\n"),
    );
    env.commit_all("confine leaves");
    let value = expect_bail(&env, &issue, "sandbox_denied", "system");
    let bail = &value["data"]["bail"];
    let detail = bail["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&format!("{}/pkg", gopath.display()))
            && detail.contains("`GOPATH`")
            && detail.contains("ended without a verdict"),
        "{value}"
    );
    let action = bail["action"].as_str().unwrap_or_default();
    assert!(
        action.contains(&format!("write = [\"{}\"]", gopath.display())),
        "{value}"
    );
    // The sandbox held: nothing was written there.
    assert!(!gopath.join("pkg").exists());
}
