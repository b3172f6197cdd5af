"""Data lifecycle: erase one entry for good, and prune old evicted history.

The ledger keeps everything a reduction removes; these are the explicit exceptions.

* :func:`erase` removes the content of one message entry, its revisions, and the text of
  every summary that covered it (directly or through a summary it superseded): those
  summaries are marked redacted, or re-summarized when a summarizer is given. A
  :class:`~contextledger.records.Tombstone` (entry id, when, why) stays, so the audit
  trail says that something was erased and why. The entry keeps its place (and its
  tool-pair structure, emptied) so the view stays one a provider accepts. One atomic
  operation on every store: the SQLite file is written with ``secure_delete`` and its
  WAL checkpointed, so the bytes leave the file; PostgreSQL leaves dead row versions
  until ``VACUUM`` (see the README); on Redis the keys hold the new values only.
* :func:`prune` deletes evicted message entries (and their revisions) whose eviction is
  older than a cut-off, and superseded summaries unless ``keep_summaries``; the active
  view is never touched, and each pruned entry leaves a tombstone (reason ``prune``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from contextledger.errors import ConfigurationError, EntryNotFound, SessionNotFound
from contextledger.messages import ContentBlock, Message
from contextledger.records import SummaryEntry, Tombstone, ViewEntry, utcnow
from contextledger.stores.base import LedgerStore

__all__ = ["ERASED_TEXT", "PRUNE_REASON", "REDACTED_TEXT", "erase", "erase_blocks", "prune", "summaries_covering"]

logger = logging.getLogger(__name__)

ERASED_TEXT = "[erased]"
"""What an erased block says in its place."""
REDACTED_TEXT = "[redacted: this summary covered an erased entry]"
"""The text of a summary that covered an erased entry (when no summarizer rewrites it)."""
PRUNE_REASON = "prune"
"""The reason on the tombstone of a pruned entry."""

Summarizer = Callable[[Sequence[ViewEntry]], str]


def erase_blocks(content: Sequence[ContentBlock]) -> list[ContentBlock]:
    """``content`` with every payload removed but its tool structure kept.

    Text, images, documents and reasoning become ``[erased]`` text; a toolUse keeps its id
    and name with an empty input; a toolResult keeps its id and status with ``[erased]``
    content -- so tool pairs stay pairs and the view stays valid.
    """
    out: list[ContentBlock] = []
    for block in content:
        if "toolUse" in block:
            use = block["toolUse"]
            out.append({"toolUse": {"toolUseId": use["toolUseId"], "name": use.get("name", "tool"), "input": {}}})
        elif "toolResult" in block:
            result = block["toolResult"]
            erased: dict[str, Any] = {"toolUseId": result["toolUseId"], "content": [{"text": ERASED_TEXT}]}
            if "status" in result:
                erased["status"] = result["status"]
            out.append({"toolResult": erased})
        else:
            out.append({"text": ERASED_TEXT})
    return out or [{"text": ERASED_TEXT}]


def summaries_covering(summaries: Sequence[SummaryEntry], entry_id: str) -> list[SummaryEntry]:
    """Every summary that replaced ``entry_id``, directly or through a summary it superseded."""
    covered = {entry_id}
    out: list[SummaryEntry] = []
    changed = True
    while changed:
        changed = False
        for summary in summaries:
            if summary.summary_id not in covered and covered & set(summary.replaces):
                covered.add(summary.summary_id)
                out.append(summary)
                changed = True
    return out


def erase(
    store: LedgerStore,
    session_id: str,
    entry_id: str,
    *,
    reason: str,
    summarizer: Summarizer | None = None,
    agent_id: str | None = None,
) -> Tombstone:
    """Erase the message ``entry_id`` for good and leave a tombstone.

    Args:
        store: The ledger's store.
        session_id: The session.
        entry_id: The message to erase (a message id; summaries are redacted through it).
        reason: Why (kept on the tombstone), e.g. ``"GDPR request 42"``.
        summarizer: Re-writes each summary that covered the entry from its entries with
            the erased one emptied; without it those summaries read ``[redacted...]``.
        agent_id: The agent (default: whichever agent of the session holds the entry).

    Returns:
        The tombstone.

    Raises:
        ConfigurationError: ``reason`` is empty.
        SessionNotFound: The session (or agent) does not exist.
        EntryNotFound: No message of the session has that id.
    """
    if not isinstance(reason, str) or not reason.strip():
        raise ConfigurationError("erase needs a reason (kept on the tombstone)")
    agents = store.agents(session_id)
    if agent_id is not None:
        agents = [a for a in agents if a == agent_id]
    if not agents:
        raise SessionNotFound(f"no session {session_id!r}" + (f" with agent {agent_id!r}" if agent_id else ""))
    for agent in agents:
        found = store.entries(session_id, agent, [entry_id])
        if found:
            break
    else:
        raise EntryNotFound(f"no message {entry_id!r} in session {session_id!r}")
    (row,) = found
    # Host metadata goes too; only the pin stays (it is not content, and the view keeps it).
    erased = Message(message_id=entry_id, role=row.message.role, content=erase_blocks(row.message.content)).with_pin(
        row.message.pinned
    )
    covering = summaries_covering(store.summaries(session_id, agent), entry_id)
    texts = {s.summary_id: REDACTED_TEXT for s in covering}
    if summarizer is not None and covering:
        texts = _resummarize(store, session_id, agent, covering, erased, summarizer)
    tombstone = Tombstone(
        session_id=session_id,
        agent_id=agent,
        entry_id=entry_id,
        reason=reason.strip(),
        erased_at=utcnow(),
        summaries=tuple(s.summary_id for s in covering),
    )
    store.erase(tombstone, erased, texts)
    logger.info(
        "session_id=<%s>, agent_id=<%s>, entry_id=<%s>, summaries=<%d> | erased",
        session_id,
        agent,
        entry_id,
        len(covering),
    )
    return tombstone


def _resummarize(
    store: LedgerStore,
    session_id: str,
    agent_id: str,
    covering: Sequence[SummaryEntry],
    erased: Message,
    summarizer: Summarizer,
) -> dict[str, str]:
    ids = {i for s in covering for i in s.replaces}
    rows = {h.message.message_id: h for h in store.entries(session_id, agent_id, sorted(ids))}
    texts: dict[str, str] = {}
    for summary in covering:  # oldest first: a superseding summary sees its predecessor rewritten
        entries: list[ViewEntry] = []
        for i in summary.replaces:
            if i == erased.message_id:
                entries.append(ViewEntry(entry_id=i, seq=rows[i].seq if i in rows else 0, message=erased))
            elif i in rows:
                entries.append(ViewEntry(entry_id=i, seq=rows[i].seq, message=rows[i].message, tokens=rows[i].tokens))
            elif i in texts:
                message = Message(message_id=i, role="user", content=[{"text": texts[i]}])
                entries.append(ViewEntry(entry_id=i, kind="summary", seq=0, message=message))
        texts[summary.summary_id] = summarizer(entries) if entries else REDACTED_TEXT
    return texts


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
        for agent in store.agents(sid):
            old = [
                e
                for e in store.evictions(sid, agent)
                if e.evicted_at < cutoff and (e.kind == "message" or not keep_summaries)
            ]
            if not old:
                continue
            tombstones = [
                Tombstone(session_id=sid, agent_id=agent, entry_id=e.entry_id, reason=PRUNE_REASON, erased_at=now)
                for e in old
            ]
            count = store.prune(sid, agent, [e.entry_id for e in old], tombstones)
            deleted = {t.entry_id for t in store.tombstones(sid, agent) if t.reason == PRUNE_REASON}
            pruned += [t for t in tombstones if t.entry_id in deleted]
            logger.info(
                "session_id=<%s>, agent_id=<%s>, pruned=<%d>, cutoff=<%s> | pruned evicted history",
                sid,
                agent,
                count,
                cutoff.isoformat(),
            )
    return pruned


def _all_sessions(store: LedgerStore, page: int = 500) -> list[str]:
    out: list[str] = []
    while True:
        infos = store.sessions(limit=page, offset=len(out))
        out += [i.session_id for i in infos]
        if len(infos) < page:
            return out
