//! Kills we did not make: `killed_external`, and a lost supervisor.

use std::time::Duration;

use libtest_mimic::Trial;
use nix::sys::signal::Signal as NixSignal;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use tdd_supervisor::ExitClass;
use tdd_supervisor::Signal;

use crate::support::Env;
use crate::support::finish;
use crate::support::group_members;
use crate::support::sh;
use crate::support::wait_until;

pub fn trials() -> Vec<Trial> {
    crate::trials![
        sigkill_of_the_leaf_from_outside_is_killed_external,
        sigterm_to_the_supervisor_is_passed_on_and_recorded,
        sigkill_of_the_supervisor_is_supervisor_lost_and_the_group_dies,
    ]
}

fn sigkill_of_the_leaf_from_outside_is_killed_external() {
    let env = Env::new();
    let mut leaf = env.launch(&sh("exec sleep 1000"));
    let launch = leaf.launch_record().expect("reads").expect("launched");
    assert!(launch.leaf.is_alive());
    kill(Pid::from_raw(launch.leaf.pid), NixSignal::SIGKILL).expect("kill -9 the leaf");
    let exit = finish(&mut leaf);
    assert_eq!(
        exit.class,
        ExitClass::KilledExternal {
            signal: Signal::KILL
        }
    );
    assert_eq!(
        exit.first_signal_after_ms, None,
        "the supervisor sent nothing"
    );
}

fn sigterm_to_the_supervisor_is_passed_on_and_recorded() {
    let env = Env::new();
    let mut leaf = env.launch(&sh("sleep 1000 & exec sleep 1000").grace(Duration::from_secs(5)));
    let launch = leaf.launch_record().expect("reads").expect("launched");
    wait_until("both sleeps in the group", || {
        group_members(launch.pgid).len() == 2
    });
    kill(Pid::from_raw(launch.supervisor.pid), NixSignal::SIGTERM).expect("kill the supervisor");
    let exit = finish(&mut leaf);
    assert_eq!(
        exit.class,
        ExitClass::KilledExternal {
            signal: Signal::TERM
        }
    );
    assert!(group_members(launch.pgid).is_empty());
}

fn sigkill_of_the_supervisor_is_supervisor_lost_and_the_group_dies() {
    let env = Env::new();
    let leaf = env.launch(&sh("sleep 1000 & exec sleep 1000"));
    let id = leaf.id().to_owned();
    let launch = leaf.launch_record().expect("reads").expect("launched");
    wait_until("both sleeps in the group", || {
        group_members(launch.pgid).len() == 2
    });
    kill(Pid::from_raw(launch.supervisor.pid), NixSignal::SIGKILL).expect("kill -9 the supervisor");
    // Another process's view: a handle opened by id knows the supervisor only by its
    // recorded pid and start time. The launching handle reaps the supervisor.
    drop(leaf);
    let mut reader = env.supervisor.open(&id).expect("opens by id");
    let exit = finish(&mut reader);
    assert_eq!(exit.class, ExitClass::SupervisorLost);
    assert_eq!(exit.leaked, 2, "{exit:?}");
    assert!(
        group_members(launch.pgid).is_empty(),
        "the leaf's group is gone"
    );
    assert!(!launch.leaf.is_alive());
}
