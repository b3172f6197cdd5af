"""A loop's native connections closed as that loop ends, not when the ledger closes.

A native sender (:mod:`contextledger.aio.native`) keeps each event loop's connections in
a dict weakly keyed by the loop; but a connection holds its loop (its transport and
streams do), so that entry would never go by itself, and one ledger used across
successive ``asyncio.run`` calls would keep every ended loop, and that loop's
connections open on the server, until the ledger closed.

So each loop that sends natively is given one suspended async generator (:func:`watch`).
The loop's ``shutdown_asyncgens()`` -- which ``asyncio.run`` and :class:`asyncio.Runner`
call once the main task and every other task ended, before closing the loop -- closes
it, and it closes that loop's connections (``NativeSend.aclose``) while the loop still
runs. The loop then goes with its last reference. A loop closed without
``shutdown_asyncgens()`` keeps its connections as long as the sender (the ledger) lives,
as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncGenerator
from typing import Protocol

from contextledger.stores.base import LedgerStore

__all__ = ["NativeSend", "forget", "watch"]

logger = logging.getLogger("contextledger.aio")


class NativeSend(Protocol):
    """What is closed here of a native sender (:class:`contextledger.aio.native.NativeSend`)."""

    @property
    def store(self) -> LedgerStore:
        """The store whose commits it sends."""

    async def aclose(self) -> None:
        """Close the calling loop's connections."""


Closers = weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncGenerator[None, None]]

# Each generator holds its loop (through the finalizer the loop gives it), so a loop's entry
# is removed by the generator itself as it ends, never by the weak key.
_closers: weakref.WeakKeyDictionary[NativeSend, Closers] = weakref.WeakKeyDictionary()


def _running() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _closing(sender: weakref.ref[NativeSend], loop: asyncio.AbstractEventLoop) -> AsyncGenerator[None, None]:
    """Suspended for the life of ``loop``; once closed, closes ``loop``'s connections of the sender.

    The sender is held weakly: a ledger dropped without being closed is not kept alive by the loops it served.
    """
    try:
        yield
    finally:
        send = sender()
        watched = _closers.get(send) if send is not None else None
        if watched is not None:
            watched.pop(loop, None)
        if send is not None and _running() is loop:  # its own loop, still running (not a stray finalization)
            try:
                await send.aclose()
            except Exception as exc:  # the connections are dropped either way; the loop's end goes on
                logger.debug("url=<%s>, error=<%s> | closing a loop's native connections failed", send.store.url, exc)


def watch(send: NativeSend) -> None:
    """Have the running loop close its connections of ``send`` when it ends (once per loop; cheap after)."""
    loop = asyncio.get_running_loop()
    watched = _closers.get(send)
    if watched is None:
        watched = _closers[send] = weakref.WeakKeyDictionary()
    if loop in watched:
        return
    closer = watched[loop] = _closing(weakref.ref(send), loop)
    # Started here, without an await: the loop registers it (its asyncgen hooks) at this first
    # step, and it stops at once at its ``yield``.
    with contextlib.suppress(StopIteration):
        next(closer.asend(None).__await__())


async def forget(send: NativeSend) -> None:
    """The ledger closes: close the calling loop's connections of ``send``, and let go of every other loop.

    A loop still running closes its own connections once its generator is collected (the
    loop's finalizer hook runs it there); for a loop already closed the hook does nothing,
    and its connections go with the sender.
    """
    watched = _closers.pop(send, None)
    closer = watched.pop(asyncio.get_running_loop(), None) if watched is not None else None
    if closer is not None:
        await closer.aclose()
    else:
        await send.aclose()
