"""contextledger through its Pydantic AI storage: ``LedgerHistory.extend`` and ``messages()`` on SQLite.

The same turns as ``pydantic_ai_json`` (Pydantic AI's recommended JSON rows): a turn is
``extend(result.new_messages())`` of four messages (one commit); a restore is
``messages()`` of a new history object (it reads the active view and rebuilds every
message with the adapter, the unchanged ones in one call).
"""

from __future__ import annotations

import asyncio
from typing import Any

from _protocol import Contender, NotApplicable, start, stop
from contenders._files import tree_bytes
from contenders._pai_turns import messages_of
from contextledger.aio import AsyncLedger
from contextledger.integrations.pydantic_ai import LedgerHistory


class LedgerHistoryContender(Contender):
    """``LedgerHistory`` on a SQLite ledger (the async API, aiosqlite)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ledger: AsyncLedger | None = None
        self.history: LedgerHistory | None = None
        self.workload = ""
        self.session = ""
        self.path = ""

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        if workload not in ("append", "restore_wide", "storage"):
            raise NotApplicable(f"no {workload} workload")
        self.workload = workload
        self.session = str(params["session"])
        self.path = str(params["path"])
        self.ledger = self.loop.run_until_complete(AsyncLedger.connect(str(params["url"])))
        self.history = LedgerHistory(self.session, ledger=self.ledger)
        count = int(params["entries"]) // 4 if workload == "restore_wide" else int(params.get("turns", 0))
        for n in range(count):
            self.loop.run_until_complete(self.history.extend(messages_of(self.session, n)))
        return {}

    def step(self, n: int) -> float:
        assert self.history is not None
        if self.workload == "append":
            messages = messages_of(self.session, n)
            t0 = start()
            self.loop.run_until_complete(self.history.extend(messages))
            return stop(t0)
        if self.workload == "restore_wide":
            t0 = start()
            # A history object of its own, as a new process has: nothing rendered yet.
            messages = self.loop.run_until_complete(LedgerHistory(self.session, ledger=self.ledger).messages())
            elapsed = stop(t0)
            assert messages
            return elapsed
        raise NotApplicable(f"nothing to time in {self.workload}")

    def measure(self) -> Any:
        if self.workload != "storage":
            raise NotApplicable("bytes are counted on the storage workload")
        self.close()
        return tree_bytes(self.path)

    def close(self) -> None:
        if self.ledger is not None:
            self.loop.run_until_complete(self.ledger.close())
            self.ledger = None
