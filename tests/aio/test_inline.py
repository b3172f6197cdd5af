"""Inline appends (the default on SQLite and in-memory stores): on the caller's thread, in order, never waiting."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import uuid
from collections.abc import Awaitable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextledger import Conversation, Ledger, Message
from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.core.hooks import MessageAddedEvent
from contextledger.errors import ConfigurationError, DuplicateEntry, InvalidMessage, LedgerClosed
from contextledger.stores.sql import SQLStore
from tests.aio.heartbeat import heartbeat
from tests.aio.inline import inline_capable
from tests.aio.test_runner import statement_threads
from tests.soak import examples

Options = dict[str, Any]


def test_an_inline_append_runs_on_the_loop_thread_with_no_hand_over_and_the_sync_api_restores_it(
    backend_url: tuple[str, Options], request: pytest.FixtureRequest
) -> None:
    url, options = backend_url
    if not inline_capable(request):
        pytest.skip("inline is taken by SQLite and in-memory stores only (refusal tested below)")

    async def main() -> list[Message]:
        ledger = await AsyncLedger.connect(url, **options)  # inline is the default on these stores
        try:
            conversation = await ledger.conversation("inline")
            await conversation.append(Message.user("warm up"))
            loop_thread = threading.get_ident()
            for n in range(5):
                calls, inline = ledger.runner.calls, ledger.runner.inline
                if isinstance(ledger.store, SQLStore):
                    with statement_threads(ledger.store) as threads:
                        await conversation.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
                    assert threads == {loop_thread}  # every statement of the commit on the caller's thread
                else:
                    await conversation.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
                assert (ledger.runner.calls, ledger.runner.inline) == (calls, inline + 1)  # no hand-over
            calls = ledger.runner.calls
            await conversation.before_model_call()  # nothing plans on it: inline too (tests/aio/test_inline_calls.py)
            assert ledger.runner.calls == calls
            await conversation.refresh()  # not a write: a job on a worker, as before
            assert ledger.runner.calls == calls + 1
            return conversation.messages
        finally:
            await ledger.close()

    written = asyncio.run(main())
    if url == "memory://":
        return  # a second memory:// is another, empty store
    with Ledger.connect(url, **options) as sync:
        assert sync.conversation("inline").messages == written
    assert [m.plain_text for m in written] == ["warm up"] + [t for n in range(5) for t in (f"q{n}", f"a{n}")]


def test_inline_is_refused_for_stores_that_wait_on_a_network_and_when_not_a_bool(
    backend_url: tuple[str, Options], request: pytest.FixtureRequest
) -> None:
    url, options = backend_url

    async def main() -> None:
        with pytest.raises(ConfigurationError, match="inline must be a bool or None"):
            await AsyncLedger.connect(url, inline=1, **options)  # type: ignore[arg-type]
        if inline_capable(request):
            return
        with pytest.raises(ConfigurationError, match="only SQLite and in-memory"):
            await AsyncLedger.connect(url, inline=True, **options)
        async with await AsyncLedger.connect(url, **options) as ledger:  # the store was closed, nothing leaked
            with pytest.raises(ConfigurationError, match="only SQLite and in-memory"):
                AsyncLedger(ledger.store, inline=True)
            with pytest.raises(ConfigurationError, match="only SQLite and in-memory"):
                await AsyncConversation.open(ledger.store, "refused", inline=True, runner=ledger.runner)

    asyncio.run(main())


def test_an_inline_append_waits_its_turn_behind_calls_running_in_its_conversation(tmp_path: Any) -> None:
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow(_conversation: Any) -> None:
        started.set()
        release.wait(10)
        order.append("slow")

    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path / 'turn.db'}", inline=True) as ledger:
            conversation = await ledger.conversation("turn")
            running = asyncio.ensure_future(conversation.run_sync(slow))
            while not started.is_set():
                await asyncio.sleep(0.001)
            calls = ledger.runner.calls
            appending = asyncio.ensure_future(conversation.append(Message.user("after the slow call")))
            await asyncio.sleep(0.05)
            assert not appending.done()  # queued in the lane: a worker runs it once the slow call ended
            release.set()
            await running
            await appending
            order.append("append")
            assert ledger.runner.calls == calls + 1
            assert [m.plain_text for m in conversation.messages] == ["after the slow call"]

    asyncio.run(main())
    assert order == ["slow", "append"]


def test_with_a_message_added_callback_an_append_runs_on_a_worker(tmp_path: Any) -> None:
    seen: list[tuple[str, bool]] = []

    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path / 'hooked.db'}", inline=True) as ledger:
            conversation = await ledger.conversation("hooked")
            loop_thread = threading.get_ident()
            conversation.hooks.add_callback(
                MessageAddedEvent,
                lambda event: seen.append((event.message.plain_text, threading.get_ident() == loop_thread)),
            )
            calls = ledger.runner.calls
            await conversation.append(Message.user("hello"))
            assert ledger.runner.calls == calls + 1

    asyncio.run(main())
    assert seen == [("hello", False)]  # the callback ran off the loop


def test_inline_errors_come_back_as_they_were_and_lose_nothing(tmp_path: Any) -> None:
    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path / 'errors.db'}", inline=True) as ledger:
            conversation = await ledger.conversation("errors")
            first = Message.user("first")
            await conversation.append(first)
            with pytest.raises(InvalidMessage):
                await conversation.append({"role": "user", "content": [{"text": float("nan")}]})
            with pytest.raises(DuplicateEntry):
                await conversation.append(first.model_copy(update={"content": [{"text": "another"}]}))
            # the lane was left after each failure: the next append still runs inline
            inline = ledger.runner.inline
            await conversation.append(Message.user("second"))
            assert ledger.runner.inline == inline + 1
            assert [m.plain_text for m in conversation.messages] == ["first", "second"]

    asyncio.run(main())


def test_after_close_an_inline_append_raises_ledger_closed(tmp_path: Any) -> None:
    async def main() -> None:
        ledger = await AsyncLedger.connect(f"sqlite:///{tmp_path / 'closed.db'}", inline=True)
        conversation = await ledger.conversation("closed")
        await ledger.close()
        with pytest.raises(LedgerClosed):
            await conversation.append(Message.user("too late"))

    asyncio.run(main())


def test_inline_is_off_by_default_for_stores_that_wait_on_a_network_and_off_when_asked(
    backend_url: tuple[str, Options], request: pytest.FixtureRequest
) -> None:
    url, options = backend_url

    async def main() -> None:
        for inline in (None, False):
            async with await AsyncLedger.connect(url, inline=inline, **options) as ledger:
                conversation = await ledger.conversation(f"hops-{inline}")
                await conversation.append(Message.user("warm up"))
                calls = ledger.runner.calls
                await conversation.append(Message.user("hello"))
                # None: inline on SQLite and in memory, sent from the loop on Redis and PostgreSQL
                # (test_native.py, test_native_postgres.py)
                native = request.node.callspec.params["backend_url"] in ("redis", "postgres")
                expected = 0 if inline is None and (inline_capable(request) or native) else 1
                assert ledger.runner.calls == calls + expected

    asyncio.run(main())


def test_an_inline_append_never_waits_for_a_write_lock_held_elsewhere(tmp_path: Any) -> None:
    """Another connection holds SQLite's write lock: the append waits on a worker, the loop keeps beating."""
    path = tmp_path / "locked.db"
    lags: list[float] = []

    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{path}") as ledger:
            conversation = await ledger.conversation("locked")
            await conversation.append(Message.user("first"))  # the conversation exists: appends take the hot path
            await conversation.append(Message.user("second"))
            holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            holder.execute("BEGIN IMMEDIATE")
            threading.Timer(0.3, holder.commit).start()  # the lock is released 0.3 s later
            calls, inline = ledger.runner.calls, ledger.runner.inline
            beat = asyncio.create_task(heartbeat(lags, 0.01))
            await asyncio.sleep(0.02)
            await conversation.append(Message.user("while locked"))
            beat.cancel()
            holder.close()
            assert (ledger.runner.calls, ledger.runner.inline) == (calls + 1, inline)  # it ran on a worker
            assert [m.plain_text for m in conversation.messages] == ["first", "second", "while locked"]

    asyncio.run(main())
    assert len(lags) >= 10  # the loop beat all through the 0.3 s the append waited
    assert max(lags) < 0.25
    with Ledger.connect(f"sqlite:///{path}") as sync:
        assert [m.plain_text for m in sync.conversation("locked").messages] == ["first", "second", "while locked"]


