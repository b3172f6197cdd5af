"""An in-process ledger store: the reference implementation of the store contract."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from contextledger.core.changeset import Changeset
from contextledger.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    DuplicateEntry,
    EntryNotFound,
    SessionDeleted,
    SessionExpired,
)
from contextledger.model.bundle import ConversationRecords, check_records
from contextledger.model.messages import Message
from contextledger.model.paging import WHOLE, Page, paged
from contextledger.model.records import (
    ConversationState,
    EntryStatus,
    Eviction,
    Expiry,
    HistoryEntry,
    LineageLink,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SessionOwner,
    Snapshot,
    SummaryEntry,
    Tombstone,
    Trigger,
    ViewEntry,
    utcnow,
)
from contextledger.stores.base import (
    AppendedBy,
    EvictedCandidate,
    assemble_evictions,
    check_owner,
    check_storable,
    owned,
)
from contextledger.stores.capabilities import Swap, swap_in
from contextledger.stores.exactly_once import commit_exactly_once
from contextledger.stores.lifecycle import Gate
from contextledger.stores.urls import mask

__all__ = ["MemoryStore"]

logger = logging.getLogger(__name__)

_NO_OWNER = SessionOwner(None, None)


@dataclass
class _Row:
    seq: int
    message: Message
    tokens: int
    created_at: datetime
    status: EntryStatus = "active"
    evicted_by: str | None = None
    revision_count: int = 0
    from_call: int = 0
    version: int = 0


@dataclass
class _Conversation:
    state: ConversationState
    rows: dict[str, _Row] = field(default_factory=dict)
    summaries: dict[str, SummaryEntry] = field(default_factory=dict)
    reductions: list[Reduction] = field(default_factory=list)
    revisions: list[Revision] = field(default_factory=list)
    pins: list[PinEvent] = field(default_factory=list)
    # version -> id of the changeset that produced it (the commit log, for exactly-once)
    log: dict[int, str] = field(default_factory=dict)
    tombstones: list[Tombstone] = field(default_factory=list)
    lineage: dict[str, LineageLink] = field(default_factory=dict)


class MemoryStore:
    """Keeps ledgers in a dict; thread-safe, lost when the process ends.

    Useful for tests and short-lived agents; it passes the same contract suite as the
    SQL and Redis stores.
    """

    def __init__(self, url: str = "memory://") -> None:
        """Create an empty store."""
        self.url = mask(url)
        self._lock = threading.RLock()
        self._data: dict[tuple[str, str], _Conversation] = {}
        self._owners: dict[str, SessionOwner] = {}  # session id -> the app and user it was created for
        self._scopes: dict[tuple[str, str | None], dict[str, str]] = {}  # (app, user) -> key -> JSON text
        self._expired: dict[tuple[str, str], Expiry] = {}
        self._gate = Gate(self.url)

    # -- reads ---------------------------------------------------------------------------

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """Return the state and active view, or ``None``."""
        with self._gate.call(), self._lock:
            conv = self._data.get((session_id, agent_id))
            if conv is None:
                return None
            entries = [
                ViewEntry(entry_id=mid, seq=r.seq, message=r.message.model_copy(deep=True), tokens=r.tokens)
                for mid, r in conv.rows.items()
                if r.status == "active"
            ]
            entries += [
                ViewEntry(entry_id=s.summary_id, kind="summary", seq=s.seq, message=s.to_message(), tokens=s.tokens)
                for s in conv.summaries.values()
                if s.status == "active"
            ]
            entries.sort(key=lambda e: (e.seq, e.kind != "summary"))
            return Snapshot(state=conv.state, entries=tuple(entries))

    def history(
        self, session_id: str, agent_id: str, *, include_evicted: bool = True, page: Page | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``page`` (default: all) in seq order; only the page's entries are copied."""
        page = page or WHOLE
        with self._gate.call(), self._lock:
            conv = self._data.get((session_id, agent_id))
            if conv is None:
                return []
            ranked = sorted(
                (r.seq, mid)
                for mid, r in conv.rows.items()
                if (include_evicted or r.status == "active") and page.admits(r.seq)
            )
            return self._history_of(conv, session_id, agent_id, {mid for _, mid in page.cut(ranked)})

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        With ``appended_by`` only those appended at or before its cut.
        """
        with self._gate.call(), self._lock:
            conv = self._data.get((session_id, agent_id))
            if conv is None:
                return []
            rows = self._history_of(conv, session_id, agent_id, set(ids))
            return rows if appended_by is None else [h for h in rows if appended_by.admits(h)]

    def _history_of(self, conv: _Conversation, session_id: str, agent_id: str, ids: set[str]) -> list[HistoryEntry]:
        out = [
            HistoryEntry(
                session_id=session_id,
                agent_id=agent_id,
                seq=r.seq,
                message=r.message.model_copy(deep=True),
                status=r.status,
                pinned=r.message.pinned,
                tokens=r.tokens,
                created_at=r.created_at,
                evicted_by=r.evicted_by,
                revision_count=r.revision_count,
                from_call=r.from_call,
                version=r.version,
            )
            for mid, r in conv.rows.items()
            if mid in ids
        ]
        return sorted(out, key=lambda h: h.seq)

    def _conversations(self, session_id: str, agent_id: str | None) -> list[_Conversation]:
        return [
            c
            for (sid, aid), c in sorted(self._data.items())
            if sid == session_id and (agent_id is None or aid == agent_id)
        ]

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        page: Page | None = None,
    ) -> list[Eviction]:
        """Evicted entries with when, why and which summary replaced them (or one page)."""
        with self._gate.call(), self._lock:
            out: list[Eviction] = []
            for conv in self._conversations(session_id, agent_id):
                candidates = [
                    EvictedCandidate(mid, "message", r.seq, r.message.role, r.message.plain_text, r.evicted_by)
                    for mid, r in conv.rows.items()
                    if r.status == "evicted"
                ]
                candidates += [
                    EvictedCandidate(s.summary_id, "summary", s.seq, "user", s.content, s.evicted_by)
                    for s in conv.summaries.values()
                    if s.status == "evicted"
                ]
                out += assemble_evictions(
                    session_id,
                    conv.state.agent_id,
                    candidates,
                    {r.reduction_id: r for r in conv.reductions},
                    conv.summaries.values(),
                    trigger=trigger,
                    since=since,
                )
            return paged(out, page)

    def reductions(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[Reduction]:
        """Reductions in commit order (or one page)."""
        with self._gate.call(), self._lock:
            return paged([r for c in self._conversations(session_id, agent_id) for r in c.reductions], page)

    def summaries(
        self, session_id: str, agent_id: str | None = None, *, page: Page | None = None
    ) -> list[SummaryEntry]:
        """All summaries, superseded included (or one page)."""
        with self._gate.call(), self._lock:
            return paged([s for c in self._conversations(session_id, agent_id) for s in c.summaries.values()], page)

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Original contents kept by revisions."""
        with self._gate.call(), self._lock:
            conv = self._data.get((session_id, agent_id))
            if conv is None:
                return []
            return [r for r in conv.revisions if message_id is None or r.message_id == message_id]

    def agents(self, session_id: str) -> list[str]:
        """Agent ids of the session."""
        with self._gate.call(), self._lock:
            return sorted(aid for sid, aid in self._data if sid == session_id)

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """Sessions, most recently updated first; only those of ``app`` / ``user`` when given.

        Raises:
            ConfigurationError: ``limit`` or ``offset`` is negative.
        """
        if limit < 0 or offset < 0:
            raise ConfigurationError(f"limit and offset must be >= 0, got limit={limit} offset={offset}")
        with self._gate.call(), self._lock:
            by_session: dict[str, list[_Conversation]] = {}
            for (sid, _), conv in self._data.items():
                if owned(self._owners.get(sid, _NO_OWNER), app, user):
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
                    app=self._owners.get(sid, _NO_OWNER).app,
                    user=self._owners.get(sid, _NO_OWNER).user,
                )
                for sid, convs in by_session.items()
            ]
            infos.sort(key=lambda i: (i.updated_at, i.session_id), reverse=True)
            return infos[offset : offset + limit]

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The conversation's state alone, or ``None``."""
        with self._gate.call(), self._lock:
            conv = self._data.get((session_id, agent_id))
            return None if conv is None else conv.state

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when it does not exist."""
        with self._gate.call(), self._lock:
            if not any(sid == session_id for sid, _ in self._data):
                return None
            return self._owners.get(session_id, _NO_OWNER)

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The state of ``app`` (or of one of its users); ``{}`` when none is stored."""
        with self._gate.call(), self._lock:
            stored = self._scopes.get((app, user), {})
            return {key: json.loads(value) for key, value in stored.items()}

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (or of its ``user``)."""
        encoded = {key: json.dumps(value, allow_nan=False) for key, value in delta.items()}
        with self._gate.call(), self._lock:
            if encoded:
                self._scopes.setdefault((app, user), {}).update(encoded)

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Remove the state of ``app`` (or of its ``user``); whether there was any."""
        with self._gate.call(), self._lock:
            return self._scopes.pop((app, user), None) is not None

    # -- writes --------------------------------------------------------------------------

    def commit(self, changeset: Changeset) -> int:
        """Apply ``changeset`` atomically (validated fully before anything changes).

        Raises:
            ConcurrencyConflict: The stored version is not ``changeset.expected_version``.
            SessionDeleted: The conversation was deleted since the changeset was planned.
            DuplicateEntry: An appended id already exists (or is appended twice).
            EntryNotFound: An evicted, revised or pinned id is not an active entry.
            InvalidMessage: A value cannot be stored as JSON.
            LedgerClosed: The store was closed.
        """
        check_storable(changeset)
        with self._gate.call():
            return commit_exactly_once(changeset, self._send, self._read_back)

    def _read_back(self, changeset: Changeset) -> int | None:
        """The version ``changeset`` produced, or ``None`` if it did not apply (see exactly_once)."""
        with self._lock:
            conv = self._data.get((changeset.session_id, changeset.agent_id))
            applied = _applied(conv, changeset)
            if applied is not None:
                return applied
            self._check_version(conv, changeset)
            return None

    def _check_version(self, conv: _Conversation | None, changeset: Changeset) -> None:
        try:
            _check_version(conv, changeset)
        except SessionDeleted as exc:
            expiry = self._expired.get((changeset.session_id, changeset.agent_id))
            if expiry is not None:
                raise SessionExpired(f"{exc} (it expired: {expiry.reason})") from exc
            raise

    def _send(self, changeset: Changeset) -> int:
        key = (changeset.session_id, changeset.agent_id)
        with self._lock:
            conv = self._data.get(key)
            applied = _applied(conv, changeset)
            if applied is not None:
                return applied
            self._check_version(conv, changeset)
            staged = _validate(conv, changeset)
            if conv is None:
                session = changeset.session_id
                exists = any(sid == session for sid, _ in self._data)
                if exists:
                    check_owner(session, self._owners.get(session, _NO_OWNER), changeset)
                conv = _Conversation(state=ConversationState(session_id=session, agent_id=changeset.agent_id))
                self._data[key] = conv
                if not exists and (changeset.app is not None or changeset.user is not None):
                    self._owners[session] = SessionOwner(changeset.app, changeset.user)
            _apply(conv, changeset, staged)
            logger.debug(
                "session_id=<%s>, agent_id=<%s>, version=<%d> | committed changeset",
                changeset.session_id,
                changeset.agent_id,
                conv.state.version,
            )
            return conv.state.version

    def pin_history(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or one agent), in commit order (or one page)."""
        with self._gate.call(), self._lock:
            return paged([e for c in self._conversations(session_id, agent_id) for e in c.pins], page)

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Replace an entry's content by ``erased``, drop its revisions, rewrite ``summaries``, keep ``tombstone``.

        Raises:
            EntryNotFound: The entry or a summary is not in the conversation (nothing changes).
        """
        with self._gate.call(), self._lock:
            conv = self._data.get((tombstone.session_id, tombstone.agent_id))
            if conv is None or tombstone.entry_id not in conv.rows:
                raise EntryNotFound(f"no message {tombstone.entry_id} in this conversation")
            missing = [s for s in summaries if s not in conv.summaries]
            if missing:
                raise EntryNotFound(f"no summary {missing[0]} in this conversation")
            row = conv.rows[tombstone.entry_id]
            row.message = erased.with_pin(row.message.pinned)
            row.revision_count = 0
            conv.revisions = [r for r in conv.revisions if r.message_id != tombstone.entry_id]
            for summary_id, text in summaries.items():
                conv.summaries[summary_id] = conv.summaries[summary_id].model_copy(update={"content": text})
            conv.tombstones.append(tombstone)
            # A new version: a conversation opened before the erase conflicts at its next
            # commit and re-reads, instead of planning (summarizing) the erased text it holds.
            conv.state = conv.state.model_copy(update={"version": conv.state.version + 1})

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Delete the evicted entries (messages or summaries) ``entry_ids``; keep ``tombstones``.

        Active entries are skipped, never deleted. Returns how many entries were deleted.
        """
        with self._gate.call(), self._lock:
            conv = self._data.get((session_id, agent_id))
            if conv is None:
                return 0
            gone: set[str] = set()
            for entry_id in entry_ids:
                if entry_id in conv.rows and conv.rows[entry_id].status == "evicted":
                    del conv.rows[entry_id]
                    gone.add(entry_id)
                elif entry_id in conv.summaries and conv.summaries[entry_id].status == "evicted":
                    del conv.summaries[entry_id]
                    gone.add(entry_id)
            conv.revisions = [r for r in conv.revisions if r.message_id not in gone]
            conv.tombstones += [t for t in tombstones if t.entry_id in gone]
            return len(gone)

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """Erased and pruned entries of the session (or one agent), oldest first."""
        with self._gate.call(), self._lock:
            out = [t for c in self._conversations(session_id, agent_id) for t in c.tombstones]
            return sorted(out, key=lambda t: t.erased_at)

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Write one conversation's records as they are; ``False`` (nothing written) if it exists."""
        check_records(records)
        key = (records.session_id, records.agent_id)
        with self._gate.call(), self._lock:
            if key in self._data:
                return False
            conv = _Conversation(state=records.state)
            for h in records.messages:
                conv.rows[h.message.message_id] = _Row(
                    seq=h.seq,
                    message=h.message.stored_copy(),
                    tokens=h.tokens,
                    created_at=h.created_at,
                    status=h.status,
                    evicted_by=h.evicted_by,
                    revision_count=h.revision_count,
                    from_call=h.from_call,
                    version=h.version,
                )
            conv.summaries = {s.summary_id: s for s in records.summaries}
            conv.reductions = list(records.reductions)
            conv.revisions = list(records.revisions)
            conv.pins = list(records.pins)
            conv.tombstones = list(records.tombstones)
            self._data[key] = conv
            return True

    def delete_session(self, session_id: str) -> bool:
        """Drop every conversation of the session (and what is remembered of its expiry)."""
        with self._gate.call(), self._lock:
            keys = [k for k in self._data if k[0] == session_id]
            for k in keys:
                del self._data[k]
            self._owners.pop(session_id, None)
            for k in [k for k in self._expired if k[0] == session_id]:
                del self._expired[k]
            return bool(keys)

    # -- lineage and expiry ----------------------------------------------------------------

    def add_lineage(self, links: Sequence[LineageLink]) -> int:
        """Record each link under its ancestor conversation when it exists; return how many were new."""
        with self._gate.call(), self._lock:
            added = 0
            for link in links:
                conv = self._data.get((link.session_id, link.agent_id))
                if conv is not None and link.key not in conv.lineage:
                    conv.lineage[link.key] = link
                    added += 1
            return added

    def lineage(self, session_id: str, agent_id: str | None = None) -> list[LineageLink]:
        """The links whose ancestor is the session (or the one agent), oldest first."""
        with self._gate.call(), self._lock:
            out = [link for c in self._conversations(session_id, agent_id) for link in c.lineage.values()]
            return sorted(out, key=lambda link: (link.created_at, link.depth, link.key))

    def expire_session(self, session_id: str, *, idle_before: datetime, reason: str) -> list[Expiry]:
        """Remove the session when none of its conversations was written at or after ``idle_before``."""
        with self._gate.call(), self._lock:
            keys = [k for k in self._data if k[0] == session_id]
            if not keys or any(self._data[k].state.updated_at >= idle_before for k in keys):
                return []
            now = utcnow()
            expiries = []
            for key in sorted(keys):
                expiry = Expiry(
                    session_id=key[0],
                    agent_id=key[1],
                    reason=reason,
                    expired_at=now,
                    last_write=self._data.pop(key).state.updated_at,
                )
                self._expired[key] = expiry
                expiries.append(expiry)
            self._owners.pop(session_id, None)  # the session is gone whole: so is who it belonged to
            return expiries

    def reseal(self, session_id: str, agent_id: str, swaps: Sequence[Swap]) -> int:
        """Replace sealed tokens where they still are (a key rotation); return how many were."""
        with self._gate.call(), self._lock:
            conv = self._data.get((session_id, agent_id))
            return 0 if conv is None else sum(_reseal(conv, sw) for sw in swaps)

    def expirations(self, session_id: str) -> list[Expiry]:
        """The expiries kept for the session, oldest first."""
        with self._gate.call(), self._lock:
            found = [e for k, e in self._expired.items() if k[0] == session_id]
            return sorted(found, key=lambda e: (e.expired_at, e.agent_id))

    def close(self) -> None:
        """Refuse further calls (there is nothing to release)."""
        self._gate.close(lambda: None)


