"""The async API itself: both APIs share every database, the loop is never blocked, the shells are thin."""

from __future__ import annotations

import asyncio
import gc
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import contextledger
from contextledger import (
    Conversation,
    Ledger,
    Message,
    SlidingWindowConversationManager,
    SummarizingConversationManager,
)
from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.aio.shell import synced
from contextledger.errors import ConfigurationError, LedgerClosed, ReductionFailed
from contextledger.integrations.openai_agents import LedgerRunHooks
from contextledger.stores.memory import MemoryStore
from tests.aio.heartbeat import Beat, beats
from tests.managers.helpers import assert_valid_view, chat, overflow, tool_turn

Options = dict[str, Any]


def ledgers(url: str, options: Options) -> tuple[Callable[[], Ledger], Callable[[], Awaitable[AsyncLedger]]]:
    """Openers of the sync and the async ledger on the same database (one shared store for memory)."""
    if url.startswith("memory"):
        shared = _Shared()
        return (lambda: Ledger(shared)), (lambda: _async_on(shared))
    return (lambda: Ledger.connect(url, **options)), (lambda: AsyncLedger.connect(url, **options))


class _Shared(MemoryStore):
    """One memory store both ledgers use in turn: closing a ledger must not end it."""

    def close(self) -> None:
        pass


async def _async_on(store: MemoryStore) -> AsyncLedger:
    return AsyncLedger(store)


def _manager() -> SummarizingConversationManager:
    return SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2)


def _write_sync(ledger: Ledger) -> Conversation:
    conv = ledger.conversation("cross", manager=_manager())
    turns = [m for i in range(3) for m in tool_turn(f"t{i}", "result " * 40)]
    conv.append(*turns)
    conv.pin(turns[4].message_id)
    conv.before_model_call()
    assert conv.after_model_call(overflow()) is True
    conv.append(*chat(2, prefix="after-"))
    conv.set_agent_state({"mood": "ok"})
    return conv


async def _write_async(ledger: AsyncLedger) -> AsyncConversation:
    conv = await ledger.conversation("cross", manager=_manager())
    turns = [m for i in range(3) for m in tool_turn(f"t{i}", "result " * 40)]
    await conv.append(*turns)
    await conv.pin(turns[4].message_id)
    await conv.before_model_call()
    assert await conv.after_model_call(overflow()) is True
    await conv.append(*chat(2, prefix="after-"))
    await conv.set_agent_state({"mood": "ok"})
    return conv


def _same(restored: Conversation | AsyncConversation, live: Conversation | AsyncConversation) -> None:
    assert list(restored.view.entries) == list(live.view.entries)
    assert restored.model_call_count == live.model_call_count == 1
    assert restored.version == live.version
    assert restored.agent_state == {"mood": "ok"}
    assert [e.pinned for e in restored.view].count(True) == 1
    assert restored.state.manager_state == live.state.manager_state


def test_written_by_the_sync_api_restored_exactly_by_the_async_one(backend_url: tuple[str, Options]) -> None:
    open_sync, open_async = ledgers(*backend_url)
    with open_sync() as ledger:
        live = _write_sync(ledger)
        history = ledger.history("cross")
        reductions = ledger.reductions("cross")

    async def restore() -> None:
        async with await open_async() as aledger:
            restored = await aledger.conversation("cross", manager=_manager())
            _same(restored, live)
            assert await aledger.history("cross") == history
            assert await aledger.reductions("cross") == reductions
            # and it goes on from there
            await restored.append(Message.user("still there?"))
            assert restored.version == live.version + 1

    asyncio.run(restore())


def test_written_by_the_async_api_restored_exactly_by_the_sync_one(backend_url: tuple[str, Options]) -> None:
    open_sync, open_async = ledgers(*backend_url)

    async def write() -> tuple[AsyncConversation, list[Any], list[Any]]:
        async with await open_async() as aledger:
            conv = await _write_async(aledger)
            return conv, await aledger.history("cross"), await aledger.evictions("cross")

    live, history, evictions = asyncio.run(write())
    assert evictions  # the reactive reduction evicted something
    with open_sync() as ledger:
        restored = ledger.conversation("cross", manager=_manager())
        _same(restored, live)
        assert ledger.history("cross") == history
        assert ledger.evictions("cross") == evictions
        assert_valid_view(restored)


