"""``AsyncLedger``: :class:`~contextledger.Ledger` and its worker threads, its queries as coroutines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

from contextledger.aio import loop_end
from contextledger.aio.conversation import AsyncConversation, check_inline, inline_for
from contextledger.aio.native import native_send
from contextledger.aio.runner import DEFAULT_WORKERS, Runner
from contextledger.aio.shell import ShellBase, coroutine_of, synced
from contextledger.conversation.conversation import Conversation
from contextledger.conversation.shared import DEFAULT_SHARED_ENTRIES, SharedViews, checked_bound
from contextledger.errors import ConfigurationError
from contextledger.ledger import DEFAULT_URL, Ledger, open_store
from contextledger.model.paging import Pages
from contextledger.model.records import HistoryEntry
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import HISTORY

__all__ = ["AsyncLedger"]


class AsyncLedger(ShellBase[Ledger]):
    """A store, the worker threads that call it, and the conversations and queries over it.

    ``await AsyncLedger.connect(url, **options)`` takes the URLs and options of
    :meth:`Ledger.connect`; ``async with`` closes it. Each coroutine -- a query here, any
    method of its conversations -- runs the sync call as one job on one of the ledger's
    worker threads, on the sync drivers (see :mod:`contextledger.aio.runner`): the
    ledger serves tasks of any event loop in any thread. Both APIs read and write the
    same databases: a conversation written by one is restored exactly by the other.
    """

    def __init__(
        self,
        store: LedgerStore,
        *,
        workers: int = DEFAULT_WORKERS,
        inline: bool | None = None,
        native: bool | None = None,
        shared_views: int = DEFAULT_SHARED_ENTRIES,
    ) -> None:
        """Wrap ``store`` (any :class:`LedgerStore`); its calls run on up to ``workers`` threads.

        ``inline``, ``native``, ``shared_views``: see :meth:`connect`.

        Raises:
            ConfigurationError: ``store`` is not a :class:`LedgerStore`, ``workers`` is
                not a positive int, or ``inline`` is not a bool or ``None`` or is true for
                a store other than SQLite or in-memory, or ``native`` is not a bool or ``None``
                or is true for a store without a native send, or ``shared_views`` is not a
                non-negative int.
        """
        ledger = Ledger(store, shared_views=shared_views)
        self._inline = inline_for(store, inline)
        self._native = native_send(store, native, inline)
        super().__init__(ledger, Runner(workers, name=ledger.url))

    @classmethod
    async def connect(
        cls,
        url: str = DEFAULT_URL,
        *,
        workers: int = DEFAULT_WORKERS,
        inline: bool | None = None,
        native: bool | None = None,
        **options: Any,
    ) -> AsyncLedger:
        """Open the ledger at ``url`` (the URLs and options of :meth:`Ledger.connect`).

        Args:
            url: The ledger URL.
            workers: The most worker threads that call the store at once (see
                :class:`~contextledger.aio.runner.Runner`).
            inline: Whether a conversation's ``append`` runs on the calling thread,
                blocking its loop for the commit but never waiting for a lock (it falls
                back to a worker then), instead of as a job on a worker; the other calls
                always run on workers (see :class:`~contextledger.aio.AsyncConversation`).
                ``None`` (the default): on SQLite and in-memory stores, whose commit waits
                on no network; ``True`` is refused for other stores.
            native: On a Redis store (one server, plain TCP), send an append's one
                commit script with ``redis.asyncio`` from the calling loop instead of a
                worker; on a PostgreSQL store (psycopg), its one statement with psycopg's
                ``AsyncConnection`` (:mod:`contextledger.aio.native`). ``None`` (the default): where the
                store takes it, unless ``inline`` is ``False``; ``True`` is refused for
                other stores.
            **options: The backend's options, as for :meth:`Ledger.connect`, and
                ``shared_views``: the views its conversations last held, in entries, that
                a conversation it opens next may take (see :class:`~contextledger.Ledger`).

        Raises:
            InvalidLedgerURL: The URL is malformed, names no supported backend, or needs an
                optional driver that is not installed.
            ConfigurationError: An option is not one the backend takes, ``workers`` is
                not a positive int, or ``inline`` is not a bool or ``None`` or is true for a
                store other than SQLite or in-memory, or ``shared_views`` is not a
                non-negative int.
            StoreUnavailable: The database or server could not be reached.
            SchemaOutOfDate: The SQL schema does not match this library.
        """
        check_inline(inline)
        shared_views = checked_bound(options.pop("shared_views", DEFAULT_SHARED_ENTRIES))  # before the store opens
        runner = Runner(workers, name="a ledger being opened")
        opened: list[LedgerStore] = []

        def open_() -> LedgerStore:
            opened.append(open_store(url, **options))
            return opened[0]

        try:
            store = await runner.run(open_)
        except BaseException:
            for store in opened:  # cancelled once it had started: the store it opened is not leaked
                store.close()
            runner.close()
            raise
        runner.name = store.url  # masked by the store
        try:
            checked = inline_for(store, inline)
            sender = native_send(store, native, inline)
        except ConfigurationError:
            await runner.run(store.close)
            runner.close()
            raise
        ledger = cls.__new__(cls)
        ledger._inline = checked
        ledger._native = sender
        ShellBase.__init__(ledger, Ledger(store, shared_views=shared_views), runner)
        return ledger

    mirrors = Ledger
    store: synced[LedgerStore] = synced()
    url: synced[str] = synced()
    shared_views: synced[SharedViews] = synced()

    @property
    def inline(self) -> bool:
        """Whether an append runs on the calling thread when it can, not as a job on a worker (see :meth:`connect`)."""
        return self._inline

    async def conversation(self, session_id: str, agent_id: str = "default", **options: Any) -> AsyncConversation:
        """Open the conversation of (session_id, agent_id), restoring its active view (reads only).

        Takes the arguments of :meth:`Ledger.conversation` (``manager``, ``token_counter``,
        ``context_window_limit``, ``repair``, ``app``, ``user``, ``max_retries``, ``overflow_errors``); a
        summarizer of the manager may be a coroutine function here.

        Raises:
            ConfigurationError: An option is invalid.
        """
        return await AsyncConversation.open(
            self.store,
            session_id,
            agent_id,
            runner=self._runner,
            inline=self._inline,
            native=self._native,
            shared=self._sync.shared_views,
            **options,
        )

    def wrap(self, conversation: Conversation) -> AsyncConversation:
        """The async conversation over ``conversation``, an open sync conversation of this ledger's store.

        It runs on this ledger's workers and takes the same fast paths as one
        :meth:`conversation` opens (an inline append on SQLite and in-memory stores, a
        native send on PostgreSQL and Redis), for code that opens the sync conversation
        itself on a worker (an integration opening its ledger from a URL).

        Raises:
            ConfigurationError: ``conversation`` is not a :class:`~contextledger.Conversation`
                of this ledger's store.
        """
        if not isinstance(conversation, Conversation) or conversation.store is not self.store:
            raise ConfigurationError("wrap() takes an open Conversation of this ledger's store")
        return AsyncConversation(conversation, self._runner, inline=self._inline, native=self._native)

    history = coroutine_of(Ledger.history)

    async def iter_history(
        self,
        session_id: str,
        agent_id: str = "default",
        *,
        include_evicted: bool = True,
        after: int | None = None,
        before: int | None = None,
        page_size: int = 1000,
    ) -> AsyncIterator[HistoryEntry]:
        """:meth:`Ledger.iter_history` as an async iterator: each page one job on a worker thread.

        Raises:
            InvalidPage: A cursor is not an int >= 0, or ``page_size`` is not an int >= 1.
        """
        pages = Pages(after=after, before=before, page_size=page_size)
        store = HISTORY.of(self._sync.store, "AsyncLedger.iter_history")
        while (page := pages.next()) is not None:
            found = await self._call(store.history, session_id, agent_id, include_evicted=include_evicted, page=page)
            pages.took(len(found), found[-1].seq if found else None)
            for entry in found:
                yield entry

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

    async def close(self) -> None:
        """Close the store, then the worker threads: calls already running finish, later ones raise ``LedgerClosed``."""
        try:
            if self._native is not None:
                await loop_end.forget(self._native)
            await self._call(self._sync.close)
        finally:
            self._runner.close()

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
