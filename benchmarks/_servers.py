"""Shared plumbing of the benchmarks: the backends they run on and what a call sends to them.

* :func:`open_backend` opens a store on one backend -- memory, a SQLite file, a scratch
  PostgreSQL database, Redis or a Redis Cluster -- starting a throwaway server with the
  launchers of :mod:`contextledger.testing` when no URL is given in the environment
  (``CONTEXTLEDGER_TEST_POSTGRES_URL``, ``CONTEXTLEDGER_TEST_REDIS_URL``,
  ``CONTEXTLEDGER_TEST_REDIS_CLUSTER_URL``). Servers it started are stopped by pid when
  the block ends; on a server from the environment it removes what it wrote.
* :func:`observe` counts what one call sends: SQL statements (and on PostgreSQL the
  protocol round trips, from libpq's trace), Redis commands and round trips (a counting
  connection class), and :func:`script_commands` what a Redis script ran (``MONITOR``).
* :func:`bulk_load` builds a conversation of many entries, most of them evicted, in a
  few big commits.

Everything listens and connects on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import sys
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from redis import Redis
from redis.cluster import RedisCluster
from redis.connection import Connection
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from contextledger import Changeset, Message, ViewEntry
from contextledger.errors import StoreUnavailable
from contextledger.model.records import Reduction
from contextledger.stores.capabilities import CompleteStore
from contextledger.stores.memory import MemoryStore
from contextledger.stores.redis import RedisStore
from contextledger.stores.redis.keys import ConversationKeys
from contextledger.stores.sql import SQLStore
from contextledger.stores.sql.engine import parse_url

# The server launchers live with the tests (tests/plugins/); the benchmarks run as scripts
# from the checkout, so its root must be importable.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

BACKENDS = ("memory", "sqlite", "postgres", "redis", "redis_cluster")
LABELS = {
    "memory": "memory",
    "sqlite": "SQLite (file, WAL)",
    "postgres": "PostgreSQL",
    "redis": "Redis",
    "redis_cluster": "Redis Cluster (3 masters)",
}


# -- statistics --------------------------------------------------------------------------


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def p95(samples: Sequence[float]) -> float:
    return statistics.quantiles(samples, n=20)[-1] if len(samples) > 1 else samples[0]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f}"


# -- servers -----------------------------------------------------------------------------


@contextmanager
def postgres_database() -> Iterator[str | None]:
    """A scratch database URL, or ``None`` when no PostgreSQL is available."""
    env = os.environ.get("CONTEXTLEDGER_TEST_POSTGRES_URL")
    server = None
    if env:
        base = parse_url(env).render_as_string(hide_password=False)
    else:
        from tests.plugins.postgres_server import find_binaries, start_postgres

        if find_binaries() is None:
            print("PostgreSQL skipped: no CONTEXTLEDGER_TEST_POSTGRES_URL and no local binaries", file=sys.stderr)
            yield None
            return
        try:
            server = start_postgres()
        except StoreUnavailable as exc:
            print(f"PostgreSQL skipped: {exc}", file=sys.stderr)
            yield None
            return
        base = server.url
    name = f"cl_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f"CREATE DATABASE {name}"))
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()
        if server is not None:
            server.stop()


def postgres_version(url: str) -> str:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return str(conn.execute(text("SHOW server_version")).scalar()).split()[0]
    finally:
        engine.dispose()


@contextmanager
def redis_url(*, cluster: bool) -> Iterator[tuple[str, bool] | None]:
    """``(url, from_environment)`` of a Redis (or a 3-master Cluster), or ``None``.

    A server this starts (local ``redis-server`` processes or a container) is stopped
    when the block ends: by pid, or by container id.
    """
    from tests.plugins.redis_server import redis_cluster, redis_server

    what = "Redis Cluster" if cluster else "Redis"
    try:
        server = redis_cluster() if cluster else redis_server()
    except StoreUnavailable as exc:
        print(f"{what} skipped: {exc}", file=sys.stderr)
        yield None
        return
    try:
        yield server.url, server.source == "env"
    finally:
        server.stop()


def redis_version(url: str) -> str:
    scheme, _, rest = url.partition("://")
    client = Redis.from_url(f"{scheme.removesuffix('+cluster')}://{rest}")
    try:
        return str(client.info("server")["redis_version"])
    finally:
        client.close()


# -- stores ------------------------------------------------------------------------------


@dataclass
class Backend:
    """One store to measure on, with what is needed to observe it.

    Attributes:
        name: One of :data:`BACKENDS`.
        label: How the tables name it.
        store: The store.
        url: The server's URL (Redis and PostgreSQL), for observers and version lines.
        version: ``"PostgreSQL 15.18"``, ``"Redis 7.0.15"``, ... (``None`` for memory and SQLite).
    """

    name: str
    label: str
    store: CompleteStore
    url: str | None = None
    version: str | None = None


@contextmanager
def open_backend(name: str, directory: Path) -> Iterator[Backend | None]:
    """A store on ``name`` (one of :data:`BACKENDS`), or ``None`` when it cannot be had.

    SQLite lives in ``directory``; PostgreSQL in a scratch database; Redis under a key
    prefix of its own, whose sessions are deleted afterwards on a server from the
    environment (a server started here is simply stopped).
    """
    if name == "memory":
        yield Backend(name, LABELS[name], MemoryStore())
    elif name == "sqlite":
        sql = SQLStore.from_url(f"sqlite:///{directory / f'bench-{uuid.uuid4().hex[:8]}.db'}")
        try:
            yield Backend(name, LABELS[name], sql)
        finally:
            sql.close()
    elif name == "postgres":
        with postgres_database() as url:
            if url is None:
                yield None
                return
            sql = SQLStore.from_url(url, auto_upgrade=True)
            try:
                yield Backend(name, LABELS[name], sql, url, f"PostgreSQL {postgres_version(url)}")
            finally:
                sql.close()
    elif name in ("redis", "redis_cluster"):
        with redis_url(cluster=name == "redis_cluster") as found:
            if found is None:
                yield None
                return
            url, from_env = found
            store = RedisStore.from_url(
                url, key_prefix=f"clbench-{uuid.uuid4().hex[:10]}", connection_class=CountingConnection
            )
            try:
                yield Backend(name, LABELS[name], store, url, f"Redis {redis_version(url)}")
            finally:
                if from_env:
                    for info in store.sessions(limit=10_000):
                        store.delete_session(info.session_id)
                store.close()
    else:
        raise ValueError(f"unknown backend {name!r}; choose from {', '.join(BACKENDS)}")


def colocated(backend: Backend, names: Sequence[str]) -> list[str]:
    """Session ids for ``names`` whose conversations live on the same server.

    On Redis Cluster each conversation lives on the node owning its hash slot, and
    nodes differ (in particular, the node that ran the big bulk-load scripts answers
    every later script call a little slower: its Lua VM is not what it was). Comparing
    two conversations on two nodes would measure the nodes. So the first name is kept
    and each other one gets the first suffix ``-1``, ``-2``, ... that lands on the same
    node. Elsewhere the names are returned as they are.
    """
    store = backend.store
    if backend.name != "redis_cluster" or backend.url is None or not isinstance(store, RedisStore):
        return list(names)
    scheme, _, rest = backend.url.partition("://")
    client = RedisCluster.from_url(f"{scheme.removesuffix('+cluster')}://{rest}")
    try:

        def node(session_id: str) -> str:
            key = ConversationKeys.of(store.key_prefix, session_id, "agent").state
            found = cast(Any, client).get_node_from_key(key)  # redis-py leaves it untyped
            return f"{found.host}:{found.port}"

        home = node(names[0])
        out = [names[0]]
        for name in names[1:]:
            out.append(next(c for c in (name, *(f"{name}-{i}" for i in range(1, 10_000))) if node(c) == home))
        return out
    finally:
        client.close()


def backend_list(value: str) -> list[str]:
    """Parse ``--backends memory,sqlite``."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown:
        raise ValueError(f"unknown backends {unknown}; choose from {', '.join(BACKENDS)}")
    return names


