"""The hot changesets on SQLite, sent as statements compiled once, on the driver's cursor.

Two kinds of changeset make up nearly every commit of an agent loop on SQLite:

* a turn appended (and perhaps state fields set): the version-checked update (which
  also refuses an appended id a summary holds), the commit-log row and one
  ``executemany`` of the entries -- three statements;
* the same plus an eviction of active messages (a sliding window's reduction, a Strands
  answer committed with the window it leaves): a read that every id to evict is an
  active message, then those three, the reduction row and one ``UPDATE`` of the
  evicted rows.

Everything else (summaries, revisions, pins, restores, evicting a summary or an entry
the same changeset appends, very large changesets) goes through the general path,
:func:`~contextledger.stores.sql.changes.apply_changeset`; :func:`apply_sqlite` returns
``None`` for those before it has sent anything but that read, and the caller applies
them in the same transaction.

The SQL is compiled by SQLAlchemy from the same table definitions, once per shape, and
every parameter goes through its column type's own bind processor, so the stored
values are exactly what the general path writes. Only the per-call statement
construction, cache lookup, execution context and result objects of SQLAlchemy are
skipped: they cost more than SQLite takes to run the statements. Driver errors are
wrapped as SQLAlchemy's :class:`~sqlalchemy.exc.DBAPIError` subclasses, so the store
translates them exactly as it translates every other statement's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Connection, Dialect, String, Table, bindparam, insert, select, update
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement

from contextledger.changeset import Changeset
from contextledger.errors import DuplicateEntry
from contextledger.stores.sql.appends import ENTRY_INSERT_COLUMNS
from contextledger.stores.sql.changes import (
    CHUNK,
    STATE_FIELDS,
    appended_values,
    bump_statement,
    check_changeset,
    duplicate_appends,
    entry_values,
    explain_missed_update,
)
from contextledger.stores.sql.models import ChangesetRow, ConversationRow, EntryRow, ReductionRow, SummaryRow

__all__ = ["SQLITE_MAX_APPENDS", "apply_sqlite"]

SQLITE_MAX_APPENDS = 64
"""Appended ids checked against the summaries inline on SQLite; a bigger append takes the general path."""

_LOG_COLUMNS = ("conversation_id", "version", "changeset_id", "created_at")
_REDUCTION_COLUMNS = tuple(c.name for c in ReductionRow.__table__.columns if c.name != "id")


class _Prepared:
    """A statement compiled once for a dialect: its SQL and how each positional parameter is bound."""

    __slots__ = ("constants", "names", "processors", "sql")

    def __init__(self, statement: ClauseElement, dialect: Dialect, column_keys: Sequence[str] | None = None) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(column_keys) if column_keys else None)
        assert isinstance(compiled, SQLCompiler)
        self.sql = compiled.string
        self.names: tuple[str, ...] = tuple(compiled.positiontup or ())
        self.processors: tuple[Callable[[Any], Any] | None, ...] = tuple(
            compiled.binds[name].type.bind_processor(dialect) for name in self.names
        )
        # Values the statement carries itself (the 1 of ``version + 1``).
        self.constants: dict[str, Any] = {
            name: bind.effective_value for name, bind in compiled.binds.items() if not bind.required
        }

    def bind(self, params: dict[str, Any]) -> tuple[Any, ...]:
        """The positional parameters for ``params``, each processed by its column type."""
        values = [params[name] if name in params else self.constants[name] for name in self.names]
        return tuple(
            value if process is None else process(value) for value, process in zip(values, self.processors, strict=True)
        )


def _ids(prefix: str, count: int) -> list[Any]:
    return [bindparam(f"{prefix}{i}", type_=String()) for i in range(count)]


# Per dialect (its JSON serializer is the engine's): bounded, as engines come and go.
@lru_cache(maxsize=1024)
def _bump(dialect: Dialect, fields: tuple[str, ...], appended: int) -> _Prepared:
    clash = SummaryRow.summary_id.in_(_ids("p_appended_", appended)) if appended else None
    return _Prepared(bump_statement(fields, clash), dialect)


@lru_cache(maxsize=64)
def _inserts(dialect: Dialect) -> tuple[_Prepared, _Prepared, _Prepared]:
    return (
        _Prepared(insert(ChangesetRow), dialect, _LOG_COLUMNS),
        _Prepared(insert(EntryRow), dialect, ENTRY_INSERT_COLUMNS),
        _Prepared(insert(ReductionRow), dialect, _REDUCTION_COLUMNS),
    )


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


def _takes_this_path(cs: Changeset) -> bool:
    if cs.expected_version == 0 or cs.revisions or cs.summary or cs.pins or cs.restore:
        return False
    if len(cs.appends) > SQLITE_MAX_APPENDS or len(cs.evict) > CHUNK:
        return False
    return bool(cs.evict) == (cs.reduction is not None)


def apply_sqlite(conn: Connection, cs: Changeset, now: datetime) -> int | None:
    """Apply ``cs`` on SQLite inside the caller's write transaction when it is a hot changeset.

    Returns the new version, or ``None`` when ``cs`` is not for this path (see the
    module docstring): the caller then applies it with
    :func:`~contextledger.stores.sql.changes.apply_changeset` in the same transaction,
    nothing having been written.

    Raises:
        ConcurrencyConflict: The stored version is not ``cs.expected_version``.
        SessionDeleted: The conversation no longer exists.
        DuplicateEntry: An appended id already exists in the conversation (a message or
            a summary) or twice in ``cs``, or the reduction id is already recorded; the
            caller rolls back.
    """
    if not _takes_this_path(cs):
        return None
    dialect = conn.dialect
    cursor = _RawCursor(conn)
    evict = sorted(set(cs.evict))
    params: dict[str, Any] = {
        "p_now": now,
        "p_session_id": cs.session_id,
        "p_agent_id": cs.agent_id,
        "p_expected": cs.expected_version,
    }
    if evict:
        check, eviction = _eviction(dialect, len(evict))
        params.update({f"p_evict_{i}": entry_id for i, entry_id in enumerate(evict)})
        if len(cursor.run(check.sql, check.bind(params)).fetchall()) != len(evict):
            return None  # a summary, an entry this changeset appends, or a missing id: the general path says which
    appended = check_changeset(cs)
    fields = tuple(name for name in STATE_FIELDS if getattr(cs, name) is not None)
    params.update({f"p_{name}": getattr(cs, name) for name in fields})
    params.update({f"p_appended_{i}": entry_id for i, entry_id in enumerate(appended)})
    bump = _bump(dialect, fields, len(appended))
    log, entries, reduction = _inserts(dialect)
    row = cursor.run(bump.sql, bump.bind(params)).fetchone()
    if row is None:
        explain_missed_update(conn, cs, appended)
        return cs.new_version  # this very changeset applied before: nothing to do
    conversation_id = row[0]
    logged = {"conversation_id": conversation_id, "version": cs.new_version, "changeset_id": cs.changeset_id}
    cursor.run(log.sql, log.bind({**logged, "created_at": now}))
    if cs.appends:
        common = appended_values(conversation_id, cs, now)  # as the general path writes them
        try:
            cursor.run_many(entries.sql, [entries.bind({**common, **entry_values(e)}) for e in cs.appends])
        except IntegrityError as exc:
            raise duplicate_appends(cs) from exc
    if cs.reduction is not None:
        red = cs.reduction
        try:
            cursor.run(
                reduction.sql,
                reduction.bind(
                    {"conversation_id": conversation_id, **red.model_dump(exclude={"session_id", "agent_id"})}
                ),
            )
        except IntegrityError as exc:
            raise DuplicateEntry(f"reduction {red.reduction_id} is already recorded in this conversation") from exc
        params.update({"p_conversation_id": conversation_id, "p_reduction_id": red.reduction_id})
        cursor.run(eviction.sql, eviction.bind(params))
    return cs.new_version


class _RawCursor:
    """The driver's own cursor on the caller's connection, inside its transaction."""

    __slots__ = ("_cursor", "_dbapi")

    def __init__(self, conn: Connection) -> None:
        self._dbapi = conn.dialect.loaded_dbapi
        self._cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]

    def run(self, sql: str, params: tuple[Any, ...]) -> Any:
        try:
            self._cursor.execute(sql, params)  # the async adapters return None, not the cursor
        except self._dbapi.Error as exc:
            raise DBAPIError.instance(sql, params, exc, self._dbapi.Error) from exc
        return self._cursor

    def run_many(self, sql: str, params: list[tuple[Any, ...]]) -> None:
        try:
            self._cursor.executemany(sql, params)
        except self._dbapi.Error as exc:
            raise DBAPIError.instance(sql, params, exc, self._dbapi.Error) from exc
