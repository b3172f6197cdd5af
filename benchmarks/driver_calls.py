"""Where a SQLite append's time goes: the driver's own calls in the ledger's append, against the same calls replayed.

``floor.py`` compares an append with its own statements replayed on the bare driver.
This splits the ledger's lane in two: the time inside each call to sqlite3 (``BEGIN
IMMEDIATE``, the version bump, the changeset row, the entries' rows, ``COMMIT``) and the
rest, the Python around them. Three lanes, stepped alternately in one process, the
order rotated each turn:

* ``ledger`` -- ``Conversation.append`` of a prebuilt turn of four messages, its driver
  calls timed one by one, and the whole append;
* ``replayed`` -- the same calls (recorded on a twin database, as ``floor.py`` records
  them) sent again back to back on the bare driver;
* ``replayed, Python between`` -- the same again, with an append of a turn to an
  in-memory ledger before each call (the Python of an append without its driver,
  untimed): what the calls cost when other Python work runs between them, as it does
  inside the ledger's append.

Every call is timed the same way in all three (``thread_time`` around the driver's own
method, in a cursor subclass). Printed: the median of each call, of their sum and of
the whole append, in microseconds, with the load average before and after.

    python benchmarks/driver_calls.py               # 600 turns
    python benchmarks/driver_calls.py --turns 200 --json
    python benchmarks/driver_calls.py --write-results   # also its section of DETAILS.md
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _servers import replace_section, versions
from contenders.cl import native_turn
from contextledger import Ledger
from contextledger.stores.sql import SQLStore
from floor import AGENT, Call, RecordingSQLite, bare_sqlite, recording, replay_sqlite

LANES = ("ledger", "replayed", "replayed, Python between")
CALLS = ("BEGIN", "UPDATE cl_conversations", "INSERT INTO cl_changesets", "INSERT INTO cl_entries", "COMMIT")


def call_name(sql: str) -> str:
    """The row of the table a statement is counted in: its verb and table (``BEGIN``, ``COMMIT``: the verb)."""
    words = sql.split(None, 3)
    if words[0].upper() in ("BEGIN", "COMMIT"):
        return words[0].upper()
    if words[0].upper() == "INSERT" and len(words) > 2:
        return f"INSERT INTO {words[2]}"
    return " ".join(words[:2])


class _Timings:
    """Where the timing driver adds each call's time (``None``: not timing)."""

    calls: dict[str, float] | None = None


def _add(name: str, seconds: float) -> None:
    calls = _Timings.calls
    if calls is not None:
        calls[name] = calls.get(name, 0.0) + seconds


class TimingCursor(sqlite3.Cursor):
    """A sqlite3 cursor whose ``execute`` adds its own time (this thread's CPU) to the current step."""

    def execute(self, sql: str, parameters: Any = (), /) -> TimingCursor:
        started = time.thread_time()
        super().execute(sql, parameters)
        _add(call_name(sql), time.thread_time() - started)
        return self


class TimingSQLite(sqlite3.Connection):
    """A sqlite3 connection whose cursors time their calls, and whose commit is timed."""

    def cursor(self, factory: Any = TimingCursor) -> Any:
        return super().cursor(factory)

    def commit(self) -> None:
        started = time.thread_time()
        super().commit()
        _add("COMMIT", time.thread_time() - started)


