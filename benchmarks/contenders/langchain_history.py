"""LangChain's ``SQLChatMessageHistory`` on SQLite (SQLAlchemy), through its public API.

A turn is ``add_messages`` of four messages (one commit); a restore is ``.messages``.
With ``params["durability"] == "equal"`` the engine it is given runs SQLite in WAL with
``synchronous=NORMAL``, as every SQLite contender; with ``"default"`` it gets a plain
engine (SQLite's rollback journal, ``synchronous=FULL``), what ``connection_string`` builds.
"""

from __future__ import annotations

from typing import Any

from langchain_community.chat_message_histories import SQLChatMessageHistory
from sqlalchemy import create_engine, event

from _protocol import Contender, NotApplicable, host_workload, start, stop, timed_read
from contenders._files import stored_bytes
from contenders._lc_turns import messages_of


class SQLChatHistoryContender(Contender):
    """``SQLChatMessageHistory`` on a SQLite file."""

    def __init__(self) -> None:
        self.engine: Any = None
        self.history: Any = None
        self.workload = ""
        self.session = ""
        self.path = ""

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        self.session, self.path = host_workload(workload, params)
        self.workload = workload
        self.engine = create_engine(f"sqlite:///{self.path}")
        if params.get("durability", "equal") == "equal":

            @event.listens_for(self.engine, "connect")
            def _pragmas(dbapi_connection: Any, _record: Any) -> None:
                cursor = dbapi_connection.cursor()
                cursor.execute("PRAGMA journal_mode = WAL")
                cursor.execute("PRAGMA synchronous = NORMAL")
                cursor.close()

        self.history = SQLChatMessageHistory(session_id=self.session, connection=self.engine)
        count = int(params["entries"]) // 4 if workload == "restore_wide" else int(params.get("turns", 0))
        for n in range(count):
            self.history.add_messages(messages_of(self.session, n))
        return {}

    def step(self, n: int) -> float:
        if self.workload == "append":
            messages = messages_of(self.session, n)
            t0 = start()
            self.history.add_messages(messages)
            return stop(t0)
        if self.workload == "restore_wide":
            history = self.history
            return timed_read(lambda: history.messages)
        raise NotApplicable(f"nothing to time in {self.workload}")

    def measure(self) -> Any:
        return stored_bytes(self.workload, self.close, self.path)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None
