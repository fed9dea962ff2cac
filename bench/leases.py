#!/usr/bin/env python3
"""Three conductors on one machine, with and without core leases (release build).

Builds three copies of bench/report.py's project (STEPS steps each, scripted leaves, a
real cargo crate) whose test command runs the suite with `{workers}` test threads and
cargo jobs, then conducts the three at once twice: once sharing one lease directory
(each runner gets max(1, cores / 3) workers), once with a lease directory of their own
each (each sees only itself: every runner gets all the cores, as before leases).
Prints each pass's total wall time and the peak one-minute load average, sampled from
/proc/loadavg every half second.

Usage: bench/leases.py [path/to/tdd] [--steps N]
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

STEPS = report.flag("--steps", 3)
report.STEPS = STEPS
TEST_COMMAND = 'cargo test -j {workers} -- --test-threads {workers}'


def project(home):
    """One repository of the issue under `home`, ready to conduct; returns its
    directory, environment and issue path."""
    repo = os.path.join(home, "calc")
    os.makedirs(os.path.join(repo, "src"))
    os.makedirs(os.path.join(repo, "tests"))
    env = dict(os.environ, TDD_LEDGER_HOME=os.path.join(home, "ledgers"), NO_COLOR="1",
               GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@b", CARGO_TARGET_DIR=os.path.join(repo, "target"))
    files = {
        "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
        ".gitignore": "/target\n",
        "src/lib.rs": report.lib(0),
        "tests/start.rs": "#[test]\nfn starts() {}\n",
        "tdd.toml": f'[project.app]\nadapter = "cargo"\ntest_command = "{TEST_COMMAND}"\n\n'
                    '[locks]\nimpl = ["src/**"]\ntest = ["tests/**"]\n\n'
                    '[conductor]\nprovider = "scripted"\nverifier_provider = "scripted"\n\n'
                    f'[provider.scripted]\nargs = ["{os.path.join(home, "fixture.toml")}"]\n',
    }
    for path, text in files.items():
        with open(os.path.join(repo, path), "w") as f:
            f.write(text)
    with open(os.path.join(home, "fixture.toml"), "w") as f:
        f.write(report.fixture())
    issue = os.path.join(home, "issue-1.md")
    with open(issue, "w") as f:
        f.write("# Plus\n\n## Acceptance criteria\n\n" + "".join(f"- [ ] `f{k}(1)` is {1 + k}\n" for k in range(1, STEPS + 1)))
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "calc"]):
        subprocess.run(argv, cwd=repo, env=env, check=True)
    return repo, env, issue


def three_at_once(shared):
    base = tempfile.mkdtemp(prefix="tdd-bench-leases-")
    runs = []
    for n in range(3):
        home = os.path.join(base, f"p{n}")
        os.makedirs(home)
        repo, env, issue = project(home)
        env["TDD_LEASE_DIR"] = os.path.join(base, "leases" if shared else f"leases-{n}")
        runs.append((repo, env, issue))
    peak = [0.0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            with open("/proc/loadavg") as f:
                peak[0] = max(peak[0], float(f.read().split()[0]))
            done.wait(0.5)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    procs = [subprocess.Popen([report.TDD, "conduct", issue, "--json"], cwd=repo, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for repo, env, issue in runs]
    codes = [p.wait() for p in procs]
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    if any(codes):
        sys.exit(f"a conduct failed: exit codes {codes}")
    return wall, peak[0]


def main():
    cores = os.cpu_count()
    for shared in (True, False):
        wall, peak = three_at_once(shared)
        what = "with leases (one lease directory)" if shared else "without leases (one each)"
        print(f"{what}: 3 conducts of {STEPS} steps on {cores} cores in {wall:.0f} s, peak load average {peak:.1f}")


if __name__ == "__main__":
    main()
