//! Where a pinned Python interpreter loads from: asked once at `run start`, the way a
//! deciding run would start it (the captured environment, the project's `env`), so
//! that its standard library, its site-packages, the user site and the real
//! executable behind a version-manager shim can be fingerprinted.

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use crate::exec::Scratch;
use crate::model::Exit;
use crate::process;
use crate::process::ProcessSpec;

/// How long the interpreter may take to say where it loads from.
const ASK_TIMEOUT: Duration = Duration::from_secs(30);

/// Prints the executable as the interpreter knows itself (a virtual environment's own
/// link, the versioned binary behind a version-manager shim), then every entry of
/// `sys.path` and the user site, one per line. `-c` puts no directory of the project
/// on `sys.path` before `site` runs.
const ASK: &str = "import os, site, sys\n\
print(os.path.abspath(sys.executable))\n\
for p in sys.path + [site.getusersitepackages()]:\n    print(p)\n";

/// Where an interpreter loads from, as it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loads {
    /// The executable as the interpreter knows itself: started by this path, it is the
    /// same interpreter in the same environment, with no shim between.
    pub executable: PathBuf,
    /// The directories (and zip files) of its module path that exist, in order.
    pub paths: Vec<PathBuf>,
}

/// What the interpreter started as `python` said it loads from; `None` when it did not
/// answer (a run that needs it fails on its own).
pub(crate) fn load_paths(python: &Path, env: &[(String, String)], cwd: &Path) -> Option<Loads> {
    let scratch = Scratch::new().ok()?;
    let (Ok(stdout), Ok(stderr)) = (scratch.capture(), scratch.capture()) else {
        return None;
    };
    let argv = vec![
        python.display().to_string(),
        "-c".to_string(),
        ASK.to_string(),
    ];
    let finished = process::run(&ProcessSpec {
        argv: &argv,
        cwd,
        env,
        clear_env: true,
        timeout: ASK_TIMEOUT,
        stdout: &stdout,
        stderr: &stderr,
        confinement: None,
        tick: None,
    });
    if finished.exit != (Exit::Code { code: 0 }) {
        tracing::warn!(python = %python.display(), exit = ?finished.exit, "the interpreter did not say where it loads from");
        return None;
    }
    let out = crate::exec::read_capped(&stdout).unwrap_or_default();
    let mut lines = String::from_utf8_lossy(&out)
        .lines()
        .map(PathBuf::from)
        .collect::<Vec<_>>()
        .into_iter();
    let executable = lines.next().filter(|p| p.is_absolute() && p.is_file())?;
    Some(Loads {
        executable,
        paths: lines.filter(|p| p.is_absolute() && p.exists()).collect(),
    })
}
