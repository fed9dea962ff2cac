#!/usr/bin/env python3
"""What `tdd report` costs on a long run (release build).

Conducts, with scripted leaves and the local forge, an issue of STEPS acceptance
criteria on a small cargo crate (each step: a failing test, its implementation, a
no-op refactor, a blind verifier after each phase that runs the target itself), so the
ledger holds a real run of STEPS steps. Then times `tdd report` (process start to exit,
RUNS times) and `tdd log render`, and prints the median, the page's size and the
ledger's size (goal: at most 200 ms and 2 MB for 50 steps).

Usage: bench/report.py [path/to/tdd] [--steps N] [--runs N]
"""
import json
import os
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


STEPS = flag("--steps", 50)
RUNS = flag("--runs", 11)


def lib(done, stub=None):
    """The crate's lib.rs with functions 1..=done implemented and `stub` stubbed."""
    body = "//! A crate grown one criterion at a time.\n"
    for k in range(1, done + 1):
        body += f"\n/// `x` plus {k}.\npub fn f{k}(x: i32) -> i32 {{\n    x + {k}\n}}\n"
    if stub:
        body += f"\n/// `x` plus {stub} (a stub until GREEN).\npub fn f{stub}(_x: i32) -> i32 {{\n    0\n}}\n"
    return body


def toml_str(text):
    return '"""\n' + text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '"""'


def scripted(steps, cycle, red, green, target):
    """The scripted provider's fixture for an issue of `steps` steps: the planner writes
    the plan whose cycles `cycle(k)` gives (YAML lines), developer k writes `red(k)` in RED
    and `green(k)` in GREEN (lists of (path, content)), REFACTOR tidies nothing, and every
    verifier runs `tdd test` of `target` (a shell word, with `$TDD_STEP` for the step)
    and accepts."""
    plan = toml_str("---\ncycles:\n" + "".join(cycle(k) for k in range(1, steps + 1)) + "---\n")
    out = ['version = 1\n', '[[leaf]]\nrole = "planner"\n[[leaf.do]]\naction = "write"\n'
           f'path = ".tdd/issue-1.md"\ncontent = {plan}\n']

    def writes(files):
        return "".join(f'[[leaf.do]]\naction = "write"\npath = "{path}"\ncontent = {toml_str(text)}\n'
                       for path, text in files)

    for k in range(1, steps + 1):
        out.append(f'[[leaf]]\nrole = "developer"\nstep = {k}\nphase = "red"\n' + writes(red(k)))
        out.append(f'[[leaf]]\nrole = "developer"\nstep = {k}\nphase = "green"\n' + writes(green(k)))
    out.append('[[leaf]]\nrole = "developer"\nphase = "refactor"\n[[leaf.do]]\naction = "print"\ntext = "nothing to tidy\\n"\n')
    out.append('[[leaf]]\nrole = "verifier"\n[[leaf.do]]\naction = "run"\n'
               f'argv = ["sh", "-c", "tdd test \\"{target}\\""]\n'
               '[[leaf.do]]\naction = "verdict"\ndecision = "accept"\nreason = "ran it"\n')
    return "".join(out)


def fixture():
    return scripted(
        STEPS,
        lambda k: (f"  - n: {k}\n    project: app\n    title: plus {k}\n    test: app::calc::f{k} adds\n"
                   f"    files: [src/lib.rs]\n    stub_expected: [src/lib.rs]\n    criterion: \"{k}\"\n"),
        lambda k: [(f"tests/f{k}.rs", f"#[test]\nfn adds() {{\n    assert_eq!(calc::f{k}(1), {1 + k});\n}}\n"),
                   ("src/lib.rs", lib(k - 1, k))],
        lambda k: [("src/lib.rs", lib(k))],
        "app::calc::f$TDD_STEP adds",
    )


def commit_project(home, repo, env, files, leaves, steps):
    """Writes `files` into `repo` and commits them as its first commit, the scripted
    leaves' fixture `leaves` as `home/fixture.toml`, and an issue of `steps` criteria
    as `home/issue-1.md`, whose path it returns."""
    for path, text in files.items():
        with open(os.path.join(repo, path), "w") as f:
            f.write(text)
    with open(os.path.join(home, "fixture.toml"), "w") as f:
        f.write(leaves)
    issue = os.path.join(home, "issue-1.md")
    with open(issue, "w") as f:
        f.write("# Plus\n\n## Acceptance criteria\n\n" + "".join(f"- [ ] `f{k}(1)` is {1 + k}\n" for k in range(1, steps + 1)))
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "calc"]):
        subprocess.run(argv, cwd=repo, env=env, check=True)
    return issue


def conduct(prefix, extra=()):
    """Conducts the STEPS-step issue in a new repository; returns its home, the
    repository, the environment and the conduct's envelope data."""
    home = tempfile.mkdtemp(prefix=prefix)
    repo = os.path.join(home, "calc")
    os.makedirs(os.path.join(repo, "src"))
    os.makedirs(os.path.join(repo, "tests"))
    env = dict(os.environ, TDD_LEDGER_HOME=os.path.join(home, "ledgers"), NO_COLOR="1",
               GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@b", CARGO_TARGET_DIR=os.path.join(repo, "target"))
    files = {
        "Cargo.toml": '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n',
        ".gitignore": "/target\n",
        "src/lib.rs": lib(0),
        "tests/start.rs": "#[test]\nfn starts() {}\n",
        "tdd.toml": '[project.app]\nadapter = "cargo"\n\n[locks]\nimpl = ["src/**"]\ntest = ["tests/**"]\n\n'
                    '[conductor]\nprovider = "scripted"\nverifier_provider = "scripted"\n\n'
                    f'[provider.scripted]\nargs = ["{os.path.join(home, "fixture.toml")}"]\n',
    }
    issue = commit_project(home, repo, env, files, fixture(), STEPS)
    started = time.monotonic()
    done = subprocess.run([TDD, "conduct", issue, "--json", *extra], cwd=repo, env=env, capture_output=True, text=True)
    conducted = time.monotonic() - started
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not result["ok"]:
        sys.exit(f"the conduct failed: {result['error']}")
    data = result["data"]
    print(f"conducted {data['steps_done']}/{data['steps']} steps in {conducted:.0f} s")
    return home, repo, env, data


def main():
    home, repo, env, data = conduct("tdd-bench-report-")

    def timed(argv):
        times = []
        for _ in range(RUNS):
            t = time.monotonic()
            subprocess.run(argv, cwd=repo, env=env, check=True, capture_output=True)
            times.append((time.monotonic() - t) * 1000)
        return statistics.median(times)

    report = timed([TDD, "report", "--json"])
    log = timed([TDD, "log", "render", "--json"])
    out = json.loads(subprocess.run([TDD, "report", "--json"], cwd=repo, env=env, capture_output=True, text=True).stdout)
    page = os.path.getsize(out["data"]["path"])
    events = out["data"]["report"]["header"]["ledger"]["events"]
    ledger = subprocess.run([TDD, "ledger", "path", "--json"], cwd=repo, env=env, capture_output=True, text=True)
    database = json.loads(ledger.stdout)["data"].get("database", "")
    size = os.path.getsize(database) if database and os.path.exists(database) else 0
    print(f"ledger: {events} events, {size / 1e6:.1f} MB")
    print(f"tdd report: median {report:.0f} ms over {RUNS} runs (goal 200 ms); page {page / 1e6:.2f} MB (goal 2 MB)")
    print(f"tdd log render: median {log:.0f} ms")


if __name__ == "__main__":
    main()