def measure(directory: Path, turns: int) -> dict[str, Any]:
    """Record the twin's turns, then step the three lanes alternately; the medians in microseconds."""
    twin = Ledger(SQLStore.from_url(f"sqlite:///{directory}/twin.db", connect_args={"factory": RecordingSQLite}))
    timed = Ledger(SQLStore.from_url(f"sqlite:///{directory}/timed.db", connect_args={"factory": TimingSQLite}))
    # Each replay lane writes its own database, made in the twin's state.
    targets = [Ledger.connect(f"sqlite:///{directory}/replay-{i}.db") for i in range(2)]
    conns = [bare_sqlite(directory / f"replay-{i}.db", TimingSQLite) for i in range(2)]
    memory = Ledger.connect("memory://")
    try:
        session = "calls"
        recorder, ledger = twin.conversation(session, AGENT), timed.conversation(session, AGENT)
        replayed = [target.conversation(session, AGENT) for target in targets]
        for conversation in (recorder, ledger, *replayed):  # turn 0 creates the conversation (another path)
            conversation.append(*native_turn(session, 0))
        recorded: list[list[Call]] = []
        for n in range(1, turns + 1):
            with recording() as calls:
                recorder.append(*native_turn(session, n))
            recorded.append(calls)
        scratch = memory.conversation("between", AGENT)
        counter = iter(range(1, 1 << 30))

        def between() -> None:
            scratch.append(*native_turn("between", next(counter)))

        per_call: dict[str, dict[str, list[float]]] = {lane: {} for lane in LANES}
        totals: dict[str, list[float]] = {"driver": [], "append": []}

        def step(lane: str, run: Callable[[], object]) -> None:
            calls: dict[str, float] = {}
            _Timings.calls = calls
            started = time.thread_time()
            try:
                run()
            finally:
                elapsed = time.thread_time() - started
                _Timings.calls = None
            for name, seconds in calls.items():
                per_call[lane].setdefault(name, []).append(seconds)
            per_call[lane].setdefault("all driver calls", []).append(sum(calls.values()))
            if lane == "ledger":
                totals["append"].append(elapsed)
                totals["driver"].append(sum(calls.values()))

        for n in range(1, turns + 1):
            messages, calls = native_turn(session, n), recorded[n - 1]
            steps: list[tuple[str, Callable[[], object]]] = [
                ("ledger", partial(ledger.append, *messages)),
                ("replayed", partial(replay_sqlite, conns[0], calls)),
                ("replayed, Python between", partial(replay_sqlite, conns[1], calls, between)),
            ]
            shift = n % len(steps)
            for lane, run in steps[shift:] + steps[:shift]:
                step(lane, run)
        for target in targets:
            if len(target.conversation(session, AGENT).view) != len(ledger.view):
                raise AssertionError("a replay did not write what the ledger wrote")
    finally:
        for conn in conns:
            conn.close()
        for opened in (twin, timed, *targets, memory):
            opened.close()
    figures: dict[str, Any] = {"turns": turns}
    for lane, found in per_call.items():
        figures[lane] = {name: statistics.median(samples) * 1e6 for name, samples in found.items()}
    figures["ledger append"] = statistics.median(totals["append"]) * 1e6
    outside = [whole - driver for whole, driver in zip(totals["append"], totals["driver"], strict=True)]
    figures["ledger outside the driver"] = statistics.median(outside) * 1e6
    return figures


def table(figures: dict[str, Any], load: str) -> list[str]:
    """The Markdown table of :func:`measure`'s figures."""
    lines = [
        f"One append of four messages on SQLite, medians of {figures['turns']} turns per lane, stepped "
        f"alternately in one process; CPU of this thread, microseconds ({load}).",
        "",
        "| driver call | " + " | ".join(LANES) + " |",
        "|---|" + "---:|" * len(LANES),
    ]
    for name in (*CALLS, "all driver calls"):
        cells = [f"{figures[lane][name]:.1f}" if name in figures[lane] else "-" for lane in LANES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append(f"| the whole append | {figures['ledger append']:.1f} | | |")
    lines.append(f"| the append outside the driver's calls | {figures['ledger outside the driver']:.1f} | | |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON line")
    parser.add_argument("--write-results", action="store_true", help="write its section of DETAILS.md")
    args = parser.parse_args()
    if args.turns < 1:
        parser.error(f"--turns must be at least 1, got {args.turns}")
    before = os.getloadavg()
    with tempfile.TemporaryDirectory() as directory:
        figures = measure(Path(directory), args.turns)
    after = os.getloadavg()
    if args.json:
        print(json.dumps({**figures, "load_before": before[0], "load_after": after[0]}))
        return
    load = f"load average {before[0]:.2f} before, {after[0]:.2f} after (1 min), {os.cpu_count()} CPUs"
    lines = table(figures, load)
    print("\n".join(lines))
    if args.write_results:
        title = "## An append's driver calls against the same calls replayed, SQLite (`benchmarks/driver_calls.py`)"
        replace_section(title, [*lines, "", versions()])


if __name__ == "__main__":
    main()
