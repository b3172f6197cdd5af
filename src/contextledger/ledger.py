"""The entry point: ``Ledger.connect(url)`` and the queries over a store."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from contextledger.conversation.conversation import Conversation
from contextledger.conversation.shared import DEFAULT_SHARED_ENTRIES, SharedViews, checked_bound
from contextledger.core.checks import check_owner, check_scope_delta
from contextledger.core.view import View
from contextledger.errors import ConfigurationError, InvalidLedgerURL, SessionNotFound
from contextledger.managers.base import ConversationManager
from contextledger.model.paging import (
    EVICTION_CURSOR,
    PIN_CURSOR,
    REDUCTION_CURSOR,
    SUMMARY_CURSOR,
    Cursor,
    Page,
    Pages,
)
from contextledger.model.records import (
    TRIGGERS,
    Eviction,
    Expiry,
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SessionOwner,
    SummaryEntry,
    Tombstone,
    Trigger,
    ViewEntry,
)
from contextledger.model.tokens import TokenCounter
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import (
    ERASURE,
    EXPIRY,
    HISTORY,
    LINEAGE,
    SCOPES,
    SESSIONS,
    TIME_TRAVEL,
    TRANSFER,
    Capability,
)
from contextledger.stores.urls import backend_of, mask, scheme_of

if TYPE_CHECKING:
    from typing import Protocol

    from contextledger.history.fork import ForkOrigin
    from contextledger.history.lifecycle import Erasure
    from contextledger.history.transfer import ConversationRecords, CopyReport, ImportOutcome
    from contextledger.history.users import UserErasure

    class _HoldsStore(Protocol):
        """A ledger of either API (``Ledger``, ``AsyncLedger``): what ``copy_to`` copies into."""

        @property
        def store(self) -> LedgerStore: ...


__all__ = ["DEFAULT_URL", "NEEDS", "Ledger", "needs", "open_store"]

logger = logging.getLogger(__name__)

DEFAULT_URL = "sqlite:///contextledger.db"
"""The embedded default: a SQLite file in the working directory."""

# scheme prefix -> "module:factory"; imported lazily so optional drivers stay optional.
_BACKENDS: dict[str, str] = {
    "memory": "contextledger.stores.memory:MemoryStore",
    "sqlite": "contextledger.stores.sql:SQLStore.from_url",
    "postgresql": "contextledger.stores.sql:SQLStore.from_url",
    "postgres": "contextledger.stores.sql:SQLStore.from_url",
    "redis": "contextledger.stores.redis:RedisStore.from_url",
    "rediss": "contextledger.stores.redis:RedisStore.from_url",
    "redis+cluster": "contextledger.stores.redis:RedisStore.from_url",
}


def open_store(url: str, **options: Any) -> LedgerStore:
    """Open the store a URL names.

    Raises:
        InvalidLedgerURL: The URL is malformed or names no supported backend.
        ConfigurationError: An option is not one the backend takes.
        StoreUnavailable: The server could not be reached.
        SchemaOutOfDate: The SQL schema does not match this library.
    """
    backend = backend_of(url)
    encryption = options.pop("encryption", None)
    if encryption is not None:
        from contextledger.stores.encrypted import key_provider, with_encryption

        provider = key_provider(encryption)  # before opening: a bad option opens nothing
        return with_encryption(open_store(url, **options), provider)
    if "ttl" in options and backend != "redis":
        if options["ttl"] is not None:
            raise ConfigurationError(f"ttl= expires conversations on Redis only; {mask(url)!r} is a {backend} ledger")
        del options["ttl"]
    if backend != "redis" and options.get("durability", "primary") != "primary":
        raise ConfigurationError(
            f"durability={options['durability']!r} is a Redis option; {mask(url)!r} is a {backend} ledger "
            "(on PostgreSQL, list a standby in the server's synchronous_standby_names)"
        )
    if backend != "redis":
        options.pop("durability", None)
    scheme = scheme_of(url)
    target = _BACKENDS.get(scheme) or _BACKENDS.get(scheme.split("+", 1)[0])
    if target is None:  # a scheme urls knows but this module has no opener for
        raise InvalidLedgerURL(f"unsupported ledger URL scheme {scheme!r} in {mask(url)!r} ({backend})")
    module_name, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        extra = "redis" if "redis" in module_name else "postgres" if scheme.startswith("postgres") else "sql"
        raise InvalidLedgerURL(
            f"the {scheme} backend needs an optional dependency: pip install 'contextledger[{extra}]' ({exc})"
        ) from exc
    for part in attr.split("."):
        obj = getattr(obj, part)
    try:
        store: LedgerStore = obj(url, **options)
    except TypeError as exc:
        if not options:
            raise
        raise ConfigurationError(f"unsupported option for the {scheme} backend: {exc}") from exc
    return store


# What each feature built on the history modules needs of the store beyond the required
# protocol; checked before anything is read or written, so a small store fails with the
# capability named instead of halfway through (a fork without lineage could keep a secret).
NEEDS: dict[str, tuple[Capability[Any], ...]] = {
    "view_at": (HISTORY, TIME_TRAVEL),
    "fork": (HISTORY, TIME_TRAVEL, SCOPES, LINEAGE, ERASURE),
    "forks": (HISTORY, LINEAGE),
    "erase": (HISTORY, TIME_TRAVEL, ERASURE, LINEAGE),
    "prune": (HISTORY, ERASURE, SESSIONS),
    "expire": (HISTORY, SESSIONS, EXPIRY),
    "export_records": (HISTORY, ERASURE),
    "import_records": (TRANSFER, HISTORY, ERASURE, LINEAGE),
    "copy_to": (HISTORY, ERASURE, SESSIONS, LINEAGE),
    "copy_to target": (TRANSFER, HISTORY, ERASURE),
    "erase_user": (HISTORY, TIME_TRAVEL, ERASURE, SESSIONS, SCOPES, LINEAGE),
}


def needs(store: object, feature: str) -> None:
    """Check that ``store`` declares every capability :data:`NEEDS` lists for ``feature``.

    Raises:
        CapabilityMissing: The first capability missing, named with the store and ``Ledger.<feature>``.
    """
    for capability in NEEDS[feature]:
        capability.of(store, f"Ledger.{feature}")


class Ledger:
    """A store plus the conversations and queries over it.

    Use :meth:`connect` with a URL, or wrap any :class:`LedgerStore`. A ledger is a
    context manager; leaving it closes the store. After :meth:`close`, every call --
    on the ledger and on the conversations opened from it -- raises
    :class:`~contextledger.errors.LedgerClosed`; nothing reconnects.

    Conversations need only the required store protocol. The queries and operations need
    the store's capabilities (:mod:`contextledger.stores.capabilities`; :data:`NEEDS` for
    the operations built on the history modules): on a store without one they raise
    :class:`~contextledger.errors.CapabilityMissing` before anything is read or written.

    Attributes:
        store: The store.
        shared_views: The views this ledger's conversations last committed or read, which
            a conversation it opens next takes when the stored state says nothing moved.
    """

    def __init__(self, store: LedgerStore, *, shared_views: int = DEFAULT_SHARED_ENTRIES) -> None:
        """Wrap ``store``.

        Args:
            store: The store.
            shared_views: The most entries, in all, of the views this ledger's
                conversations last held that a conversation it opens next may take
                instead of reading them again (``0``: none; see
                :mod:`~contextledger.conversation.shared`). A view is taken only when
                the stored state, read first, says the conversation has not moved.

        Raises:
            ConfigurationError: ``store`` is not a :class:`LedgerStore` (for a URL, use
                :meth:`connect`), or ``shared_views`` is not a non-negative int.
        """
        if not isinstance(store, LedgerStore):
            hint = f"; to open a URL use Ledger.connect({store!r})" if isinstance(store, str) else ""
            raise ConfigurationError(f"Ledger wraps a LedgerStore, got {type(store).__name__}{hint}")
        self.store = store
        self.shared_views = SharedViews(shared_views)

    @classmethod
    def connect(cls, url: str = DEFAULT_URL, **options: Any) -> Ledger:
        """Open the ledger at ``url`` (``memory://``, ``sqlite:///…``, ``postgresql+psycopg://…``, ``redis://…``).

        Options are passed to the backend (e.g. ``auto_upgrade=True`` for PostgreSQL,
        ``key_prefix="myapp"`` for Redis, ``ttl=3600`` to expire each Redis conversation
        that many seconds after its last write, ``durability="replicated"`` to acknowledge
        a Redis commit only once a replica holds it -- also ``?durability=replicated`` in
        the URL), except ``encryption``: a
        :class:`~contextledger.encryption.Keyring` (or key provider, or a callable returning
        one) seals content, summaries and state at rest (see :mod:`contextledger.encryption`),
        and ``shared_views`` (see :meth:`__init__`).

        Raises:
            InvalidLedgerURL: The URL is malformed, names no supported backend, or needs an
                optional driver that is not installed.
            ConfigurationError: An option is not one the backend takes (``ttl`` or
                ``durability`` on a backend other than Redis, a ttl that is not positive,
                an unknown durability), or ``shared_views`` is not a non-negative int.
            StoreUnavailable: The database or server could not be reached.
            SchemaOutOfDate: The SQL schema does not match this library (run
                ``contextledger db upgrade``, or pass ``auto_upgrade=True``).
            EncryptionKeyMissing: ``encryption`` is a callable that gave no key.
        """
        bound = checked_bound(options.pop("shared_views", DEFAULT_SHARED_ENTRIES))  # before the store opens
        return cls(open_store(url, **options), shared_views=bound)

    @property
    def url(self) -> str:
        """The store's URL with every credential masked (userinfo password, ``?password=``, ``?token=``...).

        Safe to show or log: see :func:`contextledger.stores.urls.mask`.
        """
        return self.store.url

    def __repr__(self) -> str:
        """``Ledger('<masked url>')``."""
        return f"Ledger({self.url!r})"

    def conversation(
        self,
        session_id: str,
        agent_id: str = "default",
        *,
        manager: ConversationManager | None = None,
        token_counter: TokenCounter | None = None,
        context_window_limit: int | None = None,
        repair: bool = True,
        app: str | None = None,
        user: str | None = None,
        **options: Any,
    ) -> Conversation:
        """Open the conversation of (session_id, agent_id), restoring its active view.

        Opening only reads. A new conversation is created by its first commit. With
        ``repair`` (the default) a view left mid-tool by a crash is repaired inside the
        next real write that is not the missing toolResult (a new message, a model
        call), and the repair recorded as a ``restore``/``tool_pair_repair`` reduction.

        Args:
            session_id: The session.
            agent_id: The agent within the session.
            manager: The policy that manages the context window (``None``: the view only grows).
            token_counter: Per-message token estimates (default: about four characters a token).
            context_window_limit: The model's context window in tokens (for proactive compression).
            repair: Repair a view left mid-tool in the next write.
            app: The app the session belongs to (set when the session is created; see :meth:`sessions`).
            user: The user of ``app`` the session belongs to (set the same way).
            **options: :class:`Conversation` options: ``max_retries`` (conflict retries per
                commit), ``overflow_errors`` (your SDK's context-overflow exception types),
                ``defer_count`` (a model call's count rides with the next write).

        Raises:
            ConfigurationError: An option is invalid.
        """
        conversation = Conversation(
            self.store,
            session_id,
            agent_id,
            manager=manager,
            token_counter=token_counter,
            context_window_limit=context_window_limit,
            repair=repair,
            app=app,
            user=user,
            shared=self.shared_views,
            **options,
        )
        return conversation

    # -- queries -------------------------------------------------------------------------

    def history(
        self,
        session_id: str,
        agent_id: str = "default",
        *,
        include_evicted: bool = True,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
        last: int | None = None,
    ) -> list[HistoryEntry]:
        """The message entries of the conversation in seq order, evicted ones marked: all, or one page.

        A page is read alone (keyset paging on SQL: the rows of the page, never an offset).
        A cursor is an entry's ``seq``: the page after ``page`` is ``after=page[-1].seq``,
        the one before it ``before=page[0].seq, last=n``. Every page is oldest first.

        Args:
            session_id: The session.
            agent_id: The agent.
            include_evicted: Also the entries evicted from the view.
            after: Only entries whose seq is greater.
            before: Only entries whose seq is smaller.
            limit: At most this many, the first ones of the range.
            last: At most this many, the last ones of the range (``--last N``).

        Raises:
            InvalidPage: A cursor or count is not an int >= 0, or both ``limit`` and
                ``last`` are given.
        """
        page = Page.of(after=after, before=before, limit=limit, last=last)
        if page.whole:  # the call every store takes, paging or not
            return HISTORY.of(self.store, "Ledger.history").history(
                session_id, agent_id, include_evicted=include_evicted
            )
        return HISTORY.of(self.store, "Ledger.history").history(
            session_id, agent_id, include_evicted=include_evicted, page=page
        )

    def iter_history(
        self,
        session_id: str,
        agent_id: str = "default",
        *,
        include_evicted: bool = True,
        after: int | None = None,
        before: int | None = None,
        page_size: int = 1000,
    ) -> Iterator[HistoryEntry]:
        """Every message entry of the conversation in seq order, read ``page_size`` at a time.

        Memory stays one page however long the history; each page is one read (see
        :meth:`history`), so entries appended while iterating are seen when their seq is
        past the last one read.

        Raises:
            InvalidPage: A cursor is not an int >= 0, or ``page_size`` is not an int >= 1
                (raised by the first ``next()``).
        """
        pages = Pages(after=after, before=before, page_size=page_size)
        store = HISTORY.of(self.store, "Ledger.iter_history")  # the stream's steps live in Pages, shared with async
        while (page := pages.next()) is not None:
            found = store.history(session_id, agent_id, include_evicted=include_evicted, page=page)
            pages.took(len(found), found[-1].seq if found else None)
            yield from found

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        after: Cursor | None = None,
        before: Cursor | None = None,
        limit: int | None = None,
        last: int | None = None,
    ) -> list[Eviction]:
        """What was evicted, when, why, by which reduction, replaced by which summary: all, or one page.

        Args:
            session_id: The session.
            agent_id: Only this agent (default: every agent of the session).
            trigger: Only evictions made by reductions with this trigger.
            since: Only evictions at or after this time (a naive datetime means UTC).
            after: Only evictions after this :func:`~contextledger.model.paging.cursor`
                of an eviction.
            before: Only evictions before this cursor.
            limit: At most this many, the first ones.
            last: At most this many, the last ones.

        Returns:
            The evicted entries, oldest eviction first; empty for an unknown session.

        Raises:
            ConfigurationError: ``trigger`` is not a known trigger, or ``since`` is not a datetime.
            InvalidPage: A cursor is not an eviction's, or a count is not an int >= 0
                (or both ``limit`` and ``last`` are given).
        """
        page = Page.of(after=after, before=before, limit=limit, last=last, check=EVICTION_CURSOR)
        if trigger is not None and trigger not in TRIGGERS:
            raise ConfigurationError(f"unknown trigger {trigger!r}; one of {', '.join(TRIGGERS)}")
        if since is not None:
            if not isinstance(since, datetime):
                raise ConfigurationError(f"since must be a datetime, got {type(since).__name__}")
            if since.tzinfo is None:
                since = since.replace(tzinfo=UTC)
        if page.whole:  # the call every store takes, paging or not
            return HISTORY.of(self.store, "Ledger.evictions").evictions(
                session_id, agent_id, trigger=trigger, since=since
            )
        return HISTORY.of(self.store, "Ledger.evictions").evictions(
            session_id, agent_id, trigger=trigger, since=since, page=page
        )

    def reductions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        after: Cursor | None = None,
        before: Cursor | None = None,
        limit: int | None = None,
        last: int | None = None,
    ) -> list[Reduction]:
        """Reductions in commit order: all, or one page (cursors: :func:`~contextledger.model.paging.cursor`).

        Raises:
            InvalidPage: A cursor is not a reduction's, or a count is not an int >= 0 (or
                both ``limit`` and ``last`` are given).
        """
        page = Page.of(after=after, before=before, limit=limit, last=last, check=REDUCTION_CURSOR)
        if page.whole:
            return HISTORY.of(self.store, "Ledger.reductions").reductions(session_id, agent_id)
        return HISTORY.of(self.store, "Ledger.reductions").reductions(session_id, agent_id, page=page)

    def summaries(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        after: Cursor | None = None,
        before: Cursor | None = None,
        limit: int | None = None,
        last: int | None = None,
    ) -> list[SummaryEntry]:
        """Every summary, superseded ones included, oldest first: all, or one page (cursors as for reductions).

        Raises:
            InvalidPage: A cursor is not a summary's, or a count is not an int >= 0 (or
                both ``limit`` and ``last`` are given).
        """
        page = Page.of(after=after, before=before, limit=limit, last=last, check=SUMMARY_CURSOR)
        if page.whole:
            return HISTORY.of(self.store, "Ledger.summaries").summaries(session_id, agent_id)
        return HISTORY.of(self.store, "Ledger.summaries").summaries(session_id, agent_id, page=page)

    def revisions(self, session_id: str, agent_id: str = "default", message_id: str | None = None) -> list[Revision]:
        """Original contents kept when messages were rewritten."""
        return HISTORY.of(self.store, "Ledger.revisions").revisions(session_id, agent_id, message_id)

    def pin_history(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        after: Cursor | None = None,
        before: Cursor | None = None,
        limit: int | None = None,
        last: int | None = None,
    ) -> list[PinEvent]:
        """Every pin and unpin: which entry, pinned or not, who asked, when, in which changeset: all, or one page.

        Args:
            session_id: The session.
            agent_id: Only this agent (default: every agent of the session).
            after: Only events after this :func:`~contextledger.model.paging.cursor` of a
                pin event (``(at, agent_id, version, position)``).
            before: Only events before this cursor.
            limit: At most this many, the first ones.
            last: At most this many, the last ones.

        Returns:
            The pin events in commit order; empty for an unknown session.

        Raises:
            InvalidPage: A cursor is not a pin event's, or a count is not an int >= 0 (or
                both ``limit`` and ``last`` are given).
        """
        page = Page.of(after=after, before=before, limit=limit, last=last, check=PIN_CURSOR)
        if page.whole:
            return HISTORY.of(self.store, "Ledger.pin_history").pin_history(session_id, agent_id)
        return HISTORY.of(self.store, "Ledger.pin_history").pin_history(session_id, agent_id, page=page)

    def view_at(
        self,
        session_id: str,
        agent_id: str = "default",
        *,
        model_call: int | None = None,
        at: datetime | None = None,
        reduction: str | None = None,
    ) -> View:
        """Exactly the view the model received at ``model_call`` (or the view at ``at``, or after ``reduction``).

        Reconstructed from the rows the ledger keeps, with no write per model call; see
        :func:`contextledger.history.travel.view_at` for what it reads (the active view, reduction
        and pin rows, and the entries evicted after the cut -- never the whole history).

        Raises:
            SessionNotFound: The conversation does not exist.
            ConfigurationError: Not exactly one of ``model_call``, ``at``, ``reduction``.
            ModelCallNotFound: No model call ``model_call`` was made (calls count from 1).
            ReductionNotFound: No reduction of the conversation has the id ``reduction``.
        """
        from contextledger.history.travel import travelling, view_at

        return view_at(
            travelling(self.store, "Ledger.view_at"),
            session_id,
            agent_id,
            model_call=model_call,
            at=at,
            reduction=reduction,
        )

    def fork(
        self, session_id: str, new_session_id: str, *, at_call: int | None = None, agent_id: str | None = None
    ) -> list[ForkOrigin]:
        """A new session that starts from the view (and history) of ``session_id`` at model call ``at_call``.

        Each agent's fork is one atomic commit; the new conversation records where it came
        from (:meth:`fork_origin`, shown by ``contextledger show``). See :mod:`contextledger.history.fork`.

        Args:
            session_id: The session to fork.
            new_session_id: The new session (must not exist).
            at_call: Start from the input of this model call (default: the current view).
            agent_id: Fork only this agent (default: every agent of the session).

        Raises:
            SessionNotFound: The session (or agent) does not exist.
            SessionExists: ``new_session_id`` already exists.
            ModelCallNotFound: An agent made no model call ``at_call``.
        """
        from contextledger.history.fork import fork

        needs(self.store, "fork")
        return fork(self.store, session_id, new_session_id, at_call=at_call, agent_id=agent_id)

    def fork_origin(self, session_id: str, agent_id: str = "default") -> ForkOrigin | None:
        """Where the conversation was forked from (its parent and every ancestor); ``None`` when it is not a fork."""
        from contextledger.history.fork import fork_origin

        return fork_origin(HISTORY.of(self.store, "Ledger.fork_origin").reductions(session_id, agent_id))

    def forks(self, session_id: str, agent_id: str | None = None, *, transitive: bool = False) -> list[LineageLink]:
        """The forks of the session that exist, and the copies ``copy_to`` made of it in other ledgers.

        Args:
            session_id: The session.
            agent_id: Only this agent's (default: every agent of the session).
            transitive: Also the forks of its forks (each with its ``depth``).

        Returns:
            One link per fork (``ledger`` is ``None``) or copy (``ledger`` names the other
            ledger), nearest first; empty for a session without any.

        Raises:
            ConfigurationError: The store keeps no lineage.
        """
        from contextledger.history.lineage import copies, descendants

        needs(self.store, "forks")
        out: list[LineageLink] = []
        for agent in [agent_id] if agent_id is not None else self.agents(session_id):
            found = [link for link in descendants(self.store, session_id, agent) if transitive or link.depth == 1]
            out += found
            out += copies(self.store, [(session_id, agent)])
        return sorted(out, key=lambda link: (link.depth, link.created_at, link.key))

    def erase(
        self,
        session_id: str,
        entry_id: str,
        *,
        reason: str,
        summarizer: Callable[[Sequence[ViewEntry]], str] | None = None,
        agent_id: str | None = None,
        also: Sequence[_HoldsStore | LedgerStore] = (),
        settle_timeout: float | None = None,
    ) -> Erasure:
        """Erase one message for good -- here, in every fork of it, and in the copies of ``also`` -- leaving tombstones.

        Its content, its revisions and the text of summaries covering it go; see
        :func:`contextledger.history.lifecycle.erase`. The report lists the tombstones, the copies
        in other ledgers that were not erased, and whether erased bytes may still be on
        disk (``pending``, with what to do; :meth:`settle_erasure` tries again).

        Raises:
            ConfigurationError: ``reason`` is empty.
            SessionNotFound: The session (or agent) does not exist.
            EntryNotFound: No message of the session has that id.
        """
        from contextledger.history.lifecycle import DEFAULT_SETTLE_TIMEOUT, erase

        stores = [o if isinstance(o, LedgerStore) else o.store for o in also]
        needs(self.store, "erase")
        with self._rewriting(None):  # forks and copies too
            return erase(
                self.store,
                session_id,
                entry_id,
                reason=reason,
                summarizer=summarizer,
                agent_id=agent_id,
                also=stores,
                settle_timeout=DEFAULT_SETTLE_TIMEOUT if settle_timeout is None else settle_timeout,
            )

    def settle_erasure(self, *, timeout: float = 5.0, vacuum: bool = False) -> str | None:
        """Make erased bytes leave the ledger's files; ``None`` when none is known to remain, else why and what to do.

        On SQLite: checkpoint the WAL (``TRUNCATE``), waiting at most ``timeout`` seconds for
        other processes' read transactions. On PostgreSQL: with ``vacuum``, ``VACUUM FULL``
        the ledger's tables (it locks them while it runs). See ``docs/operations/erasure.md``.
        """
        from contextledger.history.lifecycle import settle_erasure

        return settle_erasure(self.store, timeout=timeout, vacuum=vacuum)

    def prune(
        self, *, older_than: timedelta | datetime, keep_summaries: bool = True, session_id: str | None = None
    ) -> list[Tombstone]:
        """Delete evicted history older than ``older_than``, never the active view.

        Each pruned entry leaves a tombstone (reason ``prune``); see
        :func:`contextledger.history.lifecycle.prune`.

        Raises:
            ConfigurationError: ``older_than`` is not a non-negative timedelta or a datetime.
        """
        from contextledger.history.lifecycle import prune

        needs(self.store, "prune")
        with self._rewriting(session_id):
            return prune(self.store, older_than=older_than, keep_summaries=keep_summaries, session_id=session_id)

    def expire(
        self, *, idle: timedelta | datetime, session_id: str | None = None, dry_run: bool = False
    ) -> list[Expiry]:
        """Remove whole sessions not written for ``idle`` (or since the moment ``idle``), each leaving expiries.

        A writer still holding an expired conversation gets ``SessionExpired``;
        :meth:`conversation` starts it afresh. See :mod:`contextledger.history.expiry`.

        Raises:
            ConfigurationError: ``idle`` is not a positive timedelta or a datetime.
        """
        from contextledger.history.expiry import expire

        needs(self.store, "expire")
        with self._rewriting(session_id):
            return expire(self.store, idle=idle, session_id=session_id, dry_run=dry_run)

    def expirations(self, session_id: str) -> list[Expiry]:
        """What expired of the session (``Ledger.expire``): which conversation, when, why, its last write."""
        return EXPIRY.of(self.store, "Ledger.expirations").expirations(session_id)

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """What was erased or pruned in the session: which entry, when, why."""
        return ERASURE.of(self.store, "Ledger.tombstones").tombstones(session_id, agent_id)

    def export_records(self, session_id: str, agent_id: str | None = None) -> list[ConversationRecords]:
        """Everything the session's conversations (or one agent's) hold, as ``contextledger export`` writes it.

        See :mod:`contextledger.history.transfer`.

        Raises:
            SessionNotFound: The session (or the agent) does not exist.
            ConcurrencyConflict: A conversation kept changing while it was read.
        """
        from contextledger.history.transfer import read_conversation

        needs(self.store, "export_records")
        agents = self.require_session(session_id)
        if agent_id is not None:
            if agent_id not in agents:
                raise SessionNotFound(f"session {session_id!r} has no agent {agent_id!r}")
            agents = [agent_id]
        found = [read_conversation(self.store, session_id, a) for a in agents]
        return [r for r in found if r is not None]

    def import_records(self, records: ConversationRecords) -> ImportOutcome:
        """Write one conversation's records exactly (ids, timestamps, versions...) in one atomic commit.

        Idempotent: ``"unchanged"`` when the conversation already holds exactly these
        records. The records are checked against the ledger's invariants and their ids
        against the id grammar (:mod:`contextledger.model.ids`) first; to load a whole file,
        parse it with :func:`contextledger.history.transfer.records_from_lines`, which checks every
        conversation in it before returning any. See
        :func:`contextledger.history.transfer.write_conversation`.

        Raises:
            ConversationExists: The conversation exists with different records (nothing is written).
            InvalidExport: The records are inconsistent, or an id breaks the grammar (nothing is written).
            InvalidMessage: A value cannot be stored as JSON (nothing is written).
        """
        from contextledger.history.lineage import register_forks
        from contextledger.history.transfer import write_conversation

        needs(self.store, "import_records")
        with self._rewriting(records.session_id):
            outcome = write_conversation(self.store, records)
        register_forks(self.store, [(records.session_id, records.agent_id)])
        return outcome

    def copy_to(
        self,
        target: _HoldsStore | LedgerStore,
        session_ids: Sequence[str] | None = None,
        *,
        on_conversation: Callable[[str, str, ImportOutcome], None] | None = None,
    ) -> CopyReport:
        """Copy sessions (default: all) to ``target`` (a ledger or a store), each conversation one atomic commit.

        Idempotent: copying again changes nothing.

        See :func:`contextledger.history.transfer.copy_sessions`.

        Raises:
            SessionNotFound: A session of ``session_ids`` is not in this ledger.
            ConversationExists: The target holds one of the conversations with different records.
        """
        from contextledger.history.lineage import register_copies, register_forks
        from contextledger.history.transfer import copy_sessions

        store = target if isinstance(target, LedgerStore) else target.store
        needs(self.store, "copy_to")
        needs(store, "copy_to target")
        report = copy_sessions(self.store, store, session_ids, on_conversation=on_conversation)
        pairs = [(sid, aid) for sid, aid, _ in report.conversations]
        register_forks(store, pairs)  # after the batch: a fork may be copied before its parent
        register_copies(self.store, store.url, pairs)
        return report

    def agents(self, session_id: str) -> list[str]:
        """Agent ids with a conversation in the session."""
        return HISTORY.of(self.store, "Ledger.agents").agents(session_id)

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first; only those of ``app`` and/or ``user`` when given.

        Raises:
            ConfigurationError: ``limit`` or ``offset`` is negative, or ``app`` / ``user`` is
                not ``None`` or a non-empty string.
        """
        check_owner(app, user)
        return SESSIONS.of(self.store, "Ledger.sessions").sessions(limit=limit, offset=offset, app=app, user=user)

    def owner(self, session_id: str) -> SessionOwner:
        """The app and user the session belongs to (each ``None`` when it was created without one).

        Raises:
            SessionNotFound: The session has no conversation.
        """
        found = SCOPES.of(self.store, "Ledger.owner").owner(session_id)
        if found is None:
            raise SessionNotFound(f"no session {session_id!r} in {self.url}")
        return found

    def app_state(self, app: str) -> dict[str, Any]:
        """The key/value state of ``app``, shared by all its users and sessions (``{}`` when none).

        Raises:
            ConfigurationError: ``app`` is not a non-empty string.
        """
        check_owner(_required(app, "app"), None)
        return SCOPES.of(self.store, "Ledger.app_state").scope_state(app)

    def user_state(self, app: str, user: str) -> dict[str, Any]:
        """The key/value state of ``user`` in ``app``, shared by that user's sessions (``{}`` when none).

        Raises:
            ConfigurationError: ``app`` or ``user`` is not a non-empty string.
        """
        check_owner(_required(app, "app"), _required(user, "user"))
        return SCOPES.of(self.store, "Ledger.user_state").scope_state(app, user)

    def update_app_state(self, app: str, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (one atomic write; other keys stay).

        Raises:
            ConfigurationError: ``app`` is not a non-empty string.
            InvalidMessage: ``delta`` is not a mapping of string keys to JSON values.
        """
        check_owner(_required(app, "app"), None)
        SCOPES.of(self.store, "Ledger.update_app_state").merge_scope_state(
            app, None, check_scope_delta(delta, "app state")
        )

    def update_user_state(self, app: str, user: str, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``user`` in ``app`` (one atomic write; other keys stay).

        Raises:
            ConfigurationError: ``app`` or ``user`` is not a non-empty string.
            InvalidMessage: ``delta`` is not a mapping of string keys to JSON values.
        """
        check_owner(_required(app, "app"), _required(user, "user"))
        SCOPES.of(self.store, "Ledger.update_user_state").merge_scope_state(
            app, user, check_scope_delta(delta, "user state")
        )

    def erase_user(self, app: str, user: str, *, reason: str) -> UserErasure:
        """Erase everything the ledger holds of ``user`` in ``app``: every session's entries, host state, user state.

        Each message of each of the user's sessions is erased as :meth:`erase` erases one
        (its content, revisions and the summaries covering it; a tombstone stays with the
        reason), the host state of their conversations is emptied, and the user's own state
        is deleted. See :func:`contextledger.history.users.erase_user`.

        Raises:
            ConfigurationError: ``reason`` is empty, or ``app`` / ``user`` is not a non-empty string.
        """
        from contextledger.history.users import erase_user

        check_owner(_required(app, "app"), _required(user, "user"))
        needs(self.store, "erase_user")
        with self._rewriting(None):
            return erase_user(self.store, app, user, reason=reason)

    def require_session(self, session_id: str) -> list[str]:
        """The session's agent ids.

        Raises:
            SessionNotFound: The session has no conversation.
        """
        agents = self.agents(session_id)
        if not agents:
            raise SessionNotFound(f"no session {session_id!r} in {self.url}")
        return agents

    def delete_session(self, session_id: str) -> bool:
        """Delete every entry, summary, revision and reduction of the session."""
        with self._rewriting(session_id):
            deleted = SESSIONS.of(self.store, "Ledger.delete_session").delete_session(session_id)
        logger.info("session_id=<%s>, deleted=<%s> | delete_session", session_id, deleted)
        return deleted

    def upgrade(self) -> None:
        """Bring the store's schema to this library's head (a no-op for schemaless stores)."""
        upgrade = getattr(self.store, "upgrade", None)
        if callable(upgrade):
            upgrade()

    def close(self) -> None:
        """Close the store: calls already running finish, every later call raises ``LedgerClosed``."""
        self.shared_views.forget()
        self.store.close()

    @contextmanager
    def _rewriting(self, session_id: str | None) -> Iterator[None]:
        """Around a write that is not a conversation's commit: the shared views of ``session_id`` (``None``: all) go.

        The version check alone keeps them from being served (these writes move it); they
        are dropped so that no erased text stays in memory after the call.
        """
        try:
            yield
        finally:
            self.shared_views.forget(session_id)

    def __enter__(self) -> Ledger:
        """Return self."""
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the store."""
        self.close()


def _required(value: object, name: str) -> str:
    """``value`` when it is a non-empty string (an app or a user that must be named).

    Raises:
        ConfigurationError: It is not.
    """
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"{name} must be a non-empty string, got {value!r}")
    return value
