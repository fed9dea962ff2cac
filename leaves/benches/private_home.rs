//! What a leaf's private home adds to its start-up: making and seeding it (Claude
//! Code's and codex's state as a user has it), removing it, and, when the real CLIs are
//! installed (`TDD_REAL_CLIS`, as `cargo xtask test` sets it up), how long each CLI takes
//! to print its first event from a fresh private home against a home it has used
//! before. Prints the medians and the differences.
//!
//! Run: `TDD_REAL_CLIS=~/.cache/tdd/real-clis cargo bench -p tdd-leaves --bench private_home`.

#![expect(
    clippy::print_stdout,
    clippy::expect_used,
    reason = "a benchmark reports on the terminal and stops on a broken machine"
)]

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;
use std::process::Stdio;
use std::time::Instant;

use tdd_leaves::home;

const RUNS: usize = 200;
const CLI_RUNS: usize = 7;

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// A user's home with the state the two CLIs keep, at its usual sizes.
fn user_home(dir: &Path) -> BTreeMap<String, String> {
    let home = dir.join("user");
    let write = |rel: &str, text: String| {
        let path = home.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    let projects: Vec<String> = (0..40)
        .map(|i| format!("\"/src/p{i}\":{{\"allowedTools\":[],\"history\":[]}}"))
        .collect();
    write(
        ".claude.json",
        format!(
            "{{\"userID\":\"{}\",\"hasCompletedOnboarding\":true,\"projects\":{{{}}}}}",
            "a".repeat(64),
            projects.join(",")
        ),
    );
    write(
        ".claude/.credentials.json",
        format!(
            "{{\"claudeAiOauth\":{{\"accessToken\":\"{}\"}}}}",
            "t".repeat(400)
        ),
    );
    write(
        ".claude/settings.json",
        "{\"model\":\"opus\",\"permissions\":{\"allow\":[]}}".into(),
    );
    write(
        ".codex/auth.json",
        format!("{{\"OPENAI_API_KEY\":\"{}\"}}", "k".repeat(64)),
    );
    write(".codex/config.toml", "model = \"gpt-5-codex\"\n[model_providers.x]\nname = \"x\"\nbase_url = \"http://127.0.0.1:9/v1\"\n".into());
    [("HOME".to_string(), home.display().to_string())]
        .into_iter()
        .collect()
}

/// Milliseconds until `argv` (run with `env` only) prints its first line; it is killed then.
fn first_line_ms(argv: &[&str], env: &[(String, String)], stdin: &str) -> f64 {
    let start = Instant::now();
    let mut child = Command::new(argv[0])
        .args(&argv[1..])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    if let Some(mut input) = child.stdin.take() {
        use std::io::Write;
        let _ = input.write_all(stdin.as_bytes());
    }
    let mut line = String::new();
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let _ = out.read_line(&mut line);
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    let _ = child.kill();
    let _ = child.wait();
    ms
}

/// The real CLI `name` from a fresh private home each time, and from one it keeps.
fn cli(
    clis: &Path,
    name: &str,
    state: &home::CliState,
    caller: &BTreeMap<String, String>,
    dir: &Path,
) {
    let bin = clis.join("npm/node_modules/.bin").join(name);
    if !bin.exists() {
        println!("{name}: not installed at {}", bin.display());
        return;
    }
    let bin = bin.display().to_string();
    let (argv, extra): (Vec<&str>, Vec<(String, String)>) = match name {
        "claude" => (
            vec![&bin, "-p", "--output-format", "stream-json", "--verbose"],
            vec![
                ("ANTHROPIC_API_KEY".into(), "sk-ant-bench".into()),
                ("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:9".into()),
                ("DISABLE_AUTOUPDATER".into(), "1".into()),
                (
                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC".into(),
                    "1".into(),
                ),
            ],
        ),
        _ => (
            vec![&bin, "exec", "--json", "--skip-git-repo-check", "-"],
            vec![("CODEX_API_KEY".into(), "sk-bench".into())],
        ),
    };
    let path = std::env::var("PATH").unwrap_or_default();
    let base = |set: Vec<(String, String)>| {
        let mut env = vec![("PATH".to_string(), path.clone())];
        env.extend(extra.iter().cloned());
        env.extend(set);
        env
    };
    let kept = dir.join(format!("{name}-kept"));
    let kept_env = base(home::make(&kept, state, caller, None).expect("kept home"));
    let _ = first_line_ms(&argv, &kept_env, "hello");
    let warm: Vec<f64> = (0..CLI_RUNS)
        .map(|_| first_line_ms(&argv, &kept_env, "hello"))
        .collect();
    let fresh: Vec<f64> = (0..CLI_RUNS)
        .map(|i| {
            let at = dir.join(format!("{name}-fresh-{i}"));
            let start = Instant::now();
            let env = base(home::make(&at, state, caller, None).expect("fresh home"));
            let made = start.elapsed().as_secs_f64() * 1000.0;
            let ms = made + first_line_ms(&argv, &env, "hello");
            home::remove(&at);
            ms
        })
        .collect();
    let (warm, fresh) = (median(warm), median(fresh));
    println!(
        "{name}: first event {warm:.1} ms from a home it used before, {fresh:.1} ms from a fresh private home (+{:.1} ms)",
        fresh - warm
    );
}

fn main() {
    let dir = tempfile::tempdir().expect("tempdir");
    let caller = user_home(dir.path());
    for (name, state) in [
        ("claude", tdd_leaves::providers::claude::STATE),
        ("codex", tdd_leaves::providers::codex::STATE),
    ] {
        let at = dir.path().join("leaf-home");
        let mut made = Vec::new();
        let mut removed = Vec::new();
        for _ in 0..RUNS {
            let start = Instant::now();
            home::make(&at, &state, &caller, Some(Path::new("/ledger"))).expect("make");
            made.push(start.elapsed().as_secs_f64() * 1000.0);
            let start = Instant::now();
            home::remove(&at);
            removed.push(start.elapsed().as_secs_f64() * 1000.0);
        }
        println!(
            "{name}: private home made and seeded in {:.3} ms, removed in {:.3} ms (medians of {RUNS})",
            median(made),
            median(removed)
        );
    }
    if let Some(clis) = std::env::var_os("TDD_REAL_CLIS").map(PathBuf::from) {
        cli(
            &clis,
            "claude",
            &tdd_leaves::providers::claude::STATE,
            &caller,
            dir.path(),
        );
        cli(
            &clis,
            "codex",
            &tdd_leaves::providers::codex::STATE,
            &caller,
            dir.path(),
        );
    }
}
