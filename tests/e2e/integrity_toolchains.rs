//! What a Go or cargo deciding run loads from outside the repository: a dependency's
//! sources outside the work tree (a cargo path dependency, a Go module replaced by a
//! directory), the toolchain a version-manager shim leads to, the user configuration
//! in the home. Each is pinned at `run start`; a change after it refuses the gate
//! instead of judging code the commit does not hold, unless the cycle declares that it
//! changes dependencies, and then only the dependencies move.

use serde_json::Value;

use crate::integrity_gates::head;
use crate::support::Env;

fn assert_runner_changed(env: &Env, red: &str, (code, value): (i32, Value), file: &str) {
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "runner_changed", "{value}");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(file), "the refusal names {file}: {value}");
    assert_eq!(head(env), red, "no commit may follow a refused GREEN");
}

const CARGO_TEST: &str = "#[test]\nfn subtracts() {\n    assert_eq!(calc::sub(5, 2), 3);\n}\n";

#[test]
fn a_cargo_path_dependency_outside_the_repository_edited_after_run_start_refuses_green() {
    let (env, _outside, lib) = cargo_with_outside_helper(Env::new(), "");
    let red = head(&env);
    // GREEN supplied by the helper outside the repository, which no commit holds.
    std::fs::write(&lib, "pub fn diff(a: i32, b: i32) -> i32 {\n    a - b\n}\n").expect("edit");
    env.write(
        "src/lib.rs",
        &format!("{CARGO_ADD}\npub fn sub(a: i32, b: i32) -> i32 {{\n    helper::diff(a, b)\n}}\n"),
    );
    let outcome = env.json(&["advance"]);
    assert_runner_changed(&env, &red, outcome, "helper");
}

const GO_TEST: &str = "package calc\n\nimport \"testing\"\n\nfunc TestSub(t *testing.T) {\n\tif got := Sub(5, 2); got != 3 {\n\t\tt.Fatalf(\"Sub(5, 2) = %d, want 3\", got)\n\t}\n}\n";
const GO_PLAN: &str = "---\ncycles:\n  - n: 1\n    project: go\n    title: subtraction\n    test: go::example.com/calc::TestSub\n    stub_expected: [calc.go]\n---\n";
const GO_ADD: &str = "package calc\n\nfunc Add(a, b int) int { return a + b }\n";

/// A Go module at RED on `Sub`, whose `go.mod` holds `mod`, run with `env`.
fn go_at_green(env: Env, module: &str, sub: &str) -> Env {
    env.write("go.mod", module);
    env.write("calc.go", GO_ADD);
    env.write(
        "tdd.toml",
        "[project.go]\nadapter = \"go\"\n\n[locks]\nimpl = [\"calc.go\"]\ntest = [\"*_test.go\"]\n",
    );
    env.write(".tdd/plan.md", GO_PLAN);
    env.commit_all("a module that can only add");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 0, "{value}");
    env.write("calc_test.go", GO_TEST);
    env.write("calc.go", &format!("{GO_ADD}\n{sub}"));
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    env
}

#[test]
fn a_go_module_replaced_by_a_directory_outside_edited_after_run_start_refuses_green() {
    let outside = tempfile::tempdir().expect("outside");
    let helper = outside.path().join("helper");
    std::fs::create_dir_all(&helper).expect("helper");
    std::fs::write(
        helper.join("go.mod"),
        "module example.com/helper\n\ngo 1.18\n",
    )
    .expect("mod");
    let wrong = "package helper\n\nfunc Diff(a, b int) int { return 0 }\n";
    std::fs::write(helper.join("helper.go"), wrong).expect("helper");
    let module = format!(
        "module example.com/calc\n\ngo 1.18\n\nrequire example.com/helper v0.0.0\n\nreplace example.com/helper => {}\n",
        helper.display()
    );
    let env = go_at_green(Env::new(), &module, "func Sub(a, b int) int { return 0 }\n");
    let red = head(&env);
    let right = "package helper\n\nfunc Diff(a, b int) int { return a - b }\n";
    std::fs::write(helper.join("helper.go"), right).expect("edit outside");
    let sub = "func Sub(a, b int) int { return helper.Diff(a, b) }\n";
    env.write(
        "calc.go",
        &format!("package calc\n\nimport \"example.com/helper\"\n\nfunc Add(a, b int) int {{ return a + b }}\n\n{sub}"),
    );
    let outcome = env.json(&["advance"]);
    assert_runner_changed(&env, &red, outcome, "helper.go");
}

