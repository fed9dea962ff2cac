#!/usr/bin/env python3
"""Engine overheads on a 200-test pytest repository (release build).

Measures, median of RUNS each:
- `tdd test TARGET` against the bare pytest command it runs (issue: <= 15 ms overhead);
- `tdd status` on a live run: wall time and peak RSS (goal: <= 5 ms, <= 10 MB);
- `tdd advance` at RED and at GREEN: total wall minus the runner's own wall time taken
  from the envelope, and the number of git subprocesses per advance (goal: <= 20 ms).

Usage: bench/engine.py [path/to/tdd] [runs]
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
TDD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/tdd")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
REAL_GIT = shutil.which("git")


def run(argv, cwd, env, check=True):
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if check and out.returncode not in (0, 1):
        sys.exit(f"{argv} failed ({out.returncode}): {out.stderr}")
    return out


def timed(argv, cwd, env):
    start = time.perf_counter()
    out = run(argv, cwd, env)
    return (time.perf_counter() - start) * 1000, out


def median(values):
    return statistics.median(values)


def setup(repo, env):
    tests = "\n".join(f"def test_{i}():\n    assert {i} == {i}\n" for i in range(200))
    os.makedirs(f"{repo}/tests")
    with open(f"{repo}/tests/test_many.py", "w") as f:
        f.write(tests)
    with open(f"{repo}/calc.py", "w") as f:
        f.write("def add(a, b):\n    return a + b\n")
    with open(f"{repo}/pytest.ini", "w") as f:
        f.write("[pytest]\npythonpath = .\n")
    with open(f"{repo}/.gitignore", "w") as f:
        f.write("__pycache__/\n.pytest_cache/\n")
    with open(f"{repo}/tdd.toml", "w") as f:
        f.write('[project.py]\nadapter = "pytest"\ntest_paths = ["tests/"]\n\n[locks]\nimpl = ["calc.py"]\ntest = ["tests/**"]\n')
    os.makedirs(f"{repo}/.tdd")
    with open(f"{repo}/.tdd/plan.md", "w") as f:
        f.write("---\ncycles:\n  - n: 1\n    project: py\n    title: sub\n    test: tests/test_sub.py::test_sub\n---\n")
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        run(argv, repo, env)


def git_shim(directory, log):
    shim = os.path.join(directory, "git")
    with open(shim, "w") as f:
        f.write(f"#!/bin/sh\necho x >> {log}\nexec {REAL_GIT} \"$@\"\n")
    os.chmod(shim, 0o755)


def runner_ms(envelope):
    data = json.loads(envelope)["data"]
    return sum(o.get("wall_ms", 0) for o in data.get("observations", []))


def advance(repo, env, log):
    open(log, "w").close()
    wall, out = timed([TDD, "advance", "--json"], repo, env)
    with open(log) as f:
        gits = len(f.readlines())
    return wall, runner_ms(out.stdout), gits, json.loads(out.stdout)


def main():
    if not os.path.exists(TDD):
        sys.exit(f"{TDD} not found: run `cargo build --release` first")
    work = tempfile.mkdtemp(prefix="tdd-bench-")
    repo, home, shim_dir = f"{work}/repo", f"{work}/home", f"{work}/shim"
    for d in (repo, home, shim_dir):
        os.makedirs(d)
    log = f"{work}/git.log"
    env = dict(os.environ, HOME=home, TDD_LEDGER_HOME=f"{work}/ledger", GIT_AUTHOR_NAME="b",
               GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
    env.pop("GIT_DIR", None)
    setup(repo, env)

    target = "tests/test_many.py::test_7"
    bare = ["python3", "-m", "pytest", f"--junitxml={work}/r.xml", "-o", "junit_family=xunit1", "-q",
            "-p", "no:cacheprovider", "--continue-on-collection-errors", target]
    # Interleaved, so drift in the machine's load hits both sides alike.
    pairs = [(timed(bare, repo, env)[0], timed([TDD, "test", target, "--json"], repo, env)[0]) for _ in range(RUNS)]
    bare_ms = median([b for b, _ in pairs])
    tdd_ms = median([t for _, t in pairs])
    print(f"tdd test TARGET       median {tdd_ms:7.1f} ms   bare pytest {bare_ms:7.1f} ms   overhead {tdd_ms - bare_ms:6.1f} ms")

    run([TDD, "run", "start", "--plan", ".tdd/plan.md", "--json"], repo, env)
    status = [timed([TDD, "status", "--json"], repo, env)[0] for _ in range(RUNS)]
    rss = run(["/usr/bin/time", "-f", "%M", TDD, "status", "--json"], repo, env).stderr.strip().splitlines()[-1]
    print(f"tdd status            median {median(status):7.2f} ms   peak RSS {int(rss) / 1024:.1f} MB")

    git_shim(shim_dir, log)
    shim_env = dict(env, PATH=f"{shim_dir}:{env['PATH']}")
    with open(f"{repo}/tests/test_sub.py", "w") as f:
        f.write("from calc import add\n\ndef test_sub():\n    import calc\n    assert calc.sub(5, 2) == 3\n")
    wall, runner, gits, env_out = advance(repo, shim_env, log)
    assert env_out["ok"], env_out
    print(f"tdd advance (RED)     total {wall:7.1f} ms   runner {runner:6.1f} ms   overhead {wall - runner:6.1f} ms   git calls {gits}")
    with open(f"{repo}/calc.py", "a") as f:
        f.write("\ndef sub(a, b):\n    return a - b\n")
    wall, runner, gits, env_out = advance(repo, shim_env, log)
    assert env_out["ok"], env_out
    print(f"tdd advance (GREEN)   total {wall:7.1f} ms   runner {runner:6.1f} ms   overhead {wall - runner:6.1f} ms   git calls {gits}"
          "   (runner includes the sensitivity run)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
