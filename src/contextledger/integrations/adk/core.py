"""The one source of every ADK session operation: synchronous, on a :class:`~contextledger.Ledger`.

:class:`~contextledger.integrations.adk.LedgerSessionService` runs these methods as its
coroutines (on a worker thread, as the async API runs the sync core) and as its ``*_sync``
methods; the model-call cycle of :class:`~contextledger.integrations.adk.LedgerPlugin`
runs here too, on the same conversation objects, so an append and a reduction never
race each other's version in one process.

An ADK session is one conversation (agent ``agent_id``, ``default`` unless given) of the
ledger session :func:`~contextledger.integrations.adk.events.ledger_session_id` names,
created for the ADK app and user. Its events are its messages (see
:mod:`~contextledger.integrations.adk.events`), its record the conversation's host state
(see :mod:`~contextledger.integrations.adk.record`), and its ``app:`` and ``user:``
state the ledger's app and user state.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from google.adk.events import Event
from google.adk.sessions import Session
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from contextledger.conversation.conversation import Conversation
from contextledger.core.changeset import Edit
from contextledger.core.hooks import AfterModelCallEvent, BeforeModelCallEvent, HookEvent
from contextledger.core.seam import INLINE, WouldWait
from contextledger.core.view import View
from contextledger.errors import DuplicateEntry
from contextledger.history.users import user_sessions
from contextledger.integrations.adk.compaction import compaction_plan
from contextledger.integrations.adk.errors import AdkSessionExists, AdkSessionNotFound, AdkStaleSession
from contextledger.integrations.adk.events import (
    Rendered,
    contents_of,
    event_to_message,
    ledger_session_id,
    message_to_event,
)
from contextledger.integrations.adk.record import SessionRecord, merged_state, split_state
from contextledger.ledger import Ledger
from contextledger.managers.base import ConversationManager
from contextledger.model.messages import Message
from contextledger.model.records import utcnow
from contextledger.stores.capabilities import HISTORY, TIME_TRAVEL

__all__ = ["STALE_SESSION_MESSAGE", "SessionCore"]

logger = logging.getLogger(__name__)

STALE_SESSION_MESSAGE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)
"""What a stale session is refused with: the message of ADK's own database service."""

ManagerFactory = Callable[[], ConversationManager | None]

RENDERED_KEPT = 16
"""Conversations whose model contents stay parsed between model calls (the ones that called last)."""


