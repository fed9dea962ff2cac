//! `check_and_revert` (a snapshot of the work tree, then the lock check against an
//! earlier one) on a generated 100,000-file repository with three changed files (one
//! locked). Prints the median of several runs, and beside it the median of
//! `git status --porcelain --untracked-files=all` on the same tree in the same rounds
//! (git's own walk: a stat of every tracked file and a read of every directory), so the
//! figure can be read against what this machine's file system allows.
//!
//! Run: `cargo bench -p tdd-engine --bench snapshot` (FILES=N to change the size,
//! REPO=dir to keep the repository and reuse it, ROUNDS=N for more rounds).

#![expect(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark reports on the terminal"
)]

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use tdd_engine::run::Snapshot;

fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(["-c", "gc.auto=0"])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .stdout(std::process::Stdio::null())
        .status()
        .expect("git runs");
    assert!(status.success(), "git {args:?}");
}

/// Writes `files` files in directories of 100 under `root` and commits them.
fn generate(root: &Path, files: usize) {
    eprintln!("generating {files} files...");
    std::fs::create_dir_all(root).expect("mkdir");
    for i in 0..files {
        let sub = root.join(format!("src/d{:04}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&sub).expect("mkdir");
        }
        std::fs::write(sub.join(format!("f{i}.txt")), format!("file {i}\n")).expect("write");
    }
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "base"]);
    // A repository at rest: its files written out, so the timings measure the scan
    // rather than the kernel flushing the setup. (No `git gc`: deleting 100,000 loose
    // objects makes every file created soon after slow on ext4, which measures the
    // file system's recovery, not the scan.)
    git(root, &["status", "--porcelain"]);
    let status = Command::new("sync").status().expect("sync runs");
    assert!(status.success(), "sync");
}

/// The CPU time (user and system) this process's threads have used so far.
fn cpu_ms() -> f64 {
    use nix::sys::resource::UsageWho;
    let usage = nix::sys::resource::getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let ms = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1000.0 + t.tv_usec() as f64 / 1000.0;
    ms(usage.user_time()) + ms(usage.system_time())
}

fn main() {
    let files: usize = std::env::var("FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    // REPO=dir keeps the generated repository there and reuses it on later runs, so two
    // builds can be compared on the very same tree.
    let kept = std::env::var_os("REPO").map(std::path::PathBuf::from);
    let dir = tempfile::tempdir().expect("tempdir");
    let root = kept.as_deref().unwrap_or(dir.path());
    if kept.is_some() && root.join(".git").exists() {
        eprintln!("reusing {}", root.display());
    } else {
        generate(root, files);
    }
    let base = Snapshot::take(root, "bench-base").expect("base snapshot");
    let mut times = Vec::new();
    let mut git_times = Vec::new();
    let mut cpu_times = Vec::new();
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    for round in 0..rounds {
        for (k, name) in [
            "src/d0001/f100.txt",
            "src/d0500/f50000.txt",
            "src/d0900/f90000.txt",
        ]
        .iter()
        .enumerate()
        {
            if root.join(name).exists() {
                std::fs::write(root.join(name), format!("changed {round} {k}\n")).expect("change");
            }
        }
        let (start, cpu) = (Instant::now(), cpu_ms());
        let report = base
            .check_and_revert(root, |p| p.starts_with("src/d0001/"))
            .expect("check");
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        cpu_times.push(cpu_ms() - cpu);
        assert_eq!(report.restored.len(), 1, "{report:?}");
        let start = Instant::now();
        git(root, &["status", "--porcelain", "--untracked-files=all"]);
        git_times.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    times.sort_by(|a, b| a.total_cmp(b));
    git_times.sort_by(|a, b| a.total_cmp(b));
    cpu_times.sort_by(|a, b| a.total_cmp(b));
    println!(
        "check_and_revert (scan, then lock check), {files} files, 3 changed: median {:.1} ms (min {:.1}, max {:.1}, {} runs)",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1],
        times.len()
    );
    println!(
        "CPU time of check_and_revert, all threads: median {:.1} ms",
        cpu_times[cpu_times.len() / 2]
    );
    let (ours, theirs) = (times[times.len() / 2], git_times[git_times.len() / 2]);
    println!(
        "git status --porcelain --untracked-files=all on the same tree: median {theirs:.1} ms; \
         check_and_revert / git status = {:.2}",
        ours / theirs
    );
}
