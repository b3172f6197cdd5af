"""The two points where a :class:`~contextledger.Conversation` waits without a store.

A conflict retry sleeps, and a reduction may call a summarizer that is a coroutine
function. Under the async API (:mod:`contextledger.aio`) the conversation runs on a
worker thread while its caller's task awaits it: the sleep blocks only that worker,
and a coroutine summarizer is handed back to the caller's event loop through
:data:`CALLER`, which the async API sets for each call it runs. Everywhere else there is
no loop to hand it to. Nothing else in the conversation knows which API it serves.

An append the async API runs on its caller's own thread (``inline``) must not wait at
all: :data:`INLINE` is set for it, a retry's sleep raises :class:`WouldWait` instead,
and so does a store that would wait for a lock (SQLite's write lock); nothing was
committed then, and the async API runs the call again on a worker thread.
"""

from __future__ import annotations

import contextvars
import inspect
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

from contextledger.errors import ConfigurationError

__all__ = ["CALLER", "INLINE", "Lost", "Refused", "WouldWait", "pause", "run_inline", "settle"]

P = ParamSpec("P")
R = TypeVar("R")

CALLER: ContextVar[Callable[[Any], Any] | None] = ContextVar("contextledger_caller", default=None)
"""Under the async API: awaits an awaitable on the calling task's loop and returns its result."""


INLINE: ContextVar[bool] = ContextVar("contextledger_inline", default=False)
"""Under the async API: the call runs on its caller's event-loop thread and must not wait."""


class WouldWait(Exception):  # a signal to the async API, never seen by a caller
    """Raised, while :data:`INLINE` is set, where the call would wait; nothing was committed.

    Not a :class:`~contextledger.errors.ContextLedgerError`: it never leaves the async
    API, which runs the call again on a worker thread.
    """


class Refused(Exception):  # a signal to the async API, never seen by a caller
    """A native async send got an error reply (a conflict, a deleted conversation): nothing was applied."""


class Lost(Exception):  # a signal to the async API, never seen by a caller
    """A native async send's connection failed after sending may have begun: applied at most once."""


def run_inline(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R | WouldWait:
    """``fn(*args, **kwargs)`` on the calling thread with :data:`INLINE` set; a :class:`WouldWait` it raised, returned.

    It runs in a copy of the caller's context (the caller's own context never sees
    :data:`INLINE` set). A returned :class:`WouldWait` means ``fn`` stopped where it
    would have waited, with nothing committed: the caller runs it again on a worker.
    Any other exception propagates.
    """
    context = contextvars.copy_context()
    context.run(INLINE.set, True)
    try:
        return context.run(fn, *args, **kwargs)
    except WouldWait as signal:
        return signal


def pause(seconds: float) -> None:
    """Wait ``seconds`` (under the async API this blocks the worker thread, never a loop).

    Raises:
        WouldWait: The call runs inline (:data:`INLINE`): it must not sleep on the loop.
    """
    if INLINE.get():
        raise WouldWait(f"a retry would sleep {seconds:.3f} s")
    time.sleep(seconds)


def settle(value: Any) -> Any:
    """``value`` itself, or what it resolves to when it is awaitable (a coroutine summarizer).

    Raises:
        ConfigurationError: ``value`` is awaitable outside the async API, where nothing
            could await it (the awaitable is closed, not leaked).
    """
    if not inspect.isawaitable(value):
        return value
    caller = CALLER.get()
    if caller is not None:
        return caller(value)
    close = getattr(value, "close", None)
    if callable(close):
        close()
    raise ConfigurationError(
        "the summarizer returned an awaitable; a coroutine summarizer needs the async API (contextledger.aio)"
    )
