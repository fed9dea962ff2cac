//! What a Go or cargo runner loads from outside the commit besides its own executable:
//! the toolchain's installation (`GOROOT`, the rustc sysroot) and the sources of the
//! project's dependencies that live outside the work tree (Go's module cache and
//! `replace` directories, cargo's registry, git checkouts and path dependencies).
//!
//! Each is asked once at `run start`, of the pinned toolchain, the way a deciding run
//! starts it (the captured environment, the project's `env`, its root as the working
//! directory): `go env GOROOT`, `go list -m all`, `rustc --print sysroot` and
//! `cargo metadata`. None of them runs project code: no build script, no test, no
//! package script. What they name is then fingerprinted like an interpreter's library
//! ([`super::InstallPin`]).

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::exec::Scratch;
use crate::model::Exit;
use crate::process;
use crate::process::ProcessSpec;

/// How long a toolchain may take to answer (`cargo metadata` on a large workspace reads
/// every manifest).
const ASK_TIMEOUT: Duration = Duration::from_secs(60);

/// What a toolchain said it loads, ready to pin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolchainInstall {
    /// What to fingerprint, each with what it is in words.
    pub roots: Vec<(PathBuf, String)>,
    /// Variables a deciding run gets on top of the captured ones, so that it starts
    /// the toolchain asked here whatever a version manager says later
    /// (`RUSTUP_TOOLCHAIN` set to the sysroot, `GOTOOLCHAIN=local`).
    pub vars: Vec<(String, String)>,
    /// A runner name a deciding run starts by this executable instead (`go` → the
    /// `bin/go` of the `GOROOT` asked here).
    pub interpreter: Option<(String, PathBuf)>,
}

/// A toolchain that did not answer a question within [`ASK_TIMEOUT`]: what it would
/// load cannot be pinned, and a deciding run could be made to load anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{command}` did not answer within {seconds} s")]
pub struct Unanswered {
    /// The question, as a command line.
    pub command: String,
    /// How long it was given.
    pub seconds: u64,
}

/// `argv` run in `cwd` with exactly `env`, unconfined (it is the toolchain the user
/// installed, never a file of the work tree): its standard output when it exits 0,
/// `None` when it fails or cannot be started (a run that needs it fails on its own),
/// and [`Unanswered`] when it does not end in time (it waits on something: a named
/// pipe its configuration names, say).
pub(crate) fn ask(
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
) -> Result<Option<Vec<u8>>, Unanswered> {
    ask_within(argv, env, cwd, ASK_TIMEOUT, None)
}

/// [`ask`] for a question that starts an interpreter in the project, which may load a
/// file of it (a `sitecustomize` a `PYTHONPATH` of the project names, say): asked
/// confined, writing nothing anywhere, in processes and a network of its own where the
/// kernel allows. Where no confinement can be built, it is asked as [`ask`] does.
pub(crate) fn ask_writing_nothing(
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
) -> Result<Option<Vec<u8>>, Unanswered> {
    let policy = tdd_sandbox::Policy {
        write_files: tdd_sandbox::DEVICES.iter().map(PathBuf::from).collect(),
        own_processes: true,
        own_network: true,
        ..tdd_sandbox::Policy::default()
    };
    let confinement = tdd_sandbox::Confinement::prepare(&policy).ok();
    ask_within(argv, env, cwd, ASK_TIMEOUT, confinement)
}

/// [`ask`], given `timeout` to answer, confined by `confinement` if any.
fn ask_within(
    argv: &[String],
    env: &[(String, String)],
    cwd: &Path,
    timeout: Duration,
    confinement: Option<tdd_sandbox::Confinement>,
) -> Result<Option<Vec<u8>>, Unanswered> {
    let Ok(scratch) = Scratch::new() else {
        return Ok(None);
    };
    let (Ok(stdout), Ok(stderr)) = (scratch.capture(), scratch.capture()) else {
        return Ok(None);
    };
    let finished = process::run(&ProcessSpec {
        argv,
        cwd,
        env,
        clear_env: true,
        timeout,
        stdout: &stdout,
        stderr: &stderr,
        confinement,
        tick: None,
    });
    if let Exit::TimedOut { .. } = finished.exit {
        return Err(Unanswered {
            command: argv.join(" "),
            seconds: timeout.as_secs(),
        });
    }
    if finished.exit != (Exit::Code { code: 0 }) {
        tracing::warn!(program = ?argv.first(), exit = ?finished.exit, "the toolchain did not say what it loads");
        return Ok(None);
    }
    Ok(crate::exec::read_capped(&stdout))
}

