"""Where a SQLite append's time goes: the driver's own calls in the ledger's append, against the same calls replayed.

``floor.py`` compares an append with its own statements replayed on the bare driver.
This splits the ledger's lane in two: the time inside each call to sqlite3 (``BEGIN
IMMEDIATE``, the version bump, the changeset row, the entries' rows, ``COMMIT``) and the
rest, the Python around them. Four lanes, stepped alternately in one process, the
order rotated each turn:

* ``ledger`` -- ``Conversation.append`` of a prebuilt turn of four messages, its driver
  calls timed one by one, and the whole append;
* ``replayed`` -- the same calls (recorded on a twin database, as ``floor.py`` records
  them) sent again back to back on the bare driver;
* ``replayed, Python between`` -- the same again, with an append of a turn to an
  in-memory ledger before each call (the Python of an append without its driver,
  untimed): what the calls cost when other Python work runs between them, as it does
  inside the ledger's append;
* ``rows built by hand`` -- a plain Python writer of the ledger's rows, written the
  obvious way: the turn's entry rows (content and metadata as the ledger's JSON text by
  ``json``'s encoder, the default token counts, ids, order) built from the same messages
  by a few lines here, with the commit's time and a UUID for its id, then
  the recorded calls sent with those rows in the entries' statement (the other
  statements with the recorded time and id, so that each replay's database holds the
  twin's rows). What any Python writer of these rows pays, with none of the ledger's
  guarantees (the view, the exactly-once commit, the checks). Its rows are compared
  with the ledger's after every step (untimed): the lane fails if they differ.

The lanes take turns, so each step starts with the processor's caches holding another
lane's work, as an append in an agent's loop starts after the model's call: code that
ran a moment ago costs several times what it costs run back to back (the hand-built
rows of a turn about 30 us here, against 17 us in a loop of their own).

Every call is timed the same way in all four (``thread_time`` around the driver's own
method, in a cursor subclass). Printed: the median of each call, of their sum and of
each lane's whole step, in microseconds, with the load average before and after; and
the whole steps of the ledger and of the rows built by hand against the replay's.

    python benchmarks/driver_calls.py               # 600 turns
    python benchmarks/driver_calls.py --turns 200 --json
    python benchmarks/driver_calls.py --write-results   # also its section of DETAILS.md
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _details import publish
from contenders.cl import native_turn
from contextledger import Ledger, Message
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.write.apply import ENTRY_COLUMNS
from floor import AGENT, Call, RecordingSQLite, bare_sqlite, recording, replay_sqlite

LANES = ("ledger", "replayed", "replayed, Python between", "rows built by hand")
CALLS = ("BEGIN", "UPDATE cl_conversations", "INSERT INTO cl_changesets", "INSERT INTO cl_entries", "COMMIT")


def call_name(sql: str) -> str:
    """The row of the table a statement is counted in: its verb and table (``BEGIN``, ``COMMIT``: the verb)."""
    words = sql.split(None, 3)
    if words[0].upper() in ("BEGIN", "COMMIT"):
        return words[0].upper()
    if words[0].upper() == "INSERT" and len(words) > 2:
        return f"INSERT INTO {words[2]}"
    return " ".join(words[:2])


_TEXT = json.JSONEncoder(allow_nan=False).encode  # the text the ledger's SQLite rows hold for content and metadata
_LENIENT = json.JSONEncoder(default=str).encode  # what the default token counter measures a tool input by
_SHARED = 4  # values every row of the entries' statement shares, bound first (?1..?4)


def _tokens(message: Message) -> int:
    """The default counter's estimate of a one-block text, tool call or tool result (the turns' shapes)."""
    (block,) = message.content
    if "text" in block:
        chars = len(block["text"])
    elif "toolUse" in block:
        chars = len(block["toolUse"]["name"]) + len(_LENIENT(block["toolUse"]["input"]))
    else:
        (inner,) = block["toolResult"]["content"]
        chars = len(inner["text"])
    return 4 + math.ceil(chars / 4)


def hand_built_rows(messages: list[Message], first_seq: int) -> list[Any]:
    """The entry rows of ``messages`` from ``first_seq``, flattened in the entries' statement order."""
    values: list[Any] = []
    for seq, message in enumerate(messages, first_seq):
        metadata = message.metadata
        values += (
            seq,
            message.message_id,
            message.role,
            _TEXT(message.content),
            _TEXT(metadata) if metadata else "{}",
            message.pinned,
            _tokens(message),
        )
    return values


def entries_call(calls: list[Call]) -> int:
    """The index of the entries' statement in ``calls``."""
    return next(i for i, (_, sql, _) in enumerate(calls) if call_name(str(sql)) == "INSERT INTO cl_entries")


