//! No descendant outlives its leaf: background jobs, `setsid`, double forks.

use libtest_mimic::Trial;
use tdd_supervisor::ExitClass;

use crate::support::Env;
use crate::support::finish;
use crate::support::helper;
use crate::support::pid_from_file;
use crate::support::session_of;
use crate::support::sh;
use crate::support::wait_until;

pub fn trials() -> Vec<Trial> {
    crate::trials![
        a_background_grandchild_does_not_outlive_the_leaf,
        a_grandchild_that_calls_setsid_does_not_outlive_the_leaf,
        a_double_forked_daemon_does_not_outlive_the_leaf,
    ]
}

/// The leaf starts `spawn` in the background, writes its pid, and exits once the
/// test creates the go file. With `new_session`, the test first waits until the
/// grandchild has left the supervisor's session.
fn leaves_a_grandchild_behind(spawn: &str, new_session: bool) -> ExitClassAndLeak {
    let env = Env::new();
    let pid_file = env.path("grandchild.pid");
    let go_file = env.path("go");
    let script = format!(
        "{spawn} & echo $! > '{pid}.tmp' && mv '{pid}.tmp' '{pid}'; \
         while [ ! -e '{go}' ]; do sleep 0.02; done",
        pid = pid_file.display(),
        go = go_file.display(),
    );
    let mut leaf = env.launch(&sh(&script));
    let launch = leaf.launch_record().expect("reads").expect("launched");
    let grandchild = pid_from_file(&pid_file);
    let in_our_session = || session_of(grandchild.pid) == Some(launch.supervisor.pid);
    if new_session {
        wait_until("the grandchild to call setsid", || !in_our_session());
    } else {
        assert!(in_our_session());
    }
    std::fs::write(&go_file, "").expect("go");
    let exit = finish(&mut leaf);
    assert!(
        !grandchild.is_alive(),
        "grandchild {grandchild:?} survived the leaf"
    );
    (exit.class, exit.leaked)
}

type ExitClassAndLeak = (ExitClass, u32);

fn a_background_grandchild_does_not_outlive_the_leaf() {
    let (class, leaked) = leaves_a_grandchild_behind("sleep 1000", false);
    assert_eq!(class, ExitClass::Exited { code: 0 });
    assert!(leaked >= 1);
}

fn a_grandchild_that_calls_setsid_does_not_outlive_the_leaf() {
    // Run in the background from a non-interactive shell, `setsid` is not a group
    // leader, so it calls setsid(2) itself and execs sleep under the same pid.
    let (class, leaked) = leaves_a_grandchild_behind("setsid sleep 1000", true);
    assert_eq!(class, ExitClass::Exited { code: 0 });
    assert!(leaked >= 1);
}

fn a_double_forked_daemon_does_not_outlive_the_leaf() {
    let env = Env::new();
    let pid_file = env.path("daemon.pid");
    let go_file = env.path("go");
    let spec = helper(&[
        "double-fork",
        &pid_file.to_string_lossy(),
        &go_file.to_string_lossy(),
    ]);
    let mut leaf = env.launch(&spec);
    let launch = leaf.launch_record().expect("reads").expect("launched");
    let daemon = pid_from_file(&pid_file);
    assert_ne!(
        session_of(daemon.pid),
        Some(launch.supervisor.pid),
        "the daemon left the session"
    );
    std::fs::write(&go_file, "").expect("go");
    let exit = finish(&mut leaf);
    assert_eq!(exit.class, ExitClass::Exited { code: 0 }, "{exit:?}");
    assert!(exit.leaked >= 1);
    assert!(!daemon.is_alive(), "daemon {daemon:?} survived the leaf");
}
