//! Where a pinned Python interpreter loads from: asked once at `run start`, the way a
//! deciding run would start it (the captured environment, the project's `env`), so
//! that its standard library, its site-packages, the user site and the real
//! executable behind a version-manager shim can be fingerprinted.

use std::path::Path;
use std::path::PathBuf;

/// Prints the executable as the interpreter knows itself (a virtual environment's own
/// link, the versioned binary behind a version-manager shim), then, one per line and
/// each after its kind and a tab: every entry of `sys.path`, the user site where the
/// interpreter would add one, its base prefix, and every file it has mapped (its shared
/// library, the C library, extension modules). Then, as module path entries too, every
/// directory a `.pth` file of a site directory names (one that does not exist is left
/// out of `sys.path` now, but a directory made there later is imported from at the next
/// start) and every source directory an editable install's finder maps a package to
/// (imported from, though on no path). And, as entries too, what the project's own
/// settings name outside it: the bytecode cache prefix (`PYTHONPYCACHEPREFIX`), the
/// libraries `LD_PRELOAD` and `LD_AUDIT` load into every process, the absolute paths in
/// `PYTEST_ADDOPTS` and in the configuration files' `addopts` (a `-c` configuration
/// file, say), the directories `LD_LIBRARY_PATH` names, and the `pythonpath` entries of
/// pytest's configuration files and of `-o pythonpath=...` in either (`pytest.toml`,
/// `.pytest.toml`, `pytest.ini`, `.pytest.ini`, `tox.ini`, `setup.cfg`, `pyproject.toml`'s
/// `[tool.pytest]` and `[tool.pytest.ini_options]`); one inside the work tree is left
/// out by the caller. `-c` puts no directory of the project on `sys.path` before `site`
/// runs, and the modules the question imports are imported with no directory under the
/// project on it (but an interpreter installed there, a conda environment in the
/// project, say): no module of the project's runs here. In a virtual environment, the
/// site directories of the interpreter it was made from that its module path leaves out
/// are named as unsearched: nothing is imported from them by name.
const ASK: &str = r##"import os, site, sys
print(os.path.abspath(sys.executable))
for p in sys.path:
    print("path\t" + p)
_path = list(sys.path)
_here = os.path.join(os.getcwd(), "")
_base = os.path.join(os.path.abspath(sys.base_prefix), "")
def _project(p):
    a = os.path.join(os.path.abspath(p), "")
    return a.startswith(_here) and not (_base.startswith(_here) and a.startswith(_base))
sys.path[:] = [p for p in sys.path if p and not _project(p)]
import ast, configparser, glob, shlex
try:
    import tomllib
except ImportError:
    tomllib = None
sys.path[:] = _path
if site.ENABLE_USER_SITE:
    print("user\t" + site.getusersitepackages())
print("prefix\t" + sys.base_prefix)
try:
    maps = open("/proc/self/maps").read().splitlines()
except OSError:
    maps = []
for line in maps:
    parts = line.split(None, 5)
    if len(parts) == 6 and parts[5].startswith("/"):
        print("object\t" + parts[5])
sites = site.getsitepackages() + ([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])
if sys.prefix != sys.base_prefix:
    _searched = {os.path.abspath(p) for p in sys.path if p}
    for d in site.getsitepackages([sys.base_prefix, sys.base_exec_prefix]):
        if os.path.abspath(d) not in _searched:
            print("unsearched\t" + os.path.abspath(d))
for d in sites:
    for pth in sorted(glob.glob(os.path.join(d, "*.pth"))):
        try:
            lines = open(pth, encoding="utf-8", errors="replace").read().splitlines()
        except OSError:
            continue
        for l in lines:
            l = l.rstrip()
            if l and not l.startswith(("#", "import ", "import\t")):
                print("path\t" + os.path.abspath(os.path.join(d, l)))
    for finder in sorted(glob.glob(os.path.join(d, "__editable__*finder.py"))):
        try:
            body = ast.parse(open(finder, encoding="utf-8").read()).body
        except (OSError, SyntaxError, ValueError):
            continue
        for node in body:
            target = node.target if isinstance(node, ast.AnnAssign) else (node.targets[0] if isinstance(node, ast.Assign) else None)
            if getattr(target, "id", "") == "MAPPING" and node.value is not None:
                try:
                    mapping = ast.literal_eval(node.value)
                except ValueError:
                    continue
                for where in mapping.values():
                    if isinstance(where, str):
                        print("path\t" + os.path.abspath(where))
def named(p):
    if isinstance(p, str) and p:
        print("path\t" + os.path.abspath(p))
