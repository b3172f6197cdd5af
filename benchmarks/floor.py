"""An append against the driver's floor: the ledger, its own statements replayed, a plain table.

For each engine (SQLite, PostgreSQL, Redis) four contenders append the same turns of
four messages (user text, assistant toolUse, toolResult, answer), stepped alternately in
one process, the order rotated each round so that drift on a shared machine hits all
four alike:

* ``ledger`` -- ``Conversation.append(*messages)`` through the public API (the messages
  are built before the timer starts, as the raw drivers' dicts are);
* ``replayed`` -- what the ledger sent to the driver for the same turn, recorded on a
  twin database and sent again with the bare driver (sqlite3, psycopg, redis-py) on a
  third database in the same state: the same statements, parameters already encoded
  (the ledger's JSON encoding is not in this row), the same round trips. The rows are
  the physical floor of the ledger's schema: the gap to this row is Python around them;
* ``plain`` -- the bare driver on one table with one index (``contenders/raw.py``: a
  version bump and four rows in one transaction, JSON encoded inside the timer);
* ``built`` -- the ledger again (another conversation of the same database), the turn's
  messages built inside the timer from the host's dicts (``Message.from_strands`` of
  the same Strands dicts the plain driver encodes): what an agent's append costs from
  its host's own messages. Its ratio to ``plain`` counts the validation of each message.

Each step is timed for wall time (``perf_counter``) and for the CPU time of this thread
(``thread_time``: the client's, never the server's). Printed: medians in microseconds and
the ratios ledger/replayed and ledger/plain of both, with the load average before and
after (the machine may be shared). ``--json`` prints the figures as one JSON line.

Stepped alternately, each append runs with the code and data of the previous ones still
in the processor's caches. ``--cold`` evicts them before every step instead -- one byte
written in every 64-byte line of a buffer larger than the last-level cache
(``--cold-mb``, 64 MB by default) -- then builds the step's input and times it: the
condition an agent's append meets between two model calls, and each step of
``scripts/bench``, whose thirty-odd worker processes take one step in turn.

    python benchmarks/floor.py                          # 400 turns per engine
    python benchmarks/floor.py --turns 200 --engines sqlite,redis
    python benchmarks/floor.py --cold                   # every step with cold caches
    python benchmarks/floor.py --write-results          # also its section of DETAILS.md

Durability is each server's as the benchmarks start it: SQLite WAL with
``synchronous=NORMAL`` (every contender), PostgreSQL and Redis throwaway servers
without durability (fsync off, no persistence), the same for the four contenders.
The conversation's view grows with the run (no manager), as an agent's does.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from redis import Redis
from redis.connection import Connection as RedisConnection
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import make_url

from _details import load_text, replace_section, versions
from _evict import CacheEvictor
from _protocol import turn
from _servers import postgres_database, redis_url
from contenders.cl import native_turn
from contenders.raw import RawPostgres, RawRedis, RawSQLite
from contextledger import Ledger, Message
from contextledger.conversation.conversation import Conversation
from contextledger.stores.redis import RedisStore
from contextledger.stores.sql import SQLStore

AGENT = "agent"
ENGINES = ("sqlite", "postgres", "redis")
LANES = ("ledger", "replayed", "plain", "built")

Call = tuple[str, Any, Any]  # (kind, statement or command, parameters)


# -- recording what the ledger sends -----------------------------------------------------


class _Recording:
    """Where the recording drivers write what they are sent (``None``: not recording)."""

    calls: list[Call] | None = None


class RecordingCursor(sqlite3.Cursor):
    """A sqlite3 cursor that records each statement and its parameters as sent."""

    def execute(self, sql: str, parameters: Any = (), /) -> RecordingCursor:
        if _Recording.calls is not None:
            _Recording.calls.append(("execute", sql, parameters))
        super().execute(sql, parameters)
        return self

    def executemany(self, sql: str, seq: Any, /) -> RecordingCursor:
        rows = list(seq)
        if _Recording.calls is not None:
            _Recording.calls.append(("executemany", sql, rows))
        super().executemany(sql, rows)
        return self


class RecordingSQLite(sqlite3.Connection):
    """A sqlite3 connection whose cursors record, and whose commit is recorded."""

    def cursor(self, factory: Any = RecordingCursor) -> Any:
        return super().cursor(factory)

    def commit(self) -> None:
        if _Recording.calls is not None:
            _Recording.calls.append(("commit", None, None))
        super().commit()


class RecordingRedis(RedisConnection):
    """A redis-py connection that records each command (and each pipeline) it packs."""

    def pack_commands(self, commands: Any) -> Any:
        commands = list(commands)
        if _Recording.calls is not None:
            _Recording.calls.append(("pipeline", [tuple(c) for c in commands], None))
        return super().pack_commands(commands)  # type: ignore[no-untyped-call]

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        if _Recording.calls is not None:
            _Recording.calls.append(("command", args, None))
        super().send_command(*args, **kwargs)  # type: ignore[no-untyped-call]

    def pack_command(self, *args: Any) -> Any:
        # the store packs its commit script itself (stores/redis/send.py); send_command does not come here
        if _Recording.calls is not None:
            _Recording.calls.append(("command", args, None))
        return super().pack_command(*args)  # type: ignore[no-untyped-call]


@contextmanager
def recording() -> Iterator[list[Call]]:
    calls: list[Call] = []
    _Recording.calls = calls
    try:
        yield calls
    finally:
        _Recording.calls = None


# -- the engines -------------------------------------------------------------------------


class Engine:
    """One engine's databases and drivers (ledger, twin, replay target, plain); ``replay(calls)`` sends a turn."""

    name = ""
    twin: Ledger  # records
    ledger: Ledger  # timed
    target: Ledger  # the replay's database, in the twin's state
    plain: Any

    def replay(self, calls: list[Call]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        for ledger in (self.twin, self.ledger, self.target):
            ledger.close()
        self.plain.close()


class SQLiteEngine(Engine):
    name = "sqlite"

    def __init__(self, directory: Path) -> None:
        self.twin = Ledger(
            SQLStore.from_url(f"sqlite:///{directory}/twin.db", connect_args={"factory": RecordingSQLite})
        )
        self.ledger = Ledger.connect(f"sqlite:///{directory}/ledger.db")
        self.target = Ledger.connect(f"sqlite:///{directory}/replay.db")
        self.conn = bare_sqlite(directory / "replay.db")
        self.plain = RawSQLite()
        self.plain.setup("append", {"path": f"{directory}/plain.db", "session": "plain"})

    def replay(self, calls: list[Call]) -> None:
        replay_sqlite(self.conn, calls)

    def close(self) -> None:
        self.conn.close()
        super().close()


def bare_sqlite(path: Path, factory: type[sqlite3.Connection] = sqlite3.Connection) -> sqlite3.Connection:
    """A bare sqlite3 connection to ``path``, set as the store sets its connections (stores/sql/engine.py)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, factory=factory)
    for pragma in ("busy_timeout = 30000", "foreign_keys = ON", "synchronous = NORMAL"):
        conn.execute(f"PRAGMA {pragma}")
    return conn


def replay_sqlite(conn: sqlite3.Connection, calls: list[Call], before_each: Callable[[], None] | None = None) -> None:
    """Send the recorded ``calls`` on ``conn`` (``before_each``: run before every call)."""
    cursor = conn.cursor()
    for kind, sql, params in calls:
        if before_each is not None:
            before_each()
        if kind == "execute":
            cursor.execute(sql, params).fetchall()
        elif kind == "executemany":
            cursor.executemany(sql, params)
        else:
            conn.commit()


class PostgresEngine(Engine):
    name = "postgres"

    def __init__(self, urls: list[str]) -> None:
        import psycopg

        twin_url, ledger_url, target_url = urls
        self.twin = Ledger.connect(twin_url, auto_upgrade=True)
        store = self.twin.store
        assert isinstance(store, SQLStore)
        self._twin_engine = store.engine
        event.listen(store.engine, "before_cursor_execute", self._record)
        self.ledger = Ledger.connect(ledger_url, auto_upgrade=True)
        self.target = Ledger.connect(target_url, auto_upgrade=True)
        self.conn = psycopg.connect(target_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True)
        self.plain = RawPostgres()
        self.plain.setup("append", {"url": target_url, "session": "plain"})

    @staticmethod
    def _record(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if _Recording.calls is not None:
            _Recording.calls.append(("executemany" if executemany else "execute", statement, parameters))

    def replay(self, calls: list[Call]) -> None:
        conn = self.conn
        for kind, sql, params in calls:
            if kind == "execute":
                cursor = conn.execute(sql, params)
                if cursor.description is not None:
                    cursor.fetchall()
            else:
                with conn.cursor() as cursor:
                    cursor.executemany(sql, params)

    def close(self) -> None:
        self.conn.close()
        super().close()


class RedisEngine(Engine):
    name = "redis"

    def __init__(self, url: str) -> None:
        prefix = f"floor-{uuid.uuid4().hex[:8]}"
        self.twin = Ledger(RedisStore.from_url(url, key_prefix=prefix, connection_class=RecordingRedis))
        self.ledger = Ledger.connect(url, key_prefix=f"floor-{uuid.uuid4().hex[:8]}")
        # The replay's database: the twin's keys, in database 1 of the same server.
        other = url.rsplit("/", 1)[0] + "/1" if url.rsplit("/", 1)[-1].isdigit() else url.rstrip("/") + "/1"
        self.target = Ledger.connect(other, key_prefix=prefix)
        self.client = Redis.from_url(other)
        self.plain = RawRedis()
        self.plain.setup("append", {"url": url, "session": f"plain-{uuid.uuid4().hex[:8]}", "key_prefix": prefix})

    def replay(self, calls: list[Call]) -> None:
        for kind, command, _ in calls:
            if kind == "command":
                self.client.execute_command(*command)  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
            else:
                pipe = self.client.pipeline(transaction=False)  # MULTI/EXEC, if any, were recorded
                for args in command:
                    pipe.execute_command(*args)  # type: ignore[no-untyped-call]
                pipe.execute()

    def close(self) -> None:
        self.client.flushdb()
        self.client.close()
        super().close()


# -- the run -----------------------------------------------------------------------------


def _append(conversation: Conversation, messages: list[Message]) -> None:
    conversation.append(*messages)


def _ledger_step(conversation: Conversation, session: str, n: int) -> Callable[[], None]:
    return partial(_append, conversation, native_turn(session, n))


def _build_and_append(conversation: Conversation, dicts: list[dict[str, Any]]) -> None:
    conversation.append(*[Message.from_strands(d) for d in dicts])


def _built_step(conversation: Conversation, session: str, n: int) -> Callable[[], None]:
    return partial(_build_and_append, conversation, turn(session, n))


def _replay_step(engine: Engine, calls: list[Call]) -> Callable[[], None]:
    return partial(engine.replay, calls)


def _plain_step(engine: Engine, n: int) -> Callable[[], None]:
    return partial(engine.plain.write, turn("plain", n))


def measure(engine: Engine, turns: int, evict: Callable[[], None] | None = None) -> dict[str, Any]:
    """Warm up, record the twin's turns, then step the four contenders alternately.

    With ``evict``, it runs before each step, and the step's input is built after it
    (as a worker of ``scripts/bench`` builds it), so only the timed call meets cold caches.
    """
    session, built_session = "floor", "floor-built"
    twin = engine.twin.conversation(session, AGENT)
    ledger = engine.ledger.conversation(session, AGENT)
    built = engine.ledger.conversation(built_session, AGENT)
    # Turn 0 creates the conversations (a different path); not timed, not replayed.
    for conversation in (twin, engine.target.conversation(session, AGENT), ledger):
        conversation.append(*native_turn(session, 0))
    built.append(*native_turn(built_session, 0))
    recorded: list[list[Call]] = []
    for n in range(1, turns + 1):
        messages = native_turn(session, n)
        with recording() as calls:
            twin.append(*messages)
        recorded.append(calls)
    assert all(recorded), "nothing recorded: the recording driver was not used"

    samples: dict[str, tuple[list[float], list[float]]] = {k: ([], []) for k in LANES}

    def timed(name: str, run: Callable[[], None]) -> None:
        c0, w0 = time.thread_time(), time.perf_counter()
        run()
        w1, c1 = time.perf_counter(), time.thread_time()
        samples[name][0].append(c1 - c0)
        samples[name][1].append(w1 - w0)

    for n in range(1, turns + 1):
        steps: list[tuple[str, Callable[[], Callable[[], None]]]] = [
            ("ledger", partial(_ledger_step, ledger, session, n)),
            ("replayed", partial(_replay_step, engine, recorded[n - 1])),
            ("plain", partial(_plain_step, engine, n)),
            ("built", partial(_built_step, built, built_session, n)),
        ]
        shift = n % len(steps)
        order = steps[shift:] + steps[:shift]
        if evict is None:  # every input built first, then the four steps back to back
            for name, run in [(name, prepare()) for name, prepare in order]:
                timed(name, run)
            continue
        for name, prepare in order:  # evicted, then the input built, then timed
            evict()
            timed(name, prepare())
    if len(engine.target.conversation(session, AGENT).view) != len(ledger.view):
        raise AssertionError("the replay did not write what the ledger wrote")
    figures: dict[str, Any] = {"engine": engine.name, "turns": turns, "cold": evict is not None}
    for name, (cpu, wall) in samples.items():
        figures[name] = {"cpu_us": statistics.median(cpu) * 1e6, "wall_us": statistics.median(wall) * 1e6}
    for base in ("replayed", "plain"):
        figures[f"vs_{base}"] = {what: figures["ledger"][what] / figures[base][what] for what in ("cpu_us", "wall_us")}
    built, plain = figures["built"], figures["plain"]
    figures["built_vs_plain"] = {what: built[what] / plain[what] for what in ("cpu_us", "wall_us")}
    return figures


@contextmanager
def open_engine(name: str, directory: Path) -> Iterator[Engine | None]:
    with ExitStack() as stack:
        engine: Engine
        if name == "sqlite":
            engine = SQLiteEngine(directory)
        elif name == "postgres":
            first = stack.enter_context(postgres_database())
            if first is None:
                yield None
                return
            urls = [first, *_more_databases(stack, first, 2)]
            engine = PostgresEngine(urls)
        else:
            found = stack.enter_context(redis_url(cluster=False))
            if found is None:
                yield None
                return
            engine = RedisEngine(found[0])
        try:
            yield engine
        finally:
            engine.close()


def _more_databases(stack: ExitStack, url: str, count: int) -> list[str]:
    """``count`` more scratch databases on the server of ``url`` (dropped when ``stack`` closes)."""
    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    names = [f"cl_floor_{uuid.uuid4().hex[:10]}" for _ in range(count)]
    with admin.connect() as conn:
        for db in names:
            conn.execute(text(f"CREATE DATABASE {db}"))

    def drop() -> None:
        with admin.connect() as conn:
            for db in names:
                conn.execute(text(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)"))
        admin.dispose()

    stack.callback(drop)
    return [make_url(url).set(database=db).render_as_string(hide_password=False) for db in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--cold", action="store_true", help="evict the processor's caches before every step")
    parser.add_argument(
        "--cold-mb", type=int, default=64, help="the buffer --cold writes, in MB (above the last-level cache)"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON lines")
    parser.add_argument("--write-results", action="store_true", help="write its section of DETAILS.md")
    args = parser.parse_args()
    if args.cold_mb <= 0:
        parser.error(f"--cold-mb must be positive, got {args.cold_mb}")
    evict = CacheEvictor(args.cold_mb) if args.cold else None
    before = os.getloadavg()
    results = []
    with tempfile.TemporaryDirectory() as directory:
        for name in args.engines.split(","):
            with open_engine(name, Path(directory)) as engine:
                if engine is None:
                    continue
                results.append(measure(engine, args.turns, evict))
    after = os.getloadavg()
    load = load_text(before, after)
    if args.json:
        for figures in results:
            print(json.dumps({**figures, "load_before": before[0], "load_after": after[0]}))
        return
    lines = table(results, args.turns, load, f"{args.cold_mb} MB" if args.cold else None)
    print("\n".join(lines))
    if args.write_results:
        title = "## Append against the driver's floor (`benchmarks/floor.py`)"
        if args.cold:
            title = "## Append against the driver's floor, cold caches (`benchmarks/floor.py --cold`)"
        replace_section(title, [*lines, "", versions()])


def table(results: list[dict[str, Any]], turns: int, load: str, cold: str | None = None) -> list[str]:
    """The Markdown table of the figures: medians and the ratios the targets name (``cold``: the eviction's buffer)."""
    caches = (
        f"the caches evicted before every step (a {cold} buffer written), each step's input built after"
        if cold
        else "each with the caches the previous steps left"
    )
    lines = [
        f"One turn of four messages, medians of {turns} turns per contender, stepped alternately in one "
        f"process, {caches}; CPU is the client thread's ({load}). Targets: ledger within 1.5x of its "
        "statements replayed on the bare driver, and within 2x of the plain driver. The built "
        "lane also builds the turn's messages from the host's dicts inside the timer (no target).",
        "",
        "| engine | ledger CPU us | replayed | plain | ledger/replayed CPU | wall | ledger/plain CPU | wall "
        "| built CPU us | built/plain CPU |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for f in results:
        r, p, b = f["vs_replayed"], f["vs_plain"], f["built_vs_plain"]
        lines.append(
            f"| {f['engine']} | {f['ledger']['cpu_us']:.0f} | {f['replayed']['cpu_us']:.0f} | "
            f"{f['plain']['cpu_us']:.0f} | {r['cpu_us']:.2f}x | {r['wall_us']:.2f}x | "
            f"{p['cpu_us']:.2f}x | {p['wall_us']:.2f}x | {f['built']['cpu_us']:.0f} | {b['cpu_us']:.2f}x |"
        )
    return lines


if __name__ == "__main__":
    main()
