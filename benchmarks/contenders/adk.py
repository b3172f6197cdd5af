"""Google ADK's own session services -- ``DatabaseSessionService`` on SQLite (aiosqlite), ``InMemorySessionService``.

A turn is four events appended with ``append_event`` (the user's content, the model's
function call, the function response and the model's answer), each its own commit as
ADK makes it; a restore is ``get_session`` (all its events). The database service is
given an engine with WAL and ``synchronous=NORMAL`` (plus the ``foreign_keys`` pragma
ADK sets on its own engines), as every SQLite contender, when ``params["durability"]`` is
``"equal"``; with ``"default"`` it builds its own engine from the URL, as it configures it. contextledger's
``LedgerSessionService`` runs the same steps in ``contenders/cl_adk.py``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from google.adk.events import Event
from google.adk.sessions import DatabaseSessionService, InMemorySessionService
from google.genai import types
from sqlalchemy import event
from sqlalchemy.ext.asyncio import create_async_engine

from _protocol import Contender, NotApplicable, start, stop, text_of, tool_result, tool_use, turn
from contenders._files import tree_bytes

APP, USER = "bench", "user"


def events_of(session: str, n: int) -> list[Event]:
    """Turn ``n`` as ADK events."""
    user, call, result, answer = turn(session, n)
    use, res = tool_use(call), tool_result(result)
    assert use is not None and res is not None
    invocation = f"inv-{n}"
    call_part = types.Part(function_call=types.FunctionCall(id=use["toolUseId"], name=use["name"], args=use["input"]))
    response_part = types.Part(
        function_response=types.FunctionResponse(
            id=res["toolUseId"], name=use["name"], response={"result": res["content"][0]["text"]}
        )
    )
    return [
        Event(
            invocation_id=invocation,
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=text_of(user))]),
        ),
        Event(invocation_id=invocation, author="agent", content=types.Content(role="model", parts=[call_part])),
        Event(invocation_id=invocation, author="agent", content=types.Content(role="user", parts=[response_part])),
        Event(
            invocation_id=invocation,
            author="agent",
            content=types.Content(role="model", parts=[types.Part(text=text_of(answer))]),
        ),
    ]


class SessionServiceContender(Contender):
    """An ADK session service through ADK's public API: one turn is four ``append_event``; a restore ``get_session``."""

    workloads: tuple[str, ...] = ("append", "restore_wide", "storage")

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.service: Any = None
        self.session: Any = None
        self.workload = ""
        self.session_id = ""
        self.path = ""

    def make(self, params: dict[str, Any]) -> Any:
        """The service the workload runs on."""
        raise NotImplementedError

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        if workload not in self.workloads:
            raise NotApplicable(f"no {workload} workload")
        self.workload = workload
        self.session_id = str(params["session"])
        self.path = str(params.get("path", ""))
        self.service = self.make(params)
        self.session = self.run(self.service.create_session(app_name=APP, user_id=USER, session_id=self.session_id))
        count = int(params["entries"]) // 4 if workload == "restore_wide" else int(params.get("turns", 0))
        for n in range(count):
            for e in events_of(self.session_id, n):
                self.run(self.service.append_event(self.session, e))
        return {}

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def step(self, n: int) -> float:
        if self.workload == "append":
            events = events_of(self.session_id, n)
            t0 = start()
            for e in events:
                self.run(self.service.append_event(self.session, e))
            return stop(t0)
        if self.workload == "restore_wide":
            t0 = start()
            session = self.run(self.service.get_session(app_name=APP, user_id=USER, session_id=self.session_id))
            elapsed = stop(t0)
            assert session is not None and session.events
            return elapsed
        raise NotApplicable(f"nothing to time in {self.workload}")

    def measure(self) -> Any:
        if self.workload != "storage" or not self.path:
            raise NotApplicable("bytes are counted on the storage workload, on SQLite files")
        self.close()
        return tree_bytes(self.path)

    def close(self) -> None:
        pass


class DatabaseSessionContender(SessionServiceContender):
    """``DatabaseSessionService`` on a SQLite file."""

    engine: Any = None

    def make(self, params: dict[str, Any]) -> Any:
        if params.get("durability", "equal") != "equal":
            return DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{params['path']}")
        self.engine = create_async_engine(f"sqlite+aiosqlite:///{params['path']}")

        @event.listens_for(self.engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.close()

        return DatabaseSessionService(db_engine=self.engine)

    def close(self) -> None:
        if self.engine is not None:
            self.run(self.engine.dispose())
            self.engine = None


class InMemorySessionContender(SessionServiceContender):
    """``InMemorySessionService``: ADK's own baseline (nothing is written anywhere)."""

    workloads = ("append", "restore_wide")

    def make(self, params: dict[str, Any]) -> Any:
        return InMemorySessionService()
