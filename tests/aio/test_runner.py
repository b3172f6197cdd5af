"""The runner under the async API: one hop per call, cancellation, order, the caller's loop and context."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

from contextledger import Message, SummarizingConversationManager
from contextledger.aio import AsyncLedger, Runner
from contextledger.aio.runner import Lane
from contextledger.errors import ConfigurationError, LedgerClosed
from contextledger.stores.memory import MemoryStore
from contextledger.stores.sql import SQLStore
from tests.managers.helpers import chat

Options = dict[str, Any]


@contextmanager
def statement_threads(store: Any) -> Iterator[set[int]]:
    """The threads that ran any SQL statement on ``store`` in the block (SQLite: the driver's own trace)."""
    seen: set[int] = set()
    engine = store.engine

    def traced(_statement: str) -> None:
        seen.add(threading.get_ident())

    def on_connect(dbapi_connection: Any, _record: Any) -> None:
        if hasattr(dbapi_connection, "set_trace_callback"):
            dbapi_connection.set_trace_callback(traced)

    def on_execute(*_args: Any) -> None:
        seen.add(threading.get_ident())

    engine.pool.dispose()  # every connection made from here on is traced
    event.listen(engine, "connect", on_connect)
    sqlite = engine.dialect.name == "sqlite"
    if sqlite:  # and the connection a SQLite store holds for its hot-path commits (not pooled)
        with store._held_writer().driver_connection() as held:
            held.set_trace_callback(traced)
    else:  # a statement listener, which SQLite's hot paths would honour by leaving them
        event.listen(engine, "before_cursor_execute", on_execute)
    try:
        yield seen
    finally:
        event.remove(engine, "connect", on_connect)
        if sqlite:
            with store._held_writer().driver_connection() as held:
                held.set_trace_callback(None)
        else:
            event.remove(engine, "before_cursor_execute", on_execute)


def test_one_hop_per_call_and_every_statement_of_a_commit_on_that_one_worker(
    backend_url: tuple[str, Options],
) -> None:
    url, options = backend_url

    async def main() -> None:
        # inline=False: every call a job on a worker (tests/aio/test_inline.py holds inline appends to no hop at all)
        async with await AsyncLedger.connect(url, inline=False, **options) as ledger:
            conversation = await ledger.conversation("hops")
            await conversation.append(Message.user("warm up"))  # the engine is built, the schema read
            loop_thread = threading.get_ident()
            for n in range(5):
                before = ledger.runner.calls
                if isinstance(ledger.store, SQLStore):
                    with statement_threads(ledger.store) as threads:
                        await conversation.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
                    assert len(threads) == 1, threads  # one worker ran the whole unit of work
                    assert loop_thread not in threads
                else:
                    await conversation.append(Message.user(f"q{n}"), Message.assistant(f"a{n}"))
                assert ledger.runner.calls == before + 1  # one hand-over for the whole call
            before = ledger.runner.calls
            await conversation.before_model_call()
            await ledger.history("hops")
            assert ledger.runner.calls == before + 2

    asyncio.run(main())


def test_a_call_cancelled_before_it_started_never_runs() -> None:
    ran: list[str] = []
    release = threading.Event()

    async def main() -> None:
        runner, lane = Runner(workers=1), Lane()
        first = asyncio.ensure_future(runner.run_in(lane, release.wait, 10))
        second = asyncio.ensure_future(runner.run_in(lane, ran.append, "second"))
        await asyncio.sleep(0.05)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await second  # at once: it waited behind the first
        release.set()
        assert await first is True
        await runner.run(ran.append, "after")
        assert runner.cancelled_waiting == 1
        runner.close()

    asyncio.run(main())
    assert ran == ["after"]


def test_a_call_cancelled_while_running_ends_first_then_the_task_is_cancelled() -> None:
    finished: list[float] = []

    def slow() -> None:
        time.sleep(0.3)
        finished.append(time.monotonic())

    async def main() -> float:
        runner = Runner()
        task = asyncio.ensure_future(runner.run(slow))
        await asyncio.sleep(0.05)
        task.cancel()
        await asyncio.sleep(0.01)
        task.cancel()  # a second cancellation waits too
        with pytest.raises(asyncio.CancelledError):
            await task
        seen = time.monotonic()
        assert runner.cancelled_running == 1
        runner.close()
        return seen

    seen = asyncio.run(main())
    assert finished
    assert finished[0] <= seen  # the call ended before the task saw its cancellation


def test_a_coroutine_summarizer_is_cancelled_with_its_caller_and_nothing_is_committed() -> None:
    state: dict[str, Any] = {}

    async def summarize(messages: list[Message]) -> str:
        state["loop"] = asyncio.get_running_loop()
        try:
            await asyncio.sleep(30)  # a model call that would take long
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise
        return "never"

    async def main() -> None:
        ledger = AsyncLedger(MemoryStore())
        manager = SummarizingConversationManager(summary_ratio=0.5, preserve_recent_messages=2, summarizer=summarize)
        conversation = await ledger.conversation("s", manager=manager)
        await conversation.append(*chat(8))
        version = conversation.version
        task = asyncio.ensure_future(conversation.reduce())
        while "loop" not in state:
            await asyncio.sleep(0.01)
        assert state["loop"] is asyncio.get_running_loop()  # the summarizer runs on the caller's loop
        start = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert time.monotonic() - start < 5  # not the summarizer's 30 s
        assert state["cancelled"] is True
        assert conversation.version == version
        assert await ledger.reductions("s") == []
        await ledger.close()

    asyncio.run(main())


def test_the_callers_context_reaches_the_call_and_errors_come_back_as_they_were() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    def read() -> str:
        return var.get()

    def fail() -> None:
        raise KeyError("from the worker")

    async def main() -> None:
        runner = Runner()
        var.set("the caller's")
        assert await runner.run(read) == "the caller's"
        with pytest.raises(KeyError, match="from the worker"):
            await runner.run(fail)
        runner.close()
        with pytest.raises(LedgerClosed):
            await runner.run(read)

    asyncio.run(main())


def test_a_slow_call_does_not_block_the_loop() -> None:
    async def main() -> float:
        runner = Runner()
        lags: list[float] = []
        task = asyncio.ensure_future(runner.run(time.sleep, 0.3))
        while not task.done():
            start = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - start - 0.005)
        runner.close()
        return max(lags)

    assert asyncio.run(main()) < 0.1  # the loop kept beating through the 0.3 s call