class SessionCore:
    """ADK's session operations on a sync ledger, with the conversations they use kept open.

    Args:
        ledger: The ledger (the methods block: the service runs them on worker threads).
        agent_id: The conversation of each session.
        manager: Makes the manager of each conversation (``None``: the view only grows).
        conversation_options: More :meth:`Ledger.conversation` options (``token_counter``,
            ``context_window_limit``, ``overflow_errors``, ``max_retries``).
        cache_size: Conversations kept open (least recently used ones are closed).
    """

    def __init__(
        self,
        ledger: Ledger,
        *,
        agent_id: str = "default",
        manager: ManagerFactory | None = None,
        conversation_options: dict[str, Any] | None = None,
        cache_size: int = 256,
    ) -> None:
        """See the class docstring."""
        self.ledger = ledger
        self.agent_id = agent_id
        self._manager = manager
        self._options = dict(conversation_options or {})
        self._cache: OrderedDict[str, Conversation] = OrderedDict()
        self._cache_size = cache_size
        # The model contents of the messages of the conversations that called the model last,
        # parsed once (contents_of): about 3 KB an entry, so only RENDERED_KEPT of them.
        self._rendered: OrderedDict[str, tuple[Conversation, Rendered]] = OrderedDict()
        self._guard = threading.Lock()

    # -- conversations ---------------------------------------------------------------------------

    def conversation(self, app_name: str, user_id: str, session_id: str) -> Conversation:
        """The conversation of an ADK session (opened once, then kept; opening only reads)."""
        key = ledger_session_id(app_name, user_id, session_id)
        with self._guard:
            found = self._cache.get(key)
            if found is not None:
                self._cache.move_to_end(key)
                return found
        manager = self._manager() if self._manager is not None else None
        opened = self.ledger.conversation(
            key, self.agent_id, manager=manager, app=app_name, user=user_id, **self._options
        )
        with self._guard:
            found = self._cache.setdefault(key, opened)
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return found

    def _open_conversation(self, key: str) -> Conversation | None:
        """The conversation of the ADK session ``key`` when it is open already (nothing is read)."""
        with self._guard:
            return self._cache.get(key)

    def _forget(self, key: str) -> None:
        with self._guard:
            self._cache.pop(key, None)

    # -- BaseSessionService ------------------------------------------------------------------------

    def create_session(
        self, app_name: str, user_id: str, state: dict[str, Any] | None, session_id: str | None
    ) -> Session:
        """Create the session with its initial state (``app:`` and ``user:`` keys go to the app and user).

        Raises:
            AdkSessionExists: The session exists (ADK's ``AlreadyExistsError``).
        """
        sid = (session_id.strip() if session_id else None) or str(uuid.uuid4())
        deltas = split_state(state)
        conversation = self.conversation(app_name, user_id, sid)
        conversation.refresh()  # a session deleted or created elsewhere since it was opened
        now = utcnow().timestamp()
        record = SessionRecord(app_name, user_id, sid, deltas.session, now)

        def build(_view: View) -> Edit:
            if conversation.version > 0:
                raise AdkSessionExists(f"Session with id {sid} already exists.")
            return Edit(agent_state=record.dump())

        conversation.edit(build)
        self._merge_scopes(app_name, user_id, deltas.app, deltas.user)
        logger.debug("session_id=<%s> | created ADK session", conversation.session_id)
        return Session(
            id=sid,
            app_name=app_name,
            user_id=user_id,
            state=merged_state(*self._scopes(app_name, user_id), record.state),
            last_update_time=now,
        )

    def get_session(
        self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None
    ) -> Session | None:
        """The session with its events (all, or as ``config`` filters them), or ``None``."""
        sid = session_id.strip() if session_id else session_id
        conversation = self.conversation(app_name, user_id, sid)
        stored = HISTORY.of(self.ledger.store, "the ADK session service").conversation_state(
            conversation.session_id, self.agent_id
        )
        if stored is None:
            return None
        if stored.version != conversation.version:  # written elsewhere since: the plugin's view follows
            conversation.refresh()
        record = SessionRecord.of(stored.agent_state, conversation.session_id)
        if record is None:
            return None
        events: list[Event] = []
        if config is None or config.num_recent_events != 0:
            events = [message_to_event(h) for h in self.ledger.history(conversation.session_id, self.agent_id)]
            if config is not None and config.after_timestamp is not None:
                after = config.after_timestamp
                events = [e for e in events if e.timestamp >= after]
            if config is not None and config.num_recent_events is not None:
                events = events[-config.num_recent_events :]
        return Session(
            id=sid,
            app_name=app_name,
            user_id=user_id,
            state=merged_state(*self._scopes(app_name, user_id), record.state),
            events=events,
            last_update_time=record.last_update_time,
        )

    def list_sessions(self, app_name: str, user_id: str | None) -> list[Session]:
        """Every session of the app (of one user), without events, oldest update first."""
        app_state = self.ledger.app_state(app_name)
        users: dict[str, dict[str, Any]] = {}
        out: list[Session] = []
        for key in user_sessions(self.ledger.store, app_name, user_id):
            state = HISTORY.of(self.ledger.store, "the ADK session service").conversation_state(
                key, self.agent_id
            )  # one read per session, no view
            record = SessionRecord.of(state.agent_state if state else None, key)
            if record is None:  # another agent's conversation of a ledger session, or deleted meanwhile
                continue
            if record.user_id not in users:
                users[record.user_id] = self.ledger.user_state(app_name, record.user_id)
            out.append(
                Session(
                    id=record.session_id,
                    app_name=app_name,
                    user_id=record.user_id,
                    state=merged_state(app_state, users[record.user_id], record.state),
                    last_update_time=record.last_update_time,
                )
            )
        out.sort(key=lambda s: (s.last_update_time, s.user_id, s.id))
        return out

    def delete_session(self, app_name: str, user_id: str, session_id: str) -> None:
        """Delete the session and its events (its app and user state stay)."""
        key = ledger_session_id(app_name, user_id, session_id.strip() if session_id else session_id)
        self._forget(key)
        self.ledger.delete_session(key)

    def user_state(self, app_name: str, user_id: str) -> dict[str, Any]:
        """The user's state, keys without the ``user:`` prefix."""
        return self.ledger.user_state(app_name, user_id)

    def append_event(self, session: Session, event: Event) -> None:
        """Store ``event`` (temp keys already trimmed) and its state changes.

        The event and the session-scoped state change are one commit; the ``app:`` and
        ``user:`` changes are merged into the app's and user's state right after it.

        Under the async API's :data:`~contextledger.core.seam.INLINE` (on the caller's
        event loop) it is that one commit or nothing: an event that needs a read first (the
        session's conversation not open yet, an id already stored) or a merge after it
        (``app:`` or ``user:`` changes), and a commit that would wait, raise
        :class:`~contextledger.core.seam.WouldWait` with nothing committed.

        Raises:
            AdkSessionNotFound: The session does not exist (ADK's ``SessionNotFoundError``).
            AdkStaleSession: The session was updated in the ledger since ``session`` was
                read (ADK's ``StaleSessionError``, with the message of its database service).
            WouldWait: Inline only, as above.
        """
        inline = INLINE.get()
        if inline:
            # On the caller's loop (the async API's inline call) only the event's one commit
            # may run: nothing here reads or waits before it, and nothing commits after it.
            conversation = self._read_conversation(session)
        else:
            conversation = self.conversation(session.app_name, session.user_id, session.id)
            if conversation.version == 0:
                conversation.refresh()  # opened before another process created the session
        deltas = split_state(event.actions.state_delta if event.actions is not None else None)
        if inline and (deltas.app or deltas.user):
            raise WouldWait("the app's and the user's state are merged after the event's commit")
        message = event_to_message(event)

        def build(view: View) -> Edit | None:
            record = SessionRecord.of(conversation.agent_state, conversation.session_id)
            if record is None:
                raise AdkSessionNotFound(f"Session {session.id} not found.")
            if record.last_update_time > session.last_update_time and not (
                session.events and session.events[-1].id == record.last_event_id
            ):
                raise AdkStaleSession(STALE_SESSION_MESSAGE)
            plan, compactions = compaction_plan(view, record, event)
            updated = SessionRecord(
                record.app_name,
                record.user_id,
                record.session_id,
                {**record.state, **deltas.session},
                event.timestamp,
                message.message_id,
                compactions,
            )
            return Edit(
                appends=(message,), agent_state=updated.dump(), plan=plan, trigger="end_of_invocation", as_given=True
            )

        try:
            conversation.edit(build)
        except DuplicateEntry:
            if inline:  # nothing was committed: a worker reads what is stored
                raise WouldWait("an event id already stored is read") from None
            if not self._stored_again(conversation, message):
                raise
            return  # the same event delivered again: stored once, its state applied once
        self._merge_scopes(session.app_name, session.user_id, deltas.app, deltas.user)

    def _stored_again(self, conversation: Conversation, message: Message) -> bool:
        found = TIME_TRAVEL.of(self.ledger.store, "the ADK session service").entries(
            conversation.session_id, self.agent_id, [message.message_id]
        )
        return bool(found) and found[0].message == message

    # -- the model-call cycle (LedgerPlugin) --------------------------------------------------------

    def prepare_model_call(self, session: Session) -> list[types.Content]:
        """Count a model call, let the manager reduce, and return the model input: the active view.

        The count rides with the next commit (the model's answer), so a call costs no commit
        of its own unless a reduction runs. Under :data:`~contextledger.core.seam.INLINE`
        it runs only when the session's conversation is open and read, and no callback but
        its manager's hears the call (else :class:`~contextledger.core.seam.WouldWait`,
        with nothing done); the manager's reductions commit inline too, or raise
        :class:`~contextledger.core.seam.WouldWait` where they would write a summary or wait.
        """
        conversation = self._call_conversation(session, BeforeModelCallEvent)
        conversation.before_model_call(defer_count=True)
        return contents_of(conversation.view, self._rendered_of(conversation))

    def finish_model_call(self, session: Session, error: BaseException | None) -> bool:
        """Report how the call ended; whether to call the model again (a reactive reduction committed).

        Under :data:`~contextledger.core.seam.INLINE`, as :meth:`prepare_model_call`: only
        when no callback but the manager's hears the end of the call.

        Raises:
            ReductionFailed: The context overflowed and nothing could be reduced.
            BaseException: ``error`` itself, when it is an overflow no manager handled.
            WouldWait: Inline only, as above.
        """
        conversation = self._call_conversation(session, AfterModelCallEvent)
        return conversation.after_model_call(error)

    def _rendered_of(self, conversation: Conversation) -> Rendered:
        """The contents rendered for ``conversation``'s model calls so far (new for one not among the last few)."""
        key = conversation.session_id
        with self._guard:
            found = self._rendered.get(key)
            if found is None or found[0] is not conversation:  # the session's conversation was opened again
                found = self._rendered[key] = (conversation, {})
            self._rendered.move_to_end(key)
            while len(self._rendered) > RENDERED_KEPT:
                self._rendered.popitem(last=False)
            return found[1]

    def _call_conversation(self, session: Session, event: type[HookEvent]) -> Conversation:
        """The conversation of ``session`` for a model-call callback firing ``event``.

        Raises:
            WouldWait: Under :data:`~contextledger.core.seam.INLINE`, when the callback
                might read or wait: the conversation not read yet, or a callback other than
                the manager's subscribed to ``event`` (one of the application's may block).
        """
        if not INLINE.get():
            return self.conversation(session.app_name, session.user_id, session.id)
        conversation = self._read_conversation(session)
        if not conversation.hooks.heard_only_by(event, conversation.manager):
            raise WouldWait("a callback hears the model call")  # one of the application's may block
        return conversation

    def _read_conversation(self, session: Session) -> Conversation:
        """The conversation of ``session`` when it is open here and was read (inline calls only).

        Raises:
            WouldWait: It is not open, or not read yet (it must be read on a worker first).
        """
        conversation = self._open_conversation(ledger_session_id(session.app_name, session.user_id, session.id))
        if conversation is None or not conversation.version:
            raise WouldWait("the session's conversation is read first")
        return conversation

    # -- app and user state ------------------------------------------------------------------------

    def _scopes(self, app_name: str, user_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        return self.ledger.app_state(app_name), self.ledger.user_state(app_name, user_id)

    def _merge_scopes(self, app_name: str, user_id: str, app: dict[str, Any], user: dict[str, Any]) -> None:
        if app:
            self.ledger.update_app_state(app_name, app)
        if user:
            self.ledger.update_user_state(app_name, user_id, user)
