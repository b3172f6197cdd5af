"""Stores whose next commit can lose its reply: one per backend, for the exactly-once contract.

How a lost reply is made, per backend (each applies the commit, then the client never
hears back -- or, with ``apply=False``, the request never arrives):

* memory: a subclass whose send step applies the changeset and then raises the
  "reply lost" signal the store's own resolution handles (no network to cut);
* SQLite: a ``sqlite3`` connection factory whose ``commit()`` of a write transaction
  commits and then raises ``disk I/O error`` (as a failing disk would);
* PostgreSQL: a loopback TCP proxy in front of the real server that forwards the
  ``COMMIT`` (or the one-statement append) and cuts the connection instead of
  forwarding the server's answer;
* Redis and Redis Cluster: the same proxy, in front of each node (``address_remap``
  points the cluster client at the proxies), cutting the answer to the commit script's
  ``EVALSHA``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from redis.cluster import RedisCluster
from sqlalchemy.engine import make_url

from contextledger.core.changeset import Changeset
from contextledger.errors import StoreUnavailable
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.exactly_once import ReplyLost
from contextledger.stores.memory import MemoryStore
from contextledger.stores.memory.data import MemoryData
from contextledger.stores.memory.writes import MemoryWrites
from contextledger.stores.redis import RedisStore
from contextledger.stores.sql import SQLStore
from tests.plugins.proxy import FaultPlan, TcpProxy

__all__ = [
    "LossyStore",
    "lossy_backend",
    "lossy_memory",
    "lossy_postgres",
    "lossy_redis",
    "lossy_redis_cluster",
    "lossy_sqlite",
]

Opener = Callable[..., CompleteStore]
"""Opens a store from a URL and options (the stores' ``from_url``, or the async tests' opener through the runner)."""


@dataclass
class LossyStore:
    """A store and the plan that decides which of its commits lose their reply."""

    store: CompleteStore
    plan: FaultPlan
    backend: str

    def arm(self, *, apply: bool = True, times: int = 1, then_down: bool = False) -> None:
        """Lose the replies of the next ``times`` commits (``apply``: after the server applied them)."""
        self.plan.arm(apply=apply, times=times, then_down=then_down)

    def disarm(self) -> None:
        """Let every reply through."""
        self.plan.disarm()

    def restore(self) -> None:
        """End an outage started by ``then_down``."""
        self.plan.restore()

    @property
    def dropped(self) -> int:
        """Commits whose reply (or request) was lost so far."""
        return self.plan.dropped


# -- memory --------------------------------------------------------------------------------


class _LossyWrites(MemoryWrites):
    def __init__(self, data: MemoryData, plan: FaultPlan) -> None:
        super().__init__(data)
        self.plan = plan

    def _send(self, changeset: Changeset) -> int:
        if self.plan.down:
            raise StoreUnavailable("the memory store is unreachable (simulated outage)")
        verdict = self.plan.take(b"commit")
        if verdict is None:
            return super()._send(changeset)
        if verdict:
            super()._send(changeset)
        if self.plan.then_down:
            self.plan.outage()
        raise ReplyLost(StoreUnavailable("the reply to a commit was lost (simulated)"))

    def _read_back(self, changeset: Changeset) -> int | None:
        if self.plan.down:
            raise StoreUnavailable("the memory store is unreachable (simulated outage)")
        return super()._read_back(changeset)


class _LossyMemoryStore(MemoryStore):
    """A memory store whose commit part (its send and read-back steps) can lose replies."""

    def __init__(self, plan: FaultPlan) -> None:
        super().__init__()
        self.plan = plan
        self._writes = _LossyWrites(self._data, plan)


def lossy_memory() -> LossyStore:
    """A memory store whose send step can lose replies."""
    plan = FaultPlan(is_commit=lambda _data: True)
    return LossyStore(_LossyMemoryStore(plan), plan, "memory")


# -- SQLite --------------------------------------------------------------------------------


def _sqlite_factory(plan: FaultPlan) -> type[sqlite3.Connection]:
    class LossyConnection(sqlite3.Connection):
        """``commit()`` of a write transaction can commit and then fail as a disk would."""

        changes_seen = 0

        def _disk_error(self) -> sqlite3.OperationalError:
            return sqlite3.OperationalError("disk I/O error")

        def cursor(self, *args: Any, **kwargs: Any) -> Any:
            if plan.down:
                raise self._disk_error()
            return super().cursor(*args, **kwargs)

        def commit(self) -> None:
            if plan.down:
                raise self._disk_error()
            wrote = self.total_changes != self.changes_seen
            self.changes_seen = self.total_changes
            verdict = plan.take(b"COMMIT") if wrote else None
            if verdict is None:
                super().commit()
                return
            if verdict:
                super().commit()
            else:
                super().rollback()
            if plan.then_down:
                plan.outage()
            raise self._disk_error()

    return LossyConnection


def lossy_sqlite(url: str, open_store: Opener = SQLStore.from_url) -> LossyStore:
    """A SQLite store on ``url`` whose write commits can fail after (or instead of) committing."""
    plan = FaultPlan(is_commit=lambda _data: True)
    store = open_store(url, connect_args={"factory": _sqlite_factory(plan)})
    return LossyStore(store, plan, "sqlite")


# -- PostgreSQL ----------------------------------------------------------------------------


def lossy_postgres(url: str, open_store: Opener = SQLStore.from_url) -> tuple[LossyStore, TcpProxy]:
    """A PostgreSQL store reaching ``url`` through a proxy that can cut a commit's answer."""
    parsed = make_url(url)
    plan = FaultPlan(is_commit=lambda data: b"COMMIT" in data or b"WITH bumped" in data)
    proxy = TcpProxy((parsed.host or "127.0.0.1", parsed.port or 5432), plan)
    proxied = parsed.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    # Statement text on every execution (no server-side prepare), so the proxy can see it.
    store = open_store(proxied, connect_args={"prepare_threshold": None})
    return LossyStore(store, plan, "postgres"), proxy