@pytest.mark.parametrize("workers", [0, -1, 1.5, True, "4"])
def test_workers_must_be_a_positive_int(workers: Any) -> None:
    with pytest.raises(ConfigurationError, match="workers"):
        Runner(workers)
    with pytest.raises(ConfigurationError, match="workers"):
        AsyncLedger(MemoryStore(), workers=workers)


def test_when_no_thread_can_start_calls_fail_at_once_instead_of_hanging(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextledger.aio.runner as runner_module

    class _Unstartable:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def start(self) -> None:
            raise RuntimeError("can't start new thread")

    class _NoThreads:
        Lock = threading.Lock
        Thread = _Unstartable

    monkeypatch.setattr(runner_module, "threading", _NoThreads)

    async def main() -> None:
        runner, lane = Runner(), Lane()
        first = asyncio.ensure_future(runner.run_in(lane, time.sleep, 0))
        second = asyncio.ensure_future(runner.run_in(lane, time.sleep, 0))  # waits behind the first
        for call in (first, second):
            with pytest.raises(RuntimeError, match="can't start new thread"):
                await asyncio.wait_for(call, 5)

    asyncio.run(main())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_its_calls_on_its_own_threads_and_leaves_the_parents_alone() -> None:
    runner = Runner(workers=2)

    async def call(value: int) -> int:
        return await runner.run(lambda: value)

    assert asyncio.run(call(1)) == 1  # the parent has an idle worker, waiting on its pipe
    parent_threads = {t.ident for t in threading.enumerate()}
    pid = os.fork()
    if pid == 0:  # the child: a call must run on a thread of its own, not wake the parent's
        code = 1
        try:
            with contextlib.suppress(BaseException):
                code = 0 if asyncio.run(asyncio.wait_for(call(2), 10)) == 2 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    ident = asyncio.run(asyncio.wait_for(runner.run(threading.get_ident), 10))
    assert ident in parent_threads  # the parent's idle worker was not woken (and ended) by the child
    runner.close()


def test_a_loop_that_watches_no_pipe_is_woken_by_call_soon_threadsafe(monkeypatch: pytest.MonkeyPatch) -> None:
    def cannot(*_args: Any) -> None:
        raise NotImplementedError  # as the proactor loop on Windows

    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        monkeypatch.setattr(loop, "add_reader", cannot)
        runner = Runner(workers=3)
        try:
            one = await asyncio.wait_for(runner.run(lambda: 1), 10)
            many = await asyncio.wait_for(asyncio.gather(*(runner.run(time.sleep, 0.01) for _ in range(9))), 10)
            return [one, len(many)]
        finally:
            runner.close()

    assert asyncio.run(main()) == [1, 9]


def test_calls_that_finish_while_their_loop_is_busy_wake_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from contextledger.aio import wake

    batches: list[int] = []
    deliver = wake.Mailbox._deliver

    def counted(mailbox: wake.Mailbox) -> None:
        batches.append(len(mailbox._done))
        deliver(mailbox)

    monkeypatch.setattr(wake.Mailbox, "_deliver", counted)
    writes: list[int] = []

    class CountingOs:  # the wake-up module's os: its writes are the loop's wake-ups
        def __getattr__(self, name: str) -> Any:
            return getattr(os, name)

        def write(self, fd: int, data: bytes) -> int:
            writes.append(fd)
            return os.write(fd, data)

    monkeypatch.setattr(wake, "os", CountingOs())

    async def main() -> list[int]:
        runner = Runner(workers=4)
        calls = [asyncio.ensure_future(runner.run(int, n)) for n in range(8)]
        await asyncio.sleep(0)  # each task hands its call over
        time.sleep(1)  # the loop is busy: every call finishes meanwhile
        results = await asyncio.gather(*calls)
        runner.close()
        return results

    assert asyncio.run(main()) == list(range(8))
    assert batches == [8]  # the loop took the eight calls at once...
    assert len(writes) == 1  # ...woken by one byte: the calls finished later joined the first one's wake-up
