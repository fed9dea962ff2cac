#!/usr/bin/env python3
"""What the engine relay costs a confined leaf (release build).

A confined leaf's `tdd status` and `tdd test` do not run in the leaf: the conductor
runs them on its behalf (docs/config.md, `[sandbox]`). This times both commands inside
the first confined developer leaf of the demo's `tdd conduct` (through the relay) and
the same commands run directly in the same repository, and prints the medians and
their difference (goal: under 10 ms for `tdd test`).

Usage: bench/relay.py [path/to/tdd] [runs]
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
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 15
COMMANDS = {"status": ["status", "--json"], "test": ["test", "app::calc::add adds", "--json"]}
# The timer checks each command succeeded, so a refused relay cannot pass for a fast one.

# Runs inside the leaf: times each command RUNS times and prints the medians as JSON.
TIMER = """
import json, statistics, subprocess, sys, time
runs, commands = int(sys.argv[1]), json.loads(sys.argv[2])
out = {}
for name, argv in commands.items():
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(["tdd", *argv], capture_output=True)
        if done.returncode not in (0, 1) or b'"envelope_version"' not in done.stdout:
            print("RELAY-FAILED " + name + " " + done.stderr.decode(errors="replace"), flush=True)
            sys.exit(1)
        times.append((time.perf_counter() - start) * 1000)
    out[name] = statistics.median(times)
    out[name + "_last"] = done.stdout.decode(errors="replace")[-600:]
print("RELAY-TIMES " + json.dumps(out), flush=True)
"""


def run(argv, cwd, env, check=True):
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if check and out.returncode != 0:
        sys.exit(f"{argv} failed ({out.returncode}): {out.stdout}\n{out.stderr}")
    return out


def setup(work, name, env, sandbox):
    """The demo in `work/name`, its first developer leaf running the timer; built."""
    repo = f"{work}/{name}"
    demo = os.path.join(ROOT, "examples/demo")
    shutil.copytree(demo, repo)
    shutil.move(f"{repo}/gitignore.txt", f"{repo}/.gitignore")
    fixture = f"{work}/home/fixture-{name}.toml"
    timer = ('[[leaf.do]]\naction = "run"\n'
             f"argv = {json.dumps(['python3', '-c', TIMER, str(RUNS), json.dumps(COMMANDS)])}\n")
    first_red = 'role = "developer"\nstep = 1\nphase = "red"\nattempt = 1\n'
    scripted = open(f"{demo}/fixture.toml").read()
    assert first_red in scripted, "the demo's fixture changed"
    with open(fixture, "w") as f:
        f.write(scripted.replace(first_red, first_red + timer, 1))
    config = open(f"{repo}/tdd.toml").read().replace("{fixture}", fixture)
    with open(f"{repo}/tdd.toml", "w") as f:
        f.write(config + f"\n[sandbox]\nenabled = {'true' if sandbox else 'false'}\n")
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "demo"]):
        run(argv, repo, env)
    # Warm the build, so no side pays for compiling.
    run([TDD, *COMMANDS["test"]], repo, env, check=False)
    return repo


def in_leaf(repo, env, ledger):
    """The timer's medians from inside the first developer leaf of a conduct."""
    env = dict(env, TDD_LEDGER_HOME=ledger)
    conducted = run([TDD, "conduct", os.path.join(ROOT, "examples/demo/issue-1.md"), "--json"],
                    repo, env, check=False)
    for dirpath, _, files in os.walk(ledger):
        if "stdout.log" in files:
            for line in open(os.path.join(dirpath, "stdout.log"), errors="replace"):
                if line.startswith("RELAY-TIMES "):
                    return json.loads(line.split(" ", 1)[1])
    sys.exit(f"the leaf printed no timings: {conducted.stdout[-3000:]}")


def main():
    if not os.path.exists(TDD):
        sys.exit(f"{TDD} not found: run `cargo build --release` first")
    work = tempfile.mkdtemp(prefix="tdd-relay-bench-")
    try:
        env = dict(os.environ, HOME=f"{work}/home", TDD_LEDGER_HOME=f"{work}/ledger-direct",
                   GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
                   GIT_COMMITTER_EMAIL="b@b", TDD_HEARTBEAT_SECS="86400")
        env["PATH"] = os.path.dirname(TDD) + os.pathsep + env.get("PATH", "")
        env["CARGO_HOME"] = os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo"))
        env["RUSTUP_HOME"] = os.environ.get("RUSTUP_HOME", os.path.expanduser("~/.rustup"))
        os.makedirs(env["HOME"])
        confined_repo = setup(work, "confined", env, True)
        open_repo = setup(work, "open", env, False)
        direct = {}
        for name, argv in COMMANDS.items():
            times = []
            for _ in range(RUNS):
                start = time.perf_counter()
                run([TDD, *argv], confined_repo, env, check=False)
                times.append((time.perf_counter() - start) * 1000)
            direct[name] = statistics.median(times)
        relayed = in_leaf(confined_repo, env, f"{work}/ledger-confined")
        unconfined = in_leaf(open_repo, env, f"{work}/ledger-open")
        print(f"median of {RUNS}; `tdd test` runs one cargo test, warm")
        for name in COMMANDS:
            d, u, r = direct[name], unconfined[name], relayed[name]
            print(f"tdd {name:6}  outside a conduct {d:7.1f} ms   in an unconfined leaf {u:7.1f} ms"
                  f"   in a confined leaf, through the relay {r:7.1f} ms"
                  f"   (relay {r - u:+6.1f} ms, against outside {r - d:+6.1f} ms)")
    finally:
        if not os.environ.get("KEEP"):
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
