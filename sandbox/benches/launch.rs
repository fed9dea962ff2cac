//! The launch latency confinement adds: spawning and reaping `/bin/true`, bare,
//! confined by a developer-like policy (rules built for each launch, as the supervisor
//! does), and confined as the engine confines a test runner (the same rules, plus a
//! PID namespace of its own). Prints the medians and the differences.
//!
//! Run: `cargo bench -p tdd-sandbox --bench launch`.

#![expect(
    clippy::print_stdout,
    clippy::expect_used,
    reason = "a benchmark reports on the terminal and stops on a broken machine"
)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use tdd_sandbox::Confinement;
use tdd_sandbox::Policy;

const RUNS: usize = 200;

fn median(mut times: Vec<f64>) -> f64 {
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let work = tempfile::tempdir().expect("tempdir");
    let home = std::env::var_os("HOME").map_or_else(|| work.path().to_path_buf(), PathBuf::from);
    let policy = Policy {
        write: vec![work.path().to_path_buf()],
        deny_write: vec![work.path().join(".git")],
        deny_read: [".git-credentials", ".config/gh", ".ssh", ".netrc"]
            .iter()
            .map(|rel| home.join(rel))
            .collect(),
        write_files: vec![PathBuf::from("/dev/null")],
        without_landlock: false,
        own_processes: false,
        own_network: false,
    };
    let runner = Policy {
        own_processes: true,
        own_network: true,
        ..policy.clone()
    };
    let level = Confinement::prepare(&policy)
        .expect("rules")
        .level()
        .label();
    let (mut bare, mut confined, mut runners) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let start = Instant::now();
        Command::new("/bin/true").status().expect("true runs");
        bare.push(start.elapsed().as_secs_f64() * 1000.0);
        let start = Instant::now();
        let mut command = Command::new("/bin/true");
        Confinement::prepare(&policy)
            .expect("rules")
            .install(&mut command);
        assert!(command.status().expect("true runs").success());
        confined.push(start.elapsed().as_secs_f64() * 1000.0);
        let start = Instant::now();
        let mut command = Command::new("/bin/true");
        Confinement::prepare(&runner)
            .expect("rules")
            .install(&mut command);
        assert!(command.status().expect("true runs").success());
        runners.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    let (b, c, r) = (median(bare), median(confined), median(runners));
    println!(
        "launch /bin/true, median of {RUNS}: bare {b:.2} ms, confined ({level}) {c:.2} ms, added {:.2} ms; \
         as a runner (and its own PID namespace) {r:.2} ms, added {:.2} ms",
        c - b,
        r - b
    );
}
