#!/usr/bin/env python3
"""tdd's added time on real projects: `tdd test --all` against the runner's own run.

Uses the projects the corpus e2e test fetched (run `cargo test --test e2e corpus` first):
more-itertools (pytest), strsim (cargo-nextest), google/uuid (go test), jsonpath (mocha)
and @fastify/merge-json-schemas (node:test). Each project is
copied into a fresh repository, `tdd init` is committed, one warm-up run of each side
fills the build caches, then RUNS runs of each side alternate. Prints the medians and
the ratio tdd / runner (goal: at most 1.1).

Usage: bench/corpus.py [path/to/tdd] [runs]
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TDD = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/tdd")
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
CACHE = os.path.join(ROOT, "target/tmp/corpus")

PROJECTS = [
    ("more-itertools (pytest)", "more-itertools-10.5.0",
     ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=/dev/null"]),
    # tdd runs the doctests too (nextest does not), so the runner's side does as well.
    ("strsim (cargo-nextest)", "strsim-0.11.1",
     ["sh", "-c", "cargo nextest run --no-fail-fast && cargo test --doc"]),
    ("google/uuid (go test)", "golang-github-google-uuid", ["go", "test", "-json", "-count=1", "./..."]),
    ("jsonpath (mocha)", "jsonpath-1.3.0",
     ["node_modules/.bin/mocha", "-u", "tdd", "test", "--reporter", "json"]),
    ("merge-json-schemas (node)", "merge-json-schemas-0.2.2", ["node", "--test"]),
]


def timed(argv, cwd, env):
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return (time.perf_counter() - start) * 1000


def main():
    if not os.path.exists(TDD):
        sys.exit(f"{TDD} not found: run `cargo build --release` first")
    work = tempfile.mkdtemp(prefix="tdd-corpus-bench-")
    env = dict(os.environ, TDD_LEDGER_HOME=f"{work}/ledger", GIT_AUTHOR_NAME="b",
               GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
    try:
        for label, name, own in PROJECTS:
            source = os.path.join(CACHE, name)
            if not os.path.isdir(source):
                print(f"{label}: not fetched ({source}); run `cargo test --test e2e corpus`")
                continue
            repo = os.path.join(work, name)
            # Links stay links: node_modules/.bin holds them.
            shutil.copytree(source, repo, symlinks=True)
            for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"],
                         [TDD, "init"], ["git", "add", "-A"], ["git", "commit", "-qm", "tdd"]):
                subprocess.run(argv, cwd=repo, env=env, stdout=subprocess.DEVNULL, check=True)
            mine = [TDD, "test", "--all", "--json"]
            timed(own, repo, env)
            timed(mine, repo, env)
            own_ms, tdd_ms = [], []
            for _ in range(RUNS):
                own_ms.append(timed(own, repo, env))
                tdd_ms.append(timed(mine, repo, env))
            o, t = statistics.median(own_ms), statistics.median(tdd_ms)
            print(f"{label:26} runner {o:7.0f} ms   tdd {t:7.0f} ms   ratio {t / o:4.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
