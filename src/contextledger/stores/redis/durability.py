"""Replicated durability: a commit is acknowledged once a replica holds it (``WAIT``).

Redis replicates asynchronously: a primary acknowledges a write before any replica has
it, so a primary that dies right after a commit can take it along when its replica is
promoted. With ``durability="replicated"`` the commit script and ``WAIT numreplicas
timeout`` are pipelined on *one* connection of the primary that owns the conversation's
slot -- ``WAIT`` counts the replicas that acknowledged the writes of its own connection,
so it must follow the script there, never on another pooled connection. When fewer
replicas than asked acknowledge within the timeout, the commit is applied on the primary
but not known to survive a failover: the store reports it as
:class:`~contextledger.errors.CommitOutcomeUnknown`, settled like a lost reply (the next
write sends it again under its changeset id; it applies at most once).

A changeset sent again after it applied writes its own commit-log entry again (see
:data:`~contextledger.stores.redis.scripts.COMMIT`), so the ``WAIT`` after it covers the
first application as well.

On Redis Cluster the connection is the one of the node that owns the slot, taken from
the cluster client's topology; an answer that the slot moved (``MOVED``, ``CLUSTERDOWN``,
``TRYAGAIN``, a replica's ``READONLY``) means nothing was applied: the topology is read
again and the pipeline sent to the new owner, a bounded number of times.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from redis import Redis
from redis.cluster import RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    NoScriptError,
    ReadOnlyError,
    RedisClusterException,
    RedisError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from contextledger.errors import ConfigurationError, StoreUnavailable
from contextledger.stores.urls import Durability, check_durability

__all__ = ["DEFAULT_REPLICA_TIMEOUT", "Replication", "replicated_commit", "replication"]

logger = logging.getLogger("contextledger.stores.redis.store")

DEFAULT_REPLICA_TIMEOUT = 1.0
"""Seconds a replicated commit waits for a replica before it is reported as unknown."""

_MOVED = (AskError, ClusterDownError, TryAgainError, ReadOnlyError)  # AskError covers MovedError
_ROUTING_ATTEMPTS = 5
_ROUTING_PAUSE = 0.2  # seconds between attempts: a failover takes about the node timeout


@dataclass(frozen=True)
class Replication:
    """What a replicated commit waits for.

    Attributes:
        replicas: Replicas that must acknowledge the commit.
        timeout_ms: Milliseconds ``WAIT`` blocks for them (at least 1: ``WAIT ... 0`` blocks forever).
    """

    replicas: int
    timeout_ms: int


def replication(durability: object, replica_timeout: object, replicas: object) -> Replication | None:
    """The :class:`Replication` a store's options ask for; ``None`` for ``durability="primary"``.

    Raises:
        ConfigurationError: ``durability`` is unknown, ``replica_timeout`` is not a positive
            finite number of seconds, or ``replicas`` is not a positive integer.
    """
    setting: Durability = check_durability(durability)
    if (
        isinstance(replica_timeout, bool)
        or not isinstance(replica_timeout, int | float)
        or not 0 < replica_timeout < float("inf")
    ):
        raise ConfigurationError(f"replica_timeout must be a positive number of seconds, got {replica_timeout!r}")
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigurationError(f"replicas must be a positive integer, got {replicas!r}")
    if setting == "primary":
        return None
    return Replication(replicas=replicas, timeout_ms=max(1, round(replica_timeout * 1000)))


def check_client(client: object) -> None:
    """Refuse a client the replicated commit cannot pin to one connection.

    Raises:
        ConfigurationError: ``client`` is not redis-py's sync ``Redis`` or ``RedisCluster``.
    """
    if not isinstance(client, Redis | RedisCluster):
        raise ConfigurationError(
            f"durability='replicated' needs redis-py's sync client (Redis or RedisCluster), got {type(client).__name__}"
        )


def replicated_commit(
    client: Redis | RedisCluster,
    script_sha: str,
    script_source: str,
    keys: Sequence[str],
    args: Sequence[str],
    rep: Replication,
) -> tuple[Any, int]:
    """Run the commit script, then ``WAIT``, on one connection of the slot's primary.

    Returns:
        The script's reply and the number of replicas that acknowledged it.

    Raises:
        ResponseError: The script refused the changeset (the caller maps its error code);
            nothing was applied.
        StoreUnavailable: The slot's owner kept moving (nothing was applied).
        RedisError: The connection failed (the outcome is unknown: the caller reads it back).
    """
    loaded = False
    moved: RedisError | None = None
    for attempt in range(_ROUTING_ATTEMPTS):
        node = _node_client(client, keys[0])
        pipe = node.pipeline(transaction=False)
        pipe.evalsha(script_sha, len(keys), *keys, *args)
        cast(Any, pipe).execute_command("WAIT", rep.replicas, rep.timeout_ms)  # redis-py leaves it untyped
        try:
            reply, acked = pipe.execute(raise_on_error=False)
        except (RedisConnectionError, RedisTimeoutError):
            if isinstance(client, RedisCluster):
                _refresh(client)  # the primary may be gone: the next call routes by the new topology
            raise
        if isinstance(reply, NoScriptError) and not loaded:
            node.script_load(script_source)  # a new or restarted node: load once, send again
            loaded = True
            continue
        if isinstance(reply, _MOVED) and isinstance(client, RedisCluster):
            moved = reply
            logger.info("attempt=<%d>, error=<%s> | slot moved, reading the cluster topology", attempt + 1, reply)
            _refresh(client)
            time.sleep(_ROUTING_PAUSE)
            continue
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(acked, BaseException):
            raise acked
        return reply, int(acked)
    raise StoreUnavailable(f"the conversation's slot kept moving ({moved})")


def _node_client(client: Redis | RedisCluster, key: str) -> Redis:
    if isinstance(client, Redis):
        return client
    node = cast(Any, client).get_node_from_key(key)  # redis-py leaves it untyped
    connection: Redis = client.get_redis_connection(node)
    return connection


def _refresh(client: RedisCluster) -> None:
    """Read the cluster's topology again (a failover may be under way: failures are left to the next try)."""
    try:
        client.nodes_manager.initialize()
    except (RedisError, RedisClusterException) as exc:
        logger.info("error=<%s> | the cluster topology could not be read yet", exc)
