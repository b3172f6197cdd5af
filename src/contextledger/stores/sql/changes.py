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

Appending a turn here is two statements: the version update and the insert. On
PostgreSQL the store does not come here for a changeset that only appends (and sets
state fields): :mod:`~contextledger.stores.sql.appends` sends it as one statement.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    String,
    Table,
    Update,
    and_,
    bindparam,
    exists,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from contextledger.changeset import Changeset
from contextledger.errors import (
    ConcurrencyConflict,
    ConfigurationError,
    DuplicateEntry,
    EntryNotFound,
    InvalidMessage,
    SessionDeleted,
)
from contextledger.messages import Message
from contextledger.records import SummaryEntry, ViewEntry
from contextledger.stores.base import decoding
from contextledger.stores.sql.models import (
    ID_LENGTH,
    ChangesetRow,
    ConversationRow,
    EntryRow,
    PinEventRow,
    ReductionRow,
    RevisionRow,
    SessionRow,
    SummaryRow,
    SummarySourceRow,
    UTCDateTime,
)

__all__ = [
    "CHUNK",
    "STATE_FIELDS",
    "apply_changeset",
    "check_changeset",
    "chunks",
    "duplicate_appends",
    "entry_values",
    "explain_missed_update",
    "log_values",
    "read_back",
]

CHUNK = 500
"""Ids per ``IN (...)`` list: below SQLite's and PostgreSQL's bound-parameter limits."""

_T = TypeVar("_T")


def _table(model: type[Any]) -> Table:
    # Core table of a model, for executemany with column-keyed dicts.
    table: Table = model.__table__
    return table


def chunks(values: Iterable[_T], size: int = CHUNK) -> Iterator[list[_T]]:
    """Split ``values`` into lists of at most ``size``."""
    batch: list[_T] = []
    for value in values:
        batch.append(value)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


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
        created = _create(conn, cs, now)
        if created is None:
            return cs.new_version  # this very changeset created it before: nothing to do
        conversation_id = created
    else:
        bumped = _bump(conn, cs, now, appended)
        if bumped is None:
            return cs.new_version  # this very changeset applied before: nothing to do
        conversation_id = bumped
    conn.execute(insert(_table(ChangesetRow)), log_values(conversation_id, cs, now))
    if cs.appends:
        _insert_entries(conn, conversation_id, cs, now)
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
        conn.execute(
            update(EntryRow)
            .where(EntryRow.conversation_id == conversation_id, EntryRow.message_id.in_(batch))
            .values(status="evicted", evicted_by=reduction_id)
        )
    _evict_summaries(conn, conversation_id, cs, summaries, reduction_id)
    return cs.new_version


def check_changeset(cs: Changeset) -> list[str]:
    """Check what the database would refuse mid-way, before any statement; return the appended ids.

    Raises:
        ConfigurationError: A session, agent, reduction id, strategy, summarizer or
            revision reason is longer than its column.
        InvalidMessage: An appended or summary id is longer than its column.
        DuplicateEntry: The changeset appends one id twice.
    """
    _check_lengths(cs)
    appended = [e.entry_id for e in cs.appends]
    if len(set(appended)) != len(appended):
        raise DuplicateEntry("a changeset appends the same entry id twice")
    return appended


def _check_lengths(cs: Changeset) -> None:
    """Reject ids longer than their columns up front, the same way on every engine."""

    def check(kind: str, value: str | None, error: type[Exception]) -> None:
        if value is not None and len(value) > ID_LENGTH:
            raise error(f"{kind} is {len(value)} characters long; the SQL ledger stores at most {ID_LENGTH}")

    check("session_id", cs.session_id, ConfigurationError)
    check("agent_id", cs.agent_id, ConfigurationError)
    for entry in cs.appends:
        check(f"message id {entry.entry_id[:20]}...", entry.entry_id, InvalidMessage)
    for rev in cs.revisions:
        check("revision reason", rev.reason, ConfigurationError)
    if cs.summary is not None:
        check("summary id", cs.summary.summary_id, InvalidMessage)
        check("summarizer", cs.summary.summarizer, ConfigurationError)
    if cs.reduction is not None:
        check("reduction id", cs.reduction.reduction_id, ConfigurationError)
        check("strategy", cs.reduction.strategy, ConfigurationError)


