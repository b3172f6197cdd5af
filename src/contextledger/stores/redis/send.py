"""One ``EVALSHA`` on a pooled connection of redis-py's sync client, packed once.

Every append is one call of the commit script. Through ``Script.__call__`` and
``Redis.execute_command`` that call costs about twice the packing, the send and the read
themselves (command wrappers, per-call metrics hooks, a retry closure per call). Here the
script runs on a connection taken from the client's own pool with the connection's
public methods: the command is packed once (by hiredis when redis-py would pack with it,
else by the connection's ``pack_command``), sent and its reply read
under the connection's own retry policy -- what ``execute_command`` does on a failure:
drop the connection, back off, send again -- and the connection goes back to the pool
(which drops one the server asked to reconnect). A script missing from the server's
cache is loaded and sent once more, as ``Script.__call__`` does.

Only a plain :class:`redis.Redis` holding no dedicated connection of its own
(``single_connection_client``) takes this path (:func:`pooled`); a Cluster client, a
subclass or a client of a ``client_factory`` runs the script through ``Script``.

A pool's checkout and check-in (its lock, its metrics hooks, the released event) cost
about as much client CPU as the packing and the send. So a store keeps one connection
of the pool's own kind for its commits (:class:`HeldConnection`), made with the pool's
connection class and arguments but outside it, as the PostgreSQL store keeps one for
its appends: it is checked before each send as the pool checks one it hands out
(connected; no data waiting, else replaced), a thread that finds it busy takes the
pool as before, a forked child makes its own, and the store's close closes it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from redis import Redis
from redis.commands.core import Script
from redis.connection import AbstractConnection, Connection, ConnectionPool
from redis.exceptions import ConnectionError, NoScriptError, TimeoutError
from redis.utils import HIREDIS_AVAILABLE

__all__ = ["HeldConnection", "Pack", "evalsha", "pack_in_c", "pooled"]

Pack = Callable[[AbstractConnection, tuple[Any, ...]], list[bytes]]
"""How a command (its name and arguments) becomes the bytes a connection sends."""


def _packed_by_connection(connection: AbstractConnection, command: tuple[Any, ...]) -> list[bytes]:
    packed: list[bytes] = connection.pack_command(*command)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
    return packed


pack_in_c: Callable[[tuple[Any, ...]], bytes] | None = None
"""hiredis's ``pack_command`` when redis-py packs with it (``None`` without hiredis): a command's bytes, in C."""
if HIREDIS_AVAILABLE:  # what redis-py's own packer calls then, without its per-argument pass
    from hiredis import pack_command as pack_in_c

    def _packed_in_c(connection: AbstractConnection, command: tuple[Any, ...]) -> list[bytes]:
        return [pack_in_c(command)]  # type: ignore[misc]  # set just above


def pooled(client: object) -> Pack | None:
    """How :func:`evalsha` packs for ``client``, or ``None`` when it may not use ``client``'s pool.

    It may for a plain ``Redis`` holding no connection of its own. Its commands are packed
    by hiredis directly when redis-py itself would (hiredis present, the plain
    ``Connection`` class, no packer of the caller's), else by the connection's
    ``pack_command``.
    """
    if type(client) is not Redis or client.connection is not None:
        return None
    pool = client.connection_pool
    if HIREDIS_AVAILABLE and pool.connection_class is Connection and "command_packer" not in pool.connection_kwargs:
        return _packed_in_c
    return _packed_by_connection


def evalsha(client: Redis, script: Script, keys: Sequence[str], args: Sequence[str], pack: Pack) -> Any:
    """Run ``script`` with ``keys`` and ``args`` once on a connection of ``client``'s pool; its reply.

    ``pack`` is :func:`pooled`'s answer for ``client``.

    Raises:
        ResponseError: The script replied with an error (nothing of it ran, or all of
            it: the scripts check before they write).
        ConnectionError, TimeoutError: The server could not be reached, or stopped
            answering, after the connection's retries (the script ran at most once per try;
            the commit script is idempotent by its changeset id).
    """
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        packed = pack(connection, ("EVALSHA", script.sha, len(keys), *keys, *args))
        try:
            return _run(connection, packed)
        except NoScriptError:  # the server's script cache was flushed (or it restarted): load it, on this connection
            _run(connection, pack(connection, ("SCRIPT", "LOAD", script.script)))
            return _run(connection, packed)
    finally:
        pool.release(connection)


class HeldConnection:
    """One connection a store keeps for its commit scripts, of its client's pool's kind but outside the pool.

    :meth:`evalsha` sends on it when no other thread does, else on a connection of the
    pool (:func:`evalsha`). Only a plain ``ConnectionPool`` without a client-side cache
    or a credential provider (whose re-authentication follows the pool's check-ins) has
    its connection held: for another, every send takes the pool. One the server asked
    to reconnect elsewhere (a maintenance notification) is dropped after its send, as
    the pool drops it on its check-in, and the next is made with the pool's arguments
    as they are then.
    """

    __slots__ = ("_client", "_connection", "_holds", "_lock", "_pack", "_pid")

    def __init__(self, client: Redis, pack: Pack) -> None:
        """Send ``client``'s scripts packed by ``pack`` (:func:`pooled`'s answer); nothing is connected yet."""
        pool = client.connection_pool
        self._client = client
        self._pack = pack
        self._holds = (
            type(pool) is ConnectionPool
            and getattr(pool, "cache", None) is None
            and pool.connection_kwargs.get("credential_provider") is None
        )
        self._lock = threading.Lock()
        self._connection: AbstractConnection | None = None
        self._pid = os.getpid()

    def evalsha(self, script: Script, keys: Sequence[str], args: Sequence[str]) -> Any:
        """:func:`evalsha` on the held connection (made on first use), or on the pool's while another thread uses it.

        Raises:
            ResponseError, ConnectionError, TimeoutError: As :func:`evalsha`.
        """
        lock = self._lock
        if not self._holds or not lock.acquire(blocking=False):
            return evalsha(self._client, script, keys, args, self._pack)
        try:
            connection = self._ready()
            packed = self._pack(connection, ("EVALSHA", script.sha, len(keys), *keys, *args))
            try:
                return _run(connection, packed)
            except NoScriptError:  # the server's script cache was flushed: load it, on this connection
                _run(connection, self._pack(connection, ("SCRIPT", "LOAD", script.script)))
                return _run(connection, packed)
        finally:
            try:
                held = self._connection
                if held is not None and _should_reconnect(held):
                    self._connection = None
                    held.disconnect()  # type: ignore[no-untyped-call]
            finally:
                lock.release()

    def _ready(self) -> AbstractConnection:
        """The held connection, connected and idle, as the pool hands one out (call with the lock held).

        Raises:
            ConnectionError, TimeoutError: It could not connect, or is not ready after connecting again.
        """
        connection = self._connection
        if connection is None or self._pid != os.getpid():
            # A forked child never uses its parent's connection (nor closes it: the socket is shared).
            pool = self._client.connection_pool
            connection = self._connection = pool.connection_class(**pool.connection_kwargs)
            self._pid = os.getpid()
        if not getattr(connection, "is_connected", False):  # where redis-py has the property: no connect() call
            connection.connect()
        try:
            # Data waiting on an idle connection: a reply left unread, or the server closed
            # it (an idle timeout, a kill). Replaced before the send, as the pool does, so
            # that the commit is not sent on a dead connection (a lost reply, a read-back).
            if connection.can_read():
                raise ConnectionError("Connection has data")
        except (ConnectionError, TimeoutError, OSError):
            connection.disconnect()
            connection.connect()
            if connection.can_read():
                raise ConnectionError("Connection not ready") from None
        return connection

    def close(self) -> None:
        """Close the held connection (waiting for a send on it); a later send connects again."""
        if self._pid != os.getpid():
            # A forked child holding its parent's connection (or none): nothing of its own to
            # close, and the lock may have been held by a thread of the parent when it forked.
            self._connection = None
            return
        with self._lock:
            connection, self._connection = self._connection, None
            if connection is not None:
                connection.disconnect()  # type: ignore[no-untyped-call]


def _should_reconnect(connection: AbstractConnection) -> bool:
    """Whether the server asked ``connection`` to reconnect (redis-py >= 7's maintenance notifications)."""
    asked = getattr(connection, "should_reconnect", None)
    return bool(asked()) if asked is not None else False


def _run(connection: AbstractConnection, packed: list[bytes]) -> Any:
    def once() -> Any:
        connection.send_packed_command(packed)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        return connection.read_response()

    def failed(_error: Exception) -> None:
        connection.disconnect()  # type: ignore[no-untyped-call]  # as the client does before it tries again

    return connection.retry.call_with_retry(once, failed)
