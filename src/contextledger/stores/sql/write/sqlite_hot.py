"""The hot changesets on SQLite, sent as statements compiled once, on the driver's cursor.

Two kinds of changeset make up nearly every commit of an agent loop on SQLite:

* a turn appended (and perhaps state fields set): the version-checked update (which
  also refuses an appended id a summary holds), the commit-log row and the entries'
  ``INSERT`` -- three statements. The entries go as one multi-row ``INSERT`` whose
  shared values are bound once (see :func:`_multi_row`), or, past
  :data:`MULTI_ROW_APPENDS` rows, as one ``executemany``;
* the same plus an eviction of active messages (a sliding window's reduction, a Strands
  answer committed with the window it leaves): a read that every id to evict is an
  active message, then those three, the reduction row and one ``UPDATE`` of the
  evicted rows.

Everything else (summaries, revisions, pins, restores, evicting a summary or an entry
the same changeset appends, very large changesets) goes through the general path,
:func:`~contextledger.stores.sql.write.apply.apply_changeset`, decided by
:func:`takes_hot_path` before anything is sent. A hot changeset whose eviction check or
version check finds something unexpected is rolled back by :func:`apply_hot`, having
written nothing, and the general path then applies it or names the error.

A hot changeset runs on a connection of the driver itself, held by the store for its
commits (:mod:`~contextledger.stores.sql.write.sqlite_writer`: SQLAlchemy's pool,
connect events and error translation, without its ``Connection``, transaction and
execution-context objects, which cost more than SQLite takes to run the statements).
The SQL is compiled by SQLAlchemy from the same table definitions, once per shape, and
every parameter goes through its column type's own bind processor -- except the JSON
values, which :class:`HotChangeset` encodes once while checking them (the JSON check of
every store) -- so the stored values are exactly what the general path writes. Driver
errors are wrapped as SQLAlchemy's :class:`~sqlalchemy.exc.DBAPIError` subclasses, so
the store translates them exactly as it translates every other statement's.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import lru_cache
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Dialect, String, Table, bindparam, insert, literal, literal_column, select, update
from sqlalchemy.engine.default import DefaultDialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, ColumnElement

from contextledger.core.changeset import Changeset
from contextledger.errors import DuplicateEntry, InvalidMessage
from contextledger.model.jsontext import frozen_text
from contextledger.model.jsonvalues import check_plain_json, dumps_encoded
from contextledger.stores.sql.fields import APPENDED_CONSTANTS, APPENDED_STAMPS
from contextledger.stores.sql.models import ChangesetRow, ConversationRow, EntryRow, ReductionRow, SummaryRow
from contextledger.stores.sql.write.apply import (
    CHUNK,
    ENTRY_COLUMNS,
    ENTRY_INSERT_COLUMNS,
    appended_values,
    bump_statement,
    check_changeset,
    duplicate_appends,
    entry_row,
)
from contextledger.stores.sql.write.guard import bump_fields, bump_params
from contextledger.stores.sql.write.sqlite_writer import HotTransaction

__all__ = [
    "KNOWN_IDS",
    "MULTI_ROW_APPENDS",
    "SQLITE_MAX_APPENDS",
    "HotChangeset",
    "apply_hot",
    "takes_hot_path",
]

SQLITE_MAX_APPENDS = 64
"""Appended ids checked against the summaries inline on SQLite; a bigger append takes the general path."""

# Parameters the hot changeset hands over as JSON text (see HotChangeset).
_JSON_STATE = frozenset({"p_manager_state", "p_agent_state"})
_JSON_FIELDS = frozenset(name.removeprefix("p_") for name in _JSON_STATE)
_JSON_ENTRY = frozenset({"content", "metadata"})
# Parameters holding the commit's time, given as the text sqlite3 writes for it (see _stamp).
_STAMPED = frozenset({"p_now", "created_at"})
_LOG_COLUMNS = ("conversation_id", "version", "changeset_id", "created_at")
_ENTRY_INSERT_ORDER = (*(c for c in ENTRY_INSERT_COLUMNS if c not in ENTRY_COLUMNS), *ENTRY_COLUMNS)
# Parameters sqlite3 stores as the column's processor would: a bool binds as the integer
# 0 or 1 that the Boolean type's int() gives (``Message.pinned`` is always a bool).
_NATIVE = frozenset({"pinned"})
_REDUCTION_COLUMNS = tuple(c.name for c in ReductionRow.__table__.columns if c.name != "id")


class _Prepared:
    """A statement compiled once for a dialect: its SQL and how each positional parameter is bound.

    Parameters named in ``encoded`` are given already in the form the driver takes (the
    JSON text the hot changeset encoded while checking it): their processor is skipped.
    The positional values are gathered in one C call (an ``itemgetter`` over the names,
    or over the shared values and a row's own), and only the parameters whose column
    type has a bind processor are processed after that: on SQLite few columns have one.
    """

    __slots__ = (
        "_common",
        "_common_processed",
        "_gather",
        "_processed",
        "_row",
        "_row_processed",
        "constants",
        "names",
        "sql",
    )

    def __init__(
        self,
        statement: ClauseElement,
        dialect: Dialect,
        column_keys: Sequence[str] | None = None,
        encoded: frozenset[str] = frozenset(),
        row_fields: Sequence[str] = (),
    ) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(column_keys) if column_keys else None)
        assert isinstance(compiled, SQLCompiler)
        self.sql = compiled.string
        self.names = names = tuple(compiled.positiontup or ())
        if any(name not in names for name in row_fields):
            raise ValueError(f"row fields {row_fields} are not all parameters of {self.sql}")
        processors = {
            name: process
            for name in names
            if name not in encoded and (process := compiled.binds[name].type.bind_processor(dialect)) is not None
        }
        # Values the statement carries itself (the 1 of ``version + 1``).
        self.constants: dict[str, Any] = {
            name: bind.effective_value for name, bind in compiled.binds.items() if not bind.required
        }
        self._gather = _getter(names)
        self._processed = tuple((i, processors[name]) for i, name in enumerate(names) if name in processors)
        # A row of bind_rows() is the values every row shares (``common``, see bind_common)
        # followed by the row's own ``row_fields``; ``_row`` puts them in the statement's order.
        common = [name for name in names if name not in row_fields]
        self._common = _getter(common)
        self._common_processed = tuple((j, processors[name]) for j, name in enumerate(common) if name in processors)
        order = [common.index(n) if n in common else len(common) + row_fields.index(n) for n in names]
        # None when a row's values are already in the statement's order (the entries' INSERT
        # is compiled so): each row is then one tuple concatenation, not two tuples.
        self._row = None if order == list(range(len(names))) else _getter(order)
        self._row_processed = tuple((j, processors[name]) for j, name in enumerate(row_fields) if name in processors)

    def bind(self, params: dict[str, Any]) -> tuple[Any, ...]:
        """The positional parameters for ``params``, each processed by its column type.

        The statement's own constants are added to ``params`` (a commit's own dict, not copied).
        """
        if self.constants:
            params.update(self.constants)
        return _processed(self._gather(params), self._processed)

    def bind_common(self, params: dict[str, Any]) -> tuple[Any, ...]:
        """The processed values every row of an ``executemany`` shares: every parameter not a row field."""
        return _processed(self._common(params), self._common_processed)

    def bind_rows(self, common: tuple[Any, ...], rows: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Each row's parameters: ``common`` (see :meth:`bind_common`) with its ``row_fields`` values processed in."""
        order, processed = self._row, self._row_processed
        if order is None:
            if not processed:
                return [common + values for values in rows]
            return [common + _processed(values, processed) for values in rows]
        if not processed:
            return [order(common + values) for values in rows]
        return [order(common + _processed(values, processed)) for values in rows]


