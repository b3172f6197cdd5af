"""The one protocol every ledger store implements."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, runtime_checkable

from contextledger.core.changeset import Changeset
from contextledger.errors import ContextLedgerError, CorruptRecord, InvalidMessage, SessionOwnerConflict
from contextledger.model.jsonvalues import check_plain_json, dumps_encoded
from contextledger.model.messages import Message
from contextledger.model.paging import Page
from contextledger.model.records import (
    ConversationState,
    EntryKind,
    Eviction,
    HistoryEntry,
    PinEvent,
    Reduction,
    Revision,
    SessionInfo,
    SessionOwner,
    Snapshot,
    SummaryEntry,
    Tombstone,
    Trigger,
)

if TYPE_CHECKING:
    from contextledger.model.bundle import ConversationRecords

__all__ = [
    "AppendedBy",
    "LedgerStore",
    "check_owner",
    "check_storable",
    "decoding",
    "owned",
]


@dataclass(frozen=True)
class AppendedBy:
    """The entries that existed at a cut: appended by a commit at or before it.

    Each bound that is set must hold (``None``: no bound). Rows written before 0.2 carry
    0 stamps and pass the call and version bounds, as :func:`contextledger.history.travel.view_at`
    treats them.

    Attributes:
        from_call: The entry's ``from_call`` is at most this (a model-call cut).
        version: The entry's ``version`` is at most this (a reduction cut).
        created_at: The entry was created at or before this time (a time cut).
    """

    from_call: int | None = None
    version: int | None = None
    created_at: datetime | None = None

    def admits(self, entry: HistoryEntry) -> bool:
        """Whether ``entry`` was appended at or before the cut."""
        return (
            (self.from_call is None or entry.from_call <= self.from_call)
            and (self.version is None or entry.version <= self.version)
            and (self.created_at is None or entry.created_at <= self.created_at)
        )


@runtime_checkable
class LedgerStore(Protocol):
    """Storage for conversation ledgers.

    Contract (checked by :mod:`contextledger.testing`, which every store must pass):

    * :meth:`commit` applies a changeset all-or-nothing, only when the stored version
      equals ``changeset.expected_version`` (0 = the conversation must not exist), and
      returns the new version; otherwise it raises ``ConcurrencyConflict`` and changes
      nothing.
    * :meth:`load` reads only the state and the active view, in order; its cost does not
      grow with evicted history.
    * Nothing is removed except by :meth:`delete_session`.
    * Driver errors surface as :class:`~contextledger.errors.StoreError` subclasses.
    * A changeset holding a value JSON cannot represent (see :func:`check_storable`)
      raises :class:`~contextledger.errors.InvalidMessage` and changes nothing.
    * Exactly once: the changeset id is stored with what it wrote. A commit whose reply
      is lost is resolved by reading that id back (see :func:`commit_exactly_once`): it
      returns the version when the changeset applied, else it is sent once more or fails
      with ``StoreUnavailable`` having applied nothing. A changeset sent again after it
      applied returns its version instead of a conflict.
    * A changeset planned on a version > 0 that finds no conversation raises
      :class:`~contextledger.errors.SessionDeleted`: a deleted session is never
      re-created by a writer that still holds it.
    * Every pin change is recorded as a :class:`~contextledger.model.records.PinEvent` in the
      same commit.
    * After :meth:`close` every call raises :class:`~contextledger.errors.LedgerClosed`;
      calls already running finish first.
    * A session belongs to the app and user named by the changeset that created it
      (:attr:`Changeset.app`, :attr:`Changeset.user`; ``None`` when not named) for its
      whole life; a changeset creating another conversation in it that names others
      raises :class:`~contextledger.errors.SessionOwnerConflict` and changes nothing.
      :meth:`sessions` filters by them, :meth:`owner` reads them.
    * Apps and their users have key/value state of their own (:meth:`scope_state`),
      outside every session: :meth:`merge_scope_state` sets keys atomically, and it stays
      when a session is deleted.
    """

    url: str

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """Return the state and active view, or ``None`` if the conversation is new."""
        ...

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The state :meth:`load` returns, read alone (no view), or ``None`` if the conversation is new."""
        ...

    def commit(self, changeset: Changeset) -> int:
        """Apply ``changeset`` atomically and return the new version."""
        ...

    def history(
        self, session_id: str, agent_id: str, *, include_evicted: bool = True, page: Page | None = None
    ) -> list[HistoryEntry]:
        """The message entries of the conversation in seq order: all of them, or one ``page``.

        A page is a range of seqs and a count from either end (see
        :class:`~contextledger.model.paging.Page`), always returned oldest first; a store
        reads that page's rows, not the whole history, where its layout allows.
        """
        ...

    def entries(
        self, session_id: str, agent_id: str, ids: Sequence[str], *, appended_by: AppendedBy | None = None
    ) -> list[HistoryEntry]:
        """The message entries of ``ids`` (active or evicted) in seq order; unknown ids are skipped.

        Reads those rows only, whatever the length of the history (time travel uses it).
        With ``appended_by``, only the entries it admits (appended at or before a cut) are
        returned -- filtered where the rows are read, so an early cut in a long
        conversation does not fetch the rows appended after it.
        """
        ...

    def erase(self, tombstone: Tombstone, erased: Message, summaries: Mapping[str, str]) -> None:
        """Erase one entry atomically and keep ``tombstone``.

        The entry's content and metadata become ``erased``'s, its revisions are deleted
        and each summary in ``summaries`` gets that text. The old bytes leave the store
        (see :mod:`contextledger.history.lifecycle`).
        """
        ...

    def prune(self, session_id: str, agent_id: str, entry_ids: Sequence[str], tombstones: Sequence[Tombstone]) -> int:
        """Delete the evicted entries among ``entry_ids`` atomically; return how many were.

        Never an active one; their revisions go with them, their tombstones stay.
        """
        ...

    def tombstones(self, session_id: str, agent_id: str | None = None) -> list[Tombstone]:
        """Erased and pruned entries of the session (or one agent), oldest first."""
        ...

    def import_conversation(self, records: ConversationRecords) -> bool:
        """Write one conversation's complete records in one atomic commit; ``False`` if it exists.

        Everything is written as given -- ids, timestamps, version, time-travel stamps,
        statuses, summary chains, pin events, tombstones -- so reading it back gives the
        same records. When the conversation already exists nothing is written and
        ``False`` is returned (the caller compares; see
        :func:`contextledger.history.transfer.write_conversation`).
        """
        ...

    def evictions(
        self,
        session_id: str,
        agent_id: str | None = None,
        *,
        trigger: Trigger | None = None,
        since: datetime | None = None,
        page: Page | None = None,
    ) -> list[Eviction]:
        """Evicted entries (messages and superseded summaries), oldest eviction first: all, or one ``page``.

        Ordered by :func:`~contextledger.model.paging.cursor`: ``(evicted_at, agent_id,
        seq, kind, entry_id)``.
        """
        ...

    def reductions(self, session_id: str, agent_id: str | None = None, *, page: Page | None = None) -> list[Reduction]:
        """Reductions in the order they were committed: all, or one ``page``.

        Ordered by :func:`~contextledger.model.paging.cursor`: ``(created_at, agent_id, version)``.
        """
        ...

    def summaries(
        self, session_id: str, agent_id: str | None = None, *, page: Page | None = None
    ) -> list[SummaryEntry]:
        """Every summary, superseded ones included, oldest first: all, or one ``page``.

        Ordered by :func:`~contextledger.model.paging.cursor`: ``(created_at, agent_id, summary_id)``.
        """
        ...

    def revisions(self, session_id: str, agent_id: str, message_id: str | None = None) -> list[Revision]:
        """Stored original contents, oldest first."""
        ...

    def pin_history(self, session_id: str, agent_id: str | None = None) -> list[PinEvent]:
        """Every pin and unpin of the session (or of one agent), in commit order."""
        ...

    def agents(self, session_id: str) -> list[str]:
        """Agent ids that have a conversation in the session, sorted."""
        ...

    def sessions(
        self, *, limit: int = 100, offset: int = 0, app: str | None = None, user: str | None = None
    ) -> list[SessionInfo]:
        """Sessions ordered by most recent update first, paged; only those of ``app`` / ``user`` when given."""
        ...

    def owner(self, session_id: str) -> SessionOwner | None:
        """The app and user the session was created for, or ``None`` when the session does not exist."""
        ...

    def scope_state(self, app: str, user: str | None = None) -> dict[str, Any]:
        """The key/value state of ``app`` (``user`` ``None``) or of one user of it; ``{}`` when none is stored."""
        ...

    def merge_scope_state(self, app: str, user: str | None, delta: Mapping[str, Any]) -> None:
        """Set the keys of ``delta`` in the state of ``app`` (or of its ``user``), atomically.

        Keys not in ``delta`` keep their values; concurrent merges of different keys both
        land. ``delta`` holds JSON values (see :func:`~contextledger.core.checks.check_scope_delta`).
        """
        ...

    def delete_scope_state(self, app: str, user: str | None) -> bool:
        """Remove the state of ``app`` (or of its ``user``); return whether there was any."""
        ...

    def delete_session(self, session_id: str) -> bool:
        """Remove every row of the session; return whether it existed."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


def check_owner(session_id: str, stored: SessionOwner, changeset: Changeset) -> None:
    """Refuse a changeset creating a conversation in a session that belongs to another app or user.

    A changeset naming neither app nor user is always accepted (it joins the session as it is).

    Raises:
        SessionOwnerConflict: The changeset names an app or user other than the session's.
    """
    if changeset.app is None and changeset.user is None:
        return
    if (changeset.app, changeset.user) != (stored.app, stored.user):
        raise SessionOwnerConflict(
            f"session {session_id!r} belongs to app={stored.app!r} user={stored.user!r};"
            f" a conversation for app={changeset.app!r} user={changeset.user!r} cannot join it"
        )


def owned(info_owner: SessionOwner, app: str | None, user: str | None) -> bool:
    """Whether a session of ``info_owner`` passes the ``app`` / ``user`` filter of ``sessions()``."""
    return (app is None or info_owner.app == app) and (user is None or info_owner.user == user)


def check_storable(changeset: Changeset) -> None:
    """Check that every JSON value of ``changeset`` can be stored, the same way on every backend.

    Content and metadata are kept as standard JSON (bytes tagged); manager and host
    state as plain JSON (bytes refused: see :func:`~contextledger.model.jsonvalues.check_plain_json`).
    Values JSON has no form for (sets, arbitrary objects) and non-finite floats (NaN and
    infinity, which PostgreSQL's ``json`` type refuses) are rejected before anything is
    written.

    Raises:
        InvalidMessage: A message, revision or state value cannot be stored as JSON.
    """
    for entry in changeset.appends:
        _check_json(entry.message.content, f"message {entry.entry_id}")
        _check_json(entry.message.metadata, f"message {entry.entry_id}")
    for revision in changeset.revisions:
        _check_json(revision.content, f"revised content of {revision.message_id}")
    if changeset.manager_state is not None:
        check_plain_json(changeset.manager_state, "manager state")
    if changeset.agent_state is not None:
        check_plain_json(changeset.agent_state, "agent state")


def _check_json(value: Any, what: str) -> None:
    try:
        dumps_encoded(value)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"{what} cannot be stored as JSON: {exc}") from exc


class EvictedCandidate(NamedTuple):
    """An evicted entry as a store reads it, before it is joined with its reduction."""

    entry_id: str
    kind: EntryKind
    seq: int
    role: str
    text: str
    evicted_by: str | None


def assemble_evictions(
    session_id: str,
    agent_id: str,
    candidates: Iterable[EvictedCandidate],
    reductions: Mapping[str, Reduction],
    summaries: Iterable[SummaryEntry],
    *,
    trigger: Trigger | None = None,
    since: datetime | None = None,
) -> list[Eviction]:
    """Join evicted entries with their reductions and replacing summaries, filtered.

    Shared by the stores that read a conversation's rows and join in Python (memory,
    Redis); the SQL store does the same join in one query.
    """
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)  # naive means UTC, as in the SQL store
    replaced_by = {rid: s.summary_id for s in summaries for rid in s.replaces}
    out: list[Eviction] = []
    for c in candidates:
        red = reductions.get(c.evicted_by or "")
        if red is None:
            continue
        if trigger is not None and red.trigger != trigger:
            continue
        if since is not None and red.created_at < since:
            continue
        out.append(
            Eviction(
                session_id=session_id,
                agent_id=agent_id,
                entry_id=c.entry_id,
                kind=c.kind,
                seq=c.seq,
                role=c.role,
                preview=preview(c.text),
                evicted_at=red.created_at,
                trigger=red.trigger,
                strategy=red.strategy,
                reduction_id=red.reduction_id,
                replaced_by_summary=replaced_by.get(c.entry_id),
                error=red.error,
            )
        )
    return out


def preview(text: str, width: int = 80) -> str:
    """A one-line preview of ``text`` for listings."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def sorted_unique(values: Sequence[str]) -> list[str]:
    """Sorted distinct values."""
    return sorted(set(values))


@contextmanager
def decoding(where: str, record_id: str | None = None) -> Iterator[None]:
    """Turn any failure to decode a stored value into :class:`CorruptRecord` naming it.

    A value damaged outside contextledger can fail in many ways (bad JSON, a missing
    field, a number that is not one, a record of the wrong shape); each is reported as
    the one typed error, with the table or key and the id, instead of a driver, JSON or
    pydantic error.
    """
    try:
        yield
    except CorruptRecord as exc:
        raise exc.located(where, record_id) from exc.__cause__
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, UnicodeDecodeError) as exc:
        if isinstance(exc, ContextLedgerError) and not isinstance(exc, InvalidMessage):
            raise
        detail = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise CorruptRecord(f"undecodable stored value: {detail}", where=where, record_id=record_id) from exc