def test_an_inline_append_that_meets_a_conflict_retries_on_a_worker_and_loses_nothing(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'conflict.db'}"

    async def main() -> None:
        async with await AsyncLedger.connect(url) as ledger:
            conversation = await ledger.conversation("conflict")
            await conversation.append(Message.user("first"))
            with Ledger.connect(url) as other:
                other.conversation("conflict").append(Message.user("from elsewhere"))  # ours is now stale
            calls, inline = ledger.runner.calls, ledger.runner.inline
            await conversation.append(Message.user("ours"))
            # the stale commit was refused, and the retry would have slept on the loop: a worker retried it
            assert (ledger.runner.calls, ledger.runner.inline) == (calls + 1, inline)
            assert [m.plain_text for m in conversation.messages] == ["first", "from elsewhere", "ours"]

    asyncio.run(main())


def _append_text(conversation: Conversation, text: str) -> None:
    conversation.append(Message.user(text))


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(["append", "worker", "refresh"]), min_size=1, max_size=12))
def test_inline_and_worker_calls_made_at_once_on_one_conversation_keep_their_order(
    tmp_path: Any, kinds: list[str]
) -> None:
    """Calls started together, some inline, some on workers: messages are stored in the order the calls were made."""
    session = f"order-{uuid.uuid4().hex[:8]}"

    async def main() -> tuple[list[str], list[str], int]:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path / 'order.db'}") as ledger:
            conversation = await ledger.conversation(session)
            await conversation.append(Message.user("start"))
            inline = ledger.runner.inline
            calls: list[Awaitable[Any]] = []
            for n, kind in enumerate(kinds):
                if kind == "append":
                    calls.append(conversation.append(Message.user(f"{n}")))
                elif kind == "worker":  # an append that is a job on a worker
                    calls.append(conversation.run_sync(_append_text, f"{n}"))
                else:
                    calls.append(conversation.refresh())
            await asyncio.gather(*calls)
            texts = [m.plain_text for m in conversation.messages][1:]
            with Ledger.connect(f"sqlite:///{tmp_path / 'order.db'}") as sync:
                stored = [m.plain_text for m in sync.conversation(session).messages][1:]
            return texts, stored, ledger.runner.inline - inline

    texts, stored, inline = asyncio.run(main())
    expected = [f"{n}" for n, kind in enumerate(kinds) if kind != "refresh"]
    assert texts == stored == expected
    # the first call always finds the lane idle: an append there runs inline
    assert inline >= (1 if kinds[0] == "append" else 0)


def test_inline_appends_in_a_row_send_no_busy_timeout_switch_of_their_own(tmp_path: Any) -> None:
    """The held connection's busy timeout stays at 0 between inline appends: each sends its commit's statements only."""
    from tests.sql.helpers import trace_sqlite

    async def main() -> list[str]:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path / 'row.db'}") as ledger:
            conversation = await ledger.conversation("row")
            await conversation.append(Message.user("first"))  # created: later appends take the hot path
            await conversation.append(Message.user("second"))  # the first inline begin sets the timeout to 0
            store = ledger.store
            assert isinstance(store, SQLStore)
            inline = ledger.runner.inline
            with trace_sqlite(store) as captured:
                for n in range(3):
                    await conversation.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
            assert ledger.runner.inline == inline + 3
            return [" ".join(s.sql.split()[:2]) for s in captured.statements]

    sent = asyncio.run(main())
    assert [s for s in sent if s.startswith("PRAGMA")] == []
    assert sent.count("BEGIN IMMEDIATE") == sent.count("COMMIT") == 3