def _getter(keys: Sequence[Any]) -> Callable[[Any], tuple[Any, ...]]:
    """A function returning ``tuple(source[key] for key in keys)`` in one C call (a tuple even for one key)."""
    if len(keys) == 1:
        key = keys[0]
        return lambda source: (source[key],)
    if not keys:
        return lambda _source: ()
    return itemgetter(*keys)


def _processed(values: tuple[Any, ...], processors: tuple[tuple[int, Callable[[Any], Any]], ...]) -> tuple[Any, ...]:
    """``values`` with the value at each index of ``processors`` passed through its processor."""
    if not processors:
        return values
    out = list(values)
    for i, process in processors:
        out[i] = process(out[i])
    return tuple(out)


def _ids(prefix: str, count: int) -> list[Any]:
    return [bindparam(f"{prefix}{i}", type_=String()) for i in range(count)]


# The names of the appended ids' parameters (see _bump), made once.
_APPENDED = tuple(f"p_appended_{i}" for i in range(SQLITE_MAX_APPENDS))


# Per dialect (its JSON serializer is the engine's): bounded, as engines come and go.
@lru_cache(maxsize=1024)
def _bump(dialect: Dialect, fields: tuple[str, ...], appended: int, known_id: bool) -> _Prepared:
    clash = SummaryRow.summary_id.in_(_ids("p_appended_", appended)) if appended else None
    return _Prepared(bump_statement(fields, clash, known_id=known_id), dialect, encoded=_JSON_STATE | _STAMPED)