def log_values(conversation_id: int, cs: Changeset, now: datetime) -> dict[str, Any]:
    """The commit-log row of ``cs`` (see :class:`~contextledger.stores.sql.models.ChangesetRow`)."""
    return {
        "conversation_id": conversation_id,
        "version": cs.new_version,
        "changeset_id": cs.changeset_id,
        "created_at": now,
    }


def _logged(conn: Connection, conversation_id: int, cs: Changeset) -> bool:
    """Whether the commit log says ``cs`` produced version ``cs.new_version``."""
    logged = conn.execute(
        select(ChangesetRow.changeset_id).where(
            ChangesetRow.conversation_id == conversation_id, ChangesetRow.version == cs.new_version
        )
    ).scalar()
    return logged == cs.changeset_id


def read_back(conn: Connection, cs: Changeset) -> int | None:
    """Whether ``cs`` applied, after its reply was lost (see :mod:`contextledger.stores.exactly_once`).

    On PostgreSQL, with ``conn`` in autocommit mode, the conversation row is first locked
    ``FOR SHARE`` by a statement of its own: a transaction of the lost commit still
    running holds the row's lock, so this waits for its outcome, and the next statement
    (a fresh snapshot) sees it.

    Returns:
        ``cs.new_version`` when the commit log holds ``cs``; ``None`` when it does not and
        the conversation is still at ``cs.expected_version`` (or, for a creation, absent).

    Raises:
        ConcurrencyConflict: ``cs`` did not apply and another commit moved the conversation on.
        SessionDeleted: ``cs`` did not apply and the conversation is gone.
    """
    where = (ConversationRow.session_id == cs.session_id, ConversationRow.agent_id == cs.agent_id)
    if conn.dialect.name == "postgresql":
        conn.execute(select(ConversationRow.id).where(*where).with_for_update(read=True)).all()
    found = conn.execute(select(ConversationRow.id, ConversationRow.version).where(*where)).first()
    if found is None:
        if cs.expected_version > 0:
            raise _deleted(cs)
        return None
    if _logged(conn, found.id, cs):
        return cs.new_version
    if found.version != cs.expected_version:
        raise _conflict(cs, found.version)
    return None


def _deleted(cs: Changeset) -> SessionDeleted:
    return SessionDeleted(
        f"session_id={cs.session_id} agent_id={cs.agent_id}: the conversation was deleted "
        f"(expected version {cs.expected_version}); it is not re-created"
    )


def _conflict(cs: Changeset, found: int) -> ConcurrencyConflict:
    return ConcurrencyConflict(
        f"session_id={cs.session_id} agent_id={cs.agent_id}: expected version {cs.expected_version}, found {found}"
    )


def _create(conn: Connection, cs: Changeset, now: datetime) -> int | None:
    """Insert the conversation of a changeset planned on version 0; ``None`` if this changeset already did."""
    existing = conn.execute(
        select(ConversationRow.id, ConversationRow.version).where(
            ConversationRow.session_id == cs.session_id, ConversationRow.agent_id == cs.agent_id
        )
    ).first()
    if existing is not None:
        if _logged(conn, existing.id, cs):
            return None
        raise _conflict(cs, existing.version)
    dialect = conn.dialect.name
    upsert = (pg_insert if dialect == "postgresql" else sqlite_insert)(SessionRow)
    conn.execute(
        upsert.values(session_id=cs.session_id, created_at=now).on_conflict_do_nothing(index_elements=["session_id"])
    )
    try:
        result = conn.execute(
            insert(ConversationRow).values(
                session_id=cs.session_id,
                agent_id=cs.agent_id,
                version=cs.new_version,
                model_call_count=cs.model_call_count or 0,
                next_seq=cs.next_seq or 0,
                manager_state=cs.manager_state,
                agent_state=cs.agent_state,
                created_at=now,
                updated_at=now,
            )
        )
    except IntegrityError as exc:
        raise ConcurrencyConflict(
            f"session_id={cs.session_id} agent_id={cs.agent_id}: expected version 0, "
            "but the conversation was created concurrently"
        ) from exc
    key = result.inserted_primary_key
    assert key is not None  # an INSERT of one row always has one
    return int(key[0])


