"""``before_model_call`` inline: counted on the caller's thread when nothing plans on the call, never waiting.

On SQLite and in-memory stores (an ``AsyncLedger``'s ``inline`` default) a model call no
manager and no callback plans on runs as an inline append does: its count is committed
at once (or rides with the next write) on the loop's thread. Where the commit would
wait -- SQLite's write lock held by another connection -- nothing is committed, the call
stays counted once, and a worker commits it.
"""

from __future__ import annotations

import asyncio
import inspect
import sqlite3
import threading
from typing import Any

import pytest

from contextledger import Ledger, Message
from contextledger.aio import AsyncLedger
from contextledger.core.hooks import BeforeModelCallEvent
from contextledger.errors import ContextWindowOverflowError
from contextledger.managers import SlidingWindowConversationManager, SummarizingConversationManager
from contextledger.stores.sql import SQLStore
from tests.aio.heartbeat import heartbeat
from tests.aio.inline import asked, hops, inline_capable, one_call
from tests.aio.test_runner import statement_threads

Options = dict[str, Any]


def test_a_model_call_nothing_plans_on_is_counted_on_the_loop_thread_where_commits_do_not_wait(
    backend_url: tuple[str, Options], request: pytest.FixtureRequest
) -> None:
    url, options = backend_url
    inline_store = inline_capable(request)

    async def main() -> tuple[int, list[str]]:
        async with asked(url, options, "counted") as (ledger, conversation):
            loop_thread = threading.get_ident()
            for n in range(3):
                if isinstance(ledger.store, SQLStore):
                    with statement_threads(ledger.store) as threads:
                        _, counted = await hops(ledger, conversation.before_model_call())  # committed at once
                    # the count's commit: on the caller's thread (SQLite), on a worker's (PostgreSQL)
                    assert (threads == {loop_thread}) is inline_store
                else:
                    _, counted = await hops(ledger, conversation.before_model_call())
                assert counted == one_call(inline_store)
                assert conversation.model_call_count == n + 1
                await conversation.append(Message.assistant(f"a{n}"), Message.user(f"q{n + 1}"))
            # Deferred: nothing written until the next write, which carries the count.
            version = conversation.version
            calls = ledger.runner.calls
            await conversation.before_model_call(defer_count=True)
            assert (conversation.version, conversation.model_call_count) == (version, 4)
            assert ledger.runner.calls == calls + (0 if inline_store else 1)
            await conversation.append(Message.assistant("a3"))
            assert conversation.version == version + 1
            return conversation.model_call_count, [m.plain_text for m in conversation.messages]

    count, texts = asyncio.run(main())
    assert count == 4
    if url == "memory://":
        return  # a second memory:// is another, empty store
    with Ledger.connect(url, **options) as sync:
        restored = sync.conversation("counted")
        assert restored.model_call_count == 4
        assert [m.plain_text for m in restored.messages] == texts


def test_the_end_of_a_call_and_of_an_invocation_nothing_hears_run_inline_where_commits_do_not_wait(
    backend_url: tuple[str, Options], request: pytest.FixtureRequest
) -> None:
    """``after_model_call`` and ``after_invocation`` with nothing subscribed: no store work, inline on SQLite."""
    url, options = backend_url
    inline_store = inline_capable(request)

    async def main() -> None:
        async with asked(url, options, "ended") as (ledger, conversation):
            for n in range(3):
                await conversation.before_model_call(defer_count=True)
                retry, ended_call = await hops(ledger, conversation.after_model_call(None))
                assert retry is False  # nothing to retry
                await conversation.append(Message.assistant(f"a{n}"))
                _, ended_invocation = await hops(ledger, conversation.after_invocation())
                assert ended_call == ended_invocation == one_call(inline_store)
                await conversation.append(Message.user(f"q{n + 1}"))
            assert conversation.model_call_count == 3
            # An overflow nothing handles comes back from after_model_call, inline or not.
            overflow = ContextWindowOverflowError("the context overflowed")
            with pytest.raises(ContextWindowOverflowError):
                await conversation.after_model_call(overflow)

    asyncio.run(main())


