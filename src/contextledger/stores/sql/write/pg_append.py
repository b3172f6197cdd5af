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
        SELECT bumped.id, CAST(v.value ->> 0 AS BIGINT), ... FROM bumped
        JOIN json_array_elements(:rows) WITH ORDINALITY AS v ON true
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
* The rows arrive as one JSON document (an array of rows, one parameter), each value
  cast by the statement to its column's type -- text to unbounded text, so the column
  refuses an id too long as stored exactly as on the general path. Ids are NUL-escaped
  as the connection's string adapter escapes every parameter, and content and metadata
  are the JSON text the general path's column type writes, placed in the document as
  JSON values (not encoded again as strings) and taken out with ``->``, which keeps a
  ``json`` value's text as written: the stored text -- and every read -- is the same
  whichever path wrote it. (One document rather than an array per column: psycopg
  adapts arrays element by element in Python, which cost about four times the client
  CPU of the rest of the statement.) The statement text does not depend on the number
  of messages, so it is built once per set of state fields and psycopg prepares it on
  the server after a few uses. What every appended row shares is in the text itself
  (the columns' defaults as literals) or bound once (the commit's time and version also
  stamp the rows): nine parameters, where there were thirteen.

A changeset with no appends (a state update, such as the model-call count before a
model call) is the ``bumped`` and ``logged`` parts alone.

On SQLite the same changeset is three statements inside the store's ``BEGIN IMMEDIATE``
transaction: see :mod:`~contextledger.stores.sql.write.sqlite_hot`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from functools import cache, lru_cache
from typing import Any, NamedTuple

from sqlalchemy import (
    JSON,
    BigInteger,
    Connection,
    Dialect,
    Select,
    String,
    Text,
    Update,
    bindparam,
    cast,
    func,
    insert,
    literal_column,
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
    explain_missed_update,
)
from contextledger.stores.sql.write.guard import bump_fields, bump_params
from contextledger.stores.sql.write.pg_writer import HeldAppender

__all__ = [
    "EncodedAppend",
    "append_statement",
    "applied",
    "apply_append",
    "is_append_only",
    "refused_duplicate",
    "send_append",
    "state_statement",
    "statement_values",
]

_UNIQUE_VIOLATION = "23505"


def is_append_only(cs: Changeset) -> bool:
    """Whether ``cs`` only appends to (or sets state fields of) a conversation that exists."""
    return cs.expected_version > 0 and not (cs.evict or cs.revisions or cs.summary or cs.reduction or cs.pins)


def _rows() -> Any:
    """The appended rows: the elements of the ``e_rows`` JSON array (see :class:`EncodedAppend`), in order.

    Each element is ``[seq, message_id, role, content, metadata, pinned, tokens]``
    (:data:`ENTRY_COLUMNS` order), content and metadata as JSON values in the document
    itself; :func:`_field` casts one to its column's type.
    """
    document = cast(bindparam("e_rows", type_=Text()), JSON())
    return func.json_array_elements(document).table_valued("value", with_ordinality="ordinality")


def _field(rows: Any, name: str) -> Any:
    """The ``cl_entries`` column ``name`` of an element of :func:`_rows`, as that column's type."""
    index: Any = literal_column(str(ENTRY_COLUMNS.index(name)))
    column_type = EntryRow.__table__.c[name].type
    if isinstance(column_type, JSON):
        # The element as it is: ``->`` of a ``json`` document gives its text exactly as
        # written (spacing, key order, escapes), so the column stores the text it was sent.
        return cast(rows.c.value.op("->")(index), column_type)
    text_value = rows.c.value.op("->>")(index)
    if isinstance(column_type, String):
        # Unbounded: a cast to varchar(n) would cut a longer value silently, where the
        # column itself refuses it (as it refuses it from every other path).
        return cast(text_value, Text())
    return cast(text_value, column_type)


@cache
def _bump(fields: tuple[str, ...], check_summaries: bool) -> Update:
    """:func:`bump_statement` with the appended ids as the ``e_message_id`` array."""
    appended = _rows().alias("appended")
    ids = select(_field(appended, "message_id")).select_from(appended)
    clash = SummaryRow.summary_id.in_(ids.scalar_subquery()) if check_summaries else None
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
    """What every appended row holds in the ``cl_entries`` column ``name`` (a value of the statement itself).

    :func:`_driver_statement` writes it into the statement's text as a literal, with its
    type's cast: no parameter to send or dump on each append.
    """
    if value is None:
        return null()
    return bindparam(f"k_{name}", value, type_=EntryRow.__table__.c[name].type)


