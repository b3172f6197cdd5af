"""contextledger via its async API: AsyncLedger, AsyncConversation (each call one hop to a worker thread).

The worker keeps one event loop; each repetition runs one coroutine on it and times
the library call inside the coroutine, so starting the loop is not in the figures.
The data a restore reads is loaded untimed through the sync API (the same tables and
keys: both APIs share one source).
"""

from __future__ import annotations

import asyncio
from typing import Any

from _protocol import Contender, NotApplicable, start, stop
from contenders.cl import AGENT, bulk_load, native_turn
from contextledger import Ledger
from contextledger.aio import AsyncConversation, AsyncLedger


class AsyncContextLedger(Contender):
    """contextledger's async API on the store at the URL the harness gives."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ledger: AsyncLedger | None = None
        self.conversation: AsyncConversation | None = None
        self.workload = ""
        self.session = ""

    @staticmethod
    def _options(url: str, params: dict[str, Any]) -> dict[str, Any]:
        # A restore reads the store: not the view the ledger's last open of it shared.
        options: dict[str, Any] = {"shared_views": 0}
        if url.startswith("postgres"):
            options["auto_upgrade"] = True
        if url.startswith("redis"):
            options["key_prefix"] = str(params.get("key_prefix", "clbench"))
        return options

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        if workload not in ("append", "restore_window", "restore_wide"):
            raise NotApplicable(f"no {workload} workload for the async API")
        self.workload = workload
        self.session = str(params["session"])
        url = str(params["url"])
        options = self._options(url, params)
        facts: dict[str, Any] = {}
        if workload != "append":
            total, active = int(params["entries"]), int(params["active"])
            with Ledger.connect(url, **options) as loader:  # untimed: a file from an earlier run is reused
                conversation = loader.conversation(self.session, AGENT)
                if len(conversation.view) != active:
                    bulk_load(conversation, total=total, active=active)
            facts = {"entries": total, "active": active}
        self.ledger = self.loop.run_until_complete(AsyncLedger.connect(url, **options))
        if workload == "append":
            self.conversation = self.loop.run_until_complete(self.ledger.conversation(self.session, AGENT))
        return facts

    def step(self, n: int) -> float:
        return self.loop.run_until_complete(self._step(n))

    async def _step(self, n: int) -> float:
        ledger = self.ledger
        assert ledger is not None
        if self.workload == "append":
            assert self.conversation is not None
            messages = native_turn(self.session, n)
            t0 = start()
            await self.conversation.append(*messages)
            return stop(t0)
        t0 = start()
        conversation = await ledger.conversation(self.session, AGENT)
        messages = conversation.messages
        elapsed = stop(t0)
        assert messages
        return elapsed

    def close(self) -> None:
        if self.ledger is not None:
            self.loop.run_until_complete(self.ledger.close())
            self.ledger = None
        self.loop.close()
