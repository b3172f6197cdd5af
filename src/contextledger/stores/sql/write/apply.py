"""Applying a changeset inside a transaction the caller owns (it never commits).

The order of statements is what makes a changeset cheap and all-or-nothing:

1. The version check is the first write: ``UPDATE ... WHERE version = :expected``
   (or the conversation's first ``INSERT``). On PostgreSQL it locks the row, so
   concurrent writers of one conversation queue there; on SQLite the caller already
   holds the write lock. No row back means another commit won: ``ConcurrencyConflict``.
2. Appends are one executemany ``INSERT``; a duplicate id trips the unique key.
3. Only then are referenced ids validated, so entries appended by the same changeset
   can be evicted, revised or pinned; a missing id raises and the caller rolls back.
4. A reduction touches only the rows it changes (``UPDATE ... WHERE message_id IN (...)``).

The checks up front, the version check and the commit log are in
:mod:`~contextledger.stores.sql.write.guard` (shared with the one-statement append).

Appending a turn here is two statements: the version update and the insert. On
PostgreSQL the store does not come here for a changeset that only appends (and sets
state fields): :mod:`~contextledger.stores.sql.write.pg_append` sends it as one statement.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Table,
    bindparam,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError

from contextledger.core.changeset import Changeset
from contextledger.errors import (
    DuplicateEntry,
    EntryNotFound,
)
from contextledger.model.jsonvalues import encode_value
from contextledger.model.messages import Message
from contextledger.model.records import SummaryEntry, ViewEntry
from contextledger.stores.base import decoding
from contextledger.stores.sql.fields import (
    APPENDED_COLUMNS,
    APPENDED_CONSTANTS,
    APPENDED_FROM_ENTRY,
    PIN_EVENTS,
    REDUCTIONS,
    SUMMARIES,
)
from contextledger.stores.sql.models import (
    ChangesetRow,
    EntryRow,
    PinEventRow,
    ReductionRow,
    RevisionRow,
    SummaryRow,
    SummarySourceRow,
)

# Shared with the one-statement append path; importable from here as before the split.
from contextledger.stores.sql.write.guard import (
    CHUNK,
    STATE_FIELDS,
    bump,
    bump_statement,
    check_changeset,
    chunks,
    create,
    explain_missed_update,
    log_values,
    read_back,
)

__all__ = [
    "CHUNK",
    "ENTRY_COLUMNS",
    "ENTRY_INSERT_COLUMNS",
    "STATE_FIELDS",
    "appended_values",
    "apply_changeset",
    "bump_statement",
    "check_changeset",
    "chunks",
    "duplicate_appends",
    "entry_row",
    "entry_values",
    "explain_missed_update",
    "insert_summary_sources",
    "log_values",
    "read_back",
]


def _table(model: type[Any]) -> Table:
    # Core table of a model, for executemany with column-keyed dicts.
    table: Table = model.__table__
    return table


# The statements of a reduction, built once: Core statements with an expanding IN
# compile once per shape and hit SQLAlchemy's statement cache on every later commit.
_ENTRIES = _table(EntryRow)
_SUMMARIES = _table(SummaryRow)
_ACTIVE_MESSAGES = select(_ENTRIES.c.message_id).where(
    _ENTRIES.c.conversation_id == bindparam("cid"),
    _ENTRIES.c.status == "active",
    _ENTRIES.c.message_id.in_(bindparam("ids", expanding=True)),
)
_ACTIVE_SUMMARIES = select(_SUMMARIES.c.summary_id).where(
    _SUMMARIES.c.conversation_id == bindparam("cid"),
    _SUMMARIES.c.status == "active",
    _SUMMARIES.c.summary_id.in_(bindparam("ids", expanding=True)),
)
_EVICT_MESSAGES = (
    update(_ENTRIES)
    .where(_ENTRIES.c.conversation_id == bindparam("cid"), _ENTRIES.c.message_id.in_(bindparam("ids", expanding=True)))
    .values(status="evicted", evicted_by=bindparam("by"))
)
_EVICT_SUMMARIES = (
    update(_SUMMARIES)
    .where(
        _SUMMARIES.c.conversation_id == bindparam("cid"), _SUMMARIES.c.summary_id.in_(bindparam("ids", expanding=True))
    )
    .values(status="evicted", evicted_by=bindparam("by"), superseded_by=bindparam("next"))
)


@dataclass
class _Active:
    """An active message row as read for a revision or a pin."""

    pk: int
    message: Message
    tokens: int
    revision_count: int
    dirty: bool = False


def apply_changeset(conn: Connection, cs: Changeset, now: datetime) -> int:
    """Apply ``cs`` on ``conn`` (inside the caller's transaction) and return the new version.

    Raises:
        ConcurrencyConflict: The stored version is not ``cs.expected_version``.
        DuplicateEntry: An appended id already exists in the conversation (or twice in ``cs``).
        EntryNotFound: An evicted, revised or pinned id is not an active entry.
    """
    appended = check_changeset(cs)
    if cs.expected_version == 0:
        created = create(conn, cs, now)
        if created is None:
            return cs.new_version  # this very changeset created it before: nothing to do
        conversation_id = created
    else:
        bumped = bump(conn, cs, now, appended)
        if bumped is None:
            return cs.new_version  # this very changeset applied before: nothing to do
        conversation_id = bumped
    conn.execute(insert(_table(ChangesetRow)), log_values(conversation_id, cs, now))
    if cs.appends:
        _insert_entries(conn, conversation_id, cs, now)
    if cs.restore:
        from contextledger.stores.sql.restore import restore_entries

        restore_entries(conn, conversation_id, cs)
    evicted = set(cs.evict) | (set(cs.summary.replaces) if cs.summary else set())
    messages, summaries = _check_evictions(conn, conversation_id, evicted)
    touched = _load_touched(conn, conversation_id, cs)
    reduction_id = cs.reduction.reduction_id if cs.reduction else None
    if cs.reduction is not None:
        _insert_reduction(conn, conversation_id, cs)
    _apply_pins_and_revisions(conn, conversation_id, cs, touched, reduction_id, now)
    if cs.summary is not None:
        _insert_summary(conn, conversation_id, cs.summary, summaries)
    for batch in chunks(sorted(messages)):
        conn.execute(_EVICT_MESSAGES, {"cid": conversation_id, "ids": batch, "by": reduction_id})
    _evict_summaries(conn, conversation_id, cs, summaries, reduction_id)
    return cs.new_version


# The columns taken from the entries (in the order of a row of the PostgreSQL append's
# document), and every column an appended entry's INSERT writes: declared with the
# entries' mapping (see fields.ENTRIES).
ENTRY_COLUMNS = APPENDED_FROM_ENTRY
ENTRY_INSERT_COLUMNS = APPENDED_COLUMNS


def entry_row(entry: ViewEntry, encode: Callable[[Any], Any] = encode_value) -> tuple[Any, ...]:
    """The columns of an appended entry that come from the entry itself, in :data:`ENTRY_COLUMNS` order.

    Args:
        entry: The appended entry.
        encode: Turns content and metadata into what their JSON columns take: by default
            the JSON-safe records their bind processor encodes.
    """
    message = entry.message
    metadata = message.metadata
    # The order of fields.APPENDED_FROM_ENTRY (checked at import below). A pin is a flag in
    # the metadata: most messages have none, and are not asked (this runs for every row).
    return (
        entry.seq,
        entry.entry_id,
        message.role,
        encode(message.content),
        encode(metadata),
        message.pinned if metadata else False,
        entry.tokens,
    )


if ENTRY_COLUMNS != ("seq", "message_id", "role", "content", "metadata", "pinned", "tokens"):
    raise RuntimeError(f"entry_row() writes its values in another order than {ENTRY_COLUMNS}")  # pragma: no cover


def entry_values(entry: ViewEntry, encode: Callable[[Any], Any] = encode_value) -> dict[str, Any]:
    """:func:`entry_row` by column name."""
    return dict(zip(ENTRY_COLUMNS, entry_row(entry, encode), strict=True))


def appended_values(conversation_id: int, cs: Changeset, now: datetime | str) -> dict[str, Any]:
    """The columns every entry ``cs`` appends shares (the rest come from :func:`entry_values`).

    ``now`` is the commit's time, as a ``datetime`` or already in the form the driver
    takes (the SQLite hot path's text, see ``sqlite_hot._stamp``).
    """
    return {
        "conversation_id": conversation_id,
        **APPENDED_CONSTANTS,  # the record's defaults, by name (see fields.APPENDED_CONSTANTS)
        **cs.stamps(now),  # the stamps time travel reads (see contextledger.history.travel)
    }


def _insert_entries(conn: Connection, conversation_id: int, cs: Changeset, now: datetime) -> None:
    common = appended_values(conversation_id, cs, now)
    rows = [{**common, **entry_values(entry)} for entry in cs.appends]
    try:
        conn.execute(insert(_table(EntryRow)), rows)
    except IntegrityError as exc:
        raise duplicate_appends(cs) from exc


def duplicate_appends(cs: Changeset) -> DuplicateEntry:
    """The error for appends that the unique key of (conversation, message id) refused."""
    shown = ", ".join(e.entry_id for e in cs.appends[:5]) + (", ..." if len(cs.appends) > 5 else "")
    return DuplicateEntry(f"an appended entry already exists in this conversation (appending {shown})")


def _check_evictions(conn: Connection, conversation_id: int, evicted: set[str]) -> tuple[set[str], set[str]]:
    """Split the ids to evict into active messages and active summaries, or raise."""
    messages: set[str] = set()
    summaries: set[str] = set()
    for batch in chunks(sorted(evicted)):
        messages.update(conn.execute(_ACTIVE_MESSAGES, {"cid": conversation_id, "ids": batch}).scalars())
    rest = evicted - messages
    for batch in chunks(sorted(rest)):
        summaries.update(conn.execute(_ACTIVE_SUMMARIES, {"cid": conversation_id, "ids": batch}).scalars())
    missing = rest - summaries
    if missing:
        raise EntryNotFound(f"cannot evict {sorted(missing)[0]}: not an active entry")
    return messages, summaries


def _load_touched(conn: Connection, conversation_id: int, cs: Changeset) -> dict[str, _Active]:
    """Read the active messages a revision or a pin rewrites (validated like the memory store)."""
    wanted = {r.message_id for r in cs.revisions} | set(cs.pins)
    touched: dict[str, _Active] = {}
    for batch in chunks(sorted(wanted)):
        rows = conn.execute(
            select(
                EntryRow.id,
                EntryRow.message_id,
                EntryRow.role,
                EntryRow.content,
                EntryRow.metadata_.label("meta"),
                EntryRow.tokens,
                EntryRow.revision_count,
            ).where(
                EntryRow.conversation_id == conversation_id,
                EntryRow.status == "active",
                EntryRow.message_id.in_(batch),
            )
        )
        for row in rows:
            with decoding("cl_entries", row.message_id):
                message = Message.from_record(
                    {"message_id": row.message_id, "role": row.role, "content": row.content, "metadata": row.meta}
                )
            touched[row.message_id] = _Active(row.id, message, row.tokens, row.revision_count)
    for rev in cs.revisions:
        if rev.message_id not in touched:
            raise EntryNotFound(f"cannot revise {rev.message_id}: not an active message")
    for entry_id in cs.pins:
        if entry_id not in touched:
            raise EntryNotFound(f"cannot pin {entry_id}: not an active message")
    return touched


def _insert_reduction(conn: Connection, conversation_id: int, cs: Changeset) -> None:
    red = cs.reduction
    assert red is not None
    try:
        # Column-keyed parameters on the Core table: the compiled statement is cached
        # (a ``.values(...)`` on the ORM entity built a new cache key on every call).
        conn.execute(
            insert(_table(ReductionRow)),
            [{"conversation_id": conversation_id, **REDUCTIONS.values(red)}],
        )
    except IntegrityError as exc:
        raise DuplicateEntry(f"reduction {red.reduction_id} is already recorded in this conversation") from exc


def _apply_pins_and_revisions(
    conn: Connection,
    conversation_id: int,
    cs: Changeset,
    touched: dict[str, _Active],
    reduction_id: str | None,
    now: datetime,
) -> None:
    # Same order as the memory store: pins first, then revisions in changeset order.
    for entry_id, pinned in cs.pins.items():
        active = touched[entry_id]
        active.message = active.message.with_pin(pinned)
        active.dirty = True
    if cs.pins:
        conn.execute(
            insert(_table(PinEventRow)),
            [{"conversation_id": conversation_id, **PIN_EVENTS.values(e)} for e in cs.pin_events(now)],
        )
    revisions = []
    for rev in cs.revisions:
        active = touched[rev.message_id]
        active.revision_count += 1
        revisions.append(
            {
                "conversation_id": conversation_id,
                "message_id": rev.message_id,
                "number": active.revision_count,
                "original": active.message.to_record()["content"],
                "reason": rev.reason,
                "reduction_id": reduction_id,
                "created_at": now,
            }
        )
        active.message = active.message.with_content(rev.content)
        if rev.tokens is not None:
            active.tokens = rev.tokens
        active.dirty = True
    changed = [
        {
            "pk": a.pk,
            "new_content": record["content"],
            "new_metadata": record["metadata"],
            "new_pinned": a.message.pinned,
            "new_tokens": a.tokens,
            "new_revision_count": a.revision_count,
        }
        for a in touched.values()
        if a.dirty
        for record in [a.message.to_record()]
    ]
    if changed:
        table = _table(EntryRow)
        conn.execute(
            update(table)
            .where(table.c.id == bindparam("pk"))
            .values(
                content=bindparam("new_content"),
                metadata=bindparam("new_metadata"),
                pinned=bindparam("new_pinned"),
                tokens=bindparam("new_tokens"),
                revision_count=bindparam("new_revision_count"),
            ),
            changed,
        )
    if revisions:
        conn.execute(insert(_table(RevisionRow)), revisions)


def _insert_summary(conn: Connection, conversation_id: int, summary: SummaryEntry, summaries: set[str]) -> None:
    try:
        result = conn.execute(
            insert(_SUMMARIES),
            {"conversation_id": conversation_id, **SUMMARIES.values(summary)},
        )
    except IntegrityError as exc:
        raise DuplicateEntry(f"summary {summary.summary_id} already exists in this conversation") from exc
    key = result.inserted_primary_key
    assert key is not None
    insert_summary_sources(conn, conversation_id, key[0], summary, summaries)


def insert_summary_sources(
    conn: Connection, conversation_id: int, summary_row_id: int, summary: SummaryEntry, summaries: set[str]
) -> None:
    """Insert the rows naming what ``summary`` replaces, in order (each a message, or a summary in ``summaries``)."""
    if not summary.replaces:
        return
    conn.execute(
        insert(_table(SummarySourceRow)),
        [
            {
                "summary_row_id": summary_row_id,
                "position": position,
                "conversation_id": conversation_id,
                "entry_id": entry_id,
                "kind": "summary" if entry_id in summaries else "message",
            }
            for position, entry_id in enumerate(summary.replaces)
        ],
    )


def _evict_summaries(
    conn: Connection, conversation_id: int, cs: Changeset, summaries: set[str], reduction_id: str | None
) -> None:
    replaced = set(cs.summary.replaces) if cs.summary else set()
    superseded = sorted(summaries & replaced)
    dropped = sorted(summaries - replaced)
    for ids, superseded_by in ((superseded, cs.summary.summary_id if cs.summary else None), (dropped, None)):
        for batch in chunks(ids):
            conn.execute(
                _EVICT_SUMMARIES, {"cid": conversation_id, "ids": batch, "by": reduction_id, "next": superseded_by}
            )
