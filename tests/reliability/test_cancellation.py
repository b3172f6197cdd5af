"""Cancelled async calls: each commit applied once or not at all, no lock or connection held, never a hang.

Per backend (memory, SQLite, PostgreSQL, Redis, Redis Cluster) one ``AsyncLedger``
drives two conversations -- one with a per-turn sliding window, one summarizing
proactively through a coroutine summarizer that takes a moment, as a model call does --
with appends, model calls (``before_model_call``, which reduces), ``after_model_call``
and manual reductions, one to three at a time, and cancels a random subset of the tasks
at random moments: before their call started, while it ran, while the summarizer ran.

Afterwards, read by a fresh ledger:

* the stored entries are exactly the appends that ran (a ``MessageAddedEvent`` fires
  after each commit), each once; every append whose task returned is among them;
* the stored ``model_call_count`` is exactly the model calls that ran, and equals the
  live conversation's; the restored view is the live view;
* every eviction names a recorded reduction and every reduction's entries are evicted
  by it (nothing half-applied);
* no lock is held: a fresh writer with a 0.2 s lock or busy timeout commits at once;
  no connection is checked out of any pool (SQLAlchemy's and redis-py's);
* every cancelled task ended within seconds (a hang fails the test).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from redis import Redis
from redis.cluster import RedisCluster

from contextledger import (
    Ledger,
    Message,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.core.hooks import BeforeModelCallEvent, MessageAddedEvent
from contextledger.stores.memory import MemoryStore
from contextledger.stores.sql import SQLStore
from tests.conftest import STORE_BACKENDS
from tests.plugins.redis import purge
from tests.reliability.conftest import SOAK, Report

CANCELLATIONS = 1000 if SOAK else 200
"""Cancelled tasks per backend (each test runs until it has cancelled this many)."""
SETTLE = 30.0
"""Seconds a cancelled task may take to end (a started call runs to its end first)."""


class _Durable(MemoryStore):
    """The memory backend: one store the async ledger and the fresh reader share (closing it ends neither)."""

    def close(self) -> None:
        pass


@dataclass
class Backend:
    """How to open the backend with the async API and a fresh sync reader/writer, and how to see its pools."""

    name: str
    url: str
    options: dict[str, Any]
    reopen: Callable[[], Ledger]
    shared: MemoryStore | None = None
    clients: list[Redis | RedisCluster] = field(default_factory=list)

    async def open(self, workers: int) -> AsyncLedger:
        if self.shared is not None:
            return AsyncLedger(self.shared, workers=workers)
        return await AsyncLedger.connect(self.url, workers=workers, **self.options)

    def checked_out(self, ledger: AsyncLedger) -> int:
        """Connections checked out of the ledger's pools now."""
        store = ledger.store
        if isinstance(store, SQLStore):
            checked_out: Callable[[], int] | None = getattr(store.engine.pool, "checkedout", None)
            return checked_out() if checked_out is not None else 0  # a StaticPool (in-memory) keeps no count
        return _redis_in_use(self.clients)


