"""Erase a user: every session of a user of an app, on the ledger's own erase path.

:func:`erase_user` is :func:`contextledger.history.erasure.erase` applied to every message of
every conversation of every session the user has in the app (so each leaves a tombstone
with the reason, and the summaries covering it are redacted), then the host state of
those conversations is emptied (one commit each: it may hold what the user said, as ADK's
session state does), and the user's own key/value state is deleted. The sessions stay,
emptied, so the tombstones stay queryable; :meth:`~contextledger.Ledger.delete_session`
removes a session with its tombstones.

Each erasure follows lineage as :func:`~contextledger.history.lifecycle.erase` does (the forks of
the user's sessions, which belong to the user too); the bytes are settled once, at the
end, and what may be left on disk or in copies in other ledgers is reported.

Running it again erases what was added since and leaves the rest as it is: an entry that
already has a tombstone is not erased twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from contextledger.conversation.conversation import Conversation
from contextledger.errors import ConfigurationError
from contextledger.history.erasure import erase, settle_erasure
from contextledger.model.records import LineageLink, Tombstone
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import ERASURE, HISTORY, SCOPES, SESSIONS

__all__ = ["UserErasure", "erase_user", "user_sessions"]

logger = logging.getLogger(__name__)

_PAGE = 500


@dataclass(frozen=True)
class UserErasure:
    """What :func:`erase_user` did.

    Attributes:
        app: The app.
        user: The user.
        sessions: The user's sessions, each erased.
        tombstones: One per message erased now, in the user's sessions and their forks
            (entries erased before are not counted).
        state_deleted: Whether the user had key/value state, now deleted.
        copies: Copies of the user's conversations in other ledgers (``copy_to``), not
            erased: erase there too.
        pending: ``None`` when the erased bytes have left the files; else why they may not
            have yet (see :meth:`~contextledger.Ledger.settle_erasure`).
    """

    app: str
    user: str
    sessions: tuple[str, ...]
    tombstones: tuple[Tombstone, ...]
    state_deleted: bool
    copies: tuple[LineageLink, ...] = ()
    pending: str | None = None


def user_sessions(store: LedgerStore, app: str | None, user: str | None) -> list[str]:
    """Every session id of ``app`` / ``user``, most recently updated first (read page by page)."""
    found: list[str] = []
    while True:
        page = SESSIONS.of(store, "erase_user").sessions(limit=_PAGE, offset=len(found), app=app, user=user)
        found += [info.session_id for info in page]
        if len(page) < _PAGE:
            return found


def erase_user(store: LedgerStore, app: str, user: str, *, reason: str) -> UserErasure:
    """Erase every session and the state of ``user`` in ``app`` (see the module docstring).

    Args:
        store: The ledger's store.
        app: The app.
        user: The user.
        reason: Why (kept on every tombstone), e.g. ``"GDPR request 42"``.

    Returns:
        What was erased.

    Raises:
        ConfigurationError: ``reason`` is empty.
    """
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigurationError("erase_user needs a reason (kept on every tombstone)")
    sessions = user_sessions(store, app, user)
    tombstones: list[Tombstone] = []
    copies: dict[str, LineageLink] = {}
    for session_id in sessions:
        for agent_id in HISTORY.of(store, "erase_user").agents(session_id):
            erased = {t.entry_id for t in ERASURE.of(store, "erase_user").tombstones(session_id, agent_id)}
            for entry in HISTORY.of(store, "erase_user").history(session_id, agent_id):
                entry_id = entry.message.message_id
                if entry_id in erased:
                    continue
                # Settled once at the end, not after every entry.
                erasure = erase(store, session_id, entry_id, reason=reason, agent_id=agent_id, settle_timeout=0)
                tombstones += erasure.tombstones
                copies.update((link.key, link) for link in erasure.copies)
            state = HISTORY.of(store, "erase_user").conversation_state(session_id, agent_id)
            if state is not None and state.agent_state:
                Conversation(store, session_id, agent_id, repair=False).set_agent_state({})
    state_deleted = SCOPES.of(store, "erase_user").delete_scope_state(app, user)
    pending = settle_erasure(store) if tombstones else None
    logger.info(
        "app=<%s>, user=<%s>, sessions=<%d>, erased=<%d>, state_deleted=<%s> | erased user",
        app,
        user,
        len(sessions),
        len(tombstones),
        state_deleted,
    )
    return UserErasure(app, user, tuple(sessions), tuple(tombstones), state_deleted, tuple(copies.values()), pending)
