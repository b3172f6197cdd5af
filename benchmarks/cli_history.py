"""``contextledger history`` of a 500-turn session, in a fresh process, against two baselines.

    python benchmarks/cli_history.py                    # 7 runs of each case
    python benchmarks/cli_history.py --runs 11 --turns 1000
    python benchmarks/cli_history.py --profile          # where one piped run spends its time

Builds a SQLite ledger with one session of ``--turns`` user/assistant turns (two
messages each) under a sliding window of 40, reduced every 50 turns so most rows are
evicted (the greyed rows of the listing), then times, each in a new interpreter:

- ``python -c pass`` -- the interpreter alone;
- ``contextledger --version``;
- ``contextledger history SESSION --url sqlite:///...`` piped (``| cat``: no pager, laid
  out 120 columns wide) and on a pseudo-terminal of 80 and of 200 columns (paging off).

The cases run alternately, the order rotated each round, so drift on a shared machine
hits all of them alike. Prints medians, 95th percentiles and each case's ratio to
``python -c pass``; and which of the heavy modules a ``history`` run imported.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path

SESSION = "cli-history"
HEAVY = (
    "sqlalchemy",
    "alembic",
    "uvicorn",
    "starlette",
    "jinja2",
    "contextledger.web",
    "contextledger.demo",
    "strands",
)


def build(url: str, turns: int) -> None:
    """One session of ``turns`` turns, evicted by a manual sliding-window reduction every 50 turns."""
    from contextledger import Ledger, Message
    from contextledger.managers import SlidingWindowConversationManager

    with Ledger.connect(url) as ledger:
        conversation = ledger.conversation(SESSION, "main", manager=SlidingWindowConversationManager(window_size=40))
        for turn in range(turns):
            conversation.append(
                Message.user(f"[turn {turn}] a question about topic {turn}, " + "with some detail " * 8),
                Message.assistant(f"answer {turn}: " + "lorem ipsum dolor sit amet " * 6),
            )
            if turn % 50 == 49:
                conversation.reduce("manual")


def _script() -> str:
    """The console script of this interpreter's environment."""
    found = Path(sys.executable).with_name("contextledger")
    if found.exists():
        return str(found)
    which = shutil.which("contextledger")
    if which is None:
        raise SystemExit("the contextledger console script is not installed in this environment")
    return which


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    env["CONTEXTLEDGER_PAGER"] = ""  # a terminal run prints instead of paging
    return env


def piped(argv: list[str]) -> float:
    """Seconds ``argv`` takes with stdout on a pipe (read to the end)."""
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, env=_env(), check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed ({done.returncode}): {done.stderr.decode(errors='replace')}")
    return elapsed


def on_terminal(argv: list[str], columns: int) -> float:
    """Seconds ``argv`` takes with stdout on a pseudo-terminal ``columns`` wide (read to the end)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=_env())
    os.close(slave)
    while True:
        try:
            if not os.read(master, 65536):
                break
        except OSError:  # EIO: the child closed its side
            break
    process.wait()
    elapsed = time.perf_counter() - start
    os.close(master)
    if process.returncode != 0:
        assert process.stderr is not None
        raise SystemExit(f"{argv} failed ({process.returncode}): {process.stderr.read().decode(errors='replace')}")
    return elapsed


def imported_heavy(url: str) -> list[str]:
    """The heavy modules (see :data:`HEAVY`) a piped ``history`` run imports."""
    code = (
        f"import sys; sys.argv = ['contextledger', 'history', {SESSION!r}, '--url', {url!r}]\n"
        "from contextledger.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "sys.stderr.write(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=True
    )
    loaded = done.stderr.split()
    return sorted({h for h in HEAVY for m in loaded if m == h or m.startswith(h + ".")})


def profile(url: str) -> None:
    """cProfile of one in-process piped ``history`` run (imports included), by cumulative time."""
    code = (
        "import cProfile, pstats, io, sys, contextlib\n"
        f"sys.argv = ['contextledger', 'history', {SESSION!r}, '--url', {url!r}]\n"
        "p = cProfile.Profile(); p.enable()\n"
        "from contextledger.__main__ import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n        main()\n    except SystemExit:\n        pass\n"
        "p.disable(); pstats.Stats(p).sort_stats('cumulative').print_stats(40)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=500, help="turns of the session (two messages each)")
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per case")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one run instead")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'history.db'}"
        started = time.perf_counter()
        build(url, args.turns)
        print(f"built {args.turns} turns ({2 * args.turns} messages) in {time.perf_counter() - started:.1f} s")
        if args.profile:
            profile(url)
            return
        script = _script()
        history = [script, "history", SESSION, "--url", url]
        cases: dict[str, Callable[[], float]] = {
            "python -c pass": lambda: piped([sys.executable, "-c", "pass"]),
            "contextledger --version": lambda: piped([script, "--version"]),
            "history, piped": lambda: piped(history),
            "history, 80-column terminal": lambda: on_terminal(history, 80),
            "history, 200-column terminal": lambda: on_terminal(history, 200),
        }
        names = list(cases)
        samples: dict[str, list[float]] = {name: [] for name in names}
        for name in names:  # warm the page cache and the bytecode caches, untimed
            cases[name]()
        for r in range(args.runs):
            for name in names[r % len(names) :] + names[: r % len(names)]:
                samples[name].append(cases[name]())
        base = statistics.median(samples[names[0]])
        print(f"{args.runs} fresh processes per case, {os.cpu_count()} cores, Python {sys.version.split()[0]}")
        print(f"{'case':<30} {'median':>9} {'p95':>9} {'x python':>9}")
        for name in names:
            values = sorted(samples[name])
            p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
            med = statistics.median(values)
            print(f"{name:<30} {med * 1000:7.0f}ms {p95 * 1000:7.0f}ms {med / base:8.1f}x")
        heavy = imported_heavy(url)
        print("heavy modules imported by history: " + (", ".join(heavy) if heavy else "none"))


if __name__ == "__main__":
    main()