fn argv(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_string()).collect()
}

/// What the cargo toolchain asked in `cwd` loads: its sysroot (programs, the compiler's
/// libraries, the standard library of every target installed) and the source
/// directory of every package of the workspace's lock file that is outside `cwd`'s
/// work tree. `None` when rustc does not say where its sysroot is.
pub(crate) fn cargo(
    env: &[(String, String)],
    cwd: &Path,
) -> Result<Option<ToolchainInstall>, Unanswered> {
    let Some(sysroot) = ask(&argv(&["rustc", "--print", "sysroot"]), env, cwd)? else {
        return Ok(None);
    };
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot).trim());
    if !sysroot.is_absolute() || !sysroot.is_dir() {
        return Ok(None);
    }
    let mut roots = sysroot_roots(&sysroot);
    // `--frozen`: the lock file is read as it is and never written, nothing is fetched.
    // A workspace with no lock file yet (cargo would have to write one into the work
    // tree) names its members' path dependencies only; the registry's sources its
    // deciding runs resolve are then not pinned.
    // cargo keeps what it learnt of rustc in the target directory: a scratch one, so
    // that asking writes nothing into the project's or a directory it shares.
    let Ok(scratch) = Scratch::new() else {
        return Ok(None);
    };
    let mut env = env.to_vec();
    env.push((
        "CARGO_TARGET_DIR".into(),
        scratch.path("target").display().to_string(),
    ));
    // Only the host's packages: a lock file also names other platforms' (`windows`),
    // which are never downloaded, and `--frozen` would then refuse to answer at all.
    let host = ask(&argv(&["rustc", "-vV"]), &env, cwd)?.and_then(|out| {
        String::from_utf8_lossy(&out)
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(|h| h.trim().to_string()))
    });
    let mut full = argv(&["cargo", "metadata", "--format-version", "1", "--frozen"]);
    if let Some(host) = host {
        full.extend(["--filter-platform".to_string(), host]);
    }
    let metadata = match ask(&full, &env, cwd)? {
        Some(metadata) => Some(metadata),
        None => {
            let no_deps = [
                "cargo",
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ];
            ask(&argv(&no_deps), &env, cwd)?
        }
    };
    roots.extend(
        metadata
            .map(|json| package_dirs(&json))
            .unwrap_or_default()
            .into_iter()
            .map(|dir| (dir, super::CARGO_DEPENDENCY.to_string())),
    );
    Ok(Some(ToolchainInstall {
        roots,
        // rustup resolves `cargo` and `rustc` through a version manager's choice (a
        // default, an override) that can change after run start: a deciding run names
        // the toolchain by its directory. Without rustup the variable is never read.
        vars: vec![("RUSTUP_TOOLCHAIN".into(), sysroot.display().to_string())],
        interpreter: None,
    }))
}

/// The parts of a rustc sysroot a build loads: `bin/` (rustc, cargo, rustdoc), the
/// compiler's own libraries in `lib/`, and `lib/rustlib/<target>/` for every target
/// installed (the standard library's compiled crates, the linker wrappers). Its
/// documentation, the `rust-src` component and the debugger scripts are left out.
pub(crate) fn sysroot_roots(sysroot: &Path) -> Vec<(PathBuf, String)> {
    let mut roots = vec![(
        sysroot.join("bin"),
        "the Rust toolchain's programs".to_string(),
    )];
    let lib = sysroot.join("lib");
    roots.extend(
        entries(&lib)
            .into_iter()
            .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_file()))
            .map(|p| (p, "a library of the Rust compiler".to_string())),
    );
    roots.extend(
        entries(&lib.join("rustlib"))
            .into_iter()
            .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_dir()))
            .filter(|p| !p.ends_with("src") && !p.ends_with("etc"))
            .map(|p| (p, "the Rust standard library".to_string())),
    );
    roots.retain(|(p, _)| p.exists());
    roots
}