def test_a_manager_s_reductions_commit_inline_and_a_callback_of_yours_runs_on_a_worker(tmp_path: Any) -> None:
    """A manager plans without I/O: its evictions commit on the loop; a callback of yours may block: a worker."""
    heard: list[bool] = []
    path = tmp_path / "planned.db"

    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{path}") as ledger:
            managed = await ledger.conversation("managed", manager=SlidingWindowConversationManager(window_size=4))
            await managed.append(Message.user("q0"))
            loop_thread = threading.get_ident()
            calls = ledger.runner.calls
            store = ledger.store
            assert isinstance(store, SQLStore)
            with statement_threads(store) as threads:
                for n in range(6):
                    await managed.before_model_call()
                    await managed.append(Message.assistant(f"a{n}"), Message.user(f"q{n + 1}"))
                    await managed.after_model_call(None)
                    await managed.after_invocation()  # evicts past the window of 4
            assert threads == {loop_thread}  # every statement, the evictions' too, on the loop's thread
            assert ledger.runner.calls == calls  # the model cycle and its evictions: no worker call
            assert len(managed.view) <= 5
            assert managed.model_call_count == 6

            hooked = await ledger.conversation("hooked")
            on_loop = lambda _event: heard.append(threading.get_ident() == loop_thread)  # noqa: E731
            hooked.hooks.add_callback(BeforeModelCallEvent, on_loop)
            await hooked.append(Message.user("hello"))
            calls, inline = ledger.runner.calls, ledger.runner.inline
            await hooked.before_model_call()
            assert (ledger.runner.calls, ledger.runner.inline) == (calls + 1, inline)
            calls, inline = ledger.runner.calls, ledger.runner.inline
            await hooked.after_model_call(None)  # nothing of yours hears this one: inline
            assert (ledger.runner.calls, ledger.runner.inline) == (calls, inline + 1)

    asyncio.run(main())
    assert heard == [False]  # your callback ran off the loop
    with Ledger.connect(f"sqlite:///{path}") as sync:
        restored = sync.conversation("managed")
        reductions = sync.reductions("managed")
        assert restored.model_call_count == 6
        assert len(reductions) >= 2
        assert {r.trigger for r in reductions} == {"end_of_invocation"}
        # each eviction recorded once: no entry evicted by two reductions
        evicted = [e for r in reductions for e in r.evicted]
        assert len(evicted) == len(set(evicted))


def test_a_summary_to_write_sends_the_call_to_a_worker_and_is_written_once(tmp_path: Any) -> None:
    """A summarizer may call a model: the reduction that needs one leaves the loop before it is called."""
    summarized: list[bool] = []

    async def main() -> None:
        async with await AsyncLedger.connect(f"sqlite:///{tmp_path / 'summary.db'}") as ledger:
            loop_thread = threading.get_ident()

            def summarizer(messages: list[Message]) -> str:
                summarized.append(threading.get_ident() == loop_thread)
                return f"summary of {len(messages)} messages"

            manager = SummarizingConversationManager(
                summary_ratio=0.5, preserve_recent_messages=2, summarizer=summarizer
            )
            conversation = await ledger.conversation("summarized", manager=manager)
            await conversation.append(*[Message.user(f"m{n} " + "words " * 20) for n in range(8)])
            await conversation.before_model_call()
            calls, inline = ledger.runner.calls, ledger.runner.inline
            overflow = ContextWindowOverflowError("the context overflowed")
            assert await conversation.after_model_call(overflow) is True  # reduced: call the model again
            assert (ledger.runner.calls, ledger.runner.inline) == (calls + 1, inline)  # on a worker, after the try
            assert conversation.view[0].kind == "summary"
            reductions = await ledger.reductions("summarized")
            assert len(reductions) == 1
            assert reductions[0].trigger == "reactive"

    asyncio.run(main())
    assert summarized == [False]  # written once, off the loop


@pytest.mark.parametrize("handed", [True, False])
def test_a_count_that_meets_a_held_write_lock_is_committed_once_on_a_worker(tmp_path: Any, handed: bool) -> None:
    """Another connection holds SQLite's write lock for 0.3 s: the loop keeps beating, the call is counted once."""
    path = tmp_path / "locked.db"
    lags: list[float] = []

    async def main() -> tuple[int, int]:
        async with await AsyncLedger.connect(f"sqlite:///{path}") as ledger:
            conversation = await ledger.conversation("locked")
            await conversation.append(Message.user("first"))
            holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            holder.execute("BEGIN IMMEDIATE")
            threading.Timer(0.3, holder.commit).start()
            calls, inline = ledger.runner.calls, ledger.runner.inline
            beat = asyncio.create_task(heartbeat(lags, 0.01))
            await asyncio.sleep(0.02)
            await conversation.before_model_call(handed=handed)  # tried inline, committed by a worker
            beat.cancel()
            holder.close()
            assert (ledger.runner.calls, ledger.runner.inline) == (calls + 1, inline)
            assert conversation.model_call_count == 1  # not counted again by the worker's run
            if not handed:
                await conversation.input_handed()  # inline: it sets a flag
            await conversation.before_model_call()  # the next call: a call of its own, inline again
            assert ledger.runner.inline == inline + (1 if handed else 2)
            return conversation.model_call_count, conversation.version

    count, version = asyncio.run(main())
    assert count == 2
    assert len(lags) >= 10  # the loop beat all through the 0.3 s the count waited
    assert max(lags) < 0.25
    with Ledger.connect(f"sqlite:///{path}") as sync:
        restored = sync.conversation("locked")
        assert (restored.model_call_count, restored.version) == (2, version)