KNOWN_IDS = 4096
"""Conversation ids a store remembers for its hot path (see :func:`apply_hot`); more start the memory afresh."""


@lru_cache(maxsize=64)
def _inserts(dialect: Dialect) -> tuple[_Prepared, _Prepared, _Prepared]:
    log = _Prepared(insert(ChangesetRow), dialect, _LOG_COLUMNS, encoded=_STAMPED)
    if log.names != _LOG_COLUMNS or log.bind_common(dict(zip(_LOG_COLUMNS, _LOG_COLUMNS, strict=True))) != _LOG_COLUMNS:
        raise RuntimeError(f"the commit log's INSERT does not take {_LOG_COLUMNS} as they are: {log.sql}")
    return (
        log,
        # The shared columns first, then the row's own: a row's values are then in order as they come.
        _Prepared(
            insert(EntryRow),
            dialect,
            _ENTRY_INSERT_ORDER,
            encoded=_JSON_ENTRY | _STAMPED | _NATIVE,
            row_fields=ENTRY_COLUMNS,
        ),
        _Prepared(insert(ReductionRow), dialect, _REDUCTION_COLUMNS),
    )


MULTI_ROW_APPENDS = 16
"""Appended rows sent as one multi-row ``INSERT`` (its text made once per row count); more go as one executemany."""

# The values every appended row shares, bound once as ?1.. in this order (see _multi_row).
_SHARED = ("conversation_id", *APPENDED_STAMPS)
_shared_stamps = itemgetter(*APPENDED_STAMPS)
_NAMED = re.compile(r":(\w+)")


@lru_cache(maxsize=64)
def _multi_row(dialect: Dialect, rows: int) -> str:
    """The ``INSERT`` of ``rows`` appended entries as one statement with SQLite's numbered parameters.

    ``?1``..``?4`` are the values every row shares (:data:`_SHARED`), bound once; row
    ``i``'s own values (:data:`ENTRY_COLUMNS` order) follow as ``?5 + 7i``...; the
    constants every appended entry starts with (``fields.APPENDED_CONSTANTS``) are
    written into the text as the column type renders them. Compiled by SQLAlchemy from
    the table, named, then numbered: a statement of one shape binds ``4 + 7 * rows``
    values instead of ``14 * rows``, in one ``execute`` instead of an ``executemany``.

    Raises:
        RuntimeError: A bound column has a bind processor the hot path does not apply
            (every value must already be in the form the driver takes).
    """
    table = cast(Table, EntryRow.__table__)
    number = {name: i for i, name in enumerate(_SHARED, 1)}
    shared = {name: bindparam(name, type_=table.c[name].type) for name in _SHARED}
    constants: dict[str, ColumnElement[Any]] = {
        name: literal_column(
            literal(value, table.c[name].type).compile(dialect=dialect, compile_kwargs={"literal_binds": True}).string
        )
        for name, value in APPENDED_CONSTANTS.items()
    }
    values: list[dict[str, Any]] = []
    for i in range(rows):
        own: dict[str, Any] = {}
        for j, name in enumerate(ENTRY_COLUMNS):
            own[name] = bindparam(f"{name}_{i}", type_=table.c[name].type)
            number[f"{name}_{i}"] = len(_SHARED) + 1 + i * len(ENTRY_COLUMNS) + j
        values.append({**shared, **constants, **own})
    named = cast("type[DefaultDialect]", type(dialect))(paramstyle="named")  # the dialect's, parameters by name
    compiled = insert(table).values(values).compile(dialect=named)
    for name, bind in compiled.binds.items():
        column = name.rsplit("_", 1)[0] if name not in shared else name
        if column not in _JSON_ENTRY | _STAMPED | _NATIVE and bind.type.bind_processor(dialect) is not None:
            raise RuntimeError(f"column {column} of the multi-row append needs its bind processor")
    sql = _NAMED.sub(lambda found: f"?{number[found.group(1)]}", compiled.string)
    if sql.count("?") != len(_SHARED) * rows + len(ENTRY_COLUMNS) * rows:
        raise RuntimeError(f"the multi-row append did not number every parameter: {sql}")
    return sql