def maintain(store: CompleteStore, statement: str) -> None:
    """Run a PostgreSQL maintenance statement (outside a transaction); nothing elsewhere.

    After a bulk load a live database would have had autovacuum run ``ANALYZE`` (and
    ``VACUUM`` after a bulk eviction); the benchmarks do it explicitly instead.
    """
    if not isinstance(store, SQLStore) or store.engine.dialect.name != "postgresql":
        return
    with store.engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").execute(text(statement))


# Appends per commit while bulk loading. SQL sends each batch as one executemany; on
# Redis it is one script call, whose run blocks the server (about 0.25 s for 10,000
# appends here; the script also took 100,000 in one call, blocking it for 3 s).
BATCH = 10_000


def bulk_load(store: CompleteStore, session_id: str, *, total: int, active: int) -> None:
    """Append ``total`` entries in batches of :data:`BATCH`, then evict all but the last ``active``."""
    version = 0
    for start in range(0, total, BATCH):
        count = min(BATCH, total - start)
        entries = tuple(
            ViewEntry(
                entry_id=f"{session_id}-{n}",
                seq=n,
                message=Message.user(
                    f"turn {n}: " + "some words of a conversation " * 6, message_id=f"{session_id}-{n}"
                ),
                tokens=45,
            )
            for n in range(start, start + count)
        )
        changeset = Changeset(
            session_id=session_id, agent_id="agent", expected_version=version, appends=entries, next_seq=start + count
        )
        version = store.commit(changeset)
    # What autovacuum does after a bulk insert, before the planner picks the index for
    # the eviction's id lists (a fresh table without statistics looks tiny to it).
    maintain(store, "ANALYZE cl_entries")
    evicted = tuple(f"{session_id}-{n}" for n in range(total - active))
    if evicted:
        reduction = Reduction(
            session_id=session_id,
            agent_id="agent",
            trigger="per_turn",
            strategy="sliding_window",
            messages_before=total,
            messages_after=active,
            tokens_before=45 * total,
            tokens_after=45 * active,
            evicted=evicted,
        )
        changeset = Changeset(
            session_id=session_id, agent_id="agent", expected_version=version, evict=evicted, reduction=reduction
        )
        store.commit(changeset)


