"""Run a statement of :mod:`.statements` on the engine or on the SQLite reader: rows in, decoded rows out.

Both runners take the statement's name, its flag set and its parameters by name, and
return the column names and the rows (positional), their values decoded alike: JSON
parsed, timestamps aware UTC, booleans ``bool``. The engine's column types decode on
the engine; on SQLite's own driver :mod:`.decode` does, column by column as
:mod:`.sqlite_sql` names them. Rows are yielded as the driver fetches them (a listing
never holds more than one page).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from contextledger.stores.sql.encoding import tolerant_sqlite_loads
from contextledger.stores.sql.read.decode import DECODERS, sqlite_time
from contextledger.stores.sql.read.records import JsonText

if TYPE_CHECKING:
    from sqlalchemy import Connection

__all__ = ["EngineRunner", "Rows", "Runner", "SQLiteRunner"]

_FETCH = 1_000
"""Rows fetched from the driver at a time."""


class Rows:
    """The result of one statement: its column names and its rows, read once, in order."""

    __slots__ = ("columns", "rows")

    def __init__(self, columns: Sequence[str], rows: Iterator[Sequence[Any]]) -> None:
        self.columns = tuple(columns)
        self.rows = rows

    def __iter__(self) -> Iterator[Sequence[Any]]:
        return self.rows

    def mappings(self) -> Iterator[dict[str, Any]]:
        """The rows as column name -> value."""
        columns = self.columns
        return (dict(zip(columns, row, strict=True)) for row in self.rows)


class Runner(Protocol):
    """Runs the statement ``name`` of flag set ``flags`` with ``params`` (by name).

    Attributes:
        json_text: How the columns selected as JSON text are decoded (see
            :data:`.records.JsonText`).
    """

    json_text: JsonText

    def __call__(self, name: str, flags: tuple[str, ...], params: Mapping[str, Any]) -> Rows:
        """The rows of the statement, decoded."""
        ...


class EngineRunner:
    """Runs the Core statements on a SQLAlchemy connection (inside the caller's transaction)."""

    __slots__ = ("_conn", "json_text")

    def __init__(self, conn: Connection) -> None:
        from contextledger.stores.sql.read.restore import json_text_decoding

        self._conn = conn
        self.json_text = json_text_decoding(conn)

    def __call__(self, name: str, flags: tuple[str, ...], params: Mapping[str, Any]) -> Rows:
        """Execute; rows stream from the driver's cursor."""
        from contextledger.stores.sql.read.statements import statement

        result = self._conn.execute(statement(name, flags), dict(params))
        return Rows(tuple(result.keys()), iter(result))


class SQLiteRunner:
    """Runs the compiled text of the same statements (:mod:`.sqlite_sql`) on a ``sqlite3`` connection."""

    __slots__ = ("_conn", "json_text")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # SQLite stores JSON text as written (NUL included, no escapes).
        self.json_text: JsonText = (tolerant_sqlite_loads, None)

    def __call__(self, name: str, flags: tuple[str, ...], params: Mapping[str, Any]) -> Rows:
        """Bind as the engine binds on SQLite (timestamps as naive UTC text), execute, decode."""
        from contextledger.stores.sql.read.sqlite_sql import SQL

        sql, constants, kinds, expanding = SQL[(name, flags)]
        bound: dict[str, Any] = dict(constants)
        for key, value in params.items():
            if key in expanding:
                values = list(value)
                sql = sql.replace(f"__[POSTCOMPILE_{key}]", ", ".join(f":{key}_{i}" for i in range(len(values))))
                bound.update((f"{key}_{i}", v) for i, v in enumerate(values))
            else:
                bound[key] = sqlite_time(value) if isinstance(value, datetime) else value
        cursor = self._conn.execute(sql, bound)
        columns = [column[0] for column in cursor.description]
        return Rows(columns, _decoded(cursor, kinds))


def _decoded(cursor: sqlite3.Cursor, kinds: str) -> Iterator[Sequence[Any]]:
    decoders = [(i, DECODERS[kind]) for i, kind in enumerate(kinds) if kind != "-"]
    while batch := cursor.fetchmany(_FETCH):
        if not decoders:
            yield from batch
            continue
        for row in batch:
            values = list(row)
            for i, decode in decoders:
                values[i] = decode(values[i])
            yield values
