"""A statement sent on a psycopg connection with psycopg's low-level API instead of a cursor.

The PostgreSQL store's held connection (:mod:`~contextledger.stores.sql.write.pg_writer`)
sends one statement per append. Through ``Cursor.execute`` about a fifth of its client
CPU was the cursor's own work on each call: its lock, the query's conversion and the
prepare bookkeeping, the result's description. :class:`DirectSend` sends the same
statement as the async API's native send does (:mod:`~contextledger.stores.sql.write.pg_wire`),
with the documented API of :mod:`psycopg.pq`, and blocks on the socket:

* the parameters are dumped by a ``psycopg.adapt.Transformer`` of the connection -- the
  cursor's own machinery, so each gets the type, format and bytes the cursor gives it
  (the NUL-escaping string dumper the engine registers among them), its dumpers kept
  from one statement to the next;
* the statement's ``%(name)s`` placeholders are numbered as psycopg numbers them
  (:func:`~contextledger.stores.sql.write.pg_wire.numbered`);
* it is prepared on the server by psycopg's rule: after the connection's
  ``prepare_threshold`` uses (``None``: never), at most ``prepared_max`` statements;
* the reply is read whole (every result until libpq has none), the socket polled a
  second at a time so that an interrupt is seen -- and, as psycopg does, the statement
  is then cancelled on the server;
* an error reply is raised as the cursor raises it (``psycopg.errors.error_from_result``:
  the class of its SQLSTATE, with its diagnostics), so the caller's error handling is
  the cursor's.

Nothing else uses the connection while a statement runs (the caller holds its lock).
"""

from __future__ import annotations

import select
from collections.abc import Callable
from contextlib import suppress
from functools import cache
from typing import Any, NamedTuple

from contextledger.stores.sql.write.pg_prepare import PreparedStatements

__all__ = ["DirectSend"]


class DirectSend:
    """One psycopg (sync) connection's statements, sent with its low-level API."""

    __slots__ = ("_plans", "_reading", "_statements", "_transformer", "connection")

    def __init__(self, connection: Any) -> None:
        """Send on ``connection`` (connected, its adapters registered); nothing is sent yet."""
        self.connection = connection
        self._transformer = _driver().transformer(connection)
        # Per statement text: its numbered text, its parameters' names, their formats --
        # worked out once, not looked up in three caches on every append.
        self._plans: dict[str, tuple[bytes, tuple[str, ...], list[Any]]] = {}
        self._reading: Any = None  # a poll object watching the socket for input, made on first wait
        self._statements = PreparedStatements(
            connection.prepare_threshold, connection.prepared_max, prefix=b"contextledger_held_"
        )

    def execute(self, sql: str, values: dict[str, Any]) -> Any:
        """Run ``sql`` (``%(name)s`` placeholders) with ``values`` once; its first row.

        The row's values are as the server wrote them (text), ``None`` for SQL ``NULL``;
        no row: ``None``. The statement is prepared first when psycopg's rule says so
        (:class:`~contextledger.stores.sql.write.pg_prepare.PreparedStatements`).

        Raises:
            psycopg.Error: The driver's error: an error reply (as the cursor raises it,
                with its ``sqlstate`` and diagnostics), or the connection failed.
        """
        connection = self.connection
        driver = _driver()
        plan = self._plans.get(sql)
        if plan is None:
            text, names = driver.numbered(sql)
            plan = (text, names, driver.auto_formats(len(names)))
            if len(self._plans) < _PLANS:
                self._plans[sql] = plan
        text, names, auto = plan
        transformer = self._transformer
        params = transformer.dump_sequence([values[name] for name in names], auto)
        types: tuple[int, ...] = transformer.types
        formats = transformer.formats
        pgconn = connection.pgconn
        sent = self._statements
        key = (sql, types)
        name = sent.prepared.get(key)
        if name is None and (name := sent.name(key)) is not None:
            pgconn.send_prepare(name, text, types)
            failed = _first_error(self._reply(), driver.fatal_error)
            if failed is not None:
                raise driver.error_from_result(failed, encoding=connection.info.encoding)
            sent.prepared[key] = name
        if name is None:
            pgconn.send_query_params(text, params, types, formats)
        else:
            pgconn.send_query_prepared(name, params, formats)
        results = self._reply()
        failed = _first_error(results, driver.fatal_error)
        if failed is not None:
            raise driver.error_from_result(failed, encoding=connection.info.encoding)
        result = results[0] if results else None
        if result is None or result.status != driver.tuples_ok:
            raise driver.operational_error("the statement gave no row set")
        if not result.ntuples:
            return None
        return tuple(result.get_value(0, column) for column in range(result.nfields))

    def _reply(self) -> list[Any]:
        """:func:`_reply`; interrupted (Ctrl-C, ``SystemExit``), the statement is cancelled on the server first.

        As psycopg's own wait does: the server stops the statement (one waiting for a
        lock would otherwise run, and commit, after the caller has moved on); the caller
        then drops the connection, whose state is unknown.
        """
        connection = self.connection
        pgconn = connection.pgconn
        try:
            return _reply(pgconn, self._reading or self._watch(pgconn.socket))
        except (KeyboardInterrupt, SystemExit):
            if connection.pgconn.transaction_status == _driver().active:
                cancel = getattr(connection, "cancel_safe", None)  # psycopg >= 3.2; before, cancel()
                with suppress(Exception):  # a failed cancel must not replace the interrupt
                    cancel(timeout=5.0) if cancel is not None else connection.cancel()
            raise

    def _watch(self, socket: int) -> Any:
        """A poll object watching the connection's socket for input (``None`` where there is no ``poll()``)."""
        if _poll is not None:
            self._reading = _poll()
            self._reading.register(socket, _READ_EVENTS)
        return self._reading


