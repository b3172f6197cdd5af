"""Stream a long history page by page: ``Ledger.iter_history`` against sqlite3 + ``json.loads`` of the same rows.

    python benchmarks/history_stream.py                 # 50,000 entries, 3 rounds
    python benchmarks/history_stream.py --million       # 1,000,000 entries
    python benchmarks/history_stream.py --entries 200000 --rounds 5 --page-size 2000

Builds one SQLite conversation of ``--entries`` messages (appended in batches of 2,000,
a tenth of them evicted), then, in the same process and alternating each round:

- ``ledger``: ``sum(1 for _ in ledger.iter_history(...))`` -- every entry as a
  ``HistoryEntry`` (a frozen ``Message`` each, checked as the ledger wrote it), keyset pages of ``--page-size``;
- ``raw``: the baseline -- the standard library's ``sqlite3`` reading the same columns
  of the same rows in seq order with ``fetchmany(--page-size)``, ``json.loads`` of each
  row's content and metadata, nothing else (no records, no validation).

Reports wall and CPU time per run (medians) and the peak of memory allocated while
streaming (``tracemalloc``, measured in a separate run of each, since tracing slows
every allocation), with the ledger's ratio to the baseline. Rows read are counted and
must agree. With ``--whole`` it also times ``ledger.history()`` of the whole
conversation (every entry held in one list) for the memory contrast.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from contextledger import Changeset, Ledger, Message, ViewEntry
from contextledger.model.records import Reduction

BATCH = 2_000


def build(url: str, entries: int) -> None:
    """One conversation of ``entries`` messages, the first tenth evicted by one reduction."""
    with Ledger.connect(url) as ledger:
        store = ledger.store
        version = 0
        for start in range(0, entries, BATCH):
            count = min(BATCH, entries - start)
            appends = tuple(
                ViewEntry(
                    entry_id=f"m{start + i}",
                    seq=start + i,
                    message=Message.user(f"message {start + i} " + "lorem ipsum " * 8, message_id=f"m{start + i}"),
                    tokens=30,
                )
                for i in range(count)
            )
            version = store.commit(
                Changeset(
                    session_id="s",
                    agent_id="a",
                    expected_version=version,
                    appends=appends,
                    next_seq=start + count,
                )
            )
        evicted = tuple(f"m{i}" for i in range(entries // 10))
        reduction = Reduction(
            session_id="s",
            agent_id="a",
            trigger="manual",
            strategy="bench",
            messages_before=entries,
            messages_after=entries - len(evicted),
            tokens_before=30 * entries,
            tokens_after=30 * (entries - len(evicted)),
            evicted=evicted,
        )
        store.commit(
            Changeset(session_id="s", agent_id="a", expected_version=version, evict=evicted, reduction=reduction)
        )


def ledger_stream(url: str, page_size: int) -> Callable[[], int]:
    def run() -> int:
        with Ledger.connect(url) as ledger:
            return sum(1 for _ in ledger.iter_history("s", "a", page_size=page_size))

    return run


def ledger_whole(url: str) -> Callable[[], int]:
    def run() -> int:
        with Ledger.connect(url) as ledger:
            return len(ledger.history("s", "a"))

    return run


RAW_SQL = (
    "SELECT e.message_id, e.seq, e.role, e.content, e.metadata, e.status, e.pinned, e.tokens, e.created_at, "
    "e.evicted_by, e.revision_count, e.from_call, e.version FROM cl_entries AS e JOIN cl_conversations AS c "
    "ON c.id = e.conversation_id WHERE c.session_id = ? AND c.agent_id = ? ORDER BY e.seq"
)


def raw_stream(path: str, page_size: int) -> Callable[[], int]:
    def run() -> int:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            cursor = conn.execute(RAW_SQL, ("s", "a"))
            count = 0
            loads = json.loads
            while rows := cursor.fetchmany(page_size):
                for row in rows:
                    loads(row[3])
                    if row[4] is not None:
                        loads(row[4])
                    count += 1
            return count
        finally:
            conn.close()

    return run


def timed(fn: Callable[[], int]) -> tuple[float, float, int]:
    wall, cpu = time.perf_counter(), time.process_time()
    count = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, count


def peak(fn: Callable[[], int]) -> float:
    """MiB allocated at the peak of one run (tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--million", action="store_true", help="1,000,000 entries")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--page-size", type=int, default=1_000)
    parser.add_argument("--whole", action="store_true", help="also ledger.history() whole")
    parser.add_argument("--db", help="keep the built ledger in this file and reuse it when it exists")
    args = parser.parse_args(argv)
    entries = 1_000_000 if args.million else args.entries
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or str(Path(tmp) / "history.db")
        url = f"sqlite:///{path}"
        if not Path(path).exists():
            started = time.perf_counter()
            build(url, entries)
            print(f"built {entries:,} entries in {time.perf_counter() - started:.1f} s")
        cases: dict[str, Callable[[], int]] = {
            "ledger": ledger_stream(url, args.page_size),
            "raw": raw_stream(path, args.page_size),
        }
        if args.whole:
            cases["ledger whole"] = ledger_whole(url)
        walls: dict[str, list[float]] = {name: [] for name in cases}
        cpus: dict[str, list[float]] = {name: [] for name in cases}
        for round_ in range(args.rounds):
            names = list(cases)
            names = names[round_ % len(names) :] + names[: round_ % len(names)]  # rotate: drift hits all alike
            for name in names:
                wall, cpu, count = timed(cases[name])
                assert count == entries, (name, count)
                walls[name].append(wall)
                cpus[name].append(cpu)
        peaks = {name: peak(fn) for name, fn in cases.items()}
    base_wall, base_cpu = statistics.median(walls["raw"]), statistics.median(cpus["raw"])
    print(f"{entries:,} entries, pages of {args.page_size:,}, {args.rounds} rounds (medians)")
    print(f"{'case':14} {'wall s':>9} {'cpu s':>9} {'peak MiB':>9} {'wall x':>7} {'cpu x':>7} {'mem x':>7}")
    for name in cases:
        wall, cpu = statistics.median(walls[name]), statistics.median(cpus[name])
        print(
            f"{name:14} {wall:9.2f} {cpu:9.2f} {peaks[name]:9.1f} {wall / base_wall:7.2f} {cpu / base_cpu:7.2f} "
            f"{peaks[name] / peaks['raw']:7.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
