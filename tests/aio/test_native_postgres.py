"""Native appends on PostgreSQL: the one append statement sent with psycopg from the loop, no worker hop."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event

from contextledger import Ledger, Message
from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.errors import SessionDeleted, StoreTimeout
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.write import pg_asend
from contextledger.stores.sql.write.pg_asend import NativeSend
from tests.aio.native_rows import (
    appends_without_a_hop,
    count_postgres_connects,
    native_and_sync,
    rows,
    text,
    with_a_native_connection,
)


def _sender(ledger: AsyncLedger) -> NativeSend:
    send = ledger._native  # the ledger's own sender: counted, never replaced
    assert isinstance(send, NativeSend)
    return send


def _libpq(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.mark.parametrize("native", [True, None])  # None: the default, native where the store takes it
def test_a_native_append_sends_one_statement_and_makes_no_hop(postgres_ledger_url: str, native: bool | None) -> None:
    appends_without_a_hop(postgres_ledger_url, {}, native, lambda ledger: _sender(ledger).sent)


def test_statement_events_keep_appends_on_a_worker(postgres_ledger_url: str) -> None:
    url = postgres_ledger_url
    seen: list[str] = []

    async def main() -> None:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await ledger.conversation("listened")
            await conversation.append(Message.user("first"))
            store = ledger._sync.store
            assert isinstance(store, SQLStore)
            event.listen(store.engine, "before_cursor_execute", lambda *args: seen.append(str(args[2])))
            send = _sender(ledger)
            calls, sent = ledger.runner.calls, send.sent
            await conversation.append(Message.user("second"))
            assert (ledger.runner.calls, send.sent) == (calls + 1, sent)  # the listener sees it: sent on a worker
            assert any("cl_entries" in sql for sql in seen)

    asyncio.run(main())


@pytest.mark.parametrize("off", [{"native": False}, {"inline": False}])
def test_without_native_every_append_is_a_job_on_a_worker(postgres_ledger_url: str, off: dict[str, bool]) -> None:
    async def main() -> None:
        async with await AsyncLedger.connect(postgres_ledger_url, **off) as ledger:
            assert ledger._native is None
            conversation = await ledger.conversation("hops")
            await conversation.append(Message.user("first"))
            calls = ledger.runner.calls
            await conversation.append(Message.user("second"))
            assert ledger.runner.calls == calls + 1

    asyncio.run(main())


def test_concurrent_appends_keep_their_order(postgres_ledger_url: str) -> None:
    url = postgres_ledger_url

    async def main() -> list[str]:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await ledger.conversation("order")
            await conversation.append(Message.user("m-start"))
            sent = _sender(ledger).sent
            await asyncio.gather(*(conversation.append(Message.user(f"m{n}")) for n in range(30)))
            assert _sender(ledger).sent > sent
            return [text(m) for m in conversation.messages]

    texts = asyncio.run(main())
    assert texts == ["m-start", *(f"m{n}" for n in range(30))]
    with Ledger.connect(url) as ledger:
        assert [text(m) for m in ledger.conversation("order").messages] == texts


def test_many_conversations_share_a_few_connections_of_the_loop(
    postgres_ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More appends at once than the cap wait on the loop for a connection: none hops, none opens a connection more."""
    monkeypatch.setattr(pg_asend, "CONNECTIONS_PER_LOOP", 2)
    made = count_postgres_connects(monkeypatch)

    async def main() -> dict[str, list[str]]:
        async with await AsyncLedger.connect(postgres_ledger_url, native=True) as ledger:
            conversations = [await ledger.conversation(f"c{k}") for k in range(12)]
            for conversation in conversations:
                await conversation.append(Message.user("start"))  # the first commits: on a worker
            send = _sender(ledger)
            calls, sent = ledger.runner.calls, send.sent

            async def turns(conversation: AsyncConversation) -> None:
                for n in range(3):
                    await conversation.append(Message.user(f"t{n}"))

            await asyncio.gather(*(turns(c) for c in conversations))
            assert (ledger.runner.calls, send.sent) == (calls, sent + 36)
            return {c.session_id: [text(m) for m in c.messages] for c in conversations}

    texts = asyncio.run(main())
    assert len(made) == 2
    assert all(t == ["start", "t0", "t1", "t2"] for t in texts.values())


