//! Supervision figures: time from a timeout to the whole group gone, supervisor peak
//! memory, and the cost of running a leaf under a supervisor.
//!
//! Run with `cargo bench -p tdd-supervisor --bench supervise`. Like the test binary,
//! this one is its own supervisor: `<exe> __supervise <leaf-dir>`.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use std::time::Instant;

use tdd_supervisor::ExitRecord;
use tdd_supervisor::LeafSpec;
use tdd_supervisor::NoopReporter;
use tdd_supervisor::Supervisor;
use tdd_supervisor::WaitOutcome;

const RUNS: usize = 20;
const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__supervise") {
        let dir = PathBuf::from(&args[2]);
        std::process::exit(tdd_supervisor::run_supervisor(&dir, &NoopReporter));
    }
    if args.iter().any(|arg| arg == "--list") {
        // `cargo bench -- --list` and test harness probes: nothing to list.
        return;
    }
    let temp = tempfile::tempdir().expect("temp dir");
    let exe = std::env::current_exe().expect("own executable");
    let supervisor = Supervisor::new(temp.path().join("state"), exe, ["__supervise"]);
    let mut out = std::io::stdout().lock();
    let wall = Duration::from_millis(200);
    let grace = Duration::from_millis(300);
    let _ = writeln!(
        out,
        "supervisor bench: {RUNS} runs each, wall timeout {wall:?}, grace {grace:?}"
    );

    let script = "sleep 1000 & exec sleep 1000";
    let (lateness, gone) = timeout_to_gone(&supervisor, script, wall, grace);
    report(&mut out, "timeout fired after the deadline (ms)", &lateness);
    report(
        &mut out,
        "timeout -> group gone, group obeys SIGTERM (ms)",
        &gone,
    );
    let script = "trap '' TERM; sleep 1000 & sleep 1000";
    let (_, gone) = timeout_to_gone(&supervisor, script, wall, grace);
    let goal = grace.as_millis() + 100;
    report(
        &mut out,
        &format!("timeout -> group gone, group ignores SIGTERM (ms, goal <= {goal})"),
        &gone,
    );

    let rss = |spec: LeafSpec| run(&supervisor, &spec).supervisor_peak_rss_kib.unwrap_or(0) as f64;
    let idle = rss(sh("exit 0"));
    let capped = rss(sh("head -c 1073741824 /dev/zero").max_output_bytes(10 << 20));
    let streamed = rss(sh("head -c 268435456 /dev/zero"));
    let _ = writeln!(
        out,
        "supervisor peak RSS (KiB, goal <= 8192): `exit 0` {idle}, 1 GiB into a 10 MiB cap {capped}, 256 MiB uncapped {streamed}"
    );

    let mut direct = Vec::new();
    let mut supervised = Vec::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        let _ = Command::new("/bin/true").status();
        direct.push(start.elapsed().as_secs_f64() * 1000.0);
        let start = Instant::now();
        run(&supervisor, &LeafSpec::new(["/bin/true"]));
        supervised.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    report(&mut out, "`true` spawned directly (ms)", &direct);
    report(
        &mut out,
        "`true` launched and waited for under a supervisor (ms)",
        &supervised,
    );
}

fn sh(script: &str) -> LeafSpec {
    LeafSpec::new(["/bin/sh", "-c", script]).env("PATH", PATH)
}

fn run(supervisor: &Supervisor, spec: &LeafSpec) -> ExitRecord {
    let mut leaf = supervisor.launch(spec).expect("launches");
    match leaf.wait(Some(Duration::from_secs(120))).expect("waits") {
        WaitOutcome::Finished(exit) => exit,
        WaitOutcome::StillRunning => panic!("leaf still running"),
    }
}

/// Per run: how late the first signal was, and how long from the deadline until the
/// supervisor had confirmed the whole tree dead.
fn timeout_to_gone(
    supervisor: &Supervisor,
    script: &str,
    wall: Duration,
    grace: Duration,
) -> (Vec<f64>, Vec<f64>) {
    let wall_ms = wall.as_millis() as f64;
    let mut lateness = Vec::new();
    let mut gone = Vec::new();
    for _ in 0..RUNS {
        let exit = run(supervisor, &sh(script).wall_timeout(wall).grace(grace));
        let signalled = exit.first_signal_after_ms.expect("signalled") as f64;
        let all_gone = exit.all_gone_after_ms.expect("timed") as f64;
        lateness.push(signalled - wall_ms);
        gone.push(all_gone - wall_ms);
    }
    (lateness, gone)
}

fn report(out: &mut impl Write, what: &str, samples: &[f64]) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let max = sorted[sorted.len() - 1];
    let min = sorted[0];
    let _ = writeln!(
        out,
        "{what}: median {median:.1}, min {min:.1}, max {max:.1}"
    );
}
