"""The two points where a :class:`~contextledger.Conversation` waits without a store.

A conflict retry sleeps, and a reduction may call a summarizer that is a coroutine
function. Under the async API (:mod:`contextledger.aio`) the conversation runs inside a
greenlet spawned by SQLAlchemy's ``greenlet_spawn``; there both waits hand the event loop
an awaitable through ``await_only`` instead of blocking it. Everywhere else they are the
plain blocking calls. Nothing else in the conversation knows which API it serves.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any

from sqlalchemy.util import await_only
from sqlalchemy.util.concurrency import in_greenlet

from contextledger.errors import ConfigurationError

__all__ = ["pause", "settle"]


def pause(seconds: float) -> None:
    """Wait ``seconds``: on the event loop under the async API, else by sleeping the thread."""
    if in_greenlet():
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
