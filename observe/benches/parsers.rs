//! Parse time of a 100,000-testcase JUnit report and a 100,000-event
//! `go test -json` stream (criterion), and the peak memory of one parse of
//! each (Linux only, from `/proc/self/status`).
//!
//! Run: `cargo bench -p tdd-observe --bench parsers`; memory:
//! `TDD_BENCH_MEMORY=junit cargo bench -p tdd-observe --bench parsers` (or `=go`).

use std::hint::black_box;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use tdd_observe::parsers::Format;
use tdd_observe::parsers::parse;

const CASES: usize = 100_000;

/// A pytest-style JUnit report: 1 in 10 cases fails with a traceback.
fn junit_report() -> Vec<u8> {
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<testsuites>\n");
    xml.push_str(&format!(
        "<testsuite name=\"pytest\" tests=\"{CASES}\" failures=\"{}\">\n",
        CASES / 10
    ));
    for i in 0..CASES {
        let module = i / 100;
        xml.push_str(&format!(
            "<testcase classname=\"tests.test_m{module}\" name=\"test_case_{i}[p-{i}]\" file=\"tests/test_m{module}.py\" line=\"{i}\" time=\"0.001\""
        ));
        if i % 10 == 0 {
            xml.push_str("><failure message=\"assert 1 == 2\">&gt;   assert 1 == 2\nE   assert 1 == 2\n\ntests/test_m.py:3: AssertionError</failure></testcase>\n");
        } else {
            xml.push_str(" />\n");
        }
    }
    xml.push_str("</testsuite>\n</testsuites>\n");
    xml.into_bytes()
}

/// A test2json stream of 100,000 events: run, output, pass/fail per test.
fn go_stream() -> Vec<u8> {
    let mut out = String::new();
    let tests = CASES / 3;
    for i in 0..tests {
        let package = format!("example.com/m/pkg{}", i / 500);
        let test = format!("TestCase{i}");
        out.push_str(&format!("{{\"Time\":\"2026-01-01T00:00:00Z\",\"Action\":\"run\",\"Package\":\"{package}\",\"Test\":\"{test}\"}}\n"));
        out.push_str(&format!("{{\"Time\":\"2026-01-01T00:00:00Z\",\"Action\":\"output\",\"Package\":\"{package}\",\"Test\":\"{test}\",\"Output\":\"=== RUN   {test}\\n\"}}\n"));
        let action = if i % 10 == 0 { "fail" } else { "pass" };
        out.push_str(&format!("{{\"Time\":\"2026-01-01T00:00:00Z\",\"Action\":\"{action}\",\"Package\":\"{package}\",\"Test\":\"{test}\",\"Elapsed\":0}}\n"));
    }
    out.push_str(
        "{\"Action\":\"output\",\"Package\":\"example.com/m/pkg0\",\"Output\":\"ok\\n\"}\n",
    );
    out.into_bytes()
}

fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Peak resident memory added by one parse, in MiB: the peak is reset
/// through `/proc/self/clear_refs` once the input is resident.
fn peak_mib(format: Format, bytes: &[u8]) -> Option<(f64, f64)> {
    std::fs::write("/proc/self/clear_refs", "5").ok()?;
    let before = status_kib("VmRSS:")?;
    let cases = parse(format, bytes).ok()?;
    black_box(cases);
    let peak = status_kib("VmHWM:")?;
    Some((
        peak.saturating_sub(before) as f64 / 1024.0,
        peak as f64 / 1024.0,
    ))
}

#[expect(
    clippy::print_stderr,
    reason = "the benchmark reports memory beside criterion's timings"
)]
fn report_memory(name: &str, format: Format, bytes: &[u8]) {
    match peak_mib(format, bytes) {
        Some((added, total)) => eprintln!(
            "{name}: input {:.1} MiB, peak RSS {total:.1} MiB, added by parsing {added:.1} MiB",
            bytes.len() as f64 / 1048576.0
        ),
        None => eprintln!("{name}: peak memory unavailable on this platform"),
    }
}

fn benches(c: &mut Criterion) {
    let junit = junit_report();
    let go = go_stream();
    assert_eq!(parse(Format::PytestJunit, &junit).ok(), Some(CASES));
    assert_eq!(parse(Format::GoJson, &go).ok(), Some(CASES / 3));
    // Memory is measured in a fresh process per format (heap freed by one
    // parse stays resident and would hide the next one's peak):
    // TDD_BENCH_MEMORY=junit or =go prints the figure and skips the timings.
    match std::env::var("TDD_BENCH_MEMORY").as_deref() {
        Ok("junit") => return report_memory("junit 100k testcases", Format::PytestJunit, &junit),
        Ok("go") => return report_memory("go test -json 100k events", Format::GoJson, &go),
        _ => {}
    }
    let mut group = c.benchmark_group("parse");
    group.sample_size(20);
    group.bench_function("junit_100k_testcases", |b| {
        b.iter(|| parse(Format::PytestJunit, black_box(&junit)))
    });
    group.bench_function("go_json_100k_events", |b| {
        b.iter(|| parse(Format::GoJson, black_box(&go)))
    });
    group.finish();
}

criterion_group!(parsers, benches);
criterion_main!(parsers);