@pytest.fixture(params=STORE_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    name = request.param
    if name == "memory":
        shared = _Durable()
        yield Backend(name, "memory://", {}, lambda: Ledger(shared), shared=shared)
        return
    if name in ("sqlite", "postgres"):
        url = request.getfixturevalue("sqlite_url" if name == "sqlite" else "postgres_ledger_url")
        fresh = {"busy_timeout": 0.2} if name == "sqlite" else {"lock_timeout": 0.2}
        yield Backend(name, url, {}, lambda: Ledger.connect(url, **fresh))
        return
    url = request.getfixturevalue(f"{name}_url")
    prefix = request.getfixturevalue("redis_key_prefix")
    clients: list[Redis | RedisCluster] = []

    def keep(driver_url: str, cluster: bool, options: dict[str, Any]) -> Redis | RedisCluster:
        """Make the store's client as redis-py's from_url does, keeping it to look at its pools."""
        client = RedisCluster.from_url(driver_url, **options) if cluster else Redis.from_url(driver_url, **options)
        clients.append(client)
        return client

    options = {"key_prefix": prefix, "client_factory": keep}
    yield Backend(name, url, options, lambda: Ledger.connect(url, key_prefix=prefix), clients=clients)
    purge(url, prefix)


def _redis_in_use(clients: list[Redis | RedisCluster]) -> int:
    pools = []
    for client in clients:
        if isinstance(client, RedisCluster):
            nodes = client.get_nodes()  # type: ignore[no-untyped-call]
            pools += [node.redis_connection.connection_pool for node in nodes if node.redis_connection]
        else:
            pools.append(client.connection_pool)
    # redis-py reports (count, OpenTelemetry attributes) per connection state.
    return sum(
        count
        for pool in pools
        for count, attributes in pool.get_connection_count()
        if attributes.get("db.client.connection.state") == "used"
    )


@dataclass
class Tally:
    """What ran, seen from inside the calls (hooks fire on the worker, after the commit)."""

    appended: dict[str, list[str]] = field(default_factory=dict)  # conversation -> message ids committed
    model_calls: dict[str, int] = field(default_factory=dict)
    returned: dict[str, set[str]] = field(default_factory=dict)  # appends whose task returned normally
    cancelled: int = 0
    finished: int = 0
    errors: list[BaseException] = field(default_factory=list)


async def _summarize(messages: list[Message]) -> str:
    await asyncio.sleep(random.choice((0, 0.001, 0.003)))  # a model call takes a moment
    return f"summary of {len(messages)} messages"


def _watch(conversation: AsyncConversation, tally: Tally) -> None:
    name = conversation.session_id
    tally.appended[name], tally.model_calls[name], tally.returned[name] = [], 0, set()

    def added(event: MessageAddedEvent) -> None:
        tally.appended[name].append(event.message.message_id)

    def counted(_event: BeforeModelCallEvent) -> None:
        tally.model_calls[name] += 1

    conversation.hooks.add_callback(MessageAddedEvent, added)
    conversation.hooks.add_callback(BeforeModelCallEvent, counted)


def _operation(
    conversation: AsyncConversation, tally: Tally, rng: random.Random, n: int
) -> Callable[[], Awaitable[Any]]:
    name = conversation.session_id
    kind = rng.choices(("user", "assistant", "model_call", "after", "reduce"), weights=(4, 3, 3, 1, 1))[0]
    if kind in ("user", "assistant"):
        text = f"{name} {kind} {n} " + "words " * rng.randint(1, 12)
        message = Message.user(text) if kind == "user" else Message.assistant(text)

        async def append() -> None:
            await conversation.append(message)
            tally.returned[name].add(message.message_id)

        return append
    if kind == "model_call":
        return conversation.before_model_call
    if kind == "after":
        return conversation.after_model_call
    return conversation.reduce


async def _storm(ledger: AsyncLedger, tally: Tally, seed: int) -> dict[str, AsyncConversation]:
    rng = random.Random(seed)
    window = await ledger.conversation("window", manager=SlidingWindowConversationManager(window_size=8, per_turn=True))
    summary = await ledger.conversation(
        "summary",
        manager=SummarizingConversationManager(
            summary_ratio=0.5, preserve_recent_messages=2, summarizer=_summarize, proactive_compression=True
        ),
        context_window_limit=120,
    )
    for conversation in (window, summary):
        _watch(conversation, tally)
    n = 0
    while tally.cancelled < CANCELLATIONS:
        tasks = []
        for _ in range(rng.randint(1, 3)):
            n += 1
            operation = _operation(rng.choice((window, summary)), tally, rng, n)
            tasks.append(asyncio.ensure_future(operation()))
        # Let them start (or not), then cancel some: before their call, inside it, inside the summarizer.
        for _ in range(rng.randint(0, 3)):
            await asyncio.sleep(rng.choice((0, 0, 0.0002, 0.001, 0.004)))
        for task in tasks:
            if rng.random() < 0.6:
                task.cancel()
        done, pending = await asyncio.wait(tasks, timeout=SETTLE)
        assert not pending, f"{len(pending)} task(s) still running {SETTLE} s after their cancellation"
        for task in done:
            if task.cancelled():
                tally.cancelled += 1
            elif task.exception() is not None:
                tally.errors.append(task.exception())  # type: ignore[arg-type]
            else:
                tally.finished += 1
    return {"window": window, "summary": summary}


@pytest.mark.timeout(600)
def test_random_cancellations_apply_each_commit_once_or_not_at_all_and_hold_nothing(
    backend: Backend, report: Report
) -> None:
    tally = Tally()
    seed = STORE_BACKENDS.index(backend.name)

    async def main() -> tuple[AsyncLedger, dict[str, AsyncConversation]]:
        ledger = await backend.open(workers=4)
        return ledger, await _storm(ledger, tally, seed)

    ledger, conversations = asyncio.run(main())
    runner = ledger.runner
    assert not tally.errors, tally.errors[:3]
    # Both kinds of cancellation happened: a call that never started, a call that ran to its end first.
    assert runner.cancelled_waiting > 0
    assert runner.cancelled_running > 0
    assert backend.checked_out(ledger) == 0, "a connection is still checked out of a pool"

    reductions_seen = 0
    with backend.reopen() as fresh:
        for name in ("window", "summary"):
            live = conversations[name]
            restored = fresh.conversation(name)
            history = fresh.history(name)
            stored_ids = [h.message.message_id for h in history]
            assert len(stored_ids) == len(set(stored_ids)), "an entry stored twice"
            assert set(stored_ids) == set(tally.appended[name]), "stored entries differ from the appends that ran"
            assert len(tally.appended[name]) == len(set(tally.appended[name]))
            assert tally.returned[name] <= set(stored_ids), "an append whose task returned is missing"
            assert restored.model_call_count == tally.model_calls[name] == live.model_call_count
            assert list(restored.view.entries) == list(live.view.entries)
            reductions = {r.reduction_id: r for r in fresh.reductions(name)}
            reductions_seen += len(reductions)
            by_id = {h.message.message_id: h for h in history}
            summaries = {s.summary_id: s for s in fresh.summaries(name)}
            for entry in history:
                if entry.status == "evicted":
                    assert entry.evicted_by in reductions, f"{entry.message.message_id} evicted by no reduction"
            for reduction in reductions.values():
                for entry_id in reduction.evicted:
                    owner = by_id[entry_id].evicted_by if entry_id in by_id else summaries[entry_id].evicted_by
                    assert owner == reduction.reduction_id, f"{entry_id} half-evicted"
            # No lock held: a fresh writer with a 0.2 s lock/busy timeout commits at once.
            fresh.conversation(name).append(Message.user("a fresh writer"))
    asyncio.run(ledger.close())
    report(
        f"cancellation, {backend.name} (seed {seed}): {tally.cancelled} tasks cancelled ({runner.cancelled_waiting}"
        f" before their call started, {runner.cancelled_running} while it ran), {tally.finished} finished;"
        f" {sum(len(v) for v in tally.appended.values())} appends, {sum(tally.model_calls.values())} model calls and"
        f" {reductions_seen} reductions applied once each; 0 connections checked out, a fresh writer committed at once"
    )
