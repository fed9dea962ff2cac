//! The launch latency confinement adds: spawning and reaping `/bin/true`, bare,
//! confined by a developer-like policy (rules built for each launch, as the supervisor
//! does), and confined as the engine confines a test runner (the same rules, plus PID,
//! IPC and network namespaces of its own, then limits and a private `TMPDIR`), one step
//! at a time. Prints the medians and the differences.
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
        ..Policy::default()
    };
    let tmp = work.path().join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let variants = [
        ("confined", policy.clone()),
        (
            "with its own PID and IPC namespaces",
            Policy {
                own_processes: true,
                ..policy.clone()
            },
        ),
        (
            "and its own network",
            Policy {
                own_processes: true,
                own_network: true,
                ..policy.clone()
            },
        ),
        (
            "and limits with a private TMPDIR (a runner)",
            Policy {
                own_processes: true,
                own_network: true,
                limits: tdd_sandbox::Limits {
                    processes: Some(4096),
                    memory: Some(16 << 30),
                    tmp: Some(2 << 30),
                },
                private_tmp: Some(tmp),
                ..policy.clone()
            },
        ),
    ];
    let level = Confinement::prepare(&policy)
        .expect("rules")
        .level()
        .label();
    let mut bare = Vec::new();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); variants.len()];
    for _ in 0..RUNS {
        let start = Instant::now();
        Command::new("/bin/true").status().expect("true runs");
        bare.push(start.elapsed().as_secs_f64() * 1000.0);
        for ((_, variant), times) in variants.iter().zip(times.iter_mut()) {
            let start = Instant::now();
            let mut command = Command::new("/bin/true");
            Confinement::prepare(variant)
                .expect("rules")
                .install(&mut command);
            assert!(command.status().expect("true runs").success());
            times.push(start.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let b = median(bare);
    println!("launch /bin/true, median of {RUNS}: bare {b:.2} ms; Landlock level {level}");
    for ((name, _), times) in variants.iter().zip(times) {
        let t = median(times);
        println!("  {name}: {t:.2} ms, added {:.2} ms", t - b);
    }
}
