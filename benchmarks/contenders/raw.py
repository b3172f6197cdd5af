"""The physical limit: the same writes and reads through the bare drivers, JSON included.

One turn is one durable commit of a version bump plus four message rows (sqlite3: one
transaction of an ``UPDATE`` and an ``executemany``; psycopg: one data-modifying CTE in
autocommit, one round trip; redis-py: one ``MULTI``/``EXEC`` pipeline). A restore reads
the active rows in order and decodes their JSON. No validation, no ids but a uuid, no
ledger of reductions: what any store must do at least.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from typing import Any

from _protocol import Contender, NotApplicable, start, stop, turn
from contenders._files import tree_bytes

_SQL_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS raw_conv (session_id TEXT PRIMARY KEY, version BIGINT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS raw_msg (session_id TEXT NOT NULL, seq BIGINT NOT NULL, message_id TEXT NOT NULL, "
    "role TEXT NOT NULL, content {json} NOT NULL, status TEXT NOT NULL, PRIMARY KEY (session_id, seq))",
    "CREATE INDEX IF NOT EXISTS raw_msg_active ON raw_msg (session_id, status, seq)",
)
_PG_APPEND = (
    "WITH v AS (UPDATE raw_conv SET version = version + 1 WHERE session_id = %s RETURNING session_id) "
    "INSERT INTO raw_msg (session_id, seq, message_id, role, content, status) "
    "SELECT v.session_id, t.s, t.i, t.r, t.c::json, 'active' FROM v, "
    "unnest(%s::bigint[], %s::text[], %s::text[], %s::text[]) AS t(s, i, r, c)"
)
_SELECT_ACTIVE = "SELECT role, content FROM raw_msg WHERE session_id = {p} AND status = 'active' ORDER BY seq"


class Raw(Contender):
    """Base of the three drivers: the workloads, over ``write``/``read``/``load``."""

    def __init__(self) -> None:
        self.workload = ""
        self.session = ""
        self.seq = 0

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        self.workload = workload
        self.session = str(params["session"])
        self.connect(params)
        if workload in ("append", "concurrency"):
            self.seq = self.create()
            return {}
        if workload in ("restore_window", "restore_wide"):
            total, active = int(params["entries"]), int(params["active"])
            if self.count_active() != active:
                self.create()
                self.load(total, active)
            return {"entries": total, "active": self.count_active()}
        if workload == "storage":
            self.seq = self.create()
            for n in range(int(params["turns"])):
                self.write(turn(self.session, n))
            return {}
        raise NotApplicable(f"no {workload} workload")

    def step(self, n: int) -> float:
        if self.workload in ("append", "concurrency"):
            messages = turn(self.session, n)
            t0 = start()
            self.write(messages)
            return stop(t0)
        if self.workload in ("restore_window", "restore_wide"):
            t0 = start()
            messages = self.read()
            elapsed = stop(t0)
            assert messages
            return elapsed
        raise NotApplicable(f"nothing to time in {self.workload}")

    def load(self, total: int, active: int) -> None:
        batch: list[dict[str, Any]] = []
        for n in range(total // 4):
            batch.extend(turn(self.session, n))
            if len(batch) >= 10_000:
                self.write(batch)
                batch = []
        if batch:
            self.write(batch)
        self.evict_before(total - active)

    def rows(self, messages: list[dict[str, Any]]) -> list[tuple[int, str, str, str]]:
        out = [(self.seq + i, uuid.uuid4().hex, m["role"], json.dumps(m["content"])) for i, m in enumerate(messages)]
        self.seq += len(messages)
        return out

    # What each driver implements.
    def connect(self, params: dict[str, Any]) -> None:
        raise NotImplementedError

    def create(self) -> int:
        """Create the conversation if missing; return its next seq."""
        raise NotImplementedError

    def write(self, messages: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def read(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def count_active(self) -> int:
        raise NotImplementedError

    def evict_before(self, seq: int) -> None:
        raise NotImplementedError


class RawSQLite(Raw):
    """``sqlite3``: WAL, ``synchronous=NORMAL``, one transaction per turn."""

    def __init__(self) -> None:
        super().__init__()
        self.conn: sqlite3.Connection | None = None
        self.path = ""

    def connect(self, params: dict[str, Any]) -> None:
        self.path = str(params["path"])
        self.conn = conn = sqlite3.connect(self.path, isolation_level=None)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        for statement in _SQL_SCHEMA:
            conn.execute(statement.format(json="TEXT"))

    def create(self) -> int:
        assert self.conn is not None
        self.conn.execute("INSERT OR IGNORE INTO raw_conv VALUES (?, 0)", (self.session,))
        (seq,) = self.conn.execute("SELECT count(*) FROM raw_msg WHERE session_id = ?", (self.session,)).fetchone()
        return int(seq)

    def write(self, messages: list[dict[str, Any]]) -> None:
        conn = self.conn
        assert conn is not None
        rows = [(self.session, s, i, r, c, "active") for s, i, r, c in self.rows(messages)]
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE raw_conv SET version = version + 1 WHERE session_id = ?", (self.session,))
        conn.executemany("INSERT INTO raw_msg VALUES (?, ?, ?, ?, ?, ?)", rows)
        conn.execute("COMMIT")

    def read(self) -> list[dict[str, Any]]:
        assert self.conn is not None
        cursor = self.conn.execute(_SELECT_ACTIVE.format(p="?"), (self.session,))
        return [{"role": role, "content": json.loads(content)} for role, content in cursor]

    def count_active(self) -> int:
        assert self.conn is not None
        query = "SELECT count(*) FROM raw_msg WHERE session_id = ? AND status = 'active'"
        return int(self.conn.execute(query, (self.session,)).fetchone()[0])

    def evict_before(self, seq: int) -> None:
        assert self.conn is not None
        self.conn.execute("UPDATE raw_msg SET status = 'evicted' WHERE session_id = ? AND seq < ?", (self.session, seq))

    def measure(self) -> Any:
        if self.workload != "storage":
            raise NotApplicable("bytes are counted on SQLite files")
        self.close()
        return tree_bytes(self.path)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class RawPostgres(Raw):
    """``psycopg`` 3: one statement per turn in autocommit (one round trip)."""

    def __init__(self) -> None:
        super().__init__()
        self.conn: Any = None

    def connect(self, params: dict[str, Any]) -> None:
        import psycopg

        url = str(params["url"]).replace("postgresql+psycopg://", "postgresql://")
        self.conn = conn = psycopg.connect(url, autocommit=True)
        for statement in _SQL_SCHEMA:
            conn.execute(statement.format(json="JSON"))

    def create(self) -> int:
        self.conn.execute("INSERT INTO raw_conv VALUES (%s, 0) ON CONFLICT (session_id) DO NOTHING", (self.session,))
        row = self.conn.execute("SELECT count(*) FROM raw_msg WHERE session_id = %s", (self.session,)).fetchone()
        return int(row[0])

    def write(self, messages: list[dict[str, Any]]) -> None:
        seqs, ids, roles, contents = zip(*self.rows(messages), strict=True)
        self.conn.execute(_PG_APPEND, (self.session, list(seqs), list(ids), list(roles), list(contents)))

    def read(self) -> list[dict[str, Any]]:
        # psycopg decodes JSON columns itself (json.loads), as a store must.
        cursor = self.conn.execute(_SELECT_ACTIVE.format(p="%s"), (self.session,))
        return [{"role": role, "content": content} for role, content in cursor]

    def count_active(self) -> int:
        query = "SELECT count(*) FROM raw_msg WHERE session_id = %s AND status = 'active'"
        return int(self.conn.execute(query, (self.session,)).fetchone()[0])

    def evict_before(self, seq: int) -> None:
        self.conn.execute(
            "UPDATE raw_msg SET status = 'evicted' WHERE session_id = %s AND seq < %s", (self.session, seq)
        )
        self.conn.execute("VACUUM ANALYZE raw_msg")

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class RawRedis(Raw):
    """redis-py: one ``MULTI``/``EXEC`` pipeline per turn (one round trip).

    The active window is a list; evicted messages move to a second list, so a restore
    is one ``LRANGE`` of the window.
    """

    def __init__(self) -> None:
        super().__init__()
        self.client: Any = None

    def connect(self, params: dict[str, Any]) -> None:
        from redis import Redis

        self.client = Redis.from_url(str(params["url"]))
        prefix = str(params.get("key_prefix", "raw"))
        self.keys = (f"{prefix}:{{{self.session}}}:conv", f"{prefix}:{{{self.session}}}:active")

    def create(self) -> int:
        return int(self.client.llen(self.keys[1]))

    def write(self, messages: list[dict[str, Any]]) -> None:
        conv, active = self.keys
        pipe = self.client.pipeline(transaction=True)
        pipe.hincrby(conv, "version", 1)
        pipe.rpush(active, *(json.dumps({"id": i, "role": r, "content": c}) for _, i, r, c in self.rows(messages)))
        pipe.execute()

    def read(self) -> list[dict[str, Any]]:
        conv, active = self.keys
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(conv, "version")
        pipe.lrange(active, 0, -1)
        _, items = pipe.execute()
        return [json.loads(item) for item in items]

    def count_active(self) -> int:
        return int(self.client.llen(self.keys[1]))

    def evict_before(self, seq: int) -> None:
        # Keep the window in the active list; the evicted part stays stored beside it.
        self.client.rename(self.keys[1], self.keys[1] + ":all")
        items = self.client.lrange(self.keys[1] + ":all", seq, -1)
        self.client.ltrim(self.keys[1] + ":all", 0, seq - 1)
        if items:
            self.client.rpush(self.keys[1], *items)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