# -- Redis ---------------------------------------------------------------------------------


def _with_port(url: str, port: int) -> str:
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _redis_plan() -> FaultPlan:
    return FaultPlan(is_commit=lambda _data: False, keep_reply=lambda reply: reply.startswith(b"-NOSCRIPT"))


def _watch_commit_script(plan: FaultPlan, store: Any) -> None:
    sha = store._data.scripts.commit.sha.encode()
    plan.is_commit = lambda data: b"EVALSHA" in data.upper() and sha in data


def lossy_redis(url: str, prefix: str, open_store: Opener = RedisStore.from_url) -> tuple[LossyStore, list[TcpProxy]]:
    """A Redis store reaching ``url`` through a proxy that can cut the commit script's answer."""
    parts = urlsplit(url)
    plan = _redis_plan()
    proxy = TcpProxy((parts.hostname or "127.0.0.1", parts.port or 6379), plan)
    store = open_store(_with_port(url, proxy.port), key_prefix=prefix)
    _watch_commit_script(plan, store)
    return LossyStore(store, plan, "redis"), [proxy]


def lossy_redis_cluster(
    url: str, prefix: str, open_store: Opener = RedisStore.from_url
) -> tuple[LossyStore, list[TcpProxy]]:
    """A Redis Cluster store whose client reaches every node through a proxy."""
    scheme, _, rest = url.partition("://")
    probe = RedisCluster.from_url(f"{scheme.removesuffix('+cluster')}://{rest}")
    try:
        nodes = [(node.host, int(node.port)) for node in probe.get_nodes()]  # type: ignore[no-untyped-call]
    finally:
        probe.close()
    plan = _redis_plan()
    proxies = {node: TcpProxy(node, plan) for node in nodes}
    remap = {node: ("127.0.0.1", proxy.port) for node, proxy in proxies.items()}

    def address_remap(address: tuple[str, int]) -> tuple[str, int]:
        return remap.get((address[0], int(address[1])), address)

    first = next(iter(proxies.values()))
    store = open_store(_with_port(url, first.port), key_prefix=prefix, address_remap=address_remap)
    _watch_commit_script(plan, store)
    return LossyStore(store, plan, "redis_cluster"), list(proxies.values())


# -- one per backend -------------------------------------------------------------------------


@contextmanager
def lossy_backend(
    request: Any,
    backend: str,
    open_store: Opener | None = None,
    wrap: Callable[[CompleteStore], CompleteStore] | None = None,
) -> Iterator[LossyStore]:
    """A fresh lossy store of ``backend`` (fixtures from ``request``), closed and purged afterwards.

    ``open_store`` replaces the stores' ``from_url``; ``wrap`` wraps the memory store (which
    has no URL) the way ``open_store`` wraps the others.
    """
    from tests.plugins.redis import purge

    proxies: list[TcpProxy] = []
    redis_target: tuple[str, str] | None = None
    if backend == "memory":
        lossy = lossy_memory()
        if wrap is not None:
            lossy.store = wrap(lossy.store)
    elif backend == "sqlite":
        lossy = lossy_sqlite(request.getfixturevalue("sqlite_url"), open_store or SQLStore.from_url)
    elif backend == "postgres":
        lossy, proxy = lossy_postgres(request.getfixturevalue("postgres_ledger_url"), open_store or SQLStore.from_url)
        proxies.append(proxy)
    else:
        url = request.getfixturevalue(f"{backend}_url")
        redis_target = (url, request.getfixturevalue("redis_key_prefix"))
        lossy_redis_backend = lossy_redis if backend == "redis" else lossy_redis_cluster
        lossy, proxies = lossy_redis_backend(*redis_target, open_store or RedisStore.from_url)
    try:
        yield lossy
    finally:
        lossy.plan.restore()
        lossy.disarm()
        lossy.store.close()
        for proxy in proxies:
            proxy.close()
        if redis_target is not None:
            purge(*redis_target)
