//! Exit codes and spawn failures, and the leaf's environment.

use libtest_mimic::Trial;
use tdd_supervisor::ExitClass;
use tdd_supervisor::LaunchError;
use tdd_supervisor::LeafSpec;
use tdd_supervisor::LeafState;
use tdd_supervisor::Supervisor;

use crate::support::Env;
use crate::support::PATH;
use crate::support::finish;
use crate::support::sh;

pub fn trials() -> Vec<Trial> {
    crate::trials![
        exit_codes_are_classified_as_exited,
        a_missing_binary_is_spawn_failed,
        a_missing_working_directory_is_spawn_failed,
        the_leaf_gets_exactly_its_allow_listed_environment,
        the_leaf_inherits_no_descriptor_but_stdin_stdout_stderr,
        a_broken_supervisor_program_is_a_launch_error,
    ]
}

fn exit_codes_are_classified_as_exited() {
    let env = Env::new();
    let cases = [
        ("exit 0", 0),
        ("exit 1", 1),
        ("exit 127", 127),
        ("no-such-command-for-tdd-tests", 127),
    ];
    for (script, code) in cases {
        let mut leaf = env.launch(&sh(script));
        let exit = finish(&mut leaf);
        assert_eq!(exit.class, ExitClass::Exited { code }, "for {script:?}");
        assert_eq!(exit.leaked, 0);
    }
}

fn a_missing_binary_is_spawn_failed() {
    let env = Env::new();
    let mut leaf = env.launch(&LeafSpec::new(["/nonexistent/tdd-test-binary"]).env("PATH", PATH));
    let exit = finish(&mut leaf);
    match &exit.class {
        ExitClass::SpawnFailed { error } => {
            assert!(error.contains("No such file"), "{error}");
        }
        other => panic!("expected spawn_failed, got {other}"),
    }
    assert!(
        leaf.launch_record().expect("reads").is_none(),
        "nothing was launched"
    );
    let mut leaf = env.launch(&LeafSpec::new(["tdd-no-such-program-on-path"]).env("PATH", PATH));
    assert!(matches!(
        finish(&mut leaf).class,
        ExitClass::SpawnFailed { .. }
    ));
}

fn a_missing_working_directory_is_spawn_failed() {
    let env = Env::new();
    let spec = sh("exit 0").cwd(env.path("no-such-dir"));
    let mut leaf = env.launch(&spec);
    assert!(matches!(
        finish(&mut leaf).class,
        ExitClass::SpawnFailed { .. }
    ));
}

fn the_leaf_gets_exactly_its_allow_listed_environment() {
    let env = Env::new();
    let spec = LeafSpec::new(["/usr/bin/env"])
        .env("PATH", PATH)
        .env("TDD_TEST_VALUE", "kept")
        .id_env("TDD_TEST_LEAF");
    let mut leaf = env.launch(&spec);
    assert_eq!(finish(&mut leaf).class, ExitClass::Exited { code: 0 });
    let out = std::fs::read_to_string(leaf.stdout_path()).expect("stdout");
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    let id_line = format!("TDD_TEST_LEAF={}", leaf.id());
    let expected = [
        format!("PATH={PATH}"),
        id_line,
        String::from("TDD_TEST_VALUE=kept"),
    ];
    assert_eq!(lines, expected);
}

fn a_broken_supervisor_program_is_a_launch_error() {
    let temp = tempfile::tempdir().expect("temp dir");
    let state = temp.path().join("state");
    let exits_at_once = Supervisor::new(&state, "/bin/false", Vec::<String>::new());
    match exits_at_once.launch(&sh("exit 0")) {
        Err(LaunchError::SupervisorFailed { .. }) => {}
        other => panic!(
            "expected SupervisorFailed, got {:?}",
            other.map(|leaf| leaf.id().to_owned())
        ),
    }
    let missing = Supervisor::new(&state, "/nonexistent/tdd", Vec::<String>::new());
    assert!(matches!(
        missing.launch(&sh("exit 0")),
        Err(LaunchError::SpawnSupervisor { .. })
    ));
    // Both attempts are recorded as finished, so no listing shows them starting for ever.
    let list = exits_at_once.list().expect("lists");
    let classes: Vec<_> = list
        .iter()
        .map(|leaf| (leaf.state, leaf.class.clone()))
        .collect();
    assert_eq!(classes.len(), 2);
    assert!(
        classes
            .iter()
            .all(|(state, _)| *state == LeafState::Finished),
        "{classes:?}"
    );
    assert!(
        classes
            .iter()
            .any(|(_, class)| *class == Some(ExitClass::SupervisorLost))
    );
    assert!(
        classes
            .iter()
            .any(|(_, class)| matches!(class, Some(ExitClass::SpawnFailed { .. })))
    );
}

fn the_leaf_inherits_no_descriptor_but_stdin_stdout_stderr() {
    let env = Env::new();
    // A pipe without close-on-exec, as a careless parent of the caller might leave.
    let (reader, writer) = nix::unistd::pipe().expect("pipe");
    let mut leaf = env.launch(&sh("ls /proc/$$/fd"));
    assert_eq!(finish(&mut leaf).class, ExitClass::Exited { code: 0 });
    let out = std::fs::read_to_string(leaf.stdout_path()).expect("stdout");
    assert_eq!(out, "0\n1\n2\n");
    drop((reader, writer));
}
