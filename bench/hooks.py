#!/usr/bin/env python3
"""The demo issue conducted with the hooks off and on: what the gate had to undo.

Runs `tdd demo` (scripted developers that make the same wrong edit: loosening the test
GREEN locks) RUNS times each way, `--hooks` wiring `tdd hook claude` into every
developer leaf (through the relay, from inside its confined leaf). Reads each run's
draft PR and prints, per way: locked files the gate reverted, writes the hooks denied
before they happened, shell changes the hooks undid, revise rounds, and the wall time.

Usage: bench/hooks.py [path/to/tdd] [runs]
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TDD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/tdd")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 3


def demo(hooks):
    with tempfile.TemporaryDirectory() as home:
        env = dict(os.environ, TDD_LEDGER_HOME=os.path.join(home, "ledgers"))
        argv = [TDD, "--json", "demo", "--keep", os.path.join(home, "demo")]
        if hooks:
            argv.append("--hooks")
        began = time.monotonic()
        out = subprocess.run(argv, env=env, capture_output=True, text=True)
        wall = time.monotonic() - began
        envelope = json.loads(out.stdout.strip().splitlines()[-1])
        if not envelope.get("ok"):
            sys.exit(f"tdd demo failed: {envelope.get('error')}")
        with open(envelope["data"]["pr"]) as f:
            pr = f.read()
    reverted = sum(len(m.split(", ")) for m in re.findall(r"the engine reverted (.+)", pr))
    denied = len(re.findall(r"the hook denied a write", pr))
    undone = len(re.findall(r"the hook undid", pr))
    rounds = 0
    for line in pr.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 6 and cells[0] in ("RED", "GREEN", "REFACTOR"):
            rounds += int(cells[2])
    return reverted, denied, undone, rounds, wall


def main():
    print(f"tdd demo, {RUNS} runs each way ({TDD})")
    print(f"{'hooks':6} {'gate reverts':>13} {'hook denials':>13} {'hook undos':>11} {'revise rounds':>14} {'wall s':>8}")
    for hooks in (False, True):
        runs = [demo(hooks) for _ in range(RUNS)]
        first = runs[0]
        if any(r[:4] != first[:4] for r in runs):
            print(f"  the runs disagree: {runs}")
        wall = statistics.median(r[4] for r in runs)
        print(f"{'on' if hooks else 'off':6} {first[0]:>13} {first[1]:>13} {first[2]:>11} {first[3]:>14} {wall:>8.1f}")


if __name__ == "__main__":
    main()
