"""PostgreSQL's one-statement append sent from an event loop, on a connection of that loop.

The async API (:mod:`contextledger.aio`) builds an append's changeset on the loop's
thread with the sync code, asks the store for the statement its held connection would
send (:meth:`SQLStore.one_statement <contextledger.stores.sql.SQLStore.one_statement>`:
the same text and parameters, from the same functions of
:mod:`~contextledger.stores.sql.write.pg_append`) and sends exactly that here, in
autocommit mode, on a connection of the running loop: no worker thread. Only the send
differs from the sync commit: psycopg's ``AsyncConnection`` makes the connection, and
the statement goes out through psycopg's libpq wrapper, the loop watching the socket
(:class:`~contextledger.stores.sql.write.pg_wire.Wire`), which costs about half the
client CPU of ``AsyncCursor.execute``.

Whatever is not an applied row is handed back: :class:`~contextledger.core.seam.Refused`
when nothing was applied (the version check or a summary id refused the statement, the
server answered with an error, or the connection could not be made), and
:class:`~contextledger.core.seam.Lost` when the connection failed after the statement
was sent (applied at most once). The caller then leaves the write to the sync path,
which reads why it was refused (``explain_missed_update``) or settles the lost reply by
its changeset id (DESIGN semantics 8).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections import deque
from typing import Any

from psycopg import AsyncConnection

from contextledger.core.changeset import Changeset
from contextledger.core.seam import Refused
from contextledger.stores.base import LedgerStore
from contextledger.stores.sql import encoding
from contextledger.stores.sql.store import SQLStore
from contextledger.stores.sql.write.pg_append import applied
from contextledger.stores.sql.write.pg_wire import Wire
from contextledger.stores.sql.write.pg_writer import HeldAppender, HeldSettings, holds_psycopg

__all__ = ["NativeSend"]

logger = logging.getLogger("contextledger.stores.sql.store")

CONNECTIONS_PER_LOOP = 8
"""At most this many native connections per event loop: more appends at once wait on the loop for one.