# -- what a call sends -------------------------------------------------------------------


@dataclass
class Traffic:
    """What the observed block sent to the store.

    Attributes:
        statements: SQL statements other than transaction control, or Redis commands
            sent by the client (a script call is one).
        control: SQL transaction control (``BEGIN``, ``COMMIT``); 0 for Redis.
        round_trips: Request/response exchanges with the server (``None`` for in-process
            engines: memory, SQLite).
        rows: Rows of ``cl_entries`` the SQL statements inserted or updated -- the table
            that holds the history (``None`` for Redis).
        commands: The statements' first words / the commands' names, in order.
    """

    statements: int = 0
    control: int = 0
    round_trips: int | None = None
    rows: int | None = None
    commands: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if not self.commands and self.round_trips is None:
            return "none (in-process)"
        parts = [f"{self.statements} {'statement' if self.rows is not None else 'command'}(s)"]
        if self.rows is not None:
            parts.append(f"{self.control} transaction control")
        parts.append(f"{self.round_trips} round trip(s)" if self.round_trips is not None else "in-process")
        if self.rows is not None:
            parts.append(f"{self.rows} entry row(s) written")
        return ", ".join(parts) + f" [{' '.join(self.commands)}]"


_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")


@contextmanager
def observe(backend: Backend) -> Iterator[Traffic]:
    """Count what the block sends to ``backend`` (nothing for the memory store)."""
    traffic = Traffic()
    if isinstance(backend.store, SQLStore):
        with _observe_sql(backend.store, traffic):
            yield traffic
    elif isinstance(backend.store, RedisStore):
        traffic.round_trips = 0
        CountingConnection.traffic = traffic
        try:
            yield traffic
        finally:
            CountingConnection.traffic = None
    else:
        yield traffic


