#!/usr/bin/env python3
"""Three conductors on one machine, with and without core leases (release build).

Builds three copies of a small Python project whose suite is run by its own runner
(`suite.py`, the junit adapter): every test burns a fixed amount of CPU in a pool of
`{workers}` processes, as a real suite spread over workers does. Each copy gets an
issue of STEPS steps (scripted leaves: a failing test, its implementation, a no-op
refactor, a blind verifier after each phase that runs the target itself). Then it
conducts the three at once twice: once sharing one lease directory (each runner gets
max(1, cores / live leases) workers), once with a lease directory of their own each
(each sees only itself: every runner gets all the cores, as before leases). Prints
each pass's total wall time, the peak one-minute load average (sampled from
/proc/loadavg every half second) and the most suite worker processes seen at once
(with leases at most the core count: each of three suites gets max(1, 2 / 3) = 1 on
two cores).

Usage: bench/leases.py [path/to/tdd] [--steps N] [--burn N]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import TDD, commit_project, flag, scripted  # noqa: E402  (the binary, flags and leaf scripts as the other benches take them)

STEPS = flag("--steps", 4)
# Iterations of the busy loop each test runs (about 0.2 s of one core here).
BURN = flag("--burn", 2_000_000)
# Tests every copy starts with, so a whole-suite run has work to spread.
START_TESTS = 6

SUITE = r'''"""The project's runner: runs tests/*.py's cases in a pool of --workers processes
and writes JUnit XML to --report. A case is `calc.fK_adds`: calc.fK(ARG) == EXPECT."""
import glob, importlib.util, multiprocessing, os, sys, xml.sax.saxutils as x

BURN = %d

def case(path):
    spec = importlib.util.spec_from_file_location("t", path)
    t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
    total = 0
    for i in range(BURN):
        total += i & 7
    # The process of a test, as a runner's worker is: seen by the bench's sampler.
    sys.path.insert(0, os.getcwd())
    import calc
    got = getattr(calc, t.FN)(t.ARG)
    name = f"{t.FN}_adds"
    if got == t.EXPECT:
        return f'<testcase classname="calc" name="{name}"/>'
    return (f'<testcase classname="calc" name="{name}"><failure message='
            f'{x.quoteattr(f"{t.FN}({t.ARG}) is {got}, not {t.EXPECT}")}/></testcase>')

def main():
    args = sys.argv[1:]
    workers = int(args[args.index("--workers") + 1])
    report = args[args.index("--report") + 1]
    wanted = [a for a in args[args.index("--report") + 2:]]
    paths = sorted(glob.glob("tests/*.py"))
    if wanted:
        names = {w.split(".", 1)[1].removesuffix("_adds") for w in wanted}
        paths = [p for p in paths if os.path.basename(p)[:-3] in names]
    with multiprocessing.Pool(max(1, workers)) as pool:
        cases = pool.map(case, paths, chunksize=1)
    with open(report, "w") as f:
        f.write("<testsuite>" + "".join(cases) + "</testsuite>")

if __name__ == "__main__":
    main()
''' % BURN


def calc(done, stub=None):
    body = "".join(f"def f{k}(x):\n    return x + {k}\n\n" for k in range(1, done + 1))
    body += "".join(f"def s{k}(x):\n    return x\n\n" for k in range(1, START_TESTS + 1))
    if stub:
        body += f"def f{stub}(x):\n    return 0\n"
    return body


def fixture():
    return scripted(
        STEPS,
        lambda k: (f"  - n: {k}\n    project: app\n    title: plus {k}\n    test: app::calc.f{k}_adds\n"
                   f"    files: [calc.py]\n    stub_expected: [calc.py]\n    criterion: \"{k}\"\n"),
        lambda k: [(f"tests/f{k}.py", f"FN = 'f{k}'\nARG = 1\nEXPECT = {1 + k}\n"), ("calc.py", calc(k - 1, k))],
        lambda k: [("calc.py", calc(k))],
        "app::calc.f${TDD_STEP}_adds",
    )


def project(home):
    """One repository of the issue under `home`, ready to conduct; returns its
    directory, environment and issue path."""
    repo = os.path.join(home, "calc")
    os.makedirs(os.path.join(repo, "tests"))
    env = dict(os.environ, TDD_LEDGER_HOME=os.path.join(home, "ledgers"), NO_COLOR="1",
               GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@b")
    env.pop("TDD_CORE_BUDGET", None)
    files = {
        "suite.py": SUITE,
        "calc.py": calc(0),
        ".gitignore": "__pycache__/\n",
        "tdd.toml": '[project.app]\nadapter = "junit"\n'
                    'test_command = "python3 suite.py --workers {workers} --report {report} {target}"\n\n'
                    '[locks]\nimpl = ["calc.py"]\ntest = ["tests/**"]\n\n'
                    '[conductor]\nprovider = "scripted"\nverifier_provider = "scripted"\n\n'
                    f'[provider.scripted]\nargs = ["{os.path.join(home, "fixture.toml")}"]\n',
    }
    for k in range(1, START_TESTS + 1):
        files[f"tests/s{k}.py"] = f"FN = 's{k}'\nARG = {k}\nEXPECT = {k}\n"
    return repo, env, commit_project(home, repo, env, files, fixture(), STEPS)


def workers_running():
    """The suites' worker processes alive now: Python processes of suite.py whose parent
    is one too (the pool's workers, not its parent or the `sh -c` that started it)."""
    procs = {}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
                with open(f"/proc/{pid}/stat") as f:
                    ppid = f.read().rsplit(")", 1)[1].split()[1]
            except (OSError, IndexError):
                continue
            if any(b"suite.py" in a for a in argv) and b"python" in argv[0]:
                procs[pid] = ppid
    return sum(1 for ppid in procs.values() if ppid in procs)


def three_at_once(shared):
    base = tempfile.mkdtemp(prefix="tdd-bench-leases-")
    runs = []
    for n in range(3):
        home = os.path.join(base, f"p{n}")
        os.makedirs(home)
        repo, env, issue = project(home)
        env["TDD_LEASE_DIR"] = os.path.join(base, "leases" if shared else f"leases-{n}")
        runs.append((repo, env, issue))
    peak, most = [0.0], [0]
    done = threading.Event()

    def sample():
        while not done.is_set():
            with open("/proc/loadavg") as f:
                peak[0] = max(peak[0], float(f.read().split()[0]))
            most[0] = max(most[0], workers_running())
            done.wait(0.5)

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    procs = [subprocess.Popen([TDD, "conduct", issue, "--json"], cwd=repo, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for repo, env, issue in runs]
    outs = [p.communicate()[0] for p in procs]
    wall = time.monotonic() - started
    done.set()
    sampler.join()
    for out in outs:
        result = json.loads(out.strip().splitlines()[-1])
        if not result["ok"] or result["data"]["steps_done"] != STEPS:
            sys.exit(f"a conduct did not finish: {json.dumps(result)[:400]}")
    shutil.rmtree(base)
    return wall, peak[0], most[0]


def settle():
    """Waits until the one-minute load average is below 1, so one pass's load does not
    count in the next."""
    while True:
        with open("/proc/loadavg") as f:
            if float(f.read().split()[0]) < 1.0:
                return
        time.sleep(5)


def main():
    cores = os.cpu_count()
    print(f"{cores} cores; three conductors, {STEPS} steps each, {START_TESTS + STEPS} tests at the end")
    settle()
    shared = three_at_once(True)
    settle()
    alone = three_at_once(False)
    for label, (wall, peak, most) in (("with leases", shared), ("without leases", alone)):
        print(f"{label:>15}: wall {wall:.1f} s, peak load {peak:.2f}, most suite workers at once {most}")
    print(f"wall time ratio (with / without): {shared[0] / alone[0]:.2f}")


if __name__ == "__main__":
    main()
