"""contextledger through the OpenAI Agents SDK's ``Session`` protocol: ``LedgerSession`` on SQLite.

The same items and calls as ``openai_agents`` (``SQLiteSession``): a turn is
``add_items`` of four Responses input items (one commit); a restore is ``get_items()``
(it reads the active view from the database and renders every item, as the peer reads
its table).
"""

from __future__ import annotations

import asyncio
from typing import Any

from _protocol import Contender, NotApplicable, start, stop
from contenders._files import tree_bytes
from contenders.openai_agents import items_of
from contextledger.aio import AsyncLedger
from contextledger.integrations.openai_agents import LedgerSession


class LedgerSessionContender(Contender):
    """``LedgerSession`` on a SQLite ledger (the async API, as the SDK awaits it)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ledger: AsyncLedger | None = None
        self.session: LedgerSession | None = None
        self.workload = ""
        self.session_id = ""
        self.path = ""

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        if workload not in ("append", "restore_wide", "storage"):
            raise NotApplicable(f"no {workload} workload")
        self.workload = workload
        self.session_id = str(params["session"])
        self.path = str(params["path"])
        self.ledger = self.loop.run_until_complete(AsyncLedger.connect(str(params["url"])))
        self.session = LedgerSession(self.session_id, ledger=self.ledger)
        count = int(params["entries"]) // 4 if workload == "restore_wide" else int(params.get("turns", 0))
        for n in range(count):
            self.loop.run_until_complete(self.session.add_items(items_of(self.session_id, n)))
        return {}

    def step(self, n: int) -> float:
        assert self.session is not None
        if self.workload == "append":
            items = items_of(self.session_id, n)
            t0 = start()
            self.loop.run_until_complete(self.session.add_items(items))
            return stop(t0)
        if self.workload == "restore_wide":
            t0 = start()
            items = self.loop.run_until_complete(self.session.get_items())
            elapsed = stop(t0)
            assert items
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
