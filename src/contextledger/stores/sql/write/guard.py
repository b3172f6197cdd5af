"""What decides whether a changeset applies: the checks up front, the version check, the commit log.

Kept apart from the writing of the rows (:mod:`~contextledger.stores.sql.write.apply`)
because both write paths share it -- the transaction in ``changes`` and the
one-statement append of :mod:`~contextledger.stores.sql.write.pg_append`:

* :func:`check_changeset` refuses, before any statement, what the database would
  refuse mid-way (ids longer than their columns, an id appended twice);
* :func:`bump_statement` is the version check and the state update in one
  ``UPDATE ... WHERE version = :expected``; :func:`explain_missed_update` tells why
  it matched no row (another commit won, the session was deleted, an appended id
  clashes with a summary);
* every applied changeset writes its id to the commit log (:func:`log_values`), so
  :func:`read_back` can resolve a commit whose reply was lost (exactly once).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    ColumnElement,
    Connection,
    String,
    Update,
    bindparam,
    exists,
    insert,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from contextledger.core.changeset import Changeset
from contextledger.errors import ConcurrencyConflict, ConfigurationError, DuplicateEntry, InvalidMessage, SessionDeleted
from contextledger.model.records import SessionOwner
from contextledger.stores.base import check_owner
from contextledger.stores.sql.models import (
    ID_LENGTH,
    ChangesetRow,
    ConversationRow,
    SessionRow,
    SummaryRow,
    UTCDateTime,
)

__all__ = [
    "CHUNK",
    "STATE_FIELDS",
    "bump",
    "bump_fields",
    "bump_params",
    "bump_statement",
    "check_changeset",
    "chunks",
    "create",
    "explain_missed_update",
    "log_values",
    "read_back",
]


CHUNK = 500
"""Ids per ``IN (...)`` list: below SQLite's and PostgreSQL's bound-parameter limits."""

_T = TypeVar("_T")


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
    if len(cs.session_id) > ID_LENGTH or len(cs.agent_id) > ID_LENGTH:  # named only when refused (every commit)
        _check("session_id", cs.session_id, ConfigurationError)
        _check("agent_id", cs.agent_id, ConfigurationError)
    _check("app", cs.app, ConfigurationError)
    _check("user", cs.user, ConfigurationError)
    for entry in cs.appends:
        if len(entry.entry_id) > ID_LENGTH:  # named only when refused: a turn's ids are checked on every commit
            _check(f"message id {entry.entry_id[:20]}...", entry.entry_id, InvalidMessage)
    for rev in cs.revisions:
        _check("revision reason", rev.reason, ConfigurationError)
    if cs.summary is not None:
        _check("summary id", cs.summary.summary_id, InvalidMessage)
        _check("summarizer", cs.summary.summarizer, ConfigurationError)
    if cs.reduction is not None:
        _check("reduction id", cs.reduction.reduction_id, ConfigurationError)
        _check("strategy", cs.reduction.strategy, ConfigurationError)


def _check(kind: str, value: str | None, error: type[Exception]) -> None:
    # A module function: a closure made on every commit cost more than the checks.
    if value is not None and len(value) > ID_LENGTH:
        raise error(f"{kind} is {len(value)} characters long; the SQL ledger stores at most {ID_LENGTH}")


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


def create(conn: Connection, cs: Changeset, now: datetime) -> int | None:
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
        upsert.values(session_id=cs.session_id, created_at=now, app=cs.app, user_id=cs.user).on_conflict_do_nothing(
            index_elements=["session_id"]
        )
    )
    if cs.app is not None or cs.user is not None:  # joining a session: it must be the same app's and user's
        stored = conn.execute(
            select(SessionRow.app, SessionRow.user_id).where(SessionRow.session_id == cs.session_id)
        ).one()
        check_owner(cs.session_id, SessionOwner(stored.app, stored.user_id), cs)
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


def bump_statement(
    fields: tuple[str, ...], summary_clash: ColumnElement[bool] | None = None, *, known_id: bool = False
) -> Update:
    """The version-checked ``UPDATE`` of a conversation, returning its id.

    Args:
        fields: The state columns the changeset sets (see :data:`STATE_FIELDS`).
        summary_clash: A predicate on ``SummaryRow.summary_id`` that is true for an
            appended id; when given, a summary already holding such an id makes the
            update match no row, so the clash costs no extra statement (the caller
            tells it apart from a version conflict afterwards).
        known_id: The caller knows the conversation's id (``p_conversation_id``): the row
            is found by its primary key (and still by its session and agent, so a reused
            id never matches another conversation) and nothing is returned -- the caller
            reads the row count, one matched row or none.
    """
    values: dict[str, Any] = {
        "version": ConversationRow.version + 1,
        "updated_at": bindparam("p_now", type_=UTCDateTime()),
    }
    for name in fields:
        values[name] = bindparam(f"p_{name}", type_=ConversationRow.__table__.c[name].type)
    stmt = update(ConversationRow)
    if known_id:
        stmt = stmt.where(ConversationRow.id == bindparam("p_conversation_id", type_=BigInteger()))
    stmt = stmt.where(
        ConversationRow.session_id == bindparam("p_session_id", type_=String()),
        ConversationRow.agent_id == bindparam("p_agent_id", type_=String()),
        ConversationRow.version == bindparam("p_expected", type_=BigInteger()),
    )
    if summary_clash is not None:
        stmt = stmt.where(~exists().where(SummaryRow.conversation_id == ConversationRow.id, summary_clash))
    stmt = stmt.values(**values)
    return stmt if known_id else stmt.returning(ConversationRow.id)


def bump_fields(cs: Changeset) -> tuple[str, ...]:
    """The state columns ``cs`` sets (its fields of :data:`STATE_FIELDS` that are not ``None``)."""
    return tuple([name for name in STATE_FIELDS if getattr(cs, name) is not None])


def bump_params(
    cs: Changeset, now: datetime | str, fields: tuple[str, ...], state: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The parameters of :func:`bump_statement` (``fields``) for ``cs``: every write path binds these.

    Args:
        cs: The changeset.
        now: The commit's clock (``updated_at``): a ``datetime``, or already the text the
            driver takes (the SQLite hot path's, see ``sqlite_hot._stamp``).
        fields: :func:`bump_fields` of ``cs``.
        state: The state values already in the form the driver takes, keyed ``p_<field>``
            (the SQLite hot path encodes them while checking them); default: ``cs``'s own.
    """
    params: dict[str, Any] = {
        "p_now": now,
        "p_session_id": cs.session_id,
        "p_agent_id": cs.agent_id,
        "p_expected": cs.expected_version,
    }
    if state is None:
        params.update({f"p_{name}": getattr(cs, name) for name in fields})
    else:
        params.update(state)
    return params


@cache
def _bump_statement(fields: tuple[str, ...], check_summaries: bool) -> Update:
    """:func:`bump_statement` with the appended ids as an expanding list, built once per shape."""
    clash = SummaryRow.summary_id.in_(bindparam("p_appended", expanding=True)) if check_summaries else None
    return bump_statement(fields, clash)


def bump(conn: Connection, cs: Changeset, now: datetime, appended: Sequence[str]) -> int | None:
    """Run the version check and state update of ``cs``; the conversation's row id, ``None`` if already applied.

    Raises:
        ConcurrencyConflict: Another commit moved the conversation on.
        SessionDeleted: The conversation was deleted.
        DuplicateEntry: An appended id is already a summary of the conversation.
    """
    fields = bump_fields(cs)
    params = bump_params(cs, now, fields)
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
