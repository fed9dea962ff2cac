#!/usr/bin/env python3
"""What supervision costs through the real binary (release build).

- overhead of `tdd exec -- true` over `true` (median of RUNS; goal <= 10 ms);
- supervisor peak RSS, as the supervisor records it in the exit record
  (`supervisor_peak_rss_kib`), for `true` and for 1 GiB into a 10 MiB cap
  (goal <= 8 MB);
- time from a wall timeout to the whole group gone, for a group that ignores
  SIGTERM (median of RUNS; goal <= grace + 100 ms).

Runs in a temporary git repository with a temporary TDD_LEDGER_HOME, so the
supervisor also writes its events to a real ledger.

Usage: bench/exec_overhead.py [path/to/tdd] [runs]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TDD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/tdd")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 20
TRUE = "/bin/true"


def wall_ms(argv, env, cwd):
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def exec_json(args, env, cwd):
    out = subprocess.run([TDD, "--json", "exec"] + args, env=env, cwd=cwd,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return json.loads(out.stdout)["data"]


def line(what, samples, unit="ms"):
    print(f"{what:<58} median {statistics.median(samples):8.2f} {unit}  "
          f"min {min(samples):8.2f}  max {max(samples):8.2f}  ({len(samples)} runs)")


def main():
    if not os.path.exists(TDD):
        sys.exit(f"{TDD} not found: run `cargo build --release` first")
    with tempfile.TemporaryDirectory() as repo, tempfile.TemporaryDirectory() as ledger:
        subprocess.run(["git", "init", "-q", repo], check=True)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": repo,
               "TDD_LEDGER_HOME": ledger}
        exec_json([TRUE], env, repo)  # create the ledger outside the measurement
        plain = [wall_ms([TRUE], env, repo) for _ in range(RUNS)]
        supervised = [wall_ms([TDD, "--json", "exec", "--", TRUE], env, repo) for _ in range(RUNS)]
        line("`true`", plain)
        line("`tdd exec -- true`", supervised)
        print(f"{'overhead of tdd exec (median difference; goal <= 10 ms)':<58} "
              f"{statistics.median(supervised) - statistics.median(plain):8.2f} ms")

        rss_true = [exec_json([TRUE], env, repo)["exit"]["supervisor_peak_rss_kib"] / 1024
                    for _ in range(3)]
        flood = exec_json(["--max-output", str(10 << 20), "--", "head", "-c", str(1 << 30),
                           "/dev/zero"], env, repo)
        line("supervisor peak RSS, `true` (goal <= 8 MB)", rss_true, "MB")
        line("supervisor peak RSS, 1 GiB into a 10 MiB cap", [flood["exit"]["supervisor_peak_rss_kib"] / 1024], "MB")
        print(f"{'  class of the flood':<58} {flood['class']}")

        grace_ms, wall_ms_ = 300, 200
        gone = []
        for _ in range(RUNS):
            data = exec_json(["--timeout", str(wall_ms_ / 1000), "--grace", str(grace_ms / 1000),
                              "--", "sh", "-c", "trap '' TERM; sleep 1000 & sleep 1000"], env, repo)
            gone.append(data["exit"]["all_gone_after_ms"] - wall_ms_)
        line(f"timeout -> group gone, ignoring SIGTERM (goal <= {grace_ms + 100} ms)", gone)


if __name__ == "__main__":
    main()
