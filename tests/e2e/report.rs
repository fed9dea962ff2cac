//! `tdd report`: the run report of the demo, opened in headless Chromium from disk.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use crate::support::Env;

/// Chromium, headless, with nothing of its own reaching out (as on a closed network),
/// logging the page's console to stderr; returns its stderr.
fn chromium(page: &Path, extra: &[&str]) -> String {
    let profile = tempfile::tempdir().expect("profile");
    let out = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium runs (cargo xtask test installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The lines of the page's console Chromium logged.
fn console(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.contains(":CONSOLE")).collect()
}

/// The JSON the page embeds.
fn embedded(html: &str) -> Value {
    let start = html
        .find(r#"<script type="application/json" id="run-data">"#)
        .expect("embedded data");
    let rest = &html[start..];
    let body = &rest[rest.find('>').expect("tag") + 1..rest.find("</script>").expect("end")];
    serde_json::from_str(&body.replace("<\\/", "</")).expect("the embedded data is JSON")
}

#[test]
fn the_demos_report_opens_offline_with_a_bar_per_leaf_and_a_row_per_test() {
    let env = Env::bare();
    let dir = env.home.path().join("demo");
    let (code, demo) = env.json(&["demo", "--keep", dir.to_str().expect("utf-8")]);
    assert_eq!(code, 0, "{demo}");
    // The conduct wrote it beside the draft PR and named it.
    let written = demo["data"]["report"]
        .as_str()
        .expect("report path")
        .to_string();
    assert!(Path::new(&written).is_file(), "{demo}");
    // The draft PR points a reviewer at it.
    let pr = std::fs::read_to_string(demo["data"]["pr"].as_str().expect("pr")).expect("pr");
    let dir_of_report = Path::new(&written)
        .parent()
        .expect("dir")
        .display()
        .to_string();
    assert!(
        pr.contains("**Run report:**")
            && pr.contains(&dir_of_report)
            && pr.contains("tdd report --run conduct-"),
        "{pr}"
    );
    // It opens with the report's header figures, and its step table names the page.
    assert!(pr.contains("## Run\n\n| outcome | wall time |"), "{pr}");
    assert!(
        pr.contains(&format!("## Steps (run report: `{written}`)")),
        "{pr}"
    );
    let repo = dir.join("calc");
    let out = env
        .tdd()
        .current_dir(&repo)
        .args(["report", "--json"])
        .output()
        .expect("report");
    let value = crate::support::envelope(&out);
    assert_eq!(value["ok"], true, "{value}");
    let path = value["data"]["path"].as_str().expect("path");
    assert_eq!(path, written);
    let html = std::fs::read_to_string(path).expect("page");
    let report = &value["data"]["report"];
    assert_eq!(&embedded(&html), report);
    // One bar per leaf the ledger recorded, one row per test the engine saw.
    let out = env
        .tdd()
        .current_dir(&repo)
        .args(["ledger", "export", "--json"])
        .output()
        .expect("export");
    let events = crate::support::envelope(&out)["data"]["events"]
        .as_array()
        .expect("events")
        .clone();
    let leaves: BTreeSet<&str> = events
        .iter()
        .filter(|e| e["kind"] == "leaf_prepared")
        .filter_map(|e| e["payload"]["leaf_id"].as_str())
        .collect();
    assert_eq!(html.matches(r#"class="bar leaf "#).count(), leaves.len());
    assert_eq!(
        report["leaves"].as_array().map(Vec::len),
        Some(leaves.len())
    );
    let mut tests = BTreeSet::new();
    for e in &events {
        let observations: Vec<&Value> = match e["kind"].as_str() {
            Some("baseline_captured") => vec![&e["payload"]["observation"]],
            Some("phase_changed") => e["payload"]["observations"]
                .as_array()
                .into_iter()
                .flatten()
                .collect(),
            _ => continue,
        };
        for o in observations {
            tests.extend(
                o["tests"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(id, _)| id.clone()),
            );
        }
    }
    assert!(tests.len() >= 4, "{tests:?}");
    let rows = html
        .split(r#"<table class="tests">"#)
        .nth(1)
        .expect("tests table");
    let rows = &rows[..rows.find("</table>").expect("end")];
    assert_eq!(rows.matches("<tr").count(), tests.len() + 1, "{rows}");
    // Each developer's changes, read from the bytes on disk at its start and end: a RED
    // developer adds a test, and the page lists them.
    let touched_in = |phase: &str| -> Vec<String> {
        report["leaves"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|l| l["role"] == "developer" && l["phase"] == phase)
            .flat_map(|l| {
                l["touched"]
                    .as_array()
                    .cloned()
                    .unwrap_or_else(|| panic!("{l}"))
            })
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect()
    };
    let red = touched_in("red");
    assert!(red.iter().any(|p| p.starts_with("tests/")), "{red:?}");
    // The demo's GREEN developer also edits its locked test: touched, and reverted.
    let reverted: Vec<&str> = report["leaves"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["phase"] == "green")
        .flat_map(|l| l["reverted"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    let green = touched_in("green");
    let tests_touched: Vec<&String> = green.iter().filter(|p| p.starts_with("tests/")).collect();
    assert!(!tests_touched.is_empty(), "{green:?}");
    assert!(
        tests_touched.iter().all(|p| reverted.contains(&p.as_str())),
        "{green:?} {reverted:?}"
    );
    assert!(html.contains(&red[0]) && html.contains("files touched"));
    // The PR's figures are the report's: the leaves and the verdicts, the run completed.
    let h = &report["header"];
    let row = format!(
        " | {} | {} accepted, {} rejected, {} refused by the engine | ",
        h["leaves"], h["verdicts"]["accept"], h["verdicts"]["reject"], h["verdicts"]["refused"]
    );
    assert!(
        pr.contains("| completed | ") && pr.contains(&row),
        "{row}\n{pr}"
    );
    // What the page shows of the run: the demo's one REJECT, its verdicts, a verified ledger.
    assert_eq!(report["header"]["outcome"], "completed");
    assert_eq!(report["header"]["verdicts"]["reject"], 1, "{report}");
    assert_eq!(report["header"]["ledger"]["verified"], true);
    // Nothing outside the file is named, and the page's policy forbids loading any.
    assert!(
        !html.contains("src=\"http") && !html.contains("<link"),
        "{html}"
    );
    assert!(html.contains("default-src 'none'"));
    // In Chromium, from disk: no console message at all (a blocked load would log one),
    // and the timeline is drawn. A screenshot is kept with the test's build output.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report.png");
    let stderr = chromium(
        Path::new(path),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1300,2400",
        ],
    );
    assert_eq!(console(&stderr), Vec::<&str>::new(), "{stderr}");
    assert!(std::fs::metadata(&shot).is_ok_and(|m| m.len() > 10_000));
    let dom = tempfile::tempdir().expect("dom");
    let dom_page = dom.path().join("page.html");
    std::fs::copy(path, &dom_page).expect("copy");
    let out = std::process::Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--dump-dom",
        ])
        .arg(format!(
            "--user-data-dir={}",
            dom.path().join("profile").display()
        ))
        .arg(format!("file://{}", dom_page.display()))
        .output()
        .expect("chromium");
    let rendered = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        rendered.matches(r#"class="bar leaf "#).count(),
        leaves.len()
    );
    // The friction log and the metrics of the same run (it has a REJECT revised and a
    // locked test reverted), as a person reads them.
    let mut settings = crate::snapshots::settings(&env, &[(&dir, "[DEMO]")]);
    crate::snapshots::run_figures(&mut settings, &env);
    let repo = repo.to_str().expect("utf-8");
    let (code, log) = env.on_terminal(&["-C", repo, "log", "render"]);
    assert_eq!(code, 0, "{log}");
    settings.bind(|| {
        insta::assert_snapshot!("friction_log_of_the_demo", crate::snapshots::shown(&log))
    });
    let (code, metrics) = env.on_terminal(&["-C", repo, "metrics", "--by", "provider"]);
    assert_eq!(code, 0, "{metrics}");
    settings
        .bind(|| insta::assert_snapshot!("metrics_of_the_demo", crate::snapshots::shown(&metrics)));
}

/// The console check above can fail: a page that loads something under the same
/// policy logs it.
#[test]
fn a_page_that_tries_to_load_anything_logs_it_in_chromium() {
    let dir = tempfile::tempdir().expect("dir");
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\"></head><body><img src=\"https://example.invalid/x.png\"></body></html>",
    )
    .expect("page");
    let stderr = chromium(&page, &["--dump-dom"]);
    assert_eq!(console(&stderr).len(), 1, "{stderr}");
}

#[test]
fn a_report_with_no_run_says_how_to_start_one() {
    let env = Env::new();
    let (code, value) = env.json(&["report"]);
    assert_eq!(code, 1, "{value}");
    assert_eq!(value["error"]["reason"], "no_run");
    assert!(
        value["error"]["hint"]
            .as_str()
            .is_some_and(|h| h.contains("tdd conduct")),
        "{value}"
    );
}
