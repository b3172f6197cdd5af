"""One native PostgreSQL connection of an event loop, its statement sent through psycopg's libpq wrapper.

The async API's native append (:mod:`~contextledger.stores.sql.write.pg_asend`) sends
one statement per append. psycopg's ``AsyncConnection`` makes, configures and closes the
connection here; the statement itself is sent with the documented low-level API of
:mod:`psycopg.pq` (``send_query_prepared``, ``flush``, ``consume_input``, ``is_busy``,
``get_result``), the socket watched by the loop's own reader for the connection's life
and one future per reply. Through ``AsyncCursor.execute`` the same statement cost
about twice the client CPU of a sync cursor (95 against 40 µs): a lock per call, a
timer, a reader added and removed and a future per wait, the cursor's result
bookkeeping.

What the server sees is what the sync held connection sends
(:mod:`~contextledger.stores.sql.write.pg_direct`): the same statement text (its
``%(name)s`` placeholders numbered as psycopg numbers them), each parameter dumped by
the connection's own adapters (the NUL-escaping string dumper among them) with the type
and format psycopg gives it, and the statement prepared on the server under the held
connection's ``prepare_threshold`` / ``prepared_max`` (``None``: never prepared, the text
sent each time).

A wire reports what became of a statement with the sender's two signals:
:class:`~contextledger.core.seam.Refused` when nothing was applied (an error reply, a
failure before the statement went out) and :class:`~contextledger.core.seam.Lost` when
the connection failed after it was sent; either leaves :attr:`Wire.usable` false when
the connection cannot carry another statement.
"""

from __future__ import annotations

import asyncio
import os
import re
import weakref
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import AsyncConnection, pq
from psycopg.adapt import PyFormat, Transformer

from contextledger.core.seam import Lost, Refused
from contextledger.stores.sql.write.pg_prepare import PreparedStatements

if TYPE_CHECKING:
    from psycopg.pq.abc import PGresult

__all__ = ["Wire", "numbered"]

# SQLSTATE classes after which the connection's state is unknown: a connection exception
# (08) or an operator intervention (57: a terminated backend, a shutdown, a cancel).
_LOST_CLASSES = (b"08", b"57")
# A prepared statement the server no longer has (a pooler's DISCARD ALL) or whose plan
# changed its result (the schema moved under it): the wire's statement names are stale.
_STALE_PLANS = (b"26000", b"0A000")
_SQLSTATE = pq.DiagnosticField.SQLSTATE
_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_FATAL_ERROR = pq.ExecStatus.FATAL_ERROR
_IDLE = pq.TransactionStatus.IDLE
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


@lru_cache(maxsize=64)
def numbered(sql: str) -> tuple[bytes, tuple[str, ...]]:
    """``sql`` with its ``%(name)s`` placeholders numbered ``$1``, ``$2`` ... in order of first use, and those names.

    A name used twice gets one number; ``%%`` is a literal ``%``, as psycopg reads them.
    """
    names: dict[str, int] = {}

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "%"
        return f"${names.setdefault(name, len(names) + 1)}"

    text = _PLACEHOLDER.sub(number, sql)
    return text.encode(), tuple(names)


@lru_cache(maxsize=64)
def auto_formats(count: int) -> list[PyFormat]:
    """``count`` times ``PyFormat.AUTO`` (what a cursor asks of ``%(name)s`` parameters), one list per count.

    psycopg's ``Transformer.dump_sequence`` only reads it.
    """
    return [PyFormat.AUTO] * count


