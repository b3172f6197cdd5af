"""What every part of the Redis store shares: the client, the keys, the scripts, the driver boundary.

The store's parts (:mod:`.queries`, :mod:`.writes`, :mod:`.sessions`, :mod:`.lifecycle`,
:mod:`.moving`, :mod:`.upgrade`) each take the one :class:`RedisData` of their store;
this is their whole shared interface. Every call to the server runs inside
:meth:`RedisData.driver`, which refuses calls once the store is closed and translates
driver errors (:func:`~.connect.translated`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from redis import Redis
from redis.cluster import RedisCluster
from redis.commands.core import Script
from redis.exceptions import RedisClusterException, RedisError, ResponseError

from contextledger.errors import ConcurrencyConflict, ConfigurationError, EntryNotFound, InvalidLedgerURL
from contextledger.stores.lifecycle import Gate
from contextledger.stores.redis import (
    erasure,
    eviction_index,
    lineage,
    listing,
    owners,
    paging,
    scripts,
    summary_index,
    transfer,
    travel,
    trigger_index,
)
from contextledger.stores.redis.codec import text
from contextledger.stores.redis.connect import RedisClient, one_line, translated
from contextledger.stores.redis.durability import DEFAULT_REPLICA_TIMEOUT, Replication, check_client, replication
from contextledger.stores.redis.keys import ConversationKeys, SessionKeys, check_prefix
from contextledger.stores.redis.send import HeldConnection, pooled
from contextledger.stores.urls import mask, parse_redis

__all__ = ["RedisData", "RedisScripts", "script_errors", "ttl_millis"]

# the store's log lines keep the logger they always had, whichever part writes them
logger = logging.getLogger("contextledger.stores.redis.store")


@dataclass
class RedisScripts:
    """The store's Lua scripts, registered with its client (loaded on first use, cached by SHA)."""

    commit: Script
    load: Script
    snapshot: Script
    read_back: Script
    entries: Script
    page: Script
    summary_page: Script
    eviction_page: Script
    trigger_page: Script
    eviction_fill: Script
    reindex: Script
    unstray: Script
    range: Script
    mark: Script
    erase: Script
    prune: Script
    import_: Script
    align_ttl: Script
    claim: Script
    link: Script
    expire: Script
    reseal: Script

    @classmethod
    def register(cls, client: RedisClient) -> RedisScripts:
        """Every script of the store, registered with ``client``."""
        return cls(
            commit=client.register_script(scripts.COMMIT),
            load=client.register_script(scripts.LOAD),
            snapshot=client.register_script(scripts.SNAPSHOT),
            read_back=client.register_script(scripts.READ_BACK),
            entries=client.register_script(travel.ENTRIES),
            page=client.register_script(paging.PAGE),
            summary_page=client.register_script(summary_index.PAGE),
            eviction_page=client.register_script(eviction_index.PAGE),
            trigger_page=client.register_script(trigger_index.PAGE),
            eviction_fill=client.register_script(eviction_index.FILL),
            reindex=client.register_script(paging.REINDEX),
            unstray=client.register_script(paging.UNSTRAY),
            range=client.register_script(listing.RANGE),
            mark=client.register_script(listing.MARK),
            erase=client.register_script(erasure.ERASE),
            prune=client.register_script(erasure.PRUNE),
            import_=client.register_script(transfer.IMPORT),
            align_ttl=client.register_script(scripts.ALIGN_TTL),
            claim=client.register_script(owners.CLAIM),
            link=client.register_script(lineage.LINK),
            expire=client.register_script(lineage.EXPIRE),
            reseal=client.register_script(lineage.RESEAL),
        )