def test_handing_a_prepared_call_over_is_inline_where_the_count_is(
    backend_url: tuple[str, Options], request: pytest.FixtureRequest
) -> None:
    """``input_handed`` only sets a flag: inline on SQLite and in memory; what commits after it is the next call's."""
    url, options = backend_url
    inline_store = inline_capable(request)

    async def main() -> None:
        async with asked(url, options, "handed") as (ledger, conversation):
            await conversation.before_model_call(handed=False)
            await conversation.append(Message.user("added before the call was handed"))
            _, counted = await hops(ledger, conversation.input_handed())
            assert counted == one_call(inline_store)
            await conversation.append(Message.assistant("a0"))
            await conversation.before_model_call()
            assert conversation.model_call_count == 2
            if url == "memory://":
                return
            # call 1 was given what was appended before it was handed; the answer is call 2's input
            with Ledger.connect(url, **options) as sync:
                first, second = sync.view_at("handed", model_call=1), sync.view_at("handed", model_call=2)
                assert [m.plain_text for m in first.messages] == ["q0", "added before the call was handed"]
                assert [m.plain_text for m in second.messages][-1] == "a0"

    asyncio.run(main())


@pytest.mark.parametrize(
    "name", ["append", "edit", "before_model_call", "input_handed", "after_model_call", "after_invocation"]
)
def test_the_methods_written_out_for_inline_take_the_sync_methods_parameters(name: str) -> None:
    """Written out (not made by ``coroutine_of``), they must still mirror the sync method, docstring included."""
    from contextledger import Conversation
    from contextledger.aio import AsyncConversation

    shell, sync = getattr(AsyncConversation, name), getattr(Conversation, name)
    assert inspect.signature(shell).parameters == inspect.signature(sync).parameters
    assert shell.__doc__ == sync.__doc__


@pytest.mark.parametrize(("handed", "defer"), [(True, False), (False, False), (True, True)])
def test_a_manager_s_reduction_that_meets_a_held_lock_commits_once_on_a_worker(
    tmp_path: Any, handed: bool, defer: bool
) -> None:
    """The per-turn eviction before a call, tried on the loop, meets a write lock: a worker commits it, once.

    Deferred, the eviction is the call's only commit: a reduction given up inline would go unmade.
    """
    path = tmp_path / "reduced.db"
    lags: list[float] = []

    async def main() -> tuple[int, int]:
        async with await AsyncLedger.connect(f"sqlite:///{path}") as ledger:
            manager = SlidingWindowConversationManager(window_size=4, per_turn=True)
            conversation = await ledger.conversation("reduced", manager=manager)
            await conversation.append(*[Message.user(f"m{n}") for n in range(7)])
            holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            holder.execute("BEGIN IMMEDIATE")
            threading.Timer(0.3, holder.commit).start()
            calls = ledger.runner.calls
            beat = asyncio.create_task(heartbeat(lags, 0.01))
            await asyncio.sleep(0.02)
            await conversation.before_model_call(handed=handed, defer_count=defer)  # evicts past the window
            beat.cancel()
            holder.close()
            assert ledger.runner.calls == calls + 1  # tried inline, committed by a worker
            assert len(conversation.view) <= 4
            if not handed:
                await conversation.input_handed()
            await conversation.before_model_call()  # the next call: inline again, counted once more
            assert ledger.runner.calls == calls + 1
            return conversation.model_call_count, len(await ledger.reductions("reduced"))

    count, reductions = asyncio.run(main())
    assert (count, reductions) == (2, 1)  # the eviction committed once, each call counted once
    assert len(lags) >= 10
    assert max(lags) < 0.25
    with Ledger.connect(f"sqlite:///{path}") as sync:
        assert sync.conversation("reduced").model_call_count == 2
