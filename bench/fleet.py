#!/usr/bin/env python3
"""What `tdd fleet --all-repos` costs over a large ledger home (release build).

Starts a real run in a small pytest repository (so the ledger's schema and a real
`run_started` are tdd's own), then fills a ledger home of REPOS repositories with RUNS
runs of EVENTS events each (copies of that run's start, notes of about 200 bytes, and
a cycle opened every 20 events), inserted straight into SQLite: `tdd fleet` does not
walk the chain, so the copies need not be chained. Times `tdd fleet --all-repos --json`
(process start to exit) and prints the median (goal: 50 ms for 1,000 runs and
1,000,000 events).

Usage: bench/fleet.py [path/to/tdd] [--repos N] [--runs N] [--events N] [--times N]
"""
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--") and not a.isdigit()]
TDD = os.path.abspath(ARGS[0]) if ARGS else os.path.join(ROOT, "target/release/tdd")


def flag(name, default):
    if name in sys.argv:
        return int(sys.argv[sys.argv.index(name) + 1])
    return default


REPOS = flag("--repos", 10)
RUNS = flag("--runs", 1000)
EVENTS = flag("--events", 1_000_000)
TIMES = flag("--times", 11)


def started_of(started, worktree):
    """The `run_started` payload of a run in `worktree`, as the engine writes it."""
    started["worktree"] = worktree
    return json.dumps(started, sort_keys=True, separators=(",", ":"))


def main():
    home = tempfile.mkdtemp(prefix="tdd-bench-fleet-")
    ledgers = os.path.join(home, "ledgers")
    repo = os.path.join(home, "seed")
    os.makedirs(os.path.join(repo, "tests"))
    env = dict(os.environ, TDD_LEDGER_HOME=ledgers, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b",
               GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
    files = {
        "calc.py": "def add(a, b):\n    return a + b\n",
        "pytest.ini": "[pytest]\npythonpath = .\n",
        ".gitignore": "__pycache__/\n.pytest_cache/\n",
        "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
        "tdd.toml": '[project.py]\nadapter = "pytest"\ntest_paths = ["tests/"]\n',
        ".tdd/plan.md": "---\ncycles:\n  - n: 1\n    project: py\n    title: sub\n    test: tests/test_sub.py::test_sub\n---\n",
    }
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(repo, path)), exist_ok=True)
        with open(os.path.join(repo, path), "w") as f:
            f.write(text)
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "seed"]):
        subprocess.run(argv, cwd=repo, env=env, check=True)
    subprocess.run([TDD, "run", "start", "--plan", ".tdd/plan.md", "--json"], cwd=repo, env=env,
                   check=True, capture_output=True)
    seed_dir = os.path.join(ledgers, "repos", os.listdir(os.path.join(ledgers, "repos"))[0])
    seed = sqlite3.connect(os.path.join(seed_dir, "ledger.sqlite3"))
    started = seed.execute("SELECT payload, at FROM events WHERE kind = 'run_started'").fetchone()
    seed.close()
    per_run = EVENTS // RUNS
    runs_per_repo = RUNS // REPOS
    note = json.dumps({"n": 1, "text": "x" * 180})
    serial = 0
    for r in range(REPOS):
        target = os.path.join(ledgers, "repos", f"repo{r:03}-{r:016x}")
        shutil.copytree(seed_dir, target)
        db = sqlite3.connect(os.path.join(target, "ledger.sqlite3"))
        rows = []
        for k in range(runs_per_repo):
            run_id = f"run-20261204T000000-{r:03x}{k:03x}"
            for e in range(per_run):
                serial += 1
                if e == 0:
                    # Each run its own start: a run's work tree differs, and SQLite must
                    # not answer one payload's fields from another's parse.
                    kind = "run_started"
                    payload = started_of(json.loads(started[0]), f"{repo}-wt{r:03}-{k:03}")
                elif e % 20 == 0:
                    kind = "cycle_opened"
                    payload = json.dumps({"n": 1, "phase": "AWAITING_IMPL", "snapshot": "s", "head": "h"})
                else:
                    kind, payload = "note", note
                rows.append((run_id, kind, payload, started[1], "p", f"h{serial}"))
        db.executemany("INSERT INTO events (run_id, kind, payload, at, prev_hash, hash) VALUES (?,?,?,?,?,?)", rows)
        db.commit()
        db.close()
    print(f"ledger home: {REPOS} repositories, {RUNS} runs, {serial} events")

    times = []
    for _ in range(TIMES):
        t = time.monotonic()
        out = subprocess.run([TDD, "fleet", "--all-repos", "--json"], cwd=repo, env=env, capture_output=True, text=True)
        times.append((time.monotonic() - t) * 1000)
    listed = len(json.loads(out.stdout)["data"]["runs"])
    print(f"tdd fleet --all-repos: {listed} runs listed, median {statistics.median(times):.0f} ms over {TIMES} runs (goal 50 ms)")
    if os.environ.get("KEEP"):
        print("kept", home)
    else:
        shutil.rmtree(home)


if __name__ == "__main__":
    main()
