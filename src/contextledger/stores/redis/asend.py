"""A Redis commit's one script sent from an event loop, with ``redis.asyncio``.

The async API (:mod:`contextledger.aio`) builds an append's changeset on the loop's
thread with the sync code, asks the store for the commit's one ``EVALSHA``
(:meth:`RedisStore.one_script <contextledger.stores.redis.store.RedisStore.one_script>`)
and sends exactly that here, on a connection of the running loop: no worker thread.
Only the send differs from the sync commit. Whatever is not a version in reply is
handed back as :class:`~contextledger.core.seam.Refused` (the server answered with an error: nothing was
applied) or :class:`~contextledger.core.seam.Lost` (the connection failed: applied at most once); the caller
then leaves the write to the sync path, which maps the error or settles the lost reply
by its changeset id (DESIGN semantics 8).
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from redis import Redis
from redis.asyncio import Connection as AsyncConnection
from redis.connection import Connection
from redis.exceptions import RedisError, ResponseError

from contextledger.core.changeset import Changeset
from contextledger.core.seam import Lost, Refused
from contextledger.stores.base import LedgerStore
from contextledger.stores.redis.connect import IDENTITY_OPTIONS
from contextledger.stores.redis.send import pack_in_c
from contextledger.stores.redis.store import RedisStore

__all__ = ["NativeSend"]

logger = logging.getLogger("contextledger.stores.redis.store")

_OPTIONS = (
    "host",
    "port",
    "db",
    "username",
    "password",
    "socket_timeout",
    "socket_connect_timeout",
    *IDENTITY_OPTIONS,  # the name the store's connections give the server, and no metadata lookup per connection
)
"""The connection settings carried over from the store's client (a plain TCP one only)."""


class NativeSend:
    """Sends one store's commit scripts from any event loop, on one ``redis.asyncio`` client per loop.

    A client (and its connections) belongs to the loop that made it; a loop that ends
    takes its client with it (weakly held), and :meth:`aclose` closes the calling loop's.
    """

    def __init__(self, store: RedisStore, options: dict[str, Any]) -> None:
        """Send for ``store``, connecting with ``options`` (see :meth:`of`)."""
        self.store = store
        # The reply's timeout is kept here and set around the send and the read together:
        # a connection given socket_timeout wraps each send in asyncio.wait_for (a task per send).
        self._timeout: float | None = options.pop("socket_timeout", None)
        self._options = {**options, "socket_timeout": None}  # not the connection's default either
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[AsyncConnection]] = (
            weakref.WeakKeyDictionary()
        )
        self.sent = 0  # scripts sent natively (tests count them)

    @classmethod
    def of(cls, store: LedgerStore) -> NativeSend | None:
        """A sender for ``store`` when it is a Redis store on one server over plain TCP; else ``None``.

        A Cluster client, a client of a ``client_factory`` (TLS, a socket path) or any
        other store keeps every append on a worker thread.
        """
        if not isinstance(store, RedisStore):
            return None
        client = store.client
        if type(client) is not Redis or client.connection_pool.connection_class is not Connection:
            return None
        kwargs = client.get_connection_kwargs()
        options = {name: kwargs[name] for name in _OPTIONS if kwargs.get(name) is not None}
        return cls(store, options)

    def call(self, changeset: Changeset) -> tuple[str, list[str], list[str]] | None:
        """What :meth:`send` sends for ``changeset`` (see :meth:`RedisStore.one_script`), or ``None``.

        Raises:
            InvalidMessage: Content cannot be stored as JSON.
            LedgerClosed: The store was closed.
        """
        return self.store.one_script(changeset)

    async def send(self, call: tuple[str, list[str], list[str]]) -> int:
        """Run the script of ``call`` (SHA, keys, args) once; its reply, the new version.

        Raises:
            Refused: The server replied with an error; nothing was applied.
            Lost: The connection failed; the script applied at most once.
        """
        sha, keys, args = call
        loop = asyncio.get_running_loop()
        idle = self._clients.get(loop)
        if idle is None:
            idle = self._clients[loop] = []
        # A connection of this loop's own, one command at a time on it, no pool: redis-py's
        # pool and command wrappers cost more per append than the worker hop this replaces.
        connection = idle.pop() if idle else AsyncConnection(**self._options)
        self.sent += 1
        try:
            command = ("EVALSHA", sha, len(keys), *keys, *args)
            if self._timeout is None:  # the client's default: no timeout to arm (a timer handle per send)
                reply = await _exchange(connection, command)
            else:
                async with asyncio.timeout(self._timeout):  # the client's socket_timeout
                    reply = await _exchange(connection, command)
        except ResponseError as exc:
            idle.append(connection)  # the reply was read whole: the connection stays usable
            raise Refused(str(exc)) from exc
        except (RedisError, OSError) as exc:  # OSError: TimeoutError too (the reply's timeout)
            await connection.disconnect()
            raise Lost(str(exc)) from exc
        except BaseException:  # cancelled mid-command: what the connection holds next is unknown
            await asyncio.shield(connection.disconnect())
            raise
        idle.append(connection)
        return int(reply)

    async def aclose(self) -> None:
        """Close the calling loop's client (others go with their loops)."""
        loop = asyncio.get_running_loop()
        for connection in self._clients.pop(loop, []):
            await connection.disconnect()


async def _exchange(connection: AsyncConnection, command: tuple[Any, ...]) -> Any:
    """Send ``command`` on ``connection`` and read its reply."""
    if pack_in_c is not None:  # the same bytes as the connection's packer, which is pure Python
        # no health check: these connections are made without an interval for one (no PING ever)
        await connection.send_packed_command(pack_in_c(command), check_health=False)
    else:
        await connection.send_command(*command)
    return await connection.read_response()