#[test]
fn a_go_shim_switched_after_run_start_is_never_followed() {
    // A version-manager shim: `go` runs whichever toolchain a file names.
    let real = String::from_utf8(
        std::process::Command::new("sh")
            .args(["-c", "command -v go"])
            .output()
            .expect("go on PATH")
            .stdout,
    )
    .expect("utf-8");
    let (shims, target, path) = crate::support::switchable_shim("go", &real);
    let env = go_at_green(
        Env::new().with_env("PATH", &path),
        "module example.com/calc\n\ngo 1.18\n",
        "func Sub(a, b int) int { return 0 }\n",
    );
    let red = head(&env);
    // After run start the shim is switched to a "toolchain" that reports the test
    // passed whenever the implementation carries a marker (so the sensitivity run,
    // on RED's implementation, still fails); the shim's own bytes never change.
    let fake = shims.path().join("fake-go");
    let event = |action: &str| {
        format!(
            "echo '{{\"Action\":\"{action}\",\"Package\":\"example.com/calc\",\"Test\":\"TestSub\"}}'"
        )
    };
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh
{}
if grep -q 'sub comes later' calc.go; then {}; exit 0; fi
{}
exit 1
",
            event("run"),
            event("pass"),
            event("fail"),
        ),
    )
    .expect("fake");
    crate::integrity_gates::make_executable(&fake);
    std::fs::write(&target, fake.display().to_string()).expect("switch");
    env.write(
        "calc.go",
        &format!("{GO_ADD}\nfunc Sub(a, b int) int {{ return 0 }} // sub comes later\n"),
    );
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "target_failing", "{value}");
    assert_eq!(head(&env), red, "no commit may follow a refused GREEN");
}

#[test]
fn a_go_setting_written_into_the_users_configuration_after_run_start_refuses_green() {
    // The commit holds a right `Sub` only under a build tag; `go env -w` in the home
    // the run captured would turn the tag on for every deciding run.
    let env = go_at_green(
        Env::new(),
        "module example.com/calc\n\ngo 1.18\n",
        "func Sub(a, b int) int { return 0 }\n",
    );
    let red = head(&env);
    let config = env.home.path().join(".config/go");
    std::fs::create_dir_all(&config).expect("go config");
    std::fs::write(config.join("env"), "GOFLAGS=-tags=cheat\n").expect("go env -w");
    env.write(
        "calc.go",
        &format!("//go:build !cheat\n\n{GO_ADD}\nfunc Sub(a, b int) int {{ return 0 }}\n"),
    );
    env.write(
        "calc_cheat.go",
        &format!("//go:build cheat\n\n{GO_ADD}\nfunc Sub(a, b int) int {{ return a - b }}\n"),
    );
    let outcome = env.json(&["advance"]);
    assert_runner_changed(&env, &red, outcome, "go/env");
}

/// A crate at RED whose plan's one cycle carries `extra`, depending by path on a
/// helper crate outside the repository whose `diff` is wrong; the helper's `lib.rs`.
/// A cargo crate in `env` with a path dependency `helper` outside the repository, at
/// RED on `sub`; `extra` is added to its plan's cycle.
fn cargo_with_outside_helper(
    env: Env,
    extra: &str,
) -> (Env, tempfile::TempDir, std::path::PathBuf) {
    let outside = tempfile::tempdir().expect("outside");
    let helper = outside.path().join("helper");
    std::fs::create_dir_all(helper.join("src")).expect("helper");
    std::fs::write(
        helper.join("Cargo.toml"),
        "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .expect("manifest");
    let lib = helper.join("src/lib.rs");
    std::fs::write(&lib, "pub fn diff(_a: i32, _b: i32) -> i32 {\n    0\n}\n").expect("lib");
    env.write(
        "Cargo.toml",
        &format!(
            "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n\n[dependencies]\nhelper = {{ path = \"{}\" }}\n",
            helper.display()
        ),
    );
    env.write("src/lib.rs", CARGO_ADD);
    env.write(".gitignore", "target/\n");
    env.write(
        "tdd.toml",
        "[project.app]\nadapter = \"cargo\"\n\n[locks]\nimpl = [\"src/**\"]\ntest = [\"tests/**\"]\n",
    );
    env.write(
        ".tdd/plan.md",
        &format!("---\ncycles:\n  - n: 1\n    project: app\n    title: subtraction\n    test: app::calc::sub subtracts\n    stub_expected: [src/lib.rs]\n{extra}---\n"),
    );
    let locked = std::process::Command::new("cargo")
        .args(["generate-lockfile", "--offline"])
        .current_dir(env.root())
        .status()
        .expect("cargo");
    assert!(locked.success());
    env.commit_all("a crate that adds, with a helper beside it");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 0, "{value}");
    env.write("tests/sub.rs", CARGO_TEST);
    env.write(
        "src/lib.rs",
        &format!("{CARGO_ADD}\npub fn sub(_a: i32, _b: i32) -> i32 {{\n    0\n}}\n"),
    );
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_IMPL", "{value}");
    (env, outside, lib)
}

