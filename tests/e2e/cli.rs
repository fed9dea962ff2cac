//! Global behaviour: envelopes, exit codes, -C, usage errors, panics, reason codes.

use std::path::Path;

use crate::support::Env;
use crate::support::code;
use crate::support::envelope;

#[test]
fn version_prints_the_crate_version() {
    let env = Env::new();
    let out = env.tdd().arg("--version").output().expect("runs");
    assert_eq!(code(&out), 0);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("tdd {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn a_non_terminal_stdout_gets_the_envelope_without_json_flag() {
    let env = Env::new();
    let out = env.tdd().args(["ledger", "path"]).output().expect("runs");
    let value = envelope(&out);
    assert_eq!(value["command"], "ledger path");
    assert_eq!(value["ok"], true);
}

#[test]
fn an_unknown_subcommand_is_a_usage_error_with_exit_2() {
    let env = Env::new();
    let (exit, value) = env.json(&["frobnicate"]);
    assert_eq!(exit, 2);
    assert_eq!(value["error"]["reason"], "usage");
    assert_eq!(value["next_action"]["verb"], "fix_arguments");
}

#[test]
fn an_argument_that_is_not_utf8_is_a_usage_error_naming_it() {
    use std::os::unix::ffi::OsStrExt;
    let env = Env::new();
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9");
    for (program_args, says) in [
        (vec!["note".into(), bad.to_owned()], "not UTF-8"),
        (vec![bad.to_owned()], "unrecognized subcommand"),
    ] {
        let out = env
            .tdd()
            .arg("--json")
            .args(program_args)
            .output()
            .expect("runs");
        let value = envelope(&out);
        assert_eq!(code(&out), 2, "{value}");
        assert_eq!(value["error"]["reason"], "usage", "{value}");
        let message = value["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{value}");
        assert!(message.contains("caf"), "{value}");
    }
    let out = env
        .tdd()
        .arg("__scripted-leaf")
        .arg(bad)
        .output()
        .expect("runs");
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not UTF-8"));
}

#[test]
fn a_missing_directory_for_dash_c_is_bad_input() {
    let env = Env::new();
    let (exit, value) = env.json(&["-C", "no/such/dir", "ledger", "path"]);
    assert_eq!(exit, 2);
    assert_eq!(value["error"]["reason"], "directory_missing");
}

#[test]
fn dash_c_runs_as_if_started_there() {
    let env = Env::new();
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let out = env
        .tdd()
        .current_dir(elsewhere.path())
        .args(["-C"])
        .arg(env.root())
        .args(["ledger", "path", "--json"])
        .output()
        .expect("runs");
    let value = envelope(&out);
    let repo = env.root().canonicalize().expect("canonical").join(".git");
    assert_eq!(
        value["data"]["repository"].as_str().map(Path::new),
        Some(repo.as_path())
    );
}

#[test]
fn outside_a_repository_commands_refuse_with_a_hint() {
    let env = Env::bare();
    let (exit, value) = env.json(&["ledger", "path"]);
    assert_eq!(exit, 1);
    assert_eq!(value["error"]["reason"], "not_a_repository");
    assert!(
        value["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("-C"))
    );
}

#[test]
fn a_panic_prints_a_short_report_and_exits_70() {
    let env = Env::new().with_env("TDD_FAILPOINT", "dispatch=panic");
    let out = env
        .tdd()
        .args(["ledger", "path", "--json"])
        .output()
        .expect("runs");
    assert_eq!(code(&out), 70);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("internal error") && stderr.lines().count() <= 3,
        "{stderr}"
    );
    assert_eq!(envelope(&out)["error"]["reason"], "internal_error");
}

/// Every reason code the CLI can emit is documented in docs/cli.md.
#[test]
fn every_reason_code_is_documented() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/cli.md")).expect("docs/cli.md");
    let mut missing = Vec::new();
    let mut found = 0;
    for file in rust_files(&root.join("src")) {
        let text = std::fs::read_to_string(&file).expect("read source");
        for reason in reason_codes(&text) {
            found += 1;
            if !doc.contains(&format!("`{reason}`")) {
                missing.push(format!("{reason} ({})", file.display()));
            }
        }
    }
    assert!(
        found > 10,
        "the scan found only {found} reason codes; is it still matching?"
    );
    assert!(
        missing.is_empty(),
        "reason codes missing from docs/cli.md: {missing:?}"
    );
}

fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The first string literal after each `CommandError::refused(` / `bad_input(` / `internal(`.
fn reason_codes(text: &str) -> Vec<String> {
    let mut codes = Vec::new();
    for ctor in [
        "CommandError::refused(",
        "CommandError::bad_input(",
        "CommandError::internal(",
        "(\"config_",
    ] {
        for (idx, _) in text.match_indices(ctor) {
            let rest = &text[idx + ctor.len()..];
            let rest = if ctor.starts_with("(\"") {
                &text[idx + 1..]
            } else {
                rest
            };
            let Some(open) = rest.find('"') else { continue };
            if rest[..open].trim() != "" {
                continue;
            }
            let after = &rest[open + 1..];
            if let Some(close) = after.find('"') {
                codes.push(after[..close].to_string());
            }
        }
    }
    codes
}
