"""One call of the async API: what a worker runs, in which context, and how its caller learns the outcome.

A :class:`Job` is made on the caller's loop by :meth:`~contextledger.aio.runner.Runner.start`,
run once on a worker thread (unless its cancelled caller claimed it first) and posted
back to the caller's loop (:mod:`contextledger.aio.wake`). While it runs it is also the
waiting task as the call's coroutine summarizers see it (:data:`~contextledger.core.seam.CALLER`).
A :class:`Lane` orders the jobs of one conversation.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import threading
from typing import TYPE_CHECKING, Any

from contextledger.aio.wake import mailbox
from contextledger.core.seam import CALLER
from contextledger.errors import ReductionFailed

if TYPE_CHECKING:
    from collections.abc import Callable


__all__ = ["Job", "Lane"]


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _close(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if callable(close):
        close()  # a coroutine never awaited would warn


class Job:
    """One call: what to run and in which context, its outcome, and how its caller is woken.

    It is also the waiting task as the call's summarizers see it (:meth:`await_on_loop`):
    they run on that task's loop.
    """

    __slots__ = (
        "args",
        "cancelled",
        "claim",
        "context",
        "error",
        "finished",
        "fn",
        "future",
        "kwargs",
        "lane",
        "loop",
        "mailbox",
        "pending",
        "result",
    )

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        loop: asyncio.AbstractEventLoop,
        lane: Lane | None,
    ) -> None:
        """A job for ``fn(*args, **kwargs)`` whose caller waits on ``loop``."""
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.loop = loop
        self.mailbox = mailbox(loop)
        self.lane = lane
        self.pending: set[concurrent.futures.Future[Any]] | None = None  # the summarizers awaited now
        self.cancelled = False
        # The caller's context, without CALLER set yet: set in run(), on the copy run() alone holds,
        # so that the job (and through it the caller's loop) is never held in a cycle of its own.
        self.context: contextvars.Context | None = contextvars.copy_context()
        # Taken by the worker that starts the job, or by its cancelled caller: whoever is first.
        self.claim = threading.Lock()
        self.future: asyncio.Future[None] = loop.create_future()
        self.finished = False
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> bool:
        """Run on a worker thread unless its caller was cancelled first; whether it ran (wake the caller then)."""
        if not self.claim.acquire(blocking=False):
            return False
        context, self.context = self.context, None
        assert context is not None  # the claim is taken once
        context.run(CALLER.set, self.await_on_loop)
        try:
            self.result = context.run(self.fn, *self.args, **self.kwargs)
        except BaseException as exc:
            self.error = exc
        return True

    def abandon(self) -> None:
        """Its caller claimed it before it ran (it never will): let go of the caller's loop and context now.

        A worker that took it from the lane or the backlog meanwhile may hold it a moment
        longer, only to find it claimed (it reads ``claim`` and ``lane`` alone then): the
        caller's loop must not wait for that thread to be scheduled to be freed.
        """
        del self.loop, self.future
        self.context = None

    def fail(self, error: BaseException) -> None:
        """End the job without running it (any thread)."""
        if self.claim.acquire(blocking=False):
            self.error = error
            self.wake()

    def wake(self) -> None:
        """Wake the caller on its loop (any thread)."""
        self.mailbox.post(self)

    def outcome(self) -> Any:
        """The call's result, or its error raised (on the caller's loop, once it ended)."""
        error = self.error
        if error is not None:
            self.error = None  # no cycle through the traceback
            try:
                raise error
            finally:
                del error  # nor through this frame, which the traceback holds (and, through it, the loop)
        return self.result

    def woken(self) -> None:
        """On the caller's loop: the call ended."""
        self.finished = True
        if not self.future.done():
            self.future.set_result(None)

    def await_on_loop(self, awaitable: Any) -> Any:
        """Await ``awaitable`` on the caller's loop from the worker thread and return its result.

        Raises:
            ReductionFailed: The caller was cancelled while waiting (or before).
        """
        if self.cancelled:
            _close(awaitable)
            raise ReductionFailed("the summarizer was not run: its caller was cancelled")
        future = asyncio.run_coroutine_threadsafe(_awaited(awaitable), self.loop)
        pending = self.pending
        if pending is None:
            pending = self.pending = set()
        pending.add(future)
        try:
            return future.result()
        except concurrent.futures.CancelledError as exc:
            raise ReductionFailed("the summarizer was cancelled with its caller") from exc
        finally:
            pending.discard(future)

    def cancel(self) -> None:
        """Cancel the summarizers awaited now and refuse later ones (on the caller's loop)."""
        self.cancelled = True
        for future in list(self.pending or ()):
            future.cancel()


class Lane:
    """Calls that run one at a time, in the order they were made (one conversation's calls).

    Usable from any thread and any event loop.
    """

    __slots__ = ("_busy", "_lock", "_waiting")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._busy = False
        self._waiting: collections.deque[Job] = collections.deque()

    def enter(self, job: Job) -> bool:
        """Whether ``job`` may start now; else it waits for the calls before it."""
        with self._lock:
            if self._busy:
                self._waiting.append(job)
                return False
            self._busy = True
            return True

    def take(self) -> bool:
        """Whether the lane was idle, and is now busy with a call its caller runs itself (then :meth:`next`)."""
        with self._lock:
            if self._busy:
                return False
            self._busy = True
            return True

    def next(self) -> Job | None:
        """The next call still wanted once the running one ended (``None``: the lane is idle)."""
        with self._lock:
            while self._waiting:
                job = self._waiting.popleft()
                if not job.claim.locked():  # else its caller was cancelled while it waited
                    return job
            self._busy = False
            return None