/// The directory of every package `cargo metadata` names (its manifest's parent), and
/// of every path dependency its packages declare.
fn package_dirs(json: &[u8]) -> Vec<PathBuf> {
    #[derive(Deserialize)]
    struct Metadata {
        packages: Vec<Package>,
    }
    #[derive(Deserialize)]
    struct Package {
        manifest_path: PathBuf,
        #[serde(default)]
        dependencies: Vec<Dependency>,
    }
    #[derive(Deserialize)]
    struct Dependency {
        #[serde(default)]
        path: Option<PathBuf>,
    }
    let Ok(metadata) = serde_json::from_slice::<Metadata>(json) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = metadata
        .packages
        .into_iter()
        .flat_map(|p| {
            let dir = p.manifest_path.parent().map(Path::to_path_buf);
            dir.into_iter()
                .chain(p.dependencies.into_iter().filter_map(|d| d.path))
        })
        .filter(|dir| dir.is_absolute())
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// What the Go toolchain asked in `cwd` loads: its `GOROOT` (the standard library's
/// sources, the compiler and linker, `go.env`) and the directory of every module of
/// the build list that has one (the module cache, a `replace` directory). `None` when
/// `go env GOROOT` does not answer.
pub(crate) fn go(
    env: &[(String, String)],
    cwd: &Path,
) -> Result<Option<ToolchainInstall>, Unanswered> {
    let Some(goroot) = ask(&argv(&["go", "env", "GOROOT"]), env, cwd)? else {
        return Ok(None);
    };
    let goroot = PathBuf::from(String::from_utf8_lossy(&goroot).trim());
    if !goroot.is_absolute() || !goroot.is_dir() {
        return Ok(None);
    }
    let mut roots = goroot_roots(&goroot);
    // Read-only and offline: nothing is fetched, `go.mod` and `go.sum` are never
    // rewritten. A module not downloaded has no directory to pin.
    let mut ask_env = env.to_vec();
    ask_env.push(("GOFLAGS".into(), "-mod=readonly".into()));
    ask_env.push(("GOPROXY".into(), "off".into()));
    let modules = ask(
        &argv(&["go", "list", "-m", "-f", "{{.Dir}}", "all"]),
        &ask_env,
        cwd,
    )?;
    roots.extend(
        modules
            .map(|out| {
                String::from_utf8_lossy(&out)
                    .lines()
                    .map(PathBuf::from)
                    .filter(|p| p.is_absolute())
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
            .into_iter()
            .map(|dir| (dir, super::GO_MODULE.to_string())),
    );
    let go = goroot.join("bin").join("go");
    Ok(Some(ToolchainInstall {
        roots,
        // The toolchain asked here is the one a deciding run starts: no switch to
        // another named by `go.mod` or a version manager afterwards.
        vars: vec![("GOTOOLCHAIN".into(), "local".into())],
        interpreter: go.is_file().then(|| ("go".to_string(), go)),
    }))
}

/// The parts of a `GOROOT` a build loads: every top-level entry but the API lists,
/// the documentation, `misc` and the toolchain's own tests, with `src` pinned by its
/// packages but `cmd` (the go command's own sources, which no build of a project
/// compiles). A link (a distribution's `src -> ../../share/go/src`) is pinned where
/// it leads.
pub(crate) fn goroot_roots(goroot: &Path) -> Vec<(PathBuf, String)> {
    let real = |p: PathBuf| {
        if p.is_symlink() {
            std::fs::canonicalize(&p).ok()
        } else {
            Some(p)
        }
    };
    let mut roots = Vec::new();
    for entry in entries(goroot) {
        if ["api", "doc", "misc", "test"]
            .iter()
            .any(|skip| entry.ends_with(skip))
        {
            continue;
        }
        let Some(entry) = real(entry) else {
            continue;
        };
        if entry.file_name().is_some_and(|n| n == "src") && entry.is_dir() {
            roots.extend(
                entries(&entry)
                    .into_iter()
                    .filter(|p| !p.ends_with("cmd"))
                    .filter_map(real),
            );
        } else {
            roots.push(entry);
        }
    }
    roots
        .into_iter()
        // A link that leads to the file system's root names nothing to pin.
        .filter(|p| p.parent().is_some())
        .map(|p| (p, "the Go toolchain (GOROOT)".to_string()))
        .collect()
}

/// The entries of `dir`, sorted; empty when it cannot be read.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toolchain that waits (on a named pipe, say) is told apart from one that fails:
    /// the first leaves what it loads unknown, and says which question it was.
    #[test]
    fn a_toolchain_that_does_not_answer_in_time_is_unanswered_not_failed() {
        let dir = tempfile::tempdir().expect("dir");
        let env = [("PATH".to_string(), "/usr/bin:/bin".to_string())];
        let waits = argv(&["sleep", "30"]);
        let unanswered = ask_within(&waits, &env, dir.path(), Duration::from_millis(200), None)
            .expect_err("waits");
        assert_eq!(unanswered.command, "sleep 30");
        let fails = argv(&["false"]);
        assert_eq!(
            ask_within(&fails, &env, dir.path(), ASK_TIMEOUT, None),
            Ok(None)
        );
        let says = argv(&["echo", "sysroot"]);
        assert_eq!(
            ask_within(&says, &env, dir.path(), ASK_TIMEOUT, None),
            Ok(Some(b"sysroot\n".to_vec()))
        );
    }

    /// A sysroot laid out as rustup installs one: its programs, the compiler's
    /// libraries and each target's standard library are named; its documentation and
    /// sources are not.
    #[test]
    fn a_sysroot_names_what_a_build_loads_and_not_its_documentation() {
        let dir = tempfile::tempdir().expect("dir");
        let root = dir.path();
        for d in [
            "bin",
            "lib/rustlib/x86_64-unknown-linux-gnu/lib",
            "lib/rustlib/src/rust/library",
            "lib/rustlib/etc",
            "share/doc/rust/html",
        ] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        std::fs::write(root.join("lib/librustc_driver-1.so"), b"so").expect("write");
        let named: Vec<PathBuf> = sysroot_roots(root).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            named,
            vec![
                root.join("bin"),
                root.join("lib/librustc_driver-1.so"),
                root.join("lib/rustlib/x86_64-unknown-linux-gnu"),
            ]
        );
    }

    /// This workspace's own lock file names packages of other platforms (`windows`)
    /// that were never downloaded: the host's registry sources are named all the same,
    /// with the sysroot, and rustup is told the sysroot.
    #[test]
    fn a_workspace_with_other_platforms_packages_names_its_registry_sources() {
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let env: Vec<(String, String)> = std::env::vars().collect();
        let Some(found) = cargo(&env, &workspace).expect("in time") else {
            panic!("rustc and cargo answer in this workspace");
        };
        let registry = found
            .roots
            .iter()
            .filter(|(p, what)| {
                what == super::super::CARGO_DEPENDENCY
                    && p.components().any(|c| c.as_os_str() == "registry")
            })
            .count();
        assert!(registry > 50, "registry sources named: {registry}");
        assert!(found.roots.iter().any(|(p, _)| p.ends_with("bin")));
        assert_eq!(found.vars[0].0, "RUSTUP_TOOLCHAIN");
    }

    /// A distribution's `GOROOT` whose `src` is a link elsewhere is pinned where the
    /// link leads, package by package; the API lists, the toolchain's own tests and the
    /// go command's own sources are left out.
    #[test]
    fn a_goroot_pins_its_sources_where_a_link_leads() {
        let dir = tempfile::tempdir().expect("dir");
        let share = dir.path().join("share/go/src");
        std::fs::create_dir_all(share.join("fmt")).expect("mkdir");
        std::fs::create_dir_all(share.join("cmd/go")).expect("mkdir");
        let goroot = dir.path().join("lib/go");
        std::fs::create_dir_all(goroot.join("bin")).expect("mkdir");
        std::fs::create_dir_all(goroot.join("test")).expect("mkdir");
        std::fs::create_dir_all(goroot.join("api")).expect("mkdir");
        std::os::unix::fs::symlink(&share, goroot.join("src")).expect("link");
        let named: Vec<PathBuf> = goroot_roots(&goroot).into_iter().map(|(p, _)| p).collect();
        let share = std::fs::canonicalize(&share).expect("real");
        assert_eq!(named, vec![goroot.join("bin"), share.join("fmt")]);
    }

    /// `cargo metadata` names every package by its manifest and every path dependency
    /// by its directory: those directories are what is pinned; an answer that is not
    /// metadata names nothing.
    #[test]
    fn cargo_metadata_names_each_packages_directory() {
        let json = br#"{"packages":[{"name":"a","manifest_path":"/w/a/Cargo.toml",
            "dependencies":[{"name":"helper","path":"/o/helper"},{"name":"serde"}]},
            {"name":"serde","manifest_path":"/h/.cargo/registry/src/i/serde-1.0.0/Cargo.toml"}],
            "workspace_root":"/w"}"#;
        assert_eq!(
            package_dirs(json),
            vec![
                PathBuf::from("/h/.cargo/registry/src/i/serde-1.0.0"),
                PathBuf::from("/o/helper"),
                PathBuf::from("/w/a"),
            ]
        );
        assert!(package_dirs(b"warning: not json").is_empty());
    }
}
