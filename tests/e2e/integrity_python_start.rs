//! A dishonest agent against what a Python interpreter reads as it starts, outside
//! every pinned library directory: a user site that did not exist at `run start`, and
//! the directories its start searches (for a zip of its standard library, a
//! `pyvenv.cfg` that moves its prefix, a shared library). Each plants, after RED was
//! accepted, a hook that supplies `sub` only to an implementation carrying a marker,
//! and asks for GREEN with that marker and no implementation: never accepted.

use std::path::Path;
use std::path::PathBuf;

use crate::integrity_gates::CALC;
use crate::integrity_gates::EVIL_HOOK;
use crate::integrity_gates::Locks;
use crate::integrity_gates::STUB;
use crate::integrity_gates::assert_refused;
use crate::integrity_gates::assert_runner_changed;
use crate::integrity_gates::at_green_in;
use crate::integrity_gates::head;
use crate::support::Env;

/// What `python3` on this machine's `PATH` answers to `code`, with `HOME` at `home`.
fn ask_python(code: &str, home: &Path) -> String {
    let out = std::process::Command::new("python3")
        .args(["-c", code])
        .env("HOME", home)
        .output()
        .expect("python3 runs");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

#[test]
fn a_user_site_made_after_run_start_is_never_loaded_by_a_deciding_run() {
    let env = at_green_in(Env::new(), Locks::Hand);
    let red = head(&env);
    let site = PathBuf::from(ask_python(
        "import site; print(site.getusersitepackages())",
        env.home.path(),
    ));
    assert!(
        site.starts_with(env.home.path()) && !site.exists(),
        "no user site at run start: {}",
        site.display()
    );
    // After run start: the user site made, with a module every interpreter start runs.
    std::fs::create_dir_all(&site).expect("user site");
    std::fs::write(site.join("usercustomize.py"), EVIL_HOOK).expect("hook");
    env.write("calc.py", &format!("{CALC}{STUB}# sub comes later\n"));
    let outcome = env.json(&["advance"]);
    assert_refused(&env, &red, outcome, "target_failing");
}

/// A copy of this machine's `python3` in a directory of its own (`<dir>/bin`), whose
/// standard library is the real one (`<dir>/lib/pythonX.Y`, a link), the name of the
/// zip of the standard library it looks for first (`pythonXY.zip`), and where its
/// standard library is under the directory (`lib/pythonX.Y`).
fn interpreter_of_its_own(home: &Path) -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().expect("interpreter dir");
    let real = ask_python(
        "import os, sys; print(os.path.realpath(sys.executable))",
        home,
    );
    let stdlib = ask_python(
        "import sysconfig; print(sysconfig.get_paths()['stdlib'])",
        home,
    );
    let version = ask_python("import sys; print('%d.%d' % sys.version_info[:2])", home);
    std::fs::create_dir_all(dir.path().join("bin")).expect("bin");
    std::fs::create_dir_all(dir.path().join("lib")).expect("lib");
    let exe = dir.path().join(format!("bin/python{version}"));
    std::fs::copy(&real, &exe).expect("copy the interpreter");
    std::os::unix::fs::symlink(&exe, dir.path().join("bin/python3")).expect("python3");
    std::os::unix::fs::symlink(&stdlib, dir.path().join(format!("lib/python{version}")))
        .expect("stdlib");
    (
        dir,
        format!("python{}.zip", version.replace('.', "")),
        format!("lib/python{version}"),
    )
}

#[test]
fn a_file_planted_where_the_interpreter_searches_as_it_starts_refuses_green() {
    for plant in ["zip", "pyvenv.cfg"] {
        let probe = tempfile::tempdir().expect("home");
        let (dir, zip, stdlib) = interpreter_of_its_own(probe.path());
        let elsewhere = tempfile::tempdir().expect("elsewhere");
        let path = format!(
            "{}:{}",
            dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let env = at_green_in(Env::new().with_env("PATH", &path), Locks::Hand);
        let red = head(&env);
        let planted = match plant {
            // A zip of the standard library is on the module path ahead of it: its
            // `sitecustomize` runs at every start.
            "zip" => {
                let at = dir.path().join("lib").join(&zip);
                let made = std::process::Command::new("python3")
                    .args([
                        "-c",
                        "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1], 'w') as z:\n    z.writestr('sitecustomize.py', sys.argv[2])\n",
                    ])
                    .arg(&at)
                    .arg(EVIL_HOOK)
                    .status()
                    .expect("python3 writes the zip");
                assert!(made.success());
                "lib"
            }
            // A `pyvenv.cfg` beside the executable moves the prefix its standard
            // library comes from: to one whose every entry is the real one's, and a
            // `sitecustomize` besides.
            _ => {
                let real = std::fs::read_link(dir.path().join(&stdlib)).expect("stdlib");
                let moved = elsewhere.path().join(&stdlib);
                std::fs::create_dir_all(&moved).expect("moved stdlib");
                for entry in std::fs::read_dir(&real).expect("real stdlib").flatten() {
                    std::os::unix::fs::symlink(entry.path(), moved.join(entry.file_name()))
                        .expect("link");
                }
                std::fs::write(moved.join("sitecustomize.py"), EVIL_HOOK).expect("hook");
                let cfg = format!(
                    "home = {}\ninclude-system-site-packages = true\n",
                    elsewhere.path().join("bin").display()
                );
                std::fs::write(dir.path().join("bin/pyvenv.cfg"), cfg).expect("pyvenv.cfg");
                "bin"
            }
        };
        env.write("calc.py", &format!("{CALC}{STUB}# sub comes later\n"));
        let (code, value) = env.json(&["advance"]);
        let message = value["error"]["message"].as_str().unwrap_or_default();
        let searched = dir.path().join(planted);
        assert!(
            message.contains(&searched.display().to_string())
                && message.contains("searches as it starts"),
            "{plant}: the refusal names the directory searched: {value}"
        );
        assert_runner_changed(&env, &red, (code, &value));
    }
}

/// A committed `pytest.ini` whose `pythonpath` climbs out of the repository: the clean
/// room's checkout would resolve it elsewhere, so `run start` refuses it as bad input,
/// naming the file, the line and the entry, and starts no run.
#[test]
fn a_pythonpath_entry_leading_out_of_the_repository_is_refused_at_run_start() {
    let env = crate::integrity_gates::committed_with(Env::new(), Locks::Hand, "");
    env.write(
        "pytest.ini",
        "[pytest]\npythonpath =\n    .\n    ../shared\n",
    );
    env.commit_all("shared code beside the repository");
    let (code, value) = env.json(&["run", "start", "--plan", ".tdd/plan.md"]);
    assert_eq!(code, 2, "{value}");
    assert_eq!(value["error"]["reason"], "pythonpath_outside", "{value}");
    let message = value["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("pytest.ini:4") && message.contains("../shared"),
        "names the file, the line and the entry: {value}"
    );
    let (_, status) = env.json(&["status"]);
    assert_eq!(status["data"]["active"], false, "no run started: {status}");
}
