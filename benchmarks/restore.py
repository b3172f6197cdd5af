"""Restore cost: a conversation of 100,000 entries with 40 active vs one of 40 entries in all.

Both conversations live in the same database and are restored (``store.load``)
alternately in one process, so the only difference is the evicted history. The
ratio of the medians is the figure that matters: 1.0 means restore is O(window).

    python benchmarks/restore.py                      # SQLite, and PostgreSQL when available
    python benchmarks/restore.py --entries 20000      # a quicker run
    python benchmarks/restore.py --write-results      # also rewrite benchmarks/RESULTS.md

PostgreSQL runs on ``CONTEXTLEDGER_TEST_POSTGRES_URL`` when set (a scratch database is
created and dropped there; the user needs CREATEDB), else on a throwaway server started
from the local binaries, else it is skipped.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from contextledger import Changeset, Message, ViewEntry
from contextledger.records import Reduction
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.engine import parse_url

BATCH = 10_000
RESULTS = Path(__file__).with_name("RESULTS.md")


@dataclass
class Result:
    engine: str
    entries: int
    active: int
    load_seconds: float
    big: list[float]
    small: list[float]
    history: list[float]

    @property
    def ratio(self) -> float:
        return statistics.median(self.big) / statistics.median(self.small)


def bulk_load(store: SQLStore, session_id: str, *, total: int, active: int) -> None:
    """Append ``total`` entries in executemany batches, then evict all but the last ``active``."""
    version = 0
    for start in range(0, total, BATCH):
        count = min(BATCH, total - start)
        entries = tuple(
            ViewEntry(
                entry_id=f"{session_id}-{n}",
                seq=n,
                message=Message.user(
                    f"turn {n}: " + "some words of a conversation " * 6, message_id=f"{session_id}-{n}"
                ),
                tokens=45,
            )
            for n in range(start, start + count)
        )
        changeset = Changeset(
            session_id=session_id, agent_id="agent", expected_version=version, appends=entries, next_seq=start + count
        )
        version = store.commit(changeset)
    # What autovacuum does after a bulk insert, before the planner picks the index for
    # the eviction's id lists (a fresh table without statistics looks tiny to it).
    maintain(store, "ANALYZE cl_entries")
    evicted = tuple(f"{session_id}-{n}" for n in range(total - active))
    if evicted:
        reduction = Reduction(
            session_id=session_id,
            agent_id="agent",
            trigger="per_turn",
            strategy="sliding_window",
            messages_before=total,
            messages_after=active,
            tokens_before=45 * total,
            tokens_after=45 * active,
            evicted=evicted,
        )
        changeset = Changeset(
            session_id=session_id, agent_id="agent", expected_version=version, evict=evicted, reduction=reduction
        )
        store.commit(changeset)


def maintain(store: SQLStore, statement: str) -> None:
    """Run a PostgreSQL maintenance statement (outside a transaction); nothing on SQLite."""
    if store.engine.dialect.name != "postgresql":
        return
    with store.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text(statement))


def measure(store: SQLStore, engine: str, *, entries: int, active: int, repeats: int) -> Result:
    started = time.perf_counter()
    bulk_load(store, "big", total=entries, active=active)
    load_seconds = time.perf_counter() - started
    bulk_load(store, "small", total=active, active=active)
    # Autovacuum's job after a bulk eviction: drop the dead index entries it left.
    maintain(store, "VACUUM ANALYZE")
    for session in ("big", "small"):  # warm caches and the pool
        snapshot = store.load(session, "agent")
        assert snapshot is not None
        assert len(snapshot.entries) == active
    big: list[float] = []
    small: list[float] = []
    for _ in range(repeats):  # alternate so drift affects both alike
        for session, samples in (("big", big), ("small", small)):
            t0 = time.perf_counter()
            store.load(session, "agent")
            samples.append(time.perf_counter() - t0)
    history: list[float] = []
    for _ in range(3):  # for contrast: what reading the whole ledger costs
        t0 = time.perf_counter()
        store.history("big", "agent")
        history.append(time.perf_counter() - t0)
    return Result(engine, entries, active, load_seconds, big, small, history)


@contextmanager
def postgres_database() -> Iterator[str | None]:
    """A scratch database URL, or ``None`` when no PostgreSQL is available."""
    env = os.environ.get("CONTEXTLEDGER_TEST_POSTGRES_URL")
    server = None
    if env:
        base = parse_url(env).render_as_string(hide_password=False)
    else:
        from contextledger.errors import StoreUnavailable
        from contextledger.testing.postgres import find_binaries, start_postgres

        if find_binaries() is None:
            yield None
            return
        try:
            server = start_postgres()
        except StoreUnavailable as exc:
            print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
            yield None
            return
        base = server.url
    name = f"cl_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()
        if server is not None:
            server.stop()


def postgres_version(url: str) -> str:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SHOW server_version")).scalar()).split()[0]
    finally:
        engine.dispose()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def table(results: list[Result]) -> str:
    lines = [
        "| engine | entries (active) | restore median ms | p95 ms | 40 entries in all: median ms | p95 ms | ratio "
        "| full history read ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.engine} | {r.entries:,} ({r.active}) | {ms(statistics.median(r.big))} | "
            f"{ms(statistics.quantiles(r.big, n=20)[-1])} | {ms(statistics.median(r.small))} | "
            f"{ms(statistics.quantiles(r.small, n=20)[-1])} | {r.ratio:.2f} | {ms(statistics.median(r.history))} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--active", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--write-results", action="store_true", help=f"rewrite {RESULTS.name}")
    args = parser.parse_args()

    results: list[Result] = []
    versions = [f"Python {platform.python_version()}", f"SQLite {sqlite3.sqlite_version}"]
    with tempfile.TemporaryDirectory(prefix="contextledger-bench-") as directory:
        store = SQLStore.from_url(f"sqlite:///{Path(directory) / 'bench.db'}")
        try:
            results.append(
                measure(store, "SQLite (file, WAL)", entries=args.entries, active=args.active, repeats=args.repeats)
            )
        finally:
            store.close()
    if not args.no_postgres:
        with postgres_database() as url:
            if url is None:
                print("PostgreSQL skipped: no CONTEXTLEDGER_TEST_POSTGRES_URL and no local binaries", file=sys.stderr)
            else:
                versions.append(f"PostgreSQL {postgres_version(url)}")
                store = SQLStore.from_url(url, auto_upgrade=True)
                try:
                    results.append(
                        measure(store, "PostgreSQL", entries=args.entries, active=args.active, repeats=args.repeats)
                    )
                finally:
                    store.close()

    report = table(results)
    print(report)
    for r in results:
        print(f"{r.engine}: bulk-loaded {r.entries:,} entries in {r.load_seconds:.1f}s; restore ratio {r.ratio:.2f}")
    if args.write_results:
        write_results(results, versions, args)


SECTION = "## Restore cost (`benchmarks/restore.py`)"


def write_results(results: list[Result], versions: list[str], args: argparse.Namespace) -> None:
    """Replace this benchmark's section of RESULTS.md, keeping any other section."""
    section = [
        SECTION,
        "",
        f"`store.load()` of a conversation with {args.entries:,} entries of which {args.active} are active, "
        f"against a conversation of {args.active} entries in all, in the same database and process, "
        f"alternating, {args.repeats} restores each. Ratio = median(big) / median(small); "
        "1.00 means the restore cost does not depend on evicted history. For contrast, the last column is "
        "`store.history()` of the large conversation: what a restore that read the whole ledger would pay.",
        "",
        table(results),
        "",
        "Bulk load of the large conversation (executemany batches of "
        f"{BATCH:,}, then one eviction of {args.entries - args.active:,} entries): "
        + "; ".join(f"{r.engine} {r.load_seconds:.1f}s" for r in results)
        + ".",
        "",
        f"Measured with {', '.join(versions)} on {platform.system()} {platform.machine()}. "
        "The throwaway PostgreSQL server runs with fsync off; restores are reads, so that does not bear on them. "
        "On PostgreSQL the benchmark runs `ANALYZE` after the bulk insert and `VACUUM ANALYZE` after the bulk "
        "eviction, as autovacuum would between them in a live database.",
        "",
    ]
    text_ = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\n"
    if SECTION in text_:
        before, _, rest = text_.partition(SECTION)
        following = rest.find("\n## ")
        after = rest[following + 1 :] if following >= 0 else ""
    else:
        before, after = text_.rstrip("\n") + "\n\n", ""
    RESULTS.write_text(before + "\n".join(section) + ("\n" + after if after else ""))
    print(f"wrote {RESULTS.name}")


if __name__ == "__main__":
    main()