PostgreSQL spends a process per connection (``max_connections`` is 100 by default), so
100 conversations appending at once must not open 100; a few connections keep the
server busy, as the engine's pool does for the worker threads.
"""


class _LoopConnections:
    """One event loop's native connections: the idle ones, how many exist, and the appends waiting for one.

    Made and used on that loop only, so nothing here needs a lock; handing a connection
    back is a plain call (no task, no lock: it runs on every append).
    """

    __slots__ = ("closed", "count", "idle", "waiting")

    def __init__(self) -> None:
        self.idle: list[Wire] = []
        self.count = 0
        self.waiting: deque[asyncio.Future[None]] = deque()
        self.closed = False  # the sender closed this loop's connections: one handed back now is closed too

    def give_back(self, wire: Wire | None) -> None:
        """``wire`` is idle again (``None``: it was closed); the first waiting append is woken."""
        if wire is None:
            self.count -= 1
        elif self.closed:
            wire.close()
            self.count -= 1
        else:
            self.idle.append(wire)
        self._wake()

    def close(self) -> None:
        """Close the idle connections, and each one in use once it is handed back."""
        self.closed = True
        while self.idle:
            self.idle.pop().close()
            self.count -= 1

    def idle_wire(self) -> Wire | None:
        """An idle connection that can carry a statement; those the server closed meanwhile are closed and uncounted."""
        while self.idle:
            wire = self.idle.pop()
            if wire.usable:
                return wire
            wire.close()
            self.count -= 1  # the caller may make one in its place
        return None

    def _wake(self) -> None:
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def wait(self) -> None:
        """Until a connection is given back (or may be made); a cancelled waiter passes its wake-up on."""
        waiter = asyncio.get_running_loop().create_future()
        self.waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._wake()
            raise


class NativeSend:
    """Sends one PostgreSQL store's one-statement appends from any event loop, on connections of that loop.

    Each loop keeps its idle connections (autocommit, the NUL adapters the store's
    engine registers, the settings of the store's held connection: see
    :meth:`HeldAppender.settings`); one append in flight holds one. A loop that ends
    takes its connections with it (weakly held), and :meth:`aclose` closes the
    calling loop's.
    """

    def __init__(self, store: SQLStore, appender: HeldAppender) -> None:
        """Send for ``store``, connecting as its held ``appender`` connects (see :meth:`of`)."""
        self.store = store
        self._appender = appender
        self._settings: HeldSettings | None = None
        self._settings_lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopConnections] = (
            weakref.WeakKeyDictionary()
        )
        self.sent = 0  # statements sent natively (tests count them)

    @classmethod
    def of(cls, store: LedgerStore) -> NativeSend | None:
        """A sender for ``store`` when it is a PostgreSQL store on psycopg's sync driver; else ``None``.

        Whether an append is sent natively is decided again for each one
        (:meth:`call`): statement events added to the engine send it on a worker.
        """
        if not isinstance(store, SQLStore) or not str(store.url).startswith("postgresql"):
            return None
        if not holds_psycopg(store.engine):
            return None
        return cls(store, store._held_appender())

    def call(self, changeset: Changeset) -> tuple[str, dict[str, Any], int] | None:
        """What :meth:`send` sends for ``changeset``, or ``None`` when the sync path sends it.

        The statement and parameters of :meth:`SQLStore.one_statement`, and the version
        ``changeset`` makes.

        Raises:
            InvalidMessage: As :meth:`SQLStore.one_statement` (nothing sent).
            DuplicateEntry: As :meth:`SQLStore.one_statement`.
            LedgerClosed: The store was closed.
        """
        statement = self.store.one_statement(changeset)
        return None if statement is None else (*statement, changeset.new_version)

    async def send(self, call: tuple[str, dict[str, Any], int]) -> int:
        """Execute the statement of ``call`` once; the new version once it applied.

        Raises:
            Refused: Nothing was applied (refused by the version check, a summary id or a
                constraint; an error reply; no connection could be made).
            Lost: The connection failed after the statement was sent; applied at most once.
        """
        sql, values, new_version = call
        loop = asyncio.get_running_loop()
        mine = self._loops.get(loop)
        if mine is None:
            mine = self._loops[loop] = _LoopConnections()
        wire = await self._take(mine)
        self.sent += 1
        try:
            value = await wire.execute(sql, values)
        finally:  # a connection whose state is unknown (lost, cancelled mid-statement) is closed
            if wire.usable:
                mine.give_back(wire)
            else:
                mine.give_back(None)
                wire.close()
        if not applied((value,)):
            raise Refused("the version check or a summary id refused the append")
        return new_version

    async def _take(self, mine: _LoopConnections) -> Wire:
        """An idle connection of this loop, a new one while there are fewer than the cap, else the next one freed.

        Raises:
            Refused: A new connection could not be made (nothing was sent).
        """
        while (wire := mine.idle_wire()) is None and mine.count >= CONNECTIONS_PER_LOOP:
            await mine.wait()
        if wire is not None:
            return wire
        mine.count += 1
        try:
            return await self._connect()
        except BaseException:
            mine.give_back(None)
            raise

    async def _connect(self) -> Wire:
        """A new connection of the running loop, in autocommit mode.

        Raises:
            Refused: It could not be made (nothing was sent).
        """
        try:
            settings = self._settings
            if settings is None:  # once per sender: the held connection's settings, read on a thread
                settings = self._settings = await asyncio.to_thread(self._read_settings)
            connection = await AsyncConnection.connect(settings.conninfo, autocommit=True)
        except Exception as exc:  # nothing was sent: the sync path connects and reports
            logger.debug(
                "url=<%s>, error=<%s> | no native connection, the append goes to a worker", self.store.url, exc
            )
            raise Refused(f"no native connection: {exc}") from exc
        encoding.register_nul_adapters(connection)
        try:
            return Wire(connection, prepare_threshold=settings.prepare_threshold, prepared_max=settings.prepared_max)
        except Exception as exc:  # a loop that cannot watch a socket
            await connection.close()
            raise Refused(f"no native connection: {exc}") from exc

    def _read_settings(self) -> HeldSettings:
        with self._settings_lock:
            return self._appender.settings()

    async def aclose(self) -> None:
        """Close the calling loop's connections (others go with their loops)."""
        mine = self._loops.pop(asyncio.get_running_loop(), None)
        if mine is not None:
            mine.close()
