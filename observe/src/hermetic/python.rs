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

/// Prints the real executable, then every entry of `sys.path` and the user site, one
/// per line. `-c` puts no directory of the project on `sys.path` before `site` runs.
const ASK: &str = "import os, site, sys\n\
print(os.path.realpath(sys.executable))\n\
for p in sys.path + [site.getusersitepackages()]:\n    print(p)\n";

/// What the interpreter at `python` said it loads from: its real executable first, then
/// the directories (and zip files) of its module path that exist, in order. Empty when
/// it did not answer (a run that needs it fails on its own).
pub(crate) fn load_paths(python: &Path, env: &[(String, String)], cwd: &Path) -> Vec<PathBuf> {
    let Ok(scratch) = Scratch::new() else {
        return Vec::new();
    };
    let (Ok(stdout), Ok(stderr)) = (scratch.capture(), scratch.capture()) else {
        return Vec::new();
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
        return Vec::new();
    }
    let out = crate::exec::read_capped(&stdout).unwrap_or_default();
    String::from_utf8_lossy(&out)
        .lines()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.exists())
        .collect()
}
