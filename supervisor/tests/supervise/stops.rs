//! Stop requests and kill requests.

use libtest_mimic::Trial;
use tdd_supervisor::ExitClass;
use tdd_supervisor::LaunchError;
use tdd_supervisor::StopMode;

use crate::support::Env;
use crate::support::finish;
use crate::support::sh;

pub fn trials() -> Vec<Trial> {
    crate::trials![
        at_leaf_refuses_the_next_launch_until_cleared,
        at_ledger_and_unreadable_requests_do_not_refuse,
        now_kills_the_running_leaf_as_stopped,
        a_kill_request_stops_the_leaf,
    ]
}

fn at_leaf_refuses_the_next_launch_until_cleared() {
    let env = Env::new();
    env.supervisor
        .request_stop(StopMode::AtLeaf)
        .expect("requests");
    match env.supervisor.launch(&sh("exit 0")) {
        Err(LaunchError::StopPending {
            mode: StopMode::AtLeaf,
        }) => {}
        other => panic!(
            "expected a refusal, got {:?}",
            other.map(|leaf| leaf.id().to_owned())
        ),
    }
    assert!(env.supervisor.clear_stop().expect("clears"));
    let mut leaf = env.launch(&sh("exit 0"));
    assert_eq!(finish(&mut leaf).class, ExitClass::Exited { code: 0 });
}

fn at_ledger_and_unreadable_requests_do_not_refuse() {
    let env = Env::new();
    env.supervisor
        .request_stop(StopMode::AtLedger)
        .expect("requests");
    let mut leaf = env.launch(&sh("exit 0"));
    assert_eq!(finish(&mut leaf).class, ExitClass::Exited { code: 0 });
    let stop_file = env.supervisor.state_dir().join(tdd_supervisor::STOP_FILE);
    std::fs::write(&stop_file, "{ not json").expect("garbles the request");
    let read = env.supervisor.read_stop().expect("something is pending");
    assert_eq!((read.mode, read.unreadable), (StopMode::AtLedger, true));
    let mut leaf = env.launch(&sh("exit 0"));
    assert_eq!(finish(&mut leaf).class, ExitClass::Exited { code: 0 });
}

fn now_kills_the_running_leaf_as_stopped() {
    let env = Env::new();
    let mut leaf = env.launch(&sh("exec sleep 1000"));
    let launch = leaf.launch_record().expect("reads").expect("launched");
    env.supervisor
        .request_stop(StopMode::Now)
        .expect("requests");
    let exit = finish(&mut leaf);
    assert_eq!(exit.class, ExitClass::Stopped);
    assert!(!launch.leaf.is_alive());
    assert!(matches!(
        env.supervisor.launch(&sh("exit 0")),
        Err(LaunchError::StopPending {
            mode: StopMode::Now
        })
    ));
}

fn a_kill_request_stops_the_leaf() {
    let env = Env::new();
    let mut leaf = env.launch(&sh("exec sleep 1000"));
    let opened = env.supervisor.open(leaf.id()).expect("opens by id");
    opened
        .kill(tdd_supervisor::Kill::Graceful)
        .expect("requests a kill");
    let exit = finish(&mut leaf);
    assert_eq!(exit.class, ExitClass::Stopped);
    assert!(exit.first_signal_after_ms.is_some());
}
