//! Wall and idle timeouts: SIGTERM to the group, grace, SIGKILL, `kill_stuck`.

use std::time::Duration;

use libtest_mimic::Trial;
use tdd_supervisor::ExitClass;
use tdd_supervisor::KillReason;

use crate::support::Env;
use crate::support::events;
use crate::support::finish;
use crate::support::sh;

pub fn trials() -> Vec<Trial> {
    crate::trials![
        a_sleeper_is_killed_at_the_wall_timeout,
        a_leaf_ignoring_sigterm_is_killed_after_the_grace_period,
        a_silent_leaf_is_killed_at_the_idle_timeout,
        a_chatty_leaf_outlives_its_idle_timeout,
    ]
}

fn a_sleeper_is_killed_at_the_wall_timeout() {
    let env = Env::new();
    let spec = sh("exec sleep 1000")
        .wall_timeout(Duration::from_millis(500))
        .grace(Duration::from_secs(5));
    let mut leaf = env.launch(&spec);
    let launch = leaf.launch_record().expect("reads").expect("launched");
    let exit = finish(&mut leaf);
    assert_eq!(
        exit.class,
        ExitClass::KillStuck {
            reason: KillReason::WallTimeout
        }
    );
    assert!(
        exit.first_signal_after_ms.is_some_and(|ms| ms >= 500),
        "{exit:?}"
    );
    assert_eq!(
        exit.sigkill_after_ms, None,
        "sleep dies of SIGTERM, no SIGKILL needed"
    );
    assert!(!launch.leaf.is_alive());
}

fn a_leaf_ignoring_sigterm_is_killed_after_the_grace_period() {
    let env = Env::new();
    // The shell and its sleep both ignore SIGTERM (an ignored signal survives exec).
    let spec = sh("trap '' TERM; sleep 1000 & sleep 1000")
        .wall_timeout(Duration::from_millis(300))
        .grace(Duration::from_millis(700));
    let mut leaf = env.launch(&spec);
    let launch = leaf.launch_record().expect("reads").expect("launched");
    let exit = finish(&mut leaf);
    assert_eq!(
        exit.class,
        ExitClass::KillStuck {
            reason: KillReason::WallTimeout
        }
    );
    let term = exit.first_signal_after_ms.expect("SIGTERM sent");
    let kill = exit.sigkill_after_ms.expect("SIGKILL sent");
    assert!(term >= 300 && kill >= term + 700, "{exit:?}");
    assert!(crate::support::group_members(launch.pgid).is_empty());
    let signals: Vec<String> = events(&leaf)
        .iter()
        .filter(|event| event["event"] == "signalled")
        .map(|event| event["signal"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(signals, ["SIGTERM", "SIGKILL"]);
}

fn a_silent_leaf_is_killed_at_the_idle_timeout() {
    let env = Env::new();
    let spec = sh("echo started; exec sleep 1000").idle_timeout(Duration::from_millis(800));
    let mut leaf = env.launch(&spec);
    let exit = finish(&mut leaf);
    assert_eq!(
        exit.class,
        ExitClass::KillStuck {
            reason: KillReason::IdleTimeout
        }
    );
    let out = std::fs::read_to_string(leaf.stdout_path()).expect("stdout log");
    assert_eq!(out, "started\n");
}

fn a_chatty_leaf_outlives_its_idle_timeout() {
    let env = Env::new();
    // Runs about 3 s, twice the idle timeout, but never pauses for more than ~0.1 s.
    let script = "i=0; while [ $i -lt 30 ]; do echo $i; sleep 0.1; i=$((i+1)); done";
    let spec = sh(script).idle_timeout(Duration::from_millis(1500));
    let mut leaf = env.launch(&spec);
    let exit = finish(&mut leaf);
    assert_eq!(exit.class, ExitClass::Exited { code: 0 }, "{exit:?}");
    assert!(
        exit.duration_ms.is_some_and(|ms| ms > 1500),
        "it outlived the idle timeout"
    );
}