def send_hand_built(
    conn: sqlite3.Connection, calls: list[Call], index: int, messages: list[Message], built: list[Any]
) -> None:
    """Build the rows of ``messages`` by hand (kept in ``built``) and send ``calls``, call ``index`` with them."""
    kind, sql, recorded = calls[index]
    # The commit's time and id, made as a writer makes them (the recorded ones are sent: see the module docstring).
    built_stamp = (datetime.now(UTC).isoformat(" ")[:-6], uuid.uuid4().hex)
    rows = hand_built_rows(messages, recorded[_SHARED])
    built[:] = [built_stamp, *rows]
    replay_sqlite(conn, [*calls[:index], (kind, sql, (*recorded[:_SHARED], *rows)), *calls[index + 1 :]])


def check_hand_built(calls: list[Call], built: list[Any]) -> None:
    """Fail unless the rows built by hand are the ones the ledger sent (``ENTRY_COLUMNS`` values of each row)."""
    recorded, rows = calls[entries_call(calls)][2], built[1:]
    if len(rows) % len(ENTRY_COLUMNS) or list(recorded[_SHARED:]) != rows:
        raise AssertionError(f"the rows built by hand differ from the ledger's: {rows!r} != {recorded[_SHARED:]!r}")


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
    """Record the twin's turns, then step the four lanes alternately; the medians in microseconds."""
    twin = Ledger(SQLStore.from_url(f"sqlite:///{directory}/twin.db", connect_args={"factory": RecordingSQLite}))
    timed = Ledger(SQLStore.from_url(f"sqlite:///{directory}/timed.db", connect_args={"factory": TimingSQLite}))
    # Each replay lane writes its own database, made in the twin's state.
    targets = [Ledger.connect(f"sqlite:///{directory}/replay-{i}.db") for i in range(3)]
    conns = [bare_sqlite(directory / f"replay-{i}.db", TimingSQLite) for i in range(3)]
    memory = Ledger.connect("memory://")
    try:
        session = "calls"
        recorder, ledger = twin.conversation(session, AGENT), timed.conversation(session, AGENT)
        replayed = [target.conversation(session, AGENT) for target in targets]
        for conversation in (recorder, ledger, *replayed):  # turn 0 creates the conversation (another path)
            conversation.append(*native_turn(session, 0))
        recorded: list[list[Call]] = []
        sent: list[list[Message]] = []  # the twin's messages: the rows built by hand are theirs
        for n in range(1, turns + 1):
            sent.append(native_turn(session, n))
            with recording() as calls:
                recorder.append(*sent[-1])
            recorded.append(calls)
        scratch = memory.conversation("between", AGENT)
        counter = iter(range(1, 1 << 30))

        def between() -> None:
            scratch.append(*native_turn("between", next(counter)))

        per_call: dict[str, dict[str, list[float]]] = {lane: {} for lane in LANES}
        whole: dict[str, list[float]] = {lane: [] for lane in LANES}

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
            whole[lane].append(elapsed)

        built: list[Any] = []
        for n in range(1, turns + 1):
            messages, calls = native_turn(session, n), recorded[n - 1]
            steps: list[tuple[str, Callable[[], object]]] = [
                ("ledger", partial(ledger.append, *messages)),
                ("replayed", partial(replay_sqlite, conns[0], calls)),
                ("replayed, Python between", partial(replay_sqlite, conns[1], calls, between)),
                (
                    "rows built by hand",
                    partial(send_hand_built, conns[2], calls, entries_call(calls), sent[n - 1], built),
                ),
            ]
            shift = n % len(steps)
            for lane, run in steps[shift:] + steps[:shift]:
                step(lane, run)
            check_hand_built(calls, built)
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
    figures["whole"] = {lane: statistics.median(samples) * 1e6 for lane, samples in whole.items()}
    figures["ledger append"] = figures["whole"]["ledger"]
    ledger_calls = per_call["ledger"]["all driver calls"]  # per append, in the order of whole["ledger"]
    outside = [append - calls for append, calls in zip(whole["ledger"], ledger_calls, strict=True)]
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
    whole = figures["whole"]
    # The lane with Python between times that Python too: its whole step says nothing.
    steps = [f"{whole[lane]:.1f}" if lane != "replayed, Python between" else "-" for lane in LANES]
    lines.append("| the whole step | " + " | ".join(steps) + " |")
    lines.append(f"| the append outside the driver's calls | {figures['ledger outside the driver']:.1f} | | | |")
    replayed, hand = whole["replayed"], whole["rows built by hand"]
    lines += [
        "",
        f"A whole step against the calls replayed back to back ({replayed:.1f} us, the replay's own loop "
        f"and the timing of each call included, as in every lane): the ledger's append "
        f"{whole['ledger'] / replayed:.2f}x, the rows built by hand {hand / replayed:.2f}x.",
    ]
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
    title = "## An append's driver calls against the same calls replayed, SQLite (`benchmarks/driver_calls.py`)"
    publish(figures, before, os.getloadavg(), table, as_json=args.json, title=title if args.write_results else None)


if __name__ == "__main__":
    main()