def pythonpath(p, name):
    named(p)
    if isinstance(p, str) and p and not os.path.isabs(p):
        print("relative\t" + os.path.abspath(p) + "\t" + name + "\t" + p)
named(getattr(sys, "pycache_prefix", None))
for var in ("LD_PRELOAD", "LD_AUDIT"):
    for p in os.environ.get(var, "").replace(":", " ").split():
        if p.startswith("/"):
            named(p)
for p in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
    if p.startswith("/"):
        named(p)
def addopts(words, name):
    if isinstance(words, str):
        try:
            words = shlex.split(words)
        except ValueError:
            words = []
    if not isinstance(words, list):
        return
    words = [w for w in words if isinstance(w, str)]
    for i, w in enumerate(words):
        if w.split("=", 1)[-1].startswith("/"):
            named(w.split("=", 1)[-1])
        value = None
        if w in ("-o", "--override-ini") and i + 1 < len(words):
            value = words[i + 1]
        elif w.startswith("--override-ini="):
            value = w.split("=", 1)[1]
        elif w.startswith("-o") and len(w) > 2 and not w.startswith("--"):
            value = w[2:]
        if value and value.split("=", 1)[0].strip() == "pythonpath" and "=" in value:
            try:
                entries = shlex.split(value.split("=", 1)[1])
            except ValueError:
                entries = value.split("=", 1)[1].split()
            for p in entries:
                pythonpath(p, name)
addopts(os.environ.get("PYTEST_ADDOPTS", ""), "PYTEST_ADDOPTS")
for name, section in (("pytest.ini", "pytest"), (".pytest.ini", "pytest"), ("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
    c = configparser.ConfigParser(interpolation=None)
    try:
        c.read(name, encoding="utf-8")
        entries = c.get(section, "pythonpath", fallback="").split()
        words = c.get(section, "addopts", fallback="")
    except Exception:
        entries, words = [], ""
    for p in entries:
        pythonpath(p, name)
    addopts(words, name)
def toml(name, *keys):
    try:
        with open(name, "rb") as f:
            table = tomllib.load(f)
        for key in keys:
            table = table.get(key, {})
        entries = table.get("pythonpath", [])
        words = table.get("addopts", [])
    except Exception:
        entries, words = [], []
    for p in [entries] if isinstance(entries, str) else entries:
        pythonpath(p, name)
    addopts(words, name)
toml("pytest.toml", "pytest")
toml(".pytest.toml", "pytest")
toml("pyproject.toml", "tool", "pytest", "ini_options")
toml("pyproject.toml", "tool", "pytest")
"##;

/// Where an interpreter loads from, as it said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Loads {
    /// The executable as the interpreter knows itself: started by this path, it is the
    /// same interpreter in the same environment, with no shim between.
    pub executable: PathBuf,
    /// The directories (and zip files) of its module path that exist, in order.
    pub paths: Vec<PathBuf>,
    /// Those that do not exist (yet): a zip of the standard library, a directory a
    /// file planted later would be imported from.
    pub absent: Vec<PathBuf>,
    /// The user site, when the interpreter would add it but it does not exist.
    pub absent_user_site: Option<PathBuf>,
    /// Its base prefix: the installation its standard library comes from.
    pub prefix: Option<PathBuf>,
    /// The files it has mapped as it started (shared libraries), each once.
    pub objects: Vec<PathBuf>,
    /// In a virtual environment, the base interpreter's site directories that exist
    /// and that its module path leaves out (`include-system-site-packages = false`).
    pub unsearched: Vec<PathBuf>,
    /// The relative `pythonpath` entries of pytest's configuration files, each as
    /// (where it leads from the directory asked in, the file, the entry as written).
    pub relative: Vec<(PathBuf, String, String)>,
}

/// What the interpreter started as `python` said it loads from; `None` when it failed
/// (a run that needs it fails on its own), [`Unanswered`] when it did not end in time.
pub(crate) fn load_paths(
    python: &Path,
    env: &[(String, String)],
    cwd: &Path,
) -> Result<Option<Loads>, super::toolchain::Unanswered> {
    let argv = vec![
        python.display().to_string(),
        "-c".to_string(),
        ASK.to_string(),
    ];
    let Some(out) = super::toolchain::ask_writing_nothing(&argv, env, cwd)? else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(&out);
    let mut lines = text.lines();
    let Some(executable) = lines
        .next()
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_file())
    else {
        return Ok(None);
    };
    let mut loads = Loads {
        executable,
        paths: Vec::new(),
        absent: Vec::new(),
        absent_user_site: None,
        prefix: None,
        objects: Vec::new(),
        unsearched: Vec::new(),
        relative: Vec::new(),
    };
    for line in lines {
        let Some((kind, value)) = line.split_once('\t') else {
            continue;
        };
        if kind == "relative" {
            let mut parts = value.splitn(3, '\t');
            if let (Some(path), Some(file), Some(entry)) =
                (parts.next(), parts.next(), parts.next())
            {
                let path = PathBuf::from(path);
                if path.is_absolute() {
                    loads
                        .relative
                        .push((path, file.to_string(), entry.to_string()));
                }
            }
            continue;
        }
        let path = PathBuf::from(value);
        if !path.is_absolute() {
            continue;
        }
        match kind {
            "path" if loads.paths.contains(&path) || loads.absent.contains(&path) => {}
            "path" if path.exists() => loads.paths.push(path),
            "path" => loads.absent.push(path),
            "user" if !path.exists() => loads.absent_user_site = Some(path),
            "prefix" => loads.prefix = Some(path),
            "object" if path.is_file() && !loads.objects.contains(&path) => {
                loads.objects.push(path);
            }
            "unsearched" if path.is_dir() && !loads.unsearched.contains(&path) => {
                loads.unsearched.push(path);
            }
            _ => {}
        }
    }
    Ok(Some(loads))
}

