"""Where the async API runs the sync core: each call is one job on a worker thread, awaited by its caller.

A :class:`Runner` is a pool of worker threads owned by an
:class:`~contextledger.aio.AsyncLedger`. ``await runner.run(fn, ...)`` hands the whole
sync call -- a conversation's unit of work: plan, summarize, commit, retry -- to one
worker, which runs it on the sync drivers (``sqlite3``, psycopg, redis-py), and the
caller's task waits without blocking its loop. One hand-over per call, whatever the call
does inside; nothing is bound to the caller's event loop, so a ledger serves tasks of
any loop in any thread (each ``asyncio.run`` of a threaded web server, say).

Contracts:

* **Cancellation.** A call whose task is cancelled before a worker picked it up never
  runs. A call already running runs to its end -- its commit applied once or not at
  all, every lock released and every connection back in its pool -- and only then does
  the task see :class:`asyncio.CancelledError`; a coroutine summarizer it was awaiting
  is cancelled at once, so that wait is a unit of work, never a model call. The caller
  cannot tell which of the two happened, as with a lost reply; the ledger can (the
  conversation's state, or reading the store). Every wait inside a call is bounded by
  the store's own timeouts (lock, busy, statement and pool timeouts).
* **Order.** Calls made in one :class:`Lane` (one conversation's) run one at a time, in
  the order they were made; a call waiting for its turn holds no thread.
* **The caller's loop.** A coroutine summarizer is handed back to the loop of the task
  that made the call (:func:`asyncio.run_coroutine_threadsafe`) while the worker waits,
  so it runs where its caller's other coroutines run.
* **Context.** Each call runs in a copy of the caller's :mod:`contextvars` context (the
  caller's OpenTelemetry span is the parent of the ledger's).
* **Closing.** After :meth:`Runner.close`, calls already running finish and every new
  call raises :class:`~contextledger.errors.LedgerClosed` at once.
* **Ended loops.** Once a call returned (or raised) to its caller, nothing of the runner
  holds the call, so nothing keeps the caller's loop alive after it ends: a ledger serves
  successive ``asyncio.run`` calls, each loop going with its native connections
  (:mod:`contextledger.aio.loop_end`).
* **Fork.** A child process starts with no worker threads (none survive a fork): its
  first calls start its own.

Why not :class:`concurrent.futures.ThreadPoolExecutor` (or a :class:`queue.SimpleQueue`
of jobs): it has no lanes and no way to claim a job for its caller's cancellation
without a second future, and it wakes an idle worker while the loop holds the GIL, so the
worker wakes only to wait for the GIL and the loop is woken twice as often as it must be
(:class:`_Worker`, :mod:`contextledger.aio.wake`; ``benchmarks/aio.py`` times a call
that does nothing).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, NoReturn, ParamSpec, TypeVar

from contextledger.aio.job import Job, Lane
from contextledger.errors import ConfigurationError, LedgerClosed

__all__ = ["DEFAULT_WORKERS", "Lane", "Runner", "default_runner", "outlast"]

P = ParamSpec("P")
R = TypeVar("R")

DEFAULT_WORKERS = 16
"""Worker threads of a runner unless told otherwise (threads start only as calls overlap)."""

_names = itertools.count(1)
_runners: weakref.WeakSet[Runner] = weakref.WeakSet()


def _forget_threads() -> None:
    """In a forked child: no worker survived the fork, so none is idle or running."""
    for runner in list(_runners):
        runner._forked()


os.register_at_fork(after_in_child=_forget_threads)


class _Worker:
    """One worker thread as the pool sees it: the job handed to it and the pipe it waits on for one.

    An idle worker blocks in ``os.read`` on its own pipe, without the GIL; the caller's
    loop hands it a job with one ``os.write``, which releases the GIL before it wakes the
    worker, so the worker never wakes only to wait for the GIL (a :class:`queue.SimpleQueue`
    wakes it while the loop holds it).
    """

    __slots__ = ("_read", "_write", "job")

    def __init__(self) -> None:
        self.job: Job | None = None
        self._read, self._write = os.pipe()

    def hand(self) -> None:
        """Wake the worker for the job set in :attr:`job` (``None``: to end)."""
        os.write(self._write, b"\0")

    def wait(self) -> Job | None:
        """Block until a job is handed over; that job (``None``: end the thread)."""
        os.read(self._read, 1)
        job, self.job = self.job, None
        return job

    def close(self) -> None:
        os.close(self._read)
        os.close(self._write)


class Runner:
    """A pool of worker threads that runs sync calls for the tasks of any event loop.

    Args:
        workers: The most threads run at once (a thread starts only when a call finds
            every running one busy; the rest queue).
        name: Names the store in errors (a masked URL).

    Raises:
        ConfigurationError: ``workers`` is not a positive int.
    """

    def __init__(self, workers: int = DEFAULT_WORKERS, *, name: str = "ledger") -> None:
        """Prepare the pool (no thread starts before the first call)."""
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigurationError(f"workers must be a positive int, got {workers!r}")
        self.workers = workers
        self.name = name
        self._prefix = f"contextledger-{next(_names)}"
        self._lock = threading.Lock()
        self._threads = 0
        self._idle: list[_Worker] = []  # threads waiting for a job, the last one to wait first
        self._backlog: collections.deque[Job] = collections.deque()  # jobs made while every thread was busy
        self._closed = False
        self.calls = 0
        """How many calls were handed to a worker (one per coroutine of the async API)."""
        self.inline = 0
        """Calls run on their caller's own thread instead (see :meth:`leave`): no hand-over."""
        self.cancelled_waiting = 0
        """Calls cancelled before they started (they never ran)."""
        self.cancelled_running = 0
        """Calls cancelled while running (they ran to their end first)."""
        _runners.add(self)

    def _forked(self) -> None:
        # The parent's idle workers wait on pipes this child shares: a byte written here would
        # wake a thread of the parent, so the child forgets them (and closes its copies).
        self._lock = threading.Lock()
        idle, self._idle, self._threads = self._idle, [], 0
        for worker in idle:
            worker.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    async def run(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn(*args, **kwargs)`` on a worker thread and return its result (or raise its error).

        See the module docstring for what a cancellation does.

        Raises:
            LedgerClosed: The runner was closed.
        """
        return await self.run_in(None, fn, *args, **kwargs)

    async def run_in(self, lane: Lane | None, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """:meth:`run`, after the calls made earlier in ``lane`` have ended (``None``: at once).

        Raises:
            LedgerClosed: The runner was closed.
        """
        job = self.start(lane, fn, args, kwargs)
        try:
            await job.future
        except asyncio.CancelledError:
            await self.cancelled(job)
        result: R = job.outcome()
        return result

    def start(self, lane: Lane | None, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Job:
        """Hand ``fn(*args, **kwargs)`` over (after the calls before it in ``lane``): the first half of :meth:`run_in`.

        The caller awaits ``job.future``, then takes :meth:`Job.outcome`, or -- if that
        await was cancelled -- awaits :meth:`cancelled`. Async shells do this inline, so
        that each of their calls is one coroutine frame.
        """
        job = Job(fn, args, kwargs, asyncio.get_running_loop(), lane)
        if lane is None or lane.enter(job):
            self._submit(job)
        return job

    async def cancelled(self, job: Job) -> NoReturn:
        """The caller's wait for ``job`` was cancelled: end it as the module docstring says, and re-raise.

        Raises:
            asyncio.CancelledError: Always, once the job will never run or has ended.
        """
        if job.claim.acquire(blocking=False):
            job.abandon()
            with self._lock:
                self.cancelled_waiting += 1
            raise asyncio.CancelledError  # it had not started: it never will
        job.cancel()
        await outlast(job)
        job.error = None  # not taken: no cycle through its traceback (which holds the job, and its loop)
        with self._lock:
            self.cancelled_running += 1
        raise asyncio.CancelledError

    def leave(self, lane: Lane) -> None:
        """End a call its caller ran on its own thread in ``lane`` (taken with :meth:`Lane.take`).

        The calls made in the lane meanwhile (from other threads or loops) go on, in
        order, on a worker.
        """
        with self._lock:
            self.inline += 1
        following = lane.next()
        if following is not None:
            self._submit(following)

    def resume(self, lane: Lane, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Job:
        """Hand ``fn(*args, **kwargs)`` to a worker as the call its caller holds ``lane`` for.

        For a call begun on its caller's thread (:meth:`Lane.take`) that must wait after
        all: it keeps its place in the lane. Awaited as :meth:`start`'s job is.
        """
        job = Job(fn, args, kwargs, asyncio.get_running_loop(), lane)
        self._submit(job)
        return job

    def _submit(self, job: Job) -> None:
        """Hand ``job`` to an idle worker, or start a thread when every running one is busy, or queue it."""
        worker: _Worker | None = None
        spawn = closed = False
        with self._lock:
            if self._closed:
                closed = True
            else:
                self.calls += 1
                if self._idle:
                    worker = self._idle.pop()  # the one that waited least: its memory is likeliest still cached
                    worker.job = job
                elif self._threads < self.workers:
                    self._threads += 1
                    spawn = True
                else:
                    self._backlog.append(job)
        if worker is not None:
            worker.hand()
        elif closed:
            job.fail(LedgerClosed(f"the ledger at {self.name} is closed; open a new one"))
            if job.lane is not None:
                self._following(job.lane)  # closed: fails the calls waiting behind it
        elif spawn:
            self._spawn(job)

    def _spawn(self, job: Job) -> None:
        # The job is handed over as every later one is, through the worker: a thread's own
        # arguments stay referenced as long as it runs, and would keep this call's loop alive.
        own: _Worker | None = None
        try:
            own = _Worker()
            own.job = job
            name = f"{self._prefix}-{self._threads}"
            threading.Thread(target=self._work, args=(own,), name=name, daemon=True).start()
        except (RuntimeError, OSError) as exc:  # the process cannot start another thread (or open its pipe)
            if own is not None:
                own.close()
            worker: _Worker | None
            with self._lock:
                self._threads -= 1
                worker = self._idle.pop() if self._idle else None
                if worker is not None:
                    worker.job = job
                elif self._threads:
                    self._backlog.append(job)  # a running thread takes it
                    return
            if worker is not None:
                worker.hand()
                return
            # No thread at all: fail it (and what waits behind it) rather than leave callers waiting.
            job.fail(exc)
            while job.lane is not None and (waiting := job.lane.next()) is not None:
                waiting.fail(exc)

    def _following(self, lane: Lane) -> Job | None:
        """The lane's next call, counted as handed over (``None``: the lane is idle; once closed, all fail)."""
        while (job := lane.next()) is not None:
            with self._lock:
                if not self._closed:
                    self.calls += 1
                    return job
            job.fail(LedgerClosed(f"the ledger at {self.name} is closed; open a new one"))
        return None

    def _work(self, worker: _Worker) -> None:
        job, worker.job = worker.job, None
        try:
            while job is not None:
                ran = job.run()
                # The thread goes on with the conversation's next call, if one waits: no hand-over.
                following = self._following(job.lane) if job.lane is not None else None
                ending = False
                if following is None:
                    with self._lock:
                        if self._backlog:
                            following = self._backlog.popleft()
                        elif self._closed:
                            ending = True
                        else:
                            self._idle.append(worker)
                # Waking the caller is the last thing before this thread blocks for its next job:
                # the caller's loop wants the GIL back at once. The job is let go first: held here
                # (while this thread waits for the GIL, or for its next job) it would keep its
                # caller's loop, and that loop's native connections, alive after the loop ended.
                mailbox = job.mailbox if ran else None
                if mailbox is not None and not mailbox.put(job):
                    mailbox = None  # a wake-up is already on its way
                job = following
                if mailbox is not None:
                    mailbox.ring()
                if job is None:
                    if ending:
                        return
                    job = worker.wait()  # None: the runner was closed
        finally:
            worker.close()

    def close(self) -> None:
        """Refuse new calls; running calls finish on their threads, which then end."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.hand()  # with no job: the thread ends

    def __repr__(self) -> str:
        return f"Runner({self.name!r}, workers={self.workers})"


async def outlast(job: Job) -> None:
    """Wait for a started call to end, whatever further cancellations arrive (its end is bounded)."""
    loop = job.loop
    while not job.finished:
        if job.future.done():  # the cancelled future: wait on a new one
            job.future = loop.create_future()
        with contextlib.suppress(asyncio.CancelledError):
            await job.future


_default: Runner | None = None
_default_lock = threading.Lock()


def default_runner() -> Runner:
    """The process-wide runner of async shells opened without a ledger (never closed)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Runner(name="the default runner")
        return _default
