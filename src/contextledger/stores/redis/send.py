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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from redis import Redis
from redis.commands.core import Script
from redis.connection import AbstractConnection, Connection
from redis.exceptions import NoScriptError
from redis.utils import HIREDIS_AVAILABLE

__all__ = ["Pack", "evalsha", "pack_in_c", "pooled"]

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


def _run(connection: AbstractConnection, packed: list[bytes]) -> Any:
    def once() -> Any:
        connection.send_packed_command(packed)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        return connection.read_response()

    def failed(_error: Exception) -> None:
        connection.disconnect()  # type: ignore[no-untyped-call]  # as the client does before it tries again

    return connection.retry.call_with_retry(once, failed)