def _reseal(conv: _Conversation, sw: Swap) -> bool:
    """Apply one swap to the conversation; whether its token was there."""
    if sw.where in ("content", "meta"):
        row = conv.rows.get(sw.ident)
        if row is None:
            return False
        record = row.message.to_record()
        field_name = "content" if sw.where == "content" else "metadata"
        value, hit = swap_in(record[field_name], sw.old, sw.new)
        if hit:
            row.message = Message.from_record({**record, field_name: value})
        return hit
    if sw.where == "summary":
        summary = conv.summaries.get(sw.ident)
        if summary is None or summary.content != sw.old:
            return False
        conv.summaries[sw.ident] = summary.model_copy(update={"content": sw.new})
        return True
    if sw.where == "revision":
        for i, rev in enumerate(conv.revisions):
            if rev.message_id == sw.ident and rev.number == sw.number:
                value, hit = swap_in([dict(b) for b in rev.original], sw.old, sw.new)
                if hit:
                    conv.revisions[i] = rev.model_copy(update={"original": value})
                return hit
        return False
    current = conv.state.manager_state if sw.where == "manager_state" else conv.state.agent_state
    value, hit = swap_in(current, sw.old, sw.new)
    if hit:
        conv.state = conv.state.model_copy(update={sw.where: value})
    return hit


