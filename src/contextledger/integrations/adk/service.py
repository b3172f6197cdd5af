"""``LedgerSessionService``: ADK's ``BaseSessionService`` on a contextledger ledger.

Every method is a shell over :class:`~contextledger.integrations.adk.core.SessionCore`:
the coroutines ADK calls run the core on the ledger's worker threads (as
:mod:`contextledger.aio` runs the sync core), one at a time per session; the ``*_sync``
methods -- the ones ADK's in-memory service offers -- run it directly, blocking.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any, TypeVar

from google.adk.events import Event
from google.adk.models.llm_request import LlmRequest
from google.adk.sessions import BaseSessionService, Session
from google.adk.sessions.base_session_service import GetSessionConfig, ListSessionsResponse
from typing_extensions import override

from contextledger.aio import AsyncLedger
from contextledger.aio.shell import run
from contextledger.core.seam import WouldWait, run_inline
from contextledger.errors import ConfigurationError
from contextledger.integrations.adk.core import ManagerFactory, SessionCore
from contextledger.integrations.adk.events import ledger_session_id
from contextledger.ledger import DEFAULT_URL, Ledger, open_store
from contextledger.model.tokens import TokenCounter
from contextledger.stores.urls import mask

__all__ = ["LedgerSessionService"]

R = TypeVar("R")


class LedgerSessionService(BaseSessionService):
    """ADK sessions kept in a contextledger ledger: ``Runner(..., session_service=LedgerSessionService(url))``.

    Each ADK session is a ledger session of its app and user (``contextledger sessions
    --app APP --user USER`` lists them): its events are kept losslessly, every reduction
    a manager or ADK's own compaction makes is recorded, and ``app:``/``user:`` state is
    the ledger's app and user state. Add :class:`~contextledger.integrations.adk.LedgerPlugin`
    to the app for managed context and recorded model input.

    Args:
        url: The ledger URL (default ``sqlite:///contextledger.db`` when no ``ledger`` is
            given), opened at first use and closed by :meth:`close`.
        ledger: An open ledger instead (not closed by the service): an
            :class:`~contextledger.aio.AsyncLedger` (the coroutines run on its worker
            threads) or a :class:`~contextledger.Ledger`.
        agent_id: The ledger conversation of each session.
        manager: Makes each session's conversation manager, e.g.
            ``lambda: SlidingWindowConversationManager(window_size=40)`` (``None``: the view
            only grows).
        token_counter: Per-message token estimates.
        context_window_limit: The model's context window (for proactive compression).
        overflow_errors: The model's context-overflow exception types (a reactive reduction
            follows one; :class:`~contextledger.errors.ContextWindowOverflowError` always counts).
        cache_size: Session conversations kept open.
        **options: Options of the store (``Ledger.connect``), with ``url`` only.

    Raises:
        ConfigurationError: Both ``url`` and ``ledger`` are given, ``ledger`` is not a
            ledger, ``manager`` is not callable, or an option is invalid.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        ledger: Ledger | AsyncLedger | None = None,
        agent_id: str = "default",
        manager: ManagerFactory | None = None,
        token_counter: TokenCounter | None = None,
        context_window_limit: int | None = None,
        overflow_errors: tuple[type[BaseException], ...] = (),
        cache_size: int = 256,
        **options: Any,
    ) -> None:
        """See the class docstring."""
        if url is not None and ledger is not None:
            raise ConfigurationError("give LedgerSessionService a url or a ledger, not both")
        if ledger is not None and not isinstance(ledger, Ledger | AsyncLedger):
            raise ConfigurationError(f"ledger must be a Ledger or an AsyncLedger, got {type(ledger).__name__}")
        if options and ledger is not None:
            raise ConfigurationError(f"store options go with a url, not with a ledger: {sorted(options)}")
        if manager is not None and not callable(manager):
            raise ConfigurationError(f"manager makes a manager per session: a callable, got {manager!r}")
        self._url = None if ledger is not None else (url or DEFAULT_URL)
        self._store_options = options
        self._ledger = ledger
        self._opened: AsyncLedger | None = None
        self._options: dict[str, Any] = {
            "agent_id": agent_id,
            "manager": manager,
            "conversation_options": {
                k: v
                for k, v in (
                    ("token_counter", token_counter),
                    ("context_window_limit", context_window_limit),
                    ("overflow_errors", tuple(overflow_errors)),
                )
                if v is not None
            },
            "cache_size": cache_size,
        }
        self._core: SessionCore | None = None
        if isinstance(ledger, Ledger):
            self._core = SessionCore(ledger, **self._options)
        elif isinstance(ledger, AsyncLedger):
            self._core = SessionCore(ledger.sync, **self._options)
        self._opening = asyncio.Lock()
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    # -- the core, per session one call at a time ---------------------------------------------------

    async def core(self) -> SessionCore:
        """The sync core (the ledger is opened from the URL at first use).

        Raises:
            InvalidLedgerURL: The URL is malformed or needs a driver that is not installed.
            StoreUnavailable: The ledger could not be reached.
        """
        if self._core is None:
            async with self._opening:
                if self._core is None:
                    self._opened = await AsyncLedger.connect(self._url or DEFAULT_URL, **self._store_options)
                    self._core = SessionCore(self._opened.sync, **self._options)
        return self._core

    async def ledger(self) -> AsyncLedger:
        """The ledger as an :class:`~contextledger.aio.AsyncLedger` (for queries: view_at, evictions...).

        Raises:
            ConfigurationError: The service was given a sync :class:`~contextledger.Ledger`.
        """
        await self.core()
        if self._opened is not None:
            return self._opened
        if isinstance(self._ledger, AsyncLedger):
            return self._ledger
        raise ConfigurationError("this service runs on a sync Ledger: query it directly")

    @asynccontextmanager
    async def _session(self, key: str) -> AsyncIterator[None]:
        """Hold the session ``key``: its calls run one at a time, in order (the lock is dropped when unused)."""
        lock, users = self._locks.get(key, (asyncio.Lock(), 0))
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[key]
            if users == 1:
                del self._locks[key]
            else:
                self._locks[key] = (lock, users - 1)

    async def _run(self, fn: Callable[..., R], *args: Any) -> R:
        """Run ``fn(*args)`` of the core on a worker thread of the ledger (or the process-wide runner)."""
        shell = self._opened if self._opened is not None else self._ledger
        if isinstance(shell, AsyncLedger):
            return await shell.runner.run(fn, *args)
        return await run(fn, *args)

    async def _inline_or_run(self, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` of the core on the calling thread when the ledger appends inline and it can, else on a worker.

        Inline (an :class:`~contextledger.aio.AsyncLedger` appending on the caller's thread:
        SQLite and in-memory stores by default) an event's one commit, or a model-call
        callback that neither reads nor writes, runs on the loop and nothing waits; where it
        would, nothing was done and the call runs again on a worker, as every other call
        (see :meth:`SessionCore.append_event`, :meth:`SessionCore.prepare_model_call`).
        """
        shell = self._opened if self._opened is not None else self._ledger
        if isinstance(shell, AsyncLedger) and shell.inline:
            done = run_inline(fn, *args)
            if not isinstance(done, WouldWait):
                return done
        return await self._run(fn, *args)  # not inline, or nothing was done inline

    async def _call(self, key: str, fn: Callable[..., R], *args: Any, inline: bool = False) -> R:
        """Run ``fn(*args)`` of the core, after the calls on the same session before it (``inline``: when it can)."""
        async with self._session(key):
            if inline:
                return await self._inline_or_run(fn, *args)
            return await self._run(fn, *args)

    def _sync_core(self) -> SessionCore:
        """The core for the blocking methods (the ledger is opened from the URL now if need be)."""
        if self._core is None:
            self._opened = AsyncLedger(open_store(self._url or DEFAULT_URL, **self._store_options))
            self._core = SessionCore(self._opened.sync, **self._options)
        return self._core

    # -- BaseSessionService ------------------------------------------------------------------------

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """Create a session (its ``app:``/``user:`` state goes to the app and user; ``temp:`` is dropped).

        Raises:
            AdkSessionExists: ``session_id`` is taken for this app and user (ADK's ``AlreadyExistsError``).
            InvalidMessage: A state value has no JSON form (it holds itself); nothing is created.
        """
        core = await self.core()
        key = ledger_session_id(app_name, user_id, session_id.strip()) if session_id and session_id.strip() else ""
        return await self._call(key, core.create_session, app_name, user_id, state, session_id)

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """The session with its events (``config``: only the newest, or those since a time), or ``None``."""
        core = await self.core()
        key = ledger_session_id(app_name, user_id, session_id.strip())
        return await self._call(key, core.get_session, app_name, user_id, session_id, config)

    @override
    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """The app's sessions (or one user's), without events, the least recently updated first."""
        core = await self.core()
        return ListSessionsResponse(sessions=await self._run(core.list_sessions, app_name, user_id))

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session and everything the ledger holds of it (its app and user state stay)."""
        core = await self.core()
        key = ledger_session_id(app_name, user_id, session_id.strip())
        await self._call(key, core.delete_session, app_name, user_id, session_id)

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state, keys without their ``user:`` prefix (``{}`` when none)."""
        core = await self.core()
        return await self._run(core.user_state, app_name, user_id)

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        """Store ``event`` with its state changes, then add it to ``session`` (a partial event is not stored).

        Raises:
            AdkStaleSession: ``session`` is older than the stored session (ADK's ``StaleSessionError``).
            AdkSessionNotFound: The session does not exist (ADK's ``SessionNotFoundError``).
            InvalidMessage: The event, or a value of its state delta, has no JSON form (it
                holds itself); nothing is stored.
        """
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        core = await self.core()
        key = ledger_session_id(session.app_name, session.user_id, session.id)
        async with self._session(key):  # the session in hand moves on before the next append is checked
            await self._inline_or_run(core.append_event, session, event)
            session.last_update_time = event.timestamp
            return self._commit_event_to_session(session, event)

    # -- the model-call cycle of LedgerPlugin ---------------------------------------------------------

    async def prepare_model_call(self, session: Session, llm_request: LlmRequest) -> None:
        """Count a model call of ``session``, let its manager reduce, and give the model the active view."""
        core = await self.core()
        key = ledger_session_id(session.app_name, session.user_id, session.id)
        llm_request.contents = await self._call(key, core.prepare_model_call, session, inline=True)

    async def finish_model_call(self, session: Session, error: BaseException | None = None) -> bool:
        """Report how a model call of ``session`` ended; whether to call the model again.

        Raises:
            ReductionFailed: The context overflowed and nothing could be reduced.
            BaseException: ``error`` itself, when it is an overflow no manager handled.
        """
        core = await self.core()
        key = ledger_session_id(session.app_name, session.user_id, session.id)
        return await self._call(key, core.finish_model_call, session, error, inline=True)

    # -- the synchronous methods of ADK's in-memory service -----------------------------------------

    def create_session_sync(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        """:meth:`create_session`, blocking (as ADK's in-memory service has it)."""
        return self._sync_core().create_session(app_name, user_id, state, session_id)

    def get_session_sync(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        """:meth:`get_session`, blocking."""
        return self._sync_core().get_session(app_name, user_id, session_id, config)

    def list_sessions_sync(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        """:meth:`list_sessions`, blocking."""
        return ListSessionsResponse(sessions=self._sync_core().list_sessions(app_name, user_id))

    def delete_session_sync(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """:meth:`delete_session`, blocking."""
        self._sync_core().delete_session(app_name, user_id, session_id)

    # -- lifetime -----------------------------------------------------------------------------------

    async def close(self) -> None:
        """Close the ledger the service opened from its URL (a ledger given to it stays open)."""
        if self._opened is not None:
            await self._opened.close()
            self._opened = None
            self._core = None

    async def __aenter__(self) -> LedgerSessionService:
        """Return self."""
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Close the ledger the service opened."""
        await self.close()

    def __repr__(self) -> str:
        where = mask(self._url) if self._url is not None else repr(self._ledger)
        return f"LedgerSessionService({where!r})"
