#!/usr/bin/env python3
"""What a GREEN gate costs beyond the runner (release build).

On a 200-test pytest repository, median of RUNS each, interleaved so drift in the
machine's load hits both sides alike:
- a refused GREEN (the target still fails) against one bare run of the target just
  before it, as the median of the pairs' differences (goal: at most 30 ms over it);
- an accepted GREEN: total wall time minus the runners' own wall time, taken from the
  envelope's observations (goal: at most 30 ms); then `tdd rollback --to-previous`
  so the next round judges GREEN again.

With --cargo, the same on a 20-crate cargo workspace, plus the number of crates the
second and later GREENs compile (goal: only the changed crate and what depends on it,
never a dependency from the registry), and any run that emptied the build directory
because its tests wrote it (none should).

With --node-modules, the pytest repository also holds an ignored `node_modules` of
32,101 entries (300 packages of 100 small files), which the clean room links and every
close fingerprints: run it beside a run without the flag to see what checking it adds
to a gate (goal: at most 20 ms).

With --sandbox-off, the repositories' tdd.toml says `[sandbox] enabled = false`, so
runners start unconfined: run it beside a run without the flag to see what confining
every runner costs (goal: at most 5 ms a runner process).

With --venv, `python3` is a virtual environment's (made without pip or the base
interpreter's site-packages; a `.pth` names the host's pytest), first on PATH as an
activated one would be: what a project with its own environment pays, whatever the
base interpreter has installed globally.

Usage: bench/gate.py [path/to/tdd] [runs] [--cargo] [--sandbox-off] [--node-modules] [--venv]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
TDD = os.path.abspath(ARGS[0]) if ARGS else os.path.join(ROOT, "target/release/tdd")
RUNS = int(ARGS[1]) if len(ARGS) > 1 else 10
CARGO = "--cargo" in sys.argv
SANDBOX = "\n[sandbox]\nenabled = false\n" if "--sandbox-off" in sys.argv else ""
NODE_MODULES = "--node-modules" in sys.argv
VENV = "--venv" in sys.argv


def run(argv, cwd, env):
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"{argv} failed ({out.returncode}): {out.stdout}\n{out.stderr}")
    return out


def timed(argv, cwd, env):
    start = time.perf_counter()
    out = run(argv, cwd, env)
    return (time.perf_counter() - start) * 1000, out


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def commit(repo, env):
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        run(argv, repo, env)


def runner_ms(data):
    return sum(o.get("wall_ms", 0) for o in data.get("observations", []))


def advance(repo, env, *extra):
    wall, out = timed([TDD, "advance", "--json", *extra], repo, env)
    envelope = json.loads(out.stdout)
    return wall, envelope


def pytest_repo(repo, env):
    tests = "\n".join(f"def test_{i}():\n    assert {i} == {i}\n" for i in range(200))
    write(f"{repo}/tests/test_many.py", tests)
    write(f"{repo}/calc.py", "def add(a, b):\n    return a + b\n")
    write(f"{repo}/pytest.ini", "[pytest]\npythonpath = .\n")
    write(f"{repo}/.gitignore", "__pycache__/\n.pytest_cache/\nnode_modules/\n")
    write(f"{repo}/tdd.toml", '[project.py]\nadapter = "pytest"\ntest_paths = ["tests/"]\n\n[locks]\nimpl = ["calc.py"]\ntest = ["tests/**"]\n' + SANDBOX)
    write(f"{repo}/.tdd/plan.md", "---\ncycles:\n  - n: 1\n    project: py\n    title: sub\n    test: tests/test_sub.py::test_sub\n    stub_expected: [calc.py]\n---\n")
    commit(repo, env)
    if NODE_MODULES:
        node_modules(f"{repo}/node_modules")


def node_modules(root):
    """300 packages of 100 small files in nested directories, then a wait: a file
    changed this close to `run start` has its bytes hashed at every check, and the
    steady state of a real run is an installation older than that."""
    for p in range(300):
        for d in range(5):
            for f in range(20):
                write(f"{root}/pkg-{p}/lib/part-{d}/m{f}.js", f"module.exports = {f};\n")
    time.sleep(2.1)


def bench_pytest(work, env):
    repo = f"{work}/py"
    pytest_repo(repo, env)
    run([TDD, "run", "start", "--plan", ".tdd/plan.md", "--json"], repo, env)
    write(f"{repo}/tests/test_sub.py", "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 2) == 3\n")
    stub = "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    raise NotImplementedError\n"
    write(f"{repo}/calc.py", stub)
    _, red = advance(repo, env)
    assert red["ok"], red
    target = "tests/test_sub.py::test_sub"
    bare = ["python3", "-m", "pytest", f"--junitxml={work}/r.xml", "-q", "-p", "no:cacheprovider", target]
    refused, bare_ms = [], []
    for _ in range(RUNS):
        bare_ms.append(timed(bare, repo, env)[0])
        wall, envelope = advance(repo, env, "--retry")
        assert envelope["error"]["reason"] == "target_failing", envelope
        refused.append(wall)
    r, b = statistics.median(refused), statistics.median(bare_ms)
    # Each refused GREEN is paired with the bare run just before it: the median of the
    # pairs' differences is steadier than the difference of the medians when the
    # runner's own time swings from one run to the next.
    over = statistics.median(x - y for x, y in zip(refused, bare_ms))
    print(f"pytest refused GREEN   median {r:7.1f} ms   bare target run {b:7.1f} ms   over it (median of pairs) {over:6.1f} ms")
    overhead, totals = [], []
    implemented = stub.replace("raise NotImplementedError", "return a - b")
    for _ in range(RUNS):
        write(f"{repo}/calc.py", implemented)
        wall, envelope = advance(repo, env)
        assert envelope["ok"] and envelope["data"]["to"] == "AWAITING_REFACTOR", envelope
        totals.append(wall)
        overhead.append(wall - runner_ms(envelope["data"]))
        run([TDD, "rollback", "--to-previous", "--json"], repo, env)
    with_modules = (" (with node_modules)" if NODE_MODULES else "") + (" (in a venv)" if VENV else "")
    print(f"pytest accepted GREEN{with_modules}  median {statistics.median(totals):7.1f} ms   beyond the runners {statistics.median(overhead):6.1f} ms"
          "   (runners: target, suite, sensitivity)")


def cargo_repo(repo, env):
    members = [f"c{i:02}" for i in range(20)]
    write(f"{repo}/Cargo.toml", "[workspace]\nresolver = \"2\"\nmembers = [" + ", ".join(f'"{m}"' for m in members) + "]\n")
    for i, m in enumerate(members):
        deps = f'{members[i - 1]} = {{ path = "../{members[i - 1]}" }}\n' if i else ""
        write(f"{repo}/{m}/Cargo.toml", f'[package]\nname = "{m}"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n{deps}')
        write(f"{repo}/{m}/src/lib.rs", f"pub fn id_{i}(x: i32) -> i32 {{\n    x\n}}\n\n#[cfg(test)]\nmod tests {{\n    #[test]\n    fn same() {{\n        assert_eq!(super::id_{i}(1), 1);\n    }}\n}}\n")
    write(f"{repo}/.gitignore", "target/\n")
    write(f"{repo}/tdd.toml", '[project.ws]\nadapter = "cargo"\n\n[locks]\nimpl = ["c19/src/lib.rs"]\ntest = ["c19/tests/**"]\n' + SANDBOX)
    write(f"{repo}/.tdd/plan.md", "---\ncycles:\n  - n: 1\n    project: ws\n    title: double\n    test: ws::c19::double doubles\n    stub_expected: [c19/src/lib.rs]\n---\n")
    run(["cargo", "generate-lockfile", "--offline"], repo, env)
    commit(repo, env)


def compiled(envelope):
    lines = []
    for o in envelope["data"].get("observations", []):
        for inv in o.get("invocations", []):
            lines += [l for l in inv.get("stderr", "").splitlines() if l.strip().startswith("Compiling")]
    return lines


def bench_cargo(work, env):
    repo = f"{work}/ws"
    cargo_repo(repo, env)
    start, out = timed([TDD, "run", "start", "--plan", ".tdd/plan.md", "--json"], repo, env)
    print(f"cargo run start (baseline, cold clean room) {start:7.0f} ms")
    write(f"{repo}/c19/tests/double.rs", "#[test]\nfn doubles() {\n    assert_eq!(c19::double(2), 4);\n}\n")
    lib = open(f"{repo}/c19/src/lib.rs").read()
    stub = lib + "\npub fn double(_x: i32) -> i32 {\n    unimplemented!()\n}\n"
    write(f"{repo}/c19/src/lib.rs", stub)
    _, red = advance(repo, env)
    assert red["ok"], red
    overhead, totals = [], []
    for i in range(RUNS):
        write(f"{repo}/c19/src/lib.rs", stub.replace("unimplemented!()", "_x * 2"))
        wall, envelope = advance(repo, env)
        assert envelope["ok"], envelope
        totals.append(wall)
        overhead.append(wall - runner_ms(envelope["data"]))
        emptied = [d for o in envelope["data"].get("observations", []) for d in o.get("diagnostics", [])
                   if "build directory" in d]
        if emptied:
            print(f"  GREEN {i}: the build directory was emptied: {emptied[0]}")
        if i > 0:
            crates = compiled(envelope)
            print(f"  GREEN {i}: compiled {len(crates)} crate(s): {', '.join(c.split()[1] for c in crates)}")
        run([TDD, "rollback", "--to-previous", "--json"], repo, env)
    print(f"cargo accepted GREEN   median {statistics.median(totals):7.1f} ms   beyond the runners {statistics.median(overhead):6.1f} ms")


def venv(work, env):
    """A virtual environment under `work` that imports the host's pytest, first on PATH."""
    host = run(["python3", "-c", "import os, pytest; print(os.path.dirname(os.path.dirname(pytest.__file__)))"],
               work, env).stdout.strip()
    at = f"{work}/venv"
    run(["python3", "-m", "venv", "--without-pip", at], work, env)
    site = run([f"{at}/bin/python3", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               work, env).stdout.strip()
    write(f"{site}/host_pytest.pth", host + "\n")
    env["PATH"] = f"{at}/bin:{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = at


def main():
    if not os.path.exists(TDD):
        sys.exit(f"{TDD} not found: run `cargo build --release` first")
    work = tempfile.mkdtemp(prefix="tdd-gate-bench-")
    env = dict(os.environ, HOME=f"{work}/home", TDD_LEDGER_HOME=f"{work}/ledger", GIT_AUTHOR_NAME="b",
               GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
    env["CARGO_HOME"] = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
    env["RUSTUP_HOME"] = os.environ.get("RUSTUP_HOME", os.path.expanduser("~/.rustup"))
    env.pop("GIT_DIR", None)
    os.makedirs(env["HOME"])
    if VENV:
        venv(work, env)
    try:
        bench_pytest(work, env)
        if CARGO:
            bench_cargo(work, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
