"""Helpers for the SQL tests: bulk-built ledgers, statement capture and PostgreSQL protocol traces."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, event

from contextledger import Changeset, Message, ViewEntry
from contextledger.model.records import Reduction
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.sql import SQLStore

BATCH = 2_000


def build_ledger(store: CompleteStore, session_id: str, *, evicted: int, active: int, agent_id: str = "a") -> None:
    """A conversation of ``evicted + active`` entries whose first ``evicted`` were evicted.

    Appends go in batches (one executemany each), the eviction is one reduction.
    """
    total = evicted + active
    version = 0
    for start in range(0, total, BATCH):
        count = min(BATCH, total - start)
        entries = tuple(
            ViewEntry(
                entry_id=f"{session_id}-{start + i}",
                seq=start + i,
                message=Message.user(
                    f"message {start + i} " + "lorem ipsum " * 8, message_id=f"{session_id}-{start + i}"
                ),
                tokens=30,
            )
            for i in range(count)
        )
        version = store.commit(
            Changeset(
                session_id=session_id,
                agent_id=agent_id,
                expected_version=version,
                appends=entries,
                next_seq=start + count,
            )
        )
    if evicted:
        ids = tuple(f"{session_id}-{i}" for i in range(evicted))
        reduction = Reduction(
            session_id=session_id,
            agent_id=agent_id,
            trigger="per_turn",
            strategy="sliding_window",
            messages_before=total,
            messages_after=active,
            tokens_before=30 * total,
            tokens_after=30 * active,
            evicted=ids,
        )
        store.commit(
            Changeset(
                session_id=session_id, agent_id=agent_id, expected_version=version, evict=ids, reduction=reduction
            )
        )


@dataclass
class Statement:
    sql: str
    parameters: Any
    executemany: bool
    rowcount: int = -1


@dataclass
class Capture:
    statements: list[Statement] = field(default_factory=list)

    @property
    def work(self) -> list[Statement]:
        """Statements other than transaction control."""
        control = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
        return [s for s in self.statements if not s.sql.lstrip().upper().startswith(control)]


@contextmanager
def _listening(engine: Engine, handlers: dict[str, Callable[..., None]]) -> Iterator[None]:
    """Engine events ``handlers`` (name -> listener) for the duration of the block."""
    for name, handler in handlers.items():
        event.listen(engine, name, handler)
    try:
        yield
    finally:
        for name, handler in handlers.items():
            event.remove(engine, name, handler)


@contextmanager
def capture(engine: Engine) -> Iterator[Capture]:
    """Record every statement the engine sends (and the rows it changed)."""
    captured = Capture()

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        captured.statements.append(Statement(statement, parameters, executemany))

    def after(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        captured.statements[-1].rowcount = cursor.rowcount

    with _listening(engine, {"before_cursor_execute": before, "after_cursor_execute": after}):
        yield captured


@contextmanager
def trace_sqlite(store: SQLStore) -> Iterator[Capture]:
    """Record every statement SQLite itself runs (its trace callback), whoever sent it.

    Unlike :func:`capture` this also sees what the store sends on the driver's own
    cursor (the precompiled append) -- on pooled connections and on the one the store
    holds for its hot-path commits -- and a statement run by ``executemany`` once per row.
    """
    captured = Capture()
    engine = store.engine

    def traced(sql: str) -> None:
        captured.statements.append(Statement(sql, None, False))

    def on_checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        dbapi_connection.set_trace_callback(traced)

    def on_checkin(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.set_trace_callback(None)

    with store._held_writer().driver_connection() as held:
        held.set_trace_callback(traced)
    try:
        with _listening(engine, {"checkout": on_checkout, "checkin": on_checkin}):
            yield captured
    finally:
        with store._held_writer().driver_connection() as held:
            held.set_trace_callback(None)


@contextmanager
def capture_reads(store: SQLStore) -> Iterator[Capture]:
    """Record the statements a store's reads send: on its SQLite reader when it has one, else on the engine.

    The reader's driver traces statements with their parameters inlined.
    """
    reader = store.reader
    if reader is None:
        with capture(store.engine) as captured:
            yield captured
        return
    captured = Capture()
    reader.connection.set_trace_callback(lambda sql: captured.statements.append(Statement(sql, None, False)))
    try:
        yield captured
    finally:
        reader.connection.set_trace_callback(None)


@dataclass
class Wire:
    """What went over the PostgreSQL protocol, from libpq's trace of every message.

    Attributes:
        round_trips: Exchanges the server completed (each ends with its ReadyForQuery).
        sent: Names of the messages the client sent (``Parse``, ``Bind``, ``Query``...).
        queries: Texts sent as simple queries (psycopg's ``BEGIN`` / ``COMMIT``).
        parsed: Texts of the statements sent with ``Parse`` (not yet prepared).
        autocommit: For each pooled connection checked out, whether it was in autocommit
            mode when it went back to the pool (the held append connection is not pooled).
    """

    round_trips: int = 0
    sent: list[str] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    autocommit: list[bool] = field(default_factory=list)
    parsed: list[str] = field(default_factory=list)


@contextmanager
def wire(store: SQLStore, trace_file: Path) -> Iterator[Wire]:
    """Trace the protocol messages of the store's held append connection and of every connection checked out."""
    from psycopg import pq

    seen = Wire()
    trace_file.write_text("")
    engine = store.engine

    def trace(dbapi_connection: Any) -> None:
        dbapi_connection.pgconn.trace(os.open(trace_file, os.O_WRONLY | os.O_APPEND))
        dbapi_connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        trace(dbapi_connection)

    def checkin(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.pgconn.untrace()
        seen.autocommit.append(bool(dbapi_connection.autocommit))

    with store._held_appender().driver_connection() as held:
        trace(held)
    event.listen(engine, "checkout", checkout)
    event.listen(engine, "checkin", checkin)
    try:
        yield seen
    finally:
        event.remove(engine, "checkout", checkout)
        event.remove(engine, "checkin", checkin)
        with store._held_appender().driver_connection() as held:
            held.pgconn.untrace()
        # lines: direction, length, message name, payload (tab separated)
        for line in trace_file.read_text(errors="replace").splitlines():
            direction, _, rest = line.partition("\t")
            name = rest.split("\t")[1] if "\t" in rest else ""
            if direction == "B" and name == "ReadyForQuery":
                seen.round_trips += 1
            elif direction == "F":
                seen.sent.append(name)
                if name == "Query":
                    seen.queries.append(rest.split("\t", 2)[2].strip().strip('"'))
                elif name == "Parse":
                    seen.parsed.append(rest.split("\t", 2)[2])