def _applied(conv: _Conversation | None, cs: Changeset) -> int | None:
    """The version ``cs`` produced if the conversation's log holds it."""
    if conv is not None and conv.log.get(cs.new_version) == cs.changeset_id:
        return cs.new_version
    return None


def _check_version(conv: _Conversation | None, cs: Changeset) -> None:
    if conv is None and cs.expected_version > 0:
        raise SessionDeleted(
            f"session_id={cs.session_id} agent_id={cs.agent_id}: the conversation was deleted "
            f"(expected version {cs.expected_version}); it is not re-created"
        )
    current = conv.state.version if conv else 0
    if current != cs.expected_version:
        raise ConcurrencyConflict(
            f"session_id={cs.session_id} agent_id={cs.agent_id}: "
            f"expected version {cs.expected_version}, found {current}"
        )


def _validate(conv: _Conversation | None, cs: Changeset) -> set[str]:
    """Check every id the changeset references; return the ids it evicts."""
    rows = conv.rows if conv else {}
    summaries = conv.summaries if conv else {}
    appended = {e.entry_id for e in cs.appends}
    if len(appended) != len(cs.appends):
        raise DuplicateEntry("a changeset appends the same entry id twice")
    for entry_id in appended:
        if entry_id in rows or entry_id in summaries:
            raise DuplicateEntry(f"entry {entry_id} already exists in this conversation")

    def active_message(entry_id: str) -> bool:
        return (
            (entry_id in rows and rows[entry_id].status == "active")
            or entry_id in appended
            or (entry_id in restored and entry_id in rows)
        )

    def active_entry(entry_id: str) -> bool:
        return active_message(entry_id) or (
            entry_id in summaries and (summaries[entry_id].status == "active" or entry_id in restored)
        )

    for entry in cs.restore:
        row = rows.get(entry.entry_id)
        summary = summaries.get(entry.entry_id)
        if (row is None or row.status != "evicted") and (summary is None or summary.status != "evicted"):
            raise EntryNotFound(f"cannot restore {entry.entry_id}: not an evicted entry")
    restored = {e.entry_id for e in cs.restore}
    evicted = set(cs.evict) | (set(cs.summary.replaces) if cs.summary else set())
    for entry_id in evicted:
        if not active_entry(entry_id):
            raise EntryNotFound(f"cannot evict {entry_id}: not an active entry")
    for rev in cs.revisions:
        if not active_message(rev.message_id):
            raise EntryNotFound(f"cannot revise {rev.message_id}: not an active message")
    for entry_id in cs.pins:
        if not active_message(entry_id):
            raise EntryNotFound(f"cannot pin {entry_id}: not an active message")
    return evicted


