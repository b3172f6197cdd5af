"""The scaling curve: appends/s for K = 1, 2, 4, 8, 16 processes, and the escaped-conflict rate.

    scripts/bench --curve                      # PostgreSQL, the 3-primary Redis Cluster, and 3+3 replicated
    python benchmarks/curve.py --engines postgres --processes 1,2,4 --seconds 3
    python benchmarks/curve.py --conflicts-only --engines postgres,redis_cluster

For each engine and K, K worker processes (forked, started together at a barrier) append
one-message turns for ``--seconds`` through ``Ledger.connect`` -- on *many* conversations
(each process its own ten) and on *one* conversation shared by all. Reported: appends/s
(acknowledged appends over the wall time of the window), the workers' CPU seconds and
the server processes' CPU seconds in the window (from ``/proc``, the server's whole process
tree), the CPU milliseconds one append costs (both together), the
load average before and after, and on *one* the rate of ``ConcurrencyConflict`` escaping
the Conversation's retries (escapes / attempts).

The conflict run (``--conflicts-only``, also part of the full run): 8 processes x
``--conflict-appends`` appends to one conversation, as ``tests/reliability/test_concurrency.py``
does, repeated ``--conflict-trials`` times per engine; run it once with each tree's
``src`` first on ``PYTHONPATH`` to compare two retry policies in one sitting.

Servers are throwaway local ones (stopped by pid at the end), with the durability stated
in the output: PostgreSQL ``fsync=on``, ``synchronous_commit=off`` (as ``scripts/bench``);
Redis Cluster without persistence (3 primaries; ``durability="primary"``), and the 3+3
cluster with ``durability="replicated"`` (each commit waits for a replica).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from contextledger import Ledger, Message  # noqa: E402
from contextledger.core.retry import BACKOFF_CAP, MAX_RETRIES  # noqa: E402
from contextledger.errors import ConcurrencyConflict, DuplicateEntry  # noqa: E402

ENGINES = ("postgres", "redis_cluster", "redis_replicated")
POSTGRES_SETTINGS = {"fsync": "on", "synchronous_commit": "off", "full_page_writes": "on"}
DURABILITY = {
    "postgres": "fsync=on, synchronous_commit=off, full_page_writes=on (a crash of the server loses nothing; "
    "a power loss may take the last ~0.6 s of commits)",
    "redis_cluster": "3 primaries, no replicas, no persistence, durability='primary'",
    "redis_replicated": "3 primaries + 3 replicas, no persistence, durability='replicated' (WAIT 1 replica)",
}
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Engine:
    """One engine under test: a URL, the options of ``Ledger.connect``, the server pids."""

    name: str
    url: str
    options: dict[str, Any]
    pids: tuple[int, ...]


@contextmanager
def engine(name: str) -> Iterator[Engine]:
    """Start the engine's throwaway server(s); stop them by pid afterwards."""
    if name == "postgres":
        from tests.plugins.postgres_server import start_postgres

        from contextledger.stores.sql import upgrade

        server = start_postgres(settings=POSTGRES_SETTINGS)
        try:
            upgrade(server.url)
            yield Engine(name, server.url, {}, (server.process.pid,))
        finally:
            server.stop()
    elif name == "redis_cluster":
        from tests.plugins.redis_server import start_local_cluster

        cluster = start_local_cluster(3)
        try:
            yield Engine(name, cluster.url, {}, cluster.pids)
        finally:
            cluster.stop()
    elif name == "redis_replicated":
        from tests.plugins.redis_replicas import start_replicated_cluster

        replicated = start_replicated_cluster()
        try:
            pids = tuple(p.popen.pid for p in replicated.processes.values())
            yield Engine(name, replicated.url, {"durability": "replicated"}, pids)
        finally:
            replicated.stop()
    else:
        raise SystemExit(f"unknown engine {name!r}; known: {', '.join(ENGINES)}")