@lru_cache(maxsize=1024)
def _eviction(dialect: Dialect, count: int) -> tuple[_Prepared, _Prepared]:
    """The check that ``count`` ids are active messages, and their eviction."""
    entries, conversations = cast(Table, EntryRow.__table__), cast(Table, ConversationRow.__table__)
    ids = _ids("p_evict_", count)
    check = (
        select(entries.c.message_id)
        .join(conversations, conversations.c.id == entries.c.conversation_id)
        .where(
            conversations.c.session_id == bindparam("p_session_id", type_=String()),
            conversations.c.agent_id == bindparam("p_agent_id", type_=String()),
            entries.c.status == "active",
            entries.c.message_id.in_(ids),
        )
    )
    evict = (
        update(entries)
        .where(entries.c.conversation_id == bindparam("p_conversation_id"), entries.c.message_id.in_(ids))
        .values(status="evicted", evicted_by=bindparam("p_reduction_id", type_=String()))
    )
    return _Prepared(check, dialect), _Prepared(evict, dialect)


def takes_hot_path(cs: Changeset) -> bool:
    """Whether ``cs`` is a changeset of this module (see its docstring); pure, nothing is read."""
    if cs.expected_version == 0 or cs.revisions or cs.summary or cs.pins or cs.restore:
        return False
    if len(cs.appends) > SQLITE_MAX_APPENDS or len(cs.evict) > CHUNK:
        return False
    return bool(cs.evict) == (cs.reduction is not None)


class HotChangeset:
    """A hot changeset checked and encoded once, before anything is sent (and reused if it is sent again).

    Encoding is the store's JSON check: content, metadata and state are written as
    standard JSON text (``json.dumps`` with ``allow_nan=False``, what the engine's JSON
    columns write and every reader of the file decodes), so a value JSON has no form for
    raises here, as :func:`~contextledger.stores.base.check_storable` would, and is not
    encoded a second time by the column's bind processor.
    """

    __slots__ = ("appended", "changeset", "evict", "fields", "params", "rows", "values")

    def __init__(self, cs: Changeset) -> None:
        """Check and encode ``cs`` (which :func:`takes_hot_path`).

        Raises:
            InvalidMessage: A message's content or metadata, or a state value, cannot be
                stored as JSON.
            ConfigurationError: An id is longer than its column.
            DuplicateEntry: ``cs`` appends one id twice.
        """
        self.changeset = cs
        self.appended = check_changeset(cs)
        self.evict = evict = sorted(set(cs.evict)) if cs.evict else ()
        self.fields = fields = bump_fields(cs)
        # The statements' parameters by name, but the commit's time and the conversation's
        # id, which apply_hot sets on every send (the same dict: a resend overwrites them).
        self.params = params = bump_params(
            cs,
            "",
            fields,
            {
                f"p_{name}": _json(value, name.replace("_", " ")) if name in _JSON_FIELDS else value
                for name in fields
                for value in (getattr(cs, name),)
            },
        )
        params.update(zip(_APPENDED, self.appended, strict=False))  # the first len(appended) names
        if evict:
            params.update({f"p_evict_{i}": entry_id for i, entry_id in enumerate(evict)})
            if cs.reduction is not None:
                params["p_reduction_id"] = cs.reduction.reduction_id
        # One loop, no call per entry of its own: a turn's rows are built on every commit,
        # into one flat list, the parameters the multi-row INSERT takes after the shared ones.
        values: list[Any] = []
        for entry in cs.appends:
            try:
                values += entry_row(entry, dumps_encoded)
            except (TypeError, ValueError) as exc:
                raise InvalidMessage(f"message {entry.entry_id} cannot be stored as JSON: {exc}") from exc
        self.values = values
        self.rows = len(cs.appends)

    def row_tuples(self) -> list[tuple[Any, ...]]:
        """:attr:`values` cut into one tuple per appended entry (:data:`ENTRY_COLUMNS` order)."""
        width, values = len(ENTRY_COLUMNS), self.values
        return [tuple(values[i : i + width]) for i in range(0, len(values), width)]


def _json(value: Any, what: str) -> str:
    """State as plain JSON text (bytes refused, as :func:`~contextledger.stores.base.check_storable` refuses them)."""
    # The same text, by the encoder built once: a manager's state rides with every commit.
    text = frozen_text(value, compact=False)
    if text is not None:
        return text
    try:
        return _STATE_ENCODER.encode(value)
    except (TypeError, ValueError):
        check_plain_json(value, what)  # raises InvalidMessage, naming where the bytes are
        raise