def _apply(conv: _Conversation, cs: Changeset, evicted: set[str]) -> None:
    now = utcnow()
    for entry in cs.restore:  # first: a restored message may be revised by the same changeset
        if entry.entry_id in conv.rows:
            conv.rows[entry.entry_id].status = "active"
            conv.rows[entry.entry_id].evicted_by = None
        else:
            old = conv.summaries[entry.entry_id]
            conv.summaries[entry.entry_id] = old.model_copy(
                update={"status": "active", "superseded_by": None, "evicted_by": None}
            )
    for entry in cs.appends:
        conv.rows[entry.entry_id] = _Row(
            seq=entry.seq,
            message=entry.message.stored_copy(),
            tokens=entry.tokens,
            created_at=now,
            from_call=cs.from_call,
            version=cs.new_version,
        )
    for entry_id, pinned in cs.pins.items():
        row = conv.rows[entry_id]
        row.message = row.message.with_pin(pinned)
    conv.pins += cs.pin_events(now)
    reduction_id = cs.reduction.reduction_id if cs.reduction else None
    for rev in cs.revisions:
        row = conv.rows[rev.message_id]
        row.revision_count += 1
        conv.revisions.append(
            Revision(
                session_id=cs.session_id,
                agent_id=cs.agent_id,
                message_id=rev.message_id,
                number=row.revision_count,
                original=row.message.to_record()["content"],
                reason=rev.reason,
                reduction_id=reduction_id,
                created_at=now,
            )
        )
        row.message = row.message.with_content(rev.content)
        if rev.tokens is not None:
            row.tokens = rev.tokens
    for entry_id in evicted:
        if entry_id in conv.rows:
            conv.rows[entry_id].status = "evicted"
            conv.rows[entry_id].evicted_by = reduction_id
        else:
            old = conv.summaries[entry_id]
            superseded_by = cs.summary.summary_id if cs.summary and entry_id in cs.summary.replaces else None
            conv.summaries[entry_id] = old.model_copy(
                update={"status": "evicted", "superseded_by": superseded_by, "evicted_by": reduction_id}
            )
    if cs.summary is not None:
        conv.summaries[cs.summary.summary_id] = cs.summary
    if cs.reduction is not None:
        conv.reductions.append(cs.reduction)
    updates: dict[str, object] = {"version": cs.new_version, "updated_at": now}
    for name in ("model_call_count", "next_seq", "manager_state", "agent_state"):
        value = getattr(cs, name)
        if value is not None:
            updates[name] = value
    conv.state = conv.state.model_copy(update=updates)
    conv.log[cs.new_version] = cs.changeset_id
