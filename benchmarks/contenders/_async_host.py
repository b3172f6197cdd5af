"""contextledger behind an async host interface on SQLite: what its contenders share.

A host's own storage object (Pydantic AI's ``LedgerHistory``, the OpenAI Agents SDK's
``LedgerSession``) over an :class:`~contextledger.aio.AsyncLedger`, driven from one event
loop of the worker: a turn is one call that stores the turn's host messages (one commit),
a restore one call that reads the active view back as host messages. A subclass names
the host object, the turn, and the two calls.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from typing import Any

from _protocol import Contender, NotApplicable, host_workload, start, stop, timed_read
from contenders._files import stored_bytes
from contextledger.aio import AsyncLedger


class AsyncHostContender(Contender):
    """The append, restore_wide and storage workloads of one host interface on a SQLite ledger."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ledger: AsyncLedger | None = None
        self.host: Any = None
        self.workload = ""
        self.session = ""
        self.path = ""

    @abstractmethod
    def open(self, ledger: AsyncLedger, session: str) -> Any:
        """The host's storage object for ``session``."""

    @abstractmethod
    def turn(self, session: str, n: int) -> Any:
        """Turn ``n`` in the host's own types (built outside the timer)."""

    @abstractmethod
    async def add(self, host: Any, turn: Any) -> None:
        """Store ``turn`` through ``host``."""

    @abstractmethod
    async def read(self, ledger: AsyncLedger, host: Any) -> Any:
        """The active view back, as the host reads it."""

    def setup(self, workload: str, params: dict[str, Any]) -> dict[str, Any]:
        self.session, self.path = host_workload(workload, params)
        self.workload = workload
        self.ledger = self.loop.run_until_complete(AsyncLedger.connect(str(params["url"])))
        self.host = self.open(self.ledger, self.session)
        count = int(params["entries"]) // 4 if workload == "restore_wide" else int(params.get("turns", 0))
        for n in range(count):
            self.loop.run_until_complete(self.add(self.host, self.turn(self.session, n)))
        return {}

    def step(self, n: int) -> float:
        assert self.ledger is not None
        if self.workload == "append":
            turn = self.turn(self.session, n)
            t0 = start()
            self.loop.run_until_complete(self.add(self.host, turn))
            return stop(t0)
        if self.workload == "restore_wide":
            ledger = self.ledger
            return timed_read(lambda: self.loop.run_until_complete(self.read(ledger, self.host)))
        raise NotApplicable(f"nothing to time in {self.workload}")

    def measure(self) -> Any:
        return stored_bytes(self.workload, self.close, self.path)

    def close(self) -> None:
        if self.ledger is not None:
            self.loop.run_until_complete(self.ledger.close())
            self.ledger = None
