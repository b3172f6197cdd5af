"""The memory store's commit: a changeset checked whole, then applied, exactly once."""

from __future__ import annotations

import logging

from contextledger.core.changeset import Changeset
from contextledger.errors import ConcurrencyConflict, DuplicateEntry, EntryNotFound, SessionDeleted, SessionExpired
from contextledger.model.records import ConversationState, Revision, SessionOwner, utcnow
from contextledger.stores.base import check_owner, check_storable
from contextledger.stores.exactly_once import commit_exactly_once
from contextledger.stores.memory.data import NO_OWNER, MemoryData, Row, StoredConversation

__all__ = ["MemoryWrites"]

logger = logging.getLogger("contextledger.stores.memory")


class MemoryWrites:
    """The commit of the store contract."""

    def __init__(self, data: MemoryData) -> None:
        """Commit into ``data``."""
        self._d = data

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
        with self._d.gate.call():
            return commit_exactly_once(changeset, self._send, self._read_back)

    def _read_back(self, changeset: Changeset) -> int | None:
        """The version ``changeset`` produced, or ``None`` if it did not apply (see exactly_once)."""
        with self._d.lock:
            conv = self._d.conversations.get((changeset.session_id, changeset.agent_id))
            applied = _applied(conv, changeset)
            if applied is not None:
                return applied
            self._check_version(conv, changeset)
            return None

    def _check_version(self, conv: StoredConversation | None, changeset: Changeset) -> None:
        try:
            _check_version(conv, changeset)
        except SessionDeleted as exc:
            expiry = self._d.expired.get((changeset.session_id, changeset.agent_id))
            if expiry is not None:
                raise SessionExpired(f"{exc} (it expired: {expiry.reason})") from exc
            raise

    def _send(self, changeset: Changeset) -> int:
        key = (changeset.session_id, changeset.agent_id)
        with self._d.lock:
            conv = self._d.conversations.get(key)
            applied = _applied(conv, changeset)
            if applied is not None:
                return applied
            self._check_version(conv, changeset)
            staged = _validate(conv, changeset)
            if conv is None:
                session = changeset.session_id
                exists = any(sid == session for sid, _ in self._d.conversations)
                if exists:
                    check_owner(session, self._d.owners.get(session, NO_OWNER), changeset)
                conv = StoredConversation(state=ConversationState(session_id=session, agent_id=changeset.agent_id))
                self._d.conversations[key] = conv
                if not exists and (changeset.app is not None or changeset.user is not None):
                    self._d.owners[session] = SessionOwner(changeset.app, changeset.user)
            _apply(conv, changeset, staged)
            logger.debug(
                "session_id=<%s>, agent_id=<%s>, version=<%d> | committed changeset",
                changeset.session_id,
                changeset.agent_id,
                conv.state.version,
            )
            return conv.state.version


def _applied(conv: StoredConversation | None, cs: Changeset) -> int | None:
    """The version ``cs`` produced if the conversation's log holds it."""
    if conv is not None and conv.log.get(cs.new_version) == cs.changeset_id:
        return cs.new_version
    return None


def _check_version(conv: StoredConversation | None, cs: Changeset) -> None:
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


def _validate(conv: StoredConversation | None, cs: Changeset) -> set[str]:
    """Check every id the changeset references; return the ids it evicts."""
    rows = conv.rows if conv else {}
    summaries = conv.summaries if conv else {}
    appended = {e.entry_id for e in cs.appends}
    if len(appended) != len(cs.appends):
        raise DuplicateEntry("a changeset appends the same entry id twice")
    for entry_id in appended:
        if entry_id in rows or entry_id in summaries:
            raise DuplicateEntry(f"entry {entry_id} already exists in this conversation")
    if not (cs.restore or cs.evict or cs.summary or cs.revisions or cs.pins):
        return set()  # appends and state alone (every append, every model-call count): nothing else to check

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


def _apply(conv: StoredConversation, cs: Changeset, evicted: set[str]) -> None:
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
    if cs.appends:
        stamps = cs.stamps(now)
        for entry in cs.appends:
            conv.rows[entry.entry_id] = Row(
                seq=entry.seq, message=entry.message.stored_copy(), tokens=entry.tokens, **stamps
            )
    if cs.pins:
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
    conv.state = cs.state_after(conv.state, cs.new_version, at=now)
    conv.log[cs.new_version] = cs.changeset_id
