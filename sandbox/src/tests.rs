use std::path::Path;
use std::process::Command;

use super::*;

/// Runs `sh -c script` under `policy`; its exit code and stderr.
fn confined(policy: &Policy, script: &str) -> (i32, String) {
    let confinement = Confinement::prepare(policy).expect("rules");
    let mut command = Command::new("/bin/sh");
    command.args(["-c", script]);
    confinement.install(&mut command);
    let out = command.output().expect("sh runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn dirs() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    for sub in ["work/.git/hooks", "work/src", "other", "home/.config/gh"] {
        std::fs::create_dir_all(root.join(sub)).expect("mkdir");
    }
    std::fs::write(root.join("home/.git-credentials"), "secret").expect("write");
    std::fs::write(root.join("home/.config/gh/hosts.yml"), "token").expect("write");
    std::fs::write(root.join("home/.profile"), "ok").expect("write");
    (dir, root)
}

fn policy(root: &Path) -> Policy {
    Policy {
        write: vec![root.join("work")],
        deny_write: vec![root.join("work/.git")],
        deny_read: vec![
            root.join("home/.git-credentials"),
            root.join("home/.config/gh"),
        ],
        write_files: vec![PathBuf::from("/dev/null")],
        without_landlock: false,
    }
}

#[test]
fn a_confined_process_writes_its_tree_and_nothing_else() {
    if !probe().confines() {
        // A kernel without Landlock: what this test checks cannot hold here, and the
        // level says so (checked in `the_level_follows_the_kernel`).
        return;
    }
    let (_dir, root) = dirs();
    let p = policy(&root);
    let r = root.display();
    let (code, err) = confined(
        &p,
        &format!(
            "echo ok > {r}/work/src/lib.rs && cat {r}/home/.profile >/dev/null && ls {r}/home >/dev/null"
        ),
    );
    assert_eq!(code, 0, "{err}");
    for script in [
        format!("echo x > {r}/work/.git/hooks/pre-commit"),
        format!("echo x > {r}/other/file"),
        format!("cat {r}/home/.git-credentials"),
        format!("cat {r}/home/.config/gh/hosts.yml"),
        format!("rm -rf {r}/work/.git"),
        format!("mv {r}/work/.git {r}/work/src/moved"),
    ] {
        let (code, _) = confined(&p, &script);
        assert_ne!(code, 0, "{script} succeeded");
    }
    assert!(root.join("work/.git/hooks").is_dir());
    assert_eq!(
        std::fs::read_to_string(root.join("work/src/lib.rs")).expect("lib"),
        "ok\n"
    );
    // With read-only mounts, the directory holding `.git` stays writable whole.
    if mounts::available() {
        let (code, err) = confined(
            &p,
            &format!("echo new > {r}/work/top && mv {r}/work/top {r}/work/top2"),
        );
        assert_eq!(code, 0, "{err}");
        let (code, _) = confined(&p, &format!("touch {r}/work/.git/new"));
        assert_ne!(code, 0, "a file was made in .git");
        assert!(!root.join("work/.git/new").exists());
    }
    // A process started by the confined one is confined too.
    let (code, _) = confined(&p, &format!("sh -c 'echo x > {r}/other/nested'"));
    assert_ne!(code, 0);
    assert!(!root.join("other/nested").exists());
}

#[test]
fn the_level_follows_the_kernel_and_the_override() {
    let level = probe();
    assert!(matches!(
        level,
        Level::Full { .. } | Level::Partial { .. } | Level::None { .. }
    ));
    assert!(Confinement::disabled().level() == &Level::Disabled);
    assert_eq!(Level::Full { abi: 7 }.label(), "landlock-v7");
    assert_eq!(
        Level::None {
            reason: String::new()
        }
        .label(),
        "none"
    );
}