def test_a_waiter_cancelled_once_woken_passes_its_connection_on() -> None:
    async def main() -> None:
        connections = pg_asend._LoopConnections()
        first = asyncio.ensure_future(connections.wait())
        second = asyncio.ensure_future(connections.wait())
        await asyncio.sleep(0)  # both wait
        connections.give_back(None)  # wakes the first ...
        first.cancel()  # ... which is cancelled before it runs again
        with pytest.raises(asyncio.CancelledError):
            await first
        await asyncio.wait_for(second, 5)  # the wake-up went on to the second
        assert not connections.waiting

    asyncio.run(main())


def test_a_conflict_from_another_writer_resolves_once_on_the_worker(postgres_ledger_url: str) -> None:
    url = postgres_ledger_url

    async def main() -> tuple[list[str], int]:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await ledger.conversation("conflict")
            await conversation.append(Message.user("one"))
            with Ledger.connect(url) as other:  # another process's writer moves the conversation on
                other.conversation("conflict").append(Message.user("two"))
            send = _sender(ledger)
            calls, sent = ledger.runner.calls, send.sent
            await conversation.append(Message.user("three"))
            assert send.sent == sent + 1  # refused natively, nothing written ...
            assert ledger.runner.calls == calls + 1  # ... and sent again once on a worker
            return [text(m) for m in conversation.messages], conversation.version

    texts, version = asyncio.run(main())
    assert texts == ["one", "two", "three"]
    with Ledger.connect(url) as ledger:
        stored = ledger.conversation("conflict")
        assert [text(m) for m in stored.messages] == texts
        assert stored.version == version


def test_a_deleted_conversation_is_not_recreated(postgres_ledger_url: str) -> None:
    url = postgres_ledger_url

    async def main() -> None:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await ledger.conversation("gone")
            await conversation.append(Message.user("one"))
            with Ledger.connect(url) as other:
                other.delete_session("gone")
            with pytest.raises(SessionDeleted):
                await conversation.append(Message.user("two"))

    asyncio.run(main())


def _lock_conversation(url: str, session_id: str) -> psycopg.Connection:
    """A connection holding the conversation's row lock (in an open transaction) until it rolls back."""
    conn = psycopg.connect(_libpq(url))
    conn.execute("SELECT id FROM cl_conversations WHERE session_id = %s FOR UPDATE", (session_id,))
    return conn


def _terminate_waiting(url: str) -> int:
    """Terminate the backends waiting for a lock in the ledger's database; how many."""
    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        ).fetchone()
        assert row is not None
        return int(row[0])


@pytest.mark.parametrize(
    "options", [{}, {"connect_args": {"prepare_threshold": 0}}], ids=["text", "prepared"]
)  # prepared: the held connection's setting, so the native send prepares the statement at its first use too
def test_an_error_reply_is_met_on_the_worker_and_the_connection_kept(
    postgres_ledger_url: str, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]
) -> None:
    """The store's lock timeout reaches the native connection: its error reply is refused, the sync path reports it."""
    url = postgres_ledger_url
    made = count_postgres_connects(monkeypatch)

    async def main() -> list[str]:
        async with await AsyncLedger.connect(url, native=True, lock_timeout=0.2, **options) as ledger:
            conversation = await with_a_native_connection(ledger, "timeout")
            send = _sender(ledger)
            holder = await asyncio.to_thread(_lock_conversation, url, "timeout")
            try:
                calls, sent = ledger.runner.calls, send.sent
                with pytest.raises(StoreTimeout):
                    await conversation.append(Message.user("late"))
                assert send.sent == sent + 1  # refused natively after the lock timeout ...
                assert ledger.runner.calls == calls + 1  # ... and met again on a worker
            finally:
                await asyncio.to_thread(holder.rollback)
                await asyncio.to_thread(holder.close)
            calls = ledger.runner.calls
            await conversation.append(Message.user("three"))
            assert ledger.runner.calls == calls  # native again, on the same connection
            (wire,) = send._loops[asyncio.get_running_loop()].idle
            assert wire.prepared == (1 if options else 0)  # as the held connection prepares
            return [text(m) for m in conversation.messages]

    assert asyncio.run(main()) == ["one", "two", "three"]
    assert len(made) == 1
    with Ledger.connect(url) as ledger:
        assert [text(m) for m in ledger.conversation("timeout").messages] == ["one", "two", "three"]