STATE_FIELDS = ("model_call_count", "next_seq", "manager_state", "agent_state")
"""Conversation columns a changeset sets when its field is not ``None``."""


def bump_statement(fields: tuple[str, ...], summary_clash: ColumnElement[bool] | None = None) -> Update:
    """The version-checked ``UPDATE`` of a conversation, returning its id.

    Args:
        fields: The state columns the changeset sets (see :data:`STATE_FIELDS`).
        summary_clash: A predicate on ``SummaryRow.summary_id`` that is true for an
            appended id; when given, a summary already holding such an id makes the
            update match no row, so the clash costs no extra statement (the caller
            tells it apart from a version conflict afterwards).
    """
    values: dict[str, Any] = {
        "version": ConversationRow.version + 1,
        "updated_at": bindparam("p_now", type_=UTCDateTime()),
    }
    for name in fields:
        values[name] = bindparam(f"p_{name}", type_=ConversationRow.__table__.c[name].type)
    stmt = update(ConversationRow).where(
        ConversationRow.session_id == bindparam("p_session_id", type_=String()),
        ConversationRow.agent_id == bindparam("p_agent_id", type_=String()),
        ConversationRow.version == bindparam("p_expected", type_=BigInteger()),
    )
    if summary_clash is not None:
        stmt = stmt.where(~exists().where(SummaryRow.conversation_id == ConversationRow.id, summary_clash))
    return stmt.values(**values).returning(ConversationRow.id)


@cache
def _bump_statement(fields: tuple[str, ...], check_summaries: bool) -> Update:
    """:func:`bump_statement` with the appended ids as an expanding list, built once per shape."""
    clash = SummaryRow.summary_id.in_(bindparam("p_appended", expanding=True)) if check_summaries else None
    return bump_statement(fields, clash)


def _bump(conn: Connection, cs: Changeset, now: datetime, appended: Sequence[str]) -> int | None:
    fields = tuple(name for name in STATE_FIELDS if getattr(cs, name) is not None)
    params: dict[str, Any] = {
        "p_now": now,
        "p_session_id": cs.session_id,
        "p_agent_id": cs.agent_id,
        "p_expected": cs.expected_version,
    }
    params.update({f"p_{name}": getattr(cs, name) for name in fields})
    small = 0 < len(appended) <= CHUNK
    if small:
        params["p_appended"] = list(appended)
    row = conn.execute(_bump_statement(fields, small), params).first()
    if row is None:
        explain_missed_update(conn, cs, appended)
        return None
    conversation_id = int(row.id)
    if appended and not small:
        _raise_if_summary_clash(conn, conversation_id, appended)
    return conversation_id


def explain_missed_update(conn: Connection, cs: Changeset, appended: Sequence[str]) -> None:
    """Tell why the version-checked update of ``cs`` changed no row; return only if ``cs`` already applied.

    Called after the update (which also refuses an appended id that a summary holds)
    found no row: a follow-up read of the conversation, its commit log and its summaries.
    When the log shows this very changeset produced ``cs.new_version`` (it is being sent
    again after its reply was lost), it returns: the caller answers that version and
    writes nothing.

    Raises:
        SessionDeleted: The conversation no longer exists.
        ConcurrencyConflict: The stored version is not ``cs.expected_version`` -- or it is
            again, and no clash explains the miss: the conversation changed between the
            two statements, so the caller must re-read.
        DuplicateEntry: An appended id is the id of one of the conversation's summaries.
    """
    found = conn.execute(
        select(ConversationRow.id, ConversationRow.version).where(
            ConversationRow.session_id == cs.session_id, ConversationRow.agent_id == cs.agent_id
        )
    ).first()
    if found is None:
        raise _deleted(cs)
    if found.version != cs.expected_version:
        if _logged(conn, found.id, cs):
            return
        raise _conflict(cs, found.version)
    _raise_if_summary_clash(conn, found.id, appended)
    raise ConcurrencyConflict(
        f"session_id={cs.session_id} agent_id={cs.agent_id}: the conversation changed while committing; re-read it"
    )