class Wire:
    """A psycopg ``AsyncConnection`` of one event loop, in autocommit mode, sending one statement at a time.

    Made and used on that loop only. Its socket is watched by the loop from
    construction to :meth:`close`: a reply wakes the send waiting for it, and input
    that arrives while idle (a notice, the server ending the session) is read at
    once, so a connection the server closed is found unusable before the next
    statement is sent on it.
    """

    __slots__ = (
        "_loop",
        "_pgconn",
        "_pid",
        "_reading",
        "_socket",
        "_statements",
        "_transformer",
        "_waiter",
        "connection",
        "usable",
    )

    def __init__(
        self, connection: AsyncConnection[Any], *, prepare_threshold: int | None, prepared_max: int | None
    ) -> None:
        """Drive ``connection`` (connected, autocommit, its adapters registered) from the running loop.

        Raises:
            NotImplementedError: The loop cannot watch a socket (nothing sent).
        """
        self.connection = connection
        self._pgconn = connection.pgconn
        self._socket = self._pgconn.socket
        loop = asyncio.get_running_loop()
        # Weakly: the sender keeps a loop's connections in a dict weakly keyed by the loop,
        # which a strong reference from here would keep alive (and its connections open)
        # after the loop ended.
        self._loop = weakref.ref(loop)
        self._pid = os.getpid()
        self._statements = PreparedStatements(prepare_threshold, prepared_max, prefix=b"contextledger_")
        # The cursor's own machinery dumps the parameters, as on the held connection
        # (pg_direct): each gets the type, format and bytes a cursor gives it.
        self._transformer = Transformer(connection)
        self._waiter: asyncio.Future[None] | None = None
        self.usable = True
        loop.add_reader(self._socket, self._readable)
        self._reading = True

    @property
    def prepared(self) -> int:
        """How many statements this connection has prepared on the server."""
        return len(self._statements.prepared)

    # -- the reply ---------------------------------------------------------------------

    def _readable(self) -> None:
        """The socket has input: read it; wake the send waiting for a whole reply, or lose the connection."""
        waiter = self._waiter
        try:
            self._pgconn.consume_input()
        except psycopg.Error as exc:  # the server closed the connection (or the socket failed)
            self._unwatch()
            self.usable = False
            if waiter is not None and not waiter.done():
                waiter.set_exception(exc)
            return
        if waiter is not None and not waiter.done() and not self._pgconn.is_busy():
            waiter.set_result(None)

    def _writable(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _reply(self) -> PGresult | None:
        """Every result of the statement sent; the first error among them, else the first result."""
        pgconn = self._pgconn
        first: PGresult | None = None
        while True:
            if pgconn.is_busy():
                await self._wait()
            result = pgconn.get_result()
            if result is None:
                return first
            if first is None or (result.status == _FATAL_ERROR and first.status != _FATAL_ERROR):
                first = result

    async def _wait(self) -> None:
        if not self._reading:
            raise psycopg.OperationalError("the connection is closed")
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    async def _flush(self) -> None:
        """Send what libpq holds back (a statement larger than the socket's buffer), waiting for room."""
        pgconn = self._pgconn
        while pgconn.flush():
            loop = asyncio.get_running_loop()
            self._waiter = waiter = loop.create_future()
            loop.add_writer(self._socket, self._writable)
            try:
                await waiter  # the reader may wake it too: input is read while writing
            finally:
                self._waiter = None
                loop.remove_writer(self._socket)

    # -- the statement -----------------------------------------------------------------

    async def _prepare(self, name: bytes, text: bytes, types: tuple[int, ...]) -> None:
        """Prepare ``text`` as ``name`` (one round trip, once per statement and parameter types).

        Raises:
            Refused: The server refused it or the connection failed (the statement was not sent).
        """
        try:
            self._pgconn.send_prepare(name, text, types)
            await self._flush()
            result = await self._reply()
        except (psycopg.Error, OSError) as exc:
            self.usable = False
            raise Refused(f"preparing the append failed: {exc}") from exc
        except BaseException:
            self.usable = False  # interrupted mid-reply: the connection's state is unknown
            raise
        if result is None or result.status != _COMMAND_OK:
            error = self._error(result)
            raise error if isinstance(error, Refused) else Refused(str(error))  # only the PREPARE was sent

    async def execute(self, sql: str, values: dict[str, Any]) -> Any:
        """Run ``sql`` (``%(name)s`` placeholders) with ``values`` once; the first value of its reply.

        That is its one row's first column as the server wrote it (text), ``None`` for
        SQL ``NULL`` or no row.

        Raises:
            Refused: Nothing was applied: the server answered with an error, or the
                parameters could not be dumped, or the statement could not be prepared.
            Lost: The connection failed after the statement was sent; applied at most once.
        """
        text, names = numbered(sql)
        transformer = self._transformer
        try:
            params = transformer.dump_sequence([values[name] for name in names], auto_formats(len(names)))
        except (psycopg.Error, TypeError, ValueError) as exc:
            raise Refused(f"the append's parameters cannot be sent: {exc}") from exc
        types = transformer.types or ()
        formats = transformer.formats or []
        key = (sql, types)
        statements = self._statements
        name = statements.prepared.get(key)
        if name is None:
            name = statements.name(key)
            if name is not None:
                await self._prepare(name, text, types)
                statements.prepared[key] = name
        pgconn = self._pgconn
        try:
            if name is None:
                pgconn.send_query_params(text, params, types, formats)
            else:
                pgconn.send_query_prepared(name, params, formats)
            await self._flush()
            result = await self._reply()
        except (psycopg.Error, OSError) as exc:
            self.usable = False
            raise Lost(str(exc)) from exc
        except BaseException:
            self.usable = False  # cancelled mid-statement: its outcome is unknown, the connection is dropped
            raise
        if result is not None and result.status == _TUPLES_OK:
            return result.get_value(0, 0) if result.ntuples else None
        if result is None or result.status != _FATAL_ERROR:  # no reply a one-row statement gives: applied or not
            self.usable = False
            status = "none" if result is None else pq.ExecStatus(result.status).name
            raise Lost(f"unexpected reply to the append: {status}")
        raise self._error(result)

    def _error(self, result: PGresult | None) -> Refused | Lost:
        """What the error reply ``result`` means: ``Lost`` for a failed connection, else ``Refused``."""
        pgconn = self._pgconn
        message = "no reply" if result is None else result.get_error_message(self.connection.info.encoding)
        sqlstate = b"" if result is None else (result.error_field(_SQLSTATE) or b"")
        if pgconn.status != pq.ConnStatus.OK or sqlstate[:2] in _LOST_CLASSES:
            self.usable = False
            return Lost(message)
        if pgconn.transaction_status != _IDLE or sqlstate in _STALE_PLANS:
            self.usable = False  # not left as an autocommit statement leaves it, or its prepared names are stale
        return Refused(message)

    # -- closing -----------------------------------------------------------------------

    def _unwatch(self) -> None:
        if self._reading:
            self._reading = False
            loop = self._loop()
            if loop is not None and not loop.is_closed():
                loop.remove_reader(self._socket)

    def close(self) -> None:
        """Stop watching the socket and close the connection (a forked child only lets go of its parent's)."""
        self.usable = False
        if os.getpid() != self._pid:
            # A forked child's copy: the socket and the loop's epoll set are shared with the
            # parent, so neither unregistering it nor closing the session may happen here.
            self._reading = False
            return
        self._unwatch()
        self._pgconn.finish()
