"""The two points where a :class:`~contextledger.Conversation` waits without a store.

A conflict retry sleeps, and a reduction may call a summarizer that is a coroutine
function. Under the async API (:mod:`contextledger.aio`) the conversation runs inside a
greenlet spawned by SQLAlchemy's ``greenlet_spawn``; there both waits hand the event loop
an awaitable through ``await_only`` instead of blocking it. Everywhere else they are the
plain blocking calls. Nothing else in the conversation knows which API it serves.

SQLAlchemy is looked up in ``sys.modules``, never imported here: a greenlet can only be
running under ``greenlet_spawn`` once SQLAlchemy is loaded, and a process that only reads
a SQLite ledger never loads it (see :mod:`contextledger.stores.sql.reader`).
"""

from __future__ import annotations

import inspect
import sys
import time
from typing import Any

from contextledger.errors import ConfigurationError

__all__ = ["await_only", "in_greenlet", "pause", "settle"]

_CONCURRENCY = "sqlalchemy.util.concurrency"


def in_greenlet() -> bool:
    """Whether the caller runs inside SQLAlchemy's ``greenlet_spawn`` (False while SQLAlchemy is not loaded)."""
    concurrency = sys.modules.get(_CONCURRENCY)
    return concurrency is not None and bool(concurrency.in_greenlet())


def await_only(awaitable: Any) -> Any:
    """Hand ``awaitable`` to the event loop of the enclosing ``greenlet_spawn`` (see :func:`in_greenlet`)."""
    from sqlalchemy.util.concurrency import await_only as hand_over

    return hand_over(awaitable)


def pause(seconds: float) -> None:
    """Wait ``seconds``: on the event loop under the async API, else by sleeping the thread."""
    if in_greenlet():
        import asyncio  # loaded already under the async API; a sync process need not pay for it

        await_only(asyncio.sleep(seconds))
    else:
        time.sleep(seconds)


def settle(value: Any) -> Any:
    """``value`` itself, or what it resolves to when it is awaitable (a coroutine summarizer).

    Raises:
        ConfigurationError: ``value`` is awaitable outside the async API, where nothing
            could await it (the awaitable is closed, not leaked).
    """
    if not inspect.isawaitable(value):
        return value
    if in_greenlet():
        return await_only(value)
    close = getattr(value, "close", None)
    if callable(close):
        close()
    raise ConfigurationError(
        "the summarizer returned an awaitable; a coroutine summarizer needs the async API (contextledger.aio)"
    )
