"""The memory store's sessions: listing, owners, app/user state, deletion and expiry."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from contextledger.errors import ConfigurationError
from contextledger.model.records import ConversationState, Expiry, SessionInfo, SessionOwner, utcnow
from contextledger.stores.base import owned
from contextledger.stores.memory.data import NO_OWNER, MemoryData, StoredConversation

__all__ = ["MemorySessions"]


class MemorySessions:
    """The SESSIONS, owner, scope-state and expiry parts of the store contract."""

    def __init__(self, data: MemoryData) -> None:
        """Work on ``data``."""
        self._d = data

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first; only those of ``app`` / ``user`` when given.

        Raises:
            ConfigurationError: ``limit`` or ``offset`` is negative.
        """
        if limit < 0 or offset < 0:
            raise ConfigurationError(f"limit and offset must be >= 0, got limit={limit} offset={offset}")
        with self._d.guarded():
            by_session: dict[str, list[StoredConversation]] = {}
            for (sid, _), conv in self._d.conversations.items():
                if owned(self._d.owners.get(sid, NO_OWNER), app, user):
                    by_session.setdefault(sid, []).append(conv)
            infos = [
                SessionInfo(
                    session_id=sid,
                    agents=tuple(sorted(c.state.agent_id for c in convs)),
                    created_at=min(c.state.created_at for c in convs),
                    updated_at=max(c.state.updated_at for c in convs),
                    active_entries=sum(
                        sum(r.status == "active" for r in c.rows.values())
                        + sum(s.status == "active" for s in c.summaries.values())
                        for c in convs
                    ),
                    total_entries=sum(len(c.rows) + len(c.summaries) for c in convs),
                    app=self._d.owners.get(sid, NO_OWNER).app,
                    user=self._d.owners.get(sid, NO_OWNER).user,
                )
                for sid, convs in by_session.items()
            ]
            infos.sort(key=lambda i: (i.updated_at, i.session_id), reverse=True)
            return infos[offset : offset + limit]

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The conversation's state alone, or ``None``."""
        with self._d.guarded():
            conv = self._d.conversations.get((session_id, agent_id))
            return None if conv is None else conv.state

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when it does not exist."""
        with self._d.guarded():
            if not any(sid == session_id for sid, _ in self._d.conversations):
                return None
            return self._d.owners.get(session_id, NO_OWNER)

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The state of ``app`` (or of one of its users); ``{}`` when none is stored."""
        with self._d.guarded():
            stored = self._d.scopes.get((app, user), {})
            return {key: json.loads(value) for key, value in stored.items()}

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (or of its ``user``)."""
        encoded = {key: json.dumps(value, allow_nan=False) for key, value in delta.items()}
        with self._d.guarded():
            if encoded:
                self._d.scopes.setdefault((app, user), {}).update(encoded)

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Remove the state of ``app`` (or of its ``user``); whether there was any."""
        with self._d.guarded():
            return self._d.scopes.pop((app, user), None) is not None

    def delete_session(self, session_id: str) -> bool:
        """Drop every conversation of the session (and what is remembered of its expiry)."""
        with self._d.guarded():
            keys = [k for k in self._d.conversations if k[0] == session_id]
            for k in keys:
                del self._d.conversations[k]
            self._d.owners.pop(session_id, None)
            for k in [k for k in self._d.expired if k[0] == session_id]:
                del self._d.expired[k]
            return bool(keys)

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Remove the session when none of its conversations was written at or after ``idle_before``."""
        with self._d.guarded():
            keys = [k for k in self._d.conversations if k[0] == session_id]
            if not keys or any(self._d.conversations[k].state.updated_at >= idle_before for k in keys):
                return []
            now = utcnow()
            expiries = []
            for key in sorted(keys):
                expiry = Expiry(
                    session_id=key[0],
                    agent_id=key[1],
                    reason=reason,
                    expired_at=now,
                    last_write=self._d.conversations.pop(key).state.updated_at,
                )
                self._d.expired[key] = expiry
                expiries.append(expiry)
            self._d.owners.pop(session_id, None)  # the session is gone whole: so is who it belonged to
            return expiries

    def expirations(self, session_id: str) -> list[Expiry]:
        """The expiries kept for the session, oldest first."""
        with self._d.guarded():
            found = [e for k, e in self._d.expired.items() if k[0] == session_id]
            return sorted(found, key=lambda e: (e.expired_at, e.agent_id))
