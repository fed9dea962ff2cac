//! Public projects, observed exactly: on a pinned release of a real project per
//! ecosystem, `tdd init` then `tdd test --all` reports the same tests as the runner's own
//! listing, with the same counts, and a broken assertion is reported failed with its
//! values in the excerpt.
//!
//! Each project is fetched once by its ecosystem's own client (pip for a PyPI sdist,
//! `cargo vendor` for a crate, apt for the Go module Debian packages, `npm pack` for an
//! npm package that ships its tests, with its runtime dependencies and its runner from
//! npm) into a cache under the target directory, then copied into a fresh repository
//! per test.

use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::support::Env;

/// Where fetched projects are kept between runs.
fn cache() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("corpus");
    std::fs::create_dir_all(&dir).expect("corpus cache");
    dir
}

/// Runs `program args` in `dir`, failing the test with its output when it fails.
fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?} did not start: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed in {}:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The standard output of `program args` in `dir`, whatever its exit code.
fn output(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?} did not start: {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Fetches once: `fetch` fills a scratch directory outside any cargo workspace and
/// names the project in it, which is then kept in the cache as `name`.
fn fetched(name: &str, fetch: impl FnOnce(&Path) -> PathBuf) -> PathBuf {
    let done = cache().join(name);
    if !done.exists() {
        let scratch = tempfile::tempdir().expect("scratch");
        let source = fetch(scratch.path());
        let partial = cache().join(format!("{name}.partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&partial);
        run(
            Path::new("."),
            "cp",
            &[
                "-R",
                &source.display().to_string(),
                &partial.display().to_string(),
            ],
        );
        // Another test process may have finished first; either copy is the same.
        if std::fs::rename(&partial, &done).is_err() {
            let _ = std::fs::remove_dir_all(&partial);
        }
    }
    done
}

/// A repository holding a copy of `source` (its tests included), committed.
fn repository(source: &Path) -> Env {
    let env = Env::new();
    run(
        Path::new("."),
        "cp",
        &[
            "-R",
            &format!("{}/.", source.display()),
            &env.root().display().to_string(),
        ],
    );
    env.commit_all("the project as released");
    env
}

/// `tdd init`, committed, then `tdd test --all`: the one observation and its native ids.
fn observed(env: &Env) -> (Value, BTreeSet<String>) {
    let (exit, init) = env.json(&["init"]);
    assert_eq!(exit, 0, "{init}");
    env.commit_all("tdd.toml");
    let (exit, value) = env.json(&["test", "--all"]);
    assert_eq!(exit, 0, "{}", value["error"]);
    let observations = value["data"]["observations"]
        .as_array()
        .expect("observations");
    assert_eq!(observations.len(), 1);
    let observation = observations[0].clone();
    let project = observation["project"]
        .as_str()
        .expect("project")
        .to_string();
    let ids = observation["tests"]
        .as_object()
        .expect("tests")
        .keys()
        .map(|id| {
            id.strip_prefix(&format!("{project}::"))
                .unwrap_or(id)
                .to_string()
        })
        .collect();
    (observation, ids)
}

/// Checks that `tdd` observed exactly the tests the runner lists itself, none failing.
fn assert_same(observation: &Value, ids: &BTreeSet<String>, own: &BTreeSet<String>) {
    assert_eq!(
        ids.symmetric_difference(own).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "ids only one side reports"
    );
    let totals = &observation["totals"];
    assert_eq!(totals["failed"], 0, "{totals}");
}

/// Adds the test file `path` whose test `name` fails, commits it, runs `tdd test --all`
/// and gives the failure excerpt `tdd` reports for it.
fn broken(env: &Env, path: &str, contents: &str, name: &str) -> String {
    env.write(path, contents);
    env.commit_all("a broken assertion");
    let (exit, value) = env.json(&["test", "--all"]);
    assert_eq!(exit, 0, "{}", value["error"]);
    failure_of(&value["data"]["observations"][0], name)
}

/// The failure excerpt of the one test whose native id ends with `name`.
fn failure_of(observation: &Value, name: &str) -> String {
    let tests = observation["tests"].as_object().expect("tests");
    let (_, result) = tests
        .iter()
        .find(|(id, _)| id.ends_with(name))
        .unwrap_or_else(|| panic!("{name} not observed among {} tests", tests.len()));
    assert_eq!(result["outcome"], "failed", "{result}");
    result["failure"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn more_itertools() -> PathBuf {
    fetched("more-itertools-10.5.0", |scratch| {
        run(
            scratch,
            "python3",
            &[
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "--no-binary",
                ":all:",
                "more-itertools==10.5.0",
                "-d",
                ".",
            ],
        );
        run(scratch, "tar", &["xzf", "more-itertools-10.5.0.tar.gz"]);
        scratch.join("more-itertools-10.5.0")
    })
}

#[test]
fn pytest_more_itertools_matches_pytests_own_collection() {
    let env = repository(&more_itertools());
    let own = run(
        env.root(),
        "python3",
        &[
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
    );
    let own: BTreeSet<String> = own
        .lines()
        .filter(|l| l.contains("::"))
        .map(str::to_string)
        .collect();
    assert!(own.len() > 600, "{own:?}");
    let (observation, ids) = observed(&env);
    assert_same(&observation, &ids, &own);
    assert_eq!(observation["totals"]["total"], own.len());

    let excerpt = broken(
        &env,
        "tests/test_broken.py",
        "import more_itertools\n\n\ndef test_first_is_broken():\n    assert more_itertools.first([1, 2]) == 2\n",
        "test_first_is_broken",
    );
    assert!(excerpt.contains("assert 1 == 2"), "{excerpt}");
}

fn strsim() -> PathBuf {
    fetched("strsim-0.11.1", |scratch| {
        run(
            scratch,
            "cargo",
            &["init", "-q", "--lib", "--name", "corpus_fetch"],
        );
        run(scratch, "cargo", &["add", "-q", "strsim@=0.11.1"]);
        run(scratch, "cargo", &["vendor", "-q", "vendor"]);
        let crate_dir = scratch.join("vendor/strsim");
        std::fs::remove_file(crate_dir.join(".cargo-checksum.json")).expect("checksum file");
        std::fs::write(crate_dir.join(".gitignore"), "target/\n").expect(".gitignore");
        run(
            &crate_dir,
            "cargo",
            &["generate-lockfile", "-q", "--offline"],
        );
        crate_dir
    })
}

#[test]
fn cargo_strsim_matches_nextests_own_listing() {
    let env = repository(&strsim());
    let listed = run(
        env.root(),
        "cargo",
        &["nextest", "list", "--message-format", "json"],
    );
    let listed: Value = serde_json::from_str(&listed).expect("nextest list JSON");
    let mut own = BTreeSet::new();
    for (binary, suite) in listed["rust-suites"].as_object().expect("suites") {
        for test in suite["testcases"].as_object().expect("testcases").keys() {
            own.insert(format!("{binary} {test}"));
        }
    }
    assert!(own.len() > 90, "{own:?}");
    let (observation, ids) = observed(&env);
    // Doctests are observed too (strsim documents its functions with examples);
    // nextest does not list them.
    let (docs, ids): (BTreeSet<String>, BTreeSet<String>) =
        ids.into_iter().partition(|id| id.contains("::doc/lib "));
    assert!(!docs.is_empty(), "no doctest observed");
    assert_same(&observation, &ids, &own);

    let excerpt = broken(
        &env,
        "tests/broken.rs",
        "#[test]\nfn hamming_is_broken() {\n    assert_eq!(strsim::hamming(\"ab\", \"ac\"), Ok(0));\n}\n",
        "hamming_is_broken",
    );
    assert!(excerpt.contains("left: Ok(1)"), "{excerpt}");
    assert!(excerpt.contains("right: Ok(0)"), "{excerpt}");
}

fn google_uuid() -> PathBuf {
    fetched("golang-github-google-uuid", |scratch| {
        let download = ["download", "-q", "golang-github-google-uuid-dev"];
        let fetched = Command::new("apt-get")
            .args(download)
            .current_dir(scratch)
            .status()
            .is_ok_and(|s| s.success());
        if !fetched {
            // A fresh machine may have no package lists yet.
            run(scratch, "apt-get", &["update", "-q"]);
            run(scratch, "apt-get", &download);
        }
        let deb = std::fs::read_dir(scratch)
            .expect("scratch")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .expect("the .deb apt downloaded");
        run(scratch, "dpkg", &["-x", &deb.display().to_string(), "pkg"]);
        scratch.join("pkg/usr/share/gocode/src/github.com/google/uuid")
    })
}

#[test]
fn go_google_uuid_matches_go_tests_own_report() {
    let env = repository(&google_uuid());
    let report = output(env.root(), "go", &["test", "-json", "./..."]);
    let mut own = BTreeSet::new();
    for line in report.lines() {
        let event: Value = serde_json::from_str(line).expect("go test -json line");
        let ended = matches!(event["Action"].as_str(), Some("pass" | "fail" | "skip"));
        if let (true, Some(package), Some(test)) =
            (ended, event["Package"].as_str(), event["Test"].as_str())
        {
            own.insert(format!("{package}::{test}"));
        }
    }
    assert!(own.len() > 25, "{own:?}");
    let (observation, ids) = observed(&env);
    assert_same(&observation, &ids, &own);

    let excerpt = broken(
        &env,
        "broken_test.go",
        "package uuid\n\nimport \"testing\"\n\nfunc TestVersionIsBroken(t *testing.T) {\n\tif got, want := Must(NewRandom()).Version(), Version(3); got != want {\n\t\tt.Errorf(\"got version %d, want %d\", got, want)\n\t}\n}\n",
        "TestVersionIsBroken",
    );
    assert!(excerpt.contains("got version 4, want 3"), "{excerpt}");
}

/// The npm package `spec` as published (`npm pack`), with `deps` (its runtime
/// dependencies and its runner, not its whole devDependencies) installed from npm into
/// its `node_modules`, which git ignores.
fn npm_package(name: &str, spec: &str, deps: &[&str]) -> PathBuf {
    fetched(name, |scratch| {
        let tarball = run(scratch, "npm", &["pack", "-q", spec]);
        run(scratch, "tar", &["xzf", tarball.trim()]);
        let deps_dir = scratch.join("deps");
        std::fs::create_dir_all(&deps_dir).expect("deps");
        std::fs::write(deps_dir.join("package.json"), "{}").expect("package.json");
        let mut install = vec!["install", "-q", "--no-audit", "--no-fund"];
        install.extend(deps);
        run(&deps_dir, "npm", &install);
        let package = scratch.join("package");
        std::fs::rename(deps_dir.join("node_modules"), package.join("node_modules"))
            .expect("node_modules");
        let ignore = package.join(".gitignore");
        let mut text = std::fs::read_to_string(&ignore).unwrap_or_default();
        text.push_str("\nnode_modules/\n");
        std::fs::write(&ignore, text).expect(".gitignore");
        package
    })
}

/// An id without the ` #2`, ` #3`, ... that keeps same-named tests apart.
fn without_ordinal(id: &str) -> &str {
    match id.rsplit_once(" #") {
        Some((name, n)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => name,
        _ => id,
    }
}

/// The ids `tdd` observed as mocha's own report names tests, `file :: suite suite
/// title` (with any ` > ` inside a title read as a space, as on the runner's side),
/// each as often as it occurs, sorted.
fn as_full_titles(ids: &BTreeSet<String>) -> Vec<String> {
    let mut titles: Vec<String> = ids
        .iter()
        .map(|id| {
            let id = without_ordinal(id);
            let (file, rest) = id.split_once(" > ").unwrap_or((id, ""));
            format!("{file} :: {}", rest.replace(" > ", " "))
        })
        .collect();
    titles.sort();
    titles
}

#[test]
fn mocha_jsonpath_matches_mochas_own_report() {
    // Its test script is `mocha -u tdd test`: init must carry the interface over.
    let source = npm_package(
        "jsonpath-1.3.0",
        "jsonpath@1.3.0",
        &[
            "esprima@1.2.5",
            "static-eval@2.1.1",
            "underscore@1.13.6",
            "mocha@10.8.2",
        ],
    );
    let env = repository(&source);
    let report = output(
        env.root(),
        "node_modules/.bin/mocha",
        &["-u", "tdd", "test", "--reporter", "json"],
    );
    let report: Value = serde_json::from_str(&report).expect("mocha's JSON report");
    let root = format!("{}/", env.root().display());
    // Same-named tests occur: compare each name as often as it occurs.
    let mut own: Vec<String> = report["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .map(|t| {
            let file = t["file"].as_str().unwrap_or_default();
            let file = file.strip_prefix(&root).unwrap_or(file);
            // A title may hold ` > ` itself (`slice with step > 1`).
            let title = t["fullTitle"].as_str().unwrap_or_default();
            format!("{file} :: {}", title.replace(" > ", " "))
        })
        .collect();
    own.sort();
    assert!(own.len() > 130, "{own:?}");
    let (observation, ids) = observed(&env);
    assert_eq!(as_full_titles(&ids), own);
    assert_eq!(observation["totals"]["failed"], 0);

    let excerpt = broken(
        &env,
        "test/broken.js",
        "var assert = require('assert');\n\nsuite('broken', function () {\n  test('is broken', function () {\n    assert.strictEqual(1 + 1, 3);\n  });\n});\n",
        "is broken",
    );
    assert!(excerpt.contains("2 !== 3"), "{excerpt}");
}

/// The names of the test cases in a JUnit report, unescaped, in order.
fn junit_names(xml: &str) -> Vec<String> {
    xml.split("<testcase ")
        .skip(1)
        .filter_map(|case| {
            let start = case.find("name=\"")? + 6;
            let end = start + case[start..].find('"')?;
            Some(
                case[start..end]
                    .replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&quot;", "\"")
                    .replace("&apos;", "'")
                    .replace("&amp;", "&"),
            )
        })
        .collect()
}

#[test]
fn node_test_merge_json_schemas_matches_nodes_own_report() {
    let source = npm_package(
        "merge-json-schemas-0.2.2",
        "@fastify/merge-json-schemas@0.2.2",
        &["dequal@2.0.3"],
    );
    let env = repository(&source);
    let report = env.root().join("own.xml");
    output(
        env.root(),
        "node",
        &[
            "--test",
            "--test-reporter=junit",
            &format!("--test-reporter-destination={}", report.display()),
        ],
    );
    let xml = std::fs::read_to_string(&report).expect("node's JUnit report");
    std::fs::remove_file(&report).expect("rm");
    let mut own = junit_names(&xml);
    assert!(own.len() > 130, "{own:?}");
    let (observation, ids) = observed(&env);
    // node's report does not say which file a test is in: compare the names, each as
    // often as it occurs.
    let mut names: Vec<String> = ids
        .iter()
        .map(|id| {
            let id = without_ordinal(id);
            id.rsplit(" > ").next().unwrap_or(id).to_string()
        })
        .collect();
    own.sort();
    names.sort();
    assert_eq!(names, own);
    assert_eq!(observation["totals"]["failed"], 0);

    let excerpt = broken(
        &env,
        "test/broken.test.js",
        "const test = require('node:test');\nconst assert = require('node:assert');\n\ntest('is broken', () => {\n  assert.strictEqual(1 + 1, 3);\n});\n",
        "is broken",
    );
    assert!(excerpt.contains("2 !== 3"), "{excerpt}");
}

/// An honest vitest cycle: RED's run in the live tree would leave vitest's results
/// cache under `node_modules/.vite`, which a deciding run cannot write through the
/// dependency directory the clean room links; GREEN is accepted all the same, and no
/// run writes that cache.
#[test]
fn an_honest_vitest_cycle_is_accepted_whatever_vitest_caches() {
    let deps = fetched("vitest-3.2.4", |scratch| {
        std::fs::write(scratch.join("package.json"), "{}").expect("package.json");
        run(
            scratch,
            "npm",
            &["install", "-q", "--no-audit", "--no-fund", "vitest@3.2.4"],
        );
        scratch.to_path_buf()
    });
    let env = Env::new();
    env.write(
        "package.json",
        r#"{"name":"calc","private":true,"type":"module","devDependencies":{"vitest":"3.2.4"}}"#,
    );
    env.write(
        "calc.js",
        "export function add(a, b) {\n  return a + b;\n}\n",
    );
    env.write(
        "tests/add.test.js",
        "import { test, expect } from 'vitest';\nimport { add } from '../calc.js';\n\ntest('add', () => {\n  expect(add(2, 3)).toBe(5);\n});\n",
    );
    env.write(".gitignore", "node_modules/\n");
    env.write(
        "tdd.toml",
        "[project.web]\nadapter = \"vitest\"\ntest_paths = [\"tests/\"]\n\n[locks]\nimpl = [\"calc.js\"]\ntest = [\"tests/**\"]\n",
    );
    env.write(
        ".tdd/plan.md",
        "---\ncycles:\n  - n: 1\n    project: web\n    title: subtraction\n    test: tests/sub.test.js > sub\n    stub_expected: [calc.js]\n---\n",
    );
    run(
        Path::new("."),
        "cp",
        &[
            "-R",
            &deps.join("node_modules").display().to_string(),
            &env.root().display().to_string(),
        ],
    );
    env.commit_all("calc");
    let (exit, started) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(exit, 0, "{started}");
    env.write(
        "tests/sub.test.js",
        "import { test, expect } from 'vitest';\nimport { sub } from '../calc.js';\n\ntest('sub', () => {\n  expect(sub(5, 2)).toBe(3);\n});\n",
    );
    let add = "export function add(a, b) {\n  return a + b;\n}\n";
    env.write(
        "calc.js",
        &format!("{add}\nexport function sub(a, b) {{\n  throw new Error('not yet');\n}}\n"),
    );
    let (exit, red) = env.json(&["advance"]);
    assert_eq!(
        (exit, &red["data"]["to"]),
        (0, &"AWAITING_IMPL".into()),
        "{red}"
    );
    env.write(
        "calc.js",
        &format!("{add}\nexport function sub(a, b) {{\n  return a - b;\n}}\n"),
    );
    let (exit, green) = env.json(&["advance"]);
    assert_eq!(
        (exit, &green["data"]["to"]),
        (0, &"AWAITING_REFACTOR".into()),
        "{green}"
    );
    assert!(
        !env.root().join("node_modules/.vite/vitest").exists(),
        "a run wrote vitest's results cache into the dependency directory"
    );
}
