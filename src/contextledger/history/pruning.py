"""Pruning: evicted history older than a cut-off deleted, never the active view.

:func:`prune` deletes evicted message entries (and their revisions) whose eviction is
older than a cut-off, and superseded summaries unless ``keep_summaries``; each pruned
entry leaves a tombstone (reason ``prune``), and the store is asked to make the bytes
leave its files.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from contextledger.errors import ConfigurationError
from contextledger.history.erasure import settle_erasure
from contextledger.history.redaction import PRUNE_REASON
from contextledger.model.records import Tombstone, utcnow
from contextledger.stores.base import LedgerStore
from contextledger.stores.capabilities import ERASURE, HISTORY, SESSIONS

__all__ = ["prune"]

logger = logging.getLogger(__name__)


def prune(
    store: LedgerStore,
    *,
    older_than: timedelta | datetime,
    keep_summaries: bool = True,
    session_id: str | None = None,
) -> list[Tombstone]:
    """Delete evicted history whose eviction is older than ``older_than``; never the active view.

    Args:
        store: The ledger's store.
        older_than: An age (``timedelta``) or a moment (``datetime``, naive means UTC).
        keep_summaries: Keep superseded and evicted summaries (default); ``False`` prunes them too.
        session_id: Only this session (default: every session).

    Returns:
        One tombstone (reason ``prune``) per entry deleted; each conversation's prune is one
        atomic operation.

    Raises:
        ConfigurationError: ``older_than`` is not a non-negative timedelta or a datetime.
    """
    now = utcnow()
    if isinstance(older_than, timedelta):
        if older_than < timedelta(0):
            raise ConfigurationError(f"older_than must not be negative, got {older_than}")
        cutoff = now - older_than
    elif isinstance(older_than, datetime):
        cutoff = older_than if older_than.tzinfo is not None else older_than.replace(tzinfo=UTC)
    else:
        raise ConfigurationError(f"older_than must be a timedelta or a datetime, got {type(older_than).__name__}")
    sessions = [session_id] if session_id is not None else _all_sessions(store)
    pruned: list[Tombstone] = []
    for sid in sessions:
        for agent in HISTORY.of(store, "erasure").agents(sid):
            old = [
                e
                for e in HISTORY.of(store, "erasure").evictions(sid, agent)
                if e.evicted_at < cutoff and (e.kind == "message" or not keep_summaries)
            ]
            if not old:
                continue
            tombstones = [
                Tombstone(session_id=sid, agent_id=agent, entry_id=e.entry_id, reason=PRUNE_REASON, erased_at=now)
                for e in old
            ]
            count = ERASURE.of(store, "erasure").prune(sid, agent, [e.entry_id for e in old], tombstones)
            deleted = {
                t.entry_id for t in ERASURE.of(store, "erasure").tombstones(sid, agent) if t.reason == PRUNE_REASON
            }
            pruned += [t for t in tombstones if t.entry_id in deleted]
            logger.info(
                "session_id=<%s>, agent_id=<%s>, pruned=<%d>, cutoff=<%s> | pruned evicted history",
                sid,
                agent,
                count,
                cutoff.isoformat(),
            )
    if pruned:
        pending = settle_erasure(store)
        if pending is not None:
            logger.warning("pruned=<%d> | %s", len(pruned), pending)
    return pruned


def _all_sessions(store: LedgerStore, page: int = 500) -> list[str]:
    out: list[str] = []
    while True:
        infos = SESSIONS.of(store, "erasure").sessions(limit=page, offset=len(out))
        out += [i.session_id for i in infos]
        if len(infos) < page:
            return out