const CARGO_ADD: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n";

#[test]
fn a_cycle_that_declares_a_dependency_change_takes_it_and_records_what_changed() {
    let (env, _outside, lib) =
        cargo_with_outside_helper(Env::new(), "    changes_dependencies: true\n");
    // The cycle's work includes its dependency: the helper is fixed, and used.
    std::fs::write(&lib, "pub fn diff(a: i32, b: i32) -> i32 {\n    a - b\n}\n").expect("fix");
    env.write(
        "src/lib.rs",
        &format!("{CARGO_ADD}\npub fn sub(a: i32, b: i32) -> i32 {{\n    helper::diff(a, b)\n}}\n"),
    );
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "AWAITING_REFACTOR", "{value}");
    let changed = value["data"]["dependencies_changed"].to_string();
    assert!(changed.contains("helper/src"), "what changed: {changed}");
    let recorded = crate::integrity_gates::events(&env, "dependencies_changed");
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert!(recorded[0]["changed"].to_string().contains("helper/src"));
    // A reviewer sees it: the run report's honesty panel and timeline name it.
    let (code, report) = env.json(&["report"]);
    assert_eq!(code, 0, "{report}");
    let said = report.to_string();
    assert!(
        said.contains("the dependencies changed, as the plan lets this cycle")
            && said.contains("\"dependencies\""),
        "the report names the change"
    );
    // Pinned anew: the REFACTOR close, with nothing changed since, records nothing
    // more, and an edit after GREEN is a change again (taken, and recorded again).
    std::fs::write(
        &lib,
        "pub fn diff(a: i32, b: i32) -> i32 {\n    a - b + 0\n}\n",
    )
    .expect("edit");
    let (code, value) = env.json(&["advance"]);
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["data"]["to"], "CLOSED", "{value}");
    assert_eq!(
        crate::integrity_gates::events(&env, "dependencies_changed").len(),
        2
    );
}

#[test]
fn a_cycle_that_declares_a_dependency_change_still_refuses_anything_else_changed() {
    let (env, _outside, lib) =
        cargo_with_outside_helper(Env::new(), "    changes_dependencies: true\n");
    let red = head(&env);
    std::fs::write(&lib, "pub fn diff(a: i32, b: i32) -> i32 {\n    a - b\n}\n").expect("fix");
    // A runner's user configuration in the captured home is no dependency: it stays
    // pinned in a cycle that may change its dependencies.
    std::fs::write(
        env.home.path().join(".npmrc"),
        "node-options=--require=/tmp/x\n",
    )
    .expect("npmrc");
    env.write(
        "src/lib.rs",
        &format!("{CARGO_ADD}\npub fn sub(a: i32, b: i32) -> i32 {{\n    helper::diff(a, b)\n}}\n"),
    );
    let outcome = env.json(&["advance"]);
    assert_runner_changed(&env, &red, outcome, ".npmrc");
}

/// A linker planted after `run start` in a directory earlier on `PATH` than the one
/// `cc` was found in: cargo's builds would link with it, so GREEN is refused, naming it.
#[test]
fn a_linker_planted_earlier_on_path_after_run_start_refuses_green() {
    let bin = tempfile::tempdir().expect("bin");
    let path = format!(
        "{}:{}",
        bin.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let (env, _outside, _lib) = cargo_with_outside_helper(Env::new().with_env("PATH", &path), "");
    let red = head(&env);
    let linker = bin.path().join("cc");
    std::fs::write(&linker, "#!/bin/sh\nexec /usr/bin/cc \"$@\"\n").expect("linker");
    crate::integrity_gates::make_executable(&linker);
    env.write(
        "src/lib.rs",
        &format!("{CARGO_ADD}\npub fn sub(a: i32, b: i32) -> i32 {{\n    a - b\n}}\n"),
    );
    let outcome = env.json(&["advance"]);
    assert_runner_changed(&env, &red, outcome, "cc");
}