def test_the_loop_is_never_blocked_while_50_conversations_commit(
    backend_url: tuple[str, Options], report: Callable[[str], None], request: pytest.FixtureRequest
) -> None:
    """A heartbeat every 5 ms measures the loop's lag while 50 conversations commit turns concurrently."""
    url, options = backend_url
    backend = request.node.callspec.params["backend_url"]
    conversations, turns = 50, 3

    async def main() -> tuple[list[Beat], int, tuple[int, float], bool]:
        async with await AsyncLedger.connect(url, **options) as ledger:
            found: list[Beat] = []
            stop = asyncio.Event()

            async def agent(conv: AsyncConversation) -> None:
                for t in range(turns):
                    await conv.append(Message.user(f"q{t}"))
                    await conv.before_model_call()
                    await conv.append(Message.assistant(f"a{t}"))
                    await conv.after_model_call()

            # Opened first (connections made, scripts loaded): the figure is about commits.
            # Opened and one commit each first: the set-up -- loading the scripts, the pool's
            # connections (redis-py reads its package metadata for each), on Cluster the
            # slot-tag table -- is paid once per process or pool, not per commit.
            opened = await asyncio.gather(
                *(
                    ledger.conversation(
                        f"lag-{n}", manager=SlidingWindowConversationManager(window_size=4, per_turn=True)
                    )
                    for n in range(conversations)
                )
            )
            await asyncio.gather(*(conv.append(Message.user("hello")) for conv in opened))
            # The test process's heap (every earlier test) is not this figure's: freeze it, so
            # a full garbage collection does not scan it in the middle of the measurement.
            gc.collect()
            gc.freeze()
            try:
                beat = asyncio.create_task(beats(found, 0.005, stop))
                await asyncio.sleep(0.02)  # a few beats before the load
                began = len(found), time.perf_counter()
                await asyncio.gather(*(agent(conv) for conv in opened))
                load = len(found) - began[0], time.perf_counter() - began[1]
                stop.set()
                await beat
            finally:
                gc.unfreeze()
            sessions = await ledger.sessions(limit=conversations + 1)
            return found, len(sessions), load, ledger.inline

    found, sessions, (during, seconds), inline = asyncio.run(main())
    assert sessions == conversations
    worst, held = max(b.lag for b in found), max(b.held for b in found)
    report(
        f"event-loop max lag, {conversations} conversations x {turns} turns, {backend}: {worst * 1000:.1f} ms, "
        f"of it held off the CPU at most {held * 1000:.1f} ms; load {seconds * 1000:.1f} ms, {during} beats in it"
    )
    # A lag is work, not waiting: on memory and SQLite an append runs on the loop's thread
    # (inline) and yields nowhere, so the 50 conversations' commits run back to back as
    # any code that awaits nothing does (on SQLite but for the few that go to a worker to
    # checkpoint the WAL); elsewhere each commit waits on a worker, and the loop beats
    # while it does. What a call that
    # waited on the loop's thread (a lock, a run of round trips) would add is time off
    # the CPU and off its run queue, which machine load and other tasks' work do not add.
    assert held < 0.25, [b for b in found if b.held >= 0.25]
    if not inline:
        assert during >= 3, (during, seconds)  # the loop ran while the commits were in flight
    assert len(found) >= 3


def test_concurrent_async_writers_on_one_conversation_lose_nothing(backend_url: tuple[str, Options]) -> None:
    url, options = backend_url

    async def main() -> list[str]:
        async with await AsyncLedger.connect(url, **options) as ledger:
            await (await ledger.conversation("race")).append(Message.user("seed"))

            async def writer(name: str) -> None:
                conv = await ledger.conversation("race", max_retries=200)
                for i in range(5):
                    await conv.append(Message.user(f"{name}-{i}"))

            await asyncio.gather(*(writer(f"w{n}") for n in range(4)))
            return [h.message.plain_text for h in await ledger.history("race")]

    texts = asyncio.run(main())
    assert sorted(texts) == sorted(["seed"] + [f"w{n}-{i}" for n in range(4) for i in range(5)])
    for n in range(4):
        assert [t for t in texts if t.startswith(f"w{n}-")] == [f"w{n}-{i}" for i in range(5)]


