"""Restore cost: a conversation of 100,000 entries with 40 active vs one of 40 entries in all.

Both conversations live in the same database and are restored (``store.load``)
alternately in one process, so the only difference is the evicted history. The
ratio of the medians is the figure that matters: 1.0 means restore is O(window).
Engines: SQLite, PostgreSQL, Redis and Redis Cluster.

    python benchmarks/restore.py                      # every engine that is available
    python benchmarks/restore.py --entries 20000      # a quicker run
    python benchmarks/restore.py --no-postgres --no-redis --no-cluster   # SQLite only
    python benchmarks/restore.py --write-results      # also rewrite benchmarks/DETAILS.md

PostgreSQL runs on ``CONTEXTLEDGER_TEST_POSTGRES_URL`` when set (a scratch database is
created and dropped there; the user needs CREATEDB), else on a throwaway server started
from the local binaries, else it is skipped. Redis and Redis Cluster run on
``CONTEXTLEDGER_TEST_REDIS_URL`` / ``CONTEXTLEDGER_TEST_REDIS_CLUSTER_URL`` when set,
else on throwaway ``redis-server`` processes (a container when a Docker engine answers).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _details import replace_section, versions
from _servers import BATCH, Backend, bulk_load, colocated, maintain, open_backend
from contextledger.stores.capabilities import CompleteStore


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


def measure(
    store: CompleteStore,
    engine: str,
    *,
    entries: int,
    active: int,
    repeats: int,
    sessions: tuple[str, str] = ("big", "small"),
) -> Result:
    big_id, small_id = sessions
    started = time.perf_counter()
    bulk_load(store, big_id, total=entries, active=active)
    load_seconds = time.perf_counter() - started
    bulk_load(store, small_id, total=active, active=active)
    # Autovacuum's job after a bulk eviction: drop the dead index entries it left.
    maintain(store, "VACUUM ANALYZE")
    for session in sessions:  # warm caches and the pool
        snapshot = store.load(session, "agent")
        assert snapshot is not None
        assert len(snapshot.entries) == active
    big: list[float] = []
    small: list[float] = []
    for _ in range(repeats):  # alternate so drift affects both alike
        for session, samples in ((big_id, big), (small_id, small)):
            t0 = time.perf_counter()
            store.load(session, "agent")
            samples.append(time.perf_counter() - t0)
    history: list[float] = []
    for _ in range(3):  # for contrast: what reading the whole ledger costs
        t0 = time.perf_counter()
        store.history(big_id, "agent")
        history.append(time.perf_counter() - t0)
    return Result(engine, entries, active, load_seconds, big, small, history)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


def table(results: list[Result]) -> str:
    active = results[0].active if results else 40
    lines = [
        f"| engine | entries (active) | restore median ms | p95 ms | {active} entries in all: median ms | p95 ms "
        "| ratio | full history read ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.engine} | {r.entries:,} ({r.active}) | {ms(statistics.median(r.big))} | "
            f"{ms(statistics.quantiles(r.big, n=20)[-1])} | {ms(statistics.median(r.small))} | "
            f"{ms(statistics.quantiles(r.small, n=20)[-1])} | {r.ratio:.2f} | {ms(statistics.median(r.history))} |"
        )
    return "\n".join(lines)


ENGINES = ("sqlite", "postgres", "redis", "redis_cluster")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--active", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--no-redis", action="store_true", help="skip standalone Redis")
    parser.add_argument("--no-cluster", action="store_true", help="skip Redis Cluster")
    parser.add_argument("--write-results", action="store_true", help="rewrite DETAILS.md")
    args = parser.parse_args()
    skipped = {"postgres": args.no_postgres, "redis": args.no_redis, "redis_cluster": args.no_cluster}

    results: list[Result] = []
    servers: list[str] = []
    with tempfile.TemporaryDirectory(prefix="contextledger-bench-") as directory:
        for name in ENGINES:
            if skipped.get(name):
                continue
            with open_backend(name, Path(directory)) as backend:
                if backend is None:
                    continue
                results.append(run(backend, args))
                if backend.version and backend.version not in servers:
                    servers.append(backend.version)

    report = table(results)
    print(report)
    for r in results:
        print(f"{r.engine}: bulk-loaded {r.entries:,} entries in {r.load_seconds:.1f}s; restore ratio {r.ratio:.2f}")
    if args.write_results:
        write_results(results, servers, args)


def run(backend: Backend, args: argparse.Namespace) -> Result:
    print(f"{backend.label}: loading {args.entries:,} entries ...", flush=True)
    big, small = colocated(backend, ["big", "small"])
    return measure(
        backend.store,
        backend.label,
        entries=args.entries,
        active=args.active,
        repeats=args.repeats,
        sessions=(big, small),
    )


SECTION = "## Restore cost (`benchmarks/restore.py`)"


def write_results(results: list[Result], servers: list[str], args: argparse.Namespace) -> None:
    """Replace this benchmark's section of DETAILS.md, keeping any other section."""
    replace_section(
        SECTION,
        [
            f"`store.load()` of a conversation with {args.entries:,} entries of which {args.active} are active, "
            f"against a conversation of {args.active} entries in all, in the same database and process, "
            f"alternating, {args.repeats} restores each. Ratio = median(big) / median(small); "
            "1.00 means the restore cost does not depend on evicted history. For contrast, the last column is "
            "`store.history()` of the large conversation: what a restore that read the whole ledger would pay.",
            "",
            table(results),
            "",
            f"Bulk load of the large conversation (commits of {BATCH:,} appends each -- one executemany on SQL, "
            f"one script call on Redis -- then one eviction of {args.entries - args.active:,} entries): "
            + "; ".join(f"{r.engine} {r.load_seconds:.1f}s" for r in results)
            + ".",
            "",
            versions(servers) + " "
            "The throwaway PostgreSQL server runs with fsync off and the throwaway Redis servers without "
            "persistence; restores are reads, so that does not bear on them. "
            "On PostgreSQL the benchmark runs `ANALYZE` after the bulk insert and `VACUUM ANALYZE` after the bulk "
            "eviction, as autovacuum would between them in a live database. On Redis Cluster a conversation "
            "lives on the node that owns its hash slot; both conversations are placed on the same node (the small "
            "one's session id is chosen for its slot), because nodes differ: the node that ran the bulk-load "
            "scripts answers every later script call some 5-10% slower until its Lua VM is reset (`SCRIPT FLUSH`), "
            "whatever conversation is read.",
        ],
    )


if __name__ == "__main__":
    main()
