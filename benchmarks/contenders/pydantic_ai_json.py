"""Pydantic AI's recommended persistence: each run's ``new_messages_json()`` as a row, read back with the adapter.

Pydantic AI leaves storage to the application and documents serialising messages with
``ModelMessagesTypeAdapter`` (``result.new_messages_json()`` / ``validate_json``); its chat
application example keeps one row per run in SQLite and loads the conversation by
validating every row. This contender does exactly that, with the standard library's
``sqlite3`` in WAL and ``synchronous=NORMAL``, as every SQLite contender: a turn is one
``INSERT`` of the turn's four messages as JSON (one commit); a restore reads the rows in
order and validates each.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter

from _protocol import Contender, NotApplicable, host_workload, start, stop, timed_read
from contenders._files import stored_bytes
from contenders._pai_turns import messages_of


class PydanticAIJsonRows(Contender):
    """One JSON row per run in a SQLite table."""

    def __init__(self) -> None:
        self.db: sqlite3.Connection | None = None
        self.workload = ""
        self.session = ""
        self.path = ""

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        self.session, self.path = host_workload(workload, params)
        self.workload = workload
        self.db = sqlite3.connect(self.path, isolation_level=None)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS messages"
            " (id INTEGER PRIMARY KEY, session TEXT NOT NULL, message_list TEXT NOT NULL)"
        )
        self.db.execute("CREATE INDEX IF NOT EXISTS messages_session ON messages (session, id)")
        count = int(params["entries"]) // 4 if workload == "restore_wide" else int(params.get("turns", 0))
        for n in range(count):
            self._add(ModelMessagesTypeAdapter.dump_json(messages_of(self.session, n)))
        return {}

    def _add(self, payload: bytes) -> None:
        assert self.db is not None
        self.db.execute("BEGIN")
        self.db.execute("INSERT INTO messages (session, message_list) VALUES (?, ?)", (self.session, payload))
        self.db.execute("COMMIT")

    def step(self, n: int) -> float:
        assert self.db is not None
        if self.workload == "append":
            messages = messages_of(self.session, n)
            t0 = start()
            self._add(ModelMessagesTypeAdapter.dump_json(messages))  # what result.new_messages_json() gives
            return stop(t0)
        if self.workload == "restore_wide":
            return timed_read(self._read)
        raise NotApplicable(f"nothing to time in {self.workload}")

    def _read(self) -> list[Any]:
        """Every message of the session: each run's row, validated by the host's adapter."""
        assert self.db is not None
        rows = self.db.execute("SELECT message_list FROM messages WHERE session = ? ORDER BY id", (self.session,))
        return [m for (payload,) in rows for m in ModelMessagesTypeAdapter.validate_json(payload)]

    def measure(self) -> Any:
        return stored_bytes(self.workload, self.close, self.path)

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
