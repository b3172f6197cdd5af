"""The async API against the sync one: append and restore medians, side by side, on every backend.

Per backend (memory, SQLite, PostgreSQL, Redis, Redis Cluster) one process opens the
same database twice -- ``Ledger.connect(url)`` (sync drivers) and
``AsyncLedger.connect(url)`` (aiosqlite, psycopg async, redis.asyncio) -- and alternates
the two APIs call by call, so both see the same machine load:

* ``append``: one message appended to a conversation of each API (one commit);
* ``restore``: a conversation of ``--window`` active messages opened again (one read of
  the active view), written once by each API beforehand.

The async calls run one at a time on an event loop (``await``), so the ratio is the
price of the greenlet hop and the async driver per call, not a concurrency gain. The
script prints the medians and their ratios (async / sync).

    python benchmarks/aio.py                               # every backend that is available
    python benchmarks/aio.py --backends memory,sqlite      # no servers
    python benchmarks/aio.py --appends 400 --restores 100 --window 200
    python benchmarks/aio.py --write-results               # also rewrite its section of DETAILS.md

Servers come from the same places as for the other benchmarks (environment URLs, else
throwaway local servers that are stopped at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _servers import BACKENDS, LABELS, backend_list, median, ms, postgres_database, redis_url, replace_section, versions
from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.stores.memory import MemoryStore

SECTION = "## Async API vs sync API (`benchmarks/aio.py`)"


@dataclass
class Figures:
    backend: str
    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, seconds: float) -> None:
        self.samples.setdefault(name, []).append(seconds)

    def median(self, name: str) -> float:
        return median(self.samples[name])


@contextmanager
def ledger_url(name: str, directory: Path) -> Iterator[tuple[str, dict[str, Any]] | None]:
    """``(url, options)`` of a fresh ledger on ``name`` that both APIs open, or ``None``."""
    if name == "memory":
        yield "memory://", {}
    elif name == "sqlite":
        yield f"sqlite:///{directory / f'aio-{uuid.uuid4().hex[:8]}.db'}", {}
    elif name == "postgres":
        with postgres_database() as url:
            yield (url, {"auto_upgrade": True}) if url is not None else None
    else:
        with redis_url(cluster=name == "redis_cluster") as found:
            yield (found[0], {"key_prefix": f"clbench-aio-{uuid.uuid4().hex[:8]}"}) if found is not None else None


async def measure(name: str, url: str, options: dict[str, Any], appends: int, restores: int, window: int) -> Figures:
    figures = Figures(name)
    if name == "memory":  # one store, both APIs (a memory URL opens a new, empty one)
        shared = MemoryStore()
        sync_ledger, async_ledger = Ledger(shared), AsyncLedger(shared)
    else:
        sync_ledger = Ledger.connect(url, **options)
        async_ledger = await AsyncLedger.connect(url, **options)
    try:
        sync_conv = sync_ledger.conversation("append-sync")
        async_conv = await async_ledger.conversation("append-async")
        sync_conv.append(Message.user("warm up"))
        await async_conv.append(Message.user("warm up"))
        for n in range(appends):
            start = time.perf_counter()
            sync_conv.append(Message.user(f"sync message {n}"))
            middle = time.perf_counter()
            await async_conv.append(Message.user(f"async message {n}"))
            figures.add("append sync", middle - start)
            figures.add("append async", time.perf_counter() - middle)

        turns = [Message.user(f"message {n}") if n % 2 == 0 else Message.assistant(f"reply {n}") for n in range(window)]
        sync_ledger.conversation("restore-sync").append(*turns)
        await (await async_ledger.conversation("restore-async")).append(*turns)
        for _ in range(restores):
            start = time.perf_counter()
            restored = sync_ledger.conversation("restore-sync")
            middle = time.perf_counter()
            arestored = await async_ledger.conversation("restore-async")
            figures.add("restore sync", middle - start)
            figures.add("restore async", time.perf_counter() - middle)
            assert len(restored.view) == len(arestored.view) == window
    finally:
        sync_ledger.close()
        await async_ledger.close()
    return figures


def table(rows: list[Figures], window: int) -> list[str]:
    lines = [
        f"| backend | append sync | append async | ratio | restore {window} sync | restore {window} async | ratio |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for f in rows:
        cells = [LABELS[f.backend]]
        for op in ("append", "restore"):
            sync, aio = f.median(f"{op} sync"), f.median(f"{op} async")
            cells += [ms(sync), ms(aio), f"{aio / sync:.2f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", type=backend_list, default=list(BACKENDS))
    parser.add_argument("--appends", type=int, default=200, help="appends per API and backend")
    parser.add_argument("--restores", type=int, default=50, help="restores per API and backend")
    parser.add_argument("--window", type=int, default=100, help="active messages of the restored conversation")
    parser.add_argument("--write-results", action="store_true", help="rewrite this section of DETAILS.md")
    args = parser.parse_args()

    rows: list[Figures] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.backends:
            with ledger_url(name, Path(tmp)) as found:
                if found is None:
                    continue
                url, options = found
                rows.append(asyncio.run(measure(name, url, options, args.appends, args.restores, args.window)))
                print(f"{LABELS[name]}: done", flush=True)
    lines = [
        f"Medians of {args.appends} appends (one message, one commit) and {args.restores} restores of a"
        f" {args.window}-message view per API, the two APIs alternating call by call; ratio = async / sync.",
        "",
        *table(rows, args.window),
        "",
        versions(),
    ]
    print("\n".join(lines))
    if args.write_results:
        replace_section(SECTION, lines)


if __name__ == "__main__":
    main()
