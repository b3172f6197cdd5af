"""The metrics, read back with the SDK's in-memory metric reader."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from contextledger import Conversation, Message
from contextledger.aio import AsyncLedger
from contextledger.errors import CommitOutcomeUnknown
from contextledger.managers import SlidingWindowConversationManager
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from tests.plugins.faults import lossy_memory
from tests.telemetry.conftest import Recorded, attrs


def test_commit_and_restore_latency_per_backend(store: CompleteStore, otel: Recorded) -> None:
    chat = Conversation(store, "s")
    for n in range(3):
        chat.append(Message.user(f"q{n}"))
    Conversation(store, "s")
    [commits] = otel.points("contextledger.commit.duration")
    backend = attrs(commits)["contextledger.backend"]
    assert attrs(commits) == {"contextledger.backend": backend, "contextledger.commit.outcome": "committed"}
    assert commits.count == 3
    assert commits.sum > 0
    [restores] = otel.points("contextledger.restore.duration")
    assert attrs(restores) == {"contextledger.backend": backend}
    assert restores.count == 2


def test_reductions_by_trigger_and_strategy_and_the_tokens_they_evicted(otel: Recorded) -> None:
    chat = Conversation(MemoryStore(), "s", manager=SlidingWindowConversationManager(window_size=2))
    chat.append(Message.user("q0"), Message.assistant("a0"), Message.user("q1"))
    before = {entry.entry_id: entry.tokens for entry in chat.view}
    reduction = chat.reduce()
    assert reduction is not None
    by = {"contextledger.reduction.trigger": "manual", "contextledger.reduction.strategy": "sliding_window"}
    assert otel.total("contextledger.reductions", **by) == 1
    assert otel.total("contextledger.tokens.evicted", **by) == sum(before[i] for i in reduction.evicted) > 0
    # a host's own reduction (applied as given) counts too, under its strategy
    chat.apply_plan(lambda view: None, trigger="manual")
    assert otel.total("contextledger.reductions") == 1


def test_tokens_in_the_window_after_each_model_call(otel: Recorded) -> None:
    chat = Conversation(MemoryStore(), "s")
    seen = []
    for n in range(3):
        chat.append(Message.user(f"question {n}"))
        chat.before_model_call()
        chat.after_model_call()
        seen.append(chat.view.tokens)
        chat.append(Message.assistant(f"answer {n}"))
    [point] = otel.points("contextledger.window.tokens")
    assert point.count == 3
    assert point.sum == sum(seen)
    assert point.max == seen[-1]


def test_conflicts_and_retries_are_counted(otel: Recorded) -> None:
    store = MemoryStore()
    first, second = Conversation(store, "s"), Conversation(store, "s")
    first.append(Message.user("one"))
    second.append(Message.user("two"))
    assert otel.total("contextledger.commit.conflicts", **{"contextledger.backend": "memory"}) == 1
    assert otel.total("contextledger.commit.retries", **{"contextledger.backend": "memory"}) == 1
    outcomes = {attrs(p)["contextledger.commit.outcome"]: p.count for p in otel.points("contextledger.commit.duration")}
    assert outcomes == {"committed": 2, "conflict": 1}


def test_an_unknown_outcome_is_counted_and_its_settlement_shown(otel: Recorded) -> None:
    lossy = lossy_memory()
    chat = Conversation(lossy.store, "s")
    chat.append(Message.user("kept"))
    lossy.arm(apply=True, then_down=True)  # applied, the reply lost, then the store unreachable
    with pytest.raises(CommitOutcomeUnknown):
        chat.append(Message.user("maybe"))
    lossy.restore()
    chat.append(Message.user("next"))  # settles the unknown commit first
    assert [m.content[0]["text"] for m in chat.messages] == ["kept", "maybe", "next"]
    assert otel.total("contextledger.commit.outcome_unknown", **{"contextledger.backend": "memory"}) == 1
    unknown, settled = [s for s in otel.spans("contextledger.commit")][1:3]
    assert attrs(unknown)["contextledger.commit.outcome_unknown"] is True
    assert unknown.status.status_code.name == "ERROR"
    assert attrs(settled)["contextledger.commit.settled"] == "applied"
    assert attrs(settled)["contextledger.commit.changeset_id"] == attrs(unknown)["contextledger.commit.changeset_id"]


def test_a_lost_reply_read_back_is_noted_on_its_commit_span(otel: Recorded) -> None:
    lossy = lossy_memory()
    chat = Conversation(lossy.store, "s")
    lossy.arm(apply=True)
    chat.append(Message.user("once"))
    [span] = otel.spans("contextledger.commit")
    assert attrs(span)["contextledger.commit.reply_lost"] == "applied"
    assert attrs(span)["contextledger.commit.outcome"] == "committed"
    lossy.arm(apply=False)  # the request never arrived: read back, not applied, sent again
    chat.append(Message.user("twice sent"))
    assert attrs(otel.spans("contextledger.commit")[-1])["contextledger.commit.reply_lost"] == "not_applied"
    assert [m.content[0]["text"] for m in chat.messages] == ["once", "twice sent"]


def test_an_inline_async_append_that_would_wait_is_its_own_outcome_not_an_error(otel: Recorded, tmp_path: Path) -> None:
    path = tmp_path / "locked.db"

    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{path}") as ledger:  # inline appends: the default here
            chat = await ledger.conversation("s")
            await chat.append(Message.user("first"))
            holder = sqlite3.connect(path, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            task = asyncio.ensure_future(chat.append(Message.user("second")))  # inline: finds the lock taken
            await asyncio.sleep(0.1)
            holder.commit()
            holder.close()
            await task
            assert [m.plain_text for m in chat.messages] == ["first", "second"]

    asyncio.run(main())
    outcomes = [attrs(s)["contextledger.commit.outcome"] for s in otel.spans("contextledger.commit")]
    assert outcomes == ["committed", "would_wait", "committed"]
    waited = otel.spans("contextledger.commit")[1]
    assert waited.status.status_code.name != "ERROR"


def test_a_native_async_append_on_redis_has_its_commit_span(
    otel: Recorded, redis_url: str, redis_key_prefix: str
) -> None:
    from contextledger import Ledger
    from tests.plugins.redis import purge

    async def main() -> None:
        async with await AsyncLedger.connect(redis_url, native=True, key_prefix=redis_key_prefix) as ledger:
            chat = await ledger.conversation("traced")
            await chat.append(Message.user("first"))  # the first commit: on a worker
            calls = ledger.runner.calls
            await chat.append(Message.user("second"))  # native: sent from the loop
            assert ledger.runner.calls == calls
            with Ledger.connect(redis_url, key_prefix=redis_key_prefix) as other:  # another writer moves it on
                other.conversation("traced").append(Message.user("third"))
            await chat.append(Message.user("fourth"))  # refused natively, sent again on a worker
            assert [m.plain_text for m in chat.messages] == ["first", "second", "third", "fourth"]

    try:
        asyncio.run(main())
    finally:
        purge(redis_url, redis_key_prefix)
    mine = [s for s in otel.spans("contextledger.commit") if attrs(s)["gen_ai.conversation.id"] == "traced"]
    outcomes = [attrs(s)["contextledger.commit.outcome"] for s in mine]
    # first (worker), second (native), the other writer's, then fourth: refused natively, a conflict and a re-plan
    assert outcomes == ["committed", "committed", "committed", "would_wait", "conflict", "committed"]
    assert attrs(mine[1])["contextledger.version"] == 2
    assert attrs(mine[1])["contextledger.commit.appended"] == 1
    assert all(s.status.status_code.name != "ERROR" for s in mine)


def test_a_native_async_append_on_postgres_has_its_commit_span(otel: Recorded, postgres_ledger_url: str) -> None:
    from contextledger import Ledger

    url = postgres_ledger_url

    async def main() -> None:
        async with await AsyncLedger.connect(url, native=True) as ledger:
            chat = await ledger.conversation("traced")
            await chat.append(Message.user("first"))  # the first commit: on a worker
            calls = ledger.runner.calls
            await chat.append(Message.user("second"))  # native: sent from the loop
            assert ledger.runner.calls == calls
            with Ledger.connect(url) as other:  # another writer moves it on
                other.conversation("traced").append(Message.user("third"))
            await chat.append(Message.user("fourth"))  # refused natively, sent again on a worker
            assert [m.plain_text for m in chat.messages] == ["first", "second", "third", "fourth"]

    asyncio.run(main())
    mine = [s for s in otel.spans("contextledger.commit") if attrs(s)["gen_ai.conversation.id"] == "traced"]
    outcomes = [attrs(s)["contextledger.commit.outcome"] for s in mine]
    # first (worker), second (native), the other writer's, then fourth: refused natively, a conflict and a re-plan
    assert outcomes == ["committed", "committed", "committed", "would_wait", "conflict", "committed"]
    assert attrs(mine[1])["contextledger.version"] == 2
    assert attrs(mine[1])["contextledger.commit.appended"] == 1
    assert all(s.status.status_code.name != "ERROR" for s in mine)


def test_an_inline_reduction_that_would_wait_is_its_own_outcome_not_a_failure(otel: Recorded, tmp_path: Path) -> None:
    """A manager's eviction tried on the loop meets a held lock: a ``would_wait`` span, then the worker's commit."""
    path = tmp_path / "reduced.db"

    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{path}") as ledger:
            manager = SlidingWindowConversationManager(window_size=4, per_turn=True)
            chat = await ledger.conversation("s", manager=manager)
            await chat.append(*[Message.user(f"m{n}") for n in range(7)])
            holder = sqlite3.connect(path, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            task = asyncio.ensure_future(chat.before_model_call())  # inline: its eviction finds the lock taken
            await asyncio.sleep(0.1)
            holder.commit()
            holder.close()
            await task
            assert len(chat.view) <= 4

    asyncio.run(main())
    spans = otel.spans("contextledger.reduction")
    assert [attrs(s)["contextledger.reduction.outcome"] for s in spans] == ["would_wait", "committed"]
    assert spans[0].status.status_code.name != "ERROR"


def test_an_overflow_reduced_on_a_worker_after_an_inline_try_records_its_window_once(
    otel: Recorded, tmp_path: Path
) -> None:
    """The reactive reduction needs a summary: tried on the loop, run again on a worker; one window point."""
    from contextledger.errors import ContextWindowOverflowError
    from contextledger.managers import SummarizingConversationManager

    async def main() -> int:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path / 'overflow.db'}") as ledger:
            manager = SummarizingConversationManager(
                summary_ratio=0.5, preserve_recent_messages=2, summarizer=lambda ms: f"{len(ms)} messages"
            )
            chat = await ledger.conversation("s", manager=manager)
            await chat.append(*[Message.user(f"m{n} " + "words " * 20) for n in range(8)])
            await chat.before_model_call()
            ended = chat.view.tokens  # the window the call ended with, before the reduction
            calls = ledger.runner.calls
            assert await chat.after_model_call(ContextWindowOverflowError("overflowed")) is True
            assert ledger.runner.calls == calls + 1  # the summary was written on a worker
            return ended

    ended = asyncio.run(main())
    [point] = otel.points("contextledger.window.tokens")
    assert (point.count, point.sum) == (1, ended)
