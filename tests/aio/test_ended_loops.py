"""One ledger across successive ``asyncio.run`` calls: each ended loop is let go, and its native connections close.

A finished call must not keep its caller's loop reachable (through its context, its
future, a worker thread or a reference cycle), and a loop's native connections are
closed as the loop ends (``contextledger.aio.loop_end``), not when the ledger closes.
Each case runs with the garbage collector off: the connections close, and the loop goes
by reference counting alone, as soon as ``asyncio.run`` returns -- but on Redis, where
redis-py's asyncio connection keeps a reference cycle from its connect (an exception's
traceback holding its frames), whose closed stream still names the loop: there the
loop goes with one ``gc.collect()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import sys
import time
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
import redis

from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.errors import PinError
from tests.plugins.redis import purge

RUNS = 3
APPENDS = 3
CLOSE_WAIT = 10.0  # seconds for the server to see a closed connection go (it reads the end of the stream)


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The garbage collector stays off for the test: what is freed, is freed by reference counting."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _redis_sessions(url: str) -> tuple[Callable[[], set[int]], Callable[[], None]]:
    """The ids of the clients connected to the server at ``url`` but the checker's own, and the checker's close."""
    checker = redis.Redis.from_url(url)
    own = int(checker.client_id())

    def sessions() -> set[int]:
        return {int(client["id"]) for client in checker.client_list()} - {own}

    return sessions, checker.close


def _postgres_sessions(url: str) -> tuple[Callable[[], set[int]], Callable[[], None]]:
    """The backend pids of the native connections to the database at ``url``, and the checker's close.

    Native connections run in autocommit mode, their last statement an append; the sync
    side's pool may open a connection during a run (for reads), whose last statement
    ends a transaction.
    """
    checker = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True)

    def sessions() -> set[int]:
        rows = checker.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
            " AND query NOT IN ('COMMIT', 'ROLLBACK')"
        ).fetchall()
        return {int(row[0]) for row in rows}

    return sessions, checker.close


async def _run(ledger: AsyncLedger, run: int, sessions: Callable[[], set[int]]) -> tuple[weakref.ref[Any], set[int]]:
    """Append natively on this run's loop; a weak reference to the loop and the sessions open meanwhile."""
    loop = weakref.ref(asyncio.get_running_loop())
    conversation = await ledger.conversation("loops")
    for n in range(APPENDS):
        await conversation.append(Message.user(f"run {run} message {n}"))
    return loop, sessions()


def _ended_loops_go(
    url: str, options: dict[str, Any], sessions: Callable[[], set[int]], *, collect: bool = False
) -> None:
    """Three runs, each appending natively on its own loop: each loop and its connections go as the run ends.

    One worker thread, so that the sync calls reuse the connections the first run made:
    a connection opened during a later run is that run's loop's own.
    """
    ledger = asyncio.run(AsyncLedger.connect(url, native=True, workers=1, **options))
    try:

        async def first() -> None:  # the conversation's first commit (on a worker)
            conversation = await ledger.conversation("loops")
            await conversation.append(Message.user("first"))

        asyncio.run(first())
        asyncio.run(_run(ledger, -1, sessions))  # unchecked: opens what the sync side keeps (pool, settings read)
        send = ledger._native  # the ledger's own sender: counted, never replaced
        assert send is not None
        for run in range(RUNS):
            before, sent = sessions(), send.sent
            loop, during = asyncio.run(_run(ledger, run, sessions))
            assert send.sent == sent + APPENDS  # each append was sent from the run's loop
            opened = during - before
            assert opened, "the run's loop opened no native connection"
            deadline = time.monotonic() + CLOSE_WAIT
            while (still := opened & sessions()) and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not still, f"run {run}: the ended loop's connections {still} are still open on the server"
            if collect:
                gc.collect()
            assert loop() is None, f"run {run}: the ended loop is still reachable"
    finally:
        asyncio.run(ledger.close())
    with Ledger.connect(url, **options) as reader:
        texts = [m.content[0]["text"] for m in reader.conversation("loops").messages]
    assert texts == ["first", *(f"run {r} message {n}" for r in range(-1, RUNS) for n in range(APPENDS))]


@pytest.mark.timeout(120)
def test_redis_each_ended_loop_is_let_go_with_its_connections(
    redis_url: str, redis_key_prefix: str, collector_off: None
) -> None:
    sessions, close = _redis_sessions(redis_url)
    try:
        _ended_loops_go(redis_url, {"key_prefix": redis_key_prefix}, sessions, collect=True)
    finally:
        close()
        purge(redis_url, redis_key_prefix)


@pytest.mark.timeout(120)
def test_postgres_each_ended_loop_is_let_go_with_its_connections(postgres_ledger_url: str, collector_off: None) -> None:
    sessions, close = _postgres_sessions(postgres_ledger_url)
    try:
        _ended_loops_go(postgres_ledger_url, {}, sessions)
    finally:
        close()


def test_calls_on_workers_let_go_of_their_loop(collector_off: None) -> None:
    """Every call a job on a worker (``inline=False``): ended, failed or cancelled, none keeps its loop."""
    ledger = asyncio.run(AsyncLedger.connect("memory://", inline=False, workers=2))
    try:

        async def run(n: int) -> weakref.ref[Any]:
            conversation = await ledger.conversation("jobs")
            await conversation.append(Message.user(f"run {n}"))
            with contextlib.suppress(PinError):  # a failed call: its error (and traceback) reached the caller, dropped
                await conversation.pin("no such entry")
            kept = asyncio.ensure_future(conversation.append(Message.user(f"kept {n}")))
            cancelled = asyncio.ensure_future(conversation.append(Message.user(f"cancelled {n}")))
            await asyncio.sleep(0)
            cancelled.cancel()
            await kept
            with contextlib.suppress(asyncio.CancelledError):  # cancelled while it waited, or once it ran: it ended
                await cancelled
            return weakref.ref(asyncio.get_running_loop())

        for n in range(RUNS):
            loop = asyncio.run(run(n))
            assert loop() is None, f"run {n}: the ended loop is still reachable"
    finally:
        asyncio.run(ledger.close())


@pytest.mark.timeout(120)
def test_a_loop_closed_without_shutting_down_its_generators_is_let_go_when_the_ledger_closes(
    redis_url: str, redis_key_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its connections stay until the ledger closes, which ends its closer there: nothing raised on a closed loop."""
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    options: dict[str, Any] = {"key_prefix": redis_key_prefix}
    try:
        ledger = asyncio.run(AsyncLedger.connect(redis_url, native=True, **options))
        loop = asyncio.new_event_loop()
        try:

            async def appends(ledger: AsyncLedger) -> None:
                conversation = await ledger.conversation("manual")
                for n in range(APPENDS):
                    await conversation.append(Message.user(f"manual {n}"))

            loop.run_until_complete(appends(ledger))
        finally:
            loop.close()  # without loop.shutdown_asyncgens()
        ended = weakref.ref(loop)
        del loop
        asyncio.run(ledger.close())
        del ledger
        gc.collect()
        assert ended() is None
        assert unraisable == []
        with Ledger.connect(redis_url, **options) as reader:
            assert len(reader.conversation("manual").messages) == APPENDS
    finally:
        purge(redis_url, redis_key_prefix)
