"""The native PostgreSQL send's own paths: a reply cut, an idle connection ended, a statement sent in pieces.

The statement goes out through psycopg's libpq wrapper with the loop watching the socket
(:mod:`contextledger.stores.sql.write.pg_wire`); these are the failures that path meets
itself, each on a real server (through a loopback proxy where the reply must be lost).
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.write import pg_asend
from contextledger.stores.sql.write.pg_asend import NativeSend
from contextledger.stores.sql.write.pg_wire import Wire, numbered
from tests.aio.native_rows import count_postgres_connects, rows, text, with_a_native_connection
from tests.plugins.faults import LossyStore, lossy_postgres


def _sender(ledger: AsyncLedger) -> NativeSend:
    send = ledger._native
    assert isinstance(send, NativeSend)
    return send


def _wires(ledger: AsyncLedger) -> list[Wire]:
    """The running loop's idle native connections of ``ledger``."""
    mine = _sender(ledger)._loops.get(asyncio.get_running_loop())
    return list(mine.idle) if mine is not None else []


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture
def lossy(postgres_ledger_url: str) -> Iterator[LossyStore]:
    """A store reaching the server through a proxy that can cut an append's reply (statements sent as text)."""
    store, proxy = lossy_postgres(postgres_ledger_url)
    try:
        yield store
    finally:
        store.disarm()
        store.restore()
        store.store.close()
        proxy.close()


@pytest.mark.parametrize("apply", [True, False], ids=["applied", "never-arrived"])
def test_a_reply_cut_on_the_wire_is_settled_once_on_the_worker(
    lossy: LossyStore, postgres_ledger_url: str, apply: bool
) -> None:
    """The socket closes while the send waits for its reply: ``Lost``, settled by changeset id, stored exactly once.

    The store connects with ``prepare_threshold=None`` (the proxy must see the
    statement's text): after more sends than psycopg's default threshold the native
    connection still sends the text, as the held connection would.
    """

    async def main() -> tuple[list[str], int]:
        async with AsyncLedger(lossy.store, native=True) as ledger:
            conversation = await ledger.conversation("cut")
            for n in range(8):  # the first on a worker, then native sends past any default threshold
                await conversation.append(Message.user(f"m{n}"))
            send = _sender(ledger)
            calls, sent = ledger.runner.calls, send.sent
            lossy.arm(apply=apply)
            await conversation.append(Message.user("cut"))
            assert lossy.dropped == 1  # the proxy cut this send's connection ...
            assert send.sent == sent + 1  # ... sent natively once ...
            assert ledger.runner.calls == calls + 1  # ... and settled once on a worker
            calls = ledger.runner.calls
            await conversation.append(Message.user("after"))
            assert ledger.runner.calls == calls  # native again, on a new connection
            return [text(m) for m in conversation.messages], conversation.version

    texts, version = asyncio.run(main())
    assert texts == [*(f"m{n}" for n in range(8)), "cut", "after"]
    with Ledger.connect(postgres_ledger_url) as ledger:
        stored = ledger.conversation("cut")
        assert [text(m) for m in stored.messages] == texts
        assert stored.version == version