# What json.dumps(value, allow_nan=False) writes, built once (json.dumps builds one per call when given an option).
_STATE_ENCODER = json.JSONEncoder(allow_nan=False)


def apply_hot(
    tx: HotTransaction, hot: HotChangeset, now: datetime, known: dict[tuple[str, str], int] | None = None
) -> int | None:
    """Send the statements of ``hot`` (see the module docstring) in ``tx``; the new version, or ``None``.

    ``known`` maps ``(session_id, agent_id)`` to the conversation's id, as this store's
    earlier commits found it: the version bump then finds the row by its primary key and
    returns nothing (``RETURNING`` costs SQLite a tenth of an append's statements), and
    reads the row count. The session and agent are still matched, so an id SQLite reused
    for another conversation never matches it; a miss forgets the id (the conversation may
    have been deleted and made again under a new one) and takes the general path, as a
    miss of the returning form does. Ids learned by the returning form are remembered here.

    ``None`` when the changeset needs the general path after all -- an id to evict is not
    an active message of this conversation, or the version check matched no row (a
    conflict, a deleted session, a summary holding an appended id, or this changeset
    applied before): the caller leaves ``tx`` uncommitted (nothing was written) and the
    general path, in a transaction of its own, applies it or names the error.

    Raises:
        DuplicateEntry: An appended id already exists in the conversation or the
            reduction id is already recorded (the caller rolls back).
        sqlalchemy.exc.DBAPIError: The driver failed.
    """
    cs, dialect = hot.changeset, tx.dialect
    stamp = _stamp(now)
    params = hot.params
    params["p_now"] = stamp
    if hot.evict:
        check, eviction = _eviction(dialect, len(hot.evict))
        if len(tx.run(check.sql, check.bind(params)).fetchall()) != len(hot.evict):
            return None  # a summary, an entry this changeset appends, or a missing id: the general path says which
    log, entries, reduction = _inserts(dialect)
    key = (cs.session_id, cs.agent_id)
    if known is not None and (conversation_id := known.get(key)) is not None:
        params["p_conversation_id"] = conversation_id
        bump = _bump(dialect, hot.fields, len(hot.appended), True)
        if tx.run(bump.sql, bump.bind(params)).rowcount != 1:
            known.pop(key, None)
            return None  # as below; the next commit learns the id afresh
    else:
        bump = _bump(dialect, hot.fields, len(hot.appended), False)
        row = tx.run(bump.sql, bump.bind(params)).fetchone()
        if row is None:
            return None  # the general path re-runs the check and explains the miss
        conversation_id = row[0]
        if known is not None:
            if len(known) >= KNOWN_IDS:
                known.clear()
            known[key] = conversation_id
    tx.run(log.sql, (conversation_id, cs.new_version, cs.changeset_id, stamp))  # _LOG_COLUMNS, none processed
    if hot.rows:
        try:
            if hot.rows <= MULTI_ROW_APPENDS:
                shared = (conversation_id, *_shared_stamps(cs.stamps(stamp)))  # as the general path writes them
                tx.run(_multi_row(dialect, hot.rows), (*shared, *hot.values))
            else:
                common = entries.bind_common(appended_values(conversation_id, cs, stamp))
                tx.run_many(entries.sql, entries.bind_rows(common, hot.row_tuples()))
        except IntegrityError as exc:
            raise duplicate_appends(cs) from exc
    if cs.reduction is not None:
        red = cs.reduction
        try:
            tx.run(
                reduction.sql,
                reduction.bind(
                    {"conversation_id": conversation_id, **red.model_dump(exclude={"session_id", "agent_id"})}
                ),
            )
        except IntegrityError as exc:
            raise DuplicateEntry(f"reduction {red.reduction_id} is already recorded in this conversation") from exc
        params["p_conversation_id"] = conversation_id
        tx.run(eviction.sql, eviction.bind(params))
    return cs.new_version


def _stamp(now: datetime) -> str:
    """The commit's time as the general path has sqlite3 write it, made once for every row of the commit.

    :class:`~contextledger.stores.sql.models.UTCDateTime` binds a naive UTC ``datetime``
    on SQLite, which sqlite3 writes with its ``datetime`` adapter, ``isoformat(" ")``
    (``tests/sql/test_sqlite_hot.py`` compares the rows of both paths column by column).
    """
    if now.tzinfo is UTC:  # the store's clock: its text less the "+00:00" it ends with
        return now.isoformat(" ")[:-6]
    return now.astimezone(UTC).replace(tzinfo=None).isoformat(" ")