/// The interpreter a virtual environment was made from, as `venv/pyvenv.cfg` and the
/// links of `venv/bin/` say (`home = <its bin directory>`, `version = 3.11.7` or uv's
/// `version_info`): its real executable, its library directory
/// (`<prefix>/lib/python3.11`) and, when `include-system-site-packages = true`, that
/// library's `site-packages`, those that exist, each with what it is in words.
pub(crate) fn venv_base(venv: &Path) -> Vec<(PathBuf, &'static str)> {
    let Some(cfg) = crate::exec::read_regular_file(&venv.join("pyvenv.cfg")) else {
        return Vec::new();
    };
    let cfg = String::from_utf8_lossy(&cfg);
    let value = |key: &str| {
        cfg.lines().find_map(|line| {
            let (k, v) = line.split_once('=')?;
            (k.trim() == key).then(|| v.trim().to_string())
        })
    };
    let mut found = Vec::new();
    for name in ["bin/python3", "bin/python"] {
        // An interpreter is a file: a link that leads to a directory (`/`, say) names
        // nothing to pin.
        if let Ok(real) = std::fs::canonicalize(venv.join(name))
            && !real.starts_with(venv)
            && real.is_file()
        {
            found.push((real, "the interpreter"));
            break;
        }
    }
    let version = value("version_info").or_else(|| value("version"));
    let minor = version.as_deref().and_then(|v| {
        let mut parts = v.split('.');
        Some(format!("python{}.{}", parts.next()?, parts.next()?))
    });
    if let (Some(home), Some(minor)) = (value("home"), minor)
        && let Some(prefix) = Path::new(&home).parent()
    {
        let lib = prefix.join("lib").join(minor);
        if lib.is_absolute() && lib.is_dir() {
            // Its site-packages is imported from too when the environment says so:
            // pinned as a root of its own, never left out of the library as unsearched.
            let site = lib.join("site-packages");
            let shared = value("include-system-site-packages")
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
            found.push((lib, "the interpreter's library"));
            if shared && site.is_dir() {
                found.push((site, "the interpreter's site-packages"));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the project's settings name outside it, present or not yet, is reported as
    /// module path entries: the bytecode cache prefix, a preloaded library, a `-c`
    /// configuration in `PYTEST_ADDOPTS`, a `pythonpath` entry of `pytest.ini`.
    #[test]
    fn paths_the_projects_settings_name_outside_it_are_asked_for() {
        let Ok(python) = which_python() else {
            return;
        };
        let project = tempfile::tempdir().expect("project");
        let outside = tempfile::tempdir().expect("outside");
        let at = |name: &str| outside.path().join(name);
        std::fs::create_dir(at("pycache")).expect("pycache");
        std::fs::write(at("extra.ini"), "[pytest]\n").expect("ini");
        std::fs::write(
            project.path().join("pytest.ini"),
            format!("[pytest]\npythonpath = . {}\n", at("later").display()),
        )
        .expect("pytest.ini");
        let env = vec![
            (
                "PYTHONPYCACHEPREFIX".to_string(),
                at("pycache").display().to_string(),
            ),
            (
                "LD_PRELOAD".to_string(),
                at("hook.so").display().to_string(),
            ),
            (
                "PYTEST_ADDOPTS".to_string(),
                format!("-q -c {}", at("extra.ini").display()),
            ),
        ];
        let loads = load_paths(&python, &env, project.path())
            .expect("answered in time")
            .expect("answers");
        for present in ["pycache", "extra.ini"] {
            assert!(loads.paths.contains(&at(present)), "{present}: {loads:?}");
        }
        for absent in ["hook.so", "later"] {
            assert!(loads.absent.contains(&at(absent)), "{absent}: {loads:?}");
        }
    }

    /// `addopts` in a configuration file names paths as the environment's
    /// `PYTEST_ADDOPTS` does, and `-o pythonpath=...` (in any spelling) adds module path
    /// entries: absolute ones are asked for, relative ones reported with their file.
    #[test]
    fn pythonpath_given_through_addopts_overrides_is_asked_for() {
        let Ok(python) = which_python() else {
            return;
        };
        let project = tempfile::tempdir().expect("project");
        let outside = tempfile::tempdir().expect("outside");
        let at = |name: &str| outside.path().join(name);
        std::fs::write(
            project.path().join("pytest.ini"),
            format!(
                "[pytest]\npythonpath = .\naddopts = -o \"pythonpath={} .\" --override-ini=pythonpath=../up -opythonpath={}\n",
                at("ini").display(),
                at("glued").display()
            ),
        )
        .expect("pytest.ini");
        std::fs::write(
            project.path().join("pyproject.toml"),
            format!(
                "[tool.pytest]\naddopts = [\"--override-ini\", \"pythonpath={}\"]\n",
                at("toml").display()
            ),
        )
        .expect("pyproject.toml");
        let loads = load_paths(&python, &[], project.path())
            .expect("answered in time")
            .expect("answers");
        for named in ["ini", "glued", "toml"] {
            assert!(loads.absent.contains(&at(named)), "{named}: {loads:?}");
        }
        let up = project.path().parent().expect("parent").join("up");
        assert!(
            loads
                .relative
                .iter()
                .any(|(leads, file, entry)| *leads == up
                    && file == "pytest.ini"
                    && entry == "../up"),
            "{loads:?}"
        );
    }

    /// pytest 9's own configuration files (`pytest.toml`, `.pytest.toml`, and
    /// `[tool.pytest]` in `pyproject.toml`) and `LD_LIBRARY_PATH` name paths outside the
    /// project as the older files do: each is asked for. And the question runs no module
    /// of the project: a `glob.py` beside it that writes outside is never imported.
    #[test]
    fn pytest_9_files_and_library_paths_are_asked_for_and_no_project_module_runs() {
        let Ok(python) = which_python() else {
            return;
        };
        let project = tempfile::tempdir().expect("project");
        let outside = tempfile::tempdir().expect("outside");
        let at = |name: &str| outside.path().join(name);
        let toml = |name: &str, table: &str, entry: &str| {
            std::fs::write(
                project.path().join(name),
                format!("[{table}]\npythonpath = [\"{}\"]\n", at(entry).display()),
            )
            .expect("config");
        };
        toml("pytest.toml", "pytest", "toml");
        toml(".pytest.toml", "pytest", "dot-toml");
        toml("pyproject.toml", "tool.pytest", "pyproject");
        let planted = at("planted");
        std::fs::write(
            project.path().join("glob.py"),
            format!(
                "open({:?}, \"w\").write(\"ran\")\n",
                planted.display().to_string()
            ),
        )
        .expect("glob.py");
        // A start-up hook the environment names runs, but confined: it writes nothing.
        std::fs::create_dir(at("hooks")).expect("hooks");
        let by_site = at("planted-by-site");
        std::fs::write(
            at("hooks").join("sitecustomize.py"),
            format!(
                "try:\n    open({:?}, \"w\").write(\"ran\")\nexcept OSError:\n    pass\n",
                by_site.display().to_string()
            ),
        )
        .expect("sitecustomize.py");
        let env = vec![
            (
                "LD_LIBRARY_PATH".to_string(),
                format!("relative:{}", at("libs").display()),
            ),
            ("PYTHONPATH".to_string(), at("hooks").display().to_string()),
        ];
        let loads = load_paths(&python, &env, project.path())
            .expect("answered in time")
            .expect("answers");
        for absent in ["toml", "dot-toml", "pyproject", "libs"] {
            assert!(loads.absent.contains(&at(absent)), "{absent}: {loads:?}");
        }
        assert!(!planted.exists(), "the project's glob.py ran");
        if tdd_sandbox::probe().confines() {
            assert!(!by_site.exists(), "the start-up hook wrote outside");
        }
    }

    /// A `.pth` file naming a directory that does not exist yet, and an editable
    /// install's finder mapping a package to a source directory on no path: both are
    /// asked for, the first as absent, the second as present.
    #[test]
    fn what_pth_files_and_editable_finders_name_is_asked_for() {
        let dir = tempfile::tempdir().expect("dir");
        let Some(venv) = venv_in(dir.path(), "venv") else {
            return;
        };
        let Some(site) = std::fs::read_dir(venv.join("lib"))
            .ok()
            .and_then(|mut entries| entries.next())
            .and_then(Result::ok)
            .map(|entry| entry.path().join("site-packages"))
        else {
            return;
        };
        let later = dir.path().join("stale/src");
        let source = dir.path().join("plugin-src/plugin");
        std::fs::create_dir_all(&source).expect("source");
        std::fs::write(site.join("stale.pth"), format!("{}\n", later.display())).expect("pth");
        std::fs::write(
            site.join("__editable___plugin_1_0_finder.py"),
            format!(
                "MAPPING: dict[str, str] = {{'plugin': '{}'}}\n",
                source.display()
            ),
        )
        .expect("finder");
        let loads = load_paths(&venv.join("bin/python3"), &[], dir.path())
            .expect("answered in time")
            .expect("answers");
        assert!(loads.absent.contains(&later), "{loads:?}");
        assert!(loads.paths.contains(&source), "{loads:?}");
    }

    /// The first `python3` on `PATH`, resolved.
    fn which_python() -> Result<PathBuf, ()> {
        std::env::split_paths(&std::env::var_os("PATH").ok_or(())?)
            .map(|dir| dir.join("python3"))
            .find(|p| p.is_file())
            .ok_or(())
    }

    /// A virtual environment made by `python3` at `dir/name`; `None` where none can be.
    fn venv_in(dir: &Path, name: &str) -> Option<PathBuf> {
        let venv = dir.join(name);
        let made = std::process::Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .status();
        made.is_ok_and(|s| s.success()).then_some(venv)
    }

    /// A real virtual environment names the interpreter it was made from and that
    /// interpreter's standard library, as the interpreter itself says them.
    #[test]
    fn a_virtual_environment_names_the_interpreter_it_was_made_from() {
        let dir = tempfile::tempdir().expect("dir");
        let Some(venv) = venv_in(dir.path(), ".venv") else {
            return;
        };
        let ask = |code: &str| {
            let out = std::process::Command::new("python3")
                .args(["-c", code])
                .output()
                .expect("python3");
            PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
        };
        let real = std::fs::canonicalize(ask("import sys; print(sys.executable)")).expect("real");
        let stdlib = ask("import sysconfig; print(sysconfig.get_paths()['stdlib'])");
        let found: Vec<PathBuf> = venv_base(&venv).into_iter().map(|(p, _)| p).collect();
        assert_eq!(found, vec![real, stdlib]);
        // No `pyvenv.cfg`: no virtual environment, nothing named.
        assert!(venv_base(dir.path()).is_empty());
    }

    /// A virtual environment without the base interpreter's site-packages names them
    /// as unsearched; one made with them keeps them on its path, and its base pins
    /// them as a root of their own.
    #[test]
    fn the_base_site_packages_a_virtual_environment_leaves_out_are_named_unsearched() {
        let dir = tempfile::tempdir().expect("dir");
        let (Some(venv), Ok(python)) = (venv_in(dir.path(), "alone"), which_python()) else {
            return;
        };
        let out = std::process::Command::new(&python)
            .args([
                "-c",
                "import site, sys; print(site.getsitepackages([sys.base_prefix])[0])",
            ])
            .output()
            .expect("python3");
        let base_site = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if !base_site.is_dir() {
            return;
        }
        let ask = |venv: &Path| {
            load_paths(&venv.join("bin/python3"), &[], dir.path())
                .expect("answered")
                .expect("loads")
        };
        let alone = ask(&venv);
        assert!(alone.unsearched.contains(&base_site), "{alone:?}");
        assert!(!alone.paths.contains(&base_site), "{alone:?}");
        let shared = dir.path().join("shared");
        let made = std::process::Command::new("python3")
            .args(["-m", "venv", "--without-pip", "--system-site-packages"])
            .arg(&shared)
            .status();
        if !made.is_ok_and(|s| s.success()) {
            return;
        }
        let with = ask(&shared);
        assert!(with.unsearched.is_empty(), "{with:?}");
        let pinned: Vec<PathBuf> = venv_base(&shared).into_iter().map(|(p, _)| p).collect();
        assert!(pinned.contains(&base_site), "{pinned:?}");
        let alone: Vec<PathBuf> = venv_base(&venv).into_iter().map(|(p, _)| p).collect();
        assert!(!alone.contains(&base_site), "{alone:?}");
    }
}
