"""Drive the async API from sync test code: an event loop on its own thread, and facades over it.

The sync suites (the store contract, the property tests, the restart tests) are written
against ``CompleteStore`` and ``Conversation``. :class:`BlockingStore` and
:class:`BlockingConversation` give them those shapes while every call runs as a coroutine
of the async API on the portal's loop -- each store method handed to a worker of the
async API's runner, an :class:`~contextledger.aio.AsyncConversation` -- so the suites run
unchanged on the async API instead of being copied.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from contextledger.aio import AsyncConversation
from contextledger.aio.shell import run
from contextledger.ledger import open_store
from contextledger.stores.capabilities import CompleteStore, complete

T = TypeVar("T")


class Portal:
    """An event loop running on a daemon thread; :meth:`call` runs a coroutine there and waits."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="aio-portal", daemon=True)
        self._thread.start()

    def call(self, awaitable: Awaitable[T], timeout: float = 120) -> T:
        async def wrap() -> T:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


class BlockingStore:
    """A ``CompleteStore`` whose every method runs through the async API's runner, awaited on the portal."""

    def __init__(self, portal: Portal, inner: CompleteStore) -> None:
        self.portal = portal
        self.inner = inner

    @classmethod
    def open(cls, portal: Portal, url: str, **options: Any) -> BlockingStore:
        return cls(portal, complete(portal.call(run(open_store, url, **options)), "tests"))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not inspect.ismethod(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.portal.call(run(attr, *args, **kwargs))

        return call

    def __repr__(self) -> str:
        return f"BlockingStore({self.inner!r})"


class BlockingConversation:
    """A ``Conversation``-shaped facade whose methods await the :class:`AsyncConversation`'s coroutines."""

    def __init__(self, portal: Portal, conversation: AsyncConversation) -> None:
        self.portal = portal
        self.aio = conversation

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.aio, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            return self.portal.call(attr(*args, **kwargs))

        return call


def async_opener(portal: Portal) -> Callable[..., BlockingConversation]:
    """Stands in for ``Conversation(store, session_id, ...)``: opens an AsyncConversation on the portal."""

    def open_conversation(store: CompleteStore, *args: Any, **kwargs: Any) -> BlockingConversation:
        inner = store.inner if isinstance(store, BlockingStore) else store
        return BlockingConversation(portal, portal.call(AsyncConversation.open(inner, *args, **kwargs)))

    return open_conversation
