#!/usr/bin/env python3
"""What a fresh clone pays before `tdd status` answers for a long run (release build).

Conducts STEPS-1 of the STEPS steps of bench/report.py's issue (scripted leaves, a
real cargo crate, the local forge), so the run is active with STEPS-1 steps of real
events; pushes the work branch and its published ledger (`refs/tdd/ledger/<branch>`)
to a bare repository; then, RUNS times, clones it afresh, checks the branch out and
times the first `tdd status` there (it fetches the ledger ref, takes the chain in,
verifies it and the branch's anchors, and moves the run to the clone), and a second
`tdd status` in the same clone for comparison. Prints the medians (goal: the first at
most 300 ms for 50 steps).

Usage: bench/clone.py [path/to/tdd] [--steps N] [--runs N] [--remote DIR]

`--remote DIR` times clones of a bare repository an earlier run left (its path is
printed), skipping the conduct: the figure can then be taken again on an idle machine.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402  (the same issue, fixture and crate)


def conducted():
    """Conducts STEPS-1 steps and pushes them to a new bare repository; returns the
    directory to clone into, the environment, the remote and the work branch."""
    steps = report.STEPS
    home, repo, env, _ = report.conduct("tdd-bench-clone-", ["--max-steps", str(steps - 1)])
    branch = subprocess.run(["git", "rev-parse", "--abbrev-ref", "HEAD"], cwd=repo, env=env,
                            check=True, capture_output=True, text=True).stdout.strip()
    published = subprocess.run([report.TDD, "ledger", "publish", "--json"], cwd=repo, env=env,
                               check=True, capture_output=True, text=True)
    data = json.loads(published.stdout)["data"]
    remote = os.path.join(home, "remote.git")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", remote], check=True)
    subprocess.run(["git", "push", "-q", remote, "main", branch, data["reference"]], cwd=repo, env=env, check=True)
    print(f"remote kept for --remote: {remote}")
    return home, env, remote, branch


def main():
    if "--remote" in sys.argv:
        remote = os.path.abspath(sys.argv[sys.argv.index("--remote") + 1])
        home = tempfile.mkdtemp(prefix="tdd-bench-clone-")
        env = dict(os.environ, TDD_LEDGER_HOME=os.path.join(home, "ledgers"), NO_COLOR="1",
                   GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
                   GIT_COMMITTER_EMAIL="b@b")
        branch = subprocess.run(["git", "for-each-ref", "--format=%(refname:short)", "refs/heads/tdd/"],
                                cwd=remote, check=True, capture_output=True, text=True).stdout.split()[0]
    else:
        home, env, remote, branch = conducted()
    first, second = [], []
    for n in range(report.RUNS):
        clone = os.path.join(home, f"clone-{n}")
        subprocess.run(["git", "clone", "-q", remote, clone], env=env, check=True)
        subprocess.run(["git", "checkout", "-q", branch], cwd=clone, env=env, check=True)
        for times in (first, second):
            t = time.monotonic()
            out = subprocess.run([report.TDD, "status", "--json"], cwd=clone, env=env, capture_output=True, text=True)
            times.append((time.monotonic() - t) * 1000)
            status = json.loads(out.stdout)
            if not status["ok"]:
                sys.exit(f"status in the clone failed: {status['error']}")
        shutil.rmtree(clone)
    events = subprocess.run(["git", "show", f"refs/tdd/ledger/{branch}:head"], cwd=remote,
                            check=True, capture_output=True, text=True).stdout.split(":")[0]
    print(f"published ledger: {events} events")
    print(f"first tdd status in a fresh clone: median {statistics.median(first):.0f} ms over {report.RUNS} clones (goal 300 ms)")
    print(f"second tdd status there: median {statistics.median(second):.0f} ms")


if __name__ == "__main__":
    main()
