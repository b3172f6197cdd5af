"""``AsyncLedger``: :class:`~contextledger.Ledger` on asyncio drivers, its queries as coroutines."""

from __future__ import annotations

from types import TracebackType
from typing import Any, TypeVar

from contextledger.aio.conversation import AsyncConversation
from contextledger.aio.shell import ShellBase, coroutine_of, run, synced
from contextledger.aio.stores import open_async_store
from contextledger.ledger import DEFAULT_URL, Ledger
from contextledger.stores.base import LedgerStore

__all__ = ["AsyncLedger"]

R = TypeVar("R")


class AsyncLedger(ShellBase[Ledger]):
    """A store on asyncio drivers plus the conversations and queries over it.

    ``await AsyncLedger.connect(url, **options)`` takes the URLs and options of
    :meth:`Ledger.connect`; ``async with`` closes it. Both APIs read and write the same
    databases: a conversation written by one is restored exactly by the other.
    """

    def __init__(self, store: LedgerStore) -> None:
        """Wrap ``store`` (one from :func:`~contextledger.aio.open_async_store`, or a ``MemoryStore``).

        Raises:
            ConfigurationError: ``store`` is not a :class:`LedgerStore`.
        """
        super().__init__(Ledger(store))

    @classmethod
    async def connect(cls, url: str = DEFAULT_URL, **options: Any) -> AsyncLedger:
        """Open the ledger at ``url`` on the asyncio drivers (the URLs and options of :meth:`Ledger.connect`).

        Raises:
            InvalidLedgerURL: The URL is malformed, names no supported backend, or needs an
                optional driver that is not installed.
            ConfigurationError: An option is not one the backend takes.
            StoreUnavailable: The database or server could not be reached.
            SchemaOutOfDate: The SQL schema does not match this library.
        """
        return cls(await run(open_async_store, url, **options))

    mirrors = Ledger
    store: synced[LedgerStore] = synced()
    url: synced[str] = synced()

    async def conversation(self, session_id: str, agent_id: str = "default", **options: Any) -> AsyncConversation:
        """Open the conversation of (session_id, agent_id), restoring its active view (reads only).

        Takes the arguments of :meth:`Ledger.conversation` (``manager``, ``token_counter``,
        ``context_window_limit``, ``repair``, ``app``, ``user``, ``max_retries``, ``overflow_errors``); a
        summarizer of the manager may be a coroutine function here.

        Raises:
            ConfigurationError: An option is invalid.
        """
        return await AsyncConversation.open(self.store, session_id, agent_id, **options)

    history = coroutine_of(Ledger.history)
    evictions = coroutine_of(Ledger.evictions)
    reductions = coroutine_of(Ledger.reductions)
    summaries = coroutine_of(Ledger.summaries)
    revisions = coroutine_of(Ledger.revisions)
    pin_history = coroutine_of(Ledger.pin_history)
    view_at = coroutine_of(Ledger.view_at)
    fork = coroutine_of(Ledger.fork)
    fork_origin = coroutine_of(Ledger.fork_origin)
    forks = coroutine_of(Ledger.forks)
    erase = coroutine_of(Ledger.erase)
    settle_erasure = coroutine_of(Ledger.settle_erasure)
    prune = coroutine_of(Ledger.prune)
    expire = coroutine_of(Ledger.expire)
    expirations = coroutine_of(Ledger.expirations)
    tombstones = coroutine_of(Ledger.tombstones)
    export_records = coroutine_of(Ledger.export_records)
    import_records = coroutine_of(Ledger.import_records)
    copy_to = coroutine_of(Ledger.copy_to)
    agents = coroutine_of(Ledger.agents)
    sessions = coroutine_of(Ledger.sessions)
    owner = coroutine_of(Ledger.owner)
    app_state = coroutine_of(Ledger.app_state)
    user_state = coroutine_of(Ledger.user_state)
    update_app_state = coroutine_of(Ledger.update_app_state)
    update_user_state = coroutine_of(Ledger.update_user_state)
    erase_user = coroutine_of(Ledger.erase_user)
    require_session = coroutine_of(Ledger.require_session)
    delete_session = coroutine_of(Ledger.delete_session)
    upgrade = coroutine_of(Ledger.upgrade)
    close = coroutine_of(Ledger.close)

    async def __aenter__(self) -> AsyncLedger:
        """Return self."""
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the store."""
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncLedger({self.url!r})"