def test_an_idle_connection_the_server_ends_is_replaced_before_the_next_append(
    postgres_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop reads the server's goodbye on an idle connection: the next append connects anew, nothing is lost."""
    url = postgres_ledger_url
    made = count_postgres_connects(monkeypatch)

    async def main() -> list[str]:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await with_a_native_connection(ledger, "idle")
            (wire,) = _wires(ledger)
            pid = wire.connection.info.backend_pid
            with psycopg.connect(_libpq(url), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            for _ in range(500):  # until the loop has read the end of the session
                if not wire.usable:
                    break
                await asyncio.sleep(0.01)
            assert not wire.usable
            send = _sender(ledger)
            calls, sent = ledger.runner.calls, send.sent
            await conversation.append(Message.user("three"))
            assert (ledger.runner.calls, send.sent) == (calls, sent + 1)  # native, no settling on a worker
            (replaced,) = _wires(ledger)
            assert replaced is not wire
            assert replaced.connection.info.backend_pid != pid
            return [text(m) for m in conversation.messages]

    assert asyncio.run(main()) == ["one", "two", "three"]
    assert len(made) == 2
    with Ledger.connect(url) as ledger:
        assert [text(m) for m in ledger.conversation("idle").messages] == ["one", "two", "three"]


def test_a_statement_larger_than_the_socket_buffer_is_sent_in_pieces(
    postgres_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 3 MB turn on a connection with a small send buffer: the loop waits for room; the rows are the sync API's."""
    url = postgres_ledger_url
    waits_for_room: list[int] = []
    big = [Message.user("x" * 1_000_000 + f" {n}", message_id=f"big-{n}") for n in range(3)]

    async def main() -> int:
        loop = asyncio.get_running_loop()
        add_writer = loop.add_writer

        def counted(fd: Any, callback: Any, *args: Any) -> None:
            waits_for_room.append(1)
            add_writer(fd, callback, *args)

        monkeypatch.setattr(loop, "add_writer", counted)
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await ledger.conversation("big")
            await conversation.append(Message.user("start", message_id="start"))
            await conversation.append(Message.user("small", message_id="small"))  # the loop's connection exists now
            (wire,) = _wires(ledger)
            raw = socket.socket(fileno=wire.connection.pgconn.socket)
            try:
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            finally:
                raw.detach()  # the socket stays libpq's
            calls, sent = ledger.runner.calls, _sender(ledger).sent
            await conversation.append(*big)
            assert (ledger.runner.calls, _sender(ledger).sent) == (calls, sent + 1)
            return len(waits_for_room)

    assert asyncio.run(main()) >= 1
    with Ledger.connect(url) as ledger:
        sync = ledger.conversation("big-sync")
        sync.append(Message.user("start", message_id="start"))
        sync.append(Message.user("small", message_id="small"))
        sync.append(*big)
        assert rows(ledger.history("big")) == rows(ledger.history("big-sync"))


@pytest.mark.parametrize(
    ("sql", "text", "names"),
    [
        ("SELECT %(a)s, %(b)s", b"SELECT $1, $2", ("a", "b")),
        ("SELECT %(a)s + %(a)s, %(b)s", b"SELECT $1 + $1, $2", ("a", "b")),  # a name used twice: one number
        ("SELECT '100%%', %(b)s", b"SELECT '100%', $1", ("b",)),  # %% is a literal %
        ("SELECT 1", b"SELECT 1", ()),
    ],
)
def test_placeholders_are_numbered_as_psycopg_numbers_them(sql: str, text: bytes, names: tuple[str, ...]) -> None:
    assert numbered(sql) == (text, names)


def test_a_connection_in_use_when_the_loop_closes_its_connections_is_closed_once_handed_back(
    postgres_ledger_url: str,
) -> None:
    """``aclose`` while an append waits for its reply: the append completes, then its connection is closed."""
    url = postgres_ledger_url

    async def main() -> list[str]:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await with_a_native_connection(ledger, "closing")
            (wire,) = _wires(ledger)
            holder = await asyncio.to_thread(_lock_conversation, url, "closing")
            try:
                append = asyncio.ensure_future(conversation.append(Message.user("three")))
                while _wires(ledger):  # until the append holds the connection
                    await asyncio.sleep(0.01)
                await _sender(ledger).aclose()
                assert not wire.connection.closed  # in use: left to finish its statement
            finally:
                await asyncio.to_thread(holder.rollback)
                await asyncio.to_thread(holder.close)
            await append
            assert wire.connection.closed
            return [text(m) for m in conversation.messages]

    assert asyncio.run(main()) == ["one", "two", "three"]


def _lock_conversation(url: str, session_id: str) -> psycopg.Connection:
    """A connection holding the conversation's row lock (in an open transaction) until it rolls back."""
    conn = psycopg.connect(_libpq(url))
    conn.execute("SELECT id FROM cl_conversations WHERE session_id = %s FOR UPDATE", (session_id,))
    return conn


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_leaves_its_parents_native_connections_alone(postgres_ledger_url: str) -> None:
    """A child closing the copies it inherited ends neither the parent's session nor its watch of the socket."""
    url = postgres_ledger_url

    async def main() -> list[str]:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await with_a_native_connection(ledger, "forked")
            (wire,) = _wires(ledger)
            pid = wire.connection.info.backend_pid
            loop = asyncio.get_running_loop()
            child = os.fork()
            if child == 0:  # pragma: no cover - the child's exit status is the check
                code = 1
                try:
                    _sender(ledger)._loops[loop].close()  # what the child inherited of this loop
                    code = 0
                finally:
                    os._exit(code)
            _, status = await asyncio.to_thread(os.waitpid, child, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            calls = ledger.runner.calls
            await asyncio.wait_for(conversation.append(Message.user("three")), 30)  # the reply still wakes it
            assert ledger.runner.calls == calls  # native, on the same session
            assert _wires(ledger) == [wire]
            assert wire.connection.info.backend_pid == pid
            return [text(m) for m in conversation.messages]

    assert asyncio.run(main()) == ["one", "two", "three"]


def test_a_loop_that_ends_takes_its_native_connections_with_it(postgres_ledger_url: str) -> None:
    """One sender used from successive ``asyncio.run`` calls: each ended loop's sessions end too, none piles up.

    The sender alone (no ledger): a connection must not keep its loop alive (the sender
    holds each loop's connections weakly keyed by the loop).
    """
    url = postgres_ledger_url
    store = SQLStore.from_url(url)
    send = NativeSend.of(store)
    assert send is not None

    async def connect() -> int:
        mine = send._loops[asyncio.get_running_loop()] = pg_asend._LoopConnections()
        wire = await send._take(mine)
        mine.give_back(wire)  # idle on this loop when it ends
        return wire.connection.info.backend_pid

    try:
        pids = [asyncio.run(connect()) for _ in range(3)]
        gc.collect()  # the ended loops, and with them their connections
        assert len(set(pids)) == 3
        assert not send._loops
        with psycopg.connect(_libpq(url), autocommit=True) as admin:
            alive = -1
            for _ in range(500):  # until the server has seen the sessions end
                row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", (pids,)).fetchone()
                assert row is not None
                alive = int(row[0])
                if alive == 0:
                    break
                time.sleep(0.01)
            assert alive == 0
    finally:
        store.close()
