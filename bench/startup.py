#!/usr/bin/env python3
"""Median wall time and peak RSS of short tdd commands (release build).

Peak RSS needs GNU time (`apt-get install time`).

Usage: bench/startup.py [path/to/tdd] [runs]
Prints one line per command: median, min, max wall time in ms and peak RSS in MB.
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TDD = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/tdd")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 10

COMMANDS = [
    ["--version"],
    ["doctor", "--json"],
    ["ledger", "verify", "--json"],
]


def peak_rss_mb(argv):
    """Peak RSS through GNU time: a fork of this Python process would count Python's pages.

    GNU time reports the largest of the process and its waited-for children, so for
    commands that spawn git or a runner it is the largest process of the command.
    """
    out = subprocess.run(["/usr/bin/time", "-f", "%M", TDD] + argv, cwd=ROOT,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return int(out.stderr.strip().splitlines()[-1]) / 1024


def measure(argv):
    walls, rss = [], []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([TDD] + argv, cwd=ROOT, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        walls.append((time.perf_counter() - start) * 1000)
    if os.path.exists("/usr/bin/time"):
        rss = [peak_rss_mb(argv) for _ in range(3)]
    else:
        rss = [float("nan")]
    return walls, rss


def main():
    if not os.path.exists(TDD):
        sys.exit(f"{TDD} not found: run `cargo build --release` first")
    print(f"{'command':<24} {'median ms':>10} {'min ms':>8} {'max ms':>8} {'peak RSS MB':>12}  ({RUNS} runs)")
    for argv in COMMANDS:
        walls, rss = measure(argv)
        print(f"{' '.join(argv):<24} {statistics.median(walls):>10.2f} {min(walls):>8.2f} "
              f"{max(walls):>8.2f} {max(rss):>12.2f}")


if __name__ == "__main__":
    main()