def test_a_connection_terminated_mid_append_resolves_exactly_once(postgres_ledger_url: str) -> None:
    """The server ends the native connection while its statement waits: the append lands once, settled by its id."""
    url = postgres_ledger_url

    async def main() -> tuple[list[str], int]:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await with_a_native_connection(ledger, "killed")
            holder = await asyncio.to_thread(_lock_conversation, url, "killed")
            try:
                send = _sender(ledger)
                calls, sent = ledger.runner.calls, send.sent
                append = asyncio.ensure_future(conversation.append(Message.user("three")))
                await asyncio.sleep(0.3)  # sent: its update waits for the row lock
                assert await asyncio.to_thread(_terminate_waiting, url) == 1
            finally:
                await asyncio.to_thread(holder.rollback)
                await asyncio.to_thread(holder.close)
            await append
            assert send.sent == sent + 1  # sent natively once ...
            assert ledger.runner.calls == calls + 1  # ... and settled on a worker by its changeset id
            await conversation.append(Message.user("four"))
            return [text(m) for m in conversation.messages], conversation.version

    texts, version = asyncio.run(main())
    assert texts == ["one", "two", "three", "four"]
    with Ledger.connect(url) as ledger:
        stored = ledger.conversation("killed")
        assert [text(m) for m in stored.messages] == texts
        assert stored.version == version


def test_a_cancelled_native_append_is_settled_before_the_cancellation(postgres_ledger_url: str) -> None:
    url = postgres_ledger_url

    async def main() -> tuple[list[str], list[str]]:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            conversation = await ledger.conversation("cancel")
            await conversation.append(Message.user("one"))
            holder = await asyncio.to_thread(_lock_conversation, url, "cancel")
            try:
                append = asyncio.ensure_future(conversation.append(Message.user("two")))
                await asyncio.sleep(0.2)
                append.cancel()
                await asyncio.sleep(0.1)
            finally:
                await asyncio.to_thread(holder.rollback)
                await asyncio.to_thread(holder.close)
            with pytest.raises(asyncio.CancelledError):
                await append
            before = [text(m) for m in conversation.messages]
            await conversation.append(Message.user("three"))
            return before, [text(m) for m in conversation.messages]

    before, after = asyncio.run(main())
    assert before in (["one"], ["one", "two"])  # cancelled in the server or landed: settled by its id either way
    assert after == [*before, "three"]
    with Ledger.connect(url) as ledger:
        assert [text(m) for m in ledger.conversation("cancel").messages] == after


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    turns=st.lists(
        st.lists(st.text(st.characters(codec="utf-8"), min_size=1, max_size=20), min_size=1, max_size=3),
        min_size=1,
        max_size=5,
    )
)
def test_native_rows_equal_the_sync_apis(postgres_ledger_url: str, turns: list[list[str]]) -> None:
    sent, native, sync = native_and_sync(postgres_ledger_url, {}, turns, lambda ledger: _sender(ledger).sent)
    assert sent == len(turns) - 1  # every turn but the first (which creates the conversation)
    assert rows(native) == rows(sync)
