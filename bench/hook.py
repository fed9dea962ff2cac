#!/usr/bin/env python3
"""What `tdd hook claude pre-tool-use` costs an agent on every tool call (release build).

On a pytest repository of FILES files whose run is in GREEN, with the ledger padded to
EVENTS events (copies of a `tdd note`, chained as tdd chains them), it times the hook
as the agent CLI sees it, process start to answer, RUNS times each for:
- a Write to the locked test (denied),
- a Write to the implementation (let through),
- a shell command that writes nothing (let through).
Prints p50 and p95 of each (goal: p50 at most 5 ms, p95 at most 15 ms).

Usage: bench/hook.py [path/to/tdd] [runs] [--files N] [--events N]
"""
import hashlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = [a for a in sys.argv[1:] if not a.startswith("--")]
TDD = os.path.abspath(ARGS[0]) if ARGS else os.path.join(ROOT, "target/release/tdd")


def flag(name, default):
    if name in sys.argv:
        return int(sys.argv[sys.argv.index(name) + 1])
    return default


RUNS = int(ARGS[1]) if len(ARGS) > 1 and ARGS[1].isdigit() else 50
FILES = flag("--files", 10_000)
EVENTS = flag("--events", 10_000)


def run(argv, cwd, env, stdin=None):
    out = subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"{argv} failed ({out.returncode}): {out.stdout}\n{out.stderr}")
    return out


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def event_hash(prev, run_id, kind, payload, at):
    h = hashlib.sha256()
    for field in (prev, run_id or "", kind, payload, at):
        data = field.encode()
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


def pad_ledger(database, events):
    """Appends copies of the last event until the ledger holds `events`, chained."""
    db = sqlite3.connect(database)
    (count, head) = db.execute("SELECT count, hash FROM chain_head WHERE id = 1").fetchone()
    run_id, kind, payload, at = db.execute(
        "SELECT run_id, kind, payload, at FROM events ORDER BY id DESC LIMIT 1").fetchone()
    rows = []
    for _ in range(max(0, events - count)):
        new = event_hash(head, run_id, kind, payload, at)
        rows.append((run_id, kind, payload, at, head, new))
        head = new
    db.executemany(
        "INSERT INTO events (run_id, kind, payload, at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?)", rows)
    db.execute("UPDATE chain_head SET count = ?, hash = ? WHERE id = 1", (count + len(rows), head))
    db.commit()
    db.close()


def repo_in_green(repo, env):
    for i in range(FILES - 6):
        write(f"{repo}/pkg/m{i // 500}/mod_{i}.py", f"VALUE_{i} = {i}\n")
    write(f"{repo}/calc.py", "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    raise NotImplementedError\n")
    write(f"{repo}/pytest.ini", "[pytest]\npythonpath = .\n")
    write(f"{repo}/.gitignore", "__pycache__/\n.pytest_cache/\n")
    write(f"{repo}/tdd.toml", '[project.py]\nadapter = "pytest"\ntest_paths = ["tests/"]\n\n[locks]\nimpl = ["calc.py", "pkg/**"]\ntest = ["tests/**"]\n')
    write(f"{repo}/.tdd/plan.md", "---\ncycles:\n  - n: 1\n    project: py\n    title: sub\n    test: tests/test_sub.py::test_sub\n---\n")
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
        run(argv, repo, env)
    run([TDD, "run", "start", "--plan", ".tdd/plan.md", "--json"], repo, env)
    write(f"{repo}/tests/test_sub.py", "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 2) == 3\n")
    red = json.loads(run([TDD, "advance", "--json"], repo, env).stdout)
    assert red["ok"] and red["data"]["to"] == "AWAITING_IMPL", red
    run([TDD, "note", "padding the ledger", "--json"], repo, env)


def timed_hook(repo, env, tool, tool_input):
    event = json.dumps({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": tool,
                        "tool_input": tool_input, "cwd": repo})
    times, answer = [], None
    for _ in range(RUNS):
        start = time.perf_counter()
        out = run([TDD, "hook", "claude", "pre-tool-use"], repo, env, stdin=event)
        times.append((time.perf_counter() - start) * 1000)
        answer = out.stdout
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1], answer


def main():
    if not os.path.exists(TDD):
        sys.exit(f"{TDD} does not exist: build it with `cargo build --release`")
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, TDD_LEDGER_HOME=f"{work}/ledgers", GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b",
                   GIT_COMMITTER_NAME="b", GIT_COMMITTER_EMAIL="b@b")
        repo = f"{work}/repo"
        print(f"making a repository of {FILES} files in GREEN...", file=sys.stderr)
        repo_in_green(repo, env)
        database = json.loads(run([TDD, "ledger", "path", "--json"], repo, env).stdout)["data"]["database"]
        pad_ledger(database, EVENTS)
        verified = json.loads(run([TDD, "ledger", "verify", "--json"], repo, env).stdout)
        assert verified["ok"], verified
        # Closed at once: a connection left open keeps SQLite's log from being emptied
        # when tdd closes the ledger, which no tdd command does to another.
        reader = sqlite3.connect(database)
        events = reader.execute("SELECT COUNT(*) FROM events").fetchone()[0]
        reader.close()
        size = os.path.getsize(database) // 1024
        print(f"{FILES} files, ledger of {events} events ({size} KB), {RUNS} calls each")
        for label, tool, tool_input, denied in (
            ("Write to the locked test (denied)", "Write", {"file_path": f"{repo}/tests/test_sub.py", "content": "x"}, True),
            ("Write to the implementation (allowed)", "Write", {"file_path": f"{repo}/calc.py", "content": "x"}, False),
            ("Bash that writes nothing (allowed)", "Bash", {"command": "python3 -m pytest -q"}, False),
        ):
            p50, p95, answer = timed_hook(repo, env, tool, tool_input)
            assert bool(answer.strip()) == denied, (label, answer)
            print(f"{label:40} p50 {p50:6.1f} ms   p95 {p95:6.1f} ms")


main()
