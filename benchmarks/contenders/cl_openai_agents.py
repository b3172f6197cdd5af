"""contextledger through the OpenAI Agents SDK's ``Session`` protocol: ``LedgerSession`` on SQLite.

The same items and calls as ``openai_agents`` (``SQLiteSession``): a turn is
``add_items`` of four Responses input items (one commit); a read back is ``get_items()``
on the same open session, as each run of the SDK's ``Runner`` calls it. The session reads
the conversation's state from the database and, when the stored version moved, the
active view; then it renders every item. The peer reads its table each time.
"""

from __future__ import annotations

from typing import Any

from contenders._async_host import AsyncHostContender
from contenders.openai_agents import items_of
from contextledger.aio import AsyncLedger
from contextledger.integrations.openai_agents import LedgerSession


class LedgerSessionContender(AsyncHostContender):
    """``LedgerSession`` on a SQLite ledger (the async API, as the SDK awaits it)."""

    def open(self, ledger: AsyncLedger, session: str) -> LedgerSession:
        return LedgerSession(session, ledger=ledger)

    def turn(self, session: str, n: int) -> list[Any]:
        return items_of(session, n)

    async def add(self, host: Any, turn: Any) -> None:
        await host.add_items(turn)

    async def read(self, ledger: AsyncLedger, host: Any) -> Any:
        return await host.get_items()  # the same open session (see the module's docstring)