def test_a_coroutine_summarizer_is_awaited_by_the_async_api() -> None:
    seen: list[int] = []

    async def summarize(messages: list[Message]) -> str:
        await asyncio.sleep(0)
        seen.append(len(messages))
        return f"summary of {len(messages)} messages"

    async def main() -> str:
        ledger = AsyncLedger(MemoryStore())
        manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, summarizer=summarize)
        conv = await ledger.conversation("s", manager=manager)
        await conv.append(*chat(8))
        reduction = await conv.reduce()
        assert reduction is not None
        (summary,) = await ledger.summaries("s")
        return summary.content

    assert asyncio.run(main()).startswith("summary of")
    assert seen


def test_a_coroutine_summarizer_in_the_sync_api_fails_clearly_and_writes_nothing() -> None:
    async def summarize(messages: list[Message]) -> str:
        return "never"

    ledger = Ledger(MemoryStore())
    manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, summarizer=summarize)
    conv = ledger.conversation("s", manager=manager)
    conv.append(*chat(8))
    version = conv.version
    with pytest.raises(ReductionFailed, match=r"async API \(contextledger.aio\)"):
        conv.reduce()
    assert conv.version == version
    assert ledger.reductions("s") == []


def test_every_conversation_method_is_a_coroutine_and_every_property_a_property() -> None:
    members = {n: v for cls in reversed(Conversation.__mro__) for n, v in vars(cls).items()}  # with its bases'
    public = {n for n in members if not n.startswith("_")}
    for name in public:
        sync_attr = members[name]
        async_attr = getattr(AsyncConversation, name)
        if isinstance(sync_attr, property):
            assert isinstance(inspect.getattr_static(AsyncConversation, name), property | synced), name
        elif callable(sync_attr):
            conv = AsyncConversation.__new__(AsyncConversation)
            assert inspect.iscoroutinefunction(getattr(conv, name)), name
            assert async_attr.__doc__ == sync_attr.__doc__, name
    # and the ledger's queries
    for name in ("history", "evictions", "reductions", "summaries", "revisions", "sessions", "delete_session"):
        assert inspect.iscoroutinefunction(getattr(AsyncLedger(MemoryStore()), name)), name


def test_the_async_api_is_exported_lazily_at_the_top_level() -> None:
    assert contextledger.AsyncLedger is AsyncLedger
    assert contextledger.AsyncConversation is AsyncConversation


def test_after_async_with_every_call_raises_ledger_closed(tmp_path: Any) -> None:
    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path / 'l.db'}") as ledger:
            conv = await ledger.conversation("s")
            await conv.append(Message.user("hi"))
        with pytest.raises(LedgerClosed):
            await ledger.history("s")
        with pytest.raises(LedgerClosed):
            await conv.append(Message.user("again"))

    asyncio.run(main())


def test_ledger_run_hooks_take_an_async_conversation() -> None:
    async def main() -> int:
        conv = await AsyncLedger(MemoryStore()).conversation("s")
        hooks = LedgerRunHooks(conv)
        await hooks.conversation.before_model_call()
        await hooks.conversation.after_model_call(None)
        return conv.model_call_count

    assert asyncio.run(main()) == 1


def test_bad_urls_and_options_fail_as_in_the_sync_api(tmp_path: Any) -> None:
    async def main() -> None:
        with pytest.raises(contextledger.InvalidLedgerURL):
            await AsyncLedger.connect("mysql://nope")
        with pytest.raises(ConfigurationError):
            await AsyncLedger.connect(f"sqlite:///{tmp_path / 'x.db'}", no_such_option=1)
        ledger = AsyncLedger(MemoryStore())
        with pytest.raises(ConfigurationError):
            await ledger.conversation("")

    asyncio.run(main())
