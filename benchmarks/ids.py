"""What a message id's shape costs an append: random ids against the library's time-ordered ones.

Every store keeps a unique index on a conversation's message ids (a retried append is
found by them, and so is an entry the CLI or the web view is asked for). A random id
(``uuid4``) lands anywhere in that index, so the four messages of a turn touch up to
four of its pages; an id the library makes (:func:`contextledger.model.ids.time_ordered_uuid`,
a UUID version 7) starts with the time, so a turn's ids land on the index's last page.

Two conversations on one engine, stepped alternately in one process (the order swapped
each turn): ``random`` appends turns whose messages carry ``uuid4`` ids given by the
caller, ``time-ordered`` the same turns with the ids the library makes. Each first gets
``--before`` turns of history the same way (not timed). Printed per lane: the median client
CPU and wall time of an append, and what it cost the engine, summed over the timed turns:

* SQLite: bytes written and read syscalls of this process (``/proc/self/io``), i.e. WAL
  frames and pages read back once the index outgrows SQLite's page cache;
* PostgreSQL: WAL bytes the server wrote (``pg_current_wal_lsn``), each lane in a database
  of its own on one server.

    python benchmarks/ids.py --before 2000 --turns 300
    python benchmarks/ids.py --engines sqlite,postgres --before 20000
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _protocol import turn
from _servers import postgres_database
from contextledger import Ledger, Message
from contextledger.conversation.conversation import Conversation

SESSION = "ids"
LANES = ("random", "time-ordered")
LOAD_BATCH = 2_000  # messages a commit while loading the history


def messages(lane: str, n: int) -> list[Message]:
    """Turn ``n``: the library's ids, or ``uuid4`` ids given by the caller."""
    made = [Message.from_strands(m) for m in turn(SESSION, n)]
    if lane == "time-ordered":
        return made
    return [m.model_copy(update={"message_id": str(uuid.uuid4())}) for m in made]


def _io() -> dict[str, int]:
    """This process's I/O counters (Linux), or an empty dict."""
    try:
        text = Path("/proc/self/io").read_text()
    except OSError:
        return {}
    return {k: int(v) for k, v in (line.split(": ") for line in text.splitlines())}


class Lane:
    """One conversation and what its engine is asked to count."""

    def __init__(self, name: str, ledger: Ledger, cost: Callable[[], dict[str, int]]) -> None:
        self.name = name
        self.ledger = ledger
        self.conversation: Conversation = ledger.conversation(SESSION, "agent")
        self.cost = cost
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.spent: dict[str, int] = {}
        # What reading the counters itself counts (the read of /proc/self/io is a read syscall).
        first = cost()
        self.overhead = {k: v - first.get(k, 0) for k, v in cost().items()}

    def load(self, turns: int) -> None:
        pending: list[Message] = []
        for n in range(turns):
            pending.extend(messages(self.name, n))
            if len(pending) >= LOAD_BATCH:
                self.conversation.append(*pending)
                pending = []
        if pending:
            self.conversation.append(*pending)

    def step(self, n: int) -> None:
        batch = messages(self.name, n)
        before = self.cost()
        c0, w0 = time.thread_time(), time.perf_counter()
        self.conversation.append(*batch)
        w1, c1 = time.perf_counter(), time.thread_time()
        after = self.cost()
        self.cpu.append(c1 - c0)
        self.wall.append(w1 - w0)
        for key, value in after.items():
            self.spent[key] = self.spent.get(key, 0) + value - before.get(key, 0) - self.overhead.get(key, 0)


@contextmanager
def sqlite_lanes(directory: Path) -> Iterator[list[Lane]]:
    def cost() -> dict[str, int]:
        io = _io()
        return {"written KB": io["wchar"] // 1024, "read syscalls": io["syscr"]} if io else {}

    ledgers = [Ledger.connect(f"sqlite:///{directory / name}.db") for name in LANES]
    try:
        yield [Lane(name, ledger, cost) for name, ledger in zip(LANES, ledgers, strict=True)]
    finally:
        for ledger in ledgers:
            ledger.close()


@contextmanager
def postgres_lanes() -> Iterator[list[Lane] | None]:
    with ExitStack() as stack:
        first = stack.enter_context(postgres_database())
        if first is None:
            yield None
            return
        import psycopg

        base = first.replace("postgresql+psycopg://", "postgresql://")
        admin = stack.enter_context(psycopg.connect(base, autocommit=True))
        urls = []
        for name in LANES:
            database = f"ids_{name.replace('-', '_')}_{os.getpid()}"
            admin.execute(f'DROP DATABASE IF EXISTS "{database}"')
            admin.execute(f'CREATE DATABASE "{database}"')
            stack.callback(admin.execute, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            urls.append(first.rsplit("/", 1)[0] + "/" + database)

        def cost() -> dict[str, int]:
            (lsn,) = admin.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()  # type: ignore[misc]
            return {"server WAL KB": int(lsn) // 1024}

        ledgers = [Ledger.connect(url, auto_upgrade=True) for url in urls]
        try:
            yield [Lane(name, ledger, cost) for name, ledger in zip(LANES, ledgers, strict=True)]
        finally:
            for ledger in ledgers:
                ledger.close()


def measure(lanes: list[Lane], before: int, turns: int) -> None:
    for lane in lanes:
        lane.load(before)
    for n in range(before, before + turns):
        for lane in lanes if n % 2 else reversed(lanes):
            lane.step(n)


def report(engine: str, lanes: list[Lane], before: int, turns: int) -> list[str]:
    random_lane, ordered = lanes
    lines = [f"{engine}: {turns} turns appended after {before:,} turns of history"]
    keys = sorted(set(random_lane.spent) | set(ordered.spent))
    header = f"  {'lane':<14} {'CPU us':>8} {'wall us':>8}" + "".join(f" {k + ' a turn':>22}" for k in keys)
    lines.append(header)
    for lane in lanes:
        cpu = statistics.median(lane.cpu) * 1e6
        wall = statistics.median(lane.wall) * 1e6
        spent = "".join(f" {lane.spent.get(k, 0) / turns:>22.1f}" for k in keys)
        lines.append(f"  {lane.name:<14} {cpu:>8.1f} {wall:>8.1f}{spent}")
    ratios = [
        f"CPU {statistics.median(random_lane.cpu) / statistics.median(ordered.cpu):.2f}x",
        f"wall {statistics.median(random_lane.wall) / statistics.median(ordered.wall):.2f}x",
    ]
    for k in keys:
        if ordered.spent.get(k):
            ratios.append(f"{k} {random_lane.spent.get(k, 0) / ordered.spent[k]:.2f}x")
    lines.append("  random / time-ordered: " + ", ".join(ratios))
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300, help="turns timed in each lane")
    parser.add_argument("--before", type=int, default=2000, help="turns of history each lane gets first")
    parser.add_argument("--engines", default="sqlite", help="comma-separated: sqlite, postgres")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    out: list[str] = []
    for engine in args.engines.split(","):
        with tempfile.TemporaryDirectory() as directory:
            opened: Any = sqlite_lanes(Path(directory)) if engine == "sqlite" else postgres_lanes()
            with opened as lanes:
                if lanes is None:
                    out.append(f"{engine}: skipped (no server)")
                    continue
                measure(lanes, args.before, args.turns)
                out += report(engine, lanes, args.before, args.turns)
    print(f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after ({os.cpu_count()} CPUs)")
    print("\n".join(out))


if __name__ == "__main__":
    main()
