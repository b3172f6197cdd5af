"""The SQLite restore on the standard library's driver: a fresh process reads without SQLAlchemy.

Importing SQLAlchemy costs a fresh process far more than the restore itself, so a SQLite
:class:`~contextledger.stores.sql.SQLStore` opens its file with a :class:`SQLiteReader`
first: one ``sqlite3`` connection in ``mode=ro`` (it cannot write, so opening and
reading never write: DESIGN semantics 9) that checks the schema version and serves
:meth:`~contextledger.stores.sql.SQLStore.load` and the listings (history, summaries,
sessions...: :mod:`~contextledger.stores.sql.read`, in :meth:`SQLiteReader.read`).
The engine, and SQLAlchemy with it, is built on the first write or the first other query.

The schema is current when the ledger's version table holds exactly :data:`SCHEMA_HEAD`
(a test keeps the constant equal to Alembic's head, so a new migration without it fails
loudly). Anything else -- no file, no ledger tables, another revision, a file SQLite
cannot open -- makes :meth:`SQLiteReader.open` answer ``None``, and the store takes the
engine's path: create and migrate, or raise ``SchemaOutOfDate``.

The reads are :mod:`~contextledger.stores.sql.window`'s SQL text; values are decoded as
the engine decodes them (JSON as :func:`~contextledger.stores.sql.encoding.tolerant_sqlite_loads`,
the messages' by :func:`~contextledger.stores.sql.window.snapshot`, timestamps as aware
UTC), so both paths build equal snapshots.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from contextledger.errors import StoreError, StoreUnavailable
from contextledger.model.records import ConversationState, Snapshot
from contextledger.stores.base import decoding
from contextledger.stores.sql import window
from contextledger.stores.sql.encoding import tolerant_sqlite_loads
from contextledger.stores.sql.read.decode import stored_json, stored_time

__all__ = ["SCHEMA_HEAD", "VERSION_TABLE", "SQLiteReader"]

logger = logging.getLogger(__name__)

SCHEMA_HEAD = "0008"
"""The Alembic revision this library's schema is at (``contextledger.stores.sql.head()`` reads it from Alembic)."""

VERSION_TABLE = "contextledger_alembic_version"
"""The ledger's own Alembic version table (never the application's ``alembic_version``)."""

_JSON_STATE = ("manager_state", "agent_state")
_TIMESTAMPS = ("created_at", "updated_at")


class SQLiteReader:
    """A read-only ``sqlite3`` connection to a ledger file whose schema is current.

    Thread-safe (one lock around each read); every read runs in one read transaction,
    so the three reads of a restore see one commit.

    Attributes:
        database: The file as the URL named it (for error messages).
    """

    def __init__(self, connection: sqlite3.Connection, database: str) -> None:
        """Wrap an open connection (use :meth:`open`)."""
        self._connection = connection
        self._lock = threading.Lock()
        self.database = database

    @property
    def connection(self) -> sqlite3.Connection:
        """The driver connection (to trace or count its work; never to write)."""
        return self._connection

    @classmethod
    def open(cls, database: str, *, busy_timeout: float = 30.0) -> SQLiteReader | None:
        """Open ``database`` for reading when it is a ledger at :data:`SCHEMA_HEAD`, else ``None``.

        Never creates, migrates or writes the file; ``None`` sends the caller to the
        engine's path, which does whatever the file needs (or reports why it cannot).

        Args:
            database: The file path, relative to the working directory or absolute.
            busy_timeout: Seconds a read waits for a lock (WAL reads rarely wait).
        """
        path = Path(database).resolve()
        if not path.is_file():
            return None
        try:
            connection = sqlite3.connect(
                f"file:{quote(str(path))}?mode=ro",
                uri=True,
                timeout=busy_timeout,
                isolation_level=None,  # transactions are begun explicitly
                check_same_thread=False,  # the lock below serialises the threads
            )
        except sqlite3.Error as exc:
            logger.debug("database=<%s>, error=<%s> | SQLite reader not opened", database, exc)
            return None
        try:
            found = [row[0] for row in connection.execute(f"SELECT version_num FROM {VERSION_TABLE}")]
        except sqlite3.Error as exc:  # no version table, or not a database at all
            logger.debug("database=<%s>, error=<%s> | SQLite reader not opened", database, exc)
            found = []
        if found != [SCHEMA_HEAD]:
            connection.close()
            return None
        return cls(connection, database)

    def load(self, session_id: str, agent_id: str) -> Snapshot | None:
        """The state and active view of the conversation (three indexed reads), or ``None``.

        Raises:
            StoreUnavailable: The file cannot be read any more.
            StoreError: Another driver error.
            CorruptRecord: A row cannot be decoded.
        """
        with self.read() as connection:
            row = connection.execute(window.STATE_SQL, {"session_id": session_id, "agent_id": agent_id}).fetchone()
            if row is None:
                return None
            key = {"conversation_id": row[window.STATE_COLUMNS.index("id")]}
            messages = connection.execute(window.ACTIVE_MESSAGES_SQL, key).fetchall()
            summaries = connection.execute(window.ACTIVE_SUMMARIES_SQL, key).fetchall()
        state = self._state(row, session_id, agent_id)
        return window.snapshot(
            state, messages, summaries, session_id=session_id, agent_id=agent_id, loads=tolerant_sqlite_loads
        )

    def conversation_state(self, session_id: str, agent_id: str) -> ConversationState | None:
        """The conversation's state alone (one indexed read), or ``None``.

        Raises:
            StoreUnavailable: The file cannot be read any more.
            StoreError: Another driver error.
            CorruptRecord: The row cannot be decoded.
        """
        with self.read() as connection:
            row = connection.execute(window.STATE_SQL, {"session_id": session_id, "agent_id": agent_id}).fetchone()
        if row is None:
            return None
        return window.state_of(self._state(row, session_id, agent_id), session_id, agent_id)

    def _state(self, row: Sequence[Any], session_id: str, agent_id: str) -> dict[str, Any]:
        """A state row by column name, its JSON and time columns decoded."""
        state = dict(zip(window.STATE_COLUMNS, row, strict=True))
        with decoding("cl_conversations", f"{session_id}/{agent_id}"):
            for name in _JSON_STATE:
                state[name] = stored_json(state[name])
            for name in _TIMESTAMPS:
                state[name] = stored_time(state[name])
        return state

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one read transaction, held by this thread for the block.

        Every statement of the block sees the same commit (the several reads of a
        listing agree with each other), and no other thread uses the connection
        meanwhile. Fetch every row inside the block.

        Raises:
            StoreUnavailable: The file cannot be read any more.
            StoreError: Another driver error.
        """
        with self._lock:
            try:
                self._connection.execute("BEGIN")
                try:
                    yield self._connection
                except BaseException:
                    self._connection.execute("ROLLBACK")
                    raise
                self._connection.execute("COMMIT")
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc

    def _translate(self, exc: sqlite3.Error) -> StoreError:
        """A driver error as the library's error, worded like the engine's (see ``engine.translate``)."""
        where = f"SQLite database {self.database}"
        text = str(exc).strip()
        detail = text.splitlines()[0] if text else type(exc).__name__
        message = text.lower()
        if "unable to open" in message or "disk i/o error" in message:
            return StoreUnavailable(f"cannot reach {where}: {detail}")
        return StoreError(f"{where}: {detail}")

    def close(self) -> None:
        """Close the connection (waits for a read in progress)."""
        with self._lock:
            self._connection.close()