_PLANS = 64
"""Statement texts a connection keeps worked out (one per set of state fields an append sets: a few)."""


class _Driver(NamedTuple):
    """What a statement sent on the held connection uses of psycopg, imported once (only a psycopg store holds one)."""

    numbered: Callable[[str], tuple[bytes, tuple[str, ...]]]
    auto_formats: Callable[[int], list[Any]]
    error_from_result: Callable[..., Exception]
    transformer: Callable[[Any], Any]
    tuples_ok: int
    fatal_error: int
    operational_error: type[Exception]
    active: int  # pq.TransactionStatus.ACTIVE: a statement is running


@cache
def _driver() -> _Driver:
    from psycopg import OperationalError, pq
    from psycopg.adapt import Transformer
    from psycopg.errors import error_from_result

    from contextledger.stores.sql.write.pg_wire import auto_formats, numbered

    return _Driver(
        numbered,
        auto_formats,
        error_from_result,
        Transformer,
        pq.ExecStatus.TUPLES_OK,
        pq.ExecStatus.FATAL_ERROR,
        OperationalError,
        pq.TransactionStatus.ACTIVE,
    )


_WAIT = 1.0
"""Seconds a wait for the socket blocks at most before waiting again: an interrupt (Ctrl-C) is seen between."""


def _reply(pgconn: Any, reading: Any) -> list[Any]:
    """Flush what was sent and read every result of it, waiting on the socket (``reading``: a poll object watching it).

    Raises:
        psycopg.OperationalError: The connection failed (libpq's error).
    """
    while pgconn.flush():  # a statement larger than the socket's buffer
        _wait(pgconn.socket, writing=True)
        pgconn.consume_input()
    results: list[Any] = []
    while True:
        while pgconn.is_busy():
            if reading is None:  # pragma: no cover - a platform without poll()
                _wait(pgconn.socket, writing=False)
            else:
                while not reading.poll(_WAIT * 1000):
                    pass
            pgconn.consume_input()
        result = pgconn.get_result()
        if result is None:
            return results
        results.append(result)


def _wait(socket: int, *, writing: bool) -> None:
    """Until ``socket`` is readable (or, ``writing``, also writable), a second at a time."""
    if _poll is None:  # pragma: no cover - a platform without poll(): select() in its place
        while not any(select.select([socket], [socket] if writing else [], [], _WAIT)):
            pass
        return
    poller = _poll()
    poller.register(socket, _WRITE_EVENTS if writing else _READ_EVENTS)
    while not poller.poll(_WAIT * 1000):
        pass


_poll = getattr(select, "poll", None)
_READ_EVENTS = getattr(select, "POLLIN", 1)
_WRITE_EVENTS = _READ_EVENTS | getattr(select, "POLLOUT", 4)


def _first_error(results: list[Any], fatal: int) -> Any:
    for result in results:
        if result.status == fatal:
            return result
    return None
