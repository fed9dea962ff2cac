use std::os::unix::fs::PermissionsExt;

use proptest::prelude::*;

use std::ffi::OsStr;

use super::*;

/// A `sleep` that lives until the test kills it (or the guard drops).
struct Sleeper(std::process::Child);

impl Sleeper {
    fn start() -> Sleeper {
        Sleeper(
            std::process::Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("sleep starts"),
        )
    }

    fn holder(&self) -> Holder {
        Holder::of(self.0.id() as i32).expect("the sleeper's stat")
    }

    /// Kills and reaps it: its pid then names no process (or, reused, another one).
    fn kill(&mut self) {
        self.0.kill().expect("kill");
        self.0.wait().expect("reap");
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn lease_dir() -> (tempfile::TempDir, LeaseDir) {
    let temp = tempfile::tempdir().expect("tempdir");
    let dir = LeaseDir::at(temp.path().join("leases"));
    (temp, dir)
}

fn names(dir: &LeaseDir) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir.path())
        .expect("read dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_share_is_the_budget_divided_rounding_down_and_never_zero() {
    assert_eq!(share(7, 3), 2);
    assert_eq!(share(8, 2), 4);
    assert_eq!(share(2, 3), 1);
    assert_eq!(share(1, 1), 1);
    // No lease (a `tdd test` by hand): the whole budget.
    assert_eq!(share(4, 0), 4);
}

proptest! {
    #[test]
    fn shares_fit_the_budget_and_waste_less_than_a_core_per_holder(
        budget in 1usize..512,
        live in 0usize..64,
    ) {
        let each = share(budget, live);
        prop_assert!(each >= 1);
        prop_assert!(each <= budget);
        if live == 0 {
            prop_assert_eq!(each, budget);
        } else if live <= budget {
            prop_assert!(each * live <= budget);
            prop_assert!((each + 1) * live > budget);
        }
    }
}

#[test]
fn a_budget_is_a_whole_number_of_one_or_more_else_the_machines() {
    let parse = |value: Option<&str>| Budget::parse(value.map(OsStr::new), 4);
    let machine = Budget {
        cores: 4,
        from: BudgetSource::Machine,
    };
    assert_eq!(parse(None).expect("unset"), machine);
    assert_eq!(parse(Some("")).expect("empty"), machine);
    assert_eq!(
        parse(Some("3")).expect("3"),
        Budget {
            cores: 3,
            from: BudgetSource::Variable
        }
    );
    for bad in ["0", "-1", "two", " 2", "2.5", "1e3"] {
        let err = parse(Some(bad)).expect_err(bad);
        assert!(matches!(err, LeaseError::BadBudget { ref value } if value == bad));
        assert!(err.to_string().contains(&format!("`{bad}`")), "{err}");
    }
    assert_eq!(Budget::parse(None, 0).expect("no cores").cores, 1);
}

#[test]
fn the_directory_is_the_override_else_the_runtime_directory_else_the_temporary_one() {
    let runtime = tempfile::tempdir().expect("runtime dir");
    let runtime_path = runtime.path().as_os_str().to_owned();
    let temp = Path::new("/var/tmp-x");
    let with = |vars: &[(&str, &OsStr)]| {
        LeaseDir::resolve_with(
            |name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_os_string())
            },
            temp,
            1000,
        )
    };
    let over = with(&[
        (LEASE_DIR_VAR, OsStr::new("/x/leases")),
        ("XDG_RUNTIME_DIR", &runtime_path),
    ]);
    assert_eq!(over, LeaseDir::at("/x/leases"));
    let relative = with(&[(LEASE_DIR_VAR, OsStr::new("rel/leases"))]);
    assert_eq!(
        relative.path(),
        std::env::current_dir().expect("cwd").join("rel/leases")
    );
    let xdg = with(&[("XDG_RUNTIME_DIR", &runtime_path)]);
    assert_eq!(xdg.path(), runtime.path().join("tdd/leases"));
    assert_eq!(xdg.private, [runtime.path().join("tdd"), xdg.path.clone()]);
    let fallback = Path::new("/var/tmp-x/tdd-1000/leases");
    for vars in [
        &[][..],
        &[(LEASE_DIR_VAR, OsStr::new(""))][..],
        &[("XDG_RUNTIME_DIR", OsStr::new("relative/run"))][..],
        &[("XDG_RUNTIME_DIR", OsStr::new("/no/such/runtime/dir"))][..],
    ] {
        let dir = with(vars);
        assert_eq!(dir.path(), fallback, "{vars:?}");
        assert_eq!(
            dir.private,
            [fallback.parent().expect("parent"), fallback],
            "{vars:?}"
        );
    }
}

#[test]
fn a_lease_counts_while_held_and_is_released_when_dropped() {
    let (_temp, dir) = lease_dir();
    assert_eq!(dir.live().expect("no directory yet"), []);
    let lease = dir.take(Path::new("/work/tree")).expect("take");
    let me = Holder::this_process().expect("me");
    let live = dir.live().expect("live");
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].holder(), me);
    assert_eq!(live[0].work_tree, Path::new("/work/tree"));
    assert_eq!(&live[0], lease.record());
    // Written whole and renamed: no temporary file is left beside it.
    assert_eq!(names(&dir).len(), 1, "{:?}", names(&dir));
    let mode = fs::metadata(lease.path())
        .expect("lease")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    let mode = fs::metadata(dir.path()).expect("dir").permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let path = lease.path().to_path_buf();
    drop(lease);
    assert!(!path.exists());
    assert_eq!(dir.live().expect("live"), []);
}

