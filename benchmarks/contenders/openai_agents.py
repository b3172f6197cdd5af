"""OpenAI Agents SDK sessions: ``SQLiteSession``, ``SQLAlchemySession`` and ``RedisSession``.

All are async; each worker runs one event loop and times ``add_items`` (a turn's four
items in one call, one commit) and ``get_items`` (read from the database each time). Items are
Responses API input items: the user's message, a ``function_call``, its
``function_call_output`` and the assistant's message.

Durability (``params["durability"]``): ``"equal"`` runs SQLite at the run's setting --
both SQLite sessions put the file in WAL themselves, and ``synchronous=NORMAL`` is added
on each connection they open (``SQLiteSession`` through its connection-configuring hook,
``SQLAlchemySession`` through a connect event on the engine it is given); ``"default"``
leaves each library exactly as it configures itself (WAL, SQLite's default
``synchronous=FULL``). On PostgreSQL and Redis the server's settings apply; the libraries
set none.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from typing import Any

from agents import SQLiteSession

from _protocol import Contender, NotApplicable, start, stop, text_of, timed_read, tool_result, tool_use, turn
from contenders._files import stored_bytes


def items_of(session: str, n: int) -> list[Any]:
    """Turn ``n`` as Responses API input items."""
    user, call, result, answer = turn(session, n)
    use, res = tool_use(call), tool_result(result)
    assert use is not None and res is not None
    return [
        {"role": "user", "content": text_of(user)},
        {
            "type": "function_call",
            "call_id": use["toolUseId"],
            "name": use["name"],
            "arguments": json.dumps(use["input"]),
        },
        {"type": "function_call_output", "call_id": res["toolUseId"], "output": res["content"][0]["text"]},
        {"role": "assistant", "content": text_of(answer)},
    ]


class _NormalSync(SQLiteSession):
    """``SQLiteSession`` with ``synchronous=NORMAL`` on its connections (it sets WAL itself)."""

    @staticmethod
    def _configure_connection(conn: sqlite3.Connection) -> None:
        SQLiteSession._configure_connection(conn)
        conn.execute("PRAGMA synchronous = NORMAL")


class _Session(Contender):
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.session: Any = None
        self.workload = ""
        self.session_id = ""
        self.path = ""
        self.url = ""
        self.equal = True

    def open(self) -> Any:
        raise NotImplementedError

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        if workload not in ("append", "restore_wide", "storage"):
            raise NotApplicable(f"no {workload} workload")
        self.workload = workload
        self.session_id = str(params["session"])
        self.path = str(params.get("path", ""))
        self.url = str(params.get("url", ""))
        self.equal = params.get("durability", "equal") == "equal"
        self.session = self.open()
        count = int(params["entries"]) // 4 if workload == "restore_wide" else int(params.get("turns", 0))
        for n in range(count):
            self.loop.run_until_complete(self.session.add_items(items_of(self.session_id, n)))
        return {}

    def step(self, n: int) -> float:
        if self.workload == "append":
            items = items_of(self.session_id, n)
            t0 = start()
            self.loop.run_until_complete(self.session.add_items(items))
            return stop(t0)
        if self.workload == "restore_wide":
            return timed_read(lambda: self.loop.run_until_complete(self.session.get_items()))
        raise NotApplicable(f"nothing to time in {self.workload}")

    def measure(self) -> Any:
        return stored_bytes(self.workload, self.close, self.path)


class SQLiteSessionContender(_Session):
    """``agents.SQLiteSession`` on a file."""

    def open(self) -> Any:
        return (_NormalSync if self.equal else SQLiteSession)(self.session_id, self.path)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


class SQLAlchemySessionContender(_Session):
    """``agents.extensions.memory.SQLAlchemySession`` on SQLite (aiosqlite) or PostgreSQL (psycopg async)."""

    def __init__(self) -> None:
        super().__init__()
        self.engine: Any = None

    def open(self) -> Any:
        from agents.extensions.memory import SQLAlchemySession
        from sqlalchemy import event
        from sqlalchemy.ext.asyncio import create_async_engine

        if self.url.startswith("postgresql"):
            if self.engine is None:
                self.engine = create_async_engine("postgresql+psycopg" + self.url[self.url.index(":") :])
            return SQLAlchemySession(self.session_id, engine=self.engine, create_tables=True)
        if self.engine is None and not self.equal:
            # Its own way from a URL: the engine it builds, as it configures it.
            session = SQLAlchemySession.from_url(
                self.session_id, url=f"sqlite+aiosqlite:///{self.path}", create_tables=True
            )
            self.engine = session.engine
            return session
        if self.engine is None:
            self.engine = create_async_engine(f"sqlite+aiosqlite:///{self.path}")

            @event.listens_for(self.engine.sync_engine, "connect")
            def _normal(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = NORMAL")
                cursor.close()

        return SQLAlchemySession(self.session_id, engine=self.engine, create_tables=True)

    def close(self) -> None:
        if self.engine is not None:
            self.loop.run_until_complete(self.engine.dispose())
            self.engine = None


class RedisSessionContender(_Session):
    """``agents.extensions.memory.redis_session.RedisSession`` on the run's Redis server."""

    def open(self) -> Any:
        from agents.extensions.memory.redis_session import RedisSession

        return RedisSession.from_url(self.session_id, url=self.url, key_prefix=f"oai:{time.time_ns()}")

    def close(self) -> None:
        if self.session is not None:
            self.loop.run_until_complete(self.session.close())
            self.session = None