def _raise_if_summary_clash(conn: Connection, conversation_id: int, ids: Sequence[str]) -> None:
    for batch in chunks(ids):
        clash = conn.execute(
            select(SummaryRow.summary_id)
            .where(SummaryRow.conversation_id == conversation_id, SummaryRow.summary_id.in_(batch))
            .limit(1)
        ).scalar()
        if clash is not None:
            raise DuplicateEntry(f"entry {clash} already exists in this conversation")


def entry_values(entry: ViewEntry) -> dict[str, Any]:
    """The columns of an appended entry that come from the entry itself (JSON columns as records)."""
    record = entry.message.to_record()
    return {
        "seq": entry.seq,
        "message_id": entry.entry_id,
        "role": record["role"],
        "content": record["content"],
        "metadata": record["metadata"],
        "pinned": entry.message.pinned,
        "tokens": entry.tokens,
    }


def _insert_entries(conn: Connection, conversation_id: int, cs: Changeset, now: datetime) -> None:
    rows = [
        {
            "conversation_id": conversation_id,
            **entry_values(entry),
            "status": "active",
            "evicted_by": None,
            "revision_count": 0,
            "created_at": now,
        }
        for entry in cs.appends
    ]
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
        messages.update(
            conn.execute(
                select(EntryRow.message_id).where(
                    EntryRow.conversation_id == conversation_id,
                    EntryRow.status == "active",
                    EntryRow.message_id.in_(batch),
                )
            ).scalars()
        )
    rest = evicted - messages
    for batch in chunks(sorted(rest)):
        summaries.update(
            conn.execute(
                select(SummaryRow.summary_id).where(
                    SummaryRow.conversation_id == conversation_id,
                    SummaryRow.status == "active",
                    SummaryRow.summary_id.in_(batch),
                )
            ).scalars()
        )
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
        conn.execute(
            insert(ReductionRow).values(
                conversation_id=conversation_id,
                **red.model_dump(exclude={"session_id", "agent_id"}),
            )
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
            [
                {
                    "conversation_id": conversation_id,
                    "entry_id": entry_id,
                    "pinned": pinned,
                    "source": cs.pin_source,
                    "changeset_id": cs.changeset_id,
                    "created_at": now,
                }
                for entry_id, pinned in cs.pins.items()
            ],
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
            insert(SummaryRow).values(
                conversation_id=conversation_id,
                summary_id=summary.summary_id,
                seq=summary.seq,
                content=summary.content,
                summarizer=summary.summarizer,
                reduction_id=summary.reduction_id,
                supersedes=summary.supersedes,
                superseded_by=summary.superseded_by,
                status=summary.status,
                evicted_by=summary.evicted_by,
                tokens=summary.tokens,
                created_at=summary.created_at,
            )
        )
    except IntegrityError as exc:
        raise DuplicateEntry(f"summary {summary.summary_id} already exists in this conversation") from exc
    key = result.inserted_primary_key
    assert key is not None
    conn.execute(
        insert(_table(SummarySourceRow)),
        [
            {
                "summary_row_id": key[0],
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
                update(SummaryRow)
                .where(and_(SummaryRow.conversation_id == conversation_id, SummaryRow.summary_id.in_(batch)))
                .values(status="evicted", evicted_by=reduction_id, superseded_by=superseded_by)
            )