#[test]
fn the_lease_of_a_dead_holder_is_swept_when_leases_are_counted() {
    let (_temp, dir) = lease_dir();
    let mut sleepers = [Sleeper::start(), Sleeper::start()];
    let leases: Vec<Lease> = sleepers
        .iter()
        .map(|s| dir.take_for(s.holder(), Path::new("/w")).expect("take"))
        .collect();
    assert_eq!(dir.live().expect("live").len(), 2);
    sleepers[0].kill();
    let live = dir.live().expect("live");
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].holder(), sleepers[1].holder());
    // Swept by the count, not by its guard, which is still held.
    assert!(!leases[0].path().exists());
    assert!(leases[1].path().exists());
    // A pid whose process started at another time is not the holder.
    let me = Holder::this_process().expect("me");
    let other = Holder {
        pid: me.pid,
        start_time: me.start_time + 1,
    };
    let recycled = dir.take_for(other, Path::new("/w")).expect("take");
    assert_eq!(dir.live().expect("live").len(), 1);
    assert!(!recycled.path().exists());
}

#[test]
fn a_lease_being_taken_is_never_seen_half_written() {
    // A count that read a lease before its content was written would sweep it as corrupt;
    // written to a temporary file and renamed, it is seen whole or not at all.
    let (_temp, dir) = lease_dir();
    let _first = dir
        .take(Path::new("/w"))
        .expect("take (makes the directory)");
    let done = std::sync::atomic::AtomicBool::new(false);
    let taken = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                dir.live().expect("live");
            }
        });
        // Collected before any is checked, so the reader always stops.
        let taken: Vec<Result<Lease, LeaseError>> =
            (0..300).map(|_| dir.take(Path::new("/w"))).collect();
        done.store(true, Ordering::Relaxed);
        taken
    });
    let taken: Vec<Lease> = taken.into_iter().collect::<Result<_, _>>().expect("take");
    assert!(taken.iter().all(|l| l.path().exists()));
    assert_eq!(dir.live().expect("live").len(), 301);
}

#[test]
fn a_file_that_is_not_a_lease_is_never_counted_and_the_corrupt_ones_are_swept() {
    let (_temp, dir) = lease_dir();
    let held = dir.take(Path::new("/w")).expect("take");
    let path = |name: &str| dir.path().join(name);
    fs::write(path("lease-1-2-3.json"), "{ not json").expect("garbage");
    fs::write(path("lease-4-5-6.json"), "").expect("empty");
    // A lease of this version with a field missing.
    fs::write(path("lease-7-8-9.json"), r#"{"version":1,"pid":1}"#).expect("partial");
    std::os::unix::fs::symlink(held.path(), path("lease-link.json")).expect("link");
    nix::unistd::mkfifo(
        &path("lease-pipe.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("fifo");
    // Another version's lease, a directory named like a lease, and a file of no one's.
    let future =
        r#"{"version":2,"pid":1,"start_time":1,"work_tree":"/w","taken_at":"x","cores":4}"#;
    fs::write(path("lease-future.json"), future).expect("future");
    fs::create_dir(path("lease-dir.json")).expect("dir");
    fs::write(path("notes.txt"), "mine").expect("notes");
    let live = dir.live().expect("a corrupt lease is no error");
    assert_eq!(live, [held.record().clone()]);
    let held_name = held
        .path()
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let mut left = vec![
        "lease-dir.json".to_string(),
        "lease-future.json".to_string(),
        held_name,
        "notes.txt".to_string(),
    ];
    left.sort();
    assert_eq!(names(&dir), left);
}

#[test]
fn a_half_written_lease_is_swept_only_once_its_writer_is_gone() {
    let (_temp, dir) = lease_dir();
    let _lease = dir
        .take(Path::new("/w"))
        .expect("take (makes the directory)");
    let me = Holder::this_process().expect("me");
    let mut gone = Sleeper::start();
    let gone_holder = gone.holder();
    gone.kill();
    let mine = format!("lease-{}-{}-99.json.tmp", me.pid, me.start_time);
    let theirs = format!(
        "lease-{}-{}-0.json.tmp",
        gone_holder.pid, gone_holder.start_time
    );
    for name in [&mine, &theirs] {
        fs::write(dir.path().join(name), "{").expect("temporary");
    }
    assert_eq!(dir.live().expect("live").len(), 1);
    assert!(dir.path().join(&mine).exists());
    assert!(!dir.path().join(&theirs).exists());
}

#[test]
fn a_directory_others_could_change_is_refused() {
    let temp = tempfile::tempdir().expect("tempdir");
    let open = temp.path().join("open");
    fs::create_dir(&open).expect("dir");
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).expect("chmod");
    let dir = LeaseDir::at(&open);
    assert!(matches!(
        dir.take(Path::new("/w")),
        Err(LeaseError::NotPrivate { ref path }) if path == &open
    ));
    assert!(matches!(dir.live(), Err(LeaseError::NotPrivate { .. })));
    let real = temp.path().join("real");
    fs::create_dir(&real).expect("dir");
    let link = temp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).expect("link");
    assert!(matches!(
        LeaseDir::at(&link).take(Path::new("/w")),
        Err(LeaseError::NotPrivate { .. })
    ));
    assert_eq!(fs::read_dir(&real).expect("real").count(), 0);
}

#[test]
fn a_survey_shares_the_budget_among_the_live_leases() {
    let (_temp, dir) = lease_dir();
    let sleepers = [Sleeper::start(), Sleeper::start(), Sleeper::start()];
    let _leases: Vec<Lease> = sleepers
        .iter()
        .map(|s| dir.take_for(s.holder(), Path::new("/w")).expect("take"))
        .collect();
    let budget = Budget {
        cores: 7,
        from: BudgetSource::Variable,
    };
    let survey = dir.survey(budget).expect("survey");
    assert_eq!(survey.leases.len(), 3);
    assert_eq!(survey.workers, 2);
    assert_eq!(survey.dir, dir.path());
}
