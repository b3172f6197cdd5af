"""Native appends on Redis: the one commit script sent with redis.asyncio from the loop, no worker hop."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.errors import ConfigurationError, SessionDeleted
from contextledger.stores.redis.asend import NativeSend
from tests.aio.native_rows import appends_without_a_hop, native_and_sync, rows, text
from tests.plugins.redis import purge


@pytest.fixture
def redis_ledger(redis_url: str, redis_key_prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """A fresh Redis ledger's URL and options."""
    yield redis_url, {"key_prefix": redis_key_prefix}
    purge(redis_url, redis_key_prefix)


def _sender(ledger: AsyncLedger) -> NativeSend:
    send = ledger._native  # the ledger's own sender: counted, never replaced
    assert isinstance(send, NativeSend)
    return send


@pytest.mark.parametrize("native", [True, None])  # None: the default, native where the store takes it
def test_a_native_append_sends_one_script_and_makes_no_hop(
    redis_ledger: tuple[str, dict[str, Any]], native: bool | None
) -> None:
    url, options = redis_ledger
    appends_without_a_hop(url, options, native, lambda ledger: _sender(ledger).sent)


@pytest.mark.parametrize("off", [{"native": False}, {"inline": False}])
def test_without_native_every_append_is_a_job_on_a_worker(
    redis_ledger: tuple[str, dict[str, Any]], off: dict[str, bool]
) -> None:
    url, options = redis_ledger

    async def main() -> None:
        async with await AsyncLedger.connect(url, **off, **options) as ledger:
            assert ledger._native is None
            conversation = await ledger.conversation("hops")
            await conversation.append(Message.user("first"))
            calls = ledger.runner.calls
            await conversation.append(Message.user("second"))
            assert ledger.runner.calls == calls + 1

    asyncio.run(main())


def test_concurrent_appends_keep_their_order(redis_ledger: tuple[str, dict[str, Any]]) -> None:
    url, options = redis_ledger

    async def main() -> list[str]:
        async with await AsyncLedger.connect(url, native=True, **options) as ledger:
            conversation = await ledger.conversation("order")
            await conversation.append(Message.user("m-start"))
            await asyncio.gather(*(conversation.append(Message.user(f"m{n}")) for n in range(30)))
            return [text(m) for m in conversation.messages]

    texts = asyncio.run(main())
    assert texts == ["m-start", *(f"m{n}" for n in range(30))]
    with Ledger.connect(url, **options) as ledger:
        assert [text(m) for m in ledger.conversation("order").messages] == texts


def test_a_conflict_from_another_writer_resolves_once_on_the_worker(redis_ledger: tuple[str, dict[str, Any]]) -> None:
    url, options = redis_ledger

    async def main() -> tuple[list[str], int]:
        async with await AsyncLedger.connect(url, native=True, **options) as ledger:
            conversation = await ledger.conversation("conflict")
            await conversation.append(Message.user("one"))
            with Ledger.connect(url, **options) as other:  # another process's writer moves the conversation on
                other.conversation("conflict").append(Message.user("two"))
            send = _sender(ledger)
            calls, sent = ledger.runner.calls, send.sent
            await conversation.append(Message.user("three"))
            assert send.sent == sent + 1
            assert ledger.runner.calls == calls + 1
            return [text(m) for m in conversation.messages], conversation.version

    texts, version = asyncio.run(main())
    assert texts == ["one", "two", "three"]
    with Ledger.connect(url, **options) as ledger:
        stored = ledger.conversation("conflict")
        assert [text(m) for m in stored.messages] == texts
        assert stored.version == version


def test_a_deleted_conversation_is_not_recreated(redis_ledger: tuple[str, dict[str, Any]]) -> None:
    url, options = redis_ledger

    async def main() -> None:
        async with await AsyncLedger.connect(url, native=True, **options) as ledger:
            conversation = await ledger.conversation("gone")
            await conversation.append(Message.user("one"))
            with Ledger.connect(url, **options) as other:
                other.delete_session("gone")
            with pytest.raises(SessionDeleted):
                await conversation.append(Message.user("two"))

    asyncio.run(main())


def test_native_is_refused_where_there_is_no_native_send(tmp_path: Any) -> None:
    async def main() -> None:
        with pytest.raises(ConfigurationError, match="native=True"):
            await AsyncLedger.connect(f"sqlite:///{tmp_path / 'n.db'}", native=True)
        with pytest.raises(ConfigurationError, match="native must be a bool or None"):
            await AsyncLedger.connect("memory://", native="yes")  # type: ignore[arg-type]

    asyncio.run(main())


def test_a_connection_killed_mid_append_resolves_exactly_once(redis_ledger: tuple[str, dict[str, Any]]) -> None:
    """The server drops the native connection while the script runs: the append lands once, settled by its id."""
    url, options = redis_ledger

    async def main() -> tuple[list[str], int]:
        async with await AsyncLedger.connect(url, native=True, **options) as ledger:
            conversation = await ledger.conversation("killed")
            await conversation.append(Message.user("one"))
            await conversation.append(Message.user("two"))  # the loop's connection exists now
            admin = redis.asyncio.Redis.from_url(url)
            try:
                # Writes paused on the server: the script is sent and waits while its connection is killed.
                await admin.client_pause(300, all=False)
                send = _sender(ledger)
                calls, sent = ledger.runner.calls, send.sent
                append = asyncio.ensure_future(conversation.append(Message.user("three")))
                await asyncio.sleep(0.1)
                killed = await admin.client_kill_filter(_type="normal", skipme=True)
                assert killed >= 1
                await append
                assert send.sent == sent + 1  # sent natively once ...
                assert ledger.runner.calls == calls + 1  # ... and settled on a worker by its changeset id
            finally:
                await admin.aclose()
            return [text(m) for m in conversation.messages], conversation.version

    texts, version = asyncio.run(main())
    assert texts == ["one", "two", "three"]
    with Ledger.connect(url, **options) as ledger:
        stored = ledger.conversation("killed")
        assert [text(m) for m in stored.messages] == texts
        assert stored.version == version


def test_a_cancelled_native_append_is_settled_before_the_cancellation(
    redis_ledger: tuple[str, dict[str, Any]],
) -> None:
    url, options = redis_ledger

    async def main() -> tuple[list[str], list[str]]:
        async with await AsyncLedger.connect(url, native=True, **options) as ledger:
            conversation = await ledger.conversation("cancel")
            await conversation.append(Message.user("one"))
            admin = redis.asyncio.Redis.from_url(url)
            try:
                await admin.client_pause(200, all=False)
                append = asyncio.ensure_future(conversation.append(Message.user("two")))
                await asyncio.sleep(0.05)
                append.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await append
            finally:
                await admin.aclose()
            before = [text(m) for m in conversation.messages]
            await conversation.append(Message.user("three"))
            return before, [text(m) for m in conversation.messages]

    before, after = asyncio.run(main())
    assert before == ["one", "two"]  # the cancelled send landed; settled exactly once by its id
    assert after == ["one", "two", "three"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(turns=st.lists(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=3), min_size=1, max_size=6))
def test_native_rows_equal_the_sync_apis(redis_ledger: tuple[str, dict[str, Any]], turns: list[list[str]]) -> None:
    url, options = redis_ledger
    sent, native, sync = native_and_sync(url, options, turns, lambda ledger: _sender(ledger).sent)
    assert sent == len(turns) - 1  # every turn but the first (which creates the conversation)
    assert rows(native) == rows(sync)
