"""A turn appended to PostgreSQL as one statement: one round trip.

A changeset that only appends messages (and perhaps sets state fields) to a
conversation that exists -- nothing evicted, pinned, revised or summarised -- is the
hot path of every agent loop. The general path (:mod:`~contextledger.stores.sql.write.apply`)
sends it as a transaction of two statements, which psycopg makes four round trips:
``BEGIN`` on its own, the update, the insert, ``COMMIT``. Here it is one statement that
the store executes in autocommit mode: a single statement is atomic by itself, so no
``BEGIN`` or ``COMMIT`` is sent. The statement is a data-modifying CTE::

    WITH bumped AS (
        UPDATE cl_conversations SET version = version + 1, updated_at = :now, ...
        WHERE session_id = :s AND agent_id = :a AND version = :expected
          AND NOT EXISTS (a summary of the conversation holding an appended id)
        RETURNING id),
    logged AS (
        INSERT INTO cl_changesets (conversation_id, version, changeset_id, created_at)
        SELECT id, :new_version, :changeset_id, :now FROM bumped),
    inserted AS (
        INSERT INTO cl_entries (...)
        SELECT bumped.id, v.seq, v.message_id, ... FROM bumped
        JOIN unnest(:seqs, :message_ids, ...) WITH ORDINALITY AS v(...) ON true
        ORDER BY v.ordinality
        RETURNING cl_entries.id)
    SELECT (SELECT id FROM bumped), (SELECT count(*) FROM inserted)

Why it keeps every guarantee of the general path:

* The update is the version check and locks the conversation row, so concurrent
  writers of one conversation queue there; one that waited re-checks the version
  once the winner committed, finds no row, and inserts nothing.
* No conversation id back means nothing was written: a follow-up read
  (:func:`~contextledger.stores.sql.write.apply.explain_missed_update`) tells a version
  conflict from an appended id that a summary already holds -- or from this very
  changeset sent again after its reply was lost, which the commit log (``logged``, in
  the same statement) shows applied: then the version is returned and nothing written.
* A message id the conversation already has trips the unique key, which fails the
  whole statement: nothing is written, and the caller gets ``DuplicateEntry``.
* The rows arrive as one array per column, bound through the columns' own types
  (JSON element by element with the same adapter as the general path's ``INSERT``),
  so the stored text -- and every read -- is the same whichever path wrote it; and
  the statement text does not depend on the number of messages, so it is built once
  per set of state fields and psycopg prepares it on the server after a few uses.

A changeset with no appends (a state update, such as the model-call count before a
model call) is the ``bumped`` and ``logged`` parts alone.

On SQLite the same changeset is three statements inside the store's ``BEGIN IMMEDIATE``
transaction: see :mod:`~contextledger.stores.sql.write.sqlite_hot`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import cache, lru_cache
from typing import Any, NamedTuple

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Connection,
    Dialect,
    Row,
    Select,
    String,
    Text,
    Update,
    any_,
    bindparam,
    cast,
    column,
    func,
    insert,
    null,
    select,
    true,
)
from sqlalchemy.exc import IntegrityError

from contextledger.core.changeset import Changeset
from contextledger.errors import ConfigurationError, InvalidMessage
from contextledger.model.jsonvalues import check_plain_json, dumps_encoded, encode_value
from contextledger.model.records import ViewEntry
from contextledger.stores.sql import encoding
from contextledger.stores.sql.fields import APPENDED_CONSTANTS, APPENDED_STAMPS
from contextledger.stores.sql.models import ChangesetRow, EntryRow, SummaryRow, UTCDateTime
from contextledger.stores.sql.write.apply import (
    ENTRY_COLUMNS,
    ENTRY_INSERT_COLUMNS,
    bump_statement,
    check_changeset,
    duplicate_appends,
    entry_values,
    explain_missed_update,
)
from contextledger.stores.sql.write.guard import bump_fields, bump_params

__all__ = [
    "EncodedAppend",
    "append_statement",
    "apply_append",
    "is_append_only",
    "state_statement",
]

_UNIQUE_VIOLATION = "23505"


def is_append_only(cs: Changeset) -> bool:
    """Whether ``cs`` only appends to (or sets state fields of) a conversation that exists."""
    return cs.expected_version > 0 and not (cs.evict or cs.revisions or cs.summary or cs.reduction or cs.pins)


# Content and metadata arrive as the JSON text EncodedAppend wrote while checking them
# (the text the general path's column type writes), cast to json by the statement.
_TEXT_ARRAYS = frozenset({"content", "metadata"})


def _array(name: str) -> Any:
    """A bound array of the ``cl_entries`` column ``name``, processed element by element."""
    element = EntryRow.__table__.c[name].type
    # dimensions=1: a JSON value that is itself a list is one element, not a sub-array.
    if name in _TEXT_ARRAYS:
        return cast(bindparam(f"e_{name}", type_=ARRAY(Text(), dimensions=1)), ARRAY(element, dimensions=1))
    return bindparam(f"e_{name}", type_=ARRAY(element, dimensions=1))


@cache
def _bump(fields: tuple[str, ...], check_summaries: bool) -> Update:
    """:func:`bump_statement` with the appended ids as the ``e_message_id`` array."""
    clash = SummaryRow.summary_id == any_(_array("message_id")) if check_summaries else None
    return bump_statement(fields, clash)


def _logged(bumped: Any) -> Any:
    """The ``INSERT`` of the commit-log row, fed by the ``bumped`` CTE (nothing when it found no row)."""
    source = select(
        bumped.c.id,
        bindparam("p_new_version", type_=BigInteger()),
        bindparam("p_changeset_id", type_=String()),
        bindparam("p_now", type_=UTCDateTime()),
    ).select_from(bumped)
    return (
        insert(ChangesetRow)
        .from_select(["conversation_id", "version", "changeset_id", "created_at"], source)
        .returning(ChangesetRow.conversation_id)
    )


def _constant(name: str, value: Any) -> Any:
    """What every appended row holds in the ``cl_entries`` column ``name`` (a value of the statement itself)."""
    if value is None:
        return null()
    return bindparam(f"k_{name}", value, type_=EntryRow.__table__.c[name].type)  # sent with its type's cast


@cache
def state_statement(fields: tuple[str, ...]) -> Select[Any]:
    """The one statement of a changeset that only sets ``fields``: the version bump and its log row.

    It returns one row: ``conversation_id``, ``NULL`` when the version check refused it.
    """
    bumped = _bump(fields, False).cte("bumped")
    logged = _logged(bumped).cte("logged")
    return select(select(logged.c.conversation_id).scalar_subquery().label("conversation_id"))


@cache
def append_statement(fields: tuple[str, ...]) -> Select[Any]:
    """The one statement of an append that sets ``fields`` (see the module docstring).

    It returns one row: ``conversation_id`` (``NULL`` when the version check or the
    summary-id check refused the changeset, in which case nothing was written) and
    ``inserted``, the number of entry rows written.
    """
    entries = EntryRow.__table__
    bumped = _bump(fields, True).cte("bumped")
    logged = _logged(bumped).cte("logged")
    rows = (
        func.unnest(*(_array(name) for name in ENTRY_COLUMNS))
        .table_valued(*(column(name, entries.c[name].type) for name in ENTRY_COLUMNS), with_ordinality="ordinality")
        .render_derived(name="v")
    )
    source = (
        select(
            bumped.c.id,
            *(rows.c[name] for name in ENTRY_COLUMNS),
            *(_constant(name, value) for name, value in APPENDED_CONSTANTS.items()),
            *(bindparam(f"s_{name}", type_=entries.c[name].type) for name in APPENDED_STAMPS),
        )
        .select_from(bumped)
        .join(rows, true())
        .order_by(rows.c.ordinality)  # ids follow the order of the appends, as an executemany's do
    )
    target = list(ENTRY_INSERT_COLUMNS)
    inserted = insert(EntryRow).from_select(target, source).returning(EntryRow.id).cte("inserted")
    return select(
        select(logged.c.conversation_id).scalar_subquery().label("conversation_id"),
        select(func.count()).select_from(inserted).scalar_subquery().label("inserted"),
    )


class EncodedAppend:
    """An append-only changeset checked and encoded once, before anything is sent (and reused if it is sent again).

    Content and metadata become the JSON text the general path's column type writes
    (:func:`~contextledger.stores.sql.encoding.dumps` of the tagged value); state values
    are checked as :func:`~contextledger.stores.base.check_storable` checks them and
    bound through their columns' types, as the general path binds them.
    """

    __slots__ = ("appended", "arrays", "changeset", "fields")

    def __init__(self, cs: Changeset) -> None:
        """Check and encode ``cs`` (which :func:`is_append_only`).

        Raises:
            InvalidMessage: A message's content or metadata, or a state value, cannot be
                stored as JSON; or an appended id is longer than its column.
            ConfigurationError: An id is longer than its column.
            DuplicateEntry: ``cs`` appends one id twice.
        """
        self.changeset = cs
        self.appended = check_changeset(cs)
        self.fields = bump_fields(cs)
        for name in ("manager_state", "agent_state"):
            value = getattr(cs, name)
            if value is not None:
                check_plain_json(value, name.replace("_", " "))
        rows = [_encoded(entry) for entry in cs.appends]
        self.arrays = {f"e_{name}": [row[name] for row in rows] for name in ENTRY_COLUMNS} if rows else {}


def _encoded(entry: ViewEntry) -> dict[str, Any]:
    try:
        return entry_values(entry, _json_text)
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"message {entry.entry_id} cannot be stored as JSON: {exc}") from exc


def _json_text(value: Any) -> str:
    """What the JSON columns write for ``value``: :func:`~contextledger.stores.sql.encoding.dumps` of it, tagged."""
    text = dumps_encoded(value)
    if "\\u0000" in text or encoding.ESCAPED_MARK_JSON in text:
        return encoding.dumps(encode_value(value))  # strings to escape (NUL, the marker): the slow path
    return text


class _DriverStatement(NamedTuple):
    """A statement compiled once for a dialect, sent with ``exec_driver_sql`` (no compile-cache lookup)."""

    sql: str
    processors: dict[str, Callable[[Any], Any]]
    constants: dict[str, Any]


@lru_cache(maxsize=256)  # per dialect (its JSON serializer is the engine's) and set of state fields
def _driver_statement(dialect: Dialect, fields: tuple[str, ...], appends: bool) -> _DriverStatement:
    statement = append_statement(fields) if appends else state_statement(fields)
    compiled = statement.compile(dialect=dialect)
    sql = compiled.string
    used = {name: bind for name, bind in compiled.binds.items() if f"%({name})s" in sql}
    processors: dict[str, Callable[[Any], Any]] = {}
    for name, bind in used.items():
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            processors[name] = process
    constants = {name: bind.effective_value for name, bind in used.items() if not bind.required}
    return _DriverStatement(sql, processors, constants)


def _execute(conn: Connection, statement: _DriverStatement, params: dict[str, Any]) -> Row[Any]:
    values = {**statement.constants, **params}
    for name, process in statement.processors.items():
        values[name] = process(values[name])
    return conn.exec_driver_sql(statement.sql, values).one()


def apply_append(conn: Connection, cs: Changeset, now: datetime, encoded: EncodedAppend | None = None) -> int:
    """Apply the append-only changeset ``cs`` with one statement and return the new version.

    ``conn`` must be a PostgreSQL connection in autocommit mode: the statement is the
    whole transaction. Only a changeset refused by the version check or by a summary
    id costs a second statement (the read that tells which). ``encoded`` is ``cs``
    already checked and encoded (see :class:`EncodedAppend`).

    Raises:
        ConfigurationError: ``cs`` is not append-only (see :func:`is_append_only`), or an
            id of it is longer than its column (nothing was sent).
        ConcurrencyConflict: The stored version is not ``cs.expected_version``.
        DuplicateEntry: An appended id already exists in the conversation (a message or
            a summary) or twice in ``cs``; nothing was written.
        InvalidMessage: An appended id is longer than its column, or a value cannot be
            stored as JSON (nothing was sent).
    """
    if not is_append_only(cs):
        raise ConfigurationError("apply_append takes a changeset that only appends to an existing conversation")
    if encoded is None or encoded.changeset is not cs:
        encoded = EncodedAppend(cs)
    params = bump_params(cs, now, encoded.fields)
    params.update({"p_new_version": cs.new_version, "p_changeset_id": cs.changeset_id})
    if not cs.appends:
        if _execute(conn, _driver_statement(conn.dialect, encoded.fields, False), params).conversation_id is None:
            explain_missed_update(conn, cs, encoded.appended)
        return cs.new_version
    params.update(encoded.arrays)
    params.update({f"s_{name}": value for name, value in cs.stamps(now).items()})
    try:
        row = _execute(conn, _driver_statement(conn.dialect, encoded.fields, True), params)
    except IntegrityError as exc:
        if getattr(exc.orig, "sqlstate", None) == _UNIQUE_VIOLATION:
            raise duplicate_appends(cs) from exc
        raise
    if row.conversation_id is None:
        explain_missed_update(conn, cs, encoded.appended)
    return cs.new_version