# Stamps (``Changeset.stamps``) that are by definition a value the statement already
# has: the commit's time (``p_now``) and the version it makes (``p_new_version``). The
# statement binds them once; :func:`statement_values` checks that they still are.
_SHARED_STAMPS = {"created_at": "p_now", "version": "p_new_version"}


def _stamp(name: str) -> Any:
    entries = EntryRow.__table__
    return bindparam(_SHARED_STAMPS.get(name, f"s_{name}"), type_=entries.c[name].type)


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
    bumped = _bump(fields, True).cte("bumped")
    logged = _logged(bumped).cte("logged")
    rows = _rows().alias("v")
    source = (
        select(
            bumped.c.id,
            *(_field(rows, name) for name in ENTRY_COLUMNS),
            *(_constant(name, value) for name, value in APPENDED_CONSTANTS.items()),
            *(_stamp(name) for name in APPENDED_STAMPS),
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

    __slots__ = ("appended", "changeset", "fields", "rows")

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
        # One JSON document for every appended row: a statement parameter psycopg sends as
        # it is (seven typed arrays cost about four times the client CPU of the rest of
        # the statement to adapt, element by element, in Python).
        self.rows = f"[{','.join([_encoded(entry) for entry in cs.appends])}]" if cs.appends else None


def _encoded(entry: ViewEntry) -> str:
    """One element of the ``e_rows`` document: the entry's row as JSON text, content and metadata as JSON values.

    Written by hand rather than by an encoder: content and metadata are already JSON text
    (what their columns store), so they go in as they are -- not encoded a second time as
    strings -- and the statement takes them out with ``->``, which keeps their text. The
    values are :func:`~contextledger.stores.sql.write.apply.entry_row`'s, in its order
    (checked at import), read here without building its tuple: this runs for every row.
    """
    message = entry.message
    metadata = message.metadata
    try:
        content = _json_text(message.content)
        # Most messages have no metadata (its text is the empty object's) and so no pin flag.
        meta = _json_text(metadata) if metadata else "{}"
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"message {entry.entry_id} cannot be stored as JSON: {exc}") from exc
    # Ids as the connection's string adapter writes a parameter (NUL escaped, see encoding),
    # then as JSON strings, ASCII-escaped: the document holds no NUL and no marker character.
    return (
        f"[{int(entry.seq)},{_json_string(encoding.escape(entry.entry_id))},{_role(message.role)},"
        f"{content},{meta},{'true' if metadata and message.pinned else 'false'},{int(entry.tokens)}]"
    )


_ROLES: dict[str, str] = {}
"""A role's text in the document (escaped, quoted), made once per role: there are a few."""


def _role(role: str) -> str:
    text = _ROLES.get(role)
    if text is None:
        text = _json_string(encoding.escape(role))
        if type(role) is str and len(_ROLES) < 16:
            _ROLES[role] = text
    return text


_json_string: Callable[[str], str] = json.encoder.encode_basestring_ascii


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
    for name, bind in list(used.items()):
        # A constant of the statement (the appended rows' defaults, the version's step) is
        # written into its text, rendered by its type as SQLAlchemy renders literals: one
        # parameter fewer to send and for the driver to dump on every append.
        render = None if bind.required else bind.type.dialect_impl(dialect).literal_processor(dialect)
        if render is not None:
            sql = sql.replace(f"%({name})s", render(bind.effective_value).replace("%", "%%"))
            del used[name]
    processors: dict[str, Callable[[Any], Any]] = {}
    for name, bind in used.items():
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            processors[name] = process
    constants = {name: bind.effective_value for name, bind in used.items() if not bind.required}
    return _DriverStatement(sql, processors, constants)


def statement_values(
    dialect: Dialect, cs: Changeset, now: datetime, encoded: EncodedAppend
) -> tuple[str, dict[str, Any]]:
    """The one statement of the append-only changeset ``cs`` for ``dialect`` and its driver parameters.

    The statement is compiled once per dialect and set of state fields; the values are
    bound through their columns' types, as SQLAlchemy binds them.

    Raises:
        RuntimeError: A stamp the statement shares with another value (see ``_SHARED_STAMPS``)
            differs from it: the statement would store another value than the stamp.
    """
    statement = _driver_statement(dialect, encoded.fields, bool(cs.appends))
    values = bump_params(cs, now, encoded.fields)
    if statement.constants:
        values.update(statement.constants)
    values["p_new_version"] = cs.new_version
    values["p_changeset_id"] = cs.changeset_id
    if cs.appends:
        values["e_rows"] = encoded.rows
        for name, value in cs.stamps(now).items():
            shared = _SHARED_STAMPS.get(name)
            if shared is None:
                values[f"s_{name}"] = value
            elif value is not values[shared] and value != values[shared]:
                raise RuntimeError(f"the stamp {name} is bound as {shared} but differs from it")
    for name, process in statement.processors.items():
        values[name] = process(values[name])
    return statement.sql, values


def applied(row: Any) -> bool:
    """Whether the one statement's result ``row`` says it applied.

    ``False``: the version check or a summary id refused it and nothing was written
    (:func:`~contextledger.stores.sql.write.apply.explain_missed_update` reads why).
    """
    return row[0] is not None


def refused_duplicate(cs: Changeset, exc: IntegrityError) -> Exception:
    """What the one statement's ``exc`` means: ``DuplicateEntry`` for a unique key, else ``exc`` itself."""
    if cs.appends and getattr(exc.orig, "sqlstate", None) == _UNIQUE_VIOLATION:
        return duplicate_appends(cs)
    return exc


def _checked(cs: Changeset, encoded: EncodedAppend | None) -> EncodedAppend:
    if not is_append_only(cs):
        raise ConfigurationError("apply_append takes a changeset that only appends to an existing conversation")
    if encoded is None or encoded.changeset is not cs:
        encoded = EncodedAppend(cs)
    return encoded


def apply_append(conn: Connection, cs: Changeset, now: datetime, encoded: EncodedAppend | None = None) -> int:
    """Apply the append-only changeset ``cs`` with one statement and return the new version.

    ``conn`` must be a PostgreSQL connection in autocommit mode: the statement is the
    whole transaction. Only a changeset refused by the version check or by a summary
    id costs a second statement (the read that tells which). ``encoded`` is ``cs``
    already checked and encoded (see :class:`EncodedAppend`). The store sends the same
    statement on its held connection with :func:`send_append`, the async API from the
    event loop with :class:`~contextledger.stores.sql.write.pg_asend.NativeSend`.

    Raises:
        ConfigurationError: ``cs`` is not append-only (see :func:`is_append_only`), or an
            id of it is longer than its column (nothing was sent).
        ConcurrencyConflict: The stored version is not ``cs.expected_version``.
        DuplicateEntry: An appended id already exists in the conversation (a message or
            a summary) or twice in ``cs``; nothing was written.
        InvalidMessage: An appended id is longer than its column, or a value cannot be
            stored as JSON (nothing was sent).
    """
    encoded = _checked(cs, encoded)
    sql, values = statement_values(conn.dialect, cs, now, encoded)
    try:
        row = conn.exec_driver_sql(sql, values).one()
    except IntegrityError as exc:
        raise refused_duplicate(cs, exc) from exc
    if not applied(row):
        explain_missed_update(conn, cs, encoded.appended)
    return cs.new_version


def send_append(held: HeldAppender, dialect: Dialect, cs: Changeset, now: datetime, encoded: EncodedAppend) -> bool:
    """Send the one statement of ``cs`` on the store's held connection; whether it applied.

    Call inside :meth:`HeldAppender.statement`'s block. ``False``: the version check or
    a summary id refused it and nothing was written -- the caller reads why with
    :func:`~contextledger.stores.sql.write.apply.explain_missed_update`, as
    :func:`apply_append` does.

    Raises:
        ConfigurationError: As :func:`apply_append`.
        DuplicateEntry: As :func:`apply_append`.
        sqlalchemy.exc.DBAPIError: The driver's error (see :meth:`HeldAppender.run`).
    """
    encoded = _checked(cs, encoded)
    sql, values = statement_values(dialect, cs, now, encoded)
    try:
        row = held.run(sql, values)
    except IntegrityError as exc:
        raise refused_duplicate(cs, exc) from exc
    return applied(row)