class RedisData:
    """The client of one Redis store, its key prefix, options, scripts and gate.

    Args: as :class:`~contextledger.stores.redis.store.RedisStore`.
    """

    def __init__(
        self,
        client: RedisClient,
        *,
        key_prefix: str = "contextledger",
        url: str | None = None,
        ttl: float | timedelta | None = None,
        durability: str = "primary",
        replica_timeout: float = DEFAULT_REPLICA_TIMEOUT,
        replicas: int = 1,
    ) -> None:
        """Check the options and register the scripts with ``client``.

        Raises:
            ConfigurationError: ``client`` decodes responses, ``key_prefix`` is not usable,
                ``ttl`` is not a positive number of seconds or ``timedelta``, a durability
                option is invalid, or ``durability="replicated"`` is asked of a client that
                is not redis-py's sync one.
        """
        self.ttl_ms = ttl_millis(ttl)
        self.replication: Replication | None = replication(durability, replica_timeout, replicas)
        if self.replication is not None:
            check_client(client)
        self.durability = "replicated" if self.replication else "primary"
        if getattr(client.get_encoder(), "decode_responses", False):
            raise ConfigurationError("the Redis ledger store needs a client with decode_responses=False")
        self.client = client
        # A client adapter of your own (a client_factory's) may say it is a cluster client itself.
        self.cluster = isinstance(client, RedisCluster) or getattr(client, "is_cluster", False) is True
        pack = pooled(client)  # the hot path's scripts sent on a connection of the pool's, packed so (see .send)
        self.held = HeldConnection(cast(Redis, client), pack) if pack is not None else None
        self.key_prefix = check_prefix(key_prefix)
        if url is None:
            kwargs = client.get_connection_kwargs() if isinstance(client, Redis) else {}
            url = f"redis://{kwargs.get('host', '127.0.0.1')}:{kwargs.get('port', 6379)}"
        self.url = mask(url)
        try:
            self.endpoint = parse_redis(url).endpoint
        except InvalidLedgerURL:  # a URL given for display only; the client is connected
            self.endpoint = self.url
        self.scripts = RedisScripts.register(client)
        self.gate = Gate(self.url)

    @contextmanager
    def driver(self, action: str) -> Iterator[None]:
        """One call to the server: refused once the store is closed, driver errors translated.

        Raises:
            LedgerClosed: The store was closed.
            StoreUnavailable: The server could not be reached (naming host:port).
            StoreError: Any other driver error.
        """
        with self.gate.call(), translated(self.endpoint, action):
            yield

    def conversation(self, session_id: str, agent_id: str) -> ConversationKeys:
        """The keys of one conversation."""
        return ConversationKeys.of(self.key_prefix, session_id, agent_id)

    def snapshot(self, keys: Sequence[str], ops: Sequence[str]) -> list[Any]:
        """Read ``keys`` whole in one read-only script (``ops``: ``h`` hash, ``l`` list); call it in :meth:`driver`."""
        return cast(list[Any], self.scripts.snapshot(keys=list(keys), args=list(ops)))

    def read_page(self, keys: ConversationKeys, args: list[str]) -> list[Any] | None:
        """One page of history via the seq index; ``None`` if the index is incomplete (call it in :meth:`driver`)."""
        reply = self.scripts.page(keys=[keys.msg, keys.content, keys.mut, keys.seq], args=args)
        return None if reply is None else cast(list[Any], reply)

    def read_summaries(self, keys: ConversationKeys, args: list[str]) -> list[Any] | None:
        """One page of summaries via their creation-time index (see :mod:`.summary_index`).

        Returns ``None`` if the index is incomplete, else ``[ids, stored summaries, their
        se|/ss| facts]`` (call it in :meth:`driver`).
        """
        reply = self.scripts.summary_page(keys=[keys.sum, keys.mut, keys.sumat], args=args)
        return None if reply is None else cast(list[Any], reply)

    def read_evictions(self, keys: ConversationKeys, args: list[str], *, by_trigger: bool = False) -> list[Any] | None:
        """One page of evictions via their index, or (``by_trigger``) of one trigger's (see :mod:`.eviction_index`).

        ``args`` are :func:`.eviction_index.page_args` (or :func:`.trigger_index.page_args`). Returns
        ``None`` if the index is incomplete, else ``[members, records, contents, reduction
        rows, rb| facts]`` (call it in :meth:`driver`).
        """
        script = self.scripts.trigger_page if by_trigger else self.scripts.eviction_page
        index = keys.evtr if by_trigger else keys.evat
        reply = script(keys=[keys.state, keys.msg, keys.content, keys.mut, keys.sum, keys.red, index], args=args)
        return None if reply is None else cast(list[Any], reply)

    def read_range(self, keys: ConversationKeys, key: str, args: list[str]) -> tuple[bool, list[bytes]]:
        """A page's range of the list ``key`` (reductions or pin events, see :mod:`.listing`), or the whole list.

        Returns ``(ranged, rows)``: ``ranged`` is false when the list's order mark did not
        allow a range and ``rows`` is the whole list (call it in :meth:`driver`).
        """
        ranged, rows = cast(list[Any], self.scripts.range(keys=[keys.state, key], args=args))
        return bool(ranged), cast(list[bytes], rows)

    def agents(self, session_id: str) -> list[str]:
        """Agent ids with a conversation in the session (index entries checked against the data)."""
        with self.driver("agents"):
            candidates = sorted(
                text(a)
                for a in cast(set[bytes], self.client.smembers(SessionKeys.of(self.key_prefix, session_id).agents))
            )
            if not candidates:
                return []
            pipe = self.client.pipeline(transaction=False)
            for aid in candidates:
                pipe.exists(self.conversation(session_id, aid).state)
            exists = pipe.execute()
        return [aid for aid, found in zip(candidates, exists, strict=True) if found]

    def agent_ids(self, session_id: str, agent_id: str | None) -> list[str]:
        """``[agent_id]`` when one is named, else every agent of the session."""
        return [agent_id] if agent_id is not None else self.agents(session_id)

    def close(self) -> None:
        """Refuse further calls, let running ones finish, then release the client's connections."""
        self.gate.close(self._release)

    def _release(self) -> None:
        if self.held is not None:
            self.held.close()
        try:
            self.client.close()
        except (RedisError, RedisClusterException) as exc:
            logger.warning("url=<%s>, error=<%s> | closing the Redis client failed", self.url, one_line(exc))


def ttl_millis(ttl: float | timedelta | None) -> int:
    """``ttl`` (seconds or a ``timedelta``) in whole milliseconds, at least 1; 0 for ``None``.

    Raises:
        ConfigurationError: ``ttl`` is not a positive number of seconds or ``timedelta``.
    """
    if ttl is None:
        return 0
    if isinstance(ttl, timedelta):
        seconds = ttl.total_seconds()
    elif isinstance(ttl, int | float) and not isinstance(ttl, bool):
        seconds = float(ttl)
    else:
        raise ConfigurationError(f"ttl must be a number of seconds or a timedelta, got {type(ttl).__name__}")
    if not seconds > 0 or seconds == float("inf"):
        raise ConfigurationError(f"ttl must be positive and finite, got {ttl!r}")
    return max(1, round(seconds * 1000))


@contextmanager
def script_errors() -> Iterator[None]:
    """Map the typed error replies of the erase, prune and import scripts.

    Raises:
        EntryNotFound: The script replied ``CLNOTFOUND``.
        ConcurrencyConflict: The script replied ``CLCONFLICT``.
    """
    try:
        yield
    except ResponseError as exc:
        message = str(exc)
        if message.startswith("CLNOTFOUND"):
            raise EntryNotFound(message.removeprefix("CLNOTFOUND ")) from exc
        if message.startswith("CLCONFLICT"):
            raise ConcurrencyConflict(message.removeprefix("CLCONFLICT ")) from exc
        raise