@contextmanager
def _observe_sql(store: SQLStore, traffic: Traffic) -> Iterator[None]:
    if store.engine.dialect.name == "sqlite":
        with _observe_sqlite(store, traffic):
            yield
        return
    traffic.rows = 0
    postgres = store.engine.dialect.name == "postgresql"

    def before(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        word = statement.lstrip().split(None, 1)[0].upper()
        if word in _CONTROL:
            traffic.control += 1
        else:
            traffic.statements += 1
        traffic.commands.append(word + ("*" if executemany else ""))

    def after(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        # Rows of the history table only: rowcounts of the other statements are not
        # reliable across drivers (sqlite3 reports 0 for UPDATE ... RETURNING).
        head = " ".join(statement.split()[:3]).upper()
        if head.startswith("INSERT INTO CL_ENTRIES"):
            traffic.rows = (traffic.rows or 0) + (len(parameters) if executemany else 1)
        elif head.startswith("WITH BUMPED AS") and "INSERT INTO cl_entries" in statement:
            # PostgreSQL's one-statement append: one row per element of its rows document
            traffic.rows = (traffic.rows or 0) + len(json.loads(parameters["e_rows"]))
        elif head == "UPDATE CL_ENTRIES SET":
            traffic.rows = (traffic.rows or 0) + max(cursor.rowcount, 0)

    def committed(conn: Any) -> None:  # the driver's commit(): no cursor statement is seen for it
        traffic.control += 1
        traffic.commands.append("COMMIT")

    trace = tempfile.NamedTemporaryFile(prefix="contextledger-pqtrace-", suffix=".log", delete=False)  # noqa: SIM115
    trace.close()

    def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        # libpq writes every protocol message to the trace: each ReadyForQuery from the
        # server ends one round trip, whatever the driver pipelined before it.
        from psycopg import pq

        dbapi_connection.pgconn.trace(os.open(trace.name, os.O_WRONLY | os.O_APPEND))
        dbapi_connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)

    def checkin(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.pgconn.untrace()

    listeners: list[tuple[str, Any]] = [
        ("before_cursor_execute", before),
        ("after_cursor_execute", after),
        ("commit", committed),
    ]
    pool_listeners: list[tuple[str, Any]] = [("checkout", checkout), ("checkin", checkin)] if postgres else []
    for name, fn in listeners + pool_listeners:
        event.listen(store.engine, name, fn)
    try:
        yield
    finally:
        for name, fn in listeners + pool_listeners:
            event.remove(store.engine, name, fn)
        if postgres:
            lines = Path(trace.name).read_text(errors="replace").splitlines()
            traffic.round_trips = sum(1 for line in lines if "\tReadyForQuery" in line and line.startswith("B"))
            # psycopg sends BEGIN itself, before the first statement: SQLAlchemy never sees it
            begins = sum(1 for line in lines if line.startswith("F") and '\tQuery\t "BEGIN' in line)
            traffic.control += begins
            traffic.commands[:0] = ["BEGIN"] * begins
        with suppress(OSError):
            os.unlink(trace.name)


class _SQLiteTrace:
    """What SQLite ran on one connection: each statement as it began, and the rows changed before it."""

    def __init__(self, connection: sqlite3.Connection, ran: list[tuple[str, int, _SQLiteTrace]]) -> None:
        self.connection, self.ran = connection, ran
        connection.set_trace_callback(self)

    def __call__(self, sql: str) -> None:
        self.ran.append((sql, self.connection.total_changes, self))

    def stop(self) -> int:
        self.connection.set_trace_callback(None)
        return self.connection.total_changes


@contextmanager
def _observe_sqlite(store: SQLStore, traffic: Traffic) -> Iterator[None]:
    """Count what SQLite itself runs for the block, on every connection of the store.

    SQLAlchemy's cursor events do not see the statements the store sends on the driver's
    own cursor (its hot path, on the connection it holds for commits, and its reader), so
    SQLite's trace callback is set on each: the held writer, the reader, and every
    pooled connection checked out meanwhile. Rows written to ``cl_entries`` come from the
    connection's ``total_changes``, read as each statement begins (the trace runs then).
    """
    ran: list[tuple[str, int, _SQLiteTrace]] = []
    traces: dict[int, _SQLiteTrace] = {}
    ends: dict[_SQLiteTrace, int] = {}

    def trace(connection: sqlite3.Connection) -> None:
        if id(connection) not in traces:
            traces[id(connection)] = _SQLiteTrace(connection, ran)

    def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        trace(dbapi_connection)

    def checkin(dbapi_connection: Any, record: Any) -> None:
        found = traces.pop(id(dbapi_connection), None)
        if found is not None:
            ends[found] = found.stop()

    with store._held_writer().driver_connection() as held:
        trace(held)
    if store.reader is not None:
        trace(store.reader.connection)
    event.listen(store.engine, "checkout", checkout)
    event.listen(store.engine, "checkin", checkin)
    try:
        yield
    finally:
        event.remove(store.engine, "checkout", checkout)
        event.remove(store.engine, "checkin", checkin)
        with store._held_writer().driver_connection():  # no commit runs while the trace is taken off
            for found in list(traces.values()):
                ends[found] = found.stop()
        traffic.rows = 0
        for index, (sql, before, source) in enumerate(ran):
            word = sql.lstrip().split(None, 1)[0].upper()
            if word == "PRAGMA":
                continue  # the busy timeout the store sets around an inline begin: not the call's traffic
            if word in _CONTROL:
                traffic.control += 1
            else:
                traffic.statements += 1
            traffic.commands.append(word)
            after = next((b for _, b, s in ran[index + 1 :] if s is source), ends.get(source, before))
            head = " ".join(sql.split()[:3]).upper()
            if head.startswith("INSERT INTO CL_ENTRIES") or head == "UPDATE CL_ENTRIES SET":
                traffic.rows += after - before


class CountingConnection(Connection):
    """A redis-py connection that counts commands and round trips while :func:`observe` runs.

    A pipeline is one round trip carrying several commands.
    """

    traffic: Traffic | None = None

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        if (traffic := CountingConnection.traffic) is not None:
            traffic.statements += 1
            traffic.commands.append(_name(args[0]))
        super().send_command(*args, **kwargs)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped

    def pack_command(self, *args: Any) -> Any:
        # the Redis store packs its commit script itself (stores/redis/send.py); send_command does not come here
        if (traffic := CountingConnection.traffic) is not None:
            traffic.statements += 1
            traffic.commands.append(_name(args[0]))
        return super().pack_command(*args)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped

    def pack_commands(self, commands: Any) -> Any:
        commands = list(commands)
        if (traffic := CountingConnection.traffic) is not None:
            traffic.statements += len(commands)
            traffic.commands += [_name(c[0]) for c in commands]
        return super().pack_commands(commands)  # type: ignore[no-untyped-call]

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if (traffic := CountingConnection.traffic) is not None and traffic.round_trips is not None:
            traffic.round_trips += 1
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


def _name(command: Any) -> str:
    return (command.decode() if isinstance(command, bytes) else str(command)).split(" ", 1)[0].upper()


@contextmanager
def script_commands(url: str) -> Iterator[list[str]]:
    """Names of the commands Redis scripts run inside the block (standalone Redis, ``MONITOR``)."""
    seen: list[str] = []
    watcher = Redis.from_url(url, decode_responses=True)
    poker = Redis.from_url(url)
    poker.ping()
    try:
        with cast(Any, watcher).monitor() as monitor:  # redis-py leaves monitor() untyped
            yield seen
            sentinel = f"end-of-block-{uuid.uuid4().hex}"
            poker.echo(sentinel)
            for _ in range(1_000_000):
                command: dict[str, Any] = monitor.next_command()
                if sentinel in command["command"]:
                    break
                if command["client_type"] == "lua":
                    seen.append(command["command"].split(" ", 1)[0].upper())
    finally:
        watcher.close()
        poker.close()
