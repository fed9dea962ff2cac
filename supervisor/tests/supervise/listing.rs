//! Listing leaves, and recognising our processes by identity, not by pid alone.

use std::process::Command;

use libtest_mimic::Trial;
use nix::sys::signal::Signal as NixSignal;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use tdd_supervisor::ExitClass;
use tdd_supervisor::LaunchRecord;
use tdd_supervisor::LeafState;
use tdd_supervisor::LeafStatus;
use tdd_supervisor::ProcessId;

use crate::support::Env;
use crate::support::finish;
use crate::support::group_members;
use crate::support::sh;
use crate::support::wait_until;

pub fn trials() -> Vec<Trial> {
    crate::trials![
        leaves_are_listed_with_state_and_ages,
        a_leaf_whose_directory_is_deleted_is_ended,
        a_recorded_pid_now_used_by_another_process_is_not_the_leaf,
    ]
}

fn leaves_are_listed_with_state_and_ages() {
    let env = Env::new();
    let mut done = env.launch(&sh("exit 3").name("first"));
    finish(&mut done);
    let mut running = env.launch(&sh("echo hello; exec sleep 1000").name("second"));
    wait_until("output", || {
        std::fs::metadata(running.stdout_path()).is_ok_and(|m| m.len() > 0)
    });
    let list = env.supervisor.list().expect("lists");
    assert_eq!(list.len(), 2);
    assert_eq!(list[0].name.as_deref(), Some("first"));
    assert_eq!(list[0].state, LeafState::Finished);
    assert_eq!(list[0].class, Some(ExitClass::Exited { code: 3 }));
    assert_eq!(list[1].state, LeafState::Running);
    assert!(list[1].pid.is_some() && list[1].age_ms.is_some());
    assert!(list[1].last_output_age_ms.is_some(), "it wrote a line");
    running.kill(tdd_supervisor::Kill::Now).expect("kills");
    assert_eq!(finish(&mut running).class, ExitClass::Stopped);
}

fn a_leaf_whose_directory_is_deleted_is_ended() {
    let env = Env::new();
    let leaf = env.launch(&sh("exec sleep 1000"));
    let launch = leaf.launch_record().expect("reads").expect("launched");
    std::fs::remove_dir_all(env.supervisor.state_dir()).expect("deletes the state");
    wait_until("the leaf to end", || !launch.leaf.is_alive());
    wait_until("the supervisor to end", || !launch.supervisor.is_alive());
}

fn a_recorded_pid_now_used_by_another_process_is_not_the_leaf() {
    let env = Env::new();
    let leaf = env.launch(&sh("exec sleep 1000"));
    let id = leaf.id().to_owned();
    let launch = leaf.launch_record().expect("reads").expect("launched");
    // Make the leaf's supervisor and the leaf vanish without an exit record.
    kill(Pid::from_raw(launch.supervisor.pid), NixSignal::SIGKILL).expect("kills the supervisor");
    kill(Pid::from_raw(launch.leaf.pid), NixSignal::SIGKILL).expect("kills the leaf");
    drop(leaf);
    // An unrelated process that leads its own session and group, so its pid is also a
    // session id and a group id, as the supervisor's and the leaf's were.
    let mut imposter = Command::new("setsid")
        .args(["sleep", "1000"])
        .spawn()
        .expect("spawns");
    let pid = i32::try_from(imposter.id()).expect("pid");
    wait_until("the imposter leads its group", || {
        group_members(pid) == [pid]
    });
    let real = ProcessId::of(pid).expect("imposter identity");
    // Pretend the kernel recycled the recorded pids for it: same pid, other start time.
    let recycled = |offset| ProcessId {
        pid,
        start_time: real.start_time.wrapping_sub(offset),
    };
    let forged = LaunchRecord {
        leaf: recycled(7),
        pgid: pid,
        supervisor: recycled(9),
        ..launch
    };
    let launch_path = env.supervisor.leaves_dir().join(&id).join("launch.json");
    std::fs::write(&launch_path, serde_json::to_vec(&forged).expect("json")).expect("forges");
    let _ = std::fs::remove_file(env.supervisor.leaves_dir().join(&id).join("heartbeat.json"));
    assert!(!forged.leaf.is_alive() && !forged.supervisor.is_alive());
    let mut reader = env.supervisor.open(&id).expect("opens");
    match reader.status().expect("status") {
        LeafStatus::Finished(exit) => {
            assert_eq!(exit.class, ExitClass::SupervisorLost);
            assert_eq!(exit.leaked, 0, "nothing of ours was left to kill");
        }
        other => panic!("the imposter was taken for the supervisor: {other:?}"),
    }
    assert!(real.is_alive(), "the imposter must not be killed");
    imposter.kill().expect("cleans up the imposter");
    let _ = imposter.wait();
}
