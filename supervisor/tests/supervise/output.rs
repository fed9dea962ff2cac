//! Output capture: files, the cap and its marker, flat memory, merging, following.

use std::time::Duration;

use libtest_mimic::Trial;
use tdd_supervisor::ExitClass;
use tdd_supervisor::KillReason;
use tdd_supervisor::WaitOutcome;
use tdd_supervisor::output_cut_marker;

use crate::support::Env;
use crate::support::finish;
use crate::support::sh;

pub fn trials() -> Vec<Trial> {
    crate::trials![
        a_gigabyte_flood_is_cut_at_the_cap_with_flat_memory,
        stdout_and_stderr_go_to_their_files_or_one_merged_file,
        follow_streams_output_while_the_leaf_runs,
    ]
}

const MIB: u64 = 1024 * 1024;

fn a_gigabyte_flood_is_cut_at_the_cap_with_flat_memory() {
    let env = Env::new();
    let mut quiet = env.launch(&sh("exit 0"));
    let baseline = finish(&mut quiet)
        .supervisor_peak_rss_kib
        .expect("peak rss");
    let cap = 10 * MIB;
    let spec = sh("head -c 1073741824 /dev/zero").max_output_bytes(cap);
    let mut leaf = env.launch(&spec);
    let exit = finish(&mut leaf);
    assert_eq!(
        exit.class,
        ExitClass::KillStuck {
            reason: KillReason::OutputLimit
        }
    );
    assert!(exit.output_cut);
    let log = std::fs::read(leaf.stdout_path()).expect("stdout log");
    let marker = output_cut_marker(cap);
    assert!(
        log.len() as u64 <= cap + 1 + marker.len() as u64,
        "log is {} bytes",
        log.len()
    );
    assert_eq!(
        log.len() as u64,
        cap + 1 + marker.len() as u64,
        "zeros, newline, marker"
    );
    assert!(log.ends_with(marker.as_bytes()));
    let peak = exit.supervisor_peak_rss_kib.expect("peak rss");
    assert!(
        peak <= baseline + 2048,
        "peak {peak} KiB against {baseline} KiB for `exit 0`"
    );
}

fn stdout_and_stderr_go_to_their_files_or_one_merged_file() {
    let env = Env::new();
    let script = "echo out; echo err >&2; echo out2";
    let mut split = env.launch(&sh(script));
    finish(&mut split);
    assert_eq!(
        std::fs::read_to_string(split.stdout_path()).expect("stdout"),
        "out\nout2\n"
    );
    let stderr = split.stderr_path().expect("separate stderr");
    assert_eq!(std::fs::read_to_string(stderr).expect("stderr"), "err\n");
    let mut merged = env.launch(&sh(script).merge_stderr());
    let exit = finish(&mut merged);
    assert!(merged.stderr_path().is_none());
    assert_eq!(
        std::fs::read_to_string(merged.stdout_path()).expect("merged"),
        "out\nerr\nout2\n"
    );
    assert_eq!(exit.stdout_bytes, 13);
}

fn follow_streams_output_while_the_leaf_runs() {
    let env = Env::new();
    let go = env.path("go");
    let script = format!(
        "echo first; while [ ! -e '{}' ]; do sleep 0.02; done; echo second",
        go.display()
    );
    let mut leaf = env.launch(&sh(&script));
    let mut out = Vec::new();
    let mut err = Vec::new();
    // Follow until the first line has arrived, while the leaf is still running.
    while !out.starts_with(b"first\n") {
        let outcome = leaf
            .follow(&mut out, &mut err, Some(Duration::from_millis(50)))
            .expect("follows");
        assert_eq!(outcome, WaitOutcome::StillRunning);
    }
    std::fs::write(&go, "").expect("go");
    let outcome = leaf
        .follow(&mut out, &mut err, Some(crate::support::BOUND))
        .expect("follows");
    assert!(matches!(outcome, WaitOutcome::Finished(_)));
    assert_eq!(
        out, b"first\nsecond\n",
        "each call continues where the last one stopped"
    );
}
