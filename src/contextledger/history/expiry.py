"""Retention of whole sessions: expire the ones idle for longer than a period.

:func:`expire` removes every session none of whose conversations was written since the
cut-off, each in one atomic step on its store (the idleness is checked again where the
rows are, so a session written meanwhile is kept). What is left is one
:class:`~contextledger.model.records.Expiry` per conversation (which, when, why, its last
write) -- the tombstone of a whole conversation -- so a writer that still holds one gets
:class:`~contextledger.errors.SessionExpired`, and ``ledger.conversation()`` starts it
afresh. Lineage is kept: links live under the ancestors, so an erasure in a session
still reaches the forks of a fork that expired between them.

On Redis, ``ttl`` expires conversations on its own; :func:`expire` is the same rule for
every backend, run when you choose (``contextledger prune --idle 30d``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from contextledger.errors import ConfigurationError
from contextledger.model.records import Expiry, utcnow
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import HISTORY, SESSIONS, expiring

__all__ = ["expire", "idle_cutoff"]

logger = logging.getLogger(__name__)

_PAGE = 500


def idle_cutoff(idle: timedelta | datetime, *, now: datetime | None = None) -> datetime:
    """The moment before which a session's last write makes it idle.

    Raises:
        ConfigurationError: ``idle`` is not a positive timedelta or a datetime.
    """
    if isinstance(idle, timedelta):
        if idle <= timedelta(0):
            raise ConfigurationError(f"idle must be a positive period, got {idle}")
        return (now or utcnow()) - idle
    if isinstance(idle, datetime):
        return idle if idle.tzinfo is not None else idle.replace(tzinfo=UTC)
    raise ConfigurationError(f"idle must be a timedelta or a datetime, got {type(idle).__name__}")


def expire(
    store: LedgerStore,
    *,
    idle: timedelta | datetime,
    session_id: str | None = None,
    dry_run: bool = False,
) -> list[Expiry]:
    """Remove the sessions last written before ``idle`` ago (or before the moment ``idle``).

    Args:
        store: The ledger's store.
        idle: A period (``timedelta``) or a moment (``datetime``, naive means UTC).
        session_id: Only this session (default: every session).
        dry_run: Remove nothing; return what would expire.

    Returns:
        One expiry per conversation removed (or that would be), oldest session first.

    Raises:
        ConfigurationError: ``idle`` is invalid, or the store cannot expire sessions.
    """
    cutoff = idle_cutoff(idle)
    target = expiring(store)
    reason = f"idle since before {cutoff.isoformat()}"
    candidates = [(sid, agents, updated) for sid, agents, updated in _sessions(store, session_id) if updated < cutoff]
    candidates.sort(key=lambda c: c[2])
    out: list[Expiry] = []
    for sid, agents, updated in candidates:
        if dry_run:
            out += [Expiry(session_id=sid, agent_id=a, reason=reason, last_write=updated) for a in agents]
            continue
        expired = target.expire_session(sid, idle_before=cutoff, reason=reason)
        out += expired
        logger.info(
            "session_id=<%s>, agents=<%d>, cutoff=<%s> | %s",
            sid,
            len(expired),
            cutoff.isoformat(),
            "expired" if expired else "written meanwhile; kept",
        )
    return out


def _sessions(store: LedgerStore, session_id: str | None) -> list[tuple[str, tuple[str, ...], datetime]]:
    if session_id is None:
        return _all(store)
    agents = tuple(HISTORY.of(store, "expiry").agents(session_id))
    snapshots = [store.load(session_id, a) for a in agents]
    stamps = [s.state.updated_at for s in snapshots if s is not None]
    return [(session_id, agents, max(stamps))] if stamps else []


def _all(store: LedgerStore) -> list[tuple[str, tuple[str, ...], datetime]]:
    out: list[tuple[str, tuple[str, ...], datetime]] = []
    offset = 0
    while True:
        page = SESSIONS.of(store, "expiry").sessions(limit=_PAGE, offset=offset)
        out += [(i.session_id, i.agents, i.updated_at) for i in page if not i.damaged]
        if len(page) < _PAGE:
            return out
        offset += _PAGE
