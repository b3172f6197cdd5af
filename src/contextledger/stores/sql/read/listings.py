"""The SQL store's listings, each one statement of :mod:`.statements` made records by :mod:`.records`.

Every function takes a :class:`~.runner.Runner` -- the engine's or the SQLite reader's --
so each listing is written once and runs on both paths:
``SQLStore.history`` -> :func:`history` -> one statement -> :func:`.records.history_entries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from contextledger.model.paging import WHOLE, Page
from contextledger.model.records import (
    Eviction,
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SessionOwner,
    SummaryEntry,
    Trigger,
)
from contextledger.stores.base import AppendedBy
from contextledger.stores.sql.read import records
from contextledger.stores.sql.read.runner import Runner

__all__ = [
    "agents",
    "entries",
    "evictions",
    "history",
    "lineage",
    "owner",
    "pin_history",
    "reductions",
    "revisions",
    "scope_state",
    "sessions",
    "summaries",
]

_CHUNK = 500
"""Values per ``IN (...)`` list, well under every engine's bound-parameter limit."""


def _chunks(values: Sequence[Any]) -> list[Sequence[Any]]:
    return [values[start : start + _CHUNK] for start in range(0, len(values), _CHUNK)]


def _page(page: Page, flags: tuple[str, ...], params: dict[str, Any]) -> tuple[str, ...]:
    """``flags`` with the page's, its values added to ``params`` (a tuple cursor by position: ``after_0``...)."""
    named = list(flags)
    for name, value in page.bounds().items():
        named.append(name)
        if isinstance(value, tuple):
            params.update((f"{name}_{i}", item) for i, item in enumerate(value))
        else:
            params[name] = value
    return tuple(sorted(named))


def _turned(found: list[Any], page: Page) -> list[Any]:
    """A page read newest first (``last``) turned round: a page is oldest first."""
    if page.last is not None:
        found.reverse()
    return found


def _session(session_id: str, agent_id: str | None) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The ``agent`` flag and the parameters of a listing of a session (or one of its agents)."""
    if agent_id is None:
        return (), {"session_id": session_id}
    return ("agent",), {"session_id": session_id, "agent_id": agent_id}


def history(
    run: Runner, session_id: str, agent_id: str, *, include_evicted: bool, page: Page = WHOLE
) -> list[HistoryEntry]:
    """The message entries of one page, in seq order: one statement that reads the page's rows only."""
    params: dict[str, Any] = {"session_id": session_id, "agent_id": agent_id}
    flags = _page(page, () if include_evicted else ("active_only",), params)
    found = records.history_entries(run("history", flags, params), session_id, agent_id, run.json_text)
    return _turned(found, page)


def entries(
    run: Runner, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None
) -> list[HistoryEntry]:
    """The message entries of ``ids`` (active or evicted) in seq order, bounded by ``appended_by``."""
    key = list(run("conversation_id", (), {"session_id": session_id, "agent_id": agent_id}))
    if not key:
        return []
    params: dict[str, Any] = {"conversation_id": key[0][0]}
    if appended_by is not None:
        bounds: dict[str, Any] = {
            "from_call": appended_by.from_call,
            "version": appended_by.version,
            "created_at": appended_by.created_at,
        }
        params.update((name, value) for name, value in bounds.items() if value is not None)
    flags = tuple(sorted(set(params) - {"conversation_id"}))
    out: list[HistoryEntry] = []
    for batch in _chunks(sorted(set(ids))):
        rows = run("entries", flags, {**params, "ids": batch})
        out += records.history_entries(rows, session_id, agent_id, run.json_text)
    return sorted(out, key=lambda h: h.seq)


def summaries(run: Runner, session_id: str, agent_id: str | None, *, page: Page = WHOLE) -> list[SummaryEntry]:
    """The summaries of ``page``, superseded ones included, oldest first (two statements, not one per row)."""
    flags, params = _session(session_id, agent_id)
    found = _turned(list(run("summaries", _page(page, flags, params), params).mappings()), page)
    replaces: dict[int, list[str]] = {}
    for batch in _chunks([s["id"] for s in found]):
        for row_id, entry_id in run("summary_sources", (), {"ids": batch}):
            replaces.setdefault(row_id, []).append(entry_id)
    return records.summaries(found, replaces, session_id)


def reductions(run: Runner, session_id: str, agent_id: str | None, *, page: Page = WHOLE) -> list[Reduction]:
    """The reductions of ``page``, in commit order."""
    flags, params = _session(session_id, agent_id)
    found = run("reductions", _page(page, flags, params), params)
    return _turned(records.reductions(found.mappings(), session_id), page)


def revisions(run: Runner, session_id: str, agent_id: str, message_id: str | None) -> list[Revision]:
    """Stored original contents, oldest first."""
    params = {"session_id": session_id, "agent_id": agent_id}
    if message_id is None:
        return records.revisions(run("revisions", (), params).mappings(), session_id, agent_id)
    found = run("revisions", ("message",), {**params, "message_id": message_id})
    return records.revisions(found.mappings(), session_id, agent_id)


def pin_history(run: Runner, session_id: str, agent_id: str | None, *, page: Page = WHOLE) -> list[PinEvent]:
    """The pin events of ``page``, in commit order."""
    flags, params = _session(session_id, agent_id)
    found = run("pin_history", _page(page, flags, params), params)
    return _turned(records.pin_events(found.mappings(), session_id), page)


def evictions(
    run: Runner,
    session_id: str,
    agent_id: str | None,
    *,
    trigger: Trigger | None,
    since: datetime | None,
    page: Page = WHOLE,
) -> list[Eviction]:
    """The evicted messages and summaries of ``page``, with their reduction and replacing summary: one statement."""
    flags, params = _session(session_id, agent_id)
    if trigger is not None:
        flags, params["trigger"] = (*flags, "trigger"), trigger
    if since is not None:
        flags, params["since"] = (*flags, "since"), since
    found = run("evictions", _page(page, flags, params), params)
    return _turned(records.evictions(found, session_id), page)


def agents(run: Runner, session_id: str) -> list[str]:
    """Agent ids of the session, sorted."""
    return [row[0] for row in run("agents", (), {"session_id": session_id})]


def sessions(
    run: Runner, *, limit: int, offset: int, app: str | None = None, user: str | None = None
) -> list[SessionInfo]:
    """One page of sessions (of ``app`` / ``user`` when given), most recently updated first (two statements)."""
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    if app is not None:
        params["app"] = app
    if user is not None:
        params["user"] = user
    flags = tuple(sorted(set(params) - {"limit", "offset"}))
    page = list(run("sessions", flags, params))
    if not page:
        return []
    details: list[Sequence[Any]] = []
    for batch in _chunks([p[0] for p in page]):
        details += run("session_details", (), {"ids": batch})
    return records.session_infos(page, details)


def owner(run: Runner, session_id: str) -> SessionOwner | None:
    """The app and user of the session, or ``None`` when it has no conversation."""
    found = list(run("owner", (), {"session_id": session_id}))
    return SessionOwner(found[0][0], found[0][1]) if found else None


def lineage(run: Runner, session_id: str, agent_id: str | None) -> list[LineageLink]:
    """The links kept under the session's conversations (or one agent's), oldest first."""
    flags, params = _session(session_id, agent_id)
    return records.lineage_links(run("lineage", flags, params).mappings(), session_id)


def scope_state(run: Runner, app: str, user: str | None) -> dict[str, Any]:
    """The key/value state of ``app`` (``user`` ``None``) or of one of its users."""
    return {key: value for key, value in run("scope_state", (), {"app": app, "user": user or ""})}
