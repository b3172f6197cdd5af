"""The async API against the sync one and against 0.2's greenlet bridge, side by side, on every backend.

Three ways to reach one database from Python, in one process:

* ``sync``: ``Ledger.connect(url)``, the sync API on the sync drivers;
* ``async``: ``AsyncLedger.connect(url)``, each call one hop to a worker thread of the
  ledger (the sync drivers; :mod:`contextledger.aio.runner`) -- except an append on
  SQLite and memory, which runs on the loop's own thread (``inline``, the default there),
  and on Redis and PostgreSQL, whose one commit script or statement is sent from the loop
  (``native``, the default there);
* ``worker``: ``AsyncLedger.connect(url, inline=False)`` (SQLite and memory only), every
  call one hop, appends too;
* ``bridge``: 0.2's async API, the sync core in a greenlet on the loop over aiosqlite,
  psycopg async and redis.asyncio (rebuilt in ``_greenlet_bridge.py``).

Two measurements per backend:

1. **One call at a time** -- ``append`` (one message, one commit) and ``restore`` (a
   ``--window``-message view opened again), the three APIs alternating call by call in
   a rotating order: medians of wall time and of the process's CPU time (every thread,
   so a worker's or a driver thread's work counts), their ratios to ``sync``, and the
   voluntary context switches per append (each thread hop costs about two).
2. **Many at once** -- ``--conversations`` conversations each committing ``--turns``
   turns (a user and an assistant message, one commit) at the same time: as many
   threads on the sync API, as many tasks on one event loop with the async API and with
   the bridge, and one thread serving them in turn; each lane once untimed (its
   connections made), then ``--rounds`` rounds, the order rotated, medians of messages
   per second and CPU per commit.

    python benchmarks/aio.py                               # every backend that is available
    python benchmarks/aio.py --backends memory,sqlite      # no servers
    python benchmarks/aio.py --appends 400 --conversations 50 --turns 10
    python benchmarks/aio.py --backends redis --no-native   # async: Redis (PostgreSQL) appends hop to a worker too
    python benchmarks/aio.py --quick                       # small counts (what scripts/bench --quick runs)
    python benchmarks/aio.py --json figures.json           # also write the medians as JSON (scripts/bench does)
    python benchmarks/aio.py --write-results               # also rewrite its section of DETAILS.md

Servers come from the same places as for the other benchmarks (environment URLs, else
throwaway local servers that are stopped at the end).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import _greenlet_bridge as bridge
from _details import replace_section, versions
from _servers import BACKENDS, LABELS, backend_list, median, ms, postgres_database, redis_url
from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.aio.runner import DEFAULT_WORKERS
from contextledger.stores.memory import MemoryStore

SECTION = "## Async API vs sync API (`benchmarks/aio.py`)"
APIS = ("sync", "async", "worker", "bridge")
INLINE = ("memory", "sqlite")


@dataclass
class Figures:
    backend: str
    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.samples.setdefault(name, []).append(value)

    def median(self, name: str) -> float:
        return median(self.samples[name])

    def mean(self, name: str) -> float:
        values = self.samples[name]
        return sum(values) / len(values)


@contextmanager
def ledger_url(name: str, directory: Path) -> Iterator[tuple[str, dict[str, Any]] | None]:
    """``(url, options)`` of a fresh ledger on ``name`` that every API opens, or ``None``."""
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


@dataclass
class Apis:
    """The same database opened three ways; ``run`` calls a sync callable through one of them."""

    sync: Ledger
    aio: AsyncLedger
    bridged: Ledger | None  # None for memory: the bridge had no memory store of its own
    worker: AsyncLedger | None = None  # inline=False, where the default is inline
    sized: dict[int, AsyncLedger] = field(default_factory=dict)  # more AsyncLedgers, by worker count

    @classmethod
    async def open(
        cls,
        name: str,
        url: str,
        options: dict[str, Any],
        workers: int,
        sweep: tuple[int, ...] = (),
        native: bool = True,
    ) -> Apis:
        # shared_views=0: a restore reads the store, as the bridge's does (it shares no views).
        if name == "memory":
            shared = MemoryStore()
            return cls(
                Ledger(shared, shared_views=0),
                AsyncLedger(shared, workers=workers, shared_views=0),
                None,
                AsyncLedger(shared, inline=False, shared_views=0),
            )
        ours = {**options, "shared_views": 0}
        sync = Ledger.connect(url, **ours)  # creates the schema
        # None: the default (Redis appends sent from the loop, docs/async.md); False: every call one hop
        aio = await AsyncLedger.connect(url, workers=workers, native=None if native else False, **ours)
        sized = {n: await AsyncLedger.connect(url, workers=n, **ours) for n in sweep if n != workers}
        worker = await AsyncLedger.connect(url, workers=workers, inline=False, **ours) if name in INLINE else None
        return cls(sync, aio, await bridge.open_ledger(url, **options), worker, sized)

    def names(self) -> list[str]:
        present = {"bridge": self.bridged is not None, "worker": self.worker is not None}
        return [api for api in APIS if present.get(api, True)]

    async def close(self) -> None:
        self.sync.close()
        await self.aio.close()
        if self.worker is not None:
            await self.worker.close()
        for ledger in self.sized.values():
            await ledger.close()
        if self.bridged is not None:
            await bridge.call(self.bridged.close)


async def one_at_a_time(name: str, apis: Apis, appends: int, restores: int, window: int) -> Figures:
    figures = Figures(name)
    names = apis.names()
    tag = uuid.uuid4().hex[:6]
    sync_conv = apis.sync.conversation(f"append-sync-{tag}")
    async_conv = await apis.aio.conversation(f"append-async-{tag}")
    worker_conv = await apis.worker.conversation(f"append-worker-{tag}") if apis.worker else None
    bridged_conv = await bridge.call(apis.bridged.conversation, f"append-bridge-{tag}") if apis.bridged else None

    async def append(api: str, message: Message) -> None:
        if api == "sync":
            sync_conv.append(message)
        elif api == "async":
            await async_conv.append(message)
        elif api == "worker":
            assert worker_conv is not None
            await worker_conv.append(message)
        else:
            assert bridged_conv is not None
            await bridge.call(bridged_conv.append, message)

    for api in names:  # warm: connections made, statements prepared, scripts loaded
        for n in range(20):
            await append(api, Message.user(f"warm up {n}"))
    calls = apis.aio.runner.calls
    worker_calls = apis.worker.runner.calls if apis.worker else 0
    await timed_rounds(figures, "append", names, appends, lambda api, n: append(api, Message.user(f"{api} msg {n}")))
    figures.add("append async hops", (apis.aio.runner.calls - calls) / appends)
    if apis.worker is not None:
        figures.add("append worker hops", (apis.worker.runner.calls - worker_calls) / appends)

    async def hand_over(api: str, _n: int) -> None:  # the async API's cost alone: a call that does nothing
        if api == "async":
            await apis.aio.run_sync(_nothing)

    await timed_rounds(figures, "no-op", ["async"], appends, hand_over)

    turns = [Message.user(f"message {n}") if n % 2 == 0 else Message.assistant(f"reply {n}") for n in range(window)]
    apis.sync.conversation(f"restore-{tag}").append(*turns)

    async def restore(api: str, _n: int) -> None:
        if api == "sync":
            view = apis.sync.conversation(f"restore-{tag}").view
        elif api in ("async", "worker"):  # a restore is a job on a worker either way
            aio = apis.aio if api == "async" else apis.worker
            assert aio is not None
            view = (await aio.conversation(f"restore-{tag}")).view
        else:
            assert apis.bridged is not None
            view = (await bridge.call(apis.bridged.conversation, f"restore-{tag}")).view
        assert len(view) == window

    await timed_rounds(figures, "restore", names, restores, restore)
    return figures


async def timed_rounds(
    figures: Figures, op: str, names: list[str], rounds: int, step: Callable[[str, int], Awaitable[None]]
) -> None:
    """Each round calls ``step`` once per API, in an order rotated every round."""
    for n in range(rounds):
        shift = n % len(names)
        for api in names[shift:] + names[:shift]:
            switches = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
            wall, cpu = time.perf_counter(), time.process_time()
            await step(api, n)
            figures.add(f"{op} {api} wall", time.perf_counter() - wall)
            figures.add(f"{op} {api} cpu", time.process_time() - cpu)
            figures.add(f"{op} {api} switches", resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - switches)


def _nothing(_ledger: Ledger) -> None:
    return None


def _turn(session: str, n: int) -> tuple[Message, Message]:
    return Message.user(f"{session} question {n}"), Message.assistant(f"{session} answer {n}")


async def many_at_once(name: str, apis: Apis, figures: Figures, conversations: int, turns: int, rounds: int) -> None:
    lanes = ["sync threads", "sync one thread", *(f"{api} tasks" for api in apis.names() if api != "sync")]
    lanes += [f"async tasks, {n} workers" for n in sorted(apis.sized)]
    # Each lane once, untimed: its connections are made (a pool, the loop's own), its code
    # warm, as in every round after the first. Then the timed rounds.
    for lane in lanes:
        await run_lane(lane, apis, [f"warm-{uuid.uuid4().hex[:10]}" for _ in range(conversations)], turns)
    for r in range(rounds):
        shift = r % len(lanes)
        for lane in lanes[shift:] + lanes[:shift]:
            slug = lane.replace(",", "").replace(" ", "-")
            sessions = [f"many-{slug}-{r}-{n}-{uuid.uuid4().hex[:6]}" for n in range(conversations)]
            wall, cpu = await run_lane(lane, apis, sessions, turns)
            commits = conversations * turns
            figures.add(f"many {lane} msg/s", 2 * commits / wall)
            figures.add(f"many {lane} cpu", cpu / commits)


async def run_lane(lane: str, apis: Apis, sessions: list[str], turns: int) -> tuple[float, float]:
    """Open every conversation (untimed), then time all of them committing ``turns`` turns."""
    if lane.startswith("sync"):
        convs = [apis.sync.conversation(s) for s in sessions]
        if lane == "sync one thread":
            wall, cpu = time.perf_counter(), time.process_time()
            for n in range(turns):
                for conv, session in zip(convs, sessions, strict=True):
                    conv.append(*_turn(session, n))
            return time.perf_counter() - wall, time.process_time() - cpu
        barrier = threading.Barrier(len(convs) + 1)

        def work(conv: Any, session: str) -> None:
            barrier.wait()
            for n in range(turns):
                conv.append(*_turn(session, n))

        threads = [threading.Thread(target=work, args=(c, s)) for c, s in zip(convs, sessions, strict=True)]
        for thread in threads:
            thread.start()
        wall, cpu = time.perf_counter(), time.process_time()
        barrier.wait()
        for thread in threads:
            thread.join()
        return time.perf_counter() - wall, time.process_time() - cpu
    if lane.startswith(("async tasks", "worker tasks")):
        aio = apis.sized[int(lane.split(", ")[1].split()[0])] if ", " in lane else apis.aio
        if lane.startswith("worker"):
            assert apis.worker is not None
            aio = apis.worker
        aconvs = [await aio.conversation(s) for s in sessions]

        async def agent(conv: Any, session: str) -> None:
            for n in range(turns):
                await conv.append(*_turn(session, n))

        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(agent(c, s) for c, s in zip(aconvs, sessions, strict=True)))
        return time.perf_counter() - wall, time.process_time() - cpu
    assert apis.bridged is not None
    bconvs = [await bridge.call(apis.bridged.conversation, s) for s in sessions]

    async def bridged(conv: Any, session: str) -> None:
        for n in range(turns):
            await bridge.call(conv.append, *_turn(session, n))

    wall, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(bridged(c, s) for c, s in zip(bconvs, sessions, strict=True)))
    return time.perf_counter() - wall, time.process_time() - cpu


def us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f}"


def tables(rows: list[Figures], window: int, conversations: int, turns: int) -> list[str]:
    lines = [
        f"**One call at a time.** Medians (ms wall, µs CPU of every thread) of one-message appends and of restores"
        f" of a {window}-message view; ratio = that API / sync; hops = calls handed to a worker thread per append;"
        " switches = voluntary context switches of the process per append (a thread hop costs about two).",
        "",
        "| backend | API | append wall | ratio | append CPU | ratio | hops | switches"
        " | restore wall | ratio | restore CPU | ratio |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for f in rows:
        for api in APIS:
            if f"append {api} wall" not in f.samples:
                continue
            cells = [LABELS[f.backend], api]
            for op in ("append", "restore"):
                wall, cpu = f.median(f"{op} {api} wall"), f.median(f"{op} {api} cpu")
                base_wall, base_cpu = f.median(f"{op} sync wall"), f.median(f"{op} sync cpu")
                cells += [ms(wall), f"{wall / base_wall:.2f}x", us(cpu), f"{cpu / base_cpu:.2f}x"]
                if op == "append":
                    hopped = api in ("async", "worker")
                    hops = f"{f.mean(f'append {api} hops'):.0f}" if hopped else ("0" if api == "sync" else "-")
                    cells += [hops, f"{f.mean('append ' + api + ' switches'):.1f}"]
            lines.append("| " + " | ".join(cells) + " |")
    for f in rows:
        if "no-op async cpu" in f.samples:
            lines.append(
                f"| {LABELS[f.backend]} | async, a call that does nothing | {ms(f.median('no-op async wall'))} | |"
                f" {us(f.median('no-op async cpu'))} | | 1 | {f.mean('no-op async switches'):.1f} | | | | |"
            )
    lines += [
        "",
        f"**Many at once.** {conversations} conversations x {turns} turns (two messages, one commit each) at the same"
        " time; each lane once untimed (its connections made), then medians over the rounds (lanes interleaved,"
        " their order rotated each round) of messages per second"
        " (wall), with the lowest and highest round, and CPU per commit; ratio = msg/s of the lane / msg/s of the"
        " threads on the sync API, and the same ratio taken round by round (median, lowest-highest).",
        "",
        "| backend | lane | msg/s | lowest-highest | ratio | per round | CPU per commit (µs) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for f in rows:
        lanes = sorted({k.split(" msg/s")[0].removeprefix("many ") for k in f.samples if k.endswith("msg/s")})
        if not lanes:
            continue
        base = f.median("many sync threads msg/s")
        order = ["sync threads", "sync one thread", "async tasks", "worker tasks", "bridge tasks"]
        for lane in sorted(lanes, key=lambda lane: (order.index(lane.split(",")[0]), len(lane), lane)):
            rates, cpu = f.samples[f"many {lane} msg/s"], f.median(f"many {lane} cpu")
            rate = median(rates)
            paired = [r / b for r, b in zip(rates, f.samples["many sync threads msg/s"], strict=True)]
            spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
            per_round = f"{median(paired):.2f}x ({min(paired):.2f}-{max(paired):.2f})"
            cells = [LABELS[f.backend], lane, f"{rate:,.0f}", spread, f"{rate / base:.2f}x", per_round, us(cpu)]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


async def measure(name: str, url: str, options: dict[str, Any], args: argparse.Namespace) -> Figures:
    sweep = args.workers_sweep if name != "memory" else ()
    apis = await Apis.open(name, url, options, args.workers, sweep, native=not args.no_native)
    try:
        figures = await one_at_a_time(name, apis, args.appends, args.restores, args.window)
        if name != "memory" and args.conversations:
            await many_at_once(name, apis, figures, args.conversations, args.turns, args.rounds)
        return figures
    finally:
        await apis.close()


def as_json(rows: list[Figures]) -> dict[str, Any]:
    """The medians (seconds, msg/s) and means (switches, hops) per backend, for scripts/bench."""
    out: dict[str, Any] = {}
    for f in rows:
        entry: dict[str, Any] = {}
        for name in f.samples:
            kind = "mean" if name.endswith(("switches", "hops")) else "median"
            entry[name] = f.mean(name) if kind == "mean" else f.median(name)
        out[f.backend] = entry
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", type=backend_list, default=list(BACKENDS))
    parser.add_argument("--appends", type=int, default=400, help="appends per API and backend")
    parser.add_argument("--restores", type=int, default=50, help="restores per API and backend")
    parser.add_argument("--window", type=int, default=100, help="active messages of the restored conversation")
    parser.add_argument("--conversations", type=int, default=100, help="conversations committing at once (0: skip)")
    parser.add_argument("--turns", type=int, default=5, help="turns each of them commits")
    parser.add_argument("--rounds", type=int, default=7, help="rounds of the many-at-once lanes")
    parser.add_argument(
        "--no-native",
        action="store_true",
        help="the async API with native=False (Redis and PostgreSQL appends hop to a worker too)",
    )
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="worker threads of the AsyncLedger")
    parser.add_argument(
        "--workers-sweep",
        type=lambda text: tuple(int(n) for n in text.split(",") if n),
        default=(),
        help="also run the many-at-once async lane with AsyncLedgers of these worker counts (e.g. 8,32,64)",
    )
    parser.add_argument("--quick", action="store_true", help="small counts: 150 appends, 20 restores, 3 turns, 1 round")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    parser.add_argument("--write-results", action="store_true", help="rewrite this section of DETAILS.md")
    args = parser.parse_args()
    if args.quick:
        args.appends, args.restores, args.turns, args.rounds = 150, 20, 3, 1

    load = os.getloadavg()[0]
    rows: list[Figures] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.backends:
            with ledger_url(name, Path(tmp)) as found:
                if found is None:
                    continue
                url, options = found
                rows.append(asyncio.run(measure(name, url, options, args)))
                print(f"{LABELS[name]}: done", flush=True)
    lines = [
        *tables(rows, args.window, args.conversations, args.turns),
        "",
        f"AsyncLedger workers: {args.workers}. Load average (1 min): {load:.1f} at the start,"
        f" {os.getloadavg()[0]:.1f} at the end.",
        versions(),
    ]
    print("\n".join(lines))
    if args.json is not None:
        args.json.write_text(json.dumps({"figures": as_json(rows), "workers": args.workers}, indent=1))
    if args.write_results:
        replace_section(SECTION, lines)


if __name__ == "__main__":
    main()