def _tree_cpu(roots: tuple[int, ...]) -> float:
    """CPU seconds (user + system) of ``roots`` and every descendant alive now, from ``/proc``."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw.rsplit(")", 1)[1].split()
        # utime + stime, and the reaped children's (a backend that exited with its connection)
        stats[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / _TICKS)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0.0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in stats:
            continue
        seen.add(pid)
        total += stats[pid][1]
        todo += children.get(pid, [])
    return total


def _appender(url: str, options: dict[str, Any], sessions: list[str], seconds: float, barrier: Any, out: Any) -> None:
    """Append one-message turns round-robin over ``sessions`` for ``seconds``; report counts and CPU."""
    acked = escaped = attempts = 0
    with Ledger.connect(url, **options) as ledger:
        conversations = [ledger.conversation(s) for s in sessions]
        tag = uuid.uuid4().hex[:8]
        # warm up before the window: the first commit of a process builds encoders and
        # validators and imports lazily (about 0.1 s of CPU), which 16 processes starting
        # together on 2 cores would otherwise spend inside it
        ledger.conversation(f"warm-{tag}").append(Message.user("warm up", message_id=f"{tag}-warm"))
        barrier.wait()
        started = os.times()  # the window only: not the imports, the connection or the first reads
        deadline = time.monotonic() + seconds
        i = 0
        while time.monotonic() < deadline:
            conversation = conversations[i % len(conversations)]
            message = Message.user(f"turn {i} " + "x" * 200, message_id=f"{tag}-{i}")
            while True:
                attempts += 1
                try:
                    conversation.append(message)
                    break
                except ConcurrencyConflict:
                    escaped += 1
                except DuplicateEntry:
                    break
            acked += 1
            i += 1
        ended = os.times()
    cpu = (ended.user - started.user) + (ended.system - started.system)
    out.put({"acked": acked, "escaped": escaped, "attempts": attempts, "cpu": cpu})


def _run_processes(
    target: Callable[..., None], args_of: Callable[[int], tuple[Any, ...]], processes: int, servers: tuple[int, ...]
) -> tuple[list[dict[str, Any]], float, float]:
    """Start ``processes`` workers together; their results, the wall time and the servers' CPU seconds meanwhile."""
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(processes + 1)
    out = context.Queue()
    procs = [context.Process(target=target, args=(*args_of(k), barrier, out), daemon=True) for k in range(processes)]
    for proc in procs:
        proc.start()
    barrier.wait(timeout=120)
    started = time.perf_counter()
    server_before = _tree_cpu(servers)
    results = [out.get(timeout=600) for _ in procs]
    wall = time.perf_counter() - started
    server_cpu = _tree_cpu(servers) - server_before
    for proc in procs:
        proc.join(timeout=60)
    return results, wall, server_cpu


def curve_cell(eng: Engine, processes: int, mode: str, seconds: float) -> dict[str, Any]:
    """One point of the curve: ``processes`` appenders on ``mode`` (``many`` or ``one``) conversations."""
    run = uuid.uuid4().hex[:6]

    def sessions(k: int) -> list[str]:
        return [f"{run}-one"] if mode == "one" else [f"{run}-p{k}-c{c}" for c in range(10)]

    load_before = os.getloadavg()[0]
    results, wall, server_cpu = _run_processes(
        _appender, lambda k: (eng.url, eng.options, sessions(k), seconds), processes, eng.pids
    )
    acked = sum(r["acked"] for r in results)
    attempts = sum(r["attempts"] for r in results)
    escaped = sum(r["escaped"] for r in results)
    return {
        "engine": eng.name,
        "processes": processes,
        "mode": mode,
        "appends_per_s": round(acked / wall, 1),
        "appends": acked,
        "wall_s": round(wall, 2),
        "client_cpu_s": round(sum(r["cpu"] for r in results), 2),
        "server_cpu_s": round(server_cpu, 2),
        "escaped_pct": round(100 * escaped / attempts, 2) if attempts else 0.0,
        # what an append costs in CPU, client and server together: the figure the load does not change much
        "cpu_ms_per_append": round(1000 * (sum(r["cpu"] for r in results) + server_cpu) / acked, 2) if acked else None,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }


def _counted_appender(
    url: str,
    options: dict[str, Any],
    session: str,
    writer: int,
    appends: int,
    retries: int | None,
    barrier: Any,
    out: Any,
) -> None:
    escaped = attempts = 0
    with Ledger.connect(url, **options) as ledger:
        conversation = ledger.conversation(session, max_retries=MAX_RETRIES if retries is None else retries)
        warm = uuid.uuid4().hex[:8]
        ledger.conversation(f"warm-{warm}").append(Message.user("warm up", message_id=f"{warm}-warm"))
        barrier.wait()
        for i in range(appends):
            message = Message.user(f"writer {writer} message {i}", message_id=f"w{writer}-{i:04d}")
            while True:
                attempts += 1
                try:
                    conversation.append(message)
                    break
                except ConcurrencyConflict:
                    escaped += 1
                except DuplicateEntry:
                    break
    out.put({"escaped": escaped, "attempts": attempts})


def conflict_trial(eng: Engine, writers: int, appends: int, retries: int | None = None) -> dict[str, Any]:
    """``writers`` processes x ``appends`` appends to one new conversation; the escaped-conflict rate.

    ``retries``: the conversations' ``max_retries`` (``None``: the library's default).
    """
    session = f"conflicts-{uuid.uuid4().hex[:8]}"
    results, wall, _ = _run_processes(
        _counted_appender, lambda k: (eng.url, eng.options, session, k, appends, retries), writers, eng.pids
    )
    with Ledger.connect(eng.url, **eng.options) as ledger:
        stored = len(ledger.history(session))
    escaped = sum(r["escaped"] for r in results)
    attempts = sum(r["attempts"] for r in results)
    assert stored == writers * appends, f"{stored} entries stored for {writers * appends} appends"
    return {
        "engine": eng.name,
        "max_retries": MAX_RETRIES if retries is None else retries,
        "writers": writers,
        "appends": writers * appends,
        "escaped": escaped,
        "attempts": attempts,
        "escaped_pct": round(100 * escaped / attempts, 2),
        "wall_s": round(wall, 1),
    }


def main(argv: list[str] | None = None) -> None:
    """Run the curve and the conflict trials; print a table and write JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--processes", default="1,2,4,8,16")
    parser.add_argument("--modes", default="many,one")
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--conflicts-only", action="store_true")
    parser.add_argument("--conflict-writers", type=int, default=8)
    parser.add_argument("--conflict-appends", type=int, default=200)
    parser.add_argument("--conflict-trials", type=int, default=2)
    parser.add_argument(
        "--conflict-retries",
        default="",
        help="comma-separated max_retries to compare, interleaved trial by trial (default: the library's)",
    )
    parser.add_argument("--out", type=Path, default=None, help="append the figures as JSON lines to this file")
    args = parser.parse_args(argv)
    import contextledger

    print(
        f"# contextledger from {Path(contextledger.__file__).parent}; retry policy: "
        f"{MAX_RETRIES} retries, back-off cap {BACKOFF_CAP}s; {os.cpu_count()} cores",
        flush=True,
    )
    rows: list[dict[str, Any]] = []
    for name in args.engines.split(","):
        with engine(name) as eng:
            print(f"## {name}: {DURABILITY[name]}", flush=True)
            if not args.conflicts_only:
                for mode in args.modes.split(","):
                    for k in (int(p) for p in args.processes.split(",")):
                        row = curve_cell(eng, k, mode, args.seconds)
                        rows.append(row)
                        print(json.dumps(row), flush=True)
            policies: list[int | None] = [int(r) for r in args.conflict_retries.split(",") if r] or [None]
            for _ in range(args.conflict_trials):
                for retries in policies:
                    row = conflict_trial(eng, args.conflict_writers, args.conflict_appends, retries)
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    if args.out is not None:
        with args.out.open("a") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
