"""Any loop, any thread: one ledger, conversation or OpenAI session used from threads that each run their own loop.

The pattern of ``Runner.run_sync`` in a threaded web server: every request thread calls
``asyncio.run``. Each case is bounded in time (a hang fails the test, it does not stall
the suite) and runs on every backend.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
from agents.memory import SQLiteSession

from contextledger import Ledger, Message, SlidingWindowConversationManager
from contextledger.aio import AsyncConversation, AsyncLedger
from contextledger.integrations.openai_agents import LedgerSession
from contextledger.stores.memory import MemoryStore

Options = dict[str, Any]
THREADS = 5


class _Shared(MemoryStore):
    """One memory store for the async ledger and the sync reader of a test."""

    def close(self) -> None:
        pass


def _in_threads(threads: int, job: Callable[[int], Coroutine[Any, Any, None]], timeout: float = 60) -> None:
    """Run ``asyncio.run(job(n))`` on ``threads`` threads at once; fail on an error or a thread still running."""
    errors: list[BaseException] = []
    start = threading.Barrier(threads)

    def body(n: int) -> None:
        start.wait()
        try:
            asyncio.run(job(n))
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=body, args=(n,), daemon=True) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout)
    assert not [w for w in workers if w.is_alive()], "a thread hung"
    assert not errors, errors


@pytest.fixture
def opened(backend_url: tuple[str, Options]) -> Iterator[tuple[AsyncLedger, Callable[[], Ledger]]]:
    """An AsyncLedger opened on the main thread's own loop, and an opener of a sync reader of the same database."""
    url, options = backend_url
    if url.startswith("memory"):
        shared = _Shared()
        ledger = AsyncLedger(shared)
        yield ledger, lambda: Ledger(shared)
    else:
        ledger = asyncio.run(AsyncLedger.connect(url, **options))
        yield ledger, lambda: Ledger.connect(url, **options)
    asyncio.run(ledger.close())


def _item(thread: int, n: int) -> Any:  # an SDK input item (EasyInputMessageParam)
    return {"role": "user", "content": f"thread {thread} item {n}"}


@pytest.mark.timeout(120)
def test_ten_add_items_from_five_threads_each_with_its_own_loop_store_all_ten_as_the_sdk_session_does(
    opened: tuple[AsyncLedger, Callable[[], Ledger]], tmp_path: Path
) -> None:
    ledger, reader = opened  # opened on another loop (the main thread's, now closed)
    ours = LedgerSession("shared", ledger=ledger)
    theirs = SQLiteSession("shared", tmp_path / "sdk.db")

    async def job(thread: int) -> None:
        for n in range(2):
            await ours.add_items([_item(thread, n)])
            await theirs.add_items([_item(thread, n)])

    _in_threads(THREADS, job)
    stored: list[Any] = asyncio.run(ours.get_items())
    reference: list[Any] = asyncio.run(theirs.get_items())
    assert len(reference) == 2 * THREADS  # the SDK's own session
    assert sorted(i["content"] for i in stored) == sorted(i["content"] for i in reference)
    for thread in range(THREADS):  # each thread's items in its order
        mine = [i["content"] for i in stored if i["content"].startswith(f"thread {thread} ")]
        assert mine == [f"thread {thread} item 0", f"thread {thread} item 1"]
    with reader() as sync:  # and a fresh reader sees them all, each once
        history = sync.history("shared")
        assert len(history) == 2 * THREADS
        assert len({h.message.message_id for h in history}) == 2 * THREADS


@pytest.mark.timeout(120)
def test_a_session_opened_from_a_url_by_racing_loops_opens_once_and_keeps_every_item(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    session = LedgerSession("race", url=url, manager=SlidingWindowConversationManager(window_size=100))
    conversations: list[AsyncConversation] = []

    async def job(thread: int) -> None:
        conversations.append(await session.conversation())  # the first call of each loop races to open
        await session.add_items([_item(thread, 0)])
        await (await session.conversation()).before_model_call()  # a model call, counted by the conversation

    _in_threads(THREADS, job)
    assert len({id(c) for c in conversations}) == 1  # one conversation, whoever opened it
    assert len(asyncio.run(session.get_items())) == THREADS
    asyncio.run(session.close())
    with Ledger.connect(url) as sync:
        conversation = sync.conversation("race")
        assert len(conversation.view) == THREADS
        assert conversation.model_call_count == THREADS


@pytest.mark.timeout(120)
def test_one_async_conversation_from_several_loops_counts_and_stores_exactly(
    opened: tuple[AsyncLedger, Callable[[], Ledger]],
) -> None:
    ledger, reader = opened
    conversation = asyncio.run(ledger.conversation("loops", manager=SlidingWindowConversationManager(window_size=6)))
    turns = 4

    async def job(thread: int) -> None:
        for n in range(turns):
            await conversation.append(Message.user(f"t{thread} q{n}"))
            await conversation.before_model_call()
            await conversation.append(Message.assistant(f"t{thread} a{n}"))
            await conversation.after_model_call()
            assert await ledger.sessions(limit=10)  # the ledger's queries from every loop too

    _in_threads(THREADS, job)
    assert conversation.model_call_count == THREADS * turns
    with reader() as sync:
        restored = sync.conversation("loops", manager=SlidingWindowConversationManager(window_size=6))
        assert restored.model_call_count == THREADS * turns
        assert list(restored.view.entries) == list(conversation.view.entries)
        texts = [h.message.plain_text for h in sync.history("loops")]
        assert sorted(texts) == sorted(f"t{t} {k}{n}" for t in range(THREADS) for n in range(turns) for k in "qa")


@pytest.mark.timeout(60)
class _GatedStore(MemoryStore):
    """A memory store whose commits to session ``order`` wait until the gate opens (at most 10 s)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def commit(self, changeset: Any) -> int:
        if changeset.session_id == "order":
            self.gate.wait(10)
        return super().commit(changeset)


def test_calls_of_one_conversation_run_in_the_order_they_were_made_and_hold_no_thread_while_waiting() -> None:
    async def main() -> tuple[list[str], int]:
        # Every append on a worker (inline=False): on a memory store an append runs on the
        # loop's own thread by default, and then no worker is taken at all.
        store = _GatedStore()
        ledger = AsyncLedger(store, workers=2, inline=False)
        conversation = await ledger.conversation("order")
        other = await ledger.conversation("other")
        # 50 calls queued on one conversation, the first held on its worker by the gate:
        # with two workers the other conversation still gets a thread at once (the queued
        # calls wait in the lane, not on a worker). Starved, it would wait for the gate.
        queued = [asyncio.ensure_future(conversation.append(Message.user(f"m{n}"))) for n in range(50)]
        try:
            await asyncio.wait_for(other.append(Message.user("not starved")), timeout=5)
            done_before = sum(task.done() for task in queued)
        finally:
            store.gate.set()
        await asyncio.gather(*queued)
        await ledger.close()
        return [m.plain_text for m in conversation.messages], done_before

    texts, done_before = asyncio.run(main())
    assert texts == [f"m{n}" for n in range(50)]
    assert done_before == 0  # the other conversation did not wait behind any of them
